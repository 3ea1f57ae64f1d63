//! The process thread: receives from its mailbox, runs one handler per item, publishes state
//! changes (monitor first, then the client's slot), then sends the handler's messages.

#![cfg_attr(loom, allow(dead_code))] // the quota, which calls them, is not built under loom

use super::handle::Slot;
use super::mailbox::{MailReceiver, MailSender, Mailbox};
use super::monitor::Monitor;
use super::stall::{WaitView, Watch};
use crate::cs::{CsObject, CsState, Outbox, Sequence};
use crate::id::ProcessId;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{thread, Arc};

/// What a process thread receives.
#[derive(Debug)]
pub(crate) enum Envelope<M> {
    /// A message from a peer (or from the process itself).
    Peer(ProcessId, M),
    /// The client starts a sequence.
    Begin(Sequence),
    /// The client is gone: leave the CS as soon as possible, then never move again.
    Retire,
    /// The client withdrew the pending sequence, which started from this state: once it
    /// completes, run its reverse at once, and clear the slot's `withdrawn` when back.
    Withdraw(CsState),
    /// The client asks the algorithm to take the pending sequence, which started from this
    /// state, back itself ([`CsObject::withdraw`]); the answer says whether it did. If it
    /// did, the slot's `withdrawn` is set here and cleared once the object is back.
    WithdrawExact(CsState, crossbeam_channel::Sender<bool>),
    /// The runtime shuts down.
    Stop,
    /// Tell what the algorithm waits for (a diagnostic; not counted, changes nothing).
    Inspect(crossbeam_channel::Sender<(ProcessId, WaitView)>),
}

/// One process's counters, on their own cache line (only its thread writes them).
#[derive(Debug)]
#[repr(align(128))]
pub(crate) struct Counters {
    /// Messages sent, counted before they are queued.
    pub(crate) sent: AtomicU64,
    /// Envelopes other than `Stop` handled, counted after the handler's sends are queued.
    pub(crate) handled: AtomicU64,
    pub(crate) changes: AtomicU64,
}

/// Everything the threads and handles of one runtime share.
#[derive(Debug)]
pub(crate) struct Shared {
    pub(crate) slots: Vec<Slot>,
    pub(crate) counters: Vec<Counters>,
    pub(crate) monitor: Option<Monitor>,
    /// The runtime's start: handlers see the time elapsed since it (`CsObject::set_time`).
    pub(crate) epoch: std::time::Instant,
    /// What the stall watchdog reads beside the counters.
    pub(crate) watch: Watch,
    /// The last fencing token's clock: one counter for every process of the runtime, taken
    /// when an entry publishes, so tokens grow in the order the entries happened.
    pub(crate) clock: AtomicU64,
}

impl Shared {
    /// The token of an entry of process `p` publishing now (its slot's state, locked).
    pub(crate) fn token(&self, p: ProcessId, st: &mut super::handle::SlotState) {
        st.entries += 1;
        st.token = Some(crate::FencingToken {
            view: 0,
            clock: self.clock.fetch_add(1, Ordering::AcqRel) + 1,
            member: p.index(),
            sequence: st.entries,
        });
    }
}

/// Marks the runtime broken when the process thread unwinds, so no client waits forever.
struct DeathGuard<'a> {
    id: ProcessId,
    shared: &'a Shared,
}

impl Drop for DeathGuard<'_> {
    fn drop(&mut self) {
        if thread::panicking() {
            // Its own slot last: once its client sees the death, every client does.
            let own = self.id.index();
            let others = (0..self.shared.slots.len()).filter(|&i| i != own);
            for i in others.chain([own]) {
                self.shared.slots[i].mark(|st| {
                    st.died.get_or_insert(self.id);
                });
            }
        }
    }
}

/// The body of process `obj.id()`'s thread; returns on `Stop` or when its mailbox closes.
pub(crate) fn run<A: CsObject, M: Mailbox>(
    mut obj: A,
    rx: M::Receiver<Envelope<A::Msg>>,
    peers: Arc<Vec<M::Sender<Envelope<A::Msg>>>>,
    shared: Arc<Shared>,
) {
    let id = obj.id();
    // a withdrawal's answer, held here so that a handler that panics drops it only after the
    // guard marked the death: the waiting client then reads why, not a plain shutdown
    let mut answer: Option<crossbeam_channel::Sender<bool>>;
    let guard = DeathGuard {
        id,
        shared: &shared,
    };
    let slot = &guard.shared.slots[id.index()];
    let counters = &guard.shared.counters[id.index()];
    let mut out = Outbox::new();
    let mut last = obj.state();
    // the client is gone: the process leaves the CS once it can and never moves again
    let mut retired = false;
    // the retired process told its object it stays where it is (`CsObject::retire`)
    let mut let_go = false;
    // a withdrawn sequence: the state to come back to
    let mut undo: Option<CsState> = None;
    while let Some(env) = rx.recv() {
        let env = match env {
            Envelope::Inspect(reply) => {
                let view = WaitView {
                    awaiting: obj.awaiting(),
                    lent_to: obj.lent_to(),
                };
                let _ = reply.send((id, view));
                continue;
            }
            env => env,
        };
        let micros = guard.shared.epoch.elapsed().as_micros();
        obj.set_time(u64::try_from(micros).unwrap_or(u64::MAX));
        match env {
            Envelope::Peer(from, msg) => obj.on_message(from, msg, &mut out),
            Envelope::Begin(seq) => {
                if let Err(e) = obj.begin(seq, &mut out) {
                    slot.mark(|st| {
                        st.pending = None;
                        st.refused = Some(e);
                    });
                }
            }
            Envelope::Retire => retired = true,
            Envelope::Withdraw(origin) => undo = Some(origin),
            Envelope::WithdrawExact(origin, reply) => {
                answer = Some(reply);
                let taken = obj.pending().is_some()
                    && obj.state() == origin
                    && undo.is_none()
                    && obj.withdraw(&mut out);
                if taken {
                    undo = Some(origin);
                    slot.mark(|st| {
                        st.withdrawn = Some(origin);
                        st.awaiting = None;
                    });
                }
                if let Some(reply) = answer.take() {
                    // a client that stopped waiting for the answer has its slot to read
                    let _ = reply.send(taken);
                }
            }
            Envelope::Stop => break,
            Envelope::Inspect(_) => continue, // answered above
        }
        publish(&obj, &mut out, &mut last, slot, counters, guard.shared);
        if let Some(origin) = undo.filter(|_| obj.pending().is_none()) {
            if obj.state() != origin {
                // the withdrawn sequence completed: its reverse, which the client only asks
                // for where it waits on no bound; the calling convention holds
                let _ = obj.begin(Sequence::leaving(obj.state()), &mut out);
                let pending = obj.pending();
                slot.mark(|st| st.pending = pending);
                publish(&obj, &mut out, &mut last, slot, counters, guard.shared);
            }
            if obj.pending().is_none() && obj.state() == origin {
                // back where the withdrawn sequence started
                undo = None;
                slot.mark(|st| st.withdrawn = None);
            }
        }
        if retired && obj.state() == CsState::InCs && obj.pending().is_none() {
            // the calling convention holds (in the CS, nothing pending), so it cannot fail
            let _ = obj.begin_exit(&mut out);
            let pending = obj.pending();
            slot.mark(|st| st.pending = pending);
            publish(&obj, &mut out, &mut last, slot, counters, guard.shared);
        }
        if retired
            && !let_go
            && obj.state() == CsState::OutCs
            && obj.pending().is_none()
            && undo.is_none()
        {
            // out of the CS for good: what the object keeps for a later call is given back
            obj.retire(&mut out);
            let_go = true;
        }
        let sends = out.sends().len() as u64;
        if sends > 0 {
            // counted before they are queued: a receiver never handles an uncounted message
            counters.sent.fetch_add(sends, Ordering::SeqCst);
        }
        for (to, msg) in out.drain() {
            match peers.get(to.index()) {
                // A closed mailbox means the runtime is stopping: the message no longer matters.
                Some(tx) => {
                    let _ = tx.send(Envelope::Peer(id, msg));
                }
                None => panic!("{id} sent a message to {to}, which does not exist"),
            }
        }
        counters.handled.fetch_add(1, Ordering::SeqCst);
    }
}

/// Publishes what the last handler changed: a new state goes to the monitor first, then to the
/// client's slot with the end of the sequence.
fn publish<A: CsObject>(
    obj: &A,
    out: &mut Outbox<A::Msg>,
    last: &mut CsState,
    slot: &Slot,
    counters: &Counters,
    shared: &Shared,
) {
    let now = obj.state();
    let changed = now != *last;
    if changed {
        *last = now;
        counters.changes.fetch_add(1, Ordering::Relaxed);
        if let Some(m) = &shared.monitor {
            m.apply(obj.id(), now);
        }
    }
    if out.take_completed() || changed {
        slot.mark(|st| {
            if changed {
                match now {
                    CsState::InCs => shared.token(obj.id(), st),
                    CsState::OutCs => st.token = None,
                }
            }
            st.state = now;
            if obj.pending().is_none() {
                st.pending = None;
            }
        });
    }
}
