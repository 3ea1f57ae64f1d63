//! Coteries (quorum systems) for the global algorithms (Kamei & Kakugawa 2019, §3.4).
//!
//! A coterie under the processes `0..n` gives each process P_i a quorum Q_i ⊆ V such that
//! (Definition 3) every quorum is non-empty, any two quorums intersect, and no quorum is a
//! proper subset of another (two processes may share the same quorum). Alongside Q_i the
//! coterie keeps R_i = {k : P_i ∈ Q_k}, the processes whose quorum contains P_i (the
//! processes P_i serves as an arbiter).
//!
//! Constructions:
//! - [`Coterie::majority`] (Example 1): for odd n, the n cyclic windows
//!   Q_i = {P_i, P_{i+1}, ..., P_{i+(n−1)/2}} (indices mod n) of size (n+1)/2; any two
//!   windows of more than n/2 processes meet. For even n = 2m ≥ 4, the paper's rule
//!   C_maj = C_1 ∪ C_2 with |Q| = m in C_1 and m+1 in C_2 and no C_1 quorum inside a C_2
//!   quorum: C_1 holds the windows of size m that contain P0 (P_i's own window
//!   {P_i..P_{i+m−1}} when it contains P0, i.e. i = 0 or i > m), C_2 holds windows of size
//!   m+1 of the line P1..P_{n−1} (for 1 ≤ i ≤ m, the window starting at min(i, m−1), which
//!   contains P_i). Two C_1 quorums share P0, two C_2 quorums have 2m+2 members among n−1
//!   processes, a C_1 and a C_2 quorum have n+1 members among n processes: they intersect;
//!   no C_1 quorum lies in a C_2 quorum (P0), none of C_2 in C_1 (size). n = 2 has only one
//!   coterie with P_i ∈ Q_i: both quorums are {P0, P1} (C_1 is empty).
//! - [`Coterie::grid`] (Example 2): the processes fill a grid row by row and Q_i is the union
//!   of P_i's row and column. For square n every quorum has 2√n−1 members. Otherwise the grid
//!   has c = ⌈√n⌉ columns and r = ⌈n/c⌉ rows (r ∈ {c−1, c}), and its last row holds only
//!   w = n − c(r−1) processes. Each empty cell (r−1, x), x ≥ w, is *hosted* by a process:
//!   by the last row's process (r−1, x mod w) when w ≥ 2, by the column's top process (0, x)
//!   when w = 1. A quorum is the set of hosts of the cells of P_i's row and column, so it has
//!   at most c+r−1 ≤ 2⌈√n⌉−1 members. *Intersection*: any row of the full virtual grid meets
//!   any column in a cell, and that cell's host is in both quorums. *Minimality*: when w ≥ 2
//!   every virtual column holds exactly one process of the last row, every row has at least
//!   two processes, and a quorum inside another would need a row or a column of one process
//!   (or, with r = 2, the same column host: then the quorums are equal); when w = 1 the last
//!   row's process P_z shares its quorum with P0 exactly, and the only proper inclusion left
//!   needs r = 2 and w = 1, i.e. n = 3. For n = 3 no row/column layout with P_i ∈ Q_i is
//!   minimal (in the 2×2 layout Q_0 is everybody, so every other quorum would have to be
//!   too), and the grid is a single row: every quorum is {P0, P1, P2}.
//! - [`Coterie::explicit`]: one quorum per process, validated.
//!
//! Both constructions put P_i in Q_i. They are correct by construction (above), so they do not
//! pay the O(n²·n/64) pairwise check; [`Coterie::validate`] runs it, and the unit tests run it
//! for every n up to 300.

use crate::error::{ConfigError, CoterieProblem, Problem};
use crate::id::ProcessId;

/// The most quorum entries (the sum of |Q_i| over the processes) a generated coterie may have:
/// every process of a global algorithm keeps its Q_i and R_i, each more than once when objects
/// are composed, so memory grows with this sum (about 0.3 GB per 10^7 entries for GCS).
pub const MAX_QUORUM_ENTRIES: usize = 30_000_000;

/// Refuses a generated coterie of `per_quorum` members per quorum on `n` processes when it
/// would exceed [`MAX_QUORUM_ENTRIES`].
fn within_limit(name: &str, n: usize, per_quorum: usize) -> Result<(), ConfigError> {
    let entries = n.saturating_mul(per_quorum);
    if entries > MAX_QUORUM_ENTRIES {
        return Err(ConfigError::one(Problem::Invalid(format!(
            "the {name} coterie on {n} processes has {per_quorum} members per quorum, \
             {entries} in all: more than the limit of {MAX_QUORUM_ENTRIES} \
             (memory grows with n·|Q|){}",
            if name == "majority" {
                "; the grid coterie needs about 2√n per quorum"
            } else {
                ""
            }
        ))));
    }
    Ok(())
}

/// A coterie: one quorum Q_i per process, and R_i = {k : P_i ∈ Q_k}.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Coterie {
    name: String,
    quorums: Vec<Vec<ProcessId>>,
    r: Vec<Vec<ProcessId>>,
}

impl Coterie {
    /// The majority coterie of Example 1 (see the module docs for the even-n rule): |Q_i| =
    /// (n+1)/2 for odd n, n/2 or n/2+1 for even n; P_i ∈ Q_i.
    pub fn majority(n: usize) -> Result<Coterie, ConfigError> {
        nonzero(n)?;
        within_limit("majority", n, n / 2 + 1)?;
        let window = |start: usize, len: usize| -> Vec<usize> {
            (start..start + len).map(|x| x % n).collect()
        };
        let quorums = (0..n)
            .map(|i| {
                if n % 2 == 1 {
                    window(i, n.div_ceil(2))
                } else if n == 2 {
                    vec![0, 1]
                } else {
                    let m = n / 2;
                    if i == 0 || i > m {
                        window(i, m)
                    } else {
                        window(i.min(m - 1), m + 1)
                    }
                }
            })
            .collect();
        Ok(Coterie::from_sets("majority", quorums))
    }

    /// The grid coterie of Example 2: |Q_i| = 2√n−1 for square n; for other n the layout of
    /// the module docs, with |Q_i| ≤ ⌈√n⌉ + ⌈n/⌈√n⌉⌉ − 1; P_i ∈ Q_i.
    pub fn grid(n: usize) -> Result<Coterie, ConfigError> {
        nonzero(n)?;
        let (c, r) = grid_shape(n);
        within_limit("grid", n, c + r - 1)?;
        let w = n - c * (r - 1);
        let host = |y: usize, x: usize| -> usize {
            let t = y * c + x;
            if t < n {
                t
            } else if w >= 2 {
                (r - 1) * c + x % w
            } else {
                x
            }
        };
        let quorums = (0..n)
            .map(|i| {
                let (y, x) = (i / c, i % c);
                (0..c)
                    .map(|xx| host(y, xx))
                    .chain((0..r).map(|yy| host(yy, x)))
                    .collect()
            })
            .collect();
        Ok(Coterie::from_sets("grid", quorums))
    }

    /// A coterie given as one quorum per process (`quorums[i]` is Q_i). Reports every
    /// problem: a quorum count other than n, empty quorums, members out of range or listed
    /// twice, pairs of disjoint quorums (one problem per pair), quorums that are proper
    /// subsets of others (one per pair). P_i ∈ Q_i is not required.
    pub fn explicit(n: usize, quorums: Vec<Vec<usize>>) -> Result<Coterie, ConfigError> {
        nonzero(n)?;
        let mut problems = Vec::new();
        if quorums.len() != n {
            problems.push(Problem::Coterie(CoterieProblem::WrongCount {
                quorums: quorums.len(),
                n,
            }));
        }
        for (i, q) in quorums.iter().enumerate() {
            let process = ProcessId::from(i);
            if q.is_empty() {
                problems.push(Problem::Coterie(CoterieProblem::Empty(process)));
            }
            let mut seen = std::collections::BTreeSet::new();
            for &m in q {
                if m >= n {
                    problems.push(Problem::Coterie(CoterieProblem::OutOfRange {
                        process,
                        member: m,
                        n,
                    }));
                } else if !seen.insert(m) {
                    problems.push(Problem::Coterie(CoterieProblem::Duplicate {
                        process,
                        member: ProcessId::from(m),
                    }));
                }
            }
        }
        let members: Vec<Vec<usize>> = quorums
            .into_iter()
            .map(|q| q.into_iter().filter(|&m| m < n).collect())
            .collect();
        let c = Coterie::from_sets("explicit", members);
        problems.extend(
            definition_3(&c.quorums, n)
                .into_iter()
                .filter(|p| !matches!(p, Problem::Coterie(CoterieProblem::Empty(_)))),
        );
        ConfigError::check(problems)?;
        Ok(c)
    }

    /// Checks Definition 3 pairwise: quorums are non-empty, every two quorums intersect and
    /// none is a proper subset of another. One problem per empty quorum and per offending
    /// pair. Costs O(n² · n/64).
    pub fn validate(&self) -> Result<(), ConfigError> {
        ConfigError::check(definition_3(&self.quorums, self.len()))
    }

    /// The number of processes.
    pub fn len(&self) -> usize {
        self.quorums.len()
    }

    /// Always false: a coterie has at least one process.
    pub fn is_empty(&self) -> bool {
        self.quorums.is_empty()
    }

    /// Q_p, sorted by id.
    pub fn quorum(&self, p: ProcessId) -> &[ProcessId] {
        &self.quorums[p.index()]
    }

    /// R_p = {k : P_p ∈ Q_k}, sorted by id: the processes whose quorum contains P_p.
    pub fn r(&self, p: ProcessId) -> &[ProcessId] {
        &self.r[p.index()]
    }

    /// The largest quorum size |Q|.
    pub fn max_quorum_size(&self) -> usize {
        self.quorums.iter().map(Vec::len).max().unwrap_or(0)
    }

    /// `majority`, `grid` or `explicit`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Whether P_i ∈ Q_i for every process (true for `majority` and `grid`).
    pub fn contains_self(&self) -> bool {
        self.quorums
            .iter()
            .enumerate()
            .all(|(i, q)| q.binary_search(&ProcessId::from(i)).is_ok())
    }

    /// Sorts and deduplicates the quorums, and derives R.
    fn from_sets(name: &str, quorums: Vec<Vec<usize>>) -> Coterie {
        let quorums: Vec<Vec<ProcessId>> = quorums
            .into_iter()
            .map(|mut q| {
                q.sort_unstable();
                q.dedup();
                q.into_iter().map(ProcessId::from).collect()
            })
            .collect();
        let mut r = vec![Vec::new(); quorums.len()];
        for (k, q) in quorums.iter().enumerate() {
            for p in q {
                if let Some(rp) = r.get_mut(p.index()) {
                    rp.push(ProcessId::from(k));
                }
            }
        }
        Coterie {
            name: name.to_string(),
            quorums,
            r,
        }
    }
}

/// The grid's columns c = ⌈√n⌉ and rows r = ⌈n/c⌉; n = 3 is laid out as one row of three
/// (see the module docs).
fn grid_shape(n: usize) -> (usize, usize) {
    if n == 3 {
        return (3, 1);
    }
    let mut c = n.isqrt();
    if c * c < n {
        c += 1;
    }
    (c, n.div_ceil(c))
}

/// Empty quorums, then disjoint pairs and proper inclusions among the non-empty quorums
/// (members must lie in `0..n`).
fn definition_3(quorums: &[Vec<ProcessId>], n: usize) -> Vec<Problem> {
    let words = n.div_ceil(64);
    let bits: Vec<Vec<u64>> = quorums
        .iter()
        .map(|q| {
            let mut b = vec![0u64; words];
            for p in q {
                b[p.index() / 64] |= 1 << (p.index() % 64);
            }
            b
        })
        .collect();
    let mut problems: Vec<Problem> = quorums
        .iter()
        .enumerate()
        .filter(|(_, q)| q.is_empty())
        .map(|(i, _)| Problem::Coterie(CoterieProblem::Empty(ProcessId::from(i))))
        .collect();
    for i in 0..quorums.len() {
        for j in i + 1..quorums.len() {
            if quorums[i].is_empty() || quorums[j].is_empty() {
                continue;
            }
            let (a, b) = (&bits[i], &bits[j]);
            let (pi, pj) = (ProcessId::from(i), ProcessId::from(j));
            if a.iter().zip(b).all(|(x, y)| x & y == 0) {
                problems.push(Problem::Coterie(CoterieProblem::Disjoint(pi, pj)));
                continue;
            }
            let a_in_b = a.iter().zip(b).all(|(x, y)| x & !y == 0);
            let b_in_a = a.iter().zip(b).all(|(x, y)| y & !x == 0);
            if a_in_b && !b_in_a {
                problems.push(Problem::Coterie(CoterieProblem::NotMinimal {
                    subset: pi,
                    superset: pj,
                }));
            } else if b_in_a && !a_in_b {
                problems.push(Problem::Coterie(CoterieProblem::NotMinimal {
                    subset: pj,
                    superset: pi,
                }));
            }
        }
    }
    problems
}

fn nonzero(n: usize) -> Result<(), ConfigError> {
    if n == 0 {
        Err(ConfigError::one(Problem::ZeroProcesses))
    } else {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids(v: &[ProcessId]) -> Vec<usize> {
        v.iter().map(|p| p.index()).collect()
    }

    fn problems(r: Result<Coterie, ConfigError>) -> Vec<CoterieProblem> {
        r.unwrap_err()
            .problems
            .into_iter()
            .map(|p| match p {
                Problem::Coterie(c) => c,
                other => panic!("not a coterie problem: {other}"),
            })
            .collect()
    }

    fn p(i: u32) -> ProcessId {
        ProcessId(i)
    }

    #[test]
    fn majority_and_grid_validate_with_the_expected_sizes_for_every_n_up_to_300() {
        for n in 1..=300usize {
            let maj = Coterie::majority(n).unwrap();
            maj.validate()
                .unwrap_or_else(|e| panic!("majority({n}): {e}"));
            assert!(maj.contains_self(), "majority({n})");
            assert_eq!(maj.len(), n);
            for i in 0..n {
                let size = maj.quorum(ProcessId::from(i)).len();
                if n % 2 == 1 {
                    assert_eq!(size, n.div_ceil(2), "majority({n}) Q_{i}");
                } else {
                    assert!(size == n / 2 || size == n / 2 + 1, "majority({n}) Q_{i}");
                }
            }
            let grid = Coterie::grid(n).unwrap();
            grid.validate().unwrap_or_else(|e| panic!("grid({n}): {e}"));
            assert!(grid.contains_self(), "grid({n})");
            let c = (1..=n).find(|c| c * c >= n).unwrap();
            let r = n.div_ceil(c);
            if c * c == n {
                for i in 0..n {
                    assert_eq!(
                        grid.quorum(ProcessId::from(i)).len(),
                        2 * c - 1,
                        "grid({n})"
                    );
                }
            }
            assert_eq!(grid.max_quorum_size(), c + r - 1, "grid({n})");
            assert!(grid.max_quorum_size() < 2 * c);
            for co in [&maj, &grid] {
                // R is the transpose of Q
                for k in 0..n {
                    let pk = ProcessId::from(k);
                    for &q in co.quorum(pk) {
                        assert!(co.r(q).contains(&pk));
                    }
                    for &q in co.r(pk) {
                        assert!(co.quorum(q).contains(&pk));
                    }
                }
            }
        }
    }

    #[test]
    fn larger_constructions_also_validate() {
        for n in [323, 400, 441, 500, 1000, 1001] {
            Coterie::majority(n).unwrap().validate().unwrap();
            Coterie::grid(n).unwrap().validate().unwrap();
        }
    }

    #[test]
    fn majority_matches_example_1() {
        let c = Coterie::majority(5).unwrap();
        assert_eq!(ids(c.quorum(p(0))), vec![0, 1, 2]);
        assert_eq!(ids(c.quorum(p(4))), vec![0, 1, 4]);
        let c = Coterie::majority(6).unwrap();
        // C_1: size 3 with P0; C_2: size 4 without P0
        assert_eq!(ids(c.quorum(p(0))), vec![0, 1, 2]);
        assert_eq!(ids(c.quorum(p(1))), vec![1, 2, 3, 4]);
        assert_eq!(ids(c.quorum(p(3))), vec![2, 3, 4, 5]);
        assert_eq!(ids(c.quorum(p(4))), vec![0, 4, 5]);
        assert_eq!(ids(c.quorum(p(5))), vec![0, 1, 5]);
        assert_eq!(ids(Coterie::majority(2).unwrap().quorum(p(1))), vec![0, 1]);
        assert_eq!(ids(Coterie::majority(1).unwrap().quorum(p(0))), vec![0]);
    }

    #[test]
    fn grid_matches_example_2_and_documents_the_holes() {
        let c = Coterie::grid(9).unwrap();
        assert_eq!(ids(c.quorum(p(4))), vec![1, 3, 4, 5, 7]);
        assert_eq!(ids(c.r(p(4))), vec![1, 3, 4, 5, 7]);
        // n = 5: 3 columns, 2 rows, last row P3 P4; the hole (1, 2) is hosted by P3
        let c = Coterie::grid(5).unwrap();
        assert_eq!(ids(c.quorum(p(2))), vec![0, 1, 2, 3]);
        assert_eq!(ids(c.quorum(p(4))), vec![1, 3, 4]);
        // n = 7: 3x3 with one process in the last row; holes hosted by the column tops
        let c = Coterie::grid(7).unwrap();
        assert_eq!(ids(c.quorum(p(6))), vec![0, 1, 2, 3, 6]);
        assert_eq!(ids(c.quorum(p(0))), vec![0, 1, 2, 3, 6]);
        assert_eq!(ids(c.quorum(p(5))), vec![2, 3, 4, 5]);
        assert_eq!(ids(Coterie::grid(3).unwrap().quorum(p(1))), vec![0, 1, 2]);
    }

    #[test]
    fn the_constructions_are_named_and_refuse_zero_processes() {
        assert_eq!(Coterie::grid(16).unwrap().name(), "grid");
        assert_eq!(Coterie::majority(16).unwrap().max_quorum_size(), 9);
        assert_eq!(
            Coterie::grid(0).unwrap_err().problems,
            vec![Problem::ZeroProcesses]
        );
        assert_eq!(
            Coterie::majority(0).unwrap_err().problems,
            vec![Problem::ZeroProcesses]
        );
    }

    #[test]
    fn explicit_accepts_a_valid_coterie_and_sorts_it() {
        let c = Coterie::explicit(3, vec![vec![1, 0], vec![2, 1], vec![0, 2]]).unwrap();
        assert_eq!(ids(c.quorum(p(0))), vec![0, 1]);
        assert_eq!(ids(c.r(p(0))), vec![0, 2]);
        assert_eq!(c.name(), "explicit");
        // P_i ∉ Q_i is allowed: everyone asks P0
        let c = Coterie::explicit(3, vec![vec![0]; 3]).unwrap();
        assert!(!c.contains_self());
    }

    #[test]
    fn explicit_reports_a_wrong_quorum_count() {
        assert_eq!(
            problems(Coterie::explicit(3, vec![vec![0], vec![0]])),
            vec![CoterieProblem::WrongCount { quorums: 2, n: 3 }]
        );
    }

    #[test]
    fn explicit_reports_empty_out_of_range_and_duplicate_members() {
        let got = problems(Coterie::explicit(
            3,
            vec![vec![], vec![1, 7, 1], vec![0, 5]],
        ));
        assert_eq!(
            got,
            vec![
                CoterieProblem::Empty(p(0)),
                CoterieProblem::OutOfRange {
                    process: p(1),
                    member: 7,
                    n: 3
                },
                CoterieProblem::Duplicate {
                    process: p(1),
                    member: p(1)
                },
                CoterieProblem::OutOfRange {
                    process: p(2),
                    member: 5,
                    n: 3
                },
                // what is left of Q_1 and Q_2 ({P1} and {P0}) is checked too
                CoterieProblem::Disjoint(p(1), p(2)),
            ]
        );
    }

    #[test]
    fn explicit_reports_every_disjoint_pair() {
        let got = problems(Coterie::explicit(
            4,
            vec![vec![0, 1], vec![1, 2], vec![2, 3], vec![3, 0]],
        ));
        assert_eq!(
            got,
            vec![
                CoterieProblem::Disjoint(p(0), p(2)),
                CoterieProblem::Disjoint(p(1), p(3)),
            ]
        );
    }

    #[test]
    fn explicit_reports_every_non_minimal_pair() {
        let got = problems(Coterie::explicit(
            3,
            vec![vec![0, 1, 2], vec![1], vec![0, 1]],
        ));
        assert_eq!(
            got,
            vec![
                CoterieProblem::NotMinimal {
                    subset: p(1),
                    superset: p(0)
                },
                CoterieProblem::NotMinimal {
                    subset: p(2),
                    superset: p(0)
                },
                CoterieProblem::NotMinimal {
                    subset: p(1),
                    superset: p(2)
                },
            ]
        );
        // equal quorums are one quorum of the coterie: fine
        Coterie::explicit(2, vec![vec![0, 1], vec![1, 0]]).unwrap();
    }

    #[test]
    fn every_problem_displays_as_one_line() {
        // P2's quorum names only P9: out of range, and what is left of it is empty
        let err = Coterie::explicit(4, vec![vec![0, 1], vec![2, 3], vec![9], vec![]]).unwrap_err();
        for line in err.to_string().lines() {
            assert!(line.starts_with("coterie: "), "{line}");
        }
        assert_eq!(err.problems.len(), 3, "{err}");
        assert_eq!(
            err.problems[2],
            Problem::Coterie(CoterieProblem::Disjoint(p(0), p(1)))
        );
    }
}
