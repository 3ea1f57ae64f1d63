//! The round trip: the restoration rule of `docs/lkcs-liveness.md` ("A restoration rule that
//! survives the model: the round trip") at the level of messages, selected with
//! [`LkcsRules::TRIP`](super::LkcsRules::TRIP) (field `round_trip`): one of the two flavours of
//! [`Lkcs`](super::Lkcs), beside the leader rules ([`super::leader`]).
//!
//! **Why.** The paper's leader and the eleven deviations built on it stall on configurations
//! no test named: e.g. configuration 43 of the liveness sweep (random:22:0.527:807529, bounds
//! k_i = l_i + 3, unit delays) reaches 10^6 events, 3,891 pairs completed while some process
//! still owes one of its 3, and the round trip completes it
//! (`tests/lkcs_trip.rs::the_round_trip_completes_a_run_on_which_the_default_rules_stall`);
//! the sweeps and the argument are in `docs/lkcs-liveness.md`.
//!
//! **Bounds.** No leader. Every side of a bound that a move can break is tightened by one:
//! L_j = l_j+1 where l_j > 0 and K_j = k_j−1 where k_j < |N_j|+1; the start is within
//! [L_j, K_j] everywhere and, when none is given and one is found
//! ([`Instance::movable_start`](crate::Instance::movable_start)), one from which every
//! process can move within them (moves there take no round trip). Arbiter j's MUTIN
//! capacity is |N_j|+1−L_j and its MUTEX capacity K_j, as in the other variants; its
//! **hard** capacities are |N_j|+1−l_j and k_j (one more where the side is tightened: the
//! reserve).
//!
//! **Normal sequences** are LMUTIN's, per type: `Request(at, ts)`, `Grant`, `Release`,
//! `Preempt`, `Relinquish`; an arbiter grants its free slots in stamp order and preempts the
//! youngest holder whose sequence is still in progress when an older request waits. Best case:
//! 6(|N_i|+1) messages per Exit/Entry pair.
//!
//! **The round trip.** An arbiter that is full and whose holders all hold for their state (none
//! in a sequence it could preempt) tells each request waiting there `Blocked`; the requester
//! q asks its closed neighbourhood for a round trip, `Trip(at, ts)` with its request's stamp.
//! Each arbiter has a **trip lock**, granted (`TripLock`) to the oldest trip asking, and taken
//! back from a younger holder that has not moved yet (`TripInquire`, answered by `TripYield`,
//! as Maekawa's Inquire and Relinquish). With every lock of N_q ∪ {q}, q is committed: it
//! sends `TripGo(at)`, and every arbiter grants it a permission of type `at` at once, from the
//! reserve if it is full, and never preempts it. The trip's move keeps q's permissions of the
//! other type: they are the **set-aside** permissions of the doc (an entry keeps its MUTIN
//! permissions, an exit its MUTEX ones), counted at every arbiter as before the move, so normal
//! grants of that type keep room for q's return. The **return** (q's next call, of the other
//! type) therefore needs no permission: it completes at once and sends `TripEnd(at)`, which
//! releases the trip's permission and the lock. An arbiter also frees its lock as soon as its
//! count of the trip's type is back within its capacity (the reserve is free again; other
//! moves restored it), so a later trip there can use the reserve.
//!
//! **Invariant T** (safety): at every arbiter at most its capacity of each type is granted,
//! plus the trip permission of the lock's holder: at most one above the capacity, within the
//! hard bound. Counted with q's trip undone (its trip permission out, its set-aside one in),
//! every arbiter is within its capacity. A request stays queued only behind holders; a
//! committed trip's grant always fits (its arbiters are within capacity when the lock is free,
//! and only the lock's holder takes the reserve).
//!
//! **Messages per trip**: `Trip`, `TripLock` and `TripGo` to and from every member of
//! N_q ∪ {P_q}, a `Blocked` per blocking arbiter, `TripInquire` and `TripYield` per lock taken
//! back, and at the return one `TripEnd` per member instead of a whole sequence (the return
//! sends no Request, Grant or Release); a trip asked for that the normal grants overtook is
//! withdrawn with one `TripCancel` per member.
//!
//! **Withdrawal** ([`CsObject::withdraw`]): a sequence whose trip has not committed is taken
//! back before it moves. The requester sends `Withdraw(at)` to its closed neighbourhood and
//! counts no grant meanwhile; each arbiter drops the request, the permission granted to it
//! and its trip, and answers `Withdrawn(at)`. With FIFO links no grant for the sequence
//! follows that answer, so once every member answered the sequence is over with the state
//! unchanged (2(|N_i|+1) messages). A committed trip cannot be withdrawn: it completes on
//! its own.
//!
//! **The sequential workload** ([`CsObject::takes_round_trips`]) makes each owed pair back
//! to back; a pair whose first move leaves [L_j, K_j] (when no process that owes a pair can
//! move within them and no helper moves lead to a configuration where one can) is a round
//! trip and its return.
//!
//! **Retiring** ([`CsObject::retire`]): a process whose client is gone for good gives back
//! its set-aside permissions with a `Release`, since it never makes the return.
//!
//! **Limits.** A process that stops calling after a trip keeps the locks of the arbiters whose
//! reserve it still uses; the liveness argument (in steps of a centralised scheduler) needs
//! every process to keep calling, and Maekawa's stamp-order argument for the lock. Like the
//! other LKCS rules it assumes reliable FIFO links: a `TripGo` that overtook the requester's
//! `Relinquish`, or a `Request` that overtook its `Release` or `TripEnd`, would leave a
//! sequence without the grant it waits for (a reading of the code, not a checked run).

use super::messages::{At, LkcsMsg};
use crate::config::Bounds;
use crate::cs::{check_call, CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::{ProcessId, Stamp};
use std::collections::{BTreeMap, BTreeSet};

/// Why an arbiter holds a permission for a process.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Hold {
    /// Granted to a sequence in progress, with the request's stamp: may be preempted.
    Progress(u64),
    /// Held for the process's state (its sequence completed, or the initial configuration).
    State,
    /// Granted to a committed round trip: never preempted.
    Trip,
}

/// One arbiter of one type.
///
/// Not [`crate::arbiter::Arbiter`], whose rules differ where the round trip needs others:
/// that arbiter knows a holder only by the stamp it was granted with, so it preempts the
/// youngest holder whatever it holds the permission for, and it reserves its one permission
/// above the capacity for the leader rules' sidetrack. Here every permission says why it is
/// held ([`Hold`]): only a holder whose sequence is in progress is preempted, a Release turns
/// the holder's permission of the other type from "in progress" into "for its state", a
/// request is told `Blocked` once every holder holds for its state, and the permission above
/// the capacity goes only to the trip lock's committed holder, which is never preempted.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TypeArbiter {
    /// Normal grants stop at this many holders.
    cap: usize,
    /// The hard bound: `cap` plus the reserve (0 or 1).
    hard: usize,
    granted: BTreeMap<ProcessId, Hold>,
    queue: BTreeSet<Stamp>,
    preempting: Option<ProcessId>,
    /// The waiting requests told `Blocked`.
    told: BTreeSet<Stamp>,
}

impl TypeArbiter {
    fn full(&self) -> bool {
        self.granted.len() >= self.cap
    }

    fn queued(&self, q: ProcessId) -> Option<Stamp> {
        self.queue.iter().copied().find(|s| s.id == q)
    }
}

/// The process a trip lock is lent to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
struct LockHolder {
    /// The trip's stamp (its blocked request's).
    trip: Stamp,
    /// The trip's type.
    at: At,
    /// The trip committed (`TripGo`): the lock is no longer taken back.
    committed: bool,
    /// The holder was asked to yield (`TripInquire`).
    inquired: bool,
}

/// The trip lock of one arbiter.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
struct TripLock {
    /// The trip the lock is lent to.
    holder: Option<LockHolder>,
    /// The trips waiting for the lock.
    queue: BTreeMap<Stamp, At>,
}

/// One process of LKCS in the round-trip variant: its requester side and its two arbiters
/// with their trip lock. Built by [`Lkcs::build`](super::Lkcs::build) with
/// [`LkcsRules::TRIP`](super::LkcsRules::TRIP), or alone with [`TripProc::new`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct TripProc {
    id: ProcessId,
    closed: Vec<ProcessId>,
    /// The operating bounds (the problem's, tightened on every side a move can break).
    operating: Bounds,
    state: CsState,
    pending: Option<Sequence>,
    ts: u64,
    req_ts: u64,
    granters: BTreeSet<ProcessId>,
    /// The pending sequence asked for a round trip.
    asked: bool,
    /// The trip locks held for the pending sequence's trip.
    locks: BTreeSet<ProcessId>,
    /// The pending sequence holds every lock and sent `TripGo`.
    committed: bool,
    /// The type of the round trip whose return is owed (the last move was a trip).
    away: Option<At>,
    arbiters: [TypeArbiter; 2],
    lock: TripLock,
    /// A committed trip found no room (never expected; reported by `check`).
    overflow: bool,
    /// The pending sequence is withdrawn: the members whose `Withdrawn` has not come back.
    withdrawing: Option<BTreeSet<ProcessId>>,
}

impl TripProc {
    /// Process `id`, its closed neighbourhood `closed` (sorted), its problem bounds `hard`
    /// and its operating bounds `soft` (tightened), starting in `initial` (every process's
    /// state).
    pub fn new(
        id: ProcessId,
        closed: Vec<ProcessId>,
        hard: Bounds,
        soft: Bounds,
        initial: &[CsState],
    ) -> TripProc {
        let m = closed.len();
        let holders = |s: CsState| -> BTreeMap<ProcessId, Hold> {
            closed
                .iter()
                .filter(|q| initial.get(q.index()) == Some(&s))
                .map(|&q| (q, Hold::State))
                .collect()
        };
        let arbiter = |cap: usize, hard: usize, granted| TypeArbiter {
            cap,
            hard,
            granted,
            queue: BTreeSet::new(),
            preempting: None,
            told: BTreeSet::new(),
        };
        let arbiters = [
            arbiter(
                m.saturating_sub(soft.l),
                m.saturating_sub(hard.l),
                holders(CsState::OutCs),
            ),
            arbiter(soft.k, hard.k, holders(CsState::InCs)),
        ];
        TripProc {
            id,
            state: initial.get(id.index()).copied().unwrap_or(CsState::OutCs),
            pending: None,
            ts: 1,
            req_ts: 0,
            granters: BTreeSet::new(),
            asked: false,
            locks: BTreeSet::new(),
            committed: false,
            away: None,
            arbiters,
            lock: TripLock {
                holder: None,
                queue: BTreeMap::new(),
            },
            overflow: false,
            withdrawing: None,
            closed,
            operating: soft,
        }
    }

    /// Whether the last move was a round trip whose return is owed.
    pub fn away(&self) -> bool {
        self.away.is_some()
    }

    /// The number of permissions of type `at` this process's arbiter has granted.
    pub fn granted(&self, at: At) -> usize {
        self.arbiters[at.index()].granted.len()
    }

    /// Whether this process's arbiters and trip lock keep nothing for `q` but the permissions
    /// of `q`'s state (and of its trip, while it is away): no queued or set-aside request, no
    /// permission granted to a sequence in progress, no Preempt outstanding, no place in the
    /// lock's queue and no uncommitted hold of the lock. True of every member of an idle
    /// process's closed neighbourhood: what a withdrawal must leave (for inspection).
    pub fn keeps_only_state_for(&self, q: ProcessId) -> bool {
        let arbiters_clean = self.arbiters.iter().all(|a| {
            a.queued(q).is_none()
                && !matches!(a.granted.get(&q), Some(Hold::Progress(_)))
                && a.preempting != Some(q)
        });
        let lock_clean = !self.lock.queue.keys().any(|s| s.id == q)
            && !self
                .lock
                .holder
                .is_some_and(|h| h.trip.id == q && !h.committed);
        arbiters_clean && lock_clean
    }

    /// Starts a sequence; a return from a round trip completes at once.
    fn start(&mut self, seq: Sequence, out: &mut Outbox<LkcsMsg>) -> Result<(), CallError> {
        check_call(self.state, self.pending, seq)?;
        let at = At::of(seq);
        self.ts = self.ts.saturating_add(1);
        if let Some(away) = self.away.take() {
            // the return: the set-aside permissions of type `at` are held everywhere
            self.state = !self.state;
            for &q in &self.closed {
                out.send(q, LkcsMsg::TripEnd { at: away });
            }
            out.complete();
            return Ok(());
        }
        self.pending = Some(seq);
        self.req_ts = self.ts;
        self.granters.clear();
        self.asked = false;
        self.locks.clear();
        self.committed = false;
        for &q in &self.closed {
            out.send(q, LkcsMsg::Request { at, ts: self.ts });
        }
        Ok(())
    }

    /// Handles `msg` from `from`, a member of the closed neighbourhood.
    fn handle(&mut self, from: ProcessId, msg: LkcsMsg, out: &mut Outbox<LkcsMsg>) {
        let mut touched = [false; 2];
        match msg {
            // arbiter side
            LkcsMsg::Request { at, ts } => {
                self.ts = self.ts.max(ts);
                let a = &mut self.arbiters[at.index()];
                if !a.granted.contains_key(&from) && a.queued(from).is_none() {
                    a.queue.insert(Stamp::new(ts, from));
                }
                touched[at.index()] = true;
            }
            LkcsMsg::Release { at } => {
                let a = &mut self.arbiters[at.index()];
                a.granted.remove(&from);
                if a.preempting == Some(from) {
                    a.preempting = None;
                }
                // the sender's permission of the other type is now held for its state: one
                // granted to its sequence, or (from a retired process, `retire`) its trip's
                let b = &mut self.arbiters[at.other().index()];
                if let Some(h) = b.granted.get_mut(&from)
                    && matches!(h, Hold::Progress(_) | Hold::Trip)
                {
                    *h = Hold::State;
                }
                if b.preempting == Some(from) {
                    b.preempting = None;
                }
                touched = [true; 2];
            }
            LkcsMsg::Relinquish { at } => {
                let a = &mut self.arbiters[at.index()];
                if let Some(&Hold::Progress(ts)) = a.granted.get(&from) {
                    a.granted.remove(&from);
                    a.queue.insert(Stamp::new(ts, from));
                }
                if a.preempting == Some(from) {
                    a.preempting = None;
                }
                touched[at.index()] = true;
            }
            LkcsMsg::Trip { at, ts } => {
                self.ts = self.ts.max(ts);
                let s = Stamp::new(ts, from);
                let held = self.lock.holder.is_some_and(|h| h.trip.id == from);
                if !held && !self.lock.queue.keys().any(|k| k.id == from) {
                    self.lock.queue.insert(s, at);
                }
            }
            LkcsMsg::TripYield { ts } => {
                if let Some(h) = self.lock.holder.filter(|h| !h.committed)
                    && h.trip == Stamp::new(ts, from)
                {
                    self.lock.holder = None;
                    self.lock.queue.insert(h.trip, h.at);
                }
            }
            LkcsMsg::TripCancel => self.cancel_trip(from),
            LkcsMsg::TripGo { at } => {
                if let Some(h) = self.lock.holder.as_mut().filter(|h| !h.committed)
                    && h.trip.id == from && h.at == at
                {
                    h.committed = true;
                    self.go(from, at, out);
                    touched[at.index()] = true;
                }
            }
            LkcsMsg::Withdraw { at } => {
                self.drop_request(from, at);
                out.send(from, LkcsMsg::Withdrawn { at });
                touched[at.index()] = true;
            }
            LkcsMsg::TripEnd { at } => {
                let a = &mut self.arbiters[at.index()];
                if matches!(a.granted.get(&from), Some(Hold::Trip | Hold::State)) {
                    a.granted.remove(&from);
                }
                // the lock is freed below once the trip's type is back within the capacity
                // (as the return leaves it)
                touched[at.index()] = true;
            }
            // requester side; a withdrawn sequence takes nothing more
            _ if self.withdrawing.is_some() => {
                if let LkcsMsg::Withdrawn { at } = msg {
                    self.withdrawn(from, at, out);
                }
            }
            LkcsMsg::Grant { at } => {
                if self.pending == Some(at.sequence()) {
                    self.granters.insert(from);
                    self.try_complete(out);
                }
            }
            LkcsMsg::Preempt { at } => {
                if self.pending == Some(at.sequence())
                    && !self.committed
                    && self.granters.remove(&from)
                {
                    out.send(from, LkcsMsg::Relinquish { at });
                }
            }
            LkcsMsg::Blocked { at, .. } => {
                if self.pending == Some(at.sequence()) && !self.asked {
                    self.asked = true;
                    let ts = self.req_ts;
                    for &q in &self.closed {
                        out.send(q, LkcsMsg::Trip { at, ts });
                    }
                }
            }
            LkcsMsg::TripLock { ts } => {
                if self.asked && !self.committed && ts == self.req_ts {
                    self.locks.insert(from);
                    if self.locks.len() == self.closed.len() {
                        self.committed = true;
                        let at = At::of(self.pending.expect("asked while pending"));
                        for &q in &self.closed {
                            out.send(q, LkcsMsg::TripGo { at });
                        }
                    }
                }
            }
            LkcsMsg::TripInquire { ts } => {
                if self.asked && !self.committed && ts == self.req_ts && self.locks.remove(&from) {
                    out.send(from, LkcsMsg::TripYield { ts });
                }
            }
            // the other variants' messages mean nothing here
            LkcsMsg::Trigger { .. }
            | LkcsMsg::RequestByTrigger { .. }
            | LkcsMsg::SidetrackGrant { .. }
            | LkcsMsg::TriggerDeclined
            | LkcsMsg::Park { .. }
            | LkcsMsg::Unpark { .. }
            // an answer to no withdrawal
            | LkcsMsg::Withdrawn { .. } => {}
        }
        self.free_restored_lock();
        for at in [At::Mutin, At::Mutex] {
            if touched[at.index()] {
                self.serve(at, out);
            }
        }
        self.pass_lock(out);
    }

    /// `Withdraw(at)` from `q`: its request of type `at` leaves the queue, the permission
    /// granted to it (one held for a sequence in progress, never one held for `q`'s state or
    /// a committed trip) comes back, and its uncommitted trip leaves the lock.
    fn drop_request(&mut self, q: ProcessId, at: At) {
        let a = &mut self.arbiters[at.index()];
        if let Some(s) = a.queued(q) {
            a.queue.remove(&s);
        }
        if matches!(a.granted.get(&q), Some(Hold::Progress(_))) {
            a.granted.remove(&q);
        }
        if a.preempting == Some(q) {
            a.preempting = None;
        }
        self.cancel_trip(q);
    }

    /// `q`'s uncommitted trip leaves the lock: its place in the queue, or its hold (a
    /// `TripCancel`, and part of a `Withdraw`).
    fn cancel_trip(&mut self, q: ProcessId) {
        self.lock.queue.retain(|s, _| s.id != q);
        if self
            .lock
            .holder
            .is_some_and(|h| h.trip.id == q && !h.committed)
        {
            self.lock.holder = None;
        }
    }

    /// `Withdrawn(at)` from `q` for the withdrawn sequence: once every member answered, no
    /// grant for it is left anywhere and the sequence is over, the state unchanged.
    fn withdrawn(&mut self, q: ProcessId, at: At, out: &mut Outbox<LkcsMsg>) {
        if self.pending.map(At::of) != Some(at) {
            return;
        }
        let Some(left) = self.withdrawing.as_mut() else {
            return;
        };
        left.remove(&q);
        if left.is_empty() {
            self.withdrawing = None;
            self.pending = None;
            self.granters.clear();
            self.asked = false;
            self.locks.clear();
            out.complete();
        }
    }

    /// `TripGo` from the lock's holder `q`: its permission of type `at`, at once.
    fn go(&mut self, q: ProcessId, at: At, out: &mut Outbox<LkcsMsg>) {
        let a = &mut self.arbiters[at.index()];
        if a.preempting == Some(q) {
            // a committed trip does not relinquish
            a.preempting = None;
        }
        match a.granted.get_mut(&q) {
            Some(h) => {
                if matches!(h, Hold::Progress(_)) {
                    *h = Hold::Trip;
                }
            }
            None => {
                if a.granted.len() < a.hard {
                    if let Some(s) = a.queued(q) {
                        a.queue.remove(&s);
                    }
                    a.granted.insert(q, Hold::Trip);
                    out.send(q, LkcsMsg::Grant { at });
                } else {
                    self.overflow = true;
                }
            }
        }
    }

    /// A committed trip's lock is free again once its type is back within the capacity.
    fn free_restored_lock(&mut self) {
        if let Some(h) = self.lock.holder.filter(|h| h.committed) {
            let a = &self.arbiters[h.at.index()];
            if a.granted.len() <= a.cap {
                self.lock.holder = None;
            }
        }
    }

    /// Gives a free lock to the oldest trip asking; asks a younger holder that has not moved
    /// to yield to an older one.
    fn pass_lock(&mut self, out: &mut Outbox<LkcsMsg>) {
        if self.lock.holder.is_none()
            && let Some((trip, at)) = self.lock.queue.pop_first()
        {
            self.lock.holder = Some(LockHolder {
                trip,
                at,
                committed: false,
                inquired: false,
            });
            out.send(trip.id, LkcsMsg::TripLock { ts: trip.ts });
        }
        let oldest = self.lock.queue.keys().next().copied();
        if let Some(h) = self.lock.holder.as_mut()
            && !h.committed
            && !h.inquired
            && oldest.is_some_and(|o| o < h.trip)
        {
            h.inquired = true;
            out.send(h.trip.id, LkcsMsg::TripInquire { ts: h.trip.ts });
        }
    }

    /// Grants free slots in stamp order, preempts a younger holder in progress for the oldest
    /// waiting request, and tells the waiting requests when nothing here can give way.
    fn serve(&mut self, at: At, out: &mut Outbox<LkcsMsg>) {
        let a = &mut self.arbiters[at.index()];
        while !a.full() {
            let Some(s) = a.queue.pop_first() else { break };
            a.granted.insert(s.id, Hold::Progress(s.ts));
            out.send(s.id, LkcsMsg::Grant { at });
        }
        if a.full()
            && a.preempting.is_none()
            && let Some(&r) = a.queue.first()
        {
            let victim = a
                .granted
                .iter()
                .filter_map(|(&p, h)| match h {
                    Hold::Progress(ts) => Some(Stamp::new(*ts, p)),
                    _ => None,
                })
                .filter(|&s| s > r)
                .max();
            if let Some(v) = victim {
                a.preempting = Some(v.id);
                out.send(v.id, LkcsMsg::Preempt { at });
            }
        }
        let queue = &a.queue;
        a.told.retain(|s| queue.contains(s));
        let stuck = a.full() && a.granted.values().all(|h| !matches!(h, Hold::Progress(_)));
        if stuck {
            for &s in &a.queue {
                if a.told.insert(s) {
                    out.send(
                        s.id,
                        LkcsMsg::Blocked {
                            at,
                            sidetrack: false,
                        },
                    );
                }
            }
        }
    }

    /// Completes the pending sequence when every member granted.
    fn try_complete(&mut self, out: &mut Outbox<LkcsMsg>) {
        let Some(seq) = self.pending else { return };
        if self.granters.len() < self.closed.len() {
            return;
        }
        let at = At::of(seq);
        self.state = !self.state;
        self.pending = None;
        if self.committed {
            // the trip's move: the permissions of the other type stay, set aside for the
            // return
            self.away = Some(at);
        } else {
            for &q in &self.closed {
                out.send(q, LkcsMsg::Release { at: at.other() });
            }
            if self.asked {
                for &q in &self.closed {
                    out.send(q, LkcsMsg::TripCancel);
                }
            }
        }
        self.asked = false;
        self.committed = false;
        self.locks.clear();
        out.complete();
    }

    /// Invariant T's local part: at most the hard bound of each type granted, and above the
    /// capacity only by the trip permission of the lock's holder.
    fn check(&self) -> Result<(), String> {
        if self.overflow {
            return Err("a committed round trip found no room".into());
        }
        for (name, at) in [("MUTIN", At::Mutin), ("MUTEX", At::Mutex)] {
            let a = &self.arbiters[at.index()];
            if a.granted.len() > a.hard {
                return Err(format!(
                    "{name}: {} granted, hard bound {}",
                    a.granted.len(),
                    a.hard
                ));
            }
            // the reserve is the trip permission of the lock's committed holder: still
            // `Hold::Trip`, or held for its state once it retired (`retire`)
            let trips = a.granted.values().filter(|h| **h == Hold::Trip).count();
            let reserve_lent = self.lock.holder.is_some_and(|h| h.committed && h.at == at);
            if a.granted.len() > a.cap + usize::from(trips > 0 || reserve_lent) {
                return Err(format!(
                    "{name}: {} granted over capacity {} with {trips} trip permissions",
                    a.granted.len(),
                    a.cap
                ));
            }
        }
        Ok(())
    }
}

impl CsObject for TripProc {
    type Msg = LkcsMsg;

    fn id(&self) -> ProcessId {
        self.id
    }

    fn state(&self) -> CsState {
        self.state
    }

    fn pending(&self) -> Option<Sequence> {
        self.pending
    }

    fn begin_exit(&mut self, out: &mut Outbox<LkcsMsg>) -> Result<(), CallError> {
        self.start(Sequence::Exit, out)
    }

    fn begin_entry(&mut self, out: &mut Outbox<LkcsMsg>) -> Result<(), CallError> {
        self.start(Sequence::Entry, out)
    }

    fn on_message(&mut self, from: ProcessId, msg: LkcsMsg, out: &mut Outbox<LkcsMsg>) {
        // sorted by id (Topology::closed); a message from elsewhere is ignored
        if self.closed.binary_search(&from).is_ok() {
            self.handle(from, msg, out);
        }
    }

    fn operating_bounds(&self) -> Option<Bounds> {
        Some(self.operating)
    }

    fn takes_round_trips(&self) -> bool {
        true
    }

    fn check_invariants(&self) -> Result<(), String> {
        self.check()
    }

    /// Withdraws the pending sequence unless its trip committed (its grants then come from
    /// the reserve and it completes on its own): `Withdraw(at)` to every member of the closed
    /// neighbourhood, each of which drops the request, the permission granted to it and the
    /// trip, and answers `Withdrawn(at)`. The grants that arrive meanwhile are not counted;
    /// with FIFO links none follows a `Withdrawn`, so once every member answered the sequence
    /// ends where it started and nothing it asked for is held anywhere. Invariant T is
    /// untouched: a withdrawal only gives permissions back.
    fn withdraw(&mut self, out: &mut Outbox<LkcsMsg>) -> bool {
        if self.withdrawing.is_some() {
            return true;
        }
        let Some(seq) = self.pending else {
            return false;
        };
        if self.committed {
            return false;
        }
        let at = At::of(seq);
        for &q in &self.closed {
            out.send(q, LkcsMsg::Withdraw { at });
        }
        self.withdrawing = Some(self.closed.iter().copied().collect());
        true
    }

    fn can_withdraw(&self) -> bool {
        true
    }

    /// A retired process never makes the return of its last move, if that was a round trip:
    /// it gives back the set-aside permissions (those of the type its trip did not take) with
    /// a `Release`, as a normal sequence's end does, and its trip's permission becomes the one
    /// held for its state. Without this, the set-asides of retired processes stay counted for
    /// good: on `complete:8` with (2, 6), three exits by round trip whose processes retire
    /// fill MUTEX (capacity 5), and every later entry needs a round trip whose lock is freed
    /// only by an entry (`tests/lkcs_trip.rs::a_retired_process_gives_back_its_set_aside`).
    /// Invariant T holds: a Release only gives permissions back.
    fn retire(&mut self, out: &mut Outbox<LkcsMsg>) {
        if self.pending.is_some() {
            return;
        }
        if let Some(at) = self.away.take() {
            for &q in &self.closed {
                out.send(q, LkcsMsg::Release { at: at.other() });
            }
        }
    }

    /// The members whose grant the pending sequence still waits for (those whose `Withdrawn`
    /// has not come back, while it is withdrawn).
    fn awaiting(&self) -> Vec<ProcessId> {
        if let Some(left) = &self.withdrawing {
            return left.iter().copied().collect();
        }
        if self.pending.is_none() {
            return Vec::new();
        }
        super::not_granted(&self.closed, &self.granters)
    }

    /// The holders of this process's arbiters of a type with no free slot (those a request
    /// waiting here waits on), and the holder of its trip lock.
    fn lent_to(&self) -> Vec<ProcessId> {
        let full = self.arbiters.iter().filter(|a| a.full());
        let held = full.flat_map(|a| a.granted.keys().copied());
        super::lent_but(self.id, held.chain(self.lock.holder.map(|h| h.trip.id)))
    }
}
