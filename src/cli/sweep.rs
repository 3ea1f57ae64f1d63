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

use super::formula::{self, Formula, Metric};
use super::plot;
use crate::{simulate_run, SimulateArgs};
use clap::{Args, Parser};
use lkcs::{Algorithm, Delay, Topology, Variant, Workload, MAX_DELAY};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Instant;

/// The most runs one sweep accepts.
const MAX_RUNS: usize = 100_000;

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

/// One integer, a list of integers, or a string of ranges (`1..=5`, `1..5`, `1,3,7`).
#[derive(Deserialize, Clone)]
#[serde(
    untagged,
    expecting = "an integer, a list of integers, or a string like \"1..=5\""
)]
enum Ints {
    One(u64),
    List(Vec<u64>),
    Text(String),
}

impl Ints {
    fn items(&self) -> Vec<String> {
        match self {
            Ints::One(v) => vec![v.to_string()],
            Ints::List(v) => v.iter().map(u64::to_string).collect(),
            Ints::Text(s) => s.split(',').map(str::to_string).collect(),
        }
    }
}

/// One string or a list of strings.
#[derive(Deserialize, Clone)]
#[serde(untagged, expecting = "a string or a list of strings")]
enum Strings {
    One(String),
    List(Vec<String>),
}

impl Strings {
    fn items(&self) -> Vec<String> {
        match self {
            Strings::One(s) => vec![s.clone()],
            Strings::List(v) => v.clone(),
        }
    }
}

/// A bounds item: `"L:K"` (see the module docs) or `[l, k]`.
#[derive(Deserialize, Clone)]
#[serde(untagged, expecting = "a string \"L:K\" or a pair [l, k]")]
enum BoundItem {
    Pair([u64; 2]),
    Text(String),
}

impl BoundItem {
    fn text(&self) -> String {
        match self {
            BoundItem::Pair([l, k]) => format!("{l}:{k}"),
            BoundItem::Text(s) => s.clone(),
        }
    }
}

/// The grid file: the same keys as the flags.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
struct GridFile {
    algorithms: Option<Vec<String>>,
    topologies: Option<Vec<String>>,
    family: Option<String>,
    sizes: Option<Ints>,
    bounds: Option<Vec<BoundItem>>,
    seeds: Option<Ints>,
    delays: Option<Vec<String>>,
    workload: Option<Strings>,
    pairs: Option<Ints>,
    variant: Option<Strings>,
    printed_rules: Option<Strings>,
    coterie: Option<Strings>,
    mx: Option<Strings>,
    think: Option<u64>,
    maxreq: Option<usize>,
    migrate_after: Option<u64>,
    leader: Option<String>,
    max_events: Option<u64>,
}

/// One side of a bound: `c·n/d + a` (an integer when `c` = 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Term {
    coef: u64,
    div: u64,
    add: i64,
}

impl Term {
    fn parse(s: &str) -> Result<Term, String> {
        let bad = || format!("bound `{s}`: expected an integer or a term like n, n-1, n/4, 3n/4");
        let s = s.trim();
        if let Ok(v) = s.parse::<i64>() {
            return (v >= 0)
                .then_some(Term {
                    coef: 0,
                    div: 1,
                    add: v,
                })
                .ok_or_else(bad);
        }
        let (coef, rest) = s.split_once('n').ok_or_else(bad)?;
        let coef = if coef.is_empty() {
            1
        } else {
            coef.parse().map_err(|_| bad())?
        };
        let (div, rest) = match rest.strip_prefix('/') {
            Some(r) => {
                let end = r.find(['+', '-']).unwrap_or(r.len());
                let d: u64 = r[..end].parse().map_err(|_| bad())?;
                if d == 0 {
                    return Err(format!("bound `{s}`: division by zero"));
                }
                (d, &r[end..])
            }
            None => (1, rest),
        };
        let add = match rest.chars().next() {
            None => 0,
            Some('+') => rest[1..].parse::<i64>().map_err(|_| bad())?,
            Some('-') => -rest[1..].parse::<i64>().map_err(|_| bad())?,
            _ => return Err(bad()),
        };
        Ok(Term { coef, div, add })
    }

    fn eval(self, n: usize) -> Option<usize> {
        let v = (self.coef as i128 * n as i128) / self.div as i128 + self.add as i128;
        usize::try_from(v).ok()
    }
}

/// A bounds item, parsed.
#[derive(Clone, Debug)]
struct BoundSpec {
    /// As written (without the `ALGO=` prefix); `default` when neither side is set.
    text: String,
    /// The algorithm it is restricted to.
    only: Option<Algorithm>,
    l: Option<Term>,
    k: Option<Term>,
}

impl BoundSpec {
    fn parse(item: &str) -> Result<BoundSpec, String> {
        let item = item.trim();
        let (only, body) = match item.split_once('=') {
            Some((alg, body)) => (
                Some(
                    alg.trim()
                        .parse::<Algorithm>()
                        .map_err(|p| format!("bounds `{item}`: {p}"))?,
                ),
                body.trim(),
            ),
            None => (None, item),
        };
        if body == "default" || body == ":" {
            return Ok(BoundSpec {
                text: "default".into(),
                only,
                l: None,
                k: None,
            });
        }
        let (l, k) = body.split_once(':').ok_or_else(|| {
            format!("bounds `{item}`: expected L:K (e.g. 1:3, 1: for l only, :2 for k only)")
        })?;
        let side = |s: &str| -> Result<Option<Term>, String> {
            if s.trim().is_empty() {
                Ok(None)
            } else {
                Term::parse(s).map(Some)
            }
        };
        Ok(BoundSpec {
            text: body.to_string(),
            only,
            l: side(l)?,
            k: side(k)?,
        })
    }
}

/// The grid, validated.
struct Grid {
    algorithms: Vec<Algorithm>,
    /// (spec, process count).
    topologies: Vec<(String, usize)>,
    bounds: Vec<BoundSpec>,
    seeds: Vec<u64>,
    delays: Vec<String>,
    workloads: Vec<String>,
    pairs: Vec<usize>,
    variants: Vec<String>,
    /// `--printed-rule` names passed to every run.
    printed_rules: Vec<String>,
    coteries: Vec<String>,
    mxs: Vec<String>,
    think: u64,
    maxreq: Option<usize>,
    migrate_after: Option<u64>,
    leader: Option<String>,
    max_events: Option<u64>,
}

/// One grid point: the coordinates of one run.
#[derive(Clone, Debug)]
pub(crate) struct Point {
    pub(crate) algorithm: Algorithm,
    pub(crate) topology: String,
    pub(crate) bounds: String,
    pub(crate) l: Option<usize>,
    pub(crate) k: Option<usize>,
    pub(crate) coterie: Option<String>,
    pub(crate) mx: Option<String>,
    pub(crate) variant: String,
    /// `--printed-rule` names of this run.
    pub(crate) printed_rules: Vec<String>,
    pub(crate) workload: String,
    pub(crate) delay: String,
    pub(crate) pairs: usize,
    pub(crate) seed: u64,
    think: u64,
    maxreq: Option<usize>,
    migrate_after: Option<u64>,
    leader: Option<String>,
    max_events: Option<u64>,
    /// Set when the point is refused before it runs (a bound term below 0).
    refused: Option<String>,
}

impl Point {
    /// The `lkcs simulate` flags of this run.
    fn argv(&self) -> Vec<String> {
        let mut v: Vec<String> = vec![
            "--algorithm".into(),
            self.algorithm.name().into(),
            "--topology".into(),
            self.topology.clone(),
        ];
        let mut opt = |flag: &str, value: Option<String>| {
            if let Some(value) = value {
                v.push(flag.into());
                v.push(value);
            }
        };
        opt("--l", self.l.map(|x| x.to_string()));
        opt("--k", self.k.map(|x| x.to_string()));
        opt("--coterie", self.coterie.clone());
        opt("--mx", self.mx.clone());
        opt("--maxreq", self.maxreq.map(|x| x.to_string()));
        opt("--migrate-after", self.migrate_after.map(|x| x.to_string()));
        opt("--leader", self.leader.clone());
        opt("--variant", Some(self.variant.clone()));
        for name in &self.printed_rules {
            opt("--printed-rule", Some(name.clone()));
        }
        opt("--workload", Some(self.workload.clone()));
        opt("--delay", Some(self.delay.clone()));
        opt("--pairs", Some(self.pairs.to_string()));
        opt("--think", Some(self.think.to_string()));
        opt("--seed", Some(self.seed.to_string()));
        opt("--max-events", self.max_events.map(|x| x.to_string()));
        v
    }

    /// The command that reproduces this run.
    pub(crate) fn command(&self) -> String {
        let quoted: Vec<String> = self.argv().iter().map(|a| shell_quote(a)).collect();
        format!("lkcs simulate {}", quoted.join(" "))
    }
}

fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-:.,=/+@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// Parses `lkcs simulate` flags with `lkcs simulate`'s own parser.
#[derive(Parser)]
#[command(name = "lkcs simulate")]
struct SimulateOnly {
    #[command(flatten)]
    args: SimulateArgs,
}

/// A finished run: what the CSV and the plots need.
pub(crate) struct Record {
    pub(crate) point: Point,
    /// The `lkcs simulate --json` object.
    pub(crate) json: serde_json::Value,
    pub(crate) ok: bool,
    /// What went wrong, in a few words (empty when ok).
    pub(crate) failure: String,
    pub(crate) formula: Formula,
    /// The measured mean of the formula's metric.
    pub(crate) measured: f64,
    pub(crate) n: usize,
    /// Mean over the processes of |N_i|+1.
    pub(crate) closed_mean: f64,
    pub(crate) exit_waits: Vec<u64>,
    pub(crate) entry_waits: Vec<u64>,
}

/// The outcome of one grid point.
enum Outcome {
    Done(Box<Record>),
    Skipped(String),
}

fn execute(point: &Point) -> Outcome {
    if let Some(why) = &point.refused {
        return Outcome::Skipped(why.clone());
    }
    let argv = std::iter::once("lkcs simulate".to_string()).chain(point.argv());
    let args = match SimulateOnly::try_parse_from(argv) {
        Ok(a) => a.args,
        Err(e) => {
            let text = e.render().to_string();
            return Outcome::Skipped(text.lines().next().unwrap_or("").to_string());
        }
    };
    let run = match simulate_run(&args) {
        Ok(run) => run,
        Err(e) => {
            let lines: Vec<String> = e.problems.iter().map(ToString::to_string).collect();
            return Outcome::Skipped(lines.join("; "));
        }
    };
    let formula = formula::of(&run);
    let measured = match formula.metric {
        Metric::Messages => run.report.messages_per_pair.mean,
        Metric::Remote => run.report.remote_messages_per_pair.mean,
    };
    let t = &run.spec.topology;
    let n = t.len();
    let closed_mean = t.processes().map(|p| t.degree(p) + 1).sum::<usize>() as f64 / n as f64;
    let pairs = &run.report.pairs;
    Outcome::Done(Box::new(Record {
        point: point.clone(),
        json: run.json(),
        ok: run.report.ok(),
        failure: if run.report.ok() {
            String::new()
        } else {
            super::summary::failure_reasons(&run.report)
        },
        formula,
        measured,
        n,
        closed_mean,
        exit_waits: pairs.iter().map(|p| p.exit_wait).collect(),
        entry_waits: pairs.iter().map(|p| p.entry_wait).collect(),
    }))
}

/// One line per problem, exit 2.
fn bad(problems: &[String]) -> ExitCode {
    for p in problems {
        warn!("error: {p}");
    }
    ExitCode::from(2)
}

/// Reads the grid file; one line on failure.
fn read_file(path: &Path) -> Result<GridFile, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    toml::from_str::<GridFile>(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].lines().count().max(1));
        let msg = e.message().lines().next().unwrap_or("").trim().to_string();
        match line {
            Some(line) => format!("{}:{line}: {msg}", path.display()),
            None => format!("{}: {msg}", path.display()),
        }
    })
}

/// Integers from items like `3`, `1..=5`, `1..5`.
fn parse_ints(items: &[String], what: &str, problems: &mut Vec<String>) -> Vec<u64> {
    let mut out = Vec::new();
    for item in items {
        let item = item.trim();
        // each item as an inclusive range `first..=last`, so that u64::MAX needs no bound
        // past it
        let parsed = if let Some((a, b)) = item.split_once("..=") {
            a.trim()
                .parse::<u64>()
                .ok()
                .zip(b.trim().parse::<u64>().ok())
                .filter(|(a, b)| a <= b)
        } else if let Some((a, b)) = item.split_once("..") {
            a.trim()
                .parse::<u64>()
                .ok()
                .zip(b.trim().parse::<u64>().ok())
                .filter(|(a, b)| a < b)
                .map(|(a, b)| (a, b - 1))
        } else {
            item.parse::<u64>().ok().map(|a| (a, a))
        };
        match parsed {
            // last - first + 1 values
            Some((a, b)) if b - a >= MAX_RUNS as u64 => {
                problems.push(format!("{what} `{item}`: more than {MAX_RUNS} values"))
            }
            Some((a, b)) => out.extend(a..=b),
            None => problems.push(format!(
                "{what} `{item}`: expected an integer or a range A..=B / A..B (A <= B)"
            )),
        }
    }
    out
}

/// Keeps the first occurrence of each value.
fn dedup<T: PartialEq + Clone>(v: Vec<T>) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for x in v {
        if !out.contains(&x) {
            out.push(x);
        }
    }
    out
}

/// Merges the flags over the file and validates everything; every problem is reported.
fn grid(args: &SweepArgs) -> Result<Grid, Vec<String>> {
    let file = match &args.file {
        Some(path) => read_file(path).map_err(|e| vec![e])?,
        None => GridFile::default(),
    };
    let mut problems = Vec::new();
    let pick = |flag: &Option<Vec<String>>, key: Option<Vec<String>>| flag.clone().or(key);

    // algorithms
    let algorithms: Vec<Algorithm> = match pick(&args.algorithms, file.algorithms.clone()) {
        None => {
            problems.push("the grid names no algorithm (--algorithms or `algorithms`)".into());
            Vec::new()
        }
        Some(names) => names
            .iter()
            .filter_map(|s| {
                s.trim()
                    .parse::<Algorithm>()
                    .map_err(|p| problems.push(format!("algorithms: {p}")))
                    .ok()
            })
            .collect(),
    };
    let algorithms = dedup(algorithms);

    // topologies: the list, then the family's sizes
    let mut topo_specs: Vec<String> = pick(&args.topologies, file.topologies.clone())
        .unwrap_or_default()
        .into_iter()
        .map(|s| s.trim().to_string())
        .collect();
    let family = args.family.clone().or(file.family.clone());
    let sizes = args
        .sizes
        .clone()
        .or_else(|| file.sizes.as_ref().map(Ints::items));
    match (&family, &sizes) {
        (Some(f), Some(sizes)) => {
            for s in parse_ints(sizes, "sizes", &mut problems) {
                let spec = match f.as_str() {
                    "torus" | "grid" => format!("{f}:{s}x{s}"),
                    "complete" | "ring" | "path" | "star" => format!("{f}:{s}"),
                    other => match other.strip_prefix("random:") {
                        Some(rest) => format!("random:{s}:{rest}"),
                        None => {
                            problems.push(format!(
                                "family `{other}`: expected torus, grid, complete, ring, path, \
                                 star or random:P:SEED"
                            ));
                            break;
                        }
                    },
                };
                topo_specs.push(spec);
            }
        }
        (Some(_), None) => problems.push("--family needs --sizes (or `sizes`)".into()),
        (None, Some(_)) => problems.push("--sizes needs --family (or `family`)".into()),
        (None, None) => {}
    }
    let mut topologies = Vec::new();
    for spec in dedup(topo_specs) {
        match Topology::parse(&spec) {
            Ok(t) => topologies.push((spec, t.len())),
            Err(e) => problems.extend(e.problems.iter().map(ToString::to_string)),
        }
    }
    if family.is_none() && args.topologies.is_none() && file.topologies.is_none() && sizes.is_none()
    {
        problems.push("the grid names no topology (--topologies, or --family and --sizes)".into());
    }

    // bounds
    let bound_items: Vec<String> = match (&args.bounds, &file.bounds) {
        (Some(v), _) => v.clone(),
        (None, Some(v)) => v.iter().map(BoundItem::text).collect(),
        (None, None) => Vec::new(),
    };
    let mut bounds = Vec::new();
    for item in &bound_items {
        match BoundSpec::parse(item) {
            Ok(b) => {
                if let Some(a) = b.only.filter(|a| !algorithms.contains(a)) {
                    problems.push(format!(
                        "bounds `{item}`: {a} is not one of the grid's algorithms"
                    ));
                }
                bounds.push(b);
            }
            Err(e) => problems.push(e),
        }
    }

    let seeds = match args
        .seeds
        .clone()
        .or_else(|| file.seeds.as_ref().map(Ints::items))
    {
        Some(items) => parse_ints(&items, "seeds", &mut problems),
        None => vec![0],
    };
    let delays = dedup(pick(&args.delays, file.delays.clone()).unwrap_or(vec!["unit".into()]));
    for d in &delays {
        if let Err(e) = Delay::parse(d.trim()) {
            problems.extend(e.problems.iter().map(ToString::to_string));
        }
    }
    let workloads = dedup(
        pick(&args.workload, file.workload.as_ref().map(Strings::items))
            .unwrap_or(vec!["concurrent".into()]),
    );
    for w in &workloads {
        if let Err(e) = Workload::parse(w.trim()) {
            problems.extend(e.problems.iter().map(ToString::to_string));
        }
    }
    let pairs: Vec<usize> = match args
        .pairs
        .clone()
        .or_else(|| file.pairs.as_ref().map(Ints::items))
    {
        Some(items) => parse_ints(&items, "pairs", &mut problems)
            .into_iter()
            .map(|p| p as usize)
            .collect(),
        None => vec![1],
    };
    if pairs.contains(&0) {
        problems.push("pairs must be at least 1".into());
    }
    let variants = dedup(
        pick(&args.variant, file.variant.as_ref().map(Strings::items))
            .unwrap_or(vec!["corrected".into()]),
    );
    for v in &variants {
        if Variant::parse(v).is_none() {
            problems.push(format!(
                "variant `{v}`: expected corrected, printed or trip (lkcs only)"
            ));
        }
    }
    let printed_rules: Vec<String> = dedup(
        pick(
            &args.printed_rule,
            file.printed_rules.as_ref().map(Strings::items),
        )
        .unwrap_or_default()
        .into_iter()
        .map(|n| n.trim().to_string())
        .collect(),
    );
    if !printed_rules.is_empty() && variants.iter().any(|v| v == "printed") {
        problems.push(
            "printed rules switch one rule on over the corrected variant: they do not combine \
             with variant printed"
                .into(),
        );
    }
    for name in &printed_rules {
        let known = |a: &Algorithm| a.printed_rules().iter().any(|r| r.name == name.as_str());
        if !algorithms.is_empty() && !algorithms.iter().any(known) {
            let lists: Vec<String> = algorithms
                .iter()
                .map(|a| format!("{a}: {}", a.printed_rule_list()))
                .collect();
            problems.push(format!(
                "printed rule `{name}` is not a rule of any algorithm of the grid ({})",
                lists.join("; ")
            ));
        }
    }
    let coteries =
        dedup(pick(&args.coterie, file.coterie.as_ref().map(Strings::items)).unwrap_or_default());
    let mxs: Vec<String> = dedup(
        pick(&args.mx, file.mx.as_ref().map(Strings::items))
            .unwrap_or_default()
            .into_iter()
            .map(|m| m.trim().to_string())
            .collect(),
    );
    for m in &mxs {
        if let Err(p) = lkcs::check_mx(m) {
            problems.push(format!("mx: {p}"));
        }
    }
    let think = args.think.or(file.think).unwrap_or(4);
    if think > MAX_DELAY {
        problems.push(format!("think must not exceed {MAX_DELAY}"));
    }
    let max_events = args.max_events.or(file.max_events);

    // an axis given but empty leaves nothing to run
    for (name, empty) in [
        ("algorithms", algorithms.is_empty()),
        ("topologies", topologies.is_empty()),
        ("seeds", seeds.is_empty()),
        ("delays", delays.is_empty()),
        ("workload", workloads.is_empty()),
        ("pairs", pairs.is_empty()),
        ("variant", variants.is_empty()),
    ] {
        if empty && problems.is_empty() {
            problems.push(format!("the grid is empty: no {name}"));
        }
    }
    if problems.is_empty() {
        Ok(Grid {
            algorithms,
            topologies,
            bounds,
            seeds: dedup(seeds),
            delays,
            workloads,
            pairs: dedup(pairs),
            variants,
            printed_rules,
            coteries,
            mxs,
            think,
            maxreq: args.maxreq.or(file.maxreq),
            migrate_after: args.migrate_after.or(file.migrate_after),
            leader: args.leader.clone().or(file.leader),
            max_events,
        })
    } else {
        Err(problems)
    }
}

/// Every grid point, in a fixed order (algorithm, topology, bounds, coterie, mx, variant,
/// workload, delay, pairs, seed).
fn points(g: &Grid) -> Result<Vec<Point>, String> {
    let mut out = Vec::new();
    for &alg in &g.algorithms {
        let takes = |flag: &str| alg.options().contains(&flag);
        let mut bounds: Vec<&BoundSpec> = g
            .bounds
            .iter()
            .filter(|b| b.only.is_none_or(|a| a == alg))
            .collect();
        let default = BoundSpec {
            text: "default".into(),
            only: None,
            l: None,
            k: None,
        };
        if bounds.is_empty() {
            bounds.push(&default);
        }
        let or_none = |v: &[String], flag: &str| -> Vec<Option<String>> {
            if takes(flag) && !v.is_empty() {
                v.iter().map(|s| Some(s.clone())).collect()
            } else {
                vec![None]
            }
        };
        let coteries = or_none(&g.coteries, "--coterie");
        let mxs = or_none(&g.mxs, "--mx");
        for (topo, n) in &g.topologies {
            for b in &bounds {
                let l = b.l.map(|t| t.eval(*n));
                let k = b.k.map(|t| t.eval(*n));
                let refused = (l == Some(None) || k == Some(None))
                    .then(|| format!("bounds {} are negative for n = {n}", b.text));
                for coterie in &coteries {
                    for mx in &mxs {
                        let migrating = matches!(alg, Algorithm::Cdc | Algorithm::Ddc)
                            || (takes("--mx")
                                && matches!(mx.as_deref(), Some("cdc") | Some("ddc")));
                        for variant in &g.variants {
                            for workload in &g.workloads {
                                for delay in &g.delays {
                                    for &pairs in &g.pairs {
                                        for &seed in &g.seeds {
                                            if out.len() == MAX_RUNS {
                                                return Err(format!(
                                                    "the grid has more than {MAX_RUNS} runs"
                                                ));
                                            }
                                            out.push(Point {
                                                algorithm: alg,
                                                topology: topo.clone(),
                                                bounds: b.text.clone(),
                                                l: l.flatten(),
                                                k: k.flatten(),
                                                coterie: coterie.clone(),
                                                mx: mx.clone(),
                                                variant: variant.clone(),
                                                printed_rules: g.printed_rules.clone(),
                                                workload: workload.trim().to_string(),
                                                delay: delay.trim().to_string(),
                                                pairs,
                                                seed,
                                                think: g.think,
                                                maxreq: g.maxreq.filter(|_| migrating),
                                                migrate_after: g
                                                    .migrate_after
                                                    .filter(|_| migrating),
                                                leader: g
                                                    .leader
                                                    .clone()
                                                    .filter(|_| takes("--leader")),
                                                max_events: g.max_events,
                                                refused: refused.clone(),
                                            });
                                        }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

/// Runs every point on `jobs` threads; the outcomes come back in grid order.
fn run_all(points: &[Point], jobs: usize) -> Vec<Outcome> {
    let bar = indicatif::ProgressBar::with_draw_target(
        Some(points.len() as u64),
        indicatif::ProgressDrawTarget::stderr(),
    );
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:40}] {pos}/{len} runs, {msg} (eta {eta})",
    ) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message("0 failed");
    let next = AtomicUsize::new(0);
    let failed = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Outcome>>> =
        Mutex::new((0..points.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..jobs.min(points.len()).max(1) {
            s.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(point) = points.get(i) else { break };
                let outcome = std::panic::catch_unwind(|| execute(point)).unwrap_or_else(|p| {
                    let why = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    Outcome::Done(Box::new(panicked(point, &why)))
                });
                if matches!(&outcome, Outcome::Done(r) if !r.ok) {
                    let f = failed.fetch_add(1, Ordering::Relaxed) + 1;
                    bar.set_message(format!("{f} failed"));
                }
                if let Ok(mut r) = results.lock() {
                    r[i] = Some(outcome);
                }
                bar.inc(1);
            });
        }
    });
    bar.finish_and_clear();
    results
        .into_inner()
        .unwrap_or_default()
        .into_iter()
        .map(|o| o.unwrap_or_else(|| Outcome::Skipped("not run".into())))
        .collect()
}

/// A run whose simulation panicked: a failure (a bug), reported with its command.
fn panicked(point: &Point, why: &str) -> Record {
    Record {
        point: point.clone(),
        json: serde_json::Value::Object(Default::default()),
        ok: false,
        failure: format!("panicked: {why}"),
        formula: Formula {
            metric: Metric::Messages,
            best: None,
            worst: None,
            best_text: "",
            worst_text: "",
        },
        measured: 0.0,
        n: 0,
        closed_mean: 0.0,
        exit_waits: Vec::new(),
        entry_waits: Vec::new(),
    }
}

/// The columns of a JSON object flattened one level (`messages_per_pair.mean`); lists and
/// objects with run-dependent keys (`messages_by_kind`, `violations`, `blocked`) stay JSON.
fn flatten(v: &serde_json::Value) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let Some(obj) = v.as_object() else {
        return out;
    };
    for (key, value) in obj {
        match value {
            serde_json::Value::Object(inner)
                if matches!(
                    key.as_str(),
                    "messages_per_pair" | "remote_messages_per_pair" | "waiting_time"
                ) =>
            {
                for (k2, v2) in inner {
                    out.push((format!("{key}.{k2}"), cell(v2)));
                }
            }
            _ => out.push((key.clone(), cell(value))),
        }
    }
    out
}

fn cell(v: &serde_json::Value) -> String {
    match v {
        serde_json::Value::Null => String::new(),
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

fn num(v: Option<f64>) -> String {
    v.map(|x| format!("{x}")).unwrap_or_default()
}

/// runs.csv: the grid coordinates, the outcome, every `--json` field, the paper's formulas.
fn csv(records: &[&Record]) -> String {
    let mut json_cols: Vec<String> = Vec::new();
    let flat: Vec<BTreeMap<String, String>> = records
        .iter()
        .map(|r| {
            let f = flatten(&r.json);
            for (k, _) in &f {
                if !json_cols.contains(k) {
                    json_cols.push(k.clone());
                }
            }
            f.into_iter().collect()
        })
        .collect();
    let coords = [
        "run", "bounds", "l", "k", "coterie", "mx", "pairs", "think", "outcome", "failure",
    ];
    let tail = [
        "closed_neighbourhood_mean",
        "paper_metric",
        "paper_best",
        "paper_worst",
        "paper_best_formula",
        "paper_worst_formula",
        "measured_over_best",
        "command",
    ];
    let mut out = String::new();
    let header: Vec<String> = coords
        .iter()
        .map(|s| s.to_string())
        .chain(json_cols.iter().cloned())
        .chain(tail.iter().map(|s| s.to_string()))
        .collect();
    out += &header.join(",");
    out.push('\n');
    for (i, (r, f)) in records.iter().zip(&flat).enumerate() {
        let p = &r.point;
        let mut row: Vec<String> = vec![
            (i + 1).to_string(),
            p.bounds.clone(),
            p.l.map(|x| x.to_string()).unwrap_or_default(),
            p.k.map(|x| x.to_string()).unwrap_or_default(),
            p.coterie.clone().unwrap_or_default(),
            p.mx.clone().unwrap_or_default(),
            p.pairs.to_string(),
            p.think.to_string(),
            if r.ok { "passed" } else { "failed" }.to_string(),
            r.failure.clone(),
        ];
        row.extend(
            json_cols
                .iter()
                .map(|c| f.get(c).cloned().unwrap_or_default()),
        );
        row.extend([
            format!("{:.4}", r.closed_mean),
            r.formula.metric.field().to_string(),
            num(r.formula.best),
            num(r.formula.worst),
            r.formula.best_text.to_string(),
            r.formula.worst_text.to_string(),
            num(r.formula.best.filter(|b| *b > 0.0).map(|b| r.measured / b)),
            p.command(),
        ]);
        let row: Vec<String> = row.iter().map(|c| csv_field(c)).collect();
        out += &row.join(",");
        out.push('\n');
    }
    out
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
    if let Some(dir) = &args.out {
        if let Err(e) = std::fs::create_dir_all(dir) {
            return bad(&[format!("cannot create {}: {e}", dir.display())]);
        }
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
