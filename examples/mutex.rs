//! Mutual exclusion between 6 threads with no shared lock: a quota of at most 1 active.
//! An `AtomicUsize` counts the threads inside; it never sees two.
//!
//! Run: `cargo run --release --example mutex`

use lkcs::{Quota, QuotaError};
use std::sync::atomic::{AtomicUsize, Ordering};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let quota = Quota::global(6).at_most(1).build()?;
    println!("{:?} chosen for at most 1 of 6", quota.algorithm());
    let inside = AtomicUsize::new(0);
    let most = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for mut m in quota.members() {
            let (inside, most) = (&inside, &most);
            s.spawn(move || -> Result<(), QuotaError> {
                for _ in 0..500 {
                    m.enter()?;
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    most.fetch_max(now, Ordering::SeqCst);
                    std::hint::spin_loop(); // the critical section
                    inside.fetch_sub(1, Ordering::SeqCst);
                    m.exit()?;
                }
                Ok(())
            });
        }
    });
    let most = most.into_inner();
    println!("3,000 critical sections, at most {most} inside at once");
    assert_eq!(most, 1, "never two inside");
    Ok(())
}
