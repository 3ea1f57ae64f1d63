//! A view's system: the cluster's problem restricted to the members of a view.
//!
//! A cluster of [`lkcs::net`](crate::net) members runs in numbered views
//! (`docs/fault-tolerance.md`): each view is a set of members and the configuration it starts
//! from. At a view change every member restarts its CS object from the view's start, built as
//! at a cluster's first start but over the view's members only. [`ViewSystem::new`] is that
//! build's input: the cluster's [`SystemSpec`] and [`Instance`] restricted to the members,
//! renumbered densely (member `members[i]` is process `i` of the view's system), with bounds
//! that the view can keep.
//!
//! **LKCS** builds its objects only from a start strictly inside the bounds it may break by
//! a round trip or a sidetrack (`l_i + 1 ≤ |CS_i| ≤ k_i − 1` where it tightens them): a lower
//! bound the start meets exactly is lowered by one more (a deficit view), and an upper bound
//! `k_i < c_i` the start meets exactly (a round trip's move through the reserve was in place
//! at the freeze) is built **raised** by one, so that the start is within what LKCS runs
//! that neighbourhood with (`k_i` tightened from `k_i + 1`, or `k_i + 1 = c_i` untightened): a
//! **surplus view** ([`ViewSystem::surplus`]). The entries of the members that bound counts
//! wait ([`ViewSystem::gates_entries`]) until a view started after an exit there restores
//! it; the gate alone keeps the count at most `k_i`. The round trip also needs room between its operating bounds (`L_i < K_i`, where `L_i = l_i + 1`
//! if `l_i > 0` and `K_i = k_i − 1` if `k_i < |N_i| + 1`): a neighbourhood that an eviction shrank can leave a bound with none, and
//! that lower bound is lowered until there is (a deficit view again) rather than the view
//! refused.
//!
//! **Bounds.** Let `c_i` be the size of member `i`'s closed neighbourhood in the view (the
//! view's size for a global quota). The bounds the view **asks** for are the cluster's,
//! clamped to the neighbourhood: `k_i ← min(k_i, c_i)`, `l_i ← min(l_i, c_i)`. The upper bounds
//! are built as asked: a neighbourhood of the view is a neighbourhood of the cluster without
//! evicted members, which hold no slot (they fenced), so at most `k_i` members of the
//! cluster's neighbourhood hold a slot. A lower bound is built **lowered** to what the start
//! has and to what the algorithm accepts (`l_i < k_i`, and LKCS's round-trip room above):
//! `min(l_i, k_i − 1, room_i, active_i)`, where `active_i` counts the start's active members
//! around `i`. A view that lowers a bound is a **deficit view** ([`ViewSystem::deficit`]): the
//! members of a lowered bound's neighbourhood ([`ViewSystem::gates_exits`]) must not let an
//! exit complete until a view with that bound restored (the "Starting below a lower bound"
//! section of the design): one started later from more entries where the bound was lowered
//! for the count ([`ViewSystem::restorable`]), one with a lost member back where it was
//! lowered for `k_i − 1` or the room. Entries go on, and so does every member no lowered
//! bound counts.
//!
//! A raised upper bound is the mirror image: only an entry of a member of `i`'s closed
//! neighbourhood adds to `|CS_i|`, and all of them wait, so `|CS_i| ≤ k_i` holds through the
//! view whatever the algorithm would let through with `k_i + 1`; every other bound is built as
//! asked (or lowered), and the algorithm keeps it. While the count stays at `k_i` the bound
//! itself refuses those entries, so the gate holds back only entries that follow an exit in the
//! view: the member whose exit brought the count down asks for a view of the same members
//! started from the states then, which builds `k_i` as asked.
//!
//! **The leader rules** (`Leaders`, opt-in) tighten every bound within two hops of a leader,
//! `k_i` even where it is `c_i` and `l_i` even where it is 0, and need a leader of degree at
//! least 4 with `k_q − l_q ≥ 3` around it: a view whose start meets such a bound there, or
//! whose eviction shrank the leader's neighbourhood below them, is one they refuse. Such a
//! view runs the **round trip** instead (the default LKCS algorithm: the same guarantee, the
//! same bounds asked, and the rules above for its start), and says so
//! ([`ViewSystem::leader_rules_refused`]); the next view whose start the leader rules take
//! (a rejoin, an eviction, a restore) runs them again. Every member decides alike, since the
//! decision depends only on the cluster's spec and the view's start. Under the leader rules
//! the raise applies outside their region too, where nothing is tightened: safe, and the
//! same exit and restore lift the gate.
//!
//! Messages of the view's objects name processes of the view's system: a node translates the
//! destination with [`ViewSystem::cluster_id`] and the sender with [`ViewSystem::dense`] at
//! its links, and every member of the view agrees on the numbering, since it depends only on
//! the member set.

use crate::algo::lkcs::Leaders;
use crate::catalog::{Algorithm, BoundsFile, SystemSpec, SystemVisitor};
use crate::config::{Bounds, Instance};
use crate::cs::{CsObject, CsState, Variant};
use crate::error::{ConfigError, Problem};
use crate::id::ProcessId;
use crate::topology::Topology;
use std::collections::BTreeMap;

/// The cluster's problem restricted to a view's members: the spec to build every member's
/// object from, the numbering, and the bounds asked and built (see the module doc).
#[derive(Clone, Debug)]
pub struct ViewSystem {
    spec: SystemSpec,
    members: Vec<ProcessId>,
    asked: Vec<Bounds>,
    built: Vec<Bounds>,
    /// Per member: the largest lower bound the algorithm takes there whatever the start
    /// (below `k`, and within LKCS's round-trip room): a view of the same members lowers a
    /// bound asked above it again, however many members entered.
    cap: Vec<usize>,
    /// Why the cluster's leader rules refused the view, which then runs the round trip.
    leader_rules_refused: Option<ConfigError>,
}

impl ViewSystem {
    /// Restricts the cluster `spec` (whose resolved bounds are `instance`) to the members
    /// of `start` (cluster ids), each starting in its state there.
    ///
    /// Refuses (naming the cause) a view with no member ([`Problem::ZeroProcesses`]), a
    /// member the cluster does not have ([`Problem::UnknownMember`]), and a `spec` and
    /// `instance` of different sizes ([`Problem::Invalid`]). The spec it gives is built by
    /// [`SystemSpec::build`], which may still refuse it: LKCS, for one, refuses some bounds
    /// near small neighbourhoods.
    ///
    /// A cluster that runs LKCS's leader rules (a leader named, the corrected variant) has
    /// the view's system built here once: where the leader rules refuse it, the view runs
    /// the round trip instead, and [`ViewSystem::leader_rules_refused`] says why.
    pub fn new(
        spec: &SystemSpec,
        instance: &Instance,
        start: &BTreeMap<ProcessId, CsState>,
    ) -> Result<ViewSystem, ConfigError> {
        let view = ViewSystem::restrict(spec, instance, start)?;
        let leader_rules = spec.algorithm == Algorithm::Lkcs
            && spec.leader.is_some()
            && spec.variant == Variant::Corrected;
        if !leader_rules {
            return Ok(view);
        }
        let refusal = match view.spec.build(Check) {
            Ok(()) => return Ok(view),
            Err(refusal) => refusal,
        };
        let round_trip = SystemSpec {
            leader: None,
            ..spec.clone()
        };
        let mut view = ViewSystem::restrict(&round_trip, instance, start)?;
        view.leader_rules_refused = Some(refusal);
        Ok(view)
    }

    /// [`ViewSystem::new`] for the algorithm `spec` names, whatever it refuses.
    fn restrict(
        spec: &SystemSpec,
        instance: &Instance,
        start: &BTreeMap<ProcessId, CsState>,
    ) -> Result<ViewSystem, ConfigError> {
        let n = spec.topology.len();
        if instance.len() != n {
            return Err(ConfigError::one(Problem::Invalid(format!(
                "the spec has {n} processes and its instance {}",
                instance.len()
            ))));
        }
        let members: Vec<ProcessId> = start.keys().copied().collect();
        let topology = spec.topology.induced(&members)?;
        let states: Vec<CsState> = start.values().copied().collect();
        let round_trip = spec.algorithm == Algorithm::Lkcs
            && spec.leader.is_none()
            && matches!(spec.variant, Variant::Corrected | Variant::Trip);
        let mut asked = Vec::with_capacity(members.len());
        let mut built = Vec::with_capacity(members.len());
        let mut caps = Vec::with_capacity(members.len());
        for (i, &p) in members.iter().enumerate() {
            let closed = topology.closed(ProcessId::from(i));
            let c = closed.len();
            let active = closed
                .iter()
                .filter(|q| states[q.index()] == CsState::InCs)
                .count();
            let cluster = instance.bounds(p);
            let ask = Bounds {
                l: cluster.l.min(c),
                k: cluster.k.min(c),
            };
            let mut l = ask.l.min(ask.k.saturating_sub(1)).min(active);
            if spec.algorithm == Algorithm::Lkcs && l > 0 && l == active {
                // LKCS starts strictly inside a bound it may have to break by a round trip
                // (l_i + 1 ≤ |CS_i|): a start at l_i is lowered one more
                l -= 1;
            }
            // LKCS starts at most at the bound it tightens (|CS_i| ≤ k_i − 1 where k_i < c):
            // a start at k_i is built with k_i raised one (a surplus view, entries gated)
            let k = match spec.algorithm == Algorithm::Lkcs && ask.k < c && active >= ask.k {
                true => ask.k + 1,
                false => ask.k,
            };
            let cap =
                ask.k
                    .saturating_sub(1)
                    .min(if round_trip { room(ask, c) } else { usize::MAX });
            l = l.min(cap);
            caps.push(cap);
            asked.push(ask);
            built.push(Bounds { l, k });
        }
        let spec = restricted_spec(spec, topology, &members, &built, states);
        Ok(ViewSystem {
            spec,
            members,
            asked,
            built,
            cap: caps,
            leader_rules_refused: None,
        })
    }

    /// Why the cluster's leader rules refused this view (its start meets a bound they
    /// tighten, or an eviction left no leader they accept), which therefore runs LKCS's round
    /// trip (see the module doc); `None` when the view runs the cluster's algorithm.
    pub fn leader_rules_refused(&self) -> Option<&ConfigError> {
        self.leader_rules_refused.as_ref()
    }

    /// The spec that builds the view's system (every member's object, over the view's
    /// numbering, starting from the view's start).
    pub fn spec(&self) -> &SystemSpec {
        &self.spec
    }

    /// The view's members, as cluster ids: process `i` of the view's system is `members()[i]`.
    pub fn members(&self) -> &[ProcessId] {
        &self.members
    }

    /// The view's number for cluster member `p`, or `None` when `p` is not in the view.
    pub fn dense(&self, p: ProcessId) -> Option<ProcessId> {
        self.members.binary_search(&p).ok().map(ProcessId::from)
    }

    /// The cluster id of the view's process `d`, or `None` when the view has no such process.
    pub fn cluster_id(&self, d: ProcessId) -> Option<ProcessId> {
        self.members.get(d.index()).copied()
    }

    /// The bounds the view asks for around its process `d` (the cluster's, clamped to the
    /// neighbourhood in the view), or `None` when the view has no such process.
    pub fn asked(&self, d: ProcessId) -> Option<Bounds> {
        self.asked.get(d.index()).copied()
    }

    /// The bounds the view's system is built with around its process `d`: as asked, with the
    /// lower bound lowered (in a deficit view) to what the start has and the algorithm takes,
    /// and LKCS's upper bound raised by one (in a surplus view) where the start meets a bound
    /// it tightens (see the module doc).
    pub fn built(&self, d: ProcessId) -> Option<Bounds> {
        self.built.get(d.index()).copied()
    }

    /// The members (cluster ids) around which a lower bound was lowered. Not empty exactly
    /// in a deficit view, where the exits of the members those bounds count wait
    /// ([`ViewSystem::gates_exits`]).
    pub fn deficit(&self) -> Vec<ProcessId> {
        self.members_where(lowered)
    }

    /// Whether the exits of the view's process `d` must wait in this view: `d` is in the
    /// closed neighbourhood of a member whose lower bound was lowered ([`ViewSystem::deficit`]).
    /// An exit of any other member changes no count that a lowered bound guards, so the
    /// algorithm's own bounds, as asked there, keep it. In a global quota every member is in
    /// every neighbourhood: a deficit view gates every exit. `false` for a process the view
    /// does not have.
    pub fn gates_exits(&self, d: ProcessId) -> bool {
        self.around(d, lowered).next().is_some()
    }

    /// Whether a view of the same members, started later from the states that entries
    /// brought up, may lift the gate on `d`'s exits: every bound lowered around `d` was
    /// lowered for what the start has, none for what the algorithm takes whatever the start
    /// (a lower bound equal to its neighbourhood's upper bound once an eviction shrank it,
    /// or LKCS's round trip without room there), which only a view with a member back
    /// restores. `false` where [`ViewSystem::gates_exits`] is false, and for a process the
    /// view does not have.
    pub fn restorable(&self, d: ProcessId) -> bool {
        let mut below = self.around(d, lowered).peekable();
        below.peek().is_some() && below.all(|i| self.asked[i].l <= self.cap[i])
    }

    /// The members (cluster ids) around which an upper bound was raised by one: LKCS started
    /// at an upper bound `k_i < c_i` it tightens. Not empty exactly in a surplus view, where
    /// the entries of the members those bounds count wait ([`ViewSystem::gates_entries`]).
    pub fn surplus(&self) -> Vec<ProcessId> {
        self.members_where(raised)
    }

    /// Whether the entries of the view's process `d` must wait in this view: `d` is in the
    /// closed neighbourhood of a member whose upper bound was raised ([`ViewSystem::surplus`]).
    /// Only such an entry adds to a raised bound's count, so with all of them waiting the
    /// count never passes the bound asked. A view of the same members started after an exit
    /// there lifts the gate: a bound is raised only for what the start has, never for what
    /// the algorithm takes. `false` for a process the view does not have.
    pub fn gates_entries(&self, d: ProcessId) -> bool {
        self.around(d, raised).next().is_some()
    }

    /// The members (cluster ids) whose bounds, as asked and as built, meet `changed`.
    fn members_where(&self, changed: fn(&Bounds, &Bounds) -> bool) -> Vec<ProcessId> {
        self.members
            .iter()
            .zip(self.asked.iter().zip(&self.built))
            .filter(|(_, (a, b))| changed(a, b))
            .map(|(&p, _)| p)
            .collect()
    }

    /// The members of `d`'s closed neighbourhood (indices of the view) whose bounds, as asked
    /// and as built, meet `changed`; none for a process the view does not have.
    fn around(
        &self,
        d: ProcessId,
        changed: fn(&Bounds, &Bounds) -> bool,
    ) -> impl Iterator<Item = usize> + '_ {
        let closed = match d.index() < self.members.len() {
            true => self.spec.topology.closed(d),
            false => Vec::new(),
        };
        closed
            .into_iter()
            .map(|i| i.index())
            .filter(move |&i| changed(&self.asked[i], &self.built[i]))
    }
}

/// Builds a system and keeps nothing: whether the spec builds.
struct Check;

impl SystemVisitor for Check {
    type Output = ();
    fn visit<A: CsObject>(self, _: &Instance, _: &[CsState], _: Vec<A>) {}
}

/// A lower bound built below the one asked (a deficit view's).
fn lowered(asked: &Bounds, built: &Bounds) -> bool {
    built.l < asked.l
}

/// An upper bound built above the one asked (a surplus view's).
fn raised(asked: &Bounds, built: &Bounds) -> bool {
    built.k > asked.k
}

/// The largest lower bound the round trip can run with around a member whose bounds are
/// `ask` in a closed neighbourhood of `c` members: its operating bounds are `L = l + 1` (where
/// `l > 0`) and `K = k − 1` (where `k < c`), and it needs `L < K` (else
/// [`Problem::NoRoomToTighten`]). A neighbourhood that shrank by an eviction can leave a
/// bound the cluster's round trip took with no room: the view lowers it (a deficit view, its
/// exits gated) instead of being refused.
fn room(ask: Bounds, c: usize) -> usize {
    let operating_k = ask.k.saturating_sub(usize::from(ask.k < c));
    operating_k.saturating_sub(2)
}

/// The cluster's spec over the view: its graph, its bounds, its start; the leader kept when
/// it is a member (renumbered), chosen again otherwise.
fn restricted_spec(
    spec: &SystemSpec,
    topology: Topology,
    members: &[ProcessId],
    built: &[Bounds],
    states: Vec<CsState>,
) -> SystemSpec {
    let mut out = spec.clone();
    out.topology = topology;
    out.initial = Some(states);
    out.l = None;
    out.k = None;
    out.bounds = None;
    let ls = || built.iter().map(|b| b.l).collect::<Vec<_>>();
    let ks = || built.iter().map(|b| b.k).collect::<Vec<_>>();
    // a global quota's bounds are the same everywhere: any member's will do
    let first = built.first().copied().unwrap_or(Bounds { l: 0, k: 1 });
    match spec.algorithm {
        Algorithm::Lmutin => {
            out.bounds = Some(BoundsFile {
                l: Some(ls()),
                k: None,
            })
        }
        Algorithm::Lmutex => {
            out.bounds = Some(BoundsFile {
                l: None,
                k: Some(ks()),
            })
        }
        Algorithm::Lkcs => {
            out.bounds = Some(BoundsFile {
                l: Some(ls()),
                k: Some(ks()),
            })
        }
        Algorithm::Mutin => out.l = Some(first.l),
        Algorithm::Kmex => out.k = Some(first.k),
        Algorithm::Gcs => {
            out.l = Some(first.l);
            out.k = Some(first.k);
        }
        Algorithm::Maekawa | Algorithm::Cdc | Algorithm::Ddc => {}
    }
    // a leader named by id is renumbered; one that left is chosen again among the view's
    // members (the leader rules with the automatic leader, not the round trip)
    out.leader = spec.leader.map(|leader| match leader {
        Leaders::One(id) => members
            .binary_search(&ProcessId::from(id))
            .map_or(Leaders::Auto, Leaders::One),
        other => other,
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(
        algorithm: Algorithm,
        topology: &str,
        l: Option<usize>,
        k: Option<usize>,
    ) -> SystemSpec {
        SystemSpec {
            l,
            k,
            ..SystemSpec::new(
                algorithm,
                Topology::parse(topology).expect("a valid topology"),
            )
        }
    }

    fn start(states: &[(usize, CsState)]) -> BTreeMap<ProcessId, CsState> {
        states
            .iter()
            .map(|&(p, s)| (ProcessId::from(p), s))
            .collect()
    }

    #[test]
    fn a_leader_that_left_is_chosen_again_and_one_that_stayed_is_renumbered() {
        let mut s = spec(Algorithm::Lkcs, "torus:4x4", Some(0), Some(4));
        let inst = Instance::new(
            s.topology.clone(),
            vec![Bounds { l: 0, k: 4 }; s.topology.len()],
        )
        .expect("valid bounds");
        // rows 0 and 2 active: every closed neighbourhood has one to three active, within
        // the leader rules' (1, 3) near a leader, with or without one member
        let all_but = |gone: usize| {
            let state = |p: usize| match (p / 4) % 2 {
                0 => CsState::InCs,
                _ => CsState::OutCs,
            };
            start(
                &(0..16)
                    .filter(|&p| p != gone)
                    .map(|p| (p, state(p)))
                    .collect::<Vec<_>>(),
            )
        };
        s.leader = Some(Leaders::One(5));
        let v = ViewSystem::new(&s, &inst, &all_but(2)).expect("a view");
        assert_eq!(
            v.spec().leader,
            Some(Leaders::One(4)),
            "P5 is the view's fifth member"
        );
        let v = ViewSystem::new(&s, &inst, &all_but(5)).expect("a view");
        assert_eq!(
            v.spec().leader,
            Some(Leaders::Auto),
            "the leader left: the leader rules choose one again"
        );
        s.leader = Some(Leaders::All);
        let v = ViewSystem::new(&s, &inst, &all_but(5)).expect("a view");
        assert_eq!(v.spec().leader, Some(Leaders::All));
        assert!(v.leader_rules_refused().is_none(), "the leader rules run");
    }

    #[test]
    fn a_view_the_leader_rules_refuse_runs_the_round_trip_and_says_why() {
        // (1, 4) on complete:5 under the leader rules: with P4 evicted, every member has
        // degree 3, below the leader's 4
        let mut s = spec(Algorithm::Lkcs, "complete:5", Some(1), Some(4));
        s.leader = Some(Leaders::Auto);
        let inst = Instance::new(s.topology.clone(), vec![Bounds { l: 1, k: 4 }; 5])
            .expect("valid bounds");
        let four = start(&[
            (0, CsState::InCs),
            (1, CsState::InCs),
            (2, CsState::OutCs),
            (3, CsState::OutCs),
        ]);
        let v = ViewSystem::new(&s, &inst, &four).expect("a view");
        let why = v
            .leader_rules_refused()
            .expect("the leader rules refuse a leader of degree 3")
            .to_string();
        assert!(
            why.contains("|N_LDR| >= 4") && why.contains("is 3"),
            "the refusal names the degree: {why}"
        );
        assert_eq!(v.spec().leader, None, "the view runs the round trip");
        v.spec()
            .build(Check)
            .expect("the round trip builds the view");
        // built as any round-trip view: (1, 4) over four with two active (L = 2, and k = 4
        // = |N_i| + 1 not tightened) meets no bound, so nothing is gated
        assert!(v.surplus().is_empty() && v.deficit().is_empty(), "{v:?}");
        // the full cluster's start runs the leader rules
        let mut five = four.clone();
        five.insert(ProcessId::from(4), CsState::OutCs);
        let v = ViewSystem::new(&s, &inst, &five).expect("a view");
        assert!(v.leader_rules_refused().is_none(), "{v:?}");
        assert_eq!(v.spec().leader, Some(Leaders::Auto));
    }
}
