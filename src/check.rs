//! The exhaustive checker (DESIGN §2.4): every interleaving of message deliveries and client
//! steps on a small instance, over the same sans-IO CS objects the simulator and the runtime
//! drive.
//!
//! Model: every process is an actor wrapping its [`CsObject`]; every ordered pair of
//! processes, self-pairs included, is a link: FIFO by default ([`Network::Fifo`]), or, to
//! find out which algorithm needs FIFO links or at-most-once delivery,
//! [`Network::Unordered`] (any message in flight on a link may be delivered next, each at
//! most once) or [`Network::Duplicating`] (unordered, and a delivered message stays in
//! flight: it may be delivered again any number of times). An action belongs to one
//! process: the delivery of a message of a link `(src, p)` to `p` (on FIFO links its head),
//! or a client step of `p` (starting its Exit or Entry), enabled while `p`'s previous
//! sequence has completed and it has sequences left; so client steps interleave with every
//! delivery. Each process runs `pairs` pairs,
//! which bounds the space. A process may send only within its closed neighbourhood of the
//! instance's topology (the local algorithms' contract; the global ones run on the complete
//! graph): a send outside it is dropped and fails `invariants`.
//!
//! Properties, in every reachable state:
//! - **safety**: l_i ≤ |CS_i| ≤ k_i for every process;
//! - **invariants**: every object's own invariants ([`CsObject::check_invariants`], e.g. an
//!   arbiter's cap), no calling-convention error, no send outside the neighbourhood;
//! - **no deadlock**: a state with nothing in flight (on a [`Network::Duplicating`] network,
//!   where what was sent stays in flight: in which no delivery changes anything) in which
//!   every process is blocked in a pending sequence is a deadlock when some non-empty set of them could change state
//!   together and keep every bound: the specification allows the move, the algorithm never
//!   makes it. A process that has run its pairs stops; the papers' liveness assumes every
//!   process eventually moves again (e.g. an LMUTIN process out of the CS eventually enters
//!   and releases its permissions), so a wait on a stopped process is not reported: a bounded
//!   client cannot tell it from progress that is merely postponed.
//!
//! Liveness on cycles is left to the simulator; the bounded client makes every run finite.
//! On a [`Network::Duplicating`] network the space may still be infinite (a handler that
//! answers every replay with a message carrying a fresh stamp): the budgets
//! ([`CheckConfig::max_states`], [`CheckConfig::max_memory`], [`CheckConfig::max_time`])
//! then end the search with a [`Verdict::Bounded`] verdict, never a proof.
//!
//! # Searches
//!
//! [`Search::Reduced`] (the default) and [`Search::Full`] run an own depth-first explorer:
//! a stack of states and a set of 128-bit state fingerprints. This is hash compaction, a
//! probabilistic method: two distinct states with the same fingerprint would count as one,
//! and the second would go unexplored; with 10^8 states the probability that any two
//! collide is below 10^-20 (about N²/2^129 for N states). It exists because stateright
//! cannot express a partial-order reduction, and it is faster per state: every distinct
//! local state of a process (its object and its client) is stored once, in an arena keyed by
//! its own 128-bit fingerprint (the same kind of bet, over far fewer local states), and a
//! global state is an array of arena indices plus one vector of the messages in flight;
//! each local step (a local state taking one message, or its client step) is computed once
//! and remembered, so the search mostly replays steps instead of cloning and running
//! objects; whether a set of processes in the CS breaks a bound is computed once per set.
//! [`Search::Stateright`] runs the same model under stateright's multi-threaded checker; the
//! unit tests check that it and [`Search::Full`] count the same states.
//!
//! # The partial-order reduction and why it is sound
//!
//! Independence. Two actions of different processes commute whenever both are enabled: each
//! changes only its own process, pops only a link into it and appends only to links out of
//! it, and appending to a non-empty link commutes with popping its head. Neither disables
//! the other. Only an append to an *empty* link can enable an action of another process.
//!
//! Persistent sets. In a state `s`, the search explores only the enabled actions of a set
//! `C` of processes, chosen so that no sequence of actions of the other processes `O` can
//! send into a link `(y, x)`, `y ∈ O`, `x ∈ C`, that is empty in `s`. Then every action of
//! a path of `O` actions commutes with the selected ones, and no action of `C` that is
//! disabled in `s` can become enabled along it (a delivery to `x` needs a message on an
//! empty link, a client step of `x` needs `x` to complete a sequence): the selected set is
//! persistent (Godefroid), equivalently stubborn (Valmari, conditions D1 and D2). `C` is
//! the closure of one process under "an `O` process that may fill an empty link into `C`
//! joins `C`", where "may fill" is over-approximated from an exact *solo* exploration: each
//! process `y` run alone from `s` (its incoming links as they are plus its self-sends; up to
//! 64 steps) yields every process it can send to. An `O` process is *wild* (may send to any
//! neighbour) when its solo exploration ran out of budget or another `O` process may send
//! to it (with a new message its behaviour is no longer the solo one); wildness spreads to
//! the neighbours of wild processes. A process that is not wild can, in any path of `O`
//! actions, only run a prefix of its solo behaviours: by induction on the path, nobody else
//! sends to it, its links keep their heads, and its steps are deterministic in its state and
//! the messages it takes.
//!
//! Visibility. The properties read the *observation*: every process's published state and
//! invariant verdict (safety reads several processes at once). Only an *improving* step
//! needs care: one that moves its process into a published state from which a broken bound
//! could be repaired, or makes failing invariants hold. A move of a process `p` into the CS
//! is *harmless* when every process `i` whose closed neighbourhood holds `p` has l_i = 0
//! (raising |CS_i| cannot repair a broken upper bound), and a move out of it when every such
//! `i` has k_i ≥ |N_i|+1 (lowering |CS_i| cannot repair a broken lower bound): LMUTIN's exits
//! and LMUTEX's entries are harmless, and every move is when l = 0 and k = |N_i|+1. So a
//! *bad* state (a bound broken, or some invariant failing) stays bad when some processes move
//! harmlessly or their invariants fail. A selected set may therefore hold steps that change
//! the observation as long as none improves it. If a selected step is improving, `C` must
//! also take every process that could change its observation in any way before `C` acts
//! (Valmari's condition V): the wild ones and those whose solo exploration changes it. An
//! action's effect on its process's observation is the same in every state an `O` path leads
//! to, since only that process's state and the message it takes matter.
//!
//! Commuting deliveries. A process `p` with several messages waiting often handles them in
//! either order to the same end (a requester counting two grants, an arbiter granting two
//! requests it has room for); the closure takes all of them. The delivery `t` of the head
//! of one link `(x, p)` may then stand for the others. The explorer runs `p` alone from `s`,
//! never taking from link `(x, p)` (its other links as they are plus its self-sends; up to
//! 64 actions), and checks every action `b` it can take from every local state `σ` it
//! reaches: `b` then `t` and `t` then `b` end in the same local state and append the same
//! messages to every link out of `p`; a client step `b` is still enabled after `t`; and `t`
//! does not improve `p`'s observation from `σ`. On the way it notes the processes `p` may
//! send to and the links into `p` that are empty or that `p` may empty. The message `p`
//! would take next from such a link is unknown when another process may append to it. So a
//! process other than `p` that may send to `p` joins a set `C` when its link into `p` is
//! empty or may be emptied. What it may send is its solo behaviour, unless it is wild, and
//! a process `p` may send to counts as wild too. `C` is then closed as above: an outside
//! process that may fill an empty link into `C` joins it. If `p` may send into an empty
//! link into `C`, there is no such set. The selection is `t` with every enabled action of
//! `C`, taken when none of `C`'s actions is improving, no successor is on the stack, and it
//! is smaller than every closure.
//!
//! Why that selection is persistent. Take a path of actions outside it:
//! - the processes of `C` take no action on it: none of theirs is enabled outside the
//!   selection, and nothing fills an empty link into them;
//! - every other process but `p` commutes with `t` and with `C`'s actions (different
//!   processes);
//! - `p` takes only messages already in its links when the path starts, since nobody can
//!   put a message where it would take it next. So its actions are among those checked,
//!   each commuting with `t` where it is taken;
//! - `t` stays enabled, since nobody else takes from link `(x, p)`.
//!
//! The argument below holds with one change: a path `w` with no selected action may hold
//! actions of `p`. `t` still commutes to its front, and `t·w` ends in `u` with `t` taken
//! from `p`'s local state in `u`, one of the checked ones, from which `t` does not improve
//! the observation; so that end is bad too. What the commuting deliveries save is measured
//! in docs/checker.md ("Searches").
//!
//! Cycles. A selection with a successor on the depth-first stack is replaced by every enabled
//! action (the stack proviso), so no action is ignored around a cycle. (It never fired on
//! the LMUTIN instances measured, path:4 to ring:4, nor on CDC with two pairs: their spaces
//! look acyclic, but the search does not rely on it.) Every cycle of the reduced graph then
//! holds a fully expanded state: the first state of the cycle the search meets is still on
//! the stack when the last one, whose successor it is, is expanded.
//!
//! Why bad states are found. Let `w` be a path of the full space from an explored state `s`
//! (every property holds) to a bad state `u`, and `T` the enabled actions of `C` selected in
//! `s`. If `w` holds an action of `T`, the first one commutes to the front of `w`, and what
//! is left is a shorter path from its successor. Otherwise every action of `w` belongs to
//! `O` (none of `C` can be enabled along it), and any `t ∈ T` taken first leaves `w`
//! executable: `t·w` ends in `u` changed only in `t`'s process `x` (its invariants held in
//! `u`, as in `s`). If `t` is not improving, that end is bad too, and the search has taken
//! `t`, with a path as long as `w` left; if `t` is improving, condition V keeps every action
//! of `w` from changing the observation, so `u` would look like `s`, which is not bad. A
//! chain of steps of the second kind never shortens the path, but it cannot go on for ever:
//! the state space is finite, and on a cycle it meets a fully expanded state, where `w`'s
//! first action is selected. By induction on the length of `w`, the reduced search reaches
//! a bad state whenever one is reachable. Terminal states (deadlock candidates) need no
//! visibility: at a terminal `u`, `w` must hold an action of `T`, since one left out would
//! still be enabled at its end; so persistent sets alone reach every reachable terminal
//! state.
//!
//! What the reduced search preserves is thus weaker than every observation: for every
//! reachable observation it reaches one at least as bad (each process with the same
//! published state or moved harmlessly, its invariants the same or failing), and every
//! terminal state. (Treating every change of the observation as visible, as the search did
//! first, preserves every observation; the relaxation visits 7 % fewer states on complete:3
//! with l = 1, 21 % fewer with l = 0, and 37 % fewer on ring:4 with l = 0 from in:0,1,2 and
//! in:0,1,2,3.) Among the candidate sets (one
//! closure per process with an enabled action), the search takes the one with the fewest
//! enabled actions. The unit tests compare the reduced and the full search on small
//! instances: every observation of the full search is dominated by one of the reduced
//! search, and the terminal states are the same.
//!
//! # Networks that are not FIFO
//!
//! The argument above rests on FIFO links twice: a process's solo exploration follows each
//! incoming link in its one order, and only an append to an *empty* link enables a new
//! action. Without FIFO every message in flight is an action of its receiver, so every
//! append enables one, the closure would have to take every process that may send into `C`
//! at all, and the solo exploration would have to follow every delivery order (on a
//! duplicating network: every replay, without end). That adaptation is not made: on
//! [`Network::Unordered`] and [`Network::Duplicating`] networks [`Search::Reduced`] runs as
//! [`Search::Full`] (every reachable state), which needs no argument. The messages in flight
//! on a link are then kept sorted (a multiset, on a duplicating network a set), so two
//! states that differ only in the order of a link's messages are one state.
//!
//! Symmetry reduction is not used: every algorithm here breaks ties between equal clocks by
//! process id, so permuting ids does not map behaviours onto behaviours, and a reduction
//! would be unsound.

mod actor_model;
mod explore;

use crate::config::Instance;
use crate::cs::{CsObject, CsState, Sequence};
use serde::Serialize;
use std::time::{Duration, Instant};

/// The largest system [`check`] explores; beyond it the state space is out of reach anyway.
pub const MAX_CHECK_PROCESSES: usize = 12;

/// Checker settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckConfig {
    /// Pairs each process runs.
    pub pairs: usize,
    /// Stop after generating this many states, duplicates included (the result is then a
    /// bounded check; with [`Search::Reduced`] only the successors along the selected
    /// actions are generated); `None` explores everything.
    pub max_states: Option<usize>,
    /// Stop before the search's memory could grow past this many bytes (the result is then
    /// a bounded check, [`Limit::Memory`]). Counted by capacity: the visited fingerprints,
    /// the arena of local states with its remembered steps, the memos, and the depth-first
    /// stack with every successor and message vector its frames hold, plus the next growth
    /// step of every table close to growing (a table that doubles holds its old and new
    /// buckets at once), checked before every state is expanded. What a local state or a
    /// message holds on the heap is counted only with [`CheckConfig::count_resident`].
    /// `None`: no limit. Enforced by the own explorer ([`Search::Reduced`],
    /// [`Search::Full`]), not by [`Search::Stateright`].
    pub max_memory: Option<usize>,
    /// Also count, against [`CheckConfig::max_memory`], how far the process's resident memory
    /// (Linux: `VmRSS` in `/proc/self/status`, read every 2^12 new states) has grown since
    /// the search started beyond what the tables account for: the heap inside local states
    /// and messages, the allocator's overhead. The budget then bounds the process's growth,
    /// but another thread's allocations count too, and where the stop falls depends on the
    /// allocator: for a process that runs one search at a time (`lkcs check` sets it).
    pub count_resident: bool,
    /// Stop once the search has run this long (the result is then a bounded check,
    /// [`Limit::Time`]); `None`: no limit. Enforced by the own explorer, checked every 1,024
    /// generated states, not by [`Search::Stateright`].
    pub max_time: Option<Duration>,
    /// The links' delivery discipline.
    pub network: Network,
    /// Worker threads of the [`Search::Stateright`] search (the own explorer runs on the
    /// calling thread; run several checks in parallel instead).
    pub threads: usize,
    /// How the state space is searched.
    pub search: Search,
}

/// How [`check`] searches the state space. Every search checks the same properties on the
/// same model; they differ in which states they visit.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum Search {
    /// The own depth-first explorer with the partial-order reduction: a subset of the
    /// reachable states that still contains every reachable observation (published states
    /// and invariants) and every reachable terminal state (see the module doc). On a
    /// [`Network`] that is not FIFO it runs as [`Search::Full`].
    #[default]
    Reduced,
    /// The own depth-first explorer without reduction: every reachable state.
    Full,
    /// stateright's multi-threaded depth-first checker, without reduction: every reachable
    /// state (the same count as [`Search::Full`]); kept as the reference the own explorer is
    /// validated against. It does not refuse sends outside the sender's neighbourhood.
    Stateright,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig {
            pairs: 1,
            max_states: None,
            max_memory: None,
            count_resident: false,
            max_time: None,
            network: Network::default(),
            threads: std::thread::available_parallelism().map_or(1, usize::from),
            search: Search::default(),
        }
    }
}

/// How the links between processes deliver messages (see the module doc).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub enum Network {
    /// Every link delivers its messages in the order they were sent, each once.
    #[default]
    Fifo,
    /// Any message in flight on a link may be delivered next; each is delivered at most once.
    Unordered,
    /// Any message in flight on a link may be delivered next, and a delivered message stays
    /// in flight: it may be delivered again any number of times.
    Duplicating,
}

impl Network {
    /// Every network, FIFO first.
    pub const ALL: [Network; 3] = [Network::Fifo, Network::Unordered, Network::Duplicating];

    /// Its name on the command line: `fifo`, `unordered` or `duplicating`.
    pub fn name(self) -> &'static str {
        match self {
            Network::Fifo => "fifo",
            Network::Unordered => "unordered",
            Network::Duplicating => "duplicating",
        }
    }

    /// The network named `name` (see [`Network::name`]), if any.
    pub fn parse(name: &str) -> Option<Network> {
        Network::ALL.into_iter().find(|n| n.name() == name)
    }
}

impl std::fmt::Display for Network {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The checker's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Every reachable state satisfies every property.
    Proved,
    /// A budget ran out first ([`CheckReport::stopped_by`] says which): no violation among
    /// the states explored (a depth-first exploration, so the unexplored part lies off the
    /// explored paths).
    Bounded,
    /// A property fails; the counterexample leads to it.
    Violated {
        /// The property that fails.
        property: String,
    },
}

/// The outcome of an exhaustive check.
#[derive(Clone, Debug, Serialize)]
pub struct CheckReport {
    /// The verdict.
    pub verdict: Verdict,
    /// Unique states explored.
    pub states: usize,
    /// The longest path explored.
    pub max_depth: usize,
    /// Wall-clock time of the exploration.
    pub elapsed: Duration,
    /// For a violation: the steps from the initial state, one line each.
    pub counterexample: Vec<String>,
    /// For a bounded check: the budget that ran out.
    pub stopped_by: Option<Limit>,
}

/// How far a running search has got (see [`check_with_progress`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Progress {
    /// Unique states explored so far.
    pub states: usize,
    /// States generated so far, duplicates included (what [`CheckConfig::max_states`]
    /// counts).
    pub generated: usize,
    /// The longest path so far.
    pub max_depth: usize,
    /// Bytes of the explorer's tables, as [`CheckConfig::max_memory`] counts them.
    pub memory: usize,
}

/// A budget that stops a search before it is complete.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub enum Limit {
    /// [`CheckConfig::max_states`]: the states generated.
    States,
    /// [`CheckConfig::max_memory`]: the bytes of the explorer's tables.
    Memory,
    /// [`CheckConfig::max_time`]: the wall-clock time of the search.
    Time,
}

impl CheckReport {
    /// Whether the check found no violation (proved or bounded).
    pub fn ok(&self) -> bool {
        !matches!(self.verdict, Verdict::Violated { .. })
    }

    /// Unique states explored per second.
    pub fn states_per_second(&self) -> f64 {
        self.states as f64 / self.elapsed.as_secs_f64().max(1e-9)
    }
}

/// A counterexample: the published states along the path, each with the step taken from it
/// (none after the last state).
type Path = Vec<(Vec<CsState>, Option<PathStep>)>;

/// One step of a counterexample.
#[derive(Clone, Debug)]
enum PathStep {
    /// A process's client starts its next sequence.
    Client(usize),
    /// A message is delivered.
    Deliver { src: usize, dst: usize, msg: String },
}

/// How a search ended.
enum Outcome {
    /// Every state was explored.
    Complete,
    /// A budget ran out.
    Bounded(Limit),
    /// A property fails at the end of the path.
    Violated { property: &'static str, path: Path },
}

/// Whether a state in which nothing is enabled and every process is blocked in a pending
/// sequence, with published states `states`, is a deadlock: some non-empty set of processes
/// could change state together and keep every bound.
fn deadlocked(instance: &Instance, states: &[CsState]) -> bool {
    let n = states.len();
    let Some(subsets) = 1u64.checked_shl(n as u32) else {
        return false; // beyond MAX_CHECK_PROCESSES: not evaluated
    };
    (1..subsets).any(|mask| {
        let mut moved = states.to_vec();
        for (p, s) in moved.iter_mut().enumerate() {
            if mask & (1 << p) != 0 {
                *s = !*s;
            }
        }
        instance.violations(&moved).is_empty()
    })
}

/// Bytes of memory this process may still use, on Linux: the least of the system's
/// available memory (`MemAvailable` in `/proc/meminfo`), what the address-space limit
/// (`RLIMIT_AS`, the soft limit in `/proc/self/limits`) leaves beside the process's current
/// virtual size (`VmSize`), and what the memory limit of the process's cgroup leaves beside
/// the cgroup's current use (v2: `memory.max` and `memory.current`; v1:
/// `memory.limit_in_bytes` and `memory.usage_in_bytes`). `None` where none can be read.
/// A default for [`CheckConfig::max_memory`] is a fraction of it (`lkcs check` takes three
/// quarters).
pub fn memory_limit() -> Option<usize> {
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let number = |text: Option<String>| -> Option<usize> { text?.trim().parse().ok() };
    // a line "Name: value [kB]" of a /proc file, in bytes
    let field = |text: &str, name: &str| -> Option<usize> {
        let line = text.lines().find(|l| l.starts_with(name))?;
        let kib: usize = line[name.len()..].split_whitespace().next()?.parse().ok()?;
        kib.checked_mul(1024)
    };
    let mut limits: Vec<usize> = Vec::new();
    if let Some(info) = read("/proc/meminfo") {
        limits.extend(field(&info, "MemAvailable:"));
    }
    if let Some(text) = read("/proc/self/limits") {
        let soft = text
            .lines()
            .find(|l| l.starts_with("Max address space"))
            .and_then(|l| l["Max address space".len()..].split_whitespace().next())
            .and_then(|v| v.parse::<usize>().ok());
        if let Some(soft) = soft {
            let used = read("/proc/self/status")
                .and_then(|s| field(&s, "VmSize:"))
                .unwrap_or(0);
            limits.push(soft.saturating_sub(used));
        }
    }
    // cgroup v2: the process's own group, then the root of the mount
    let group = read("/proc/self/cgroup").and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("0::").map(|p| p.trim().to_string()))
    });
    let mut dirs: Vec<String> = group.iter().map(|g| format!("/sys/fs/cgroup{g}")).collect();
    dirs.push("/sys/fs/cgroup".to_string());
    let v2 = dirs.iter().find_map(|d| {
        let max = number(read(&format!("{d}/memory.max")))?;
        let current = number(read(&format!("{d}/memory.current"))).unwrap_or(0);
        Some(max.saturating_sub(current))
    });
    let v1 = || {
        let max = number(read("/sys/fs/cgroup/memory/memory.limit_in_bytes"))?;
        let used = number(read("/sys/fs/cgroup/memory/memory.usage_in_bytes")).unwrap_or(0);
        // an unlimited v1 group reads as a huge page-aligned number
        (max < 1 << 60).then(|| max.saturating_sub(used))
    };
    limits.extend(v2.or_else(v1));
    limits.into_iter().min()
}

/// Explores every interleaving of the system and checks the properties. `procs[i]` must be
/// process `i`; `instance` gives the bounds.
///
/// A mismatched system (see [`crate::cs::check_system`]) or one of more than
/// [`MAX_CHECK_PROCESSES`] processes is not explored: the verdict is `Violated` with property
/// `setup: ...`.
pub fn check<A: CsObject>(instance: &Instance, procs: Vec<A>, cfg: &CheckConfig) -> CheckReport {
    check_with_progress(instance, procs, cfg, &mut |_| {})
}

/// [`check`], calling `progress` every 2^16 generated states of the own explorer
/// ([`Search::Reduced`], [`Search::Full`]; [`Search::Stateright`] never calls it).
pub fn check_with_progress<A: CsObject>(
    instance: &Instance,
    procs: Vec<A>,
    cfg: &CheckConfig,
    progress: &mut dyn FnMut(&Progress),
) -> CheckReport {
    let setup = crate::cs::check_system(instance, &procs).and_then(|()| {
        if procs.len() > MAX_CHECK_PROCESSES {
            Err(format!("more than {MAX_CHECK_PROCESSES} processes"))
        } else {
            Ok(())
        }
    });
    if let Err(why) = setup {
        return CheckReport {
            verdict: Verdict::Violated {
                property: format!("setup: {why}"),
            },
            states: 0,
            max_depth: 0,
            elapsed: Duration::ZERO,
            counterexample: Vec::new(),
            stopped_by: None,
        };
    }
    let sequences = cfg.pairs.saturating_mul(2);
    let start = Instant::now();
    let (outcome, states, max_depth) = match cfg.search {
        Search::Stateright => actor_model::search(instance, procs, sequences, cfg),
        Search::Reduced | Search::Full => {
            // the reduction's argument needs FIFO links (see the module doc)
            let reduce = cfg.search == Search::Reduced && cfg.network == Network::Fifo;
            let explorer = explore::Explorer::new(
                instance,
                sequences,
                reduce,
                cfg.max_states.map(|m| m.max(1)),
                None,
            )
            .with_network(cfg.network)
            .with_memory_budget(cfg.max_memory, cfg.count_resident)
            .with_deadline(cfg.max_time.map(|t| (start, t)))
            .with_progress(Some(progress));
            let (outcome, stats) = explorer.run(procs);
            (outcome, stats.unique, stats.max_depth)
        }
    };
    let elapsed = start.elapsed();
    let stopped_by = match outcome {
        Outcome::Bounded(limit) => Some(limit),
        _ => None,
    };
    let (verdict, counterexample) = match outcome {
        Outcome::Complete => (Verdict::Proved, Vec::new()),
        Outcome::Bounded(_) => (Verdict::Bounded, Vec::new()),
        Outcome::Violated { property, path } => (
            Verdict::Violated {
                property: property.to_string(),
            },
            describe(instance, path),
        ),
    };
    CheckReport {
        verdict,
        states,
        max_depth,
        elapsed,
        counterexample,
        stopped_by,
    }
}

fn describe(instance: &Instance, path: Path) -> Vec<String> {
    let mut lines = Vec::new();
    let mut prev: Option<Vec<CsState>> = None;
    for (i, (now, step)) in path.into_iter().enumerate() {
        if let Some(before) = &prev {
            for (p, (a, b)) in before.iter().zip(&now).enumerate() {
                if a != b {
                    lines.push(format!("      P{p} is now {b:?}"));
                }
            }
        }
        if i == 0 {
            lines.push(format!("initial: {}", crate::config::format_initial(&now)));
        }
        match step {
            Some(PathStep::Deliver { src, dst, msg }) => {
                lines.push(format!("{:>4}. P{src} -> P{dst}: {msg}", i + 1));
            }
            Some(PathStep::Client(p)) => {
                let seq = Sequence::leaving(now[p]);
                lines.push(format!("{:>4}. P{p} starts its {seq:?}-Sequence", i + 1));
            }
            None => {}
        }
        prev = Some(now);
    }
    if let Some(last) = prev {
        for v in instance.violations(&last) {
            // the end state of a counterexample is not the initial configuration
            lines.push(match v {
                crate::error::Problem::UnsafeInitial {
                    process,
                    in_cs,
                    l,
                    k,
                } => format!(
                    "violated: safety at {process}: {in_cs} in the CS in its closed \
                     neighbourhood, outside [{l}, {k}]"
                ),
                other => format!("violated: {other}"),
            });
        }
    }
    lines
}

#[cfg(test)]
mod tests {
    /// The rules of errata lmutin-1 to lmutin-4 (lmutin-5's messages multiply the states:
    /// docs/checker.md); these tests measure the search, not that rule.
    const PAPER: LmutinRules = LmutinRules {
        hold_and_wait: true,
        ..LmutinRules::CORRECTED
    };
    use super::explore::{Explorer, View};
    use super::*;
    use crate::algo::lmutin::{lmutex_system, Lmutin, LmutinRules};
    use crate::topology::Topology;
    use std::collections::BTreeSet;

    /// What a search saw: every observation (published states and invariant verdicts) and
    /// the published states of every terminal state, with the outcome.
    #[derive(Debug, PartialEq, Eq)]
    struct Seen {
        observations: BTreeSet<Vec<(CsState, bool)>>,
        terminal: BTreeSet<Vec<CsState>>,
        complete: bool,
        unique: usize,
        /// States expanded along a commuting delivery.
        commuting: usize,
    }

    fn seen<A: CsObject>(instance: &Instance, procs: Vec<A>, reduce: bool) -> Seen {
        let (mut observations, mut terminal) = (BTreeSet::new(), BTreeSet::new());
        let mut visit = |s: &View<'_, A>| {
            observations.insert(s.observation());
            if s.quiet() {
                terminal.insert(s.cs_states());
            }
        };
        let explorer = Explorer::new(instance, 2, reduce, None, Some(&mut visit));
        let (outcome, stats) = explorer.run(procs);
        Seen {
            observations,
            terminal,
            complete: matches!(outcome, Outcome::Complete),
            unique: stats.unique,
            commuting: stats.commuting,
        }
    }

    /// Every observation the full search sees is dominated by one the reduced search sees
    /// (per process: the same published state or one reached by a harmless move; invariants
    /// the same or failing), the reduced search sees nothing the full one does not, and both
    /// see the same terminal states.
    fn assert_preserved(instance: &Instance, full: &Seen, reduced: &Seen, what: &str) {
        assert!(full.complete && reduced.complete, "{what}");
        assert!(reduced.unique < full.unique, "{what}");
        assert!(reduced.observations.is_subset(&full.observations), "{what}");
        assert_eq!(full.terminal, reduced.terminal, "{what}");
        let harmless = super::explore::harmless_moves(instance);
        let dominates = |bad: &[(CsState, bool)], o: &[(CsState, bool)]| {
            bad.iter()
                .zip(o)
                .zip(&harmless)
                .all(|((&(c2, ok2), &(c, ok)), h)| (c2 == c || h.allows(c2)) && (ok || !ok2))
        };
        for o in &full.observations {
            assert!(
                reduced.observations.iter().any(|r| dominates(r, o)),
                "{what}: {o:?} not dominated"
            );
        }
    }

    /// The reduction visits fewer states but, for every observation of the full search, one
    /// at least as bad, and every terminal state: LMUTIN and LMUTEX on `spec`, every bound
    /// and safe start when `every_start`, else l = 1 and k = 1 from one start. Returns how
    /// many (full, reduced) pairs it compared.
    fn reduction_preserves(spec: &str, every_start: bool) -> usize {
        let mut pairs = 0;
        let t = Topology::parse(spec).unwrap();
        let n = t.len();
        let ls = if every_start { 0..=1 } else { 1..=1 };
        for l in ls {
            let inst = Lmutin::instance(&t, &vec![l; n]).unwrap();
            let starts = inst.safe_configurations().expect("small instance");
            let take = if every_start { starts.len() } else { 1 };
            for init in starts.into_iter().take(take) {
                let (inst, procs) = Lmutin::system(&t, &vec![l; n], &init, PAPER).unwrap();
                let full = seen(&inst, procs.clone(), false);
                let reduced = seen(&inst, procs, true);
                assert_preserved(&inst, &full, &reduced, &format!("{spec} l={l} {init:?}"));
                pairs += 1;
            }
        }
        let ks = if every_start { 1..=2 } else { 1..=1 };
        for k in ks {
            let inst = crate::algo::lmutin::lmutex_instance(&t, &vec![k; n]).unwrap();
            let init = inst.find_safe_initial().unwrap();
            let (inst, procs) = lmutex_system(&t, &vec![k; n], &init, PAPER).unwrap();
            let full = seen(&inst, procs.clone(), false);
            let reduced = seen(&inst, procs, true);
            assert_preserved(&inst, &full, &reduced, &format!("lmutex {spec} k={k}"));
            pairs += 1;
        }
        pairs
    }

    /// The reduction preserves every observation and terminal state on path:3, for every
    /// bound and every safe start (one test per topology, so that they run side by side).
    #[test]
    fn the_reduction_sees_every_observation_and_terminal_state() {
        let pairs = reduction_preserves("path:3", true);
        assert!(pairs > 11, "{pairs}");
    }

    /// As above, on complete:3 with l = 1 and k = 1 from one start.
    #[test]
    fn the_reduction_sees_every_observation_and_terminal_state_on_a_triangle() {
        assert_eq!(reduction_preserves("complete:3", false), 2);
    }

    /// As above, on star:4 with l = 1 and k = 1 from one start.
    #[test]
    fn the_reduction_sees_every_observation_and_terminal_state_on_a_star() {
        assert_eq!(reduction_preserves("star:4", false), 2);
    }

    /// As above with the commuting deliveries at work: LKCS's round trip on path:3, the two
    /// instances it takes with the ends at (0, 2) and the centre at (0, 3) or (1, 3), from
    /// the start the build picks.
    #[test]
    fn the_reduction_sees_every_observation_and_terminal_state_of_the_round_trip() {
        use crate::algo::lkcs::{Leaders, Lkcs, LkcsRules};
        let t = Topology::path(3).unwrap();
        for l in [[0, 0, 0], [0, 1, 0]] {
            let inst = Lkcs::instance(&t, &l, &[2, 3, 2]).unwrap();
            let sys = Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::TRIP).unwrap();
            let full = seen(&sys.instance, sys.procs.clone(), false);
            let reduced = seen(&sys.instance, sys.procs, true);
            assert!(
                reduced.commuting > 0,
                "l={l:?}: no commuting delivery was taken, so this tests nothing new"
            );
            assert_preserved(&sys.instance, &full, &reduced, &format!("trip l={l:?}"));
        }
    }

    /// The own explorer without reduction and stateright explore the same model: the same
    /// number of unique states and the same verdict.
    #[test]
    fn the_full_search_counts_what_stateright_counts() {
        for (spec, l) in [("path:3", 1), ("complete:3", 1), ("path:3", 0)] {
            let t = Topology::parse(spec).unwrap();
            let inst = Lmutin::instance(&t, &[l; 3]).unwrap();
            let init = inst.find_safe_initial().unwrap();
            let (inst, procs) = Lmutin::system(&t, &[l; 3], &init, PAPER).unwrap();
            let run = |search| {
                let cfg = CheckConfig {
                    search,
                    threads: 1,
                    ..CheckConfig::default()
                };
                check(&inst, procs.clone(), &cfg)
            };
            let (full, sr) = (run(Search::Full), run(Search::Stateright));
            assert_eq!(full.verdict, Verdict::Proved, "{spec} l={l}");
            assert_eq!(sr.verdict, Verdict::Proved, "{spec} l={l}");
            assert_eq!(full.states, sr.states, "{spec} l={l}");
        }
    }

    /// The 1-LMUTIN triangle the budget tests search, from P0 in the CS.
    fn budget_model() -> (Instance, Vec<Lmutin>) {
        let t = Topology::complete(3).unwrap();
        let init = [CsState::InCs, CsState::OutCs, CsState::OutCs];
        Lmutin::system(&t, &[1; 3], &init, PAPER).unwrap()
    }

    /// A memory budget below what `search` needs stops it with a bounded verdict that names
    /// the budget, after fewer states; a budget above it changes nothing.
    fn a_memory_budget_bounds(search: Search) {
        let (inst, procs) = budget_model();
        let run = |max_memory| {
            let cfg = CheckConfig {
                search,
                max_memory,
                ..CheckConfig::default()
            };
            check(&inst, procs.clone(), &cfg)
        };
        let free = run(None);
        assert_eq!((&free.verdict, free.stopped_by), (&Verdict::Proved, None));
        let roomy = run(Some(1 << 30));
        assert_eq!((&roomy.verdict, roomy.stopped_by), (&Verdict::Proved, None));
        assert_eq!(roomy.states, free.states);
        let tight = run(Some(4 << 20));
        assert_eq!(
            (&tight.verdict, tight.stopped_by),
            (&Verdict::Bounded, Some(Limit::Memory)),
            "{search:?}"
        );
        assert!(
            tight.states > 10_000 && tight.states < free.states / 2,
            "{search:?}: {} of {}",
            tight.states,
            free.states
        );
    }

    /// [`a_memory_budget_bounds`] for the reduced search, and a state budget stops a search
    /// naming the states as its limit.
    #[test]
    fn a_memory_budget_bounds_the_search_and_a_generous_one_changes_nothing() {
        a_memory_budget_bounds(Search::Reduced);
        let (inst, procs) = budget_model();
        let bounded = check(
            &inst,
            procs,
            &CheckConfig {
                max_states: Some(1000),
                ..CheckConfig::default()
            },
        );
        assert_eq!(bounded.stopped_by, Some(Limit::States));
    }

    /// [`a_memory_budget_bounds`] for the full search (a test of its own, so that the two
    /// run side by side).
    #[test]
    fn a_memory_budget_bounds_the_full_search_and_a_generous_one_changes_nothing() {
        a_memory_budget_bounds(Search::Full);
    }

    /// The progress callback sees every 2^16-th generated state of the own explorer, with
    /// unique-state counts that only grow and end at most at the report's, and tables of at
    /// least 16 bytes per state.
    #[test]
    fn progress_reports_grow_and_stay_within_the_final_counts() {
        let t = Topology::complete(3).unwrap();
        let init = [CsState::InCs, CsState::OutCs, CsState::OutCs];
        let (inst, procs) = Lmutin::system(&t, &[1; 3], &init, PAPER).unwrap();
        let mut seen: Vec<Progress> = Vec::new();
        let report = check_with_progress(&inst, procs, &CheckConfig::default(), &mut |p| {
            seen.push(*p)
        });
        assert_eq!(report.verdict, Verdict::Proved);
        assert!(seen.len() >= 4, "{}", seen.len());
        for (i, p) in seen.iter().enumerate() {
            assert_eq!(p.generated, (i + 1) << 16);
            assert!(
                p.states <= p.generated && p.states <= report.states,
                "{p:?}"
            );
            assert!(
                p.memory > 16 * p.states && p.max_depth <= report.max_depth,
                "{p:?}"
            );
        }
        assert!(seen.windows(2).all(|w| w[0].states <= w[1].states));
    }
}
