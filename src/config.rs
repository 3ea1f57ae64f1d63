//! Problem instances: a topology with per-process bounds (l_i, k_i), safety of configurations,
//! and the search for a safe initial configuration.

use crate::error::{ConfigError, Problem};
use crate::id::{CsState, ProcessId};
use crate::topology::Topology;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

mod observed;
mod syntax;

pub use observed::Observed;
pub use syntax::{format_initial, parse_initial};

/// How many search nodes [`Instance::find_safe_initial`] visits before giving up.
const SEARCH_BUDGET: usize = 2_000_000;
/// The backtracking budget of [`Instance::find_safe_initial_quickly`].
const QUICK_SEARCH_BUDGET: usize = 100_000;
/// The local search's flips in [`Instance::find_safe_initial_quickly`].
const LOCAL_SEARCH_FLIPS: usize = 20_000;
/// [`Instance::immovable`]'s local test is not attempted for a process whose judges' closed
/// neighbourhoods add up to more processes than this (a hub of thousands of neighbours).
const LOCAL_REACH_LIMIT: usize = 4_096;
/// How many local-search starts [`Instance::movable_start`] tries after the given one.
const MOVABLE_START_TRIES: u64 = 8;
/// The longest random walk of [`Instance::movable_start`].
const MOVABLE_START_STEPS: usize = 20_000;
/// The largest instance [`Instance::movable_start`] explores.
const MOVABLE_START_MAX: usize = 1_024;
/// The largest Σ (|N_i|+1)² of an instance [`Instance::movable_start`] explores (a step of
/// its walks and a flip of its local searches cost up to (|N_i|+1)² around the process).
const MOVABLE_START_SQUARES: usize = 1 << 18;
/// The most neighbourhood counts one walk of [`Instance::movable_start`] reads.
const MOVABLE_START_WORK: usize = 100_000_000;
/// The longest walk of [`Instance::seen_movable`], in moves per process.
const SEEN_MOVABLE_STEPS: usize = 20;
/// The most neighbourhood counts the walk of [`Instance::seen_movable`] reads, per process
/// and edge.
const SEEN_MOVABLE_WORK: usize = 50;

/// A process's bounds: at least `l` and at most `k` processes of its closed neighbourhood
/// N_i ∪ {P_i} in the CS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct Bounds {
    /// The lower bound l_i.
    pub l: usize,
    /// The upper bound k_i.
    pub k: usize,
}

/// A generalized local (l_i, k_i)-CS problem instance: a graph and each process's bounds.
/// On a complete graph this is the global (l, k)-CS problem.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    topology: Topology,
    bounds: Vec<Bounds>,
    /// On a complete graph every closed neighbourhood is the whole system, so one count
    /// decides every bound: the lower bounds and the upper bounds, each sorted, answer "how
    /// many bounds fail with c processes in the CS" in O(log n).
    global: Option<GlobalBounds>,
}

/// Every process's bounds, sorted, for the O(log n) safety questions of a complete graph.
#[derive(Clone, Debug, PartialEq, Eq)]
struct GlobalBounds {
    lower: Vec<usize>,
    upper: Vec<usize>,
}

impl GlobalBounds {
    /// How many processes' bounds fail when `c` processes are in the CS.
    fn broken_at(&self, c: usize) -> usize {
        let too_few = self.lower.len() - self.lower.partition_point(|&l| l <= c);
        let too_many = self.upper.partition_point(|&k| k < c);
        too_few + too_many
    }
}

impl Instance {
    /// An instance; checks that there is one bound per process and `0 <= l_i < k_i <= |N_i|+1`
    /// for every process, reporting every process that breaks it.
    pub fn new(topology: Topology, bounds: Vec<Bounds>) -> Result<Instance, ConfigError> {
        if bounds.len() != topology.len() {
            return Err(ConfigError::one(Problem::Invalid(format!(
                "{} bounds given for {} processes",
                bounds.len(),
                topology.len()
            ))));
        }
        let problems = topology
            .processes()
            .filter_map(|p| {
                let b = bounds[p.index()];
                let closed = topology.degree(p) + 1;
                (b.l >= b.k || b.k > closed).then(|| Problem::Bound {
                    process: p,
                    l: b.l,
                    k: b.k,
                    closed,
                    rule: "0 <= l_i < k_i <= |N_i|+1".into(),
                })
            })
            .collect();
        ConfigError::check(problems)?;
        let global = topology.is_complete().then(|| {
            let mut lower: Vec<usize> = bounds.iter().map(|b| b.l).collect();
            let mut upper: Vec<usize> = bounds.iter().map(|b| b.k).collect();
            lower.sort_unstable();
            upper.sort_unstable();
            GlobalBounds { lower, upper }
        });
        Ok(Instance {
            topology,
            bounds,
            global,
        })
    }

    /// How many processes are in the CS in `states`.
    fn count_in_cs(states: &[CsState]) -> usize {
        states.iter().filter(|&&s| s == CsState::InCs).count()
    }

    /// The graph.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The number of processes.
    pub fn len(&self) -> usize {
        self.topology.len()
    }

    /// Always false: an instance has at least one process.
    pub fn is_empty(&self) -> bool {
        self.topology.is_empty()
    }

    /// Process `p`'s bounds.
    pub fn bounds(&self, p: ProcessId) -> Bounds {
        self.bounds[p.index()]
    }

    /// Every process's bounds, by id.
    pub fn all_bounds(&self) -> &[Bounds] {
        &self.bounds
    }

    /// |CS_p(C)|: how many processes of `p`'s closed neighbourhood are in the CS.
    pub fn in_cs_around(&self, states: &[CsState], p: ProcessId) -> usize {
        if self.global.is_some() {
            return Self::count_in_cs(states);
        }
        usize::from(states[p.index()] == CsState::InCs)
            + self
                .topology
                .neighbors(p)
                .iter()
                .filter(|q| states[q.index()] == CsState::InCs)
                .count()
    }

    /// Whether `p`'s bounds hold in `states`.
    pub fn holds_at(&self, states: &[CsState], p: ProcessId) -> bool {
        let c = self.in_cs_around(states, p);
        let b = self.bounds(p);
        b.l <= c && c <= b.k
    }

    /// One problem for every process whose bounds fail in `states`.
    pub fn violations(&self, states: &[CsState]) -> Vec<Problem> {
        let total = self.global.as_ref().map(|_| Self::count_in_cs(states));
        let count = |p| total.unwrap_or_else(|| self.in_cs_around(states, p));
        self.topology
            .processes()
            .filter(|&p| {
                let (c, b) = (count(p), self.bounds(p));
                c < b.l || c > b.k
            })
            .map(|p| Problem::UnsafeInitial {
                process: p,
                in_cs: count(p),
                l: self.bounds(p).l,
                k: self.bounds(p).k,
            })
            .collect()
    }

    /// Every configuration that meets every bound, by increasing bit mask (bit i set: P_i in
    /// the CS). It enumerates all 2^n configurations, so it is for small instances (the
    /// checker's scale): `None` above [`Instance::MAX_ENUMERATED`] processes.
    pub fn safe_configurations(&self) -> Option<Vec<Vec<CsState>>> {
        let n = self.len();
        if n > Self::MAX_ENUMERATED {
            return None;
        }
        let configs = (0u32..1 << n)
            .map(|mask| {
                (0..n)
                    .map(|i| {
                        if mask & (1 << i) != 0 {
                            CsState::InCs
                        } else {
                            CsState::OutCs
                        }
                    })
                    .collect::<Vec<_>>()
            })
            .filter(|s| self.violations(s).is_empty())
            .collect();
        Some(configs)
    }

    /// The largest instance [`Instance::safe_configurations`] enumerates.
    pub const MAX_ENUMERATED: usize = 20;

    /// Whether flipping `p`'s state in `states` keeps every bound that holds now.
    pub fn move_keeps_bounds(&self, states: &mut [CsState], p: ProcessId) -> bool {
        self.bounds_broken_by_move(states, p) == 0
    }

    /// How many bounds of `p`'s closed neighbourhood would fail if `p` flipped its state in
    /// `states` (which is left as it was).
    pub fn bounds_broken_by_move(&self, states: &mut [CsState], p: ProcessId) -> usize {
        if let Some(global) = &self.global {
            let c = Self::count_in_cs(states);
            return global.broken_at(match states[p.index()] {
                CsState::OutCs => c + 1,
                CsState::InCs => c - 1,
            });
        }
        states[p.index()] = !states[p.index()];
        let broken = self
            .topology
            .closed(p)
            .into_iter()
            .filter(|&q| !self.holds_at(states, q))
            .count();
        states[p.index()] = !states[p.index()];
        broken
    }

    /// The processes that can never move: for each of them no configuration meets every
    /// bound of its closed neighbourhood both before and after it changes state, whichever
    /// state it starts in. No algorithm can ever let such a process complete a sequence
    /// without breaking a bound, so a system that must move it is not solvable.
    ///
    /// The test is exact: for each process and starting state, a backtracking search over the
    /// processes within two hops against the bounds of N_p ∪ {P_p} (the only ones a move of
    /// P_p changes), each asked for one more unit of slack on the side the move uses (a "no"
    /// there is final), then, when that finds an assignment, the same question on the whole
    /// instance (the assignment must extend to a configuration that meets every bound). Each
    /// search takes at most `budget` steps; a process whose search runs out of budget is not
    /// reported (the answer is then "not shown immovable", never a false refusal), and so is
    /// a process whose judges' closed neighbourhoods add up to more than 4,096 processes (the
    /// local test is not attempted there). On a complete graph every closed neighbourhood is
    /// the whole system: every
    /// process is immovable exactly when the largest l_i equals the smallest k_i.
    pub fn immovable(&self, budget: usize) -> Vec<ProcessId> {
        if let Some(global) = &self.global {
            let n = self.len();
            return if global.lower[n - 1] >= global.upper[0] {
                self.topology.processes().collect()
            } else {
                Vec::new()
            };
        }
        // A process seen movable in a safe configuration can move from both states (the
        // move leads to a safe configuration from which it moves back), so the exact test
        // below, each of which costs O(n), runs only for the processes the walk never saw move.
        let seen = self.seen_movable();
        self.topology
            .processes()
            .filter(|&p| {
                !seen[p.index()]
                    && [CsState::InCs, CsState::OutCs]
                        .into_iter()
                        .all(|s| self.can_move_from(p, s, budget) == Some(false))
            })
            .collect()
    }

    /// For each process, whether a seeded random walk of safe moves, from the start the
    /// backtracking search finds, met a configuration where its move keeps every bound: a
    /// certificate that it is not immovable. The walk is O(edges) to set up and stops after
    /// [`SEEN_MOVABLE_STEPS`] × n moves or [`SEEN_MOVABLE_WORK`] × (n + edges) neighbourhood
    /// counts read, or once every process was seen. All false when no start is found. Not
    /// for global instances.
    fn seen_movable(&self) -> Vec<bool> {
        let n = self.len();
        let mut seen = vec![false; n];
        let Ok(states) = self.search_within(|_| [CsState::InCs, CsState::OutCs], SEARCH_BUDGET)
        else {
            return seen;
        };
        let t = &self.topology;
        let closed: Vec<Vec<ProcessId>> = t.processes().map(|p| t.closed(p)).collect();
        let left = std::cell::Cell::new(n);
        let mut note = |q: usize, can: bool| {
            if can && !seen[q] {
                seen[q] = true;
                left.set(left.get() - 1);
            }
        };
        let mut walk = SafeWalk::new(self, &closed, states, &mut note);
        let mut rng = ChaCha8Rng::seed_from_u64(0);
        let max_steps = SEEN_MOVABLE_STEPS.saturating_mul(n);
        let max_work = SEEN_MOVABLE_WORK.saturating_mul(n + t.edge_count());
        while left.get() > 0 && walk.step < max_steps && walk.work <= max_work {
            if walk.step(&mut rng, &mut note).is_none() {
                break;
            }
        }
        seen
    }

    /// Whether some configuration that meets every bound, with `p` in `state`, lets `p` move
    /// without breaking a bound; `None` when `budget` steps were not enough. First the local
    /// search (a "no" there is final), then the whole instance with `p` fixed and one more
    /// unit of slack asked of every bound of its closed neighbourhood.
    fn can_move_from(&self, p: ProcessId, state: CsState, budget: usize) -> Option<bool> {
        if self.can_move_locally(p, state, budget)? {
            let mut bounds = self.bounds.clone();
            for j in self.topology.closed(p) {
                let b = &mut bounds[j.index()];
                match state {
                    CsState::InCs => b.l += 1,
                    CsState::OutCs => b.k -= 1,
                }
            }
            let narrowed = Instance {
                topology: self.topology.clone(),
                bounds,
                global: None,
            };
            let order = |q: ProcessId| {
                if q == p {
                    [state, state]
                } else {
                    [CsState::InCs, CsState::OutCs]
                }
            };
            match narrowed.search_within(order, budget) {
                Ok(_) => Some(true),
                Err(None) => None,
                Err(Some(_)) => Some(false),
            }
        } else {
            Some(false)
        }
    }

    /// Whether some assignment of the processes within two hops of `p`, with `p` in `state`,
    /// meets every bound of `p`'s closed neighbourhood before and after `p` flips; `None`
    /// when `budget` backtracking steps were not enough.
    fn can_move_locally(&self, p: ProcessId, state: CsState, budget: usize) -> Option<bool> {
        let t = &self.topology;
        let judges = t.closed(p);
        // the bounds each judge needs before the move: one more slack on the side p leaves
        let range: Vec<(usize, usize)> = judges
            .iter()
            .map(|&j| {
                let b = self.bounds(j);
                match state {
                    CsState::InCs => (b.l + 1, b.k),
                    CsState::OutCs => (b.l, b.k.saturating_sub(1)),
                }
            })
            .collect();
        if range.iter().any(|&(lo, hi)| lo > hi) {
            return Some(false);
        }
        // The set-up below is linear in the judges' closed neighbourhoods; past
        // LOCAL_REACH_LIMIT processes counted there (a hub's neighbourhood) the search is not
        // attempted: "not shown immovable", never a false refusal.
        let reach: usize = judges.iter().map(|&j| t.degree(j) + 1).sum();
        if reach > LOCAL_REACH_LIMIT {
            return None;
        }
        // the variables: every process in a judge's closed neighbourhood, p first; for each,
        // the judges it counts for
        let mut vars: Vec<ProcessId> = vec![p];
        let mut index: std::collections::HashMap<ProcessId, usize> = [(p, 0)].into();
        let mut counts_for: Vec<Vec<usize>> = vec![Vec::new()];
        for (x, &j) in judges.iter().enumerate() {
            for q in t.closed(j) {
                let v = *index.entry(q).or_insert_with(|| {
                    vars.push(q);
                    counts_for.push(Vec::new());
                    vars.len() - 1
                });
                counts_for[v].push(x);
            }
        }
        let mut in_cs = vec![0usize; judges.len()];
        let mut undecided: Vec<usize> = judges.iter().map(|&j| t.degree(j) + 1).collect();
        let feasible = |in_cs: &[usize], undecided: &[usize], touched: &[usize]| {
            touched.iter().all(|&x| {
                let (lo, hi) = range[x];
                in_cs[x] <= hi && in_cs[x] + undecided[x] >= lo
            })
        };
        let apply =
            |in_cs: &mut [usize], undecided: &mut [usize], v: usize, on: bool, inside: bool| {
                for &x in &counts_for[v] {
                    if on {
                        undecided[x] -= 1;
                        in_cs[x] += usize::from(inside);
                    } else {
                        undecided[x] += 1;
                        in_cs[x] -= usize::from(inside);
                    }
                }
            };
        // p is fixed; each other variable tries in, then out
        apply(&mut in_cs, &mut undecided, 0, true, state == CsState::InCs);
        if !feasible(&in_cs, &undecided, &counts_for[0]) {
            return Some(false);
        }
        let n = vars.len();
        let mut tried = vec![0u8; n];
        let mut depth = 1;
        let mut steps = 0usize;
        loop {
            if depth == n {
                return Some(true);
            }
            if tried[depth] > 0 {
                apply(&mut in_cs, &mut undecided, depth, false, tried[depth] == 1);
            }
            if tried[depth] == 2 {
                tried[depth] = 0;
                depth -= 1;
                if depth == 0 {
                    return Some(false);
                }
                continue;
            }
            tried[depth] += 1;
            steps += 1;
            if steps > budget {
                return None;
            }
            let inside = tried[depth] == 1;
            apply(&mut in_cs, &mut undecided, depth, true, inside);
            if feasible(&in_cs, &undecided, &counts_for[depth]) {
                depth += 1;
            }
        }
    }

    /// Finds a safe configuration (every bound holds) by backtracking in breadth-first order,
    /// trying InCS before OutCS. Returns a [`Problem::NoSafeInitial`] when none exists or
    /// the search budget runs out.
    pub fn find_safe_initial(&self) -> Result<Vec<CsState>, Problem> {
        self.search(|_| [CsState::InCs, CsState::OutCs])
    }

    /// A safe configuration found quickly, or a quick refusal: the backtracking search of
    /// [`Instance::find_safe_initial`] with a budget of 100,000 steps (its
    /// "none exists" is exact and final), then, when that budget runs out, a seeded
    /// min-conflicts local search of at most 20,000 flips (on dense graphs
    /// with narrow per-process bounds, where the backtracking thrashes, it finds a start in
    /// a few thousand flips). Where the backtracking succeeds the start is the same as
    /// [`Instance::find_safe_initial`]'s.
    pub fn find_safe_initial_quickly(&self) -> Result<Vec<CsState>, Problem> {
        match self.search_within(|_| [CsState::InCs, CsState::OutCs], QUICK_SEARCH_BUDGET) {
            Ok(states) => Ok(states),
            Err(Some(none)) => Err(none),
            Err(None) => self.local_search(0, LOCAL_SEARCH_FLIPS).ok_or_else(|| {
                Problem::NoSafeInitial(format!(
                    "search gave up after {QUICK_SEARCH_BUDGET} backtracking steps and \
                     {LOCAL_SEARCH_FLIPS} local-search flips; give one with --initial"
                ))
            }),
        }
    }

    /// A safe start from which, as far as a bounded exploration shows, every process can
    /// move without leaving the bounds: `start` itself when a random walk of safe moves from
    /// it sees every process move, else the start (among `start` and up to 8 seeded
    /// local-search starts) whose walk saw the most processes move, the earliest on a tie.
    /// Safe configurations split into components closed under safe moves, and a start in a
    /// small one can leave most processes unable to ever move within these bounds: on
    /// torus:5x5 with every bound [2, 3], 4,840 of the 6,840 safe configurations lie in two
    /// components where all 25 processes move, the rest in components where at most 5 do.
    /// Each walk takes at most 20,000 moves (and 10^8 neighbourhood counts read); instances
    /// of more than 1,024 processes or with Σ (|N_i|+1)² above 2^18 (dense ones of more
    /// than about a hundred processes), and global ones (where every process of a state is
    /// alike), keep `start`. `start` must meet every bound.
    pub fn movable_start(&self, start: Vec<CsState>) -> Vec<CsState> {
        let n = self.len();
        let squares: usize = self
            .topology
            .processes()
            .map(|p| (self.topology.degree(p) + 1).pow(2))
            .sum();
        if self.global.is_some() || n > MOVABLE_START_MAX || squares > MOVABLE_START_SQUARES {
            return start;
        }
        let t = &self.topology;
        let closed: Vec<Vec<ProcessId>> = t.processes().map(|p| t.closed(p)).collect();
        let seen = self.movers_seen(&closed, &start, 0);
        if seen == n {
            return start;
        }
        let mut best = (seen, start);
        for seed in 1..=MOVABLE_START_TRIES {
            let Some(s) = self.local_search(seed, LOCAL_SEARCH_FLIPS) else {
                continue;
            };
            let seen = self.movers_seen(&closed, &s, seed);
            if seen > best.0 {
                best = (seen, s);
            }
            if best.0 == n {
                break;
            }
        }
        best.1
    }

    /// How many processes a seeded random walk of at most 20,000 safe moves from `start`
    /// sees move (each step moves a process drawn uniformly from those whose move keeps
    /// every bound); it stops once every process has moved. `closed` holds every process's
    /// closed neighbourhood. Not for global instances.
    fn movers_seen(&self, closed: &[Vec<ProcessId>], start: &[CsState], seed: u64) -> usize {
        let n = self.len();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut walk = SafeWalk::new(self, closed, start.to_vec(), &mut |_, _| {});
        let (mut moved, mut seen) = (vec![false; n], 0);
        while seen < n && walk.step < MOVABLE_START_STEPS && walk.work <= MOVABLE_START_WORK {
            let Some(p) = walk.step(&mut rng, &mut |_, _| {}) else {
                break;
            };
            if !moved[p] {
                moved[p] = true;
                seen += 1;
            }
        }
        seen
    }

    /// Min-conflicts local search for a safe configuration: from a seeded random start,
    /// repeatedly take a random closed neighbourhood whose bound fails and flip the member
    /// (among those whose flip moves that count the right way) that most reduces the total
    /// distance of every count to its range, or a random one with probability 1/5.
    fn local_search(&self, seed: u64, max_flips: usize) -> Option<Vec<CsState>> {
        let n = self.len();
        let t = &self.topology;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut states: Vec<CsState> = (0..n)
            .map(|_| {
                if rng.random_bool(0.5) {
                    CsState::InCs
                } else {
                    CsState::OutCs
                }
            })
            .collect();
        let mut in_cs: Vec<usize> = t
            .processes()
            .map(|p| self.in_cs_around(&states, p))
            .collect();
        let off = |j: usize, c: usize| {
            let b = self.bounds[j];
            b.l.saturating_sub(c) + c.saturating_sub(b.k)
        };
        let members = |q: ProcessId| t.closed(q);
        for _ in 0..max_flips {
            let violated: Vec<usize> = (0..n).filter(|&j| off(j, in_cs[j]) > 0).collect();
            if violated.is_empty() {
                return Some(states);
            }
            let j = violated[rng.random_range(0..violated.len())];
            let want_in = in_cs[j] < self.bounds[j].l;
            let candidates: Vec<ProcessId> = members(ProcessId::from(j))
                .into_iter()
                .filter(|q| (states[q.index()] == CsState::InCs) != want_in)
                .collect();
            if candidates.is_empty() {
                return None;
            }
            let pick = if rng.random_range(0..5) == 0 {
                candidates[rng.random_range(0..candidates.len())]
            } else {
                let delta = |q: ProcessId| -> i64 {
                    let d: i64 = if states[q.index()] == CsState::InCs {
                        -1
                    } else {
                        1
                    };
                    members(q)
                        .iter()
                        .map(|x| {
                            let c = in_cs[x.index()];
                            off(x.index(), (c as i64 + d) as usize) as i64
                                - off(x.index(), c) as i64
                        })
                        .sum()
                };
                let best = candidates.iter().map(|&q| delta(q)).min().unwrap_or(0);
                let ties: Vec<ProcessId> = candidates
                    .iter()
                    .copied()
                    .filter(|&q| delta(q) == best)
                    .collect();
                ties[rng.random_range(0..ties.len())]
            };
            let i = pick.index();
            states[i] = !states[i];
            for x in members(pick) {
                let c = &mut in_cs[x.index()];
                if states[i] == CsState::InCs {
                    *c += 1;
                } else {
                    *c -= 1;
                }
            }
        }
        None
    }

    /// Like [`Instance::find_safe_initial`], but the value tried first for each process is
    /// drawn from a ChaCha8 stream seeded with `seed`: different seeds give different safe
    /// configurations (useful to test from varied starts).
    pub fn random_safe_initial(&self, seed: u64) -> Result<Vec<CsState>, Problem> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let first: Vec<bool> = (0..self.len()).map(|_| rng.random_bool(0.5)).collect();
        self.search(|p| {
            if first[p.index()] {
                [CsState::InCs, CsState::OutCs]
            } else {
                [CsState::OutCs, CsState::InCs]
            }
        })
    }

    fn search(&self, order: impl Fn(ProcessId) -> [CsState; 2]) -> Result<Vec<CsState>, Problem> {
        self.search_within(order, SEARCH_BUDGET).map_err(|e| {
            e.unwrap_or_else(|| {
                Problem::NoSafeInitial(format!(
                    "search gave up after {SEARCH_BUDGET} steps; give one with --initial"
                ))
            })
        })
    }

    /// The backtracking search of [`Instance::find_safe_initial`] with `budget` steps: a
    /// process whose two values in `order` are the same is fixed to it. `Err(None)` when
    /// the budget ran out.
    fn search_within(
        &self,
        order: impl Fn(ProcessId) -> [CsState; 2],
        budget: usize,
    ) -> Result<Vec<CsState>, Option<Problem>> {
        let n = self.len();
        if let Some(global) = &self.global {
            // Every closed neighbourhood is the whole system: with c in the CS and r processes
            // undecided, a value is feasible exactly when every bound can still hold
            // (c' <= min k and c' + r' >= max l), so the backtracking search below would never
            // backtrack; the same choices, in the same order (0..n is its breadth-first order
            // on a complete graph), in O(n).
            let (max_l, min_k) = (global.lower[n - 1], global.upper[0]);
            let mut c = 0;
            let mut states = Vec::with_capacity(n);
            for p in self.topology.processes() {
                let rest = n - 1 - p.index();
                let value = (order)(p).into_iter().find(|v| {
                    let c = c + usize::from(*v == CsState::InCs);
                    c <= min_k && c + rest >= max_l
                });
                let Some(value) = value else {
                    return Err(Some(Problem::NoSafeInitial(
                        "no assignment of InCS/OutCS meets every process's bounds".into(),
                    )));
                };
                c += usize::from(value == CsState::InCs);
                states.push(value);
            }
            return Ok(states);
        }
        let mut bfs = Vec::with_capacity(n);
        let mut seen = vec![false; n];
        let mut queue = VecDeque::from([ProcessId(0)]);
        seen[0] = true;
        while let Some(u) = queue.pop_front() {
            bfs.push(u);
            for &v in self.topology.neighbors(u) {
                if !std::mem::replace(&mut seen[v.index()], true) {
                    queue.push_back(v);
                }
            }
        }
        let mut s = Search {
            inst: self,
            bfs: &bfs,
            order: &order,
            states: vec![None; n],
            in_cs: vec![0; n],
            undecided: self
                .topology
                .processes()
                .map(|p| self.topology.degree(p) + 1)
                .collect(),
            budget,
        };
        match s.go() {
            Some(true) => Ok(s
                .states
                .into_iter()
                .map(|x| x.unwrap_or(CsState::OutCs))
                .collect()),
            Some(false) => Err(Some(Problem::NoSafeInitial(
                "no assignment of InCS/OutCS meets every process's bounds".into(),
            ))),
            None => Err(None),
        }
    }
}

struct Search<'a, F> {
    inst: &'a Instance,
    bfs: &'a [ProcessId],
    order: &'a F,
    states: Vec<Option<CsState>>,
    in_cs: Vec<usize>,
    undecided: Vec<usize>,
    budget: usize,
}

impl<F: Fn(ProcessId) -> [CsState; 2]> Search<'_, F> {
    /// `Some(found)`, or `None` when the budget ran out. Depth-first over the processes in
    /// breadth-first order, each trying its two values in `order`; iterative, so that the
    /// depth (one level per process) never meets the thread's stack.
    fn go(&mut self) -> Option<bool> {
        let n = self.bfs.len();
        // values tried so far at each depth (0, 1 or 2); the last one tried is applied
        let mut tried = vec![0usize; n];
        let mut depth = 0;
        loop {
            let Some(&p) = self.bfs.get(depth) else {
                return Some(true);
            };
            let values = (self.order)(p);
            if tried[depth] > 0 {
                self.assign(p, values[tried[depth] - 1], false);
            }
            // a process fixed to one value (both entries the same) tries it once
            if tried[depth] == 2 || (tried[depth] == 1 && values[0] == values[1]) {
                tried[depth] = 0;
                self.states[p.index()] = None;
                if depth == 0 {
                    return Some(false);
                }
                depth -= 1;
                continue;
            }
            let value = values[tried[depth]];
            tried[depth] += 1;
            self.budget = self.budget.checked_sub(1)?;
            if self.assign(p, value, true) {
                depth += 1;
            }
        }
    }

    /// Applies (`on`) or takes back `p = value` in the counts; after applying, whether every
    /// bound of `p`'s closed neighbourhood can still hold.
    fn assign(&mut self, p: ProcessId, value: CsState, on: bool) -> bool {
        let closed = self.inst.topology.closed(p);
        self.states[p.index()] = on.then_some(value);
        for q in &closed {
            let (u, c) = (&mut self.undecided[q.index()], &mut self.in_cs[q.index()]);
            let inc = usize::from(value == CsState::InCs);
            if on {
                *u -= 1;
                *c += inc;
            } else {
                *u += 1;
                *c -= inc;
            }
        }
        on && closed.iter().all(|q| {
            let b = self.inst.bounds(*q);
            let c = self.in_cs[q.index()];
            c <= b.k && c + self.undecided[q.index()] >= b.l
        })
    }
}

/// A seeded random walk of safe moves over an instance (not a global one): each step moves
/// a process drawn uniformly from those whose move keeps every bound. A step re-reads only
/// the processes within two hops of the one that moved, whose moves read the counts it
/// changed.
struct SafeWalk<'a> {
    inst: &'a Instance,
    /// Every process's closed neighbourhood.
    closed: &'a [Vec<ProcessId>],
    states: Vec<CsState>,
    /// Every process's active count around it.
    count: Vec<usize>,
    /// The processes whose move keeps every bound, each with its place in the list.
    movable: Vec<usize>,
    place: Vec<Option<usize>>,
    /// The step at which a process was last re-read.
    mark: Vec<usize>,
    /// Steps taken.
    step: usize,
    /// Neighbourhood counts read by the steps.
    work: usize,
}

impl<'a> SafeWalk<'a> {
    /// A walk from `states`; `note` hears whether each process can move there, in id order.
    fn new(
        inst: &'a Instance,
        closed: &'a [Vec<ProcessId>],
        states: Vec<CsState>,
        note: &mut dyn FnMut(usize, bool),
    ) -> SafeWalk<'a> {
        let n = inst.len();
        let count = inst
            .topology()
            .processes()
            .map(|p| inst.in_cs_around(&states, p))
            .collect();
        let mut walk = SafeWalk {
            inst,
            closed,
            states,
            count,
            movable: Vec::new(),
            place: vec![None; n],
            mark: vec![0; n],
            step: 0,
            work: 0,
        };
        for q in 0..n {
            let can = walk.can_move(q);
            note(q, can);
            walk.set(q, can);
        }
        walk
    }

    /// Whether `q`'s move keeps every bound around it.
    fn can_move(&self, q: usize) -> bool {
        let entering = self.states[q] == CsState::OutCs;
        self.closed[q].iter().all(|j| {
            let (c, b) = (self.count[j.index()], self.inst.bounds[j.index()]);
            if entering {
                c < b.k
            } else {
                c > b.l
            }
        })
    }

    /// Records whether `q` can move.
    fn set(&mut self, q: usize, can: bool) {
        match (can, self.place[q]) {
            (true, None) => {
                self.place[q] = Some(self.movable.len());
                self.movable.push(q);
            }
            (false, Some(i)) => {
                self.movable.swap_remove(i);
                if let Some(&shifted) = self.movable.get(i) {
                    self.place[shifted] = Some(i);
                }
                self.place[q] = None;
            }
            _ => {}
        }
    }

    /// Moves one process drawn from the movable ones and returns it (`None`: none can
    /// move); `note` hears whether each process re-read can move now.
    fn step(&mut self, rng: &mut ChaCha8Rng, note: &mut dyn FnMut(usize, bool)) -> Option<usize> {
        if self.movable.is_empty() {
            return None;
        }
        self.step += 1;
        let p = self.movable[rng.random_range(0..self.movable.len())];
        self.states[p] = !self.states[p];
        for j in &self.closed[p] {
            let c = &mut self.count[j.index()];
            if self.states[p] == CsState::InCs {
                *c += 1;
            } else {
                *c -= 1;
            }
        }
        let closed = self.closed;
        for j in &closed[p] {
            for q in &closed[j.index()] {
                let q = q.index();
                if self.mark[q] != self.step {
                    self.mark[q] = self.step;
                    self.work += closed[q].len();
                    let can = self.can_move(q);
                    note(q, can);
                    self.set(q, can);
                }
            }
        }
        Some(p)
    }
}

#[cfg(test)]
mod tests;
