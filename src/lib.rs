//! # lkcs — keep between l and k of your workers active
//!
//! A **quota** for threads: at least `l` and at most `k` of `n` members active at any time,
//! among all of them ([`Quota::global`]) or among each member's neighbours on a graph
//! ([`Quota::local`]). Entering blocks while it would exceed an upper bound, like a
//! semaphore; unlike any semaphore, **leaving blocks while it would drop below a lower
//! bound** ("minAvailable" for threads). No central lock: each member is a thread running a
//! published distributed critical-section algorithm, chosen from the bounds.
//!
//! ```
//! use lkcs::Quota;
//!
//! let quota = Quota::global(4).between(1, 2).build()?; // (1,2)-GCS, picked for these bounds
//! let mut members = quota.members(); // one per worker; each is Send
//! members[0].enter()?; // member 0 started active (the default start): Ok at once
//! members[1].enter()?; // two active: the upper bound
//! members[0].exit()?; // one stays: the lower bound holds
//! assert!(members[1].is_active() && !members[0].is_active());
//! quota.shutdown(); // every blocked or later call returns QuotaError::Shutdown
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! The [`quota`] module documents the choice of algorithm, the costs, and the failure
//! semantics (timeouts, dropped or panicking workers, stalls, shutdown).
//!
//! ## Underneath: the algorithms, a simulator, a checker, a runtime
//! The critical-section (CS) family of distributed algorithms as sans-IO state machines, with
//! three drivers of the very same machines: a deterministic simulator ([`simulate`]), an
//! exhaustive checker ([`check()`]) and a thread runtime ([`Runtime`]).
//!
//! | problem | safety at all times | local algorithm (graph) | global algorithm |
//! |---|---|---|---|
//! | mutual exclusion | ≤ 1 in CS | LMUTEX with k_i = 1 | [`Maekawa`] on a [`Coterie`]; [`Cdc`] / [`Ddc`] (migrating controller) |
//! | k-mutual exclusion | ≤ k | k_i-LMUTEX = Co(l_i-LMUTIN) ([`Lmutex`]) | kmex = Co(MUTIN(n−k)) ([`Kmex`], [`kmex_system`]) |
//! | l-mutual inclusion | ≥ l | l_i-LMUTIN ([`Lmutin`]) | MUTIN(l) ([`Mutin`]) over quorums and a mutual-exclusion object |
//! | (l,k)-CS | l ≤ · ≤ k | [`Lkcs`]: the round trip (no leader) by default; the paper's leader rules (leader, sidetrack, Trigger) when a leader is named | (l,k)-GCS = [`Gcs`]`<MUTIN(l), kmex>` ([`gcs_system`]) |
//!
//! "Local" bounds count the closed neighbourhood N_i ∪ {P_i} of each process on a graph, with
//! per-process (l_i, k_i); on a complete graph they are global bounds.
//!
//! ## Shape
//! - [`CsObject`]: one process's state machine. `begin_exit` / `begin_entry` start a sequence,
//!   `on_message` handles one message atomically; sends and a completion signal go to an
//!   [`Outbox`]. No threads, clocks or I/O inside.
//! - [`Complement`]: swaps InCS and OutCS (the complementary theorem); [`Lmutex`] is
//!   `Complement<Lmutin>`.
//! - [`Arbiter`]: the permission arbiter shared by the algorithms (pending requests by
//!   timestamp, a capacity, preemption).
//! - [`Coterie`]: quorum systems for the global algorithms (majority, grid, explicit), with
//!   validation and R_i = {k : P_i ∈ Q_k}.
//! - [`Topology`], [`Instance`] (a graph with per-process [`Bounds`]) and safe initial
//!   configurations ([`Instance::find_safe_initial`]).
//!
//! [`simulate`]: sim::simulate
//! [`check()`]: check::check
//! [`Runtime`]: runtime::Runtime
//! [`Maekawa`]: algo::maekawa::Maekawa
//! [`Coterie`]: quorum::Coterie
//! [`Cdc`]: algo::migrating::Cdc
//! [`Ddc`]: algo::migrating::Ddc
//! [`Lmutex`]: algo::lmutin::Lmutex
//! [`Kmex`]: algo::mutin::Kmex
//! [`kmex_system`]: algo::mutin::kmex_system
//! [`Lmutin`]: algo::lmutin::Lmutin
//! [`Mutin`]: algo::mutin::Mutin
//! [`Lkcs`]: algo::lkcs::Lkcs
//! [`Gcs`]: cs::Gcs
//! [`gcs_system`]: algo::mutin::gcs_system
//! [`CsObject`]: cs::CsObject
//! [`Outbox`]: cs::Outbox
//! [`Complement`]: cs::Complement
//! [`Arbiter`]: arbiter::Arbiter
//!
//! ## The runtime underneath a quota
//! The same as `Quota::local(ring).at_least(1)`, assembled by hand: keep at least one of
//! every three neighbouring workers active (l-mutual inclusion on a ring).
//!
//! ```
//! use lkcs::algo::lmutin::{Lmutin, LmutinRules};
//! use lkcs::cs::CsState;
//! use lkcs::runtime::{Runtime, RuntimeConfig};
//! use lkcs::Topology;
//!
//! let ring = Topology::ring(6)?;
//! let l = vec![1; 6];
//! let inst = Lmutin::instance(&ring, &l)?;
//! let initial = inst.find_safe_initial()?; // everyone active
//! let (inst, procs) = Lmutin::system(&ring, &l, &initial, LmutinRules::CORRECTED)?;
//! let mut rt = Runtime::start(procs, RuntimeConfig { monitor: Some(inst) })?;
//! let handles = rt.take_handles().unwrap_or_default();
//! std::thread::scope(|s| {
//!     for h in &handles {
//!         s.spawn(move || {
//!             for _ in 0..50 {
//!                 h.exit().expect("leave: waits while the neighbourhood needs us");
//!                 h.entry().expect("come back");
//!             }
//!         });
//!     }
//! });
//! rt.shutdown();
//! assert_eq!(rt.report().violations, 0); // the monitor checked every state change
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! ## Simulating
//! ```
//! use lkcs::algo::lmutin::{Lmutin, LmutinRules};
//! use lkcs::sim::{simulate, SimConfig, Workload};
//! use lkcs::Topology;
//!
//! let torus = Topology::torus(5, 5)?;
//! let l = vec![2; 25];
//! let inst = Lmutin::instance(&torus, &l)?;
//! let initial = inst.find_safe_initial()?;
//! let (inst, procs) = Lmutin::system(&torus, &l, &initial, LmutinRules::CORRECTED)?;
//! let cfg = SimConfig { pairs: 2, workload: Workload::Sequential, ..SimConfig::default() };
//! let report = simulate(&inst, procs, &cfg);
//! assert!(report.ok());
//! // no contention: 3(|N_i| + 1) = 15 messages per pair
//! assert!(report.pairs.iter().all(|p| p.messages == 15));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![warn(missing_docs, unreachable_pub, rust_2018_idioms)]

pub mod algo;
pub mod arbiter;
mod catalog;
#[cfg(feature = "check")]
pub mod check;
mod config;
pub mod cs;
mod error;
#[cfg(not(loom))]
mod facade;
mod fnv;
mod id;
mod metrics;
#[cfg(feature = "net")]
pub mod net;
pub mod quorum;
#[cfg(not(loom))]
pub mod quota;
pub mod reach;
pub mod runtime;
pub mod sim;
mod small_set;
mod sync;
#[cfg(test)]
mod test_threads;
/// The unit tests' threads per core (`test_threads`): the checker's long searches and the
/// view group's Raft suites, which wait on timers, overlap.
#[cfg(test)]
const TEST_THREADS_PER_CORE: usize = 2;
mod token;
mod topology;
pub mod view_system;

// The crate root shows the quota and the types the public modules share; every other item
// lives in its module (`lkcs::sim::simulate`, `lkcs::runtime::Runtime`, ...), and only there.
#[cfg(not(loom))]
pub use facade::{Member, MemberState, Quota, QuotaBuilder, QuotaError};

pub use catalog::{
    check_mx, Algorithm, BoundsFile, PrintedRule, PrintedRules, SystemSpec, SystemVisitor,
    DEFAULT_COTERIE, DEFAULT_MX,
};
pub use config::{format_initial, parse_initial, Bounds, Instance, Observed};
pub use error::{CallError, ConfigError, CoterieProblem, Problem};
pub use id::{ProcessId, Stamp};
pub use metrics::{PairRecord, Stats, Waiting};
pub use token::{BadToken, FencingToken};
pub use topology::Topology;
