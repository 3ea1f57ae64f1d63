//! Typed errors: configuration problems (reported all at once) and calling-convention errors.

use crate::id::ProcessId;
use std::fmt;

#[cfg(feature = "net")]
mod cluster;
mod quota;
#[cfg(feature = "net")]
pub use cluster::ClusterProblem;
pub(crate) use quota::{ids, MemberList};
pub use quota::{BoundSide, QuotaProblem};

/// The most processes a problem names one by one; the rest are counted.
const NAMED_AT_MOST: usize = 8;

/// One thing wrong with a requested configuration. Each displays as one line.
///
/// Match on it with a wildcard arm: new variants may come.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Problem {
    /// The system would have no process.
    ZeroProcesses,
    /// A topology specification could not be understood.
    BadTopology {
        /// The specification as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// An edge names a process that does not exist.
    EdgeOutOfRange {
        /// The edge's endpoints.
        edge: (usize, usize),
        /// The number of processes.
        n: usize,
    },
    /// An edge joins a process to itself.
    SelfLoop(ProcessId),
    /// The graph is not connected.
    Disconnected {
        /// A process that cannot be reached from P0.
        unreachable: ProcessId,
    },
    /// A process's bounds break a precondition of the algorithm.
    Bound {
        /// The process.
        process: ProcessId,
        /// Its lower bound.
        l: usize,
        /// Its upper bound.
        k: usize,
        /// The size of its closed neighbourhood |N_i| + 1.
        closed: usize,
        /// The precondition that fails, in words.
        rule: String,
    },
    /// The initial configuration breaks a process's bounds.
    UnsafeInitial {
        /// The process whose bounds fail.
        process: ProcessId,
        /// The number of processes in the CS in its closed neighbourhood.
        in_cs: usize,
        /// Its lower bound.
        l: usize,
        /// Its upper bound.
        k: usize,
    },
    /// The initial configuration names processes that do not exist (one problem for all of
    /// them).
    InitialOutOfRange {
        /// The first few of them, in the order given.
        first: Vec<usize>,
        /// How many there are.
        count: usize,
        /// The number of processes.
        n: usize,
    },
    /// An initial configuration whose length is not the number of processes.
    InitialLength {
        /// The states given.
        given: usize,
        /// The number of processes.
        n: usize,
    },
    /// No initial configuration meets every bound.
    NoSafeInitial(String),
    /// A coterie (quorum system) breaks a rule.
    Coterie(CoterieProblem),
    /// A quota's builder refuses its options, in the quota's words.
    Quota(QuotaProblem),
    /// A cluster file breaks one of its own rules (with the `net` feature).
    #[cfg(feature = "net")]
    Cluster(ClusterProblem),
    /// An algorithm chosen by name does not keep the bounds asked for (it would drop,
    /// change or tighten one of them).
    Unsolved {
        /// The algorithm chosen.
        algorithm: String,
        /// The bounds it keeps, in words.
        keeps: String,
        /// The bounds asked for, in words.
        asked: String,
        /// The algorithms that keep exactly the bounds asked for.
        solvers: Vec<String>,
    },
    /// A mutual-exclusion object (`--mx`, `mx`) that is not one of those MUTIN(l), kmex and
    /// GCS can run inside.
    UnknownMx {
        /// The name as given.
        given: String,
        /// The names accepted.
        accepted: Vec<String>,
    },
    /// A view (a set of members of a cluster) names a process the cluster does not have.
    UnknownMember {
        /// The process named.
        member: ProcessId,
        /// The number of processes of the cluster.
        n: usize,
    },
    /// A view lists a member twice.
    MemberTwice(ProcessId),
    /// LKCS's round trip cannot tighten the bounds of these processes: it keeps
    /// L_i = l_i + 1 where l_i > 0 and K_i = k_i − 1 where k_i < |N_i| + 1, and needs
    /// L_i < K_i (so k_i − l_i ≥ 3 where both bounds can break).
    NoRoomToTighten {
        /// The processes left with L_i ≥ K_i, by id.
        processes: Vec<ProcessId>,
    },
    /// Why LKCS's round trip refused the instance ([`crate::algo::lkcs::Lkcs::build_default`]); the
    /// reason itself is the inner problem.
    RoundTrip(Box<Problem>),
    /// LKCS's leader rules were not run on an instance the round trip refused: they may take
    /// it but can stall (`docs/lkcs-liveness.md`), so they run only when a leader is named.
    LeaderRulesNotRun,
    /// An option given that the algorithm does not take.
    NotApplicable {
        /// What starts the line (`"quota: "` for a cluster file's quota table), or nothing.
        context: String,
        /// The option as its caller's users write it (`--mx`, `mx`, `coterie`).
        option: String,
        /// The algorithm.
        algorithm: String,
        /// The algorithms that take it.
        takers: Vec<String>,
    },
    /// An algorithm name that names none of the algorithms.
    UnknownAlgorithm {
        /// The name as given.
        given: String,
        /// The names accepted.
        accepted: Vec<String>,
    },
    /// A global algorithm asked to run on a graph that is not complete.
    NeedsCompleteGraph {
        /// The algorithm (or family, e.g. the migrating controller's CDC and DDC).
        algorithm: String,
        /// The topology given.
        topology: String,
        /// Its number of processes.
        n: usize,
    },
    /// A bound the algorithm fixes, asked for otherwise.
    FixedBound {
        /// The algorithm.
        algorithm: String,
        /// The bound it fixes, as an equation (`k_i = |N_i|+1`, `l = 0`).
        fixed: String,
        /// What was asked, or where the other bound applies, in words.
        detail: String,
    },
    /// Bounds given to a mutual exclusion, whose (l, k) = (0, 1) is fixed.
    BoundsNotTaken {
        /// The algorithm.
        algorithm: String,
    },
    /// Per-process bounds given to an algorithm that takes uniform ones only.
    UniformBoundsOnly {
        /// The algorithm.
        algorithm: String,
    },
    /// A bound given both uniformly and as a per-process list.
    BoundGivenTwice {
        /// `l` or `k`.
        bound: String,
    },
    /// A per-process list of bounds whose length is not the number of processes.
    BoundsListLength {
        /// `l` or `k`.
        bound: String,
        /// The values listed.
        given: usize,
        /// The number of processes.
        n: usize,
    },
    /// The round-trip variant asked of an algorithm other than LKCS.
    TripNotLkcs {
        /// The algorithm.
        algorithm: String,
    },
    /// A leader for LKCS's leader rules that is none of `auto`, `all` or a process index.
    UnknownLeader {
        /// The name as given.
        given: String,
    },
    /// A leader named for LKCS's round trip, which has none.
    RoundTripWithLeader,
    /// The printed rule `single-leader` (the automatic leader alone) with a leader named.
    SingleLeaderWithLeader,
    /// Printed rules named with the round-trip variant, which has none.
    PrintedRulesWithTrip,
    /// Printed rules named with the printed variant, which has them all on.
    PrintedRulesWithPrinted {
        /// The algorithm.
        algorithm: String,
        /// Its printed rules with their deviations, on one line.
        rules: String,
    },
    /// Printed rules the algorithm does not have.
    UnknownPrintedRules {
        /// The names given that it does not have.
        names: Vec<String>,
        /// The algorithm.
        algorithm: String,
        /// Its printed rules with their deviations, on one line.
        rules: String,
    },
    /// A migration option given for a mutual-exclusion object that does not migrate.
    MxOption {
        /// The option (`--maxreq`, `--migrate-after`).
        option: String,
        /// The mutual-exclusion object.
        mx: String,
    },
    /// Any other invalid input, described in one line.
    Invalid(String),
    /// The thread runtime would need more threads (one per process, and a watchdog) than a
    /// limit of the operating system leaves room for: starting them would fail, or abort
    /// the whole program.
    TooManyThreads {
        /// The threads the runtime would start.
        asked: usize,
        /// How many more threads the binding limit leaves room for.
        room: usize,
        /// The limit that binds (`vm.max_map_count`, `kernel.threads-max`,
        /// `kernel.pid_max`, `RLIMIT_NPROC` or the cgroup's `pids.max`).
        limit: &'static str,
        /// That limit's value.
        value: u64,
    },
}

/// One way a coterie breaks Definition 3 of the 2019 paper (or the one-quorum-per-process
/// convention of this crate).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CoterieProblem {
    /// The number of quorums is not the number of processes.
    WrongCount {
        /// Quorums given.
        quorums: usize,
        /// Processes.
        n: usize,
    },
    /// A process's quorum is empty (nonemptiness).
    Empty(ProcessId),
    /// A quorum names a process outside `0..n`.
    OutOfRange {
        /// The process whose quorum it is.
        process: ProcessId,
        /// The member named.
        member: usize,
        /// The number of processes.
        n: usize,
    },
    /// A quorum names the same member twice.
    Duplicate {
        /// The process whose quorum it is.
        process: ProcessId,
        /// The member named twice.
        member: ProcessId,
    },
    /// Two quorums share no process (intersection property).
    Disjoint(ProcessId, ProcessId),
    /// One quorum is a proper subset of another (minimality).
    NotMinimal {
        /// The process with the smaller quorum.
        subset: ProcessId,
        /// The process with the larger quorum.
        superset: ProcessId,
    },
    /// An unknown coterie name.
    UnknownName(String),
}

impl fmt::Display for CoterieProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CoterieProblem::WrongCount { quorums, n } => write!(
                f,
                "coterie: {quorums} quorums given for {n} processes (one per process)"
            ),
            CoterieProblem::Empty(p) => write!(f, "coterie: the quorum of {p} is empty"),
            CoterieProblem::OutOfRange { process, member, n } => write!(
                f,
                "coterie: the quorum of {process} names P{member}, but processes are 0..{n}"
            ),
            CoterieProblem::Duplicate { process, member } => {
                write!(f, "coterie: the quorum of {process} names {member} twice")
            }
            CoterieProblem::Disjoint(a, b) => write!(
                f,
                "coterie: the quorums of {a} and {b} do not intersect (intersection property)"
            ),
            CoterieProblem::NotMinimal { subset, superset } => write!(
                f,
                "coterie: the quorum of {subset} is a proper subset of the quorum of {superset} (minimality)"
            ),
            CoterieProblem::UnknownName(name) => write!(
                f,
                "coterie `{name}`: unknown (expected majority or grid)"
            ),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::ZeroProcesses => write!(f, "the system has zero processes"),
            Problem::BadTopology { spec, reason } => write!(f, "topology `{spec}`: {reason}"),
            Problem::EdgeOutOfRange { edge, n } => write!(
                f,
                "edge ({}, {}) names a process outside 0..{n}",
                edge.0, edge.1
            ),
            Problem::SelfLoop(p) => write!(f, "edge ({p}, {p}) is a self-loop"),
            Problem::UnknownMember { member, n } => write!(
                f,
                "{member} is not a member: there are {n} processes (P0..P{})",
                n.saturating_sub(1)
            ),
            Problem::MemberTwice(p) => write!(f, "{p} is listed twice among a view's members"),
            Problem::Disconnected { unreachable } => {
                write!(f, "the graph is not connected: {unreachable} cannot be reached from P0")
            }
            Problem::Bound {
                process,
                l,
                k,
                closed,
                rule,
            } => write!(
                f,
                "{process}: bounds (l={l}, k={k}) with |N|+1={closed} break {rule}"
            ),
            Problem::UnsafeInitial { process, in_cs, l, k } => write!(
                f,
                "initial configuration is unsafe at {process}: {in_cs} in the CS in its closed neighbourhood, outside [{l}, {k}]"
            ),
            Problem::InitialOutOfRange { first, count, n } => {
                let ids: Vec<String> = first.iter().map(|i| format!("P{i}")).collect();
                if *count == 1 {
                    write!(
                        f,
                        "initial configuration names {}, but processes are 0..{n}",
                        ids.join(", ")
                    )
                } else {
                    let more = count.saturating_sub(first.len());
                    let more = if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    };
                    write!(
                        f,
                        "initial configuration names {count} processes that do not exist \
                         ({}{more}): processes are 0..{n}",
                        ids.join(", ")
                    )
                }
            }
            Problem::InitialLength { given, n } => {
                write!(f, "initial configuration has {given} states for {n} processes")
            }
            Problem::NoSafeInitial(why) => write!(f, "no safe initial configuration: {why}"),
            Problem::Coterie(c) => write!(f, "{c}"),
            Problem::Quota(q) => write!(f, "{q}"),
            #[cfg(feature = "net")]
            Problem::Cluster(c) => write!(f, "{c}"),
            Problem::Unsolved {
                algorithm,
                keeps,
                asked,
                solvers,
            } => {
                write!(
                    f,
                    "algorithm {algorithm} keeps {keeps}, not {asked}: it would change the bounds"
                )?;
                if solvers.is_empty() {
                    f.write_str("; no algorithm keeps exactly these bounds")
                } else {
                    write!(f, "; algorithms that keep them: {}", solvers.join(", "))
                }
            }
            Problem::UnknownMx { given, accepted } => write!(
                f,
                "unknown or not yet supported --mx `{given}` (expected one of: {})",
                accepted.join(", ")
            ),
            Problem::NoRoomToTighten { processes } => {
                // the first few by name: every process of a large system can be one
                let named: Vec<String> = processes
                    .iter()
                    .take(NAMED_AT_MOST)
                    .map(|p| p.to_string())
                    .collect();
                let more = match processes.len().saturating_sub(NAMED_AT_MOST) {
                    0 => String::new(),
                    more => format!(" and {more} more"),
                };
                write!(
                    f,
                    "the round trip tightens every side of a bound a move can break; {}{more} \
                     would be left with L_i >= K_i",
                    named.join(", ")
                )
            }
            Problem::RoundTrip(why) => write!(f, "the round trip: {why}"),
            Problem::LeaderRulesNotRun => f.write_str(
                "the leader rules: not run: they may take this instance but can stall \
                 (docs/lkcs-liveness.md); name a leader to run them anyway (--leader auto, \
                 an index or all; leader = ... in a cluster file or a sweep grid)",
            ),
            Problem::NotApplicable {
                context,
                option,
                algorithm,
                takers,
            } => write!(
                f,
                "{context}{option} does not apply to {algorithm}; it applies to {}",
                takers.join(", ")
            ),
            Problem::UnknownAlgorithm { given, accepted } => write!(
                f,
                "unknown algorithm `{given}` (expected one of: {})",
                accepted.join(", ")
            ),
            Problem::NeedsCompleteGraph {
                algorithm,
                topology,
                n,
            } => write!(
                f,
                "{algorithm} is a global algorithm: it needs the complete graph, not {topology} (use complete:{n})"
            ),
            Problem::FixedBound {
                algorithm,
                fixed,
                detail,
            } => write!(f, "{algorithm} fixes {fixed}; {detail}"),
            Problem::BoundsNotTaken { algorithm } => write!(
                f,
                "{algorithm} is mutual exclusion (l = 0, k = 1): bounds do not apply"
            ),
            Problem::UniformBoundsOnly { algorithm } => write!(
                f,
                "{algorithm} takes uniform bounds (--l / --k), not --bounds"
            ),
            Problem::BoundGivenTwice { bound } => write!(
                f,
                "--{bound} and a `{bound}` list in --bounds are exclusive"
            ),
            Problem::BoundsListLength { bound, given, n } => write!(
                f,
                "--bounds lists {given} values of {bound} for {n} processes"
            ),
            Problem::TripNotLkcs { algorithm } => write!(
                f,
                "--variant trip is LKCS's round trip; it does not apply to {algorithm}"
            ),
            Problem::UnknownLeader { given } => write!(
                f,
                "leader `{given}`: expected a process index, `all` or `auto`"
            ),
            Problem::RoundTripWithLeader => {
                f.write_str("the round trip has no leader (leave --leader out)")
            }
            Problem::SingleLeaderWithLeader => f.write_str(
                "--printed-rule single-leader runs the automatic leader alone; with \
                 --leader, leave it out (--leader ID is already a single leader)",
            ),
            Problem::PrintedRulesWithTrip => f.write_str(
                "--printed-rule does not combine with --variant trip (the round trip has no \
                 printed rules)",
            ),
            Problem::PrintedRulesWithPrinted { algorithm, rules } => write!(
                f,
                "--printed-rule switches one printed rule on over the corrected variant and \
                 does not combine with --variant printed (which has them all); {algorithm}'s \
                 rules: {rules}"
            ),
            Problem::UnknownPrintedRules {
                names,
                algorithm,
                rules,
            } => {
                let (s, are) = if names.len() == 1 { ("", "is") } else { ("s", "are") };
                let names: Vec<String> = names.iter().map(|n| format!("`{n}`")).collect();
                write!(
                    f,
                    "--printed-rule{s} {} {are} not among {algorithm}'s printed rules: {rules}",
                    names.join(", ")
                )
            }
            Problem::MxOption { option, mx } => {
                write!(f, "{option} does not apply to --mx {mx}")
            }
            Problem::Invalid(s) => f.write_str(s),
            Problem::TooManyThreads {
                asked,
                room,
                limit,
                value,
            } => write!(
                f,
                "{asked} threads (a member is a thread) are more than this system allows: \
                 {limit} = {value} leaves room for {room} more"
            ),
        }
    }
}

impl std::error::Error for Problem {}

/// Everything wrong with a configuration; never empty. Build one with
/// [`ConfigError::one`] or [`ConfigError::check`].
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ConfigError {
    /// The problems, one per line when displayed.
    pub problems: Vec<Problem>,
}

impl ConfigError {
    /// An error listing `problems` (an empty list becomes one "invalid configuration" problem:
    /// the error is never empty).
    pub fn new(problems: Vec<Problem>) -> Self {
        if problems.is_empty() {
            return ConfigError::one(Problem::Invalid("invalid configuration".into()));
        }
        ConfigError { problems }
    }

    /// An error from a single problem.
    pub fn one(p: Problem) -> Self {
        ConfigError { problems: vec![p] }
    }

    /// `Ok(())` when `problems` is empty, the error otherwise.
    pub fn check(problems: Vec<Problem>) -> Result<(), ConfigError> {
        if problems.is_empty() {
            Ok(())
        } else {
            Err(ConfigError { problems })
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, p) in self.problems.iter().enumerate() {
            if i > 0 {
                writeln!(f)?;
            }
            write!(f, "{p}")?;
        }
        Ok(())
    }
}

impl std::error::Error for ConfigError {}

/// A call that breaks the calling convention (Entry only when OutCS, Exit only when InCS,
/// one sequence at a time).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallError {
    /// `entry` was called while the process is already in the CS.
    AlreadyInCs,
    /// `exit` was called while the process is out of the CS.
    NotInCs,
    /// A sequence is still in progress.
    Busy,
}

impl fmt::Display for CallError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            CallError::AlreadyInCs => "entry called while already in the CS",
            CallError::NotInCs => "exit called while out of the CS",
            CallError::Busy => "a sequence is already in progress",
        })
    }
}

impl std::error::Error for CallError {}
