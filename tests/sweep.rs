//! `lkcs sweep`: a grid of simulations, one CSV row per run, SVG plots, the reproducing
//! command of every failed run, and the exit codes of the CLI contract (DESIGN §5).

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn lkcs(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_lkcs"))
        .args(args)
        .output()
        .expect("the binary runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A fresh scratch directory for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lkcs-sweep-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Splits a CSV line, honouring quoted cells.
fn cells(line: &str) -> Vec<String> {
    let (mut out, mut cur, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = line.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, quoted) {
            ('"', true) if chars.peek() == Some(&'"') => {
                cur.push('"');
                chars.next();
            }
            ('"', _) => quoted = !quoted,
            (',', false) => out.push(std::mem::take(&mut cur)),
            _ => cur.push(c),
        }
    }
    out.push(cur);
    out
}

fn assert_svg(path: &Path) {
    let svg = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        svg.starts_with("<svg") || svg.starts_with("<?xml"),
        "{}: {}",
        path.display(),
        &svg[..svg.len().min(80)]
    );
    assert!(svg.trim_end().ends_with("</svg>"), "{}", path.display());
    assert!(svg.len() > 1000, "{} is nearly empty", path.display());
}

/// The column names of `lkcs simulate --json`, flattened as runs.csv writes them.
fn simulate_json_columns() -> Vec<String> {
    let out = lkcs(&[
        "simulate",
        "--algorithm",
        "lmutin",
        "--topology",
        "ring:5",
        "--json",
    ]);
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let mut cols = Vec::new();
    for (k, inner) in v.as_object().unwrap() {
        match inner {
            serde_json::Value::Object(o) if k != "messages_by_kind" => {
                cols.extend(o.keys().map(|k2| format!("{k}.{k2}")))
            }
            _ => cols.push(k.clone()),
        }
    }
    cols
}

#[test]
fn a_grid_of_120_runs_writes_one_row_per_run_and_valid_svgs() {
    let dir = scratch("grid");
    let file = dir.join("grid.toml");
    std::fs::write(
        &file,
        r#"
algorithms = ["lmutin", "lmutex"]
topologies = ["ring:5", "complete:4"]
family = "torus"
sizes = [3]
bounds = ["lmutin=1:", "lmutex=:2"]
seeds = "1..=10"
delays = ["unit", "uniform:1:4"]
workload = "concurrent"
pairs = 2
"#,
    )
    .unwrap();
    let out_dir = dir.join("out");
    let out = lkcs(&[
        "sweep",
        "--file",
        file.to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let csv = std::fs::read_to_string(out_dir.join("runs.csv")).unwrap();
    let lines: Vec<&str> = csv.lines().collect();
    // 2 algorithms × 3 topologies × 1 bound each × 10 seeds × 2 delays
    assert_eq!(lines.len(), 1 + 120, "{}", &csv[..csv.len().min(2000)]);
    let header = cells(lines[0]);
    for col in simulate_json_columns().iter().map(String::as_str).chain([
        "run",
        "bounds",
        "l",
        "k",
        "outcome",
        "paper_best",
        "command",
    ]) {
        assert!(
            header.iter().any(|h| h == col),
            "no column {col}: {header:?}"
        );
    }
    let at = |name: &str| header.iter().position(|h| h == name).unwrap();
    let mut seen = std::collections::BTreeSet::new();
    for line in &lines[1..] {
        let row = cells(line);
        assert_eq!(row.len(), header.len(), "{line}");
        assert_eq!(row[at("outcome")], "passed", "{line}");
        assert!(row[at("command")].starts_with("lkcs simulate --algorithm "));
        seen.insert((
            row[at("algorithm")].clone(),
            row[at("topology")].clone(),
            row[at("seed")].clone(),
            row[at("delay")].clone(),
        ));
        // lmutin and lmutex pay at least the paper's best case 3(|N_i|+1) per pair
        let best: f64 = row[at("paper_best")].parse().unwrap();
        let mean: f64 = row[at("messages_per_pair.mean")].parse().unwrap();
        assert!(mean >= best - 1e-9, "{line}");
    }
    assert_eq!(seen.len(), 120, "every grid point once");
    for svg in ["messages.svg", "waiting.svg", "outcomes.svg"] {
        assert_svg(&out_dir.join(svg));
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn progress_goes_to_stderr_and_stdout_holds_only_the_summary() {
    let dir = scratch("quiet");
    let out = lkcs(&[
        "sweep",
        "--algorithms",
        "kmex,gcs",
        "--topologies",
        "complete:4,complete:5",
        "--bounds",
        "1:3",
        "--seeds",
        "0..3",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    // kmex refuses l = 1: its 6 combinations are skipped, not failed
    assert!(
        lines[0].starts_with("sweep: 6 runs, 6 passed, 0 failed; 6 combination(s) skipped"),
        "{stdout}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.contains("skipped 6: kmex fixes l = 0")),
        "{stdout}"
    );
    assert!(lines[1..].iter().all(|l| l.starts_with("  ")), "{stdout}");
    assert!(lines.last().unwrap().contains("runs.csv"), "{stdout}");
    assert!(
        !stdout.contains('\r') && !stdout.contains('\u{1b}'),
        "no progress bar on stdout: {stdout:?}"
    );
    let csv = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    assert_eq!(csv.lines().count(), 1 + 6);
    // without --out the CSV is stdout and the summary stderr
    let out = lkcs(&[
        "sweep",
        "--algorithms",
        "lmutin",
        "--topologies",
        "ring:4",
        "--seeds",
        "1,2",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout).lines().count(),
        3,
        "{}",
        text(&out.stdout)
    );
    assert!(text(&out.stderr).starts_with("sweep: 2 runs"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn a_failing_run_exits_1_with_a_command_that_reproduces_it() {
    let dir = scratch("fail");
    // the printed arrival-only Failed rule of Maekawa deadlocks on seed 1 (tests/cli.rs)
    let out = lkcs(&[
        "sweep",
        "--algorithms",
        "maekawa",
        "--topologies",
        "complete:5",
        "--variant",
        "printed,corrected",
        "--pairs",
        "3",
        "--delays",
        "uniform:1:12",
        "--think",
        "8",
        "--seeds",
        "1..=2",
        "--out",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    let stderr = text(&out.stderr);
    let commands: Vec<&str> = stderr
        .lines()
        .filter_map(|l| l.find("lkcs simulate ").map(|i| &l[i..]))
        .collect();
    assert!(!commands.is_empty(), "{stderr}");
    assert!(
        commands.iter().all(|c| c.contains("--variant printed")),
        "{stderr}"
    );
    assert!(stderr.contains("--seed 1"), "seed 1 deadlocks: {stderr}");
    for command in commands {
        let args: Vec<&str> = command.split_whitespace().skip(1).collect();
        let rerun = lkcs(&args);
        assert_eq!(rerun.status.code(), Some(1), "{command}");
        assert!(text(&rerun.stderr).contains("deadlock"), "{command}");
    }
    let csv = std::fs::read_to_string(dir.join("runs.csv")).unwrap();
    // the reason column, quoted as it holds a comma
    assert!(
        csv.lines()
            .any(|l| l.contains(",failed,\"deadlock, only 0 of ")),
        "{csv}"
    );
    assert_svg(&dir.join("outcomes.svg"));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_grids_exit_2_with_one_line() {
    let dir = scratch("bad");
    let cases: [(&str, &str); 5] = [
        ("algorithms = [\"lmutin\"\ntopologies = ", "grid.toml:"),
        (
            "algorithms = [\"lmutin\"]\ntopologies = [\"ring:4\"]\nalgorythm = 1\n",
            // the line it is on (the start of a line was counted as the line before)
            "grid.toml:3: unknown field `algorythm`",
        ),
        ("algorithms = []\ntopologies = [\"ring:4\"]\n", "empty"),
        (
            "algorithms = [\"lmutin\"]\ntopologies = [\"ring:4\"]\nseeds = \"5..=1\"\n",
            "seeds",
        ),
        (
            "algorithms = [\"lmutin\"]\ntopologies = [\"ring:4\"]\nseeds = true\n",
            "integer",
        ),
    ];
    let file = dir.join("grid.toml");
    for (toml, needle) in cases {
        std::fs::write(&file, toml).unwrap();
        let out = lkcs(&["sweep", "--file", file.to_str().unwrap()]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{toml}: {err}");
        assert_eq!(err.lines().count(), 1, "{toml}: {err}");
        assert!(
            err.starts_with("error: ") && err.contains(needle),
            "{toml}: {err}"
        );
        assert!(out.stdout.is_empty(), "{toml}");
    }
    for args in [
        &["sweep", "--topologies", "ring:4"][..],
        &["sweep", "--algorithms", "paxos", "--topologies", "ring:4"],
        &["sweep", "--algorithms", "lmutin", "--topologies", "ring:1x"],
        &[
            "sweep",
            "--algorithms",
            "lmutin",
            "--topologies",
            "ring:4",
            "--bounds",
            "3",
        ],
        &[
            "sweep",
            "--algorithms",
            "lmutin",
            "--topologies",
            "ring:4",
            "--jobs",
            "0",
        ],
        &[
            "sweep",
            "--algorithms",
            "lmutin",
            "--topologies",
            "ring:4",
            "--file",
            "/nonexistent.toml",
        ],
        // every combination refused: nothing to run
        &["sweep", "--algorithms", "gcs", "--topologies", "ring:6"],
        // two empty items, one problem (it printed the same line twice)
        &[
            "sweep",
            "--algorithms",
            "lmutin",
            "--topologies",
            "ring:4",
            "--seeds",
            ",",
        ],
    ] {
        let out = lkcs(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("error: "), "{args:?}: {err}");
    }
    // a value no run can take is refused up front, naming it (it was a skipped run, exit 0,
    // or the generic "every combination was skipped")
    let base = [
        "sweep",
        "--algorithms",
        "lmutin,cdc",
        "--topologies",
        "ring:5,complete:5",
    ];
    for (extra, named) in [
        (&["--maxreq", "0"][..], "maxreq must be at least 1"),
        (&["--max-events", "0"], "max_events must be at least 1"),
        (
            &["--pairs", "1000000001"],
            "at most 1000000000 pairs per process",
        ),
    ] {
        let args: Vec<&str> = base.iter().chain(extra).copied().collect();
        let out = lkcs(&args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.contains(named), "{args:?}: {err}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn seed_ranges_are_inclusive_up_to_u64_max() {
    let max = u64::MAX;
    let one = max.to_string();
    let two = format!("{}..={max}", max - 1);
    for (seeds, runs) in [(one.as_str(), 1), (two.as_str(), 2)] {
        let out = lkcs(&[
            "sweep",
            "--algorithms",
            "lmutex",
            "--topologies",
            "ring:3",
            "--seeds",
            seeds,
        ]);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(0), "--seeds {seeds}: {err}");
        assert!(!err.contains("the grid is empty"), "--seeds {seeds}: {err}");
        assert!(
            err.starts_with(&format!("sweep: {runs} runs, {runs} passed")),
            "--seeds {seeds}: {err}"
        );
        let stdout = text(&out.stdout);
        assert_eq!(stdout.lines().count(), 1 + runs, "{stdout}");
        assert!(
            stdout.contains(&format!("--seed {max}")),
            "--seeds {seeds}: {stdout}"
        );
    }
}

#[test]
fn an_unknown_mx_in_a_grid_file_exits_2_naming_it_and_the_accepted_ones() {
    let dir = scratch("mx");
    let file = dir.join("grid.toml");
    std::fs::write(
        &file,
        "algorithms = [\"gcs\"]\ntopologies = [\"complete:4\"]\nmx = [\"maekawa\", \"paxos\"]\n",
    )
    .unwrap();
    let out = lkcs(&["sweep", "--file", file.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("error: mx: ")
            && err.contains("`paxos`")
            && err.contains("maekawa, lmutex, cdc, ddc"),
        "{err}"
    );
    assert!(out.stdout.is_empty(), "{}", text(&out.stdout));
    // the same check, typed, in the library
    match lkcs::check_mx("paxos") {
        Err(lkcs::Problem::UnknownMx { given, accepted }) => {
            assert_eq!(given, "paxos");
            assert_eq!(accepted, ["maekawa", "lmutex", "cdc", "ddc"]);
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(lkcs::check_mx("cdc"), Ok(()));
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn an_unknown_coterie_or_leader_in_a_grid_exits_2_before_any_run() {
    let dir = scratch("names");
    let file = dir.join("grid.toml");
    std::fs::write(
        &file,
        "algorithms = [\"gcs\", \"lkcs\"]\ntopologies = [\"complete:5\"]\n\
         coterie = [\"grid\", \"tree\"]\nleader = \"first\"\n",
    )
    .unwrap();
    let out = lkcs(&["sweep", "--file", file.to_str().unwrap()]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("coterie `tree`: unknown (expected majority or grid)"),
        "the coterie named: {err}"
    );
    assert!(
        err.contains("leader `first`: expected a process index, `all` or `auto`"),
        "the leader named: {err}"
    );
    assert!(out.stdout.is_empty(), "no run: {}", text(&out.stdout));
    // the same names, typed, in the library
    assert_eq!(
        "tree".parse::<lkcs::quota::QuorumSystem>(),
        Err(lkcs::Problem::Coterie(lkcs::CoterieProblem::UnknownName(
            "tree".into()
        )))
    );
    assert_eq!(
        "3".parse::<lkcs::algo::lkcs::Leaders>(),
        Ok(lkcs::algo::lkcs::Leaders::One(3))
    );
    std::fs::remove_dir_all(&dir).ok();
}
