//! The design of docs/lkcs-liveness.md part 3 without messages: a centralised scheduler that
//! applies its rules to configurations, to test the rules before the protocol.
//!
//! Every process always wants to move (the concurrent workload with no think time); its
//! request's age is the step of its last move. Operating bounds (L_i, K_i) are those of
//! `Lkcs::build` with every able process leading (tightened by one within two hops of every
//! process that can lead), except in `trip` mode (below).
//! An arbiter j is **in reserve** while |CS_j| is outside [L_j, K_j]; its **owner** is the
//! process whose move took it out, until it is back. At each step, in age order (oldest
//! first), the first request that may move does:
//!
//! - a **normal** move: every arbiter of the mover's closed neighbourhood ends within
//!   [L_j, K_j] (an arbiter in reserve may come back);
//! - a **reserve** move (the sidetrack): every arbiter ends within [l_j, k_j], every arbiter
//!   in reserve within two hops of the mover is the mover's own (invariant R: one reserve user
//!   per ball, until restoration), and the mover is the oldest request of its two-hop ball
//!   or already owns a reserve.
//!
//! MODE chooses how restoration is helped: `plain` (not at all), `restore` (a normal move
//! that brings an arbiter in reserve back goes first, oldest first), `inherit` (as `restore`,
//! and such a restoring move may itself use reserves: priority inheritance).
//!
//! `trip` replaces ownership by the **round trip**: every side of a bound that a move can
//! break is tightened by one (L = l+1 where l > 0, K = k−1 where k < |N|+1), no leader, and
//! the start is within [L, K] everywhere (a local search); a reserve move by q starts q's round trip,
//! which touches every arbiter of N_q ∪ {q} until q's next move (its return) ends it. A
//! trip starts only for the oldest request of its ball and only where no other trip
//! touches; every other move must keep each arbiter within [l_j, k_j] and its count with the
//! touching trip undone within [L_j, K_j] (room is kept for the return), so the return is
//! always possible. The model asserts that invariant after every step. With the
//! environment variable `MODEL_WHY` set, the end of the run shows the oldest request's
//! arbiters and the owned reserves in its ball.
//!
//! ```sh
//! cargo build --release --example lkcs_model --example lkcs_liveness
//! target/release/examples/lkcs_liveness replay 9        # writes /tmp/lkcs-9.json
//! target/release/examples/lkcs_model torus:3x9 /tmp/lkcs-9.json 20000 restore
//! scripts/lkcs-model.sh 0 2000 inherit                  # the sweep's configurations 0-1,999
//! ```
//!
//! Prints the number of processes, whether `Lkcs::build` (default leader) accepts the
//! instance, the round trips started, the moves that left some count outside [L, K], the
//! fewest moves of a process, the worst completed wait and how long the oldest request has
//! waited at the end (in steps), or the step at which no request could move.

use lkcs::cs::CsObject;
use lkcs::{
    algo::lkcs::{Leaders, Lkcs, LkcsRules},
    cs::CsState,
    Topology,
};

/// A configuration with every count within `soft`, by a seeded min-conflicts local search of
/// at most `flips` flips; `None` if it finds none.
fn tight_start(
    closed: &[Vec<usize>],
    soft: &[(usize, usize)],
    flips: usize,
) -> Option<Vec<CsState>> {
    let n = closed.len();
    let mut members: Vec<Vec<usize>> = vec![Vec::new(); n];
    for (j, c) in closed.iter().enumerate() {
        for &q in c {
            members[q].push(j);
        }
    }
    let mut inside: Vec<bool> = (0..n).map(|i| i.is_multiple_of(2)).collect();
    let mut count: Vec<usize> = closed
        .iter()
        .map(|c| c.iter().filter(|&&q| inside[q]).count())
        .collect();
    let off = |c: usize, (lo, hi): (usize, usize)| lo.saturating_sub(c) + c.saturating_sub(hi);
    let mut rng = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    for _ in 0..flips {
        let broken: Vec<usize> = (0..n).filter(|&j| off(count[j], soft[j]) > 0).collect();
        if broken.is_empty() {
            return Some(
                inside
                    .iter()
                    .map(|&b| if b { CsState::InCs } else { CsState::OutCs })
                    .collect(),
            );
        }
        let j = broken[(next() % broken.len() as u64) as usize];
        // the flip in N_j that lowers the total distance to the bounds most (ties at random,
        // and now and then a random one)
        let gain = |q: usize, count: &[usize]| -> isize {
            members[q]
                .iter()
                .map(|&m| {
                    let c2 = if inside[q] {
                        count[m] - 1
                    } else {
                        count[m] + 1
                    };
                    off(count[m], soft[m]) as isize - off(c2, soft[m]) as isize
                })
                .sum()
        };
        let q = if next().is_multiple_of(10) {
            closed[j][(next() % closed[j].len() as u64) as usize]
        } else {
            let best = closed[j]
                .iter()
                .map(|&q| gain(q, &count))
                .max()
                .unwrap_or(0);
            let ties: Vec<usize> = closed[j]
                .iter()
                .copied()
                .filter(|&q| gain(q, &count) == best)
                .collect();
            ties[(next() % ties.len() as u64) as usize]
        };
        for &m in &members[q] {
            count[m] = if inside[q] {
                count[m] - 1
            } else {
                count[m] + 1
            };
        }
        inside[q] = !inside[q];
    }
    None
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let topology = Topology::parse(&args[0]).expect("a topology");
    let text = std::fs::read_to_string(&args[1]).expect("a bounds file");
    let file: serde_json::Value = serde_json::from_str(&text).expect("JSON");
    let list = |key: &str| -> Vec<usize> { serde_json::from_value(file[key].clone()).expect(key) };
    let steps: u64 = args.get(2).map_or(100_000, |s| s.parse().expect("STEPS"));
    let mode = args.get(3).map_or("", String::as_str);
    let restore_first = mode == "restore" || mode == "inherit";
    let inherit = mode == "inherit";
    let trips = mode == "trip";
    let inst = Lkcs::instance(&topology, &list("l"), &list("k")).expect("bounds");
    // `trip` needs no leader: it refuses only instances with a process that can never move
    // (and, below, those without a tight start); the other modes run what `Lkcs::build` runs
    let built = if trips {
        let frozen = inst.immovable(20_000);
        if !frozen.is_empty() {
            println!("refused: {frozen:?} can never move");
            return;
        }
        None
    } else {
        match Lkcs::build(&inst, &Leaders::All, None, LkcsRules::CORRECTED) {
            Ok(sys) => Some(sys),
            Err(e) => {
                println!("refused: {}", e.to_string().lines().next().unwrap_or(""));
                return;
            }
        }
    };
    let n = inst.len();
    let closed: Vec<Vec<usize>> = topology
        .processes()
        .map(|p| topology.closed(p).iter().map(|q| q.index()).collect())
        .collect();
    // the two-hop ball of each process: within distance 2
    let ball: Vec<Vec<usize>> = topology
        .processes()
        .map(|p| {
            let mut b: Vec<usize> = closed[p.index()]
                .iter()
                .flat_map(|&j| closed[j].iter().copied())
                .collect();
            b.sort_unstable();
            b.dedup();
            b
        })
        .collect();
    let hard: Vec<(usize, usize)> = (0..n)
        .map(|i| {
            let b = inst.all_bounds()[i];
            (b.l, b.k)
        })
        .collect();
    // `trip` tightens every side of a bound a move can break and starts from a configuration
    // tight everywhere; the other modes keep the operating bounds and start of `Lkcs::build`
    let (soft, start): (Vec<(usize, usize)>, Vec<CsState>) = if trips {
        // every side a move can break is tightened by one: L = l+1 where l > 0, K = k-1
        // where k < |N_j|+1 (a count cannot cross 0 or |N_j|+1)
        let soft: Vec<(usize, usize)> = (0..n)
            .map(|j| {
                let (l, k) = hard[j];
                (l + usize::from(l > 0), k - usize::from(k < closed[j].len()))
            })
            .collect();
        if let Some(j) = (0..n).find(|&j| soft[j].0 > soft[j].1) {
            println!("refused: no tight start: P{j}'s bounds are too narrow to tighten");
            return;
        }
        match tight_start(&closed, &soft, 200_000) {
            Some(start) => (soft, start),
            None => {
                println!("refused: no tight start: not found in 200000 flips");
                return;
            }
        }
    } else {
        let sys = built.expect("built for every mode but `trip`");
        let soft = sys
            .operating
            .all_bounds()
            .iter()
            .map(|b| (b.l, b.k))
            .collect();
        (soft, sys.procs.iter().map(CsObject::state).collect())
    };
    // whether the message-level code accepts the instance (with its default leader)
    let accepted = Lkcs::build(&inst, &Leaders::Auto, None, LkcsRules::CORRECTED).is_ok();
    let mut inside: Vec<bool> = start.iter().map(|&s| s == CsState::InCs).collect();
    let mut count: Vec<usize> = (0..n)
        .map(|j| closed[j].iter().filter(|&&q| inside[q]).count())
        .collect();
    let within = |x: usize, (lo, hi): (usize, usize)| lo <= x && x <= hi;
    let mut age: Vec<u64> = (0..n as u64).collect(); // distinct initial ages
    let mut moves = vec![0u64; n];
    let mut worst_wait = 0u64;
    let mut reserve_moves = 0u64;
    let mut trip_starts = 0u64;
    // the process whose reserve move took each arbiter out of [L_j, K_j], until it is back
    let mut owner: Vec<Option<usize>> = vec![None; n];
    // `trip`: the process whose round trip (a reserve move and its return) touches each
    // arbiter, and whether each process is out on one
    let mut touch: Vec<Option<usize>> = vec![None; n];
    let mut on_trip = vec![false; n];
    for step in n as u64..n as u64 + steps {
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by_key(|&q| age[q]);
        let in_reserve = |count: &[usize], j: usize| !within(count[j], soft[j]);
        let after = |q: usize, j: usize, count: &[usize]| {
            if inside[q] {
                count[j] - 1
            } else {
                count[j] + 1
            }
        };
        let normal = |q: usize, count: &[usize]| {
            closed[q].iter().all(|&j| {
                let x = after(q, j, count);
                within(x, soft[j])
            })
        };
        let restores = |q: usize, count: &[usize]| {
            closed[q]
                .iter()
                .any(|&j| in_reserve(count, j) && within(after(q, j, count), soft[j]))
        };
        let oldest_in_ball = |q: usize| {
            ball[q]
                .iter()
                .all(|&r| r == q || age[r] > age[q] || !ball[r].contains(&q))
        };
        // invariant R: the ball's reserves are free or already the mover's own; a new user
        // must be the oldest request of its ball, the owner may go on using its own
        let reserve = |q: usize, count: &[usize]| {
            let own = owner.contains(&Some(q));
            (own || oldest_in_ball(q))
                && closed[q]
                    .iter()
                    .all(|&j| within(after(q, j, count), hard[j]))
                && ball[q]
                    .iter()
                    .all(|&m| !in_reserve(count, m) || owner[m] == Some(q))
        };
        // `trip`: a move keeps every arbiter within [l_j, k_j] and its count with the round
        // trip touching it undone within [L_j, K_j]; a round trip starts only where no other
        // touches, for the oldest request of the ball
        let displacement = |q: usize| if inside[q] { 1isize } else { -1 };
        let virtual_ok = |r: usize, count: &[usize]| {
            closed[r].iter().all(|&j| {
                let c = after(r, j, count);
                let v = match touch[j] {
                    Some(q) if q != r => c as isize - displacement(q),
                    _ => c as isize,
                };
                within(c, hard[j]) && v >= 0 && within(v as usize, soft[j])
            })
        };
        let trip_ok = |r: usize, count: &[usize]| {
            !on_trip[r]
                && oldest_in_ball(r)
                && closed[r]
                    .iter()
                    .all(|&j| touch[j].is_none() && within(after(r, j, count), hard[j]))
        };
        let chosen = if trips {
            order
                .iter()
                .copied()
                .find(|&q| virtual_ok(q, &count) || trip_ok(q, &count))
        } else {
            // with `inherit` a restoring move may use reserves too (priority inheritance)
            let hard_ok = |q: usize| {
                closed[q]
                    .iter()
                    .all(|&j| within(after(q, j, &count), hard[j]))
            };
            let restoring = order.iter().copied().find(|&q| {
                restore_first
                    && restores(q, &count)
                    && (normal(q, &count) || (inherit && hard_ok(q)))
            });
            restoring.or_else(|| {
                order
                    .iter()
                    .copied()
                    .find(|&q| normal(q, &count) || reserve(q, &count))
            })
        };
        let Some(q) = chosen else {
            let reserves: Vec<usize> = (0..n).filter(|&j| in_reserve(&count, j)).collect();
            println!("no move at step {step}: moves {moves:?}; arbiters in reserve {reserves:?}");
            return;
        };
        if !normal(q, &count) {
            reserve_moves += 1;
        }
        if trips {
            let starts = !on_trip[q] && !virtual_ok(q, &count);
            trip_starts += u64::from(starts);
            let mover = (on_trip[q] || starts).then_some(q);
            on_trip[q] = starts;
            for &j in &closed[q] {
                touch[j] = if starts {
                    mover
                } else {
                    touch[j].filter(|&o| o != q)
                };
            }
        }
        for &j in &closed[q] {
            count[j] = after(q, j, &count);
            if within(count[j], soft[j]) {
                owner[j] = None;
            } else if owner[j].is_none() {
                owner[j] = Some(q);
            }
        }
        inside[q] = !inside[q];
        if trips {
            // invariant T: every count within [l_j, k_j], and within [L_j, K_j] with the
            // round trip touching it undone
            for j in 0..n {
                let undone = match touch[j] {
                    Some(o) => count[j] as isize - if inside[o] { 1 } else { -1 },
                    None => count[j] as isize,
                };
                let ok =
                    within(count[j], hard[j]) && undone >= 0 && within(undone as usize, soft[j]);
                assert!(ok, "invariant T broken at P{j} after step {step}");
            }
        }
        worst_wait = worst_wait.max(step - age[q]);
        age[q] = step;
        moves[q] += 1;
    }
    let oldest = age.iter().min().copied().unwrap_or(0);
    if std::env::var("MODEL_WHY").is_ok() {
        let q = (0..n).min_by_key(|&q| age[q]).unwrap_or(0);
        let why: Vec<String> = closed[q]
            .iter()
            .map(|&j| {
                let x = if inside[q] {
                    count[j] - 1
                } else {
                    count[j] + 1
                };
                format!(
                    "P{j}: {} -> {x} soft {:?} hard {:?} owner {:?}",
                    count[j], soft[j], hard[j], owner[j]
                )
            })
            .collect();
        let owners: Vec<(usize, Option<usize>)> = ball[q]
            .iter()
            .filter(|&&m| owner[m].is_some())
            .map(|&m| (m, owner[m]))
            .collect();
        println!(
            "oldest P{q} (inside {}): {why:?}; owned reserves in its ball {owners:?}",
            inside[q]
        );
    }
    let idle: Vec<usize> = (0..n).filter(|&q| moves[q] == 0).collect();
    println!(
        "{n} processes; Lkcs::build {}; {steps} steps: {trip_starts} round trips, {reserve_moves} \
         moves outside [L, K]; fewest moves {} (never moved: {idle:?}); worst wait {} steps; \
         oldest request waiting {} steps",
        if accepted { "accepts" } else { "refuses" },
        moves.iter().min().unwrap_or(&0),
        worst_wait,
        n as u64 + steps - oldest
    );
}
