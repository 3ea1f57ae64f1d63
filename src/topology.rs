//! Communication graphs: generators, parsing of `kind:args` specifications, validation and
//! hop distances.
//!
//! Every graph is simple and undirected, and connected unless it is a view's graph
//! ([`Topology::induced`]: the members that remain of a connected graph); neighbour lists are
//! sorted by id, so iteration order is deterministic.

use crate::error::{ConfigError, Problem};
use crate::id::ProcessId;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// How many graphs `random:N:P:SEED` draws before it gives up on finding a connected one.
const RANDOM_ATTEMPTS: usize = 10_000;
/// The coin flips every draw of a random graph may spend in total (a draw flips n(n−1)/2).
const RANDOM_FLIPS: f64 = 4e8;
/// A random graph is refused at once when the expected number of isolated processes in a draw
/// is above this: a draw is then connected with probability below about e^-20.
const MAX_EXPECTED_ISOLATED: f64 = 20.0;

/// [`Topology::MAX_PROCESSES`], for the code of this file.
const MAX_PROCESSES: usize = 1_000_000;

/// [`Topology::MAX_EDGES`], for the code of this file.
const MAX_EDGES: usize = 10_000_000;

/// An undirected, simple communication graph over processes `0..n`, connected unless built by
/// [`Topology::induced`].
///
/// Memory is O(n + edges): neighbour lists are one flat array indexed by per-process offsets.
/// The complete graph is implicit: one table of 2n ids, whatever n, so the global algorithms
/// run on `complete:N` without n² anywhere.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    name: String,
    graph: Graph,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Graph {
    /// Neighbours of `p`: `targets[offsets[p]..offsets[p + 1]]`, sorted by id.
    Lists {
        offsets: Vec<usize>,
        targets: Vec<ProcessId>,
        complete: bool,
    },
    /// The complete graph: `cycle` is `0..n` twice, and the neighbours of `p` are the slice
    /// `cycle[p + 1..p + n]`, the other processes from `p + 1` round to `p − 1`.
    Complete { cycle: Vec<ProcessId> },
}

impl Topology {
    /// The largest number of processes a topology may have.
    pub const MAX_PROCESSES: usize = MAX_PROCESSES;

    /// The largest number of edges a stored topology may have (the complete graph is not
    /// stored: [`Topology::complete`] takes any `n` up to [`Topology::MAX_PROCESSES`]).
    pub const MAX_EDGES: usize = MAX_EDGES;

    /// Builds a graph from an edge list, reporting every problem found (out-of-range ends,
    /// self-loops, zero processes, disconnection). Duplicate edges, in either direction,
    /// are merged.
    pub fn from_edges(
        name: impl Into<String>,
        n: usize,
        edges: &[(usize, usize)],
    ) -> Result<Topology, ConfigError> {
        let mut problems = Vec::new();
        if n == 0 {
            problems.push(Problem::ZeroProcesses);
        }
        if n > MAX_PROCESSES || edges.len() > MAX_EDGES {
            return Err(ConfigError::one(Problem::Invalid(format!(
                "{n} processes and {} edges exceed the limits of {MAX_PROCESSES} processes and {MAX_EDGES} edges",
                edges.len()
            ))));
        }
        let mut arcs: Vec<(u32, u32)> = Vec::with_capacity(2 * edges.len());
        for &(a, b) in edges {
            if a >= n || b >= n {
                problems.push(Problem::EdgeOutOfRange { edge: (a, b), n });
            } else if a == b {
                problems.push(Problem::SelfLoop(ProcessId::from(a)));
            } else {
                // both ends fit in u32: n <= MAX_PROCESSES
                arcs.push((a as u32, b as u32));
                arcs.push((b as u32, a as u32));
            }
        }
        ConfigError::check(problems)?;
        let topo = Topology::from_arcs(name.into(), n, arcs);
        if let Some(p) = topo
            .distances(ProcessId(0))
            .iter()
            .position(Option::is_none)
        {
            return Err(ConfigError::one(Problem::Disconnected {
                unreachable: ProcessId::from(p),
            }));
        }
        Ok(topo)
    }

    /// The graph of directed arcs `arcs` (each edge in both directions) over `0..n`, `n ≥ 1`,
    /// with no self-loop: sorted and deduplicated into neighbour lists. Does not check
    /// connectivity.
    fn from_arcs(name: String, n: usize, mut arcs: Vec<(u32, u32)>) -> Topology {
        arcs.sort_unstable();
        arcs.dedup();
        let mut offsets = vec![0; n + 1];
        for &(a, _) in &arcs {
            offsets[a as usize + 1] += 1;
        }
        for i in 0..n {
            offsets[i + 1] += offsets[i];
        }
        let complete = arcs.len() == n * (n - 1);
        Topology {
            name,
            graph: Graph::Lists {
                offsets,
                targets: arcs.into_iter().map(|(_, b)| ProcessId(b)).collect(),
                complete,
            },
        }
    }

    /// The subgraph induced by `members` (distinct ids of this graph, in the order given),
    /// renumbered: member `members[i]` becomes process `i`, and two members are neighbours
    /// when they were. This is a view's graph: the cluster's graph without the members the
    /// view evicted. It may be disconnected (a ring without two members that are not
    /// neighbours is two paths), which the local algorithms allow: each bound is about one
    /// closed neighbourhood. The complete graph stays complete (and implicit).
    ///
    /// Refuses an empty member list ([`Problem::ZeroProcesses`]), an id outside the graph
    /// ([`Problem::UnknownMember`]) and an id given twice ([`Problem::MemberTwice`]).
    pub fn induced(&self, members: &[ProcessId]) -> Result<Topology, ConfigError> {
        let n = self.len();
        if members.is_empty() {
            return Err(ConfigError::one(Problem::ZeroProcesses));
        }
        let mut dense = std::collections::HashMap::with_capacity(members.len());
        for (i, &p) in members.iter().enumerate() {
            if p.index() >= n {
                return Err(ConfigError::one(Problem::UnknownMember { member: p, n }));
            }
            if dense.insert(p, i as u32).is_some() {
                return Err(ConfigError::one(Problem::MemberTwice(p)));
            }
        }
        let name = format!("{}[{} of {n}]", self.name, members.len());
        if self.is_complete() {
            let mut t = Topology::complete(members.len())?;
            t.name = name;
            return Ok(t);
        }
        let mut arcs = Vec::new();
        for (i, &p) in members.iter().enumerate() {
            for q in self.neighbors(p) {
                if let Some(&j) = dense.get(q) {
                    // i fits in u32: members are distinct processes, at most MAX_PROCESSES
                    arcs.push((i as u32, j));
                }
            }
        }
        Ok(Topology::from_arcs(name, members.len(), arcs))
    }

    /// The complete graph on `n` processes, implicit: O(n) memory.
    pub fn complete(n: usize) -> Result<Topology, ConfigError> {
        if n == 0 {
            return Err(ConfigError::one(Problem::ZeroProcesses));
        }
        if n > MAX_PROCESSES {
            return Err(bad(
                &format!("complete:{n}"),
                &format!("more than {MAX_PROCESSES} processes"),
            ));
        }
        let cycle = (0..2 * n).map(|i| ProcessId::from(i % n)).collect();
        Ok(Topology {
            name: format!("complete:{n}"),
            graph: Graph::Complete { cycle },
        })
    }

    /// The ring `P0 - P1 - ... - P(n-1) - P0`; needs `n >= 3`.
    pub fn ring(n: usize) -> Result<Topology, ConfigError> {
        if n > MAX_PROCESSES {
            return Err(bad(
                &format!("ring:{n}"),
                &format!("more than {MAX_PROCESSES} processes"),
            ));
        }
        if n < 3 {
            return Err(bad(
                &format!("ring:{n}"),
                "a ring needs at least 3 processes",
            ));
        }
        let edges: Vec<_> = (0..n).map(|a| (a, (a + 1) % n)).collect();
        Topology::from_edges(format!("ring:{n}"), n, &edges)
    }

    /// The path `P0 - P1 - ... - P(n-1)`.
    pub fn path(n: usize) -> Result<Topology, ConfigError> {
        if n > MAX_PROCESSES {
            return Err(bad(
                &format!("path:{n}"),
                &format!("more than {MAX_PROCESSES} processes"),
            ));
        }
        let edges: Vec<_> = (1..n).map(|a| (a - 1, a)).collect();
        Topology::from_edges(format!("path:{n}"), n, &edges)
    }

    /// The star with centre `P0` and leaves `P1..P(n-1)`.
    pub fn star(n: usize) -> Result<Topology, ConfigError> {
        if n > MAX_PROCESSES {
            return Err(bad(
                &format!("star:{n}"),
                &format!("more than {MAX_PROCESSES} processes"),
            ));
        }
        let edges: Vec<_> = (1..n).map(|a| (0, a)).collect();
        Topology::from_edges(format!("star:{n}"), n, &edges)
    }

    /// The `rows x cols` grid; process `r * cols + c` sits at row `r`, column `c`.
    pub fn grid(rows: usize, cols: usize) -> Result<Topology, ConfigError> {
        Topology::lattice(rows, cols, false)
    }

    /// The `rows x cols` torus (a grid whose rows and columns wrap around).
    pub fn torus(rows: usize, cols: usize) -> Result<Topology, ConfigError> {
        Topology::lattice(rows, cols, true)
    }

    fn lattice(rows: usize, cols: usize, wrap: bool) -> Result<Topology, ConfigError> {
        let kind = if wrap { "torus" } else { "grid" };
        if rows.saturating_mul(cols) > MAX_PROCESSES {
            return Err(bad(
                &format!("{kind}:{rows}x{cols}"),
                &format!("more than {MAX_PROCESSES} processes"),
            ));
        }
        let id = |r: usize, c: usize| r * cols + c;
        let mut edges = Vec::new();
        for r in 0..rows {
            for c in 0..cols {
                if c + 1 < cols || (wrap && cols > 2) {
                    edges.push((id(r, c), id(r, (c + 1) % cols)));
                }
                if r + 1 < rows || (wrap && rows > 2) {
                    edges.push((id(r, c), id((r + 1) % rows, c)));
                }
            }
        }
        edges.retain(|(a, b)| a != b);
        Topology::from_edges(format!("{kind}:{rows}x{cols}"), rows * cols, &edges)
    }

    /// A connected Erdős–Rényi graph G(n, p): graphs are drawn from a ChaCha8 stream seeded
    /// with `seed` until one is connected (at most 10,000 draws, and at most 4·10^8 coin flips
    /// in all). A (n, p) whose draws are almost never connected (more than 20 isolated
    /// processes expected per draw) is refused before drawing.
    pub fn random(n: usize, p: f64, seed: u64) -> Result<Topology, ConfigError> {
        let name = format!("random:{n}:{p}:{seed}");
        if !(0.0..=1.0).contains(&p) {
            return Err(bad(&name, "the edge probability must lie in [0, 1]"));
        }
        if n == 0 {
            return Err(ConfigError::one(Problem::ZeroProcesses));
        }
        if n > MAX_PROCESSES || (n as f64) * (n as f64) * p / 2.0 > MAX_EDGES as f64 {
            return Err(bad(
                &name,
                "too large: more than the process or expected edge limit",
            ));
        }
        // A draw is connected only if no process is isolated; n(1−p)^(n−1) is the expected
        // number of isolated processes, and P(none) ≈ e^-μ, so a large μ means the draws
        // would go on (almost) forever: refuse before drawing.
        if p == 0.0 && n > 1 {
            return Err(bad(
                &name,
                "with edge probability 0 no graph of two or more processes is connected",
            ));
        }
        let isolated = if n == 1 {
            0.0
        } else {
            n as f64 * (1.0 - p).powf((n - 1) as f64)
        };
        if isolated > MAX_EXPECTED_ISOLATED {
            let needed = ((n as f64).ln() + MAX_EXPECTED_ISOLATED.ln()) / (n as f64 - 1.0);
            return Err(bad(
                &name,
                &format!(
                    "a draw is almost never connected (about {isolated:.0} isolated processes \
                     expected); raise the edge probability to at least {needed:.2e}"
                ),
            ));
        }
        let flips = (n as f64) * (n as f64 - 1.0) / 2.0;
        if flips > RANDOM_FLIPS {
            let most = (2.0 * RANDOM_FLIPS).sqrt() as usize;
            return Err(bad(
                &name,
                &format!(
                    "a draw flips a coin for every pair of processes: at most {most} processes"
                ),
            ));
        }
        let attempts = ((RANDOM_FLIPS / flips.max(1.0)) as usize).clamp(1, RANDOM_ATTEMPTS);
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        for _ in 0..attempts {
            let mut edges = Vec::new();
            for a in 0..n {
                for b in a + 1..n {
                    if rng.random_bool(p) {
                        edges.push((a, b));
                    }
                }
            }
            if let Ok(t) = Topology::from_edges(name.clone(), n, &edges) {
                return Ok(t);
            }
        }
        Err(bad(
            &name,
            &format!("no connected graph in {attempts} draws; raise the edge probability"),
        ))
    }

    /// Parses `complete:N`, `ring:N`, `path:N`, `star:N`, `grid:RxC`, `torus:RxC` or
    /// `random:N:P:SEED`.
    pub fn parse(spec: &str) -> Result<Topology, ConfigError> {
        let mut parts = spec.split(':');
        let kind = parts.next().unwrap_or_default();
        let args: Vec<&str> = parts.collect();
        let want = |count: usize| -> Result<(), ConfigError> {
            if args.len() == count {
                Ok(())
            } else {
                Err(bad(spec, &format!("`{kind}` takes {count} argument(s)")))
            }
        };
        let num = |s: &str| -> Result<usize, ConfigError> {
            s.parse()
                .map_err(|_| bad(spec, &format!("`{s}` is not a non-negative integer")))
        };
        let dims = |s: &str| -> Result<(usize, usize), ConfigError> {
            let (r, c) = s
                .split_once(['x', 'X'])
                .ok_or_else(|| bad(spec, "dimensions must look like RxC"))?;
            Ok((num(r)?, num(c)?))
        };
        match kind {
            "complete" | "ring" | "path" | "star" => {
                want(1)?;
                let n = num(args[0])?;
                match kind {
                    "complete" => Topology::complete(n),
                    "ring" => Topology::ring(n),
                    "path" => Topology::path(n),
                    _ => Topology::star(n),
                }
            }
            "grid" | "torus" => {
                want(1)?;
                let (r, c) = dims(args[0])?;
                if kind == "grid" {
                    Topology::grid(r, c)
                } else {
                    Topology::torus(r, c)
                }
            }
            "random" => {
                want(3)?;
                let n = num(args[0])?;
                let p: f64 = args[1]
                    .parse()
                    .map_err(|_| bad(spec, &format!("`{}` is not a probability", args[1])))?;
                let seed: u64 = args[2]
                    .parse()
                    .map_err(|_| bad(spec, &format!("`{}` is not a seed", args[2])))?;
                Topology::random(n, p, seed)
            }
            _ => Err(bad(
                spec,
                "unknown topology (expected complete:N, ring:N, path:N, star:N, grid:RxC, torus:RxC or random:N:P:SEED)",
            )),
        }
    }

    /// The specification this graph was built from (e.g. `torus:4x4`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The number of processes.
    pub fn len(&self) -> usize {
        match &self.graph {
            Graph::Lists { offsets, .. } => offsets.len() - 1,
            Graph::Complete { cycle } => cycle.len() / 2,
        }
    }

    /// Always false: a topology has at least one process.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// All process ids in order.
    pub fn processes(&self) -> impl Iterator<Item = ProcessId> + '_ {
        (0..self.len()).map(ProcessId::from)
    }

    /// The neighbours N_i of `p`, each once: sorted by id, except on [`Topology::complete`],
    /// whose neighbours run from `p + 1` round to `p − 1` (one shared table instead of n²
    /// entries).
    pub fn neighbors(&self, p: ProcessId) -> &[ProcessId] {
        let i = p.index();
        match &self.graph {
            Graph::Lists {
                offsets, targets, ..
            } => &targets[offsets[i]..offsets[i + 1]],
            Graph::Complete { cycle } => &cycle[i + 1..i + cycle.len() / 2],
        }
    }

    /// The degree |N_i|.
    pub fn degree(&self, p: ProcessId) -> usize {
        match &self.graph {
            Graph::Lists { offsets, .. } => offsets[p.index() + 1] - offsets[p.index()],
            Graph::Complete { cycle } => cycle.len() / 2 - 1,
        }
    }

    /// The closed neighbourhood N_i ∪ {P_i}, sorted by id.
    pub fn closed(&self, p: ProcessId) -> Vec<ProcessId> {
        match &self.graph {
            Graph::Lists { .. } => {
                let mut v = Vec::with_capacity(self.degree(p) + 1);
                v.extend_from_slice(self.neighbors(p));
                let at = v.partition_point(|&q| q < p);
                v.insert(at, p);
                v
            }
            Graph::Complete { cycle } => cycle[..cycle.len() / 2].to_vec(),
        }
    }

    /// Whether every pair of distinct processes is adjacent (O(1)).
    pub fn is_complete(&self) -> bool {
        match &self.graph {
            Graph::Lists { complete, .. } => *complete,
            Graph::Complete { .. } => true,
        }
    }

    /// For algorithms that keep every closed neighbourhood (LMUTIN, LMUTEX, LKCS): refuses a
    /// graph with more than [`Topology::MAX_EDGES`] edges, which only the implicit complete graph can
    /// have (`complete:N` for N above about 4,500).
    pub fn require_stored(&self, algorithm: &str) -> Result<(), ConfigError> {
        let m = self.edge_count();
        if m > MAX_EDGES {
            return Err(bad(
                &self.name,
                &format!(
                    "{algorithm} keeps every closed neighbourhood: {m} edges, more than the \
                     limit of {MAX_EDGES}"
                ),
            ));
        }
        Ok(())
    }

    /// The number of edges.
    pub fn edge_count(&self) -> usize {
        match &self.graph {
            Graph::Lists { targets, .. } => targets.len() / 2,
            Graph::Complete { cycle } => {
                let n = cycle.len() / 2;
                n * (n - 1) / 2
            }
        }
    }

    /// The edges `(a, b)` with `a < b`, in order.
    pub fn edges(&self) -> Vec<(ProcessId, ProcessId)> {
        self.processes()
            .flat_map(|a| {
                self.neighbors(a)
                    .iter()
                    .filter(move |&&b| a < b)
                    .map(move |&b| (a, b))
            })
            .collect()
    }

    /// Hop distances from `from` (breadth-first search); `None` for unreachable processes.
    pub fn distances(&self, from: ProcessId) -> Vec<Option<usize>> {
        let mut dist = vec![None; self.len()];
        if from.index() >= self.len() {
            return dist;
        }
        dist[from.index()] = Some(0);
        let mut queue = VecDeque::from([from]);
        while let Some(u) = queue.pop_front() {
            let d = dist[u.index()].unwrap_or(0);
            for &v in self.neighbors(u) {
                if dist[v.index()].is_none() {
                    dist[v.index()] = Some(d + 1);
                    queue.push_back(v);
                }
            }
        }
        dist
    }
}

fn bad(spec: &str, reason: &str) -> ConfigError {
    ConfigError::one(Problem::BadTopology {
        spec: spec.to_string(),
        reason: reason.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn degrees(t: &Topology) -> Vec<usize> {
        t.processes().map(|p| t.degree(p)).collect()
    }

    #[test]
    fn generators_have_the_expected_shape() {
        assert_eq!(degrees(&Topology::complete(4).unwrap()), vec![3; 4]);
        assert_eq!(degrees(&Topology::ring(5).unwrap()), vec![2; 5]);
        assert_eq!(degrees(&Topology::path(4).unwrap()), vec![1, 2, 2, 1]);
        assert_eq!(degrees(&Topology::star(4).unwrap()), vec![3, 1, 1, 1]);
        assert_eq!(degrees(&Topology::torus(4, 4).unwrap()), vec![4; 16]);
        let g = Topology::grid(3, 3).unwrap();
        assert_eq!(degrees(&g), vec![2, 3, 2, 3, 4, 3, 2, 3, 2]);
        assert_eq!(g.edges().len(), 12);
        assert!(Topology::complete(3).unwrap().is_complete());
        assert!(!Topology::ring(4).unwrap().is_complete());
    }

    #[test]
    fn closed_neighbourhood_is_sorted_and_contains_self() {
        let t = Topology::ring(5).unwrap();
        let ids: Vec<u32> = t.closed(ProcessId(0)).iter().map(|p| p.0).collect();
        assert_eq!(ids, vec![0, 1, 4]);
    }

    #[test]
    fn distances_follow_hops() {
        let t = Topology::path(4).unwrap();
        assert_eq!(
            t.distances(ProcessId(0)),
            vec![Some(0), Some(1), Some(2), Some(3)]
        );
    }

    #[test]
    fn edge_lists_are_validated() {
        let err = Topology::from_edges("x", 3, &[(0, 0), (1, 7)]).unwrap_err();
        assert_eq!(err.problems.len(), 2);
        let err = Topology::from_edges("x", 4, &[(0, 1), (2, 3)]).unwrap_err();
        assert!(matches!(err.problems[0], Problem::Disconnected { .. }));
        let err = Topology::from_edges("x", 0, &[]).expect_err("no process");
        assert_eq!(err.problems, [Problem::ZeroProcesses], "{err}");
        // duplicates in either direction are merged
        let t = Topology::from_edges("x", 2, &[(0, 1), (1, 0)]).unwrap();
        assert_eq!(t.degree(ProcessId(0)), 1);
    }

    #[test]
    fn parse_accepts_every_kind_and_rejects_junk() {
        for spec in [
            "complete:3",
            "ring:4",
            "path:2",
            "star:5",
            "grid:2x3",
            "torus:3x3",
            "random:10:0.4:7",
        ] {
            let t = Topology::parse(spec).unwrap();
            assert_eq!(t.name(), spec);
        }
        for (spec, why) in [
            ("", "unknown topology"),
            ("hex:3", "unknown topology"),
            ("ring:2", "a ring needs at least 3 processes"),
            ("complete:0", "the system has zero processes"),
            ("grid:3", "dimensions must look like RxC"),
            ("complete:x", "`x` is not a non-negative integer"),
            ("random:5:2:1", "the edge probability must lie in [0, 1]"),
            ("random:5:0.5", "`random` takes 3 argument(s)"),
        ] {
            let err = Topology::parse(spec).expect_err(spec);
            assert!(err.to_string().contains(why), "{spec}: {err}");
        }
    }

    #[test]
    fn random_graphs_are_connected_and_reproducible() {
        for seed in 0..20 {
            let a = Topology::random(12, 0.3, seed).unwrap();
            let b = Topology::random(12, 0.3, seed).unwrap();
            assert_eq!(a, b);
            assert!(a.distances(ProcessId(0)).iter().all(Option::is_some));
        }
    }

    /// Graphs that can (practically) never be connected are refused before any draw, naming the
    /// probability that would do; those just above the threshold still draw.
    #[test]
    fn hopeless_random_graphs_are_refused_at_once() {
        let err = Topology::random(2, 0.0, 1).unwrap_err().to_string();
        assert!(err.contains("edge probability 0"), "{err}");
        for (n, p) in [(20_000, 0.0001), (500, 0.001), (3000, 1e-300)] {
            let err = Topology::random(n, p, 1).unwrap_err().to_string();
            assert!(err.contains("almost never connected"), "{n} {p}: {err}");
            assert!(err.contains("raise the edge probability"), "{err}");
        }
        assert_eq!(Topology::random(1, 0.0, 1).unwrap().len(), 1);
        // ln(200)/199 ≈ 0.0266: 200·(1−0.04)^199 ≈ 0.06 isolated processes expected
        let t = Topology::random(200, 0.04, 3).unwrap();
        assert!(t.distances(ProcessId(0)).iter().all(Option::is_some));
    }

    /// The implicit complete graph answers like the stored one: same neighbours (as sets),
    /// degrees, closed neighbourhoods, edges and distances; and it takes any size up to the cap.
    #[test]
    fn the_implicit_complete_graph_matches_the_stored_one() {
        for n in 1..8 {
            let implicit = Topology::complete(n).unwrap();
            let edges: Vec<_> = (0..n)
                .flat_map(|a| (a + 1..n).map(move |b| (a, b)))
                .collect();
            let stored = Topology::from_edges("stored", n, &edges).unwrap();
            assert!(implicit.is_complete() && stored.is_complete());
            assert_eq!(implicit.edges(), stored.edges());
            assert_eq!(implicit.edge_count(), stored.edge_count());
            for p in implicit.processes() {
                let mut a = implicit.neighbors(p).to_vec();
                a.sort();
                assert_eq!(a, stored.neighbors(p), "complete:{n} {p}");
                assert_eq!(implicit.closed(p), stored.closed(p));
                assert_eq!(implicit.distances(p), stored.distances(p));
            }
        }
        let big = Topology::complete(MAX_PROCESSES).unwrap();
        assert_eq!(big.degree(ProcessId(7)), MAX_PROCESSES - 1);
        let err = Topology::complete(MAX_PROCESSES + 1).expect_err("over the cap");
        assert!(
            matches!(
                err.problems.as_slice(),
                [Problem::BadTopology { reason, .. }]
                    if *reason == format!("more than {MAX_PROCESSES} processes")
            ),
            "{err:?}"
        );
        let err = big
            .require_stored("lmutin")
            .expect_err("too many edges to store");
        assert!(
            matches!(
                err.problems.as_slice(),
                [Problem::BadTopology { reason, .. }]
                    if reason.contains("lmutin keeps every closed neighbourhood")
            ),
            "{err:?}"
        );
        assert!(Topology::torus(300, 300)
            .unwrap()
            .require_stored("lmutin")
            .is_ok());
    }
}
