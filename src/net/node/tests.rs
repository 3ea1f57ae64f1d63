use super::*;

/// The chained hash over a message's encoding followed by its length, from the encoding.
fn chained(hash: u64, msg: &Wire<Vec<u32>>) -> u64 {
    let bytes = postcard::to_allocvec(msg).expect("encodes");
    let mut h = hash;
    for b in bytes.iter().chain(&(bytes.len() as u64).to_le_bytes()) {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h
}

#[test]
fn a_tally_chains_each_encoding_and_its_length() {
    let msgs = [
        Wire::Cs {
            clock: 0,
            msg: vec![],
        },
        Wire::Cs {
            clock: 7,
            msg: vec![1, 300, u32::MAX],
        },
        Wire::Finished {
            view: 3,
            ids: vec![ProcessId(0), ProcessId(7)],
        },
        Wire::Bye { view: 3 },
        Wire::Cs {
            clock: u64::MAX,
            msg: (0..200).collect(),
        },
    ];
    let mut tally = Tally::default();
    let mut expected = 0xcbf2_9ce4_8422_2325;
    for m in &msgs {
        tally.add(m);
        expected = chained(expected, m);
        assert_eq!(tally.hash, expected);
    }
    assert_eq!(tally.count, msgs.len() as u64);
    // the order matters
    let mut reversed = Tally::default();
    for m in msgs.iter().rev() {
        reversed.add(m);
    }
    assert_ne!(reversed.hash, tally.hash);
}
