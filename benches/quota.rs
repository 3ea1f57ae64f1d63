//! The cost of the [`Quota`] facade (docs/measurements/quota.md).
//!
//! One group, `quota_pair`, measured in one run: for each case below, every entry runs the
//! same workload: each worker runs pairs (become active, do nothing, become inactive) until
//! every worker has done its share; a worker that has done its share keeps cycling, so
//! nobody is left stuck at a lower bound; then everything is stopped. Criterion's time is
//! the time **per pair** (`iter_custom`: the wall time of a run from the first spawn to the
//! moment the last worker completes its share, scaled by `iters / pairs completed`; building
//! and shutting down the system are outside the timer).
//!
//! Cases (see [`Case`]): `at_most_1_of_8` (8 workers, at most 1 active), `between_2_5_of_8`
//! (8 workers, 2 to 5 active), `ring_8_at_most_1` (a ring of 8, at most 1 active in each
//! member's closed neighbourhood), `alone_at_most_1_of_8` and `alone_between_2_5_of_8` (the
//! same quotas with one worker cycling and the other 7 members idle: uncontended).
//!
//! Entries:
//! - `quota`: the [`Quota`] of the case, `Member::enter` / `Member::exit`, ended by
//!   `Quota::shutdown`;
//! - `runtime` (`between_2_5_of_8` only): the identical system built through the catalog
//!   ([`SystemSpec`], the spec `QuotaBuilder::plan` builds) on [`Runtime::start`] with the
//!   default configuration, `Handle::entry` / `Handle::exit`, ended by `Runtime::shutdown`;
//! - `mutex_condvar`: a hand-written counter (std `Mutex` + `Condvar`s) keeping the same
//!   bounds, one thread per worker, same start;
//! - `tokio_semaphore`: `tokio::sync::Semaphore`, the upper bound only (a semaphore cannot
//!   hold a lower bound: it never blocks a release), one task per worker on a 2-worker
//!   multi-thread runtime (the semaphore's most favourable setting: acquiring is a future,
//!   not a parked thread), acquire then drop. For the ring, one 1-permit semaphore per
//!   closed neighbourhood, each worker acquiring those of its neighbourhood in id order.
//!
//! A second group, `quota_stall_report`, times how long a stalled call takes to return
//! `QuotaError::Stalled` (see `stall_bench`).
//!
//! Then, outside criterion, the quota's **utilization under saturation**: 8 workers that
//! always want to be active, each staying active for a fixed hold (0, 100 µs, 1 ms: a sleep)
//! and re-entering at once after leaving; a sampler reads every ~100 µs how many are active
//! as the workers see it: *working* (between `enter` returning and `exit` being called) and
//! *holding* (between `enter` returning and `exit` returning); mean, max and histogram
//! against k = 5, with the Mutex+Condvar counter under the same load for reference.

use criterion::{criterion_group, criterion_main, Criterion};
use lkcs::{
    cs::{CsObject, CsState, Sequence, Variant},
    runtime::{Handle, Runtime, RuntimeConfig, RuntimeError},
    Algorithm, Instance, Member, Quota, QuotaError, SystemSpec, SystemVisitor, Topology,
};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// Members (workers).
const N: usize = 8;
/// At least `L` active.
const L: usize = 2;
/// At most `K` active.
const K: usize = 5;
/// The fewest pairs per worker in one run (criterion's small warm-up batches are padded to
/// this, so thread spawning is amortized; the time is scaled to the pairs actually done).
const MIN_PAIRS: usize = 100;
/// A run that has not completed by then panics instead of hanging.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// One timed run.
#[derive(Clone, Copy, Debug)]
struct Run {
    /// From the first spawn to the moment the last worker completed its share.
    elapsed: Duration,
    /// Pairs completed by then, by all workers.
    pairs: u64,
}

impl Run {
    /// The time `iters` pairs take at this run's pace (what `iter_custom` returns).
    fn scaled(self, iters: u64) -> Duration {
        Duration::from_secs_f64(self.elapsed.as_secs_f64() * iters as f64 / self.pairs as f64)
    }
}

/// Pairs per worker for `iters` pairs in all among `workers`.
fn share(iters: u64, workers: usize) -> usize {
    (iters as usize).div_ceil(workers).max(MIN_PAIRS)
}

/// A case of the `quota_pair` group: a quota and the baselines keeping the same bounds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Case {
    /// `Quota::global(8).at_most(1)` (the migrating controller CDC), 8 workers.
    AtMost1,
    /// `Quota::global(8).between(2, 5)` (GCS, grid coterie, CDC inside; members 0 and 1
    /// start active), 8 workers.
    Between,
    /// `Quota::local(ring 8).at_most(1)` (1-LMUTEX: at most 1 active in each closed
    /// neighbourhood of 3), 8 workers.
    Ring,
    /// `Quota::global(8).at_most(1)`, member 0 cycling alone, the other 7 idle.
    AloneAtMost1,
    /// `Quota::global(8).between(2, 5)`, member 7 cycling alone (3 active, then 2), the
    /// other 7 idle.
    AloneBetween,
}

impl Case {
    const ALL: [Case; 5] = [
        Case::AtMost1,
        Case::Between,
        Case::Ring,
        Case::AloneAtMost1,
        Case::AloneBetween,
    ];

    fn name(self) -> &'static str {
        match self {
            Case::AtMost1 => "at_most_1_of_8",
            Case::Between => "between_2_5_of_8",
            Case::Ring => "ring_8_at_most_1",
            Case::AloneAtMost1 => "alone_at_most_1_of_8",
            Case::AloneBetween => "alone_between_2_5_of_8",
        }
    }

    fn entries(self) -> &'static [&'static str] {
        if self == Case::Between {
            &["quota", "runtime", "mutex_condvar", "tokio_semaphore"]
        } else {
            &["quota", "mutex_condvar", "tokio_semaphore"]
        }
    }

    /// The member that cycles alone, if the case is uncontended.
    fn alone(self) -> Option<usize> {
        match self {
            Case::AloneAtMost1 => Some(0),
            Case::AloneBetween => Some(N - 1),
            _ => None,
        }
    }

    /// How many workers cycle.
    fn workers(self) -> usize {
        if self.alone().is_some() {
            1
        } else {
            N
        }
    }

    fn quota(self) -> Quota {
        match self {
            Case::Between | Case::AloneBetween => build_quota(),
            Case::AtMost1 | Case::AloneAtMost1 => {
                let quota = Quota::global(N).at_most(1).build().expect("quota");
                assert_eq!(quota.algorithm(), Algorithm::Cdc);
                quota
            }
            Case::Ring => {
                let ring = Topology::ring(N).expect("ring");
                let quota = Quota::local(ring).at_most(1).build().expect("quota");
                assert_eq!(quota.algorithm(), Algorithm::Lmutex);
                quota
            }
        }
    }
}

/// Runs `pair` on every worker, each in its own scoped thread, until every worker has
/// completed `pairs` (the finished ones cycling on meanwhile); then calls `stop`, which must
/// make every `pair` call return `false` (now or at its next call).
fn drive<W: Send>(
    workers: Vec<W>,
    pairs: usize,
    pair: impl Fn(&mut W) -> bool + Sync,
    stop: impl FnOnce(),
) -> Run {
    let remaining = AtomicUsize::new(workers.len());
    let total = AtomicU64::new(0);
    let (done_tx, done_rx) = mpsc::channel::<()>();
    std::thread::scope(|s| {
        let start = Instant::now();
        for mut w in workers {
            let (pair, remaining, total, done_tx) = (&pair, &remaining, &total, done_tx.clone());
            s.spawn(move || {
                let mut done = 0;
                while pair(&mut w) {
                    done += 1;
                    total.fetch_add(1, Ordering::Relaxed);
                    if done == pairs && remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
                        let _ = done_tx.send(());
                    }
                }
            });
        }
        drop(done_tx);
        let finished = done_rx.recv_timeout(RUN_LIMIT);
        let run = Run {
            elapsed: start.elapsed(),
            pairs: total.load(Ordering::SeqCst),
        };
        stop();
        assert!(
            finished.is_ok(),
            "a run did not complete within {RUN_LIMIT:?}: {finished:?}"
        );
        run
    })
}

/// The quota under test.
fn build_quota() -> Quota {
    let quota = Quota::global(N).between(L, K).build().expect("quota");
    assert_eq!(quota.algorithm(), Algorithm::Gcs);
    quota
}

/// One pair on a quota member, in the order its start dictates (members 0 and 1 start
/// active: exit, then enter); `false` once the quota has shut down.
fn quota_pair((m, active_first): &mut (Member, bool)) -> bool {
    let r = if *active_first {
        m.exit().and_then(|()| m.enter())
    } else {
        m.enter().and_then(|()| m.exit())
    };
    moved(m, r)
}

/// `pairs` per worker on a fresh quota of `case`; also returns its message count. In an
/// uncontended case the idle members stay alive (not dropped) until the run is over.
fn run_quota(case: Case, pairs: usize) -> (Run, u64) {
    let quota = case.quota();
    let mut workers: Vec<(Member, bool)> = quota
        .members()
        .into_iter()
        .map(|m| {
            let active = m.is_active();
            (m, active)
        })
        .collect();
    let mut idle = Vec::new();
    if let Some(w) = case.alone() {
        let alone = workers.remove(w);
        idle = std::mem::replace(&mut workers, vec![alone]);
    }
    let run = drive(workers, pairs, quota_pair, || quota.shutdown());
    drop(idle);
    (run, quota.report().messages)
}

/// The system `Quota::global(8).between(2, 5)` builds, spelled out for the catalog.
fn raw_spec() -> SystemSpec {
    SystemSpec {
        algorithm: Algorithm::Gcs,
        topology: Topology::complete(N).expect("topology"),
        l: Some(L),
        k: Some(K),
        bounds: None,
        initial: Some(
            (0..N)
                .map(|i| if i < L { CsState::InCs } else { CsState::OutCs })
                .collect(),
        ),
        variant: Variant::Corrected,
        leader: None,
        coterie: Some(lkcs::quota::QuorumSystem::Grid),
        mx: Some(lkcs::quota::InnerMutex::Cdc),
        maxreq: None,
        migrate_after: None,
    }
}

/// Starts the raw runtime on the built system and runs `pairs` per process.
struct RawRun {
    pairs: usize,
}

impl SystemVisitor for RawRun {
    type Output = (Run, u64);

    fn visit<A: CsObject>(
        self,
        _instance: &Instance,
        _initial: &[CsState],
        procs: Vec<A>,
    ) -> Self::Output {
        let mut rt = Runtime::start(procs, RuntimeConfig::default()).expect("runtime");
        let handles = rt.take_handles().expect("handles");
        let workers: Vec<(&Handle<A>, Sequence)> = handles
            .iter()
            .map(|h| (h, Sequence::leaving(h.state())))
            .collect();
        let pair = |(h, first): &mut (&Handle<A>, Sequence)| {
            let r = match first {
                Sequence::Exit => h.exit().and_then(|()| h.entry()),
                Sequence::Entry => h.entry().and_then(|()| h.exit()),
            };
            match r {
                Ok(()) => true,
                Err(RuntimeError::Shutdown) => false,
                Err(e) => panic!("{}: {e}", h.id()),
            }
        };
        let run = drive(workers, self.pairs, pair, || rt.shutdown());
        (run, rt.report().messages)
    }
}

/// `pairs` per process on a fresh raw runtime; also returns its message count.
fn run_runtime(spec: &SystemSpec, pairs: usize) -> (Run, u64) {
    spec.build(RawRun { pairs }).expect("system")
}

/// A global (l, k) counter by hand: `enter` waits while `k` are active, `exit` while only
/// `l` are; one condition variable per wait.
struct Counter {
    /// (active, stopped)
    state: Mutex<(usize, bool)>,
    can_enter: Condvar,
    can_exit: Condvar,
    l: usize,
    k: usize,
}

impl Counter {
    fn new(initially_active: usize, (l, k): (usize, usize)) -> Counter {
        Counter {
            state: Mutex::new((initially_active, false)),
            can_enter: Condvar::new(),
            can_exit: Condvar::new(),
            l,
            k,
        }
    }

    /// `false` once stopped.
    fn enter(&self) -> bool {
        let mut st = self.state.lock().expect("counter");
        while st.0 == self.k && !st.1 {
            st = self.can_enter.wait(st).expect("counter");
        }
        if st.1 {
            return false;
        }
        st.0 += 1;
        drop(st);
        self.can_exit.notify_one();
        true
    }

    /// `false` once stopped.
    fn exit(&self) -> bool {
        let mut st = self.state.lock().expect("counter");
        while st.0 == self.l && !st.1 {
            st = self.can_exit.wait(st).expect("counter");
        }
        if st.1 {
            return false;
        }
        st.0 -= 1;
        drop(st);
        self.can_enter.notify_one();
        true
    }

    fn stop(&self) {
        self.state.lock().expect("counter").1 = true;
        self.can_enter.notify_all();
        self.can_exit.notify_all();
    }
}

/// A local upper bound by hand, under one lock: member `i` may become active while every
/// closed neighbourhood it belongs to has fewer than `k` active; leaving never waits.
struct LocalCounter {
    /// (active, stopped)
    state: Mutex<(Vec<bool>, bool)>,
    changed: Condvar,
    closed: Vec<Vec<usize>>,
    k: usize,
}

impl LocalCounter {
    fn new(topology: &Topology, k: usize) -> LocalCounter {
        let closed = topology
            .processes()
            .map(|p| topology.closed(p).iter().map(|q| q.index()).collect())
            .collect();
        LocalCounter {
            state: Mutex::new((vec![false; topology.len()], false)),
            changed: Condvar::new(),
            closed,
            k,
        }
    }

    /// `false` once stopped.
    fn enter(&self, i: usize) -> bool {
        let full = |active: &[bool]| {
            self.closed[i]
                .iter()
                .any(|&j| self.closed[j].iter().filter(|&&x| active[x]).count() >= self.k)
        };
        let mut st = self.state.lock().expect("counter");
        while !st.1 && full(&st.0) {
            st = self.changed.wait(st).expect("counter");
        }
        if st.1 {
            return false;
        }
        st.0[i] = true;
        true
    }

    /// `false` once stopped.
    fn exit(&self, i: usize) -> bool {
        let mut st = self.state.lock().expect("counter");
        if st.1 {
            return false;
        }
        st.0[i] = false;
        drop(st);
        self.changed.notify_all();
        true
    }

    fn stop(&self) {
        self.state.lock().expect("counter").1 = true;
        self.changed.notify_all();
    }
}

/// `pairs` per worker on a fresh counter keeping the bounds of `case`, starting as its
/// quota does (for 2..=5, workers 0 and 1 active).
fn run_counter(case: Case, pairs: usize) -> Run {
    if case == Case::Ring {
        let counter = LocalCounter::new(&Topology::ring(N).expect("ring"), 1);
        let pair = |i: &mut usize| counter.enter(*i) && counter.exit(*i);
        return drive((0..N).collect(), pairs, pair, || counter.stop());
    }
    let counter = match case {
        Case::Between | Case::AloneBetween => Counter::new(L, (L, K)),
        _ => Counter::new(0, (0, 1)),
    };
    let workers: Vec<bool> = match case {
        Case::Between => (0..N).map(|i| i < L).collect(),
        _ => vec![false; case.workers()],
    };
    let pair = |active_first: &mut bool| {
        let moves = if *active_first {
            [Counter::exit, Counter::enter]
        } else {
            [Counter::enter, Counter::exit]
        };
        moves.iter().all(|m| m(&counter))
    };
    drive(workers, pairs, pair, || counter.stop())
}

/// The semaphores standing for `case`'s upper bound: (permits of each semaphore, the
/// semaphores each task acquires, in that order).
fn semaphores(case: Case) -> (Vec<usize>, Vec<Vec<usize>>) {
    match case {
        Case::AtMost1 | Case::AloneAtMost1 => (vec![1], vec![vec![0]; case.workers()]),
        Case::Between | Case::AloneBetween => (vec![K], vec![vec![0]; case.workers()]),
        Case::Ring => {
            let ring = Topology::ring(N).expect("ring");
            let uses = ring
                .processes()
                .map(|p| ring.closed(p).iter().map(|q| q.index()).collect())
                .collect();
            (vec![1; N], uses)
        }
    }
}

/// `pairs` per task: one task per worker of `case` on `rt`, each acquiring a permit of every
/// semaphore it uses (in id order, so no two tasks wait on each other in a cycle), then
/// dropping them, until every task has done its share; then the semaphores are closed.
fn run_semaphore(rt: &tokio::runtime::Runtime, case: Case, pairs: usize) -> Run {
    use std::sync::Arc;
    use tokio::sync::{Notify, Semaphore};
    let (permits, uses) = semaphores(case);
    rt.block_on(async {
        let sems: Arc<Vec<Semaphore>> =
            Arc::new(permits.iter().map(|&p| Semaphore::new(p)).collect());
        let remaining = Arc::new(AtomicUsize::new(uses.len()));
        let total = Arc::new(AtomicU64::new(0));
        let all_done = Arc::new(Notify::new());
        let start = Instant::now();
        let tasks: Vec<_> = uses
            .into_iter()
            .map(|used| {
                let (sems, remaining, total, all_done) = (
                    sems.clone(),
                    remaining.clone(),
                    total.clone(),
                    all_done.clone(),
                );
                tokio::spawn(async move {
                    let mut done = 0;
                    let mut count = || {
                        done += 1;
                        total.fetch_add(1, Ordering::Relaxed);
                        if done == pairs && remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
                            all_done.notify_one();
                        }
                    };
                    if let [only] = used[..] {
                        while let Ok(permit) = sems[only].acquire().await {
                            drop(permit);
                            count();
                        }
                        return;
                    }
                    let mut held = Vec::with_capacity(used.len());
                    loop {
                        for &j in &used {
                            match sems[j].acquire().await {
                                Ok(permit) => held.push(permit),
                                Err(_) => return,
                            }
                        }
                        held.clear();
                        count();
                    }
                })
            })
            .collect();
        tokio::time::timeout(RUN_LIMIT, all_done.notified())
            .await
            .expect("a semaphore run did not complete in time");
        let run = Run {
            elapsed: start.elapsed(),
            pairs: total.load(Ordering::SeqCst),
        };
        for sem in sems.iter() {
            sem.close();
        }
        for t in tasks {
            t.await.expect("task");
        }
        run
    })
}

/// Per-pair time of every run of one entry (warm-up included), for the summary.
#[derive(Default)]
struct Tally {
    elapsed: Duration,
    pairs: u64,
}

impl Tally {
    fn add(&mut self, run: Run) {
        self.elapsed += run.elapsed;
        self.pairs += run.pairs;
    }

    fn per_pair_us(&self) -> f64 {
        self.elapsed.as_secs_f64() * 1e6 / self.pairs as f64
    }
}

fn quota_bench(c: &mut Criterion) {
    let spec = raw_spec();
    let tokio_rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("tokio runtime");

    // Calibration: messages per pair of each quota, and of the raw runtime.
    println!("calibration (200 pairs per worker):");
    for case in Case::ALL {
        let (q, q_msgs) = run_quota(case, 200);
        println!(
            "  {:<24} quota   {:>5} pairs, {:>5.1} messages/pair, {:>7.1} µs/pair",
            case.name(),
            q.pairs,
            q_msgs as f64 / q.pairs as f64,
            q.elapsed.as_secs_f64() * 1e6 / q.pairs as f64,
        );
    }
    let (r, r_msgs) = run_runtime(&spec, 200);
    println!(
        "  {:<24} runtime {:>5} pairs, {:>5.1} messages/pair, {:>7.1} µs/pair",
        Case::Between.name(),
        r.pairs,
        r_msgs as f64 / r.pairs as f64,
        r.elapsed.as_secs_f64() * 1e6 / r.pairs as f64,
    );

    let mut tallies: Vec<(Case, &str, Tally)> = Case::ALL
        .iter()
        .flat_map(|&case| {
            case.entries()
                .iter()
                .map(move |&e| (case, e, Tally::default()))
        })
        .collect();
    let mut g = c.benchmark_group("quota_pair");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    for (case, entry, tally) in &mut tallies {
        let (case, entry) = (*case, *entry);
        g.bench_function(format!("{}/{entry}", case.name()), |b| {
            b.iter_custom(|iters| {
                let pairs = share(iters, case.workers());
                let run = match entry {
                    "quota" => run_quota(case, pairs).0,
                    "runtime" => run_runtime(&spec, pairs).0,
                    "mutex_condvar" => run_counter(case, pairs),
                    _ => run_semaphore(&tokio_rt, case, pairs),
                };
                tally.add(run);
                run.scaled(iters)
            })
        });
    }
    g.finish();

    println!("summary over every run of each entry (warm-up included), time per pair:");
    for (case, entry, t) in tallies.iter().filter(|(_, _, t)| t.pairs > 0) {
        let quota = tallies
            .iter()
            .find(|(c, e, _)| c == case && *e == "quota")
            .map(|(_, _, t)| t.per_pair_us())
            .expect("quota entry");
        println!(
            "  {:<24} {entry:<16} {:>10.3} µs/pair over {:>9} pairs   quota/{entry} = {:.1}",
            case.name(),
            t.per_pair_us(),
            t.pairs,
            quota / t.per_pair_us()
        );
    }

    utilization();
}

/// How long each utilization run lasts.
const UTILIZATION_RUN: Duration = Duration::from_secs(2);
/// How often the sampler reads the counts.
const SAMPLE_EVERY: Duration = Duration::from_micros(100);
/// How long a worker stays active in the utilization runs (a sleep; zero: not at all).
const HOLDS: [Duration; 3] = [
    Duration::ZERO,
    Duration::from_micros(100),
    Duration::from_millis(1),
];

/// Mean, max and histogram of one sampled count.
#[derive(Default)]
struct Stat {
    sum: usize,
    max: usize,
    histogram: [usize; N + 1],
}

impl Stat {
    fn add(&mut self, c: usize) {
        self.sum += c;
        self.max = self.max.max(c);
        self.histogram[c.min(N)] += 1;
    }

    fn describe(&self, samples: usize) -> String {
        let mean = self.sum as f64 / samples as f64;
        let shares: Vec<String> = self
            .histogram
            .iter()
            .enumerate()
            .filter(|&(_, &h)| h > 0)
            .map(|(c, &h)| format!("{c}: {:.1} %", 100.0 * h as f64 / samples as f64))
            .collect();
        format!(
            "mean {mean:.2} of k = {K} ({:.0} %), max {} [{}]",
            100.0 * mean / K as f64,
            self.max,
            shares.join(", ")
        )
    }
}

/// What the workers of a utilization run count.
struct Gauges {
    /// Between `enter` returning and `exit` being called.
    working: AtomicUsize,
    /// Between `enter` returning and `exit` returning (the exit's protocol and its wait for
    /// the lower bound included).
    holding: AtomicUsize,
    /// Pairs completed.
    pairs: AtomicU64,
}

/// Utilization under saturation: every worker (`(worker, initially active)`) stays active
/// for `hold`, leaves, and re-enters at once; a sampler reads the [`Gauges`] every
/// [`SAMPLE_EVERY`] for [`UTILIZATION_RUN`], then `stop` makes every `enter` / `exit`
/// return `false`. Prints one line.
fn saturate<W: Send>(
    what: &str,
    hold: Duration,
    workers: Vec<(W, bool)>,
    (enter, exit): (
        impl Fn(&mut W) -> bool + Sync,
        impl Fn(&mut W) -> bool + Sync,
    ),
    stop: impl FnOnce(),
) {
    let initially = workers.iter().filter(|(_, active)| *active).count();
    let gauges = Gauges {
        working: AtomicUsize::new(initially),
        holding: AtomicUsize::new(initially),
        pairs: AtomicU64::new(0),
    };
    let (mut working, mut holding, mut samples) = (Stat::default(), Stat::default(), 0);
    std::thread::scope(|s| {
        for (mut w, mut active) in workers {
            let (g, enter, exit) = (&gauges, &enter, &exit);
            s.spawn(move || loop {
                if active {
                    if !hold.is_zero() {
                        std::thread::sleep(hold);
                    }
                    g.working.fetch_sub(1, Ordering::SeqCst);
                    if !exit(&mut w) {
                        return;
                    }
                    g.holding.fetch_sub(1, Ordering::SeqCst);
                    g.pairs.fetch_add(1, Ordering::Relaxed);
                }
                if !enter(&mut w) {
                    return;
                }
                g.holding.fetch_add(1, Ordering::SeqCst);
                g.working.fetch_add(1, Ordering::SeqCst);
                active = true;
            });
        }
        let start = Instant::now();
        while start.elapsed() < UTILIZATION_RUN {
            working.add(gauges.working.load(Ordering::SeqCst));
            holding.add(gauges.holding.load(Ordering::SeqCst));
            samples += 1;
            std::thread::sleep(SAMPLE_EVERY);
        }
        stop();
    });
    println!(
        "utilization {what:<13} hold {:>4} µs: {samples} samples, {:.0} pairs/s\n  working (enter returned, exit not called):   {}\n  holding (enter returned, exit not returned): {}",
        hold.as_micros(),
        gauges.pairs.load(Ordering::SeqCst) as f64 / UTILIZATION_RUN.as_secs_f64(),
        working.describe(samples),
        holding.describe(samples),
    );
}

/// `Ok` → `true`, [`QuotaError::Shutdown`] → `false`, anything else panics.
fn moved(m: &Member, r: Result<(), QuotaError>) -> bool {
    match r {
        Ok(()) => true,
        Err(QuotaError::Shutdown) => false,
        Err(e) => panic!("member {}: {e}", m.id()),
    }
}

/// The quota's utilization under saturation, for each of [`HOLDS`], with the hand-written
/// counter under the same load for reference.
fn utilization() {
    for hold in HOLDS {
        let quota = build_quota();
        let members: Vec<(Member, bool)> = quota
            .members()
            .into_iter()
            .map(|m| {
                let active = m.is_active();
                (m, active)
            })
            .collect();
        let enter = |m: &mut Member| {
            let r = m.enter();
            moved(m, r)
        };
        let exit = |m: &mut Member| {
            let r = m.exit();
            moved(m, r)
        };
        saturate("quota", hold, members, (enter, exit), || quota.shutdown());

        let counter = Counter::new(L, (L, K));
        let workers: Vec<((), bool)> = (0..N).map(|i| ((), i < L)).collect();
        saturate(
            "mutex_condvar",
            hold,
            workers,
            (|_: &mut ()| counter.enter(), |_: &mut ()| counter.exit()),
            || counter.stop(),
        );
    }
}

/// How long a stalled call takes to return [`QuotaError::Stalled`]: `Quota::global(2)
/// .between(1, 2)` (MUTIN(1); member 0 starts active), member 1 dropped (it never moves
/// again), then member 0's `exit`, which the lower bound holds for ever. Timed from the call
/// to its return, for the default watchdog interval and a shorter one.
fn stall_bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("quota_stall_report");
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(8));
    for interval_ms in [200u64, 50] {
        let interval = Duration::from_millis(interval_ms);
        g.bench_function(format!("stall_check_{interval_ms}ms"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let quota = Quota::global(2)
                        .between(1, 2)
                        .stall_check(interval)
                        .build()
                        .expect("a valid quota");
                    let mut members = quota.members();
                    drop(members.pop()); // member 1
                    let start = Instant::now();
                    let r = members[0].exit();
                    total += start.elapsed();
                    assert!(matches!(r, Err(QuotaError::Stalled(_))), "{r:?}");
                }
                total
            })
        });
    }
    g.finish();
}

criterion_group!(benches, quota_bench, stall_bench);
criterion_main!(benches);
