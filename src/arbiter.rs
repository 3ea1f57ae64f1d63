//! The permission arbiter shared by LMUTIN, both halves of LKCS and Maekawa's arbiter role.
//!
//! Each process runs one arbiter per permission type. Requesters send it a timestamped
//! request; it grants permission to at most `capacity` requesters at a time, lowest stamp
//! first, and when it is full and a request with a smaller stamp than its lowest-priority
//! holder arrives, it asks that holder to give its permission back (Preempt). The holder
//! either returns it (Relinquish) or, once its sequence completed, eventually frees it
//! (Release).
//!
//! The arbiter is sans-IO: every operation appends [`Action`]s the owner turns into
//! messages.

use crate::id::{ProcessId, Stamp};
use std::collections::BTreeSet;

/// What the arbiter asks its owner to send.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// Grant permission to the process.
    Grant(ProcessId),
    /// Ask the process to give its permission back.
    Preempt(ProcessId),
    /// Grant the process a sidetrack permission (LKCS; see [`Arbiter::sidetrack`]).
    SidetrackGrant(ProcessId),
}

/// Which arbiter rules to apply; the printed pseudo-code differs from the corrected
/// algorithm in two places (see `algo::lmutin`'s "Deviations from the paper").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ArbiterRules {
    /// On Release and Relinquish, grant the best pending request even when that exceeds the
    /// capacity (printed); the corrected rule grants only while the capacity holds.
    pub uncapped_release: bool,
    /// On a Relinquish from a process that holds no permission, still grant the best
    /// pending request (printed); the corrected rule ignores such a Relinquish.
    pub grant_on_unmatched_relinquish: bool,
    /// LKCS: grant a sidetrack permission at once whatever the number granted (printed);
    /// the corrected rule grants it only within one reserved permission above the capacity
    /// and queues it otherwise.
    pub unreserved_sidetrack: bool,
}

impl ArbiterRules {
    /// The corrected rules.
    pub const CORRECTED: ArbiterRules = ArbiterRules {
        uncapped_release: false,
        grant_on_unmatched_relinquish: false,
        unreserved_sidetrack: false,
    };
    /// The rules as printed.
    pub const PRINTED: ArbiterRules = ArbiterRules {
        uncapped_release: true,
        grant_on_unmatched_relinquish: true,
        unreserved_sidetrack: true,
    };
}

/// A permission arbiter: `grantedTo`, `pendingReq` and `preemptingNow` of the papers.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Arbiter {
    capacity: usize,
    granted: BTreeSet<Stamp>,
    pending: BTreeSet<Stamp>,
    preempting: Option<ProcessId>,
    /// Holders whose permission was granted through the sidetrack (LKCS's trigger): in the
    /// one reserved permission above the capacity, never preempted.
    sidetracked: BTreeSet<ProcessId>,
    /// Sidetrack requests waiting for the reserved permission, in arrival order.
    sidetrack_queue: Vec<ProcessId>,
    rules: ArbiterRules,
}

impl Arbiter {
    /// An arbiter that grants at most `capacity` permissions at a time, starting with the
    /// permissions in `initially_granted`.
    pub fn new(
        capacity: usize,
        initially_granted: impl IntoIterator<Item = Stamp>,
        rules: ArbiterRules,
    ) -> Arbiter {
        Arbiter {
            capacity,
            granted: initially_granted.into_iter().collect(),
            pending: BTreeSet::new(),
            preempting: None,
            sidetracked: BTreeSet::new(),
            sidetrack_queue: Vec::new(),
            rules,
        }
    }

    /// The capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The granted permissions (`grantedTo`).
    pub fn granted(&self) -> &BTreeSet<Stamp> {
        &self.granted
    }

    /// The pending requests (`pendingReq`).
    pub fn pending(&self) -> &BTreeSet<Stamp> {
        &self.pending
    }

    /// The holder being preempted (`preemptingNow`).
    pub fn preempting(&self) -> Option<ProcessId> {
        self.preempting
    }

    /// Whether `p` holds a permission.
    pub fn holds(&self, p: ProcessId) -> bool {
        self.granted.iter().any(|s| s.id == p)
    }

    /// Whether a permission can be granted within the capacity (sidetrack permissions
    /// included: the paper's `Cond_i`).
    pub fn has_room(&self) -> bool {
        self.granted.len() < self.capacity
    }

    /// The sidetrack requests waiting for the reserved permission.
    pub fn sidetrack_queue(&self) -> &[ProcessId] {
        &self.sidetrack_queue
    }

    /// The holders of a sidetrack permission (see [`Arbiter::sidetrack`]).
    pub fn sidetracked(&self) -> &BTreeSet<ProcessId> {
        &self.sidetracked
    }

    /// The cap invariant: at most `capacity` permissions granted, plus the one reserved for
    /// the sidetrack while a sidetrack permission is held.
    pub fn check(&self) -> Result<(), String> {
        let reserve = usize::from(!self.sidetracked.is_empty());
        if self.granted.len() > self.capacity + reserve {
            Err(format!(
                "arbiter granted {} permissions with capacity {} ({} by the sidetrack)",
                self.granted.len(),
                self.capacity,
                self.sidetracked.len()
            ))
        } else {
            Ok(())
        }
    }

    /// A request stamped `s` arrives (the printed Request handler).
    pub fn request(&mut self, s: Stamp, out: &mut Vec<Action>) {
        self.pending.insert(s);
        if self.has_room() {
            self.grant_best(out);
        } else if self.preempting.is_none() {
            if let Some(&worst) = self.granted.last() {
                if s < worst {
                    self.preempting = Some(worst.id);
                    out.push(Action::Preempt(worst.id));
                }
            }
        }
    }

    /// `p` releases its permission (its sequence completed and it moved on).
    pub fn release(&mut self, p: ProcessId, out: &mut Vec<Action>) {
        if self.preempting == Some(p) {
            self.preempting = None;
        }
        self.remove(p);
        self.serve_sidetrack(out);
        if self.rules.uncapped_release {
            if !self.pending.is_empty() {
                self.grant_best(out);
            }
        } else {
            while self.has_room() && !self.pending.is_empty() {
                self.grant_best(out);
            }
        }
    }

    /// `p` gives its permission back after a Preempt; its request becomes pending again and
    /// the best pending request is granted.
    pub fn relinquish(&mut self, p: ProcessId, out: &mut Vec<Action>) {
        if self.sidetracked.contains(&p) {
            // a sidetrack permission is never preempted, so it is never given back
            return;
        }
        match self.remove(p) {
            Some(s) => {
                self.preempting = None;
                self.pending.insert(s);
                // the freed permission goes to a waiting sidetrack request first, then to the
                // best pending request within the capacity (printed: whatever the count)
                self.serve_sidetrack(out);
                if self.rules.uncapped_release || self.has_room() {
                    self.grant_best(out);
                }
            }
            None if self.rules.grant_on_unmatched_relinquish => {
                self.preempting = None;
                if !self.pending.is_empty() {
                    self.grant_best(out);
                }
            }
            None => {}
        }
    }

    /// LKCS's sidetrack: `p`'s request (pending or granted) is replaced by a permission
    /// stamped (0, `p`) that is never preempted and stays until `p` releases it. It is granted
    /// at once (an [`Action::SidetrackGrant`]) while at most `capacity` + 1 permissions are
    /// granted with it: one permission above the capacity is reserved for the sidetrack.
    /// Otherwise it waits for that reserve and is served before any pending request. (The
    /// printed rules grant it whatever the count.) A preemption of `p` in progress is
    /// dropped: `p` no longer relinquishes the permission it asked for.
    pub fn sidetrack(&mut self, p: ProcessId, out: &mut Vec<Action>) {
        self.pending.retain(|s| s.id != p);
        self.remove(p);
        if self.preempting == Some(p) {
            self.preempting = None;
        }
        if !self.sidetrack_queue.contains(&p) {
            self.sidetrack_queue.push(p);
        }
        self.serve_sidetrack(out);
    }

    /// Grants queued sidetrack requests while the reserve allows.
    fn serve_sidetrack(&mut self, out: &mut Vec<Action>) {
        while !self.sidetrack_queue.is_empty()
            && (self.rules.unreserved_sidetrack || self.granted.len() < self.capacity + 1)
        {
            let p = self.sidetrack_queue.remove(0);
            self.granted.insert(Stamp::new(0, p));
            self.sidetracked.insert(p);
            out.push(Action::SidetrackGrant(p));
        }
    }

    /// Takes request `s` out of the pending set without granting it (the printed LKCS
    /// nomination does); returns whether it was there.
    pub fn drop_pending(&mut self, s: Stamp) -> bool {
        self.pending.remove(&s)
    }

    fn remove(&mut self, p: ProcessId) -> Option<Stamp> {
        let s = self.granted.iter().find(|s| s.id == p).copied()?;
        self.granted.remove(&s);
        self.sidetracked.remove(&p);
        Some(s)
    }

    fn grant_best(&mut self, out: &mut Vec<Action>) {
        if let Some(s) = self.pending.pop_first() {
            self.granted.insert(s);
            out.push(Action::Grant(s.id));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(ts: u64, id: u32) -> Stamp {
        Stamp::new(ts, ProcessId(id))
    }

    fn run(f: impl FnOnce(&mut Vec<Action>)) -> Vec<Action> {
        let mut out = Vec::new();
        f(&mut out);
        out
    }

    #[test]
    fn grants_while_below_capacity_then_queues() {
        let mut a = Arbiter::new(2, [], ArbiterRules::CORRECTED);
        assert_eq!(
            run(|o| a.request(st(1, 1), o)),
            vec![Action::Grant(ProcessId(1))]
        );
        assert_eq!(
            run(|o| a.request(st(1, 2), o)),
            vec![Action::Grant(ProcessId(2))]
        );
        // full, and (3, P3) has a lower priority than every holder: queue it silently
        assert_eq!(run(|o| a.request(st(3, 3), o)), vec![]);
        assert_eq!(a.pending().len(), 1);
        a.check().unwrap();
    }

    #[test]
    fn preempts_the_lowest_priority_holder_once() {
        let mut a = Arbiter::new(1, [st(5, 1)], ArbiterRules::CORRECTED);
        assert_eq!(
            run(|o| a.request(st(2, 2), o)),
            vec![Action::Preempt(ProcessId(1))]
        );
        // a preemption is in progress: no second Preempt
        assert_eq!(run(|o| a.request(st(1, 3), o)), vec![]);
        assert_eq!(a.preempting(), Some(ProcessId(1)));
        // the holder relinquishes: the best pending request, (1, P3), gets the permission
        assert_eq!(
            run(|o| a.relinquish(ProcessId(1), o)),
            vec![Action::Grant(ProcessId(3))]
        );
        assert_eq!(a.preempting(), None);
        assert!(a.pending().contains(&st(5, 1)) && a.pending().contains(&st(2, 2)));
    }

    #[test]
    fn release_grants_best_pending_within_capacity() {
        let mut a = Arbiter::new(1, [st(0, 1)], ArbiterRules::CORRECTED);
        run(|o| a.request(st(4, 2), o));
        run(|o| a.request(st(3, 3), o));
        assert_eq!(
            run(|o| a.release(ProcessId(1), o)),
            vec![Action::Grant(ProcessId(3))]
        );
        a.check().unwrap();
    }

    #[test]
    fn corrected_release_of_a_non_holder_does_not_overgrant() {
        let mut a = Arbiter::new(1, [st(0, 1)], ArbiterRules::CORRECTED);
        run(|o| a.request(st(4, 2), o));
        assert_eq!(run(|o| a.release(ProcessId(9), o)), vec![]);
        a.check().unwrap();
        let mut p = Arbiter::new(1, [st(0, 1)], ArbiterRules::PRINTED);
        run(|o| p.request(st(4, 2), o));
        assert_eq!(
            run(|o| p.release(ProcessId(9), o)),
            vec![Action::Grant(ProcessId(2))]
        );
        assert!(p.check().is_err());
    }

    #[test]
    fn corrected_unmatched_relinquish_is_a_no_op() {
        let mut a = Arbiter::new(1, [st(0, 1)], ArbiterRules::CORRECTED);
        run(|o| a.request(st(4, 2), o));
        assert_eq!(run(|o| a.relinquish(ProcessId(7), o)), vec![]);
        a.check().unwrap();
        let mut p = Arbiter::new(1, [st(0, 1)], ArbiterRules::PRINTED);
        run(|o| p.request(st(4, 2), o));
        assert_eq!(
            run(|o| p.relinquish(ProcessId(7), o)),
            vec![Action::Grant(ProcessId(2))]
        );
        assert!(p.check().is_err());
    }

    #[test]
    fn preempting_is_cleared_by_the_release_of_the_preempted_holder() {
        let mut a = Arbiter::new(1, [st(5, 1)], ArbiterRules::CORRECTED);
        run(|o| a.request(st(2, 2), o));
        assert_eq!(
            run(|o| a.release(ProcessId(1), o)),
            vec![Action::Grant(ProcessId(2))]
        );
        assert_eq!(a.preempting(), None);
    }

    #[test]
    fn sidetrack_uses_one_reserved_permission_and_queues_beyond_it() {
        let mut a = Arbiter::new(1, [st(1, 1)], ArbiterRules::CORRECTED);
        run(|o| a.request(st(3, 2), o));
        // P2's pending request goes on the sidetrack: the reserve above the capacity
        assert_eq!(
            run(|o| a.sidetrack(ProcessId(2), o)),
            vec![Action::SidetrackGrant(ProcessId(2))]
        );
        assert!(a.pending().is_empty() && a.granted().contains(&st(0, 2)));
        a.check().unwrap();
        // the reserve is taken: P3 waits, and no normal grant uses the reserve
        assert_eq!(run(|o| a.sidetrack(ProcessId(3), o)), vec![]);
        assert_eq!(a.sidetrack_queue(), &[ProcessId(3)]);
        assert!(!a.has_room());
        // a sidetrack permission is never given back by a Relinquish
        assert_eq!(run(|o| a.relinquish(ProcessId(2), o)), vec![]);
        // P1 releases: the queued sidetrack request is served first
        assert_eq!(
            run(|o| a.release(ProcessId(1), o)),
            vec![Action::SidetrackGrant(ProcessId(3))]
        );
        assert_eq!(a.sidetracked().len(), 2);
        a.check().unwrap();
        // the printed rule grants whatever the count
        let mut p = Arbiter::new(1, [st(1, 1), st(1, 4)], ArbiterRules::PRINTED);
        assert_eq!(
            run(|o| p.sidetrack(ProcessId(2), o)),
            vec![Action::SidetrackGrant(ProcessId(2))]
        );
        assert!(p.check().is_err());
    }
}
