//! The node's side of the view log ([`crate::net::view`], docs/fault-tolerance.md): the log's
//! requests and answers carried on the member's authenticated links as [`Wire::View`] frames,
//! the member's [`ViewGroup`] started beside its object, the view shown in
//! [`NodeStatus::view`](super::NodeStatus::view), an eviction proposed for every member
//! whose link stays unreachable for [`ViewOptions::evict_after`], and the view change:
//!
//! - **freeze**: once a change is committed, the object handles no message of the current
//!   view and starts no move (a call waits);
//! - **report**: the member writes its stable state (the published one: entering counts as
//!   out, exiting as in) to the log;
//! - **install**: once the log installs the next view, the object is rebuilt for it
//!   ([`Rebuild`]: the view's system, renumbered, from the agreed start), messages of the new
//!   view that arrived early are handled, and a waiting call starts its move again; a member
//!   the view leaves out **fences** (its waiting call gets [`NodeError::Evicted`](super::NodeError::Evicted))
//!   and **rejoins** (see [`run`]). In a deficit view (a lower bound lowered) exits wait,
//!   until a restore view lifts the gate.
//!
//! The leases that make an eviction safe for a member that is only paused or cut off are in
//! `lease.rs`, driven from here (see the node module's doc). Not here yet
//! (docs/fault-tolerance.md, "Status"): fencing tokens.

use super::lease::{margin_holds, Lease, LeaseWatch, CLOCK_DRIFT};
use super::Wire;
use crate::catalog::{SystemSpec, SystemVisitor};
use crate::config::Instance;
use crate::cs::{CsObject, CsState};
use crate::id::ProcessId;
use crate::net::frame::MAX_FRAME_LEN;
use crate::net::link::NetSender;
use crate::net::view::{
    majority, Applied, Command, Pending, Proposal, Refusal, Storage, Unreachable, View, ViewConfig,
    ViewGroup, ViewRpc, ViewRpcReply, ViewTransport, WriteRefusal,
};
use crate::net::{LogEvent, Logger};
use crate::view_system::ViewSystem;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::future::Future;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio::time::Instant;

/// A view-log message on a link (the bytes of [`Wire::View`]): a request with the number its
/// answer carries, or that answer.
#[derive(Debug, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum ViewFrame {
    /// A request of the sender's view group.
    Request {
        /// The number the answer carries (the sender's own count).
        id: u64,
        /// The request.
        rpc: ViewRpc,
    },
    /// The answer to the receiver's request `id`.
    Reply {
        /// The request's number.
        id: u64,
        /// The answer.
        reply: ViewRpcReply,
    },
    /// The sender's lease beat `n`: the receiver answers it unless a committed change
    /// removes the sender.
    Beat {
        /// The beat's number.
        n: u64,
    },
    /// The answer to the receiver's beat `n`.
    BeatAck {
        /// The beat's number.
        n: u64,
    },
    /// The answer to a beat from a member that the sender's view `view` leaves out: the
    /// receiver was removed (evicted while it was away, or before it started) and fences.
    Outside {
        /// The sender's view.
        view: u64,
    },
}

/// The largest encoded [`ViewFrame`] a node sends: it must fit one link frame with the
/// link's and the wire's own headers (a link that cannot encode a message gives up for good,
/// so a larger one is refused before it reaches the link). The view log's messages stay far
/// below it: [`ViewConfig::raft`] caps the entries per request and the snapshot chunk.
pub const MAX_VIEW_FRAME: usize = MAX_FRAME_LEN - 64;

/// How a node runs the view log.
#[derive(Clone, Debug)]
pub struct ViewOptions {
    /// View 0, the cluster's first start: the same on every member.
    pub initial: View,
    /// The log's timers.
    pub config: ViewConfig,
    /// How long a member must stay unheard (its link silent, counted from the last frame
    /// heard once the link declares it unreachable, or lost) before this node proposes to
    /// evict it.
    pub evict_after: Duration,
    /// The member's neighbours in the cluster's topology (cluster ids): the members its
    /// object talks to. The view log talks to every member.
    pub neighbours: BTreeSet<ProcessId>,
    /// How often the member sends its lease beat to every member of its view.
    pub heartbeat: Duration,
    /// How long the member may act on its slot after a majority of its view last answered
    /// a beat (from that beat's sending). When it runs out the member fences. It must keep
    /// the margin `lease·(1+ρ) < evict_after·(1−ρ)`, `ρ` = [`CLOCK_DRIFT`]. Before a
    /// majority first answers, the member has no lease: its calls wait.
    pub lease: Duration,
    /// Told each new end of the lease before the member relies on it (tests: a monitor that
    /// counts a member active only while its lease holds).
    pub on_lease: Option<LeaseWatch>,
    /// A test hook, never for a cluster: skip the check of the lease's margin below
    /// `evict_after`, so that a test can run a deliberately broken cluster (a lease that
    /// outlives the eviction) and see its monitor catch the broken bound.
    #[doc(hidden)]
    pub unchecked_margin: bool,
    /// Where the member keeps its view log ([`Storage::Memory`] by default). With
    /// [`Storage::Dir`] a restarted process resumes its member's Raft node from the folder
    /// and rejoins through it, so the log survives any number of members crashing at once;
    /// and the node takes part in Raft with any process of a member, since it assumes that
    /// **every** member of the cluster keeps its log on disk (a cluster file's `[storage]`
    /// sets it for all of them). A member's folder must then not be lost or reset while the
    /// cluster runs under its epoch (docs/fault-tolerance.md).
    pub storage: Storage,
}

impl ViewOptions {
    /// The defaults of docs/fault-tolerance.md around `initial` and `neighbours`: the view
    /// log's default timers, a lease beat every 500 ms, a 3 s lease, eviction after 5 s.
    pub fn new(initial: View, neighbours: BTreeSet<ProcessId>) -> ViewOptions {
        ViewOptions {
            initial,
            config: ViewConfig::default(),
            evict_after: Duration::from_secs(5),
            neighbours,
            heartbeat: Duration::from_millis(500),
            lease: Duration::from_secs(3),
            on_lease: None,
            unchecked_margin: false,
            storage: Storage::Memory,
        }
    }

    /// Refuses timers that cannot work, naming them: a zero beat, a lease not longer than
    /// the beat, view log timers openraft refuses, or a lease without its margin below
    /// `evict_after` (the clock drift, and two ticks of the view task, 40 ms, for noticing
    /// the expiry).
    pub fn check(&self) -> Result<(), String> {
        if self.heartbeat.is_zero() {
            return Err("views: the lease heartbeat must be positive".into());
        }
        if self.lease <= self.heartbeat {
            return Err(format!(
                "views: the lease ({:?}) must be longer than its heartbeat ({:?})",
                self.lease, self.heartbeat
            ));
        }
        self.config.raft().map_err(|e| format!("views: {e}"))?;
        // the lease's expiry is noticed within a tick or two of the view task
        if !self.unchecked_margin && !margin_holds(self.lease + 2 * TICK, self.evict_after) {
            return Err(format!(
                "views: the lease ({:?}) must stay below evict_after ({:?}) with the clock drift's margin and the fencing delay: (lease + {:?})·{} < evict_after·{}",
                self.lease,
                self.evict_after,
                2 * TICK,
                1.0 + CLOCK_DRIFT,
                1.0 - CLOCK_DRIFT
            ));
        }
        Ok(())
    }
}

/// A member's object for a view: what [`Rebuild`] gives.
#[derive(Debug)]
pub struct Rebuilt<A> {
    /// The object, numbered in the view's system (`members[i]` is its process `i`).
    pub obj: A,
    /// The view's members in the order of the view's numbering (cluster ids).
    pub members: Vec<ProcessId>,
    /// Whether the view lowered a lower bound (a deficit view: exits wait).
    pub deficit: bool,
}

/// Builds this member's object for an installed view, from the view's start.
pub type Rebuild<A> = Arc<dyn Fn(&View) -> Result<Rebuilt<A>, String> + Send + Sync>;

/// The [`Rebuild`] of member `me` of the cluster `spec` with bounds `instance`: the view's
/// system ([`ViewSystem`]) built as at a cluster's first start. Fails, naming why, when the
/// view's system cannot be built (a bound the algorithm refuses in the view) or builds
/// another type of object than `A`.
pub fn rebuild_from<A: CsObject>(
    spec: SystemSpec,
    instance: Instance,
    me: ProcessId,
) -> Rebuild<A> {
    Arc::new(move |view: &View| {
        let system = ViewSystem::new(&spec, &instance, &view.start)
            .map_err(|e| format!("view {}: {e}", view.number))?;
        let dense = system
            .dense(me)
            .ok_or_else(|| format!("{me} is not a member of view {}", view.number))?;
        let built = system
            .spec()
            .build(Take(dense.index()))
            .map_err(|e| format!("view {}: {e}", view.number))?;
        let obj = built
            .downcast::<Option<A>>()
            .map_err(|_| {
                format!(
                    "view {}: its system builds another object type",
                    view.number
                )
            })?
            .ok_or_else(|| format!("view {}: no object for {me}", view.number))?;
        Ok(Rebuilt {
            obj,
            members: system.members().to_vec(),
            deficit: !system.deficit().is_empty(),
        })
    })
}

/// Takes process `0` of a built system, type-erased.
struct Take(usize);

impl SystemVisitor for Take {
    type Output = Box<dyn std::any::Any + Send>;
    fn visit<B: CsObject>(self, _: &Instance, _: &[CsState], procs: Vec<B>) -> Self::Output {
        Box::new(procs.into_iter().nth(self.0))
    }
}

/// What the view task does to the node's core.
pub(super) trait ViewCore: Send + Sync {
    /// Publishes the view when it changed; `false` once the node stopped.
    fn publish(&self, status: Option<ViewStatus>) -> bool;
    /// Freezes the object for the change to view `next`; the stable state to report (out,
    /// for a process that fenced), and the member's Lamport clock (`None` once the node
    /// stopped).
    fn freeze(&self, next: u64) -> Option<(CsState, u64)>;
    /// Restarts the object in `view`; `rejoined`: this process is back in the view after it
    /// rejoined.
    fn install(&self, view: &View, rejoined: bool) -> Result<(), String>;
    /// This member cannot run view `view`, for the reason `why`: it fences, and the node
    /// stops.
    fn fence(&self, view: u64, why: String);
    /// This member is out of view `view`, or lost its lease there, for the reason `why`: it
    /// gives up its slot, its calls return `Evicted`, and it rejoins.
    fn evicted(&self, view: u64, why: String);
    /// Whether an exit waits because the view is a deficit view.
    fn gated(&self) -> bool;
}

/// The view as a node knows it, in its [`NodeStatus`](super::NodeStatus).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewStatus {
    /// The current (last installed) view's number.
    pub number: u64,
    /// Its members.
    pub members: BTreeSet<ProcessId>,
    /// The change to the next view, if one is committed and waits for its reports.
    pub pending: Option<Pending>,
    /// The view log's leader, as far as this member knows.
    pub leader: Option<ProcessId>,
}

type Answer = oneshot::Sender<ViewRpcReply>;

/// What the transport, the node and the view task share: the requests waiting for their
/// answers, and since when each link has been down.
#[derive(Debug, Default)]
pub(super) struct ViewLinks {
    next: AtomicU64,
    waiting: Mutex<HashMap<u64, (ProcessId, Answer)>>,
    down: Mutex<BTreeMap<ProcessId, Instant>>,
    /// The processes: which incarnation of each member the view log has (in the current
    /// view, or rejoining in the pending change), and the new process of each member whose
    /// link saw it restart.
    processes: Mutex<Processes>,
    /// Every member keeps its view log on disk ([`Storage::Dir`]): a new process of a
    /// member is the same Raft node as the one before, so its Raft messages count.
    durable: AtomicBool,
}

/// Which process of each member this node deals with (see [`ViewLinks::current`]).
#[derive(Debug, Default)]
struct Processes {
    /// The current view's members with their incarnations.
    in_view: BTreeMap<ProcessId, u64>,
    /// The members the pending change lets rejoin, with their new incarnations.
    rejoining: BTreeMap<ProcessId, u64>,
    /// The latest incarnation of each member whose link saw it restart.
    restarted: BTreeMap<ProcessId, u64>,
    /// The incarnations of each member that its link saw replaced by a newer process.
    replaced: BTreeMap<ProcessId, BTreeSet<u64>>,
}

impl ViewLinks {
    fn register(&self, to: ProcessId, answer: Answer) -> u64 {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.waiting).insert(id, (to, answer));
        id
    }

    fn forget(&self, id: u64) {
        lock(&self.waiting).remove(&id);
    }

    /// An answer from `from` to request `id`; `false` when no request of that number went
    /// to `from` (a late answer, or one in another member's name), and it is dropped.
    pub(super) fn answer(&self, from: ProcessId, id: u64, reply: ViewRpcReply) -> bool {
        let mut waiting = lock(&self.waiting);
        match waiting.get(&id) {
            Some((to, _)) if *to == from => {
                let (_, answer) = waiting.remove(&id).expect("present");
                let _ = answer.send(reply);
                true
            }
            _ => false,
        }
    }

    /// The link to `p` went down (unreachable or lost), the peer last heard at `since`; a
    /// link already down keeps its time.
    pub(super) fn down(&self, p: ProcessId, since: Instant) {
        lock(&self.down).entry(p).or_insert(since);
    }

    /// Restarts the silence of every link that is down at `now`: a process that just
    /// (re)joined the view counts a member's silence from then on, not from before it was
    /// back (its links to the others may still be reconnecting after a partition healed).
    fn restart_silences(&self, now: Instant) {
        for since in lock(&self.down).values_mut() {
            *since = now;
        }
    }

    /// The link to `p` is up again.
    pub(super) fn up(&self, p: ProcessId) {
        lock(&self.down).remove(&p);
    }

    /// `p`'s link connected to a new process of it, `incarnation`, replacing `previous`.
    pub(super) fn restarted(&self, p: ProcessId, previous: u64, incarnation: u64) {
        let mut processes = lock(&self.processes);
        processes.restarted.insert(p, incarnation);
        processes.replaced.entry(p).or_default().insert(previous);
    }

    /// The members whose process in the view is one their link saw replaced: the view must
    /// evict that process. A member whose link has not yet met the process the view has (it
    /// rejoined while this link was down) is not one: its process in the view was never seen
    /// replaced.
    fn replaced_in_view(&self) -> Vec<ProcessId> {
        let processes = lock(&self.processes);
        processes
            .in_view
            .iter()
            // place 0 is a member's first process: any restart the link saw replaced it
            .filter(|(p, i)| {
                processes
                    .replaced
                    .get(p)
                    .is_some_and(|r| r.contains(i) || (**i == 0 && !r.is_empty()))
            })
            .map(|(p, _)| *p)
            .collect()
    }

    /// The view log's members (the current view's, and those a pending change lets rejoin),
    /// with their incarnations.
    fn set_view(&self, in_view: &BTreeMap<ProcessId, u64>, rejoining: BTreeMap<ProcessId, u64>) {
        let mut processes = lock(&self.processes);
        if processes.in_view != *in_view {
            processes.in_view = in_view.clone();
        }
        processes.rejoining = rejoining;
    }

    /// Whether the process at the other end of `p`'s link is the one the current view has:
    /// no restart was seen, or the view has the new process's incarnation. A member's new
    /// process is not the one the view counts: its object's messages, its beats and its Raft
    /// votes would speak for a state it lost.
    pub(super) fn current(&self, p: ProcessId) -> bool {
        let processes = lock(&self.processes);
        match processes.restarted.get(&p) {
            None => true,
            Some(i) => processes.in_view.get(&p) == Some(i),
        }
    }

    /// Whether the view log hears `p`'s process: the current one, or a new one that a
    /// pending change lets rejoin (a Raft learner catching up).
    fn may_log(&self, p: ProcessId) -> bool {
        let processes = lock(&self.processes);
        match processes.restarted.get(&p) {
            None => true,
            Some(i) => {
                processes.in_view.get(&p) == Some(i) || processes.rejoining.get(&p) == Some(i)
            }
        }
    }

    /// Whether the Raft node behind `p`'s process may take part in the log: any process of
    /// a member when every member keeps its log on disk, else as [`ViewLinks::may_log`].
    fn may_raft(&self, p: ProcessId) -> bool {
        self.durable.load(Ordering::Acquire) || self.may_log(p)
    }

    fn is_down(&self, p: ProcessId) -> bool {
        lock(&self.down).contains_key(&p)
    }

    fn down_for(&self, at_least: Duration) -> Vec<ProcessId> {
        lock(&self.down)
            .iter()
            .filter(|(_, since)| since.elapsed() >= at_least)
            .map(|(p, _)| *p)
            .collect()
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Encodes a view frame, refusing one that would not fit a link's frame.
pub(super) fn encode(frame: &ViewFrame) -> Result<Vec<u8>, String> {
    let bytes = postcard::to_allocvec(frame).map_err(|e| format!("does not encode: {e}"))?;
    if bytes.len() > MAX_VIEW_FRAME {
        return Err(format!(
            "{} bytes encoded, more than a view frame carries ({MAX_VIEW_FRAME})",
            bytes.len()
        ));
    }
    Ok(bytes)
}

/// The view log's transport over a node's links: a request goes out as a [`Wire::View`]
/// frame and its answer comes back on the same link. A member whose link is down is
/// unreachable at once (Raft backs off), and a request unanswered in time is unreachable too.
pub struct LinkTransport<M> {
    net: NetSender<Wire<M>>,
    links: Arc<ViewLinks>,
    config: ViewConfig,
}

impl<M> LinkTransport<M> {
    fn new(net: NetSender<Wire<M>>, links: Arc<ViewLinks>, config: ViewConfig) -> Self {
        LinkTransport { net, links, config }
    }
}

impl<M: Send + 'static> ViewTransport for LinkTransport<M> {
    fn rpc(
        &self,
        to: ProcessId,
        req: ViewRpc,
    ) -> impl Future<Output = Result<ViewRpcReply, Unreachable>> + Send {
        // a forwarded write waits at the leader for its commit; Raft's own requests are
        // answered at once by a live member
        let wait = match req {
            ViewRpc::Write(_) => self.config.write_timeout,
            _ => self.config.election_min,
        };
        async move {
            let unreachable = |reason: String| Unreachable { member: to, reason };
            if self.links.is_down(to) {
                return Err(unreachable("its link is down".into()));
            }
            let (tx, rx) = oneshot::channel();
            let id = self.links.register(to, tx);
            // however this request ends (answered, timed out, or dropped by Raft), its entry
            // goes
            let _forget = Forget(&self.links, id);
            let sent = encode(&ViewFrame::Request { id, rpc: req }).and_then(|bytes| {
                self.net
                    .send(to, Wire::View(bytes))
                    .map_err(|e| e.to_string())
            });
            if let Err(e) = sent {
                return Err(unreachable(e));
            }
            match tokio::time::timeout(wait, rx).await {
                Ok(Ok(reply)) => Ok(reply),
                Ok(Err(_)) => Err(unreachable("the node stopped".into())),
                Err(_) => Err(unreachable(format!("no answer within {wait:?}"))),
            }
        }
    }
}

/// Forgets a request's entry when dropped.
struct Forget<'a>(&'a ViewLinks, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.forget(self.1);
    }
}

/// What the node's core and its view task share: the link state (which the transport holds
/// too), the group once started, and the lease.
pub(super) struct ViewShared<M: Send + 'static> {
    pub(super) links: Arc<ViewLinks>,
    pub(super) group: Mutex<Option<ViewGroup<LinkTransport<M>>>>,
    pub(super) lease: Mutex<Lease>,
    /// Set when this process learns that the view has another process of its member (it
    /// restarted, and never held a lease): the view task makes it rejoin.
    pub(super) rejoin: AtomicBool,
    /// This process's incarnation: the one it rejoins with.
    pub(super) incarnation: u64,
    /// Set when the member leaves: the view task proposes its removal.
    pub(super) leave: AtomicBool,
}

/// The node's view state: what it shares with the view task, and the view its object runs
/// in.
pub(super) struct NodeViews<M: Send + 'static> {
    pub(super) shared: Arc<ViewShared<M>>,
    /// The number of the view the object runs in.
    pub(super) number: u64,
    /// Its members in the view's numbering: process `i` of the object is `members[i]`.
    pub(super) members: Vec<ProcessId>,
    /// Its members' incarnations (which process of each the view has).
    pub(super) processes: BTreeMap<ProcessId, u64>,
    /// The change the object is frozen for (the next view's number).
    pub(super) frozen: Option<u64>,
    /// A deficit view: exits wait for a view that restores the bounds.
    pub(super) gate_exits: bool,
    /// Messages of a later view than the object's, from their sender, kept until it installs.
    pub(super) ahead: Vec<(ProcessId, u64, M)>,
    /// The links' peer timeout: a peer declared unreachable was last heard this long ago.
    pub(super) silence: Duration,
}

impl<M: Send + 'static> NodeViews<M> {
    pub(super) fn new(
        me: ProcessId,
        options: &ViewOptions,
        silence: Duration,
        incarnation: u64,
    ) -> Self {
        let initial = &options.initial;
        let lease = Lease::new(me, options.lease, options.on_lease.clone());
        NodeViews {
            shared: Arc::new(ViewShared {
                links: Arc::default(),
                group: Mutex::new(None),
                lease: Mutex::new(lease),
                rejoin: AtomicBool::new(false),
                incarnation,
                leave: AtomicBool::new(false),
            }),
            number: initial.number,
            members: initial.members.keys().copied().collect(),
            processes: initial.members.clone(),
            frozen: None,
            gate_exits: false,
            ahead: Vec::new(),
            silence,
        }
    }

    /// The view's numbering of cluster member `p`.
    pub(super) fn dense(&self, p: ProcessId) -> Option<ProcessId> {
        self.members.binary_search(&p).ok().map(ProcessId::from)
    }

    /// The cluster id of the view's process `d`.
    pub(super) fn cluster(&self, d: ProcessId) -> ProcessId {
        self.members.get(d.index()).copied().unwrap_or(d)
    }

    /// A view frame `bytes` from `from`: an answer completes its request; a request goes to
    /// the group, and its answer back to `from`, on a task of its own (the node's lock is
    /// not held while Raft works).
    pub(super) fn on_frame(
        &self,
        from: ProcessId,
        bytes: &[u8],
        net: &NetSender<Wire<M>>,
    ) -> Result<Option<u64>, String> {
        match postcard::from_bytes::<ViewFrame>(bytes) {
            Err(e) => Err(format!("a view frame that does not decode: {e}")),
            Ok(ViewFrame::Reply { .. }) if !self.shared.links.may_raft(from) => {
                Err("a view-log answer from a new process that has not rejoined".into())
            }
            Ok(ViewFrame::Reply { id, reply }) => match self.shared.links.answer(from, id, reply) {
                true => Ok(None),
                false => Err(format!("an answer to no request of ours to it ({id})")),
            },
            Ok(ViewFrame::Beat { n }) => {
                // only a member of this member's view gets an answer; one it left out (or a
                // new process of a member, which the view does not have yet) is told
                let member = self.dense(from).is_some() && self.shared.links.current(from);
                let frame = match member {
                    false => Some(ViewFrame::Outside { view: self.number }),
                    true => lock(&self.shared.lease)
                        .answer(from, Instant::now())
                        .then_some(ViewFrame::BeatAck { n }),
                };
                if let Some(frame) = frame {
                    net.send(from, Wire::View(encode(&frame)?))
                        .map_err(|e| e.to_string())?;
                }
                Ok(None)
            }
            // a member of a later view that leaves this one out: it was removed; or a member
            // of the same view, whose view has another process of this member: it restarted
            Ok(ViewFrame::Outside { view })
                if view >= self.number && self.dense(from).is_some() =>
            {
                Ok(Some(view))
            }
            Ok(ViewFrame::Outside { view }) => Err(format!(
                "told it is outside view {view}, while at view {} with the sender in it",
                self.number
            )),
            Ok(ViewFrame::BeatAck { n }) => {
                // no lease while it rejoins
                let rejoining = self.shared.rejoin.load(Ordering::Acquire);
                if self.dense(from).is_some() && !rejoining {
                    let majority = majority(self.members.len());
                    lock(&self.shared.lease).acked(from, n, majority);
                }
                Ok(None)
            }
            Ok(ViewFrame::Request { rpc, .. }) if !allowed(from, &rpc, &self.shared.links) => {
                Err(format!(
                    "a view-log request it may not make: {}",
                    match rpc {
                        ViewRpc::Write(c) => format!("{c:?}"),
                        _ => "a Raft request from a new process that has not rejoined".into(),
                    }
                ))
            }
            Ok(ViewFrame::Request { id, rpc }) => {
                // a group not started yet leaves the request unanswered: Raft asks again
                let group = lock(&self.shared.group).clone();
                if let Some(group) = group {
                    let net = net.clone();
                    tokio::spawn(async move {
                        let reply = group.handle_rpc(from, rpc).await;
                        if let Ok(bytes) = encode(&ViewFrame::Reply { id, reply }) {
                            let _ = net.send(from, Wire::View(bytes));
                        }
                    });
                }
                Ok(None)
            }
        }
    }
}

/// Whether `from` may make the view-log request `rpc`: a member proposes a rejoin for itself
/// only, and a new process that has not rejoined makes no Raft request: it may only ask to
/// rejoin, or to evict its old process.
fn allowed(from: ProcessId, rpc: &ViewRpc, links: &ViewLinks) -> bool {
    match rpc {
        ViewRpc::Write(Command::Propose(Proposal::Rejoin { member, .. })) => *member == from,
        // in place of its old process: only where a new process is the same Raft node
        ViewRpc::Write(Command::Propose(Proposal::Replace { member, .. })) => {
            *member == from && links.durable.load(Ordering::Acquire)
        }
        ViewRpc::Write(Command::Propose(Proposal::Evict { member, .. })) if *member == from => true,
        // a member leaves on its own (it exited first): no other may say it left
        ViewRpc::Write(Command::Propose(Proposal::Leave(p))) => *p == from && links.may_log(from),
        ViewRpc::Write(_) => links.may_log(from),
        // Raft's own messages: from a new process too when its Raft node is the same one
        ViewRpc::AppendEntries(_) | ViewRpc::Vote(_) | ViewRpc::InstallSnapshot(_) => {
            links.may_raft(from)
        }
    }
}

/// How often the view task looks at the log's state, the links and the lease.
const TICK: Duration = Duration::from_millis(20);

/// The view task of member `id`: starts its group, publishes the view whenever it changes
/// (`publish(None)` each tick otherwise; `false` from it means the node stopped, and the
/// group is shut down), installs each view the log installs (or fences when left out),
/// freezes and reports when a change is committed (again after the write timeout while the
/// report is not in the log), and proposes to evict the members whose link has been down for
/// `evict_after`, and at once the old process of a member whose link saw it restart (again
/// after `evict_after` or the write timeout, the longer, while the member is still in the
/// view and no committed change removes it).
///
/// A process told that the view has another process of its member (it restarted: its
/// first process is still in the view, or was evicted) **rejoins**: it drops its group,
/// starts a new one as a Raft learner ([`ViewGroup::join`]) with its own incarnation, and
/// asks the members to let it rejoin (through any of them, which forward to the leader),
/// again every lease beat until a view has it; that view installs its object, inactive.
pub(super) async fn run<M: Send + 'static>(
    id: ProcessId,
    options: ViewOptions,
    shared: Arc<ViewShared<M>>,
    net: NetSender<Wire<M>>,
    log: Logger,
    core: Box<dyn ViewCore>,
) {
    let (links, lease) = (&shared.links, &shared.lease);
    let transport = || LinkTransport::new(net.clone(), links.clone(), options.config);
    let mut last_beat: Option<Instant> = None;
    let mut installed = options.initial.number;
    // the incarnation the view log knows this process by: 0 for a member's first process
    let mut incarnation = options.initial.members.get(&id).copied().unwrap_or(0);
    // the place this process holds in the view (its incarnation there), kept while it
    // rejoins after a fence: `None` for a new process of the member, which holds none
    let mut place = Some(incarnation);
    let mut joining = false;
    // the last request to rejoin (or to evict the old process), and whether one is under way
    let mut asked: Option<Instant> = None;
    let asking = Arc::new(AtomicBool::new(false));
    let said: Arc<Mutex<Option<String>>> = Arc::default();
    // the last report written: for which view and round of the change, and when
    let mut reported: Option<(u64, u64, Instant)> = None;
    let fenced = |view: u64, why: String| {
        log(id, &LogEvent::View(format!("fenced: {why}")));
        core.fence(view, why);
    };
    let durable = matches!(options.storage, Storage::Dir(_));
    links.durable.store(durable, Ordering::Release);
    let mut group = match ViewGroup::start_in(
        id,
        options.initial.clone(),
        transport(),
        options.config,
        &options.storage,
    )
    .await
    {
        Ok(g) => g,
        Err(e) => {
            // without its log the member can neither renew its lease nor follow the views
            fenced(installed, format!("the view log did not start: {e}"));
            return;
        }
    };
    *lock(&shared.group) = Some(group.clone());
    if group.resumed() {
        // a restart on the member's folder: its Raft node goes on, but its object's state
        // died with the process before, which the view may still count; it rejoins as a
        // new process (the view log knows it by its new incarnation)
        log(
            id,
            &LogEvent::View(format!(
                "resumed the view log at view {}: this process (incarnation {:x}) rejoins",
                group.state().view.number,
                shared.incarnation
            )),
        );
        shared.rejoin.store(true, Ordering::Release);
    }
    // the last proposal to evict each member: another waits as long again
    let mut proposed: BTreeMap<ProcessId, Instant> = BTreeMap::new();
    let again = options.evict_after.max(options.config.write_timeout);
    let mut last: Option<ViewStatus> = None;
    // the last restore proposed (an exit gated by a deficit view): another waits as long
    let mut restored: Option<Instant> = None;
    // the last request to leave
    let mut left: Option<Instant> = None;
    loop {
        if !joining && shared.rejoin.load(Ordering::Acquire) {
            joining = true;
            incarnation = shared.incarnation;
            if !lock(lease).ever_granted() {
                // a new process of the member (it restarted)
                log(
                    id,
                    &LogEvent::View(format!(
                        "another process of {id} is in the view: this one (incarnation {incarnation:x}) rejoins"
                    )),
                );
                place = None;
                if durable {
                    // its group is its member's Raft node, resumed from the folder (or
                    // started on it): it keeps its log and its votes
                    group.set_incarnation(incarnation);
                } else {
                    // its group's log is empty, so it joins with a group of its own as a
                    // learner, which votes only once a view has it (its peers do not hear
                    // its Raft messages before)
                    group.shutdown().await;
                    group = match ViewGroup::join(
                        id,
                        incarnation,
                        options.initial.clone(),
                        transport(),
                        options.config,
                    )
                    .await
                    {
                        Ok(g) => g,
                        Err(e) => {
                            fenced(
                                installed,
                                format!("the view log did not start to rejoin: {e}"),
                            );
                            return;
                        }
                    };
                    *lock(&shared.group) = Some(group.clone());
                }
            } else {
                // the process that fenced: its group keeps its log and its votes (a fresh
                // one, while the others still count it a voter, could vote twice in a term)
                log(
                    id,
                    &LogEvent::View(format!(
                        "evicted: this process (incarnation {incarnation:x}) rejoins"
                    )),
                );
            }
        }
        let state = group.state();
        let rejoining = state
            .pending
            .iter()
            .flat_map(|p| p.change.incoming())
            .collect();
        links.set_view(&state.view.members, rejoining);
        // a member of the view, acting as one: not while it rejoins (a process that fenced
        // is still in the view while the view has its place)
        let in_view = state
            .view
            .members
            .get(&id)
            .is_some_and(|i| *i == incarnation || Some(*i) == place);
        let member = in_view && !joining;
        let now = ViewStatus {
            number: state.view.number,
            members: state.view.members.keys().copied().collect(),
            pending: state.pending.clone(),
            leader: group.leader(),
        };
        let changed = last.as_ref() != Some(&now);
        if !core.publish(changed.then(|| now.clone())) {
            group.shutdown().await;
            return;
        }
        if !joining && lock(lease).expired(Instant::now()) {
            let why = format!(
                "the lease ran out: no majority of view {} answered a beat for {:?}",
                installed, options.lease
            );
            log(id, &LogEvent::View(format!("fenced: {why}")));
            core.evicted(installed, why);
            // nothing more this tick: no beat may renew the lease it gave up
            tokio::time::sleep(TICK).await;
            continue;
        }
        if member && last_beat.is_none_or(|at| at.elapsed() >= options.heartbeat) {
            let now = Instant::now();
            last_beat = Some(now);
            let n = lock(lease).beat(now);
            if let Ok(bytes) = encode(&ViewFrame::Beat { n }) {
                for &p in state.view.members.keys().filter(|p| **p != id) {
                    let _ = net.send(p, Wire::View(bytes.clone()));
                }
            }
        }
        if state.view.number > installed && !in_view && !joining {
            let why = format!("evicted: not a member of view {}", state.view.number);
            log(id, &LogEvent::View(format!("fenced: {why}")));
            core.evicted(state.view.number, why);
            installed = state.view.number;
            tokio::time::sleep(TICK).await;
            continue;
        }
        let restarts_in_cs = joining && state.view.start.get(&id) == Some(&CsState::InCs);
        if state.view.number > installed && in_view && restarts_in_cs {
            // a process that fenced after it reported in the CS for this view: it gave its
            // slot up, so it does not take it back without a lease; it stays fenced, and the
            // change of the same members it asks for next starts it out (it reports out)
            log(
                id,
                &LogEvent::View(format!(
                    "view {} has this fenced process in the CS: it waits for the next view",
                    state.view.number
                )),
            );
            installed = state.view.number;
        }
        if state.view.number > installed && in_view {
            if joining {
                // its place in the view: the one it kept, or the one it rejoined with
                incarnation = state.view.members[&id];
                place = Some(incarnation);
                group.set_incarnation(incarnation);
            }
            if let Err(why) = core.install(&state.view, joining) {
                fenced(state.view.number, why);
                group.shutdown().await;
                return;
            }
            installed = state.view.number;
            if joining {
                // back in: a later eviction makes it rejoin again; the silence of the
                // members it has not reconnected to yet counts from now
                links.restart_silences(Instant::now());
                joining = false;
                shared.rejoin.store(false, Ordering::Release);
                *lock(&said) = None;
            }
        }
        if joining
            && !member
            && !asking.load(Ordering::Acquire)
            && asked.is_none_or(|at| at.elapsed() >= options.heartbeat)
        {
            // ask to rejoin (the log answers from the leader's state: this process's own
            // group has not caught up); while the view still has the old process, ask to
            // evict it first
            asked = Some(Instant::now());
            let to: Vec<ProcessId> = group
                .leader()
                .into_iter()
                .chain(state.view.members.keys().copied())
                .filter(|p| *p != id)
                .collect();
            let (t, log, asking, said) = (transport(), log.clone(), asking.clone(), said.clone());
            let own = group.clone();
            let current = state.view.number;
            let held = place;
            asking.store(true, Ordering::Release);
            tokio::spawn(async move {
                let rejoin = Proposal::Rejoin {
                    member: id,
                    incarnation,
                };
                let what = match write_through(&t, id, &own, to.clone(), Command::Propose(rejoin))
                    .await
                {
                    // the view still has this very process (fenced on its lease before the
                    // others evicted it): a change of the same members, for which it reports
                    // out, takes it back (evicting its place first could leave the view
                    // without a majority of live members)
                    Ok(Applied::Ignored(Refusal::OtherIncarnation { in_view, .. }))
                        if Some(in_view) == held =>
                    {
                        let restore = Command::Propose(Proposal::Restore { view: current });
                        match write_through(&t, id, &own, to, restore).await {
                            Ok(applied) => {
                                format!("asked for a change that takes it back: {applied:?}")
                            }
                            Err(e) => format!("asking for a change that takes it back failed: {e}"),
                        }
                    }
                    // the view already has the process under the incarnation it rejoins with
                    Ok(Applied::Ignored(Refusal::AlreadyMember { .. })) => {
                        "already in the view: it installs it".to_string()
                    }
                    // the view still has this member's old process, and this one resumed
                    // the member's Raft node: it takes the old one's place in one change
                    // (which needs no majority of live members: the old one is gone)
                    Ok(Applied::Ignored(Refusal::OtherIncarnation { in_view, .. })) if durable => {
                        let replace = Command::Propose(Proposal::Replace {
                            member: id,
                            incarnation: in_view,
                            by: incarnation,
                        });
                        match write_through(&t, id, &own, to, replace).await {
                            Ok(applied) => {
                                format!("asked to take its place in the view: {applied:?}")
                            }
                            Err(e) => format!("asking to take its place in the view failed: {e}"),
                        }
                    }
                    // the view still has this member's old process: out first
                    Ok(Applied::Ignored(Refusal::OtherIncarnation { in_view, .. })) => {
                        let evict = Command::Propose(Proposal::Evict {
                            member: id,
                            incarnation: in_view,
                        });
                        match write_through(&t, id, &own, to, evict).await {
                            Ok(applied) => {
                                format!("asked to evict its place in the view first: {applied:?}")
                            }
                            Err(e) => format!("asking to evict its place in the view failed: {e}"),
                        }
                    }
                    Ok(applied) => format!("asked to rejoin: {applied:?}"),
                    Err(e) => format!("asking to rejoin failed: {e}"),
                };
                // each answer once, not once a beat
                if lock(&said).as_deref() != Some(what.as_str()) {
                    log(id, &LogEvent::View(what.clone()));
                    *lock(&said) = Some(what);
                }
                asking.store(false, Ordering::Release);
            });
        }
        // a member reports for a pending change; so does the process that fenced while the
        // view still has it (it reports out: it gave its slot up), or a change that keeps it
        // (its eviction refused: no majority without it) would wait for it for ever
        if let Some(p) = state.pending.as_ref().filter(|_| in_view) {
            // a committed change removes these members: their leases are not renewed from
            // now on (a report is that promise)
            let removed: Vec<ProcessId> = state
                .view
                .members
                .keys()
                .copied()
                .filter(|m| p.change.removes(*m))
                .collect();
            for &m in &removed {
                lock(lease).refuse(m);
            }
            // a member that leaves exited first and proposed it itself: no lease to wait out
            let removed: Vec<ProcessId> = removed
                .into_iter()
                .filter(|m| !p.change.leave.contains(m))
                .collect();
            let due = !p.reports.contains_key(&id)
                && reported.is_none_or(|(next, round, at)| {
                    next != p.next
                        || round != p.round
                        || at.elapsed() >= options.config.write_timeout
                });
            if due {
                if let Some((stable, clock)) = core.freeze(p.next) {
                    reported = Some((p.next, p.round, Instant::now()));
                    // ... and it waits until they have fenced: evict_after since its last
                    // answer to each. The report names the change's round: if the change
                    // grows meanwhile, the log refuses it, and the member reports again
                    let wait =
                        lock(lease).report_wait(removed, options.evict_after, Instant::now());
                    let (group, log, next, round) = (group.clone(), log.clone(), p.next, p.round);
                    tokio::spawn(async move {
                        tokio::time::sleep(wait).await;
                        if let Err(e) = group.report_round(next, round, stable, clock).await {
                            log(id, &LogEvent::View(format!("report for view {next}: {e}")));
                        }
                    });
                }
            }
        }
        if changed {
            if last.as_ref().map(|l| l.number) != Some(now.number) {
                log(
                    id,
                    &LogEvent::View(format!(
                        "view {} installed: members {}",
                        now.number,
                        ids(&now.members)
                    )),
                );
            }
            last = Some(now);
        }
        if member
            && shared.leave.load(Ordering::Acquire)
            && !state
                .pending
                .as_ref()
                .is_some_and(|p| p.change.leave.contains(&id))
            && left.is_none_or(|at| at.elapsed() >= options.config.write_timeout)
        {
            // leaving: out of the CS already; ask to be removed, unless the view cannot
            // shrink (fewer than a majority would remain): then it stops, as a crash would
            left = Some(Instant::now());
            let removed = state.view.members.keys().filter(|m| {
                **m == id
                    || state
                        .pending
                        .as_ref()
                        .is_some_and(|p| p.change.removes(**m))
            });
            if state.view.members.len() - removed.count() < state.view.majority() {
                log(
                    id,
                    &LogEvent::View(format!(
                        "leaving: view {} cannot shrink below a majority without it; stopping",
                        state.view.number
                    )),
                );
                core.evicted(installed, "left".into());
                continue;
            }
            let (group, log) = (group.clone(), log.clone());
            tokio::spawn(async move {
                match group.propose(Proposal::Leave(id)).await {
                    Ok(applied) => log(id, &LogEvent::View(format!("asked to leave: {applied:?}"))),
                    Err(e) => log(id, &LogEvent::View(format!("asking to leave failed: {e}"))),
                }
            });
        }
        if member
            && state.pending.is_none()
            && core.gated()
            && restored.is_none_or(|at| at.elapsed() >= again)
        {
            // a deficit view: once entries brought the counts back, a view started from the
            // states now restores the bounds, and the exits go on
            restored = Some(Instant::now());
            let (group, log, view) = (group.clone(), log.clone(), installed);
            tokio::spawn(async move {
                let outcome = group.propose(Proposal::Restore { view }).await;
                let what = match outcome {
                    Ok(applied) => {
                        format!("proposed to restore the bounds of view {view}: {applied:?}")
                    }
                    Err(e) => format!("proposing to restore the bounds of view {view} failed: {e}"),
                };
                log(id, &LogEvent::View(what));
            });
        }
        // members unheard for evict_after, and members whose old process the view still has
        // while their link talks to a new one
        let restarted = links.replaced_in_view();
        let mut candidates: Vec<(ProcessId, &str)> = links
            .down_for(options.evict_after)
            .into_iter()
            .map(|p| (p, "unreachable"))
            .collect();
        candidates.extend(restarted.into_iter().map(|p| (p, "restarted")));
        for (p, why) in candidates {
            let removed = state.pending.as_ref().is_some_and(|x| x.change.removes(p));
            let Some(&incarnation) = state.view.members.get(&p) else {
                continue;
            };
            if !member || p == id || removed {
                continue;
            }
            if proposed.get(&p).is_some_and(|at| at.elapsed() < again) {
                continue;
            }
            proposed.insert(p, Instant::now());
            let (group, log) = (group.clone(), log.clone());
            tokio::spawn(async move {
                // the process it saw: once that one is gone, a late retry evicts nothing
                let outcome = group
                    .propose(Proposal::Evict {
                        member: p,
                        incarnation,
                    })
                    .await;
                let what = match outcome {
                    Ok(applied) => format!("proposed to evict {p} ({why}): {applied:?}"),
                    Err(e) => format!("proposing to evict {p} ({why}) failed: {e}"),
                };
                log(id, &LogEvent::View(what));
            });
        }
        tokio::time::sleep(TICK).await;
    }
}

/// Writes `command` to the view log through the members `to` (in order; one that is not
/// the leader names it, and it is tried next): what a process that is not (yet) a Raft
/// member of the group does, since its own group knows no leader.
async fn write_through<M: Send + 'static>(
    transport: &LinkTransport<M>,
    me: ProcessId,
    own: &ViewGroup<LinkTransport<M>>,
    to: Vec<ProcessId>,
    command: Command,
) -> Result<Applied, String> {
    let mut queue: std::collections::VecDeque<ProcessId> = to.into();
    let mut tried = BTreeSet::new();
    let mut last = String::from("no member to ask");
    while let Some(p) = queue.pop_front() {
        if !tried.insert(p) {
            continue;
        }
        if p == me {
            // named the leader: a fenced member keeps its group, and may lead it (it was
            // the leader when it paused, or won an election since); it writes there
            if own.leader() == Some(me) {
                match own.write(command.clone()).await {
                    Ok(applied) => return Ok(applied),
                    Err(e) => {
                        last = format!("this member leads the log, and its write failed: {e}")
                    }
                }
            }
            continue;
        }
        match transport.rpc(p, ViewRpc::Write(command.clone())).await {
            Ok(ViewRpcReply::Written(Ok(applied))) => return Ok(applied),
            Ok(ViewRpcReply::Written(Err(WriteRefusal::NotLeader { leader: Some(l) }))) => {
                queue.push_front(l);
                last = format!("{p} is not the leader");
            }
            Ok(other) => last = format!("{p} answered {other:?}"),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

fn ids(members: &BTreeSet<ProcessId>) -> String {
    members
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

#[cfg(test)]
mod tests;
