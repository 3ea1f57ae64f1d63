//! The cluster file: who the members are, how each is authenticated, and what quota they
//! run. `lkcs cluster init` writes one, with a key pair per member.
//!
//! ```toml
//! epoch = 1                      # bump it to restart the cluster as a whole
//!
//! [quota]                        # the vocabulary of `lkcs simulate`
//! algorithm = "gcs"
//! topology = "complete:3"        # default: complete:N over the N members
//! l = 1
//! k = 2
//!
//! [members.0]                    # member ids 0..N-1, each once
//! address = "127.0.0.1:7411"      # IP:PORT, or HOST:PORT (looked up when used)
//! public_key = "64 hex digits"   # pinned: the channel authenticates member 0 by it
//! private_key = "keys/0.key"     # relative to this file; only member 0's host needs it
//! # [members.1], [members.2] alike
//!
//! [timing]                       # optional, milliseconds
//! peer_timeout_ms = 3000
//! evict_after_ms = 5000          # views: evict a member unreachable this long; 0: no views
//! lease_ms = 3000                # a member fences when no majority answered it this long
//! lease_heartbeat_ms = 500       # how often a member asks for its lease
//!
//! [storage]                      # optional: every member keeps its view log on disk
//! dir = "state"                  # relative to this file; member I in state/member-I/epoch-E
//! ```
//!
//! **Views.** Unless `evict_after_ms = 0`, the members run the view log
//! ([`Node::spawn_with_views`](super::Node::spawn_with_views), docs/fault-tolerance.md):
//! each member links to every other member (the log talks to all of them, the object to its
//! neighbours), a member unreachable for `evict_after_ms` is evicted by the majority and its
//! slot reclaimed, and a member no majority answers for `lease_ms` fences. The three view
//! timers are part of the canonical text: the safety margin between a member's lease and
//! the others' `evict_after` holds only when every member runs the same ones. With
//! `evict_after_ms = 0` a member that goes silent fails the calls that need it, as before
//! views.
//!
//! **Storage.** With `[storage]`, each member writes its view log through to its own folder
//! under `dir` ([`Storage::Dir`](super::view::Storage::Dir)), one per epoch: a member's
//! process that restarts resumes its Raft node from it, so the log keeps its majority
//! however many members crash at once. The setting is part of the canonical text, since a
//! member lets any process of another member take part in the log only when every member
//! keeps its log on disk. Without it the log lives in memory, and a restarted process joins
//! with an empty one.
//!
//! `[quota]` takes the system options of `lkcs simulate` under the same names: `algorithm`,
//! `topology`, `l`, `k`, `bounds = { l = [...], k = [...] }`, `initial = "in:0,2"`,
//! `variant`, `leader`, `coterie`, `mx`, `maxreq`, `migrate_after`. Every member builds the
//! whole system from it and runs its own process of it, so every member must read the same
//! quota: the handshake compares the SHA-256 of its canonical text ([`Cluster::canonical`]:
//! the options in a fixed order, the resolved initial configuration and the member ids, not
//! the addresses, the keys or the timing) and refuses a peer whose hash differs.
//!
//! A member's private key file holds 64 hex digits (lines starting with `#` are comments).
//! [`Cluster::member_key`] refuses, naming the file, a key file or cluster file that group or
//! others may read or write (as ssh does), a key whose public key is not the pinned one, and
//! the example keys published with lkcs unless [`Cluster::allow_example_keys`] says so.
//! The format of the days of the shared secret (`secret = "..."`) is refused with a pointer
//! to `lkcs cluster init`.

use super::channel::{PublicKey, SecretKey};
use super::{Identity, MemberAddress, NetConfig, NetError, Timing};
use crate::error::ClusterProblem;
use crate::{
    cs::{CsObject, CsState, Variant},
    format_initial, parse_initial, BoundsFile, ConfigError, Instance, Problem, ProcessId,
    SystemSpec, SystemVisitor, Topology,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The largest cluster file read.
const MAX_FILE: u64 = 1 << 20;

/// The largest private key file read.
const MAX_KEY_FILE: u64 = 4096;

/// The public keys of the example key files in the repository's `examples/` (published, so
/// anyone can impersonate their members): refused unless allowed for local tests.
pub(super) const EXAMPLE_KEYS: [&str; 3] = [
    "1fe01777055b539745e467715567af8e6f1ec4f625dc9494b5bcab02fa145467",
    "857fc0f5fbd70723dddfc40f93f8fdf749f3619eb7193998e81eec8cbf3e3259",
    "1435f8310b339b3d8c9f066a83c57dc3b808d2f50b219995cad28565c411cf71",
];

/// A cluster file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    #[serde(default = "one")]
    epoch: u64,
    quota: QuotaTable,
    members: BTreeMap<String, MemberTable>,
    #[serde(default)]
    timing: TimingTable,
    operator: Option<OperatorTable>,
    storage: Option<StorageTable>,
}

/// Where the members keep their view logs.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct StorageTable {
    dir: String,
}

/// The operator's identity (`lkcs status`): pinned for no member.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OperatorTable {
    public_key: String,
    private_key: Option<String>,
}

/// One member of a cluster file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct MemberTable {
    address: String,
    public_key: String,
    private_key: Option<String>,
}

fn one() -> u64 {
    1
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct QuotaTable {
    algorithm: String,
    topology: Option<String>,
    l: Option<usize>,
    k: Option<usize>,
    bounds: Option<BoundsFile>,
    initial: Option<String>,
    variant: Option<String>,
    #[serde(default, deserialize_with = "crate::algo::lkcs::leader_key")]
    leader: Option<String>,
    coterie: Option<String>,
    mx: Option<String>,
    maxreq: Option<usize>,
    migrate_after: Option<u64>,
}

#[derive(Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimingTable {
    heartbeat_ms: Option<u64>,
    peer_timeout_ms: Option<u64>,
    backoff_min_ms: Option<u64>,
    backoff_max_ms: Option<u64>,
    handshake_timeout_ms: Option<u64>,
    max_handshakes: Option<usize>,
    max_handshakes_per_source: Option<usize>,
    refusal_log_interval_ms: Option<u64>,
    window: Option<usize>,
    evict_after_ms: Option<u64>,
    lease_ms: Option<u64>,
    lease_heartbeat_ms: Option<u64>,
}

/// The view timers of a cluster file's `[timing]` (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewTiming {
    /// A member unreachable this long is evicted (`evict_after_ms`, default 5 s).
    pub evict_after: Duration,
    /// A member fences when no majority of its view answered it this long (`lease_ms`,
    /// default 3 s).
    pub lease: Duration,
    /// How often a member asks for its lease (`lease_heartbeat_ms`, default 500 ms).
    pub heartbeat: Duration,
}

/// A cluster, read and checked: build a member's node with [`Cluster::spawn`].
#[derive(Clone)]
pub struct Cluster {
    spec: SystemSpec,
    members: Vec<MemberAddress>,
    keys: Vec<PublicKey>,
    /// Each member's private key file, resolved against the cluster file's folder.
    private_keys: Vec<Option<PathBuf>>,
    /// The operator's public key and private key file, when the file has `[operator]`.
    operator: Option<(PublicKey, Option<PathBuf>)>,
    /// The cluster file, when read from one.
    path: Option<PathBuf>,
    allow_example_keys: bool,
    epoch: u64,
    timing: Timing,
    views: Option<ViewTiming>,
    /// `[storage]`'s folder, resolved against the cluster file's folder.
    storage: Option<PathBuf>,
    initial: Vec<CsState>,
    instance: Instance,
    canonical: String,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("canonical", &self.canonical)
            .field("members", &self.members)
            .field("keys", &self.keys)
            .field("path", &self.path)
            .field("epoch", &self.epoch)
            .field("timing", &self.timing)
            .field("views", &self.views)
            .finish()
    }
}

fn cluster_problem(e: ClusterProblem) -> Problem {
    Problem::Cluster(e)
}

/// A cluster file that cannot be read.
fn unreadable(path: &Path, e: std::io::Error) -> ConfigError {
    ConfigError::one(cluster_problem(ClusterProblem::Unreadable {
        path: path.display().to_string(),
        cause: e.to_string(),
    }))
}

impl Cluster {
    /// Reads and checks a cluster file (at most 1 MiB). Every problem found is in the error.
    pub fn load(path: &Path) -> Result<Cluster, ConfigError> {
        use std::io::Read;
        let what = path.display();
        let file = std::fs::File::open(path).map_err(|e| unreadable(path, e))?;
        let mut bytes = Vec::new();
        file.take(MAX_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| unreadable(path, e))?;
        if bytes.len() as u64 > MAX_FILE {
            return Err(ConfigError::one(cluster_problem(
                ClusterProblem::TooLarge {
                    path: what.to_string(),
                },
            )));
        }
        let text = String::from_utf8(bytes).map_err(|_| {
            ConfigError::one(cluster_problem(ClusterProblem::NotUtf8 {
                path: what.to_string(),
            }))
        })?;
        let base = path.parent().unwrap_or(Path::new(""));
        let mut cluster = Cluster::parse_in(&text, base).map_err(|e| ConfigError {
            problems: e
                .problems
                .into_iter()
                .map(|p| {
                    cluster_problem(ClusterProblem::InFile {
                        path: what.to_string(),
                        problem: Box::new(p),
                    })
                })
                .collect(),
        })?;
        cluster.path = Some(path.to_path_buf());
        Ok(cluster)
    }

    /// Checks the text of a cluster file (see the module doc), its private key paths relative
    /// to the current folder. A member address is `IP:PORT` or `HOST:PORT`; host names are
    /// not looked up here, but when they are used ([`MemberAddress`]).
    pub fn parse(text: &str) -> Result<Cluster, ConfigError> {
        Cluster::parse_in(text, Path::new(""))
    }

    /// [`Cluster::parse`] with the private key paths relative to `base` (the cluster file's
    /// folder).
    pub fn parse_in(text: &str, base: &Path) -> Result<Cluster, ConfigError> {
        if toml::from_str::<toml::Table>(text).is_ok_and(|t| t.contains_key("secret")) {
            return Err(ConfigError::one(cluster_problem(ClusterProblem::OldFormat)));
        }
        let file: File = toml::from_str(text).map_err(|e| {
            let line = e
                .span()
                .map(|s| text[..s.start.min(text.len())].matches('\n').count() + 1);
            ConfigError::one(cluster_problem(ClusterProblem::NotToml {
                line,
                message: e.message().to_string(),
            }))
        })?;
        let mut problems = Vec::new();
        let (members, keys, private_keys) = members(&file.members, base, &mut problems);
        let operator = file.operator.as_ref().and_then(|o| {
            let Some(key) = PublicKey::from_hex(&o.public_key) else {
                problems.push(cluster_problem(ClusterProblem::BadPublicKey {
                    member: None,
                }));
                return None;
            };
            if let Some(i) = keys.iter().position(|k| *k == key) {
                problems.push(cluster_problem(ClusterProblem::OperatorKeyIsMembers(i)));
                return None;
            }
            Some((key, o.private_key.as_ref().map(|p| base.join(p))))
        });
        let timing = timing(&file.timing, &mut problems);
        let views = view_timing(&file.timing);
        let q = &file.quota;
        let topology = match &q.topology {
            Some(t) => Topology::parse(t)
                .map_err(|e| problems.extend(e.problems))
                .ok(),
            None if members.is_empty() => None,
            None => Topology::complete(file.members.len())
                .map_err(|e| problems.extend(e.problems))
                .ok(),
        };
        // the sections [members] lists, a bad one included (reported on its own)
        let listed = file.members.len();
        if let Some(t) = &topology
            && listed > 0
            && t.len() != listed
        {
            problems.push(cluster_problem(ClusterProblem::TopologySize {
                topology: t.name().to_string(),
                processes: t.len(),
                members: listed,
            }));
        }
        let algorithm = q.algorithm.parse().map_err(|p| problems.push(p)).ok();
        let variant = match q.variant.as_deref() {
            None => Some(Variant::Corrected),
            Some(v) => Variant::parse(v).or_else(|| {
                problems.push(cluster_problem(ClusterProblem::UnknownVariant(
                    v.to_string(),
                )));
                None
            }),
        };
        let initial = match (&q.initial, &topology) {
            (Some(s), Some(t)) => parse_initial(s, t.len())
                .map_err(|e| problems.extend(e.problems))
                .ok(),
            _ => None,
        };
        ConfigError::check(problems)?;
        let (Some(algorithm), Some(topology), Some(variant)) = (algorithm, topology, variant)
        else {
            // every None above pushed a problem
            return Err(ConfigError::one(Problem::Invalid("invalid quota".into())));
        };
        let spec = SystemSpec {
            algorithm,
            topology,
            l: q.l,
            k: q.k,
            bounds: q.bounds.clone(),
            initial,
            variant,
            leader: None,
            coterie: None,
            mx: None,
            maxreq: q.maxreq,
            migrate_after: q.migrate_after,
        };
        ConfigError::check(algorithm.inapplicable(
            &[
                ("leader", q.leader.is_some()),
                ("coterie", q.coterie.is_some()),
                ("mx", q.mx.is_some()),
                ("maxreq", q.maxreq.is_some()),
                ("migrate_after", q.migrate_after.is_some()),
            ],
            "quota: ",
        ))?;
        // the names, parsed here, at the edge: the spec holds them typed
        let spec = spec.with_names(q.leader.as_deref(), q.coterie.as_deref(), q.mx.as_deref())?;
        let (initial, instance) = spec.build(Resolve)?;
        let storage = file.storage.as_ref().map(|t| base.join(&t.dir));
        if file
            .storage
            .as_ref()
            .is_some_and(|t| t.dir.trim().is_empty())
        {
            return Err(ConfigError::one(cluster_problem(
                ClusterProblem::StorageDirEmpty,
            )));
        }
        if storage.is_some() && views.is_none() {
            return Err(ConfigError::one(cluster_problem(
                ClusterProblem::StorageWithoutViews,
            )));
        }
        let canonical = canonical(&spec, &initial, members.len(), views, storage.is_some());
        let cluster = Cluster {
            spec,
            members,
            keys,
            private_keys,
            operator,
            path: None,
            allow_example_keys: false,
            epoch: file.epoch,
            timing,
            views,
            storage,
            initial,
            instance,
            canonical,
        };
        if let Some(options) = cluster.view_options(ProcessId(0)) {
            options.check().map_err(|e| {
                ConfigError::one(cluster_problem(ClusterProblem::Timing(e.to_string())))
            })?;
        }
        Ok(cluster)
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the cluster has no member (never: [`Cluster::parse`] refuses it).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The member's address, as the cluster file gives it (a host name is not looked up:
    /// see [`MemberAddress::resolve`]; `std::net::TcpListener::bind` takes it as it is).
    pub fn address(&self, id: ProcessId) -> Option<MemberAddress> {
        self.members.get(id.index()).cloned()
    }

    /// The public key pinned for the member.
    pub fn public_key(&self, id: ProcessId) -> Option<PublicKey> {
        self.keys.get(id.index()).copied()
    }

    /// Every member's pinned public key, and the operator's
    /// ([`OPERATOR`](super::OPERATOR)) when the file has one: a member serves it its status
    /// and nothing else.
    pub fn trust(&self) -> super::Trust {
        self.keys
            .iter()
            .enumerate()
            .map(|(i, k)| (ProcessId(i as u32), *k))
            .chain(self.operator.as_ref().map(|(k, _)| (super::OPERATOR, *k)))
            .collect()
    }

    /// The operator's identity (`lkcs status`), from the private key the file's
    /// `[operator]` names: checked as [`Cluster::member_key`] checks a member's. The error
    /// names the file, or says the cluster has no operator.
    pub fn operator_identity(&self) -> Result<super::Identity, NetError> {
        let Some((public, path)) = &self.operator else {
            return Err(NetError::Credentials(
                "the cluster file has no [operator] (`lkcs cluster init` writes one)".into(),
            ));
        };
        let path = path.as_ref().ok_or_else(|| {
            NetError::Credentials("[operator] has no private_key on this host".into())
        })?;
        let key = read_key(path)?;
        if key.public() != *public {
            return Err(NetError::Credentials(format!(
                "{}: not the operator's key (its public key is not the one the cluster file pins)",
                path.display()
            )));
        }
        check_private(path)?;
        if let Some(p) = &self.path {
            check_private(p)?;
        }
        Ok(super::status::operator_identity(self, key))
    }

    /// The member's private key file, as the cluster file names it (resolved against the
    /// cluster file's folder).
    pub fn private_key_path(&self, id: ProcessId) -> Option<&Path> {
        self.private_keys.get(id.index())?.as_deref()
    }

    /// Whether [`Cluster::member_key`] accepts the example keys of `examples/` (local tests
    /// only: they are published). Their files' modes are not checked then (git does not
    /// keep modes).
    pub fn allow_example_keys(&mut self, allow: bool) -> &mut Self {
        self.allow_example_keys = allow;
        self
    }

    /// Reads and checks the member's private key: its file must exist, hold 64 hex digits,
    /// match the pinned public key, be neither an example key (unless allowed) nor, with
    /// the cluster file, readable or writable by group or others. The error names the
    /// file.
    pub fn member_key(&self, id: ProcessId) -> Result<SecretKey, NetError> {
        let cluster = self.path.as_ref().map_or_else(
            || "the cluster file".to_string(),
            |p| p.display().to_string(),
        );
        let path = self.private_key_path(id).ok_or_else(|| {
            NetError::Credentials(format!(
                "{cluster}: member {} has no private_key on this host",
                id.index()
            ))
        })?;
        let key = read_key(path)?;
        let shown = path.display();
        if Some(key.public()) != self.public_key(id) {
            return Err(NetError::Credentials(format!(
                "{shown}: not member {}'s key (its public key is not the one {cluster} pins)",
                id.index()
            )));
        }
        let example = EXAMPLE_KEYS.contains(&key.public().to_string().as_str());
        match (example, self.allow_example_keys) {
            (true, true) => return Ok(key),
            (true, false) => {
                return Err(NetError::Credentials(format!(
                    "{shown}: an example key published with lkcs (anyone can impersonate member \
                     {}); create your own with `lkcs cluster init`, or pass --allow-example-keys \
                     for a local test",
                    id.index()
                )))
            }
            (false, _) => {}
        }
        check_private(path)?;
        if let Some(p) = &self.path {
            check_private(p)?;
        }
        Ok(key)
    }

    /// The quota every member runs.
    pub fn spec(&self) -> &SystemSpec {
        &self.spec
    }

    /// The initial configuration (given, or found as `lkcs simulate` finds it).
    pub fn initial(&self) -> &[CsState] {
        &self.initial
    }

    /// The instance: every member's neighbourhood and bounds (what a monitor checks).
    pub fn instance(&self) -> &Instance {
        &self.instance
    }

    /// The timers of the links.
    pub fn timing(&self) -> Timing {
        self.timing
    }

    /// The view timers; `None` when the cluster runs no views (`evict_after_ms = 0`).
    pub fn views(&self) -> Option<ViewTiming> {
        self.views
    }

    /// View 0: every member (incarnation 0) in its initial state.
    pub fn initial_view(&self) -> super::view::View {
        let ids = (0..self.len()).map(ProcessId::from);
        super::view::View::initial(
            ids.clone().map(|p| (p, 0)).collect(),
            ids.zip(self.initial.iter().copied()).collect(),
        )
        .expect("a cluster has members, each with its initial state")
    }

    /// How member `id` runs the view log: the cluster's view timers around view 0 and its
    /// neighbours; `None` when the cluster runs no views.
    pub fn view_options(&self, id: ProcessId) -> Option<super::ViewOptions> {
        let t = self.views?;
        let neighbours = self.spec.topology.neighbors(id).iter().copied().collect();
        Some(super::ViewOptions {
            evict_after: t.evict_after,
            lease: t.lease,
            heartbeat: t.heartbeat,
            storage: match self.storage_dir(id) {
                Some(dir) => super::view::Storage::Dir(dir),
                None => super::view::Storage::Memory,
            },
            ..super::ViewOptions::new(self.initial_view(), neighbours)
        })
    }

    /// The folder member `id` keeps its view log in under this epoch
    /// (`[storage] dir`/member-`id`/epoch-`epoch`), `None` when the file has no `[storage]`
    /// (the log lives in memory). A new epoch starts every member's log afresh.
    pub fn storage_dir(&self, id: ProcessId) -> Option<PathBuf> {
        self.storage.as_ref().map(|dir| {
            dir.join(format!("member-{}", id.0))
                .join(format!("epoch-{}", self.epoch))
        })
    }

    /// The cluster epoch.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The canonical text of the quota: what the handshake's spec hash is taken over.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The hash of [`Cluster::canonical`] the members compare at the handshake.
    pub fn spec_hash(&self) -> [u8; 32] {
        super::spec_hash(&self.canonical)
    }

    /// The member's identity (with a fresh incarnation) and its links' configuration: its
    /// neighbours in the quota's topology and their addresses, or every other member when
    /// the cluster runs views (the view log talks to all of them).
    pub fn net_config(&self, id: ProcessId, log: super::Logger) -> Result<NetConfig, NetError> {
        if id.index() >= self.len() {
            return Err(NetError::Config(format!(
                "no member {id}: the cluster has members 0..{}",
                self.len()
            )));
        }
        let linked: Vec<ProcessId> = match self.views {
            Some(_) => (0..self.len())
                .map(ProcessId::from)
                .filter(|&p| p != id)
                .collect(),
            None => self.spec.topology.neighbors(id).to_vec(),
        };
        let peers = linked
            .into_iter()
            .map(|p| (p, self.members[p.index()].clone()))
            .collect();
        Ok(NetConfig {
            identity: Identity::new(id, self.member_key(id)?, self.spec_hash(), self.epoch),
            peers,
            keys: self.trust(),
            timing: self.timing,
            log,
            // with views a restarted member rejoins; without, it cannot come back
            on_restart: match self.views() {
                Some(_) => super::OnRestart::Accept,
                None => super::OnRestart::Refuse,
            },
        })
    }

    /// Starts member `id`'s node on `listener` (bound to its address, or to `bind` when the
    /// member listens elsewhere than where its peers reach it; a `tokio::net::TcpListener`,
    /// or any [`Listener`](super::io::Listener)), running the view log unless
    /// the cluster runs no views. Must run inside a tokio runtime.
    pub fn spawn(
        &self,
        id: ProcessId,
        listener: impl Into<super::io::Listener>,
        observer: Option<super::Observer>,
        log: super::Logger,
    ) -> Result<super::NodeHandle, NetError> {
        self.spawn_watched(id, listener, observer, None, log)
    }

    /// [`Cluster::spawn`], with `lease` told each new end of the member's lease before the
    /// member relies on it (a test monitor's hook; ignored without views).
    pub fn spawn_watched(
        &self,
        id: ProcessId,
        listener: impl Into<super::io::Listener>,
        observer: Option<super::Observer>,
        lease: Option<super::LeaseWatch>,
        log: super::Logger,
    ) -> Result<super::NodeHandle, NetError> {
        let cfg = self.net_config(id, log.clone())?;
        let views = self.view_options(id).map(|o| super::ViewOptions {
            on_lease: lease,
            ..o
        });
        let visitor = Spawn {
            id,
            cfg,
            listener: listener.into(),
            members: self.len(),
            views: views.map(|v| (v, self.spec.clone(), self.instance.clone())),
            observer,
            log,
        };
        self.spec
            .build(visitor)
            .map_err(|e| NetError::Config(e.to_string()))?
    }
}

/// Refuses a file that group or others may read or write (as ssh refuses a private key).
pub(super) fn check_private(path: &Path) -> Result<(), NetError> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let meta = std::fs::metadata(path)
            .map_err(|e| NetError::Credentials(format!("{}: {e}", path.display())))?;
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(NetError::Credentials(format!(
                "{} is accessible by group or others (mode {mode:03o}): `chmod 600 {}`",
                path.display(),
                path.display()
            )));
        }
    }
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

/// Reads a private key file: 64 hex digits, `#` comments.
fn read_key(path: &Path) -> Result<SecretKey, NetError> {
    use std::io::Read;
    let shown = path.display();
    let mut text = String::new();
    std::fs::File::open(path)
        .and_then(|f| f.take(MAX_KEY_FILE).read_to_string(&mut text))
        .map_err(|e| NetError::Credentials(format!("cannot read the private key {shown}: {e}")))?;
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    match lines.as_slice() {
        [one] => SecretKey::from_hex(one),
        _ => None,
    }
    .ok_or_else(|| {
        NetError::Credentials(format!(
            "{shown}: not a private key (one line of 64 hex digits)"
        ))
    })
}

/// Writes a member's private key file, readable by its owner only.
pub fn write_key(path: &Path, id: usize, key: &SecretKey) -> std::io::Result<()> {
    write_secret(
        path,
        &format!("the private key of member {id} (X25519); keep it on member {id}'s host only"),
        key,
    )
}

/// Writes the operator's private key file (`lkcs status`), readable by its owner only.
pub fn write_operator_key(path: &Path, key: &SecretKey) -> std::io::Result<()> {
    write_secret(
        path,
        "the operator's private key (X25519, `lkcs status`); keep it on the operator's host only",
        key,
    )
}

/// Writes `key` to a new file readable by its owner only, after a comment saying whose.
fn write_secret(path: &Path, whose: &str, key: &SecretKey) -> std::io::Result<()> {
    use std::io::Write;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut f = options.open(path)?;
    let written = writeln!(f, "# lkcs: {whose}")
        .and_then(|()| writeln!(f, "{}", key.to_hex()))
        .and_then(|()| f.sync_all());
    if written.is_err() {
        // a file this call created and could not fill: no half-written key stays behind
        let _ = std::fs::remove_file(path);
    }
    written
}

/// Member ids 0..N-1, each once, with their addresses (`IP:PORT` or `HOST:PORT`, not looked
/// up) and their keys.
fn members(
    table: &BTreeMap<String, MemberTable>,
    base: &Path,
    problems: &mut Vec<Problem>,
) -> (Vec<MemberAddress>, Vec<PublicKey>, Vec<Option<PathBuf>>) {
    if table.is_empty() {
        problems.push(cluster_problem(ClusterProblem::NoMembers));
        return (Vec::new(), Vec::new(), Vec::new());
    }
    let mut by_id = BTreeMap::new();
    // a section whose id is unreadable or repeated is reported once: the id it leaves
    // missing is not reported besides (ids missing beyond one per such section are)
    let mut bad_ids = 0usize;
    for (key, m) in table {
        let Ok(id) = key.trim().parse::<usize>() else {
            problems.push(cluster_problem(ClusterProblem::NotAMemberId(key.clone())));
            bad_ids += 1;
            continue;
        };
        let public = PublicKey::from_hex(&m.public_key);
        if public.is_none() {
            problems.push(cluster_problem(ClusterProblem::BadPublicKey {
                member: Some(id),
            }));
        }
        let private = m.private_key.as_ref().map(|p| base.join(p));
        let address = MemberAddress::parse(m.address.trim());
        match &address {
            None => problems.push(cluster_problem(ClusterProblem::BadAddress {
                member: id,
                address: m.address.clone(),
            })),
            Some(a) if a.port() == 0 => {
                problems.push(cluster_problem(ClusterProblem::PortZero { member: id }))
            }
            Some(_) => {}
        }
        // a member with a bad address is still listed: its id is not missing, and the
        // member count is not short by one
        if by_id.insert(id, (address, public, private)).is_some() {
            problems.push(cluster_problem(ClusterProblem::ListedTwice(id)));
            bad_ids += 1;
        }
    }
    let n = table.len();
    let missing: Vec<usize> = (0..n).filter(|i| !by_id.contains_key(i)).collect();
    if let Some(&missing) = missing.first().filter(|_| missing.len() > bad_ids) {
        problems.push(cluster_problem(ClusterProblem::MissingId { missing, n }));
    }
    let mut seen = BTreeMap::new();
    let mut seen_keys = BTreeMap::new();
    for (id, (a, k, _)) in &by_id {
        if let Some(a) = a
            && let Some(other) = seen.insert(a.clone(), *id)
        {
            problems.push(cluster_problem(ClusterProblem::SharedAddress {
                first: other,
                second: *id,
                address: a.to_string(),
            }));
        }
        if let Some(k) = k
            && let Some(other) = seen_keys.insert(*k, *id)
        {
            problems.push(cluster_problem(ClusterProblem::SharedKey {
                first: other,
                second: *id,
            }));
        }
    }
    let mut addrs = Vec::new();
    let mut keys = Vec::new();
    let mut privates = Vec::new();
    for (a, k, p) in by_id.into_values() {
        // a placeholder where a problem was reported (the cluster is not built then)
        addrs.push(a.unwrap_or(MemberAddress::Ip(([0, 0, 0, 0], 0).into())));
        keys.push(k.unwrap_or(PublicKey([0; 32])));
        privates.push(p);
    }
    (addrs, keys, privates)
}

/// The view timers, or `None` with `evict_after_ms = 0`.
fn view_timing(t: &TimingTable) -> Option<ViewTiming> {
    let ms = |v: Option<u64>, default: u64| Duration::from_millis(v.unwrap_or(default));
    match t.evict_after_ms {
        Some(0) => None,
        evict => Some(ViewTiming {
            evict_after: ms(evict, 5000),
            lease: ms(t.lease_ms, 3000),
            heartbeat: ms(t.lease_heartbeat_ms, 500),
        }),
    }
}

fn timing(t: &TimingTable, problems: &mut Vec<Problem>) -> Timing {
    let d = Timing::default();
    let ms = |v: Option<u64>, default: Duration| v.map_or(default, Duration::from_millis);
    let timing = Timing {
        heartbeat: ms(t.heartbeat_ms, d.heartbeat),
        peer_timeout: ms(t.peer_timeout_ms, d.peer_timeout),
        backoff_min: ms(t.backoff_min_ms, d.backoff_min),
        backoff_max: ms(t.backoff_max_ms, d.backoff_max),
        handshake_timeout: ms(t.handshake_timeout_ms, d.handshake_timeout),
        max_handshakes: t.max_handshakes.unwrap_or(d.max_handshakes),
        max_handshakes_per_source: t
            .max_handshakes_per_source
            .unwrap_or(d.max_handshakes_per_source),
        refusal_log_interval: ms(t.refusal_log_interval_ms, d.refusal_log_interval),
        window: t.window.unwrap_or(d.window),
    };
    if let Err(e) = timing.check() {
        problems.push(cluster_problem(ClusterProblem::Timing(e.to_string())));
    }
    timing
}

/// The quota's options in a fixed order, the resolved initial configuration and the member
/// count: equal texts mean the members build the same system.
fn canonical(
    spec: &SystemSpec,
    initial: &[CsState],
    members: usize,
    views: Option<ViewTiming>,
    durable: bool,
) -> String {
    let opt = |v: Option<String>| v.unwrap_or_else(|| "-".into());
    let list = |v: &Option<Vec<usize>>| {
        v.as_ref()
            .map(|v| v.iter().map(usize::to_string).collect::<Vec<_>>().join(","))
    };
    let bounds = spec.bounds.as_ref();
    [
        format!("lkcs-cluster {}", super::frame::PROTOCOL_VERSION),
        format!("algorithm={}", spec.algorithm.name()),
        format!("topology={}", spec.topology.name()),
        format!("members={members}"),
        format!("l={}", opt(spec.l.map(|v| v.to_string()))),
        format!("k={}", opt(spec.k.map(|v| v.to_string()))),
        format!("bounds.l={}", opt(bounds.and_then(|b| list(&b.l)))),
        format!("bounds.k={}", opt(bounds.and_then(|b| list(&b.k)))),
        format!("initial={}", format_initial(initial)),
        format!("variant={}", spec.variant.name()),
        format!("leader={}", opt(spec.leader.map(|v| v.to_string()))),
        format!("coterie={}", opt(spec.coterie.map(|v| v.to_string()))),
        format!("mx={}", opt(spec.mx.map(|v| v.to_string()))),
        format!("maxreq={}", opt(spec.maxreq.map(|v| v.to_string()))),
        format!(
            "migrate_after={}",
            opt(spec.migrate_after.map(|v| v.to_string()))
        ),
        format!(
            "views={}",
            opt(views.map(|v| format!(
                "evict_after_ms:{},lease_ms:{},lease_heartbeat_ms:{}",
                v.evict_after.as_millis(),
                v.lease.as_millis(),
                v.heartbeat.as_millis()
            )))
        ),
    ]
    .into_iter()
    // only when set, so that the files without it keep their hash
    .chain(durable.then(|| "storage=disk".to_string()))
    .collect::<Vec<_>>()
    .join("\n")
}

/// Builds the system to check it and resolve its initial configuration.
struct Resolve;

impl SystemVisitor for Resolve {
    type Output = (Vec<CsState>, Instance);
    fn visit<A: CsObject>(
        self,
        instance: &Instance,
        initial: &[CsState],
        _: Vec<A>,
    ) -> Self::Output {
        (initial.to_vec(), instance.clone())
    }
}

struct Spawn {
    id: ProcessId,
    cfg: NetConfig,
    listener: super::io::Listener,
    members: usize,
    /// The view options, and what the object is rebuilt from at each view.
    views: Option<(super::ViewOptions, SystemSpec, Instance)>,
    observer: Option<super::Observer>,
    log: super::Logger,
}

impl SystemVisitor for Spawn {
    type Output = Result<super::NodeHandle, NetError>;
    fn visit<A: CsObject>(self, _: &Instance, _: &[CsState], procs: Vec<A>) -> Self::Output {
        let Some(obj) = procs.into_iter().nth(self.id.index()) else {
            return Err(NetError::Config(format!("no member {}", self.id)));
        };
        let net = super::Net::start(self.cfg, self.listener)?;
        match self.views {
            None => super::Node::spawn_in(obj, net, self.members, self.observer, self.log),
            Some((options, spec, instance)) => {
                let rebuild = super::rebuild_from(spec, instance, self.id);
                super::Node::spawn_with_views(obj, net, options, rebuild, self.observer, self.log)
            }
        }
    }
}

#[cfg(test)]
mod tests;
