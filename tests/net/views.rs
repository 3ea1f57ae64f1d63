//! The view log run by nodes over their real links (127.0.0.1 sockets, the Noise channel):
//! the members agree on view 0 and a leader, the object's messages flow beside the log's,
//! and when a member's node dies (here: in the CS, holding its permissions, or out of it)
//! the others evict it after `evict_after` of its links being down, freeze, report, install
//! view 1 without it, and complete their pairs there, under a monitor that every node's
//! observer reports to synchronously (a dead member holds no slot). The dead member is a
//! node shut down in the test's process: its sockets close as a killed process's do. A
//! member cut off by proxies while it holds the slot, and alive, must fence when its lease
//! runs out, before the others reclaim the slot.

use crate::ports;

use lkcs::net::view::{View, ViewConfig};
use lkcs::net::{
    rebuild_from, EntryGate, ExitGate, Identity, LogEvent, Logger, MemberAddress, Net, NetConfig,
    NetError, Node, NodeError, NodeHandle, Observer, SecretKey, Timing, Trust, ViewOptions,
    ViewStatus,
};
use lkcs::{
    cs::{CsObject, CsState},
    Algorithm, FencingToken, Instance, ProcessId, SystemSpec, SystemVisitor, Topology,
};
use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::net::{TcpListener, TcpStream};

/// A whole test's hang guard.
const GUARD: Duration = Duration::from_secs(120);
/// How long one awaited condition may take: far beyond an election, a peer timeout, the
/// eviction delay and a few round trips.
const WAIT: Duration = Duration::from_secs(40);

fn key(id: u32) -> SecretKey {
    let mut bytes = [0x3c; 32];
    bytes[8..12].copy_from_slice(&id.to_le_bytes());
    SecretKey::from_bytes(bytes)
}

fn trust(n: u32) -> Trust {
    (0..n).map(|i| (ProcessId(i), key(i).public())).collect()
}

fn timing() -> Timing {
    Timing {
        heartbeat: Duration::from_millis(50),
        peer_timeout: Duration::from_millis(400),
        backoff_min: Duration::from_millis(5),
        backoff_max: Duration::from_millis(80),
        ..Timing::default()
    }
}

/// The log events of every member, kept for the assertions.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<(ProcessId, String)>>>);

impl Logs {
    /// Whether some member logged an event that `f` accepts.
    fn any(&self, f: impl Fn(ProcessId, &str) -> bool) -> bool {
        self.0.lock().unwrap().iter().any(|(p, e)| f(*p, e))
    }

    fn logger(&self) -> Logger {
        let logs = self.0.clone();
        Arc::new(move |me, e: &LogEvent| {
            eprintln!("lkcs-net {me}: {e}");
            logs.lock().unwrap().push((me, e.to_string()));
        })
    }
}

fn spec(algorithm: Algorithm, topology: Topology, k: Option<usize>) -> SystemSpec {
    SystemSpec {
        k,
        ..SystemSpec::new(algorithm, topology)
    }
}

async fn bind() -> TcpListener {
    let l = ports::listener();
    l.set_nonblocking(true).unwrap();
    TcpListener::from_std(l).unwrap()
}

/// A TCP proxy to `target`; once `cut` is set it closes what it carries and drops every new
/// connection (a member behind such proxies is cut off from the others, both ways).
async fn proxy(target: SocketAddr, cut: Arc<AtomicBool>) -> SocketAddr {
    let listener = bind().await;
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut inbound, _)) = listener.accept().await {
            if cut.load(Ordering::SeqCst) {
                continue;
            }
            let cut = cut.clone();
            tokio::spawn(async move {
                let Ok(mut outbound) = TcpStream::connect(target).await else {
                    return;
                };
                let until_cut = async {
                    while !cut.load(Ordering::SeqCst) {
                        tokio::time::sleep(Duration::from_millis(5)).await;
                    }
                };
                tokio::select! {
                    _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                    _ = until_cut => {}
                }
            });
        }
    });
    addr
}

/// The members' addresses and their nets, each linked to every other member (the view log
/// talks to all of them; the object only to its neighbours). With `cut`, every link of P2
/// goes through a proxy that the flag cuts.
async fn nets<M>(n: u32, spec_text: &str, logs: &Logs, cut: Option<Arc<AtomicBool>>) -> Vec<Net<M>>
where
    M: Clone + serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static,
{
    let mut listeners = Vec::new();
    for _ in 0..n {
        listeners.push(bind().await);
    }
    let addrs: Vec<SocketAddr> = listeners.iter().map(|l| l.local_addr().unwrap()).collect();
    // the address member `me` reaches `p` at
    let mut via: BTreeMap<(u32, u32), SocketAddr> = BTreeMap::new();
    for me in 0..n {
        for p in (0..n).filter(|&p| p != me) {
            let direct = addrs[p as usize];
            let a = match &cut {
                Some(cut) if me == 2 || p == 2 => proxy(direct, cut.clone()).await,
                _ => direct,
            };
            via.insert((me, p), a);
        }
    }
    listeners
        .into_iter()
        .enumerate()
        .map(|(i, l)| {
            let me = ProcessId(i as u32);
            let peers: BTreeMap<ProcessId, MemberAddress> = (0..n)
                .map(ProcessId)
                .filter(|&p| p != me)
                .map(|p| (p, via[&(me.0, p.0)].into()))
                .collect();
            let identity = Identity::new(me, key(me.0), lkcs::net::spec_hash(spec_text), 1);
            let cfg = NetConfig {
                timing: timing(),
                on_restart: lkcs::net::OnRestart::Accept,
                ..NetConfig::new(identity, peers, trust(n))
            };
            let cfg = NetConfig {
                log: logs.logger(),
                ..cfg
            };
            Net::start(cfg, l).unwrap()
        })
        .collect()
}

/// View 0 of `states`' members (incarnation 0 each), started from their states.
fn view0(states: &[CsState]) -> View {
    let members = (0..states.len())
        .map(|i| (ProcessId(i as u32), 0))
        .collect();
    let start = states
        .iter()
        .enumerate()
        .map(|(i, s)| (ProcessId(i as u32), *s))
        .collect();
    View::initial(members, start).unwrap()
}

fn options(initial: View, neighbours: BTreeSet<ProcessId>) -> ViewOptions {
    ViewOptions {
        initial,
        config: ViewConfig::default(),
        // generous against a loaded machine: a healthy member that misses its majority's
        // answers for a whole lease fences (and the test fails)
        evict_after: Duration::from_millis(1500),
        neighbours,
        heartbeat: Duration::from_millis(50),
        lease: Duration::from_millis(1000),
        on_lease: None,
        unchecked_margin: false,
        storage: lkcs::net::view::Storage::Memory,
    }
}

/// The bound monitor: every node's observer reports each change of its state here, inside
/// the handler that made it, before the handler's messages leave. A member marked dead
/// holds no slot, and its own bound is gone. Every live member's bounds are checked after
/// every report: the upper bound, and the lower bound clamped to the live members.
#[derive(Clone)]
struct Monitor {
    instance: Instance,
    seen: Arc<Mutex<Seen>>,
}

struct Seen {
    states: Vec<CsState>,
    dead: BTreeSet<ProcessId>,
    violations: Vec<String>,
    /// Each member's last entry's fencing token, and the last of any member's.
    tokens: Vec<Option<FencingToken>>,
    last_token: Option<FencingToken>,
}

impl Monitor {
    fn new(instance: &Instance, initial: &[CsState]) -> Monitor {
        Monitor {
            instance: instance.clone(),
            seen: Arc::new(Mutex::new(Seen {
                states: initial.to_vec(),
                dead: BTreeSet::new(),
                violations: Vec::new(),
                tokens: vec![None; initial.len()],
                last_token: None,
            })),
        }
    }

    fn observer(&self) -> Observer {
        let m = self.clone();
        // mutual exclusion over the whole cluster: every entry's token above the last one's
        let mutex = (0..self.instance.len()).map(ProcessId::from).all(|q| {
            self.instance.bounds(q).k == 1
                && self.instance.topology().closed(q).len() == self.instance.len()
        });
        Arc::new(move |p, s, token| {
            let mut g = m.seen.lock().unwrap();
            g.states[p.index()] = s;
            if s == CsState::InCs {
                match token {
                    None => g.violations.push(format!("{p} entered with no token")),
                    Some(t) => {
                        let own = g.tokens[p.index()].filter(|last| t <= *last);
                        let any = g.last_token.filter(|last| mutex && t <= *last);
                        if let Some(last) = own.or(any) {
                            g.violations
                                .push(format!("{p} entered with {t}, not above {last}"));
                        }
                        g.tokens[p.index()] = Some(t);
                        g.last_token = Some(t);
                    }
                }
            }
            let (states, dead) = (g.states.clone(), g.dead.clone());
            // a dead member's own bound goes with it (the view's topology is the cluster's
            // restricted to its members); the live members' bounds hold over what is left
            for q in (0..states.len())
                .map(ProcessId::from)
                .filter(|q| !dead.contains(q))
            {
                let closed = m.instance.topology().closed(q);
                let held = closed
                    .iter()
                    .filter(|r| !dead.contains(r) && states[r.index()] == CsState::InCs)
                    .count();
                if held > m.instance.bounds(q).k {
                    g.violations.push(format!(
                        "{held} of {q}'s neighbourhood in the CS after {p} moved"
                    ));
                }
                // the lower bound a view asks for: the cluster's, clamped to the members
                // left; a dead member counts as out (the tests with a lower bound kill a
                // member in the CS only where the others still meet it)
                let live = closed.iter().filter(|r| !dead.contains(r)).count();
                let l = m.instance.bounds(q).l.min(live);
                if held < l {
                    g.violations.push(format!(
                        "{held} of {q}'s neighbourhood in the CS after {p} moved, below {l}"
                    ));
                }
            }
        })
    }

    fn dead(&self, p: ProcessId) {
        self.seen.lock().unwrap().dead.insert(p);
    }

    fn violations(&self) -> Vec<String> {
        self.seen.lock().unwrap().violations.clone()
    }
}

/// Completes `pairs` entry/exit pairs (leaving the CS first if it starts there), calling
/// again after `PeerUnreachable` (the move keeps running; the view change resolves it).
async fn pairs(h: NodeHandle, pairs: usize) -> Result<(), NodeError> {
    reach(&h, CsState::OutCs).await?;
    for _ in 0..pairs {
        reach(&h, CsState::InCs).await?;
        reach(&h, CsState::OutCs).await?;
    }
    Ok(())
}

/// Waits until every handle's view satisfies `f`; returns the views.
async fn views_where(
    handles: &[&NodeHandle],
    what: &str,
    f: impl Fn(&ViewStatus) -> bool,
) -> Vec<ViewStatus> {
    let mut out = Vec::new();
    for h in handles {
        let waited =
            tokio::time::timeout(WAIT, h.wait_status(|s| s.view.as_ref().is_some_and(&f))).await;
        match waited {
            Ok(Ok(s)) => out.push(s.view.expect("checked")),
            Ok(Err(e)) => panic!("{}: the node stopped waiting for {what}: {e}", h.id()),
            Err(_) => panic!(
                "{}: never saw {what}; its view: {:?}",
                h.id(),
                h.status().view
            ),
        }
    }
    out
}

/// Starts each of `procs` as a node with the view log over its net of `nets` (the object
/// talks to its neighbours in `instance`'s graph), reporting to `monitor`, rebuilt from
/// `spec` at each view; waits until every node has view 0 and a leader. The handles, and
/// the view each node agreed.
async fn start_views<A: CsObject>(
    spec: &SystemSpec,
    instance: &Instance,
    initial: &[CsState],
    procs: Vec<A>,
    nets: Vec<Net<lkcs::net::Wire<A::Msg>>>,
    monitor: &Monitor,
    logs: &Logs,
) -> (Vec<NodeHandle>, Vec<ViewStatus>) {
    let view0 = view0(initial);
    let mut handles = Vec::new();
    for (obj, net) in procs.into_iter().zip(nets) {
        let me = obj.id();
        let neighbours = instance.topology().neighbors(me).iter().copied().collect();
        let rebuild = rebuild_from::<A>(spec.clone(), instance.clone(), me);
        let h = Node::spawn_with_views(
            obj,
            net,
            options(view0.clone(), neighbours),
            rebuild,
            Some(monitor.observer()),
            logs.logger(),
        )
        .unwrap();
        handles.push(h);
    }
    let all: Vec<&NodeHandle> = handles.iter().collect();
    let agreed = views_where(&all, "view 0 with a leader", |v| {
        v.number == 0 && v.leader.is_some()
    })
    .await;
    (handles, agreed)
}

fn ids(range: impl IntoIterator<Item = u32>) -> BTreeSet<ProcessId> {
    range.into_iter().map(ProcessId).collect()
}

/// What happens to P2.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Fault {
    /// Its node dies out of the CS.
    Dies,
    /// Its node dies in the CS.
    DiesInCs,
    /// It is cut off from every other member while in the CS, and lives on.
    CutOffInCs,
}

/// `spec`'s members run as view nodes; P2 meets `fault`, and the four others must install
/// view 1 without it and complete their pairs there.
struct CrashRun {
    spec: SystemSpec,
    fault: Fault,
}

/// The runtime the crash runs use: two worker threads, time and I/O.
fn two_threads() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

impl SystemVisitor for CrashRun {
    type Output = ();
    fn visit<A: CsObject>(self, instance: &Instance, initial: &[CsState], procs: Vec<A>) {
        let rt = two_threads();
        let (instance, initial) = (instance.clone(), initial.to_vec());
        rt.block_on(async move {
            tokio::time::timeout(GUARD, self.crash(instance, initial, procs)).await
        })
        .expect("hang guard");
    }
}

impl CrashRun {
    async fn crash<A: CsObject>(self, instance: Instance, initial: Vec<CsState>, procs: Vec<A>) {
        let logs = Logs::default();
        let monitor = Monitor::new(&instance, &initial);
        let n = procs.len() as u32;
        let cut = Arc::new(AtomicBool::new(false));
        let proxied = (self.fault == Fault::CutOffInCs).then(|| cut.clone());
        let nets = nets::<lkcs::net::Wire<A::Msg>>(n, "views crash", &logs, proxied).await;
        let (handles, agreed) = start_views(
            &self.spec, &instance, &initial, procs, nets, &monitor, &logs,
        )
        .await;
        assert!(
            agreed
                .iter()
                .all(|v| v.members == ids(0..n) && v.pending.is_none()),
            "view 0 is every member, nothing pending: {agreed:?}"
        );
        // the object's messages flow beside the log's: each member completes pairs
        let before = handles.iter().cloned().map(|h| tokio::spawn(pairs(h, 3)));
        for p in futures::future::join_all(before).await {
            p.expect("task")
                .expect("every member completes its pairs in view 0");
        }
        let dead = ProcessId(2);
        if self.fault != Fault::Dies {
            handles[2].reach(CsState::InCs).await.expect("P2 enters");
        }
        if self.fault == Fault::CutOffInCs {
            // P2 lives on, cut off: it must fence (give its slot up) before the others
            // reclaim it; the monitor sees its fence as its leaving the CS
            cut.store(true, Ordering::SeqCst);
        } else {
            // P2's node dies (its task and sockets close), holding its slot if in the CS
            monitor.dead(dead);
            handles[2].shutdown();
        }
        let survivors: Vec<NodeHandle> =
            handles.iter().filter(|h| h.id() != dead).cloned().collect();
        let after = survivors.iter().cloned().map(|h| tokio::spawn(pairs(h, 5)));
        for p in futures::future::join_all(after).await {
            p.expect("task")
                .expect("every survivor completes its pairs after the crash");
        }
        let refs: Vec<&NodeHandle> = survivors.iter().collect();
        let views = views_where(&refs, "view 1", |v| v.number >= 1).await;
        for v in &views {
            assert_eq!(v.number, 1, "one view change: {v:?}");
            assert_eq!(
                v.members,
                ids([0, 1, 3, 4]),
                "view 1 is the survivors: {v:?}"
            );
            assert!(
                v.pending.is_none(),
                "nothing pending after the install: {v:?}"
            );
        }
        assert_eq!(
            monitor.violations(),
            Vec::<String>::new(),
            "no bound broken"
        );
        if self.fault == Fault::CutOffInCs {
            // P2 fenced and, still cut off, cannot rejoin: its node runs on, and its calls
            // say it was evicted
            let h2 = &handles[2];
            let fenced = tokio::time::timeout(WAIT, h2.wait_status(|s| s.fenced.is_some())).await;
            assert!(
                matches!(&fenced, Ok(Ok(s)) if s.fenced.as_ref().is_some_and(|f| f.view == 0)),
                "P2 fenced in view 0: {fenced:?}"
            );
            assert_eq!(
                h2.enter().await,
                Err(NodeError::Evicted { view: 0 }),
                "a fenced member's later calls say it was evicted"
            );
            let log = logs.0.lock().unwrap();
            assert!(
                log.iter()
                    .any(|(p, e)| *p == dead && e.contains("fenced: the lease ran out")),
                "P2 logged its fence"
            );
        }
        let log = logs.0.lock().unwrap();
        assert!(
            log.iter()
                .any(|(p, e)| *p != dead && e.contains("proposed to evict P2")),
            "a survivor logged its proposal"
        );
    }
}

/// LMUTEX (k = 1) on ring:5: the object talks to its two neighbours, the view log to all.
/// P2 dies out of the CS; view 1 is the path P3-P4-P0-P1, renumbered, where the survivors
/// complete their pairs.
#[test]
fn a_dead_member_is_evicted_and_a_local_quota_serves_on_in_the_next_view() {
    let spec = spec(Algorithm::Lmutex, Topology::ring(5).unwrap(), Some(1));
    spec.clone()
        .build(CrashRun {
            spec,
            fault: Fault::Dies,
        })
        .unwrap();
}

/// Maekawa on complete:5: P2 dies in the CS, holding the locks of its quorum; the others
/// cannot enter until view 1 (a fresh Maekawa of four) reclaims its slot.
#[test]
fn a_member_dead_in_the_cs_is_evicted_and_mutual_exclusion_serves_on_in_the_next_view() {
    let spec = spec(Algorithm::Maekawa, Topology::complete(5).unwrap(), Some(1));
    spec.clone()
        .build(CrashRun {
            spec,
            fault: Fault::DiesInCs,
        })
        .unwrap();
}

/// Maekawa on complete:5: P2 is cut off from every other member while in the CS, and lives
/// on. Its lease runs out and it fences (its slot given up, its calls `Evicted`) before the
/// four others, which evict it, reclaim the slot in view 1; the monitor checks that order.
#[test]
fn a_member_cut_off_in_the_cs_fences_before_the_others_reclaim_its_slot() {
    let spec = spec(Algorithm::Maekawa, Topology::complete(5).unwrap(), Some(1));
    spec.clone()
        .build(CrashRun {
            spec,
            fault: Fault::CutOffInCs,
        })
        .unwrap();
}

/// LKCS's round trip on ring:6 with (l, k) = (1, 3), every member starting in the CS: P4
/// exits the CS, and P2 dies in it. In view 1 (the
/// path P3-P4-P5-P0-P1) P1's and P3's neighbourhoods have two members, where the round trip
/// has no room between its operating bounds (`l + 1 < k`: here k = |N_i| + 1 is not
/// tightened). The view lowers those two lower
/// bounds (a deficit view) instead of being refused, which fenced every member: P0, P1, P3
/// and P4, whose exits could drop a lowered bound, have their exits gated; their entries go
/// on (P4 enters again), P0's and P1's exits wait (both leaving would break P1's bound), and
/// P5, which no lowered bound counts, keeps making pairs. The monitor checks the bounds the
/// view asks for, lower bounds included.
#[test]
fn a_view_where_the_round_trip_has_no_room_gates_the_exits_near_it_and_no_one_fences() {
    no_room_spec().build(NoRoomRun).unwrap();
}

fn no_room_spec() -> SystemSpec {
    SystemSpec {
        l: Some(1),
        k: Some(3),
        initial: Some(vec![CsState::InCs; 6]),
        ..SystemSpec::new(Algorithm::Lkcs, Topology::ring(6).unwrap())
    }
}

struct NoRoomRun;

impl SystemVisitor for NoRoomRun {
    type Output = ();
    fn visit<A: CsObject>(self, instance: &Instance, initial: &[CsState], procs: Vec<A>) {
        let rt = two_threads();
        let (instance, initial) = (instance.clone(), initial.to_vec());
        rt.block_on(async move {
            tokio::time::timeout(GUARD, no_room(no_room_spec(), instance, initial, procs)).await
        })
        .expect("hang guard");
    }
}

/// `h` reaches `s`, calling again after `PeerUnreachable` (a call that waits on a peer's
/// permission fails while that peer is unreachable, until the view change removes it).
async fn reach(h: &NodeHandle, s: CsState) -> Result<(), NodeError> {
    loop {
        match h.reach(s).await {
            Err(NodeError::PeerUnreachable(_)) => {
                tokio::time::sleep(Duration::from_millis(20)).await
            }
            other => return other,
        }
    }
}

/// Starts `procs` as view nodes (their nets named `name`), moves member `first.0` to state
/// `first.1` in view 0, then kills member `dead`'s node (its slot goes with it, and the
/// monitor counts it out), and waits until every survivor has a view of all the others. The
/// handles, the logs and the monitor.
async fn move_then_kill<A: CsObject>(
    spec: &SystemSpec,
    instance: &Instance,
    initial: &[CsState],
    procs: Vec<A>,
    name: &str,
    first: (usize, CsState),
    dead: u32,
) -> (Vec<NodeHandle>, Logs, Monitor) {
    let logs = Logs::default();
    let monitor = Monitor::new(instance, initial);
    let n = procs.len() as u32;
    let nets = nets::<lkcs::net::Wire<A::Msg>>(n, name, &logs, None).await;
    let (handles, _) = start_views(spec, instance, initial, procs, nets, &monitor, &logs).await;
    reach(&handles[first.0], first.1)
        .await
        .unwrap_or_else(|e| panic!("P{} reaches {:?} in view 0: {e}", first.0, first.1));
    let dead = ProcessId(dead);
    monitor.dead(dead);
    handles[dead.index()].shutdown();
    let survivors: Vec<&NodeHandle> = handles.iter().filter(|h| h.id() != dead).collect();
    let views = views_where(&survivors, &format!("a view without {dead}"), |v| {
        v.pending.is_none() && !v.members.contains(&dead)
    })
    .await;
    let others: BTreeSet<ProcessId> = (0..n).map(ProcessId).filter(|p| *p != dead).collect();
    assert!(
        views.iter().all(|v| v.members == others),
        "the survivors' view: {views:?}"
    );
    (handles, logs, monitor)
}

async fn no_room<A: CsObject>(
    spec: SystemSpec,
    instance: Instance,
    initial: Vec<CsState>,
    procs: Vec<A>,
) {
    // every member starts in the CS; P4 exits (no bound is at its limit around it), and P2
    // dies in the CS: its slot goes with it, and the view counts it out
    let (handles, logs, monitor) = move_then_kill(
        &spec,
        &instance,
        &initial,
        procs,
        "views no room",
        (4, CsState::OutCs),
        2,
    )
    .await;
    let dead = ProcessId(2);
    let survivors: Vec<&NodeHandle> = handles.iter().filter(|h| h.id() != dead).collect();
    // entries go on in the deficit view
    reach(&handles[4], CsState::InCs)
        .await
        .expect("P4, gated, enters in the deficit view");
    // P0's and P1's exits wait at the gate: the view lowered P1's bound to 0, where both
    // leaving would break the bound of 1 the view asks for (the monitor checks it)
    let exits: Vec<_> = [0, 1]
        .map(|i| {
            let h = handles[i].clone();
            tokio::spawn(async move { reach(&h, CsState::OutCs).await })
        })
        .into_iter()
        .collect();
    // P5, counted by no lowered bound, makes its pairs meanwhile
    pairs(handles[5].clone(), 5)
        .await
        .expect("P5 completes its pairs in the deficit view");
    for (i, exit) in exits.iter().enumerate() {
        assert!(
            !exit.is_finished(),
            "P{i}'s exit waits at the gate of the deficit view: {:?}",
            handles[i].status().view
        );
    }
    for h in &survivors {
        let status = h.status();
        assert_eq!(
            status.fenced,
            None,
            "{} did not fence: the view was built",
            h.id()
        );
        let gate = match h.id().0 {
            5 => ExitGate::Open,
            _ => ExitGate::UntilRejoin,
        };
        assert_eq!(status.exit_gate, gate, "{}'s exit gate", h.id());
    }
    assert_eq!(
        monitor.violations(),
        Vec::<String>::new(),
        "no bound broken"
    );
    let log = logs.0.lock().unwrap();
    let installed = |p: u32, deficit: bool| {
        log.iter().any(|(q, e)| {
            *q == ProcessId(p)
                && e.contains("the object restarts")
                && !e.contains("view log: view 0:")
                && e.contains("in a deficit view (exits wait)") == deficit
        })
    };
    for p in [0, 1, 3, 4] {
        assert!(installed(p, true), "P{p} logged its gated exits");
    }
    assert!(
        installed(5, false) && !installed(5, true),
        "P5's exits are never gated"
    );
    assert!(
        log.iter()
            .any(|(q, e)| *q == ProcessId(1) && e.contains("until a member the view lost is back")),
        "P1 logged that only a rejoin lifts its gate"
    );
    // a view of the same members would lower the same bound again: no restore is asked
    // (the status above says so; the log says it of a proposal once the log answered it)
    let restores: Vec<&String> = log
        .iter()
        .filter(|(_, e)| e.contains("restore"))
        .map(|(_, e)| e)
        .collect();
    assert!(restores.is_empty(), "no restore proposed: {restores:?}");
    for exit in exits {
        exit.abort();
    }
}

/// LKCS's round trip on torus:3x3 with (l, k) = (0, 4): P0's closed neighbourhood is P0, P1,
/// P2, P3, P6, and LKCS runs it with the tightened bound 3. P0, P1 and P3 start in the CS; P6
/// enters through P0's reserve (4 in P0's neighbourhood, at the bound asked), and P8, outside
/// that neighbourhood, dies. View 1's start meets P0's bound where LKCS tightens it: it is
/// built with that bound raised by one (a surplus view) instead of being refused, which
/// fenced every member. The entries of P0's neighbourhood wait (P2's), while P7, which the
/// raised bound does not count, makes pairs and every exit goes on. Once P1 exits, P1 asks
/// for a view of the same members, which builds the bound as asked, and P2's waiting entry
/// completes. The monitor checks the bounds the view asks for after every move.
#[test]
fn a_view_started_at_an_upper_bound_lkcs_tightens_gates_the_entries_near_it() {
    surplus_spec().build(SurplusRun).unwrap();
}

fn surplus_spec() -> SystemSpec {
    let mut initial = vec![CsState::OutCs; 9];
    for p in [0, 1, 3] {
        initial[p] = CsState::InCs;
    }
    SystemSpec {
        l: Some(0),
        k: Some(4),
        initial: Some(initial),
        ..SystemSpec::new(Algorithm::Lkcs, Topology::torus(3, 3).unwrap())
    }
}

struct SurplusRun;

impl SystemVisitor for SurplusRun {
    type Output = ();
    fn visit<A: CsObject>(self, instance: &Instance, initial: &[CsState], procs: Vec<A>) {
        let rt = two_threads();
        let (instance, initial) = (instance.clone(), initial.to_vec());
        rt.block_on(async move {
            tokio::time::timeout(GUARD, surplus(surplus_spec(), instance, initial, procs)).await
        })
        .expect("hang guard");
    }
}

async fn surplus<A: CsObject>(
    spec: SystemSpec,
    instance: Instance,
    initial: Vec<CsState>,
    procs: Vec<A>,
) {
    // P6 enters through P0's reserve in view 0, and P8 dies
    let (handles, logs, monitor) = move_then_kill(
        &spec,
        &instance,
        &initial,
        procs,
        "views surplus",
        (6, CsState::InCs),
        8,
    )
    .await;
    let dead = ProcessId(8);
    let survivors: Vec<&NodeHandle> = handles.iter().filter(|h| h.id() != dead).collect();
    let neighbourhood = [0u32, 1, 2, 3, 6];
    // the view's status is published before the object's install sets the gates: wait for
    // each survivor's install of view 1
    for h in &survivors {
        let p = h.id();
        let deadline = tokio::time::Instant::now() + WAIT;
        while !logs.any(|q, e| q == p && e.contains("view 1: the object restarts")) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{p} never installed view 1"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let status = h.status();
        assert_eq!(status.fenced, None, "{p} did not fence: the view was built");
        let gate = match neighbourhood.contains(&p.0) {
            true => EntryGate::UntilRestored,
            false => EntryGate::Open,
        };
        assert_eq!(status.entry_gate, gate, "{p}'s entry gate");
        assert_eq!(status.exit_gate, ExitGate::Open, "{p}'s exit gate");
    }
    // P2's entry waits at the gate; P7, which the raised bound does not count, makes pairs
    let entry = {
        let h = handles[2].clone();
        tokio::spawn(async move { reach(&h, CsState::InCs).await })
    };
    pairs(handles[7].clone(), 5)
        .await
        .expect("P7 completes its pairs in the surplus view");
    assert!(
        !entry.is_finished(),
        "P2's entry waits at the gate of the surplus view: {:?}",
        handles[2].status().view
    );
    // no one of P0's neighbourhood has exited: no restore was proposed, the view is still 1
    let before = handles[2].status().view.map(|v| v.number);
    assert_eq!(before, Some(1), "no view change before an exit near P0");
    // an exit is never gated; after it, P1 proposes a view from the states then, which
    // restores the bound
    reach(&handles[1], CsState::OutCs)
        .await
        .expect("P1 exits in the surplus view");
    tokio::time::timeout(WAIT, entry)
        .await
        .expect("P2's entry completes once a view restores P0's bound")
        .expect("task")
        .expect("P2 enters");
    let restored = handles[2].status();
    assert_eq!(restored.entry_gate, EntryGate::Open, "P2's gate is lifted");
    assert!(
        restored.view.as_ref().is_some_and(|v| v.number >= 2),
        "a restore view lifted the gate: {:?}",
        restored.view
    );
    assert_eq!(
        monitor.violations(),
        Vec::<String>::new(),
        "no bound broken"
    );
    // P1 logs its proposal once the log answered it, which may come after P2's entry
    let deadline = tokio::time::Instant::now() + WAIT;
    while !logs.any(|q, e| q == ProcessId(1) && e.contains("proposed to restore")) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "P1 never logged its restore proposal"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let log = logs.0.lock().unwrap();
    let surplus_logged = |p: u32| {
        log.iter().any(|(q, e)| {
            *q == ProcessId(p)
                && e.contains("the object restarts")
                && e.contains("in a surplus view (entries wait)")
        })
    };
    for p in neighbourhood {
        assert!(surplus_logged(p), "P{p} logged its gated entries");
    }
    assert!(!surplus_logged(7), "P7's entries are never gated");
    let proposers: BTreeSet<ProcessId> = log
        .iter()
        .filter(|(_, e)| e.contains("proposed to restore"))
        .map(|(q, _)| *q)
        .collect();
    assert_eq!(
        proposers,
        ids([1]),
        "P1, whose exit brought the count down, proposed the restore, and no one else"
    );
}

/// A node that runs the view log must reach every member of the initial view: a net
/// without a link to one is refused, naming the member.
#[test]
fn a_view_node_without_a_link_to_a_member_is_refused() {
    struct Run(SystemSpec);
    impl SystemVisitor for Run {
        type Output = ();
        fn visit<A: CsObject>(self, instance: &Instance, initial: &[CsState], procs: Vec<A>) {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let obj = procs.into_iter().next().unwrap();
                let listener = bind().await;
                let other = bind().await.local_addr().unwrap();
                // links to P1 only, of three members
                let peers = [(ProcessId(1), other.into())].into_iter().collect();
                let identity = Identity::new(ProcessId(0), key(0), lkcs::net::spec_hash("x"), 1);
                let net = Net::start(NetConfig::new(identity, peers, trust(3)), listener).unwrap();
                let refused = Node::spawn_with_views(
                    obj,
                    net,
                    options(view0(initial), ids([1])),
                    rebuild_from::<A>(self.0.clone(), instance.clone(), ProcessId(0)),
                    None,
                    Logs::default().logger(),
                );
                match refused {
                    Err(NetError::Config(why)) => assert!(
                        why.contains("no link to P2") && why.contains("initial view"),
                        "names the member without a link: {why}"
                    ),
                    other => panic!("expected a configuration error, got {other:?}"),
                }
            });
        }
    }
    let spec = spec(Algorithm::Maekawa, Topology::complete(3).unwrap(), Some(1));
    spec.clone().build(Run(spec)).unwrap();
}
