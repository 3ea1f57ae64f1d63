//! The exhaustive checker's proof tier: the four-process sweeps of LMUTIN and LMUTEX, Maekawa
//! and the migrating controller on four processes, deviation 5 (the set-aside rule) on the
//! triangle from its all-in start, and LKCS's round trip proved on path:3 and bounded on its
//! smallest instances past it.
//! `cargo test` leaves this target out (it is declared with `test = false`); run it with
//! `cargo test --release --test proofs`, as `.ci/run` does. The fast tier is `tests/check.rs`;
//! both share `tests/check/support.rs`.
//!
//! Budget (2 cores, the default reduced search, instances spread over both cores): as the
//! fast tier explores every instance on three processes completely (38 + 24 instances), this
//! one explores every bound and safe start of path:4 and star:4 (85 instances, 23.5 M and 12.9 M states), and
//! of ring:4 LMUTIN with l = 0 and l = 2 and LMUTEX with k = 1 (16 + 5 + 5 instances, 178.0 M
//! and 29.8 M states). The other ring:4 instances (LMUTIN l = 1, LMUTEX k = 2 and 3: 38) and
//! every complete:4 instance (94) are explored up to `BOUND` generated states each
//! (depth-first). Their complete proofs do not fit in CI: ring:4 with l = 1 from in:0,2
//! alone takes 68.6 M reduced states (about 2.5 CPU minutes), LMUTEX k = 3 (the complement
//! of l = 0: the very same state graphs) another 178 M states, and complete:4 with l = 3
//! from in:0,1,2 more than 40 M states; see docs/checker.md. Both tiers together took about 515 s
//! of CPU before the round trip's check (about 50 s of both cores) was added.

#[path = "check/support.rs"]
mod support;

use lkcs::cs::CsState;
use support::{cfg, conditions, maekawa_check, prove, sweep, sweep_bounds, MAEKAWA_BOUND};

/// Generated states per instance of the bounded sweeps.
const BOUND: usize = 400_000;

/// Deviation 5 as built (`LmutinRules::CORRECTED`): safety, invariants and no deadlock on
/// the triangle, l = 1, every member in the CS at the start, one pair each (4.7 M states,
/// 5.6 M before the commuting deliveries; about 15 s of one core: here rather than in the
/// fast tier).
#[test]
fn proves_the_set_aside_rule_on_the_triangle() {
    let t = lkcs::Topology::ring(3).unwrap();
    let init = lkcs::parse_initial("in:0,1,2", 3).unwrap();
    let (inst, procs) = lkcs::algo::lmutin::Lmutin::system(
        &t,
        &[1; 3],
        &init,
        lkcs::algo::lmutin::LmutinRules::CORRECTED,
    )
    .unwrap();
    let r = lkcs::check::check(&inst, procs, &cfg(1, None));
    assert_eq!(
        r.verdict,
        lkcs::check::Verdict::Proved,
        "{}",
        r.counterexample.join("\n")
    );
    assert!(
        r.states > 1_000_000,
        "{} states: the rule's messages were explored",
        r.states
    );
}

#[test]
fn proves_every_bound_and_start_on_path_and_star_of_four() {
    let (path, _) = sweep("path:4", 1, None);
    let (star, _) = sweep("star:4", 1, None);
    assert_eq!(path + star, 44 + 41, "every uniform bound and safe start");
}

/// ring:4 with the tightest bounds: LMUTIN with l = 2 (each arbiter grants one permission at
/// a time) and LMUTEX with k = 1 (local mutual exclusion), from every safe start.
#[test]
fn proves_the_tightest_bounds_on_a_ring_of_four() {
    let tightest = |lmutex: bool, b: usize| if lmutex { b == 1 } else { b == 2 };
    let (instances, _) = sweep_bounds("ring:4", 1, None, tightest);
    assert_eq!(instances, 5 + 5, "every safe start of both algorithms");
}

/// ring:4 with l = 0: no bound can break, every move is harmless, and the reduction needs no
/// visibility condition; the invariants and the absence of deadlock are still checked.
#[test]
fn proves_lmutin_without_a_lower_bound_on_a_ring_of_four() {
    let (instances, _) = sweep_bounds("ring:4", 1, None, |lmutex, l| !lmutex && l == 0);
    assert_eq!(instances, 16, "every configuration is safe");
}

/// Whether the sweep of `ring:4` proves `bound` (l for LMUTIN, k for LMUTEX) in CI.
fn ring_four_proved(lmutex: bool, bound: usize) -> bool {
    if lmutex {
        bound == 1
    } else {
        bound == 0 || bound == 2
    }
}

#[test]
fn bounded_sweep_of_four_process_topologies() {
    // the rest of ring:4 is proved above
    sweep_bounds("ring:4", 1, Some(BOUND), |lmutex, b| {
        !ring_four_proved(lmutex, b)
    });
    sweep("complete:4", 1, Some(BOUND));
}

#[test]
fn maekawa_bounded_on_four_processes() {
    for coterie in ["majority", "grid"] {
        for initial in ["in:", "in:0"] {
            maekawa_check(coterie, 4, initial, Some(MAEKAWA_BOUND));
        }
    }
}

#[test]
fn proves_cdc_and_ddc_on_four_processes() {
    for c in conditions().into_iter().take(3) {
        prove(4, &[CsState::OutCs; 4], c, 1);
    }
}

/// LKCS's round trip (`LkcsRules::TRIP`) proved at message level on every instance of
/// path:3 it takes: each process's (l_i, k_i) ranges over 0 ≤ l_i < k_i ≤ |N_i|+1, and the
/// 54 combinations the build refuses (bounds it cannot tighten, processes that can never
/// move) are skipped. Three are taken: (0, 0, 0)/(2, 2, 2), where the centre's upper bound
/// is tightened to 1 and a second entry goes by round trip; (0, 0, 0)/(2, 3, 2), where no
/// bound can break; and (0, 1, 0)/(2, 3, 2), where the centre's lower bound is tightened to 2
/// and a second exit goes by round trip. One pair per process, from the start the build
/// picks: safety, the objects' invariants (invariant T included) and the absence of
/// deadlock, proved (0.12 M to 2.1 M states with the commuting deliveries, about 10 s of CPU
/// in all). The larger instances of the bounded check below, and path:4, go past 10^8
/// states without an end (docs/checker.md).
#[test]
fn proves_the_round_trip_on_every_instance_of_a_path_of_three() {
    use lkcs::{
        algo::lkcs::{Leaders, Lkcs, LkcsRules},
        check, Topology,
    };
    let t = Topology::parse("path:3").unwrap();
    let options = |p: lkcs::ProcessId| {
        let top = t.degree(p) + 1;
        (0..=top).flat_map(move |l| (l + 1..=top).map(move |k| (l, k)))
    };
    let ids: Vec<_> = t.processes().collect();
    let mut taken = Vec::new();
    let mut refused = 0;
    for a in options(ids[0]) {
        for b in options(ids[1]) {
            for c in options(ids[2]) {
                let l = vec![a.0, b.0, c.0];
                let k = vec![a.1, b.1, c.1];
                let inst = Lkcs::instance(&t, &l, &k).unwrap();
                match Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::TRIP) {
                    Ok(sys) => taken.push((l, k, sys)),
                    Err(_) => refused += 1,
                }
            }
        }
    }
    assert_eq!(
        (taken.len(), refused),
        (3, 51),
        "the round trip takes three of path:3's 54 bound combinations"
    );
    // two of them need round trips: a move there breaks a tightened bound of the centre
    let tightened = taken
        .iter()
        .filter(|(_, _, sys)| sys.operating.all_bounds() != sys.instance.all_bounds())
        .count();
    assert_eq!(
        tightened, 2,
        "the centre's bounds are tightened in two instances"
    );
    support::on_every_core(taken, |(l, k, sys)| {
        let r = check::check(&sys.instance, sys.procs, &support::cfg(1, None));
        support::assert_sound(&format!("round trip path:3 l={l:?} k={k:?}"), &r, None);
        eprintln!(
            "round trip path:3 l={l:?} k={k:?}: proved, {} states",
            r.states
        );
    });
}

/// Generated states per instance of the round trip's bounded checks.
const TRIP_BOUND: usize = 20_000_000;

/// LKCS's round trip (`LkcsRules::TRIP`, what `--algorithm lkcs` runs) on the smallest
/// instances it takes where a move can break a bound, one pair per process, from the start
/// the build picks: complete:4 (1, 4), ring:5 (1, 3), star:5 with the centre at (1, 4) and
/// the leaves at (0, 2), path:5 with the inner processes at (1, 3) and the ends at (0, 2).
/// No violation of safety, the objects' invariants (invariant T included) or the absence of
/// deadlock within `TRIP_BOUND` generated states each. Bounded, not proved: complete:4 and
/// ring:5 alone go past 118 M and 129 M states in 10 minutes without an end
/// (docs/checker.md).
#[test]
fn bounded_round_trip_on_the_smallest_instances() {
    use lkcs::{
        algo::lkcs::{Leaders, Lkcs, LkcsRules},
        check, Topology,
    };
    let instances: [(&str, Vec<usize>, Vec<usize>); 4] = [
        ("complete:4", vec![1; 4], vec![4; 4]),
        ("ring:5", vec![1; 5], vec![3; 5]),
        ("star:5", vec![1, 0, 0, 0, 0], vec![4, 2, 2, 2, 2]),
        ("path:5", vec![0, 1, 1, 1, 0], vec![2, 3, 3, 3, 2]),
    ];
    support::on_every_core(instances, |(spec, l, k)| {
        let t = Topology::parse(spec).unwrap();
        let inst = Lkcs::instance(&t, &l, &k).unwrap();
        let sys = Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::TRIP)
            .unwrap_or_else(|e| panic!("{spec}: the round trip takes it: {e}"));
        let r = check::check(&sys.instance, sys.procs, &support::cfg(1, Some(TRIP_BOUND)));
        let what = format!("round trip {spec} l={l:?} k={k:?}");
        support::assert_sound(&what, &r, Some(TRIP_BOUND));
        // depth first, the first path runs until nothing is enabled: if every pair ran on
        // it, it is at least the best case's 6(|N_i|+1) deliveries and two client steps per
        // process long (`max_depth` counts the states on the path, one more than its steps);
        // a lower bound, not a proof that every pair completed
        let least: usize = t.processes().map(|p| 6 * (t.degree(p) + 1) + 2).sum();
        assert!(
            r.max_depth > least,
            "{spec}: the deepest path has {} states; a run of every pair takes at least \
             {least} steps",
            r.max_depth
        );
        eprintln!("round trip {spec}: {:?}, {} states", r.verdict, r.states);
    });
}
