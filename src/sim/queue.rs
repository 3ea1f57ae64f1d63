//! The simulator's event queue: items in (time, push order), popped in that order, for a
//! clock that never goes back (every push is at or after the time of the last pop).
//!
//! A binary heap orders every push with O(log n) moves of whole events, and at 10^5
//! processes its cache misses halved the simulator's rate. Here the near future is a ring of
//! [`WINDOW`] FIFO buckets, one per time unit from the current time on: a push at time t
//! within the window appends to bucket t, a pop takes the front of the first non-empty bucket.
//! Within a bucket, push order is time-then-push order, since every item of one bucket has the
//! same time. Pushes further ahead (random delays) wait in a heap ordered by (time, push
//! number) and move to their bucket when its time enters the window, before any later push
//! can reach that bucket: so the order is exactly the heap's (time, push number) order, and a
//! run pops the same events in the same order as it did with one heap.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

/// Time units covered by the buckets (a power of two).
const WINDOW: usize = 64;

/// An item held beyond the window, ordered by (time, push number).
struct Far<T> {
    time: u64,
    number: u64,
    item: T,
}

impl<T> PartialEq for Far<T> {
    fn eq(&self, o: &Self) -> bool {
        (self.time, self.number) == (o.time, o.number)
    }
}
impl<T> Eq for Far<T> {}
impl<T> PartialOrd for Far<T> {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}
impl<T> Ord for Far<T> {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        (self.time, self.number).cmp(&(o.time, o.number))
    }
}

/// Items popped in (time, push order); see the module doc.
pub(crate) struct EventQueue<T> {
    /// `buckets[t % WINDOW]` holds the items at time t, for t in `base..base + WINDOW`.
    buckets: Vec<VecDeque<T>>,
    /// The time of the current bucket (the last pop's time, or earlier).
    base: u64,
    /// Items in the buckets.
    near: usize,
    /// Items at `base + WINDOW` or later.
    far: BinaryHeap<Reverse<Far<T>>>,
    /// Pushes so far (orders the far items).
    pushes: u64,
    /// Emptied buckets' storage, handed to the next bucket that fills: the buckets hold about
    /// as much memory as the items in flight, not `WINDOW` times the most at one time.
    spare: Vec<VecDeque<T>>,
}

impl<T> EventQueue<T> {
    /// An empty queue at time 0.
    pub(crate) fn new() -> Self {
        EventQueue {
            buckets: (0..WINDOW).map(|_| VecDeque::new()).collect(),
            base: 0,
            near: 0,
            far: BinaryHeap::new(),
            pushes: 0,
            spare: Vec::new(),
        }
    }

    /// Whether nothing is queued.
    pub(crate) fn is_empty(&self) -> bool {
        self.near == 0 && self.far.is_empty()
    }

    /// Queues `item` at `time`, after every item already queued at that time.
    ///
    /// # Panics
    /// If `time` is before the last pop's time (the clock never goes back).
    pub(crate) fn push(&mut self, time: u64, item: T) {
        assert!(time >= self.base, "a push at {time} before {}", self.base);
        self.pushes += 1;
        if time - self.base < WINDOW as u64 {
            self.bucket(time).push_back(item);
            self.near += 1;
        } else {
            self.far.push(Reverse(Far {
                time,
                number: self.pushes,
                item,
            }));
        }
    }

    /// The earliest item (by time, then push order) and its time.
    pub(crate) fn pop(&mut self) -> Option<(u64, T)> {
        if self.near == 0 {
            // jump to the first far item's time and let its window in
            let time = self.far.peek()?.0.time;
            self.base = time;
            self.admit();
        }
        loop {
            if let Some(item) = self.buckets[Self::slot(self.base)].pop_front() {
                self.near -= 1;
                return Some((self.base, item));
            }
            // the bucket is empty: its storage goes to the next bucket that fills
            let done = std::mem::take(&mut self.buckets[Self::slot(self.base)]);
            if done.capacity() > 0 {
                self.spare.push(done);
            }
            self.base += 1;
            self.admit();
        }
    }

    /// The item `ahead` places after the next one to pop, when it is at the current time
    /// (a hint for prefetching: `None` says nothing about later times).
    pub(crate) fn peek_now(&self, ahead: usize) -> Option<&T> {
        self.buckets[Self::slot(self.base)].get(ahead)
    }

    fn slot(time: u64) -> usize {
        (time % WINDOW as u64) as usize
    }

    /// The bucket of `time` (in the window), given spare storage if it has none.
    fn bucket(&mut self, time: u64) -> &mut VecDeque<T> {
        let b = &mut self.buckets[Self::slot(time)];
        if b.capacity() == 0
            && let Some(spare) = self.spare.pop()
        {
            *b = spare;
        }
        b
    }

    /// Moves the far items whose time entered the window into their buckets, in order.
    fn admit(&mut self) {
        while let Some(Reverse(f)) = self.far.peek() {
            if f.time - self.base >= WINDOW as u64 {
                break;
            }
            let Some(Reverse(f)) = self.far.pop() else {
                break;
            };
            self.bucket(f.time).push_back(f.item);
            self.near += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    /// Random pushes (near and far, several at one time) interleaved with pops: the queue
    /// pops exactly what a heap ordered by (time, push number) pops.
    #[test]
    fn pops_in_the_order_of_a_heap_by_time_then_push() {
        for seed in 0..20 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut q = EventQueue::new();
            let mut heap = BinaryHeap::new();
            let (mut now, mut number) = (0u64, 0u64);
            for _ in 0..5_000 {
                if rng.random_bool(0.55) {
                    let ahead = match rng.random_range(0..4) {
                        0 => 0,
                        1 => rng.random_range(0..4),
                        2 => rng.random_range(0..(3 * WINDOW as u64)),
                        _ => rng.random_range(0..100_000),
                    };
                    q.push(now + ahead, number);
                    heap.push(Reverse((now + ahead, number)));
                    number += 1;
                } else {
                    let want = heap.pop().map(|Reverse((t, n))| (t, n));
                    assert_eq!(q.pop(), want, "seed {seed}");
                    if let Some((t, _)) = want {
                        now = t;
                    }
                }
                assert_eq!(q.is_empty(), heap.is_empty());
            }
            while let Some(Reverse(want)) = heap.pop() {
                assert_eq!(q.pop(), Some(want));
            }
            assert_eq!(q.pop(), None);
            assert!(q.is_empty());
        }
    }

    #[test]
    #[should_panic(expected = "before")]
    fn a_push_into_the_past_is_refused() {
        let mut q = EventQueue::new();
        q.push(5, ());
        assert_eq!(q.pop(), Some((5, ())));
        q.push(4, ());
    }
}
