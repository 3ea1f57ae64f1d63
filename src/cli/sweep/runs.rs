//! Running the grid: a point's `lkcs simulate` command, one run through `lkcs simulate`'s
//! own parser and code path, and every run on a pool of threads with a progress bar.

use crate::cli::formula::{self, Formula, Metric};
use crate::{simulate_run, SimulateArgs};
use clap::Parser;
use lkcs::Algorithm;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

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
    pub(super) think: u64,
    pub(super) maxreq: Option<usize>,
    pub(super) migrate_after: Option<u64>,
    pub(super) leader: Option<String>,
    pub(super) max_events: Option<u64>,
    /// Set when the point is refused before it runs (a bound term below 0).
    pub(super) refused: Option<String>,
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
pub(super) enum Outcome {
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
            crate::cli::summary::failure_reasons(&run.report)
        },
        formula,
        measured,
        n,
        closed_mean,
        exit_waits: pairs.iter().map(|p| p.exit_wait).collect(),
        entry_waits: pairs.iter().map(|p| p.entry_wait).collect(),
    }))
}

/// Runs every point on `jobs` threads; the outcomes come back in grid order.
pub(super) fn run_all(points: &[Point], jobs: usize) -> Vec<Outcome> {
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
