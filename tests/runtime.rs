//! The thread runtime: LMUTIN, LMUTEX and LKCS under the global monitor, the handle's contract
//! (misuse, timeout and resume, shutdown, a dying process thread), and `cycle_pairs`.

#![cfg(not(loom))]

use lkcs::{
    algo::lkcs::{Leaders, Lkcs, LkcsRules},
    algo::lmutin::{lmutex_instance, lmutex_system, Lmutin, LmutinMsg, LmutinRules},
    algo::mutin::grid_gcs_system,
    cs::{CsObject, CsState, Outbox, Sequence},
    runtime::{cycle_pairs, CondvarMailbox, Handle, Mailbox, Runtime, RuntimeConfig, RuntimeError},
    CallError, ProcessId, Topology,
};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

const PAIRS: usize = 1_000;

/// How often a client that finished its own pairs checks whether every client has.
const POLL: Duration = Duration::from_millis(5);

/// Every client thread runs `pairs` pairs (Exit then Entry, or Entry then Exit, as its initial
/// state dictates), then keeps cycling until every client has run its pairs: a client that
/// stopped early could hold its neighbours back for good (with LMUTEX, a process that ends in
/// the CS keeps a neighbour with k = 1 out). Extra sequences left running are cut short by
/// the shutdown. Returns how many pairs each completed.
fn drive<A: CsObject, M: Mailbox>(handles: Vec<Handle<A, M>>, pairs: usize) -> Vec<usize>
where
    Handle<A, M>: Send,
{
    let n = handles.len();
    let finished = AtomicUsize::new(0);
    // set when a client fails, so the others stop waiting instead of hanging the test
    let failed = AtomicBool::new(false);
    let all_done = || finished.load(Ordering::SeqCst) == n;
    std::thread::scope(|s| {
        let workers: Vec<_> = handles
            .into_iter()
            .map(|h| {
                let (finished, failed, all_done) = (&finished, &failed, &all_done);
                s.spawn(move || {
                    let first = Sequence::leaving(h.state());
                    let mut done = 0;
                    loop {
                        for seq in [first, first.flip()] {
                            // a timed-out sequence keeps running: the next call resumes it
                            loop {
                                match h.run(seq, Some(POLL)) {
                                    Ok(()) => break,
                                    Err(RuntimeError::Timeout) if failed.load(Ordering::SeqCst) => {
                                        return done
                                    }
                                    Err(RuntimeError::Timeout) if done >= pairs && all_done() => {
                                        return done
                                    }
                                    Err(RuntimeError::Timeout) => {}
                                    Err(e) => {
                                        failed.store(true, Ordering::SeqCst);
                                        panic!("{}: pair {done} failed: {e}", h.id());
                                    }
                                }
                            }
                        }
                        done += 1;
                        if done == pairs {
                            finished.fetch_add(1, Ordering::SeqCst);
                        }
                        if done >= pairs && all_done() {
                            return done;
                        }
                    }
                })
            })
            .collect();
        workers.into_iter().map(|w| w.join().unwrap_or(0)).collect()
    })
}

fn run_lmutin<M: Mailbox>(spec: &str, l: usize, pairs: usize) {
    let topo = Topology::parse(spec).expect("topology");
    let n = topo.len();
    let inst = Lmutin::instance(&topo, &vec![l; n]).expect("instance");
    let initial = inst.find_safe_initial().expect("safe initial");
    let (inst, procs) =
        Lmutin::system(&topo, &vec![l; n], &initial, LmutinRules::CORRECTED).expect("system");
    let mut rt = Runtime::<_, M>::start_with_mailbox(
        procs,
        RuntimeConfig {
            monitor: Some(inst),
        },
    )
    .expect("start");
    let handles = rt.take_handles().expect("handles");
    assert!(rt.take_handles().is_none());
    let done = drive(handles, pairs);
    rt.shutdown();
    let report = rt.report();
    assert!(done.iter().all(|&d| d >= pairs), "{spec} l={l}: {done:?}");
    assert!(report.monitored);
    assert_eq!(
        report.violations, 0,
        "{spec} l={l}: {:?}",
        report.first_violations
    );
    assert!(report.state_changes >= (2 * pairs * n) as u64);
    // Best case 3(|N_i|+1) per pair: at least that many messages were sent.
    let best: usize = topo.processes().map(|p| 3 * (topo.degree(p) + 1)).sum();
    assert!(report.messages >= (best * pairs) as u64);
}

#[test]
fn lmutin_torus_4x4_l2_is_safe_and_live() {
    run_lmutin::<lkcs::runtime::CrossbeamMailbox>("torus:4x4", 2, PAIRS);
}

#[test]
fn lmutin_ring_16_l1_is_safe_and_live() {
    run_lmutin::<lkcs::runtime::CrossbeamMailbox>("ring:16", 1, PAIRS);
}

#[test]
fn lmutin_ring_16_l2_is_safe_and_live() {
    run_lmutin::<lkcs::runtime::CrossbeamMailbox>("ring:16", 2, PAIRS);
}

#[test]
fn lmutin_on_the_condvar_mailbox() {
    run_lmutin::<CondvarMailbox>("torus:4x4", 3, PAIRS / 4);
}

fn run_lmutex(spec: &str, k: usize) {
    let topo = Topology::parse(spec).expect("topology");
    let n = topo.len();
    let initial = lmutex_instance(&topo, &vec![k; n])
        .expect("instance")
        .find_safe_initial()
        .expect("safe initial");
    let (inst, procs) =
        lmutex_system(&topo, &vec![k; n], &initial, LmutinRules::CORRECTED).expect("system");
    let mut rt = Runtime::start(
        procs,
        RuntimeConfig {
            monitor: Some(inst),
        },
    )
    .expect("start");
    let done = drive(rt.take_handles().expect("handles"), PAIRS);
    rt.shutdown();
    let report = rt.report();
    assert!(done.iter().all(|&d| d >= PAIRS), "{spec} k={k}: {done:?}");
    assert_eq!(
        report.violations, 0,
        "{spec} k={k}: {:?}",
        report.first_violations
    );
    assert!(report.state_changes >= (2 * PAIRS * n) as u64);
}

#[test]
fn lmutex_torus_4x4_k2_is_safe_and_live() {
    run_lmutex("torus:4x4", 2);
}

#[test]
fn lmutex_ring_16_k1_is_safe_and_live() {
    run_lmutex("ring:16", 1);
}

/// path:2 with l = 1, P0 in and P1 out: P1 holds both permissions, so P0's exit waits until
/// P1 enters.
fn blocked_pair() -> Runtime<Lmutin> {
    let topo = Topology::path(2).expect("path");
    let initial = [CsState::InCs, CsState::OutCs];
    let (inst, procs) =
        Lmutin::system(&topo, &[1, 1], &initial, LmutinRules::CORRECTED).expect("system");
    Runtime::start(
        procs,
        RuntimeConfig {
            monitor: Some(inst),
        },
    )
    .expect("start")
}

#[test]
fn misuse_returns_call_errors_at_once() {
    let mut rt = blocked_pair();
    let h = rt.take_handles().expect("handles");
    assert_eq!(
        h[0].entry(),
        Err(RuntimeError::Call(CallError::AlreadyInCs))
    );
    assert_eq!(h[1].exit(), Err(RuntimeError::Call(CallError::NotInCs)));
    assert_eq!(h[1].entry_timeout(Duration::from_secs(60)), Ok(()));
    assert_eq!(h[1].state(), CsState::InCs);
    assert_eq!(
        h[1].entry(),
        Err(RuntimeError::Call(CallError::AlreadyInCs))
    );
    rt.shutdown();
    assert_eq!(rt.report().violations, 0);
}

#[test]
fn timeout_leaves_the_sequence_running_and_resume_completes_it() {
    let mut rt = blocked_pair();
    let h = rt.take_handles().expect("handles");
    assert_eq!(
        h[0].exit_timeout(Duration::from_millis(20)),
        Err(RuntimeError::Timeout)
    );
    assert_eq!(h[0].entry(), Err(RuntimeError::Call(CallError::Busy)));
    assert_eq!(h[0].state(), CsState::InCs);
    // P1 enters: its Release frees a permission and P0's pending exit completes.
    assert_eq!(h[1].entry(), Ok(()));
    assert_eq!(h[0].exit(), Ok(()));
    assert_eq!(h[0].state(), CsState::OutCs);
    assert_eq!(h[0].entry(), Ok(()));
    rt.shutdown();
    let report = rt.report();
    assert_eq!(report.violations, 0);
    assert_eq!(report.state_changes, 3);
}

#[test]
fn a_timed_out_sequence_that_completed_meanwhile_is_claimed_by_the_same_call() {
    let mut rt = blocked_pair();
    let h = rt.take_handles().expect("handles");
    assert_eq!(
        h[0].exit_timeout(Duration::from_millis(1)),
        Err(RuntimeError::Timeout)
    );
    assert_eq!(h[1].entry(), Ok(()));
    // Wait for the completion without claiming it, then claim it.
    while h[0].state() != CsState::OutCs {
        std::thread::yield_now();
    }
    assert_eq!(h[0].exit_timeout(Duration::from_millis(1)), Ok(()));
    assert_eq!(h[0].exit(), Err(RuntimeError::Call(CallError::NotInCs)));
}

#[test]
fn calls_after_shutdown_return_shutdown() {
    let mut rt = blocked_pair();
    let h = rt.take_handles().expect("handles");
    rt.shutdown();
    rt.shutdown();
    assert_eq!(h[0].exit(), Err(RuntimeError::Shutdown));
    assert_eq!(h[1].entry(), Err(RuntimeError::Shutdown));
    assert_eq!(
        h[1].entry_timeout(Duration::from_secs(1)),
        Err(RuntimeError::Shutdown)
    );
    assert_eq!(h[0].state(), CsState::InCs);
}

#[test]
fn a_blocked_exit_is_released_by_shutdown() {
    let mut rt = blocked_pair();
    let mut h = rt.take_handles().expect("handles");
    let h0 = h.remove(0);
    // The exit is now running and cannot complete while P1 stays out.
    assert_eq!(
        h0.exit_timeout(Duration::from_millis(10)),
        Err(RuntimeError::Timeout)
    );
    let blocked = std::thread::spawn(move || h0.exit());
    std::thread::sleep(Duration::from_millis(20));
    rt.shutdown();
    assert_eq!(blocked.join().ok(), Some(Err(RuntimeError::Shutdown)));
}

#[test]
fn dropping_the_runtime_releases_a_blocked_exit() {
    let mut rt = blocked_pair();
    let mut h = rt.take_handles().expect("handles");
    let h0 = h.remove(0);
    let blocked = std::thread::spawn(move || h0.exit());
    std::thread::sleep(Duration::from_millis(20));
    drop(rt);
    assert_eq!(blocked.join().ok(), Some(Err(RuntimeError::Shutdown)));
}

/// A process whose Exit-Sequence panics.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Faulty {
    id: ProcessId,
    state: CsState,
}

impl CsObject for Faulty {
    type Msg = LmutinMsg;
    fn id(&self) -> ProcessId {
        self.id
    }
    fn state(&self) -> CsState {
        self.state
    }
    fn pending(&self) -> Option<Sequence> {
        None
    }
    fn begin_entry(&mut self, out: &mut Outbox<LmutinMsg>) -> Result<(), CallError> {
        self.state = CsState::InCs;
        out.complete();
        Ok(())
    }
    fn begin_exit(&mut self, _: &mut Outbox<LmutinMsg>) -> Result<(), CallError> {
        panic!("deliberate failure of {} (expected by the test)", self.id)
    }
    fn on_message(&mut self, _: ProcessId, _: LmutinMsg, _: &mut Outbox<LmutinMsg>) {}
}

#[test]
fn a_dead_process_thread_is_reported_not_hung() {
    let procs = (0..2u32)
        .map(|i| Faulty {
            id: ProcessId(i),
            state: CsState::OutCs,
        })
        .collect();
    let mut rt = Runtime::start(procs, RuntimeConfig::default()).expect("start");
    let h = rt.take_handles().expect("handles");
    assert_eq!(h[0].entry(), Ok(()));
    assert_eq!(h[0].exit(), Err(RuntimeError::ProcessDied(ProcessId(0))));
    assert_eq!(h[1].entry(), Err(RuntimeError::ProcessDied(ProcessId(0))));
    rt.shutdown();
    assert_eq!(h[0].exit(), Err(RuntimeError::Shutdown));
    let report = rt.report();
    assert!(!report.monitored);
    assert_eq!(report.state_changes, 1);
}

#[test]
fn objects_out_of_order_are_refused() {
    let procs = vec![Faulty {
        id: ProcessId(1),
        state: CsState::OutCs,
    }];
    match Runtime::start(procs, RuntimeConfig::default()) {
        Err(RuntimeError::Config(e)) => assert!(e.to_string().contains("expected P0")),
        other => panic!("expected a configuration error, got {other:?}"),
    }
    let none: Vec<Faulty> = Vec::new();
    assert!(matches!(
        Runtime::start(none, RuntimeConfig::default()),
        Err(RuntimeError::Config(_))
    ));
}

/// An LKCS system started on the thread runtime under the monitor, with its handles.
fn monitored(sys: lkcs::algo::lkcs::LkcsSystem) -> (Runtime<Lkcs>, Vec<Handle<Lkcs>>) {
    let mut rt = Runtime::start(
        sys.procs,
        RuntimeConfig {
            monitor: Some(sys.instance),
        },
    )
    .expect("start");
    let handles = rt.take_handles().expect("handles");
    (rt, handles)
}

/// LKCS on torus:4x4 with l = 0, k = 4 (the bench's instance): k − l = 4 everywhere, so the
/// tightened range near the paper's leader is 1..=3, wide enough for normal moves
/// (the simulator completes every seed of its sweeps on it). `cycle_pairs` keeps every
/// process, the leader included, cycling until all are done, and is called twice, as the
/// bench calls it once per iteration: the second call resumes the sequences the first left
/// running.
#[test]
fn lkcs_torus_4x4_l0_k4_is_safe_and_live_with_cycle_pairs() {
    const LKCS_PAIRS: usize = 150;
    let topo = Topology::parse("torus:4x4").expect("topology");
    let n = topo.len();
    let inst = Lkcs::instance(&topo, &vec![0; n], &vec![4; n]).expect("instance");
    let sys = Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::CORRECTED).expect("system");
    // the paper's single leader tightens the bounds, its watchers nothing more
    assert_eq!(sys.tightening.len(), 1);
    let (mut rt, handles) = monitored(sys);
    let mut total = 0;
    for round in 0..2 {
        let done = cycle_pairs(&handles, LKCS_PAIRS, None).expect("every client ran");
        assert!(
            done.iter().all(|&d| d >= LKCS_PAIRS),
            "round {round}: {done:?}"
        );
        total += done.iter().sum::<usize>();
    }
    rt.shutdown();
    let report = rt.report();
    assert!(report.monitored);
    assert_eq!(report.violations, 0, "{:?}", report.first_violations);
    assert!(report.state_changes >= (2 * total) as u64);
    // Best case 6(|N_i|+1) per pair (Request, Grant, Release of both types): at least that.
    let best: usize = topo.processes().map(|p| 6 * (topo.degree(p) + 1)).sum();
    assert!(report.messages >= (best * 2 * LKCS_PAIRS) as u64);
}

/// LKCS at the least slack (l = 1, k = 4 everywhere) on a dense seeded random graph, on the
/// thread runtime: almost every move is a trigger, and the watchers of deviation 10 must
/// let every process complete its pairs under the monitor.
#[test]
fn lkcs_least_slack_on_a_dense_random_graph_is_safe_and_live_on_threads() {
    const PAIRS: usize = 20;
    // the first seeded graph on which (1, 4) is valid everywhere and a leader exists
    let (topo, sys) = dense_least_slack(LkcsRules::CORRECTED).expect("a graph with a leader");
    // more watchers than the one leader: the point of the test
    assert!(sys.leaders.len() > 1, "{}", topo.name());
    completes_pairs_monitored(&topo, sys, PAIRS);
}

/// LKCS's round trip (`LkcsRules::TRIP`) at the least slack on a dense seeded random graph
/// and on torus:6x6 with (1, 4) (where [2, 3] everywhere leaves dead ends only a round trip
/// leaves), on the thread runtime: every process completes its pairs under the monitor.
#[test]
fn lkcs_round_trip_is_safe_and_live_on_threads() {
    const PAIRS: usize = 20;
    let dense = dense_least_slack(LkcsRules::TRIP).expect("a graph with a tight start");
    let torus = Topology::parse("torus:6x6").expect("topology");
    let inst = Lkcs::instance(&torus, &[1; 36], &[4; 36]).expect("instance");
    let sys = Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::TRIP).expect("system");
    for (topo, sys) in [dense, (torus, sys)] {
        assert!(sys.leaders.is_empty());
        completes_pairs_monitored(&topo, sys, PAIRS);
    }
}

/// The first seeded random graph of 16 processes (edge probability 0.4) on which the least
/// slack (1, 4) builds with `rules`.
fn dense_least_slack(rules: LkcsRules) -> Option<(Topology, lkcs::algo::lkcs::LkcsSystem)> {
    (0..50).find_map(|seed| {
        let topo = Topology::random(16, 0.4, seed).ok()?;
        let inst = Lkcs::instance(&topo, &[1; 16], &[4; 16]).ok()?;
        let sys = Lkcs::build(&inst, &Leaders::Auto, None, rules).ok()?;
        Some((topo, sys))
    })
}

/// Runs `sys` on threads under the monitor: every process completes `pairs` pairs (a hang,
/// a liveness failure, fails after two minutes) and the monitor saw no violation.
fn completes_pairs_monitored(topo: &Topology, sys: lkcs::algo::lkcs::LkcsSystem, pairs: usize) {
    let (mut rt, handles) = monitored(sys);
    let done = cycle_pairs(&handles, pairs, Some(Duration::from_secs(120)));
    rt.shutdown();
    let done = done.expect("every process completed its pairs");
    assert!(
        done.iter().all(|&d| d >= pairs),
        "{}: {done:?}",
        topo.name()
    );
    let report = rt.report();
    assert!(report.monitored);
    assert_eq!(report.violations, 0, "{:?}", report.first_violations);
}

/// path:2, l = 1, P0 in and P1 out: P0 can only exit while P1 is in. A client of P1 that
/// stopped after its pairs (ending out of the CS) could leave P0's exit waiting for ever;
/// `cycle_pairs` keeps P1 cycling until P0 is done too.
#[test]
fn cycle_pairs_keeps_finished_processes_cycling() {
    let mut rt = blocked_pair();
    let h = rt.take_handles().expect("handles");
    for pairs in [1, 50] {
        let done = cycle_pairs(&h, pairs, None).expect("both ran");
        assert!(done.iter().all(|&d| d >= pairs), "{done:?}");
    }
    assert_eq!(cycle_pairs(&h, 0, None), Ok(vec![0, 0]));
    rt.shutdown();
    assert_eq!(rt.report().violations, 0);
    assert_eq!(cycle_pairs(&h, 1, None), Err(RuntimeError::Shutdown));
}

/// A process whose Exit-Sequence never completes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Stuck {
    id: ProcessId,
    state: CsState,
    pending: Option<Sequence>,
}

impl CsObject for Stuck {
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
    fn begin_entry(&mut self, out: &mut Outbox<LmutinMsg>) -> Result<(), CallError> {
        self.state = CsState::InCs;
        out.complete();
        Ok(())
    }
    fn begin_exit(&mut self, _: &mut Outbox<LmutinMsg>) -> Result<(), CallError> {
        self.pending = Some(Sequence::Exit);
        Ok(())
    }
    fn on_message(&mut self, _: ProcessId, _: LmutinMsg, _: &mut Outbox<LmutinMsg>) {}
}

#[test]
fn cycle_pairs_with_a_timeout_returns_instead_of_hanging() {
    let procs = (0..3u32)
        .map(|i| Stuck {
            id: ProcessId(i),
            state: CsState::OutCs,
            pending: None,
        })
        .collect();
    let mut rt = Runtime::start(procs, RuntimeConfig::default()).expect("start");
    let h = rt.take_handles().expect("handles");
    // every process enters, then its exit never completes
    assert_eq!(
        cycle_pairs(&h, 1, Some(Duration::from_millis(30))),
        Err(RuntimeError::Timeout)
    );
    // the exits keep running: the same call resumes them, the other one is refused
    assert_eq!(h[0].state(), CsState::InCs);
    assert_eq!(h[0].entry(), Err(RuntimeError::Call(CallError::Busy)));
    assert_eq!(
        h[1].exit_timeout(Duration::from_millis(1)),
        Err(RuntimeError::Timeout)
    );
    rt.shutdown();
}

/// Two threads calling `entry()` on one handle: before, both got `Ok` (two callers "inside"
/// one process); now the second call is refused while the first is in progress.
#[test]
fn a_second_concurrent_call_on_one_handle_is_refused() {
    let complete = Topology::complete(3).expect("k3");
    let k = vec![1; 3];
    let initial = vec![CsState::InCs, CsState::OutCs, CsState::OutCs];
    let (inst, procs) =
        lmutex_system(&complete, &k, &initial, LmutinRules::CORRECTED).expect("lmutex");
    let mut rt = Runtime::start(
        procs,
        RuntimeConfig {
            monitor: Some(inst),
        },
    )
    .expect("start");
    let handles = rt.take_handles().expect("handles");
    let h = &handles[1];
    let results: Vec<Result<(), RuntimeError>> = std::thread::scope(|s| {
        // P0 holds the only slot: P1's entry waits, so the two calls overlap
        let first = s.spawn(|| h.entry_timeout(Duration::from_secs(2)));
        std::thread::sleep(Duration::from_millis(100));
        let second = s.spawn(|| h.entry_timeout(Duration::from_secs(2)));
        let second = second.join().expect("no panic");
        handles[0].exit().expect("P0 leaves");
        vec![first.join().expect("no panic"), second]
    });
    assert_eq!(results[0], Ok(()));
    assert_eq!(results[1], Err(RuntimeError::Call(CallError::Busy)));
    rt.shutdown();
    assert_eq!(rt.report().violations, 0);
}

/// The limit on a whole `cycle_pairs` call of the large runs: a deadlock fails the test
/// instead of hanging it (not a timing assertion: a run takes about a second).
const LARGE_LIMIT: Duration = Duration::from_secs(300);

/// Starts `procs` under the monitor of `inst`, runs `pairs` pairs on every process from its
/// own client thread, and checks the monitor, the pairs and the message count's lower bound.
fn run_large<A: CsObject>(inst: lkcs::Instance, procs: Vec<A>, pairs: usize, best: u64) {
    let n = procs.len();
    let mut rt = Runtime::start(
        procs,
        RuntimeConfig {
            monitor: Some(inst),
        },
    )
    .expect("start");
    assert_eq!(rt.len(), n);
    let handles = rt.take_handles().expect("handles");
    let done = cycle_pairs(&handles, pairs, Some(LARGE_LIMIT)).expect("every process completes");
    assert_eq!(done.len(), n);
    assert!(done.iter().all(|&d| d >= pairs), "{done:?}");
    drop(handles);
    rt.shutdown();
    let report = rt.report();
    assert!(report.monitored);
    assert_eq!(report.violations, 0, "{:?}", report.first_violations);
    assert!(report.state_changes >= (2 * pairs * n) as u64);
    assert!(report.messages >= best, "{} < {best}", report.messages);
}

/// 1,024 process threads (and 1,024 client threads): LMUTIN on torus:32x32 with l_i = 2
/// completes two pairs per process under the monitor, no bound ever broken.
#[test]
fn lmutin_on_1024_threads_is_safe_and_live() {
    let topo = Topology::torus(32, 32).expect("torus");
    let l = vec![2; 1024];
    let initial = Lmutin::instance(&topo, &l)
        .expect("instance")
        .find_safe_initial()
        .expect("safe initial");
    let (inst, procs) =
        Lmutin::system(&topo, &l, &initial, LmutinRules::CORRECTED).expect("system");
    // best case 3(|N_i|+1) = 15 messages per pair on a torus
    run_large(inst, procs, 2, 1024 * 2 * 15);
}

/// (l,k)-GCS on complete:256 (grid coterie, |Q| = 31, Maekawa as both `mx`, l = 64,
/// k = 192, half the processes in the CS) completes one pair per process under the monitor.
/// complete:1024 takes about 7 s on 2 cores (1.2 million messages), too long for a test: it
/// runs, with the same checks, in `examples/runtime_scaling.rs`.
#[test]
fn gcs_on_complete_256_is_safe_and_live() {
    let n = 256;
    let (inst, procs) = grid_gcs_system(n, (n / 4, 3 * n / 4), n / 2).expect("gcs system");
    // a pair costs at least a Request to each of the 31 quorum members (the simulator's
    // sequential best case is 16 per member)
    run_large(inst, procs, 1, 256 * 31);
}
