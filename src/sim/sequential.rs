//! The sequential workload's planner: who moves next when one sequence runs at a time, with
//! the helper moves and round trips that get a blocked process moving again.

use super::*;

impl<'a, A: CsObject> Sim<'a, A> {
    /// The sequential workload's next mover: the next process in round-robin order with
    /// required pairs left whose move keeps every bound. When none can move, a helper move:
    /// the next step of a plan found earlier; else the safe move that most reduces the number
    /// of bounds blocking those processes; else the first move of a shortest sequence of safe
    /// moves after which one of them can move (breadth-first, at most
    /// `HELPER_SEARCH_LIMIT` configurations); failing that, with objects that take round
    /// trips (which skip the greedy helper move and make pairs back to back:
    /// [`Sim::back_to_back`]), a whole pair as a round trip of a process that owes one and
    /// whose move keeps the problem's bounds (the move, then at once its return); else a
    /// process finishing an extra pair, then anyone.
    pub(super) fn next_mover(&mut self) -> Option<ProcessId> {
        if let Some(q) = self.returning.take() {
            return Some(ProcessId::from(q));
        }
        if let Some(h) = self.unwind() {
            return Some(ProcessId::from(h));
        }
        let n = self.procs.len();
        let rotation = (0..n).map(|i| (self.rr + i) % n);
        // the common case costs one safety question per process tried, not one per process
        let first = rotation.clone().find(|&p| self.required(p) && self.safe(p));
        let planned = match self.plan.front() {
            Some(&h) if first.is_none() && self.safe(h) => self.plan.pop_front(),
            _ => {
                self.plan.clear();
                None
            }
        };
        let pick = match planned.or(first) {
            Some(p) => p,
            None => self.unblock(rotation.collect())?,
        };
        if self.trips {
            self.back_to_back(pick, first == Some(pick));
        }
        self.rr = (pick + 1) % n;
        if !self.required(pick) {
            self.helper_moves += 1;
        }
        Some(ProcessId::from(pick))
    }

    /// With objects that take round trips the sequential workload makes each pair owed back to
    /// back: `pick`, when it begins a pair it `owes`, makes its return next, which restores a
    /// configuration within the bounds (so no process is left halfway, where a round trip
    /// could not finish its pair). Helper moves are remembered in order and undone last
    /// first once no process owes a pair ([`Sim::unwind`]).
    pub(super) fn back_to_back(&mut self, pick: usize, owes: bool) {
        if self.returning == Some(pick) {
            return;
        }
        if owes && self.track[pick].started.is_multiple_of(2) {
            self.returning = Some(pick);
        } else {
            self.helped.push(pick);
        }
    }

    /// With round trips, once no process owes a pair: the last helper move not yet undone,
    /// made again. Owed pairs come back to back, so this restores the configuration before
    /// that helper move, which met the bounds: undoing every helper move keeps the bounds
    /// and leaves no process halfway.
    pub(super) fn unwind(&mut self) -> Option<usize> {
        if self.helped.is_empty() || (0..self.procs.len()).any(|p| self.required(p)) {
            return None;
        }
        self.helped.pop()
    }

    /// Whether `p` still owes pairs.
    pub(super) fn required(&self, p: usize) -> bool {
        self.pairs_done(p) < self.cfg.pairs
    }

    /// Whether `p` can move now without breaking a (schedule) bound.
    pub(super) fn safe(&self, p: usize) -> bool {
        self.observed
            .bounds_broken_by_move(&self.schedule, ProcessId::from(p))
            == 0
    }

    /// No process that owes pairs can move: a helper move, as [`Sim::next_mover`] describes.
    pub(super) fn unblock(&mut self, rotation: Vec<usize>) -> Option<usize> {
        let n = self.procs.len();
        let mut states = self.observed.states().to_vec();
        let required: Vec<bool> = (0..n).map(|p| self.required(p)).collect();
        let safe: Vec<bool> = (0..n).map(|p| self.safe(p)).collect();
        let blocked: Vec<usize> = (0..n).filter(|&p| required[p] && !safe[p]).collect();
        let before = self.blocking(&mut states, &blocked);
        let mut best: Option<(usize, usize)> = None;
        // with round trips, only a found plan (which ends in a move of a process that owes
        // one) is worth helper moves: greedy ones can cycle where a round trip moves at once
        for &h in rotation.iter().filter(|&&h| safe[h] && !self.trips) {
            states[h] = !states[h];
            let after = self.blocking(&mut states, &blocked);
            states[h] = !states[h];
            if after < before && best.is_none_or(|(_, b)| after < b) {
                best = Some((h, after));
            }
        }
        best.map(|(h, _)| h)
            .or_else(|| {
                // with round trips a pair ends where it began, so the configuration is the
                // start plus the helper moves made: a search that failed from it fails again
                if self.trips && self.searched_at == Some(self.helped.len()) {
                    return None;
                }
                self.plan = self.helper_path(&states, &required);
                if self.plan.is_empty() {
                    self.searched_at = Some(self.helped.len());
                }
                self.plan.pop_front()
            })
            .or_else(|| self.round_trip(&rotation, &mut states))
            .or_else(|| rotation.iter().copied().find(|&p| safe[p] && self.owes(p)))
            .or_else(|| rotation.iter().copied().find(|&p| safe[p]))
    }

    /// With objects that take round trips: the first process in `rotation` that owes a pair,
    /// has not begun it, and whose move keeps the problem's bounds in `states` (the current
    /// configuration); its return is made next, completing the pair.
    pub(super) fn round_trip(
        &mut self,
        rotation: &[usize],
        states: &mut [CsState],
    ) -> Option<usize> {
        if !self.trips {
            return None;
        }
        let q = rotation.iter().copied().find(|&q| {
            self.required(q)
                && self.track[q].started.is_multiple_of(2)
                && self.inst.move_keeps_bounds(states, ProcessId::from(q))
        })?;
        self.returning = Some(q);
        Some(q)
    }

    /// A shortest sequence of moves, each keeping every (schedule) bound, after which some
    /// process in `required` can move; empty when none is found within the search limit.
    pub(super) fn helper_path(&mut self, start: &[CsState], required: &[bool]) -> VecDeque<usize> {
        // the search's work has its own budget, one step per configuration visited, apart
        // from the events (which it used to be charged as)
        let left = HELPER_STEP_LIMIT.saturating_sub(self.helper_steps);
        if left == 0 {
            self.starved = true;
            return VecDeque::new();
        }
        let limit = HELPER_SEARCH_LIMIT.min(usize::try_from(left).unwrap_or(usize::MAX));
        let (path, visited) = self.helper_search(start, required, limit);
        self.helper_steps = self.helper_steps.saturating_add(visited as u64);
        path
    }

    /// [`Sim::helper_path`]'s breadth-first search, visiting at most `limit` configurations;
    /// returns the path and how many configurations it visited.
    pub(super) fn helper_search(
        &self,
        start: &[CsState],
        required: &[bool],
        limit: usize,
    ) -> (VecDeque<usize>, usize) {
        let n = start.len();
        let mut seen: HashMap<Vec<CsState>, usize> = HashMap::new();
        // (configuration, parent index, move that led here)
        let mut nodes: Vec<(Vec<CsState>, usize, usize)> = vec![(start.to_vec(), 0, 0)];
        seen.insert(start.to_vec(), 0);
        let mut head = 0;
        while head < nodes.len() && nodes.len() < limit {
            let mut states = nodes[head].0.clone();
            for p in 0..n {
                if self
                    .schedule
                    .bounds_broken_by_move(&mut states, ProcessId::from(p))
                    > 0
                {
                    continue;
                }
                states[p] = !states[p];
                if !seen.contains_key(&states) {
                    seen.insert(states.clone(), nodes.len());
                    nodes.push((states.clone(), head, p));
                    let goal = (0..n).any(|q| {
                        required[q]
                            && self
                                .schedule
                                .bounds_broken_by_move(&mut states, ProcessId::from(q))
                                == 0
                    });
                    if goal {
                        let mut path = VecDeque::new();
                        let mut at = nodes.len() - 1;
                        while at != 0 {
                            path.push_front(nodes[at].2);
                            at = nodes[at].1;
                        }
                        return (path, nodes.len());
                    }
                }
                states[p] = !states[p];
            }
            head += 1;
        }
        (VecDeque::new(), nodes.len())
    }

    /// How many (process, bound) pairs would break if each of `movers` moved alone.
    pub(super) fn blocking(&self, states: &mut [CsState], movers: &[usize]) -> usize {
        movers
            .iter()
            .map(|&p| {
                self.schedule
                    .bounds_broken_by_move(states, ProcessId::from(p))
            })
            .sum()
    }
}
