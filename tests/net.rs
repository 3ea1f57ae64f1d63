//! `lkcs::net` over real 127.0.0.1 sockets: reliable FIFO links through a proxy that resets
//! connections mid-stream, the handshake's refusals, garbage on the port, CS objects from the
//! catalog running as nodes under a bound monitor, unreachable peers and restarted members.
//!
//! The binary also holds the other tests of the network and of clusters, so that the waits of
//! some overlap the computing of others (docs/measurements/tests.md): the view log over an
//! in-memory transport (`view_log`), the views run by nodes over real links (`views`),
//! `lkcs node` as real OS processes (`cluster`), and those processes meeting real faults under
//! the monitor (`faults`).

#[path = "../src/test_threads.rs"]
mod test_threads;
/// Test threads per core (src/test_threads.rs): four times the cores. Most of these tests
/// wait on sockets, timers and child processes; the fault scenarios' node processes keep the
/// cores busy meanwhile (70 s of CPU in 35 s on 2 cores, against 41 s with two threads per
/// core and 38 s with three: docs/measurements/tests.md).
const TEST_THREADS_PER_CORE: usize = 4;

mod ports;
#[cfg(feature = "cli")]
mod procs;

#[cfg(feature = "cli")]
#[path = "net/cluster.rs"]
mod cluster;
#[cfg(all(unix, feature = "cli"))]
#[path = "net/faults.rs"]
mod faults;
#[path = "net/view_log.rs"]
mod view_log;
#[path = "net/views.rs"]
mod views;

use lkcs::net::frame::Refusal;
use lkcs::net::{
    CallOutcome, HandshakeError, Identity, LogEvent, Logger, MemberAddress, Net, NetConfig,
    NetEvent, Node, NodeError, NodeHandle, Observer, SecretKey, Timing, Trust, OPERATOR,
};
use lkcs::{
    cs::{CsObject, CsState, Sequence},
    Algorithm, Instance, Observed, ProcessId, SystemSpec, SystemVisitor, Topology,
};
use ports::free_ports;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A hang guard, far beyond what any of these runs takes: a test that hangs fails instead.
const GUARD: Duration = Duration::from_secs(120);

const SPEC: &str = "maekawa complete:4 k=1";

fn fast_timing() -> Timing {
    Timing {
        heartbeat: Duration::from_millis(40),
        peer_timeout: Duration::from_secs(5),
        backoff_min: Duration::from_millis(5),
        backoff_max: Duration::from_millis(80),
        handshake_timeout: Duration::from_secs(2),
        max_handshakes: 16,
        max_handshakes_per_source: 16,
        refusal_log_interval: Duration::ZERO,
        window: 1 << 16,
    }
}

/// Member `id`'s private key (fixed, for the tests).
fn key(id: u32) -> SecretKey {
    // not in the first byte: X25519 clamps its low bits
    let mut bytes = [0x5a; 32];
    bytes[8..12].copy_from_slice(&id.to_le_bytes());
    SecretKey::from_bytes(bytes)
}

/// The pinned public keys of members 0..16.
fn trust() -> Trust {
    (0..16).map(|i| (ProcessId(i), key(i).public())).collect()
}

/// Log events of every member, kept for the assertions (and printed: the harness shows them
/// for a failing test).
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<(ProcessId, LogEvent)>>>);

impl Logs {
    fn logger(&self) -> Logger {
        let logs = self.0.clone();
        Arc::new(move |me, e| {
            eprintln!("lkcs-net {me}: {e}");
            logs.lock().unwrap().push((me, e.clone()));
        })
    }

    fn any(&self, f: impl Fn(ProcessId, &LogEvent) -> bool) -> bool {
        self.0.lock().unwrap().iter().any(|(p, e)| f(*p, e))
    }

    fn count(&self, f: impl Fn(ProcessId, &LogEvent) -> bool) -> usize {
        self.0
            .lock()
            .unwrap()
            .iter()
            .filter(|(p, e)| f(*p, e))
            .count()
    }

    /// Waits until some event satisfies `f` (the hang guard fails the test otherwise).
    async fn wait_for(&self, what: &str, f: impl Fn(ProcessId, &LogEvent) -> bool) {
        let waited = tokio::time::timeout(GUARD, async {
            while !self.any(&f) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
        assert!(waited.is_ok(), "never logged: {what}");
    }
}

async fn bind() -> TcpListener {
    let l = ports::listener();
    l.set_nonblocking(true).unwrap();
    TcpListener::from_std(l).unwrap()
}

fn identity(id: u32, spec: &str, epoch: u64) -> Identity {
    Identity::new(ProcessId(id), key(id), lkcs::net::spec_hash(spec), epoch)
}

fn config(identity: Identity, peers: &[(u32, SocketAddr)], logs: &Logs) -> NetConfig {
    NetConfig {
        identity,
        peers: peers
            .iter()
            .map(|&(p, a)| (ProcessId(p), a.into()))
            .collect(),
        keys: trust(),
        timing: fast_timing(),
        log: logs.logger(),
        on_restart: lkcs::net::OnRestart::Refuse,
    }
}

/// A TCP proxy in front of `target` that cuts every connection (with a reset) after a random
/// number of bytes in `cut`, counted over both directions, so frames are lost mid-stream;
/// while paused it cuts what it carries and refuses new connections.
struct Proxy {
    addr: SocketAddr,
    resets: Arc<AtomicUsize>,
    paused: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// What a man-in-the-middle does to the dialler's bytes, once per connection, past the
/// handshake (about 150 bytes on each side).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tamper {
    /// Flips one bit of one byte.
    Flip,
    /// Inserts 24 random bytes.
    Inject,
    /// Records the first connection's bytes, and opens a connection of its own to replay
    /// them every time a later connection starts.
    Replay,
    /// Replaces what the dialler sends past the handshake by what the previous connection
    /// sent past its own: a splice of two sessions.
    Splice,
    /// No man in the middle: 500 connections held from 127.0.0.2 to every member (reopened
    /// as they are closed), and every link reset every 2..20 kB meanwhile.
    Flood,
    /// No man in the middle: 100 connections from 127.0.0.2 to every member, each sending
    /// one byte every 100 ms (reopened as they are closed), and every link reset every
    /// 2..20 kB meanwhile.
    Slowloris,
}

/// Bytes past which a tampering proxy acts (the handshake's messages are done by then).
const PAST_HANDSHAKE: usize = 400;

/// A man-in-the-middle in front of `target`: it applies `tamper` while `active` holds.
struct Mitm {
    addr: SocketAddr,
    active: Arc<AtomicBool>,
    hits: Arc<AtomicUsize>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Mitm {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Mitm {
    async fn start(target: SocketAddr, tamper: Tamper, seed: u64) -> Mitm {
        let listener = bind().await;
        let addr = listener.local_addr().unwrap();
        let active = Arc::new(AtomicBool::new(true));
        let hits = Arc::new(AtomicUsize::new(0));
        let (act, h) = (active.clone(), hits.clone());
        let task = tokio::spawn(async move {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            // the client's bytes of the previous connection
            let recorded: Arc<Mutex<Vec<u8>>> = Arc::default();
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                let Ok(server) = TcpStream::connect(target).await else {
                    continue;
                };
                // as the links do: no Nagle delay on the relayed hop either
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let on = act.load(Ordering::SeqCst);
                if on && tamper == Tamper::Replay {
                    let old = recorded.lock().unwrap().clone();
                    if !old.is_empty() {
                        let h = h.clone();
                        tokio::spawn(async move {
                            if let Ok(mut s) = TcpStream::connect(target).await {
                                let _ = s.write_all(&old).await;
                                h.fetch_add(1, Ordering::SeqCst);
                                let mut sink = [0u8; 4096];
                                let _ = tokio::time::timeout(Duration::from_secs(3), async {
                                    while let Ok(n) = s.read(&mut sink).await {
                                        if n == 0 {
                                            break;
                                        }
                                    }
                                })
                                .await;
                            }
                        });
                    }
                }
                let at = PAST_HANDSHAKE + rng.random_range(0..2000);
                let bit = 1u8 << rng.random_range(0..8);
                tokio::spawn(mitm_pump(
                    client,
                    server,
                    if on { Some(tamper) } else { None },
                    at,
                    bit,
                    recorded.clone(),
                    h.clone(),
                ));
            }
        });
        Mitm {
            addr,
            active,
            hits,
            task,
        }
    }

    fn stop(&self) {
        self.active.store(false, Ordering::SeqCst);
    }

    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

/// Carries one connection, tampering with the client's bytes at offset `at` (once).
async fn mitm_pump(
    mut client: TcpStream,
    mut server: TcpStream,
    tamper: Option<Tamper>,
    at: usize,
    bit: u8,
    recorded: Arc<Mutex<Vec<u8>>>,
    hits: Arc<AtomicUsize>,
) {
    let previous = recorded.lock().unwrap().clone();
    let mut mine = Vec::new();
    let (mut ca, mut sa) = ([0u8; 4096], [0u8; 4096]);
    let mut from_client = 0usize;
    let mut done = false;
    loop {
        tokio::select! {
            r = client.read(&mut ca) => {
                let n = match r { Ok(0) | Err(_) => break, Ok(n) => n };
                let mut bytes = ca[..n].to_vec();
                if mine.len() < 64 * 1024 {
                    mine.extend_from_slice(&bytes);
                }
                let start = from_client;
                from_client += n;
                if !done && from_client > at {
                    let i = at.saturating_sub(start).min(n - 1);
                    match tamper {
                        Some(Tamper::Flip) => {
                            bytes[i] ^= bit;
                            done = true;
                        }
                        Some(Tamper::Inject) => {
                            let junk: Vec<u8> = (0..24).map(|k| (k as u8).wrapping_mul(37) ^ bit).collect();
                            bytes.splice(i..i, junk);
                            done = true;
                        }
                        Some(Tamper::Splice) if previous.len() > PAST_HANDSHAKE => {
                            // the previous session's bytes, from past its handshake on
                            bytes = previous[at.min(previous.len() - 1)..].to_vec();
                            done = true;
                        }
                        // no session recorded yet: end this one, so there is one
                        Some(Tamper::Splice | Tamper::Replay) if previous.len() <= PAST_HANDSHAKE => {
                            if mine.len() > PAST_HANDSHAKE {
                                *recorded.lock().unwrap() = mine.clone();
                            }
                            break;
                        }
                        _ => {}
                    }
                    if done {
                        hits.fetch_add(1, Ordering::SeqCst);
                    }
                }
                if server.write_all(&bytes).await.is_err() { break; }
            }
            r = server.read(&mut sa) => {
                let n = match r { Ok(0) | Err(_) => break, Ok(n) => n };
                if client.write_all(&sa[..n]).await.is_err() { break; }
            }
        }
    }
    if mine.len() > PAST_HANDSHAKE {
        *recorded.lock().unwrap() = mine;
    }
}

impl Proxy {
    async fn start(target: SocketAddr, cut: Option<Range<usize>>, seed: u64) -> Proxy {
        let listener = bind().await;
        let addr = listener.local_addr().unwrap();
        let resets = Arc::new(AtomicUsize::new(0));
        let paused = Arc::new(AtomicBool::new(false));
        let (r, p) = (resets.clone(), paused.clone());
        let task = tokio::spawn(async move {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            loop {
                let Ok((client, _)) = listener.accept().await else {
                    continue;
                };
                if p.load(Ordering::SeqCst) {
                    let _ = client.set_zero_linger();
                    continue;
                }
                let Ok(server) = TcpStream::connect(target).await else {
                    continue;
                };
                // as the links do: no Nagle delay on the relayed hop either
                let _ = (client.set_nodelay(true), server.set_nodelay(true));
                let budget = cut.clone().map(|c| rng.random_range(c));
                tokio::spawn(pump(client, server, budget, r.clone(), p.clone()));
            }
        });
        Proxy {
            addr,
            resets,
            paused,
            task,
        }
    }

    fn resets(&self) -> usize {
        self.resets.load(Ordering::SeqCst)
    }

    fn pause(&self, paused: bool) {
        self.paused.store(paused, Ordering::SeqCst);
    }
}

async fn pump(
    mut a: TcpStream,
    mut b: TcpStream,
    mut budget: Option<usize>,
    resets: Arc<AtomicUsize>,
    paused: Arc<AtomicBool>,
) {
    let (mut ba, mut bb) = ([0u8; 4096], [0u8; 4096]);
    loop {
        if paused.load(Ordering::SeqCst) || budget == Some(0) {
            break;
        }
        let limit = budget.unwrap_or(usize::MAX).min(4096);
        let (n, to_b) = tokio::select! {
            r = a.read(&mut ba[..limit]) => (r, true),
            r = b.read(&mut bb[..limit]) => (r, false),
            _ = tokio::time::sleep(Duration::from_millis(10)) => continue,
        };
        let n = match n {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        let written = if to_b {
            b.write_all(&ba[..n]).await
        } else {
            a.write_all(&bb[..n]).await
        };
        if written.is_err() {
            return;
        }
        if let Some(left) = budget.as_mut() {
            *left -= n;
        }
    }
    let _ = a.set_zero_linger();
    let _ = b.set_zero_linger();
    resets.fetch_add(1, Ordering::SeqCst);
}

/// Both directions of one link carry `count` messages each through a proxy that resets the
/// connection every 300..3000 bytes (a handshake takes about 250): each side receives exactly 0..count, in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn links_deliver_once_in_order_through_resets() {
    let logs = Logs::default();
    let (l0, l1) = (bind().await, bind().await);
    let proxy = Proxy::start(l1.local_addr().unwrap(), Some(300..3000), 7).await;
    let spec = "link test";
    // about a thousand resets: a redial 1 ms after each (not the 5 ms of `fast_timing`)
    // keeps the run short; what is checked is what the links deliver, not their backoff
    let quick = |c: NetConfig| NetConfig {
        timing: Timing {
            backoff_min: Duration::from_millis(1),
            ..c.timing
        },
        ..c
    };
    let mut n0: Net<u64> = Net::start(
        quick(config(identity(0, spec, 1), &[(1, proxy.addr)], &logs)),
        l0,
    )
    .unwrap();
    let l0_addr = n0.local_addr();
    let mut n1: Net<u64> = Net::start(
        quick(config(identity(1, spec, 1), &[(0, l0_addr)], &logs)),
        l1,
    )
    .unwrap();
    let count = 1000u64;
    let run = async {
        let mut got0 = Vec::new();
        let mut got1 = Vec::new();
        let mut sent = 0;
        while got0.len() < count as usize || got1.len() < count as usize {
            // trickle the sends in so they interleave with the resets
            if sent < count {
                for m in sent..(sent + 50).min(count) {
                    n0.send(ProcessId(1), m).unwrap();
                    n1.send(ProcessId(0), m).unwrap();
                }
                sent = (sent + 50).min(count);
            }
            tokio::select! {
                Some(e) = n0.recv() => if let NetEvent::Message { from, msg } = e {
                    assert_eq!(from, ProcessId(1));
                    got0.push(msg);
                },
                Some(e) = n1.recv() => if let NetEvent::Message { from, msg } = e {
                    assert_eq!(from, ProcessId(0));
                    got1.push(msg);
                },
            }
        }
        (got0, got1)
    };
    let (got0, got1) = tokio::time::timeout(GUARD, run).await.expect("hang guard");
    let want: Vec<u64> = (0..count).collect();
    assert_eq!(
        got0, want,
        "P0 received something else than 0..{count}, in order"
    );
    assert_eq!(
        got1, want,
        "P1 received something else than 0..{count}, in order"
    );
    assert!(
        proxy.resets() >= 5,
        "the proxy cut only {} connections",
        proxy.resets()
    );
    // the resumes resent what was lost
    assert!(logs.any(|_, e| matches!(e, LogEvent::Connected { resent, .. } if *resent > 0)));
}

/// Receives `count` messages on `net`, in order, as their numbers.
async fn receive(net: &mut Net<u64>, count: usize) -> Vec<u64> {
    let mut got = Vec::new();
    while got.len() < count {
        match net.recv().await {
            Some(NetEvent::Message { msg, .. }) => got.push(msg),
            Some(_) => {}
            None => break,
        }
    }
    got
}

/// A drain waits for the peer's acknowledgement: P1 delivered P0's messages but acknowledges
/// only with its heartbeat, 30 s away, so P0's messages are not settled; once P1 drains (it
/// acknowledges what it delivered at once), P0's drain ends, well before that heartbeat.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_waits_for_the_peers_acknowledgement_which_its_drain_sends_at_once() {
    let logs = Logs::default();
    let (l0, l1) = (bind().await, bind().await);
    let (a0, a1) = (l0.local_addr().unwrap(), l1.local_addr().unwrap());
    let slow = Timing {
        heartbeat: Duration::from_secs(30),
        peer_timeout: Duration::from_secs(90),
        ..fast_timing()
    };
    let mut c0 = config(identity(0, SPEC, 1), &[(1, a1)], &logs);
    let mut c1 = config(identity(1, SPEC, 1), &[(0, a0)], &logs);
    c0.timing = slow;
    c1.timing = slow;
    let n0: Net<u64> = Net::start(c0, l0).unwrap();
    let mut n1: Net<u64> = Net::start(c1, l1).unwrap();
    let p1 = ProcessId(1);
    let run = async {
        // both sides serve the connection (each one's first heartbeat, acknowledging
        // nothing, went out as it started)
        logs.wait_for("both sides connected", |_, e| {
            matches!(e, LogEvent::Connected { .. })
        })
        .await;
        while logs.count(|_, e| matches!(e, LogEvent::Connected { .. })) < 2 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        for m in 0..5 {
            n0.send(p1, m).unwrap();
        }
        let gauges = n0.gauges();
        assert_eq!(gauges.handed(p1), 5, "P0 handed its link 5 messages");
        assert_eq!(receive(&mut n1, 5).await, vec![0, 1, 2, 3, 4]);
        assert!(
            !gauges.settled(p1, 5),
            "P1 delivered the messages but acknowledges them only with its heartbeat, 30 s away"
        );
        let unsettled = n1.gauges().drain(&BTreeMap::new(), GUARD).await;
        assert!(
            unsettled.is_empty(),
            "P1 handed nothing, yet {unsettled:?} unsettled"
        );
        // P1's drain wrote its acknowledgement: P0's drain ends before any heartbeat
        let unsettled = gauges
            .drain(&BTreeMap::new(), Duration::from_secs(20))
            .await;
        assert!(
            unsettled.is_empty(),
            "P0's messages not acknowledged by {unsettled:?} although P1 drained"
        );
        assert!(gauges.settled(p1, 5));
    };
    tokio::time::timeout(GUARD, run).await.expect("hang guard");
}

/// A drain does not wait on a peer that stopped for longer than it takes the link to call
/// it unreachable: P1 stopped before P0's messages, so within 200 ms (the peer timeout is
/// 2 s) they are unsettled, and once P1 is unreachable the drain ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_drain_ends_when_the_peer_is_unreachable() {
    let logs = Logs::default();
    let (l0, l1) = (bind().await, bind().await);
    let (a0, a1) = (l0.local_addr().unwrap(), l1.local_addr().unwrap());
    let mut c0 = config(identity(0, SPEC, 1), &[(1, a1)], &logs);
    c0.timing.peer_timeout = Duration::from_secs(2);
    let n0: Net<u64> = Net::start(c0, l0).unwrap();
    let n1: Net<u64> = Net::start(config(identity(1, SPEC, 1), &[(0, a0)], &logs), l1).unwrap();
    let p1 = ProcessId(1);
    let run = async {
        logs.wait_for("connected", |_, e| matches!(e, LogEvent::Connected { .. }))
            .await;
        drop(n1);
        for m in 0..3 {
            n0.send(p1, m).unwrap();
        }
        let gauges = n0.gauges();
        let unsettled = gauges
            .drain(&BTreeMap::new(), Duration::from_millis(200))
            .await;
        assert_eq!(
            unsettled,
            vec![p1],
            "P1 stopped before acknowledging, and is not yet unreachable"
        );
        let unsettled = gauges.drain(&BTreeMap::new(), GUARD).await;
        assert!(
            unsettled.is_empty(),
            "P1 unreachable, yet {unsettled:?} waited on"
        );
        assert!(
            logs.any(
                |me, e| me == ProcessId(0) && matches!(e, LogEvent::Unreachable(p) if *p == p1)
            ),
            "the drain ended because P0's link called P1 unreachable"
        );
    };
    tokio::time::timeout(GUARD, run).await.expect("hang guard");
}

/// A member that drains and then stops loses nothing, through a proxy that resets the
/// connection every 300..3000 bytes: P0 sends 2,000 messages, drains, and drops its net at
/// once; P1 still receives every one, in order (without the drain, the resets' losses at
/// the end stay in a buffer that is gone).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_that_drains_before_it_stops_loses_nothing_through_resets() {
    let logs = Logs::default();
    let (l0, l1) = (bind().await, bind().await);
    let proxy = Proxy::start(l1.local_addr().unwrap(), Some(300..3000), 11).await;
    let n0: Net<u64> =
        Net::start(config(identity(0, SPEC, 1), &[(1, proxy.addr)], &logs), l0).unwrap();
    let a0 = n0.local_addr();
    let mut n1: Net<u64> = Net::start(config(identity(1, SPEC, 1), &[(0, a0)], &logs), l1).unwrap();
    let count = 2000u64;
    let run = async {
        for m in 0..count {
            n0.send(ProcessId(1), m).unwrap();
        }
        let unsettled = n0.gauges().drain(&BTreeMap::new(), GUARD).await;
        assert!(unsettled.is_empty(), "{unsettled:?} never acknowledged");
        drop(n0);
        receive(&mut n1, count as usize).await
    };
    let got = tokio::time::timeout(GUARD, run).await.expect("hang guard");
    assert_eq!(
        got,
        (0..count).collect::<Vec<_>>(),
        "P1 received something else than 0..{count}, in order"
    );
    assert!(
        proxy.resets() >= 3,
        "the proxy cut only {} connections",
        proxy.resets()
    );
}

/// Starts P0 dialling P1 with the given identities; returns the nets (kept alive) and waits
/// for `both` refusals to be logged, one by each side.
async fn refused_on_both_sides(
    id0: Identity,
    id1: Identity,
    matches0: impl Fn(&HandshakeError) -> bool,
    matches1: impl Fn(&HandshakeError) -> bool,
) -> Logs {
    let logs = Logs::default();
    let (l0, l1) = (bind().await, bind().await);
    let (a0, a1) = (l0.local_addr().unwrap(), l1.local_addr().unwrap());
    let _n0: Net<u64> = Net::start(config(id0, &[(1, a1)], &logs), l0).unwrap();
    let _n1: Net<u64> = Net::start(config(id1, &[(0, a0)], &logs), l1).unwrap();
    let refused = |me: u32, m: &dyn Fn(&HandshakeError) -> bool, p: ProcessId, e: &LogEvent| {
        p == ProcessId(me) && matches!(e, LogEvent::Refused { error, .. } if m(error))
    };
    logs.wait_for("P0 refuses", |p, e| refused(0, &matches0, p, e))
        .await;
    logs.wait_for("P1 refuses", |p, e| refused(1, &matches1, p, e))
        .await;
    assert!(
        !logs.any(|_, e| matches!(e, LogEvent::Connected { .. })),
        "a link came up"
    );
    logs
}

/// P0 holds a key that is pinned for no member: P1 refuses it (the channel authenticated a
/// key it does not know) and tells it why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_pinned_for_no_member_is_refused_on_both_sides() {
    let stranger = SecretKey::from_bytes([7; 32]);
    refused_on_both_sides(
        Identity::new(
            ProcessId(0),
            stranger.clone(),
            lkcs::net::spec_hash(SPEC),
            1,
        ),
        identity(1, SPEC, 1),
        |e| matches!(e, HandshakeError::Refused(Refusal::AuthFailed)),
        |e| matches!(e, HandshakeError::UnknownKey(k) if *k == stranger.public()),
    )
    .await;
}

/// P1 answers with a key that is not the one pinned for P1: P0 refuses it before it says
/// anything about itself (P1 only sees the handshake end).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_dialled_with_another_key_is_refused() {
    let logs = Logs::default();
    let (l0, l1) = (bind().await, bind().await);
    let (a0, a1) = (l0.local_addr().unwrap(), l1.local_addr().unwrap());
    let _n0: Net<u64> = Net::start(config(identity(0, SPEC, 1), &[(1, a1)], &logs), l0).unwrap();
    let impostor = Identity::new(ProcessId(1), key(2), lkcs::net::spec_hash(SPEC), 1);
    let _n1: Net<u64> = Net::start(config(impostor, &[(0, a0)], &logs), l1).unwrap();
    logs.wait_for("P0 refuses P1's key", |p, e| {
        p == ProcessId(0)
            && matches!(e, LogEvent::Refused { error: HandshakeError::AuthFailed { from }, .. } if *from == ProcessId(1))
    })
    .await;
    assert!(!logs.any(|_, e| matches!(e, LogEvent::Connected { .. })));
}

/// P2 presents its own valid key while claiming to be P0 (to P1, which takes connections
/// from P0): refused, and named; the real P0 then connects.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_claiming_another_id_is_refused() {
    let logs = Logs::default();
    let (l0, l1) = (bind().await, bind().await);
    let a1 = l1.local_addr().unwrap();
    let unused: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut n1: Net<u64> =
        Net::start(config(identity(1, SPEC, 1), &[(0, unused)], &logs), l1).unwrap();
    // P2's key, P0's id
    let liar = Identity::new(ProcessId(0), key(2), lkcs::net::spec_hash(SPEC), 1);
    let liar_logs = Logs::default();
    let liar_net: Net<u64> = Net::start(config(liar, &[(1, a1)], &liar_logs), l0).unwrap();
    logs.wait_for("P1 refuses the liar", |p, e| {
        p == ProcessId(1)
            && matches!(
                e,
                LogEvent::Refused {
                    error: HandshakeError::IdMismatch { claimed, authenticated },
                    ..
                } if *claimed == ProcessId(0) && *authenticated == ProcessId(2)
            )
    })
    .await;
    liar_logs
        .wait_for("the liar is told", |_, e| {
            matches!(
                e,
                LogEvent::Refused {
                    error: HandshakeError::Refused(Refusal::AuthFailed),
                    ..
                }
            )
        })
        .await;
    drop(liar_net);
    assert!(!logs.any(|_, e| matches!(e, LogEvent::Connected { .. })));
    // the real P0
    let n0: Net<u64> = Net::start(
        config(identity(0, SPEC, 1), &[(1, a1)], &logs),
        bind().await,
    )
    .unwrap();
    n0.send(ProcessId(1), 7).unwrap();
    let got = tokio::time::timeout(GUARD, async {
        loop {
            if let Some(NetEvent::Message { from, msg }) = n1.recv().await {
                return (from, msg);
            }
        }
    })
    .await
    .expect("hang guard");
    assert_eq!(got, (ProcessId(0), 7));
}

/// The operator's key (pinned for [`OPERATOR`] beside the members' keys) cannot act as a
/// member: claiming a member's id, it is refused as an id mismatch that names the operator,
/// and nothing connects. (Authenticated as the operator, it may only ask the status: a unit
/// test of `lkcs::net`'s links.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_operator_key_cannot_claim_a_member_id() {
    let operator = key(1000);
    let with_operator = |mut c: NetConfig| {
        c.keys = (0..16)
            .map(|i| (ProcessId(i), key(i).public()))
            .chain([(OPERATOR, operator.public())])
            .collect();
        c
    };
    let logs = Logs::default();
    let l1 = bind().await;
    let a1 = l1.local_addr().unwrap();
    let unused: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let c1 = with_operator(config(identity(1, SPEC, 1), &[(0, unused)], &logs));
    let n1: Net<u64> = Net::start(c1, l1).unwrap();
    n1.serve_status(Arc::new(|| b"the status".to_vec()));

    // the operator's key, P0's id
    let liar = Identity::new(
        ProcessId(0),
        operator.clone(),
        lkcs::net::spec_hash(SPEC),
        1,
    );
    let liar_logs = Logs::default();
    let liar_net: Net<u64> = Net::start(
        with_operator(config(liar, &[(1, a1)], &liar_logs)),
        bind().await,
    )
    .unwrap();
    logs.wait_for("P1 refuses the operator claiming P0", |p, e| {
        p == ProcessId(1)
            && matches!(
                e,
                LogEvent::Refused {
                    error: HandshakeError::IdMismatch { claimed, authenticated },
                    ..
                } if *claimed == ProcessId(0) && *authenticated == OPERATOR
            )
    })
    .await;
    drop(liar_net);
    assert!(!logs.any(|_, e| matches!(e, LogEvent::Connected { .. })));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_different_spec_is_refused_on_both_sides() {
    let logs = refused_on_both_sides(
        identity(0, SPEC, 1),
        identity(1, "maekawa complete:4 k=2", 1),
        |e| matches!(e, HandshakeError::SpecMismatch { .. }),
        |e| matches!(e, HandshakeError::SpecMismatch { .. }),
    )
    .await;
    // the error names both hashes
    let ours = lkcs::net::spec_hash(SPEC)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect::<String>();
    assert!(logs.any(|_, e| e.to_string().contains(&ours)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_different_epoch_is_refused_on_both_sides() {
    refused_on_both_sides(
        identity(0, SPEC, 1),
        identity(1, SPEC, 2),
        |e| {
            matches!(
                e,
                HandshakeError::EpochMismatch {
                    ours: 1,
                    theirs: 2,
                    ..
                }
            )
        },
        |e| {
            matches!(
                e,
                HandshakeError::EpochMismatch {
                    ours: 2,
                    theirs: 1,
                    ..
                }
            )
        },
    )
    .await;
}

/// P0 is no neighbour of P1 (P1 lists only P2): P1 refuses it, and P0 learns why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_neighbour_is_refused_on_both_sides() {
    let logs = Logs::default();
    let (l0, l1) = (bind().await, bind().await);
    let a1 = l1.local_addr().unwrap();
    let unused: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let _n1: Net<u64> =
        Net::start(config(identity(1, SPEC, 1), &[(2, unused)], &logs), l1).unwrap();
    let _n0: Net<u64> = Net::start(config(identity(0, SPEC, 1), &[(1, a1)], &logs), l0).unwrap();
    logs.wait_for("P1 refuses P0", |p, e| {
        p == ProcessId(1)
            && matches!(e, LogEvent::Refused { error: HandshakeError::NotAPeer { from }, .. } if *from == ProcessId(0))
    })
    .await;
    logs.wait_for("P0 is told", |p, e| {
        p == ProcessId(0)
            && matches!(
                e,
                LogEvent::Refused {
                    error: HandshakeError::Refused(Refusal::NotAPeer),
                    ..
                }
            )
    })
    .await;
}

/// Garbage on the port (an oversized length prefix, random bytes, a hello-shaped frame
/// cut short, a silent connection) is refused and logged, and the node keeps serving: P0 then
/// connects and its message arrives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_is_dropped_and_the_node_keeps_serving() {
    let logs = Logs::default();
    let l1 = bind().await;
    let a1 = l1.local_addr().unwrap();
    let unused: SocketAddr = "127.0.0.1:9".parse().unwrap();
    let mut n1: Net<u64> =
        Net::start(config(identity(1, SPEC, 1), &[(0, unused)], &logs), l1).unwrap();
    let mut rng = ChaCha8Rng::seed_from_u64(3);
    let mut junk: Vec<Vec<u8>> = vec![
        vec![0xff, 0xff, 0xff, 0xff, 1, 2, 3], // 4 GiB announced
        vec![0, 0, 0, 5, 0xde, 0xad, 0xbe, 0xef, 0x99], // 5 bytes of nonsense
        vec![0, 0, 0, 3, 0, 1],                // a hello cut short, then the connection closes
    ];
    for _ in 0..20 {
        let len = rng.random_range(1..200);
        junk.push((0..len).map(|_| rng.random()).collect());
    }
    let mut silent = Vec::new();
    for bytes in &junk {
        let mut s = TcpStream::connect(a1).await.unwrap();
        let _ = s.write_all(bytes).await;
        silent.push(s); // kept open: some wait for the handshake timeout
    }
    logs.wait_for("a handshake message refused", |p, e| {
        p == ProcessId(1)
            && matches!(
                e,
                LogEvent::Refused {
                    error: HandshakeError::Crypto(_),
                    ..
                }
            )
    })
    .await;
    // now a real member
    let l0 = bind().await;
    let n0: Net<u64> = Net::start(config(identity(0, SPEC, 1), &[(1, a1)], &logs), l0).unwrap();
    n0.send(ProcessId(1), 42).unwrap();
    let got = tokio::time::timeout(GUARD, async {
        loop {
            if let Some(NetEvent::Message { from, msg }) = n1.recv().await {
                return (from, msg);
            }
        }
    })
    .await
    .expect("hang guard");
    assert_eq!(got, (ProcessId(0), 42));
    drop(silent);
    assert!(
        logs.count(|p, e| p == ProcessId(1) && matches!(e, LogEvent::Refused { .. })) >= 3,
        "every junk connection is refused"
    );
}

/// What a cluster run found.
#[derive(Debug)]
struct Outcome {
    /// Completed moves, over all members.
    moves: usize,
    /// Bound violations the monitor saw.
    violations: Vec<String>,
    /// The most members in the CS at once.
    max_in_cs: usize,
    /// Connections the proxies cut.
    resets: usize,
    /// Frames on live links that failed to open (`LogEvent::Tampered`).
    tampered: usize,
    /// Handshakes refused because a message did not verify.
    forged_handshakes: usize,
    /// Times the men in the middle acted.
    hits: usize,
    /// Connections shed before any cryptography (not a peer's host).
    shed: usize,
    /// Each node's metrics at the end of the run.
    metrics: Vec<lkcs::net::NodeMetrics>,
}

/// Runs the built system as one node per member on 127.0.0.1, each member cycling `pairs`
/// pairs of moves; the dialling side of every link goes through a proxy cutting it every
/// `cut` bytes when given. A monitor under one lock, fed by every node's observer (inside the
/// handler that changed the state, before its sends leave), checks every bound.
struct Cluster {
    pairs: usize,
    cut: Option<Range<usize>>,
}

/// [`Cluster`] with a man-in-the-middle on every link, tampering for `attack` and then
/// stopping, so the links must resume.
struct Attacked {
    pairs: usize,
    tamper: Tamper,
    attack: Duration,
}

impl SystemVisitor for Attacked {
    type Output = Outcome;
    fn visit<A: CsObject>(
        self,
        instance: &Instance,
        initial: &[CsState],
        procs: Vec<A>,
    ) -> Outcome {
        let rt = two_workers();
        let cluster = Cluster {
            pairs: self.pairs,
            cut: None,
        };
        rt.block_on(run_cluster_with(
            cluster,
            Some((self.tamper, self.attack)),
            instance.clone(),
            initial.to_vec(),
            procs,
        ))
    }
}

impl SystemVisitor for Cluster {
    type Output = Outcome;
    fn visit<A: CsObject>(
        self,
        instance: &Instance,
        initial: &[CsState],
        procs: Vec<A>,
    ) -> Outcome {
        let rt = two_workers();
        rt.block_on(run_cluster(self, instance.clone(), initial.to_vec(), procs))
    }
}

/// The runtime every in-process cluster of these tests runs on: two workers, as on CI.
fn two_workers() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

struct Monitor {
    observed: Observed,
    violations: Vec<String>,
    max_in_cs: usize,
}

async fn run_cluster<A: CsObject>(
    cluster: Cluster,
    inst: Instance,
    initial: Vec<CsState>,
    procs: Vec<A>,
) -> Outcome {
    run_cluster_with(cluster, None, inst, initial, procs).await
}

async fn run_cluster_with<A: CsObject>(
    cluster: Cluster,
    attack: Option<(Tamper, Duration)>,
    inst: Instance,
    initial: Vec<CsState>,
    procs: Vec<A>,
) -> Outcome {
    let n = procs.len();
    let logs = Logs::default();
    let mut listeners = Vec::new();
    for _ in 0..n {
        listeners.push(bind().await);
    }
    let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let mut proxies = Vec::new();
    let mut mitms: Vec<Mitm> = Vec::new();
    let mut dial = BTreeMap::new(); // (i, j), i < j: where i dials j
    for (i, j) in inst.topology().edges() {
        let (i, j) = (i.min(j), i.max(j));
        let addr = match &cluster.cut {
            _ if matches!(attack, Some((Tamper::Flood | Tamper::Slowloris, _))) => {
                let p = Proxy::start(addrs[j.index()], Some(2000..20000), u64::from(j.0)).await;
                let a = p.addr;
                proxies.push(p);
                a
            }
            _ if attack.is_some() => {
                let (tamper, _) = attack.unwrap();
                let m = Mitm::start(addrs[j.index()], tamper, u64::from(j.0)).await;
                let a = m.addr;
                mitms.push(m);
                a
            }
            Some(cut) => {
                let p = Proxy::start(addrs[j.index()], Some(cut.clone()), u64::from(j.0)).await;
                let a = p.addr;
                proxies.push(p);
                a
            }
            None => addrs[j.index()],
        };
        dial.insert((i, j), addr);
    }
    let monitor = Arc::new(Mutex::new(Monitor {
        observed: Observed::new(&inst, initial.clone()),
        violations: Vec::new(),
        max_in_cs: initial.iter().filter(|s| **s == CsState::InCs).count(),
    }));
    let observer: Observer = {
        let (monitor, inst) = (monitor.clone(), inst.clone());
        Arc::new(move |p, state, _token| {
            let mut m = monitor.lock().unwrap();
            for (q, c) in m.observed.apply(&inst, p, state) {
                let b = inst.bounds(q);
                m.violations.push(format!(
                    "{q}: {c} in the CS around it, outside [{}, {}] after {p} went {state:?}",
                    b.l, b.k
                ));
            }
            let in_cs = m
                .observed
                .states()
                .iter()
                .filter(|s| **s == CsState::InCs)
                .count();
            m.max_in_cs = m.max_in_cs.max(in_cs);
        })
    };
    let mut handles: Vec<NodeHandle> = Vec::new();
    for (obj, listener) in procs.into_iter().zip(listeners) {
        let me = obj.id();
        let peers = inst
            .topology()
            .neighbors(me)
            .iter()
            .map(|&j| {
                let addr = if me < j {
                    dial[&(me, j)]
                } else {
                    addrs[j.index()]
                };
                (j, addr.into())
            })
            .collect();
        let cfg = NetConfig {
            identity: Identity::new(me, key(me.0), lkcs::net::spec_hash(SPEC), 1),
            peers,
            keys: trust(),
            timing: fast_timing(),
            log: logs.logger(),
            on_restart: lkcs::net::OnRestart::Refuse,
        };
        let net = Net::start(cfg, listener).unwrap();
        handles.push(Node::spawn(obj, net, Some(observer.clone()), logs.logger()).unwrap());
    }
    // Each member makes its 2·pairs moves, then keeps moving until every member made its
    // own: a member that stopped could hold the others back for good (the last one in the CS
    // under a lower bound cannot leave while everyone else is out and idle). Moves made after
    // a member's own count are not counted.
    let moves = Arc::new(AtomicUsize::new(0));
    let finished = Arc::new(AtomicUsize::new(0));
    let (all_done_tx, all_done) = tokio::sync::watch::channel(false);
    let all_done_tx = Arc::new(all_done_tx);
    let mut workers = Vec::new();
    for h in handles.clone() {
        let (moves, finished, pairs) = (moves.clone(), finished.clone(), cluster.pairs);
        let (all_done_tx, mut all_done) = (all_done_tx.clone(), all_done.clone());
        workers.push(tokio::spawn(async move {
            let mut mine = 0;
            loop {
                let call = async {
                    match Sequence::leaving(h.state()) {
                        Sequence::Entry => h.enter().await,
                        Sequence::Exit => h.exit().await,
                    }
                };
                let r = tokio::select! {
                    r = call => r,
                    _ = all_done.wait_for(|d| *d) => return,
                };
                r.unwrap_or_else(|e| panic!("{}: {e}", h.id()));
                mine += 1;
                if mine <= 2 * pairs {
                    moves.fetch_add(1, Ordering::SeqCst);
                }
                if mine == 2 * pairs && finished.fetch_add(1, Ordering::SeqCst) + 1 == n {
                    all_done_tx.send_replace(true);
                    return;
                }
                tokio::task::yield_now().await;
            }
        }));
    }
    let all = async {
        for w in workers {
            w.await.unwrap();
        }
    };
    let flooding = Arc::new(AtomicBool::new(true));
    let flooders: Vec<_> = match attack {
        Some((Tamper::Flood, _)) => addrs
            .iter()
            .map(|&target| tokio::spawn(flood(target, flood_size(500), None, flooding.clone())))
            .collect(),
        Some((Tamper::Slowloris, _)) => addrs
            .iter()
            .map(|&target| {
                let trickle = Some(Duration::from_millis(100));
                tokio::spawn(flood(target, flood_size(100), trickle, flooding.clone()))
            })
            .collect(),
        _ => Vec::new(),
    };
    // the attack stops after its time: the links must resume and the run complete
    let stopper = attack.map(|(_, d)| {
        let mitms: Vec<Arc<AtomicBool>> = mitms.iter().map(|m| m.active.clone()).collect();
        tokio::spawn(async move {
            tokio::time::sleep(d).await;
            for m in mitms {
                m.store(false, Ordering::SeqCst);
            }
        })
    });
    tokio::time::timeout(GUARD, all).await.expect("hang guard");
    if let Some(s) = stopper {
        s.abort();
    }
    flooding.store(false, Ordering::SeqCst);
    for f in flooders {
        f.abort();
    }
    for m in &mitms {
        m.stop();
    }
    let metrics = handles.iter().map(NodeHandle::metrics).collect();
    for h in &handles {
        h.shutdown();
    }
    let m = monitor.lock().unwrap();
    assert!(
        !logs.any(|_, e| matches!(e, LogEvent::Dropped { reason, .. } if reason.contains("a send the object made"))),
        "an object sent outside its neighbourhood"
    );
    Outcome {
        moves: moves.load(Ordering::SeqCst),
        violations: m.violations.clone(),
        max_in_cs: m.max_in_cs,
        metrics,
        resets: proxies.iter().map(Proxy::resets).sum(),
        tampered: logs.count(|_, e| matches!(e, LogEvent::Tampered { .. })),
        forged_handshakes: logs.count(|_, e| {
            matches!(
                e,
                LogEvent::Refused {
                    error: HandshakeError::Crypto(_),
                    ..
                }
            )
        }),
        hits: mitms.iter().map(Mitm::hits).sum(),
        shed: logs.count(|_, e| {
            matches!(
                e,
                LogEvent::Refused {
                    error: HandshakeError::Shed(_),
                    ..
                }
            )
        }),
    }
}

/// `wanted` connections per member, or fewer where the open-file limit is low: the flooder
/// and the four nodes (which hold what they shed) share this process's descriptors.
fn flood_size(wanted: usize) -> usize {
    let soft = std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|text| {
            let line = text.lines().find(|l| l.starts_with("Max open files"))?;
            line.split_whitespace().nth(3)?.parse::<usize>().ok()
        })
        .unwrap_or(1024);
    wanted.min(soft / 16)
}

/// Holds up to `count` connections from 127.0.0.2 to `target`, reopening them as they are
/// closed, while `on` holds; with `trickle`, each sends one byte that often (slowloris).
async fn flood(target: SocketAddr, count: usize, trickle: Option<Duration>, on: Arc<AtomicBool>) {
    let mut held: Vec<TcpStream> = Vec::new();
    let mut trickled = std::time::Instant::now();
    while on.load(Ordering::SeqCst) {
        let send = trickle.is_some_and(|t| trickled.elapsed() >= t);
        if send {
            trickled = std::time::Instant::now();
        }
        // keep what is still open (a read would block); the node closed the rest
        held.retain(|s| {
            let mut b = [0u8; 1];
            let open = matches!(s.try_read(&mut b), Err(ref e) if e.kind() == std::io::ErrorKind::WouldBlock);
            open && (!send || s.try_write(&[0x00]).is_ok())
        });
        while held.len() < count {
            // out of sockets (a low open-file limit): hold what is held
            let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
                break;
            };
            if socket.bind("127.0.0.2:0".parse().unwrap()).is_err() {
                break;
            }
            match tokio::time::timeout(Duration::from_millis(200), socket.connect(target)).await {
                Ok(Ok(s)) => held.push(s),
                _ => break,
            }
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Maekawa on 4 nodes under a man-in-the-middle on every link for the first second: no
/// bound breaks, every move completes after the attack stops, and the logs name it.
fn attacked(tamper: Tamper) -> Outcome {
    let s = spec(
        Algorithm::Maekawa,
        Topology::complete(4).unwrap(),
        None,
        Some(1),
    );
    let out = s
        .build(Attacked {
            pairs: 150,
            tamper,
            attack: Duration::from_secs(1),
        })
        .unwrap();
    assert_eq!(out.violations, Vec::<String>::new(), "{tamper:?}");
    assert_eq!(out.moves, 4 * 300, "{tamper:?}: every move completes");
    assert_eq!(out.max_in_cs, 1, "{tamper:?}");
    assert!(out.hits > 0, "{tamper:?}: the attacker never acted");
    out
}

/// 500 connections held from 127.0.0.2 to every member, and every link reset every 2..20 kB
/// meanwhile: the flood is shed before any cryptography, the run completes, no bound
/// breaks. (How fast, against no flood: examples/flood_bench.rs, docs/measurements/net.md.)
#[test]
fn a_flood_from_another_address_is_shed_and_the_cluster_completes() {
    flooded(Tamper::Flood);
}

/// 100 slowloris connections from 127.0.0.2 to every member (a byte every 100 ms each), and
/// every link reset every 2..20 kB meanwhile: shed before any cryptography like the idle
/// flood, the run completes, no bound breaks.
#[test]
fn a_slowloris_from_another_address_is_shed_and_the_cluster_completes() {
    flooded(Tamper::Slowloris);
}

/// Maekawa on 4 nodes, 150 pairs each, flooded for the whole run with every link reset
/// every 2..20 kB: no bound breaks, every move completes, the flood was shed.
fn flooded(flood: Tamper) {
    let s = spec(
        Algorithm::Maekawa,
        Topology::complete(4).unwrap(),
        None,
        Some(1),
    );
    let out = s
        .build(Attacked {
            pairs: 150,
            tamper: flood,
            attack: Duration::from_secs(60),
        })
        .unwrap();
    assert_eq!(out.violations, Vec::<String>::new(), "{flood:?}");
    assert_eq!(out.moves, 4 * 300, "{flood:?}: every move completes");
    assert!(out.resets > 0, "{flood:?}: no link was reset: {out:?}");
    assert!(out.shed > 0, "{flood:?}: nothing was shed: {out:?}");
}

#[test]
fn a_flipped_byte_is_named_and_the_links_resume() {
    let out = attacked(Tamper::Flip);
    assert!(out.tampered > 0, "{out:?}");
}

#[test]
fn injected_bytes_are_named_and_the_links_resume() {
    let out = attacked(Tamper::Inject);
    assert!(out.tampered > 0, "{out:?}");
}

#[test]
fn a_replayed_session_is_refused_and_the_links_resume() {
    let out = attacked(Tamper::Replay);
    assert!(out.forged_handshakes > 0, "{out:?}");
}

#[test]
fn spliced_sessions_are_named_and_the_links_resume() {
    let out = attacked(Tamper::Splice);
    assert!(out.tampered + out.forged_handshakes > 0, "{out:?}");
}

fn spec(
    algorithm: Algorithm,
    topology: Topology,
    l: Option<usize>,
    k: Option<usize>,
) -> SystemSpec {
    SystemSpec {
        l,
        k,
        ..SystemSpec::new(algorithm, topology)
    }
}

/// Maekawa on complete:4 (majority quorums), 4 nodes each cycling 25 pairs: never two in the
/// CS at once.
#[test]
fn maekawa_nodes_keep_mutual_exclusion() {
    let s = spec(
        Algorithm::Maekawa,
        Topology::complete(4).unwrap(),
        None,
        Some(1),
    );
    let out = s
        .build(Cluster {
            pairs: 25,
            cut: None,
        })
        .unwrap();
    assert_eq!(out.violations, Vec::<String>::new());
    assert_eq!(out.moves, 4 * 50);
    assert_eq!(out.max_in_cs, 1, "someone entered, and never two at once");
}

/// The same through proxies resetting every link every 200..2000 bytes: the algorithm only
/// sees reliable FIFO links, and the bound holds.
#[test]
fn maekawa_nodes_keep_mutual_exclusion_through_resets() {
    let s = spec(
        Algorithm::Maekawa,
        Topology::complete(4).unwrap(),
        None,
        Some(1),
    );
    let out = s
        .build(Cluster {
            pairs: 25,
            cut: Some(200..2000),
        })
        .unwrap();
    assert_eq!(out.violations, Vec::<String>::new());
    assert_eq!(out.moves, 4 * 50);
    assert_eq!(out.max_in_cs, 1);
    assert!(out.resets >= 3, "only {} resets", out.resets);
    // the nodes' metrics saw the same run: every pair, every call answered, the resets
    // (a member keeps cycling until every member made its 25 pairs)
    for m in &out.metrics {
        let ok = |kind| m.calls.get(&(kind, CallOutcome::Ok)).copied().unwrap_or(0);
        assert!(
            ok("enter") >= 25 && ok("exit") >= 25,
            "P{}: {:?}",
            m.member,
            m.calls
        );
        assert!(m.pairs >= 25, "P{}: {} pairs", m.member, m.pairs);
        assert_eq!(m.enter_wait.count, ok("enter"), "P{}", m.member);
        assert_eq!(m.exit_wait.count, ok("exit"), "P{}", m.member);
    }
    let resets: u64 = out
        .metrics
        .iter()
        .flat_map(|m| m.peers.values())
        .map(|p| p.resets)
        .sum();
    assert!(
        resets >= 3,
        "the links counted {resets} resets, the proxies cut {}",
        out.resets
    );
}

/// A local algorithm with a lower bound: 1-LMUTIN on ring:5 (everyone starts in the CS, and
/// no closed neighbourhood may empty), with resets.
#[test]
fn lmutin_nodes_keep_the_lower_bound_through_resets() {
    let s = spec(Algorithm::Lmutin, Topology::ring(5).unwrap(), Some(1), None);
    let out = s
        .build(Cluster {
            pairs: 20,
            cut: Some(200..2000),
        })
        .unwrap();
    assert_eq!(out.violations, Vec::<String>::new());
    assert_eq!(out.moves, 5 * 40);
}

/// (1,2)-GCS on complete:4 (two objects inside, MUTIN over Maekawa): both bounds hold.
#[test]
fn gcs_nodes_keep_both_bounds() {
    let s = spec(
        Algorithm::Gcs,
        Topology::complete(4).unwrap(),
        Some(1),
        Some(2),
    );
    let out = s
        .build(Cluster {
            pairs: 15,
            cut: None,
        })
        .unwrap();
    assert_eq!(out.violations, Vec::<String>::new());
    assert_eq!(out.moves, 4 * 30);
    assert!(out.max_in_cs <= 2);
}

/// LMUTEX with k = 1 on complete:3: entering needs both neighbours' permissions. The link
/// P0–P2 runs through a proxy. Cut it: P0's entry returns `PeerUnreachable(P2)`; heal it: the
/// move resumes with nothing lost and the next call returns it. Then P0 crashes and restarts
/// with its initial state: its peers refuse it (logged on both sides), and P1's calls that
/// need P0 return `PeerUnreachable(P0)`.
#[test]
fn unreachable_peers_fail_calls_and_restarted_members_are_refused() {
    struct Partition;
    impl SystemVisitor for Partition {
        type Output = ();
        fn visit<A: CsObject>(self, _: &Instance, _: &[CsState], procs: Vec<A>) {
            let rt = two_workers();
            rt.block_on(async { tokio::time::timeout(GUARD, partition(procs)).await })
                .expect("hang guard");
        }
    }
    let s = spec(
        Algorithm::Lmutex,
        Topology::complete(3).unwrap(),
        None,
        Some(1),
    );
    s.build(Partition).unwrap();
}

async fn partition<A: CsObject>(procs: Vec<A>) {
    let logs = Logs::default();
    let timing = Timing {
        peer_timeout: Duration::from_millis(400),
        heartbeat: Duration::from_millis(50),
        ..fast_timing()
    };
    let mut listeners = Vec::new();
    for _ in 0..3 {
        listeners.push(bind().await);
    }
    let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    let proxy = Proxy::start(addrs[2], None, 0).await;
    let peers_of = |me: usize| -> BTreeMap<ProcessId, MemberAddress> {
        (0..3)
            .filter(|&j| j != me)
            .map(|j| {
                let a = if me == 0 && j == 2 {
                    proxy.addr
                } else {
                    addrs[j]
                };
                (ProcessId(j as u32), a.into())
            })
            .collect()
    };
    let spec = lkcs::net::spec_hash("lmutex complete:3 k=1");
    let fresh_p0 = procs[0].clone();
    let mut handles = Vec::new();
    for (i, (obj, listener)) in procs.into_iter().zip(listeners).enumerate() {
        let cfg = NetConfig {
            identity: Identity::new(ProcessId(i as u32), key(i as u32), spec, 1),
            peers: peers_of(i),
            keys: trust(),
            timing,
            log: logs.logger(),
            on_restart: lkcs::net::OnRestart::Refuse,
        };
        let net = Net::start(cfg, listener).unwrap();
        handles.push(Node::spawn(obj, net, None, logs.logger()).unwrap());
    }
    let (h0, h1) = (handles[0].clone(), handles[1].clone());
    if h0.state() == CsState::InCs {
        h0.exit().await.unwrap();
    }
    if h1.state() == CsState::InCs {
        h1.exit().await.unwrap();
    }
    // P0 can enter and leave while all is well
    h0.enter().await.unwrap();
    h0.exit().await.unwrap();

    proxy.pause(true);
    assert_eq!(
        h0.enter().await,
        Err(NodeError::PeerUnreachable(ProcessId(2)))
    );
    assert_eq!(h0.state(), CsState::OutCs);
    let ups = |logs: &Logs| {
        logs.count(|p, e| {
            p == ProcessId(0)
                && matches!(e, LogEvent::Connected { peer, .. } if *peer == ProcessId(2))
        })
    };
    let before = ups(&logs);
    proxy.pause(false);
    let up_again = async {
        while ups(&logs) == before {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::time::timeout(GUARD, up_again)
        .await
        .expect("P0–P2 never came up again");
    // the move kept running: the next entry returns when it completes (a call made before
    // the node saw P2 back fails fast again)
    let mut again = h0.enter().await;
    while again == Err(NodeError::PeerUnreachable(ProcessId(2))) {
        tokio::time::sleep(Duration::from_millis(10)).await;
        again = h0.enter().await;
    }
    assert_eq!(again, Ok(()));
    assert_eq!(h0.state(), CsState::InCs);
    assert!(logs.any(|p, e| p == ProcessId(0) && *e == LogEvent::Unreachable(ProcessId(2))));
    h0.exit().await.unwrap();
    // a call against the convention is a typed error too
    assert_eq!(
        h0.exit().await,
        Err(NodeError::Call(lkcs::CallError::NotInCs))
    );

    // P0 crashes; a new process starts as P0 with its initial state and a new incarnation
    h0.shutdown();
    let l0 = bind().await;
    let cfg = NetConfig {
        identity: Identity::new(ProcessId(0), key(0), spec, 1),
        peers: peers_of(0),
        keys: trust(),
        timing,
        log: logs.logger(),
        on_restart: lkcs::net::OnRestart::Refuse,
    };
    let new_p0 = Node::spawn(fresh_p0, Net::start(cfg, l0).unwrap(), None, logs.logger()).unwrap();
    logs.wait_for("P1 refuses the restarted P0", |p, e| {
        p == ProcessId(1) && *e == LogEvent::PeerRestarted(ProcessId(0))
    })
    .await;
    logs.wait_for("the restarted P0 is told", |p, e| {
        p == ProcessId(0)
            && matches!(
                e,
                LogEvent::Refused {
                    error: HandshakeError::Refused(Refusal::Restarted),
                    ..
                }
            )
    })
    .await;
    // P1 needs P0's permission to enter: a typed error, not a hang
    assert_eq!(
        h1.enter().await,
        Err(NodeError::PeerUnreachable(ProcessId(0)))
    );
    new_p0.shutdown();
    for h in &handles {
        h.shutdown();
    }
}

/// A cluster file's text with `quota` and members on `ports`, their private keys written
/// (mode 600) to a scratch folder and named by absolute path.
fn cluster_file(quota: &str, ports: &[u16], timing: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "lkcs-net-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let members: String = ports
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let sk = SecretKey::generate();
            let path = dir.join(format!("{i}.key"));
            lkcs::net::write_key(&path, i, &sk).unwrap();
            format!(
                "[members.{i}]\naddress = \"127.0.0.1:{p}\"\npublic_key = \"{}\"\nprivate_key = {:?}\n",
                sk.public(),
                path.display().to_string()
            )
        })
        .collect();
    format!(
        "[quota]\n{quota}\n{members}[timing]\nheartbeat_ms = 50\npeer_timeout_ms = 500\n{timing}"
    )
}

/// Members `0..n` of a cluster with this `[quota]` on free ports, started in this process,
/// without views.
fn start_members(quota: &str, n: usize) -> Vec<lkcs::Member> {
    start_members_logged(quota, n, NO_VIEWS).0
}

/// The `[timing]` of a cluster without views: a member that stops stays in the cluster.
const NO_VIEWS: &str = "evict_after_ms = 0\n";

/// [`start_members`] with more `[timing]` lines, and the members' logs.
fn start_members_logged(quota: &str, n: usize, timing: &str) -> (Vec<lkcs::Member>, Logs) {
    let text = cluster_file(quota, &free_ports(n), timing);
    let cluster = lkcs::net::Cluster::parse(&text).unwrap();
    let logs = Logs::default();
    let members = (0..n)
        .map(|i| cluster.member_with(i, None, logs.logger()).unwrap())
        .collect();
    (members, logs)
}

/// Members of a cluster file started in this process behave as the members of a `Quota`:
/// a blocking exit that would leave nobody active times out and keeps running, another
/// member's entry lets it complete, async calls work, a blocking call works inside an async
/// runtime, and a full quota blocks an entry.
#[test]
fn cluster_members_keep_the_bounds_with_the_quota_calls() {
    let mut m = start_members(
        "algorithm = \"gcs\"\ntopology = \"complete:3\"\nl = 1\nk = 2\ninitial = \"in:0\"",
        3,
    );
    assert!(m[0].is_active() && !m[1].is_active() && !m[2].is_active());
    let e = m[0].exit_timeout(Duration::from_millis(300)).unwrap_err();
    assert!(e.is_timeout(), "{e}");
    assert_eq!(m[0].state(), lkcs::MemberState::Exiting);
    m[1].enter().unwrap();
    m[0].exit().unwrap();
    assert!(!m[0].is_active());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        m[2].enter_async().await.unwrap();
        // two active: a third entry waits
        let full = tokio::time::timeout(Duration::from_millis(300), m[0].enter_async()).await;
        assert!(full.is_err(), "a third member entered");
        m[1].exit_async().await.unwrap();
        // a blocking call from inside an async runtime
        m[0].enter().unwrap();
    });
    assert!(m[0].is_active() && !m[1].is_active() && m[2].is_active());
    m[0].exit().unwrap();
    assert!(
        m[0].enter().is_ok() && m[0].enter().is_ok(),
        "enter is idempotent"
    );
}

/// A member whose call waits on a member that stopped gets `PeerUnreachable` naming it
/// within the peer timeout: CDC's controller (member 0) stops, member 1's entry names it.
#[test]
fn cluster_members_name_an_unreachable_member() {
    // without views: with them, dropping a member is a graceful leave
    let (mut m, _) = start_members_logged(
        "algorithm = \"cdc\"\ntopology = \"complete:3\"",
        3,
        NO_VIEWS,
    );
    for _ in 0..3 {
        for mm in m.iter_mut() {
            mm.enter().unwrap();
            mm.exit().unwrap();
        }
    }
    // P0 is the initial controller, and without --maxreq it never migrates
    let controller = 0;
    drop(m.remove(controller));
    let mut errors = Vec::new();
    for mm in m.iter_mut() {
        match mm.enter_timeout(Duration::from_secs(30)) {
            Ok(()) => {
                let _ = mm.exit_timeout(Duration::from_secs(30));
            }
            Err(e) => errors.push(e),
        }
    }
    assert!(
        errors
            .iter()
            .any(|e| e.unreachable_peer() == Some(controller)),
        "no call named member {controller}: {errors:?}"
    );
    assert!(errors.iter().all(|e| !e.is_timeout()), "{errors:?}");
}

/// Without views, dropping a `Member` drains before its node stops: the releases of its
/// last exit, held in its link while the link was down, reach the peer once the link comes
/// back during the drop. Maekawa on two members: P0's exit sends its `Release` to P1 while
/// the proxy in front of P1 refuses every connection; P0 is dropped, and only then the
/// proxy lets connections through again. A drop that stopped the node at once would lose
/// the release with the process (its link resends only while it lives).
#[test]
fn a_dropped_member_without_views_delivers_what_it_sent_before_its_node_stops() {
    let rt = two_workers();
    let p1_listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    p1_listener.set_nonblocking(true).unwrap();
    let p1_addr = p1_listener.local_addr().unwrap();
    let proxy = rt.block_on(Proxy::start(p1_addr, None, 0));
    // P1's peers reach it through the proxy; it listens behind it
    let p0_port = free_ports(1)[0];
    // a peer timeout far beyond the redials' backoff: a peer marked unreachable counts as
    // settled, and a slow test thread would then end the drain without the release
    let text = cluster_file(
        "algorithm = \"maekawa\"\ntopology = \"complete:2\"",
        &[p0_port, proxy.addr.port()],
        NO_VIEWS,
    )
    .replace("peer_timeout_ms = 500", "peer_timeout_ms = 10000");
    assert!(text.contains("peer_timeout_ms = 10000"));
    let cluster = lkcs::net::Cluster::parse(&text).unwrap();
    let logs = Logs::default();
    let h1 = rt
        .block_on(async {
            let l = TcpListener::from_std(p1_listener).unwrap();
            cluster.spawn(ProcessId(1), l, None, logs.logger())
        })
        .unwrap();
    let mut m0 = cluster.member_with(0, None, logs.logger()).unwrap();
    m0.enter().unwrap();
    let from_p0 = || {
        h1.status()
            .links
            .get(&ProcessId(0))
            .map_or(0, |t| t.received.count)
    };
    let before = from_p0();
    assert!(before >= 1, "P1 never heard P0's request");
    let p0_down = |p: ProcessId, e: &LogEvent| {
        p == ProcessId(0) && matches!(e, LogEvent::Disconnected { .. })
    };
    let down_count = || {
        let logged = logs.0.lock().unwrap();
        logged.iter().filter(|(p, e)| p0_down(*p, e)).count()
    };
    let downs = down_count();
    // the link from P0 to P1 is cut, and stays down: P0's exit completes on its own (its
    // release waits in its link)
    proxy.pause(true);
    let guard = Instant::now() + GUARD;
    while down_count() == downs {
        assert!(Instant::now() < guard, "P0 never saw its link cut");
        std::thread::sleep(Duration::from_millis(10));
    }
    m0.exit().unwrap();
    let dropped = std::thread::spawn(move || drop(m0));
    proxy.pause(false);
    dropped.join().unwrap();
    let after = from_p0();
    assert_eq!(
        after,
        before + 1,
        "P1 received {} messages from P0 after its exit, not its one release: the drop \
         stopped the node before its link resent it",
        after - before
    );
    h1.shutdown();
}

/// A call that does not wait on a stopped member is not failed by it: in CDC, member 3
/// stops, and once the others know it is unreachable, members 1 and 2 still enter and exit
/// through the controller (member 0), every call `Ok`. The controller's own entry while
/// member 1 holds the CS waits on member 1 (it records whom it granted): it runs out its
/// own timeout, unfailed by member 3, and completes once member 1 exits. The same holds
/// for MUTIN and (l,k)-GCS, whose calls name the quorum members they wait on
/// (`CsObject::awaiting`).
#[test]
fn a_call_that_does_not_need_a_stopped_member_is_not_failed_by_it() {
    let (mut m, logs) = start_members_logged(
        "algorithm = \"cdc\"\ntopology = \"complete:4\"",
        4,
        NO_VIEWS,
    );
    let stopped = 3;
    drop(m.remove(stopped));
    let known = |who: u32| {
        logs.any(|p, e| {
            p == ProcessId(who) && *e == LogEvent::Unreachable(ProcessId(stopped as u32))
        })
    };
    let mut waited = Duration::ZERO;
    while !(known(1) && known(2)) {
        assert!(
            waited < GUARD,
            "members 1 and 2 never saw member 3 unreachable"
        );
        std::thread::sleep(Duration::from_millis(20));
        waited += Duration::from_millis(20);
    }
    for round in 0..20 {
        for mm in m.iter_mut() {
            let id = mm.id();
            mm.enter_timeout(GUARD)
                .unwrap_or_else(|e| panic!("member {id}, round {round}: enter: {e}"));
            mm.exit_timeout(GUARD)
                .unwrap_or_else(|e| panic!("member {id}, round {round}: exit: {e}"));
        }
    }
    m[1].enter_timeout(GUARD).expect("member 1's entry");
    let waited = m[0]
        .enter_timeout(Duration::from_millis(300))
        .expect_err("member 1 holds the CS");
    assert!(
        waited.is_timeout(),
        "the controller's entry waits on member 1, not on member 3: {waited}"
    );
    m[1].exit_timeout(GUARD).expect("member 1's exit");
    m[0].enter_timeout(GUARD)
        .expect("the controller's entry, carried on once member 1 exited");
    assert!(m[0].is_active());
}

/// Both sides of a link queue a backlog of several socket buffers before either reads: a
/// link keeps reading while it has something to send, so every message arrives (a link that
/// wrote its whole backlog before reading would block with its peer, both in a full socket
/// buffer).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sides_sending_large_backlogs_both_get_everything() {
    let logs = Logs::default();
    let (l0, l1) = (bind().await, bind().await);
    let (a0, a1) = (l0.local_addr().unwrap(), l1.local_addr().unwrap());
    let id = |i| identity(i, SPEC, 1);
    let mut n0: Net<Vec<u8>> = Net::start(config(id(0), &[(1, a1)], &logs), l0).unwrap();
    let mut n1: Net<Vec<u8>> = Net::start(config(id(1), &[(0, a0)], &logs), l1).unwrap();
    // 2,000 messages of 2,000 bytes each way: about 4 MB, beyond the loopback buffers
    let (count, size) = (2_000, 2_000);
    for i in 0..count {
        n0.send(ProcessId(1), vec![(i % 251) as u8; size]).unwrap();
        n1.send(ProcessId(0), vec![(i % 251) as u8; size]).unwrap();
    }
    let run = async {
        let (mut got0, mut got1) = (0, 0);
        while got0 < count || got1 < count {
            let (got, event) = tokio::select! {
                Some(e) = n0.recv() => (&mut got0, e),
                Some(e) = n1.recv() => (&mut got1, e),
            };
            let NetEvent::Message { msg, .. } = event else {
                continue;
            };
            assert_eq!(msg, vec![(*got % 251) as u8; size], "in order, intact");
            *got += 1;
        }
    };
    tokio::time::timeout(GUARD, run)
        .await
        .expect("every message of both backlogs arrives");
}

/// An object whose entry asks its one peer and waits for an answer that never comes, and whose
/// exit panics (a bug in a handler).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Faulty {
    me: ProcessId,
    peer: ProcessId,
    in_cs: bool,
    pending: Option<Sequence>,
}

#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
struct Ask;

impl lkcs::cs::Message for Ask {
    fn kind(&self) -> std::borrow::Cow<'static, str> {
        "Ask".into()
    }
}

impl CsObject for Faulty {
    type Msg = Ask;
    fn id(&self) -> ProcessId {
        self.me
    }
    fn state(&self) -> CsState {
        match self.in_cs {
            true => CsState::InCs,
            false => CsState::OutCs,
        }
    }
    fn pending(&self) -> Option<Sequence> {
        self.pending
    }
    fn begin_entry(&mut self, out: &mut lkcs::cs::Outbox<Ask>) -> Result<(), lkcs::CallError> {
        self.pending = Some(Sequence::Entry);
        out.send(self.peer, Ask);
        Ok(())
    }
    fn begin_exit(&mut self, _: &mut lkcs::cs::Outbox<Ask>) -> Result<(), lkcs::CallError> {
        panic!("a bug in the exit handler")
    }
    fn on_message(&mut self, _: ProcessId, _: Ask, _: &mut lkcs::cs::Outbox<Ask>) {}
}

/// Two nodes running [`Faulty`]: P1 starts in the CS.
async fn faulty_pair(logs: &Logs, timing: Timing) -> (NodeHandle, NodeHandle) {
    let spec = lkcs::net::spec_hash("faulty complete:2");
    let start = |me: u32, listener, peer_addr: SocketAddr| {
        let cfg = NetConfig {
            identity: Identity::new(ProcessId(me), key(me), spec, 1),
            peers: BTreeMap::from([(ProcessId(1 - me), peer_addr.into())]),
            keys: trust(),
            timing,
            log: logs.logger(),
            on_restart: lkcs::net::OnRestart::Refuse,
        };
        let obj = Faulty {
            me: ProcessId(me),
            peer: ProcessId(1 - me),
            in_cs: me == 1,
            pending: None,
        };
        Node::spawn(obj, Net::start(cfg, listener).unwrap(), None, logs.logger()).unwrap()
    };
    let (l0, l1) = (bind().await, bind().await);
    let (a0, a1) = (l0.local_addr().unwrap(), l1.local_addr().unwrap());
    (start(0, l0, a1), start(1, l1, a0))
}

/// A node that stops answers the call waiting on it, every later call and a wait on its
/// status with `Stopped`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_node_answers_every_call() {
    let logs = Logs::default();
    let (h0, h1) = faulty_pair(&logs, fast_timing()).await;
    // P0's entry waits for an answer; stopping the node answers it
    let waiting = tokio::spawn({
        let h0 = h0.clone();
        async move { h0.enter().await }
    });
    let status_wait = tokio::spawn({
        let h0 = h0.clone();
        async move { h0.wait_status(|s| s.quiet).await.map(|_| ()) }
    });
    while h0.pending() != Some(Sequence::Entry) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    h0.shutdown();
    let answer = tokio::time::timeout(GUARD, waiting)
        .await
        .expect("hang guard");
    assert_eq!(answer.unwrap(), Err(NodeError::Stopped));
    let status = tokio::time::timeout(GUARD, status_wait)
        .await
        .expect("hang guard");
    assert_eq!(status.unwrap(), Err(NodeError::Stopped));
    assert_eq!(h0.enter().await, Err(NodeError::Stopped));
    assert_eq!(h0.finish(), Err(NodeError::Stopped));
    h1.shutdown();
}

/// A handler that panics stops its node instead of unwinding into the caller: the call and
/// every later one get `Stopped`, the log says why, and the node's links go with it, so its
/// peer finds it unreachable.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_panics_stops_its_node() {
    let logs = Logs::default();
    let timing = Timing {
        peer_timeout: Duration::from_millis(300),
        ..fast_timing()
    };
    let (h0, h1) = faulty_pair(&logs, timing).await;
    let connected = h0.wait_status(|s| s.connected.contains(&ProcessId(1)));
    tokio::time::timeout(GUARD, connected)
        .await
        .expect("hang guard")
        .unwrap();
    assert_eq!(h1.state(), CsState::InCs);
    assert_eq!(h1.exit().await, Err(NodeError::Stopped));
    assert!(logs.any(|p, e| p == ProcessId(1)
        && matches!(e, LogEvent::NodeStopped(why) if why.contains("a bug in the exit handler"))));
    assert_eq!(h1.enter().await, Err(NodeError::Stopped));
    assert_eq!(h1.finish(), Err(NodeError::Stopped));
    let gone = h0.wait_status(|s| s.unreachable.contains(&ProcessId(1)));
    tokio::time::timeout(GUARD, gone)
        .await
        .expect("P0 never found the stopped P1 unreachable")
        .unwrap();
    h0.shutdown();
}

/// With views, dropping a `Member` is a graceful leave: the member in the CS exits first,
/// then a view without it installs (P0 logs that it left, the others install view 1 with
/// P1 and P2 only), and the two others go on entering and exiting Maekawa's mutual exclusion
/// with every call `Ok`: none waits on the member that left, and none is failed by it.
#[test]
fn dropping_a_member_with_views_leaves_the_cluster_gracefully() {
    let timing = "lease_heartbeat_ms = 100\nlease_ms = 1500\nevict_after_ms = 2500\n";
    let (mut m, logs) = start_members_logged(
        "algorithm = \"maekawa\"\ntopology = \"complete:3\"",
        3,
        timing,
    );
    m[0].enter().unwrap();
    drop(m.remove(0));
    assert!(
        logs.any(
            |p, e| p == ProcessId(0) && matches!(e, LogEvent::View(s) if s == "left the cluster")
        ),
        "P0 did not leave"
    );
    for _ in 0..5 {
        for mm in m.iter_mut() {
            mm.enter_timeout(GUARD).unwrap();
            mm.exit_timeout(GUARD).unwrap();
        }
    }
    let started = Instant::now();
    for p in [1, 2] {
        while !logs.any(|q, e| {
            q == ProcessId(p)
                && matches!(e, LogEvent::View(s) if s.starts_with("view 1 installed: members P1,P2"))
        }) {
            assert!(
                started.elapsed() < GUARD,
                "P{p} never installed the view without P0"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// `[storage]`: each member's view log folder is `dir`/member-I/epoch-E, relative to the
/// cluster file's folder (a new epoch, a new folder); the setting is in the canonical text
/// (every member must keep its log on disk), so a file with it and one without do not
/// hash alike; an empty folder name, or storage without views, is refused naming why.
#[test]
fn the_storage_table_places_each_members_view_log_by_epoch() {
    use lkcs::net::view::Storage;
    let quota = "algorithm = \"maekawa\"\ntopology = \"complete:3\"";
    let ports = free_ports(3);
    let base = std::path::Path::new("/srv/lkcs");
    let plain = cluster_file(quota, &ports, "");
    let memory = lkcs::net::Cluster::parse_in(&plain, base).expect("a cluster without [storage]");
    assert_eq!(memory.storage_dir(ProcessId(1)), None);
    assert_eq!(
        memory.view_options(ProcessId(1)).expect("views").storage,
        Storage::Memory
    );
    let text = format!("epoch = 7\n{plain}[storage]\ndir = \"state\"\n");
    let disk = lkcs::net::Cluster::parse_in(&text, base).expect("a cluster with [storage]");
    let want = base.join("state").join("member-1").join("epoch-7");
    assert_eq!(disk.storage_dir(ProcessId(1)), Some(want.clone()));
    assert_eq!(
        disk.view_options(ProcessId(1)).expect("views").storage,
        Storage::Dir(want)
    );
    assert!(
        disk.canonical().ends_with("storage=disk"),
        "{}",
        disk.canonical()
    );
    assert_ne!(disk.spec_hash(), memory.spec_hash());
    let empty = format!("{plain}[storage]\ndir = \" \"\n");
    let e = lkcs::net::Cluster::parse_in(&empty, base).expect_err("an empty folder name");
    assert!(e.to_string().contains("[storage]: dir is empty"), "{e}");
    let no_views = format!(
        "{}[storage]\ndir = \"state\"\n",
        cluster_file(quota, &ports, NO_VIEWS)
    );
    let e = lkcs::net::Cluster::parse_in(&no_views, base).expect_err("storage without views");
    assert!(e.to_string().contains("runs no views"), "{e}");
}
