//! Helpers shared by the exhaustive checker's two tiers: `tests/check.rs` (the fast tier,
//! run by `cargo test --release`) and `tests/proofs.rs` (the proof tier, `cargo test
//! --release --test proofs`, which `.ci/run` runs too).

use lkcs::{
    algo::lmutin::{lmutex_instance, lmutex_system, Lmutin, LmutinRules},
    algo::migrating::{Cdc, Ddc, MigratingRules, MigrationCondition},
    check,
    check::{CheckConfig, CheckReport, Verdict},
    cs::CsState,
    parse_initial, Topology,
};
use std::sync::Mutex;

/// Asserts that `r` (the check of `what`) found no violation, with the counterexample in the
/// message, and that it proved its instance when no budget (`max_states`) was set.
pub fn assert_sound(what: &str, r: &CheckReport, max_states: Option<usize>) {
    assert!(
        r.ok(),
        "{what}: {:?}\n{}",
        r.verdict,
        r.counterexample.join("\n")
    );
    if max_states.is_none() {
        assert_eq!(r.verdict, Verdict::Proved, "{what}");
    }
}

/// A check of `pairs` pairs per process, within `max_states` generated states when given.
pub fn cfg(pairs: usize, max_states: Option<usize>) -> CheckConfig {
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
/// (`tests/proofs.rs`, `proves_the_set_aside_rule_on_the_triangle`) and swept by the simulator.
pub const PAPER: LmutinRules = LmutinRules {
    hold_and_wait: true,
    ..LmutinRules::CORRECTED
};

pub fn min_degree(t: &Topology) -> usize {
    t.processes().map(|p| t.degree(p)).min().unwrap_or(0)
}

/// Checks LMUTIN (every l) and LMUTEX (every k) from every safe configuration, the instances
/// spread over the available cores; returns the number of instances and the states explored.
pub fn sweep(spec: &str, pairs: usize, max_states: Option<usize>) -> (usize, usize) {
    sweep_bounds(spec, pairs, max_states, |_, _| true)
}

/// [`sweep`] over the bounds `keep(lmutex, bound)` accepts (`bound` is l for LMUTIN, k for
/// LMUTEX).
pub fn sweep_bounds(
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
    let states = Mutex::new(0);
    on_every_core(jobs, |(lmutex, b, init)| {
        let (what, r): (String, CheckReport) = if lmutex {
            let (inst, procs) = lmutex_system(&t, &vec![b; n], &init, PAPER).unwrap();
            (
                format!("lmutex {spec} k={b} {init:?}"),
                check::check(&inst, procs, &cfg(pairs, max_states)),
            )
        } else {
            let (inst, procs) = Lmutin::system(&t, &vec![b; n], &init, PAPER).unwrap();
            (
                format!("lmutin {spec} l={b} {init:?}"),
                check::check(&inst, procs, &cfg(pairs, max_states)),
            )
        };
        assert_sound(&what, &r, max_states);
        *states.lock().unwrap() += r.states;
    });
    let states = states.into_inner().unwrap();
    eprintln!("{spec}, {pairs} pair(s): {instances} instances, {states} states");
    (instances, states)
}

/// Runs `f` on every job, the jobs spread over the available cores (one thread per core,
/// each taking the next job until none is left).
pub fn on_every_core<J: Send>(jobs: impl IntoIterator<Item = J>, f: impl Fn(J) + Sync) {
    let jobs = Mutex::new(jobs.into_iter().collect::<Vec<J>>().into_iter());
    let run = || loop {
        let Some(job) = jobs.lock().unwrap().next() else {
            break;
        };
        f(job);
    };
    let cores = std::thread::available_parallelism().map_or(1, usize::from);
    std::thread::scope(|s| {
        for _ in 0..cores {
            s.spawn(run);
        }
    });
}

/// Generated states per instance where a Maekawa check is bounded rather than proved.
pub const MAEKAWA_BOUND: usize = 400_000;

/// Checks Maekawa with `coterie` on complete:`n` from `initial`: no violation, and proved when
/// `max_states` is `None`.
pub fn maekawa_check(
    coterie: &str,
    n: usize,
    initial: &str,
    max_states: Option<usize>,
) -> CheckReport {
    let c = coterie
        .parse::<lkcs::quota::QuorumSystem>()
        .expect("a quorum system's name")
        .coterie(n)
        .unwrap();
    let init = parse_initial(initial, n).unwrap();
    let (inst, procs) = lkcs::algo::maekawa::Maekawa::system(&c, &init).unwrap();
    let r = check::check(&inst, procs, &cfg(1, max_states));
    assert_sound(
        &format!("maekawa {coterie} n={n} {initial}"),
        &r,
        max_states,
    );
    eprintln!(
        "maekawa {coterie} complete:{n} {initial}: {:?}, {} states",
        r.verdict, r.states
    );
    r
}

/// The migration conditions of the migrating controller the checks cover.
pub fn conditions() -> [MigrationCondition; 4] {
    [
        MigrationCondition::Never,
        MigrationCondition::Always,
        MigrationCondition::Counter { maxreq: 2 },
        // the checker's time stays 0: a zero timer fires at every exit
        MigrationCondition::timer_units(0),
    ]
}

/// Proves CDC and DDC on complete:`n` from `init` under `c`, `pairs` pairs per process;
/// returns the states explored (both).
pub fn prove(n: usize, init: &[CsState], c: MigrationCondition, pairs: usize) -> usize {
    let t = Topology::complete(n).unwrap();
    let cfg = CheckConfig {
        pairs,
        ..CheckConfig::default()
    };
    let rules = MigratingRules::CORRECTED;
    let (inst, procs) = Cdc::system(&t, init, c, rules).unwrap();
    let r = check::check(&inst, procs, &cfg);
    assert_eq!(r.verdict, Verdict::Proved, "cdc n={n} {c:?} {init:?}");
    let mut states = r.states;
    let (inst, procs) = Ddc::system(&t, init, c, rules).unwrap();
    let r = check::check(&inst, procs, &cfg);
    assert_eq!(r.verdict, Verdict::Proved, "ddc n={n} {c:?} {init:?}");
    states += r.states;
    eprintln!("cdc+ddc complete:{n} {c:?} {pairs} pair(s): {states} states");
    states
}
