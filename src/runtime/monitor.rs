//! The optional global monitor: every state change is applied under one lock, then the bounds
//! of the closed neighbourhoods it affects are checked.
//!
//! A process thread applies its change to the monitor *before* sending the messages of the
//! same handler, so the monitor's order of changes extends the happens-before order: the
//! configurations it sees are those of a real asynchronous execution.

use crate::config::{Bounds, Instance};
use crate::cs::CsState;
use crate::id::ProcessId;
use crate::sync::Mutex;

/// How many violations a monitor records in detail.
pub(crate) const RECORDED_VIOLATIONS: usize = 8;

/// One bound found broken by the monitor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MonitorViolation {
    /// The number of state changes applied when it was found (0: the initial configuration).
    pub after_changes: u64,
    /// The process whose state change exposed it (`None` for the initial configuration).
    pub changed: Option<ProcessId>,
    /// The process whose bounds fail.
    pub process: ProcessId,
    /// How many processes of its closed neighbourhood were in the CS.
    pub in_cs: usize,
    /// Its bounds.
    pub bounds: Bounds,
}

#[derive(Debug)]
struct State {
    states: Vec<CsState>,
    changes: u64,
    violations: u64,
    first: Vec<MonitorViolation>,
}

#[derive(Debug)]
pub(crate) struct Monitor {
    inst: Instance,
    closed: Vec<Vec<ProcessId>>,
    state: Mutex<State>,
}

impl Monitor {
    /// A monitor of `inst` starting from `initial`, whose violations are counted at once.
    pub(crate) fn new(inst: Instance, initial: Vec<CsState>) -> Monitor {
        let closed = inst
            .topology()
            .processes()
            .map(|p| inst.topology().closed(p))
            .collect();
        let mut st = State {
            states: initial,
            changes: 0,
            violations: 0,
            first: Vec::new(),
        };
        for p in inst.topology().processes() {
            check(&inst, &mut st, None, p);
        }
        Monitor {
            inst,
            closed,
            state: Mutex::new(st),
        }
    }

    /// Applies `p`'s new state and checks every bound it affects.
    pub(crate) fn apply(&self, p: ProcessId, now: CsState) {
        let mut st = self.state.lock();
        st.states[p.index()] = now;
        st.changes += 1;
        for &q in &self.closed[p.index()] {
            check(&self.inst, &mut st, Some(p), q);
        }
    }

    /// (state changes, violations, the first few violations).
    pub(crate) fn summary(&self) -> (u64, u64, Vec<MonitorViolation>) {
        let st = self.state.lock();
        (st.changes, st.violations, st.first.clone())
    }
}

fn check(inst: &Instance, st: &mut State, changed: Option<ProcessId>, q: ProcessId) {
    if inst.holds_at(&st.states, q) {
        return;
    }
    st.violations += 1;
    if st.first.len() < RECORDED_VIOLATIONS {
        let v = MonitorViolation {
            after_changes: st.changes,
            changed,
            process: q,
            in_cs: inst.in_cs_around(&st.states, q),
            bounds: inst.bounds(q),
        };
        st.first.push(v);
    }
}
