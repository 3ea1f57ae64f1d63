//! CS objects over TCP: each member in its own process, possibly on another host, runs the
//! very same [`CsObject`](crate::cs::CsObject) as the simulator and the thread runtime, over
//! authenticated, encrypted, reliable FIFO links (the `net` feature, on for the binary).
//!
//! # Layers
//! - **Channel** (`net/channel.rs`): the Noise protocol (`Noise_XX_25519_ChaChaPoly_BLAKE2s`, the
//!   `snow` crate) under every byte between members. Each member has its own X25519 key pair;
//!   the cluster file pins every member's public key. After the handshake every frame,
//!   control frames included, is sealed (ChaCha20-Poly1305, implicit counter nonces): a
//!   flipped, injected, replayed, reordered or spliced frame fails to open and closes the
//!   connection ([`LogEvent::Tampered`]).
//! - **Framing** ([`frame`]): a 4-byte big-endian length prefix and a postcard body, a
//!   [`frame::Frame`]: `Hello`, `Data { seq, msg }`, `Ack { seq }`, `Heartbeat`,
//!   `Resume { delivered }` and `Refuse(reason)`.
//! - **Handshake** (`net/handshake.rs`): the Noise handshake authenticates both keys; the id a
//!   peer claims must be the one its key is pinned for; then the protocol version, the
//!   cluster spec hash ([`spec_hash`]), the cluster epoch and the member ids must agree. A
//!   mismatch is refused with a typed [`HandshakeError`], logged ([`LogEvent::Refused`]).
//!   Nothing about a member (incarnation, spec hash, epoch) is sent before the peer is
//!   authenticated.
//! - **Links** (`net/link.rs`): per-link sequence numbers, cumulative acknowledgements and
//!   retransmission of the unacknowledged tail after a reconnect, so a reset or dropped
//!   connection neither loses, duplicates nor reorders a message; the member with the smaller
//!   id dials, with exponential backoff. A new connection replaces a link's connection only
//!   once the link's own rules declared the old one dead (closed, failed, or silent beyond
//!   the peer timeout): no takeover of a live link. [`Net`] is one member's set of links.
//! - **Node** (`net/node.rs`): drives one member's CS object from its links; [`NodeHandle`] is the
//!   application's side (`enter`, `exit`).
//! - **Views** ([`view`]): the replicated view log (openraft), the control plane of crash
//!   tolerance: the node installs each view it commits (docs/fault-tolerance.md).
//!
//! # Floods
//! The listener sheds a connection from an address that is not the host of a peer before
//! any cryptography (it holds it unread for 30 s within a share of the open-file limit, so a
//! flooder does not get to reopen it at once, then closes it), runs at most [`Timing::max_handshakes`] handshakes at once and at most
//! [`Timing::max_handshakes_per_source`] from one address (each peer host has its own
//! share, so one host cannot take every slot), and drops a connection that has not finished
//! its handshake within [`Timing::handshake_timeout`]. Refusals are logged once per source
//! per [`Timing::refusal_log_interval`], with a count ([`LogEvent::RefusedMore`]).
//!
//! # What is dropped and logged
//! Nothing a peer sends can panic a node or move it outside its algorithm's rules:
//! - a connection that fails the handshake (a key not pinned, an id that is not its key's,
//!   another spec, epoch or version, a member that is not a neighbour, garbage bytes,
//!   silence beyond [`Timing::handshake_timeout`]) is refused and closed; the listener keeps
//!   serving;
//! - a frame that fails to open, or an oversized or malformed frame, on a live link closes
//!   that connection (the stream cannot be trusted past it); the link resumes on a new one
//!   with nothing lost;
//! - a `Refuse` on a live link closes that connection too, and the link resumes: only a
//!   refusal at the handshake (a restarted member) loses a link for good;
//! - a duplicate message, an acknowledgement of a message never sent, a handshake frame on a
//!   live link: dropped;
//! - a message from a member that is not a neighbour of the receiver: dropped by the node;
//! - a message that makes no sense in the receiver's state: the algorithms' handlers ignore it
//!   (see each algorithm's module and `tests/hostile.rs`).
//!
//! Each event is a [`LogEvent`] handed to the [`Logger`] of [`NetConfig`];
//! [`tracing_logger`] (the default) emits it through `tracing`, at a level per event.
//!
//! # Failure detection and restarts
//! Every connected link sends a heartbeat each [`Timing::heartbeat`]; a peer silent for
//! [`Timing::peer_timeout`] is reported ([`NetEvent::Unreachable`]) and every call of the node
//! that waits on it returns [`NodeError::PeerUnreachable`] naming it; the move keeps running,
//! and a peer back within the retransmission window ([`Timing::window`] messages) resumes with
//! nothing lost. A member that crashed has lost its state: its new process draws a new
//! incarnation. Without views, the peers that knew the old one refuse it
//! ([`frame::Refusal::Restarted`]) and the cluster is restarted as a whole under a new epoch.
//! With views ([`OnRestart::Accept`]), the link starts afresh with the new process
//! ([`NetEvent::Restarted`]), the members evict the old one, and the new one rejoins, out of
//! the CS (docs/fault-tolerance.md, "Rejoin").

mod address;
mod channel;
mod cluster;
pub mod frame;
mod handshake;
pub mod io;
mod link;
mod member;
mod metrics;
mod node;
mod status;
pub mod view;

pub use crate::error::ClusterProblem;
pub use address::MemberAddress;
pub use channel::{channel_error, ChannelError, PublicKey, SecretKey, NOISE_PARAMS, PROLOGUE};
pub use cluster::{write_key, write_operator_key, Cluster, ViewTiming};
pub use handshake::{HandshakeError, Trust};
pub use link::{LinkGauges, Net, NetEvent, NetSender, StatusFn};
pub use metrics::{CallOutcome, NodeMetrics, PeerMetrics, WaitHistogram, WAIT_BUCKETS};
pub use node::{
    margin_holds, rebuild_from, EntryGate, ExitGate, Fenced, LeaseWatch, LinkTransport, Node,
    NodeError, NodeHandle, NodeStatus, Observer, Rebuild, Rebuilt, ViewFrame, ViewOptions,
    ViewStatus, Wire, CLOCK_DRIFT, MAX_VIEW_FRAME,
};
pub use status::{ask_status, MemberReport};

use crate::id::ProcessId;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

/// The id the operator's connections claim (`lkcs status`): authenticated by the cluster
/// file's `[operator] public_key`, it may ask a member's status and nothing else.
pub const OPERATOR: ProcessId = ProcessId(u32::MAX);

/// Who a member is, as its handshakes present it.
#[derive(Clone)]
pub struct Identity {
    /// The member's id.
    pub id: ProcessId,
    /// The member's private key (its public key is pinned in the cluster file).
    pub key: SecretKey,
    /// The hash of the cluster spec ([`spec_hash`]).
    pub spec: [u8; 32],
    /// The cluster epoch: bumped when the cluster restarts as a whole.
    pub epoch: u64,
    /// Drawn at random when the member's process starts ([`Identity::new`]).
    pub incarnation: u64,
}

impl fmt::Debug for Identity {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Identity")
            .field("id", &self.id)
            .field("key", &self.key.public())
            .field("spec", &spec_hex(&self.spec))
            .field("epoch", &self.epoch)
            .field("incarnation", &self.incarnation)
            .finish()
    }
}

impl Identity {
    /// A member's identity with a fresh random incarnation.
    pub fn new(id: ProcessId, key: SecretKey, spec: [u8; 32], epoch: u64) -> Self {
        Identity {
            id,
            key,
            spec,
            epoch,
            // never 0: view 0 gives every member's first process incarnation 0
            incarnation: rand::random::<u64>().max(1),
        }
    }
}

/// The SHA-256 of a cluster spec's canonical text: members whose hashes differ refuse each
/// other.
pub fn spec_hash(canonical: &str) -> [u8; 32] {
    Sha256::digest(canonical.as_bytes()).into()
}

fn spec_hex(spec: &[u8; 32]) -> String {
    spec.iter().map(|b| format!("{b:02x}")).collect()
}

/// The timers of the links.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// A heartbeat goes out on a connected link this often.
    pub heartbeat: Duration,
    /// A peer silent this long is unreachable (and its connection is dropped).
    pub peer_timeout: Duration,
    /// The first delay before redialling; it doubles after each failure.
    pub backoff_min: Duration,
    /// The longest delay before redialling.
    pub backoff_max: Duration,
    /// A handshake (and the resume after it) must finish within this.
    pub handshake_timeout: Duration,
    /// At most this many handshakes run at once on the listener; more connections are closed.
    pub max_handshakes: usize,
    /// At most this many of them from one address.
    pub max_handshakes_per_source: usize,
    /// Refusals from one source are logged at most once per this interval (the others are
    /// counted, [`LogEvent::RefusedMore`]); zero logs every one.
    pub refusal_log_interval: Duration,
    /// The retransmission window: at most this many messages wait for an acknowledgement on
    /// a link; past it the link is lost.
    pub window: usize,
}

impl Default for Timing {
    fn default() -> Self {
        Timing {
            heartbeat: Duration::from_millis(500),
            peer_timeout: Duration::from_secs(3),
            backoff_min: Duration::from_millis(50),
            backoff_max: Duration::from_secs(2),
            handshake_timeout: Duration::from_secs(2),
            max_handshakes: 64,
            max_handshakes_per_source: 8,
            refusal_log_interval: REFUSAL_LOG_INTERVAL,
            window: 1 << 16,
        }
    }
}

impl Timing {
    /// Checks the timers make sense together.
    pub fn check(&self) -> Result<(), NetError> {
        let zero = [
            ("heartbeat", self.heartbeat),
            ("peer_timeout", self.peer_timeout),
            ("backoff_min", self.backoff_min),
            ("handshake_timeout", self.handshake_timeout),
        ];
        if let Some((name, _)) = zero.iter().find(|(_, d)| d.is_zero()) {
            return Err(NetError::Config(format!("timing: {name} must be positive")));
        }
        if self.peer_timeout <= self.heartbeat {
            return Err(NetError::Config(
                "timing: peer_timeout must exceed heartbeat".into(),
            ));
        }
        if self.backoff_max < self.backoff_min {
            return Err(NetError::Config(
                "timing: backoff_max must be at least backoff_min".into(),
            ));
        }
        if self.max_handshakes == 0 || self.max_handshakes_per_source == 0 || self.window == 0 {
            return Err(NetError::Config(
                "timing: max_handshakes, max_handshakes_per_source and window must be positive"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// What the network layer logs: every refusal, drop and change of a link.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LogEvent {
    /// A connection was refused or failed in its handshake.
    Refused {
        /// The other end.
        addr: SocketAddr,
        /// The member it is (when dialling it, or once known).
        peer: Option<ProcessId>,
        /// Why.
        error: HandshakeError,
    },
    /// More connections from `source` were refused since its last logged refusal (refusals
    /// are logged once per source per [`Timing::refusal_log_interval`]).
    RefusedMore {
        /// The address they came from.
        source: IpAddr,
        /// How many.
        count: u64,
        /// The last reason.
        reason: String,
    },
    /// A frame on a live link failed to open (or its framing was broken): the stream was
    /// tampered with; the connection is closed and the link resumes on a new one.
    Tampered {
        /// The peer of the link.
        peer: ProcessId,
        /// The other end of the connection.
        addr: SocketAddr,
        /// What failed.
        reason: String,
    },
    /// Accepting a connection failed.
    AcceptFailed(String),
    /// A peer's host name did not resolve: the link dials it again after a backoff (or,
    /// for admitting its connections, it is looked up again later).
    Unresolved {
        /// The peer.
        peer: ProcessId,
        /// The lookup's error, naming the address.
        error: NetError,
    },
    /// A link (re)connected and resent its unacknowledged messages.
    Connected {
        /// The peer.
        peer: ProcessId,
        /// How many messages were resent.
        resent: usize,
    },
    /// A connection ended; the link will resume on a new one.
    Disconnected {
        /// The peer.
        peer: ProcessId,
        /// Why.
        reason: String,
    },
    /// A frame or message was dropped.
    Dropped {
        /// The peer it came from (or was for).
        peer: ProcessId,
        /// Why.
        reason: String,
    },
    /// The peer is silent beyond the timeout.
    Unreachable(ProcessId),
    /// The peer came back with a new incarnation: it restarted (and was refused, unless
    /// the links accept restarts, [`OnRestart::Accept`]).
    PeerRestarted(ProcessId),
    /// The node stopped on its own: a handler of its object panicked (the calls get
    /// [`NodeError::Stopped`]).
    NodeStopped(String),
    /// The link gave up for good.
    LinkLost {
        /// The peer.
        peer: ProcessId,
        /// Why.
        reason: String,
    },
    /// What the view log did: a view installed, an eviction proposed and its outcome, or
    /// why the log did not start.
    View(String),
}

impl fmt::Display for LogEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LogEvent::Refused {
                addr,
                peer: Some(p),
                error,
            } => write!(f, "refused {p} at {addr}: {error}"),
            LogEvent::Refused {
                addr,
                peer: None,
                error,
            } => write!(f, "refused a connection from {addr}: {error}"),
            LogEvent::RefusedMore {
                source,
                count,
                reason,
            } => write!(
                f,
                "refused {count} more connections from {source} (last: {reason})"
            ),
            LogEvent::Tampered { peer, addr, reason } => write!(
                f,
                "tampering on the link to {peer} at {addr}: {reason}; connection closed"
            ),
            LogEvent::AcceptFailed(e) => write!(f, "accept failed: {e}"),
            LogEvent::Unresolved { peer, error } => write!(f, "{peer}: {error}"),
            LogEvent::Connected { peer, resent } => {
                write!(f, "link to {peer} up ({resent} messages resent)")
            }
            LogEvent::Disconnected { peer, reason } => {
                write!(f, "link to {peer} down: {reason}")
            }
            LogEvent::Dropped { peer, reason } => write!(f, "dropped from {peer}: {reason}"),
            LogEvent::Unreachable(p) => write!(f, "{p} unreachable"),
            LogEvent::PeerRestarted(p) => {
                write!(
                    f,
                    "{p} restarted: a new process, which lost the old one's state"
                )
            }
            LogEvent::LinkLost { peer, reason } => write!(f, "link to {peer} lost: {reason}"),
            LogEvent::NodeStopped(why) => write!(f, "the node stopped: {why}"),
            LogEvent::View(what) => write!(f, "view log: {what}"),
        }
    }
}

/// Where log events go: called with the logging member's id. A node calls it under its
/// lock: it may not call that node's [`NodeHandle`].
pub type Logger = Arc<dyn Fn(ProcessId, &LogEvent) + Send + Sync>;

/// The default [`Timing::refusal_log_interval`].
pub const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(5);

/// How a [`LogEvent`] matters: the level [`tracing_logger`] gives it.
pub fn level(event: &LogEvent) -> tracing::Level {
    use tracing::Level;
    match event {
        LogEvent::Connected { .. } | LogEvent::Disconnected { .. } => Level::DEBUG,
        // dialling a peer that is not listening (yet), or whose link is live still
        LogEvent::Refused {
            peer: Some(_),
            error: HandshakeError::Io(_) | HandshakeError::Refused(frame::Refusal::Busy),
            ..
        } => Level::DEBUG,
        LogEvent::LinkLost { .. } | LogEvent::NodeStopped(_) => Level::ERROR,
        LogEvent::View(_) => Level::INFO,
        _ => Level::WARN,
    }
}

/// A [`Logger`] emitting each event through `tracing` (target `lkcs::net`, with the member's
/// id as the field `member`), at its [`level`].
pub fn tracing_logger() -> Logger {
    Arc::new(|me, event| {
        let member = me.index();
        match level(event) {
            tracing::Level::ERROR => tracing::error!(member, "{event}"),
            tracing::Level::WARN => tracing::warn!(member, "{event}"),
            tracing::Level::INFO => tracing::info!(member, "{event}"),
            tracing::Level::DEBUG => tracing::debug!(member, "{event}"),
            tracing::Level::TRACE => tracing::trace!(member, "{event}"),
        }
    })
}

/// [`tracing_logger`] with the field `view` too: the number `view` holds (`u64::MAX`: none
/// yet), which the caller keeps current (the `lkcs` binary follows the node's status with
/// [`follow_view`]).
pub fn tracing_logger_with_view(view: Arc<std::sync::atomic::AtomicU64>) -> Logger {
    Arc::new(move |me, event| {
        let member = me.index();
        let number = view.load(std::sync::atomic::Ordering::Relaxed);
        let view = (number != u64::MAX).then_some(number);
        match level(event) {
            tracing::Level::ERROR => tracing::error!(member, view, "{event}"),
            tracing::Level::WARN => tracing::warn!(member, view, "{event}"),
            tracing::Level::INFO => tracing::info!(member, view, "{event}"),
            tracing::Level::DEBUG => tracing::debug!(member, view, "{event}"),
            tracing::Level::TRACE => tracing::trace!(member, view, "{event}"),
        }
    })
}

/// Keeps `view` at the number of the view `node` has installed, until the node stops (a
/// task of the current tokio runtime).
pub fn follow_view(node: &NodeHandle, view: Arc<std::sync::atomic::AtomicU64>) {
    let node = node.clone();
    tokio::spawn(async move {
        loop {
            let seen = view.load(std::sync::atomic::Ordering::Relaxed);
            let changed = node
                .wait_status(|s| s.view.as_ref().is_some_and(|v| v.number != seen))
                .await;
            match changed.ok().and_then(|s| s.view) {
                Some(v) => view.store(v.number, std::sync::atomic::Ordering::Relaxed),
                None => return,
            }
        }
    });
}

/// The default [`Logger`]: [`tracing_logger`] (the name of the days of the ad-hoc stderr
/// logger; with no `tracing` subscriber installed nothing is printed).
pub fn stderr_logger() -> Logger {
    tracing_logger()
}

/// What a member needs to join its peers.
#[derive(Clone)]
pub struct NetConfig {
    /// Who this member is.
    pub identity: Identity,
    /// The neighbours and their addresses (a host name is looked up at each dial, and
    /// regularly to admit the peer's connections).
    pub peers: BTreeMap<ProcessId, MemberAddress>,
    /// The pinned public key of every member (at least of every neighbour).
    pub keys: Trust,
    /// The timers.
    pub timing: Timing,
    /// Where log events go.
    pub log: Logger,
    /// What a link does when its peer comes back as a new process.
    pub on_restart: OnRestart,
}

/// What a link does when its peer connects as a new process (another incarnation: it
/// restarted and lost its state).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OnRestart {
    /// Refuse it ([`frame::Refusal::Restarted`]) and give the link up for good: without
    /// views a member that lost its state cannot come back.
    #[default]
    Refuse,
    /// Start the link afresh with the new process (what was queued for the old one is
    /// dropped) and report [`NetEvent::Restarted`]: with views, the old incarnation is
    /// evicted and the new one rejoins.
    Accept,
}

impl fmt::Debug for NetConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NetConfig")
            .field("identity", &self.identity)
            .field("peers", &self.peers)
            .field("keys", &self.keys)
            .field("timing", &self.timing)
            .finish_non_exhaustive()
    }
}

impl NetConfig {
    /// A configuration with the default timing and the tracing logger.
    pub fn new(identity: Identity, peers: BTreeMap<ProcessId, MemberAddress>, keys: Trust) -> Self {
        NetConfig {
            identity,
            peers,
            keys,
            timing: Timing::default(),
            log: tracing_logger(),
            on_restart: OnRestart::Refuse,
        }
    }
}

/// Errors of the network layer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetError {
    /// A configuration that cannot work.
    Config(String),
    /// A socket operation failed.
    Io(String),
    /// Not a neighbour of this member.
    NotAPeer(ProcessId),
    /// The link to this peer gave up for good.
    Lost(ProcessId),
    /// Key material or a cluster file that may not be used (readable by others, an example
    /// key, a key that is not the one pinned): names the file.
    Credentials(String),
    /// A member's host name that does not resolve (or resolves to no address).
    Unresolved {
        /// The address, `host:port`.
        address: String,
        /// Why, as the lookup tells.
        reason: String,
    },
}

impl fmt::Display for NetError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetError::Config(e) => write!(f, "configuration: {e}"),
            NetError::Io(e) => write!(f, "network: {e}"),
            NetError::NotAPeer(p) => write!(f, "{p} is not a neighbour"),
            NetError::Lost(p) => write!(f, "the link to {p} is lost"),
            NetError::Credentials(e) => write!(f, "{e}"),
            NetError::Unresolved { address, reason } => {
                write!(f, "cannot resolve {address}: {reason}")
            }
        }
    }
}

impl std::error::Error for NetError {}
