//! A link on a live connection: the messages go out in batches, each one write that never
//! stops the reading; what arrives is delivered in order, exactly once; acknowledgements ride
//! with the heartbeats (or every [`ACK_EVERY`] messages); silence beyond the peer timeout, a
//! gap or a frame that does not open ends the connection.

use super::sequence::Arrival;
use super::task::{peer_addr, Ended, Link};
use super::NetEvent;
use crate::net::frame::{self, Frame, Refusal};
use crate::net::handshake::{self, Conn, HandshakeError, PeerHello};
use crate::net::{channel, LogEvent};
use futures_util::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::bytes::Bytes;

impl<M> Link<M>
where
    M: Clone + Send + Sync + Serialize + DeserializeOwned + 'static,
{
    pub(super) async fn serve(
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
        // a drain's acknowledgement request: the one in `control`, then the one being written
        let gauge = self.gauge.clone();
        let mut flush_queued: Option<u64> = None;
        let mut flush_writing: Option<u64> = None;
        loop {
            if let Some(sink) = writer.idle() {
                let mut batch = std::mem::take(&mut control);
                flush_writing = flush_queued.take();
                let mut next = self.cursor;
                for (seq, frame) in self.out.kept_from(self.cursor).take(SEND_BATCH) {
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
                    Ok(sink) => {
                        writer = Writer::Idle(sink);
                        if let Some(ticket) = flush_writing.take() {
                            gauge.flush_written(ticket);
                        }
                    }
                    Err(e) => return Ended::Dropped(e.to_string()),
                },
                // a drain asks for what was delivered to be acknowledged now
                ticket = gauge.flush_asked() => {
                    let delivered = self.inc.delivered();
                    acked = delivered;
                    control.push(control_frame::<M>(&Frame::Ack { seq: delivered }));
                    flush_queued = Some(ticket);
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
                            if channel::channel_error(&e).is_some()
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
                    self.reachable();
                    match frame::decode::<M>(&bytes) {
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
                            let acked = self.out.ack(seq);
                            self.publish();
                            if let Err(e) = acked {
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
    Bytes::from(frame::encode(frame).unwrap_or_default())
}

/// At most this many messages go out between two reads of a connection.
const SEND_BATCH: usize = 64;

/// A receiver acknowledges at least every this many messages (and with each heartbeat).
const ACK_EVERY: u64 = 64;
