//! The CS object trait: a sans-IO, per-process state machine for a critical-section algorithm,
//! and the generic wrappers that compose such objects.
//!
//! A CS object owns one process's variables. Drivers (the simulator, the exhaustive checker,
//! the thread runtime) call [`CsObject::begin_exit`] / [`CsObject::begin_entry`] when the
//! application wants to change state, and [`CsObject::on_message`] for every delivered
//! message; each call is one atomic handler. The object never performs I/O: it pushes the
//! messages to send, and a "sequence completed" signal, into an [`Outbox`].

pub(crate) mod complement;
pub(crate) mod gcs;

pub use complement::Complement;
pub use gcs::{Gcs, GcsMsg, GcsStage};

use crate::error::CallError;
use crate::id::ProcessId;
pub use crate::id::{CsState, Sequence};
use std::borrow::Cow;
use std::fmt::Debug;
use std::hash::Hash;

/// Which reading of the paper's pseudo-code an algorithm follows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Variant {
    /// The corrected algorithm (see each algorithm's "Deviations from the paper").
    #[default]
    Corrected,
    /// The rules exactly as printed, kept so their counterexamples stay reproducible.
    Printed,
    /// LKCS only: the round trip of `docs/lkcs-liveness.md` (`LkcsRules::TRIP`); the other
    /// algorithms refuse it.
    Trip,
}

impl Variant {
    /// The name `--variant` takes: `corrected`, `printed` or `trip`.
    pub fn name(self) -> &'static str {
        match self {
            Variant::Corrected => "corrected",
            Variant::Printed => "printed",
            Variant::Trip => "trip",
        }
    }

    /// The variant named `s` (see [`Variant::name`]).
    pub fn parse(s: &str) -> Option<Variant> {
        [Variant::Corrected, Variant::Printed, Variant::Trip]
            .into_iter()
            .find(|v| v.name() == s)
    }
}

/// A message of some CS algorithm. It is serde-serializable, so a network driver
/// (`lkcs::net`) can carry it.
pub trait Message:
    Clone
    + Debug
    + Eq
    + Ord
    + Hash
    + Send
    + Sync
    + serde::Serialize
    + serde::de::DeserializeOwned
    + 'static
{
    /// The message's kind for metrics, e.g. `"Request"`; composite objects prefix the kinds of
    /// their inner objects (`"lmin.Request"`).
    fn kind(&self) -> Cow<'static, str>;
}

/// What one handler produced: messages to send, in order, and whether the pending sequence
/// completed (the published state changed).
#[derive(Debug)]
pub struct Outbox<M> {
    sends: Vec<(ProcessId, M)>,
    completed: bool,
}

impl<M> Default for Outbox<M> {
    fn default() -> Self {
        Outbox {
            sends: Vec::new(),
            completed: false,
        }
    }
}

impl<M> Outbox<M> {
    /// An empty outbox.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues `msg` for `to` (which may be the sender itself).
    pub fn send(&mut self, to: ProcessId, msg: M) {
        self.sends.push((to, msg));
    }

    /// Signals that the pending sequence completed in this handler.
    pub fn complete(&mut self) {
        self.completed = true;
    }

    /// Whether the pending sequence completed since the last [`Outbox::take_completed`].
    pub fn completed(&self) -> bool {
        self.completed
    }

    /// Returns and clears the completion signal.
    pub fn take_completed(&mut self) -> bool {
        std::mem::take(&mut self.completed)
    }

    /// The queued sends.
    pub fn sends(&self) -> &[(ProcessId, M)] {
        &self.sends
    }

    /// Removes and returns the queued sends, in order.
    pub fn drain(&mut self) -> std::vec::Drain<'_, (ProcessId, M)> {
        self.sends.drain(..)
    }
}

/// One process's side of a critical-section algorithm, as a sans-IO state machine.
///
/// Calling convention (CSMIC): `begin_entry` only when [`CsState::OutCs`], `begin_exit` only
/// when [`CsState::InCs`], and never while a sequence is pending; a violation returns a
/// [`CallError`] and changes nothing.
pub trait CsObject: Clone + Debug + Eq + Hash + Send + Sync + 'static {
    /// The messages the algorithm exchanges.
    type Msg: Message;

    /// This process's id.
    fn id(&self) -> ProcessId;

    /// The published state.
    fn state(&self) -> CsState;

    /// The sequence in progress, if any.
    fn pending(&self) -> Option<Sequence>;

    /// Starts the Entry-Sequence. It may complete at once (the outbox says so).
    fn begin_entry(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError>;

    /// Starts the Exit-Sequence. It may complete at once (the outbox says so).
    fn begin_exit(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError>;

    /// Handles one message from `from`, atomically.
    fn on_message(&mut self, from: ProcessId, msg: Self::Msg, out: &mut Outbox<Self::Msg>);

    /// Tells the object the driver's current time, before every handler: logical time units in
    /// the simulator, microseconds since the start in the thread runtime; the exhaustive
    /// checker never advances it (time stays 0). Only time-based rules (a timer-driven
    /// migration, say) read it; the default ignores it. Wrappers forward it to inner objects.
    fn set_time(&mut self, now: u64) {
        let _ = now;
    }

    /// The bounds this process's algorithm keeps in normal operation, when tighter than the
    /// problem's (LKCS keeps (l_i+1, k_i−1) within two hops of its leader); `None` (the
    /// default) when they are the problem's. The sequential workload moves only within them.
    fn operating_bounds(&self) -> Option<crate::config::Bounds> {
        None
    }

    /// Whether a call that leaves the operating bounds but keeps the problem's completes on
    /// its own while no other call is in progress, as a round trip whose return (this
    /// process's next call, made at once) needs no permission (LKCS with
    /// `LkcsRules::TRIP`); `false` (the default) otherwise. The sequential workload then
    /// lets a process that owes a pair and that the operating bounds block make the whole
    /// pair that way.
    fn takes_round_trips(&self) -> bool {
        false
    }

    /// Checks the object's internal invariants (e.g. an arbiter's cap), described on failure.
    fn check_invariants(&self) -> Result<(), String> {
        Ok(())
    }

    /// The processes whose permission the pending sequence has asked for and not received,
    /// when the algorithm works by permissions (empty when nothing is pending, and the
    /// default: the algorithm does not say). For diagnostics: a quota's
    /// [`waiting`](crate::Quota::waiting) report names them.
    fn awaiting(&self) -> Vec<ProcessId> {
        Vec::new()
    }

    /// The processes holding a permission this process granted and that is not yet back (its
    /// arbiter's grants); empty (the default) when the algorithm does not say. For
    /// diagnostics, with [`CsObject::awaiting`].
    fn lent_to(&self) -> Vec<ProcessId> {
        Vec::new()
    }

    /// Withdraws the pending sequence before it changes the published state, where the
    /// algorithm can: `true` when the object takes it back itself and returns to where the
    /// sequence started without ever publishing the other state (the outbox then signals
    /// completion once it is back, with [`CsObject::state`] unchanged). `false` (the default)
    /// changes nothing: the sequence keeps running. Requests already sent cannot be recalled:
    /// an object that accepts waits for their answers and gives back what they grant, so
    /// [`CsObject::pending`] stays `Some` until then.
    fn withdraw(&mut self, out: &mut Outbox<Self::Msg>) -> bool {
        let _ = out;
        false
    }

    /// Whether [`CsObject::withdraw`] can take a sequence back before it changes the state
    /// (it may still answer `false` for one past that point); `false` (the default) when it
    /// never can. A quota asks it to choose between withdrawing inside the object and
    /// completing a move and reversing it.
    fn can_withdraw(&self) -> bool {
        false
    }

    /// Tells the object that its client is gone for good: the process stays idle in its
    /// current state and starts no sequence again. A driver calls it once, when no sequence
    /// is pending (the thread runtime, for a member whose handle was dropped, once its last
    /// exit completed). The object lets go of what it keeps only for a later call of its own:
    /// LKCS's round trip gives back the permissions set aside for the return of its last
    /// move, which a retired process never makes. The default keeps nothing of that kind and
    /// does nothing; wrappers forward it to the object they wrap.
    fn retire(&mut self, out: &mut Outbox<Self::Msg>) {
        let _ = out;
    }

    /// Starts the sequence that leaves the current state.
    fn begin(&mut self, seq: Sequence, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        match seq {
            Sequence::Entry => self.begin_entry(out),
            Sequence::Exit => self.begin_exit(out),
        }
    }
}

/// Checks that `procs` is a system for `instance`: one object per process, `procs[i]` being
/// process `i`. Drivers refuse anything else.
pub fn check_system<A: CsObject>(
    instance: &crate::config::Instance,
    procs: &[A],
) -> Result<(), String> {
    if procs.len() != instance.len() {
        return Err(format!(
            "{} objects for an instance of {} processes",
            procs.len(),
            instance.len()
        ));
    }
    match procs.iter().enumerate().find(|(i, a)| a.id().index() != *i) {
        Some((i, a)) => Err(format!("the object at index {i} is process {}", a.id())),
        None => Ok(()),
    }
}

/// Checks the calling convention for starting `seq` in `state` with `pending` in progress.
pub fn check_call(
    state: CsState,
    pending: Option<Sequence>,
    seq: Sequence,
) -> Result<(), CallError> {
    if pending.is_some() {
        return Err(CallError::Busy);
    }
    match (seq, state) {
        (Sequence::Entry, CsState::InCs) => Err(CallError::AlreadyInCs),
        (Sequence::Exit, CsState::OutCs) => Err(CallError::NotInCs),
        _ => Ok(()),
    }
}
