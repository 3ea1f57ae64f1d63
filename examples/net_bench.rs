//! Issue 17 item 8: a quota over loopback TCP against the thread runtime running the same
//! algorithm on the same members, and against the network ceiling: bare TCP
//! request/response with as many sequential round trips per pair as the algorithm sends
//! remote messages per pair, halved.
//!
//! Run: `cargo run --release --example net_bench` (about three minutes on 2 cores).
//! `NET_BENCH_ROUNDS=R` sets the rounds per case (default 5). For profiling,
//! `NET_BENCH_CLUSTER_ONLY=I` measures only the cluster and the nodes of case I (0: GCS n=3,
//! 1: GCS n=5, 2: Maekawa n=5, 3: CDC n=5), R phases of each.
//!
//! For each case (algorithm, n, bounds) the benchmark starts the systems below once, warms
//! each up (which also sizes its phases to about `PHASE` seconds), then runs R rounds; a
//! round measures each system once, the cluster and the ceiling back to back. Every ratio is
//! taken within a round and reported as its median and range over the rounds, so that a
//! slow spell of the machine shifts both sides of a ratio rather than one:
//!
//! - `cluster`: n members of one cluster file, each its own node over TCP on 127.0.0.1
//!   (ports chosen free at run time), all in this process ([`lkcs::net::Cluster::member_with`]):
//!   each node runs on a thread of its own and each member's calls come from another thread;
//! - `nodes`: the same cluster with each member's workload on its node's own thread, an
//!   async task on the current-thread runtime that runs the node ([`lkcs::net::Cluster::spawn`]),
//!   as `lkcs node --workload cycle` runs a node: no hand-off between threads per call;
//! - `noviews`: `nodes` over a cluster file with `evict_after_ms = 0`: no view log, no lease
//!   beats, links to the neighbours only (what every cluster ran before views); the cost of
//!   the views without faults is `nodes` over `noviews`;
//! - `runtime`: the thread runtime ([`lkcs::Quota`]) with the same algorithm, coterie, inner
//!   mutual exclusion and initial configuration;
//! - `ceiling`: n client threads, each doing `pairs × round trips per pair` blocking
//!   write/read round trips of a 32-byte frame to its own echo thread over loopback TCP
//!   (TCP_NODELAY). Round trips per pair = the remote messages per pair of `lkcs::sim::simulate`
//!   on the same spec (concurrent workload, unit delays), divided by 2.
//! - `serial` (mutual exclusion only): the same round trips per pair, one pair at a time in
//!   the whole cluster, since a mutual exclusion serialises its pairs: a single client makes
//!   all `n × pairs` pairs' round trips in one sequence. It assumes every message of a pair
//!   lies on the path from one critical section to the next; an algorithm that overlaps a
//!   request with another member's critical section could beat it.
//! - `token` (mutual exclusion only): n threads in a ring over loopback TCP passing one token,
//!   one message per turn and nothing else: the least a mutual exclusion whose members take
//!   turns needs between one member's exit and the next one's entry, so no such mutual
//!   exclusion over these links makes more pairs per second.
//!
//! In `cluster`, `nodes` and `runtime` every member cycles exit/entry pairs
//! (state-dependent: an active member exits then enters, an inactive one enters then exits);
//! with a lower bound a member that stopped could hold the others forever, so every member
//! keeps cycling until all have made their pairs. Time runs from the start of the phase until
//! the last member made its pairs; pairs/s counts every pair completed by then, and the
//! per-pair latency is the mean time of one pair of one member.

#[cfg(feature = "net")]
mod bench {
    use lkcs::cs::{CsObject, CsState};
    use lkcs::net::{Cluster, LogEvent, Logger, SecretKey};
    use lkcs::sim::{simulate, SimConfig};
    use lkcs::{Algorithm, Instance, Member, ProcessId, Quota, QuotaError, SystemVisitor};
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
    use std::sync::{Arc, Barrier, Mutex};
    use std::time::{Duration, Instant};

    /// Numbers the benchmark's key folders.
    static KEYS: AtomicUsize = AtomicUsize::new(0);

    /// Seconds a measured phase aims at.
    const PHASE: f64 = 1.5;
    /// Rounds per case (`NET_BENCH_ROUNDS` overrides it).
    const ROUNDS: usize = 5;
    /// Pairs per member in a warm-up phase.
    const WARMUP_PAIRS: usize = 30;
    /// A blocked call gives up this often to see whether the phase is over.
    const POLL: Duration = Duration::from_millis(50);
    /// The ceiling's frame.
    const FRAME: usize = 32;

    type Error = Box<dyn std::error::Error>;

    /// One algorithm on n members.
    struct Case {
        name: &'static str,
        algorithm: Algorithm,
        n: usize,
        /// (l, k) of a global quota; `None` for mutual exclusion (0, 1).
        bounds: Option<(usize, usize)>,
    }

    impl Case {
        fn label(&self) -> String {
            match self.bounds {
                Some((l, k)) => format!("{} l={l} k={k}", self.name),
                None => format!("{} (mutex)", self.name),
            }
        }

        /// The options every system gets, written as a cluster file's `[quota]`: the thread
        /// runtime's defaults (grid coterie, CDC inside GCS, the l lowest ids active).
        fn quota_table(&self) -> String {
            let mut t = format!(
                "algorithm = \"{}\"\ntopology = \"complete:{}\"\n",
                self.algorithm.name(),
                self.n
            );
            if let Some((l, k)) = self.bounds {
                t += &format!("l = {l}\nk = {k}\n");
                if l > 0 {
                    let ids: Vec<String> = (0..l).map(|i| i.to_string()).collect();
                    t += &format!("initial = \"in:{}\"\n", ids.join(","));
                }
            }
            if matches!(self.algorithm, Algorithm::Gcs | Algorithm::Maekawa) {
                t += "coterie = \"grid\"\n";
            }
            if self.algorithm == Algorithm::Gcs {
                t += "mx = \"cdc\"\n";
            }
            t
        }

        fn quota(&self) -> Result<Quota, Error> {
            let b = Quota::global(self.n).algorithm(self.algorithm);
            let b = match self.bounds {
                Some((l, k)) => b.between(l, k),
                None => b.at_most(1),
            };
            Ok(b.build()?)
        }
    }

    /// What one phase measured.
    #[derive(Clone, Copy, Default)]
    struct Phase {
        pairs: usize,
        wall: Duration,
        /// Mean time of one pair of one member (ms).
        latency_ms: f64,
    }

    impl Phase {
        fn rate(&self) -> f64 {
            self.pairs as f64 / self.wall.as_secs_f64()
        }

        /// Pairs per member for a phase of about `PHASE` seconds at this rate.
        fn sized(&self, n: usize) -> usize {
            ((self.rate() * PHASE / n as f64) as usize).clamp(WARMUP_PAIRS, 1_000_000)
        }
    }

    /// Moves `m` in or out, giving up when the phase stops first: `Ok(false)`.
    fn step(m: &mut Member, enter: bool, stop: &AtomicBool) -> Result<bool, QuotaError> {
        loop {
            let r = if enter {
                m.enter_timeout(POLL)
            } else {
                m.exit_timeout(POLL)
            };
            match r {
                Ok(()) => return Ok(true),
                Err(_) if stop.load(Ordering::SeqCst) => return Ok(false),
                Err(e) if e.is_timeout() => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// When a phase of members cycling pairs ends: once each of them has made `pairs`.
    struct Clock {
        pairs: usize,
        /// Members that have not made their pairs yet.
        remaining: AtomicUsize,
        stop: AtomicBool,
        end: Mutex<Option<Instant>>,
    }

    impl Clock {
        fn new(members: usize, pairs: usize) -> Clock {
            Clock {
                pairs,
                remaining: AtomicUsize::new(members),
                stop: AtomicBool::new(false),
                end: Mutex::new(None),
            }
        }

        fn stopped(&self) -> bool {
            self.stop.load(Ordering::SeqCst)
        }

        /// A member made its `done`-th pair: the last member to make its pairs ends the phase.
        fn made(&self, done: usize) {
            if done == self.pairs && self.remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
                *self.end.lock().expect("no panic") = Some(Instant::now());
                self.stop.store(true, Ordering::SeqCst);
            }
        }

        /// The phase from `t0` to its end, from each member's pairs and their total time.
        fn phase(&self, t0: Instant, members: &[(usize, f64)]) -> Result<Phase, Error> {
            let done: usize = members.iter().map(|m| m.0).sum();
            let total: f64 = members.iter().map(|m| m.1).sum();
            let end = self
                .end
                .lock()
                .expect("no panic")
                .ok_or("the phase never ended")?;
            Ok(Phase {
                pairs: done,
                wall: end - t0,
                latency_ms: total / done.max(1) as f64 * 1e3,
            })
        }
    }

    /// Every member cycles pairs on its own thread until each has made `pairs`.
    fn cycle(members: &mut [Member], pairs: usize) -> Result<Phase, Error> {
        let n = members.len();
        let clock = Clock::new(n, pairs);
        let start = Barrier::new(n + 1);
        let (t0, results) = std::thread::scope(|s| {
            let workers: Vec<_> = members
                .iter_mut()
                .map(|m| {
                    let (clock, start) = (&clock, &start);
                    s.spawn(move || -> Result<(usize, f64), QuotaError> {
                        start.wait();
                        let (mut done, mut total) = (0usize, 0.0f64);
                        loop {
                            let began = Instant::now();
                            let enter_first = !m.is_active();
                            let stop = &clock.stop;
                            if !step(m, enter_first, stop)? || !step(m, !enter_first, stop)? {
                                break;
                            }
                            if clock.stopped() {
                                break;
                            }
                            total += began.elapsed().as_secs_f64();
                            done += 1;
                            clock.made(done);
                        }
                        Ok((done, total))
                    })
                })
                .collect();
            start.wait();
            let t0 = Instant::now();
            let results: Vec<_> = workers
                .into_iter()
                .map(|w| w.join().expect("no worker panics"))
                .collect();
            (t0, results)
        });
        let results = results.into_iter().collect::<Result<Vec<_>, _>>()?;
        clock.phase(t0, &results)
    }

    /// Pairs per member for a measured phase of `members`, sized by a warm-up.
    fn warm(members: &mut [Member]) -> Result<usize, Error> {
        Ok(cycle(members, WARMUP_PAIRS)?.sized(members.len()))
    }

    /// A cluster file for the case on free loopback ports (with views, the default, or
    /// without), and a logger that prints what matters (refusals, drops, unreachable peers)
    /// until its switch is set.
    fn cluster_file(case: &Case, views: bool) -> Result<(Cluster, Logger, Arc<AtomicBool>), Error> {
        let mut text = String::from("epoch = 1\n\n[quota]\n");
        text += &case.quota_table();
        if !views {
            text += "\n[timing]\nevict_after_ms = 0\n";
        }
        // one key pair per member, the private keys in a scratch folder (mode 600)
        let dir = std::env::temp_dir().join(format!(
            "lkcs-net-bench-{}-{}",
            std::process::id(),
            KEYS.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)?;
        // held together until every port is known, so that no two are the same
        let held = (0..case.n)
            .map(|_| TcpListener::bind("127.0.0.1:0"))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, l) in held.iter().enumerate() {
            let key = SecretKey::generate();
            let path = dir.join(format!("{i}.key"));
            lkcs::net::write_key(&path, i, &key)?;
            text += &format!(
                "\n[members.{i}]\naddress = \"127.0.0.1:{}\"\npublic_key = \"{}\"\nprivate_key = {:?}\n",
                l.local_addr()?.port(),
                key.public(),
                path.display().to_string()
            );
        }
        drop(held);
        let cluster = Cluster::parse(&text)?;
        let quiet = Arc::new(AtomicBool::new(false));
        let log: Logger = {
            let quiet = quiet.clone();
            Arc::new(move |me: ProcessId, e: &LogEvent| {
                // dials before a peer listens are refused: noise at the start
                let noise = matches!(
                    e,
                    LogEvent::Connected { .. }
                        | LogEvent::Disconnected { .. }
                        | LogEvent::Refused { .. }
                );
                if !quiet.load(Ordering::SeqCst) && !noise {
                    eprintln!("lkcs-net {me}: {e}");
                }
            })
        };
        Ok((cluster, log, quiet))
    }

    /// The members of a cluster over loopback TCP, each its own node; also the remote
    /// messages per pair `simulate` counts on the same spec, and the switch that silences the
    /// log once the case is over.
    fn cluster(case: &Case) -> Result<(Vec<Member>, f64, Arc<AtomicBool>), Error> {
        let (cluster, log, quiet) = cluster_file(case, true)?;
        let remote = cluster.spec().build(Remote)?;
        let members = (0..case.n)
            .map(|i| cluster.member_with(i, None, log.clone()))
            .collect::<Result<Vec<_>, _>>()?;
        Ok((members, remote, quiet))
    }

    /// What every node of a `nodes` phase shares.
    struct Shared {
        clock: Clock,
        start: Barrier,
        /// The first node's start.
        t0: Mutex<Option<Instant>>,
    }

    /// A cluster whose every node runs on a thread of its own, its tasks and its workload
    /// together on one current-thread runtime, as `lkcs node --workload cycle` runs one: a
    /// phase is sent to every node thread, each answers with its pairs and their total time.
    struct Nodes {
        phases: Vec<tokio::sync::mpsc::UnboundedSender<Arc<Shared>>>,
        results: std::sync::mpsc::Receiver<Result<(usize, f64), String>>,
        quiet: Arc<AtomicBool>,
    }

    impl Nodes {
        fn start(case: &Case, views: bool) -> Result<Nodes, Error> {
            let (cluster, log, quiet) = cluster_file(case, views)?;
            let (results_tx, results) = std::sync::mpsc::channel();
            let mut phases = Vec::new();
            for i in 0..case.n {
                let me = ProcessId(i as u32);
                let addr = cluster.address(me).ok_or("no address")?;
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()?;
                let node = {
                    let _in = rt.enter();
                    let l = std::net::TcpListener::bind(addr)?;
                    l.set_nonblocking(true)?;
                    cluster.spawn(me, tokio::net::TcpListener::from_std(l)?, None, log.clone())?
                };
                let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<Arc<Shared>>();
                phases.push(tx);
                let results = results_tx.clone();
                // the runtime runs all the time: between phases the node keeps its links
                std::thread::spawn(move || {
                    rt.block_on(async {
                        while let Some(phase) = rx.recv().await {
                            let r = node_phase(&node, &phase).await;
                            if results.send(r.map_err(|e| e.to_string())).is_err() {
                                break;
                            }
                        }
                        node.shutdown();
                    })
                });
            }
            Ok(Nodes {
                phases,
                results,
                quiet,
            })
        }

        fn cycle(&mut self, pairs: usize) -> Result<Phase, Error> {
            let n = self.phases.len();
            let shared = Arc::new(Shared {
                clock: Clock::new(n, pairs),
                start: Barrier::new(n),
                t0: Mutex::new(None),
            });
            for p in &self.phases {
                p.send(shared.clone())?;
            }
            let results = (0..n)
                .map(|_| self.results.recv()?.map_err(Error::from))
                .collect::<Result<Vec<_>, _>>()?;
            let t0 = shared.t0.lock().expect("no panic").ok_or("never started")?;
            shared.clock.phase(t0, &results)
        }

        /// Two warm-ups: right after the start a node can make its first pairs before its
        /// peers are busy, so the second, longer one sizes the phases.
        fn warm(&mut self, n: usize) -> Result<usize, Error> {
            self.cycle(WARMUP_PAIRS)?;
            Ok(self.cycle(10 * WARMUP_PAIRS)?.sized(n))
        }
    }

    impl Drop for Nodes {
        fn drop(&mut self) {
            self.quiet.store(true, Ordering::SeqCst);
        }
    }

    /// Moves the node in or out, giving up when the phase stops first: `Ok(false)`.
    async fn node_step(
        h: &lkcs::net::NodeHandle,
        enter: bool,
        stop: &AtomicBool,
    ) -> Result<bool, lkcs::net::NodeError> {
        loop {
            let call = async {
                match enter {
                    true => h.enter().await,
                    false => h.exit().await,
                }
            };
            match tokio::time::timeout(POLL, call).await {
                Ok(Ok(())) => return Ok(true),
                _ if stop.load(Ordering::SeqCst) => return Ok(false),
                Ok(Err(e)) => return Err(e),
                Err(_) => {}
            }
        }
    }

    /// One node's share of a `nodes` phase: as [`cycle`]'s workers.
    async fn node_phase(
        h: &lkcs::net::NodeHandle,
        phase: &Shared,
    ) -> Result<(usize, f64), lkcs::net::NodeError> {
        // every node starts together (the barrier holds this node's tasks back a moment);
        // the phase runs from the first node's start
        phase.start.wait();
        {
            let now = Instant::now();
            let mut t0 = phase.t0.lock().expect("no panic");
            *t0 = Some(t0.map_or(now, |t| t.min(now)));
        }
        let (mut done, mut total) = (0usize, 0.0f64);
        loop {
            let began = Instant::now();
            let enter_first = h.state() == CsState::OutCs;
            let stop = &phase.clock.stop;
            if !node_step(h, enter_first, stop).await? || !node_step(h, !enter_first, stop).await? {
                break;
            }
            if phase.clock.stopped() {
                break;
            }
            total += began.elapsed().as_secs_f64();
            done += 1;
            phase.clock.made(done);
        }
        Ok((done, total))
    }

    /// Simulates the spec; the mean remote messages per pair.
    struct Remote;

    impl SystemVisitor for Remote {
        type Output = f64;
        fn visit<A: CsObject>(self, instance: &Instance, _: &[CsState], procs: Vec<A>) -> f64 {
            let cfg = SimConfig {
                pairs: 500,
                ..SimConfig::default()
            };
            simulate(instance, procs, &cfg)
                .remote_messages_per_pair
                .mean
        }
    }

    /// n clients, each `round trips × pairs` request/response round trips to its own echo
    /// thread.
    fn ceiling_phase(n: usize, round_trips: f64, pairs: usize) -> Result<Phase, Error> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let trips = ((round_trips * pairs as f64).round() as usize).max(1);
        let start = Barrier::new(n + 1);
        let (wall, per_client) = std::thread::scope(|s| -> Result<_, Error> {
            let server = s.spawn(|| -> std::io::Result<()> {
                std::thread::scope(|s| {
                    for _ in 0..n {
                        let (mut c, _) = listener.accept()?;
                        c.set_nodelay(true)?;
                        s.spawn(move || {
                            let mut buf = [0u8; FRAME];
                            while c.read_exact(&mut buf).is_ok() {
                                if c.write_all(&buf).is_err() {
                                    break;
                                }
                            }
                        });
                    }
                    Ok(())
                })
            });
            let clients: Vec<_> = (0..n)
                .map(|_| {
                    let start = &start;
                    s.spawn(move || -> std::io::Result<Duration> {
                        let mut c = TcpStream::connect(addr)?;
                        c.set_nodelay(true)?;
                        let mut buf = [7u8; FRAME];
                        start.wait();
                        let t = Instant::now();
                        for _ in 0..trips {
                            c.write_all(&buf)?;
                            c.read_exact(&mut buf)?;
                        }
                        Ok(t.elapsed())
                    })
                })
                .collect();
            start.wait();
            let t0 = Instant::now();
            let mut per_client = Vec::new();
            for c in clients {
                per_client.push(c.join().expect("no client panics")?);
            }
            let wall = t0.elapsed();
            server.join().expect("no server panic")?;
            Ok((wall, per_client))
        })?;
        let mean = per_client.iter().map(Duration::as_secs_f64).sum::<f64>() / n as f64;
        Ok(Phase {
            pairs: n * pairs,
            wall,
            latency_ms: mean / pairs as f64 * 1e3,
        })
    }

    /// n threads in a ring over loopback TCP passing one 32-byte token, `pairs` turns each:
    /// a turn is one message from the previous thread, the least a mutual exclusion whose
    /// members take turns needs between one member's exit and the next one's entry. Latency:
    /// the time between a thread's turns.
    fn token_phase(n: usize, pairs: usize) -> Result<Phase, Error> {
        let listeners = (0..n)
            .map(|_| TcpListener::bind("127.0.0.1:0"))
            .collect::<Result<Vec<_>, _>>()?;
        let mut outs = Vec::new();
        for i in 0..n {
            let s = TcpStream::connect(listeners[(i + 1) % n].local_addr()?)?;
            s.set_nodelay(true)?;
            outs.push(s);
        }
        let mut ins = Vec::new();
        for l in &listeners {
            let (s, _) = l.accept()?;
            s.set_nodelay(true)?;
            ins.push(s);
        }
        let start = Barrier::new(n + 1);
        let wall = std::thread::scope(|s| -> Result<Duration, Error> {
            let threads: Vec<_> = ins
                .into_iter()
                .zip(outs)
                .enumerate()
                .map(|(i, (mut inp, mut out))| {
                    let start = &start;
                    s.spawn(move || -> std::io::Result<()> {
                        let mut buf = [0u8; FRAME];
                        start.wait();
                        if i == 0 {
                            out.write_all(&buf)?;
                        }
                        for turn in 0..pairs {
                            inp.read_exact(&mut buf)?;
                            // the last turn of the ring ends it
                            if !(i == 0 && turn + 1 == pairs) {
                                out.write_all(&buf)?;
                            }
                        }
                        Ok(())
                    })
                })
                .collect();
            start.wait();
            let t0 = Instant::now();
            for t in threads {
                t.join().expect("no ring thread panics")?;
            }
            Ok(t0.elapsed())
        })?;
        Ok(Phase {
            pairs: n * pairs,
            wall,
            latency_ms: wall.as_secs_f64() / pairs as f64 * 1e3,
        })
    }

    /// Pairs per client for a measured ceiling phase of `n` clients, sized by a warm-up
    /// (at least 2,000 round trips per client).
    fn warm_ceiling(n: usize, round_trips: f64) -> Result<usize, Error> {
        let warm_pairs = WARMUP_PAIRS.max((2000.0 / round_trips.max(0.5)) as usize);
        Ok(ceiling_phase(n, round_trips, warm_pairs)?.sized(n))
    }

    /// The median, the least and the greatest of `xs` (not empty).
    fn spread(mut xs: Vec<f64>) -> (f64, f64, f64) {
        xs.sort_by(f64::total_cmp);
        let m = xs.len() / 2;
        let median = if xs.len() % 2 == 1 {
            xs[m]
        } else {
            (xs[m - 1] + xs[m]) / 2.0
        };
        (median, xs[0], xs[xs.len() - 1])
    }

    fn show((median, lo, hi): (f64, f64, f64)) -> String {
        format!("{median:.3} ({lo:.3}–{hi:.3})")
    }

    fn row(system: &str, case: &Case, round: usize, p: &Phase) {
        println!(
            "| {system:<8} | {:<18} | {:>2} | {round:>5} | {:>9} | {:>9.3} | {:>10.1} | {:>9.4} |",
            case.label(),
            case.n,
            p.pairs,
            p.wall.as_secs_f64(),
            p.rate(),
            p.latency_ms
        );
    }

    /// One round of a case: each system once, the cluster and the ceiling back to back.
    struct Round {
        cluster: Phase,
        ceiling: Phase,
        nodes: Phase,
        noviews: Phase,
        runtime: Phase,
        serial: Option<Phase>,
        token: Option<Phase>,
    }

    /// Which ChaCha20-Poly1305 [`channel_us_per_frame`] measures.
    #[derive(Clone, Copy)]
    enum Cipher {
        Links,
        PureRust,
    }

    /// The CPU time (µs) to seal one frame of `size` bytes and open it again on an
    /// established session of the links' Noise protocol, both ends on this thread: what the
    /// channel adds per message, beside the socket work that plain links did too.
    ///
    /// `Cipher::Links` is what the links run (`snow::Builder::new`: ring's ChaCha20-Poly1305);
    /// `Cipher::PureRust` is snow's default resolver alone (the RustCrypto cipher), the
    /// baseline the links ran before.
    fn channel_us_per_frame(size: usize, cipher: Cipher) -> Result<f64, Error> {
        use lkcs::net::{NOISE_PARAMS, PROLOGUE};
        use snow::resolvers::DefaultResolver;
        let params: snow::params::NoiseParams = NOISE_PARAMS.parse()?;
        let builder = || match cipher {
            Cipher::Links => snow::Builder::new(params.clone()),
            Cipher::PureRust => {
                snow::Builder::with_resolver(params.clone(), Box::new(DefaultResolver))
            }
        };
        let (ka, kb) = (builder().generate_keypair()?, builder().generate_keypair()?);
        let mut a = builder()
            .local_private_key(&ka.private)?
            .prologue(PROLOGUE)?
            .build_initiator()?;
        let mut b = builder()
            .local_private_key(&kb.private)?
            .prologue(PROLOGUE)?
            .build_responder()?;
        let (mut wire, mut plain) = (vec![0u8; 65_535], vec![0u8; 65_535]);
        // XX: -> e; <- e, ee, s, es; -> s, se
        let n = a.write_message(&[], &mut wire)?;
        b.read_message(&wire[..n], &mut plain)?;
        let n = b.write_message(&[], &mut wire)?;
        a.read_message(&wire[..n], &mut plain)?;
        let n = a.write_message(&[], &mut wire)?;
        b.read_message(&wire[..n], &mut plain)?;
        let (mut a, mut b) = (a.into_transport_mode()?, b.into_transport_mode()?);
        let frame = vec![0x5a_u8; size];
        let count = 200_000;
        let start = Instant::now();
        for _ in 0..count {
            let n = a.write_message(&frame, &mut wire)?;
            b.read_message(&wire[..n], &mut plain)?;
        }
        Ok(start.elapsed().as_secs_f64() * 1e6 / count as f64)
    }

    pub fn main() -> Result<(), Error> {
        let cases = [
            Case {
                name: "gcs",
                algorithm: Algorithm::Gcs,
                n: 3,
                bounds: Some((1, 2)),
            },
            Case {
                name: "gcs",
                algorithm: Algorithm::Gcs,
                n: 5,
                bounds: Some((2, 3)),
            },
            Case {
                name: "maekawa",
                algorithm: Algorithm::Maekawa,
                n: 5,
                bounds: None,
            },
            Case {
                name: "cdc",
                algorithm: Algorithm::Cdc,
                n: 5,
                bounds: None,
            },
        ];
        let rounds: usize = match std::env::var("NET_BENCH_ROUNDS") {
            Ok(r) => r.parse()?,
            Err(_) => ROUNDS,
        };
        if rounds == 0 {
            return Err("NET_BENCH_ROUNDS must be at least 1".into());
        }
        println!(
            "| system   | case               |  n | round |     pairs |    wall s |    pairs/s | pair ms   |"
        );
        println!(
            "|----------|--------------------|---:|------:|----------:|----------:|-----------:|----------:|"
        );
        // profiling: `NET_BENCH_CLUSTER_ONLY=I` measures the cluster of case I alone
        if let Ok(i) = std::env::var("NET_BENCH_CLUSTER_ONLY") {
            let case = cases.get(i.parse::<usize>()?).ok_or("no such case")?;
            let (mut net, _, quiet) = cluster(case)?;
            let mut nodes = Nodes::start(case, true)?;
            let pairs = warm(&mut net)?;
            let node_pairs = nodes.warm(case.n)?;
            for r in 1..=rounds {
                row("cluster", case, r, &cycle(&mut net, pairs)?);
                row("nodes", case, r, &nodes.cycle(node_pairs)?);
            }
            quiet.store(true, Ordering::SeqCst);
            return Ok(());
        }
        let mut results = Vec::new();
        for case in &cases {
            let (mut net, remote, quiet) = cluster(case)?;
            let mut nodes = Nodes::start(case, true)?;
            let mut bare = Nodes::start(case, false)?;
            let quota = case.quota()?;
            let mut rt = quota.members();
            let round_trips = remote / 2.0;
            // mutual exclusion serialises its pairs: the second ceiling does too
            let mutex = case.bounds.is_none();
            // every phase of a system has the same size, from one warm-up
            let net_pairs = warm(&mut net)?;
            let node_pairs = nodes.warm(case.n)?;
            let bare_pairs = bare.warm(case.n)?;
            let rt_pairs = warm(&mut rt)?;
            let top_pairs = warm_ceiling(case.n, round_trips)?;
            let serial_pairs = match mutex {
                true => Some(warm_ceiling(1, round_trips)?),
                false => None,
            };
            let token_pairs = match mutex {
                true => Some(token_phase(case.n, WARMUP_PAIRS * 10)?.sized(case.n)),
                false => None,
            };
            let mut done = Vec::new();
            for r in 1..=rounds {
                let round = Round {
                    cluster: cycle(&mut net, net_pairs)?,
                    ceiling: ceiling_phase(case.n, round_trips, top_pairs)?,
                    nodes: nodes.cycle(node_pairs)?,
                    noviews: bare.cycle(bare_pairs)?,
                    runtime: cycle(&mut rt, rt_pairs)?,
                    serial: match serial_pairs {
                        Some(p) => Some(ceiling_phase(1, round_trips, p)?),
                        None => None,
                    },
                    token: match token_pairs {
                        Some(p) => Some(token_phase(case.n, p)?),
                        None => None,
                    },
                };
                row("cluster", case, r, &round.cluster);
                row("ceiling", case, r, &round.ceiling);
                row("nodes", case, r, &round.nodes);
                row("noviews", case, r, &round.noviews);
                row("runtime", case, r, &round.runtime);
                if let Some(s) = &round.serial {
                    row("serial", case, r, s);
                }
                if let Some(t) = &round.token {
                    row("token", case, r, t);
                }
                done.push(round);
            }
            quiet.store(true, Ordering::SeqCst);
            drop(net);
            drop(nodes);
            drop(bare);
            quota.shutdown();
            results.push((case, remote, round_trips, done));
        }
        // a cluster frame: a 4-byte length, then a postcard `Data { seq, msg }` of about
        // 10 to 30 bytes
        let per_frame = channel_us_per_frame(FRAME, Cipher::Links)?;
        let pure_rust = channel_us_per_frame(FRAME, Cipher::PureRust)?;
        println!();
        println!(
            "The channel: {per_frame:.3} us of CPU to seal and open one {FRAME}-byte Noise message \
             (ring's ChaCha20-Poly1305 under snow, both ends on one thread); \
             {pure_rust:.3} us with snow's pure-Rust cipher ({:.1} times as much).",
            pure_rust / per_frame
        );
        println!();
        println!("| case               |  n | remote msgs/pair | channel us/pair | cluster us/pair (median) | channel share |");
        println!("|--------------------|---:|-----------------:|----------------:|-------------------------:|--------------:|");
        for (case, remote, _, done) in &results {
            let (cluster_rate, _, _) = spread(done.iter().map(|r| r.cluster.rate()).collect());
            let channel = per_frame * remote;
            let pair_us = 1e6 / cluster_rate;
            println!(
                "| {:<18} | {:>2} | {remote:>16.2} | {channel:>15.2} | {pair_us:>24.1} | {:>12.1}% |",
                case.label(),
                case.n,
                100.0 * channel / pair_us
            );
        }
        println!();
        println!(
            "Each ratio is taken within a round (the cluster and the ceiling back to back); median (least–greatest) over {rounds} rounds."
        );
        println!();
        println!(
            "| case               |  n | remote msgs/pair | round trips/pair | cluster/ceiling     | nodes/ceiling       | nodes/noviews       | cluster/runtime     | latency ceiling/cluster | cluster/serial      | token/ceiling       |"
        );
        println!(
            "|--------------------|---:|-----------------:|-----------------:|---------------------|---------------------|---------------------|---------------------|-------------------------|---------------------|---------------------|"
        );
        for (case, remote, trips, done) in &results {
            let of = |f: &dyn Fn(&Round) -> f64| spread(done.iter().map(f).collect());
            let top = of(&|r| r.cluster.rate() / r.ceiling.rate());
            let nodes = of(&|r| r.nodes.rate() / r.ceiling.rate());
            let views = of(&|r| r.nodes.rate() / r.noviews.rate());
            let rt = of(&|r| r.cluster.rate() / r.runtime.rate());
            let lat = of(&|r| r.ceiling.latency_ms / r.cluster.latency_ms);
            let against = |bound: &dyn Fn(&Round) -> Option<&Phase>,
                           num: &dyn Fn(&Round) -> f64| {
                match bound(&done[0]) {
                    Some(_) => show(of(&|r| num(r) / bound(r).map_or(f64::NAN, Phase::rate))),
                    None => "-".into(),
                }
            };
            let serial = against(&|r| r.serial.as_ref(), &|r| r.cluster.rate());
            // the token ring over the ceiling: the most any mutual exclusion could reach
            let token = against(&|r| Some(&r.ceiling), &|r| {
                r.token.as_ref().map_or(f64::NAN, Phase::rate)
            });
            let token = if done[0].token.is_some() {
                token
            } else {
                "-".into()
            };
            println!(
                "| {:<18} | {:>2} | {remote:>16.2} | {trips:>16.2} | {:<19} | {:<19} | {:<19} | {:<19} | {:<23} | {serial:<19} | {token:<19} |",
                case.label(),
                case.n,
                show(top),
                show(nodes),
                show(views),
                show(rt),
                show(lat),
            );
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
    eprintln!("net_bench needs the `net` feature (on by default)");
}
