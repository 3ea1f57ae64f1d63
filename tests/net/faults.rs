//! `lkcs node` clusters with views, as real OS processes on 127.0.0.1, meeting real faults: a
//! member killed with SIGKILL mid-run, a member paused with SIGSTOP past its lease, a 2 | 3
//! partition through proxies. Every
//! node reports to a monitor synchronously (each change of its state, each new end of its
//! lease), and the monitor checks the upper bounds after every report, counting a member
//! active only while it is in the CS and its lease holds: what the views guarantee
//! (docs/fault-tolerance.md). Liveness: every survivor completes its pairs and exits 0.
//!
//! Ports are chosen free at run time; every process runs under a hang guard.

use crate::{ports, procs};
use lkcs::cs::CsState;
use lkcs::net::Cluster;
use ports::free_ports;
use procs::*;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

/// The view timers of these clusters: a member no majority answers for 1.5 s fences, one
/// unreachable for 2.5 s is evicted (the margin `(1.5 s + 40 ms)·1.01 < 2.5 s·0.99` holds).
const VIEWS: &str = "lease_heartbeat_ms = 100\nlease_ms = 1500\nevict_after_ms = 2500\n";

/// The pairs of the `--workload cycle` members where another member keeps them running
/// whatever their count, which is then only a floor: a member driven through the line
/// protocol never finishes and never says bye, so the others cannot end their run while it is
/// in the view or evicted but reachable (and it held them up until view 1); a member leaving
/// on SIGTERM stays in the view, unfinished, until the view without it installs.
const FLOOR_PAIRS: usize = 1000;

/// For a member no view can have back once evicted: it waits 1 s to rejoin before it exits
/// 1 (the default wait is `2·evict_after + lease + 2 s`).
const QUICK_GIVE_UP: [&str; 2] = ["--rejoin-timeout", "1"];

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

/// A cluster file with views for `quota` over `n` fresh ports whose members keep their view
/// log on disk (`[storage]`, in `state/` beside it, emptied first): its folder and the file.
fn disk_cluster(name: &str, quota: &str, n: usize) -> (PathBuf, PathBuf) {
    let dir = scratch(name);
    let _ = std::fs::remove_dir_all(dir.join("state"));
    let text = cluster_text(SECRET, quota, &free_ports(n), PEER_TIMEOUT_MS)
        + VIEWS
        + "[storage]\ndir = \"state\"\n";
    let file = write(&dir, "cluster.toml", &text);
    (dir, file)
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
    assert_safe(monitor);
}

/// No bound broke, and the monitor checked the order of some entry's token.
fn assert_safe(monitor: &Monitor) {
    assert_eq!(monitor.violations(), Vec::<String>::new());
    assert!(monitor.tokens_checked() > 0, "no entry's token was checked");
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

/// The time from `at` to `member`'s first report after it: a restarted member's first
/// report is its state when the view that has it back installs.
fn first_report_after(monitor: &Monitor, member: usize, at: Instant) -> Duration {
    monitor
        .state
        .lock()
        .unwrap()
        .first_reports
        .iter()
        .find(|(t, p)| *p == member && *t > at)
        .map(|(t, _)| *t - at)
        .expect("the restarted member reported")
}

/// SIGKILLs `victim`, in the CS when the test can catch it there, and reaps it; whether it
/// died in the CS, and how many moves it had reported, which must leave it pairs to make
/// (else the test proves nothing).
fn kill_unfinished(mut victim: Node, monitor: &Monitor, pairs: usize, name: &str) -> (bool, usize) {
    let in_cs = stop_in_cs(&victim, monitor);
    signal(&victim, libc::SIGKILL);
    victim.child.wait().unwrap();
    let moves_before = monitor.moves_of(victim.id);
    assert!(
        moves_before < 2 * pairs,
        "{name}: the victim had finished before the kill: the test proves nothing"
    );
    (in_cs, moves_before)
}

/// Waits until `folder` holds the mark of a Raft node the others counted as its member's
/// (`raft-node`), which a process that restarts on it resumes.
fn wait_established(folder: &std::path::Path, started: Instant, name: &str) {
    while !folder.join("raft-node").exists() {
        assert!(
            started.elapsed() < GUARD,
            "{name}: {}'s Raft node was never established",
            folder.display()
        );
        thread::sleep(Duration::from_millis(2));
    }
}

/// The restarted member `victim` and the survivors each made their pairs and exited 0, with
/// no bound broken: the new process made all its pairs after the restart (it rejoined; it did
/// not resume the old one's count).
fn assert_all_done_after_restart(
    name: &str,
    ended: &[Ended],
    restarted: &Ended,
    monitor: &Monitor,
    (victim, moves_before): (usize, usize),
    pairs: usize,
) {
    assert_survivors_done(ended, monitor, pairs);
    assert_done(restarted, pairs);
    assert!(
        monitor.moves_of(victim) >= moves_before + 2 * pairs,
        "{name}: the restarted member reported {} moves after the restart",
        monitor.moves_of(victim) - moves_before
    );
}

/// SIGKILL one member of each quota mid-run, in the CS when the test can catch it there (stopped
/// first, then killed; else out of it): the others evict it,
/// reclaim its slot, complete their pairs and exit 0 (an evicted member counts as
/// finished), with no upper bound broken.
#[test]
fn a_killed_member_is_evicted_and_the_survivors_complete() {
    let pairs = 1000;
    side_by_side(QUOTAS, |(name, quota, n)| {
        let (file, cluster, monitor) = cluster(&format!("kill-{name}"), quota, n);
        let victim = 2;
        let started = Instant::now();
        let mut nodes = spawn_all(&file, n, &cycle_args(pairs, &monitor));
        wait_under_way(&monitor, n, victim, 6, started);
        let mut victim_node = nodes.remove(victim);
        // killed where it holds the most: in the CS when the test can catch it there
        let in_cs = stop_in_cs(&victim_node, &monitor);
        assert!(in_cs, "{name}: P{victim} was never caught in the CS");
        signal(&victim_node, libc::SIGKILL);
        let killed = Instant::now();
        victim_node.child.wait().unwrap();
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
    });
}

/// SIGKILL one member of each quota mid-run (in the CS when the test can catch it there), then
/// start it again with the same command: the new process is not the one the view has (the
/// links see a new incarnation), so the others evict the old one at once, and the new one
/// rejoins, inactive, with no epoch bump and no other member touched. Every member, the
/// restarted one included, completes its pairs and exits 0, with no upper bound broken.
#[test]
fn a_killed_member_started_again_rejoins_and_completes_its_pairs() {
    // enough that the others still cycle when the restarted member rejoins
    let pairs = 1500;
    side_by_side(QUOTAS, |(name, quota, n)| {
        let (file, _, monitor) = cluster(&format!("restart-{name}"), quota, n);
        let victim = 2;
        let args = cycle_args(pairs, &monitor);
        let started = Instant::now();
        let mut nodes = spawn_all(&file, n, &args);
        wait_under_way(&monitor, n, victim, 6, started);
        let (in_cs, moves_before) = kill_unfinished(nodes.remove(victim), &monitor, pairs, name);
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let dir = file.parent().unwrap().to_path_buf();
        let restarted_at = Instant::now();
        let again = spawn_node_logged(&file, victim, &argv, &dir.join("restarted.log"));
        let ended: Vec<Ended> = nodes.into_iter().map(|n| finish(n, started)).collect();
        let restarted = finish(again, started);
        let moved = (victim, moves_before);
        assert_all_done_after_restart(name, &ended, &restarted, &monitor, moved, pairs);
        let log = std::fs::read_to_string(dir.join("restarted.log")).unwrap();
        assert!(log.contains("rejoins"), "{name}: {log}");
        let joined = first_report_after(&monitor, victim, restarted_at);
        eprintln!(
            "{name}: P{victim} killed {} the CS, started again: rejoined {joined:?} after the restart",
            if in_cs { "in" } else { "out of" }
        );
    });
}

/// Two processes of one member on one state folder would both write its view log: the
/// second `lkcs node --id I` exits 2 naming the folder's lock, before anything listens, and
/// the first keeps running. Once the first is killed the kernel drops its lock, and a new
/// process takes the folder.
#[test]
fn a_second_process_of_a_member_is_refused_its_state_folder() {
    let (name, quota, n) = QUOTAS[0];
    let (dir, file) = disk_cluster(&format!("folder-lock-{name}"), quota, n);
    let args = [
        "--workload",
        "cycle",
        "--start-timeout",
        "60",
        "--log-level",
        "info",
    ];
    let started = Instant::now();
    let first_log = dir.join("first.log");
    let mut first = spawn_node_logged(&file, 0, &args, &first_log);
    wait_for_log(&first_log, "taken by this process", started);
    let second = finish(spawn_node(&file, 0, &args), started);
    assert_eq!(second.code, Some(2), "{}", second.stderr);
    let lock = dir.join("state").join("member-0").join("lock");
    assert!(
        second.stderr.contains(&format!(
            "{}: another process of member 0 holds its state folder",
            lock.display()
        )),
        "the refusal names the lock: {}",
        second.stderr
    );
    assert_eq!(
        first.child.try_wait().unwrap(),
        None,
        "the first process is unharmed"
    );
    first.child.kill().unwrap();
    first.child.wait().unwrap();
    let third_log = dir.join("third.log");
    let mut third = spawn_node_logged(&file, 0, &args, &third_log);
    wait_for_log(&third_log, "taken by this process", started);
    third.child.kill().unwrap();
    third.child.wait().unwrap();
}

/// SIGKILL three members of five at once (a majority), mid-run, then start them again with the
/// same command, on a cluster whose members keep their view log on disk (`[storage]`): each
/// new process resumes its member's Raft node from its folder, so the log has its majority
/// back; the new processes take their old ones' places in the view (the old ones do not
/// report) and rejoin inactive. Every member, the three restarted included, completes its
/// pairs and exits 0, with no bound broken and the tokens in order (GCS (2,3) and Maekawa
/// of 5). With the log in memory the same kill leaves the cluster without a view change
/// (tests/sim_net.rs shows it).
#[test]
fn a_majority_killed_at_once_comes_back_with_its_view_log_on_disk() {
    let pairs = 2000;
    side_by_side(
        QUOTAS.into_iter().filter(|q| q.2 == 5),
        |(name, quota, n)| {
            let (dir, file) = disk_cluster(&format!("disk-{name}"), quota, n);
            let cluster = Cluster::load(&file).unwrap();
            assert!(cluster.storage_dir(lkcs::ProcessId(0)).is_some());
            let monitor = Monitor::for_faults(&cluster);
            let args = cycle_args(pairs, &monitor);
            let victims = [0, 2, 3];
            let started = Instant::now();
            let nodes = spawn_all(&file, n, &args);
            wait_under_way(&monitor, n, victims[0], 6, started);
            // each victim's folder holds a Raft node the others counted as its member's,
            // which its next process resumes (one killed before has a new node instead)
            for &v in &victims {
                let folder = cluster.storage_dir(lkcs::ProcessId::from(v)).unwrap();
                wait_established(&folder, started, name);
            }
            let (mut killed, nodes): (Vec<Node>, Vec<Node>) = nodes
                .into_iter()
                .partition(|node| victims.contains(&node.id));
            for node in &killed {
                signal(node, libc::SIGKILL);
            }
            let moves_before: Vec<usize> = victims.iter().map(|&v| monitor.moves_of(v)).collect();
            for node in &mut killed {
                node.child.wait().unwrap();
            }
            let argv: Vec<&str> = args.iter().map(String::as_str).collect();
            let restarted_at = Instant::now();
            let again: Vec<Node> = victims
                .iter()
                .map(|&v| {
                    spawn_node_logged(&file, v, &argv, &dir.join(format!("restarted-{v}.log")))
                })
                .collect();
            let ended: Vec<Ended> = nodes.into_iter().map(|n| finish(n, started)).collect();
            let restarted: Vec<Ended> = again.into_iter().map(|n| finish(n, started)).collect();
            assert_survivors_done(&ended, &monitor, pairs);
            for (i, (e, &v)) in restarted.iter().zip(&victims).enumerate() {
                assert_done(e, pairs);
                assert!(
                    monitor.moves_of(v) >= moves_before[i] + 2 * pairs,
                    "{name}: P{v} made {} moves after its restart",
                    monitor.moves_of(v) - moves_before[i]
                );
                let log = std::fs::read_to_string(dir.join(format!("restarted-{v}.log"))).unwrap();
                assert!(
                    log.contains("resumed the view log"),
                    "{name}: P{v} did not resume its member's view log: {log}"
                );
            }
            let back = monitor
                .state
                .lock()
                .unwrap()
                .first_reports
                .iter()
                .filter(|(t, p)| victims.contains(p) && *t > restarted_at)
                .map(|(t, _)| *t - restarted_at)
                .max()
                .expect("the restarted members reported");
            eprintln!("{name}: P0, P2 and P3 killed at once and started again: all back {back:?} after the restart");
        },
    );
}

/// SIGKILL one member of a cluster whose members keep their view log on disk, in the CS when
/// the test can catch it there, delete its state folder, and start it again with the same
/// command: the new process's folder holds no Raft node, so it is not its member's (the
/// old one's votes and acknowledgements are gone with the folder). It does not resume: it
/// clears the folder and rejoins as a new Raft node (a learner until a view has it), after
/// its old process is evicted. Every member, the restarted one included, completes its
/// pairs and exits 0, with no bound broken and the tokens in order, for each quota.
#[test]
fn a_member_restarted_on_an_emptied_state_folder_rejoins_as_a_new_raft_node() {
    let pairs = 1500;
    side_by_side(QUOTAS, |(name, quota, n)| {
        let (dir, file) = disk_cluster(&format!("emptied-{name}"), quota, n);
        let cluster = Cluster::load(&file).unwrap();
        let monitor = Monitor::for_faults(&cluster);
        let args = cycle_args(pairs, &monitor);
        let victim = 1;
        let started = Instant::now();
        let mut nodes = spawn_all(&file, n, &args);
        wait_under_way(&monitor, n, victim, 6, started);
        // the victim's folder holds a Raft node the others counted (else its next process
        // would not resume it anyway, and the test would prove nothing)
        let folder = cluster.storage_dir(lkcs::ProcessId::from(victim)).unwrap();
        wait_established(&folder, started, name);
        let (in_cs, moves_before) = kill_unfinished(nodes.remove(victim), &monitor, pairs, name);
        std::fs::remove_dir_all(&folder).unwrap();
        let argv: Vec<&str> = args.iter().map(String::as_str).collect();
        let log_file = dir.join("restarted.log");
        let restarted_at = Instant::now();
        let again = spawn_node_logged(&file, victim, &argv, &log_file);
        let ended: Vec<Ended> = nodes.into_iter().map(|n| finish(n, started)).collect();
        let restarted = finish(again, started);
        let moved = (victim, moves_before);
        assert_all_done_after_restart(name, &ended, &restarted, &monitor, moved, pairs);
        let log = std::fs::read_to_string(&log_file).unwrap();
        assert!(
            !log.contains("resumed the view log"),
            "{name}: a process on an emptied folder resumed its member's Raft node: {log}"
        );
        assert!(
            log.contains("clears it and joins as a new Raft node"),
            "{name}: the new process did not rejoin as a new Raft node: {log}"
        );
        assert!(
            folder.join("raft-node").exists(),
            "{name}: the rejoined Raft node was not established on its folder"
        );
        let joined = first_report_after(&monitor, victim, restarted_at);
        eprintln!(
            "{name}: P{victim} killed {} the CS, its folder deleted, started again: rejoined as a new Raft node {joined:?} after the restart",
            if in_cs { "in" } else { "out of" }
        );
    });
}

/// SIGSTOP one `--workload cycle` member past its lease and the eviction delay: the others
/// evict it and go on; after SIGCONT the paused member finds its lease run out and fences
/// (its calls return `Evicted`); no upper bound broken, counting it active only while its
/// lease held. The member is stopped while it holds the CS whenever the test can catch it
/// there (Maekawa's mutual exclusion is the sharpest case).
/// - Maekawa: woken once the others installed the view without it, while they still run: it
///   rejoins by itself, makes its pairs again, and every member exits 0 with its pairs made.
/// - GCS: woken after the others finished and left: no view can have it back, so it exits
///   1 naming its eviction.
#[test]
fn a_paused_member_fences_and_the_others_go_on() {
    side_by_side(
        [
            (QUOTAS[1].0, QUOTAS[1].1, QUOTAS[1].2, true),
            (QUOTAS[0].0, QUOTAS[0].1, QUOTAS[0].2, false),
        ],
        |(name, quota, n, mid_run)| {
            // mid-run: enough that the others still run when it is back
            let pairs = if mid_run { 1500 } else { 1000 };
            let (file, cluster, monitor) = cluster(&format!("pause-{name}"), quota, n);
            let victim = 1;
            let args = cycle_args(pairs, &monitor);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            let dir = file.parent().unwrap().to_path_buf();
            let log = |i: usize| dir.join(format!("{i}.log"));
            // woken after the others left, it cannot be back: it waits 1 s, not the default
            let victim_args: Vec<&str> = if mid_run {
                args.clone()
            } else {
                args.iter().copied().chain(QUICK_GIVE_UP).collect()
            };
            let started = Instant::now();
            let paused = spawn_node(&file, victim, &victim_args);
            let others: Vec<Node> = (0..n)
                .filter(|&i| i != victim)
                .map(|i| spawn_node_logged(&file, i, &args, &log(i)))
                .collect();
            wait_under_way(&monitor, n, victim, 4, started);
            let in_cs = stop_in_cs(&paused, &monitor);
            assert!(in_cs, "{name}: P{victim} was never caught in the CS");
            let stopped = Instant::now();
            let survivors: Vec<usize> = (0..cluster.len()).filter(|&i| i != victim).collect();
            if mid_run {
                for &i in &survivors {
                    wait_for_log(&log(i), "view 1 installed", started);
                }
                signal(&paused, libc::SIGCONT);
                let woke = finish(paused, started);
                assert_done(&woke, pairs);
                assert!(
                    woke.stderr.contains("waiting to rejoin") && woke.stderr.contains("rejoined"),
                    "{name}: {}",
                    woke.stderr
                );
                let ended: Vec<Ended> = others.into_iter().map(|n| finish(n, started)).collect();
                assert_survivors_done(&ended, &monitor, pairs);
            } else {
                let ended: Vec<Ended> = others.into_iter().map(|n| finish(n, started)).collect();
                assert_survivors_done(&ended, &monitor, pairs);
                signal(&paused, libc::SIGCONT);
                let woke = finish(paused, started);
                assert_eq!(woke.code, Some(1), "the paused member: {}", woke.stderr);
                let error = error_line(&woke);
                assert!(
                    error.contains("evicted")
                        && error.contains("no view had it back within 1000 ms"),
                    "the wait --rejoin-timeout gave: {error}"
                );
            }
            let recovered = recovery(&monitor, &survivors, stopped);
            assert_eq!(monitor.violations(), Vec::<String>::new());
            eprintln!(
            "{name}: P{victim} paused {} the CS; the others recovered {recovered:?} after the stop",
            if in_cs { "in" } else { "out of" },
        );
        },
    );
}

/// A member driven through the line protocol (its log in a file), killed at the hang guard.
struct LineNode {
    child: std::process::Child,
    stdin: std::process::ChildStdin,
    answers: std::io::Lines<BufReader<std::process::ChildStdout>>,
    done: Arc<AtomicBool>,
}

impl LineNode {
    fn spawn(
        file: &std::path::Path,
        id: usize,
        monitor: &Monitor,
        log: &std::path::Path,
        started: Instant,
    ) -> LineNode {
        let mut child = Command::new(BIN)
            .args(["node", "--cluster"])
            .arg(file)
            .args(["--id", &id.to_string(), "--monitor", &monitor.arg()])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(log).unwrap())
            .spawn()
            .unwrap();
        let pid = child.id() as libc::pid_t;
        let done = Arc::new(AtomicBool::new(false));
        let quit = done.clone();
        thread::spawn(move || {
            while started.elapsed() < GUARD {
                if quit.load(Ordering::SeqCst) {
                    return;
                }
                thread::sleep(Duration::from_millis(50));
            }
            // SAFETY: kill(2) on a child of this test that has not been reaped (the test
            // waits for it only after `done` is set)
            unsafe { libc::kill(pid, libc::SIGKILL) };
        });
        let stdin = child.stdin.take().unwrap();
        let answers = BufReader::new(child.stdout.take().unwrap()).lines();
        LineNode {
            child,
            stdin,
            answers,
            done,
        }
    }

    /// Sends a command; its answer (the member must answer before the hang guard).
    fn ask(&mut self, line: &str) -> String {
        writeln!(self.stdin, "{line}").unwrap();
        self.answers
            .next()
            .unwrap_or_else(|| panic!("no answer to `{line}` before the guard"))
            .unwrap()
    }

    fn quit(mut self) {
        self.done.store(true, Ordering::SeqCst);
        writeln!(self.stdin, "quit").unwrap();
        assert!(self.child.wait().unwrap().success());
    }

    /// Kills the member's process with SIGKILL (a crash) and reaps it.
    fn kill(mut self) {
        // SAFETY: kill(2) on a child of this test that has not been reaped
        let r = unsafe { libc::kill(self.child.id() as libc::pid_t, libc::SIGKILL) };
        assert_eq!(r, 0, "kill(2) of pid {} failed", self.child.id());
        self.done.store(true, Ordering::SeqCst);
        let _ = self.child.wait();
    }
}

/// [`procs::proxied`] with these tests' timers.
fn proxied(name: &str, quota: &str, n: usize) -> (Vec<Vec<Option<Proxy>>>, Vec<PathBuf>) {
    procs::proxied(name, quota, n, PEER_TIMEOUT_MS, VIEWS)
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
    side_by_side([QUOTAS[0], QUOTAS[1]], |(name, quota, n)| {
        let (proxies, files) = proxied(&format!("partition-{name}"), quota, n);
        let cluster = Cluster::load(&files[0]).unwrap();
        let monitor = Monitor::for_faults(&cluster);
        let args = cycle_args(pairs, &monitor);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        // the minority cannot be back while the cut lasts: it waits 1 s, not the default
        let cut_off: Vec<&str> = args.iter().copied().chain(QUICK_GIVE_UP).collect();
        let started = Instant::now();
        let nodes: Vec<Node> = (0..n)
            .map(|i| {
                let args = if minority.contains(&i) {
                    &cut_off
                } else {
                    &args
                };
                spawn_node(&files[i], i, args)
            })
            .collect();
        wait_under_way(&monitor, n, minority[0], 6, started);
        partition(&proxies, &minority, false);
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
    });
}

/// A member that starts in the CS (Maekawa, `initial = "in:0"`) but is started only after the
/// four others evicted it (view 1 installed without it): it must not use the slot the others
/// reclaimed. A member of view 1 answers its lease beat saying it is out; it never held a
/// lease, so it rejoins as a new process, inactive (view 2). Its `enter` answers `ok` only
/// after a real entry in view 2, which the monitor sees (`out` when it joins, then `in` under
/// a lease); the four others complete their pairs, under the monitor.
#[test]
fn a_member_started_after_its_eviction_rejoins_inactive_instead_of_using_its_initial_slot() {
    let quota = "algorithm = \"maekawa\"\ntopology = \"complete:5\"\ninitial = \"in:0\"";
    let (file, _, monitor) = cluster("late", quota, 5);
    // enough that the others still run when the late member starts (they start as soon as
    // view 1 leaves it out)
    let pairs = 1500;
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
    // a log line names its member and the view it was in (view 1 installs seconds after
    // view 0, which the node's log follows)
    let text = std::fs::read_to_string(dir.join("1.log")).unwrap();
    let line = text
        .lines()
        .find(|l| l.contains("view 1 installed"))
        .unwrap();
    assert!(
        line.contains("member=1") && line.contains("view=0"),
        "a log line without its member and view: {line}"
    );
    let mut late = LineNode::spawn(&file, 0, &monitor, &dir.join("0.log"), started);
    entered(&late.ask("enter"), "the late member's enter");
    // the monitor saw it join out, then enter (under a lease, or it would be a violation)
    assert_eq!(monitor.state_of(0), CsState::InCs);
    assert!(monitor.moves_of(0) >= 2, "{}", monitor.moves_of(0));
    assert_eq!(late.ask("state"), "ok active");
    let status = late.ask("status");
    assert!(in_members(&status, 0), "{status}");
    // mutual exclusion has no lower bound: no view gates an exit
    let gate = status
        .split_whitespace()
        .find_map(|w| w.strip_prefix("gate="));
    assert_eq!(
        gate,
        Some("open"),
        "the status names the exit gate: {status}"
    );
    assert_eq!(late.ask("exit"), "ok");
    late.quit();
    let ended: Vec<Ended> = others.into_iter().map(|n| finish(n, started)).collect();
    assert_survivors_done(&ended, &monitor, pairs);
}

/// A member in the CS (driven through the line protocol) paused with SIGSTOP until the four
/// others evicted it (view 1), for Maekawa's mutual exclusion and the (2,3)-GCS: after
/// SIGCONT its lease has run out, so it fences: its waiting and later calls return
/// `Evicted` and `state` says `evicted`; then it rejoins by itself, out of the CS, and its
/// calls work again (an entry under its new lease, seen by the monitor). The fencing token
/// it held when paused is stale: below the token of an entry another member made in a later
/// view (a resource that checks tokens refuses it), and its new entry's token is of a later
/// view. The others complete their pairs; no upper bound broken, counting it active only
/// while its lease held.
#[test]
fn a_paused_member_is_evicted_then_rejoins_by_itself() {
    let pairs = FLOOR_PAIRS;
    side_by_side([QUOTAS[1], QUOTAS[0]], |(name, quota, n)| {
        let victim = 1;
        let run = OneByHand::start(&format!("pause-rejoin-{name}"), quota, n, victim, pairs);
        let (monitor, started, others) = (&run.monitor, run.started, run.others);
        let mut line = run.line;
        let log = |i: usize| run.dir.join(format!("{i}.log"));
        // in the CS (or already there, when it starts in it) and holding its slot
        let old = entered(&line.ask("enter"), name);
        assert_eq!(line.ask("state"), "ok active", "{name}");
        let pid = line.child.id() as libc::pid_t;
        // SAFETY: kill(2) on a child of this test that it has not reaped
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        for i in (0..n).filter(|&i| i != victim) {
            wait_for_log(&log(i), "view 1 installed", started);
        }
        // SAFETY: as above
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
        // its view task finds the lease run out at its next tick (the first answers may come
        // before it): then it is evicted
        loop {
            match line.ask("state").as_str() {
                "ok evicted" => break,
                "ok active" => thread::sleep(Duration::from_millis(5)),
                other => panic!("{name}: the woken member's state: {other}"),
            }
        }
        let exit = line.ask("exit");
        assert!(
            exit.starts_with("error:") && exit.contains("evicted"),
            "{name}: the woken member's exit: {exit}"
        );
        // it rejoins by itself; until then its state says it was evicted
        let mut seen = Vec::new();
        loop {
            let state = line.ask("state");
            if state == "ok inactive" {
                break;
            }
            assert_eq!(state, "ok evicted", "{name}: {seen:?}");
            seen.push(state);
            assert!(started.elapsed() < GUARD, "{name}: it never rejoined");
            thread::sleep(Duration::from_millis(20));
        }
        // the token it held when paused is stale: another member entered in a later view
        let newer = monitor
            .state
            .lock()
            .unwrap()
            .tokens
            .iter()
            .flatten()
            .copied()
            .find(|t| t.view > old.view);
        assert!(
            newer.is_some_and(|t| t > old),
            "{name}: no entry of a later view than {old}"
        );
        let moves = monitor.moves_of(victim);
        let new = entered(&line.ask("enter"), name);
        assert!(
            new.view > old.view && new > old,
            "{name}: {new} after {old}"
        );
        assert_eq!(monitor.state_of(victim), CsState::InCs, "{name}");
        assert!(monitor.moves_of(victim) > moves, "{name}");
        let status = line.ask("status");
        assert!(in_members(&status, victim), "{name}: {status}");
        assert_eq!(line.ask("exit"), "ok", "{name}");
        line.quit();
        let ended: Vec<Ended> = others.into_iter().map(|n| finish(n, started)).collect();
        assert_survivors_done(&ended, monitor, pairs);
        let text = std::fs::read_to_string(log(victim)).unwrap();
        assert!(text.contains("rejoins"), "{name}: {text}");
    });
}

/// A 2 | 3 partition that heals, for Maekawa's mutual exclusion and the (2,3)-GCS: the two
/// members of the minority side (driven through the line protocol, each having held a
/// lease, the first one holding the CS) find their leases run out and answer `evicted`
/// while the three others evict them and go on; once the proxies forward again, both rejoin
/// by themselves, out of the CS, and enter and exit again under new leases. The three complete their pairs; no upper bound
/// broken, counting a member active only while its lease holds.
#[test]
fn a_healed_minority_rejoins_by_itself() {
    let pairs = FLOOR_PAIRS;
    let minority = [0usize, 1];
    side_by_side([QUOTAS[1], QUOTAS[0]], |(name, quota, n)| {
        let (proxies, files) = proxied(&format!("heal-{name}"), quota, n);
        let cluster = Cluster::load(&files[0]).unwrap();
        let monitor = Monitor::for_faults(&cluster);
        let args = cycle_args(pairs, &monitor);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let dir = files[0].parent().unwrap().to_path_buf();
        let log = |i: usize| dir.join(format!("{i}.log"));
        let started = Instant::now();
        let mut small: Vec<LineNode> = minority
            .iter()
            .map(|&i| LineNode::spawn(&files[i], i, &monitor, &log(i), started))
            .collect();
        let large: Vec<Node> = (0..n)
            .filter(|i| !minority.contains(i))
            .map(|i| spawn_node_logged(&files[i], i, &args, &log(i)))
            .collect();
        // both hold a lease before the cut (a member that never held one has nothing to
        // fence: it just waits), and the first one holds the CS
        entered(&small[1].ask("enter"), name);
        assert_eq!(small[1].ask("exit"), "ok", "{name}");
        entered(&small[0].ask("enter"), name);
        partition(&proxies, &minority, false);
        for line in &mut small {
            wait_state(line, "ok evicted", &["ok active", "ok inactive"], name);
        }
        for node in &large {
            wait_for_log(&log(node.id), "view 1 installed", started);
        }
        partition(&proxies, &minority, true);
        for line in &mut small {
            wait_state(line, "ok inactive", &["ok evicted"], name);
        }
        for (line, &i) in small.iter_mut().zip(&minority) {
            // a pause of the loaded machine may evict the rejoined process once more (an
            // eviction names the process, so a late retry of the first one cannot); it
            // then rejoins again
            loop {
                let answer = line.ask("enter");
                if answer.starts_with("error:") && answer.contains("evicted") {
                    wait_state(line, "ok inactive", &["ok evicted"], name);
                    continue;
                }
                entered(&answer, &format!("{name}: P{i}"));
                break;
            }
            assert_eq!(monitor.state_of(i), CsState::InCs, "{name}: P{i}");
            assert_eq!(line.ask("exit"), "ok", "{name}: P{i}");
        }
        for line in small {
            line.quit();
        }
        let ended: Vec<Ended> = large.into_iter().map(|n| finish(n, started)).collect();
        assert_survivors_done(&ended, &monitor, pairs);
        for i in minority {
            let text = std::fs::read_to_string(log(i)).unwrap();
            assert!(text.contains("rejoins"), "{name}: P{i}: {text}");
        }
    });
}

/// Asks `line` its state until it is `want`, any of `before` meanwhile.
fn wait_state(line: &mut LineNode, want: &str, before: &[&str], name: &str) {
    loop {
        let state = line.ask("state");
        if state == want {
            return;
        }
        assert!(
            before.contains(&state.as_str()),
            "{name}: waiting for `{want}`: {state}"
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// SIGTERM to a member mid-run is a graceful leave, for the (2,3)-GCS and Maekawa's mutual
/// exclusion: the member exits the CS if it is in it (waiting as an exit waits), asks the
/// view log to remove it, and exits 0 once a view without it installed, logging that it
/// left; the four others complete their pairs. No upper bound broken; the monitor last saw
/// the member out.
#[test]
fn sigterm_is_a_graceful_leave() {
    let pairs = FLOOR_PAIRS;
    side_by_side([QUOTAS[0], QUOTAS[1]], |(name, quota, n)| {
        let (file, _, monitor) = cluster(&format!("leave-{name}"), quota, n);
        let victim = 3;
        let started = Instant::now();
        let mut nodes = spawn_all(&file, n, &cycle_args(pairs, &monitor));
        wait_under_way(&monitor, n, victim, 6, started);
        let leaver = nodes.remove(victim);
        signal(&leaver, libc::SIGTERM);
        let left = finish(leaver, started);
        assert_eq!(left.code, Some(0), "{name}: {}", left.stderr);
        assert!(
            left.stderr.contains("left the cluster"),
            "{name}: {}",
            left.stderr
        );
        assert_eq!(monitor.state_of(victim), CsState::OutCs, "{name}");
        let ended: Vec<Ended> = nodes.into_iter().map(|n| finish(n, started)).collect();
        assert_survivors_done(&ended, &monitor, pairs);
    });
}

/// The view number a member's line-protocol `status` names (`view=N`).
fn view_number(status: &str) -> Option<u64> {
    status
        .split_whitespace()
        .find_map(|w| w.strip_prefix("view="))
        .and_then(|v| v.parse().ok())
}

/// Whether the line protocol's `status` answer lists member `i` in its view.
fn in_members(status: &str, i: usize) -> bool {
    status
        .split_whitespace()
        .find_map(|w| w.strip_prefix("members="))
        .is_some_and(|m| m.split(',').any(|p| p == i.to_string()))
}

/// A member in the CS paused past its lease but not as long as the eviction delay, twice
/// in a row, for Maekawa's mutual exclusion: each time it wakes with its lease run out, so
/// it fences and answers `evicted`, although the others may still have it in their view;
/// it has them evict it (the log refuses the rejoin of a process it still has), rejoins, and
/// enters again. The second fence of the same process works as the first. The others
/// complete their pairs, with no upper bound broken.
#[test]
fn a_member_fenced_twice_by_short_pauses_rejoins_each_time() {
    let pairs = FLOOR_PAIRS;
    let (name, quota, n) = QUOTAS[1];
    let victim = 1;
    let run = OneByHand::start("short-pauses", quota, n, victim, pairs);
    let (monitor, started, others) = (&run.monitor, run.started, run.others);
    let mut line = run.line;
    let pid = line.child.id() as libc::pid_t;
    for round in 0..2 {
        entered(&line.ask("enter"), &format!("{name}: round {round}"));
        // SAFETY: kill(2) on a child of this test that it has not reaped
        assert_eq!(unsafe { libc::kill(pid, libc::SIGSTOP) }, 0);
        // past the lease (1.5 s), short of the eviction delay (2.5 s)
        thread::sleep(Duration::from_millis(2000));
        // SAFETY: as above
        assert_eq!(unsafe { libc::kill(pid, libc::SIGCONT) }, 0);
        wait_state(&mut line, "ok evicted", &["ok active"], name);
        wait_state(&mut line, "ok inactive", &["ok evicted"], name);
    }
    entered(&line.ask("enter"), name);
    assert_eq!(monitor.state_of(victim), CsState::InCs, "{name}");
    assert_eq!(line.ask("exit"), "ok", "{name}");
    line.quit();
    let ended: Vec<Ended> = others.into_iter().map(|n| finish(n, started)).collect();
    assert_survivors_done(&ended, monitor, pairs);
}

/// A cluster with views whose member `by_hand` is driven through the line protocol while
/// the others run the cycle workload, every log in a file of the run's directory.
struct OneByHand {
    line: LineNode,
    others: Vec<Node>,
    monitor: Monitor,
    dir: PathBuf,
    started: Instant,
}

impl OneByHand {
    fn start(name: &str, quota: &str, n: usize, by_hand: usize, pairs: usize) -> OneByHand {
        let (file, _, monitor) = cluster(name, quota, n);
        let args = cycle_args(pairs, &monitor);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let dir = file.parent().unwrap().to_path_buf();
        let started = Instant::now();
        let log = |i: usize| dir.join(format!("{i}.log"));
        let line = LineNode::spawn(&file, by_hand, &monitor, &log(by_hand), started);
        let others = (0..n)
            .filter(|&i| i != by_hand)
            .map(|i| spawn_node_logged(&file, i, &args, &log(i)))
            .collect();
        OneByHand {
            line,
            others,
            monitor,
            dir,
            started,
        }
    }
}

/// The exit gate a member's line-protocol `status` names (`gate=...`).
fn gate(status: &str) -> Option<&str> {
    field(status, "gate")
}

/// The value of `key` in a line-protocol `status` (`key=...`).
fn field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status
        .split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
}

/// Asks `node` its status until its gate is `want`; the last status.
fn wait_for_gate(node: &mut LineNode, want: &str, started: Instant) -> String {
    wait_for_field(node, "gate", want, started)
}

/// Asks `node` its status until its `key` is `want`; the last status.
fn wait_for_field(node: &mut LineNode, key: &str, want: &str, started: Instant) -> String {
    wait_for_status(node, &format!("{key}={want}"), started, |status| {
        field(status, key) == Some(want)
    })
}

/// Asks `node` its status every 50 ms until `until` holds of it (failing the test, naming
/// `what` and the last status, once the hang guard's time is up); the last status.
fn wait_for_status(
    node: &mut LineNode,
    what: &str,
    started: Instant,
    until: impl Fn(&str) -> bool,
) -> String {
    loop {
        let status = node.ask("status");
        if until(&status) {
            return status;
        }
        assert!(
            started.elapsed() < GUARD,
            "never saw {what}; last: {status}"
        );
        thread::sleep(Duration::from_millis(50));
    }
}

/// LKCS's round trip on ring:6 with (l, k) = (1, 3): six `lkcs node` processes on the line
/// protocol, every member starting in the CS. P4 exits, and P2 is killed (SIGKILL) in the
/// CS. The view without P2 leaves P1's and P3's neighbourhoods ({P0, P1}, {P3, P4}) no room
/// for the round trip: it lowers their bounds and gates the exits of P0, P1, P3 and P4
/// (`gate=rejoin`) instead of being refused, which fenced every member. P4 enters again, P5
/// (`gate=open`) exits and enters, and P1's exit waits. P2, started again with the same
/// command, rejoins: every gate lifts, and P1's exit, carried across that view change once
/// its call timed out, completes. No upper bound broken.
#[test]
fn lkcs_without_room_after_a_kill_gates_the_neighbourhood_until_the_member_rejoins() {
    let quota =
        "algorithm = \"lkcs\"\ntopology = \"ring:6\"\nl = 1\nk = 3\ninitial = \"in:0,1,2,3,4,5\"";
    let (file, _, monitor) = cluster("lkcs-no-room", quota, 6);
    let dir = file.parent().unwrap().to_path_buf();
    let started = Instant::now();
    let mut nodes: Vec<LineNode> = (0..6)
        .map(|i| LineNode::spawn(&file, i, &monitor, &dir.join(format!("{i}.log")), started))
        .collect();
    // the answer waits for the member's first lease
    assert_eq!(nodes[4].ask("exit"), "ok", "P4 exits in view 0");
    nodes.remove(2).kill();
    // nodes: P0, P1, P3, P4, P5
    for i in [0, 1, 2, 3] {
        let status = wait_for_gate(&mut nodes[i], "rejoin", started);
        assert!(!in_members(&status, 2), "view without P2: {status}");
    }
    // P5 installs the view on its own tick: its status may still list P2 for a moment
    let status = wait_for_status(&mut nodes[4], "P5 leave P2 out", started, |status| {
        !in_members(status, 2)
    });
    assert_eq!(
        gate(&status),
        Some("open"),
        "P5's exits are not gated: {status}"
    );
    entered(&nodes[3].ask("enter"), "P4's entry in the deficit view");
    for _ in 0..5 {
        assert_eq!(nodes[4].ask("exit"), "ok", "P5 exits in the deficit view");
        entered(&nodes[4].ask("enter"), "P5's entry in the deficit view");
    }
    let waited = nodes[1].ask("exit 300");
    assert!(
        waited.starts_with("error: timed out"),
        "P1's exit waits at the gate: {waited}"
    );
    assert_eq!(nodes[1].ask("state"), "ok active");
    // P2 again, with the same command: it rejoins inactive, and the view with it back
    // restores every bound
    let back = LineNode::spawn(&file, 2, &monitor, &dir.join("2-again.log"), started);
    let status = wait_for_gate(&mut nodes[1], "open", started);
    assert!(in_members(&status, 2), "P2 is back: {status}");
    for i in [0, 2, 3] {
        let status = wait_for_gate(&mut nodes[i], "open", started);
        assert!(in_members(&status, 2), "P2 is back: {status}");
    }
    assert_eq!(nodes[1].ask("exit"), "ok", "P1's exit, the gate lifted");
    assert_eq!(nodes[1].ask("state"), "ok inactive");
    back.quit();
    for node in nodes {
        node.quit();
    }
    assert_safe(&monitor);
}

/// LKCS's round trip on complete:5 with (l, k) = (0, 3): five `lkcs node` processes on the
/// line protocol, P0 and P1 starting in the CS. P2 enters through the reserve, P4 is killed
/// (SIGKILL), and every survivor's status shows the surplus view: without P4, entries gated
/// (`entry_gate=restore`), exits not. Returns the survivors' nodes (P0 to P3), the cluster
/// file, the monitor, the test's start and each survivor's surplus view number.
fn surplus_after_a_kill(name: &str) -> (Vec<LineNode>, PathBuf, Monitor, Instant, Vec<u64>) {
    let quota =
        "algorithm = \"lkcs\"\ntopology = \"complete:5\"\nl = 0\nk = 3\ninitial = \"in:0,1\"";
    let (file, _, monitor) = cluster(name, quota, 5);
    let dir = file.parent().unwrap().to_path_buf();
    let started = Instant::now();
    let mut nodes: Vec<LineNode> = (0..5)
        .map(|i| LineNode::spawn(&file, i, &monitor, &dir.join(format!("{i}.log")), started))
        .collect();
    entered(
        &nodes[2].ask("enter"),
        "P2's entry through the reserve in view 0",
    );
    nodes.remove(4).kill();
    // nodes: P0, P1, P2, P3; every one of them is in the raised bound's neighbourhood
    let mut surplus_views = Vec::new();
    for node in nodes.iter_mut() {
        let status = wait_for_field(node, "entry_gate", "restore", started);
        assert!(!in_members(&status, 4), "a view without P4: {status}");
        assert_eq!(gate(&status), Some("open"), "no exit waits: {status}");
        surplus_views.push(view_number(&status).expect("a view"));
    }
    (nodes, file, monitor, started, surplus_views)
}

/// LKCS's round trip on complete:5 with (l, k) = (0, 3), which it runs with the tightened
/// bound 2: five `lkcs node` processes on the line protocol, P0 and P1 starting in the CS.
/// P2 enters through the reserve (3 in the CS, at the bound), and P4 is killed (SIGKILL). The
/// view without it starts at an upper bound LKCS tightens (3 of 4, below the neighbourhood's
/// size): it is built with that bound raised and every survivor's entries gated
/// (`entry_gate=restore`) instead of being refused, which fenced every member. P3's entry
/// waits; P1's exit is not gated, and after it P1 asks for a view of the same members that
/// restores the bound (`entry_gate=open`, a later view, no one fenced), and P3's entry
/// completes. The monitor checks the upper bound after every move.
#[test]
fn lkcs_started_at_a_bound_it_tightens_after_a_kill_gates_entries_until_an_exit() {
    let (mut nodes, _, monitor, started, surplus_views) = surplus_after_a_kill("lkcs-surplus");
    let waited = nodes[3].ask("enter 300");
    assert!(
        waited.starts_with("error: timed out"),
        "P3's entry waits at the gate: {waited}"
    );
    assert_eq!(nodes[1].ask("exit"), "ok", "P1 exits in the surplus view");
    entered(
        &nodes[3].ask("enter"),
        "P3's entry once a view restores the bound",
    );
    for (node, surplus) in nodes.iter_mut().zip(surplus_views) {
        let status = wait_for_field(node, "entry_gate", "open", started);
        assert!(!in_members(&status, 4), "still without P4: {status}");
        // a fenced member's gate is open too: the gate lifted in a later view, in which the
        // member holds its place
        assert!(
            view_number(&status).is_some_and(|v| v > surplus),
            "a restore view lifted the gate: {status}"
        );
        assert_ne!(node.ask("state"), "ok evicted", "no one fenced");
    }
    assert_eq!(nodes[3].ask("state"), "ok active");
    for node in nodes {
        node.quit();
    }
    assert_safe(&monitor);
}

/// A member started again while the view without it is a surplus view: LKCS's round trip on
/// complete:5 with (l, k) = (0, 3), P0 and P1 starting in the CS, P2 entering through the
/// reserve, P4 killed (SIGKILL). While the four survivors' entries wait at the gate
/// (`entry_gate=restore`), P4 is started again with the same command and rejoins: every
/// member's view has it back, it is inactive, and no one fenced. The bound still holds P3's
/// entry (three members in the CS), and P1's exit lets it in. The monitor checks the upper
/// bound after every move.
#[test]
fn a_member_restarted_into_a_surplus_view_rejoins_inactive_and_entries_resume_after_an_exit() {
    let (mut nodes, file, monitor, started, _) = surplus_after_a_kill("lkcs-surplus-rejoin");
    let dir = file.parent().unwrap().to_path_buf();
    // P4 again, with the same command, while the survivors sit in the surplus view
    nodes.push(LineNode::spawn(
        &file,
        4,
        &monitor,
        &dir.join("4-again.log"),
        started,
    ));
    for (i, node) in nodes.iter_mut().enumerate() {
        let what = format!("member {i} of the list have P4 back");
        let status = wait_for_status(node, &what, started, |status| in_members(status, 4));
        assert!(view_number(&status).is_some(), "a view: {status}");
    }
    assert_eq!(nodes[4].ask("state"), "ok inactive", "P4 rejoins inactive");
    let waited = nodes[3].ask("enter 300");
    assert!(
        waited.starts_with("error: timed out"),
        "three members are in the CS: P3's entry waits: {waited}"
    );
    assert_eq!(nodes[1].ask("exit"), "ok", "P1 exits");
    entered(&nodes[3].ask("enter"), "P3's entry after P1's exit");
    for (i, node) in nodes.iter_mut().enumerate() {
        assert_ne!(
            node.ask("state"),
            "ok evicted",
            "member {i} of the list fenced"
        );
    }
    assert_eq!(nodes[3].ask("state"), "ok active");
    for node in nodes {
        node.quit();
    }
    assert_safe(&monitor);
}

/// A restarted member readmitted before a neighbour's link met its new process: LKCS on
/// ring:6 with (l, k) = (1, 3), every link through a proxy. P2 is killed in the CS, and the
/// view without it gates P1's exit, which times out and keeps waiting. With P1's link to P2
/// cut, P2 starts again and rejoins: P1 installs the view that has it back while its link
/// still knows only the dead process, and its carried exit sends the new P2 its request.
/// The link must not drop that request when it meets the new process (it drops what it
/// queued for the old one), and P1 must not count P2 unreachable, or evict it, for its old
/// process's silence: once the cut heals, P1's exit completes. No bound broken.
#[test]
fn a_member_readmitted_before_a_link_met_its_new_process_gets_that_views_messages() {
    let quota =
        "algorithm = \"lkcs\"\ntopology = \"ring:6\"\nl = 1\nk = 3\ninitial = \"in:0,1,2,3,4,5\"";
    let (proxies, files) = proxied("lkcs-readmitted", quota, 6);
    let monitor = Monitor::for_faults(&Cluster::load(&files[0]).unwrap());
    let dir = files[0].parent().unwrap().to_path_buf();
    let started = Instant::now();
    let log = |name: &str| dir.join(format!("{name}.log"));
    let mut nodes: Vec<LineNode> = (0..6)
        .map(|i| LineNode::spawn(&files[i], i, &monitor, &log(&i.to_string()), started))
        .collect();
    assert_eq!(nodes[4].ask("exit"), "ok", "P4 exits in view 0");
    // P1 exits and enters again: P2 answered it, so P1's link has met P2's first process
    assert_eq!(nodes[1].ask("exit"), "ok", "P1 exits in view 0");
    entered(&nodes[1].ask("enter"), "P1 enters again in view 0");
    nodes.remove(2).kill();
    // nodes: P0, P1, P3, P4, P5
    let status = wait_for_gate(&mut nodes[1], "rejoin", started);
    assert!(!in_members(&status, 2), "view without P2: {status}");
    let waited = nodes[1].ask("exit 300");
    assert!(
        waited.starts_with("error: timed out"),
        "P1's exit waits at the gate: {waited}"
    );
    let link = |heal: bool| {
        for proxy in [&proxies[1][2], &proxies[2][1]] {
            let proxy = proxy.as_ref().expect("a proxy between P1 and P2");
            match heal {
                true => proxy.heal(),
                false => proxy.cut(),
            }
        }
    };
    link(false);
    let back = LineNode::spawn(&files[2], 2, &monitor, &log("2-again"), started);
    let readmitted = wait_for_gate(&mut nodes[1], "open", started);
    assert!(
        in_members(&readmitted, 2),
        "P2 is back in P1's view: {readmitted}"
    );
    // the carried exit has started in that view, its request to P2 queued in P1's link
    thread::sleep(Duration::from_millis(300));
    link(true);
    // the link meets the new process only now, after the view that has it
    wait_for_log(&log("1"), "P2 restarted", started);
    assert_eq!(
        nodes[1].ask("exit"),
        "ok",
        "P1's exit, carried into the view with P2 back, once the link met the new P2"
    );
    assert_eq!(nodes[1].ask("state"), "ok inactive");
    // in that same view: no change evicted P2 for its old process's silence (which carried
    // the exit into one more view, the link met by then)
    let status = nodes[1].ask("status");
    assert_eq!(
        view_number(&status),
        view_number(&readmitted),
        "P1 is still in the view that readmitted P2: {status} (then: {readmitted})"
    );
    back.quit();
    for node in nodes {
        node.quit();
    }
    assert_eq!(monitor.violations(), Vec::<String>::new());
}

/// LKCS's leader rules (`leader = "auto"`) on complete:5 with (l, k) = (1, 4), started with
/// P0 and P1 active: the rules need a leader of degree at least 4, which a view of four
/// members on a complete graph cannot have. P4 is killed: the view without it is one the
/// leader rules refuse (before, every member fenced), so it runs the round trip, and each
/// survivor's log says why. Calls go on both ways in that view: P2 and P3 enter, P0 exits,
/// and no survivor fences. No bound broken.
#[test]
fn a_view_the_leader_rules_refuse_after_a_kill_runs_the_round_trip() {
    let quota = "algorithm = \"lkcs\"\ntopology = \"complete:5\"\nl = 1\nk = 4\n\
                 leader = \"auto\"\ninitial = \"in:0,1\"";
    let (file, _, monitor) = cluster("lkcs-leader-refused", quota, 5);
    let dir = file.parent().unwrap().to_path_buf();
    let log = |i: usize| dir.join(format!("{i}.log"));
    let started = Instant::now();
    let mut nodes: Vec<LineNode> = (0..5)
        .map(|i| LineNode::spawn(&file, i, &monitor, &log(i), started))
        .collect();
    entered(&nodes[2].ask("enter"), "P2's entry in view 0");
    assert_eq!(nodes[2].ask("exit"), "ok", "P2's exit in view 0");
    nodes.remove(4).kill();
    for (i, node) in nodes.iter_mut().enumerate() {
        let what = format!("P{i} install a view without P4");
        wait_for_status(node, &what, started, |status| {
            view_number(status).is_some_and(|v| v > 0) && !in_members(status, 4)
        });
        assert_ne!(node.ask("state"), "ok evicted", "P{i} did not fence");
        let text = std::fs::read_to_string(log(i)).unwrap();
        assert!(
            text.contains("the leader rules refuse its start")
                && text.contains("the round trip runs"),
            "P{i}'s log says which algorithm the view runs:\n{text}"
        );
    }
    entered(&nodes[2].ask("enter"), "P2's entry in the view without P4");
    entered(&nodes[3].ask("enter"), "P3's entry in the view without P4");
    assert_eq!(
        nodes[0].ask("exit"),
        "ok",
        "P0's exit in the view without P4"
    );
    for (i, state) in ["inactive", "active", "active", "active"]
        .iter()
        .enumerate()
    {
        assert_eq!(nodes[i].ask("state"), format!("ok {state}"), "P{i}'s state");
    }
    for node in nodes {
        node.quit();
    }
    assert_safe(&monitor);
}
