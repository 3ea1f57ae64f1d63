//! A sorted set of a few small `Copy` items stored inline: the arbiters' permission sets and
//! LMUTIN's closed neighbourhood and granters.
//!
//! These sets hold a closed neighbourhood at most on local topologies (a handful of items), and
//! every event reads one of them: kept inline, they sit in the process object itself (which
//! the simulator prefetches) instead of behind a pointer to a B-tree node. Past `N` items the
//! set moves to a sorted `Vec` (complete graphs, Maekawa's queues).

use crate::id::{ProcessId, Stamp};
use std::fmt;
use std::hash::{Hash, Hasher};

/// An item of a [`SmallSet`]: a value to fill the unused inline slots with.
pub(crate) trait Item: Copy + Ord {
    /// Any value (never read as an element).
    const FILL: Self;
}

impl Item for ProcessId {
    const FILL: Self = ProcessId(0);
}

impl Item for Stamp {
    const FILL: Self = Stamp {
        ts: 0,
        id: ProcessId(0),
    };
}

/// A set of items in ascending order: inline up to `N` items (`N` ≤ 255), a sorted `Vec`
/// past that (and from then on). Equality and hashing are those of the sorted sequence (the same hash as a
/// `BTreeSet` of the items); `Debug` prints it as a set.
#[derive(Clone)]
pub(crate) enum SmallSet<T, const N: usize> {
    Inline { len: u8, items: [T; N] },
    Heap(Vec<T>),
}

impl<T: Item, const N: usize> SmallSet<T, N> {
    /// The empty set.
    pub(crate) const fn new() -> Self {
        const { assert!(N <= u8::MAX as usize, "the inline length is a u8") };
        SmallSet::Inline {
            len: 0,
            items: [T::FILL; N],
        }
    }

    /// The items, ascending.
    #[inline]
    pub(crate) fn as_slice(&self) -> &[T] {
        match self {
            SmallSet::Inline { len, items } => &items[..usize::from(*len)],
            SmallSet::Heap(v) => v,
        }
    }

    /// The number of items.
    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.as_slice().len()
    }

    /// Whether the set is empty.
    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `x` is in the set.
    #[inline]
    pub(crate) fn contains(&self, x: &T) -> bool {
        self.as_slice().binary_search(x).is_ok()
    }

    /// The smallest item.
    #[inline]
    pub(crate) fn first(&self) -> Option<&T> {
        self.as_slice().first()
    }

    /// The largest item.
    #[inline]
    pub(crate) fn last(&self) -> Option<&T> {
        self.as_slice().last()
    }

    /// Adds `x`; returns whether it was new.
    pub(crate) fn insert(&mut self, x: T) -> bool {
        match self.as_slice().binary_search(&x) {
            Ok(_) => false,
            Err(at) => {
                self.insert_at(at, x);
                true
            }
        }
    }

    /// Removes `x`; returns whether it was there.
    pub(crate) fn remove(&mut self, x: &T) -> bool {
        match self.as_slice().binary_search(x) {
            Ok(at) => {
                self.remove_at(at);
                true
            }
            Err(_) => false,
        }
    }

    /// Removes and returns the smallest item.
    pub(crate) fn pop_first(&mut self) -> Option<T> {
        let x = *self.first()?;
        self.remove_at(0);
        Some(x)
    }

    /// Keeps the items for which `keep` holds.
    pub(crate) fn retain(&mut self, mut keep: impl FnMut(&T) -> bool) {
        match self {
            SmallSet::Inline { len, items } => {
                let mut kept = 0;
                for i in 0..usize::from(*len) {
                    if keep(&items[i]) {
                        items[kept] = items[i];
                        kept += 1;
                    }
                }
                *len = u8::try_from(kept).expect("inline length fits in u8");
            }
            SmallSet::Heap(v) => v.retain(|x| keep(x)),
        }
    }

    /// Removes every item (a set on the heap keeps its allocation).
    pub(crate) fn clear(&mut self) {
        match self {
            SmallSet::Inline { len, .. } => *len = 0,
            SmallSet::Heap(v) => v.clear(),
        }
    }

    fn insert_at(&mut self, at: usize, x: T) {
        match self {
            SmallSet::Inline { len, items } if usize::from(*len) < N => {
                let n = usize::from(*len);
                items.copy_within(at..n, at + 1);
                items[at] = x;
                *len += 1;
            }
            SmallSet::Inline { len, items } => {
                let mut v = Vec::with_capacity(2 * N + 2);
                v.extend_from_slice(&items[..usize::from(*len)]);
                v.insert(at, x);
                *self = SmallSet::Heap(v);
            }
            SmallSet::Heap(v) => v.insert(at, x),
        }
    }

    fn remove_at(&mut self, at: usize) {
        match self {
            SmallSet::Inline { len, items } => {
                let n = usize::from(*len);
                items.copy_within(at + 1..n, at);
                *len -= 1;
            }
            SmallSet::Heap(v) => {
                v.remove(at);
            }
        }
    }
}

impl<T: Item, const N: usize> Default for SmallSet<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Item, const N: usize> FromIterator<T> for SmallSet<T, N> {
    fn from_iter<I: IntoIterator<Item = T>>(iter: I) -> Self {
        let mut v: Vec<T> = iter.into_iter().collect();
        v.sort_unstable();
        v.dedup();
        if v.len() <= N {
            let mut s = Self::new();
            if let SmallSet::Inline { len, items } = &mut s {
                items[..v.len()].copy_from_slice(&v);
                *len = u8::try_from(v.len()).expect("inline length fits in u8");
            }
            s
        } else {
            SmallSet::Heap(v)
        }
    }
}

impl<T: Item, const N: usize> PartialEq for SmallSet<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Item, const N: usize> Eq for SmallSet<T, N> {}

impl<T: Item + Hash, const N: usize> Hash for SmallSet<T, N> {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.as_slice().hash(state);
    }
}

impl<T: Item + fmt::Debug, const N: usize> fmt::Debug for SmallSet<T, N> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_set().entries(self.as_slice()).finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::hash_map::DefaultHasher;
    use std::collections::BTreeSet;

    fn hash_of(x: &impl Hash) -> u64 {
        let mut h = DefaultHasher::new();
        x.hash(&mut h);
        h.finish()
    }

    /// Every operation, inline and past the inline capacity, agrees with a `BTreeSet`: the
    /// items, the answers, the hash and the `Debug` text.
    #[test]
    fn behaves_as_a_btree_set_inline_and_on_the_heap() {
        let mut s: SmallSet<ProcessId, 3> = SmallSet::new();
        let mut b: BTreeSet<ProcessId> = BTreeSet::new();
        let ops = [5u32, 1, 9, 1, 3, 7, 2, 9, 4, 0, 8, 6];
        for (i, &x) in ops.iter().enumerate() {
            let p = ProcessId(x);
            if i % 3 == 2 {
                assert_eq!(s.remove(&p), b.remove(&p), "remove {x}");
            } else {
                assert_eq!(s.insert(p), b.insert(p), "insert {x}");
            }
            assert!(s.as_slice().iter().eq(b.iter()));
            assert_eq!(s.first(), b.first());
            assert_eq!(s.last(), b.last());
            assert_eq!(s.contains(&p), b.contains(&p));
            assert_eq!(hash_of(&s), hash_of(&b));
            assert_eq!(format!("{s:?}"), format!("{b:?}"));
        }
        assert!(matches!(s, SmallSet::Heap(_)), "past 3 items it moved");
        s.retain(|p| p.0.is_multiple_of(2));
        b.retain(|p| p.0.is_multiple_of(2));
        assert!(s.as_slice().iter().eq(b.iter()));
        assert_eq!(s.pop_first(), b.pop_first());
        assert!(s.as_slice().iter().eq(b.iter()));
        s.clear();
        assert!(s.is_empty() && s.pop_first().is_none());
    }

    #[test]
    fn inline_retain_pop_and_collect() {
        let st = |ts, id| Stamp::new(ts, ProcessId(id));
        let mut s: SmallSet<Stamp, 4> = [st(3, 1), st(1, 2), st(3, 1), st(2, 0)]
            .into_iter()
            .collect();
        assert!(matches!(s, SmallSet::Inline { len: 3, .. }));
        assert_eq!(s.as_slice(), &[st(1, 2), st(2, 0), st(3, 1)]);
        s.retain(|x| x.ts != 2);
        assert_eq!(s.as_slice(), &[st(1, 2), st(3, 1)]);
        assert_eq!(s.pop_first(), Some(st(1, 2)));
        assert_eq!(s.len(), 1);
        let big: SmallSet<Stamp, 2> = (0..5).map(|i| st(i, 0)).collect();
        assert!(matches!(big, SmallSet::Heap(_)) && big.len() == 5);
        assert_eq!(big, (0..5).rev().map(|i| st(i, 0)).collect());
    }
}
