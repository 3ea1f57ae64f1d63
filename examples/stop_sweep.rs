//! The stop-one-member sweep: failure locality of the local algorithms.
//!
//! `cargo run --release --example stop_sweep -- [SEEDS]` (default 6 seeds per point). For
//! every graph (rings, tori, odd grids and random graphs, 5 to 200 processes), every local
//! algorithm (LMUTIN, LMUTEX, LKCS), uniform and per-process bounds, the stopped member
//! active or inactive, and unit or random delays, one member stops for good after its first
//! pair ([`SimConfig::stop`]) and the run judges the others. LMUTIN and LMUTEX run each
//! configuration twice: as built, and with their deviation 5 off (`hold-and-wait`, the
//! paper's rules: the "before" rows). Prints one markdown table:
//! per algorithm, the runs, how many broke a bound, how many starved a member that no bound
//! held, and the distribution of the failure locality (the largest hop distance from the
//! stopped member to a starved one).
//!
//! Configuration `(graph, algorithm, bounds, side, delay, seed)` is drawn from a ChaCha8
//! stream seeded with the seed, so the table is the same on every machine.

use lkcs::sim::{simulate, Delay, SimConfig, SimReport, Workload};
use lkcs::{
    cs::{CsObject, CsState},
    Algorithm, BoundsFile, Instance, PrintedRules, ProcessId, SystemSpec, SystemVisitor, Topology,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

struct Resolve;

impl SystemVisitor for Resolve {
    type Output = (Instance, Vec<CsState>);
    fn visit<A: CsObject>(self, inst: &Instance, initial: &[CsState], _: Vec<A>) -> Self::Output {
        (inst.clone(), initial.to_vec())
    }
}

struct Run(SimConfig);

impl SystemVisitor for Run {
    type Output = SimReport;
    fn visit<A: CsObject>(self, inst: &Instance, _: &[CsState], procs: Vec<A>) -> SimReport {
        simulate(inst, procs, &self.0)
    }
}

fn graphs() -> Vec<String> {
    let mut g: Vec<String> = [5, 8, 13, 40, 200]
        .iter()
        .map(|n| format!("ring:{n}"))
        .collect();
    g.extend(["torus:4x4", "torus:5x7", "grid:3x5", "grid:7x9"].map(String::from));
    g.extend(["random:12:0.35:1", "random:30:0.2:2", "random:60:0.1:3"].map(String::from));
    g
}

/// Bounds for `alg` on `t`: uniform, or per process (drawn), each valid for the algorithm.
fn bounds(alg: Algorithm, t: &Topology, per_process: bool, rng: &mut ChaCha8Rng) -> SystemSpec {
    let min_closed = t.processes().map(|p| t.degree(p) + 1).min().unwrap_or(1);
    let mut spec = SystemSpec {
        algorithm: alg,
        topology: t.clone(),
        l: None,
        k: None,
        bounds: None,
        initial: None,
        variant: lkcs::cs::Variant::Corrected,
        leader: None,
        coterie: None,
        mx: None,
        maxreq: None,
        migrate_after: None,
    };
    let draw = |rng: &mut ChaCha8Rng, closed: usize| match alg {
        Algorithm::Lmutin => (rng.random_range(1..closed.max(2)).min(closed - 1), closed),
        Algorithm::Lmutex => (0, rng.random_range(1..closed.max(2)).min(closed - 1).max(1)),
        // LKCS: k − l ≥ 3 where the neighbourhood allows, as its round trip needs
        _ if closed >= 4 => {
            let l = rng.random_range(0..=closed - 4);
            (l, rng.random_range(l + 3..=closed))
        }
        _ => (0, closed),
    };
    if per_process {
        let (ls, ks): (Vec<usize>, Vec<usize>) =
            t.processes().map(|p| draw(rng, t.degree(p) + 1)).unzip();
        spec.bounds = Some(BoundsFile {
            l: (alg != Algorithm::Lmutex).then_some(ls),
            k: (alg != Algorithm::Lmutin).then_some(ks),
        });
    } else {
        let (l, k) = draw(rng, min_closed);
        spec.l = (alg != Algorithm::Lmutex).then_some(l);
        spec.k = (alg != Algorithm::Lmutin).then_some(k);
    }
    spec
}

#[derive(Default)]
struct Row {
    runs: usize,
    refused: usize,
    broken: usize,
    unheld: usize,
    stalled: usize,
    locality: BTreeMap<usize, usize>,
}

/// The rule sets each algorithm runs: LMUTIN and LMUTEX as built, and with their deviation 5
/// turned off (`hold-and-wait`: the paper's rules, the "before" rows); LKCS as built.
fn rule_sets(alg: Algorithm) -> Vec<(String, PrintedRules)> {
    let built = (alg.name().to_string(), PrintedRules::default());
    if alg == Algorithm::Lkcs {
        return vec![built];
    }
    let before = format!("{}, hold-and-wait (before)", alg.name());
    vec![built, (before, ["hold-and-wait"].into_iter().collect())]
}

/// One configuration of the sweep, drawn from `seed`: the system and the member to stop, or
/// `None` when the algorithm refuses the bounds or the start has no member on that side.
fn draw(
    alg: Algorithm,
    t: &Topology,
    per_process: bool,
    active: bool,
    seed: u64,
) -> Option<(SystemSpec, ProcessId)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut spec = bounds(alg, t, per_process, &mut rng);
    let (inst, _) = spec.build(Resolve).ok()?;
    let initial = inst.random_safe_initial(seed).ok()?;
    let side = if active {
        CsState::InCs
    } else {
        CsState::OutCs
    };
    let candidates: Vec<usize> = (0..t.len()).filter(|&p| initial[p] == side).collect();
    if candidates.is_empty() {
        return None;
    }
    let stopped = candidates[rng.random_range(0..candidates.len())];
    spec.initial = Some(initial);
    Some((spec, ProcessId::from(stopped)))
}

fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .map(|s| s.parse().expect("SEEDS: a number"))
        .unwrap_or(6);
    let mut rows: BTreeMap<String, Row> = BTreeMap::new();
    for graph in graphs() {
        let t = Topology::parse(&graph).expect("a valid graph");
        for alg in [Algorithm::Lmutin, Algorithm::Lmutex, Algorithm::Lkcs] {
            for per_process in [false, true] {
                for active in [false, true] {
                    for delay in ["unit", "uniform:1:12"] {
                        for seed in 0..seeds {
                            let drawn = draw(alg, &t, per_process, active, seed);
                            for (name, rules) in rule_sets(alg) {
                                let row = rows.entry(name).or_default();
                                row.runs += 1;
                                let Some((spec, stopped)) = &drawn else {
                                    row.refused += 1;
                                    continue;
                                };
                                let cfg = SimConfig {
                                    seed,
                                    pairs: 3,
                                    delay: Delay::parse(delay).expect("a valid delay"),
                                    workload: Workload::Concurrent,
                                    max_events: 3_000_000,
                                    trace_capacity: 0,
                                    stop: vec![*stopped],
                                    ..SimConfig::default()
                                };
                                let Ok(r) = spec.build_with_rules(&rules, Run(cfg)) else {
                                    row.refused += 1;
                                    continue;
                                };
                                row.broken += usize::from(r.safety_violations > 0);
                                row.stalled += usize::from(r.stalled.is_some());
                                let starved = r.starved.unwrap_or_default();
                                row.unheld += usize::from(starved.iter().any(|s| !s.held()));
                                *row.locality
                                    .entry(r.failure_locality.unwrap_or(0))
                                    .or_default() += 1;
                            }
                        }
                    }
                }
            }
        }
    }
    println!(
        "| algorithm | runs | not run | bound broken | ended at the event limit | starved with no bound holding it \
         | locality 0 | 1 | 2 | 3–5 | 6–10 | > 10 | largest |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let buckets: [(usize, usize); 6] = [(0, 0), (1, 1), (2, 2), (3, 5), (6, 10), (11, usize::MAX)];
    for (alg, r) in &rows {
        let mut line = format!(
            "| {alg} | {} | {} | {} | {} | {} |",
            r.runs, r.refused, r.broken, r.stalled, r.unheld
        );
        for (lo, hi) in buckets {
            let n: usize = r.locality.range(lo..=hi).map(|(_, c)| c).sum();
            line += &format!(" {n} |");
        }
        let largest = r.locality.keys().next_back().copied().unwrap_or(0);
        line += &format!(" {largest} |");
        println!("{line}");
    }
}
