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

mod overtaking;
mod queue;
mod report;
mod sequential;
mod stop;

use crate::config::{Instance, Observed};
use crate::cs::{CsObject, CsState, Message, Outbox, Sequence};
use crate::error::{ConfigError, Problem};
use crate::fnv::Fnv;
use crate::id::ProcessId;
use crate::metrics::{PairRecord, Stats, Waiting};
use crate::topology::Topology;
use overtaking::Overtaking;
use queue::EventQueue;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
pub use report::{Delay, SimConfig, SimReport, Violation, Workload, MAX_DELAY};
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
        let prefetching = PREFETCH.load(std::sync::atomic::Ordering::Relaxed);
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
            if let Some(next) = prefetching.then(|| self.queue.peek_now(1)).flatten() {
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
            .filter(|&(_, &(p, index))| index < self.track[p.index()].completed / 2)
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

/// Whether [`simulate`] prefetches the process of the event after next (on unless
/// [`set_prefetch`] turned it off).
static PREFETCH: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(true);

/// Turns the engine's prefetch of the event after next's process on or off for every later
/// run in this process: a hint to the CPU with no effect on any output or trace hash, here
/// so that `benches/sim.rs` measures its gain in one run. Not for applications.
#[doc(hidden)]
pub fn set_prefetch(on: bool) {
    PREFETCH.store(on, std::sync::atomic::Ordering::Relaxed);
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
mod tests;
