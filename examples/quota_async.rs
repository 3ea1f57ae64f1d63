//! The quota from async code: 8 tokio tasks, at most 3 active at a time, at least 1. The
//! futures need no particular runtime; a timeout that cancels one leaves its move pending,
//! and the next call resolves it.
//!
//! Run: `cargo run --release --example quota_async`

use lkcs::{MemberState, Quota, QuotaError};
use std::time::Duration;

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota = Quota::global(8).between(1, 3).build()?;
    println!("{:?} chosen for 1..=3 of 8", quota.algorithm());
    let tasks: Vec<_> = quota
        .members()
        .into_iter()
        .map(|mut m| {
            tokio::spawn(async move {
                let mut timeouts = 0;
                for _ in 0..50 {
                    // give up waiting after 1 ms: the entry keeps running (Entering) and
                    // the next enter_async resolves it
                    if tokio::time::timeout(Duration::from_millis(1), m.enter_async())
                        .await
                        .is_err()
                    {
                        timeouts += 1;
                        // the entry is still running, or completed since the timeout fired
                        assert!(matches!(
                            m.state(),
                            MemberState::Entering | MemberState::Active
                        ));
                        m.enter_async().await?;
                    }
                    tokio::task::yield_now().await; // the work
                    match m.exit_async().await {
                        Ok(()) => {}
                        // the last active member can never leave: once every other task
                        // has finished the quota reports a stall (or the shutdown ends it)
                        Err(QuotaError::Stalled(_) | QuotaError::Shutdown) => break,
                        Err(e) => return Err(e),
                    }
                }
                Ok::<usize, QuotaError>(timeouts)
            })
        })
        .collect();
    let mut cancelled = 0;
    for t in tasks {
        cancelled += t.await??;
    }
    quota.shutdown();
    println!(
        "400 rounds across 8 tasks; {cancelled} entries outlived a 1 ms timeout and were resumed"
    );
    Ok(())
}
