//! How a [`QuotaBuilder`](super::QuotaBuilder) becomes a system: the algorithm chosen for
//! the bounds asked, every problem with the input found at once, and a refused local
//! quota's nearest accepted bounds, in quota words.

use super::*;
use crate::error::{BoundSide, QuotaProblem as Q};

/// What `build` hands to the catalog.
pub(super) struct Plan {
    pub(super) spec: SystemSpec,
    pub(super) global: bool,
    /// LKCS's round trip (no leader named): the instance, to word a refusal in quota terms
    /// ([`QuotaBuilder::lkcs_refusal`]).
    pub(super) round_trip: Option<Instance>,
}

/// Global (l, k) and the algorithm it selects: (0, 1) mutual exclusion, (0, k) kmex,
/// (l, n) MUTIN(l), (l, k) GCS.
fn global_choice(l: usize, k: usize, n: usize) -> Algorithm {
    match (l, k) {
        (0, 1) => Algorithm::Cdc,
        (0, _) => Algorithm::Kmex,
        (_, k) if k == n => Algorithm::Mutin,
        _ => Algorithm::Gcs,
    }
}

/// The bounds `algorithm` keeps, in words, when they differ from the ones asked for
/// (`l`, `k` per member on `t`); `None` when it keeps exactly these.
fn kept_otherwise(
    algorithm: Algorithm,
    t: &Topology,
    l: &[usize],
    k: &[usize],
) -> Option<&'static str> {
    let n = t.len();
    let uniform = l.iter().all(|&x| x == l[0]) && k.iter().all(|&x| x == k[0]);
    let full = |i: usize| t.degree(ProcessId::from(i)) + 1;
    let all_lower_only = (0..n).all(|i| k[i] == full(i));
    let all_upper_only = l.iter().all(|&x| x == 0);
    let ok = match algorithm {
        Algorithm::Cdc | Algorithm::Ddc | Algorithm::Maekawa => {
            t.is_complete() && uniform && (l[0], k[0]) == (0, 1)
        }
        Algorithm::Kmex => t.is_complete() && uniform && all_upper_only,
        Algorithm::Mutin => t.is_complete() && uniform && k[0] == n,
        Algorithm::Gcs => t.is_complete() && uniform,
        Algorithm::Lmutin => all_lower_only,
        Algorithm::Lmutex => all_upper_only,
        Algorithm::Lkcs => true,
    };
    (!ok).then_some(match algorithm {
        Algorithm::Cdc | Algorithm::Ddc | Algorithm::Maekawa => {
            "at most 1 active among all members"
        }
        Algorithm::Kmex => "only an upper bound, one for all members",
        Algorithm::Mutin => "only a lower bound, one for all members",
        Algorithm::Gcs => "one lower and one upper bound for all members",
        Algorithm::Lmutin => "only lower bounds (at least l_i around each member)",
        Algorithm::Lmutex => "only upper bounds (at most k_i around each member)",
        Algorithm::Lkcs => "any bounds",
    })
}

/// The problem with an algorithm chosen by name that does not keep exactly the bounds asked
/// for: it would drop, change or tighten one. Names the algorithms that do keep them.
fn unsolved(
    algorithm: Algorithm,
    global: bool,
    t: &Topology,
    l: &[usize],
    k: &[usize],
) -> Option<Problem> {
    let keeps = kept_otherwise(algorithm, t, l, k)?;
    if algorithm.is_global() && !t.is_complete() {
        return None; // option_problems says why it cannot run here
    }
    let n = t.len();
    let uniform = l.iter().all(|&x| x == l[0]) && k.iter().all(|&x| x == k[0]);
    let asked = match (global || t.is_complete(), uniform) {
        (true, true) if l[0] == 0 => format!("at most {} of {n} active", k[0]),
        (true, true) if k[0] == n => format!("at least {} of {n} active", l[0]),
        (true, true) => format!("at least {} and at most {} of {n} active", l[0], k[0]),
        (_, true) if l[0] == 0 => format!("at most {} active around each member", k[0]),
        (_, true) if (0..n).all(|i| k[i] == t.degree(ProcessId::from(i)) + 1) => {
            format!("at least {} active around each member", l[0])
        }
        (_, true) => format!(
            "at least {} and at most {} active around each member",
            l[0], k[0]
        ),
        (_, false) => "per-member bounds".to_string(),
    };
    let solvers = Algorithm::ALL
        .into_iter()
        .filter(|&a| !a.is_global() || t.is_complete())
        .filter(|&a| kept_otherwise(a, t, l, k).is_none())
        .map(|a| a.name().to_string())
        .collect();
    Some(Problem::Unsolved {
        algorithm: algorithm.name().to_string(),
        keeps: keeps.to_string(),
        asked,
        solvers,
    })
}

/// A per-member bound problem of a local quota, before the members that share it are
/// gathered into one [`QuotaProblem`](Q). Ordered as their lines are printed: lower-bound
/// problems first.
#[derive(PartialEq, Eq, PartialOrd, Ord)]
enum Local {
    LowerNotBelowSize { l: usize, size: usize },
    LowerNotBelowUpper { l: usize, k: usize },
    UpperAbove { k: usize, size: usize },
}

/// Local bounds and the algorithm they select: only lower bounds LMUTIN, only upper bounds
/// LMUTEX, both LKCS.
fn local_choice(t: &Topology, l: &[usize], k: &[usize]) -> Algorithm {
    let full = |p: ProcessId| t.degree(p) + 1;
    if t.processes().all(|p| k[p.index()] == full(p)) {
        Algorithm::Lmutin
    } else if l.iter().all(|&l| l == 0) {
        Algorithm::Lmutex
    } else {
        Algorithm::Lkcs
    }
}

impl QuotaBuilder {
    /// Everything `build` checks before it starts a thread.
    pub(super) fn plan(&self) -> Result<Plan, ConfigError> {
        let n = self.n();
        let mut problems = Vec::new();
        if n == 0 {
            return Err(ConfigError::one(Problem::Quota(Q::NoMembers)));
        }
        let uniform = self.l.is_some() || self.k.is_some();
        if self.per_member.is_none() && !uniform {
            problems.push(Problem::Quota(Q::NoBounds));
        }
        if self.per_member.is_some() && uniform {
            problems.push(Problem::Quota(Q::BoundsExclusive));
        }
        let (global, topology, l, k) = match &self.scope {
            Scope::Global(n) => {
                let n = *n;
                if self.per_member.is_some() {
                    problems.push(Problem::Quota(Q::PerMemberOnGlobal));
                }
                let (l, k) = (self.l.unwrap_or(0), self.k.unwrap_or(n));
                if k > n {
                    problems.push(Problem::Quota(Q::UpperAboveMembers { k, n }));
                }
                if l >= k && self.k.is_none() {
                    // no upper bound was given: the lower one is too high for the members
                    problems.push(Problem::Quota(Q::LowerNotBelowMembers { l, n }));
                } else if l >= k {
                    problems.push(Problem::Quota(Q::LowerNotBelowUpper {
                        members: Vec::new(),
                        l,
                        k,
                    }));
                } else if (l, k) == (0, n) && problems.is_empty() {
                    problems.push(Problem::Quota(Q::ConstrainsNothing { n: Some(n) }));
                }
                let topology = match Topology::complete(n) {
                    Ok(t) => t,
                    Err(e) => {
                        problems.extend(e.problems);
                        return Err(ConfigError { problems });
                    }
                };
                (true, topology, vec![l; n], vec![k; n])
            }
            Scope::Local(t) => {
                let full: Vec<usize> = t.processes().map(|p| t.degree(p) + 1).collect();
                let (l, k) = match &self.per_member {
                    Some((l, k)) => {
                        for (side, v) in [(BoundSide::Lower, l), (BoundSide::Upper, k)] {
                            if v.len() != n {
                                problems.push(Problem::Quota(Q::BoundsLength {
                                    side,
                                    given: v.len(),
                                    n,
                                }));
                            }
                        }
                        if !problems.is_empty() {
                            return Err(ConfigError { problems });
                        }
                        (l.clone(), k.clone())
                    }
                    None => (
                        vec![self.l.unwrap_or(0); n],
                        match self.k {
                            Some(k) => vec![k; n],
                            None => full.clone(),
                        },
                    ),
                };
                // one line per distinct problem, naming every member it concerns
                let mut grouped: std::collections::BTreeMap<Local, Vec<usize>> = Default::default();
                for p in t.processes() {
                    let i = p.index();
                    let size = full[i];
                    if k[i] > size {
                        grouped
                            .entry(Local::UpperAbove { k: k[i], size })
                            .or_default()
                            .push(i);
                    }
                    if l[i] >= k[i] && self.k.is_none() && self.per_member.is_none() {
                        grouped
                            .entry(Local::LowerNotBelowSize { l: l[i], size })
                            .or_default()
                            .push(i);
                    } else if l[i] >= k[i] {
                        grouped
                            .entry(Local::LowerNotBelowUpper { l: l[i], k: k[i] })
                            .or_default()
                            .push(i);
                    }
                }
                for (why, members) in grouped {
                    problems.push(Problem::Quota(match why {
                        Local::UpperAbove { k, size } => {
                            Q::UpperAboveNeighbourhood { members, k, size }
                        }
                        Local::LowerNotBelowSize { l, size } => {
                            Q::LowerNotBelowNeighbourhood { members, l, size }
                        }
                        Local::LowerNotBelowUpper { l, k } => {
                            Q::LowerNotBelowUpper { members, l, k }
                        }
                    }));
                }
                if problems.is_empty() && (0..n).all(|i| l[i] == 0 && k[i] == full[i]) {
                    problems.push(Problem::Quota(Q::ConstrainsNothing { n: None }));
                }
                (false, t.clone(), l, k)
            }
        };
        if let Some(ids) = &self.initially_active {
            problems.extend(start_list_problems(ids, n));
        }
        ConfigError::check(problems)?;
        let algorithm = self.algorithm.unwrap_or_else(|| {
            if global {
                global_choice(l[0], k[0], n)
            } else {
                local_choice(&topology, &l, &k)
            }
        });
        if self.algorithm.is_some() {
            ConfigError::check(
                unsolved(algorithm, global, &topology, &l, &k)
                    .into_iter()
                    .collect(),
            )?;
        }
        let mut problems = Vec::new();
        let inst = Instance::new(
            topology.clone(),
            l.iter().zip(&k).map(|(&l, &k)| Bounds { l, k }).collect(),
        )?;
        let initial = match &self.initially_active {
            Some(ids) => {
                // the list itself was checked with the bounds
                let mut states = vec![CsState::OutCs; n];
                for &i in ids {
                    states[i] = CsState::InCs;
                }
                problems.extend(unsafe_start(&inst, &states, global));
                Some(states)
            }
            None => default_start(algorithm, &l),
        };
        let option_problems = self.option_problems(algorithm, global, &topology);
        problems.extend(option_problems);
        // the round trip needs no leader: the leader rules' preconditions apply only to a
        // leader named
        if let Some(leader) = self
            .leader
            .filter(|_| algorithm == Algorithm::Lkcs && !self.round_trip)
        {
            problems.extend(lkcs_problems(&inst, leader));
        }
        ConfigError::check(problems)?;
        let lists = |l: bool, k: bool| {
            Some(BoundsFile {
                l: l.then(|| inst.all_bounds().iter().map(|b| b.l).collect()),
                k: k.then(|| inst.all_bounds().iter().map(|b| b.k).collect()),
            })
        };
        let (sl, sk, bounds) = match algorithm {
            Algorithm::Mutin => (Some(l[0]), None, None),
            Algorithm::Kmex => (None, Some(k[0]), None),
            Algorithm::Gcs => (Some(l[0]), Some(k[0]), None),
            Algorithm::Maekawa | Algorithm::Cdc | Algorithm::Ddc => (None, None, None),
            Algorithm::Lmutin => (None, None, lists(true, false)),
            Algorithm::Lmutex => (None, None, lists(false, true)),
            Algorithm::Lkcs => (None, None, lists(true, true)),
        };
        // the quota's defaults (each type's docs say why they differ from the CLI's)
        let mx = self.mx.unwrap_or(InnerMutex::Cdc);
        let coterie = self.coterie.unwrap_or(QuorumSystem::Grid);
        let uses_quorums = matches!(
            algorithm,
            Algorithm::Maekawa | Algorithm::Mutin | Algorithm::Kmex | Algorithm::Gcs
        );
        let spec = SystemSpec {
            algorithm,
            topology,
            l: sl,
            k: sk,
            bounds,
            initial,
            variant: if self.round_trip {
                Variant::Trip
            } else {
                Variant::Corrected
            },
            leader: self.leader.map(Leaders::One),
            coterie: uses_quorums.then_some(coterie),
            mx: matches!(
                algorithm,
                Algorithm::Mutin | Algorithm::Kmex | Algorithm::Gcs
            )
            .then_some(mx),
            maxreq: None,
            migrate_after: None,
        };
        Ok(Plan {
            spec,
            global,
            round_trip: (algorithm == Algorithm::Lkcs && self.leader.is_none()).then_some(inst),
        })
    }

    /// The overrides that do not fit the algorithm or the scope.
    fn option_problems(&self, algorithm: Algorithm, global: bool, t: &Topology) -> Vec<Problem> {
        let mut problems = Vec::new();
        let name = algorithm.name();
        if algorithm.is_global() && !global && !t.is_complete() {
            problems.push(Problem::Quota(Q::GlobalAlgorithmOnLocal {
                algorithm: name.to_string(),
                topology: t.name().to_string(),
            }));
        }
        problems.extend(algorithm.inapplicable(
            &[
                ("coterie", self.coterie.is_some()),
                ("mx", self.mx.is_some()),
                ("leader", self.leader.is_some()),
            ],
            "",
        ));
        if self.round_trip && algorithm != Algorithm::Lkcs {
            problems.push(Problem::Quota(Q::RoundTripNotLkcs {
                algorithm: name.to_string(),
            }));
        }
        if self.round_trip && self.leader.is_some() {
            problems.push(Problem::Quota(Q::RoundTripWithLeader));
        }
        problems
    }
}

/// The problems of an `initially_active` list itself: ids out of range and repeated ids.
fn start_list_problems(ids: &[usize], n: usize) -> Vec<Problem> {
    let mut problems = Vec::new();
    let out: std::collections::BTreeSet<usize> = ids.iter().copied().filter(|&i| i >= n).collect();
    if !out.is_empty() {
        problems.push(Problem::Quota(Q::StartOutOfRange {
            members: out.into_iter().collect(),
            n,
        }));
    }
    let mut seen = std::collections::BTreeSet::new();
    let twice: std::collections::BTreeSet<usize> =
        ids.iter().copied().filter(|&i| !seen.insert(i)).collect();
    if !twice.is_empty() {
        problems.push(Problem::Quota(Q::StartRepeats {
            members: twice.into_iter().collect(),
        }));
    }
    problems
}

/// The start used when the user names none (see [`QuotaBuilder::initially_active`]); `None`
/// lets LKCS find one that meets its preconditions.
fn default_start(algorithm: Algorithm, l: &[usize]) -> Option<Vec<CsState>> {
    let n = l.len();
    let first = |m: usize| {
        (0..n)
            .map(|i| if i < m { CsState::InCs } else { CsState::OutCs })
            .collect()
    };
    match algorithm {
        Algorithm::Lkcs => None,
        Algorithm::Lmutin => Some(vec![CsState::InCs; n]),
        Algorithm::Mutin | Algorithm::Gcs => Some(first(l[0])),
        _ => Some(vec![CsState::OutCs; n]),
    }
}

/// Every bound the start breaks, in quota terms.
fn unsafe_start(inst: &Instance, states: &[CsState], global: bool) -> Vec<Problem> {
    let t = inst.topology();
    let mut problems = Vec::new();
    for p in t.processes() {
        let (c, b) = (inst.in_cs_around(states, p), inst.bounds(p));
        if b.l <= c && c <= b.k {
            continue;
        }
        let (side, bound) = if c < b.l {
            (BoundSide::Lower, b.l)
        } else {
            (BoundSide::Upper, b.k)
        };
        problems.push(Problem::Quota(Q::StartBreaks {
            around: (!global).then_some(p.index()),
            active: c,
            side,
            bound,
        }));
        if global {
            break;
        }
    }
    problems
}

impl QuotaBuilder {
    /// A refusal of LKCS with no leader named (the round trip), in quota terms: one line per
    /// cause, naming the members it concerns, and a line with the nearest bounds that are
    /// accepted.
    pub(super) fn lkcs_refusal(&self, e: ConfigError, inst: &Instance) -> ConfigError {
        let t = inst.topology();
        let mut problems = Vec::new();
        for problem in &e.problems {
            // the round trip's reasons: wrapped by the default, bare with `round_trip()`
            let why = match problem {
                Problem::RoundTrip(why) => why.as_ref(),
                // the algorithms' names stay out of a quota's words
                Problem::LeaderRulesNotRun => continue,
                other => other,
            };
            match why {
                // too little room: one line per pair of bounds, naming its members
                Problem::NoRoomToTighten { processes } => {
                    let mut narrow: std::collections::BTreeMap<(usize, usize), Vec<usize>> =
                        Default::default();
                    for &p in processes {
                        let b = inst.bounds(p);
                        narrow.entry((b.l, b.k)).or_default().push(p.index());
                    }
                    problems.extend(narrow.into_iter().map(|((l, k), who)| {
                        Problem::Quota(Q::NoRoom {
                            members: (who.len() != t.len()).then_some(who),
                            l,
                            k,
                        })
                    }));
                }
                // room enough: the refusal is of the start; say it without the layers' names
                other => problems.push(Problem::Quota(Q::StartRefused(Box::new(other.clone())))),
            }
        }
        if problems.is_empty() {
            return e;
        }
        if let Some(better) = self.nearest_accepted(t) {
            problems.push(Problem::Quota(Q::AcceptedInstead(better)));
        }
        ConfigError::new(problems)
    }

    /// The nearest bounds a local quota on `t` accepts, in builder calls: both bounds moved
    /// apart by as little as possible, or one bound alone. `None` for per-member bounds.
    fn nearest_accepted(&self, t: &Topology) -> Option<String> {
        let (Some(l), Some(k), None) = (self.l, self.k, &self.per_member) else {
            return Some(
                "per-member bounds with at most − at least ≥ 3 at the members named, or only lower bounds, or only upper bounds"
                    .into(),
            );
        };
        let largest = t.processes().map(|p| t.degree(p) + 1).max().unwrap_or(1);
        let accepted = |b: QuotaBuilder| b.plan().is_ok_and(|plan| plan.spec.validate().is_ok());
        let bare = |b: &QuotaBuilder| QuotaBuilder {
            l: None,
            k: None,
            initially_active: None,
            ..b.clone()
        };
        let mut offers = Vec::new();
        'both: for d in 1..=6 {
            for dl in 0..=d.min(l.saturating_sub(1)) {
                let (l2, k2) = (l - dl, k + (d - dl));
                if k2 >= largest {
                    continue;
                }
                if accepted(bare(self).between(l2, k2)) {
                    offers.push(format!(".between({l2}, {k2})"));
                    break 'both;
                }
                // the same upper bound, capped by each neighbourhood's size
                let capped: Vec<usize> = t.processes().map(|p| k2.min(t.degree(p) + 1)).collect();
                let per_member = QuotaBuilder {
                    per_member: None,
                    ..bare(self)
                }
                .bounds(vec![l2; t.len()], capped);
                if accepted(per_member) {
                    offers.push(format!(
                        ".bounds(l, k) with at least {l2} and at most {k2} around each member (or its whole neighbourhood where that is smaller)"
                    ));
                    break 'both;
                }
            }
        }
        if accepted(bare(self).at_most(k)) {
            offers.push(format!("only .at_most({k})"));
        }
        if accepted(bare(self).at_least(l)) {
            offers.push(format!("only .at_least({l})"));
        }
        (!offers.is_empty()).then(|| offers.join(", or "))
    }
}

/// LKCS's preconditions in quota terms: a leader with at least 4 neighbours, and
/// k_q − l_q ≥ 3 for every member within two hops of it.
fn lkcs_problems(inst: &Instance, leader: usize) -> Vec<Problem> {
    use crate::algo::lkcs::MIN_LEADER_DEGREE as D;
    let t = inst.topology();
    let slack_problems = |ldr: ProcessId| -> Vec<Problem> {
        let mut by_bounds: std::collections::BTreeMap<(usize, usize), Vec<usize>> =
            Default::default();
        for (q, d) in t.distances(ldr).into_iter().enumerate() {
            let b = inst.all_bounds()[q];
            if d.is_some_and(|d| d <= 2) && b.k < b.l + 3 {
                by_bounds.entry((b.l, b.k)).or_default().push(q);
            }
        }
        by_bounds
            .into_iter()
            .map(|((l, k), members)| {
                Problem::Quota(Q::LeaderSlack {
                    members,
                    leader: ldr.index(),
                    l,
                    k,
                })
            })
            .collect()
    };
    if leader >= t.len() {
        return vec![Problem::Quota(Q::LeaderOutOfRange { leader, n: t.len() })];
    }
    let p = ProcessId::from(leader);
    let mut problems = Vec::new();
    if t.degree(p) < D {
        problems.push(Problem::Quota(Q::LeaderTooFewNeighbours {
            leader,
            degree: t.degree(p),
            needed: D,
        }));
    }
    problems.extend(slack_problems(p));
    problems
}
