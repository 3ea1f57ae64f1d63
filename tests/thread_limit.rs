//! A member is a thread: a quota, or a runtime, larger than the threads the system leaves room
//! for is refused before any thread starts, with a typed error naming the limit that binds
//! and its value. Past `vm.max_map_count` a new thread used to abort the whole program
//! ("failed to set up alternative stack guard page") at about 16,400 members.

use lkcs::runtime::thread_room;
use lkcs::{
    algo::lmutin::{Lmutin, LmutinRules},
    cs::CsState,
    runtime::{Runtime, RuntimeConfig, RuntimeError},
    MemberState, Problem, Quota, Topology,
};

/// The room the system leaves now, and a size well past it (the room moves a little as
/// other programs start threads; half as much again, and 100 more, is past it whatever they
/// do meanwhile).
fn past_the_room() -> (u64, usize) {
    let (room, limit, value) = thread_room().expect("Linux tells its thread limits in /proc");
    assert!(!limit.is_empty() && value > 0, "{limit} = {value}");
    (room, usize::try_from(room + room / 2 + 100).unwrap())
}

/// The names the error may give, each with the file or call it comes from.
const LIMITS: &[&str] = &[
    "vm.max_map_count",
    "kernel.threads-max",
    "kernel.pid_max",
    "RLIMIT_NPROC",
    "pids.max",
];

#[test]
fn a_global_quota_past_the_thread_room_is_a_typed_error_naming_the_limit() {
    let (_, n) = past_the_room();
    let err = Quota::global(n)
        .at_most(1)
        .build()
        .expect_err("more members than the system has room for");
    assert_eq!(err.problems.len(), 1, "{err}");
    let Problem::TooManyThreads {
        asked,
        room,
        limit,
        value,
    } = err.problems[0].clone()
    else {
        panic!("not the thread limit: {err}");
    };
    // n process threads and the watchdog
    assert_eq!(asked, n + 1);
    assert!(asked > room, "{err}");
    assert!(LIMITS.contains(&limit), "{limit}");
    let text = err.to_string();
    assert!(text.contains(&format!("{limit} = {value}")), "{text}");
    assert!(text.contains(&format!("room for {room} more")), "{text}");
}

#[test]
fn a_local_quota_past_the_thread_room_is_a_typed_error() {
    let (_, n) = past_the_room();
    let err = Quota::local(Topology::ring(n).unwrap())
        .at_most(2)
        .build()
        .expect_err("more members than the system has room for");
    assert!(
        matches!(err.problems[..], [Problem::TooManyThreads { asked, .. }] if asked == n + 1),
        "{err}"
    );
}

#[test]
fn a_runtime_past_the_thread_room_starts_no_thread_and_says_which_limit() {
    let (_, n) = past_the_room();
    let ring = Topology::ring(n).unwrap();
    let initial = vec![CsState::InCs; n];
    let (_, procs) = Lmutin::system(&ring, &vec![1; n], &initial, LmutinRules::CORRECTED).unwrap();
    let err = Runtime::start(procs, RuntimeConfig::default()).expect_err("past the room");
    let RuntimeError::TooManyThreads {
        asked, room, limit, ..
    } = err
    else {
        panic!("not the thread limit: {err}");
    };
    assert_eq!(asked, n + 1);
    assert!(asked > room && LIMITS.contains(&limit));
}

/// Within the room, a quota of a few thousand members starts and stops (each member's
/// thread runs on the runtime's small stack).
#[test]
fn a_quota_within_the_room_starts() {
    let (room, _) = past_the_room();
    let n = 2_000.min(usize::try_from(room).unwrap() / 2);
    let quota = Quota::global(n)
        .at_most(1)
        .build()
        .expect("within the room");
    let mut members = quota.members();
    assert_eq!(members.len(), n);
    // a pair of moves, from whichever state the member starts in
    if members[0].state() == MemberState::Active {
        members[0].exit().unwrap();
        members[0].enter().unwrap();
    } else {
        members[0].enter().unwrap();
        members[0].exit().unwrap();
    }
    quota.shutdown();
}
