//! LKCS's round-trip variant (`LkcsRules::TRIP`, `docs/lkcs-liveness.md`): safe and complete
//! on tori, grids, complete graphs and dense random graphs with the least slack, the exact
//! best case 6(|N_i|+1) per pair, round trips actually taken under contention (and each one
//! returned), and what `Lkcs::build` refuses for it.

mod common;

use common::*;
use lkcs::{
    algo::lkcs::{Leaders, Lkcs, LkcsRules, LkcsSystem},
    cs::CsState,
    sim::{simulate, Delay, SimConfig, SimReport, Workload},
    Topology,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

fn trip(t: &Topology, l: &[usize], k: &[usize]) -> LkcsSystem {
    let inst = Lkcs::instance(t, l, k).expect("valid bounds");
    Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::TRIP).expect("a tight start")
}

fn run(sys: LkcsSystem, cfg: SimConfig) -> SimReport {
    let cfg = SimConfig {
        max_events: 3_000_000,
        ..cfg
    };
    simulate(&sys.instance, sys.procs, &cfg)
}

fn unit_concurrent(seed: u64, pairs: usize) -> SimConfig {
    SimConfig {
        delay: Delay::Unit,
        think_max: 4,
        ..concurrent(seed, pairs)
    }
}

fn kind(r: &SimReport, k: &str) -> u64 {
    r.messages_by_kind.get(k).copied().unwrap_or(0)
}

/// Every trip that moved (one `TripGo` per member) returned or is still out at the end:
/// never more returns than trips, and no message of the other variants.
fn assert_trip_accounting(what: &str, r: &SimReport) {
    for k in [
        "Trigger",
        "RequestByTrigger",
        "SidetrackGrant",
        "Park",
        "Unpark",
    ] {
        assert_eq!(kind(r, k), 0, "{what}: {k} sent by the round trip");
    }
    assert!(
        kind(r, "TripEnd") <= kind(r, "TripGo"),
        "{what}: {} TripEnd for {} TripGo",
        kind(r, "TripEnd"),
        kind(r, "TripGo")
    );
}

#[test]
fn safe_and_complete_on_tori_grids_and_complete_graphs() {
    let cases: [(&str, usize, usize); 6] = [
        ("torus:4x4", 1, 4),
        ("torus:5x5", 1, 4),
        ("torus:3x5", 0, 3),
        ("grid:4x5", 0, 3),
        ("complete:6", 1, 4),
        ("complete:9", 2, 6),
    ];
    let mut trips = 0;
    for (spec, l, k) in cases {
        let t = Topology::parse(spec).unwrap();
        let n = t.len();
        let sys = trip(&t, &vec![l; n], &vec![k; n]);
        assert!(sys.leaders.is_empty() && sys.tightening.is_empty());
        for seed in 0..4 {
            for cfg in [concurrent(seed, 4), unit_concurrent(seed, 4)] {
                let what = format!("{spec} ({l}, {k}) seed {seed} {:?}", cfg.delay);
                let r = run(sys.clone(), cfg);
                assert!(r.ok(), "{what}: {}", r.failure_text());
                assert!(r.pairs_completed >= n * 4, "{what}");
                assert_trip_accounting(&what, &r);
                trips += kind(&r, "TripGo");
            }
        }
    }
    assert!(trips > 0, "no round trip was ever taken");
}

/// Least-slack bounds (k_i = l_i + 3 where |N_i|+1 ≥ 3) around a random reference
/// configuration, so that it is within the tightened bounds: l_i = |CS_i| − 1.
fn least_slack_around_a_reference(t: &Topology, seed: u64) -> (Vec<usize>, Vec<usize>) {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let inside: Vec<bool> = t.processes().map(|_| rng.random_bool(0.5)).collect();
    let (mut l, mut k) = (Vec::new(), Vec::new());
    for p in t.processes() {
        let m = t.degree(p) + 1;
        let c = t.closed(p).iter().filter(|q| inside[q.index()]).count();
        if m < 4 {
            l.push(0);
            k.push(m);
            continue;
        }
        let lo = c.saturating_sub(1).min(m - 3);
        l.push(lo);
        k.push(lo + 3);
    }
    (l, k)
}

#[test]
fn safe_and_complete_on_dense_random_graphs_with_the_least_slack_and_unit_delays() {
    let mut runs = 0;
    let mut trips = 0;
    for (n, p) in [(20, 0.5), (24, 0.45), (30, 0.4), (36, 0.35)] {
        for g in 0..3 {
            let t = Topology::random(n, p, 70 + g).expect("connected");
            let (l, k) = least_slack_around_a_reference(&t, g);
            let inst = Lkcs::instance(&t, &l, &k).expect("valid bounds");
            let sys = match Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::TRIP) {
                Ok(sys) => sys,
                Err(e) => panic!("{}: the reference is a tight start, yet: {e}", t.name()),
            };
            for seed in 0..3 {
                let what = format!("{} {l:?} {k:?} seed {seed}", t.name());
                let r = run(sys.clone(), unit_concurrent(seed, 3));
                assert!(r.ok(), "{what}: {}", r.failure_text());
                assert_trip_accounting(&what, &r);
                trips += kind(&r, "TripGo");
                runs += 1;
            }
        }
    }
    assert_eq!(runs, 36);
    assert!(trips > 0, "the least slack needs round trips");
}

#[test]
fn best_case_is_exactly_six_per_member_of_the_closed_neighbourhood() {
    // (the sequential workload moves within the tightened bounds where it can; at (1, 4) on
    // tori see the tests below)
    let cases: [(&str, usize, usize); 5] = [
        ("torus:5x5", 0, 4),
        ("torus:4x4", 0, 4),
        ("complete:6", 1, 5),
        ("grid:4x4", 0, 3),
        ("complete:9", 2, 7),
    ];
    for (spec, l, k) in cases {
        let t = Topology::parse(spec).unwrap();
        let n = t.len();
        let sys = trip(&t, &vec![l; n], &vec![k; n]);
        let inst = sys.instance.clone();
        let r = simulate(&sys.instance, sys.procs, &sequential(2));
        assert!(r.ok(), "{spec}: {}", r.failure_text());
        assert!(r.pairs_completed >= n * 2, "{spec}");
        for k in ["Trip", "Blocked", "Preempt"] {
            assert_eq!(kind(&r, k), 0, "{spec}: no contention, no {k}");
        }
        for p in &r.pairs {
            let c = inst.topology().degree(p.process) as u64 + 1;
            assert_eq!(p.messages, 6 * c, "{spec}: {p:?}");
            assert_eq!(p.remote_messages, 6 * (c - 1), "{spec}: {p:?}");
        }
    }
    // torus:5x5, (0, 4), unit delays: 30 messages per pair
    let t = Topology::parse("torus:5x5").unwrap();
    let sys = trip(&t, &[0; 25], &[4; 25]);
    let r = simulate(&sys.instance, sys.procs, &sequential(1));
    assert!(r.ok(), "{}", r.failure_text());
    assert_eq!(r.messages_per_pair.mean, 30.0);
}

/// At the least slack on tori, [2, 3] everywhere, most safe starts sit in small components of
/// the configurations closed under moves within those bounds, where few processes can ever
/// move; the start `Lkcs::build` finds lies where every process can, so the sequential
/// workload takes no round trip and every pair costs exactly 6(|N_i|+1).
#[test]
fn the_sequential_workload_at_the_least_slack_takes_no_round_trip_from_the_start_found() {
    for spec in [
        "torus:5x5",
        "torus:4x6",
        "torus:3x7",
        "torus:5x8",
        "torus:7x7",
    ] {
        let t = Topology::parse(spec).unwrap();
        let n = t.len();
        let sys = trip(&t, &vec![1; n], &vec![4; n]);
        let r = simulate(
            &sys.instance,
            sys.procs,
            &SimConfig {
                delay: Delay::Unit,
                ..sequential(2)
            },
        );
        assert!(r.ok(), "{spec}: {}", r.failure_text());
        assert!(r.pairs_completed >= 2 * n, "{spec}");
        assert_eq!(kind(&r, "Trip"), 0, "{spec}");
        assert!(r.pairs.iter().all(|p| p.messages == 30), "{spec}");
    }
}

/// From a start where 20 of torus:5x5's 25 processes can never move within [2, 3] (its
/// component of the configurations within those bounds has 10 members), the sequential
/// workload makes each of their pairs as a round trip and its return, back to back.
#[test]
fn from_a_dead_end_the_sequential_workload_makes_whole_pairs_as_round_trips() {
    let t = Topology::parse("torus:5x5").unwrap();
    let inst = Lkcs::instance(&t, &[1; 25], &[4; 25]).unwrap();
    let start = lkcs::parse_initial("in:0,1,2,4,7,9,10,11,13,15,16,18,23", 25).unwrap();
    let sys = Lkcs::build(&inst, &Leaders::Auto, Some(&start), LkcsRules::TRIP).unwrap();
    let r = simulate(&sys.instance, sys.procs, &sequential(2));
    assert!(r.ok(), "{}", r.failure_text());
    assert!(r.pairs_completed >= 50);
    let (go, end) = (kind(&r, "TripGo"), kind(&r, "TripEnd"));
    // each round trip: one TripGo and, at its return, one TripEnd per member of N_q ∪ {P_q}
    assert!(go >= 5 * 20 * 2, "{go} TripGo");
    assert_eq!(go, end, "every round trip returned");
}

/// Sequential runs on dense random graphs at the least slack, where the tightened bounds
/// leave many processes no move: every pair completes, safely.
#[test]
fn the_sequential_workload_completes_on_dense_random_graphs_with_the_least_slack() {
    for (n, p) in [(20, 0.5), (30, 0.4)] {
        for g in 0..3 {
            let t = Topology::random(n, p, 90 + g).expect("connected");
            let (l, k) = least_slack_around_a_reference(&t, g);
            let sys = trip(&t, &l, &k);
            let r = simulate(&sys.instance, sys.procs, &sequential(2));
            assert!(r.ok(), "{} {l:?} {k:?}: {}", t.name(), r.failure_text());
            assert!(r.pairs_completed >= 2 * n);
            assert_eq!(kind(&r, "TripGo"), kind(&r, "TripEnd"), "{}", t.name());
        }
    }
}

#[test]
fn the_start_and_capacities_follow_the_tightened_bounds() {
    // torus:4x4 (|N_i|+1 = 5) with (0, 4): only k is tightened (K = 3, L = 0 = l)
    let t = Topology::parse("torus:4x4").unwrap();
    let sys = trip(&t, &[0; 16], &[4; 16]);
    for p in t.processes() {
        let b = sys.operating.bounds(p);
        assert_eq!((b.l, b.k), (0, 3));
        let c = sys.operating.in_cs_around(&sys.initial, p);
        assert!(c <= 3, "{p} starts with {c} in the CS around it");
    }
    // complete:6 with (1, 6): only l is tightened (k = |N_i|+1 cannot be broken)
    let t = Topology::complete(6).unwrap();
    let sys = trip(&t, &[1; 6], &[6; 6]);
    let b = sys.operating.bounds(lkcs::ProcessId(0));
    assert_eq!((b.l, b.k), (2, 6));
    assert!(sys.initial.iter().filter(|s| **s == CsState::InCs).count() >= 2);
}

#[test]
fn build_refuses_a_leader_and_bounds_too_narrow_to_tighten() {
    let t = Topology::complete(6).unwrap();
    let inst = Lkcs::instance(&t, &[1; 6], &[5; 6]).unwrap();
    let e = Lkcs::build(&inst, &Leaders::All, None, LkcsRules::TRIP).unwrap_err();
    assert!(e.to_string().contains("no leader"), "{e}");
    // (2, 4) on |N_i|+1 = 6: L = 3, K = 3
    let inst = Lkcs::instance(&t, &[2; 6], &[4; 6]).unwrap();
    let e = Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::TRIP).unwrap_err();
    let every: Vec<lkcs::ProcessId> = t.processes().collect();
    assert_eq!(
        e.problems,
        vec![lkcs::Problem::NoRoomToTighten {
            processes: every.clone()
        }],
        "every process is left with L = K = 3"
    );
    assert!(e.to_string().contains("L_i >= K_i"), "{e}");
    // the default LKCS says the same as the round trip's reason, then that the leader rules
    // were not run, each a variant to match
    let e = Lkcs::build_default(&inst, None).unwrap_err();
    assert_eq!(
        e.problems,
        vec![
            lkcs::Problem::RoundTrip(Box::new(lkcs::Problem::NoRoomToTighten {
                processes: every
            })),
            lkcs::Problem::LeaderRulesNotRun,
        ],
        "the default refuses with the round trip's reason, typed"
    );
    // a given start must be within the tightened bounds: nobody in the CS breaks L = 2
    let inst = Lkcs::instance(&t, &[1; 6], &[5; 6]).unwrap();
    let out = vec![CsState::OutCs; 6];
    let e = Lkcs::build(&inst, &Leaders::Auto, Some(&out), LkcsRules::TRIP)
        .expect_err("a start below the tightened L = 2");
    assert!(
        e.to_string()
            .contains("where LKCS tightens its bounds it needs [2, 4]"),
        "{e}"
    );
}

#[test]
fn the_leader_rules_send_no_round_trip_message() {
    let t = Topology::parse("torus:4x4").unwrap();
    let inst = Lkcs::instance(&t, &[1; 16], &[4; 16]).unwrap();
    let sys = Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::CORRECTED).unwrap();
    let r = run(
        sys,
        SimConfig {
            workload: Workload::Concurrent,
            ..concurrent(1, 3)
        },
    );
    assert!(r.ok(), "{}", r.failure_text());
    for k in ["Trip", "TripLock", "TripGo", "TripEnd"] {
        assert_eq!(kind(&r, k), 0, "{k}");
    }
}

/// `lkcs simulate` with these arguments, which must succeed: its JSON report.
fn simulate_json(args: &str) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lkcs"))
        .arg("simulate")
        .args(args.split_whitespace())
        .arg("--json")
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

#[test]
fn the_cli_runs_the_round_trip_as_variant_trip_and_only_for_lkcs() {
    use std::process::Command;
    let lkcs = env!("CARGO_BIN_EXE_lkcs");
    let v = simulate_json(
        "--algorithm lkcs --topology torus:5x5 --l 0 --k 4 --variant trip \
         --workload sequential --pairs 1 --delay unit",
    );
    assert_eq!(v["variant"], "trip");
    assert_eq!(v["messages_per_pair"]["mean"], 30.0);
    // a concurrent run at the least slack takes round trips
    let v = simulate_json(
        "--algorithm lkcs --topology torus:6x6 --l 1 --k 4 --variant trip --delay unit \
         --pairs 3",
    );
    assert!(
        v["messages_by_kind"]["TripGo"].as_u64().unwrap_or(0) > 0,
        "{v}"
    );
    // refused elsewhere (exit 2)
    for alg in ["lmutin", "maekawa"] {
        let out = Command::new(lkcs)
            .args([
                "simulate",
                "--algorithm",
                alg,
                "--topology",
                "complete:5",
                "--variant",
                "trip",
            ])
            .output()
            .expect("the binary runs");
        assert_eq!(out.status.code(), Some(2), "{alg}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("--variant trip"));
    }
}

/// Configuration 43 of the liveness sweep (`lkcs_liveness -- replay 43`: a dense random graph,
/// per-process bounds k_i = l_i + 3, unit delays): the default rules stall there (the event
/// limit reached while some process still owes pairs), the round trip completes every pair.
#[test]
fn the_round_trip_completes_a_run_on_which_the_default_rules_stall() {
    let bounds = std::env::temp_dir().join(format!("lkcs-trip-43-{}.json", std::process::id()));
    std::fs::write(
        &bounds,
        r#"{"l": [4,7,2,5,3,6,3,2,1,3,5,4,8,4,3,5,6,2,5,6,1,4],
            "k": [7,10,5,8,6,9,6,5,4,6,8,7,11,7,6,8,9,5,8,9,4,7]}"#,
    )
    .unwrap();
    let args = |variant: &str| {
        format!(
            "--algorithm lkcs --variant {variant} --topology random:22:0.527:807529 \
             --bounds {} --delay unit --workload concurrent --pairs 3 --seed 651 \
             --max-events 1000000",
            bounds.display()
        )
    };
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lkcs"))
        .arg("simulate")
        .args(args("corrected --leader auto").split_whitespace())
        .arg("--json")
        .output()
        .expect("the binary runs");
    assert_eq!(out.status.code(), Some(1), "the default rules stall here");
    let stalled: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert!(stalled["stalled"].is_string(), "{stalled}");
    assert_eq!(stalled["safety_violations"], 0);
    // the round trip, asked for or the default
    for variant in ["trip", "corrected"] {
        let v = simulate_json(&args(variant));
        assert_eq!(v["variant"], "trip", "{v}");
        assert!(v["stalled"].is_null(), "{v}");
        assert_eq!(v["safety_violations"], 0);
        assert!(v["pairs_completed"].as_u64().unwrap() >= 66, "{v}");
    }
    std::fs::remove_file(&bounds).ok();
}

/// `lkcs simulate` with these arguments: its exit code and standard error.
fn simulate_refused(args: &str) -> (Option<i32>, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_lkcs"))
        .arg("simulate")
        .args(args.split_whitespace())
        .output()
        .expect("the binary runs");
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn lkcs_runs_the_round_trip_by_default_and_the_leader_rules_only_when_named() {
    // the default is the round trip: the done-when command, 30 messages a pair
    let v = simulate_json(
        "--algorithm lkcs --topology torus:5x5 --l 1 --k 4 --workload sequential --pairs 1 \
         --delay unit",
    );
    assert_eq!(v["variant"], "trip");
    assert_eq!(v["messages_per_pair"]["min"], 30.0);
    assert_eq!(v["messages_per_pair"]["max"], 30.0);
    // no process of degree 4 (no leader possible): the round trip needs none
    let v = simulate_json("--algorithm lkcs --topology ring:9 --l 1 --k 3 --pairs 2");
    assert_eq!(v["variant"], "trip");
    assert!(v["pairs_completed"].as_u64().unwrap() >= 18, "{v}");
    assert!(
        v["messages_by_kind"]["TripGo"].as_u64().unwrap_or(0) > 0,
        "at L_i = 2 of 3 every exit is a round trip: {v}"
    );
    // the round trip alone does not take a leader
    let (code, err) = simulate_refused(
        "--algorithm lkcs --topology ring:9 --l 1 --k 3 --variant trip --leader auto",
    );
    assert_eq!(code, Some(2));
    assert!(err.contains("no leader"), "{err}");
    // a leader named selects the leader rules
    let (code, err) =
        simulate_refused("--algorithm lkcs --topology ring:9 --l 1 --k 3 --leader auto");
    assert_eq!(code, Some(2));
    assert!(err.contains("|N_LDR| >= 4"), "{err}");
    // grid:3x7 with one interior process at l = 1, k = 3: the round trip would leave it
    // L = K = 2 and refuses. The leader rules could run it (P12 is four hops from the
    // automatic leader) but they can stall, so the default refuses, naming P12 and the way
    // to run them; named, they run
    let t = Topology::parse("grid:3x7").unwrap();
    let mut l = vec![0; t.len()];
    let mut k: Vec<usize> = t.processes().map(|p| t.degree(p) + 1).collect();
    (l[12], k[12]) = (1, 3);
    let file = std::env::temp_dir().join(format!("lkcs-fallback-{}.json", std::process::id()));
    std::fs::write(&file, serde_json::json!({ "l": l, "k": k }).to_string()).unwrap();
    let args = format!(
        "--algorithm lkcs --topology grid:3x7 --bounds {} --pairs 2",
        file.display()
    );
    let (code, err) = simulate_refused(&args);
    assert_eq!(
        code,
        Some(2),
        "no silent fallback to the leader rules: {err}"
    );
    assert!(
        err.lines()
            .any(|l| l.contains("the round trip: ") && l.contains("P12")),
        "the round trip's reason names P12: {err}"
    );
    assert!(
        err.lines()
            .any(|l| l.contains("the leader rules: not run") && l.contains("--leader auto")),
        "the refusal says how to run the leader rules: {err}"
    );
    let v = simulate_json(&format!("{args} --leader auto"));
    assert_eq!(v["variant"], "corrected", "{v}");
    assert!(v["pairs_completed"].as_u64().unwrap() >= 42, "{v}");
    assert_eq!(v["safety_violations"], 0, "{v}");
    let (code, err) = simulate_refused(&format!("{args} --variant trip"));
    assert_eq!(code, Some(2));
    assert!(err.contains("P12"), "{err}");
    std::fs::remove_file(&file).ok();
    // complete:5 with (1, 3): the round trip refuses it, and so do the leader rules when
    // named (k − l = 2 < 3 within two hops of the leader)
    let (code, err) = simulate_refused("--algorithm lkcs --topology complete:5 --l 1 --k 3");
    assert_eq!(code, Some(2));
    assert!(err.contains("the round trip: "), "{err}");
    let (code, err) =
        simulate_refused("--algorithm lkcs --topology complete:5 --l 1 --k 3 --leader auto");
    assert_eq!(code, Some(2));
    assert!(
        err.contains("no process can lead LKCS"),
        "the leader rules' own refusal: {err}"
    );
}

/// Withdrawals (`CsObject::withdraw`) mixed into seeded random schedules over FIFO links, on
/// random graphs, tori and complete graphs with the least slack: after every event the
/// problem's bounds and every object's invariants hold, and a withdrawn process never shows
/// the state its sequence was heading to. Once the network is quiet, every withdrawal has
/// ended (its `Withdrawn` answers came back) and nothing is left behind: no arbiter keeps a
/// request, a grant in progress, a Preempt or a trip lock for a process with no move in
/// progress, and around every process whose closed neighbourhood is idle its arbiters hold
/// exactly one MUTIN permission per member out of the CS and one MUTEX permission per member
/// in it.
#[test]
fn withdrawals_never_change_the_state_and_leave_no_permission_behind() {
    use lkcs::{algo::lkcs::At, cs::CsObject};
    let (mut withdrawals, mut systems) = (0usize, 0usize);
    for seed in 0..120u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let t = match seed % 3 {
            0 => Topology::random(rng.random_range(6..=12), 0.55, seed).expect("connected"),
            1 => Topology::torus(rng.random_range(3..=4), rng.random_range(3..=4)).expect("torus"),
            _ => Topology::complete(rng.random_range(5..=8)).expect("complete"),
        };
        let (l, k) = least_slack_around_a_reference(&t, seed);
        let Ok(sys) = Lkcs::build(
            &Lkcs::instance(&t, &l, &k).expect("valid bounds"),
            &Leaders::Auto,
            None,
            LkcsRules::TRIP,
        ) else {
            continue;
        };
        systems += 1;
        let (inst, mut procs) = (sys.instance, sys.procs);
        let what = format!("{} seed {seed}", t.name());
        // nothing to withdraw: false; a committed trip (not visible here) is false too
        let expect = |p: &Lkcs, _| p.pending().is_none().then_some(false);
        let (taken, running) = withdrawal_schedule(&what, &inst, &mut procs, &mut rng, 600, expect);
        withdrawals += taken;
        assert_eq!(
            running,
            Vec::<usize>::new(),
            "{what}: withdrawals never ended"
        );
        // nothing but state holds is kept anywhere for a process with no move in progress
        for q in t.processes() {
            if procs[q.index()].pending().is_some() {
                continue;
            }
            for j in t.closed(q) {
                let arb = procs[j.index()].round_trip().expect("round trip");
                assert!(
                    arb.keeps_only_state_for(q),
                    "{} seed {seed}: {j} keeps a request, a grant in progress, a Preempt or a trip lock for the idle {q}",
                    t.name()
                );
            }
        }
        for j in t.processes() {
            let around = t.closed(j);
            let idle = around.iter().all(|&q| {
                let p = &procs[q.index()];
                p.pending().is_none() && !p.round_trip().expect("round trip").away()
            });
            if !idle {
                continue;
            }
            let inside = around
                .iter()
                .filter(|q| procs[q.index()].state() == CsState::InCs)
                .count();
            let arb = procs[j.index()].round_trip().expect("round trip");
            assert_eq!(
                (arb.granted(At::Mutin), arb.granted(At::Mutex)),
                (around.len() - inside, inside),
                "{} seed {seed}: {j}'s permissions (MUTIN, MUTEX) around an idle neighbourhood",
                t.name()
            );
        }
    }
    assert!(systems >= 60, "only {systems} systems built");
    assert!(withdrawals > 300, "only {withdrawals} withdrawals drawn");
}

/// Delivers every message in flight (the lowest busy link first, FIFO on each link) until the
/// network is quiet, checking the bounds and every object's invariants after each delivery.
fn drain_fifo(
    inst: &lkcs::Instance,
    procs: &mut [Lkcs],
    links: &mut [std::collections::VecDeque<lkcs::algo::lkcs::LkcsMsg>],
) {
    use lkcs::{
        cs::{CsObject, Outbox},
        ProcessId,
    };
    let n = procs.len();
    let mut budget = 100_000;
    while let Some(i) = (0..n * n).find(|&i| !links[i].is_empty()) {
        let m = links[i].pop_front().expect("a busy link");
        let (from, to) = (i / n, i % n);
        let mut out = Outbox::new();
        procs[to].on_message(ProcessId::from(from), m, &mut out);
        for (dest, m) in out.drain() {
            links[to * n + dest.index()].push_back(m);
        }
        let states: Vec<CsState> = procs.iter().map(|p| p.state()).collect();
        assert_eq!(inst.violations(&states), Vec::new(), "{states:?}");
        for p in procs.iter() {
            p.check_invariants().expect("invariant T");
        }
        budget -= 1;
        assert!(budget > 0, "the network never went quiet");
    }
}

/// A retired process gives back what it set aside for a return it never makes
/// (`CsObject::retire`). On complete:8 with (2, 6) (operating bounds (3, 5)) and P0–P2 in the
/// CS, three times an active process exits (at the tightened lower bound: by round trip) and
/// retires, and an inactive one enters. Without `retire`, the three set-asides fill MUTEX
/// (capacity 5): the third entry needs a round trip, whose lock is freed only once MUTIN is
/// back within capacity, which needs an entry, and it never completes. With it, every entry
/// completes by normal grants.
#[test]
fn a_retired_process_gives_back_its_set_aside() {
    use lkcs::cs::{CsObject, Outbox};
    use std::collections::VecDeque;
    let t = Topology::complete(8).expect("complete");
    let initial: Vec<CsState> = (0..8)
        .map(|i| if i < 3 { CsState::InCs } else { CsState::OutCs })
        .collect();
    let inst = Lkcs::instance(&t, &[2; 8], &[6; 8]).expect("valid bounds");
    for retire in [false, true] {
        let sys = Lkcs::build(&inst, &Leaders::Auto, Some(&initial), LkcsRules::TRIP)
            .expect("a start within the operating bounds");
        let mut procs = sys.procs;
        let mut links: Vec<VecDeque<lkcs::algo::lkcs::LkcsMsg>> =
            (0..64).map(|_| VecDeque::new()).collect();
        let call = |procs: &mut [Lkcs], links: &mut [VecDeque<_>], p: usize| {
            let mut out = Outbox::new();
            let seq = lkcs::cs::Sequence::leaving(procs[p].state());
            procs[p].begin(seq, &mut out).expect("calling convention");
            for (dest, m) in out.drain() {
                links[p * 8 + dest.index()].push_back(m);
            }
            drain_fifo(&inst, procs, links);
        };
        for (leaving, entering) in [(0, 3), (1, 4), (2, 5)] {
            call(&mut procs, &mut links, leaving);
            let trip = procs[leaving].round_trip().expect("round trip");
            assert_eq!(procs[leaving].state(), CsState::OutCs, "P{leaving} exited");
            assert!(
                trip.away(),
                "P{leaving}'s exit at the lower bound went by round trip"
            );
            if retire {
                let mut out = Outbox::new();
                procs[leaving].retire(&mut out);
                assert_eq!(
                    out.sends().len(),
                    8,
                    "one Release per member of N_{leaving}"
                );
                for (dest, m) in out.drain() {
                    links[leaving * 8 + dest.index()].push_back(m);
                }
                drain_fifo(&inst, &mut procs, &mut links);
                assert!(!procs[leaving].round_trip().expect("trip").away());
            }
            call(&mut procs, &mut links, entering);
            let done = procs[entering].state() == CsState::InCs;
            if retire || entering < 5 {
                assert!(done, "P{entering}'s entry (retire: {retire}) completed");
            } else {
                // the known stall: the set-asides of P0–P2 fill MUTEX
                assert!(!done, "without retire the third entry waits for good");
                assert_eq!(procs[entering].pending(), Some(lkcs::cs::Sequence::Entry));
            }
        }
        if retire {
            // around every member, MUTIN and MUTEX count the states exactly again
            for j in t.processes() {
                let arb = procs[j.index()].round_trip().expect("round trip");
                assert_eq!(
                    (
                        arb.granted(lkcs::algo::lkcs::At::Mutin),
                        arb.granted(lkcs::algo::lkcs::At::Mutex)
                    ),
                    (5, 3)
                );
            }
        }
    }
}
