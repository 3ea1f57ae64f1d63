//! A nemesis run: `lkcs node` processes on 127.0.0.1 (five by default), each driven through
//! its line protocol by a client that loops `enter`, a short hold, `exit`, while a nemesis hits
//! the cluster every few seconds at random with one of:
//!
//! - **kill**: SIGKILL one member, start it again a few seconds later (it rejoins);
//! - **pause**: SIGSTOP one member, SIGCONT it later (past its lease or not);
//! - **partition**: cut two members off the others (a 2 | 3 split through proxies), then heal;
//! - **reset**: close every live connection to and from one member (its links reconnect).
//!
//! Every member reaches every other through a proxy of its own, so a partition cuts exactly
//! the links between the sides. Every node reports each change of its state and each new end
//! of its lease to a monitor, synchronously, which checks the upper bounds after every report
//! (counting a member active only while its lease holds) and the order of the fencing tokens
//! (each member's grow; under mutual exclusion every entry's is above the one before).
//!
//! It prints, per member, the availability (the share of one-second intervals in which it
//! completed a call), the calls completed, the distribution of recovery times per fault, and
//! the verdict: PASS when no bound broke, the tokens were in order, no node exited on its own,
//! and every member completed an entry after the last fault. It exits 0 on PASS, 1 otherwise.
//!
//! Not part of CI (it runs for minutes). It runs the crate's release binary, so build that
//! first:
//!
//! ```text
//! cargo build --release --bin lkcs
//! cargo run --release --example nemesis -- --minutes 10 --seed 1 --quota maekawa
//! ```
//!
//! Options: `--minutes M` (10), `--seed S` (1), `--quota maekawa|gcs|kmex` (maekawa: mutual
//! exclusion over 5; gcs: (2,3)-GCS of 5; kmex: 2-mutual exclusion of 5), `--hold-ms H` (5,
//! the time a client stays in the CS and out of it). docs/measurements/nemesis.md holds a run's
//! output.
#[path = "../tests/ports/mod.rs"]
mod ports;
#[path = "../tests/procs/mod.rs"]
mod procs;

use lkcs::net::Cluster;
use procs::{partition, proxied, Monitor, BIN};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{channel, Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The cluster's timers: the tests' (tests/net/faults.rs): a silent peer is unreachable
/// after 800 ms, a member no majority answers for 1.5 s fences, one unreachable for 2.5 s is
/// evicted.
const PEER_TIMEOUT_MS: u64 = 800;
const TIMING: &str = "lease_heartbeat_ms = 100\nlease_ms = 1500\nevict_after_ms = 2500\n";

/// How long a client waits on one call before it asks again (the move keeps running).
const CALL_MS: u64 = 1000;

/// How long the cluster runs with no fault after the last one, before the verdict.
const COOL_DOWN: Duration = Duration::from_secs(15);

struct Options {
    minutes: f64,
    seed: u64,
    quota: &'static str,
    quota_body: &'static str,
    hold: Duration,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        minutes: 10.0,
        seed: 1,
        quota: "maekawa",
        quota_body: "algorithm = \"maekawa\"\ntopology = \"complete:5\"",
        hold: Duration::from_millis(5),
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let value = it
            .next()
            .ok_or_else(|| format!("{flag} needs a value"))?
            .as_str();
        let bad = |what: &str| format!("{flag} {value}: not {what}");
        match flag.as_str() {
            "--minutes" => {
                o.minutes = value
                    .parse()
                    .ok()
                    .filter(|m: &f64| m.is_finite() && *m > 0.0)
                    .ok_or_else(|| bad("a number of minutes above 0"))?
            }
            "--seed" => o.seed = value.parse().map_err(|_| bad("an integer"))?,
            "--hold-ms" => {
                o.hold = Duration::from_millis(value.parse().map_err(|_| bad("milliseconds"))?)
            }
            "--quota" => {
                (o.quota, o.quota_body) = match value {
                    "maekawa" => (
                        "maekawa",
                        "algorithm = \"maekawa\"\ntopology = \"complete:5\"",
                    ),
                    "gcs" => (
                        "gcs",
                        "algorithm = \"gcs\"\ntopology = \"complete:5\"\nl = 2\nk = 3",
                    ),
                    "kmex" => (
                        "kmex",
                        "algorithm = \"kmex\"\ntopology = \"complete:5\"\nk = 2",
                    ),
                    _ => return Err(bad("maekawa, gcs or kmex")),
                }
            }
            _ => {
                return Err(format!(
                    "unknown option {flag}: --minutes, --seed, --quota, --hold-ms"
                ))
            }
        }
    }
    Ok(o)
}

/// One completed call: its member, `enter` or `exit`, when the client first asked for it
/// (asking again after a timed-out or failed attempt keeps this), and when it answered `ok`.
#[derive(Clone, Copy)]
struct Call {
    member: usize,
    enter: bool,
    since: Instant,
    done: Instant,
}

/// What the clients saw.
#[derive(Default)]
struct Record {
    calls: Vec<Call>,
    /// Failed attempts by the first words of their error.
    errors: BTreeMap<String, usize>,
}

/// A node process's line protocol.
struct Line {
    stdin: ChildStdin,
    answers: std::io::Lines<BufReader<ChildStdout>>,
}

/// A member: its process (none while it is killed, or when it could not be started again)
/// and the way to hand a new incarnation's line protocol to its client.
struct Member {
    id: usize,
    file: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    feed: Sender<Line>,
}

impl Member {
    fn signal(&self, sig: libc::c_int) {
        if let Some(child) = &self.child {
            // SAFETY: kill(2) on the pid of a child this program started and has not reaped
            // (a reaped child is taken out of `self.child`)
            unsafe { libc::kill(child.id() as libc::pid_t, sig) };
        }
    }

    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Member {
    /// No node outlives the run, stopped or not (a panic of the nemesis included).
    fn drop(&mut self) {
        self.signal(libc::SIGCONT);
        self.kill();
    }
}

fn spawn(file: &Path, id: usize, monitor: &str, log: &Path) -> std::io::Result<(Child, Line)> {
    let log = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut child = Command::new(BIN)
        .args(["node", "--cluster"])
        .arg(file)
        .args(["--id", &id.to_string(), "--monitor", monitor])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .spawn()?;
    let stdin = child.stdin.take().expect("piped");
    let answers = BufReader::new(child.stdout.take().expect("piped")).lines();
    Ok((child, Line { stdin, answers }))
}

/// Loops `enter`, hold, `exit`, hold on each incarnation it is handed, until `stop`.
fn client(
    id: usize,
    feed: Receiver<Line>,
    record: Arc<Mutex<Record>>,
    stop: Arc<AtomicBool>,
    hold: Duration,
) {
    while let Ok(mut line) = feed.recv() {
        // a new process starts out of the CS (a restarted member rejoins inactive)
        let mut inside = false;
        let mut since = None;
        loop {
            if stop.load(Ordering::SeqCst) {
                let _ = writeln!(line.stdin, "quit");
                break;
            }
            let cmd = if inside { "exit" } else { "enter" };
            let asked = *since.get_or_insert_with(Instant::now);
            if writeln!(line.stdin, "{cmd} {CALL_MS}").is_err() {
                break; // killed
            }
            let Some(Ok(answer)) = line.answers.next() else {
                break; // killed
            };
            if answer.starts_with("ok") {
                record.lock().unwrap().calls.push(Call {
                    member: id,
                    enter: !inside,
                    since: asked,
                    done: Instant::now(),
                });
                inside = !inside;
                since = None;
                thread::sleep(hold);
            } else {
                let kind: String = answer
                    .trim_start_matches("error: ")
                    .split_whitespace()
                    .take(4)
                    .collect::<Vec<_>>()
                    .join(" ");
                let evicted = answer.contains("evicted");
                *record.lock().unwrap().errors.entry(kind).or_default() += 1;
                if evicted && inside {
                    // an evicted member counts as inactive: it asks to enter, once it
                    // rejoined, and that is a new call
                    inside = false;
                    since = None;
                }
                if !answer.contains("timed out") {
                    // a call that failed at once (a peer it needs is unreachable, or the
                    // member is evicted): ask again after a short back-off, as a client would
                    thread::sleep(Duration::from_millis(20));
                }
            }
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Debug)]
enum Kind {
    Kill,
    Pause,
    Partition,
    Reset,
}

/// One fault: its kind, the members it hit, when it started and when it was healed (the
/// restart, the SIGCONT, the heal; its start for a reset).
struct Fault {
    kind: Kind,
    victims: Vec<usize>,
    start: Instant,
    heal: Instant,
}

/// Starts member `m` again (after a kill, or after it exited on its own).
fn restart(m: &mut Member, monitor: &str) -> std::io::Result<()> {
    let (child, line) = spawn(&m.file, m.id, monitor, &m.log)?;
    m.child = Some(child);
    let _ = m.feed.send(line);
    Ok(())
}

/// Members that exited without being killed: each is named, and started again.
fn reap_unexpected(members: &mut [Member], monitor: &str, exits: &mut Vec<String>) {
    for m in members.iter_mut() {
        let exited = m.child.as_mut().and_then(|c| c.try_wait().ok().flatten());
        if let Some(status) = exited {
            m.child = None;
            exits.push(format!("P{} exited on its own ({status})", m.id));
            if let Err(e) = restart(m, monitor) {
                exits.push(format!("P{} could not be started again: {e}", m.id));
            }
        }
    }
}

fn seconds(d: Duration) -> String {
    format!("{:.2}", d.as_secs_f64())
}

/// min / median / 90th percentile / max of `v`, in seconds.
fn spread(mut v: Vec<Duration>) -> String {
    if v.is_empty() {
        return "-".into();
    }
    v.sort();
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    format!(
        "n={:<3} min {:>6}  p50 {:>6}  p90 {:>6}  max {:>6}",
        v.len(),
        seconds(v[0]),
        seconds(at(0.5)),
        seconds(at(0.9)),
        seconds(v[v.len() - 1])
    )
}

fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if !Path::new(BIN).exists() {
        eprintln!(
            "error: {BIN} not found: run `cargo build --release` in the crate's folder first"
        );
        return ExitCode::from(2);
    }
    let n = 5;
    let (proxies, files) = proxied(
        &format!("nemesis-{}", o.quota),
        o.quota_body,
        n,
        PEER_TIMEOUT_MS,
        TIMING,
    );
    let cluster = Cluster::load(&files[0]).expect("the cluster file just written");
    let monitor = Monitor::for_faults(&cluster);
    let monitor_arg = monitor.arg();
    let dir = files[0].parent().expect("a folder").to_path_buf();
    let record = Arc::new(Mutex::new(Record::default()));
    let stop = Arc::new(AtomicBool::new(false));
    let mut rng = ChaCha8Rng::seed_from_u64(o.seed);
    println!(
        "nemesis: {} members, quota {} ({}), seed {}, {} min of faults then {} s without; hold {} ms",
        n,
        o.quota,
        o.quota_body.replace('\n', ", "),
        o.seed,
        o.minutes,
        COOL_DOWN.as_secs(),
        o.hold.as_millis()
    );
    println!(
        "timing: peer_timeout_ms = {PEER_TIMEOUT_MS}, {}",
        TIMING.trim().replace('\n', ", ")
    );
    println!("logs and history: {}", dir.display());

    let mut clients = Vec::new();
    let mut members: Vec<Member> = Vec::new();
    for (id, file) in files.iter().enumerate() {
        let (tx, rx) = channel();
        let (r, s, hold) = (record.clone(), stop.clone(), o.hold);
        clients.push(thread::spawn(move || client(id, rx, r, s, hold)));
        let log = dir.join(format!("node-{id}.log"));
        let (child, line) = match spawn(file, id, &monitor_arg, &log) {
            Ok(started) => started,
            Err(e) => {
                eprintln!("error: cannot start {BIN}: {e}");
                return ExitCode::from(2);
            }
        };
        let _ = tx.send(line);
        members.push(Member {
            id,
            file: file.clone(),
            log,
            child: Some(child),
            feed: tx,
        });
    }

    // under way: every member completed an entry (or the run fails at once)
    let warm = Instant::now();
    while (0..n).any(|m| {
        !record
            .lock()
            .unwrap()
            .calls
            .iter()
            .any(|c| c.member == m && c.enter)
    }) {
        if warm.elapsed() > Duration::from_secs(60) {
            eprintln!(
                "error: the cluster never got under way (logs in {})",
                dir.display()
            );
            return ExitCode::from(1);
        }
        thread::sleep(Duration::from_millis(20));
    }

    let start = Instant::now();
    let run = Duration::from_secs_f64(o.minutes * 60.0);
    let mut faults: Vec<Fault> = Vec::new();
    let mut exits: Vec<String> = Vec::new();
    while start.elapsed() < run {
        thread::sleep(Duration::from_millis(rng.random_range(2000..=5000)));
        reap_unexpected(&mut members, &monitor_arg, &mut exits);
        if start.elapsed() >= run {
            break;
        }
        let kind = [Kind::Kill, Kind::Pause, Kind::Partition, Kind::Reset][rng.random_range(0..4)];
        let victim = rng.random_range(0..n);
        let fault_start = Instant::now();
        let victims = match kind {
            Kind::Kill => {
                let m = &mut members[victim];
                m.kill();
                thread::sleep(Duration::from_millis(rng.random_range(1000..=8000)));
                if let Err(e) = restart(m, &monitor_arg) {
                    exits.push(format!("P{victim} could not be started again: {e}"));
                }
                vec![victim]
            }
            Kind::Pause => {
                members[victim].signal(libc::SIGSTOP);
                thread::sleep(Duration::from_millis(rng.random_range(500..=6000)));
                members[victim].signal(libc::SIGCONT);
                vec![victim]
            }
            Kind::Partition => {
                let mut side = vec![victim];
                while side.len() < 2 {
                    let other = rng.random_range(0..n);
                    if !side.contains(&other) {
                        side.push(other);
                    }
                }
                side.sort();
                partition(&proxies, &side, false);
                thread::sleep(Duration::from_millis(rng.random_range(2000..=10000)));
                partition(&proxies, &side, true);
                side
            }
            Kind::Reset => {
                for (i, row) in proxies.iter().enumerate() {
                    for (j, proxy) in row.iter().enumerate() {
                        match proxy {
                            Some(proxy) if i == victim || j == victim => proxy.reset(),
                            _ => {}
                        }
                    }
                }
                vec![victim]
            }
        };
        faults.push(Fault {
            kind,
            victims,
            start: fault_start,
            heal: Instant::now(),
        });
    }
    let last_heal = Instant::now();
    thread::sleep(COOL_DOWN);
    reap_unexpected(&mut members, &monitor_arg, &mut exits);
    let end = Instant::now();
    stop.store(true, Ordering::SeqCst);
    for m in &mut members {
        // a member still blocked in a call answers within CALL_MS, then quits
        let deadline = Instant::now() + Duration::from_millis(3 * CALL_MS);
        while let Some(child) = &mut m.child {
            if child.try_wait().ok().flatten().is_some() || Instant::now() > deadline {
                break;
            }
            thread::sleep(Duration::from_millis(20));
        }
        m.kill();
    }
    drop(members); // the feeds: the clients end
    for c in clients {
        let _ = c.join();
    }

    let record = std::mem::take(&mut *record.lock().unwrap());
    report(
        n, &record, &faults, &monitor, &exits, start, last_heal, end, &dir,
    )
}

/// Whether member `m` is still rejoining at `at` after the last of `earlier` faults that hit
/// it: it has made no entry since that fault's heal.
fn rejoining(earlier: &[Fault], calls: &[Call], m: usize, at: Instant) -> bool {
    let last = earlier
        .iter()
        .rev()
        .find(|f| f.kind != Kind::Reset && f.victims.contains(&m));
    last.is_some_and(|f| {
        !calls
            .iter()
            .any(|c| c.member == m && c.enter && c.done >= f.heal && c.done < at)
    })
}

/// The longest time member `m` went without completing a call within `[from, until)`, the
/// window's ends counting as completions.
fn longest_stall(calls: &[Call], m: usize, from: Instant, until: Instant) -> Duration {
    let mut done: Vec<Instant> = calls
        .iter()
        .filter(|c| c.member == m && c.done > from && c.done < until)
        .map(|c| c.done)
        .collect();
    done.sort();
    let mut last = from;
    let mut longest = Duration::ZERO;
    for t in done.into_iter().chain([until]) {
        longest = longest.max(t.duration_since(last));
        last = t;
    }
    longest
}

#[allow(clippy::too_many_arguments)]
fn report(
    n: usize,
    record: &Record,
    faults: &[Fault],
    monitor: &Monitor,
    exits: &[String],
    start: Instant,
    last_heal: Instant,
    end: Instant,
    dir: &Path,
) -> ExitCode {
    let calls = &record.calls;
    // the history: every fault and every completed call, in seconds from the start
    let at = |t: Instant| t.saturating_duration_since(start).as_secs_f64();
    let mut history = String::from("event,member,since_s,done_s\n");
    for f in faults {
        for v in &f.victims {
            history += &format!("{:?},{v},{:.3},{:.3}\n", f.kind, at(f.start), at(f.heal));
        }
    }
    for c in calls.iter().filter(|c| c.done >= start) {
        let e = if c.enter { "enter" } else { "exit" };
        history += &format!("{e},{},{:.3},{:.3}\n", c.member, at(c.since), at(c.done));
    }
    let _ = std::fs::write(dir.join("history.csv"), history);

    let total = end.duration_since(start);
    let in_run: Vec<&Call> = calls.iter().filter(|c| c.done >= start).collect();
    let entries = in_run.iter().filter(|c| c.enter).count();
    println!(
        "\nran {} s: {} faults ({}), {} calls completed ({} entries, {} exits)",
        seconds(total),
        faults.len(),
        [Kind::Kill, Kind::Pause, Kind::Partition, Kind::Reset]
            .map(
                |k| format!("{} {:?}", faults.iter().filter(|f| f.kind == k).count(), k)
                    .to_lowercase()
            )
            .join(", "),
        in_run.len(),
        entries,
        in_run.len() - entries
    );
    let errors: Vec<String> = record
        .errors
        .iter()
        .map(|(k, v)| format!("{v} × `{k}`"))
        .collect();
    println!(
        "failed attempts (asked again): {}",
        if errors.is_empty() {
            "none".into()
        } else {
            errors.join("; ")
        }
    );

    println!(
        "\navailability (share of the 1 s intervals from the nemesis's start to the last heal in which the member completed a call):"
    );
    let buckets = last_heal.duration_since(start).as_secs().max(1) as usize;
    for m in 0..n {
        let mut hit = vec![false; buckets];
        for c in in_run.iter().filter(|c| c.member == m) {
            let b = c.done.duration_since(start).as_secs() as usize;
            if b < buckets {
                hit[b] = true;
            }
        }
        let share = hit.iter().filter(|h| **h).count() as f64 / buckets as f64;
        let own = in_run.iter().filter(|c| c.member == m && c.enter).count();
        println!("  P{m}: {:>5.1} %  ({own} entries)", 100.0 * share);
    }

    // recovery, per fault: the others' longest stall (the longest time a member the fault
    // did not hit went without completing a call, between the fault's start and the next
    // fault's: a call that needs the victim waits until it is evicted, or back; members
    // still rejoining after an earlier fault are left out), and each victim's time from the
    // heal (the restart, the SIGCONT, the partition healed) to its first entry
    println!(
        "\nrecovery, seconds (n faults: min / median / 90th percentile / max; `never`: a victim that made no entry after its heal):"
    );
    for kind in [Kind::Kill, Kind::Pause, Kind::Partition, Kind::Reset] {
        let mut others = Vec::new();
        let mut back = Vec::new();
        let mut never = 0;
        for (i, f) in faults.iter().enumerate().filter(|(_, f)| f.kind == kind) {
            let until = faults.get(i + 1).map_or(end, |g| g.start);
            let hit: &[usize] = if kind == Kind::Reset { &[] } else { &f.victims };
            let stalls = (0..n)
                .filter(|m| !hit.contains(m) && !rejoining(&faults[..i], calls, *m, f.start))
                .map(|m| longest_stall(calls, m, f.start, until));
            if let Some(worst) = stalls.max() {
                others.push(worst);
            }
            for v in hit {
                match calls
                    .iter()
                    .find(|c| c.member == *v && c.enter && c.done >= f.heal)
                {
                    Some(c) => back.push(c.done.duration_since(f.heal)),
                    None => never += 1,
                }
            }
        }
        println!(
            "  {:<9} the others' longest stall  {}",
            format!("{kind:?}").to_lowercase(),
            spread(others)
        );
        if kind != Kind::Reset {
            let never = if never > 0 {
                format!("  never: {never}")
            } else {
                String::new()
            };
            println!(
                "  {:<9} the victim's first entry  {}{never}",
                "",
                spread(back)
            );
        }
    }

    let violations = monitor.violations();
    let tokens = monitor.tokens_checked();
    let reports = monitor.state.lock().unwrap().reports;
    let stuck: Vec<usize> = (0..n)
        .filter(|m| {
            !calls
                .iter()
                .any(|c| c.member == *m && c.enter && c.done >= last_heal)
        })
        .collect();
    println!(
        "\nmonitor: {reports} state reports, {tokens} entry tokens checked, {} violations",
        violations.len()
    );
    for v in violations.iter().take(10) {
        println!("  violation: {v}");
    }
    for e in exits {
        println!("  {e}");
    }
    if !stuck.is_empty() {
        println!("  no entry after the last fault: {stuck:?}");
    }
    let pass = violations.is_empty() && tokens > 0 && exits.is_empty() && stuck.is_empty();
    println!("verdict: {}", if pass { "PASS" } else { "FAIL" });
    if pass {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}
