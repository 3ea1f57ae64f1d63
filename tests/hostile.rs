//! Hostile input at the protocol level (issue 20, item 2): every algorithm's handlers are fed
//! arbitrary messages from arbitrary senders (neighbours, non-neighbours, ids outside the
//! system, the process itself), duplicates and replays of its own messages, stamps far in the
//! past and near `u64::MAX`, in any order, interleaved with the legal `begin_entry` /
//! `begin_exit` calls. After every step:
//!
//! - nothing panicked (the test profile keeps overflow checks on);
//! - `check_invariants()` holds (every arbiter's cap, the controller's queue, ...), for the
//!   corrected rules (the printed ones break caps on legal input too);
//! - the calling convention holds: `pending` is `None` or the sequence leaving `state`; a
//!   message changes the state only by completing the pending sequence (and then says so); a
//!   call while a sequence is pending is refused and changes nothing;
//! - every message goes to a process of the system, and `awaiting` / `lent_to` name only
//!   such processes;
//! - a message the algorithm documents as ignored (its module doc's "Unexpected messages")
//!   leaves the object unchanged and sends nothing.
//!
//! Each property runs a whole system (2–6 processes: ring, complete and path topologies, LKCS
//! also with its leaders on complete:5 and complete:6; majority and grid coteries), built
//! through the public constructors, corrected and printed rules: its own messages are
//! delivered in any order (links are not FIFO here) and duplicated, forged messages of every
//! kind are mixed in. The regression tests at the end pin the minimal cases the properties
//! found.
//!
//! Overflow: `[profile.test]` only raises opt-level, so `cargo test` keeps overflow checks
//! and a wrapping clock panics; under `--release` it would wrap silently, so the regression
//! tests also assert the saturated values.

use lkcs::{
    algo::lkcs::{At, Leaders, Lkcs, LkcsMsg, LkcsRules},
    algo::lmutin::{lmutex_instance, lmutex_system, Lmutin, LmutinMsg, LmutinRules},
    algo::maekawa::{Maekawa, MaekawaMsg, MaekawaRules},
    algo::migrating::{
        Cdc, CdcTransfer, Ddc, DdcTransfer, MigratingMsg, MigratingRules, MigrationCondition,
    },
    algo::mutin::{
        gcs_system, kmex_system, quorums_of, reporters, Mutin, MutinMsg, MutinPhase, MutinRules,
    },
    cs::{CsObject, CsState, Outbox, Sequence},
    quorum::Coterie,
    CallError, ProcessId, Stamp, Topology,
};
use lkcs::{
    arbiter::Arbiter,
    cs::{Complement, GcsMsg},
};
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::fmt::Debug;

// ---------------------------------------------------------------------------------------------
// The harness
// ---------------------------------------------------------------------------------------------

/// One step of a hostile run on a whole system. Process indices are taken modulo n.
#[derive(Clone, Debug)]
enum Step<M> {
    /// The legal call for process `p`'s state (`begin_exit` in the CS, `begin_entry` out of
    /// it); while a sequence is pending, both calls, which must be refused.
    Begin(usize),
    /// A forged message to process `to` from an arbitrary sender (`ProcessId(from)`).
    Forge(usize, u32, M),
    /// The `k`-th message in flight is delivered (in any order: links are not FIFO here).
    Network(usize),
    /// A copy of the `k`-th message ever sent is delivered again (a duplicate or a replay);
    /// the original stays where it is.
    Duplicate(usize),
    /// The drivers' clock moves on by this much.
    Time(u64),
}

/// Whether the algorithm documents `msg` from `from` as ignored, given the object before it.
type Ignored<A> = Box<dyn Fn(&A, ProcessId, &<A as CsObject>::Msg) -> bool>;

/// What the harness knows about the object under test.
struct Rig<A: CsObject> {
    /// The number of processes in the system.
    n: usize,
    /// Whether to check `check_invariants()` (the corrected rules).
    invariants: bool,
    /// Messages that must leave the object unchanged and send nothing.
    ignored: Ignored<A>,
}

fn in_system(n: usize, p: ProcessId) -> bool {
    p.index() < n
}

/// Checks what must hold between steps.
fn check_between<A: CsObject>(obj: &A, rig: &Rig<A>, at: &str) -> Result<(), TestCaseError> {
    if rig.invariants
        && let Err(e) = obj.check_invariants()
    {
        return Err(TestCaseError::fail(format!(
            "{at}: invariant broken: {e}\n{obj:?}"
        )));
    }
    let ok = match obj.pending() {
        None => true,
        Some(seq) => seq == Sequence::leaving(obj.state()),
    };
    prop_assert!(
        ok,
        "{}: pending {:?} in state {:?}",
        at,
        obj.pending(),
        obj.state()
    );
    for p in obj.awaiting().into_iter().chain(obj.lent_to()) {
        prop_assert!(
            in_system(rig.n, p),
            "{}: names {} outside the system",
            at,
            p
        );
    }
    Ok(())
}

fn check_sends<M: Debug>(out: &Outbox<M>, n: usize, at: &str) -> Result<(), TestCaseError> {
    for (to, m) in out.sends() {
        prop_assert!(
            in_system(n, *to),
            "{}: sends {:?} to {}, outside the system",
            at,
            m,
            to
        );
    }
    Ok(())
}

/// Delivers `msg` from `from` to `obj` and checks the handler.
fn deliver<A: CsObject>(
    obj: &mut A,
    rig: &Rig<A>,
    from: ProcessId,
    msg: A::Msg,
    at: &str,
) -> Result<Outbox<A::Msg>, TestCaseError> {
    let before = obj.clone();
    let mut out = Outbox::new();
    let at = format!("{at}: {msg:?} from {from} to {}", obj.id());
    let ignored = (rig.ignored)(&before, from, &msg);
    obj.on_message(from, msg, &mut out);
    let completed = out.completed();
    if ignored {
        prop_assert!(
            *obj == before,
            "{}: documented as ignored, but the object changed\nbefore {:?}\nafter  {:?}",
            at,
            before,
            obj
        );
        prop_assert!(
            out.sends().is_empty() && !completed,
            "{}: documented as ignored, but it sent {:?}",
            at,
            out.sends()
        );
    }
    match before.pending() {
        None => {
            prop_assert!(!completed, "{}: completed with nothing pending", at);
            prop_assert_eq!(obj.pending(), None, "{}", at);
            prop_assert_eq!(obj.state(), before.state(), "{}", at);
        }
        Some(seq) if completed => {
            prop_assert_eq!(obj.pending(), None, "{}", at);
            prop_assert_eq!(obj.state(), !before.state(), "{} ({:?})", at, seq);
        }
        Some(seq) => {
            prop_assert_eq!(obj.pending(), Some(seq), "{}", at);
            prop_assert_eq!(obj.state(), before.state(), "{}", at);
        }
    }
    check_sends(&out, rig.n, &at)?;
    check_between(obj, rig, &at)?;
    Ok(out)
}

/// The legal call for `obj`'s state, or both calls refused while a sequence is pending.
fn call<A: CsObject>(obj: &mut A, rig: &Rig<A>, at: &str) -> Result<Outbox<A::Msg>, TestCaseError> {
    let before = obj.clone();
    let mut out = Outbox::new();
    let at = format!("{at} on {}", obj.id());
    match before.pending() {
        None => {
            let seq = Sequence::leaving(before.state());
            prop_assert_eq!(obj.begin(seq, &mut out), Ok(()), "{}", at);
            if out.completed() {
                prop_assert_eq!(obj.pending(), None, "{}", at);
                prop_assert_eq!(obj.state(), !before.state(), "{}", at);
            } else {
                prop_assert_eq!(obj.pending(), Some(seq), "{}", at);
                prop_assert_eq!(obj.state(), before.state(), "{}", at);
            }
        }
        Some(_) => {
            prop_assert_eq!(obj.begin_entry(&mut out), Err(CallError::Busy), "{}", at);
            prop_assert_eq!(obj.begin_exit(&mut out), Err(CallError::Busy), "{}", at);
            prop_assert!(*obj == before, "{}: a refused call changed the object", at);
            prop_assert!(out.sends().is_empty() && !out.completed(), "{}", at);
        }
    }
    check_sends(&out, rig.n, &at)?;
    check_between(obj, rig, &at)?;
    Ok(out)
}

/// Runs `steps` on the system `procs`, checking everything after every step.
fn drive<A: CsObject>(
    mut procs: Vec<A>,
    rig: &Rig<A>,
    steps: &[Step<A::Msg>],
) -> Result<(), TestCaseError> {
    let n = procs.len();
    prop_assert_eq!(n, rig.n);
    // (from, to, message): in flight, and every one ever sent
    let mut flight: Vec<(ProcessId, ProcessId, A::Msg)> = Vec::new();
    let mut sent: Vec<(ProcessId, ProcessId, A::Msg)> = Vec::new();
    let mut now = 0u64;
    for p in &procs {
        check_between(p, rig, "start")?;
    }
    for (i, step) in steps.iter().enumerate() {
        let at = format!("step {i}");
        let (me, mut out) = match step {
            Step::Begin(p) => {
                let p = p % n;
                (p, call(&mut procs[p], rig, &at)?)
            }
            Step::Forge(to, from, msg) => {
                let to = to % n;
                let out = deliver(&mut procs[to], rig, ProcessId(*from), msg.clone(), &at)?;
                (to, out)
            }
            Step::Network(k) if !flight.is_empty() => {
                let (from, to, msg) = flight.remove(k % flight.len());
                let out = deliver(&mut procs[to.index()], rig, from, msg, &at)?;
                (to.index(), out)
            }
            Step::Duplicate(k) if !sent.is_empty() => {
                let (from, to, msg) = sent[k % sent.len()].clone();
                let out = deliver(&mut procs[to.index()], rig, from, msg, &at)?;
                (to.index(), out)
            }
            Step::Network(_) | Step::Duplicate(_) => continue,
            Step::Time(dt) => {
                now = now.saturating_add(*dt);
                for p in &mut procs {
                    let (state, pending) = (p.state(), p.pending());
                    p.set_time(now);
                    prop_assert_eq!((p.state(), p.pending()), (state, pending), "{}", at);
                }
                continue;
            }
        };
        let me = ProcessId::from(me);
        for (to, m) in out.drain() {
            flight.push((me, to, m.clone()));
            sent.push((me, to, m));
        }
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Strategies
// ---------------------------------------------------------------------------------------------

/// Senders and named processes: mostly ids of a system of up to 6, some just above, and
/// `u32::MAX`.
fn raw_id() -> impl Strategy<Value = u32> {
    prop_oneof![8 => 0u32..6, 2 => 6u32..9, 1 => Just(u32::MAX)]
}

fn pid() -> impl Strategy<Value = ProcessId> {
    raw_id().prop_map(ProcessId)
}

/// Clock values and counters: small ones (stale or current), near `u64::MAX`, anything.
fn stamp() -> impl Strategy<Value = u64> {
    prop_oneof![6 => 0u64..8, 2 => (u64::MAX - 3)..=u64::MAX, 1 => any::<u64>()]
}

fn at() -> impl Strategy<Value = At> {
    prop_oneof![Just(At::Mutin), Just(At::Mutex)]
}

fn steps<M: Clone + Debug + 'static>(
    msg: impl Strategy<Value = M> + 'static,
) -> impl Strategy<Value = Vec<Step<M>>> {
    let step = prop_oneof![
        2 => any::<usize>().prop_map(Step::Begin),
        3 => (any::<usize>(), raw_id(), msg).prop_map(|(to, from, m)| Step::Forge(to, from, m)),
        6 => any::<usize>().prop_map(Step::Network),
        1 => any::<usize>().prop_map(Step::Duplicate),
        1 => (0u64..20).prop_map(Step::Time),
    ];
    prop::collection::vec(step, 0..=steps_max())
}

/// The longest step sequence: 96 (`HOSTILE_STEPS` overrides it, for longer hunts).
fn steps_max() -> usize {
    std::env::var("HOSTILE_STEPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(96)
}

fn lmutin_msg() -> impl Strategy<Value = LmutinMsg> {
    prop_oneof![
        stamp().prop_map(|ts| LmutinMsg::Request { ts }),
        Just(LmutinMsg::Grant),
        Just(LmutinMsg::Release),
        Just(LmutinMsg::Preempt),
        Just(LmutinMsg::Relinquish),
        Just(LmutinMsg::Kept),
        Just(LmutinMsg::Probe),
        Just(LmutinMsg::Blocked),
        Just(LmutinMsg::Park),
        Just(LmutinMsg::Unpark),
    ]
}

/// Every LKCS message, the round trip's included (for the round-trip variant).
fn lkcs_trip_msg() -> impl Strategy<Value = LkcsMsg> {
    prop_oneof![
        2 => lkcs_msg(),
        1 => (at(), stamp()).prop_map(|(at, ts)| LkcsMsg::Trip { at, ts }),
        1 => stamp().prop_map(|ts| LkcsMsg::TripLock { ts }),
        1 => stamp().prop_map(|ts| LkcsMsg::TripInquire { ts }),
        1 => stamp().prop_map(|ts| LkcsMsg::TripYield { ts }),
        1 => at().prop_map(|at| LkcsMsg::TripGo { at }),
        1 => Just(LkcsMsg::TripCancel),
        1 => at().prop_map(|at| LkcsMsg::TripEnd { at }),
        1 => at().prop_map(|at| LkcsMsg::Withdraw { at }),
        1 => at().prop_map(|at| LkcsMsg::Withdrawn { at }),
    ]
}

fn lkcs_msg() -> impl Strategy<Value = LkcsMsg> {
    prop_oneof![
        (at(), stamp()).prop_map(|(at, ts)| LkcsMsg::Request { at, ts }),
        at().prop_map(|at| LkcsMsg::Grant { at }),
        at().prop_map(|at| LkcsMsg::Release { at }),
        at().prop_map(|at| LkcsMsg::Preempt { at }),
        at().prop_map(|at| LkcsMsg::Relinquish { at }),
        (at(), stamp()).prop_map(|(at, ts)| LkcsMsg::Trigger { at, ts }),
        (at(), stamp()).prop_map(|(at, ts)| LkcsMsg::RequestByTrigger { at, ts }),
        at().prop_map(|at| LkcsMsg::SidetrackGrant { at }),
        Just(LkcsMsg::TriggerDeclined),
        (at(), any::<bool>()).prop_map(|(at, sidetrack)| LkcsMsg::Blocked { at, sidetrack }),
        at().prop_map(|at| LkcsMsg::Park { at }),
        at().prop_map(|at| LkcsMsg::Unpark { at }),
    ]
}

fn maekawa_msg() -> impl Strategy<Value = MaekawaMsg> {
    prop_oneof![
        stamp().prop_map(|ts| MaekawaMsg::Request { ts }),
        Just(MaekawaMsg::Locked),
        Just(MaekawaMsg::Failed),
        Just(MaekawaMsg::Inquire),
        Just(MaekawaMsg::Relinquish),
        Just(MaekawaMsg::Release),
    ]
}

fn mutin_msg<X: Clone + Debug + 'static>(
    mx: impl Strategy<Value = X> + 'static,
) -> impl Strategy<Value = MutinMsg<X>> {
    let procs = || prop::collection::vec(pid(), 0..5);
    prop_oneof![
        stamp().prop_map(|req| MutinMsg::Query { req }),
        (procs(), stamp()).prop_map(|(procs, req)| MutinMsg::Response1 { procs, req }),
        (procs(), stamp()).prop_map(|(procs, req)| MutinMsg::Response2 { procs, req }),
        Just(MutinMsg::Acquire),
        Just(MutinMsg::Ack),
        Just(MutinMsg::Release),
        mx.prop_map(MutinMsg::Mx),
    ]
}

fn migrating_msg<T: Clone + Debug + 'static>(
    info: impl Strategy<Value = T> + 'static,
) -> impl Strategy<Value = MigratingMsg<T>> {
    prop_oneof![
        (pid(), stamp(), any::<bool>()).prop_map(|(requester, seq, forwarded)| {
            MigratingMsg::Request {
                requester,
                seq,
                forwarded,
            }
        }),
        stamp().prop_map(|epoch| MigratingMsg::Granted { epoch }),
        prop::option::of(pid()).prop_map(|next| MigratingMsg::ExitCs { next }),
        Just(MigratingMsg::WakeUp),
        (stamp(), info).prop_map(|(epoch, info)| MigratingMsg::BecomeController { epoch, info }),
        (pid(), stamp())
            .prop_map(|(controller, epoch)| MigratingMsg::NewController { controller, epoch }),
        (stamp(), pid()).prop_map(|(seq, next)| MigratingMsg::NextRequestor { seq, next }),
        pid().prop_map(|next| MigratingMsg::Orphan { next }),
    ]
}

fn cdc_info() -> impl Strategy<Value = CdcTransfer> {
    (prop::collection::vec(pid(), 0..4), any::<bool>())
        .prop_map(|(queue, busy)| CdcTransfer { queue, busy })
}

fn ddc_info() -> impl Strategy<Value = DdcTransfer> {
    (
        prop::option::of(pid()),
        prop::option::of((pid(), stamp())),
        any::<bool>(),
    )
        .prop_map(|(first, last, busy)| DdcTransfer { first, last, busy })
}

// ---------------------------------------------------------------------------------------------
// Systems
// ---------------------------------------------------------------------------------------------

/// Ring (n ≥ 3), complete or path on `n` processes.
fn topology(shape: u8, n: usize) -> Topology {
    match shape % 3 {
        0 => Topology::ring(n.max(3)),
        1 => Topology::complete(n),
        _ => Topology::path(n),
    }
    .expect("a valid topology")
}

/// One value per process, drawn by `f(rng, degree)`.
fn per_process(t: &Topology, seed: u64, f: impl Fn(&mut ChaCha8Rng, usize) -> usize) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    t.processes().map(|p| f(&mut rng, t.degree(p))).collect()
}

/// A configuration of `n` processes with between `lo` and `hi` in the CS.
fn global_initial(n: usize, lo: usize, hi: usize, seed: u64) -> Vec<CsState> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let m = rng.random_range(lo..=hi);
    let mut s = vec![CsState::OutCs; n];
    let mut ids: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        ids.swap(i, rng.random_range(0..=i));
    }
    for &i in &ids[..m] {
        s[i] = CsState::InCs;
    }
    s
}

fn coterie(kind: u8, n: usize) -> Coterie {
    if kind.is_multiple_of(2) {
        Coterie::majority(n).unwrap()
    } else {
        Coterie::grid(n).unwrap()
    }
}

/// Whether the stamp is already known to the arbiter (granted, pending, parked, queued or
/// held on the sidetrack): a Request carrying it is a duplicate.
fn known(a: &Arbiter, s: Stamp) -> bool {
    a.granted().contains(&s)
        || a.pending().contains(&s)
        || a.parked().contains(&s)
        || a.sidetrack_queue().contains(&s)
        || a.parked_sidetrack().contains(&s)
        || a.sidetrack_stamp(s.id) == Some(s)
}

/// LMUTIN's documented ignores (`corrected`: the corrected rules); `closed` is N_i ∪ {P_i}.
fn lmutin_ignores(
    p: &Lmutin,
    from: ProcessId,
    msg: &LmutinMsg,
    corrected: bool,
    closed: &[ProcessId],
) -> bool {
    if !closed.contains(&from) {
        return true;
    }
    let exiting = p.pending() == Some(Sequence::Exit);
    let granter = exiting && !p.awaiting().contains(&from);
    if msg.is_set_aside_rule() && !corrected {
        return true; // deviation 5 is off in the printed rules
    }
    match msg {
        LmutinMsg::Request { ts } => known(p.arbiter(), Stamp::new(*ts, from)),
        LmutinMsg::Grant => !exiting || (corrected && granter),
        LmutinMsg::Release | LmutinMsg::Relinquish => corrected && !p.arbiter().holds(from),
        // an idle process out of the CS answers Kept (deviation 5)
        LmutinMsg::Preempt => {
            corrected && !granter && !(p.state() == CsState::OutCs && p.pending().is_none())
        }
        LmutinMsg::Kept => !p.arbiter().holds(from) && p.arbiter().preempting() != Some(from),
        // a Probe is answered when idle out of the CS, or remembered by a granter's exit
        LmutinMsg::Probe => !(granter || p.state() == CsState::OutCs && p.pending().is_none()),
        LmutinMsg::Blocked => !exiting || granter,
        LmutinMsg::Park => {
            let a = p.arbiter();
            !a.holds(from) && !a.pending().iter().any(|s| s.id == from)
        }
        LmutinMsg::Unpark => !p.arbiter().parked().iter().any(|s| s.id == from),
    }
}

/// 1024 cases per property (`PROPTEST_CASES` overrides it, for longer hunts).
fn config() -> ProptestConfig {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1024);
    ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

// ---------------------------------------------------------------------------------------------
// The properties, one per algorithm
// ---------------------------------------------------------------------------------------------

proptest! {
    #![proptest_config(config())]

    /// l_i-LMUTIN, corrected and printed, on ring/complete/path with random l_i.
    #[test]
    fn lmutin_survives_hostile_messages(
        shape in 0u8..3, n in 2usize..=6, seed in any::<u64>(),
        printed in any::<bool>(), steps in steps(lmutin_msg()),
    ) {
        let t = topology(shape, n);
        let l = per_process(&t, seed, |r, d| r.random_range(0..=d));
        let inst = Lmutin::instance(&t, &l).unwrap();
        let init = inst.random_safe_initial(seed).unwrap();
        let rules = if printed { LmutinRules::PRINTED } else { LmutinRules::CORRECTED };
        let (_, procs) = Lmutin::system(&t, &l, &init, rules).unwrap();
        let rig = Rig {
            n: t.len(),
            invariants: !printed,
            ignored: Box::new(move |p: &Lmutin, from, m: &LmutinMsg| {
                lmutin_ignores(p, from, m, !printed, &t.closed(p.id()))
            }),
        };
        drive(procs, &rig, &steps)?;
    }

    /// k_i-LMUTEX = Complement(LMUTIN), with random k_i.
    #[test]
    fn lmutex_survives_hostile_messages(
        shape in 0u8..3, n in 2usize..=6, seed in any::<u64>(),
        printed in any::<bool>(), steps in steps(lmutin_msg()),
    ) {
        let t = topology(shape, n);
        let k = per_process(&t, seed, |r, d| r.random_range(1..=d + 1));
        let init = lmutex_instance(&t, &k).unwrap().random_safe_initial(seed).unwrap();
        let rules = if printed { LmutinRules::PRINTED } else { LmutinRules::CORRECTED };
        let (_, procs) = lmutex_system(&t, &k, &init, rules).unwrap();
        let rig = Rig {
            n: t.len(),
            invariants: !printed,
            ignored: Box::new(move |p: &Complement<Lmutin>, from, m: &LmutinMsg| {
                lmutin_ignores(p.inner(), from, m, !printed, &t.closed(p.id()))
            }),
        };
        drive(procs, &rig, &steps)?;
    }

    /// LKCS: the naive composition on ring/complete/path with random bounds, and the
    /// sidetrack with its leaders (automatic, one, all) on complete:5 and complete:6.
    #[test]
    fn lkcs_survives_hostile_messages(
        shape in 0u8..5, n in 2usize..=6, seed in any::<u64>(),
        printed in any::<bool>(), steps in steps(lkcs_msg()),
    ) {
        let (t, rules, sys) = lkcs_system(shape, n, seed, printed);
        let rig = Rig {
            n: t.len(),
            invariants: !printed,
            ignored: Box::new(move |p: &Lkcs, from, m: &LkcsMsg| {
                if !t.closed(p.id()).contains(&from) {
                    return true;
                }
                match m {
                    LkcsMsg::Request { at, ts } => known(p.arbiter(*at), Stamp::new(*ts, from)),
                    _ => false,
                }
            }),
        };
        let _ = rules;
        drive(sys.procs, &rig, &steps)?;
    }

    /// LKCS's round trip (`LkcsRules::TRIP`) on complete:5 and complete:6 with uniform
    /// bounds it accepts and on torus:3x3: forged messages of every kind, its own included,
    /// never panic and never break an arbiter's hard bound (`check_invariants`).
    #[test]
    fn lkcs_round_trip_survives_hostile_messages(
        shape in 0u8..3, pick in any::<u64>(), steps in steps(lkcs_trip_msg()),
    ) {
        let t = match shape {
            0 => Topology::complete(5).unwrap(),
            1 => Topology::complete(6).unwrap(),
            _ => Topology::parse("torus:3x3").unwrap(),
        };
        let m = t.processes().map(|p| t.degree(p) + 1).min().unwrap_or(1);
        let n = t.len();
        // the uniform bounds with k - l >= 3 that have a start within the tightened bounds
        let systems: Vec<lkcs::algo::lkcs::LkcsSystem> = (0..m)
            .flat_map(|l| (l + 3..=m).map(move |k| (l, k)))
            .filter_map(|(l, k)| {
                let inst = Lkcs::instance(&t, &vec![l; n], &vec![k; n]).ok()?;
                Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::TRIP).ok()
            })
            .collect();
        prop_assert!(systems.len() >= 3, "{}: {} systems", t.name(), systems.len());
        let sys = systems[(pick % systems.len() as u64) as usize].clone();
        let rig = Rig {
            n,
            invariants: true,
            ignored: Box::new(move |p: &Lkcs, from, _: &LkcsMsg| {
                !t.closed(p.id()).contains(&from)
            }),
        };
        drive(sys.procs, &rig, &steps)?;
    }

    /// Maekawa on the majority and grid coteries, nobody or one process in the CS.
    #[test]
    fn maekawa_survives_hostile_messages(
        kind in 0u8..2, n in 2usize..=6, holder in prop::option::of(0usize..6),
        printed in any::<bool>(), steps in steps(maekawa_msg()),
    ) {
        let c = coterie(kind, n);
        let mut init = vec![CsState::OutCs; n];
        if let Some(h) = holder {
            init[h % n] = CsState::InCs;
        }
        let rules = if printed { MaekawaRules::ARRIVAL_ONLY_FAILED } else { MaekawaRules::NOTES };
        let (_, procs) = Maekawa::system_with(&c, &init, rules).unwrap();
        let rig = Rig {
            n,
            invariants: true,
            ignored: Box::new(move |p: &Maekawa, from, m: &MaekawaMsg| {
                maekawa_ignores(p, from, m, c.quorum(p.id()), n)
            }),
        };
        drive(procs, &rig, &steps)?;
    }

    /// MUTIN(l) over Maekawa, random l and start.
    #[test]
    fn mutin_survives_hostile_messages(
        kind in 0u8..2, n in 2usize..=6, seed in any::<u64>(),
        printed in any::<bool>(), steps in steps(mutin_msg(maekawa_msg())),
    ) {
        let c = coterie(kind, n);
        let l = (seed % n as u64) as usize;
        let init = global_initial(n, l, n, seed);
        let rules = if printed { MutinRules::PRINTED } else { MutinRules::CORRECTED };
        let t = Topology::complete(n).unwrap();
        let mx = Maekawa::system(&c, &vec![CsState::OutCs; n]).unwrap().1;
        let (_, procs) = Mutin::system(&t, &quorums_of(&c), l, &init, mx, rules).unwrap();
        let (q, r) = quorum_and_reporters(&c);
        let rig = Rig {
            n,
            invariants: true,
            ignored: Box::new(move |p: &Mutin<Maekawa>, from, m: &MutinMsg<MaekawaMsg>| {
                mutin_ignores(p, from, m, &q[p.id().index()], &r[p.id().index()], n)
            }),
        };
        drive(procs, &rig, &steps)?;
    }

    /// kmex = Complement(MUTIN(n−k)) over Maekawa.
    #[test]
    fn kmex_survives_hostile_messages(
        kind in 0u8..2, n in 2usize..=6, seed in any::<u64>(),
        steps in steps(mutin_msg(maekawa_msg())),
    ) {
        let c = coterie(kind, n);
        let k = 1 + (seed % n as u64) as usize;
        let init = global_initial(n, 0, k, seed);
        let t = Topology::complete(n).unwrap();
        let mx = Maekawa::system(&c, &vec![CsState::OutCs; n]).unwrap().1;
        let (_, procs) =
            kmex_system(&t, &quorums_of(&c), k, &init, mx, MutinRules::CORRECTED).unwrap();
        let (q, r) = quorum_and_reporters(&c);
        let rig = Rig {
            n,
            invariants: true,
            ignored: Box::new(
                move |p: &Complement<Mutin<Maekawa>>, from, m: &MutinMsg<MaekawaMsg>| {
                    mutin_ignores(p.inner(), from, m, &q[p.id().index()], &r[p.id().index()], n)
                },
            ),
        };
        drive(procs, &rig, &steps)?;
    }

    /// (l,k)-GCS = Gcs(MUTIN(l), kmex) over Maekawa.
    #[test]
    fn gcs_survives_hostile_messages(
        kind in 0u8..2, n in 2usize..=6, seed in any::<u64>(),
        steps in steps(prop_oneof![
            mutin_msg(maekawa_msg()).prop_map(GcsMsg::Lmin),
            mutin_msg(maekawa_msg()).prop_map(GcsMsg::Kmex),
        ]),
    ) {
        let c = coterie(kind, n);
        let l = (seed % n as u64) as usize;
        let k = l + 1 + ((seed >> 8) % (n - l) as u64) as usize;
        let init = global_initial(n, l, k, seed);
        let t = Topology::complete(n).unwrap();
        let mx = || Maekawa::system(&c, &vec![CsState::OutCs; n]).unwrap().1;
        let (_, procs) =
            gcs_system(&t, &quorums_of(&c), (l, k), &init, (mx(), mx()), MutinRules::CORRECTED)
                .unwrap();
        let (q, r) = quorum_and_reporters(&c);
        type G = lkcs::algo::mutin::MutinGcs<Maekawa>;
        let rig = Rig {
            n,
            invariants: true,
            ignored: Box::new(move |p: &G, from, m: &GcsMsg<MutinMsg<MaekawaMsg>, MutinMsg<MaekawaMsg>>| {
                let i = p.id().index();
                match m {
                    GcsMsg::Lmin(m) => mutin_ignores(p.lmin(), from, m, &q[i], &r[i], n),
                    GcsMsg::Kmex(m) => mutin_ignores(p.kmex().inner(), from, m, &q[i], &r[i], n),
                }
            }),
        };
        drive(procs, &rig, &steps)?;
    }

    /// MUTIN(l) over DDC (a migrating-controller `mx`).
    #[test]
    fn mutin_over_ddc_survives_hostile_messages(
        kind in 0u8..2, n in 2usize..=6, seed in any::<u64>(),
        steps in steps(mutin_msg(migrating_msg(ddc_info()))),
    ) {
        let c = coterie(kind, n);
        let l = (seed % n as u64) as usize;
        let init = global_initial(n, l, n, seed);
        let t = Topology::complete(n).unwrap();
        let mx = Ddc::processes(n, MigrationCondition::Always, MigratingRules::CORRECTED);
        let (_, procs) =
            Mutin::system(&t, &quorums_of(&c), l, &init, mx, MutinRules::CORRECTED).unwrap();
        let (q, r) = quorum_and_reporters(&c);
        let rig = Rig {
            n,
            invariants: true,
            ignored: Box::new(
                move |p: &Mutin<Ddc>, from, m: &MutinMsg<MigratingMsg<DdcTransfer>>| {
                    match m {
                        MutinMsg::Mx(x) => migrating_ignores(from, x, n, ddc_valid),
                        _ => mutin_ignores(p, from, m, &q[p.id().index()], &r[p.id().index()], n),
                    }
                },
            ),
        };
        drive(procs, &rig, &steps)?;
    }

    /// CDC with every migration condition, corrected and printed.
    #[test]
    fn cdc_survives_hostile_messages(
        n in 2usize..=6, holder in prop::option::of(0usize..6), cond in 0u8..4,
        printed in any::<bool>(), steps in steps(migrating_msg(cdc_info())),
    ) {
        let (t, init, condition, rules) = migrating_setup(n, holder, cond, printed);
        let (_, procs) = Cdc::system(&t, &init, condition, rules).unwrap();
        let rig = Rig {
            n,
            invariants: !printed,
            ignored: Box::new(move |_: &Cdc, from, m: &MigratingMsg<CdcTransfer>| {
                migrating_ignores(from, m, n, cdc_valid)
            }),
        };
        drive(procs, &rig, &steps)?;
    }

    /// DDC with every migration condition, corrected and printed.
    #[test]
    fn ddc_survives_hostile_messages(
        n in 2usize..=6, holder in prop::option::of(0usize..6), cond in 0u8..4,
        printed in any::<bool>(), steps in steps(migrating_msg(ddc_info())),
    ) {
        let (t, init, condition, rules) = migrating_setup(n, holder, cond, printed);
        let (_, procs) = Ddc::system(&t, &init, condition, rules).unwrap();
        let rig = Rig {
            n,
            invariants: !printed,
            ignored: Box::new(move |_: &Ddc, from, m: &MigratingMsg<DdcTransfer>| {
                migrating_ignores(from, m, n, ddc_valid)
            }),
        };
        drive(procs, &rig, &steps)?;
    }
}

// ---------------------------------------------------------------------------------------------
// Per-algorithm helpers
// ---------------------------------------------------------------------------------------------

/// LKCS systems: shapes 0–2 the naive composition on ring/complete/path with random bounds
/// (falling back to (0, |N_i|+1) when no safe start exists), 3–4 the sidetrack on complete:5 /
/// complete:6 with uniform bounds k − l ≥ 3 and the leaders drawn.
fn lkcs_system(
    shape: u8,
    n: usize,
    seed: u64,
    printed: bool,
) -> (Topology, LkcsRules, lkcs::algo::lkcs::LkcsSystem) {
    if shape < 3 {
        let t = topology(shape, n);
        let rules = if printed {
            LkcsRules {
                sidetrack: false,
                park_blocked: false,
                ..LkcsRules::PRINTED
            }
        } else {
            LkcsRules::NAIVE
        };
        let l = per_process(&t, seed, |r, d| r.random_range(0..=d));
        let k = per_process(&t, seed ^ 1, |r, d| r.random_range(1..=d + 1));
        let (l, k): (Vec<usize>, Vec<usize>) = l
            .iter()
            .zip(&k)
            .map(|(&l, &k)| if l < k { (l, k) } else { (k - 1, l + 1) })
            .unzip();
        let inst = Lkcs::instance(&t, &l, &k).unwrap();
        let sys = match Lkcs::build(&inst, &Leaders::Auto, None, rules) {
            Ok(sys) => sys,
            Err(_) => {
                let l = vec![0; t.len()];
                let k: Vec<usize> = t.processes().map(|p| t.degree(p) + 1).collect();
                let inst = Lkcs::instance(&t, &l, &k).unwrap();
                Lkcs::build(&inst, &Leaders::Auto, None, rules).unwrap()
            }
        };
        return (t, rules, sys);
    }
    let t = Topology::complete(if shape == 3 { 5 } else { 6 }).unwrap();
    let m = t.len();
    let rules = if printed {
        LkcsRules::PRINTED
    } else {
        LkcsRules::CORRECTED
    };
    let options: Vec<(usize, usize)> = (0..m)
        .flat_map(|l| (l + 3..=m).map(move |k| (l, k)))
        .collect();
    let (l, k) = options[(seed % options.len() as u64) as usize];
    let leaders = match (seed >> 16) % 3 {
        0 => Leaders::Auto,
        1 => Leaders::One(((seed >> 20) % m as u64) as usize),
        _ => Leaders::All,
    };
    let inst = Lkcs::instance(&t, &vec![l; m], &vec![k; m]).unwrap();
    let sys = Lkcs::build(&inst, &leaders, None, rules)
        .or_else(|_| Lkcs::build(&inst, &Leaders::Auto, None, rules))
        .expect("complete graphs of 5 and 6 with k - l >= 3 have a leader");
    (t, rules, sys)
}

fn maekawa_ignores(
    p: &Maekawa,
    from: ProcessId,
    msg: &MaekawaMsg,
    q: &[ProcessId],
    n: usize,
) -> bool {
    let waiting = p.pending() == Some(Sequence::Entry);
    match msg {
        // arbiter role: any process of the system
        MaekawaMsg::Request { ts } => {
            !in_system(n, from) || known(p.arbiter(), Stamp::new(*ts, from))
        }
        MaekawaMsg::Release | MaekawaMsg::Relinquish => {
            !in_system(n, from) || !p.arbiter().holds(from)
        }
        // requester role: only the members of Q_i
        MaekawaMsg::Locked => !q.contains(&from) || !waiting,
        MaekawaMsg::Failed => !q.contains(&from) || !waiting || p.locks_held().contains(&from),
        MaekawaMsg::Inquire => !q.contains(&from) || !waiting || !p.locks_held().contains(&from),
    }
}

/// Q_i and R_i of every process.
fn quorum_and_reporters(c: &Coterie) -> (Vec<Vec<ProcessId>>, Vec<Vec<ProcessId>>) {
    let quorums = quorums_of(c);
    let r = reporters(&quorums);
    (quorums, r)
}

/// MUTIN's documented ignores, for its own messages (the `mx` traffic is Maekawa's).
fn mutin_ignores<M: CsObject>(
    p: &Mutin<M>,
    from: ProcessId,
    msg: &MutinMsg<M::Msg>,
    q: &[ProcessId],
    r: &[ProcessId],
    n: usize,
) -> bool {
    match msg {
        MutinMsg::Query { .. } | MutinMsg::Acquire | MutinMsg::Release => !r.contains(&from),
        MutinMsg::Response1 { procs, .. } | MutinMsg::Response2 { procs, .. } => {
            !q.contains(&from) || procs.iter().any(|x| !in_system(n, *x))
        }
        MutinMsg::Ack => !q.contains(&from) || p.phase() != Some(MutinPhase::Acquiring),
        MutinMsg::Mx(_) => false,
    }
}

fn migrating_setup(
    n: usize,
    holder: Option<usize>,
    cond: u8,
    printed: bool,
) -> (Topology, Vec<CsState>, MigrationCondition, MigratingRules) {
    let t = Topology::complete(n).unwrap();
    let mut init = vec![CsState::OutCs; n];
    if let Some(h) = holder {
        init[h % n] = CsState::InCs;
    }
    let condition = match cond {
        0 => MigrationCondition::Never,
        1 => MigrationCondition::Always,
        2 => MigrationCondition::Counter { maxreq: 2 },
        _ => MigrationCondition::timer_units(5),
    };
    let rules = if printed {
        MigratingRules::PRINTED
    } else {
        MigratingRules::CORRECTED
    };
    (t, init, condition, rules)
}

/// A CDC hand-over a correct controller could send: its queue names servers of the system.
fn cdc_valid(info: &CdcTransfer, n: usize) -> bool {
    info.queue.iter().all(|p| in_system(n, *p))
}

/// A DDC hand-over a correct controller could send: it names servers of the system, and a
/// head comes with a tail.
fn ddc_valid(info: &DdcTransfer, n: usize) -> bool {
    let named = info.first.into_iter().chain(info.last.map(|(p, _)| p));
    named.into_iter().all(|p| in_system(n, p)) && (info.first.is_none() || info.last.is_some())
}

/// Migrating controller: a message from outside the system, naming a process outside it, or
/// handing over inconsistent information, is ignored.
fn migrating_ignores<T>(
    from: ProcessId,
    msg: &MigratingMsg<T>,
    n: usize,
    valid: fn(&T, usize) -> bool,
) -> bool {
    let named: Vec<ProcessId> = match msg {
        MigratingMsg::Request { requester, .. } => vec![*requester],
        MigratingMsg::ExitCs { next } => next.iter().copied().collect(),
        MigratingMsg::BecomeController { info, .. } if !valid(info, n) => return true,
        MigratingMsg::BecomeController { .. } => Vec::new(),
        MigratingMsg::NewController { controller, .. } => vec![*controller],
        MigratingMsg::NextRequestor { next, .. } | MigratingMsg::Orphan { next } => vec![*next],
        MigratingMsg::Granted { .. } | MigratingMsg::WakeUp => Vec::new(),
    };
    !in_system(n, from) || named.iter().any(|p| !in_system(n, *p))
}

// ---------------------------------------------------------------------------------------------
// Regression tests: the minimal cases the properties found, one per defect
// ---------------------------------------------------------------------------------------------

fn p(i: u32) -> ProcessId {
    ProcessId(i)
}

/// Delivers `msg` from `from` to `obj`; returns the messages sent.
fn feed<A: CsObject>(obj: &mut A, from: u32, msg: A::Msg) -> Vec<(ProcessId, A::Msg)> {
    let mut out = Outbox::new();
    obj.on_message(ProcessId(from), msg, &mut out);
    out.drain().collect()
}

/// Starts the sequence leaving `obj`'s state; returns the messages sent.
fn begin<A: CsObject>(obj: &mut A) -> Vec<(ProcessId, A::Msg)> {
    let mut out = Outbox::new();
    obj.begin(Sequence::leaving(obj.state()), &mut out).unwrap();
    out.drain().collect()
}

/// LMUTIN on path:3 with l = 0 and everyone in the CS: nothing granted anywhere yet.
fn lmutin_path3() -> Vec<Lmutin> {
    let t = Topology::path(3).unwrap();
    let init = [CsState::InCs; 3];
    Lmutin::system(&t, &[0, 0, 0], &init, LmutinRules::CORRECTED)
        .unwrap()
        .1
}

/// Was: a Request from P2 (not a neighbour of P0 on path:3) or from P7 (outside the system)
/// was granted, and a Grant from a non-neighbour counted for the exit.
#[test]
fn lmutin_ignores_messages_from_outside_the_closed_neighbourhood() {
    let mut procs = lmutin_path3();
    let before = procs[0].clone();
    assert_eq!(feed(&mut procs[0], 2, LmutinMsg::Request { ts: 1 }), vec![]);
    assert_eq!(feed(&mut procs[0], 7, LmutinMsg::Request { ts: 1 }), vec![]);
    assert_eq!(procs[0], before);
    begin(&mut procs[0]);
    let exiting = procs[0].clone();
    feed(&mut procs[0], 2, LmutinMsg::Grant);
    assert_eq!(procs[0], exiting);
    assert_eq!(procs[0].grants_held(), 0);
}

/// Was: a duplicated Request (same stamp) was queued a second time behind its own grant and
/// granted again after the Release: a permission no exit asked for, filling the arbiter.
#[test]
fn a_duplicated_request_is_not_granted_twice() {
    // complete:2 with l = 1: every arbiter has capacity 1
    let t = Topology::complete(2).unwrap();
    let init = [CsState::InCs; 2];
    let (_, mut procs) = Lmutin::system(&t, &[1, 1], &init, LmutinRules::CORRECTED).unwrap();
    let a = &mut procs[0];
    assert_eq!(
        feed(a, 1, LmutinMsg::Request { ts: 1 }),
        vec![(p(1), LmutinMsg::Grant)]
    );
    assert_eq!(feed(a, 1, LmutinMsg::Request { ts: 1 }), vec![]);
    // P1's exit completed and it entered again: its Release frees the arbiter for good
    assert_eq!(feed(a, 1, LmutinMsg::Release), vec![]);
    assert!(a.arbiter().granted().is_empty() && a.arbiter().pending().is_empty());
    a.check_invariants().unwrap();
}

/// Was: a repeated Grant (corrected rules) bumped the printed rule's counter.
#[test]
fn lmutin_a_repeated_grant_changes_nothing() {
    let mut procs = lmutin_path3();
    begin(&mut procs[0]);
    feed(&mut procs[0], 1, LmutinMsg::Grant);
    let once = procs[0].clone();
    assert_eq!(feed(&mut procs[0], 1, LmutinMsg::Grant), vec![]);
    assert_eq!(procs[0], once);
}

/// Was: `ts += 1` overflowed (a panic with overflow checks) on the exit after a Request
/// stamped `u64::MAX`; LMUTEX, the complement, likewise on its entry.
#[test]
fn lmutin_clock_saturates_after_a_request_stamped_u64_max() {
    let mut procs = lmutin_path3();
    feed(&mut procs[0], 1, LmutinMsg::Request { ts: u64::MAX });
    let sent = begin(&mut procs[0]);
    assert!(sent.contains(&(p(0), LmutinMsg::Request { ts: u64::MAX })));
    procs[0].check_invariants().unwrap();
    let t = Topology::path(3).unwrap();
    let (_, mut lmutex) =
        lmutex_system(&t, &[2, 3, 2], &[CsState::OutCs; 3], LmutinRules::CORRECTED).unwrap();
    feed(&mut lmutex[1], 0, LmutinMsg::Request { ts: u64::MAX });
    begin(&mut lmutex[1]);
}

/// The naive LKCS composition on path:3 (no leader), nobody in the CS.
fn lkcs_path3() -> Vec<Lkcs> {
    let t = Topology::path(3).unwrap();
    let inst = Lkcs::instance(&t, &[0, 0, 0], &[2, 3, 2]).unwrap();
    let init = [CsState::OutCs; 3];
    Lkcs::build(&inst, &Leaders::Auto, Some(&init), LkcsRules::NAIVE)
        .unwrap()
        .procs
}

/// Was: a Request from P3 on a system of three (shrunk from ring:3) was granted, a grant sent
/// outside the system; from a non-neighbour likewise.
#[test]
fn lkcs_ignores_messages_from_outside_the_closed_neighbourhood() {
    let mut procs = lkcs_path3();
    let before = procs[0].clone();
    let req = LkcsMsg::Request {
        at: At::Mutex,
        ts: 0,
    };
    assert_eq!(feed(&mut procs[0], 3, req), vec![]);
    assert_eq!(feed(&mut procs[0], 2, req), vec![]);
    assert_eq!(procs[0], before);
}

/// Was: a duplicated Request (same stamp) after its grant overwrote `last_type` and was
/// queued again; now it changes nothing.
#[test]
fn lkcs_ignores_a_duplicated_request() {
    let mut procs = lkcs_path3();
    let req = LkcsMsg::Request {
        at: At::Mutex,
        ts: 1,
    };
    assert_eq!(
        feed(&mut procs[0], 1, req),
        vec![(p(1), LkcsMsg::Grant { at: At::Mutex })]
    );
    let once = procs[0].clone();
    assert_eq!(feed(&mut procs[0], 1, req), vec![]);
    assert_eq!(procs[0], once);
}

/// Was: `ts += 1` overflowed on the exit after a Request stamped `u64::MAX`.
#[test]
fn lkcs_clock_saturates_after_a_request_stamped_u64_max() {
    let mut procs = lkcs_path3();
    let req = LkcsMsg::Request {
        at: At::Mutex,
        ts: u64::MAX,
    };
    feed(&mut procs[1], 0, req);
    // P1 enters (nothing asked of P1 by the others holds it back), then exits
    begin(&mut procs[1]);
    for q in 0..3 {
        feed(&mut procs[1], q, LkcsMsg::Grant { at: At::Mutex });
    }
    assert_eq!(procs[1].state(), CsState::InCs);
    let sent = begin(&mut procs[1]);
    assert!(sent.contains(&(
        p(1),
        LkcsMsg::Request {
            at: At::Mutin,
            ts: u64::MAX
        }
    )));
}

/// Maekawa on majority(3): Q_0 = {0, 1}, Q_1 = {1, 2}, Q_2 = {2, 0}; nobody in the CS.
fn maekawa3() -> Vec<Maekawa> {
    let c = Coterie::majority(3).unwrap();
    Maekawa::system(&c, &[CsState::OutCs; 3]).unwrap().1
}

/// Was: a Request from P7 (outside the system) was locked for, the Locked sent outside the
/// system; a Locked from P2, not in Q_0, was recorded as a lock held.
#[test]
fn maekawa_ignores_requests_from_outside_and_locks_from_outside_the_quorum() {
    let mut procs = maekawa3();
    let before = procs[1].clone();
    assert_eq!(
        feed(&mut procs[1], 7, MaekawaMsg::Request { ts: 1 }),
        vec![]
    );
    assert_eq!(procs[1], before);
    begin(&mut procs[0]);
    feed(&mut procs[0], 2, MaekawaMsg::Locked);
    assert!(procs[0].locks_held().is_empty());
    procs[0].check_invariants().unwrap();
}

/// Was: `clock += 1` overflowed on the entry after a Request stamped `u64::MAX`.
#[test]
fn maekawa_clock_saturates_after_a_request_stamped_u64_max() {
    let mut procs = maekawa3();
    feed(&mut procs[0], 0, MaekawaMsg::Request { ts: u64::MAX });
    feed(&mut procs[0], 0, MaekawaMsg::Release);
    let sent = begin(&mut procs[0]);
    assert!(sent.contains(&(p(1), MaekawaMsg::Request { ts: u64::MAX })));
}

/// Was (shrunk): on kmex with n = 2, a Query from P2 (outside the system) armed
/// `responseAgainTo` and was answered outside the system; a Release from a process whose
/// quorum does not hold P_i was counted in `procsInCS`; a response naming a process outside
/// the system counted it in the CS, and the exit went ahead with l processes in.
#[test]
fn mutin_takes_queries_and_releases_only_from_its_reporters() {
    let c = Coterie::majority(3).unwrap();
    let t = Topology::complete(3).unwrap();
    let mx = Maekawa::system(&c, &[CsState::OutCs; 3]).unwrap().1;
    let init = [CsState::OutCs, CsState::OutCs, CsState::InCs];
    let (_, mut procs) =
        Mutin::system(&t, &quorums_of(&c), 1, &init, mx, MutinRules::CORRECTED).unwrap();
    // R_1 = {0, 1}: P2 never reports to P1, P5 is not a process
    let before = procs[1].clone();
    assert_eq!(feed(&mut procs[1], 5, MutinMsg::Query { req: 0 }), vec![]);
    assert_eq!(feed(&mut procs[1], 2, MutinMsg::Release), vec![]);
    assert_eq!(procs[1], before);
    // P2 (alone in the CS, l = 1) tries to exit: its mx entry completes and it queries
    // Q_2 = {0, 2}; a response naming P9 must not count as a second process in the CS
    begin(&mut procs[2]);
    feed(&mut procs[2], 2, MutinMsg::Mx(MaekawaMsg::Locked));
    feed(&mut procs[2], 0, MutinMsg::Mx(MaekawaMsg::Locked));
    assert_eq!(procs[2].phase(), Some(MutinPhase::Querying));
    let forged = MutinMsg::Response1 {
        procs: vec![p(2), p(9)],
        req: 1,
    };
    assert_eq!(feed(&mut procs[2], 0, forged), vec![]);
    assert_eq!(procs[2].phase(), Some(MutinPhase::Querying));
}

/// Was: a Request naming P9 in a system of two was queued and granted: a Granted sent
/// outside the system.
#[test]
fn migrating_ignores_messages_naming_a_process_outside_the_system() {
    let t = Topology::complete(2).unwrap();
    let init = [CsState::OutCs; 2];
    let (_, mut cdc) = Cdc::system(
        &t,
        &init,
        MigrationCondition::Never,
        MigratingRules::CORRECTED,
    )
    .unwrap();
    let before = cdc[0].clone();
    let forged = MigratingMsg::Request {
        requester: p(9),
        seq: 1,
        forwarded: false,
    };
    assert_eq!(feed(&mut cdc[0], 1, forged), vec![]);
    assert_eq!(
        feed(&mut cdc[0], 2, MigratingMsg::Orphan { next: p(0) }),
        vec![]
    );
    assert_eq!(cdc[0], before);
    let (_, mut ddc) = Ddc::system(
        &t,
        &init,
        MigrationCondition::Never,
        MigratingRules::CORRECTED,
    )
    .unwrap();
    let stale = MigratingMsg::NextRequestor { seq: 0, next: p(2) };
    assert_eq!(feed(&mut ddc[0], 0, stale), vec![]);
}

/// Was (shrunk, n = 4): a Granted from P1 at the active controller P0 moved its pointer to
/// P1: "P0 is the controller but points at P1".
#[test]
fn cdc_the_controller_keeps_pointing_at_itself() {
    let t = Topology::complete(4).unwrap();
    let init = [CsState::OutCs; 4];
    let (_, mut cdc) = Cdc::system(
        &t,
        &init,
        MigrationCondition::Never,
        MigratingRules::CORRECTED,
    )
    .unwrap();
    feed(&mut cdc[0], 1, MigratingMsg::Granted { epoch: 0 });
    assert_eq!(cdc[0].current_controller(), p(0));
    cdc[0].check_invariants().unwrap();
}

/// Was (shrunk, n = 2): an Orphan reaching the controller with an empty queue set first-in-q
/// without last-in-q ("first-in-q set with an empty queue"); so did a become-controller
/// carrying a head without a tail, and the grant of the tail with a head left over.
#[test]
fn ddc_keeps_its_queue_consistent() {
    let t = Topology::complete(3).unwrap();
    let init = [CsState::OutCs; 3];
    let (_, mut ddc) = Ddc::system(
        &t,
        &init,
        MigrationCondition::Never,
        MigratingRules::CORRECTED,
    )
    .unwrap();
    feed(&mut ddc[0], 0, MigratingMsg::Orphan { next: p(1) });
    ddc[0].check_invariants().unwrap();
    let bad = MigratingMsg::BecomeController {
        epoch: 1,
        info: DdcTransfer {
            first: Some(p(2)),
            last: None,
            busy: false,
        },
    };
    assert_eq!(feed(&mut ddc[1], 0, bad), vec![]);
    assert!(!ddc[1].is_controller());
    ddc[1].check_invariants().unwrap();
    // P1 queued (head and tail), a forged Orphan names P2 the head, P1 exits with P1 next
    let c = &mut ddc[0];
    let req = |i: u32| MigratingMsg::Request {
        requester: p(i),
        seq: 1,
        forwarded: false,
    };
    feed(c, 1, req(1));
    feed(c, 0, MigratingMsg::WakeUp);
    feed(c, 2, req(2));
    feed(c, 2, MigratingMsg::Orphan { next: p(2) });
    feed(c, 1, MigratingMsg::ExitCs { next: Some(p(2)) });
    c.check_invariants().unwrap();
}

/// Was: `epoch + 1` overflowed at the first migration after a become-controller of epoch
/// `u64::MAX`.
#[test]
fn migrating_epochs_saturate() {
    let t = Topology::complete(2).unwrap();
    let init = [CsState::OutCs; 2];
    let (_, mut cdc) = Cdc::system(
        &t,
        &init,
        MigrationCondition::Always,
        MigratingRules::CORRECTED,
    )
    .unwrap();
    let handover = MigratingMsg::BecomeController {
        epoch: u64::MAX,
        info: CdcTransfer {
            queue: Vec::new(),
            busy: true,
        },
    };
    feed(&mut cdc[1], 0, handover);
    let sent = feed(&mut cdc[1], 0, MigratingMsg::ExitCs { next: None });
    assert!(sent.iter().any(|(_, m)| matches!(
        m,
        MigratingMsg::BecomeController {
            epoch: u64::MAX,
            ..
        }
    )));
    cdc[1].check_invariants().unwrap();
}
