use super::*;
use crate::net::frame::Frame;
use crate::net::handshake::{self, HandshakeError, Trust};
use crate::net::io::BoxStream;
use crate::net::{Identity, LogEvent, Logger};
use proptest::prelude::*;
use sequence::{AckBeyondSent, Arrival};
use tokio_util::codec::Framed;

#[test]
fn outgoing_trims_by_cumulative_acks() {
    let mut out = Outgoing::default();
    for m in 0..5 {
        out.push(m);
    }
    assert_eq!(out.sent(), 5);
    out.ack(3).unwrap();
    assert_eq!(out.unacked().map(|(s, _)| *s).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(out.kept_from(5).map(|(s, _)| *s).collect::<Vec<_>>(), [5]);
    assert_eq!(
        out.kept_from(1).map(|(s, _)| *s).collect::<Vec<_>>(),
        [4, 5]
    );
    assert_eq!(out.kept_from(6).count(), 0);
    out.ack(2).unwrap(); // stale: nothing changes
    assert_eq!(out.len(), 2);
    assert_eq!(out.ack(6), Err(AckBeyondSent { acked: 6, sent: 5 }));
    assert_eq!(out.len(), 2);
    out.ack(5).unwrap();
    assert!(out.is_empty());
}

#[test]
fn incoming_delivers_the_next_only() {
    let mut inc = Incoming::default();
    assert_eq!(inc.arrive(2), Arrival::Gap { expected: 1 });
    assert_eq!(inc.arrive(1), Arrival::Deliver);
    assert_eq!(inc.arrive(1), Arrival::Duplicate);
    assert_eq!(inc.arrive(0), Arrival::Duplicate);
    assert_eq!(inc.arrive(2), Arrival::Deliver);
    assert_eq!(inc.delivered(), 2);
}

proptest! {
    // nothing is written to the work tree: a failure prints its case to reproduce
    #![proptest_config(ProptestConfig {
        failure_persistence: None,
        ..ProptestConfig::default()
    })]
    /// A sender and a receiver over connections that each carry a prefix of the unacked
    /// tail (then drop), with resume between: every message is delivered once, in order.
    #[test]
    fn resume_delivers_exactly_once_in_order(
        plan in proptest::collection::vec((0usize..6, 0usize..8, any::<bool>()), 1..30),
    ) {
        let mut out = Outgoing::default();
        let mut inc = Incoming::default();
        let mut delivered = Vec::new();
        let mut next_msg = 0u32;
        for (new, carried, acked) in plan {
            for _ in 0..new {
                out.push(next_msg);
                next_msg += 1;
            }
            // a connection: resume, resend the tail, some of it gets through
            out.ack(inc.delivered()).unwrap();
            let tail: Vec<(u64, u32)> = out.unacked().cloned().collect();
            for (seq, m) in tail.into_iter().take(carried) {
                match inc.arrive(seq) {
                    Arrival::Deliver => delivered.push(m),
                    Arrival::Duplicate => {}
                    Arrival::Gap { .. } => prop_assert!(false, "gap on one connection"),
                }
            }
            if acked {
                out.ack(inc.delivered()).unwrap();
            }
        }
        out.ack(inc.delivered()).unwrap();
        for (seq, m) in out.unacked().cloned().collect::<Vec<_>>() {
            prop_assert_eq!(inc.arrive(seq), Arrival::Deliver);
            delivered.push(m);
        }
        prop_assert_eq!(delivered, (0..next_msg).collect::<Vec<_>>());
    }
}

/// The operator's key may ask the status and nothing else. On a connection authenticated as
/// the operator, a status request is answered; a member's frame (a heartbeat) is refused:
/// the connection closes with no answer, and the node logs the refusal naming the operator.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_operator_connection_may_only_ask_the_status() {
    use crate::net::{spec_hash, OnRestart, SecretKey, OPERATOR};
    let key = |i: u8| {
        // not in the first byte: X25519 clamps its low bits
        let mut bytes = [0x5a; 32];
        bytes[8] = i;
        SecretKey::from_bytes(bytes)
    };
    let (member, operator) = (key(1), key(200));
    let trust: Trust = [
        (ProcessId(0), key(0).public()),
        (ProcessId(1), member.public()),
        (OPERATOR, operator.public()),
    ]
    .into_iter()
    .collect();
    let spec = spec_hash("the operator test");
    let refusals: Arc<Mutex<Vec<LogEvent>>> = Arc::default();
    let seen = refusals.clone();
    let log: Logger = Arc::new(move |_, e: &LogEvent| {
        if matches!(e, LogEvent::Refused { .. }) {
            seen.lock().unwrap().push(e.clone());
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let unused: MemberAddress = std::net::SocketAddr::from(([127, 0, 0, 1], 9)).into();
    let config = NetConfig {
        identity: Identity::new(ProcessId(1), member, spec, 1),
        peers: [(ProcessId(0), unused)].into_iter().collect(),
        keys: trust.clone(),
        timing: Timing::default(),
        log,
        on_restart: OnRestart::Refuse,
    };
    let net: Net<u64> = Net::start(config, listener).unwrap();
    net.serve_status(Arc::new(|| b"the status".to_vec()));
    let as_operator = Identity::new(OPERATOR, operator, spec, 1);
    let connect = || async {
        let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let stream: BoxStream = Box::new(stream);
        let mut conn = Framed::new(stream, super::super::frame::codec());
        handshake::handshake::<u64>(&mut conn, &as_operator, &trust, Some(ProcessId(1)), |_| {
            false
        })
        .await
        .expect("the operator's handshake");
        conn
    };
    let guard = std::time::Duration::from_secs(60);
    let run = async {
        // the status is answered
        let mut conn = connect().await;
        handshake::send(&mut conn, &Frame::<u64>::StatusRequest)
            .await
            .unwrap();
        let answer = handshake::recv::<u64>(&mut conn).await.unwrap();
        assert_eq!(answer, Frame::Status(b"the status".to_vec()));
        // a member's frame is not
        let mut conn = connect().await;
        handshake::send(&mut conn, &Frame::<u64>::Heartbeat)
            .await
            .unwrap();
        let answer = handshake::recv::<u64>(&mut conn).await;
        // the member closes the connection without a word (its reason is in its log, below)
        assert!(
            matches!(answer, Err(HandshakeError::Io(_))),
            "a heartbeat from the operator got {answer:?}"
        );
        loop {
            let refused = refusals.lock().unwrap().iter().any(|e| {
                matches!(e, LogEvent::Refused {
                    peer: Some(p),
                    error: HandshakeError::Protocol(what),
                    ..
                } if *p == OPERATOR && what.contains("only ask the status"))
            });
            if refused {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(guard, run).await.expect("hang guard");
}
