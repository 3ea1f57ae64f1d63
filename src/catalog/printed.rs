//! The printed rules a spec switches on one by one ([`PrintedRules`], `--printed-rule`):
//! their validation against the algorithm and the variant, and the rules structs they give
//! each algorithm, through the one registry of switches in `algorithm.rs`.

use super::algorithm::{
    Switch, LKCS_RULES, LMUTIN_RULES, MAEKAWA_RULES, MIGRATING_RULES, MUTIN_RULES,
};
use super::SystemSpec;
use crate::algo::lkcs::LkcsRules;
use crate::algo::lmutin::LmutinRules;
use crate::algo::maekawa::MaekawaRules;
use crate::algo::migrating::MigratingRules;
use crate::algo::mutin::MutinRules;
use crate::cs::Variant;
use crate::error::{ConfigError, Problem};

/// Printed rules to switch on one by one over the corrected variant (`--printed-rule NAME`,
/// repeatable): a set of rule names, in the order first given. The names an algorithm takes
/// are `Algorithm::printed_rules`; `SystemSpec::build_with_rules` checks them. Built from
/// any iterator of names (`names.iter().collect()`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PrintedRules {
    names: Vec<String>,
}

impl PrintedRules {
    /// The rule names, each once, in the order first given.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// Whether no rule is named (the variant's own rules apply).
    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// `rules` with the switch of every rule of `table` named here turned.
    fn switched<R>(&self, table: &[Switch<R>], mut rules: R) -> R {
        for set in table
            .iter()
            .filter(|s| self.has(s.rule.name))
            .filter_map(|s| s.set)
        {
            set(&mut rules);
        }
        rules
    }

    pub(super) fn has(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }
}

impl<S: AsRef<str>> FromIterator<S> for PrintedRules {
    fn from_iter<I: IntoIterator<Item = S>>(iter: I) -> Self {
        let mut names: Vec<String> = Vec::new();
        for name in iter {
            let name = name.as_ref().trim();
            if !names.iter().any(|n| n == name) {
                names.push(name.to_string());
            }
        }
        PrintedRules { names }
    }
}

impl SystemSpec {
    /// [`Problem::UnknownPrintedRules`] when `printed` names a rule this algorithm does not
    /// have; [`Problem::PrintedRulesWithTrip`] or [`Problem::PrintedRulesWithPrinted`] when it
    /// names any rule with a variant other than the corrected one.
    pub(super) fn check_printed_rules(&self, printed: &PrintedRules) -> Result<(), ConfigError> {
        if printed.is_empty() {
            return Ok(());
        }
        let alg = self.algorithm;
        let valid = alg.printed_rules();
        let list = alg.printed_rule_list();
        if self.variant == Variant::Trip {
            return Err(ConfigError::one(Problem::PrintedRulesWithTrip));
        }
        if self.variant == Variant::Printed {
            return Err(ConfigError::one(Problem::PrintedRulesWithPrinted {
                algorithm: alg.to_string(),
                rules: list,
            }));
        }
        let names: Vec<String> = printed
            .names()
            .iter()
            .filter(|n| !valid.iter().any(|r| r.name == n.as_str()))
            .cloned()
            .collect();
        if names.is_empty() {
            return Ok(());
        }
        Err(ConfigError::one(Problem::UnknownPrintedRules {
            names,
            algorithm: alg.to_string(),
            rules: list,
        }))
    }

    /// LMUTIN's and LMUTEX's rules: the variant's, with the named printed rules on.
    pub(super) fn lmutin_rules(&self, printed: &PrintedRules) -> LmutinRules {
        printed.switched(LMUTIN_RULES, LmutinRules::from(self.variant))
    }

    /// LKCS's rules: the variant's, with the named printed rules on (`no-parking` and
    /// `no-fallback-nominee` turn additions off; `single-leader` is the leader choice, not a
    /// rule).
    pub(super) fn lkcs_rules(&self, printed: &PrintedRules) -> LkcsRules {
        printed.switched(LKCS_RULES, LkcsRules::from(self.variant))
    }

    /// CDC's and DDC's rules: the variant's, with the named printed rules on.
    pub(super) fn migrating_rules(&self, printed: &PrintedRules) -> MigratingRules {
        printed.switched(MIGRATING_RULES, MigratingRules::from(self.variant))
    }

    /// Maekawa's rules: the variant's, with the named printed rule on.
    pub(super) fn maekawa_rules(&self, printed: &PrintedRules) -> MaekawaRules {
        printed.switched(MAEKAWA_RULES, MaekawaRules::from(self.variant))
    }

    /// MUTIN(l)'s, kmex's and GCS's rules: the variant's, with the named printed rule on.
    pub(super) fn mutin_rules(&self, printed: &PrintedRules) -> MutinRules {
        printed.switched(MUTIN_RULES, MutinRules::from(self.variant))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every printed rule of every table turns something in its rules struct, so no name is
    /// accepted and then ignored (`single-leader` is the leader choice, with no switch,
    /// checked by the catalog's tests).
    #[test]
    fn every_printed_rule_turns_a_switch() {
        fn turns<R: PartialEq + Copy + std::fmt::Debug>(table: &[Switch<R>], corrected: R) {
            for s in table {
                let Some(set) = s.set else {
                    assert_eq!(
                        s.rule.name, "single-leader",
                        "only the leader choice has no switch"
                    );
                    continue;
                };
                let mut r = corrected;
                set(&mut r);
                assert_ne!(r, corrected, "{} turns nothing", s.rule.name);
                let named: PrintedRules = [s.rule.name].into_iter().collect();
                assert_eq!(named.switched(table, corrected), r, "{}", s.rule.name);
            }
        }
        let v = Variant::Corrected;
        turns(LMUTIN_RULES, LmutinRules::from(v));
        turns(LKCS_RULES, LkcsRules::from(v));
        turns(MAEKAWA_RULES, MaekawaRules::from(v));
        turns(MUTIN_RULES, MutinRules::from(v));
        turns(MIGRATING_RULES, MigratingRules::from(v));
    }
}
