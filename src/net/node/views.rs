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
//!   and **rejoins** (see [`run`]). In a deficit view (a lower bound lowered) the exits of
//!   the members a lowered bound counts wait, until a restore view lifts the gate (or a view
//!   with a lost member back, where no restore can: [`Rebuilt::restorable`]); in a surplus
//!   view (an upper bound raised) the entries of the members a raised bound counts wait,
//!   until a restore view that one of them proposes once its exit has completed
//!   ([`Rebuilt::gates_entries`]).
//!
//! The leases that make an eviction safe for a member that is only paused or cut off are in
//! `lease.rs`, driven from here (see the node module's doc). Not here yet
//! (docs/fault-tolerance.md, "Status"): fencing tokens.

mod links;
mod rebuild;
mod task;
mod transport;

pub use rebuild::{rebuild_from, Rebuild, Rebuilt};
pub(super) use task::run;
pub use transport::LinkTransport;

use super::lease::{margin_holds, Lease, LeaseWatch, CLOCK_DRIFT};
use super::{EntryGate, ExitGate, Wire};
use crate::cs::CsState;
use crate::id::ProcessId;
use crate::net::frame::MAX_FRAME_LEN;
use crate::net::link::NetSender;
use crate::net::view::{
    majority, Command, Pending, Proposal, Storage, View, ViewConfig, ViewGroup, ViewRpc,
    ViewRpcReply,
};
use links::ViewLinks;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use task::TICK;
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
        /// The sender's process resumed its member's Raft node from its folder
        /// ([`ViewGroup::resumed`](crate::net::view::ViewGroup::resumed)).
        resumed: bool,
    },
    /// The answer to the receiver's request `id`.
    Reply {
        /// The request's number.
        id: u64,
        /// The answer.
        reply: ViewRpcReply,
        /// As in [`ViewFrame::Request`].
        resumed: bool,
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
        /// The sender's link saw the receiver replace an earlier process of its member,
        /// which the view does not have: the receiver is a new process, and its Raft node,
        /// unless it resumed its member's, is a new one too.
        new_process: bool,
    },
}

/// Why a rejoining learner's Raft message is dropped ([`NodeViews::learner_still_voter`]).
const LEARNER_STILL_VOTER: &str =
    "a Raft message from a rejoining process while its member is still a voter here";

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
    /// and the node takes part in Raft with a new process of a member that says it resumed
    /// its member's node, since it assumes that **every** member of the cluster keeps its
    /// log on disk (a cluster file's `[storage]` sets it for all of them). A process on a
    /// lost or emptied folder is a new Raft node, and rejoins as one. A folder must not be
    /// copied or restored from a backup while the cluster runs under its epoch
    /// (docs/fault-tolerance.md, "A lost folder").
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

/// Why a member asks for a restore view ([`ViewCore::gated`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Restore {
    /// Its exit waits at a deficit view's gate: asked again every `max(evict_after,
    /// write_timeout)` while it waits, across views (a restore too early starts the same
    /// deficit view again).
    Deficit,
    /// Its exit completed in a surplus view that gates its entries: asked at once in that
    /// view, and again as often while no view installs.
    Surplus,
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
    /// Whether a restore view may lift a gate now, and why ([`Restore`]): an exit waits at a
    /// deficit view's, or this member's exit completed in a surplus view that gates its
    /// entries (only such an exit brings a raised bound's count down; an entry waiting there
    /// proposes nothing, since the count it waits on is what the view started with until
    /// such an exit).
    fn gated(&self) -> Option<Restore>;
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

/// What the node's core and its view task share: the link state (which the transport holds
/// too), the group once started, and the lease.
pub(super) struct ViewShared<M: Send + 'static> {
    pub(super) links: Arc<ViewLinks>,
    pub(super) group: Mutex<Option<ViewGroup<LinkTransport<M>>>>,
    pub(super) lease: Mutex<Lease>,
    /// Set when this process learns that the view has another process of its member (it
    /// restarted, and never held a lease): the view task makes it rejoin.
    pub(super) rejoin: AtomicBool,
    /// Set when a member says its link saw this process replace an earlier one of its
    /// member ([`ViewFrame::Outside`]'s `new_process`): unless it resumed its member's Raft
    /// node, its group is a new node, which rejoins as a learner on a cleared folder.
    pub(super) new_process: AtomicBool,
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
    /// Whether a deficit view lowered a bound that counts this member, and what lifts the
    /// gate on its exits (from [`Rebuilt::deficit`] and [`Rebuilt::restorable`]).
    pub(super) exit_gate: ExitGate,
    /// Whether a surplus view raised an upper bound that counts this member, whose entries
    /// then wait (from [`Rebuilt::gates_entries`]).
    pub(super) entry_gate: EntryGate,
    /// An exit completed here while the entries were gated: the count of every raised bound
    /// that counts this member fell, and a restore view may lift the gate (cleared at each
    /// install).
    pub(super) exited_gated: bool,
    /// Messages of a later view than the object's, from their sender, kept until it installs.
    pub(super) ahead: Vec<(ProcessId, u64, M)>,
    /// The links' peer timeout: a peer declared unreachable was last heard this long ago.
    pub(super) silence: Duration,
    /// What this node sends a member whose link has not yet met the process the view has
    /// (a restarted member readmitted before this node's link reconnected to it), kept in
    /// order until the link meets that process: the link drops what it queued for the old
    /// process when it meets the new one, and a message of the view for the new process
    /// must not go with it.
    pub(super) held: BTreeMap<ProcessId, Held<M>>,
}

/// Messages kept for a member's process `incarnation` until its link meets it
/// ([`NodeViews::held`]).
#[derive(Debug)]
pub(super) struct Held<M> {
    pub(super) incarnation: u64,
    pub(super) queue: Vec<Wire<M>>,
}

/// Whether a link whose session is with process `met` of a member (`None`: it never
/// connected) delivers to process `incarnation`, the view's: the same process, or the
/// member's first process (place 0, which the view names by 0) while the link saw no
/// restart. A link that never connected delivers what it queued to the first process it
/// meets, which is the view's.
pub(super) fn link_meets(met: Option<u64>, incarnation: u64, saw_restart: bool) -> bool {
    match met {
        None => true,
        Some(i) => i == incarnation || (incarnation == 0 && !saw_restart),
    }
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
                new_process: AtomicBool::new(false),
                incarnation,
                leave: AtomicBool::new(false),
            }),
            number: initial.number,
            members: initial.members.keys().copied().collect(),
            processes: initial.members.clone(),
            frozen: None,
            exit_gate: ExitGate::Open,
            entry_gate: EntryGate::Open,
            exited_gated: false,
            ahead: Vec::new(),
            silence,
            held: BTreeMap::new(),
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

    /// Whether `from`'s process is heard only as a rejoining learner
    /// ([`ViewLinks::learner_only`]) while this member's Raft membership still has its
    /// member as a voter (the change that removes its old process not through yet): its
    /// Raft messages would count as the old process's votes and acknowledgements, which its
    /// new node does not have. They are dropped until the membership lets the member go.
    fn learner_still_voter(&self, from: ProcessId, resumed: bool) -> bool {
        self.shared.links.learner_only(from, resumed)
            && lock(&self.shared.group)
                .as_ref()
                .is_some_and(|g| g.voters().contains(&from))
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
            Ok(ViewFrame::Reply { resumed, .. }) if !self.shared.links.may_raft(from, resumed) => {
                Err("a view-log answer from a new process that has not rejoined".into())
            }
            Ok(ViewFrame::Reply { resumed, .. }) if self.learner_still_voter(from, resumed) => {
                Err(LEARNER_STILL_VOTER.into())
            }
            Ok(ViewFrame::Reply { id, reply, .. }) => {
                match self.shared.links.answer(from, id, reply) {
                    true => Ok(None),
                    false => Err(format!("an answer to no request of ours to it ({id})")),
                }
            }
            Ok(ViewFrame::Beat { n }) => {
                // only a member of this member's view gets an answer; one it left out (or a
                // new process of a member, which the view does not have yet) is told
                let current = self.shared.links.current(from);
                let member = self.dense(from).is_some() && current;
                let frame = match member {
                    false => Some(ViewFrame::Outside {
                        view: self.number,
                        new_process: !current,
                    }),
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
            Ok(ViewFrame::Outside { view, new_process })
                if view >= self.number && self.dense(from).is_some() =>
            {
                if new_process {
                    self.shared.new_process.store(true, Ordering::Release);
                }
                Ok(Some(view))
            }
            Ok(ViewFrame::Outside { view, .. }) => Err(format!(
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
            Ok(ViewFrame::Request { rpc, resumed, .. })
                if !allowed(from, &rpc, resumed, &self.shared.links) =>
            {
                Err(format!(
                    "a view-log request it may not make: {}",
                    match rpc {
                        ViewRpc::Write(c) => format!("{c:?}"),
                        _ => "a Raft request from a new process that has not rejoined".into(),
                    }
                ))
            }
            Ok(ViewFrame::Request {
                rpc: ViewRpc::AppendEntries(_) | ViewRpc::Vote(_) | ViewRpc::InstallSnapshot(_),
                resumed,
                ..
            }) if self.learner_still_voter(from, resumed) => Err(LEARNER_STILL_VOTER.into()),
            Ok(ViewFrame::Request { id, rpc, .. }) => {
                // a group not started yet leaves the request unanswered: Raft asks again
                let group = lock(&self.shared.group).clone();
                if let Some(group) = group {
                    let net = net.clone();
                    tokio::spawn(async move {
                        let reply = group.handle_rpc(from, rpc).await;
                        let resumed = group.resumed();
                        if let Ok(bytes) = encode(&ViewFrame::Reply { id, reply, resumed }) {
                            let _ = net.send(from, Wire::View(bytes));
                        }
                    });
                }
                Ok(None)
            }
        }
    }
}

/// Whether `from` may make the view-log request `rpc` (its frame saying whether its process
/// `resumed` its member's Raft node): a member proposes a rejoin for itself only, and a new
/// process that has not rejoined makes no Raft request: it may only ask to rejoin, or to
/// evict its old process.
fn allowed(from: ProcessId, rpc: &ViewRpc, resumed: bool, links: &ViewLinks) -> bool {
    match rpc {
        ViewRpc::Write(Command::Propose(Proposal::Rejoin { member, .. })) => *member == from,
        // in place of its old process: only where the new process is the same Raft node
        ViewRpc::Write(Command::Propose(Proposal::Replace { member, .. })) => {
            *member == from && resumed && links.durable.load(Ordering::Acquire)
        }
        ViewRpc::Write(Command::Propose(Proposal::Evict { member, .. })) if *member == from => true,
        // a member leaves on its own (it exited first): no other may say it left
        ViewRpc::Write(Command::Propose(Proposal::Leave(p))) => *p == from && links.may_log(from),
        ViewRpc::Write(_) => links.may_log(from),
        // Raft's own messages: from a new process too when its Raft node is the same one
        ViewRpc::AppendEntries(_) | ViewRpc::Vote(_) | ViewRpc::InstallSnapshot(_) => {
            links.may_raft(from, resumed)
        }
    }
}

#[cfg(test)]
mod tests;
