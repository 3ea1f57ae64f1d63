//! A member's lease (docs/fault-tolerance.md, "Eviction, leases and self-fencing"), as
//! plain bookkeeping over the member's monotonic clock; the view task sends the beats and
//! fences on expiry, the node answers its peers' beats.
//!
//! - Beat `h` goes out at local time `t_h` to every other member of the view. Once a
//!   majority of the view (this member included) answered it, the lease runs until
//!   `t_h + lease`.
//! - A member answers a peer's beat unless a committed change removes that peer (a report
//!   is a promise not to renew its lease), and remembers when it last answered each peer:
//!   before it reports a change that removes a peer, it waits until `evict_after` has passed
//!   since then.
//!
//! - A member starts with no lease: until a majority answers its first beat it may not act
//!   on its slot (its calls wait), and it does not fence either (it may be waiting for the
//!   others to start).
//!
//! With clock rates within `1 ± ρ` of real time, a removed member has fenced before any
//! survivor reports if `lease·(1+ρ) < evict_after·(1−ρ)` ([`margin_holds`]).

use crate::id::ProcessId;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// Told each new end of the member's lease, before the member relies on it (a test monitor
/// that counts a member active only while its lease holds; see [`ViewOptions::on_lease`]).
///
/// [`ViewOptions::on_lease`]: super::ViewOptions::on_lease
#[derive(Clone)]
pub struct LeaseWatch(pub Arc<dyn Fn(ProcessId, Instant) + Send + Sync>);

impl std::fmt::Debug for LeaseWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LeaseWatch")
    }
}

/// The largest rate difference between a member's clock and real time assumed: 1 %, far
/// above what a crystal drifts.
pub const CLOCK_DRIFT: f64 = 0.01;

/// Whether `lease` and `evict_after` keep the margin: `lease·(1+ρ) < evict_after·(1−ρ)`.
pub fn margin_holds(lease: Duration, evict_after: Duration) -> bool {
    lease.as_secs_f64() * (1.0 + CLOCK_DRIFT) < evict_after.as_secs_f64() * (1.0 - CLOCK_DRIFT)
}

/// At most this many beats wait for their answers; older ones are forgotten.
const KEPT_BEATS: usize = 256;

#[derive(Debug)]
pub(super) struct Lease {
    me: ProcessId,
    length: Duration,
    next: u64,
    /// Beats sent and not yet superseded: when, and who answered.
    sent: BTreeMap<u64, (Instant, BTreeSet<ProcessId>)>,
    /// The lease's end; none before a majority answered a beat.
    until: Option<Instant>,
    watch: Option<LeaseWatch>,
    /// When this member last answered each peer's beat.
    answered: BTreeMap<ProcessId, Instant>,
    /// Peers whose beats it no longer answers.
    refused: BTreeSet<ProcessId>,
    /// A lease was granted at least once.
    ever: bool,
}

impl Lease {
    /// Member `me`'s lease of `length`, not yet granted: it is granted when a majority
    /// answers a beat. `watch` is told each new end before it counts.
    pub(super) fn new(me: ProcessId, length: Duration, watch: Option<LeaseWatch>) -> Lease {
        Lease {
            me,
            length,
            next: 1,
            sent: BTreeMap::new(),
            until: None,
            watch,
            answered: BTreeMap::new(),
            refused: BTreeSet::new(),
            ever: false,
        }
    }

    /// Records a beat sent at `now`; returns its number.
    pub(super) fn beat(&mut self, now: Instant) -> u64 {
        let n = self.next;
        self.next += 1;
        self.sent.insert(n, (now, BTreeSet::new()));
        // a beat that can no longer extend the lease is forgotten
        if let Some(until) = self.until {
            let length = self.length;
            self.sent.retain(|_, (t, _)| *t + length > until);
        }
        while self.sent.len() > KEPT_BEATS {
            self.sent.pop_first();
        }
        n
    }

    /// `from` answered beat `n`; `majority` members of the view (this one included) must
    /// have answered for the lease to run from that beat.
    pub(super) fn acked(&mut self, from: ProcessId, n: u64, majority: usize) {
        let Some((t, who)) = self.sent.get_mut(&n) else {
            return;
        };
        who.insert(from);
        if who.len() + 1 >= majority {
            let end = *t + self.length;
            if self.until.is_none_or(|u| end > u) {
                // the watcher hears of the end before the member can rely on it
                if let Some(w) = &self.watch {
                    (w.0)(self.me, end);
                }
                self.until = Some(end);
                self.ever = true;
            }
        }
    }

    /// Whether the lease was granted and has run out at `now` (a member never granted one
    /// waits; it does not fence).
    pub(super) fn expired(&self, now: Instant) -> bool {
        self.until.is_some_and(|u| now >= u)
    }

    /// Whether a majority ever answered a beat: before, the member may not act on its slot.
    pub(super) fn granted(&self) -> bool {
        self.until.is_some()
    }

    /// Whether this process was ever granted a lease (a reset does not forget it): one that
    /// never was has never acted on a slot.
    pub(super) fn ever_granted(&self) -> bool {
        self.ever
    }

    /// A beat from `from` at `now`: whether to answer it (and, if so, it is remembered).
    pub(super) fn answer(&mut self, from: ProcessId, now: Instant) -> bool {
        if self.refused.contains(&from) {
            return false;
        }
        self.answered.insert(from, now);
        true
    }

    /// A view installed with `members`: beats sent so far are forgotten (their answers came
    /// from the old view, whose majority is not the new one's), and the members of the new
    /// view are answered again (one that a change named but that reported in time is kept).
    pub(super) fn installed(&mut self, members: &[ProcessId]) {
        self.sent.clear();
        self.refused.retain(|p| !members.contains(p));
    }

    /// Forgets the lease (it ran out, or the member was evicted): the member waits for a new
    /// one, granted when a majority of the view it rejoins answers a beat.
    pub(super) fn reset(&mut self) {
        self.until = None;
        self.sent.clear();
    }

    /// Stops answering `p`'s beats (a committed change removes it).
    pub(super) fn refuse(&mut self, p: ProcessId) {
        self.refused.insert(p);
    }

    /// How long to wait at `now` before reporting a change that removes `removed`: until
    /// `evict_after` has passed since this member last answered each of them.
    pub(super) fn report_wait(
        &self,
        removed: impl IntoIterator<Item = ProcessId>,
        evict_after: Duration,
        now: Instant,
    ) -> Duration {
        removed
            .into_iter()
            .filter_map(|p| self.answered.get(&p))
            .map(|at| (*at + evict_after).saturating_duration_since(now))
            .max()
            .unwrap_or(Duration::ZERO)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn the_lease_runs_from_the_last_beat_a_majority_answered() {
        let t0 = Instant::now();
        let ends = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = ends.clone();
        let watch = LeaseWatch(Arc::new(move |p, end| seen.lock().unwrap().push((p, end))));
        let mut lease = Lease::new(ProcessId(0), 100 * MS, Some(watch));
        assert!(
            !lease.granted() && !lease.expired(t0 + 1000 * MS),
            "none yet: it waits"
        );
        let b1 = lease.beat(t0 + 50 * MS);
        // a view of five: this member and two others make a majority
        lease.acked(ProcessId(1), b1, 3);
        assert!(!lease.granted(), "one answer of the two needed");
        lease.acked(ProcessId(1), b1, 3);
        assert!(!lease.granted(), "the same member twice counts once");
        lease.acked(ProcessId(2), b1, 3);
        assert!(lease.granted());
        assert!(
            !lease.expired(t0 + 149 * MS),
            "runs from the beat's sending"
        );
        assert!(lease.expired(t0 + 150 * MS));
        // an older beat answered later does not shorten it
        let b2 = lease.beat(t0 + 60 * MS);
        let b3 = lease.beat(t0 + 120 * MS);
        lease.acked(ProcessId(3), b3, 3);
        lease.acked(ProcessId(4), b3, 3);
        lease.acked(ProcessId(3), b2, 3);
        lease.acked(ProcessId(4), b2, 3);
        assert!(!lease.expired(t0 + 219 * MS) && lease.expired(t0 + 220 * MS));
        // an answer to a beat never sent changes nothing
        lease.acked(ProcessId(1), 999, 1);
        assert!(lease.expired(t0 + 220 * MS));
        assert_eq!(
            *ends.lock().unwrap(),
            [(ProcessId(0), t0 + 150 * MS), (ProcessId(0), t0 + 220 * MS)],
            "the watcher heard each new end, and only new ends"
        );
    }

    #[test]
    fn a_refused_peer_is_not_answered_and_the_report_waits_for_its_last_answer() {
        let t0 = Instant::now();
        let mut lease = Lease::new(ProcessId(0), 100 * MS, None);
        assert!(lease.answer(ProcessId(2), t0 + 10 * MS));
        assert!(lease.answer(ProcessId(3), t0 + 40 * MS));
        lease.refuse(ProcessId(2));
        assert!(
            !lease.answer(ProcessId(2), t0 + 50 * MS),
            "refused after the commit"
        );
        let wait = lease.report_wait([ProcessId(2), ProcessId(3)], 300 * MS, t0 + 60 * MS);
        assert_eq!(
            wait,
            280 * MS,
            "evict_after from the latest answer among the removed"
        );
        let never = lease.report_wait([ProcessId(4)], 300 * MS, t0 + 60 * MS);
        assert_eq!(
            never,
            Duration::ZERO,
            "a member never answered needs no wait"
        );
    }

    #[test]
    fn the_margin_accounts_for_the_drift_of_both_clocks() {
        let s = Duration::from_millis;
        assert!(
            margin_holds(s(3000), s(5000)),
            "the defaults: 3.03 s < 4.95 s"
        );
        assert!(
            !margin_holds(s(3000), s(3060)),
            "3.03 s is not below 3.03 s"
        );
        assert!(margin_holds(s(200), s(300)));
    }
}
