//! The openraft group over the view state machine: an in-memory log store and state machine
//! (the snapshot is the serialized [`ViewState`]), the Raft network behind [`ViewTransport`],
//! and [`ViewGroup`], one member's handle.
//!
//! # Membership follows the views
//! The Raft voters are the current view's members (Raft node id = the member's index). The
//! leader reconciles them after every applied entry and every change of its metrics: a member
//! that rejoins is added as a learner as soon as the change naming it is committed (so it
//! catches up on the log while the others report), and once a view installs the voters are
//! replaced by its members (`change_membership`, joint consensus, the old voters that are not
//! in the view removed). Any leader does it, so a leader that crashes halfway leaves the work
//! to the next one.
//!
//! An evicted member's Raft instance stops being a voter (and a node of the group): the
//! leader stops replicating to it, and the members' votes and commits no longer count it, so
//! it cannot block the majority. It learns nothing more from the log; if it is alive it keeps
//! campaigning with its old membership, which is harmless: its log lacks the entries that
//! evicted it, so no member grants it a vote (Raft's up-to-date check comes before a vote is
//! taken, and openraft's leader lease refuses it outright while a leader is heard). A
//! process that fenced keeps its group, log and votes intact, and rejoins through it (the
//! leader adds it back as a learner, [`ViewGroup::set_incarnation`] names the incarnation
//! its reports carry); a member's *new* process, whose log is empty, joins with
//! [`ViewGroup::join`] instead, as a learner that votes only once a view has it.
//!
//! # Writes
//! [`ViewGroup::propose`] and [`ViewGroup::report`] write a [`Command`] through the leader:
//! on a member that is not the leader (openraft's `ForwardToLeader`), the command is sent to
//! the named leader through the transport ([`ViewRpc::Write`]) and the leader's outcome
//! returned; without a known leader (an election) the write is tried again every
//! [`ViewConfig::retry`], until [`ViewConfig::write_timeout`] ([`ViewError::Timeout`]: no
//! majority committed it in time, as in a minority partition). A write whose first try may
//! have been committed (a transport failure or a timeout at the leader) is tried again: its
//! second application is then refused by the state machine as a duplicate
//! ([`Refusal::AlreadyInChange`](super::Refusal::AlreadyInChange),
//! [`Refusal::AlreadyReported`](super::Refusal::AlreadyReported)), so the outcome returned
//! can be that refusal while the first write took effect: the state ([`ViewGroup::watch`])
//! is what to act on.

use super::state::{Applied, Command, InvalidView, Proposal, View, ViewState};
use crate::cs::CsState;
use crate::id::ProcessId;
use openraft::error::{
    ClientWriteError, InstallSnapshotError, NetworkError, RPCError, RaftError, RemoteError,
};
use openraft::network::{Backoff, RPCOption, RaftNetwork, RaftNetworkFactory};
use openraft::raft::{
    AppendEntriesRequest, AppendEntriesResponse, InstallSnapshotRequest, InstallSnapshotResponse,
    VoteRequest, VoteResponse,
};
use openraft::storage::{LogFlushed, RaftLogStorage, RaftStateMachine, Snapshot};
use openraft::{
    Config, EmptyNode, Entry, EntryPayload, LogId, LogState, RaftLogId, RaftLogReader,
    RaftSnapshotBuilder, ServerState, SnapshotMeta, StorageError, StorageIOError, StoredMembership,
    Vote,
};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::future::Future;
use std::io::Cursor;
use std::ops::RangeBounds;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, watch, Mutex};
use tokio::task::JoinHandle;

/// A Raft node id: the member's index ([`ProcessId`]'s `u32`, widened).
pub(crate) type NodeId = u64;

openraft::declare_raft_types!(
    /// The view log's Raft types: [`Command`]s in, `Option<Applied>` out (`None` for Raft's
    /// own entries), node ids are members' indices, and nodes carry no address (addresses live
    /// in the cluster file; the transport knows them).
    pub ViewRaft:
        D = Command,
        R = Option<Applied>,
        NodeId = NodeId,
        Node = EmptyNode,
);

/// The openraft instance of a view group.
pub(crate) type Raft = openraft::Raft<ViewRaft>;

pub use store::Storage;
pub(crate) use store::{LogStore, Machine};

fn node_id(p: ProcessId) -> NodeId {
    u64::from(p.0)
}

fn member(id: NodeId) -> Result<ProcessId, ViewError> {
    u32::try_from(id)
        .map(ProcessId)
        .map_err(|_| ViewError::BadNodeId(id))
}

/// The view group's timers.
///
/// The defaults are for a LAN (round trips well under a millisecond): a heartbeat every
/// 100 ms and an election after 500 to 1,000 ms without one (five to ten heartbeats, so a
/// lost heartbeat or two does not start an election, and a crashed leader is replaced
/// within about a second). Elections only happen when a leader is lost; the CS path never
/// waits on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewConfig {
    /// The leader's heartbeat interval.
    pub heartbeat: Duration,
    /// The shortest election timeout.
    pub election_min: Duration,
    /// The longest election timeout (each member draws its timeout between the two).
    pub election_max: Duration,
    /// How long a write ([`ViewGroup::propose`], [`ViewGroup::report`]) keeps trying.
    pub write_timeout: Duration,
    /// The pause between tries of a write while no leader is known or reachable.
    pub retry: Duration,
    /// After the transport reports a member unreachable, how long Raft waits before
    /// replicating to it again.
    pub unreachable_backoff: Duration,
}

impl Default for ViewConfig {
    fn default() -> Self {
        ViewConfig {
            heartbeat: Duration::from_millis(100),
            election_min: Duration::from_millis(500),
            election_max: Duration::from_millis(1000),
            write_timeout: Duration::from_secs(5),
            retry: Duration::from_millis(50),
            unreachable_backoff: Duration::from_millis(200),
        }
    }
}

impl ViewConfig {
    /// openraft's configuration for these timers, checked.
    pub fn raft(&self) -> Result<Config, ViewError> {
        let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
        if self.write_timeout.is_zero() || self.retry.is_zero() {
            return Err(ViewError::Config(
                "write_timeout and retry must be positive".into(),
            ));
        }
        let config = Config {
            cluster_name: "lkcs-views".into(),
            heartbeat_interval: ms(self.heartbeat),
            election_timeout_min: ms(self.election_min),
            election_timeout_max: ms(self.election_max),
            // a node carries each request in one link frame (`MAX_VIEW_FRAME`): a few entries
            // per request, and snapshots (a few hundred bytes of view state) in small chunks
            max_payload_entries: 16,
            snapshot_max_chunk_size: 16 * 1024,
            // a short log: a store on disk rewrites it whole at each change (store.rs)
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(1024),
            max_in_snapshot_log_to_keep: 128,
            ..Config::default()
        };
        config
            .validate()
            .map_err(|e| ViewError::Config(e.to_string()))
    }
}

/// A message between members' view groups: what the node carries on its links.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[allow(clippy::large_enum_variant)]
pub enum ViewRpc {
    /// Raft's log replication (and heartbeat).
    AppendEntries(AppendEntriesRequest<ViewRaft>),
    /// Raft's vote request.
    Vote(VoteRequest<NodeId>),
    /// Raft's snapshot transfer (one chunk).
    InstallSnapshot(InstallSnapshotRequest<ViewRaft>),
    /// A command forwarded to the leader by a member that is not it.
    Write(Command),
}

/// The answer to a [`ViewRpc`].
#[derive(Debug, Serialize, Deserialize)]
pub enum ViewRpcReply {
    /// To [`ViewRpc::AppendEntries`].
    AppendEntries(Result<AppendEntriesResponse<NodeId>, RaftError<NodeId>>),
    /// To [`ViewRpc::Vote`].
    Vote(Result<VoteResponse<NodeId>, RaftError<NodeId>>),
    /// To [`ViewRpc::InstallSnapshot`].
    InstallSnapshot(
        Result<InstallSnapshotResponse<NodeId>, RaftError<NodeId, InstallSnapshotError>>,
    ),
    /// To [`ViewRpc::Write`]: the outcome once committed and applied, or why not.
    Written(Result<Applied, WriteRefusal>),
    /// The request was not handled: it claimed another sender than the one it came from.
    Refused(String),
}

/// Why a leader did not take a forwarded write.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum WriteRefusal {
    /// It is not the leader (any more); this one is, as far as it knows.
    NotLeader {
        /// The leader it knows of.
        leader: Option<ProcessId>,
    },
    /// It could not commit the write within its [`ViewConfig::write_timeout`].
    TimedOut,
    /// Its Raft instance stopped.
    Stopped(String),
}

/// A member that the transport could not reach, or whose answer did not come.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Unreachable {
    /// The member.
    pub member: ProcessId,
    /// Why.
    pub reason: String,
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} unreachable: {}", self.member, self.reason)
    }
}

impl std::error::Error for Unreachable {}

/// How a view group reaches the other members: one request, one reply. The node carries
/// them as one more frame kind on its authenticated links; the receiver hands the request
/// to its [`ViewGroup::handle_rpc`] with the sender's (authenticated) id.
pub trait ViewTransport: Send + Sync + 'static {
    /// Sends `req` to member `to` and waits for its reply.
    fn rpc(
        &self,
        to: ProcessId,
        req: ViewRpc,
    ) -> impl Future<Output = Result<ViewRpcReply, Unreachable>> + Send;
}

/// Errors of a view group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ViewError {
    /// A configuration that cannot work.
    Config(String),
    /// The initial view is not a view.
    Invalid(InvalidView),
    /// [`ViewGroup::start`] for a member not in the initial view.
    NotAMember(ProcessId),
    /// A Raft node id that is not a member's index.
    BadNodeId(u64),
    /// No leader committed the write within [`ViewConfig::write_timeout`] (no majority
    /// reachable, or no leader elected).
    Timeout {
        /// The write.
        command: Command,
        /// How long it was tried.
        waited: Duration,
    },
    /// The member's Raft instance stopped (shut down, or a fatal error).
    Stopped(String),
    /// Raft refused the operation.
    Raft(String),
    /// A peer answered with a reply of another kind than the request.
    WrongReply(ProcessId),
    /// The group's folder ([`Storage::Dir`]) could not be read or made: the cause, naming
    /// the file.
    Storage(String),
}

impl fmt::Display for ViewError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ViewError::Config(e) => write!(f, "view log configuration: {e}"),
            ViewError::Invalid(e) => write!(f, "initial view: {e}"),
            ViewError::NotAMember(p) => write!(f, "{p} is not a member of the initial view"),
            ViewError::BadNodeId(id) => write!(f, "Raft node id {id} is not a member index"),
            ViewError::Timeout { command, waited } => {
                write!(f, "{command:?} not committed within {waited:?}")
            }
            ViewError::Stopped(e) => write!(f, "the view log stopped: {e}"),
            ViewError::Raft(e) => write!(f, "view log: {e}"),
            ViewError::WrongReply(p) => write!(f, "{p} answered a view request out of kind"),
            ViewError::Storage(e) => write!(f, "view log storage: {e}"),
        }
    }
}

impl std::error::Error for ViewError {}

/// One applied command and its outcome, as [`ViewGroup::subscribe`] delivers them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The log index it was applied at (the same on every member).
    pub index: u64,
    /// The command.
    pub command: Command,
    /// What it did.
    pub applied: Applied,
}

// ---- the network ----

/// openraft's network factory over a [`ViewTransport`].
pub(crate) struct Network<T> {
    transport: Arc<T>,
    backoff: Duration,
}

/// One peer's end of [`Network`].
pub(crate) struct Connection<T> {
    transport: Arc<T>,
    target: NodeId,
    backoff: Duration,
}

impl<T: ViewTransport> RaftNetworkFactory<ViewRaft> for Network<T> {
    type Network = Connection<T>;

    async fn new_client(&mut self, target: NodeId, _node: &EmptyNode) -> Connection<T> {
        Connection {
            transport: self.transport.clone(),
            target,
            backoff: self.backoff,
        }
    }
}

type RpcError<E = openraft::error::Infallible> = RPCError<NodeId, EmptyNode, RaftError<NodeId, E>>;

impl<T: ViewTransport> Connection<T> {
    async fn call<E: std::error::Error>(&self, req: ViewRpc) -> Result<ViewRpcReply, RpcError<E>> {
        let to = member(self.target).map_err(|e| RPCError::Unreachable(unreachable(&e)))?;
        match self.transport.rpc(to, req).await {
            Ok(ViewRpcReply::Refused(reason)) => {
                Err(RPCError::Unreachable(unreachable(&Unreachable {
                    member: to,
                    reason,
                })))
            }
            Ok(reply) => Ok(reply),
            Err(e) => Err(RPCError::Unreachable(unreachable(&e))),
        }
    }

    fn wrong_reply<E: std::error::Error>(&self) -> RpcError<E> {
        let p = member(self.target).unwrap_or(ProcessId(u32::MAX));
        RPCError::Network(NetworkError::new(&ViewError::WrongReply(p)))
    }
}

fn unreachable<E: std::error::Error + 'static>(e: &E) -> openraft::error::Unreachable {
    openraft::error::Unreachable::new(e)
}

impl<T: ViewTransport> RaftNetwork<ViewRaft> for Connection<T> {
    async fn append_entries(
        &mut self,
        rpc: AppendEntriesRequest<ViewRaft>,
        _option: RPCOption,
    ) -> Result<AppendEntriesResponse<NodeId>, RpcError> {
        match self.call(ViewRpc::AppendEntries(rpc)).await? {
            ViewRpcReply::AppendEntries(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.wrong_reply()),
        }
    }

    async fn install_snapshot(
        &mut self,
        rpc: InstallSnapshotRequest<ViewRaft>,
        _option: RPCOption,
    ) -> Result<InstallSnapshotResponse<NodeId>, RpcError<InstallSnapshotError>> {
        match self.call(ViewRpc::InstallSnapshot(rpc)).await? {
            ViewRpcReply::InstallSnapshot(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.wrong_reply()),
        }
    }

    async fn vote(
        &mut self,
        rpc: VoteRequest<NodeId>,
        _option: RPCOption,
    ) -> Result<VoteResponse<NodeId>, RpcError> {
        match self.call(ViewRpc::Vote(rpc)).await? {
            ViewRpcReply::Vote(r) => {
                r.map_err(|e| RPCError::RemoteError(RemoteError::new(self.target, e)))
            }
            _ => Err(self.wrong_reply()),
        }
    }

    fn backoff(&self) -> Backoff {
        Backoff::new(std::iter::repeat(self.backoff))
    }
}

// ---- the group ----

struct Inner<T> {
    id: ProcessId,
    incarnation: std::sync::atomic::AtomicU64,
    raft: Raft,
    transport: Arc<T>,
    config: ViewConfig,
    machine: Machine,
    reconciler: std::sync::Mutex<Option<JoinHandle<()>>>,
    /// Its store held an earlier process's Raft state, established as the member's, when
    /// it opened.
    resumed: bool,
    /// The folder its Raft state is written to (`None` in memory).
    folder: Option<Arc<store::Folder>>,
    /// Its folder holds the mark that the others counted its Raft node as the member's.
    established: std::sync::atomic::AtomicBool,
}

/// One member's view group: its Raft instance over the view log, and the handle the node
/// uses (write proposals and reports, follow the state, answer the peers' requests).
/// Cloning it is cheap (one group, several handles).
pub struct ViewGroup<T: ViewTransport> {
    inner: Arc<Inner<T>>,
}

impl<T: ViewTransport> Clone for ViewGroup<T> {
    fn clone(&self) -> Self {
        ViewGroup {
            inner: self.inner.clone(),
        }
    }
}

impl<T: ViewTransport> fmt::Debug for ViewGroup<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ViewGroup")
            .field("id", &self.inner.id)
            .field("incarnation", &self.incarnation())
            .finish_non_exhaustive()
    }
}

impl<T: ViewTransport> ViewGroup<T> {
    /// Starts member `id`'s group at the cluster's first start: view `initial` (view 0, the
    /// same on every member: it comes from the cluster file), whose members are the voters.
    /// Every member of `initial` starts its group this way; together they elect a leader.
    /// Must run inside a tokio runtime.
    pub async fn start(
        id: ProcessId,
        initial: View,
        transport: T,
        config: ViewConfig,
    ) -> Result<ViewGroup<T>, ViewError> {
        Self::start_in(id, initial, transport, config, &Storage::Memory).await
    }

    /// [`ViewGroup::start`] on `storage`. A folder that holds an earlier process's Raft
    /// state, established as the member's ([`ViewGroup::establish`]), resumes that Raft
    /// node, its vote and log included, with its state machine at the last committed view
    /// ([`ViewGroup::resumed`]). One that holds none starts view 0 as [`ViewGroup::start`]
    /// does, and one whose state was never established goes on from it (it was this
    /// member's first process's, which the others may not have counted yet); neither
    /// claims to be the member's Raft node to the others.
    pub async fn start_in(
        id: ProcessId,
        initial: View,
        transport: T,
        config: ViewConfig,
        storage: &Storage,
    ) -> Result<ViewGroup<T>, ViewError> {
        let incarnation = *initial.members.get(&id).ok_or(ViewError::NotAMember(id))?;
        let voters: BTreeSet<NodeId> = initial.members.keys().map(|p| node_id(*p)).collect();
        let group = Self::launch(id, incarnation, initial, transport, config, storage).await?;
        if group.inner.resumed {
            return Ok(group);
        }
        match group.inner.raft.initialize(voters).await {
            Ok(()) => {}
            // already initialized: the group was formed (not on a fresh group, but harmless)
            Err(RaftError::APIError(openraft::error::InitializeError::NotAllowed(_))) => {}
            Err(e) => {
                group.shutdown().await;
                return Err(ViewError::Raft(e.to_string()));
            }
        }
        Ok(group)
    }

    /// Starts the group of a member's new process (`incarnation`) that is not a voter: it
    /// waits, as a Raft learner, until the leader adds it after a rejoin is proposed
    /// ([`Proposal::Rejoin`]), then catches up on the log. `initial` is view 0, the same as
    /// the other members started from (the log is replayed on it).
    pub async fn join(
        id: ProcessId,
        incarnation: u64,
        initial: View,
        transport: T,
        config: ViewConfig,
    ) -> Result<ViewGroup<T>, ViewError> {
        Self::join_in(
            id,
            incarnation,
            initial,
            transport,
            config,
            &Storage::Memory,
        )
        .await
    }

    /// [`ViewGroup::join`] on `storage`: a folder is cleared of any Raft node first (the one
    /// there is not the member's: see [`ViewGroup::resumed`]), and the new node writes
    /// through to it from its first step.
    pub async fn join_in(
        id: ProcessId,
        incarnation: u64,
        initial: View,
        transport: T,
        config: ViewConfig,
        storage: &Storage,
    ) -> Result<ViewGroup<T>, ViewError> {
        store::wipe(storage).map_err(|e| ViewError::Storage(e.to_string()))?;
        Self::launch(id, incarnation, initial, transport, config, storage).await
    }

    async fn launch(
        id: ProcessId,
        incarnation: u64,
        initial: View,
        transport: T,
        config: ViewConfig,
        storage: &Storage,
    ) -> Result<ViewGroup<T>, ViewError> {
        let raft_config = Arc::new(config.raft()?);
        let state = ViewState::new(initial).map_err(ViewError::Invalid)?;
        let storage_error = |e: std::io::Error| ViewError::Storage(e.to_string());
        let store = LogStore::open(storage).map_err(storage_error)?;
        let machine = Machine::open(state, storage).map_err(storage_error)?;
        let established = store::established(storage).map_err(storage_error)?;
        let resumed = established && store.holds_state().await;
        let folder = store.folder();
        let transport = Arc::new(transport);
        let network = Network {
            transport: transport.clone(),
            backoff: config.unreachable_backoff,
        };
        let raft = Raft::new(node_id(id), raft_config, network, store, machine.clone())
            .await
            .map_err(|e| ViewError::Stopped(e.to_string()))?;
        let reconciler = tokio::spawn(reconcile_loop(
            id,
            raft.clone(),
            machine.state.subscribe(),
            config.heartbeat,
        ));
        Ok(ViewGroup {
            inner: Arc::new(Inner {
                id,
                incarnation: incarnation.into(),
                raft,
                transport,
                config,
                machine,
                reconciler: std::sync::Mutex::new(Some(reconciler)),
                resumed,
                folder,
                established: established.into(),
            }),
        })
    }

    /// Whether the group resumed an earlier process's Raft node from its folder, one the
    /// others counted as the member's ([`ViewGroup::start_in`]): this process is a restart
    /// of its member, and the same Raft node as before. A process that did not (an empty
    /// folder, or one never established) is a new Raft node: the others take no Raft
    /// message from it while they count an earlier process of its member, and it rejoins as
    /// a learner ([`ViewGroup::join_in`]).
    pub fn resumed(&self) -> bool {
        self.inner.resumed
    }

    /// Marks the folder's Raft node as the member's, once the others counted it so (a
    /// majority answered its lease beats): a later process on the folder resumes it
    /// ([`ViewGroup::resumed`]). Written once; nothing to do in memory.
    pub async fn establish(&self) -> Result<(), ViewError> {
        use std::sync::atomic::Ordering;
        if self.inner.established.load(Ordering::Acquire) {
            return Ok(());
        }
        store::establish(self.inner.folder.as_ref())
            .await
            .map_err(|e| ViewError::Storage(e.to_string()))?;
        self.inner.established.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether the folder holds the mark of [`ViewGroup::establish`].
    pub fn established(&self) -> bool {
        self.inner
            .established
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// This member's id.
    pub fn id(&self) -> ProcessId {
        self.inner.id
    }

    /// This member's incarnation (the one its reports carry).
    pub fn incarnation(&self) -> u64 {
        self.inner
            .incarnation
            .load(std::sync::atomic::Ordering::Acquire)
    }

    /// Sets the incarnation its reports carry: a member's process that was evicted and
    /// rejoined under `incarnation` keeps its group (its log and its votes intact).
    pub fn set_incarnation(&self, incarnation: u64) {
        self.inner
            .incarnation
            .store(incarnation, std::sync::atomic::Ordering::Release);
    }

    /// The state as this member last applied it.
    pub fn state(&self) -> ViewState {
        self.inner.machine.state.borrow().clone()
    }

    /// The state, updated after every applied batch of commands and every snapshot
    /// installed: what the node freezes and installs on.
    pub fn watch(&self) -> watch::Receiver<ViewState> {
        self.inner.machine.state.subscribe()
    }

    /// Every command applied from now on, with its outcome, in log order. A receiver more
    /// than 1,024 events behind loses the oldest (it is told so); a state
    /// installed from a snapshot has no events: [`ViewGroup::watch`] is the state of record.
    pub fn subscribe(&self) -> broadcast::Receiver<Event> {
        self.inner.machine.events.subscribe()
    }

    /// The leader this member knows of.
    pub fn leader(&self) -> Option<ProcessId> {
        let leader = self.inner.raft.metrics().borrow().current_leader;
        leader.and_then(|l| member(l).ok())
    }

    /// The Raft voters in this member's latest membership configuration (both halves of a
    /// joint configuration).
    pub fn voters(&self) -> BTreeSet<ProcessId> {
        let metrics = self.inner.raft.metrics();
        let m = metrics.borrow();
        m.membership_config
            .membership()
            .voter_ids()
            .filter_map(|id| member(id).ok())
            .collect()
    }

    /// The Raft instance underneath (metrics, for tests and diagnostics).
    pub fn raft(&self) -> &Raft {
        &self.inner.raft
    }

    /// Proposes a change of membership; returns the outcome once committed and applied.
    pub async fn propose(&self, proposal: Proposal) -> Result<Applied, ViewError> {
        self.write(Command::Propose(proposal)).await
    }

    /// Reports this member's stable state (and the highest fencing token it saw) for the
    /// pending view `view`, at the round of the change this member last applied; returns the
    /// outcome once committed and applied.
    pub async fn report(
        &self,
        view: u64,
        state: CsState,
        token: u64,
    ) -> Result<Applied, ViewError> {
        let round = self.state().pending.map_or(0, |p| p.round);
        self.report_round(view, round, state, token).await
    }

    /// [`ViewGroup::report`] for round `round` of the pending change
    /// ([`Pending::round`](super::Pending::round)): the round whose removed members this
    /// member stopped renewing and waited out. A report of another round is refused.
    pub async fn report_round(
        &self,
        view: u64,
        round: u64,
        state: CsState,
        token: u64,
    ) -> Result<Applied, ViewError> {
        self.write(Command::Report {
            view,
            member: self.inner.id,
            incarnation: self.incarnation(),
            state,
            token,
            round,
        })
        .await
    }

    /// Writes a command to the log through the leader (see the module's "Writes").
    pub async fn write(&self, command: Command) -> Result<Applied, ViewError> {
        let waited = self.inner.config.write_timeout;
        match tokio::time::timeout(waited, self.write_until_done(command.clone())).await {
            Ok(result) => result,
            Err(_) => Err(ViewError::Timeout { command, waited }),
        }
    }

    async fn write_until_done(&self, command: Command) -> Result<Applied, ViewError> {
        let me = node_id(self.inner.id);
        loop {
            let leader = match self.inner.raft.client_write(command.clone()).await {
                Ok(response) => return outcome(response.data),
                Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f))) => f.leader_id,
                Err(RaftError::APIError(ClientWriteError::ChangeMembershipError(e))) => {
                    return Err(ViewError::Raft(e.to_string()))
                }
                Err(RaftError::Fatal(e)) => return Err(ViewError::Stopped(e.to_string())),
            };
            if let Some(leader) = leader.filter(|l| *l != me) {
                let to = member(leader)?;
                match self
                    .inner
                    .transport
                    .rpc(to, ViewRpc::Write(command.clone()))
                    .await
                {
                    Ok(ViewRpcReply::Written(Ok(applied))) => return Ok(applied),
                    Ok(ViewRpcReply::Written(Err(WriteRefusal::Stopped(_))))
                    | Ok(ViewRpcReply::Written(Err(WriteRefusal::NotLeader { .. })))
                    | Ok(ViewRpcReply::Written(Err(WriteRefusal::TimedOut)))
                    | Ok(ViewRpcReply::Refused(_))
                    | Err(_) => {}
                    Ok(_) => return Err(ViewError::WrongReply(to)),
                }
            }
            tokio::time::sleep(self.inner.config.retry).await;
        }
    }

    /// Answers a peer's request; `from` is the sender as its link authenticated it. A Raft
    /// request whose leader or candidate is not `from` is refused ([`ViewRpcReply::Refused`]).
    pub async fn handle_rpc(&self, from: ProcessId, req: ViewRpc) -> ViewRpcReply {
        let raft = &self.inner.raft;
        let claims = |vote: &Vote<NodeId>| vote.leader_id.node_id == node_id(from);
        match req {
            ViewRpc::AppendEntries(r) if claims(&r.vote) => {
                ViewRpcReply::AppendEntries(raft.append_entries(r).await)
            }
            ViewRpc::Vote(r) if claims(&r.vote) => ViewRpcReply::Vote(raft.vote(r).await),
            ViewRpc::InstallSnapshot(r) if claims(&r.vote) => {
                ViewRpcReply::InstallSnapshot(raft.install_snapshot(r).await)
            }
            ViewRpc::AppendEntries(_) | ViewRpc::Vote(_) | ViewRpc::InstallSnapshot(_) => {
                ViewRpcReply::Refused(format!("{from} sent a Raft request in another's name"))
            }
            ViewRpc::Write(command) => ViewRpcReply::Written(self.lead_write(command).await),
        }
    }

    /// A forwarded write, on the leader: commits it here, or says who leads.
    async fn lead_write(&self, command: Command) -> Result<Applied, WriteRefusal> {
        let write = self.inner.raft.client_write(command);
        match tokio::time::timeout(self.inner.config.write_timeout, write).await {
            Err(_) => Err(WriteRefusal::TimedOut),
            Ok(Ok(response)) => {
                outcome(response.data).map_err(|e| WriteRefusal::Stopped(e.to_string()))
            }
            Ok(Err(RaftError::APIError(ClientWriteError::ForwardToLeader(f)))) => {
                Err(WriteRefusal::NotLeader {
                    leader: f.leader_id.and_then(|l| member(l).ok()),
                })
            }
            Ok(Err(e)) => Err(WriteRefusal::Stopped(e.to_string())),
        }
    }

    /// Stops the group: its Raft instance and the task that keeps the voters in line with
    /// the views. Other handles then get [`ViewError::Stopped`].
    pub async fn shutdown(&self) {
        let reconciler = self
            .inner
            .reconciler
            .lock()
            .map(|mut r| r.take())
            .unwrap_or(None);
        if let Some(task) = reconciler {
            task.abort();
        }
        if let Err(e) = self.inner.raft.shutdown().await {
            tracing::debug!(member = self.inner.id.0, "view log shutdown: {e}");
        }
    }
}

/// The outcome of a command the state machine applied (it answers every command it applies;
/// `None` is for Raft's own entries).
fn outcome(data: Option<Applied>) -> Result<Applied, ViewError> {
    data.ok_or_else(|| ViewError::Raft("the state machine gave no outcome".into()))
}

/// On the leader: keep the Raft voters equal to the current view's members, and the members
/// a pending change lets rejoin learners.
async fn reconcile_loop(
    id: ProcessId,
    raft: Raft,
    mut state: watch::Receiver<ViewState>,
    tick: Duration,
) {
    let mut metrics = raft.metrics();
    loop {
        tokio::select! {
            r = state.changed() => if r.is_err() { return },
            r = metrics.changed() => if r.is_err() { return },
            _ = tokio::time::sleep(tick) => {}
        }
        let current = state.borrow_and_update().clone();
        if let Err(e) = reconcile(id, &raft, &current).await {
            tracing::debug!(member = id.0, "view log membership: {e}");
        }
    }
}

async fn reconcile(id: ProcessId, raft: &Raft, state: &ViewState) -> Result<(), ViewError> {
    let (nodes, voters) = {
        let metrics = raft.metrics();
        let m = metrics.borrow();
        if m.state != ServerState::Leader || m.current_leader != Some(node_id(id)) {
            return Ok(());
        }
        let membership = m.membership_config.membership();
        if membership.get_joint_config().len() > 1 {
            return Ok(()); // a change is under way
        }
        let nodes: BTreeSet<NodeId> = membership.nodes().map(|(n, _)| *n).collect();
        let voters: BTreeSet<NodeId> = membership.voter_ids().collect();
        (nodes, voters)
    };
    let want: BTreeSet<NodeId> = state.view.members.keys().map(|p| node_id(*p)).collect();
    let rejoining = state
        .pending
        .iter()
        .flat_map(|p| p.change.incoming())
        .map(|(p, _)| node_id(p));
    for learner in want.iter().copied().chain(rejoining) {
        if !nodes.contains(&learner) {
            raft.add_learner(learner, EmptyNode::new(), false)
                .await
                .map_err(|e| ViewError::Raft(e.to_string()))?;
        }
    }
    if voters != want {
        raft.change_membership(want, false)
            .await
            .map_err(|e| ViewError::Raft(e.to_string()))?;
    }
    Ok(())
}

mod store;
#[cfg(test)]
mod tests;
