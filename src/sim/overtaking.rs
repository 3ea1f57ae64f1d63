//! How often each pending request is overtaken ([`SimReport::max_overtaken`]).

use super::*;

/// Counts how often each pending request is overtaken (see [`SimReport::max_overtaken`]).
/// Sequences are numbered in the order they are called. On a stored graph a completion
/// charges the neighbours whose pending request is older: O(|N_i|) per completion. On a
/// complete graph (neighbours are everyone, and n can be 10^4) a request's count is the
/// number of completed sequences numbered after it, read from a Fenwick tree over the
/// numbers when it completes: O(log) per completion.
pub(super) struct Overtaking {
    /// Per process, the number of its pending sequence (`u64::MAX` when none).
    pending: Vec<u64>,
    /// Per process, how often its pending request was overtaken (stored graphs).
    count: Vec<u64>,
    /// Sequences called so far.
    called: u64,
    /// Fenwick tree over sequence numbers: 1 at each completed sequence (complete graphs).
    done: Vec<u64>,
    /// Completed sequences (complete graphs).
    done_total: u64,
    max: u64,
}

impl Overtaking {
    pub(super) fn new(n: usize) -> Overtaking {
        Overtaking {
            pending: vec![u64::MAX; n],
            count: vec![0; n],
            called: 0,
            done: Vec::new(),
            done_total: 0,
            max: 0,
        }
    }

    pub(super) fn begin(&mut self, p: usize) {
        self.pending[p] = self.called;
        self.count[p] = 0;
        self.called += 1;
    }

    /// Completed sequences numbered at most `number` (complete graphs).
    pub(super) fn done_up_to(&self, number: u64) -> u64 {
        let mut i = (number as usize + 1).min(self.done.len());
        let mut sum = 0;
        while i > 0 {
            sum += self.done[i - 1];
            i &= i - 1;
        }
        sum
    }

    /// How often `p`'s pending request was overtaken so far.
    pub(super) fn of(&self, t: &Topology, p: usize) -> u64 {
        let mine = self.pending[p];
        if mine == u64::MAX {
            0
        } else if t.is_complete() {
            self.done_total - self.done_up_to(mine)
        } else {
            self.count[p]
        }
    }

    pub(super) fn complete(&mut self, t: &Topology, p: ProcessId) {
        let i = p.index();
        let mine = self.pending[i];
        if mine == u64::MAX {
            return;
        }
        self.max = self.max.max(self.of(t, i));
        self.pending[i] = u64::MAX;
        if t.is_complete() {
            let at = mine as usize;
            if self.done.len() <= at {
                // grow to a power of two and rebuild (amortised O(1) per sequence)
                let mut flags: Vec<u64> = (0..self.done.len() as u64)
                    .map(|x| self.done_up_to(x) - if x == 0 { 0 } else { self.done_up_to(x - 1) })
                    .collect();
                flags.resize((at + 1).next_power_of_two(), 0);
                self.done = vec![0; flags.len()];
                for (x, &f) in flags.iter().enumerate() {
                    if f > 0 {
                        self.add(x);
                    }
                }
            }
            self.add(at);
            self.done_total += 1;
        } else {
            for &q in t.neighbors(p) {
                let j = q.index();
                if self.pending[j] < mine {
                    self.count[j] += 1;
                    self.max = self.max.max(self.count[j]);
                }
            }
        }
    }

    pub(super) fn add(&mut self, at: usize) {
        let mut i = at + 1;
        while i <= self.done.len() {
            self.done[i - 1] += 1;
            i += i & i.wrapping_neg();
        }
    }

    /// The worst count, requests still pending included.
    pub(super) fn max(&self, t: &Topology) -> u64 {
        (0..self.pending.len()).fold(self.max, |m, p| m.max(self.of(t, p)))
    }
}
