//! The quorum systems the global algorithms run on (`--coterie`): [`QuorumSystem`] and its
//! default.

use crate::error::{ConfigError, CoterieProblem, Problem};
use crate::quorum::Coterie;

#[cfg(doc)]
use super::SystemSpec;

/// The quorum system of Maekawa and the global algorithms when `--coterie` is not given.
pub const DEFAULT_COTERIE: QuorumSystem = QuorumSystem::Majority;

/// The quorum system of Maekawa and the global algorithms (`--coterie NAME`,
/// `coterie = "NAME"`, [`QuotaBuilder::coterie`](crate::QuotaBuilder::coterie)).
///
/// The defaults differ on purpose: the CLI and cluster files run majorities
/// ([`DEFAULT_COTERIE`]), the papers' examples, which the figures reproduce; the quota runs
/// the grid, whose quorums of about 2√n − 1 cost fewer messages than majorities from 9
/// members on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QuorumSystem {
    /// Every majority of the members: |Q| = ⌊n/2⌋ + 1 (`majority`; the CLI's default).
    Majority,
    /// A row and a column of a √n × √n grid: |Q| ≈ 2√n − 1 (`grid`; the quota's default).
    Grid,
}

impl QuorumSystem {
    const ALL: [QuorumSystem; 2] = [QuorumSystem::Majority, QuorumSystem::Grid];

    /// The name the CLI, cluster files and sweep grids give it.
    pub fn name(self) -> &'static str {
        match self {
            QuorumSystem::Majority => "majority",
            QuorumSystem::Grid => "grid",
        }
    }

    /// Its coterie on `n` processes.
    pub fn coterie(self, n: usize) -> Result<Coterie, ConfigError> {
        match self {
            QuorumSystem::Majority => Coterie::majority(n),
            QuorumSystem::Grid => Coterie::grid(n),
        }
    }
}

impl std::fmt::Display for QuorumSystem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for QuorumSystem {
    type Err = Problem;
    /// `majority` or `grid`; anything else is [`CoterieProblem::UnknownName`].
    fn from_str(s: &str) -> Result<QuorumSystem, Problem> {
        QuorumSystem::ALL
            .into_iter()
            .find(|q| q.name() == s)
            .ok_or_else(|| Problem::Coterie(CoterieProblem::UnknownName(s.to_string())))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_parse_back_and_anything_else_is_an_unknown_coterie() {
        for q in QuorumSystem::ALL {
            assert_eq!(q.name().parse::<QuorumSystem>(), Ok(q));
            assert_eq!(q.coterie(9).unwrap().name(), q.name());
        }
        assert_eq!(
            "tree".parse::<QuorumSystem>(),
            Err(Problem::Coterie(CoterieProblem::UnknownName("tree".into()))),
            "only majority and grid are built"
        );
    }
}
