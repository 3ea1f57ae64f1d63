//! Building a system by algorithm name: the layer the CLI (and any driver that picks an
//! algorithm at run time) stands on. Drivers are generic over the CS object type, so a
//! [`SystemVisitor`] receives the built system with its concrete type.

use crate::algo::lmutin::{lmutex_instance, lmutex_system, Lmutin, LmutinRules};
use crate::algo::maekawa::{Maekawa, MaekawaRules};
use crate::config::Instance;
use crate::cs::{CsObject, CsState, Variant};
use crate::error::{ConfigError, Problem};
use crate::quorum::Coterie;
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
            Algorithm::Lmutin | Algorithm::Lmutex | Algorithm::Maekawa
        )
    }

    /// Whether the algorithm solves a global problem (bounds over all n processes), and so
    /// runs on `complete:N` only.
    pub fn is_global(self) -> bool {
        !matches!(
            self,
            Algorithm::Lmutin | Algorithm::Lmutex | Algorithm::Lkcs
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
            Algorithm::Maekawa => {
                let mut problems: Vec<Problem> =
                    self.require_complete().err().into_iter().collect();
                problems.extend(self.require_fixed_bounds(0, 1));
                ConfigError::check(problems)?;
                let n = self.topology.len();
                let coterie = Coterie::parse(self.coterie.as_deref().unwrap_or("majority"), n)?;
                // mutual exclusion starts with nobody in the CS unless told otherwise
                let initial = self
                    .initial
                    .clone()
                    .unwrap_or_else(|| vec![CsState::OutCs; n]);
                let (inst, procs) =
                    Maekawa::system_with(&coterie, &initial, MaekawaRules::from(self.variant))?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            other => Err(ConfigError::one(Problem::Invalid(format!(
                "algorithm `{other}` is not yet supported"
            )))),
        }
    }

    /// Global algorithms count all n processes and message every member of a quorum, so they
    /// run on the complete graph `complete:N`: a problem naming the topology otherwise. The
    /// check is on the graph, not its name (`ring:3` is the complete graph on three
    /// processes and passes).
    pub fn require_complete(&self) -> Result<(), Problem> {
        if self.topology.is_complete() {
            Ok(())
        } else {
            Err(Problem::Invalid(format!(
                "{} is a global algorithm: it needs the complete graph, not {} (use complete:{})",
                self.algorithm,
                self.topology.name(),
                self.topology.len()
            )))
        }
    }

    /// For an algorithm whose bounds are fixed at (l, k) (e.g. mutual exclusion, (0, 1)): one
    /// problem for `--l`, `--k` or a `--bounds` list that asks for anything else.
    pub fn require_fixed_bounds(&self, l: usize, k: usize) -> Vec<Problem> {
        let alg = self.algorithm;
        let mut problems = Vec::new();
        let mut check =
            |name: &str, fixed: usize, uniform: Option<usize>, list: Option<&Vec<usize>>| {
                if let Some(v) = uniform.filter(|&v| v != fixed) {
                    problems.push(Problem::Invalid(format!(
                        "{alg} fixes {name} = {fixed}; --{name} {v} does not apply"
                    )));
                }
                if let Some(list) = list.filter(|list| list.iter().any(|&v| v != fixed)) {
                    problems.push(Problem::Invalid(format!(
                    "{alg} fixes {name} = {fixed}; the `{name}` list in --bounds asks for {list:?}"
                )));
                }
            };
        let file = self.bounds.as_ref();
        check("l", l, self.l, file.and_then(|b| b.l.as_ref()));
        check("k", k, self.k, file.and_then(|b| b.k.as_ref()));
        problems
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
    fn maekawa_needs_a_complete_topology_and_bounds_0_1() {
        let mut s = spec(Algorithm::Maekawa);
        let err = s.build(Count).unwrap_err();
        assert_eq!(err.problems.len(), 1);
        assert!(err.to_string().contains("ring:5"), "{err}");
        s.topology = Topology::complete(5).unwrap();
        assert_eq!(s.build(Count).unwrap(), 5);
        s.coterie = Some("grid".into());
        assert_eq!(s.build(Count).unwrap(), 5);
        s.l = Some(0);
        s.k = Some(1);
        assert_eq!(s.build(Count).unwrap(), 5);
        s.l = Some(1);
        s.k = Some(2);
        s.topology = Topology::ring(5).unwrap();
        assert_eq!(s.build(Count).unwrap_err().problems.len(), 3);
        s.topology = Topology::complete(5).unwrap();
        s.l = None;
        s.k = None;
        s.bounds = Some(BoundsFile {
            l: Some(vec![0; 5]),
            k: Some(vec![1, 1, 2, 1, 1]),
        });
        assert_eq!(s.build(Count).unwrap_err().problems.len(), 1);
        s.bounds = None;
        s.coterie = Some("tree".into());
        assert!(s.build(Count).unwrap_err().to_string().contains("tree"));
        assert!(Algorithm::Maekawa.is_global() && !Algorithm::Lkcs.is_global());
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
