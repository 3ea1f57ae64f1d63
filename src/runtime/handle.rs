//! The client side: one [`Handle`] per process, and the slot it shares with the process thread.
//!
//! The slot holds what the process published (its state), the sequence the client started and
//! has not yet seen complete (`awaiting`), and the runtime-wide flags (shut down, a process
//! died). The client waits on the slot's condition variable; the process thread notifies it
//! when the sequence completes; shutdown and a dying thread notify every slot.

use super::error::RuntimeError;
use super::mailbox::{CrossbeamMailbox, MailSender, Mailbox};
use super::process::{Envelope, Shared};
use crate::cs::{check_call, CsObject, CsState, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;
use crate::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

/// What one process publishes to its client, under the slot's lock.
#[derive(Debug)]
pub(crate) struct SlotState {
    /// The published state.
    pub(crate) state: CsState,
    /// The sequence running in the process thread, started by the client.
    pub(crate) pending: Option<Sequence>,
    /// The sequence the client started and has not yet seen complete.
    pub(crate) awaiting: Option<Sequence>,
    /// The object refused the sequence (only if it disagrees with the published state).
    pub(crate) refused: Option<CallError>,
    /// The runtime has shut down.
    pub(crate) shutdown: bool,
    /// A process thread died.
    pub(crate) died: Option<ProcessId>,
}

/// One process's slot: its published state and the condition variable its client waits on.
#[derive(Debug)]
pub(crate) struct Slot {
    pub(crate) inner: Mutex<SlotState>,
    pub(crate) changed: Condvar,
}

impl Slot {
    pub(crate) fn new(state: CsState) -> Slot {
        Slot {
            inner: Mutex::new(SlotState {
                state,
                pending: None,
                awaiting: None,
                refused: None,
                shutdown: false,
                died: None,
            }),
            changed: Condvar::new(),
        }
    }

    /// Sets a runtime-wide flag and wakes the client.
    pub(crate) fn mark(&self, f: impl FnOnce(&mut SlotState)) {
        f(&mut self.inner.lock());
        self.changed.notify_all();
    }
}

/// The client handle of one process: the application thread asks through it to enter or leave
/// the critical section. It is `Send`, so it can move to the thread that plays the process.
///
/// Every call returns when the process's published state has changed (the sequence
/// completed), or with an error:
/// - a misuse (`exit` while out of the CS, `entry` while in it, the other operation while a
///   sequence runs) returns [`RuntimeError::Call`] at once and starts nothing;
/// - a timeout returns [`RuntimeError::Timeout`] and leaves the sequence running (the
///   algorithms cannot cancel a request): calling the same operation again resumes waiting for
///   it (and returns `Ok` at once if it completed meanwhile); calling the other one returns
///   `Call(Busy)` while it runs;
/// - after [`Runtime::shutdown`](crate::Runtime::shutdown), every call returns
///   [`RuntimeError::Shutdown`], including calls blocked at that moment;
/// - if a process thread died, calls return [`RuntimeError::ProcessDied`].
pub struct Handle<A: CsObject, M: Mailbox = CrossbeamMailbox> {
    id: ProcessId,
    shared: Arc<Shared>,
    tx: M::Sender<Envelope<A::Msg>>,
}

impl<A: CsObject, M: Mailbox> std::fmt::Debug for Handle<A, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handle")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

impl<A: CsObject, M: Mailbox> Handle<A, M> {
    pub(crate) fn new(id: ProcessId, shared: Arc<Shared>, tx: M::Sender<Envelope<A::Msg>>) -> Self {
        Handle { id, shared, tx }
    }

    /// The process this handle drives.
    pub fn id(&self) -> ProcessId {
        self.id
    }

    /// The state the process published last.
    pub fn state(&self) -> CsState {
        self.slot().inner.lock().state
    }

    /// Runs the Entry-Sequence and blocks until the process is in the CS.
    pub fn entry(&self) -> Result<(), RuntimeError> {
        self.run(Sequence::Entry, None)
    }

    /// Runs the Exit-Sequence and blocks until the process is out of the CS.
    pub fn exit(&self) -> Result<(), RuntimeError> {
        self.run(Sequence::Exit, None)
    }

    /// Like [`Handle::entry`], giving up waiting after `timeout` (the sequence keeps running).
    pub fn entry_timeout(&self, timeout: Duration) -> Result<(), RuntimeError> {
        self.run(Sequence::Entry, Some(timeout))
    }

    /// Like [`Handle::exit`], giving up waiting after `timeout` (the sequence keeps running).
    pub fn exit_timeout(&self, timeout: Duration) -> Result<(), RuntimeError> {
        self.run(Sequence::Exit, Some(timeout))
    }

    /// Starts `seq` (or resumes waiting for it) and waits for it, at most `timeout`.
    pub fn run(&self, seq: Sequence, timeout: Option<Duration>) -> Result<(), RuntimeError> {
        let deadline = timeout.and_then(|t| Instant::now().checked_add(t));
        self.run_until(seq, deadline, &|| false).map(|_| ())
    }

    /// Like [`Handle::run`] with an absolute `deadline`, and stops waiting once `stop()` is
    /// true: `Ok(true)` when the sequence completed, `Ok(false)` when the wait was stopped
    /// (the sequence keeps running, as after a timeout). `stop` is read under the slot's
    /// lock, so a waker that makes it true and then calls [`Handle::wake`] on this handle
    /// never misses this wait.
    pub(crate) fn run_until(
        &self,
        seq: Sequence,
        deadline: Option<Instant>,
        stop: &dyn Fn() -> bool,
    ) -> Result<bool, RuntimeError> {
        let slot = self.slot();
        let mut st = slot.inner.lock();
        flags(&st)?;
        match st.awaiting {
            Some(s) if s == seq => {}
            Some(_) if st.pending.is_some() => return Err(RuntimeError::Call(CallError::Busy)),
            _ => {
                // Nothing runs (an earlier sequence may have completed unobserved).
                st.awaiting = None;
                st.refused = None;
                check_call(st.state, st.pending, seq)?;
                st.pending = Some(seq);
                st.awaiting = Some(seq);
                drop(st);
                // A failed send means the process thread is gone: the flags below say why.
                let _ = self.tx.send(Envelope::Begin(seq));
                st = slot.inner.lock();
            }
        }
        loop {
            flags(&st)?;
            if st.pending != Some(seq) {
                st.awaiting = None;
                return match st.refused.take() {
                    Some(e) => Err(RuntimeError::Call(e)),
                    None => Ok(true),
                };
            }
            if stop() {
                return Ok(false);
            }
            match deadline {
                None => slot.changed.wait(&mut st),
                Some(d) => {
                    let now = Instant::now();
                    if now >= d {
                        return Err(RuntimeError::Timeout);
                    }
                    slot.changed.wait_for(&mut st, d - now);
                }
            }
        }
    }

    /// Wakes a call waiting on this handle, so it looks at its `stop` condition again.
    #[cfg(not(loom))]
    pub(crate) fn wake(&self) {
        self.slot().mark(|_| {});
    }

    fn slot(&self) -> &Slot {
        &self.shared.slots[self.id.index()]
    }
}

fn flags(st: &SlotState) -> Result<(), RuntimeError> {
    if st.shutdown {
        return Err(RuntimeError::Shutdown);
    }
    if let Some(p) = st.died {
        return Err(RuntimeError::ProcessDied(p));
    }
    Ok(())
}
