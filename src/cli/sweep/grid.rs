//! The grid: the TOML grid file and the flags merged over it, its axes parsed and
//! validated (bounds as terms in n, integer ranges), and its expansion into the points to run.

use super::{Point, SweepArgs};
use lkcs::quota::InnerMutex;
use lkcs::{
    cs::Variant,
    sim::{Delay, Workload, MAX_DELAY},
    Algorithm, Topology,
};
use serde::Deserialize;
use std::path::Path;

/// The most runs one sweep accepts.
const MAX_RUNS: usize = 100_000;

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
    #[serde(default, deserialize_with = "lkcs::algo::lkcs::leader_key")]
    leader: Option<String>,
    max_events: Option<u64>,
}

/// One side of a bound: `c·n/d + a` (an integer when `c` = 0).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Term {
    coef: u64,
    div: u64,
    add: i64,
}

impl Term {
    pub(super) fn parse(s: &str) -> Result<Term, String> {
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

    /// The term's value at `n`, or why it is no bound: negative, or beyond `usize`.
    pub(super) fn eval(self, n: usize) -> Result<usize, &'static str> {
        let v = (self.coef as i128 * n as i128) / self.div as i128 + self.add as i128;
        usize::try_from(v).map_err(|_| {
            if v < 0 {
                "negative"
            } else {
                "larger than the largest integer"
            }
        })
    }
}

/// A bounds item, parsed.
#[derive(Clone, Debug)]
pub(super) struct BoundSpec {
    /// As written (without the `ALGO=` prefix); `default` when neither side is set.
    text: String,
    /// The algorithm it is restricted to.
    pub(super) only: Option<Algorithm>,
    pub(super) l: Option<Term>,
    pub(super) k: Option<Term>,
}

impl BoundSpec {
    pub(super) fn parse(item: &str) -> Result<BoundSpec, String> {
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
pub(super) struct Grid {
    pub(super) algorithms: Vec<Algorithm>,
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

/// Reads the grid file; one line on failure.
fn read_file(path: &Path) -> Result<GridFile, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    toml::from_str::<GridFile>(&text).map_err(|e| {
        let line = e
            .span()
            .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
        let msg = e.message().lines().next().unwrap_or("").trim().to_string();
        match line {
            Some(line) => format!("{}:{line}: {msg}", path.display()),
            None => format!("{}: {msg}", path.display()),
        }
    })
}

/// Integers from items like `3`, `1..=5`, `1..5`.
pub(super) fn parse_ints(items: &[String], what: &str, problems: &mut Vec<String>) -> Vec<u64> {
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
            None => {
                let problem = format!(
                    "{what} `{item}`: expected an integer or a range A..=B / A..B (A <= B)"
                );
                // `,` is two empty items: one problem
                if !problems.contains(&problem) {
                    problems.push(problem);
                }
            }
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
pub(super) fn grid(args: &SweepArgs) -> Result<Grid, Vec<String>> {
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
    if let Some(p) = pairs.iter().find(|&&p| p > crate::MAX_PAIRS) {
        problems.push(format!(
            "pairs {p}: at most {} pairs per process",
            crate::MAX_PAIRS
        ));
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
    // the other names are refused here too, before any run, where an algorithm of the grid
    // takes them (every run of it would refuse them; the others leave them out)
    let taken = |flag: &str| algorithms.iter().any(|a| a.options().contains(&flag));
    for c in coteries.iter().filter(|_| taken("--coterie")) {
        if let Err(p) = c.parse::<lkcs::quota::QuorumSystem>() {
            problems.push(p.to_string());
        }
    }
    let leader = args.leader.clone().or(file.leader);
    if let Some(Err(p)) = leader
        .as_deref()
        .filter(|_| taken("--leader"))
        .map(str::parse::<lkcs::algo::lkcs::Leaders>)
    {
        problems.push(p.to_string());
    }
    let think = args.think.or(file.think).unwrap_or(4);
    if think > MAX_DELAY {
        problems.push(format!("think must not exceed {MAX_DELAY}"));
    }
    let max_events = args.max_events.or(file.max_events);
    if max_events == Some(0) {
        problems.push("max_events must be at least 1".into());
    }
    // refused by every run that takes it: refused here, before any run
    if args.maxreq.or(file.maxreq) == Some(0) && taken("--maxreq") {
        problems.push("maxreq must be at least 1 (1 = the controller moves at every exit)".into());
    }

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
            leader,
            max_events,
        })
    } else {
        Err(problems)
    }
}

/// Every grid point, in a fixed order (algorithm, topology, bounds, coterie, mx, variant,
/// workload, delay, pairs, seed).
pub(super) fn points(g: &Grid) -> Result<Vec<Point>, String> {
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
                let refused = [l, k]
                    .into_iter()
                    .find_map(|side| side?.err())
                    .map(|why| format!("bounds {} are {why} for n = {n}", b.text));
                let (l, k) = (l.and_then(Result::ok), k.and_then(Result::ok));
                for coterie in &coteries {
                    for mx in &mxs {
                        let migrating = matches!(alg, Algorithm::Cdc | Algorithm::Ddc)
                            || (takes("--mx")
                                && matches!(
                                    mx.as_deref().map(str::parse::<InnerMutex>),
                                    Some(Ok(InnerMutex::Cdc | InnerMutex::Ddc))
                                ));
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
                                                l,
                                                k,
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
