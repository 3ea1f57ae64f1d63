//! The messages of LKCS and their permission types, shared by both flavours: the leader
//! rules ([`super::leader`]) and the round trip ([`super::trip`]), each of which ignores the
//! other's messages.

use crate::cs::{CsState, Message, Sequence};
use std::borrow::Cow;

/// The permission types: MUTIN permits being out of the CS (LMUTIN), MUTEX being in (LMUTEX).
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum At {
    /// Permission to exit (be out of) the CS.
    Mutin,
    /// Permission to enter (be in) the CS.
    Mutex,
}

impl At {
    pub(crate) fn index(self) -> usize {
        match self {
            At::Mutin => 0,
            At::Mutex => 1,
        }
    }

    /// The other type.
    pub(crate) fn other(self) -> At {
        match self {
            At::Mutin => At::Mutex,
            At::Mutex => At::Mutin,
        }
    }

    /// The sequence that asks for this type.
    pub fn sequence(self) -> Sequence {
        match self {
            At::Mutin => Sequence::Exit,
            At::Mutex => Sequence::Entry,
        }
    }

    /// The state a process keeps while it waits for this type (the printed rules test it).
    pub(super) fn keeping(self) -> CsState {
        match self {
            At::Mutin => CsState::InCs,
            At::Mutex => CsState::OutCs,
        }
    }

    /// The type a sequence asks for.
    pub fn of(seq: Sequence) -> At {
        match seq {
            Sequence::Exit => At::Mutin,
            Sequence::Entry => At::Mutex,
        }
    }
}

/// The messages of LKCS. The sender is known from the link.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum LkcsMsg {
    /// Asks for a permission of type `at`, stamped `(ts, sender)`.
    Request {
        /// The type.
        at: At,
        /// The requester's clock.
        ts: u64,
    },
    /// Gives a permission.
    Grant {
        /// The type.
        at: At,
    },
    /// The sender's sequence completed: its permission of type `at` is free.
    Release {
        /// The type.
        at: At,
    },
    /// Asks the receiver to return its permission.
    Preempt {
        /// The type.
        at: At,
    },
    /// Returns a permission after a Preempt.
    Relinquish {
        /// The type.
        at: At,
    },
    /// Leader → nominee: switch your sequence of type `at`, stamped `ts`, to the sidetrack.
    Trigger {
        /// The type.
        at: At,
        /// The stamp of the request the leader nominates.
        ts: u64,
    },
    /// Nominee → its closed neighbourhood: grant me a sidetrack permission.
    RequestByTrigger {
        /// The type.
        at: At,
        /// The stamp of the request it replaces: the sidetrack request's priority.
        ts: u64,
    },
    /// The answer to a RequestByTrigger (the printed rules send a plain Grant).
    SidetrackGrant {
        /// The type.
        at: At,
    },
    /// Nominee → leader: the Trigger came too late (the sequence completed); nominate again.
    TriggerDeclined,
    /// Arbiter → requester: your request of type `at` waits here behind holders that will
    /// not give way (deviation 9); set the permissions you hold for it aside.
    Blocked {
        /// The type.
        at: At,
        /// The blocked request is a sidetrack one (a RequestByTrigger).
        sidetrack: bool,
    },
    /// Requester → arbiter: give back the permission I hold for my request of type `at` (if
    /// any) and set the request aside until I unpark it.
    Park {
        /// The type.
        at: At,
    },
    /// Requester → arbiter: my parked request of type `at` competes again.
    Unpark {
        /// The type.
        at: At,
    },
    /// Round trip ([`super::trip`]), requester → its closed neighbourhood: my request of
    /// type `at`, stamped `ts`, is blocked; lend me your trip lock.
    Trip {
        /// The type.
        at: At,
        /// The stamp of the blocked request: the trip's priority.
        ts: u64,
    },
    /// Round trip: arbiter → requester: the trip lock is yours (for the trip stamped `ts`).
    TripLock {
        /// The trip's stamp.
        ts: u64,
    },
    /// Round trip: arbiter → lock holder: an older trip asks for the lock; yield it if you
    /// have not moved.
    TripInquire {
        /// The holder's trip stamp.
        ts: u64,
    },
    /// Round trip: lock holder → arbiter: the lock back (the trip has not moved).
    TripYield {
        /// The trip's stamp.
        ts: u64,
    },
    /// Round trip: requester holding every lock → its closed neighbourhood: grant me a
    /// permission of type `at` now, from the reserve if need be.
    TripGo {
        /// The type.
        at: At,
    },
    /// Round trip: the sequence completed without its trip; forget it.
    TripCancel,
    /// Round trip: the return completed: the trip's permission of type `at` and the lock are
    /// free.
    TripEnd {
        /// The trip's type.
        at: At,
    },
    /// Round trip, requester → its closed neighbourhood: my sequence asking for type `at`
    /// is withdrawn before it moved; drop my request, the permission granted to it and my
    /// trip (lock or place in the lock's queue), then answer [`LkcsMsg::Withdrawn`].
    Withdraw {
        /// The withdrawn sequence's type.
        at: At,
    },
    /// Round trip, arbiter → requester: your request of type `at` is dropped here; no grant
    /// for it follows this message (links are FIFO).
    Withdrawn {
        /// The withdrawn sequence's type.
        at: At,
    },
}

impl Message for LkcsMsg {
    fn kind(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            LkcsMsg::Request { .. } => "Request",
            LkcsMsg::Grant { .. } => "Grant",
            LkcsMsg::Release { .. } => "Release",
            LkcsMsg::Preempt { .. } => "Preempt",
            LkcsMsg::Relinquish { .. } => "Relinquish",
            LkcsMsg::Trigger { .. } => "Trigger",
            LkcsMsg::RequestByTrigger { .. } => "RequestByTrigger",
            LkcsMsg::SidetrackGrant { .. } => "SidetrackGrant",
            LkcsMsg::TriggerDeclined => "TriggerDeclined",
            LkcsMsg::Blocked { .. } => "Blocked",
            LkcsMsg::Park { .. } => "Park",
            LkcsMsg::Unpark { .. } => "Unpark",
            LkcsMsg::Trip { .. } => "Trip",
            LkcsMsg::TripLock { .. } => "TripLock",
            LkcsMsg::TripInquire { .. } => "TripInquire",
            LkcsMsg::TripYield { .. } => "TripYield",
            LkcsMsg::TripGo { .. } => "TripGo",
            LkcsMsg::TripCancel => "TripCancel",
            LkcsMsg::TripEnd { .. } => "TripEnd",
            LkcsMsg::Withdraw { .. } => "Withdraw",
            LkcsMsg::Withdrawn { .. } => "Withdrawn",
        })
    }
}
