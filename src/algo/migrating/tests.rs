use super::*;
use crate::cs::{CsObject, Outbox};
use crate::error::CallError;

type Msg = MigratingMsg<DdcTransfer>;

fn p(i: u32) -> ProcessId {
    ProcessId(i)
}

fn req(i: u32, seq: u64) -> Msg {
    Msg::Request {
        requester: p(i),
        seq,
        forwarded: false,
    }
}

fn sends(out: &mut Outbox<Msg>) -> Vec<(ProcessId, Msg)> {
    out.drain().collect()
}

fn controller(n: usize, c: MigrationCondition) -> Ddc {
    Ddc::processes(n, c, MigratingRules::CORRECTED).remove(0)
}

#[test]
fn ddc_first_request_is_head_and_later_ones_chain_to_the_tail() {
    let mut c = controller(4, MigrationCondition::Never);
    let mut out = Outbox::new();
    c.on_message(p(1), req(1, 1), &mut out);
    assert_eq!(sends(&mut out), vec![(p(0), Msg::WakeUp)]);
    c.on_message(p(2), req(2, 1), &mut out);
    // P2 follows P1: next-requestor to P1's request 1; still free: another wake-up
    assert_eq!(
        sends(&mut out),
        vec![
            (p(1), Msg::NextRequestor { seq: 1, next: p(2) }),
            (p(0), Msg::WakeUp)
        ]
    );
    c.on_message(p(0), Msg::WakeUp, &mut out);
    assert_eq!(sends(&mut out), vec![(p(1), Msg::Granted { epoch: 0 })]);
    // the second wake-up finds cs-status busy and grants nothing
    c.on_message(p(0), Msg::WakeUp, &mut out);
    assert!(sends(&mut out).is_empty());
    // P1 exits with next-in-q = P2, the tail: the queue empties
    c.on_message(p(1), Msg::ExitCs { next: Some(p(2)) }, &mut out);
    assert_eq!(sends(&mut out), vec![(p(2), Msg::Granted { epoch: 0 })]);
    assert_eq!(c.requests().last_in_q, None);
    c.on_message(p(2), Msg::ExitCs { next: None }, &mut out);
    assert!(sends(&mut out).is_empty());
    assert!(c.requests().is_free());
}

#[test]
fn ddc_migration_hands_the_piggybacked_head_over() {
    let mut c = controller(4, MigrationCondition::Always);
    let mut out = Outbox::new();
    c.on_message(p(1), req(1, 1), &mut out);
    c.on_message(p(0), Msg::WakeUp, &mut out);
    c.on_message(p(2), req(2, 1), &mut out);
    c.on_message(p(3), req(3, 1), &mut out);
    sends(&mut out);
    c.on_message(p(1), Msg::ExitCs { next: Some(p(2)) }, &mut out);
    let s = sends(&mut out);
    // migrates to last-in-q (P3) and grants nothing itself
    assert!(s.iter().all(|(_, m)| !matches!(m, Msg::Granted { .. })));
    let become_to = s.iter().find_map(|(to, m)| match m {
        Msg::BecomeController { epoch: 1, info } => Some((*to, info.clone())),
        _ => None,
    });
    let info = DdcTransfer {
        first: Some(p(2)),
        last: Some((p(3), 1)),
        busy: false,
    };
    assert_eq!(become_to, Some((p(3), info)));
    assert!(!c.is_controller());
    assert_eq!(c.current_controller(), p(3));
}

#[test]
fn a_late_next_requestor_becomes_an_orphan() {
    let mut x = Ddc::processes(3, MigrationCondition::Never, MigratingRules::CORRECTED).remove(1);
    let mut out = Outbox::new();
    x.begin_entry(&mut out).unwrap();
    x.on_message(p(0), Msg::Granted { epoch: 0 }, &mut out);
    x.begin_exit(&mut out).unwrap();
    sends(&mut out);
    x.on_message(p(0), Msg::NextRequestor { seq: 1, next: p(2) }, &mut out);
    assert_eq!(sends(&mut out), vec![(p(0), Msg::Orphan { next: p(2) })]);
    // a next-requestor for the live request is kept and piggybacked
    x.begin_entry(&mut out).unwrap();
    x.on_message(p(0), Msg::NextRequestor { seq: 2, next: p(2) }, &mut out);
    x.on_message(p(0), Msg::Granted { epoch: 0 }, &mut out);
    sends(&mut out);
    x.begin_exit(&mut out).unwrap();
    assert_eq!(
        sends(&mut out),
        vec![(p(0), Msg::ExitCs { next: Some(p(2)) })]
    );
}

#[test]
fn calls_follow_the_convention_and_exit_completes_at_once() {
    let mut x = Cdc::processes(3, MigrationCondition::Never, MigratingRules::CORRECTED).remove(2);
    let mut out = Outbox::new();
    assert_eq!(x.begin_exit(&mut out), Err(CallError::NotInCs));
    x.begin_entry(&mut out).unwrap();
    assert_eq!(x.begin_entry(&mut out), Err(CallError::Busy));
    assert!(!out.take_completed());
    x.on_message(p(0), MigratingMsg::Granted { epoch: 0 }, &mut out);
    assert!(out.take_completed());
    x.begin_exit(&mut out).unwrap();
    assert!(out.take_completed());
    assert_eq!(x.state(), CsState::OutCs);
}

#[test]
fn select_next_controller_prefers_the_hint_then_the_lowest_other() {
    let m = Migration::new(MigrationCondition::Always, 4);
    let hint = |preferred, avoid| NextHint { preferred, avoid };
    assert_eq!(
        m.select_next_controller(p(0), hint(Some(p(3)), None)),
        Some(p(3))
    );
    assert_eq!(
        m.select_next_controller(p(0), hint(None, Some(p(1)))),
        Some(p(2))
    );
    assert_eq!(
        m.select_next_controller(p(1), hint(Some(p(1)), None)),
        Some(p(0))
    );
    let only = Migration::with_candidates(MigrationCondition::Always, vec![p(2)]);
    assert_eq!(
        only.select_next_controller(p(0), hint(Some(p(3)), Some(p(2)))),
        Some(p(2))
    );
    assert_eq!(only.select_next_controller(p(2), NextHint::default()), None);
}

#[test]
fn counter_and_timer_conditions() {
    let mut m = Migration::new(MigrationCondition::Counter { maxreq: 3 }, 4);
    m.start(0);
    let fired: Vec<bool> = (0..6).map(|_| m.test_migration_condition(0)).collect();
    assert_eq!(fired, [false, false, true, false, false, true]);
    let mut m = Migration::new(MigrationCondition::timer_units(10), 4);
    m.start(5);
    assert!(!m.test_migration_condition(14));
    assert!(m.test_migration_condition(15));
}

#[test]
fn the_controllers_own_entry_waits_on_the_server_it_granted_the_cs_to() {
    let mut c = controller(4, MigrationCondition::Never);
    let mut out = Outbox::new();
    c.on_message(p(2), req(2, 1), &mut out);
    c.on_message(p(0), Msg::WakeUp, &mut out);
    assert_eq!(
        sends(&mut out).last(),
        Some(&(p(2), Msg::Granted { epoch: 0 }))
    );
    c.begin_entry(&mut out).unwrap();
    assert_eq!(sends(&mut out), vec![(p(0), req(0, 1))]);
    c.on_message(p(0), req(0, 1), &mut out);
    // P2's request left the queue with its grant: P0's is the head, and the CS is busy
    assert!(sends(&mut out).is_empty(), "no grant while P2 holds the CS");
    assert_eq!(
        c.awaiting(),
        vec![p(2)],
        "P2 holds the CS the controller's entry waits for"
    );
    // P2's exit-cs (it heard of no successor): the controller grants the head, itself
    c.on_message(p(2), Msg::ExitCs { next: None }, &mut out);
    assert_eq!(sends(&mut out), vec![(p(0), Msg::Granted { epoch: 0 })]);
    assert_eq!(c.awaiting(), Vec::<ProcessId>::new(), "it granted itself");
    c.on_message(p(0), Msg::Granted { epoch: 0 }, &mut out);
    assert_eq!((c.state(), c.pending()), (CsState::InCs, None));
    assert_eq!(c.awaiting(), Vec::<ProcessId>::new(), "nothing pending");
}

#[test]
fn a_controller_started_with_another_server_in_the_cs_waits_on_it() {
    let initial = [CsState::OutCs, CsState::InCs, CsState::OutCs];
    let topology = crate::topology::Topology::complete(3).expect("a graph");
    let (_, mut procs) = Cdc::system(
        &topology,
        &initial,
        MigrationCondition::Never,
        MigratingRules::CORRECTED,
    )
    .expect("a valid system");
    let mut out = Outbox::new();
    procs[0].begin_entry(&mut out).unwrap();
    assert_eq!(procs[0].awaiting(), vec![p(1)], "P1 started in the CS");
    // a server that is not the controller waits on the controller, as before
    procs[2].begin_entry(&mut out).unwrap();
    assert_eq!(procs[2].awaiting(), vec![p(0)]);
}
