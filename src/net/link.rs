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

use super::frame::{Frame, Refusal};
use super::handshake::{self, Conn, HandshakeError, PeerHello, Trust};
use super::io::{Accept, BoxStream, Listener, Network};
use super::{Identity, LogEvent, Logger, MemberAddress, NetConfig, NetError, Timing};
use crate::id::ProcessId;
use futures_util::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinHandle;
use tokio::time::{sleep_until, Instant};
use tokio_util::bytes::Bytes;
use tokio_util::codec::Framed;

/// The sending half of a link: sequence numbers and the retransmission buffer.
#[derive(Clone, Debug)]
pub struct Outgoing<M> {
    next: u64,
    unacked: VecDeque<(u64, M)>,
}

impl<M> Default for Outgoing<M> {
    fn default() -> Self {
        Outgoing {
            next: 1,
            unacked: VecDeque::new(),
        }
    }
}

/// An acknowledgement that makes no sense: it names a message never sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AckBeyondSent {
    /// The sequence number acknowledged.
    pub acked: u64,
    /// The highest sequence number sent.
    pub sent: u64,
}

impl<M: Clone> Outgoing<M> {
    /// Numbers `msg` and keeps it until acknowledged; returns its sequence number.
    pub fn push(&mut self, msg: M) -> u64 {
        let seq = self.next;
        self.next += 1;
        self.unacked.push_back((seq, msg));
        seq
    }

    /// The highest sequence number sent (0 for none).
    pub fn sent(&self) -> u64 {
        self.next - 1
    }

    /// Drops every message up to `seq` (a cumulative ack). An ack beyond what was sent is an
    /// error and changes nothing.
    pub fn ack(&mut self, seq: u64) -> Result<(), AckBeyondSent> {
        if seq > self.sent() {
            return Err(AckBeyondSent {
                acked: seq,
                sent: self.sent(),
            });
        }
        while self.unacked.front().is_some_and(|(s, _)| *s <= seq) {
            self.unacked.pop_front();
        }
        Ok(())
    }

    /// The messages not yet acknowledged, in order: what a new connection resends.
    pub fn unacked(&self) -> impl Iterator<Item = &(u64, M)> {
        self.unacked.iter()
    }

    /// The kept messages from sequence number `from` on, in order (those not yet
    /// transmitted on the current connection).
    pub fn from_seq(&self, from: u64) -> impl Iterator<Item = &(u64, M)> {
        let skip = self
            .unacked
            .front()
            .map_or(0, |(first, _)| from.saturating_sub(*first));
        self.unacked
            .iter()
            .skip(usize::try_from(skip).unwrap_or(usize::MAX))
    }

    /// How many messages wait for an acknowledgement.
    pub fn len(&self) -> usize {
        self.unacked.len()
    }

    /// Whether every message was acknowledged.
    pub fn is_empty(&self) -> bool {
        self.unacked.is_empty()
    }
}

/// The receiving half of a link: the highest sequence number delivered.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Incoming {
    delivered: u64,
}

/// What to do with an arriving sequence number.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The next one: deliver it (it is now counted as delivered).
    Deliver,
    /// Already delivered: drop it.
    Duplicate,
    /// Past the next one: a message is missing; the connection is out of step.
    Gap {
        /// The sequence number expected.
        expected: u64,
    },
}

impl Incoming {
    /// The highest sequence number delivered (0 for none).
    pub fn delivered(&self) -> u64 {
        self.delivered
    }

    /// Classifies `seq`, counting it as delivered when it is the next one.
    pub fn arrive(&mut self, seq: u64) -> Arrival {
        if seq <= self.delivered {
            Arrival::Duplicate
        } else if seq == self.delivered + 1 {
            self.delivered = seq;
            Arrival::Deliver
        } else {
            Arrival::Gap {
                expected: self.delivered + 1,
            }
        }
    }
}

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
            links.insert(peer, tx);
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
            links: NetSender(Arc::new(links)),
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

    /// This member's process's incarnation (its [`Identity`]'s).
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
        self.links.0.keys().copied()
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
pub struct NetSender<M>(Arc<BTreeMap<ProcessId, mpsc::UnboundedSender<M>>>);

impl<M> Clone for NetSender<M> {
    fn clone(&self) -> Self {
        NetSender(self.0.clone())
    }
}

impl<M> NetSender<M> {
    /// As [`Net::send`].
    pub fn send(&self, to: ProcessId, msg: M) -> Result<(), NetError> {
        match self.0.get(&to) {
            None => Err(NetError::NotAPeer(to)),
            Some(link) => link.send(msg).map_err(|_| NetError::Lost(to)),
        }
    }
}

/// Accepts connections and runs the accepting side of the handshake, each in its own task,
/// then hands the connection to its link.
struct Acceptor {
    me: Arc<Identity>,
    trust: Arc<Trust>,
    timing: Timing,
    log: Logger,
    accepted: BTreeMap<ProcessId, mpsc::Sender<(Conn, PeerHello)>>,
    /// Every handshake in progress holds a permit.
    gate: Arc<Semaphore>,
    /// The peers' hosts, each with its own permits: no other address gets a handshake.
    sources: Arc<Mutex<Sources>>,
    /// True once the peers given by host name were looked up a first time.
    ready: tokio::sync::watch::Receiver<bool>,
    /// Per source: when its last refusal was logged, how many were not logged since, and
    /// the last reason.
    refusals: Mutex<BTreeMap<IpAddr, (Instant, u64, String)>>,
    /// What answers the operator's status request, once the node set it.
    status: StatusSlot,
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

/// How often the peers given by host name are looked up again to admit their connections
/// (a name that did not resolve is tried again after [`Timing::backoff_max`]).
const RESOLVE_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// The addresses the peers' connections may come from, each with its handshake permits:
/// the IP addresses of the peers given by address, and those the host names of the others
/// had at their latest lookup.
struct Sources {
    /// The IP addresses given as such.
    fixed: BTreeSet<IpAddr>,
    /// Each peer given by name: its addresses at the latest lookup that found any.
    named: BTreeMap<ProcessId, BTreeSet<IpAddr>>,
    gates: BTreeMap<IpAddr, Arc<Semaphore>>,
    per_source: usize,
}

impl Sources {
    fn new(peers: &BTreeMap<ProcessId, MemberAddress>, per_source: usize) -> Sources {
        let fixed = peers
            .values()
            .filter_map(|a| match a {
                MemberAddress::Ip(a) => Some(a.ip().to_canonical()),
                MemberAddress::Name { .. } => None,
            })
            .collect();
        let mut s = Sources {
            fixed,
            named: BTreeMap::new(),
            gates: BTreeMap::new(),
            per_source,
        };
        s.rebuild();
        s
    }

    /// The permits of `source`, when it is a peer's host.
    fn gate(&self, source: IpAddr) -> Option<Arc<Semaphore>> {
        self.gates.get(&source).cloned()
    }

    /// Keeps the permits of the addresses still in use, gives new addresses theirs, drops
    /// the others.
    fn rebuild(&mut self) {
        let now: BTreeSet<IpAddr> = self
            .fixed
            .iter()
            .chain(self.named.values().flatten())
            .copied()
            .collect();
        self.gates.retain(|ip, _| now.contains(ip));
        for ip in now {
            self.gates
                .entry(ip)
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_source)));
        }
    }

    /// Looks up the peers given by host name, now (then says so on `looked_up`) and then
    /// every [`RESOLVE_EVERY`] (after [`Timing::backoff_max`] while one does not resolve),
    /// logging a name that does not resolve ([`LogEvent::Unresolved`]); a name keeps its
    /// last addresses until a lookup finds others.
    async fn refresh(
        sources: Arc<Mutex<Sources>>,
        named: Vec<(ProcessId, MemberAddress)>,
        looked_up: tokio::sync::watch::Sender<bool>,
        timing: Timing,
        me: ProcessId,
        log: Logger,
    ) {
        loop {
            let mut all = true;
            for (peer, address) in &named {
                match address.lookup().await {
                    Ok(addrs) => {
                        let ips = addrs.iter().map(|a| a.ip().to_canonical()).collect();
                        let mut s = sources.lock().unwrap_or_else(|p| p.into_inner());
                        if s.named.get(peer) != Some(&ips) {
                            s.named.insert(*peer, ips);
                            s.rebuild();
                        }
                    }
                    Err(error) => {
                        all = false;
                        log(me, &LogEvent::Unresolved { peer: *peer, error });
                    }
                }
            }
            looked_up.send_replace(true);
            tokio::time::sleep(if all {
                RESOLVE_EVERY
            } else {
                timing.backoff_max
            })
            .await;
        }
    }
}

/// At most this many sources are remembered for the refusal log (then it starts afresh).
const MAX_REFUSAL_SOURCES: usize = 4096;

/// How long a connection from an address that is no peer's host is held, unread, before it
/// is closed.
const HOLD: std::time::Duration = std::time::Duration::from_secs(30);

/// Connections from addresses that are no peer's host, shed before any cryptography: each is
/// held open and never read until [`HOLD`] has passed or room is needed, instead of being
/// closed at once. A flooder that keeps N connections open then holds N connections that
/// cost the node nothing (no read, no wake-up), where closing them made it reopen them as
/// fast as it could, each a TCP handshake, an accept and a close: measured on loopback, the
/// cluster kept 0.30-0.39 of its rate under 100 such connections per member closed at once
/// (the flooder reopened 17,000 a second) (examples/flood_bench.rs). Past the room (a share
/// of the open-file limit, [`Held::room`]) or a source's share of it, a connection is closed
/// at once, as before.
struct Held {
    conns: VecDeque<(Instant, IpAddr, BoxStream)>,
    per_source: BTreeMap<IpAddr, usize>,
    room: usize,
}

impl Held {
    fn new() -> Held {
        Held {
            conns: VecDeque::new(),
            per_source: BTreeMap::new(),
            room: Held::room(),
        }
    }

    /// An eighth of the process's open-file limit (read from /proc/self/limits; 1,024
    /// assumed where it cannot be read), at most 4,096: the rest stays for the links, the
    /// members' own work, the application and other nodes of the same process.
    fn room() -> usize {
        let soft = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("Max open files"))
                    .and_then(|l| l.split_whitespace().nth(3).map(str::to_owned))
            })
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(1024);
        (soft / 8).min(4096)
    }

    /// Closes what was held for [`HOLD`].
    fn expire(&mut self, now: Instant) {
        while let Some((since, _, _)) = self.conns.front() {
            if now.duration_since(*since) < HOLD {
                break;
            }
            self.pop();
        }
    }

    fn pop(&mut self) {
        if let Some((_, source, _)) = self.conns.pop_front() {
            if let Some(n) = self.per_source.get_mut(&source) {
                *n -= 1;
                if *n == 0 {
                    self.per_source.remove(&source);
                }
            }
        }
    }

    /// Holds `stream` if its source has room (half the room at most for one source; the
    /// oldest held connection is closed to make room when all of it is taken); otherwise
    /// it is closed.
    fn hold(&mut self, source: IpAddr, stream: BoxStream, now: Instant) {
        self.expire(now);
        let mine = self.per_source.get(&source).copied().unwrap_or(0);
        if mine >= (self.room / 2).max(1) {
            return;
        }
        if self.conns.len() >= self.room {
            self.pop();
        }
        *self.per_source.entry(source).or_insert(0) += 1;
        self.conns.push_back((now, source, stream));
    }
}

impl Acceptor {
    /// Logs a refusal once per source per [`Timing::refusal_log_interval`], counting the
    /// others.
    fn refused(&self, addr: SocketAddr, peer: Option<ProcessId>, error: HandshakeError) {
        let source = addr.ip().to_canonical();
        let now = Instant::now();
        let mut summary = None;
        {
            let mut log = self.refusals.lock().unwrap_or_else(|p| p.into_inner());
            if log.len() >= MAX_REFUSAL_SOURCES && !log.contains_key(&source) {
                log.clear();
            }
            match log.get_mut(&source) {
                Some((since, count, last))
                    if now.duration_since(*since) < self.timing.refusal_log_interval =>
                {
                    *count += 1;
                    *last = error.to_string();
                    return;
                }
                Some((since, count, last)) => {
                    if *count > 0 {
                        summary = Some((*count, std::mem::take(last)));
                    }
                    *since = now;
                    *count = 0;
                }
                None => {
                    log.insert(source, (now, 0, String::new()));
                }
            }
        }
        if let Some((count, reason)) = summary {
            (self.log)(
                self.me.id,
                &LogEvent::RefusedMore {
                    source,
                    count,
                    reason,
                },
            );
        }
        (self.log)(self.me.id, &LogEvent::Refused { addr, peer, error });
    }

    async fn run<M: Serialize + DeserializeOwned + Send + Sync + 'static>(
        self,
        mut listener: Box<dyn Accept>,
    ) {
        let this = Arc::new(self);
        let mut held = Held::new();
        let _ = this.ready.clone().wait_for(|&ready| ready).await;
        loop {
            let (stream, addr) = match listener.accept().await {
                Ok(s) => s,
                Err(e) => {
                    (this.log)(this.me.id, &LogEvent::AcceptFailed(e.to_string()));
                    tokio::time::sleep(this.timing.backoff_min).await;
                    continue;
                }
            };
            // shed before any cryptography: not a peer's host, or its share is taken
            let gate = this
                .sources
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .gate(addr.ip().to_canonical());
            let Some(source) = gate else {
                held.hold(addr.ip().to_canonical(), stream, Instant::now());
                this.refused(addr, None, HandshakeError::Shed("not the host of a peer"));
                continue;
            };
            let Ok(per_source) = source.clone().try_acquire_owned() else {
                drop(stream);
                this.refused(
                    addr,
                    None,
                    HandshakeError::Shed("too many handshakes from this address at once"),
                );
                continue;
            };
            let Ok(permit) = this.gate.clone().try_acquire_owned() else {
                drop(stream);
                this.refused(
                    addr,
                    None,
                    HandshakeError::Shed("too many handshakes at once"),
                );
                continue;
            };
            let this = this.clone();
            tokio::spawn(async move {
                let _permits = (permit, per_source);
                let mut conn = Framed::new(stream, super::frame::codec());
                // the operator may connect once the node serves its status
                let shake =
                    handshake::handshake::<M>(&mut conn, &this.me, &this.trust, None, |p| {
                        this.accepted.contains_key(&p)
                            || (p == super::OPERATOR && this.status.get().is_some())
                    });
                match tokio::time::timeout(this.timing.handshake_timeout, shake).await {
                    Ok(Ok(hello)) if hello.id == super::OPERATOR => {
                        // the permits stay held until it is answered: operators cannot
                        // flood past the handshake slots
                        let serve = serve_operator::<M>(&mut conn, &this.status);
                        if let Ok(Err(error)) =
                            tokio::time::timeout(this.timing.handshake_timeout, serve).await
                        {
                            this.refused(addr, Some(super::OPERATOR), error);
                        }
                    }
                    Ok(Ok(hello)) => {
                        if let Some(link) = this.accepted.get(&hello.id) {
                            // a link that does not take it within the deadline is busy
                            let handed = tokio::time::timeout(
                                this.timing.handshake_timeout,
                                link.send((conn, hello)),
                            );
                            let _ = handed.await;
                        }
                    }
                    Ok(Err(error)) => this.refused(addr, None, error),
                    Err(_) => this.refused(addr, None, HandshakeError::Timeout),
                }
            });
        }
    }
}

/// Answers the operator's one status request on `conn`, then the connection closes.
async fn serve_operator<M: Serialize + DeserializeOwned>(
    conn: &mut Conn,
    status: &StatusSlot,
) -> Result<(), HandshakeError> {
    match handshake::recv::<M>(conn).await? {
        Frame::StatusRequest => {}
        _ => {
            return Err(HandshakeError::Protocol(
                "the operator may only ask the status",
            ))
        }
    }
    let report = status.get().map_or_else(Vec::new, |f| f());
    handshake::send(conn, &Frame::<M>::Status(report)).await
}

/// Why a connection ended.
enum Ended {
    /// The owner dropped the net: stop.
    Shutdown,
    /// The connection failed; the link resumes on a new one.
    Dropped(String),
    /// The link gave up for good.
    Lost(String),
}

/// One link's task: owns its sequence state across connections.
struct Link<M> {
    me: Arc<Identity>,
    trust: Arc<Trust>,
    peer: ProcessId,
    dial: Option<MemberAddress>,
    /// The network it dials on.
    network: Arc<dyn Network>,
    timing: Timing,
    log: Logger,
    /// The unacknowledged messages, each kept as its encoded `Frame::Data` (its sequence
    /// number never changes, so a retransmission sends the same bytes).
    out: Outgoing<Bytes>,
    inc: Incoming,
    /// The peer's incarnation, once known: a different one later is a restart.
    incarnation: Option<u64>,
    on_restart: super::OnRestart,
    events: mpsc::UnboundedSender<NetEvent<M>>,
    unreachable: bool,
    /// Set when the link gives up for good, with the reason.
    lost: Option<String>,
    /// The next sequence number to transmit on the current connection.
    cursor: u64,
}

impl<M> Link<M>
where
    M: Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
{
    fn log(&self, event: LogEvent) {
        (self.log)(self.me.id, &event);
    }

    async fn run(
        mut self,
        mut outbox: mpsc::UnboundedReceiver<M>,
        mut accepted: mpsc::Receiver<(Conn, PeerHello)>,
    ) {
        let mut backoff = self.timing.backoff_min;
        let mut next_dial = Instant::now();
        let mut last_heard = Instant::now();
        let mut conn: Option<Conn> = None;
        loop {
            if let Some(reason) = self.lost.take() {
                return self.lost(reason, outbox, accepted).await;
            }
            // Connected: serve until the connection ends.
            if let Some(c) = conn.take() {
                match self
                    .serve(c, &mut outbox, &mut accepted, &mut last_heard)
                    .await
                {
                    Ended::Shutdown => return,
                    Ended::Lost(why) => {
                        self.lost = Some(why);
                        continue;
                    }
                    Ended::Dropped(why) => {
                        self.log(LogEvent::Disconnected {
                            peer: self.peer,
                            reason: why,
                        });
                        next_dial = Instant::now() + backoff;
                        // a replacement may already wait
                        if let Ok((c, hello)) = accepted.try_recv() {
                            conn = self.resume(c, hello, &mut last_heard).await;
                        }
                        continue;
                    }
                }
            }
            // Disconnected: buffer, watch the silence, dial when due.
            let dial_due = async {
                match self.dial {
                    Some(_) => sleep_until(next_dial).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                m = outbox.recv() => match m {
                    None => return,
                    Some(m) => {
                        if let Err(why) = self.buffer(m) {
                            self.lost = Some(why);
                        }
                    }
                },
                a = accepted.recv() => if let Some((c, hello)) = a {
                    conn = self.resume(c, hello, &mut last_heard).await;
                },
                _ = sleep_until(last_heard + self.timing.peer_timeout), if !self.unreachable => {
                    self.mark_unreachable();
                }
                _ = dial_due => if let Some(address) = self.dial.clone() {
                    match self.dial_peer(&address).await {
                        Some((c, hello)) => {
                            backoff = self.timing.backoff_min;
                            conn = self.resume(c, hello, &mut last_heard).await;
                            if conn.is_none() {
                                next_dial = Instant::now() + backoff;
                            }
                        }
                        None => {
                            backoff = (backoff * 2).min(self.timing.backoff_max);
                            next_dial = Instant::now() + backoff;
                        }
                    }
                }
            }
        }
    }

    /// The link gave up: reports it once, then drops what is sent to the peer and refuses
    /// every connection from it, until the net stops.
    async fn lost(
        self,
        reason: String,
        mut outbox: mpsc::UnboundedReceiver<M>,
        mut accepted: mpsc::Receiver<(Conn, PeerHello)>,
    ) {
        self.log(LogEvent::LinkLost {
            peer: self.peer,
            reason,
        });
        let _ = self.events.send(NetEvent::Lost(self.peer));
        loop {
            tokio::select! {
                m = outbox.recv() => match m {
                    None => return,
                    Some(_) => self.log(LogEvent::Dropped {
                        peer: self.peer,
                        reason: "a message to a lost peer".into(),
                    }),
                },
                a = accepted.recv() => match a {
                    None => return,
                    Some((mut c, _)) => {
                        let _ = handshake::send(&mut c, &Frame::<M>::Refuse(Refusal::Restarted)).await;
                        self.log(LogEvent::PeerRestarted(self.peer));
                    }
                },
            }
        }
    }

    fn mark_unreachable(&mut self) {
        if !self.unreachable {
            self.unreachable = true;
            self.log(LogEvent::Unreachable(self.peer));
            let _ = self.events.send(NetEvent::Unreachable(self.peer));
        }
    }

    /// Numbers a message and keeps it, encoded; refuses past the window.
    fn buffer(&mut self, msg: M) -> Result<u64, String> {
        if self.out.len() >= self.timing.window {
            return Err(format!(
                "{} messages unacknowledged, the retransmission window",
                self.out.len()
            ));
        }
        let frame = Frame::Data {
            seq: self.out.sent() + 1,
            msg: &msg,
        };
        match super::frame::encode(&frame) {
            Err(e) => Err(format!("a message that cannot be sent: {e}")),
            Ok(bytes) => Ok(self.out.push(Bytes::from(bytes))),
        }
    }

    /// Dials the peer at `address` (a host name is looked up now), each of its socket
    /// addresses in turn until a handshake passes; logs each failure.
    async fn dial_peer(&self, address: &MemberAddress) -> Option<(Conn, PeerHello)> {
        let addrs = match address.lookup().await {
            Ok(addrs) => addrs,
            Err(error) => {
                self.log(LogEvent::Unresolved {
                    peer: self.peer,
                    error,
                });
                return None;
            }
        };
        for addr in addrs {
            match self.connect(addr).await {
                Ok(done) => return Some(done),
                Err(error) => self.log(LogEvent::Refused {
                    addr,
                    peer: Some(self.peer),
                    error,
                }),
            }
        }
        None
    }

    async fn connect(&self, addr: SocketAddr) -> Result<(Conn, PeerHello), HandshakeError> {
        let attempt = async {
            let stream = self
                .network
                .connect(addr)
                .await
                .map_err(|e| HandshakeError::Io(e.to_string()))?;
            let mut conn = Framed::new(stream, super::frame::codec());
            let hello =
                handshake::handshake::<M>(&mut conn, &self.me, &self.trust, Some(self.peer), |p| {
                    p == self.peer
                })
                .await?;
            Ok((conn, hello))
        };
        tokio::time::timeout(self.timing.handshake_timeout, attempt)
            .await
            .unwrap_or(Err(HandshakeError::Timeout))
    }

    /// After a handshake: checks the incarnation, exchanges [`Frame::Resume`], trims and
    /// resends. `None` when the connection failed (or the peer was refused).
    async fn resume(
        &mut self,
        mut conn: Conn,
        hello: PeerHello,
        last_heard: &mut Instant,
    ) -> Option<Conn> {
        let addr = peer_addr(&conn);
        match self.incarnation {
            Some(known)
                if known != hello.incarnation && self.on_restart == super::OnRestart::Accept =>
            {
                // a new process: the session starts afresh (its numbering, what was queued
                // for the old process), and the owner hears of it before any of its messages
                self.log(LogEvent::PeerRestarted(self.peer));
                self.out = Outgoing::default();
                self.inc = Incoming::default();
                self.incarnation = Some(hello.incarnation);
                let _ = self.events.send(NetEvent::Restarted {
                    peer: self.peer,
                    previous: known,
                    incarnation: hello.incarnation,
                });
            }
            Some(known) if known != hello.incarnation => {
                let _ = handshake::send(&mut conn, &Frame::<M>::Refuse(Refusal::Restarted)).await;
                self.log(LogEvent::PeerRestarted(self.peer));
                self.lost = Some(format!(
                    "{} restarted (incarnation {:x}, was {known:x}) and lost its state",
                    self.peer, hello.incarnation
                ));
                return None;
            }
            _ => {}
        }
        let exchange = async {
            handshake::send(
                &mut conn,
                &Frame::<M>::Resume {
                    delivered: self.inc.delivered(),
                },
            )
            .await?;
            match handshake::recv::<M>(&mut conn).await? {
                Frame::Resume { delivered } => Ok(delivered),
                Frame::Refuse(r) => Err(HandshakeError::Refused(r)),
                _ => Err(HandshakeError::Protocol("expected a resume")),
            }
        };
        let delivered = match tokio::time::timeout(self.timing.handshake_timeout, exchange).await {
            Ok(Ok(d)) => d,
            Ok(Err(error)) => {
                self.log(LogEvent::Refused {
                    addr,
                    peer: Some(self.peer),
                    error,
                });
                return None;
            }
            Err(_) => {
                self.log(LogEvent::Refused {
                    addr,
                    peer: Some(self.peer),
                    error: HandshakeError::Timeout,
                });
                return None;
            }
        };
        if let Err(e) = self.out.ack(delivered) {
            self.log(LogEvent::Dropped {
                peer: self.peer,
                reason: format!(
                    "resume claims {} delivered, only {} sent: refused",
                    e.acked, e.sent
                ),
            });
            return None;
        }
        self.incarnation = Some(hello.incarnation);
        // the unacknowledged tail goes out again from `serve`, interleaved with reading: two
        // sides that both wrote their whole tail before reading would make no progress over
        // connections that keep failing
        self.cursor = delivered + 1;
        *last_heard = Instant::now();
        self.log(LogEvent::Connected {
            peer: self.peer,
            resent: self.out.len(),
        });
        let _ = self.events.send(NetEvent::Connected(self.peer));
        if self.unreachable {
            self.unreachable = false;
            let _ = self.events.send(NetEvent::Reachable(self.peer));
        }
        Some(conn)
    }

    async fn serve(
        &mut self,
        conn: Conn,
        outbox: &mut mpsc::UnboundedReceiver<M>,
        accepted: &mut mpsc::Receiver<(Conn, PeerHello)>,
        last_heard: &mut Instant,
    ) -> Ended {
        // acknowledgements are cumulative and only trim the sender's buffer (a reconnect
        // resumes from what was delivered, not from what was acknowledged), so they go out
        // every ACK_EVERY messages or with the next heartbeat, not one frame per message
        let mut acked = self.inc.delivered();
        // well inside the sender's window (the members share the cluster's timing)
        let ack_every = (self.timing.window as u64 / 4).clamp(1, ACK_EVERY);
        let mut beat = tokio::time::interval(self.timing.heartbeat);
        beat.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let addr = peer_addr(&conn);
        // Writing never stops reading: the connection is split, and every write (a batch of
        // data frames after the acknowledgements and heartbeats due) is one future polled
        // beside the reads. Two sides that both blocked in a write to a full socket buffer,
        // neither reading, would stop each other for good.
        let (sink, mut stream): (Sink, _) = conn.split();
        let mut writer = Writer::Idle(sink);
        // encoded control frames (acknowledgements, heartbeats) for the next write
        let mut control: Vec<Bytes> = Vec::new();
        loop {
            if let Some(sink) = writer.idle() {
                let mut batch = std::mem::take(&mut control);
                let mut next = self.cursor;
                for (seq, frame) in self.out.from_seq(self.cursor).take(SEND_BATCH) {
                    batch.push(frame.clone());
                    next = seq + 1;
                }
                self.cursor = next;
                writer = if batch.is_empty() {
                    Writer::Idle(sink)
                } else {
                    Writer::write(sink, batch)
                };
            }
            tokio::select! {
                w = writer.done() => match w {
                    Ok(sink) => writer = Writer::Idle(sink),
                    Err(e) => return Ended::Dropped(e.to_string()),
                },
                // no bias: reading goes on while something is being written
                m = outbox.recv() => match m {
                    None => return Ended::Shutdown,
                    Some(msg) => {
                        if let Err(why) = self.buffer(msg) {
                            return Ended::Lost(why);
                        }
                        // what the node queued meanwhile goes into the same batch
                        for _ in 1..SEND_BATCH {
                            let Ok(msg) = outbox.try_recv() else { break };
                            if let Err(why) = self.buffer(msg) {
                                return Ended::Lost(why);
                            }
                        }
                    }
                },
                f = stream.next() => {
                    let bytes = match f {
                        None => return Ended::Dropped("closed by the peer".into()),
                        Some(Err(e)) => {
                            // a frame that does not open, or broken framing: the bytes on the
                            // wire are not what the peer sealed
                            if super::channel::channel_error(&e).is_some()
                                || e.kind() == std::io::ErrorKind::InvalidData
                            {
                                self.log(LogEvent::Tampered {
                                    peer: self.peer,
                                    addr,
                                    reason: e.to_string(),
                                });
                            }
                            return Ended::Dropped(e.to_string());
                        }
                        Some(Ok(b)) => b,
                    };
                    *last_heard = Instant::now();
                    if self.unreachable {
                        self.unreachable = false;
                        let _ = self.events.send(NetEvent::Reachable(self.peer));
                    }
                    match super::frame::decode::<M>(&bytes) {
                        Err(e) => return Ended::Dropped(format!("{e}: connection closed")),
                        Ok(Frame::Data { seq, msg }) => match self.inc.arrive(seq) {
                            Arrival::Deliver => {
                                if self.events.send(NetEvent::Message { from: self.peer, msg }).is_err() {
                                    return Ended::Shutdown;
                                }
                                if seq - acked >= ack_every {
                                    acked = seq;
                                    control.push(control_frame::<M>(&Frame::Ack { seq }));
                                }
                            }
                            Arrival::Duplicate => {
                                self.log(LogEvent::Dropped { peer: self.peer, reason: format!("duplicate message {seq}") });
                            }
                            Arrival::Gap { expected } => {
                                return Ended::Dropped(format!("message {seq} while expecting {expected}"));
                            }
                        },
                        Ok(Frame::Ack { seq }) => {
                            if let Err(e) = self.out.ack(seq) {
                                self.log(LogEvent::Dropped {
                                    peer: self.peer,
                                    reason: format!("ack of {} with only {} sent", e.acked, e.sent),
                                });
                            }
                        }
                        Ok(Frame::Heartbeat) => {}
                        // a refusal on a live link is a dropped connection, whatever its
                        // reason: the link resumes on a new one (a restart is refused at the
                        // handshake, not here)
                        Ok(Frame::Refuse(r)) => {
                            return Ended::Dropped(format!("refused by the peer: {r}"));
                        }
                        Ok(Frame::Hello(_) | Frame::Resume { .. } | Frame::StatusRequest | Frame::Status(_)) => {
                            self.log(LogEvent::Dropped { peer: self.peer, reason: "handshake frame on a live link".into() });
                        }
                    }
                }
                a = accepted.recv() => if let Some((mut c, _)) = a {
                    // no takeover: the live connection stays until the link's own rules
                    // declare it dead (closed, failed, silent beyond the peer timeout); the
                    // dialler retries with its backoff
                    let addr = peer_addr(&c);
                    self.log(LogEvent::Refused {
                        addr,
                        peer: Some(self.peer),
                        error: HandshakeError::LinkLive,
                    });
                    tokio::spawn(async move {
                        let _ = handshake::send(&mut c, &Frame::<M>::Refuse(Refusal::Busy)).await;
                    });
                },
                _ = beat.tick() => {
                    if Instant::now().duration_since(*last_heard) > self.timing.peer_timeout {
                        self.mark_unreachable();
                        return Ended::Dropped("silent beyond the peer timeout".into());
                    }
                    // the heartbeat carries the acknowledgement of what arrived since the last one
                    let delivered = self.inc.delivered();
                    let frame = if delivered > acked {
                        acked = delivered;
                        Frame::<M>::Ack { seq: delivered }
                    } else {
                        Frame::<M>::Heartbeat
                    };
                    control.push(control_frame::<M>(&frame));
                }
            }
        }
    }
}

/// The write half of a live connection: it takes a batch of frames at a time, sealed
/// together.
type Sink = futures_util::stream::SplitSink<Conn, Vec<Bytes>>;

/// A write in progress: it owns the write half and gives it back when the batch is flushed.
type Write =
    std::pin::Pin<Box<dyn std::future::Future<Output = (Sink, std::io::Result<()>)> + Send>>;

/// The write half of a connection: idle, or writing a batch (never both, so frames go out in
/// the order they were batched).
enum Writer {
    Idle(Sink),
    Writing(Write),
    /// Only while the state changes hands.
    Moved,
}

impl Writer {
    /// Seals the batch (as few Noise messages as hold it) and writes it with one flush.
    fn write(mut sink: Sink, batch: Vec<Bytes>) -> Writer {
        Writer::Writing(Box::pin(async move {
            let result = sink.send(batch).await;
            (sink, result)
        }))
    }

    /// The write half, when no write is in progress (the writer is then [`Writer::Moved`]
    /// until it is given a new state).
    fn idle(&mut self) -> Option<Sink> {
        match std::mem::replace(self, Writer::Moved) {
            Writer::Idle(sink) => Some(sink),
            other => {
                *self = other;
                None
            }
        }
    }

    /// Resolves when the write in progress ends (never, when there is none).
    async fn done(&mut self) -> std::io::Result<Sink> {
        match self {
            Writer::Writing(write) => {
                let (sink, result) = write.await;
                result.map(|()| sink)
            }
            _ => std::future::pending().await,
        }
    }
}

/// The bytes of a control frame (its encoding cannot fail: no message inside).
fn control_frame<M: Serialize>(frame: &Frame<M>) -> Bytes {
    Bytes::from(super::frame::encode(frame).unwrap_or_default())
}

/// At most this many messages go out between two reads of a connection.
const SEND_BATCH: usize = 64;

/// A receiver acknowledges at least every this many messages (and with each heartbeat).
const ACK_EVERY: u64 = 64;

fn peer_addr(conn: &Conn) -> SocketAddr {
    conn.get_ref()
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
}

#[cfg(test)]
mod tests;
