//! [`LkcsRules`]: which of the paper's printed rules an LKCS system follows, and which
//! flavour runs (the leader rules of [`super::leader`] or the round trip of [`super::trip`]).

use crate::arbiter::ArbiterRules;
use crate::cs::Variant;

/// Which printed rules to follow (see "Deviations from the paper"; each field `true` selects
/// the printed rule), and whether the sidetrack exists at all.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct LkcsRules {
    /// `false` runs the naive composition of §5.1: no leader, no trigger, untightened bounds.
    /// It can deadlock; it is kept to show why the sidetrack exists.
    pub sidetrack: bool,
    /// Deviation 1: both types' initial grants to the InCS members.
    pub printed_initial_grants: bool,
    /// Deviation 2: `Trigger(MUTIN, ts_j)` for a nominee waiting with ts_j+1.
    pub printed_trigger_stamp: bool,
    /// Deviation 3: the nomination dequeues the nominee's pending request.
    pub dequeue_nominee: bool,
    /// Deviation 4: nominate again whenever the suspicion comes back, with no answer awaited.
    pub repeated_triggers: bool,
    /// Deviation 5: "saturated" is one below the capacity.
    pub printed_saturation: bool,
    /// Deviation 6: the leader completes only once `Waiting_LDR` < |N_LDR|+1.
    pub printed_leader_wait: bool,
    /// Deviation 7: sidetrack grants are plain Grants; a Trigger is accepted by state.
    pub untagged_sidetrack: bool,
    /// Deviation 8 (requester side): relinquish on every Preempt of the type being kept.
    pub unguarded_preempt: bool,
    /// Deviation 8 (arbiter side).
    pub arbiter: ArbiterRules,
    /// Deviation 9 (an addition; `false` is the paper): a request blocked behind holders that
    /// will not give way sets the permissions its sequence holds aside (Blocked, Park,
    /// Unpark), so they do not block processes that could move.
    pub park_blocked: bool,
    /// Deviation 11 (an addition; `false` is the paper): when no process of the type that
    /// would free a saturated arbiter can be nominated, nominate the oldest normal request
    /// waiting at a saturated arbiter whose reserve is free.
    pub fallback_nominee: bool,
    /// The round trip of `docs/lkcs-liveness.md` (an addition; `false` everywhere but
    /// [`LkcsRules::TRIP`]): no leader, every breakable side of a bound tightened by one,
    /// and a blocked request takes a round trip ([`super::trip`]). The other
    /// fields do not apply to it.
    pub round_trip: bool,
}

impl LkcsRules {
    /// The corrected algorithm.
    pub const CORRECTED: LkcsRules = LkcsRules {
        sidetrack: true,
        printed_initial_grants: false,
        printed_trigger_stamp: false,
        dequeue_nominee: false,
        repeated_triggers: false,
        printed_saturation: false,
        printed_leader_wait: false,
        untagged_sidetrack: false,
        unguarded_preempt: false,
        arbiter: ArbiterRules::CORRECTED,
        park_blocked: true,
        fallback_nominee: true,
        round_trip: false,
    };
    /// Every rule as printed.
    pub const PRINTED: LkcsRules = LkcsRules {
        sidetrack: true,
        printed_initial_grants: true,
        printed_trigger_stamp: true,
        dequeue_nominee: true,
        repeated_triggers: true,
        printed_saturation: true,
        printed_leader_wait: true,
        untagged_sidetrack: true,
        unguarded_preempt: true,
        arbiter: ArbiterRules::PRINTED,
        park_blocked: false,
        fallback_nominee: false,
        round_trip: false,
    };
    /// The round trip ([`super::trip`]): no leader, no Trigger, no parking.
    pub const TRIP: LkcsRules = LkcsRules {
        round_trip: true,
        ..LkcsRules::CORRECTED
    };
    /// The naive composition (corrected rules, no sidetrack, no tightening, no parking).
    pub const NAIVE: LkcsRules = LkcsRules {
        sidetrack: false,
        park_blocked: false,
        ..LkcsRules::CORRECTED
    };
}

impl From<Variant> for LkcsRules {
    fn from(v: Variant) -> Self {
        match v {
            Variant::Corrected => LkcsRules::CORRECTED,
            Variant::Printed => LkcsRules::PRINTED,
            Variant::Trip => LkcsRules::TRIP,
        }
    }
}
