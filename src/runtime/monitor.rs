//! The optional global monitor: every state change is applied under one lock, then the bounds
//! of the closed neighbourhoods it affects are checked.
//!
//! A process thread applies its change to the monitor *before* sending the messages of the
//! same handler, so the monitor's order of changes extends the happens-before order: the
//! configurations it sees are those of a real asynchronous execution.

use crate::config::{Bounds, Instance, Observed};
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
    observed: Observed,
    changes: u64,
    violations: u64,
    first: Vec<MonitorViolation>,
}

#[derive(Debug)]
pub(crate) struct Monitor {
    inst: Instance,
    state: Mutex<State>,
}

impl Monitor {
    /// A monitor of `inst` starting from `initial`, whose violations are counted at once.
    pub(crate) fn new(inst: Instance, initial: Vec<CsState>) -> Monitor {
        let mut st = State {
            observed: Observed::new(&inst, initial),
            changes: 0,
            violations: 0,
            first: Vec::new(),
        };
        for (q, in_cs) in st.observed.broken(&inst) {
            st.record(&inst, None, q, in_cs);
        }
        Monitor {
            inst,
            state: Mutex::new(st),
        }
    }

    /// Applies `p`'s new state and checks every bound it affects.
    pub(crate) fn apply(&self, p: ProcessId, now: CsState) {
        let mut st = self.state.lock();
        st.changes += 1;
        for (q, in_cs) in st.observed.apply(&self.inst, p, now) {
            st.record(&self.inst, Some(p), q, in_cs);
        }
    }

    /// (state changes, violations, the first few violations).
    pub(crate) fn summary(&self) -> (u64, u64, Vec<MonitorViolation>) {
        let st = self.state.lock();
        (st.changes, st.violations, st.first.clone())
    }
}

impl State {
    fn record(&mut self, inst: &Instance, changed: Option<ProcessId>, q: ProcessId, in_cs: usize) {
        self.violations += 1;
        if self.first.len() < RECORDED_VIOLATIONS {
            self.first.push(MonitorViolation {
                after_changes: self.changes,
                changed,
                process: q,
                in_cs,
                bounds: inst.bounds(q),
            });
        }
    }
}
