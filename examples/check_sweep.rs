//! Measures the exhaustive checker on every uniform bound and safe start of LMUTIN and
//! LMUTEX on one topology: one line per instance (verdict, states, seconds, states/s).
//!
//! `cargo run --release --example check_sweep -- TOPOLOGY [PAIRS] [MAX_STATES|-] [THREADS]
//! [SEARCH] [ONLY] [MAX_GIB]`, e.g. `-- ring:4 1 - 2`; SEARCH is reduced (default) or full;
//! ONLY keeps the instances whose name contains it (e.g. `lmutin` or `l=1`); MAX_GIB is each
//! check's memory budget in GiB (default: none; THREADS checks run at once).

use lkcs::{
    algo::lmutin::{lmutex_instance, lmutex_system, Lmutin, LmutinRules},
    check,
    check::{CheckConfig, Search},
    Topology,
};
use std::sync::Mutex;
use std::time::Instant;

/// The rules of errata lmutin-1 to lmutin-4, without lmutin-5 (its messages multiply the
/// states; see docs/checker.md): the rules this sweep's figures were measured with.
const PAPER: LmutinRules = LmutinRules {
    hold_and_wait: true,
    ..LmutinRules::CORRECTED
};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let spec = args.first().map_or("ring:4", String::as_str);
    let pairs: usize = args.get(1).map_or(1, |a| a.parse().unwrap());
    let max_states = args.get(2).and_then(|a| a.parse().ok());
    let threads: usize = args.get(3).map_or(2, |a| a.parse().unwrap());
    let search = match args.get(4).map(String::as_str) {
        Some("full") => Search::Full,
        _ => Search::Reduced,
    };
    let only = args.get(5).cloned().unwrap_or_default();
    let max_memory = args
        .get(6)
        .and_then(|a| a.parse::<f64>().ok())
        .map(|gib| (gib * f64::from(1u32 << 30)) as usize);
    let t = Topology::parse(spec).unwrap();
    let n = t.len();
    let min_degree = t.processes().map(|p| t.degree(p)).min().unwrap_or(0);
    let mut jobs = Vec::new();
    for l in 0..=min_degree {
        let inst = Lmutin::instance(&t, &vec![l; n]).unwrap();
        for init in inst.safe_configurations().unwrap() {
            jobs.push((false, l, init));
        }
    }
    for k in 1..=min_degree + 1 {
        let inst = lmutex_instance(&t, &vec![k; n]).unwrap();
        for init in inst.safe_configurations().unwrap() {
            jobs.push((true, k, init));
        }
    }
    let name = |(lmutex, b, init): &(bool, usize, Vec<lkcs::cs::CsState>)| {
        let alg = if *lmutex { "lmutex k" } else { "lmutin l" };
        format!("{alg}={b} {}", lkcs::format_initial(init))
    };
    jobs.retain(|j| name(j).contains(&only));
    let count = jobs.len();
    let jobs = Mutex::new(jobs.into_iter());
    let total = Mutex::new((0usize, 0usize, 0.0f64));
    let cfg = CheckConfig {
        pairs,
        max_states,
        max_memory,
        search,
        ..CheckConfig::default()
    };
    let start = Instant::now();
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let Some(job) = jobs.lock().unwrap().next() else {
                    break;
                };
                let (lmutex, b, init) = &job;
                let cpu0 = thread_cpu_seconds();
                let r = if *lmutex {
                    let (inst, procs) = lmutex_system(&t, &vec![*b; n], init, PAPER).unwrap();
                    check::check(&inst, procs, &cfg)
                } else {
                    let (inst, procs) = Lmutin::system(&t, &vec![*b; n], init, PAPER).unwrap();
                    check::check(&inst, procs, &cfg)
                };
                let cpu = thread_cpu_seconds() - cpu0;
                println!(
                    "{spec} {:<24} {:?}{} {:>10} states {:>8.2} s {:>8.2} s cpu {:>10.0}/s cpu",
                    name(&job),
                    r.verdict,
                    r.stopped_by.map_or(String::new(), |l| format!(" by {l:?}")),
                    r.states,
                    r.elapsed.as_secs_f64(),
                    cpu,
                    r.states as f64 / cpu.max(0.01)
                );
                let mut t = total.lock().unwrap();
                t.0 += r.states;
                t.1 += usize::from(r.verdict == lkcs::check::Verdict::Proved);
                t.2 += cpu;
            });
        }
    });
    let (states, proved, cpu) = total.into_inner().unwrap();
    println!(
        "{spec}: {count} instances, {proved} proved, {states} states, {:.1} s wall, {cpu:.1} s cpu",
        start.elapsed().as_secs_f64()
    );
}

/// This thread's CPU time (user + system) in seconds, from /proc (clock ticks of 10 ms);
/// the machine may be shared, so wall time alone misleads.
fn thread_cpu_seconds() -> f64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // the fields after the command name (which ends with the last ')')
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the name
    (ticks(11) + ticks(12)) / 100.0
}
