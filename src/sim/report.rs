//! What a simulation is told ([`SimConfig`], [`Delay`], [`Workload`]) and what it answers
//! ([`SimReport`], [`Violation`]).

use super::*;

/// The longest message delay (and think time) a simulation accepts, in time units.
pub const MAX_DELAY: u64 = 1_000_000_000;

/// Message delays.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delay {
    /// Every message, self-addressed ones too, takes one time unit.
    Unit,
    /// Each message takes a uniformly drawn delay in `min..=max` (FIFO per link still holds).
    Uniform {
        /// The shortest delay.
        min: u64,
        /// The longest delay.
        max: u64,
    },
}

impl Delay {
    /// One message's delay: 1, or a uniform draw from `rng` (a unit delay draws nothing).
    pub(super) fn draw(self, rng: &mut ChaCha8Rng) -> u64 {
        match self {
            Delay::Unit => 1,
            Delay::Uniform { min, max } => rng.random_range(min..=max),
        }
    }

    /// Parses `unit` or `uniform:A:B`.
    pub fn parse(s: &str) -> Result<Delay, ConfigError> {
        let bad = |why: &str| ConfigError::one(Problem::Invalid(format!("delay `{s}`: {why}")));
        if s == "unit" {
            return Ok(Delay::Unit);
        }
        let rest = s
            .strip_prefix("uniform:")
            .ok_or_else(|| bad("expected unit or uniform:A:B"))?;
        let (a, b) = rest
            .split_once(':')
            .ok_or_else(|| bad("expected uniform:A:B"))?;
        let (min, max) = (
            a.parse()
                .map_err(|_| bad("A is not a non-negative integer"))?,
            b.parse()
                .map_err(|_| bad("B is not a non-negative integer"))?,
        );
        if min > max {
            return Err(bad("A must not exceed B"));
        }
        if max > MAX_DELAY {
            return Err(bad(&format!("B must not exceed {MAX_DELAY}")));
        }
        Ok(Delay::Uniform { min, max })
    }
}

impl fmt::Display for Delay {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Delay::Unit => f.write_str("unit"),
            Delay::Uniform { min, max } => write!(f, "uniform:{min}:{max}"),
        }
    }
}

/// Who moves when.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Workload {
    /// Every process cycles Exit/Entry after seeded think times.
    Concurrent,
    /// One sequence at a time in the whole system (the no-contention best case).
    Sequential,
}

impl Workload {
    /// Parses `concurrent` or `sequential`.
    pub fn parse(s: &str) -> Result<Workload, ConfigError> {
        match s {
            "concurrent" => Ok(Workload::Concurrent),
            "sequential" => Ok(Workload::Sequential),
            _ => Err(ConfigError::one(Problem::Invalid(format!(
                "workload `{s}`: expected concurrent or sequential"
            )))),
        }
    }
}

impl fmt::Display for Workload {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Workload::Concurrent => "concurrent",
            Workload::Sequential => "sequential",
        })
    }
}

/// Simulation settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimConfig {
    /// The seed of every random choice.
    pub seed: u64,
    /// Pairs every process must complete.
    pub pairs: usize,
    /// Message delays.
    pub delay: Delay,
    /// Who moves when.
    pub workload: Workload,
    /// Concurrent workload: think times are drawn from `0..=think_max`.
    pub think_max: u64,
    /// Give up (and report the run as stalled) after this many events.
    pub max_events: u64,
    /// How many of the last events the trace keeps (`usize::MAX` keeps all).
    pub trace_capacity: usize,
    /// Members that stop for good after their first completed pair (`lkcs simulate
    /// --stop`): their application makes no further call and they stay in their state,
    /// while their process goes on handling messages, as a member whose worker returned.
    /// The run then judges the others ([`SimReport::failure_locality`],
    /// [`SimReport::starved`]). Concurrent workload only (the sequential workload's helper
    /// moves would move a stopped member): with the sequential one the run is not made.
    pub stop: Vec<ProcessId>,
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            seed: 0,
            pairs: 1,
            delay: Delay::Unit,
            workload: Workload::Concurrent,
            think_max: 4,
            max_events: 200_000_000,
            trace_capacity: 200,
            stop: Vec::new(),
        }
    }
}

/// A broken bound or invariant seen by the observer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    /// Simulated time.
    pub time: u64,
    /// The index of the event after which it was seen.
    pub event: u64,
    /// What broke.
    pub description: String,
}

/// The outcome and measurements of one simulation run.
#[derive(Clone, Debug, Serialize)]
pub struct SimReport {
    /// Number of processes.
    pub processes: usize,
    /// Pairs asked for: `processes × pairs`.
    pub pairs_requested: usize,
    /// Pairs completed (in the concurrent workload, processes that are done keep cycling
    /// while others are not, and in the sequential one helper moves make pairs too, so this
    /// can exceed `pairs_requested`).
    pub pairs_completed: usize,
    /// The pairs completed toward `pairs_requested`: each process's first `pairs` (extra
    /// ones left out). It equals `pairs_requested` exactly when every process completed its
    /// pairs, and then the run is never stalled.
    pub requested_pairs_completed: usize,
    /// Number of broken bounds or invariants seen.
    pub safety_violations: usize,
    /// The first violations seen (at most 100).
    pub violations: Vec<Violation>,
    /// Whether nothing was in flight while a sequence was pending.
    pub deadlock: bool,
    /// Processes with a pending sequence when the deadlock was found.
    pub blocked: Vec<ProcessId>,
    /// Set when the run stopped for another reason (event limit, no safe move).
    pub stalled: Option<String>,
    /// Messages sent in total.
    pub messages: u64,
    /// Messages per completed pair, self-addressed ones included.
    pub messages_per_pair: Stats,
    /// Messages per completed pair, self-addressed ones left out.
    pub remote_messages_per_pair: Stats,
    /// Messages sent by kind.
    pub messages_by_kind: BTreeMap<String, u64>,
    /// `Trigger` messages sent: LKCS's leader nominating a process for the sidetrack (0 for
    /// every other algorithm).
    pub triggers: u64,
    /// Waiting times of completed sequences.
    pub waiting_time: Waiting,
    /// Bounded waiting: the most times any one request (an Exit or Entry sequence, from its
    /// call to its completion, or to the end of the run when it never completed) was
    /// *overtaken*, i.e. a process of its requester's neighbourhood N_i completed a sequence
    /// that it called strictly after the request was called, while the request waited. The
    /// same definition for every algorithm (on a complete graph N_i is every other process);
    /// 0 in the sequential workload, where one sequence runs at a time.
    pub max_overtaken: u64,
    /// The seed.
    pub seed: u64,
    /// Simulated time at the end.
    pub end_time: u64,
    /// Events handled (the helper search's work is not among them: `helper_steps`).
    pub events: u64,
    /// Sequential workload: the configurations the helper search visited, all its searches
    /// together (at most [`HELPER_STEP_LIMIT`]).
    pub helper_steps: u64,
    /// Every completed pair.
    #[serde(skip)]
    pub pairs: Vec<PairRecord>,
    /// The last events, for replay and diagnosis.
    #[serde(skip)]
    pub trace: Vec<String>,
    /// With [`SimConfig::stop`]: the largest hop distance from the nearest stopped member to
    /// a member that did not complete its pairs (0 when every member did). Absent (and not
    /// in the JSON) when nobody stops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub failure_locality: Option<usize>,
    /// With [`SimConfig::stop`]: the members that did not complete their pairs (a stopped
    /// member counts once its first pair completed), each with its distance, whether a bound
    /// holds it and what it waits on. Absent when nobody stops.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub starved: Option<Vec<Starved>>,
    /// A hash of the whole event sequence (every delivery with its message, every begin and
    /// completion, with their times): two runs with the same hash ran the same events in the
    /// same order. FNV-1a over the events' `Hash`, stable across runs and machines of the same
    /// pointer width.
    #[serde(skip)]
    pub trace_hash: u64,
}

impl SimReport {
    /// Safe, no deadlock, not stalled, and every process completed its pairs. With members
    /// stopped ([`SimConfig::stop`]): safe, and every member that did not complete its pairs
    /// held by a bound ([`Starved::held`]) in the configuration the run ended in, whether it
    /// ended in a deadlock or at the event limit (the members that completed their pairs keep
    /// cycling while one starves, as in every concurrent run).
    pub fn ok(&self) -> bool {
        if let Some(starved) = &self.starved {
            return self.safety_violations == 0 && starved.iter().all(Starved::held);
        }
        self.safety_violations == 0
            && !self.deadlock
            && self.stalled.is_none()
            && self.requested_pairs_completed >= self.pairs_requested
    }

    /// A one-paragraph account of a failure: what broke, the seed, and the trace.
    pub fn failure_text(&self) -> String {
        let mut s = format!("seed {}: ", self.seed);
        if let Some(v) = self.violations.first() {
            s += &format!(
                "{} safety violation(s); first at t={} after event #{}: {}\n",
                self.safety_violations, v.time, v.event, v.description
            );
        }
        if self.deadlock {
            let ids: Vec<String> = self.blocked.iter().map(ToString::to_string).collect();
            s += &format!(
                "deadlock at t={}: nothing in flight, blocked: {}\n",
                self.end_time,
                ids.join(", ")
            );
        }
        if let Some(why) = &self.stalled {
            s += &format!("stalled: {why}\n");
        }
        for starved in self.starved.iter().flatten().filter(|s| !s.held()) {
            s += &format!("{starved}\n");
        }
        s += &format!(
            "last {} events (replay with the same seed):\n",
            self.trace.len()
        );
        for line in &self.trace {
            s += line;
            s.push('\n');
        }
        s
    }
}
