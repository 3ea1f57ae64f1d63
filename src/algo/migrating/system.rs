//! Building a system: the (0, 1) instance on a complete graph ([`mutex_instance`]) and the
//! servers of a whole system or of the `mx` object inside a composite.

use super::{Migrating, MigratingRules, Migration, MigrationCondition, RequestsInfo};
use crate::config::{Bounds, Instance};
use crate::cs::CsState;
use crate::error::{ConfigError, Problem};
use crate::id::ProcessId;
use crate::topology::Topology;

/// The (0, 1) instance on `topology` (global mutual exclusion), which must be complete.
pub fn mutex_instance(topology: &Topology) -> Result<Instance, ConfigError> {
    if !topology.is_complete() {
        return Err(ConfigError::one(Problem::NeedsCompleteGraph {
            algorithm: "the migrating controller (cdc, ddc)".into(),
            topology: topology.name().to_string(),
            n: topology.len(),
        }));
    }
    Instance::new(
        topology.clone(),
        vec![Bounds { l: 0, k: 1 }; topology.len()],
    )
}

impl<R: RequestsInfo> Migrating<R, Migration> {
    /// The whole system on `topology` (complete) from `initial` (at most one process InCS),
    /// P0 the initial controller, every server a candidate controller.
    pub fn system(
        topology: &Topology,
        initial: &[CsState],
        condition: MigrationCondition,
        rules: MigratingRules,
    ) -> Result<(Instance, Vec<Self>), ConfigError> {
        let inst = mutex_instance(topology)?;
        if initial.len() != inst.len() {
            return Err(ConfigError::one(Problem::InitialLength {
                given: initial.len(),
                n: inst.len(),
            }));
        }
        ConfigError::check(inst.violations(initial))?;
        if let MigrationCondition::Counter { maxreq: 0 } = condition {
            return Err(ConfigError::one(Problem::Invalid(
                "maxreq must be at least 1".into(),
            )));
        }
        let migration = Migration::new(condition, inst.len());
        let procs = topology
            .processes()
            .map(|p| Migrating::new(p, initial, migration.clone(), rules))
            .collect();
        Ok((inst, procs))
    }

    /// `n` processes, all OutCS, P0 the controller: the `mx` object of a composite.
    pub fn processes(n: usize, condition: MigrationCondition, rules: MigratingRules) -> Vec<Self> {
        let initial = vec![CsState::OutCs; n];
        let migration = Migration::new(condition, n);
        (0..n)
            .map(|i| Migrating::new(ProcessId::from(i), &initial, migration.clone(), rules))
            .collect()
    }
}
