use super::*;
use proptest::prelude::*;

#[test]
fn outgoing_trims_by_cumulative_acks() {
    let mut out = Outgoing::default();
    for m in 0..5 {
        out.push(m);
    }
    assert_eq!(out.sent(), 5);
    out.ack(3).unwrap();
    assert_eq!(out.unacked().map(|(s, _)| *s).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(out.from_seq(5).map(|(s, _)| *s).collect::<Vec<_>>(), [5]);
    assert_eq!(out.from_seq(1).map(|(s, _)| *s).collect::<Vec<_>>(), [4, 5]);
    assert_eq!(out.from_seq(6).count(), 0);
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
