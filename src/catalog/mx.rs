//! The mutual-exclusion objects MUTIN(l), kmex and GCS can run inside (`--mx`): [`InnerMutex`], its
//! default and [`check_mx`].

use crate::error::Problem;

#[cfg(doc)]
use super::SystemSpec;

/// The mutual-exclusion object inside MUTIN(l), kmex and GCS when `--mx` is not given.
pub const DEFAULT_MX: InnerMutex = InnerMutex::Maekawa;

/// The mutual-exclusion object inside MUTIN(l), kmex and GCS (`--mx NAME`, `mx = "NAME"`,
/// [`QuotaBuilder::mx`](crate::QuotaBuilder::mx)). Adding one is a variant here and one
/// match arm in [`SystemSpec::build`].
///
/// The defaults differ on purpose: the CLI and cluster files run the papers' composition,
/// Maekawa on the same coterie ([`DEFAULT_MX`]), which the figures and errata reproduce; the
/// quota runs the migrating controller with a central queue, about 3 messages a pair where
/// Maekawa costs O(|Q|), because an embedded quota is judged by its cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum InnerMutex {
    /// The migrating controller with a central queue (the quota's default): 3 + (n−1)/maxreq
    /// remote messages.
    Cdc,
    /// The migrating controller with a distributed queue: 3..5 + (n−1)/maxreq.
    Ddc,
    /// Maekawa's quorum mutual exclusion on the same quorums (the CLI's default): O(|Q|)
    /// messages.
    Maekawa,
    /// LMUTEX with k = 1 on all members (the complete graph): a global mutual exclusion,
    /// O(n) messages.
    Lmutex,
}

impl InnerMutex {
    const ALL: [InnerMutex; 4] = [
        InnerMutex::Maekawa,
        InnerMutex::Lmutex,
        InnerMutex::Cdc,
        InnerMutex::Ddc,
    ];

    /// The name the CLI, cluster files and sweep grids give it.
    pub fn name(self) -> &'static str {
        match self {
            InnerMutex::Maekawa => "maekawa",
            InnerMutex::Lmutex => "lmutex",
            InnerMutex::Cdc => "cdc",
            InnerMutex::Ddc => "ddc",
        }
    }

    /// The options (CLI flags) of this mutual-exclusion object.
    pub(super) fn options(self) -> &'static [&'static str] {
        match self {
            InnerMutex::Maekawa | InnerMutex::Lmutex => &[],
            InnerMutex::Cdc | InnerMutex::Ddc => &["--maxreq", "--migrate-after"],
        }
    }
}

impl std::fmt::Display for InnerMutex {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

impl std::str::FromStr for InnerMutex {
    type Err = Problem;
    /// `maekawa`, `lmutex`, `cdc` or `ddc`; anything else is [`Problem::UnknownMx`] naming
    /// the accepted ones.
    fn from_str(s: &str) -> Result<InnerMutex, Problem> {
        InnerMutex::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| Problem::UnknownMx {
                given: s.to_string(),
                accepted: InnerMutex::ALL
                    .iter()
                    .map(|m| m.name().to_string())
                    .collect(),
            })
    }
}

/// Checks the name of a mutual-exclusion object (`--mx`): `Ok` for one MUTIN(l), kmex and
/// GCS can run inside, [`Problem::UnknownMx`] naming it and the accepted ones otherwise.
pub fn check_mx(name: &str) -> Result<(), Problem> {
    name.parse::<InnerMutex>().map(|_| ())
}
