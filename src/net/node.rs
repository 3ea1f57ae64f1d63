//! A node: one member's CS object driven by its [`Net`], and the application's
//! [`NodeHandle`].
//!
//! The object is handled one input at a time, atomically, under the node's lock: a call from
//! the handle (`begin_entry` / `begin_exit`), run on the calling thread, or a message from a
//! link (`on_message`), run by the node task. A call whose move completes at once (an exit of
//! a mutual exclusion) returns without waking the node's thread, and the messages a call sends
//! are queued to the links before it returns, so an exit and the entry after it often leave in
//! one write. The object's sends go to the links (a send to itself is handled next, in order,
//! without the network; a send to a member that is not a peer is dropped and logged), and its
//! completion answers the waiting call. The [`Observer`] sees every change of the published
//! state inside the handler that made it, before any message that handler sends leaves the
//! node: a monitor counting members in the CS from it never undercounts.
//!
//! A call waiting on a peer that becomes unreachable (or whose link is lost) returns
//! [`NodeError::PeerUnreachable`] naming it; the peers waited on are the object's
//! [`awaiting`](crate::cs::CsObject::awaiting) set, or every unreachable peer when the algorithm
//! does not say. The move keeps running: the next call of the same kind waits for it again,
//! and returns at once once it completed.
//!
//! # Ending a run together
//! A member that stops answering can hold the others back for good (the last member in the
//! CS under a lower bound cannot leave while everyone else is out and idle), so a workload
//! ends for every member at once: [`NodeHandle::finish`] says this member made its own
//! moves, the nodes flood the set of finished members to their neighbours
//! ([`Wire::Finished`]), and once every member of the cluster has finished each node says
//! [`Wire::Bye`] to its neighbours. [`NodeHandle::status`] tells when every member finished
//! and when every neighbour said bye (or is unreachable): from then on no neighbour needs
//! this node, and its process may exit.
//!
//! # Views
//! A node started with [`Node::spawn_with_views`] runs the cluster's view log
//! ([`crate::net::view`]) beside its object, over the same links ([`Wire::View`]), and its
//! object's messages carry their view ([`Wire::InView`]). Every member proposes to evict a
//! member whose link stayed unreachable for [`ViewOptions::evict_after`]. Once a change is
//! committed, the object is **frozen** (it handles no message of its view and starts no move;
//! a call waits), the member **reports** its stable state (the published one: entering
//! counts as out, exiting as in), and once the log installs the next view the object is
//! **rebuilt** for it from the agreed start ([`Rebuild`]; the view's system is renumbered,
//! and the node translates ids at its links), the messages of the new view that came early
//! are handled, and a waiting call starts its move again: the application sees a longer
//! wait. A member the new view leaves out fences: its calls return [`NodeError::Evicted`].
//! In a view that lowered a lower bound (a deficit view) the exits of the members that bound
//! counts wait.
//!
//! Evicting on silence is safe for a member that is only paused or cut off, not only for one
//! that crashed, because of **leases**: a member beats every member of its view each
//! [`ViewOptions::heartbeat`]; once a majority answered a beat, it may act on its slot until
//! [`ViewOptions::lease`] after that beat went out, and it fences when that runs out (on a
//! timer, and whenever an entry completes). A member stops answering the beats of a member a
//! committed change removes, and reports only once [`ViewOptions::evict_after`] has passed
//! since it last answered it; reports name the change's round, so a change that grows needs
//! fresh ones. With `lease·(1+ρ)` below `evict_after·(1−ρ)` ([`ViewOptions::check`]), a
//! removed member has fenced before the view that gives its slot away installs. A node
//! starts with no lease: its calls wait until a majority first answers one of its beats (the
//! members may start minutes apart), and only a lease once granted can run out.

use super::link::{LinkGauges, Net, NetEvent, NetSender};
use super::metrics::{CallOutcome, NodeMetrics, Recorder};
use super::{LogEvent, Logger};
use crate::cs::{CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::fnv::Fnv;
use crate::id::ProcessId;
use crate::token::{FencingToken, Tokens};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt;
use std::hash::Hasher;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{oneshot, watch};

mod change;
mod handle;
mod lease;
mod receive;
mod start;
mod views;

pub use lease::{margin_holds, LeaseWatch, CLOCK_DRIFT};

pub use views::{
    rebuild_from, LinkTransport, Rebuild, Rebuilt, ViewFrame, ViewOptions, ViewStatus,
    MAX_VIEW_FRAME,
};
use views::{NodeViews, ViewCore};

/// What a node sends its neighbours: its object's messages, and the few of its own that end
/// a run together (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Wire<M> {
    /// A message of the CS object.
    Cs {
        /// The sender's Lamport clock (for the fencing tokens, [`FencingToken`]).
        clock: u64,
        /// The message.
        msg: M,
    },
    /// The members the sender knows have finished (sorted), as of view `view` (0 without
    /// views): news older than a member's return to the view says nothing about it.
    Finished {
        /// The sender's view.
        view: u64,
        /// The members.
        ids: Vec<ProcessId>,
    },
    /// Every member has finished; the sender needs nothing more from the receiver.
    Bye {
        /// The sender's view (0 without views).
        view: u64,
    },
    /// A message of the view log (an encoded [`ViewFrame`]), between members that run it
    /// ([`Node::spawn_with_views`]).
    View(Vec<u8>),
    /// A message of the CS object of view `view`, between members that run the view log:
    /// the receiver handles it in that view only.
    InView {
        /// The view the sender's object runs in.
        view: u64,
        /// The sender's Lamport clock (for the fencing tokens, [`FencingToken`]).
        clock: u64,
        /// The message.
        msg: M,
    },
}

/// The object's messages on one link, in one direction: how many, and a hash of the whole
/// sequence (FNV-1a over each message's postcard encoding, chained). A sender's and a
/// receiver's counts agree exactly when every message arrived once and in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tally {
    /// Messages.
    pub count: u64,
    /// The chained hash of their encodings.
    pub hash: u64,
}

/// At most this many messages of the next view are kept until it installs.
const MAX_AHEAD: usize = 1 << 16;

/// At most this many network events are handled in a row (each under the lock on its own)
/// before the node task looks whether the node stopped.
const DRAIN_AT_MOST: usize = 256;

impl Default for Tally {
    fn default() -> Self {
        Tally {
            count: 0,
            hash: Fnv::default().finish(),
        }
    }
}

impl Tally {
    fn add<M: Serialize>(&mut self, msg: &M) {
        self.count += 1;
        // the encoding streams through the hash (no buffer), then its length
        let sink = Counted {
            hash: Fnv::resume(self.hash),
            len: 0,
        };
        let mut sink = postcard::to_extend(msg, sink).unwrap_or(Counted {
            // as the hash of an empty encoding
            hash: Fnv::resume(self.hash),
            len: 0,
        });
        let len = sink.len;
        sink.hash.extend(len.to_le_bytes());
        self.hash = sink.hash.finish();
    }
}

/// A hash sink that counts the bytes it is extended with.
struct Counted {
    hash: Fnv,
    len: u64,
}

impl Extend<u8> for Counted {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
        let len = &mut self.len;
        self.hash.extend(bytes.into_iter().inspect(|_| *len += 1));
    }
}

/// The object's messages on the links to one peer, counted until the run's end ([`Wire::Bye`]
/// on each side: the sent tally stops when this node says bye to the peer, the received one
/// when the peer's bye arrives, so in a run that ended together both sides count the same
/// messages).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkTally {
    /// Sent to the peer.
    pub sent: Tally,
    /// Received from the peer.
    pub received: Tally,
}

/// What a node tells its application besides the calls' answers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeStatus {
    /// The node's peers (its neighbours in the topology).
    pub peers: BTreeSet<ProcessId>,
    /// Peers that have connected at least once.
    pub connected: BTreeSet<ProcessId>,
    /// Peers silent beyond the timeout, or whose link is lost.
    pub unreachable: BTreeSet<ProcessId>,
    /// Messages the object sent (to itself included). This and the other counts
    /// ([`NodeStatus::sent_to_self`], [`NodeStatus::links`]) change without waking
    /// [`NodeHandle::wait_status`]: read them, do not wait on them.
    pub sent: u64,
    /// Messages the object sent to itself.
    pub sent_to_self: u64,
    /// Per peer: the object's messages sent and received until the run's end.
    pub links: std::collections::BTreeMap<ProcessId, LinkTally>,
    /// Members known to have finished ([`NodeHandle::finish`]).
    pub finished: usize,
    /// The view, on a node that runs the view log ([`Node::spawn_with_views`]) once its
    /// group started.
    pub view: Option<ViewStatus>,
    /// Whether the member may act on a slot: always without views; with views, once a
    /// majority first answered its lease beat (until then its calls wait, an `enter` of a
    /// member that starts in the CS included).
    pub leased: bool,
    /// Why the member fenced (it was evicted, or lost its lease): its calls return
    /// [`NodeError::Evicted`] until it has rejoined (then this is `None` again), or for good
    /// when it cannot run the view.
    pub fenced: Option<Fenced>,
    /// The member left the cluster ([`NodeHandle::leave`]): a view without it installed, and
    /// the node stopped.
    pub left: bool,
    /// The fencing token of the entry the member holds (`None` while out of the CS, or
    /// fenced); see [`NodeHandle::token`].
    pub token: Option<FencingToken>,
    /// Every member of the cluster has finished.
    pub all_finished: bool,
    /// Every member has finished and every neighbour said bye (or is unreachable): no
    /// neighbour needs this node any more.
    pub quiet: bool,
    /// Whether the member's exits wait at the gate of a deficit view, and what lifts it.
    pub exit_gate: ExitGate,
    /// Whether the member's entries wait at the gate of a surplus view (LKCS started at an
    /// upper bound it tightens), until a view started after an exit there.
    pub entry_gate: EntryGate,
}

/// The gate a deficit view puts on a member's exits ([`NodeStatus::exit_gate`];
/// docs/fault-tolerance.md, "Starting below a lower bound" and "Local quotas").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ExitGate {
    /// No gate: exits go as the algorithm lets them.
    #[default]
    Open,
    /// Every lower bound lowered around the member was lowered to what the view started
    /// with: its exits wait for a view that restores the bounds, which a waiting exit
    /// proposes at once and again every `max(evict_after, write_timeout)` while it waits (a
    /// view started from the states entries brought up).
    UntilRestored,
    /// A lower bound that counts the member cannot be built among the view's members,
    /// whatever they enter (it reaches the upper bound of a neighbourhood an eviction
    /// shrank, or LKCS's round trip has no room there): its exits wait for a view that has a
    /// member it lost back (one evicted, or one that left, started again). The operator's
    /// move is to start that member again.
    UntilRejoin,
}

/// The gate a surplus view puts on a member's entries ([`NodeStatus::entry_gate`];
/// docs/fault-tolerance.md, "Local quotas"): LKCS runs only from a start strictly below an
/// upper bound it tightens, and a view whose start meets one is built with that bound raised
/// by one, the entries of the members it counts waiting, so the count never passes the bound.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum EntryGate {
    /// No gate: entries go as the algorithm lets them.
    #[default]
    Open,
    /// An upper bound that counts the member was raised for what the view started with: its
    /// entries wait for a view that builds it as asked (a view of the same members started
    /// from the states then). A member of that neighbourhood proposes it as soon as its own
    /// exit completes (only such an exit brings the count down), and again every
    /// `max(evict_after, write_timeout)` until a view installs.
    UntilRestored,
}

/// Why a member fenced ([`NodeStatus::fenced`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fenced {
    /// The view the member was in when it fenced, or the view that left it out.
    pub view: u64,
    /// The reason, for the logs: left out of a view, the lease ran out, ...
    pub why: String,
}

/// Sees every change of a member's published state, inside the handler that made it.
///
/// It runs under the node's lock, as the [`Logger`] does: neither may call the node's
/// [`NodeHandle`] (that would wait on the lock it holds).
/// An entry's report carries its fencing token; an exit's, `None`.
pub type Observer = Arc<dyn Fn(ProcessId, CsState, Option<FencingToken>) + Send + Sync>;

/// Why a node call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeError {
    /// The calling convention was broken (entry while in the CS, ...).
    Call(CallError),
    /// The call waits on this peer, and it is silent beyond the peer timeout (or its link is
    /// lost). The move keeps running; the next call of the same kind waits for it again.
    PeerUnreachable(ProcessId),
    /// The node stopped.
    Stopped,
    /// This member fenced in view `view`: the view (or a later one, `view` then names it)
    /// left it out, it could not run the view, or its lease ran out there; its node stopped
    /// ([`NodeStatus::fenced`] says why). Whatever the application did under the slot must
    /// stop.
    Evicted {
        /// The view that left it out.
        view: u64,
    },
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::Call(e) => write!(f, "{e}"),
            NodeError::PeerUnreachable(p) => write!(
                f,
                "{p} is unreachable; the move keeps running and the next call resolves it"
            ),
            NodeError::Stopped => f.write_str("the node stopped"),
            NodeError::Evicted { view } => write!(
                f,
                "this member was evicted: it fenced in view {view} (left out of the view, or its lease ran out) and its node stopped"
            ),
        }
    }
}

impl std::error::Error for NodeError {}

type Reply = oneshot::Sender<Result<(), NodeError>>;

/// What a handle asks of the node's core, whatever its object.
trait Calls: Send + Sync {
    /// Starts (or waits again for) a move; `reply` gets its outcome.
    fn call(&self, seq: Sequence, reply: Reply);
    /// This member made its own moves; `false` when the node stopped.
    fn finish(&self) -> bool;
    /// This member leaves, if it is out of the CS with no move under way.
    fn leave(&self) -> Leaving;
    /// The node stopped: every waiting and later call gets [`NodeError::Stopped`].
    fn stop(&self);
    /// The links' gauges, and how many messages each peer's link had been handed at this
    /// node's bye to it.
    fn drain_marks(&self) -> (LinkGauges, BTreeMap<ProcessId, u64>);
}

/// A member's state in one word: `evicted` while fenced, else `active`, `inactive`,
/// `entering` or `exiting`.
fn state_word(fenced: bool, state: CsState, pending: Option<Sequence>) -> &'static str {
    match (fenced, state, pending) {
        (true, _, _) => "evicted",
        (false, CsState::InCs, Some(_)) => "exiting",
        (false, CsState::InCs, None) => "active",
        (false, CsState::OutCs, Some(_)) => "entering",
        (false, CsState::OutCs, None) => "inactive",
    }
}

/// What asking the core to leave did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Leaving {
    /// The view log removes the member.
    Started,
    /// The member is in the CS or moving (another call moved it): it exits first.
    Busy,
    /// The node runs no views (or stopped): it stopped.
    NoViews,
}

/// The application's side of a node: enter and exit the CS. Clones share the node.
#[derive(Clone)]
pub struct NodeHandle {
    id: ProcessId,
    core: Arc<dyn Calls>,
    metrics: Arc<Recorder>,
    state: watch::Receiver<(CsState, Option<Sequence>)>,
    status: watch::Receiver<NodeStatus>,
}

/// One member's CS object and its links: [`Node::spawn`] starts it.
pub struct Node<A: CsObject> {
    core: Arc<Shared<A>>,
    net: Net<Wire<A::Msg>>,
}

impl<A: CsObject> fmt::Debug for Node<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("core", &*self.core.lock())
            .finish_non_exhaustive()
    }
}

/// The core behind its lock, shared by the node task and the handles, and the node task.
struct Shared<A: CsObject> {
    core: Mutex<Core<A>>,
    /// Set once the task is spawned: stopping the node ends it, which drops its links.
    task: std::sync::OnceLock<tokio::task::AbortHandle>,
}

impl<A: CsObject> Shared<A> {
    /// The core; a handler that panicked stopped the node, and the core it left is only
    /// read (it refuses every call).
    fn lock(&self) -> MutexGuard<'_, Core<A>> {
        self.core.lock().unwrap_or_else(|p| {
            let mut core = p.into_inner();
            core.stop();
            core
        })
    }

    /// Runs `f` on the core (`false`: the node stopped, or `f` panicked, which stops it
    /// instead of unwinding into the caller, the node task or the application's thread).
    fn run(&self, f: impl FnOnce(&mut Core<A>)) -> bool {
        let mut core = self.lock();
        if core.stopped {
            return false;
        }
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&mut core)));
        if let Err(panic) = caught {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_default();
            // a logger that panics too does not unwind into the caller either
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                core.log(LogEvent::NodeStopped(format!(
                    "a handler of the object panicked: {what}"
                )))
            }));
            core.stop();
            drop(core);
            self.end_task();
            return false;
        }
        true
    }

    /// Ends the node task (its links with it: the peers see this member go).
    fn end_task(&self) {
        if let Some(t) = self.task.get() {
            t.abort();
        }
    }
}

impl<A: CsObject> Calls for Shared<A> {
    fn call(&self, seq: Sequence, reply: Reply) {
        let mut reply = Some(reply);
        self.run(|core| core.call(seq, reply.take().expect("once")));
        // refused: the node stopped (or fenced)
        if let Some(reply) = reply {
            let fenced = self.lock().status.borrow().fenced.as_ref().map(|f| f.view);
            let _ = reply.send(Err(match fenced {
                Some(view) => NodeError::Evicted { view },
                None => NodeError::Stopped,
            }));
        }
    }

    fn finish(&self) -> bool {
        self.run(|core| {
            let me = core.me;
            core.learn_finished(&[me]);
        })
    }

    fn leave(&self) -> Leaving {
        let mut leaving = Leaving::NoViews;
        self.run(|core| leaving = core.leave());
        if leaving == Leaving::NoViews {
            self.stop();
        }
        leaving
    }

    fn stop(&self) {
        self.lock().stop();
        self.end_task();
    }

    fn drain_marks(&self) -> (LinkGauges, BTreeMap<ProcessId, u64>) {
        let core = self.lock();
        let gauges = core.net.gauges();
        // after the byes, only what went before them: a member this node says no bye to
        // (one it shares only the view log with) may have exited, and never acknowledges
        let marks = if core.bye_marks.is_empty() {
            BTreeMap::new()
        } else {
            gauges
                .peers()
                .map(|p| (p, core.bye_marks.get(&p).copied().unwrap_or(0)))
                .collect()
        };
        (gauges, marks)
    }
}

/// Stops the core when the node task ends, however it ends (its links closed, aborted, its
/// runtime dropped): no call waits on a node that is gone.
struct StopOnDrop<A: CsObject>(Arc<Shared<A>>);

impl<A: CsObject> Drop for StopOnDrop<A> {
    fn drop(&mut self) {
        self.0.lock().stop();
    }
}

/// One member's CS object and everything the node keeps beside it.
struct Core<A: CsObject> {
    obj: A,
    net: NetSender<Wire<A::Msg>>,
    /// How many members the cluster has (for the end of a run).
    members: usize,
    finished: BTreeSet<ProcessId>,
    byes: BTreeSet<ProcessId>,
    /// Peers this node said bye to.
    said_bye: BTreeSet<ProcessId>,
    /// How many messages each peer's link had been handed when this node said bye to it:
    /// what a drain waits to see acknowledged ([`NodeHandle::drain`]). Later messages (the
    /// lease's beats) need no acknowledgement from a peer that may have exited.
    bye_marks: BTreeMap<ProcessId, u64>,
    connected: BTreeSet<ProcessId>,
    status: watch::Sender<NodeStatus>,
    /// This member's id in the cluster (the object's own id is the view's numbering of it).
    me: ProcessId,
    /// The neighbours: the members the object talks to.
    peers: BTreeSet<ProcessId>,
    /// The view log's side, on a node that runs it.
    views: Option<NodeViews<A::Msg>>,
    observer: Option<Observer>,
    log: Logger,
    published: watch::Sender<(CsState, Option<Sequence>)>,
    waiting: Option<(Sequence, Reply)>,
    /// A move that completed after its call returned `PeerUnreachable`: the next call of
    /// its kind returns at once.
    unclaimed: Option<Sequence>,
    unreachable: BTreeSet<ProcessId>,
    start: std::time::Instant,
    /// The node stopped: calls are refused, messages ignored (its status says whether it
    /// fenced, and why).
    stopped: bool,
    /// The member is leaving ([`NodeHandle::leave`]): calls are refused, and losing its
    /// place in the view ends the node instead of a rejoin.
    leaving: bool,
    /// The Lamport clock and the entries, for the fencing tokens.
    tokens: Tokens,
    /// The node's counters ([`NodeHandle::metrics`]).
    metrics: Arc<Recorder>,
    /// Messages of the run's end of a later view, kept until it installs.
    end_ahead: Vec<(ProcessId, u64, End)>,
    /// Per member, the view it last came back in (every member, for this process's own
    /// rejoin): the run's end news of older views does not count for it.
    renewed: BTreeMap<ProcessId, u64>,
}

/// A message of the run's end ([`Wire::Finished`], [`Wire::Bye`]).
#[derive(Debug)]
enum End {
    Finished(Vec<ProcessId>),
    Bye,
}

impl<A: CsObject> fmt::Debug for Core<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Core")
            .field("obj", &self.obj)
            .field("peers", &self.peers)
            .field("unreachable", &self.unreachable)
            .field("stopped", &self.stopped)
            .finish_non_exhaustive()
    }
}

impl<A: CsObject> Core<A> {
    fn log(&self, event: LogEvent) {
        (self.log)(self.me, &event);
    }

    /// Refuses every later call and answers the waiting one: [`NodeError::Stopped`]; a
    /// wait on the status returns it too (its channel closes, keeping the last status).
    fn stop(&mut self) {
        if self.stopped {
            return;
        }
        self.stopped = true;
        if let Some((_, reply)) = self.waiting.take() {
            let _ = reply.send(Err(NodeError::Stopped));
        }
        let last = self.status.borrow().clone();
        drop(std::mem::replace(&mut self.status, watch::channel(last).0));
    }

    /// Whether a call of `seq` must wait without starting: no majority has granted the
    /// member a lease yet, the object is frozen for a view change, the view is a deficit view
    /// and `seq` is an exit, or it is a surplus view and `seq` is an entry.
    fn held(&self, seq: Sequence) -> bool {
        self.views.as_ref().is_some_and(|v| {
            !views::lock(&v.shared.lease).granted()
                || v.frozen.is_some()
                || (v.exit_gate != ExitGate::Open && seq == Sequence::Exit)
                || (v.entry_gate != EntryGate::Open && seq == Sequence::Entry)
        })
    }

    /// A call that waits without having started (held, see [`Core::held`]) starts once
    /// nothing holds it any more.
    fn resume_held(&mut self) {
        let granted = self
            .views
            .as_ref()
            .is_none_or(|v| views::lock(&v.shared.lease).granted());
        if granted && !self.status.borrow().leased {
            self.status.send_modify(|s| s.leased = true);
        }
        let ready = matches!(&self.waiting, Some((seq, _)) if !self.held(*seq)
            && self.obj.pending() != Some(*seq));
        if ready {
            let (seq, reply) = self.waiting.take().expect("checked");
            self.call(seq, reply);
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn call(&mut self, seq: Sequence, reply: Reply) {
        if self.leaving {
            let _ = reply.send(Err(NodeError::Stopped));
            return;
        }
        if let Some(f) = &self.status.borrow().fenced {
            // evicted, and not (yet) back in a view
            let _ = reply.send(Err(NodeError::Evicted { view: f.view }));
            return;
        }
        let target = match seq {
            Sequence::Entry => CsState::InCs,
            Sequence::Exit => CsState::OutCs,
        };
        if self.unclaimed.take() == Some(seq)
            && self.obj.state() == target
            && self.obj.pending().is_none()
        {
            let _ = reply.send(Ok(()));
            return;
        }
        if self.held(seq) && self.obj.state() != target {
            // it starts (or waits again) when the next view installs
            if let Some((_, older)) = self.waiting.take() {
                let _ = older.send(Err(NodeError::Call(CallError::Busy)));
            }
            self.waiting = Some((seq, reply));
            return;
        }
        if self.obj.pending() == Some(seq) {
            // the move of an earlier call that returned PeerUnreachable: wait for it again
            if let Some((_, older)) = self.waiting.take() {
                let _ = older.send(Err(NodeError::Call(CallError::Busy)));
            }
            self.waiting = Some((seq, reply));
            self.fail_blocked();
            return;
        }
        let mut out = Outbox::new();
        self.obj.set_time(self.now());
        if let Err(e) = self.obj.begin(seq, &mut out) {
            let _ = reply.send(Err(NodeError::Call(e)));
            return;
        }
        self.waiting = Some((seq, reply));
        self.after(out);
        self.fail_blocked();
    }

    fn handle(&mut self, from: ProcessId, msg: A::Msg) {
        let mut out = Outbox::new();
        self.obj.set_time(self.now());
        self.obj.on_message(from, msg, &mut out);
        self.after(out);
    }

    /// After a handler: publish a state change (before any send), answer a completed call,
    /// then send, handling messages to itself in order.
    fn after(&mut self, mut out: Outbox<A::Msg>) {
        let me = self.obj.id();
        let mut local = VecDeque::new();
        loop {
            let state = self.obj.state();
            let was = *self.published.borrow();
            if state == CsState::InCs && was.0 == CsState::OutCs && self.lease_expired() {
                // an entry completed past the lease (a grant delayed, the member paused): it
                // fences instead, and the entry never shows
                let view = self.views.as_ref().map_or(0, |v| v.number);
                let why = format!("an entry completed after the lease ran out (view {view})");
                self.log(LogEvent::View(format!("fenced: {why}")));
                self.evicted(view, why);
                return;
            }
            if state != was.0 {
                if let Some(v) = self.views.as_mut() {
                    // an exit in a surplus view: the raised bounds counting this member fell
                    if state == CsState::OutCs && v.entry_gate != EntryGate::Open {
                        v.exited_gated = true;
                    }
                }
                let token = match state {
                    CsState::InCs => {
                        let view = self.views.as_ref().map_or(0, |v| v.number);
                        Some(self.tokens.entry(view, self.me.index()))
                    }
                    CsState::OutCs => None,
                };
                self.status.send_modify(|s| s.token = token);
                self.metrics.moved(state == CsState::InCs);
                if let Some(o) = &self.observer {
                    o(self.me, state, token);
                }
            }
            let now = (state, self.obj.pending());
            if now != was {
                self.published.send_replace(now);
            }
            if out.take_completed() {
                // a call that gave up (timed out, dropped) has no one to answer: the next
                // call of its kind gets the completion
                let answered = match self.waiting.take() {
                    Some((_, reply)) => reply.send(Ok(())).is_ok(),
                    None => false,
                };
                if !answered {
                    self.unclaimed = Some(match state {
                        CsState::InCs => Sequence::Entry,
                        CsState::OutCs => Sequence::Exit,
                    })
                }
            }
            for (to, msg) in out.drain() {
                if to == me {
                    self.count(|s| {
                        s.sent += 1;
                        s.sent_to_self += 1;
                    });
                    local.push_back(msg);
                    continue;
                }
                // with views: to the cluster id of the view's process, tagged with the view
                let (to, view) = match &self.views {
                    Some(v) => (v.cluster(to), Some(v.number)),
                    None => (to, None),
                };
                let counted = !self.said_bye.contains(&to);
                self.count(|s| {
                    s.sent += 1;
                    if counted {
                        s.links.entry(to).or_default().sent.add(&msg);
                    }
                });
                let clock = self.tokens.clock;
                let wire = match view {
                    Some(view) => Wire::InView { view, clock, msg },
                    None => Wire::Cs { clock, msg },
                };
                if let Err(e) = self.send_wire(to, wire) {
                    self.log(LogEvent::Dropped {
                        peer: to,
                        reason: format!("a send the object made: {e}"),
                    });
                }
            }
            let Some(msg) = local.pop_front() else { break };
            self.obj.set_time(self.now());
            self.obj.on_message(me, msg, &mut out);
        }
    }

    /// Sends `wire` to `to`, or keeps it while `to`'s link has not met the process the view
    /// has ([`NodeViews::held`]; [`Core::release_held`] sends it then).
    fn send_wire(&mut self, to: ProcessId, wire: Wire<A::Msg>) -> Result<(), String> {
        if let Some(held) = self.views.as_mut().and_then(|v| v.held.get_mut(&to)) {
            if held.queue.len() >= MAX_AHEAD {
                return Err(format!(
                    "{MAX_AHEAD} messages kept for a process of {to} its link has not met"
                ));
            }
            held.queue.push(wire);
            return Ok(());
        }
        self.net.send(to, wire).map_err(|e| e.to_string())
    }

    /// Sends what was kept for `p` ([`NodeViews::held`]) once its link met the process the
    /// view has (the rule that made the node keep it, [`views::link_meets`]). The link
    /// publishes a process it meets before it reports `Restarted` or `Connected`, whose
    /// handling calls this.
    pub(super) fn release_held(&mut self, p: ProcessId) {
        let Some(v) = &mut self.views else { return };
        let met = self.net.gauges().incarnation(p);
        let ready = v
            .held
            .get(&p)
            .is_some_and(|h| views::link_meets(met, h.incarnation, v.shared.links.saw_restart(p)));
        if !ready {
            return;
        }
        let held = v.held.remove(&p).expect("checked");
        for wire in held.queue {
            if let Err(e) = self.net.send(p, wire) {
                self.log(LogEvent::Dropped {
                    peer: p,
                    reason: format!("a message kept until its link met the view's process: {e}"),
                });
            }
        }
    }

    /// Updates the status's message counters ([`NodeStatus::sent`], [`NodeStatus::links`])
    /// without waking the tasks that wait on a status change: no wait is for a count, and
    /// one wake-up per message sent or received was a task poll per message in every
    /// watcher (the cycle workload, the view follower). A reader sees the counts at its
    /// next look.
    pub(super) fn count(&self, f: impl FnOnce(&mut NodeStatus)) {
        self.status.send_if_modified(|s| {
            f(s);
            false
        });
    }

    /// Adds members to the finished set; passes news on to the neighbours, and says bye to
    /// them once every member has finished.
    fn learn_finished(&mut self, ids: &[ProcessId]) {
        let before = self.finished.len();
        self.finished
            .extend(ids.iter().copied().filter(|p| p.index() < self.members));
        let all = self.all_finished();
        // nothing new, unless a view change just made it all (an evicted member counts as
        // finished) and the byes are still to say
        if self.finished.len() == before && !(all && self.said_bye.is_empty()) {
            if self.status.borrow().all_finished != all {
                // a view change reopened the run (a member back in the view)
                self.publish_status();
            }
            return;
        }
        let known: Vec<ProcessId> = self.finished.iter().copied().collect();
        let view = self.views.as_ref().map_or(0, |v| v.number);
        let peers: Vec<ProcessId> = self.peers.iter().copied().collect();
        for p in peers {
            let send = |core: &mut Self, w| {
                if let Err(e) = core.send_wire(p, w) {
                    core.log(LogEvent::Dropped {
                        peer: p,
                        reason: format!("the end of the run: {e}"),
                    });
                }
            };
            send(
                self,
                Wire::Finished {
                    view,
                    ids: known.clone(),
                },
            );
            if all {
                send(self, Wire::Bye { view });
                // what is held for `p` (its link has not met the view's process) is handed
                // later, before anything sent after: the mark counts it
                let held = self
                    .views
                    .as_ref()
                    .and_then(|v| v.held.get(&p))
                    .map_or(0, |h| h.queue.len() as u64);
                self.bye_marks.insert(p, self.net.gauges().handed(p) + held);
            }
        }
        if all {
            self.said_bye.clone_from(&self.peers);
        }
        self.publish_status();
    }

    /// Whether every member has finished: every member of the current view, when the node
    /// runs views (a member the views left out counts as finished).
    fn all_finished(&self) -> bool {
        match &self.views {
            Some(v) => v.members.iter().all(|p| self.finished.contains(p)),
            None => self.finished.len() == self.members,
        }
    }

    fn publish_status(&self) {
        let all_finished = self.all_finished();
        let quiet = all_finished
            && self
                .peers
                .iter()
                .all(|p| self.byes.contains(p) || self.unreachable.contains(p));
        self.status.send_modify(|s| {
            s.peers.clone_from(&self.peers);
            s.connected.clone_from(&self.connected);
            s.unreachable.clone_from(&self.unreachable);
            s.finished = self.finished.len();
            s.all_finished = all_finished;
            s.quiet = quiet;
            s.exit_gate = self.views.as_ref().map_or(ExitGate::Open, |v| v.exit_gate);
            s.entry_gate = self
                .views
                .as_ref()
                .map_or(EntryGate::Open, |v| v.entry_gate);
        });
    }

    /// Answers a waiting call with `PeerUnreachable` when a peer it waits on is unreachable.
    fn fail_blocked(&mut self) {
        if self.waiting.is_none() || self.unreachable.is_empty() {
            return;
        }
        let awaiting: Vec<ProcessId> = match &self.views {
            Some(v) => self
                .obj
                .awaiting()
                .into_iter()
                .map(|d| v.cluster(d))
                .collect(),
            None => self.obj.awaiting().into_iter().collect(),
        };
        // with views, a member out of the view fails no call
        let in_view = |p: &ProcessId| self.views.as_ref().is_none_or(|v| v.dense(*p).is_some());
        let blocker = if awaiting.is_empty() {
            self.unreachable.iter().copied().find(|p| in_view(p))
        } else {
            awaiting.into_iter().find(|p| self.unreachable.contains(p))
        };
        if let Some(p) = blocker
            && let Some((_, reply)) = self.waiting.take()
        {
            let _ = reply.send(Err(NodeError::PeerUnreachable(p)));
        }
    }
}

#[cfg(test)]
mod tests;
