//! Reliable FIFO links over connections that may drop, and the [`Net`] of one member's links.
//!
//! TCP is reliable and FIFO within one connection only: a reset loses whatever was in flight.
//! Each link therefore numbers its messages (1, 2, ... per direction), keeps every message
//! until the peer acknowledges it (cumulative [`Frame::Ack`]), and after a reconnect the two
//! sides exchange [`Frame::Resume`] (the highest sequence number each delivered) so the sender
//! drops what arrived and resends the rest in order. The receiver delivers exactly
//! `seq = delivered + 1`, drops duplicates (`seq ≤ delivered`) and treats a gap as a protocol
//! violation (the connection is closed and resumed). So a reset or dropped connection neither
//! loses, duplicates nor reorders a message.
//!
//! Of the two ends of a link the member with the smaller id dials (with exponential backoff,
//! [`Timing::backoff_min`] doubling up to [`Timing::backoff_max`]) and the other accepts. A
//! new authenticated connection is taken only once the link's own rules declared the old
//! one dead (it closed, failed, or was silent beyond [`Timing::peer_timeout`]); while the
//! link is live a second connection is refused ([`Refusal::Busy`]): no takeover.
//!
//! [`Frame::Ack`]: super::frame::Frame::Ack
//! [`Frame::Resume`]: super::frame::Frame::Resume
//! [`Refusal::Busy`]: super::frame::Refusal::Busy

mod accept;
mod connect;
mod gauge;
mod sequence;
mod serve;
mod sources;
mod task;

pub use gauge::LinkGauges;
pub(super) use sequence::{Incoming, Outgoing};

use super::io::Listener;
use super::{MemberAddress, NetConfig, NetError, Timing};
use crate::id::ProcessId;
use accept::Acceptor;
use serde::de::DeserializeOwned;
use serde::Serialize;
use sources::Sources;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use task::Link;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;

/// What a [`Net`] reports to its owner.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NetEvent<M> {
    /// A message from a peer, in its link's order, exactly once.
    Message {
        /// The sender.
        from: ProcessId,
        /// The message.
        msg: M,
    },
    /// Nothing was heard from the peer for [`Timing::peer_timeout`].
    Unreachable(ProcessId),
    /// The peer is back (a connection resumed after [`NetEvent::Unreachable`]).
    Reachable(ProcessId),
    /// A connection to the peer passed its handshake and resumed the link (the first one, or
    /// a new one after a reset).
    Connected(ProcessId),
    /// The link to the peer gave up for good: it restarted (lost its state), or its
    /// retransmission buffer overflowed [`Timing::window`]. Nothing more goes to it.
    Lost(ProcessId),
    /// The peer connected as a new process (`incarnation`) and the link started afresh with
    /// it ([`OnRestart::Accept`](super::OnRestart::Accept)): what was queued for the old
    /// process was dropped. Comes before any message of the new process.
    Restarted {
        /// The peer.
        peer: ProcessId,
        /// The incarnation of the process it replaced.
        previous: u64,
        /// The new process's incarnation.
        incarnation: u64,
    },
}

/// One member's links to its peers: send to a peer, receive [`NetEvent`]s.
#[derive(Debug)]
pub struct Net<M> {
    me: ProcessId,
    incarnation: u64,
    timing: Timing,
    links: NetSender<M>,
    events: mpsc::UnboundedReceiver<NetEvent<M>>,
    tasks: Vec<JoinHandle<()>>,
    local: SocketAddr,
    /// What the links' events counted, for the node's metrics.
    recorder: Arc<super::metrics::Recorder>,
    /// What answers the operator ([`Net::serve_status`]).
    status: StatusSlot,
}

impl<M> Drop for Net<M> {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl<M> Net<M>
where
    M: Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
{
    /// Starts serving `listener` (a `tokio::net::TcpListener`, or any [`Listener`]) and the
    /// links to `config.peers`, which dial on the listener's network. Must run inside a
    /// tokio runtime.
    pub fn start(mut config: NetConfig, listener: impl Into<Listener>) -> Result<Net<M>, NetError> {
        let listener: Listener = listener.into();
        let me = config.identity.id;
        // every link event is counted (the node's metrics) before it is logged
        let recorder = Arc::new(super::metrics::Recorder::default());
        let status = StatusSlot::default();
        config.log = super::metrics::counting(config.log, recorder.clone());
        if config.peers.contains_key(&me) {
            return Err(NetError::Config(format!("{me} lists itself as a peer")));
        }
        config.timing.check()?;
        let local = listener
            .accept
            .local_addr()
            .map_err(|e| NetError::Io(e.to_string()))?;
        let incarnation = config.identity.incarnation;
        let identity = Arc::new(config.identity);
        let trust = Arc::new(config.keys);
        if let Some(p) = config.peers.keys().find(|p| !trust.contains_key(p)) {
            return Err(NetError::Config(format!("no public key pinned for {p}")));
        }
        // each peer's host has its own share of the handshake slots; any other address is
        // shed before any cryptography
        let sources = Arc::new(Mutex::new(Sources::new(
            &config.peers,
            config.timing.max_handshakes_per_source,
        )));
        let (events_tx, events) = mpsc::unbounded_channel();
        let mut links = BTreeMap::new();
        let mut gauges = BTreeMap::new();
        let mut accepted = BTreeMap::new();
        let mut tasks = Vec::new();
        let named: Vec<(ProcessId, MemberAddress)> = config
            .peers
            .iter()
            .filter(|(_, a)| matches!(a, MemberAddress::Name { .. }))
            .map(|(&p, a)| (p, a.clone()))
            .collect();
        // the acceptor admits no connection before the names' first lookup (connections
        // wait in the listen backlog meanwhile)
        let (looked_up, ready) = tokio::sync::watch::channel(named.is_empty());
        if !named.is_empty() {
            tasks.push(tokio::spawn(Sources::refresh(
                sources.clone(),
                named,
                looked_up,
                config.timing,
                me,
                config.log.clone(),
            )));
        }
        for (&peer, addr) in &config.peers {
            let (tx, rx) = mpsc::unbounded_channel();
            let (conn_tx, conn_rx) = mpsc::channel(4);
            let gauge = Arc::new(gauge::Gauge::default());
            links.insert(peer, tx);
            gauges.insert(peer, gauge.clone());
            accepted.insert(peer, conn_tx);
            let link = Link {
                me: identity.clone(),
                trust: trust.clone(),
                peer,
                dial: (me < peer).then(|| addr.clone()),
                network: listener.network.clone(),
                timing: config.timing,
                log: config.log.clone(),
                out: Outgoing::default(),
                inc: Incoming::default(),
                incarnation: None,
                on_restart: config.on_restart,
                events: events_tx.clone(),
                unreachable: false,
                lost: None,
                cursor: 1,
                gauge,
                taken: 0,
            };
            tasks.push(tokio::spawn(link.run(rx, conn_rx)));
        }
        let acceptor = Acceptor {
            me: identity,
            trust,
            timing: config.timing,
            log: config.log,
            accepted,
            gate: Arc::new(Semaphore::new(config.timing.max_handshakes)),
            sources,
            ready,
            refusals: Mutex::new(BTreeMap::new()),
            status: status.clone(),
        };
        tasks.push(tokio::spawn(acceptor.run::<M>(listener.accept)));
        Ok(Net {
            me,
            recorder,
            status,
            incarnation,
            timing: config.timing,
            links: NetSender {
                links: Arc::new(links),
                gauges: LinkGauges(Arc::new(gauges)),
            },
            events,
            tasks,
            local,
        })
    }

    /// Serves the operator's status requests with `f` from now on (the first call wins):
    /// a connection authenticated with the cluster file's operator key
    /// ([`OPERATOR`](super::OPERATOR)) may ask it, and nothing else.
    pub fn serve_status(&self, f: StatusFn) {
        let _ = self.status.0.set(f);
    }

    /// The counters the links' events feed (the node's metrics).
    pub(crate) fn recorder(&self) -> Arc<super::metrics::Recorder> {
        self.recorder.clone()
    }

    /// This member's process's incarnation (its [`Identity`](super::Identity)'s).
    pub fn incarnation(&self) -> u64 {
        self.incarnation
    }

    /// This member's id.
    pub fn id(&self) -> ProcessId {
        self.me
    }

    /// The links' timers.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// The address the listener is bound to.
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The peers, in id order.
    pub fn peers(&self) -> impl Iterator<Item = ProcessId> + '_ {
        self.links.links.keys().copied()
    }

    /// Queues `msg` for `to` on its link; it arrives once, in order, while the link lives.
    pub fn send(&self, to: ProcessId, msg: M) -> Result<(), NetError> {
        self.links.send(to, msg)
    }

    /// A sending side of the links, usable from any thread (and after this `Net` is
    /// dropped, when its sends fail with [`NetError::Lost`]).
    pub fn sender(&self) -> NetSender<M> {
        self.links.clone()
    }

    /// How far each link's messages got: what a member waits on before its process ends
    /// ([`LinkGauges::drain`]).
    pub fn gauges(&self) -> LinkGauges {
        self.links.gauges.clone()
    }

    /// The next event; `None` once every link has stopped.
    pub async fn recv(&mut self) -> Option<NetEvent<M>> {
        self.events.recv().await
    }

    /// The next event if one is there already.
    pub(crate) fn try_recv(&mut self) -> Option<NetEvent<M>> {
        self.events.try_recv().ok()
    }
}

/// The sending side of a [`Net`]: clones queue on the same links.
#[derive(Debug)]
pub struct NetSender<M> {
    links: Arc<BTreeMap<ProcessId, mpsc::UnboundedSender<M>>>,
    /// Counts what each link is handed.
    gauges: LinkGauges,
}

impl<M> Clone for NetSender<M> {
    fn clone(&self) -> Self {
        NetSender {
            links: self.links.clone(),
            gauges: self.gauges.clone(),
        }
    }
}

impl<M> NetSender<M> {
    /// As [`Net::send`].
    pub fn send(&self, to: ProcessId, msg: M) -> Result<(), NetError> {
        match self.links.get(&to) {
            None => Err(NetError::NotAPeer(to)),
            Some(link) => {
                // counted first: a mark taken after this send is then never below the
                // message's place in the link, whatever other threads send meanwhile
                if let Some(g) = self.gauges.0.get(&to) {
                    g.hand();
                }
                link.send(msg).map_err(|_| NetError::Lost(to))
            }
        }
    }

    /// As [`Net::gauges`].
    pub fn gauges(&self) -> LinkGauges {
        self.gauges.clone()
    }
}

/// Where the node puts what answers the operator ([`Net::serve_status`]).
#[derive(Clone, Default)]
struct StatusSlot(Arc<std::sync::OnceLock<StatusFn>>);

impl StatusSlot {
    fn get(&self) -> Option<&StatusFn> {
        self.0.get()
    }
}

impl std::fmt::Debug for StatusSlot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "StatusSlot(served: {})", self.0.get().is_some())
    }
}

/// Encodes the member's status for the operator ([`Net::serve_status`]).
pub type StatusFn = Arc<dyn Fn() -> Vec<u8> + Send + Sync>;

#[cfg(test)]
mod tests;
