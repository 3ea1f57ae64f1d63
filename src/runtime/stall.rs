//! Stall detection: a watchdog thread that tells a stalled system from a slow one.
//!
//! A system is **stalled** when nothing is in flight (every message and client command sent
//! has been handled, and no handler runs), and every process whose handle is alive has its
//! client blocked in a call waiting for a pending sequence, with at least one such call. Dropped
//! handles count as never moving. Nothing can then change but a client giving up (a timeout)
//! or a shutdown, so the blocked calls would wait for ever.
//!
//! The watchdog reads the counters of every process and the slot of every client twice, an
//! interval apart. Every counter only grows, so two equal readings mean nothing happened in
//! between: the reading is then an exact picture of one instant, and if that picture is
//! stalled the system is. Each call blocked at that instant (the same wait, by its id)
//! returns [`RuntimeError::Stalled`](super::RuntimeError::Stalled). No false positive is
//! possible while a live client is merely idle, or while any message is in flight.
//!
//! The watchdog sleeps while no call is blocked.

use super::process::Shared;
use crate::cs::{CsState, Sequence};
use crate::id::ProcessId;
use crate::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use crate::sync::{Arc, Condvar, Mutex};
use std::fmt;
use std::time::Duration;

/// What a stalled system looked like when the watchdog found it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct StallSnapshot {
    /// Every process's published state, by id.
    pub states: Vec<CsState>,
    /// The sequence each process was waiting for, by id (`None`: none).
    pub pending: Vec<Option<Sequence>>,
    /// The processes whose clients were blocked in a call, by id.
    pub blocked: Vec<ProcessId>,
    /// The processes whose handles were dropped, by id.
    pub dropped: Vec<ProcessId>,
    /// Those of `dropped` whose handle was dropped while its thread was panicking.
    pub panicked: Vec<ProcessId>,
}

impl fmt::Display for StallSnapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let waits: Vec<String> = self
            .blocked
            .iter()
            .map(|p| match self.pending[p.index()] {
                Some(Sequence::Entry) => format!("{p} waits to enter"),
                _ => format!("{p} waits to exit"),
            })
            .collect();
        write!(
            f,
            "stalled: nothing in flight and every live process blocked ({})",
            waits.join(", ")
        )?;
        if !self.dropped.is_empty() {
            let d: Vec<String> = self.dropped.iter().map(|p| p.to_string()).collect();
            write!(f, "; dropped: {}", d.join(", "))?;
        }
        Ok(())
    }
}

/// What one process's algorithm says of its wait ([`CsObject::awaiting`] and
/// [`CsObject::lent_to`]); empty when it does not say.
///
/// [`CsObject::awaiting`]: crate::cs::CsObject::awaiting
/// [`CsObject::lent_to`]: crate::cs::CsObject::lent_to
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct WaitView {
    /// The processes whose permission the pending sequence still needs.
    pub awaiting: Vec<ProcessId>,
    /// The processes holding a permission this process granted.
    pub lent_to: Vec<ProcessId>,
}

/// A picture of a running system taken on demand: the slots as the watchdog reads them, and
/// what each process's algorithm says of its wait.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Look {
    /// The slots, as a stall snapshot would show them.
    pub snapshot: StallSnapshot,
    /// Whether a message or command was in flight (then the picture may mix moments).
    pub in_flight: bool,
    /// Each process's [`WaitView`], by id (empty for a process that did not answer in time).
    pub views: Vec<WaitView>,
}

/// Takes [`Look`]s of one runtime; cheap to clone, usable from any thread.
#[derive(Clone)]
pub(crate) struct Inspector {
    shared: Arc<Shared>,
    #[allow(clippy::type_complexity)]
    ask: std::sync::Arc<dyn Fn(&crossbeam_channel::Sender<(ProcessId, WaitView)>) + Send + Sync>,
}

impl fmt::Debug for Inspector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Inspector").finish_non_exhaustive()
    }
}

impl Inspector {
    /// An inspector that asks through `ask` (which sends an inspection request to every
    /// process).
    pub(crate) fn new(
        shared: Arc<Shared>,
        ask: impl Fn(&crossbeam_channel::Sender<(ProcessId, WaitView)>) + Send + Sync + 'static,
    ) -> Inspector {
        Inspector {
            shared,
            ask: std::sync::Arc::new(ask),
        }
    }

    /// Reads the slots, then asks every process what it waits for, waiting at most `patience`
    /// for the answers.
    pub(crate) fn look(&self, patience: Duration) -> Look {
        let reading = Reading::take(&self.shared);
        let n = reading.slots.len();
        let (tx, rx) = crossbeam_channel::bounded(n);
        (self.ask)(&tx);
        drop(tx);
        let mut views = vec![WaitView::default(); n];
        let deadline = std::time::Instant::now() + patience;
        while let Ok((p, view)) = rx.recv_deadline(deadline) {
            if let Some(v) = views.get_mut(p.index()) {
                *v = view;
            }
        }
        Look {
            in_flight: reading.sent + reading.begins != reading.handled,
            snapshot: reading.snapshot(),
            views,
        }
    }
}

/// The watchdog's shared part: the counts clients and process threads keep for it.
#[derive(Debug)]
pub(crate) struct Watch {
    /// Client commands (Begin, Retire) queued so far; each is handled once.
    pub(crate) begins: AtomicU64,
    /// Calls blocked now.
    blocked: AtomicUsize,
    /// Ids of blocked waits.
    waits: AtomicU64,
    /// Set to stop the watchdog.
    stop: Mutex<bool>,
    wake: Condvar,
}

impl Default for Watch {
    fn default() -> Watch {
        Watch {
            begins: AtomicU64::new(0),
            blocked: AtomicUsize::new(0),
            waits: AtomicU64::new(0),
            stop: Mutex::new(false),
            wake: Condvar::new(),
        }
    }
}

impl Watch {
    /// A call starts blocking: its wait id.
    pub(crate) fn block(&self) -> u64 {
        if self.blocked.fetch_add(1, Ordering::SeqCst) == 0 {
            // take the lock so the watchdog cannot miss this between its check and its wait
            drop(self.stop.lock());
            self.wake.notify_all();
        }
        self.waits.fetch_add(1, Ordering::SeqCst)
    }

    /// A blocked call stops blocking.
    pub(crate) fn unblock(&self) {
        self.blocked.fetch_sub(1, Ordering::SeqCst);
    }

    /// Stops the watchdog.
    pub(crate) fn halt(&self) {
        *self.stop.lock() = true;
        self.wake.notify_all();
    }
}

/// One client's slot as the watchdog reads it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct SlotView {
    state: CsState,
    pending: Option<Sequence>,
    blocked: Option<u64>,
    dropped: bool,
    panicked: bool,
}

/// One reading of the whole system.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Reading {
    sent: u64,
    handled: u64,
    begins: u64,
    slots: Vec<SlotView>,
}

impl Reading {
    fn take(shared: &Shared) -> Reading {
        let sum = |f: fn(&super::process::Counters) -> &AtomicU64| -> u64 {
            shared
                .counters
                .iter()
                .map(|c| f(c).load(Ordering::SeqCst))
                .sum()
        };
        let sent = sum(|c| &c.sent);
        let begins = shared.watch.begins.load(Ordering::SeqCst);
        let slots = shared
            .slots
            .iter()
            .map(|s| {
                let st = s.inner.lock();
                SlotView {
                    state: st.state,
                    pending: st.pending,
                    blocked: st.blocked,
                    dropped: st.dropped,
                    panicked: st.panicked,
                }
            })
            .collect();
        let handled = sum(|c| &c.handled);
        Reading {
            sent,
            handled,
            begins,
            slots,
        }
    }

    /// Nothing in flight, every live client blocked on a pending sequence, one at least.
    fn stalled(&self) -> bool {
        let waiting = |s: &SlotView| s.blocked.is_some() && s.pending.is_some();
        self.sent + self.begins == self.handled
            && self.slots.iter().all(|s| s.dropped || waiting(s))
            && self.slots.iter().any(waiting)
    }

    fn snapshot(&self) -> StallSnapshot {
        let ids = |f: &dyn Fn(&SlotView) -> bool| -> Vec<ProcessId> {
            (0..self.slots.len())
                .filter(|&i| f(&self.slots[i]))
                .map(ProcessId::from)
                .collect()
        };
        StallSnapshot {
            states: self.slots.iter().map(|s| s.state).collect(),
            pending: self.slots.iter().map(|s| s.pending).collect(),
            blocked: ids(&|s| s.blocked.is_some() && !s.dropped),
            dropped: ids(&|s| s.dropped),
            panicked: ids(&|s| s.panicked),
        }
    }
}

/// The watchdog's body: reads the system twice `interval` apart while a call is blocked, and
/// ends every wait blocked in a stalled reading with the snapshot.
pub(crate) fn watchdog(shared: Arc<Shared>, interval: Duration) {
    let watch = &shared.watch;
    loop {
        {
            let mut stop = watch.stop.lock();
            while !*stop && watch.blocked.load(Ordering::SeqCst) == 0 {
                watch.wake.wait(&mut stop);
            }
            if *stop {
                return;
            }
        }
        let first = Reading::take(&shared);
        {
            let mut stop = watch.stop.lock();
            if !*stop {
                watch.wake.wait_for(&mut stop, interval);
            }
            if *stop {
                return;
            }
        }
        let second = Reading::take(&shared);
        if first == second && first.stalled() {
            let snapshot = std::sync::Arc::new(first.snapshot());
            for (slot, view) in shared.slots.iter().zip(&first.slots) {
                if view.blocked.is_some() && !view.dropped {
                    slot.mark(|st| {
                        // the same wait as in the reading, not a later one
                        if st.blocked == view.blocked {
                            st.stalled = Some(snapshot.clone());
                        }
                    });
                }
            }
        }
    }
}
