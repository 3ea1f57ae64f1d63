//! Why a quota is refused, in the quota's words: members, active counts and builder calls
//! rather than processes and algorithms.

use std::fmt;

/// Which of a member's two bounds: at least (`Lower`) or at most (`Upper`) active.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BoundSide {
    /// At least `l` active.
    Lower,
    /// At most `k` active.
    Upper,
}

impl BoundSide {
    fn word(self) -> &'static str {
        match self {
            BoundSide::Lower => "lower",
            BoundSide::Upper => "upper",
        }
    }
}

/// One reason a [`QuotaBuilder`](crate::QuotaBuilder) refuses to build, as
/// [`Problem::Quota`](crate::Problem::Quota). Members are numbered as the quota numbers them
/// (`0..n`); a variant naming several members lists those that share the reason.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum QuotaProblem {
    /// A quota of zero members.
    NoMembers,
    /// Neither uniform nor per-member bounds were given.
    NoBounds,
    /// Per-member bounds and uniform bounds (between / at_least / at_most) both given.
    BoundsExclusive,
    /// Per-member bounds on a global quota, which takes uniform bounds only.
    PerMemberOnGlobal,
    /// A per-member bound list whose length is not the number of members.
    BoundsLength {
        /// Which list.
        side: BoundSide,
        /// Its length.
        given: usize,
        /// The number of members.
        n: usize,
    },
    /// A global upper bound above the number of members.
    UpperAboveMembers {
        /// The upper bound.
        k: usize,
        /// The number of members.
        n: usize,
    },
    /// A global lower bound, with no upper bound given, that is not below the number of
    /// members.
    LowerNotBelowMembers {
        /// The lower bound.
        l: usize,
        /// The number of members.
        n: usize,
    },
    /// A lower bound that is not below the upper bound: globally (`members` empty) or
    /// around each member named.
    LowerNotBelowUpper {
        /// The members concerned (empty: the global quota).
        members: Vec<usize>,
        /// The lower bound.
        l: usize,
        /// The upper bound.
        k: usize,
    },
    /// An upper bound above the size of a member's neighbourhood (itself and its
    /// neighbours).
    UpperAboveNeighbourhood {
        /// The members concerned.
        members: Vec<usize>,
        /// The upper bound.
        k: usize,
        /// The neighbourhood's size.
        size: usize,
    },
    /// A lower bound, with no upper bound given, that is not below the size of a member's
    /// neighbourhood.
    LowerNotBelowNeighbourhood {
        /// The members concerned.
        members: Vec<usize>,
        /// The lower bound.
        l: usize,
        /// The neighbourhood's size.
        size: usize,
    },
    /// Bounds that forbid no configuration: at least 0 and at most every member active
    /// (`n` for a global quota, `None` for a local one, everywhere).
    ConstrainsNothing {
        /// The number of members of a global quota.
        n: Option<usize>,
    },
    /// A global algorithm named for a local quota on a graph that is not complete.
    GlobalAlgorithmOnLocal {
        /// The algorithm's name.
        algorithm: String,
        /// The graph's name.
        topology: String,
    },
    /// `round_trip()` with an algorithm other than LKCS.
    RoundTripNotLkcs {
        /// The algorithm's name.
        algorithm: String,
    },
    /// `round_trip()` and `leader(..)` together.
    RoundTripWithLeader,
    /// `initially_active` names members outside `0..n`.
    StartOutOfRange {
        /// Those members.
        members: Vec<usize>,
        /// The number of members.
        n: usize,
    },
    /// `initially_active` names members more than once.
    StartRepeats {
        /// Those members.
        members: Vec<usize>,
    },
    /// The start breaks a bound: globally (`around` is `None`) or around a member.
    StartBreaks {
        /// The member whose neighbourhood breaks it (`None`: the global count).
        around: Option<usize>,
        /// How many are active there at the start.
        active: usize,
        /// The bound broken.
        side: BoundSide,
        /// Its value.
        bound: usize,
    },
    /// LKCS's round trip: bounds at the members named leave too little room (with both
    /// kinds of bound it keeps each one tighter where a move can break it, so it needs at
    /// most − at least ≥ 3 there).
    NoRoom {
        /// The members concerned (`None`: every member).
        members: Option<Vec<usize>>,
        /// Their lower bound.
        l: usize,
        /// Their upper bound.
        k: usize,
    },
    /// The algorithm refused the start; the reason is the algorithm layer's, its process
    /// names (`P7`) said as members (`member 7`).
    StartRefused(Box<crate::Problem>),
    /// The nearest bounds this quota accepts, as builder calls.
    AcceptedInstead(String),
    /// `leader(i)` with `i` outside `0..n`.
    LeaderOutOfRange {
        /// The leader named.
        leader: usize,
        /// The number of members.
        n: usize,
    },
    /// LKCS's leader rules need a leader with at least `needed` neighbours; the leader
    /// named has `degree`.
    LeaderTooFewNeighbours {
        /// The leader named.
        leader: usize,
        /// Its number of neighbours.
        degree: usize,
        /// The neighbours the leader rules need.
        needed: usize,
    },
    /// LKCS's leader rules need at most − at least ≥ 3 within two hops of the leader.
    LeaderSlack {
        /// The members within two hops of the leader whose bounds are too close.
        members: Vec<usize>,
        /// The leader.
        leader: usize,
        /// Their lower bound.
        l: usize,
        /// Their upper bound.
        k: usize,
    },
}

/// Replaces `P7` by `member 7` in a message of the algorithms' layer.
fn member_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    let mut prev: Option<char> = None;
    while let Some(c) = chars.next() {
        let starts_id = c == 'P'
            && !prev.is_some_and(|p| p.is_alphanumeric())
            && chars.peek().is_some_and(|d| d.is_ascii_digit());
        if starts_id {
            out.push_str("member ");
        } else {
            out.push(c);
        }
        prev = Some(c);
    }
    out
}

const LEADER_RULES: &str = "LKCS's leader rules need";

impl fmt::Display for QuotaProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use QuotaProblem as Q;
        match self {
            Q::NoMembers => f.write_str("a quota needs at least one member"),
            Q::NoBounds => f.write_str(
                "no bounds: call between(l, k), at_least(l) or at_most(k) (or bounds for a local quota)",
            ),
            Q::BoundsExclusive => f.write_str(
                "bounds(l, k) per member and between / at_least / at_most are exclusive",
            ),
            Q::PerMemberOnGlobal => f.write_str(
                "bounds(l, k) gives per-member bounds of a local quota; a global quota takes between, at_least or at_most",
            ),
            Q::BoundsLength { side, given, n } => {
                write!(f, "bounds: {given} {} bounds for {n} members", side.word())
            }
            Q::UpperAboveMembers { k, n } => write!(
                f,
                "at most {k} active of {n} members: the upper bound cannot exceed the number of members"
            ),
            Q::LowerNotBelowMembers { l, n } => write!(
                f,
                "at least {l} active of {n} members: the lower bound must be below the number of members"
            ),
            Q::LowerNotBelowUpper { members, l, k } if members.is_empty() => write!(
                f,
                "at least {l} and at most {k} active: the lower bound must be below the upper bound"
            ),
            Q::LowerNotBelowUpper { members, l, k } => write!(
                f,
                "{}: at least {l} and at most {k} active around it: the lower bound must be below the upper bound",
                MemberList(members)
            ),
            Q::UpperAboveNeighbourhood { members, k, size } => write!(
                f,
                "{}: at most {k} active around it, but its neighbourhood (itself and {} neighbours) holds only {size}",
                MemberList(members),
                size.saturating_sub(1)
            ),
            Q::LowerNotBelowNeighbourhood { members, l, size } => write!(
                f,
                "{}: at least {l} active around it, but its neighbourhood (itself and {} neighbours) holds only {size}: the lower bound must be below that",
                MemberList(members),
                size.saturating_sub(1)
            ),
            Q::ConstrainsNothing { n: Some(n) } => write!(
                f,
                "at least 0 and at most {n} of {n} active constrains nothing: give a lower bound above 0 or an upper bound below {n}"
            ),
            Q::ConstrainsNothing { n: None } => f.write_str(
                "these bounds constrain nothing (at least 0 and at most every neighbour active everywhere)",
            ),
            Q::GlobalAlgorithmOnLocal { algorithm, topology } => write!(
                f,
                "{algorithm} is a global algorithm: it runs on a global quota (or a local one on a complete graph), not on {topology}"
            ),
            Q::RoundTripNotLkcs { algorithm } => write!(
                f,
                "round_trip is LKCS's (a local quota with lower and upper bounds); it does not apply to {algorithm}"
            ),
            Q::RoundTripWithLeader => f.write_str(
                "the round trip has no leader: leader and round_trip do not combine",
            ),
            Q::StartOutOfRange { members, n } => write!(
                f,
                "initially_active names {}, but members are 0..{n}",
                MemberList(members)
            ),
            Q::StartRepeats { members } => write!(
                f,
                "initially_active names {} more than once",
                MemberList(members)
            ),
            Q::StartBreaks {
                around,
                active,
                side,
                bound,
            } => {
                let bound = match side {
                    BoundSide::Lower => format!("at least {bound}"),
                    BoundSide::Upper => format!("at most {bound}"),
                };
                match around {
                    None => write!(
                        f,
                        "initially_active: {active} members active, but {bound} must be"
                    ),
                    Some(m) => write!(
                        f,
                        "initially_active: {active} active around member {m}, but {bound} must be"
                    ),
                }
            }
            Q::NoRoom { members, l, k } => {
                match members {
                    None => f.write_str("every member")?,
                    Some(m) => write!(f, "{}", MemberList(m))?,
                }
                write!(
                    f,
                    ": at least {l} and at most {k} active around each leaves too little room: with both kinds of bound, lkcs keeps each one tighter where a move can break it (at least l+1 where l > 0, at most k−1 where k is below the neighbourhood's size) and needs the two apart, so at most − at least ≥ 3 where both can break"
                )
            }
            Q::StartRefused(why) => f.write_str(&member_words(&why.to_string())),
            Q::AcceptedInstead(calls) => write!(f, "accepted instead: {calls}"),
            Q::LeaderOutOfRange { leader, n } => {
                write!(f, "leader {leader}: members are 0..{n}")
            }
            Q::LeaderTooFewNeighbours {
                leader,
                degree,
                needed,
            } => write!(
                f,
                "{LEADER_RULES} a leader with at least {needed} neighbours: member {leader} has {degree}"
            ),
            Q::LeaderSlack {
                members,
                leader,
                l,
                k,
            } => write!(
                f,
                "{}, within two hops of member {leader} (the leader): at least {l} and at most {k} active around each, but the leader rules need at most − at least ≥ 3 there",
                MemberList(members)
            ),
        }
    }
}

/// Writes at most eight ids, then how many more: "0, 1, 2 and 5 more".
pub(crate) fn ids(f: &mut fmt::Formatter<'_>, ids: &[usize]) -> fmt::Result {
    const SHOWN: usize = 8;
    let shown: Vec<String> = ids.iter().take(SHOWN).map(|i| i.to_string()).collect();
    f.write_str(&shown.join(", "))?;
    if ids.len() > SHOWN {
        write!(f, " and {} more", ids.len() - SHOWN)?;
    }
    Ok(())
}

/// Members named in a message: "member 3" or "members 3, 4" (at most eight ids, then how
/// many more).
pub(crate) struct MemberList<'a>(pub(crate) &'a [usize]);

impl fmt::Display for MemberList<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self.0.len() == 1 {
            "member "
        } else {
            "members "
        })?;
        ids(f, self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn member_words_renames_process_ids_only() {
        assert_eq!(
            member_words("P7 and P12 wait on LP3, P"),
            "member 7 and member 12 wait on LP3, P"
        );
    }

    #[test]
    fn member_lists_stop_after_eight() {
        let q = QuotaProblem::StartOutOfRange {
            members: (10..20).collect(),
            n: 10,
        };
        assert_eq!(
            q.to_string(),
            "initially_active names members 10, 11, 12, 13, 14, 15, 16, 17 and 2 more, but members are 0..10"
        );
    }
}
