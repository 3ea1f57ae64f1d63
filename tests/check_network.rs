//! The checker on networks that are not FIFO (`CheckConfig::network`), and its budgets: the
//! time budget (`CheckConfig::max_time`), the memory budget on a search that never ends, and
//! (with the `cli` feature) `lkcs check` under an address-space limit.

#[path = "../src/test_threads.rs"]
mod test_threads;
/// Test threads per core (src/test_threads.rs): twice the cores, so that the few long
/// searches at the end of the list overlap.
const TEST_THREADS_PER_CORE: usize = 2;

use lkcs::{
    check,
    check::{CheckConfig, CheckReport, Limit, Network, Search, Verdict},
    cs::{CsObject, CsState},
    Algorithm, Instance, SystemSpec, SystemVisitor, Topology,
};
use std::time::Duration;

fn spec(algorithm: &str, topology: &str, l: Option<usize>, k: Option<usize>) -> SystemSpec {
    SystemSpec {
        l,
        k,
        ..SystemSpec::new(
            algorithm.parse::<Algorithm>().unwrap(),
            Topology::parse(topology).unwrap(),
        )
    }
}

struct Check(CheckConfig);

impl SystemVisitor for Check {
    type Output = CheckReport;
    fn visit<A: CsObject>(self, instance: &Instance, _: &[CsState], procs: Vec<A>) -> CheckReport {
        check::check(instance, procs, &self.0)
    }
}

fn run(spec: &SystemSpec, cfg: CheckConfig) -> CheckReport {
    spec.build(Check(cfg)).unwrap()
}

fn on(network: Network) -> CheckConfig {
    CheckConfig {
        network,
        max_states: Some(20_000_000),
        max_memory: Some(1 << 30),
        ..CheckConfig::default()
    }
}

fn violated(r: &CheckReport) -> &str {
    match &r.verdict {
        Verdict::Violated { property } => property,
        other => panic!(
            "expected a violation, got {other:?} after {} states (stopped by {:?}, {:?})",
            r.states, r.stopped_by, r.elapsed
        ),
    }
}

/// LMUTIN needs FIFO links: on path:2 with l = 1 a Grant that overtakes a Preempt (or a
/// Request its Release) leaves both processes waiting, and a replayed Grant is counted twice,
/// which lets both leave the CS.
#[test]
fn lmutin_needs_fifo_and_at_most_once_delivery() {
    let s = spec("lmutin", "path:2", Some(1), None);
    assert_eq!(run(&s, on(Network::Fifo)).verdict, Verdict::Proved);
    let unordered = run(&s, on(Network::Unordered));
    assert_eq!(violated(&unordered), "no deadlock");
    assert!(!unordered.counterexample.is_empty());
    let duplicating = run(&s, on(Network::Duplicating));
    assert_eq!(violated(&duplicating), "safety");
    assert!(duplicating
        .counterexample
        .iter()
        .any(|l| l.contains("Grant")));
}

/// Maekawa needs FIFO links (a Failed overtaken by a Locked from the same arbiter) and
/// at-most-once delivery (a replayed Locked lets two processes into the CS).
#[test]
fn maekawa_needs_fifo_and_at_most_once_delivery() {
    let s = spec("maekawa", "complete:3", None, None);
    assert_eq!(run(&s, on(Network::Fifo)).verdict, Verdict::Proved);
    assert_eq!(violated(&run(&s, on(Network::Unordered))), "no deadlock");
    assert_eq!(violated(&run(&s, on(Network::Duplicating))), "safety");
}

/// CDC and DDC (one controller, a token passed on migration) need no FIFO links: every
/// interleaving on complete:3 with migration at every exit is safe and deadlock-free.
#[test]
fn cdc_and_ddc_stay_safe_and_live_without_fifo() {
    for algorithm in ["cdc", "ddc"] {
        let s = SystemSpec {
            maxreq: Some(1),
            ..spec(algorithm, "complete:3", None, None)
        };
        let fifo = run(&s, on(Network::Fifo));
        let unordered = run(&s, on(Network::Unordered));
        assert_eq!(fifo.verdict, Verdict::Proved, "{algorithm}");
        assert_eq!(unordered.verdict, Verdict::Proved, "{algorithm}");
        assert!(unordered.states > fifo.states, "{algorithm}");
    }
}

/// On a duplicating network the space may be infinite: a budget ends the search with a
/// bounded verdict that names it, never a proof.
#[test]
fn a_duplicating_network_without_end_is_bounded_by_the_budgets() {
    let s = SystemSpec {
        maxreq: Some(1),
        ..spec("cdc", "complete:3", None, None)
    };
    let by_states = run(
        &s,
        CheckConfig {
            max_states: Some(5_000),
            ..on(Network::Duplicating)
        },
    );
    assert_eq!(
        (&by_states.verdict, by_states.stopped_by),
        (&Verdict::Bounded, Some(Limit::States))
    );
    let by_memory = run(
        &s,
        CheckConfig {
            max_states: None,
            max_memory: Some(32 << 20),
            // its messages carry queues: count their heap too
            count_resident: true,
            ..on(Network::Duplicating)
        },
    );
    assert_eq!(
        (&by_memory.verdict, by_memory.stopped_by),
        (&Verdict::Bounded, Some(Limit::Memory))
    );
}

/// The reduced search runs as the full one on networks that are not FIFO, and stateright's
/// unordered network counts the same states.
#[test]
fn the_searches_agree_on_an_unordered_network() {
    let s = spec("lmutin", "path:3", Some(0), None);
    let cfg = |search| CheckConfig {
        search,
        threads: 1,
        ..on(Network::Unordered)
    };
    let reduced = run(&s, cfg(Search::Reduced));
    let full = run(&s, cfg(Search::Full));
    let sr = run(&s, cfg(Search::Stateright));
    assert_eq!(reduced.states, full.states);
    assert_eq!(full.verdict, sr.verdict);
    if full.ok() {
        assert_eq!(full.states, sr.states);
    }
    for algorithm in ["maekawa"] {
        let s = spec(algorithm, "complete:3", None, None);
        for network in [Network::Unordered, Network::Duplicating] {
            let sr = run(
                &s,
                CheckConfig {
                    search: Search::Stateright,
                    ..on(network)
                },
            );
            let own = run(
                &s,
                CheckConfig {
                    search: Search::Full,
                    ..on(network)
                },
            );
            // on a duplicating network stateright's state also holds the last message
            // delivered, so it may run out of states first: no search proves what the
            // other refutes
            let proved = |r: &CheckReport| r.verdict == Verdict::Proved;
            assert!(
                (sr.ok() || !proved(&own)) && (own.ok() || !proved(&sr)),
                "{network}: {:?} / {:?}",
                sr.verdict,
                own.verdict
            );
            assert!(!own.ok(), "{network}: {:?}", own.verdict);
        }
    }
}

/// A search far too large to finish stops at the time budget with a bounded verdict that
/// names it.
#[test]
fn the_time_budget_bounds_a_huge_search() {
    let s = spec("lkcs", "complete:5", Some(1), Some(4));
    for search in [Search::Reduced, Search::Full] {
        let r = run(
            &s,
            CheckConfig {
                pairs: 1000,
                max_time: Some(Duration::from_secs(1)),
                max_memory: Some(1 << 30),
                search,
                threads: 1,
                ..CheckConfig::default()
            },
        );
        assert_eq!(r.verdict, Verdict::Bounded, "{search:?}");
        assert_eq!(r.stopped_by, Some(Limit::Time), "{search:?}");
    }
}

/// A search that never ends (every process runs usize::MAX / 2 pairs, so every state is
/// new and the depth-first stack only grows) stops at the memory budget, counting the
/// stack's frames and what they hold (more than 1 KB a level here; the count that missed
/// them let the process reach twice the budget): the memory as reported never passes the
/// budget.
#[test]
fn the_memory_budget_holds_on_a_search_that_never_ends() {
    let s = spec("lmutin", "path:3", Some(1), None);
    let budget = 320 << 20;
    let mut peak = (0, 0);
    let r = s
        .build(Deep {
            cfg: CheckConfig {
                pairs: usize::MAX,
                max_memory: Some(budget),
                ..CheckConfig::default()
            },
            peak: &mut peak,
        })
        .unwrap();
    assert_eq!(
        (&r.verdict, r.stopped_by),
        (&Verdict::Bounded, Some(Limit::Memory))
    );
    assert!(r.max_depth > 65_536, "{}", r.max_depth);
    let (memory, depth) = peak;
    assert!(
        memory > budget / 2 && memory <= budget,
        "{memory} of {budget}"
    );
    assert!(memory > 1000 * depth, "{memory} bytes at depth {depth}");
}

struct Deep<'a> {
    cfg: CheckConfig,
    /// The largest memory reported, with the depth then.
    peak: &'a mut (usize, usize),
}

impl SystemVisitor for Deep<'_> {
    type Output = CheckReport;
    fn visit<A: CsObject>(self, instance: &Instance, _: &[CsState], procs: Vec<A>) -> CheckReport {
        let peak = self.peak;
        lkcs::check::check_with_progress(instance, procs, &self.cfg, &mut |p| {
            if p.memory > peak.0 {
                *peak = (p.memory, p.max_depth);
            }
        })
    }
}

/// `lkcs check` under an address-space limit (`ulimit -v`): the default memory budget
/// honours it, and a search that never ends stops with the bounded verdict (exit 0)
/// instead of aborting when an allocation fails.
#[cfg(feature = "cli")]
#[test]
fn lkcs_check_honours_an_address_space_limit() {
    use std::process::Command;
    let lkcs = env!("CARGO_BIN_EXE_lkcs");
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 1048576 && exec {lkcs} check --algorithm lmutin --topology path:3 --l 1 \
             --pairs 1000000000 --json"
        ))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    let v: serde_json::Value = serde_json::from_str(stdout.trim()).unwrap();
    assert_eq!(v["stopped_by"], "max_memory", "{v}");
    assert_eq!(v["network"], "fifo", "{v}");
}

/// `--max-time` and `--network` on the command line: a bounded verdict naming the time
/// budget, and the network in the JSON and the text output.
#[cfg(feature = "cli")]
#[test]
fn lkcs_check_takes_max_time_and_network() {
    use std::process::Command;
    let lkcs = env!("CARGO_BIN_EXE_lkcs");
    let out = Command::new(lkcs)
        .args([
            "check",
            "--algorithm",
            "lkcs",
            "--topology",
            "complete:5",
            "--l",
            "1",
            "--k",
            "4",
            "--pairs",
            "1000",
            "--max-time",
            "1",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["stopped_by"], "max_time", "{v}");
    let out = Command::new(lkcs)
        .args([
            "check",
            "--algorithm",
            "lmutin",
            "--topology",
            "path:2",
            "--l",
            "1",
            "--network",
            "unordered",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("over unordered links") && text.contains("violated: no deadlock"));
    for bad in [["--max-time", "0"], ["--network", "lossy"]] {
        let out = Command::new(lkcs)
            .args([
                "check",
                "--algorithm",
                "lmutin",
                "--topology",
                "path:2",
                "--l",
                "1",
            ])
            .args(bad)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}");
    }
}
