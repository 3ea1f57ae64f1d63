//! How a member's object is rebuilt for an installed view: [`Rebuild`], and
//! [`rebuild_from`], the view's system built as at a cluster's first start.

use crate::catalog::{SystemSpec, SystemVisitor};
use crate::config::Instance;
use crate::cs::{CsObject, CsState};
use crate::id::ProcessId;
use crate::net::view::View;
use crate::view_system::ViewSystem;
use std::sync::Arc;

/// A member's object for a view: what [`Rebuild`] gives.
#[derive(Debug)]
pub struct Rebuilt<A> {
    /// The object, numbered in the view's system (`members[i]` is its process `i`).
    pub obj: A,
    /// The view's members in the order of the view's numbering (cluster ids).
    pub members: Vec<ProcessId>,
    /// Whether this member's exits wait in the view: a deficit view lowered a lower bound
    /// of a neighbourhood the member is in ([`ViewSystem::gates_exits`]).
    pub deficit: bool,
    /// Whether a restore view may lift that gate ([`ViewSystem::restorable`]): every bound
    /// lowered around the member waits for entries, none for a member to rejoin. A member
    /// whose exit waits proposes restores only then.
    pub restorable: bool,
    /// Whether this member's entries wait in the view: a surplus view raised an upper bound
    /// of a neighbourhood the member is in ([`ViewSystem::gates_entries`]); a view started
    /// after an exit there lifts the gate.
    pub gates_entries: bool,
    /// Why the cluster's leader rules refused the view, which therefore runs LKCS's round
    /// trip ([`ViewSystem::leader_rules_refused`]); `None` when it runs the cluster's
    /// algorithm.
    pub leader_rules_refused: Option<String>,
}

/// Builds this member's object for an installed view, from the view's start.
pub type Rebuild<A> = Arc<dyn Fn(&View) -> Result<Rebuilt<A>, String> + Send + Sync>;

/// The [`Rebuild`] of member `me` of the cluster `spec` with bounds `instance`: the view's
/// system ([`ViewSystem`]) built as at a cluster's first start. Fails, naming why, when the
/// view's system cannot be built (a bound the algorithm refuses in the view) or builds
/// another type of object than `A`.
pub fn rebuild_from<A: CsObject>(
    spec: SystemSpec,
    instance: Instance,
    me: ProcessId,
) -> Rebuild<A> {
    Arc::new(move |view: &View| {
        let system = ViewSystem::new(&spec, &instance, &view.start)
            .map_err(|e| format!("view {}: {e}", view.number))?;
        let dense = system
            .dense(me)
            .ok_or_else(|| format!("{me} is not a member of view {}", view.number))?;
        let built = system
            .spec()
            .build(Take(dense.index()))
            .map_err(|e| format!("view {}: {e}", view.number))?;
        let obj = built
            .downcast::<Option<A>>()
            .map_err(|_| {
                format!(
                    "view {}: its system builds another object type",
                    view.number
                )
            })?
            .ok_or_else(|| format!("view {}: no object for {me}", view.number))?;
        Ok(Rebuilt {
            obj,
            members: system.members().to_vec(),
            deficit: system.gates_exits(dense),
            restorable: system.restorable(dense),
            gates_entries: system.gates_entries(dense),
            leader_rules_refused: system.leader_rules_refused().map(|e| e.to_string()),
        })
    })
}

/// Takes process `0` of a built system, type-erased.
struct Take(usize);

impl SystemVisitor for Take {
    type Output = Box<dyn std::any::Any + Send>;
    fn visit<B: CsObject>(self, _: &Instance, _: &[CsState], procs: Vec<B>) -> Self::Output {
        Box::new(procs.into_iter().nth(self.0))
    }
}
