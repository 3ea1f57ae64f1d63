//! The exhaustive checker (DESIGN §2.4): every interleaving of FIFO deliveries and client
//! steps on a small instance, over the same sans-IO CS objects the simulator and the runtime
//! drive, explored breadth-first by [stateright](https://docs.rs/stateright).
//!
//! Model: one stateright actor per process wraps its [`CsObject`]; the network is
//! `Network::new_ordered` (FIFO per link, self-links included); a client step (the process
//! starting its Exit or Entry) is a timer that may fire at any point while the process has
//! sequences left, so it interleaves with every delivery. Each process runs `pairs` pairs,
//! which bounds the space.
//!
//! Properties, in every reachable state:
//! - **safety**: l_i ≤ |CS_i| ≤ k_i for every process;
//! - **invariants**: every object's own invariants ([`CsObject::check_invariants`], e.g. an
//!   arbiter's cap);
//! - **no deadlock**: a state with nothing in flight in which every process is blocked in a
//!   pending sequence is a deadlock when some non-empty set of them could change state
//!   together and keep every bound: the specification allows the move, the algorithm never
//!   makes it. A process that has run its pairs stops; the papers' liveness assumes every
//!   process eventually moves again (e.g. an LMUTIN process out of the CS eventually enters
//!   and releases its permissions), so a wait on a stopped process is not reported: a bounded
//!   client cannot tell it from progress that is merely postponed.
//!
//! Liveness on cycles is left to the simulator: stateright's `eventually` is unreliable on
//! cycles, and the bounded client makes every run finite anyway.
//!
//! Symmetry reduction is not used: every algorithm here breaks ties between equal clocks by
//! process id, so permuting ids does not map behaviours onto behaviours, and a reduction
//! would be unsound.

use crate::config::Instance;
use crate::cs::{CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;
use serde::Serialize;
use stateright::actor::{model_timeout, Actor, ActorModel, ActorModelAction, Id, Network, Out};
use stateright::{Checker, Expectation, HasDiscoveries, Model};
use std::borrow::Cow;
use std::time::{Duration, Instant};

/// The largest system [`check`] explores; beyond it the state space is out of reach anyway.
pub const MAX_CHECK_PROCESSES: usize = 12;

/// Checker settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckConfig {
    /// Pairs each process runs.
    pub pairs: usize,
    /// Stop after generating this many states, duplicates included (the result is then a
    /// bounded check); `None` explores everything.
    pub max_states: Option<usize>,
    /// Worker threads.
    pub threads: usize,
}

impl Default for CheckConfig {
    fn default() -> Self {
        CheckConfig {
            pairs: 1,
            max_states: None,
            threads: std::thread::available_parallelism().map_or(1, usize::from),
        }
    }
}

/// The checker's verdict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum Verdict {
    /// Every reachable state satisfies every property.
    Proved,
    /// The state budget ran out first: no violation among the states explored (a depth-first
    /// exploration, so the unexplored part lies off the explored paths).
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

/// One process of the model: its CS object and how many sequences it has started.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Node<A> {
    obj: A,
    started: usize,
    /// A calling-convention error the object returned to a client step (a driver or object
    /// bug); it fails the `invariants` property.
    call_error: Option<CallError>,
}

/// The stateright actor wrapping process `init.id()`.
#[derive(Clone)]
struct ProcActor<A> {
    init: A,
    sequences: usize,
}

/// The client step: start the next sequence.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
struct Step;

impl<A: CsObject> ProcActor<A> {
    fn apply(&self, node: &Node<A>, mut out: Outbox<A::Msg>, o: &mut Out<Self>) {
        for (to, msg) in out.drain() {
            o.send(Id::from(to.index()), msg);
        }
        if out.completed() && node.started < self.sequences {
            o.set_timer(Step, model_timeout());
        }
    }
}

impl<A: CsObject> Actor for ProcActor<A> {
    type Msg = A::Msg;
    type State = Node<A>;
    type Timer = Step;
    type Random = ();
    type Storage = ();

    fn on_start(&self, _id: Id, _storage: &Option<()>, o: &mut Out<Self>) -> Node<A> {
        if self.sequences > 0 {
            o.set_timer(Step, model_timeout());
        }
        Node {
            obj: self.init.clone(),
            started: 0,
            call_error: None,
        }
    }

    fn on_msg(
        &self,
        _id: Id,
        state: &mut Cow<'_, Node<A>>,
        src: Id,
        msg: A::Msg,
        o: &mut Out<Self>,
    ) {
        let mut out = Outbox::new();
        let node = state.to_mut();
        node.obj
            .on_message(ProcessId::from(usize::from(src)), msg, &mut out);
        self.apply(node, out, o);
    }

    fn on_timeout(&self, _id: Id, state: &mut Cow<'_, Node<A>>, _timer: &Step, o: &mut Out<Self>) {
        let mut out = Outbox::new();
        let node = state.to_mut();
        let seq = Sequence::leaving(node.obj.state());
        node.started += 1;
        // the driver only steps a process whose previous sequence completed, so the calling
        // convention holds; an error here is a bug, recorded to fail `invariants`
        if let Err(e) = node.obj.begin(seq, &mut out) {
            node.call_error = Some(e);
        }
        self.apply(node, out, o);
    }
}

type Model_<A> = ActorModel<ProcActor<A>, Instance, ()>;
type State_<A> = stateright::actor::ActorModelState<ProcActor<A>, ()>;

fn states_of<A: CsObject>(s: &State_<A>) -> Vec<CsState> {
    s.actor_states.iter().map(|n| n.obj.state()).collect()
}

fn safe<A: CsObject>(m: &Model_<A>, s: &State_<A>) -> bool {
    m.cfg.violations(&states_of(s)).is_empty()
}

fn invariants_hold<A: CsObject>(_: &Model_<A>, s: &State_<A>) -> bool {
    s.actor_states
        .iter()
        .all(|n| n.obj.check_invariants().is_ok())
}

fn no_deadlock<A: CsObject>(m: &Model_<A>, s: &State_<A>) -> bool {
    let quiet = s.network.len() == 0 && s.timers_set.iter().all(|t| t.iter().next().is_none());
    if !quiet {
        return true;
    }
    if s.actor_states.iter().any(|n| n.obj.pending().is_none()) {
        return true;
    }
    let pending: Vec<usize> = (0..s.actor_states.len()).collect();
    let base = states_of(s);
    // some non-empty subset of the pending processes could move together safely?
    let Some(subsets) = 1u64.checked_shl(pending.len() as u32) else {
        return true; // beyond MAX_CHECK_PROCESSES: not evaluated
    };
    !(1..subsets).any(|mask| {
        let mut states = base.clone();
        for (bit, &p) in pending.iter().enumerate() {
            if mask & (1 << bit) != 0 {
                states[p] = !states[p];
            }
        }
        m.cfg.violations(&states).is_empty()
    })
}

/// Explores every interleaving of the system and checks the properties. `procs[i]` must be
/// process `i`; `instance` gives the bounds.
///
/// A mismatched system (see [`crate::check_system`]) or one of more than
/// [`MAX_CHECK_PROCESSES`] processes is not explored: the verdict is `Violated` with property
/// `setup: ...`.
pub fn check<A: CsObject>(instance: &Instance, procs: Vec<A>, cfg: &CheckConfig) -> CheckReport {
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
        };
    }
    let sequences = 2 * cfg.pairs;
    let model: Model_<A> = ActorModel::new(instance.clone(), ())
        .actors(procs.into_iter().map(|init| ProcActor { init, sequences }))
        .init_network(Network::new_ordered(vec![]))
        .property(Expectation::Always, "safety", safe::<A>)
        .property(Expectation::Always, "invariants", invariants_hold::<A>)
        .property(Expectation::Always, "no deadlock", no_deadlock::<A>);
    let start = Instant::now();
    let builder = model
        .checker()
        .threads(cfg.threads.max(1))
        .finish_when(HasDiscoveries::AnyFailures);
    let builder = match cfg.max_states {
        Some(max) => builder.target_state_count(max.max(1)),
        None => builder,
    };
    let checker = builder.spawn_dfs().join();
    let elapsed = start.elapsed();
    let (states, max_depth) = (checker.unique_state_count(), checker.max_depth());
    for property in ["safety", "invariants", "no deadlock"] {
        if let Some(path) = checker.discovery(property) {
            let counterexample = describe(checker.model(), path.into_vec());
            return CheckReport {
                verdict: Verdict::Violated {
                    property: property.to_string(),
                },
                states,
                max_depth,
                elapsed,
                counterexample,
            };
        }
    }
    let bounded = cfg
        .max_states
        .is_some_and(|max| checker.state_count() >= max);
    CheckReport {
        verdict: if bounded {
            Verdict::Bounded
        } else {
            Verdict::Proved
        },
        states,
        max_depth,
        elapsed,
        counterexample: Vec::new(),
    }
}

type Action_<A> = ActorModelAction<<A as CsObject>::Msg, Step, ()>;

fn describe<A: CsObject>(m: &Model_<A>, path: Vec<(State_<A>, Option<Action_<A>>)>) -> Vec<String> {
    let mut lines = Vec::new();
    let mut prev: Option<Vec<CsState>> = None;
    for (i, (state, action)) in path.into_iter().enumerate() {
        let now = states_of(&state);
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
        match action {
            Some(ActorModelAction::Deliver { src, dst, msg }) => {
                lines.push(format!(
                    "{:>4}. P{} -> P{}: {:?}",
                    i + 1,
                    usize::from(src),
                    usize::from(dst),
                    msg
                ));
            }
            Some(ActorModelAction::Timeout(id, _)) => {
                let p = usize::from(id);
                let seq = Sequence::leaving(now[p]);
                lines.push(format!("{:>4}. P{p} starts its {seq:?}-Sequence", i + 1));
            }
            Some(other) => lines.push(format!("{:>4}. {other:?}", i + 1)),
            None => {}
        }
        prev = Some(now);
    }
    if let Some(last) = prev {
        for v in m.cfg.violations(&last) {
            lines.push(format!("violated: {v}"));
        }
    }
    lines
}
