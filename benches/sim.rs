//! Simulator speed (DESIGN.md §4): events handled per second, in one group per instance,
//! against the ceiling of the same event loop with nothing else in it.
//!
//! - `simulate`: [`lkcs::sim::simulate`] on the instance, concurrent workload, unit delays, the
//!   default trace setting (throughput: the run's events, counted once before the group);
//! - `bare_loop`: [`lkcs::sim::bare_event_loop`]: the simulator's own priority queue and event
//!   type carrying the algorithm's message, the same number of events, as many deliveries in
//!   flight as processes, unit delays, and no handler, observer or accounting: the ceiling.
//!
//! Instances: LMUTIN on torus:30x30 (l = 2), (l,k)-GCS on complete:256 (grid coterie, l = 64,
//! k = 192, Maekawa as `mx`) and LKCS on torus:12x12 (l = 1, k = 4, the automatic leader).
//! The ratio simulate / bare_loop of one run is the figure of merit (docs/measurements/sim.md).
//!
//! `prefetch_*`: the same LMUTIN run with the engine's prefetch and without it
//! ([`lkcs::sim::set_prefetch`]), on torus:316x316 and torus:30x30 (docs/measurements/scale.md).
//!
//! ```text
//! cargo bench --bench sim
//! ```

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use lkcs::cs::{CsObject, CsState};
use lkcs::sim::{bare_event_loop, set_prefetch, simulate, Delay, SimConfig, Workload};
use lkcs::Topology;
use lkcs::{cs::Variant, Algorithm, Instance, SystemSpec, SystemVisitor};
use std::time::Duration;

/// One benchmark instance: a spec and its pairs per process.
struct Case {
    name: &'static str,
    spec: SystemSpec,
    pairs: usize,
}

fn spec(algorithm: Algorithm, topology: &str, l: usize, k: Option<usize>) -> SystemSpec {
    SystemSpec {
        algorithm,
        topology: Topology::parse(topology).expect("topology"),
        l: Some(l),
        k,
        bounds: None,
        initial: None,
        variant: Variant::Corrected,
        // LKCS: the leader rules, which docs/measurements/scale.md measured
        leader: (algorithm == Algorithm::Lkcs).then_some(lkcs::algo::lkcs::Leaders::Auto),
        coterie: (algorithm == Algorithm::Gcs).then_some(lkcs::quota::QuorumSystem::Grid),
        mx: None,
        maxreq: None,
        migrate_after: None,
    }
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "lmutin_torus_30x30",
            spec: spec(Algorithm::Lmutin, "torus:30x30", 2, None),
            pairs: 20,
        },
        Case {
            name: "gcs_complete_256_grid",
            spec: spec(Algorithm::Gcs, "complete:256", 64, Some(192)),
            pairs: 4,
        },
        Case {
            name: "lkcs_torus_12x12",
            spec: spec(Algorithm::Lkcs, "torus:12x12", 1, Some(4)),
            pairs: 20,
        },
    ]
}

fn config(pairs: usize) -> SimConfig {
    SimConfig {
        seed: 1,
        pairs,
        delay: Delay::Unit,
        workload: Workload::Concurrent,
        ..SimConfig::default()
    }
}

/// Runs the instance once: its events and one of its messages (for the bare loop).
struct Probe<'a> {
    cfg: &'a SimConfig,
    c: &'a mut Criterion,
    name: &'static str,
}

impl SystemVisitor for Probe<'_> {
    type Output = ();

    fn visit<A: CsObject>(self, instance: &Instance, _initial: &[CsState], procs: Vec<A>) {
        let report = simulate(instance, procs.clone(), self.cfg);
        assert!(report.ok(), "{}: {}", self.name, report.failure_text());
        let events = report.events;
        // a message of the algorithm: the first one any process sends on its first move
        let msg = procs
            .iter()
            .find_map(|p| {
                let mut p = p.clone();
                let mut out = lkcs::cs::Outbox::new();
                let seq = lkcs::cs::Sequence::leaving(p.state());
                p.begin(seq, &mut out).ok()?;
                out.drain().next().map(|(_, m)| m)
            })
            .expect("some process sends a message");
        let n = procs.len();
        println!(
            "{}: {n} processes, {events} events, {} messages per run",
            self.name, report.messages
        );
        let mut group = self.c.benchmark_group(self.name);
        group.throughput(Throughput::Elements(events));
        group.sample_size(10);
        group.measurement_time(Duration::from_secs(8));
        group.bench_function(BenchmarkId::new("simulate", n), |b| {
            b.iter(|| simulate(instance, procs.clone(), self.cfg).events)
        });
        group.bench_function(BenchmarkId::new("bare_loop", n), |b| {
            b.iter(|| bare_event_loop(&msg, n, n, events, Delay::Unit, 1))
        });
        group.finish();
    }
}

/// The engine's prefetch (`Sim::run` fetches the process of the event after next): the
/// same run with it and without it, alternating within one group, on the instance it was
/// written for (about 10^5 processes, where each event's process is a cache miss) and on
/// one that fits in the cache.
fn prefetch(c: &mut Criterion) {
    for (name, topology, pairs) in [
        ("prefetch_lmutin_torus_316x316", "torus:316x316", 2),
        ("prefetch_lmutin_torus_30x30", "torus:30x30", 20),
    ] {
        struct Both<'a> {
            c: &'a mut Criterion,
            name: &'static str,
            cfg: SimConfig,
        }
        impl SystemVisitor for Both<'_> {
            type Output = ();
            fn visit<A: CsObject>(self, instance: &Instance, _: &[CsState], procs: Vec<A>) {
                let events = simulate(instance, procs.clone(), &self.cfg).events;
                let mut group = self.c.benchmark_group(self.name);
                group.throughput(Throughput::Elements(events));
                group.sample_size(10);
                group.measurement_time(Duration::from_secs(20));
                for on in [true, false] {
                    let id = if on { "prefetch" } else { "no_prefetch" };
                    group.bench_function(BenchmarkId::new(id, procs.len()), |b| {
                        set_prefetch(on);
                        b.iter(|| simulate(instance, procs.clone(), &self.cfg).events);
                        set_prefetch(true);
                    });
                }
                group.finish();
            }
        }
        spec(Algorithm::Lmutin, topology, 2, None)
            .build(Both {
                c,
                name,
                cfg: config(pairs),
            })
            .expect("the instance builds");
    }
}

fn bench(c: &mut Criterion) {
    for case in cases() {
        let cfg = config(case.pairs);
        case.spec
            .build(Probe {
                cfg: &cfg,
                c,
                name: case.name,
            })
            .expect("the instance builds");
    }
}

criterion_group!(benches, bench, prefetch);
criterion_main!(benches);
