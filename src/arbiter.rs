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
//!
//! **Unexpected messages.** The arbiter trusts its owner to filter senders (each owner drops
//! messages from processes that are not its peers), and otherwise never panics and never
//! breaks its cap ([`Arbiter::check`]) whatever the order of operations: a Release or a
//! Relinquish from a process that holds nothing here frees nothing and grants nothing
//! (corrected rules); a request whose stamp is already here (granted or pending: a duplicate
//! or a replay) is ignored ([`Arbiter::knows`] lets the owner drop it before its own
//! bookkeeping); a request with a new stamp from a process that already has one here is
//! queued as another request, which the cap still bounds.

use crate::id::{ProcessId, Stamp};
use crate::small_set::SmallSet;
use std::fmt;

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

/// A set of stamps, ascending; inline up to `N` (see `small_set`).
type Stamps<const N: usize> = SmallSet<Stamp, N>;

/// Inline room of the granted and pending sets: a torus's closed neighbourhood minus l.
const HOT: usize = 4;

/// A permission arbiter: `grantedTo`, `pendingReq` and `preemptingNow` of the papers.
///
/// The sets are sorted arrays held inline while small (a closed neighbourhood at most on
/// local topologies), so that the ones every message reads sit in the object itself: at
/// 10^5 processes a pointer to a B-tree node was a cache miss per message. (The field order
/// is that of the sets' `Debug` and `Hash`, unchanged from the B-tree version.)
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Arbiter {
    capacity: usize,
    granted: Stamps<HOT>,
    pending: Stamps<HOT>,
    preempting: Option<ProcessId>,
    /// Holders whose permission was granted through the sidetrack (LKCS's trigger), with the
    /// stamp of the sidetrack request: the one reserved permission above the capacity.
    sidetracked: Sidetracked,
    /// Sidetrack requests waiting for the reserved permission (without a reserve: for room,
    /// in stamp order with the pending requests), best (lowest stamp) first.
    sidetrack_queue: Stamps<1>,
    /// The sidetrack holder asked to give its permission back to an older sidetrack request.
    preempting_sidetrack: Option<ProcessId>,
    /// Requests set aside by their requester (LKCS parks a request blocked elsewhere; see
    /// [`Arbiter::park`]): neither granted nor pending until unparked.
    parked: Stamps<1>,
    /// Sidetrack requests set aside by their requester, likewise.
    parked_sidetrack: Stamps<1>,
    /// Whether one permission above the capacity is reserved for the sidetrack (LKCS: only
    /// where the bounds are tightened); without it sidetrack requests wait for room.
    reserve: bool,
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
            pending: Stamps::new(),
            preempting: None,
            sidetracked: Sidetracked::default(),
            sidetrack_queue: Stamps::new(),
            preempting_sidetrack: None,
            parked: Stamps::new(),
            parked_sidetrack: Stamps::new(),
            reserve: true,
            rules,
        }
    }

    /// Whether one permission above the capacity is reserved for the sidetrack.
    pub fn has_reserve(&self) -> bool {
        self.reserve
    }

    /// The same arbiter without the reserved sidetrack permission: sidetrack requests are
    /// granted only within the capacity, in stamp order with the pending requests (LKCS,
    /// where the bounds are not tightened).
    pub fn without_reserve(mut self) -> Arbiter {
        self.reserve = false;
        self
    }

    /// The capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// The granted permissions (`grantedTo`), ascending (best first).
    pub fn granted(&self) -> &[Stamp] {
        self.granted.as_slice()
    }

    /// The pending requests (`pendingReq`), ascending (best first).
    pub fn pending(&self) -> &[Stamp] {
        self.pending.as_slice()
    }

    /// The holder being preempted (`preemptingNow`).
    pub fn preempting(&self) -> Option<ProcessId> {
        self.preempting
    }

    /// Whether `p` holds a permission.
    pub fn holds(&self, p: ProcessId) -> bool {
        self.granted().iter().any(|s| s.id == p)
    }

    /// Whether a permission can be granted within the capacity (sidetrack permissions
    /// included: the paper's `Cond_i`).
    pub fn has_room(&self) -> bool {
        self.granted.len() < self.capacity
    }

    /// The sidetrack requests waiting (see [`Arbiter::sidetrack`]), ascending (best first).
    pub fn sidetrack_queue(&self) -> &[Stamp] {
        self.sidetrack_queue.as_slice()
    }

    /// The parked requests (see [`Arbiter::park`]), ascending.
    pub fn parked(&self) -> &[Stamp] {
        self.parked.as_slice()
    }

    /// The parked sidetrack requests (see [`Arbiter::park`]), ascending.
    pub fn parked_sidetrack(&self) -> &[Stamp] {
        self.parked_sidetrack.as_slice()
    }

    /// Whether the reserved sidetrack permission is in use (without a reserve: whether the
    /// arbiter is full): a sidetrack request would wait.
    pub fn reserve_used(&self) -> bool {
        self.granted.len() >= self.capacity + usize::from(self.reserve)
    }

    /// The holders of a sidetrack permission, with their sidetrack requests' stamps (see
    /// [`Arbiter::sidetrack`]), by holder id ascending.
    pub fn sidetracked(&self) -> &[(ProcessId, Stamp)] {
        &self.sidetracked.0
    }

    /// The stamp of `p`'s sidetrack request when `p` holds a sidetrack permission.
    pub fn sidetrack_stamp(&self, p: ProcessId) -> Option<Stamp> {
        self.sidetracked.get(p)
    }

    /// Whether `p` holds a sidetrack permission.
    pub fn is_sidetracked(&self, p: ProcessId) -> bool {
        self.sidetracked.get(p).is_some()
    }

    /// The sidetrack holder being preempted.
    pub fn preempting_sidetrack(&self) -> Option<ProcessId> {
        self.preempting_sidetrack
    }

    /// The cap invariant: at most `capacity` permissions granted, plus the one reserved for
    /// the sidetrack while a sidetrack permission is held.
    pub fn check(&self) -> Result<(), String> {
        let reserve = usize::from(self.reserve && !self.sidetracked.is_empty());
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

    /// Whether the stamp `s` is already here: granted, pending, parked, queued for the
    /// sidetrack or held on it. A Request carrying it is a duplicate (no correct process
    /// sends the same stamp twice).
    pub fn knows(&self, s: Stamp) -> bool {
        self.granted.contains(&s)
            || self.pending.contains(&s)
            || self.parked.contains(&s)
            || self.sidetrack_queue.contains(&s)
            || self.parked_sidetrack.contains(&s)
            || self.sidetracked.get(s.id) == Some(s)
    }

    /// A request stamped `s` arrives (the printed Request handler). A stamp already granted
    /// or pending here is a duplicate: ignored.
    pub fn request(&mut self, s: Stamp, out: &mut Vec<Action>) {
        if self.granted.contains(&s) || self.pending.contains(&s) {
            return;
        }
        self.parked.retain(|x| x.id != s.id);
        self.parked_sidetrack.retain(|x| x.id != s.id);
        self.pending.insert(s);
        if self.has_room() {
            self.grant_best(out);
        } else if self.preempting.is_none()
            && let Some(&worst) = self.granted.last()
            && s < worst
        {
            self.preempting = Some(worst.id);
            out.push(Action::Preempt(worst.id));
        }
    }

    /// `p` releases its permission (its sequence completed and it moved on).
    pub fn release(&mut self, p: ProcessId, out: &mut Vec<Action>) {
        if self.preempting == Some(p) {
            self.preempting = None;
        }
        if self.preempting_sidetrack == Some(p) {
            self.preempting_sidetrack = None;
        }
        self.remove(p);
        if self.rules.uncapped_release {
            self.serve_sidetrack(out);
            if !self.pending.is_empty() {
                self.grant_best(out);
            }
        } else {
            self.fill(out);
        }
    }

    /// `p` gives its permission back after a Preempt; its request becomes pending again and
    /// the best pending request is granted.
    pub fn relinquish(&mut self, p: ProcessId, out: &mut Vec<Action>) {
        if let Some(s) = self.sidetracked.get(p) {
            // a sidetrack permission is given back only to an older sidetrack request
            if self.preempting_sidetrack == Some(p) {
                self.preempting_sidetrack = None;
                self.remove(p);
                self.sidetrack_queue.insert(s);
                self.fill(out);
            }
            return;
        }
        match self.remove(p) {
            Some(s) => {
                self.preempting = None;
                self.pending.insert(s);
                // the freed permission goes to a waiting sidetrack request first, then to the
                // best pending request within the capacity (printed: whatever the count)
                if self.rules.uncapped_release {
                    self.serve_sidetrack(out);
                    self.grant_best(out);
                } else {
                    self.fill(out);
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

    /// `p` sets its request aside (LKCS: another arbiter told `p` it is blocked there by
    /// holders that will not give way). A permission `p` holds for it is given back, as on a
    /// Relinquish, and the request is parked: it is neither granted nor preempted for until
    /// [`Arbiter::unpark`]. A sidetrack request (queued or granted) is parked likewise.
    pub fn park(&mut self, p: ProcessId, out: &mut Vec<Action>) {
        if let Some(s) = find(&self.sidetrack_queue, p) {
            self.sidetrack_queue.remove(&s);
            self.parked_sidetrack.insert(s);
            return;
        }
        if let Some(s) = find(&self.pending, p) {
            self.pending.remove(&s);
            self.parked.insert(s);
        }
        let sidetrack = self.sidetracked.get(p);
        if let Some(s) = self.remove(p) {
            if self.preempting == Some(p) {
                self.preempting = None;
            }
            if self.preempting_sidetrack == Some(p) {
                self.preempting_sidetrack = None;
            }
            if let Some(st) = sidetrack {
                self.parked_sidetrack.insert(st);
            } else {
                self.parked.insert(s);
            }
            self.fill(out);
        }
    }

    /// `p`'s parked request competes again: a normal one with its stamp, as a new Request
    /// would; a sidetrack one likewise in the sidetrack queue.
    pub fn unpark(&mut self, p: ProcessId, out: &mut Vec<Action>) {
        if let Some(s) = find(&self.parked_sidetrack, p) {
            self.parked_sidetrack.remove(&s);
            self.sidetrack_queue.insert(s);
            self.fill(out);
        } else if let Some(s) = find(&self.parked, p) {
            self.request(s, out);
        }
    }

    /// LKCS's sidetrack: the request of `s.id` (pending, granted or parked) is replaced by a
    /// sidetrack request stamped `s`. It is granted at once (an [`Action::SidetrackGrant`];
    /// the holder appears in [`Arbiter::granted`] stamped (0, `s.id`)) while at most
    /// `capacity` + 1 permissions are granted with it: one permission above the capacity is
    /// reserved for the sidetrack. Otherwise it waits for that reserve, served before any
    /// pending request, best stamp first (see [`Arbiter::preempt_sidetrack`]). Without a
    /// reserve ([`Arbiter::without_reserve`]) it is granted only within the capacity, in stamp
    /// order with the pending requests. (The printed rules grant it whatever the count.) A
    /// preemption of `s.id` in progress is dropped.
    pub fn sidetrack(&mut self, s: Stamp, out: &mut Vec<Action>) {
        let p = s.id;
        self.pending.retain(|x| x.id != p);
        self.parked.retain(|x| x.id != p);
        self.parked_sidetrack.retain(|x| x.id != p);
        self.sidetrack_queue.retain(|x| x.id != p);
        self.remove(p);
        if self.preempting == Some(p) {
            self.preempting = None;
        }
        if self.preempting_sidetrack == Some(p) {
            self.preempting_sidetrack = None;
        }
        self.sidetrack_queue.insert(s);
        self.fill(out);
    }

    /// Asks sidetrack holder `p` to give its permission back (with a [`Action::Preempt`]) for
    /// the best waiting sidetrack request; LKCS does so only when that request is older than
    /// `p`'s and `p`'s sequence is still in progress. Does nothing while another sidetrack
    /// preemption is in progress or when `p` holds no sidetrack permission.
    pub fn preempt_sidetrack(&mut self, p: ProcessId, out: &mut Vec<Action>) {
        if self.preempting_sidetrack.is_none() && self.is_sidetracked(p) {
            self.preempting_sidetrack = Some(p);
            out.push(Action::Preempt(p));
        }
    }

    /// Asks holder `p` of a normal permission to give it back (with a [`Action::Preempt`]),
    /// as a better request would; LKCS does so for a waiting sidetrack request, which comes
    /// before every normal one where there is a reserve, and before younger ones elsewhere. Does nothing while another preemption is in progress or when
    /// `p` holds no normal permission.
    pub fn preempt(&mut self, p: ProcessId, out: &mut Vec<Action>) {
        if self.preempting.is_none() && !self.is_sidetracked(p) && self.holds(p) {
            self.preempting = Some(p);
            out.push(Action::Preempt(p));
        }
    }

    /// LKCS: grants the best pending request from the reserve while the reserve is free and
    /// a sidetrack permission takes an ordinary slot (the owner does so only for a request
    /// older than a sidetrack holder still in progress: as if that holder gave its slot back
    /// and moved to the reserve). At most `capacity` normal permissions and `capacity` + 1 in
    /// all stay granted, so [`Arbiter::check`] holds. Does nothing otherwise.
    pub fn grant_from_reserve(&mut self, out: &mut Vec<Action>) {
        if self.reserve && !self.reserve_used() && !self.sidetracked.is_empty() {
            self.grant_best(out);
        }
    }

    /// Forgets the preemption in progress (LKCS: its holder keeps the permission for its
    /// current state and will not relinquish it, so the Preempt will go unanswered).
    pub fn cancel_preempt(&mut self) {
        self.preempting = None;
    }

    /// Forgets the sidetrack preemption in progress, likewise.
    pub fn cancel_preempt_sidetrack(&mut self) {
        self.preempting_sidetrack = None;
    }

    /// Grants queued sidetrack requests while the reserve allows; without a reserve, only
    /// those older than every pending request (there they compete by stamp).
    fn serve_sidetrack(&mut self, out: &mut Vec<Action>) {
        while let Some(&s) = self.sidetrack_queue.first() {
            let room = self.rules.unreserved_sidetrack || !self.reserve_used();
            if !room || (!self.reserve && self.pending.first().is_some_and(|p| *p < s)) {
                break;
            }
            self.sidetrack_queue.remove(&s);
            self.granted.insert(Stamp::new(0, s.id));
            self.sidetracked.insert(s);
            out.push(Action::SidetrackGrant(s.id));
        }
    }

    /// Grants while the rules allow: sidetrack requests first (without a reserve, in stamp
    /// order with the pending ones), then pending requests within the capacity.
    fn fill(&mut self, out: &mut Vec<Action>) {
        loop {
            self.serve_sidetrack(out);
            if !self.has_room() || self.pending.is_empty() {
                break;
            }
            self.grant_best(out);
        }
    }

    /// Takes request `s` out of the pending set without granting it (the printed LKCS
    /// nomination does); returns whether it was there.
    pub fn drop_pending(&mut self, s: Stamp) -> bool {
        self.pending.remove(&s)
    }

    fn remove(&mut self, p: ProcessId) -> Option<Stamp> {
        let s = find(&self.granted, p)?;
        self.granted.remove(&s);
        self.sidetracked.remove(p);
        Some(s)
    }

    fn grant_best(&mut self, out: &mut Vec<Action>) {
        if let Some(s) = self.pending.pop_first() {
            self.granted.insert(s);
            out.push(Action::Grant(s.id));
        }
    }
}

/// The stamp of `p` in `set`, if any.
fn find<const N: usize>(set: &Stamps<N>, p: ProcessId) -> Option<Stamp> {
    set.as_slice().iter().find(|s| s.id == p).copied()
}

/// The sidetrack holders with their sidetrack requests' stamps, sorted by holder (hashed and
/// printed as the map it is).
#[derive(Clone, Default, PartialEq, Eq, Hash)]
struct Sidetracked(Vec<(ProcessId, Stamp)>);

impl Sidetracked {
    fn get(&self, p: ProcessId) -> Option<Stamp> {
        let i = self.0.binary_search_by_key(&p, |e| e.0).ok()?;
        Some(self.0[i].1)
    }

    fn insert(&mut self, s: Stamp) {
        match self.0.binary_search_by_key(&s.id, |e| e.0) {
            Ok(i) => self.0[i].1 = s,
            Err(i) => self.0.insert(i, (s.id, s)),
        }
    }

    fn remove(&mut self, p: ProcessId) {
        if let Ok(i) = self.0.binary_search_by_key(&p, |e| e.0) {
            self.0.remove(i);
        }
    }

    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    fn len(&self) -> usize {
        self.0.len()
    }
}

impl fmt::Debug for Sidetracked {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(self.0.iter().map(|(p, s)| (p, s)))
            .finish()
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
        let e = p.check().expect_err("P1 and P2 hold the one permission");
        assert!(
            e.contains("arbiter granted 2 permissions with capacity 1 (0 by the sidetrack)"),
            "{e}"
        );
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
        let e = p.check().expect_err("P1 and P2 hold the one permission");
        assert!(
            e.contains("arbiter granted 2 permissions with capacity 1 (0 by the sidetrack)"),
            "{e}"
        );
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
            run(|o| a.sidetrack(st(3, 2), o)),
            vec![Action::SidetrackGrant(ProcessId(2))]
        );
        assert!(a.pending().is_empty() && a.granted().contains(&st(0, 2)));
        a.check().unwrap();
        // the reserve is taken: P3 waits, and no normal grant uses the reserve
        assert_eq!(run(|o| a.sidetrack(st(4, 3), o)), vec![]);
        assert_eq!(a.sidetrack_queue(), &[st(4, 3)]);
        assert!(!a.has_room() && a.reserve_used());
        // a sidetrack permission is not given back by a Relinquish nobody asked for
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
            run(|o| p.sidetrack(st(2, 2), o)),
            vec![Action::SidetrackGrant(ProcessId(2))]
        );
        let e = p.check().expect_err("three permissions, one reserve");
        assert!(
            e.contains("arbiter granted 3 permissions with capacity 1 (1 by the sidetrack)"),
            "{e}"
        );
    }

    #[test]
    fn without_a_reserve_a_sidetrack_request_competes_by_stamp_within_the_capacity() {
        let mut a = Arbiter::new(1, [st(1, 1)], ArbiterRules::CORRECTED).without_reserve();
        assert!(!a.has_reserve() && a.reserve_used());
        run(|o| a.request(st(3, 2), o));
        // full: a sidetrack request waits for room instead of taking a reserve
        assert_eq!(run(|o| a.sidetrack(st(5, 3), o)), vec![]);
        a.check().unwrap();
        // room again: the older normal request goes first
        assert_eq!(
            run(|o| a.release(ProcessId(1), o)),
            vec![Action::Grant(ProcessId(2))]
        );
        assert_eq!(run(|o| a.request(st(9, 4), o)), vec![]);
        // then the sidetrack request, older than the remaining normal one
        assert_eq!(
            run(|o| a.release(ProcessId(2), o)),
            vec![Action::SidetrackGrant(ProcessId(3))]
        );
        assert_eq!(a.granted().len(), 1);
        a.check().unwrap();
        // a sidetrack permission beyond the capacity is a broken cap here
        let mut b = Arbiter::new(1, [st(1, 1)], ArbiterRules::PRINTED).without_reserve();
        run(|o| b.sidetrack(st(2, 2), o));
        let e = b.check().expect_err("two permissions, no reserve");
        assert!(
            e.contains("arbiter granted 2 permissions with capacity 1 (1 by the sidetrack)"),
            "{e}"
        );
    }

    #[test]
    fn an_older_sidetrack_request_takes_the_reserve_back() {
        let mut a = Arbiter::new(1, [st(1, 1)], ArbiterRules::CORRECTED);
        run(|o| a.sidetrack(st(7, 2), o));
        assert_eq!(run(|o| a.sidetrack(st(5, 3), o)), vec![]);
        // the owner asks the younger holder back; a second preemption waits for the first
        assert_eq!(
            run(|o| a.preempt_sidetrack(ProcessId(2), o)),
            vec![Action::Preempt(ProcessId(2))]
        );
        assert_eq!(run(|o| a.preempt_sidetrack(ProcessId(2), o)), vec![]);
        assert_eq!(a.preempting_sidetrack(), Some(ProcessId(2)));
        // given back: the older request gets the reserve, the younger one queues again
        assert_eq!(
            run(|o| a.relinquish(ProcessId(2), o)),
            vec![Action::SidetrackGrant(ProcessId(3))]
        );
        assert_eq!(a.sidetrack_queue(), &[st(7, 2)]);
        assert_eq!(a.sidetrack_stamp(ProcessId(3)), Some(st(5, 3)));
        a.check().unwrap();
    }

    #[test]
    fn a_parked_request_gives_its_permission_back_and_waits_until_unparked() {
        let mut a = Arbiter::new(1, [], ArbiterRules::CORRECTED);
        assert_eq!(
            run(|o| a.request(st(2, 2), o)),
            vec![Action::Grant(ProcessId(2))]
        );
        run(|o| a.request(st(3, 3), o));
        // P2 parks: its permission goes to P3, and P2's request is neither granted nor pending
        assert_eq!(
            run(|o| a.park(ProcessId(2), o)),
            vec![Action::Grant(ProcessId(3))]
        );
        assert_eq!(a.parked(), &[st(2, 2)]);
        assert!(a.pending().is_empty());
        assert_eq!(run(|o| a.release(ProcessId(3), o)), vec![]);
        // unparked, it competes again with its stamp
        assert_eq!(
            run(|o| a.unpark(ProcessId(2), o)),
            vec![Action::Grant(ProcessId(2))]
        );
        assert!(a.parked().is_empty());
        // a pending request parks and unparks the same way
        run(|o| a.request(st(4, 4), o));
        run(|o| a.park(ProcessId(4), o));
        assert!(a.pending().is_empty() && a.parked().len() == 1);
        // a preemption in progress can be forgotten, and a normal holder preempted by name
        a.cancel_preempt();
        assert_eq!(
            run(|o| a.preempt(ProcessId(2), o)),
            vec![Action::Preempt(ProcessId(2))]
        );
        // a sidetrack request parks and unparks too
        let mut b = Arbiter::new(0, [], ArbiterRules::CORRECTED);
        run(|o| b.sidetrack(st(1, 5), o));
        assert_eq!(
            run(|o| b.park(ProcessId(5), o)),
            vec![],
            "nothing to hand on: the reserve is free again"
        );
        assert_eq!(b.parked_sidetrack(), &[st(1, 5)]);
        assert_eq!(
            run(|o| b.unpark(ProcessId(5), o)),
            vec![Action::SidetrackGrant(ProcessId(5))]
        );
    }
}
