//! The exact configuration graph of a small instance: is a stall the instance's or the
//! algorithm's?
//!
//! A configuration is *safe* when every process's bounds hold in it; processes change state
//! one at a time, so the problem's runs walk the graph whose nodes are the safe
//! configurations and whose edges flip one process and stay safe. In a workload in which every
//! process keeps moving (the concurrent workload: every process alternates Exit and Entry for
//! as long as the run lasts), a run eventually stays inside one strongly connected component
//! of that graph (the components form a DAG), so a process that no edge inside that component
//! flips never moves again. Call a component **live** when every process flips inside it.
//! Then, exactly:
//!
//! - from a configuration whose component reaches no live one, *no* algorithm lets every
//!   process keep moving (the configuration is a **trap**);
//! - a run that stalls while its configurations stay in a live component stalled by the
//!   algorithm's choices: every process could have moved.
//!
//! [`ConfigurationGraph::of`] builds the graph by enumeration (2^n configurations), so it is
//! limited to [`MAX_EXACT_PROCESSES`]; `examples/lkcs_oracle.rs` applies it to the runs of the
//! LKCS liveness sweep (docs/lkcs-liveness.md).

use crate::config::Instance;
use crate::cs::CsState;
use crate::error::Problem;
use crate::id::ProcessId;

/// The largest instance [`ConfigurationGraph::of`] enumerates: 2^24 configurations, up to
/// about 400 MB while the components are computed (three 32-bit arrays and a flag per
/// configuration, and the search's two stacks).
pub const MAX_EXACT_PROCESSES: usize = 24;

/// Not visited yet (a configuration), or not safe (a component).
const NONE: u32 = u32::MAX;
/// Visited and placed in its component, or not safe (never visited).
const DONE: u32 = u32::MAX - 1;

/// The state of Tarjan's strongly connected components algorithm.
struct Tarjan {
    index: Vec<u32>,
    low: Vec<u32>,
    on_stack: Vec<bool>,
    stack: Vec<u32>,
    next: u32,
}

impl Tarjan {
    fn visit(&mut self, v: u32) {
        self.index[v as usize] = self.next;
        self.low[v as usize] = self.next;
        self.next += 1;
        self.stack.push(v);
        self.on_stack[v as usize] = true;
    }
}

/// The safe configurations of an instance, their strongly connected components, and which
/// processes move inside each component. A configuration is a bit set: bit i is P_i in the
/// CS.
#[derive(Clone, Debug)]
pub struct ConfigurationGraph {
    n: usize,
    /// The component of every configuration; [`NONE`] for an unsafe one.
    component: Vec<u32>,
    /// Per component, the processes an edge inside it flips (bit i: P_i).
    movers: Vec<u32>,
    /// Per component, whether it reaches a live component (itself included).
    reaches_live: Vec<bool>,
    safe: usize,
}

/// The number of configurations in each class of [`ConfigurationGraph::census`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Census {
    /// Safe configurations.
    pub safe: usize,
    /// Strongly connected components of the safe configurations.
    pub components: usize,
    /// Components in which every process moves.
    pub live_components: usize,
    /// Safe configurations in a live component.
    pub in_live: usize,
    /// Safe configurations whose component reaches no live one: traps.
    pub traps: usize,
}

impl ConfigurationGraph {
    /// Enumerates the instance's safe configurations and their components; refuses an
    /// instance of more than [`MAX_EXACT_PROCESSES`] processes.
    pub fn of(inst: &Instance) -> Result<ConfigurationGraph, Problem> {
        let n = inst.len();
        if n > MAX_EXACT_PROCESSES {
            return Err(Problem::Invalid(format!(
                "the exact configuration graph enumerates 2^n configurations: {n} processes \
                 is more than the limit of {MAX_EXACT_PROCESSES}"
            )));
        }
        let t = inst.topology();
        let masks: Vec<u32> = t
            .processes()
            .map(|p| t.closed(p).iter().fold(0, |m, q| m | 1 << q.index()))
            .collect();
        let bounds = inst.all_bounds();
        let is_safe = |c: u32| {
            masks
                .iter()
                .zip(bounds)
                .all(|(&m, b)| (b.l..=b.k).contains(&((c & m).count_ones() as usize)))
        };
        let total = 1usize << n;
        let mut component = vec![NONE; total];
        let mut index = vec![NONE; total];
        let mut safe = 0;
        for (c, slot) in index.iter_mut().enumerate() {
            if is_safe(c as u32) {
                safe += 1;
            } else {
                // an unsafe configuration is never visited
                *slot = DONE;
            }
        }
        // Tarjan's algorithm, iterative; it numbers components in reverse topological order,
        // so a component's successors all have smaller numbers.
        let mut t = Tarjan {
            index,
            low: vec![0; total],
            on_stack: vec![false; total],
            stack: Vec::new(),
            next: 0,
        };
        let mut calls: Vec<(u32, u32)> = Vec::new();
        let mut count = 0u32;
        for root in 0..total {
            if t.index[root] != NONE {
                continue;
            }
            t.visit(root as u32);
            calls.push((root as u32, 0));
            while let Some(&mut (v, ref mut edge)) = calls.last_mut() {
                if (*edge as usize) < n {
                    let w = v ^ (1 << *edge);
                    *edge += 1;
                    match t.index[w as usize] {
                        DONE => {}
                        NONE => {
                            t.visit(w);
                            calls.push((w, 0));
                        }
                        x if t.on_stack[w as usize] => {
                            t.low[v as usize] = t.low[v as usize].min(x);
                        }
                        _ => {}
                    }
                    continue;
                }
                calls.pop();
                if let Some(&(u, _)) = calls.last() {
                    t.low[u as usize] = t.low[u as usize].min(t.low[v as usize]);
                }
                if t.low[v as usize] == t.index[v as usize] {
                    while let Some(w) = t.stack.pop() {
                        t.on_stack[w as usize] = false;
                        t.index[w as usize] = DONE;
                        component[w as usize] = count;
                        if w == v {
                            break;
                        }
                    }
                    count += 1;
                }
            }
        }
        let all = if n == 0 { 0 } else { u32::MAX >> (32 - n) };
        let mut movers = vec![0u32; count as usize];
        let mut successors: Vec<Vec<u32>> = vec![Vec::new(); count as usize];
        for c in 0..total {
            let from = component[c];
            if from == NONE {
                continue;
            }
            for p in 0..n {
                let to = component[c ^ (1 << p)];
                if to == from {
                    movers[from as usize] |= 1 << p;
                } else if to != NONE {
                    successors[from as usize].push(to);
                }
            }
        }
        let mut reaches_live: Vec<bool> = movers.iter().map(|&m| m == all).collect();
        for c in 0..count as usize {
            if !reaches_live[c] {
                reaches_live[c] = successors[c].iter().any(|&s| reaches_live[s as usize]);
            }
        }
        Ok(ConfigurationGraph {
            n,
            component,
            movers,
            reaches_live,
            safe,
        })
    }

    /// The configuration `states` as a bit set.
    fn bits(states: &[CsState]) -> usize {
        states
            .iter()
            .enumerate()
            .filter(|&(_, &s)| s == CsState::InCs)
            .fold(0, |m, (i, _)| m | 1 << i)
    }

    /// The component of `states`; `None` when it is not safe (or not of this instance's size).
    pub fn component(&self, states: &[CsState]) -> Option<usize> {
        if states.len() != self.n {
            return None;
        }
        let c = self.component[Self::bits(states)];
        (c != NONE).then_some(c as usize)
    }

    /// The processes that some edge inside component `c` flips (they can move forever
    /// there); the others never move again once a run stays in `c`.
    pub fn movers(&self, c: usize) -> Vec<ProcessId> {
        (0..self.n)
            .filter(|&p| self.movers[c] & 1 << p != 0)
            .map(|p| ProcessId(p as u32))
            .collect()
    }

    /// Whether every process moves inside component `c`.
    pub fn is_live(&self, c: usize) -> bool {
        self.movers[c].count_ones() as usize == self.n
    }

    /// Whether component `c` reaches a live component (itself included); if not, its
    /// configurations are traps.
    pub fn reaches_live(&self, c: usize) -> bool {
        self.reaches_live[c]
    }

    /// How many configurations fall in each class.
    pub fn census(&self) -> Census {
        let mut census = Census {
            safe: self.safe,
            components: self.movers.len(),
            live_components: (0..self.movers.len()).filter(|&c| self.is_live(c)).count(),
            in_live: 0,
            traps: 0,
        };
        for &c in self.component.iter().filter(|&&c| c != NONE) {
            census.in_live += usize::from(self.is_live(c as usize));
            census.traps += usize::from(!self.reaches_live[c as usize]);
        }
        census
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Bounds;
    use crate::topology::Topology;

    fn states(n: usize, inside: &[usize]) -> Vec<CsState> {
        (0..n)
            .map(|i| {
                if inside.contains(&i) {
                    CsState::InCs
                } else {
                    CsState::OutCs
                }
            })
            .collect()
    }

    /// Brute force over the same definitions: is `to` reachable from `from` by safe flips?
    fn reachable(inst: &Instance, from: usize, to: usize) -> bool {
        let n = inst.len();
        let safe = |c: usize| inst.violations(&bits_to_states(n, c)).is_empty();
        let mut seen = vec![false; 1 << n];
        let mut todo = vec![from];
        seen[from] = true;
        while let Some(c) = todo.pop() {
            if c == to {
                return true;
            }
            for p in 0..n {
                let w = c ^ 1 << p;
                if !seen[w] && safe(w) {
                    seen[w] = true;
                    todo.push(w);
                }
            }
        }
        false
    }

    fn bits_to_states(n: usize, c: usize) -> Vec<CsState> {
        (0..n)
            .map(|i| {
                if c & 1 << i != 0 {
                    CsState::InCs
                } else {
                    CsState::OutCs
                }
            })
            .collect()
    }

    #[test]
    fn mutual_exclusion_on_a_triangle_is_one_live_component() {
        // l = 0, k = 1 on complete:3: the empty configuration and the three singletons.
        let t = Topology::complete(3).unwrap();
        let inst = Instance::new(t, vec![Bounds { l: 0, k: 1 }; 3]).unwrap();
        let g = ConfigurationGraph::of(&inst).unwrap();
        let c = g.census();
        assert_eq!((c.safe, c.components, c.live_components), (4, 1, 1));
        assert_eq!((c.in_live, c.traps), (4, 0));
        assert!(g.component(&states(3, &[0, 1])).is_none());
    }

    #[test]
    fn one_or_two_in_the_cs_is_one_live_component() {
        // l = 1, k = 2 on complete:3: from {P0} P0 may not leave but another may enter; from
        // {P0, P1} either may leave: one live component of the 6 safe configurations.
        let t = Topology::complete(3).unwrap();
        let inst = Instance::new(t, vec![Bounds { l: 1, k: 2 }; 3]).unwrap();
        let g = ConfigurationGraph::of(&inst).unwrap();
        assert_eq!(g.census().safe, 6);
        assert!(g.census().traps == 0 && g.census().live_components == 1);
    }

    #[test]
    fn a_frozen_path_is_all_traps_and_components_are_mutual_reachability() {
        // path:4 with at least 2 of {P0, P1, P2} in the CS (l_1 = 2) and at most 1 of
        // {P1, P2, P3} (k_2 = 1): the safe configurations are {P0, P1} and {P0, P2}, and no
        // single move leaves either.
        let t = Topology::path(4).unwrap();
        let bounds = vec![
            Bounds { l: 0, k: 2 },
            Bounds { l: 2, k: 3 },
            Bounds { l: 0, k: 1 },
            Bounds { l: 0, k: 2 },
        ];
        let inst = Instance::new(t, bounds).unwrap();
        let g = ConfigurationGraph::of(&inst).unwrap();
        let census = g.census();
        assert_eq!((census.safe, census.components), (2, 2));
        assert_eq!(
            (census.live_components, census.in_live, census.traps),
            (0, 0, 2)
        );
        let c = g.component(&states(4, &[0, 1])).unwrap();
        assert!(g.movers(c).is_empty() && !g.reaches_live(c));
        assert_ne!(Some(c), g.component(&states(4, &[0, 2])));
        assert!(g.component(&states(4, &[0])).is_none());
    }

    #[test]
    fn random_instances_agree_with_brute_force_reachability() {
        let (mut traps, mut live) = (0, 0);
        for seed in 0..6u64 {
            let t = Topology::random(9, 0.45, seed).unwrap();
            let bounds = t
                .processes()
                .map(|p| {
                    let closed = t.degree(p) + 1;
                    // little slack (k_i - l_i = 2 where the neighbourhood allows) makes traps
                    let l = (closed - 1) / 2;
                    Bounds {
                        l,
                        k: closed.min(l + 2),
                    }
                })
                .collect();
            let inst = Instance::new(t, bounds).unwrap();
            let g = ConfigurationGraph::of(&inst).unwrap();
            let n = inst.len();
            let safe: Vec<usize> = (0..1 << n)
                .filter(|&c| inst.violations(&bits_to_states(n, c)).is_empty())
                .collect();
            assert_eq!(g.census().safe, safe.len());
            traps += g.census().traps;
            live += g.census().live_components;
            for &a in safe.iter().step_by(7) {
                let ca = g.component(&bits_to_states(n, a)).unwrap();
                // components are the classes of mutual reachability
                for &b in safe.iter().step_by(5) {
                    let cb = g.component(&bits_to_states(n, b)).unwrap();
                    let mutual = reachable(&inst, a, b) && reachable(&inst, b, a);
                    assert_eq!(ca == cb, mutual, "seed {seed}: {a:b} and {b:b}");
                }
                // a live component lets every process flip without leaving it
                if g.is_live(ca) {
                    assert_eq!(g.movers(ca).len(), n);
                }
                let trap = !g.reaches_live(ca);
                let reaches = safe.iter().any(|&b| {
                    let cb = g.component(&bits_to_states(n, b)).unwrap();
                    g.is_live(cb) && reachable(&inst, a, b)
                });
                assert_eq!(trap, !reaches, "seed {seed}, configuration {a:b}");
            }
        }
        // the draw exercises both classes
        assert!(
            traps > 0 && live > 0,
            "traps {traps}, live components {live}"
        );
    }

    #[test]
    fn refuses_large_instances() {
        let t = Topology::ring(MAX_EXACT_PROCESSES + 1).unwrap();
        let n = t.len();
        let inst = Instance::new(t, vec![Bounds { l: 0, k: 3 }; n]).unwrap();
        let e = ConfigurationGraph::of(&inst).unwrap_err();
        assert!(e.to_string().contains("more than the limit of 24"), "{e}");
    }
}
