//! The leader rules of LKCS: Kamei & Kakugawa 2017, §5, Algorithms 3–7, with a leader, the
//! "sidetrack" and Trigger, and the deviations 1–11 below. The problem, the composition they
//! run and when they run (the round trip runs by default): [`super`].
//!
//! **The sidetrack.** Alone, the composition of l_i-LMUTIN and k_i-LMUTEX can deadlock: an
//! exit waits for an entry that waits for an exit. The sidetrack breaks such cycles: a leader
//! P_LDR (|N_LDR| ≥ 4) watches its own arbiters,
//! and when every member of its closed neighbourhood seems blocked (`Waiting_LDR ≥ |N_LDR|+1`)
//! it nominates one of them (a *trigger*) with a `Trigger` message. The trigger re-asks with
//! `RequestByTrigger`; every neighbour replaces its request by a permission stamped (0, P_q),
//! granted at once whatever its capacity. To keep that safe, every process within two hops of
//! the leader runs with tightened bounds L_i = l_i+1 and K_i = k_i−1: one sidetrack move per
//! type stays within (l_i, k_i). Each process runs one [`Arbiter`] per type, with capacity
//! |N_i|+1−L_i for MUTIN and K_i for MUTEX.
//!
//! **Messages** ([`LkcsMsg`]). LMUTIN's `Request(at, ts)`, `Grant(at)`, `Release(at)`,
//! `Preempt(at)` and `Relinquish(at)`, per type `at` ∈ {MUTIN, MUTEX}; `Trigger(at, ts)`
//! (leader → nominee), `RequestByTrigger(at, ts)` (nominee → its closed neighbourhood),
//! `SidetrackGrant(at)` (the answer to it) and `TriggerDeclined` (nominee → leader; deviation
//! 4); `Blocked(at, sidetrack)`, `Park(at)` and `Unpark(at)` (deviation 9). The round trip's
//! messages are ignored.
//!
//! **Variables of P_i.**
//!
//! | paper | here | meaning |
//! |---|---|---|
//! | `state_i` | `state` | InCS / OutCS |
//! | `ts_i` | `ts` | clock: starts at 1, +1 on Exit (Entry reuses it), raised to every Request's stamp |
//! | — | `req_ts` | the stamp of the pending sequence's requests (what a Trigger must name) |
//! | `nGrants_i[at]` | `granters[at]` | permissions held for the sequence in progress |
//! | `grantedTo_i[at]`, `pendingReq_i[at]`, `preemptingNow_i[at]` | `arbiters[at]` | the type's arbiter |
//! | `candidate_LDR` | (a local in the nomination) | |
//! | — | `triggered` | the sequence in progress was switched to the sidetrack |
//! | — | `leader.last_request` | the last (type, stamp) each neighbour asked the leader for |
//! | — | `leader.in_flight` | the nominee whose answer the leader awaits |
//! | — | `last_type` | the type of the last Request each neighbour sent (deviation 9) |
//! | — | `blockers`, `parked_at` | the arbiters that said the pending sequence is blocked, and those holding its request parked (deviation 9) |
//! | — | `told`, `told_sidetrack` | the waiting requests this process's arbiters said are blocked (deviation 9) |
//!
//! **Complexity** (Lemma 6): 6(|N_i|+1) messages per Exit/Entry pair in the best case (Request,
//! Grant, Release of each type, to and from every member of N_i ∪ {P_i}), 12(|N_i|+1) in the
//! worst; a trigger adds 1 + 2(|N_q|+1) (the Trigger, one RequestByTrigger and one
//! SidetrackGrant per member of N_q ∪ {P_q}), or 2 when it is declined. Deviation 9 adds, when
//! a sequence is blocked: one Blocked, one Park per permission set aside, and per parked
//! request an Unpark and the grant it brings back (none of them in the best case).
//!
//! **Assumptions.** Reliable FIFO links (self-links included); atomic handlers; the leader
//! keeps cycling through Exit and Entry (the suspicion runs inside its own sequences, as in the
//! paper: a leader that stops calling them stops resolving deadlocks).
//!
//! # Deviations from the paper
//!
//! Each printed rule can be selected alone through [`LkcsRules`] (all of them together with
//! `--variant printed`); `tests/lkcs.rs::each_printed_rule_alone_has_its_counterexample` runs
//! each one alone where it fails and the corrected rules pass. `docs/errata.md` (lkcs-1 to
//! lkcs-11) gives for each the printed text, the counterexample as a command, and the sweeps
//! behind the rule.
//!
//! 1. **Initial grants by type**: the OutCS members hold the MUTIN permissions (permission to
//!    be out), the InCS members the MUTEX ones; Algorithm 3 gives both to the InCS members.
//!    Counterexample: torus:4x4 (0, 4), seed 0 (all 100 seeds fail).
//! 2. **The trigger's stamp is the request's**: the leader remembers the last (type, stamp)
//!    each neighbour asked it for and sends exactly that (the printed ts_j is one off for an
//!    exit, and the nominee ignores it). Before deviation 9, torus:4x4 (1, 4) failed on 10
//!    seeds of 100; since, the rule alone fails on none (no asserted counterexample).
//! 3. **Nominating does not dequeue**: the nomination only reads the request; the
//!    RequestByTrigger removes it (a declined Trigger would otherwise lose it). No failure of
//!    this rule alone was found; it is kept for the argument.
//! 4. **One trigger at a time, and one reserved permission per arbiter**: the leader waits
//!    for the nominee's answer (its RequestByTrigger, or `TriggerDeclined`) and never
//!    nominates a process already on the sidetrack for that type; an arbiter grants a
//!    sidetrack permission only while at most capacity + 1 are granted with it (the reserve)
//!    and queues it otherwise. Safety is then local: every arbiter within two hops grants at
//!    most |N_i|+1−L_i+1 MUTIN permissions (|CS_i| ≥ l_i) and K_i+1 = k_i MUTEX ones.
//!    Counterexamples: the printed nomination stalls torus:4x4 (1, 4) with the paper's
//!    leader, seed 0; the printed arbiter breaks k on complete:6 (1, 5), seed 0.
//! 5. **"Saturated" means "at the cap"**, not one below it. Counterexample: torus:4x4 (1, 4)
//!    with the paper's leader deadlocks, seed 0 (all 100 seeds).
//! 6. **The leader leaves its wait**: its sequence completes as soon as its grants are
//!    complete (the printed wait on `Waiting_LDR` never ends when it nominated itself).
//!    Counterexample: complete:5 (1, 4) with every process leading, seed 0.
//! 7. **Sidetrack grants are told apart**: the answer to a RequestByTrigger is a
//!    `SidetrackGrant`, and a triggered sequence counts only those; a Trigger is accepted only
//!    by a process waiting in that sequence with that stamp. Counterexample: torus:4x4
//!    (1, 4) with every process leading, seed 0 (a permission counted for the next sequence).
//! 8. **Preempt, Relinquish and Release as in LMUTIN** (`algo::lmutin`, deviations 3 and 4).
//!    Counterexample: torus:5x5 (1, 4) with every process leading, seed 2.
//! 9. **Blocked requests step aside, and the reserve is ordered** (an addition). A full arbiter
//!    that preempts nobody, and whose holders all keep their permission for their current
//!    state, tells each waiting requester `Blocked`; the requester `Park`s the permissions it
//!    holds (each arbiter takes it back as on a Relinquish and keeps the request aside with
//!    its stamp) until the blocking arbiter grants, then `Unpark`s them. The reserve goes to
//!    the oldest sidetrack request, which may take it back from a younger sidetrack holder in
//!    progress; sidetrack requests come before normal ones; a normal request older than a
//!    sidetrack holder in progress is granted from a free reserve, as if that holder had moved
//!    to it. A Preempt goes only to a holder in progress. At most capacity normal permissions
//!    and capacity + 1 in all stay granted. Counterexamples: without it torus:5x5 (1, 4) with
//!    the paper's leader deadlocks, seed 0; the free-reserve part: `random:18:0.25:5119` with
//!    the per-process bounds of errata lkcs-9, seed 1.
//! 10. **Every tightened process can be nominated** (an addition; `--leader ID` keeps the
//!     paper's single leader): [`Leaders::Auto`](super::Leaders::Auto) adds as watchers
//!     every process of degree ≥ 4 within two hops of the leader and every tightened process
//!     with none of those in its closed neighbourhood; a watcher may nominate any member of
//!     its closed neighbourhood;
//!     an arbiter outside the tightened region keeps no reserve ([`Arbiter::without_reserve`])
//!     and orders sidetrack requests by stamp with the normal ones. Counterexample:
//!     `random:24:0.35:1` (1, 4) with the single leader P3 stalls, seed 3, processes outside
//!     its neighbourhood completing no pair.
//! 11. **A fallback nominee** (an addition): when no process of the type that would free a
//!     saturated arbiter can be nominated, a watcher nominates the oldest normal request
//!     pending at one of its saturated arbiters whose reserve is free. Counterexample:
//!     `random:12:0.3:115` with the per-process bounds of errata lkcs-11, seed 10, every
//!     process blocked at t = 3727.
//!
//! The clock is raised to every Request's stamp, as in LMUTIN.
//!
//! # Liveness
//!
//! Safety held on every run the crate has made. Liveness of the leader rules does not:
//! deviations 9–11 resolve the waits found so far, and some runs still stall or deadlock
//! (about 2 % of the runs of the liveness sweep with the automatic leader or `--leader all`,
//! a quarter with the paper's single leader; never a broken bound). `docs/lkcs-liveness.md`
//! names the waits, the sweep that measures them, the exact check ([`crate::reach`]) that
//! every failed run examined could still have moved every process, and the round trip that
//! replaces the leader by default ([`super::trip`]: 0 failed of the 39,366 runs of the
//! default over 40,000 sweep configurations). [`Leaders::All`](super::Leaders::All)
//! (`--leader all`) lets every able process lead; safety needs nothing more, since the
//! reserve is local to every arbiter, but with the least slack (k_i − l_i = 3) the operating
//! range is tightened everywhere, most processes cannot move in normal operation, and the
//! sequential workload names them and cannot run.
//!
//! # Unexpected messages
//!
//! A message no correct peer would send never panics and never breaks an arbiter's cap
//! (`tests/hostile.rs`). Every message from a process outside N_i ∪ {P_i} is ignored, and so
//! is a Request whose stamp the arbiter of its type already has (a duplicate; it does not
//! touch `last_type` or the leader's record either). Otherwise the handlers' own guards
//! apply: a Grant or a SidetrackGrant counts only for the pending sequence of its type and
//! kind (normal or triggered); a Preempt is honoured only for a permission held for it; a
//! Trigger is taken only for the pending sequence with that type and stamp, from any
//! neighbour (the arbiters' caps, not the nominator, keep the sidetrack safe), and declined
//! otherwise; a Blocked counts only for the pending sequence of its type; a TriggerDeclined
//! matters only from the nominee awaited. Release, Relinquish, Park and Unpark free, hand
//! back or requeue only what the arbiter holds for their sender, and a RequestByTrigger
//! replaces the sender's requests here as the sidetrack does. A Request with a new stamp is
//! queued like any other. The clock saturates at `u64::MAX` (a Request stamped near it pins
//! the clock).
//!
//! Network assumptions: the papers assume FIFO links; on complete:5 with (l, k) = (1, 4), the
//! smallest instance with a leader, the checker found no violation within 2 M generated states
//! over FIFO and unordered links, nor within 1 GiB with duplication: bounded, neither proved
//! nor refuted. See docs/checker.md.

use super::messages::{At, LkcsMsg};
use super::LkcsRules;
use crate::arbiter::{Action, Arbiter};
use crate::config::{Bounds, Instance};
use crate::cs::{check_call, CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::{ProcessId, Stamp};
use crate::topology::Topology;
use std::collections::{BTreeMap, BTreeSet};

/// The leader's extra variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct LeaderRole {
    /// The last (type, stamp) each member of the closed neighbourhood asked for.
    last_request: BTreeMap<ProcessId, (At, u64)>,
    /// The nominee whose answer is awaited (corrected rules).
    in_flight: Option<ProcessId>,
    /// In the printed wait after a nomination.
    waiting: bool,
}

/// One process of LKCS under the leader rules: its requester side, its two arbiters (MUTIN
/// and MUTEX) and, when it leads or watches, its leader role. Built by
/// [`Lkcs::build`](super::Lkcs::build), or alone with [`LeaderProc::new`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct LeaderProc {
    id: ProcessId,
    closed: Vec<ProcessId>,
    state: CsState,
    pending: Option<Sequence>,
    ts: u64,
    /// The stamp the pending sequence's requests carry (the clock may have moved on since).
    req_ts: u64,
    granters: [BTreeSet<ProcessId>; 2],
    arbiters: [Arbiter; 2],
    triggered: bool,
    /// The arbiters that told the pending sequence it is blocked and have not granted yet;
    /// while any is left the sequence is parked (deviation 9).
    blockers: BTreeSet<ProcessId>,
    /// The arbiters holding the pending sequence's request parked.
    parked_at: BTreeSet<ProcessId>,
    /// Per type, the requests this process's arbiter told they are blocked.
    told: [BTreeSet<Stamp>; 2],
    /// Per type, the sidetrack requests this process's arbiter told they are blocked.
    told_sidetrack: [BTreeSet<ProcessId>; 2],
    /// The type of the last Request each member of the closed neighbourhood sent.
    last_type: BTreeMap<ProcessId, At>,
    operating: Bounds,
    leader: Option<LeaderRole>,
    rules: LkcsRules,
}

impl LeaderProc {
    /// Process `id` with the operating bounds of `operating` (tightened within two hops of
    /// every one of `tightening`: [`LkcsSystem::tightening`](super::LkcsSystem::tightening)),
    /// watching its neighbourhood if it is one of `leaders`
    /// ([`LkcsSystem::leaders`](super::LkcsSystem::leaders)), starting in `initial`, under
    /// `rules` (whose field `round_trip` it ignores: the round trip is
    /// [`TripProc`](super::trip::TripProc)). Does not validate: see
    /// [`Lkcs::build`](super::Lkcs::build).
    pub fn new(
        operating: &Instance,
        id: ProcessId,
        tightening: &[ProcessId],
        leaders: &[ProcessId],
        initial: &[CsState],
        rules: LkcsRules,
    ) -> LeaderProc {
        let region = tightened_region(operating.topology(), tightening);
        LeaderProc::in_region(operating, id, leaders, &region, initial, rules)
    }

    /// [`LeaderProc::new`] with the tightened region given: outside it the arbiters keep no
    /// reserved sidetrack permission (deviation 10).
    pub(super) fn in_region(
        operating: &Instance,
        id: ProcessId,
        leaders: &[ProcessId],
        region: &BTreeSet<ProcessId>,
        initial: &[CsState],
        rules: LkcsRules,
    ) -> LeaderProc {
        let t = operating.topology();
        let closed = t.closed(id);
        let b = operating.bounds(id);
        let holders = |s: CsState| {
            closed
                .iter()
                .filter(move |q| initial.get(q.index()) == Some(&s))
                .map(|&q| Stamp::new(1, q))
        };
        let (mutin_holders, mutex_holders) = if rules.printed_initial_grants {
            (CsState::InCs, CsState::InCs)
        } else {
            (CsState::OutCs, CsState::InCs)
        };
        // the reserve exists only where the bounds are tightened (the printed arbiter grants
        // a sidetrack request whatever the count, everywhere)
        let reserve = |a: Arbiter| {
            if region.contains(&id) || rules.arbiter.unreserved_sidetrack {
                a
            } else {
                a.without_reserve()
            }
        };
        let arbiters = [
            reserve(Arbiter::new(
                closed.len().saturating_sub(b.l),
                holders(mutin_holders),
                rules.arbiter,
            )),
            reserve(Arbiter::new(b.k, holders(mutex_holders), rules.arbiter)),
        ];
        LeaderProc {
            id,
            state: initial.get(id.index()).copied().unwrap_or(CsState::OutCs),
            pending: None,
            ts: 1,
            req_ts: 0,
            granters: [BTreeSet::new(), BTreeSet::new()],
            arbiters,
            triggered: false,
            blockers: BTreeSet::new(),
            parked_at: BTreeSet::new(),
            told: [BTreeSet::new(), BTreeSet::new()],
            told_sidetrack: [BTreeSet::new(), BTreeSet::new()],
            last_type: BTreeMap::new(),
            operating: b,
            leader: (rules.sidetrack && leaders.contains(&id)).then(|| LeaderRole {
                last_request: BTreeMap::new(),
                in_flight: None,
                waiting: false,
            }),
            closed,
            rules,
        }
    }

    /// The arbiter of type `at` (for inspection in tests and checkers).
    pub fn arbiter(&self, at: At) -> &Arbiter {
        &self.arbiters[at.index()]
    }

    /// Whether this process is the leader.
    pub fn is_leader(&self) -> bool {
        self.leader.is_some()
    }

    /// Whether the sequence in progress was switched to the sidetrack.
    pub fn triggered(&self) -> bool {
        self.triggered
    }

    /// `Waiting_LDR`: pending requests of both types, the processes holding both types, and
    /// the sidetrack requests waiting for the reserve.
    fn waiting(&self) -> usize {
        let [mutin, mutex] = &self.arbiters;
        let both = mutin
            .granted()
            .iter()
            .filter(|s| mutex.holds(s.id))
            .map(|s| s.id)
            .collect::<BTreeSet<_>>()
            .len();
        let queued = mutin.sidetrack_queue().len() + mutex.sidetrack_queue().len();
        let parked = mutin.parked().len()
            + mutex.parked().len()
            + mutin.parked_sidetrack().len()
            + mutex.parked_sidetrack().len();
        mutin.pending().len() + mutex.pending().len() + both + queued + parked
    }

    fn saturated(&self, at: At) -> bool {
        let a = &self.arbiters[at.index()];
        if self.rules.printed_saturation {
            a.granted().len() + 1 == a.capacity()
        } else {
            !a.has_room()
        }
    }

    /// TriggerNomination: the type to trigger, the stamp to send and the nominee. When every
    /// candidate of the type that would free a saturated arbiter is already on the sidetrack,
    /// the oldest normal request waiting at an arbiter that is at its capacity with its reserve
    /// free is nominated instead (its sidetrack can use that reserve; safety is the arbiters'
    /// cap, whoever is nominated).
    fn nominee(&mut self) -> Option<(At, u64, ProcessId)> {
        // MUTIN at its cap: exits are stuck, so trigger an entry; MUTEX at its cap: an exit
        let order = [(At::Mutin, At::Mutex), (At::Mutex, At::Mutin)];
        for (full, at) in order {
            if !self.saturated(full) {
                continue;
            }
            let pick = self.pick(at);
            if self.rules.repeated_triggers || pick.is_some() {
                // the printed if / else-if: only the first saturated type is tried
                return pick;
            }
        }
        // nobody of the type that would free a saturated arbiter can be nominated (all on the
        // sidetrack already): a normal request waiting here at the capacity while the reserve
        // is free could move on the sidetrack; nominate the oldest such one
        if !self.rules.fallback_nominee {
            return None;
        }
        [At::Mutin, At::Mutex]
            .into_iter()
            .filter(|&at| {
                let a = &self.arbiters[at.index()];
                self.saturated(at) && a.has_reserve() && !a.reserve_used()
            })
            .filter_map(|at| Some((*self.arbiters[at.index()].pending().first()?, at)))
            .min()
            .map(|(s, at)| (at, s.ts, s.id))
    }

    fn pick(&mut self, at: At) -> Option<(At, u64, ProcessId)> {
        let a = &self.arbiters[at.index()];
        let first = a.pending().iter().chain(a.parked()).min().copied();
        if let Some(s) = first {
            if self.rules.dequeue_nominee {
                self.arbiters[at.index()].drop_pending(s);
            }
            return Some((at, s.ts, s.id));
        }
        let [mutin, mutex] = &self.arbiters;
        if self.rules.printed_trigger_stamp {
            // (ts_j, P_j) ∈ MUTEX and (ts_j, P_j) ∈ MUTIN (entry) / (ts_j+1, P_j) ∈ MUTIN (exit)
            let shift = u64::from(at == At::Mutin);
            return mutex
                .granted()
                .iter()
                .filter(|s| {
                    let exit = Stamp::new(s.ts.saturating_add(shift), s.id);
                    mutin.granted().contains(&exit)
                })
                .min()
                .map(|s| (at, s.ts, s.id));
        }
        let role = self.leader.as_ref()?;
        mutin
            .granted()
            .iter()
            .filter(|s| mutex.holds(s.id))
            .filter(|s| {
                // not already on the sidetrack for this type
                let a = &self.arbiters[at.index()];
                !a.is_sidetracked(s.id)
                    && !a.sidetrack_queue().iter().any(|x| x.id == s.id)
                    && !a.parked_sidetrack().iter().any(|x| x.id == s.id)
            })
            .filter_map(|s| match role.last_request.get(&s.id) {
                Some(&(a, ts)) if a == at => Some(Stamp::new(ts, s.id)),
                _ => None,
            })
            .min()
            .map(|s| (at, s.ts, s.id))
    }

    /// The leader's suspicion, run after every handler while its own sequence is pending;
    /// `w` is `Waiting_LDR`.
    fn suspect(&mut self, w: usize, out: &mut Outbox<LkcsMsg>) {
        let Some(role) = &self.leader else { return };
        if self.pending.is_none() {
            return;
        }
        let full = self.closed.len();
        if self.rules.repeated_triggers {
            if role.waiting || w != full {
                return;
            }
        } else if role.in_flight.is_some() || w < full {
            return;
        }
        let pick = self.nominee();
        let role = self.leader.as_mut().expect("leader");
        role.waiting = true;
        if let Some((at, ts, h)) = pick {
            if !self.rules.repeated_triggers {
                role.in_flight = Some(h);
            }
            out.send(h, LkcsMsg::Trigger { at, ts });
        }
    }

    /// Completes the pending sequence when its grants are complete.
    fn try_complete(&mut self, out: &mut Outbox<LkcsMsg>) {
        let Some(seq) = self.pending else { return };
        let at = At::of(seq);
        if self.granters[at.index()].len() < self.closed.len() {
            return;
        }
        if self.rules.printed_leader_wait && self.leader.as_ref().is_some_and(|r| r.waiting) {
            return;
        }
        let (state, release) = match seq {
            Sequence::Exit => (CsState::OutCs, At::Mutex),
            Sequence::Entry => (CsState::InCs, At::Mutin),
        };
        self.state = state;
        self.pending = None;
        self.triggered = false;
        for &q in &self.closed {
            out.send(q, LkcsMsg::Release { at: release });
        }
        out.complete();
    }

    /// What runs after every step: the printed wait ends, the sequence may complete, the
    /// leader may suspect a deadlock.
    fn after(&mut self, out: &mut Outbox<LkcsMsg>) {
        if self.rules.park_blocked {
            self.tell_blocked(out);
        }
        if self.leader.is_none() {
            self.try_complete(out);
            return;
        }
        let full = self.closed.len();
        let w = self.waiting();
        if let Some(role) = self.leader.as_mut()
            && role.waiting
            && w < full
        {
            role.waiting = false;
        }
        self.try_complete(out);
        // completing sends only messages: Waiting_LDR is unchanged
        self.suspect(w, out);
    }

    /// Deviation 9, arbiter side: when an arbiter is full, preempts nobody and every holder
    /// keeps its permission whatever comes (it holds it for its current state, not for a
    /// sequence in progress), every request waiting there is blocked until a holder moves:
    /// tell each once. Likewise for sidetrack requests while the reserve is in use.
    fn tell_blocked(&mut self, out: &mut Outbox<LkcsMsg>) {
        for at in [At::Mutin, At::Mutex] {
            let mut actions = Vec::new();
            self.retarget_preemption(at, &mut actions);
            send_actions(at, actions, self.rules.untagged_sidetrack, out);
            self.preempt_for_sidetrack(at, out);
            let a = &self.arbiters[at.index()];
            // a holder in progress may still give this permission back (Relinquish, Park)
            let settled = a.granted().iter().all(|h| !self.in_progress(at, h.id));
            let told = &mut self.told[at.index()];
            told.retain(|s| a.pending().contains(s));
            let told_st = &mut self.told_sidetrack[at.index()];
            told_st.retain(|p| a.sidetrack_queue().iter().any(|x| x.id == *p));
            let normal = !a.has_room() && a.preempting().is_none() && !a.pending().is_empty();
            let sidetrack = a.reserve_used() && !a.sidetrack_queue().is_empty();
            if !settled || (!normal && !sidetrack) {
                continue;
            }
            if normal {
                for &r in a.pending() {
                    if told.insert(r) {
                        out.send(
                            r.id,
                            LkcsMsg::Blocked {
                                at,
                                sidetrack: false,
                            },
                        );
                    }
                }
            }
            if sidetrack {
                for p in a.sidetrack_queue().iter().map(|x| x.id) {
                    if told_st.insert(p) {
                        out.send(
                            p,
                            LkcsMsg::Blocked {
                                at,
                                sidetrack: true,
                            },
                        );
                    }
                }
            }
        }
    }

    /// Whether `h` holds its permission of type `at` here for a sequence still in progress
    /// (it also holds the other type here and last asked for this one): it may give it back.
    fn in_progress(&self, at: At, h: ProcessId) -> bool {
        self.arbiters[at.other().index()].holds(h) && self.last_type.get(&h) == Some(&at)
    }

    /// Deviation 9: a normal preemption goes to a holder whose sequence is in progress. A
    /// holder that keeps its permission for its current state ignores a Preempt; the arbiter
    /// forgets such a preemption (dropping the Preempt when it is still in `actions`) and
    /// preempts the youngest in-progress holder younger than the best pending request.
    fn retarget_preemption(&mut self, at: At, actions: &mut Vec<Action>) {
        let a = &self.arbiters[at.index()];
        if let Some(h) = a.preempting() {
            if self.in_progress(at, h) {
                return;
            }
            actions.retain(|x| *x != Action::Preempt(h));
            self.arbiters[at.index()].cancel_preempt();
        }
        let a = &self.arbiters[at.index()];
        let Some(&best) = a.pending().first() else {
            return;
        };
        if a.has_room() {
            return;
        }
        if let Some(h) = self.youngest_normal_in_progress(at, Some(best)) {
            self.arbiters[at.index()].preempt(h, actions);
        } else if a.has_reserve() {
            // with the reserve free, a sidetrack grant took an ordinary slot: an older normal
            // request takes that slot, as if the younger sidetrack holder still in progress
            // gave it back and moved to the reserve
            // (grant_from_reserve itself checks that the reserve is free)
            if self.youngest_sidetrack_in_progress(at, best).is_some() {
                self.arbiters[at.index()].grant_from_reserve(actions);
            }
        } else {
            // without a reserve a sidetrack grant took an ordinary slot, and the requests
            // compete by stamp: an older normal request takes it back from the youngest
            // sidetrack holder still in progress
            if let Some(h) = self.youngest_sidetrack_in_progress(at, best) {
                self.arbiters[at.index()].preempt_sidetrack(h, actions);
            }
        }
    }

    /// The youngest holder of a sidetrack permission of type `at` here whose sequence is in
    /// progress, among those whose sidetrack request is younger than `than`.
    fn youngest_sidetrack_in_progress(&self, at: At, than: Stamp) -> Option<ProcessId> {
        self.arbiters[at.index()]
            .sidetracked()
            .iter()
            .filter(|&&(h, st)| st > than && self.in_progress(at, h))
            .max_by_key(|&&(_, st)| st)
            .map(|&(h, _)| h)
    }

    /// The youngest holder of a normal permission of type `at` here whose sequence is in
    /// progress, among those younger than `than` when given.
    fn youngest_normal_in_progress(&self, at: At, than: Option<Stamp>) -> Option<ProcessId> {
        let a = &self.arbiters[at.index()];
        a.granted()
            .iter()
            .rev()
            .take_while(|s| than.is_none_or(|t| **s > t))
            .find(|s| !a.is_sidetracked(s.id) && self.in_progress(at, s.id))
            .map(|s| s.id)
    }

    /// Deviation 9: the reserve goes to the oldest sidetrack request, and sidetrack requests
    /// come before normal ones. When the best waiting sidetrack request is older than a
    /// sidetrack holder whose sequence is still in progress, the youngest such holder is asked
    /// to give the reserve back; failing that, the youngest normal holder whose sequence is in
    /// progress (without a reserve: the youngest younger than the request) is asked to give
    /// its permission back, which frees the reserve (or a slot).
    fn preempt_for_sidetrack(&mut self, at: At, out: &mut Outbox<LkcsMsg>) {
        if let Some(h) = self.arbiters[at.index()].preempting_sidetrack() {
            // its sequence completed before the Preempt arrived: it keeps the permission
            if !self.in_progress(at, h) {
                self.arbiters[at.index()].cancel_preempt_sidetrack();
            }
        }
        let a = &self.arbiters[at.index()];
        let Some(&best) = a.sidetrack_queue().first() else {
            return;
        };
        if !a.reserve_used() {
            return;
        }
        let mut actions = Vec::new();
        match self.youngest_sidetrack_in_progress(at, best) {
            Some(h) if a.preempting_sidetrack().is_none() => {
                self.arbiters[at.index()].preempt_sidetrack(h, &mut actions)
            }
            Some(_) => {}
            None => {
                // without a reserve the sidetrack request competes by stamp
                let than = (!a.has_reserve()).then_some(best);
                if let Some(h) = self.youngest_normal_in_progress(at, than) {
                    self.arbiters[at.index()].preempt(h, &mut actions);
                }
            }
        }
        send_actions(at, actions, self.rules.untagged_sidetrack, out);
    }

    /// Deviation 9, requester side: an arbiter says the pending sequence is blocked there.
    fn on_blocked(&mut self, from: ProcessId, at: At, sidetrack: bool, out: &mut Outbox<LkcsMsg>) {
        let i = at.index();
        if self.pending != Some(at.sequence())
            || self.triggered != sidetrack
            || self.granters[i].contains(&from)
        {
            return;
        }
        self.blockers.insert(from);
        for g in std::mem::take(&mut self.granters[i]) {
            out.send(g, LkcsMsg::Park { at });
            self.parked_at.insert(g);
        }
    }

    fn start(&mut self, seq: Sequence, out: &mut Outbox<LkcsMsg>) -> Result<(), CallError> {
        check_call(self.state, self.pending, seq)?;
        let at = At::of(seq);
        if seq == Sequence::Exit {
            self.ts = self.ts.saturating_add(1);
        }
        self.granters[at.index()].clear();
        self.blockers.clear();
        self.parked_at.clear();
        self.triggered = false;
        self.pending = Some(seq);
        self.req_ts = self.ts;
        for &q in &self.closed {
            out.send(q, LkcsMsg::Request { at, ts: self.ts });
        }
        self.after(out);
        Ok(())
    }

    fn on_trigger(&mut self, from: ProcessId, at: At, ts: u64, out: &mut Outbox<LkcsMsg>) {
        let i = at.index();
        let accept = if self.rules.untagged_sidetrack {
            self.state == at.keeping()
                && ts == self.ts
                && self.granters[i].len() < self.closed.len()
        } else {
            self.pending == Some(at.sequence()) && ts == self.req_ts && !self.triggered
        };
        if accept {
            self.triggered = true;
            self.granters[i].clear();
            // the sidetrack replaces the parked requests too
            self.blockers.clear();
            self.parked_at.clear();
            for &q in &self.closed {
                out.send(q, LkcsMsg::RequestByTrigger { at, ts });
            }
        } else if !self.rules.repeated_triggers {
            out.send(from, LkcsMsg::TriggerDeclined);
        }
    }

    fn on_grant(&mut self, from: ProcessId, at: At, sidetrack: bool, out: &mut Outbox<LkcsMsg>) {
        let counts = if self.rules.untagged_sidetrack {
            true
        } else {
            self.pending == Some(at.sequence()) && self.triggered == sidetrack
        };
        if !counts {
            return;
        }
        if !self.blockers.is_empty() {
            let was_blocker = self.blockers.remove(&from);
            if !was_blocker || !self.blockers.is_empty() {
                // parked (still blocked elsewhere): set this permission aside too
                out.send(from, LkcsMsg::Park { at });
                self.parked_at.insert(from);
                return;
            }
            // the last blocker granted: keep it, and the parked requests compete again
            for g in std::mem::take(&mut self.parked_at) {
                out.send(g, LkcsMsg::Unpark { at });
            }
        }
        self.granters[at.index()].insert(from);
    }

    fn on_preempt(&mut self, from: ProcessId, at: At, out: &mut Outbox<LkcsMsg>) {
        let i = at.index();
        let give_back = if self.rules.unguarded_preempt {
            self.state == at.keeping()
        } else {
            // while triggered, only a sidetrack permission can be asked back (a stale Preempt
            // of the normal one arrives before the sidetrack grant from the same arbiter)
            self.pending == Some(at.sequence())
                && (!self.triggered || self.rules.park_blocked)
                && self.granters[i].contains(&from)
        };
        if give_back {
            self.granters[i].remove(&from);
            out.send(from, LkcsMsg::Relinquish { at });
        }
    }
}

/// The processes within two hops of some of `leaders`: those that run with tightened bounds.
pub(super) fn tightened_region(t: &Topology, leaders: &[ProcessId]) -> BTreeSet<ProcessId> {
    let mut region = BTreeSet::new();
    for &l in leaders {
        region.extend(within_two_hops(t, l));
    }
    region
}

/// The processes within two hops of `p` (itself included), by id: O(Σ degrees of its closed
/// neighbourhood), where a breadth-first search of the whole graph is O(edges).
pub(super) fn within_two_hops(t: &Topology, p: ProcessId) -> Vec<ProcessId> {
    if p.index() >= t.len() {
        return Vec::new();
    }
    if t.is_complete() {
        return t.processes().collect();
    }
    let mut near: Vec<ProcessId> = t.closed(p).into_iter().flat_map(|q| t.closed(q)).collect();
    near.sort_unstable();
    near.dedup();
    near
}

/// Sends what an arbiter of type `at` decided (`actions`); with `untagged` (the printed rule
/// of deviation 7) a sidetrack permission goes out as a plain Grant.
fn send_actions(at: At, actions: Vec<Action>, untagged: bool, out: &mut Outbox<LkcsMsg>) {
    for a in actions {
        match a {
            Action::Grant(p) => out.send(p, LkcsMsg::Grant { at }),
            Action::Preempt(p) => out.send(p, LkcsMsg::Preempt { at }),
            Action::SidetrackGrant(p) if untagged => out.send(p, LkcsMsg::Grant { at }),
            Action::SidetrackGrant(p) => out.send(p, LkcsMsg::SidetrackGrant { at }),
        }
    }
}

impl CsObject for LeaderProc {
    type Msg = LkcsMsg;

    fn id(&self) -> ProcessId {
        self.id
    }

    fn state(&self) -> CsState {
        self.state
    }

    fn pending(&self) -> Option<Sequence> {
        self.pending
    }

    fn begin_exit(&mut self, out: &mut Outbox<LkcsMsg>) -> Result<(), CallError> {
        self.start(Sequence::Exit, out)
    }

    fn begin_entry(&mut self, out: &mut Outbox<LkcsMsg>) -> Result<(), CallError> {
        self.start(Sequence::Entry, out)
    }

    fn on_message(&mut self, from: ProcessId, msg: LkcsMsg, out: &mut Outbox<LkcsMsg>) {
        // sorted by id (Topology::closed)
        if self.closed.binary_search(&from).is_err() {
            return;
        }
        let mut actions = Vec::new();
        let mut typed = None;
        match msg {
            LkcsMsg::Request { at, ts } => {
                if self.arbiters[at.index()].knows(Stamp::new(ts, from)) {
                    return;
                }
                self.ts = self.ts.max(ts);
                if self.rules.park_blocked {
                    self.last_type.insert(from, at);
                }
                if let Some(role) = self.leader.as_mut() {
                    role.last_request.insert(from, (at, ts));
                }
                self.arbiters[at.index()].request(Stamp::new(ts, from), &mut actions);
                typed = Some(at);
            }
            LkcsMsg::Release { at } => {
                self.arbiters[at.index()].release(from, &mut actions);
                typed = Some(at);
            }
            LkcsMsg::Relinquish { at } => {
                self.arbiters[at.index()].relinquish(from, &mut actions);
                typed = Some(at);
            }
            LkcsMsg::Grant { at } => self.on_grant(from, at, false, out),
            LkcsMsg::SidetrackGrant { at } => self.on_grant(from, at, true, out),
            LkcsMsg::Blocked { at, sidetrack } => self.on_blocked(from, at, sidetrack, out),
            LkcsMsg::Park { at } => {
                self.arbiters[at.index()].park(from, &mut actions);
                typed = Some(at);
            }
            LkcsMsg::Unpark { at } => {
                self.arbiters[at.index()].unpark(from, &mut actions);
                typed = Some(at);
            }
            LkcsMsg::Preempt { at } => self.on_preempt(from, at, out),
            LkcsMsg::Trigger { at, ts } => self.on_trigger(from, at, ts, out),
            LkcsMsg::RequestByTrigger { at, ts } => {
                self.arbiters[at.index()].sidetrack(Stamp::new(ts, from), &mut actions);
                if let Some(role) = self.leader.as_mut()
                    && role.in_flight == Some(from)
                {
                    role.in_flight = None;
                }
                typed = Some(at);
            }
            LkcsMsg::TriggerDeclined => {
                if let Some(role) = self.leader.as_mut()
                    && role.in_flight == Some(from)
                {
                    role.in_flight = None;
                }
            }
            // the round trip's messages mean nothing to the leader rules
            LkcsMsg::Trip { .. }
            | LkcsMsg::TripLock { .. }
            | LkcsMsg::TripInquire { .. }
            | LkcsMsg::TripYield { .. }
            | LkcsMsg::TripGo { .. }
            | LkcsMsg::TripCancel
            | LkcsMsg::TripEnd { .. }
            | LkcsMsg::Withdraw { .. }
            | LkcsMsg::Withdrawn { .. } => {}
        }
        if let Some(at) = typed {
            if self.rules.park_blocked {
                self.retarget_preemption(at, &mut actions);
            }
            send_actions(at, actions, self.rules.untagged_sidetrack, out);
        }
        self.after(out);
    }

    fn operating_bounds(&self) -> Option<Bounds> {
        Some(self.operating)
    }

    /// The members of the closed neighbourhood whose permission of the pending sequence's
    /// type has not come (or was parked or preempted back): a call fails on an unreachable
    /// peer only when it waits on that peer.
    fn awaiting(&self) -> Vec<ProcessId> {
        let Some(seq) = self.pending else {
            return Vec::new();
        };
        super::not_granted(&self.closed, &self.granters[At::of(seq).index()])
    }

    /// The holders of this process's arbiters of a type with no free slot: those a request
    /// waiting here waits on.
    fn lent_to(&self) -> Vec<ProcessId> {
        let full = self
            .arbiters
            .iter()
            .filter(|a| a.granted().len() >= a.capacity());
        super::lent_but(self.id, full.flat_map(|a| a.granted().iter().map(|s| s.id)))
    }

    fn check_invariants(&self) -> Result<(), String> {
        for (name, a) in ["MUTIN", "MUTEX"].iter().zip(&self.arbiters) {
            a.check().map_err(|e| format!("{name} {e}"))?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
