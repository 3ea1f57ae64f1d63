//! l_i-LMUTIN: generalized local l_i-mutual inclusion (Kamei & Kakugawa 2017, §3,
//! Algorithms 1–2), and k_i-LMUTEX = Complement(l'_i-LMUTIN) with l'_i = |N_i|+1−k_i
//! (§4, Theorem 2).
//!
//! **Problem.** On a graph, every process P_i keeps at least l_i processes of its closed
//! neighbourhood N_i ∪ {P_i} in the CS (its upper bound is k_i = |N_i|+1, i.e. none). A process
//! leaving the CS needs a permission from every member of its closed neighbourhood; each
//! process grants at most |N_i|+1−l_i such permissions at a time, so at least l_i members stay in.
//!
//! **Messages.** `Request(ts)` (to exit), `Grant`, `Release` (sent on entering the CS: the
//! permission is free again), `Preempt` (give the permission back to a request with a smaller
//! stamp), `Relinquish` (the permission comes back). Self-addressed messages travel like any
//! other and are counted: |N_i|+1 includes P_i.
//!
//! **Variables of P_i.**
//!
//! | paper | here | meaning |
//! |---|---|---|
//! | `state_i` | `state` | InCS / OutCS |
//! | `ts_i` | `ts` | Lamport clock; raised on Exit and on receipt of a Request |
//! | `nGrants_i` | `granters` (set) / `n_grants` (printed counter) | permissions held for the exit in progress |
//! | `grantedTo_i` | `arbiter.granted` | stamps of the exits P_i permitted and not yet released |
//! | `pendingReq_i` | `arbiter.pending` | stamps of the exits waiting for P_i's permission |
//! | `preemptingNow_i` | `arbiter.preempting` | the holder P_i is preempting, if any |
//!
//! **Complexity** (messages per Exit/Entry pair of P_i): 3(|N_i|+1) in the best case
//! (Request, Grant, Release to and from every member of N_i ∪ {P_i}) and 6(|N_i|+1) in the
//! worst case (Preempt, Relinquish and a re-grant per member); Lemma 3. Deviation 5 adds,
//! under contention only, a Probe and a Kept per holder asked, a Blocked per blocking
//! arbiter, and a Park, an Unpark and a re-grant per permission set aside.
//!
//! **Assumptions.** Reliable FIFO links; every handler is atomic; the initial configuration
//! is safe (l_i ≤ |CS_i(C0)|); 0 ≤ l_i ≤ |N_i|.
//!
//! # Deviations from the paper
//!
//! Each has a regression test in `tests/lmutin_deviations.rs` that runs the printed rule
//! (selected alone through [`LmutinRules`], or with the one partner it needs to show) in the
//! concurrent simulator (3 pairs per process, delays uniform in 1..=6, think times in 0..=3
//! unless stated) and finds a failure, and shows the corrected rules hold on all 300 seeds
//! of the same sweep. The whole printed variant is reproducible from the command line:
//! `lkcs simulate --algorithm lmutin --variant printed --topology complete:3 --l 1
//! --initial in:0 --pairs 3 --delay uniform:1:6 --think 3 --seed 1` exits 1.
//!
//! 1. **Initial grants go to the OutCS members.** The extracted Algorithm 1 initialises
//!    `grantedTo_i` with the InCS members of N_i ∪ {P_i} (the overline is lost); a grant is a
//!    permission to *exit*, so the processes out of the CS hold them. With the literal
//!    reading on `complete:3`, l = 1, only P0 in the CS, every arbiter lists only P0 while its
//!    capacity is 2, so P0's exit is granted at once: with the printed Release handler, P0
//!    exits before anyone enters and no process is in the CS (seed 5 with think times in
//!    0..=30). With the Release capped, the phantom grants fill the arbiters instead and the
//!    system deadlocks (`in:1`, seed 6).
//! 2. **Grants are a set of granters, not a counter.** Under the corrected Preempt handler
//!    (item 3) the two agree: no run of the sweep tells them apart. Under the printed Preempt
//!    handler, the counter drops for a permission that was never held and the exit waits for
//!    a grant that will not come: deadlock on `complete:3`, l = 1, `in:1`, seed 65, where the
//!    set never deadlocks. The corrected handler needs to know *which* granters it holds, so
//!    the set stays.
//! 3. **A Preempt is honoured only for a permission actually held.** The printed handler
//!    relinquishes whenever P_i is InCS. A Preempt that crosses P_i's Release arrives after
//!    P_i re-entered (and perhaps asked again); P_i then "returns" a permission its arbiter no
//!    longer records, and the arbiter, on the printed Relinquish handler, grants its best
//!    pending request anyway: one permission too many, and l breaks (`complete:3`, l = 1,
//!    `in:1`, seed 27). Corrected: relinquish only while the exit is pending and the Preempt's
//!    sender is among the granters; an arbiter ignores a Relinquish from a process it has not
//!    granted.
//! 4. **Release re-grants only while the capacity holds.** The printed Release handler grants
//!    the best pending request unconditionally. After a stale Relinquish removed the
//!    releaser's entry (item 3's requester rule), its Release frees nothing and still grants:
//!    `ring:4`, l = 1, `in:1,3`, seed 26 breaks l, while the capped Release with the same
//!    stale Relinquish passes every seed.
//! 5. **An exit held by a bound sets its permissions aside** (an addition, for failure
//!    locality; `docs/failure-locality.md` gives the argument). The paper's exit keeps the
//!    permissions it holds while it waits (hold-and-wait), so a member that stops moving
//!    freezes members any number of hops away that no bound holds: `ring:8`, l = 2, P0
//!    stopped out of the CS starves P3, P4 and P5 (`--printed-rule hold-and-wait`, seed 0:
//!    failure locality 4). The rule:
//!    - a Preempt reaching a process whose exit completed is answered `Kept` (the permission
//!      is held for its state), and the arbiter never preempts that holder again;
//!    - a full arbiter with a request waiting preempts the youngest holder not known to keep
//!      when it is younger than the best request; otherwise it sends `Probe` to each older
//!      holder not known to keep, answered `Kept` at once or when that exit completes;
//!    - once every holder is known to keep, every waiting request is held by a bound there
//!      and is told `Blocked` (once while it waits);
//!    - the blocked requester `Park`s every permission it holds (and each one granted while
//!      it is blocked); a parked request is neither granted nor preempted; when every
//!      arbiter that blocked it has granted, it `Unpark`s them and they compete again with
//!      the request's stamp.
//!
//!    None of it runs without contention, so the best case stays 3(|N_i|+1). Safety is
//!    unchanged (Park and Unpark only return or re-queue permissions). With one member
//!    stopped, every member that starves is held by a bound, so none is farther than 2 hops
//!    (`tests/lmutin_deviations.rs::a_blocked_exit_sets_its_permissions_aside`,
//!    `cargo run --release --example stop_sweep`).
//!
//! The Lamport clock is raised to the stamp of every Request received (the paper leaves the
//! clock's maintenance implicit); the liveness proof needs a process's next stamp to exceed
//! the requests it has seen.
//!
//! # Unexpected messages
//!
//! A message no correct peer would send never panics and never breaks the arbiter's cap
//! (`tests/hostile.rs`). Every message from a process outside N_i ∪ {P_i} is ignored (its
//! sender would otherwise get permissions, or count as a granter). A Request whose stamp the
//! arbiter already has (a duplicate) is ignored; a Request with a new stamp is queued like
//! any other, whatever the requester already holds. A Grant while no exit is pending is
//! ignored, and a repeated one counts once (the printed counter counts it again). A Preempt
//! for a permission not held (corrected rules), a Release or a Relinquish from a process
//! the arbiter holds nothing for (corrected rules), change nothing. The clock saturates at
//! `u64::MAX`: a Request stamped near it pins the clock there, and later stamps tie, broken
//! by id.
//!
//! Network assumptions (LMUTIN and LMUTEX): FIFO links and at-most-once delivery, both
//! needed. Without FIFO an arbiter's Preempt can overtake the Grant it is about, is ignored,
//! and both processes wait for ever (`lkcs check --algorithm lmutin --topology path:2 --l 1
//! --network unordered`: deadlock); a replayed Grant is counted twice and breaks the bounds
//! (`--network duplicating`: safety). See docs/checker.md.

use crate::arbiter::{Action, Arbiter, ArbiterRules};
use crate::config::{Bounds, Instance};
use crate::cs::{check_call, Complement, CsObject, CsState, Message, Outbox, Sequence, Variant};
use crate::error::{CallError, ConfigError, Problem};
use crate::id::{ProcessId, Stamp};
use crate::small_set::SmallSet;
use crate::topology::Topology;
use std::borrow::Cow;

/// Inline room of a closed neighbourhood (a torus's or a grid's: 5).
const INLINE_CLOSED: usize = 6;

/// k_i-LMUTEX: the complement of l'_i-LMUTIN with l'_i = |N_i|+1−k_i.
pub type Lmutex = Complement<Lmutin>;

/// The messages of LMUTIN (and LMUTEX). The sender is known from the link.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum LmutinMsg {
    /// Asks for permission to exit the CS, stamped `(ts, sender)`.
    Request {
        /// The requester's clock.
        ts: u64,
    },
    /// Gives permission to exit.
    Grant,
    /// The sender entered the CS: its permission is free.
    Release,
    /// Asks the receiver to return its permission.
    Preempt,
    /// Returns a permission after a Preempt.
    Relinquish,
    /// Answers a Preempt from a process whose exit completed: the permission is held for its
    /// state (out of the CS) and comes back only on its Release (deviation 5).
    Kept,
    /// Asks whether the receiver holds the sender's permission for its state: answered with
    /// `Kept` at once when its exit completed, or when it completes (deviation 5).
    Probe,
    /// The receiver's exit waits at the sender, whose permissions are all held for states:
    /// it is held by a bound there (deviation 5).
    Blocked,
    /// The sender sets its request aside: the permission granted to it comes back, and the
    /// request is neither granted nor preempted until `Unpark` (deviation 5).
    Park,
    /// The sender's parked request competes again with its stamp (deviation 5).
    Unpark,
}

impl LmutinMsg {
    /// Whether this message belongs to deviation 5 (`Kept`, `Probe`, `Blocked`, `Park`,
    /// `Unpark`): the paper's rules never send one, and a process with
    /// [`LmutinRules::hold_and_wait`] ignores it.
    pub fn is_set_aside_rule(&self) -> bool {
        matches!(
            self,
            LmutinMsg::Kept
                | LmutinMsg::Probe
                | LmutinMsg::Blocked
                | LmutinMsg::Park
                | LmutinMsg::Unpark
        )
    }
}

impl Message for LmutinMsg {
    fn kind(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            LmutinMsg::Request { .. } => "Request",
            LmutinMsg::Grant => "Grant",
            LmutinMsg::Release => "Release",
            LmutinMsg::Preempt => "Preempt",
            LmutinMsg::Relinquish => "Relinquish",
            LmutinMsg::Kept => "Kept",
            LmutinMsg::Probe => "Probe",
            LmutinMsg::Blocked => "Blocked",
            LmutinMsg::Park => "Park",
            LmutinMsg::Unpark => "Unpark",
        })
    }
}

/// Which printed rules to follow; see "Deviations from the paper". Each field `true` selects
/// the printed rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LmutinRules {
    /// Deviation 1: initial grants to the InCS members.
    pub printed_initial_grants: bool,
    /// Deviation 2: count grants instead of collecting granters.
    pub counted_grants: bool,
    /// Deviation 3 (requester side): relinquish on every Preempt received while InCS.
    pub unguarded_preempt: bool,
    /// Deviations 3 (arbiter side) and 4.
    pub arbiter: ArbiterRules,
    /// Deviation 5 turned off: an exit blocked by a bound keeps the permissions it holds
    /// (hold-and-wait; no Kept, Blocked, Park or Unpark), as the paper's algorithm does.
    pub hold_and_wait: bool,
}

impl LmutinRules {
    /// The corrected algorithm.
    pub const CORRECTED: LmutinRules = LmutinRules {
        printed_initial_grants: false,
        counted_grants: false,
        unguarded_preempt: false,
        arbiter: ArbiterRules::CORRECTED,
        hold_and_wait: false,
    };
    /// Every rule as printed.
    pub const PRINTED: LmutinRules = LmutinRules {
        printed_initial_grants: true,
        counted_grants: true,
        unguarded_preempt: true,
        arbiter: ArbiterRules::PRINTED,
        hold_and_wait: true,
    };
}

impl From<Variant> for LmutinRules {
    fn from(v: Variant) -> Self {
        match v {
            Variant::Corrected | Variant::Trip => LmutinRules::CORRECTED,
            Variant::Printed => LmutinRules::PRINTED,
        }
    }
}

/// One process of l_i-LMUTIN.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lmutin {
    id: ProcessId,
    /// N_i ∪ {P_i}, sorted; inline (with the granters and the arbiter's sets) so that a
    /// message's handler reads the process object and nothing behind a pointer.
    closed: SmallSet<ProcessId, INLINE_CLOSED>,
    state: CsState,
    pending: Option<Sequence>,
    ts: u64,
    granters: SmallSet<ProcessId, INLINE_CLOSED>,
    n_grants: i64,
    arbiter: Arbiter,
    /// Holders that answered a Preempt with Kept: they hold for their state (deviation 5).
    kept: SmallSet<ProcessId, INLINE_CLOSED>,
    /// Holders asked whether they keep (each once while it holds).
    probing: SmallSet<ProcessId, INLINE_CLOSED>,
    /// Pending requests this arbiter told `Blocked` (each once while it waits here).
    told: SmallSet<Stamp, 2>,
    /// The arbiters that probed the exit in progress: told `Kept` when it completes.
    probed: SmallSet<ProcessId, INLINE_CLOSED>,
    /// The arbiters that told the exit in progress `Blocked` and have not granted since.
    blockers: SmallSet<ProcessId, INLINE_CLOSED>,
    /// The arbiters holding the exit's request parked.
    parked_at: SmallSet<ProcessId, INLINE_CLOSED>,
    rules: LmutinRules,
}

impl Lmutin {
    /// Builds the whole system: one object per process of `topology`, with lower bounds `l`
    /// (one per process) and the initial configuration `initial`. Reports every process with
    /// l_i > |N_i| and every process whose bound fails in `initial`.
    pub fn system(
        topology: &Topology,
        l: &[usize],
        initial: &[CsState],
        rules: LmutinRules,
    ) -> Result<(Instance, Vec<Lmutin>), ConfigError> {
        topology.require_stored("lmutin")?;
        let inst = Lmutin::instance(topology, l)?;
        check_initial(&inst, initial)?;
        let procs = topology
            .processes()
            .map(|p| Lmutin::new(topology, l[p.index()], p, initial, rules))
            .collect();
        Ok((inst, procs))
    }

    /// The (l_i, |N_i|+1) instance LMUTIN solves, after checking 0 ≤ l_i ≤ |N_i|.
    pub fn instance(topology: &Topology, l: &[usize]) -> Result<Instance, ConfigError> {
        per_process_instance(topology, l, "l_i <= |N_i| (l_i-LMUTIN)", |l, closed| {
            Bounds { l, k: closed }
        })
    }

    /// Process `id` of l-LMUTIN with lower bound `l`, starting in `initial` (the whole
    /// configuration, which decides the initial grants). Does not validate: see
    /// [`Lmutin::system`].
    pub fn new(
        topology: &Topology,
        l: usize,
        id: ProcessId,
        initial: &[CsState],
        rules: LmutinRules,
    ) -> Lmutin {
        let closed: SmallSet<ProcessId, INLINE_CLOSED> = topology.closed(id).into_iter().collect();
        let holder_state = if rules.printed_initial_grants {
            CsState::InCs
        } else {
            CsState::OutCs
        };
        let initially = closed
            .as_slice()
            .iter()
            .filter(|q| initial.get(q.index()) == Some(&holder_state))
            .map(|&q| Stamp::new(0, q));
        let capacity = closed.len().saturating_sub(l);
        Lmutin {
            id,
            state: initial.get(id.index()).copied().unwrap_or(CsState::OutCs),
            pending: None,
            ts: 0,
            granters: SmallSet::new(),
            n_grants: 0,
            arbiter: Arbiter::new(capacity, initially, rules.arbiter),
            kept: SmallSet::new(),
            probing: SmallSet::new(),
            told: SmallSet::new(),
            probed: SmallSet::new(),
            blockers: SmallSet::new(),
            parked_at: SmallSet::new(),
            closed,
            rules,
        }
    }

    /// Fault injection for checker and observer self-tests: this process's arbiter grants up
    /// to `capacity` permissions instead of |N_i|+1−l_i. Any capacity above that is unsafe.
    pub fn with_arbiter_capacity(mut self, capacity: usize) -> Lmutin {
        self.arbiter = Arbiter::new(
            capacity,
            self.arbiter.granted().iter().copied(),
            self.rules.arbiter,
        );
        self
    }

    /// The arbiter (for inspection in tests and checkers).
    pub fn arbiter(&self) -> &Arbiter {
        &self.arbiter
    }

    /// The permissions held for the exit in progress.
    pub fn grants_held(&self) -> usize {
        if self.rules.counted_grants {
            usize::try_from(self.n_grants.max(0)).unwrap_or(0)
        } else {
            self.granters.len()
        }
    }

    fn apply(&self, actions: Vec<Action>, out: &mut Outbox<LmutinMsg>) {
        for a in actions {
            match a {
                Action::Grant(p) | Action::SidetrackGrant(p) => out.send(p, LmutinMsg::Grant),
                Action::Preempt(p) => out.send(p, LmutinMsg::Preempt),
            }
        }
    }

    /// Deviation 5, arbiter side, after every message, while the arbiter is full and a
    /// request waits: a preemption goes to a holder whose exit is in progress, the youngest
    /// one younger than the best pending request. When there is none, every older holder not
    /// known to keep is probed (it answers `Kept` once its exit completed). When every holder
    /// is known to keep, every pending request is held by a bound here and is told `Blocked`,
    /// once while it waits.
    fn settle(&mut self, actions: &mut Vec<Action>, notes: &mut Vec<(ProcessId, LmutinMsg)>) {
        let a = &self.arbiter;
        self.kept.retain(|p| a.holds(*p));
        let kept = &self.kept;
        self.probing.retain(|p| a.holds(*p) && !kept.contains(p));
        self.told.retain(|s| a.pending().contains(s));
        if let Some(h) = a.preempting() {
            if !self.kept.contains(&h) {
                return; // its answer (Relinquish, Kept or Release) is on its way
            }
            // the arbiter's own rule picked a holder known to keep: take the Preempt back
            actions.retain(|x| *x != Action::Preempt(h));
            self.arbiter.cancel_preempt();
        }
        let a = &self.arbiter;
        let Some(&best) = a.pending().first() else {
            return;
        };
        if a.has_room() {
            return;
        }
        let kept = &self.kept;
        let youngest = a
            .granted()
            .iter()
            .rev()
            .find(|h| !kept.contains(&h.id))
            .copied();
        match youngest {
            Some(h) if best < h => self.arbiter.preempt(h.id, actions),
            Some(_) => {
                // older exits in progress: ask each whether it completed
                for h in a.granted() {
                    if !kept.contains(&h.id) && self.probing.insert(h.id) {
                        notes.push((h.id, LmutinMsg::Probe));
                    }
                }
            }
            None => {
                for &r in a.pending() {
                    if self.told.insert(r) {
                        notes.push((r.id, LmutinMsg::Blocked));
                    }
                }
            }
        }
    }

    /// Whether the last exit completed and no call is in progress: every permission held is
    /// held for the state (out of the CS), and comes back only on the next Release.
    fn exit_completed(&self) -> bool {
        self.state == CsState::OutCs && self.pending.is_none()
    }

    /// Deviation 5, requester side: an arbiter says the exit is held by a bound there. The
    /// permissions held are set aside (`Park`) until every blocker granted.
    fn on_blocked(&mut self, from: ProcessId, out: &mut Outbox<LmutinMsg>) {
        if self.pending != Some(Sequence::Exit)
            || self.granters.contains(&from)
            || self.parked_at.contains(&from)
        {
            return;
        }
        self.blockers.insert(from);
        for &g in self.granters.as_slice() {
            out.send(g, LmutinMsg::Park);
            self.parked_at.insert(g);
        }
        self.n_grants -= i64::try_from(self.granters.len()).unwrap_or(0);
        self.granters.clear();
    }
}

impl CsObject for Lmutin {
    type Msg = LmutinMsg;

    fn id(&self) -> ProcessId {
        self.id
    }

    fn state(&self) -> CsState {
        self.state
    }

    fn pending(&self) -> Option<Sequence> {
        self.pending
    }

    fn begin_exit(&mut self, out: &mut Outbox<LmutinMsg>) -> Result<(), CallError> {
        check_call(self.state, self.pending, Sequence::Exit)?;
        self.ts = self.ts.saturating_add(1);
        self.granters.clear();
        self.n_grants = 0;
        self.blockers.clear();
        self.parked_at.clear();
        self.probed.clear();
        self.pending = Some(Sequence::Exit);
        for &q in self.closed.as_slice() {
            out.send(q, LmutinMsg::Request { ts: self.ts });
        }
        Ok(())
    }

    fn begin_entry(&mut self, out: &mut Outbox<LmutinMsg>) -> Result<(), CallError> {
        check_call(self.state, self.pending, Sequence::Entry)?;
        self.state = CsState::InCs;
        for &q in self.closed.as_slice() {
            out.send(q, LmutinMsg::Release);
        }
        out.complete();
        Ok(())
    }

    fn on_message(&mut self, from: ProcessId, msg: LmutinMsg, out: &mut Outbox<LmutinMsg>) {
        // sorted by id (Topology::closed)
        if !self.closed.contains(&from) {
            return;
        }
        if msg.is_set_aside_rule() && self.rules.hold_and_wait {
            return; // deviation 5's messages, which no peer of the paper's rules sends
        }
        let mut actions = Vec::new();
        match msg {
            LmutinMsg::Request { ts } => {
                if self.arbiter.knows(Stamp::new(ts, from)) {
                    return;
                }
                self.ts = self.ts.max(ts);
                self.arbiter.request(Stamp::new(ts, from), &mut actions);
            }
            LmutinMsg::Release => self.arbiter.release(from, &mut actions),
            LmutinMsg::Relinquish => self.arbiter.relinquish(from, &mut actions),
            LmutinMsg::Grant => {
                if self.pending != Some(Sequence::Exit) || self.parked_at.contains(&from) {
                    return;
                }
                if !self.blockers.is_empty() {
                    let was_blocker = self.blockers.remove(&from);
                    if !was_blocker || !self.blockers.is_empty() {
                        // still blocked elsewhere: set this permission aside too
                        out.send(from, LmutinMsg::Park);
                        self.parked_at.insert(from);
                        return;
                    }
                    // the last blocker granted: keep it, the parked requests compete again
                    for &g in self.parked_at.as_slice() {
                        out.send(g, LmutinMsg::Unpark);
                    }
                    self.parked_at.clear();
                }
                // a repeated Grant counts once (the printed counter counts it again)
                if !self.granters.insert(from) && !self.rules.counted_grants {
                    return;
                }
                self.n_grants += 1;
                if self.grants_held() == self.closed.len() {
                    self.state = CsState::OutCs;
                    self.pending = None;
                    // every permission is now held for the state
                    for &g in self.probed.as_slice() {
                        out.send(g, LmutinMsg::Kept);
                    }
                    self.probed.clear();
                    out.complete();
                }
            }
            LmutinMsg::Preempt => {
                let give_back = if self.rules.unguarded_preempt {
                    self.state == CsState::InCs
                } else {
                    self.pending == Some(Sequence::Exit) && self.granters.contains(&from)
                };
                if give_back {
                    self.n_grants -= 1;
                    self.granters.remove(&from);
                    out.send(from, LmutinMsg::Relinquish);
                } else if !self.rules.hold_and_wait && self.exit_completed() {
                    // the exit completed: the permission is held for the state
                    out.send(from, LmutinMsg::Kept);
                }
            }
            LmutinMsg::Kept => {
                if self.arbiter.holds(from) {
                    self.kept.insert(from);
                }
                if self.arbiter.preempting() == Some(from) {
                    self.arbiter.cancel_preempt();
                }
            }
            LmutinMsg::Probe => {
                if self.exit_completed() {
                    out.send(from, LmutinMsg::Kept);
                } else if self.pending == Some(Sequence::Exit) && self.granters.contains(&from) {
                    // answered when the exit completes; a Probe that finds the process in
                    // the CS is stale (the Release of its hold is on its way) and is dropped
                    self.probed.insert(from);
                }
            }
            LmutinMsg::Blocked => self.on_blocked(from, out),
            LmutinMsg::Park => self.arbiter.park(from, &mut actions),
            LmutinMsg::Unpark => self.arbiter.unpark(from, &mut actions),
        }
        // the arbiter's grants go out before the notes about its holders (FIFO: a Probe
        // must not overtake the Grant it is about)
        let mut notes = Vec::new();
        if !self.rules.hold_and_wait {
            self.settle(&mut actions, &mut notes);
        }
        self.apply(actions, out);
        for (to, msg) in notes {
            out.send(to, msg);
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.arbiter.check()
    }

    fn awaiting(&self) -> Vec<ProcessId> {
        if self.pending != Some(Sequence::Exit) || self.rules.counted_grants {
            // the printed counting rule does not know who granted
            return Vec::new();
        }
        let missing = |q: &&ProcessId| !self.granters.contains(q);
        self.closed
            .as_slice()
            .iter()
            .filter(missing)
            .copied()
            .collect()
    }

    fn lent_to(&self) -> Vec<ProcessId> {
        self.arbiter.granted().iter().map(|s| s.id).collect()
    }
}

/// Builds k_i-LMUTEX = Complement(l'_i-LMUTIN), l'_i = |N_i|+1−k_i: at most k_i processes of
/// each closed neighbourhood in the CS. Reports every k_i outside 1..=|N_i|+1 and every bound
/// that fails in `initial`.
pub fn lmutex_system(
    topology: &Topology,
    k: &[usize],
    initial: &[CsState],
    rules: LmutinRules,
) -> Result<(Instance, Vec<Lmutex>), ConfigError> {
    topology.require_stored("lmutex")?;
    let inst = lmutex_instance(topology, k)?;
    check_initial(&inst, initial)?;
    let inner_initial: Vec<CsState> = initial.iter().map(|&s| !s).collect();
    let procs = topology
        .processes()
        .map(|p| {
            let l_inner = topology.degree(p) + 1 - k[p.index()];
            Complement(Lmutin::new(topology, l_inner, p, &inner_initial, rules))
        })
        .collect();
    Ok((inst, procs))
}

/// The (0, k_i) instance LMUTEX solves, after checking 1 ≤ k_i ≤ |N_i|+1.
pub fn lmutex_instance(topology: &Topology, k: &[usize]) -> Result<Instance, ConfigError> {
    per_process_instance(topology, k, "1 <= k_i <= |N_i|+1 (k_i-LMUTEX)", |k, _| {
        Bounds { l: 0, k }
    })
}

/// Builds an instance from one value per process: `bounds(value, |N_i|+1)` gives the
/// process's bounds, which must meet 0 ≤ l_i < k_i ≤ |N_i|+1 (`rule` names the algorithm's
/// form of that condition); every process that breaks it is reported.
fn per_process_instance(
    topology: &Topology,
    values: &[usize],
    rule: &str,
    bounds: impl Fn(usize, usize) -> Bounds,
) -> Result<Instance, ConfigError> {
    if values.len() != topology.len() {
        return Err(ConfigError::one(Problem::Invalid(format!(
            "{} bounds given for {} processes",
            values.len(),
            topology.len()
        ))));
    }
    let mut problems = Vec::new();
    let mut all = Vec::with_capacity(values.len());
    for p in topology.processes() {
        let closed = topology.degree(p) + 1;
        let b = bounds(values[p.index()], closed);
        if b.l >= b.k || b.k > closed {
            problems.push(Problem::Bound {
                process: p,
                l: b.l,
                k: b.k,
                closed,
                rule: rule.into(),
            });
        }
        all.push(b);
    }
    ConfigError::check(problems)?;
    Instance::new(topology.clone(), all)
}

fn check_initial(inst: &Instance, initial: &[CsState]) -> Result<(), ConfigError> {
    if initial.len() != inst.len() {
        return Err(ConfigError::one(Problem::InitialLength {
            given: initial.len(),
            n: inst.len(),
        }));
    }
    ConfigError::check(inst.violations(initial))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(i: u32) -> ProcessId {
        ProcessId(i)
    }

    /// complete:3, l = 1, only P0 in the CS.
    fn triangle(rules: LmutinRules) -> Vec<Lmutin> {
        let t = Topology::complete(3).unwrap();
        let init = [CsState::InCs, CsState::OutCs, CsState::OutCs];
        Lmutin::system(&t, &[1, 1, 1], &init, rules).unwrap().1
    }

    fn sends(out: &Outbox<LmutinMsg>) -> Vec<(u32, LmutinMsg)> {
        out.sends().iter().map(|(to, m)| (to.0, *m)).collect()
    }

    #[test]
    fn exit_requests_every_closed_neighbour_with_a_fresh_stamp() {
        let mut procs = triangle(LmutinRules::CORRECTED);
        let mut out = Outbox::new();
        procs[0].begin_exit(&mut out).unwrap();
        let r = LmutinMsg::Request { ts: 1 };
        assert_eq!(sends(&out), vec![(0, r), (1, r), (2, r)]);
        assert!(!out.completed());
        assert_eq!(procs[0].pending(), Some(Sequence::Exit));
        assert_eq!(procs[0].state(), CsState::InCs);
    }

    #[test]
    fn entry_completes_at_once_and_releases_everyone() {
        let mut procs = triangle(LmutinRules::CORRECTED);
        let mut out = Outbox::new();
        procs[1].begin_entry(&mut out).unwrap();
        assert!(out.completed());
        assert_eq!(procs[1].state(), CsState::InCs);
        let rel = LmutinMsg::Release;
        assert_eq!(sends(&out), vec![(0, rel), (1, rel), (2, rel)]);
    }

    #[test]
    fn calling_convention_is_an_error_not_a_panic() {
        let mut procs = triangle(LmutinRules::CORRECTED);
        let mut out = Outbox::new();
        assert_eq!(procs[1].begin_exit(&mut out), Err(CallError::NotInCs));
        assert_eq!(procs[0].begin_entry(&mut out), Err(CallError::AlreadyInCs));
        procs[0].begin_exit(&mut out).unwrap();
        assert_eq!(procs[0].begin_exit(&mut out), Err(CallError::Busy));
    }

    #[test]
    fn initial_grants_are_held_by_the_outcs_members() {
        let procs = triangle(LmutinRules::CORRECTED);
        let held: Vec<u32> = procs[0]
            .arbiter()
            .granted()
            .iter()
            .map(|s| s.id.0)
            .collect();
        assert_eq!(held, vec![1, 2]);
        let printed = triangle(LmutinRules::PRINTED);
        let held: Vec<u32> = printed[0]
            .arbiter()
            .granted()
            .iter()
            .map(|s| s.id.0)
            .collect();
        assert_eq!(held, vec![0]);
    }

    #[test]
    fn a_full_arbiter_queues_the_exit_request() {
        // every arbiter in the triangle has capacity 2 and already grants P1 and P2: P0 waits
        let mut procs = triangle(LmutinRules::CORRECTED);
        let mut out = Outbox::new();
        procs[1].on_message(p(0), LmutinMsg::Request { ts: 1 }, &mut out);
        // initial grants (ts 0) outrank every request: no Grant, no Preempt; the arbiter
        // only asks its older holders whether they keep (deviation 5)
        let probed: Vec<_> = out.sends().iter().map(|(to, m)| (*to, *m)).collect();
        assert_eq!(
            probed,
            vec![(p(1), LmutinMsg::Probe), (p(2), LmutinMsg::Probe)]
        );
        assert_eq!(procs[1].arbiter().pending().len(), 1);
    }

    #[test]
    fn exit_completes_on_the_last_grant_only() {
        let mut procs = triangle(LmutinRules::CORRECTED);
        let mut out = Outbox::new();
        procs[0].begin_exit(&mut out).unwrap();
        procs[0].on_message(p(1), LmutinMsg::Grant, &mut out);
        procs[0].on_message(p(1), LmutinMsg::Grant, &mut out); // duplicate: a set ignores it
        procs[0].on_message(p(0), LmutinMsg::Grant, &mut out);
        assert!(!out.completed());
        procs[0].on_message(p(2), LmutinMsg::Grant, &mut out);
        assert!(out.completed());
        assert_eq!(procs[0].state(), CsState::OutCs);
        assert_eq!(procs[0].pending(), None);
    }

    #[test]
    fn preempt_is_honoured_only_for_a_held_permission() {
        let mut procs = triangle(LmutinRules::CORRECTED);
        let mut out = Outbox::new();
        procs[0].begin_exit(&mut out).unwrap();
        out.drain();
        procs[0].on_message(p(1), LmutinMsg::Preempt, &mut out);
        assert!(out.sends().is_empty(), "no permission from P1 is held");
        procs[0].on_message(p(1), LmutinMsg::Grant, &mut out);
        procs[0].on_message(p(1), LmutinMsg::Preempt, &mut out);
        assert_eq!(sends(&out), vec![(1, LmutinMsg::Relinquish)]);
        assert_eq!(procs[0].grants_held(), 0);
    }

    #[test]
    fn printed_preempt_relinquishes_whenever_in_cs() {
        let mut procs = triangle(LmutinRules::PRINTED);
        let mut out = Outbox::new();
        procs[0].on_message(p(1), LmutinMsg::Preempt, &mut out);
        assert_eq!(sends(&out), vec![(1, LmutinMsg::Relinquish)]);
    }

    #[test]
    fn request_raises_the_clock() {
        let mut procs = triangle(LmutinRules::CORRECTED);
        let mut out = Outbox::new();
        procs[0].on_message(p(1), LmutinMsg::Request { ts: 7 }, &mut out);
        out.drain();
        procs[0].begin_exit(&mut out).unwrap();
        assert_eq!(out.sends()[0].1, LmutinMsg::Request { ts: 8 });
    }

    #[test]
    fn system_validation_reports_every_problem() {
        let star = Topology::star(4).unwrap();
        let init = vec![CsState::InCs; 4];
        let err = Lmutin::system(&star, &[1, 2, 2, 2], &init, LmutinRules::CORRECTED).unwrap_err();
        assert_eq!(err.problems.len(), 3, "{err}");
        let init = vec![CsState::OutCs; 4];
        let err = Lmutin::system(&star, &[1, 1, 1, 1], &init, LmutinRules::CORRECTED).unwrap_err();
        assert_eq!(err.problems.len(), 4, "{err}");
        let err = lmutex_system(&star, &[0, 3, 1, 1], &init, LmutinRules::CORRECTED).unwrap_err();
        assert_eq!(err.problems.len(), 2, "{err}");
    }

    #[test]
    fn lmutex_is_the_complement() {
        let t = Topology::ring(4).unwrap();
        let init = vec![CsState::OutCs; 4];
        let (inst, mut procs) =
            lmutex_system(&t, &[1, 1, 1, 1], &init, LmutinRules::CORRECTED).unwrap();
        assert_eq!(inst.bounds(p(0)), Bounds { l: 0, k: 1 });
        let mut out = Outbox::new();
        // entering LMUTEX is exiting the inner LMUTIN: requests go out, nothing completes yet
        procs[0].begin_entry(&mut out).unwrap();
        assert_eq!(procs[0].pending(), Some(Sequence::Entry));
        assert_eq!(out.sends().len(), 3);
        assert!(matches!(out.sends()[0].1, LmutinMsg::Request { .. }));
        assert_eq!(procs[1].begin_exit(&mut out), Err(CallError::NotInCs));
    }
}
