//! `lkcs sweep`: a grid of simulations (algorithms × topologies × bounds × seeds × delay
//! models × ...), run in parallel over the cores, one CSV row per run and SVG plots.
//!
//! Every run goes through the very code path of `lkcs simulate`: the sweep writes the
//! run's `lkcs simulate` flags, parses them with the same parser and calls
//! [`crate::simulate_run`]. So the command listed for a failed run reproduces it exactly.
//!
//! # The grid file (`--file FILE`, TOML)
//!
//! ```toml
//! algorithms = ["lmutin", "gcs"]             # ALGO names of `lkcs simulate`
//! topologies = ["torus:4x4", "complete:16"]  # TOPO specs of `lkcs simulate`
//! family = "torus"                           # and/or a family with sizes: torus:SxS,
//! sizes = [3, 4, 5]                          #   grid:SxS, complete:S, ring:S, path:S,
//!                                            #   star:S, random:S:P:SEED ("random:P:SEED")
//! bounds = ["1:", "1:3", "n/4:3n/4", "gcs=1:n-1", [2, 4]]
//! seeds = "1..=5"                            # "A..=B", "A..B", a list or one integer
//! delays = ["unit", "uniform:1:12"]
//! workload = "concurrent"                    # or "sequential", or a list
//! pairs = 4                                  # pairs per process, or a list
//! variant = "corrected"                      # or "printed", "trip" (lkcs), or a list
//! printed_rules = ["initial-grants"]         # --printed-rule NAME for every run
//! coterie = ["majority", "grid"]             # algorithms that take --coterie
//! mx = "maekawa"                             # mutin, kmex, gcs
//! think = 4                                  # concurrent think times 0..=THINK
//! maxreq = 4                                 # cdc, ddc, and mutin/kmex/gcs with mx cdc/ddc
//! migrate_after = 10                         # likewise
//! leader = "all"                             # lkcs
//! max_events = 50000000                      # past this many events a run stalls
//! ```
//!
//! Bounds: `L:K` with either side empty for the algorithm's default (`1:` sets l only, `:2`
//! k only, `:` or `default` neither); a side is an integer or a term in the process count n
//! (`n`, `n-1`, `n/4`, `3n/4`, `n/2+1`; integer division); `ALGO=L:K` applies to that
//! algorithm only, and an algorithm that no item applies to runs with its defaults. A TOML
//! pair `[l, k]` is `L:K`. Options an algorithm does not take are left out of its runs; a
//! combination an algorithm refuses (bounds invalid for it, a global algorithm on a torus)
//! is skipped, counted and explained, and is not a failure.

mod csv;
mod grid;
mod runs;

use super::plot;
use clap::Args;
use csv::csv;
use grid::{grid, points};
#[cfg(test)]
use grid::{parse_ints, BoundSpec, Term};
use lkcs::Algorithm;
use runs::{run_all, Outcome};
pub(crate) use runs::{Point, Record};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

/// `lkcs sweep --help`: what the subcommand does.
pub(crate) const LONG_ABOUT: &str = "\
Run a grid of simulations: every combination of algorithms, topologies (or a family and \
sizes), bounds, seeds, delay models, workloads, pairs, variants, coteries and mx objects, given \
as flags or in a TOML file (--file; flags replace its keys). Runs go in parallel (--jobs, \
default: the number of cores) with a progress bar on stderr.

Each run is `lkcs simulate` with the flags of its grid point. --out DIR writes DIR/runs.csv \
(one row per run: its grid coordinates, every field of `lkcs simulate --json`, the paper's best \
and worst case, and the command that reproduces it) and DIR/messages.svg (messages per pair \
against n or |N_i|+1 with the paper's best and worst case as lines), DIR/waiting.svg \
(distributions of the waiting times) and DIR/outcomes.svg (passed / failed / skipped per \
algorithm); the summary goes to stdout. Without --out the CSV goes to stdout and the summary \
to stderr.

Combinations an algorithm refuses (bounds invalid for it, a global algorithm on a torus, ...) \
are skipped and counted with the reason, not failures. Exit 0: every run safe and live; 1: \
some run broke a bound, deadlocked or stalled (each one's reproducing `lkcs simulate` command \
is listed on stderr); 2: bad input (one line per problem).";

/// `lkcs sweep --help`: the grid file's format.
pub(crate) const FILE_HELP: &str = "\
Grid file (TOML; every key optional but `algorithms` and `topologies` or `family` + `sizes`; \
a flag of the same name, `_` written `-`, replaces a key; lists are the grid's axes):

  algorithms = [\"lmutin\", \"gcs\"]             # ALGO names of `lkcs simulate`
  topologies = [\"torus:4x4\", \"complete:16\"]  # TOPO specs of `lkcs simulate`
  family = \"torus\"                           # and/or a family with sizes: torus:SxS, grid:SxS,
  sizes = [3, 4, 5]                          #   complete:S, ring:S, path:S, star:S,
                                             #   random:S:P:SEED (family \"random:P:SEED\")
  bounds = [\"1:\", \"1:3\", \"n/4:3n/4\", \"gcs=1:n-1\", [2, 4]]
  seeds = \"1..=5\"                            # \"A..=B\", \"A..B\", a list or one integer (default 0)
  delays = [\"unit\", \"uniform:1:12\"]          # default unit
  workload = \"concurrent\"                    # or \"sequential\", or a list
  pairs = 4                                  # pairs per process, or a list (default 1)
  variant = \"corrected\"                      # or \"printed\", or a list
  printed_rules = [\"initial-grants\"]         # --printed-rule NAME for every run (not with
                                             #   variant printed; see `lkcs simulate --help`)
  coterie = [\"majority\", \"grid\"]             # algorithms that take --coterie
  mx = \"maekawa\"                             # mutin, kmex, gcs
  think = 4                                  # concurrent think times 0..=THINK
  maxreq = 4                                 # cdc, ddc, and mutin/kmex/gcs with mx cdc/ddc
  migrate_after = 10                         # likewise
  leader = \"all\"                             # lkcs
  max_events = 50000000                      # past this many events a run stalls

Bounds: L:K, either side empty for the algorithm's default (1: sets l only, :2 k only, `:` or \
`default` neither); a side is an integer or a term in the process count n (n, n-1, n/4, 3n/4, \
n/2+1; integer division); ALGO=L:K applies to that algorithm only; an algorithm no item \
applies to runs with its defaults. On the command line list values are comma-separated \
(--algorithms lmutin,gcs --seeds 1..=10 --bounds 1:,gcs=1:3). Options an algorithm does not \
take are left out of its runs.";

/// The options of `lkcs sweep`.
#[derive(Args)]
pub(crate) struct SweepArgs {
    /// A TOML grid file (format below); flags replace its keys.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Write DIR/runs.csv and DIR/messages.svg, DIR/waiting.svg, DIR/outcomes.svg (default:
    /// the CSV on stdout, no plots).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Runs in parallel (default: the number of cores).
    #[arg(long, value_name = "N")]
    jobs: Option<usize>,
    /// ALGO,... (names of `lkcs simulate --algorithm`).
    #[arg(long, value_delimiter = ',', value_name = "ALGO,...")]
    algorithms: Option<Vec<String>>,
    /// TOPO,... (specs of `lkcs simulate --topology`).
    #[arg(long, value_delimiter = ',', value_name = "TOPO,...")]
    topologies: Option<Vec<String>>,
    /// With --sizes: torus, grid, complete, ring, path, star or random:P:SEED.
    #[arg(long)]
    family: Option<String>,
    /// With --family: sizes S (torus:SxS, complete:S, ...): A..=B, A..B or a list.
    #[arg(long, value_delimiter = ',', value_name = "S,...")]
    sizes: Option<Vec<String>>,
    /// L:K,... (terms in n allowed; ALGO=L:K for one algorithm; `default`).
    #[arg(long, value_delimiter = ',', value_name = "L:K,...")]
    bounds: Option<Vec<String>>,
    /// Seeds: A..=B, A..B or a list (default 0).
    #[arg(long, value_delimiter = ',', value_name = "SEEDS")]
    seeds: Option<Vec<String>>,
    /// unit or uniform:A:B, ... (default unit).
    #[arg(long, value_delimiter = ',', value_name = "DELAY,...")]
    delays: Option<Vec<String>>,
    /// concurrent and/or sequential (default concurrent).
    #[arg(long, value_delimiter = ',', value_name = "WORKLOAD,...")]
    workload: Option<Vec<String>>,
    /// Pairs per process: one or a list (default 1).
    #[arg(long, value_delimiter = ',', value_name = "P,...")]
    pairs: Option<Vec<String>>,
    /// corrected and/or printed (default corrected).
    #[arg(long, value_delimiter = ',', value_name = "VARIANT,...")]
    variant: Option<Vec<String>>,
    /// Switch one printed rule on over the corrected variant in every run (repeatable, or
    /// NAME,...; the names of `lkcs simulate --printed-rule`). A run whose algorithm does
    /// not have a rule named is skipped and explained.
    #[arg(
        long = "printed-rule",
        value_delimiter = ',',
        value_name = "NAME",
        action = clap::ArgAction::Append
    )]
    printed_rule: Option<Vec<String>>,
    /// majority and/or grid, for the algorithms that take --coterie.
    #[arg(long, value_delimiter = ',', value_name = "COTERIE,...")]
    coterie: Option<Vec<String>>,
    /// maekawa, lmutex, cdc and/or ddc, for mutin, kmex and gcs.
    #[arg(long, value_delimiter = ',', value_name = "MX,...")]
    mx: Option<Vec<String>>,
    /// Concurrent workload: think times are drawn from 0..=THINK (default 4).
    #[arg(long)]
    think: Option<u64>,
    /// Migrating controller: migrate at every M-th exit (cdc, ddc, mx cdc/ddc).
    #[arg(long, value_name = "M")]
    maxreq: Option<usize>,
    /// Migrating controller: migrate after T time units as controller.
    #[arg(long, value_name = "T")]
    migrate_after: Option<u64>,
    /// lkcs: the leader rules with this leader (an index), `all` or `auto`.
    #[arg(long)]
    leader: Option<String>,
    /// A run stops (stalled, a failure) after this many events (default 50000000).
    #[arg(long)]
    max_events: Option<u64>,
}

/// One line per problem (at most `MAX_ERROR_LINES`, then a count), exit 2.
fn bad(problems: &[String]) -> ExitCode {
    crate::refuse(problems)
}

/// `lkcs sweep`.
pub(crate) fn run(args: &SweepArgs) -> ExitCode {
    let started = Instant::now();
    let grid = match grid(args) {
        Ok(g) => g,
        Err(problems) => return bad(&problems),
    };
    let jobs = match args.jobs {
        Some(0) => return bad(&["--jobs must be at least 1".into()]),
        Some(j) => j,
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    };
    let points = match points(&grid) {
        Ok(p) => p,
        Err(e) => return bad(&[e]),
    };
    if let Some(dir) = &args.out
        && let Err(e) = std::fs::create_dir_all(dir)
    {
        return bad(&[format!("cannot create {}: {e}", dir.display())]);
    }
    let outcomes = run_all(&points, jobs);
    let mut records: Vec<&Record> = Vec::new();
    // skip reasons with their counts, in order of first appearance
    let mut skipped: Vec<(String, usize)> = Vec::new();
    // per algorithm: passed, failed, skipped
    let mut counts: Vec<(Algorithm, [usize; 3])> =
        grid.algorithms.iter().map(|&a| (a, [0; 3])).collect();
    for (point, outcome) in points.iter().zip(&outcomes) {
        let slot = match outcome {
            Outcome::Done(r) => {
                records.push(r);
                usize::from(!r.ok)
            }
            Outcome::Skipped(why) => {
                match skipped.iter_mut().find(|(w, _)| w == why) {
                    Some((_, c)) => *c += 1,
                    None => skipped.push((why.clone(), 1)),
                }
                2
            }
        };
        if let Some((_, c)) = counts.iter_mut().find(|(a, _)| *a == point.algorithm) {
            c[slot] += 1;
        }
    }
    let failed: Vec<&&Record> = records.iter().filter(|r| !r.ok).collect();
    let n_skipped: usize = skipped.iter().map(|(_, c)| c).sum();
    if records.is_empty() {
        let (why, _) = skipped.first().cloned().unwrap_or_default();
        return bad(&[format!(
            "every one of the grid's {} combinations was skipped; the first because: {why}",
            points.len()
        )]);
    }
    for r in &failed {
        warn!("failed ({}): {}", r.failure, r.point.command());
    }

    let table = csv(&records);
    let mut summary = vec![format!(
        "sweep: {} runs, {} passed, {} failed; {n_skipped} combination(s) skipped (refused by \
         the algorithm, not failures); {jobs} job(s), {:.1} s",
        records.len(),
        records.len() - failed.len(),
        failed.len(),
        started.elapsed().as_secs_f64()
    )];
    // bounded waiting: the worst overtaking per algorithm (see `max_overtaken` in docs/cli.md)
    for (alg, _) in &counts {
        let of = records.iter().filter(|r| r.point.algorithm == *alg);
        let worst = of
            .filter_map(|r| {
                r.json
                    .get("max_overtaken")
                    .and_then(serde_json::Value::as_u64)
            })
            .max();
        if let Some(worst) = worst {
            summary.push(format!(
                "  {alg}: a request was overtaken at most {worst} time(s) (max_overtaken)"
            ));
        }
    }
    // the most frequent reasons first, at most ten lines of them
    let mut reasons = skipped.clone();
    reasons.sort_by_key(|r| std::cmp::Reverse(r.1));
    for (why, c) in reasons.iter().take(10) {
        summary.push(format!("  skipped {c}: {why}"));
    }
    if reasons.len() > 10 {
        let rest: usize = reasons[10..].iter().map(|(_, c)| c).sum();
        summary.push(format!(
            "  skipped {rest} more, for {} other reasons",
            reasons.len() - 10
        ));
    }
    match &args.out {
        Some(dir) => {
            let csv_path = dir.join("runs.csv");
            if let Err(e) = std::fs::write(&csv_path, &table) {
                return bad(&[format!("cannot write {}: {e}", csv_path.display())]);
            }
            let mut wrote = vec![format!("{} ({} rows)", csv_path.display(), records.len())];
            let plots: [(&str, plot::Drawer<'_>); 3] = [
                ("messages.svg", &|p| plot::messages(p, &records)),
                ("waiting.svg", &|p| plot::waiting(p, &records)),
                ("outcomes.svg", &|p| plot::outcomes(p, &counts)),
            ];
            for (name, draw) in plots {
                let path = dir.join(name);
                if let Err(e) = draw(&path) {
                    return bad(&[format!("cannot draw {}: {e}", path.display())]);
                }
                wrote.push(path.display().to_string());
            }
            summary.push(format!("  wrote {}", wrote.join(", ")));
            for line in &summary {
                say!("{line}");
            }
        }
        None => {
            use std::io::Write as _;
            let _ = std::io::stdout().lock().write_all(table.as_bytes());
            for line in &summary {
                warn!("{line}");
            }
        }
    }
    if failed.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

#[cfg(test)]
mod tests;
