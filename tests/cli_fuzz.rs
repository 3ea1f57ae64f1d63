//! A fuzz of the command line: argument vectors drawn from a grammar of every `simulate` and
//! `check` flag, with valid values, edge values (0, 1, `u64::MAX`, `2^64`, negative numbers,
//! empty strings, NaN, endless files) and garbage, in any combination. The contract for each:
//! the binary exits 0, 1 or 2 within [`TIME_LIMIT`] under a 4 GiB address-space limit; exit 2
//! prints only `error: ...` lines and a panic (101) or an abort (134) never happens.
//!
//! Every run is bounded by the tool's own budgets (`--max-events` for simulate, `--max-states`
//! for check, drawn from the grammar too), so an invocation that outlives the time limit is a
//! hang, not a long honest search. proptest shrinks a failure to a minimal argument vector and
//! prints it; nothing is persisted (a test writes no tracked file): a case found is kept as a
//! named test below ([`found_no_arguments`], [`found_lkcs_on_star_20000`]).

use proptest::prelude::*;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How long one invocation may take before it counts as a hang.
const TIME_LIMIT: Duration = Duration::from_secs(60);

/// The address-space limit every invocation runs under (KiB, as `ulimit -v` takes it).
const ADDRESS_SPACE_KIB: u64 = 4 << 20;

/// Numbers as a user (or a script with a bug) might type them.
const NUMBERS: &[&str] = &[
    "5",
    "-1",
    "x",
    "",
    "1.5",
    "1000000000",
    "1000000001",
    "18446744073709551615",
    "18446744073709551616",
    "9223372036854775808",
];

fn one_of(values: &'static [&'static str]) -> BoxedStrategy<String> {
    prop::sample::select(values)
        .prop_map(str::to_string)
        .boxed()
}

/// Mostly small numbers that make sense, sometimes an edge value.
fn number() -> BoxedStrategy<String> {
    prop_oneof![3 => one_of(&["0", "1", "2", "3"]), 1 => one_of(NUMBERS)].boxed()
}

/// Topologies: small valid ones, the limits, and malformed ones.
fn topology() -> BoxedStrategy<String> {
    let size = prop_oneof![
        8 => (2usize..9).prop_map(|n| n.to_string()),
        1 => one_of(&["0", "1", "20000", "20001", "100000", "18446744073709551615", "-3", "x", ""]),
    ];
    let dims = prop_oneof![
        4 => (1usize..5, 1usize..5).prop_map(|(r, c)| format!("{r}x{c}")),
        1 => one_of(&["0x3", "3x0"]),
        1 => one_of(&["141x141", "142x142", "3x", "x3", "1x18446744073709551615", "3X3", "3*3"]),
    ];
    let probability = one_of(&[
        "0.3", "0.5", "0.8", "1", "0", "1.5", "-0.1", "NaN", "inf", "1e-300", "0.0001",
    ]);
    let seed = one_of(&["0", "7", "18446744073709551615", "-1", "s"]);
    prop_oneof![
        4 => (one_of(&["complete", "ring", "path", "star"]), size.clone())
            .prop_map(|(k, n)| format!("{k}:{n}")),
        2 => (one_of(&["grid", "torus"]), dims).prop_map(|(k, d)| format!("{k}:{d}")),
        2 => (
            prop_oneof![
                4 => (2usize..14).prop_map(|n| n.to_string()),
                1 => one_of(&["0", "1", "3000", "20000"])
            ],
            probability,
            seed
        )
            .prop_map(|(n, p, s)| format!("random:{n}:{p}:{s}")),
        1 => one_of(&["complete", "complete:", "complete:3:4", ":::", "hexagon:4", "ring:3,4", ""]),
    ]
    .boxed()
}

/// `--initial` values, well and badly formed.
fn initial() -> BoxedStrategy<String> {
    prop_oneof![
        3 => prop::collection::vec(0usize..9, 0..4).prop_map(|ids| {
            let ids: Vec<String> = ids.iter().map(usize::to_string).collect();
            format!("in:{}", ids.join(","))
        }),
        1 => one_of(&["in:0,,1", "in:0,0", "in:,", "out:0", "in:-1", "in:18446744073709551616", "0,1", ""]),
    ]
    .boxed()
}

/// Files for `--bounds`: written once per test run under Cargo's target temporary directory.
struct BoundsFiles {
    dir: PathBuf,
}

impl BoundsFiles {
    const CONTENTS: &'static [(&'static str, &'static str)] = &[
        (
            "uniform.json",
            r#"{"l": [1, 1, 1, 1, 1], "k": [3, 3, 3, 3, 3]}"#,
        ),
        ("lower.json", r#"{"l": [2, 1, 0, 1, 2]}"#),
        ("short.json", r#"{"l": [1]}"#),
        ("nulls.json", r#"{"l": null, "k": null}"#),
        ("empty.json", "{}"),
        ("huge.json", r#"{"k": [18446744073709551615, 0, 1, 2, 3]}"#),
        ("negative.json", r#"{"l": [-1, 0, 0, 0, 0]}"#),
        ("garbage.json", "not json at all \u{0}\u{1}"),
        ("unknown.json", r#"{"m": [1, 2]}"#),
    ];

    fn create() -> BoundsFiles {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("cli-fuzz-bounds");
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        for (name, text) in Self::CONTENTS {
            std::fs::write(dir.join(name), text).expect("a bounds file");
        }
        BoundsFiles { dir }
    }

    /// Every path a `--bounds` may name: the files, a directory, a missing file, /dev/zero.
    fn paths(&self) -> Vec<String> {
        let mut paths: Vec<String> = Self::CONTENTS
            .iter()
            .map(|(name, _)| self.dir.join(name).display().to_string())
            .collect();
        paths.push(self.dir.display().to_string());
        paths.push(self.dir.join("missing.json").display().to_string());
        paths.push("/dev/zero".into());
        paths
    }
}

/// One optional flag, given one time in five: `[flag, value]` or nothing.
fn flag(name: &'static str, value: BoxedStrategy<String>) -> BoxedStrategy<Vec<String>> {
    flag_sometimes(name, 0.2, value)
}

/// One optional flag, given with probability `p`.
fn flag_sometimes(
    name: &'static str,
    p: f64,
    value: BoxedStrategy<String>,
) -> BoxedStrategy<Vec<String>> {
    prop::option::weighted(p, value)
        .prop_map(move |v| v.map(|v| vec![name.to_string(), v]).unwrap_or_default())
        .boxed()
}

fn switch(name: &'static str) -> BoxedStrategy<Vec<String>> {
    prop::bool::weighted(0.3)
        .prop_map(move |on| if on { vec![name.to_string()] } else { vec![] })
        .boxed()
}

/// The flags `simulate` and `check` share.
fn system_flags(bounds: Vec<String>) -> BoxedStrategy<Vec<String>> {
    let algorithm = prop_oneof![
        8 => one_of(&["lmutin", "lmutex", "lkcs", "maekawa", "mutin", "kmex", "gcs", "cdc", "ddc"]),
        1 => one_of(&["", "LMUTIN", "paxos", "lmutin "]),
    ];
    let printed_rule = one_of(&[
        "initial-grants",
        "counted-grants",
        "unguarded-preempt",
        "no-fallback-nominee",
        "failed-rule",
        "nonsense",
        "",
    ]);
    // mostly an algorithm with a topology of its kind, so that many runs get past validation
    let local = one_of(&["lmutin", "lmutex", "lkcs"]);
    let global = one_of(&["maekawa", "mutin", "kmex", "gcs", "cdc", "ddc"]);
    let coherent = prop_oneof![
        (local, topology()).prop_map(|(a, t)| (Some(a), Some(t))),
        (global, 2usize..7).prop_map(|(a, n)| (Some(a), Some(format!("complete:{n}")))),
    ];
    let free = (
        prop::option::weighted(0.95, algorithm),
        prop::option::weighted(0.95, topology()),
    );
    (
        prop_oneof![3 => coherent, 1 => free],
        (
            flag("--l", number()),
            flag("--k", number()),
            flag("--bounds", prop::sample::select(bounds).boxed()),
            flag("--initial", initial()),
            flag(
                "--variant",
                one_of(&["corrected", "printed", "Printed", ""]),
            ),
        ),
        (
            flag_sometimes(
                "--leader",
                0.07,
                one_of(&["0", "1", "all", "18446744073709551615", "-1", "x"]),
            ),
            flag_sometimes("--coterie", 0.07, one_of(&["majority", "grid", "tree", ""])),
            flag_sometimes(
                "--mx",
                0.07,
                one_of(&["maekawa", "lmutex", "cdc", "ddc", "gcs", ""]),
            ),
            flag_sometimes("--maxreq", 0.07, number()),
            flag_sometimes("--migrate-after", 0.07, number()),
            flag("--pairs", number()),
            flag_sometimes("--printed-rule", 0.07, printed_rule),
        ),
    )
        .prop_map(|((algorithm, topology), a, b)| {
            let mut args = Vec::new();
            if let Some(v) = algorithm {
                args.extend(["--algorithm".to_string(), v]);
            }
            if let Some(v) = topology {
                args.extend(["--topology".to_string(), v]);
            }
            for part in [a.0, a.1, a.2, a.3, a.4, b.0, b.1, b.2, b.3, b.4, b.5, b.6] {
                args.extend(part);
            }
            args
        })
        .boxed()
}

/// Stray tokens a user might add anywhere.
fn stray() -> BoxedStrategy<Vec<String>> {
    prop::option::weighted(
        0.15,
        one_of(&[
            "--frobnicate",
            "-x",
            "--",
            "--l=3",
            "--json=yes",
            "extra",
            "--help",
        ]),
    )
    .prop_map(|t| t.into_iter().collect())
    .boxed()
}

/// A whole `lkcs` argument vector.
fn invocation(bounds: Vec<String>) -> BoxedStrategy<Vec<String>> {
    let simulate = (
        system_flags(bounds.clone()),
        (
            flag("--seed", one_of(&["0", "1", "18446744073709551615", "-1"])),
            flag(
                "--delay",
                one_of(&[
                    "unit",
                    "uniform:1:5",
                    "uniform:5:1",
                    "uniform:0:0",
                    "uniform:1:18446744073709551615",
                    "uniform:1",
                    "gaussian",
                ]),
            ),
            flag("--workload", one_of(&["concurrent", "sequential", "burst"])),
            flag("--think", number()),
            flag("--trace", number()),
            switch("--json"),
        ),
        // the run's own budget: always small, so that a slow run is a hang
        prop_oneof![1 => Just("0".to_string()), 8 => one_of(&["1", "1000", "200000"])],
        stray(),
    )
        .prop_map(|(system, (a, b, c, d, e, f), max_events, stray)| {
            let mut args = vec!["simulate".to_string()];
            args.extend(system);
            for part in [a, b, c, d, e, f] {
                args.extend(part);
            }
            args.extend(["--max-events".to_string(), max_events]);
            args.extend(stray);
            args
        });
    let check = (
        system_flags(bounds),
        (
            flag(
                "--max-memory",
                one_of(&["0.01", "0.25", "-1", "NaN", "1e30", "x"]),
            ),
            flag(
                "--search",
                one_of(&["reduced", "full", "stateright", "bfs"]),
            ),
            switch("--json"),
        ),
        one_of(&["0", "1", "1000", "100000"]),
        stray(),
    )
        .prop_map(|(system, (a, b, c), max_states, stray)| {
            let mut args = vec!["check".to_string()];
            args.extend(system);
            for part in [a, b, c] {
                args.extend(part);
            }
            args.extend(["--max-states".to_string(), max_states]);
            args.extend(stray);
            args
        });
    prop_oneof![
        6 => simulate,
        3 => check,
        1 => one_of(&["", "simulate", "check", "sweep", "frobnicate", "--version"])
            .prop_map(|c| if c.is_empty() { vec![] } else { vec![c] }),
    ]
    .boxed()
}

/// How an invocation ended.
struct Outcome {
    code: Option<i32>,
    stderr: String,
    took: Duration,
}

/// Runs `lkcs args` under the address-space limit, killing it at the time limit.
fn run(args: &[String]) -> Outcome {
    let start = Instant::now();
    let mut child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v {ADDRESS_SPACE_KIB} && exec \"$0\" \"$@\""
        ))
        .arg(env!("CARGO_BIN_EXE_lkcs"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary starts");
    let mut stderr = child.stderr.take().expect("piped stderr");
    let reader = std::thread::spawn(move || {
        let mut text = Vec::new();
        // the first 64 KiB say what happened; the trace of a failed run may be long
        let _ = stderr.by_ref().take(64 << 10).read_to_end(&mut text);
        let _ = std::io::copy(&mut stderr, &mut std::io::sink());
        String::from_utf8_lossy(&text).into_owned()
    });
    let code = loop {
        if let Some(status) = child.try_wait().expect("wait") {
            break status.code().or_else(|| {
                use std::os::unix::process::ExitStatusExt;
                status.signal().map(|s| 128 + s)
            });
        }
        if start.elapsed() > TIME_LIMIT {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    Outcome {
        code,
        stderr: reader.join().expect("stderr reader"),
        took: start.elapsed(),
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 256,
        max_shrink_iters: 64,
        failure_persistence: None,
        ..ProptestConfig::default()
    })]

    /// Any argument vector: exit 0, 1 or 2 in time; exit 2 says only `error: ...` lines; no
    /// panic or abort.
    #[test]
    fn every_invocation_exits_0_1_or_2_in_time(args in invocation(BOUNDS.paths())) {
        if let Err(why) = contract(&args) {
            return Err(TestCaseError::fail(why));
        }
    }
}

/// The contract of every invocation, or what broke it.
fn contract(args: &[String]) -> Result<(), String> {
    let out = run(args);
    let line = args.join(" ");
    let Some(code) = out.code else {
        return Err(format!("still running after {:?}: lkcs {line}", out.took));
    };
    if !matches!(code, 0..=2) {
        return Err(format!("exit {code}: lkcs {line}\n{}", out.stderr));
    }
    if out.stderr.contains("panicked") {
        return Err(format!("panic: lkcs {line}\n{}", out.stderr));
    }
    if code == 2 {
        let lines: Vec<&str> = out.stderr.lines().collect();
        if lines.is_empty() {
            return Err(format!("exit 2 without a word: lkcs {line}"));
        }
        if !lines.iter().all(|l| l.starts_with("error: ")) {
            return Err(format!(
                "exit 2 with more than error lines: lkcs {line}\n{}",
                out.stderr
            ));
        }
    }
    Ok(())
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// Found by the fuzz: no argument at all (usage, exit 2, only `error: ` lines).
#[test]
fn found_no_arguments() {
    contract(&[]).unwrap();
}

/// Found by the fuzz: LKCS on a star of 20,000 processes, one event. Its setup was quadratic
/// in n and outside `--max-events`; it now answers within the time limit.
#[test]
fn found_lkcs_on_star_20000() {
    contract(&strings(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "star:20000",
        "--max-events",
        "1",
    ]))
    .unwrap();
}

/// Found by the fuzz (the issue's failing run): LKCS on a ring of 100,000 processes, one
/// event (it took 231 s in setup).
#[test]
fn found_lkcs_on_ring_100000() {
    contract(&strings(&[
        "simulate",
        "--algorithm",
        "lkcs",
        "--topology",
        "ring:100000",
        "--max-events",
        "1",
    ]))
    .unwrap();
}

/// The bounds files, written on first use.
static BOUNDS: std::sync::LazyLock<BoundsFiles> = std::sync::LazyLock::new(BoundsFiles::create);

/// The grammar reaches every subcommand's flags: a sample of 400 vectors names every flag.
#[test]
fn the_grammar_names_every_flag() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = invocation(BOUNDS.paths());
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..400 {
        let args = strategy.new_tree(&mut runner).expect("a value").current();
        seen.extend(args.into_iter().filter(|a| a.starts_with("--")));
    }
    for flag in [
        "--algorithm",
        "--topology",
        "--l",
        "--k",
        "--bounds",
        "--initial",
        "--variant",
        "--leader",
        "--coterie",
        "--mx",
        "--maxreq",
        "--migrate-after",
        "--pairs",
        "--printed-rule",
        "--seed",
        "--delay",
        "--workload",
        "--think",
        "--trace",
        "--max-events",
        "--json",
        "--max-memory",
        "--search",
        "--max-states",
    ] {
        assert!(seen.contains(flag), "{flag} never drawn");
    }
}

/// The fuzz reaches past the parser: among 120 drawn vectors some runs succeed (exit 0) and
/// some inputs are refused (exit 2), so the property above is not only about flag parsing.
#[test]
fn the_fuzz_reaches_both_refusals_and_runs() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;
    let mut runner = TestRunner::deterministic();
    let strategy = invocation(BOUNDS.paths());
    let mut codes = std::collections::BTreeMap::new();
    for _ in 0..120 {
        let args = strategy.new_tree(&mut runner).expect("a value").current();
        let out = run(&args);
        if std::env::var_os("LKCS_FUZZ_SHOW").is_some() {
            eprintln!(
                "{:?} lkcs {}\n  {}",
                out.code,
                args.join(" "),
                out.stderr.lines().next().unwrap_or("")
            );
        }
        *codes.entry(out.code).or_insert(0) += 1;
    }
    eprintln!("exit codes of 120 drawn invocations: {codes:?}");
    assert!(codes.get(&Some(0)).copied().unwrap_or(0) >= 1, "{codes:?}");
    assert!(codes.get(&Some(2)).copied().unwrap_or(0) >= 1, "{codes:?}");
}
