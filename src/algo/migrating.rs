//! Migrating-controller mutual exclusion: the generalized framework (Requests-info ×
//! Migration-info) and its two instances CDC (centralized queue) and DDC (distributed queue),
//! `papers/migrating-controller-mutex.txt` §2 (framework) and §4 (CDC, DDC).
//!
//! **Problem.** Global mutual exclusion on `complete:N`: at most one process in the CS, every
//! request granted. One server at a time is the *controller*: it schedules the requests and,
//! when a migration condition holds at an exit, hands the controller role to another server.
//!
//! **Roles.** The paper splits node i into a client P_i and a MUTEX server M_i; here the client
//! is the driver's handle (`begin_entry` = request-cs-entry from P_i, the completion signal =
//! request-granted to P_i, `begin_exit` = exit-cs from P_i), so client–server exchanges are not
//! network messages. The server's three roles (requestor, controller, auxiliary) are the one
//! [`Migrating`] object, generic over the two abstract types: [`RequestsInfo`]
//! (register_request, select_request, update_controller_info) and [`MigrationInfo`]
//! (test_migration_condition, select_next_controller). An Exit completes at once (the client
//! just sends exit-cs); an Entry completes when the grant arrives.
//!
//! **Messages** (between servers; self-addressed ones travel like any other and are counted as
//! messages, not as remote messages): `Request` (request-cs-entry; kind `ForwardedRequest`
//! once a server that is not the controller forwarded it), `Granted` (request-granted), `ExitCs` (DDC: carries next-in-q), `WakeUp`
//! (always to self), `BecomeController` (carries the controller's share of Requests-info),
//! `NewController` (update_controller_info, "inform all"), DDC's `NextRequestor`, and `Orphan`
//! (DDC: hands a next-requestor that arrived too late back to the controller; deviation 6).
//!
//! **Variables of M_i.**
//!
//! | paper | here | meaning |
//! |---|---|---|
//! | `current-controller` | `controller` (+ `epoch`) | the controller as known here; `epoch` counts migrations (deviation 4) |
//! | controller role active | `active` | whether M_i is the controller |
//! | `request-queue` (CDC) | [`CentralQueue`] `queue` | pending requests, at the controller |
//! | `cs-status` | `busy` | free / busy, at the controller |
//! | `next-in-q` (DDC) | [`DistributedQueue`] `next_in_q` | the request after mine |
//! | `last-in-q`, `first-in-q` (DDC) | `last_in_q`, `first_in_q` | tail of the queue; head when no CS holder knows it |
//! | `req-served`, `maxreq`, timer (`maxtime`) | [`Migration`] | the migration condition's state |
//! | `candidate-controllers` | [`Migration::candidates`] | who may become controller (default: all) |
//!
//! **Complexity** (remote messages, DESIGN §4). A request from a server other than the
//! controller costs 3 (request, grant, exit-cs) without contention; a migration costs n−1
//! (new-controller to the n−2 others, become-controller to the successor); so CDC averages
//! 3 + (n−1)/maxreq per entry, 3 without migration. DDC adds a next-requestor when the queue is
//! not empty and a forward or an orphan hand-back in races: 3 to 5 + (n−1)/maxreq. Requests of
//! the controller itself are local (0 remote). Forwarding adds one message per hop.
//!
//! **Migration conditions** ([`MigrationCondition`]): never, always, counter-based (`maxreq`
//! requests served, then migrate; `maxreq = 1` = always) and timer-based (migrate at the
//! first exit at least `after` time units after becoming controller; units are the driver's:
//! logical time in the simulator, microseconds in the runtime, and the checker's time stays 0,
//! so there only `after = 0` ever fires). The condition is tested only at an exit-cs (the
//! controller migrates only between CS entries), and a migration happens only if
//! select_next_controller finds a candidate other than the caller.
//!
//! **select_next_controller** as printed: CDC takes the second request in the queue (the first
//! is granted next), else the lowest-numbered candidate other than the caller and the first;
//! DDC takes last-in-q, else the lowest-numbered candidate other than the caller ("any node":
//! the lowest, so runs are deterministic).
//!
//! **Assumptions.** Reliable FIFO links, atomic handlers, at most one process in the CS
//! initially; P0 is the initial controller.
//!
//! # Deviations from the paper
//!
//! Each printed rule is selectable alone through [`MigratingRules`] (all of them with
//! `--variant printed`); `tests/migrating.rs` has one test per deviation that shows the printed
//! rule fail and the corrected rules pass the same case. "The sweep" below is the seeded
//! concurrent simulation on `complete:4` with delays uniform in 1..=12, think times in 0..=8,
//! 3 pairs per process and migration at every exit (`maxreq = 1`), unless stated.
//!
//! 1. **`current-controller := 1` is `:= k`.** The printed line names node 1 (our P0): a
//!    server that migrated away points at P0, which may itself be retired and point back (or
//!    at itself), and a request is forwarded for ever: the sweep's CDC seed 114 stalls
//!    (livelock), the corrected rule passes it.
//! 2. **Migrate or grant, never both; become-controller carries the queue and cs-status.**
//!    The printed exit-cs handler migrates and then grants from the queue it kept, while the
//!    successor starts with an empty queue marked free: two processes in the CS (DDC seed 0
//!    of the sweep; the checker finds it on `complete:3` for CDC and DDC alike); the corrected
//!    rule passes the sweep's first 100 seeds.
//! 3. **A wake-up grants only while cs-status is free.** Two requests arriving while free send
//!    two wake-ups; printed, each grants: two processes in the CS (CDC seed 0 of the sweep
//!    without migration; the checker, DDC on `complete:3` without migration).
//! 4. **Controller identities carry an epoch (the migration count).** A new-controller
//!    message can be overtaken by later migrations (they travel on other links). Printed, it
//!    overwrites current-controller with a retired controller; when that happens to the
//!    process in the CS, its exit-cs goes to the retired server, whose deactivated controller
//!    role drops it (the print forwards only request-cs-entry), and cs-status stays busy for
//!    ever. The hand-driven trace of `deviation_4_controller_pointers_never_go_back`
//!    (`complete:5`, `maxreq = 2`) does exactly this. Corrected: new-controller and
//!    request-granted update the pointer only when their epoch is newer, so pointers only move
//!    to newer controllers and an exit-cs always reaches its grantor (which cannot migrate
//!    before that exit); a retired server would forward an exit-cs like a request.
//! 5. **DDC's select_request, rebuilt from the prose** (the printed text is garbled): with a
//!    piggybacked next-in-q, grant it; else grant first-in-q, the head recorded when a request
//!    found the queue empty; else cs-status := free. In both grant branches last-in-q := null
//!    when the granted request is the tail, and a request finding last-in-q null becomes
//!    first-in-q. Migration moves a piggybacked next-in-q into first-in-q before the hand-over
//!    (migrate or grant: the successor grants it). There is no printed rule to run; the unit
//!    tests below pin the rebuilt rule.
//! 6. **A late next-requestor is handed back.** The controller sends next-requestor(k) to the
//!    tail x while x waits; after a migration, x's grant comes from the successor on another
//!    link and can overtake it: x enters, exits with next-in-q = null, and k is lost. Printed
//!    (applied unconditionally): deadlock on `complete:3` with delays in 1..=100, seed 47 (and
//!    exhaustively on `complete:3`, `maxreq = 2`, 2 pairs). Corrected: requests carry a sequence
//!    number, next-requestor names the request it extends, and a server whose request is over
//!    sends `Orphan(k)` to the controller, which records k as first-in-q.
//!
//! # Unexpected messages
//!
//! A message no correct server would send never panics and never breaks
//! [`CsObject::check_invariants`] (`tests/hostile.rs`). A message from outside `0..n`, or
//! naming a server outside it (a requester, a next-in-q, a controller, an orphan, a queue
//! entry), is ignored, and so is a become-controller whose information is inconsistent (DDC:
//! a head without a tail). An active controller keeps pointing at itself whatever grant
//! arrives; a retired server follows a grant or a new-controller only to a newer epoch (as
//! deviation 4 says). DDC keeps its queue consistent: an orphan while the queue is empty is
//! dropped, granting the tail empties the queue, and a hand-over carries a head only with a
//! tail. Epochs saturate at `u64::MAX`. What the servers cannot tell from a correct message
//! is acted on: a granted while no entry is pending only moves the pointer, a forged
//! request is queued and granted in turn, a forged exit-cs or become-controller is obeyed
//! (a peer that lies about holding the CS or the controller role can break mutual
//! exclusion; the protocol has no authentication).
//!
//! Network assumptions: FIFO is not needed on the instance checked: CDC and DDC on complete:3
//! with migration at every exit are proved safe and deadlock-free over unordered links (`lkcs
//! check --algorithm cdc --topology complete:3 --maxreq 1 --network unordered`); with
//! duplication the space has no end and the check is only bounded (by 1 GiB, no violation). See
//! docs/checker.md.

use crate::config::{Bounds, Instance};
use crate::cs::{check_call, CsObject, CsState, Message, Outbox, Sequence, Variant};
use crate::error::{CallError, ConfigError, Problem};
use crate::id::ProcessId;
use crate::topology::Topology;
use std::borrow::Cow;
use std::collections::VecDeque;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

/// Migrating controller with a centralized queue (CDC).
pub type Cdc = Migrating<CentralQueue>;
/// Migrating controller with a distributed queue (DDC).
pub type Ddc = Migrating<DistributedQueue>;

/// The messages between MUTEX servers; `T` is the controller's share of the requests info,
/// carried by `BecomeController`. The sender is known from the link.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum MigratingMsg<T> {
    /// request-cs-entry of `requester`'s request number `seq`.
    Request {
        /// The requesting server.
        requester: ProcessId,
        /// Its request number.
        seq: u64,
        /// Whether a retired controller forwarded it (kind `ForwardedRequest` in metrics).
        forwarded: bool,
    },
    /// request-granted, from the controller of epoch `epoch`.
    Granted {
        /// The grantor's epoch.
        epoch: u64,
    },
    /// exit-cs; DDC piggybacks the exiting server's next-in-q.
    ExitCs {
        /// next-in-q (DDC), `None` in CDC.
        next: Option<ProcessId>,
    },
    /// The controller wakes itself up to schedule.
    WakeUp,
    /// The controller role moves to the receiver, with the controller's information.
    BecomeController {
        /// The new epoch.
        epoch: u64,
        /// The controller's share of the requests info.
        info: T,
    },
    /// update_controller_info ("inform all"): `controller` is the controller of `epoch`.
    NewController {
        /// The new controller.
        controller: ProcessId,
        /// Its epoch.
        epoch: u64,
    },
    /// DDC: `next` follows the receiver's request number `seq` in the queue.
    NextRequestor {
        /// The receiver's request this extends.
        seq: u64,
        /// The request after it.
        next: ProcessId,
    },
    /// DDC: a next-requestor arrived after the request it extends was over; `next` is the
    /// head of the queue (deviation 6).
    Orphan {
        /// The head of the queue.
        next: ProcessId,
    },
}

impl<T> Message for MigratingMsg<T>
where
    T: Clone
        + Debug
        + Eq
        + Ord
        + Hash
        + Send
        + Sync
        + serde::Serialize
        + serde::de::DeserializeOwned
        + 'static,
{
    fn kind(&self) -> Cow<'static, str> {
        Cow::Borrowed(match self {
            MigratingMsg::Request {
                forwarded: false, ..
            } => "Request",
            MigratingMsg::Request {
                forwarded: true, ..
            } => "ForwardedRequest",
            MigratingMsg::Granted { .. } => "Granted",
            MigratingMsg::ExitCs { .. } => "ExitCs",
            MigratingMsg::WakeUp => "WakeUp",
            MigratingMsg::BecomeController { .. } => "BecomeController",
            MigratingMsg::NewController { .. } => "NewController",
            MigratingMsg::NextRequestor { .. } => "NextRequestor",
            MigratingMsg::Orphan { .. } => "Orphan",
        })
    }
}

/// What select_next_controller is offered by the requests info: a preferred successor and a
/// server to avoid.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct NextHint {
    /// The preferred next controller (CDC: second in queue; DDC: last-in-q).
    pub preferred: Option<ProcessId>,
    /// A server not to choose in the fallback (CDC: the first in queue).
    pub avoid: Option<ProcessId>,
}

/// A notice to send when a request is registered at the controller (DDC's next-requestor).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NextRequestorNotice {
    /// The server whose request precedes the new one.
    pub to: ProcessId,
    /// That server's request number.
    pub seq: u64,
}

/// The abstract type REQUESTS-INFO (§2.2.1): where pending requests live and how the next one
/// is chosen. The framework ([`Migrating`]) does the routing: requests go to the current
/// controller and are forwarded by retired ones, and update_controller_info's broadcast
/// ("inform all") is the framework's `NewController`.
pub trait RequestsInfo: Clone + Debug + Eq + Hash + Send + Sync + 'static {
    /// The controller's share, carried by become-controller.
    type Transfer: Clone
        + Debug
        + Eq
        + Ord
        + Hash
        + Send
        + Sync
        + serde::Serialize
        + serde::de::DeserializeOwned
        + 'static;

    /// The information of a server at start; `busy` when some process starts in the CS
    /// (meaningful at the controller only).
    fn initial(busy: bool) -> Self;

    /// Requestor role: register_request(i) starts request number `seq` (DDC: next-in-q := null).
    fn register_request(&mut self, seq: u64);

    /// Requestor role: what exit-cs carries (DDC: next-in-q, taken).
    fn exit_info(&mut self) -> Option<ProcessId>;

    /// Requestor role (DDC): next-requestor(`next`) arrived; `live` says whether the request
    /// it extends is still this server's current request (waiting or in the CS). Returns the
    /// successor to hand back to the controller when it cannot be used here.
    fn on_next_requestor(
        &mut self,
        next: ProcessId,
        live: bool,
        printed: bool,
    ) -> Option<ProcessId>;

    /// Controller role: request `seq` of `k` arrived; returns a next-requestor to send.
    fn enqueue(&mut self, k: ProcessId, seq: u64) -> Option<NextRequestorNotice>;

    /// Controller role (DDC): the head of the queue came back in an `Orphan`.
    fn on_orphan(&mut self, head: ProcessId);

    /// Controller role: select_request(exit_info): the next server to grant, cs-status busy;
    /// or `None` and cs-status free (Property 3).
    fn select_request(&mut self, exit_info: Option<ProcessId>) -> Option<ProcessId>;

    /// Controller role: cs-status is free.
    fn is_free(&self) -> bool;

    /// Controller role: what select_next_controller should prefer and avoid.
    fn next_hint(&self, exit_info: Option<ProcessId>) -> NextHint;

    /// Controller role, at a migration after an exit: update_controller_info's hand-over
    /// (the CS is free; `exit_info` is the exit's piggyback). Leaves this server empty.
    fn update_controller_info(&mut self, exit_info: Option<ProcessId>) -> Self::Transfer;

    /// What a printed become-controller carries: nothing (an empty queue, free).
    fn empty_transfer() -> Self::Transfer;

    /// Auxiliary role: become-controller installs the controller's share.
    fn install(&mut self, info: Self::Transfer);

    /// Internal invariants (at the controller).
    fn check(&self) -> Result<(), String> {
        Ok(())
    }

    /// Whether a become-controller carrying `info` could come from a correct controller of
    /// `n` servers: it names only servers `0..n` and meets [`RequestsInfo::check`] once
    /// installed. The default accepts everything.
    fn accepts(info: &Self::Transfer, n: usize) -> bool {
        let _ = (info, n);
        true
    }
}

/// The abstract type MIGRATION-INFO (§2.2.2): when and where the controller migrates.
pub trait MigrationInfo: Clone + Debug + Eq + Hash + Send + Sync + 'static {
    /// The controller role starts at time `now` (counter := 0, timer started).
    fn start(&mut self, now: u64);
    /// test_migration_condition(), at an exit-cs handled at time `now`.
    fn test_migration_condition(&mut self, now: u64) -> bool;
    /// select_next_controller(): a server other than `me`, or `None` if there is none.
    fn select_next_controller(&self, me: ProcessId, hint: NextHint) -> Option<ProcessId>;
}

/// When to migrate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MigrationCondition {
    /// Never: a fixed central controller.
    Never,
    /// At every exit.
    Always,
    /// Counter-based: after `maxreq` exits served (`maxreq ≥ 1`; 1 is [`Always`](Self::Always)).
    Counter {
        /// Requests served before migrating.
        maxreq: usize,
    },
    /// Timer-based: at the first exit `after` time units (or more) after becoming controller,
    /// in the driver's units (simulator: logical time; runtime: microseconds).
    Timer {
        /// The timer, in driver time units.
        after: u64,
    },
}

impl MigrationCondition {
    /// Timer-based migration for the thread runtime, whose time is microseconds since start.
    pub fn timer(after: Duration) -> MigrationCondition {
        MigrationCondition::Timer {
            after: u64::try_from(after.as_micros()).unwrap_or(u64::MAX),
        }
    }

    /// Timer-based migration in logical time units (the simulator's).
    pub fn timer_units(after: u64) -> MigrationCondition {
        MigrationCondition::Timer { after }
    }

    /// The condition the CLI options describe: `--maxreq M` (M ≥ 1), `--migrate-after T`
    /// (exclusive), neither: never migrate.
    pub fn from_options(
        maxreq: Option<usize>,
        migrate_after: Option<u64>,
    ) -> Result<MigrationCondition, ConfigError> {
        match (maxreq, migrate_after) {
            (Some(_), Some(_)) => Err(ConfigError::one(Problem::Invalid(
                "--maxreq and --migrate-after are exclusive (one migration condition)".into(),
            ))),
            (Some(0), None) => Err(ConfigError::one(Problem::Invalid(
                "--maxreq must be at least 1 (omit it to never migrate)".into(),
            ))),
            (Some(maxreq), None) => Ok(MigrationCondition::Counter { maxreq }),
            (None, Some(after)) => Ok(MigrationCondition::Timer { after }),
            (None, None) => Ok(MigrationCondition::Never),
        }
    }
}

/// The MIGRATION-INFO of §3.2 / §4.1.2: a [`MigrationCondition`] and the candidate list.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Migration {
    condition: MigrationCondition,
    /// Shared by the clones of one `Migration` (every process of a system): n ids in all,
    /// not n per process.
    candidates: std::sync::Arc<[ProcessId]>,
    served: usize,
    since: u64,
}

impl Migration {
    /// Every one of the `n` servers is a candidate.
    pub fn new(condition: MigrationCondition, n: usize) -> Migration {
        Migration::with_candidates(condition, (0..n).map(ProcessId::from).collect())
    }

    /// Only `candidates` may become controller (sorted, deduplicated).
    pub fn with_candidates(condition: MigrationCondition, mut candidates: Vec<ProcessId>) -> Self {
        candidates.sort();
        candidates.dedup();
        Migration {
            condition,
            candidates: candidates.into(),
            served: 0,
            since: 0,
        }
    }

    /// The candidate controllers.
    pub fn candidates(&self) -> &[ProcessId] {
        &self.candidates
    }

    /// The condition.
    pub fn condition(&self) -> MigrationCondition {
        self.condition
    }
}

impl MigrationInfo for Migration {
    fn start(&mut self, now: u64) {
        self.served = 0;
        self.since = now;
    }

    fn test_migration_condition(&mut self, now: u64) -> bool {
        match self.condition {
            MigrationCondition::Never => false,
            MigrationCondition::Always => true,
            MigrationCondition::Counter { maxreq } => {
                self.served += 1;
                if self.served >= maxreq {
                    self.served = 0;
                    true
                } else {
                    false
                }
            }
            MigrationCondition::Timer { after } => now.saturating_sub(self.since) >= after,
        }
    }

    fn select_next_controller(&self, me: ProcessId, hint: NextHint) -> Option<ProcessId> {
        if let Some(k) = hint.preferred {
            if k != me && self.candidates.binary_search(&k).is_ok() {
                return Some(k);
            }
        }
        let others = || self.candidates.iter().copied().filter(move |&c| c != me);
        others()
            .find(|&c| Some(c) != hint.avoid)
            .or_else(|| others().next())
    }
}

/// CDC's REQUESTS-INFO (§4.1.1): a queue at the controller.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct CentralQueue {
    queue: VecDeque<ProcessId>,
    busy: bool,
}

/// CDC's hand-over: the queue and cs-status.
#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct CdcTransfer {
    /// The pending requests, first to be granted first.
    pub queue: Vec<ProcessId>,
    /// cs-status = busy.
    pub busy: bool,
}

impl RequestsInfo for CentralQueue {
    type Transfer = CdcTransfer;

    fn initial(busy: bool) -> Self {
        CentralQueue {
            queue: VecDeque::new(),
            busy,
        }
    }

    fn register_request(&mut self, _seq: u64) {}

    fn exit_info(&mut self) -> Option<ProcessId> {
        None
    }

    fn on_next_requestor(&mut self, _: ProcessId, _: bool, _: bool) -> Option<ProcessId> {
        None
    }

    fn enqueue(&mut self, k: ProcessId, _seq: u64) -> Option<NextRequestorNotice> {
        self.queue.push_back(k);
        None
    }

    fn on_orphan(&mut self, _head: ProcessId) {}

    fn select_request(&mut self, _exit_info: Option<ProcessId>) -> Option<ProcessId> {
        let j = self.queue.pop_front();
        self.busy = j.is_some();
        j
    }

    fn is_free(&self) -> bool {
        !self.busy
    }

    fn next_hint(&self, _exit_info: Option<ProcessId>) -> NextHint {
        NextHint {
            preferred: self.queue.get(1).copied(),
            avoid: self.queue.front().copied(),
        }
    }

    fn update_controller_info(&mut self, _exit_info: Option<ProcessId>) -> CdcTransfer {
        self.busy = false;
        CdcTransfer {
            queue: std::mem::take(&mut self.queue).into(),
            busy: false,
        }
    }

    fn empty_transfer() -> CdcTransfer {
        CdcTransfer::default()
    }

    fn install(&mut self, info: CdcTransfer) {
        self.queue = info.queue.into();
        self.busy = info.busy;
    }

    fn accepts(info: &CdcTransfer, n: usize) -> bool {
        info.queue.iter().all(|p| p.index() < n)
    }
}

/// DDC's REQUESTS-INFO (§4.2.1): a linked list over the requesters; the controller keeps the
/// tail (and the head while no CS holder knows it).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct DistributedQueue {
    next_in_q: Option<ProcessId>,
    last_in_q: Option<(ProcessId, u64)>,
    first_in_q: Option<ProcessId>,
    busy: bool,
}

/// DDC's hand-over: first-in-q, last-in-q (with its request number) and cs-status.
#[derive(
    Clone,
    Debug,
    Default,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    serde::Serialize,
    serde::Deserialize,
)]
pub struct DdcTransfer {
    /// The head of the queue, if the controller holds it.
    pub first: Option<ProcessId>,
    /// The tail of the queue and its request number.
    pub last: Option<(ProcessId, u64)>,
    /// cs-status = busy.
    pub busy: bool,
}

impl DistributedQueue {
    fn granting(&mut self, j: ProcessId) -> Option<ProcessId> {
        if self.last_in_q.map(|(p, _)| p) == Some(j) {
            self.last_in_q = None;
            // the tail is granted: the queue is empty (a head left over here can only come
            // from a message no correct server sends; see "Unexpected messages")
            self.first_in_q = None;
        }
        self.busy = true;
        Some(j)
    }
}

impl RequestsInfo for DistributedQueue {
    type Transfer = DdcTransfer;

    fn initial(busy: bool) -> Self {
        DistributedQueue {
            next_in_q: None,
            last_in_q: None,
            first_in_q: None,
            busy,
        }
    }

    fn register_request(&mut self, _seq: u64) {
        self.next_in_q = None;
    }

    fn exit_info(&mut self) -> Option<ProcessId> {
        self.next_in_q.take()
    }

    fn on_next_requestor(
        &mut self,
        next: ProcessId,
        live: bool,
        printed: bool,
    ) -> Option<ProcessId> {
        if live || printed {
            self.next_in_q = Some(next);
            None
        } else {
            Some(next)
        }
    }

    fn enqueue(&mut self, k: ProcessId, seq: u64) -> Option<NextRequestorNotice> {
        let notice = match self.last_in_q {
            Some((to, seq)) => Some(NextRequestorNotice { to, seq }),
            None => {
                self.first_in_q = Some(k);
                None
            }
        };
        self.last_in_q = Some((k, seq));
        notice
    }

    fn on_orphan(&mut self, head: ProcessId) {
        // an orphan while the queue is empty has no queue to head: ignored
        if self.last_in_q.is_some() {
            self.first_in_q = Some(head);
        }
    }

    fn select_request(&mut self, exit_info: Option<ProcessId>) -> Option<ProcessId> {
        if let Some(j) = exit_info {
            return self.granting(j);
        }
        if let Some(j) = self.first_in_q.take() {
            return self.granting(j);
        }
        self.busy = false;
        None
    }

    fn is_free(&self) -> bool {
        !self.busy
    }

    fn next_hint(&self, _exit_info: Option<ProcessId>) -> NextHint {
        NextHint {
            preferred: self.last_in_q.map(|(p, _)| p),
            avoid: None,
        }
    }

    fn update_controller_info(&mut self, exit_info: Option<ProcessId>) -> DdcTransfer {
        let first = exit_info.or(self.first_in_q.take());
        let last = self.last_in_q.take();
        let t = DdcTransfer {
            // a head without a tail only comes from a message no correct server sends
            first: first.filter(|_| last.is_some()),
            last,
            busy: false,
        };
        self.busy = false;
        t
    }

    fn empty_transfer() -> DdcTransfer {
        DdcTransfer::default()
    }

    fn install(&mut self, info: DdcTransfer) {
        self.first_in_q = info.first;
        self.last_in_q = info.last;
        self.busy = info.busy;
    }

    fn check(&self) -> Result<(), String> {
        if self.first_in_q.is_some() && self.last_in_q.is_none() {
            return Err("first-in-q set with an empty queue".into());
        }
        Ok(())
    }

    fn accepts(info: &DdcTransfer, n: usize) -> bool {
        let named = info.first.into_iter().chain(info.last.map(|(p, _)| p));
        named.into_iter().all(|p| p.index() < n) && (info.first.is_none() || info.last.is_some())
    }
}

/// Which printed rules to follow (see "Deviations from the paper"); `true` selects the print.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct MigratingRules {
    /// Deviation 1: `current-controller := 1` after a migration (node 1 = P0).
    pub literal_controller_one: bool,
    /// Deviation 2: migrate *and* grant; become-controller carries nothing.
    pub migrate_and_grant: bool,
    /// Deviation 3: a wake-up grants whatever cs-status says.
    pub unguarded_wake_up: bool,
    /// Deviation 4: every new-controller / grant overwrites current-controller; a retired
    /// server drops exit-cs.
    pub unstamped_controller: bool,
    /// Deviation 6 (DDC): next-requestor applied unconditionally.
    pub unguarded_next_requestor: bool,
}

impl MigratingRules {
    /// The corrected algorithm.
    pub const CORRECTED: MigratingRules = MigratingRules {
        literal_controller_one: false,
        migrate_and_grant: false,
        unguarded_wake_up: false,
        unstamped_controller: false,
        unguarded_next_requestor: false,
    };
    /// Every rule as printed.
    pub const PRINTED: MigratingRules = MigratingRules {
        literal_controller_one: true,
        migrate_and_grant: true,
        unguarded_wake_up: true,
        unstamped_controller: true,
        unguarded_next_requestor: true,
    };
}

impl From<Variant> for MigratingRules {
    fn from(v: Variant) -> Self {
        match v {
            Variant::Corrected | Variant::Trip => MigratingRules::CORRECTED,
            Variant::Printed => MigratingRules::PRINTED,
        }
    }
}

/// One node (requestor, controller and auxiliary roles) of a migrating-controller mutual
/// exclusion algorithm, generic over its REQUESTS-INFO `R` and MIGRATION-INFO `G`.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Migrating<R: RequestsInfo, G: MigrationInfo = Migration> {
    id: ProcessId,
    n: usize,
    state: CsState,
    pending: Option<Sequence>,
    controller: ProcessId,
    epoch: u64,
    active: bool,
    seq: u64,
    requests: R,
    migration: G,
    now: u64,
    rules: MigratingRules,
}

/// The (0, 1) instance on `topology` (global mutual exclusion), which must be complete.
pub fn mutex_instance(topology: &Topology) -> Result<Instance, ConfigError> {
    if !topology.is_complete() {
        return Err(ConfigError::one(Problem::Invalid(format!(
            "global algorithms run on complete:N; {} is not complete",
            topology.name()
        ))));
    }
    Instance::new(
        topology.clone(),
        vec![Bounds { l: 0, k: 1 }; topology.len()],
    )
}

impl<R: RequestsInfo> Migrating<R, Migration> {
    /// The whole system on `topology` (complete) from `initial` (at most one process InCS),
    /// P0 the initial controller, every server a candidate controller.
    pub fn system(
        topology: &Topology,
        initial: &[CsState],
        condition: MigrationCondition,
        rules: MigratingRules,
    ) -> Result<(Instance, Vec<Self>), ConfigError> {
        let inst = mutex_instance(topology)?;
        if initial.len() != inst.len() {
            return Err(ConfigError::one(Problem::Invalid(format!(
                "initial configuration has {} states for {} processes",
                initial.len(),
                inst.len()
            ))));
        }
        ConfigError::check(inst.violations(initial))?;
        if let MigrationCondition::Counter { maxreq: 0 } = condition {
            return Err(ConfigError::one(Problem::Invalid(
                "maxreq must be at least 1".into(),
            )));
        }
        let migration = Migration::new(condition, inst.len());
        let procs = topology
            .processes()
            .map(|p| Migrating::new(p, initial, migration.clone(), rules))
            .collect();
        Ok((inst, procs))
    }

    /// `n` processes, all OutCS, P0 the controller: the `mx` object of a composite.
    pub fn processes(n: usize, condition: MigrationCondition, rules: MigratingRules) -> Vec<Self> {
        let initial = vec![CsState::OutCs; n];
        let migration = Migration::new(condition, n);
        (0..n)
            .map(|i| Migrating::new(ProcessId::from(i), &initial, migration.clone(), rules))
            .collect()
    }
}

impl<R: RequestsInfo, G: MigrationInfo> Migrating<R, G> {
    /// Node `id` of the system whose initial configuration is `initial` (its length is n; at
    /// most one InCS, unchecked here), P0 the initial controller.
    pub fn new(id: ProcessId, initial: &[CsState], migration: G, rules: MigratingRules) -> Self {
        let busy = initial.contains(&CsState::InCs);
        let controller = ProcessId(0);
        let mut migration = migration;
        migration.start(0);
        Migrating {
            id,
            n: initial.len(),
            state: initial.get(id.index()).copied().unwrap_or(CsState::OutCs),
            pending: None,
            controller,
            epoch: 0,
            active: id == controller,
            seq: 0,
            requests: R::initial(busy && id == controller),
            migration,
            now: 0,
            rules,
        }
    }

    /// Whether this server's controller role is active.
    pub fn is_controller(&self) -> bool {
        self.active
    }

    /// The controller as known here.
    pub fn current_controller(&self) -> ProcessId {
        self.controller
    }

    /// The number of migrations known here.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The requests info held here.
    pub fn requests(&self) -> &R {
        &self.requests
    }

    fn learn_controller(&mut self, controller: ProcessId, epoch: u64) {
        if self.rules.unstamped_controller || epoch > self.epoch {
            self.controller = controller;
            self.epoch = self.epoch.max(epoch);
        }
    }

    fn grant(&self, j: ProcessId, out: &mut Outbox<MigratingMsg<R::Transfer>>) {
        out.send(j, MigratingMsg::Granted { epoch: self.epoch });
    }

    fn on_exit_cs(&mut self, next: Option<ProcessId>, out: &mut Outbox<MigratingMsg<R::Transfer>>) {
        let target = if self.migration.test_migration_condition(self.now) {
            let hint = self.requests.next_hint(next);
            self.migration.select_next_controller(self.id, hint)
        } else {
            None
        };
        match target {
            Some(k) if !self.rules.migrate_and_grant => {
                let info = self.requests.update_controller_info(next);
                self.migrate(k, info, out);
            }
            Some(k) => {
                // printed: become-controller carries nothing, and the old controller grants
                self.migrate(k, R::empty_transfer(), out);
                if let Some(j) = self.requests.select_request(next) {
                    self.grant(j, out);
                }
            }
            None => {
                if let Some(j) = self.requests.select_request(next) {
                    self.grant(j, out);
                }
            }
        }
    }

    fn migrate(
        &mut self,
        k: ProcessId,
        info: R::Transfer,
        out: &mut Outbox<MigratingMsg<R::Transfer>>,
    ) {
        let epoch = self.epoch.saturating_add(1);
        for q in (0..self.n).map(ProcessId::from) {
            if q != k && q != self.id {
                out.send(
                    q,
                    MigratingMsg::NewController {
                        controller: k,
                        epoch,
                    },
                );
            }
        }
        out.send(k, MigratingMsg::BecomeController { epoch, info });
        self.active = false;
        self.epoch = epoch;
        self.controller = if self.rules.literal_controller_one {
            ProcessId(0)
        } else {
            k
        };
    }

    fn forward(&self, msg: MigratingMsg<R::Transfer>, out: &mut Outbox<MigratingMsg<R::Transfer>>) {
        out.send(self.controller, msg);
    }

    /// Whether a correct server could have sent `msg`: the sender and every server it names
    /// are in `0..n`, and a become-controller's information is consistent
    /// ([`RequestsInfo::accepts`]). See "Unexpected messages".
    fn acceptable(&self, from: ProcessId, msg: &MigratingMsg<R::Transfer>) -> bool {
        let inside = |p: &ProcessId| p.index() < self.n;
        inside(&from)
            && match msg {
                MigratingMsg::Request { requester, .. } => inside(requester),
                MigratingMsg::ExitCs { next } => next.iter().all(inside),
                MigratingMsg::BecomeController { info, .. } => R::accepts(info, self.n),
                MigratingMsg::NewController { controller, .. } => inside(controller),
                MigratingMsg::NextRequestor { next, .. } | MigratingMsg::Orphan { next } => {
                    inside(next)
                }
                MigratingMsg::Granted { .. } | MigratingMsg::WakeUp => true,
            }
    }
}

impl<R: RequestsInfo, G: MigrationInfo> CsObject for Migrating<R, G> {
    type Msg = MigratingMsg<R::Transfer>;

    fn id(&self) -> ProcessId {
        self.id
    }

    fn state(&self) -> CsState {
        self.state
    }

    fn pending(&self) -> Option<Sequence> {
        self.pending
    }

    fn begin_entry(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        check_call(self.state, self.pending, Sequence::Entry)?;
        self.pending = Some(Sequence::Entry);
        self.seq += 1;
        self.requests.register_request(self.seq);
        out.send(
            self.controller,
            MigratingMsg::Request {
                requester: self.id,
                seq: self.seq,
                forwarded: false,
            },
        );
        Ok(())
    }

    fn begin_exit(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        check_call(self.state, self.pending, Sequence::Exit)?;
        self.state = CsState::OutCs;
        let next = self.requests.exit_info();
        out.send(self.controller, MigratingMsg::ExitCs { next });
        out.complete();
        Ok(())
    }

    fn on_message(&mut self, from: ProcessId, msg: Self::Msg, out: &mut Outbox<Self::Msg>) {
        if !self.acceptable(from, &msg) {
            return;
        }
        match msg {
            MigratingMsg::Request { requester, seq, .. } => {
                if !self.active {
                    let forwarded = true;
                    let msg = MigratingMsg::Request {
                        requester,
                        seq,
                        forwarded,
                    };
                    return self.forward(msg, out);
                }
                if let Some(n) = self.requests.enqueue(requester, seq) {
                    out.send(
                        n.to,
                        MigratingMsg::NextRequestor {
                            seq: n.seq,
                            next: requester,
                        },
                    );
                }
                if self.requests.is_free() {
                    out.send(self.id, MigratingMsg::WakeUp);
                }
            }
            MigratingMsg::Granted { epoch } => {
                // the controller knows it is one: only a retired server moves its pointer
                if !self.active && (self.rules.unstamped_controller || epoch >= self.epoch) {
                    self.controller = from;
                    self.epoch = self.epoch.max(epoch);
                }
                if self.pending == Some(Sequence::Entry) {
                    self.pending = None;
                    self.state = CsState::InCs;
                    out.complete();
                }
            }
            MigratingMsg::ExitCs { next } => {
                if self.active {
                    self.on_exit_cs(next, out);
                } else if !self.rules.unstamped_controller {
                    self.forward(MigratingMsg::ExitCs { next }, out);
                }
            }
            MigratingMsg::WakeUp => {
                if self.active && (self.rules.unguarded_wake_up || self.requests.is_free()) {
                    if let Some(j) = self.requests.select_request(None) {
                        self.grant(j, out);
                    }
                }
            }
            MigratingMsg::BecomeController { epoch, info } => {
                self.active = true;
                self.controller = self.id;
                self.epoch = self.epoch.max(epoch);
                self.requests.install(info);
                self.migration.start(self.now);
                out.send(self.id, MigratingMsg::WakeUp);
            }
            MigratingMsg::NewController { controller, epoch } => {
                if !self.active {
                    self.learn_controller(controller, epoch);
                }
            }
            MigratingMsg::NextRequestor { seq, next } => {
                let live = seq == self.seq
                    && (self.pending == Some(Sequence::Entry) || self.state == CsState::InCs);
                let printed = self.rules.unguarded_next_requestor;
                if let Some(head) = self.requests.on_next_requestor(next, live, printed) {
                    self.forward(MigratingMsg::Orphan { next: head }, out);
                }
            }
            MigratingMsg::Orphan { next } => {
                if !self.active {
                    return self.forward(MigratingMsg::Orphan { next }, out);
                }
                self.requests.on_orphan(next);
                if self.requests.is_free() {
                    out.send(self.id, MigratingMsg::WakeUp);
                }
            }
        }
    }

    fn set_time(&mut self, now: u64) {
        self.now = now;
    }

    /// A pending entry waits for the controller's grant: the controller as known here, when
    /// it is another server (a request it forwards on migrates with it). The controller's
    /// own entry waits for whoever holds the CS, which it does not record: empty.
    fn awaiting(&self) -> Vec<ProcessId> {
        if self.pending == Some(Sequence::Entry) && !self.active && self.controller != self.id {
            vec![self.controller]
        } else {
            Vec::new()
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        if self.active && self.controller != self.id {
            return Err(format!(
                "{} is the controller but points at {}",
                self.id, self.controller
            ));
        }
        if self.active {
            self.requests.check()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
