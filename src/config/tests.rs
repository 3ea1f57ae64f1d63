use super::*;

fn uniform(t: Topology, l: usize, k: usize) -> Result<Instance, ConfigError> {
    let n = t.len();
    Instance::new(t, vec![Bounds { l, k }; n])
}

/// Every process that some configuration reachable from `start` by moves within the
/// bounds lets move, found exhaustively (small instances only).
fn movers_reachable(inst: &Instance, start: &[CsState]) -> usize {
    let mut seen = std::collections::HashSet::from([start.to_vec()]);
    let mut todo = vec![start.to_vec()];
    let mut movers = vec![false; inst.len()];
    while let Some(mut c) = todo.pop() {
        for p in inst.topology().processes() {
            if inst.move_keeps_bounds(&mut c, p) {
                movers[p.index()] = true;
                let mut d = c.clone();
                d[p.index()] = !d[p.index()];
                if seen.insert(d.clone()) {
                    todo.push(d);
                }
            }
        }
    }
    movers.iter().filter(|&&m| m).count()
}

#[test]
fn a_movable_start_leaves_the_dead_ends_of_the_safe_configurations() {
    // torus:5x5 with [2, 3] everywhere: from this start only P10..P14 can ever move
    let inst = uniform(Topology::torus(5, 5).unwrap(), 2, 3).unwrap();
    let dead = parse_initial("in:0,1,2,4,7,9,10,11,13,15,16,18,23", 25).unwrap();
    assert!(inst.violations(&dead).is_empty());
    assert_eq!(movers_reachable(&inst, &dead), 5);
    let start = inst.movable_start(dead.clone());
    assert!(inst.violations(&start).is_empty());
    assert_eq!(movers_reachable(&inst, &start), 25);
    // a start from which every process moves is kept
    assert_eq!(inst.movable_start(start.clone()), start);
}

#[test]
fn bounds_are_validated_per_process() {
    let err = uniform(Topology::star(4).unwrap(), 1, 3).unwrap_err();
    // the three leaves have |N|+1 = 2 < 3
    assert_eq!(err.problems.len(), 3);
    let err = uniform(Topology::ring(4).unwrap(), 2, 2).expect_err("l = k");
    assert_eq!(err.problems.len(), 4, "{err}");
    for p in &err.problems {
        assert!(
            matches!(
                p,
                Problem::Bound {
                    l: 2,
                    k: 2,
                    closed: 3,
                    ..
                }
            ),
            "{err:?}"
        );
    }
    assert!(uniform(Topology::ring(4).unwrap(), 1, 2).is_ok());
}

/// Brute force: the processes that cannot move from any safe configuration.
fn immovable_by_enumeration(inst: &Instance) -> Vec<ProcessId> {
    let safe = inst.safe_configurations().unwrap();
    inst.topology()
        .processes()
        .filter(|&p| {
            !safe.iter().any(|c| {
                let mut c = c.clone();
                inst.move_keeps_bounds(&mut c, p)
            })
        })
        .collect()
}

#[test]
fn a_hub_beyond_the_local_limit_is_not_tested_and_not_reported() {
    // star:5000: every process's judges add up to more than LOCAL_REACH_LIMIT processes,
    // so no process is tested (each test would enumerate the whole star)
    let t = Topology::star(5000).unwrap();
    let bounds = t
        .processes()
        .map(|p| Bounds {
            l: 0,
            k: (t.degree(p) + 1).min(3),
        })
        .collect();
    let inst = Instance::new(t, bounds).unwrap();
    let p = ProcessId::from(1usize);
    assert_eq!(inst.can_move_locally(p, CsState::OutCs, 20_000), None);
    assert!(inst.immovable(20_000).is_empty());
}

#[test]
fn immovable_processes_are_exactly_those_no_safe_configuration_lets_move() {
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut frozen_seen = 0;
    let mut movable_seen = 0;
    for round in 0..300u64 {
        let t = match round % 4 {
            0 => Topology::torus(3, 4).unwrap(),
            1 => Topology::grid(3, 4).unwrap(),
            2 => Topology::random(11, 0.35, round).unwrap(),
            _ => Topology::complete(6).unwrap(),
        };
        let bounds: Vec<Bounds> = t
            .processes()
            .map(|p| {
                let c = t.degree(p) + 1;
                let l = rng.random_range(0..c);
                Bounds {
                    l,
                    k: rng.random_range(l + 1..=c),
                }
            })
            .collect();
        let inst = Instance::new(t, bounds).unwrap();
        if inst.safe_configurations().unwrap().is_empty() {
            continue;
        }
        let expected = immovable_by_enumeration(&inst);
        assert_eq!(inst.immovable(1_000_000), expected, "round {round}");
        frozen_seen += expected.len();
        movable_seen += inst.len() - expected.len();
    }
    // the sample has both kinds, so the comparison is not vacuous
    assert!(
        frozen_seen > 0 && movable_seen > 0,
        "{frozen_seen} {movable_seen}"
    );
}

#[test]
fn safe_search_finds_a_configuration_that_is_checked_safe() {
    for (t, l, k) in [
        (Topology::torus(4, 4).unwrap(), 1, 4),
        (Topology::ring(7).unwrap(), 1, 2),
        (Topology::complete(5).unwrap(), 2, 3),
        (Topology::grid(3, 4).unwrap(), 1, 2),
    ] {
        let inst = uniform(t, l, k).unwrap();
        let s = inst.find_safe_initial().unwrap();
        assert!(inst.violations(&s).is_empty());
    }
}

#[test]
fn safe_configurations_are_every_safe_assignment() {
    // complete:3 with (1, 2): one or two of the three in the CS
    let inst = uniform(Topology::complete(3).unwrap(), 1, 2).unwrap();
    let all = inst.safe_configurations().unwrap();
    assert_eq!(all.len(), 6);
    assert!(all.iter().all(|s| inst.violations(s).is_empty()));
    let big = uniform(Topology::ring(21).unwrap(), 0, 2).unwrap();
    assert!(big.safe_configurations().is_none());
}

#[test]
fn safe_search_reports_impossibility() {
    // path:3 with (1, 1) everywhere: P0 needs exactly one of {P0, P1} in the CS, P2
    // exactly one of {P1, P2}, P1 exactly one of all three: only {P1} works; forbid it by
    // asking (2, 2) at P1 instead.
    let t = Topology::path(3).unwrap();
    let inst = Instance::new(
        t,
        vec![
            Bounds { l: 0, k: 1 },
            Bounds { l: 2, k: 3 },
            Bounds { l: 0, k: 1 },
        ],
    )
    .unwrap();
    // P1 needs two of {P0,P1,P2}; P0 allows at most one of {P0,P1}, P2 one of {P1,P2}:
    // {P0, P2} works.
    assert!(inst.find_safe_initial().is_ok());
    let t = Topology::complete(3).unwrap();
    let inst = Instance::new(
        t,
        vec![
            Bounds { l: 2, k: 3 },
            Bounds { l: 0, k: 1 },
            Bounds { l: 0, k: 1 },
        ],
    )
    .unwrap();
    assert!(matches!(
        inst.find_safe_initial(),
        Err(Problem::NoSafeInitial(_))
    ));
}

#[test]
fn observed_counts_follow_every_change() {
    let inst = uniform(Topology::path(3).unwrap(), 1, 2).unwrap();
    let mut o = Observed::new(&inst, vec![CsState::OutCs, CsState::InCs, CsState::OutCs]);
    assert!(o.broken(&inst).is_empty());
    // P1 leaving empties every closed neighbourhood
    let broken = o.apply(&inst, ProcessId(1), CsState::OutCs);
    assert_eq!(
        broken,
        vec![(ProcessId(0), 0), (ProcessId(1), 0), (ProcessId(2), 0)]
    );
    assert_eq!(o.broken(&inst).len(), 3);
    assert!(
        o.apply(&inst, ProcessId(1), CsState::OutCs).is_empty(),
        "no change, no report"
    );
    o.apply(&inst, ProcessId(0), CsState::InCs);
    let broken = o.apply(&inst, ProcessId(2), CsState::InCs);
    assert_eq!(broken, vec![]);
    assert_eq!(o.states(), &[CsState::InCs, CsState::OutCs, CsState::InCs]);
    // all three in: P1 sees 3 > k = 2
    assert_eq!(
        o.apply(&inst, ProcessId(1), CsState::InCs),
        vec![(ProcessId(1), 3)]
    );
}

#[test]
fn initial_specs_round_trip_and_reject_junk() {
    let s = parse_initial("in:0,2", 3).unwrap();
    assert_eq!(s, vec![CsState::InCs, CsState::OutCs, CsState::InCs]);
    assert_eq!(format_initial(&s), "in:0,2");
    assert_eq!(parse_initial("in:", 2).unwrap(), vec![CsState::OutCs; 2]);
    assert_eq!(parse_initial("in:5,x", 3).unwrap_err().problems.len(), 2);
    let e = parse_initial("0,1", 3).expect_err("no in: prefix");
    assert!(e.to_string().contains("must look like in:I,J,..."), "{e}");
    // a repeated index and an empty entry are mistakes, not silently merged or skipped
    let twice = parse_initial("in:0,0", 3).unwrap_err().to_string();
    assert!(twice.contains("P0 twice"), "{twice}");
    for spec in ["in:0,,1", "in:0,", "in:,1"] {
        let err = parse_initial(spec, 3).unwrap_err().to_string();
        assert!(err.contains("empty entry"), "{spec}: {err}");
    }
    assert_eq!(parse_initial("in: 1 , 2", 3).unwrap()[2], CsState::InCs);
}

/// On a complete graph the observer keeps one count; after every flip of a random walk it
/// reports exactly the processes a from-scratch count finds broken, and its move costs
/// agree with the instance's.
#[test]
fn the_global_observer_agrees_with_counting_from_scratch() {
    let n = 7;
    let bounds: Vec<Bounds> = (0..n)
        .map(|i| Bounds {
            l: i % 3,
            k: 4 + i % 3,
        })
        .collect();
    let inst = Instance::new(Topology::complete(n).unwrap(), bounds).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(5);
    let mut states = vec![CsState::OutCs; n];
    let mut obs = Observed::new(&inst, states.clone());
    for _ in 0..500 {
        let p = ProcessId::from(rng.random_range(0..n));
        let mut probe = states.clone();
        assert_eq!(
            obs.bounds_broken_by_move(&inst, p),
            inst.bounds_broken_by_move(&mut probe, p)
        );
        states[p.index()] = !states[p.index()];
        let broken: Vec<ProcessId> = obs
            .apply(&inst, p, states[p.index()])
            .into_iter()
            .map(|(q, _)| q)
            .collect();
        let expected: Vec<ProcessId> = inst
            .topology()
            .processes()
            .filter(|&q| !inst.holds_at(&states, q))
            .collect();
        assert_eq!(broken, expected);
        assert_eq!(obs.broken(&inst).len(), expected.len());
    }
}
