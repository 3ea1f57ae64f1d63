//! Tests of the cluster file: reading, checking and refusing it.

use super::*;

fn example() -> Cluster {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster3.toml");
    Cluster::load(&path).expect("the example cluster file reads")
}

/// The example keys are the ones [`EXAMPLE_KEYS`] lists: a node refuses them unless
/// allowed, naming the file.
#[test]
fn the_example_keys_are_refused_unless_allowed() {
    let mut cluster = example();
    for i in 0..3u32 {
        let id = ProcessId(i);
        assert_eq!(
            cluster.public_key(id).map(|k| k.to_string()).as_deref(),
            Some(EXAMPLE_KEYS[i as usize])
        );
        match cluster.member_key(id) {
            Err(NetError::Credentials(e)) => {
                assert!(e.contains(&format!("cluster3-keys/{i}.key")), "{e}");
                assert!(e.contains("an example key"), "{e}");
            }
            other => panic!("member {i}: {other:?}"),
        }
    }
    cluster.allow_example_keys(true);
    for i in 0..3u32 {
        let key = cluster.member_key(ProcessId(i)).expect("allowed");
        assert_eq!(Some(key.public()), cluster.public_key(ProcessId(i)));
    }
}

/// The quota's names are parsed after the applicability check, and an unknown one is
/// reported with what building the quota without it finds.
#[test]
fn the_quota_names_are_checked_in_order_and_with_the_rest() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster3.toml"),
    )
    .expect("the example reads");
    let with = |from: &str, to: &str| {
        let t = text.replacen(from, to, 1);
        Cluster::parse_in(
            &t,
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("examples")
                .as_path(),
        )
        .expect_err("refused")
        .problems
    };
    // a name an algorithm does not take: said so, whatever the name
    let p = with(
        "algorithm = \"gcs\"",
        "algorithm = \"lmutin\"\ncoterie = \"tree\"",
    );
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        matches!(&p[0], Problem::NotApplicable { option, .. } if option == "coterie"),
        "the option does not apply to lmutin: {p:?}"
    );
    // an unknown coterie and bounds GCS refuses: both
    let p = with("k = 2", "k = 1\ncoterie = \"tree\"");
    assert!(
        p.contains(&Problem::Coterie(crate::CoterieProblem::UnknownName(
            "tree".into()
        ))),
        "{p:?}"
    );
    assert_eq!(p.len(), 2, "the coterie and the bounds l = 1, k = 1: {p:?}");
    // a leader's index as an integer reads as the string does (gcs then refuses the key)
    let as_text = with("k = 2", "k = 2\nleader = \"3\"");
    assert!(
        matches!(&as_text[..], [Problem::NotApplicable { option, .. }] if option == "leader"),
        "{as_text:?}"
    );
    assert_eq!(with("k = 2", "k = 2\nleader = 3"), as_text);
    for bad in ["leader = true", "leader = -1"] {
        let p = with("k = 2", &format!("k = 2\n{bad}"));
        assert!(
            p.iter().any(|p| p
                .to_string()
                .contains("a leader: \"auto\", \"all\" or a leader's index")),
            "`{bad}` is refused naming what the key takes: {p:?}"
        );
    }
}

#[test]
fn the_old_format_is_refused_with_a_pointer_to_cluster_init() {
    let old = "secret = \"a shared secret, 16 bytes+\"\n[quota]\nalgorithm = \"gcs\"\n[members]\n0 = \"127.0.0.1:7411\"\n";
    let e = Cluster::parse(old).unwrap_err();
    assert_eq!(e.problems.len(), 1);
    assert!(e.problems[0].to_string().contains("lkcs cluster init"));
}

/// The file's own rules are [`ClusterProblem`]s to match: every member problem at once, a
/// file read from disk named around each problem.
#[test]
fn the_files_own_refusals_are_cluster_problems() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples");
    let text = std::fs::read_to_string(dir.join("cluster3.toml")).expect("the example reads");
    let key1 = EXAMPLE_KEYS[1];
    // member 2's address and member 1's key given to member 2 as well
    let bad = text
        .replacen("127.0.0.1:7413", "nowhere", 1)
        .replacen(EXAMPLE_KEYS[2], key1, 1);
    let p = Cluster::parse_in(&bad, &dir).expect_err("refused").problems;
    assert_eq!(
        p,
        vec![
            Problem::Cluster(ClusterProblem::BadAddress {
                member: 2,
                address: "nowhere".into()
            }),
            Problem::Cluster(ClusterProblem::SharedKey {
                first: 1,
                second: 2
            }),
        ],
        "{p:?}"
    );
    let p = Cluster::parse_in("[quota]\nalgorithm = \"gcs\"\n[members]\n", &dir)
        .expect_err("refused")
        .problems;
    assert_eq!(p, vec![Problem::Cluster(ClusterProblem::NoMembers)]);
    let p = Cluster::parse_in("[quota\n", &dir)
        .expect_err("refused")
        .problems;
    assert!(
        matches!(
            &p[..],
            [Problem::Cluster(ClusterProblem::NotToml {
                line: Some(1),
                ..
            })]
        ),
        "{p:?}"
    );
    // a section whose id is not a number is one problem: the id it leaves missing and the
    // member count short of the topology's are not reported besides (they were)
    let bad = text.replacen("[members.1]", "[members.one]", 1);
    let p = Cluster::parse_in(&bad, &dir).expect_err("refused").problems;
    assert_eq!(
        p,
        vec![Problem::Cluster(ClusterProblem::NotAMemberId("one".into()))],
        "{p:?}"
    );
    // ids missing beyond one per bad section are still reported: 0, x and 7 of three
    let bad =
        text.replacen("[members.1]", "[members.x]", 1)
            .replacen("[members.2]", "[members.7]", 1);
    let p = Cluster::parse_in(&bad, &dir).expect_err("refused").problems;
    assert_eq!(
        p,
        vec![
            Problem::Cluster(ClusterProblem::NotAMemberId("x".into())),
            Problem::Cluster(ClusterProblem::MissingId { missing: 1, n: 3 }),
        ],
        "{p:?}"
    );
    // a port 0 is refused: no peer can dial it (it was accepted, and never connected)
    let bad = text.replacen("127.0.0.1:7412", "127.0.0.1:0", 1);
    let p = Cluster::parse_in(&bad, &dir).expect_err("refused").problems;
    assert_eq!(
        p,
        vec![Problem::Cluster(ClusterProblem::PortZero { member: 1 })],
        "{p:?}"
    );
    // read from disk: the file is named, the problem kept
    let tmp = std::env::temp_dir().join(format!("lkcs-cluster-test-{}.toml", std::process::id()));
    std::fs::write(&tmp, "[quota]\nalgorithm = \"gcs\"\n[members]\n").expect("writes");
    let p = Cluster::load(&tmp).expect_err("refused").problems;
    let _ = std::fs::remove_file(&tmp);
    assert!(
        matches!(&p[..], [Problem::Cluster(ClusterProblem::InFile { problem, .. })]
            if **problem == Problem::Cluster(ClusterProblem::NoMembers)),
        "{p:?}"
    );
}
