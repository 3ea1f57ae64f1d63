//! The quota: keep between l and k of your workers active, among all of them or among each
//! worker's neighbours, with no central lock and no semaphore's one-sided guarantee.
//!
//! ```
//! use lkcs::Quota;
//! use std::sync::atomic::{AtomicUsize, Ordering};
//!
//! // 8 workers; at least 2 and at most 5 active at any time
//! let quota = Quota::global(8).between(2, 5).build()?;
//! let busy = AtomicUsize::new(8);
//! std::thread::scope(|s| {
//!     for mut m in quota.members() {
//!         let (quota, busy) = (&quota, &busy);
//!         s.spawn(move || -> Result<(), lkcs::QuotaError> {
//!             let mut rounds = 10;
//!             loop {
//!                 match m.enter() {
//!                     // blocks while 5 are active; after close, the loop's end
//!                     Err(e) if e.is_closed() => return Ok(()),
//!                     r => r?,
//!                 }
//!                 if rounds > 0 {
//!                     // ... work while counted as active ...
//!                     rounds -= 1;
//!                     if rounds == 0 && busy.fetch_sub(1, Ordering::SeqCst) == 1 {
//!                         quota.close(); // the last one done: everybody may leave
//!                     }
//!                 }
//!                 m.exit()?; // blocks while only 2 are active; Ok at once once closed
//!             }
//!         });
//!     }
//! });
//! # Ok::<(), lkcs::ConfigError>(())
//! ```
//!
//! A worker whose own work is done keeps cycling without work, so that the busy ones can
//! always move (the last two active could never leave otherwise: the lower bound holds
//! them), and the last one to finish closes the quota ([`Quota::close`]).
//!
//! # Which algorithm
//! [`QuotaBuilder::build`] picks the algorithm from the bounds ([`Quota::algorithm`] says
//! which); every member is one thread of the [`runtime`](crate::runtime) running that
//! algorithm's state machine, and members talk by messages only.
//!
//! | quota | bounds | algorithm | messages per enter + exit |
//! |---|---|---|---|
//! | global | at most 1 | migrating controller [`Algorithm::Cdc`] | about 3 |
//! | global | at most k | kmex = complement of MUTIN(n − k) [`Algorithm::Kmex`] | O(√n) (grid quorums) |
//! | global | at least l | MUTIN(l) [`Algorithm::Mutin`] | O(√n) |
//! | global | between l and k | (l,k)-GCS [`Algorithm::Gcs`] | O(√n) |
//! | local | at least l_i | l_i-LMUTIN [`Algorithm::Lmutin`] | 3(\|N_i\|+1) to 6(\|N_i\|+1) |
//! | local | at most k_i | k_i-LMUTEX [`Algorithm::Lmutex`] | 3(\|N_i\|+1) to 6(\|N_i\|+1) |
//! | local | between l_i and k_i | LKCS [`Algorithm::Lkcs`] | 6(\|N_i\|+1) to 12(\|N_i\|+1) and more |
//!
//! The global algorithms use grid quorums and the migrating controller (CDC) as their inner
//! mutual exclusion unless told otherwise ([`QuotaBuilder::coterie`], [`QuotaBuilder::mx`],
//! [`QuotaBuilder::algorithm`]). A local quota with both bounds runs LKCS's round trip
//! (no leader; `docs/lkcs-liveness.md`): it tightens by one every bound a move can break
//! (l_i+1 where l_i > 0, k_i−1 where k_i < |N_i|+1), needs those to stay apart and a start
//! within them, and completed every one of the 39,331 runs of its sweeps. Bounds it refuses
//! are refused, naming the members concerned and offering the nearest accepted bounds. The
//! paper's leader rules (a member with at least 4 neighbours and k_i − l_i ≥ 3 within two
//! hops of it) may take some of those, but they are not live on every graph, so they run
//! only when a leader is named ([`QuotaBuilder::leader`]); a stall is reported, never
//! silent.
//!
//! # Failure semantics
//! - **Timeouts and cancellation** never move a member silently: a call that returns
//!   [`QuotaError::Timeout`] (or an async call whose future is dropped) leaves its move
//!   running, visible in [`Member::state`], and the next call resolves it.
//! - **A dropped member** (its worker returned or panicked) retires: if active, it leaves as
//!   soon as the bounds allow, and it never moves again.
//! - **Stalls**: when nothing is in flight and every live member is blocked in a call, every
//!   blocked call returns [`QuotaError::Stalled`] within about half a second, naming the
//!   blocked members, the bound that holds each and the members they wait on (dropped ones
//!   included). A member merely idle is live: no stall is reported while one could still
//!   move.
//! - **Slow or stuck without a stall**: a member that stays active (idle, in no call) is live,
//!   so members waiting behind it wait for as long as it stays. With the local algorithms a
//!   waiting member keeps the permissions it already has (hold-and-wait), so the wait can
//!   reach members whom no bound holds, several hops away. [`Quota::waiting`] reports it:
//!   every waiting member, the bound that holds it, or the permissions it still needs and
//!   who holds them.
//! - **Trying and withdrawing**: [`Member::try_enter`] and [`Member::try_exit`] move only
//!   where no bound is in the way, and otherwise leave the member as it was
//!   ([`QuotaError::WouldBlock`]); [`Member::cancel`] withdraws a move a timeout left
//!   running, where the algorithm can ([`QuotaError::CannotWithdraw`] says why not).
//! - **Closing**: [`Quota::close`] lifts the lower bound: every exit returns `Ok` and releases
//!   its member, every entry returns [`QuotaError::Closed`].
//! - **Shutdown**: [`Quota::shutdown`] (or dropping the quota) wakes every blocked call with
//!   [`QuotaError::Shutdown`]; every later call returns it too.
//! - **Panics**: a member dropped by a panicking worker is named in [`Stall::panicked`] and
//!   [`Waits::panicked`].

// The façade (`Quota`, `QuotaBuilder`, `Member`, `MemberState`, `QuotaError`) and
// `Algorithm` have one public path each, the crate root; this module shows the rest of the
// quota's API. Both are implemented in src/facade.rs.
pub use crate::catalog::{InnerMutex, QuorumSystem};
pub use crate::error::{BoundSide, QuotaProblem};
pub use crate::facade::{Active, Blocked, Limit, Move, Stall, Waits, DEFAULT_STALL_CHECK};

// in scope for this page's links
#[cfg(doc)]
use crate::{Algorithm, Member, Quota, QuotaBuilder, QuotaError};
