//! What a node counts: calls by outcome, waiting times, messages and link events per peer,
//! views and fences. [`NodeHandle::metrics`](super::NodeHandle::metrics) returns a
//! [`NodeMetrics`] snapshot; `lkcs node --metrics ADDR` serves the same numbers as
//! Prometheus text (docs/operations.md lists every metric).

use super::LogEvent;
use crate::id::ProcessId;
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// The upper bounds of the waiting-time buckets, in seconds (the last bucket, `+Inf`, is
/// implied): 100 µs to 60 s, about three per decade.
pub const WAIT_BUCKETS: [f64; 17] = [
    0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0, 60.0,
];

/// Waiting times of one kind of call: a histogram over [`WAIT_BUCKETS`].
#[derive(Clone, Debug, Default, PartialEq)]
pub struct WaitHistogram {
    /// Calls per bucket: `counts[i]` waited at most `WAIT_BUCKETS[i]` seconds and more than
    /// the bucket before; the last entry (one past `WAIT_BUCKETS`) waited longer than 60 s.
    pub counts: Vec<u64>,
    /// The waiting times' sum, in seconds.
    pub sum: f64,
    /// How many calls.
    pub count: u64,
}

impl WaitHistogram {
    fn observe(&mut self, waited: Duration) {
        if self.counts.is_empty() {
            self.counts = vec![0; WAIT_BUCKETS.len() + 1];
        }
        let s = waited.as_secs_f64();
        let i = WAIT_BUCKETS
            .iter()
            .position(|&b| s <= b)
            .unwrap_or(WAIT_BUCKETS.len());
        self.counts[i] += 1;
        self.sum += s;
        self.count += 1;
    }
}

/// What one call (an `enter` or an `exit`) came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum CallOutcome {
    /// The move completed.
    Ok,
    /// A peer the call waits on was unreachable (the move keeps running).
    Unreachable,
    /// The member was evicted (fenced).
    Evicted,
    /// The node stopped.
    Stopped,
    /// The call broke the calling convention (busy, ...).
    Refused,
    /// The caller gave up before an answer (a timeout, a dropped future).
    Cancelled,
}

impl CallOutcome {
    /// The outcome's label value: `ok`, `unreachable`, `evicted`, `stopped`, `refused` or
    /// `cancelled`.
    pub fn as_str(self) -> &'static str {
        match self {
            CallOutcome::Ok => "ok",
            CallOutcome::Unreachable => "unreachable",
            CallOutcome::Evicted => "evicted",
            CallOutcome::Stopped => "stopped",
            CallOutcome::Refused => "refused",
            CallOutcome::Cancelled => "cancelled",
        }
    }
}

/// One peer's numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PeerMetrics {
    /// The object's messages sent to the peer (until the run's end, as
    /// [`NodeStatus::links`](super::NodeStatus::links) counts them).
    pub sent: u64,
    /// The object's messages received from the peer.
    pub received: u64,
    /// Connections made on the link (the first one included).
    pub connects: u64,
    /// Connections that ended (a reset, a timeout, a tampered frame): each one is resumed.
    pub resets: u64,
    /// Messages sent again on a new connection (unacknowledged when the last one ended).
    pub resent: u64,
    /// Frames that failed to open on the link (tampered, forged or spliced).
    pub tampered: u64,
    /// Times the peer became unreachable (silent beyond the peer timeout, or its link lost).
    pub unreachable_times: u64,
    /// Whether it is unreachable now.
    pub unreachable: bool,
}

/// A snapshot of a node's numbers ([`NodeHandle::metrics`](super::NodeHandle::metrics)).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct NodeMetrics {
    /// The member's id.
    pub member: usize,
    /// Calls by kind (`enter`, `exit`) and outcome.
    pub calls: BTreeMap<(&'static str, CallOutcome), u64>,
    /// Entries completed (the member went active).
    pub entries: u64,
    /// Exits completed (the member went inactive): completed pairs.
    pub pairs: u64,
    /// How long completed `enter` calls waited.
    pub enter_wait: WaitHistogram,
    /// How long completed `exit` calls waited.
    pub exit_wait: WaitHistogram,
    /// Per peer (every member the node links to).
    pub peers: BTreeMap<ProcessId, PeerMetrics>,
    /// Connections refused in their handshake (unknown keys, floods, ...).
    pub refused: u64,
    /// The view the member is in (`None` without views, or before its group started).
    pub view: Option<u64>,
    /// Views installed by this node.
    pub view_changes: u64,
    /// Members the installed views removed (evicted or left), as this node saw them.
    pub evictions: u64,
    /// Times this member fenced (evicted, or its lease ran out).
    pub fences: u64,
    /// The member's state: `active`, `inactive`, `entering`, `exiting` or `evicted`.
    pub state: &'static str,
}

/// The counters behind a [`NodeMetrics`]: fed by the link events, the calls and the core.
#[derive(Debug, Default)]
pub(crate) struct Recorder {
    inner: Mutex<Counts>,
}

#[derive(Debug, Default)]
struct Counts {
    calls: BTreeMap<(&'static str, CallOutcome), u64>,
    entries: u64,
    pairs: u64,
    enter_wait: WaitHistogram,
    exit_wait: WaitHistogram,
    links: BTreeMap<ProcessId, PeerMetrics>,
    refused: u64,
    view_changes: u64,
    evictions: u64,
    fences: u64,
}

impl Recorder {
    fn lock(&self) -> MutexGuard<'_, Counts> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A link event (every one goes through the node's logger).
    pub(crate) fn link_event(&self, e: &LogEvent) {
        let mut c = self.lock();
        match e {
            LogEvent::Connected { peer, resent } => {
                let p = c.links.entry(*peer).or_default();
                p.connects += 1;
                p.resent += *resent as u64;
            }
            LogEvent::Disconnected { peer, .. } => c.links.entry(*peer).or_default().resets += 1,
            LogEvent::Tampered { peer, .. } => c.links.entry(*peer).or_default().tampered += 1,
            LogEvent::Unreachable(peer) | LogEvent::LinkLost { peer, .. } => {
                c.links.entry(*peer).or_default().unreachable_times += 1
            }
            LogEvent::Refused { .. } => c.refused += 1,
            LogEvent::RefusedMore { count, .. } => c.refused += count,
            _ => {}
        }
    }

    /// A call of `kind` ended with `outcome` after `waited`.
    pub(crate) fn call(&self, kind: &'static str, outcome: CallOutcome, waited: Duration) {
        let mut c = self.lock();
        *c.calls.entry((kind, outcome)).or_default() += 1;
        if outcome == CallOutcome::Ok {
            match kind {
                "enter" => c.enter_wait.observe(waited),
                _ => c.exit_wait.observe(waited),
            }
        }
    }

    /// The member went active (`true`) or inactive.
    pub(crate) fn moved(&self, active: bool) {
        let mut c = self.lock();
        match active {
            true => c.entries += 1,
            false => c.pairs += 1,
        }
    }

    /// A view installed, removing `removed` members of the one before.
    pub(crate) fn view_installed(&self, removed: usize) {
        let mut c = self.lock();
        c.view_changes += 1;
        c.evictions += removed as u64;
    }

    /// The member fenced.
    pub(crate) fn fenced(&self) {
        self.lock().fences += 1;
    }

    /// The snapshot, completed by what the node's status says.
    pub(crate) fn snapshot(
        &self,
        member: ProcessId,
        status: &super::NodeStatus,
        state: &'static str,
    ) -> NodeMetrics {
        let c = self.lock();
        let mut peers = c.links.clone();
        for p in status.peers.iter().chain(status.links.keys()) {
            peers.entry(*p).or_default();
        }
        for (p, m) in &mut peers {
            if let Some(t) = status.links.get(p) {
                m.sent = t.sent.count;
                m.received = t.received.count;
            }
            m.unreachable = status.unreachable.contains(p);
        }
        NodeMetrics {
            member: member.index(),
            calls: c.calls.clone(),
            entries: c.entries,
            pairs: c.pairs,
            enter_wait: c.enter_wait.clone(),
            exit_wait: c.exit_wait.clone(),
            peers,
            refused: c.refused,
            view: status.view.as_ref().map(|v| v.number),
            view_changes: c.view_changes,
            evictions: c.evictions,
            fences: c.fences,
            state,
        }
    }
}

/// `log`, with every event counted by `recorder` first.
pub(crate) fn counting(log: super::Logger, recorder: Arc<Recorder>) -> super::Logger {
    Arc::new(move |me, e| {
        recorder.link_event(e);
        log(me, e)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn waits_fall_in_the_first_bucket_that_holds_them() {
        let mut h = WaitHistogram::default();
        h.observe(Duration::from_micros(100)); // on the bound: that bucket
        h.observe(Duration::from_millis(3)); // 2.5 ms < 3 ms <= 5 ms
        h.observe(Duration::from_secs(61)); // past the last bound
        assert_eq!(h.counts.len(), WAIT_BUCKETS.len() + 1);
        assert_eq!(h.counts[0], 1);
        assert_eq!(h.counts[5], 1, "{:?}", h.counts);
        assert_eq!(h.counts[WAIT_BUCKETS.len()], 1);
        assert_eq!(h.count, 3);
        assert!((h.sum - 61.0031).abs() < 1e-9, "{}", h.sum);
    }

    #[test]
    fn link_events_count_per_peer() {
        let r = Recorder::default();
        let p = ProcessId(2);
        r.link_event(&LogEvent::Connected { peer: p, resent: 0 });
        r.link_event(&LogEvent::Disconnected {
            peer: p,
            reason: "reset".into(),
        });
        r.link_event(&LogEvent::Connected { peer: p, resent: 7 });
        r.link_event(&LogEvent::RefusedMore {
            source: "10.0.0.9".parse().unwrap(),
            count: 40,
            reason: "flood".into(),
        });
        let status = super::super::NodeStatus::default();
        let m = r.snapshot(ProcessId(0), &status, "inactive");
        let peer = &m.peers[&p];
        assert_eq!((peer.connects, peer.resets, peer.resent), (2, 1, 7));
        assert_eq!(m.refused, 40);
    }
}
