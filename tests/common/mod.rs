//! Helpers shared by the integration tests.
#![allow(dead_code)]

use lkcs::{
    lmutex_system, simulate, CsState, Delay, Instance, Lmutex, Lmutin, LmutinRules, SimConfig,
    SimReport, Topology, Workload,
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
    let inst = Lmutin::instance(t, l).expect("valid bounds");
    let init = inst
        .random_safe_initial(init_seed)
        .expect("LMUTIN always has a safe start");
    let (inst, procs) = Lmutin::system(t, l, &init, LmutinRules::CORRECTED).expect("valid system");
    (inst, procs, init)
}

/// LMUTEX on `t` with upper bounds `k`, from a seeded safe initial configuration.
pub fn lmutex(t: &Topology, k: &[usize], init_seed: u64) -> (Instance, Vec<Lmutex>, Vec<CsState>) {
    let inst = lkcs::lmutex_instance(t, k).expect("valid bounds");
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
pub fn run_ok<A: lkcs::CsObject>(
    what: &str,
    inst: &Instance,
    procs: Vec<A>,
    cfg: &SimConfig,
) -> SimReport {
    let r = simulate(inst, procs, cfg);
    assert!(r.ok(), "{what}: {}", r.failure_text());
    r
}
