//! The quota: keep between l and k of your workers active, among all of them or among each
//! worker's neighbours, with no central lock and no semaphore's one-sided guarantee.
//!
//! ```
//! use lkcs::Quota;
//!
//! // 8 workers; at least 2 and at most 5 active at any time
//! let quota = Quota::global(8).between(2, 5).build()?;
//! std::thread::scope(|s| {
//!     for mut m in quota.members() {
//!         s.spawn(move || -> Result<(), lkcs::QuotaError> {
//!             for _ in 0..10 {
//!                 m.enter()?; // blocks while 5 are active
//!                 // ... work while counted as active ...
//!                 match m.exit() {
//!                     // blocks while only 2 are active; the last two can never leave,
//!                     // so they wait until the quota shuts down
//!                     Err(e) if e.is_shutdown() => return Ok(()),
//!                     r => r?,
//!                 }
//!             }
//!             Ok(())
//!         });
//!     }
//!     // a real program would wait for its work here, then shut down
//!     quota.shutdown(); // every blocked call returns QuotaError::Shutdown
//! });
//! # Ok::<(), lkcs::ConfigError>(())
//! ```
//!
//! # Which algorithm
//! [`QuotaBuilder::build`] picks the algorithm from the bounds ([`Quota::algorithm`] says
//! which); every member is one thread of the [`runtime`](crate::runtime) running that
//! algorithm's state machine, and members talk by messages only.
//!
//! | quota | bounds | algorithm | messages per enter + exit |
//! |---|---|---|---|
//! | global | at most 1 | migrating controller [`Algorithm::Cdc`] | about 3 |
//! | global | at most k | kmex = complement of MUTIN(n − k) [`Algorithm::Kmex`] | O(√n) (grid quorums) |
//! | global | at least l | MUTIN(l) [`Algorithm::Mutin`] | O(√n) |
//! | global | between l and k | (l,k)-GCS [`Algorithm::Gcs`] | O(√n) |
//! | local | at least l_i | l_i-LMUTIN [`Algorithm::Lmutin`] | 3(\|N_i\|+1) to 6(\|N_i\|+1) |
//! | local | at most k_i | k_i-LMUTEX [`Algorithm::Lmutex`] | 3(\|N_i\|+1) to 6(\|N_i\|+1) |
//! | local | between l_i and k_i | LKCS [`Algorithm::Lkcs`] | 6(\|N_i\|+1) to 12(\|N_i\|+1) and more |
//!
//! The global algorithms use grid quorums and the migrating controller (CDC) as their inner
//! mutual exclusion unless told otherwise ([`QuotaBuilder::coterie`], [`QuotaBuilder::mx`],
//! [`QuotaBuilder::algorithm`]). A local quota with both bounds runs LKCS's round trip
//! (no leader; `docs/lkcs-liveness.md`): it tightens by one every bound a move can break
//! (l_i+1 where l_i > 0, k_i−1 where k_i < |N_i|+1), needs those to stay apart and a start
//! within them, and completed every one of the 39,331 runs of its sweeps. On an instance it
//! refuses, the quota runs the paper's leader rules instead (a member with at least 4
//! neighbours and k_i − l_i ≥ 3 within two hops of it), which are not live on every graph
//! (a stall is reported, never silent).
//!
//! # Failure semantics
//! - **Timeouts and cancellation** never move a member silently: a call that returns
//!   [`QuotaError::Timeout`] (or an async call whose future is dropped) leaves its move
//!   running, visible in [`Member::state`], and the next call resolves it.
//! - **A dropped member** (its worker returned or panicked) retires: if active, it leaves as
//!   soon as the bounds allow, and it never moves again.
//! - **Stalls**: when nothing is in flight and every live member is blocked in a call, every
//!   blocked call returns [`QuotaError::Stalled`] within about half a second, naming the
//!   blocked members, the bound that holds each and the members they wait on (dropped ones
//!   included). A member merely idle is live: no stall is reported while one could still
//!   move.
//! - **Slow or stuck without a stall**: a member that stays active (idle, in no call) is live,
//!   so members waiting behind it wait for as long as it stays. With the local algorithms a
//!   waiting member keeps the permissions it already has (hold-and-wait), so the wait can
//!   reach members whom no bound holds, several hops away. [`Quota::waiting`] reports it:
//!   every waiting member, the bound that holds it, or the permissions it still needs and
//!   who holds them.
//! - **Shutdown**: [`Quota::shutdown`] (or dropping the quota) wakes every blocked call with
//!   [`QuotaError::Shutdown`]; every later call returns it too.

mod error;
pub(crate) mod member;

pub use crate::catalog::Algorithm;
pub use error::{Blocked, Limit, QuotaError, Stall, Waits};
pub use member::{Member, MemberState, Move};

/// The error type of [`Member`] calls ([`QuotaError`]).
pub type Error = QuotaError;

use crate::catalog::{BoundsFile, SystemSpec, SystemVisitor};
use crate::config::{Bounds, Instance};
use crate::cs::{CsObject, CsState, Variant};
use crate::error::{ConfigError, Problem};
use crate::id::ProcessId;
use crate::runtime::{Handle, Inspector, Runtime, RuntimeConfig, RuntimeError, RuntimeReport};
use crate::topology::Topology;
use member::{MemberEngine, ThreadMember};
use std::borrow::Borrow;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// How often the stall watchdog looks while a call is blocked, unless told otherwise.
pub const DEFAULT_STALL_CHECK: Duration = Duration::from_millis(200);

/// How long a wait report waits for the process threads' answers.
const INSPECT_PATIENCE: Duration = Duration::from_secs(1);

/// What the members share: the bounds and an inspector, for explaining a wait.
#[derive(Debug)]
pub(crate) struct Shared {
    instance: Instance,
    operating: Vec<Bounds>,
    global: bool,
    inspector: Inspector,
}

impl Shared {
    fn context(&self) -> error::Context<'_> {
        error::Context {
            instance: &self.instance,
            operating: &self.operating,
            global: self.global,
        }
    }
}

/// The quorum system of the global algorithms ([`QuotaBuilder::coterie`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuorumSystem {
    /// Every majority of the members: |Q| = ⌊n/2⌋ + 1.
    Majority,
    /// A row and a column of a √n × √n grid: |Q| ≈ 2√n − 1 (the default).
    Grid,
}

/// The mutual-exclusion object inside MUTIN(l), kmex and GCS ([`QuotaBuilder::mx`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InnerMutex {
    /// The migrating controller with a central queue (the default): about 3 messages.
    Cdc,
    /// The migrating controller with a distributed queue.
    Ddc,
    /// Maekawa's quorum mutual exclusion on the same quorums.
    Maekawa,
    /// LMUTEX with k = 1 on all members: O(n) messages.
    Lmutex,
}

impl InnerMutex {
    fn name(self) -> &'static str {
        match self {
            InnerMutex::Cdc => "cdc",
            InnerMutex::Ddc => "ddc",
            InnerMutex::Maekawa => "maekawa",
            InnerMutex::Lmutex => "lmutex",
        }
    }
}

#[derive(Clone, Debug)]
enum Scope {
    Global(usize),
    Local(Topology),
}

/// Builds a [`Quota`]: start with [`Quota::global`] or [`Quota::local`], give bounds, then
/// [`QuotaBuilder::build`]. Every problem is reported at once by `build`.
#[derive(Clone, Debug)]
#[must_use = "a builder does nothing until built"]
pub struct QuotaBuilder {
    scope: Scope,
    l: Option<usize>,
    k: Option<usize>,
    per_member: Option<(Vec<usize>, Vec<usize>)>,
    initially_active: Option<Vec<usize>>,
    algorithm: Option<Algorithm>,
    coterie: Option<QuorumSystem>,
    mx: Option<InnerMutex>,
    leader: Option<usize>,
    round_trip: bool,
    monitor: bool,
    stall_check: Duration,
}

/// A running quota: one thread per member runs the chosen algorithm; hand the
/// [`Member`]s to your workers with [`Quota::members`]. Dropping it shuts it down.
pub struct Quota {
    algorithm: Algorithm,
    n: usize,
    initial: Vec<usize>,
    bounds: Vec<Bounds>,
    global: bool,
    engine: Box<dyn QuotaEngine>,
    members: parking_lot::Mutex<Option<Vec<Member>>>,
    shared: Arc<Shared>,
}

impl fmt::Debug for Quota {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Quota");
        d.field("algorithm", &self.algorithm)
            .field("members", &self.n);
        if self.global {
            d.field("scope", &"global")
                .field("at_least", &self.bounds[0].l)
                .field("at_most", &self.bounds[0].k);
        } else {
            d.field("scope", &"local").field("bounds", &self.bounds);
        }
        d.field("initially_active", &self.initial).finish()
    }
}

impl Quota {
    /// A quota over all `n` members: the bounds count how many of them are active.
    pub fn global(n: usize) -> QuotaBuilder {
        QuotaBuilder::new(Scope::Global(n))
    }

    /// A quota on a graph: member i's bounds count the active members of its closed
    /// neighbourhood (itself and its neighbours in `topology`).
    pub fn local(topology: Topology) -> QuotaBuilder {
        QuotaBuilder::new(Scope::Local(topology))
    }

    /// The members, one per id in order; every later call returns an empty vector.
    pub fn members(&self) -> Vec<Member> {
        self.members.lock().take().unwrap_or_default()
    }

    /// The algorithm running the quota (chosen from the bounds unless overridden).
    pub fn algorithm(&self) -> Algorithm {
        self.algorithm
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Always false: a quota has at least one member.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// The members that started active, by id.
    pub fn initially_active(&self) -> &[usize] {
        &self.initial
    }

    /// Each member's bounds (l_i, k_i), by id (in a global quota, every entry is the same).
    pub fn bounds(&self) -> &[Bounds] {
        &self.bounds
    }

    /// Messages and state changes so far, and with [`QuotaBuilder::monitor`] the bound
    /// violations the monitor found (0 unless lkcs has a bug).
    pub fn report(&self) -> RuntimeReport {
        self.engine.report()
    }

    /// Who waits now, and on whom: every member with a move in progress (blocked in a call, or
    /// left pending by a timeout), the bound that holds it, or, when no bound does, the
    /// permissions it still needs and who holds them. For a quota that is slow or stuck
    /// without being [stalled](Stall): a member that stays active can hold up others far
    /// away, since a waiting member keeps the permissions it has (hold-and-wait).
    ///
    /// The picture is taken while the quota runs; [`Waits::in_flight`] says whether it may
    /// mix moments.
    ///
    /// ```
    /// use lkcs::{Quota, Topology};
    ///
    /// let quota = Quota::local(Topology::ring(6)?).at_most(1).build()?;
    /// let mut members = quota.members();
    /// members[0].enter()?;
    /// let waits = quota.waiting();
    /// assert!(waits.waiting.is_empty());
    /// assert_eq!(waits.active, [0]);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn waiting(&self) -> Waits {
        let look = self.shared.inspector.look(INSPECT_PATIENCE);
        self.shared.context().waits(&look)
    }

    /// Stops every member's thread. Every blocked call returns [`QuotaError::Shutdown`], and
    /// so does every later call. Idempotent; dropping the quota does the same.
    pub fn shutdown(&self) {
        self.engine.shutdown();
    }
}

impl Drop for Quota {
    fn drop(&mut self) {
        self.engine.shutdown();
    }
}

impl QuotaBuilder {
    fn new(scope: Scope) -> QuotaBuilder {
        QuotaBuilder {
            scope,
            l: None,
            k: None,
            per_member: None,
            initially_active: None,
            algorithm: None,
            coterie: None,
            mx: None,
            leader: None,
            round_trip: false,
            monitor: false,
            stall_check: DEFAULT_STALL_CHECK,
        }
    }

    /// At least `l` and at most `k` active (for every member's neighbourhood, in a local
    /// quota).
    pub fn between(mut self, l: usize, k: usize) -> Self {
        self.l = Some(l);
        self.k = Some(k);
        self
    }

    /// At least `l` active; the upper bound stays as given (by default: all).
    pub fn at_least(mut self, l: usize) -> Self {
        self.l = Some(l);
        self
    }

    /// At most `k` active; the lower bound stays as given (by default: none).
    pub fn at_most(mut self, k: usize) -> Self {
        self.k = Some(k);
        self
    }

    /// Local quotas: member i's own bounds `l[i]` and `k[i]` on its closed neighbourhood.
    pub fn bounds(mut self, l: impl Into<Vec<usize>>, k: impl Into<Vec<usize>>) -> Self {
        self.per_member = Some((l.into(), k.into()));
        self
    }

    /// The members active at the start (it must meet every bound). By default: the `l`
    /// lowest ids in a global quota with a lower bound, nobody otherwise; every member in
    /// a local quota with only lower bounds, nobody with only upper bounds; for LKCS, a start
    /// found to meet its preconditions.
    pub fn initially_active<I: Borrow<usize>>(mut self, ids: impl IntoIterator<Item = I>) -> Self {
        self.initially_active = Some(ids.into_iter().map(|i| *i.borrow()).collect());
        self
    }

    /// Runs this algorithm instead of the one the bounds select (it must solve them).
    pub fn algorithm(mut self, algorithm: Algorithm) -> Self {
        self.algorithm = Some(algorithm);
        self
    }

    /// The quorum system of a global algorithm (default [`QuorumSystem::Grid`]).
    pub fn coterie(mut self, coterie: QuorumSystem) -> Self {
        self.coterie = Some(coterie);
        self
    }

    /// The mutual-exclusion object inside MUTIN(l), kmex and GCS (default
    /// [`InnerMutex::Cdc`]).
    pub fn mx(mut self, mx: InnerMutex) -> Self {
        self.mx = Some(mx);
        self
    }

    /// LKCS: run the leader rules (the paper's leader, corrected) with this member as the
    /// leader. By default a local quota with both bounds runs the round trip (no leader)
    /// where it can, and the leader rules with an automatic leader otherwise.
    pub fn leader(mut self, member: usize) -> Self {
        self.leader = Some(member);
        self
    }

    /// LKCS: run the round trip (`--variant trip`, [`crate::LkcsRules::TRIP`]) and nothing
    /// else: no leader, and live on every instance its sweeps could start
    /// (`docs/lkcs-liveness.md`). The default runs it too, but falls back to the leader
    /// rules on an instance it refuses; with `round_trip()` such an instance is refused. It
    /// keeps every bound one tighter where a move can break
    /// it (l_i+1 where l_i > 0, k_i−1 where k_i < |N_i|+1) in normal operation, the
    /// reserve going to one blocked member at a time; the start must meet those tightened
    /// bounds, and bounds that leave l_i+1 ≥ k_i−1 are refused. A member that stays put
    /// after a move that took the reserve keeps it until it moves back.
    pub fn round_trip(mut self) -> Self {
        self.round_trip = true;
        self
    }

    /// Checks every bound after every state change under one global lock (tests,
    /// debugging); [`Quota::report`] gives the count. Off by default.
    pub fn monitor(mut self, on: bool) -> Self {
        self.monitor = on;
        self
    }

    /// How often the stall watchdog looks while a call is blocked (default
    /// [`DEFAULT_STALL_CHECK`]); a stall is reported within about two intervals.
    pub fn stall_check(mut self, interval: Duration) -> Self {
        self.stall_check = interval;
        self
    }

    /// Validates everything, picks the algorithm and starts one thread per member. Every
    /// problem found is in the error, one per line.
    pub fn build(self) -> Result<Quota, ConfigError> {
        let plan = self.plan()?;
        let start = Start {
            monitor: self.monitor,
            stall_check: self.stall_check,
            global: plan.global,
        };
        let started = plan
            .spec
            .build(start)
            .map_err(|e| in_quota_terms(e, plan.default_lkcs.as_ref()))?
            .map_err(ConfigError::from)?;
        let Started {
            engine,
            handles,
            shared,
            initial,
        } = started;
        let n = handles.len();
        let bounds = shared.instance.all_bounds().to_vec();
        let members = handles
            .into_iter()
            .enumerate()
            .map(|(i, h)| Member::new(i, h))
            .collect();
        let shared = shared.clone();
        Ok(Quota {
            algorithm: plan.spec.algorithm,
            n,
            initial,
            bounds,
            global: plan.global,
            engine,
            members: parking_lot::Mutex::new(Some(members)),
            shared,
        })
    }

    /// The number of members.
    fn n(&self) -> usize {
        match &self.scope {
            Scope::Global(n) => *n,
            Scope::Local(t) => t.len(),
        }
    }
}

/// What `build` hands to the catalog.
struct Plan {
    spec: SystemSpec,
    global: bool,
    /// LKCS with neither a leader nor `round_trip`: the instance, whose leader-rule
    /// preconditions are given in quota terms if neither the round trip nor the leader rules
    /// can run it.
    default_lkcs: Option<Instance>,
}

/// Global (l, k) and the algorithm it selects: (0, 1) mutual exclusion, (0, k) kmex,
/// (l, n) MUTIN(l), (l, k) GCS.
fn global_choice(l: usize, k: usize, n: usize) -> Algorithm {
    match (l, k) {
        (0, 1) => Algorithm::Cdc,
        (0, _) => Algorithm::Kmex,
        (_, k) if k == n => Algorithm::Mutin,
        _ => Algorithm::Gcs,
    }
}

/// Local bounds and the algorithm they select: only lower bounds LMUTIN, only upper bounds
/// LMUTEX, both LKCS.
fn local_choice(t: &Topology, l: &[usize], k: &[usize]) -> Algorithm {
    let full = |p: ProcessId| t.degree(p) + 1;
    if t.processes().all(|p| k[p.index()] == full(p)) {
        Algorithm::Lmutin
    } else if l.iter().all(|&l| l == 0) {
        Algorithm::Lmutex
    } else {
        Algorithm::Lkcs
    }
}

impl QuotaBuilder {
    /// Everything `build` checks before it starts a thread.
    fn plan(&self) -> Result<Plan, ConfigError> {
        let n = self.n();
        let mut problems = Vec::new();
        if n == 0 {
            return Err(ConfigError::one(Problem::Invalid(
                "a quota needs at least one member".into(),
            )));
        }
        let uniform = self.l.is_some() || self.k.is_some();
        if self.per_member.is_none() && !uniform {
            problems.push(Problem::Invalid(
                "no bounds: call between(l, k), at_least(l) or at_most(k) (or bounds for a local quota)"
                    .into(),
            ));
        }
        if self.per_member.is_some() && uniform {
            problems.push(Problem::Invalid(
                "bounds(l, k) per member and between / at_least / at_most are exclusive".into(),
            ));
        }
        let (global, topology, l, k) = match &self.scope {
            Scope::Global(n) => {
                let n = *n;
                if self.per_member.is_some() {
                    problems.push(Problem::Invalid(
                        "bounds(l, k) gives per-member bounds of a local quota; a global quota takes between, at_least or at_most"
                            .into(),
                    ));
                }
                let (l, k) = (self.l.unwrap_or(0), self.k.unwrap_or(n));
                if k > n {
                    problems.push(Problem::Invalid(format!(
                        "at most {k} active of {n} members: the upper bound cannot exceed the number of members"
                    )));
                }
                if l >= k {
                    problems.push(Problem::Invalid(format!(
                        "at least {l} and at most {k} active: the lower bound must be below the upper bound"
                    )));
                } else if (l, k) == (0, n) && problems.is_empty() {
                    problems.push(Problem::Invalid(format!(
                        "at least 0 and at most {n} of {n} active constrains nothing: give a lower bound above 0 or an upper bound below {n}"
                    )));
                }
                let topology = match Topology::complete(n) {
                    Ok(t) => t,
                    Err(e) => {
                        problems.extend(e.problems);
                        return Err(ConfigError { problems });
                    }
                };
                (true, topology, vec![l; n], vec![k; n])
            }
            Scope::Local(t) => {
                let full: Vec<usize> = t.processes().map(|p| t.degree(p) + 1).collect();
                let (l, k) = match &self.per_member {
                    Some((l, k)) => {
                        for (name, v) in [("lower", l), ("upper", k)] {
                            if v.len() != n {
                                problems.push(Problem::Invalid(format!(
                                    "bounds: {} {name} bounds for {n} members",
                                    v.len()
                                )));
                            }
                        }
                        if !problems.is_empty() {
                            return Err(ConfigError { problems });
                        }
                        (l.clone(), k.clone())
                    }
                    None => (
                        vec![self.l.unwrap_or(0); n],
                        match self.k {
                            Some(k) => vec![k; n],
                            None => full.clone(),
                        },
                    ),
                };
                for p in t.processes() {
                    let i = p.index();
                    let size = full[i];
                    if k[i] > size {
                        problems.push(Problem::Invalid(format!(
                            "member {i}: at most {} active around it, but its neighbourhood (itself and {} neighbours) holds only {size}",
                            k[i],
                            size - 1
                        )));
                    }
                    if l[i] >= k[i] {
                        problems.push(Problem::Invalid(format!(
                            "member {i}: at least {} and at most {} active around it: the lower bound must be below the upper bound",
                            l[i], k[i]
                        )));
                    }
                }
                if problems.is_empty() && (0..n).all(|i| l[i] == 0 && k[i] == full[i]) {
                    problems.push(Problem::Invalid(
                        "these bounds constrain nothing (at least 0 and at most every neighbour active everywhere)".into(),
                    ));
                }
                (false, t.clone(), l, k)
            }
        };
        ConfigError::check(problems)?;
        let algorithm = self.algorithm.unwrap_or_else(|| {
            if global {
                global_choice(l[0], k[0], n)
            } else {
                local_choice(&topology, &l, &k)
            }
        });
        let mut problems = Vec::new();
        let inst = Instance::new(
            topology.clone(),
            l.iter().zip(&k).map(|(&l, &k)| Bounds { l, k }).collect(),
        )?;
        let initial = match &self.initially_active {
            Some(ids) => {
                let mut states = vec![CsState::OutCs; n];
                for &i in ids {
                    if i >= n {
                        problems.push(Problem::Invalid(format!(
                            "initially_active names member {i}, but members are 0..{n}"
                        )));
                    } else if states[i] == CsState::InCs {
                        problems.push(Problem::Invalid(format!(
                            "initially_active names member {i} twice"
                        )));
                    } else {
                        states[i] = CsState::InCs;
                    }
                }
                if problems.is_empty() {
                    problems.extend(unsafe_start(&inst, &states, global));
                }
                Some(states)
            }
            None => default_start(algorithm, &l),
        };
        let option_problems = self.option_problems(algorithm, global, &topology);
        problems.extend(option_problems);
        // the round trip needs no leader: without one named, the leader rules'
        // preconditions only explain a refusal of both (`in_quota_terms`)
        let default_lkcs = algorithm == Algorithm::Lkcs && !self.round_trip;
        if default_lkcs && self.leader.is_some() {
            problems.extend(lkcs_problems(&inst, self.leader));
        }
        ConfigError::check(problems)?;
        let lists = |l: bool, k: bool| {
            Some(BoundsFile {
                l: l.then(|| inst.all_bounds().iter().map(|b| b.l).collect()),
                k: k.then(|| inst.all_bounds().iter().map(|b| b.k).collect()),
            })
        };
        let (sl, sk, bounds) = match algorithm {
            Algorithm::Mutin => (Some(l[0]), None, None),
            Algorithm::Kmex => (None, Some(k[0]), None),
            Algorithm::Gcs => (Some(l[0]), Some(k[0]), None),
            Algorithm::Maekawa | Algorithm::Cdc | Algorithm::Ddc => (None, None, None),
            Algorithm::Lmutin => (None, None, lists(true, false)),
            Algorithm::Lmutex => (None, None, lists(false, true)),
            Algorithm::Lkcs => (None, None, lists(true, true)),
        };
        let mx = self.mx.unwrap_or(InnerMutex::Cdc);
        let coterie = match self.coterie.unwrap_or(QuorumSystem::Grid) {
            QuorumSystem::Grid => "grid",
            QuorumSystem::Majority => "majority",
        };
        let uses_quorums = matches!(
            algorithm,
            Algorithm::Maekawa | Algorithm::Mutin | Algorithm::Kmex | Algorithm::Gcs
        );
        let spec = SystemSpec {
            algorithm,
            topology,
            l: sl,
            k: sk,
            bounds,
            initial,
            variant: if self.round_trip {
                Variant::Trip
            } else {
                Variant::Corrected
            },
            leader: self.leader.map(|p| p.to_string()),
            coterie: uses_quorums.then(|| coterie.to_string()),
            mx: matches!(
                algorithm,
                Algorithm::Mutin | Algorithm::Kmex | Algorithm::Gcs
            )
            .then(|| mx.name().to_string()),
            maxreq: None,
            migrate_after: None,
        };
        Ok(Plan {
            spec,
            global,
            default_lkcs: (default_lkcs && self.leader.is_none()).then_some(inst),
        })
    }

    /// The overrides that do not fit the algorithm or the scope.
    fn option_problems(&self, algorithm: Algorithm, global: bool, t: &Topology) -> Vec<Problem> {
        let mut problems = Vec::new();
        let name = algorithm.name();
        if algorithm.is_global() && !global && !t.is_complete() {
            problems.push(Problem::Invalid(format!(
                "{name} is a global algorithm: it runs on a global quota (or a local one on a complete graph), not on {}",
                t.name()
            )));
        }
        problems.extend(algorithm.inapplicable(
            &[
                ("coterie", self.coterie.is_some()),
                ("mx", self.mx.is_some()),
                ("leader", self.leader.is_some()),
            ],
            "",
        ));
        if self.round_trip && algorithm != Algorithm::Lkcs {
            problems.push(Problem::Invalid(format!(
                "round_trip is LKCS's (a local quota with lower and upper bounds); it does not \
                 apply to {name}"
            )));
        }
        if self.round_trip && self.leader.is_some() {
            problems.push(Problem::Invalid(
                "the round trip has no leader: leader and round_trip do not combine".into(),
            ));
        }
        problems
    }
}

/// The start used when the user names none (see [`QuotaBuilder::initially_active`]); `None`
/// lets LKCS find one that meets its preconditions.
fn default_start(algorithm: Algorithm, l: &[usize]) -> Option<Vec<CsState>> {
    let n = l.len();
    let first = |m: usize| {
        (0..n)
            .map(|i| if i < m { CsState::InCs } else { CsState::OutCs })
            .collect()
    };
    match algorithm {
        Algorithm::Lkcs => None,
        Algorithm::Lmutin => Some(vec![CsState::InCs; n]),
        Algorithm::Mutin | Algorithm::Gcs => Some(first(l[0])),
        _ => Some(vec![CsState::OutCs; n]),
    }
}

/// Every bound the start breaks, in quota terms.
fn unsafe_start(inst: &Instance, states: &[CsState], global: bool) -> Vec<Problem> {
    let t = inst.topology();
    let mut problems = Vec::new();
    for p in t.processes() {
        let (c, b) = (inst.in_cs_around(states, p), inst.bounds(p));
        if b.l <= c && c <= b.k {
            continue;
        }
        let bound = if c < b.l {
            format!("at least {}", b.l)
        } else {
            format!("at most {}", b.k)
        };
        if global {
            problems.push(Problem::Invalid(format!(
                "initially_active: {c} members active, but {bound} must be"
            )));
            break;
        }
        problems.push(Problem::Invalid(format!(
            "initially_active: {c} active around member {}, but {bound} must be",
            p.index()
        )));
    }
    problems
}

/// A refusal of LKCS's default (the round trip, then the leader rules) on `inst`, with the
/// leader rules' part in quota terms where their preconditions explain it.
fn in_quota_terms(e: ConfigError, inst: Option<&Instance>) -> ConfigError {
    const TAG: &str = crate::algo::lkcs::LEADER_RULES_TAG;
    let Some(inst) = inst else {
        return e;
    };
    if !e.problems.iter().any(|p| p.to_string().starts_with(TAG)) {
        return e;
    }
    let leader = lkcs_problems(inst, None);
    if leader.is_empty() {
        return e;
    }
    let mut problems: Vec<Problem> = e
        .problems
        .into_iter()
        .filter(|p| !p.to_string().starts_with(TAG))
        .collect();
    problems.extend(
        leader
            .into_iter()
            .map(|p| Problem::Invalid(format!("{TAG}{p}"))),
    );
    ConfigError::new(problems)
}

/// LKCS's preconditions in quota terms: a leader with at least 4 neighbours, and
/// k_q − l_q ≥ 3 for every member within two hops of it.
fn lkcs_problems(inst: &Instance, leader: Option<usize>) -> Vec<Problem> {
    use crate::algo::lkcs::MIN_LEADER_DEGREE as D;
    let t = inst.topology();
    let slack_problems = |ldr: ProcessId| -> Vec<String> {
        t.distances(ldr)
            .into_iter()
            .enumerate()
            .filter(|&(q, d)| {
                let b = inst.all_bounds()[q];
                d.is_some_and(|d| d <= 2) && b.k < b.l + 3
            })
            .map(|(q, _)| {
                let b = inst.all_bounds()[q];
                format!(
                    "k − l must be ≥ 3 near member {} (the leader): member {q} has at least {} and at most {}",
                    ldr.index(),
                    b.l,
                    b.k
                )
            })
            .collect()
    };
    let why = "LKCS's leader rules need";
    match leader {
        Some(ldr) if ldr >= t.len() => vec![Problem::Invalid(format!(
            "leader {ldr}: members are 0..{}",
            t.len()
        ))],
        Some(ldr) => {
            let p = ProcessId::from(ldr);
            let mut problems = Vec::new();
            if t.degree(p) < D {
                problems.push(Problem::Invalid(format!(
                    "{why} a leader with at least {D} neighbours: member {ldr} has {}",
                    t.degree(p)
                )));
            }
            problems.extend(slack_problems(p).into_iter().map(Problem::Invalid));
            problems
        }
        None => {
            let mut candidates: Vec<ProcessId> =
                t.processes().filter(|&p| t.degree(p) >= D).collect();
            if candidates.is_empty() {
                let max = t.processes().map(|p| t.degree(p)).max().unwrap_or(0);
                return vec![Problem::Invalid(format!(
                    "{why} a leader with at least {D} neighbours: no member has {D} neighbours (the most is {max}); use only lower bounds (LMUTIN) or only upper bounds (LMUTEX), or a denser graph"
                ))];
            }
            candidates.sort_by_key(|&p| (std::cmp::Reverse(t.degree(p)), p));
            if candidates.iter().any(|&p| slack_problems(p).is_empty()) {
                return Vec::new();
            }
            // no member can lead: explain with the best-connected candidate
            let best = candidates[0];
            let mut problems: Vec<Problem> = slack_problems(best)
                .into_iter()
                .map(Problem::Invalid)
                .collect();
            problems.push(Problem::Invalid(format!(
                "{why} k − l ≥ 3 within two hops of some member with at least {D} neighbours; none of the {} candidates has it",
                candidates.len()
            )));
            problems
        }
    }
}

/// The engine side of a quota, whatever the algorithm.
trait QuotaEngine: Send + Sync {
    fn shutdown(&self);
    fn report(&self) -> RuntimeReport;
}

impl<A: CsObject> QuotaEngine for parking_lot::Mutex<Runtime<A>> {
    fn shutdown(&self) {
        self.lock().shutdown();
    }
    fn report(&self) -> RuntimeReport {
        self.lock().report()
    }
}

/// Starts the runtime of whatever system the catalog built.
struct Start {
    monitor: bool,
    stall_check: Duration,
    global: bool,
}

struct Started {
    engine: Box<dyn QuotaEngine>,
    handles: Vec<Box<dyn MemberEngine>>,
    shared: Arc<Shared>,
    initial: Vec<usize>,
}

impl SystemVisitor for Start {
    type Output = Result<Started, RuntimeError>;

    fn visit<A: CsObject>(
        self,
        instance: &Instance,
        initial: &[CsState],
        procs: Vec<A>,
    ) -> Self::Output {
        let operating = procs
            .iter()
            .map(|p| p.operating_bounds().unwrap_or(instance.bounds(p.id())))
            .collect();
        let config = RuntimeConfig {
            monitor: self.monitor.then(|| instance.clone()),
        };
        let mut rt = Runtime::start(procs, config)?;
        rt.detect_stalls(self.stall_check)?;
        let inspector = rt.inspector();
        let shared = Arc::new(Shared {
            instance: instance.clone(),
            operating,
            global: self.global,
            inspector,
        });
        let handles = rt
            .take_handles()
            .unwrap_or_default()
            .into_iter()
            .map(|handle: Handle<A>| {
                Box::new(ThreadMember {
                    handle,
                    shared: shared.clone(),
                }) as Box<dyn MemberEngine>
            })
            .collect();
        Ok(Started {
            engine: Box::new(parking_lot::Mutex::new(rt)),
            handles,
            shared,
            initial: (0..initial.len())
                .filter(|&i| initial[i] == CsState::InCs)
                .collect(),
        })
    }
}
