//! The safety observer's configuration: every closed neighbourhood's in-CS count, kept up
//! to date as processes change state.

use super::Instance;
use crate::id::{CsState, ProcessId};

/// A configuration observed as processes change state: the in-CS count of every closed
/// neighbourhood is kept up to date, so each change costs O(|N_p|). The safety observer of the
/// simulator and the runtime's monitor both stand on it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Observed {
    states: Vec<CsState>,
    /// The in-CS count of every closed neighbourhood; on a complete graph, one count (the
    /// whole system's), so each change costs O(1).
    in_cs: Vec<usize>,
}

impl Observed {
    /// Starts observing `states` (one per process of `inst`).
    pub fn new(inst: &Instance, states: Vec<CsState>) -> Observed {
        if inst.global.is_some() {
            let in_cs = vec![Instance::count_in_cs(&states)];
            return Observed { states, in_cs };
        }
        let in_cs = inst
            .topology()
            .processes()
            .map(|p| inst.in_cs_around(&states, p))
            .collect();
        Observed { states, in_cs }
    }

    /// The current configuration.
    pub fn states(&self) -> &[CsState] {
        &self.states
    }

    /// Every process whose bounds fail now, with its in-CS count.
    pub fn broken(&self, inst: &Instance) -> Vec<(ProcessId, usize)> {
        inst.topology()
            .processes()
            .filter(|&q| !self.holds(inst, q))
            .map(|q| (q, self.count(q)))
            .collect()
    }

    /// The in-CS count of `q`'s closed neighbourhood.
    fn count(&self, q: ProcessId) -> usize {
        // one count on a complete graph (with one process, both layouts agree)
        if self.in_cs.len() == 1 {
            self.in_cs[0]
        } else {
            self.in_cs[q.index()]
        }
    }

    /// Sets `p`'s state to `now` and returns the processes of its closed neighbourhood whose
    /// bounds fail afterwards, with their in-CS counts (nothing changes if `now` is `p`'s
    /// state already).
    pub fn apply(
        &mut self,
        inst: &Instance,
        p: ProcessId,
        now: CsState,
    ) -> Vec<(ProcessId, usize)> {
        if self.states[p.index()] == now {
            return Vec::new();
        }
        self.states[p.index()] = now;
        if let Some(global) = &inst.global {
            let c = &mut self.in_cs[0];
            match now {
                CsState::InCs => *c += 1,
                CsState::OutCs => *c -= 1,
            }
            return if global.broken_at(*c) == 0 {
                Vec::new()
            } else {
                self.broken(inst)
            };
        }
        let closed = inst.topology().closed(p);
        for q in &closed {
            let c = &mut self.in_cs[q.index()];
            match now {
                CsState::InCs => *c += 1,
                CsState::OutCs => *c -= 1,
            }
        }
        closed
            .into_iter()
            .filter(|&q| !self.holds(inst, q))
            .map(|q| (q, self.in_cs[q.index()]))
            .collect()
    }

    /// How many bounds of `p`'s closed neighbourhood would fail if `p` flipped its state now
    /// (the same count as [`Instance::bounds_broken_by_move`], in O(|N_p|) from the kept
    /// counts).
    pub fn bounds_broken_by_move(&self, inst: &Instance, p: ProcessId) -> usize {
        let entering = self.states[p.index()] == CsState::OutCs;
        if let Some(global) = &inst.global {
            let c = self.in_cs[0];
            return global.broken_at(if entering { c + 1 } else { c.saturating_sub(1) });
        }
        inst.topology()
            .closed(p)
            .into_iter()
            .filter(|&q| {
                let c = self.in_cs[q.index()];
                let c = if entering { c + 1 } else { c.saturating_sub(1) };
                let b = inst.bounds(q);
                c < b.l || c > b.k
            })
            .count()
    }

    fn holds(&self, inst: &Instance, q: ProcessId) -> bool {
        let (c, b) = (self.count(q), inst.bounds(q));
        b.l <= c && c <= b.k
    }
}
