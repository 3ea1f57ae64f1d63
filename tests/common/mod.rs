//! Helpers shared by the integration tests.
#![allow(dead_code)]

use lkcs::{
    algo::lmutin::{lmutex_system, Lmutex, Lmutin, LmutinRules},
    cs::CsState,
    sim::{simulate, Delay, SimConfig, SimReport, Workload},
    Instance, Topology,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// The named topologies every local algorithm is swept over.
pub const NAMED: [&str; 8] = [
    "ring:8",
    "path:6",
    "star:7",
    "grid:3x4",
    "torus:4x4",
    "complete:6",
    "grid:2x2",
    "torus:3x5",
];

/// Random per-process values in `lo(p)..=hi(p)`.
pub fn random_per_process(
    t: &Topology,
    seed: u64,
    range: impl Fn(usize) -> (usize, usize),
) -> Vec<usize> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    t.processes()
        .map(|p| {
            let (lo, hi) = range(t.degree(p));
            rng.random_range(lo..=hi)
        })
        .collect()
}

/// LMUTIN on `t` with lower bounds `l`, from a seeded safe initial configuration.
pub fn lmutin(t: &Topology, l: &[usize], init_seed: u64) -> (Instance, Vec<Lmutin>, Vec<CsState>) {
    lmutin_with(t, l, init_seed, LmutinRules::CORRECTED)
}

/// [`lmutin`] with the given rules.
pub fn lmutin_with(
    t: &Topology,
    l: &[usize],
    init_seed: u64,
    rules: LmutinRules,
) -> (Instance, Vec<Lmutin>, Vec<CsState>) {
    let inst = Lmutin::instance(t, l).expect("valid bounds");
    let init = inst
        .random_safe_initial(init_seed)
        .expect("LMUTIN always has a safe start");
    let (inst, procs) = Lmutin::system(t, l, &init, rules).expect("valid system");
    (inst, procs, init)
}

/// LMUTEX on `t` with upper bounds `k`, from a seeded safe initial configuration.
pub fn lmutex(t: &Topology, k: &[usize], init_seed: u64) -> (Instance, Vec<Lmutex>, Vec<CsState>) {
    let inst = lkcs::algo::lmutin::lmutex_instance(t, k).expect("valid bounds");
    let init = inst
        .random_safe_initial(init_seed)
        .expect("LMUTEX always has a safe start");
    let (inst, procs) = lmutex_system(t, k, &init, LmutinRules::CORRECTED).expect("valid system");
    (inst, procs, init)
}

/// Concurrent workload with uniform random delays.
pub fn concurrent(seed: u64, pairs: usize) -> SimConfig {
    SimConfig {
        seed,
        pairs,
        delay: Delay::Uniform { min: 1, max: 12 },
        workload: Workload::Concurrent,
        think_max: 8,
        ..SimConfig::default()
    }
}

/// Sequential workload with unit delays.
pub fn sequential(pairs: usize) -> SimConfig {
    SimConfig {
        pairs,
        workload: Workload::Sequential,
        ..SimConfig::default()
    }
}

/// Runs and asserts safety and liveness, printing the seed and trace on failure.
pub fn run_ok<A: lkcs::cs::CsObject>(
    what: &str,
    inst: &Instance,
    procs: Vec<A>,
    cfg: &SimConfig,
) -> SimReport {
    let r = simulate(inst, procs, cfg);
    assert!(r.ok(), "{what}: {}", r.failure_text());
    r
}

/// A seeded random schedule over FIFO links for objects that can withdraw
/// ([`lkcs::CsObject::withdraw`]): `steps` times, a random process `p` is drawn, then a random
/// busy link delivers its next message (60 %), or `p` starts its next sequence if it is idle
/// (25 %), or `p` is asked to withdraw (15 %); then every link is drained. After every event
/// the instance's bounds and every object's invariants hold, and a withdrawn process never
/// shows the state its sequence was heading to (it is forgotten once no longer pending).
/// `expect_taken(object, already_withdrawn)`, asked before each withdrawal, says what the call
/// must answer, where the test knows. Returns the withdrawals taken and the processes whose
/// withdrawn sequence is still pending once every link is empty.
pub fn withdrawal_schedule<A: lkcs::cs::CsObject>(
    what: &str,
    inst: &Instance,
    procs: &mut [A],
    rng: &mut ChaCha8Rng,
    steps: usize,
    expect_taken: impl Fn(&A, bool) -> Option<bool>,
) -> (usize, Vec<usize>) {
    use lkcs::{cs::Outbox, ProcessId};
    use std::collections::VecDeque;
    let n = procs.len();
    let mut links: Vec<VecDeque<A::Msg>> = (0..n * n).map(|_| VecDeque::new()).collect();
    let mut withdrawn: Vec<Option<CsState>> = vec![None; n];
    let mut withdrawals = 0;
    let route = |from: usize, out: &mut Outbox<A::Msg>, links: &mut [VecDeque<A::Msg>]| {
        for (to, m) in out.drain() {
            links[from * n + to.index()].push_back(m);
        }
    };
    let check = |procs: &[A], withdrawn: &mut [Option<CsState>], when: &str| {
        let states: Vec<CsState> = procs.iter().map(|p| p.state()).collect();
        let broken = inst.violations(&states);
        assert!(
            broken.is_empty(),
            "{what} ({when}): {broken:?} in {states:?}"
        );
        for (i, p) in procs.iter().enumerate() {
            p.check_invariants()
                .unwrap_or_else(|e| panic!("{what} ({when}): {e}"));
            if let Some(origin) = withdrawn[i] {
                assert_eq!(
                    p.state(),
                    origin,
                    "{what} ({when}): P{i} withdrew and moved"
                );
                if p.pending().is_none() {
                    withdrawn[i] = None;
                }
            }
        }
    };
    let deliver = |i: usize, procs: &mut [A], links: &mut [VecDeque<A::Msg>]| {
        let m = links[i].pop_front().expect("a busy link");
        let (from, to) = (i / n, i % n);
        let mut out = Outbox::new();
        procs[to].on_message(ProcessId::from(from), m, &mut out);
        route(to, &mut out, links);
    };
    for _ in 0..steps {
        let p = rng.random_range(0..n);
        match rng.random_range(0..100) {
            0..=59 => {
                let busy: Vec<usize> = (0..n * n).filter(|&i| !links[i].is_empty()).collect();
                if !busy.is_empty() {
                    deliver(busy[rng.random_range(0..busy.len())], procs, &mut links);
                }
            }
            60..=84 => {
                if procs[p].pending().is_none() {
                    let mut out = Outbox::new();
                    let seq = lkcs::cs::Sequence::leaving(procs[p].state());
                    procs[p].begin(seq, &mut out).expect("calling convention");
                    route(p, &mut out, &mut links);
                }
            }
            _ => {
                let expected = expect_taken(&procs[p], withdrawn[p].is_some());
                let mut out = Outbox::new();
                let taken = procs[p].withdraw(&mut out);
                if let Some(e) = expected {
                    assert_eq!(taken, e, "{what}: P{p}'s withdrawal");
                }
                if taken && withdrawn[p].is_none() {
                    withdrawals += 1;
                    withdrawn[p] = Some(procs[p].state());
                }
                route(p, &mut out, &mut links);
            }
        }
        check(procs, &mut withdrawn, "random step");
    }
    let mut budget = 1_000_000;
    while let Some(i) = (0..n * n).find(|&i| !links[i].is_empty()) {
        deliver(i, procs, &mut links);
        check(procs, &mut withdrawn, "draining");
        budget -= 1;
        assert!(budget > 0, "{what}: the network never went quiet");
    }
    let running = (0..n).filter(|&i| withdrawn[i].is_some()).collect();
    (withdrawals, running)
}
