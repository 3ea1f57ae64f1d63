//! The replicated view log (`lkcs::net::view`) over an in-memory transport between tokio
//! tasks: every request and reply goes through postcard (the node's frame encoding), and a
//! switch cuts members off (both directions), splits the cluster, or delays a member's
//! messages. Each test asserts the exact views and starts reached, on every member that
//! installs them.

use lkcs::net::view::{
    Applied, Proposal, Unreachable, View, ViewConfig, ViewError, ViewGroup, ViewRpc, ViewRpcReply,
    ViewState, ViewTransport,
};
use lkcs::{cs::CsState, ProcessId};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use CsState::{InCs, OutCs};

/// A whole test's hang guard.
const GUARD: Duration = Duration::from_secs(90);
/// How long one awaited condition may take: far beyond an election and a few round trips.
const WAIT: Duration = Duration::from_secs(30);

fn p(i: u32) -> ProcessId {
    ProcessId(i)
}

/// The incarnation of member `i` at the cluster's first start.
fn inc(i: u32) -> u64 {
    100 + u64::from(i)
}

/// Evicts member `i`'s first process.
fn evict(i: u32) -> Proposal {
    Proposal::Evict {
        member: p(i),
        incarnation: inc(i),
    }
}

/// The in-memory network: who can reach whom, and each member's group.
#[derive(Default)]
struct Switch {
    /// Members cut off from everyone (both directions).
    cut: Mutex<BTreeSet<ProcessId>>,
    /// A partition: members on different sides do not reach each other.
    sides: Mutex<BTreeMap<ProcessId, u8>>,
    /// Extra latency of every message to or from a member.
    delay: Mutex<BTreeMap<ProcessId, Duration>>,
    groups: Mutex<BTreeMap<ProcessId, ViewGroup<Link>>>,
}

impl Switch {
    fn blocked(&self, a: ProcessId, b: ProcessId) -> bool {
        let cut = self.cut.lock().expect("lock");
        if cut.contains(&a) || cut.contains(&b) {
            return true;
        }
        let sides = self.sides.lock().expect("lock");
        sides.get(&a).unwrap_or(&0) != sides.get(&b).unwrap_or(&0)
    }

    fn latency(&self, a: ProcessId, b: ProcessId) -> Duration {
        let delay = self.delay.lock().expect("lock");
        *delay.get(&a).unwrap_or(&Duration::ZERO) + *delay.get(&b).unwrap_or(&Duration::ZERO)
    }

    fn cut(&self, member: ProcessId) {
        self.cut.lock().expect("lock").insert(member);
    }

    fn heal(&self, member: ProcessId) {
        self.cut.lock().expect("lock").remove(&member);
    }

    fn split(&self, side_a: &[u32]) {
        let mut sides = self.sides.lock().expect("lock");
        for &i in side_a {
            sides.insert(p(i), 1);
        }
    }

    fn slow(&self, member: ProcessId, by: Duration) {
        self.delay.lock().expect("lock").insert(member, by);
    }

    fn register(&self, group: ViewGroup<Link>) {
        self.groups.lock().expect("lock").insert(group.id(), group);
    }
}

/// One member's end of the switch.
struct Link {
    me: ProcessId,
    net: Arc<Switch>,
}

fn wire<T: serde::Serialize + serde::de::DeserializeOwned>(value: &T) -> T {
    let bytes = postcard::to_allocvec(value).expect("encodes with postcard");
    postcard::from_bytes(&bytes).expect("decodes with postcard")
}

impl ViewTransport for Link {
    async fn rpc(&self, to: ProcessId, req: ViewRpc) -> Result<ViewRpcReply, Unreachable> {
        let down = || Unreachable {
            member: to,
            reason: "cut off".into(),
        };
        let latency = self.net.latency(self.me, to);
        if !latency.is_zero() {
            tokio::time::sleep(latency).await;
        }
        if self.net.blocked(self.me, to) {
            return Err(down());
        }
        let group = self.net.groups.lock().expect("lock").get(&to).cloned();
        let group = group.ok_or_else(down)?;
        let reply = wire(&group.handle_rpc(self.me, wire(&req)).await);
        // a member cut off while the request was in flight: the reply is lost
        if self.net.blocked(self.me, to) {
            return Err(down());
        }
        Ok(reply)
    }
}

fn config() -> ViewConfig {
    ViewConfig {
        heartbeat: Duration::from_millis(50),
        election_min: Duration::from_millis(300),
        election_max: Duration::from_millis(600),
        write_timeout: Duration::from_secs(20),
        retry: Duration::from_millis(20),
        unreachable_backoff: Duration::from_millis(100),
    }
}

struct Cluster {
    net: Arc<Switch>,
    view0: View,
    groups: BTreeMap<ProcessId, ViewGroup<Link>>,
}

impl Cluster {
    /// `active.len()` members started from view 0, member `i` active iff `active[i]`.
    async fn start(active: &[bool], config: ViewConfig) -> Cluster {
        let n = active.len() as u32;
        let view0 = View::initial(
            (0..n).map(|i| (p(i), inc(i))).collect(),
            (0..n)
                .map(|i| (p(i), if active[i as usize] { InCs } else { OutCs }))
                .collect(),
        )
        .expect("view 0");
        let net = Arc::new(Switch::default());
        let mut groups = BTreeMap::new();
        for i in 0..n {
            let link = Link {
                me: p(i),
                net: net.clone(),
            };
            let group = ViewGroup::start(p(i), view0.clone(), link, config)
                .await
                .expect("the group starts");
            net.register(group.clone());
            groups.insert(p(i), group);
        }
        Cluster { net, view0, groups }
    }

    fn g(&self, i: u32) -> &ViewGroup<Link> {
        &self.groups[&p(i)]
    }

    async fn shutdown(&self) {
        for g in self.groups.values() {
            g.shutdown().await;
        }
    }
}

/// Runs a test body under the hang guard.
async fn guarded<F: Future<Output = ()>>(name: &str, body: F) {
    if tokio::time::timeout(GUARD, body).await.is_err() {
        panic!("{name}: did not finish within {GUARD:?}");
    }
}

/// Waits until member `g`'s state satisfies `cond`; panics naming `what` after [`WAIT`].
async fn until(g: &ViewGroup<Link>, what: &str, cond: impl Fn(&ViewState) -> bool) -> ViewState {
    let mut rx = g.watch();
    let wait = async {
        loop {
            {
                let state = rx.borrow_and_update();
                if cond(&state) {
                    return state.clone();
                }
            }
            if rx.changed().await.is_err() {
                panic!("{}: the view log stopped while waiting for {what}", g.id());
            }
        }
    };
    match tokio::time::timeout(WAIT, wait).await {
        Ok(state) => state,
        Err(_) => panic!(
            "{}: {what} did not happen within {WAIT:?}; state {:?}",
            g.id(),
            g.state()
        ),
    }
}

/// Waits until `cond` holds, polling; panics naming `what` after [`WAIT`].
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let wait = async {
        while !cond() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(WAIT, wait).await.is_err() {
        panic!("{what} did not happen within {WAIT:?}");
    }
}

/// Waits until member `g` installed view `number`, and returns it.
async fn installed(g: &ViewGroup<Link>, number: u64) -> View {
    let what = format!("the install of view {number}");
    until(g, &what, |s| s.view.number >= number).await.view
}

/// Waits until member `g` applied a pending change to view `next`.
async fn pending(g: &ViewGroup<Link>, next: u64) {
    let what = format!("a pending change to view {next}");
    until(g, &what, |s| {
        s.pending.as_ref().is_some_and(|x| x.next == next)
    })
    .await;
}

/// Member `g` reports `state` for view 1 once its own copy of the log shows the change
/// evicting `evicts`: a report names the round of the change the member knows, and one made
/// before the change grew is refused as outdated. Requires the report recorded, or the view
/// installed by it (a write retried after its first try committed is refused as a
/// duplicate: already reported, or no change pending once that first try installed it; the
/// callers check the installed view).
async fn report_for(g: &ViewGroup<Link>, evicts: &[u32], state: CsState) {
    let want = ids(evicts);
    until(g, "the change it reports for", |s| {
        s.pending.as_ref().is_some_and(|x| x.change.evict == want)
    })
    .await;
    let a = g.report(1, state, 0).await;
    assert!(
        matches!(
            a,
            Ok(Applied::Recorded { .. }
                | Applied::Installed(_)
                | Applied::Ignored(
                    lkcs::net::view::Refusal::AlreadyReported(_)
                        | lkcs::net::view::Refusal::NoChangePending
                ))
        ),
        "{}: its report: {a:?}",
        g.id()
    );
}

/// A proposal that was committed: opened or extended the change (or, if the write was
/// retried after its first try committed, the duplicate's refusal).
fn took(a: &Result<Applied, ViewError>) -> bool {
    matches!(
        a,
        Ok(Applied::Opened { .. })
            | Ok(Applied::Extended { .. })
            | Ok(Applied::Ignored(lkcs::net::view::Refusal::AlreadyInChange(
                _
            )))
    )
}

fn ids(members: &[u32]) -> BTreeSet<ProcessId> {
    members.iter().map(|&i| p(i)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_members_evict_one_cut_off() {
    guarded("three_members_evict_one_cut_off", async {
        let c = Cluster::start(&[true, false, false], config()).await;
        c.net.cut(p(2));
        let a = c.g(0).propose(evict(2)).await;
        assert!(took(&a), "evict 2: {a:?}");
        pending(c.g(1), 1).await;
        c.g(0).report(1, InCs, 0).await.expect("0 reports");
        c.g(1).report(1, OutCs, 0).await.expect("1 reports");
        let expected = View {
            number: 1,
            members: [(p(0), inc(0)), (p(1), inc(1))].into(),
            start: [(p(0), InCs), (p(1), OutCs)].into(),
        };
        for i in [0, 1] {
            assert_eq!(installed(c.g(i), 1).await, expected, "view 1 at member {i}");
        }
        // the Raft voters follow the view; the evicted member does not block the majority
        for i in [0, 1] {
            let g = c.g(i);
            eventually(&format!("member {i}'s voters becoming {{0, 1}}"), || {
                g.voters() == ids(&[0, 1])
            })
            .await;
        }
        // member 2 saw none of it
        assert_eq!(c.g(2).state().view.number, 0);
        assert_eq!(c.g(2).state().pending, None);
        c.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn five_members_a_second_crash_extends_the_change() {
    guarded("five_members_a_second_crash_extends_the_change", async {
        let c = Cluster::start(&[true, true, false, false, true], config()).await;
        c.net.cut(p(3));
        let a = c.g(0).propose(evict(3)).await;
        assert!(took(&a), "evict 3: {a:?}");
        pending(c.g(2), 1).await;
        c.g(0).report(1, InCs, 0).await.expect("0 reports");
        // a second member goes while view 1 is pending
        c.net.cut(p(4));
        let a = c.g(1).propose(evict(4)).await;
        assert!(
            matches!(a, Ok(Applied::Extended { next: 1, .. })) || took(&a),
            "evict 4: {a:?}"
        );
        let s = until(c.g(0), "the extended change", |s| {
            s.pending
                .as_ref()
                .is_some_and(|x| x.change.evict == ids(&[3, 4]))
        })
        .await;
        // the extension cleared 0's report: 0 reports again (its state is frozen)
        assert_eq!(s.awaiting(), ids(&[0, 1, 2]));
        report_for(c.g(0), &[3, 4], InCs).await;
        report_for(c.g(1), &[3, 4], OutCs).await;
        report_for(c.g(2), &[3, 4], InCs).await;
        let expected = View {
            number: 1,
            members: [(p(0), inc(0)), (p(1), inc(1)), (p(2), inc(2))].into(),
            start: [(p(0), InCs), (p(1), OutCs), (p(2), InCs)].into(),
        };
        for i in [0, 1, 2] {
            assert_eq!(installed(c.g(i), 1).await, expected, "view 1 at member {i}");
        }
        let g = c.g(0);
        eventually("the voters becoming {0, 1, 2}", || {
            g.voters() == ids(&[0, 1, 2])
        })
        .await;
        c.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_member_that_reports_in_time_is_kept() {
    guarded("a_slow_member_that_reports_in_time_is_kept", async {
        let c = Cluster::start(&[false, false, true], config()).await;
        c.net.cut(p(2));
        let a = c.g(0).propose(evict(2)).await;
        assert!(took(&a), "evict 2: {a:?}");
        c.g(0).report(1, OutCs, 0).await.expect("0 reports");
        // member 2 was only slow: it comes back (still slow) and reports before member 1
        c.net.slow(p(2), Duration::from_millis(15));
        c.net.heal(p(2));
        pending(c.g(2), 1).await;
        c.g(2).report(1, InCs, 0).await.expect("2 reports");
        until(c.g(1), "member 2's report", |s| {
            s.pending
                .as_ref()
                .is_some_and(|x| x.reports.contains_key(&p(2)))
        })
        .await;
        c.g(1).report(1, OutCs, 0).await.expect("1 reports");
        let expected = View {
            number: 1,
            members: [(p(0), inc(0)), (p(1), inc(1)), (p(2), inc(2))].into(),
            start: [(p(0), OutCs), (p(1), OutCs), (p(2), InCs)].into(),
        };
        for i in [0, 1, 2] {
            assert_eq!(installed(c.g(i), 1).await, expected, "view 1 at member {i}");
        }
        assert_eq!(c.g(0).voters(), ids(&[0, 1, 2]));
        c.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_member_rejoins_inactive() {
    guarded("an_evicted_member_rejoins_inactive", async {
        let mut c = Cluster::start(&[false, true, true], config()).await;
        c.net.cut(p(2));
        let a = c.g(1).propose(evict(2)).await;
        assert!(took(&a), "evict 2: {a:?}");
        c.g(0).report(1, OutCs, 0).await.expect("0 reports");
        c.g(1).report(1, InCs, 0).await.expect("1 reports");
        installed(c.g(0), 1).await;
        let g0 = c.g(0).clone();
        eventually("the voters becoming {0, 1}", || g0.voters() == ids(&[0, 1])).await;

        // member 2 restarts: its old process is gone, a new incarnation joins
        c.g(2).shutdown().await;
        c.net.heal(p(2));
        let link = Link {
            me: p(2),
            net: c.net.clone(),
        };
        let new2 = ViewGroup::join(p(2), 777, c.view0.clone(), link, config())
            .await
            .expect("the new incarnation starts");
        c.net.register(new2.clone());
        c.groups.insert(p(2), new2.clone());
        let a = c
            .g(0)
            .propose(Proposal::Rejoin {
                member: p(2),
                incarnation: 777,
            })
            .await;
        assert!(took(&a), "rejoin 2: {a:?}");
        c.g(0).report(2, OutCs, 0).await.expect("0 reports");
        c.g(1).report(2, InCs, 0).await.expect("1 reports");
        let expected = View {
            number: 2,
            members: [(p(0), inc(0)), (p(1), inc(1)), (p(2), 777)].into(),
            start: [(p(0), OutCs), (p(1), InCs), (p(2), OutCs)].into(),
        };
        for i in [0, 1, 2] {
            assert_eq!(installed(c.g(i), 2).await, expected, "view 2 at member {i}");
        }
        eventually("the voters becoming {0, 1, 2}", || {
            g0.voters() == ids(&[0, 1, 2])
        })
        .await;
        c.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_minority_commits_nothing_the_majority_evicts_it() {
    guarded("a_minority_commits_nothing_the_majority_evicts_it", async {
        let short = ViewConfig {
            write_timeout: Duration::from_secs(3),
            ..config()
        };
        let c = Cluster::start(&[false, true, false, true, false], short).await;
        c.net.split(&[3, 4]);
        // the 2 side proposes evicting the 3: a change the state machine would take (it
        // keeps a majority of five), which Raft cannot commit
        // four proposals at once, from both members of the minority: each waits out the
        // same timeout
        let (a0, a1, a2, b0) = tokio::join!(
            c.g(3).propose(evict(0)),
            c.g(3).propose(evict(1)),
            c.g(3).propose(evict(2)),
            c.g(4).propose(evict(0)),
        );
        for (who, victim, a) in [(3, 0, a0), (3, 1, a1), (3, 2, a2), (4, 0, b0)] {
            assert!(
                matches!(a, Err(ViewError::Timeout { .. })),
                "member {who} evicting {victim} from the minority: {a:?}"
            );
        }
        for i in [3, 4] {
            let s = c.g(i).state();
            assert_eq!(
                (s.view.number, &s.pending),
                (0, &None),
                "member {i} applied a change in a minority"
            );
        }
        // the 3 side evicts the 2
        let a = c.g(0).propose(evict(3)).await;
        assert!(took(&a), "evict 3: {a:?}");
        let a = c.g(1).propose(evict(4)).await;
        assert!(took(&a), "evict 4: {a:?}");
        for (i, s) in [(0, OutCs), (1, InCs), (2, OutCs)] {
            report_for(c.g(i), &[3, 4], s).await;
        }
        let expected = View {
            number: 1,
            members: [(p(0), inc(0)), (p(1), inc(1)), (p(2), inc(2))].into(),
            start: [(p(0), OutCs), (p(1), InCs), (p(2), OutCs)].into(),
        };
        for i in [0, 1, 2] {
            assert_eq!(installed(c.g(i), 1).await, expected, "view 1 at member {i}");
        }
        // and the minority still has nothing
        for i in [3, 4] {
            let s = c.g(i).state();
            assert_eq!((s.view.number, &s.pending), (0, &None), "member {i}");
        }
        c.shutdown().await;
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_member_installs_the_same_views_at_the_same_index() {
    guarded(
        "every_member_installs_the_same_views_at_the_same_index",
        async {
            let c = Cluster::start(&[true, false, true, false, false], config()).await;
            let mut events: Vec<_> = (0..3).map(|i| c.g(i).subscribe()).collect();
            c.net.cut(p(4));
            assert!(took(&c.g(2).propose(evict(4)).await));
            for (i, s) in [(0, InCs), (1, OutCs), (2, InCs), (3, OutCs)] {
                c.g(i).report(1, s, 0).await.expect("reports for view 1");
            }
            installed(c.g(3), 1).await;
            // member 3 leaves: it need not report
            assert!(took(&c.g(3).propose(Proposal::Leave(p(3))).await));
            for (i, s) in [(0, OutCs), (1, OutCs), (2, InCs)] {
                c.g(i).report(2, s, 0).await.expect("reports for view 2");
            }
            let expected = View {
                number: 2,
                members: [(p(0), inc(0)), (p(1), inc(1)), (p(2), inc(2))].into(),
                start: [(p(0), OutCs), (p(1), OutCs), (p(2), InCs)].into(),
            };
            for i in [0, 1, 2] {
                assert_eq!(installed(c.g(i), 2).await, expected, "view 2 at member {i}");
            }
            // every member applied the same commands with the same outcomes at the same indices
            let mut logs = Vec::new();
            for rx in &mut events {
                let mut log = Vec::new();
                while let Ok(e) = rx.try_recv() {
                    log.push(e);
                }
                logs.push(log);
            }
            let installs: Vec<_> = logs[0]
                .iter()
                .filter(|e| matches!(e.applied, Applied::Installed(_)))
                .map(|e| e.applied.clone())
                .collect();
            assert_eq!(installs.len(), 2, "two installs: {installs:?}");
            assert_eq!(installs[1], Applied::Installed(expected));
            for (i, log) in logs.iter().enumerate().skip(1) {
                assert_eq!(
                    log, &logs[0],
                    "member {i}'s applied log differs from member 0's"
                );
            }
            c.shutdown().await;
        },
    )
    .await;
}

/// A group on a folder claims to be its member's Raft node ([`ViewGroup::resumed`]) only
/// when the folder holds state that was established as the member's: a process on an empty
/// folder, or on one whose Raft node the others never counted (a process on an emptied
/// folder may have initialized it), is a new Raft node. Joining on a folder clears it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_folder_resumes_its_raft_node_only_once_established() {
    guarded(
        "a_folder_resumes_its_raft_node_only_once_established",
        async {
            let dir =
                std::env::temp_dir().join(format!("lkcs-view-established-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&dir);
            let storage = lkcs::net::view::Storage::Dir(dir.clone());
            let view0 =
                View::initial([(p(0), inc(0))].into(), [(p(0), OutCs)].into()).expect("view 0");
            let net = Arc::new(Switch::default());
            let link = || Link {
                me: p(0),
                net: net.clone(),
            };
            let start = || ViewGroup::start_in(p(0), view0.clone(), link(), config(), &storage);
            let g = start().await.expect("starts on an empty folder");
            assert!(!g.resumed() && !g.established(), "an empty folder resumed");
            eventually("a leader", || g.leader() == Some(p(0))).await;
            g.shutdown().await;
            assert!(dir.join("raft-log").exists(), "the log was written through");

            let g = start().await.expect("starts on a folder never established");
            assert!(
                !g.resumed(),
                "a Raft node the others never counted claimed to be the member's"
            );
            g.establish().await.expect("the mark is written");
            assert!(g.established() && dir.join("raft-node").exists());
            g.shutdown().await;

            let g = start().await.expect("starts on an established folder");
            assert!(g.resumed(), "an established Raft node was not resumed");
            g.shutdown().await;

            let joined = ViewGroup::join_in(p(0), 777, view0.clone(), link(), config(), &storage)
                .await
                .expect("joins on the folder");
            assert!(
                !joined.resumed() && !joined.established(),
                "a joining node kept the mark"
            );
            assert!(
                !dir.join("raft-node").exists(),
                "joining left the old node's mark on the folder"
            );
            joined.shutdown().await;
            let g = start().await.expect("starts on the joined folder");
            assert!(
                !g.resumed(),
                "a learner never established claimed to be the member's"
            );
            g.shutdown().await;
            let _ = std::fs::remove_dir_all(&dir);
        },
    )
    .await;
}
