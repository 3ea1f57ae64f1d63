//! FNV-1a, 64 bits: the crate's one hash whose output is fixed by its definition (std's
//! default hasher may change between releases). The simulator's trace hash and a node's
//! per-link message tallies use it, so their values stay comparable across versions.

use std::hash::Hasher;

/// FNV-1a's 64-bit offset basis.
const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
/// FNV-1a's 64-bit prime.
const PRIME: u64 = 0x0100_0000_01b3;

/// An FNV-1a state: a [`Hasher`], and an `Extend<u8>` sink a serializer can stream into.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Fnv(u64);

impl Fnv {
    /// Continues from a hash computed earlier (`Fnv::default().finish()` is the empty input's).
    #[cfg_attr(not(feature = "net"), allow(dead_code))] // the node's tallies
    pub(crate) fn resume(hash: u64) -> Fnv {
        Fnv(hash)
    }
}

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(OFFSET)
    }
}

impl Hasher for Fnv {
    fn write(&mut self, bytes: &[u8]) {
        self.extend(bytes.iter().copied());
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

impl Extend<u8> for Fnv {
    fn extend<I: IntoIterator<Item = u8>>(&mut self, bytes: I) {
        for b in bytes {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(PRIME);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The published FNV-1a 64 test vectors: the hash is the definition's, not an
    /// implementation's.
    #[test]
    fn matches_the_published_vectors() {
        let hash = |s: &[u8]| {
            let mut h = Fnv::default();
            h.write(s);
            h.finish()
        };
        assert_eq!(hash(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(hash(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(hash(b"foobar"), 0x8594_4171_f739_67e8);
        let mut streamed = Fnv::resume(hash(b"foo"));
        streamed.extend(*b"bar");
        assert_eq!(streamed.finish(), hash(b"foobar"), "resumed and streamed");
    }
}
