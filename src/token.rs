//! [`FencingToken`]: what a successful entry carries, for a protected resource to refuse a
//! member that lost its slot (docs/fault-tolerance.md, "Fencing tokens").

use std::fmt;
use std::str::FromStr;

/// The token of one entry into the CS, from [`Member::token`](crate::Member::token) (and a
/// node's `enter` answer, `ok token=VIEW.CLOCK.MEMBER.SEQUENCE`).
///
/// Tokens order as `(view, clock, member, sequence)` (the derived `Ord`):
/// - **mutual exclusion** (k = 1 over the whole cluster): every entry's token is greater than
///   every earlier entry's, across the cluster;
/// - **otherwise**: each member's tokens grow with its entries, and a view's tokens are
///   greater than every older view's.
///
/// `clock` is a Lamport clock carried on the members' messages: with k = 1, an entry follows
/// the exit before it through the algorithm's messages, so its clock is greater. `view` is
/// the view the entry holds its slot in (0 without views, and in a quota of threads); a
/// member that stays active across a view change gets a new token in the new view, so read
/// the token before each use of the resource.
///
/// A resource keeps the greatest token it accepted and refuses a token of an older view (with
/// k = 1, any smaller token): a member paused past its lease wakes with a token of a view
/// before the one that evicted it, below the tokens of the members that entered since.
///
/// ```
/// use lkcs::FencingToken;
///
/// /// A store guarded by a mutual-exclusion quota: it refuses a write under a token below
/// /// the greatest it accepted (a holder that lost its slot, woken from a pause).
/// #[derive(Default)]
/// struct Store {
///     highest: Option<FencingToken>,
///     value: u64,
/// }
///
/// impl Store {
///     fn write(&mut self, token: FencingToken, value: u64) -> Result<(), String> {
///         if let Some(h) = self.highest.filter(|h| token < *h) {
///             return Err(format!("stale token {token}: {h} wrote since"));
///         }
///         self.highest = Some(token);
///         self.value = value;
///         Ok(())
///     }
/// }
///
/// let quota = lkcs::Quota::global(2).at_most(1).build()?;
/// let mut members = quota.members();
/// let mut store = Store::default();
/// members[0].enter()?;
/// let old = members[0].token().expect("active");
/// store.write(old, 1)?;
/// members[0].exit()?;
/// members[1].enter()?;
/// store.write(members[1].token().expect("active"), 2)?;
/// // the first holder's token, replayed late, is refused as stale
/// let refused = store.write(old, 3).expect_err("a token below the greatest accepted");
/// assert!(refused.starts_with(&format!("stale token {old}")), "{refused}");
/// assert_eq!(store.value, 2);
/// # members[1].exit()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FencingToken {
    /// The view the member holds its slot in.
    pub view: u64,
    /// The member's Lamport clock at the entry.
    pub clock: u64,
    /// The member's id.
    pub member: usize,
    /// How many entries this member's process made (this one included).
    pub sequence: u64,
}

impl fmt::Display for FencingToken {
    /// `VIEW.CLOCK.MEMBER.SEQUENCE`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}.{}.{}.{}",
            self.view, self.clock, self.member, self.sequence
        )
    }
}

/// A text that is not `VIEW.CLOCK.MEMBER.SEQUENCE` (four unsigned integers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadToken(pub String);

impl fmt::Display for BadToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "`{}` is not a fencing token (VIEW.CLOCK.MEMBER.SEQUENCE, four unsigned integers)",
            self.0
        )
    }
}

impl std::error::Error for BadToken {}

impl FromStr for FencingToken {
    type Err = BadToken;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || BadToken(s.to_string());
        let mut parts = s.split('.');
        let mut next = || parts.next().ok_or_else(bad);
        let token = FencingToken {
            view: next()?.parse().map_err(|_| bad())?,
            clock: next()?.parse().map_err(|_| bad())?,
            member: next()?.parse().map_err(|_| bad())?,
            sequence: next()?.parse().map_err(|_| bad())?,
        };
        match parts.next() {
            None => Ok(token),
            Some(_) => Err(bad()),
        }
    }
}

/// A member's side of its tokens: its Lamport clock and its entries.
#[cfg(feature = "net")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Tokens {
    /// The Lamport clock: the greatest clock seen on a message, or given to an entry.
    pub(crate) clock: u64,
    /// Entries made.
    pub(crate) entries: u64,
}

#[cfg(feature = "net")]
impl Tokens {
    /// A message carried `clock`.
    pub(crate) fn seen(&mut self, clock: u64) {
        self.clock = self.clock.max(clock);
    }

    /// An entry of `member` in `view`: the next clock and the next sequence.
    pub(crate) fn entry(&mut self, view: u64, member: usize) -> FencingToken {
        self.entries += 1;
        self.reissue(view, member)
    }

    /// A new token for the entry the member holds, in view `view` (it stays active across a
    /// view change): the next clock, the same sequence.
    pub(crate) fn reissue(&mut self, view: u64, member: usize) -> FencingToken {
        self.clock += 1;
        FencingToken {
            view,
            clock: self.clock,
            member,
            sequence: self.entries,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_token_prints_and_parses_back() {
        let t = FencingToken {
            view: 3,
            clock: 17,
            member: 2,
            sequence: 5,
        };
        assert_eq!(t.to_string(), "3.17.2.5");
        assert_eq!("3.17.2.5".parse::<FencingToken>(), Ok(t));
        for bad in ["3.17.2", "3.17.2.5.1", "3.x.2.5", "", "-1.0.0.0"] {
            assert_eq!(
                bad.parse::<FencingToken>(),
                Err(BadToken(bad.into())),
                "{bad}"
            );
        }
    }

    #[test]
    fn a_later_view_orders_after_any_clock_of_an_earlier_one() {
        let old = FencingToken {
            view: 1,
            clock: 1_000,
            member: 4,
            sequence: 90,
        };
        let new = FencingToken {
            view: 2,
            clock: 3,
            member: 0,
            sequence: 1,
        };
        assert!(new > old, "the view orders first");
    }

    #[cfg(feature = "net")]
    #[test]
    fn an_entry_after_a_seen_clock_orders_after_it() {
        let mut a = Tokens::default();
        let mut b = Tokens::default();
        let first = a.entry(0, 0);
        b.seen(first.clock); // the exit's release reaches b
        let second = b.entry(0, 1);
        assert!(second > first);
        let again = b.reissue(1, 1);
        assert_eq!(
            again.sequence, second.sequence,
            "a reissue is the same entry"
        );
        assert!(again > second);
    }
}
