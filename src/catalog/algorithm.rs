//! The algorithms the CLI names ([`Algorithm`]): their names, options and errata modules,
//! and the printed rules each can switch on alone ([`PrintedRule`], one table per rules
//! struct).

use crate::algo::lkcs::LkcsRules;
use crate::algo::lmutin::LmutinRules;
use crate::algo::maekawa::MaekawaRules;
use crate::algo::migrating::MigratingRules;
use crate::algo::mutin::MutinRules;
use crate::error::Problem;
use std::fmt;
use std::str::FromStr;

/// One printed rule that `--printed-rule NAME` switches on alone, over the corrected
/// variant (see `docs/errata.md`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PrintedRule {
    /// The CLI name (short, kebab-case).
    pub name: &'static str,
    /// The deviation it maps to, as the algorithm module's "Deviations" list numbers it
    /// (`"1"`, `"3, arbiter side"`); the errata entry is `<module>-<number>`.
    pub deviation: &'static str,
    /// What the rule does when printed, in a few words.
    pub summary: &'static str,
}

/// One printed rule with the switch it turns in its rules struct `R`. The tables of these
/// are the one registry `--printed-rule` reads: a name cannot be listed without its switch.
pub(super) struct Switch<R: 'static> {
    /// The rule as `--help` and the errors describe it.
    pub(super) rule: PrintedRule,
    /// Turns it on in `R`, over the corrected variant's rules; `None` for LKCS's
    /// `single-leader`, a choice of leader that `SystemSpec::lkcs_system_with` makes.
    pub(super) set: Option<fn(&mut R)>,
}

const fn rule<R>(
    name: &'static str,
    deviation: &'static str,
    summary: &'static str,
    set: fn(&mut R),
) -> Switch<R> {
    Switch {
        rule: PrintedRule {
            name,
            deviation,
            summary,
        },
        set: Some(set),
    }
}

/// The descriptions of a table's rules.
fn described<R>(table: &[Switch<R>]) -> Vec<PrintedRule> {
    table.iter().map(|s| s.rule).collect()
}

/// l_i-LMUTIN and k_i-LMUTEX (`LmutinRules`).
pub(super) const LMUTIN_RULES: &[Switch<LmutinRules>] = &[
    rule(
        "initial-grants",
        "1",
        "initial grants to the InCS members",
        |r| r.printed_initial_grants = true,
    ),
    rule(
        "counted-grants",
        "2",
        "count grants instead of collecting granters",
        |r| r.counted_grants = true,
    ),
    rule(
        "unguarded-preempt",
        "3, requester side",
        "relinquish on every Preempt received while InCS",
        |r| r.unguarded_preempt = true,
    ),
    rule(
        "unmatched-relinquish",
        "3, arbiter side",
        "grant on a Relinquish from a process holding no permission",
        |r| r.arbiter.grant_on_unmatched_relinquish = true,
    ),
    rule(
        "uncapped-release",
        "4",
        "re-grant on Release (and Relinquish) whatever the capacity",
        |r| r.arbiter.uncapped_release = true,
    ),
    rule(
        "hold-and-wait",
        "5, an addition turned off",
        "a blocked exit keeps its permissions (no Kept, Blocked, Park, Unpark)",
        |r| r.hold_and_wait = true,
    ),
];

/// LKCS (`LkcsRules` and the leader choice).
pub(super) const LKCS_RULES: &[Switch<LkcsRules>] = &[
    rule(
        "initial-grants",
        "1",
        "both types' initial grants to the InCS members",
        |r| r.printed_initial_grants = true,
    ),
    rule(
        "trigger-stamp",
        "2",
        "Trigger(MUTIN, ts_j) for a nominee waiting with ts_j+1",
        |r| r.printed_trigger_stamp = true,
    ),
    rule(
        "dequeue-nominee",
        "3",
        "the nomination dequeues the nominee's request",
        |r| r.dequeue_nominee = true,
    ),
    rule(
        "repeated-triggers",
        "4, leader side",
        "nominate again whenever the suspicion comes back",
        |r| r.repeated_triggers = true,
    ),
    rule(
        "unreserved-sidetrack",
        "4, arbiter side",
        "grant a sidetrack request at once whatever the count",
        |r| r.arbiter.unreserved_sidetrack = true,
    ),
    rule(
        "saturation",
        "5",
        "\"saturated\" is one below the capacity",
        |r| r.printed_saturation = true,
    ),
    rule(
        "leader-wait",
        "6",
        "the leader waits until Waiting_LDR < |N_LDR|+1",
        |r| r.printed_leader_wait = true,
    ),
    rule(
        "untagged-sidetrack",
        "7",
        "sidetrack grants are plain Grants; a Trigger is accepted by state",
        |r| r.untagged_sidetrack = true,
    ),
    rule(
        "unguarded-preempt",
        "8, requester side",
        "relinquish on every Preempt of the type being kept",
        |r| r.unguarded_preempt = true,
    ),
    rule(
        "unmatched-relinquish",
        "8, arbiter side",
        "grant on a Relinquish from a process holding no permission",
        |r| r.arbiter.grant_on_unmatched_relinquish = true,
    ),
    rule(
        "uncapped-release",
        "8, arbiter side",
        "re-grant on Release (and Relinquish) whatever the capacity",
        |r| r.arbiter.uncapped_release = true,
    ),
    rule(
        "no-parking",
        "9, an addition turned off",
        "blocked requests keep their permissions (no Blocked, Park, Unpark)",
        |r| r.park_blocked = false,
    ),
    rule(
        "no-fallback-nominee",
        "11, an addition turned off",
        "no nominee when every candidate of the freeing type is on the sidetrack",
        |r| r.fallback_nominee = false,
    ),
    Switch {
        rule: PrintedRule {
            name: "single-leader",
            deviation: "10, an addition turned off",
            summary: "the automatically chosen leader alone, without watchers (as --leader ID)",
        },
        // the leader choice, not a rule: `SystemSpec::lkcs_system_with` reads the name
        set: None,
    },
];

/// Maekawa (`MaekawaRules`; its errata entry is `maekawa-printed`).
pub(super) const MAEKAWA_RULES: &[Switch<MaekawaRules>] = &[rule(
    "failed-on-arrival",
    "printed",
    "send Failed only to a request outranked on arrival",
    |r| r.failed_on_arrival_only = true,
)];

/// MUTIN(l), kmex and GCS (`MutinRules`).
pub(super) const MUTIN_RULES: &[Switch<MutinRules>] = &[rule(
    "one-shot-response2",
    "1",
    "one Response2 per Query, then disarm",
    |r| r.one_shot_response2 = true,
)];

/// DDC (`MigratingRules`); CDC takes all but the last.
pub(super) const MIGRATING_RULES: &[Switch<MigratingRules>] = &[
    rule(
        "controller-one",
        "1",
        "current-controller := 1 (P0) after a migration",
        |r| r.literal_controller_one = true,
    ),
    rule(
        "migrate-and-grant",
        "2",
        "migrate and grant; become-controller carries nothing",
        |r| r.migrate_and_grant = true,
    ),
    rule(
        "unguarded-wake-up",
        "3",
        "a wake-up grants whatever cs-status says",
        |r| r.unguarded_wake_up = true,
    ),
    rule(
        "unstamped-controller",
        "4",
        "controller pointers without epochs; a retired server drops exit-cs",
        |r| r.unstamped_controller = true,
    ),
    rule(
        "unguarded-next-requestor",
        "6",
        "next-requestor applied unconditionally (DDC)",
        |r| r.unguarded_next_requestor = true,
    ),
];

/// The algorithms the CLI names (DESIGN §5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Algorithm {
    /// l_i-LMUTIN, generalized local l_i-mutual inclusion.
    Lmutin,
    /// k_i-LMUTEX = Complement(LMUTIN), generalized local k_i-mutual exclusion.
    Lmutex,
    /// LKCS, the generalized local (l_i, k_i)-CS.
    Lkcs,
    /// Maekawa's quorum mutual exclusion.
    Maekawa,
    /// MUTIN(l), global l-mutual inclusion.
    Mutin,
    /// kmex = Complement(MUTIN(n−k)), global k-mutual exclusion.
    Kmex,
    /// (l,k)-GCS, the global (l,k)-CS.
    Gcs,
    /// Migrating controller with a centralized queue.
    Cdc,
    /// Migrating controller with a distributed queue.
    Ddc,
}

impl Algorithm {
    /// Every algorithm, in CLI order.
    pub const ALL: [Algorithm; 9] = [
        Algorithm::Lmutin,
        Algorithm::Lmutex,
        Algorithm::Lkcs,
        Algorithm::Maekawa,
        Algorithm::Mutin,
        Algorithm::Kmex,
        Algorithm::Gcs,
        Algorithm::Cdc,
        Algorithm::Ddc,
    ];

    /// The CLI name.
    pub fn name(self) -> &'static str {
        match self {
            Algorithm::Lmutin => "lmutin",
            Algorithm::Lmutex => "lmutex",
            Algorithm::Lkcs => "lkcs",
            Algorithm::Maekawa => "maekawa",
            Algorithm::Mutin => "mutin",
            Algorithm::Kmex => "kmex",
            Algorithm::Gcs => "gcs",
            Algorithm::Cdc => "cdc",
            Algorithm::Ddc => "ddc",
        }
    }

    /// The algorithm-specific options (CLI flags) it accepts, beside the bounds, `--initial`
    /// and `--variant` that every algorithm takes.
    pub fn options(self) -> &'static [&'static str] {
        match self {
            Algorithm::Lmutin | Algorithm::Lmutex => &[],
            Algorithm::Lkcs => &["--leader"],
            Algorithm::Maekawa => &["--coterie"],
            Algorithm::Mutin | Algorithm::Kmex | Algorithm::Gcs => {
                &["--coterie", "--mx", "--maxreq", "--migrate-after"]
            }
            Algorithm::Cdc | Algorithm::Ddc => &["--maxreq", "--migrate-after"],
        }
    }

    /// One problem per option in `given` that was given (`true`) but that this algorithm
    /// does not take ([`Algorithm::options`]), naming the algorithms that do. Options are
    /// named as their caller's users write them: `--migrate-after` on the command line,
    /// `migrate_after` in a cluster file, `coterie` in the [`crate::Quota`] builder; `prefix`
    /// starts each message (`"quota: "` for a cluster file).
    pub fn inapplicable(self, given: &[(&str, bool)], prefix: &str) -> Vec<Problem> {
        let flag = |name: &str| format!("--{}", name.trim_start_matches("--").replace('_', "-"));
        given
            .iter()
            .filter(|&&(name, given)| given && !self.options().contains(&&*flag(name)))
            .map(|&(name, _)| {
                let takers: Vec<&str> = Algorithm::ALL
                    .iter()
                    .filter(|a| a.options().contains(&&*flag(name)))
                    .map(|a| a.name())
                    .collect();
                Problem::NotApplicable {
                    context: prefix.into(),
                    option: name.into(),
                    algorithm: self.to_string(),
                    takers: takers.iter().map(|t| t.to_string()).collect(),
                }
            })
            .collect()
    }

    /// The printed rules `--printed-rule` can switch on alone for this algorithm, one per
    /// field of its rules struct (`LmutinRules`, `LkcsRules`, `MaekawaRules`, `MutinRules`,
    /// `MigratingRules`, and `ArbiterRules` inside the first two), plus LKCS's additions
    /// that the library can turn off.
    pub fn printed_rules(self) -> Vec<PrintedRule> {
        match self {
            Algorithm::Lmutin | Algorithm::Lmutex => described(LMUTIN_RULES),
            Algorithm::Lkcs => described(LKCS_RULES),
            Algorithm::Maekawa => described(MAEKAWA_RULES),
            Algorithm::Mutin | Algorithm::Kmex | Algorithm::Gcs => described(MUTIN_RULES),
            Algorithm::Cdc => described(&MIGRATING_RULES[..4]),
            Algorithm::Ddc => described(MIGRATING_RULES),
        }
    }

    /// The valid `--printed-rule` names of this algorithm with their deviations, on one
    /// line: `initial-grants (deviation 1), counted-grants (deviation 2), ...`.
    pub fn printed_rule_list(self) -> String {
        let module = self.errata_module();
        let items: Vec<String> = self
            .printed_rules()
            .iter()
            .map(|r| match r.deviation {
                "printed" => format!("{} ({module}-printed)", r.name),
                d => format!("{} (deviation {d})", r.name),
            })
            .collect();
        items.join(", ")
    }

    /// The help text of `--printed-rule`: one paragraph per algorithm family, every name
    /// with its deviation and what it does.
    pub fn printed_rules_help() -> String {
        let families: [(&str, Algorithm); 5] = [
            ("lmutin, lmutex", Algorithm::Lmutin),
            ("lkcs", Algorithm::Lkcs),
            ("maekawa", Algorithm::Maekawa),
            ("mutin, kmex, gcs", Algorithm::Mutin),
            ("cdc, ddc", Algorithm::Ddc),
        ];
        let mut text = String::from(
            "Switch ONE printed rule on over the corrected variant (repeatable; not with \
             --variant printed). NAME (deviation in the module's list, errata entry \
             MODULE-N in docs/errata.md):",
        );
        for (names, alg) in families {
            text.push_str(&format!("\n\n{names} ({}):", alg.errata_module()));
            for r in alg.printed_rules() {
                let dev = match r.deviation {
                    "printed" => format!("{}-printed", alg.errata_module()),
                    d => format!("deviation {d}"),
                };
                let only = if r.name == "unguarded-next-requestor" {
                    ", ddc only"
                } else {
                    ""
                };
                text.push_str(&format!("\n  {} ({dev}{only}): {}", r.name, r.summary));
            }
        }
        text
    }

    /// The prefix of the algorithm's entries in `docs/errata.md`.
    fn errata_module(self) -> &'static str {
        match self {
            Algorithm::Lmutin | Algorithm::Lmutex => "lmutin",
            Algorithm::Lkcs => "lkcs",
            Algorithm::Maekawa => "maekawa",
            Algorithm::Mutin | Algorithm::Kmex | Algorithm::Gcs => "mutin",
            Algorithm::Cdc | Algorithm::Ddc => "migrating",
        }
    }

    /// Whether the algorithm solves a global problem (bounds over all n processes), and so
    /// runs on `complete:N` only.
    pub fn is_global(self) -> bool {
        !matches!(
            self,
            Algorithm::Lmutin | Algorithm::Lmutex | Algorithm::Lkcs
        )
    }
}

impl fmt::Display for Algorithm {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Algorithm {
    type Err = Problem;
    fn from_str(s: &str) -> Result<Self, Problem> {
        Algorithm::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| Problem::UnknownAlgorithm {
                given: s.to_string(),
                accepted: Algorithm::ALL
                    .iter()
                    .map(|a| a.name().to_string())
                    .collect(),
            })
    }
}
