//! The handshake: the Noise XX handshake of the channel ([`super::channel`]) authenticates
//! both members by their static keys, then each side tells who it is and what cluster it
//! runs, under the channel, and only to a peer it has authenticated.
//!
//! 1. The dialler sends `e`; the acceptor answers `e, ee, s, es` (its static key, encrypted).
//!    The dialler checks that key is the one the cluster file pins for the member it dialled.
//! 2. The dialler sends `s, se` with its [`Hello`] as the payload (encrypted, and only now,
//!    to a peer it authenticated): its id, the id it dialled, its spec hash, epoch and
//!    incarnation. The acceptor finds whose key `s` is among the pinned keys and refuses a
//!    hello that claims another id than the key's ([`HandshakeError::IdMismatch`]), one
//!    addressed to another member, or one from a member that is not a neighbour.
//! 3. The acceptor answers with its own hello as the first sealed frame; both sides then
//!    compare spec hashes and epochs.
//!
//! A side that finds a problem after the channel is up sends a sealed [`Frame::Refuse`] with
//! the reason, closes, and returns a [`HandshakeError`]; the other side gets
//! [`HandshakeError::Refused`]. A problem before that (a handshake message that does not
//! verify, a key that is not pinned for the member dialled) closes without a word: nothing
//! is said to a peer that is not authenticated.

use super::channel::{PublicKey, MAX_NOISE_MESSAGE, NOISE_PARAMS, PROLOGUE};
use super::frame::{self, Frame, FrameError, Hello, Refusal, PROTOCOL_VERSION};
use super::Identity;
use crate::id::ProcessId;
use futures_util::{SinkExt, StreamExt};
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt;
use tokio_util::bytes::Bytes;
use tokio_util::codec::Framed;

/// A framed TCP connection (sealed once its handshake is done).
pub(crate) type Conn = Framed<super::io::BoxStream, super::channel::NoiseCodec>;

/// The pinned public key of every member (at least of every peer).
pub type Trust = BTreeMap<ProcessId, PublicKey>;

/// Why a handshake failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HandshakeError {
    /// The connection closed or failed.
    Io(String),
    /// A frame did not decode (or was too long).
    Frame(FrameError),
    /// The other side speaks another protocol version.
    Version {
        /// Its version.
        theirs: u32,
    },
    /// The hello was addressed to another member.
    NotAddressed {
        /// The member it was addressed to.
        to: ProcessId,
    },
    /// The other side is not a neighbour, or not the member dialled.
    NotAPeer {
        /// The id it claimed.
        from: ProcessId,
    },
    /// The key the other side authenticated with is not the one pinned for this member
    /// (the member dialled, or the id claimed).
    AuthFailed {
        /// The member whose pinned key it is not.
        from: ProcessId,
    },
    /// The other side authenticated with one member's key and claimed another member's id:
    /// refused.
    IdMismatch {
        /// The id it claimed.
        claimed: ProcessId,
        /// The member whose key it holds.
        authenticated: ProcessId,
    },
    /// The other side's key is pinned for no member.
    UnknownKey(PublicKey),
    /// The Noise handshake failed: a message that did not verify (tampered, replayed or
    /// spliced bytes, another protocol version in the prologue), or a malformed one.
    Crypto(String),
    /// The cluster spec hashes differ.
    SpecMismatch {
        /// The other side.
        from: ProcessId,
        /// Our spec hash, hex.
        ours: String,
        /// Its spec hash, hex.
        theirs: String,
    },
    /// The cluster epochs differ.
    EpochMismatch {
        /// The other side.
        from: ProcessId,
        /// Our epoch.
        ours: u64,
        /// Its epoch.
        theirs: u64,
    },
    /// A frame out of place.
    Protocol(&'static str),
    /// The other side refused us.
    Refused(Refusal),
    /// The handshake took too long.
    Timeout,
    /// Shed before any cryptography (a flood defence): closed, or held unread for a while
    /// when it comes from an address that is no peer's host. The reason.
    Shed(&'static str),
    /// The link to this member is live: a second connection is refused (no takeover).
    LinkLive,
}

impl fmt::Display for HandshakeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HandshakeError::Io(e) => write!(f, "connection failed: {e}"),
            HandshakeError::Frame(e) => write!(f, "{e}"),
            HandshakeError::Version { theirs } => {
                write!(f, "protocol version {theirs}, ours is {PROTOCOL_VERSION}")
            }
            HandshakeError::NotAddressed { to } => write!(f, "hello addressed to {to}"),
            HandshakeError::NotAPeer { from } => {
                write!(f, "{from} is not a neighbour (or not the member dialled)")
            }
            HandshakeError::AuthFailed { from } => write!(
                f,
                "authentication failed: the key presented is not the one pinned for {from}"
            ),
            HandshakeError::IdMismatch {
                claimed,
                authenticated,
            } => write!(
                f,
                "authenticated as {authenticated} but claims to be {claimed}: refused"
            ),
            HandshakeError::UnknownKey(k) => {
                write!(f, "the key {k} is pinned for no member of the cluster")
            }
            HandshakeError::Crypto(e) => write!(f, "the channel's handshake failed: {e}"),
            HandshakeError::SpecMismatch { from, ours, theirs } => write!(
                f,
                "{from} runs another cluster spec (hash {theirs}, ours {ours})"
            ),
            HandshakeError::EpochMismatch { from, ours, theirs } => {
                write!(f, "{from} runs cluster epoch {theirs}, ours is {ours}")
            }
            HandshakeError::Protocol(what) => write!(f, "protocol error: {what}"),
            HandshakeError::Refused(r) => write!(f, "refused by the other side: {r}"),
            HandshakeError::Timeout => f.write_str("handshake timed out"),
            HandshakeError::Shed(why) => write!(f, "shed before any cryptography: {why}"),
            HandshakeError::LinkLive => {
                f.write_str("a second connection while the link is live: refused (no takeover)")
            }
        }
    }
}

impl std::error::Error for HandshakeError {}

/// What a successful handshake learnt about the other side.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PeerHello {
    /// Its member id.
    pub(crate) id: ProcessId,
    /// Its incarnation.
    pub(crate) incarnation: u64,
}

/// Sends one frame (sealed once the channel is up).
pub(crate) async fn send<M: Serialize>(
    conn: &mut Conn,
    frame: &Frame<M>,
) -> Result<(), HandshakeError> {
    let bytes = frame::encode(frame).map_err(HandshakeError::Frame)?;
    send_raw(conn, bytes).await
}

async fn send_raw(conn: &mut Conn, bytes: Vec<u8>) -> Result<(), HandshakeError> {
    conn.send(Bytes::from(bytes))
        .await
        .map_err(|e| HandshakeError::Io(e.to_string()))
}

async fn recv_raw(conn: &mut Conn) -> Result<Vec<u8>, HandshakeError> {
    match conn.next().await {
        None => Err(HandshakeError::Io("closed".into())),
        Some(Err(e)) => match super::channel::channel_error(&e) {
            Some(c) => Err(HandshakeError::Crypto(c.to_string())),
            None if e.kind() == std::io::ErrorKind::InvalidData => Err(HandshakeError::Frame(
                FrameError::Malformed(format!("length prefix: {e}")),
            )),
            None => Err(HandshakeError::Io(e.to_string())),
        },
        Some(Ok(bytes)) => Ok(bytes.to_vec()),
    }
}

/// Receives one frame (opened and checked once the channel is up).
pub(crate) async fn recv<M: DeserializeOwned>(conn: &mut Conn) -> Result<Frame<M>, HandshakeError> {
    let bytes = recv_raw(conn).await?;
    frame::decode(&bytes).map_err(HandshakeError::Frame)
}

/// Tells the other side why (sealed: only once the channel is up), then returns the error.
/// The connection is closed gracefully: the write side first, then what the other side
/// still sends is read and dropped (for at most [`LINGER`]), so that the close is not a
/// reset that could reach the other side before the refusal does.
async fn refuse<M: Serialize>(
    conn: &mut Conn,
    why: Refusal,
    err: HandshakeError,
) -> HandshakeError {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _ = send(conn, &Frame::<M>::Refuse(why)).await;
    let stream = conn.get_mut();
    let _ = stream.shutdown().await;
    let drain = async {
        let mut buf = [0u8; 4096];
        let mut left: usize = 64 * 1024;
        while left > 0 {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
    };
    let _ = tokio::time::timeout(LINGER, drain).await;
    err
}

/// How long a refusing side waits for the other side to close.
const LINGER: std::time::Duration = std::time::Duration::from_millis(200);

fn hex(bytes: &[u8]) -> String {
    super::channel::hex(bytes)
}

fn noise(me: &Identity) -> Result<snow::Builder<'_>, HandshakeError> {
    let params = NOISE_PARAMS
        .parse()
        .map_err(|e| HandshakeError::Crypto(format!("{e:?}")))?;
    snow::Builder::new(params)
        .local_private_key(me.key.bytes())
        .and_then(|b| b.prologue(PROLOGUE))
        .map_err(|e| HandshakeError::Crypto(format!("{e}")))
}

fn crypto(e: snow::Error) -> HandshakeError {
    HandshakeError::Crypto(match e {
        snow::Error::Decrypt => "a handshake message did not verify (tampered, replayed or \
                                 spliced bytes, or another protocol version)"
            .to_string(),
        e => e.to_string(),
    })
}

fn remote_key(hs: &snow::HandshakeState) -> Result<PublicKey, HandshakeError> {
    hs.get_remote_static()
        .and_then(|k| <[u8; 32]>::try_from(k).ok())
        .map(PublicKey)
        .ok_or_else(|| HandshakeError::Crypto("no static key from the other side".into()))
}

/// Runs the handshake on `conn` as `me`, trusting the keys of `trust`. `expect` is the
/// member dialled (`None` when accepting); `is_peer` says whether an id may connect to us.
pub(crate) async fn handshake<M: Serialize + DeserializeOwned>(
    conn: &mut Conn,
    me: &Identity,
    trust: &Trust,
    expect: Option<ProcessId>,
    is_peer: impl Fn(ProcessId) -> bool,
) -> Result<PeerHello, HandshakeError> {
    let mut mine = Hello {
        version: PROTOCOL_VERSION,
        from: me.id,
        to: expect.unwrap_or(me.id),
        spec: me.spec,
        epoch: me.epoch,
        incarnation: me.incarnation,
    };
    let mut buf = vec![0u8; MAX_NOISE_MESSAGE];
    let theirs = match expect {
        Some(expect) => {
            let mut hs = noise(me)?.build_initiator().map_err(crypto)?;
            let n = hs.write_message(&[], &mut buf).map_err(crypto)?;
            send_raw(conn, buf[..n].to_vec()).await?;
            let msg = recv_raw(conn).await?;
            hs.read_message(&msg, &mut buf).map_err(crypto)?;
            let key = remote_key(&hs)?;
            if trust.get(&expect) != Some(&key) {
                return Err(HandshakeError::AuthFailed { from: expect });
            }
            // the peer is authenticated: now (and only now) say who we are
            let hello =
                frame::encode(&Frame::<M>::Hello(mine.clone())).map_err(HandshakeError::Frame)?;
            let n = hs.write_message(&hello, &mut buf).map_err(crypto)?;
            send_raw(conn, buf[..n].to_vec()).await?;
            conn.codec_mut()
                .seal(hs.into_transport_mode().map_err(crypto)?);
            let theirs = match recv::<M>(conn).await? {
                Frame::Hello(h) => h,
                Frame::Refuse(r) => return Err(HandshakeError::Refused(r)),
                _ => {
                    let err = HandshakeError::Protocol("expected a hello");
                    return Err(refuse::<M>(conn, Refusal::Protocol, err).await);
                }
            };
            if theirs.version != PROTOCOL_VERSION {
                let err = HandshakeError::Version {
                    theirs: theirs.version,
                };
                return Err(refuse::<M>(conn, Refusal::Version, err).await);
            }
            if theirs.from != expect {
                let err = HandshakeError::IdMismatch {
                    claimed: theirs.from,
                    authenticated: expect,
                };
                return Err(refuse::<M>(conn, Refusal::AuthFailed, err).await);
            }
            if theirs.to != me.id {
                let err = HandshakeError::NotAddressed { to: theirs.to };
                return Err(refuse::<M>(conn, Refusal::NotAddressed, err).await);
            }
            theirs
        }
        None => {
            let mut hs = noise(me)?.build_responder().map_err(crypto)?;
            let msg = recv_raw(conn).await?;
            hs.read_message(&msg, &mut buf).map_err(crypto)?;
            let n = hs.write_message(&[], &mut buf).map_err(crypto)?;
            send_raw(conn, buf[..n].to_vec()).await?;
            let msg = recv_raw(conn).await?;
            let len = hs.read_message(&msg, &mut buf).map_err(crypto)?;
            let key = remote_key(&hs)?;
            conn.codec_mut()
                .seal(hs.into_transport_mode().map_err(crypto)?);
            let Some(authenticated) = trust.iter().find(|(_, k)| **k == key).map(|(p, _)| *p)
            else {
                let err = HandshakeError::UnknownKey(key);
                return Err(refuse::<M>(conn, Refusal::AuthFailed, err).await);
            };
            let theirs = match frame::decode::<M>(&buf[..len]) {
                Ok(Frame::Hello(h)) => h,
                Ok(_) => {
                    let err = HandshakeError::Protocol("expected a hello");
                    return Err(refuse::<M>(conn, Refusal::Protocol, err).await);
                }
                Err(e) => {
                    let err = HandshakeError::Frame(e);
                    return Err(refuse::<M>(conn, Refusal::Protocol, err).await);
                }
            };
            if theirs.version != PROTOCOL_VERSION {
                let err = HandshakeError::Version {
                    theirs: theirs.version,
                };
                return Err(refuse::<M>(conn, Refusal::Version, err).await);
            }
            if theirs.from != authenticated {
                let err = HandshakeError::IdMismatch {
                    claimed: theirs.from,
                    authenticated,
                };
                return Err(refuse::<M>(conn, Refusal::AuthFailed, err).await);
            }
            if theirs.to != me.id {
                let err = HandshakeError::NotAddressed { to: theirs.to };
                return Err(refuse::<M>(conn, Refusal::NotAddressed, err).await);
            }
            if theirs.from == me.id || !is_peer(theirs.from) {
                let err = HandshakeError::NotAPeer { from: theirs.from };
                return Err(refuse::<M>(conn, Refusal::NotAPeer, err).await);
            }
            mine.to = theirs.from;
            send(conn, &Frame::<M>::Hello(mine.clone())).await?;
            theirs
        }
    };
    let from = theirs.from;
    if theirs.spec != me.spec {
        let err = HandshakeError::SpecMismatch {
            from,
            ours: hex(&me.spec),
            theirs: hex(&theirs.spec),
        };
        return Err(refuse::<M>(conn, Refusal::SpecMismatch, err).await);
    }
    if theirs.epoch != me.epoch {
        let err = HandshakeError::EpochMismatch {
            from,
            ours: me.epoch,
            theirs: theirs.epoch,
        };
        return Err(refuse::<M>(conn, Refusal::EpochMismatch, err).await);
    }
    Ok(PeerHello {
        id: from,
        incarnation: theirs.incarnation,
    })
}
