//! The quota facade: builder validation and algorithm choice, enter/exit semantics, timeouts
//! that never move a member silently, drop and panic, stall detection, shutdown, async.

#![cfg(not(loom))]

use lkcs::quota::{InnerMutex, QuorumSystem};
use lkcs::Algorithm;
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
    // a local bound above |N_i| + 1, for every member at once: one line naming them all
    let p = problems(Quota::local(ring()).at_most(4));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("members 0, 1, 2, 3, 4:"), "{p:?}");
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
    // LKCS preconditions, in quota terms: l_i+1 = k_i−1 would leave no room, and a ring
    // cannot keep both bounds: the single bounds are offered instead
    let p = problems(Quota::local(ring()).between(1, 2));
    assert!(p[0].contains("leaves too little room"), "{p:?}");
    assert_eq!(
        p[1],
        "accepted instead: only .at_most(2), or only .at_least(1)"
    );
    // with a leader named, the leader rules alone
    let p = problems(Quota::local(ring()).between(1, 2).leader(0));
    assert!(p.iter().all(|s| !s.contains("the round trip")), "{p:?}");
    assert!(p.iter().any(|s| s.contains("member 0 has 2")), "{p:?}");
    let p = problems(
        Quota::local(Topology::complete(5).expect("k5"))
            .between(1, 3)
            .leader(0),
    );
    assert!(
        p.iter()
            .any(|s| s.contains("the leader rules need at most − at least ≥ 3")),
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

/// Every entry carries a fencing token, `Some` exactly while the member is active. Under
/// mutual exclusion (Maekawa, CDC and DDC among 5 threads), the tokens the workers record inside
/// the CS grow strictly in the order they entered; under at most 2 of 5, each member's own
/// tokens grow, and each names its member.
#[test]
fn entries_carry_fencing_tokens_that_grow() {
    for (name, quota, mutex) in [
        (
            "maekawa",
            Quota::global(5).at_most(1).algorithm(Algorithm::Maekawa),
            true,
        ),
        ("cdc", Quota::global(5).at_most(1), true),
        (
            "ddc",
            Quota::global(5).at_most(1).algorithm(Algorithm::Ddc),
            true,
        ),
        ("kmex", Quota::global(5).at_most(2), false),
    ] {
        let quota = quota.monitor(true).build().expect(name);
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let workers: Vec<_> = quota
            .members()
            .into_iter()
            .map(|mut m| {
                let seen = seen.clone();
                std::thread::spawn(move || {
                    for _ in 0..40 {
                        m.enter().unwrap();
                        let t = m.token().expect("active, so a token");
                        seen.lock().unwrap().push(t);
                        m.exit().unwrap();
                        assert_eq!(m.token(), None, "inactive, so none");
                    }
                })
            })
            .collect();
        for w in workers {
            w.join().unwrap();
        }
        let seen = seen.lock().unwrap();
        assert_eq!(seen.len(), 5 * 40, "{name}");
        if mutex {
            for w in seen.windows(2) {
                assert!(w[1] > w[0], "{name}: {} after {}", w[1], w[0]);
            }
        }
        for id in 0..5 {
            let own: Vec<_> = seen.iter().filter(|t| t.member == id).collect();
            assert_eq!(own.len(), 40, "{name}: P{id}");
            for w in own.windows(2) {
                assert!(w[1] > w[0], "{name}: P{id}: {} after {}", w[1], w[0]);
                assert_eq!(w[1].sequence, w[0].sequence + 1, "{name}: P{id}");
            }
        }
        quota.shutdown();
        assert_eq!(quota.report().violations, 0, "{name}");
    }
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
/// not in a call), and members 2, 4 and 6 try to enter, one after the other. Member 2 is held
/// by the bound around member 1. With the paper's hold-and-wait it kept the permissions of
/// members 2 and 3 while it waited, and members 4 and 6 waited behind them in a chain no bound
/// asked for. As built (deviation 5) member 2 sets them aside, so member 4 enters, and member
/// 6 is then held by the bound around member 5: `waiting` names members 2 and 6, each held by
/// a bound.
#[test]
fn a_member_held_by_a_bound_sets_its_permissions_aside_for_the_members_behind_it() {
    let quota = Quota::local(Topology::ring(12).unwrap())
        .at_most(1)
        .build()
        .unwrap();
    assert_eq!(quota.algorithm(), Algorithm::Lmutex);
    let mut members: Vec<Option<lkcs::Member>> = quota.members().into_iter().map(Some).collect();
    members[0].as_mut().unwrap().enter().unwrap();
    // waits until `member` waits on the permissions `needs` alone, nothing in flight
    let settled = |member: usize, needs: &[usize]| {
        let deadline = std::time::Instant::now() + PATIENCE;
        loop {
            let w = quota.waiting();
            let found = w
                .waiting
                .iter()
                .any(|b| b.member == member && b.needs == needs);
            if (found && !w.in_flight) || std::time::Instant::now() > deadline {
                return w;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    };
    let mut m2 = members[2].take().unwrap();
    let blocked2 = std::thread::spawn(move || m2.enter());
    // member 2's own permissions and member 3's are set aside: it needs them all again
    let waits = settled(2, &[1, 2, 3]);
    assert!(
        waits.waiting.len() == 1
            && waits.active == [0]
            && waits.waiting[0].member == 2
            && waits.waiting[0].entering
            && waits.waiting[0].limits.len() == 1
            && waits.waiting[0].limits[0].around == Some(1)
            && waits.waiting[0].waits_on == [0]
            && waits.waiting[0].held_by == [0],
        "member 2 should wait on the bound around member 1 alone: {waits:?}"
    );
    // member 4 is held by no bound: it enters past member 2
    members[4]
        .as_mut()
        .unwrap()
        .enter_timeout(PATIENCE)
        .unwrap_or_else(|e| panic!("member 4 should enter past member 2: {e}"));
    let mut m6 = members[6].take().unwrap();
    let blocked6 = std::thread::spawn(move || m6.enter());
    let waits = settled(6, &[5, 6, 7]);
    let find = |id: usize| waits.waiting.iter().find(|b| b.member == id);
    let held = |b: Option<&lkcs::quota::Blocked>, around: &[usize], by: &[usize]| {
        b.is_some_and(|b| {
            b.limits.iter().map(|l| l.around).collect::<Vec<_>>()
                == around.iter().map(|&a| Some(a)).collect::<Vec<_>>()
                && b.waits_on == by
                && b.held_by == by
        })
    };
    // member 2 is now held around member 3 as well (member 4 entered)
    assert!(
        waits.waiting.len() == 2
            && waits.active == [0, 4]
            && held(find(2), &[1, 3], &[0, 4])
            && held(find(6), &[5], &[4]),
        "members 2 and 6 should each wait on a bound, none on the algorithm: {waits:?}"
    );
    assert!(!waits.to_string().contains("no bound forbids"), "{waits}");
    // not a stall: members 0 and 4 are idle and could exit; the blocked calls end only at
    // shutdown
    quota.shutdown();
    for blocked in [blocked2, blocked6] {
        assert_eq!(blocked.join().unwrap(), Err(QuotaError::Shutdown));
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
    assert!(p[0].contains("leaves too little room"), "{p:?}");
}

/// An algorithm named in the builder must keep exactly the bounds asked for: one that would
/// drop, change or tighten them is refused, naming the algorithms that keep them.
#[test]
fn an_override_never_changes_the_bounds() {
    let unsolved = |b: lkcs::QuotaBuilder| -> (String, Vec<String>, String) {
        let e = b
            .build()
            .expect_err("the override does not keep these bounds");
        assert_eq!(e.problems.len(), 1, "{e}");
        match &e.problems[0] {
            lkcs::Problem::Unsolved {
                algorithm, solvers, ..
            } => (algorithm.clone(), solvers.clone(), e.to_string()),
            other => panic!("expected Problem::Unsolved, got {other:?}"),
        }
    };
    let ring = || Topology::ring(6).expect("ring");
    // each row of the table in the report: asked bounds, and the algorithm named
    let rows: Vec<(lkcs::QuotaBuilder, &str, &str)> = vec![
        (
            Quota::global(8).at_most(1).algorithm(Algorithm::Mutin),
            "mutin",
            "cdc",
        ),
        (
            Quota::global(8).at_most(1).algorithm(Algorithm::Lmutin),
            "lmutin",
            "maekawa",
        ),
        (
            Quota::global(8).between(2, 5).algorithm(Algorithm::Mutin),
            "mutin",
            "gcs",
        ),
        (
            Quota::global(8).at_least(2).algorithm(Algorithm::Kmex),
            "kmex",
            "mutin",
        ),
        (
            Quota::global(8).at_most(3).algorithm(Algorithm::Cdc),
            "cdc",
            "kmex",
        ),
        (
            Quota::local(ring()).at_most(1).algorithm(Algorithm::Lmutin),
            "lmutin",
            "lmutex",
        ),
    ];
    for (builder, named, a_solver) in rows {
        let (algorithm, solvers, text) = unsolved(builder);
        assert_eq!(algorithm, named);
        assert!(solvers.iter().any(|s| s == a_solver), "{text}");
        assert!(!solvers.iter().any(|s| s == named), "{text}");
        assert!(text.contains("would change the bounds"), "{text}");
    }
    // a global algorithm cannot keep per-neighbourhood bounds on a ring: none is offered
    let (_, solvers, _) = unsolved(Quota::local(ring()).at_most(1).algorithm(Algorithm::Lmutin));
    assert!(solvers
        .iter()
        .all(|s| ["lmutex", "lkcs"].contains(&s.as_str())));
    // an override that keeps them runs them unchanged
    let q = Quota::global(8)
        .at_most(3)
        .algorithm(Algorithm::Lmutex)
        .build()
        .expect("lmutex keeps at most 3 of 8 on a complete graph");
    assert!(q.bounds().iter().all(|b| (b.l, b.k) == (0, 3)));
    let q = Quota::global(8)
        .at_most(1)
        .algorithm(Algorithm::Maekawa)
        .build()
        .expect("maekawa is a mutual exclusion");
    assert!(q.bounds().iter().all(|b| (b.l, b.k) == (0, 1)));
}

/// try_enter / try_exit make the move when no bound is in the way, and otherwise leave the
/// member exactly as it was.
#[test]
fn try_moves_never_leave_a_member_moved_or_pending() {
    let quota = Quota::global(3)
        .at_most(1)
        .monitor(true)
        .build()
        .expect("mutex");
    let mut m = quota.members();
    m[0].try_enter().expect("room: it enters");
    assert_eq!(m[0].state(), MemberState::Active);
    m[0].try_enter().expect("already active");
    for _ in 0..50 {
        assert_eq!(m[1].try_enter(), Err(QuotaError::WouldBlock));
        assert_eq!(m[1].state(), MemberState::Inactive);
    }
    m[0].try_exit()
        .expect("a mutual exclusion's exit waits on no bound");
    // the refused member never entered on its own: the room is still there
    m[2].try_enter().expect("room again");
    assert_eq!(m[1].state(), MemberState::Inactive);
    m[2].exit().expect("exit");
    drop(m);
    quota.shutdown();
    assert_eq!(quota.report().violations, 0);

    // a lower bound: at least 1 of 3, member 0 the only one active
    let quota = Quota::global(3).at_least(1).build().expect("mutin");
    let mut m = quota.members();
    assert_eq!(m[0].try_exit(), Err(QuotaError::WouldBlock));
    assert_eq!(m[0].state(), MemberState::Active);
    m[1].try_enter().expect("an entry waits on no lower bound");
    m[0].try_exit().expect("member 1 holds the bound now");
    assert_eq!(m[0].state(), MemberState::Inactive);
}

/// Many members racing with try_enter on one slot: every refusal leaves its member
/// inactive, and at the end nobody is pending.
#[test]
fn racing_try_moves_keep_the_bounds_and_leave_nothing_pending() {
    let quota = Quota::global(6)
        .at_most(2)
        .monitor(true)
        .build()
        .expect("kmex");
    let entered = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for mut m in quota.members() {
            let entered = &entered;
            s.spawn(move || {
                for _ in 0..200 {
                    match m.try_enter() {
                        Ok(()) => {
                            entered.fetch_add(1, Ordering::SeqCst);
                            m.exit().expect("exit");
                        }
                        Err(QuotaError::WouldBlock) => {
                            assert_eq!(m.state(), MemberState::Inactive)
                        }
                        Err(e) => panic!("member {}: {e}", m.id()),
                    }
                }
                // whatever a withdrawn entry did inside, the member ends where it began
                m.exit().expect("settled");
                assert_eq!(m.state(), MemberState::Inactive);
            });
        }
    });
    assert!(entered.into_inner() > 0);
    quota.shutdown();
    assert_eq!(quota.report().violations, 0);
}

/// cancel() takes back a move left running by a timeout: the member is back where it
/// started, the withdrawn entry never shows, and the quota keeps its bound.
#[test]
fn cancel_withdraws_a_pending_move() {
    let quota = Quota::global(2)
        .at_most(1)
        .monitor(true)
        .build()
        .expect("mutex");
    let mut m = quota.members();
    m[1].cancel().expect("nothing pending: Ok");
    m[0].enter().expect("free");
    assert_eq!(
        m[1].enter_timeout(Duration::from_millis(20)),
        Err(QuotaError::Timeout)
    );
    assert_eq!(m[1].state(), MemberState::Entering);
    m[1].cancel()
        .expect("an entry that waits on the upper bound can be withdrawn");
    assert_eq!(m[1].state(), MemberState::Inactive);
    m[1].exit().expect("inactive already: Ok at once");
    // the holder leaves; the withdrawn entry completes inside and is undone, and the
    // slot comes back to whoever asks
    m[0].exit().expect("exit");
    m[0].enter_timeout(PATIENCE)
        .expect("the withdrawn entry gave the slot back");
    assert_eq!(m[1].state(), MemberState::Inactive);
    m[0].exit().expect("exit");
    m[1].enter_timeout(PATIENCE)
        .expect("member 1 can enter again");
    drop(m);
    quota.shutdown();
    assert_eq!(quota.report().violations, 0);

    // a move that waits on no bound cannot be withdrawn: it completes on its own
    let quota = Quota::global(3).at_least(1).build().expect("mutin");
    let mut m = quota.members();
    m[1].enter().expect("entry");
    // an exit blocked on the lower bound can be withdrawn
    assert_eq!(m[1].exit(), Ok(()));
    assert_eq!(
        m[0].exit_timeout(Duration::from_millis(20)),
        Err(QuotaError::Timeout)
    );
    m[0].cancel()
        .expect("mutin's exit waits on the lower bound");
    assert_eq!(m[0].state(), MemberState::Active);

    // LKCS's round trip withdraws; its leader rules cannot, and say why
    let lkcs = |leader: Option<usize>| {
        let b = Quota::local(Topology::complete(5).expect("complete"))
            .between(1, 4)
            .monitor(true);
        match leader {
            Some(l) => b.leader(l),
            None => b,
        }
        .build()
        .expect("lkcs")
    };
    let active =
        |m: &[lkcs::Member]| -> Vec<usize> { (0..m.len()).filter(|&i| m[i].is_active()).collect() };
    let quota = lkcs(None);
    assert_eq!(quota.algorithm(), Algorithm::Lkcs);
    let mut m = quota.members();
    // down to one active member, each exit keeping l = 1 (the last of them a round trip);
    // then the last one's exit would break l: it waits, whatever the timing
    while active(&m).len() > 1 {
        let i = active(&m)[0];
        m[i].exit_timeout(PATIENCE).expect("an exit that keeps l");
    }
    let blocked = active(&m)[0];
    assert_eq!(
        m[blocked].exit_timeout(Duration::from_millis(20)),
        Err(QuotaError::Timeout),
        "the last active member's exit would break l"
    );
    m[blocked]
        .cancel()
        .expect("the round trip takes an exit that waits on the lower bound back");
    assert_eq!(m[blocked].state(), MemberState::Active);
    assert_eq!(m[blocked].try_exit(), Err(QuotaError::WouldBlock));
    assert_eq!(m[blocked].state(), MemberState::Active, "try_exit left it");
    // one other member comes back in; then the withdrawn member can leave
    let other = (0..m.len())
        .find(|&i| i != blocked && !m[i].is_active())
        .expect("an inactive member");
    m[other].enter_timeout(PATIENCE).expect("room to enter");
    m[blocked]
        .exit_timeout(PATIENCE)
        .expect("its exit now keeps l");
    drop(m);
    quota.shutdown();
    assert_eq!(quota.report().violations, 0);

    // the leader rules refuse by rule, before looking at the move: the first exit left
    // running is refused (one that completed meanwhile has nothing to withdraw)
    let quota = lkcs(Some(0));
    let mut m = quota.members();
    let mut refused = false;
    for i in active(&m) {
        if m[i].exit_timeout(Duration::from_millis(20)) != Err(QuotaError::Timeout) {
            continue;
        }
        match m[i].cancel() {
            Err(QuotaError::CannotWithdraw(why)) => {
                assert!(why.contains("leader rules"), "{why}");
                assert_ne!(m[i].state(), MemberState::Active, "the move keeps running");
                refused = true;
                break;
            }
            Ok(()) => assert_eq!(m[i].state(), MemberState::Inactive, "completed meanwhile"),
            other => panic!("expected CannotWithdraw, got {other:?}"),
        }
    }
    assert!(
        refused,
        "the last active member's exit waits on the lower bound"
    );
}

/// (l,k)-GCS withdraws a move inside, before the member's state changes: an entry that
/// waits on the upper bound and an exit that waits on the lower one come back, the
/// withdrawn entry never counts as active, and the bounds hold throughout.
#[test]
fn gcs_withdraws_a_move_before_its_state_changes() {
    let quota = Quota::global(4)
        .between(1, 2)
        .monitor(true)
        .build()
        .expect("gcs");
    assert_eq!(quota.algorithm(), Algorithm::Gcs);
    let mut m = quota.members();
    // fill the upper bound
    for i in 0..4 {
        if (0..4).filter(|&j| m[j].is_active()).count() < 2 {
            m[i].enter().expect("room below the upper bound");
        }
    }
    let active: Vec<usize> = (0..4).filter(|&i| m[i].is_active()).collect();
    let idle: Vec<usize> = (0..4).filter(|&i| !m[i].is_active()).collect();
    assert_eq!((active.len(), idle.len()), (2, 2));
    let (x, y) = (idle[0], idle[1]);
    assert_eq!(
        m[x].enter_timeout(Duration::from_millis(20)),
        Err(QuotaError::Timeout),
        "the upper bound is full"
    );
    assert_eq!(m[x].state(), MemberState::Entering);
    m[x].cancel()
        .expect("a GCS entry waiting on the upper bound is withdrawn inside");
    assert_eq!(m[x].state(), MemberState::Inactive);
    // a holder leaves; the withdrawn entry gets its right inside and gives it back, so the
    // room goes to whoever asks, and x never became active
    m[active[0]].exit().expect("2 active, at least 1");
    m[y].enter_timeout(PATIENCE)
        .expect("the withdrawn entry gave its right back");
    assert_eq!(m[x].state(), MemberState::Inactive);
    m[y].exit().expect("2 active, at least 1");
    m[x].enter_timeout(PATIENCE).expect("x can enter again");

    // an exit waiting on the lower bound: the only other active member leaves first
    let a = active[1];
    m[a].exit().expect("2 active, at least 1");
    assert_eq!(
        m[x].exit_timeout(Duration::from_millis(20)),
        Err(QuotaError::Timeout),
        "x is the only active member"
    );
    assert_eq!(m[x].state(), MemberState::Exiting);
    m[x].cancel()
        .expect("a GCS exit waiting on the lower bound is withdrawn inside");
    assert_eq!(m[x].state(), MemberState::Active);
    m[a].enter_timeout(PATIENCE).expect("room");
    m[x].exit_timeout(PATIENCE)
        .expect("a holds the lower bound now");
    drop(m);
    quota.shutdown();
    let report = quota.report();
    assert_eq!(report.violations, 0, "{report:?}");
}

/// Members racing with try moves: every refusal leaves its member where it was, nothing is
/// left pending, and the monitor sees every bound kept.
fn race_try_moves(what: &str, quota: Quota) {
    let moved = AtomicUsize::new(0);
    std::thread::scope(|s| {
        for mut m in quota.members() {
            let moved = &moved;
            s.spawn(move || {
                for _ in 0..200 {
                    let before = m.state();
                    let tried = if m.is_active() {
                        m.try_exit()
                    } else {
                        m.try_enter()
                    };
                    match tried {
                        Ok(()) => {
                            assert_ne!(m.state(), before, "{what}: member {}: Ok moved it", m.id());
                            moved.fetch_add(1, Ordering::SeqCst);
                        }
                        Err(QuotaError::WouldBlock) => {
                            assert_eq!(m.state(), before, "{what}: member {}: refused", m.id())
                        }
                        Err(e) => panic!("{what}: member {}: {e}", m.id()),
                    }
                    assert!(
                        matches!(m.state(), MemberState::Active | MemberState::Inactive),
                        "{what}: member {}: a try move left {:?}",
                        m.id(),
                        m.state()
                    );
                }
            });
        }
    });
    assert!(moved.into_inner() > 0, "{what}: no try move ever succeeded");
    quota.shutdown();
    let report = quota.report();
    assert_eq!(report.violations, 0, "{what}: {report:?}");
}

/// (l,k)-GCS withdraws inside ([`racing_lkcs_try_moves_keep_every_bound`] for LKCS).
#[test]
fn racing_gcs_try_moves_keep_both_bounds() {
    let quota = Quota::global(6).between(1, 3).monitor(true).build();
    race_try_moves("gcs", quota.expect("gcs"));
}

/// LKCS's round trip withdraws its requests inside.
#[test]
fn racing_lkcs_try_moves_keep_every_bound() {
    let complete = Topology::complete(8).expect("complete");
    let quota = Quota::local(complete).between(2, 6).monitor(true).build();
    race_try_moves("lkcs complete 8", quota.expect("lkcs"));
    let complete = Topology::complete(7).expect("complete");
    let quota = Quota::local(complete).between(1, 5).monitor(true).build();
    race_try_moves("lkcs complete 7", quota.expect("lkcs"));
}

/// LKCS: a member dropped while active leaves (its exit at the tightened lower bound goes by
/// round trip) and gives back what it set aside for the return it never makes. On complete:8
/// with (2, 6) and members 0–2 active, three times an active member is dropped and an
/// inactive one enters: before, the three set-asides filled the neighbourhood's MUTEX and the
/// third entry waited for good; now every entry completes and no bound breaks.
#[test]
fn dropped_lkcs_members_leave_room_for_later_entries() {
    let quota = Quota::local(Topology::complete(8).expect("complete"))
        .between(2, 6)
        .initially_active([0, 1, 2])
        .round_trip()
        .monitor(true)
        .build()
        .expect("lkcs");
    let mut members: Vec<Option<lkcs::Member>> = quota.members().into_iter().map(Some).collect();
    for (leaving, entering) in [(0, 3), (1, 4), (2, 5)] {
        drop(members[leaving].take());
        let deadline = std::time::Instant::now() + PATIENCE;
        while quota.waiting().active.contains(&leaving) {
            assert!(
                std::time::Instant::now() < deadline,
                "the dropped member {leaving} never left"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        let m = members[entering].as_mut().expect("not dropped");
        m.enter_timeout(PATIENCE)
            .unwrap_or_else(|e| panic!("member {entering} could not enter: {e}"));
    }
    quota.shutdown();
    assert_eq!(quota.report().violations, 0);
}

/// enter_guard keeps the member active; dropping the guard starts the exit.
#[test]
fn an_enter_guard_starts_the_exit_when_dropped() {
    let quota = Quota::global(2).at_most(1).build().expect("mutex");
    let mut m = quota.members();
    {
        let guard = m[0].enter_guard().expect("free");
        assert_eq!(guard.id(), 0);
    }
    // the exit was started by the drop; member 1's entry needs it to complete
    m[1].enter_timeout(PATIENCE)
        .expect("the guard's exit completed");
    m[1].enter_guard()
        .expect("active")
        .exit()
        .expect("explicit exit");
    assert_eq!(m[1].state(), MemberState::Inactive);
    m[0].exit().expect("resolved");
    assert_eq!(m[0].state(), MemberState::Inactive);
}

/// close(): entries fail with Closed (blocked ones too), exits succeed at once.
#[test]
fn close_refuses_entries_and_releases_every_exit() {
    // a blocked entry is woken with Closed
    let quota = Quota::global(2).at_most(1).build().expect("mutex");
    let mut m = quota.members();
    m[0].enter().expect("free");
    let (a, b) = m.split_at_mut(1);
    std::thread::scope(|s| {
        let blocked = s.spawn(|| b[0].enter_timeout(PATIENCE));
        std::thread::sleep(Duration::from_millis(50));
        quota.close();
        let e = blocked.join().expect("no panic").expect_err("closed");
        assert!(e.is_closed(), "{e}");
        a[0].exit().expect("exits succeed after close");
        let e = a[0].enter().expect_err("no entry after close");
        assert!(e.is_closed(), "{e}");
    });
    assert!(quota.is_closed());
    // a blocked exit (the lower bound) returns Ok once closed
    let quota = Quota::global(3).between(2, 3).build().expect("mutin");
    let mut m = quota.members();
    assert!(m[0].is_active() && m[1].is_active());
    let m0 = &mut m[0];
    std::thread::scope(|s| {
        let blocked = s.spawn(|| m0.exit_timeout(PATIENCE));
        std::thread::sleep(Duration::from_millis(50));
        quota.close();
        blocked.join().expect("no panic").expect("released");
    });
    assert_eq!(m[0].state(), MemberState::Inactive);
    m[1].exit().expect("released at once");
    assert_eq!(m[1].state(), MemberState::Inactive);
}

/// Workers that finish at different times: each keeps cycling (without work) once its own
/// rounds are done, so the busy ones can always move; the last to finish closes the quota;
/// every exit returns Ok and each worker's loop ends on the entry that reports Closed.
#[test]
fn workers_that_finish_at_different_times_end_with_every_call_ok() {
    let ring = |n| Topology::ring(n).expect("ring");
    let cases: Vec<(&str, lkcs::QuotaBuilder)> = vec![
        ("gcs 2..=5 of 8", Quota::global(8).between(2, 5)),
        ("mutin at least 3 of 6", Quota::global(6).at_least(3)),
        ("kmex at most 2 of 5", Quota::global(5).at_most(2)),
        ("cdc at most 1 of 4", Quota::global(4).at_most(1)),
        ("lmutex ring", Quota::local(ring(8)).at_most(1)),
        ("lmutin ring", Quota::local(ring(8)).at_least(1)),
    ];
    for (name, builder) in cases {
        let quota = builder.monitor(true).build().expect(name);
        let busy = AtomicUsize::new(quota.len());
        let work_done = AtomicUsize::new(0);
        std::thread::scope(|s| {
            for mut m in quota.members() {
                let (quota, busy, work_done) = (&quota, &busy, &work_done);
                s.spawn(move || {
                    let rounds = 3 + 7 * m.id();
                    let mut done = 0;
                    loop {
                        match m.enter_timeout(PATIENCE) {
                            Err(e) if e.is_closed() => break,
                            r => r.unwrap_or_else(|e| panic!("{name}: member {}: {e}", m.id())),
                        }
                        if done < rounds {
                            work_done.fetch_add(1, Ordering::SeqCst);
                            done += 1;
                            if done == rounds && busy.fetch_sub(1, Ordering::SeqCst) == 1 {
                                quota.close(); // the last one: everybody may leave now
                            }
                        }
                        m.exit_timeout(PATIENCE)
                            .unwrap_or_else(|e| panic!("{name}: member {}: {e}", m.id()));
                    }
                    assert_eq!(done, rounds, "{name}");
                    assert_eq!(m.state(), MemberState::Inactive, "{name}");
                });
            }
        });
        assert!(quota.is_closed(), "{name}");
        let n = quota.len();
        assert_eq!(
            work_done.into_inner(),
            (0..n).map(|i| 3 + 7 * i).sum::<usize>()
        );
        quota.shutdown();
        assert_eq!(quota.report().violations, 0, "{name}");
    }
}

/// The smaller problems of the quota's first-use report.
#[test]
fn config_errors_list_every_problem_once_in_quota_words() {
    // the bounds and the start list, together
    let p = problems(Quota::global(8).between(6, 3).initially_active([9, 9]));
    assert_eq!(p.len(), 3, "{p:?}");
    assert!(
        p.iter().any(|s| s.contains("below the upper bound")),
        "{p:?}"
    );
    assert!(
        p.iter()
            .any(|s| s.contains("member 9, but members are 0..8")),
        "{p:?}"
    );
    assert!(
        p.iter().any(|s| s.contains("member 9 more than once")),
        "{p:?}"
    );
    // no upper bound was given: none is spoken of
    let p = problems(Quota::global(8).at_least(9));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(!p[0].contains("upper"), "{p:?}");
    assert!(p[0].contains("number of members"), "{p:?}");
    // one line for one cause, naming every member it concerns
    let p = problems(Quota::local(Topology::ring(6).expect("ring")).at_least(4));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(p[0].starts_with("members 0, 1, 2, 3, 4, 5:"), "{p:?}");
    assert!(!p[0].contains("upper"), "{p:?}");
}

/// A refused quota's reasons are [`QuotaProblem`]s to match, each carrying the members and
/// numbers its line names.
#[test]
fn refusals_are_quota_problems_to_match() {
    use lkcs::quota::{BoundSide, QuotaProblem as Q};
    use lkcs::Problem;
    let kinds = |b: lkcs::QuotaBuilder| -> Vec<Q> {
        let e = b.build().expect_err("refused");
        e.problems
            .into_iter()
            .map(|p| match p {
                Problem::Quota(q) => q,
                other => panic!("not a quota problem: {other:?}"),
            })
            .collect()
    };
    assert_eq!(kinds(Quota::global(0).at_most(1)), vec![Q::NoMembers]);
    assert_eq!(kinds(Quota::global(4)), vec![Q::NoBounds]);
    assert_eq!(
        kinds(Quota::global(8).between(6, 3).initially_active([9, 9])),
        vec![
            Q::LowerNotBelowUpper {
                members: vec![],
                l: 6,
                k: 3
            },
            Q::StartOutOfRange {
                members: vec![9],
                n: 8
            },
            Q::StartRepeats { members: vec![9] },
        ]
    );
    assert_eq!(
        kinds(Quota::global(6).between(2, 4).initially_active([0])),
        vec![Q::StartBreaks {
            around: None,
            active: 1,
            side: BoundSide::Lower,
            bound: 2
        }]
    );
    let ring6 = Topology::ring(6).expect("ring");
    assert_eq!(
        kinds(Quota::local(ring6.clone()).at_least(4)),
        vec![Q::LowerNotBelowNeighbourhood {
            members: (0..6).collect(),
            l: 4,
            size: 3
        }]
    );
    assert_eq!(
        kinds(Quota::local(ring6.clone()).bounds(vec![0; 6], vec![1; 5])),
        vec![Q::BoundsLength {
            side: BoundSide::Upper,
            given: 5,
            n: 6
        }]
    );
    // a ring's members have two neighbours: too few to lead
    assert_eq!(
        kinds(Quota::local(ring6.clone()).between(1, 2).leader(0)),
        vec![
            Q::LeaderTooFewNeighbours {
                leader: 0,
                degree: 2,
                needed: 4
            },
            Q::LeaderSlack {
                members: vec![0, 1, 2, 4, 5],
                leader: 0,
                l: 1,
                k: 2
            },
        ]
    );
    assert_eq!(
        kinds(Quota::local(ring6).at_least(1).round_trip()),
        vec![Q::RoundTripNotLkcs {
            algorithm: "lmutin".into()
        }]
    );
}

#[test]
fn a_large_quota_debugs_in_a_line_and_hands_its_members_out_once() {
    let quota = Quota::global(1000).at_most(10).build().expect("kmex");
    let text = format!("{quota:?}");
    assert!(text.len() < 200, "{} bytes: {text}", text.len());
    assert!(text.contains("at_most: 10"), "{text}");
    assert_eq!(quota.take_members().map(|m| m.len()), Ok(1000));
    assert_eq!(
        quota.take_members().map(|m| m.len()),
        Err(QuotaError::MembersTaken)
    );
    assert!(quota.members().is_empty());
}

#[test]
fn nobody_waits_on_a_quota_that_has_shut_down() {
    let quota = Quota::global(2).at_most(1).build().expect("mutex");
    let mut m = quota.members();
    m[0].enter().expect("free");
    assert_eq!(
        m[1].enter_timeout(Duration::from_millis(20)),
        Err(QuotaError::Timeout)
    );
    assert_eq!(quota.waiting().waiting.len(), 1);
    quota.shutdown();
    assert!(quota.waiting().waiting.is_empty());
    assert_eq!(m[1].enter(), Err(QuotaError::Shutdown));
}

/// A holder whose worker panicked is reported as such, not only as dropped.
#[test]
fn a_panicked_holder_is_reported_as_panicked() {
    let quota = Quota::global(3).at_least(1).build().expect("mutin");
    let mut m = quota.members();
    let holder = m.remove(0);
    assert!(holder.is_active());
    let joined = std::thread::spawn(move || {
        let _holder = holder;
        panic!("the worker fails while active");
    })
    .join();
    let payload = joined.expect_err("the worker panics");
    let message = payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str));
    assert_eq!(message, Some("the worker fails while active"));
    let waits = quota.waiting();
    assert_eq!(waits.dropped, [0]);
    assert_eq!(waits.panicked, [0]);
    // a member dropped without a panic is dropped, not panicked
    drop(m.remove(0));
    let waits = quota.waiting();
    assert_eq!(waits.dropped, [0, 1]);
    assert_eq!(waits.panicked, [0]);
    assert!(waits.to_string().contains("panicking"), "{waits}");
}

/// A refused local quota says why in quota words, once per cause, and what would be accepted.
#[test]
fn a_refused_local_quota_says_what_would_be_accepted() {
    let torus = || Topology::torus(6, 6).expect("torus");
    let p = problems(Quota::local(torus()).between(1, 3));
    assert_eq!(p.len(), 2, "{p:?}");
    assert!(
        p[0].starts_with("every member: at least 1 and at most 3"),
        "{p:?}"
    );
    assert!(p[0].contains("at most − at least ≥ 3"), "{p:?}");
    for internal in ["P0", "L_i", "leader", "round trip"] {
        assert!(!p.iter().any(|s| s.contains(internal)), "{internal}: {p:?}");
    }
    assert!(
        p[1].starts_with("accepted instead: .between(1, 4)"),
        "{p:?}"
    );
    assert!(p[1].contains("only .at_most(3)") && p[1].contains("only .at_least(1)"));
    // what it offers is accepted
    Quota::local(torus())
        .between(1, 4)
        .build()
        .expect("offered");
    // a ring cannot keep both bounds: only one of them is offered
    let p = problems(Quota::local(Topology::ring(6).expect("ring")).between(1, 2));
    assert_eq!(
        p[1], "accepted instead: only .at_most(2), or only .at_least(1)",
        "{p:?}"
    );
    // a named leader: one line per cause, naming every member it concerns
    let p = problems(Quota::local(torus()).between(1, 3).leader(0));
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("within two hops of member 0 (the leader)"),
        "{p:?}"
    );
}

/// Failure locality in the thread runtime: on rings and tori, at the lower bound (LMUTIN)
/// and at the upper bound (LMUTEX), workers loop a different number of moves each and
/// return (a returning member retires). Members that cannot go on end in a stall, and every
/// member a stall names is held by a bound (`limits` not empty): none waits only on the
/// permissions of other waiting members (the hold-and-wait of the paper's rules, which named
/// 6 of 8 live members with no bound on ring:12).
#[test]
fn members_left_behind_by_returning_workers_are_held_only_by_bounds() {
    let cases = [
        (
            Topology::ring(12).expect("ring"),
            Some(1),
            None,
            Algorithm::Lmutin,
        ),
        (
            Topology::ring(12).expect("ring"),
            Some(2),
            None,
            Algorithm::Lmutin,
        ),
        (
            Topology::torus(4, 4).expect("torus"),
            Some(2),
            None,
            Algorithm::Lmutin,
        ),
        (
            Topology::ring(12).expect("ring"),
            None,
            Some(1),
            Algorithm::Lmutex,
        ),
        (
            Topology::torus(4, 4).expect("torus"),
            None,
            Some(2),
            Algorithm::Lmutex,
        ),
    ];
    for (t, l, k, alg) in cases {
        let what = format!("{alg:?} on {} processes, l {l:?} k {k:?}", t.len());
        let mut b = Quota::local(t).monitor(true);
        if let Some(l) = l {
            b = b.at_least(l);
        }
        if let Some(k) = k {
            b = b.at_most(k);
        }
        let quota = b.build().expect("a valid local quota");
        assert_eq!(quota.algorithm(), alg, "{what}");
        let (stalls, named) = (AtomicUsize::new(0), AtomicUsize::new(0));
        std::thread::scope(|s| {
            for mut m in quota.members() {
                let (stalls, named, what) = (&stalls, &named, &what);
                s.spawn(move || {
                    // 2 to 13 moves, a different number for neighbours
                    let moves = 2 + (m.id() * 7) % 12;
                    for _ in 0..moves {
                        let r = match m.state() {
                            MemberState::Active => m.exit_timeout(PATIENCE),
                            _ => m.enter_timeout(PATIENCE),
                        };
                        match r {
                            Ok(()) => {}
                            Err(QuotaError::Stalled(st)) => {
                                for b in &st.blocked {
                                    assert!(
                                        !b.limits.is_empty(),
                                        "{what}: member {} is named with no bound holding it: {st}",
                                        b.member
                                    );
                                }
                                stalls.fetch_add(1, Ordering::SeqCst);
                                named.fetch_add(st.blocked.len(), Ordering::SeqCst);
                                return;
                            }
                            Err(e) => panic!("{what}: member {}: {e}", m.id()),
                        }
                    }
                });
            }
        });
        quota.shutdown();
        let r = quota.report();
        assert_eq!(r.violations, 0, "{what}: {:?}", r.first_violations);
        eprintln!(
            "{what}: {} stalled call(s), {} blocked member(s) named",
            stalls.into_inner(),
            named.into_inner()
        );
    }
}
