//! The errors a [`Member`](super::Member) call returns, and what a stall looks like in quota
//! terms.

use crate::config::{Bounds, Instance};
use crate::cs::{CsState, Sequence};
use crate::runtime::StallSnapshot;
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

    /// Whether this is [`QuotaError::Shutdown`].
    pub fn is_shutdown(&self) -> bool {
        matches!(self, QuotaError::Shutdown)
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
    /// The members active at the stall, by id.
    pub active: Vec<usize>,
}

/// One member blocked in a stalled quota.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct Blocked {
    /// The member.
    pub member: usize,
    /// Whether it waits to enter (otherwise to exit).
    pub entering: bool,
    /// The bounds its move would break, one per neighbourhood (one in a global quota).
    /// Empty when no bound holds it: the algorithm itself does (a known limit of LKCS,
    /// or a wait chain of the algorithm's permissions).
    pub limits: Vec<Limit>,
    /// The members one of whom must move first: inactive ones that must enter (for an
    /// exit), active ones that must exit (for an entry).
    pub waits_on: Vec<usize>,
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
    /// Whether the algorithm keeps this bound tighter than the quota's own (LKCS keeps
    /// (l + 1, k − 1) near its leader).
    pub tightened: bool,
}

impl Stall {
    /// Explains `s` with the bounds the algorithm keeps (`operating`) and the quota's own.
    pub(crate) fn explain(
        s: &StallSnapshot,
        inst: &Instance,
        operating: &[Bounds],
        global: bool,
    ) -> Stall {
        let states = &s.states;
        let active: Vec<usize> = (0..states.len())
            .filter(|&i| states[i] == CsState::InCs)
            .collect();
        let t = inst.topology();
        let blocked = s
            .blocked
            .iter()
            .map(|&p| {
                let entering = s.pending[p.index()] == Some(Sequence::Entry);
                let mut limits = Vec::new();
                let mut waits_on = std::collections::BTreeSet::new();
                let around: Vec<_> = if global {
                    vec![p]
                } else {
                    t.closed(p).into_iter().collect()
                };
                for q in around {
                    let count = inst.in_cs_around(states, q);
                    let (own, op) = (inst.bounds(q), operating[q.index()]);
                    let (holds, bound, tightened) = if entering {
                        (count >= op.k, op.k, op.k != own.k)
                    } else {
                        (count <= op.l, op.l, op.l != own.l)
                    };
                    if !holds {
                        continue;
                    }
                    limits.push(Limit {
                        around: (!global).then_some(q.index()),
                        active: count,
                        bound,
                        tightened,
                    });
                    let wanted = if entering {
                        CsState::InCs
                    } else {
                        CsState::OutCs
                    };
                    waits_on.extend(
                        t.closed(q)
                            .into_iter()
                            .filter(|&r| r != p && states[r.index()] == wanted)
                            .map(|r| r.index()),
                    );
                }
                Blocked {
                    member: p.index(),
                    entering,
                    limits,
                    waits_on: waits_on.into_iter().collect(),
                }
            })
            .collect();
        Stall {
            blocked,
            dropped: s.dropped.iter().map(|p| p.index()).collect(),
            active,
        }
    }
}

/// Writes at most eight ids, then how many more.
fn ids(f: &mut fmt::Formatter<'_>, ids: &[usize]) -> fmt::Result {
    const SHOWN: usize = 8;
    let shown: Vec<String> = ids.iter().take(SHOWN).map(|i| i.to_string()).collect();
    f.write_str(&shown.join(", "))?;
    if ids.len() > SHOWN {
        write!(f, " and {} more", ids.len() - SHOWN)?;
    }
    Ok(())
}

impl fmt::Display for Stall {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("the quota is stalled (nothing in flight, every live member blocked)")?;
        for b in &self.blocked {
            let verb = if b.entering { "enter" } else { "exit" };
            write!(f, "; member {} waits to {verb}", b.member)?;
            if b.limits.is_empty() {
                f.write_str(" although no bound forbids it (the algorithm holds it)")?;
                continue;
            }
            for lim in &b.limits {
                let (most, word) = if b.entering {
                    ("at most", "are")
                } else {
                    ("at least", "are")
                };
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
                    ": {most} {} active {place}{tight}, {} {word}",
                    lim.bound, lim.active
                )?;
            }
            if !b.waits_on.is_empty() {
                let need = if b.entering { "exit" } else { "enter" };
                f.write_str(", until one of members ")?;
                ids(f, &b.waits_on)?;
                write!(f, " {need}s")?;
            }
        }
        if !self.dropped.is_empty() {
            f.write_str("; dropped members (never move again): ")?;
            ids(f, &self.dropped)?;
        }
        Ok(())
    }
}
