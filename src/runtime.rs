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
//! use lkcs::algo::lmutin::{Lmutin, LmutinRules};
//! use lkcs::cs::CsState;
//! use lkcs::runtime::{Runtime, RuntimeConfig};
//! use lkcs::Topology;
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
#[cfg(not(loom))]
pub(crate) use handle::Withdrawal;
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
        // n process threads and the stall watchdog, checked before any is started: past the
        // map limit a new thread aborts the whole program, which no spawn error can catch
        check_thread_room(n + 1)?;
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
            clock: AtomicU64::new(0),
        });
        // a process that starts in the CS holds its entry from the start
        for (i, slot) in shared.slots.iter().enumerate() {
            let mut st = slot.inner.lock();
            if st.state == CsState::InCs {
                shared.token(ProcessId::from(i), &mut st);
            }
        }
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
            match spawn_process(name, move || process::run::<A, M>(obj, rx, peers, shared)) {
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

/// The stack of a process thread: its handlers keep their state on the heap and do not
/// recurse (tests/quota.rs, tests/runtime.rs and tests/thread_limit.rs pass with it; shuttle
/// runs the same handlers on 256 KiB). Small stacks keep the address space of 10^4 threads
/// small.
pub const PROCESS_STACK: usize = 256 << 10;

/// Memory maps one thread adds, measured on Linux: its stack and guard page, and the
/// alternative signal stack and its guard page that Rust's runtime sets up in it.
const MAPS_PER_THREAD: u64 = 4;

/// Maps left free for everything else the program maps (allocator arenas, files, the
/// application's own threads) when the room under `vm.max_map_count` is counted.
const MAP_MARGIN: u64 = 1_024;

/// Threads left free for the application's own under the thread and pid limits.
const THREAD_MARGIN: u64 = 64;

/// Spawns a process thread with a [`PROCESS_STACK`] stack (the model checkers' threads
/// keep their own).
fn spawn_process<F>(name: String, f: F) -> std::io::Result<thread::JoinHandle<()>>
where
    F: FnOnce() + Send + 'static,
{
    #[cfg(not(any(loom, shuttle)))]
    {
        std::thread::Builder::new()
            .name(name)
            .stack_size(PROCESS_STACK)
            .spawn(f)
    }
    #[cfg(any(loom, shuttle))]
    {
        thread::spawn_named(name, f)
    }
}

/// Refuses `asked` new threads when a system limit leaves room for fewer
/// ([`thread_room`]).
fn check_thread_room(asked: usize) -> Result<(), RuntimeError> {
    match thread_room() {
        Some((room, limit, value)) if (asked as u64) > room => Err(RuntimeError::TooManyThreads {
            asked,
            room: usize::try_from(room).unwrap_or(usize::MAX),
            limit,
            value,
        }),
        _ => Ok(()),
    }
}

/// How many more threads this process may start, with the limit that binds and its value:
/// the smallest room left by `vm.max_map_count` (maps not yet in use, less a margin of
/// 1,024, over 4 maps a thread), `kernel.threads-max` and `kernel.pid_max` (less the
/// threads of the whole system, and a margin of 64), the soft `RLIMIT_NPROC` (not for
/// root; less this process's threads: the user's other processes count too, and a spawn
/// that fails there is still caught) and the cgroup's `pids.max` (less `pids.current`).
/// `None` where none can be read (not Linux, or no `/proc`).
pub fn thread_room() -> Option<(u64, &'static str, u64)> {
    if !cfg!(target_os = "linux") {
        return None;
    }
    let read = |path: &str| std::fs::read_to_string(path).ok();
    let number = |path: &str| read(path).and_then(|t| t.trim().parse::<u64>().ok());
    let field = |text: &str, key: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|rest| rest.split_whitespace().next().map(str::to_string))
    };
    let mut rooms: Vec<(u64, &'static str, u64)> = Vec::new();
    if let (Some(max), Some(maps)) = (
        number("/proc/sys/vm/max_map_count"),
        read("/proc/self/maps"),
    ) {
        let used = maps.lines().count() as u64 + MAP_MARGIN;
        rooms.push((
            max.saturating_sub(used) / MAPS_PER_THREAD,
            "vm.max_map_count",
            max,
        ));
    }
    // the fourth field of /proc/loadavg is "runnable/total" threads of the whole system
    let tasks = read("/proc/loadavg").and_then(|t| {
        let total = t.split_whitespace().nth(3)?.split('/').nth(1)?;
        total.parse::<u64>().ok()
    });
    if let Some(tasks) = tasks {
        for (path, name) in [
            ("/proc/sys/kernel/threads-max", "kernel.threads-max"),
            ("/proc/sys/kernel/pid_max", "kernel.pid_max"),
        ] {
            if let Some(max) = number(path) {
                rooms.push((max.saturating_sub(tasks + THREAD_MARGIN), name, max));
            }
        }
    }
    let status = read("/proc/self/status").unwrap_or_default();
    // the effective user id is the second field of "Uid:"; root is not held to RLIMIT_NPROC
    let root = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|rest| rest.split_whitespace().nth(1).map(|u| u == "0"))
        .unwrap_or(false);
    let threads = field(&status, "Threads:").and_then(|t| t.parse::<u64>().ok());
    let nproc = read("/proc/self/limits").and_then(|t| {
        let line = t.lines().find(|l| l.starts_with("Max processes"))?;
        line["Max processes".len()..]
            .split_whitespace()
            .next()?
            .parse::<u64>()
            .ok()
    });
    if let (false, Some(max), Some(threads)) = (root, nproc, threads) {
        rooms.push((max.saturating_sub(threads), "RLIMIT_NPROC", max));
    }
    if let Some((max, current)) = cgroup_pids() {
        rooms.push((max.saturating_sub(current), "pids.max", max));
    }
    rooms.into_iter().min_by_key(|r| r.0)
}

/// The `pids.max` and `pids.current` of this process's cgroup (v2, or v1's pids
/// controller), where it sets a limit.
fn cgroup_pids() -> Option<(u64, u64)> {
    let groups = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    let dir = groups.lines().find_map(|l| {
        let mut parts = l.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        match controllers {
            "" => Some(format!("/sys/fs/cgroup{path}")),
            c if c.split(',').any(|c| c == "pids") => Some(format!("/sys/fs/cgroup/pids{path}")),
            _ => None,
        }
    })?;
    let read = |name: &str| {
        std::fs::read_to_string(format!("{dir}/{name}"))
            .ok()?
            .trim()
            .parse::<u64>()
            .ok()
    };
    Some((read("pids.max")?, read("pids.current")?))
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
    if let Some(inst) = monitor
        && inst.len() != objects.len()
    {
        problems.push(Problem::Invalid(format!(
            "the monitor's instance has {} processes, the runtime {}",
            inst.len(),
            objects.len()
        )));
    }
    ConfigError::check(problems).map_err(RuntimeError::Config)
}
