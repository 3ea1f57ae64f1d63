//! The quota facade: builder validation and algorithm choice, enter/exit semantics, timeouts
//! that never move a member silently, drop and panic, stall detection, shutdown, async.

#![cfg(not(loom))]

use lkcs::quota::{Algorithm, InnerMutex, QuorumSystem};
use lkcs::{MemberState, Quota, QuotaError, Topology};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Long enough that a timeout in these tests means a hang, not a slow machine.
const PATIENCE: Duration = Duration::from_secs(20);

fn problems(b: lkcs::QuotaBuilder) -> Vec<String> {
    match b.build() {
        Ok(q) => panic!("expected a ConfigError, built {q:?}"),
        Err(e) => e.problems.iter().map(|p| p.to_string()).collect(),
    }
}

#[test]
fn the_bounds_choose_the_algorithm() {
    let global = |l: usize, k: usize| {
        Quota::global(8)
            .between(l, k)
            .build()
            .expect("valid")
            .algorithm()
    };
    assert_eq!(global(0, 1), Algorithm::Cdc);
    assert_eq!(global(0, 3), Algorithm::Kmex);
    assert_eq!(global(2, 8), Algorithm::Mutin);
    assert_eq!(global(2, 5), Algorithm::Gcs);
    let ring = || Topology::ring(6).expect("ring");
    let q = Quota::local(ring()).at_least(1).build().expect("lmutin");
    assert_eq!(q.algorithm(), Algorithm::Lmutin);
    let q = Quota::local(ring()).at_most(2).build().expect("lmutex");
    assert_eq!(q.algorithm(), Algorithm::Lmutex);
    let q = Quota::local(Topology::complete(6).expect("complete"))
        .between(1, 5)
        .build()
        .expect("lkcs");
    assert_eq!(q.algorithm(), Algorithm::Lkcs);
    assert!(format!("{q:?}").contains("Lkcs"));
    // overrides
    let q = Quota::global(6)
        .at_most(1)
        .algorithm(Algorithm::Maekawa)
        .coterie(QuorumSystem::Majority)
        .build()
        .expect("maekawa");
    assert_eq!(q.algorithm(), Algorithm::Maekawa);
    let q = Quota::global(6)
        .between(1, 4)
        .mx(InnerMutex::Maekawa)
        .build()
        .expect("gcs over maekawa");
    assert_eq!(q.algorithm(), Algorithm::Gcs);
}

#[test]
fn bad_input_lists_every_problem_and_never_panics() {
    // l >= k and k > n at once
    let p = problems(Quota::global(4).between(5, 5));
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(p.iter().any(|s| s.contains("cannot exceed")), "{p:?}");
    assert!(
        p.iter().any(|s| s.contains("below the upper bound")),
        "{p:?}"
    );
    // no bounds, zero members, nothing constrained
    assert!(problems(Quota::global(4))[0].contains("no bounds"));
    assert!(problems(Quota::global(0).at_most(1))[0].contains("at least one member"));
    assert!(problems(Quota::global(4).between(0, 4))[0].contains("constrains nothing"));
    // per-member bounds of the wrong length, and on a global quota
    let ring = || Topology::ring(5).expect("ring");
    let p = problems(Quota::local(ring()).bounds(vec![0; 4], vec![1; 6]));
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(problems(Quota::global(5).bounds(vec![0; 5], vec![1; 5]))
        .iter()
        .any(|s| s.contains("local quota")));
    // a local bound above |N_i| + 1, for every member at once
    let p = problems(Quota::local(ring()).at_most(4));
    assert_eq!(p.len(), 5, "{p:?}");
    assert!(p[0].contains("holds only 3"), "{p:?}");
    // an unsafe start, unknown and repeated ids
    let p = problems(Quota::global(6).between(2, 4).initially_active([0]));
    assert!(p[0].contains("at least 2"), "{p:?}");
    let p = problems(Quota::global(6).between(2, 4).initially_active([0, 0, 9]));
    assert_eq!(p.len(), 2, "{p:?}");
    let p = problems(Quota::local(ring()).at_least(1).initially_active([0]));
    assert!(
        p.len() >= 2 && p.iter().all(|s| s.contains("around member")),
        "{p:?}"
    );
    // LKCS preconditions, in quota terms: neither the round trip (l_i+1 = k_i−1 would leave
    // no room) nor the leader rules (no member with 4 neighbours) can run it
    let p = problems(Quota::local(ring()).between(1, 2));
    assert!(p.iter().any(|s| s.contains("the round trip")), "{p:?}");
    assert!(
        p.iter().any(
            |s| s.starts_with("the leader rules: ") && s.contains("no member has 4 neighbours")
        ),
        "{p:?}"
    );
    // with a leader named, the leader rules alone
    let p = problems(Quota::local(ring()).between(1, 2).leader(0));
    assert!(p.iter().all(|s| !s.contains("the round trip")), "{p:?}");
    assert!(p.iter().any(|s| s.contains("member 0 has 2")), "{p:?}");
    let p = problems(Quota::local(Topology::complete(5).expect("k5")).between(1, 3));
    assert!(
        p.iter()
            .any(|s| s.contains("k − l must be ≥ 3 near member")),
        "{p:?}"
    );
    // an override that does not fit
    let p = problems(Quota::local(ring()).at_least(1).algorithm(Algorithm::Gcs));
    assert!(p[0].contains("global algorithm"), "{p:?}");
}

#[test]
fn enter_and_exit_are_idempotent_and_keep_the_bounds() {
    let quota = Quota::global(4)
        .between(1, 2)
        .monitor(true)
        .build()
        .expect("gcs");
    assert_eq!(quota.initially_active(), &[0]);
    let mut m = quota.members();
    assert_eq!(m.len(), 4);
    assert!(quota.members().is_empty(), "members are handed out once");
    assert!(m[0].is_active() && !m[1].is_active());
    m[0].enter().expect("already active: Ok at once");
    m[1].enter().expect("room for a second");
    m[1].enter().expect("idempotent");
    assert_eq!(m[1].state(), MemberState::Active);
    // a third would break at most 2
    assert_eq!(
        m[2].enter_timeout(Duration::from_millis(300)),
        Err(QuotaError::Timeout)
    );
    assert_eq!(m[2].state(), MemberState::Entering);
    m[0].exit().expect("m[1] stays");
    // the pending entry of m[2] completes once there is room; the next call resolves it
    m[2].enter().expect("resumed");
    assert!(m[2].is_active());
    m[1].exit().expect("m[2] stays");
    drop(m);
    quota.shutdown();
    assert_eq!(quota.report().violations, 0);
}

/// A timed-out move is explicit (Entering / Exiting) and the next call of either kind
/// resolves it, in both directions: never a member silently moved, never `Busy`.
#[test]
fn a_timed_out_call_leaves_an_explicit_pending_move_that_the_next_call_resolves() {
    // entering: a zero timeout starts the entry and reports Timeout
    let quota = Quota::global(3).at_most(1).build().expect("mutex");
    let mut m = quota.members();
    m[0].enter().expect("free");
    assert_eq!(m[1].enter_timeout(Duration::ZERO), Err(QuotaError::Timeout));
    assert_eq!(m[1].state(), MemberState::Entering);
    assert!(!m[1].is_active());
    // backing out: exit waits for the entry (which needs m[0] to leave), then exits
    let (a, b) = m.split_at_mut(1);
    std::thread::scope(|s| {
        let backing_out = s.spawn(|| b[0].exit());
        std::thread::sleep(Duration::from_millis(50));
        a[0].exit().expect("a mutex exit never waits");
        backing_out.join().expect("no panic").expect("resolved");
    });
    assert_eq!(m[1].state(), MemberState::Inactive);
    drop(m);

    // exiting: a lower bound holds the exit; enter takes it back
    let quota = Quota::global(3).at_least(1).build().expect("mutin");
    let mut m = quota.members();
    assert!(m[0].is_active());
    assert_eq!(
        m[0].exit_timeout(Duration::from_millis(200)),
        Err(QuotaError::Timeout)
    );
    assert_eq!(m[0].state(), MemberState::Exiting);
    assert!(m[0].is_active(), "still counted until the exit completes");
    let (a, b) = m.split_at_mut(1);
    std::thread::scope(|s| {
        let back = s.spawn(|| a[0].enter_timeout(PATIENCE));
        std::thread::sleep(Duration::from_millis(50));
        b[0].enter().expect("entry never waits in mutual inclusion");
        back.join()
            .expect("no panic")
            .expect("exit completed, then entered again");
    });
    assert_eq!(m[0].state(), MemberState::Active);
}

/// Workers that loop and return: the last l can never leave. Before, they hung; now their
/// calls return Stalled, naming them and the (dropped) members they wait on.
#[test]
fn workers_that_loop_and_return_end_with_a_stall_naming_the_cause() {
    let quota = Quota::global(6).between(2, 4).build().expect("gcs");
    let stalled = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for mut m in quota.members() {
            let stalled = &stalled;
            s.spawn(move || {
                for _ in 0..20 {
                    m.enter_timeout(PATIENCE).expect("entry");
                    match m.exit_timeout(PATIENCE) {
                        Ok(()) => {}
                        Err(QuotaError::Stalled(st)) => {
                            let me = st.blocked.iter().find(|b| b.member == m.id());
                            let me = me.expect("the stall names the blocked member");
                            assert!(!me.entering);
                            assert_eq!(me.limits.len(), 1);
                            assert_eq!(me.limits[0].bound, 2);
                            // it waits on the inactive members, every one of them dropped
                            assert!(!me.waits_on.is_empty());
                            assert!(me.waits_on.iter().all(|w| st.dropped.contains(w)));
                            let text = st.to_string();
                            assert!(text.contains("at least 2"), "{text}");
                            stalled.fetch_add(1, Ordering::SeqCst);
                            return;
                        }
                        Err(e) => panic!("member {}: {e}", m.id()),
                    }
                }
            });
        }
    });
    assert_eq!(stalled.into_inner(), 2, "exactly the last two are held");
}

/// A worker that panics while active: the others finish; its slot is given back as soon as
/// the bounds allow (it retires), and the program ends with the panic, not a hang.
#[test]
fn a_worker_panicking_while_active_never_hangs_the_others() {
    let quota = Quota::global(5)
        .between(1, 2)
        .monitor(true)
        .build()
        .expect("gcs");
    let finished = AtomicUsize::new(0);
    let panics: Vec<String> = std::thread::scope(|s| {
        let workers: Vec<_> = quota
            .members()
            .into_iter()
            .map(|mut m| {
                let finished = &finished;
                s.spawn(move || {
                    if m.id() == 3 {
                        m.enter().expect("entry");
                        panic!("worker 3 fails while active");
                    }
                    for _ in 0..30 {
                        m.enter().expect("entry");
                        match m.exit() {
                            Ok(()) => {}
                            // the last member standing cannot leave: reported, not hung
                            Err(QuotaError::Stalled(_)) => break,
                            Err(e) => panic!("{e}"),
                        }
                    }
                    finished.fetch_add(1, Ordering::SeqCst);
                })
            })
            .collect();
        workers
            .into_iter()
            .filter_map(|w| w.join().err())
            .map(|p| {
                p.downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .unwrap_or_default()
            })
            .collect()
    });
    assert_eq!(panics, vec!["worker 3 fails while active".to_string()]);
    assert_eq!(finished.into_inner(), 4);
    quota.shutdown();
    assert_eq!(quota.report().violations, 0);
}

/// Dropping an active member gives its place back: at most 1 of 3, the holder dropped, the
/// next entry completes.
#[test]
fn a_dropped_active_member_retires() {
    let quota = Quota::global(3).at_most(1).build().expect("mutex");
    let mut m = quota.members();
    m[0].enter().expect("free");
    let holder = m.remove(0);
    drop(holder);
    m[0].enter_timeout(PATIENCE)
        .expect("the dropped holder left");
}

/// No false positive: a member merely idle could still move, so a blocked call waits.
#[test]
fn no_stall_is_reported_while_a_live_member_is_idle() {
    let quota = Quota::global(2)
        .at_least(1)
        .initially_active([0])
        .stall_check(Duration::from_millis(20))
        .build()
        .expect("mutin");
    let mut m = quota.members();
    // m[1] is idle (inactive, no call): m[0]'s exit waits for it, and is no stall
    assert_eq!(
        m[0].exit_timeout(Duration::from_millis(500)),
        Err(QuotaError::Timeout)
    );
    // once m[1] is dropped it never moves: now the same wait is a stall naming it
    let other = m.pop().expect("two members");
    drop(other);
    match m[0].exit_timeout(PATIENCE) {
        Err(QuotaError::Stalled(s)) => {
            assert_eq!(s.dropped, vec![1]);
            assert_eq!(s.blocked.len(), 1);
            assert_eq!(s.blocked[0].waits_on, vec![1]);
        }
        other => panic!("expected a stall, got {other:?}"),
    }
    // the move stays pending, as after a timeout
    assert_eq!(m[0].state(), MemberState::Exiting);
}

/// LKCS's leader rules at l = 0 with workers that return: before, the last workers near the
/// leader hung (the leader rules keep one more active there); now they get a stall that says
/// so. The round trip (the default) tightens only k there, so every worker finishes.
#[test]
fn lkcs_workers_that_return_get_a_stall_not_a_hang() {
    let five_pairs = |quota: &Quota| -> Vec<Result<(), QuotaError>> {
        std::thread::scope(|s| {
            let workers: Vec<_> = quota
                .members()
                .into_iter()
                .map(|mut m| {
                    s.spawn(move || {
                        for _ in 0..5 {
                            m.enter_timeout(PATIENCE)?;
                            m.exit_timeout(PATIENCE)?;
                        }
                        Ok(())
                    })
                })
                .collect();
            workers
                .into_iter()
                .map(|w| w.join().expect("no panic"))
                .collect()
        })
    };
    let quota = Quota::local(Topology::complete(6).expect("k6"))
        .bounds(vec![0; 6], vec![4; 6])
        .algorithm(Algorithm::Lkcs)
        .monitor(true)
        .build()
        .expect("lkcs");
    assert_eq!(quota.algorithm(), Algorithm::Lkcs);
    let outcomes = five_pairs(&quota);
    assert!(outcomes.iter().all(Result::is_ok), "{outcomes:?}");
    assert_eq!(quota.report().violations, 0);
    let quota = Quota::local(Topology::complete(6).expect("k6"))
        .bounds(vec![0; 6], vec![4; 6])
        .algorithm(Algorithm::Lkcs)
        .leader(0)
        .build()
        .expect("lkcs");
    let outcomes = five_pairs(&quota);
    let stalls = outcomes
        .iter()
        .filter(|r| matches!(r, Err(QuotaError::Stalled(_))))
        .count();
    assert!(
        outcomes
            .iter()
            .all(|r| r.is_ok() || matches!(r, Err(QuotaError::Stalled(_)))),
        "{outcomes:?}"
    );
    assert!(
        stalls >= 1,
        "LKCS keeps at least one active near its leader"
    );
}

#[test]
fn shutdown_wakes_every_blocked_call_and_every_later_call_fails() {
    let quota = Quota::global(4).between(1, 2).build().expect("gcs");
    let mut m = quota.members();
    m[1].enter().expect("second");
    let woke = AtomicBool::new(false);
    std::thread::scope(|s| {
        let (a, rest) = m.split_at_mut(2);
        let blocked = s.spawn(|| rest[0].enter()); // at most 2: blocks
        std::thread::sleep(Duration::from_millis(100));
        quota.shutdown();
        assert_eq!(blocked.join().expect("no panic"), Err(QuotaError::Shutdown));
        woke.store(true, Ordering::SeqCst);
        assert_eq!(a[0].exit(), Err(QuotaError::Shutdown));
    });
    assert!(woke.into_inner());
    quota.shutdown(); // idempotent
}

#[test]
fn a_local_quota_keeps_every_neighbourhood_within_its_bounds() {
    let torus = Topology::torus(4, 4).expect("torus");
    let quota = Quota::local(torus)
        .at_least(2)
        .monitor(true)
        .build()
        .expect("lmutin");
    let done = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for mut m in quota.members() {
            let done = &done;
            s.spawn(move || {
                for _ in 0..50 {
                    if m.exit_timeout(PATIENCE).is_err() {
                        break;
                    }
                    m.enter_timeout(PATIENCE)
                        .expect("entry never waits in LMUTIN");
                }
                done.fetch_add(1, Ordering::SeqCst);
            });
        }
    });
    assert_eq!(done.into_inner(), 16);
    quota.shutdown();
    let r = quota.report();
    assert!(r.monitored && r.state_changes > 0);
    assert_eq!(r.violations, 0);
}

#[test]
fn async_calls_work_on_any_executor_and_cancellation_leaves_an_explicit_move() {
    let quota = Arc::new(Quota::global(4).at_most(2).build().expect("kmex"));
    let mut members = quota.members();
    // futures' own executor: no runtime of any kind
    futures::executor::block_on(async {
        members[0].enter_async().await.expect("enter");
        members[1].enter_async().await.expect("enter");
        members[0].exit_async().await.expect("exit");
    });
    // tokio: a timeout drops the future (cancellation); the entry keeps running
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .expect("tokio");
    rt.block_on(async {
        members[0].enter_async().await.expect("back in");
        let cancelled =
            tokio::time::timeout(Duration::from_millis(200), members[2].enter_async()).await;
        assert!(cancelled.is_err(), "at most 2: the third waits");
        assert_eq!(members[2].state(), MemberState::Entering);
        members[1].exit_async().await.expect("room");
        tokio::time::timeout(PATIENCE, members[2].enter_async())
            .await
            .expect("no hang")
            .expect("the pending entry resolved");
        assert!(members[2].is_active());
        // tasks on the tokio runtime, each owning its member
        let tasks: Vec<_> = members
            .drain(..)
            .map(|mut m| {
                tokio::spawn(async move {
                    for _ in 0..20 {
                        m.enter_async().await?;
                        m.exit_async().await?;
                    }
                    Ok::<(), QuotaError>(())
                })
            })
            .collect();
        for t in tasks {
            t.await.expect("task").expect("pairs");
        }
    });
}

#[test]
fn a_dropped_holder_releases_its_neighbours_in_a_local_quota() {
    // LMUTEX on a ring with k = 1: member 0 stays active; member 1 waits on it
    let quota = Quota::local(Topology::ring(6).expect("ring"))
        .at_most(1)
        .build()
        .expect("lmutex");
    let mut m = quota.members();
    m[0].enter().expect("enter");
    let holder = m.remove(0);
    // every other member is dropped; member 1 blocks trying to enter next to the holder
    let mut m1 = m.remove(0);
    drop(m);
    let entered = std::thread::scope(|s| {
        let waiting = s.spawn(move || m1.enter_timeout(PATIENCE));
        std::thread::sleep(Duration::from_millis(100));
        // the holder is live and idle: no stall yet; once it is dropped it retires (leaves)
        // and member 1 enters
        drop(holder);
        waiting.join().expect("no panic")
    });
    assert_eq!(entered, Ok(()));
}

/// LMUTEX on ring:12 with at most 1 active per neighbourhood: member 0 stays active (idle,
/// not in a call), and members 2, 4 and 6 try to enter. Member 2 is held by the bound around
/// member 1; members 4 and 6 are held by no bound at all, only by the permissions the member
/// before them keeps while it waits (hold-and-wait). The quota is not stalled (member 0 could
/// exit at any time), so no call fails; `waiting` names the chain.
#[test]
fn a_wait_chain_behind_an_idle_active_member_is_reported_by_waiting() {
    let quota = Quota::local(Topology::ring(12).unwrap())
        .at_most(1)
        .build()
        .unwrap();
    assert_eq!(quota.algorithm(), Algorithm::Lmutex);
    let mut members: Vec<Option<lkcs::Member>> = quota.members().into_iter().map(Some).collect();
    members[0].as_mut().unwrap().enter().unwrap();
    // one at a time, so each finds the permissions of the one before it taken
    let waiting_for = |id: usize, need: usize| {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let w = quota.waiting();
            let found = w
                .waiting
                .iter()
                .any(|b| b.member == id && b.needs == [need]);
            if (found && !w.in_flight) || std::time::Instant::now() > deadline {
                return w;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let mut workers = Vec::new();
    let mut waits = None;
    for (id, need) in [(2, 1), (4, 3), (6, 5)] {
        let mut m = members[id].take().unwrap();
        workers.push(std::thread::spawn(move || m.enter()));
        waits = Some(waiting_for(id, need));
    }
    let waits = waits.unwrap();
    let find = |id: usize| waits.waiting.iter().find(|b| b.member == id);
    let (b2, b4, b6) = (find(2), find(4), find(6));
    let chained = |b: Option<&lkcs::quota::Blocked>, need: usize, holder: usize| {
        b.is_some_and(|b| {
            b.entering && b.limits.is_empty() && b.needs == [need] && b.held_by == [holder]
        })
    };
    assert!(
        !waits.in_flight
            && waits.waiting.len() == 3
            && waits.active == [0]
            && b2.is_some_and(|b| b.limits.len() == 1
                && b.limits[0].around == Some(1)
                && b.waits_on == [0]
                && b.needs == [1]
                && b.held_by == [0])
            && chained(b4, 3, 2)
            && chained(b6, 5, 4),
        "{waits:?}"
    );
    let text = waits.to_string();
    assert!(
        text.contains(
            "member 6 waits to enter although no bound forbids it: it needs the permission of \
             member 5, held by member 4"
        ),
        "{text}"
    );
    // not a stall: member 0 is idle and could exit; the blocked calls end only at shutdown
    quota.shutdown();
    for w in workers {
        assert_eq!(w.join().unwrap(), Err(QuotaError::Shutdown));
    }
}

/// A local quota on the round trip (`round_trip()`): at the least slack on a torus, every
/// worker keeps cycling until all have made their pairs, and all do, within the bounds the
/// monitor checks after every state change. (Once all are done the workers stop wherever
/// they are, so a last move may find its neighbours gone: a stall then, which is allowed.)
#[test]
fn a_round_trip_quota_completes_every_workers_pairs_within_its_bounds() {
    let t = Topology::torus(4, 5).expect("torus");
    let n = t.len();
    let quota = Quota::local(t)
        .between(1, 4)
        .round_trip()
        .monitor(true)
        .build()
        .expect("lkcs with the round trip");
    assert_eq!(quota.algorithm(), Algorithm::Lkcs);
    let finished = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for mut m in quota.members() {
            let finished = &finished;
            s.spawn(move || {
                let mut pairs = 0;
                while finished.load(Ordering::SeqCst) < n {
                    for _ in 0..2 {
                        let r = match m.state() {
                            MemberState::Active => m.exit_timeout(PATIENCE),
                            _ => m.enter_timeout(PATIENCE),
                        };
                        match r {
                            Ok(()) => {}
                            // every worker done: the others may have stopped mid-way, and a
                            // move that needs them is a stall (reported, not a hang)
                            Err(QuotaError::Stalled(_)) if finished.load(Ordering::SeqCst) == n => {
                                return
                            }
                            Err(e) => panic!("the round trip moves every member: {e:?}"),
                        }
                    }
                    pairs += 1;
                    if pairs == 5 {
                        finished.fetch_add(1, Ordering::SeqCst);
                    }
                }
            });
        }
    });
    let r = quota.report();
    assert!(r.monitored);
    assert_eq!(r.violations, 0, "{:?}", r.first_violations);
    assert!(r.state_changes >= (n * 10) as u64);
}

#[test]
fn round_trip_is_lkcs_only_and_has_no_leader() {
    let t = || Topology::torus(4, 5).expect("torus");
    let p = problems(Quota::local(t()).between(1, 4).round_trip().leader(0));
    assert!(p.iter().any(|p| p.contains("no leader")), "{p:?}");
    let p = problems(Quota::global(5).between(1, 3).round_trip());
    assert!(
        p.iter().any(|p| p.contains("round_trip is LKCS's")),
        "{p:?}"
    );
    // bounds the round trip cannot tighten (l + 1 >= k − 1) are refused with the reason
    let p = problems(Quota::local(t()).between(1, 3).round_trip());
    assert!(p.iter().any(|p| p.contains("L_i >= K_i")), "{p:?}");
}
