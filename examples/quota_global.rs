//! 8 workers, between 2 and 5 of them active at any time. Each worker loops: enter, work,
//! exit. When all the work is done the main thread shuts the quota down, which releases the
//! workers still blocked (the last two can never leave: the lower bound holds them).
//!
//! Run: `cargo run --release --example quota_global`

use lkcs::{Quota, QuotaError};
use std::sync::atomic::{AtomicUsize, Ordering};

const WORKERS: usize = 8;
const ROUNDS: usize = 200;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota = Quota::global(WORKERS).between(2, 5).monitor(true).build()?;
    println!("{quota:?}");
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        let workers: Vec<_> = quota
            .members()
            .into_iter()
            .map(|mut m| {
                let done = &done;
                s.spawn(move || -> Result<(), QuotaError> {
                    for _ in 0..ROUNDS {
                        m.enter()?; // Ok at once for the members that start active
                        std::thread::yield_now(); // the work
                        done.fetch_add(1, Ordering::SeqCst);
                        match m.exit() {
                            Ok(()) => {}
                            Err(QuotaError::Shutdown) => return Ok(()),
                            Err(e) => return Err(e),
                        }
                    }
                    Ok(())
                })
            })
            .collect();
        // wait for the work, then release whoever is still blocked
        while done.load(Ordering::SeqCst) < WORKERS * ROUNDS {
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
