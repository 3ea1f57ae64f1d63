//! Building a system by algorithm name: the layer the CLI (and any driver that picks an
//! algorithm at run time) stands on. Drivers are generic over the CS object type, so a
//! [`SystemVisitor`] receives the built system with its concrete type.

use crate::algo::lkcs::{Leaders, Lkcs};
use crate::algo::lmutin::{lmutex_instance, lmutex_system, Lmutin, LmutinRules};
use crate::algo::maekawa::Maekawa;
use crate::algo::migrating::{Cdc, Ddc, MigratingRules, MigrationCondition};
use crate::algo::mutin::{gcs_system, global_instance, kmex_system, quorums_of, Mutin};
use crate::config::Instance;
use crate::cs::{CsObject, CsState, Variant};
use crate::error::{ConfigError, Problem};
use crate::id::ProcessId;
use crate::quorum::Coterie;
use crate::topology::Topology;

mod algorithm;
mod mx;
mod printed;
mod quorums;

pub use algorithm::{Algorithm, PrintedRule};
pub use mx::{check_mx, InnerMutex, DEFAULT_MX};
pub use printed::PrintedRules;
pub use quorums::{QuorumSystem, DEFAULT_COTERIE};

/// Per-process bounds as given in a `--bounds` JSON file: `{"l": [...], "k": [...]}`, each
/// list (when present) with one entry per process.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BoundsFile {
    /// Lower bounds l_i (absent: not given; `null` is refused rather than read as absent).
    #[serde(default, deserialize_with = "present_list")]
    pub l: Option<Vec<usize>>,
    /// Upper bounds k_i (absent: not given; `null` is refused rather than read as absent).
    #[serde(default, deserialize_with = "present_list")]
    pub k: Option<Vec<usize>>,
}

/// A bounds list that is present must be a list: `"l": null` is an error, not "no bounds".
fn present_list<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Vec<usize>>, D::Error> {
    <Vec<usize> as serde::Deserialize>::deserialize(d).map(Some)
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
    /// LKCS: the leader rules with these leaders. `None` runs the round trip (no leader)
    /// with the corrected variant and no printed rule, and the leader rules with the
    /// automatic leader otherwise (the printed variant, or printed rules named).
    pub leader: Option<Leaders>,
    /// Maekawa and the global algorithms: the quorum system ([`DEFAULT_COTERIE`] when
    /// `None`).
    pub coterie: Option<QuorumSystem>,
    /// MUTIN(l), kmex and GCS: the mutual-exclusion object inside ([`DEFAULT_MX`] when
    /// `None`).
    pub mx: Option<InnerMutex>,
    /// Migrating controller: migrate after this many requests.
    pub maxreq: Option<usize>,
    /// Migrating controller: migrate after this much time as controller (simulator time units).
    pub migrate_after: Option<u64>,
}

/// What a global algorithm needs beyond the spec, validated.
struct GlobalSetup {
    l: usize,
    k: usize,
    coterie: Coterie,
    quorums: Vec<Vec<ProcessId>>,
    mx: InnerMutex,
    /// The migration condition of a migrating-controller `mx`.
    condition: MigrationCondition,
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
    /// `algorithm` on `topology` with every other setting left to its default: the
    /// algorithm's default bounds (no `l`, `k` or per-process bounds), its default start, the
    /// corrected variant, and no leader, coterie, `mx`, `maxreq` or migration. Set the rest
    /// with struct update syntax: `SystemSpec { k: Some(1), ..SystemSpec::new(a, t) }`.
    pub fn new(algorithm: Algorithm, topology: Topology) -> SystemSpec {
        SystemSpec {
            algorithm,
            topology,
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

    /// The spec with `leader`, `coterie` and `mx` parsed from the names an edge gives (the
    /// CLI's flags, a cluster file's keys), or every problem at once: each name that does not
    /// parse, and with them what building the spec without it finds. Not the latter when the
    /// leader failed (the leader rules and the round trip refuse different things); and when
    /// `mx` failed, without the check of the migration options against the `mx` named.
    pub fn with_names(
        mut self,
        leader: Option<&str>,
        coterie: Option<&str>,
        mx: Option<&str>,
    ) -> Result<SystemSpec, ConfigError> {
        fn parse<T: std::str::FromStr<Err = Problem>>(
            name: Option<&str>,
            problems: &mut Vec<Problem>,
        ) -> Option<T> {
            name?.parse().map_err(|p| problems.push(p)).ok()
        }
        let mut problems = Vec::new();
        self.leader = parse(leader, &mut problems);
        self.coterie = parse(coterie, &mut problems);
        self.mx = parse(mx, &mut problems);
        if problems.is_empty() {
            return Ok(self);
        }
        let leader_failed = leader.is_some() && self.leader.is_none();
        let mx_failed = mx.is_some() && self.mx.is_none();
        if !leader_failed && let Err(e) = self.validate() {
            problems.extend(
                e.problems
                    .into_iter()
                    .filter(|p| !(mx_failed && matches!(p, Problem::MxOption { .. }))),
            );
        }
        Err(ConfigError::new(problems))
    }

    /// Whether the spec builds: every problem [`SystemSpec::build`] would report, with the
    /// system built and dropped.
    pub fn validate(&self) -> Result<(), ConfigError> {
        struct Nothing;
        impl SystemVisitor for Nothing {
            type Output = ();
            fn visit<A: CsObject>(self, _: &Instance, _: &[CsState], _: Vec<A>) {}
        }
        self.build(Nothing)
    }

    /// Validates the spec, builds the system and hands it to `visitor`. Every problem found
    /// is reported, one per line.
    pub fn build<V: SystemVisitor>(&self, visitor: V) -> Result<V::Output, ConfigError> {
        self.build_with_rules(&PrintedRules::default(), visitor)
    }

    /// [`SystemSpec::build`] with the printed rules named in `rules` switched on, one by one,
    /// over the corrected variant (`--printed-rule NAME`; an empty set is `build`). Each name
    /// must be one of `self.algorithm.printed_rules()`, and names need `variant` to be
    /// `Corrected` (the printed variant has every rule on already): otherwise one problem
    /// ([`Problem::UnknownPrintedRules`], [`Problem::PrintedRulesWithPrinted`],
    /// [`Problem::PrintedRulesWithTrip`]) that lists the valid names.
    pub fn build_with_rules<V: SystemVisitor>(
        &self,
        printed: &PrintedRules,
        visitor: V,
    ) -> Result<V::Output, ConfigError> {
        self.check_printed_rules(printed)?;
        if self.variant == Variant::Trip && self.algorithm != Algorithm::Lkcs {
            return Err(ConfigError::one(Problem::TripNotLkcs {
                algorithm: self.algorithm.to_string(),
            }));
        }
        let rules = self.lmutin_rules(printed);
        match self.algorithm {
            Algorithm::Lmutin => {
                if self.k.is_some() || self.bounds.as_ref().is_some_and(|b| b.k.is_some()) {
                    return Err(ConfigError::one(Problem::FixedBound {
                        algorithm: "lmutin".into(),
                        fixed: "k_i = |N_i|+1".into(),
                        detail: "upper bounds apply to lmutex".into(),
                    }));
                }
                let l = self.per_process(self.l, |b| b.l.clone(), "l", 1)?;
                let inst = Lmutin::instance(&self.topology, &l)?;
                let initial = self.initial_for(&inst)?;
                let (inst, procs) = Lmutin::system(&self.topology, &l, &initial, rules)?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            Algorithm::Lmutex => {
                if self.l.is_some() || self.bounds.as_ref().is_some_and(|b| b.l.is_some()) {
                    return Err(ConfigError::one(Problem::FixedBound {
                        algorithm: "lmutex".into(),
                        fixed: "l_i = 0".into(),
                        detail: "lower bounds apply to lmutin".into(),
                    }));
                }
                let k = self.per_process(self.k, |b| b.k.clone(), "k", 1)?;
                let inst = lmutex_instance(&self.topology, &k)?;
                let initial = self.initial_for(&inst)?;
                let (inst, procs) = lmutex_system(&self.topology, &k, &initial, rules)?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            Algorithm::Lkcs => {
                let sys = self.lkcs_system_with(printed)?;
                Ok(visitor.visit(&sys.instance, &sys.initial, sys.procs))
            }
            Algorithm::Maekawa => {
                let mut problems: Vec<Problem> =
                    self.require_complete().err().into_iter().collect();
                problems.extend(self.require_fixed_bounds(0, 1));
                ConfigError::check(problems)?;
                let n = self.topology.len();
                let coterie = self.coterie.unwrap_or(DEFAULT_COTERIE).coterie(n)?;
                // mutual exclusion starts with nobody in the CS unless told otherwise
                let initial = self
                    .initial
                    .clone()
                    .unwrap_or_else(|| vec![CsState::OutCs; n]);
                let rules = self.maekawa_rules(printed);
                let (inst, procs) = Maekawa::system_with(&coterie, &initial, rules)?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            Algorithm::Cdc => {
                let (initial, condition) = self.mutex_parts()?;
                let rules = self.migrating_rules(printed);
                let (inst, procs) = Cdc::system(&self.topology, &initial, condition, rules)?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            Algorithm::Ddc => {
                let (initial, condition) = self.mutex_parts()?;
                let rules = self.migrating_rules(printed);
                let (inst, procs) = Ddc::system(&self.topology, &initial, condition, rules)?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            Algorithm::Mutin | Algorithm::Kmex | Algorithm::Gcs => {
                let g = self.global_setup()?;
                // LMUTEX as `mx` runs on the complete graph, where every member is one hop
                // from every other: deviation 5 (set-aside) gains no failure locality there
                // and costs messages, so `mx` keeps the paper's waiting
                let mx_rules = LmutinRules {
                    hold_and_wait: true,
                    ..LmutinRules::CORRECTED
                };
                match g.mx {
                    InnerMutex::Maekawa => self.build_global(&g, printed, visitor, || {
                        let idle = vec![CsState::OutCs; self.topology.len()];
                        Ok(Maekawa::system(&g.coterie, &idle)?.1)
                    }),
                    InnerMutex::Lmutex => self.build_global(&g, printed, visitor, || {
                        let n = self.topology.len();
                        let idle = vec![CsState::OutCs; n];
                        Ok(lmutex_system(&self.topology, &vec![1; n], &idle, mx_rules)?.1)
                    }),
                    InnerMutex::Cdc => self.build_global(&g, printed, visitor, || {
                        let n = self.topology.len();
                        Ok(Cdc::processes(n, g.condition, MigratingRules::CORRECTED))
                    }),
                    InnerMutex::Ddc => self.build_global(&g, printed, visitor, || {
                        let n = self.topology.len();
                        Ok(Ddc::processes(n, g.condition, MigratingRules::CORRECTED))
                    }),
                }
            }
        }
    }

    /// LKCS: per-process bounds (`--l` / `--k` uniform, or lists in `--bounds`; by default
    /// l_i = 0 and k_i = |N_i|+1) and its rules: with the corrected variant, no leader named
    /// and no printed rule, the round trip, which refuses an instance it cannot take
    /// ([`Lkcs::build_default`]: the leader rules are not a silent fallback); with a leader
    /// named (`--leader ID`, `all` or `auto`) or a printed rule, the leader rules, the leader
    /// given or chosen and a start that is tight within two hops of it.
    pub fn lkcs_system(&self) -> Result<crate::algo::lkcs::LkcsSystem, ConfigError> {
        self.lkcs_system_with(&PrintedRules::default())
    }

    /// [`SystemSpec::lkcs_system`] with LKCS's printed rules named in `printed` (validated
    /// by the caller). `single-leader` builds with the automatic leader first, then again
    /// with that leader alone (`Leaders::One`), as `--leader ID` would.
    fn lkcs_system_with(
        &self,
        printed: &PrintedRules,
    ) -> Result<crate::algo::lkcs::LkcsSystem, ConfigError> {
        let t = &self.topology;
        let l = self.per_process(self.l, |b| b.l.clone(), "l", 0)?;
        let mut k = self.per_process(self.k, |b| b.k.clone(), "k", 0)?;
        if self.k.is_none() && self.bounds.as_ref().is_none_or(|b| b.k.is_none()) {
            k = t.processes().map(|p| t.degree(p) + 1).collect();
        }
        let leaders = self.leader.unwrap_or_default();
        if self.variant == Variant::Trip && self.leader.is_some() {
            return Err(ConfigError::one(Problem::RoundTripWithLeader));
        }
        let inst = Lkcs::instance(t, &l, &k)?;
        let rules = self.lkcs_rules(printed);
        if printed.has("single-leader") {
            if self.leader.is_some() {
                return Err(ConfigError::one(Problem::SingleLeaderWithLeader));
            }
            let auto = Lkcs::build(&inst, &Leaders::Auto, self.initial.as_deref(), rules)?;
            if let Some(&leader) = auto.tightening.first() {
                let one = Leaders::One(leader.index());
                return Lkcs::build(&inst, &one, self.initial.as_deref(), rules);
            }
            return Ok(auto);
        }
        if self.variant == Variant::Corrected && self.leader.is_none() && printed.is_empty() {
            return Lkcs::build_default(&inst, self.initial.as_deref());
        }
        Lkcs::build(&inst, &leaders, self.initial.as_deref(), rules)
    }

    /// CDC / DDC: the (0, 1) instance on a complete graph, the initial configuration (default:
    /// every process OutCS) and the migration condition. Every problem is reported.
    fn mutex_parts(&self) -> Result<(Vec<CsState>, MigrationCondition), ConfigError> {
        let mut problems = Vec::new();
        if self.l.is_some() || self.k.is_some() || self.bounds.is_some() {
            problems.push(Problem::BoundsNotTaken {
                algorithm: self.algorithm.to_string(),
            });
        }
        // the refusal names cdc or ddc (mutex_instance names both)
        let inst = match self.require_complete() {
            Err(p) => {
                problems.push(p);
                None
            }
            Ok(()) => crate::algo::migrating::mutex_instance(&self.topology)
                .map_err(|e| problems.extend(e.problems))
                .ok(),
        };
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

    /// Validates everything a global algorithm (mutin, kmex, gcs) needs, reporting every
    /// problem: a complete topology, uniform bounds given the right way, the coterie, the
    /// mutual-exclusion object and its options.
    fn global_setup(&self) -> Result<GlobalSetup, ConfigError> {
        let n = self.topology.len();
        let alg = self.algorithm;
        let mut problems = Vec::new();
        if self.bounds.is_some() {
            problems.push(Problem::UniformBoundsOnly {
                algorithm: alg.to_string(),
            });
        }
        let (l, k) = match alg {
            Algorithm::Mutin => {
                if self.k.is_some() {
                    problems.push(Problem::FixedBound {
                        algorithm: "mutin".into(),
                        fixed: "k = n".into(),
                        detail: "upper bounds apply to kmex and gcs".into(),
                    });
                }
                (self.l.unwrap_or(1), n)
            }
            Algorithm::Kmex => {
                if self.l.is_some() {
                    problems.push(Problem::FixedBound {
                        algorithm: "kmex".into(),
                        fixed: "l = 0".into(),
                        detail: "lower bounds apply to mutin and gcs".into(),
                    });
                }
                (0, self.k.unwrap_or(1))
            }
            _ => (self.l.unwrap_or(1), self.k.unwrap_or(n.saturating_sub(1))),
        };
        if let Err(e) = global_instance(&self.topology, l, k, global_rule(alg)) {
            problems.extend(e.problems);
        }
        let coterie = self
            .coterie
            .unwrap_or(DEFAULT_COTERIE)
            .coterie(n)
            .map_err(|e| problems.extend(e.problems))
            .ok();
        let mx = self.mx.unwrap_or(DEFAULT_MX);
        for (flag, given) in [
            ("--maxreq", self.maxreq.is_some()),
            ("--migrate-after", self.migrate_after.is_some()),
        ] {
            if given && !mx.options().contains(&flag) {
                problems.push(Problem::MxOption {
                    option: flag.into(),
                    mx: mx.to_string(),
                });
            }
        }
        let condition = MigrationCondition::from_options(self.maxreq, self.migrate_after)
            .map_err(|e| problems.extend(e.problems))
            .ok();
        ConfigError::check(problems)?;
        match (coterie, condition) {
            (Some(coterie), Some(condition)) => Ok(GlobalSetup {
                l,
                k,
                quorums: quorums_of(&coterie),
                coterie,
                mx,
                condition,
            }),
            _ => Err(ConfigError::one(Problem::Invalid("invalid options".into()))),
        }
    }

    /// Builds mutin, kmex or gcs over any mutual-exclusion object: `make_mx` builds one
    /// fresh mutual-exclusion system (every process out of its CS); gcs calls it twice, one
    /// system per inner object.
    fn build_global<V: SystemVisitor, M: CsObject>(
        &self,
        g: &GlobalSetup,
        printed: &PrintedRules,
        visitor: V,
        make_mx: impl Fn() -> Result<Vec<M>, ConfigError>,
    ) -> Result<V::Output, ConfigError> {
        let rules = self.mutin_rules(printed);
        let t = &self.topology;
        let inst = global_instance(t, g.l, g.k, global_rule(self.algorithm))?;
        let initial = self.initial_for(&inst)?;
        match self.algorithm {
            Algorithm::Mutin => {
                let (inst, procs) = Mutin::system(t, &g.quorums, g.l, &initial, make_mx()?, rules)?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            Algorithm::Kmex => {
                let (inst, procs) = kmex_system(t, &g.quorums, g.k, &initial, make_mx()?, rules)?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
            _ => {
                let mx = (make_mx()?, make_mx()?);
                let (inst, procs) = gcs_system(t, &g.quorums, (g.l, g.k), &initial, mx, rules)?;
                Ok(visitor.visit(&inst, &initial, procs))
            }
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
            Err(Problem::NeedsCompleteGraph {
                algorithm: self.algorithm.to_string(),
                topology: self.topology.name().to_string(),
                n: self.topology.len(),
            })
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
                    problems.push(Problem::FixedBound {
                        algorithm: alg.to_string(),
                        fixed: format!("{name} = {fixed}"),
                        detail: format!("--{name} {v} does not apply"),
                    });
                }
                if let Some(list) = list.filter(|list| list.iter().any(|&v| v != fixed)) {
                    problems.push(Problem::FixedBound {
                        algorithm: alg.to_string(),
                        fixed: format!("{name} = {fixed}"),
                        detail: format!("the `{name}` list in --bounds asks for {list:?}"),
                    });
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
            (Some(_), Some(_)) => Err(ConfigError::one(Problem::BoundGivenTwice {
                bound: name.into(),
            })),
            (None, Some(v)) if v.len() != n => Err(ConfigError::one(Problem::BoundsListLength {
                bound: name.into(),
                given: v.len(),
                n,
            })),
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

/// A global algorithm's bound condition, as `global_instance` takes it (`ALGORITHM:
/// CONDITION`; the algorithm names its complete-graph refusal).
fn global_rule(algorithm: Algorithm) -> &'static str {
    match algorithm {
        Algorithm::Mutin => "mutin: 0 <= l < n",
        Algorithm::Kmex => "kmex: 1 <= k <= n",
        _ => "gcs: 0 <= l < k <= n",
    }
}

#[cfg(test)]
mod tests;
