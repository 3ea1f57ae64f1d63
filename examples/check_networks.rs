//! Which network assumption each algorithm needs: runs the exhaustive checker on the smallest
//! instances of every algorithm under each network (`fifo`, `unordered`, `duplicating`) and
//! prints a Markdown table, one row per instance and network: the verdict, the states
//! explored, and for a violation the counterexample's length and its last steps.
//!
//! `cargo run --release --example check_networks [-- MAX_STATES [ONLY]]`: every check stops
//! after MAX_STATES generated states (default 2,000,000) or before its tables pass 1 GiB (a
//! bounded verdict then: on a duplicating network a state holds every message ever sent, so
//! states grow large, and the heap inside their messages is counted by the process's
//! resident memory); ONLY keeps the rows whose instance starts with it. The output is
//! deterministic but for the state counts of the rows bounded by memory (no time budget).

use lkcs::{
    check,
    check::{CheckConfig, CheckReport, Network, Verdict},
    cs::{CsObject, CsState},
    format_initial, Algorithm, Instance, SystemSpec, SystemVisitor, Topology,
};

/// One instance: its name in the table and its spec.
struct Row {
    name: &'static str,
    spec: SystemSpec,
}

fn spec(algorithm: &str, topology: &str, l: Option<usize>, k: Option<usize>) -> SystemSpec {
    SystemSpec {
        l,
        k,
        ..SystemSpec::new(
            algorithm.parse::<Algorithm>().expect("an algorithm"),
            Topology::parse(topology).expect("a topology"),
        )
    }
}

fn rows() -> Vec<Row> {
    let cdc = |name: &'static str, algorithm: &str| Row {
        name,
        spec: SystemSpec {
            maxreq: Some(1),
            ..spec(algorithm, "complete:3", None, None)
        },
    };
    vec![
        Row {
            name: "lmutin path:2 l=1",
            spec: spec("lmutin", "path:2", Some(1), None),
        },
        Row {
            name: "lmutin path:3 l=1",
            spec: spec("lmutin", "path:3", Some(1), None),
        },
        Row {
            name: "lmutin ring:3 l=1",
            spec: spec("lmutin", "ring:3", Some(1), None),
        },
        Row {
            name: "lmutex path:3 k=1",
            spec: spec("lmutex", "path:3", None, Some(1)),
        },
        Row {
            name: "lmutex ring:3 k=2",
            spec: spec("lmutex", "ring:3", None, Some(2)),
        },
        Row {
            name: "maekawa complete:2",
            spec: spec("maekawa", "complete:2", None, None),
        },
        Row {
            name: "maekawa complete:3",
            spec: spec("maekawa", "complete:3", None, None),
        },
        Row {
            name: "mutin complete:3 l=1",
            spec: spec("mutin", "complete:3", Some(1), None),
        },
        Row {
            name: "kmex complete:3 k=2",
            spec: spec("kmex", "complete:3", None, Some(2)),
        },
        Row {
            name: "gcs complete:3 l=1 k=2",
            spec: spec("gcs", "complete:3", Some(1), Some(2)),
        },
        cdc("cdc complete:3 maxreq=1", "cdc"),
        cdc("ddc complete:3 maxreq=1", "ddc"),
        Row {
            name: "lkcs complete:5 l=1 k=4",
            spec: spec("lkcs", "complete:5", Some(1), Some(4)),
        },
    ]
}

struct Check<'a>(&'a CheckConfig);

impl SystemVisitor for Check<'_> {
    type Output = (CheckReport, Vec<CsState>);
    fn visit<A: CsObject>(
        self,
        instance: &Instance,
        initial: &[CsState],
        procs: Vec<A>,
    ) -> Self::Output {
        (check::check(instance, procs, self.0), initial.to_vec())
    }
}

/// The counterexample's numbered steps (the lines that are not state changes).
fn steps(report: &CheckReport) -> Vec<&str> {
    report
        .counterexample
        .iter()
        .map(|l| l.trim())
        .filter(|l| {
            l.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
        })
        .collect()
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let max_states: usize = args
        .first()
        .map_or(2_000_000, |a| a.parse().expect("a count"));
    let only = args.get(1).cloned().unwrap_or_default();
    println!(
        "| instance (from) | network | verdict | states | counterexample (steps: the last ones) |"
    );
    println!("|---|---|---|---|---|");
    for row in rows().into_iter().filter(|r| r.name.starts_with(&only)) {
        for network in Network::ALL {
            let cfg = CheckConfig {
                pairs: 1,
                max_states: Some(max_states),
                max_memory: Some(1 << 30),
                count_resident: true,
                network,
                ..CheckConfig::default()
            };
            let (report, initial) = row.spec.build(Check(&cfg)).expect("a valid instance");
            let verdict = match &report.verdict {
                Verdict::Proved => "proved".to_string(),
                Verdict::Bounded => format!(
                    "bounded ({})",
                    match report.stopped_by {
                        Some(lkcs::check::Limit::Memory) => "1 GiB",
                        _ => "states",
                    }
                ),
                Verdict::Violated { property } => format!("**violated: {property}**"),
            };
            let trace = if report.ok() {
                String::new()
            } else {
                let steps = steps(&report);
                let tail: Vec<&str> = steps
                    .iter()
                    .rev()
                    .take(3)
                    .rev()
                    .map(|s| s.split_once(". ").map_or(*s, |(_, s)| s))
                    .collect();
                format!("{}: … {}", steps.len(), tail.join("; "))
            };
            println!(
                "| {} ({}) | {network} | {verdict} | {} | {trace} |",
                row.name,
                format_initial(&initial),
                report.states
            );
        }
    }
}
