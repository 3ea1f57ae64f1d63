//! The deterministic discrete-event simulator (DESIGN §2.4).
//!
//! One thread drives every process's [`CsObject`]. Messages travel on FIFO links with a unit
//! delay or a seeded random delay; a per-link clock keeps random delays FIFO. Client moves
//! follow a workload: `concurrent` (every process keeps cycling Exit/Entry after seeded think
//! times until every process has completed its pairs) or `sequential` (the no-contention best
//! case: one sequence at a time, the next started only once nothing is in flight, by the next
//! process in round-robin order whose move keeps every bound).
//!
//! After **every** event a safety observer checks the bounds l_i ≤ |CS_i| ≤ k_i of every
//! closed neighbourhood the event changed, and the handling object's own invariants (e.g. its
//! arbiter's cap). A run with nothing in flight while some sequence is pending is a deadlock.
//! Messages are attributed to the pair whose request caused them: a message sent while
//! handling a message inherits that message's pair. Everything is seeded with ChaCha8, whose
//! stream is stable across versions: a run is replayed by its seed.

mod queue;
mod stop;

use crate::config::{Instance, Observed};
use crate::cs::{CsObject, CsState, Message, Outbox, Sequence};
use crate::error::{ConfigError, Problem};
use crate::fnv::Fnv;
use crate::id::ProcessId;
use crate::metrics::{PairRecord, Stats, Waiting};
use crate::topology::Topology;
use queue::EventQueue;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::fmt;
use std::hash::{BuildHasherDefault, Hash, Hasher};
pub use stop::{check_stop, Starved};

/// Sequential workload: helper moves allowed per process before the run counts as stalled.
const HELPER_MOVE_LIMIT: u64 = 1_000;
/// How many configurations the sequential workload's helper search visits at most.
const HELPER_SEARCH_LIMIT: usize = 50_000;
/// How many configurations the sequential workload's helper searches visit at most in one
/// run, all searches together ([`SimReport::helper_steps`]): their own budget, apart from
/// [`SimConfig::max_events`]. Past it a run that needs one more search stalls.
pub const HELPER_STEP_LIMIT: u64 = 20_000_000;
/// Backtracking steps per process and starting state when the sequential workload checks
/// that every process can move within the operating bounds ([`Instance::immovable`]).
const IMMOVABLE_BUDGET: usize = 20_000;

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
    fn draw(self, rng: &mut ChaCha8Rng) -> u64 {
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

/// The pair a message is attributed to: its slot in [`Sim::acc`] (pairs numbered in the
/// order they begin, so the accumulators of the pairs in progress sit together at the end).
type Tag = usize;

enum EventKind<M> {
    Deliver {
        from: ProcessId,
        to: ProcessId,
        msg: M,
        tag: Tag,
    },
    Client(ProcessId),
}

enum TraceEntry<M> {
    Deliver {
        from: ProcessId,
        to: ProcessId,
        msg: M,
        /// The pair: (owner, pair index).
        tag: (ProcessId, usize),
    },
    Begin(ProcessId, Sequence),
    Complete(ProcessId, CsState),
}

#[derive(Default, Clone, Copy)]
struct PairAcc {
    messages: u64,
    remote: u64,
    exit_wait: u64,
    entry_wait: u64,
}

#[derive(Clone, Copy)]
struct Track {
    started: usize,
    completed: usize,
    begun_at: u64,
    /// The slot in [`Sim::acc`] of the process's last pair given one.
    slot: usize,
    /// How many of the process's pairs (indices 0, 1, ...) have a slot.
    slots: usize,
}

/// Runs a system of CS objects under `cfg` and returns the report. `instance` gives the
/// bounds the observer checks; `procs[i]` must be process `i`.
///
/// A mismatched system (a process count other than the instance's, or `procs[i]` not
/// process `i`) is not run: the report says why in `stalled`.
pub fn simulate<A: CsObject>(instance: &Instance, procs: Vec<A>, cfg: &SimConfig) -> SimReport {
    let check = crate::cs::check_system(instance, &procs).and_then(|()| stop::check(instance, cfg));
    match check {
        Ok(()) if cfg.trace_capacity == 0 => Sim::new(instance, procs, cfg).run(),
        Ok(()) => {
            // The trace is reported for failed runs only, and keeping it costs a clone of
            // every message: run without it, and replay a failed run (the same seed runs the
            // same events) to collect it.
            let quick = SimConfig {
                trace_capacity: 0,
                ..cfg.clone()
            };
            let report = Sim::new(instance, procs.clone(), &quick).run();
            if report.safety_violations == 0 && !report.deadlock && report.stalled.is_none() {
                report
            } else {
                Sim::new(instance, procs, cfg).run()
            }
        }
        Err(why) => SimReport {
            processes: procs.len(),
            pairs_requested: procs.len() * cfg.pairs,
            pairs_completed: 0,
            requested_pairs_completed: 0,
            safety_violations: 0,
            violations: Vec::new(),
            deadlock: false,
            blocked: Vec::new(),
            stalled: Some(format!("not run: {why}")),
            messages: 0,
            messages_per_pair: Stats::default(),
            remote_messages_per_pair: Stats::default(),
            messages_by_kind: BTreeMap::new(),
            triggers: 0,
            waiting_time: Waiting::default(),
            max_overtaken: 0,
            seed: cfg.seed,
            end_time: 0,
            events: 0,
            helper_steps: 0,
            failure_locality: None,
            starved: None,
            pairs: Vec::new(),
            trace: Vec::new(),
            trace_hash: Fnv::default().finish(),
        },
    }
}

/// The simulator's event loop with nothing else: the ceiling a simulation's events/s is
/// measured against (benches/sim.rs). It keeps `in_flight` deliveries of `msg` queued in the
/// simulator's own priority queue and event type, and handles `events` of them: each pop
/// pushes a copy of its message to the next process at a delay drawn as [`simulate`] draws
/// it (a unit delay costs no draw). No handler, observer, trace or accounting runs. Returns
/// the final time, so the work cannot be optimised away.
#[doc(hidden)]
pub fn bare_event_loop<M: Message>(
    msg: &M,
    processes: usize,
    in_flight: usize,
    events: u64,
    delay: Delay,
    seed: u64,
) -> u64 {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut queue = EventQueue::new();
    let n = processes.max(1);
    for i in 0..in_flight {
        let to = ProcessId::from(i % n);
        queue.push(
            0,
            EventKind::Deliver {
                from: to,
                to,
                msg: msg.clone(),
                tag: 0,
            },
        );
    }
    let mut now = 0;
    for _ in 0..events {
        let Some((time, kind)) = queue.pop() else {
            break;
        };
        now = time;
        if let EventKind::Deliver { to, msg, tag, .. } = kind {
            let d = delay.draw(&mut rng);
            let next = ProcessId::from((to.index() + 1) % n);
            queue.push(
                now + d,
                EventKind::Deliver {
                    from: to,
                    to: next,
                    msg,
                    tag,
                },
            );
        }
    }
    now
}

struct Sim<'a, A: CsObject> {
    inst: &'a Instance,
    /// The bounds the sequential workload moves within: the objects' operating bounds where
    /// they are tighter than the problem's (see [`CsObject::operating_bounds`]).
    schedule: Cow<'a, Instance>,
    cfg: &'a SimConfig,
    procs: Vec<A>,
    rng: ChaCha8Rng,
    queue: EventQueue<EventKind<A::Msg>>,
    /// The last delivery time on each link that carried a message (looked up, never iterated).
    link_clock: HashMap<(ProcessId, ProcessId), u64, BuildHasherDefault<LinkHasher>>,
    now: u64,
    events: u64,
    observed: Observed,
    track: Vec<Track>,
    /// Every begun pair's accumulators, in the order the pairs began (see [`Tag`]).
    acc: Vec<PairAcc>,
    /// Whose pair each slot of `acc` is: (owner, pair index).
    acc_owner: Vec<(ProcessId, usize)>,
    waits: [Vec<u64>; 2],
    messages: u64,
    by_kind: BTreeMap<String, u64>,
    violations: Vec<Violation>,
    violation_count: usize,
    trace: VecDeque<(u64, u64, TraceEntry<A::Msg>)>,
    trace_hash: Fnv,
    rr: usize,
    helper_moves: u64,
    /// Configurations the helper searches visited ([`HELPER_STEP_LIMIT`]).
    helper_steps: u64,
    /// A helper search was needed and its budget was spent.
    starved: bool,
    /// Helper moves still to make, found by the sequential workload's search.
    plan: VecDeque<usize>,
    /// Every object takes round trips ([`CsObject::takes_round_trips`]).
    trips: bool,
    /// The process whose return the sequential workload makes next (see
    /// [`Sim::back_to_back`]).
    returning: Option<usize>,
    /// With round trips, the helper moves not yet undone, in the order made.
    helped: Vec<usize>,
    /// With round trips, how many helper moves had been made when a helper search failed.
    searched_at: Option<usize>,
    /// Per process, whether it stops after its first pair ([`SimConfig::stop`]).
    stopping: Vec<bool>,
    /// How many processes still owe moves (see [`Sim::still_owes`]): the run is done at 0.
    owing: usize,
    done: bool,
    overtaking: Overtaking,
}

impl<'a, A: CsObject> Sim<'a, A> {
    fn new(inst: &'a Instance, procs: Vec<A>, cfg: &'a SimConfig) -> Self {
        let n = procs.len();
        let observed = Observed::new(inst, procs.iter().map(|p| p.state()).collect());
        let trips = procs.iter().all(CsObject::takes_round_trips);
        let schedule = if procs.iter().any(|p| p.operating_bounds().is_some()) {
            let bounds = procs
                .iter()
                .map(|p| p.operating_bounds().unwrap_or(inst.bounds(p.id())))
                .collect();
            Instance::new(inst.topology().clone(), bounds).map_or(Cow::Borrowed(inst), Cow::Owned)
        } else {
            Cow::Borrowed(inst)
        };
        Sim {
            inst,
            schedule,
            cfg,
            procs,
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            queue: EventQueue::new(),
            link_clock: HashMap::default(),
            now: 0,
            events: 0,
            observed,
            track: vec![
                Track {
                    started: 0,
                    completed: 0,
                    begun_at: 0,
                    slot: 0,
                    slots: 0,
                };
                n
            ],
            acc: Vec::new(),
            acc_owner: Vec::new(),
            waits: [Vec::new(), Vec::new()],
            messages: 0,
            by_kind: BTreeMap::new(),
            violations: Vec::new(),
            violation_count: 0,
            trace: VecDeque::new(),
            trace_hash: Fnv::default(),
            rr: 0,
            helper_moves: 0,
            helper_steps: 0,
            starved: false,
            plan: VecDeque::new(),
            trips,
            returning: None,
            helped: Vec::new(),
            searched_at: None,
            stopping: {
                let mut v = vec![false; n];
                for p in &cfg.stop {
                    v[p.index()] = true;
                }
                v
            },
            owing: if cfg.pairs == 0 { 0 } else { n },
            done: cfg.pairs == 0,
            overtaking: Overtaking::new(n),
        }
    }

    fn push(&mut self, time: u64, kind: EventKind<A::Msg>) {
        self.queue.push(time, kind);
    }

    fn delay(&mut self) -> u64 {
        self.cfg.delay.draw(&mut self.rng)
    }

    fn think(&mut self) -> u64 {
        self.rng.random_range(0..=self.cfg.think_max.min(MAX_DELAY))
    }

    fn record(&mut self, entry: TraceEntry<A::Msg>) {
        if self.cfg.trace_capacity == 0 {
            return;
        }
        if self.trace.len() == self.cfg.trace_capacity {
            self.trace.pop_front();
        }
        self.trace.push_back((self.now, self.events, entry));
    }

    fn violation(&mut self, description: String) {
        self.violation_count += 1;
        if self.violations.len() < 100 {
            self.violations.push(Violation {
                time: self.now,
                event: self.events,
                description,
            });
        }
    }

    fn pairs_done(&self, p: usize) -> usize {
        self.track[p].completed / 2
    }

    /// Whether `p` still owes moves: pairs left, or a pair half done.
    fn owes(&self, p: usize) -> bool {
        self.pairs_done(p) < self.cfg.pairs || self.track[p].started % 2 == 1
    }

    /// Whether `p` keeps the run going: in the concurrent workload, pairs left; in the
    /// sequential one, pairs left or a pair half done.
    fn still_owes(&self, p: usize) -> bool {
        match self.cfg.workload {
            Workload::Concurrent => self.pairs_done(p) < self.cfg.pairs && !self.halted(p),
            Workload::Sequential => self.owes(p),
        }
    }

    /// Whether `p` stopped for good: it is to stop ([`SimConfig::stop`]) and its first pair
    /// completed.
    fn halted(&self, p: usize) -> bool {
        self.stopping[p] && self.track[p].completed >= 2
    }

    /// Keeps [`Sim::owing`] current after a change to `p`'s track (O(1) per event).
    fn recount(&mut self, before: bool, p: usize) {
        match (before, self.still_owes(p)) {
            (true, false) => self.owing -= 1,
            (false, true) => self.owing += 1,
            _ => {}
        }
    }

    /// The sequential workload moves processes only within the bounds the algorithm keeps
    /// (its operating bounds, [`CsObject::operating_bounds`]). When those are tighter than
    /// the problem's, a process may be unable to move within them from any configuration
    /// ([`Instance::immovable`]): the run cannot complete, and says so before it starts.
    /// Objects that take round trips move such a process that way instead.
    fn frozen_in_schedule(&self) -> Option<String> {
        if self.cfg.workload != Workload::Sequential
            || std::ptr::eq(&*self.schedule, self.inst)
            || self.trips
        {
            return None;
        }
        let frozen = self.schedule.immovable(IMMOVABLE_BUDGET);
        let owing: Vec<String> = frozen
            .iter()
            .filter(|p| self.required(p.index()))
            .map(ToString::to_string)
            .collect();
        (!owing.is_empty()).then(|| {
            format!(
                "sequential workload: {} can never move within the bounds the algorithm keeps \
                 (tighter than the problem's here): from no configuration meeting them does \
                 its move keep them; only a concurrent run, where the algorithm may step \
                 outside them, can move it",
                owing.join(", ")
            )
        })
    }

    fn update_done(&mut self) {
        if !self.done {
            self.done = self.owing == 0;
        }
    }

    fn run(mut self) -> SimReport {
        let initial = self.inst.violations(self.observed.states());
        for p in initial {
            self.violation(format!("initial configuration: {p}"));
        }
        if self.cfg.workload == Workload::Concurrent && !self.done {
            for p in 0..self.procs.len() {
                let t = self.think();
                self.push(t, EventKind::Client(ProcessId::from(p)));
            }
        }
        let mut deadlock = false;
        let mut stalled = self.frozen_in_schedule();
        while stalled.is_none() {
            if self.events >= self.cfg.max_events {
                // a run in which every process completed its pairs is done, not stalled
                if !self.done {
                    stalled = Some(format!("event limit {} reached", self.cfg.max_events));
                }
                break;
            }
            if self.cfg.workload == Workload::Sequential && self.queue.is_empty() {
                if self.procs.iter().any(|p| p.pending().is_some()) {
                    deadlock = true;
                    break;
                }
                if self.done {
                    break;
                }
                if self.helper_moves > HELPER_MOVE_LIMIT * (self.procs.len() as u64) {
                    stalled = Some(format!(
                        "sequential workload: {} helper moves and still some process cannot move",
                        self.helper_moves
                    ));
                    break;
                }
                let next = self.next_mover();
                if self.starved {
                    stalled = Some(format!(
                        "sequential workload: the helper search spent its budget \
                         ({HELPER_STEP_LIMIT} configurations visited) and some process with \
                         pairs left still cannot move"
                    ));
                    break;
                }
                match next {
                    Some(p) => self.push(self.now, EventKind::Client(p)),
                    None if self.events >= self.cfg.max_events => continue,
                    None => {
                        // a property of the instance, not of the algorithm: from here the
                        // problem itself allows no move, so no algorithm could go on
                        stalled = Some(format!(
                            "sequential workload: no legal move from this configuration ({}): \
                             every process's move breaks a bound it must keep",
                            crate::config::format_initial(self.observed.states())
                        ));
                        break;
                    }
                }
            }
            let Some((time, kind)) = self.queue.pop() else {
                if !self.done {
                    deadlock = true;
                }
                break;
            };
            self.now = time;
            self.events += 1;
            // at 10^5 processes each event's process is a cache miss: fetch the process of
            // the event after next while this one is handled
            if let Some(next) = self.queue.peek_now(1) {
                let p = match next {
                    EventKind::Deliver { to, tag, .. } => {
                        // the pair's accumulators, which each message it causes updates
                        if let Some(a) = self.acc.get(*tag) {
                            prefetch(a);
                        }
                        to.index()
                    }
                    EventKind::Client(p) => p.index(),
                };
                prefetch(&self.procs[p]);
                prefetch(&self.track[p]);
            }
            self.handle(kind);
        }
        self.report(deadlock, stalled)
    }

    /// The sequential workload's next mover: the next process in round-robin order with
    /// required pairs left whose move keeps every bound. When none can move, a helper move:
    /// the next step of a plan found earlier; else the safe move that most reduces the number
    /// of bounds blocking those processes; else the first move of a shortest sequence of safe
    /// moves after which one of them can move (breadth-first, at most
    /// `HELPER_SEARCH_LIMIT` configurations); failing that, with objects that take round
    /// trips (which skip the greedy helper move and make pairs back to back:
    /// [`Sim::back_to_back`]), a whole pair as a round trip of a process that owes one and
    /// whose move keeps the problem's bounds (the move, then at once its return); else a
    /// process finishing an extra pair, then anyone.
    fn next_mover(&mut self) -> Option<ProcessId> {
        if let Some(q) = self.returning.take() {
            return Some(ProcessId::from(q));
        }
        if let Some(h) = self.unwind() {
            return Some(ProcessId::from(h));
        }
        let n = self.procs.len();
        let rotation = (0..n).map(|i| (self.rr + i) % n);
        // the common case costs one safety question per process tried, not one per process
        let first = rotation.clone().find(|&p| self.required(p) && self.safe(p));
        let planned = match self.plan.front() {
            Some(&h) if first.is_none() && self.safe(h) => self.plan.pop_front(),
            _ => {
                self.plan.clear();
                None
            }
        };
        let pick = match planned.or(first) {
            Some(p) => p,
            None => self.unblock(rotation.collect())?,
        };
        if self.trips {
            self.back_to_back(pick, first == Some(pick));
        }
        self.rr = (pick + 1) % n;
        if !self.required(pick) {
            self.helper_moves += 1;
        }
        Some(ProcessId::from(pick))
    }

    /// With objects that take round trips the sequential workload makes each pair owed back to
    /// back: `pick`, when it begins a pair it `owes`, makes its return next, which restores a
    /// configuration within the bounds (so no process is left halfway, where a round trip
    /// could not finish its pair). Helper moves are remembered in order and undone last
    /// first once no process owes a pair ([`Sim::unwind`]).
    fn back_to_back(&mut self, pick: usize, owes: bool) {
        if self.returning == Some(pick) {
            return;
        }
        if owes && self.track[pick].started % 2 == 0 {
            self.returning = Some(pick);
        } else {
            self.helped.push(pick);
        }
    }

    /// With round trips, once no process owes a pair: the last helper move not yet undone,
    /// made again. Owed pairs come back to back, so this restores the configuration before
    /// that helper move, which met the bounds: undoing every helper move keeps the bounds
    /// and leaves no process halfway.
    fn unwind(&mut self) -> Option<usize> {
        if self.helped.is_empty() || (0..self.procs.len()).any(|p| self.required(p)) {
            return None;
        }
        self.helped.pop()
    }

    /// Whether `p` still owes pairs.
    fn required(&self, p: usize) -> bool {
        self.pairs_done(p) < self.cfg.pairs
    }

    /// Whether `p` can move now without breaking a (schedule) bound.
    fn safe(&self, p: usize) -> bool {
        self.observed
            .bounds_broken_by_move(&self.schedule, ProcessId::from(p))
            == 0
    }

    /// No process that owes pairs can move: a helper move, as [`Sim::next_mover`] describes.
    fn unblock(&mut self, rotation: Vec<usize>) -> Option<usize> {
        let n = self.procs.len();
        let mut states = self.observed.states().to_vec();
        let required: Vec<bool> = (0..n).map(|p| self.required(p)).collect();
        let safe: Vec<bool> = (0..n).map(|p| self.safe(p)).collect();
        let blocked: Vec<usize> = (0..n).filter(|&p| required[p] && !safe[p]).collect();
        let before = self.blocking(&mut states, &blocked);
        let mut best: Option<(usize, usize)> = None;
        // with round trips, only a found plan (which ends in a move of a process that owes
        // one) is worth helper moves: greedy ones can cycle where a round trip moves at once
        for &h in rotation.iter().filter(|&&h| safe[h] && !self.trips) {
            states[h] = !states[h];
            let after = self.blocking(&mut states, &blocked);
            states[h] = !states[h];
            if after < before && best.is_none_or(|(_, b)| after < b) {
                best = Some((h, after));
            }
        }
        best.map(|(h, _)| h)
            .or_else(|| {
                // with round trips a pair ends where it began, so the configuration is the
                // start plus the helper moves made: a search that failed from it fails again
                if self.trips && self.searched_at == Some(self.helped.len()) {
                    return None;
                }
                self.plan = self.helper_path(&states, &required);
                if self.plan.is_empty() {
                    self.searched_at = Some(self.helped.len());
                }
                self.plan.pop_front()
            })
            .or_else(|| self.round_trip(&rotation, &mut states))
            .or_else(|| rotation.iter().copied().find(|&p| safe[p] && self.owes(p)))
            .or_else(|| rotation.iter().copied().find(|&p| safe[p]))
    }

    /// With objects that take round trips: the first process in `rotation` that owes a pair,
    /// has not begun it, and whose move keeps the problem's bounds in `states` (the current
    /// configuration); its return is made next, completing the pair.
    fn round_trip(&mut self, rotation: &[usize], states: &mut [CsState]) -> Option<usize> {
        if !self.trips {
            return None;
        }
        let q = rotation.iter().copied().find(|&q| {
            self.required(q)
                && self.track[q].started % 2 == 0
                && self.inst.move_keeps_bounds(states, ProcessId::from(q))
        })?;
        self.returning = Some(q);
        Some(q)
    }

    /// A shortest sequence of moves, each keeping every (schedule) bound, after which some
    /// process in `required` can move; empty when none is found within the search limit.
    fn helper_path(&mut self, start: &[CsState], required: &[bool]) -> VecDeque<usize> {
        // the search's work has its own budget, one step per configuration visited, apart
        // from the events (which it used to be charged as)
        let left = HELPER_STEP_LIMIT.saturating_sub(self.helper_steps);
        if left == 0 {
            self.starved = true;
            return VecDeque::new();
        }
        let limit = HELPER_SEARCH_LIMIT.min(usize::try_from(left).unwrap_or(usize::MAX));
        let (path, visited) = self.helper_search(start, required, limit);
        self.helper_steps = self.helper_steps.saturating_add(visited as u64);
        path
    }

    /// [`Sim::helper_path`]'s breadth-first search, visiting at most `limit` configurations;
    /// returns the path and how many configurations it visited.
    fn helper_search(
        &self,
        start: &[CsState],
        required: &[bool],
        limit: usize,
    ) -> (VecDeque<usize>, usize) {
        let n = start.len();
        let mut seen: HashMap<Vec<CsState>, usize> = HashMap::new();
        // (configuration, parent index, move that led here)
        let mut nodes: Vec<(Vec<CsState>, usize, usize)> = vec![(start.to_vec(), 0, 0)];
        seen.insert(start.to_vec(), 0);
        let mut head = 0;
        while head < nodes.len() && nodes.len() < limit {
            let mut states = nodes[head].0.clone();
            for p in 0..n {
                if self
                    .schedule
                    .bounds_broken_by_move(&mut states, ProcessId::from(p))
                    > 0
                {
                    continue;
                }
                states[p] = !states[p];
                if !seen.contains_key(&states) {
                    seen.insert(states.clone(), nodes.len());
                    nodes.push((states.clone(), head, p));
                    let goal = (0..n).any(|q| {
                        required[q]
                            && self
                                .schedule
                                .bounds_broken_by_move(&mut states, ProcessId::from(q))
                                == 0
                    });
                    if goal {
                        let mut path = VecDeque::new();
                        let mut at = nodes.len() - 1;
                        while at != 0 {
                            path.push_front(nodes[at].2);
                            at = nodes[at].1;
                        }
                        return (path, nodes.len());
                    }
                }
                states[p] = !states[p];
            }
            head += 1;
        }
        (VecDeque::new(), nodes.len())
    }

    /// How many (process, bound) pairs would break if each of `movers` moved alone.
    fn blocking(&self, states: &mut [CsState], movers: &[usize]) -> usize {
        movers
            .iter()
            .map(|&p| {
                self.schedule
                    .bounds_broken_by_move(states, ProcessId::from(p))
            })
            .sum()
    }

    fn handle(&mut self, kind: EventKind<A::Msg>) {
        let mut out = Outbox::new();
        let (actor, tag) = match kind {
            EventKind::Deliver { from, to, msg, tag } => {
                (0u8, self.now, from, to, &msg).hash(&mut self.trace_hash);
                if self.cfg.trace_capacity > 0 {
                    self.record(TraceEntry::Deliver {
                        from,
                        to,
                        msg: msg.clone(),
                        tag: self.acc_owner[tag],
                    });
                }
                self.procs[to.index()].set_time(self.now);
                self.procs[to.index()].on_message(from, msg, &mut out);
                (to, tag)
            }
            EventKind::Client(p) => {
                if self.done && self.cfg.workload == Workload::Concurrent {
                    return;
                }
                let i = p.index();
                let seq = Sequence::leaving(self.observed.states()[i]);
                let tag = self.slot(i, self.track[i].started / 2);
                let before = self.still_owes(i);
                self.track[i].started += 1;
                self.recount(before, i);
                self.track[i].begun_at = self.now;
                self.overtaking.begin(i);
                (1u8, self.now, p, seq).hash(&mut self.trace_hash);
                self.record(TraceEntry::Begin(p, seq));
                self.procs[i].set_time(self.now);
                if let Err(e) = self.procs[i].begin(seq, &mut out) {
                    self.violation(format!("{p}: driver broke the calling convention: {e}"));
                }
                (p, tag)
            }
        };
        self.dispatch(actor, tag, &mut out);
        if out.completed() {
            self.complete(actor);
        }
        if let Err(e) = self.procs[actor.index()].check_invariants() {
            self.violation(format!("{actor}: {e}"));
        }
    }

    fn dispatch(&mut self, from: ProcessId, tag: Tag, out: &mut Outbox<A::Msg>) {
        for (to, msg) in out.drain() {
            let delay = self.delay();
            self.messages += 1;
            let kind = msg.kind();
            match self.by_kind.get_mut(kind.as_ref()) {
                Some(count) => *count += 1,
                None => {
                    self.by_kind.insert(kind.into_owned(), 1);
                }
            }
            let a = &mut self.acc[tag];
            a.messages += 1;
            if to != from {
                a.remote += 1;
            }
            let at = self.now.saturating_add(delay);
            // with one delay for every message, links are FIFO by construction (time never
            // goes back); random delays need each link's last delivery time
            let at = if let Delay::Unit = self.cfg.delay {
                at
            } else {
                let last = self.link_clock.entry((from, to)).or_insert(0);
                *last = at.max(*last);
                *last
            };
            self.push(at, EventKind::Deliver { from, to, msg, tag });
        }
    }

    /// The slot in [`Sim::acc`] of pair `index` of process `p`, given one (with every earlier
    /// pair of `p` that has none) when it has none. A sequence begins and completes in the
    /// process's last pair given a slot: O(1); an older pair is searched for.
    fn slot(&mut self, p: usize, index: usize) -> usize {
        let t = &mut self.track[p];
        while t.slots <= index {
            t.slot = self.acc.len();
            self.acc.push(PairAcc::default());
            self.acc_owner.push((ProcessId::from(p), t.slots));
            t.slots += 1;
        }
        if t.slots == index + 1 {
            return t.slot;
        }
        let key = (ProcessId::from(p), index);
        self.acc_owner
            .iter()
            .rposition(|&o| o == key)
            .expect("every pair below `slots` has a slot")
    }

    fn complete(&mut self, p: ProcessId) {
        let i = p.index();
        let old = self.observed.states()[i];
        let new = self.procs[i].state();
        let wait = self.now - self.track[i].begun_at;
        let slot = self.slot(i, self.track[i].completed / 2);
        match Sequence::leaving(old) {
            Sequence::Exit => {
                self.waits[0].push(wait);
                self.acc[slot].exit_wait = wait;
            }
            Sequence::Entry => {
                self.waits[1].push(wait);
                self.acc[slot].entry_wait = wait;
            }
        }
        let before = self.still_owes(i);
        self.track[i].completed += 1;
        self.recount(before, i);
        self.overtaking.complete(self.inst.topology(), p);
        (2u8, self.now, p, new).hash(&mut self.trace_hash);
        self.record(TraceEntry::Complete(p, new));
        if new == old {
            self.violation(format!("{p}: completed a sequence without changing state"));
            return;
        }
        for (q, c) in self.observed.apply(self.inst, p, new) {
            let b = self.inst.bounds(q);
            self.violation(format!(
                "{q}: {c} in the CS in its closed neighbourhood, outside [{}, {}] (after {p} {})",
                b.l,
                b.k,
                if new == CsState::InCs {
                    "entered"
                } else {
                    "exited"
                }
            ));
        }
        self.update_done();
        if self.cfg.workload == Workload::Concurrent && !self.done && !self.halted(i) {
            let t = self.now.saturating_add(self.think());
            self.push(t, EventKind::Client(p));
        }
    }

    fn report(self, deadlock: bool, stalled: Option<String>) -> SimReport {
        let max_overtaken = self.overtaking.max(self.inst.topology());
        // every completed pair, by process, then pair index
        let mut pairs: Vec<PairRecord> = self
            .acc
            .iter()
            .zip(&self.acc_owner)
            .filter(|(_, &(p, index))| index < self.track[p.index()].completed / 2)
            .map(|(a, &(process, index))| PairRecord {
                process,
                index,
                messages: a.messages,
                remote_messages: a.remote,
                exit_wait: a.exit_wait,
                entry_wait: a.entry_wait,
            })
            .collect();
        pairs.sort_unstable_by_key(|r| (r.process, r.index));
        let mean = |v: &[u64]| Stats::of(v.iter().map(|&x| x as f64));
        let (exits, entries) = (mean(&self.waits[0]), mean(&self.waits[1]));
        let blocked = if deadlock {
            self.procs
                .iter()
                .filter(|p| p.pending().is_some())
                .map(|p| p.id())
                .collect()
        } else {
            Vec::new()
        };
        let starved = (!self.cfg.stop.is_empty()).then(|| {
            let done: Vec<bool> = (0..self.procs.len())
                .map(|p| self.pairs_done(p) >= self.cfg.pairs || self.halted(p))
                .collect();
            stop::judge(
                self.inst,
                &self.procs,
                self.observed.states(),
                &done,
                &self.cfg.stop,
            )
        });
        let failure_locality = starved
            .as_ref()
            .map(|s: &Vec<Starved>| s.iter().map(|s| s.distance).max().unwrap_or(0));
        let trace = if self.violation_count > 0 || deadlock || stalled.is_some() {
            self.trace
                .iter()
                .map(|(t, e, entry)| format_entry(*t, *e, entry))
                .collect()
        } else {
            Vec::new()
        };
        SimReport {
            processes: self.procs.len(),
            pairs_requested: self.procs.len() * self.cfg.pairs,
            pairs_completed: pairs.len(),
            requested_pairs_completed: self
                .track
                .iter()
                .map(|t| (t.completed / 2).min(self.cfg.pairs))
                .sum(),
            safety_violations: self.violation_count,
            violations: self.violations,
            deadlock,
            blocked,
            stalled,
            messages: self.messages,
            messages_per_pair: Stats::of(pairs.iter().map(|p| p.messages as f64)),
            remote_messages_per_pair: Stats::of(pairs.iter().map(|p| p.remote_messages as f64)),
            triggers: self.by_kind.get("Trigger").copied().unwrap_or(0),
            messages_by_kind: self.by_kind,
            waiting_time: Waiting {
                exit_max: exits.max,
                exit_mean: exits.mean,
                entry_max: entries.max,
                entry_mean: entries.mean,
            },
            max_overtaken,
            seed: self.cfg.seed,
            end_time: self.now,
            helper_steps: self.helper_steps,
            failure_locality,
            starved,
            events: self.events,
            pairs,
            trace,
            trace_hash: self.trace_hash.finish(),
        }
    }
}

/// Counts how often each pending request is overtaken (see [`SimReport::max_overtaken`]).
/// Sequences are numbered in the order they are called. On a stored graph a completion
/// charges the neighbours whose pending request is older: O(|N_i|) per completion. On a
/// complete graph (neighbours are everyone, and n can be 10^4) a request's count is the
/// number of completed sequences numbered after it, read from a Fenwick tree over the
/// numbers when it completes: O(log) per completion.
struct Overtaking {
    /// Per process, the number of its pending sequence (`u64::MAX` when none).
    pending: Vec<u64>,
    /// Per process, how often its pending request was overtaken (stored graphs).
    count: Vec<u64>,
    /// Sequences called so far.
    called: u64,
    /// Fenwick tree over sequence numbers: 1 at each completed sequence (complete graphs).
    done: Vec<u64>,
    /// Completed sequences (complete graphs).
    done_total: u64,
    max: u64,
}

impl Overtaking {
    fn new(n: usize) -> Overtaking {
        Overtaking {
            pending: vec![u64::MAX; n],
            count: vec![0; n],
            called: 0,
            done: Vec::new(),
            done_total: 0,
            max: 0,
        }
    }

    fn begin(&mut self, p: usize) {
        self.pending[p] = self.called;
        self.count[p] = 0;
        self.called += 1;
    }

    /// Completed sequences numbered at most `number` (complete graphs).
    fn done_up_to(&self, number: u64) -> u64 {
        let mut i = (number as usize + 1).min(self.done.len());
        let mut sum = 0;
        while i > 0 {
            sum += self.done[i - 1];
            i &= i - 1;
        }
        sum
    }

    /// How often `p`'s pending request was overtaken so far.
    fn of(&self, t: &Topology, p: usize) -> u64 {
        let mine = self.pending[p];
        if mine == u64::MAX {
            0
        } else if t.is_complete() {
            self.done_total - self.done_up_to(mine)
        } else {
            self.count[p]
        }
    }

    fn complete(&mut self, t: &Topology, p: ProcessId) {
        let i = p.index();
        let mine = self.pending[i];
        if mine == u64::MAX {
            return;
        }
        self.max = self.max.max(self.of(t, i));
        self.pending[i] = u64::MAX;
        if t.is_complete() {
            let at = mine as usize;
            if self.done.len() <= at {
                // grow to a power of two and rebuild (amortised O(1) per sequence)
                let mut flags: Vec<u64> = (0..self.done.len() as u64)
                    .map(|x| self.done_up_to(x) - if x == 0 { 0 } else { self.done_up_to(x - 1) })
                    .collect();
                flags.resize((at + 1).next_power_of_two(), 0);
                self.done = vec![0; flags.len()];
                for (x, &f) in flags.iter().enumerate() {
                    if f > 0 {
                        self.add(x);
                    }
                }
            }
            self.add(at);
            self.done_total += 1;
        } else {
            for &q in t.neighbors(p) {
                let j = q.index();
                if self.pending[j] < mine {
                    self.count[j] += 1;
                    self.max = self.max.max(self.count[j]);
                }
            }
        }
    }

    fn add(&mut self, at: usize) {
        let mut i = at + 1;
        while i <= self.done.len() {
            self.done[i - 1] += 1;
            i += i & i.wrapping_neg();
        }
    }

    /// The worst count, requests still pending included.
    fn max(&self, t: &Topology) -> u64 {
        (0..self.pending.len()).fold(self.max, |m, p| m.max(self.of(t, p)))
    }
}

/// Asks the CPU to bring `x` (its first cache lines, at most eight) into the cache: a hint
/// with no effect on the program's meaning.
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let base = std::ptr::from_ref(x).cast::<i8>();
        let lines = std::mem::size_of::<T>().div_ceil(64).min(8);
        for line in 0..lines {
            // SAFETY: a prefetch never faults and never changes memory, whatever the
            // address; `wrapping_add` keeps the pointer arithmetic defined
            unsafe { _mm_prefetch::<_MM_HINT_T0>(base.wrapping_add(line * 64)) };
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// The link table's hasher: a multiply-rotate over the two process ids (the `rustc-hash`
/// scheme), far cheaper than SipHash for keys no adversary chooses.
#[derive(Default)]
struct LinkHasher(u64);

impl Hasher for LinkHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u32(&mut self, i: u32) {
        self.write_u64(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

fn format_entry<M: Message>(time: u64, event: u64, e: &TraceEntry<M>) -> String {
    match e {
        TraceEntry::Deliver { from, to, msg, tag } => {
            format!(
                "t={time} #{event} {from} -> {to}: {msg:?} [pair {}#{}]",
                tag.0, tag.1
            )
        }
        TraceEntry::Begin(p, s) => format!("t={time} #{event} {p} begins {s:?}"),
        TraceEntry::Complete(p, s) => format!("t={time} #{event} {p} completes: now {s:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::lmutin::{Lmutin, LmutinRules};
    use crate::topology::Topology;

    fn lmutin(t: &Topology, l: usize) -> (Instance, Vec<Lmutin>) {
        let ls = vec![l; t.len()];
        let inst = Lmutin::instance(t, &ls).unwrap();
        let init = inst.find_safe_initial().unwrap();
        Lmutin::system(t, &ls, &init, LmutinRules::CORRECTED).unwrap()
    }

    #[test]
    fn a_mismatched_system_is_refused_not_run() {
        let t = Topology::ring(4).unwrap();
        let (inst, mut procs) = lmutin(&t, 1);
        procs.swap(0, 1);
        let r = simulate(&inst, procs.clone(), &SimConfig::default());
        assert!(!r.ok() && r.stalled.as_deref().unwrap_or("").contains("index 0"));
        procs.pop();
        let r = simulate(&inst, procs, &SimConfig::default());
        assert!(!r.ok() && r.events == 0);
        #[cfg(feature = "check")]
        {
            let r = crate::check::check(
                &inst,
                Vec::<Lmutin>::new(),
                &crate::check::CheckConfig::default(),
            );
            assert!(!r.ok());
        }
    }

    #[test]
    fn parses_delays_and_workloads() {
        assert_eq!(Delay::parse("unit").unwrap(), Delay::Unit);
        assert_eq!(
            Delay::parse("uniform:1:5").unwrap(),
            Delay::Uniform { min: 1, max: 5 }
        );
        for bad in ["", "uniform:5:1", "uniform:1", "gauss:1:2", "uniform:a:2"] {
            assert!(Delay::parse(bad).is_err(), "{bad}");
        }
        assert_eq!(Workload::parse("sequential").unwrap(), Workload::Sequential);
        assert!(Workload::parse("parallel").is_err());
    }

    #[test]
    fn runs_are_reproducible_by_seed() {
        let t = Topology::ring(6).unwrap();
        let cfg = SimConfig {
            seed: 9,
            pairs: 3,
            delay: Delay::Uniform { min: 1, max: 7 },
            ..SimConfig::default()
        };
        let (inst, procs) = lmutin(&t, 1);
        let a = simulate(&inst, procs.clone(), &cfg);
        let b = simulate(&inst, procs, &cfg);
        assert!(a.ok(), "{}", a.failure_text());
        assert_eq!(
            (a.messages, a.end_time, a.events),
            (b.messages, b.end_time, b.events)
        );
        assert_eq!(a.pairs, b.pairs);
    }

    #[test]
    fn sequential_unit_run_counts_exactly() {
        let t = Topology::ring(5).unwrap();
        let (inst, procs) = lmutin(&t, 1);
        let cfg = SimConfig {
            pairs: 2,
            workload: Workload::Sequential,
            ..SimConfig::default()
        };
        let r = simulate(&inst, procs, &cfg);
        assert!(r.ok(), "{}", r.failure_text());
        assert_eq!(r.pairs_completed, 10);
        // ring: |N_i|+1 = 3, so 9 messages per pair, 6 of them remote
        assert!(r
            .pairs
            .iter()
            .all(|p| p.messages == 9 && p.remote_messages == 6));
        // Request and Grant take one unit each; Entry completes at once
        assert_eq!(r.waiting_time.exit_max, 2.0);
        assert_eq!(r.waiting_time.entry_max, 0.0);
    }

    #[test]
    fn observer_catches_an_unsafe_algorithm() {
        // the printed initial grants on a triangle with l = 1 and only P0 in the CS
        let t = Topology::complete(3).unwrap();
        let init = [CsState::InCs, CsState::OutCs, CsState::OutCs];
        let (inst, procs) = Lmutin::system(&t, &[1, 1, 1], &init, LmutinRules::PRINTED).unwrap();
        // some seed lets P0 exit while P1 and P2 are still out of the CS
        let r = (0..50)
            .map(|seed| {
                let cfg = SimConfig {
                    seed,
                    pairs: 1,
                    think_max: 20,
                    ..SimConfig::default()
                };
                simulate(&inst, procs.clone(), &cfg)
            })
            .find(|r| r.safety_violations > 0)
            .expect("the printed initial grants break l = 1 for some seed");
        assert!(!r.ok());
        assert!(r.failure_text().contains(&format!("seed {}", r.seed)));
        assert!(!r.trace.is_empty());
    }
}
