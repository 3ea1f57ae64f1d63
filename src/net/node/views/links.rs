//! What the view log's transport, the node and the view task share about the links
//! ([`ViewLinks`]): the requests waiting for their answers, since when each link has been
//! down, and which process of each member the view log deals with.

use super::lock;
use crate::id::ProcessId;
use crate::net::view::ViewRpcReply;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

type Answer = oneshot::Sender<ViewRpcReply>;

/// What the transport, the node and the view task share: the requests waiting for their
/// answers, and since when each link has been down.
#[derive(Debug, Default)]
pub(in crate::net::node) struct ViewLinks {
    next: AtomicU64,
    waiting: Mutex<HashMap<u64, (ProcessId, Answer)>>,
    down: Mutex<BTreeMap<ProcessId, Instant>>,
    /// The processes: which incarnation of each member the view log has (in the current
    /// view, or rejoining in the pending change), and the new process of each member whose
    /// link saw it restart.
    processes: Mutex<Processes>,
    /// Every member keeps its view log on disk ([`Storage::Dir`]): a new process of a
    /// member that resumed its member's Raft node from the folder is the same Raft node as
    /// the one before, so its Raft messages count.
    ///
    /// [`Storage::Dir`]: crate::net::view::Storage::Dir
    pub(super) durable: AtomicBool,
    /// This process resumed its member's Raft node from its folder
    /// ([`ViewGroup::resumed`]): its view-log frames say so.
    ///
    /// [`ViewGroup::resumed`]: crate::net::view::ViewGroup::resumed
    pub(super) resumed: AtomicBool,
}

/// Which process of each member this node deals with (see [`ViewLinks::current`]).
#[derive(Debug, Default)]
struct Processes {
    /// The current view's members with their incarnations.
    in_view: BTreeMap<ProcessId, u64>,
    /// The members the pending change lets rejoin, with their new incarnations.
    rejoining: BTreeMap<ProcessId, u64>,
    /// The latest incarnation of each member whose link saw it restart.
    restarted: BTreeMap<ProcessId, u64>,
    /// The incarnations of each member that its link saw replaced by a newer process.
    replaced: BTreeMap<ProcessId, BTreeSet<u64>>,
}

impl ViewLinks {
    pub(super) fn register(&self, to: ProcessId, answer: Answer) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.waiting).insert(id, (to, answer));
        id
    }

    pub(super) fn forget(&self, id: u64) {
        lock(&self.waiting).remove(&id);
    }

    /// An answer from `from` to request `id`; `false` when no request of that number went
    /// to `from` (a late answer, or one in another member's name), and it is dropped.
    pub(in crate::net::node) fn answer(
        &self,
        from: ProcessId,
        id: u64,
        reply: ViewRpcReply,
    ) -> bool {
        let mut waiting = lock(&self.waiting);
        match waiting.get(&id) {
            Some((to, _)) if *to == from => {
                let (_, answer) = waiting.remove(&id).expect("present");
                let _ = answer.send(reply);
                true
            }
            _ => false,
        }
    }

    /// The link to `p` went down (unreachable or lost), the peer last heard at `since`; a
    /// link already down keeps its time.
    pub(in crate::net::node) fn down(&self, p: ProcessId, since: Instant) {
        lock(&self.down).entry(p).or_insert(since);
    }

    /// Restarts the silence of every link that is down at `now`: a process that just
    /// (re)joined the view counts a member's silence from then on, not from before it was
    /// back (its links to the others may still be reconnecting after a partition healed).
    pub(super) fn restart_silences(&self, now: Instant) {
        for since in lock(&self.down).values_mut() {
            *since = now;
        }
    }

    /// Restarts `p`'s silence at `now`, if its link is down: a member back in the view (a
    /// new process, or the one evicted) counts its silence from its return, not from its
    /// previous process's.
    pub(in crate::net::node) fn restart_silence(&self, p: ProcessId, now: Instant) {
        if let Some(since) = lock(&self.down).get_mut(&p) {
            *since = now;
        }
    }

    /// Whether `p`'s link ever met a new process of it.
    pub(in crate::net::node) fn saw_restart(&self, p: ProcessId) -> bool {
        lock(&self.processes).restarted.contains_key(&p)
    }

    /// The link to `p` is up again.
    pub(in crate::net::node) fn up(&self, p: ProcessId) {
        lock(&self.down).remove(&p);
    }

    /// `p`'s link connected to a new process of it, `incarnation`, replacing `previous`.
    pub(in crate::net::node) fn restarted(&self, p: ProcessId, previous: u64, incarnation: u64) {
        let mut processes = lock(&self.processes);
        processes.restarted.insert(p, incarnation);
        processes.replaced.entry(p).or_default().insert(previous);
    }

    /// The members whose process in the view is one their link saw replaced: the view must
    /// evict that process. A member whose link has not yet met the process the view has (it
    /// rejoined while this link was down) is not one: its process in the view was never seen
    /// replaced.
    pub(super) fn replaced_in_view(&self) -> Vec<ProcessId> {
        let processes = lock(&self.processes);
        processes
            .in_view
            .iter()
            // place 0 is a member's first process: any restart the link saw replaced it
            .filter(|(p, i)| {
                processes
                    .replaced
                    .get(p)
                    .is_some_and(|r| r.contains(i) || (**i == 0 && !r.is_empty()))
            })
            .map(|(p, _)| *p)
            .collect()
    }

    /// The view log's members (the current view's, and those a pending change lets rejoin),
    /// with their incarnations.
    pub(super) fn set_view(
        &self,
        in_view: &BTreeMap<ProcessId, u64>,
        rejoining: BTreeMap<ProcessId, u64>,
    ) {
        let mut processes = lock(&self.processes);
        if processes.in_view != *in_view {
            processes.in_view = in_view.clone();
        }
        processes.rejoining = rejoining;
    }

    /// Whether the process at the other end of `p`'s link is the one the current view has:
    /// no restart was seen, or the view has the new process's incarnation. A member's new
    /// process is not the one the view counts: its object's messages, its beats and its Raft
    /// votes would speak for a state it lost.
    pub(in crate::net::node) fn current(&self, p: ProcessId) -> bool {
        let processes = lock(&self.processes);
        match processes.restarted.get(&p) {
            None => true,
            Some(i) => processes.in_view.get(&p) == Some(i),
        }
    }

    /// Whether the view log hears `p`'s process: the current one, or a new one that a
    /// pending change lets rejoin (a Raft learner catching up).
    pub(super) fn may_log(&self, p: ProcessId) -> bool {
        let processes = lock(&self.processes);
        match processes.restarted.get(&p) {
            None => true,
            Some(i) => {
                processes.in_view.get(&p) == Some(i) || processes.rejoining.get(&p) == Some(i)
            }
        }
    }

    /// Whether the Raft node behind `p`'s process may take part in the log: one its frame
    /// says `resumed` its member's Raft node from the folder, when every member keeps its
    /// log on disk; else as [`ViewLinks::may_log`]. A new process on an emptied folder (or
    /// one the others never counted) is a new Raft node, which could vote twice in a term
    /// or acknowledge again what the old one acknowledged: it counts only once a change
    /// lets it rejoin.
    pub(super) fn may_raft(&self, p: ProcessId, resumed: bool) -> bool {
        self.claims_node(resumed) || self.may_log(p)
    }

    /// Whether a frame saying `resumed` claims its member's Raft node: only when every
    /// member keeps its log on disk, so that a resumed folder holds the node's votes.
    fn claims_node(&self, resumed: bool) -> bool {
        resumed && self.durable.load(Ordering::Acquire)
    }

    /// Whether the log hears `p`'s process only as a learner: a new process (its frame not
    /// saying `resumed` where that counts) that a pending change lets rejoin, whose
    /// member's place in the view went to no process of it yet.
    pub(super) fn learner_only(&self, p: ProcessId, resumed: bool) -> bool {
        if self.claims_node(resumed) {
            return false;
        }
        let processes = lock(&self.processes);
        match processes.restarted.get(&p) {
            None => false,
            Some(i) => {
                processes.in_view.get(&p) != Some(i) && processes.rejoining.get(&p) == Some(i)
            }
        }
    }

    /// Whether this process's view-log frames say it resumed its member's Raft node.
    pub(super) fn resumed(&self) -> bool {
        self.resumed.load(Ordering::Acquire)
    }

    pub(super) fn is_down(&self, p: ProcessId) -> bool {
        lock(&self.down).contains_key(&p)
    }

    pub(super) fn down_for(&self, at_least: Duration) -> Vec<ProcessId> {
        lock(&self.down)
            .iter()
            .filter(|(_, since)| since.elapsed() >= at_least)
            .map(|(p, _)| *p)
            .collect()
    }
}
