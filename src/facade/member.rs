//! [`Member`]: one worker's side of a [`Quota`](super::Quota).

use super::error::QuotaError;
use super::{Shared, INSPECT_PATIENCE};
use crate::cs::{CsObject, CsState, Sequence};
use crate::runtime::{Handle, RuntimeError, Withdrawal};
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
    fn token(&self) -> Option<crate::FencingToken>;
    fn reach(&self, target: CsState, deadline: Option<Instant>) -> Result<(), QuotaError>;
    fn poll_reach(&self, target: CsState, waker: &Waker) -> Poll<Result<(), QuotaError>>;
    fn cancel_poll(&self);
    fn retire(&self);
    /// Moves to `target` if that waits on no bound; otherwise leaves the member as it was.
    fn try_reach(&self, target: CsState) -> Result<(), QuotaError> {
        let _ = target;
        Err(QuotaError::Unsupported(
            "try_enter and try_exit run on a quota of threads only".into(),
        ))
    }
    /// Withdraws the move in progress, back to where it started.
    fn withdraw(&self) -> Result<(), QuotaError> {
        Err(QuotaError::Unsupported(
            "cancel runs on a quota of threads only".into(),
        ))
    }
    /// Starts the move toward `target` without waiting (a guard's drop).
    fn begin_toward(&self, target: CsState) {
        let _ = target;
    }
}

/// How long a `try_` call waits for its move between two looks at the bounds. Only the
/// algorithm's messages are awaited: a move that waits on a bound is withdrawn at the next
/// look.
const TRY_LOOK: Duration = Duration::from_micros(200);

/// How long a `try_` call waits for the algorithm's messages in all. A move the bounds allow
/// can still wait on the algorithm: on permissions another member holds (an LKCS member away
/// on a round trip keeps its trip's locks and permissions until its return). Past this the
/// move is withdrawn, as one that waits on a bound, so a `try_` call never hangs.
const TRY_PATIENCE: Duration = Duration::from_millis(100);

/// A member on the thread runtime: its process's handle, and what explains a stall.
pub(crate) struct ThreadMember<A: CsObject> {
    pub(crate) handle: Handle<A>,
    pub(crate) shared: Arc<Shared>,
}

impl<A: CsObject> MemberEngine for ThreadMember<A> {
    fn progress(&self) -> (CsState, Option<Sequence>) {
        self.handle.progress()
    }
    fn token(&self) -> Option<crate::FencingToken> {
        self.handle.token()
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
    fn try_reach(&self, target: CsState) -> Result<(), QuotaError> {
        let me = self.handle.id();
        let (state, pending) = self.handle.progress();
        let seq = Sequence::leaving(state);
        match pending {
            None if state == target => return Ok(()),
            None => {}
            // a move left running: only if it already goes where asked
            Some(s) if s == Sequence::leaving(!target) => {}
            Some(_) => return Err(QuotaError::WouldBlock),
        }
        if !self.shared.may_wait(seq) {
            // this move waits on no bound with this algorithm: only on messages
            return self.reach(target, None);
        }
        let published = |q| self.handle.published(q);
        // withdraws the move in progress; one that cannot be withdrawn (it waits on no
        // bound, passed its bound, or completed meanwhile) is waited for, as the docs say
        let withdraw_or_finish = || match self.withdraw() {
            // nothing was left to withdraw: the move completed after the last look
            Ok(()) if self.handle.progress() == (target, None) => Ok(()),
            Ok(()) => Err(QuotaError::WouldBlock),
            Err(QuotaError::CannotWithdraw(_)) => self.reach(target, None),
            Err(e) => Err(e),
        };
        if self.shared.would_break(me, seq, &published) {
            if pending.is_some() {
                // a move left running that waits on a bound: withdraw it, as asked
                return withdraw_or_finish();
            }
            return Err(QuotaError::WouldBlock);
        }
        let give_up = Instant::now().checked_add(TRY_PATIENCE);
        loop {
            match self.reach(target, Instant::now().checked_add(TRY_LOOK)) {
                Err(QuotaError::Timeout) => {}
                other => return other,
            }
            let patience_out = give_up.is_some_and(|g| Instant::now() >= g);
            if patience_out || self.shared.would_break(me, seq, &published) {
                return withdraw_or_finish();
            }
        }
    }
    fn withdraw(&self) -> Result<(), QuotaError> {
        let (state, pending) = self.handle.progress();
        let Some(seq) = pending else {
            return Ok(());
        };
        if let Some(why) = self.shared.cannot_withdraw(seq) {
            return Err(QuotaError::CannotWithdraw(why));
        }
        debug_assert_eq!(Sequence::leaving(state), seq);
        let move_ = match seq {
            Sequence::Entry => "entry",
            Sequence::Exit => "exit",
        };
        // the move may complete between the look above and the process thread's turn: then
        // there is nothing to withdraw, and the member is where the move went, not back
        let completed = || {
            QuotaError::CannotWithdraw(format!(
                "the {move_} completed before it could be withdrawn"
            ))
        };
        if self.shared.withdraws_inside() {
            return match self.handle.withdraw_exact() {
                Ok(Withdrawal::Withdrawn) => Ok(()),
                Ok(Withdrawal::Nothing) => Err(completed()),
                Ok(Withdrawal::Passed) => Err(QuotaError::CannotWithdraw(format!(
                    "the {move_} had passed its bound already: it completes on its own"
                ))),
                Err(e) => Err(self.shared.error(e)),
            };
        }
        match self.handle.withdraw() {
            Ok(true) => Ok(()),
            Ok(false) => Err(completed()),
            Err(e) => Err(self.shared.error(e)),
        }
    }
    fn begin_toward(&self, target: CsState) {
        self.handle.begin_toward(target)
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

    /// The fencing token of the entry the member holds: `Some` while it is active (an
    /// exiting member included), `None` otherwise, and while an exit that
    /// [`Member::cancel`] withdrew is undone (the member leaves and enters again, with a new
    /// token). Hand it to the resource the slot protects
    /// with each use, so the resource can refuse a member that lost its slot (see
    /// [`FencingToken`](crate::FencingToken)). With mutual exclusion (k = 1) every entry's
    /// token is greater than the entry's before it.
    ///
    /// ```
    /// let quota = lkcs::Quota::global(3).at_most(1).build()?;
    /// let mut members = quota.members();
    /// members[0].enter()?;
    /// let first = members[0].token().expect("active");
    /// members[0].exit()?;
    /// assert_eq!(members[0].token(), None);
    /// members[2].enter()?;
    /// assert!(members[2].token().expect("active") > first);
    /// # members[2].exit()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn token(&self) -> Option<crate::FencingToken> {
        self.engine.token()
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

    /// Makes the member active if that waits on no bound, and otherwise leaves it exactly
    /// as it was ([`Member::state`] unchanged) with [`QuotaError::WouldBlock`]. `Ok` at once
    /// if it is active.
    ///
    /// The decision is the bounds': where the quota's current configuration leaves room, the
    /// entry is made and the call waits for the algorithm's messages (a few round trips
    /// between threads, at most 100 ms in all); where it does not, where another member takes
    /// the room first, or where the algorithm keeps the entry waiting longer (on permissions
    /// another member holds), nothing is left behind. Where the algorithm cannot withdraw a
    /// request (LKCS under its leader rules, see [`Member::cancel`], or a move too far
    /// along), the call then waits for its entry instead.
    ///
    /// ```
    /// let quota = lkcs::Quota::global(2).at_most(1).build()?;
    /// let mut members = quota.members();
    /// members[0].try_enter()?; // room: it enters
    /// let busy = members[1].try_enter().unwrap_err();
    /// assert!(busy.is_would_block()); // no room: member 1 is as it was
    /// assert_eq!(members[1].state(), lkcs::MemberState::Inactive);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn try_enter(&mut self) -> Result<(), QuotaError> {
        self.engine.try_reach(CsState::InCs)
    }

    /// Makes the member inactive if that waits on no bound, and otherwise leaves it exactly
    /// as it was with [`QuotaError::WouldBlock`]; the counterpart of [`Member::try_enter`].
    pub fn try_exit(&mut self) -> Result<(), QuotaError> {
        self.engine.try_reach(CsState::OutCs)
    }

    /// Withdraws the move a timed-out or cancelled call left running
    /// ([`MemberState::Entering`] or [`MemberState::Exiting`]): the member is back where the
    /// move started ([`MemberState::Inactive`] or [`MemberState::Active`]) when this
    /// returns `Ok`. `Ok` at once with no move in progress.
    ///
    /// Requests already sent to other members cannot be recalled, so a withdrawn move
    /// completes inside when its bound lets it and is reversed at once; until then a call
    /// the other way waits. That is safe for the quota's bounds only where the reverse
    /// waits on no bound and the member counts on no other bound's side meanwhile:
    /// - the algorithms that keep one kind of bound (mutual exclusion, at most k, at least
    ///   l, and their local forms), for the move that waits on that bound;
    /// - (l,k)-GCS, which undoes the half of the move that waits on a bound (the
    ///   k-exclusion of an entry, the l-inclusion of an exit) before the member's state
    ///   changes, so the member never counts on the other side;
    /// - LKCS with the round trip (the default for a local quota with both bounds), which
    ///   takes its requests and the permissions granted to them back before the member's
    ///   state changes.
    ///
    /// Otherwise this returns [`QuotaError::CannotWithdraw`] saying why, and the move keeps
    /// running: a move that waits on no bound (it completes on its own), a GCS move that
    /// passed its bound already, an LKCS move whose round trip committed (each completes
    /// without waiting), or any move of LKCS under its leader rules. A move
    /// that completes before the withdrawal reaches it is not undone either:
    /// [`QuotaError::CannotWithdraw`] says so, and the member is where the move went.
    pub fn cancel(&mut self) -> Result<(), QuotaError> {
        self.engine.withdraw()
    }

    /// Enters ([`Member::enter`]) and returns a guard that keeps the member active: dropping
    /// it starts the exit without waiting for it (the member is then
    /// [`MemberState::Exiting`] until the bounds let it leave, and the next call resolves
    /// it, as after a timeout); [`Active::exit`] leaves and waits.
    ///
    /// ```
    /// let quota = lkcs::Quota::global(3).at_most(1).build()?;
    /// let mut members = quota.members();
    /// {
    ///     let _active = members[0].enter_guard()?;
    ///     // ... work while counted as active ...
    /// } // the exit starts here
    /// members[0].exit()?; // and completes here
    /// assert!(!members[0].is_active());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn enter_guard(&mut self) -> Result<Active<'_>, QuotaError> {
        self.enter()?;
        Ok(Active { member: Some(self) })
    }

    fn reach(&mut self, target: CsState, deadline: Option<Instant>) -> Result<(), QuotaError> {
        self.engine.reach(target, deadline)
    }
}

/// A member kept active, from [`Member::enter_guard`]: dropping it starts the exit.
#[must_use = "dropping the guard starts the exit at once"]
pub struct Active<'a> {
    member: Option<&'a mut Member>,
}

impl std::fmt::Debug for Active<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Active")
            .field("member", &self.member.as_ref().map(|m| m.id))
            .finish()
    }
}

impl Active<'_> {
    /// The member kept active.
    pub fn id(&self) -> usize {
        self.member.as_ref().map_or(usize::MAX, |m| m.id)
    }

    /// Leaves, waiting while leaving would break a lower bound ([`Member::exit`]).
    pub fn exit(mut self) -> Result<(), QuotaError> {
        match self.member.take() {
            Some(m) => m.exit(),
            None => Ok(()),
        }
    }
}

impl Drop for Active<'_> {
    fn drop(&mut self) {
        if let Some(m) = self.member.take() {
            m.engine.begin_toward(CsState::OutCs);
        }
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
            RuntimeError::Closed => QuotaError::Closed,
            other => QuotaError::Internal(other.to_string()),
        }
    }
}
