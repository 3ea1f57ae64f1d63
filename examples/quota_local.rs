//! A quota per neighbourhood: 16 workers on a 4×4 torus (each has 4 neighbours). Every
//! worker's neighbourhood (itself and its 4 neighbours) keeps at least 2 active, so no
//! region of the torus is ever left with fewer than 2 serving. Each worker takes breaks
//! (exits) as often as its neighbourhood allows, until the main thread has seen enough
//! breaks and shuts the quota down.
//!
//! Run: `cargo run --release --example quota_local`

use lkcs::{Quota, QuotaError, Topology};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

const BREAKS: usize = 1_600;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota = Quota::local(Topology::torus(4, 4)?)
        .at_least(2)
        .monitor(true)
        .build()?;
    println!(
        "{:?} chosen for at least 2 active around every worker",
        quota.algorithm()
    );
    let breaks = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let workers: Vec<_> = quota
            .members()
            .into_iter()
            .map(|mut m| {
                let breaks = &breaks;
                s.spawn(move || -> Result<(), QuotaError> {
                    loop {
                        // waits while a neighbourhood would drop below 2
                        match m.exit() {
                            Err(QuotaError::Shutdown) => return Ok(()),
                            r => r?,
                        }
                        breaks.fetch_add(1, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(50)); // the break
                        match m.enter() {
                            // never waits: there is no upper bound
                            Err(QuotaError::Shutdown) => return Ok(()),
                            r => r?,
                        }
                    }
                })
            })
            .collect();
        while breaks.load(Ordering::SeqCst) < BREAKS {
            std::thread::sleep(Duration::from_millis(5));
        }
        quota.shutdown();
        for w in workers {
            w.join().expect("no worker panics")?;
        }
        Ok::<(), QuotaError>(())
    })?;
    let report = quota.report();
    println!(
        "{} breaks taken, {} messages, {} bound violations",
        breaks.into_inner(),
        report.messages,
        report.violations
    );
    assert_eq!(report.violations, 0);
    Ok(())
}
