//! Why a cluster file is refused: its own rules (members, keys, addresses, timing, storage,
//! and how `[quota]` fits them); what the catalog refuses in the quota itself stays the
//! catalog's problem.

use std::fmt;

/// The refusal of a cluster file in the format before one key pair per member.
const OLD_FORMAT: &str = "a cluster file with a shared `secret` (the format before one \
key pair per member) is no longer accepted: create the cluster with `lkcs cluster init`";

/// One reason a cluster file (`lkcs::net::Cluster`) is refused, as
/// [`Problem::Cluster`](crate::Problem::Cluster).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ClusterProblem {
    /// The file cannot be opened or read.
    Unreadable {
        /// The file.
        path: String,
        /// The operating system's reason.
        cause: String,
    },
    /// The file is larger than 1 MiB.
    TooLarge {
        /// The file.
        path: String,
    },
    /// The file is not UTF-8 text.
    NotUtf8 {
        /// The file.
        path: String,
    },
    /// A problem found in the file named (every problem of a file read from disk is wrapped
    /// so).
    InFile {
        /// The file.
        path: String,
        /// The problem.
        problem: Box<crate::Problem>,
    },
    /// The format before one key pair per member (a shared `secret`).
    OldFormat,
    /// Not TOML, or not the cluster file's tables and keys.
    NotToml {
        /// The line of the error, where known.
        line: Option<usize>,
        /// The parser's message.
        message: String,
    },
    /// `[members]` is empty.
    NoMembers,
    /// A `[members]` key that is not a member id.
    NotAMemberId(String),
    /// A member id listed twice.
    ListedTwice(usize),
    /// The member ids are not `0..n`.
    MissingId {
        /// The first id missing.
        missing: usize,
        /// The number of members listed.
        n: usize,
    },
    /// A public key that is not 64 hex digits: a member's, or the operator's (`None`).
    BadPublicKey {
        /// The member whose key it is, `None` for `[operator]`.
        member: Option<usize>,
    },
    /// A member address that is not `host:port`.
    BadAddress {
        /// The member.
        member: usize,
        /// The address as written.
        address: String,
    },
    /// A member address with port 0, which no peer can dial.
    PortZero {
        /// The member.
        member: usize,
    },
    /// Two members with one address.
    SharedAddress {
        /// The first member.
        first: usize,
        /// The second member.
        second: usize,
        /// The address.
        address: String,
    },
    /// Two members with one public key.
    SharedKey {
        /// The first member.
        first: usize,
        /// The second member.
        second: usize,
    },
    /// The operator's public key is a member's.
    OperatorKeyIsMembers(usize),
    /// The quota's topology and `[members]` disagree on the number of members.
    TopologySize {
        /// The topology's name.
        topology: String,
        /// Its number of processes.
        processes: usize,
        /// The number of members listed.
        members: usize,
    },
    /// An unknown rule variant.
    UnknownVariant(String),
    /// `[timing]` values that do not fit together.
    Timing(String),
    /// `[storage]` with an empty `dir`.
    StorageDirEmpty,
    /// `[storage]` with views off (`evict_after_ms = 0`): there is no view log to keep.
    StorageWithoutViews,
}

impl fmt::Display for ClusterProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        use ClusterProblem as C;
        match self {
            C::Unreadable { path, cause } => write!(f, "cannot read {path}: {cause}"),
            C::TooLarge { path } => write!(f, "{path} is larger than 1 MiB: not a cluster file"),
            C::NotUtf8 { path } => write!(f, "{path} is not UTF-8 text"),
            C::InFile { path, problem } => write!(f, "{path}: {problem}"),
            C::OldFormat => f.write_str(OLD_FORMAT),
            C::NotToml {
                line: Some(line),
                message,
            } => write!(f, "not a cluster file (line {line}): {message}"),
            C::NotToml {
                line: None,
                message,
            } => write!(f, "not a cluster file: {message}"),
            C::NoMembers => f.write_str("[members]: no member"),
            C::NotAMemberId(key) => {
                write!(f, "[members]: `{key}` is not a member id (0, 1, 2, ...)")
            }
            C::ListedTwice(id) => write!(f, "[members]: member {id} is listed twice"),
            C::MissingId { missing, n } => write!(
                f,
                "[members]: ids must be 0..{}; {missing} is missing",
                n.saturating_sub(1)
            ),
            C::BadPublicKey { member: Some(id) } => {
                write!(f, "[members.{id}]: public_key: expected 64 hex digits")
            }
            C::BadPublicKey { member: None } => {
                f.write_str("[operator]: public_key: expected 64 hex digits")
            }
            C::BadAddress { member, address } => write!(
                f,
                "[members.{member}]: `{address}` is not an address (host:port)"
            ),
            C::PortZero { member } => write!(
                f,
                "[members.{member}]: port 0: give the port the member listens on, which its \
                 peers dial"
            ),
            C::SharedAddress {
                first,
                second,
                address,
            } => write!(
                f,
                "[members]: members {first} and {second} share the address {address}"
            ),
            C::SharedKey { first, second } => write!(
                f,
                "[members]: members {first} and {second} share a public key (one key pair per member)"
            ),
            C::OperatorKeyIsMembers(id) => write!(
                f,
                "[operator]: public_key is member {id}'s: the operator needs its own key"
            ),
            C::TopologySize {
                topology,
                processes,
                members,
            } => write!(
                f,
                "quota: topology {topology} has {processes} processes, [members] lists {members}"
            ),
            C::UnknownVariant(v) => write!(
                f,
                "quota: variant `{v}`: expected corrected, printed or trip (lkcs only)"
            ),
            C::Timing(e) => write!(f, "[timing]: {e}"),
            C::StorageDirEmpty => {
                f.write_str("[storage]: dir is empty: name a folder (relative to the cluster file)")
            }
            C::StorageWithoutViews => {
                f.write_str("[storage] keeps the view log, but evict_after_ms = 0 runs no views")
            }
        }
    }
}
