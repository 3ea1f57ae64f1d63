//! `lkcs node` clusters with views, as real OS processes on 127.0.0.1, meeting real faults: a
//! member killed with SIGKILL mid-run, a member paused with SIGSTOP past its lease, a 2 | 3
//! partition through proxies. Every
//! node reports to a monitor synchronously (each change of its state, each new end of its
//! lease), and the monitor checks the upper bounds after every report, counting a member
//! active only while it is in the CS and its lease holds: what the views guarantee
//! (docs/fault-tolerance.md). Liveness: every survivor completes its pairs and exits 0.
//!
//! Ports are chosen free at run time; every process runs under a hang guard.
#![cfg(unix)]

mod ports;
mod procs;

use lkcs::net::Cluster;
use lkcs::CsState;
use ports::free_ports;
use procs::*;
use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The view timers of these clusters: a member no majority answers for 1.5 s fences, one
/// unreachable for 2.5 s is evicted (the margin `(1.5 s + 40 ms)·1.01 < 2.5 s·0.99` holds).
const VIEWS: &str = "lease_heartbeat_ms = 100\nlease_ms = 1500\nevict_after_ms = 2500\n";

/// The links' peer timeout: a silent peer is unreachable after this, and its eviction clock
/// starts.
const PEER_TIMEOUT_MS: u64 = 800;

/// The quotas of the real-process tests: (2,3)-GCS of 5, Maekawa mutual exclusion of
/// 5, 1-LMUTIN on a ring of 6 (name, `[quota]` body, members).
const QUOTAS: [(&str, &str, usize); 3] = [
    (
        "gcs",
        "algorithm = \"gcs\"\ntopology = \"complete:5\"\nl = 2\nk = 3",
        5,
    ),
    (
        "maekawa",
        "algorithm = \"maekawa\"\ntopology = \"complete:5\"",
        5,
    ),
    (
        "lmutin",
        "algorithm = \"lmutin\"\ntopology = \"ring:6\"\nl = 1",
        6,
    ),
];

/// A cluster file with views for `quota` over `n` fresh ports, its cluster, and a fault
/// monitor.
fn cluster(name: &str, quota: &str, n: usize) -> (PathBuf, Cluster, Monitor) {
    let dir = scratch(name);
    let ports = free_ports(n);
    let text = cluster_text(SECRET, quota, &ports, PEER_TIMEOUT_MS) + VIEWS;
    let file = write(&dir, "cluster.toml", &text);
    let cluster = Cluster::load(&file).unwrap();
    let monitor = Monitor::for_faults(&cluster);
    (file, cluster, monitor)
}

fn cycle_args(pairs: usize, monitor: &Monitor) -> Vec<String> {
    [
        "--workload",
        "cycle",
        "--pairs",
        &pairs.to_string(),
        "--json",
        "--monitor",
        &monitor.arg(),
    ]
    .map(String::from)
    .to_vec()
}

fn spawn_all(file: &std::path::Path, n: usize, args: &[String]) -> Vec<Node> {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    (0..n).map(|i| spawn_node(file, i, &args)).collect()
}

/// Waits until every member has moved and `victim` has made at least `moves` moves.
fn wait_under_way(monitor: &Monitor, n: usize, victim: usize, moves: usize, started: Instant) {
    loop {
        let all = monitor.state.lock().unwrap().movers.len() == n;
        if all && monitor.moves_of(victim) >= moves {
            return;
        }
        assert!(started.elapsed() < GUARD, "the cluster never got under way");
        thread::sleep(Duration::from_millis(2));
    }
}

fn signal(node: &Node, sig: libc::c_int) {
    let pid = node.child.id() as libc::pid_t;
    // SAFETY: kill(2) on the pid of a child this test started and has not reaped
    let r = unsafe { libc::kill(pid, sig) };
    assert_eq!(r, 0, "kill({pid}, {sig}) failed");
}

/// Stops `node` with SIGSTOP, in the CS if the test can catch it there (it stops it, and
/// looks whether its last report was `in`; if not, it lets it run a moment and tries again);
/// whether it is stopped in the CS.
fn stop_in_cs(node: &Node, monitor: &Monitor) -> bool {
    for _ in 0..200 {
        signal(node, libc::SIGSTOP);
        thread::sleep(Duration::from_millis(20));
        if monitor.state_of(node.id) == CsState::InCs {
            return true;
        }
        signal(node, libc::SIGCONT);
        thread::sleep(Duration::from_millis(3));
    }
    signal(node, libc::SIGSTOP);
    false
}

/// Every survivor exited 0 having made its pairs, and no bound broke.
fn assert_survivors_done(ended: &[Ended], monitor: &Monitor, pairs: usize) {
    for e in ended {
        assert_done(e, pairs);
    }
    assert_eq!(monitor.violations(), Vec::<String>::new());
}

/// The time from `at` to the end of the longest pause between two moves of any of
/// `members` after `at`: how long the slowest member the fault held up waited before its
/// next completed call.
fn recovery(monitor: &Monitor, members: &[usize], at: Instant) -> Duration {
    let w = monitor.state.lock().unwrap();
    let mut worst = Duration::ZERO;
    for &m in members {
        let mut last = at;
        let mut longest = (Duration::ZERO, at);
        for (t, _) in w.moves.iter().filter(|(t, p)| *p == m && *t > at) {
            if *t - last > longest.0 {
                longest = (*t - last, *t);
            }
            last = *t;
        }
        worst = worst.max(longest.1 - at);
    }
    worst
}

/// SIGKILL one member of each quota mid-run, in the CS when the test can catch it there (stopped
/// first, then killed; else out of it): the others evict it,
/// reclaim its slot, complete their pairs and exit 0 (an evicted member counts as
/// finished), with no upper bound broken.
#[test]
fn a_killed_member_is_evicted_and_the_survivors_complete() {
    let pairs = 1000;
    for (name, quota, n) in QUOTAS {
        let (file, cluster, monitor) = cluster(&format!("kill-{name}"), quota, n);
        let victim = 2;
        let started = Instant::now();
        let mut nodes = spawn_all(&file, n, &cycle_args(pairs, &monitor));
        wait_under_way(&monitor, n, victim, 6, started);
        let victim_node = nodes.remove(victim);
        // killed where it holds the most: in the CS when the test can catch it there
        let in_cs = stop_in_cs(&victim_node, &monitor);
        assert!(in_cs, "{name}: P{victim} was never caught in the CS");
        signal(&victim_node, libc::SIGKILL);
        let killed = Instant::now();
        let mut child = victim_node.child;
        child.wait().unwrap();
        assert!(
            monitor.moves_of(victim) < 2 * pairs,
            "{name}: the victim had finished before the kill: the test proves nothing"
        );
        let ended: Vec<Ended> = nodes.into_iter().map(|n| finish(n, started)).collect();
        assert_survivors_done(&ended, &monitor, pairs);
        let survivors: Vec<usize> = (0..cluster.len()).filter(|&i| i != victim).collect();
        eprintln!(
            "{name}: P{victim} killed {} the CS; recovery {:?}",
            if in_cs { "in" } else { "out of" },
            recovery(&monitor, &survivors, killed)
        );
    }
}

/// SIGSTOP one member past its lease and the eviction delay: the others evict it and
/// complete their pairs; after SIGCONT the paused member finds its lease run out, fences
/// (its calls return `Evicted`) and exits 1 saying so; no upper bound broken, counting it
/// active only while its lease held. Maekawa's mutual exclusion is the sharpest case: the
/// member is stopped while it holds the CS whenever the test can catch it there.
#[test]
fn a_paused_member_fences_and_the_others_go_on() {
    let pairs = 1000;
    for (name, quota, n) in [QUOTAS[1], QUOTAS[0]] {
        let (file, cluster, monitor) = cluster(&format!("pause-{name}"), quota, n);
        let victim = 1;
        let started = Instant::now();
        let mut nodes = spawn_all(&file, n, &cycle_args(pairs, &monitor));
        wait_under_way(&monitor, n, victim, 4, started);
        let paused = nodes.remove(victim);
        let in_cs = stop_in_cs(&paused, &monitor);
        assert!(in_cs, "{name}: P{victim} was never caught in the CS");
        let stopped = Instant::now();
        let survivors: Vec<usize> = (0..cluster.len()).filter(|&i| i != victim).collect();
        let ended: Vec<Ended> = nodes.into_iter().map(|n| finish(n, started)).collect();
        assert_survivors_done(&ended, &monitor, pairs);
        let recovered = recovery(&monitor, &survivors, stopped);
        signal(&paused, libc::SIGCONT);
        let woke = finish(paused, started);
        assert_eq!(woke.code, Some(1), "the paused member: {}", woke.stderr);
        let error = error_line(&woke);
        assert!(error.contains("evicted"), "{error}");
        assert_eq!(monitor.violations(), Vec::<String>::new());
        eprintln!(
            "{name}: P{victim} paused {} the CS; the others recovered {recovered:?} after the stop",
            if in_cs { "in" } else { "out of" },
        );
    }
}

/// A forwarder to `target` that the test can cut: once cut, it closes what it carries and
/// drops every new connection.
struct Proxy {
    port: u16,
    cut: Arc<AtomicBool>,
    conns: Arc<Mutex<Vec<TcpStream>>>,
}

impl Proxy {
    fn start(target: u16) -> Proxy {
        let listener = ports::listener();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
        let (c, k) = (cut.clone(), conns.clone());
        thread::spawn(move || {
            for inbound in listener.incoming() {
                let Ok(inbound) = inbound else { return };
                if c.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                // small frames pass at once, as on a direct connection
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                let mut held = k.lock().unwrap();
                held.push(inbound.try_clone().unwrap());
                held.push(outbound.try_clone().unwrap());
                drop(held);
                for (mut from, mut to) in [
                    (inbound.try_clone().unwrap(), outbound.try_clone().unwrap()),
                    (outbound, inbound),
                ] {
                    thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                    });
                }
            }
        });
        Proxy { port, cut, conns }
    }

    fn cut(&self) {
        self.cut.store(true, Ordering::SeqCst);
        for c in self.conns.lock().unwrap().drain(..) {
            let _ = c.shutdown(Shutdown::Both);
        }
    }
}

/// A 2 | 3 partition through proxies (every member reaches every other through a proxy of
/// its own, so that the test cuts exactly the links between the sides): the three members
/// of the majority side evict the two others and complete their pairs; each member of the
/// minority side finds its lease run out, fences, and exits 1 saying it was evicted. No
/// upper bound broken, counting a member active only while its lease holds.
#[test]
fn a_partitioned_minority_fences_and_the_majority_goes_on() {
    let pairs = 1000;
    let minority = [0usize, 1];
    for (name, quota, n) in [QUOTAS[0], QUOTAS[1]] {
        let dir = scratch(&format!("partition-{name}"));
        let real = free_ports(n);
        // proxies[i][j]: how member i reaches member j
        let proxies: Vec<Vec<Option<Proxy>>> = (0..n)
            .map(|i| {
                (0..n)
                    .map(|j| (i != j).then(|| Proxy::start(real[j])))
                    .collect()
            })
            .collect();
        let files: Vec<PathBuf> = (0..n)
            .map(|i| {
                let ports: Vec<u16> = (0..n)
                    .map(|j| proxies[i][j].as_ref().map_or(real[j], |p| p.port))
                    .collect();
                let text = cluster_text(SECRET, quota, &ports, PEER_TIMEOUT_MS) + VIEWS;
                write(&dir, &format!("cluster{i}.toml"), &text)
            })
            .collect();
        let cluster = Cluster::load(&files[0]).unwrap();
        let monitor = Monitor::for_faults(&cluster);
        let args = cycle_args(pairs, &monitor);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let started = Instant::now();
        let nodes: Vec<Node> = (0..n).map(|i| spawn_node(&files[i], i, &args)).collect();
        wait_under_way(&monitor, n, minority[0], 6, started);
        for (i, row) in proxies.iter().enumerate() {
            for (j, proxy) in row.iter().enumerate() {
                if minority.contains(&i) != minority.contains(&j) {
                    proxy.as_ref().expect("a proxy between the sides").cut();
                }
            }
        }
        let cut = Instant::now();
        let (small, large): (Vec<Node>, Vec<Node>) =
            nodes.into_iter().partition(|n| minority.contains(&n.id));
        let majority: Vec<usize> = large.iter().map(|n| n.id).collect();
        let ended: Vec<Ended> = large.into_iter().map(|n| finish(n, started)).collect();
        assert_survivors_done(&ended, &monitor, pairs);
        for node in small {
            let e = finish(node, started);
            assert_eq!(e.code, Some(1), "minority member {}: {}", e.id, e.stderr);
            let error = error_line(&e);
            assert!(error.contains("evicted"), "member {}: {error}", e.id);
        }
        assert_eq!(monitor.violations(), Vec::<String>::new());
        eprintln!(
            "{name}: 2 | 3 partition; the majority side recovered {:?} after the cut",
            recovery(&monitor, &majority, cut)
        );
    }
}

/// A member that starts in the CS (Maekawa, `initial = "in:0"`) but is started only after the
/// four others evicted it (view 1 installed without it): its `enter` must not answer `ok`,
/// which would let it use the slot the others reclaimed. A member of view 1 answers its
/// lease beat saying it is out; it fences, and its calls and `state` say it was evicted. The
/// four others complete their pairs, under the monitor.
#[test]
fn a_member_started_after_its_eviction_fences_instead_of_using_its_initial_slot() {
    let quota = "algorithm = \"maekawa\"\ntopology = \"complete:5\"\ninitial = \"in:0\"";
    let (file, _, monitor) = cluster("late", quota, 5);
    // enough that the others still run when the late member starts (they start as soon as
    // view 1 leaves it out)
    let pairs = 3000;
    let args = cycle_args(pairs, &monitor);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let dir = file.parent().unwrap().to_path_buf();
    let started = Instant::now();
    let others: Vec<Node> = (1..5)
        .map(|i| spawn_node_logged(&file, i, &args, &dir.join(format!("{i}.log"))))
        .collect();
    for i in 1..5 {
        wait_for_log(&dir.join(format!("{i}.log")), "view 1 installed", started);
    }
    let m = monitor.arg();
    let mut late = Command::new(BIN)
        .args(["node", "--cluster"])
        .arg(&file)
        .args(["--id", "0", "--monitor", &m])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // a hang guard: past it the late member is killed, and its answers end
    let pid = late.id() as libc::pid_t;
    let answered = Arc::new(AtomicBool::new(false));
    let done = answered.clone();
    thread::spawn(move || {
        while started.elapsed() < GUARD {
            if done.load(Ordering::SeqCst) {
                return;
            }
            thread::sleep(Duration::from_millis(50));
        }
        // SAFETY: kill(2) on a child of this test that has not been reaped (the test waits
        // for it only after `done` is set)
        unsafe { libc::kill(pid, libc::SIGKILL) };
    });
    let mut stdin = late.stdin.take().unwrap();
    let mut answers = BufReader::new(late.stdout.take().unwrap()).lines();
    writeln!(stdin, "enter").unwrap();
    let entered = answers
        .next()
        .expect("the late member answers before the guard")
        .unwrap();
    assert!(
        entered.starts_with("error:") && entered.contains("evicted"),
        "the late member's enter: {entered}"
    );
    writeln!(stdin, "state").unwrap();
    assert_eq!(answers.next().unwrap().unwrap(), "ok evicted");
    answered.store(true, Ordering::SeqCst);
    writeln!(stdin, "quit").unwrap();
    assert!(late.wait().unwrap().success());
    let ended: Vec<Ended> = others.into_iter().map(|n| finish(n, started)).collect();
    assert_survivors_done(&ended, &monitor, pairs);
}
