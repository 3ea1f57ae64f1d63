//! Building an LKCS system: the instance, the leader's preconditions and the search for a
//! leader and a tight start (the leader rules), the round trip's tightened bounds, and
//! [`Lkcs::build_default`], which runs the round trip and refuses, with its reasons, an
//! instance the round trip cannot take (the leader rules run only when a leader is named).

use super::leader::{tightened_region, within_two_hops, LeaderProc};
use super::trip::TripProc;
use super::Lkcs;
use super::LkcsRules;
use crate::config::{Bounds, Instance};
use crate::cs::CsState;
use crate::error::{ConfigError, Problem};
use crate::id::ProcessId;
use crate::topology::Topology;
use std::collections::BTreeSet;

/// Backtracking steps per process and starting state in the up-front test for processes
/// that can never move ([`Instance::immovable`]).
const IMMOVABLE_BUDGET: usize = 20_000;

/// How many candidate leaders' start searches may give up (budget spent, nothing found)
/// before [`Lkcs::build`] refuses without trying the others.
const MAX_SEARCHES_GIVEN_UP: usize = 3;

/// The smallest leader degree |N_LDR| LKCS allows.
pub const MIN_LEADER_DEGREE: usize = 4;

/// Which processes lead LKCS's leader rules (`--leader ID`, `--leader all`, `--leader auto`;
/// with none named, the corrected variant and no printed rule, the CLI and [`crate::Quota`]
/// run [`Lkcs::build_default`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Leaders {
    /// The paper's leader, chosen automatically: the first process, by decreasing degree then
    /// id, that meets every precondition and admits a tight start; with it, as extra
    /// watchers, every process of degree at least 4 within two hops of it and every process
    /// within two hops that has no such watcher in its closed neighbourhood (deviation 10; on
    /// a complete graph, every process of degree at least 4). The watchers tighten nothing
    /// more: the operating bounds are the single leader's.
    #[default]
    Auto,
    /// The paper's single leader, named, without watchers: only its closed neighbourhood can
    /// be nominated.
    One(usize),
    /// Every process that meets the leader's preconditions leads (an extension of the paper:
    /// each leader watches its own neighbourhood; safety stays local to every arbiter, see
    /// deviation 4). Processes within two hops of any leader keep the tightened bounds. The
    /// price: with the least slack (k_i − l_i = 3 everywhere) the operating range is two
    /// values wide everywhere, most processes can never move in normal operation, and almost
    /// every move goes through a trigger (see the module's "Liveness").
    All,
}

impl std::str::FromStr for Leaders {
    type Err = Problem;
    fn from_str(s: &str) -> Result<Leaders, Problem> {
        match s {
            "all" => Ok(Leaders::All),
            "auto" => Ok(Leaders::Auto),
            _ => s
                .parse::<usize>()
                .map(Leaders::One)
                .map_err(|_| Problem::UnknownLeader {
                    given: s.to_string(),
                }),
        }
    }
}

impl std::fmt::Display for Leaders {
    /// As parsed: `auto`, `all` or the leader's index.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Leaders::Auto => f.write_str("auto"),
            Leaders::All => f.write_str("all"),
            Leaders::One(i) => write!(f, "{i}"),
        }
    }
}

/// Reads a `leader` key of a TOML file (the cluster file's `[quota]`, a sweep grid) as the
/// CLI's `--leader` reads its value: `"auto"`, `"all"`, or a leader's index, as a string
/// (`"3"`) or an integer (`leader = 3`). What the text names is checked where it is parsed
/// ([`Leaders`]'s `FromStr`); any other type is refused, naming what the key takes.
#[cfg(feature = "net")]
pub fn leader_key<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    struct Key;
    impl serde::de::Visitor<'_> for Key {
        type Value = String;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a leader: \"auto\", \"all\" or a leader's index")
        }
        fn visit_str<E: serde::de::Error>(self, s: &str) -> Result<String, E> {
            Ok(s.to_string())
        }
        fn visit_u64<E: serde::de::Error>(self, i: u64) -> Result<String, E> {
            Ok(i.to_string())
        }
        fn visit_i64<E: serde::de::Error>(self, i: i64) -> Result<String, E> {
            u64::try_from(i)
                .map(|i| i.to_string())
                .map_err(|_| E::invalid_value(serde::de::Unexpected::Signed(i), &self))
        }
    }
    d.deserialize_any(Key).map(Some)
}

/// A built LKCS system: the problem instance the observer checks, the bounds the algorithm
/// keeps in normal operation, the leader, the initial configuration and the processes.
#[derive(Clone, Debug)]
pub struct LkcsSystem {
    /// The (l_i, k_i) instance.
    pub instance: Instance,
    /// The (L_i, K_i) instance: tightened by one within two hops of every process in
    /// `tightening`; with the round trip, every side a move can break, everywhere.
    pub operating: Instance,
    /// The processes whose two-hop neighbourhoods run with tightened bounds: the paper's
    /// leader (chosen or named), or every able process ([`Leaders::All`]); none for the naive
    /// composition.
    pub tightening: Vec<ProcessId>,
    /// The processes that watch their neighbourhoods and nominate triggers, by id: the
    /// paper's leader with its watchers (see [`Leaders::Auto`]); the one named; or every able
    /// process ([`Leaders::All`]); none for the naive composition and the round trip.
    pub leaders: Vec<ProcessId>,
    /// The initial configuration.
    pub initial: Vec<CsState>,
    /// One object per process, by id.
    pub procs: Vec<Lkcs>,
}

impl Lkcs {
    /// The (l_i, k_i) instance, after checking 0 ≤ l_i < k_i ≤ |N_i|+1 for every process.
    pub fn instance(
        topology: &Topology,
        l: &[usize],
        k: &[usize],
    ) -> Result<Instance, ConfigError> {
        if l.len() != topology.len() || k.len() != topology.len() {
            return Err(ConfigError::one(Problem::Invalid(format!(
                "{} lower and {} upper bounds given for {} processes",
                l.len(),
                k.len(),
                topology.len()
            ))));
        }
        let bounds = l.iter().zip(k).map(|(&l, &k)| Bounds { l, k }).collect();
        Instance::new(topology.clone(), bounds)
    }

    /// Every reason `leader` cannot lead LKCS on `inst`: |N_LDR| < 4, or a process within two
    /// hops with k_q − l_q < 3 (empty when it can).
    pub fn leader_problems(inst: &Instance, leader: ProcessId) -> Vec<Problem> {
        let t = inst.topology();
        if leader.index() >= t.len() {
            return vec![Problem::Invalid(format!(
                "--leader {}: processes are 0..{}",
                leader.index(),
                t.len()
            ))];
        }
        let mut problems = Vec::new();
        if t.degree(leader) < MIN_LEADER_DEGREE {
            problems.push(Problem::Invalid(format!(
                "leader {leader} has |N_LDR| = {}, LKCS needs |N_LDR| >= {MIN_LEADER_DEGREE}",
                t.degree(leader)
            )));
        }
        for q in within_two_hops(t, leader) {
            let b = inst.bounds(q);
            if b.k < b.l + 3 {
                problems.push(Problem::Invalid(format!(
                    "{q} is within two hops of leader {leader} and has k - l = {} - {} < 3",
                    b.k, b.l
                )));
            }
        }
        problems
    }

    /// The bounds the algorithm keeps with `leaders`: (l_i+1, k_i−1) within two hops of one
    /// of them, (l_i, k_i) elsewhere; with no leader, the problem's bounds.
    pub fn operating_instance(
        inst: &Instance,
        leaders: &[ProcessId],
    ) -> Result<Instance, ConfigError> {
        Lkcs::tightened(inst, &tightened_region(inst.topology(), leaders))
    }

    /// The problem's bounds, tightened to (l_i+1, k_i−1) on the processes of `region`.
    fn tightened(inst: &Instance, region: &BTreeSet<ProcessId>) -> Result<Instance, ConfigError> {
        let t = inst.topology();
        let bounds = t
            .processes()
            .map(|p| {
                let b = inst.bounds(p);
                if region.contains(&p) {
                    Bounds {
                        l: b.l + 1,
                        k: b.k.saturating_sub(1),
                    }
                } else {
                    b
                }
            })
            .collect();
        Instance::new(t.clone(), bounds)
    }

    /// Validates everything and builds the system. `leaders`: see [`Leaders`]; `initial`:
    /// the given start, or `None` to search one that is safe for the operating bounds. With
    /// `rules.sidetrack == false` (the naive composition) there is no leader and no
    /// tightening. Every problem found is reported.
    pub fn build(
        inst: &Instance,
        leaders: &Leaders,
        initial: Option<&[CsState]>,
        rules: LkcsRules,
    ) -> Result<LkcsSystem, ConfigError> {
        Lkcs::check_instance(inst, initial)?;
        Lkcs::build_checked(inst, leaders, initial, rules)
    }

    /// What every rule set refuses: a topology not stored, a process that can never move
    /// whatever the algorithm, a start of the wrong length.
    fn check_instance(inst: &Instance, initial: Option<&[CsState]>) -> Result<(), ConfigError> {
        inst.topology().require_stored("lkcs")?;
        let frozen = inst.immovable(IMMOVABLE_BUDGET);
        if !frozen.is_empty() {
            let names: Vec<String> = frozen.iter().map(ToString::to_string).collect();
            return Err(ConfigError::one(Problem::Invalid(format!(
                "{} can never move: from no configuration that meets the bounds does its move \
                 keep every bound of its closed neighbourhood (no algorithm can let it \
                 complete a pair)",
                names.join(", ")
            ))));
        }
        let n = inst.len();
        if let Some(s) = initial.filter(|s| s.len() != n) {
            return Err(ConfigError::one(Problem::InitialLength {
                given: s.len(),
                n,
            }));
        }
        Ok(())
    }

    /// [`Lkcs::build`] after [`Lkcs::check_instance`].
    fn build_checked(
        inst: &Instance,
        leaders: &Leaders,
        initial: Option<&[CsState]>,
        rules: LkcsRules,
    ) -> Result<LkcsSystem, ConfigError> {
        if rules.round_trip {
            return Lkcs::build_trip(inst, leaders, initial);
        }
        if !rules.sidetrack {
            if *leaders != Leaders::Auto {
                return Err(ConfigError::one(Problem::Invalid(
                    "the naive composition has no leader".into(),
                )));
            }
            let initial = match initial {
                Some(s) => s.to_vec(),
                None => inst.find_safe_initial().map_err(ConfigError::one)?,
            };
            return Lkcs::assemble(inst, &[], Vec::new(), initial, rules);
        }
        if let Leaders::One(l) = *leaders {
            let n = inst.topology().len();
            if l >= n {
                // checked before the id is built: an id past u32::MAX is not a process id
                return Err(ConfigError::one(Problem::Invalid(format!(
                    "--leader {l}: processes are 0..{n}"
                ))));
            }
            let p = ProcessId::from(l);
            ConfigError::check(Lkcs::leader_problems(inst, p))?;
            let operating = Lkcs::operating_instance(inst, &[p])?;
            let initial = tight_start(inst, &operating, initial)?;
            return Lkcs::assemble(inst, &[p], vec![p], initial, rules);
        }
        if let Some(s) = initial {
            ConfigError::check(inst.violations(s))?;
        }
        let t = inst.topology();
        let mut candidates: Vec<ProcessId> = t
            .processes()
            .filter(|&p| t.degree(p) >= MIN_LEADER_DEGREE)
            .collect();
        if candidates.is_empty() {
            let max = t.processes().map(|p| t.degree(p)).max().unwrap_or(0);
            return Err(ConfigError::one(Problem::Invalid(format!(
                "LKCS needs a leader with |N_LDR| >= {MIN_LEADER_DEGREE}: the largest degree in {} is {max}",
                t.name()
            ))));
        }
        candidates.sort_by_key(|&p| (std::cmp::Reverse(t.degree(p)), p));
        let mut why = Vec::new();
        let mut able = Vec::new();
        for &p in &candidates {
            match Lkcs::leader_problems(inst, p).first() {
                Some(problem) => why.push(format!("{p}: {problem}")),
                None => able.push(p),
            }
        }
        let mut all = able.clone();
        all.sort();
        let singles = able.iter().map(|&p| vec![p]);
        let groups: Vec<Vec<ProcessId>> = match leaders {
            Leaders::All if !all.is_empty() => vec![all],
            _ => singles.collect(),
        };
        let candidates = groups.len();
        let mut gave_up = 0;
        for (tried, group) in groups.into_iter().enumerate() {
            if gave_up == MAX_SEARCHES_GIVEN_UP {
                // refuse fast: each search that gives up costs a full budget
                why.push(format!(
                    "the start search gave up for {gave_up} candidate leaders; the other {} \
                     were not tried (give a start with --initial, or a leader with --leader)",
                    candidates - tried
                ));
                break;
            }
            let operating = Lkcs::operating_instance(inst, &group)?;
            let start = match initial {
                Some(s) => match tight_violations(inst, &operating, s).first() {
                    Some(b) => Err(format!("the given start is not tight: {b}")),
                    None => Ok(s.to_vec()),
                },
                None => operating
                    .find_safe_initial_quickly()
                    .map_err(|e| e.to_string()),
            };
            match start {
                Ok(start) if *leaders == Leaders::Auto => {
                    let watchers = Lkcs::with_watchers(t, group[0]);
                    return Lkcs::assemble(inst, &group, watchers, start, rules);
                }
                Ok(start) => return Lkcs::assemble(inst, &group, group.clone(), start, rules),
                Err(e) if group.len() == 1 => {
                    gave_up += usize::from(e.contains("search gave up"));
                    why.push(format!("{}: {e}", group[0]));
                }
                Err(e) => why.push(format!("every able process leading: {e}")),
            }
        }
        let shown = why.len().min(5);
        let mut text = format!(
            "no process can lead LKCS (|N_LDR| >= {MIN_LEADER_DEGREE}, k_q - l_q >= 3 within two hops, a tight start): {}",
            why[..shown].join("; ")
        );
        if why.len() > shown {
            text.push_str(&format!("; and {} more", why.len() - shown));
        }
        Err(ConfigError::one(Problem::Invalid(text)))
    }

    /// The default LKCS: the round trip ([`LkcsRules::TRIP`]), live on every instance of
    /// the liveness sweeps. An instance it refuses (bounds it cannot tighten, no start
    /// within its tightened bounds) is refused: each of the round trip's reasons as a
    /// [`Problem::RoundTrip`], then [`Problem::LeaderRulesNotRun`] saying how to name them.
    /// The leader rules ([`LkcsRules::CORRECTED`]) may take such an instance but are not
    /// live on every graph (`docs/lkcs-liveness.md`), so they run
    /// only when a leader is named ([`Lkcs::build`]; `--leader`), never as a silent
    /// fallback.
    pub fn build_default(
        inst: &Instance,
        initial: Option<&[CsState]>,
    ) -> Result<LkcsSystem, ConfigError> {
        Lkcs::check_instance(inst, initial)?;
        Lkcs::build_checked(inst, &Leaders::Auto, initial, LkcsRules::TRIP).map_err(|trip| {
            let mut problems: Vec<Problem> = trip
                .problems
                .into_iter()
                .map(|p| Problem::RoundTrip(Box::new(p)))
                .collect();
            problems.push(Problem::LeaderRulesNotRun);
            ConfigError::new(problems)
        })
    }

    /// The round-trip variant's system ([`LkcsRules::TRIP`]): no leader; L_i = l_i+1 where
    /// l_i > 0 and K_i = k_i−1 where k_i < |N_i|+1 (refused where that leaves L_i ≥ K_i); the
    /// given start, or one searched, within the operating bounds everywhere.
    fn build_trip(
        inst: &Instance,
        leaders: &Leaders,
        initial: Option<&[CsState]>,
    ) -> Result<LkcsSystem, ConfigError> {
        if *leaders != Leaders::Auto {
            return Err(ConfigError::one(Problem::RoundTripWithLeader));
        }
        let t = inst.topology();
        let bounds: Vec<Bounds> = t
            .processes()
            .map(|p| {
                let b = inst.bounds(p);
                let closed = t.degree(p) + 1;
                Bounds {
                    l: b.l + usize::from(b.l > 0),
                    k: b.k - usize::from(b.k < closed),
                }
            })
            .collect();
        let processes: Vec<ProcessId> = t
            .processes()
            .filter(|p| bounds[p.index()].l >= bounds[p.index()].k)
            .collect();
        if !processes.is_empty() {
            return Err(ConfigError::one(Problem::NoRoomToTighten { processes }));
        }
        let operating = Instance::new(t.clone(), bounds)?;
        // when none is given, a start from which every process can move within the tightened
        // bounds, where one is found: moves there take no round trip (6(|N_i|+1) a pair)
        let initial = match initial {
            Some(_) => tight_start(inst, &operating, initial)?,
            None => operating.movable_start(tight_start(inst, &operating, None)?),
        };
        let procs = t
            .processes()
            .map(|p| {
                let closed = t.closed(p);
                let proc = TripProc::new(p, closed, inst.bounds(p), operating.bounds(p), &initial);
                Lkcs::from(proc)
            })
            .collect();
        Ok(LkcsSystem {
            instance: inst.clone(),
            operating,
            tightening: Vec::new(),
            leaders: Vec::new(),
            initial,
            procs,
        })
    }

    /// `leader` and, as extra watchers, every other process of degree at least
    /// [`MIN_LEADER_DEGREE`] within two hops of it, and every process within two hops that
    /// has none of those in its closed neighbourhood (deviation 10).
    /// They tighten no bound the leader does not, so the operating bounds (and the sequential
    /// workload) are the leader's alone, but every tightened process has a watcher in its
    /// closed neighbourhood that can nominate it.
    fn with_watchers(t: &Topology, leader: ProcessId) -> Vec<ProcessId> {
        let region = tightened_region(t, &[leader]);
        let mut watchers: BTreeSet<ProcessId> = region
            .iter()
            .copied()
            .filter(|&p| p == leader || t.degree(p) >= MIN_LEADER_DEGREE)
            .collect();
        // every tightened process no such watcher can nominate watches its own neighbourhood
        let unwatched: Vec<ProcessId> = region
            .iter()
            .copied()
            .filter(|&p| !t.closed(p).iter().any(|q| watchers.contains(q)))
            .collect();
        watchers.extend(unwatched);
        watchers.into_iter().collect()
    }

    /// The system whose bounds are tightened within two hops of `tighteners` and whose
    /// `leaders` (a superset) watch their own neighbourhoods.
    fn assemble(
        inst: &Instance,
        tighteners: &[ProcessId],
        leaders: Vec<ProcessId>,
        initial: Vec<CsState>,
        rules: LkcsRules,
    ) -> Result<LkcsSystem, ConfigError> {
        ConfigError::check(inst.violations(&initial))?;
        let region = tightened_region(inst.topology(), tighteners);
        let operating = Lkcs::tightened(inst, &region)?;
        let procs = inst
            .topology()
            .processes()
            .map(|p| LeaderProc::in_region(&operating, p, &leaders, &region, &initial, rules))
            .map(Lkcs::from)
            .collect();
        Ok(LkcsSystem {
            instance: inst.clone(),
            operating,
            tightening: tighteners.to_vec(),
            leaders,
            initial,
            procs,
        })
    }
}

/// The given start checked against the problem's bounds and the operating ones, or a start
/// within the operating bounds searched for.
fn tight_start(
    inst: &Instance,
    operating: &Instance,
    initial: Option<&[CsState]>,
) -> Result<Vec<CsState>, ConfigError> {
    match initial {
        Some(s) => {
            let mut problems = inst.violations(s);
            problems.extend(tight_violations(inst, operating, s));
            ConfigError::check(problems)?;
            Ok(s.to_vec())
        }
        None => operating
            .find_safe_initial_quickly()
            .map_err(ConfigError::one),
    }
}

/// One problem per process with tightened operating bounds (within two hops of a leader, or
/// every breakable side with the round trip) that fail in
/// `states` (where the problem's bounds may still hold).
fn tight_violations(inst: &Instance, operating: &Instance, states: &[CsState]) -> Vec<Problem> {
    operating
        .topology()
        .processes()
        .filter(|&p| operating.bounds(p) != inst.bounds(p) && !operating.holds_at(states, p))
        .map(|p| {
            let b = operating.bounds(p);
            Problem::Invalid(format!(
                "initial configuration: {p} has {} in the CS in its closed neighbourhood; where LKCS tightens its bounds it needs [{}, {}] (l_i+1, k_i-1)",
                operating.in_cs_around(states, p),
                b.l,
                b.k
            ))
        })
        .collect()
}
