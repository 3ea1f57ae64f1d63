//! A cluster's call rate under a flood of sockets, against the same cluster unflooded, in
//! one run.
//!
//! Run: `cargo run --release --example flood_bench` (about two minutes on 2 cores).
//! `FLOOD_BENCH_ROUNDS=R` sets the rounds (default 3), `FLOOD_BENCH_PHASE_MS` a phase's length
//! (default 3000).
//!
//! Four members of one quota (Maekawa on a complete graph, mutual exclusion, and GCS with
//! l = 1, k = 2) run as nodes over loopback TCP with the default [`Timing`], all in this
//! process on a two-worker tokio runtime; each member's workload is a task that cycles
//! exit/entry pairs for the whole run. The link from member 0 to member 1 goes through a TCP
//! proxy that can cut it. The attacker runs on a runtime of its own and binds its sockets to
//! an address that is no member's host (127.0.0.2) unless said otherwise. A round measures,
//! each for one phase, back to back:
//!
//! - `quiet`: no flood, no reset: the yardstick;
//! - `reset`: no flood; the proxied link is cut once, in the middle of the phase;
//! - `idle`: 500 connections held open to every member (each reopened as soon as the member
//!   closes it), and the link cut in the middle of the phase;
//! - `slowloris`: 100 connections to every member, each sending one byte every 100 ms, and
//!   the link cut in the middle of the phase;
//! - `slowloris-peer-host`: the same from 127.0.0.1, the members' own host: these pass the
//!   address check and take the host's handshake slots until the handshake deadline; what a
//!   member's own host can do to it.
//!
//! A phase's rate is the pairs the members completed during it ÷ its length. Each ratio
//! (a phase's rate ÷ the quiet rate of the same round) is reported as its median and range
//! over the rounds.

#[cfg(feature = "net")]
mod bench {
    use lkcs::cs::{CsObject, CsState};
    use lkcs::net::{Identity, Logger, Net, NetConfig, Node, NodeHandle, SecretKey, Timing};
    use lkcs::{cs::Sequence, Algorithm, Instance, ProcessId, SystemSpec, SystemVisitor, Topology};
    use std::collections::BTreeMap;
    use std::io::{Read, Write};
    use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};
    use std::thread;
    use std::time::{Duration, Instant};

    type Error = Box<dyn std::error::Error>;

    /// Connections the attacker opened (and the members accepted or refused).
    static CONNECTS: AtomicUsize = AtomicUsize::new(0);

    /// What the attacker does during a phase.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    enum Attack {
        Quiet,
        Reset,
        Idle,
        Slowloris,
        SlowlorisPeerHost,
    }

    impl Attack {
        const ALL: [Attack; 5] = [
            Attack::Quiet,
            Attack::Reset,
            Attack::Idle,
            Attack::Slowloris,
            Attack::SlowlorisPeerHost,
        ];

        fn name(self) -> &'static str {
            match self {
                Attack::Quiet => "quiet",
                Attack::Reset => "reset",
                Attack::Idle => "idle",
                Attack::Slowloris => "slowloris",
                Attack::SlowlorisPeerHost => "slowloris-peer-host",
            }
        }

        /// (connections per member, source address, a byte every this often); none for no
        /// flood.
        fn flood(self) -> Option<(usize, Ipv4Addr, Option<Duration>)> {
            let other = Ipv4Addr::new(127, 0, 0, 2);
            let trickle = Some(Duration::from_millis(100));
            match self {
                Attack::Quiet | Attack::Reset => None,
                Attack::Idle => Some((500, other, None)),
                Attack::Slowloris => Some((100, other, trickle)),
                Attack::SlowlorisPeerHost => Some((100, Ipv4Addr::LOCALHOST, trickle)),
            }
        }

        fn resets(self) -> bool {
            self != Attack::Quiet
        }
    }

    /// A TCP proxy in front of a member: `cut` closes every connection it carries.
    struct Proxy {
        addr: SocketAddr,
        live: Arc<Mutex<Vec<TcpStream>>>,
    }

    impl Proxy {
        fn start(target: SocketAddr) -> Result<Proxy, Error> {
            let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0))?;
            let addr = listener.local_addr()?;
            let live: Arc<Mutex<Vec<TcpStream>>> = Arc::default();
            let conns = live.clone();
            thread::spawn(move || {
                for client in listener.incoming().flatten() {
                    let Ok(server) = TcpStream::connect(target) else {
                        continue;
                    };
                    let _ = (client.set_nodelay(true), server.set_nodelay(true));
                    let (Ok(c2), Ok(s2)) = (client.try_clone(), server.try_clone()) else {
                        continue;
                    };
                    if let (Ok(c3), Ok(s3)) = (client.try_clone(), server.try_clone()) {
                        conns.lock().unwrap().extend([c3, s3]);
                    }
                    thread::spawn(move || pipe(client, server));
                    thread::spawn(move || pipe(s2, c2));
                }
            });
            Ok(Proxy { addr, live })
        }

        fn cut(&self) {
            for s in self.live.lock().unwrap().drain(..) {
                let _ = s.shutdown(Shutdown::Both);
            }
        }
    }

    fn pipe(mut from: TcpStream, mut to: TcpStream) {
        let mut buf = [0u8; 16 * 1024];
        loop {
            match from.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    if to.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = to.shutdown(Shutdown::Both);
        let _ = from.shutdown(Shutdown::Both);
    }

    /// Holds `count` connections from `source` to each target while `on` holds, reopening
    /// those the member closed; with `trickle`, each sends one byte that often.
    async fn flood(
        targets: Vec<SocketAddr>,
        count: usize,
        source: Ipv4Addr,
        trickle: Option<Duration>,
        on: Arc<AtomicBool>,
    ) {
        let mut held: Vec<(usize, tokio::net::TcpStream)> = Vec::new();
        let mut last_trickle = Instant::now();
        while on.load(Ordering::SeqCst) {
            let send = trickle.is_some_and(|t| last_trickle.elapsed() >= t);
            if send {
                last_trickle = Instant::now();
            }
            held.retain(|(_, s)| {
                if send && s.try_write(&[0]).is_err() {
                    return false;
                }
                let mut b = [0u8; 64];
                !matches!(s.try_read(&mut b), Ok(0))
                    && !matches!(s.try_read(&mut b), Err(ref e) if e.kind() != std::io::ErrorKind::WouldBlock)
            });
            for (t, &target) in targets.iter().enumerate() {
                let mut mine = held.iter().filter(|(i, _)| *i == t).count();
                while mine < count && on.load(Ordering::SeqCst) {
                    let Ok(socket) = tokio::net::TcpSocket::new_v4() else {
                        break;
                    };
                    if socket.bind(SocketAddr::from((source, 0))).is_err() {
                        break;
                    }
                    match tokio::time::timeout(Duration::from_millis(200), socket.connect(target))
                        .await
                    {
                        Ok(Ok(s)) => {
                            CONNECTS.fetch_add(1, Ordering::Relaxed);
                            held.push((t, s));
                        }
                        _ => break,
                    }
                    mine += 1;
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Member `id`'s private key (fixed: this is a benchmark).
    fn key(id: u32) -> SecretKey {
        let mut bytes = [0x3c; 32];
        bytes[8..12].copy_from_slice(&id.to_le_bytes());
        SecretKey::from_bytes(bytes)
    }

    /// A quota to run.
    struct Case {
        name: &'static str,
        spec: SystemSpec,
    }

    fn cases() -> Result<Vec<Case>, Error> {
        let spec = |algorithm, l, k| SystemSpec {
            l,
            k,
            ..SystemSpec::new(algorithm, Topology::complete(4).expect("complete:4"))
        };
        Ok(vec![
            Case {
                name: "maekawa (mutex) n=4",
                spec: spec(Algorithm::Maekawa, None, Some(1)),
            },
            Case {
                name: "gcs l=1 k=2 n=4",
                spec: spec(Algorithm::Gcs, Some(1), Some(2)),
            },
        ])
    }

    /// One attack's phases over the rounds.
    struct Measured {
        attack: Attack,
        /// Pairs per second.
        rates: Vec<f64>,
        /// Each rate ÷ the quiet rate of its round.
        ratios: Vec<f64>,
        /// Connections the attacker opened per second.
        connects: Vec<f64>,
    }

    /// Runs one case: builds its objects, then [`measure`]s them.
    struct Run {
        rounds: usize,
        phase: Duration,
        label: &'static str,
    }

    impl SystemVisitor for Run {
        type Output = Result<Vec<Measured>, String>;
        fn visit<A: CsObject>(
            self,
            _instance: &Instance,
            _initial: &[CsState],
            procs: Vec<A>,
        ) -> Self::Output {
            measure(self, procs).map_err(|e| e.to_string())
        }
    }

    /// Per attack: the rates (pairs/s) and the ratios to the round's quiet rate.
    fn measure<A: CsObject>(run: Run, procs: Vec<A>) -> Result<Vec<Measured>, Error> {
        let n = procs.len();
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let listeners: Vec<TcpListener> = (0..n)
            .map(|_| TcpListener::bind((Ipv4Addr::LOCALHOST, 0)))
            .collect::<Result<_, _>>()?;
        let addrs: Vec<SocketAddr> = listeners
            .iter()
            .map(|l| l.local_addr())
            .collect::<Result<_, _>>()?;
        let proxy = Proxy::start(addrs[1])?;
        let trust: BTreeMap<ProcessId, _> = (0..n as u32)
            .map(|i| (ProcessId(i), key(i).public()))
            .collect();
        let quiet_log: Logger = Arc::new(|_, _| {});
        let spec = lkcs::net::spec_hash(run.label);
        let pairs = Arc::new(AtomicUsize::new(0));
        let stop = Arc::new(AtomicBool::new(false));
        let handles: Vec<NodeHandle> = rt.block_on(async {
            let mut handles = Vec::new();
            for (obj, listener) in procs.into_iter().zip(listeners) {
                let me = obj.id();
                let peers = (0..n as u32)
                    .map(ProcessId)
                    .filter(|&p| p != me)
                    .map(|p| {
                        let via_proxy = me == ProcessId(0) && p == ProcessId(1);
                        (
                            p,
                            if via_proxy {
                                proxy.addr
                            } else {
                                addrs[p.index()]
                            }
                            .into(),
                        )
                    })
                    .collect();
                let config = NetConfig {
                    identity: Identity::new(me, key(me.0), spec, 1),
                    peers,
                    keys: trust.clone(),
                    timing: Timing::default(),
                    log: quiet_log.clone(),
                    on_restart: lkcs::net::OnRestart::Refuse,
                };
                listener.set_nonblocking(true)?;
                let net = Net::start(config, tokio::net::TcpListener::from_std(listener)?)?;
                handles.push(Node::spawn(obj, net, None, quiet_log.clone())?);
            }
            Ok::<_, Error>(handles)
        })?;
        for h in &handles {
            let (h, pairs, stop) = (h.clone(), pairs.clone(), stop.clone());
            rt.spawn(async move {
                let mut moves = 0usize;
                while !stop.load(Ordering::SeqCst) {
                    let r = match Sequence::leaving(h.state()) {
                        Sequence::Entry => h.enter().await,
                        Sequence::Exit => h.exit().await,
                    };
                    if let Err(e) = r {
                        eprintln!("{}: {e}", h.id());
                        return;
                    }
                    moves += 1;
                    if moves.is_multiple_of(2) {
                        pairs.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
        // the attacker's own runtime, on threads of its own
        let attacker = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let attacker = Arc::new(attacker);
        // warm up: every link up and the first pairs done
        thread::sleep(Duration::from_millis(500));
        let mut out: Vec<Measured> = Attack::ALL
            .iter()
            .map(|&attack| Measured {
                attack,
                rates: vec![],
                ratios: vec![],
                connects: vec![],
            })
            .collect();
        for _ in 0..run.rounds {
            let mut quiet = f64::NAN;
            for (i, &attack) in Attack::ALL.iter().enumerate() {
                let on = Arc::new(AtomicBool::new(true));
                let flooder = attack.flood().map(|(count, source, trickle)| {
                    let (attacker, on, targets) = (attacker.clone(), on.clone(), addrs.clone());
                    thread::spawn(move || {
                        attacker.block_on(flood(targets, count, source, trickle, on));
                    })
                });
                // the flood reaches its size before the phase starts
                if flooder.is_some() {
                    thread::sleep(Duration::from_millis(300));
                }
                let start_pairs = pairs.load(Ordering::SeqCst);
                let start_connects = CONNECTS.load(Ordering::Relaxed);
                let start = Instant::now();
                thread::sleep(run.phase / 2);
                if attack.resets() {
                    proxy.cut();
                }
                thread::sleep(run.phase - run.phase / 2);
                let rate = (pairs.load(Ordering::SeqCst) - start_pairs) as f64
                    / start.elapsed().as_secs_f64();
                on.store(false, Ordering::SeqCst);
                if let Some(f) = flooder {
                    let _ = f.join();
                }
                if attack == Attack::Quiet {
                    quiet = rate;
                }
                let connects = (CONNECTS.load(Ordering::Relaxed) - start_connects) as f64
                    / start.elapsed().as_secs_f64();
                out[i].rates.push(rate);
                out[i].ratios.push(rate / quiet);
                out[i].connects.push(connects);
                // the members close what the flood left before the next phase
                thread::sleep(Duration::from_millis(300));
            }
        }
        stop.store(true, Ordering::SeqCst);
        for h in &handles {
            h.shutdown();
        }
        drop(rt);
        Ok(out)
    }

    fn median(v: &[f64]) -> f64 {
        let mut s = v.to_vec();
        s.sort_by(f64::total_cmp);
        s[s.len() / 2]
    }

    fn range(v: &[f64]) -> (f64, f64) {
        v.iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            })
    }

    pub fn main() -> Result<(), Error> {
        let rounds = std::env::var("FLOOD_BENCH_ROUNDS")
            .ok()
            .and_then(|r| r.parse().ok())
            .filter(|&r| r > 0)
            .unwrap_or(3);
        let phase = std::env::var("FLOOD_BENCH_PHASE_MS")
            .ok()
            .and_then(|r| r.parse().ok())
            .filter(|&r| r >= 200)
            .map(Duration::from_millis)
            .unwrap_or(Duration::from_secs(3));
        println!("rounds: {rounds}, phase: {} ms", phase.as_millis());
        println!();
        println!(
            "| case | attack | pairs/s (median) | of quiet (median) | of quiet (range) | attacker connects/s (median) |"
        );
        println!(
            "|------|--------|-----------------:|------------------:|-----------------:|-----------------------------:|"
        );
        for case in cases()? {
            let results = case.spec.build(Run {
                rounds,
                phase,
                label: case.name,
            })??;
            for m in results {
                let (lo, hi) = range(&m.ratios);
                println!(
                    "| {} | {} | {:.0} | {:.2} | {:.2}–{:.2} | {:.0} |",
                    case.name,
                    m.attack.name(),
                    median(&m.rates),
                    median(&m.ratios),
                    lo,
                    hi,
                    median(&m.connects)
                );
            }
        }
        Ok(())
    }
}

#[cfg(feature = "net")]
fn main() -> Result<(), Box<dyn std::error::Error>> {
    bench::main()
}

#[cfg(not(feature = "net"))]
fn main() {
    eprintln!("flood_bench needs the net feature (on by default)");
}
