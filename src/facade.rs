//! The quota's implementation: [`Quota`], [`QuotaBuilder`], [`Member`], [`MemberState`] and
//! [`QuotaError`], whose one public path is the crate root (`lkcs::Quota`), and the reports
//! and types that [`crate::quota`] shows. The user's documentation is [`crate::quota`]'s.

mod error;
pub(crate) mod member;
mod plan;

use crate::catalog::{Algorithm, InnerMutex, QuorumSystem};
pub use error::{Blocked, Limit, QuotaError, Stall, Waits};
pub use member::{Active, Member, MemberState, Move};

use crate::algo::lkcs::Leaders;
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
    /// leader. By default a local quota with both bounds runs the round trip (no leader) and
    /// refuses bounds it cannot take; the leader rules may take some of those, but they are
    /// not live on every graph (`docs/lkcs-liveness.md`), so they run only when named here.
    pub fn leader(mut self, member: usize) -> Self {
        self.leader = Some(member);
        self
    }

    /// LKCS: run the round trip (`--variant trip`, [`crate::algo::lkcs::LkcsRules::TRIP`]) and nothing
    /// else: no leader, and live on every instance its sweeps could start
    /// (`docs/lkcs-liveness.md`). The default runs it too (and refuses what it refuses);
    /// `round_trip()` says so explicitly, and refuses a leader named with it. It
    /// keeps every bound one tighter where a move can break
    /// it (l_i+1 where l_i > 0, k_i−1 where k_i < |N_i|+1) in normal operation, the
    /// reserve going to one blocked member at a time; the start must meet those tightened
    /// bounds, and bounds that leave l_i+1 ≥ k_i−1 are refused. A member that stays put
    /// after a move that took the reserve keeps it until it moves back or is dropped.
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
            .map_err(|e| match &plan.round_trip {
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
