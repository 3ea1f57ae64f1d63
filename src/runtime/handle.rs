//! The client side: one [`Handle`] per process, and the slot it shares with the process thread.
//!
//! The slot holds what the process published (its state and the sequence it runs), the
//! sequence the client started and has not yet seen complete (`awaiting`), the client's call
//! (one at a time; whether it is blocked, for the stall watchdog; an async caller's waker) and
//! the runtime-wide flags (shut down, a process died, a stall found). The client waits on the
//! slot's condition variable (or its waker); the process thread notifies it when the sequence
//! completes; shutdown, a dying thread and the watchdog notify every slot.

#![cfg_attr(loom, allow(dead_code))] // the quota, which calls them, is not built under loom

use super::error::RuntimeError;
use super::mailbox::{CrossbeamMailbox, MailSender, Mailbox};
use super::process::{Envelope, Shared};
use super::stall::StallSnapshot;
use crate::cs::{check_call, CsObject, CsState, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;
use crate::sync::atomic::Ordering;
use crate::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::{Poll, Waker};
use std::time::{Duration, Instant};

/// What one process publishes to its client, under the slot's lock.
#[derive(Debug)]
pub(crate) struct SlotState {
    /// The published state.
    pub(crate) state: CsState,
    /// The sequence running in the process thread, started by the client (or by the process
    /// itself when its client is gone and it leaves the CS).
    pub(crate) pending: Option<Sequence>,
    /// The sequence the client started and has not yet seen complete.
    pub(crate) awaiting: Option<Sequence>,
    /// The object refused the sequence (only if it disagrees with the published state).
    pub(crate) refused: Option<CallError>,
    /// The runtime has shut down.
    pub(crate) shutdown: bool,
    /// A process thread died.
    pub(crate) died: Option<ProcessId>,
    /// A blocking call is in progress on this handle (one caller at a time).
    pub(crate) in_call: bool,
    /// The caller is blocked waiting for a pending sequence: the id of its wait, counted in
    /// the watchdog's blocked count while `Some`.
    pub(crate) blocked: Option<u64>,
    /// The waker of an async caller waiting here.
    pub(crate) waker: Option<Waker>,
    /// The watchdog found the system stalled while this caller was blocked.
    pub(crate) stalled: Option<std::sync::Arc<StallSnapshot>>,
    /// The handle was dropped: its process never moves again on a client's behalf.
    pub(crate) dropped: bool,
    /// The handle was dropped while its thread was panicking.
    pub(crate) panicked: bool,
    /// The client withdrew the pending sequence, which started from this state: the process
    /// completes it and runs its reverse, and clears this once back. Until then the client
    /// sees this state with nothing pending, and a call the other way waits.
    pub(crate) withdrawn: Option<CsState>,
    /// The runtime is closed: entries are refused, and an exit releases the client.
    pub(crate) closed: bool,
    /// The client was released by an exit after the runtime closed: its process retired, and
    /// the client sees it out of the CS.
    pub(crate) released: bool,
    /// The fencing token of the entry the process holds (`None` while out of the CS).
    pub(crate) token: Option<crate::FencingToken>,
    /// Entries the process made (the next token's sequence follows it).
    pub(crate) entries: u64,
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
                in_call: false,
                blocked: None,
                waker: None,
                stalled: None,
                dropped: false,
                panicked: false,
                withdrawn: None,
                closed: false,
                released: false,
                token: None,
                entries: 0,
            }),
            changed: Condvar::new(),
        }
    }

    /// Changes the slot and wakes its client (a blocked thread or an async waker).
    pub(crate) fn mark(&self, f: impl FnOnce(&mut SlotState)) {
        let waker = {
            let mut st = self.inner.lock();
            f(&mut st);
            st.waker.take()
        };
        self.changed.notify_all();
        if let Some(w) = waker {
            w.wake();
        }
    }
}

/// The client handle of one process: the application thread asks through it to enter or leave
/// the critical section. It is `Send`, so it can move to the thread that plays the process.
///
/// Every call returns when the process's published state has changed (the sequence
/// completed), or with an error:
/// - a misuse (`exit` while out of the CS, `entry` while in it, the other operation while a
///   sequence runs, or a second call while one is in progress on the same handle from another
///   thread) returns [`RuntimeError::Call`] at once and starts nothing;
/// - a timeout returns [`RuntimeError::Timeout`] and leaves the sequence running (the
///   algorithms cannot cancel a request): calling the same operation again resumes waiting for
///   it (and returns `Ok` at once if it completed meanwhile); calling the other one returns
///   `Call(Busy)` while it runs;
/// - with stall detection on ([`Runtime::detect_stalls`](crate::runtime::Runtime::detect_stalls)),
///   a call blocked while the whole system is stalled returns [`RuntimeError::Stalled`];
/// - after [`Runtime::shutdown`](crate::runtime::Runtime::shutdown), every call returns
///   [`RuntimeError::Shutdown`], including calls blocked at that moment;
/// - if a process thread died, calls return [`RuntimeError::ProcessDied`].
///
/// Dropping a handle tells the stall watchdog that its process will never move again.
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

impl<A: CsObject, M: Mailbox> Drop for Handle<A, M> {
    fn drop(&mut self) {
        self.slot().mark(|st| st.dropped = true);
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

    /// The published state and the sequence in progress, if any, read together, as the
    /// client sees them: a withdrawn sequence is not in progress (the process is where the
    /// sequence started), and a client released after [`Runtime::close`] is out of the CS.
    ///
    /// [`Runtime::close`]: crate::runtime::Runtime::close
    pub fn progress(&self) -> (CsState, Option<Sequence>) {
        let st = self.slot().inner.lock();
        client_view(&st)
    }

    /// The fencing token of the entry the process holds, while the client sees it in the CS
    /// (see [`FencingToken`](crate::FencingToken)); `None` while a withdrawn exit is being
    /// undone (the process leaves and enters again: a new entry, with a new token).
    pub fn token(&self) -> Option<crate::FencingToken> {
        let st = self.slot().inner.lock();
        match (client_view(&st).0, st.withdrawn) {
            // a withdrawn exit is undone by leaving and entering again: a new entry
            (CsState::InCs, None) => st.token,
            _ => None,
        }
    }

    /// The state process `q` published last (for a client deciding whether a move would
    /// wait on a bound).
    pub(crate) fn published(&self, q: ProcessId) -> CsState {
        self.shared.slots[q.index()].inner.lock().state
    }

    /// Withdraws the sequence in progress: the process completes it and at once runs its
    /// reverse, and the client sees it where the sequence started. `Ok(false)` when nothing
    /// was in progress. The caller makes sure the reverse waits on no bound.
    pub(crate) fn withdraw(&self) -> Result<bool, RuntimeError> {
        let mut st = self.slot().inner.lock();
        let origin = match withdrawal_origin(&mut st)? {
            Ok(origin) => origin,
            Err(answer) => return Ok(answer == Withdrawal::Withdrawn),
        };
        st.withdrawn = Some(origin);
        st.awaiting = None;
        self.command(Envelope::Withdraw(origin));
        Ok(true)
    }

    /// Asks the algorithm to take the sequence in progress back itself
    /// ([`CsObject::withdraw`](crate::cs::CsObject::withdraw)), waiting for its answer:
    /// [`Withdrawal::Nothing`] when nothing was in progress, [`Withdrawal::Withdrawn`] when
    /// the client now sees the process where the sequence started, [`Withdrawal::Passed`]
    /// when the algorithm could not (the sequence changed the state already, or the
    /// algorithm cannot withdraw): it keeps running.
    pub(crate) fn withdraw_exact(&self) -> Result<Withdrawal, RuntimeError> {
        let origin = match withdrawal_origin(&mut self.slot().inner.lock())? {
            Ok(origin) => origin,
            Err(answer) => return Ok(answer),
        };
        let (reply, answer) = crossbeam_channel::bounded(1);
        self.command(Envelope::WithdrawExact(origin, reply));
        match answer.recv() {
            Ok(true) => Ok(Withdrawal::Withdrawn),
            Ok(false) => Ok(Withdrawal::Passed),
            // the process thread is gone without answering: the flags say why
            Err(_) => {
                let mut st = self.slot().inner.lock();
                flags(&mut st)?;
                Err(RuntimeError::Shutdown)
            }
        }
    }

    /// Starts the move toward `target` without waiting for it (nothing if the process is
    /// there, or a sequence is in progress).
    pub(crate) fn begin_toward(&self, target: CsState) {
        let mut st = self.slot().inner.lock();
        if flags(&mut st).is_err() || st.in_call || st.closed {
            return;
        }
        if st.pending.is_none() && st.withdrawn.is_none() && st.state != target {
            st.refused = None;
            let seq = Sequence::leaving(st.state);
            self.start(&mut st, seq);
            // no call waits for it: the next call resolves it
            st.awaiting = None;
        }
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
        let mut st = self.begin_call()?;
        let result = (|| {
            match st.awaiting {
                Some(s) if s == seq => {}
                Some(_) if st.pending.is_some() => return Err(RuntimeError::Call(CallError::Busy)),
                _ => {
                    // Nothing runs (an earlier sequence may have completed unobserved).
                    st.awaiting = None;
                    st.refused = None;
                    check_call(st.state, st.pending, seq)?;
                    self.start(&mut st, seq);
                }
            }
            loop {
                flags(&mut st)?;
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
                self.block(&mut st, deadline)?;
            }
        })();
        self.end_call(&mut st);
        result
    }

    /// Brings the process to `target`, whatever it runs now: a sequence in progress (toward
    /// `target` or away from it) is waited for, then the sequence toward `target` is started
    /// if the process is not there. `Ok` at once when it is there with nothing pending.
    /// On a timeout the sequence in progress keeps running.
    pub(crate) fn reach(
        &self,
        target: CsState,
        deadline: Option<Instant>,
    ) -> Result<(), RuntimeError> {
        let mut st = self.begin_call()?;
        let result = loop {
            match self.advance(&mut st, target) {
                Ok(true) => break Ok(()),
                Ok(false) => {}
                Err(e) => break Err(e),
            }
            if let Err(e) = self.block(&mut st, deadline) {
                break Err(e);
            }
        };
        self.end_call(&mut st);
        result
    }

    /// [`Handle::reach`] for a future: `Ready` when the process is at `target` or on an
    /// error; `Pending` after registering `waker`, to be woken when the slot changes.
    pub(crate) fn poll_reach(
        &self,
        target: CsState,
        waker: &Waker,
    ) -> Poll<Result<(), RuntimeError>> {
        let mut st = self.slot().inner.lock();
        match self.advance(&mut st, target) {
            Ok(false) => {
                if !st.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
                    st.waker = Some(waker.clone());
                }
                self.mark_blocked(&mut st);
                Poll::Pending
            }
            done => {
                self.unblock(&mut st);
                st.waker = None;
                Poll::Ready(done.map(|_| ()))
            }
        }
    }

    /// Forgets an async wait (its future was dropped); a sequence in progress keeps running.
    pub(crate) fn cancel_poll(&self) {
        let mut st = self.slot().inner.lock();
        self.unblock(&mut st);
        st.waker = None;
    }

    /// The client is gone for good: the process leaves the CS as soon as the algorithm lets it
    /// (after the sequence in progress, if any) and never moves again.
    pub(crate) fn retire(&self) {
        let slot = self.slot();
        let mut st = slot.inner.lock();
        st.dropped = true;
        st.panicked |= std::thread::panicking();
        if !st.shutdown {
            self.command(Envelope::Retire);
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

    /// Locks the slot for a blocking call: refused while another call is in progress.
    fn begin_call(&self) -> Result<MutexGuard<'_, SlotState>, RuntimeError> {
        let mut st = self.slot().inner.lock();
        flags(&mut st)?;
        if st.in_call {
            return Err(RuntimeError::Call(CallError::Busy));
        }
        st.in_call = true;
        Ok(st)
    }

    fn end_call(&self, st: &mut SlotState) {
        self.unblock(st);
        st.in_call = false;
    }

    /// One step toward `target`: `Ok(true)` when there, `Ok(false)` when a sequence runs.
    fn advance(&self, st: &mut SlotState, target: CsState) -> Result<bool, RuntimeError> {
        flags(st)?;
        if st.closed {
            // every call releases the client; an entry is refused
            if !st.released {
                // the bounds are lifted: the client leaves now, its process once it can
                st.released = true;
                st.awaiting = None;
                if !st.dropped {
                    self.command(Envelope::Retire);
                }
            }
            return match target {
                CsState::InCs => Err(RuntimeError::Closed),
                CsState::OutCs => Ok(true),
            };
        }
        if let Some(origin) = st.withdrawn {
            // the client is at `origin`; a move away waits until the withdrawal is done
            return Ok(target == origin);
        }
        if st.pending.is_some() {
            return Ok(false);
        }
        st.awaiting = None;
        if let Some(e) = st.refused.take() {
            return Err(RuntimeError::Call(e));
        }
        if st.state == target {
            return Ok(true);
        }
        self.start(st, Sequence::leaving(st.state));
        Ok(false)
    }

    /// Starts `seq` in the process thread (the caller checked the calling convention).
    fn start(&self, st: &mut SlotState, seq: Sequence) {
        st.pending = Some(seq);
        st.awaiting = Some(seq);
        self.command(Envelope::Begin(seq));
    }

    /// Queues a client command for the process thread.
    fn command(&self, env: Envelope<A::Msg>) {
        // counted before it is queued, so the watchdog never sees it neither sent nor handled
        self.shared.watch.begins.fetch_add(1, Ordering::SeqCst);
        // A failed send means the process thread is gone: the flags say why.
        let _ = self.tx.send(env);
    }

    /// Waits once for the slot to change; `Err(Timeout)` once `deadline` has passed.
    fn block(
        &self,
        st: &mut MutexGuard<'_, SlotState>,
        deadline: Option<Instant>,
    ) -> Result<(), RuntimeError> {
        self.mark_blocked(st);
        let slot = self.slot();
        match deadline {
            None => slot.changed.wait(st),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return Err(RuntimeError::Timeout);
                }
                slot.changed.wait_for(st, d - now);
            }
        }
        Ok(())
    }

    fn mark_blocked(&self, st: &mut SlotState) {
        if st.blocked.is_none() {
            st.blocked = Some(self.shared.watch.block());
        }
    }

    fn unblock(&self, st: &mut SlotState) {
        if st.blocked.take().is_some() {
            self.shared.watch.unblock();
        }
        st.stalled = None;
    }
}

/// What [`Handle::withdraw_exact`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Withdrawal {
    /// Nothing was in progress.
    Nothing,
    /// The sequence is withdrawn: the client is where it started.
    Withdrawn,
    /// Too late, or not possible: the sequence keeps running.
    Passed,
}

/// Where a withdrawal of the client's sequence in progress would return it (`Ok`), or the
/// answer already known (`Err`): [`Withdrawal::Withdrawn`] when it is withdrawn already or
/// the client was released, [`Withdrawal::Nothing`] when nothing is in progress.
fn withdrawal_origin(st: &mut SlotState) -> Result<Result<CsState, Withdrawal>, RuntimeError> {
    flags(st)?;
    if st.in_call {
        return Err(RuntimeError::Call(CallError::Busy));
    }
    if st.withdrawn.is_some() || st.released {
        return Ok(Err(Withdrawal::Withdrawn));
    }
    Ok(match st.pending {
        None => Err(Withdrawal::Nothing),
        Some(Sequence::Entry) => Ok(CsState::OutCs),
        Some(Sequence::Exit) => Ok(CsState::InCs),
    })
}

/// The state and the sequence in progress as the client sees them.
pub(crate) fn client_view(st: &SlotState) -> (CsState, Option<Sequence>) {
    if st.released {
        return (CsState::OutCs, None);
    }
    if let Some(origin) = st.withdrawn {
        return (origin, None);
    }
    (st.state, st.pending)
}

/// The runtime-wide conditions that end every call: shutdown, a dead process thread, and a
/// stall the watchdog found while this caller was blocked.
fn flags(st: &mut SlotState) -> Result<(), RuntimeError> {
    if st.shutdown {
        return Err(RuntimeError::Shutdown);
    }
    if let Some(p) = st.died {
        return Err(RuntimeError::ProcessDied(p));
    }
    if let Some(s) = st.stalled.take() {
        return Err(RuntimeError::Stalled(s));
    }
    Ok(())
}
