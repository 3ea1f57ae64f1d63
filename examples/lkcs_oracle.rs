//! Is an LKCS stall the instance's or the algorithm's? The exact configuration graph
//! ([`ConfigurationGraph`]) of an instance of at most 24 processes, and where a concurrent run
//! of it went in that graph.
//!
//! ```sh
//! cargo build --release --example lkcs_oracle --example lkcs_liveness
//! # the census: safe configurations, components, live ones, traps
//! target/release/examples/lkcs_oracle random:15:0.293:661727 /tmp/lkcs-5942.json
//! # and a run: LEADER (auto, all or single) DELAY SEED MAX_EVENTS, as in lkcs_liveness
//! target/release/examples/lkcs_oracle random:15:0.293:661727 /tmp/lkcs-5942.json all unit 74 1000000
//! ```
//!
//! `scripts/lkcs-oracle.sh runs.csv` applies it to every failed run of a liveness sweep with
//! at most 24 processes (docs/lkcs-liveness.md).

use lkcs::cs::CsObject;
use lkcs::reach::ConfigurationGraph;
use lkcs::{
    algo::lkcs::{Leaders, Lkcs, LkcsRules},
    cs::CsState,
    sim::{simulate, Delay, SimConfig, Workload},
    Topology,
};
use std::collections::BTreeSet;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.len() != 2 && args.len() != 6 {
        eprintln!("usage: lkcs_oracle TOPOLOGY BOUNDS.json [LEADER DELAY SEED MAX_EVENTS]");
        std::process::exit(2);
    }
    let topology = Topology::parse(&args[0]).unwrap_or_else(|e| fail(&e.to_string()));
    let text = std::fs::read_to_string(&args[1]).unwrap_or_else(|e| fail(&e.to_string()));
    let file: serde_json::Value =
        serde_json::from_str(&text).unwrap_or_else(|e| fail(&e.to_string()));
    let list = |key: &str| -> Vec<usize> {
        serde_json::from_value(file[key].clone()).unwrap_or_else(|e| fail(&format!("{key}: {e}")))
    };
    let inst =
        Lkcs::instance(&topology, &list("l"), &list("k")).unwrap_or_else(|e| fail(&e.to_string()));
    let graph = ConfigurationGraph::of(&inst).unwrap_or_else(|e| fail(&e.to_string()));
    let census = graph.census();
    println!(
        "{}: {} safe configurations, {} components, {} live ({} configurations), {} traps",
        args[0],
        census.safe,
        census.components,
        census.live_components,
        census.in_live,
        census.traps
    );
    if args.len() == 2 {
        return;
    }
    let rules = LkcsRules::CORRECTED;
    let built = match args[2].as_str() {
        "all" => Lkcs::build(&inst, &Leaders::All, None, rules),
        "single" => Lkcs::build(&inst, &Leaders::Auto, None, rules).and_then(|auto| {
            Lkcs::build(
                &inst,
                &Leaders::One(auto.tightening[0].index()),
                None,
                rules,
            )
        }),
        _ => Lkcs::build(&inst, &Leaders::Auto, None, rules),
    };
    let sys = built.unwrap_or_else(|e| fail(&e.to_string()));
    let mut states: Vec<CsState> = sys.procs.iter().map(CsObject::state).collect();
    let max_events: u64 = args[5].parse().unwrap_or_else(|_| fail("MAX_EVENTS"));
    let cfg = SimConfig {
        seed: args[4].parse().unwrap_or_else(|_| fail("SEED")),
        pairs: 3,
        delay: Delay::parse(&args[3]).unwrap_or_else(|e| fail(&e.to_string())),
        workload: Workload::Concurrent,
        think_max: 4,
        max_events,
        // the whole trace, so that every move is seen
        trace_capacity: usize::MAX,
        stop: Vec::new(),
    };
    let report = simulate(&sys.instance, sys.procs, &cfg);
    if report.ok() {
        // the simulator keeps a trace only of a failed run
        println!("run: completed");
        return;
    }
    // Follow the configuration through the moves the trace records ("P3 completes: now InCs").
    let mut moves = vec![0u64; states.len()];
    let mut visited = BTreeSet::new();
    let mut left_live = false;
    for line in &report.trace {
        let Some((head, now)) = line.split_once(" completes: now ") else {
            continue;
        };
        let p: usize = head
            .rsplit(" P")
            .next()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| fail(&format!("unreadable trace line: {line}")));
        states[p] = if now == "InCs" {
            CsState::InCs
        } else {
            CsState::OutCs
        };
        moves[p] += 1;
        let c = graph
            .component(&states)
            .unwrap_or_else(|| fail(&format!("an unsafe configuration after: {line}")));
        visited.insert(c);
        left_live |= !graph.reaches_live(c);
    }
    let last = graph
        .component(&states)
        .unwrap_or_else(|| fail("unsafe final configuration"));
    let still: Vec<String> = (0..moves.len())
        .filter(|&p| moves[p] == 0)
        .map(|p| format!("P{p}"))
        .collect();
    println!(
        "run: {}; {} moves, {} components visited, a trap entered: {}; final component live: {}, \
         reaches a live one: {}; processes that never moved: [{}]",
        outcome(&report),
        moves.iter().sum::<u64>(),
        visited.len(),
        left_live,
        graph.is_live(last),
        graph.reaches_live(last),
        still.join(" ")
    );
    println!("moves per process: {moves:?}");
}

/// The run's outcome in a few words.
fn outcome(r: &lkcs::sim::SimReport) -> String {
    if r.safety_violations > 0 {
        format!("{} bound(s) broken", r.safety_violations)
    } else if r.deadlock {
        "deadlock".into()
    } else {
        format!("stalled ({})", r.stalled.as_deref().unwrap_or("unfinished"))
    }
}

fn fail(why: &str) -> ! {
    eprintln!("error: {why}");
    std::process::exit(2);
}
