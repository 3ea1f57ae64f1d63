//! The search's tables and what they cost: 128-bit state fingerprints and the hashers built
//! on them, the visited set split into shards, and the bytes a vector or hash table holds and
//! may allocate when it next grows.

use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// The bytes a vector of `len` of `cap` `T`s allocates when it grows within `slack` more
/// entries: its new buffer, twice the old (a large buffer is moved by `mremap`, so the old
/// one is not held beside it).
pub(super) fn vec_growth<T>(len: usize, cap: usize, slack: usize) -> usize {
    if len + slack > cap {
        cap.max(slack) * std::mem::size_of::<T>()
    } else {
        0
    }
}

/// The bytes a hash table of `len` of `capacity` entries allocates when it grows within
/// `slack` more entries: its new table, twice the old, held beside the old while the
/// entries move.
pub(super) fn table_growth<T>(len: usize, capacity: usize, slack: usize) -> usize {
    if len + slack > capacity {
        table_bytes::<T>(2 * capacity.max(slack))
    } else {
        0
    }
}

/// Bytes of a hash table holding up to `capacity` entries of type `T` without growing: its
/// buckets (the table keeps at most 7 of every 8 full) with one control byte each.
pub(super) fn table_bytes<T>(capacity: usize) -> usize {
    (capacity * 8 / 7 + 1) * (std::mem::size_of::<T>() + 1)
}

/// A 128-bit state fingerprint: two independent multiply-rotate lanes over the words the
/// derived `Hash` writes, each finished with a 64-bit mixer. (Also the hasher of the step
/// memo, through [`Hasher::finish`].)
#[derive(Default)]
pub(super) struct Fingerprinter {
    a: u64,
    b: u64,
}

impl Fingerprinter {
    #[inline]
    fn word(&mut self, x: u64) {
        self.a = (self.a ^ x)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(31);
        self.b = (self.b.rotate_left(17) ^ x)
            .wrapping_mul(0xD6E8_FEB8_6659_FD93)
            .wrapping_add(0x2545_F491_4F6C_DD1D);
    }

    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    pub(super) fn finish128(&self) -> u128 {
        (u128::from(Self::mix(self.a)) << 64) | u128::from(Self::mix(self.b ^ 0x5851_F42D))
    }
}

impl Hasher for Fingerprinter {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(w) ^ (rest.len() as u64) << 59);
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.word(u64::from(x));
    }
    fn write_u16(&mut self, x: u16) {
        self.word(u64::from(x));
    }
    fn write_u32(&mut self, x: u32) {
        self.word(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.word(x);
    }
    fn write_usize(&mut self, x: usize) {
        self.word(x as u64);
    }
    fn finish(&self) -> u64 {
        Self::mix(self.a)
    }
}

pub(super) fn fingerprint<T: Hash>(t: &T) -> u128 {
    let mut h = Fingerprinter::default();
    t.hash(&mut h);
    h.finish128()
}

/// Keys are fingerprints already: the set uses their low bits as they are.
#[derive(Default)]
pub(super) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u128 keys are hashed")
    }
    fn write_u128(&mut self, x: u128) {
        self.0 = x as u64;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

pub(super) type FpSet = HashSet<u128, BuildHasherDefault<IdHasher>>;

/// Tables the visited set is split into.
const SHARDS: usize = 256;

/// The visited fingerprints, split by their top 8 bits into [`SHARDS`] tables. A table
/// doubles when it is full and holds its old and new buckets while it moves; split, one
/// growth holds one table three times over instead of the whole set, so the peak stays
/// within a few percent of the set's size.
pub(super) struct Visited {
    shards: Vec<FpSet>,
    /// Bytes of the tables, kept up to date.
    bytes: usize,
    /// The largest table's capacity.
    largest: usize,
}

impl Visited {
    pub(super) fn new() -> Self {
        let shards: Vec<FpSet> = (0..SHARDS).map(|_| FpSet::default()).collect();
        Visited {
            bytes: shards
                .iter()
                .map(|t| table_bytes::<u128>(t.capacity()))
                .sum(),
            largest: 0,
            shards,
        }
    }

    fn shard(fp: u128) -> usize {
        (fp >> 120) as usize
    }

    /// Inserts `fp`; `false` if it was there.
    pub(super) fn insert(&mut self, fp: u128) -> bool {
        let t = &mut self.shards[Self::shard(fp)];
        let before = t.capacity();
        let new = t.insert(fp);
        if t.capacity() != before {
            self.bytes =
                self.bytes + table_bytes::<u128>(t.capacity()) - table_bytes::<u128>(before);
            self.largest = self.largest.max(t.capacity());
        }
        new
    }

    /// Bytes of the tables.
    pub(super) fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes the next growth of a table may allocate beside it (its new table): at most
    /// twice the largest table.
    pub(super) fn growth(&self) -> usize {
        table_bytes::<u128>(2 * self.largest.max(16))
    }
}
