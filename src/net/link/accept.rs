//! The accepting side of a [`Net`](super::Net): the loop that takes connections, sheds
//! those from no peer's host (or past their share of the handshakes) before any
//! cryptography, runs each handshake in a task of its own and hands the connection to its
//! link, or answers the operator's status request.

use super::sources::{Held, Sources};
use super::StatusSlot;
use crate::id::ProcessId;
use crate::net::frame::{self, Frame};
use crate::net::handshake::{self, Conn, HandshakeError, PeerHello, Trust};
use crate::net::io::Accept;
use crate::net::{Identity, LogEvent, Logger, Timing, OPERATOR};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, Semaphore};
use tokio::time::Instant;
use tokio_util::codec::Framed;

/// Accepts connections and runs the accepting side of the handshake, each in its own task,
/// then hands the connection to its link.
pub(super) struct Acceptor {
    pub(super) me: Arc<Identity>,
    pub(super) trust: Arc<Trust>,
    pub(super) timing: Timing,
    pub(super) log: Logger,
    pub(super) accepted: BTreeMap<ProcessId, mpsc::Sender<(Conn, PeerHello)>>,
    /// Every handshake in progress holds a permit.
    pub(super) gate: Arc<Semaphore>,
    /// The peers' hosts, each with its own permits: no other address gets a handshake.
    pub(super) sources: Arc<Mutex<Sources>>,
    /// True once the peers given by host name were looked up a first time.
    pub(super) ready: tokio::sync::watch::Receiver<bool>,
    /// Per source: when its last refusal was logged, how many were not logged since, and
    /// the last reason.
    pub(super) refusals: Mutex<BTreeMap<IpAddr, (Instant, u64, String)>>,
    /// What answers the operator's status request, once the node set it.
    pub(super) status: StatusSlot,
}

/// At most this many sources are remembered for the refusal log (then it starts afresh).
const MAX_REFUSAL_SOURCES: usize = 4096;

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

    pub(super) async fn run<M: Serialize + DeserializeOwned + Send + Sync + 'static>(
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
                let mut conn = Framed::new(stream, frame::codec());
                // the operator may connect once the node serves its status
                let shake =
                    handshake::handshake::<M>(&mut conn, &this.me, &this.trust, None, |p| {
                        this.accepted.contains_key(&p)
                            || (p == OPERATOR && this.status.get().is_some())
                    });
                match tokio::time::timeout(this.timing.handshake_timeout, shake).await {
                    Ok(Ok(hello)) if hello.id == OPERATOR => {
                        // the permits stay held until it is answered: operators cannot
                        // flood past the handshake slots
                        let serve = serve_operator::<M>(&mut conn, &this.status);
                        if let Ok(Err(error)) =
                            tokio::time::timeout(this.timing.handshake_timeout, serve).await
                        {
                            this.refused(addr, Some(OPERATOR), error);
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
