//! 8 workers, between 2 and 5 of them active at any time, each with its own amount of work
//! (the workers finish at different times). A worker whose work is done keeps cycling
//! (enter, exit, no work), so the busy ones can always move; the last one to finish closes
//! the quota. Every exit returns `Ok`, and each worker's loop ends on the entry that
//! reports `Closed`. Without the close, the last two active members could never leave: the
//! lower bound holds them.
//!
//! Run: `cargo run --release --example quota_global`

use lkcs::{Quota, QuotaError};
use std::sync::atomic::{AtomicUsize, Ordering};

const WORKERS: usize = 8;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota = Quota::global(WORKERS).between(2, 5).monitor(true).build()?;
    println!("{quota:?}");
    let (busy, done) = (AtomicUsize::new(WORKERS), AtomicUsize::new(0));
    std::thread::scope(|s| -> Result<(), QuotaError> {
        let workers: Vec<_> = quota
            .members()
            .into_iter()
            .map(|mut m| {
                let (quota, busy, done) = (&quota, &busy, &done);
                s.spawn(move || -> Result<(), QuotaError> {
                    let mut work_left = 100 * (m.id() + 1); // its own amount of work
                    loop {
                        match m.enter() {
                            Err(e) if e.is_closed() => return Ok(()), // the end
                            r => r?,
                        }
                        if work_left > 0 {
                            std::thread::yield_now(); // the work, while counted as active
                            done.fetch_add(1, Ordering::SeqCst);
                            work_left -= 1;
                            if work_left == 0 && busy.fetch_sub(1, Ordering::SeqCst) == 1 {
                                quota.close(); // the last one: everybody may leave now
                            }
                        }
                        m.exit()?; // Ok, also for the last two once closed
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().expect("no worker panics")?;
        }
        Ok(())
    })?;
    quota.shutdown();
    let report = quota.report();
    println!(
        "{} units of work, {} messages, {} bound violations",
        done.into_inner(),
        report.messages,
        report.violations
    );
    assert_eq!(report.violations, 0);
    Ok(())
}
