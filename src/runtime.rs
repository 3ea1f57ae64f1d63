//! The thread runtime: one OS thread per process runs that process's [`CsObject`] handlers
//! (so every handler is atomic by construction), and a [`Handle`] per process lets an
//! application thread call `entry()` / `exit()`.
//!
//! Each process thread owns one mailbox (a [`Mailbox`], by default crossbeam-channel) carrying
//! peer messages `(from, msg)`, its client's commands and the stop signal. Self-addressed
//! messages go through the mailbox too. Every link is FIFO: a channel is FIFO and each sender
//! pushes in order. With [`RuntimeConfig::monitor`] set, every state change is also applied to
//! a global monitor under one lock, which checks l_i ≤ |CS_i| ≤ k_i on the closed
//! neighbourhoods the change affects; [`Runtime::report`] returns its counts.
//! [`cycle_pairs`] runs every process from its own client thread until each has completed a
//! number of Exit/Entry pairs, keeping the finished ones cycling (tests, benchmarks).
//!
//! ```
//! use lkcs::{CsState, Lmutin, LmutinRules, Runtime, RuntimeConfig, Topology};
//!
//! let ring = Topology::ring(4)?;
//! let initial = vec![CsState::InCs; 4];
//! let (inst, procs) = Lmutin::system(&ring, &[1; 4], &initial, LmutinRules::CORRECTED)?;
//! let mut rt = Runtime::start(procs, RuntimeConfig { monitor: Some(inst) })?;
//! let handles = rt.take_handles().unwrap_or_default();
//! handles[0].exit()?;
//! assert_eq!(handles[0].state(), CsState::OutCs);
//! handles[0].entry()?;
//! rt.shutdown();
//! assert_eq!(rt.report().violations, 0);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

#[cfg(not(loom))]
mod cycle;
mod error;
mod handle;
mod mailbox;
mod monitor;
mod process;
mod stall;

#[cfg(not(loom))]
pub use cycle::cycle_pairs;
pub use error::RuntimeError;
pub use handle::Handle;
pub use mailbox::{
    CondvarMailbox, CondvarReceiver, CondvarSender, CrossbeamMailbox, MailReceiver, MailSender,
    Mailbox,
};
pub use monitor::MonitorViolation;
pub(crate) use stall::Inspector;
pub use stall::{Look, StallSnapshot, WaitView};

use crate::config::Instance;
use crate::cs::{CsObject, CsState};
use crate::error::{ConfigError, Problem};
use crate::id::ProcessId;
use crate::sync::atomic::{AtomicU64, Ordering};
use crate::sync::{thread, Arc};
use handle::Slot;
use monitor::Monitor;
use process::{Counters, Envelope, Shared};

/// How a [`Runtime`] runs.
#[derive(Clone, Debug, Default)]
pub struct RuntimeConfig {
    /// The instance whose bounds the global monitor checks after every state change; `None`
    /// turns the monitor off (no global lock on the hot path).
    pub monitor: Option<Instance>,
}

/// Counts of a runtime's activity so far.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuntimeReport {
    /// Messages sent by every process (self-addressed ones included).
    pub messages: u64,
    /// Published state changes of every process.
    pub state_changes: u64,
    /// Whether the monitor is on (otherwise `violations` is 0 and unchecked).
    pub monitored: bool,
    /// Bound violations the monitor found (the initial configuration's included).
    pub violations: u64,
    /// The first few violations, in the order found.
    pub first_violations: Vec<MonitorViolation>,
}

/// A running system: one thread per process. Dropping it shuts it down.
pub struct Runtime<A: CsObject, M: Mailbox = CrossbeamMailbox> {
    shared: Arc<Shared>,
    senders: Vec<M::Sender<Envelope<A::Msg>>>,
    threads: Vec<thread::JoinHandle<()>>,
    handles: Option<Vec<Handle<A, M>>>,
    watchdog: Option<thread::JoinHandle<()>>,
}

impl<A: CsObject, M: Mailbox> std::fmt::Debug for Runtime<A, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("processes", &self.shared.slots.len())
            .field("running", &!self.threads.is_empty())
            .finish_non_exhaustive()
    }
}

impl<A: CsObject> Runtime<A> {
    /// Starts one thread per object with crossbeam-channel mailboxes. `objects[i]` must be
    /// process `i`; with a monitor, the instance must have as many processes.
    pub fn start(objects: Vec<A>, config: RuntimeConfig) -> Result<Self, RuntimeError> {
        Runtime::start_with_mailbox(objects, config)
    }
}

impl<A: CsObject, M: Mailbox> Runtime<A, M> {
    /// Like [`Runtime::start`], with mailboxes of kind `M` (e.g. [`CondvarMailbox`]).
    pub fn start_with_mailbox(
        objects: Vec<A>,
        config: RuntimeConfig,
    ) -> Result<Self, RuntimeError> {
        validate(&objects, config.monitor.as_ref())?;
        let n = objects.len();
        let initial: Vec<CsState> = objects.iter().map(CsObject::state).collect();
        let shared = Arc::new(Shared {
            slots: initial.iter().map(|&s| Slot::new(s)).collect(),
            counters: (0..n)
                .map(|_| Counters {
                    sent: AtomicU64::new(0),
                    handled: AtomicU64::new(0),
                    changes: AtomicU64::new(0),
                })
                .collect(),
            monitor: config.monitor.map(|inst| Monitor::new(inst, initial)),
            epoch: std::time::Instant::now(),
            watch: stall::Watch::default(),
        });
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..n).map(|_| M::channel()).unzip();
        let mut rt = Runtime {
            shared: shared.clone(),
            senders: senders.clone(),
            threads: Vec::with_capacity(n),
            handles: None,
            watchdog: None,
        };
        // one table of senders shared by every process thread (a clone per thread would be
        // n² senders: O(n²) memory and start time)
        let peers = Arc::new(senders.clone());
        for (obj, rx) in objects.into_iter().zip(receivers) {
            let name = format!("lkcs-{}", obj.id());
            let (peers, shared) = (peers.clone(), shared.clone());
            match thread::spawn_named(name, move || process::run::<A, M>(obj, rx, peers, shared)) {
                Ok(t) => rt.threads.push(t),
                Err(e) => {
                    rt.shutdown();
                    return Err(RuntimeError::Spawn(e.to_string()));
                }
            }
        }
        let handles = senders
            .into_iter()
            .enumerate()
            .map(|(i, tx)| Handle::new(ProcessId::from(i), shared.clone(), tx))
            .collect();
        rt.handles = Some(handles);
        Ok(rt)
    }

    /// Turns on stall detection: a watchdog thread reads the system twice `interval` apart
    /// while a call is blocked. When nothing is in flight and every process whose handle is
    /// alive has its client blocked waiting for a pending sequence, every such call returns
    /// [`RuntimeError::Stalled`] (see [`StallSnapshot`]); an idle client, or any message in
    /// flight, means no stall. Calling it again changes nothing.
    pub fn detect_stalls(&mut self, interval: std::time::Duration) -> Result<(), RuntimeError> {
        if self.watchdog.is_some() || self.threads.is_empty() {
            return Ok(());
        }
        let shared = self.shared.clone();
        let name = "lkcs-watchdog".to_string();
        let t = thread::spawn_named(name, move || stall::watchdog(shared, interval))
            .map_err(|e| RuntimeError::Spawn(e.to_string()))?;
        self.watchdog = Some(t);
        Ok(())
    }

    /// The number of processes.
    pub fn len(&self) -> usize {
        self.shared.slots.len()
    }

    /// Always false: a runtime has at least one process.
    pub fn is_empty(&self) -> bool {
        self.shared.slots.is_empty()
    }

    /// A picture of the running system taken now: every client's slot (state, pending
    /// sequence, blocked or not, dropped or not), whether anything was in flight, and what each
    /// process's algorithm says it waits for ([`CsObject::awaiting`], [`CsObject::lent_to`]),
    /// asked between handlers and waited for at most `patience`. For diagnostics.
    pub fn look(&self, patience: std::time::Duration) -> Look {
        self.inspector().look(patience)
    }

    /// An inspector of this runtime: takes on-demand pictures of the slots and of what each
    /// process's algorithm waits for (`Envelope::Inspect`, answered between handlers).
    pub(crate) fn inspector(&self) -> stall::Inspector {
        let senders = parking_lot::Mutex::new(self.senders.clone());
        stall::Inspector::new(self.shared.clone(), move |reply| {
            for tx in senders.lock().iter() {
                // a closed mailbox belongs to a stopped process: it does not answer
                let _ = tx.send(Envelope::Inspect(reply.clone()));
            }
        })
    }

    /// The client handles, one per process in id order; `Some` on the first call only.
    pub fn take_handles(&mut self) -> Option<Vec<Handle<A, M>>> {
        self.handles.take()
    }

    /// The counts so far (messages, state changes, and the monitor's violations).
    pub fn report(&self) -> RuntimeReport {
        let sum = |f: fn(&Counters) -> &AtomicU64| {
            self.shared
                .counters
                .iter()
                .map(|c| f(c).load(Ordering::Relaxed))
                .sum()
        };
        let (violations, first_violations) = match &self.shared.monitor {
            Some(m) => {
                let (_, v, first) = m.summary();
                (v, first)
            }
            None => (0, Vec::new()),
        };
        RuntimeReport {
            messages: sum(|c| &c.sent),
            state_changes: sum(|c| &c.changes),
            monitored: self.shared.monitor.is_some(),
            violations,
            first_violations,
        }
    }

    /// Closes the runtime: every entry from now on (and every call blocked entering now)
    /// returns [`RuntimeError::Closed`], and an exit returns at once, releasing its client:
    /// its process leaves the CS as soon as the algorithm lets it and never moves again.
    /// The threads keep running until [`Runtime::shutdown`]. Idempotent.
    pub fn close(&self) {
        for slot in &self.shared.slots {
            slot.mark(|st| st.closed = true);
        }
    }

    /// Stops and joins every process thread. Afterwards (and already for calls blocked at this
    /// moment) every handle call returns [`RuntimeError::Shutdown`]. Idempotent.
    pub fn shutdown(&mut self) {
        for slot in &self.shared.slots {
            slot.mark(|st| st.shutdown = true);
        }
        for tx in &self.senders {
            // A closed mailbox belongs to a thread that already ended.
            let _ = tx.send(Envelope::Stop);
        }
        for t in self.threads.drain(..) {
            // A panicked thread already marked every slot (its drop guard).
            let _ = t.join();
        }
        self.shared.watch.halt();
        if let Some(t) = self.watchdog.take() {
            let _ = t.join();
        }
    }
}

impl<A: CsObject, M: Mailbox> Drop for Runtime<A, M> {
    fn drop(&mut self) {
        self.shutdown();
    }
}

fn validate<A: CsObject>(objects: &[A], monitor: Option<&Instance>) -> Result<(), RuntimeError> {
    let mut problems = Vec::new();
    if objects.is_empty() {
        problems.push(Problem::ZeroProcesses);
    }
    for (i, obj) in objects.iter().enumerate() {
        if obj.id().index() != i {
            problems.push(Problem::Invalid(format!(
                "object {i} is process {}, expected P{i}",
                obj.id()
            )));
        }
    }
    if let Some(inst) = monitor {
        if inst.len() != objects.len() {
            problems.push(Problem::Invalid(format!(
                "the monitor's instance has {} processes, the runtime {}",
                inst.len(),
                objects.len()
            )));
        }
    }
    ConfigError::check(problems).map_err(RuntimeError::Config)
}
