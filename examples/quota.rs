//! A worker pool with a local activity quota: 12 workers on a ring; each keeps at least one
//! of itself and its two neighbours active (l_i = 1) and, through LMUTEX on the same ring, a
//! second pool keeps at most two of every three active (k_i = 2).
//!
//! Run: `cargo run --release --example quota`

use lkcs::{
    algo::lmutin::{lmutex_system, Lmutin, LmutinRules},
    cs::CsState,
    runtime::{Runtime, RuntimeConfig},
    Topology,
};
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let ring = Topology::ring(12)?;

    // at least one of every closed neighbourhood active
    let l = vec![1; ring.len()];
    let inst = Lmutin::instance(&ring, &l)?;
    let initial = inst.find_safe_initial()?;
    let (inst, procs) = Lmutin::system(&ring, &l, &initial, LmutinRules::CORRECTED)?;
    let mut rt = Runtime::start(
        procs,
        RuntimeConfig {
            monitor: Some(inst),
        },
    )?;
    let handles = rt.take_handles().unwrap_or_default();
    std::thread::scope(|s| {
        for h in &handles {
            s.spawn(move || {
                for _ in 0..200 {
                    // leave only when a neighbour stays; give up waiting after a second
                    match h.exit_timeout(Duration::from_secs(1)) {
                        Ok(()) => h.entry().expect("entry never blocks in LMUTIN"),
                        Err(e) => eprintln!("{}: {e}", h.id()),
                    }
                }
            });
        }
    });
    rt.shutdown();
    let r = rt.report();
    println!(
        "l-mutual inclusion: {} state changes, {} messages, {} violations",
        r.state_changes, r.messages, r.violations
    );

    // at most two of every closed neighbourhood active
    let k = vec![2; ring.len()];
    let initial = vec![CsState::OutCs; ring.len()]; // nobody active: always safe for LMUTEX
    let (inst, procs) = lmutex_system(&ring, &k, &initial, LmutinRules::CORRECTED)?;
    let mut rt = Runtime::start(
        procs,
        RuntimeConfig {
            monitor: Some(inst),
        },
    )?;
    let handles = rt.take_handles().unwrap_or_default();
    std::thread::scope(|s| {
        for h in &handles {
            s.spawn(move || {
                for _ in 0..200 {
                    h.entry().expect("entry waits for room");
                    h.exit().expect("exit never blocks in LMUTEX");
                }
            });
        }
    });
    rt.shutdown();
    let r = rt.report();
    println!(
        "k-mutual exclusion: {} state changes, {} messages, {} violations",
        r.state_changes, r.messages, r.violations
    );
    Ok(())
}
