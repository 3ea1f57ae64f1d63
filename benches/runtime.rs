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
//! Compare messages/s of the first two (the ratio is what matters, not absolute times).
//! The pairs and messages of one runtime iteration are printed before each group.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use lkcs::{CsState, Handle, Lmutin, LmutinRules, Runtime, RuntimeConfig, Sequence, Topology};
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

/// Every client runs `PAIRS` pairs in the order its state dictates. Every process starts and
/// ends in the CS (the safe start `find_safe_initial` picks for LMUTIN), and an LMUTIN
/// process in the CS holds no permission, so a client that finishes early holds nobody back.
fn run_pairs(handles: &[Handle<Lmutin>]) {
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

/// A global quota by hand: at least `l` of the workers in the CS (no upper bound, as with
/// LMUTIN); every worker runs `PAIRS` pairs.
fn counter(n: usize, l: usize) {
    let state = (Mutex::new(n), Condvar::new());
    std::thread::scope(|s| {
        for _ in 0..n {
            let (count, cv) = (&state.0, &state.1);
            s.spawn(move || {
                for _ in 0..PAIRS {
                    let mut c = count.lock();
                    while *c <= l {
                        cv.wait(&mut c);
                    }
                    *c -= 1;
                    drop(c);
                    *count.lock() += 1;
                    cv.notify_all();
                }
            });
        }
    });
}

fn bench_topology(c: &mut Criterion, spec: &str, l: usize) {
    let topo = Topology::parse(spec).expect("topology");
    let n = topo.len();
    let closed: Vec<Vec<usize>> = topo
        .processes()
        .map(|p| topo.closed(p).iter().map(|q| q.index()).collect())
        .collect();
    let mut rt = lmutin_runtime(&topo, l);
    let handles = rt.take_handles().expect("handles");
    assert!(handles.iter().all(|h| h.state() == CsState::InCs));

    // Calibrate: the runtime's messages per iteration (they vary with contention).
    let before = rt.report().messages;
    for _ in 0..3 {
        run_pairs(&handles);
    }
    let rt_msgs = (rt.report().messages - before) / 3;
    let relay_msgs: u64 = closed.iter().map(|c| (3 * c.len() * PAIRS) as u64).sum();
    let pairs = (n * PAIRS) as u64;
    eprintln!(
        "{spec} l={l}: {pairs} pairs per iteration; runtime ~{rt_msgs} messages ({:.1}/pair), relay {relay_msgs} ({:.1}/pair)",
        rt_msgs as f64 / pairs as f64,
        relay_msgs as f64 / pairs as f64,
    );

    let mut g = c.benchmark_group(spec.replace(':', "_"));
    g.sample_size(10)
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(4));

    g.throughput(Throughput::Elements(rt_msgs));
    let before = (rt.report().messages, Instant::now());
    let mut iterations = 0u64;
    g.bench_function(BenchmarkId::new("runtime_lmutin", "messages"), |b| {
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
        "{spec}: runtime over the whole measurement: {:.0} messages/iteration, {:.0} messages/s, {:.0} pairs/s (wall clock incl. criterion overhead)",
        msgs as f64 / iterations.max(1) as f64,
        msgs as f64 / secs,
        (pairs * iterations) as f64 / secs,
    );
    }

    g.throughput(Throughput::Elements(relay_msgs));
    g.bench_function(BenchmarkId::new("crossbeam_relay", "messages"), |b| {
        b.iter(|| relay(&closed))
    });
    g.bench_function(
        BenchmarkId::new("crossbeam_relay_pipelined", "messages"),
        |b| b.iter(|| relay_pipelined(&closed)),
    );

    g.throughput(Throughput::Elements(pairs));
    g.bench_function(BenchmarkId::new("parking_lot_counter", "pairs"), |b| {
        b.iter(|| counter(n, n / 2))
    });
    g.finish();
    rt.shutdown();
}

fn runtime_benches(c: &mut Criterion) {
    bench_topology(c, "ring:16", 1);
    bench_topology(c, "torus:4x4", 2);
}

criterion_group!(benches, runtime_benches);
criterion_main!(benches);
