//! The thread runtime from 16 to 1,024 processes: start time, memory and messages/s of
//! LMUTIN on a torus and (l,k)-GCS on `complete:N`, both under the global monitor, against a
//! crossbeam relay with the same thread count and message pattern.
//!
//! Run: `cargo run --release --example runtime_scaling` (prints the Markdown table of
//! docs/measurements/scale.md; about a minute on 2 cores). `-- 16 64` runs those sizes only;
//! `-- --csv FILE` also writes the rows to FILE as CSV (one header row; the figure
//! docs/figures/runtime-scaling.svg is drawn from it by `lkcs plot`, see
//! docs/measurements/scale.md).
//!
//! Every row runs in a child process of its own (this binary with `--row`), so its peak
//! memory is its own. Per row:
//! - **start**: `Runtime::start` (spawning one thread per process and its mailbox), or, for
//!   the relay, spawning its relay threads;
//! - **RSS after start**: the resident memory the started threads and mailboxes added
//!   (`VmRSS` of /proc/self/status after the start minus before it; the algorithm's objects are
//!   built before and not counted), and the **peak** RSS of the whole child (`VmHWM`);
//! - **messages/s** while every process cycles Exit/Entry pairs from its own client thread
//!   ([`cycle_pairs`], the clients spawned inside the timed part), counted by the runtime;
//!   the relay's clients run the same number of pairs with the best case's messages per pair
//!   (Request to every peer, a Grant back from each, Release: 3 per peer, the pattern of
//!   `crossbeam_relay` in benches/runtime.rs), its clients spawned inside the timed part too.
//!
//! LMUTIN: torus:√n×√n, l_i = 2, the safe start `find_safe_initial` picks; the relay's peers
//! are the closed neighbourhoods. GCS: complete:n, grid coterie, Maekawa as both `mx`,
//! l = n/4, k = 3n/4, the first n/2 processes in the CS; the relay's peers are the quorums.
//! Every row checks that the monitor saw no bound broken and that every process completed its
//! pairs. Absolute rates depend on the machine and its load; the ratios within a row are the
//! result.

use crossbeam_channel::{bounded, unbounded, Receiver, Sender};
use lkcs::{
    algo::lmutin::{Lmutin, LmutinRules},
    algo::mutin::{grid_gcs_system, quorums_of},
    cs::{CsObject, Sequence},
    quorum::Coterie,
    runtime::{cycle_pairs, Runtime, RuntimeConfig},
    Topology,
};
use std::process::Command;
use std::time::{Duration, Instant};

/// The sizes of the full run.
const SIZES: [usize; 4] = [16, 64, 256, 1024];

/// The limit on one row's pairs: a deadlock panics instead of hanging.
const LIMIT: Duration = Duration::from_secs(300);

/// What one row measured.
#[derive(Debug)]
struct Measured {
    start_ms: f64,
    start_kib: u64,
    peak_kib: u64,
    messages: u64,
    pairs: u64,
    secs: f64,
}

impl Measured {
    fn line(&self) -> String {
        format!(
            "{} {} {} {} {} {}",
            self.start_ms, self.start_kib, self.peak_kib, self.messages, self.pairs, self.secs
        )
    }

    fn parse(s: &str) -> Option<Measured> {
        let f: Vec<&str> = s.split_whitespace().collect();
        Some(Measured {
            start_ms: f.first()?.parse().ok()?,
            start_kib: f.get(1)?.parse().ok()?,
            peak_kib: f.get(2)?.parse().ok()?,
            messages: f.get(3)?.parse().ok()?,
            pairs: f.get(4)?.parse().ok()?,
            secs: f.get(5)?.parse().ok()?,
        })
    }

    fn rate(&self) -> f64 {
        self.messages as f64 / self.secs
    }
}

/// A field of /proc/self/status in KiB (0 where there is none).
fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with(field))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|v| v.parse().ok())
        })
        .unwrap_or(0)
}

/// Pairs per process of a row: enough messages to time, few enough for a minute in all.
fn pairs_for(system: &str, n: usize) -> usize {
    match system {
        "lmutin" => 50,
        _ => (4096 / n).clamp(1, 20),
    }
}

/// The side of the square torus with `n` processes.
fn side(n: usize) -> usize {
    (n as f64).sqrt().round() as usize
}

fn lmutin_topology(n: usize) -> Topology {
    let s = side(n);
    Topology::torus(s, s).expect("torus")
}

/// Each row's peers for the relay: closed neighbourhoods (LMUTIN) or quorums (GCS).
fn peers(system: &str, n: usize) -> Vec<Vec<usize>> {
    if system == "lmutin" {
        let topo = lmutin_topology(n);
        topo.processes()
            .map(|p| topo.closed(p).iter().map(|q| q.index()).collect())
            .collect()
    } else {
        let coterie = Coterie::grid(n).expect("grid coterie");
        quorums_of(&coterie)
            .iter()
            .map(|q| q.iter().map(|p| p.index()).collect())
            .collect()
    }
}

/// Starts `procs` under the monitor of `inst`, runs `pairs` pairs per process, checks the
/// monitor and the pairs.
fn run_runtime<A: CsObject>(inst: lkcs::Instance, procs: Vec<A>, pairs: usize) -> Measured {
    let before = status_kib("VmRSS:");
    let t = Instant::now();
    let mut rt = Runtime::start(
        procs,
        RuntimeConfig {
            monitor: Some(inst),
        },
    )
    .expect("start");
    let start_ms = t.elapsed().as_secs_f64() * 1e3;
    let start_kib = status_kib("VmRSS:").saturating_sub(before);
    let handles = rt.take_handles().expect("handles");
    let t = Instant::now();
    let done = cycle_pairs(&handles, pairs, Some(LIMIT)).expect("every process completes");
    let secs = t.elapsed().as_secs_f64();
    assert!(done.iter().all(|&d| d >= pairs));
    drop(handles);
    rt.shutdown();
    let report = rt.report();
    assert!(report.monitored);
    assert_eq!(report.violations, 0, "{:?}", report.first_violations);
    Measured {
        start_ms,
        start_kib,
        peak_kib: status_kib("VmHWM:"),
        messages: report.messages,
        pairs: done.iter().sum::<usize>() as u64,
        secs,
    }
}

fn lmutin_row(n: usize) -> Measured {
    let topo = lmutin_topology(n);
    let l = vec![2; n];
    let inst = Lmutin::instance(&topo, &l).expect("instance");
    let initial = inst.find_safe_initial().expect("safe initial");
    let (inst, procs) =
        Lmutin::system(&topo, &l, &initial, LmutinRules::CORRECTED).expect("system");
    run_runtime(inst, procs, pairs_for("lmutin", n))
}

fn gcs_row(n: usize) -> Measured {
    let (inst, procs) = grid_gcs_system(n, (n / 4, 3 * n / 4), n / 2).expect("gcs system");
    run_runtime(inst, procs, pairs_for("gcs", n))
}

#[derive(Clone, Copy, Debug)]
enum RelayMsg {
    Request(usize),
    Grant,
    Release,
    /// A client command: start the sequence.
    Begin(Sequence),
    Stop,
}

/// The relay: per process a relay thread owning a crossbeam mailbox, and a client thread that
/// `pairs` times asks it to exit (answered once every peer granted) and to enter (Release to
/// every peer, answered at once), waiting for each answer as a `Handle` caller does.
fn relay_row(peers: &[Vec<usize>], pairs: usize) -> Measured {
    let n = peers.len();
    let before = status_kib("VmRSS:");
    let t = Instant::now();
    let (txs, rxs): (Vec<Sender<RelayMsg>>, Vec<Receiver<RelayMsg>>) =
        (0..n).map(|_| unbounded()).unzip();
    let (done_txs, done_rxs): (Vec<Sender<()>>, Vec<Receiver<()>>) =
        (0..n).map(|_| bounded(1)).unzip();
    std::thread::scope(|s| {
        for ((i, rx), done_tx) in rxs.into_iter().enumerate().zip(done_txs) {
            let (txs, mine) = (&txs, &peers[i]);
            s.spawn(move || {
                let send = |to: usize, m: RelayMsg| {
                    let _ = txs[to].send(m);
                };
                let mut grants = 0;
                while let Ok(m) = rx.recv() {
                    match m {
                        RelayMsg::Begin(Sequence::Entry) => {
                            mine.iter().for_each(|&q| send(q, RelayMsg::Release));
                            let _ = done_tx.send(());
                        }
                        RelayMsg::Begin(Sequence::Exit) => {
                            grants = 0;
                            mine.iter().for_each(|&q| send(q, RelayMsg::Request(i)));
                        }
                        RelayMsg::Request(from) => send(from, RelayMsg::Grant),
                        RelayMsg::Grant => {
                            grants += 1;
                            if grants == mine.len() {
                                let _ = done_tx.send(());
                            }
                        }
                        RelayMsg::Release => {}
                        RelayMsg::Stop => break,
                    }
                }
            });
        }
        let start_ms = t.elapsed().as_secs_f64() * 1e3;
        let start_kib = status_kib("VmRSS:").saturating_sub(before);
        let t = Instant::now();
        std::thread::scope(|c| {
            for (me, done_rx) in txs.iter().zip(&done_rxs) {
                c.spawn(move || {
                    for _ in 0..pairs {
                        for seq in [Sequence::Exit, Sequence::Entry] {
                            let _ = me.send(RelayMsg::Begin(seq));
                            done_rx.recv().expect("the relay answers");
                        }
                    }
                });
            }
        });
        let secs = t.elapsed().as_secs_f64();
        for tx in &txs {
            let _ = tx.send(RelayMsg::Stop);
        }
        Measured {
            start_ms,
            start_kib,
            peak_kib: status_kib("VmHWM:"),
            messages: peers.iter().map(|p| 3 * p.len() * pairs).sum::<usize>() as u64,
            pairs: (n * pairs) as u64,
            secs,
        }
    })
}

/// Runs one row in this process and prints its measurements on one line.
fn row(system: &str, what: &str, n: usize) {
    let pairs = pairs_for(system, n);
    let m = match (system, what) {
        ("lmutin", "runtime") => lmutin_row(n),
        ("gcs", "runtime") => gcs_row(n),
        (_, "relay") => relay_row(&peers(system, n), pairs),
        _ => panic!("unknown row {system} {what}"),
    };
    println!("{}", m.line());
}

/// Runs one row in a child process.
fn child(system: &str, what: &str, n: usize) -> Measured {
    let exe = std::env::current_exe().expect("this binary");
    let out = Command::new(exe)
        .args(["--row", system, what, &n.to_string()])
        .output()
        .expect("child");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{system} {what} n = {n} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Measured::parse(&text).unwrap_or_else(|| panic!("unreadable row: {text}"))
}

fn mib(kib: u64) -> String {
    format!("{:.1}", kib as f64 / 1024.0)
}

/// The Markdown table's header (two lines).
const TABLE_HEADER: &str = "| system | threads | pairs/process | start ms (runtime / relay) | RSS after start MiB (runtime / relay) | peak RSS MiB (runtime / relay) | runtime msgs/pair | runtime msgs/s | relay msgs/s | runtime ÷ relay |\n|---|---|---|---|---|---|---|---|---|---|";

/// The CSV's header row.
const CSV_HEADER: &str = "system,threads,pairs_per_process,start_ms_runtime,start_ms_relay,\
     rss_after_start_mib_runtime,rss_after_start_mib_relay,peak_rss_mib_runtime,\
     peak_rss_mib_relay,runtime_msgs_per_pair,runtime_msgs_per_s,relay_msgs_per_s,\
     runtime_over_relay\n";

/// One row of the table and of the CSV: the runtime's and the relay's figures at one size,
/// each computed once; [`Row::table`] and [`Row::csv`] only format them (each with its own
/// precision).
struct Row {
    /// The system as the table names it (`LMUTIN torus:4x4`, `GCS complete:16`).
    name: String,
    /// The system as the CSV names it (`LMUTIN`, `GCS`).
    system: &'static str,
    threads: usize,
    pairs: usize,
    /// Runtime, relay.
    start_ms: [f64; 2],
    /// Runtime, relay.
    start_mib: [String; 2],
    /// Runtime, relay.
    peak_mib: [String; 2],
    msgs_per_pair: f64,
    /// Runtime, relay.
    msgs_per_s: [f64; 2],
    runtime_over_relay: f64,
}

impl Row {
    fn new(system: &str, n: usize, rt: &Measured, relay: &Measured) -> Row {
        let (name, csv_name) = if system == "lmutin" {
            (format!("LMUTIN torus:{0}x{0}", side(n)), "LMUTIN")
        } else {
            (format!("GCS complete:{n}"), "GCS")
        };
        Row {
            name,
            system: csv_name,
            threads: n,
            pairs: pairs_for(system, n),
            start_ms: [rt.start_ms, relay.start_ms],
            start_mib: [mib(rt.start_kib), mib(relay.start_kib)],
            peak_mib: [mib(rt.peak_kib), mib(relay.peak_kib)],
            msgs_per_pair: rt.messages as f64 / rt.pairs as f64,
            msgs_per_s: [rt.rate(), relay.rate()],
            runtime_over_relay: rt.rate() / relay.rate(),
        }
    }

    /// The Markdown table's line.
    fn table(&self) -> String {
        format!(
            "| {} | {} | {} | {:.1} / {:.1} | {} / {} | {} / {} | {:.1} | {:.0} K | {:.0} K | {:.2} |",
            self.name,
            self.threads,
            self.pairs,
            self.start_ms[0],
            self.start_ms[1],
            self.start_mib[0],
            self.start_mib[1],
            self.peak_mib[0],
            self.peak_mib[1],
            self.msgs_per_pair,
            self.msgs_per_s[0] / 1e3,
            self.msgs_per_s[1] / 1e3,
            self.runtime_over_relay,
        )
    }

    /// The CSV's line, with its newline.
    fn csv(&self) -> String {
        format!(
            "{},{},{},{:.2},{:.2},{},{},{},{},{:.2},{:.0},{:.0},{:.4}\n",
            self.system,
            self.threads,
            self.pairs,
            self.start_ms[0],
            self.start_ms[1],
            self.start_mib[0],
            self.start_mib[1],
            self.peak_mib[0],
            self.peak_mib[1],
            self.msgs_per_pair,
            self.msgs_per_s[0],
            self.msgs_per_s[1],
            self.runtime_over_relay,
        )
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("--row") {
        let n = args[3].parse().expect("n");
        row(&args[1], &args[2], n);
        return;
    }
    let mut csv_path = None;
    let mut sizes = Vec::new();
    let mut rest = args.iter();
    while let Some(a) = rest.next() {
        if a == "--csv" {
            csv_path = Some(rest.next().expect("--csv FILE").clone());
        } else {
            sizes.push(a.parse::<usize>().expect("a size"));
        }
    }
    if sizes.is_empty() {
        sizes = SIZES.to_vec();
    }
    let mut csv = String::from(CSV_HEADER);
    println!("{TABLE_HEADER}");
    for system in ["lmutin", "gcs"] {
        for &n in &sizes {
            let rt = child(system, "runtime", n);
            let relay = child(system, "relay", n);
            let row = Row::new(system, n, &rt, &relay);
            println!("{}", row.table());
            csv += &row.csv();
        }
    }
    if let Some(path) = csv_path {
        std::fs::write(&path, csv).unwrap_or_else(|e| panic!("cannot write {path}: {e}"));
    }
}
