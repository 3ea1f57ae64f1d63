//! The quota: keep between l and k of your workers active, among all of them or among each
//! worker's neighbours, with no central lock and no semaphore's one-sided guarantee.
//!
//! ```
//! use lkcs::Quota;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! // 8 workers; at least 2 and at most 5 active at any time
//! let quota = Quota::global(8).between(2, 5).build()?;
//! let busy = AtomicUsize::new(8);
//! std::thread::scope(|s| {
//!     for mut m in quota.members() {
//!         let (quota, busy) = (&quota, &busy);
//!         s.spawn(move || -> Result<(), lkcs::QuotaError> {
//!             let mut rounds = 10;
//!             loop {
//!                 match m.enter() {
//!                     // blocks while 5 are active; after close, the loop's end
//!                     Err(e) if e.is_closed() => return Ok(()),
//!                     r => r?,
//!                 }
//!                 if rounds > 0 {
//!                     // ... work while counted as active ...
//!                     rounds -= 1;
//!                     if rounds == 0 && busy.fetch_sub(1, Ordering::SeqCst) == 1 {
//!                         quota.close(); // the last one done: everybody may leave
//!                     }
//!                 }
//!                 m.exit()?; // blocks while only 2 are active; Ok at once once closed
//!             }
//!         });
//!     }
//! });
//! # Ok::<(), lkcs::ConfigError>(())
//! ```
//!
//! A worker whose own work is done keeps cycling without work, so that the busy ones can
//! always move (the last two active could never leave otherwise: the lower bound holds
//! them), and the last one to finish closes the quota ([`Quota::close`]).
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
//! - **Trying and withdrawing**: [`Member::try_enter`] and [`Member::try_exit`] move only
//!   where no bound is in the way, and otherwise leave the member as it was
//!   ([`QuotaError::WouldBlock`]); [`Member::cancel`] withdraws a move a timeout left
//!   running, where the algorithm can ([`QuotaError::CannotWithdraw`] says why not).
//! - **Closing**: [`Quota::close`] lifts the lower bound: every exit returns `Ok` and releases
//!   its member, every entry returns [`QuotaError::Closed`].
//! - **Shutdown**: [`Quota::shutdown`] (or dropping the quota) wakes every blocked call with
//!   [`QuotaError::Shutdown`]; every later call returns it too.
//! - **Panics**: a member dropped by a panicking worker is named in [`Stall::panicked`] and
//!   [`Waits::panicked`].

mod error;
pub(crate) mod member;

pub use crate::catalog::Algorithm;
pub use error::{Blocked, Limit, QuotaError, Stall, Waits};
pub use member::{Active, Member, MemberState, Move};

/// The error type of [`Member`] calls ([`QuotaError`]).
pub type Error = QuotaError;

use crate::catalog::{BoundsFile, SystemSpec, SystemVisitor};
use crate::config::{Bounds, Instance};
use crate::cs::{CsObject, CsState, Sequence, Variant};
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
    algorithm: Algorithm,
    /// The objects take a withdrawn move back themselves ([`CsObject::can_withdraw`]).
    withdraws_inside: bool,
}

impl Shared {
    /// Whether a move `seq` may wait on a bound with this algorithm: entries where there is
    /// an upper bound, exits where there is a lower one.
    pub(crate) fn may_wait(&self, seq: Sequence) -> bool {
        use Algorithm::*;
        match seq {
            Sequence::Entry => !matches!(self.algorithm, Mutin | Lmutin),
            Sequence::Exit => matches!(self.algorithm, Mutin | Lmutin | Gcs | Lkcs),
        }
    }

    /// Why a move `seq` in progress cannot be withdrawn, if it cannot. A move is withdrawn
    /// either inside the algorithm, before the member's state changes ((l,k)-GCS, and LKCS's
    /// round trip: [`Shared::withdraws_inside`]), or by completing it and reversing it at
    /// once; the latter is safe only where the reverse waits on no bound and counts on no
    /// other bound's side: the algorithms with one kind of bound.
    pub(crate) fn cannot_withdraw(&self, seq: Sequence) -> Option<String> {
        let name = self.algorithm.name();
        let move_ = match seq {
            Sequence::Entry => "entry",
            Sequence::Exit => "exit",
        };
        if !self.may_wait(seq) {
            return Some(format!(
                "with {name} an {move_} waits on no bound, only on the algorithm's messages: it cannot be withdrawn, and completes on its own"
            ));
        }
        (matches!(self.algorithm, Algorithm::Lkcs) && !self.withdraws_inside).then(|| {
            format!(
                "{name} keeps a lower and an upper bound at once, and this quota runs its leader rules, which cannot take a move back before it completes (the round trip can: `QuotaBuilder::round_trip`): a withdrawn {move_} would count the member on the other bound's side while it is undone"
            )
        })
    }

    /// Whether the algorithm takes a withdrawn move back itself, the member's state never
    /// changing ([`CsObject::can_withdraw`](crate::cs::CsObject::can_withdraw): (l,k)-GCS,
    /// LKCS's round trip), rather than completing and reversing it.
    pub(crate) fn withdraws_inside(&self) -> bool {
        self.withdraws_inside
    }

    /// Whether member `p`'s move `seq` would break a bound the algorithm keeps, in the
    /// configuration `published` gives (each member's last published state).
    pub(crate) fn would_break(
        &self,
        p: ProcessId,
        seq: Sequence,
        published: &dyn Fn(ProcessId) -> CsState,
    ) -> bool {
        let t = self.instance.topology();
        let breaks = |q: ProcessId, others: usize| {
            let b = self.operating[q.index()];
            match seq {
                Sequence::Entry => others + 1 > b.k,
                Sequence::Exit => others < b.l,
            }
        };
        let active_others = |around: &mut dyn Iterator<Item = ProcessId>| {
            around
                .filter(|&r| r != p && published(r) == CsState::InCs)
                .count()
        };
        if self.global {
            let others = active_others(&mut t.processes());
            return breaks(p, others);
        }
        t.closed(p).into_iter().any(|q| {
            let others = active_others(&mut t.closed(q).into_iter());
            breaks(q, others)
        })
    }

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
    closed: std::sync::atomic::AtomicBool,
    shut_down: std::sync::atomic::AtomicBool,
}

impl fmt::Debug for Quota {
    /// A summary whatever the size: the bounds once when every member has the same, and the
    /// number of members initially active.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut d = f.debug_struct("Quota");
        d.field("algorithm", &self.algorithm)
            .field("members", &self.n)
            .field("scope", &if self.global { "global" } else { "local" });
        let first = self.bounds[0];
        if self.bounds.iter().all(|b| *b == first) {
            d.field("at_least", &first.l).field("at_most", &first.k);
        } else {
            d.field("bounds", &"per member");
        }
        d.field("initially_active", &self.initial.len())
            .field("closed", &self.is_closed())
            .finish()
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

    /// The members, one per id in order, to hand to the workers. They are handed out once:
    /// a later call returns an empty vector ([`Quota::take_members`] says so with an error).
    pub fn members(&self) -> Vec<Member> {
        self.take_members().unwrap_or_default()
    }

    /// The members, one per id in order, or [`QuotaError::MembersTaken`] if they were
    /// handed out already (by this or [`Quota::members`]).
    pub fn take_members(&self) -> Result<Vec<Member>, QuotaError> {
        self.members.lock().take().ok_or(QuotaError::MembersTaken)
    }

    /// Closes the quota, as a program ends: the lower bound is lifted, so every member may
    /// leave, and every entry from now on returns [`QuotaError::Closed`]
    /// ([`QuotaError::is_closed`]), including entries blocked at this moment.
    ///
    /// An exit after `close` (or blocked at that moment) returns `Ok` at once and releases
    /// the member: it is [`MemberState::Inactive`] for its worker, and the algorithm lets it
    /// go as soon as it can. The upper bound still holds, since nobody enters any more. An
    /// entry after `close` releases its member the same way (an active one included), and
    /// returns [`QuotaError::Closed`]: whatever its last call, a member ends inactive. Closing
    /// does not stop the threads: [`Quota::shutdown`] (or dropping the quota) does.
    /// Idempotent.
    ///
    /// Workers that finish at different times end cleanly when each keeps cycling (enter
    /// and exit, without work) once its own work is done, so that the busy ones can always
    /// move, and the last one to finish closes the quota: every exit returns `Ok`, and each
    /// worker's loop ends on the entry that reports [`QuotaError::Closed`].
    ///
    /// ```
    /// use std::sync::atomic::{AtomicUsize, Ordering};
    /// let quota = lkcs::Quota::global(4).between(1, 3).build()?;
    /// let busy = AtomicUsize::new(4);
    /// std::thread::scope(|s| {
    ///     for (i, mut m) in quota.members().into_iter().enumerate() {
    ///         let (quota, busy) = (&quota, &busy);
    ///         s.spawn(move || -> Result<(), lkcs::QuotaError> {
    ///             let mut rounds_left = 1 + 2 * i; // each worker has its own amount of work
    ///             loop {
    ///                 match m.enter() {
    ///                     Err(e) if e.is_closed() => return Ok(()), // the end
    ///                     r => r?,
    ///                 }
    ///                 if rounds_left > 0 {
    ///                     // ... work while counted as active ...
    ///                     rounds_left -= 1;
    ///                     if rounds_left == 0 && busy.fetch_sub(1, Ordering::SeqCst) == 1 {
    ///                         quota.close(); // the last one: everybody may leave now
    ///                     }
    ///                 }
    ///                 m.exit()?; // Ok, also for the last members
    ///             }
    ///         });
    ///     }
    /// });
    /// assert!(quota.is_closed());
    /// # Ok::<(), lkcs::ConfigError>(())
    /// ```
    pub fn close(&self) {
        self.closed.store(true, std::sync::atomic::Ordering::SeqCst);
        self.engine.close();
    }

    /// Whether [`Quota::close`] was called.
    pub fn is_closed(&self) -> bool {
        self.closed.load(std::sync::atomic::Ordering::SeqCst)
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
        let mut waits = self.shared.context().waits(&look);
        if self.shut_down.load(std::sync::atomic::Ordering::SeqCst) {
            // nobody waits on a quota that has shut down: every call returned Shutdown
            waits.waiting.clear();
            waits.in_flight = false;
        }
        waits
    }

    /// Stops every member's thread. Every blocked call returns [`QuotaError::Shutdown`], and
    /// so does every later call; [`Quota::waiting`] lists nobody. Idempotent; dropping the
    /// quota does the same.
    pub fn shutdown(&self) {
        self.shut_down
            .store(true, std::sync::atomic::Ordering::SeqCst);
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
            algorithm: plan.spec.algorithm,
        };
        let started = plan
            .spec
            .build(start)
            .map_err(|e| match &plan.default_lkcs {
                Some(inst) => self.lkcs_refusal(e, inst),
                None => e,
            })?
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
            closed: Default::default(),
            shut_down: Default::default(),
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
    /// LKCS with no leader named: the instance, to explain a refusal in quota terms
    /// ([`QuotaBuilder::lkcs_refusal`]).
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

/// The bounds `algorithm` keeps, in words, when they differ from the ones asked for
/// (`l`, `k` per member on `t`); `None` when it keeps exactly these.
fn kept_otherwise(
    algorithm: Algorithm,
    t: &Topology,
    l: &[usize],
    k: &[usize],
) -> Option<&'static str> {
    let n = t.len();
    let uniform = l.iter().all(|&x| x == l[0]) && k.iter().all(|&x| x == k[0]);
    let full = |i: usize| t.degree(ProcessId::from(i)) + 1;
    let all_lower_only = (0..n).all(|i| k[i] == full(i));
    let all_upper_only = l.iter().all(|&x| x == 0);
    let ok = match algorithm {
        Algorithm::Cdc | Algorithm::Ddc | Algorithm::Maekawa => {
            t.is_complete() && uniform && (l[0], k[0]) == (0, 1)
        }
        Algorithm::Kmex => t.is_complete() && uniform && all_upper_only,
        Algorithm::Mutin => t.is_complete() && uniform && k[0] == n,
        Algorithm::Gcs => t.is_complete() && uniform,
        Algorithm::Lmutin => all_lower_only,
        Algorithm::Lmutex => all_upper_only,
        Algorithm::Lkcs => true,
    };
    (!ok).then_some(match algorithm {
        Algorithm::Cdc | Algorithm::Ddc | Algorithm::Maekawa => {
            "at most 1 active among all members"
        }
        Algorithm::Kmex => "only an upper bound, one for all members",
        Algorithm::Mutin => "only a lower bound, one for all members",
        Algorithm::Gcs => "one lower and one upper bound for all members",
        Algorithm::Lmutin => "only lower bounds (at least l_i around each member)",
        Algorithm::Lmutex => "only upper bounds (at most k_i around each member)",
        Algorithm::Lkcs => "any bounds",
    })
}

/// The problem with an algorithm chosen by name that does not keep exactly the bounds asked
/// for: it would drop, change or tighten one. Names the algorithms that do keep them.
fn unsolved(
    algorithm: Algorithm,
    global: bool,
    t: &Topology,
    l: &[usize],
    k: &[usize],
) -> Option<Problem> {
    let keeps = kept_otherwise(algorithm, t, l, k)?;
    if algorithm.is_global() && !t.is_complete() {
        return None; // option_problems says why it cannot run here
    }
    let n = t.len();
    let uniform = l.iter().all(|&x| x == l[0]) && k.iter().all(|&x| x == k[0]);
    let asked = match (global || t.is_complete(), uniform) {
        (true, true) if l[0] == 0 => format!("at most {} of {n} active", k[0]),
        (true, true) if k[0] == n => format!("at least {} of {n} active", l[0]),
        (true, true) => format!("at least {} and at most {} of {n} active", l[0], k[0]),
        (_, true) if l[0] == 0 => format!("at most {} active around each member", k[0]),
        (_, true) if (0..n).all(|i| k[i] == t.degree(ProcessId::from(i)) + 1) => {
            format!("at least {} active around each member", l[0])
        }
        (_, true) => format!(
            "at least {} and at most {} active around each member",
            l[0], k[0]
        ),
        (_, false) => "per-member bounds".to_string(),
    };
    let solvers = Algorithm::ALL
        .into_iter()
        .filter(|&a| !a.is_global() || t.is_complete())
        .filter(|&a| kept_otherwise(a, t, l, k).is_none())
        .map(|a| a.name().to_string())
        .collect();
    Some(Problem::Unsolved {
        algorithm: algorithm.name().to_string(),
        keeps: keeps.to_string(),
        asked,
        solvers,
    })
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
                if l >= k && self.k.is_none() {
                    // no upper bound was given: the lower one is too high for the members
                    problems.push(Problem::Invalid(format!(
                        "at least {l} active of {n} members: the lower bound must be below the number of members"
                    )));
                } else if l >= k {
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
                // one line per distinct problem, naming every member it concerns
                let mut grouped: std::collections::BTreeMap<String, Vec<usize>> =
                    Default::default();
                for p in t.processes() {
                    let i = p.index();
                    let size = full[i];
                    if k[i] > size {
                        grouped
                            .entry(format!(
                                "at most {} active around it, but its neighbourhood (itself and {} neighbours) holds only {size}",
                                k[i],
                                size - 1
                            ))
                            .or_default()
                            .push(i);
                    }
                    if l[i] >= k[i] && self.k.is_none() && self.per_member.is_none() {
                        grouped
                            .entry(format!(
                                "at least {} active around it, but its neighbourhood (itself and {} neighbours) holds only {size}: the lower bound must be below that",
                                l[i],
                                size - 1
                            ))
                            .or_default()
                            .push(i);
                    } else if l[i] >= k[i] {
                        grouped
                            .entry(format!(
                                "at least {} and at most {} active around it: the lower bound must be below the upper bound",
                                l[i], k[i]
                            ))
                            .or_default()
                            .push(i);
                    }
                }
                for (why, who) in grouped {
                    problems.push(Problem::Invalid(format!("{}: {why}", member_list(&who))));
                }
                if problems.is_empty() && (0..n).all(|i| l[i] == 0 && k[i] == full[i]) {
                    problems.push(Problem::Invalid(
                        "these bounds constrain nothing (at least 0 and at most every neighbour active everywhere)".into(),
                    ));
                }
                (false, t.clone(), l, k)
            }
        };
        if let Some(ids) = &self.initially_active {
            problems.extend(start_list_problems(ids, n));
        }
        ConfigError::check(problems)?;
        let algorithm = self.algorithm.unwrap_or_else(|| {
            if global {
                global_choice(l[0], k[0], n)
            } else {
                local_choice(&topology, &l, &k)
            }
        });
        if self.algorithm.is_some() {
            ConfigError::check(
                unsolved(algorithm, global, &topology, &l, &k)
                    .into_iter()
                    .collect(),
            )?;
        }
        let mut problems = Vec::new();
        let inst = Instance::new(
            topology.clone(),
            l.iter().zip(&k).map(|(&l, &k)| Bounds { l, k }).collect(),
        )?;
        let initial = match &self.initially_active {
            Some(ids) => {
                // the list itself was checked with the bounds
                let mut states = vec![CsState::OutCs; n];
                for &i in ids {
                    states[i] = CsState::InCs;
                }
                problems.extend(unsafe_start(&inst, &states, global));
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
            default_lkcs: (algorithm == Algorithm::Lkcs && self.leader.is_none()).then_some(inst),
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

/// "member 3" or "members 0, 1, 2, 3, 4, 5, 6, 7 and 12 more".
fn member_list(ids: &[usize]) -> String {
    error::MemberList(ids).to_string()
}

/// The problems of an `initially_active` list itself: ids out of range and repeated ids.
fn start_list_problems(ids: &[usize], n: usize) -> Vec<Problem> {
    let mut problems = Vec::new();
    let out: std::collections::BTreeSet<usize> = ids.iter().copied().filter(|&i| i >= n).collect();
    if !out.is_empty() {
        let out: Vec<usize> = out.into_iter().collect();
        problems.push(Problem::Invalid(format!(
            "initially_active names {}, but members are 0..{n}",
            member_list(&out)
        )));
    }
    let mut seen = std::collections::BTreeSet::new();
    let twice: std::collections::BTreeSet<usize> =
        ids.iter().copied().filter(|&i| !seen.insert(i)).collect();
    if !twice.is_empty() {
        let twice: Vec<usize> = twice.into_iter().collect();
        problems.push(Problem::Invalid(format!(
            "initially_active names {} more than once",
            member_list(&twice)
        )));
    }
    problems
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

/// Replaces `P7` by `member 7` in a message of the algorithms' layer.
fn member_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut prev: Option<char> = None;
    while let Some(c) = chars.next() {
        let starts_id = c == 'P'
            && !prev.is_some_and(|p| p.is_alphanumeric())
            && chars.peek().is_some_and(|d| d.is_ascii_digit());
        if starts_id {
            out.push_str("member ");
        } else {
            out.push(c);
        }
        prev = Some(c);
    }
    out
}

impl QuotaBuilder {
    /// A refusal of LKCS with no leader named (the round trip, and by default the leader
    /// rules after it), in quota terms: one line per cause, naming the members it concerns,
    /// and a line with the nearest bounds that are accepted.
    fn lkcs_refusal(&self, e: ConfigError, inst: &Instance) -> ConfigError {
        let t = inst.topology();
        // the room the round trip needs: its tightened bounds apart at every member
        let mut narrow: std::collections::BTreeMap<(usize, usize), Vec<usize>> = Default::default();
        for p in t.processes() {
            let (b, size) = (inst.bounds(p), t.degree(p) + 1);
            let low = b.l + usize::from(b.l > 0);
            let high = b.k - usize::from(b.k < size);
            if low >= high {
                narrow.entry((b.l, b.k)).or_default().push(p.index());
            }
        }
        let mut problems: Vec<Problem> = narrow
            .into_iter()
            .map(|((l, k), who)| {
                let who = if who.len() == t.len() {
                    "every member".to_string()
                } else {
                    member_list(&who)
                };
                Problem::Invalid(format!(
                    "{who}: at least {l} and at most {k} active around each leaves too little room: with both kinds of bound, lkcs keeps each one tighter where a move can break it (at least l+1 where l > 0, at most k−1 where k is below the neighbourhood's size) and needs the two apart, so at most − at least ≥ 3 where both can break",
                ))
            })
            .collect();
        if problems.is_empty() {
            // room enough: the refusal is of the start; say it without the layers' names
            let leader_rules = crate::algo::lkcs::LEADER_RULES_TAG;
            problems.extend(
                e.problems
                    .iter()
                    .map(|p| p.to_string())
                    .filter(|p| !p.starts_with(leader_rules))
                    .map(|p| {
                        let p = p.strip_prefix("the round trip: ").unwrap_or(&p).to_string();
                        Problem::Invalid(member_words(&p))
                    }),
            );
            if problems.is_empty() {
                return e;
            }
        }
        if let Some(better) = self.nearest_accepted(t) {
            problems.push(Problem::Invalid(format!("accepted instead: {better}")));
        }
        ConfigError::new(problems)
    }

    /// The nearest bounds a local quota on `t` accepts, in builder calls: both bounds moved
    /// apart by as little as possible, or one bound alone. `None` for per-member bounds.
    fn nearest_accepted(&self, t: &Topology) -> Option<String> {
        let (Some(l), Some(k), None) = (self.l, self.k, &self.per_member) else {
            return Some(
                "per-member bounds with at most − at least ≥ 3 at the members named, or only lower bounds, or only upper bounds"
                    .into(),
            );
        };
        let largest = t.processes().map(|p| t.degree(p) + 1).max().unwrap_or(1);
        let accepted = |b: QuotaBuilder| b.plan().is_ok_and(|plan| plan.spec.build(Probe).is_ok());
        let bare = |b: &QuotaBuilder| QuotaBuilder {
            l: None,
            k: None,
            initially_active: None,
            ..b.clone()
        };
        let mut offers = Vec::new();
        'both: for d in 1..=6 {
            for dl in 0..=d.min(l.saturating_sub(1)) {
                let (l2, k2) = (l - dl, k + (d - dl));
                if k2 >= largest {
                    continue;
                }
                if accepted(bare(self).between(l2, k2)) {
                    offers.push(format!(".between({l2}, {k2})"));
                    break 'both;
                }
                // the same upper bound, capped by each neighbourhood's size
                let capped: Vec<usize> = t.processes().map(|p| k2.min(t.degree(p) + 1)).collect();
                let per_member = QuotaBuilder {
                    per_member: None,
                    ..bare(self)
                }
                .bounds(vec![l2; t.len()], capped);
                if accepted(per_member) {
                    offers.push(format!(
                        ".bounds(l, k) with at least {l2} and at most {k2} around each member (or its whole neighbourhood where that is smaller)"
                    ));
                    break 'both;
                }
            }
        }
        if accepted(bare(self).at_most(k)) {
            offers.push(format!("only .at_most({k})"));
        }
        if accepted(bare(self).at_least(l)) {
            offers.push(format!("only .at_least({l})"));
        }
        (!offers.is_empty()).then(|| offers.join(", or "))
    }
}

/// A visitor that builds a system and starts nothing: whether the catalog accepts a spec.
struct Probe;

impl SystemVisitor for Probe {
    type Output = ();
    fn visit<A: CsObject>(self, _: &Instance, _: &[CsState], _: Vec<A>) {}
}

/// LKCS's preconditions in quota terms: a leader with at least 4 neighbours, and
/// k_q − l_q ≥ 3 for every member within two hops of it.
fn lkcs_problems(inst: &Instance, leader: Option<usize>) -> Vec<Problem> {
    use crate::algo::lkcs::MIN_LEADER_DEGREE as D;
    let t = inst.topology();
    let slack_problems = |ldr: ProcessId| -> Vec<String> {
        let mut by_bounds: std::collections::BTreeMap<(usize, usize), Vec<usize>> =
            Default::default();
        for (q, d) in t.distances(ldr).into_iter().enumerate() {
            let b = inst.all_bounds()[q];
            if d.is_some_and(|d| d <= 2) && b.k < b.l + 3 {
                by_bounds.entry((b.l, b.k)).or_default().push(q);
            }
        }
        by_bounds
            .into_iter()
            .map(|((l, k), who)| {
                format!(
                    "{}, within two hops of member {} (the leader): at least {l} and at most {k} active around each, but the leader rules need at most − at least ≥ 3 there",
                    member_list(&who),
                    ldr.index(),
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
    fn close(&self);
    fn report(&self) -> RuntimeReport;
}

impl<A: CsObject> QuotaEngine for parking_lot::Mutex<Runtime<A>> {
    fn shutdown(&self) {
        self.lock().shutdown();
    }
    fn close(&self) {
        self.lock().close();
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
    algorithm: Algorithm,
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
        let withdraws_inside = procs.first().is_some_and(CsObject::can_withdraw);
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
            algorithm: self.algorithm,
            withdraws_inside,
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
