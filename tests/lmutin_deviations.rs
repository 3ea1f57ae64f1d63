//! One regression test per deviation of `algo::lmutin` from the printed pseudo-code
//! (Algorithms 1–2 of the 2017 paper). Each runs the printed rule (with the corrected rules
//! elsewhere, unless the printed rule needs a partner to show) in the concurrent simulator
//! and finds a failure, then shows the corrected rules hold on every seed of the same sweep.

use lkcs::{
    parse_initial, simulate, ArbiterRules, Delay, Lmutin, LmutinRules, SimConfig, SimReport,
    Topology,
};

const SEEDS: u64 = 300;

fn cfg(seed: u64) -> SimConfig {
    SimConfig {
        seed,
        pairs: 3,
        delay: Delay::Uniform { min: 1, max: 6 },
        think_max: 3,
        max_events: 200_000,
        ..SimConfig::default()
    }
}

fn run(spec: &str, l: usize, initial: &str, rules: LmutinRules, seed: u64) -> SimReport {
    let t = Topology::parse(spec).unwrap();
    let init = parse_initial(initial, t.len()).unwrap();
    let (inst, procs) = Lmutin::system(&t, &vec![l; t.len()], &init, rules).unwrap();
    simulate(&inst, procs, &cfg(seed))
}

/// The first seed in the sweep whose run fails `bad`, after checking that the corrected
/// rules pass every seed.
fn counterexample(
    spec: &str,
    l: usize,
    initial: &str,
    printed: LmutinRules,
    bad: impl Fn(&SimReport) -> bool,
) -> u64 {
    for seed in 0..SEEDS {
        let r = run(spec, l, initial, LmutinRules::CORRECTED, seed);
        assert!(r.ok(), "corrected rules fail: {}", r.failure_text());
    }
    let seed = (0..SEEDS)
        .find(|&seed| bad(&run(spec, l, initial, printed, seed)))
        .unwrap_or_else(|| panic!("the printed rule never failed on {spec} l={l} {initial}"));
    eprintln!("counterexample: {spec} l={l} {initial} seed {seed}");
    seed
}

fn with(f: impl FnOnce(&mut LmutinRules)) -> LmutinRules {
    let mut r = LmutinRules::CORRECTED;
    f(&mut r);
    r
}

/// Deviation 1: initial grants held by the InCS members (the literal Algorithm 1).
#[test]
fn printed_initial_grants_break_the_triangle() {
    // with the printed Release handler too, l = 1 breaks: nobody in the CS
    let printed = with(|r| {
        r.printed_initial_grants = true;
        r.arbiter.uncapped_release = true;
    });
    // P0 exits before P1 or P2 enters: everyone grants it, and nobody is left in the CS
    let t = Topology::complete(3).unwrap();
    let init = parse_initial("in:0", 3).unwrap();
    let (inst, procs) = Lmutin::system(&t, &[1; 3], &init, printed).unwrap();
    let slow_clients = |seed| SimConfig {
        think_max: 30,
        ..cfg(seed)
    };
    let seed = (0..SEEDS)
        .find(|&seed| {
            let r = simulate(&inst, procs.clone(), &slow_clients(seed));
            r.violations
                .iter()
                .any(|v| v.description.contains(": 0 in the CS"))
        })
        .expect("P0 alone in the CS exits");
    assert_eq!(seed, 5, "the seed documented in algo/lmutin.rs");
    eprintln!("counterexample: complete:3 l=1 in:0 think 30 seed {seed}");
    let (inst, procs) = Lmutin::system(&t, &[1; 3], &init, LmutinRules::CORRECTED).unwrap();
    for seed in 0..SEEDS {
        let r = simulate(&inst, procs.clone(), &slow_clients(seed));
        assert!(r.ok(), "{}", r.failure_text());
    }
    // alone (Release capped), the phantom grants fill the arbiters: a deadlock
    let alone = with(|r| r.printed_initial_grants = true);
    assert_eq!(
        counterexample("complete:3", 1, "in:1", alone, |r| r.deadlock),
        6
    );
}

/// Deviation 2: a grant counter instead of a granter set. Under the printed Preempt handler
/// the counter drops for a permission never held and the exit waits forever; the set does
/// not (and with the corrected Preempt handler the two agree).
#[test]
fn counted_grants_deadlock_under_stale_preempts() {
    let counted = with(|r| {
        r.counted_grants = true;
        r.unguarded_preempt = true;
    });
    assert_eq!(
        counterexample("complete:3", 1, "in:1", counted, |r| r.deadlock),
        65
    );
    let set_only = with(|r| r.unguarded_preempt = true);
    for seed in 0..SEEDS {
        let r = run("complete:3", 1, "in:1", set_only, seed);
        assert!(!r.deadlock, "{}", r.failure_text());
    }
}

/// Deviation 3: a Preempt crossing a Release is honoured, and the arbiter grants on the
/// resulting Relinquish of a permission it no longer records: one grant too many.
#[test]
fn stale_preempt_overgrants() {
    let printed = with(|r| {
        r.unguarded_preempt = true;
        r.arbiter.grant_on_unmatched_relinquish = true;
    });
    counterexample("complete:3", 1, "in:1", printed, |r| {
        r.safety_violations > 0
    });
}

/// Deviation 4: Release re-grants regardless of the capacity; together with a stale
/// Relinquish (which removed the releaser's entry first) it over-grants.
#[test]
fn uncapped_release_overgrants() {
    let printed = with(|r| {
        r.unguarded_preempt = true;
        r.arbiter.uncapped_release = true;
    });
    assert_eq!(
        counterexample("ring:4", 1, "in:1,3", printed, |r| r.safety_violations > 0),
        26
    );
    // the same stale Relinquish with a capped Release is harmless
    let capped = with(|r| r.unguarded_preempt = true);
    for seed in 0..SEEDS {
        let r = run("ring:4", 1, "in:1,3", capped, seed);
        assert!(r.ok(), "{}", r.failure_text());
    }
}

/// The printed variant as a whole fails where the corrected one holds.
#[test]
fn printed_variant_fails_corrected_holds() {
    let printed = LmutinRules::PRINTED;
    assert_eq!(printed.arbiter, ArbiterRules::PRINTED);
    assert_eq!(
        counterexample("complete:3", 1, "in:0", printed, |r| !r.ok()),
        1
    );
}
