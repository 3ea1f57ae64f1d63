//! The cluster file: who the members are, what quota they run, and the shared secret.
//!
//! ```toml
//! secret = "a shared secret of at least 16 characters"
//! epoch = 1                      # bump it to restart the cluster as a whole
//!
//! [quota]                        # the vocabulary of `lkcs simulate`
//! algorithm = "gcs"
//! topology = "complete:3"        # default: complete:N over the N members
//! l = 1
//! k = 2
//!
//! [members]                      # member id -> address (ids 0..N-1, each once)
//! 0 = "127.0.0.1:7411"
//! 1 = "127.0.0.1:7412"
//! 2 = "127.0.0.1:7413"
//!
//! [timing]                       # optional, milliseconds
//! peer_timeout_ms = 3000
//! ```
//!
//! `[quota]` takes the system options of `lkcs simulate` under the same names: `algorithm`,
//! `topology`, `l`, `k`, `bounds = { l = [...], k = [...] }`, `initial = "in:0,2"`,
//! `variant`, `leader`, `coterie`, `mx`, `maxreq`, `migrate_after`. Every member builds the
//! whole system from it and runs its own process of it, so every member must read the same
//! quota: the handshake compares the SHA-256 of its canonical text ([`Cluster::canonical`]:
//! the options in a fixed order, the resolved initial configuration and the member ids, not
//! the addresses, the secret or the timing) and refuses a peer whose hash differs.

use super::{Identity, NetConfig, NetError, Timing};
use crate::{
    format_initial, parse_initial, BoundsFile, ConfigError, CsObject, CsState, Instance, Problem,
    ProcessId, SystemSpec, SystemVisitor, Topology, Variant,
};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::Path;
use std::time::Duration;

/// The largest cluster file read.
const MAX_FILE: u64 = 1 << 20;

/// The shortest secret accepted, in bytes.
pub const MIN_SECRET: usize = 16;

/// A cluster file as written.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    secret: String,
    #[serde(default = "one")]
    epoch: u64,
    quota: QuotaTable,
    members: BTreeMap<String, String>,
    #[serde(default)]
    timing: TimingTable,
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
    window: Option<usize>,
}

/// A cluster, read and checked: build a member's node with [`Cluster::spawn`].
#[derive(Clone)]
pub struct Cluster {
    spec: SystemSpec,
    members: Vec<SocketAddr>,
    secret: Vec<u8>,
    epoch: u64,
    timing: Timing,
    initial: Vec<CsState>,
    instance: Instance,
    canonical: String,
}

impl fmt::Debug for Cluster {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cluster")
            .field("canonical", &self.canonical)
            .field("members", &self.members)
            .field("secret", &"<hidden>")
            .field("epoch", &self.epoch)
            .field("timing", &self.timing)
            .finish()
    }
}

fn invalid(e: impl Into<String>) -> Problem {
    Problem::Invalid(e.into())
}

impl Cluster {
    /// Reads and checks a cluster file (at most 1 MiB). Every problem found is in the error.
    pub fn load(path: &Path) -> Result<Cluster, ConfigError> {
        use std::io::Read;
        let what = path.display();
        let file = std::fs::File::open(path)
            .map_err(|e| ConfigError::one(invalid(format!("cannot read {what}: {e}"))))?;
        let mut bytes = Vec::new();
        file.take(MAX_FILE + 1)
            .read_to_end(&mut bytes)
            .map_err(|e| ConfigError::one(invalid(format!("cannot read {what}: {e}"))))?;
        if bytes.len() as u64 > MAX_FILE {
            return Err(ConfigError::one(invalid(format!(
                "{what} is larger than 1 MiB: not a cluster file"
            ))));
        }
        let text = String::from_utf8(bytes)
            .map_err(|_| ConfigError::one(invalid(format!("{what} is not UTF-8 text"))))?;
        Cluster::parse(&text).map_err(|e| ConfigError {
            problems: e
                .problems
                .into_iter()
                .map(|p| invalid(format!("{what}: {p}")))
                .collect(),
        })
    }

    /// Checks the text of a cluster file (see the module doc). Member addresses are
    /// resolved here (`host:port` is looked up once).
    pub fn parse(text: &str) -> Result<Cluster, ConfigError> {
        let file: File = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            let at = e
                .span()
                .map(|s| {
                    let line = text[..s.start.min(text.len())].matches('\n').count() + 1;
                    format!(" (line {line})")
                })
                .unwrap_or_default();
            ConfigError::one(invalid(format!("not a cluster file{at}: {msg}")))
        })?;
        let mut problems = Vec::new();
        if file.secret.len() < MIN_SECRET {
            problems.push(invalid(format!(
                "secret: at least {MIN_SECRET} bytes (it authenticates the members)"
            )));
        }
        let members = members(&file.members, &mut problems);
        let timing = timing(&file.timing, &mut problems);
        let q = &file.quota;
        let topology = match &q.topology {
            Some(t) => Topology::parse(t)
                .map_err(|e| problems.extend(e.problems))
                .ok(),
            None if members.is_empty() => None,
            None => Topology::complete(members.len())
                .map_err(|e| problems.extend(e.problems))
                .ok(),
        };
        if let Some(t) = &topology {
            if !members.is_empty() && t.len() != members.len() {
                problems.push(invalid(format!(
                    "quota: topology {} has {} processes, [members] lists {}",
                    t.name(),
                    t.len(),
                    members.len()
                )));
            }
        }
        let algorithm = q.algorithm.parse().map_err(|p| problems.push(p)).ok();
        let variant = match q.variant.as_deref() {
            None => Some(Variant::Corrected),
            Some(v) => Variant::parse(v).or_else(|| {
                problems.push(invalid(format!(
                    "quota: variant `{v}`: expected corrected, printed or trip (lkcs only)"
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
            return Err(ConfigError::one(invalid("invalid quota")));
        };
        let spec = SystemSpec {
            algorithm,
            topology,
            l: q.l,
            k: q.k,
            bounds: q.bounds.clone(),
            initial,
            variant,
            leader: q.leader.clone(),
            coterie: q.coterie.clone(),
            mx: q.mx.clone(),
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
        let (initial, instance) = spec.build(Resolve)?;
        let canonical = canonical(&spec, &initial, members.len());
        Ok(Cluster {
            spec,
            members,
            secret: file.secret.into_bytes(),
            epoch: file.epoch,
            timing,
            initial,
            instance,
            canonical,
        })
    }

    /// The number of members.
    pub fn len(&self) -> usize {
        self.members.len()
    }

    /// Whether the cluster has no member (never: [`Cluster::parse`] refuses it).
    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// The member's address.
    pub fn address(&self, id: ProcessId) -> Option<SocketAddr> {
        self.members.get(id.index()).copied()
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
    /// neighbours in the quota's topology and their addresses.
    pub fn net_config(&self, id: ProcessId, log: super::Logger) -> Result<NetConfig, NetError> {
        if id.index() >= self.len() {
            return Err(NetError::Config(format!(
                "no member {id}: the cluster has members 0..{}",
                self.len()
            )));
        }
        let peers = self
            .spec
            .topology
            .neighbors(id)
            .iter()
            .map(|&p| (p, self.members[p.index()]))
            .collect();
        Ok(NetConfig {
            identity: Identity::new(id, self.secret.clone(), self.spec_hash(), self.epoch),
            peers,
            timing: self.timing,
            log,
        })
    }

    /// Starts member `id`'s node on `listener` (bound to its address, or to `bind` when the
    /// member listens elsewhere than where its peers reach it). Must run inside a tokio
    /// runtime.
    pub fn spawn(
        &self,
        id: ProcessId,
        listener: tokio::net::TcpListener,
        observer: Option<super::Observer>,
        log: super::Logger,
    ) -> Result<super::NodeHandle, NetError> {
        let cfg = self.net_config(id, log.clone())?;
        let visitor = Spawn {
            id,
            cfg,
            listener,
            members: self.len(),
            observer,
            log,
        };
        self.spec
            .build(visitor)
            .map_err(|e| NetError::Config(e.to_string()))?
    }
}

/// Member ids 0..N-1, each once, with resolvable addresses.
fn members(table: &BTreeMap<String, String>, problems: &mut Vec<Problem>) -> Vec<SocketAddr> {
    if table.is_empty() {
        problems.push(invalid("[members]: no member"));
        return Vec::new();
    }
    let mut by_id = BTreeMap::new();
    for (key, addr) in table {
        let Ok(id) = key.trim().parse::<usize>() else {
            problems.push(invalid(format!(
                "[members]: `{key}` is not a member id (0, 1, 2, ...)"
            )));
            continue;
        };
        match addr.to_socket_addrs().map(|mut a| a.next()) {
            Ok(Some(a)) => {
                if by_id.insert(id, a).is_some() {
                    problems.push(invalid(format!("[members]: member {id} is listed twice")));
                }
            }
            Ok(None) | Err(_) => problems.push(invalid(format!(
                "[members]: member {id}: `{addr}` is not an address (host:port)"
            ))),
        }
    }
    let n = table.len();
    if let Some(missing) = (0..n).find(|i| !by_id.contains_key(i)) {
        problems.push(invalid(format!(
            "[members]: ids must be 0..{}; {missing} is missing",
            n - 1
        )));
    }
    let mut seen = BTreeMap::new();
    for (id, a) in &by_id {
        if let Some(other) = seen.insert(*a, *id) {
            problems.push(invalid(format!(
                "[members]: members {other} and {id} share the address {a}"
            )));
        }
    }
    by_id.into_values().collect()
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
        window: t.window.unwrap_or(d.window),
    };
    if let Err(e) = timing.check() {
        problems.push(invalid(format!("[timing]: {e}")));
    }
    timing
}

/// The quota's options in a fixed order, the resolved initial configuration and the member
/// count: equal texts mean the members build the same system.
fn canonical(spec: &SystemSpec, initial: &[CsState], members: usize) -> String {
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
        format!("leader={}", opt(spec.leader.clone())),
        format!("coterie={}", opt(spec.coterie.clone())),
        format!("mx={}", opt(spec.mx.clone())),
        format!("maxreq={}", opt(spec.maxreq.map(|v| v.to_string()))),
        format!(
            "migrate_after={}",
            opt(spec.migrate_after.map(|v| v.to_string()))
        ),
    ]
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
    listener: tokio::net::TcpListener,
    members: usize,
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
        super::Node::spawn_in(obj, net, self.members, self.observer, self.log)
    }
}
