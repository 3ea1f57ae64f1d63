//! The errors a [`Member`](super::Member) call returns, and what a stall looks like in quota
//! terms.

use crate::config::{Bounds, Instance};
use crate::cs::{CsState, Sequence};
use crate::error::{ids, MemberList};
use crate::id::ProcessId;
use crate::runtime::{Look, StallSnapshot, WaitView};
use std::collections::BTreeSet;
use std::fmt;

/// Why a [`Member`](super::Member) call did not bring the member where it asked.
///
/// Match on it with a wildcard arm: new variants may come.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaError {
    /// The call gave up waiting. The move it started (or resumed) **keeps running**: the
    /// member is now [`MemberState::Entering`](super::MemberState::Entering) or
    /// [`MemberState::Exiting`](super::MemberState::Exiting), and the next call resolves it
    /// (`enter` waits for the member to be active, `exit` for it to be inactive, whichever
    /// way it is moving now).
    Timeout,
    /// The quota is stalled: nothing is in flight and every live member is blocked in a call,
    /// so this call would wait for ever. The [`Stall`] names the blocked members and the ones
    /// they wait on. The member's move stays pending, as after a timeout.
    Stalled(Stall),
    /// [`Quota::shutdown`](super::Quota::shutdown) was called (or the quota was dropped).
    Shutdown,
    /// An engine thread of the quota died: a bug in lkcs, to be reported. The quota can no
    /// longer make progress.
    Internal(String),
    /// A member over TCP ([`Cluster::member`](crate::net::Cluster::member)): the call waits
    /// on this member, and it has been silent beyond the cluster's peer timeout (or its link
    /// is lost). The move keeps running, as after a timeout: the next call resolves it if
    /// the peer comes back.
    PeerUnreachable(usize),
    /// [`Member::try_enter`](super::Member::try_enter) or
    /// [`Member::try_exit`](super::Member::try_exit): the move would wait on a bound, so it
    /// was not made; the member is exactly as it was.
    WouldBlock,
    /// [`Quota::close`](super::Quota::close) was called: no more entries. (Exits still
    /// succeed: they release the member.)
    Closed,
    /// [`Member::cancel`](super::Member::cancel): the move in progress cannot be withdrawn,
    /// for the reason given; it keeps running.
    CannotWithdraw(String),
    /// [`Quota::take_members`](super::Quota::take_members) was called before: the members
    /// were handed out already.
    MembersTaken,
    /// The call is not available on this kind of member, for the reason given.
    Unsupported(String),
    /// A member over TCP whose cluster runs views: the cluster evicted this member (it was
    /// unreachable for the eviction delay), so it fenced. Its blocked and later calls return
    /// this; whatever the application did under the member's slot must stop.
    Evicted,
}

impl QuotaError {
    /// Whether this is [`QuotaError::Timeout`].
    pub fn is_timeout(&self) -> bool {
        matches!(self, QuotaError::Timeout)
    }

    /// Whether this is [`QuotaError::Stalled`].
    pub fn is_stalled(&self) -> bool {
        matches!(self, QuotaError::Stalled(_))
    }

    /// The unreachable member of [`QuotaError::PeerUnreachable`].
    pub fn unreachable_peer(&self) -> Option<usize> {
        match self {
            QuotaError::PeerUnreachable(p) => Some(*p),
            _ => None,
        }
    }

    /// Whether this is [`QuotaError::Shutdown`].
    pub fn is_shutdown(&self) -> bool {
        matches!(self, QuotaError::Shutdown)
    }

    /// Whether this is [`QuotaError::Closed`]: the quota was closed, as a worker's loop
    /// ends.
    pub fn is_closed(&self) -> bool {
        matches!(self, QuotaError::Closed)
    }

    /// Whether this is [`QuotaError::WouldBlock`].
    pub fn is_would_block(&self) -> bool {
        matches!(self, QuotaError::WouldBlock)
    }
}

impl fmt::Display for QuotaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            QuotaError::Timeout => f.write_str(
                "timed out; the member's move keeps running and the next call resolves it",
            ),
            QuotaError::Stalled(s) => write!(f, "{s}"),
            QuotaError::Shutdown => f.write_str("the quota has shut down"),
            QuotaError::Internal(why) => write!(f, "internal error in lkcs: {why}"),
            QuotaError::PeerUnreachable(p) => write!(
                f,
                "member {p} is unreachable (silent beyond the peer timeout); the move keeps running and the next call resolves it"
            ),
            QuotaError::WouldBlock => {
                f.write_str("the move would wait on a bound; the member is as it was")
            }
            QuotaError::Closed => f.write_str("the quota is closed: no more entries"),
            QuotaError::Evicted => f.write_str(
                "this member was evicted from the cluster and fenced: stop using its slot",
            ),
            QuotaError::CannotWithdraw(why) => {
                write!(f, "the move in progress cannot be withdrawn: {why}")
            }
            QuotaError::MembersTaken => {
                f.write_str("the quota's members were taken already (one Member per worker)")
            }
            QuotaError::Unsupported(why) => write!(f, "not supported: {why}"),
        }
    }
}

impl std::error::Error for QuotaError {}

/// A stalled quota, in quota terms: who is blocked, which bound holds each, and whom each
/// waits on.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Stall {
    /// The blocked members, by id.
    pub blocked: Vec<Blocked>,
    /// The members that were dropped (or whose worker panicked): they never move again.
    pub dropped: Vec<usize>,
    /// Those of [`Stall::dropped`] that were dropped by a panicking worker.
    pub panicked: Vec<usize>,
    /// The members active at the stall, by id.
    pub active: Vec<usize>,
}

/// Who waits in a running quota, and on whom ([`Quota::waiting`](super::Quota::waiting)):
/// the report for a quota that is slow or stuck although it is not [stalled](Stall), e.g.
/// because a member stays active and others wait behind it, some of them far away.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Waits {
    /// Every member with a move in progress (blocked in a call, or left pending by a
    /// timeout), by id.
    pub waiting: Vec<Blocked>,
    /// The active members, by id.
    pub active: Vec<usize>,
    /// The members that were dropped (or whose worker panicked).
    pub dropped: Vec<usize>,
    /// Those of [`Waits::dropped`] that were dropped by a panicking worker.
    pub panicked: Vec<usize>,
    /// Whether a message was in flight when the picture was taken: then it may mix moments,
    /// and a second look may differ.
    pub in_flight: bool,
}

/// One member waiting to move: the bound that holds it, or the algorithm's permissions.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Blocked {
    /// The member.
    pub member: usize,
    /// Whether it waits to enter (otherwise to exit).
    pub entering: bool,
    /// The bounds its move would break, one per neighbourhood (one in a global quota).
    /// Empty when no bound holds it: the algorithm itself does (a known limit of LKCS,
    /// or a wait chain of the algorithm's permissions: see [`Blocked::needs`]).
    pub limits: Vec<Limit>,
    /// The members one of whom must move first: inactive ones that must enter (for an
    /// exit), active ones that must exit (for an entry).
    pub waits_on: Vec<usize>,
    /// The members whose permission the move still needs, when the algorithm works by
    /// permissions (LMUTIN, LMUTEX, Maekawa); empty when it does not say.
    pub needs: Vec<usize>,
    /// The other members holding the permissions in [`Blocked::needs`] now: the move waits
    /// until they give them back.
    pub held_by: Vec<usize>,
}

/// A bound that holds a blocked member.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Limit {
    /// The member whose neighbourhood the bound counts (`None` in a global quota: all
    /// members).
    pub around: Option<usize>,
    /// How many are active there.
    pub active: usize,
    /// The bound: at least `bound` (for an exit) or at most `bound` (for an entry).
    pub bound: usize,
    /// Whether the algorithm keeps this bound tighter than the quota's own: LKCS keeps
    /// (l + 1, k − 1) where a move can break a bound (the round trip), or within two hops of
    /// its leader (the leader rules).
    pub tightened: bool,
}

/// What explains a wait: the quota's bounds and the algorithm's own.
pub(crate) struct Context<'a> {
    pub(crate) instance: &'a Instance,
    pub(crate) operating: &'a [Bounds],
    pub(crate) global: bool,
}

impl Context<'_> {
    /// Explains the wait of `p`, whose move is `seq`, in the configuration `states`; `views`
    /// are what the processes' algorithms say (empty when unknown).
    fn blocked(
        &self,
        p: ProcessId,
        seq: Sequence,
        states: &[CsState],
        views: &[WaitView],
    ) -> Blocked {
        let entering = seq == Sequence::Entry;
        let t = self.instance.topology();
        let mut limits = Vec::new();
        let mut waits_on = BTreeSet::new();
        let around: Vec<_> = if self.global {
            vec![p]
        } else {
            t.closed(p).into_iter().collect()
        };
        for q in around {
            let count = self.instance.in_cs_around(states, q);
            let (own, op) = (self.instance.bounds(q), self.operating[q.index()]);
            let (holds, bound, tightened) = if entering {
                (count >= op.k, op.k, op.k != own.k)
            } else {
                (count <= op.l, op.l, op.l != own.l)
            };
            if !holds {
                continue;
            }
            limits.push(Limit {
                around: (!self.global).then_some(q.index()),
                active: count,
                bound,
                tightened,
            });
            let wanted = if entering {
                CsState::InCs
            } else {
                CsState::OutCs
            };
            let others = if self.global {
                (0..states.len()).map(ProcessId::from).collect()
            } else {
                t.closed(q)
            };
            waits_on.extend(
                others
                    .into_iter()
                    .filter(|&r| r != p && states[r.index()] == wanted)
                    .map(|r| r.index()),
            );
        }
        let view = views.get(p.index()).cloned().unwrap_or_default();
        let held_by: BTreeSet<usize> = view
            .awaiting
            .iter()
            .filter_map(|q| views.get(q.index()))
            .flat_map(|v| v.lent_to.iter())
            .filter(|&&r| r != p)
            .map(|r| r.index())
            .collect();
        Blocked {
            member: p.index(),
            entering,
            limits,
            waits_on: waits_on.into_iter().collect(),
            needs: view.awaiting.iter().map(|q| q.index()).collect(),
            held_by: held_by.into_iter().collect(),
        }
    }

    /// Explains a stall the watchdog found.
    pub(crate) fn stall(&self, s: &StallSnapshot, views: &[WaitView]) -> Stall {
        let blocked = s
            .blocked
            .iter()
            .map(|&p| {
                let seq = s.pending[p.index()].unwrap_or(Sequence::Entry);
                self.blocked(p, seq, &s.states, views)
            })
            .collect();
        Stall {
            blocked,
            dropped: s.dropped.iter().map(|p| p.index()).collect(),
            panicked: s.panicked.iter().map(|p| p.index()).collect(),
            active: active(&s.states),
        }
    }

    /// Explains a picture taken on demand.
    pub(crate) fn waits(&self, look: &Look) -> Waits {
        let s = &look.snapshot;
        let waiting = (0..s.states.len())
            .filter_map(|i| {
                let seq = s.pending[i]?;
                Some(self.blocked(ProcessId::from(i), seq, &s.states, &look.views))
            })
            .collect();
        Waits {
            waiting,
            active: active(&s.states),
            dropped: s.dropped.iter().map(|p| p.index()).collect(),
            panicked: s.panicked.iter().map(|p| p.index()).collect(),
            in_flight: look.in_flight,
        }
    }
}

fn active(states: &[CsState]) -> Vec<usize> {
    (0..states.len())
        .filter(|&i| states[i] == CsState::InCs)
        .collect()
}

/// "member 3" or "members 3, 4".
fn members(f: &mut fmt::Formatter<'_>, list: &[usize]) -> fmt::Result {
    write!(f, "{}", MemberList(list))
}

impl fmt::Display for Blocked {
    /// One clause: "member 4 waits to enter: at most 1 active around member 3, 1 are, until
    /// member 2 exits".
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let verb = if self.entering { "enter" } else { "exit" };
        write!(f, "member {} waits to {verb}", self.member)?;
        if self.limits.is_empty() {
            f.write_str(" although no bound forbids it")?;
            if self.needs.is_empty() {
                return f.write_str(" (the algorithm holds it)");
            }
            f.write_str(": it needs the permission of ")?;
            members(f, &self.needs)?;
            if !self.held_by.is_empty() {
                f.write_str(", held by ")?;
                members(f, &self.held_by)?;
                f.write_str(" (a wait chain of the algorithm's permissions)")?;
            }
            return Ok(());
        }
        for lim in &self.limits {
            let most = if self.entering { "at most" } else { "at least" };
            let place = match lim.around {
                None => "among all members".to_string(),
                Some(q) => format!("around member {q}"),
            };
            let tight = if lim.tightened {
                " (kept one tighter by the algorithm)"
            } else {
                ""
            };
            write!(
                f,
                ": {most} {} active {place}{tight}, {} are",
                lim.bound, lim.active
            )?;
        }
        if !self.waits_on.is_empty() {
            let need = if self.entering { "exit" } else { "enter" };
            f.write_str(", until one of ")?;
            members(f, &self.waits_on)?;
            write!(f, " {need}s")?;
        }
        Ok(())
    }
}

fn clauses(
    f: &mut fmt::Formatter<'_>,
    blocked: &[Blocked],
    dropped: &[usize],
    panicked: &[usize],
) -> fmt::Result {
    for b in blocked {
        write!(f, "; {b}")?;
    }
    if !dropped.is_empty() {
        f.write_str("; dropped (never move again): ")?;
        members(f, dropped)?;
    }
    if !panicked.is_empty() {
        f.write_str("; of them, dropped by a panicking worker: ")?;
        members(f, panicked)?;
    }
    Ok(())
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the quota is stalled (nothing in flight, every live member blocked)")?;
        clauses(f, &self.blocked, &self.dropped, &self.panicked)
    }
}

impl fmt::Display for Waits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.waiting.is_empty() {
            f.write_str("no member is waiting")?;
        } else {
            write!(f, "{} waiting", self.waiting.len())?;
        }
        if !self.active.is_empty() {
            f.write_str("; active: ")?;
            ids(f, &self.active)?;
        }
        clauses(f, &self.waiting, &self.dropped, &self.panicked)?;
        if self.in_flight {
            f.write_str(" (messages were in flight: a second look may differ)")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn blocked(limits: Vec<Limit>, needs: Vec<usize>, held_by: Vec<usize>) -> Blocked {
        Blocked {
            member: 6,
            entering: true,
            limits,
            waits_on: Vec::new(),
            needs,
            held_by,
        }
    }

    /// A member no bound holds is reported as the algorithm's wait, with the permissions it
    /// needs and who holds them (the paper's hold-and-wait, `--printed-rule hold-and-wait`,
    /// forms such chains; the quota's runtime reports them through `Quota::waiting`).
    #[test]
    fn a_wait_no_bound_asks_for_names_the_permissions_and_their_holders() {
        let chain = blocked(Vec::new(), vec![5], vec![4]);
        assert_eq!(
            chain.to_string(),
            "member 6 waits to enter although no bound forbids it: it needs the permission of \
             member 5, held by member 4 (a wait chain of the algorithm's permissions)"
        );
        let opaque = blocked(Vec::new(), Vec::new(), Vec::new());
        assert_eq!(
            opaque.to_string(),
            "member 6 waits to enter although no bound forbids it (the algorithm holds it)"
        );
        let bound = blocked(
            vec![Limit {
                around: Some(5),
                active: 1,
                bound: 1,
                tightened: false,
            }],
            vec![5],
            vec![4],
        );
        assert!(
            !bound.to_string().contains("no bound forbids"),
            "a member held by a bound is not an algorithm's wait: {bound}"
        );
    }
}
