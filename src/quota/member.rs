//! [`Member`]: one worker's side of a [`Quota`](super::Quota).

use super::error::QuotaError;
use super::{Shared, INSPECT_PATIENCE};
use crate::cs::{CsObject, CsState, Sequence};
use crate::runtime::{Handle, RuntimeError};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Where a member is, and where it is going.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MemberState {
    /// Active: counted in the bounds.
    Active,
    /// Inactive.
    Inactive,
    /// Inactive, with an entry in progress (a call that timed out, or was cancelled, left it
    /// running).
    Entering,
    /// Active, with an exit in progress (a call that timed out, or was cancelled, left it
    /// running).
    Exiting,
}

/// The engine side of one member, whatever the algorithm and wherever it runs (a thread of
/// this process, or a node over TCP).
pub(crate) trait MemberEngine: Send + Sync {
    fn progress(&self) -> (CsState, Option<Sequence>);
    fn reach(&self, target: CsState, deadline: Option<Instant>) -> Result<(), QuotaError>;
    fn poll_reach(&self, target: CsState, waker: &Waker) -> Poll<Result<(), QuotaError>>;
    fn cancel_poll(&self);
    fn retire(&self);
}

/// A member on the thread runtime: its process's handle, and what explains a stall.
pub(crate) struct ThreadMember<A: CsObject> {
    pub(crate) handle: Handle<A>,
    pub(crate) shared: Arc<Shared>,
}

impl<A: CsObject> MemberEngine for ThreadMember<A> {
    fn progress(&self) -> (CsState, Option<Sequence>) {
        self.handle.progress()
    }
    fn reach(&self, target: CsState, deadline: Option<Instant>) -> Result<(), QuotaError> {
        self.handle
            .reach(target, deadline)
            .map_err(|e| self.shared.error(e))
    }
    fn poll_reach(&self, target: CsState, waker: &Waker) -> Poll<Result<(), QuotaError>> {
        self.handle
            .poll_reach(target, waker)
            .map(|r| r.map_err(|e| self.shared.error(e)))
    }
    fn cancel_poll(&self) {
        self.handle.cancel_poll()
    }
    fn retire(&self) {
        self.handle.retire()
    }
}

/// One member of a [`Quota`](super::Quota), handed out by
/// [`Quota::members`](super::Quota::members): move it to the worker thread (or task) it
/// stands for. Its calls take `&mut self`, so one member is never driven by two callers.
///
/// [`Member::enter`] makes the member active and [`Member::exit`] inactive, each blocking
/// while the move would break a bound. Both are **idempotent**: entering an active member
/// returns `Ok` at once. Each resolves a move left pending by a timed-out or cancelled call:
/// `exit` after a timed-out `enter` waits for the entry to complete, then exits.
///
/// Dropping a member (a worker returning, or panicking) **retires** it: if it is active, or
/// becomes active through a pending entry, it leaves as soon as the bounds allow, and it
/// never moves again. The other members never hang silently on it: if they can no longer
/// move, their calls return [`QuotaError::Stalled`] naming it.
pub struct Member {
    id: usize,
    engine: Box<dyn MemberEngine>,
}

impl std::fmt::Debug for Member {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Member")
            .field("id", &self.id)
            .field("state", &self.state())
            .finish()
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        self.engine.retire();
    }
}

impl Member {
    pub(crate) fn new(id: usize, engine: Box<dyn MemberEngine>) -> Member {
        Member { id, engine }
    }

    /// The member's id: its index in [`Quota::members`](super::Quota::members), its
    /// position in per-member bounds and in the topology.
    pub fn id(&self) -> usize {
        self.id
    }

    /// Whether the member is active now (counted in the bounds). An exiting member is still
    /// active until its exit completes; an entering one is not yet.
    pub fn is_active(&self) -> bool {
        self.engine.progress().0 == CsState::InCs
    }

    /// Where the member is and where it is going.
    pub fn state(&self) -> MemberState {
        match self.engine.progress() {
            (CsState::InCs, Some(_)) => MemberState::Exiting,
            (CsState::InCs, None) => MemberState::Active,
            (CsState::OutCs, Some(_)) => MemberState::Entering,
            (CsState::OutCs, None) => MemberState::Inactive,
        }
    }

    /// Makes the member active, blocking while entering would break an upper bound (or the
    /// algorithm has not yet granted it). `Ok` at once if it is active.
    ///
    /// ```
    /// let quota = lkcs::Quota::global(3).at_most(1).build()?;
    /// let mut members = quota.members();
    /// members[0].enter()?;
    /// assert!(members[0].is_active());
    /// members[0].exit()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn enter(&mut self) -> Result<(), QuotaError> {
        self.reach(CsState::InCs, None)
    }

    /// Makes the member inactive, blocking while leaving would break a lower bound. `Ok` at
    /// once if it is inactive.
    pub fn exit(&mut self) -> Result<(), QuotaError> {
        self.reach(CsState::OutCs, None)
    }

    /// Like [`Member::enter`], giving up after `timeout` with [`QuotaError::Timeout`]; the
    /// entry then keeps running ([`MemberState::Entering`]) and the next call resolves it.
    pub fn enter_timeout(&mut self, timeout: Duration) -> Result<(), QuotaError> {
        self.reach(CsState::InCs, Instant::now().checked_add(timeout))
    }

    /// Like [`Member::exit`], giving up after `timeout` with [`QuotaError::Timeout`]; the exit
    /// then keeps running ([`MemberState::Exiting`]) and the next call resolves it.
    pub fn exit_timeout(&mut self, timeout: Duration) -> Result<(), QuotaError> {
        self.reach(CsState::OutCs, Instant::now().checked_add(timeout))
    }

    /// [`Member::enter`] as a future, for any executor (it needs no runtime: the quota's
    /// threads wake it).
    ///
    /// **Cancellation-safe**: dropping the future (a `select!` branch lost, a timeout) leaves
    /// the entry running, exactly like [`QuotaError::Timeout`]: the member is
    /// [`MemberState::Entering`] and the next call, blocking or async, resolves it.
    pub fn enter_async(&mut self) -> Move<'_> {
        Move::new(self, CsState::InCs)
    }

    /// [`Member::exit`] as a future; cancellation-safe like [`Member::enter_async`].
    pub fn exit_async(&mut self) -> Move<'_> {
        Move::new(self, CsState::OutCs)
    }

    fn reach(&mut self, target: CsState, deadline: Option<Instant>) -> Result<(), QuotaError> {
        self.engine.reach(target, deadline)
    }
}

/// The future of [`Member::enter_async`] and [`Member::exit_async`].
#[must_use = "futures do nothing unless awaited"]
pub struct Move<'a> {
    member: &'a mut Member,
    target: CsState,
    waiting: bool,
}

impl std::fmt::Debug for Move<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Move")
            .field("member", &self.member.id)
            .field("target", &self.target)
            .finish()
    }
}

impl<'a> Move<'a> {
    fn new(member: &'a mut Member, target: CsState) -> Move<'a> {
        Move {
            member,
            target,
            waiting: false,
        }
    }
}

impl Future for Move<'_> {
    type Output = Result<(), QuotaError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        match this.member.engine.poll_reach(this.target, cx.waker()) {
            Poll::Pending => {
                this.waiting = true;
                Poll::Pending
            }
            Poll::Ready(r) => {
                this.waiting = false;
                Poll::Ready(r)
            }
        }
    }
}

impl Drop for Move<'_> {
    fn drop(&mut self) {
        if self.waiting {
            self.member.engine.cancel_poll();
        }
    }
}

impl Shared {
    /// The quota-level form of an engine error.
    pub(crate) fn error(&self, e: RuntimeError) -> QuotaError {
        match e {
            RuntimeError::Timeout => QuotaError::Timeout,
            RuntimeError::Shutdown => QuotaError::Shutdown,
            RuntimeError::Stalled(s) => {
                // the process threads are idle in a stall: they answer at once
                let views = self.inspector.look(INSPECT_PATIENCE).views;
                QuotaError::Stalled(self.context().stall(&s, &views))
            }
            other => QuotaError::Internal(other.to_string()),
        }
    }
}
