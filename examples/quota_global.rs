//! 8 workers, between 2 and 5 of them active at any time, share a pool of work. Each worker
//! loops while work is left: take a unit, enter, work, exit. When all the work is done the
//! main thread shuts the quota down, which releases the workers still blocked (the last two
//! can never leave: the lower bound holds them). The work is a shared pool rather than a
//! fixed number of rounds per worker: with fixed rounds, two workers with rounds left could
//! be the last two active after the others finished, and neither could ever leave.
//!
//! Run: `cargo run --release --example quota_global`

use lkcs::{Quota, QuotaError};
use std::sync::atomic::{AtomicUsize, Ordering};

const WORKERS: usize = 8;
/// Units of work in the pool.
const WORK: usize = WORKERS * 200;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota = Quota::global(WORKERS).between(2, 5).monitor(true).build()?;
    println!("{quota:?}");
    let (taken, done) = (AtomicUsize::new(0), AtomicUsize::new(0));
    std::thread::scope(|s| {
        let workers: Vec<_> = quota
            .members()
            .into_iter()
            .map(|mut m| {
                let (taken, done) = (&taken, &done);
                s.spawn(move || -> Result<(), QuotaError> {
                    while taken.fetch_add(1, Ordering::SeqCst) < WORK {
                        match m.enter() {
                            Ok(()) => {} // at once for the members that start active
                            Err(QuotaError::Shutdown) => return Ok(()),
                            Err(e) => return Err(e),
                        }
                        std::thread::yield_now(); // the work
                        done.fetch_add(1, Ordering::SeqCst);
                        match m.exit() {
                            Ok(()) => {}
                            Err(QuotaError::Shutdown) => return Ok(()),
                            // the last two active once the pool is empty: the quota reports
                            // the stall (or the shutdown ends it first)
                            Err(QuotaError::Stalled(_)) if taken.load(Ordering::SeqCst) >= WORK => {
                                return Ok(())
                            }
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        // wait for the work (or for every worker to have stopped, on an error), then release
        // whoever is still blocked
        while done.load(Ordering::SeqCst) < WORK && !workers.iter().all(|w| w.is_finished()) {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        quota.shutdown();
        for w in workers {
            w.join().expect("no worker panics")?;
        }
        Ok::<(), QuotaError>(())
    })?;
    let report = quota.report();
    println!(
        "{} rounds of work, {} messages, {} bound violations",
        done.into_inner(),
        report.messages,
        report.violations
    );
    assert_eq!(report.violations, 0);
    Ok(())
}
