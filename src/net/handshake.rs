//! The handshake: mutual authentication by HMAC-SHA256 challenge-response over the cluster's
//! shared secret, then agreement on the protocol version, the cluster spec hash, the cluster
//! epoch and the member ids.
//!
//! 1. The dialler sends a [`Hello`]: its id, the id it dialled, its spec hash, epoch and
//!    incarnation, and a fresh 32-byte random nonce. The acceptor checks it (version,
//!    addressed to it, from a neighbour) and answers with its own hello, addressed to the
//!    dialler; the dialler checks that one (version, addressed to it, from the member it
//!    dialled).
//! 2. Each side then sends [`Auth`]: `HMAC-SHA256(secret, "lkcs-net-v1" ‖
//!    own hello ‖ other hello)`, the hellos postcard-encoded. The MAC covers the other side's
//!    fresh nonce (no replay) and both ids in order (no reflection).
//! 3. Each side verifies the other's MAC in constant time, then compares spec hashes and
//!    epochs.
//!
//! A side that finds a problem sends [`Frame::Refuse`] with the reason, closes, and returns a
//! [`HandshakeError`]; the other side gets [`HandshakeError::Refused`]. The symmetric checks
//! (secret, spec, epoch) fail on both sides on their own, so both log the same reason.

use super::frame::{self, Auth, Frame, FrameError, Hello, Refusal, PROTOCOL_VERSION};
use super::Identity;
use crate::id::ProcessId;
use futures_util::{SinkExt, StreamExt};
use hmac::{Hmac, Mac};
use serde::de::DeserializeOwned;
use serde::Serialize;
use sha2::Sha256;
use std::fmt;
use tokio::net::TcpStream;
use tokio_util::codec::{Framed, LengthDelimitedCodec};

/// A framed TCP connection.
pub(crate) type Conn = Framed<TcpStream, LengthDelimitedCodec>;

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
    /// The other side's MAC did not verify: the shared secrets differ.
    AuthFailed {
        /// The id it claimed.
        from: ProcessId,
    },
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
                "authentication of {from} failed: the shared secrets differ"
            ),
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

/// Sends one frame.
pub(crate) async fn send<M: Serialize>(
    conn: &mut Conn,
    frame: &Frame<M>,
) -> Result<(), HandshakeError> {
    let bytes = frame::encode(frame).map_err(HandshakeError::Frame)?;
    conn.send(tokio_util::bytes::Bytes::from(bytes))
        .await
        .map_err(|e| HandshakeError::Io(e.to_string()))
}

/// Receives one frame.
pub(crate) async fn recv<M: DeserializeOwned>(conn: &mut Conn) -> Result<Frame<M>, HandshakeError> {
    match conn.next().await {
        None => Err(HandshakeError::Io("closed".into())),
        Some(Err(e)) if e.kind() == std::io::ErrorKind::InvalidData => Err(HandshakeError::Frame(
            FrameError::Malformed(format!("length prefix: {e}")),
        )),
        Some(Err(e)) => Err(HandshakeError::Io(e.to_string())),
        Some(Ok(bytes)) => frame::decode(&bytes).map_err(HandshakeError::Frame),
    }
}

/// Tells the other side why, then returns the error. The connection is closed gracefully:
/// the write side first, then what the other side still sends is read and dropped (for at
/// most [`LINGER`]), so that the close is not a reset that could reach the other side before
/// the refusal does.
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

fn mac_of(secret: &[u8], first: &Hello, second: &Hello) -> Hmac<Sha256> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(secret)
        .expect("HMAC-SHA256 takes a key of any length");
    mac.update(b"lkcs-net-v1");
    for h in [first, second] {
        // a Hello always encodes (fixed-size fields)
        let bytes = frame::encode(&Frame::<()>::Hello(h.clone())).unwrap_or_default();
        mac.update(&(bytes.len() as u64).to_le_bytes());
        mac.update(&bytes);
    }
    mac
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Runs the handshake on `conn` as `me`. `expect` is the member dialled (`None` when
/// accepting); `is_peer` says whether an id may connect to us.
pub(crate) async fn handshake<M: Serialize + DeserializeOwned>(
    conn: &mut Conn,
    me: &Identity,
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
        nonce: rand::random(),
    };
    // the dialler speaks first; the acceptor answers to whoever it is
    if expect.is_some() {
        send(conn, &Frame::<M>::Hello(mine.clone())).await?;
    }
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
    if theirs.to != me.id {
        let err = HandshakeError::NotAddressed { to: theirs.to };
        return Err(refuse::<M>(conn, Refusal::NotAddressed, err).await);
    }
    if theirs.from == me.id || !is_peer(theirs.from) || expect.is_some_and(|e| e != theirs.from) {
        let err = HandshakeError::NotAPeer { from: theirs.from };
        return Err(refuse::<M>(conn, Refusal::NotAPeer, err).await);
    }
    if expect.is_none() {
        mine.to = theirs.from;
        send(conn, &Frame::<M>::Hello(mine.clone())).await?;
    }
    let from = theirs.from;
    let tag = mac_of(&me.secret, &mine, &theirs).finalize().into_bytes();
    send(conn, &Frame::<M>::Auth(Auth { mac: tag.into() })).await?;
    let auth = match recv::<M>(conn).await? {
        Frame::Auth(a) => a,
        Frame::Refuse(r) => return Err(HandshakeError::Refused(r)),
        _ => {
            let err = HandshakeError::Protocol("expected an auth");
            return Err(refuse::<M>(conn, Refusal::Protocol, err).await);
        }
    };
    if mac_of(&me.secret, &theirs, &mine)
        .verify_slice(&auth.mac)
        .is_err()
    {
        let err = HandshakeError::AuthFailed { from };
        return Err(refuse::<M>(conn, Refusal::AuthFailed, err).await);
    }
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
