//! LMUTIN and LMUTEX through the simulator: safety and liveness on every named topology and
//! on seeded random graphs with random bounds, initial configurations and delays; message
//! complexity against Lemma 3 of the 2017 paper.

mod common;

use common::*;
use lkcs::{sim::Workload, Topology};

/// Random graphs: 20 graphs, sizes 5..=24, edge probability 0.15..0.6.
fn random_graphs() -> Vec<Topology> {
    (0..20u64)
        .map(|g| {
            let n = 5 + (g as usize * 7) % 20;
            let p = 0.15 + 0.45 * ((g * 37) % 20) as f64 / 20.0;
            Topology::random(n, p, 1000 + g).expect("connected")
        })
        .collect()
}

#[test]
fn lmutin_is_safe_and_live_on_named_topologies() {
    for spec in NAMED {
        let t = Topology::parse(spec).unwrap();
        let min_deg = t.processes().map(|p| t.degree(p)).min().unwrap();
        for l in 0..=min_deg {
            for seed in 0..6 {
                let (inst, procs, _) = lmutin(&t, &vec![l; t.len()], seed);
                run_ok(
                    &format!("lmutin {spec} l={l}"),
                    &inst,
                    procs,
                    &concurrent(seed, 3),
                );
            }
        }
    }
}

#[test]
fn lmutex_is_safe_and_live_on_named_topologies() {
    for spec in NAMED {
        let t = Topology::parse(spec).unwrap();
        let min_deg = t.processes().map(|p| t.degree(p)).min().unwrap();
        for k in 1..=min_deg + 1 {
            for seed in 0..6 {
                let (inst, procs, _) = lmutex(&t, &vec![k; t.len()], seed);
                run_ok(
                    &format!("lmutex {spec} k={k}"),
                    &inst,
                    procs,
                    &concurrent(seed, 3),
                );
            }
        }
    }
}

#[test]
fn both_are_safe_and_live_on_random_graphs_with_random_bounds() {
    for (g, t) in random_graphs().iter().enumerate() {
        for seed in 0..20u64 {
            let s = seed * 100 + g as u64;
            let l = random_per_process(t, s, |d| (0, d));
            let (inst, procs, _) = lmutin(t, &l, s);
            run_ok(
                &format!("lmutin {} seed {s}", t.name()),
                &inst,
                procs,
                &concurrent(s, 2),
            );
            let k = random_per_process(t, s, |d| (1, d + 1));
            let (inst, procs, _) = lmutex(t, &k, s);
            run_ok(
                &format!("lmutex {} seed {s}", t.name()),
                &inst,
                procs,
                &concurrent(s, 2),
            );
        }
    }
}

/// Lemma 3, best case: with no contention a pair costs exactly 3(|N_i|+1) messages
/// (Request, Grant, Release per member of the closed neighbourhood), 3|N_i| of them remote.
#[test]
fn sequential_pairs_cost_exactly_three_per_closed_member() {
    let mut graphs: Vec<Topology> = NAMED.iter().map(|s| Topology::parse(s).unwrap()).collect();
    graphs.extend(random_graphs());
    for t in &graphs {
        for seed in 0..3 {
            let l = random_per_process(t, seed, |d| (0, d));
            let (inst, procs, _) = lmutin(t, &l, seed);
            let r = run_ok(t.name(), &inst, procs, &sequential(2));
            assert!(r.pairs_completed >= 2 * t.len(), "{}", t.name());
            for p in &r.pairs {
                let closed = t.degree(p.process) as u64 + 1;
                assert_eq!(p.messages, 3 * closed, "{} {p:?}", t.name());
                assert_eq!(p.remote_messages, 3 * (closed - 1), "{} {p:?}", t.name());
            }
            let k = random_per_process(t, seed, |d| (1, d + 1));
            let (inst, procs, _) = lmutex(t, &k, seed);
            let r = run_ok(t.name(), &inst, procs, &sequential(2));
            for p in &r.pairs {
                assert_eq!(
                    p.messages,
                    3 * (t.degree(p.process) as u64 + 1),
                    "{} {p:?}",
                    t.name()
                );
            }
        }
    }
}

/// Lemma 3, worst case: under contention a pair costs at most 6(|N_i|+1) messages on
/// average with the paper's rules. Messages are attributed causally (a Grant sent on receipt
/// of a Release belongs to the releaser's pair), so one pair can be charged for a re-grant
/// caused by its Release and the sum over pairs is exact; the bound is asserted on the mean
/// of messages / 6(|N_i|+1).
///
/// Deviation 5 (as built: `LmutinRules::hold_and_wait` off) has no proven bound of its own:
/// a request told `Blocked` parks its permissions, unparks them when its blockers grant, and
/// can be blocked again, each round costing Park, Unpark and the re-grants. Its mean is held
/// to twice Lemma 3's bound, 12(|N_i|+1), a guard on its cost that these runs measure
/// (docs/measurements/failure-locality.md gives the sweep), not a lemma.
#[test]
fn concurrent_pairs_stay_within_the_worst_case_on_average() {
    let mut graphs: Vec<Topology> = NAMED.iter().map(|s| Topology::parse(s).unwrap()).collect();
    graphs.extend(random_graphs());
    let paper = lkcs::algo::lmutin::LmutinRules {
        hold_and_wait: true,
        ..lkcs::algo::lmutin::LmutinRules::CORRECTED
    };
    for t in &graphs {
        for seed in 0..5 {
            let l = random_per_process(t, seed, |d| (0, d));
            for (rules, per_member) in [
                (paper, 6.0),
                (lkcs::algo::lmutin::LmutinRules::CORRECTED, 12.0),
            ] {
                let (inst, procs, _) = lmutin_with(t, &l, seed, rules);
                let cfg = lkcs::sim::SimConfig {
                    workload: Workload::Concurrent,
                    ..concurrent(seed, 4)
                };
                let r = run_ok(t.name(), &inst, procs, &cfg);
                let ratio: f64 = r
                    .pairs
                    .iter()
                    .map(|p| p.messages as f64 / (per_member * (t.degree(p.process) + 1) as f64))
                    .sum::<f64>()
                    / r.pairs.len() as f64;
                assert!(
                    ratio <= 1.0,
                    "{} seed {seed}, {per_member} per closed member: mean ratio {ratio}, {:?}",
                    t.name(),
                    r.messages_by_kind
                );
                assert!(r.pairs.iter().all(|p| p.messages > 0));
            }
        }
    }
}
