//! A view's system (`lkcs::view_system`): every algorithm, restricted to random majorities of
//! its members from random safe configurations, builds a system whose bounds imply the
//! cluster's (upper bounds as asked, lower bounds lowered only in a deficit view, which the
//! view says), whose numbering is a renumbering of the cluster's graph, and which runs safely
//! to completion in the simulator (the observer checks the view's bounds after every event).

use lkcs::sim::{simulate, SimConfig, SimReport};
use lkcs::view_system::ViewSystem;
use lkcs::{
    cs::{CsObject, CsState},
    Algorithm, ConfigError, Instance, Problem, ProcessId, SystemSpec, SystemVisitor, Topology,
};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;

struct Resolve;

impl SystemVisitor for Resolve {
    type Output = (Instance, Vec<CsState>);
    fn visit<A: CsObject>(self, inst: &Instance, initial: &[CsState], _: Vec<A>) -> Self::Output {
        (inst.clone(), initial.to_vec())
    }
}

struct Run(SimConfig);

impl SystemVisitor for Run {
    type Output = SimReport;
    fn visit<A: CsObject>(self, inst: &Instance, _: &[CsState], procs: Vec<A>) -> SimReport {
        simulate(inst, procs, &self.0)
    }
}

fn spec(algorithm: Algorithm, topology: &str, l: Option<usize>, k: Option<usize>) -> SystemSpec {
    SystemSpec {
        algorithm,
        topology: Topology::parse(topology).expect("a valid topology"),
        l,
        k,
        bounds: None,
        initial: None,
        variant: lkcs::cs::Variant::Corrected,
        leader: None,
        coterie: None,
        mx: None,
        maxreq: None,
        migrate_after: None,
    }
}

/// Clusters the views are cut from: every algorithm, global and local.
fn clusters() -> Vec<SystemSpec> {
    let mut grid = spec(Algorithm::Gcs, "complete:7", Some(2), Some(4));
    grid.coterie = Some(lkcs::quota::QuorumSystem::Grid);
    let mut cdc_inside = spec(Algorithm::Mutin, "complete:6", Some(2), None);
    cdc_inside.mx = Some(lkcs::quota::InnerMutex::Cdc);
    vec![
        spec(Algorithm::Maekawa, "complete:5", None, None),
        spec(Algorithm::Cdc, "complete:5", None, None),
        spec(Algorithm::Ddc, "complete:4", None, None),
        spec(Algorithm::Mutin, "complete:5", Some(2), None),
        cdc_inside,
        spec(Algorithm::Kmex, "complete:6", None, Some(2)),
        spec(Algorithm::Gcs, "complete:5", Some(1), Some(3)),
        grid,
        spec(Algorithm::Lmutin, "ring:7", Some(1), None),
        spec(Algorithm::Lmutin, "torus:3x3", Some(2), None),
        spec(Algorithm::Lmutex, "ring:6", None, Some(1)),
        spec(Algorithm::Lmutex, "random:8:0.5:1", None, Some(2)),
        spec(Algorithm::Lkcs, "torus:4x4", Some(0), Some(4)),
        spec(Algorithm::Lkcs, "complete:6", Some(1), Some(5)),
        // narrow bounds: views where an eviction leaves the round trip no room
        spec(Algorithm::Lkcs, "complete:5", Some(3), Some(5)),
        spec(Algorithm::Lkcs, "ring:8", Some(1), Some(3)),
        // the leader rules, which refuse some views: those run the round trip
        leader(spec(Algorithm::Lkcs, "torus:4x4", Some(0), Some(4))),
        leader(spec(Algorithm::Lkcs, "complete:6", Some(1), Some(5))),
    ]
}

/// `s` under LKCS's leader rules, the leader chosen automatically.
fn leader(s: SystemSpec) -> SystemSpec {
    SystemSpec {
        leader: Some(lkcs::algo::lkcs::Leaders::Auto),
        ..s
    }
}

/// A random majority of `0..n`, sorted, with the states of `config`.
fn majority(rng: &mut ChaCha8Rng, config: &[CsState]) -> BTreeMap<ProcessId, CsState> {
    let n = config.len();
    let keep = rng.random_range(n / 2 + 1..=n);
    let mut ids: Vec<usize> = (0..n).collect();
    ids.shuffle(rng);
    ids.truncate(keep);
    ids.into_iter()
        .map(|p| (ProcessId::from(p), config[p]))
        .collect()
}

#[test]
fn every_algorithm_restricted_to_a_majority_keeps_the_clusters_bounds_and_runs() {
    let mut built = 0;
    let mut deficits = 0;
    let mut surpluses = 0;
    let (mut leader_rules, mut refused) = (0, 0);
    for cluster in clusters() {
        let (inst, _) = cluster.build(Resolve).expect("the cluster builds");
        for seed in 0..12u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let config = inst
                .random_safe_initial(seed)
                .expect("a safe configuration");
            let start = majority(&mut rng, &config);
            let view = ViewSystem::new(&cluster, &inst, &start).expect("a view of members");
            let what = format!(
                "{} on {} with members {:?}, seed {seed}",
                cluster.algorithm,
                cluster.topology.name(),
                view.members()
            );
            let t = &view.spec().topology;
            assert_eq!(t.len(), start.len(), "{what}: one process per member");
            let round_trip = SystemSpec {
                leader: None,
                ..cluster.clone()
            };
            let runs = match view.leader_rules_refused() {
                Some(_) => {
                    assert!(
                        cluster.leader.is_some(),
                        "{what}: refused by rules it lacks"
                    );
                    assert_eq!(view.spec().leader, None, "{what}: the round trip runs");
                    refused += 1;
                    &round_trip
                }
                None => {
                    assert_eq!(view.spec().leader.is_some(), cluster.leader.is_some());
                    leader_rules += usize::from(cluster.leader.is_some());
                    &cluster
                }
            };
            let mut lowered = Vec::new();
            let mut raised = Vec::new();
            for d in t.processes() {
                let p = view.cluster_id(d).expect("a member");
                assert_eq!(
                    view.dense(p),
                    Some(d),
                    "{what}: the numbering is a bijection"
                );
                // the view's neighbourhood is the cluster's, without the members it lost
                let closed: Vec<ProcessId> = t
                    .closed(d)
                    .into_iter()
                    .map(|q| view.cluster_id(q).expect("a member"))
                    .collect();
                let cluster_closed = cluster.topology.closed(p);
                let kept: Vec<ProcessId> = cluster_closed
                    .iter()
                    .copied()
                    .filter(|q| start.contains_key(q))
                    .collect();
                let mut sorted = closed.clone();
                sorted.sort();
                assert_eq!(sorted, kept, "{what}: {p}'s neighbourhood in the view");
                let (asked, got, bound) = (
                    view.asked(d).expect("bounds"),
                    view.built(d).expect("bounds"),
                    inst.bounds(p),
                );
                let active = closed.iter().filter(|q| start[q] == CsState::InCs).count();
                // LKCS raises an upper bound it tightens (below the neighbourhood's size)
                // exactly where the start meets it, by one
                let tight = cluster.algorithm == Algorithm::Lkcs
                    && asked.k < closed.len()
                    && active == asked.k;
                assert_eq!(
                    got.k,
                    asked.k + usize::from(tight),
                    "{what}: {p}'s built upper bound ({active} active of {})",
                    closed.len()
                );
                if tight {
                    raised.push(p);
                }
                assert!(
                    got.l <= bound.l,
                    "{what}: {p}'s lower bound {got:?} > {bound:?}"
                );
                assert!(
                    got.l <= active,
                    "{what}: {p}'s start is below its built bound"
                );
                assert_eq!(asked.k, bound.k.min(closed.len()), "{what}: {p}'s asked k");
                assert_eq!(asked.l, bound.l.min(closed.len()), "{what}: {p}'s asked l");
                if got.l < asked.l {
                    lowered.push(p);
                }
            }
            assert_eq!(view.deficit(), lowered, "{what}: the deficit members");
            assert_eq!(view.surplus(), raised, "{what}: the surplus members");
            for d in t.processes() {
                let near = t
                    .closed(d)
                    .into_iter()
                    .any(|q| lowered.contains(&view.cluster_id(q).expect("a member")));
                assert_eq!(
                    view.gates_exits(d),
                    near,
                    "{what}: {d}'s exits wait exactly when a lowered bound counts it"
                );
                let counted = t
                    .closed(d)
                    .into_iter()
                    .any(|q| raised.contains(&view.cluster_id(q).expect("a member")));
                assert_eq!(
                    view.gates_entries(d),
                    counted,
                    "{what}: {d}'s entries wait exactly when a raised bound counts it"
                );
                // a restore can lift the gate exactly when a view of the same members with
                // every one of them entered (the most a start can have) would not gate d
                let all_in: BTreeMap<ProcessId, CsState> =
                    start.keys().map(|&p| (p, CsState::InCs)).collect();
                // (with the algorithm this view runs: the round trip where the leader rules
                // refused it)
                let full = ViewSystem::new(runs, &inst, &all_in).expect("a view of members");
                assert_eq!(
                    view.restorable(d),
                    near && !full.gates_exits(d),
                    "{what}: whether entries can lift {d}'s gate"
                );
            }
            deficits += usize::from(!lowered.is_empty());
            surpluses += usize::from(!raised.is_empty());
            let cfg = SimConfig {
                seed,
                pairs: 3,
                max_events: 400_000,
                ..SimConfig::default()
            };
            // every view builds, LKCS's started at a bound it tightens included (raised), and
            // runs safely and to completion within its built bounds; a surplus view's asked
            // bound is kept by the node's entry gate, which the simulator does not run: the
            // node tests (tests/net/views.rs, tests/net/faults.rs) check that one
            let r = match view.spec().build(Run(cfg)) {
                Ok(r) => r,
                Err(e) => panic!("{what}: the view's system is refused: {e}"),
            };
            built += 1;
            assert_eq!(r.safety_violations, 0, "{what}: {:?}", r.violations);
            assert_eq!(
                r.requested_pairs_completed, r.pairs_requested,
                "{what}: every member completes its pairs ({:?})",
                r.stalled
            );
        }
    }
    assert!(
        deficits > 0 && surpluses > 0 && built > deficits + surpluses,
        "the sweep covers views with and without a deficit or a surplus ({built} built, \
         {deficits} deficits, {surpluses} surpluses)"
    );
    assert!(
        leader_rules > 0 && refused > 0,
        "the sweep covers views the leader rules run and views they refuse ({leader_rules} \
         run, {refused} refused)"
    );
    eprintln!(
        "{built} views built, {deficits} deficit views, {surpluses} surplus views; under the \
         leader rules {leader_rules} views run them and {refused} the round trip"
    );
}

#[test]
fn a_view_without_an_active_member_of_a_global_quota_is_a_deficit_view() {
    // (l, k) = (2, 3) on five members, P0 and P1 active; P1 is evicted
    let cluster = spec(Algorithm::Gcs, "complete:5", Some(2), Some(3));
    let (inst, _) = cluster.build(Resolve).expect("the cluster builds");
    let start: BTreeMap<ProcessId, CsState> = [0, 2, 3, 4]
        .into_iter()
        .map(|p| {
            let s = if p == 0 {
                CsState::InCs
            } else {
                CsState::OutCs
            };
            (ProcessId::from(p), s)
        })
        .collect();
    let view = ViewSystem::new(&cluster, &inst, &start).expect("a view");
    let d = ProcessId::from(0);
    assert_eq!((view.spec().l, view.spec().k), (Some(1), Some(3)));
    assert_eq!(view.asked(d).map(|b| (b.l, b.k)), Some((2, 3)));
    assert_eq!(view.deficit().len(), 4, "every member's bound was lowered");
    assert_eq!(view.spec().topology.name(), "complete:5[4 of 5]");
    assert_eq!(
        view.dense(ProcessId::from(1)),
        None,
        "P1 is not in the view"
    );
    assert_eq!(view.dense(ProcessId::from(2)), Some(ProcessId::from(1)));
}

/// LKCS's round trip on ring:6 with (l, k) = (1, 3), every member active, P2 evicted: P1's
/// and P3's neighbourhoods shrink to two, where the round trip needs `l + 1 < k` and has
/// `2 = 2`. The view lowers their lower bounds to 0 (its system builds, and runs) instead of
/// being refused, and gates the exits of their neighbourhoods, not P5's.
#[test]
fn a_neighbourhood_left_without_the_round_trips_room_is_a_deficit_view_not_a_refusal() {
    let cluster = spec(Algorithm::Lkcs, "ring:6", Some(1), Some(3));
    let (inst, _) = cluster.build(Resolve).expect("the cluster builds");
    let start: BTreeMap<ProcessId, CsState> = [0, 1, 3, 4, 5]
        .into_iter()
        .map(|p| (ProcessId::from(p), CsState::InCs))
        .collect();
    let view = ViewSystem::new(&cluster, &inst, &start).expect("a view");
    let id = |p: usize| ProcessId::from(p);
    let dense = |p: usize| view.dense(id(p)).expect("a member");
    for p in [1, 3] {
        assert_eq!(
            view.asked(dense(p)).map(|b| (b.l, b.k)),
            Some((1, 2)),
            "P{p}'s bounds, clamped to its two members"
        );
        assert_eq!(
            view.built(dense(p)).map(|b| b.l),
            Some(0),
            "P{p}'s lower bound, lowered for the round trip's room"
        );
    }
    assert_eq!(view.deficit(), vec![id(1), id(3)]);
    let gated: Vec<usize> = [0, 1, 3, 4, 5]
        .into_iter()
        .filter(|&p| view.gates_exits(dense(p)))
        .collect();
    assert_eq!(gated, vec![0, 1, 3, 4], "P5's exits are not gated");
    assert!(
        [0, 1, 3, 4, 5]
            .into_iter()
            .all(|p| !view.restorable(dense(p))),
        "the bounds were lowered for room alone: only P2's return lifts the gates"
    );
    let report = view
        .spec()
        .build(Run(SimConfig::default()))
        .expect("the round trip takes the view's system");
    assert_eq!(report.safety_violations, 0);
    assert_eq!(report.requested_pairs_completed, report.pairs_requested);
}

/// LKCS's round trip on torus:3x3 with (l, k) = (0, 4): P0's closed neighbourhood is P0, P1,
/// P2, P3, P6, and LKCS tightens its upper bound to 3. P0, P1, P3 and P6 are in the CS (the
/// fourth entered through the reserve) when P8, outside it, is evicted. The view is built with
/// P0's bound raised to 5 and the entries of P0's neighbourhood gated (a surplus view) instead
/// of being refused; once P1 has exited, a view of the same members builds the bound as asked.
#[test]
fn a_start_at_an_upper_bound_lkcs_tightens_is_a_surplus_view_not_a_refusal() {
    let cluster = spec(Algorithm::Lkcs, "torus:3x3", Some(0), Some(4));
    let (inst, _) = cluster.build(Resolve).expect("the cluster builds");
    let view_of = |active: &[usize]| {
        let start: BTreeMap<ProcessId, CsState> = (0..8)
            .map(|p| match active.contains(&p) {
                true => (ProcessId::from(p), CsState::InCs),
                false => (ProcessId::from(p), CsState::OutCs),
            })
            .collect();
        ViewSystem::new(&cluster, &inst, &start).expect("a view")
    };
    let id = |p: usize| ProcessId::from(p);
    let view = view_of(&[0, 1, 3, 6]);
    let dense = |p: usize| view.dense(id(p)).expect("a member");
    assert_eq!(
        view.surplus(),
        vec![id(0)],
        "only P0's count is at its bound"
    );
    assert_eq!(
        view.built(dense(0)).map(|b| b.k),
        Some(5),
        "P0's upper bound, raised for the start"
    );
    assert_eq!(view.asked(dense(0)).map(|b| b.k), Some(4));
    let gated: Vec<usize> = (0..8).filter(|&p| view.gates_entries(dense(p))).collect();
    assert_eq!(
        gated,
        vec![0, 1, 2, 3, 6],
        "P0's closed neighbourhood waits to enter"
    );
    assert!(
        (0..8).all(|p| !view.gates_exits(dense(p))),
        "no lower bound was lowered: no exit waits"
    );
    let report = view
        .spec()
        .build(Run(SimConfig::default()))
        .expect("the round trip takes the raised bound");
    assert_eq!(report.safety_violations, 0, "{:?}", report.violations);
    assert_eq!(report.requested_pairs_completed, report.pairs_requested);
    // after P1's exit the count is below the bound: a view from then restores it
    let restored = view_of(&[0, 3, 6]);
    assert_eq!(restored.surplus(), Vec::<ProcessId>::new());
    assert!((0..8).all(|p| !restored.gates_entries(ProcessId::from(p))));
    assert_eq!(restored.built(ProcessId::from(0)).map(|b| b.k), Some(4));
}

/// LKCS's round trip on torus:4x4 with (l, k) = (1, 4), a view of all sixteen members
/// started with P0, P1, P2, P3, P4, P8, P9 and P10 in the CS: P0's count meets its upper
/// bound (4, which LKCS tightens) and P15's its lower bound (1). The view has both gates:
/// P0's bound raised and its neighbourhood's entries waiting, P15's lowered and its
/// neighbourhood's exits waiting, P3 and P12 in both. Each gate holds back only its own kind
/// of move, and the move that lifts each is free: P0's exit (P0 is not in P15's
/// neighbourhood) brings its count below the bound, and then P15's entry (P15 is not in
/// P0's) brings every count inside the bounds the round trip runs.
#[test]
fn a_start_at_both_bounds_is_a_view_with_both_gates() {
    let cluster = spec(Algorithm::Lkcs, "torus:4x4", Some(1), Some(4));
    let (inst, _) = cluster.build(Resolve).expect("the cluster builds");
    let id = |p: usize| ProcessId::from(p);
    let view_of = |active: &[usize]| {
        let start: BTreeMap<ProcessId, CsState> = (0..16)
            .map(|p| match active.contains(&p) {
                true => (id(p), CsState::InCs),
                false => (id(p), CsState::OutCs),
            })
            .collect();
        ViewSystem::new(&cluster, &inst, &start).expect("a view")
    };
    let view = view_of(&[0, 1, 2, 3, 4, 8, 9, 10]);
    assert_eq!(view.surplus(), vec![id(0)], "P0's count is 4");
    assert_eq!(view.deficit(), vec![id(15)], "P15's count is 1");
    assert_eq!(view.built(id(0)).map(|b| (b.l, b.k)), Some((1, 5)));
    assert_eq!(view.built(id(15)).map(|b| (b.l, b.k)), Some((0, 4)));
    let entries: Vec<usize> = (0..16).filter(|&p| view.gates_entries(id(p))).collect();
    let exits: Vec<usize> = (0..16).filter(|&p| view.gates_exits(id(p))).collect();
    assert_eq!(entries, vec![0, 1, 3, 4, 12], "P0's neighbourhood");
    assert_eq!(exits, vec![3, 11, 12, 14, 15], "P15's neighbourhood");
    assert!(
        exits.iter().all(|&p| view.restorable(id(p))),
        "the lower bound was lowered for the count: an entry lifts it"
    );
    let report = view
        .spec()
        .build(Run(SimConfig::default()))
        .expect("the round trip takes both changed bounds");
    assert_eq!(report.safety_violations, 0, "{:?}", report.violations);
    let after_exit = view_of(&[1, 2, 3, 4, 8, 9, 10]);
    assert!(
        after_exit.surplus().is_empty(),
        "P0's exit lifts the surplus"
    );
    assert_eq!(after_exit.deficit(), vec![id(12), id(15)]);
    let after_entry = view_of(&[1, 2, 3, 4, 8, 9, 10, 15]);
    assert!(
        after_entry.surplus().is_empty() && after_entry.deficit().is_empty(),
        "P15's entry lifts the deficit: {after_entry:?}"
    );
}

#[test]
fn a_ring_that_loses_two_members_that_are_not_neighbours_is_two_paths() {
    let cluster = spec(Algorithm::Lmutex, "ring:6", None, Some(1));
    let (inst, initial) = cluster.build(Resolve).expect("the cluster builds");
    let start: BTreeMap<ProcessId, CsState> = [0, 1, 3, 4]
        .into_iter()
        .map(|p| (ProcessId::from(p), initial[p]))
        .collect();
    let view = ViewSystem::new(&cluster, &inst, &start).expect("a view");
    let t = &view.spec().topology;
    let ids = |v: Vec<ProcessId>| v.into_iter().map(|p| p.index()).collect::<Vec<_>>();
    // P0 - P1 and P3 - P4: view processes 0 - 1 and 2 - 3
    assert_eq!(ids(t.closed(ProcessId::from(0))), vec![0, 1]);
    assert_eq!(ids(t.closed(ProcessId::from(2))), vec![2, 3]);
    assert_eq!(t.distances(ProcessId::from(0))[2], None, "two components");
    let report = view
        .spec()
        .build(Run(SimConfig::default()))
        .expect("a disconnected view builds");
    assert_eq!(report.safety_violations, 0);
    assert_eq!(report.requested_pairs_completed, report.pairs_requested);
}

#[test]
fn a_view_naming_a_member_the_cluster_lacks_is_refused_naming_it() {
    let cluster = spec(Algorithm::Maekawa, "complete:3", None, None);
    let (inst, _) = cluster.build(Resolve).expect("the cluster builds");
    let start: BTreeMap<ProcessId, CsState> = [(ProcessId::from(7), CsState::OutCs)].into();
    let err: ConfigError = ViewSystem::new(&cluster, &inst, &start).expect_err("P7 is no member");
    assert_eq!(
        err.problems,
        vec![Problem::UnknownMember {
            member: ProcessId::from(7),
            n: 3
        }]
    );
    let err = ViewSystem::new(&cluster, &inst, &BTreeMap::new()).expect_err("no member");
    assert_eq!(err.problems, vec![Problem::ZeroProcesses]);
}
