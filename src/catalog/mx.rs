//! The mutual-exclusion objects MUTIN(l), kmex and GCS can run inside (`--mx`): [`Mx`], its
//! default and [`check_mx`].

use crate::error::Problem;

#[cfg(doc)]
use super::SystemSpec;

/// The mutual-exclusion object inside MUTIN(l) when `--mx` is not given.
pub const DEFAULT_MX: &str = "maekawa";

/// The mutual-exclusion objects MUTIN(l), kmex and GCS can run inside. Adding one is a
/// variant here and one match arm in [`SystemSpec::build`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Mx {
    /// Maekawa's quorum mutual exclusion on the same coterie: O(|Q|) messages.
    Maekawa,
    /// LMUTEX with k_i = 1 on the complete graph: a global mutual exclusion, O(n) messages.
    Lmutex,
    /// The migrating controller with a centralized queue: 3 + (n−1)/maxreq remote messages.
    Cdc,
    /// The migrating controller with a distributed queue: 3..5 + (n−1)/maxreq.
    Ddc,
}

impl Mx {
    const ALL: [Mx; 4] = [Mx::Maekawa, Mx::Lmutex, Mx::Cdc, Mx::Ddc];

    pub(super) fn name(self) -> &'static str {
        match self {
            Mx::Maekawa => "maekawa",
            Mx::Lmutex => "lmutex",
            Mx::Cdc => "cdc",
            Mx::Ddc => "ddc",
        }
    }

    /// The options (CLI flags) of this mutual-exclusion object.
    pub(super) fn options(self) -> &'static [&'static str] {
        match self {
            Mx::Maekawa | Mx::Lmutex => &[],
            Mx::Cdc | Mx::Ddc => &["--maxreq", "--migrate-after"],
        }
    }

    pub(super) fn parse(s: &str) -> Result<Mx, Problem> {
        Mx::ALL
            .into_iter()
            .find(|m| m.name() == s)
            .ok_or_else(|| Problem::UnknownMx {
                given: s.to_string(),
                accepted: Mx::ALL.iter().map(|m| m.name().to_string()).collect(),
            })
    }
}

/// Checks the name of a mutual-exclusion object (`--mx`): `Ok` for one MUTIN(l), kmex and
/// GCS can run inside, [`Problem::UnknownMx`] naming it and the accepted ones otherwise.
pub fn check_mx(name: &str) -> Result<(), Problem> {
    Mx::parse(name).map(|_| ())
}
