//! The LKCS liveness sweep: seeded random configurations of the kinds the tests never name,
//! each run concurrently until every process completed its pairs, with one CSV row per run
//! on stdout and a summary on stderr.
//!
//! `cargo run --release --example lkcs_liveness -- COUNT [FIRST] [MAX_EVENTS] [THREADS]
//! [FAMILY]`: runs configurations FIRST..FIRST+COUNT (default FIRST 0, MAX_EVENTS 2,000,000,
//! THREADS 2, every family). Configuration `i` is drawn from a ChaCha8 stream seeded with `i`,
//! so a row is reproduced by running that index alone (`-- 1 i`), and `-- replay i` prints
//! its `lkcs simulate` command (the bounds as a JSON file next to it, `/tmp/lkcs-i.json`).
//!
//! Families (drawn per configuration unless FAMILY names one): `random` (connected G(n, p),
//! 5–60 processes, p in 0.07–0.85), `dense` (20–45 processes, p in 0.3–0.65, least-slack
//! bounds), `torus` and `grid` (3–9 by 3–9, odd shapes included), `complete` (5–20).
//! Bounds: `uniform` (one (l, k) with k − l ≥ 3 where the smallest neighbourhood allows),
//! `mixed` (per process, k_i − l_i ≥ 3 where |N_i|+1 ≥ 3) and `least` (k_i = l_i + 3); the
//! per-process bounds are drawn around a random reference configuration (l_i < |CS_i| < k_i
//! where the slack allows), so that most instances have a tight start.
//! Delays `unit` or `uniform:1:12`; leaders automatic, `all`, or the automatic leader alone;
//! concurrent workload, 3 pairs, think times 0..=4. Every configuration runs the round trip
//! (`LkcsRules::TRIP`, no leader: the leader column reads `trip`, and the command printed
//! for a row carries `--variant trip`) unless `LKCS_RULES=corrected` selects the leader
//! rules (`LkcsRules::CORRECTED`, with the drawn leader mode); with them `LKCS_LEADER`
//! (`auto`, `all` or `single`) runs every configuration with that leader mode instead.
//! `LKCS_RULES=default` runs what `lkcs simulate --algorithm lkcs` runs
//! ([`Lkcs::build_default`]: the round trip, refusing what it cannot take; the leader rules
//! are no longer a fallback, so these are the `trip` runs through the default's path).
//! `LKCS_WORKLOAD=sequential` runs the sequential workload instead of the concurrent one.
//!
//! A run is `passed` (safe, every pair completed), `failed` (a broken bound, a deadlock, or
//! the event limit reached: a stall), or `refused` (no leader or no tight start: the CLI
//! exits 2 on it; not a liveness failure).

use lkcs::{
    algo::lkcs::{Leaders, Lkcs, LkcsRules},
    sim::{simulate, Delay, SimConfig, Workload},
    Topology,
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Mutex;

struct Config {
    topology: String,
    family: &'static str,
    bounds_kind: &'static str,
    l: Vec<usize>,
    k: Vec<usize>,
    delay: &'static str,
    leader: &'static str,
    seed: u64,
}

const FAMILIES: [&str; 5] = ["random", "dense", "torus", "grid", "complete"];

fn config(i: u64, only: Option<&str>) -> Config {
    let mut rng = ChaCha8Rng::seed_from_u64(i);
    let family = match only {
        Some(f) => FAMILIES
            .iter()
            .copied()
            .find(|&x| x == f)
            .expect("a family"),
        None => FAMILIES[rng.random_range(0..FAMILIES.len())],
    };
    let topology = match family {
        "random" => format!(
            "random:{}:{:.3}:{}",
            rng.random_range(5..=60),
            rng.random_range(0.07..=0.85),
            rng.random_range(0..1_000_000)
        ),
        "dense" => format!(
            "random:{}:{:.3}:{}",
            rng.random_range(20..=45),
            rng.random_range(0.3..=0.65),
            rng.random_range(0..1_000_000)
        ),
        "torus" => format!(
            "torus:{}x{}",
            rng.random_range(3..=9),
            rng.random_range(3..=9)
        ),
        "grid" => format!(
            "grid:{}x{}",
            rng.random_range(3..=9),
            rng.random_range(3..=9)
        ),
        _ => format!("complete:{}", rng.random_range(5..=20)),
    };
    let t = Topology::parse(&topology).expect("a valid topology");
    let closed: Vec<usize> = t.processes().map(|p| t.degree(p) + 1).collect();
    let bounds_kind = if family == "dense" {
        "least"
    } else {
        ["uniform", "mixed", "least"][rng.random_range(0..3)]
    };
    let (mut l, mut k) = (Vec::new(), Vec::new());
    match bounds_kind {
        "uniform" => {
            let c = *closed.iter().min().unwrap_or(&1);
            let (lo, hi) = if c >= 3 {
                let lo = rng.random_range(0..=c - 3);
                (lo, rng.random_range(lo + 3..=c))
            } else {
                (0, c)
            };
            l = vec![lo; closed.len()];
            k = vec![hi; closed.len()];
        }
        kind => {
            // around a random reference configuration, so that a start exists: l_i < |CS_i| <
            // k_i where the slack allows (tight), l_i ≤ |CS_i| ≤ k_i everywhere
            let density = rng.random_range(0.2..=0.8);
            let inside: Vec<bool> = closed.iter().map(|_| rng.random_bool(density)).collect();
            for (p, &m) in t.processes().zip(&closed) {
                let c = t.closed(p).iter().filter(|q| inside[q.index()]).count();
                if m < 3 {
                    l.push(0);
                    k.push(m);
                    continue;
                }
                let lo = if c == 0 {
                    0
                } else {
                    rng.random_range(c.saturating_sub(2)..c).min(m - 3)
                };
                let hi = if kind == "least" {
                    lo + 3
                } else {
                    rng.random_range((lo + 3).max(c + 1).min(m)..=m)
                };
                l.push(lo);
                k.push(hi);
            }
        }
    }
    let delay = ["unit", "uniform:1:12"][rng.random_range(0..2)];
    let drawn = ["auto", "auto", "all", "single"][rng.random_range(0..4)];
    let (trip, default) = match std::env::var("LKCS_RULES").ok().as_deref() {
        None | Some("trip") => (true, false),
        Some("default") => (true, true),
        Some("corrected") => (false, false),
        Some(other) => {
            eprintln!("LKCS_RULES={other}: expected trip (also when unset), default or corrected");
            std::process::exit(2);
        }
    };
    let named = std::env::var("LKCS_LEADER").ok();
    if trip && named.is_some() {
        eprintln!(
            "LKCS_LEADER selects a leader mode of the leader rules: add LKCS_RULES=corrected"
        );
        std::process::exit(2);
    }
    let leader = match named.as_deref() {
        _ if default => "default",
        _ if trip => "trip",
        Some("auto") => "auto",
        Some("all") => "all",
        Some("single") => "single",
        _ => drawn,
    };
    Config {
        topology,
        family,
        bounds_kind,
        l,
        k,
        delay,
        leader,
        seed: rng.random_range(0..1000),
    }
}

fn list(v: &[usize]) -> String {
    v.iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(",")
}

/// The workload `LKCS_WORKLOAD` names: `sequential`, or concurrent (the default).
fn workload() -> Workload {
    match std::env::var("LKCS_WORKLOAD").ok().as_deref() {
        Some("sequential") => Workload::Sequential,
        _ => Workload::Concurrent,
    }
}

fn command(i: u64, c: &Config, max_events: u64) -> String {
    let leader = match c.leader {
        "all" => " --leader all".to_string(),
        "single" => " --printed-rule single-leader".to_string(),
        "trip" => " --variant trip".to_string(),
        "default" => String::new(),
        _ => " --leader auto".to_string(),
    };
    format!(
        "lkcs simulate --algorithm lkcs --topology {} --bounds /tmp/lkcs-{i}.json{leader} \
         --delay {} --workload {} --pairs 3 --seed {} --max-events {max_events}",
        c.topology,
        c.delay,
        workload(),
        c.seed
    )
}

/// One CSV row.
fn run(i: u64, c: &Config, max_events: u64) -> (String, &'static str, u64, Option<f64>) {
    let t = Topology::parse(&c.topology).expect("a valid topology");
    let inst = Lkcs::instance(&t, &c.l, &c.k).expect("valid bounds");
    let rules = LkcsRules::CORRECTED;
    let built = match c.leader {
        "trip" => Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::TRIP),
        "default" => Lkcs::build_default(&inst, None),
        "all" => Lkcs::build(&inst, &Leaders::All, None, rules),
        "single" => Lkcs::build(&inst, &Leaders::Auto, None, rules).and_then(|auto| {
            let one = Leaders::One(auto.tightening[0].index());
            Lkcs::build(&inst, &one, None, rules)
        }),
        _ => Lkcs::build(&inst, &Leaders::Auto, None, rules),
    };
    let closed_mean = t.processes().map(|p| t.degree(p) + 1).sum::<usize>() as f64 / t.len() as f64;
    let head = format!(
        "{i},{},{},{},{},{},",
        c.family, c.topology, c.bounds_kind, c.delay, c.leader
    );
    let sys = match built {
        Ok(sys) => sys,
        Err(e) => {
            let why = e.to_string().replace([',', '\n'], ";");
            let why: String = why.chars().take(120).collect();
            return (
                format!("{head}refused,{why},,,,,,{closed_mean:.2},"),
                "refused",
                0,
                None,
            );
        }
    };
    let cfg = SimConfig {
        seed: c.seed,
        pairs: 3,
        delay: Delay::parse(c.delay).expect("a valid delay"),
        workload: workload(),
        think_max: 4,
        max_events,
        trace_capacity: 0,
        stop: Vec::new(),
    };
    let r = simulate(&sys.instance, sys.procs, &cfg);
    let (outcome, why) = if r.ok() {
        ("passed", String::new())
    } else if r.safety_violations > 0 {
        ("failed", "bound broken".to_string())
    } else if r.deadlock {
        ("failed", "deadlock".to_string())
    } else {
        ("failed", "stalled".to_string())
    };
    let mean = r.messages_per_pair.mean;
    (
        format!(
            "{head}{outcome},{why},{},{},{:.1},{:.3},{},{closed_mean:.2},{}",
            r.pairs_completed,
            r.events,
            mean,
            mean / (12.0 * closed_mean),
            r.max_overtaken,
            command(i, c, max_events)
        ),
        outcome,
        r.max_overtaken,
        (outcome == "passed").then_some(mean / (12.0 * closed_mean)),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("replay") {
        let i: u64 = args[1].parse().expect("an index");
        let c = config(i, args.get(2).map(String::as_str));
        let json = format!("{{\"l\": [{}], \"k\": [{}]}}", list(&c.l), list(&c.k));
        std::fs::write(format!("/tmp/lkcs-{i}.json"), json).expect("/tmp writable");
        println!("{}", command(i, &c, 2_000_000));
        return;
    }
    let count: u64 = args.first().map_or(100, |a| a.parse().expect("COUNT"));
    let first: u64 = args.get(1).map_or(0, |a| a.parse().expect("FIRST"));
    let max_events: u64 = args
        .get(2)
        .map_or(2_000_000, |a| a.parse().expect("MAX_EVENTS"));
    let threads: usize = args.get(3).map_or(2, |a| a.parse().expect("THREADS"));
    let only = args.get(4).cloned();
    println!(
        "index,family,topology,bounds,delay,leader,outcome,failure,pairs_completed,events,\
         messages_per_pair_mean,mean_over_12_closed,max_overtaken,closed_neighbourhood_mean,command"
    );
    let next = Mutex::new(first);
    let rows = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap();
                    if *n >= first + count {
                        break;
                    }
                    *n += 1;
                    *n - 1
                };
                let c = config(i, only.as_deref());
                let row = run(i, &c, max_events);
                println!("{}", row.0);
                rows.lock().unwrap().push((c.family, row.1, row.2, row.3));
            });
        }
    });
    let rows = rows.into_inner().unwrap();
    let mut families: Vec<&str> = FAMILIES.to_vec();
    families.push("all");
    for f in families {
        let of: Vec<_> = rows.iter().filter(|r| f == "all" || r.0 == f).collect();
        if of.is_empty() {
            continue;
        }
        let ran = of.iter().filter(|r| r.1 != "refused").count();
        let failed = of.iter().filter(|r| r.1 == "failed").count();
        let worst = of.iter().map(|r| r.2).max().unwrap_or(0);
        let ratios: Vec<f64> = of.iter().filter_map(|r| r.3).collect();
        let ratio = ratios.iter().sum::<f64>() / ratios.len().max(1) as f64;
        eprintln!(
            "{f}: {} configurations, {} refused, {ran} run, {failed} failed ({:.2} %), \
             worst max_overtaken {worst}, messages per pair / 12(|N_i|+1) mean {ratio:.3}",
            of.len(),
            of.len() - ran,
            100.0 * failed as f64 / ran.max(1) as f64
        );
    }
}
