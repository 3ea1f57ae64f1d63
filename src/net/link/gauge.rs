//! How far each link's messages got, shared between the sending side and the link's task:
//! what a member waits on before its process ends ([`LinkGauges::drain`]).
//!
//! A link keeps every message until the peer acknowledges it, across resets; but a process
//! that ends takes its retransmission buffer with it. So a member whose run is over waits,
//! before it exits, until each peer acknowledged what it sent (up to the bye), or cannot:
//! the peer is unreachable, restarted, or the link was lost. And since the peer waits the
//! same way for this member's acknowledgements, which otherwise ride the next heartbeat, a
//! drain first asks every link to acknowledge what it delivered and to write it out.

use crate::id::ProcessId;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;

/// One link's counters. The sending side counts what it hands the link; the link's task
/// publishes what is settled, whether the peer is unreachable, and which acknowledgement
/// requests it wrote out.
#[derive(Debug, Default)]
pub(crate) struct Gauge {
    /// Messages handed to the link (the sending side counts them).
    handed: AtomicU64,
    /// Of those, how many the link took and settled: acknowledged by the peer, or dropped
    /// for good (the peer restarted, or the link was lost).
    settled: AtomicU64,
    /// The peer is unreachable now.
    unreachable: AtomicBool,
    /// The link is connected now.
    connected: AtomicBool,
    /// The link's task ended (lost, or the net stopped): nothing more settles.
    ended: AtomicBool,
    /// The last acknowledgement request made, and the last one written out.
    flush_asked: AtomicU64,
    flush_written: AtomicU64,
    /// Wakes the link's task for an acknowledgement request.
    flush: Notify,
    /// The incarnation of the process the link's session is with, once it met one: a
    /// message handed after this reads a new incarnation goes to that process (the link
    /// started afresh with it before publishing it).
    incarnation: Mutex<Option<u64>>,
}

impl Gauge {
    /// The sending side handed the link one message.
    pub(super) fn hand(&self) {
        self.handed.fetch_add(1, Ordering::SeqCst);
    }

    /// The link's task: `taken` messages taken so far, `kept` of them not yet settled.
    pub(super) fn publish(&self, taken: u64, kept: usize) {
        self.settled
            .store(taken.saturating_sub(kept as u64), Ordering::SeqCst);
    }

    pub(super) fn set_unreachable(&self, unreachable: bool) {
        self.unreachable.store(unreachable, Ordering::SeqCst);
    }

    pub(super) fn set_connected(&self, connected: bool) {
        self.connected.store(connected, Ordering::SeqCst);
    }

    /// The link's session is now with process `incarnation` of the peer.
    pub(super) fn set_incarnation(&self, incarnation: u64) {
        *self
            .incarnation
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(incarnation);
    }

    pub(super) fn end(&self) {
        self.ended.store(true, Ordering::SeqCst);
        self.connected.store(false, Ordering::SeqCst);
    }

    /// Resolves when an acknowledgement request comes (the link's task, while connected).
    pub(super) async fn flush_asked(&self) -> u64 {
        self.flush.notified().await;
        self.flush_asked.load(Ordering::SeqCst)
    }

    /// The latest acknowledgement request (the link's task, about to tell the peer what it
    /// delivered in a resume).
    pub(super) fn flush_ticket(&self) -> u64 {
        self.flush_asked.load(Ordering::SeqCst)
    }

    /// The link's task wrote out the acknowledgement asked by request `ticket`.
    pub(super) fn flush_written(&self, ticket: u64) {
        self.flush_written.fetch_max(ticket, Ordering::SeqCst);
    }

    /// Asks the link's task to acknowledge what it delivered now; returns the ticket.
    fn ask(&self) -> u64 {
        let ticket = self.flush_asked.fetch_add(1, Ordering::SeqCst) + 1;
        self.flush.notify_one();
        ticket
    }

    /// Whether every message handed up to `mark` is settled, or can no longer be.
    fn settled_to(&self, mark: u64) -> bool {
        self.settled.load(Ordering::SeqCst) >= mark
            || self.unreachable.load(Ordering::SeqCst)
            || self.ended.load(Ordering::SeqCst)
    }

    /// Whether the acknowledgement request `ticket` was written out, or cannot be (not
    /// connected: the next connection's resume says what was delivered).
    fn flushed(&self, ticket: u64) -> bool {
        self.flush_written.load(Ordering::SeqCst) >= ticket
            || !self.connected.load(Ordering::SeqCst)
            || self.ended.load(Ordering::SeqCst)
    }
}

/// The gauges of a [`Net`](super::Net)'s links, one per peer: how many messages were handed
/// to each link and how many the peer settled. Cloning is cheap; they outlive the net (its
/// links then count as ended).
#[derive(Clone, Debug, Default)]
pub struct LinkGauges(pub(super) Arc<BTreeMap<ProcessId, Arc<Gauge>>>);

impl LinkGauges {
    /// The peers, in id order.
    pub fn peers(&self) -> impl Iterator<Item = ProcessId> + '_ {
        self.0.keys().copied()
    }

    /// How many messages were handed to `to`'s link so far (0 for a member not a peer): a
    /// mark to [`drain`](Self::drain) to.
    pub fn handed(&self, to: ProcessId) -> u64 {
        self.0
            .get(&to)
            .map_or(0, |g| g.handed.load(Ordering::SeqCst))
    }

    /// Whether the messages handed to `to`'s link up to `mark` are settled: the peer
    /// acknowledged them, or they were dropped for good (the peer restarted as a new
    /// process, the link was lost or stopped), or the peer is unreachable now.
    pub fn settled(&self, to: ProcessId, mark: u64) -> bool {
        self.0.get(&to).is_none_or(|g| g.settled_to(mark))
    }

    /// The incarnation of the process of `to` that its link's session is with, once the
    /// link met one (`None` before its first connection, or for a member not a peer). A
    /// message sent after this returns `Some(i)` goes to process `i` or a later one: a link
    /// that meets a new process drops what was queued for the old one, and only then
    /// publishes the new incarnation.
    pub(crate) fn incarnation(&self, to: ProcessId) -> Option<u64> {
        self.0.get(&to).and_then(|g| {
            *g.incarnation
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
    }

    /// Asks `to`'s link to acknowledge what it delivered now rather than with its next
    /// heartbeat (a member does when a peer says bye: that peer waits for it before it
    /// exits). Returns the request's ticket (0 for a member not a peer).
    pub fn acknowledge_now(&self, to: ProcessId) -> u64 {
        self.0.get(&to).map_or(0, |g| g.ask())
    }

    /// Waits, at most `within`, until every link settled its messages up to its mark in
    /// `marks` (a peer with no mark: everything handed to it so far), after asking every
    /// link to acknowledge what it delivered and waiting until that acknowledgement is
    /// written (so the peers' own drains end too). Returns the peers left unsettled.
    pub async fn drain(
        &self,
        marks: &BTreeMap<ProcessId, u64>,
        within: Duration,
    ) -> Vec<ProcessId> {
        let deadline = tokio::time::Instant::now() + within;
        let waits: Vec<(ProcessId, &Gauge, u64, u64)> = self
            .0
            .iter()
            .map(|(&p, g)| {
                let mark = marks
                    .get(&p)
                    .copied()
                    .unwrap_or_else(|| g.handed.load(Ordering::SeqCst));
                (p, &**g, mark, g.ask())
            })
            .collect();
        loop {
            let left: Vec<ProcessId> = waits
                .iter()
                .filter(|(_, g, mark, ticket)| !(g.settled_to(*mark) && g.flushed(*ticket)))
                .map(|(p, ..)| *p)
                .collect();
            if left.is_empty() || tokio::time::Instant::now() >= deadline {
                return left;
            }
            tokio::time::sleep(DRAIN_POLL).await;
        }
    }
}

/// How often a drain looks at the gauges: it runs once, at the end of a member's run.
const DRAIN_POLL: Duration = Duration::from_millis(5);
