//! The framework's two abstract types (§2.2): REQUESTS-INFO ([`RequestsInfo`], with what it
//! offers select_next_controller and the next-requestor notices it asks for) and
//! MIGRATION-INFO ([`MigrationInfo`]), and the MIGRATION-INFO CDC and DDC share: a
//! [`MigrationCondition`] over a candidate list ([`Migration`]).

use crate::error::{ConfigError, Problem};
use crate::id::ProcessId;
use std::fmt::Debug;
use std::hash::Hash;
use std::time::Duration;

#[cfg(doc)]
use super::Migrating;

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
        if let Some(k) = hint.preferred
            && k != me
            && self.candidates.binary_search(&k).is_ok()
        {
            return Some(k);
        }
        let others = || self.candidates.iter().copied().filter(move |&c| c != me);
        others()
            .find(|&c| Some(c) != hint.avoid)
            .or_else(|| others().next())
    }
}
