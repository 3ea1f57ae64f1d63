#[test]
fn options_an_algorithm_does_not_take_are_named_in_every_spelling() {
    let given = [
        ("--leader", true),
        ("mx", true),
        ("migrate_after", true),
        ("maxreq", false),
    ];
    let texts = |a: Algorithm| -> Vec<String> {
        a.inapplicable(&given, "quota: ")
            .iter()
            .map(ToString::to_string)
            .collect()
    };
    assert_eq!(
        texts(Algorithm::Lkcs),
        [
            "quota: mx does not apply to lkcs; it applies to mutin, kmex, gcs",
            "quota: migrate_after does not apply to lkcs; it applies to mutin, kmex, gcs, cdc, ddc",
        ]
    );
    assert_eq!(
        texts(Algorithm::Gcs),
        ["quota: --leader does not apply to gcs; it applies to lkcs"]
    );
    assert!(Algorithm::Cdc
        .inapplicable(&[("maxreq", true)], "")
        .is_empty());
}

use super::*;

struct Count;
impl SystemVisitor for Count {
    type Output = usize;
    fn visit<A: CsObject>(self, _: &Instance, _: &[CsState], procs: Vec<A>) -> usize {
        procs.len()
    }
}

fn spec(algorithm: Algorithm) -> SystemSpec {
    SystemSpec::new(algorithm, Topology::ring(5).unwrap())
}

#[test]
fn names_round_trip() {
    for a in Algorithm::ALL {
        assert_eq!(a.name().parse::<Algorithm>().unwrap(), a);
    }
    let e = "paxos".parse::<Algorithm>().expect_err("no such algorithm");
    assert!(e.to_string().contains("unknown algorithm `paxos`"), "{e}");
}

#[test]
fn builds_supported_algorithms_and_refuses_the_rest() {
    assert_eq!(spec(Algorithm::Lmutin).build(Count).unwrap(), 5);
    assert_eq!(spec(Algorithm::Lmutex).build(Count).unwrap(), 5);
    // ring:5 has no process of degree 4: the leader rules have no leader, the round trip
    // (the default) needs none
    assert_eq!(spec(Algorithm::Lkcs).build(Count).unwrap(), 5);
    let mut s = spec(Algorithm::Lkcs);
    s.leader = Some(Leaders::Auto);
    let err = s.build(Count).unwrap_err();
    assert!(err.to_string().contains("|N_LDR| >= 4"), "{err}");
    let mut s = spec(Algorithm::Lkcs);
    s.topology = Topology::complete(5).unwrap();
    assert_eq!(s.build(Count).unwrap(), 5);
    // cdc and ddc run on complete graphs only
    let err = spec(Algorithm::Cdc).build(Count).unwrap_err();
    assert!(err.to_string().contains("complete"), "{err}");
    let mut s = spec(Algorithm::Ddc);
    s.topology = Topology::complete(5).unwrap();
    assert_eq!(s.build(Count).unwrap(), 5);
}

#[test]
fn maekawa_needs_a_complete_topology_and_bounds_0_1() {
    let mut s = spec(Algorithm::Maekawa);
    let err = s.build(Count).unwrap_err();
    assert_eq!(err.problems.len(), 1);
    assert!(err.to_string().contains("ring:5"), "{err}");
    s.topology = Topology::complete(5).unwrap();
    assert_eq!(s.build(Count).unwrap(), 5);
    s.coterie = Some(QuorumSystem::Grid);
    assert_eq!(s.build(Count).unwrap(), 5);
    s.l = Some(0);
    s.k = Some(1);
    assert_eq!(s.build(Count).unwrap(), 5);
    s.l = Some(1);
    s.k = Some(2);
    s.topology = Topology::ring(5).unwrap();
    assert_eq!(s.build(Count).unwrap_err().problems.len(), 3);
    s.topology = Topology::complete(5).unwrap();
    s.l = None;
    s.k = None;
    s.bounds = Some(BoundsFile {
        l: Some(vec![0; 5]),
        k: Some(vec![1, 1, 2, 1, 1]),
    });
    assert_eq!(s.build(Count).unwrap_err().problems.len(), 1);
    // an unknown coterie cannot be built: its name is refused where it is parsed
    // (quorums.rs's tests)
    assert!(Algorithm::Maekawa.is_global() && !Algorithm::Lkcs.is_global());
}

/// A bounds file reads absent lists as not given, but refuses `null` lists and unknown keys.
#[test]
fn a_bounds_file_refuses_null_lists() {
    let parse = serde_json::from_str::<BoundsFile>;
    let both = parse(r#"{"l": [1, 2], "k": [3, 3]}"#).unwrap();
    assert_eq!((both.l, both.k), (Some(vec![1, 2]), Some(vec![3, 3])));
    assert_eq!(parse(r#"{"k": [1]}"#).unwrap().l, None);
    for (text, why) in [
        (
            r#"{"l": null, "k": null}"#,
            "invalid type: null, expected a sequence",
        ),
        (r#"{"l": null}"#, "invalid type: null, expected a sequence"),
        (r#"{"m": [1]}"#, "unknown field `m`"),
    ] {
        let e = parse(text).expect_err(text);
        assert!(e.to_string().contains(why), "{text}: {e}");
    }
}

#[test]
fn bounds_come_from_one_place_only() {
    let mut s = spec(Algorithm::Lmutin);
    s.l = Some(1);
    s.bounds = Some(BoundsFile {
        l: Some(vec![1; 5]),
        k: None,
    });
    let e = s.build(Count).expect_err("--l and an l list");
    assert!(
        e.to_string()
            .contains("--l and a `l` list in --bounds are exclusive"),
        "{e}"
    );
    s.l = None;
    s.bounds = Some(BoundsFile {
        l: Some(vec![1; 4]),
        k: None,
    });
    let e = s.build(Count).expect_err("4 values for 5 processes");
    assert!(
        e.to_string()
            .contains("--bounds lists 4 values of l for 5 processes"),
        "{e}"
    );
    let mut s = spec(Algorithm::Lmutin);
    s.k = Some(2);
    let e = s.build(Count).expect_err("lmutin takes no upper bound");
    assert!(
        e.to_string()
            .contains("lmutin fixes k_i = |N_i|+1; upper bounds apply to lmutex"),
        "{e}"
    );
}

#[test]
fn printed_rules_are_validated_by_algorithm_and_variant() {
    let rules = |names: &[&str]| names.iter().collect::<PrintedRules>();
    let s = spec(Algorithm::Lmutin);
    assert_eq!(
        s.build_with_rules(&rules(&["initial-grants"]), Count)
            .unwrap(),
        5
    );
    for bad in [&["nope"][..], &["no-parking"][..]] {
        let err = s.build_with_rules(&rules(bad), Count).unwrap_err();
        assert_eq!(err.problems.len(), 1);
        assert!(err.to_string().contains("counted-grants"), "{err}");
    }
    let mut p = spec(Algorithm::Lmutin);
    p.variant = Variant::Printed;
    let e = p
        .build_with_rules(&rules(&["initial-grants"]), Count)
        .expect_err("a printed rule over the printed variant");
    assert!(
        e.to_string()
            .contains("does not combine with --variant printed"),
        "{e}"
    );
    assert_eq!(p.build_with_rules(&rules(&[]), Count).unwrap(), 5);
    let mut k = spec(Algorithm::Lkcs);
    k.topology = Topology::complete(5).unwrap();
    k.l = Some(1);
    k.k = Some(4);
    let one = rules(&["single-leader", "no-parking"]);
    assert_eq!(k.build_with_rules(&one, Count).unwrap(), 5);
    k.leader = Some(Leaders::All);
    let e = k
        .build_with_rules(&one, Count)
        .expect_err("single-leader with --leader");
    assert!(
        e.to_string()
            .contains("single-leader runs the automatic leader alone; with --leader, leave it out"),
        "{e}"
    );
}

#[test]
fn a_given_unsafe_initial_configuration_is_reported() {
    let mut s = spec(Algorithm::Lmutin);
    s.l = Some(2);
    s.initial = Some(vec![CsState::OutCs; 5]);
    let err = s.build(Count).unwrap_err();
    assert_eq!(err.problems.len(), 5);
}

/// The catalog's refusals are typed: each cause is a variant to match, and its text is the
/// one the CLI prints.
#[test]
fn refusals_are_variants_to_match() {
    let problems = |s: &SystemSpec| s.build(Count).expect_err("refused").problems;
    // every global algorithm on a ring of five: one refusal, naming it
    for alg in [
        Algorithm::Maekawa,
        Algorithm::Cdc,
        Algorithm::Ddc,
        Algorithm::Mutin,
        Algorithm::Kmex,
        Algorithm::Gcs,
    ] {
        assert_eq!(
            problems(&spec(alg)),
            vec![Problem::NeedsCompleteGraph {
                algorithm: alg.to_string(),
                topology: "ring:5".into(),
                n: 5
            }],
            "{alg}"
        );
    }
    // an upper bound for LMUTIN, which fixes k_i
    let mut s = spec(Algorithm::Lmutin);
    s.k = Some(2);
    let p = problems(&s);
    assert!(
        matches!(&p[..], [Problem::FixedBound { algorithm, fixed, .. }] if algorithm == "lmutin" && fixed == "k_i = |N_i|+1"),
        "{p:?}"
    );
    assert_eq!(
        p[0].to_string(),
        "lmutin fixes k_i = |N_i|+1; upper bounds apply to lmutex"
    );
    // a bounds list of the wrong length
    let mut s = spec(Algorithm::Lmutex);
    s.bounds = Some(BoundsFile {
        l: None,
        k: Some(vec![1; 4]),
    });
    assert_eq!(
        problems(&s),
        vec![Problem::BoundsListLength {
            bound: "k".into(),
            given: 4,
            n: 5
        }]
    );
    // a leader with the round trip
    let mut s = spec(Algorithm::Lkcs);
    s.variant = Variant::Trip;
    s.leader = Some(Leaders::Auto);
    assert_eq!(problems(&s), vec![Problem::RoundTripWithLeader]);
    // a printed rule LMUTIN does not have
    let rules: PrintedRules = ["no-parking"].into_iter().collect();
    let e = spec(Algorithm::Lmutin)
        .build_with_rules(&rules, Count)
        .expect_err("no such rule of lmutin");
    assert!(
        matches!(&e.problems[..], [Problem::UnknownPrintedRules { names, algorithm, .. }] if names == &["no-parking"] && algorithm == "lmutin"),
        "{e:?}"
    );
    // an algorithm that is none of the nine
    assert_eq!(
        "paxos".parse::<Algorithm>(),
        Err(Problem::UnknownAlgorithm {
            given: "paxos".into(),
            accepted: Algorithm::ALL
                .iter()
                .map(|a| a.name().to_string())
                .collect()
        })
    );
}
