//! The stateright search ([`Search::Stateright`](super::Search::Stateright)): the same model
//! as [`explore`](super::explore) states, as a stateright [`ActorModel`], to cross-check the
//! checker's own search against an independent one.

use super::{deadlocked, CheckConfig, Limit, Network, Outcome, PathStep};
use crate::config::Instance;
use crate::cs::{CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;
use stateright::actor::{
    model_timeout, Actor, ActorModel, ActorModelAction, Id, Network as SrNetwork, Out,
};
use stateright::{Checker, Expectation, HasDiscoveries, Model};
use std::borrow::Cow;

/// One process of the stateright model: its CS object and how many sequences it has
/// started (whether its client step is enabled is stateright's timer).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct SrNode<A> {
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
    fn apply(&self, node: &SrNode<A>, mut out: Outbox<A::Msg>, o: &mut Out<Self>) {
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
    type State = SrNode<A>;
    type Timer = Step;
    type Random = ();
    type Storage = ();

    fn on_start(&self, _id: Id, _storage: &Option<()>, o: &mut Out<Self>) -> SrNode<A> {
        if self.sequences > 0 {
            o.set_timer(Step, model_timeout());
        }
        SrNode {
            obj: self.init.clone(),
            started: 0,
            call_error: None,
        }
    }

    fn on_msg(
        &self,
        _id: Id,
        state: &mut Cow<'_, SrNode<A>>,
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

    fn on_timeout(
        &self,
        _id: Id,
        state: &mut Cow<'_, SrNode<A>>,
        _timer: &Step,
        o: &mut Out<Self>,
    ) {
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
        .all(|n| n.call_error.is_none() && n.obj.check_invariants().is_ok())
}

fn no_deadlock<A: CsObject>(m: &Model_<A>, s: &State_<A>) -> bool {
    let quiet = s.timers_set.iter().all(|t| t.iter().next().is_none())
        && match &s.network {
            SrNetwork::UnorderedDuplicating(..) => replays_change_nothing(s),
            _ => s.network.len() == 0,
        };
    if !quiet || s.actor_states.iter().any(|n| n.obj.pending().is_none()) {
        return true;
    }
    !deadlocked(&m.cfg, &states_of(s))
}

/// On a duplicating network: whether delivering any message in flight again leaves its
/// receiver as it is and sends only messages already in flight.
fn replays_change_nothing<A: CsObject>(s: &State_<A>) -> bool {
    let in_flight: std::collections::HashSet<(usize, usize, &A::Msg)> = s
        .network
        .iter_deliverable()
        .map(|e| (usize::from(e.src), usize::from(e.dst), e.msg))
        .collect();
    s.network.iter_deliverable().all(|e| {
        let dst = usize::from(e.dst);
        let before = &s.actor_states[dst].obj;
        let mut obj = before.clone();
        let mut out = Outbox::new();
        obj.on_message(ProcessId::from(usize::from(e.src)), e.msg.clone(), &mut out);
        obj == *before
            && out
                .drain()
                .all(|(to, m)| in_flight.contains(&(dst, to.index(), &m)))
    })
}

/// Runs stateright's checker; returns the outcome, unique states and the maximal depth.
pub(super) fn search<A: CsObject>(
    instance: &Instance,
    procs: Vec<A>,
    sequences: usize,
    cfg: &CheckConfig,
) -> (Outcome, usize, usize) {
    let model: Model_<A> = ActorModel::new(instance.clone(), ())
        .actors(procs.into_iter().map(|init| ProcActor { init, sequences }))
        .init_network(match cfg.network {
            Network::Fifo => SrNetwork::new_ordered(vec![]),
            Network::Unordered => SrNetwork::new_unordered_nonduplicating(vec![]),
            Network::Duplicating => SrNetwork::new_unordered_duplicating(vec![]),
        })
        .property(Expectation::Always, "safety", safe::<A>)
        .property(Expectation::Always, "invariants", invariants_hold::<A>)
        .property(Expectation::Always, "no deadlock", no_deadlock::<A>);
    let builder = model
        .checker()
        .threads(cfg.threads.max(1))
        .finish_when(HasDiscoveries::AnyFailures);
    let builder = match cfg.max_states {
        Some(max) => builder.target_state_count(max.max(1)),
        None => builder,
    };
    let checker = builder.spawn_dfs().join();
    let (states, max_depth) = (checker.unique_state_count(), checker.max_depth());
    for property in ["safety", "invariants", "no deadlock"] {
        if let Some(path) = checker.discovery(property) {
            let path = path
                .into_vec()
                .into_iter()
                .map(|(state, action)| {
                    let step = match action {
                        Some(ActorModelAction::Deliver { src, dst, msg }) => {
                            Some(PathStep::Deliver {
                                src: usize::from(src),
                                dst: usize::from(dst),
                                msg: format!("{msg:?}"),
                            })
                        }
                        Some(ActorModelAction::Timeout(id, _)) => {
                            Some(PathStep::Client(usize::from(id)))
                        }
                        _ => None,
                    };
                    (states_of(&state), step)
                })
                .collect();
            return (Outcome::Violated { property, path }, states, max_depth);
        }
    }
    let bounded = cfg
        .max_states
        .is_some_and(|max| checker.state_count() >= max);
    let outcome = if bounded {
        Outcome::Bounded(Limit::States)
    } else {
        Outcome::Complete
    };
    (outcome, states, max_depth)
}
