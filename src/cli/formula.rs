//! The papers' message complexities per exit/entry pair, as stated in the module docs of
//! `src/algo/*.rs` (and `src/cs/gcs.rs` for the composition), evaluated for one run: the
//! formula of each completed pair's process, averaged over the completed pairs, so that it
//! compares with the run's measured mean.
//!
//! | algorithm | measure | best | worst |
//! |---|---|---|---|
//! | lmutin, lmutex | messages (self-addressed included) | 3(\|N_i\|+1) | 6(\|N_i\|+1) (Lemma 3) |
//! | lkcs | messages | 6(\|N_i\|+1) | 12(\|N_i\|+1), triggers add more (Lemma 6) |
//! | maekawa | messages | 3\|Q_i\| | 5\|Q_i\| (Maekawa's analysis) |
//! | mutin, kmex, `--mx maekawa` | messages | 8\|Q_i\| | none stated (O(\|Q\|), Lemma 3) |
//! | gcs, `--mx maekawa` | messages | 16\|Q_i\| | none stated |
//! | cdc | remote messages | 3 + (n−1)/maxreq | none stated (forwarding adds) |
//! | ddc | remote messages | 3 + (n−1)/maxreq | 5 + (n−1)/maxreq |
//!
//! mutin, kmex and gcs over another `--mx`, and cdc / ddc with `--migrate-after T` (T > 0:
//! the migrations depend on time), have no formula: their runs are plotted as measured
//! points only.

use crate::SimRun;
use lkcs::quota::InnerMutex;
use lkcs::{Algorithm, ProcessId, DEFAULT_COTERIE, DEFAULT_MX};

/// What a formula counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Metric {
    /// `messages_per_pair`: every message, self-addressed ones included.
    Messages,
    /// `remote_messages_per_pair`: self-addressed messages left out.
    Remote,
}

impl Metric {
    /// The JSON field of the measured value.
    pub(crate) fn field(self) -> &'static str {
        match self {
            Metric::Messages => "messages_per_pair",
            Metric::Remote => "remote_messages_per_pair",
        }
    }

    /// An axis label.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Metric::Messages => "messages per pair, self-addressed included (run mean)",
            Metric::Remote => "remote messages per pair (run mean)",
        }
    }
}

/// The papers' best and worst case for one run.
#[derive(Clone, Debug)]
pub(crate) struct Formula {
    /// What is counted.
    pub(crate) metric: Metric,
    /// The best case, averaged over the completed pairs (`None`: no formula).
    pub(crate) best: Option<f64>,
    /// The worst case, averaged likewise (`None`: no formula).
    pub(crate) worst: Option<f64>,
    /// The best case as the paper writes it.
    pub(crate) best_text: &'static str,
    /// The worst case as the paper writes it.
    pub(crate) worst_text: &'static str,
}

/// Per-process best and worst of one algorithm: closed neighbourhood size `c` = |N_i|+1,
/// quorum size `q` = |Q_i|, `n` processes and the migration term `m` = (n−1)/maxreq.
type PerProcess = fn(c: f64, q: f64, n: f64, m: f64) -> (Option<f64>, Option<f64>);

/// Picks the best or the worst of a per-process pair.
type Pick = fn((Option<f64>, Option<f64>)) -> Option<f64>;

/// The formula of one run.
pub(crate) fn of(run: &SimRun) -> Formula {
    let spec = &run.spec;
    let t = &spec.topology;
    let n = t.len();
    let mx = spec.mx.unwrap_or(DEFAULT_MX);
    // the migration term (n-1)/maxreq, when the migrations do not depend on time
    let migration = match (spec.maxreq, spec.migrate_after) {
        (Some(m), _) if m > 0 => Some((n as f64 - 1.0) / m as f64),
        (_, Some(0)) => Some(n as f64 - 1.0),
        (_, Some(_)) => None,
        _ => Some(0.0),
    };
    let (metric, best_text, worst_text, f): (Metric, &'static str, &'static str, PerProcess) =
        match spec.algorithm {
            Algorithm::Lmutin | Algorithm::Lmutex => (
                Metric::Messages,
                "3(|N_i|+1)",
                "6(|N_i|+1)",
                |c, _, _, _| (Some(3.0 * c), Some(6.0 * c)),
            ),
            Algorithm::Lkcs => (
                Metric::Messages,
                "6(|N_i|+1)",
                "12(|N_i|+1), triggers add more",
                |c, _, _, _| (Some(6.0 * c), Some(12.0 * c)),
            ),
            Algorithm::Maekawa => (Metric::Messages, "3|Q_i|", "5|Q_i|", |_, q, _, _| {
                (Some(3.0 * q), Some(5.0 * q))
            }),
            Algorithm::Mutin | Algorithm::Kmex if mx == InnerMutex::Maekawa => {
                (Metric::Messages, "8|Q_i|", "", |_, q, _, _| {
                    (Some(8.0 * q), None)
                })
            }
            Algorithm::Gcs if mx == InnerMutex::Maekawa => {
                (Metric::Messages, "16|Q_i|", "", |_, q, _, _| {
                    (Some(16.0 * q), None)
                })
            }
            Algorithm::Mutin | Algorithm::Kmex | Algorithm::Gcs => {
                (Metric::Messages, "", "", |_, _, _, _| (None, None))
            }
            Algorithm::Cdc if migration.is_some() => {
                (Metric::Remote, "3 + (n-1)/maxreq", "", |_, _, _, m| {
                    (Some(3.0 + m), None)
                })
            }
            Algorithm::Ddc if migration.is_some() => (
                Metric::Remote,
                "3 + (n-1)/maxreq",
                "5 + (n-1)/maxreq",
                |_, _, _, m| (Some(3.0 + m), Some(5.0 + m)),
            ),
            Algorithm::Cdc | Algorithm::Ddc => (Metric::Remote, "", "", |_, _, _, _| (None, None)),
        };
    let coterie = spec
        .algorithm
        .options()
        .contains(&"--coterie")
        .then(|| spec.coterie.unwrap_or(DEFAULT_COTERIE).coterie(n).ok())
        .flatten();
    let per = |p: ProcessId| {
        let c = (t.degree(p) + 1) as f64;
        let q = coterie.as_ref().map_or(0.0, |co| co.quorum(p).len() as f64);
        f(c, q, n as f64, migration.unwrap_or(0.0))
    };
    // average over the completed pairs (over the processes when none completed)
    let processes: Vec<ProcessId> = if run.report.pairs.is_empty() {
        t.processes().collect()
    } else {
        run.report.pairs.iter().map(|r| r.process).collect()
    };
    let mean = |pick: Pick| -> Option<f64> {
        let values: Option<Vec<f64>> = processes.iter().map(|&p| pick(per(p))).collect();
        values
            .filter(|v| !v.is_empty())
            .map(|v| v.iter().sum::<f64>() / v.len() as f64)
    };
    Formula {
        metric,
        best: mean(|b| b.0),
        worst: mean(|b| b.1),
        best_text,
        worst_text,
    }
}
