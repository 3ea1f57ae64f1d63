//! `lkcs node` as real OS processes on 127.0.0.1: clusters of the global and local
//! algorithms under a monitor every node reports to synchronously, a node killed with
//! SIGKILL, connections reset by a proxy, a member with the wrong secret or quota, garbage on
//! a node's port, and the line protocol.
//!
//! Ports are chosen free at run time. Every process runs under a hang guard: a test that
//! would hang fails instead.

use crate::{ports, procs};

use lkcs::net::Cluster;
use lkcs::ProcessId;
use ports::free_ports;
use procs::*;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// Starts every member with `--workload cycle --pairs P --json` under a monitor and waits for
/// all of them.
fn run_cycle(dir: &Path, text: &str, pairs: usize) -> (Vec<Ended>, Monitor, Cluster) {
    run_watched(dir, text, None, pairs)
}

/// [`run_cycle`], the monitor checking the bounds of `watched` (a cluster file's text)
/// instead of the cluster's own.
fn run_watched(
    dir: &Path,
    text: &str,
    watched: Option<&str>,
    pairs: usize,
) -> (Vec<Ended>, Monitor, Cluster) {
    let file = write(dir, "cluster.toml", text);
    let cluster = Cluster::load(&file).unwrap();
    let monitor = match watched {
        None => Monitor::start(&cluster),
        Some(w) => Monitor::start(&Cluster::parse(w).unwrap()),
    };
    let started = Instant::now();
    let p = pairs.to_string();
    let m = monitor.arg();
    let nodes: Vec<Node> = (0..cluster.len())
        .map(|i| {
            spawn_node(
                &file,
                i,
                &[
                    "--workload",
                    "cycle",
                    "--pairs",
                    &p,
                    "--json",
                    "--monitor",
                    &m,
                ],
            )
        })
        .collect();
    let ended = nodes.into_iter().map(|n| finish(n, started)).collect();
    (ended, monitor, cluster)
}

/// Runs `lkcs node --cluster FILE ARGS...` to its end (a node that refuses its input): its
/// exit code and stderr.
fn node_run(file: &Path, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BIN)
        .arg("node")
        .arg("--cluster")
        .arg(file)
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Every node exited 0 having made its pairs; the monitor saw every move and no bound broken;
/// on every link, the receiver got exactly the sender's messages, in order.
fn assert_clean_run(ended: &[Ended], monitor: &Monitor, pairs: usize) {
    for e in ended {
        assert_done(e, pairs);
    }
    assert_eq!(monitor.violations(), Vec::<String>::new());
    let w = monitor.state.lock().unwrap();
    let moves: u64 = ended
        .iter()
        .map(|e| 2 * e.json()["pairs_completed"].as_u64().unwrap())
        .sum();
    assert!(
        w.reports as u64 >= moves,
        "the monitor saw {} state changes, the nodes report {moves} moves",
        w.reports
    );
    drop(w);
    assert_links_agree(ended);
}

/// For every ordered pair of neighbours: messages sent by one == messages received by the
/// other, with the same chained hash (exactly once, in order).
fn assert_links_agree(ended: &[Ended]) {
    let reports: Vec<serde_json::Value> = ended.iter().map(Ended::json).collect();
    let mut checked = 0;
    for (i, r) in reports.iter().enumerate() {
        for (j, link) in r["links"].as_object().unwrap() {
            let j: usize = j.parse().unwrap();
            let back = &reports[j]["links"][i.to_string()];
            assert_eq!(
                (&link["sent"], &link["sent_hash"]),
                (&back["received"], &back["received_hash"]),
                "P{i} -> P{j}: sent and received differ"
            );
            checked += 1;
        }
    }
    assert!(checked > 0);
}

/// (2,5)-GCS on 8 nodes: at least 2 and at most 5 active at every report.
#[test]
fn gcs_two_to_five_of_eight() {
    let dir = scratch("gcs8");
    let ports = free_ports(8);
    let text = cluster_text(
        SECRET,
        "algorithm = \"gcs\"\ntopology = \"complete:8\"\nl = 2\nk = 5",
        &ports,
        5000,
    );
    let (ended, monitor, _) = run_cycle(&dir, &text, 15);
    assert_clean_run(&ended, &monitor, 15);
    let w = monitor.state.lock().unwrap();
    assert!(w.min_in_cs >= 2 && w.max_in_cs <= 5);
    assert!(w.max_in_cs > w.min_in_cs, "nobody moved");
}

/// 1-LMUTIN on a ring of 6: no closed neighbourhood ever empty.
#[test]
fn lmutin_on_a_ring_of_six() {
    let dir = scratch("ring6");
    let ports = free_ports(6);
    let text = cluster_text(
        SECRET,
        "algorithm = \"lmutin\"\ntopology = \"ring:6\"\nl = 1",
        &ports,
        5000,
    );
    let (ended, monitor, _) = run_cycle(&dir, &text, 15);
    assert_clean_run(&ended, &monitor, 15);
}

/// Mutual exclusion among 5: Maekawa (majority quorums) and CDC.
#[test]
fn mutual_exclusion_among_five() {
    for alg in ["maekawa", "cdc"] {
        let dir = scratch(alg);
        let ports = free_ports(5);
        let text = cluster_text(
            SECRET,
            &format!("algorithm = \"{alg}\"\ntopology = \"complete:5\""),
            &ports,
            5000,
        );
        let (ended, monitor, _) = run_cycle(&dir, &text, 15);
        assert_clean_run(&ended, &monitor, 15);
        assert_eq!(monitor.state.lock().unwrap().max_in_cs, 1, "{alg}");
    }
}

/// The monitor sees real overlaps: nodes of a quota of at most 2 active, checked against
/// mutual exclusion, are caught with two members active at once.
#[test]
fn the_monitor_catches_a_broken_bound() {
    let dir = scratch("catch");
    let ports = free_ports(3);
    let quota = |k: usize| {
        cluster_text(
            SECRET,
            &format!(
                "algorithm = \"kmex\"\ntopology = \"complete:3\"\nk = {k}\ninitial = \"in:0\""
            ),
            &ports,
            5000,
        )
    };
    // enough pairs that two members overlap under any scheduling the test has met
    let (ended, monitor, _) = run_watched(&dir, &quota(2), Some(&quota(1)), 200);
    for e in &ended {
        assert_eq!(e.code, Some(0), "node {}: {}", e.id, e.stderr);
    }
    let v = monitor.violations();
    assert!(!v.is_empty(), "two of three active never seen");
    assert!(v[0].contains("outside [0, 1]"), "{}", v[0]);
    assert_eq!(monitor.state.lock().unwrap().max_in_cs, 2);
}

/// Without views (`evict_after_ms = 0`), a node killed with SIGKILL mid-run: every survivor
/// exits 1 within the peer timeout (and a margin), with an `error:` line naming the dead
/// member; no bound broken before. (With views the survivors evict it and go on:
/// tests/net/faults.rs.)
#[test]
fn without_views_a_killed_node_is_named_by_the_survivors() {
    let dir = scratch("kill");
    let ports = free_ports(4);
    let timeout_ms = 1000;
    let text = cluster_text(
        SECRET,
        "algorithm = \"gcs\"\ntopology = \"complete:4\"\nl = 1\nk = 2",
        &ports,
        timeout_ms,
    ) + "evict_after_ms = 0\n";
    let file = write(&dir, "cluster.toml", &text);
    let cluster = Cluster::load(&file).unwrap();
    let monitor = Monitor::start(&cluster);
    let m = monitor.arg();
    let args = [
        "--workload",
        "cycle",
        "--pairs",
        "1000000000",
        "--monitor",
        &m,
    ];
    let started = Instant::now();
    let mut nodes: Vec<Node> = (0..4).map(|i| spawn_node(&file, i, &args)).collect();
    // wait until the run is under way: every node has moved (each started its workload,
    // so all its neighbours had connected)
    while monitor.state.lock().unwrap().movers.len() < 4 {
        assert!(started.elapsed() < GUARD, "the cluster never started");
        thread::sleep(Duration::from_millis(5));
    }
    let mut victim = nodes.remove(2);
    victim.child.kill().unwrap(); // SIGKILL
    let killed = Instant::now();
    victim.child.wait().unwrap();
    for n in nodes {
        let e = finish(n, started);
        assert_eq!(e.code, Some(1), "node {}: {}", e.id, e.stderr);
        let error = error_line(&e);
        assert!(error.contains("P2"), "node {}: {error}", e.id);
        let after = killed.elapsed();
        eprintln!("node {} named P2 {after:?} after the kill", e.id);
        assert!(
            after < Duration::from_millis(timeout_ms) * 10,
            "node {} took {after:?} to notice",
            e.id
        );
    }
    assert_eq!(monitor.violations(), Vec::<String>::new());
}

/// A proxy in front of every member that resets each connection after a random number of
/// bytes: the run completes, every link delivered exactly the messages sent, in order, and
/// the bounds held. Without views: their log's and leases' traffic through resets this
/// frequent delayed a majority's answers past the lease, and a member fenced (docs/net.md).
#[test]
fn connections_reset_mid_run_lose_and_duplicate_nothing() {
    let dir = scratch("resets");
    let n = 4;
    // one call, so that no proxy port can be a node's too
    let ports = free_ports(2 * n);
    let (public, real) = ports.split_at(n);
    let text = cluster_text(
        SECRET,
        "algorithm = \"gcs\"\ntopology = \"complete:4\"\nl = 1\nk = 3",
        public,
        5000,
    ) + "evict_after_ms = 0\n";
    let file = write(&dir, "cluster.toml", &text);
    let cluster = Cluster::load(&file).unwrap();
    let resets = Arc::new(AtomicUsize::new(0));
    for i in 0..n {
        proxy(public[i], real[i], 300..3000, i as u64, resets.clone());
    }
    let monitor = Monitor::start(&cluster);
    let m = monitor.arg();
    let started = Instant::now();
    let nodes: Vec<Node> = (0..n)
        .map(|i| {
            let bind = format!("127.0.0.1:{}", real[i]);
            spawn_node(
                &file,
                i,
                &[
                    "--workload",
                    "cycle",
                    "--pairs",
                    "40",
                    "--json",
                    "--monitor",
                    &m,
                    "--bind",
                    &bind,
                ],
            )
        })
        .collect();
    let ended: Vec<Ended> = nodes.into_iter().map(|n| finish(n, started)).collect();
    assert_clean_run(&ended, &monitor, 40);
    assert!(
        resets.load(Ordering::SeqCst) >= 3,
        "only {} resets",
        resets.load(Ordering::SeqCst)
    );
}

/// Forwards `from` to `to`, resetting each connection after a random number of bytes in
/// `cut` (counted both ways).
fn proxy(from: u16, to: u16, cut: std::ops::Range<usize>, seed: u64, resets: Arc<AtomicUsize>) {
    let listener = TcpListener::bind(("127.0.0.1", from)).unwrap();
    thread::spawn(move || {
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        for conn in listener.incoming() {
            let Ok(a) = conn else { return };
            let Ok(b) = TcpStream::connect(("127.0.0.1", to)) else {
                continue;
            };
            // as the links do: no Nagle delay on the relayed hop either
            let _ = (a.set_nodelay(true), b.set_nodelay(true));
            let budget = Arc::new(AtomicUsize::new(rng.random_range(cut.clone())));
            let dead = Arc::new(AtomicBool::new(false));
            for (mut r, mut w) in [
                (a.try_clone().unwrap(), b.try_clone().unwrap()),
                (b.try_clone().unwrap(), a.try_clone().unwrap()),
            ] {
                let (budget, dead, resets) = (budget.clone(), dead.clone(), resets.clone());
                thread::spawn(move || {
                    let mut buf = [0u8; 512];
                    loop {
                        let got = match r.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(got) => got,
                        };
                        let left = budget.load(Ordering::SeqCst);
                        let send = got.min(left);
                        if w.write_all(&buf[..send]).is_err() {
                            break;
                        }
                        budget.fetch_sub(send, Ordering::SeqCst);
                        if send < got {
                            if !dead.swap(true, Ordering::SeqCst) {
                                resets.fetch_add(1, Ordering::SeqCst);
                            }
                            break;
                        }
                    }
                    let _ = r.shutdown(std::net::Shutdown::Both);
                    let _ = w.shutdown(std::net::Shutdown::Both);
                });
            }
        }
    });
}

/// A member whose file pins other keys (it holds a key the cluster does not know), and one
/// whose quota differs, are refused on both sides; the real cluster completes unaffected.
#[test]
fn a_wrong_key_or_quota_is_refused_and_the_cluster_is_unaffected() {
    side_by_side(
        [
            (
                "key",
                "another key set",
                "algorithm = \"gcs\"\ntopology = \"complete:3\"\nl = 1\nk = 2",
            ),
            (
                "quota",
                SECRET,
                "algorithm = \"gcs\"\ntopology = \"complete:3\"\nl = 1\nk = 3",
            ),
        ],
        |(what, secret, quota)| {
            let dir = scratch(&format!("rogue-{what}"));
            let mut ports = free_ports(4);
            let spare = ports.pop().unwrap();
            let good = cluster_text(
                SECRET,
                "algorithm = \"gcs\"\ntopology = \"complete:3\"\nl = 1\nk = 2",
                &ports,
                5000,
            );
            let bad = write(
                &dir,
                "rogue.toml",
                &cluster_text(secret, quota, &ports, 5000),
            );
            // the rogue claims member 1 on a spare port and dials member 2
            let started = Instant::now();
            let bind = format!("127.0.0.1:{spare}");
            let rogue = spawn_node(
                &bad,
                1,
                &[
                    "--workload",
                    "cycle",
                    "--start-timeout",
                    "3",
                    "--bind",
                    &bind,
                ],
            );
            thread::sleep(Duration::from_millis(300));
            // long enough (about a second) for the rogue, redialling every 200 ms at most, to
            // reach member 2 while it runs
            let (ended, monitor, _) = run_cycle(&dir, &good, 300);
            assert_clean_run(&ended, &monitor, 300);
            let r = finish(rogue, started);
            assert_eq!(r.code, Some(1), "{what}: {}", r.stderr);
            assert!(
                r.stderr.contains("refused"),
                "{what}: the rogue does not say it was refused: {}",
                r.stderr
            );
            assert!(
                ended[2].stderr.contains("refused"),
                "{what}: member 2 does not log the refusal: {}",
                ended[2].stderr
            );
        },
    );
}

/// Garbage on a node's port while the cluster runs: dropped, and the cluster completes.
#[test]
fn garbage_on_a_port_is_dropped_and_the_node_keeps_serving() {
    let dir = scratch("garbage");
    let ports = free_ports(3);
    let text = cluster_text(
        SECRET,
        "algorithm = \"gcs\"\ntopology = \"complete:3\"\nl = 1\nk = 2",
        &ports,
        5000,
    );
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicUsize::new(0));
    let spammer = {
        let (stop, sent, port) = (stop.clone(), sent.clone(), ports[0]);
        thread::spawn(move || {
            let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
            while !stop.load(Ordering::SeqCst) {
                if let Ok(mut s) = TcpStream::connect(("127.0.0.1", port)) {
                    let len = rng.random_range(1..4096);
                    let bytes: Vec<u8> = (0..len).map(|_| rng.random()).collect();
                    if s.write_all(&bytes).is_ok() {
                        sent.fetch_add(1, Ordering::SeqCst);
                    }
                }
                thread::sleep(Duration::from_millis(2));
            }
        })
    };
    let (ended, monitor, _) = run_cycle(&dir, &text, 200);
    stop.store(true, Ordering::SeqCst);
    spammer.join().unwrap();
    assert_clean_run(&ended, &monitor, 200);
    assert!(
        sent.load(Ordering::SeqCst) > 0,
        "no garbage reached the node"
    );
}

/// The line protocol: three nodes of a (1,2) quota driven through stdin/stdout. The last
/// active member's exit blocks (timing out) until another member enters. Entries answer
/// their fencing tokens; P0's `--metrics` count its calls by outcome.
#[test]
fn the_line_protocol_keeps_the_lower_bound() {
    let dir = scratch("lines");
    let ports = free_ports(3);
    let text = cluster_text(
        SECRET,
        "algorithm = \"gcs\"\ntopology = \"complete:3\"\nl = 1\nk = 2\ninitial = \"in:0\"",
        &ports,
        5000,
    );
    let file = write(&dir, "cluster.toml", &text);
    let metrics = format!("127.0.0.1:{}", free_ports(1)[0]);
    let mut nodes: Vec<(Child, BufReader<std::process::ChildStdout>)> = (0..3)
        .map(|i| {
            let extra: &[&str] = match i {
                0 => &["--metrics", &metrics],
                _ => &[],
            };
            let mut child = Command::new(BIN)
                .arg("node")
                .arg("--cluster")
                .arg(&file)
                .args(["--id", &i.to_string()])
                .args(extra)
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let out = BufReader::new(child.stdout.take().unwrap());
            (child, out)
        })
        .collect();
    let mut ask = |i: usize, cmd: &str| -> String {
        let (child, out) = &mut nodes[i];
        writeln!(child.stdin.as_mut().unwrap(), "{cmd}").unwrap();
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        line.trim().to_string()
    };
    assert_eq!(ask(0, "state"), "ok active");
    assert_eq!(ask(1, "state"), "ok inactive");
    // the only active member cannot leave
    assert!(ask(0, "exit 300").starts_with("error: timed out"));
    assert_eq!(ask(0, "state"), "ok exiting");
    let first = entered(&ask(1, "enter"), "P1's enter");
    assert_eq!(first.member, 1, "{first}");
    // idempotent: the same entry, the same token
    assert_eq!(entered(&ask(1, "enter"), "P1's enter again"), first);
    // now member 0's pending exit completes
    assert_eq!(ask(0, "exit"), "ok");
    assert_eq!(ask(0, "state"), "ok inactive");
    let second = entered(&ask(2, "enter"), "P2's enter");
    assert_eq!(second.member, 2, "{second}");
    // two active: at most 2, so a third entry blocks
    assert!(ask(0, "enter 300").starts_with("error: timed out"));
    assert_eq!(ask(2, "exit"), "ok");
    // P2's exit reached P0 (it waited on it): P0's entry's clock is above P2's entry's
    let third = entered(&ask(0, "enter"), "P0's enter");
    assert!(third > second, "{third} after {second}");
    assert!(ask(1, "bogus").starts_with("error: unknown command"));
    // P0's calls, as its metrics count them: one exit and one entry completed, one of each
    // timed out (cancelled); it is active; it sent its peers messages
    let text = http_get(&metrics, "/metrics");
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    for line in [
        "lkcs_calls_total{call=\"exit\",outcome=\"ok\"} 1",
        "lkcs_calls_total{call=\"exit\",outcome=\"cancelled\"} 1",
        "lkcs_calls_total{call=\"enter\",outcome=\"ok\"} 1",
        "lkcs_calls_total{call=\"enter\",outcome=\"cancelled\"} 1",
        "lkcs_pairs_total 1",
        "lkcs_entries_total 1",
        "lkcs_enter_wait_seconds_count 1",
        "lkcs_member_state{state=\"active\"} 1",
        "lkcs_peers_unreachable 0",
    ] {
        assert!(text.lines().any(|l| l == line), "no `{line}` in:\n{text}");
    }
    let sent_to_1: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("lkcs_messages_sent_total{peer=\"1\"} "))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no messages sent to P1 in:\n{text}"));
    assert!(sent_to_1 > 0, "{text}");
    assert!(http_get(&metrics, "/other").starts_with("HTTP/1.1 404"));
    for i in 0..3 {
        assert_eq!(ask(i, "quit"), "ok");
    }
    for (mut child, _) in nodes {
        assert!(child.wait().unwrap().success());
    }
}

/// The whole answer to `GET path` at `addr` (the status line, the headers, the body).
fn http_get(addr: &str, path: &str) -> String {
    use std::io::Read;
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    write!(conn, "GET {path} HTTP/1.1\r\nHost: lkcs\r\n\r\n").unwrap();
    let mut answer = String::new();
    conn.read_to_string(&mut answer).unwrap();
    answer
}

/// `--id` outside the cluster, a cluster file with problems: exit 2, one `error:` line per
/// problem.
#[test]
fn bad_cluster_input_exits_2() {
    let dir = scratch("bad");
    let ports = free_ports(3);
    let cases = [
        (
            "the old format (a shared secret)",
            "secret = \"a shared secret, 16 bytes+\"\n[quota]\nalgorithm = \"gcs\"\n[members]\n0 = \"127.0.0.1:7411\"\n".to_string(),
            0,
        ),
        (
            "topology of another size",
            cluster_text(
                SECRET,
                "algorithm = \"gcs\"\ntopology = \"complete:4\"\nl = 1\nk = 2",
                &ports,
                5000,
            ),
            0,
        ),
        (
            "id outside",
            cluster_text(SECRET, "algorithm = \"gcs\"\nl = 1\nk = 2", &ports, 5000),
            7,
        ),
        (
            "unknown key",
            cluster_text(
                SECRET,
                "algorithm = \"gcs\"\nl = 1\nk = 2\nfoo = 3",
                &ports,
                5000,
            ),
            0,
        ),
        (
            "bad bounds",
            cluster_text(SECRET, "algorithm = \"gcs\"\nl = 2\nk = 1", &ports, 5000),
            0,
        ),
        ("not toml", "secret = [".to_string(), 0),
    ];
    for (what, text, id) in cases {
        let file = write(&dir, "bad.toml", &text);
        let (code, stderr) = node_run(&file, &["--id", &id.to_string(), "--workload", "cycle"]);
        assert_eq!(code, Some(2), "{what}: {stderr}");
        assert!(
            stderr.lines().all(|l| l.starts_with("error: ")) && !stderr.is_empty(),
            "{what}: {stderr}"
        );
    }
}

/// `lkcs cluster init` writes the keys (the operator's too) mode 600; a node (and `lkcs
/// status`, for the operator's key) refuses (exit 2, naming the file) a private key or
/// cluster file that group or others can read, and the example keys without
/// `--allow-example-keys`; bad `cluster init` input exits 2, one line per problem.
#[test]
fn readable_keys_and_example_keys_are_refused_naming_the_file() {
    use std::os::unix::fs::PermissionsExt;
    let dir = scratch("perms");
    let out_dir = dir.join("c");
    let _ = std::fs::remove_dir_all(&out_dir);
    let init = Command::new(BIN)
        .args(["cluster", "init", "--members", "3", "--out"])
        .arg(&out_dir)
        .args(["--algorithm", "gcs", "--l", "1", "--k", "2"])
        .output()
        .unwrap();
    assert_eq!(init.status.code(), Some(0), "{init:?}");
    let file = out_dir.join("cluster.toml");
    let key0 = out_dir.join("keys/0.key");
    let operator = out_dir.join("keys/operator.key");
    for f in [&file, &key0, &operator] {
        let mode = std::fs::metadata(f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "{}", f.display());
    }
    let node = |cluster: &Path, extra: &[&str]| {
        node_run(
            cluster,
            &[&["--id", "0", "--workload", "cycle"], extra].concat(),
        )
    };
    let chmod = |f: &Path, mode: u32| {
        std::fs::set_permissions(f, std::fs::Permissions::from_mode(mode)).unwrap()
    };
    // a private key others can read
    chmod(&key0, 0o644);
    let (code, err) = node(&file, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.starts_with("error: ") && err.contains(&key0.display().to_string()),
        "{err}"
    );
    assert!(err.contains("group or others"), "{err}");
    chmod(&key0, 0o600);
    // the operator's key others can read: `lkcs status` refuses it before connecting
    chmod(&operator, 0o644);
    let out = Command::new(BIN)
        .args(["status", "--cluster"])
        .arg(&file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&operator.display().to_string()) && err.contains("group or others"),
        "{err}"
    );
    chmod(&operator, 0o600);
    // a cluster file others can read
    chmod(&file, 0o640);
    let (code, err) = node(&file, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&file.display().to_string()) && err.contains("group or others"),
        "{err}"
    );
    chmod(&file, 0o600);
    // the example keys, without the flag
    let example = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/cluster3.toml");
    let (code, err) = node(&example, &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("cluster3-keys/0.key") && err.contains("example key"),
        "{err}"
    );
    // cluster init: an existing cluster is not overwritten; bad options, one line each
    for args in [
        vec!["--members", "3", "--algorithm", "gcs"],
        vec!["--members", "0", "--algorithm", "nope"],
        vec![
            "--members",
            "3",
            "--algorithm",
            "gcs",
            "--l",
            "3",
            "--k",
            "1",
        ],
    ] {
        let out = Command::new(BIN)
            .args(["cluster", "init", "--out"])
            .arg(&out_dir)
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            !err.is_empty() && err.lines().all(|l| l.starts_with("error: ")),
            "{args:?}: {err}"
        );
    }
}

/// `cluster init` writes nothing when one of its files is already there, naming that file
/// (it wrote the keys before it, then failed with "cannot write DIR", exit 1, and every
/// retry failed on the keys it had left); a cluster file it writes is then complete.
#[test]
fn cluster_init_over_a_stray_key_writes_nothing_and_names_the_key() {
    let dir = scratch("init-stray-key");
    let out_dir = dir.join("c");
    std::fs::create_dir_all(out_dir.join("keys")).unwrap();
    let stray = out_dir.join("keys").join("1.key");
    std::fs::write(&stray, "x").unwrap();
    let init = || {
        Command::new(BIN)
            .args([
                "cluster",
                "init",
                "--members",
                "3",
                "--algorithm",
                "gcs",
                "--out",
            ])
            .arg(&out_dir)
            .output()
            .unwrap()
    };
    let out = init();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(
        err.trim_end(),
        format!(
            "error: {} exists: not overwritten (choose another --out)",
            stray.display()
        )
    );
    let mut left: Vec<String> = std::fs::read_dir(out_dir.join("keys"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    left.sort();
    assert_eq!(left, ["1.key"], "init wrote keys before it refused");
    assert!(!out_dir.join("cluster.toml").exists());
    // once the stray key is gone, the same command succeeds
    std::fs::remove_file(&stray).unwrap();
    let out = init();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(out_dir.join("cluster.toml")).unwrap();
    assert!(text.lines().any(|l| l == "[operator]"), "{text}");
    Cluster::load(&out_dir.join("cluster.toml")).unwrap();
}

/// One member with a bad address is one problem: its id is not reported missing, nor the
/// member count short of the topology's.
#[test]
fn one_bad_member_address_is_one_error_line() {
    let dir = scratch("bad-address");
    let ports = free_ports(3);
    let text = cluster_text(SECRET, "algorithm = \"gcs\"\nl = 1\nk = 2", &ports, 5000)
        .replace(&format!("127.0.0.1:{}", ports[1]), "127.0.0.1:99999");
    let e = Cluster::parse(&text).unwrap_err();
    assert_eq!(e.problems.len(), 1, "{e}");
    assert_eq!(
        e.problems[0].to_string(),
        "[members.1]: `127.0.0.1:99999` is not an address (host:port)"
    );
    let file = write(&dir, "bad.toml", &text);
    let (code, stderr) = node_run(&file, &["--id", "0"]);
    assert_eq!(code, Some(2), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: ")
            && stderr.contains("[members.1]: `127.0.0.1:99999` is not an address"),
        "{stderr}"
    );
}

/// A `--start-timeout` past the largest is called too large, naming the largest (it was
/// called "not positive"); zero still is not positive.
#[test]
fn a_start_timeout_too_large_is_called_too_large() {
    let dir = scratch("start-timeout");
    let ports = free_ports(3);
    let text = cluster_text(SECRET, "algorithm = \"gcs\"\nl = 1\nk = 2", &ports, 5000);
    let file = write(&dir, "cluster.toml", &text);
    for (timeout, expected) in [
        (
            "1e300",
            "error: --start-timeout is too large: at most 1000000 seconds",
        ),
        (
            "18446744073709552",
            "error: --start-timeout is too large: at most 1000000 seconds",
        ),
        (
            "0",
            "error: --start-timeout must be a positive number of seconds",
        ),
    ] {
        let (code, stderr) = node_run(
            &file,
            &[
                "--id",
                "0",
                "--workload",
                "cycle",
                "--start-timeout",
                timeout,
            ],
        );
        assert_eq!(code, Some(2), "{timeout}: {stderr}");
        assert_eq!(stderr.trim_end(), expected, "{timeout}");
    }
}

/// `--rejoin-timeout` is refused, naming why, when it is not a positive number of seconds
/// up to the largest, without the cycle workload (the line protocol has no wait to bound),
/// or on a cluster without views (no member is evicted there).
#[test]
fn a_bad_rejoin_timeout_is_refused_naming_why() {
    let dir = scratch("rejoin-timeout");
    let ports = free_ports(3);
    let text = cluster_text(SECRET, "algorithm = \"gcs\"\nl = 1\nk = 2", &ports, 5000);
    let views = write(&dir, "views.toml", &text);
    let without = write(&dir, "no-views.toml", &(text + "evict_after_ms = 0\n"));
    let cycle = ["--workload", "cycle"];
    for (file, extra, timeout, expected) in [
        (
            &views,
            &cycle[..],
            "1e300",
            "error: --rejoin-timeout is too large: at most 1000000 seconds",
        ),
        (
            &views,
            &cycle[..],
            "0",
            "error: --rejoin-timeout must be a positive number of seconds",
        ),
        (
            &views,
            &cycle[..],
            "NaN",
            "error: --rejoin-timeout must be a positive number of seconds",
        ),
        (
            &views,
            &[][..],
            "5",
            "error: --rejoin-timeout applies to --workload cycle",
        ),
        (
            &without,
            &cycle[..],
            "5",
            "error: --rejoin-timeout applies to clusters with views (this one has [timing] evict_after_ms = 0)",
        ),
    ] {
        let (code, stderr) = node_run(
            file,
            &[&["--id", "0", "--rejoin-timeout", timeout], extra].concat(),
        );
        assert_eq!(code, Some(2), "{timeout}: {stderr}");
        assert_eq!(stderr.trim_end(), expected, "{timeout} {extra:?}");
    }
}

/// Members given by host name: the file is read without looking a name up (one that does
/// not resolve was refused as "not an address"), a node whose own name does not resolve
/// stops naming it (exit 1), and a cluster at `localhost:PORT` runs (each member binds,
/// dials and admits its peers' connections by the names' addresses).
#[test]
fn members_given_by_host_name_are_looked_up_when_used() {
    use lkcs::net::{MemberAddress, NetError};
    let dir = scratch("host-names");
    let quota = "algorithm = \"gcs\"\nl = 1\nk = 2";
    let ports = free_ports(3);
    let unresolved = cluster_text(SECRET, quota, &ports, 5000)
        .replace(&format!("127.0.0.1:{}", ports[2]), "node-a.example:7001");
    let cluster = Cluster::parse(&unresolved).unwrap();
    let name = cluster.address(ProcessId(2)).unwrap();
    assert_eq!(
        name,
        MemberAddress::Name {
            host: "node-a.example".into(),
            port: 7001
        }
    );
    match name.resolve() {
        Err(NetError::Unresolved { address, .. }) => assert_eq!(address, "node-a.example:7001"),
        other => panic!("{other:?}"),
    }
    // IP addresses stay as they are
    assert_eq!(
        cluster.address(ProcessId(0)),
        Some(MemberAddress::Ip(([127, 0, 0, 1], ports[0]).into()))
    );
    let file = write(&dir, "unresolved.toml", &unresolved);
    let started = Instant::now();
    let ended = finish(
        spawn_node(&file, 2, &["--workload", "cycle", "--start-timeout", "5"]),
        started,
    );
    assert_eq!(ended.code, Some(1), "{}", ended.stderr);
    assert!(
        ended
            .stderr
            .contains("error: P2 cannot listen: cannot resolve node-a.example:7001"),
        "{}",
        ended.stderr
    );
    // a whole cluster by name
    let text = cluster_text(SECRET, quota, &ports, 5000).replace("127.0.0.1:", "localhost:");
    let (ended, monitor, cluster) = run_cycle(&dir, &text, 5);
    assert!(matches!(
        cluster.address(ProcessId(1)),
        Some(MemberAddress::Name { .. })
    ));
    assert_clean_run(&ended, &monitor, 5);
}

/// `lkcs status`, as the operator (its own key, pinned in `[operator]`): with five nodes
/// up it prints every member reachable, in the same view, with the state the line protocol
/// gives, and exits 0; with one member killed it names that member unreachable and exits
/// 1. A cluster file that gives the operator a member's key is refused (exit 2).
#[test]
fn status_asks_every_member_as_the_operator() {
    let dir = scratch("status");
    let ports = free_ports(5);
    let (op_path, op_key) = key_file("operator of the status test", 0);
    let text = cluster_text(
        SECRET,
        "algorithm = \"gcs\"\ntopology = \"complete:5\"\nl = 1\nk = 2\ninitial = \"in:0\"",
        &ports,
        5000,
    ) + &format!(
        "[operator]\npublic_key = \"{}\"\nprivate_key = {:?}\n",
        op_key.public(),
        op_path.display().to_string()
    );
    let file = write(&dir, "cluster.toml", &text);
    let mut nodes: Vec<Child> = (0..5)
        .map(|i| {
            Command::new(BIN)
                .arg("node")
                .arg("--cluster")
                .arg(&file)
                .args(["--id", &i.to_string()])
                .stdin(Stdio::piped())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap()
        })
        .collect();
    let status = |extra: &[&str]| {
        Command::new(BIN)
            .arg("status")
            .arg("--cluster")
            .arg(&file)
            .args(extra)
            .output()
            .unwrap()
    };
    // every member up and answering (the nodes start in parallel with this loop)
    let started = std::time::Instant::now();
    let json = loop {
        let out = status(&["--json"]);
        if out.status.code() == Some(0) {
            break serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap();
        }
        assert!(started.elapsed() < GUARD, "{out:?}");
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    let members = json["members"].as_array().unwrap();
    assert_eq!(members.len(), 5);
    for (i, m) in members.iter().enumerate() {
        assert_eq!(m["id"], i);
        assert_eq!(m["reachable"], true, "{m}");
        assert_eq!(m["address"], format!("127.0.0.1:{}", ports[i]));
    }
    assert_eq!(members[0]["state"], "active", "{json}");
    assert_eq!(members[1]["state"], "inactive", "{json}");
    assert_eq!(json["summary"]["answered"], 5);
    assert_eq!(json["summary"]["outside_bounds"], serde_json::json!([]));
    // P4 killed (SIGKILL): named unreachable, exit 1
    let mut p4 = nodes.pop().unwrap();
    p4.kill().unwrap();
    p4.wait().unwrap();
    let out = status(&["--timeout-ms", "2000"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{text}");
    let line = text
        .lines()
        .find(|l| l.starts_with("P4 "))
        .expect("a line for P4");
    assert!(line.contains("unreachable:"), "{line}");
    assert!(
        text.lines()
            .any(|l| l.starts_with("P0 ") && l.contains(" reachable ")),
        "{text}"
    );
    for mut n in nodes {
        n.kill().unwrap();
        n.wait().unwrap();
    }
    // the operator with a member's key: refused before anything connects
    let (p0, k0) = key_file(SECRET, 0);
    let stolen = cluster_text(SECRET, "algorithm = \"gcs\"", &ports, 5000)
        + &format!(
            "[operator]\npublic_key = \"{}\"\nprivate_key = {:?}\n",
            k0.public(),
            p0.display().to_string()
        );
    let bad = write(&dir, "bad.toml", &stolen);
    let out = Command::new(BIN)
        .args(["status", "--cluster"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("the operator needs its own key"), "{err}");
}
