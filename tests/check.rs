//! The exhaustive checker on LMUTIN and LMUTEX: every interleaving of FIFO deliveries and
//! client steps, for every valid uniform bound and every safe initial configuration of the
//! small topologies; and proof that the checker can fail.
//!
//! Two tiers. `cargo test --release` runs the fast one: every instance on three processes,
//! path:4 and star:4 with l = 1, the counterexamples, and the migrating controller on three
//! processes. The proof tier adds the four-process sweeps below (the `proofs` feature):
//! `cargo test --release --features proofs --test check`, which `.ci/run` runs too.
//!
//! Budget (2 cores, the default reduced search, instances spread over both cores): every
//! instance on three processes is explored completely (38 + 24 instances), and so is every
//! bound and safe start of path:4 and star:4 (85 instances, 23.5 M and 12.9 M states), and
//! of ring:4 LMUTIN with l = 0 and l = 2 and LMUTEX with k = 1 (16 + 5 + 5 instances, 178.0 M
//! and 29.8 M states). The other ring:4 instances (LMUTIN l = 1, LMUTEX k = 2 and 3: 38) and
//! every complete:4 instance (94) are explored up to `BOUND` generated states each
//! (depth-first). Their complete proofs do not fit in CI: ring:4 with l = 1 from in:0,2
//! alone takes 68.6 M reduced states (about 2.5 CPU minutes), LMUTEX k = 3 (the complement
//! of l = 0: the very same state graphs) another 178 M states, and complete:4 with l = 3
//! from in:0,1,2 more than 40 M states; see docs/checker.md. All of `tests/check.rs` takes about
//! 515 s of CPU, about 4.5 minutes of both cores when the machine is idle.

use lkcs::{
    check, lmutex_instance, lmutex_system, parse_initial, CheckConfig, CheckReport, CsState,
    Lmutin, LmutinRules, Topology, Verdict,
};
use std::sync::Mutex;

#[cfg(feature = "proofs")]
const BOUND: usize = 400_000;

fn cfg(pairs: usize, max_states: Option<usize>) -> CheckConfig {
    CheckConfig {
        pairs,
        max_states,
        ..CheckConfig::default()
    }
}

/// LMUTIN's and LMUTEX's rules as the errata correct the paper's (deviations 1–4), without
/// deviation 5 (an exit held by a bound sets its permissions aside): the exhaustive sweeps
/// below prove these. Deviation 5's messages multiply the states (complete:3, l = 1 from
/// in:0: 0.9 M states with hold-and-wait, more than 14 M without a verdict in 60 s with
/// deviation 5), so it is proved on the triangle from its all-in start
/// ([`proves_the_set_aside_rule_on_the_triangle`]) and swept by the simulator.
const PAPER: LmutinRules = LmutinRules {
    hold_and_wait: true,
    ..LmutinRules::CORRECTED
};

/// Deviation 5 as built (`LmutinRules::CORRECTED`): safety, invariants and no deadlock on
/// the triangle, l = 1, every member in the CS at the start, one pair each (9.4 M states).
#[test]
fn proves_the_set_aside_rule_on_the_triangle() {
    let t = Topology::ring(3).unwrap();
    let init = parse_initial("in:0,1,2", 3).unwrap();
    let (inst, procs) = Lmutin::system(&t, &[1; 3], &init, LmutinRules::CORRECTED).unwrap();
    let r = check(&inst, procs, &cfg(1, None));
    assert_eq!(
        r.verdict,
        Verdict::Proved,
        "{}",
        r.counterexample.join("\n")
    );
    assert!(
        r.states > 1_000_000,
        "{} states: the rule's messages were explored",
        r.states
    );
}

fn min_degree(t: &Topology) -> usize {
    t.processes().map(|p| t.degree(p)).min().unwrap_or(0)
}

/// Checks LMUTIN (every l) and LMUTEX (every k) from every safe configuration, the instances
/// spread over the available cores; returns the number of instances and the states explored.
fn sweep(spec: &str, pairs: usize, max_states: Option<usize>) -> (usize, usize) {
    sweep_bounds(spec, pairs, max_states, |_, _| true)
}

/// [`sweep`] over the bounds `keep(lmutex, bound)` accepts (`bound` is l for LMUTIN, k for
/// LMUTEX).
fn sweep_bounds(
    spec: &str,
    pairs: usize,
    max_states: Option<usize>,
    keep: impl Fn(bool, usize) -> bool,
) -> (usize, usize) {
    let t = Topology::parse(spec).unwrap();
    let n = t.len();
    // (lmutex?, bound, initial configuration)
    let mut jobs = Vec::new();
    for l in (0..=min_degree(&t)).filter(|&l| keep(false, l)) {
        let inst = Lmutin::instance(&t, &vec![l; n]).unwrap();
        for init in inst.safe_configurations().expect("small instance") {
            jobs.push((false, l, init));
        }
    }
    for k in (1..=min_degree(&t) + 1).filter(|&k| keep(true, k)) {
        let inst = lmutex_instance(&t, &vec![k; n]).unwrap();
        for init in inst.safe_configurations().expect("small instance") {
            jobs.push((true, k, init));
        }
    }
    let instances = jobs.len();
    let jobs = Mutex::new(jobs.into_iter());
    let states = Mutex::new(0);
    let run = || loop {
        let Some((lmutex, b, init)) = jobs.lock().unwrap().next() else {
            break;
        };
        let (what, r): (String, CheckReport) = if lmutex {
            let (inst, procs) = lmutex_system(&t, &vec![b; n], &init, PAPER).unwrap();
            (
                format!("lmutex {spec} k={b} {init:?}"),
                check(&inst, procs, &cfg(pairs, max_states)),
            )
        } else {
            let (inst, procs) = Lmutin::system(&t, &vec![b; n], &init, PAPER).unwrap();
            (
                format!("lmutin {spec} l={b} {init:?}"),
                check(&inst, procs, &cfg(pairs, max_states)),
            )
        };
        assert!(
            r.ok(),
            "{what}: {:?}\n{}",
            r.verdict,
            r.counterexample.join("\n")
        );
        if max_states.is_none() {
            assert_eq!(r.verdict, Verdict::Proved, "{what}");
        }
        *states.lock().unwrap() += r.states;
    };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    std::thread::scope(|s| {
        for _ in 0..cores {
            s.spawn(run);
        }
    });
    let states = states.into_inner().unwrap();
    eprintln!("{spec}, {pairs} pair(s): {instances} instances, {states} states");
    (instances, states)
}

#[test]
fn proves_every_bound_and_start_on_three_processes() {
    let (instances, _) = sweep("complete:3", 1, None);
    assert_eq!(
        instances,
        19 + 19,
        "every uniform bound and safe start of both algorithms"
    );
    sweep("path:3", 1, None);
}

#[test]
fn proves_two_pairs_on_a_path_of_three() {
    let t = Topology::path(3).unwrap();
    for l in 0..=1 {
        let inst = Lmutin::instance(&t, &[l; 3]).unwrap();
        let init = inst.find_safe_initial().unwrap();
        let (inst, procs) = Lmutin::system(&t, &[l; 3], &init, PAPER).unwrap();
        let r = check(&inst, procs, &cfg(2, None));
        assert_eq!(r.verdict, Verdict::Proved, "l={l}");
        eprintln!("path:3 l={l} 2 pairs: {} states", r.states);
    }
}

#[test]
fn proves_path_and_star_of_four() {
    for spec in ["path:4", "star:4"] {
        let t = Topology::parse(spec).unwrap();
        let inst = Lmutin::instance(&t, &[1; 4]).unwrap();
        let init = inst.find_safe_initial().unwrap();
        let (inst, procs) = Lmutin::system(&t, &[1; 4], &init, PAPER).unwrap();
        let r = check(&inst, procs, &cfg(1, None));
        assert_eq!(r.verdict, Verdict::Proved, "{spec}");
        eprintln!("{spec} l=1 1 pair: {} states in {:?}", r.states, r.elapsed);
    }
}

#[cfg(feature = "proofs")]
#[test]
fn proves_every_bound_and_start_on_path_and_star_of_four() {
    let (path, _) = sweep("path:4", 1, None);
    let (star, _) = sweep("star:4", 1, None);
    assert_eq!(path + star, 44 + 41, "every uniform bound and safe start");
}

/// ring:4 with the tightest bounds: LMUTIN with l = 2 (each arbiter grants one permission at
/// a time) and LMUTEX with k = 1 (local mutual exclusion), from every safe start.
#[cfg(feature = "proofs")]
#[test]
fn proves_the_tightest_bounds_on_a_ring_of_four() {
    let tightest = |lmutex: bool, b: usize| if lmutex { b == 1 } else { b == 2 };
    let (instances, _) = sweep_bounds("ring:4", 1, None, tightest);
    assert_eq!(instances, 5 + 5, "every safe start of both algorithms");
}

/// ring:4 with l = 0: no bound can break, every move is harmless, and the reduction needs no
/// visibility condition; the invariants and the absence of deadlock are still checked.
#[cfg(feature = "proofs")]
#[test]
fn proves_lmutin_without_a_lower_bound_on_a_ring_of_four() {
    let (instances, _) = sweep_bounds("ring:4", 1, None, |lmutex, l| !lmutex && l == 0);
    assert_eq!(instances, 16, "every configuration is safe");
}

/// Whether the sweep of `ring:4` proves `bound` (l for LMUTIN, k for LMUTEX) in CI.
#[cfg(feature = "proofs")]
fn ring_four_proved(lmutex: bool, bound: usize) -> bool {
    if lmutex {
        bound == 1
    } else {
        bound == 0 || bound == 2
    }
}

#[cfg(feature = "proofs")]
#[test]
fn bounded_sweep_of_four_process_topologies() {
    // the rest of ring:4 is proved above
    sweep_bounds("ring:4", 1, Some(BOUND), |lmutex, b| {
        !ring_four_proved(lmutex, b)
    });
    sweep("complete:4", 1, Some(BOUND));
}

#[test]
fn printed_initial_grants_are_reported_unsafe() {
    let t = Topology::complete(3).unwrap();
    let init = parse_initial("in:0", 3).unwrap();
    let (inst, procs) = Lmutin::system(&t, &[1; 3], &init, LmutinRules::PRINTED).unwrap();
    let r = check(&inst, procs, &cfg(1, None));
    assert!(
        matches!(r.verdict, Verdict::Violated { .. }),
        "{:?}",
        r.verdict
    );
    assert!(r.counterexample.len() > 2);
    assert!(r.counterexample[0].starts_with("initial: in:0"));
}

#[test]
fn a_broken_arbiter_is_reported_unsafe() {
    // P1's arbiter grants one permission too many: l = 1 on the triangle can break
    let t = Topology::complete(3).unwrap();
    let init = parse_initial("in:0", 3).unwrap();
    let (inst, mut procs) = Lmutin::system(&t, &[1; 3], &init, PAPER).unwrap();
    for p in procs.iter_mut() {
        *p = p.clone().with_arbiter_capacity(3);
    }
    let r = check(&inst, procs, &cfg(1, None));
    assert_eq!(
        r.verdict,
        Verdict::Violated {
            property: "safety".into()
        }
    );
    assert!(
        r.counterexample.iter().any(|l| l.starts_with("violated:")),
        "{:?}",
        r.counterexample
    );
}

#[test]
fn a_deadlock_is_reported() {
    // the printed initial grants alone (Release capped) fill the arbiters with phantom grants
    let t = Topology::complete(3).unwrap();
    let init = parse_initial("in:1", 3).unwrap();
    let rules = LmutinRules {
        printed_initial_grants: true,
        ..PAPER
    };
    let (inst, procs) = Lmutin::system(&t, &[1; 3], &init, rules).unwrap();
    let r = check(&inst, procs, &cfg(1, None));
    assert_eq!(
        r.verdict,
        Verdict::Violated {
            property: "no deadlock".into()
        }
    );
    assert!(r.counterexample.len() > 2);
}

// ==============================================================================
// Maekawa (global mutual exclusion on a coterie): exhaustive checks on complete:3 and 4.
//
// Budget: complete:3 with the majority coterie ({P0,P1}, {P1,P2}, {P0,P2}) is proved from
// every safe start (nobody in the CS, or one process holding its quorum's locks; about 20 K
// states each); complete:3 with the grid coterie (n = 3 is one row: every quorum is all
// three processes) is proved from the empty start (764 K states), and bounded from the
// three starts with a process in the CS (`MAEKAWA_BOUND` generated states each: proving one
// takes 2.5 M states, about a minute on this machine). complete:4 is bounded for both
// coteries from the empty start and from in:0 (a proof from the empty start takes 7.1 M
// states with the majority coterie, 12 M from in:0: minutes). One pair per process. The
// counts are the full search's; the default reduced search visits about half as many.
// =====================================================================================

const MAEKAWA_BOUND: usize = 400_000;

fn maekawa_check(coterie: &str, n: usize, initial: &str, max_states: Option<usize>) -> CheckReport {
    let c = lkcs::Coterie::parse(coterie, n).unwrap();
    let init = parse_initial(initial, n).unwrap();
    let (inst, procs) = lkcs::Maekawa::system(&c, &init).unwrap();
    let r = check(&inst, procs, &cfg(1, max_states));
    assert!(
        r.ok(),
        "maekawa {coterie} n={n} {initial}: {:?}\n{}",
        r.verdict,
        r.counterexample.join("\n")
    );
    if max_states.is_none() {
        assert_eq!(
            r.verdict,
            Verdict::Proved,
            "maekawa {coterie} n={n} {initial}"
        );
    }
    eprintln!(
        "maekawa {coterie} complete:{n} {initial}: {:?}, {} states",
        r.verdict, r.states
    );
    r
}

#[test]
fn maekawa_proved_on_three_processes() {
    for initial in ["in:", "in:0", "in:1", "in:2"] {
        maekawa_check("majority", 3, initial, None);
    }
    maekawa_check("grid", 3, "in:", None);
    for initial in ["in:0", "in:1", "in:2"] {
        maekawa_check("grid", 3, initial, Some(MAEKAWA_BOUND));
    }
}

#[cfg(feature = "proofs")]
#[test]
fn maekawa_bounded_on_four_processes() {
    for coterie in ["majority", "grid"] {
        for initial in ["in:", "in:0"] {
            maekawa_check(coterie, 4, initial, Some(MAEKAWA_BOUND));
        }
    }
}

/// An explicit coterie need not contain P_i in Q_i: with every process asking P0 alone
/// (a central lock server), Maekawa is still proved.
#[test]
fn maekawa_proved_with_a_central_coterie() {
    let c = lkcs::Coterie::explicit(3, vec![vec![0]; 3]).unwrap();
    let (inst, procs) = lkcs::Maekawa::system(&c, &[CsState::OutCs; 3]).unwrap();
    let r = check(&inst, procs, &cfg(1, None));
    assert_eq!(r.verdict, Verdict::Proved);
    eprintln!("maekawa central complete:3: {} states", r.states);
}

/// The notes' rule "Failed to a queued request as soon as it is outranked" is needed: with
/// `Failed` on arrival only (`--variant printed`), the checker finds a deadlock on complete:3
/// with the grid coterie from in:0 (about 4.6 K states): P1's request outranks the holder P2
/// at P0's arbiter, so it is queued without a `Failed`; P0's own request then outranks it
/// there and gets the lock, but P1 is never told, keeps deferring the `Inquire` for the lock
/// it holds at P1, and P0 waits for that lock forever. The notes' rule passes the same
/// instance (bounded above, and proved from the empty start).
#[test]
fn maekawa_failed_on_arrival_only_deadlocks_in_the_checker() {
    let c = lkcs::Coterie::grid(3).unwrap();
    let init = parse_initial("in:0", 3).unwrap();
    let (inst, procs) =
        lkcs::Maekawa::system_with(&c, &init, lkcs::MaekawaRules::ARRIVAL_ONLY_FAILED).unwrap();
    let r = check(&inst, procs, &cfg(1, None));
    assert_eq!(
        r.verdict,
        Verdict::Violated {
            property: "no deadlock".into()
        }
    );
    assert!(r.counterexample[0].starts_with("initial: in:0"));
}

// ================================ end of the Maekawa section ================================

// Migrating controller (CDC, DDC): exhaustive checks on complete:3 and complete:4.
// Every instance below is explored completely (verdict Proved): complete:3 from each of the
// four safe starts under every migration condition (1 pair), complete:3 with 2 pairs and
// maxreq = 2, complete:4 (1 pair) without migration, at every exit and with maxreq = 2.
// About 1.05 M states in all, about 10 s in release mode on this machine; the largest is
// complete:4 with migration at every exit (CDC 243 k + DDC 541 k states). complete:3 with
// 2 pairs and migration at every exit is also proved (1.7 M states) but left to the CLI.
// ===================================================================================

mod migrating {
    use lkcs::{check, Cdc, CheckConfig, CsState, Ddc, MigratingRules, MigrationCondition};
    use lkcs::{Topology, Verdict};

    fn conditions() -> [MigrationCondition; 4] {
        [
            MigrationCondition::Never,
            MigrationCondition::Always,
            MigrationCondition::Counter { maxreq: 2 },
            // the checker's time stays 0: a zero timer fires at every exit
            MigrationCondition::timer_units(0),
        ]
    }

    fn prove(n: usize, init: &[CsState], c: MigrationCondition, pairs: usize) -> usize {
        let t = Topology::complete(n).unwrap();
        let cfg = CheckConfig {
            pairs,
            ..CheckConfig::default()
        };
        let rules = MigratingRules::CORRECTED;
        let (inst, procs) = Cdc::system(&t, init, c, rules).unwrap();
        let r = check(&inst, procs, &cfg);
        assert_eq!(r.verdict, Verdict::Proved, "cdc n={n} {c:?} {init:?}");
        let mut states = r.states;
        let (inst, procs) = Ddc::system(&t, init, c, rules).unwrap();
        let r = check(&inst, procs, &cfg);
        assert_eq!(r.verdict, Verdict::Proved, "ddc n={n} {c:?} {init:?}");
        states += r.states;
        eprintln!("cdc+ddc complete:{n} {c:?} {pairs} pair(s): {states} states");
        states
    }

    #[test]
    fn proves_cdc_and_ddc_on_three_processes_from_every_start() {
        for c in conditions() {
            let mut starts = vec![vec![CsState::OutCs; 3]];
            for holder in 0..3 {
                let mut s = vec![CsState::OutCs; 3];
                s[holder] = CsState::InCs;
                starts.push(s);
            }
            for init in starts {
                prove(3, &init, c, 1);
            }
        }
        prove(
            3,
            &[CsState::OutCs; 3],
            MigrationCondition::Counter { maxreq: 2 },
            2,
        );
    }

    #[cfg(feature = "proofs")]
    #[test]
    fn proves_cdc_and_ddc_on_four_processes() {
        for c in conditions().into_iter().take(3) {
            prove(4, &[CsState::OutCs; 4], c, 1);
        }
    }
}
// ======================= end of the migrating-controller section =======================

// ============================================================================

// ================================ reduced versus full search ================================

/// Every counterexample instance above gets the same verdict from the reduced search (the
/// default), the crate's full search and stateright's.
#[test]
fn the_three_searches_agree_on_the_counterexample_instances() {
    use lkcs::Search;
    let t = Topology::complete(3).unwrap();
    let verdicts = |search: Search| {
        let c = CheckConfig {
            pairs: 1,
            search,
            ..CheckConfig::default()
        };
        let printed = {
            let init = parse_initial("in:0", 3).unwrap();
            let (inst, procs) = Lmutin::system(&t, &[1; 3], &init, LmutinRules::PRINTED).unwrap();
            check(&inst, procs, &c)
        };
        let broken = {
            let init = parse_initial("in:0", 3).unwrap();
            let (inst, mut procs) = Lmutin::system(&t, &[1; 3], &init, PAPER).unwrap();
            for p in procs.iter_mut() {
                *p = p.clone().with_arbiter_capacity(3);
            }
            check(&inst, procs, &c)
        };
        let grants = {
            let init = parse_initial("in:1", 3).unwrap();
            let rules = LmutinRules {
                printed_initial_grants: true,
                ..PAPER
            };
            let (inst, procs) = Lmutin::system(&t, &[1; 3], &init, rules).unwrap();
            check(&inst, procs, &c)
        };
        let maekawa = {
            let co = lkcs::Coterie::grid(3).unwrap();
            let init = parse_initial("in:0", 3).unwrap();
            let (inst, procs) =
                lkcs::Maekawa::system_with(&co, &init, lkcs::MaekawaRules::ARRIVAL_ONLY_FAILED)
                    .unwrap();
            check(&inst, procs, &c)
        };
        [printed, broken, grants, maekawa].map(|r| r.verdict)
    };
    let reduced = verdicts(Search::Reduced);
    assert!(
        reduced
            .iter()
            .all(|v| matches!(v, Verdict::Violated { .. })),
        "{reduced:?}"
    );
    assert_eq!(reduced, verdicts(Search::Full));
    assert_eq!(reduced, verdicts(Search::Stateright));
}
