//! The channel under every link: the Noise protocol (`Noise_XX_25519_ChaChaPoly_BLAKE2s`,
//! the `snow` crate) over length-delimited TCP frames.
//!
//! Each member has its own static X25519 key pair ([`SecretKey`], [`PublicKey`]); the
//! cluster file pins every member's public key. The XX handshake proves to each side that
//! the other holds the private key of the public key it presents, and derives fresh session
//! keys from both sides' ephemeral keys. After it every frame is sealed with
//! ChaCha20-Poly1305 under a per-direction key and an implicit counter nonce, and so is its
//! length: a Noise message on the wire is a sealed 2-byte length ([`SEALED_LENGTH`] bytes),
//! then the sealed body, as BOLT 8 frames Noise over TCP. A body carries every frame of one
//! write (a batch of up to 64, each behind its 4-byte length, [`INNER_LENGTH`]), split over
//! as many messages as it takes, so the fixed cost of a seal is paid per write, not per
//! frame. A frame whose bytes were flipped (its
//! length included), one injected, replayed, dropped, reordered or spliced from another
//! session fails to open as soon as its first 18 bytes are in, and the connection is closed
//! ([`ChannelError`]); the link then resumes on a new connection with nothing lost (the link
//! layer's sequence numbers are inside the channel, unchanged). A length in clear would let a
//! flipped bit announce a longer frame, which the receiver would wait for until the peer
//! timeout.
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
pub(super) const MAX_NOISE_MESSAGE: usize = 65_535;

/// The authentication tag ChaCha20-Poly1305 adds to every frame.
pub(super) const TAG_LEN: usize = 16;

/// A sealed frame length on the wire: 2 bytes and their tag.
pub(super) const SEALED_LENGTH: usize = 2 + TAG_LEN;

/// Inside a sealed body, each frame's length (4 bytes, big-endian) before it.
pub(super) const INNER_LENGTH: usize = 4;

/// The most plaintext one Noise message carries.
const MAX_PLAIN: usize = MAX_NOISE_MESSAGE - TAG_LEN;

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
    /// A body that opened holds a frame length past its end: the peer holds its key but does
    /// not frame as this version does.
    Malformed,
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
            ChannelError::Malformed => {
                f.write_str("a sealed message holds a frame length past its end")
            }
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

/// The codec of every connection. During the handshake: a 4-byte big-endian length and a
/// body of at most [`MAX_NOISE_MESSAGE`] bytes. Once the handshake is done: a sealed 2-byte
/// length ([`SEALED_LENGTH`] bytes), then the sealed body of that length (encrypted on the
/// way out, opened and checked on the way in).
pub struct NoiseCodec {
    framing: LengthDelimitedCodec,
    transport: Option<Box<snow::TransportState>>,
    /// The length of the sealed body awaited, once its sealed length has opened.
    body: Option<usize>,
    /// Frames opened and not yet handed out (each behind its inner length).
    opened: BytesMut,
    /// Frames of the message being filled, each behind its inner length.
    filling: Vec<u8>,
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
            body: None,
            opened: BytesMut::new(),
            filling: Vec::new(),
            scratch: vec![0u8; MAX_NOISE_MESSAGE],
        }
    }

    /// From now on every frame is sealed with the session's keys.
    pub(crate) fn seal(&mut self, transport: snow::TransportState) {
        self.transport = Some(Box::new(transport));
    }
}

impl NoiseCodec {
    /// The next frame of what was opened, if a whole one is there (a body holds whole frames
    /// only).
    fn next_opened(&mut self) -> Result<Option<BytesMut>, std::io::Error> {
        if self.opened.is_empty() {
            return Ok(None);
        }
        if self.opened.len() < INNER_LENGTH {
            return Err(io_error(ChannelError::Malformed));
        }
        let mut len = [0u8; INNER_LENGTH];
        len.copy_from_slice(&self.opened[..INNER_LENGTH]);
        let len = u32::from_be_bytes(len) as usize;
        if self.opened.len() - INNER_LENGTH < len {
            return Err(io_error(ChannelError::Malformed));
        }
        self.opened.advance(INNER_LENGTH);
        Ok(Some(self.opened.split_to(len)))
    }

    /// Seals what `filling` holds as one Noise message (its sealed length, then its sealed
    /// body) onto `dst`.
    fn seal_filled(&mut self, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        let Some(transport) = self.transport.as_mut() else {
            return Ok(());
        };
        if self.filling.is_empty() {
            return Ok(());
        }
        let sealed_len = self.filling.len() + TAG_LEN;
        let announced = u16::try_from(sealed_len)
            .map_err(|_| io_error(ChannelError::Oversized(self.filling.len())))?;
        let mut length = [0u8; SEALED_LENGTH];
        transport
            .write_message(&announced.to_be_bytes(), &mut length)
            .map_err(|_| io_error(ChannelError::Oversized(self.filling.len())))?;
        let n = transport
            .write_message(&self.filling, &mut self.scratch)
            .map_err(|_| io_error(ChannelError::Oversized(self.filling.len())))?;
        self.filling.clear();
        dst.reserve(SEALED_LENGTH + n);
        dst.extend_from_slice(&length);
        dst.extend_from_slice(&self.scratch[..n]);
        Ok(())
    }
}

impl Decoder for NoiseCodec {
    type Item = BytesMut;
    type Error = std::io::Error;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<BytesMut>, std::io::Error> {
        if self.transport.is_none() {
            // the handshake: the length-delimited codec keeps its own state
            return match self.framing.decode(src) {
                Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                    Err(io_error(ChannelError::TooLong(e.to_string())))
                }
                other => other,
            };
        }
        loop {
            if let Some(frame) = self.next_opened()? {
                return Ok(Some(frame));
            }
            let Some(transport) = self.transport.as_mut() else {
                return Ok(None);
            };
            let len = match self.body {
                Some(len) => len,
                None => {
                    if src.len() < SEALED_LENGTH {
                        src.reserve(SEALED_LENGTH - src.len());
                        return Ok(None);
                    }
                    let sealed = src.split_to(SEALED_LENGTH);
                    let n = transport
                        .read_message(&sealed, &mut self.scratch)
                        .map_err(|_| io_error(ChannelError::Unauthentic))?;
                    let len = match self.scratch[..n] {
                        [hi, lo] => usize::from(u16::from_be_bytes([hi, lo])),
                        _ => return Err(io_error(ChannelError::Unauthentic)),
                    };
                    // a length that opened was sealed by the peer: a sealed body has its tag
                    if len < TAG_LEN {
                        return Err(io_error(ChannelError::Unauthentic));
                    }
                    self.body = Some(len);
                    len
                }
            };
            if src.len() < len {
                src.reserve(len - src.len());
                return Ok(None);
            }
            self.body = None;
            let sealed = src.split_to(len);
            let n = transport
                .read_message(&sealed, &mut self.scratch)
                .map_err(|_| io_error(ChannelError::Unauthentic))?;
            self.opened.extend_from_slice(&self.scratch[..n]);
        }
    }
}

impl Encoder<Vec<Bytes>> for NoiseCodec {
    type Error = std::io::Error;

    /// Seals a batch of frames: as few Noise messages as hold them, in order.
    fn encode(&mut self, batch: Vec<Bytes>, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        if self.transport.is_none() {
            for frame in batch {
                self.framing.encode(frame, dst)?;
            }
            return Ok(());
        }
        for frame in batch {
            if frame.len() + INNER_LENGTH > MAX_PLAIN {
                return Err(io_error(ChannelError::Oversized(frame.len())));
            }
            if self.filling.len() + INNER_LENGTH + frame.len() > MAX_PLAIN {
                self.seal_filled(dst)?;
            }
            self.filling
                .extend_from_slice(&(frame.len() as u32).to_be_bytes());
            self.filling.extend_from_slice(&frame);
        }
        self.seal_filled(dst)
    }
}

impl Encoder<Bytes> for NoiseCodec {
    type Error = std::io::Error;

    fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> Result<(), std::io::Error> {
        match self.transport {
            None => self.framing.encode(item, dst),
            Some(_) => self.encode(vec![item], dst),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two codecs sealed with the two ends of one session (an XX handshake in memory).
    fn sealed_pair() -> (NoiseCodec, NoiseCodec) {
        let params: snow::params::NoiseParams = NOISE_PARAMS.parse().unwrap();
        let key = || {
            snow::Builder::new(NOISE_PARAMS.parse().unwrap())
                .generate_keypair()
                .unwrap()
        };
        let (ka, kb) = (key(), key());
        let mut a = snow::Builder::new(params.clone())
            .local_private_key(&ka.private)
            .and_then(|b| b.prologue(PROLOGUE))
            .and_then(|b| b.build_initiator())
            .unwrap();
        let mut b = snow::Builder::new(params)
            .local_private_key(&kb.private)
            .and_then(|b| b.prologue(PROLOGUE))
            .and_then(|b| b.build_responder())
            .unwrap();
        let (mut wire, mut plain) = (vec![0u8; 1024], vec![0u8; 1024]);
        for step in 0..3 {
            let (from, to) = match step {
                1 => (&mut b, &mut a),
                _ => (&mut a, &mut b),
            };
            let n = from.write_message(&[], &mut wire).unwrap();
            to.read_message(&wire[..n], &mut plain).unwrap();
        }
        let (mut ca, mut cb) = (NoiseCodec::new(), NoiseCodec::new());
        ca.seal(a.into_transport_mode().unwrap());
        cb.seal(b.into_transport_mode().unwrap());
        (ca, cb)
    }

    fn wire(codec: &mut NoiseCodec, frames: &[&[u8]]) -> BytesMut {
        let mut out = BytesMut::new();
        for f in frames {
            codec.encode(Bytes::copy_from_slice(f), &mut out).unwrap();
        }
        out
    }

    fn unauthentic(r: Result<Option<BytesMut>, std::io::Error>) -> bool {
        matches!(r, Err(ref e) if channel_error(e) == Some(&ChannelError::Unauthentic))
    }

    #[test]
    fn sealed_frames_arrive_whole_and_in_order_byte_by_byte() {
        let (mut a, mut b) = sealed_pair();
        let frames: [&[u8]; 3] = [b"first", b"", &[7u8; 3000]];
        let bytes = wire(&mut a, &frames);
        assert_eq!(
            bytes.len(),
            3 * (SEALED_LENGTH + TAG_LEN + INNER_LENGTH) + 5 + 3000
        );
        let mut src = BytesMut::new();
        let mut got = Vec::new();
        for byte in bytes {
            src.extend_from_slice(&[byte]);
            while let Some(f) = b.decode(&mut src).unwrap() {
                got.push(f.to_vec());
            }
        }
        let want: Vec<Vec<u8>> = frames.iter().map(|f| f.to_vec()).collect();
        assert_eq!(got, want);
    }

    #[test]
    fn a_batch_is_sealed_as_few_messages_and_opens_frame_by_frame() {
        let (mut a, mut b) = sealed_pair();
        let small: Vec<Bytes> = (0..64u8).map(|i| Bytes::from(vec![i; 20])).collect();
        let mut bytes = BytesMut::new();
        a.encode(small.clone(), &mut bytes).unwrap();
        // one message: one sealed length, one tag
        assert_eq!(
            bytes.len(),
            SEALED_LENGTH + TAG_LEN + 64 * (INNER_LENGTH + 20)
        );
        // frames too many for one message go over several, in order
        let big: Vec<Bytes> = (0..5u8).map(|i| Bytes::from(vec![i; 30_000])).collect();
        a.encode(big.clone(), &mut bytes).unwrap();
        let mut got = Vec::new();
        while let Some(f) = b.decode(&mut bytes).unwrap() {
            got.push(f.freeze());
        }
        let want: Vec<Bytes> = small.into_iter().chain(big).collect();
        assert_eq!(got, want);
        assert!(bytes.is_empty());
        let too_big = Bytes::from(vec![0u8; MAX_PLAIN]);
        let err = a.encode(vec![too_big], &mut BytesMut::new()).unwrap_err();
        assert_eq!(
            channel_error(&err),
            Some(&ChannelError::Oversized(MAX_PLAIN))
        );
    }

    #[test]
    fn a_flipped_length_fails_on_its_own_bytes_without_waiting_for_a_body() {
        let (mut a, mut b) = sealed_pair();
        for bit in 0..8 {
            let (mut a2, mut b2) = sealed_pair();
            let mut bytes = wire(&mut a2, &[b"a frame"]);
            bytes[1] ^= 1 << bit;
            // only the sealed length: a length in clear would wait here for more bytes
            let mut src = BytesMut::from(&bytes[..SEALED_LENGTH]);
            assert!(unauthentic(b2.decode(&mut src)), "bit {bit}");
        }
        // the untouched pair still works
        let mut src = wire(&mut a, &[b"ok"]);
        assert_eq!(b.decode(&mut src).unwrap().unwrap().as_ref(), b"ok");
    }

    #[test]
    fn a_flipped_body_an_injected_byte_and_a_replayed_frame_fail() {
        let (mut a, mut b) = sealed_pair();
        let mut flipped = wire(&mut a, &[b"body"]);
        let last = flipped.len() - 1;
        flipped[last] ^= 0x80;
        assert!(unauthentic(b.decode(&mut flipped)));

        let (mut a, mut b) = sealed_pair();
        let injected = wire(&mut a, &[b"body"]);
        let mut src = BytesMut::from(&[0x42][..]);
        src.extend_from_slice(&injected);
        assert!(unauthentic(b.decode(&mut src)));

        let (mut a, mut b) = sealed_pair();
        let once = wire(&mut a, &[b"pay"]);
        let mut src = once.clone();
        assert_eq!(b.decode(&mut src).unwrap().unwrap().as_ref(), b"pay");
        let mut replay = once;
        assert!(unauthentic(b.decode(&mut replay)), "the nonce moved on");
    }

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
