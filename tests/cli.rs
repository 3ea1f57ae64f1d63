//! The command line contract (DESIGN §5): flags, JSON fields and exit codes.

use std::process::{Command, Output};

fn lkcs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lkcs"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn json(out: &Output) -> serde_json::Value {
    serde_json::from_slice(&out.stdout).expect("one JSON object on stdout")
}

/// The `--json` report of a run that must exit 0.
fn passed(args: &[&str]) -> serde_json::Value {
    let out = lkcs(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(0), "{err}");
    json(&out)
}

fn stderr_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn sequential_torus_run_matches_the_paper_exactly() {
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lmutin",
        "--topology",
        "torus:5x5",
        "--l",
        "2",
        "--workload",
        "sequential",
        "--pairs",
        "2",
        "--delay",
        "unit",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["algorithm"], "lmutin");
    assert_eq!(v["processes"], 25);
    assert_eq!(v["safety_violations"], 0);
    assert_eq!(v["deadlock"], false);
    assert_eq!(v["pairs_completed"], 50);
    // 3 (|N_i| + 1) = 15 for every pair; 12 of them remote
    for stat in ["min", "mean", "max"] {
        assert_eq!(v["messages_per_pair"][stat], 15.0);
        assert_eq!(v["remote_messages_per_pair"][stat], 12.0);
    }
    assert_eq!(v["messages"], 750);
    assert_eq!(v["messages_by_kind"]["Request"], 250);
    for field in ["exit_max", "exit_mean", "entry_max", "entry_mean"] {
        assert!(v["waiting_time"][field].is_number(), "{field}");
    }
    assert_eq!(v["seed"], 0);
}

#[test]
fn concurrent_lmutex_run_on_a_random_graph_succeeds_with_a_summary() {
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lmutex",
        "--topology",
        "random:14:0.3:5",
        "--k",
        "2",
        "--pairs",
        "3",
        "--delay",
        "uniform:1:9",
        "--seed",
        "11",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("OK") && text.contains("messages per pair"),
        "{text}"
    );
}

/// The readable summary says in words what it counts and in which unit (the `--json` object
/// is the contract; this text explains itself to a reader who has not read the papers).
#[test]
fn the_readable_summary_explains_its_terms_and_units() {
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lmutin",
        "--topology",
        "ring:6",
        "--l",
        "1",
        "--initial",
        "in:0,3",
        "--pairs",
        "2",
        "--delay",
        "uniform:1:5",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "lmutin on ring:6 (6 processes), seed 0: OK",
        "local l_i-mutual inclusion",
        "between l_i = 1 and k_i = |N_i|+1",
        // the start in words, with its --initial spelling
        "P0 and P3 in the critical section, the other 4 out (--initial in:0,3)",
        "(12 requested: 2 per process; processes that are done keep cycling",
        "exit/entry pairs      completed ",
        "self-addressed included",
        "self-addressed left out",
        "time units (from the call to the change of state)",
        "one time unit = the delay of one message under --delay unit (here each message takes 1 \
         to 5",
    ] {
        assert!(text.contains(needle), "{needle:?} in\n{text}");
    }
    // paper shorthand the user meets first is explained, not printed bare
    assert!(!text.contains("initial configuration   in:"), "{text}");
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "maekawa",
        "--topology",
        "complete:4",
        "--workload",
        "sequential",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    for needle in [
        "no lower bound (l = 0) and at most k = 1 of the 4 processes",
        "no process in the critical section (--initial in:)",
        "sequential: one Exit or Entry at a time",
        "one time unit = the delay of one message (here every message takes 1)",
    ] {
        assert!(text.contains(needle), "{needle:?} in\n{text}");
    }
}

#[test]
fn bounds_file_sets_per_process_bounds() {
    let dir = std::env::temp_dir().join(format!("lkcs-cli-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bounds.json");
    std::fs::write(&file, r#"{"l": [2, 1, 0, 1, 2]}"#).unwrap();
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lmutin",
        "--topology",
        "ring:5",
        "--bounds",
        file.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&file, r#"{"l": [2, 1]}"#).unwrap();
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lmutin",
        "--topology",
        "ring:5",
        "--bounds",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    // a file with no list, or null lists, gives no bounds: refused rather than ignored
    for text in ["{}", r#"{"l": null, "k": null}"#] {
        std::fs::write(&file, text).unwrap();
        let out = lkcs(&[
            "simulate",
            "--algorithm",
            "lkcs",
            "--topology",
            "ring:5",
            "--bounds",
            file.to_str().unwrap(),
        ]);
        let err = stderr_lines(&out);
        assert_eq!(out.status.code(), Some(2), "{text}: {err:?}");
        assert_eq!(err.len(), 1, "{text}: {err:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_failure_exits_1_with_seed_and_trace() {
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lmutin",
        "--variant",
        "printed",
        "--topology",
        "complete:3",
        "--l",
        "1",
        "--initial",
        "in:0",
        "--pairs",
        "3",
        "--delay",
        "uniform:1:6",
        "--think",
        "3",
        "--seed",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("seed 1") && err.contains("safety violation"),
        "{err}"
    );
    assert!(err.contains("-> P"), "trace lines: {err}");
}

/// Bad input exits 2 with one clear line per problem, and never panics.
#[test]
fn bad_input_exits_2_with_one_line_per_problem() {
    let cases: &[(&[&str], usize, &str)] = &[
        // star:5 leaves have |N_i| = 1 < 2: four problems
        (
            &["--algorithm", "lmutin", "--topology", "star:5", "--l", "2"],
            4,
            "l_i <= |N_i|",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:4",
                "--l",
                "1",
                "--initial",
                "in:",
            ],
            4,
            "unsafe",
        ),
        (
            &["--algorithm", "lmutin", "--topology", "hexagon:4"],
            1,
            "unknown topology",
        ),
        (
            &["--algorithm", "lmutin", "--topology", "complete:0"],
            1,
            "zero processes",
        ),
        (
            &["--algorithm", "paxos", "--topology", "ring:4"],
            1,
            "unknown algorithm",
        ),
        (
            &["--algorithm", "gcs", "--topology", "ring:5"],
            1,
            "complete graph",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:4",
                "--initial",
                "in:9",
            ],
            1,
            "P9",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:4",
                "--delay",
                "uniform:5:1",
            ],
            1,
            "delay",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:4",
                "--workload",
                "eager",
            ],
            1,
            "workload",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:4",
                "--variant",
                "draft",
            ],
            1,
            "variant",
        ),
        (
            &["--algorithm", "lmutin", "--topology", "ring:4", "--k", "2"],
            1,
            "lmutex",
        ),
        (
            &["--algorithm", "lmutex", "--topology", "ring:4", "--k", "0"],
            4,
            "1 <= k_i",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:4",
                "--pairs",
                "0",
            ],
            1,
            "--pairs",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:4",
                "--coterie",
                "grid",
            ],
            1,
            "--coterie",
        ),
        (
            &["--algorithm", "lmutin", "--topology", "ring:1000001"],
            1,
            "more than 1000000",
        ),
        (
            &["--algorithm", "lmutin", "--topology", "complete:9000"],
            1,
            "edges",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:4",
                "--delay",
                "uniform:1:99999999999",
            ],
            1,
            "delay",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:4",
                "--think",
                "99999999999",
            ],
            1,
            "--think",
        ),
        // clap's own errors are one line too
        (&["--topology", "ring:4"], 1, "--algorithm"),
        (
            &["--algorithm", "lmutin", "--topology", "ring:4", "--l", "-1"],
            1,
            "-1",
        ),
        // several problems at once are all reported
        (
            &[
                "--algorithm",
                "paxos",
                "--topology",
                "ring:2",
                "--delay",
                "x",
            ],
            3,
            "unknown algorithm",
        ),
        // found by fuzzing: each was a hang, a wrap, a silent acceptance or exit 1
        (
            &["--algorithm", "lmutin", "--topology", "random:3000:0:1"],
            1,
            "edge probability 0",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "random:20000:0.0001:1",
            ],
            1,
            "almost never connected",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "complete:2",
                "--pairs",
                "9223372036854775808",
            ],
            1,
            "--pairs 9223372036854775808: at most",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:5",
                "--max-events",
                "0",
            ],
            1,
            "--max-events must be at least 1",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:3",
                "--initial",
                "in:0,0",
            ],
            1,
            "P0 twice",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:3",
                "--initial",
                "in:0,,1",
            ],
            1,
            "empty entry",
        ),
        (
            &[
                "--algorithm",
                "lmutin",
                "--topology",
                "ring:3",
                "--bounds",
                "/dev/zero",
            ],
            1,
            "larger than 16 MiB",
        ),
    ];
    for (args, lines, needle) in cases {
        let mut full = vec!["simulate"];
        full.extend_from_slice(args);
        let out = lkcs(&full);
        let err = stderr_lines(&out);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err:?}");
        assert_eq!(err.len(), *lines, "{args:?}: {err:?}");
        assert!(err.iter().any(|l| l.contains(needle)), "{args:?}: {err:?}");
        assert!(
            err.iter()
                .all(|l| l.starts_with("error: ") && !l.contains("panicked")),
            "{err:?}"
        );
    }
}

/// `lkcs check` proves 1-LMUTIN as built on path:3, from the start it picks, and reports the
/// states of the search it ran: the count the library's checker gives for the same system,
/// rules and search. lmutin-5 (an exit held by a bound sets its permissions aside) is
/// explored: without it (`--printed-rule hold-and-wait`) the search has fewer states.
#[test]
fn check_proves_lmutin_on_a_path_and_reports_its_state_count() {
    // `lkcs check` of 1-LMUTIN on path:3, one pair, with `more` options
    let check = |more: &[&str]| {
        let mut args = vec!["check", "--algorithm", "lmutin", "--topology", "path:3"];
        args.extend(["--l", "1", "--pairs", "1", "--json"]);
        args.extend_from_slice(more);
        lkcs(&args)
    };
    let out = check(&[]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["verdict"], "proved");
    assert_eq!(v["search"], "reduced");
    let t = lkcs::Topology::path(3).unwrap();
    let init = lkcs::parse_initial(v["initial"].as_str().unwrap(), 3).unwrap();
    let (inst, procs) = lkcs::algo::lmutin::Lmutin::system(
        &t,
        &[1; 3],
        &init,
        lkcs::algo::lmutin::LmutinRules::CORRECTED,
    )
    .unwrap();
    let library = lkcs::check::check(&inst, procs, &lkcs::check::CheckConfig::default());
    assert_eq!(library.verdict, lkcs::check::Verdict::Proved);
    assert_eq!(v["states"].as_u64(), Some(library.states as u64), "{v}");
    let printed = json(&check(&["--printed-rule", "hold-and-wait"]));
    assert_eq!(printed["verdict"], "proved", "{printed}");
    assert!(
        printed["states"].as_u64().unwrap() < library.states as u64,
        "lmutin-5's messages add states: {printed} against {}",
        library.states
    );
    assert!(v["states_per_second"].as_f64().unwrap() > 0.0);
}

/// The text report names the states explored (a test of its own: the searches run side by
/// side).
#[test]
fn check_proves_lmutex_on_a_path_in_text() {
    let out = lkcs(&[
        "check",
        "--algorithm",
        "lmutex",
        "--topology",
        "path:3",
        "--k",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("states explored"));
}

#[test]
fn check_refuses_the_printed_rules_with_a_counterexample() {
    let out = lkcs(&[
        "check",
        "--algorithm",
        "lmutin",
        "--variant",
        "printed",
        "--topology",
        "complete:3",
        "--l",
        "1",
        "--initial",
        "in:0",
        "--pairs",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("counterexample")
            && err.contains("initial: in:0")
            && err.contains("P0 starts"),
        "{err}"
    );
}

#[test]
fn check_bad_input_exits_2() {
    for args in [
        &["check", "--algorithm", "lmutin", "--topology", "ring:40"][..],
        &[
            "check",
            "--algorithm",
            "lmutin",
            "--topology",
            "star:4",
            "--l",
            "2",
        ][..],
        &["check", "--algorithm", "gcs", "--topology", "ring:5"][..],
        &[
            "check",
            "--algorithm",
            "lmutin",
            "--topology",
            "ring:4",
            "--initial",
            "in:",
        ][..],
    ] {
        let out = lkcs(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            stderr_lines(&out).iter().all(|l| l.starts_with("error: ")),
            "{args:?}"
        );
    }
}

// ---- maekawa (global mutual exclusion on a coterie) ----

#[test]
fn maekawa_sequential_run_costs_three_per_quorum_member() {
    // grid(16): every quorum has 2·4−1 = 7 members
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "maekawa",
        "--topology",
        "complete:16",
        "--coterie",
        "grid",
        "--workload",
        "sequential",
        "--pairs",
        "2",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out);
    assert_eq!(v["algorithm"], "maekawa");
    assert_eq!(v["initial"], "in:");
    assert_eq!(v["pairs_completed"], 32);
    assert_eq!(v["messages_per_pair"]["min"], 21.0);
    assert_eq!(v["messages_per_pair"]["max"], 21.0);
    assert_eq!(v["remote_messages_per_pair"]["mean"], 18.0);
}

#[test]
fn maekawa_concurrent_runs_and_check_pass() {
    for coterie in ["majority", "grid"] {
        let out = lkcs(&[
            "simulate",
            "--algorithm",
            "maekawa",
            "--topology",
            "complete:9",
            "--coterie",
            coterie,
            "--pairs",
            "3",
            "--delay",
            "uniform:1:5",
            "--seed",
            "4",
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{coterie}");
        assert_eq!(json(&out)["safety_violations"], 0);
    }
    let out = lkcs(&[
        "check",
        "--algorithm",
        "maekawa",
        "--topology",
        "complete:3",
        "--l",
        "0",
        "--k",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&out.stdout).contains("proved"));
}

#[test]
fn maekawa_printed_failed_rule_deadlocks_with_exit_1() {
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "maekawa",
        "--variant",
        "printed",
        "--topology",
        "complete:5",
        "--pairs",
        "3",
        "--delay",
        "uniform:1:12",
        "--think",
        "8",
        "--seed",
        "1",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("deadlock"));
}

#[test]
fn maekawa_refuses_bad_input_one_line_per_problem() {
    for (args, lines, needle) in [
        (
            &["--topology", "ring:6", "--l", "1", "--k", "2"][..],
            3,
            "global algorithm",
        ),
        (&["--topology", "grid:3x3"][..], 1, "complete:9"),
        (&["--topology", "complete:5", "--k", "2"][..], 1, "k = 1"),
        (
            &["--topology", "complete:5", "--initial", "in:1,3"][..],
            1,
            "at most one process",
        ),
        (
            &["--topology", "complete:5", "--coterie", "tree"][..],
            1,
            "coterie `tree`",
        ),
        (
            &["--topology", "complete:5", "--leader", "1"][..],
            1,
            "--leader",
        ),
    ] {
        for command in ["simulate", "check"] {
            let mut all = vec![command, "--algorithm", "maekawa"];
            all.extend_from_slice(args);
            let out = lkcs(&all);
            assert_eq!(out.status.code(), Some(2), "{all:?}");
            let err = stderr_lines(&out);
            assert_eq!(err.len(), lines, "{all:?}: {err:?}");
            assert!(err.iter().all(|l| l.starts_with("error: ")), "{err:?}");
            assert!(err.iter().any(|l| l.contains(needle)), "{all:?}: {err:?}");
        }
    }
}

// ---- mutin, kmex, gcs (global bounds over quorums) ----

/// The best case of (l,k)-GCS on complete:16 with the grid coterie (|Q_i| = 7): safe, every
/// pair 16|Q_i| = 112 messages, both waiting times within Theorem 4's 9 time units; and a
/// bounded check of every interleaving on three processes finds nothing (the full proof,
/// about 1.8 M states, is in docs/checker.md).
#[test]
fn gcs_sequential_run_and_bounded_check_pass() {
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "gcs",
        "--topology",
        "complete:16",
        "--l",
        "3",
        "--k",
        "9",
        "--coterie",
        "grid",
        "--workload",
        "sequential",
        "--pairs",
        "1",
        "--delay",
        "unit",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let v = json(&out);
    assert_eq!(v["algorithm"], "gcs");
    assert_eq!(v["safety_violations"], 0);
    assert_eq!(v["deadlock"], false);
    assert_eq!(v["pairs_completed"], 16);
    assert_eq!(v["messages_per_pair"]["min"], 112.0);
    assert_eq!(v["messages_per_pair"]["max"], 112.0);
    for w in ["exit_max", "entry_max"] {
        let t = v["waiting_time"][w].as_f64().unwrap();
        assert!(t > 0.0 && t <= 9.0, "{w} = {t}");
    }
    let out = lkcs(&[
        "check",
        "--algorithm",
        "gcs",
        "--topology",
        "complete:3",
        "--l",
        "1",
        "--k",
        "2",
        "--pairs",
        "1",
        "--max-states",
        "1000000",
    ]);
    assert_eq!(out.status.code(), Some(0), "{:?}", stderr_lines(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("bounded"), "{text}");
}

/// Bad global input exits 2 with one line per problem, in `simulate` and `check` alike: an
/// unknown coterie, l ≥ k, k > n, a non-complete graph, an unknown `--mx`, a bound the
/// algorithm fixes.
#[test]
fn global_algorithms_refuse_bad_input_one_line_per_problem() {
    for (args, lines, needle) in [
        (
            &["gcs", "complete:5", "--coterie", "tree"][..],
            1,
            "coterie `tree`",
        ),
        (
            &["gcs", "complete:5", "--l", "2", "--k", "2"][..],
            1,
            "0 <= l < k <= n",
        ),
        (
            &["gcs", "complete:5", "--l", "3", "--k", "2"][..],
            1,
            "0 <= l < k <= n",
        ),
        (
            &["gcs", "complete:5", "--l", "1", "--k", "6"][..],
            1,
            "0 <= l < k <= n",
        ),
        (
            &[
                "gcs",
                "complete:5",
                "--coterie",
                "tree",
                "--l",
                "3",
                "--k",
                "1",
            ][..],
            2,
            "coterie `tree`",
        ),
        (
            &["gcs", "ring:5", "--l", "1", "--k", "2"][..],
            1,
            "complete",
        ),
        (&["gcs", "star:5"][..], 1, "complete"),
        (&["gcs", "complete:5", "--mx", "paxos"][..], 1, "--mx"),
        (
            &["gcs", "complete:5", "--mx", "paxos", "--maxreq", "0"][..],
            2,
            "--maxreq must be at least 1",
        ),
        (&["mutin", "complete:5", "--l", "5"][..], 1, "0 <= l < n"),
        (&["mutin", "complete:5", "--k", "2"][..], 1, "mutin fixes k"),
        (&["kmex", "complete:5", "--k", "6"][..], 1, "1 <= k <= n"),
        (&["kmex", "complete:5", "--l", "1"][..], 1, "kmex fixes l"),
    ] {
        for command in ["simulate", "check"] {
            let mut all = vec![command, "--algorithm", args[0], "--topology", args[1]];
            all.extend_from_slice(&args[2..]);
            let out = lkcs(&all);
            assert_eq!(out.status.code(), Some(2), "{all:?}");
            let err = stderr_lines(&out);
            assert_eq!(err.len(), lines, "{all:?}: {err:?}");
            assert!(err.iter().all(|l| l.starts_with("error: ")), "{err:?}");
            assert!(err.iter().any(|l| l.contains(needle)), "{all:?}: {err:?}");
        }
    }
}

#[test]
fn lkcs_sequential_torus_costs_six_per_closed_neighbour() {
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "torus:5x5",
        "--l",
        "1",
        "--k",
        "4",
        "--workload",
        "sequential",
        "--pairs",
        "1",
        "--delay",
        "unit",
        "--json",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["safety_violations"], 0);
    assert_eq!(v["triggers"], 0);
    for stat in ["min", "mean", "max"] {
        assert_eq!(v["messages_per_pair"][stat], 30.0, "{v}");
    }
}

#[test]
fn lkcs_refuses_a_graph_without_a_leader_and_bad_leaders() {
    // the default (the round trip) needs no leader; the leader rules need one of degree 4
    let v = passed(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "ring:9",
        "--l",
        "1",
        "--k",
        "3",
        "--json",
    ]);
    assert_eq!(v["variant"], "trip");
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "ring:9",
        "--leader",
        "auto",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(lines[0].contains("|N_LDR| >= 4"), "{lines:?}");
    // a named leader of degree 2 on a grid, with bounds too tight nearby: every problem
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "grid:3x3",
        "--leader",
        "0",
        "--l",
        "0",
        "--k",
        "3",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let lines = stderr_lines(&out);
    assert!(lines.iter().any(|l| l.contains("|N_LDR| = 2")), "{lines:?}");
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "complete:5",
        "--leader",
        "9",
    ]);
    assert_eq!(out.status.code(), Some(2));
    // a leader past u32::MAX is refused the same way (it panicked building the process id)
    for command in ["simulate", "check"] {
        let out = lkcs(&[
            command,
            "--algorithm",
            "lkcs",
            "--topology",
            "complete:5",
            "--leader",
            "18446744073709551615",
        ]);
        assert_eq!(out.status.code(), Some(2), "{command}");
        assert_eq!(
            stderr_lines(&out),
            ["error: --leader 18446744073709551615: processes are 0..5"],
            "{command}"
        );
    }
}

#[test]
fn lkcs_concurrent_run_and_bounded_check_pass() {
    let args = [
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "complete:6",
        "--l",
        "1",
        "--k",
        "5",
        "--pairs",
        "3",
        "--delay",
        "uniform:1:12",
        "--think",
        "8",
        "--seed",
        "4",
        "--json",
    ];
    // the default: the round trip, no trigger
    let v = passed(&args);
    assert_eq!(v["variant"], "trip", "{v}");
    assert!(v["pairs_completed"].as_u64().unwrap() >= 18, "{v}");
    assert!(
        v["messages_by_kind"]["TripGo"].as_u64().unwrap_or(0) > 0,
        "contention takes round trips: {v}"
    );
    // the leader rules, with the automatic leader: the sidetrack is triggered
    let v = passed(&[&args[..], &["--leader", "auto"]].concat());
    assert_eq!(v["variant"], "corrected", "{v}");
    assert!(v["triggers"].as_u64().unwrap() >= 1, "{v}");
    let out = lkcs(&[
        "check",
        "--algorithm",
        "lkcs",
        "--topology",
        "complete:5",
        "--l",
        "1",
        "--k",
        "4",
        "--max-states",
        "300000",
    ]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn lkcs_with_every_able_process_leading_runs_the_least_slack_to_the_end() {
    let args = |leader: &'static str| {
        [
            "simulate",
            "--algorithm",
            "lkcs",
            "--topology",
            "torus:5x5",
            "--l",
            "1",
            "--k",
            "4",
            "--leader",
            leader,
            "--pairs",
            "2",
            "--delay",
            "uniform:1:12",
            "--think",
            "8",
            "--seed",
            "3",
            "--json",
        ]
    };
    let out = lkcs(&args("all"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(json(&out)["triggers"].as_u64().unwrap() > 0);
    let out = lkcs(&args("everyone"));
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr_lines(&out)[0]
            .contains("leader `everyone`: expected a process index, `all` or `auto`"),
        "the name refused where it is parsed: {:?}",
        stderr_lines(&out)
    );
}

#[test]
fn check_search_option_picks_the_search() {
    let states = |search: &str| {
        let out = lkcs(&[
            "check",
            "--algorithm",
            "lmutin",
            "--topology",
            "path:3",
            "--l",
            "1",
            "--search",
            search,
            "--json",
        ]);
        assert_eq!(out.status.code(), Some(0), "{search}");
        let v = json(&out);
        assert_eq!(v["verdict"], "proved", "{search}");
        assert_eq!(v["search"], search);
        v["states"].as_u64().unwrap()
    };
    let (reduced, full, stateright) = (states("reduced"), states("full"), states("stateright"));
    assert_eq!(full, stateright);
    assert!(reduced < full, "{reduced} >= {full}");
    let out = lkcs(&[
        "check",
        "--algorithm",
        "lmutin",
        "--topology",
        "path:3",
        "--search",
        "breadth",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn check_stops_at_the_memory_budget_with_a_bounded_verdict() {
    let args = |budget: &'static str| {
        [
            "check",
            "--algorithm",
            "lmutin",
            "--topology",
            "complete:4",
            "--l",
            "1",
            "--initial",
            "in:0",
            "--max-memory",
            budget,
            "--json",
        ]
    };
    // complete:4 from in:0 has tens of millions of states: 32 MiB stops it early
    let out = lkcs(&args("0.03125"));
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out);
    assert_eq!(v["stopped_by"], "max_memory", "{v}");
    let verdict = v["verdict"].as_str().unwrap();
    assert!(
        verdict.starts_with("no violation") && verdict.contains("memory budget of 0.03 GiB"),
        "{verdict}"
    );
    let states = v["states"].as_u64().unwrap();
    assert!((100_000..4_000_000).contains(&states), "{v}");
    // a proof reports no budget (and --progress changes nothing on stdout)
    let out = lkcs(&[
        "check",
        "--algorithm",
        "lmutin",
        "--topology",
        "path:3",
        "--max-memory",
        "0.5",
        "--progress",
        "--json",
    ]);
    let v = json(&out);
    assert_eq!(
        (v["verdict"].as_str(), v["stopped_by"].is_null()),
        (Some("proved"), true)
    );
    for bad in ["0", "NaN", "inf", "lots"] {
        let out = lkcs(&args(bad));
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let lines = stderr_lines(&out);
        assert!(
            lines.len() == 1 && lines[0].starts_with("error: ") && lines[0].contains("max-memory"),
            "{bad}: {lines:?}"
        );
    }
}

/// One bad value that breaks a bound at every process of a large system prints at most ten
/// `error:` lines and a count (it printed a line per process: 100,000 lines for ring:100000),
/// and a problem that lists processes names a few and counts the rest (it was one line of
/// 789 KB).
#[test]
fn a_bound_broken_everywhere_is_ten_lines_and_a_count() {
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lmutin",
        "--topology",
        "ring:1000",
        "--l",
        "5",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 11, "{lines:?}");
    assert!(
        lines[..10].iter().all(|l| l.starts_with("error: P")),
        "{lines:?}"
    );
    assert_eq!(lines[10], "error: ... and 990 more problems (1000 in all)");
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "ring:1000",
        "--l",
        "1",
        "--k",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let lines = stderr_lines(&out);
    assert!(
        lines
            .iter()
            .any(|l| l.contains("and 992 more would be left with L_i >= K_i")),
        "{lines:?}"
    );
    assert!(lines.iter().all(|l| l.len() < 400), "{lines:?}");
}

/// `cluster init` with a bad `--host` names `--host`, once (it reported every member's
/// section, which the user never wrote).
#[test]
fn cluster_init_names_a_bad_host_once() {
    let dir = std::env::temp_dir().join(format!("lkcs-init-host-{}", std::process::id()));
    let out = lkcs(&[
        "cluster",
        "init",
        "--algorithm",
        "gcs",
        "--members",
        "50",
        "--host",
        "my host",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].starts_with("error: --host `my host` is not a host"),
        "{lines:?}"
    );
    assert!(!dir.join("cluster.toml").exists());
}

/// `lkcs check`'s budgets refused with their cause: a value too large is called too large
/// (it was "must be a positive number", echoing hundreds of digits), and `--max-states 0`
/// is refused (it ran and reported "bounded by --max-states 0" after 2 states).
#[test]
fn check_budgets_name_why_they_are_refused() {
    for (option, value, named) in [
        (
            "--max-time",
            "1e13",
            "--max-time is too large: at most 1e12 seconds",
        ),
        (
            "--max-time",
            "1e308",
            "--max-time is too large: at most 1e12 seconds",
        ),
        (
            "--max-time",
            "-1",
            "--max-time must be a positive number of seconds",
        ),
        (
            "--max-memory",
            "1e308",
            "--max-memory is too large: at most 1e9 GiB",
        ),
        (
            "--max-memory",
            "NaN",
            "--max-memory must be a positive number of GiB",
        ),
        ("--max-states", "0", "--max-states must be at least 1"),
    ] {
        let out = lkcs(&[
            "check",
            "--algorithm",
            "lmutin",
            "--topology",
            "ring:3",
            &format!("{option}={value}"),
        ]);
        assert_eq!(out.status.code(), Some(2), "{option} {value}");
        let lines = stderr_lines(&out);
        assert_eq!(lines, vec![format!("error: {named}")], "{option} {value}");
    }
}

/// Runs `args` with stdout or stderr a pipe whose reading end is already closed (as in
/// `lkcs ... | head -1` once `head` has quit), capturing the other stream.
fn lkcs_into_closed_pipe(args: &[&str], close_stdout: bool) -> Output {
    use std::process::Stdio;
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_lkcs"));
    cmd.args(args).stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("the binary runs");
    // dropping the pipe's reading end closes it: every later write fails with EPIPE
    if close_stdout {
        drop(child.stdout.take());
    } else {
        drop(child.stderr.take());
    }
    child.wait_with_output().expect("the binary ends")
}

#[test]
fn a_closed_output_pipe_neither_panics_nor_changes_the_exit_code() {
    let sim = [
        "simulate",
        "--algorithm",
        "lmutin",
        "--topology",
        "complete:3",
        "--l",
        "1",
    ];
    let out = lkcs_into_closed_pipe(&sim, true);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // a failing check writes its counterexample to the closed stderr: still exit 1
    let check = [
        "check",
        "--algorithm",
        "lmutin",
        "--variant",
        "printed",
        "--topology",
        "complete:3",
        "--l",
        "1",
        "--initial",
        "in:0",
    ];
    let out = lkcs_into_closed_pipe(&check, false);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stdout).contains("violated: "));
}

/// `--printed-rule NAME` switches one printed rule on over the corrected variant: the run
/// fails where the corrected one completes, `--json` names the rule and keeps its other
/// fields; every name of every algorithm is in `--help` and docs/cli.md.
#[test]
fn printed_rule_switches_one_rule_on() {
    let base = [
        "simulate",
        "--algorithm",
        "lmutin",
        "--topology",
        "complete:3",
        "--l",
        "1",
        "--initial",
        "in:1",
        "--pairs",
        "3",
        "--delay",
        "uniform:1:6",
        "--think",
        "3",
        "--seed",
        "6",
        "--json",
    ];
    let corrected = lkcs(&base);
    assert_eq!(corrected.status.code(), Some(0));
    let mut args = base.to_vec();
    // deviation 5 off too: the phantom grants then deadlock (with it they livelock, parking
    // and unparking until the event limit)
    args.extend([
        "--printed-rule",
        "initial-grants",
        "--printed-rule",
        "hold-and-wait",
    ]);
    let printed = lkcs(&args);
    assert_eq!(printed.status.code(), Some(1));
    let (c, p) = (json(&corrected), json(&printed));
    assert_eq!(c["printed_rules"], serde_json::json!([]));
    assert_eq!(
        p["printed_rules"],
        serde_json::json!(["initial-grants", "hold-and-wait"])
    );
    assert_eq!(p["deadlock"], true);
    assert_eq!(p["variant"], "corrected");
    let keys =
        |v: &serde_json::Value| -> Vec<String> { v.as_object().unwrap().keys().cloned().collect() };
    assert_eq!(keys(&c), keys(&p));
    // check takes it too
    let out = lkcs(&[
        "check",
        "--algorithm",
        "lmutin",
        "--topology",
        "complete:3",
        "--l",
        "1",
        "--initial",
        "in:1",
        "--printed-rule",
        "initial-grants",
        "--printed-rule",
        "hold-and-wait",
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        json(&out)["printed_rules"],
        serde_json::json!(["initial-grants", "hold-and-wait"])
    );
    // every name is documented
    let help = String::from_utf8_lossy(&lkcs(&["simulate", "--help"]).stdout).to_string();
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).unwrap();
    for a in lkcs::Algorithm::ALL {
        for r in a.printed_rules() {
            assert!(help.contains(r.name), "{a} {} not in --help", r.name);
            assert!(
                doc.contains(&format!("`{}`", r.name)),
                "{a} {} not in docs/cli.md",
                r.name
            );
        }
    }
}

/// An unknown name, another algorithm's name, or `--printed-rule` with `--variant printed`
/// exits 2 with one line that lists the valid names.
#[test]
fn a_bad_printed_rule_is_one_line_listing_the_names() {
    let run = |extra: &[&str]| {
        let mut args = vec!["simulate", "--algorithm", "lmutin", "--topology", "ring:4"];
        args.extend(extra);
        lkcs(&args)
    };
    for extra in [
        &["--printed-rule", "no-such-rule"][..],
        &["--printed-rule", "no-parking"][..],
        &["--printed-rule", "initial-grants", "--variant", "printed"][..],
    ] {
        let out = run(extra);
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let lines = stderr_lines(&out);
        assert_eq!(lines.len(), 1, "{lines:?}");
        for name in [
            "initial-grants",
            "counted-grants",
            "unguarded-preempt",
            "unmatched-relinquish",
            "uncapped-release",
        ] {
            assert!(lines[0].contains(name), "{lines:?}");
        }
    }
    // single-leader is the leader choice: not with --leader
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "complete:5",
        "--l",
        "1",
        "--k",
        "4",
        "--leader",
        "0",
        "--printed-rule",
        "single-leader",
    ]);
    assert_eq!(out.status.code(), Some(2));
}

/// A safety violation the checker finds after some steps is reported as such, not as an
/// unsafe initial configuration.
#[test]
fn a_checker_safety_violation_is_not_called_initial() {
    let out = lkcs(&[
        "check",
        "--algorithm",
        "cdc",
        "--variant",
        "printed",
        "--topology",
        "complete:3",
    ]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("violated: safety at P"), "{err}");
    assert!(!err.contains("initial configuration is unsafe"), "{err}");
}

/// `lkcs sweep` passes `--printed-rule` (flag or `printed_rules` in the file) to every run;
/// a run whose algorithm lacks the rule is skipped, a name no algorithm of the grid has is
/// refused.
#[test]
fn sweep_passes_printed_rules_to_every_run() {
    let dir = std::env::temp_dir().join(format!("lkcs-cli-printed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("grid.toml");
    std::fs::write(
        &file,
        "algorithms = [\"lmutin\", \"maekawa\"]\ntopologies = [\"complete:3\"]\n\
         bounds = [\"lmutin=1:\"]\nseeds = 6\ndelays = [\"uniform:1:6\"]\nthink = 3\n\
         pairs = 3\nprinted_rules = [\"initial-grants\"]\n",
    )
    .unwrap();
    let out = lkcs(&["sweep", "--file", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let csv = String::from_utf8_lossy(&out.stdout);
    assert!(csv.contains("--printed-rule initial-grants"), "{csv}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("1 failed; 1 combination(s) skipped"), "{err}");
    std::fs::write(
        &file,
        "algorithms = [\"lmutin\"]\ntopologies = [\"complete:3\"]\nprinted_rules = [\"nope\"]\n",
    )
    .unwrap();
    let out = lkcs(&["sweep", "--file", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("initial-grants"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lkcs_refuses_up_front_an_instance_whose_processes_can_never_move() {
    // complete:6 where P5 needs at least 2 in the CS and P0 at most 2: every safe
    // configuration has exactly 2 in, so no move keeps every bound, whoever moves
    let dir = std::env::temp_dir().join(format!("lkcs-cli-frozen-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("bounds.json");
    std::fs::write(
        &file,
        r#"{"l": [0, 0, 0, 0, 0, 2], "k": [2, 6, 6, 6, 6, 6]}"#,
    )
    .unwrap();
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "complete:6",
        "--bounds",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let lines = stderr_lines(&out);
    assert_eq!(lines.len(), 1, "{lines:?}");
    assert!(
        lines[0].contains("P0, P1, P2, P3, P4, P5 can never move"),
        "{lines:?}"
    );
    // one more unit of slack (P0 may have 3) and every process can move again: the
    // refusal is not about the leader (this instance has none that the paper accepts)
    std::fs::write(
        &file,
        r#"{"l": [0, 0, 0, 0, 0, 2], "k": [3, 6, 6, 6, 6, 6]}"#,
    )
    .unwrap();
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "complete:6",
        "--bounds",
        file.to_str().unwrap(),
    ]);
    assert!(
        !stderr_lines(&out)
            .iter()
            .any(|l| l.contains("can never move")),
        "{:?}",
        stderr_lines(&out)
    );
}

#[test]
fn plot_draws_a_csv_and_refuses_an_unknown_column() {
    let dir = std::env::temp_dir().join(format!("lkcs-plot-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let csv = dir.join("t.csv");
    std::fs::write(
        &csv,
        "system,threads,rate\nA,16,10\nA,64,30\nB,16,5\nB,64,8\n",
    )
    .unwrap();
    let svg = dir.join("t.svg");
    let (csv_s, svg_s) = (csv.to_str().unwrap(), svg.to_str().unwrap());
    let out = lkcs(&[
        "plot",
        csv_s,
        "--x",
        "threads",
        "--by",
        "system",
        "--log",
        "--panel",
        "rates|1/s|rate",
        "--out",
        svg_s,
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    // the panel's title, and a marker at each of the four points
    assert!(text.contains("<svg") && text.contains("rates"));
    assert_eq!(text.matches("<circle").count(), 4, "{text}");
    let out = lkcs(&[
        "plot", csv_s, "--x", "threads", "--panel", "p|y|nope", "--out", svg_s,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no column `nope`"));
    // a refused plot leaves the file it would have written as it was
    assert_eq!(
        std::fs::read_to_string(&svg).unwrap(),
        text,
        "a refused plot overwrote --out"
    );
    // a value that is not a finite number is refused, naming it (an infinite one hung the
    // axis code; NaN drew a plot)
    for (bad, column) in [("inf", "rate"), ("-inf", "threads"), ("NaN", "rate")] {
        let rows = match column {
            "rate" => format!("system,threads,rate\nA,16,{bad}\nA,64,30\n"),
            _ => format!("system,threads,rate\nA,{bad},10\nA,64,30\n"),
        };
        std::fs::write(&csv, rows).unwrap();
        let out = lkcs(&[
            "plot", csv_s, "--x", "threads", "--panel", "p|y|rate", "--out", svg_s,
        ]);
        assert_eq!(out.status.code(), Some(2), "{bad}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!(
                "`{bad}` in column `{column}` is not a finite number"
            )),
            "{bad}: {err}"
        );
        assert_eq!(std::fs::read_to_string(&svg).unwrap(), text, "{bad}");
    }
    // a finite value whose padded axis overflows is refused too (it hung as inf did)
    std::fs::write(&csv, "system,threads,rate\nA,16,1e300\nA,64,1.5e308\n").unwrap();
    let out = lkcs(&[
        "plot", csv_s, "--x", "threads", "--panel", "p|y|rate", "--out", svg_s,
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("values too large to plot"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&svg).unwrap(), text);
    std::fs::remove_dir_all(&dir).unwrap();
}

/// An initial configuration naming many processes that do not exist is one line: how many,
/// the first few and the valid range (it was one line per id).
#[test]
fn initial_ids_out_of_range_are_one_line() {
    let ids: Vec<String> = (0..=20_000).map(|i| i.to_string()).collect();
    let initial = format!("in:{}", ids.join(","));
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lmutex",
        "--topology",
        "ring:5",
        "--initial",
        &initial,
    ]);
    let lines = stderr_lines(&out);
    assert_eq!(out.status.code(), Some(2), "{lines:?}");
    assert_eq!(
        lines,
        [
            "error: initial configuration names 19996 processes that do not exist \
          (P5, P6, P7, P8, P9 and 19991 more): processes are 0..5"
        ]
    );
    // typed in the library; one id alone keeps its sentence
    let e = lkcs::parse_initial(&initial, 5).unwrap_err();
    assert_eq!(
        e.problems,
        [lkcs::Problem::InitialOutOfRange {
            first: vec![5, 6, 7, 8, 9],
            count: 19_996,
            n: 5
        }]
    );
    let e = lkcs::parse_initial("in:0,7", 5).unwrap_err();
    assert_eq!(
        e.to_string(),
        "initial configuration names P7, but processes are 0..5"
    );
}

/// The sequential workload's helper search is counted apart from the events
/// (`helper_steps`, on a budget of its own): on path:40 with k alternating 2, 1 it visited
/// 950,000 configurations for 522 messages, charged as events, so a limit of 100,000 events
/// stalled the run.
#[test]
fn the_helper_search_is_not_charged_as_events() {
    let dir = std::env::temp_dir().join(format!("lkcs-cli-{}-helper", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bounds = dir.join("k.json");
    let k: Vec<String> = (0..40usize)
        .map(|i| if i.is_multiple_of(2) { "2" } else { "1" }.to_string())
        .collect();
    std::fs::write(&bounds, format!("{{\"k\": [{}]}}", k.join(","))).unwrap();
    let r = passed(&[
        "simulate",
        "--algorithm",
        "lmutex",
        "--topology",
        "path:40",
        "--bounds",
        bounds.to_str().unwrap(),
        "--workload",
        "sequential",
        "--max-events",
        "100000",
        "--json",
    ]);
    assert_eq!(r["stalled"], serde_json::Value::Null, "{r}");
    assert_eq!(r["requested_pairs_completed"], r["pairs_requested"], "{r}");
    let (events, messages) = (
        r["events"].as_u64().unwrap(),
        r["messages"].as_u64().unwrap(),
    );
    // a delivery per message, a begin per sequence
    assert!(
        events <= messages + 4 * 40 * 2,
        "{events} events, {messages} messages"
    );
    assert!(r["helper_steps"].as_u64().unwrap() > 100_000, "{r}");
    std::fs::remove_dir_all(&dir).ok();
}

/// A run in which every process completed its pairs is not stalled for reaching the event
/// limit on its last event (it was: "stalled (event limit N reached)", exit 1).
#[test]
fn a_finished_run_at_the_event_limit_is_not_stalled() {
    for workload in ["sequential", "concurrent"] {
        let args = [
            "simulate",
            "--algorithm",
            "lmutex",
            "--topology",
            "ring:5",
            "--workload",
            workload,
            "--pairs",
            "2",
            "--json",
        ];
        let events = passed(&args)["events"].as_u64().unwrap().to_string();
        let mut limited = args.to_vec();
        limited.extend(["--max-events", &events]);
        let r = passed(&limited);
        assert_eq!(r["stalled"], serde_json::Value::Null, "{workload}: {r}");
        assert_eq!(r["requested_pairs_completed"], 10, "{workload}: {r}");
    }
}

/// A negative or oversized bound on the command line is refused (exit 2) naming why, for
/// `simulate`, `check` and `cluster init` alike; clap alone took `-1` for an unexpected
/// argument.
#[test]
fn a_negative_or_oversized_bound_is_refused_naming_why() {
    let cases: &[(&[&str], &str)] = &[
        (
            &[
                "simulate",
                "--algorithm",
                "gcs",
                "--topology",
                "complete:4",
                "--l",
                "-1",
            ],
            "invalid value '-1' for '--l <L>': a bound counts members: it cannot be negative",
        ),
        (
            &[
                "check",
                "--algorithm",
                "lmutex",
                "--topology",
                "path:3",
                "--k",
                "-3",
            ],
            "invalid value '-3' for '--k <K>': a bound counts members: it cannot be negative",
        ),
        (
            &[
                "simulate",
                "--algorithm",
                "gcs",
                "--topology",
                "complete:4",
                "--k",
                "99999999999999999999999",
            ],
            "a bound counts members: at most",
        ),
        (
            &[
                "cluster",
                "init",
                "--members",
                "3",
                "--out",
                "unused",
                "--l",
                "-2",
            ],
            "invalid value '-2' for '--l <L>': a bound counts members: it cannot be negative",
        ),
    ];
    for (args, reason) in cases {
        let out = lkcs(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(reason), "{args:?} names its reason: {err}");
    }
    assert!(
        !std::path::Path::new("unused").exists(),
        "a refused cluster init writes nothing"
    );
}
