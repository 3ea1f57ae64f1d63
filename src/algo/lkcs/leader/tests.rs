//! Unit tests of the leader rules: one process of complete:5 driven message by message.

use super::*;

/// The processes of a system.
struct System {
    procs: Vec<LeaderProc>,
}

/// complete:5 with (1, 4) and P0 leading: every bound tightened to [2, 3]; P0, P1 start
/// in the CS (what `Lkcs::build` builds with `Leaders::One(0)` and that start).
fn system(rules: LkcsRules) -> System {
    let t = Topology::complete(5).unwrap();
    let operating = Instance::new(t.clone(), vec![Bounds { l: 2, k: 3 }; 5]).unwrap();
    let mut start = vec![CsState::OutCs; 5];
    start[0] = CsState::InCs;
    start[1] = CsState::InCs;
    let leader = [ProcessId(0)];
    let procs = t
        .processes()
        .map(|p| LeaderProc::new(&operating, p, &leader, &leader, &start, rules))
        .collect();
    System { procs }
}

fn sends(out: &mut Outbox<LkcsMsg>) -> Vec<(u32, LkcsMsg)> {
    out.drain().map(|(to, m)| (to.0, m)).collect()
}

#[test]
fn initial_grants_and_capacities_follow_the_operating_bounds() {
    let sys = system(LkcsRules::CORRECTED);
    let p = &sys.procs[3];
    // MUTIN capacity |N|+1-L = 5-2 = 3, held by the three processes out of the CS
    assert_eq!(p.arbiter(At::Mutin).capacity(), 3);
    assert_eq!(p.arbiter(At::Mutin).granted().len(), 3);
    // MUTEX capacity K = 3, held by the two in the CS
    assert_eq!(p.arbiter(At::Mutex).capacity(), 3);
    assert_eq!(p.arbiter(At::Mutex).granted().len(), 2);
    assert!(sys.procs[0].is_leader() && !p.is_leader());
    let printed = system(LkcsRules::PRINTED);
    assert_eq!(printed.procs[3].arbiter(At::Mutin).granted().len(), 2);
}

#[test]
fn a_trigger_is_taken_only_for_the_waiting_sequence_and_declined_otherwise() {
    let mut p = system(LkcsRules::CORRECTED).procs[3].clone();
    let mut out = Outbox::new();
    p.begin_entry(&mut out).unwrap();
    let ts = match sends(&mut out)[0].1 {
        LkcsMsg::Request { at: At::Mutex, ts } => ts,
        other => panic!("{other:?}"),
    };
    // a stale stamp, or the wrong type: declined
    p.on_message(
        ProcessId(0),
        LkcsMsg::Trigger {
            at: At::Mutex,
            ts: ts + 1,
        },
        &mut out,
    );
    assert_eq!(sends(&mut out), vec![(0, LkcsMsg::TriggerDeclined)]);
    p.on_message(
        ProcessId(0),
        LkcsMsg::Trigger { at: At::Mutin, ts },
        &mut out,
    );
    assert_eq!(sends(&mut out), vec![(0, LkcsMsg::TriggerDeclined)]);
    // the right one: RequestByTrigger to the whole closed neighbourhood
    p.on_message(
        ProcessId(0),
        LkcsMsg::Trigger { at: At::Mutex, ts },
        &mut out,
    );
    let s = sends(&mut out);
    assert_eq!(s.len(), 5);
    assert!(s
        .iter()
        .all(|(_, m)| *m == LkcsMsg::RequestByTrigger { at: At::Mutex, ts }));
    assert!(p.triggered());
    // now plain grants do not count; the five sidetrack grants complete the entry
    for q in 0..5 {
        p.on_message(ProcessId(q), LkcsMsg::Grant { at: At::Mutex }, &mut out);
    }
    assert_eq!(p.pending(), Some(Sequence::Entry));
    for q in 0..5 {
        p.on_message(
            ProcessId(q),
            LkcsMsg::SidetrackGrant { at: At::Mutex },
            &mut out,
        );
    }
    assert_eq!(p.state(), CsState::InCs);
    assert!(out.take_completed());
    // a second trigger for the same stamp is declined
    p.on_message(
        ProcessId(0),
        LkcsMsg::Trigger { at: At::Mutex, ts },
        &mut out,
    );
    assert!(sends(&mut out).contains(&(0, LkcsMsg::TriggerDeclined)));
}

#[test]
fn a_request_by_trigger_is_granted_from_the_reserve() {
    let mut p = system(LkcsRules::CORRECTED).procs[3].clone();
    let mut out = Outbox::new();
    // MUTEX: 2 of 3 granted; P2 takes the last normal permission, P4 the reserve
    p.on_message(
        ProcessId(2),
        LkcsMsg::Request {
            at: At::Mutex,
            ts: 1,
        },
        &mut out,
    );
    assert_eq!(sends(&mut out), vec![(2, LkcsMsg::Grant { at: At::Mutex })]);
    p.on_message(
        ProcessId(4),
        LkcsMsg::RequestByTrigger {
            at: At::Mutex,
            ts: 1,
        },
        &mut out,
    );
    assert_eq!(
        sends(&mut out),
        vec![(4, LkcsMsg::SidetrackGrant { at: At::Mutex })]
    );
    p.check_invariants().unwrap();
    // the reserve is held: another sidetrack request waits, and P2, whose entry is in
    // progress, is asked to give its normal permission back (sidetrack requests first)
    p.on_message(
        ProcessId(3),
        LkcsMsg::RequestByTrigger {
            at: At::Mutex,
            ts: 1,
        },
        &mut out,
    );
    assert_eq!(
        sends(&mut out),
        vec![(2, LkcsMsg::Preempt { at: At::Mutex })]
    );
    p.on_message(
        ProcessId(2),
        LkcsMsg::Relinquish { at: At::Mutex },
        &mut out,
    );
    // now every holder keeps its permission for its state or its sidetrack: P2's request
    // waits behind them and is told it is blocked
    let blocked = LkcsMsg::Blocked {
        at: At::Mutex,
        sidetrack: false,
    };
    assert_eq!(
        sends(&mut out),
        vec![(3, LkcsMsg::SidetrackGrant { at: At::Mutex }), (2, blocked)]
    );
    p.check_invariants().unwrap();
    // two holders leave: P2 is granted
    p.on_message(ProcessId(4), LkcsMsg::Release { at: At::Mutex }, &mut out);
    assert!(sends(&mut out).is_empty());
    p.on_message(ProcessId(0), LkcsMsg::Release { at: At::Mutex }, &mut out);
    assert_eq!(sends(&mut out), vec![(2, LkcsMsg::Grant { at: At::Mutex })]);
}

#[test]
fn a_blocked_sequence_parks_its_grants_and_unparks_when_the_blocker_grants() {
    let mut p = system(LkcsRules::CORRECTED).procs[3].clone();
    let mut out = Outbox::new();
    p.begin_entry(&mut out).unwrap();
    sends(&mut out);
    let (grant, park, unpark) = (
        LkcsMsg::Grant { at: At::Mutex },
        LkcsMsg::Park { at: At::Mutex },
        LkcsMsg::Unpark { at: At::Mutex },
    );
    p.on_message(ProcessId(0), grant, &mut out);
    p.on_message(ProcessId(1), grant, &mut out);
    assert!(sends(&mut out).is_empty());
    // P2 says the entry is blocked there: the two grants held are set aside
    p.on_message(
        ProcessId(2),
        LkcsMsg::Blocked {
            at: At::Mutex,
            sidetrack: false,
        },
        &mut out,
    );
    assert_eq!(sends(&mut out), vec![(0, park), (1, park)]);
    // a grant from another arbiter while parked is set aside too
    p.on_message(ProcessId(4), grant, &mut out);
    assert_eq!(sends(&mut out), vec![(4, park)]);
    // the blocker grants: the parked requests compete again
    p.on_message(ProcessId(2), grant, &mut out);
    assert_eq!(sends(&mut out), vec![(0, unpark), (1, unpark), (4, unpark)]);
    for q in [0, 1, 3, 4] {
        p.on_message(ProcessId(q), grant, &mut out);
    }
    assert_eq!(p.state(), CsState::InCs);
    assert!(out.take_completed());
}

/// A pending entry names the members whose MUTEX permission has not come, and only them
/// (a call fails on an unreachable peer only when it waits on that peer); an idle process
/// names nobody. A full arbiter names its holders as those it lent to.
#[test]
fn a_pending_sequence_awaits_exactly_the_permissions_still_missing() {
    let mut p = system(LkcsRules::CORRECTED).procs[3].clone();
    let mut out = Outbox::new();
    assert_eq!(p.awaiting(), Vec::<ProcessId>::new(), "idle: nobody");
    p.begin_entry(&mut out).unwrap();
    let ts = match sends(&mut out)[0].1 {
        LkcsMsg::Request { at: At::Mutex, ts } => ts,
        other => panic!("{other:?}"),
    };
    let everyone: Vec<ProcessId> = (0..5).map(ProcessId).collect();
    assert_eq!(
        p.awaiting(),
        everyone,
        "every member of the closed neighbourhood, itself included"
    );
    for q in [1, 4] {
        p.on_message(ProcessId(q), LkcsMsg::Grant { at: At::Mutex }, &mut out);
    }
    assert_eq!(
        p.awaiting(),
        vec![ProcessId(0), ProcessId(2), ProcessId(3)],
        "P1's and P4's grants came"
    );
    // a MUTIN grant is not what the entry waits for
    p.on_message(ProcessId(2), LkcsMsg::Grant { at: At::Mutin }, &mut out);
    assert_eq!(p.awaiting(), vec![ProcessId(0), ProcessId(2), ProcessId(3)]);
    // triggered: the sequence asks again by trigger, and waits for every sidetrack grant; a
    // normal grant does not count any more
    p.on_message(
        ProcessId(0),
        LkcsMsg::Trigger { at: At::Mutex, ts },
        &mut out,
    );
    assert_eq!(
        sends(&mut out).len(),
        5,
        "a RequestByTrigger to each member"
    );
    assert_eq!(
        p.awaiting(),
        everyone,
        "the grants before the trigger are dropped"
    );
    p.on_message(
        ProcessId(1),
        LkcsMsg::SidetrackGrant { at: At::Mutex },
        &mut out,
    );
    p.on_message(ProcessId(2), LkcsMsg::Grant { at: At::Mutex }, &mut out);
    assert_eq!(
        p.awaiting(),
        vec![ProcessId(0), ProcessId(2), ProcessId(3), ProcessId(4)],
        "P1's sidetrack grant came; P2's normal one does not count"
    );
    // MUTIN is full (capacity 3, held by P2, P3, P4 out of the CS): they are lent to
    let idle = system(LkcsRules::CORRECTED).procs[1].clone();
    assert_eq!(
        idle.lent_to(),
        vec![ProcessId(2), ProcessId(3), ProcessId(4)]
    );
}
