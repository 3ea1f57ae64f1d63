//! Building a system by algorithm name: the layer the CLI (and any driver that picks an
//! algorithm at run time) stands on. Drivers are generic over the CS object type, so a
//! [`SystemVisitor`] receives the built system with its concrete type.

use crate::algo::lmutin::{lmutex_instance, lmutex_system, Lmutin, LmutinRules};
use crate::algo::migrating::{Cdc, Ddc, MigrationCondition};
use crate::config::Instance;
use crate::cs::{CsObject, CsState, Variant};
use crate::error::{ConfigError, Problem};
use crate::topology::Topology;
use std::fmt;
use std::str::FromStr;

/// The algorithms the CLI names (DESIGN §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// l_i-LMUTIN, generalized local l_i-mutual inclusion.
    Lmutin,
    /// k_i-LMUTEX = Complement(LMUTIN), generalized local k_i-mutual exclusion.
    Lmutex,
    /// LKCS, the generalized local (l_i, k_i)-CS.
    Lkcs,
    /// Maekawa's quorum mutual exclusion.
    Maekawa,
    /// MUTIN(l), global l-mutual inclusion.
    Mutin,
    /// kmex = Complement(MUTIN(n−k)), global k-mutual exclusion.
    Kmex,
    /// (l,k)-GCS, the global (l,k)-CS.
    Gcs,
    /// Migrating controller with a centralized queue.
    Cdc,
    /// Migrating controller with a distributed queue.
    Ddc,
}

impl Algorithm {
    /// Every algorithm, in CLI order.
    pub const ALL: [Algorithm; 9] = [
        Algorithm::Lmutin,
        Algorithm::Lmutex,
        Algorithm::Lkcs,
        Algorithm::Maekawa,
        Algorithm::Mutin,
        Algorithm::Kmex,
        Algorithm::Gcs,
        Algorithm::Cdc,
        Algorithm::Ddc,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Lmutin => "lmutin",
            Algorithm::Lmutex => "lmutex",
            Algorithm::Lkcs => "lkcs",
            Algorithm::Maekawa => "maekawa",
            Algorithm::Mutin => "mutin",
            Algorithm::Kmex => "kmex",
            Algorithm::Gcs => "gcs",
            Algorithm::Cdc => "cdc",
            Algorithm::Ddc => "ddc",
        }
    }

    /// The algorithm-specific options (CLI flags) it accepts, beside the bounds, `--initial`
    /// and `--variant` that every algorithm takes.
    pub fn options(self) -> &'static [&'static str] {
        match self {
            Algorithm::Lmutin | Algorithm::Lmutex => &[],
            Algorithm::Lkcs => &["--leader"],
            Algorithm::Maekawa => &["--coterie"],
            Algorithm::Mutin | Algorithm::Kmex | Algorithm::Gcs => {
                &["--coterie", "--mx", "--maxreq", "--migrate-after"]
            }
            Algorithm::Cdc | Algorithm::Ddc => &["--maxreq", "--migrate-after"],
        }
    }

    /// Whether this version of the crate implements it.
    pub fn is_supported(self) -> bool {
        matches!(
            self,
            Algorithm::Lmutin | Algorithm::Lmutex | Algorithm::Cdc | Algorithm::Ddc
        )
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = Problem;
    fn from_str(s: &str) -> Result<Self, Problem> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Algorithm::ALL.iter().map(|a| a.name()).collect();
                Problem::Invalid(format!(
                    "unknown algorithm `{s}` (expected one of: {})",
                    names.join(", ")
                ))
            })
    }
}

/// Per-process bounds as given in a `--bounds` JSON file: `{"l": [...], "k": [...]}`, each
/// list (when present) with one entry per process.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundsFile {
    /// Lower bounds l_i.
    pub l: Option<Vec<usize>>,
    /// Upper bounds k_i.
    pub k: Option<Vec<usize>>,
}

/// What to build: an algorithm on a topology with bounds and an initial configuration.
#[derive(Clone, Debug)]
pub struct SystemSpec {
    /// The algorithm.
    pub algorithm: Algorithm,
    /// The graph.
    pub topology: Topology,
    /// A uniform lower bound.
    pub l: Option<usize>,
    /// A uniform upper bound.
    pub k: Option<usize>,
    /// Per-process bounds (exclusive with `l` and `k`).
    pub bounds: Option<BoundsFile>,
    /// The initial configuration; found automatically when `None`.
    pub initial: Option<Vec<CsState>>,
    /// Corrected or printed rules.
    pub variant: Variant,
    /// LKCS: the leader (chosen automatically when `None`).
    pub leader: Option<usize>,
    /// Global algorithms: the coterie (`majority` or `grid`).
    pub coterie: Option<String>,
    /// MUTIN(l), kmex and GCS: the mutual-exclusion object inside (`maekawa`, `cdc`, `ddc`).
    pub mx: Option<String>,
    /// Migrating controller: migrate after this many requests.
    pub maxreq: Option<usize>,
    /// Migrating controller: migrate after this much time as controller (simulator time units).
    pub migrate_after: Option<u64>,
}

/// Receives a built system with its concrete CS object type.
pub trait SystemVisitor {
    /// What the visit returns.
    type Output;
    /// Called once with the instance (the bounds to observe), the initial configuration and
    /// the processes.
    fn visit<A: CsObject>(
        self,
        instance: &Instance,
        initial: &[CsState],
        procs: Vec<A>,
    ) -> Self::Output;
}

impl SystemSpec {
    /// Validates the spec, builds the system and hands it to `visitor`. Every problem found
    /// is reported, one per line.
    pub fn build<V: SystemVisitor>(&self, visitor: V) -> Result<V::Output, ConfigError> {
        let rules = LmutinRules::from(self.variant);
        match self.algorithm {
            Algorithm::Lmutin => {
                if self.k.is_some() || self.bounds.as_ref().is_some_and(|b| b.k.is_some()) {
                    return Err(ConfigError::one(Problem::Invalid(
                        "lmutin fixes k_i = |N_i|+1; upper bounds apply to lmutex".into(),
                    )));
                }
                let l = self.per_process(self.l, |b| b.l.clone(), "l", 1)?;
                let inst = Lmutin::instance(&self.topology, &l)?;
                let initial = self.initial_for(&inst)?;
                let (inst, procs) = Lmutin::system(&self.topology, &l, &initial, rules)?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            Algorithm::Lmutex => {
                if self.l.is_some() || self.bounds.as_ref().is_some_and(|b| b.l.is_some()) {
                    return Err(ConfigError::one(Problem::Invalid(
                        "lmutex fixes l_i = 0; lower bounds apply to lmutin".into(),
                    )));
                }
                let k = self.per_process(self.k, |b| b.k.clone(), "k", 1)?;
                let inst = lmutex_instance(&self.topology, &k)?;
                let initial = self.initial_for(&inst)?;
                let (inst, procs) = lmutex_system(&self.topology, &k, &initial, rules)?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            Algorithm::Cdc => {
                let (initial, condition) = self.mutex_parts()?;
                let (inst, procs) =
                    Cdc::system(&self.topology, &initial, condition, self.variant.into())?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            Algorithm::Ddc => {
                let (initial, condition) = self.mutex_parts()?;
                let (inst, procs) =
                    Ddc::system(&self.topology, &initial, condition, self.variant.into())?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            other => Err(ConfigError::one(Problem::Invalid(format!(
                "algorithm `{other}` is not yet supported"
            )))),
        }
    }

    /// CDC / DDC: the (0, 1) instance on a complete graph, the initial configuration (default:
    /// every process OutCS) and the migration condition. Every problem is reported.
    fn mutex_parts(&self) -> Result<(Vec<CsState>, MigrationCondition), ConfigError> {
        let mut problems = Vec::new();
        if self.l.is_some() || self.k.is_some() || self.bounds.is_some() {
            problems.push(Problem::Invalid(format!(
                "{} is mutual exclusion (l = 0, k = 1): bounds do not apply",
                self.algorithm
            )));
        }
        let inst = crate::algo::migrating::mutex_instance(&self.topology)
            .map_err(|e| problems.extend(e.problems))
            .ok();
        let condition = MigrationCondition::from_options(self.maxreq, self.migrate_after)
            .map_err(|e| problems.extend(e.problems))
            .ok();
        ConfigError::check(problems)?;
        let (Some(inst), Some(condition)) = (inst, condition) else {
            return Err(ConfigError::one(Problem::Invalid("invalid options".into())));
        };
        let initial = self
            .initial
            .clone()
            .unwrap_or_else(|| vec![CsState::OutCs; inst.len()]);
        Ok((initial, condition))
    }

    fn per_process(
        &self,
        uniform: Option<usize>,
        from_file: impl Fn(&BoundsFile) -> Option<Vec<usize>>,
        name: &str,
        default: usize,
    ) -> Result<Vec<usize>, ConfigError> {
        let n = self.topology.len();
        match (uniform, self.bounds.as_ref().and_then(from_file)) {
            (Some(_), Some(_)) => Err(ConfigError::one(Problem::Invalid(format!(
                "--{name} and a `{name}` list in --bounds are exclusive"
            )))),
            (None, Some(v)) if v.len() != n => Err(ConfigError::one(Problem::Invalid(format!(
                "--bounds lists {} values of {name} for {n} processes",
                v.len()
            )))),
            (None, Some(v)) => Ok(v),
            (u, None) => Ok(vec![u.unwrap_or(default); n]),
        }
    }

    fn initial_for(&self, inst: &Instance) -> Result<Vec<CsState>, ConfigError> {
        // a given configuration is validated (length and bounds) by the system builder
        match &self.initial {
            Some(s) => Ok(s.clone()),
            None => inst.find_safe_initial().map_err(ConfigError::one),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Count;
    impl SystemVisitor for Count {
        type Output = usize;
        fn visit<A: CsObject>(self, _: &Instance, _: &[CsState], procs: Vec<A>) -> usize {
            procs.len()
        }
    }

    fn spec(algorithm: Algorithm) -> SystemSpec {
        SystemSpec {
            algorithm,
            topology: Topology::ring(5).unwrap(),
            l: None,
            k: None,
            bounds: None,
            initial: None,
            variant: Variant::Corrected,
            leader: None,
            coterie: None,
            mx: None,
            maxreq: None,
            migrate_after: None,
        }
    }

    #[test]
    fn names_round_trip() {
        for a in Algorithm::ALL {
            assert_eq!(a.name().parse::<Algorithm>().unwrap(), a);
        }
        assert!("paxos".parse::<Algorithm>().is_err());
    }

    #[test]
    fn builds_supported_algorithms_and_refuses_the_rest() {
        assert_eq!(spec(Algorithm::Lmutin).build(Count).unwrap(), 5);
        assert_eq!(spec(Algorithm::Lmutex).build(Count).unwrap(), 5);
        let err = spec(Algorithm::Gcs).build(Count).unwrap_err();
        assert!(err.to_string().contains("not yet supported"));
    }

    #[test]
    fn bounds_come_from_one_place_only() {
        let mut s = spec(Algorithm::Lmutin);
        s.l = Some(1);
        s.bounds = Some(BoundsFile {
            l: Some(vec![1; 5]),
            k: None,
        });
        assert!(s.build(Count).is_err());
        s.l = None;
        s.bounds = Some(BoundsFile {
            l: Some(vec![1; 4]),
            k: None,
        });
        assert!(s.build(Count).is_err());
        let mut s = spec(Algorithm::Lmutin);
        s.k = Some(2);
        assert!(s.build(Count).is_err());
    }

    #[test]
    fn a_given_unsafe_initial_configuration_is_reported() {
        let mut s = spec(Algorithm::Lmutin);
        s.l = Some(2);
        s.initial = Some(vec![CsState::OutCs; 5]);
        let err = s.build(Count).unwrap_err();
        assert_eq!(err.problems.len(), 5);
    }
}
