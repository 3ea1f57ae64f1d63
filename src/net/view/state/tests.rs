use super::*;
use proptest::prelude::*;
use CsState::{InCs, OutCs};

fn p(i: u32) -> ProcessId {
    ProcessId(i)
}

/// `n` members, incarnation 10 + i, member i active iff `active[i]`.
fn state(active: &[bool]) -> ViewState {
    let members = (0..active.len() as u32).map(|i| (p(i), 10 + u64::from(i)));
    let start = active
        .iter()
        .enumerate()
        .map(|(i, &a)| (ProcessId::from(i), if a { InCs } else { OutCs }));
    ViewState::new(View::initial(members.collect(), start.collect()).expect("a view"))
        .expect("a state")
}

fn report(s: &mut ViewState, view: u64, i: u32, st: CsState) -> Applied {
    let round = s.pending.as_ref().map_or(0, |x| x.round);
    s.apply(&Command::Report {
        view,
        member: p(i),
        incarnation: 10 + u64::from(i),
        state: st,
        token: 0,
        round,
    })
}

/// Evicts member `i`'s first process (incarnation 10 + i).
fn evict(i: u32) -> Command {
    evict_incarnation(i, 10 + u64::from(i))
}

fn evict_incarnation(i: u32, incarnation: u64) -> Command {
    Command::Propose(Proposal::Evict {
        member: p(i),
        incarnation,
    })
}

fn leave(i: u32) -> Command {
    Command::Propose(Proposal::Leave(p(i)))
}

fn rejoin(i: u32, incarnation: u64) -> Command {
    Command::Propose(Proposal::Rejoin {
        member: p(i),
        incarnation,
    })
}

/// Member `i`'s new process `by` in place of its first one (incarnation 10 + i).
fn replace(i: u32, by: u64) -> Command {
    Command::Propose(Proposal::Replace {
        member: p(i),
        incarnation: 10 + u64::from(i),
        by,
    })
}

#[test]
fn a_majority_replaced_at_once_installs_on_the_survivors_reports() {
    let mut s = state(&[true, false, false, true, false]);
    // evicting three of five would leave no majority of the view
    let mut evicting = s.clone();
    evicting.apply(&evict(0));
    evicting.apply(&evict(1));
    assert_eq!(
        evicting.apply(&evict(2)),
        Applied::Ignored(Refusal::NoMajority {
            remaining: 2,
            needed: 3
        })
    );
    // three new processes take their places: the change keeps the members
    assert!(matches!(
        s.apply(&replace(0, 100)),
        Applied::Opened { next: 1, .. }
    ));
    assert!(matches!(
        s.apply(&replace(1, 101)),
        Applied::Extended { next: 1, .. }
    ));
    assert!(matches!(
        s.apply(&replace(2, 102)),
        Applied::Extended { next: 1, .. }
    ));
    assert_eq!(
        s.awaiting(),
        [p(3), p(4)].into(),
        "the replaced processes do not report"
    );
    assert_eq!(
        report(&mut s, 1, 0, OutCs),
        Applied::Ignored(Refusal::Replaced(p(0))),
        "a replaced process's report"
    );
    assert!(matches!(
        report(&mut s, 1, 3, InCs),
        Applied::Recorded { .. }
    ));
    let Applied::Installed(v) = report(&mut s, 1, 4, OutCs) else {
        panic!("the survivors reported: {:?}", s.pending)
    };
    assert_eq!(
        v.members,
        [
            (p(0), 100),
            (p(1), 101),
            (p(2), 102),
            (p(3), 13),
            (p(4), 14)
        ]
        .into()
    );
    // the replaced member 0 was active: its slot is reclaimed, the new process starts out
    assert_eq!(
        v.start,
        [
            (p(0), OutCs),
            (p(1), OutCs),
            (p(2), OutCs),
            (p(3), InCs),
            (p(4), OutCs)
        ]
        .into()
    );
}

#[test]
fn a_replacement_turns_a_pending_eviction_of_the_process_into_it() {
    let mut s = state(&[false, false, false, false, false]);
    // the survivors' links saw three restarts and evicted two processes; the third
    // eviction would leave no majority
    s.apply(&evict(0));
    s.apply(&evict(1));
    assert!(matches!(
        s.apply(&evict(2)),
        Applied::Ignored(Refusal::NoMajority { .. })
    ));
    // the new processes take the places the evictions named
    assert!(matches!(
        s.apply(&replace(0, 100)),
        Applied::Extended { .. }
    ));
    assert!(matches!(
        s.apply(&replace(1, 101)),
        Applied::Extended { .. }
    ));
    assert!(matches!(
        s.apply(&replace(2, 102)),
        Applied::Extended { .. }
    ));
    let change = &s.pending.as_ref().expect("pending").change;
    assert!(change.evict.is_empty(), "{change:?}");
    assert_eq!(
        change.replace,
        [(p(0), 100), (p(1), 101), (p(2), 102)].into()
    );
    report(&mut s, 1, 3, OutCs);
    let Applied::Installed(v) = report(&mut s, 1, 4, OutCs) else {
        panic!("the survivors reported: {:?}", s.pending)
    };
    assert_eq!(v.members.len(), 5);
    // a replacement does not turn a leave into anything
    let mut t = state(&[false, false, false]);
    t.apply(&leave(0));
    assert_eq!(
        t.apply(&replace(0, 9)),
        Applied::Ignored(Refusal::AlreadyInChange(p(0)))
    );
}

/// A change that evicts installs on a report only (a reporter waits out the evicted
/// member's lease), even when every other process is replaced and none is awaited.
#[test]
fn a_change_that_evicts_does_not_install_without_a_report() {
    let mut s = state(&[false, false, true]);
    s.apply(&evict(2));
    s.apply(&replace(0, 100));
    assert!(matches!(
        s.apply(&replace(1, 101)),
        Applied::Extended { .. }
    ));
    assert_eq!(s.awaiting(), BTreeSet::new());
    assert!(
        s.pending.is_some(),
        "installed with an eviction and no report"
    );
    // the evicted process was only slow: it reports, and is kept
    let Applied::Installed(v) = report(&mut s, 1, 2, InCs) else {
        panic!("a report completes it: {:?}", s.pending)
    };
    assert_eq!(v.members, [(p(0), 100), (p(1), 101), (p(2), 12)].into());
    assert_eq!(v.start[&p(2)], InCs);
}

#[test]
fn a_change_that_replaces_every_process_installs_at_once() {
    let mut s = state(&[true, false, true]);
    s.apply(&replace(0, 7));
    s.apply(&replace(1, 8));
    let Applied::Installed(v) = s.apply(&replace(2, 9)) else {
        panic!(
            "every process replaced: nothing to wait for: {:?}",
            s.pending
        )
    };
    assert_eq!(v.members, [(p(0), 7), (p(1), 8), (p(2), 9)].into());
    assert!(v.start.values().all(|st| *st == OutCs), "{:?}", v.start);
    assert_eq!(s.pending, None);
}

#[test]
fn replacements_are_checked_against_the_view() {
    let mut s = state(&[false, false, false]);
    assert_eq!(
        s.apply(&Command::Propose(Proposal::Replace {
            member: p(1),
            incarnation: 3,
            by: 40
        })),
        Applied::Ignored(Refusal::StaleEviction {
            member: p(1),
            in_view: 11,
            named: 3
        }),
        "a replacement of a process the view does not have"
    );
    assert_eq!(
        s.apply(&replace(1, 11)),
        Applied::Ignored(Refusal::AlreadyMember {
            member: p(1),
            incarnation: 11
        })
    );
    assert_eq!(
        s.apply(&replace(5, 50)),
        Applied::Ignored(Refusal::NotAMember(p(5)))
    );
    // a process that reported is alive: not replaced
    s.apply(&evict(2));
    report(&mut s, 1, 1, OutCs);
    assert_eq!(
        s.apply(&replace(1, 41)),
        Applied::Ignored(Refusal::Reported(p(1)))
    );
    // the process the change evicts is replaced instead: the member stays
    let Applied::Extended { change, .. } = s.apply(&replace(2, 42)) else {
        panic!(
            "a replacement of an evicted process extends the change: {:?}",
            s.pending
        )
    };
    assert_eq!(
        (change.evict, change.replace),
        (BTreeSet::new(), [(p(2), 42)].into())
    );
    assert_eq!(
        s.apply(&replace(2, 43)),
        Applied::Ignored(Refusal::AlreadyInChange(p(2)))
    );
}

#[test]
fn initial_views_are_checked() {
    assert_eq!(
        View::initial(BTreeMap::new(), BTreeMap::new()),
        Err(InvalidView::NoMembers)
    );
    assert_eq!(
        View::initial([(p(0), 1)].into(), [(p(1), OutCs)].into()),
        Err(InvalidView::StartMismatch)
    );
}

#[test]
fn a_proposal_opens_a_change_to_the_next_view() {
    let mut s = state(&[true, false, false]);
    let a = s.apply(&evict(2));
    let change = Change {
        evict: [p(2)].into(),
        ..Change::default()
    };
    assert_eq!(
        a,
        Applied::Opened {
            next: 1,
            change: change.clone()
        }
    );
    assert_eq!(s.pending.as_ref().map(|x| &x.change), Some(&change));
    assert_eq!(s.awaiting(), [p(0), p(1)].into());
}

#[test]
fn an_eviction_installs_once_the_survivors_reported() {
    let mut s = state(&[true, false, true]);
    s.apply(&evict(2));
    assert_eq!(
        report(&mut s, 1, 0, InCs),
        Applied::Recorded {
            next: 1,
            member: p(0)
        }
    );
    let expected = View {
        number: 1,
        members: [(p(0), 10), (p(1), 11)].into(),
        start: [(p(0), InCs), (p(1), OutCs)].into(),
    };
    assert_eq!(
        report(&mut s, 1, 1, OutCs),
        Applied::Installed(expected.clone())
    );
    assert_eq!(s.view, expected);
    assert_eq!(s.pending, None);
}

/// A restore opens a change of the same members, which installs from their reports now
/// (the counts the entries of a deficit view brought back); one made in an older view, or
/// while a change is pending, changes nothing.
#[test]
fn a_restore_restarts_the_same_members_from_their_states_now() {
    let mut s = state(&[true, false, false]);
    let restore = |view| Command::Propose(Proposal::Restore { view });
    assert_eq!(
        s.apply(&restore(3)),
        Applied::Ignored(Refusal::NotCurrent { current: 0, got: 3 })
    );
    assert_eq!(
        s.apply(&restore(0)),
        Applied::Opened {
            next: 1,
            change: Change::default()
        }
    );
    assert_eq!(
        s.apply(&restore(0)),
        Applied::Ignored(Refusal::ChangePending { next: 1 })
    );
    report(&mut s, 1, 0, InCs);
    report(&mut s, 1, 1, InCs);
    let a = report(&mut s, 1, 2, OutCs);
    let Applied::Installed(v) = a else {
        panic!("expected an install, got {a:?}")
    };
    assert_eq!(v.members, [(p(0), 10), (p(1), 11), (p(2), 12)].into());
    assert_eq!(v.start, [(p(0), InCs), (p(1), InCs), (p(2), OutCs)].into());
    assert_eq!(
        s.apply(&restore(0)),
        Applied::Ignored(Refusal::NotCurrent { current: 1, got: 0 })
    );
}

#[test]
fn the_start_is_the_reported_states_not_the_previous_start() {
    // member 0 was entering when it froze (reports OutCs), member 1 was exiting (InCs)
    let mut s = state(&[true, false, false]);
    s.apply(&evict(2));
    report(&mut s, 1, 0, OutCs);
    let a = report(&mut s, 1, 1, InCs);
    let Applied::Installed(v) = a else {
        panic!("expected an install, got {a:?}")
    };
    assert_eq!(v.start, [(p(0), OutCs), (p(1), InCs)].into());
}

#[test]
fn a_further_eviction_extends_the_pending_change() {
    let mut s = state(&[false; 5]);
    s.apply(&evict(3));
    report(&mut s, 1, 0, OutCs);
    let a = s.apply(&evict(4));
    assert_eq!(
        a,
        Applied::Extended {
            next: 1,
            change: Change {
                evict: [p(3), p(4)].into(),
                ..Change::default()
            }
        }
    );
    // a report made for the change before it grew is refused
    let old = Command::Report {
        view: 1,
        member: p(1),
        incarnation: 11,
        state: OutCs,
        token: 0,
        round: 0,
    };
    assert_eq!(
        s.apply(&old),
        Applied::Ignored(Refusal::OutdatedReport { round: 1, got: 0 })
    );
    // the report made before the extension is cleared: 0 reports again
    assert_eq!(s.awaiting(), [p(0), p(1), p(2)].into());
    report(&mut s, 1, 0, OutCs);
    report(&mut s, 1, 1, OutCs);
    let a = report(&mut s, 1, 2, InCs);
    assert_eq!(
        a,
        Applied::Installed(View {
            number: 1,
            members: [(p(0), 10), (p(1), 11), (p(2), 12)].into(),
            start: [(p(0), OutCs), (p(1), OutCs), (p(2), InCs)].into(),
        })
    );
}

#[test]
fn a_leave_extends_too_and_is_out_even_if_it_reported() {
    let mut s = state(&[false; 5]);
    s.apply(&evict(4));
    report(&mut s, 1, 3, OutCs);
    let a = s.apply(&leave(3));
    assert!(matches!(a, Applied::Extended { next: 1, .. }), "{a:?}");
    report(&mut s, 1, 0, OutCs);
    report(&mut s, 1, 1, OutCs);
    let a = report(&mut s, 1, 2, OutCs);
    let Applied::Installed(v) = a else {
        panic!("expected an install, got {a:?}")
    };
    assert_eq!(
        v.members.keys().copied().collect::<Vec<_>>(),
        [p(0), p(1), p(2)]
    );
}

#[test]
fn an_extension_waits_for_fresh_reports_even_when_it_removes_the_last_one_awaited() {
    // 0, 1 and 3 reported, 2 has not: evicting 2 does not install on the old reports (they
    // promised nothing about 2, whose lease the others may still renew)
    let mut s = state(&[false; 5]);
    s.apply(&evict(4));
    report(&mut s, 1, 0, OutCs);
    report(&mut s, 1, 1, OutCs);
    report(&mut s, 1, 3, InCs);
    let a = s.apply(&evict(2));
    assert!(matches!(a, Applied::Extended { next: 1, .. }), "{a:?}");
    assert_eq!(s.awaiting(), [p(0), p(1), p(3)].into());
    report(&mut s, 1, 0, OutCs);
    report(&mut s, 1, 1, OutCs);
    let a = report(&mut s, 1, 3, InCs);
    assert_eq!(
        a,
        Applied::Installed(View {
            number: 1,
            members: [(p(0), 10), (p(1), 11), (p(3), 13)].into(),
            start: [(p(0), OutCs), (p(1), OutCs), (p(3), InCs)].into(),
        })
    );
}

#[test]
fn a_slow_member_that_reports_before_the_install_is_kept() {
    let mut s = state(&[false, false, true]);
    s.apply(&evict(2));
    report(&mut s, 1, 0, OutCs);
    assert_eq!(
        report(&mut s, 1, 2, InCs),
        Applied::Recorded {
            next: 1,
            member: p(2)
        }
    );
    let a = report(&mut s, 1, 1, OutCs);
    assert_eq!(
        a,
        Applied::Installed(View {
            number: 1,
            members: [(p(0), 10), (p(1), 11), (p(2), 12)].into(),
            start: [(p(0), OutCs), (p(1), OutCs), (p(2), InCs)].into(),
        })
    );
}

#[test]
fn evicting_a_member_that_reported_is_refused() {
    let mut s = state(&[false; 5]);
    s.apply(&evict(4));
    report(&mut s, 1, 3, OutCs);
    assert_eq!(
        s.apply(&evict(3)),
        Applied::Ignored(Refusal::Reported(p(3)))
    );
}

#[test]
fn proposals_about_non_members_are_refused() {
    let mut s = state(&[false; 3]);
    assert_eq!(
        s.apply(&evict(7)),
        Applied::Ignored(Refusal::NotAMember(p(7)))
    );
    assert_eq!(
        s.apply(&leave(7)),
        Applied::Ignored(Refusal::NotAMember(p(7)))
    );
    assert_eq!(
        s.apply(&rejoin(1, 11)),
        Applied::Ignored(Refusal::AlreadyMember {
            member: p(1),
            incarnation: 11
        })
    );
    assert_eq!(
        s.apply(&rejoin(1, 99)),
        Applied::Ignored(Refusal::OtherIncarnation {
            member: p(1),
            in_view: 11
        })
    );
    assert_eq!(s.pending, None);
}

#[test]
fn a_member_already_in_the_change_is_refused() {
    let mut s = state(&[false; 5]);
    s.apply(&evict(4));
    assert_eq!(
        s.apply(&evict(4)),
        Applied::Ignored(Refusal::AlreadyInChange(p(4)))
    );
    assert_eq!(
        s.apply(&leave(4)),
        Applied::Ignored(Refusal::AlreadyInChange(p(4)))
    );
}

#[test]
fn a_change_without_a_majority_is_refused() {
    let mut s = state(&[false; 3]);
    s.apply(&evict(2));
    assert_eq!(
        s.apply(&evict(1)),
        Applied::Ignored(Refusal::NoMajority {
            remaining: 1,
            needed: 2
        })
    );
    // the pending change is as it was
    assert_eq!(
        s.pending.as_ref().map(|x| x.change.evict.clone()),
        Some([p(2)].into())
    );
    let mut two = state(&[false; 2]);
    assert_eq!(
        two.apply(&leave(0)),
        Applied::Ignored(Refusal::NoMajority {
            remaining: 1,
            needed: 2
        })
    );
    assert_eq!(two.pending, None);
}

#[test]
fn a_rejoin_while_a_change_is_pending_is_refused_and_retried_after() {
    let mut s = state(&[false; 3]);
    s.apply(&evict(2));
    report(&mut s, 1, 0, OutCs);
    report(&mut s, 1, 1, InCs);
    assert_eq!(s.view.number, 1);
    // view 1 is {0, 1}: the rejoin of 2 opens view 2, and a second rejoin meanwhile waits
    assert_eq!(
        s.apply(&rejoin(2, 77)),
        Applied::Opened {
            next: 2,
            change: Change {
                rejoin: [(p(2), 77)].into(),
                ..Change::default()
            }
        }
    );
    assert_eq!(
        s.apply(&rejoin(3, 5)),
        Applied::Ignored(Refusal::ChangePending { next: 2 })
    );
    report(&mut s, 2, 0, OutCs);
    let a = report(&mut s, 2, 1, InCs);
    assert_eq!(
        a,
        Applied::Installed(View {
            number: 2,
            members: [(p(0), 10), (p(1), 11), (p(2), 77)].into(),
            start: [(p(0), OutCs), (p(1), InCs), (p(2), OutCs)].into(),
        })
    );
    // retried after the install, it opens view 3
    assert!(matches!(
        s.apply(&rejoin(3, 5)),
        Applied::Opened { next: 3, .. }
    ));
}

/// A late eviction (a retry, or a proposer whose view was old) of a member's earlier
/// process does not evict the member's new process: it names the incarnation it evicts.
#[test]
fn a_late_eviction_of_an_earlier_process_evicts_nothing() {
    let mut s = state(&[false; 3]);
    s.apply(&evict(2));
    report(&mut s, 1, 0, OutCs);
    report(&mut s, 1, 1, OutCs);
    s.apply(&rejoin(2, 77));
    report(&mut s, 2, 0, OutCs);
    report(&mut s, 2, 1, OutCs);
    assert_eq!(s.view.members.get(&p(2)), Some(&77), "2 rejoined as 77");
    let before = s.clone();
    assert_eq!(
        s.apply(&evict(2)),
        Applied::Ignored(Refusal::StaleEviction {
            member: p(2),
            in_view: 77,
            named: 12
        })
    );
    assert_eq!(s, before, "the refused eviction changed the state");
    // the process in the view is evicted as before
    assert!(matches!(
        s.apply(&evict_incarnation(2, 77)),
        Applied::Opened { next: 3, .. }
    ));
}

#[test]
fn reports_are_recorded_once_and_only_for_the_pending_view() {
    let mut s = state(&[false; 5]);
    assert_eq!(
        report(&mut s, 1, 0, OutCs),
        Applied::Ignored(Refusal::NoChangePending)
    );
    s.apply(&evict(4));
    assert_eq!(
        report(&mut s, 2, 0, OutCs),
        Applied::Ignored(Refusal::WrongView { pending: 1, got: 2 })
    );
    assert_eq!(
        report(&mut s, 0, 0, OutCs),
        Applied::Ignored(Refusal::WrongView { pending: 1, got: 0 })
    );
    report(&mut s, 1, 0, OutCs);
    assert_eq!(
        report(&mut s, 1, 0, InCs),
        Applied::Ignored(Refusal::AlreadyReported(p(0)))
    );
    // the first report stands
    assert_eq!(
        s.pending
            .as_ref()
            .and_then(|x| x.reports.get(&p(0)))
            .map(|r| r.state),
        Some(OutCs)
    );
    let stranger = Command::Report {
        view: 1,
        member: p(9),
        incarnation: 1,
        state: InCs,
        token: 0,
        round: 0,
    };
    assert_eq!(
        s.apply(&stranger),
        Applied::Ignored(Refusal::WrongIncarnation {
            member: p(9),
            in_view: None,
            got: 1
        })
    );
    let old = Command::Report {
        view: 1,
        member: p(1),
        incarnation: 3,
        state: InCs,
        token: 0,
        round: 0,
    };
    assert_eq!(
        s.apply(&old),
        Applied::Ignored(Refusal::WrongIncarnation {
            member: p(1),
            in_view: Some(11),
            got: 3
        })
    );
}

#[test]
fn the_highest_reported_token_is_kept() {
    let mut s = state(&[false; 3]);
    s.apply(&evict(2));
    for (i, token) in [(0u32, 7u64), (1, 4)] {
        s.apply(&Command::Report {
            view: 1,
            member: p(i),
            incarnation: 10 + u64::from(i),
            state: OutCs,
            token,
            round: 0,
        });
    }
    assert_eq!(s.token, 7);
}

#[test]
fn the_state_round_trips_through_serde() {
    let mut s = state(&[true, false, false, true, false]);
    s.apply(&evict(4));
    report(&mut s, 1, 0, InCs);
    let text = serde_json::to_string(&s).expect("serialize");
    let back: ViewState = serde_json::from_str(&text).expect("deserialize");
    assert_eq!(back, s);
}

fn command() -> impl Strategy<Value = Command> {
    let id = (0u32..7).prop_map(ProcessId);
    let st = prop_oneof![Just(InCs), Just(OutCs)];
    prop_oneof![
        // evictions: of the process in the view (10 + i, or aimed at it), or of another
        (id.clone(), 0u64..3, any::<bool>()).prop_map(|(member, i, original)| Command::Propose(
            Proposal::Evict {
                member,
                incarnation: if original {
                    10 + u64::from(member.0)
                } else {
                    i
                }
            }
        )),
        id.clone()
            .prop_map(|p| Command::Propose(Proposal::Leave(p))),
        (id.clone(), 0u64..3).prop_map(|(member, incarnation)| Command::Propose(
            Proposal::Rejoin {
                member,
                incarnation
            }
        )),
        (0u64..4).prop_map(|view| Command::Propose(Proposal::Restore { view })),
        // replacements: of the process in the view (aimed at it when 0), by another
        (id.clone(), 0u64..3, 0u64..3).prop_map(|(member, incarnation, by)| Command::Propose(
            Proposal::Replace {
                member,
                incarnation,
                by
            }
        )),
        // reports: mostly for the right view and incarnation (10 + i, or 0..3 after a
        // rejoin), some not
        (0u64..6, id, 0u64..3, any::<bool>(), st, 0u64..100, 0u64..3).prop_map(
            |(view, member, i, original, state, token, round)| Command::Report {
                view,
                member,
                incarnation: if original {
                    10 + u64::from(member.0)
                } else {
                    i
                },
                state,
                token,
                round,
            }
        ),
    ]
}

/// Makes a report valid for the state it is applied to with some luck: the pending view's
/// number, the member's incarnation in the view.
fn aim(s: &ViewState, c: &Command) -> Command {
    match *c {
        Command::Report {
            view,
            member,
            incarnation,
            state,
            token,
            round,
        } if view.is_multiple_of(2) => Command::Report {
            view: s.pending.as_ref().map_or(view, |x| x.next),
            member,
            incarnation: s.view.members.get(&member).copied().unwrap_or(incarnation),
            state,
            token,
            round: s.pending.as_ref().map_or(round, |x| x.round),
        },
        // an eviction of incarnation 0 is aimed at the process in the view
        Command::Propose(Proposal::Evict {
            member,
            incarnation: 0,
        }) => Command::Propose(Proposal::Evict {
            member,
            incarnation: s.view.members.get(&member).copied().unwrap_or(0),
        }),
        Command::Propose(Proposal::Replace {
            member,
            incarnation: 0,
            by,
        }) => Command::Propose(Proposal::Replace {
            member,
            incarnation: s.view.members.get(&member).copied().unwrap_or(0),
            by,
        }),
        ref other => other.clone(),
    }
}

proptest! {
    #[test]
    fn copies_agree_and_installs_keep_the_rules(
        n in 1usize..7,
        commands in proptest::collection::vec(command(), 0..80),
    ) {
        let mut a = state(&vec![false; n]);
        let mut b = a.clone();
        for c in &commands {
            let c = aim(&a, c);
            let before = a.clone();
            let out = a.apply(&c);
            prop_assert_eq!(&out, &b.apply(&c));
            if let Command::Propose(Proposal::Evict { member, incarnation }) = c
                && before.view.members.get(&member) != Some(&incarnation)
            {
                prop_assert!(matches!(out, Applied::Ignored(_)), "{c:?} of another process: {out:?}");
            }
            prop_assert_eq!(&a, &b);
            match &out {
                Applied::Installed(v) => {
                    prop_assert_eq!(v.number, before.view.number + 1);
                    prop_assert_eq!(&a.view, v);
                    prop_assert!(v.check().is_ok());
                    let pending = before.pending.clone();
                    // only a report completes a change (an extension clears the reports),
                    // or a replacement that leaves no report to wait for
                    let mut change = pending.as_ref().map(|x| x.change.clone()).unwrap_or_default();
                    let mut reports = pending.map(|x| x.reports).unwrap_or_default();
                    match c {
                        Command::Report { member, state, token, .. } => {
                            reports.insert(member, Report { state, token });
                        }
                        // a proposal installs only when the change it makes awaits no report
                        // (every process kept is replaced); it cleared the reports
                        Command::Propose(proposal) => {
                            match proposal {
                                Proposal::Replace { member, by, .. } => {
                                    change.evict.remove(&member);
                                    change.replace.insert(member, by);
                                }
                                Proposal::Leave(member) => {
                                    change.leave.insert(member);
                                }
                                other => prop_assert!(false, "{other:?} installed"),
                            }
                            reports.clear();
                            prop_assert!(
                                before.view.members.keys().all(|q| !change.awaits(*q)),
                                "{c:?} installed with processes left to report"
                            );
                            prop_assert!(change.evict.is_empty(), "{c:?} installed an eviction unreported");
                        }
                    }
                    let old = &before.view.members;
                    let kept = v.members.keys().filter(|q| old.contains_key(q)).count();
                    prop_assert!(kept >= before.view.majority(), "{kept} of {old:?} kept in {v:?}");
                    for (q, inc) in &v.members {
                        match old.get(q) {
                            // a member of v whose process was replaced: the new one, inactive
                            Some(i) if change.replace.get(q) == Some(inc) => {
                                prop_assert_ne!(i, inc);
                                prop_assert!(!reports.contains_key(q), "{q} replaced after it reported");
                                prop_assert_eq!(v.start.get(q), Some(&OutCs));
                            }
                            // a member of v: it reported, and is in with its state
                            Some(i) => {
                                prop_assert_eq!(i, inc);
                                prop_assert!(!change.leave.contains(q));
                                prop_assert_eq!(reports.get(q).map(|r| r.state), v.start.get(q).copied());
                            }
                            // a new member: a rejoin, inactive
                            None => {
                                prop_assert_eq!(change.rejoin.get(q), Some(inc));
                                prop_assert_eq!(v.start.get(q), Some(&OutCs));
                            }
                        }
                    }
                    for q in old.keys() {
                        if !v.members.contains_key(q) {
                            // out: evicted without a report, or left
                            prop_assert!(change.leave.contains(q)
                                || (change.evict.contains(q) && !reports.contains_key(q)));
                        }
                    }
                }
                _ => prop_assert_eq!(a.view.number, before.view.number),
            }
            if let Some(pending) = &a.pending {
                prop_assert_eq!(pending.next, a.view.number + 1);
                let remaining = a.view.members.keys().filter(|q| !pending.change.removes(**q)).count();
                prop_assert!(remaining >= a.view.majority());
            }
        }
        let text = serde_json::to_string(&a).expect("serialize");
        let back: ViewState = serde_json::from_str(&text).expect("deserialize");
        prop_assert_eq!(back, a);
    }
}
