//! LKCS: the generalized local (l_i, k_i)-critical section (Kamei & Kakugawa 2017, §5,
//! Algorithms 3–7), in two flavours: the paper's leader rules ([`leader`]) and the round trip
//! that runs by default ([`trip`]).
//!
//! **Problem.** On a graph, every process P_i keeps between l_i and k_i processes of its
//! closed neighbourhood N_i ∪ {P_i} in the CS, with 0 ≤ l_i < k_i ≤ |N_i|+1.
//!
//! **Idea.** LKCS composes l_i-LMUTIN and k_i-LMUTEX on one process: Exit = the LMUTIN exit
//! (permissions of type MUTIN, "you may be out") then the LMUTEX exit (release the MUTEX
//! permissions); Entry = the LMUTEX entry (permissions of type MUTEX, "you may be in") then the
//! LMUTIN entry (release the MUTIN permissions). Each process arbitrates both types for its
//! closed neighbourhood, with capacity |N_i|+1−L_i for MUTIN and K_i for MUTEX, where
//! (L_i, K_i) are the operating bounds: the problem's, tightened by one where a move may have
//! to break them. Alone, the composition can deadlock: an exit waits for an entry that waits
//! for an exit. Each flavour breaks such waits its own way.
//!
//! **The leader rules** ([`leader::LeaderProc`], [`LkcsRules::CORRECTED`] and
//! [`LkcsRules::PRINTED`]): the paper's **sidetrack**. A leader watches its arbiters and, when
//! its whole neighbourhood seems blocked, nominates a *trigger* whose request is then granted
//! from one permission reserved above every capacity; every process within two hops of the
//! leader runs with tightened bounds (l_i+1, k_i−1). **This is the paper's partial
//! solution**: within two hops of the leader, the algorithm normally keeps
//! l_i+1 ≤ |CS_i| ≤ k_i−1, and reaches l_i or k_i only through a sidetrack move.
//! Preconditions: a leader with |N_LDR| ≥ 4; k_q − l_q ≥ 3 for every P_q within two hops of
//! it; an initial configuration that is safe, and tightly safe (l_q+1 ≤ |CS_q| ≤ k_q−1)
//! within two hops. [`Lkcs::build`] checks them all and reports every one that fails. Before
//! them it refuses an instance in which some process can never move, whatever the algorithm
//! (no configuration meeting the bounds lets it move: [`Instance::immovable`]), naming those
//! processes; the tight start is searched with [`Instance::find_safe_initial_quickly`]
//! (bounded backtracking, then a local search); after three candidate leaders whose search
//! gave up, the others are not tried, so a refusal stays within a few seconds. The printed
//! rules, where the code departs from them and why (deviations 1–11) are in [`leader`]; their
//! history is in `docs/errata.md`.
//!
//! **What runs by default: the round trip** ([`trip::TripProc`], [`LkcsRules::TRIP`]). It
//! replaces the leader, the sidetrack and deviations 4, 5, 6 and 9–11 by the restoration
//! rule of `docs/lkcs-liveness.md`: no leader, every breakable side of a bound tightened, and
//! a blocked request moves by a round trip (trip locks, the reserve, and a return that the
//! other moves keep room for). [`Lkcs::build_default`] (the CLI's `--algorithm lkcs` and a
//! local quota with both bounds, when no leader is named) runs it, and refuses, with the
//! round trip's reasons, an instance it cannot take (bounds it cannot tighten, no start
//! within the tightened bounds): the leader rules may take some of those, but they can
//! stall, so they run only when a leader (or a printed rule) is named, never as a silent
//! fallback. The leader rules and `--variant printed` are unchanged by the round trip; each
//! flavour ignores the other's messages. The leader rules stay, with their deviations, for
//! the instances the round trip refuses (named explicitly) and for the errata.
//!
//! **Liveness is not guaranteed** by the leader rules (corrected or printed), and for the
//! round trip it is argued in a centralised model and measured (0 failed of 39,331 sweep
//! runs), not proved for the protocol. The waits, the mechanism and the sweeps are in
//! `docs/lkcs-liveness.md`.
//!
//! **Messages** ([`LkcsMsg`], one enum for both flavours). `Request(at, ts)`, `Grant(at)`,
//! `Release(at)`, `Preempt(at)`, `Relinquish(at)` (LMUTIN's, per type `at` ∈ {MUTIN, MUTEX}:
//! [`At`]) and `Blocked(at, sidetrack)` in both; the sidetrack's `Trigger`,
//! `RequestByTrigger`, `SidetrackGrant`, `TriggerDeclined`, `Park` and `Unpark` in the leader
//! rules; `Trip`, `TripLock`, `TripInquire`, `TripYield`, `TripGo`, `TripCancel`,
//! `TripEnd`, and `Withdraw` and `Withdrawn` (a withdrawal, [`CsObject::withdraw`]) in the
//! round trip.
//!
//! **Assumptions.** Reliable FIFO links (self-links included) and atomic handlers; what each
//! flavour adds is in its module.
//!
//! **The files.** `messages.rs` ([`LkcsMsg`], [`At`]) is shared; `leader.rs` and `trip.rs`
//! are the two [`CsObject`] types, each with only its own state, and neither uses the other;
//! `build.rs` validates an instance and builds a system of either ([`Lkcs::build`],
//! [`Lkcs::build_default`], [`LkcsSystem`]); this file joins the two flavours into [`Lkcs`],
//! which delegates every call to its flavour.

mod build;
pub mod leader;
mod messages;
mod rules;
pub mod trip;

#[cfg(feature = "net")]
pub use build::leader_key;
pub use build::{Leaders, LkcsSystem, MIN_LEADER_DEGREE};
pub use messages::{At, LkcsMsg};
pub use rules::LkcsRules;

use crate::arbiter::Arbiter;
use crate::config::Bounds;
use crate::cs::{CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;
use leader::LeaderProc;
use trip::TripProc;

#[cfg(doc)]
use crate::config::Instance;

/// The members of `closed` whose permission has not come (not in `granters`): what a pending
/// sequence of either flavour awaits ([`CsObject::awaiting`]).
fn not_granted(
    closed: &[ProcessId],
    granters: &std::collections::BTreeSet<ProcessId>,
) -> Vec<ProcessId> {
    closed
        .iter()
        .filter(|q| !granters.contains(q))
        .copied()
        .collect()
}

/// The processes in `held` other than `me`, ascending, once each: what a process of either
/// flavour lent ([`CsObject::lent_to`]).
fn lent_but(me: ProcessId, held: impl IntoIterator<Item = ProcessId>) -> Vec<ProcessId> {
    let mut held: std::collections::BTreeSet<ProcessId> = held.into_iter().collect();
    held.remove(&me);
    held.into_iter().collect()
}

/// One process of LKCS: the leader rules or the round trip, as [`Lkcs::build`] chose for the
/// whole system. Every [`CsObject`] call goes to the flavour.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Lkcs {
    flavor: Flavor,
}

/// The two flavours of LKCS.
///
/// Inline, unboxed: every process of a system runs the same flavour, and the size is the
/// leader rules' process as it was before the split; boxing it would add an allocation to
/// every clone, which the checker makes for every state it explores.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Flavor {
    Leader(LeaderProc),
    Trip(TripProc),
}

/// `$body` on the flavour's process, bound to `$p`.
macro_rules! on_flavor {
    ($flavor:expr, $p:ident => $body:expr) => {
        match $flavor {
            Flavor::Leader($p) => $body,
            Flavor::Trip($p) => $body,
        }
    };
}

impl From<LeaderProc> for Lkcs {
    fn from(p: LeaderProc) -> Lkcs {
        Lkcs {
            flavor: Flavor::Leader(p),
        }
    }
}

impl From<TripProc> for Lkcs {
    fn from(p: TripProc) -> Lkcs {
        Lkcs {
            flavor: Flavor::Trip(p),
        }
    }
}

impl Lkcs {
    /// The process under the leader rules, if it runs them.
    pub fn leader_rules(&self) -> Option<&LeaderProc> {
        match &self.flavor {
            Flavor::Leader(p) => Some(p),
            Flavor::Trip(_) => None,
        }
    }

    /// The process under the round trip, if it runs it.
    pub fn round_trip(&self) -> Option<&TripProc> {
        match &self.flavor {
            Flavor::Leader(_) => None,
            Flavor::Trip(p) => Some(p),
        }
    }

    /// The arbiter of type `at` of a process under the leader rules (for inspection in tests
    /// and checkers): [`LeaderProc::arbiter`].
    ///
    /// # Panics
    ///
    /// Under the round trip, whose arbiters are its own ([`TripProc::granted`]).
    pub fn arbiter(&self, at: At) -> &Arbiter {
        match &self.flavor {
            Flavor::Leader(p) => p.arbiter(at),
            Flavor::Trip(_) => panic!("the round trip runs no `Arbiter`"),
        }
    }

    /// Whether this process leads (or watches, under the leader rules); never under the round
    /// trip.
    pub fn is_leader(&self) -> bool {
        self.leader_rules().is_some_and(LeaderProc::is_leader)
    }

    /// Whether the sequence in progress was switched to the sidetrack (the leader rules);
    /// never under the round trip.
    pub fn triggered(&self) -> bool {
        self.leader_rules().is_some_and(LeaderProc::triggered)
    }
}

impl CsObject for Lkcs {
    type Msg = LkcsMsg;

    fn id(&self) -> ProcessId {
        on_flavor!(&self.flavor, p => p.id())
    }

    fn state(&self) -> CsState {
        on_flavor!(&self.flavor, p => p.state())
    }

    fn pending(&self) -> Option<Sequence> {
        on_flavor!(&self.flavor, p => p.pending())
    }

    fn begin_entry(&mut self, out: &mut Outbox<LkcsMsg>) -> Result<(), CallError> {
        on_flavor!(&mut self.flavor, p => p.begin_entry(out))
    }

    fn begin_exit(&mut self, out: &mut Outbox<LkcsMsg>) -> Result<(), CallError> {
        on_flavor!(&mut self.flavor, p => p.begin_exit(out))
    }

    fn on_message(&mut self, from: ProcessId, msg: LkcsMsg, out: &mut Outbox<LkcsMsg>) {
        on_flavor!(&mut self.flavor, p => p.on_message(from, msg, out))
    }

    fn set_time(&mut self, now: u64) {
        on_flavor!(&mut self.flavor, p => p.set_time(now))
    }

    fn operating_bounds(&self) -> Option<Bounds> {
        on_flavor!(&self.flavor, p => p.operating_bounds())
    }

    fn takes_round_trips(&self) -> bool {
        on_flavor!(&self.flavor, p => p.takes_round_trips())
    }

    fn check_invariants(&self) -> Result<(), String> {
        on_flavor!(&self.flavor, p => p.check_invariants())
    }

    fn awaiting(&self) -> Vec<ProcessId> {
        on_flavor!(&self.flavor, p => p.awaiting())
    }

    fn lent_to(&self) -> Vec<ProcessId> {
        on_flavor!(&self.flavor, p => p.lent_to())
    }

    fn withdraw(&mut self, out: &mut Outbox<LkcsMsg>) -> bool {
        on_flavor!(&mut self.flavor, p => p.withdraw(out))
    }

    fn can_withdraw(&self) -> bool {
        on_flavor!(&self.flavor, p => p.can_withdraw())
    }

    fn retire(&mut self, out: &mut Outbox<LkcsMsg>) {
        on_flavor!(&mut self.flavor, p => p.retire(out))
    }
}
