//! The cost of the [`Quota`] facade (docs/measurements/quota.md).
//!
//! One group, `quota_global_8_between_2_5`, one workload for every entry: 8 workers, each
//! running pairs (become active, do nothing, become inactive) until every worker has done
//! its share; a worker that has done its share keeps cycling, so nobody is left stuck at the
//! lower bound; then everything is stopped. Criterion's time is the time **per pair**
//! (`iter_custom`: the wall time of a run from the first spawn to the moment the last worker
//! completes its share, scaled by `iters / pairs completed`; building and shutting down the
//! system are outside the timer).
//!
//! - `quota`: `Quota::global(8).between(2, 5)` (GCS, grid coterie, CDC inside; members 0
//!   and 1 start active), `Member::enter` / `Member::exit`, ended by `Quota::shutdown`;
//! - `runtime`: the identical system built through the catalog ([`SystemSpec`], the spec
//!   `QuotaBuilder::plan` builds) on [`Runtime::start`] with the default configuration,
//!   `Handle::entry` / `Handle::exit`, ended by `Runtime::shutdown`;
//! - `mutex_condvar`: a hand-written global (l, k) counter (std `Mutex` + two `Condvar`s),
//!   the same 8 threads from the same start (2 active);
//! - `tokio_semaphore`: `tokio::sync::Semaphore` with 5 permits (the upper bound only: a
//!   semaphore cannot hold a lower bound), 8 tasks on a 2-worker multi-thread runtime,
//!   acquire then drop.
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
    Algorithm, CsObject, CsState, Handle, Instance, Member, Quota, QuotaError, Runtime,
    RuntimeConfig, RuntimeError, Sequence, SystemSpec, SystemVisitor, Topology, Variant,
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

/// Pairs per worker for `iters` pairs in all.
fn share(iters: u64) -> usize {
    (iters as usize).div_ceil(N).max(MIN_PAIRS)
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

/// `pairs` per worker on a fresh quota; also returns its message count.
fn run_quota(pairs: usize) -> (Run, u64) {
    let quota = build_quota();
    let workers: Vec<(Member, bool)> = quota
        .members()
        .into_iter()
        .map(|m| {
            let active = m.is_active();
            (m, active)
        })
        .collect();
    let run = drive(workers, pairs, quota_pair, || quota.shutdown());
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
        coterie: Some("grid".into()),
        mx: Some("cdc".into()),
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

/// `pairs` per worker on a fresh counter, workers 0 and 1 starting active as in the quota.
fn run_counter(pairs: usize) -> Run {
    let counter = Counter::new(L, (L, K));
    let workers: Vec<bool> = (0..N).map(|i| i < L).collect();
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

/// `pairs` per task: 8 tasks on `rt` sharing a 5-permit semaphore, acquire then drop, until
/// every task has done its share; then the semaphore is closed.
fn run_semaphore(rt: &tokio::runtime::Runtime, pairs: usize) -> Run {
    use std::sync::Arc;
    use tokio::sync::{Notify, Semaphore};
    rt.block_on(async {
        let sem = Arc::new(Semaphore::new(K));
        let remaining = Arc::new(AtomicUsize::new(N));
        let total = Arc::new(AtomicU64::new(0));
        let all_done = Arc::new(Notify::new());
        let start = Instant::now();
        let tasks: Vec<_> = (0..N)
            .map(|_| {
                let (sem, remaining, total, all_done) = (
                    sem.clone(),
                    remaining.clone(),
                    total.clone(),
                    all_done.clone(),
                );
                tokio::spawn(async move {
                    let mut done = 0;
                    while let Ok(permit) = sem.acquire().await {
                        drop(permit);
                        done += 1;
                        total.fetch_add(1, Ordering::Relaxed);
                        if done == pairs && remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
                            all_done.notify_one();
                        }
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
        sem.close();
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

    // Calibration: messages per pair of the quota and of the raw runtime.
    let (q, q_msgs) = run_quota(200);
    let (r, r_msgs) = run_runtime(&spec, 200);
    println!(
        "calibration (200 pairs per worker): quota {} pairs, {:.1} messages/pair, {:.1} µs/pair; runtime {} pairs, {:.1} messages/pair, {:.1} µs/pair",
        q.pairs,
        q_msgs as f64 / q.pairs as f64,
        q.elapsed.as_secs_f64() * 1e6 / q.pairs as f64,
        r.pairs,
        r_msgs as f64 / r.pairs as f64,
        r.elapsed.as_secs_f64() * 1e6 / r.pairs as f64,
    );

    let names = ["quota", "runtime", "mutex_condvar", "tokio_semaphore"];
    let mut tallies: Vec<Tally> = names.iter().map(|_| Tally::default()).collect();
    let mut g = c.benchmark_group("quota_global_8_between_2_5");
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(2))
        .measurement_time(Duration::from_secs(8));
    for (i, name) in names.iter().enumerate() {
        let tally = &mut tallies[i];
        g.bench_function(*name, |b| {
            b.iter_custom(|iters| {
                let pairs = share(iters);
                let run = match i {
                    0 => run_quota(pairs).0,
                    1 => run_runtime(&spec, pairs).0,
                    2 => run_counter(pairs),
                    _ => run_semaphore(&tokio_rt, pairs),
                };
                tally.add(run);
                run.scaled(iters)
            })
        });
    }
    g.finish();

    println!("summary over every run of each entry (warm-up included), time per pair:");
    let base = tallies[1].per_pair_us();
    for (name, t) in names.iter().zip(&tallies) {
        println!(
            "  {name:<16} {:>9.2} µs/pair over {:>8} pairs   {name}/runtime = {:.3}",
            t.per_pair_us(),
            t.pairs,
            t.per_pair_us() / base
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
