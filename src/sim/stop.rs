//! Stopped members and failure locality (`lkcs simulate --stop`).
//!
//! Members named in [`SimConfig::stop`] stop for good after their first completed pair. When
//! the run ends, every member that did not complete its pairs is **starved**; the run judges
//! each one: it is **held by a bound** when its next move would break a bound of some
//! closed neighbourhood in the configuration the run ended in (no algorithm could move it),
//! and held only by the algorithm otherwise (it waits on permissions, typically ones that
//! blocked members hold). The **failure locality** is the largest hop distance from the
//! nearest stopped member to a starved member (Choy and Singh's measure).

use super::{SimConfig, Workload};
use crate::config::Instance;
use crate::cs::{CsObject, CsState};
use crate::error::Problem;
use crate::id::ProcessId;
use serde::Serialize;
use std::fmt;

/// A member that did not complete its pairs in a run with stopped members.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Starved {
    /// The member.
    pub process: ProcessId,
    /// Hops from the nearest stopped member (0 for a stopped member that never completed its
    /// first pair).
    pub distance: usize,
    /// The members whose closed neighbourhood's bound its next move would break in the final
    /// configuration: not empty exactly when a bound holds it.
    pub limits: Vec<ProcessId>,
    /// The members whose permission its pending sequence waits for
    /// ([`CsObject::awaiting`]; empty when nothing is pending or the algorithm does not say).
    pub waits_on: Vec<ProcessId>,
}

impl Starved {
    /// Whether a bound holds it: its move would break a bound ([`Starved::limits`]).
    pub fn held(&self) -> bool {
        !self.limits.is_empty()
    }
}

impl fmt::Display for Starved {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |v: &[ProcessId]| {
            v.iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        };
        write!(
            f,
            "{} starved, {} hop(s) from a stopped member: ",
            self.process, self.distance
        )?;
        if self.held() {
            write!(f, "held by the bounds of {}", list(&self.limits))
        } else if self.waits_on.is_empty() {
            write!(f, "no bound holds it (the algorithm's own wait)")
        } else {
            write!(
                f,
                "no bound holds it; it waits on {} (the algorithm's own wait)",
                list(&self.waits_on)
            )
        }
    }
}

/// The problems with stopping `stop` in a run of `n` processes under `workload`: a member
/// outside the system ([`Problem::UnknownMember`]), and the sequential workload, whose helper
/// moves would move a stopped member. Empty when the stop can be made (or nobody stops).
/// `lkcs simulate` refuses them with exit 2; [`simulate`](super::simulate) does not run them.
pub fn check_stop(n: usize, workload: Workload, stop: &[ProcessId]) -> Vec<Problem> {
    let mut problems = Vec::new();
    if let Some(&member) = stop.iter().find(|p| p.index() >= n) {
        problems.push(Problem::UnknownMember { member, n });
    }
    if !stop.is_empty() && workload != Workload::Concurrent {
        problems.push(Problem::Invalid(
            "--stop needs the concurrent workload: the sequential workload's helper moves \
             would move a stopped member"
                .into(),
        ));
    }
    problems
}

/// [`check_stop`] for a run of `cfg` on `instance`, as [`simulate`](super::simulate)'s
/// reason not to run it.
pub(super) fn check(instance: &Instance, cfg: &SimConfig) -> Result<(), String> {
    match check_stop(instance.len(), cfg.workload, &cfg.stop).first() {
        Some(problem) => Err(problem.to_string()),
        None => Ok(()),
    }
}

/// The starved members of a run that ended in `states`: those not `done`, each with its
/// distance from the nearest member of `stop`, the bounds that hold it and what it waits on.
pub(super) fn judge<A: CsObject>(
    instance: &Instance,
    procs: &[A],
    states: &[CsState],
    done: &[bool],
    stop: &[ProcessId],
) -> Vec<Starved> {
    let topology = instance.topology();
    let from_stop: Vec<Vec<Option<usize>>> = stop.iter().map(|&s| topology.distances(s)).collect();
    let mut moved = states.to_vec();
    (0..procs.len())
        .filter(|&p| !done[p])
        .map(|p| {
            let id = ProcessId::from(p);
            let distance = from_stop
                .iter()
                .filter_map(|d| d[p])
                .min()
                .unwrap_or(usize::MAX);
            let limits = if instance.bounds_broken_by_move(&mut moved, id) == 0 {
                Vec::new()
            } else if topology.is_complete() {
                // one count decides every bound: O(n), not a closed neighbourhood each
                let count = moved.iter().filter(|&&s| s == CsState::InCs).count();
                let after = match moved[p] {
                    CsState::InCs => count - 1,
                    CsState::OutCs => count + 1,
                };
                topology
                    .processes()
                    .filter(|&q| {
                        let b = instance.bounds(q);
                        after < b.l || after > b.k
                    })
                    .collect()
            } else {
                moved[p] = !moved[p];
                let limits = topology
                    .closed(id)
                    .into_iter()
                    .filter(|&q| !instance.holds_at(&moved, q))
                    .collect();
                moved[p] = !moved[p];
                limits
            };
            Starved {
                process: id,
                distance,
                limits,
                waits_on: procs[p].awaiting(),
            }
        })
        .collect()
}
