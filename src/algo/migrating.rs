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

use crate::cs::{CsState, Sequence, Variant};
use crate::id::ProcessId;
use std::collections::VecDeque;

#[cfg(doc)]
use crate::cs::CsObject;

mod info;
mod msg;
mod server;
mod system;

pub use info::{
    Migration, MigrationCondition, MigrationInfo, NextHint, NextRequestorNotice, RequestsInfo,
};
pub use msg::MigratingMsg;
pub use system::mutex_instance;

/// Migrating controller with a centralized queue (CDC).
pub type Cdc = Migrating<CentralQueue>;
/// Migrating controller with a distributed queue (DDC).
pub type Ddc = Migrating<DistributedQueue>;

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
    /// The controller's record of whom it granted the CS to last, until that server's
    /// exit-cs reaches it (`None` elsewhere, and where the grant was another controller's):
    /// what the controller's own entry waits on ([`CsObject::awaiting`]). It decides no
    /// move.
    holder: Option<ProcessId>,
}

#[cfg(test)]
mod tests;
