//! Process ids and Lamport timestamps.

use std::fmt;

/// The id of a process: its index in the system, `0..n`.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct ProcessId(pub u32);

impl ProcessId {
    /// The id as an index into per-process vectors.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl From<usize> for ProcessId {
    fn from(i: usize) -> Self {
        ProcessId(u32::try_from(i).expect("process index fits in u32"))
    }
}

impl fmt::Display for ProcessId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "P{}", self.0)
    }
}

/// A request timestamp `(ts, id)`: Lamport's clock value with the requester's id as the
/// tie-breaker. The derived order is lexicographic, so a smaller stamp has a higher priority.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub struct Stamp {
    /// The logical clock value.
    pub ts: u64,
    /// The requesting process.
    pub id: ProcessId,
}

impl Stamp {
    /// A stamp from its parts.
    pub fn new(ts: u64, id: ProcessId) -> Self {
        Stamp { ts, id }
    }
}

impl fmt::Display for Stamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "({}, {})", self.ts, self.id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_order_by_clock_then_id() {
        let a = Stamp::new(1, ProcessId(5));
        let b = Stamp::new(2, ProcessId(0));
        let c = Stamp::new(2, ProcessId(1));
        assert!(a < b && b < c);
        assert_eq!(ProcessId::from(3usize).to_string(), "P3");
    }
}
