//! Process ids, Lamport timestamps, and the state a process publishes with the sequences
//! that change it (public as [`crate::cs::CsState`] and [`crate::cs::Sequence`]): the
//! vocabulary every other module speaks, so that none of them imports upward for it.

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

/// The state a process publishes: in or out of its critical section.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum CsState {
    /// In the critical section.
    InCs,
    /// Out of the critical section (the remainder section).
    OutCs,
}

impl std::ops::Not for CsState {
    type Output = CsState;
    fn not(self) -> CsState {
        match self {
            CsState::InCs => CsState::OutCs,
            CsState::OutCs => CsState::InCs,
        }
    }
}

/// The two sequences a process runs to change its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize)]
pub enum Sequence {
    /// The Entry-Sequence: OutCS to InCS.
    Entry,
    /// The Exit-Sequence: InCS to OutCS.
    Exit,
}

impl Sequence {
    /// The sequence that leaves `state`.
    pub fn leaving(state: CsState) -> Sequence {
        match state {
            CsState::InCs => Sequence::Exit,
            CsState::OutCs => Sequence::Entry,
        }
    }

    /// The other sequence.
    pub fn flip(self) -> Sequence {
        match self {
            Sequence::Entry => Sequence::Exit,
            Sequence::Exit => Sequence::Entry,
        }
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
