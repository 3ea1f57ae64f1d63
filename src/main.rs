//! The `lkcs` command line: `lkcs simulate` runs an algorithm in the deterministic simulator
//! and reports safety, liveness, message counts and waiting times (DESIGN §5); `lkcs check`
//! explores every interleaving of a small instance; `lkcs sweep` runs a grid of simulations
//! in parallel and writes a CSV row per run and SVG plots (`src/cli/sweep.rs`); `lkcs node`
//! runs one member of a cluster over TCP (`src/cli/node.rs`).
//!
//! Exit codes: 0 safe and every pair completed; 1 a safety violation, a deadlock or a stall
//! (the trace goes to stderr); 2 bad input, one line per problem on stderr.

use clap::{Args, Parser, Subcommand};
use lkcs::{
    check::{
        check_with_progress, CheckConfig, CheckReport, Limit, Progress, Search, Verdict,
        MAX_CHECK_PROCESSES,
    },
    cs::{CsObject, CsState, Variant},
    format_initial, parse_initial,
    sim::{simulate, Delay, SimConfig, SimReport, Workload, MAX_DELAY},
    Algorithm, Bounds, BoundsFile, ConfigError, Instance, Problem, ProcessId, SystemSpec,
    SystemVisitor, Topology,
};
use std::process::ExitCode;

/// `println!` that never panics: a closed stdout (e.g. `lkcs simulate ... | head`) drops the
/// rest of the output, and the exit code still tells the verdict.
macro_rules! say {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stdout().lock(), $($arg)*);
    }};
}

/// `eprintln!` that never panics on a closed stderr (see [`say!`]).
macro_rules! warn {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr().lock(), $($arg)*);
    }};
}

// after the macros, so that the modules can use them
mod cli;

#[derive(Parser)]
#[command(
    name = "lkcs",
    version,
    about = "Distributed critical-section algorithms: simulate, check, sweep, and run as a cluster"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run an algorithm in the deterministic simulator.
    Simulate(SimulateArgs),
    /// Exhaustively check an algorithm on a small instance.
    Check(CheckArgs),
    /// Run a grid of simulations in parallel; write a CSV row per run and SVG plots.
    #[command(long_about = cli::sweep::LONG_ABOUT, after_long_help = cli::sweep::FILE_HELP)]
    Sweep(cli::sweep::SweepArgs),
    /// Run one member of a cluster over TCP (a cluster file names the members and the quota).
    #[command(long_about = cli::node::LONG_ABOUT, after_long_help = cli::node::FILE_HELP)]
    Node(cli::node::NodeArgs),
    /// Create a cluster: `lkcs cluster init` writes a cluster file and a key pair per member.
    Cluster(cli::cluster::ClusterArgs),
    /// Ask every member of a cluster its status, as the operator: one line per member (id,
    /// address, reachable, view, state, what it waits on, the peers it cannot reach) and
    /// the active counts against the bounds. Exit 0 when every member answered, 1 otherwise.
    Status(cli::status::StatusArgs),
    /// Draw line plots of a CSV (one panel per --panel) into an SVG file.
    Plot(cli::plot::PlotArgs),
}

/// Options that describe the system (shared by `simulate` and `check`).
#[derive(Args)]
struct SystemArgs {
    /// lmutin, lmutex, lkcs, maekawa, mutin, kmex, gcs, cdc or ddc.
    #[arg(long)]
    algorithm: String,
    /// complete:N, ring:N, path:N, star:N, grid:RxC, torus:RxC or random:N:P:SEED.
    #[arg(long)]
    topology: String,
    /// Uniform lower bound l_i (lmutin: default 1; lkcs: default 0; maekawa fixes 0).
    #[arg(long, allow_negative_numbers = true, value_parser = cli::bound_arg)]
    l: Option<usize>,
    /// Uniform upper bound k_i (lmutex: default 1; lkcs: default |N_i|+1; maekawa fixes 1).
    #[arg(long, allow_negative_numbers = true, value_parser = cli::bound_arg)]
    k: Option<usize>,
    /// Per-process bounds: a JSON file {"l": [...], "k": [...]}, one entry per process.
    #[arg(long, value_name = "FILE")]
    bounds: Option<std::path::PathBuf>,
    /// Initial configuration in:I,J,... (default: a safe one found automatically).
    #[arg(long)]
    initial: Option<String>,
    /// corrected (default) or printed: the pseudo-code as published; lkcs also takes trip
    /// (the round trip of docs/lkcs-liveness.md: no leader). lkcs's corrected variant runs
    /// the round trip, and refuses (exit 2, with its reasons) an instance the round trip
    /// cannot take, unless --leader or --printed-rule names the leader rules (which can
    /// stall); --json's `variant` says which ran.
    #[arg(long, default_value = "corrected")]
    variant: String,
    /// lkcs's leader rules: the leader's index (that leader alone), `all` (every process that
    /// can lead does) or `auto` (one chosen automatically, as in the paper, with watchers
    /// around it). Without it (and with the corrected variant and no --printed-rule), lkcs
    /// runs the round trip (no leader), and refuses what the round trip cannot take.
    #[arg(long)]
    leader: Option<String>,
    /// majority (default) or grid: the coterie of maekawa (and the global algorithms).
    #[arg(long)]
    coterie: Option<String>,
    /// The mutual-exclusion object inside mutin/kmex/gcs: maekawa (default), lmutex, cdc or
    /// ddc (cdc and ddc take --maxreq / --migrate-after).
    #[arg(long)]
    mx: Option<String>,
    /// Migrating controller (cdc, ddc, and the mx of mutin/kmex/gcs): migrate at every M-th
    /// exit (M >= 1; 1 = at every exit). Without --maxreq or --migrate-after the controller
    /// never migrates.
    #[arg(long, value_name = "M")]
    maxreq: Option<usize>,
    /// Migrating controller: migrate at the first exit at least T time units after becoming
    /// controller (0 = at every exit). Exclusive with --maxreq.
    #[arg(long, value_name = "T")]
    migrate_after: Option<u64>,
    /// Pairs every process completes.
    #[arg(long, default_value_t = 1)]
    pairs: usize,
    /// Switch one printed rule on over the corrected variant (repeatable; names per
    /// algorithm in --help, e.g. lmutin: initial-grants, counted-grants, unguarded-preempt,
    /// unmatched-relinquish, uncapped-release).
    #[arg(
        long = "printed-rule",
        value_name = "NAME",
        long_help = Algorithm::printed_rules_help()
    )]
    printed_rule: Vec<String>,
}

#[derive(Args)]
struct CheckArgs {
    #[command(flatten)]
    system: SystemArgs,
    /// Stop after generating this many states, duplicates included (a bounded check).
    #[arg(long)]
    max_states: Option<usize>,
    /// Stop before the checker's memory would grow past this many GiB (a bounded check);
    /// default: three quarters of the memory the process may use when the check starts (the
    /// least of Linux's MemAvailable, the address-space limit RLIMIT_AS and the cgroup's
    /// memory limit), no limit where none can be read. Not enforced with --search
    /// stateright.
    #[arg(long, value_name = "GIB")]
    max_memory: Option<f64>,
    /// Stop after this many seconds (a bounded check). Not enforced with --search
    /// stateright.
    #[arg(long, value_name = "SECONDS")]
    max_time: Option<f64>,
    /// fifo (default), unordered (any message in flight on a link may be delivered next,
    /// each once) or duplicating (unordered, and a delivered message may be delivered
    /// again). The reduced search runs as the full one on the last two.
    #[arg(long, default_value = "fifo", value_parser = ["fifo", "unordered", "duplicating"])]
    network: String,
    /// Report the states explored so far on stderr every 10 seconds.
    #[arg(long)]
    progress: bool,
    /// reduced (default: the partial-order reduction), full (every reachable state) or
    /// stateright (every reachable state, stateright's multi-threaded checker).
    #[arg(long, default_value = "reduced", value_parser = ["reduced", "full", "stateright"])]
    search: String,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct SimulateArgs {
    #[command(flatten)]
    system: SystemArgs,
    /// Seed of every random choice.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// unit or uniform:A:B.
    #[arg(long, default_value = "unit")]
    delay: String,
    /// concurrent or sequential.
    #[arg(long, default_value = "concurrent")]
    workload: String,
    /// Concurrent workload: think times are drawn from 0..=THINK. The sequential workload
    /// has no think time and ignores it (a sweep passes it to every run, whatever the
    /// workload).
    #[arg(long, default_value_t = 4)]
    think: u64,
    /// How many of the last events to print on failure.
    #[arg(long, default_value_t = 200)]
    trace: usize,
    /// Give up (exit 1, "stalled") after this many events.
    #[arg(long, default_value_t = 50_000_000)]
    max_events: u64,
    /// Members (P[,P...], as 3 or P3) that stop for good after their first completed pair;
    /// the run then judges the others: exit 0 when every member that starved is held by a
    /// bound, 1 when one waits with no bound holding it (concurrent workload).
    #[arg(long, value_name = "P[,P...]")]
    stop: Option<String>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

/// `--stop P[,P...]`: member ids, `3` or `P3`, sorted and deduplicated.
fn parse_stop(text: &str) -> Result<Vec<ProcessId>, Problem> {
    let mut ids = Vec::new();
    for part in text.split(',') {
        let digits = part.trim().trim_start_matches(['P', 'p']);
        match digits.parse::<usize>() {
            Ok(id) if id <= u32::MAX as usize => ids.push(ProcessId::from(id)),
            _ => {
                return Err(Problem::Invalid(format!(
                    "--stop `{text}`: `{part}` is not a member id (expected P[,P...], as 3 or P3)"
                )))
            }
        }
    }
    ids.sort();
    ids.dedup();
    Ok(ids)
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) if !e.use_stderr() => {
            // --help, --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) if e.kind() == clap::error::ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            warn!(
                "error: lkcs needs a subcommand: simulate, check, sweep, cluster or node (see lkcs --help)"
            );
            return ExitCode::from(2);
        }
        Err(e) => {
            // one line, as for every other bad input
            let text = e.render().to_string();
            let first: Vec<&str> = text
                .lines()
                .take_while(|l| !l.trim().is_empty())
                .map(str::trim)
                .collect();
            warn!("{}", first.join(" "));
            return ExitCode::from(2);
        }
    };
    match cli.command {
        Command::Simulate(args) => run_simulate(&args),
        Command::Check(args) => run_check(&args),
        Command::Sweep(args) => cli::sweep::run(&args),
        Command::Node(args) => cli::node::run(&args),
        Command::Cluster(args) => cli::cluster::run(&args),
        Command::Status(args) => cli::status::run(&args),
        Command::Plot(args) => cli::plot::run(&args),
    }
}

/// Bytes in a GiB.
const GIB: f64 = (1u64 << 30) as f64;

/// Bytes of memory this process may still use: the least of Linux's MemAvailable, what the
/// address-space limit (RLIMIT_AS) leaves beside the process's current virtual size, and
/// what the cgroup's memory limit leaves beside its current use (`None` when none of them
/// can be read).
fn available_memory() -> Option<usize> {
    lkcs::check::memory_limit()
}

fn bad_input(e: &ConfigError) -> ExitCode {
    refuse(&e.problems)
}

/// The most `error:` lines one refusal prints: one bad value can break a bound at every
/// process of a large system, which printed a line per process (100,000 lines, 10 MB).
const MAX_ERROR_LINES: usize = 10;

/// Prints the problems, one `error:` line each up to [`MAX_ERROR_LINES`] and then one
/// line counting the rest; exit 2.
fn refuse<P: std::fmt::Display>(problems: &[P]) -> ExitCode {
    for p in problems.iter().take(MAX_ERROR_LINES) {
        warn!("error: {p}");
    }
    if problems.len() > MAX_ERROR_LINES {
        warn!(
            "error: ... and {} more problems ({} in all)",
            problems.len() - MAX_ERROR_LINES,
            problems.len()
        );
    }
    ExitCode::from(2)
}

/// The most pairs a process may be asked to run (so n × pairs never wraps).
const MAX_PAIRS: usize = 1_000_000_000;

/// The most events `--trace` keeps (each is held in memory until the run ends).
const MAX_TRACE: usize = 1_000_000;

/// The largest `--bounds` file read (about 16 bytes per process for 10^6 processes).
const MAX_BOUNDS_FILE: u64 = 16 << 20;

/// Reads a text file of at most `limit` bytes: a longer one (or an endless one such as
/// /dev/zero) is refused after reading `limit` + 1 bytes.
fn read_bounded(path: &std::path::Path, limit: u64) -> Result<String, String> {
    use std::io::Read;
    let file =
        std::fs::File::open(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    if bytes.len() as u64 > limit {
        return Err(format!(
            "{} is larger than {} MiB: not a bounds file",
            path.display(),
            limit >> 20
        ));
    }
    String::from_utf8(bytes).map_err(|_| format!("{} is not UTF-8 text", path.display()))
}

/// Collects every problem in the system options, then builds the spec.
fn system_spec(a: &SystemArgs) -> Result<SystemSpec, ConfigError> {
    let mut problems = Vec::new();
    let algorithm = a
        .algorithm
        .parse::<Algorithm>()
        .map_err(|p| problems.push(p))
        .ok();
    let topology = Topology::parse(&a.topology)
        .map_err(|e| problems.extend(e.problems))
        .ok();
    let variant = Variant::parse(&a.variant);
    if variant.is_none() {
        problems.push(Problem::Invalid(format!(
            "variant `{}`: expected corrected, printed or trip (lkcs only)",
            a.variant
        )));
    }
    let bounds = a.bounds.as_ref().and_then(|path| {
        let parsed = read_bounded(path, MAX_BOUNDS_FILE).and_then(|text| {
            serde_json::from_str::<BoundsFile>(&text).map_err(|e| {
                format!(
                    "{} is not a bounds file ({{\"l\": [...], \"k\": [...]}}): {e}",
                    path.display()
                )
            })
        });
        parsed.map_err(|e| problems.push(Problem::Invalid(e))).ok()
    });
    let initial = match (&a.initial, &topology) {
        (Some(s), Some(t)) => parse_initial(s, t.len())
            .map_err(|e| problems.extend(e.problems))
            .ok(),
        _ => None,
    };
    if a.pairs == 0 {
        problems.push(Problem::Invalid("--pairs must be at least 1".into()));
    } else if a.pairs > MAX_PAIRS {
        problems.push(Problem::Invalid(format!(
            "--pairs {}: at most {MAX_PAIRS} pairs per process",
            a.pairs
        )));
    }
    if bounds
        .as_ref()
        .is_some_and(|b: &BoundsFile| b.l.is_none() && b.k.is_none())
    {
        problems.push(Problem::Invalid(
            "the --bounds file lists neither `l` nor `k`".into(),
        ));
    }
    if let Some(alg) = algorithm {
        problems.extend(alg.inapplicable(
            &[
                ("--leader", a.leader.is_some()),
                ("--coterie", a.coterie.is_some()),
                ("--mx", a.mx.is_some()),
                ("--maxreq", a.maxreq.is_some()),
                ("--migrate-after", a.migrate_after.is_some()),
            ],
            "",
        ));
    }
    ConfigError::check(problems)?;
    let spec = match (algorithm, topology, variant) {
        (Some(algorithm), Some(topology), Some(variant)) => SystemSpec {
            algorithm,
            topology,
            l: a.l,
            k: a.k,
            bounds,
            initial,
            variant,
            leader: None,
            coterie: None,
            mx: None,
            maxreq: a.maxreq,
            migrate_after: a.migrate_after,
        },
        _ => return Err(ConfigError::one(Problem::Invalid("invalid options".into()))),
    };
    // the names, parsed here, at the edge: the spec holds them typed
    spec.with_names(a.leader.as_deref(), a.coterie.as_deref(), a.mx.as_deref())
}

/// The `--printed-rule` names, trimmed, each once, in the order first given.
fn dedup_names(names: &[String]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for n in names.iter().map(|n| n.trim()) {
        if !out.iter().any(|o| o == n) {
            out.push(n.to_string());
        }
    }
    out
}

/// One simulation as `lkcs simulate` runs it: what was built and what happened.
struct SimRun {
    spec: SystemSpec,
    /// The printed rules switched on alone (`--printed-rule`), each once.
    printed_rules: Vec<String>,
    cfg: SimConfig,
    report: SimReport,
    /// The initial configuration (given or found).
    initial: Vec<CsState>,
    /// Every process's bounds, as the observer checked them.
    bounds: Vec<Bounds>,
    /// The variant that ran: the spec's, or `Trip` where LKCS's default ran the round trip.
    variant: Variant,
}

impl SimRun {
    /// The `--json` object (DESIGN §5: field names and meanings are the contract).
    fn json(&self) -> serde_json::Value {
        let (spec, cfg) = (&self.spec, &self.cfg);
        let mut v = serde_json::to_value(&self.report).unwrap_or_default();
        if let Some(obj) = v.as_object_mut() {
            obj.insert("algorithm".into(), spec.algorithm.name().into());
            obj.insert("topology".into(), spec.topology.name().into());
            obj.insert("initial".into(), format_initial(&self.initial).into());
            obj.insert("delay".into(), cfg.delay.to_string().into());
            obj.insert("workload".into(), cfg.workload.to_string().into());
            obj.insert("variant".into(), self.variant.name().into());
            obj.insert("printed_rules".into(), self.printed_rules.clone().into());
        }
        v
    }
}

/// The simulate code path shared by `lkcs simulate` and `lkcs sweep`: parsed arguments in,
/// a finished run out, or every problem with the input.
fn simulate_run(args: &SimulateArgs) -> Result<SimRun, ConfigError> {
    let mut problems = Vec::new();
    let spec = system_spec(&args.system)
        .map_err(|e| problems.extend(e.problems))
        .ok();
    let delay = Delay::parse(&args.delay)
        .map_err(|e| problems.extend(e.problems))
        .ok();
    let workload = Workload::parse(&args.workload)
        .map_err(|e| problems.extend(e.problems))
        .ok();
    if args.think > MAX_DELAY {
        problems.push(Problem::Invalid(format!(
            "--think must not exceed {MAX_DELAY}"
        )));
    }
    if args.trace > MAX_TRACE {
        problems.push(Problem::Invalid(format!(
            "--trace {}: at most {MAX_TRACE} events",
            args.trace
        )));
    }
    if args.max_events == 0 {
        problems.push(Problem::Invalid("--max-events must be at least 1".into()));
    }
    let stop = match args.stop.as_deref().map(parse_stop) {
        None => Vec::new(),
        Some(Ok(ids)) => ids,
        Some(Err(p)) => {
            problems.push(p);
            Vec::new()
        }
    };
    if let Some(workload) = workload {
        // without a valid system, no member can be named unknown
        let n = spec.as_ref().map_or(usize::MAX, |s| s.topology.len());
        problems.extend(lkcs::sim::check_stop(n, workload, &stop));
    }
    let (Some(spec), Some(delay), Some(workload)) = (spec, delay, workload) else {
        return Err(ConfigError::new(problems));
    };
    ConfigError::check(problems)?;
    let cfg = SimConfig {
        seed: args.seed,
        max_events: args.max_events,
        pairs: args.system.pairs,
        delay,
        workload,
        think_max: args.think,
        trace_capacity: args.trace,
        stop,
    };
    let visitor = Simulate { cfg: &cfg };
    let printed_rules = dedup_names(&args.system.printed_rule);
    let (report, initial, bounds, trip) =
        spec.build_with_rules(&printed_rules.iter().collect(), visitor)?;
    let variant = if trip { Variant::Trip } else { spec.variant };
    Ok(SimRun {
        spec,
        printed_rules,
        cfg,
        report,
        initial,
        bounds,
        variant,
    })
}

fn run_simulate(args: &SimulateArgs) -> ExitCode {
    let run = match simulate_run(args) {
        Ok(run) => run,
        Err(e) => return bad_input(&e),
    };
    if args.json {
        say!("{}", run.json());
    } else {
        cli::summary::print(&run);
    }
    if run.report.ok() {
        ExitCode::SUCCESS
    } else {
        use std::io::Write as _;
        let _ = write!(std::io::stderr().lock(), "{}", run.report.failure_text());
        ExitCode::from(1)
    }
}

/// The largest `lkcs check --max-time`, in seconds (about 31,700 years).
const MAX_CHECK_SECONDS: f64 = 1e12;

/// The largest `lkcs check --max-memory`, in GiB.
const MAX_CHECK_GIB: f64 = 1e9;

/// Why `value` cannot be the amount `option` takes: not positive (NaN included), or above
/// `max`, which the message shows as `shown` (it names the bound, not the value, which may
/// be hundreds of digits). `lkcs check`'s budgets and `lkcs node`'s timeouts share it.
fn amount_problem(
    option: &str,
    value: f64,
    max: f64,
    shown: impl std::fmt::Display,
    unit: &str,
) -> Option<String> {
    if value.is_nan() || value <= 0.0 {
        Some(format!("{option} must be a positive number of {unit}"))
    } else if value > max {
        Some(format!("{option} is too large: at most {shown} {unit}"))
    } else {
        None
    }
}

fn run_check(args: &CheckArgs) -> ExitCode {
    let spec = match system_spec(&args.system) {
        Ok(s) => s,
        Err(e) => return bad_input(&e),
    };
    if spec.topology.len() > MAX_CHECK_PROCESSES {
        return bad_input(&ConfigError::one(Problem::Invalid(format!(
            "exhaustive checking is limited to {MAX_CHECK_PROCESSES} processes; {} has {}",
            spec.topology.name(),
            spec.topology.len()
        ))));
    }
    let max_time = match args.max_time {
        None => None,
        Some(s) => match amount_problem(
            "--max-time",
            s,
            MAX_CHECK_SECONDS,
            format_args!("{MAX_CHECK_SECONDS:e}"),
            "seconds",
        ) {
            None => Some(std::time::Duration::from_secs_f64(s)),
            Some(p) => return bad_input(&ConfigError::one(Problem::Invalid(p))),
        },
    };
    let network = lkcs::check::Network::parse(&args.network).unwrap_or_default();
    let max_memory = match args.max_memory {
        None => available_memory().map(|b| b / 4 * 3),
        Some(gib) => match amount_problem(
            "--max-memory",
            gib,
            MAX_CHECK_GIB,
            format_args!("{MAX_CHECK_GIB:e}"),
            "GiB",
        ) {
            None => Some((gib * GIB) as usize),
            Some(p) => return bad_input(&ConfigError::one(Problem::Invalid(p))),
        },
    };
    if args.max_states == Some(0) {
        return bad_input(&ConfigError::one(Problem::Invalid(
            "--max-states must be at least 1".into(),
        )));
    }
    let cfg = CheckConfig {
        pairs: args.system.pairs,
        max_states: args.max_states,
        max_memory,
        count_resident: true,
        max_time,
        network,
        search: match args.search.as_str() {
            "full" => Search::Full,
            "stateright" => Search::Stateright,
            _ => Search::Reduced,
        },
        ..CheckConfig::default()
    };
    let started = std::time::Instant::now();
    let mut last = started;
    let mut report_progress = |p: &Progress| {
        if args.progress && last.elapsed().as_secs() >= 10 {
            last = std::time::Instant::now();
            let secs = started.elapsed().as_secs_f64();
            warn!(
                "  ... {} states ({} generated, max depth {}) in {secs:.0}s, {:.0} states/s, \
                 tables {:.2} GiB",
                p.states,
                p.generated,
                p.max_depth,
                p.states as f64 / secs,
                p.memory as f64 / GIB
            );
        }
    };
    let check = Check {
        cfg: &cfg,
        progress: &mut report_progress,
    };
    let printed_rules = dedup_names(&args.system.printed_rule);
    let (report, initial) = match spec.build_with_rules(&printed_rules.iter().collect(), check) {
        Ok(r) => r,
        Err(e) => return bad_input(&e),
    };
    let verdict = match &report.verdict {
        Verdict::Proved => "proved".to_string(),
        Verdict::Bounded => match report.stopped_by {
            Some(Limit::Memory) => format!(
                "no violation in {} states (bounded by the memory budget of {:.2} GiB; \
                 --max-memory raises it)",
                report.states,
                max_memory.unwrap_or_default() as f64 / GIB
            ),
            Some(Limit::Time) => format!(
                "no violation in {} states (bounded by the time budget of {}s; --max-time \
                 raises it)",
                report.states,
                args.max_time.unwrap_or_default()
            ),
            _ => format!(
                "no violation in {} states (bounded by --max-states {})",
                report.states,
                args.max_states.unwrap_or_default()
            ),
        },
        Verdict::Violated { property } => format!("violated: {property}"),
    };
    if args.json {
        let v = serde_json::json!({
            "algorithm": spec.algorithm.name(),
            "topology": spec.topology.name(),
            "initial": format_initial(&initial),
            "pairs": cfg.pairs,
            "search": args.search,
            "network": network.name(),
            "verdict": verdict,
            "states": report.states,
            "max_depth": report.max_depth,
            "seconds": report.elapsed.as_secs_f64(),
            "states_per_second": report.states_per_second(),
            "counterexample": report.counterexample,
            "stopped_by": report.stopped_by.map(|l| match l {
                Limit::States => "max_states",
                Limit::Memory => "max_memory",
                Limit::Time => "max_time",
            }),
            "printed_rules": printed_rules,
        });
        say!("{v}");
    } else {
        let rules = if printed_rules.is_empty() {
            String::new()
        } else {
            format!(" (printed: {})", printed_rules.join(", "))
        };
        let links = match network {
            lkcs::check::Network::Fifo => String::new(),
            other => format!(" over {other} links"),
        };
        say!(
            "{}{rules} on {}{links} from {}, {} pair(s) per process: {verdict}",
            spec.algorithm,
            spec.topology.name(),
            format_initial(&initial),
            cfg.pairs
        );
        say!(
            "  states explored  {} (max depth {}) in {:.2}s, {:.0} states/s",
            report.states,
            report.max_depth,
            report.elapsed.as_secs_f64(),
            report.states_per_second()
        );
    }
    if report.ok() {
        ExitCode::SUCCESS
    } else {
        warn!("counterexample:");
        for line in &report.counterexample {
            warn!("{line}");
        }
        ExitCode::from(1)
    }
}

struct Check<'a> {
    cfg: &'a CheckConfig,
    progress: &'a mut dyn FnMut(&Progress),
}

impl SystemVisitor for Check<'_> {
    type Output = (CheckReport, Vec<CsState>);
    fn visit<A: CsObject>(
        self,
        instance: &Instance,
        initial: &[CsState],
        procs: Vec<A>,
    ) -> Self::Output {
        let report = check_with_progress(instance, procs, self.cfg, self.progress);
        (report, initial.to_vec())
    }
}

struct Simulate<'a> {
    cfg: &'a SimConfig,
}

impl SystemVisitor for Simulate<'_> {
    /// The report, the start, the bounds, and whether the processes take round trips.
    type Output = (SimReport, Vec<CsState>, Vec<Bounds>, bool);
    fn visit<A: CsObject>(
        self,
        instance: &Instance,
        initial: &[CsState],
        procs: Vec<A>,
    ) -> Self::Output {
        let trip = procs.first().is_some_and(CsObject::takes_round_trips);
        (
            simulate(instance, procs, self.cfg),
            initial.to_vec(),
            instance.all_bounds().to_vec(),
            trip,
        )
    }
}
