//! MUTIN(l): global l-mutual inclusion over a quorum system (Kamei & Kakugawa 2019, §4,
//! Algorithms 1–2); kmex = Complement(MUTIN(n−k)), global k-mutual exclusion (§2, the
//! complementary theorem); and the builder of (l,k)-GCS = [`Gcs`]`<MUTIN(l), kmex>` (§5,
//! Algorithm 3).
//!
//! **Problem.** On a complete graph of n processes, at least l processes are in the CS at any
//! time (the upper bound is n, i.e. none). Each process P_i uses a quorum Q_i of a coterie
//! (pairwise intersecting sets); R_i = {P_k : P_i ∈ Q_k} are the processes that report their
//! state to P_i. A process leaving the CS first enters a mutual-exclusion object `mx` (any
//! mutual-exclusion [`CsObject`]: exits are serialized), collects from Q_i the processes known
//! to be in the CS, and leaves only when it has found at least l+1 of them (itself included).
//!
//! **Messages** ([`MutinMsg`]). `Query(reqCnt)` to Q_i on exiting; `Response1(procsInCS,
//! reqCnt)`, the member's answer; `Response2(procsInCS, reqCnt)`, a later answer sent when a
//! Release arrives while the querier waits; `Acquire` to Q_i once l+1 processes are known in
//! the CS ("remove me"), answered by `Ack`; `Release` to Q_i on entering ("add me"); `Mx(m)`,
//! the traffic of the inner mutual-exclusion object, with kinds `mx.<inner kind>`. The sender
//! is known from the link. Self-addressed messages travel like any other and are counted.
//!
//! **Unexpected messages.** A message no correct peer would send never panics
//! (`tests/hostile.rs`). `Query`, `Acquire` and `Release` are taken only from R_i (the
//! processes whose quorum holds P_i), `Response1`, `Response2` and `Ack` only from Q_i, and a
//! response naming a process outside the system is dropped; anything else from elsewhere is
//! ignored. A response for another request (`reqCnt`), or an `Ack` while no Acquire is out,
//! changes nothing; an `Acquire` is always answered (its sender leaves `procsInCS`, if it was
//! there). `Mx` traffic goes to the inner object, which applies its own rules.
//!
//! **Variables of P_i.**
//!
//! | paper | here | meaning |
//! |---|---|---|
//! | `Q_i`, `R_i` | `quorum` (R_i only shapes `procs_in_cs` at the start) | the quorum P_i asks, the processes that report to P_i |
//! | `state_i` | `state` | InCS / OutCS |
//! | `mx` | `mx` | the mutual-exclusion object serializing exits |
//! | — | `phase` | where the pending Exit stands: in `mx.Entry`, querying, acquiring, in `mx.Exit` |
//! | `reqCnt_i` | `req_cnt` | the request counter; answers to an older Query are ignored |
//! | `procsInCS_i` | `procs_in_cs` | the members of R_i in the CS, as far as P_i knows |
//! | `currentInCS_i` | `current_in_cs` | the processes found in the CS for the pending Exit (P_i included); emptied once it counts l+1, as nothing reads it until the next Exit |
//! | `ackFrom_i` | `ack_from` | the members of Q_i that acknowledged the Acquire |
//! | `responseAgainTo_i`, `respAgainReqCnt_i` | `response_again_to` | the querier waiting for a Response2, with its reqCnt |
//!
//! **Complexity** (Lemma 3, messages per Exit/Entry pair): O(|Q|) plus the cost of `mx`.
//! Exit: |Q_i| each of Query, Response1, Acquire and Ack; Entry: |Q_i| Release; at most
//! |R_j| Response2 per member per Exit under contention (none without it). With Maekawa as
//! `mx` (3|Q_i| messages without contention) a pair costs 8|Q_i|. Waiting time (Lemma 4): at
//! most 7 time units for an Exit (2 for `mx.Entry`, Query + Response1, Acquire + Ack, 1 for
//! `mx.Exit`); an Entry completes at once. The simulator measures the critical path: 6 for an
//! uncontended Exit with an `mx` whose Exit does not wait.
//!
//! **Assumptions.** Reliable FIFO links (the Acquire/Ack handshake and Release/Acquire order
//! need it: a Release overtaken by the next Acquire would leave P_i in `procsInCS` for good);
//! atomic handlers; a coterie (pairwise intersecting quorums); 0 ≤ l < n; a safe initial
//! configuration (at least l processes in the CS) with `mx` starting with every process out
//! of its CS and nothing pending. The graph is complete (any process may message any other).
//!
//! **kmex** ([`Kmex`]): Complement(MUTIN(n−k)) solves global k-mutual exclusion; its inner
//! MUTIN starts from the complement of the outer initial configuration. **(l,k)-GCS**
//! ([`gcs_system`]): [`Gcs`]`<Mutin<M>, Kmex<M>>`, two independent objects, each with its own
//! `mx`.
//!
//! # Deviations from the paper
//!
//! 1. **`responseAgainTo` stays armed until the Acquire.** The printed Release handler sends
//!    one Response2 and clears `responseAgainTo`. A Release from a process the querier already
//!    counted (through another member of its quorum) uses that single Response2 up without
//!    news; the Release that would bring the (l+1)-th process then reaches only members that
//!    have already answered, and the querier waits forever (with l processes in the CS that
//!    all wait for `mx` behind it). Corrected: a member forwards every Release to the waiting
//!    querier until the querier's Acquire arrives (at most |R_j| Response2 per member per
//!    Exit, since exits are serialized and every other process enters at most once meanwhile).
//!    Regression: `tests/global.rs::printed_one_shot_response2_deadlocks`: on three
//!    processes with l = 2 and a two-pair client, the exhaustive checker finds the deadlock
//!    with the printed rule (a stale Release must be slower than a chain of about eight other
//!    messages, which uniform random delays do not produce) and no violation with the
//!    corrected rule within the same bound of states.
//!
//! Readings that are not deviations: `currentInCS_i` includes P_i itself (P_i is in the CS
//! and in every `procsInCS_j` of its quorum), hence the printed l+1 threshold; an Acquire
//! clears `responseAgainTo` only when it comes from that querier (the printed handler clears
//! it on any Acquire; with exits serialized by `mx` the two agree); the Exit completes (the
//! published state changes) when `mx.Exit` completes, as Algorithm 1 places the comment.
//!
//! Network assumptions: the papers assume FIFO links; on complete:3 (l = 1 with Maekawa inside,
//! and kmex with k = 2) the checker found no violation without FIFO within 2 M generated
//! states, nor with duplication within 1 GiB: bounded, neither proved nor refuted; the Maekawa
//! object inside needs both. See docs/checker.md.

use crate::config::{Bounds, Instance};
use crate::cs::{
    check_call, Complement, CsObject, CsState, Gcs, Message, Outbox, Sequence, Variant,
};
use crate::error::{CallError, ConfigError, Problem};
use crate::id::ProcessId;
use crate::quorum::Coterie;
use crate::topology::Topology;
use std::borrow::Cow;
use std::collections::BTreeSet;

/// kmex: global k-mutual exclusion, the complement of MUTIN(n−k).
pub type Kmex<M> = Complement<Mutin<M>>;

/// (l,k)-GCS built from MUTIN(l) and kmex = Complement(MUTIN(n−k)), each with its own `mx`.
pub type MutinGcs<M> = Gcs<Mutin<M>, Kmex<M>>;

/// The messages of MUTIN(l), generic over the messages `X` of its mutual-exclusion object.
/// The sender is known from the link.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum MutinMsg<X> {
    /// Asks a quorum member for the processes it knows in the CS.
    Query {
        /// The querier's request counter.
        req: u64,
    },
    /// The answer to a Query: the member's `procsInCS`.
    Response1 {
        /// The member's `procsInCS`, sorted.
        procs: Vec<ProcessId>,
        /// The request counter of the Query answered.
        req: u64,
    },
    /// A later answer, sent on a Release while the querier waits.
    Response2 {
        /// The member's `procsInCS`, sorted.
        procs: Vec<ProcessId>,
        /// The request counter of the Query answered.
        req: u64,
    },
    /// The sender leaves the CS: remove it from `procsInCS`.
    Acquire,
    /// Acknowledges an Acquire.
    Ack,
    /// The sender entered the CS: add it to `procsInCS`.
    Release,
    /// Traffic of the inner mutual-exclusion object.
    Mx(X),
}

impl<X: Message> Message for MutinMsg<X> {
    fn kind(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            MutinMsg::Query { .. } => "Query",
            MutinMsg::Response1 { .. } => "Response1",
            MutinMsg::Response2 { .. } => "Response2",
            MutinMsg::Acquire => "Acquire",
            MutinMsg::Ack => "Ack",
            MutinMsg::Release => "Release",
            MutinMsg::Mx(m) => return Cow::Owned(format!("mx.{}", m.kind())),
        })
    }
}

/// Which printed rules to follow; see "Deviations from the paper". Each field `true` selects
/// the printed rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct MutinRules {
    /// Deviation 1: a member sends one Response2 per Query and disarms.
    pub one_shot_response2: bool,
}

impl MutinRules {
    /// The corrected algorithm.
    pub const CORRECTED: MutinRules = MutinRules {
        one_shot_response2: false,
    };
    /// Every rule as printed.
    pub const PRINTED: MutinRules = MutinRules {
        one_shot_response2: true,
    };
}

impl From<Variant> for MutinRules {
    fn from(v: Variant) -> Self {
        match v {
            Variant::Corrected | Variant::Trip => MutinRules::CORRECTED,
            Variant::Printed => MutinRules::PRINTED,
        }
    }
}

/// Where a pending Exit of MUTIN(l) stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MutinPhase {
    /// Waiting for `mx.Entry` to complete.
    MxEntry,
    /// Query sent; waiting for |currentInCS| ≥ l+1.
    Querying,
    /// Acquire sent; waiting for every Ack.
    Acquiring,
    /// Waiting for `mx.Exit` to complete.
    MxExit,
}

/// One process of MUTIN(l), over the mutual-exclusion object `M`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Mutin<M> {
    id: ProcessId,
    l: usize,
    quorum: Vec<ProcessId>,
    /// R_i, sorted: the processes whose quorum holds P_i.
    reporters: Vec<ProcessId>,
    /// The number of processes.
    n: usize,
    state: CsState,
    phase: Option<MutinPhase>,
    mx: M,
    req_cnt: u64,
    procs_in_cs: BTreeSet<ProcessId>,
    current_in_cs: BTreeSet<ProcessId>,
    ack_from: BTreeSet<ProcessId>,
    response_again_to: Option<(ProcessId, u64)>,
    rules: MutinRules,
    fault: Option<String>,
}

impl<M: CsObject> Mutin<M> {
    /// Builds MUTIN(l) on `topology` (which must be complete) with quorums `quorums[i]` = Q_i,
    /// the initial configuration `initial` and one mutual-exclusion object per process in
    /// `mx` (`mx[i]` is process i's, every one out of its CS). Reports every problem found.
    pub fn system(
        topology: &Topology,
        quorums: &[Vec<ProcessId>],
        l: usize,
        initial: &[CsState],
        mx: Vec<M>,
        rules: MutinRules,
    ) -> Result<(Instance, Vec<Mutin<M>>), ConfigError> {
        let n = topology.len();
        let inst = global_instance(topology, l, n, "mutin: 0 <= l < n")?;
        let quorums = check_quorums(quorums, n)?;
        check_global_initial(&inst, initial)?;
        check_mx(&mx, n)?;
        let r = reporters(&quorums);
        let procs = mx
            .into_iter()
            .enumerate()
            .map(|(i, mx)| {
                let id = ProcessId::from(i);
                Mutin::new(id, l, quorums[i].clone(), &r[i], initial, mx, rules)
            })
            .collect();
        Ok((inst, procs))
    }

    /// Process `id` of MUTIN(l) with quorum `quorum` (Q_i), reporters `r` (R_i), starting in
    /// `initial` (the whole configuration: `procsInCS` starts with the members of R_i in the
    /// CS) with the mutual-exclusion object `mx`. Does not validate: see [`Mutin::system`].
    pub fn new(
        id: ProcessId,
        l: usize,
        mut quorum: Vec<ProcessId>,
        r: &[ProcessId],
        initial: &[CsState],
        mx: M,
        rules: MutinRules,
    ) -> Mutin<M> {
        quorum.sort();
        quorum.dedup();
        let procs_in_cs = r
            .iter()
            .copied()
            .filter(|q| initial.get(q.index()) == Some(&CsState::InCs))
            .collect();
        let mut reporters = r.to_vec();
        reporters.sort();
        reporters.dedup();
        Mutin {
            id,
            l,
            quorum,
            reporters,
            n: initial.len(),
            state: initial.get(id.index()).copied().unwrap_or(CsState::OutCs),
            phase: None,
            mx,
            req_cnt: 0,
            procs_in_cs,
            current_in_cs: BTreeSet::new(),
            ack_from: BTreeSet::new(),
            response_again_to: None,
            rules,
            fault: None,
        }
    }

    /// The mutual-exclusion object inside.
    pub fn mx(&self) -> &M {
        &self.mx
    }

    /// The quorum Q_i.
    pub fn quorum(&self) -> &[ProcessId] {
        &self.quorum
    }

    /// Where the pending Exit stands, if one is pending.
    pub fn phase(&self) -> Option<MutinPhase> {
        self.phase
    }

    /// The members of R_i this process knows in the CS (`procsInCS_i`).
    pub fn procs_in_cs(&self) -> &BTreeSet<ProcessId> {
        &self.procs_in_cs
    }

    /// The processes found in the CS for the pending Exit (`currentInCS_i`).
    pub fn current_in_cs(&self) -> &BTreeSet<ProcessId> {
        &self.current_in_cs
    }

    /// Runs `f` on the inner object and wraps its sends; returns whether it completed.
    fn with_mx(
        &mut self,
        out: &mut Outbox<MutinMsg<M::Msg>>,
        f: impl FnOnce(&mut M, &mut Outbox<M::Msg>) -> Result<(), CallError>,
    ) -> bool {
        let mut inner = Outbox::new();
        if let Err(e) = f(&mut self.mx, &mut inner) {
            self.fault = Some(format!("{}: mx refused a call: {e}", self.id));
        }
        for (to, m) in inner.drain() {
            out.send(to, MutinMsg::Mx(m));
        }
        inner.completed()
    }

    /// `mx.Entry` completed: start querying.
    fn start_query(&mut self, out: &mut Outbox<MutinMsg<M::Msg>>) {
        self.phase = Some(MutinPhase::Querying);
        self.req_cnt += 1;
        self.current_in_cs.clear();
        for &q in &self.quorum {
            out.send(q, MutinMsg::Query { req: self.req_cnt });
        }
    }

    /// After `currentInCS` grew: Acquire once l+1 processes are known in the CS.
    fn check_count(&mut self, out: &mut Outbox<MutinMsg<M::Msg>>) {
        if self.phase == Some(MutinPhase::Querying) && self.current_in_cs.len() > self.l {
            self.phase = Some(MutinPhase::Acquiring);
            // the count is settled: the set is not read again until the next Exit, and kept
            // it would hold up to n ids in every process (n² in all)
            self.current_in_cs.clear();
            self.ack_from.clear();
            for &q in &self.quorum {
                out.send(q, MutinMsg::Acquire);
            }
        }
    }

    /// Every Ack is in: leave `mx`.
    fn start_mx_exit(&mut self, out: &mut Outbox<MutinMsg<M::Msg>>) {
        self.phase = Some(MutinPhase::MxExit);
        if self.with_mx(out, |mx, o| mx.begin_exit(o)) {
            self.finish_exit(out);
        }
    }

    fn finish_exit(&mut self, out: &mut Outbox<MutinMsg<M::Msg>>) {
        self.phase = None;
        self.state = CsState::OutCs;
        out.complete();
    }
}

impl<M: CsObject> CsObject for Mutin<M> {
    type Msg = MutinMsg<M::Msg>;

    fn id(&self) -> ProcessId {
        self.id
    }

    fn state(&self) -> CsState {
        self.state
    }

    fn pending(&self) -> Option<Sequence> {
        self.phase.map(|_| Sequence::Exit)
    }

    fn begin_exit(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        check_call(self.state, self.pending(), Sequence::Exit)?;
        self.phase = Some(MutinPhase::MxEntry);
        if self.with_mx(out, |mx, o| mx.begin_entry(o)) {
            self.start_query(out);
        }
        Ok(())
    }

    fn begin_entry(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        check_call(self.state, self.pending(), Sequence::Entry)?;
        self.state = CsState::InCs;
        for &q in &self.quorum {
            out.send(q, MutinMsg::Release);
        }
        out.complete();
        Ok(())
    }

    /// By phase: `mx`'s own wait; while querying, the quorum (a count short of l+1 can
    /// grow through any of its members' responses); while acquiring, the quorum members whose
    /// Ack has not come. An entry completes at once: nothing.
    fn awaiting(&self) -> Vec<ProcessId> {
        match self.phase {
            None => Vec::new(),
            Some(MutinPhase::MxEntry | MutinPhase::MxExit) => self.mx.awaiting(),
            Some(MutinPhase::Querying) => self.quorum.clone(),
            Some(MutinPhase::Acquiring) => self
                .quorum
                .iter()
                .filter(|q| !self.ack_from.contains(q))
                .copied()
                .collect(),
        }
    }

    /// What `mx` lent (MUTIN's own messages lend nothing).
    fn lent_to(&self) -> Vec<ProcessId> {
        self.mx.lent_to()
    }

    fn on_message(&mut self, from: ProcessId, msg: Self::Msg, out: &mut Outbox<Self::Msg>) {
        let peer = match &msg {
            MutinMsg::Query { .. } | MutinMsg::Acquire | MutinMsg::Release => {
                self.reporters.binary_search(&from).is_ok()
            }
            MutinMsg::Response1 { procs, .. } | MutinMsg::Response2 { procs, .. } => {
                self.quorum.contains(&from) && procs.iter().all(|p| p.index() < self.n)
            }
            MutinMsg::Ack => self.quorum.contains(&from),
            MutinMsg::Mx(_) => true,
        };
        if !peer {
            return;
        }
        match msg {
            MutinMsg::Query { req } => {
                let procs = self.procs_in_cs.iter().copied().collect();
                out.send(from, MutinMsg::Response1 { procs, req });
                self.response_again_to = Some((from, req));
            }
            MutinMsg::Response1 { procs, req } | MutinMsg::Response2 { procs, req } => {
                if req == self.req_cnt && self.phase == Some(MutinPhase::Querying) {
                    self.current_in_cs.extend(procs);
                    self.check_count(out);
                }
            }
            MutinMsg::Acquire => {
                self.procs_in_cs.remove(&from);
                out.send(from, MutinMsg::Ack);
                if self.rules.one_shot_response2
                    || self.response_again_to.is_some_and(|(p, _)| p == from)
                {
                    self.response_again_to = None;
                }
            }
            MutinMsg::Ack => {
                if self.phase == Some(MutinPhase::Acquiring) {
                    self.ack_from.insert(from);
                    if self.quorum.iter().all(|q| self.ack_from.contains(q)) {
                        self.start_mx_exit(out);
                    }
                }
            }
            MutinMsg::Release => {
                self.procs_in_cs.insert(from);
                if let Some((to, req)) = self.response_again_to {
                    let procs = self.procs_in_cs.iter().copied().collect();
                    out.send(to, MutinMsg::Response2 { procs, req });
                    if self.rules.one_shot_response2 {
                        self.response_again_to = None;
                    }
                }
            }
            MutinMsg::Mx(m) => {
                let completed = self.with_mx(out, |mx, o| {
                    mx.on_message(from, m, o);
                    Ok(())
                });
                if completed {
                    match self.phase {
                        Some(MutinPhase::MxEntry) => self.start_query(out),
                        Some(MutinPhase::MxExit) => self.finish_exit(out),
                        _ => {
                            self.fault = Some(format!(
                                "{}: mx completed a sequence MUTIN did not start",
                                self.id
                            ))
                        }
                    }
                }
            }
        }
    }

    fn set_time(&mut self, now: u64) {
        self.mx.set_time(now)
    }

    fn check_invariants(&self) -> Result<(), String> {
        if let Some(f) = &self.fault {
            return Err(f.clone());
        }
        self.mx.check_invariants()
    }
}

/// Builds kmex = Complement(MUTIN(n−k)): at most k processes in the CS, 1 ≤ k ≤ n. The
/// inner MUTIN starts from the complement of `initial`. Reports every problem found.
pub fn kmex_system<M: CsObject>(
    topology: &Topology,
    quorums: &[Vec<ProcessId>],
    k: usize,
    initial: &[CsState],
    mx: Vec<M>,
    rules: MutinRules,
) -> Result<(Instance, Vec<Kmex<M>>), ConfigError> {
    let n = topology.len();
    let inst = global_instance(topology, 0, k, "kmex: 1 <= k <= n")?;
    check_global_initial(&inst, initial)?;
    let inner_initial: Vec<CsState> = initial.iter().map(|&s| !s).collect();
    let (_, procs) = Mutin::system(topology, quorums, n - k, &inner_initial, mx, rules)?;
    Ok((inst, procs.into_iter().map(Complement).collect()))
}

/// Builds (l,k)-GCS = Gcs(MUTIN(l), kmex = Complement(MUTIN(n−k))), 0 ≤ l < k ≤ n, with
/// `mx_l` and `mx_k` the two independent mutual-exclusion systems of the two objects. Both
/// use the same quorums. Reports every problem found.
pub fn gcs_system<M: CsObject>(
    topology: &Topology,
    quorums: &[Vec<ProcessId>],
    (l, k): (usize, usize),
    initial: &[CsState],
    (mx_l, mx_k): (Vec<M>, Vec<M>),
    rules: MutinRules,
) -> Result<(Instance, Vec<MutinGcs<M>>), ConfigError> {
    let inst = global_instance(topology, l, k, "gcs: 0 <= l < k <= n")?;
    check_global_initial(&inst, initial)?;
    let (_, lmin) = Mutin::system(topology, quorums, l, initial, mx_l, rules)?;
    let (_, kmex) = kmex_system(topology, quorums, k, initial, mx_k, rules)?;
    let procs = Gcs::system(lmin, kmex)?;
    Ok((inst, procs))
}

/// (l,k)-GCS on complete:`n` with the grid coterie and Maekawa as both `mx` objects, the
/// first `active` processes in the CS: the large global instance the runtime's tests,
/// benchmarks and `examples/runtime_scaling.rs` run.
pub fn grid_gcs_system(
    n: usize,
    (l, k): (usize, usize),
    active: usize,
) -> Result<(Instance, Vec<MutinGcs<crate::algo::maekawa::Maekawa>>), ConfigError> {
    let topology = Topology::complete(n)?;
    let coterie = Coterie::grid(n)?;
    let idle = vec![CsState::OutCs; n];
    let mx = || crate::algo::maekawa::Maekawa::system(&coterie, &idle).map(|(_, p)| p);
    let initial: Vec<CsState> = (0..n)
        .map(|i| {
            if i < active {
                CsState::InCs
            } else {
                CsState::OutCs
            }
        })
        .collect();
    gcs_system(
        &topology,
        &quorums_of(&coterie),
        (l, k),
        &initial,
        (mx()?, mx()?),
        MutinRules::CORRECTED,
    )
}

/// The global instance (l, k) on `topology`: checks that the topology is complete and
/// 0 ≤ l < k ≤ n, one problem per failed check. `rule` is the algorithm's form of the bound
/// condition, written `ALGORITHM: CONDITION` (`"kmex: 1 <= k <= n"`); the part before `": "`
/// names the algorithm in [`Problem::NeedsCompleteGraph`].
pub fn global_instance(
    topology: &Topology,
    l: usize,
    k: usize,
    rule: &str,
) -> Result<Instance, ConfigError> {
    let n = topology.len();
    let mut problems = Vec::new();
    if !topology.is_complete() {
        let algorithm = rule.split_once(": ").map_or("this algorithm", |(a, _)| a);
        problems.push(Problem::NeedsCompleteGraph {
            algorithm: algorithm.to_string(),
            topology: topology.name().to_string(),
            n,
        });
    }
    if l >= k || k > n {
        problems.push(Problem::Invalid(format!(
            "bounds l={l}, k={k} with n={n} break {rule}"
        )));
    }
    ConfigError::check(problems)?;
    Instance::new(topology.clone(), vec![Bounds { l, k }; n])
}

/// Checks a global initial configuration: one state per process and l ≤ |CS(C0)| ≤ k, as one
/// line.
pub fn check_global_initial(inst: &Instance, initial: &[CsState]) -> Result<(), ConfigError> {
    let n = inst.len();
    if initial.len() != n {
        return Err(ConfigError::one(Problem::InitialLength {
            given: initial.len(),
            n,
        }));
    }
    let in_cs = initial.iter().filter(|&&s| s == CsState::InCs).count();
    let Bounds { l, k } = inst.bounds(ProcessId(0));
    if in_cs < l || in_cs > k {
        return Err(ConfigError::one(Problem::Invalid(format!(
            "initial configuration is unsafe: {in_cs} processes in the CS, outside [{l}, {k}]"
        ))));
    }
    Ok(())
}

/// Checks a quorum system for `n` processes and returns it with every quorum sorted: one
/// non-empty quorum per process, ids in range, every two quorums intersecting. Reports every
/// bad quorum and the first non-intersecting pair.
pub fn check_quorums(
    quorums: &[Vec<ProcessId>],
    n: usize,
) -> Result<Vec<Vec<ProcessId>>, ConfigError> {
    if quorums.len() != n {
        return Err(ConfigError::one(Problem::Invalid(format!(
            "{} quorums for {n} processes",
            quorums.len()
        ))));
    }
    let mut problems = Vec::new();
    let mut sorted = Vec::with_capacity(n);
    for (i, q) in quorums.iter().enumerate() {
        let mut q = q.clone();
        q.sort();
        q.dedup();
        if q.is_empty() {
            problems.push(Problem::Invalid(format!("the quorum of P{i} is empty")));
        }
        if let Some(bad) = q.iter().find(|p| p.index() >= n) {
            problems.push(Problem::Invalid(format!(
                "the quorum of P{i} names {bad}, but processes are 0..{n}"
            )));
        }
        sorted.push(q);
    }
    ConfigError::check(problems)?;
    if is_generated(&sorted, n) {
        // the majority and grid coteries intersect pairwise by construction (crate::quorum)
        return Ok(sorted);
    }
    let words = n.div_ceil(64);
    let bits: Vec<Vec<u64>> = sorted
        .iter()
        .map(|q| {
            let mut b = vec![0u64; words];
            for p in q {
                b[p.index() / 64] |= 1 << (p.index() % 64);
            }
            b
        })
        .collect();
    let mut disjoint = (0..n)
        .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
        .filter(|&(a, b)| bits[a].iter().zip(&bits[b]).all(|(x, y)| x & y == 0));
    if let Some((a, b)) = disjoint.next() {
        let more = disjoint.count();
        let tail = if more > 0 {
            format!(" (and {more} more pairs)")
        } else {
            String::new()
        };
        return Err(ConfigError::one(Problem::Invalid(format!(
            "the quorums of P{a} and P{b} do not intersect{tail}: not a coterie"
        ))));
    }
    Ok(sorted)
}

/// Whether `sorted` (each quorum sorted) is exactly the majority or the grid coterie on `n`
/// processes: built and compared in O(n·|Q|), instead of the O(n²) pairwise check.
fn is_generated(sorted: &[Vec<ProcessId>], n: usize) -> bool {
    let size = sorted.first().map_or(0, Vec::len);
    let candidate = if size * 4 >= n {
        Coterie::majority(n)
    } else {
        Coterie::grid(n)
    };
    candidate.is_ok_and(|c| {
        sorted.iter().enumerate().all(|(i, q)| {
            let mut g = c.quorum(ProcessId::from(i)).to_vec();
            g.sort();
            g.dedup();
            g == *q
        })
    })
}

/// The quorums Q_0, ..., Q_{n−1} of `coterie`, for the system builders here.
pub fn quorums_of(coterie: &Coterie) -> Vec<Vec<ProcessId>> {
    (0..coterie.len())
        .map(|i| coterie.quorum(ProcessId::from(i)).to_vec())
        .collect()
}

/// R_i = {P_k : P_i ∈ Q_k} for every i, each sorted.
pub fn reporters(quorums: &[Vec<ProcessId>]) -> Vec<Vec<ProcessId>> {
    let mut r = vec![Vec::new(); quorums.len()];
    for (k, q) in quorums.iter().enumerate() {
        for p in q {
            if let Some(list) = r.get_mut(p.index()) {
                list.push(ProcessId::from(k));
            }
        }
    }
    r
}

/// Checks the mutual-exclusion objects: one per process, `mx[i]` being process i, each out
/// of its CS with nothing pending.
fn check_mx<M: CsObject>(mx: &[M], n: usize) -> Result<(), ConfigError> {
    if mx.len() != n {
        return Err(ConfigError::one(Problem::Invalid(format!(
            "{} mutual-exclusion objects for {n} processes",
            mx.len()
        ))));
    }
    let problems: Vec<Problem> = mx
        .iter()
        .enumerate()
        .filter_map(|(i, m)| {
            if m.id().index() != i {
                Some(format!(
                    "the mutual-exclusion object at index {i} is process {}",
                    m.id()
                ))
            } else if m.state() != CsState::OutCs || m.pending().is_some() {
                Some(format!(
                    "the mutual-exclusion object of P{i} must start out of its CS, idle"
                ))
            } else {
                None
            }
        })
        .map(Problem::Invalid)
        .collect();
    ConfigError::check(problems)
}
