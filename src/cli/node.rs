//! `lkcs node`: one member of a cluster ([`lkcs::net::Cluster`]) in this process, driven by
//! a line protocol on stdin/stdout or by the cycle workload.

use clap::Args;
use lkcs::net::{
    Cluster, EntryGate, ExitGate, LeaseWatch, NodeError, NodeHandle, NodeStatus, Observer,
};
use lkcs::{
    cs::{CsState, Sequence},
    ProcessId, Stats, Waiting,
};
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};

/// The most pairs `--pairs` takes.
const MAX_PAIRS: usize = 1_000_000_000;

/// The longest `--start-timeout` or `--rejoin-timeout`, in seconds (about 11.6 days).
const MAX_SECONDS: f64 = 1e6;

/// Why `value` cannot be the seconds of `option`: too large, or not positive (NaN included).
fn seconds_problem(option: &str, value: f64) -> Option<String> {
    crate::amount_problem(option, value, MAX_SECONDS, MAX_SECONDS, "seconds")
}

/// Options of `lkcs node`.
#[derive(Args)]
pub struct NodeArgs {
    /// The cluster file (TOML: members, their keys, the quota; `lkcs cluster init` writes
    /// one).
    #[arg(long, value_name = "FILE")]
    cluster: PathBuf,
    /// This node's member id in the cluster file.
    #[arg(long, value_name = "I")]
    id: usize,
    /// Listen here instead of at the member's address in the cluster file (e.g.
    /// 0.0.0.0:7411 behind an address translation).
    #[arg(long, value_name = "ADDR")]
    bind: Option<std::net::SocketAddr>,
    /// cycle: make --pairs exit/entry pairs, keep cycling until every member has made its
    /// own, print the report and exit. Without it, the node serves the line protocol on
    /// stdin/stdout.
    #[arg(long, value_parser = ["cycle"])]
    workload: Option<String>,
    /// Pairs the cycle workload makes.
    #[arg(long, default_value_t = 1)]
    pairs: usize,
    /// Print the cycle workload's report as one JSON object.
    #[arg(long)]
    json: bool,
    /// The cycle workload waits this long for every neighbour to connect before it starts.
    #[arg(long, value_name = "SECONDS", default_value_t = 60.0)]
    start_timeout: f64,
    /// With views: how long an evicted cycle-workload member waits for a view to have it
    /// back before it exits 1. Default: two eviction delays, plus the lease, plus 2 s (the
    /// eviction installs, the rejoin commits).
    #[arg(long, value_name = "SECONDS")]
    rejoin_timeout: Option<f64>,
    /// Log every link event to stderr (as --log-level debug).
    #[arg(long)]
    verbose: bool,
    /// The log filter: error, warn, info, debug, trace, or a `tracing` filter (e.g.
    /// `lkcs::net=debug`). Without it, RUST_LOG when set, else `info,openraft=warn`.
    #[arg(long, value_name = "LEVEL")]
    log_level: Option<String>,
    /// Accept the example keys published in examples/ (and skip the checks of their
    /// files' modes, which git does not keep): local tests only, anyone can impersonate
    /// their members.
    #[arg(long)]
    allow_example_keys: bool,
    /// Report every change of the member's state, and every new end of its lease, to a
    /// monitor at ADDR and wait for its answer before the change can be seen by anyone
    /// (tests; see docs/net.md).
    #[arg(long, value_name = "ADDR")]
    monitor: Option<std::net::SocketAddr>,
    /// Serve the node's metrics as Prometheus text at http://ADDR/metrics
    /// (docs/operations.md lists them).
    #[arg(long, value_name = "ADDR")]
    metrics: Option<std::net::SocketAddr>,
}

/// The long help: the cluster file and the line protocol.
pub const LONG_ABOUT: &str = "Run one member of a cluster: its CS object over authenticated, \
encrypted, reliable TCP links to its neighbours (the Noise protocol; one key pair per member, \
written by `lkcs cluster init`).

Without --workload the node serves a line protocol on stdin/stdout, one command per line:
  enter [TIMEOUT_MS]   become active (blocks while entering would break a bound)
  exit [TIMEOUT_MS]    become inactive (blocks while leaving would break a bound)
  state                active, inactive, entering, exiting or evicted
  status               peers, unreachable peers, messages sent, view, view members
  quit                 stop the node (also at the end of stdin)
Each answer is one line: `ok`, `ok VALUE`, or `error: ...` (a timed-out move keeps running:
the next call of the same kind waits for it). A call that waits on a peer silent beyond the
peer timeout answers `error: P2 is unreachable ...`; once the member is evicted, every call
answers `error: this member was evicted ...`.

Views (docs/fault-tolerance.md; off with `[timing] evict_after_ms = 0`): a member
unreachable for evict_after_ms (default 5000) is evicted by the majority and its slot
reclaimed; a member that no majority answers for lease_ms (default 3000) fences.

With --workload cycle --pairs P the member makes P exit/entry pairs, keeps cycling until
every member has made its own (an evicted member counts as done), prints its report (the
fields of `lkcs simulate`, waiting times in ms) and exits 0. An evicted member rejoins by
itself and makes its pairs again; it exits 1 with an `error:` line when no view has it back
within --rejoin-timeout seconds (default 2 evict_after + lease_ms + 2 s), or, without views,
naming the peer when a peer becomes unreachable first.

Logs go to stderr through `tracing`, one line per event with a timestamp and a level
(--log-level, or RUST_LOG).

Exit codes: 0 done; 1 a peer became unreachable (or a neighbour never connected); 2 bad
input, including a private key or cluster file that group or others may read, and an
example key without --allow-example-keys (the line names the file).";

/// The cluster file's format, after the options.
pub const FILE_HELP: &str = "Cluster file (TOML; `lkcs cluster init` writes one):
  epoch = 1                       # bump to restart the whole cluster
  [quota]                         # the options of `lkcs simulate`
  algorithm = \"gcs\"
  topology = \"complete:3\"         # default complete:N over the members
  l = 1
  k = 2
  [members.0]
  address = \"127.0.0.1:7411\"
  public_key = \"64 hex digits\"    # pinned: member 0 is whoever holds its private key
  private_key = \"keys/0.key\"      # relative to the file; needed on member 0's host only
  # [members.1], [members.2] alike
  [timing]                        # optional, milliseconds
  peer_timeout_ms = 3000
  evict_after_ms = 5000           # 0: no views
  lease_ms = 3000
  lease_heartbeat_ms = 500
  [storage]                       # optional: the view log on disk, resumed at a restart
  dir = \"state\"                   # relative to the file; member I in state/member-I/epoch-E
The members refuse each other unless each holds the private key of the public key pinned for
its id, their quotas are the same (a hash of its canonical text is compared at the
handshake) and they run the same epoch.";

/// Runs `lkcs node`.
pub fn run(args: &NodeArgs) -> ExitCode {
    if let Err(e) = init_logs(args) {
        warn!("error: {e}");
        return ExitCode::from(2);
    }
    let mut cluster = match Cluster::load(&args.cluster) {
        Ok(c) => c,
        Err(e) => {
            return crate::refuse(&e.problems);
        }
    };
    cluster.allow_example_keys(args.allow_example_keys);
    let mut problems = Vec::new();
    if args.id >= cluster.len() {
        problems.push(format!(
            "--id {}: the cluster has members 0..{}",
            args.id,
            cluster.len() - 1
        ));
    }
    if args.pairs == 0 || args.pairs > MAX_PAIRS {
        problems.push(format!("--pairs must be in 1..={MAX_PAIRS}"));
    }
    problems.extend(seconds_problem("--start-timeout", args.start_timeout));
    if let Some(t) = args.rejoin_timeout {
        if let Some(p) = seconds_problem("--rejoin-timeout", t) {
            problems.push(p);
        } else if args.workload.is_none() {
            problems.push("--rejoin-timeout applies to --workload cycle".into());
        } else if cluster.views().is_none() {
            problems.push(
                "--rejoin-timeout applies to clusters with views (this one has [timing] evict_after_ms = 0)"
                    .into(),
            );
        }
    }
    if args.workload.is_none() && args.json {
        problems.push("--json applies to --workload cycle".into());
    }
    if args.id < cluster.len() {
        // the key and the files' modes, before anything listens
        if let Err(e) = cluster.member_key(ProcessId(args.id as u32)) {
            problems.push(e.to_string());
        }
    }
    if !problems.is_empty() {
        return crate::refuse(&problems);
    }
    // one process per member on its state folder, until this process ends
    let _folder_lock = match lock_state_folder(&cluster, ProcessId(args.id as u32)) {
        Ok(lock) => lock,
        Err(e) => {
            warn!("error: {e}");
            return ExitCode::from(2);
        }
    };
    if cluster.views().is_some() && cluster.storage_dir(ProcessId(0)).is_none() {
        // docs/fault-tolerance.md, "The view log on disk"
        tracing::warn!(
            "{}: the view log is kept in memory (no [storage]): a majority of members \
             restarting at once can start a view of their own; add `[storage]` with \
             `dir = \"state\"`",
            args.cluster.display()
        );
    }
    // one thread runs the node's tasks and its workload or line protocol: a member's
    // handlers run one at a time anyway, and a hand-off between worker threads would cost a
    // wake-up on every message
    let rt = match super::current_thread_runtime() {
        Ok(rt) => rt,
        Err(e) => {
            warn!("{e}");
            return ExitCode::from(1);
        }
    };
    let code = rt.block_on(node(&cluster, args));
    // the links' tasks end with the runtime; nothing waits for them
    rt.shutdown_timeout(Duration::from_millis(100));
    code
}

/// The name of the lock file in a member's state folder.
const FOLDER_LOCK: &str = "lock";

/// Takes the lock of member `me`'s state folder (`[storage] dir`/member-`me`/`lock`, an
/// advisory lock on the file, which the kernel drops with the process however it ends): two
/// processes of one member on one folder would both write its view log, so the second is
/// refused, naming the folder. `None` when the cluster keeps no state on disk.
fn lock_state_folder(cluster: &Cluster, me: ProcessId) -> Result<Option<std::fs::File>, String> {
    let Some(member_dir) = cluster.storage_dir(me) else {
        return Ok(None);
    };
    // the lock covers every epoch of the member: storage_dir is member-I/epoch-E
    let member_dir = member_dir.parent().unwrap_or(&member_dir).to_path_buf();
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::DirBuilderExt;
        builder.mode(0o700);
    }
    builder.create(&member_dir).map_err(|e| {
        format!(
            "{}: cannot create the state folder: {e}",
            member_dir.display()
        )
    })?;
    let path = member_dir.join(FOLDER_LOCK);
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(|e| {
            format!(
                "{}: cannot open the state folder's lock: {e}",
                path.display()
            )
        })?;
    match file.try_lock() {
        Ok(()) => {
            tracing::info!("{}: taken by this process", path.display());
            Ok(Some(file))
        }
        Err(std::fs::TryLockError::WouldBlock) => Err(format!(
            "{}: another process of member {} holds its state folder (two would write one \
             view log): stop that process first",
            path.display(),
            me.index()
        )),
        Err(std::fs::TryLockError::Error(e)) => Err(format!(
            "{}: cannot lock the state folder: {e}",
            path.display()
        )),
    }
}

/// Sends the `tracing` events (the links' log) to stderr: a timestamp, a level, the member
/// and its view (`member=1 view=3`), the event.
fn init_logs(args: &NodeArgs) -> Result<(), String> {
    use tracing_subscriber::EnvFilter;
    let filter = match (&args.log_level, args.verbose) {
        (Some(level), _) => {
            EnvFilter::try_new(level).map_err(|e| format!("--log-level `{level}`: {e}"))?
        }
        (None, true) => EnvFilter::new("debug"),
        // the view log's Raft logs every election and vote at info: warnings only
        (None, false) => EnvFilter::try_from_default_env()
            .unwrap_or_else(|_| EnvFilter::new("info,openraft=warn")),
    };
    // a second subscriber (never, in the binary) keeps the first
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
    Ok(())
}

/// The test monitor's side in the node: a blocking round trip per state change, made inside
/// the handler that changed the state, before its messages leave and before the call is
/// answered, and one per new end of the lease, before the member relies on it (`I lease
/// MICROS`, the end in microseconds since the Unix epoch; see docs/net.md).
fn monitor_observer(addr: std::net::SocketAddr) -> Result<(Observer, LeaseWatch), String> {
    use std::io::{BufRead, BufReader, Write};
    let stream = std::net::TcpStream::connect(addr)
        .map_err(|e| format!("cannot reach the monitor at {addr}: {e}"))?;
    let _ = stream.set_nodelay(true);
    let reader = BufReader::new(
        stream
            .try_clone()
            .map_err(|e| format!("monitor at {addr}: {e}"))?,
    );
    let conn = Arc::new(Mutex::new((stream, reader)));
    let report = move |line: String| {
        let mut guard = conn.lock().unwrap_or_else(|p| p.into_inner());
        let (stream, reader) = &mut *guard;
        let mut answer = String::new();
        let ok = writeln!(stream, "{line}").is_ok()
            && reader.read_line(&mut answer).is_ok()
            && answer.trim() == "ok";
        if !ok {
            warn!("error: the monitor at {addr} did not answer `ok` ({answer:?}): stopping");
            std::process::exit(1);
        }
    };
    let states = report.clone();
    let observer: Observer = Arc::new(move |me: ProcessId, state: CsState, token| {
        let word = match state {
            CsState::InCs => "in",
            CsState::OutCs => "out",
        };
        match token {
            Some(t) => states(format!("{} {word} {t}", me.index())),
            None => states(format!("{} {word}", me.index())),
        }
    });
    let lease = LeaseWatch(Arc::new(move |me: ProcessId, end: tokio::time::Instant| {
        // the same host's clocks: the end on the wall clock, for the monitor to compare
        let left = end.saturating_duration_since(tokio::time::Instant::now());
        let wall = std::time::SystemTime::now() + left;
        let micros = wall
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros());
        report(format!("{} lease {micros}", me.index()));
    }));
    Ok((observer, lease))
}

async fn node(cluster: &Cluster, args: &NodeArgs) -> ExitCode {
    let me = ProcessId(args.id as u32);
    let (addr, addrs) = match args.bind {
        Some(a) => (a.to_string(), vec![a]),
        None => {
            let address = cluster.address(me).expect("id checked");
            match address.lookup().await {
                Ok(addrs) => (address.to_string(), addrs),
                Err(e) => {
                    warn!("error: {me} cannot listen: {e}");
                    return ExitCode::from(1);
                }
            }
        }
    };
    let listener = match tokio::net::TcpListener::bind(&addrs[..]).await {
        Ok(l) => l,
        Err(e) => {
            warn!("error: {me} cannot listen on {addr}: {e}");
            return ExitCode::from(1);
        }
    };
    let (observer, lease) = match args.monitor.map(monitor_observer).transpose() {
        Ok(Some((o, l))) => (Some(o), Some(l)),
        Ok(None) => (None, None),
        Err(e) => {
            warn!("error: {e}");
            return ExitCode::from(1);
        }
    };
    let metrics = match args.metrics {
        None => None,
        Some(addr) => match super::metrics::bind(addr).await {
            Ok(l) => Some(l),
            Err(e) => {
                warn!("error: {e}");
                return ExitCode::from(1);
            }
        },
    };
    // each line names the member and the view it was in
    let view = Arc::new(std::sync::atomic::AtomicU64::new(u64::MAX));
    let log = lkcs::net::tracing_logger_with_view(view.clone());
    let handle = match cluster.spawn_watched(me, listener, observer, lease, log) {
        Ok(h) => h,
        Err(e) => {
            warn!("error: {e}");
            return ExitCode::from(1);
        }
    };
    lkcs::net::follow_view(&handle, view);
    if let Some(listener) = metrics {
        super::metrics::serve(listener, handle.clone());
    }
    let work = async {
        match args.workload {
            Some(_) => cycle(cluster, &handle, args).await,
            None => serve(&handle).await,
        }
    };
    let code = tokio::select! {
        code = work => code,
        () = terminated() => leave(cluster, &handle).await,
    };
    handle.shutdown();
    code
}

/// Resolves when the process gets SIGTERM (never elsewhere than on Unix).
async fn terminated() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                term.recv().await;
            }
            Err(e) => {
                warn!("SIGTERM will not leave the cluster gracefully: {e}");
                std::future::pending::<()>().await;
            }
        }
    }
    #[cfg(not(unix))]
    std::future::pending::<()>().await;
}

/// SIGTERM: a graceful leave (exit first if active, then out of the view), bounded by twice
/// the eviction delay; exit 0 once the member left, 1 (naming why) if it could not.
async fn leave(cluster: &Cluster, h: &NodeHandle) -> ExitCode {
    let me = h.id();
    let Some(views) = cluster.views() else {
        tracing::info!("{me}: SIGTERM: stopping (the cluster runs no views: nothing to leave)");
        return ExitCode::SUCCESS;
    };
    let bound = 2 * views.evict_after.max(Duration::from_secs(1));
    tracing::info!("{me}: SIGTERM: leaving the cluster");
    match tokio::time::timeout(bound, h.leave()).await {
        Ok(Ok(())) => {
            tracing::info!("{me}: left the cluster");
            ExitCode::SUCCESS
        }
        Ok(Err(e)) => {
            warn!(
                "error: {me}: SIGTERM: could not leave the cluster: {}",
                describe(e)
            );
            ExitCode::from(1)
        }
        Err(_) => {
            warn!(
                "error: {me}: SIGTERM: no view without it installed within {} ms; stopping (the others evict it)",
                bound.as_millis()
            );
            ExitCode::from(1)
        }
    }
}

/// The line protocol on stdin/stdout.
async fn serve(h: &NodeHandle) -> ExitCode {
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    let mut out = tokio::io::stdout();
    loop {
        let line = match lines.next_line().await {
            Ok(Some(l)) => l,
            Ok(None) => return ExitCode::SUCCESS,
            Err(e) => {
                warn!("error: stdin: {e}");
                return ExitCode::from(1);
            }
        };
        let words: Vec<&str> = line.split_whitespace().collect();
        let answer = match words.as_slice() {
            [] => continue,
            ["quit"] => {
                let _ = out.write_all(b"ok\n").await;
                let _ = out.flush().await;
                return ExitCode::SUCCESS;
            }
            ["state"] => format!("ok {}", h.state_name()),
            ["status"] => {
                let s = h.status();
                let (view, members) = match &s.view {
                    Some(v) => (v.number.to_string(), ids(v.members.iter())),
                    None => ("-".into(), "-".into()),
                };
                let gate = match s.exit_gate {
                    ExitGate::Open => "open",
                    ExitGate::UntilRestored => "restore",
                    ExitGate::UntilRejoin => "rejoin",
                };
                let entry_gate = match s.entry_gate {
                    EntryGate::Open => "open",
                    EntryGate::UntilRestored => "restore",
                };
                format!(
                    "ok peers={} unreachable={} sent={} view={view} members={members} gate={gate} \
                     entry_gate={entry_gate}",
                    ids(s.peers.iter()),
                    ids(s.unreachable.iter()),
                    s.sent
                )
            }
            [cmd @ ("enter" | "exit"), rest @ ..] if rest.len() <= 1 => {
                let timeout = match rest.first().map(|t| t.parse::<u64>()) {
                    None => Ok(None),
                    Some(Ok(ms)) => Ok(Some(Duration::from_millis(ms))),
                    Some(Err(_)) => Err(format!(
                        "error: `{}` is not a timeout in milliseconds",
                        rest[0]
                    )),
                };
                match timeout {
                    Err(e) => e,
                    Ok(timeout) => {
                        let target = if *cmd == "enter" {
                            CsState::InCs
                        } else {
                            CsState::OutCs
                        };
                        match reach(h, target, timeout).await {
                            // an entry's answer carries its fencing token
                            Ok(()) => match (target, h.token()) {
                                (CsState::InCs, Some(t)) => format!("ok token={t}"),
                                // fenced (or stopped) between the entry and its answer
                                (CsState::InCs, None) => match h.status().fenced {
                                    Some(f) => format!(
                                        "error: {}",
                                        describe(NodeError::Evicted { view: f.view })
                                    ),
                                    None => "error: the node stopped".to_string(),
                                },
                                (CsState::OutCs, _) => "ok".to_string(),
                            },
                            Err(e) => format!("error: {e}"),
                        }
                    }
                }
            }
            _ => format!(
                "error: unknown command `{}`: enter [MS], exit [MS], state, status or quit",
                line.trim()
            ),
        };
        if out
            .write_all(format!("{answer}\n").as_bytes())
            .await
            .is_err()
            || out.flush().await.is_err()
        {
            return ExitCode::SUCCESS;
        }
    }
}

fn ids<'a>(ps: impl Iterator<Item = &'a ProcessId>) -> String {
    let v: Vec<String> = ps.map(|p| p.index().to_string()).collect();
    if v.is_empty() {
        "-".into()
    } else {
        v.join(",")
    }
}

/// Moves the member to `target` (idempotent, as `Member` calls are), within `timeout`.
async fn reach(h: &NodeHandle, target: CsState, timeout: Option<Duration>) -> Result<(), String> {
    let call = async { h.reach(target).await.map_err(describe) };
    match timeout {
        None => call.await,
        Some(t) => match tokio::time::timeout(t, call).await {
            Ok(r) => r,
            Err(_) => Err(format!(
                "timed out after {} ms; the move keeps running",
                t.as_millis()
            )),
        },
    }
}

fn describe(e: NodeError) -> String {
    e.to_string()
}

/// What the cycle workload measured.
struct Run {
    pairs_completed: usize,
    entry_ms: Vec<f64>,
    exit_ms: Vec<f64>,
    /// Messages sent at the end of each completed pair.
    sent_at_pair: Vec<u64>,
    remote_at_pair: Vec<u64>,
    elapsed: Duration,
    status: NodeStatus,
}

enum Stop {
    /// A peer became unreachable (without views).
    Unreachable(ProcessId),
    /// This member fenced (evicted, or its lease ran out).
    Fenced(lkcs::net::Fenced),
    /// This member fenced, and no view had it back within the time given.
    NotBack(lkcs::net::Fenced, Duration),
    Stopped,
}

async fn cycle(cluster: &Cluster, h: &NodeHandle, args: &NodeArgs) -> ExitCode {
    let me = h.id();
    let start_timeout = Duration::from_secs_f64(args.start_timeout);
    let connected =
        tokio::time::timeout(start_timeout, h.wait_status(|s| missing(s).is_empty())).await;
    match connected {
        Ok(Ok(_)) => {}
        Ok(Err(_)) => {
            match h.status().fenced {
                Some(f) => warn!(
                    "error: {me}: evicted: it fenced in view {} before it started ({})",
                    f.view, f.why
                ),
                None => warn!("error: {me}: the node stopped"),
            }
            return ExitCode::from(1);
        }
        Err(_) => {
            let missing: Vec<String> = missing(&h.status()).iter().map(|p| p.to_string()).collect();
            warn!(
                "error: {me}: {} never connected within {} s",
                missing.join(", "),
                args.start_timeout
            );
            return ExitCode::from(1);
        }
    }
    // an evicted member rejoins by itself: it waits for that, long enough for the eviction
    // to install and the rejoin to commit (the others may have finished meanwhile)
    let rejoin_within = cluster.views().map(|t| match args.rejoin_timeout {
        Some(secs) => Duration::from_secs_f64(secs),
        None => 2 * t.evict_after + t.lease + Duration::from_secs(2),
    });
    let run = match drive(h, args.pairs, rejoin_within).await {
        Ok(run) => run,
        Err(Stop::Unreachable(p)) => {
            warn!(
                "error: {me}: {p} is unreachable (silent for {} ms) before every member finished",
                cluster.timing().peer_timeout.as_millis()
            );
            return ExitCode::from(1);
        }
        Err(Stop::Fenced(f)) => {
            warn!(
                "error: {me}: evicted: it fenced in view {} before every member finished ({})",
                f.view, f.why
            );
            return ExitCode::from(1);
        }
        Err(Stop::NotBack(f, within)) => {
            warn!(
                "error: {me}: evicted: it fenced in view {} ({}) and no view had it back within {} ms",
                f.view,
                f.why,
                within.as_millis()
            );
            return ExitCode::from(1);
        }
        Err(Stop::Stopped) => {
            warn!("error: {me}: the node stopped");
            return ExitCode::from(1);
        }
    };
    // the last messages (the byes) stay in the links' buffers, resent after a reset, only
    // while this process lives: it ends once each peer acknowledged them, or cannot
    let within = 2 * cluster.timing().peer_timeout;
    let unsettled = h.drain(within).await;
    if !unsettled.is_empty() {
        let names: Vec<String> = unsettled.iter().map(|p| p.to_string()).collect();
        warn!(
            "{me}: no acknowledgement of the end of the run from {} within {} ms",
            names.join(", "),
            within.as_millis()
        );
    }
    report(cluster, me, args, &run);
    ExitCode::SUCCESS
}

/// The neighbours the cycle workload still waits for before it starts: those that never
/// connected, except the ones the current view left out (evicted before they came).
fn missing(s: &NodeStatus) -> Vec<ProcessId> {
    let in_view = |p: &ProcessId| s.view.as_ref().is_none_or(|v| v.members.contains(p));
    s.peers
        .iter()
        .filter(|p| in_view(p) && !s.connected.contains(p))
        .copied()
        .collect()
}

/// Cycles pairs until every member finished, then waits until no neighbour needs this node.
/// With views (`rejoin_within`), an unreachable peer fails no run: the call is made again
/// until the view change resolves it (the peer comes back, or it is evicted); when this
/// member is evicted, it waits (up to `rejoin_within`) until a view has it back, then makes
/// its pairs again, as a member the view just admitted (the report counts those); and when
/// a member comes back into the view after this one finished, the run reopens and this one
/// cycles again until the newcomer has made its pairs.
async fn drive(h: &NodeHandle, pairs: usize, rejoin_within: Option<Duration>) -> Result<Run, Stop> {
    let views = rejoin_within.is_some();
    let t0 = Instant::now();
    let mut run = Run {
        pairs_completed: 0,
        entry_ms: Vec::new(),
        exit_ms: Vec::new(),
        sent_at_pair: Vec::new(),
        remote_at_pair: Vec::new(),
        elapsed: Duration::ZERO,
        status: h.status(),
    };
    // the message counts the report's pairs start from (moved on a rejoin)
    let mut base = (0u64, 0u64);
    let mut moves = 0usize;
    let mut finished = false;
    let failed = |s: &NodeStatus| !views && !s.all_finished && !s.unreachable.is_empty();
    // the run is over for this member: a fenced member's view of the end does not count
    let done = |s: &NodeStatus| s.all_finished && s.fenced.is_none();

    loop {
        loop {
            let seq = Sequence::leaving(h.state());
            let began = Instant::now();
            let call = async {
                match seq {
                    Sequence::Entry => h.enter().await,
                    Sequence::Exit => h.exit().await,
                }
            };
            let outcome = tokio::select! {
                r = call => Some(r),
                s = h.wait_status(|s| done(s) || failed(s)) => match s {
                    Ok(s) if done(&s) => None,
                    Ok(s) => return Err(Stop::Unreachable(*s.unreachable.iter().next().expect("failed"))),
                    Err(_) => return Err(evicted_or_stopped(h)),
                },
            };
            let Some(result) = outcome else { break };
            match result {
                Ok(()) => {}
                Err(NodeError::PeerUnreachable(p)) => {
                    if done(&h.status()) {
                        break;
                    }
                    if !views {
                        return Err(Stop::Unreachable(p));
                    }
                    // the move keeps running: call again once the links had a moment
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    continue;
                }
                Err(NodeError::Evicted { .. }) if rejoin_within.is_some() => {
                    let within = rejoin_within.expect("checked");
                    if let Some(f) = h.status().fenced {
                        tracing::info!(
                            "{}: evicted in view {} ({}): waiting to rejoin",
                            h.id(),
                            f.view,
                            f.why
                        );
                        let back = h.wait_status(|s| s.fenced.is_none() || s.left);
                        match tokio::time::timeout(within, back).await {
                            Ok(Ok(s)) if !s.left => {}
                            Ok(_) => return Err(evicted_or_stopped(h)),
                            Err(_) => return Err(Stop::NotBack(f, within)),
                        }
                    }
                    // back in a view: its pairs start again, and so does the report
                    tracing::info!("{}: rejoined: it makes its pairs again", h.id());
                    moves = 0;
                    finished = false;
                    run.pairs_completed = 0;
                    run.entry_ms.clear();
                    run.exit_ms.clear();
                    run.sent_at_pair.clear();
                    run.remote_at_pair.clear();
                    let s = h.status();
                    base = (s.sent, s.sent - s.sent_to_self);
                    continue;
                }
                Err(_) => return Err(evicted_or_stopped(h)),
            }
            let ms = began.elapsed().as_secs_f64() * 1e3;
            match seq {
                Sequence::Entry => run.entry_ms.push(ms),
                Sequence::Exit => run.exit_ms.push(ms),
            }
            moves += 1;
            if moves.is_multiple_of(2) {
                run.pairs_completed += 1;
                let s = h.status();
                run.sent_at_pair.push(s.sent - base.0);
                run.remote_at_pair.push(s.sent - s.sent_to_self - base.1);
            }
            if !finished && moves == 2 * pairs {
                finished = true;
                h.finish().map_err(|_| evicted_or_stopped(h))?;
            }
            if done(&h.status()) {
                break;
            }
        }
        run.elapsed = t0.elapsed();
        // every member finished: wait until each neighbour said bye (or went silent), unless
        // a member back in the view reopens the run (then cycle again until it made its
        // pairs). A fence now (the members that left took the lease's majority with them)
        // ends nothing that was still to do.
        match h
            .wait_status(|s| s.quiet || !s.all_finished || s.fenced.is_some())
            .await
        {
            Ok(s) if s.all_finished => {
                run.status = s;
                break;
            }
            Ok(_) => continue,
            Err(_) if h.status().all_finished => {
                run.status = h.status();
                break;
            }
            Err(_) => return Err(evicted_or_stopped(h)),
        }
    }
    Ok(run)
}

/// Why the node stopped: it fenced (its status says why), or it stopped.
fn evicted_or_stopped(h: &NodeHandle) -> Stop {
    match h.status().fenced {
        Some(f) => Stop::Fenced(f),
        None => Stop::Stopped,
    }
}

/// Per-pair differences of a running count.
fn per_pair(at: &[u64]) -> Stats {
    let mut prev = 0;
    Stats::of(at.iter().map(|&c| {
        let d = c - prev;
        prev = c;
        d as f64
    }))
}

fn report(cluster: &Cluster, me: ProcessId, args: &NodeArgs, run: &Run) {
    let spec = cluster.spec();
    let mean = |v: &[f64]| {
        if v.is_empty() {
            0.0
        } else {
            v.iter().sum::<f64>() / v.len() as f64
        }
    };
    let max = |v: &[f64]| v.iter().copied().fold(0.0, f64::max);
    let waiting = Waiting {
        exit_max: max(&run.exit_ms),
        exit_mean: mean(&run.exit_ms),
        entry_max: max(&run.entry_ms),
        entry_mean: mean(&run.entry_ms),
    };
    let mpp = per_pair(&run.sent_at_pair);
    let remote = per_pair(&run.remote_at_pair);
    let messages = run.sent_at_pair.last().copied().unwrap_or(0);
    let links: serde_json::Map<String, serde_json::Value> = run
        .status
        .links
        .iter()
        .map(|(p, t)| {
            (
                p.index().to_string(),
                serde_json::json!({
                    "sent": t.sent.count,
                    "sent_hash": format!("{:016x}", t.sent.hash),
                    "received": t.received.count,
                    "received_hash": format!("{:016x}", t.received.hash),
                }),
            )
        })
        .collect();
    if args.json {
        let v = serde_json::json!({
            "node": me.index(),
            "processes": cluster.len(),
            "algorithm": spec.algorithm.name(),
            "topology": spec.topology.name(),
            "workload": "cycle",
            "pairs_requested": args.pairs,
            "pairs_completed": run.pairs_completed,
            "messages": messages,
            "messages_per_pair": mpp,
            "remote_messages_per_pair": remote,
            "waiting_time": waiting,
            "waiting_time_unit": "ms",
            "elapsed_ms": run.elapsed.as_secs_f64() * 1e3,
            "pairs_per_second": run.pairs_completed as f64 / run.elapsed.as_secs_f64().max(1e-9),
            "links": links,
        });
        say!("{v}");
    } else {
        say!(
            "{me}: {} on {}, {} members",
            spec.algorithm.name(),
            spec.topology.name(),
            cluster.len()
        );
        say!(
            "  pairs              {} completed ({} requested)",
            run.pairs_completed,
            args.pairs
        );
        say!(
            "  messages per pair  mean {:.2} (min {}, max {}); remote {:.2}",
            mpp.mean,
            mpp.min,
            mpp.max,
            remote.mean
        );
        say!(
            "  waiting (ms)       entry mean {:.3} max {:.3}; exit mean {:.3} max {:.3}",
            waiting.entry_mean,
            waiting.entry_max,
            waiting.exit_mean,
            waiting.exit_max
        );
        say!(
            "  elapsed            {:.3} s, {:.1} pairs/s",
            run.elapsed.as_secs_f64(),
            run.pairs_completed as f64 / run.elapsed.as_secs_f64().max(1e-9)
        );
    }
}
