//! Loom model of the hand-off between a client handle and the process threads, on the
//! Mutex+Condvar mailbox (loom cannot see inside crossbeam). Two processes, at most four loom
//! threads (the model's main thread, two process threads, one client).
//!
//! Run with:
//!
//! ```text
//! RUSTFLAGS="--cfg loom" cargo test --release --test loom
//! ```
#![cfg(loom)]

use lkcs::{
    algo::lmutin::{Lmutin, LmutinRules},
    cs::CsState,
    runtime::{CondvarMailbox, Runtime, RuntimeConfig, RuntimeError},
    Topology,
};

/// path:2 with l = 1 in the given initial configuration, monitored, on the condvar mailbox.
fn start(initial: [CsState; 2]) -> Runtime<Lmutin, CondvarMailbox> {
    let topo = Topology::path(2).expect("path:2");
    let (inst, procs) =
        Lmutin::system(&topo, &[1, 1], &initial, LmutinRules::CORRECTED).expect("system");
    Runtime::start_with_mailbox(
        procs,
        RuntimeConfig {
            monitor: Some(inst),
        },
    )
    .expect("start")
}

fn builder() -> loom::model::Builder {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b
}

/// The main thread plays P0's client: exit (Request, two Grants), then entry (two Releases).
/// Every interleaving publishes OutCS after the exit and InCS after the entry, sends exactly
/// six messages, never breaks l = 1, and shutdown joins both process threads.
#[test]
fn exit_then_entry_completes_and_publishes() {
    builder().check(|| {
        let mut rt = start([CsState::InCs, CsState::InCs]);
        let handles = rt.take_handles().expect("handles");
        let h0 = &handles[0];
        assert_eq!(h0.exit(), Ok(()));
        assert_eq!(h0.state(), CsState::OutCs);
        assert_eq!(h0.entry(), Ok(()));
        assert_eq!(h0.state(), CsState::InCs);
        rt.shutdown();
        let report = rt.report();
        assert_eq!(report.state_changes, 2);
        assert_eq!(report.messages, 6);
        assert_eq!(report.violations, 0);
        assert_eq!(handles[1].entry(), Err(RuntimeError::Shutdown));
    });
}

/// P1 is out and holds both permissions, so P0's exit cannot complete: a client thread blocked
/// in `exit()` (or arriving after the shutdown) gets `Shutdown`, and shutdown joins.
#[test]
fn shutdown_releases_a_blocked_exit() {
    builder().check(|| {
        let mut rt = start([CsState::InCs, CsState::OutCs]);
        let mut handles = rt.take_handles().expect("handles");
        let h0 = handles.remove(0);
        let client = loom::thread::spawn(move || h0.exit());
        rt.shutdown();
        assert_eq!(client.join().ok(), Some(Err(RuntimeError::Shutdown)));
        assert_eq!(rt.report().violations, 0);
    });
}
