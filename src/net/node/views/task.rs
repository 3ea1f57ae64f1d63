//! The view task ([`run`]): it follows the view log, installs each view (or fences), freezes
//! and reports for a committed change, renews the lease with its beats, rejoins after an
//! eviction or a restart, and proposes the evictions, the leave and the restores.

use super::transport::LinkTransport;
use super::{encode, lock, Restore, ViewCore, ViewFrame, ViewOptions, ViewShared, ViewStatus};
use crate::cs::CsState;
use crate::id::ProcessId;
use crate::net::link::NetSender;
use crate::net::node::Wire;
use crate::net::view::{
    Applied, Command, Proposal, Refusal, Storage, ViewGroup, ViewRpc, ViewRpcReply, ViewTransport,
    WriteRefusal,
};
use crate::net::{LogEvent, Logger};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How often the view task looks at the log's state, the links and the lease.
pub(super) const TICK: Duration = Duration::from_millis(20);

/// The view task of member `id`: starts its group, publishes the view whenever it changes
/// (`publish(None)` each tick otherwise; `false` from it means the node stopped, and the
/// group is shut down), installs each view the log installs (or fences when left out),
/// freezes and reports when a change is committed (again after the write timeout while the
/// report is not in the log), and proposes to evict the members whose link has been down for
/// `evict_after`, and at once the old process of a member whose link saw it restart (again
/// after `evict_after` or the write timeout, the longer, while the member is still in the
/// view and no committed change removes it).
///
/// A process told that the view has another process of its member (it restarted: its
/// first process is still in the view, or was evicted) **rejoins**: it drops its group,
/// starts a new one as a Raft learner ([`ViewGroup::join`]) with its own incarnation, and
/// asks the members to let it rejoin (through any of them, which forward to the leader),
/// again every lease beat until a view has it; that view installs its object, inactive.
pub(in crate::net::node) async fn run<M: Send + 'static>(
    id: ProcessId,
    options: ViewOptions,
    shared: Arc<ViewShared<M>>,
    net: NetSender<Wire<M>>,
    log: Logger,
    core: Box<dyn ViewCore>,
) {
    let (links, lease) = (&shared.links, &shared.lease);
    let transport = || LinkTransport::new(net.clone(), links.clone(), options.config);
    let mut last_beat: Option<Instant> = None;
    let mut installed = options.initial.number;
    // the incarnation the view log knows this process by: 0 for a member's first process
    let mut incarnation = options.initial.members.get(&id).copied().unwrap_or(0);
    // the place this process holds in the view (its incarnation there), kept while it
    // rejoins after a fence: `None` for a new process of the member, which holds none
    let mut place = Some(incarnation);
    let mut joining = false;
    // a view admitted this process after it rejoined: its group is a Raft node the others
    // counted, which it keeps if it has to rejoin again, lease or not
    let mut admitted = false;
    // the last request to rejoin (or to evict the old process), and whether one is under way
    let mut asked: Option<Instant> = None;
    let asking = Arc::new(AtomicBool::new(false));
    let said: Arc<Mutex<Option<String>>> = Arc::default();
    // the last report written: for which view and round of the change, and when
    let mut reported: Option<(u64, u64, Instant)> = None;
    let fenced = |view: u64, why: String| {
        log(id, &LogEvent::View(format!("fenced: {why}")));
        core.fence(view, why);
    };
    let durable = matches!(options.storage, Storage::Dir(_));
    links.durable.store(durable, Ordering::Release);
    let mut group = match ViewGroup::start_in(
        id,
        options.initial.clone(),
        transport(),
        options.config,
        &options.storage,
    )
    .await
    {
        Ok(g) => g,
        Err(e) => {
            // without its log the member can neither renew its lease nor follow the views
            fenced(installed, format!("the view log did not start: {e}"));
            return;
        }
    };
    *lock(&shared.group) = Some(group.clone());
    links.resumed.store(group.resumed(), Ordering::Release);
    if group.resumed() {
        // a restart on the member's folder: its Raft node goes on, but its object's state
        // died with the process before, which the view may still count; it rejoins as a
        // new process (the view log knows it by its new incarnation)
        log(
            id,
            &LogEvent::View(format!(
                "resumed the view log at view {}: this process (incarnation {:x}) rejoins",
                group.state().view.number,
                shared.incarnation
            )),
        );
        shared.rejoin.store(true, Ordering::Release);
    }
    // the last proposal to evict each member: another waits as long again
    let mut proposed: BTreeMap<ProcessId, Instant> = BTreeMap::new();
    let again = options.evict_after.max(options.config.write_timeout);
    let mut last: Option<ViewStatus> = None;
    // the last restore proposed, and in which view (an exit gated by a deficit view, or an
    // exit completed in a surplus view): another waits as long, except for a surplus view's
    // first in a later view (an exit there is news a restore of an earlier view had not)
    let mut restored: Option<(Instant, u64)> = None;
    // the last request to leave
    let mut left: Option<Instant> = None;
    // the mark of an established Raft node could not be written (said once, not tried
    // again: a restart on the folder rejoins as a new Raft node, which is safe)
    let mut establish_failed = false;
    loop {
        if !joining && shared.rejoin.load(Ordering::Acquire) {
            joining = true;
            incarnation = shared.incarnation;
            if !lock(lease).ever_granted() && !admitted {
                // a new process of the member (it restarted)
                log(
                    id,
                    &LogEvent::View(format!(
                        "another process of {id} is in the view: this one (incarnation {incarnation:x}) rejoins"
                    )),
                );
                place = None;
                let new_node = shared.new_process.load(Ordering::Acquire);
                if group.resumed() || (durable && !new_node) {
                    // its group is its member's Raft node: resumed from the folder, or
                    // started on it by this very process (no member saw it replace an
                    // earlier one; it was evicted before its first lease): it keeps its log
                    // and its votes
                    group.set_incarnation(incarnation);
                } else {
                    // its group is not its member's Raft node (its log is in memory, or a
                    // member saw it replace an earlier process and its folder was empty or
                    // never established: a new node, without the old one's votes), so it
                    // joins with a group of its own as a learner, on its folder cleared,
                    // which votes only once a view has it (its peers do not hear its Raft
                    // messages before)
                    if durable {
                        log(
                            id,
                            &LogEvent::View(
                                "its state folder holds no Raft node the others counted: \
                                 it clears it and joins as a new Raft node"
                                    .into(),
                            ),
                        );
                    }
                    group.shutdown().await;
                    group = match ViewGroup::join_in(
                        id,
                        incarnation,
                        options.initial.clone(),
                        transport(),
                        options.config,
                        &options.storage,
                    )
                    .await
                    {
                        Ok(g) => g,
                        Err(e) => {
                            fenced(
                                installed,
                                format!("the view log did not start to rejoin: {e}"),
                            );
                            return;
                        }
                    };
                    *lock(&shared.group) = Some(group.clone());
                    links.resumed.store(false, Ordering::Release);
                }
            } else {
                // the process that fenced (or was evicted before its first lease, after a
                // view had admitted it): its group keeps its log and its votes (a fresh
                // one, while the others still count it a voter, could vote twice in a term)
                log(
                    id,
                    &LogEvent::View(format!(
                        "evicted: this process (incarnation {incarnation:x}) rejoins"
                    )),
                );
            }
        }
        let state = group.state();
        let rejoining = state
            .pending
            .iter()
            .flat_map(|p| p.change.incoming())
            .collect();
        links.set_view(&state.view.members, rejoining);
        // a member of the view, acting as one: not while it rejoins (a process that fenced
        // is still in the view while the view has its place)
        let in_view = state
            .view
            .members
            .get(&id)
            .is_some_and(|i| *i == incarnation || Some(*i) == place);
        let member = in_view && !joining;
        let now = ViewStatus {
            number: state.view.number,
            members: state.view.members.keys().copied().collect(),
            pending: state.pending.clone(),
            leader: group.leader(),
        };
        let changed = last.as_ref() != Some(&now);
        if !core.publish(changed.then(|| now.clone())) {
            group.shutdown().await;
            return;
        }
        if !joining && lock(lease).expired(Instant::now()) {
            let why = format!(
                "the lease ran out: no majority of view {} answered a beat for {:?}",
                installed, options.lease
            );
            log(id, &LogEvent::View(format!("fenced: {why}")));
            core.evicted(installed, why);
            // nothing more this tick: no beat may renew the lease it gave up
            tokio::time::sleep(TICK).await;
            continue;
        }
        if durable
            && member
            && !establish_failed
            && !group.established()
            && lock(lease).ever_granted()
        {
            // a majority answered its beats as the member's process: its folder's Raft node
            // is the member's, and a later process on the folder resumes it
            if let Err(e) = group.establish().await {
                establish_failed = true;
                log(
                    id,
                    &LogEvent::View(format!(
                        "cannot mark its state folder's Raft node as the member's (a restart \
                         on it will rejoin as a new node): {e}"
                    )),
                );
            }
        }
        if member && last_beat.is_none_or(|at| at.elapsed() >= options.heartbeat) {
            let now = Instant::now();
            last_beat = Some(now);
            let n = lock(lease).beat(now);
            if let Ok(bytes) = encode(&ViewFrame::Beat { n }) {
                for &p in state.view.members.keys().filter(|p| **p != id) {
                    let _ = net.send(p, Wire::View(bytes.clone()));
                }
            }
        }
        if state.view.number > installed && !in_view && !joining {
            let why = format!("evicted: not a member of view {}", state.view.number);
            log(id, &LogEvent::View(format!("fenced: {why}")));
            core.evicted(state.view.number, why);
            installed = state.view.number;
            tokio::time::sleep(TICK).await;
            continue;
        }
        let restarts_in_cs = joining && state.view.start.get(&id) == Some(&CsState::InCs);
        if state.view.number > installed && in_view && restarts_in_cs {
            // a process that fenced after it reported in the CS for this view: it gave its
            // slot up, so it does not take it back without a lease; it stays fenced, and the
            // change of the same members it asks for next starts it out (it reports out)
            log(
                id,
                &LogEvent::View(format!(
                    "view {} has this fenced process in the CS: it waits for the next view",
                    state.view.number
                )),
            );
            installed = state.view.number;
        }
        if state.view.number > installed && in_view {
            if joining {
                // its place in the view: the one it kept, or the one it rejoined with
                incarnation = state.view.members[&id];
                place = Some(incarnation);
                group.set_incarnation(incarnation);
            }
            if let Err(why) = core.install(&state.view, joining) {
                fenced(state.view.number, why);
                group.shutdown().await;
                return;
            }
            installed = state.view.number;
            if joining {
                // back in: a later eviction makes it rejoin again; the silence of the
                // members it has not reconnected to yet counts from now
                admitted = true;
                links.restart_silences(Instant::now());
                joining = false;
                shared.rejoin.store(false, Ordering::Release);
                *lock(&said) = None;
            }
        }
        if joining
            && !member
            && !asking.load(Ordering::Acquire)
            && asked.is_none_or(|at| at.elapsed() >= options.heartbeat)
        {
            // ask to rejoin (the log answers from the leader's state: this process's own
            // group has not caught up); while the view still has the old process, ask to
            // evict it first
            asked = Some(Instant::now());
            let to: Vec<ProcessId> = group
                .leader()
                .into_iter()
                .chain(state.view.members.keys().copied())
                .filter(|p| *p != id)
                .collect();
            let (t, log, asking, said) = (transport(), log.clone(), asking.clone(), said.clone());
            let own = group.clone();
            let current = state.view.number;
            let held = place;
            asking.store(true, Ordering::Release);
            tokio::spawn(async move {
                let rejoin = Proposal::Rejoin {
                    member: id,
                    incarnation,
                };
                let what = match write_through(&t, id, &own, to.clone(), Command::Propose(rejoin))
                    .await
                {
                    // the view still has this very process (fenced on its lease before the
                    // others evicted it): a change of the same members, for which it reports
                    // out, takes it back (evicting its place first could leave the view
                    // without a majority of live members)
                    Ok(Applied::Ignored(Refusal::OtherIncarnation { in_view, .. }))
                        if Some(in_view) == held =>
                    {
                        let restore = Command::Propose(Proposal::Restore { view: current });
                        match write_through(&t, id, &own, to, restore).await {
                            Ok(applied) => {
                                format!("asked for a change that takes it back: {applied:?}")
                            }
                            Err(e) => format!("asking for a change that takes it back failed: {e}"),
                        }
                    }
                    // the view already has the process under the incarnation it rejoins with
                    Ok(Applied::Ignored(Refusal::AlreadyMember { .. })) => {
                        "already in the view: it installs it".to_string()
                    }
                    // the view still has this member's old process, and this one resumed
                    // the member's Raft node: it takes the old one's place in one change
                    // (which needs no majority of live members: the old one is gone)
                    Ok(Applied::Ignored(Refusal::OtherIncarnation { in_view, .. }))
                        if own.resumed() =>
                    {
                        let replace = Command::Propose(Proposal::Replace {
                            member: id,
                            incarnation: in_view,
                            by: incarnation,
                        });
                        match write_through(&t, id, &own, to, replace).await {
                            Ok(applied) => {
                                format!("asked to take its place in the view: {applied:?}")
                            }
                            Err(e) => format!("asking to take its place in the view failed: {e}"),
                        }
                    }
                    // the view still has this member's old process: out first
                    Ok(Applied::Ignored(Refusal::OtherIncarnation { in_view, .. })) => {
                        let evict = Command::Propose(Proposal::Evict {
                            member: id,
                            incarnation: in_view,
                        });
                        match write_through(&t, id, &own, to, evict).await {
                            Ok(applied) => {
                                format!("asked to evict its place in the view first: {applied:?}")
                            }
                            Err(e) => format!("asking to evict its place in the view failed: {e}"),
                        }
                    }
                    Ok(applied) => format!("asked to rejoin: {applied:?}"),
                    Err(e) => format!("asking to rejoin failed: {e}"),
                };
                // each answer once, not once a beat
                if lock(&said).as_deref() != Some(what.as_str()) {
                    log(id, &LogEvent::View(what.clone()));
                    *lock(&said) = Some(what);
                }
                asking.store(false, Ordering::Release);
            });
        }
        // a member reports for a pending change; so does the process that fenced while the
        // view still has it (it reports out: it gave its slot up), or a change that keeps it
        // (its eviction refused: no majority without it) would wait for it for ever
        if let Some(p) = state.pending.as_ref().filter(|_| in_view) {
            // a committed change removes these members: their leases are not renewed from
            // now on (a report is that promise)
            let removed: Vec<ProcessId> = state
                .view
                .members
                .keys()
                .copied()
                .filter(|m| p.change.removes(*m))
                .collect();
            for &m in &removed {
                lock(lease).refuse(m);
            }
            // a member that leaves exited first and proposed it itself: no lease to wait out
            let removed: Vec<ProcessId> = removed
                .into_iter()
                .filter(|m| !p.change.leave.contains(m))
                .collect();
            let due = !p.reports.contains_key(&id)
                && reported.is_none_or(|(next, round, at)| {
                    next != p.next
                        || round != p.round
                        || at.elapsed() >= options.config.write_timeout
                });
            if due && let Some((stable, clock)) = core.freeze(p.next) {
                reported = Some((p.next, p.round, Instant::now()));
                // ... and it waits until they have fenced: evict_after since its last
                // answer to each. The report names the change's round: if the change
                // grows meanwhile, the log refuses it, and the member reports again
                let wait = lock(lease).report_wait(removed, options.evict_after, Instant::now());
                let (group, log, next, round) = (group.clone(), log.clone(), p.next, p.round);
                tokio::spawn(async move {
                    tokio::time::sleep(wait).await;
                    if let Err(e) = group.report_round(next, round, stable, clock).await {
                        log(id, &LogEvent::View(format!("report for view {next}: {e}")));
                    }
                });
            }
        }
        if changed {
            if last.as_ref().map(|l| l.number) != Some(now.number) {
                log(
                    id,
                    &LogEvent::View(format!(
                        "view {} installed: members {}",
                        now.number,
                        ids(&now.members)
                    )),
                );
            }
            last = Some(now);
        }
        if member
            && shared.leave.load(Ordering::Acquire)
            && !state
                .pending
                .as_ref()
                .is_some_and(|p| p.change.leave.contains(&id))
            && left.is_none_or(|at| at.elapsed() >= options.config.write_timeout)
        {
            // leaving: out of the CS already; ask to be removed, unless the view cannot
            // shrink (fewer than a majority would remain): then it stops, as a crash would
            left = Some(Instant::now());
            let removed = state.view.members.keys().filter(|m| {
                **m == id
                    || state
                        .pending
                        .as_ref()
                        .is_some_and(|p| p.change.removes(**m))
            });
            if state.view.members.len() - removed.count() < state.view.majority() {
                log(
                    id,
                    &LogEvent::View(format!(
                        "leaving: view {} cannot shrink below a majority without it; stopping",
                        state.view.number
                    )),
                );
                core.evicted(installed, "left".into());
                continue;
            }
            let (group, log) = (group.clone(), log.clone());
            tokio::spawn(async move {
                match group.propose(Proposal::Leave(id)).await {
                    Ok(applied) => log(id, &LogEvent::View(format!("asked to leave: {applied:?}"))),
                    Err(e) => log(id, &LogEvent::View(format!("asking to leave failed: {e}"))),
                }
            });
        }
        let due = |why: Restore| {
            restored.is_none_or(|(at, view)| {
                at.elapsed() >= again || (why == Restore::Surplus && view < installed)
            })
        };
        if member && state.pending.is_none() && core.gated().is_some_and(due) {
            // a deficit view: once entries brought the counts back, a view started from the
            // states now restores the bounds, and the exits go on; a surplus view: the same
            // once this member's exit brought the raised counts below their bounds, and the
            // entries go on
            restored = Some((Instant::now(), installed));
            let (group, log, view) = (group.clone(), log.clone(), installed);
            tokio::spawn(async move {
                let outcome = group.propose(Proposal::Restore { view }).await;
                let what = match outcome {
                    Ok(applied) => {
                        format!("proposed to restore the bounds of view {view}: {applied:?}")
                    }
                    Err(e) => format!("proposing to restore the bounds of view {view} failed: {e}"),
                };
                log(id, &LogEvent::View(what));
            });
        }
        // members unheard for evict_after, and members whose old process the view still has
        // while their link talks to a new one
        let restarted = links.replaced_in_view();
        let mut candidates: Vec<(ProcessId, &str)> = links
            .down_for(options.evict_after)
            .into_iter()
            .map(|p| (p, "unreachable"))
            .collect();
        candidates.extend(restarted.into_iter().map(|p| (p, "restarted")));
        for (p, why) in candidates {
            let removed = state.pending.as_ref().is_some_and(|x| x.change.removes(p));
            let Some(&incarnation) = state.view.members.get(&p) else {
                continue;
            };
            if !member || p == id || removed {
                continue;
            }
            if proposed.get(&p).is_some_and(|at| at.elapsed() < again) {
                continue;
            }
            proposed.insert(p, Instant::now());
            let (group, log) = (group.clone(), log.clone());
            tokio::spawn(async move {
                // the process it saw: once that one is gone, a late retry evicts nothing
                let outcome = group
                    .propose(Proposal::Evict {
                        member: p,
                        incarnation,
                    })
                    .await;
                let what = match outcome {
                    Ok(applied) => format!("proposed to evict {p} ({why}): {applied:?}"),
                    Err(e) => format!("proposing to evict {p} ({why}) failed: {e}"),
                };
                log(id, &LogEvent::View(what));
            });
        }
        tokio::time::sleep(TICK).await;
    }
}

/// Writes `command` to the view log through the members `to` (in order; one that is not
/// the leader names it, and it is tried next): what a process that is not (yet) a Raft
/// member of the group does, since its own group knows no leader.
async fn write_through<M: Send + 'static>(
    transport: &LinkTransport<M>,
    me: ProcessId,
    own: &ViewGroup<LinkTransport<M>>,
    to: Vec<ProcessId>,
    command: Command,
) -> Result<Applied, String> {
    let mut queue: std::collections::VecDeque<ProcessId> = to.into();
    let mut tried = BTreeSet::new();
    let mut last = String::from("no member to ask");
    while let Some(p) = queue.pop_front() {
        if !tried.insert(p) {
            continue;
        }
        if p == me {
            // named the leader: a fenced member keeps its group, and may lead it (it was
            // the leader when it paused, or won an election since); it writes there
            if own.leader() == Some(me) {
                match own.write(command.clone()).await {
                    Ok(applied) => return Ok(applied),
                    Err(e) => {
                        last = format!("this member leads the log, and its write failed: {e}")
                    }
                }
            }
            continue;
        }
        match transport.rpc(p, ViewRpc::Write(command.clone())).await {
            Ok(ViewRpcReply::Written(Ok(applied))) => return Ok(applied),
            Ok(ViewRpcReply::Written(Err(WriteRefusal::NotLeader { leader: Some(l) }))) => {
                queue.push_front(l);
                last = format!("{p} is not the leader");
            }
            Ok(other) => last = format!("{p} answered {other:?}"),
            Err(e) => last = e.to_string(),
        }
    }
    Err(last)
}

fn ids(members: &BTreeSet<ProcessId>) -> String {
    members
        .iter()
        .map(|p| p.to_string())
        .collect::<Vec<_>>()
        .join(",")
}
