use super::*;
use crate::algo::lmutin::{Lmutin, LmutinRules};
use crate::topology::Topology;

fn lmutin(t: &Topology, l: usize) -> (Instance, Vec<Lmutin>) {
    let ls = vec![l; t.len()];
    let inst = Lmutin::instance(t, &ls).unwrap();
    let init = inst.find_safe_initial().unwrap();
    Lmutin::system(t, &ls, &init, LmutinRules::CORRECTED).unwrap()
}

#[test]
fn a_mismatched_system_is_refused_not_run() {
    let t = Topology::ring(4).unwrap();
    let (inst, mut procs) = lmutin(&t, 1);
    procs.swap(0, 1);
    let r = simulate(&inst, procs.clone(), &SimConfig::default());
    assert!(!r.ok() && r.stalled.as_deref().unwrap_or("").contains("index 0"));
    procs.pop();
    let r = simulate(&inst, procs, &SimConfig::default());
    assert!(!r.ok() && r.events == 0);
    #[cfg(feature = "check")]
    {
        let r = crate::check::check(
            &inst,
            Vec::<Lmutin>::new(),
            &crate::check::CheckConfig::default(),
        );
        assert!(!r.ok());
    }
}

#[test]
fn parses_delays_and_workloads() {
    assert_eq!(Delay::parse("unit").unwrap(), Delay::Unit);
    assert_eq!(
        Delay::parse("uniform:1:5").unwrap(),
        Delay::Uniform { min: 1, max: 5 }
    );
    for (bad, why) in [
        ("", "expected unit or uniform:A:B"),
        ("uniform:5:1", "A must not exceed B"),
        ("uniform:1", "`uniform:1`: expected uniform:A:B"),
        ("gauss:1:2", "expected unit or uniform:A:B"),
        ("uniform:a:2", "A is not a non-negative integer"),
    ] {
        let e = Delay::parse(bad).expect_err(bad);
        assert!(e.to_string().contains(why), "{bad}: {e}");
    }
    assert_eq!(Workload::parse("sequential").unwrap(), Workload::Sequential);
    let e = Workload::parse("parallel").expect_err("no such workload");
    assert!(
        e.to_string()
            .contains("workload `parallel`: expected concurrent or sequential"),
        "{e}"
    );
}

#[test]
fn runs_are_reproducible_by_seed() {
    let t = Topology::ring(6).unwrap();
    let cfg = SimConfig {
        seed: 9,
        pairs: 3,
        delay: Delay::Uniform { min: 1, max: 7 },
        ..SimConfig::default()
    };
    let (inst, procs) = lmutin(&t, 1);
    let a = simulate(&inst, procs.clone(), &cfg);
    let b = simulate(&inst, procs, &cfg);
    assert!(a.ok(), "{}", a.failure_text());
    assert_eq!(
        (a.messages, a.end_time, a.events),
        (b.messages, b.end_time, b.events)
    );
    assert_eq!(a.pairs, b.pairs);
}

#[test]
fn sequential_unit_run_counts_exactly() {
    let t = Topology::ring(5).unwrap();
    let (inst, procs) = lmutin(&t, 1);
    let cfg = SimConfig {
        pairs: 2,
        workload: Workload::Sequential,
        ..SimConfig::default()
    };
    let r = simulate(&inst, procs, &cfg);
    assert!(r.ok(), "{}", r.failure_text());
    assert_eq!(r.pairs_completed, 10);
    // ring: |N_i|+1 = 3, so 9 messages per pair, 6 of them remote
    assert!(r
        .pairs
        .iter()
        .all(|p| p.messages == 9 && p.remote_messages == 6));
    // Request and Grant take one unit each; Entry completes at once
    assert_eq!(r.waiting_time.exit_max, 2.0);
    assert_eq!(r.waiting_time.entry_max, 0.0);
}

#[test]
fn observer_catches_an_unsafe_algorithm() {
    // the printed initial grants on a triangle with l = 1 and only P0 in the CS
    let t = Topology::complete(3).unwrap();
    let init = [CsState::InCs, CsState::OutCs, CsState::OutCs];
    let (inst, procs) = Lmutin::system(&t, &[1, 1, 1], &init, LmutinRules::PRINTED).unwrap();
    // some seed lets P0 exit while P1 and P2 are still out of the CS
    let r = (0..50)
        .map(|seed| {
            let cfg = SimConfig {
                seed,
                pairs: 1,
                think_max: 20,
                ..SimConfig::default()
            };
            simulate(&inst, procs.clone(), &cfg)
        })
        .find(|r| r.safety_violations > 0)
        .expect("the printed initial grants break l = 1 for some seed");
    assert!(!r.ok());
    assert!(r.failure_text().contains(&format!("seed {}", r.seed)));
    assert!(!r.trace.is_empty());
}
