//! The exhaustive checker on LMUTIN, LMUTEX, Maekawa, CDC and DDC, fast tier: every instance
//! on three processes, path:4 and star:4 with l = 1, the counterexamples (proof that the
//! checker can fail), and the migrating controller on three processes; `cargo test
//! --release` runs it. The proof tier, `tests/proofs.rs`, adds the four-process sweeps and
//! lmutin-5 on the triangle:
//! `cargo test --release --test proofs` (a target `cargo test` leaves out, so the proof tier
//! builds one test binary over the library the fast tier built; `.ci/run` runs it too).

#[path = "../src/test_threads.rs"]
mod test_threads;
/// Test threads per core (src/test_threads.rs): twice the cores, so that the few long
/// searches at the end of the list overlap.
const TEST_THREADS_PER_CORE: usize = 2;

#[path = "check/support.rs"]
mod support;

use lkcs::{
    algo::lmutin::{Lmutin, LmutinRules},
    check,
    check::{CheckConfig, Verdict},
    cs::CsState,
    parse_initial, Topology,
};
use support::{cfg, maekawa_check, sweep, MAEKAWA_BOUND, PAPER};

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
        let r = check::check(&inst, procs, &cfg(2, None));
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
        let r = check::check(&inst, procs, &cfg(1, None));
        assert_eq!(r.verdict, Verdict::Proved, "{spec}");
        eprintln!("{spec} l=1 1 pair: {} states in {:?}", r.states, r.elapsed);
    }
}

#[test]
fn printed_initial_grants_are_reported_unsafe() {
    let t = Topology::complete(3).unwrap();
    let init = parse_initial("in:0", 3).unwrap();
    let (inst, procs) = Lmutin::system(&t, &[1; 3], &init, LmutinRules::PRINTED).unwrap();
    let r = check::check(&inst, procs, &cfg(1, None));
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
    let r = check::check(&inst, procs, &cfg(1, None));
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
    let r = check::check(&inst, procs, &cfg(1, None));
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

/// An explicit coterie need not contain P_i in Q_i: with every process asking P0 alone
/// (a central lock server), Maekawa is still proved.
#[test]
fn maekawa_proved_with_a_central_coterie() {
    let c = lkcs::quorum::Coterie::explicit(3, vec![vec![0]; 3]).unwrap();
    let (inst, procs) = lkcs::algo::maekawa::Maekawa::system(&c, &[CsState::OutCs; 3]).unwrap();
    let r = check::check(&inst, procs, &cfg(1, None));
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
    let c = lkcs::quorum::Coterie::grid(3).unwrap();
    let init = parse_initial("in:0", 3).unwrap();
    let (inst, procs) = lkcs::algo::maekawa::Maekawa::system_with(
        &c,
        &init,
        lkcs::algo::maekawa::MaekawaRules::ARRIVAL_ONLY_FAILED,
    )
    .unwrap();
    let r = check::check(&inst, procs, &cfg(1, None));
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
    use crate::support::{conditions, prove};
    use lkcs::{algo::migrating::MigrationCondition, cs::CsState};

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
}
// ======================= end of the migrating-controller section =======================

// ============================================================================

// ================================ reduced versus full search ================================

/// Every counterexample instance above gets the same verdict from the reduced search (the
/// default), the crate's full search and stateright's.
#[test]
fn the_three_searches_agree_on_the_counterexample_instances() {
    use lkcs::check::Search;
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
            check::check(&inst, procs, &c)
        };
        let broken = {
            let init = parse_initial("in:0", 3).unwrap();
            let (inst, mut procs) = Lmutin::system(&t, &[1; 3], &init, PAPER).unwrap();
            for p in procs.iter_mut() {
                *p = p.clone().with_arbiter_capacity(3);
            }
            check::check(&inst, procs, &c)
        };
        let grants = {
            let init = parse_initial("in:1", 3).unwrap();
            let rules = LmutinRules {
                printed_initial_grants: true,
                ..PAPER
            };
            let (inst, procs) = Lmutin::system(&t, &[1; 3], &init, rules).unwrap();
            check::check(&inst, procs, &c)
        };
        let maekawa = {
            let co = lkcs::quorum::Coterie::grid(3).unwrap();
            let init = parse_initial("in:0", 3).unwrap();
            let (inst, procs) = lkcs::algo::maekawa::Maekawa::system_with(
                &co,
                &init,
                lkcs::algo::maekawa::MaekawaRules::ARRIVAL_ONLY_FAILED,
            )
            .unwrap();
            check::check(&inst, procs, &c)
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
