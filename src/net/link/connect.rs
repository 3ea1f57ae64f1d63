//! How a link gets a connection: dialling the peer (each of its addresses in turn, through
//! the handshake), and resuming the link on a new connection, dialled or accepted (the
//! peer's incarnation checked, [`Frame::Resume`] exchanged, the acknowledged messages
//! trimmed).

use super::sequence::{Incoming, Outgoing};
use super::task::{peer_addr, Link};
use super::NetEvent;
use crate::net::frame::{self, Frame, Refusal};
use crate::net::handshake::{self, Conn, HandshakeError, PeerHello};
use crate::net::{LogEvent, MemberAddress, OnRestart};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::net::SocketAddr;
use tokio::time::Instant;
use tokio_util::codec::Framed;

impl<M> Link<M>
where
    M: Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
{
    /// Dials the peer at `address` (a host name is looked up now), each of its socket
    /// addresses in turn until a handshake passes; logs each failure.
    pub(super) async fn dial_peer(&self, address: &MemberAddress) -> Option<(Conn, PeerHello)> {
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
            let mut conn = Framed::new(stream, frame::codec());
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
    pub(super) async fn resume(
        &mut self,
        mut conn: Conn,
        hello: PeerHello,
        last_heard: &mut Instant,
    ) -> Option<Conn> {
        let addr = peer_addr(&conn);
        match self.incarnation {
            Some(known) if known != hello.incarnation && self.on_restart == OnRestart::Accept => {
                // a new process: the session starts afresh (its numbering, what was queued
                // for the old process), and the owner hears of it before any of its messages
                self.log(LogEvent::PeerRestarted(self.peer));
                self.out = Outgoing::default();
                self.inc = Incoming::default();
                self.publish();
                self.incarnation = Some(hello.incarnation);
                self.gauge.set_incarnation(hello.incarnation);
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
        // while the resume is under way a drain waits for it: its Resume says what was
        // delivered, as an acknowledgement would
        self.gauge.set_connected(true);
        let ticket = self.gauge.flush_ticket();
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
            Ok(Ok(d)) => {
                self.gauge.flush_written(ticket);
                d
            }
            Ok(Err(error)) => {
                self.gauge.set_connected(false);
                self.log(LogEvent::Refused {
                    addr,
                    peer: Some(self.peer),
                    error,
                });
                return None;
            }
            Err(_) => {
                self.gauge.set_connected(false);
                self.log(LogEvent::Refused {
                    addr,
                    peer: Some(self.peer),
                    error: HandshakeError::Timeout,
                });
                return None;
            }
        };
        let acked = self.out.ack(delivered);
        self.publish();
        if let Err(e) = acked {
            self.log(LogEvent::Dropped {
                peer: self.peer,
                reason: format!(
                    "resume claims {} delivered, only {} sent: refused",
                    e.acked, e.sent
                ),
            });
            self.gauge.set_connected(false);
            return None;
        }
        self.incarnation = Some(hello.incarnation);
        self.gauge.set_incarnation(hello.incarnation);
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
        self.reachable();
        Some(conn)
    }
}
