//! [`cycle_pairs`]: every process runs Exit/Entry pairs from its own client thread until every
//! process has run its share, the processes that are done cycling on meanwhile.

use super::error::RuntimeError;
use super::handle::Handle;
use super::mailbox::Mailbox;
use crate::cs::{CsObject, Sequence};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Runs at least `pairs` Exit/Entry pairs on every process, each from its own (scoped) client
/// thread, and returns how many pairs each completed, by handle. Blocks until every process
/// has completed `pairs`, or the first error.
///
/// A process that has completed its pairs **keeps cycling** until every process has (the
/// simulator's concurrent workload does the same). The algorithms assume every process
/// eventually moves again: a client that stopped early could hold its neighbours back for
/// good (an LMUTEX process that stays in the CS keeps a neighbour with k = 1 out; an LKCS
/// process that stops can leave another unable to move within l_i..k_i, and a stopped LKCS
/// leader no longer resolves deadlocks). So a process may complete more than `pairs`.
///
/// Each client starts with the sequence that leaves its process's published state, so a
/// sequence still running from an earlier call (or an earlier timed-out [`Handle::run`]) is
/// resumed, not refused. When the last process completes its pairs, every client stops at
/// once, including clients waiting for a sequence: such a sequence **keeps running** (the
/// algorithms cannot cancel a request) and the process may still complete it later; the next
/// call, or a call of the same operation on its handle, resumes waiting for it.
///
/// `timeout` bounds the whole call: past it every client stops waiting (the sequences keep
/// running) and the call returns [`RuntimeError::Timeout`], so a deadlocked algorithm cannot
/// hang the caller. Any other error of a client (a shutdown, a dead process thread, a call
/// error because the handles are used elsewhere at the same time) stops every client and is
/// returned. The handles must belong to distinct processes.
///
/// ```
/// use lkcs::algo::lmutin::{Lmutin, LmutinRules};
/// use lkcs::runtime::{cycle_pairs, Runtime, RuntimeConfig};
/// use lkcs::Topology;
///
/// let ring = Topology::ring(6)?;
/// let inst = Lmutin::instance(&ring, &[1; 6])?;
/// let initial = inst.find_safe_initial()?;
/// let (inst, procs) = Lmutin::system(&ring, &[1; 6], &initial, LmutinRules::CORRECTED)?;
/// let mut rt = Runtime::start(procs, RuntimeConfig { monitor: Some(inst) })?;
/// let handles = rt.take_handles().unwrap_or_default();
/// let done = cycle_pairs(&handles, 10, None)?;
/// assert!(done.iter().all(|&d| d >= 10));
/// rt.shutdown();
/// assert_eq!(rt.report().violations, 0);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn cycle_pairs<A: CsObject, M: Mailbox>(
    handles: &[Handle<A, M>],
    pairs: usize,
    timeout: Option<Duration>,
) -> Result<Vec<usize>, RuntimeError>
where
    Handle<A, M>: Sync,
{
    if pairs == 0 {
        return Ok(vec![0; handles.len()]);
    }
    let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
    // processes that have not yet completed `pairs`
    let remaining = AtomicUsize::new(handles.len());
    // every client stops: all are done, or one failed
    let stop = AtomicBool::new(false);
    let halt = || {
        stop.store(true, Ordering::SeqCst);
        handles.iter().for_each(Handle::wake);
    };
    let stopped = || stop.load(Ordering::SeqCst);
    std::thread::scope(|s| {
        let clients: Vec<_> = handles
            .iter()
            .map(|h| {
                let (remaining, halt, stopped) = (&remaining, &halt, &stopped);
                s.spawn(move || -> Result<usize, RuntimeError> {
                    let first = Sequence::leaving(h.state());
                    let mut done = 0;
                    loop {
                        for seq in [first, first.flip()] {
                            if stopped() {
                                return Ok(done);
                            }
                            match h.run_until(seq, deadline, stopped) {
                                Ok(true) => {}
                                Ok(false) => return Ok(done),
                                Err(e) => {
                                    halt();
                                    return Err(e);
                                }
                            }
                        }
                        done += 1;
                        if done == pairs && remaining.fetch_sub(1, Ordering::SeqCst) == 1 {
                            halt();
                        }
                    }
                })
            })
            .collect();
        let results: Vec<Result<usize, RuntimeError>> = clients
            .into_iter()
            .map(|c| c.join().unwrap_or_else(|p| std::panic::resume_unwind(p)))
            .collect();
        // the first error by handle order; a client that only saw the others stop is fine
        results.into_iter().collect()
    })
}
