//! Randomized concurrency testing of the whole thread runtime with
//! [shuttle](https://docs.rs/shuttle): every process thread, every client thread, the
//! Mutex+Condvar mailboxes, the client slots and the global monitor run under shuttle's
//! scheduler, which picks the next thread at every synchronisation point (a random scheduler,
//! and PCT, which finds bugs of small preemption depth with a known probability). Loom
//! (tests/loom.rs) stays for the exhaustive check of the client/process hand-off on two
//! processes; shuttle covers whole systems that loom could never enumerate.
//!
//! Run with (the library's `crate::sync` switches to shuttle's primitives under the cfg):
//!
//! ```text
//! RUSTFLAGS="--cfg shuttle" cargo test --release --no-default-features --test shuttle \
//!   --target-dir target/shuttle
//! ```
//!
//! (`--no-default-features` only spares building the CLI and the checker, which the test does
//! not use; it passes with the default features too.)
//!
//! **Systems** (each monitored: the monitor checks l_i ≤ |CS_i| ≤ k_i after every published
//! state change; each process has its own client thread running [`PAIRS`] pairs of sequences,
//! leaving its initial state and coming back):
//!
//! | test | system | initial | threads |
//! |---|---|---|---|
//! | `lmutin_ring6_*` | LMUTIN, ring:6, l = 2 | all in | 6 processes + 6 clients |
//! | `lmutex_ring8_*` | LMUTEX, ring:8, k = 1 | all out | 8 + 8 |
//! | `gcs_complete5_*` | (1,3)-GCS, complete:5 (majority coterie, Maekawa inside) | P0, P1 in | 5 + 5 |
//! | `maekawa_complete5_*` | Maekawa, complete:5 (majority coterie) | all out | 5 + 5 |
//!
//! Each system runs [`RANDOM_SCHEDULES`] = 2,000 schedules under `RandomScheduler` and
//! [`PCT_SCHEDULES`] = 2,000 under `PctScheduler` of depth [`PCT_DEPTH`] = 3: 16,000 schedules
//! of the four systems, plus [`WATCHDOG_SCHEDULES`] = 1,000 of LMUTEX ring:6 with stall
//! detection on, 100 of the watchdog's positive control, and the broken variant (which stops
//! at its first failing schedule). Every execution asserts that the monitor saw no violation,
//! that every client completed its pairs landing in the state it aimed at, and that the
//! runtime published exactly two state changes per pair. Measured on the 2-core development
//! machine in release: the test binary runs in about 30 s (the 12 tests, two at a time); a
//! cold build of the library and the test with `--no-default-features` takes a few minutes
//! more.
//!
//! **Time.** Shuttle has no clock. Under `cfg(shuttle)` a timed condvar wait times out at once
//! after yielding to the scheduler (see `src/sync.rs`): the stall watchdog's two readings are
//! then as close together as a schedule makes them, the worst case for a false stall.
//! `watchdog_reports_no_false_stall` runs LMUTEX ring:6 with the watchdog on and asserts no
//! client ever gets `Stalled`; `watchdog_still_finds_a_real_stall` checks it is not vacuous.
//!
//! **The broken variant.** [`Split`] wraps a CS object so that every handler runs in two
//! non-atomic halves: the first half sends the handler's messages, the second (a message the
//! process sends itself, handled later like any other) publishes the state change. Peers can
//! then react to a change the monitor has not seen yet, and the monitor sees a configuration
//! that breaks the bounds. `split_handlers_are_caught_and_replay` (random scheduler, LMUTEX
//! ring:8) and `split_handlers_are_caught_by_pct` (PCT, Maekawa complete:5) assert that
//! shuttle finds such a schedule, that the failure is the monitor's assertion and nothing
//! else, and that the schedule shuttle saved, passed as a string to `shuttle::replay`'s
//! scheduler, replays to the very same failure (the same violations after the same number of
//! changes).
//!
//! **Replaying a failure.** Every runner here saves a failing schedule to a file in
//! `<target dir>/tmp/shuttle-schedules/` (`scheduleNNN.txt`; shuttle prints the path, and the
//! random scheduler its failing seed). The file holds the schedule string that
//! `shuttle::replay` takes. To replay it deterministically, run the failing test alone with
//! the file in `LKCS_SHUTTLE_REPLAY`: the test then runs that one schedule instead of
//! exploring.
//!
//! ```text
//! LKCS_SHUTTLE_REPLAY=target/shuttle/tmp/shuttle-schedules/schedule000.txt \
//!   RUSTFLAGS="--cfg shuttle" cargo test --release --no-default-features --test shuttle \
//!   --target-dir target/shuttle lmutex_ring8_random -- --exact
//! ```
//!
//! Setting `SHUTTLE_RANDOM_SEED` pins the random and PCT schedulers' seed instead (the whole
//! exploration is then repeated up to the failure). Replay is exact because nothing else in
//! these systems is nondeterministic: none of the four algorithms reads the runtime's clock.
#![cfg(shuttle)]

use lkcs::cs::{CsObject, Message, Outbox, Sequence};
use lkcs::{
    cs::CsState,
    runtime::{CondvarMailbox, Handle, Runtime, RuntimeConfig, RuntimeError},
    Algorithm, CallError, Instance, SystemSpec, SystemVisitor, Topology,
};
use shuttle::scheduler::{PctScheduler, RandomScheduler, ReplayScheduler, Scheduler};
use shuttle::{Config, FailurePersistence, Runner};
use std::any::Any;
use std::borrow::Cow;
use std::collections::{BTreeSet, VecDeque};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::Duration;

/// Exit/Entry pairs each client runs in one execution.
const PAIRS: usize = 3;
/// Executions under the random scheduler, per system.
const RANDOM_SCHEDULES: usize = 2_000;
/// Executions under PCT, per system.
const PCT_SCHEDULES: usize = 2_000;
/// Executions of the watchdog run.
const WATCHDOG_SCHEDULES: usize = 1_000;
/// PCT's bug depth (the number of priority change points is one less).
const PCT_DEPTH: usize = 3;
/// Set to a saved schedule file: each test replays that schedule once instead of exploring.
const REPLAY_ENV: &str = "LKCS_SHUTTLE_REPLAY";

/// Where every runner of this binary saves failing schedules. Shuttle installs its failure
/// hook once per process with the configuration of the first runner, so every runner here
/// uses the same directory.
fn schedule_dir() -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("shuttle-schedules");
    std::fs::create_dir_all(&dir).expect("create the schedule directory");
    dir
}

/// The configuration of every runner: failing schedules go to [`schedule_dir`]; the warning
/// that shuttle treats every atomic ordering as `SeqCst` is silenced (the runtime's `Relaxed`
/// counters are only read after joins); larger stacks than the default 60 KiB for the
/// algorithms' handlers.
fn config() -> Config {
    let mut c = Config::new();
    c.failure_persistence = FailurePersistence::File(Some(schedule_dir()));
    c.silence_warnings = true;
    c.stack_size = 0x4_0000;
    c
}

/// How one test drives shuttle.
#[derive(Clone, Debug)]
enum Explore {
    /// `RandomScheduler` for this many executions.
    Random(usize),
    /// `PctScheduler` of depth [`PCT_DEPTH`] for this many executions.
    Pct(usize),
    /// One execution along an encoded schedule (`shuttle::replay`).
    Replay(String),
}

/// Runs `body` under `how` (or replays the schedule file named by [`REPLAY_ENV`]); returns the
/// number of executions.
fn explore(how: &Explore, body: impl Fn() + Send + Sync + 'static) -> usize {
    fn run<S: Scheduler + 'static>(s: S, body: impl Fn() + Send + Sync + 'static) -> usize {
        Runner::new(s, config()).run(body)
    }
    if let Ok(path) = std::env::var(REPLAY_ENV) {
        let s = ReplayScheduler::new_from_file(&path).expect("read the schedule file");
        return run(s, body);
    }
    match how {
        Explore::Random(n) => run(RandomScheduler::new(*n), body),
        Explore::Pct(n) => run(PctScheduler::new(PCT_DEPTH, *n), body),
        Explore::Replay(s) => run(ReplayScheduler::new_from_encoded(s), body),
    }
}

/// What one execution does beyond cycling pairs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Plain monitored run.
    Plain,
    /// Stall detection on: no client may be told `Stalled`.
    Watchdog,
}

/// One client: `pairs` pairs of sequences, the first one leaving the published state, each
/// checked to land in the state it aims at.
fn client<A: CsObject>(h: Handle<A, CondvarMailbox>, pairs: usize) -> Result<usize, RuntimeError> {
    let first = Sequence::leaving(h.state());
    for _ in 0..pairs {
        for seq in [first, first.flip()] {
            h.run(seq, None)?;
            let target = match seq {
                Sequence::Entry => CsState::InCs,
                Sequence::Exit => CsState::OutCs,
            };
            assert_eq!(h.state(), target, "{} after {seq:?}", h.id());
        }
    }
    Ok(pairs)
}

/// One execution: the monitored runtime on the condvar mailbox, one shuttle thread per client
/// running [`client`], then shutdown and the checks.
fn execution<A: CsObject>(inst: &Instance, procs: &[A], pairs: usize, mode: Mode) {
    let n = procs.len();
    let config = RuntimeConfig {
        monitor: Some(inst.clone()),
    };
    let mut rt = Runtime::<A, CondvarMailbox>::start_with_mailbox(procs.to_vec(), config)
        .expect("the runtime starts");
    if mode == Mode::Watchdog {
        rt.detect_stalls(Duration::from_millis(1))
            .expect("the watchdog starts");
    }
    let handles = rt.take_handles().expect("the handles");
    let clients: Vec<_> = handles
        .into_iter()
        .map(|h| shuttle::thread::spawn(move || client(h, pairs)))
        .collect();
    let results: Vec<Result<usize, RuntimeError>> = clients
        .into_iter()
        .map(|c| c.join().expect("a client thread panicked"))
        .collect();
    rt.shutdown();
    let report = rt.report();
    assert!(report.monitored);
    assert!(
        report.violations == 0,
        "the monitor saw {} violation(s); first: {:?}",
        report.violations,
        report.first_violations
    );
    for (i, r) in results.iter().enumerate() {
        assert_eq!(r, &Ok(pairs), "the client of P{i}");
    }
    assert_eq!(report.state_changes, (2 * pairs * n) as u64);
}

/// Explores one system: built by [`SystemSpec::build`], run by [`execution`] under `how`.
struct Run {
    how: Explore,
    mode: Mode,
    /// Wrap every process in [`Split`] (the broken variant).
    split: bool,
}

impl SystemVisitor for Run {
    type Output = usize;
    fn visit<A: CsObject>(self, inst: &Instance, _: &[CsState], procs: Vec<A>) -> usize {
        let (inst, mode) = (inst.clone(), self.mode);
        if self.split {
            let procs: Vec<Split<A>> = procs.into_iter().map(Split::new).collect();
            explore(&self.how, move || execution(&inst, &procs, PAIRS, mode))
        } else {
            explore(&self.how, move || execution(&inst, &procs, PAIRS, mode))
        }
    }
}

/// The four systems of the issue, and a smaller LMUTEX for the watchdog.
#[derive(Clone, Copy, Debug)]
enum System {
    LmutinRing6,
    LmutexRing8,
    GcsComplete5,
    MaekawaComplete5,
    LmutexRing6,
}

fn spec(system: System) -> SystemSpec {
    use CsState::{InCs as I, OutCs as O};
    let (algorithm, topology, l, k, initial) = match system {
        System::LmutinRing6 => (Algorithm::Lmutin, "ring:6", Some(2), None, vec![I; 6]),
        System::LmutexRing8 => (Algorithm::Lmutex, "ring:8", None, Some(1), vec![O; 8]),
        System::LmutexRing6 => (Algorithm::Lmutex, "ring:6", None, Some(1), vec![O; 6]),
        System::GcsComplete5 => (
            Algorithm::Gcs,
            "complete:5",
            Some(1),
            Some(3),
            vec![I, I, O, O, O],
        ),
        System::MaekawaComplete5 => (Algorithm::Maekawa, "complete:5", None, None, vec![O; 5]),
    };
    SystemSpec {
        algorithm,
        topology: Topology::parse(topology).expect("a valid topology"),
        l,
        k,
        bounds: None,
        initial: Some(initial),
        variant: lkcs::cs::Variant::Corrected,
        leader: None,
        coterie: None,
        mx: None,
        maxreq: None,
        migrate_after: None,
    }
}

/// Explores `system` under `how` and checks shuttle ran every execution asked for.
fn check(system: System, how: Explore, mode: Mode) {
    let expected = match &how {
        Explore::Random(n) | Explore::Pct(n) => *n,
        Explore::Replay(_) => 1,
    };
    let run = Run {
        how,
        mode,
        split: false,
    };
    let executions = spec(system).build(run).expect("a valid system");
    if std::env::var(REPLAY_ENV).is_err() {
        assert_eq!(executions, expected, "{system:?}");
    }
}

/// [`RANDOM_SCHEDULES`] executions of `system` under the random scheduler.
fn random(system: System) {
    check(system, Explore::Random(RANDOM_SCHEDULES), Mode::Plain);
}

/// [`PCT_SCHEDULES`] executions of `system` under PCT.
fn pct(system: System) {
    check(system, Explore::Pct(PCT_SCHEDULES), Mode::Plain);
}

#[test]
fn lmutin_ring6_random() {
    random(System::LmutinRing6);
}

#[test]
fn lmutin_ring6_pct() {
    pct(System::LmutinRing6);
}

#[test]
fn lmutex_ring8_random() {
    random(System::LmutexRing8);
}

#[test]
fn lmutex_ring8_pct() {
    pct(System::LmutexRing8);
}

#[test]
fn gcs_complete5_random() {
    random(System::GcsComplete5);
}

#[test]
fn gcs_complete5_pct() {
    pct(System::GcsComplete5);
}

#[test]
fn maekawa_complete5_random() {
    random(System::MaekawaComplete5);
}

#[test]
fn maekawa_complete5_pct() {
    pct(System::MaekawaComplete5);
}

/// With timed waits timing out at once, the watchdog reads the system over and over while a
/// client is blocked; it must never end a wait of a system that is merely slow.
#[test]
fn watchdog_reports_no_false_stall() {
    check(
        System::LmutexRing6,
        Explore::Random(WATCHDOG_SCHEDULES),
        Mode::Watchdog,
    );
}

/// The positive control of the watchdog under shuttle: P1 is out of the CS holding both
/// permissions of path:2 with l = 1, and its handle is dropped, so P0's exit can never
/// complete: in every schedule the watchdog tells P0's client `Stalled`.
#[test]
fn watchdog_still_finds_a_real_stall() {
    let topo = Topology::path(2).expect("path:2");
    let initial = [CsState::InCs, CsState::OutCs];
    let (inst, procs) = lkcs::algo::lmutin::Lmutin::system(
        &topo,
        &[1, 1],
        &initial,
        lkcs::algo::lmutin::LmutinRules::CORRECTED,
    )
    .expect("the system");
    let body = move || {
        let config = RuntimeConfig {
            monitor: Some(inst.clone()),
        };
        let mut rt = Runtime::<_, CondvarMailbox>::start_with_mailbox(procs.clone(), config)
            .expect("the runtime starts");
        rt.detect_stalls(Duration::from_millis(1))
            .expect("the watchdog starts");
        let mut handles = rt.take_handles().expect("the handles");
        drop(handles.pop());
        let h0 = handles.pop().expect("P0's handle");
        let client = shuttle::thread::spawn(move || h0.exit());
        let result = client.join().expect("the client thread");
        assert!(
            matches!(result, Err(RuntimeError::Stalled(_))),
            "P0's exit returned {result:?}"
        );
        rt.shutdown();
        assert_eq!(rt.report().violations, 0);
    };
    if std::env::var(REPLAY_ENV).is_err() {
        assert_eq!(explore(&Explore::Random(100), body), 100);
    }
}

// ---------------------------------------------------------------------------------------------
// The broken variant: handlers split in two non-atomic halves.

/// A CS object whose handlers run in two halves: the first sends the handler's messages at
/// once, the second publishes the handler's state change and completion later, when the
/// process handles the [`SplitMsg::Commit`] it sent itself. The algorithm inside runs
/// unchanged; only what the runtime publishes lags behind what peers have been told.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct Split<A> {
    inner: A,
    /// The state the runtime sees (and publishes to the monitor and the client).
    shown: CsState,
    /// Second halves not yet run: the state to show, and whether a sequence completed.
    backlog: VecDeque<(CsState, bool)>,
}

/// A [`Split`] object's messages: the algorithm's, and the process's own second halves.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
enum SplitMsg<M> {
    Inner(M),
    Commit,
}

impl<M: Message> Message for SplitMsg<M> {
    fn kind(&self) -> Cow<'static, str> {
        match self {
            SplitMsg::Inner(m) => m.kind(),
            SplitMsg::Commit => "Commit".into(),
        }
    }
}

impl<A: CsObject> Split<A> {
    fn new(inner: A) -> Split<A> {
        Split {
            shown: inner.state(),
            inner,
            backlog: VecDeque::new(),
        }
    }

    /// The first half of a handler: runs `f` on the algorithm, sends its messages, and
    /// leaves its state change to a later second half.
    fn first_half<R>(
        &mut self,
        out: &mut Outbox<SplitMsg<A::Msg>>,
        f: impl FnOnce(&mut A, &mut Outbox<A::Msg>) -> R,
    ) -> R {
        let before = self.inner.state();
        let mut inner_out = Outbox::new();
        let r = f(&mut self.inner, &mut inner_out);
        let completed = inner_out.take_completed();
        for (to, m) in inner_out.drain() {
            out.send(to, SplitMsg::Inner(m));
        }
        if completed || self.inner.state() != before {
            self.backlog.push_back((self.inner.state(), completed));
            out.send(self.inner.id(), SplitMsg::Commit);
        }
        r
    }
}

impl<A: CsObject> CsObject for Split<A> {
    type Msg = SplitMsg<A::Msg>;

    fn id(&self) -> lkcs::ProcessId {
        self.inner.id()
    }

    fn state(&self) -> CsState {
        self.shown
    }

    fn pending(&self) -> Option<Sequence> {
        // a sequence completed in a first half is still pending until its second half
        let unshown = self.backlog.iter().any(|&(_, completed)| completed);
        self.inner
            .pending()
            .or(unshown.then(|| Sequence::leaving(self.shown)))
    }

    fn begin_entry(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        self.first_half(out, |a, o| a.begin_entry(o))
    }

    fn begin_exit(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        self.first_half(out, |a, o| a.begin_exit(o))
    }

    fn on_message(&mut self, from: lkcs::ProcessId, msg: Self::Msg, out: &mut Outbox<Self::Msg>) {
        match msg {
            SplitMsg::Inner(m) => self.first_half(out, |a, o| a.on_message(from, m, o)),
            SplitMsg::Commit => {
                if let Some((state, completed)) = self.backlog.pop_front() {
                    self.shown = state;
                    if completed {
                        out.complete();
                    }
                }
            }
        }
    }

    fn set_time(&mut self, now: u64) {
        self.inner.set_time(now);
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.inner.check_invariants()
    }
}

/// The message of a caught panic.
fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else {
        "a panic without a message".to_string()
    }
}

/// Runs the split variant of `system` under `how`; the message of the failure it must end in.
fn split_failure(system: System, how: Explore) -> String {
    let run = Run {
        how,
        mode: Mode::Plain,
        split: true,
    };
    let spec = spec(system);
    match catch_unwind(AssertUnwindSafe(|| spec.build(run))) {
        Ok(r) => panic!("shuttle did not catch the split handlers: {r:?}"),
        Err(payload) => panic_message(payload.as_ref()),
    }
}

/// Held by the tests that expect a failure, so the schedule files they save do not mix.
static FAILING: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// The schedule files in [`schedule_dir`].
fn saved_schedules() -> BTreeSet<PathBuf> {
    std::fs::read_dir(schedule_dir())
        .expect("read the schedule directory")
        .map(|e| e.expect("a directory entry").path())
        .collect()
}

/// Removes the schedule files saved since `before` and returns the complete schedule. Shuttle
/// saves a failing schedule when the task panics and, when unwinding that task took further
/// steps, once more after it has unwound: the later file (the higher number, as each save
/// takes the first free one) is the whole execution.
fn take_saved_schedule(before: &BTreeSet<PathBuf>) -> String {
    let new: Vec<PathBuf> = saved_schedules().difference(before).cloned().collect();
    assert!(
        (1..=2).contains(&new.len()),
        "one failing schedule saved, once or twice: {new:?}"
    );
    let last = new
        .iter()
        .max_by_key(|p| p.file_name().map(|n| n.to_owned()));
    let schedule = std::fs::read_to_string(last.expect("a file")).expect("read the schedule");
    remove_saved_since(before);
    schedule
}

/// Removes the schedule files saved since `before`.
fn remove_saved_since(before: &BTreeSet<PathBuf>) {
    for p in saved_schedules().difference(before) {
        let _ = std::fs::remove_file(p);
    }
}

/// Shuttle catches the split handlers (the monitor's assertion fails, nothing else), saves
/// the failing schedule, and replaying that schedule string with `shuttle::replay` fails in
/// exactly the same way: the same violations, found after the same number of changes.
#[test]
fn split_handlers_are_caught_and_replay() {
    if std::env::var(REPLAY_ENV).is_ok() {
        return; // replaying a saved schedule is for the test that saved it
    }
    let _one_at_a_time = FAILING.lock().unwrap_or_else(|e| e.into_inner());
    let before = saved_schedules();
    let message = split_failure(System::LmutexRing8, Explore::Random(RANDOM_SCHEDULES));
    assert!(
        message.starts_with("the monitor saw ") && message.contains("MonitorViolation"),
        "the failure is not the monitor's: {message}"
    );
    let schedule = take_saved_schedule(&before);
    assert!(!schedule.trim().is_empty());
    let replayed = split_failure(System::LmutexRing8, Explore::Replay(schedule.clone()));
    remove_saved_since(&before); // the replay saved its schedule again
    assert_eq!(replayed, message, "the replay of {schedule}");
}

/// PCT catches the split handlers of Maekawa too, with the monitor's failure, and its saved
/// schedule replays too.
#[test]
fn split_handlers_are_caught_by_pct() {
    if std::env::var(REPLAY_ENV).is_ok() {
        return;
    }
    let _one_at_a_time = FAILING.lock().unwrap_or_else(|e| e.into_inner());
    let before = saved_schedules();
    let message = split_failure(System::MaekawaComplete5, Explore::Pct(PCT_SCHEDULES));
    assert!(
        message.starts_with("the monitor saw ") && message.contains("MonitorViolation"),
        "the failure is not the monitor's: {message}"
    );
    let schedule = take_saved_schedule(&before);
    let replayed = split_failure(System::MaekawaComplete5, Explore::Replay(schedule));
    remove_saved_since(&before);
    assert_eq!(replayed, message);
}
