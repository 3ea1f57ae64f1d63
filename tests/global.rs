//! MUTIN(l), kmex and (l,k)-GCS (Kamei & Kakugawa 2019) through the simulator, with Maekawa as
//! the mutual-exclusion object `mx`: safety and liveness under concurrency on both coteries
//! for n from 3 to 64 with seeded random bounds, starts and delays; the best case against
//! Lemmas 3 and 4 (exact message counts, waiting times ≤ 7 and ≤ 9); O(|Q|) message
//! complexity over n = 16, 64, 256; and the deviation from the printed pseudo-code.

mod common;

use common::*;
use lkcs::{
    algo::lmutin::{lmutex_system, LmutinRules},
    algo::maekawa::Maekawa,
    algo::mutin::{gcs_system, global_instance, kmex_system, quorums_of, Mutin, MutinRules},
    cs::{CsObject, CsState},
    quorum::Coterie,
    sim::SimConfig,
    Instance, ProcessId, Topology,
};
#[cfg(feature = "check")]
use lkcs::{
    check,
    check::{CheckConfig, Verdict},
};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One Maekawa system on `coterie`, everyone out of its CS.
fn maekawa(coterie: &Coterie) -> Vec<Maekawa> {
    Maekawa::system(coterie, &vec![CsState::OutCs; coterie.len()])
        .expect("Maekawa on a valid coterie")
        .1
}

/// A seeded random configuration with between `lo` and `hi` processes in the CS.
fn random_initial(n: usize, lo: usize, hi: usize, seed: u64) -> Vec<CsState> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0x5eed);
    let m = rng.random_range(lo..=hi);
    let mut ids: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        ids.swap(i, rng.random_range(0..=i));
    }
    let mut s = vec![CsState::OutCs; n];
    for &i in &ids[..m] {
        s[i] = CsState::InCs;
    }
    s
}

fn mutin(
    c: &Coterie,
    l: usize,
    init: &[CsState],
    r: MutinRules,
) -> (Instance, Vec<impl CsObject + use<>>) {
    let t = Topology::complete(c.len()).unwrap();
    Mutin::system(&t, &quorums_of(c), l, init, maekawa(c), r).expect("valid mutin")
}

fn kmex(c: &Coterie, k: usize, init: &[CsState]) -> (Instance, Vec<impl CsObject + use<>>) {
    let t = Topology::complete(c.len()).unwrap();
    kmex_system(
        &t,
        &quorums_of(c),
        k,
        init,
        maekawa(c),
        MutinRules::CORRECTED,
    )
    .expect("valid kmex")
}

fn gcs(
    c: &Coterie,
    l: usize,
    k: usize,
    init: &[CsState],
) -> (Instance, Vec<impl CsObject + use<>>) {
    let t = Topology::complete(c.len()).unwrap();
    let mx = (maekawa(c), maekawa(c));
    gcs_system(&t, &quorums_of(c), (l, k), init, mx, MutinRules::CORRECTED).expect("valid gcs")
}

/// Sizes swept under concurrency: small, square, prime, odd and even, up to 64.
const SIZES: [usize; 10] = [3, 4, 5, 7, 9, 12, 16, 23, 36, 64];

fn coteries(n: usize) -> [Coterie; 2] {
    [Coterie::majority(n).unwrap(), Coterie::grid(n).unwrap()]
}

/// Fewer seeds for the larger systems (each run costs O(n · |Q|) messages per pair).
fn seeds(n: usize) -> u64 {
    if n <= 16 {
        20
    } else {
        5
    }
}

fn concurrent_cfg(seed: u64, n: usize) -> SimConfig {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    SimConfig {
        delay: lkcs::sim::Delay::Uniform {
            min: 1,
            max: rng.random_range(2..=15),
        },
        think_max: rng.random_range(0..=12),
        ..concurrent(seed, if n <= 16 { 3 } else { 2 })
    }
}

#[test]
fn mutin_is_safe_and_live_under_concurrency() {
    for n in SIZES {
        for c in coteries(n) {
            for seed in 0..seeds(n) {
                let mut rng = ChaCha8Rng::seed_from_u64(seed * 7919 + n as u64);
                let l = rng.random_range(0..n);
                let init = random_initial(n, l, n, seed);
                let (inst, procs) = mutin(&c, l, &init, MutinRules::CORRECTED);
                let what = format!("mutin n={n} {} l={l} seed={seed}", c.name());
                run_ok(&what, &inst, procs, &concurrent_cfg(seed, n));
            }
        }
    }
}

#[test]
fn kmex_is_safe_and_live_under_concurrency() {
    for n in SIZES {
        for c in coteries(n) {
            for seed in 0..seeds(n) {
                let mut rng = ChaCha8Rng::seed_from_u64(seed * 104_729 + n as u64);
                let k = rng.random_range(1..=n);
                let init = random_initial(n, 0, k, seed);
                let (inst, procs) = kmex(&c, k, &init);
                let what = format!("kmex n={n} {} k={k} seed={seed}", c.name());
                run_ok(&what, &inst, procs, &concurrent_cfg(seed, n));
            }
        }
    }
}

#[test]
fn gcs_is_safe_and_live_under_concurrency() {
    for n in SIZES {
        for c in coteries(n) {
            for seed in 0..seeds(n) {
                let mut rng = ChaCha8Rng::seed_from_u64(seed * 15_485_863 + n as u64);
                let k = rng.random_range(1..=n);
                let l = rng.random_range(0..k);
                let init = random_initial(n, l, k, seed);
                let (inst, procs) = gcs(&c, l, k, &init);
                let what = format!("gcs n={n} {} l={l} k={k} seed={seed}", c.name());
                run_ok(&what, &inst, procs, &concurrent_cfg(seed, n));
            }
        }
    }
}

/// The tightest bounds: l = k−1 leaves one move at a time; l = 0 and k = n are the
/// degenerate ends.
#[test]
fn gcs_with_extreme_bounds_is_safe_and_live() {
    for n in [3, 6, 10] {
        for c in coteries(n) {
            for (l, k) in [(n - 2, n - 1), (0, 1), (0, n), (n - 1, n), (1, 2)] {
                for seed in 0..4 {
                    let init = random_initial(n, l, k, seed);
                    let (inst, procs) = gcs(&c, l, k, &init);
                    let what = format!("gcs n={n} {} l={l} k={k} seed={seed}", c.name());
                    run_ok(&what, &inst, procs, &concurrent_cfg(seed, n));
                }
            }
        }
    }
}

/// Lemma 3 and 4, best case (sequential workload, unit delays): a MUTIN(l) pair of P_i costs
/// exactly 8|Q_i| messages (Maekawa's Request, Locked, Release and MUTIN's Query, Response1,
/// Acquire, Ack, Release, one each per member of Q_i) and its Exit waits 6 ≤ 7 time units;
/// kmex the same with Entry and Exit swapped; a GCS pair costs both, 16|Q_i|, and waits
/// 6 ≤ 9 each way.
#[test]
fn sequential_best_case_matches_lemmas_3_and_4() {
    for n in [3, 8, 16, 25, 31] {
        for c in coteries(n) {
            let q = |p: ProcessId| c.quorum(p).len() as u64;
            let init = random_initial(n, n / 3 + 1, n - 1, n as u64);
            let (inst, procs) = mutin(&c, n / 3, &init, MutinRules::CORRECTED);
            let r = run_ok("mutin", &inst, procs, &sequential(2));
            assert!(r.pairs.iter().all(|p| p.messages == 8 * q(p.process)));
            assert!(r.waiting_time.exit_max <= 7.0 && r.waiting_time.entry_max == 0.0);

            let (inst, procs) = kmex(&c, n / 2 + 1, &random_initial(n, 0, n / 2 + 1, 1));
            let r = run_ok("kmex", &inst, procs, &sequential(2));
            assert!(r.pairs.iter().all(|p| p.messages == 8 * q(p.process)));
            assert!(r.waiting_time.entry_max <= 7.0 && r.waiting_time.exit_max == 0.0);

            let (l, k) = (n / 4, n - n / 4);
            let (inst, procs) = gcs(&c, l, k, &random_initial(n, l, k, 2));
            let r = run_ok("gcs", &inst, procs, &sequential(2));
            assert_eq!(r.pairs.len(), 2 * n);
            assert!(r.pairs.iter().all(|p| p.messages == 16 * q(p.process)));
            assert!(r.waiting_time.exit_max <= 9.0 && r.waiting_time.entry_max <= 9.0);
            assert!(r.waiting_time.exit_max > 0.0 && r.waiting_time.entry_max > 0.0);
        }
    }
}

/// O(|Q|) (Lemma 3, Theorem 4): on both coteries, GCS messages per pair divided by |Q| at
/// n = 64 and 256 stay within 1.3× the ratio at n = 16, both in the best case and under
/// concurrency (mean over pairs), while n grows 16-fold; the best case keeps the waiting
/// times of Lemma 4 / Theorem 4 at every size (MUTIN(l) exit ≤ 7, kmex entry ≤ 7, GCS ≤ 9
/// each way).
#[test]
fn gcs_message_complexity_is_linear_in_the_quorum_size() {
    let ratio = |c: &Coterie, concurrent_run: bool| -> f64 {
        let n = c.len();
        let (l, k) = (n / 8, n - n / 8);
        let init = random_initial(n, l, k, 3);
        let (inst, procs) = gcs(c, l, k, &init);
        let cfg = if concurrent_run {
            SimConfig {
                delay: lkcs::sim::Delay::Uniform { min: 1, max: 10 },
                ..concurrent(5, 1)
            }
        } else {
            sequential(1)
        };
        let what = format!("gcs {} n={n}", c.name());
        let r = run_ok(&what, &inst, procs, &cfg);
        if !concurrent_run {
            let w = &r.waiting_time;
            assert!(w.exit_max <= 9.0 && w.entry_max <= 9.0, "{what}: {w:?}");
        }
        r.messages_per_pair.mean / c.max_quorum_size() as f64
    };
    for make in [Coterie::grid, Coterie::majority] {
        let coteries: Vec<Coterie> = [16, 64, 256].map(|n| make(n).unwrap()).into();
        for concurrent_run in [false, true] {
            let ratios: Vec<f64> = coteries.iter().map(|c| ratio(c, concurrent_run)).collect();
            eprintln!(
                "{} concurrent={concurrent_run}: messages per pair / |Q| = {ratios:?}",
                coteries[0].name()
            );
            for r in &ratios[1..] {
                assert!(*r <= 1.3 * ratios[0], "{ratios:?}");
            }
        }
        // MUTIN(l) and kmex alone, best case, at the same sizes
        for c in &coteries {
            let n = c.len();
            let (inst, procs) = mutin(
                c,
                n / 4,
                &random_initial(n, n / 4 + 1, n, 4),
                MutinRules::CORRECTED,
            );
            let w = run_ok("mutin", &inst, procs, &sequential(1)).waiting_time;
            assert!(
                w.exit_max <= 7.0 && w.entry_max == 0.0,
                "mutin n={n}: {w:?}"
            );
            let (inst, procs) = kmex(c, 3 * n / 4, &random_initial(n, 0, 3 * n / 4 - 1, 4));
            let w = run_ok("kmex", &inst, procs, &sequential(1)).waiting_time;
            assert!(w.entry_max <= 7.0 && w.exit_max == 0.0, "kmex n={n}: {w:?}");
        }
    }
}

/// With MUTIN(l) over LMUTEX (k = 1) as the mutual exclusion — any mutual-exclusion object
/// works — the composition is still safe and live; only the mx traffic grows to O(n).
#[test]
fn any_mutual_exclusion_object_works_as_mx() {
    for n in [4, 9] {
        let t = Topology::complete(n).unwrap();
        let c = Coterie::grid(n).unwrap();
        let mx = || {
            lmutex_system(
                &t,
                &vec![1; n],
                &vec![CsState::OutCs; n],
                LmutinRules::CORRECTED,
            )
            .unwrap()
            .1
        };
        for seed in 0..6 {
            let init = random_initial(n, 1, n - 1, seed);
            let (inst, procs) = gcs_system(
                &t,
                &quorums_of(&c),
                (1, n - 1),
                &init,
                (mx(), mx()),
                MutinRules::CORRECTED,
            )
            .unwrap();
            run_ok("gcs over lmutex", &inst, procs, &concurrent_cfg(seed, n));
        }
    }
}

/// Bad input is a typed error with one problem per issue.
#[test]
fn builders_report_every_problem() {
    let c = Coterie::majority(5).unwrap();
    let t = Topology::complete(5).unwrap();
    let ring = Topology::ring(5).unwrap();
    let q = quorums_of(&c);
    let init = vec![CsState::InCs; 5];
    let e = global_instance(&ring, 3, 2, "x").unwrap_err();
    assert_eq!(e.problems.len(), 2, "{e}");
    let e = Mutin::system(&t, &q, 5, &init, maekawa(&c), MutinRules::CORRECTED).unwrap_err();
    assert_eq!(e.problems.len(), 1, "{e}");
    let e = kmex_system(&t, &q, 2, &init, maekawa(&c), MutinRules::CORRECTED).unwrap_err();
    assert!(e.to_string().contains("unsafe"), "{e}");
    let disjoint = vec![
        vec![ProcessId(0)],
        vec![ProcessId(1)],
        q[2].clone(),
        q[3].clone(),
        q[4].clone(),
    ];
    let e = Mutin::system(&t, &disjoint, 1, &init, maekawa(&c), MutinRules::CORRECTED).unwrap_err();
    assert!(e.to_string().contains("do not intersect"), "{e}");
    let mut busy = maekawa(&c);
    busy.swap(0, 1);
    let e = Mutin::system(&t, &q, 1, &init, busy, MutinRules::CORRECTED).unwrap_err();
    assert_eq!(e.problems.len(), 2, "{e}");
}

/// Deviation 1 (see `src/algo/mutin.rs`): the printed Release handler sends one Response2
/// and disarms. On three processes with l = 2 and the intersecting quorums Q0 = {0,1},
/// Q1 = {0,1,2}, Q2 = {0,2} (pairwise intersecting; minimality is irrelevant to MUTIN), a
/// Release that P2 already counted through another member reaches P0 after P2's Query and
/// uses the Response2 up; the Release of the process that would make l+1 then goes
/// unforwarded and P2 waits forever while P0 and P1 wait for `mx` behind it. The checker
/// finds that deadlock (depth-first, within 200 K states; about 27 K in practice) and finds
/// no violation for the corrected rule within the same bound (a bounded check: the whole space
/// of two pairs is larger). Uniform random delays never produce it: the stale Release must be
/// slower than a chain of about eight other messages.
#[cfg(feature = "check")]
#[test]
fn printed_one_shot_response2_deadlocks() {
    let p = |v: &[u32]| v.iter().map(|&i| ProcessId(i)).collect::<Vec<_>>();
    let quorums = vec![p(&[0, 1]), p(&[0, 1, 2]), p(&[0, 2])];
    let t = Topology::complete(3).unwrap();
    let init = vec![CsState::InCs; 3];
    // the inner LMUTEX waits as the paper's does (hold-and-wait): deviation 5's set-aside
    // messages make the space too large for this bound, and the rule checked here is MUTIN's
    let mx_rules = LmutinRules {
        hold_and_wait: true,
        ..LmutinRules::CORRECTED
    };
    let mx = lmutex_system(&t, &[1; 3], &[CsState::OutCs; 3], mx_rules)
        .unwrap()
        .1;
    let cfg = CheckConfig {
        pairs: 2,
        max_states: Some(200_000),
        ..CheckConfig::default()
    };
    let (inst, procs) =
        Mutin::system(&t, &quorums, 2, &init, mx.clone(), MutinRules::PRINTED).unwrap();
    let r = check::check(&inst, procs, &cfg);
    assert_eq!(
        r.verdict,
        Verdict::Violated {
            property: "no deadlock".into()
        },
        "{:?}",
        r.verdict
    );
    assert!(
        r.counterexample.iter().any(|l| l.contains("Response2")),
        "{}",
        r.counterexample.join("\n")
    );
    let (inst, procs) = Mutin::system(&t, &quorums, 2, &init, mx, MutinRules::CORRECTED).unwrap();
    let r = check::check(&inst, procs, &cfg);
    assert!(r.ok(), "{:?}\n{}", r.verdict, r.counterexample.join("\n"));
}

/// (l,k)-GCS with withdrawals ([`CsObject::withdraw`]): seeded random schedules over FIFO
/// links in which clients start sequences and withdraw them at random. After every event
/// both bounds hold, every object's invariants hold, and a withdrawn process never shows the
/// state its sequence was heading to; once the network is quiet, no undo and no second half
/// is left running (neither waits on a bound), and every withdrawn process that is no longer
/// pending is back where its sequence started.
#[test]
fn gcs_withdrawals_never_change_the_state_and_keep_both_bounds() {
    use lkcs::{algo::mutin::MutinGcs, cs::GcsStage};
    type G = MutinGcs<Maekawa>;
    let mut withdrawals = 0usize;
    for seed in 0..300u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = rng.random_range(3..=6);
        let l = rng.random_range(0..n);
        let k = rng.random_range(l + 1..=n);
        let initial = random_initial(n, l, k, seed);
        let coterie = if seed.is_multiple_of(2) {
            Coterie::grid(n)
        } else {
            Coterie::majority(n)
        }
        .expect("coterie");
        let (inst, mut procs) = gcs_system(
            &Topology::complete(n).expect("complete"),
            &quorums_of(&coterie),
            (l, k),
            &initial,
            (maekawa(&coterie), maekawa(&coterie)),
            MutinRules::CORRECTED,
        )
        .expect("gcs");
        let first =
            |p: &G, already: bool| Some(matches!(p.stage(), Some((_, GcsStage::First))) || already);
        let what = format!("seed {seed}");
        let (taken, _) = withdrawal_schedule(&what, &inst, &mut procs, &mut rng, 400, first);
        withdrawals += taken;
        for (i, p) in procs.iter().enumerate() {
            assert!(
                !matches!(p.stage(), Some((_, GcsStage::Second | GcsStage::Undoing))),
                "seed {seed}: P{i} is quiet in {:?}, which waits on no bound",
                p.stage()
            );
        }
    }
    assert!(withdrawals > 100, "only {withdrawals} withdrawals drawn");
}

/// Drives `procs` through a seeded random schedule over FIFO links (deliver a message, or
/// start the next sequence of an idle process), calling `check` after every event.
fn random_schedule<A: CsObject>(
    procs: &mut [A],
    rng: &mut ChaCha8Rng,
    steps: usize,
    mut check: impl FnMut(&[A]),
) {
    use lkcs::cs::Outbox;
    use std::collections::VecDeque;
    let n = procs.len();
    let mut links: Vec<VecDeque<A::Msg>> = (0..n * n).map(|_| VecDeque::new()).collect();
    let route = |from: usize, out: &mut Outbox<A::Msg>, links: &mut Vec<VecDeque<A::Msg>>| {
        for (to, m) in out.drain() {
            links[from * n + to.index()].push_back(m);
        }
    };
    for _ in 0..steps {
        let busy: Vec<usize> = (0..n * n).filter(|&i| !links[i].is_empty()).collect();
        let p = rng.random_range(0..n);
        let mut out = Outbox::new();
        if !busy.is_empty() && rng.random_range(0..100) < 70 {
            let i = busy[rng.random_range(0..busy.len())];
            let m = links[i].pop_front().expect("busy");
            procs[i % n].on_message(ProcessId::from(i / n), m, &mut out);
            route(i % n, &mut out, &mut links);
        } else if procs[p].pending().is_none() {
            let seq = lkcs::cs::Sequence::leaving(procs[p].state());
            procs[p].begin(seq, &mut out).expect("calling convention");
            route(p, &mut out, &mut links);
        }
        check(procs);
    }
}

/// Whom a pending sequence waits on ([`CsObject::awaiting`]), which a cluster node uses to
/// fail only the calls that wait on an unreachable peer: for MUTIN, (l,k)-GCS and CDC/DDC,
/// after every event of random schedules, a pending sequence names someone (CDC's controller
/// excepted, which waits on an unrecorded holder), only peers its quorums or its controller
/// can answer from, and an idle process names nobody.
#[test]
fn a_pending_sequence_names_only_peers_it_can_wait_on() {
    use lkcs::algo::migrating::{Cdc, MigratingRules, MigrationCondition};
    for seed in 0..60u64 {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let n = rng.random_range(3..=7);
        let l = rng.random_range(0..n);
        let k = rng.random_range(l + 1..=n);
        let coterie = Coterie::grid(n).expect("grid");
        let quorums = quorums_of(&coterie);
        let allowed = |p: usize| -> std::collections::BTreeSet<ProcessId> {
            quorums[p].iter().copied().collect()
        };
        let names = |who: &str, p: usize, pending: bool, awaiting: Vec<ProcessId>| {
            if !pending {
                assert!(
                    awaiting.is_empty(),
                    "seed {seed}: idle {who} P{p} names {awaiting:?}"
                );
                return;
            }
            assert!(
                !awaiting.is_empty(),
                "seed {seed}: pending {who} P{p} names nobody"
            );
            let outside: Vec<_> = awaiting
                .iter()
                .filter(|q| !allowed(p).contains(q))
                .collect();
            assert!(
                outside.is_empty(),
                "seed {seed}: {who} P{p} names {outside:?}, outside its quorum"
            );
        };
        let initial = random_initial(n, l, k, seed);
        let (_, mut gcs) = gcs_system(
            &Topology::complete(n).expect("complete"),
            &quorums,
            (l, k),
            &initial,
            (maekawa(&coterie), maekawa(&coterie)),
            MutinRules::CORRECTED,
        )
        .expect("gcs");
        random_schedule(&mut gcs, &mut rng, 300, |procs| {
            for (p, g) in procs.iter().enumerate() {
                names("GCS", p, g.pending().is_some(), g.awaiting());
            }
        });
        let initial = random_initial(n, l, n, seed);
        let (_, mut mutin) = Mutin::system(
            &Topology::complete(n).expect("complete"),
            &quorums,
            l,
            &initial,
            maekawa(&coterie),
            MutinRules::CORRECTED,
        )
        .expect("mutin");
        random_schedule(&mut mutin, &mut rng, 300, |procs| {
            for (p, m) in procs.iter().enumerate() {
                names("MUTIN", p, m.pending().is_some(), m.awaiting());
            }
        });
        let mut cdc = Cdc::processes(
            n,
            MigrationCondition::Counter { maxreq: 2 },
            MigratingRules::CORRECTED,
        );
        random_schedule(&mut cdc, &mut rng, 300, |procs| {
            for (p, c) in procs.iter().enumerate() {
                let awaiting = c.awaiting();
                if c.pending().is_some() {
                    assert!(
                        awaiting.len() <= 1,
                        "seed {seed}: CDC P{p} names {awaiting:?}"
                    );
                    assert!(
                        !awaiting.contains(&ProcessId::from(p)),
                        "seed {seed}: CDC P{p} waits on itself"
                    );
                } else {
                    assert!(
                        awaiting.is_empty(),
                        "seed {seed}: idle CDC P{p} names {awaiting:?}"
                    );
                }
            }
        });
    }
}
