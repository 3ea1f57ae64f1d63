//! One link's task: it owns the link's sequence state across connections, buffers while
//! disconnected, watches the peer's silence, dials when due (the smaller id's side, with
//! backoff), and gives the link up for good when it must.

use super::gauge::Gauge;
use super::sequence::{Incoming, Outgoing};
use super::NetEvent;
use crate::id::ProcessId;
use crate::net::frame::{self, Frame, Refusal};
use crate::net::handshake::{self, Conn, PeerHello, Trust};
use crate::net::io::Network;
use crate::net::{Identity, LogEvent, Logger, MemberAddress, OnRestart, Timing};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::time::{sleep_until, Instant};
use tokio_util::bytes::Bytes;

/// Why a connection ended.
pub(super) enum Ended {
    /// The owner dropped the net: stop.
    Shutdown,
    /// The connection failed; the link resumes on a new one.
    Dropped(String),
    /// The link gave up for good.
    Lost(String),
}

/// One link's task: owns its sequence state across connections.
pub(super) struct Link<M> {
    pub(super) me: Arc<Identity>,
    pub(super) trust: Arc<Trust>,
    pub(super) peer: ProcessId,
    pub(super) dial: Option<MemberAddress>,
    /// The network it dials on.
    pub(super) network: Arc<dyn Network>,
    pub(super) timing: Timing,
    pub(super) log: Logger,
    /// The unacknowledged messages, each kept as its encoded `Frame::Data` (its sequence
    /// number never changes, so a retransmission sends the same bytes).
    pub(super) out: Outgoing<Bytes>,
    pub(super) inc: Incoming,
    /// The peer's incarnation, once known: a different one later is a restart.
    pub(super) incarnation: Option<u64>,
    pub(super) on_restart: OnRestart,
    pub(super) events: mpsc::UnboundedSender<NetEvent<M>>,
    pub(super) unreachable: bool,
    /// Set when the link gives up for good, with the reason.
    pub(super) lost: Option<String>,
    /// The next sequence number to transmit on the current connection.
    pub(super) cursor: u64,
    /// What the link publishes for a drain: how many messages it took, how many settled.
    pub(super) gauge: Arc<Gauge>,
    /// Messages taken from the outbox so far (those dropped at a restart included).
    pub(super) taken: u64,
}

impl<M> Drop for Link<M> {
    fn drop(&mut self) {
        // the task ended, however (lost, shut down, aborted): nothing more settles
        self.gauge.end();
    }
}

impl<M> Link<M>
where
    M: Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
{
    pub(super) fn log(&self, event: LogEvent) {
        (self.log)(self.me.id, &event);
    }

    pub(super) async fn run(
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
                self.gauge.set_connected(true);
                let ended = self
                    .serve(c, &mut outbox, &mut accepted, &mut last_heard)
                    .await;
                self.gauge.set_connected(false);
                match ended {
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
        // nothing more settles: what is kept, and what comes, is dropped
        self.gauge.end();
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

    pub(super) fn mark_unreachable(&mut self) {
        if !self.unreachable {
            self.unreachable = true;
            self.gauge.set_unreachable(true);
            self.log(LogEvent::Unreachable(self.peer));
            let _ = self.events.send(NetEvent::Unreachable(self.peer));
        }
    }

    /// Numbers a message and keeps it, encoded; refuses past the window.
    pub(super) fn buffer(&mut self, msg: M) -> Result<u64, String> {
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
        match frame::encode(&frame) {
            Err(e) => Err(format!("a message that cannot be sent: {e}")),
            Ok(bytes) => {
                self.taken += 1;
                Ok(self.out.push(Bytes::from(bytes)))
            }
        }
    }

    /// The peer is reachable again (a frame or a resume came).
    pub(super) fn reachable(&mut self) {
        if self.unreachable {
            self.unreachable = false;
            self.gauge.set_unreachable(false);
            let _ = self.events.send(NetEvent::Reachable(self.peer));
        }
    }

    /// Publishes what is settled (after an acknowledgement, or a restart's drop).
    pub(super) fn publish(&self) {
        self.gauge.publish(self.taken, self.out.len());
    }
}

pub(super) fn peer_addr(conn: &Conn) -> SocketAddr {
    conn.get_ref()
        .peer_addr()
        .unwrap_or_else(|_| SocketAddr::from(([0, 0, 0, 0], 0)))
}
