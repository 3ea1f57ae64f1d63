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
//! Compare messages/s of the first two (the ratio is what matters, not absolute times).
//! The pairs and messages of one runtime iteration are printed before each group.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use lkcs::{
    gcs_system, quorums_of, Coterie, CsObject, CsState, Handle, Lmutin, LmutinRules, Maekawa,
    MutinRules, Runtime, RuntimeConfig, Sequence, Topology,
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
    let topo = Topology::complete(n).expect("topology");
    let coterie = Coterie::grid(n).expect("grid coterie");
    let idle = vec![CsState::OutCs; n];
    let mx = || Maekawa::system(&coterie, &idle).expect("maekawa").1;
    let initial: Vec<CsState> = (0..n)
        .map(|i| {
            if i < n / 2 {
                CsState::InCs
            } else {
                CsState::OutCs
            }
        })
        .collect();
    let (_, procs) = gcs_system(
        &topo,
        &quorums_of(&coterie),
        (l, k),
        &initial,
        (mx(), mx()),
        MutinRules::CORRECTED,
    )
    .expect("gcs system");
    Runtime::start(procs, RuntimeConfig::default()).expect("start")
}

/// Every client runs `PAIRS` pairs in the order its state dictates, so each process ends an
/// iteration in the state it started it in. LMUTIN: every process starts and ends in the CS
/// (the safe start `find_safe_initial` picks), and an LMUTIN process in the CS holds no
/// permission, so a client that finishes early holds nobody back. GCS (l = n/4, k = 3n/4,
/// half the processes in the CS): the processes still running can always move, since the
/// finished ones sit at their initial states, n/2 in the CS in all.
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
/// member of the closed neighbourhood granted) and to enter (answered at once), waiting for
/// each answer as a [`Handle`] caller does.
fn relay(closed: &[Vec<usize>]) {
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
                    match m {
                        RelayMsg::Begin(Sequence::Exit) => {
                            grants = 0;
                            mine.iter().for_each(|&q| send(q, RelayMsg::Request(i)));
                        }
                        RelayMsg::Begin(Sequence::Entry) => {
                            mine.iter().for_each(|&q| send(q, RelayMsg::Release));
                            let _ = done_tx.send(());
                        }
                        RelayMsg::Request(from) => send(from, RelayMsg::Grant),
                        RelayMsg::Grant => {
                            grants += 1;
                            if grants == mine.len() {
                                let _ = done_tx.send(());
                            }
                        }
                        RelayMsg::Release => {}
                        RelayMsg::Stop => break,
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
/// thread starts its next exit as soon as its entry is sent.
fn relay_pipelined(closed: &[Vec<usize>]) {
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
                let mut remaining = PAIRS;
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

/// One group: the runtime `rt` (every process's client running `PAIRS` pairs per iteration)
/// against the relays over the same `peers` lists (process i messages `peers[i]`) and the
/// counter with bounds `lk` and `initially_in` workers in the CS at the start.
fn bench_system<A: CsObject>(
    c: &mut Criterion,
    group: &str,
    runtime_name: &str,
    mut rt: Runtime<A>,
    peers: &[Vec<usize>],
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

    // Calibrate: the runtime's messages per iteration (they vary with contention).
    let before = rt.report().messages;
    for _ in 0..3 {
        run_pairs(&handles);
    }
    let rt_msgs = (rt.report().messages - before) / 3;
    let relay_msgs: u64 = peers.iter().map(|c| (3 * c.len() * PAIRS) as u64).sum();
    let pairs = (n * PAIRS) as u64;
    eprintln!(
        "{group} {runtime_name}: {pairs} pairs per iteration; runtime ~{rt_msgs} messages ({:.1}/pair), relay {relay_msgs} ({:.1}/pair)",
        rt_msgs as f64 / pairs as f64,
        relay_msgs as f64 / pairs as f64,
    );

    let mut g = c.benchmark_group(group);
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));

    g.throughput(Throughput::Elements(rt_msgs));
    let before = (rt.report().messages, Instant::now());
    let mut iterations = 0u64;
    g.bench_function(BenchmarkId::new(runtime_name, "messages"), |b| {
        b.iter(|| {
            iterations += 1;
            run_pairs(&handles)
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
        (pairs * iterations) as f64 / secs,
    );
    }
    g.throughput(Throughput::Elements(pairs));
    g.bench_function(BenchmarkId::new(runtime_name, "pairs"), |b| {
        b.iter(|| run_pairs(&handles))
    });

    g.throughput(Throughput::Elements(relay_msgs));
    g.bench_function(BenchmarkId::new("crossbeam_relay", "messages"), |b| {
        b.iter(|| relay(peers))
    });
    g.bench_function(
        BenchmarkId::new("crossbeam_relay_pipelined", "messages"),
        |b| b.iter(|| relay_pipelined(peers)),
    );

    g.throughput(Throughput::Elements(pairs));
    g.bench_function(BenchmarkId::new("parking_lot_counter", "pairs"), |b| {
        b.iter(|| counter(n, lk, initially_in))
    });
    g.finish();
    rt.shutdown();
}

/// LMUTIN on `spec` with l_i = `l`; the counter keeps at least n/2 workers in the CS (no
/// upper bound), every worker starting in it, as LMUTIN's processes do.
fn bench_lmutin(c: &mut Criterion, spec: &str, l: usize) {
    let topo = Topology::parse(spec).expect("topology");
    let n = topo.len();
    let closed: Vec<Vec<usize>> = topo
        .processes()
        .map(|p| topo.closed(p).iter().map(|q| q.index()).collect())
        .collect();
    let rt = lmutin_runtime(&topo, l);
    let group = spec.replace(':', "_");
    bench_system(c, &group, "runtime_lmutin", rt, &closed, ((n / 2, n), n));
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
    bench_system(c, &group, "runtime_gcs", rt, &quorums, ((l, k), n / 2));
}

fn runtime_benches(c: &mut Criterion) {
    bench_lmutin(c, "ring:16", 1);
    bench_lmutin(c, "torus:4x4", 2);
    bench_gcs(c, 16);
}

criterion_group!(benches, runtime_benches);
criterion_main!(benches);
