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
//! [`awaiting`](crate::CsObject::awaiting) set, or every unreachable peer when the algorithm
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
//! In a view that lowered a lower bound (a deficit view) exits wait.
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

use super::link::{Net, NetEvent, NetSender};
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

mod lease;
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
    /// Messages the object sent (to itself included).
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

/// Counts one call when it ends: with its outcome, or as cancelled when its future is
/// dropped first (a timeout).
struct CallRecord<'a> {
    metrics: &'a Recorder,
    kind: &'static str,
    started: std::time::Instant,
    outcome: CallOutcome,
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        self.metrics
            .call(self.kind, self.outcome, self.started.elapsed());
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

impl fmt::Debug for NodeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeHandle")
            .field("id", &self.id)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

impl NodeHandle {
    /// The member's id.
    pub fn id(&self) -> ProcessId {
        self.id
    }

    /// The published state.
    pub fn state(&self) -> CsState {
        self.state.borrow().0
    }

    /// The move in progress, if any (a call that returned `PeerUnreachable`, timed out or
    /// was dropped leaves it running).
    pub fn pending(&self) -> Option<Sequence> {
        self.state.borrow().1
    }

    /// The fencing token of the entry the member holds: `Some` while it is in the CS, was
    /// granted a lease (with views), is not fenced and its node runs. A lease that ran out
    /// fences the member at the view task's next look (every 20 ms): until then the token is
    /// still given. With views, a member that stays in across a view change gets a new token in
    /// the new view: read it before each use of the protected resource (see
    /// [`FencingToken`]).
    pub fn token(&self) -> Option<FencingToken> {
        if self.status.has_changed().is_err() {
            return None; // the node stopped
        }
        let (fenced, leased, token) = {
            let s = self.status.borrow();
            (s.fenced.is_some(), s.leased, s.token)
        };
        match (fenced, leased, self.state()) {
            (false, true, CsState::InCs) => token,
            _ => None,
        }
    }

    /// What the node tells besides the calls' answers (unreachable peers, messages sent, how
    /// far the run's end has come).
    pub fn status(&self) -> NodeStatus {
        self.status.borrow().clone()
    }

    /// Waits until the status satisfies `f` (or the node stopped: `Err`).
    pub async fn wait_status(
        &self,
        f: impl FnMut(&NodeStatus) -> bool,
    ) -> Result<NodeStatus, NodeError> {
        let mut rx = self.status.clone();
        let status = match rx.wait_for(f).await {
            Ok(s) => Ok(s.clone()),
            Err(_) => Err(NodeError::Stopped),
        };
        status
    }

    /// Leaves the cluster for good, gracefully: exits the CS first if the member is in it
    /// (waiting as an exit waits), then asks the view log to remove it
    /// ([`Proposal::Leave`](super::view::Proposal::Leave)) and returns once a view without
    /// it installed ([`NodeStatus::left`]); the node then stops. Later calls return
    /// [`NodeError::Stopped`]. Without views, the node just stops. The members install the
    /// view without it at once: it is out of the CS and promised not to come back, so no
    /// lease needs to run out. Bound it with a timeout: without a majority no view
    /// installs, and after [`NodeHandle::shutdown`] the others evict it instead.
    pub async fn leave(&self) -> Result<(), NodeError> {
        loop {
            let fenced = self.status.borrow().fenced.is_some();
            if !fenced && (self.state() == CsState::InCs || self.pending().is_some()) {
                self.reach(CsState::OutCs).await?;
            }
            // out (another handle's call may have moved it since: then out again first)
            match self.core.leave() {
                Leaving::Busy => continue,
                Leaving::NoViews => return Ok(()), // stopped
                Leaving::Started => break,
            }
        }
        match self.wait_status(|s| s.left).await {
            Ok(_) => Ok(()),
            Err(_) if self.status.borrow().left => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Says this member made its own moves: once every member of the cluster has, the run
    /// ends together (see the module doc).
    pub fn finish(&self) -> Result<(), NodeError> {
        match self.core.finish() {
            true => Ok(()),
            false => Err(NodeError::Stopped),
        }
    }

    /// Enters the CS: returns once in, or with why not.
    pub async fn enter(&self) -> Result<(), NodeError> {
        self.counted("enter", self.call(Sequence::Entry)).await
    }

    /// Exits the CS: returns once out, or with why not.
    pub async fn exit(&self) -> Result<(), NodeError> {
        self.counted("exit", self.call(Sequence::Exit)).await
    }

    /// Brings the member to `target`, as [`Member`](crate::Member) calls do: at once if it is
    /// there with nothing pending; a pending move away from `target` completes first, then
    /// the member comes back; a pending move to `target` is waited for.
    pub async fn reach(&self, target: CsState) -> Result<(), NodeError> {
        let kind = match target {
            CsState::InCs => "enter",
            CsState::OutCs => "exit",
        };
        self.counted(kind, self.reach_uncounted(target)).await
    }

    /// Runs the call `fut` of `kind`, counted in the metrics with its outcome and waiting
    /// time (as cancelled when dropped first).
    async fn counted(
        &self,
        kind: &'static str,
        fut: impl std::future::Future<Output = Result<(), NodeError>>,
    ) -> Result<(), NodeError> {
        let mut record = CallRecord {
            metrics: &self.metrics,
            kind,
            started: std::time::Instant::now(),
            outcome: CallOutcome::Cancelled,
        };
        let r = fut.await;
        record.outcome = match &r {
            Ok(()) => CallOutcome::Ok,
            Err(NodeError::PeerUnreachable(_)) => CallOutcome::Unreachable,
            Err(NodeError::Evicted { .. }) => CallOutcome::Evicted,
            Err(NodeError::Stopped) => CallOutcome::Stopped,
            Err(NodeError::Call(_)) => CallOutcome::Refused,
        };
        r
    }

    /// The node's numbers now: calls by outcome, waiting times, messages and link events per
    /// peer, views and fences, the member's state (docs/operations.md lists them).
    pub fn metrics(&self) -> NodeMetrics {
        // one borrow of the status, released before the state's (a second read borrow
        // while the core waits to write could deadlock)
        let state = self.state_name();
        let status = self.status.borrow().clone();
        self.metrics.snapshot(self.id, &status, state)
    }

    /// The member's state in one word: `active`, `inactive`, `entering`, `exiting`, or
    /// `evicted` while it is fenced.
    pub fn state_name(&self) -> &'static str {
        let fenced = self.status.borrow().fenced.is_some();
        let (state, pending) = *self.state.borrow();
        state_word(fenced, state, pending)
    }

    async fn reach_uncounted(&self, target: CsState) -> Result<(), NodeError> {
        // evicted: no call, an exit included, answers as if the member still had a place
        if let Some(e) = self.why_stopped() {
            return Err(e);
        }
        // no slot is acted on before the first lease (a member that starts in the CS too)
        if !self.status.borrow().leased {
            if let Err(e) = self.wait_status(|s| s.leased).await {
                return Err(self.why_stopped().unwrap_or(e));
            }
        }
        if self.state() == target {
            if self.pending().is_none() {
                return Ok(());
            }
            self.call(Sequence::leaving(target)).await?;
        }
        self.call(Sequence::leaving(target).flip()).await
    }

    /// [`NodeError::Evicted`] once the member fenced.
    fn why_stopped(&self) -> Option<NodeError> {
        let view = self.status.borrow().fenced.as_ref()?.view;
        Some(NodeError::Evicted { view })
    }

    async fn call(&self, seq: Sequence) -> Result<(), NodeError> {
        let (tx, rx) = oneshot::channel();
        // runs the object's handler here, under the node's lock
        self.core.call(seq, tx);
        rx.await.unwrap_or(Err(NodeError::Stopped))
    }

    /// Stops the node (and, with it, its links): every waiting and later call returns
    /// [`NodeError::Stopped`].
    pub fn shutdown(&self) {
        self.core.stop();
    }
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

impl<A: CsObject> Node<A> {
    /// Starts the node task for `obj` over `net` (the object's id must be the net's), in a
    /// cluster of the node and its peers (a complete graph; see [`Node::spawn_in`]). Must run
    /// inside a tokio runtime.
    pub fn spawn(
        obj: A,
        net: Net<Wire<A::Msg>>,
        observer: Option<Observer>,
        log: Logger,
    ) -> Result<NodeHandle, super::NetError> {
        let members = net.peers().count() + 1;
        Self::spawn_in(obj, net, members, observer, log)
    }

    /// [`Node::spawn`] in a cluster of `members` members (ids `0..members`), which the end
    /// of a run counts.
    pub fn spawn_in(
        obj: A,
        net: Net<Wire<A::Msg>>,
        members: usize,
        observer: Option<Observer>,
        log: Logger,
    ) -> Result<NodeHandle, super::NetError> {
        let peers = net.peers().collect();
        Self::start(obj, net, members, peers, None, observer, log)
    }

    /// [`Node::spawn_in`] with the view log running beside the object
    /// (the module doc's "Views", docs/fault-tolerance.md): the cluster is the initial view's
    /// members, which must be `P0..Pn` (the object's system's numbering); `net` links this
    /// member to every one of them, the object talks to `views.neighbours` (a subset), and the
    /// view log's messages go to any member. At each view change the object is rebuilt with
    /// `rebuild` ([`rebuild_from`] builds it from the cluster's spec). Refused
    /// (`NetError::Config`) when the initial view is not `P0..Pn` or does not hold this
    /// member, when the net has no link to one of its members, or when a neighbour has no
    /// link.
    pub fn spawn_with_views(
        obj: A,
        net: Net<Wire<A::Msg>>,
        views: ViewOptions,
        rebuild: Rebuild<A>,
        observer: Option<Observer>,
        log: Logger,
    ) -> Result<NodeHandle, super::NetError> {
        let id = obj.id();
        let links: BTreeSet<ProcessId> = net.peers().collect();
        let members = views.initial.members.len();
        if !views.initial.members.contains_key(&id) {
            return Err(super::NetError::Config(format!(
                "{id} is not a member of the initial view"
            )));
        }
        if !views
            .initial
            .members
            .keys()
            .copied()
            .eq((0..members).map(ProcessId::from))
        {
            return Err(super::NetError::Config(
                "the initial view's members must be P0..Pn, the object's numbering".into(),
            ));
        }
        views.check().map_err(super::NetError::Config)?;
        let neighbours = views.neighbours.clone();
        let missing = |p: &ProcessId| *p != id && !links.contains(p);
        if let Some(p) = views.initial.members.keys().find(|p| missing(p)) {
            return Err(super::NetError::Config(format!(
                "no link to {p}, a member of the initial view: the view log needs one to every member"
            )));
        }
        if let Some(p) = neighbours.iter().find(|p| missing(p)) {
            return Err(super::NetError::Config(format!(
                "no link to the neighbour {p}"
            )));
        }
        Self::start(
            obj,
            net,
            members,
            neighbours,
            Some((views, rebuild)),
            observer,
            log,
        )
    }

    fn start(
        obj: A,
        net: Net<Wire<A::Msg>>,
        members: usize,
        peers: BTreeSet<ProcessId>,
        views: Option<(ViewOptions, Rebuild<A>)>,
        observer: Option<Observer>,
        log: Logger,
    ) -> Result<NodeHandle, super::NetError> {
        let id = obj.id();
        if id != net.id() {
            return Err(super::NetError::Config(format!(
                "the object is {id}, the net is {}",
                net.id()
            )));
        }
        let node_views = views
            .as_ref()
            .map(|(o, _)| NodeViews::new(id, o, net.timing().peer_timeout, net.incarnation()));
        // what the view task gets: the state it shares with the core, the links, the log
        let view_task_parts = node_views
            .as_ref()
            .map(|v| (v.shared.clone(), net.sender(), log.clone()));
        let metrics = net.recorder();
        let (published, state) = watch::channel((obj.state(), obj.pending()));
        // a member that starts in the CS holds its entry from the start
        let mut tokens = Tokens::default();
        let token = (obj.state() == CsState::InCs).then(|| tokens.entry(0, id.index()));
        let (status_tx, status) = watch::channel(NodeStatus {
            leased: views.is_none(),
            token,
            ..NodeStatus::default()
        });
        let core = Core {
            members,
            finished: BTreeSet::new(),
            byes: BTreeSet::new(),
            said_bye: BTreeSet::new(),
            connected: BTreeSet::new(),
            status: status_tx,
            me: id,
            peers,
            views: node_views,
            obj,
            net: net.sender(),
            observer,
            log,
            published,
            waiting: None,
            unclaimed: None,
            unreachable: BTreeSet::new(),
            start: std::time::Instant::now(),
            stopped: false,
            leaving: false,
            tokens,
            metrics: metrics.clone(),
            end_ahead: Vec::new(),
            renewed: BTreeMap::new(),
        };
        core.publish_status();
        let core = Arc::new(Shared {
            core: Mutex::new(core),
            task: std::sync::OnceLock::new(),
        });
        // the operator's status request (`lkcs status`), answered under the core's lock
        let reporting = Arc::downgrade(&core);
        net.serve_status(Arc::new(move || {
            reporting
                .upgrade()
                .and_then(|shared| postcard::to_allocvec(&shared.lock().report()).ok())
                .unwrap_or_default()
        }));
        let node = Node {
            core: core.clone(),
            net,
        };
        let views_task =
            views
                .zip(view_task_parts)
                .map(|((options, rebuild), (shared, net, log))| {
                    let handle = Box::new(CoreRef {
                        shared: Arc::downgrade(&core),
                        rebuild,
                    });
                    views::run(id, options, shared, net, log, handle)
                });
        // made before the task runs: a task dropped before its first poll stops the core too
        let stop = StopOnDrop(core.clone());
        let task = tokio::spawn(node.run(stop));
        let _ = core.task.set(task.abort_handle());
        if let Some(views_task) = views_task {
            tokio::spawn(views_task);
        }
        Ok(NodeHandle {
            id,
            core,
            metrics,
            state,
            status,
        })
    }

    /// The node task: hands the links' events to the core, until the links stop.
    async fn run(mut self, _stop: StopOnDrop<A>) {
        while let Some(e) = self.net.recv().await {
            self.core.run(|core| core.on_net(e));
            // what else arrived meanwhile, up to a bound
            for _ in 1..DRAIN_AT_MOST {
                let Some(e) = self.net.try_recv() else { break };
                self.core.run(|core| core.on_net(e));
            }
            if self.core.lock().stopped {
                return;
            }
        }
    }
}

/// The view task's hold on the core: it does not keep the node alive.
struct CoreRef<A: CsObject> {
    shared: std::sync::Weak<Shared<A>>,
    rebuild: Rebuild<A>,
}

impl<A: CsObject> ViewCore for CoreRef<A> {
    fn publish(&self, status: Option<ViewStatus>) -> bool {
        self.shared.upgrade().is_some_and(|shared| {
            shared.run(|core| {
                if let Some(status) = status {
                    core.status.send_modify(|s| s.view = Some(status));
                }
            })
        })
    }

    fn freeze(&self, next: u64) -> Option<(CsState, u64)> {
        let shared = self.shared.upgrade()?;
        let mut stable = None;
        shared.run(|core| stable = Some(core.freeze(next)));
        stable
    }

    fn install(&self, view: &super::view::View, rejoined: bool) -> Result<(), String> {
        let rebuilt = (self.rebuild)(view)?;
        let shared = self.shared.upgrade().ok_or("the node stopped")?;
        match shared.run(|core| core.install(view.number, &view.members, rebuilt, rejoined)) {
            true => Ok(()),
            false => Err("the node stopped".into()),
        }
    }

    fn fence(&self, view: u64, why: String) {
        if let Some(shared) = self.shared.upgrade() {
            shared.run(|core| core.fence(view, why));
            shared.end_task();
        }
    }

    fn evicted(&self, view: u64, why: String) {
        if let Some(shared) = self.shared.upgrade() {
            shared.run(|core| core.evicted(view, why));
            if shared.lock().stopped {
                shared.end_task(); // it left
            }
        }
    }

    fn gated(&self) -> bool {
        self.shared.upgrade().is_some_and(|shared| {
            let core = shared.lock();
            let deficit = core.views.as_ref().is_some_and(|v| v.gate_exits);
            deficit && matches!(core.waiting, Some((Sequence::Exit, _)))
        })
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

    fn on_net(&mut self, e: NetEvent<Wire<A::Msg>>) {
        match e {
            NetEvent::Message {
                from,
                msg: Wire::View(bytes),
            } => {
                let handled = match &self.views {
                    Some(v) => v.on_frame(from, &bytes, &self.net),
                    None => Err("a view frame, and this node runs no view log".into()),
                };
                match handled {
                    Err(reason) => self.log(LogEvent::Dropped { peer: from, reason }),
                    Ok(Some(_)) if !self.status.borrow().leased => {
                        // this process never held the slot: it is a new process of its
                        // member (restarted), which the view does not have yet; it rejoins
                        if let Some(v) = &self.views {
                            v.shared
                                .rejoin
                                .store(true, std::sync::atomic::Ordering::Release);
                        }
                    }
                    Ok(Some(view)) => {
                        let why = format!("{from} is in view {view}, which leaves this member out");
                        self.log(LogEvent::View(format!("fenced: {why}")));
                        self.evicted(view, why);
                        return;
                    }
                    Ok(None) => {}
                }
                // the first lease may have come with it
                self.resume_held();
            }
            NetEvent::Message { from, msg } => {
                if !self.peers.contains(&from) {
                    self.log(LogEvent::Dropped {
                        peer: from,
                        reason: "a message from a non-neighbour".into(),
                    });
                    return;
                }
                match msg {
                    Wire::Cs { .. } if self.views.is_some() => self.log(LogEvent::Dropped {
                        peer: from,
                        reason: "a message outside any view, and this node runs views".into(),
                    }),
                    Wire::Cs { clock, msg } => {
                        self.tokens.seen(clock);
                        self.tally_received(from, &msg);
                        self.handle(from, msg)
                    }
                    Wire::InView { view, clock, msg } => {
                        self.tokens.seen(clock);
                        self.in_view(from, view, msg)
                    }
                    Wire::Finished { view, ids } => self.on_end(from, view, End::Finished(ids)),
                    Wire::Bye { view } => self.on_end(from, view, End::Bye),
                    Wire::View(_) => {} // handled above
                }
            }
            NetEvent::Unreachable(p) | NetEvent::Lost(p) => {
                if let Some(v) = &self.views {
                    // unreachable: silent for the peer timeout, so last heard that long ago
                    let now = tokio::time::Instant::now();
                    let since = match e {
                        NetEvent::Unreachable(_) => now.checked_sub(v.silence).unwrap_or(now),
                        _ => now,
                    };
                    v.shared.links.down(p, since);
                }
                // a link the view log alone uses fails no call
                if self.peers.contains(&p) {
                    self.unreachable.insert(p);
                    self.publish_status();
                    self.fail_blocked();
                }
            }
            NetEvent::Reachable(p) => {
                if let Some(v) = &self.views {
                    v.shared.links.up(p);
                }
                if self.unreachable.remove(&p) {
                    self.publish_status();
                }
            }
            NetEvent::Restarted {
                peer,
                previous,
                incarnation,
            } => {
                // the link talks to a new process of `peer`: until a view has it, neither its
                // object's messages nor its beats count
                if let Some(v) = &self.views {
                    v.shared.links.restarted(peer, previous, incarnation);
                    v.shared.links.up(peer);
                }
            }
            NetEvent::Connected(p) => {
                if let Some(v) = &self.views {
                    v.shared.links.up(p);
                }
                if self.peers.contains(&p) {
                    self.unreachable.remove(&p);
                    self.connected.insert(p);
                    self.publish_status();
                }
            }
        }
    }

    /// What the member tells the operator ([`super::MemberReport`]).
    fn report(&self) -> super::MemberReport {
        let status = self.status.borrow();
        let (state, pending) = *self.published.borrow();
        let state = state_word(status.fenced.is_some(), state, pending);
        let awaiting = match (&self.views, self.obj.pending()) {
            (_, None) => Vec::new(),
            (Some(v), Some(_)) => self
                .obj
                .awaiting()
                .into_iter()
                .map(|d| v.cluster(d))
                .collect(),
            (None, Some(_)) => self.obj.awaiting().into_iter().collect(),
        };
        super::MemberReport {
            member: self.me.index(),
            view: status.view.as_ref().map(|v| v.number),
            members: status
                .view
                .as_ref()
                .map(|v| v.members.iter().map(|p| p.index()).collect())
                .unwrap_or_default(),
            state: state.into(),
            awaiting: awaiting.iter().map(|p| p.index()).collect(),
            unreachable: self.unreachable.iter().map(|p| p.index()).collect(),
            fenced: status.fenced.as_ref().map(|f| f.why.clone()),
        }
    }

    /// A message of the run's end from `from`, sent in view `view`: kept until that view
    /// installs when it is ahead; news older than a member's return to the view (its
    /// `renewed` view) is about the member's previous life, and ignored.
    fn on_end(&mut self, from: ProcessId, view: u64, end: End) {
        let current = self.views.as_ref().map_or(0, |v| v.number);
        if view > current {
            if self.end_ahead.len() < MAX_AHEAD {
                self.end_ahead.push((from, view, end));
            }
            return;
        }
        let stale = |p: &ProcessId| self.renewed.get(p).is_some_and(|r| view < *r);
        match end {
            End::Finished(ids) => {
                let ids: Vec<ProcessId> = ids.into_iter().filter(|p| !stale(p)).collect();
                self.learn_finished(&ids);
            }
            End::Bye if stale(&from) => {}
            End::Bye => {
                self.byes.insert(from);
                self.publish_status();
            }
        }
    }

    fn tally_received(&self, from: ProcessId, msg: &A::Msg) {
        if !self.byes.contains(&from) {
            self.status.send_modify(|s| {
                s.links.entry(from).or_default().received.add(msg);
            });
        }
    }

    /// A message of view `view`'s object from `from` (a cluster id): handled in that view,
    /// kept until a later view installs, dropped when older or while frozen.
    fn in_view(&mut self, from: ProcessId, view: u64, msg: A::Msg) {
        let Some(v) = &mut self.views else {
            self.log(LogEvent::Dropped {
                peer: from,
                reason: "a message of a view, and this node runs no view log".into(),
            });
            return;
        };
        if view > v.number {
            // kept until its view installs: the next one, or a later one for a process that
            // rejoins (it installs the first view that has it, skipping those before)
            if v.ahead.len() < MAX_AHEAD {
                v.ahead.push((from, view, msg));
            } else {
                let at = v.number;
                self.log(LogEvent::Dropped {
                    peer: from,
                    reason: format!("a message of view {view}, this member is at {at}"),
                });
            }
            return;
        }
        if view < v.number || v.frozen.is_some() {
            return; // of a view that ended (or is ending): its objects are gone
        }
        if !v.shared.links.current(from) {
            // a new process of `from`: the view has its old one, whose state it lost
            self.log(LogEvent::Dropped {
                peer: from,
                reason: format!("a message of view {view} from a process the view does not have"),
            });
            return;
        }
        match v.dense(from) {
            Some(d) => {
                self.tally_received(from, &msg);
                self.handle(d, msg)
            }
            None => self.log(LogEvent::Dropped {
                peer: from,
                reason: format!("a message of view {view}, which it is not in"),
            }),
        }
    }

    /// Freezes the object for the change to view `next`: no message of the current view is
    /// handled and no move starts from now on. Returns the stable state to report.
    fn freeze(&mut self, next: u64) -> (CsState, u64) {
        if self.status.borrow().fenced.is_some() {
            // it gave its slot up when it fenced: out, and its object stays stopped
            return (CsState::OutCs, self.tokens.clock);
        }
        if let Some(v) = &mut self.views {
            v.frozen = Some(next);
        }
        (self.obj.state(), self.tokens.clock)
    }

    /// Restarts in view `number` with its object: publishes its state, handles the messages
    /// of the view that came early, and starts the waiting call's move again.
    fn install(
        &mut self,
        number: u64,
        processes: &BTreeMap<ProcessId, u64>,
        rebuilt: Rebuilt<A>,
        rejoined: bool,
    ) {
        let Some(v) = &mut self.views else { return };
        v.number = number;
        let removed = v
            .members
            .iter()
            .filter(|p| !processes.contains_key(p))
            .count();
        self.metrics.view_installed(removed);
        // a member back in the view (a new process, or the one evicted) has its pairs to
        // make again
        let renewed: Vec<ProcessId> = processes
            .iter()
            .filter(|(p, i)| v.processes.get(p) != Some(*i))
            .map(|(p, _)| *p)
            .collect();
        if rejoined {
            // a new lease, from the beats of this view; and its own pairs to make again, as
            // the others see it (its workload starts them again); whatever end of the run
            // it heard while out of the view is reopened
            views::lock(&v.shared.lease).reset();
            self.finished.remove(&self.me);
            self.byes.clear();
            self.said_bye.clear();
            for p in processes.keys() {
                self.renewed.insert(*p, number);
            }
        }
        for p in &renewed {
            // back in the view: it has its pairs to make, and says bye again at the end
            self.finished.remove(p);
            self.byes.remove(p);
            self.said_bye.remove(p);
            self.renewed.insert(*p, number);
        }
        v.processes = processes.clone();
        views::lock(&v.shared.lease).installed(&rebuilt.members);
        v.members = rebuilt.members;
        v.frozen = None;
        v.gate_exits = rebuilt.deficit;
        let ahead = std::mem::take(&mut v.ahead);
        let early = ahead.len();
        self.obj = rebuilt.obj;
        if rejoined {
            // back in a view after an eviction: its calls work again
            self.status.send_modify(|s| s.fenced = None);
            // this process joins the view: the observer hears its state (out) from it, not
            // from the process it replaces
            if let Some(o) = &self.observer {
                o(self.me, self.obj.state(), None);
            }
        } else if self.obj.state() == CsState::InCs && self.published.borrow().0 == CsState::InCs {
            // it holds its slot across the change: a token of the new view
            let token = self.tokens.reissue(number, self.me.index());
            self.status.send_modify(|s| s.token = Some(token));
        }
        // a move that completed unclaimed is in the reported state, which the object starts in
        self.after(Outbox::new());
        self.learn_finished(&[]);
        self.publish_status();
        // the run's end news of this view that came early
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.end_ahead)
            .into_iter()
            .partition(|(_, view, _)| *view <= number);
        self.end_ahead = later;
        for (from, view, end) in now {
            self.on_end(from, view, end);
        }
        for (from, view, msg) in ahead {
            if view >= number {
                self.in_view(from, view, msg);
            }
        }
        let waiting = match self.waiting.as_ref().map(|(seq, _)| *seq) {
            Some(Sequence::Entry) => "an entry",
            Some(Sequence::Exit) => "an exit",
            None => "none",
        };
        self.log(LogEvent::View(format!(
            "view {number}: the object restarts {}{}; the call waiting: {waiting}{}",
            match self.obj.state() {
                CsState::InCs => "in the CS",
                CsState::OutCs => "out of the CS",
            },
            if self.views.as_ref().is_some_and(|v| v.gate_exits) {
                " in a deficit view (exits wait)"
            } else {
                ""
            },
            match early {
                0 => String::new(),
                n => format!("; {n} messages of the view came early"),
            }
        )));
        if let Some((seq, reply)) = self.waiting.take() {
            if rejoined && seq == Sequence::Exit && self.obj.state() == CsState::OutCs {
                // a new process whose first state (from the cluster file) was in: it joins
                // out, which is what its exit asked for
                let _ = reply.send(Ok(()));
            } else {
                self.call(seq, reply);
            }
        }
    }

    fn lease_expired(&self) -> bool {
        self.views
            .as_ref()
            .is_some_and(|v| views::lock(&v.shared.lease).expired(tokio::time::Instant::now()))
    }

    /// This member cannot run view `view` (its object cannot be built for it): it gives up
    /// its slot ([`Core::give_up`]) and the node stops.
    fn fence(&mut self, view: u64, why: String) {
        if self.stopped {
            return;
        }
        self.give_up(view, why);
        self.stop();
    }

    /// Out of view `view`, or its lease ran out: it gives up its slot ([`Core::give_up`]),
    /// its calls return [`NodeError::Evicted`] from now on, the object handles nothing
    /// more, and the view task makes the process rejoin; once a view has it again, it starts
    /// there out of the CS and its calls work again.
    fn evicted(&mut self, view: u64, why: String) {
        if self.leaving {
            // out of the view (or of its lease) while leaving: it has left
            self.left();
            return;
        }
        if self.stopped || self.status.borrow().fenced.is_some() {
            return;
        }
        self.give_up(view, why);
        self.unclaimed = None;
        if let Some(v) = &mut self.views {
            v.frozen = Some(u64::MAX);
            // the lease that ran out is not this process's any more: it waits for a new one
            views::lock(&v.shared.lease).reset();
            v.shared
                .rejoin
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Starts leaving (see [`NodeHandle::leave`]), unless the member is in the CS or a move
    /// is under way: then it must exit first.
    fn leave(&mut self) -> Leaving {
        let Some(v) = &self.views else {
            return Leaving::NoViews;
        };
        let fenced = self.status.borrow().fenced.is_some();
        if !fenced && (self.obj.state() == CsState::InCs || self.obj.pending().is_some()) {
            return Leaving::Busy;
        }
        self.leaving = true;
        v.shared
            .leave
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some((_, reply)) = self.waiting.take() {
            let _ = reply.send(Err(NodeError::Stopped));
        }
        Leaving::Started
    }

    /// The member left: a view without it installed (or it lost its place while leaving).
    fn left(&mut self) {
        if self.stopped {
            return;
        }
        self.log(LogEvent::View("left the cluster".into()));
        self.status.send_modify(|s| s.left = true);
        self.stop();
    }

    /// The slot is given up: the status says why ([`NodeStatus::fenced`]), the observer
    /// sees the member leave the CS (if it showed it in), the handle shows it out, and the
    /// waiting call gets [`NodeError::Evicted`].
    fn give_up(&mut self, view: u64, why: String) {
        self.status.send_modify(|s| {
            s.fenced = Some(Fenced { view, why });
            s.token = None;
        });
        self.metrics.fenced();
        if self.published.borrow().0 == CsState::InCs {
            if let Some(o) = &self.observer {
                o(self.me, CsState::OutCs, None);
            }
        }
        self.published.send_replace((CsState::OutCs, None));
        if let Some((_, reply)) = self.waiting.take() {
            let _ = reply.send(Err(NodeError::Evicted { view }));
        }
    }

    /// Whether a call of `seq` must wait without starting: no majority has granted the
    /// member a lease yet, the object is frozen for a view change, or the view is a deficit
    /// view and `seq` is an exit.
    fn held(&self, seq: Sequence) -> bool {
        self.views.as_ref().is_some_and(|v| {
            !views::lock(&v.shared.lease).granted()
                || v.frozen.is_some()
                || (v.gate_exits && seq == Sequence::Exit)
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
                    self.status.send_modify(|s| {
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
                self.status.send_modify(|s| {
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
                if let Err(e) = self.net.send(to, wire) {
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
        for &p in &self.peers {
            let send = |w| {
                if let Err(e) = self.net.send(p, w) {
                    (self.log)(
                        self.me,
                        &LogEvent::Dropped {
                            peer: p,
                            reason: format!("the end of the run: {e}"),
                        },
                    );
                }
            };
            send(Wire::Finished {
                view,
                ids: known.clone(),
            });
            if all {
                send(Wire::Bye { view });
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
        if let Some(p) = blocker {
            if let Some((_, reply)) = self.waiting.take() {
                let _ = reply.send(Err(NodeError::PeerUnreachable(p)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The chained hash over a message's encoding followed by its length, from the encoding.
    fn chained(hash: u64, msg: &Wire<Vec<u32>>) -> u64 {
        let bytes = postcard::to_allocvec(msg).expect("encodes");
        let mut h = hash;
        for b in bytes.iter().chain(&(bytes.len() as u64).to_le_bytes()) {
            h ^= u64::from(*b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        h
    }

    #[test]
    fn a_tally_chains_each_encoding_and_its_length() {
        let msgs = [
            Wire::Cs {
                clock: 0,
                msg: vec![],
            },
            Wire::Cs {
                clock: 7,
                msg: vec![1, 300, u32::MAX],
            },
            Wire::Finished {
                view: 3,
                ids: vec![ProcessId(0), ProcessId(7)],
            },
            Wire::Bye { view: 3 },
            Wire::Cs {
                clock: u64::MAX,
                msg: (0..200).collect(),
            },
        ];
        let mut tally = Tally::default();
        let mut expected = 0xcbf2_9ce4_8422_2325;
        for m in &msgs {
            tally.add(m);
            expected = chained(expected, m);
            assert_eq!(tally.hash, expected);
        }
        assert_eq!(tally.count, msgs.len() as u64);
        // the order matters
        let mut reversed = Tally::default();
        for m in msgs.iter().rev() {
            reversed.add(m);
        }
        assert_ne!(reversed.hash, tally.hash);
    }
}
