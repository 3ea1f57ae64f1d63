//! The complement of a CS object (the complementary theorem, Theorem 2 of the 2017 paper):
//! swap InCS and OutCS. An algorithm for the (l_i, k_i)-CS problem becomes one for the
//! (|N_i|+1−k_i, |N_i|+1−l_i)-CS problem with the very same messages.
//!
//! **Unexpected messages** are the inner object's business: every message goes to it
//! unchanged, so LMUTEX and kmex handle them as LMUTIN and MUTIN do.

use super::{CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;

/// `Complement<A>`: state = ¬A.state, Entry = A.Exit, Exit = A.Entry, messages unchanged.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Complement<A>(pub A);

impl<A> Complement<A> {
    /// The wrapped object.
    pub fn inner(&self) -> &A {
        &self.0
    }
}

impl<A: CsObject> CsObject for Complement<A> {
    type Msg = A::Msg;

    fn id(&self) -> ProcessId {
        self.0.id()
    }

    fn state(&self) -> CsState {
        !self.0.state()
    }

    fn pending(&self) -> Option<Sequence> {
        self.0.pending().map(Sequence::flip)
    }

    fn begin_entry(&mut self, out: &mut Outbox<A::Msg>) -> Result<(), CallError> {
        self.0.begin_exit(out).map_err(flip_error)
    }

    fn begin_exit(&mut self, out: &mut Outbox<A::Msg>) -> Result<(), CallError> {
        self.0.begin_entry(out).map_err(flip_error)
    }

    fn on_message(&mut self, from: ProcessId, msg: A::Msg, out: &mut Outbox<A::Msg>) {
        self.0.on_message(from, msg, out)
    }

    fn set_time(&mut self, now: u64) {
        self.0.set_time(now)
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.0.check_invariants()
    }

    fn awaiting(&self) -> Vec<ProcessId> {
        self.0.awaiting()
    }

    fn lent_to(&self) -> Vec<ProcessId> {
        self.0.lent_to()
    }

    fn retire(&mut self, out: &mut Outbox<A::Msg>) {
        self.0.retire(out)
    }
}

fn flip_error(e: CallError) -> CallError {
    match e {
        CallError::AlreadyInCs => CallError::NotInCs,
        CallError::NotInCs => CallError::AlreadyInCs,
        CallError::Busy => CallError::Busy,
    }
}
