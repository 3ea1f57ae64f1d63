//! Maekawa's quorum mutual exclusion (Maekawa 1985, the `mx` object of Kamei & Kakugawa 2019,
//! §4 and \[14\]), in its deadlock-free form (DESIGN §3 "Maekawa").
//!
//! **Problem.** Mutual exclusion on n processes: at most one process in the CS at any time
//! (the global (0, 1)-CS problem). P_i enters after every member of its quorum Q_i has
//! *locked* for it; a member locks for one requester at a time, and any two quorums intersect
//! ([`Coterie`]), so two processes never hold all their locks at once.
//!
//! **Messages.** `Request(ts)` (to every member of Q_i, on Entry), `Locked` (the member locks
//! for the requester), `Failed` (the request waits behind a request with a smaller stamp),
//! `Inquire` (a request with a smaller stamp arrived: would the holder give the lock back?),
//! `Relinquish` (the lock comes back; the request waits again), `Release` (on Exit, to every
//! member of Q_i). Self-addressed messages travel like any other and are counted (P_i ∈ Q_i
//! for the built-in coteries).
//!
//! Each process plays two roles:
//! - **requester**: stamps its request with its Lamport clock, collects `Locked` from all of
//!   Q_i, enters; on Exit releases every member. On `Inquire` from a member whose lock it
//!   holds, while not in the CS, it *yields* (`Relinquish`) when a `Failed` (or an earlier
//!   yield) is outstanding for this request; otherwise it defers the `Inquire` and answers it
//!   when a `Failed` arrives, or drops it on entering the CS (its `Release` will answer it).
//!   An `Inquire` for a lock it does not hold (a stale one, crossed by its `Release`) is
//!   ignored.
//! - **arbiter** (for the processes of R_i): the shared permission [`Arbiter`], capacity one.
//!   Where the rules coincide it *is* the arbiter: `Request` → `Arbiter::request` (lock if
//!   free, else queue by stamp; when the new request outranks the holder and no `Inquire` is
//!   out for this lock, `Preempt` = `Inquire`: at most one per lock), `Release` →
//!   `Arbiter::release` (lock for the best queued request), `Relinquish` →
//!   `Arbiter::relinquish` (requeue the holder, lock for the best; one from a non-holder is
//!   ignored). Where Maekawa differs: **`Failed` has no counterpart in LMUTIN**, so it is
//!   derived here from the arbiter's state after every operation, leaving the arbiter
//!   unchanged: every queued request outranked by the holder or by another queued request is
//!   sent `Failed` once, as soon as it is outranked (not only on arrival), and again only
//!   after it has been locked for since; a holder that relinquished counts as told (its
//!   yield stands for the `Failed`, so none is sent).
//!
//! **Variables of P_i.**
//!
//! | Maekawa | here | meaning |
//! |---|---|---|
//! | clock | `clock` | Lamport clock; raised on Entry and on receipt of a Request |
//! | request | `stamp` | (ts, P_i) of the request in progress |
//! | locks held | `locked` | members of Q_i that locked for the request |
//! | failed | `failed` | members that sent `Failed` and have not locked since |
//! | relinquished | `yielded` | members P_i relinquished to and that have not locked since |
//! | deferred inquiries | `inquired` | members whose `Inquire` awaits an answer |
//! | locked-for / queue / inquired | `arbiter.granted` / `arbiter.pending` / `arbiter.preempting` | the arbiter role |
//! | — | `told_failed` | queued requesters already sent `Failed` (or that yielded) |
//!
//! **Complexity** (messages per Entry/Exit pair of P_i): 3|Q_i| without contention (Request,
//! Locked, Release per member of Q_i, self included); under contention up to 5|Q_i| in
//! Maekawa's analysis (a `Failed` or an `Inquire`–`Relinquish`–`Locked` exchange per
//! member). Messages an arbiter sends are charged to the pair whose message it was handling,
//! so a `Failed` sent to a queued request is charged to the request that outranked it.
//!
//! **Assumptions.** Reliable FIFO links (a `Failed` and an `Inquire` are never overtaken by
//! the `Locked` that follows them); atomic handlers; a valid coterie; the initial
//! configuration has nobody in the CS, or exactly one process, which then starts with the
//! lock of every member of its quorum (stamp (0, P_i)).
//!
//! # Deviations from the notes
//!
//! None: the code follows DESIGN §3 rule by rule. The 2019 paper prints no code for `mx`
//! (it cites Maekawa \[14\]). Two readings the notes leave open, settled here:
//! - a holder that relinquishes is not sent a `Failed` when its request is queued again: its
//!   own yield is recorded as outstanding, which is what a `Failed` would tell it, and saves
//!   a message per yield;
//! - a `Failed` received while `Inquire`s are deferred answers all of them at once.
//!
//! `--variant printed` ([`MaekawaRules::ARRIVAL_ONLY_FAILED`]) selects the one rule the notes
//! correct: `Failed` only to a request that arrives behind a higher-priority one (as
//! Maekawa's algorithm is usually stated), never to a queued request that a later arrival
//! outranks. It deadlocks: a request queued without a `Failed` (it outranked the holder on
//! arrival) is outranked by a newer one, never learns it, and keeps deferring the `Inquire`s
//! for the locks it holds while the newer request waits for them. The checker finds it on
//! complete:3 with the grid coterie from `in:0` in 4.6 K states
//! (`tests/check.rs`, `maekawa_failed_on_arrival_only_deadlocks_in_the_checker`); the
//! simulator on majority(5), seed 1 (`tests/maekawa.rs`, `failed_only_on_arrival_deadlocks`,
//! which also runs the notes' rule on all 200 seeds of the sweep):
//! `lkcs simulate --algorithm maekawa --variant printed --topology complete:5 --pairs 3
//! --delay uniform:1:12 --think 8 --seed 1` exits 1 (deadlock).
//!
//! # Unexpected messages
//!
//! A message no correct peer would send never panics and never breaks the lock's cap of one
//! (`tests/hostile.rs`). The requester role takes `Locked`, `Failed` and `Inquire` only from
//! the members of Q_i, the arbiter role `Request`, `Release` and `Relinquish` only from
//! processes of the system; anything else is ignored. (A `Request` from a process whose
//! quorum does not hold P_i is served like any other: it only takes a lock its sender does
//! not need.) A `Request` whose stamp the arbiter already has (a duplicate) is ignored; one
//! with a new stamp is queued like any other. A
//! `Release` or `Relinquish` from a process the lock is not held for, a `Locked` or `Failed`
//! while no Entry is pending, a `Failed` from a member whose lock is held, and an `Inquire`
//! for a lock not held, change nothing. The clock saturates at `u64::MAX` (a `Request`
//! stamped near it pins the clock; stamps then tie, broken by id).
//!
//! Network assumptions: FIFO links and at-most-once delivery, both needed. Without FIFO an
//! arbiter's Inquire can overtake the Locked it is about, is ignored, and the two requesters
//! wait for each other (`lkcs check --algorithm maekawa --topology complete:2 --network
//! unordered`: deadlock); a replayed Locked lets two processes into the CS (`--topology
//! complete:3 --network duplicating`: safety). See docs/checker.md.

use crate::arbiter::{Action, Arbiter, ArbiterRules};
use crate::config::{Bounds, Instance};
use crate::cs::{check_call, CsObject, CsState, Message, Outbox, Sequence, Variant};
use crate::error::{CallError, ConfigError, Problem};
use crate::id::{ProcessId, Stamp};
use crate::quorum::Coterie;
use crate::topology::Topology;
use std::borrow::Cow;
use std::collections::BTreeSet;

/// The messages of Maekawa's algorithm. The sender is known from the link.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum MaekawaMsg {
    /// Asks the receiver to lock for the request stamped `(ts, sender)`.
    Request {
        /// The requester's clock.
        ts: u64,
    },
    /// The sender locked for the receiver's request.
    Locked,
    /// The receiver's request waits behind one with a smaller stamp.
    Failed,
    /// A request with a smaller stamp waits for the lock the receiver holds.
    Inquire,
    /// Gives a lock back after an `Inquire`.
    Relinquish,
    /// The sender left the CS: its lock is free.
    Release,
}

impl Message for MaekawaMsg {
    fn kind(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            MaekawaMsg::Request { .. } => "Request",
            MaekawaMsg::Locked => "Locked",
            MaekawaMsg::Failed => "Failed",
            MaekawaMsg::Inquire => "Inquire",
            MaekawaMsg::Relinquish => "Relinquish",
            MaekawaMsg::Release => "Release",
        })
    }
}

/// Which `Failed` rule to follow (see "Deviations from the notes").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MaekawaRules {
    /// Send `Failed` only to an arriving request that is outranked on arrival (deadlocks);
    /// the notes' rule also fails a queued request as soon as a later arrival outranks it.
    pub failed_on_arrival_only: bool,
}

impl MaekawaRules {
    /// The rules of the notes (DESIGN §3).
    pub const NOTES: MaekawaRules = MaekawaRules {
        failed_on_arrival_only: false,
    };
    /// `Failed` on arrival only.
    pub const ARRIVAL_ONLY_FAILED: MaekawaRules = MaekawaRules {
        failed_on_arrival_only: true,
    };
}

impl From<Variant> for MaekawaRules {
    fn from(v: Variant) -> Self {
        match v {
            Variant::Corrected | Variant::Trip => MaekawaRules::NOTES,
            Variant::Printed => MaekawaRules::ARRIVAL_ONLY_FAILED,
        }
    }
}

/// One process of Maekawa's algorithm.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Maekawa {
    id: ProcessId,
    quorum: Vec<ProcessId>,
    /// The number of processes (messages from outside `0..n` are ignored).
    n: usize,
    state: CsState,
    pending: Option<Sequence>,
    clock: u64,
    stamp: Option<Stamp>,
    locked: BTreeSet<ProcessId>,
    failed: BTreeSet<ProcessId>,
    yielded: BTreeSet<ProcessId>,
    inquired: BTreeSet<ProcessId>,
    arbiter: Arbiter,
    told_failed: BTreeSet<ProcessId>,
    rules: MaekawaRules,
}

impl Maekawa {
    /// Builds the whole system on `coterie`: the instance is `complete:n` with bounds
    /// (0, 1) everywhere, and `initial` must have at most one process in the CS (that process
    /// starts with the locks of its whole quorum). Follows the notes' rules.
    ///
    /// ```
    /// use lkcs::algo::maekawa::Maekawa;
    /// use lkcs::cs::CsState;
    /// use lkcs::quorum::Coterie;
    /// use lkcs::sim::{simulate, SimConfig, Workload};
    ///
    /// let grid = Coterie::grid(25)?; // 5x5: every quorum has 2·5−1 = 9 members
    /// let (inst, procs) = Maekawa::system(&grid, &[CsState::OutCs; 25])?;
    /// let cfg = SimConfig { pairs: 2, workload: Workload::Sequential, ..SimConfig::default() };
    /// let report = simulate(&inst, procs, &cfg);
    /// assert!(report.ok());
    /// // no contention: Request, Locked, Release per member, 3|Q| = 27 per pair
    /// assert!(report.pairs.iter().all(|p| p.messages == 27));
    /// # Ok::<(), lkcs::ConfigError>(())
    /// ```
    pub fn system(
        coterie: &Coterie,
        initial: &[CsState],
    ) -> Result<(Instance, Vec<Maekawa>), ConfigError> {
        Maekawa::system_with(coterie, initial, MaekawaRules::NOTES)
    }

    /// [`Maekawa::system`] with the given rules.
    pub fn system_with(
        coterie: &Coterie,
        initial: &[CsState],
        rules: MaekawaRules,
    ) -> Result<(Instance, Vec<Maekawa>), ConfigError> {
        let inst = Maekawa::instance(coterie.len())?;
        if initial.len() != inst.len() {
            return Err(ConfigError::one(Problem::InitialLength {
                given: initial.len(),
                n: inst.len(),
            }));
        }
        let in_cs: Vec<ProcessId> = inst
            .topology()
            .processes()
            .filter(|p| initial[p.index()] == CsState::InCs)
            .collect();
        if in_cs.len() > 1 {
            let ids: Vec<String> = in_cs.iter().map(ToString::to_string).collect();
            return Err(ConfigError::one(Problem::Invalid(format!(
                "mutual exclusion starts with at most one process in the CS; the initial configuration has {} ({})",
                in_cs.len(),
                ids.join(", ")
            ))));
        }
        let holder = in_cs.first().copied();
        let procs = inst
            .topology()
            .processes()
            .map(|p| Maekawa::new(coterie, p, holder, rules))
            .collect();
        Ok((inst, procs))
    }

    /// The instance Maekawa solves on n processes: `complete:n`, bounds (0, 1).
    pub fn instance(n: usize) -> Result<Instance, ConfigError> {
        let t = Topology::complete(n)?;
        Instance::new(t, vec![Bounds { l: 0, k: 1 }; n])
    }

    /// Process `id` on `coterie`; `holder` is the process initially in the CS, if any (it
    /// holds the lock of every member of its quorum). Does not validate: see
    /// [`Maekawa::system`].
    pub fn new(
        coterie: &Coterie,
        id: ProcessId,
        holder: Option<ProcessId>,
        rules: MaekawaRules,
    ) -> Maekawa {
        let initially = holder
            .filter(|h| coterie.quorum(*h).contains(&id))
            .map(|h| Stamp::new(0, h));
        let in_cs = holder == Some(id);
        Maekawa {
            id,
            quorum: coterie.quorum(id).to_vec(),
            n: coterie.len(),
            state: if in_cs { CsState::InCs } else { CsState::OutCs },
            pending: None,
            clock: 0,
            stamp: None,
            locked: if in_cs {
                coterie.quorum(id).iter().copied().collect()
            } else {
                BTreeSet::new()
            },
            failed: BTreeSet::new(),
            yielded: BTreeSet::new(),
            inquired: BTreeSet::new(),
            arbiter: Arbiter::new(1, initially, ArbiterRules::CORRECTED),
            told_failed: BTreeSet::new(),
            rules,
        }
    }

    /// The arbiter role (for inspection in tests and checkers).
    pub fn arbiter(&self) -> &Arbiter {
        &self.arbiter
    }

    /// Q_i.
    pub fn quorum(&self) -> &[ProcessId] {
        &self.quorum
    }

    /// The members whose lock P_i holds for its request (or for its stay in the CS).
    pub fn locks_held(&self) -> &BTreeSet<ProcessId> {
        &self.locked
    }

    /// Whether P_i would yield to an `Inquire` now: a `Failed` or a yield is outstanding.
    fn may_yield(&self) -> bool {
        !self.failed.is_empty() || !self.yielded.is_empty()
    }

    fn relinquish(&mut self, to: ProcessId, out: &mut Outbox<MaekawaMsg>) {
        self.locked.remove(&to);
        self.yielded.insert(to);
        out.send(to, MaekawaMsg::Relinquish);
    }

    /// Sends the arbiter's actions: `Grant` = `Locked`, `Preempt` = `Inquire`.
    fn apply(&mut self, actions: Vec<Action>, out: &mut Outbox<MaekawaMsg>) {
        for a in actions {
            match a {
                Action::Grant(p) | Action::SidetrackGrant(p) => {
                    self.told_failed.remove(&p);
                    out.send(p, MaekawaMsg::Locked);
                }
                Action::Preempt(p) => out.send(p, MaekawaMsg::Inquire),
            }
        }
    }

    /// The notes' `Failed` rule: every queued request outranked by the holder or another
    /// queued request is told once.
    fn fail_outranked(&mut self, out: &mut Outbox<MaekawaMsg>) {
        let best = self
            .arbiter
            .granted()
            .first()
            .into_iter()
            .chain(self.arbiter.pending().first())
            .min()
            .copied();
        let outranked: Vec<ProcessId> = self
            .arbiter
            .pending()
            .iter()
            .filter(|s| Some(**s) != best)
            .map(|s| s.id)
            .collect();
        for p in outranked {
            if self.told_failed.insert(p) {
                out.send(p, MaekawaMsg::Failed);
            }
        }
    }
}

impl CsObject for Maekawa {
    type Msg = MaekawaMsg;

    fn id(&self) -> ProcessId {
        self.id
    }

    fn state(&self) -> CsState {
        self.state
    }

    fn pending(&self) -> Option<Sequence> {
        self.pending
    }

    fn begin_entry(&mut self, out: &mut Outbox<MaekawaMsg>) -> Result<(), CallError> {
        check_call(self.state, self.pending, Sequence::Entry)?;
        self.clock = self.clock.saturating_add(1);
        self.stamp = Some(Stamp::new(self.clock, self.id));
        self.locked.clear();
        self.failed.clear();
        self.yielded.clear();
        self.inquired.clear();
        self.pending = Some(Sequence::Entry);
        for &q in &self.quorum {
            out.send(q, MaekawaMsg::Request { ts: self.clock });
        }
        Ok(())
    }

    fn begin_exit(&mut self, out: &mut Outbox<MaekawaMsg>) -> Result<(), CallError> {
        check_call(self.state, self.pending, Sequence::Exit)?;
        self.state = CsState::OutCs;
        self.stamp = None;
        self.locked.clear();
        for &q in &self.quorum {
            out.send(q, MaekawaMsg::Release);
        }
        out.complete();
        Ok(())
    }

    fn on_message(&mut self, from: ProcessId, msg: MaekawaMsg, out: &mut Outbox<MaekawaMsg>) {
        let waiting = self.pending == Some(Sequence::Entry);
        let peer = match msg {
            MaekawaMsg::Request { .. } | MaekawaMsg::Release | MaekawaMsg::Relinquish => {
                from.index() < self.n
            }
            MaekawaMsg::Locked | MaekawaMsg::Failed | MaekawaMsg::Inquire => {
                self.quorum.contains(&from)
            }
        };
        if !peer {
            return;
        }
        match msg {
            // ---- arbiter role ----
            MaekawaMsg::Request { ts } => {
                let s = Stamp::new(ts, from);
                if self.arbiter.knows(s) {
                    return;
                }
                self.clock = self.clock.max(ts);
                let mut actions = Vec::new();
                self.arbiter.request(s, &mut actions);
                self.apply(actions, out);
                if self.rules.failed_on_arrival_only {
                    let behind = self.arbiter.pending().contains(&s)
                        && (self.arbiter.granted().iter().any(|g| *g < s)
                            || self.arbiter.pending().first() != Some(&s));
                    if behind && self.told_failed.insert(from) {
                        out.send(from, MaekawaMsg::Failed);
                    }
                } else {
                    self.fail_outranked(out);
                }
            }
            MaekawaMsg::Release => {
                let mut actions = Vec::new();
                self.arbiter.release(from, &mut actions);
                self.apply(actions, out);
                if !self.rules.failed_on_arrival_only {
                    self.fail_outranked(out);
                }
            }
            MaekawaMsg::Relinquish => {
                if self.arbiter.holds(from) {
                    let mut actions = Vec::new();
                    self.arbiter.relinquish(from, &mut actions);
                    // the yield stands for a Failed: the requester knows it waits
                    self.told_failed.insert(from);
                    self.apply(actions, out);
                    if !self.rules.failed_on_arrival_only {
                        self.fail_outranked(out);
                    }
                }
            }
            // ---- requester role ----
            MaekawaMsg::Locked => {
                if !waiting {
                    return;
                }
                self.locked.insert(from);
                self.failed.remove(&from);
                self.yielded.remove(&from);
                if self.quorum.iter().all(|q| self.locked.contains(q)) {
                    // the Release on Exit answers any deferred Inquire
                    self.inquired.clear();
                    self.failed.clear();
                    self.yielded.clear();
                    self.state = CsState::InCs;
                    self.pending = None;
                    out.complete();
                }
            }
            MaekawaMsg::Failed => {
                if !waiting || self.locked.contains(&from) {
                    return;
                }
                self.failed.insert(from);
                let deferred = std::mem::take(&mut self.inquired);
                for q in deferred {
                    if self.locked.contains(&q) {
                        self.relinquish(q, out);
                    }
                }
            }
            MaekawaMsg::Inquire => {
                // in the CS (not waiting) the Release will answer; a lock not held is stale
                if !waiting || !self.locked.contains(&from) {
                    return;
                }
                if self.may_yield() {
                    self.relinquish(from, out);
                } else {
                    self.inquired.insert(from);
                }
            }
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.arbiter.check()
    }

    fn awaiting(&self) -> Vec<ProcessId> {
        if self.pending != Some(Sequence::Entry) {
            return Vec::new();
        }
        let missing = |q: &&ProcessId| !self.locked.contains(q);
        self.quorum.iter().filter(missing).copied().collect()
    }

    fn lent_to(&self) -> Vec<ProcessId> {
        self.arbiter.granted().iter().map(|s| s.id).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u32) -> ProcessId {
        ProcessId(i)
    }

    /// majority(3): Q_0 = {0,1}, Q_1 = {1,2}, Q_2 = {0,2}; nobody in the CS.
    fn three() -> Vec<Maekawa> {
        let c = Coterie::majority(3).unwrap();
        Maekawa::system(&c, &[CsState::OutCs; 3]).unwrap().1
    }

    fn sends(out: &mut Outbox<MaekawaMsg>) -> Vec<(u32, MaekawaMsg)> {
        out.drain().map(|(to, m)| (to.0, m)).collect()
    }

    fn req(ts: u64) -> MaekawaMsg {
        MaekawaMsg::Request { ts }
    }

    #[test]
    fn entry_requests_the_whole_quorum_self_included() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[0].begin_entry(&mut out).unwrap();
        assert_eq!(sends(&mut out), vec![(0, req(1)), (1, req(1))]);
        assert!(!out.completed());
        assert_eq!(procs[0].pending(), Some(Sequence::Entry));
    }

    #[test]
    fn a_free_arbiter_locks_at_once() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[1].on_message(p(0), req(1), &mut out);
        assert_eq!(sends(&mut out), vec![(0, MaekawaMsg::Locked)]);
        assert!(procs[1].arbiter().holds(p(0)));
    }

    #[test]
    fn entry_completes_on_the_last_lock_and_exit_releases_everyone() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[0].begin_entry(&mut out).unwrap();
        out.drain();
        procs[0].on_message(p(1), MaekawaMsg::Locked, &mut out);
        assert!(!out.completed());
        procs[0].on_message(p(0), MaekawaMsg::Locked, &mut out);
        assert!(out.take_completed());
        assert_eq!(procs[0].state(), CsState::InCs);
        procs[0].begin_exit(&mut out).unwrap();
        assert!(out.completed());
        assert_eq!(
            sends(&mut out),
            vec![(0, MaekawaMsg::Release), (1, MaekawaMsg::Release)]
        );
        assert_eq!(procs[0].state(), CsState::OutCs);
    }

    #[test]
    fn a_request_behind_the_holder_fails_on_arrival() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[1].on_message(p(0), req(1), &mut out);
        out.drain();
        procs[1].on_message(p(2), req(5), &mut out);
        assert_eq!(sends(&mut out), vec![(2, MaekawaMsg::Failed)]);
        // P2 is told once only; the next arrival behind the holder is told too
        procs[1].on_message(p(1), req(7), &mut out);
        assert_eq!(sends(&mut out), vec![(1, MaekawaMsg::Failed)]);
    }

    #[test]
    fn an_outranking_request_inquires_the_holder_once_per_lock() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[1].on_message(p(2), req(5), &mut out);
        out.drain();
        procs[1].on_message(p(1), req(3), &mut out);
        assert_eq!(sends(&mut out), vec![(2, MaekawaMsg::Inquire)]);
        // a better one still: no second Inquire for this lock, and P1 (3) is now outranked
        procs[1].on_message(p(0), req(2), &mut out);
        assert_eq!(sends(&mut out), vec![(1, MaekawaMsg::Failed)]);
    }

    #[test]
    fn printed_rule_fails_only_on_arrival() {
        let c = Coterie::majority(3).unwrap();
        let mut a = Maekawa::new(&c, p(1), None, MaekawaRules::ARRIVAL_ONLY_FAILED);
        let mut out = Outbox::new();
        a.on_message(p(2), req(5), &mut out);
        a.on_message(p(1), req(3), &mut out);
        out.drain();
        a.on_message(p(0), req(2), &mut out);
        assert_eq!(
            sends(&mut out),
            vec![],
            "P1's queued request is never failed"
        );
    }

    #[test]
    fn release_locks_for_the_best_queued_request() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[1].on_message(p(0), req(1), &mut out);
        procs[1].on_message(p(2), req(4), &mut out);
        procs[1].on_message(p(1), req(3), &mut out);
        out.drain();
        procs[1].on_message(p(0), MaekawaMsg::Release, &mut out);
        assert_eq!(sends(&mut out), vec![(1, MaekawaMsg::Locked)]);
        assert!(procs[1].arbiter().holds(p(1)));
        procs[1].check_invariants().unwrap();
    }

    #[test]
    fn relinquish_requeues_the_holder_without_a_failed() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[1].on_message(p(2), req(5), &mut out);
        procs[1].on_message(p(1), req(3), &mut out);
        out.drain();
        procs[1].on_message(p(2), MaekawaMsg::Relinquish, &mut out);
        assert_eq!(sends(&mut out), vec![(1, MaekawaMsg::Locked)]);
        assert!(procs[1].arbiter().pending().contains(&Stamp::new(5, p(2))));
        // a relinquish from a non-holder is ignored
        procs[1].on_message(p(0), MaekawaMsg::Relinquish, &mut out);
        assert_eq!(sends(&mut out), vec![]);
        procs[1].check_invariants().unwrap();
    }

    #[test]
    fn inquire_is_deferred_until_a_failed_then_answered() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[0].begin_entry(&mut out).unwrap();
        procs[0].on_message(p(1), MaekawaMsg::Locked, &mut out);
        out.drain();
        procs[0].on_message(p(1), MaekawaMsg::Inquire, &mut out);
        assert_eq!(sends(&mut out), vec![], "no Failed yet: defer");
        procs[0].on_message(p(0), MaekawaMsg::Failed, &mut out);
        assert_eq!(sends(&mut out), vec![(1, MaekawaMsg::Relinquish)]);
        assert!(procs[0].locks_held().is_empty());
    }

    #[test]
    fn inquire_is_answered_at_once_after_a_failed_or_a_yield() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[0].begin_entry(&mut out).unwrap();
        procs[0].on_message(p(1), MaekawaMsg::Locked, &mut out);
        procs[0].on_message(p(0), MaekawaMsg::Failed, &mut out);
        out.drain();
        procs[0].on_message(p(1), MaekawaMsg::Inquire, &mut out);
        assert_eq!(sends(&mut out), vec![(1, MaekawaMsg::Relinquish)]);
        // P1 locks again, the Failed from P0 is still outstanding (P0 has not locked)
        procs[0].on_message(p(1), MaekawaMsg::Locked, &mut out);
        procs[0].on_message(p(1), MaekawaMsg::Inquire, &mut out);
        assert_eq!(sends(&mut out), vec![(1, MaekawaMsg::Relinquish)]);
    }

    #[test]
    fn a_yield_alone_allows_the_next_yield() {
        // majority(5): Q_0 = {0,1,2}
        let c = Coterie::majority(5).unwrap();
        let mut a = Maekawa::new(&c, p(0), None, MaekawaRules::NOTES);
        let mut out = Outbox::new();
        a.begin_entry(&mut out).unwrap();
        a.on_message(p(1), MaekawaMsg::Locked, &mut out);
        a.on_message(p(2), MaekawaMsg::Locked, &mut out);
        a.on_message(p(0), MaekawaMsg::Failed, &mut out);
        out.drain();
        a.on_message(p(1), MaekawaMsg::Inquire, &mut out);
        assert_eq!(sends(&mut out), vec![(1, MaekawaMsg::Relinquish)]);
        // P0 locks (its Failed is gone), the yield to P1 still stands
        a.on_message(p(0), MaekawaMsg::Locked, &mut out);
        a.on_message(p(2), MaekawaMsg::Inquire, &mut out);
        assert_eq!(sends(&mut out), vec![(2, MaekawaMsg::Relinquish)]);
    }

    #[test]
    fn inquire_in_the_cs_or_for_a_lock_not_held_is_ignored() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[0].begin_entry(&mut out).unwrap();
        procs[0].on_message(p(0), MaekawaMsg::Failed, &mut out);
        out.drain();
        // P1 has not locked for P0: stale
        procs[0].on_message(p(1), MaekawaMsg::Inquire, &mut out);
        assert_eq!(sends(&mut out), vec![]);
        procs[0].on_message(p(1), MaekawaMsg::Locked, &mut out);
        procs[0].on_message(p(0), MaekawaMsg::Locked, &mut out);
        assert!(out.take_completed());
        procs[0].on_message(p(1), MaekawaMsg::Inquire, &mut out);
        assert_eq!(sends(&mut out), vec![], "in the CS: the Release answers");
    }

    #[test]
    fn request_raises_the_clock() {
        let mut procs = three();
        let mut out = Outbox::new();
        procs[0].on_message(p(2), req(7), &mut out);
        out.drain();
        procs[0].begin_entry(&mut out).unwrap();
        assert_eq!(out.sends()[0].1, req(8));
    }

    #[test]
    fn one_process_may_start_in_the_cs_with_its_quorum_locked() {
        let c = Coterie::grid(4).unwrap();
        let init = [
            CsState::OutCs,
            CsState::InCs,
            CsState::OutCs,
            CsState::OutCs,
        ];
        let (inst, procs) = Maekawa::system(&c, &init).unwrap();
        assert_eq!(inst.bounds(p(0)), Bounds { l: 0, k: 1 });
        assert_eq!(procs[1].state(), CsState::InCs);
        for q in 0..4u32 {
            let locked_for_p1 = procs[q as usize].arbiter().holds(p(1));
            assert_eq!(locked_for_p1, c.quorum(p(1)).contains(&p(q)), "P{q}");
        }
        // two in the CS: refused in one line naming them
        let init = [CsState::InCs, CsState::InCs, CsState::OutCs, CsState::OutCs];
        let err = Maekawa::system(&c, &init).unwrap_err();
        assert_eq!(err.problems.len(), 1, "{err}");
        assert!(err.to_string().contains("2 (P0, P1)"), "{err}");
        let err = Maekawa::system(&c, &[CsState::OutCs; 3]).expect_err("3 states for 4");
        assert_eq!(
            err.problems,
            vec![Problem::InitialLength { given: 3, n: 4 }]
        );
        assert!(
            err.to_string()
                .contains("initial configuration has 3 states for 4 processes"),
            "{err}"
        );
    }

    #[test]
    fn calling_convention_is_an_error_not_a_panic() {
        let mut procs = three();
        let mut out = Outbox::new();
        assert_eq!(procs[0].begin_exit(&mut out), Err(CallError::NotInCs));
        procs[0].begin_entry(&mut out).unwrap();
        assert_eq!(procs[0].begin_entry(&mut out), Err(CallError::Busy));
    }
}
