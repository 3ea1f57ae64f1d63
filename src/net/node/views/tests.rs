use super::*;
use crate::net::view::ViewRpc;

fn p(i: u32) -> ProcessId {
    ProcessId(i)
}

fn links_in_view(members: &[(u32, u64)]) -> ViewLinks {
    let links = ViewLinks::default();
    let in_view = members.iter().map(|&(m, i)| (p(m), i)).collect();
    links.set_view(&in_view, BTreeMap::new());
    links
}

#[test]
fn a_member_whose_link_saw_no_restart_is_the_process_the_view_has() {
    let links = links_in_view(&[(0, 0), (1, 0), (2, 0)]);
    assert!(links.current(p(1)));
    assert!(links.may_log(p(1)));
}

/// Only a process the link saw replaced is evicted as restarted: a member that rejoined
/// with a process this link has not met yet (it was down meanwhile) stays.
#[test]
fn only_a_process_the_link_saw_replaced_is_evicted_as_restarted() {
    let links = links_in_view(&[(0, 0), (1, 0), (2, 0)]);
    assert_eq!(links.replaced_in_view(), Vec::<ProcessId>::new());
    // place 0 is the member's first process, whatever incarnation its link saw it with
    links.restarted(p(1), 0x5eed, 77);
    assert_eq!(
        links.replaced_in_view(),
        vec![p(1)],
        "the view still has the first process (place 0)"
    );
    // the view evicted 0 and took 88 back (a process this link never met): 88 stays
    let in_view = [(p(0), 0), (p(1), 88), (p(2), 0)].into_iter().collect();
    links.set_view(&in_view, BTreeMap::new());
    assert!(
        !links.current(p(1)),
        "the link talks to 77, not the view's 88"
    );
    assert_eq!(links.replaced_in_view(), Vec::<ProcessId>::new());
    // the link meets 88 and then a newer process: 88 is replaced
    links.restarted(p(1), 77, 88);
    links.restarted(p(1), 88, 99);
    assert_eq!(links.replaced_in_view(), vec![p(1)]);
}

#[test]
fn a_restarted_member_is_not_heard_until_a_view_or_a_pending_rejoin_has_its_new_process() {
    let links = links_in_view(&[(0, 0), (1, 0), (2, 0)]);
    links.restarted(p(1), 0, 77);
    // the view still has its first process (incarnation 0): the new one is not heard
    assert!(!links.current(p(1)), "a new process counted as the old one");
    assert!(!links.may_log(p(1)), "a new process's Raft messages heard");
    // the old process evicted, its rejoin pending: the log hears it (a learner), the
    // object and the lease do not yet
    let in_view = [(p(0), 0), (p(2), 0)].into_iter().collect();
    links.set_view(&in_view, [(p(1), 77)].into_iter().collect());
    assert!(!links.current(p(1)));
    assert!(links.may_log(p(1)));
    // a rejoin of another incarnation than the one the link talks to is not it
    links.set_view(&in_view, [(p(1), 78)].into_iter().collect());
    assert!(!links.may_log(p(1)));
    // in the view with the new incarnation: heard
    let in_view = [(p(0), 0), (p(1), 77), (p(2), 0)].into_iter().collect();
    links.set_view(&in_view, BTreeMap::new());
    assert!(links.current(p(1)) && links.may_log(p(1)));
}

#[test]
fn a_member_proposes_only_its_own_rejoin_and_leave_and_a_new_process_makes_no_raft_request() {
    let links = links_in_view(&[(0, 0), (1, 0), (2, 0)]);
    let write = |proposal| ViewRpc::Write(Command::Propose(proposal));
    let evict = |member| Proposal::Evict {
        member,
        incarnation: 0,
    };
    let rejoin = |member| Proposal::Rejoin {
        member,
        incarnation: 5,
    };
    assert!(allowed(p(1), &write(rejoin(p(1))), false, &links));
    assert!(
        !allowed(p(1), &write(rejoin(p(2))), false, &links),
        "a rejoin in another member's name"
    );
    assert!(allowed(p(1), &write(Proposal::Leave(p(1))), false, &links));
    assert!(
        !allowed(p(1), &write(Proposal::Leave(p(2))), false, &links),
        "a leave in another member's name"
    );
    assert!(allowed(p(1), &write(evict(p(2))), false, &links));
    links.restarted(p(1), 0, 9);
    // the new process may ask to rejoin, or to evict its old process, and nothing else
    assert!(allowed(p(1), &write(rejoin(p(1))), false, &links));
    assert!(allowed(p(1), &write(evict(p(1))), false, &links));
    assert!(
        !allowed(p(1), &write(evict(p(2))), false, &links),
        "a new process evicting another member"
    );
    assert!(
        !allowed(p(1), &write(Proposal::Leave(p(1))), false, &links),
        "a new process leaving in its old process's name"
    );
}

/// With every member's view log on disk, a new process of a member counts as its member's
/// Raft node only when its frames say it resumed that node from its folder: one on an
/// emptied folder (a new Raft node, which could vote twice in a term or acknowledge again
/// what the old one acknowledged) takes no part in Raft, and may not take its old process's
/// place in the view, until a change lets it rejoin.
#[test]
fn a_new_process_on_disk_counts_as_its_members_raft_node_only_when_it_resumed_it() {
    let links = links_in_view(&[(0, 0), (1, 0), (2, 0)]);
    links.durable.store(true, Ordering::Release);
    let replace = ViewRpc::Write(Command::Propose(Proposal::Replace {
        member: p(1),
        incarnation: 0,
        by: 9,
    }));
    assert!(
        links.may_raft(p(1), false),
        "the member's first process, on a folder it started"
    );
    links.restarted(p(1), 0, 9);
    assert!(
        links.may_raft(p(1), true),
        "a new process on its member's folder is the same Raft node"
    );
    assert!(allowed(p(1), &replace, true, &links));
    assert!(
        !links.may_raft(p(1), false),
        "a new process on an emptied folder counted as its member's Raft node"
    );
    assert!(
        !allowed(p(1), &replace, false, &links),
        "a new process on an emptied folder took its old process's place as a voter"
    );
    // once a change lets it rejoin, its Raft node (a learner) takes part
    links.set_view(&[(p(0), 0), (p(2), 0)].into(), [(p(1), 9)].into());
    assert!(
        links.may_raft(p(1), false),
        "a rejoining learner is not heard"
    );
    assert!(
        links.learner_only(p(1), false),
        "a rejoining new process is heard as more than a learner"
    );
    assert!(
        !links.learner_only(p(1), true),
        "a process that resumed its member's node on disk is that node, not a learner"
    );
    assert!(
        !links.learner_only(p(2), false),
        "a member that never restarted"
    );
    links.durable.store(false, Ordering::Release);
    links.set_view(&[(p(0), 0), (p(1), 0), (p(2), 0)].into(), BTreeMap::new());
    assert!(
        !links.may_raft(p(1), true),
        "in memory, no new process is its member's Raft node, whatever it says"
    );
}

#[test]
fn a_process_back_in_the_view_counts_silences_from_its_return() {
    let links = ViewLinks::default();
    let long_ago = Instant::now() - Duration::from_secs(60);
    links.down(p(2), long_ago);
    assert_eq!(links.down_for(Duration::from_secs(30)), vec![p(2)]);
    links.restart_silences(Instant::now());
    assert!(
        links.down_for(Duration::from_secs(30)).is_empty(),
        "a silence from before the return counted"
    );
    assert!(links.is_down(p(2)), "the link is still down");
}

/// A message for a member's process goes at once only when its link delivers to that
/// process: the one it met, the first process (place 0) while it saw no restart, or any
/// process for a link that never connected (its queue goes to the first it meets).
#[test]
fn a_link_meets_the_views_process_only_when_it_talks_to_it() {
    assert!(link_meets(None, 77, false), "never connected");
    assert!(link_meets(None, 77, true), "never connected");
    assert!(link_meets(Some(77), 77, true), "the same process");
    assert!(
        link_meets(Some(0x5eed), 0, false),
        "the first process, no restart seen"
    );
    assert!(
        !link_meets(Some(0x5eed), 0, true),
        "the first process, which the link saw replaced"
    );
    assert!(
        !link_meets(Some(0x5eed), 88, false),
        "a new process the link has not met: held until it has"
    );
    assert!(!link_meets(Some(77), 88, true), "an older new process");
}
