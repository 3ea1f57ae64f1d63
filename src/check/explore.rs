//! The checker's own explorer: a depth-first search over the model's states with a set of
//! 128-bit state fingerprints, optionally with the partial-order reduction described in the
//! module doc of [`crate::check`].
//!
//! Representation. Every distinct local state of a process (its object and client) is stored
//! once, in an arena, and a global state names its processes by their arena index; so a
//! global state is a fixed array of indices plus the messages in flight, and copying it
//! allocates once. A local step (a process taking one message, or its client step) is
//! computed once per local state and input and remembered: the search mostly replays
//! remembered steps instead of cloning and running objects.

mod model;
mod reduce;
mod tables;

use super::{deadlocked, Limit, Network, Outcome, Path, Progress, MAX_CHECK_PROCESSES};
use crate::config::Instance;
use crate::cs::{CsObject, CsState};
use model::{Act, Node, Sys, World};
pub(super) use reduce::harmless_moves;
use reduce::{Commute, Harmless, Solo};
use std::collections::HashMap;
use std::hash::BuildHasherDefault;
use std::time::{Duration, Instant};
use tables::{fingerprint, table_bytes, table_growth, vec_growth, FpSet, IdHasher, Visited};

/// A global state as the search's callback sees it.
#[cfg_attr(not(test), allow(dead_code))]
pub(super) struct View<'a, A: CsObject> {
    sys: &'a Sys<A>,
    world: &'a World<A>,
}

impl<A: CsObject> View<'_, A> {
    /// The observation the reduction preserves: every process's published state and whether
    /// its invariants hold.
    #[cfg(test)]
    pub(super) fn observation(&self) -> Vec<(CsState, bool)> {
        (0..self.sys.n())
            .map(|p| {
                let l = self.sys.local(self.world, p);
                (l.cs, l.ok)
            })
            .collect()
    }

    /// Whether nothing is enabled.
    #[cfg(test)]
    pub(super) fn quiet(&self) -> bool {
        self.sys.quiet(self.world)
    }

    /// Every process's published state.
    #[cfg(test)]
    pub(super) fn cs_states(&self) -> Vec<CsState> {
        self.sys.cs_states(self.world)
    }
}

/// New states between two readings of the resident memory while it grows slowly.
const RESIDENT_EVERY: usize = 1 << 12;

/// The process's resident memory in bytes (`VmRSS` in `/proc/self/status`; `None` where it
/// cannot be read).
fn resident_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: usize = line["VmRSS:".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The depth-first stack.
type Stack<A> = Vec<Frame<A>>;

/// Bytes the messages in flight of `s` take on the heap.
fn msgs_heap<A: CsObject>(s: &Sys<A>) -> usize {
    s.msgs.capacity() * std::mem::size_of::<(u16, A::Msg)>()
}

/// One state on the depth-first stack, with the successors still to visit.
struct Frame<A: CsObject> {
    state: Sys<A>,
    fp: u128,
    /// Successors along the selected actions, explored from the back.
    todo: Vec<(Act, Sys<A>, u128)>,
    /// The action taken from this state towards the next frame.
    taken: Option<Act>,
}

/// Search statistics.
pub(super) struct Stats {
    pub(super) unique: usize,
    pub(super) generated: usize,
    pub(super) max_depth: usize,
    /// States expanded along a commuting delivery (see [`crate::check`]).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(super) commuting: usize,
}

/// A callback that receives a progress report every 2^16 generated states.
pub(super) type ProgressFn<'a> = &'a mut dyn FnMut(&Progress);

/// A callback that sees every state a search reaches.
pub(super) type Visit<'a, A> = &'a mut dyn FnMut(&View<'_, A>);

/// The explorer. `reduce` turns the partial-order reduction on; `visit` sees every state
/// the search reaches (tests compare what the two searches see).
pub(super) struct Explorer<'a, A: CsObject> {
    instance: &'a Instance,
    sequences: usize,
    reduce: bool,
    max_states: Option<usize>,
    /// Stop before the tables would grow past this many bytes.
    max_memory: Option<usize>,
    /// With [`crate::check::CheckConfig::count_resident`]: the process's resident bytes
    /// when the search started, and the growth since then not counted by the tables, as
    /// last read.
    resident: Option<(usize, usize)>,
    /// New states between two readings of the resident memory, and how many are left
    /// before the next: 4,096 while it grows slowly, down to 1 while it grows by more than
    /// 1/64 of the budget between readings.
    resident_every: (usize, usize),
    /// Stop once this much time has passed since this instant.
    deadline: Option<(Instant, Duration)>,
    /// The links' delivery discipline.
    network: Network,
    /// Bytes the frames on the depth-first stack hold on the heap: their successor lists
    /// and the messages in flight of their states and successors.
    stack_heap: usize,
    progress: Option<ProgressFn<'a>>,
    visit: Option<Visit<'a, A>>,
    /// Per process: the processes it may send to (its closed neighbourhood), a bit set.
    peers: Vec<u64>,
    solo_memo: HashMap<u128, Solo, BuildHasherDefault<IdHasher>>,
    /// Remembered explorations of [`Explorer::commute`].
    commute_memo: HashMap<u128, Commute, BuildHasherDefault<IdHasher>>,
    /// Per process: whether a move into each published state is harmless (see
    /// [`harmless_moves`]).
    harmless: Vec<Harmless>,
    /// Per set of processes in the CS (a bit set): whether a bound fails.
    unsafe_mask: Vec<bool>,
    /// Per set of processes in the CS: whether a quiet state in which every process is
    /// blocked is a deadlock (computed when first needed).
    deadlock_mask: Vec<Option<bool>>,
}

impl<'a, A: CsObject> Explorer<'a, A> {
    /// An explorer of `instance` with `sequences` client sequences per process.
    pub(super) fn new(
        instance: &'a Instance,
        sequences: usize,
        reduce: bool,
        max_states: Option<usize>,
        visit: Option<Visit<'a, A>>,
    ) -> Self {
        let topology = instance.topology();
        let n = topology.len();
        let peers = topology
            .processes()
            .map(|p| topology.closed(p).iter().fold(0, |m, q| m | 1 << q.index()))
            .collect();
        let states = |mask: usize| -> Vec<CsState> {
            (0..n)
                .map(|p| {
                    if mask & (1 << p) != 0 {
                        CsState::InCs
                    } else {
                        CsState::OutCs
                    }
                })
                .collect()
        };
        let configs = if n <= MAX_CHECK_PROCESSES { 1 << n } else { 0 };
        Explorer {
            instance,
            sequences,
            reduce,
            max_states,
            max_memory: None,
            resident: None,
            resident_every: (RESIDENT_EVERY, RESIDENT_EVERY),
            deadline: None,
            network: Network::Fifo,
            stack_heap: 0,
            progress: None,
            visit,
            peers,
            solo_memo: Default::default(),
            commute_memo: Default::default(),
            harmless: harmless_moves(instance),
            unsafe_mask: (0..configs)
                .map(|m| !instance.violations(&states(m)).is_empty())
                .collect(),
            deadlock_mask: vec![None; configs],
        }
    }

    /// Stops the search (a bounded check) before its tables would hold more than `bytes`
    /// bytes; see [`Explorer::over_budget`].
    pub(super) fn with_memory_budget(mut self, bytes: Option<usize>, resident: bool) -> Self {
        self.max_memory = bytes;
        self.resident = if resident && bytes.is_some() {
            resident_bytes().map(|start| (start, 0))
        } else {
            None
        };
        self
    }

    /// Counts one new state; when it is time, reads the process's resident memory again
    /// and keeps its growth beyond `counted` (see [`Explorer::resident_every`]).
    fn measure_resident(&mut self, counted: usize) {
        let (every, left) = &mut self.resident_every;
        *left -= 1;
        if *left > 0 {
            return;
        }
        if let (Some((start, extra)), Some(now)) = (self.resident.as_mut(), resident_bytes()) {
            let before = *extra;
            *extra = now.saturating_sub(*start).saturating_sub(counted);
            let fast = extra.saturating_sub(before) > self.max_memory.unwrap_or(0) / 64;
            *every = if fast {
                (*every / 4).max(1)
            } else {
                (*every * 2).min(RESIDENT_EVERY)
            };
        }
        *left = *every;
    }

    /// Stops the search (a bounded check, [`Limit::Time`]) once `budget` has passed since
    /// `start`.
    pub(super) fn with_deadline(mut self, deadline: Option<(Instant, Duration)>) -> Self {
        self.deadline = deadline;
        self
    }

    /// Delivers messages as `network` does.
    pub(super) fn with_network(mut self, network: Network) -> Self {
        self.network = network;
        self
    }

    /// Sends a progress report to the callback, if any.
    pub(super) fn with_progress(mut self, progress: Option<ProgressFn<'a>>) -> Self {
        self.progress = progress;
        self
    }

    /// Bytes the search holds, by the capacity of every table: the visited and on-stack
    /// fingerprint sets, the arena with its remembered steps, the solo memo, and the
    /// depth-first stack with what its frames hold on the heap (what a local state or a
    /// message allocates on the heap is not counted).
    fn bytes(&self, w: &World<A>, visited: &Visited, on_stack: &FpSet, stack: &Stack<A>) -> usize {
        visited.bytes()
            + table_bytes::<u128>(on_stack.capacity())
            + table_bytes::<(u128, Solo)>(self.solo_memo.capacity())
            + table_bytes::<(u128, Commute)>(self.commute_memo.capacity())
            + stack.capacity() * std::mem::size_of::<Frame<A>>()
            + self.stack_heap
            + w.bytes()
    }

    /// Bytes the search may allocate on top of [`Explorer::bytes`] before the next check:
    /// the growth step of every table close to growing, and of the largest visited table.
    fn growth(&self, w: &World<A>, visited: &Visited, on_stack: &FpSet, stack: &Stack<A>) -> usize {
        visited.growth()
            + table_growth::<u128>(on_stack.len(), on_stack.capacity(), 1)
            + table_growth::<(u128, Solo)>(
                self.solo_memo.len(),
                self.solo_memo.capacity(),
                MAX_CHECK_PROCESSES,
            )
            + table_growth::<(u128, Commute)>(
                self.commute_memo.len(),
                self.commute_memo.capacity(),
                MAX_CHECK_PROCESSES * MAX_CHECK_PROCESSES,
            )
            + vec_growth::<Frame<A>>(stack.len(), stack.capacity(), 1)
            + w.growth()
    }

    /// Whether the search could pass the memory budget before the next check: what it holds
    /// and what its tables' next growth steps may allocate. Checked before every state is
    /// expanded.
    fn over_budget(
        &self,
        w: &World<A>,
        visited: &Visited,
        on_stack: &FpSet,
        stack: &Stack<A>,
    ) -> bool {
        self.max_memory.is_some_and(|budget| {
            self.bytes(w, visited, on_stack, stack)
                + self.growth(w, visited, on_stack, stack)
                + self.resident.map_or(0, |(_, extra)| extra)
                > budget
        })
    }

    /// Whether the time budget has run out.
    fn out_of_time(&self) -> bool {
        self.deadline
            .is_some_and(|(start, budget)| start.elapsed() >= budget)
    }

    /// Bytes a frame holds on the heap (see [`Explorer::stack_heap`]).
    fn frame_heap(f: &Frame<A>) -> usize {
        f.todo.capacity() * std::mem::size_of::<(Act, Sys<A>, u128)>()
            + msgs_heap(&f.state)
            + f.todo.iter().map(|(_, t, _)| msgs_heap(t)).sum::<usize>()
    }

    /// The first property `s` fails, if any.
    fn violated(&mut self, w: &World<A>, s: &Sys<A>) -> Option<&'static str> {
        let mask = s.cs_mask(w);
        if self.unsafe_mask.get(mask).copied().unwrap_or(false) {
            Some("safety")
        } else if !(0..s.n()).all(|p| s.local(w, p).ok) {
            Some("invariants")
        } else if (0..s.n()).all(|p| s.local(w, p).pending) && s.quiet(w) && {
            let instance = self.instance;
            let states = s.cs_states(w);
            *self.deadlock_mask[mask].get_or_insert_with(|| deadlocked(instance, &states))
        } {
            Some("no deadlock")
        } else {
            None
        }
    }

    /// Runs the search from the system `procs` (process `i` at index `i`).
    pub(super) fn run(mut self, procs: Vec<A>) -> (Outcome, Stats) {
        let n = procs.len();
        assert!(n <= MAX_CHECK_PROCESSES, "checked by the caller");
        let mut w = World {
            locals: Vec::new(),
            ids: Default::default(),
            steps: Default::default(),
            sends: Vec::new(),
            sequences: self.sequences,
            network: self.network,
        };
        let mut locals = [0u32; MAX_CHECK_PROCESSES];
        for (i, obj) in procs.into_iter().enumerate() {
            locals[i] = w.intern(Node {
                obj,
                started: 0,
                armed: self.sequences > 0,
                call_error: None,
                peers: self.peers[i],
                stray: false,
            });
        }
        let init = Sys {
            locals,
            n: n as u8,
            msgs: Vec::new(),
        };
        let mut visited = Visited::new();
        let mut on_stack = FpSet::default();
        let mut stats = Stats {
            unique: 1,
            generated: 1,
            max_depth: 1,
            commuting: 0,
        };
        let fp = fingerprint(&init);
        visited.insert(fp);
        if let Some(v) = self.visit.as_mut() {
            v(&View {
                sys: &init,
                world: &w,
            });
        }
        if let Some(property) = self.violated(&w, &init) {
            let path = vec![(init.cs_states(&w), None)];
            return (Outcome::Violated { property, path }, stats);
        }
        on_stack.insert(fp);
        let todo = self.expand(&mut w, &init, &on_stack, &mut stats);
        let mut stack: Stack<A> = Vec::new();
        let frame = Frame {
            state: init,
            fp,
            todo,
            taken: None,
        };
        self.stack_heap += Self::frame_heap(&frame);
        stack.push(frame);
        while let Some(top) = stack.last_mut() {
            let Some((act, next, fp)) = top.todo.pop() else {
                on_stack.remove(&top.fp);
                self.stack_heap -= Self::frame_heap(top);
                stack.pop();
                continue;
            };
            self.stack_heap -= msgs_heap(&next);
            stats.generated += 1;
            if stats.generated.is_multiple_of(1 << 16) && self.progress.is_some() {
                let memory = self.bytes(&w, &visited, &on_stack, &stack);
                if let Some(report) = self.progress.as_mut() {
                    report(&Progress {
                        states: stats.unique,
                        generated: stats.generated,
                        max_depth: stats.max_depth,
                        memory,
                    });
                }
            }
            if stats.generated.is_multiple_of(1 << 10) && self.out_of_time() {
                return (Outcome::Bounded(Limit::Time), stats);
            }
            let Some(top) = stack.last_mut() else {
                unreachable!("the loop holds a frame")
            };
            if !visited.insert(fp) {
                continue;
            }
            stats.unique += 1;
            top.taken = Some(act);
            if let Some(v) = self.visit.as_mut() {
                v(&View {
                    sys: &next,
                    world: &w,
                });
            }
            if let Some(property) = self.violated(&w, &next) {
                let mut path: Path = stack
                    .iter()
                    .map(|f| {
                        let a = f.taken.expect("every frame below the top took a step");
                        (f.state.cs_states(&w), Some(f.state.describe(a)))
                    })
                    .collect();
                path.push((next.cs_states(&w), None));
                return (Outcome::Violated { property, path }, stats);
            }
            if self.max_states.is_some_and(|m| stats.generated >= m) {
                return (Outcome::Bounded(Limit::States), stats);
            }
            if self.resident.is_some() {
                let counted = self.bytes(&w, &visited, &on_stack, &stack);
                self.measure_resident(counted);
            }
            if self.over_budget(&w, &visited, &on_stack, &stack) {
                return (Outcome::Bounded(Limit::Memory), stats);
            }
            on_stack.insert(fp);
            let todo = self.expand(&mut w, &next, &on_stack, &mut stats);
            let frame = Frame {
                state: next,
                fp,
                todo,
                taken: None,
            };
            self.stack_heap += Self::frame_heap(&frame);
            stack.push(frame);
            stats.max_depth = stats.max_depth.max(stack.len());
        }
        (Outcome::Complete, stats)
    }
}
