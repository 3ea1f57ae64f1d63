//! Real `lkcs node` processes for the tests: cluster files with per-member keys, a monitor
//! every node reports to synchronously, starting and reaping nodes under a hang guard.
#![allow(dead_code)]

use super::ports;
use lkcs::net::{Cluster, SecretKey};
use lkcs::{cs::CsState, FencingToken, Instance, Observed, ProcessId};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// The `lkcs` binary: cargo's for a test; for an example (cargo sets no path for one), the
/// crate's release build (`cargo build --release --bin lkcs` first).
pub const BIN: &str = match option_env!("CARGO_BIN_EXE_lkcs") {
    Some(bin) => bin,
    None => concat!(env!("CARGO_MANIFEST_DIR"), "/target/release/lkcs"),
};

/// The longest any node process may run in these tests.
pub const GUARD: Duration = Duration::from_secs(120);

/// The name of the key set of the tests' clusters.
pub const SECRET: &str = "tests/cluster.rs keys";

/// A scratch directory for one test's files.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("lkcs-cluster-{}-{name}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Member `i`'s private key of the key set `keys` (derived from the set's name: the same
/// name gives the same keys), written once (mode 600) to a scratch folder.
pub fn key_file(keys: &str, i: usize) -> (PathBuf, SecretKey) {
    let mut bytes = [0u8; 32];
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for (n, chunk) in bytes.chunks_mut(8).enumerate() {
        for b in keys.bytes().chain([i as u8, n as u8]) {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x0100_0000_01b3);
        }
        chunk.copy_from_slice(&h.to_le_bytes());
    }
    let key = SecretKey::from_bytes(bytes);
    // a folder per call: tests running in parallel never write the same file
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "lkcs-cluster-{}-keys-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{i}.key"));
    // a folder left by an earlier process with the same pid (pids are reused)
    let _ = std::fs::remove_file(&path);
    lkcs::net::write_key(&path, i, &key).unwrap();
    (path, key)
}

/// A cluster file's text: `quota` is the `[quota]` table's body; `keys` names the key set
/// (two files with the same name pin the same keys).
pub fn cluster_text(keys: &str, quota: &str, ports: &[u16], peer_timeout_ms: u64) -> String {
    let members: String = ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let (path, key) = key_file(keys, i);
            format!(
                "[members.{i}]\naddress = \"127.0.0.1:{p}\"\npublic_key = \"{}\"\nprivate_key = {:?}\n",
                key.public(),
                path.display().to_string()
            )
        })
        .collect();
    format!(
        "epoch = 1\n[quota]\n{quota}\n{members}[timing]\nheartbeat_ms = 100\npeer_timeout_ms = {peer_timeout_ms}\nbackoff_max_ms = 200\n"
    )
}

/// Writes a file readable by its owner only (as a node requires of a cluster file).
pub fn write(dir: &Path, name: &str, text: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

/// The test monitor: every node reports each change of its member's state (`I in`,
/// `I out`) and each new end of its lease (`I lease MICROS`, on the wall clock), and waits
/// for `ok` before the change can be seen by anyone; the monitor checks the bounds after
/// every report. An entry's report carries its fencing token (`I in TOKEN`): each member's
/// tokens must grow, and under mutual exclusion over the whole cluster every entry's token
/// must be greater than the entry's before it (in the order the reports came).
///
/// - **Strict** ([`Monitor::start`]): every bound, lower and upper, over the reported states
///   (a run without faults).
/// - **Faults** ([`Monitor::for_faults`]): the upper bounds, counting a member active only
///   while it is in the CS and its lease holds (what a cluster with views guarantees when
///   members crash, pause or are cut off: a member may not use a slot before its first lease
///   or after its lease ran out); and an entry reported with no lease, or more than
///   [`LEASE_SLACK`] after the lease's end, is a violation.
pub struct Monitor {
    pub addr: SocketAddr,
    pub state: Arc<Mutex<Watch>>,
}

pub struct Watch {
    pub inst: Instance,
    pub observed: Observed,
    pub faults: bool,
    /// Each member's lease end (microseconds since the Unix epoch), once reported.
    pub leases: Vec<Option<u128>>,
    pub violations: Vec<String>,
    pub reports: usize,
    /// The members that reported at least one change.
    pub movers: std::collections::BTreeSet<usize>,
    /// Every state change reported: when, and by whom.
    pub moves: Vec<(Instant, usize)>,
    /// The first report of each process (each connection to the monitor): when, and by
    /// which member.
    pub first_reports: Vec<(Instant, usize)>,
    pub max_in_cs: usize,
    pub min_in_cs: usize,
    /// Each member's last entry's token.
    pub tokens: Vec<Option<FencingToken>>,
    /// The last entry's token, of any member.
    pub last_token: Option<FencingToken>,
    /// Entries whose tokens were checked.
    pub tokens_checked: usize,
    /// How late after its lease's end an entry may be reported (microseconds): the trip of
    /// the report ([`LEASE_SLACK`] across processes; 0 where the report is a call).
    pub slack: u128,
}

/// How late after its lease's end (on the monitor's clock, after the report's trip) an entry
/// may still be reported: the node checked its lease just before it reported.
pub const LEASE_SLACK: Duration = Duration::from_millis(100);

fn wall_micros() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_micros()
}

/// Whether `inst` is mutual exclusion over all its members: every neighbourhood is everyone,
/// at most 1.
fn mutual_exclusion(inst: &Instance) -> bool {
    (0..inst.len())
        .map(ProcessId::from)
        .all(|q| inst.topology().closed(q).len() == inst.len() && inst.bounds(q).k == 1)
}

impl Watch {
    /// What a monitor of `cluster` starts from (see [`Monitor`] for `faults`).
    pub fn new(cluster: &Cluster, faults: bool) -> Watch {
        let initial = cluster.initial().to_vec();
        let in_cs = initial.iter().filter(|s| **s == CsState::InCs).count();
        Watch {
            inst: cluster.instance().clone(),
            observed: Observed::new(cluster.instance(), initial),
            faults,
            leases: vec![None; cluster.len()],
            violations: Vec::new(),
            reports: 0,
            movers: Default::default(),
            moves: Vec::new(),
            first_reports: Vec::new(),
            max_in_cs: in_cs,
            min_in_cs: in_cs,
            tokens: vec![None; cluster.len()],
            last_token: None,
            tokens_checked: 0,
            slack: LEASE_SLACK.as_micros(),
        }
    }

    /// `p`'s lease now ends at `end`, reported at `now` (microseconds on one clock).
    pub fn lease(&mut self, p: ProcessId, end: u128, now: u128) {
        self.leases[p.index()] = Some(end);
        self.check_upper(&format!("{p}'s lease was renewed"), now);
    }

    /// `p` went `to` at `now` (microseconds on the leases' clock); an entry carries its
    /// token's text. Checks the entry's lease (with faults) and token, then the bounds.
    pub fn moved(&mut self, p: ProcessId, to: CsState, token: Option<&str>, now: u128) {
        let word = match to {
            CsState::InCs => "in",
            CsState::OutCs => "out",
        };
        if self.faults && to == CsState::InCs {
            match self.leases[p.index()] {
                None => self.violations.push(format!("{p} entered with no lease")),
                Some(end) if end <= now.saturating_sub(self.slack) => {
                    self.violations.push(format!(
                        "{p} entered {} ms after its lease ran out",
                        (now - end) / 1000
                    ))
                }
                Some(_) => {}
            }
        }
        if to == CsState::InCs {
            self.check_token(p, token);
        }
        self.reports += 1;
        self.movers.insert(p.index());
        self.moves.push((Instant::now(), p.index()));
        let broken = self.observed.apply(&self.inst, p, to);
        if !self.faults {
            for (q, c) in broken {
                let b = self.inst.bounds(q);
                self.violations.push(format!(
                    "{q}: {c} active around it, outside [{}, {}], after {p} went {word}",
                    b.l, b.k
                ));
            }
        }
        self.check_upper(&format!("{p} went {word}"), now);
        let in_cs = self
            .observed
            .states()
            .iter()
            .filter(|s| **s == CsState::InCs)
            .count();
        self.max_in_cs = self.max_in_cs.max(in_cs);
        self.min_in_cs = self.min_in_cs.min(in_cs);
    }

    /// Checks the token of `p`'s entry against its own last one and, under mutual
    /// exclusion, against the last entry's of any member.
    fn check_token(&mut self, p: ProcessId, token: Option<&str>) {
        let token: FencingToken = match token.map(str::parse) {
            Some(Ok(t)) => t,
            Some(Err(e)) => return self.violations.push(format!("{p}'s entry: {e}")),
            None => return self.violations.push(format!("{p} entered with no token")),
        };
        if token.member != p.index() {
            self.violations
                .push(format!("{p}'s entry carries {token}, of another member"));
        }
        if let Some(last) = self.tokens[p.index()]
            && token <= last
        {
            self.violations.push(format!(
                "{p}'s entry carries {token}, not above its last entry's {last}"
            ));
        }
        if mutual_exclusion(&self.inst)
            && let Some(last) = self.last_token
            && (token.view, token.clock) <= (last.view, last.clock)
        {
            self.violations.push(format!(
                "mutual exclusion: {p}'s entry carries {token}, not above the last entry's {last}"
            ));
        }
        self.tokens[p.index()] = Some(token);
        self.last_token = Some(token);
        self.tokens_checked += 1;
    }

    /// Member `r` counts as active: in the CS, and (fault mode) within its lease.
    fn active(&self, r: ProcessId, now: u128) -> bool {
        self.observed.states()[r.index()] == CsState::InCs
            && (!self.faults || self.leases[r.index()].is_some_and(|end| now < end))
    }

    /// The upper bounds at `now`, counting active members as [`Watch::active`] does.
    fn check_upper(&mut self, after: &str, now: u128) {
        for q in (0..self.inst.len()).map(ProcessId::from) {
            let closed = self.inst.topology().closed(q);
            let held = closed.iter().filter(|r| self.active(**r, now)).count();
            let k = self.inst.bounds(q).k;
            if held > k {
                self.violations.push(format!(
                    "{q}: {held} active around it (leases counted), above {k}, after {after}"
                ));
            }
        }
    }
}

impl Monitor {
    /// A strict monitor of `cluster` (see the type's doc).
    pub fn start(cluster: &Cluster) -> Monitor {
        Monitor::new(cluster, false)
    }

    /// A monitor of `cluster` for runs with faults (see the type's doc).
    pub fn for_faults(cluster: &Cluster) -> Monitor {
        Monitor::new(cluster, true)
    }

    fn new(cluster: &Cluster, faults: bool) -> Monitor {
        let listener = ports::listener();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(Mutex::new(Watch::new(cluster, faults)));
        let shared = state.clone();
        thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { return };
                let shared = shared.clone();
                thread::spawn(move || serve_monitor(conn, &shared));
            }
        });
        Monitor { addr, state }
    }

    pub fn arg(&self) -> String {
        self.addr.to_string()
    }

    pub fn violations(&self) -> Vec<String> {
        self.state.lock().unwrap().violations.clone()
    }

    /// Member `p`'s reported state.
    pub fn state_of(&self, p: usize) -> CsState {
        self.state.lock().unwrap().observed.states()[p]
    }

    /// How many entries' fencing tokens the monitor checked.
    pub fn tokens_checked(&self) -> usize {
        self.state.lock().unwrap().tokens_checked
    }

    /// How many state changes member `p` reported.
    pub fn moves_of(&self, p: usize) -> usize {
        let w = self.state.lock().unwrap();
        w.moves.iter().filter(|(_, q)| *q == p).count()
    }
}

fn serve_monitor(conn: TcpStream, shared: &Mutex<Watch>) {
    let mut out = conn.try_clone().unwrap();
    let mut first = true;
    for line in BufReader::new(conn).lines() {
        let Ok(line) = line else { return };
        let words: Vec<&str> = line.split_whitespace().collect();
        let (p, word) = match words.as_slice() {
            [id, word, ..] => (ProcessId(id.parse().unwrap()), *word),
            _ => return,
        };
        {
            let mut w = shared.lock().unwrap();
            let w = &mut *w;
            if std::mem::take(&mut first) {
                w.first_reports.push((Instant::now(), p.index()));
            }
            if word == "lease" {
                let end: u128 = words[2].parse().unwrap();
                w.lease(p, end, wall_micros());
            } else {
                let to = if word == "in" {
                    CsState::InCs
                } else {
                    CsState::OutCs
                };
                w.moved(p, to, words.get(2).copied(), wall_micros());
            }
        }
        if out.write_all(b"ok\n").is_err() {
            return;
        }
    }
}

/// The fencing token of a line-protocol `enter` answer (`ok token=TOKEN`); panics naming
/// `what` and the answer when it is anything else.
pub fn entered(answer: &str, what: &str) -> FencingToken {
    match answer.strip_prefix("ok token=").map(str::parse) {
        Some(Ok(t)) => t,
        _ => panic!("{what}: `{answer}` is not an entry with its token"),
    }
}

/// A started `lkcs node`: killed when dropped unfinished (a scenario that fails midway
/// leaves no process behind, a stopped one included).
pub struct Node {
    pub child: Child,
    pub id: usize,
}

impl Drop for Node {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

pub struct Ended {
    pub id: usize,
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Ended {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim()).unwrap_or_else(|e| {
            panic!(
                "node {}: not one JSON object ({e}): {}\nstderr: {}",
                self.id, self.stdout, self.stderr
            )
        })
    }
}

pub fn spawn_node(file: &Path, id: usize, extra: &[&str]) -> Node {
    spawn_with_log(file, id, extra, Stdio::piped())
}

/// [`spawn_node`] with its log (stderr) written to `log`, which the test can read while the
/// node runs.
pub fn spawn_node_logged(file: &Path, id: usize, extra: &[&str], log: &Path) -> Node {
    spawn_with_log(file, id, extra, std::fs::File::create(log).unwrap().into())
}

fn spawn_with_log(file: &Path, id: usize, extra: &[&str], stderr: Stdio) -> Node {
    let child = Command::new(BIN)
        .arg("node")
        .arg("--cluster")
        .arg(file)
        .args(["--id", &id.to_string()])
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .unwrap();
    Node { child, id }
}

/// The node exited 0, did not panic, and made at least `pairs` pairs (its JSON report says).
pub fn assert_done(e: &Ended, pairs: usize) {
    assert_eq!(e.code, Some(0), "node {}: {}\n{}", e.id, e.stdout, e.stderr);
    assert!(
        !e.stderr.contains("panicked"),
        "node {}: {}",
        e.id,
        e.stderr
    );
    let done = e.json()["pairs_completed"].as_u64().unwrap();
    assert!(
        done >= pairs as u64,
        "node {}: {done} pairs of {pairs}",
        e.id
    );
}

/// The node's first `error:` line (failing, with its log, when it has none).
pub fn error_line(e: &Ended) -> &str {
    e.stderr
        .lines()
        .find(|l| l.starts_with("error:"))
        .unwrap_or_else(|| panic!("node {}: no error line: {}", e.id, e.stderr))
}

/// Waits until `log` has a line containing `what` (failing past the guard).
pub fn wait_for_log(log: &Path, what: &str, started: Instant) {
    while !std::fs::read_to_string(log).is_ok_and(|t| t.contains(what)) {
        assert!(
            started.elapsed() < GUARD,
            "{} never logged `{what}`",
            log.display()
        );
        thread::sleep(Duration::from_millis(10));
    }
}

/// Waits for the node (killing it past the guard: the test then fails).
pub fn finish(mut node: Node, started: Instant) -> Ended {
    let mut out = node.child.stdout.take().unwrap();
    // a node whose log goes to a file has none to read here
    let mut err: Box<dyn Read + Send> = match node.child.stderr.take() {
        Some(e) => Box::new(e),
        None => Box::new(std::io::empty()),
    };
    let o = thread::spawn(move || {
        let mut s = String::new();
        let _ = out.read_to_string(&mut s);
        s
    });
    let e = thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        s
    });
    let code = loop {
        if let Some(status) = node.child.try_wait().unwrap() {
            break status.code();
        }
        if started.elapsed() > GUARD {
            let _ = node.child.kill();
            let _ = node.child.wait();
            let stderr = e.join().unwrap();
            let tail: Vec<&str> = stderr.lines().rev().take(60).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            panic!(
                "node {} hung past the guard; the end of its log:\n{}",
                node.id,
                tail.join("\n")
            );
        }
        thread::sleep(Duration::from_millis(5));
    };
    Ended {
        id: node.id,
        code,
        stdout: o.join().unwrap(),
        stderr: e.join().unwrap(),
    }
}

/// A forwarder to `target` that the test can cut: once cut, it closes what it carries and
/// drops every new connection.
pub struct Proxy {
    pub port: u16,
    cut: Arc<AtomicBool>,
    /// The connections it carries now (both ends of each), by number: an entry goes when
    /// its connection ends, so a long run holds no closed sockets.
    conns: Arc<Mutex<std::collections::BTreeMap<u64, [TcpStream; 2]>>>,
}

impl Proxy {
    pub fn start(target: u16) -> Proxy {
        let listener = ports::listener();
        let port = listener.local_addr().unwrap().port();
        let cut = Arc::new(AtomicBool::new(false));
        let conns: Arc<Mutex<std::collections::BTreeMap<u64, [TcpStream; 2]>>> = Arc::default();
        let (c, k) = (cut.clone(), conns.clone());
        thread::spawn(move || {
            for (number, inbound) in (0u64..).zip(listener.incoming()) {
                let Ok(inbound) = inbound else {
                    // out of file descriptors, say: the proxy goes on
                    thread::sleep(Duration::from_millis(10));
                    continue;
                };
                if c.load(Ordering::SeqCst) {
                    continue; // dropped: closed at once
                }
                let Ok(outbound) = TcpStream::connect(("127.0.0.1", target)) else {
                    continue;
                };
                // small frames pass at once, as on a direct connection
                let _ = inbound.set_nodelay(true);
                let _ = outbound.set_nodelay(true);
                let clones = (|| {
                    Ok::<_, std::io::Error>((
                        [inbound.try_clone()?, outbound.try_clone()?],
                        inbound.try_clone()?,
                        outbound.try_clone()?,
                    ))
                })();
                let Ok((held, inbound2, outbound2)) = clones else {
                    continue; // closed at once
                };
                {
                    // a cut sets its flag and takes the connections under this lock: a
                    // connection made while the cut happened is either taken by it or
                    // dropped here, never carried across the cut
                    let mut conns = k.lock().unwrap();
                    if c.load(Ordering::SeqCst) {
                        continue;
                    }
                    conns.insert(number, held);
                }
                for (mut from, mut to) in [(inbound2, outbound2), (outbound, inbound)] {
                    let k = k.clone();
                    thread::spawn(move || {
                        let _ = std::io::copy(&mut from, &mut to);
                        let _ = to.shutdown(Shutdown::Both);
                        k.lock().unwrap().remove(&number);
                    });
                }
            }
        });
        Proxy { port, cut, conns }
    }

    /// Closes what it carries now and refuses new connections until healed.
    pub fn cut(&self) {
        let mut conns = self.conns.lock().unwrap();
        self.cut.store(true, Ordering::SeqCst);
        close_all(&mut conns);
    }

    /// Closes what it carries now (a link reset) and goes on forwarding new connections.
    pub fn reset(&self) {
        close_all(&mut self.conns.lock().unwrap());
    }

    /// Forwards new connections again.
    pub fn heal(&self) {
        self.cut.store(false, Ordering::SeqCst);
    }
}

/// Shuts down both ends of every connection in `conns` and forgets them (their copy threads
/// end on the shutdown).
fn close_all(conns: &mut std::collections::BTreeMap<u64, [TcpStream; 2]>) {
    for c in std::mem::take(conns).into_values().flatten() {
        let _ = c.shutdown(Shutdown::Both);
    }
}

/// Every member reaches every other through a proxy of its own (`proxies[i][j]`: how member
/// `i` reaches member `j`), so that a test cuts exactly the links between two sides; each
/// member's cluster file names its proxies.
pub fn proxied(
    name: &str,
    quota: &str,
    n: usize,
    peer_timeout_ms: u64,
    timing: &str,
) -> (Vec<Vec<Option<Proxy>>>, Vec<PathBuf>) {
    let dir = scratch(name);
    let real = ports::free_ports(n);
    let proxies: Vec<Vec<Option<Proxy>>> = (0..n)
        .map(|i| {
            (0..n)
                .map(|j| (i != j).then(|| Proxy::start(real[j])))
                .collect()
        })
        .collect();
    let files = (0..n)
        .map(|i| {
            let ports: Vec<u16> = (0..n)
                .map(|j| proxies[i][j].as_ref().map_or(real[j], |p| p.port))
                .collect();
            let text = cluster_text(SECRET, quota, &ports, peer_timeout_ms) + timing;
            write(&dir, &format!("cluster{i}.toml"), &text)
        })
        .collect();
    (proxies, files)
}

/// Cuts (or heals) every link between `side` and the others.
pub fn partition(proxies: &[Vec<Option<Proxy>>], side: &[usize], heal: bool) {
    for (i, row) in proxies.iter().enumerate() {
        for (j, proxy) in row.iter().enumerate() {
            if side.contains(&i) != side.contains(&j) {
                let proxy = proxy.as_ref().expect("a proxy between the sides");
                match heal {
                    true => proxy.heal(),
                    false => proxy.cut(),
                }
            }
        }
    }
}

/// Runs `scenario` for every case at once, each on a thread of its own: the scenarios wait
/// on timers most of the time, so side by side they take about as long as the longest
/// one. A scenario that panics fails the test with its own message, once every
/// scenario ended (its nodes are killed as it unwinds: see [`Node`]). With
/// `LKCS_ONE_AT_A_TIME` set, the cases run one after the other (for measurements that must
/// not share the machine, as docs/measurements/recovery.md's).
pub fn side_by_side<T: Send>(cases: impl IntoIterator<Item = T>, scenario: impl Fn(T) + Sync) {
    if std::env::var_os("LKCS_ONE_AT_A_TIME").is_some() {
        cases.into_iter().for_each(scenario);
        return;
    }
    let scenario = &scenario;
    thread::scope(|s| {
        let running: Vec<_> = cases
            .into_iter()
            .map(|case| s.spawn(move || scenario(case)))
            .collect();
        let mut failed = None;
        for r in running {
            if let Err(panic) = r.join() {
                failed.get_or_insert(panic);
            }
        }
        if let Some(panic) = failed {
            std::panic::resume_unwind(panic);
        }
    });
}
