//! The view log's state machine: deterministic, pure (no Raft, no I/O), the same on every
//! member. [`ViewState::apply`] takes one committed [`Command`] and says what happened
//! ([`Applied`]); the whole [`ViewState`] is the Raft snapshot.
//!
//! The rules, from the design (`docs/fault-tolerance.md`, "Agreement" and "Changing the view"):
//! - a [`Proposal`] when nothing is pending **opens** a change to view `v+1`
//!   ([`Applied::Opened`]: every member of `M_v` freezes and reports);
//! - an eviction or a leave while a change is pending **extends** it ([`Applied::Extended`]):
//!   a change is never cancelled, only extended, and an extension **clears the reports**:
//!   every member reports again, after it stopped renewing the lease of each member the
//!   change now removes and waited out that lease (a report made for the smaller change
//!   made no such promise about the member added, which may still hold a slot under a lease
//!   others renew); a rejoin while a change is pending is
//!   **refused** with [`Refusal::ChangePending`], and the proposer proposes it again once the
//!   pending view installed (it then opens the next change);
//! - a proposal that changes nothing (evicting or removing a member not in `M_v`, a rejoin of
//!   the incarnation already in `M_v`, a member already in the pending change) or that would
//!   leave fewer members than a majority of `M_v` is refused with its [`Refusal`]; a rejoin of
//!   a member whose *other* incarnation is still in `M_v` is refused too
//!   ([`Refusal::OtherIncarnation`]): that incarnation is evicted first, by an ordinary
//!   eviction, and the rejoin proposed after the install;
//! - a replacement ([`Proposal::Replace`]: a member's new process, which resumed the
//!   member's view log from disk, in place of its old one) opens or extends a change like an
//!   eviction, but keeps the member: the old process does not report and the new one starts
//!   inactive; a change whose every member is replaced installs at once;
//! - a [`Command::Report`] for the pending view from a member of `M_v` (its incarnation in
//!   `M_v`) is recorded once; any other report (one from a replaced process included) is
//!   ignored;
//! - the pending view **installs** when every member of `M_v` that the change does not evict,
//!   remove or replace has reported. An evicted member that reported before that is **kept** with its
//!   reported state (it was only slow); a member that leaves is out, reported or not. The
//!   start of `v+1` is the reported states of the members kept, and [`CsState::OutCs`] for
//!   the members that rejoin.

use crate::cs::CsState;
use crate::id::ProcessId;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

/// A view: its number, its members with their incarnations, and which of them are active
/// when it begins.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// The view's number; view 0 is the cluster's first start.
    pub number: u64,
    /// `M_v`: each member's id and the incarnation of its process in this view.
    pub members: BTreeMap<ProcessId, u64>,
    /// The start: each member's state when the view begins (exactly the ids of `members`).
    pub start: BTreeMap<ProcessId, CsState>,
}

impl View {
    /// View 0, the cluster's first start: every member with its incarnation and its initial
    /// state. Refused if the members are empty or the start names other ids than the members.
    pub fn initial(
        members: BTreeMap<ProcessId, u64>,
        start: BTreeMap<ProcessId, CsState>,
    ) -> Result<View, InvalidView> {
        let view = View {
            number: 0,
            members,
            start,
        };
        view.check()?;
        Ok(view)
    }

    /// Checks that the view has members and a start for exactly them.
    pub fn check(&self) -> Result<(), InvalidView> {
        if self.members.is_empty() {
            return Err(InvalidView::NoMembers);
        }
        if !self.members.keys().eq(self.start.keys()) {
            return Err(InvalidView::StartMismatch);
        }
        Ok(())
    }

    /// The smallest number of members that is a majority of this view.
    pub fn majority(&self) -> usize {
        majority(self.members.len())
    }
}

/// The smallest majority of `n` members.
pub(crate) fn majority(n: usize) -> usize {
    n / 2 + 1
}

/// Why a view cannot be a view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum InvalidView {
    /// A view has at least one member.
    NoMembers,
    /// The start names other ids than the members.
    StartMismatch,
}

impl fmt::Display for InvalidView {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InvalidView::NoMembers => write!(f, "a view needs at least one member"),
            InvalidView::StartMismatch => {
                write!(f, "the start of a view must name exactly its members")
            }
        }
    }
}

impl std::error::Error for InvalidView {}

/// One proposed change of membership.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Proposal {
    /// Evict a member's process (it was unheard for `evict_after`, or a newer incarnation
    /// of the member wants in). It names the incarnation it evicts: once that process is
    /// gone from the view, a late eviction (a retry, a slow proposer) is refused
    /// ([`Refusal::StaleEviction`]) instead of evicting the member's next process.
    Evict {
        /// The member.
        member: ProcessId,
        /// The incarnation of its process the proposer saw in the view.
        incarnation: u64,
    },
    /// A member's new process `by` takes the place of its process `incarnation`, which it
    /// replaced (it restarted on the member's key and view-log folder, so the old process
    /// is gone): one change, in which the old process does not report and the new one
    /// starts inactive. Unlike an eviction it does not shrink the view, so it needs no
    /// majority of the view to stay: a majority that crashed at once comes back through it.
    /// A member proposes it for itself only, and only when every member keeps its view log
    /// on disk (a new process in memory has lost its votes and must not be counted before a
    /// view has it: [`Proposal::Evict`], then [`Proposal::Rejoin`]).
    Replace {
        /// The member.
        member: ProcessId,
        /// The incarnation of its old process, in the view.
        incarnation: u64,
        /// Its new process's incarnation.
        by: u64,
    },
    /// A member's new process (a new incarnation) joins, inactive.
    Rejoin {
        /// The member.
        member: ProcessId,
        /// Its new incarnation.
        incarnation: u64,
    },
    /// A member leaves on its own (it exited first if it was active).
    Leave(ProcessId),
    /// View `view` is a deficit view (it lowered a lower bound, and exits wait) or a surplus
    /// view (it raised an upper bound, and entries wait): change to a view of the same
    /// members started from their states now, which restores the bounds if entries brought
    /// the counts back up, or exits down (docs/fault-tolerance.md).
    Restore {
        /// The deficit or surplus view: a proposal made in an older view is ignored.
        view: u64,
    },
}

/// A command of the view log: what a member writes to it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Command {
    /// Propose a change of membership.
    Propose(Proposal),
    /// A member's stable state for the pending view.
    Report {
        /// The number of the pending view (`v+1`) the report is for.
        view: u64,
        /// The reporting member.
        member: ProcessId,
        /// Its incarnation: a report of another incarnation than the one in `M_v` is ignored.
        incarnation: u64,
        /// Its stable (published) state.
        state: CsState,
        /// Its Lamport clock: the highest fencing-token clock it saw ([`crate::FencingToken`]).
        token: u64,
        /// The round of the pending change it reports for ([`Pending::round`]): the reporter
        /// stopped renewing the leases of that round's removed members and waited them out.
        round: u64,
    },
}

/// The change from the current view to the pending one.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Change {
    /// Members to evict: out of the next view unless they report before it installs.
    pub evict: BTreeSet<ProcessId>,
    /// Members that rejoin, with their new incarnation: in the next view, inactive.
    pub rejoin: BTreeMap<ProcessId, u64>,
    /// Members that leave: out of the next view.
    pub leave: BTreeSet<ProcessId>,
    /// Members whose process is replaced by a new one ([`Proposal::Replace`]), with the
    /// new incarnation: in the next view under it, inactive; the old process does not
    /// report.
    pub replace: BTreeMap<ProcessId, u64>,
}

impl Change {
    /// Whether the change removes (evicts or lets leave) this member.
    pub fn removes(&self, member: ProcessId) -> bool {
        self.evict.contains(&member) || self.leave.contains(&member)
    }

    /// Whether the change names this member at all.
    pub fn names(&self, member: ProcessId) -> bool {
        self.removes(member)
            || self.rejoin.contains_key(&member)
            || self.replace.contains_key(&member)
    }

    /// The new processes the change brings in (rejoins and replacements), with their
    /// incarnations.
    pub fn incoming(&self) -> impl Iterator<Item = (ProcessId, u64)> + '_ {
        self.rejoin
            .iter()
            .chain(self.replace.iter())
            .map(|(m, i)| (*m, *i))
    }

    /// Whether the pending view waits for this member of the current view to report: it
    /// is neither removed nor replaced.
    pub fn awaits(&self, member: ProcessId) -> bool {
        !self.removes(member) && !self.replace.contains_key(&member)
    }
}

/// A member's report for the pending view.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Its stable state.
    pub state: CsState,
    /// Its Lamport clock: the highest fencing-token clock it saw.
    pub token: u64,
}

/// A committed change waiting for its reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pending {
    /// The number of the view it leads to: the current view's plus one.
    pub next: u64,
    /// What changes.
    pub change: Change,
    /// The reports recorded so far, from members of the current view.
    pub reports: BTreeMap<ProcessId, Report>,
    /// How many times the change was extended. A report names the round it was made for;
    /// one of an earlier round (made before the change grew, so promising nothing about the
    /// member added) is refused ([`Refusal::OutdatedReport`]).
    pub round: u64,
}

/// Why a command changed nothing ([`Applied::Ignored`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Refusal {
    /// Evicting or removing a member that is not in the current view.
    NotAMember(ProcessId),
    /// An eviction of a process that is not the member's process in the view (the member
    /// rejoined with a new incarnation since, or the proposer's view was old).
    StaleEviction {
        /// The member.
        member: ProcessId,
        /// The incarnation in the view.
        in_view: u64,
        /// The incarnation the eviction named.
        named: u64,
    },
    /// A rejoin of the incarnation the view already has.
    AlreadyMember {
        /// The member.
        member: ProcessId,
        /// Its incarnation, already in the view.
        incarnation: u64,
    },
    /// A report from a process the pending change replaces: it is gone from the next view.
    Replaced(ProcessId),
    /// A rejoin while another incarnation of the member is in the view: evict that one first.
    OtherIncarnation {
        /// The member.
        member: ProcessId,
        /// The incarnation in the view.
        in_view: u64,
    },
    /// A rejoin while a change is pending: propose it again once view `next` installed.
    ChangePending {
        /// The pending view.
        next: u64,
    },
    /// The pending change already names this member.
    AlreadyInChange(ProcessId),
    /// An eviction of a member that has reported for the pending view: it is kept.
    Reported(ProcessId),
    /// The change would leave fewer members than a majority of the current view.
    NoMajority {
        /// Members the change would leave of the current view.
        remaining: usize,
        /// The majority of the current view.
        needed: usize,
    },
    /// A report while no change is pending.
    NoChangePending,
    /// A report made for an earlier round of the pending change: the member reports again.
    OutdatedReport {
        /// The change's round.
        round: u64,
        /// The round the report was made for.
        got: u64,
    },
    /// A report for another view than the pending one.
    WrongView {
        /// The pending view.
        pending: u64,
        /// The view the report was for.
        got: u64,
    },
    /// A report from a member whose incarnation in the view is another.
    WrongIncarnation {
        /// The member.
        member: ProcessId,
        /// The incarnation in the view (`None`: the member is not in it).
        in_view: Option<u64>,
        /// The incarnation that reported.
        got: u64,
    },
    /// A second report from the same member for the pending view.
    AlreadyReported(ProcessId),
    /// A restore proposed in another view than the current one.
    NotCurrent {
        /// The current view.
        current: u64,
        /// The view the proposal was made in.
        got: u64,
    },
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::NotAMember(p) => write!(f, "{p} is not a member of the view"),
            Refusal::StaleEviction {
                member,
                in_view,
                named,
            } => write!(
                f,
                "{member}'s process in the view is incarnation {in_view}, not {named}: the eviction is stale"
            ),
            Refusal::AlreadyMember {
                member,
                incarnation,
            } => write!(f, "{member} is in the view with incarnation {incarnation}"),
            Refusal::OtherIncarnation { member, in_view } => write!(
                f,
                "{member} is in the view with incarnation {in_view}: evict it first"
            ),
            Refusal::ChangePending { next } => {
                write!(
                    f,
                    "view {next} is pending: propose the rejoin after it installs"
                )
            }
            Refusal::AlreadyInChange(p) => write!(f, "the pending change already names {p}"),
            Refusal::Replaced(p) => {
                write!(f, "the pending change replaces {p}'s process: it does not report")
            }
            Refusal::Reported(p) => write!(f, "{p} reported for the pending view: it is kept"),
            Refusal::NoMajority { remaining, needed } => write!(
                f,
                "the change would leave {remaining} members, fewer than a majority ({needed})"
            ),
            Refusal::NoChangePending => write!(f, "no change is pending"),
            Refusal::OutdatedReport { round, got } => write!(
                f,
                "a report for round {got} of the pending change, which is at round {round} (it grew since): report again"
            ),
            Refusal::WrongView { pending, got } => {
                write!(f, "a report for view {got} while view {pending} is pending")
            }
            Refusal::WrongIncarnation {
                member,
                in_view: Some(i),
                got,
            } => write!(f, "{member} incarnation {got} reported, the view has {i}"),
            Refusal::WrongIncarnation {
                member,
                in_view: None,
                got,
            } => write!(
                f,
                "{member} (incarnation {got}) is not a member of the view"
            ),
            Refusal::AlreadyReported(p) => write!(f, "{p} has already reported"),
            Refusal::NotCurrent { current, got } => write!(
                f,
                "a restore proposed in view {got}, and the current view is {current}"
            ),
        }
    }
}

/// What applying a command did: what the node acts on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Applied {
    /// A change to view `next` opened: every member of the current view freezes and reports.
    Opened {
        /// The pending view.
        next: u64,
        /// The change.
        change: Change,
    },
    /// The pending change grew: it now also removes these members.
    Extended {
        /// The pending view.
        next: u64,
        /// The whole change as it now stands.
        change: Change,
    },
    /// A report was recorded; the view is still pending.
    Recorded {
        /// The pending view.
        next: u64,
        /// Who reported.
        member: ProcessId,
    },
    /// The pending view installed: every member restarts its object from its start.
    Installed(View),
    /// Nothing changed, for this reason.
    Ignored(Refusal),
}

/// The whole state of the view log: the Raft snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ViewState {
    /// The current (last installed) view.
    pub view: View,
    /// The change to the next view, if one is pending.
    pub pending: Option<Pending>,
    /// The highest fencing-token clock any report carried.
    pub token: u64,
}

impl ViewState {
    /// The state at the cluster's first start: view `initial`, nothing pending.
    pub fn new(initial: View) -> Result<ViewState, InvalidView> {
        initial.check()?;
        Ok(ViewState {
            view: initial,
            pending: None,
            token: 0,
        })
    }

    /// Applies one committed command.
    pub fn apply(&mut self, command: &Command) -> Applied {
        match *command {
            Command::Propose(p) => self.propose(p),
            Command::Report {
                view,
                member,
                incarnation,
                state,
                token,
                round,
            } => self.report(view, member, incarnation, round, Report { state, token }),
        }
    }

    fn propose(&mut self, proposal: Proposal) -> Applied {
        let members = &self.view.members;
        // what the proposal is about, checked against the current view
        match proposal {
            Proposal::Evict {
                member,
                incarnation,
            } => {
                if let Err(refusal) = process_in_view(members, member, incarnation) {
                    return Applied::Ignored(refusal);
                }
            }
            Proposal::Leave(p) => {
                if !members.contains_key(&p) {
                    return Applied::Ignored(Refusal::NotAMember(p));
                }
            }
            Proposal::Replace {
                member,
                incarnation,
                by,
            } => {
                if members.get(&member) == Some(&by) {
                    return Applied::Ignored(Refusal::AlreadyMember {
                        member,
                        incarnation: by,
                    });
                }
                if let Err(refusal) = process_in_view(members, member, incarnation) {
                    return Applied::Ignored(refusal);
                }
            }
            Proposal::Rejoin {
                member,
                incarnation,
            } => match members.get(&member) {
                Some(&i) if i == incarnation => {
                    return Applied::Ignored(Refusal::AlreadyMember {
                        member,
                        incarnation,
                    })
                }
                Some(&in_view) => {
                    return Applied::Ignored(Refusal::OtherIncarnation { member, in_view })
                }
                None => {}
            },
            Proposal::Restore { view } => {
                if view != self.view.number {
                    return Applied::Ignored(Refusal::NotCurrent {
                        current: self.view.number,
                        got: view,
                    });
                }
            }
        }
        let mut change = match (&self.pending, proposal) {
            (None, _) => Change::default(),
            // a pending change restarts every object from the reports anyway
            (Some(pending), Proposal::Rejoin { .. } | Proposal::Restore { .. }) => {
                return Applied::Ignored(Refusal::ChangePending { next: pending.next });
            }
            (
                Some(pending),
                Proposal::Evict { member: p, .. }
                | Proposal::Leave(p)
                | Proposal::Replace { member: p, .. },
            ) => {
                // a replacement of a process the change evicts (its link saw the restart)
                // turns the eviction into the replacement: the member stays
                let evicted_only = pending.change.evict.contains(&p)
                    && !pending.change.leave.contains(&p)
                    && !pending.change.rejoin.contains_key(&p)
                    && !pending.change.replace.contains_key(&p);
                let replacing = matches!(proposal, Proposal::Replace { .. });
                if pending.change.names(p) && !(replacing && evicted_only) {
                    return Applied::Ignored(Refusal::AlreadyInChange(p));
                }
                // a process that reported is alive: it is kept, not evicted nor replaced
                if !matches!(proposal, Proposal::Leave(_)) && pending.reports.contains_key(&p) {
                    return Applied::Ignored(Refusal::Reported(p));
                }
                pending.change.clone()
            }
        };
        match proposal {
            Proposal::Evict { member, .. } => {
                change.evict.insert(member);
            }
            Proposal::Leave(p) => {
                change.leave.insert(p);
            }
            Proposal::Replace { member, by, .. } => {
                change.evict.remove(&member);
                change.replace.insert(member, by);
            }
            Proposal::Rejoin {
                member,
                incarnation,
            } => {
                change.rejoin.insert(member, incarnation);
            }
            // the same members, started from their reports
            Proposal::Restore { .. } => {}
        }
        let remaining = members.keys().filter(|p| !change.removes(**p)).count();
        let needed = self.view.majority();
        if remaining < needed {
            return Applied::Ignored(Refusal::NoMajority { remaining, needed });
        }
        let applied = match &mut self.pending {
            None => {
                let next = self.view.number + 1;
                self.pending = Some(Pending {
                    next,
                    change: change.clone(),
                    reports: BTreeMap::new(),
                    round: 0,
                });
                Applied::Opened { next, change }
            }
            Some(pending) => {
                pending.change = change.clone();
                // the reports so far promised nothing about the member added: every member
                // reports again (its state is frozen, so the same state)
                pending.reports.clear();
                pending.round += 1;
                Applied::Extended {
                    next: pending.next,
                    change,
                }
            }
        };
        // a change that replaces every process of the view awaits no report; one that also
        // evicts waits for a report all the same (a reporter waits out the evicted
        // member's lease)
        let evicts = self
            .pending
            .as_ref()
            .is_some_and(|p| !p.change.evict.is_empty());
        match (evicts, applied) {
            (false, applied) => match self.try_install() {
                Some(view) => Applied::Installed(view),
                None => applied,
            },
            (true, applied) => applied,
        }
    }

    fn report(
        &mut self,
        view: u64,
        member: ProcessId,
        incarnation: u64,
        round: u64,
        r: Report,
    ) -> Applied {
        let Some(pending) = &mut self.pending else {
            return Applied::Ignored(Refusal::NoChangePending);
        };
        if view != pending.next {
            return Applied::Ignored(Refusal::WrongView {
                pending: pending.next,
                got: view,
            });
        }
        if round != pending.round {
            return Applied::Ignored(Refusal::OutdatedReport {
                round: pending.round,
                got: round,
            });
        }
        let in_view = self.view.members.get(&member).copied();
        if in_view != Some(incarnation) {
            return Applied::Ignored(Refusal::WrongIncarnation {
                member,
                in_view,
                got: incarnation,
            });
        }
        if pending.change.replace.contains_key(&member) {
            return Applied::Ignored(Refusal::Replaced(member));
        }
        if pending.reports.contains_key(&member) {
            return Applied::Ignored(Refusal::AlreadyReported(member));
        }
        pending.reports.insert(member, r);
        self.token = self.token.max(r.token);
        let next = pending.next;
        match self.try_install() {
            Some(view) => Applied::Installed(view),
            None => Applied::Recorded { next, member },
        }
    }

    /// Installs the pending view if every member it waits for has reported.
    fn try_install(&mut self) -> Option<View> {
        let pending = self.pending.as_ref()?;
        let waiting = self
            .view
            .members
            .keys()
            .any(|p| pending.change.awaits(*p) && !pending.reports.contains_key(p));
        if waiting {
            return None;
        }
        let mut members = BTreeMap::new();
        let mut start = BTreeMap::new();
        for (&p, &incarnation) in &self.view.members {
            if pending.change.leave.contains(&p) {
                continue;
            }
            // a member evicted that reported is kept: every member kept has reported
            if let Some(r) = pending.reports.get(&p) {
                members.insert(p, incarnation);
                start.insert(p, r.state);
            }
        }
        for (p, incarnation) in pending.change.incoming() {
            members.insert(p, incarnation);
            start.insert(p, CsState::OutCs);
        }
        let view = View {
            number: pending.next,
            members,
            start,
        };
        self.view = view.clone();
        self.pending = None;
        Some(view)
    }

    /// The members whose reports the pending view still waits for (empty if none pending).
    pub fn awaiting(&self) -> BTreeSet<ProcessId> {
        match &self.pending {
            None => BTreeSet::new(),
            Some(pending) => self
                .view
                .members
                .keys()
                .filter(|p| pending.change.awaits(**p) && !pending.reports.contains_key(p))
                .copied()
                .collect(),
        }
    }
}

/// Whether `member`'s process in the view is `incarnation`, as an eviction or a replacement
/// of that process needs: refused when the member is not in the view, or when another of its
/// processes is (the proposal is stale).
fn process_in_view(
    members: &BTreeMap<ProcessId, u64>,
    member: ProcessId,
    incarnation: u64,
) -> Result<(), Refusal> {
    match members.get(&member) {
        None => Err(Refusal::NotAMember(member)),
        Some(&in_view) if in_view != incarnation => Err(Refusal::StaleEviction {
            member,
            in_view,
            named: incarnation,
        }),
        Some(_) => Ok(()),
    }
}

#[cfg(test)]
mod tests;
