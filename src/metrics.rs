//! Measurement records and summaries (DESIGN §4): messages per pair, with and without
//! self-addressed messages, and waiting times.

use crate::id::ProcessId;
use serde::Serialize;

/// Minimum, mean and maximum of a sample (all zero for an empty sample).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Stats {
    /// The smallest value.
    pub min: f64,
    /// The mean.
    pub mean: f64,
    /// The largest value.
    pub max: f64,
}

impl Stats {
    /// Summarises `values`.
    pub fn of(values: impl IntoIterator<Item = f64>) -> Stats {
        let (mut n, mut sum, mut min, mut max) = (0usize, 0.0, f64::INFINITY, f64::NEG_INFINITY);
        for v in values {
            n += 1;
            sum += v;
            min = min.min(v);
            max = max.max(v);
        }
        if n == 0 {
            Stats::default()
        } else {
            Stats {
                min,
                mean: sum / n as f64,
                max,
            }
        }
    }
}

/// Waiting times: from the call of Exit()/Entry() to the state change.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct Waiting {
    /// The longest Exit-Sequence.
    pub exit_max: f64,
    /// The mean Exit-Sequence.
    pub exit_mean: f64,
    /// The longest Entry-Sequence.
    pub entry_max: f64,
    /// The mean Entry-Sequence.
    pub entry_mean: f64,
}

/// One completed pair (one Exit and one Entry of one process) and what it cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct PairRecord {
    /// The process.
    pub process: ProcessId,
    /// The pair's index among the process's pairs, from 0.
    pub index: usize,
    /// Messages attributed to the pair, self-addressed ones included.
    pub messages: u64,
    /// Messages attributed to the pair, self-addressed ones left out.
    pub remote_messages: u64,
    /// The Exit-Sequence's waiting time.
    pub exit_wait: u64,
    /// The Entry-Sequence's waiting time.
    pub entry_wait: u64,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_summarise() {
        let s = Stats::of([3.0, 1.0, 2.0]);
        assert_eq!((s.min, s.mean, s.max), (1.0, 2.0, 3.0));
        assert_eq!(Stats::of([]), Stats::default());
    }
}
