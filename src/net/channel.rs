//! The channel under every link: the Noise protocol (`Noise_XX_25519_ChaChaPoly_BLAKE2s`,
//! the `snow` crate) over length-delimited TCP frames.
//!
//! Each member has its own static X25519 key pair ([`SecretKey`], [`PublicKey`]); the
//! cluster file pins every member's public key. The XX handshake proves to each side that
//! the other holds the private key of the public key it presents, and derives fresh session
//! keys from both sides' ephemeral keys. After it every frame is sealed with
//! ChaCha20-Poly1305 under a per-direction key and an implicit counter nonce: a frame whose
//! bytes were flipped, one injected, replayed, dropped, reordered or spliced from another
//! session fails to open, and the connection is closed ([`ChannelError`]); the link then
//! resumes on a new connection with nothing lost (the link layer's sequence numbers are
//! inside the channel, unchanged).
//!
//! The prologue binds the protocol version ([`PROLOGUE`]): members of another version fail
//! the handshake instead of misreading each other.

use std::fmt;
use tokio_util::bytes::{Buf, Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder, LengthDelimitedCodec};

/// The Noise protocol the links run.
pub const NOISE_PARAMS: &str = "Noise_XX_25519_ChaChaPoly_BLAKE2s";

/// The Noise prologue: both sides must use the same, so it binds the protocol version.
pub const PROLOGUE: &[u8] = b"lkcs-net/3 Noise_XX_25519_ChaChaPoly_BLAKE2s";

/// The largest Noise message (the Noise specification's limit).
pub const MAX_NOISE_MESSAGE: usize = 65_535;

/// The authentication tag ChaCha20-Poly1305 adds to every frame.
pub const TAG_LEN: usize = 16;

/// A member's public key (X25519, 32 bytes), as the cluster file pins it (64 hex digits).
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PublicKey(pub [u8; 32]);

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicKey({self})")
    }
}

impl fmt::Display for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&hex(&self.0))
    }
}

impl PublicKey {
    /// Parses 64 hex digits.
    pub fn from_hex(text: &str) -> Option<PublicKey> {
        unhex32(text.trim()).map(PublicKey)
    }
}

/// A member's private key (X25519, 32 bytes). Its `Debug` does not show it.
#[derive(Clone, PartialEq, Eq)]
pub struct SecretKey([u8; 32]);

impl fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "SecretKey(<hidden>, public {})", self.public())
    }
}

impl SecretKey {
    /// A fresh random key pair's private half.
    pub fn generate() -> SecretKey {
        SecretKey(rand::random())
    }

    /// The key from its 32 bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> SecretKey {
        SecretKey(bytes)
    }

    /// Parses 64 hex digits.
    pub fn from_hex(text: &str) -> Option<SecretKey> {
        unhex32(text.trim()).map(SecretKey)
    }

    /// The 64 hex digits of the key (what a key file holds).
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// The matching public key.
    pub fn public(&self) -> PublicKey {
        PublicKey(curve25519_dalek::MontgomeryPoint::mul_base_clamped(self.0).to_bytes())
    }

    pub(crate) fn bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex32(text: &str) -> Option<[u8; 32]> {
    let digits = text.as_bytes();
    if digits.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in digits.chunks(2).enumerate() {
        let s = std::str::from_utf8(pair).ok()?;
        out[i] = u8::from_str_radix(s, 16).ok()?;
    }
    Some(out)
}

/// A frame that failed on a live channel: the stream was tampered with (or the peer is
/// broken); the connection is closed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ChannelError {
    /// The frame did not open under the session key and the next nonce: flipped, injected,
    /// replayed, reordered or spliced bytes.
    Unauthentic,
    /// The length prefix announced more than a Noise message can hold (an injected or
    /// flipped length): the framing codec's words.
    TooLong(String),
    /// A frame to send is longer than a Noise message can carry.
    Oversized(usize),
}

impl fmt::Display for ChannelError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChannelError::Unauthentic => f.write_str(
                "a frame failed authentication (tampered, injected, replayed, reordered or spliced)",
            ),
            ChannelError::TooLong(e) => write!(
                f,
                "a frame length over {MAX_NOISE_MESSAGE} bytes ({e}): tampered framing"
            ),
            ChannelError::Oversized(n) => write!(f, "a frame of {n} bytes cannot be sealed"),
        }
    }
}

impl std::error::Error for ChannelError {}

/// The [`ChannelError`] behind an I/O error of a connection, if that is what it is.
pub fn channel_error(e: &std::io::Error) -> Option<&ChannelError> {
    e.get_ref().and_then(|inner| inner.downcast_ref())
}

fn io_error(e: ChannelError) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidData, e)
}

/// The codec of every connection: a 4-byte big-endian length and a body of at most
/// [`MAX_NOISE_MESSAGE`] bytes; once the handshake is done, each body is a sealed frame
/// (encrypted on the way out, opened and checked on the way in).
pub struct NoiseCodec {
    framing: LengthDelimitedCodec,
    transport: Option<Box<snow::TransportState>>,
    scratch: Vec<u8>,
}

impl fmt::Debug for NoiseCodec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NoiseCodec")
            .field("sealed", &self.transport.is_some())
            .finish()
    }
}

impl Default for NoiseCodec {
    fn default() -> Self {
        Self::new()
    }
}

impl NoiseCodec {
    /// A codec for a new connection (the handshake's messages go as they are).
    pub fn new() -> NoiseCodec {
        NoiseCodec {
            framing: LengthDelimitedCodec::builder()
                .length_field_length(4)
                .max_frame_length(MAX_NOISE_MESSAGE)
                .new_codec(),
            transport: None,
            scratch: vec![0u8; MAX_NOISE_MESSAGE],
        }
    }

    /// From now on every frame is sealed with the session's keys.
    pub(crate) fn seal(&mut self, transport: snow::TransportState) {
        self.transport = Some(Box::new(transport));
    }
}

impl Decoder for NoiseCodec {
    type Item = BytesMut;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, std::io::Error> {
        // the length-delimited codec keeps its own state (a header read, a body awaited)
        let body = match self.framing.decode(src) {
            Ok(Some(body)) => body,
            Ok(None) => return Ok(None),
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                return Err(io_error(ChannelError::TooLong(e.to_string())))
            }
            Err(e) => return Err(e),
        };
        let Some(transport) = self.transport.as_mut() else {
            return Ok(Some(body));
        };
        let n = transport
            .read_message(&body, &mut self.scratch)
            .map_err(|_| io_error(ChannelError::Unauthentic))?;
        Ok(Some(BytesMut::from(&self.scratch[..n])))
    }
}

impl Encoder<Bytes> for NoiseCodec {
    type Error = std::io::Error;

    fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        let Some(transport) = self.transport.as_mut() else {
            return self.framing.encode(item, dst);
        };
        if item.len() + TAG_LEN > MAX_NOISE_MESSAGE {
            return Err(io_error(ChannelError::Oversized(item.len())));
        }
        let n = transport
            .write_message(item.chunk(), &mut self.scratch)
            .map_err(|_| io_error(ChannelError::Oversized(item.len())))?;
        self.framing
            .encode(Bytes::copy_from_slice(&self.scratch[..n]), dst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_through_hex_and_pair_up() {
        let sk = SecretKey::generate();
        assert_eq!(SecretKey::from_hex(&sk.to_hex()), Some(sk.clone()));
        let pk = sk.public();
        assert_eq!(PublicKey::from_hex(&pk.to_string()), Some(pk));
        assert!(PublicKey::from_hex("00").is_none());
        assert!(PublicKey::from_hex(&"zz".repeat(32)).is_none());
        // the same public key snow derives (its generated pair)
        let pair = snow::Builder::new(NOISE_PARAMS.parse().unwrap())
            .generate_keypair()
            .unwrap();
        let sk = SecretKey::from_bytes(pair.private.as_slice().try_into().unwrap());
        assert_eq!(sk.public().0.as_slice(), pair.public.as_slice());
        assert!(!format!("{sk:?}").contains(&sk.to_hex()));
    }
}
