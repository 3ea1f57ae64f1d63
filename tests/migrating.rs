//! The migrating-controller algorithms CDC and DDC through the simulator and the runtime:
//! safety (at most one process in the CS, checked after every event) and liveness (every
//! process completes its pairs) for n = 3..32, every migration condition, many seeds with
//! random delays; message counts against §4.1.4 / §4.2.4 of the paper; one test per
//! deviation from the printed text (see `src/algo/migrating.rs`).

mod common;

use common::run_ok;
use lkcs::quota::QuorumSystem;
use lkcs::{
    algo::migrating::{Cdc, CdcTransfer, Ddc, MigratingMsg, MigratingRules, MigrationCondition},
    cs::{CsObject, CsState, Outbox, Sequence},
    runtime::{Runtime, RuntimeConfig},
    sim::{simulate, Delay, SimConfig, SimReport, Workload},
    Instance, Problem, ProcessId, Topology,
};
#[cfg(feature = "check")]
use lkcs::{
    check,
    check::{CheckConfig, Verdict},
};
use std::time::Duration;

const SIZES: [usize; 7] = [3, 4, 5, 8, 13, 21, 32];

fn conditions() -> Vec<MigrationCondition> {
    vec![
        MigrationCondition::Never,
        MigrationCondition::Always,
        MigrationCondition::Counter { maxreq: 2 },
        MigrationCondition::Counter { maxreq: 5 },
        MigrationCondition::timer_units(0),
        MigrationCondition::timer_units(15),
    ]
}

fn concurrent(seed: u64, pairs: usize, max_delay: u64) -> SimConfig {
    SimConfig {
        seed,
        pairs,
        delay: Delay::Uniform {
            min: 1,
            max: max_delay,
        },
        workload: Workload::Concurrent,
        think_max: 8,
        max_events: 2_000_000,
        ..SimConfig::default()
    }
}

fn sequential(pairs: usize) -> SimConfig {
    SimConfig {
        pairs,
        workload: Workload::Sequential,
        ..SimConfig::default()
    }
}

fn all_out(n: usize) -> Vec<CsState> {
    vec![CsState::OutCs; n]
}

fn cdc(
    n: usize,
    init: &[CsState],
    c: MigrationCondition,
    r: MigratingRules,
) -> (Instance, Vec<Cdc>) {
    Cdc::system(&Topology::complete(n).unwrap(), init, c, r).unwrap()
}

fn ddc(
    n: usize,
    init: &[CsState],
    c: MigrationCondition,
    r: MigratingRules,
) -> (Instance, Vec<Ddc>) {
    Ddc::system(&Topology::complete(n).unwrap(), init, c, r).unwrap()
}

fn kind(r: &SimReport, k: &str) -> u64 {
    r.messages_by_kind.get(k).copied().unwrap_or(0)
}

const OK: MigratingRules = MigratingRules::CORRECTED;

#[test]
fn both_are_safe_and_live_for_every_size_and_condition() {
    let (mut forwarded_runs, mut orphan_runs, mut migrations) = (0, 0, 0);
    for n in SIZES {
        let seeds = if n <= 8 { 80 } else { 12 };
        for c in conditions() {
            for seed in 0..seeds {
                let s = seed * 1000 + n as u64;
                for max_delay in [12, 100] {
                    let cfg = concurrent(s, 3, max_delay);
                    let (inst, procs) = cdc(n, &all_out(n), c, OK);
                    let r = run_ok(&format!("cdc n={n} {c:?} seed {s}"), &inst, procs, &cfg);
                    forwarded_runs += usize::from(kind(&r, "ForwardedRequest") > 0);
                    migrations += kind(&r, "BecomeController");
                    let (inst, procs) = ddc(n, &all_out(n), c, OK);
                    let r = run_ok(&format!("ddc n={n} {c:?} seed {s}"), &inst, procs, &cfg);
                    forwarded_runs += usize::from(kind(&r, "ForwardedRequest") > 0);
                    orphan_runs += usize::from(kind(&r, "Orphan") > 0);
                }
            }
        }
    }
    eprintln!("{forwarded_runs} runs forwarded requests, {orphan_runs} DDC runs handed back an orphan, {migrations} CDC migrations");
    // the sweep exercises migrations while requests are in flight
    assert!(forwarded_runs > 50, "{forwarded_runs}");
    assert!(orphan_runs > 0);
}

#[test]
fn a_process_may_start_in_the_cs() {
    for n in [3, 6, 11] {
        for holder in [0, n - 1] {
            let mut init = all_out(n);
            init[holder] = CsState::InCs;
            for c in conditions() {
                for seed in 0..8 {
                    let cfg = concurrent(seed, 3, 12);
                    let (inst, procs) = cdc(n, &init, c, OK);
                    run_ok(&format!("cdc n={n} in:{holder}"), &inst, procs, &cfg);
                    let (inst, procs) = ddc(n, &init, c, OK);
                    run_ok(&format!("ddc n={n} in:{holder}"), &inst, procs, &cfg);
                }
            }
        }
    }
}

#[test]
fn two_processes_in_the_cs_are_refused_and_so_are_other_graphs() {
    let mut init = all_out(4);
    init[0] = CsState::InCs;
    init[2] = CsState::InCs;
    let t = Topology::complete(4).unwrap();
    let err =
        Cdc::system(&t, &init, MigrationCondition::Never, OK).expect_err("two processes in the CS");
    let unsafe_at = |i| Problem::UnsafeInitial {
        process: ProcessId(i),
        in_cs: 2,
        l: 0,
        k: 1,
    };
    assert_eq!(
        err.problems,
        (0..4).map(unsafe_at).collect::<Vec<_>>(),
        "{err}"
    );
    let ring = Topology::ring(4).unwrap();
    let err = Ddc::system(&ring, &all_out(4), MigrationCondition::Never, OK).unwrap_err();
    assert!(err.to_string().contains("complete"), "{err}");
    let err = MigrationCondition::from_options(Some(0), None).expect_err("maxreq 0");
    assert!(
        err.to_string().contains("--maxreq must be at least 1"),
        "{err}"
    );
    let err = MigrationCondition::from_options(Some(2), Some(3)).expect_err("both conditions");
    assert!(
        err.to_string()
            .contains("--maxreq and --migrate-after are exclusive"),
        "{err}"
    );
    assert_eq!(
        MigrationCondition::from_options(None, None).unwrap(),
        MigrationCondition::Never
    );
}

/// Sequential workload, unit delays: a pair costs 3 remote messages when its process is not
/// the controller and 0 when it is; a migration costs n−1 (attributed to the exiting pair).
#[test]
fn sequential_costs_match_the_paper() {
    for n in [3, 5, 9, 16] {
        let pairs = 8;
        for maxreq in [1usize, 2, 4, 16] {
            let c = MigrationCondition::Counter { maxreq };
            let (inst, procs) = cdc(n, &all_out(n), c, OK);
            let rc = run_ok("cdc", &inst, procs, &sequential(pairs));
            let (inst, procs) = ddc(n, &all_out(n), c, OK);
            let rd = run_ok("ddc", &inst, procs, &sequential(pairs));
            for r in [&rc, &rd] {
                let total = (n * pairs) as u64;
                let m = (n - 1) as u64;
                assert_eq!(kind(r, "BecomeController"), total / maxreq as u64);
                assert_eq!(kind(r, "NextRequestor") + kind(r, "Orphan"), 0);
                for p in &r.pairs {
                    assert!(
                        [0, 3, m, 3 + m].contains(&p.remote_messages),
                        "{p:?} n={n} maxreq={maxreq}"
                    );
                }
                let local = r
                    .pairs
                    .iter()
                    .filter(|p| p.remote_messages == 0 || p.remote_messages == m)
                    .count() as u64;
                let expected =
                    (3 * (total - local) + m * (total / maxreq as u64)) as f64 / total as f64;
                assert!((r.remote_messages_per_pair.mean - expected).abs() < 1e-9);
                // a controller's tenure is maxreq consecutive round-robin pairs: its own pair
                // comes up at most ⌈maxreq/n⌉ times in it
                assert!(local <= (total / maxreq as u64 + 1) * maxreq.div_ceil(n) as u64);
                // 3 + (n−1)/maxreq, less the controller's own (local) pairs
                let paper = 3.0 + m as f64 / maxreq as f64;
                assert!(r.remote_messages_per_pair.mean <= paper + 1e-9);
                eprintln!(
                    "n={n} maxreq={maxreq}: {:.3} remote per pair ({local} local pairs of {total}), paper {paper:.3}",
                    r.remote_messages_per_pair.mean
                );
            }
        }
        // no migration: 3 per pair of every process but the controller P0
        let (inst, procs) = cdc(n, &all_out(n), MigrationCondition::Never, OK);
        let r = run_ok("cdc never", &inst, procs, &sequential(pairs));
        for p in &r.pairs {
            let want = if p.process.index() == 0 { 0 } else { 3 };
            assert_eq!(p.remote_messages, want, "{p:?}");
        }
    }
}

/// Concurrent workload: DDC stays within 5 + (n−1)/maxreq plus forwarding on average.
#[test]
fn ddc_concurrent_costs_stay_near_the_paper() {
    for n in [5, 9, 16] {
        for maxreq in [1usize, 4, 16] {
            let c = MigrationCondition::Counter { maxreq };
            for seed in 0..4 {
                let (inst, procs) = ddc(n, &all_out(n), c, OK);
                let r = run_ok("ddc", &inst, procs, &concurrent(seed, 4, 12));
                let forwards = kind(&r, "ForwardedRequest");
                let per_pair = r.remote_messages_per_pair.mean;
                let bound = 5.0
                    + (n - 1) as f64 / maxreq as f64
                    + (forwards + kind(&r, "Orphan")) as f64 / r.pairs_completed as f64;
                assert!(
                    per_pair <= bound + 1e-9,
                    "n={n} maxreq={maxreq}: {per_pair} > {bound}"
                );
                assert!(
                    kind(&r, "NextRequestor") > 0,
                    "contention builds a distributed queue"
                );
            }
        }
    }
}

#[test]
fn the_timer_condition_reads_driver_time() {
    // unit delays, sequential: a long timer migrates less often than a short one
    let n = 6;
    let count = |after| {
        let (inst, procs) = cdc(n, &all_out(n), MigrationCondition::timer_units(after), OK);
        kind(
            &run_ok("timer", &inst, procs, &sequential(6)),
            "BecomeController",
        )
    };
    let (short, long, never) = (count(0), count(20), count(u64::MAX));
    assert_eq!(short, (n * 6) as u64, "timer 0 migrates at every exit");
    assert!(0 < long && long < short, "{long} / {short}");
    assert_eq!(never, 0);
    assert_eq!(
        MigrationCondition::timer(Duration::from_millis(2)),
        MigrationCondition::Timer { after: 2000 }
    );
}

#[test]
fn runtime_runs_cdc_and_ddc_with_a_duration_timer() {
    fn run<A: CsObject>(inst: Instance, procs: Vec<A>) {
        let mut rt = Runtime::start(
            procs,
            RuntimeConfig {
                monitor: Some(inst),
            },
        )
        .unwrap();
        let handles = rt.take_handles().unwrap_or_default();
        std::thread::scope(|s| {
            for h in &handles {
                s.spawn(move || {
                    for _ in 0..30 {
                        h.entry().expect("entry");
                        h.exit().expect("exit");
                    }
                });
            }
        });
        rt.shutdown();
        let report = rt.report();
        assert_eq!(report.violations, 0, "{:?}", report.first_violations);
        assert_eq!(report.state_changes, 6 * 30 * 2);
    }
    let c = MigrationCondition::timer(Duration::from_micros(200));
    let (inst, procs) = cdc(6, &all_out(6), c, OK);
    run(inst, procs);
    let (inst, procs) = ddc(
        6,
        &all_out(6),
        MigrationCondition::Counter { maxreq: 3 },
        OK,
    );
    run(inst, procs);
}

// ---- deviations from the printed text (src/algo/migrating.rs) ----

/// The sweep of the module docs: complete:4, uniform 1..=12 delays, think 0..=8, 3 pairs.
fn sweep_cfg(seed: u64) -> SimConfig {
    SimConfig {
        max_events: 200_000,
        ..concurrent(seed, 3, 12)
    }
}

fn cdc_run(rules: MigratingRules, c: MigrationCondition, cfg: &SimConfig) -> SimReport {
    let (inst, procs) = cdc(4, &all_out(4), c, rules);
    simulate(&inst, procs, cfg)
}

fn ddc_run(rules: MigratingRules, c: MigrationCondition, cfg: &SimConfig, n: usize) -> SimReport {
    let (inst, procs) = ddc(n, &all_out(n), c, rules);
    simulate(&inst, procs, cfg)
}

#[test]
fn deviation_1_current_controller_is_k_not_1() {
    let printed = MigratingRules {
        literal_controller_one: true,
        ..OK
    };
    let r = cdc_run(printed, MigrationCondition::Always, &sweep_cfg(114));
    assert!(
        r.stalled.is_some(),
        "printed `:= 1` forwards for ever: {}",
        r.failure_text()
    );
    assert!(cdc_run(OK, MigrationCondition::Always, &sweep_cfg(114)).ok());
}

#[test]
fn deviation_2_migrate_or_grant_and_carry_the_queue() {
    let printed = MigratingRules {
        migrate_and_grant: true,
        ..OK
    };
    let r = ddc_run(printed, MigrationCondition::Always, &sweep_cfg(0), 4);
    assert!(r.safety_violations > 0, "two grants: {}", r.failure_text());
    assert!(!cdc_run(printed, MigrationCondition::Always, &sweep_cfg(0)).ok());
    for seed in 0..100 {
        assert!(cdc_run(OK, MigrationCondition::Always, &sweep_cfg(seed)).ok());
        assert!(ddc_run(OK, MigrationCondition::Always, &sweep_cfg(seed), 4).ok());
    }
}

#[test]
fn deviation_3_wake_up_grants_only_when_free() {
    let printed = MigratingRules {
        unguarded_wake_up: true,
        ..OK
    };
    // no migration needed: two requests meet a free controller
    let r = cdc_run(printed, MigrationCondition::Never, &sweep_cfg(0));
    assert!(r.safety_violations > 0, "{}", r.failure_text());
    assert!(cdc_run(OK, MigrationCondition::Never, &sweep_cfg(0)).ok());
    #[cfg(feature = "check")]
    {
        // and exhaustively on three processes
        let t = Topology::complete(3).unwrap();
        let cfg = CheckConfig {
            pairs: 1,
            ..CheckConfig::default()
        };
        let (inst, procs) =
            Ddc::system(&t, &all_out(3), MigrationCondition::Never, printed).unwrap();
        let r = check::check(&inst, procs, &cfg);
        assert_eq!(
            r.verdict,
            Verdict::Violated {
                property: "safety".into()
            }
        );
        let (inst, procs) = Ddc::system(&t, &all_out(3), MigrationCondition::Never, OK).unwrap();
        assert_eq!(check::check(&inst, procs, &cfg).verdict, Verdict::Proved);
    }
}

#[test]
fn deviation_6_a_late_next_requestor_is_handed_back() {
    let printed = MigratingRules {
        unguarded_next_requestor: true,
        ..OK
    };
    // seeded: complete:3, delays uniform in 1..=100
    let cfg = SimConfig {
        max_events: 200_000,
        ..concurrent(47, 3, 100)
    };
    let r = ddc_run(printed, MigrationCondition::Always, &cfg, 3);
    assert!(r.deadlock, "the successor is lost: {}", r.failure_text());
    let r = ddc_run(OK, MigrationCondition::Always, &cfg, 3);
    assert!(r.ok(), "{}", r.failure_text());
    assert!(
        kind(&r, "Orphan") > 0,
        "the corrected run hands the successor back"
    );
    #[cfg(feature = "check")]
    {
        // exhaustively: complete:3, maxreq 2, 2 pairs
        let t = Topology::complete(3).unwrap();
        let cfg = CheckConfig {
            pairs: 2,
            ..CheckConfig::default()
        };
        let c = MigrationCondition::Counter { maxreq: 2 };
        let (inst, procs) = Ddc::system(&t, &all_out(3), c, printed).unwrap();
        let r = check::check(&inst, procs, &cfg);
        assert_eq!(
            r.verdict,
            Verdict::Violated {
                property: "no deadlock".into()
            }
        );
        let (inst, procs) = Ddc::system(&t, &all_out(3), c, OK).unwrap();
        assert_eq!(check::check(&inst, procs, &cfg).verdict, Verdict::Proved);
    }
}

#[test]
fn the_printed_variant_fails() {
    let r = cdc_run(
        MigratingRules::PRINTED,
        MigrationCondition::Always,
        &sweep_cfg(0),
    );
    assert!(!r.ok());
    let r = ddc_run(
        MigratingRules::PRINTED,
        MigrationCondition::Always,
        &sweep_cfg(0),
        4,
    );
    assert!(!r.ok());
}

/// A hand-driven network: FIFO links, deliveries in the order the test chooses.
struct Net {
    procs: Vec<Cdc>,
    links: std::collections::BTreeMap<
        (usize, usize),
        std::collections::VecDeque<MigratingMsg<CdcTransfer>>,
    >,
}

impl Net {
    fn new(rules: MigratingRules) -> Net {
        let (_, procs) = cdc(
            5,
            &all_out(5),
            MigrationCondition::Counter { maxreq: 2 },
            rules,
        );
        Net {
            procs,
            links: Default::default(),
        }
    }

    fn post(&mut self, from: usize, out: &mut Outbox<MigratingMsg<CdcTransfer>>) {
        for (to, m) in out.drain() {
            self.links
                .entry((from, to.index()))
                .or_default()
                .push_back(m);
        }
    }

    fn call(&mut self, p: usize, seq: Sequence) {
        let mut out = Outbox::new();
        self.procs[p].begin(seq, &mut out).expect("legal call");
        self.post(p, &mut out);
    }

    /// Delivers the oldest message on the link `from → to`.
    fn deliver(&mut self, from: usize, to: usize) {
        let m = self.links.get_mut(&(from, to)).and_then(|q| q.pop_front());
        let m = m.unwrap_or_else(|| panic!("nothing on P{from} → P{to}"));
        let mut out = Outbox::new();
        self.procs[to].on_message(ProcessId::from(from), m, &mut out);
        self.post(to, &mut out);
    }

    /// Delivers everything except what waits on the `held` link, oldest link first.
    fn drain_except(&mut self, held: (usize, usize)) {
        while let Some(&link) = self
            .links
            .iter()
            .find(|(l, q)| **l != held && !q.is_empty())
            .map(|(l, _)| l)
        {
            self.deliver(link.0, link.1);
        }
    }

    fn in_cs(&self, p: usize) -> bool {
        self.procs[p].state() == CsState::InCs
    }
}

/// Deviation 4. complete:5, maxreq = 2, P0 the first controller; the new-controller(P1) that
/// P0 sends to P3 is slow. P1 and then P2 become controller; P2 grants P3; the stale message
/// then points P3 at the retired P1, and P3's exit-cs goes there.
fn stale_new_controller(rules: MigratingRules) -> Net {
    let mut net = Net::new(rules);
    let held = (0, 3);
    // two entries of P2 at P0: the second exit migrates P0 → P1
    for _ in 0..2 {
        net.call(2, Sequence::Entry);
        net.drain_except(held);
        assert!(net.in_cs(2));
        net.call(2, Sequence::Exit);
        net.drain_except(held);
    }
    assert!(net.procs[1].is_controller());
    // at P1: P4 in and out; then P2 in, P0 queued; P2's exit migrates P1 → P2 (P0 first)
    net.call(4, Sequence::Entry);
    net.drain_except(held);
    net.call(4, Sequence::Exit);
    net.drain_except(held);
    net.call(2, Sequence::Entry);
    net.drain_except(held);
    net.call(0, Sequence::Entry);
    net.drain_except(held);
    assert!(!net.in_cs(0));
    net.call(2, Sequence::Exit);
    net.drain_except(held);
    assert!(net.procs[2].is_controller());
    assert!(net.in_cs(0));
    // P3 asks P2 (it heard of P2 from P1), is granted after P0
    net.call(3, Sequence::Entry);
    net.drain_except(held);
    net.call(0, Sequence::Exit);
    net.drain_except(held);
    assert!(net.in_cs(3));
    // the stale new-controller(P1) arrives; P3 leaves; P4 asks again
    net.deliver(0, 3);
    net.call(3, Sequence::Exit);
    net.call(4, Sequence::Entry);
    net.drain_except((usize::MAX, usize::MAX));
    net
}

#[test]
fn deviation_4_controller_pointers_never_go_back() {
    let printed = MigratingRules {
        unstamped_controller: true,
        ..OK
    };
    let net = stale_new_controller(printed);
    assert_eq!(net.procs[3].current_controller(), ProcessId(1));
    assert!(
        !net.in_cs(4),
        "printed: P3's exit-cs died at the retired P1, P4 waits for ever"
    );
    assert_eq!(net.procs[4].pending(), Some(Sequence::Entry));
    let net = stale_new_controller(OK);
    assert!(net.in_cs(4));
}

// ---- the command line (the `cli` feature builds the binary) ----

#[cfg(feature = "cli")]
fn lkcs(args: &[&str]) -> std::process::Output {
    std::process::Command::new(env!("CARGO_BIN_EXE_lkcs"))
        .args(args)
        .output()
        .expect("the binary runs")
}

#[cfg(feature = "cli")]
fn json(out: &std::process::Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

/// Sequential, unit delays, complete:N: per pair 3 + (n−1)/maxreq remote messages, less at
/// most 3/maxreq for the controller's own (local) pairs (one per tenure of maxreq ≤ n
/// consecutive round-robin pairs).
#[cfg(feature = "cli")]
#[test]
fn cli_sequential_cdc_and_ddc_cost_about_3_plus_n_minus_1_over_maxreq() {
    for (algo, n, maxreq) in [("cdc", 9, 4), ("ddc", 9, 4), ("cdc", 7, 2), ("ddc", 12, 3)] {
        let out = lkcs(&[
            "simulate",
            "--algorithm",
            algo,
            "--topology",
            &format!("complete:{n}"),
            "--maxreq",
            &maxreq.to_string(),
            "--workload",
            "sequential",
            "--pairs",
            "4",
            "--delay",
            "unit",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = json(&out);
        let mean = v["remote_messages_per_pair"]["mean"].as_f64().unwrap();
        let paper = 3.0 + (n - 1) as f64 / maxreq as f64;
        assert!(
            mean <= paper + 1e-9 && mean >= paper - 3.0 / maxreq as f64,
            "{algo}: {mean} vs {paper}"
        );
        assert_eq!(v["pairs_completed"], 4 * n);
    }
}

#[cfg(feature = "cli")]
#[test]
fn cli_checks_and_simulates_cdc_and_ddc() {
    let out = lkcs(&[
        "check",
        "--algorithm",
        "cdc",
        "--topology",
        "complete:3",
        "--maxreq",
        "1",
        "--pairs",
        "1",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("proved"));
    let out = lkcs(&[
        "check",
        "--algorithm",
        "ddc",
        "--topology",
        "complete:4",
        "--migrate-after",
        "0",
    ]);
    assert!(out.status.success());
    for seed in ["3", "17"] {
        let out = lkcs(&[
            "simulate",
            "--algorithm",
            "ddc",
            "--topology",
            "complete:11",
            "--maxreq",
            "3",
            "--pairs",
            "3",
            "--delay",
            "uniform:1:20",
            "--seed",
            seed,
            "--json",
        ]);
        assert!(out.status.success());
        assert_eq!(json(&out)["safety_violations"], 0);
        let out = lkcs(&[
            "simulate",
            "--algorithm",
            "cdc",
            "--topology",
            "complete:6",
            "--migrate-after",
            "7",
            "--initial",
            "in:4",
            "--delay",
            "uniform:2:9",
            "--seed",
            seed,
        ]);
        assert!(out.status.success());
    }
    // the printed rules fail (exit 1, trace on stderr)
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "cdc",
        "--variant",
        "printed",
        "--topology",
        "complete:4",
        "--maxreq",
        "1",
        "--pairs",
        "3",
        "--delay",
        "uniform:1:12",
        "--think",
        "8",
        "--max-events",
        "200000",
    ]);
    assert_eq!(out.status.code(), Some(1));
}

#[cfg(feature = "cli")]
#[test]
fn cli_refuses_bad_migrating_options() {
    for (args, needle) in [
        (
            vec!["--topology", "complete:4", "--maxreq", "0"],
            "--maxreq must be at least 1",
        ),
        (vec!["--topology", "ring:5"], "complete"),
        (
            vec![
                "--topology",
                "complete:4",
                "--maxreq",
                "2",
                "--migrate-after",
                "3",
            ],
            "exclusive",
        ),
        (
            vec!["--topology", "complete:4", "--k", "2"],
            "bounds do not apply",
        ),
        (vec!["--topology", "complete:4", "--initial", "in:1,2"], "P"),
        (
            vec!["--topology", "complete:4", "--leader", "1"],
            "--leader",
        ),
    ] {
        for algo in ["cdc", "ddc"] {
            let mut a = vec!["simulate", "--algorithm", algo];
            a.extend(&args);
            let out = lkcs(&a);
            assert_eq!(out.status.code(), Some(2), "{a:?}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(err.lines().all(|l| l.starts_with("error: ")), "{err}");
            assert!(err.contains(needle), "{a:?}: {err}");
        }
    }
    // two problems, two lines
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "cdc",
        "--topology",
        "ring:4",
        "--maxreq",
        "0",
    ]);
    assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 2);
}

// ---- CDC and DDC as the mutual-exclusion object `mx` of MUTIN(l), kmex and GCS ----

struct Sim(SimConfig);

impl lkcs::SystemVisitor for Sim {
    type Output = SimReport;
    fn visit<A: CsObject>(self, inst: &Instance, _: &[CsState], procs: Vec<A>) -> SimReport {
        simulate(inst, procs, &self.0)
    }
}

fn global_spec(alg: lkcs::Algorithm, n: usize, mx: &str) -> lkcs::SystemSpec {
    lkcs::SystemSpec {
        algorithm: alg,
        topology: Topology::complete(n).unwrap(),
        l: None,
        k: None,
        bounds: None,
        initial: None,
        variant: lkcs::cs::Variant::Corrected,
        leader: None,
        coterie: None,
        mx: Some(mx.parse().expect("a known mx")),
        maxreq: None,
        migrate_after: None,
    }
}

#[test]
fn gcs_mutin_and_kmex_are_safe_and_live_with_cdc_and_ddc_inside() {
    use lkcs::Algorithm::{Gcs, Kmex, Mutin};
    let mut runs = 0;
    for mx in ["cdc", "ddc"] {
        for n in [4, 5, 7, 9] {
            for (maxreq, after) in [
                (None, None),
                (Some(1), None),
                (Some(3), None),
                (None, Some(10)),
            ] {
                for (alg, l, k) in [
                    (Gcs, Some(1), Some(n - 1)),
                    (Gcs, Some(n / 3), Some(n / 3 + 2)),
                    (Mutin, Some(n / 2), None),
                    (Kmex, None, Some(2)),
                ] {
                    for coterie in [QuorumSystem::Majority, QuorumSystem::Grid] {
                        for seed in 0..3 {
                            let mut spec = global_spec(alg, n, mx);
                            spec.l = l;
                            spec.k = k;
                            spec.maxreq = maxreq;
                            spec.migrate_after = after;
                            spec.coterie = Some(coterie);
                            let cfg = concurrent(seed * 31 + n as u64, 2, 12);
                            let r = spec.build(Sim(cfg)).unwrap();
                            assert!(
                                r.ok(),
                                "{alg} n={n} l={l:?} k={k:?} --mx {mx} {maxreq:?} {after:?} {coterie}: {}",
                                r.failure_text()
                            );
                            runs += 1;
                        }
                    }
                }
            }
        }
    }
    assert_eq!(runs, 2 * 4 * 4 * 4 * 2 * 3);
}

#[cfg(feature = "check")]
#[test]
fn gcs_with_a_migrating_mx_passes_a_bounded_check_on_three_processes() {
    struct Check;
    impl lkcs::SystemVisitor for Check {
        type Output = lkcs::check::CheckReport;
        fn visit<A: CsObject>(self, inst: &Instance, _: &[CsState], procs: Vec<A>) -> Self::Output {
            let cfg = CheckConfig {
                pairs: 1,
                max_states: Some(300_000),
                ..CheckConfig::default()
            };
            check::check(inst, procs, &cfg)
        }
    }
    for mx in ["cdc", "ddc"] {
        let mut spec = global_spec(lkcs::Algorithm::Gcs, 3, mx);
        spec.l = Some(1);
        spec.k = Some(2);
        spec.maxreq = Some(1);
        let r = spec.build(Check).unwrap();
        assert!(
            r.ok(),
            "gcs --mx {mx}: {:?}\n{}",
            r.verdict,
            r.counterexample.join("\n")
        );
        eprintln!(
            "gcs complete:3 l=1 k=2 --mx {mx} --maxreq 1: {:?}, {} states",
            r.verdict, r.states
        );
    }
}

#[cfg(feature = "cli")]
#[test]
fn cli_gcs_with_mx_cdc_and_ddc() {
    for mx in ["cdc", "ddc"] {
        let out = lkcs(&[
            "simulate",
            "--algorithm",
            "gcs",
            "--topology",
            "complete:8",
            "--l",
            "2",
            "--k",
            "5",
            "--mx",
            mx,
            "--maxreq",
            "2",
            "--pairs",
            "2",
            "--delay",
            "uniform:1:15",
            "--seed",
            "9",
            "--json",
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v = json(&out);
        assert!(
            v["messages_by_kind"]["lmin.mx.BecomeController"]
                .as_u64()
                .unwrap()
                > 0
        );
        // a migration option needs a migrating mx
        let out = lkcs(&[
            "simulate",
            "--algorithm",
            "kmex",
            "--topology",
            "complete:5",
            "--mx",
            "maekawa",
            "--maxreq",
            "2",
        ]);
        assert_eq!(out.status.code(), Some(2));
        let out = lkcs(&[
            "simulate",
            "--algorithm",
            "mutin",
            "--topology",
            "complete:5",
            "--mx",
            mx,
            "--maxreq",
            "0",
        ]);
        assert_eq!(out.status.code(), Some(2));
        assert!(String::from_utf8_lossy(&out.stderr).contains("--maxreq must be at least 1"));
    }
}
