//! The frames inside the channel: every frame is a postcard-encoded [`Frame`], sealed by the
//! channel (`net/channel.rs`) and sent as a big-endian `u32` length followed by the sealed
//! bytes. A frame body is at most [`MAX_FRAME_LEN`] bytes (a Noise message less its tag);
//! it is decoded by [`decode`], which never panics and names what was wrong in a
//! [`FrameError`].

use crate::id::ProcessId;
use serde::{Deserialize, Serialize};
use std::fmt;

/// The largest frame body accepted or sent, in bytes: what a Noise message carries besides
/// its authentication tag and the frame's own 4-byte length inside it. The algorithms'
/// messages are tens of bytes (the largest carry a list of process ids); a peer announcing a
/// longer frame is hostile or broken, and its connection is closed.
pub const MAX_FRAME_LEN: usize =
    super::channel::MAX_NOISE_MESSAGE - super::channel::TAG_LEN - super::channel::INNER_LENGTH;

/// The protocol version in [`Hello::version`] (and in the channel's prologue); peers of
/// another version are refused. 6: a view-log frame says whether its sender resumed its
/// member's Raft node from its folder ([`ViewFrame`](super::ViewFrame)). 5: the view log's
/// changes can replace a member's process in place
/// ([`Proposal::Replace`](super::view::Proposal::Replace)). 4: object messages carry the Lamport clock of the fencing
/// tokens, the end-of-run frames name their view, an eviction names the incarnation it
/// evicts (3: the Noise channel and one key pair per member; 2: a shared secret, HMAC
/// challenge-response, frames in the clear).
pub const PROTOCOL_VERSION: u32 = 6;

/// The codec every connection uses: a 4-byte big-endian length, then the Noise handshake's
/// messages and, after them, sealed frames.
pub fn codec() -> super::channel::NoiseCodec {
    super::channel::NoiseCodec::new()
}

/// One frame between two members; `M` is the algorithm's message type.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Frame<M> {
    /// Who the sender is and what cluster it runs: each side sends it once it has
    /// authenticated the other (the dialler inside the handshake's last message, the
    /// acceptor as its first sealed frame).
    Hello(Hello),
    /// The sender refuses the connection and closes it.
    Refuse(Refusal),
    /// The first frame after the handshake: how far the sender has delivered the receiver's
    /// messages (the highest sequence number delivered, 0 for none). The receiver drops what
    /// it buffered up to there and resends the rest.
    Resume {
        /// The highest sequence number delivered from the receiver.
        delivered: u64,
    },
    /// An algorithm message with its per-link sequence number (1, 2, ...).
    Data {
        /// The sequence number.
        seq: u64,
        /// The message.
        msg: M,
    },
    /// Cumulative acknowledgement: every message up to `seq` was delivered.
    Ack {
        /// The highest sequence number delivered.
        seq: u64,
    },
    /// "I am alive", sent on an idle connection.
    Heartbeat,
    /// The operator ([`OPERATOR`](super::OPERATOR)) asks the member's status, on a
    /// connection that serves nothing else.
    StatusRequest,
    /// The member's answer: an encoded [`MemberReport`](super::MemberReport).
    Status(Vec<u8>),
}

/// Who the sender is, whom it wants and what cluster it runs; sent only to a peer whose key
/// the channel authenticated.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// [`PROTOCOL_VERSION`] of the sender.
    pub version: u32,
    /// The sender's member id.
    pub from: ProcessId,
    /// The member id the sender expects to talk to.
    pub to: ProcessId,
    /// The hash of the cluster spec the sender runs.
    pub spec: [u8; 32],
    /// The cluster epoch the sender runs.
    pub epoch: u64,
    /// A random number drawn when the sender's process started: a restarted member (which
    /// lost its state) shows a new one.
    pub incarnation: u64,
}

/// Why a side refused a connection; sent in [`Frame::Refuse`] so both sides can log it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Refusal {
    /// The protocol versions differ.
    Version,
    /// The hello was addressed to another member.
    NotAddressed,
    /// The sender is not a neighbour of the receiver (or not the member dialled).
    NotAPeer,
    /// The key the channel authenticated is not the one the cluster file pins for the id
    /// claimed (or for the member dialled).
    AuthFailed,
    /// The cluster specs differ.
    SpecMismatch,
    /// The cluster epochs differ.
    EpochMismatch,
    /// The member restarted (a new incarnation) and lost its state: it may not rejoin.
    Restarted,
    /// A frame out of place in the handshake.
    Protocol,
    /// The link to this member is live: a second connection does not replace it (no
    /// takeover); the dialler retries once the link's own rules declared it dead.
    Busy,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Refusal::Version => "protocol versions differ",
            Refusal::NotAddressed => "the hello was addressed to another member",
            Refusal::NotAPeer => "not a neighbour (or not the member dialled)",
            Refusal::AuthFailed => "the key is not the one pinned for the member id claimed",
            Refusal::SpecMismatch => "the cluster specs differ",
            Refusal::EpochMismatch => "the cluster epochs differ",
            Refusal::Restarted => "the member restarted and lost its state; it may not rejoin",
            Refusal::Protocol => "a frame out of place in the handshake",
            Refusal::Busy => "the link is live: a second connection is refused (no takeover)",
        })
    }
}

/// What was wrong with a frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// Longer than [`MAX_FRAME_LEN`].
    TooLong(usize),
    /// The bytes do not decode as a frame.
    Malformed(String),
    /// The bytes decode as a frame with bytes left over.
    Trailing(usize),
}

impl fmt::Display for FrameError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FrameError::TooLong(n) => write!(f, "frame of {n} bytes, over {MAX_FRAME_LEN}"),
            FrameError::Malformed(e) => write!(f, "malformed frame: {e}"),
            FrameError::Trailing(n) => write!(f, "malformed frame: {n} bytes after its end"),
        }
    }
}

impl std::error::Error for FrameError {}

/// Encodes a frame body (without the length prefix).
pub fn encode<M: Serialize>(frame: &Frame<M>) -> Result<Vec<u8>, FrameError> {
    let bytes = postcard::to_allocvec(frame).map_err(|e| FrameError::Malformed(e.to_string()))?;
    if bytes.len() > MAX_FRAME_LEN {
        return Err(FrameError::TooLong(bytes.len()));
    }
    Ok(bytes)
}

/// Decodes a frame body (without the length prefix). Any input gives a frame or an error,
/// never a panic; trailing bytes are an error.
pub fn decode<M: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<Frame<M>, FrameError> {
    if bytes.len() > MAX_FRAME_LEN {
        return Err(FrameError::TooLong(bytes.len()));
    }
    match postcard::take_from_bytes(bytes) {
        Ok((frame, [])) => Ok(frame),
        Ok((_, rest)) => Err(FrameError::Trailing(rest.len())),
        Err(e) => Err(FrameError::Malformed(e.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::algo::lkcs::{At, LkcsMsg};
    use crate::algo::maekawa::MaekawaMsg;
    use crate::algo::mutin::MutinMsg;
    use proptest::prelude::*;

    fn pid() -> impl Strategy<Value = ProcessId> {
        any::<u32>().prop_map(ProcessId)
    }

    fn hello() -> impl Strategy<Value = Hello> {
        (
            any::<u32>(),
            pid(),
            pid(),
            any::<[u8; 32]>(),
            any::<u64>(),
            any::<u64>(),
        )
            .prop_map(|(version, from, to, spec, epoch, incarnation)| Hello {
                version,
                from,
                to,
                spec,
                epoch,
                incarnation,
            })
    }

    fn refusal() -> impl Strategy<Value = Refusal> {
        prop_oneof![
            Just(Refusal::Version),
            Just(Refusal::NotAddressed),
            Just(Refusal::NotAPeer),
            Just(Refusal::AuthFailed),
            Just(Refusal::SpecMismatch),
            Just(Refusal::EpochMismatch),
            Just(Refusal::Restarted),
            Just(Refusal::Protocol),
            Just(Refusal::Busy),
        ]
    }

    fn mutin_msg() -> impl Strategy<Value = MutinMsg<MaekawaMsg>> {
        prop_oneof![
            any::<u64>().prop_map(|req| MutinMsg::Query { req }),
            (proptest::collection::vec(pid(), 0..20), any::<u64>())
                .prop_map(|(procs, req)| MutinMsg::Response1 { procs, req }),
            Just(MutinMsg::Acquire),
            Just(MutinMsg::Release),
            any::<u64>().prop_map(|ts| MutinMsg::Mx(MaekawaMsg::Request { ts })),
            Just(MutinMsg::Mx(MaekawaMsg::Relinquish)),
        ]
    }

    fn frame() -> impl Strategy<Value = Frame<MutinMsg<MaekawaMsg>>> {
        prop_oneof![
            hello().prop_map(Frame::Hello),
            refusal().prop_map(Frame::Refuse),
            any::<u64>().prop_map(|delivered| Frame::Resume { delivered }),
            (any::<u64>(), mutin_msg()).prop_map(|(seq, msg)| Frame::Data { seq, msg }),
            any::<u64>().prop_map(|seq| Frame::Ack { seq }),
            Just(Frame::Heartbeat),
        ]
    }

    proptest! {
        // nothing is written to the work tree: a failure prints its case to reproduce
        #![proptest_config(ProptestConfig {
            cases: 2048,
            failure_persistence: None,
            ..ProptestConfig::default()
        })]

        /// Whatever the bytes, decoding returns (no panic), and what decodes round-trips.
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            if let Ok(f) = decode::<MutinMsg<MaekawaMsg>>(&bytes) {
                prop_assert_eq!(decode::<MutinMsg<MaekawaMsg>>(&encode(&f).unwrap()).unwrap(), f);
            }
            if let Ok(f) = decode::<LkcsMsg>(&bytes) {
                prop_assert_eq!(decode::<LkcsMsg>(&encode(&f).unwrap()).unwrap(), f);
            }
        }

        /// Bytes that start like a frame (a valid tag) and go on at random decode without a
        /// panic as well, and what decodes round-trips: the fuzz reaches past the first byte.
        #[test]
        fn tagged_noise_never_panics(
            tag in 0u8..6,
            rest in proptest::collection::vec(any::<u8>(), 0..120),
        ) {
            type Gcs = crate::cs::GcsMsg<crate::algo::mutin::MutinMsg<crate::algo::migrating::MigratingMsg<crate::algo::migrating::DdcTransfer>>, crate::algo::lkcs::LkcsMsg>;
            let mut bytes = vec![tag];
            bytes.extend(rest);
            if let Ok(f) = decode::<MutinMsg<MaekawaMsg>>(&bytes) {
                prop_assert_eq!(decode::<MutinMsg<MaekawaMsg>>(&encode(&f).unwrap()).unwrap(), f);
            }
            if let Ok(f) = decode::<Gcs>(&bytes) {
                prop_assert_eq!(decode::<Gcs>(&encode(&f).unwrap()).unwrap(), f);
            }
        }

        #[test]
        fn frames_round_trip(f in frame()) {
            let bytes = encode(&f).unwrap();
            prop_assert_eq!(decode::<MutinMsg<MaekawaMsg>>(&bytes).unwrap(), f);
        }

        /// A frame cut short never decodes as another frame of the same bytes, and extra
        /// bytes are refused.
        #[test]
        fn truncated_or_extended_frames_are_errors(f in frame(), extra in 1usize..8) {
            let bytes = encode(&f).unwrap();
            if bytes.len() > 1 {
                // the cut bytes decode as the frame did up to its last field, which ends
                // early: whatever that field is (a varint, a byte, a tag), postcard runs out
                let cut = &bytes[..bytes.len() - 1];
                prop_assert_eq!(
                    decode::<MutinMsg<MaekawaMsg>>(cut),
                    Err(FrameError::Malformed(
                        postcard::Error::DeserializeUnexpectedEnd.to_string()
                    ))
                );
            }
            let mut longer = bytes.clone();
            longer.extend(std::iter::repeat_n(0u8, extra));
            prop_assert_eq!(
                decode::<MutinMsg<MaekawaMsg>>(&longer),
                Err(FrameError::Trailing(extra))
            );
        }
    }

    #[test]
    fn oversized_frames_are_refused() {
        let big = vec![0u8; MAX_FRAME_LEN + 1];
        assert_eq!(
            decode::<LkcsMsg>(&big),
            Err(FrameError::TooLong(MAX_FRAME_LEN + 1))
        );
        let huge = Frame::Data {
            seq: 1,
            msg: MutinMsg::<MaekawaMsg>::Response1 {
                procs: vec![ProcessId(u32::MAX); MAX_FRAME_LEN],
                req: 0,
            },
        };
        assert!(matches!(encode(&huge), Err(FrameError::TooLong(_))));
    }

    #[test]
    fn every_algorithm_message_round_trips() {
        let f = Frame::Data {
            seq: 7,
            msg: LkcsMsg::Trigger {
                at: At::Mutex,
                ts: u64::MAX,
            },
        };
        assert_eq!(decode::<LkcsMsg>(&encode(&f).unwrap()).unwrap(), f);
        let g = Frame::Data {
            seq: 1,
            msg: crate::cs::GcsMsg::<
                crate::algo::mutin::MutinMsg<
                    crate::algo::migrating::MigratingMsg<crate::algo::migrating::CdcTransfer>,
                >,
                crate::algo::lmutin::LmutinMsg,
            >::Lmin(crate::algo::mutin::MutinMsg::Mx(
                crate::algo::migrating::MigratingMsg::BecomeController {
                    epoch: 3,
                    info: crate::algo::migrating::CdcTransfer {
                        queue: vec![ProcessId(2), ProcessId(0)],
                        busy: true,
                    },
                },
            )),
        };
        assert_eq!(decode(&encode(&g).unwrap()).unwrap(), g);
    }
}
