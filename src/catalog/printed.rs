//! The printed rules a spec switches on one by one ([`PrintedRules`], `--printed-rule`):
//! their validation against the algorithm and the variant, and the rules structs they
//! give LMUTIN, LKCS and the migrating controller (Maekawa's and MUTIN's are built in
//! the catalog's parent module).

use super::SystemSpec;
use crate::algo::lkcs::LkcsRules;
use crate::algo::lmutin::LmutinRules;
use crate::algo::migrating::MigratingRules;
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
    /// One line of `Problem::Invalid` when `printed` names a rule this algorithm does not
    /// have, or names any rule with the printed variant.
    pub(super) fn check_printed_rules(&self, printed: &PrintedRules) -> Result<(), ConfigError> {
        if printed.is_empty() {
            return Ok(());
        }
        let alg = self.algorithm;
        let valid = alg.printed_rules();
        let list = alg.printed_rule_list();
        if self.variant == Variant::Trip {
            return Err(ConfigError::one(Problem::Invalid(
                "--printed-rule does not combine with --variant trip (the round trip has no \
                 printed rules)"
                    .into(),
            )));
        }
        if self.variant == Variant::Printed {
            return Err(ConfigError::one(Problem::Invalid(format!(
                "--printed-rule switches one printed rule on over the corrected variant and \
                 does not combine with --variant printed (which has them all); {alg}'s rules: \
                 {list}"
            ))));
        }
        let unknown: Vec<String> = printed
            .names()
            .iter()
            .filter(|n| !valid.iter().any(|r| r.name == n.as_str()))
            .map(|n| format!("`{n}`"))
            .collect();
        if unknown.is_empty() {
            return Ok(());
        }
        let (s, are) = if unknown.len() == 1 {
            ("", "is")
        } else {
            ("s", "are")
        };
        Err(ConfigError::one(Problem::Invalid(format!(
            "--printed-rule{s} {} {are} not among {alg}'s printed rules: {list}",
            unknown.join(", ")
        ))))
    }

    /// LMUTIN's and LMUTEX's rules: the variant's, with the named printed rules on.
    pub(super) fn lmutin_rules(&self, printed: &PrintedRules) -> LmutinRules {
        let mut r = LmutinRules::from(self.variant);
        r.printed_initial_grants |= printed.has("initial-grants");
        r.counted_grants |= printed.has("counted-grants");
        r.unguarded_preempt |= printed.has("unguarded-preempt");
        r.arbiter.grant_on_unmatched_relinquish |= printed.has("unmatched-relinquish");
        r.arbiter.uncapped_release |= printed.has("uncapped-release");
        r.hold_and_wait |= printed.has("hold-and-wait");
        r
    }

    /// LKCS's rules: the variant's, with the named printed rules on (`no-parking` turns the
    /// addition of deviation 9 off; `single-leader` is the leader choice, not a rule).
    pub(super) fn lkcs_rules(&self, printed: &PrintedRules) -> LkcsRules {
        let mut r = LkcsRules::from(self.variant);
        r.printed_initial_grants |= printed.has("initial-grants");
        r.printed_trigger_stamp |= printed.has("trigger-stamp");
        r.dequeue_nominee |= printed.has("dequeue-nominee");
        r.repeated_triggers |= printed.has("repeated-triggers");
        r.arbiter.unreserved_sidetrack |= printed.has("unreserved-sidetrack");
        r.printed_saturation |= printed.has("saturation");
        r.printed_leader_wait |= printed.has("leader-wait");
        r.untagged_sidetrack |= printed.has("untagged-sidetrack");
        r.unguarded_preempt |= printed.has("unguarded-preempt");
        r.arbiter.grant_on_unmatched_relinquish |= printed.has("unmatched-relinquish");
        r.arbiter.uncapped_release |= printed.has("uncapped-release");
        if printed.has("no-parking") {
            r.park_blocked = false;
        }
        if printed.has("no-fallback-nominee") {
            r.fallback_nominee = false;
        }
        r
    }

    /// CDC's and DDC's rules: the variant's, with the named printed rules on.
    pub(super) fn migrating_rules(&self, printed: &PrintedRules) -> MigratingRules {
        let mut r = MigratingRules::from(self.variant);
        r.literal_controller_one |= printed.has("controller-one");
        r.migrate_and_grant |= printed.has("migrate-and-grant");
        r.unguarded_wake_up |= printed.has("unguarded-wake-up");
        r.unstamped_controller |= printed.has("unstamped-controller");
        r.unguarded_next_requestor |= printed.has("unguarded-next-requestor");
        r
    }
}
