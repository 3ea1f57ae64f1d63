//! Runtime speed (DESIGN.md §4): per topology, in one group,
//! - `runtime_lmutin`: the thread runtime running LMUTIN, every process cycling Exit/Entry
//!   pairs (throughput: messages of one iteration, measured with the runtime's counter);
//! - `crossbeam_relay`: the ceiling for message passing at the same thread count and pattern:
//!   per process a relay thread with a crossbeam mailbox and a client thread that asks it to
//!   exit and to enter, as an application drives a [`Handle`]; per pair, Request to the
//!   closed neighbourhood, a Grant back from each, then Release — the same 3(|N_i|+1) messages
//!   per pair as LMUTIN's best case, no algorithm logic, never a wait for a permission
//!   (throughput: messages);
//! - `crossbeam_relay_pipelined`: the same messages with no client threads (half the threads,
//!   no hand-off): the raw channel ceiling, for reference;
//! - `parking_lot_counter`: a Mutex+Condvar global (l, k) counter with as many worker threads,
//!   what a user would write by hand for a global quota (throughput: pairs).
//!
//! The `gcs_complete_16_grid` group does the same for (l,k)-GCS (l = 4, k = 12, grid coterie,
//! Maekawa as `mx`) on complete:16: `runtime_gcs` (throughput in messages and, as a second
//! entry, in pairs), the relays with the same thread count and the same 3|Q_i| Request / Grant /
//! Release messages per pair to the quorum Q_i (Maekawa's best case), and the counter with the
//! same (l, k) and the same initial configuration.
//!
//! The `lkcs_torus_4x4_l0_k4` group does the same for LKCS on torus:4x4 with l_i = 0, k_i = 4
//! (the paper's single leader, chosen automatically; k − l = 4, so the tightened range near
//! it, 1..=3, leaves room for normal moves and the simulator completes every seed on it):
//! `runtime_lkcs` (messages and pairs), the relays with the same thread count and LKCS's best
//! case of 6(|N_i|+1) messages per pair (Request, Grant, Release to the closed neighbourhood
//! for the exit *and* for the entry, one round per permission type, so both the exit and the
//! entry wait for the Grants), and the counter with l = 4, k = 12 from LKCS's start (8 in the
//! CS). Its clients do not stop after their pairs: an LKCS process that stops can leave a
//! neighbour unable to move within l_i..k_i for good, and a stopped leader no longer resolves
//! deadlocks (tried with clients that stop after 200 pairs, as in the other groups: the first
//! iteration left 14 of the 16 processes blocked). So an iteration runs
//! [`lkcs::runtime::cycle_pairs`]: every process cycles until every process has done `PAIRS` (about a
//! quarter more pairs than n × `PAIRS` in all; the pairs and messages per iteration are
//! measured, not assumed), with a 60 s limit per iteration that panics instead of hanging if
//! the algorithm ever deadlocks.
//!
//! Compare messages/s of the runtime and `crossbeam_relay` (the ratio is what matters, not
//! absolute times). The pairs and messages of one runtime iteration are printed before each
//! group.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use lkcs::{
    algo::lkcs::{Leaders, Lkcs, LkcsRules},
    algo::lmutin::{Lmutin, LmutinRules},
    algo::mutin::{grid_gcs_system, quorums_of},
    cs::{CsObject, CsState, Sequence},
    quorum::Coterie,
    runtime::{cycle_pairs, Handle, Runtime, RuntimeConfig},
    Topology,
};
use parking_lot::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Pairs per process in one iteration.
const PAIRS: usize = 200;

fn lmutin_runtime(topo: &Topology, l: usize) -> Runtime<Lmutin> {
    let n = topo.len();
    let inst = Lmutin::instance(topo, &vec![l; n]).expect("instance");
    let initial = inst.find_safe_initial().expect("safe initial");
    let (_, procs) =
        Lmutin::system(topo, &vec![l; n], &initial, LmutinRules::CORRECTED).expect("system");
    Runtime::start(procs, RuntimeConfig::default()).expect("start")
}

/// (l,k)-GCS on complete:`n` with the grid coterie and Maekawa as both `mx` objects; the
/// first `n / 2` processes start in the CS.
fn gcs_runtime(n: usize, l: usize, k: usize) -> Runtime<impl CsObject> {
    let (_, procs) = grid_gcs_system(n, (l, k), n / 2).expect("gcs system");
    Runtime::start(procs, RuntimeConfig::default()).expect("start")
}

/// LKCS on `topo` with uniform bounds (`l`, `k`), the paper's single leader chosen
/// automatically, and the start `Lkcs::build` finds; returns the runtime and how many
/// processes start in the CS.
fn lkcs_runtime(topo: &Topology, l: usize, k: usize) -> (Runtime<Lkcs>, usize) {
    let n = topo.len();
    let inst = Lkcs::instance(topo, &vec![l; n], &vec![k; n]).expect("instance");
    let sys = Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::CORRECTED).expect("system");
    let in_cs = sys.initial.iter().filter(|&&s| s == CsState::InCs).count();
    let rt = Runtime::start(sys.procs, RuntimeConfig::default()).expect("start");
    (rt, in_cs)
}

/// How the clients run one iteration.
#[derive(Clone, Copy, Debug)]
enum Drive {
    /// [`run_pairs`]: every client runs exactly `PAIRS` pairs and stops.
    Fixed,
    /// [`cycle_pairs`]: every client cycles until every process has run `PAIRS` pairs.
    UntilAll,
}

/// The limit on one [`Drive::UntilAll`] iteration (LKCS on torus:4x4: 0.2–0.3 s on the 2-core
/// machine, the slowest of 400 iterations 0.8 s while another build ran).
const ITERATION_LIMIT: Duration = Duration::from_secs(60);

/// Runs one iteration; returns the pairs completed.
fn iterate<A: CsObject>(handles: &[Handle<A>], drive: Drive) -> u64 {
    match drive {
        Drive::Fixed => {
            run_pairs(handles);
            (handles.len() * PAIRS) as u64
        }
        Drive::UntilAll => {
            let done = cycle_pairs(handles, PAIRS, Some(ITERATION_LIMIT)).unwrap_or_else(|e| {
                panic!("an iteration did not complete within {ITERATION_LIMIT:?}: {e}")
            });
            done.iter().sum::<usize>() as u64
        }
    }
}

/// Every client runs `PAIRS` pairs in the order its state dictates, so each process ends an
/// iteration in the state it started it in. LMUTIN: every process starts and ends in the CS
/// (the safe start `find_safe_initial` picks), and an LMUTIN process in the CS holds no
/// permission, so a client that finishes early holds nobody back. GCS (l = n/4, k = 3n/4,
/// half the processes in the CS): the processes still running can always move, since the
/// finished ones sit at their initial states, n/2 in the CS in all. Not for LKCS (see
/// [`Drive::UntilAll`]).
fn run_pairs<A: CsObject>(handles: &[Handle<A>]) {
    std::thread::scope(|s| {
        for h in handles {
            s.spawn(move || {
                let first = Sequence::leaving(h.state());
                for _ in 0..PAIRS {
                    let ok = h.run(first, None).and_then(|()| h.run(first.flip(), None));
                    assert!(ok.is_ok(), "{}: {ok:?}", h.id());
                }
            });
        }
    });
}

/// The messages of one pair in the relays, to and from every peer.
#[derive(Clone, Copy, Debug)]
enum Pairing {
    /// The exit sends Request and waits for every Grant; the entry sends Release and waits
    /// for nothing: 3 messages per peer (LMUTIN's and Maekawa's best case).
    OneRound,
    /// The exit and the entry each send Request, wait for every Grant, then send Release:
    /// 6 messages per peer (LKCS's best case: one round per permission type).
    TwoRounds,
}

impl Pairing {
    /// Request/Grant/Release rounds per pair.
    fn rounds(self) -> usize {
        match self {
            Pairing::OneRound => 1,
            Pairing::TwoRounds => 2,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum RelayMsg {
    Request(usize),
    Grant,
    Release,
    /// A client command: start the sequence.
    Begin(Sequence),
    Stop,
}

/// One iteration of the relay with client threads: per process, a relay thread owning a
/// mailbox and a client thread that, `PAIRS` times, asks it to exit (answered once every
/// member of the closed neighbourhood granted) and to enter (answered at once with
/// [`Pairing::OneRound`], once every member granted with [`Pairing::TwoRounds`]), waiting
/// for each answer as a [`Handle`] caller does.
fn relay(closed: &[Vec<usize>], pairing: Pairing) {
    let n = closed.len();
    let (txs, rxs): (Vec<Sender<RelayMsg>>, Vec<Receiver<RelayMsg>>) =
        (0..n).map(|_| unbounded()).unzip();
    let (finished_tx, finished_rx) = unbounded::<()>();
    std::thread::scope(|s| {
        for (i, rx) in rxs.into_iter().enumerate() {
            let (txs, mine) = (&txs, &closed[i]);
            let (done_tx, done_rx) = bounded::<()>(1);
            s.spawn(move || {
                let send = |to: usize, m: RelayMsg| {
                    let _ = txs[to].send(m);
                };
                let mut grants = 0;
                while let Ok(m) = rx.recv() {
                    match (m, pairing) {
                        (RelayMsg::Begin(Sequence::Entry), Pairing::OneRound) => {
                            mine.iter().for_each(|&q| send(q, RelayMsg::Release));
                            let _ = done_tx.send(());
                        }
                        (RelayMsg::Begin(_), _) => {
                            grants = 0;
                            mine.iter().for_each(|&q| send(q, RelayMsg::Request(i)));
                        }
                        (RelayMsg::Request(from), _) => send(from, RelayMsg::Grant),
                        (RelayMsg::Grant, _) => {
                            grants += 1;
                            if grants == mine.len() {
                                if let Pairing::TwoRounds = pairing {
                                    mine.iter().for_each(|&q| send(q, RelayMsg::Release));
                                }
                                let _ = done_tx.send(());
                            }
                        }
                        (RelayMsg::Release, _) => {}
                        (RelayMsg::Stop, _) => break,
                    }
                }
            });
            let (me, finished) = (txs[i].clone(), finished_tx.clone());
            s.spawn(move || {
                for _ in 0..PAIRS {
                    for seq in [Sequence::Exit, Sequence::Entry] {
                        let _ = me.send(RelayMsg::Begin(seq));
                        let _ = done_rx.recv();
                    }
                }
                let _ = finished.send(());
            });
        }
        // a relay thread keeps answering its neighbours until every client is done
        for _ in 0..n {
            let _ = finished_rx.recv();
        }
        for tx in &txs {
            let _ = tx.send(RelayMsg::Stop);
        }
    });
}

/// One iteration of the pipelined relay: the same messages, no client threads; every relay
/// thread runs `PAIRS` × [`Pairing::rounds`] Request/Grant/Release rounds back to back.
fn relay_pipelined(closed: &[Vec<usize>], pairing: Pairing) {
    let n = closed.len();
    let (txs, rxs): (Vec<Sender<RelayMsg>>, Vec<Receiver<RelayMsg>>) =
        (0..n).map(|_| unbounded()).unzip();
    let (done_tx, done_rx) = unbounded::<()>();
    std::thread::scope(|s| {
        for (i, rx) in rxs.into_iter().enumerate() {
            let (txs, done_tx, mine) = (&txs, done_tx.clone(), &closed[i]);
            s.spawn(move || {
                let send = |to: usize, m: RelayMsg| {
                    let _ = txs[to].send(m);
                };
                let mut remaining = PAIRS * pairing.rounds();
                let mut grants = 0;
                mine.iter().for_each(|&q| send(q, RelayMsg::Request(i)));
                while let Ok(m) = rx.recv() {
                    match m {
                        RelayMsg::Request(from) => send(from, RelayMsg::Grant),
                        RelayMsg::Grant => {
                            grants += 1;
                            if grants == mine.len() {
                                grants = 0;
                                mine.iter().for_each(|&q| send(q, RelayMsg::Release));
                                remaining -= 1;
                                if remaining > 0 {
                                    mine.iter().for_each(|&q| send(q, RelayMsg::Request(i)));
                                } else {
                                    let _ = done_tx.send(());
                                }
                            }
                        }
                        RelayMsg::Release | RelayMsg::Begin(_) => {}
                        RelayMsg::Stop => break,
                    }
                }
            });
        }
        for _ in 0..n {
            let _ = done_rx.recv();
        }
        for tx in &txs {
            let _ = tx.send(RelayMsg::Stop);
        }
    });
}

/// A global quota by hand: between `l` and `k` of the `n` workers in the CS, the first
/// `initially_in` of them in it at the start; every worker runs `PAIRS` pairs in the order its
/// state dictates. `k = n` is the lower bound alone (as with LMUTIN).
fn counter(n: usize, (l, k): (usize, usize), initially_in: usize) {
    // one condition variable per wait, so an exit wakes only entries and the reverse
    let (count, can_exit, can_enter) = (Mutex::new(initially_in), Condvar::new(), Condvar::new());
    std::thread::scope(|s| {
        for w in 0..n {
            let (count, can_exit, can_enter) = (&count, &can_exit, &can_enter);
            s.spawn(move || {
                let exit = || {
                    let mut c = count.lock();
                    while *c <= l {
                        can_exit.wait(&mut c);
                    }
                    *c -= 1;
                    drop(c);
                    can_enter.notify_all();
                };
                let entry = || {
                    let mut c = count.lock();
                    while *c >= k {
                        can_enter.wait(&mut c);
                    }
                    *c += 1;
                    drop(c);
                    can_exit.notify_all();
                };
                for _ in 0..PAIRS {
                    if w < initially_in {
                        exit();
                        entry();
                    } else {
                        entry();
                        exit();
                    }
                }
            });
        }
    });
}

/// One group: the runtime `rt` (every process's client running `PAIRS` pairs per iteration,
/// as `drive` says) against the relays over the same `peers` lists (process i messages
/// `peers[i]`, `pairing` per pair) and the counter with bounds `lk` and `initially_in`
/// workers in the CS at the start.
fn bench_system<A: CsObject>(
    c: &mut Criterion,
    group: &str,
    runtime_name: &str,
    (mut rt, drive): (Runtime<A>, Drive),
    (peers, pairing): (&[Vec<usize>], Pairing),
    (lk, initially_in): ((usize, usize), usize),
) {
    let n = peers.len();
    let handles = rt.take_handles().expect("handles");
    let in_cs = handles
        .iter()
        .filter(|h| h.state() == CsState::InCs)
        .count();
    assert_eq!(
        in_cs, initially_in,
        "the counter starts as the runtime does"
    );

    // Calibrate: the runtime's messages (and, with `Drive::UntilAll`, pairs) per iteration
    // (they vary with contention).
    let before = rt.report().messages;
    let pairs = (0..3).map(|_| iterate(&handles, drive)).sum::<u64>() / 3;
    let rt_msgs = (rt.report().messages - before) / 3;
    let per_peer = 3 * pairing.rounds() * PAIRS;
    let relay_msgs: u64 = peers.iter().map(|c| (per_peer * c.len()) as u64).sum();
    let relay_pairs = (n * PAIRS) as u64;
    eprintln!(
        "{group} {runtime_name}: runtime ~{pairs} pairs and ~{rt_msgs} messages per iteration ({:.1}/pair); relay {relay_pairs} pairs, {relay_msgs} messages ({:.1}/pair)",
        rt_msgs as f64 / pairs as f64,
        relay_msgs as f64 / relay_pairs as f64,
    );

    let mut g = c.benchmark_group(group);
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));

    g.throughput(Throughput::Elements(rt_msgs));
    let before = (rt.report().messages, Instant::now());
    let (mut iterations, mut done) = (0u64, 0u64);
    g.bench_function(BenchmarkId::new(runtime_name, "messages"), |b| {
        b.iter(|| {
            iterations += 1;
            done += iterate(&handles, drive);
        })
    });
    let (msgs, secs) = (
        rt.report().messages - before.0,
        before.1.elapsed().as_secs_f64(),
    );
    if iterations > 0 {
        eprintln!(
        "{group}: runtime over the whole measurement: {:.0} messages/iteration, {:.0} messages/s, {:.0} pairs/s (wall clock incl. criterion overhead)",
        msgs as f64 / iterations as f64,
        msgs as f64 / secs,
        done as f64 / secs,
    );
    }
    g.throughput(Throughput::Elements(pairs));
    g.bench_function(BenchmarkId::new(runtime_name, "pairs"), |b| {
        b.iter(|| iterate(&handles, drive))
    });

    g.throughput(Throughput::Elements(relay_msgs));
    g.bench_function(BenchmarkId::new("crossbeam_relay", "messages"), |b| {
        b.iter(|| relay(peers, pairing))
    });
    g.bench_function(
        BenchmarkId::new("crossbeam_relay_pipelined", "messages"),
        |b| b.iter(|| relay_pipelined(peers, pairing)),
    );

    g.throughput(Throughput::Elements(relay_pairs));
    g.bench_function(BenchmarkId::new("parking_lot_counter", "pairs"), |b| {
        b.iter(|| counter(n, lk, initially_in))
    });
    g.finish();
    rt.shutdown();
}

/// Each process's closed neighbourhood, as indices (what the relays message).
fn closed_indices(topo: &Topology) -> Vec<Vec<usize>> {
    topo.processes()
        .map(|p| topo.closed(p).iter().map(|q| q.index()).collect())
        .collect()
}

/// LMUTIN on `spec` with l_i = `l`; the counter keeps at least n/2 workers in the CS (no
/// upper bound), every worker starting in it, as LMUTIN's processes do.
fn bench_lmutin(c: &mut Criterion, spec: &str, l: usize) {
    let topo = Topology::parse(spec).expect("topology");
    let n = topo.len();
    let closed = closed_indices(&topo);
    let rt = lmutin_runtime(&topo, l);
    let group = spec.replace(':', "_");
    bench_system(
        c,
        &group,
        "runtime_lmutin",
        (rt, Drive::Fixed),
        (&closed, Pairing::OneRound),
        ((n / 2, n), n),
    );
}

/// (l,k)-GCS on complete:`n`, grid coterie, Maekawa inside, l = n/4, k = 3n/4; the relays
/// message each process's quorum, the counter keeps the same bounds from the same start.
fn bench_gcs(c: &mut Criterion, n: usize) {
    let (l, k) = (n / 4, 3 * n / 4);
    let coterie = Coterie::grid(n).expect("grid coterie");
    let quorums: Vec<Vec<usize>> = quorums_of(&coterie)
        .iter()
        .map(|q| q.iter().map(|p| p.index()).collect())
        .collect();
    let rt = gcs_runtime(n, l, k);
    let group = format!("gcs_complete_{n}_grid");
    bench_system(
        c,
        &group,
        "runtime_gcs",
        (rt, Drive::Fixed),
        (&quorums, Pairing::OneRound),
        ((l, k), n / 2),
    );
}

/// LKCS on `spec` with l_i = `l`, k_i = `k`; the relays message each closed neighbourhood,
/// two rounds per pair; the counter keeps n/4 ≤ count ≤ 3n/4 from LKCS's start.
fn bench_lkcs(c: &mut Criterion, spec: &str, l: usize, k: usize) {
    let topo = Topology::parse(spec).expect("topology");
    let n = topo.len();
    let closed = closed_indices(&topo);
    let (rt, in_cs) = lkcs_runtime(&topo, l, k);
    let lk = (n / 4, 3 * n / 4);
    assert!(
        (lk.0..=lk.1).contains(&in_cs),
        "the counter's bounds hold at LKCS's start"
    );
    let group = format!("lkcs_{}_l{l}_k{k}", spec.replace(':', "_"));
    bench_system(
        c,
        &group,
        "runtime_lkcs",
        (rt, Drive::UntilAll),
        (&closed, Pairing::TwoRounds),
        (lk, in_cs),
    );
}

fn runtime_benches(c: &mut Criterion) {
    bench_lmutin(c, "ring:16", 1);
    bench_lmutin(c, "torus:4x4", 2);
    bench_gcs(c, 16);
    bench_lkcs(c, "torus:4x4", 0, 4);
}

criterion_group!(benches, runtime_benches);
criterion_main!(benches);
