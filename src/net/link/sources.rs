//! Admission before any cryptography: the addresses a peer's connection may come from, each
//! with its handshake permits ([`Sources`], kept up to date for the peers given by host
//! name), and the connections from any other address, held unread until they are closed
//! ([`Held`]).

use crate::id::ProcessId;
use crate::net::io::BoxStream;
use crate::net::{LogEvent, Logger, MemberAddress, Timing};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use tokio::sync::Semaphore;
use tokio::time::Instant;

/// How often the peers given by host name are looked up again to admit their connections
/// (a name that did not resolve is tried again after [`Timing::backoff_max`]).
const RESOLVE_EVERY: std::time::Duration = std::time::Duration::from_secs(30);

/// The addresses the peers' connections may come from, each with its handshake permits:
/// the IP addresses of the peers given by address, and those the host names of the others
/// had at their latest lookup.
pub(super) struct Sources {
    /// The IP addresses given as such.
    fixed: BTreeSet<IpAddr>,
    /// Each peer given by name: its addresses at the latest lookup that found any.
    named: BTreeMap<ProcessId, BTreeSet<IpAddr>>,
    gates: BTreeMap<IpAddr, Arc<Semaphore>>,
    per_source: usize,
}

impl Sources {
    pub(super) fn new(peers: &BTreeMap<ProcessId, MemberAddress>, per_source: usize) -> Sources {
        let fixed = peers
            .values()
            .filter_map(|a| match a {
                MemberAddress::Ip(a) => Some(a.ip().to_canonical()),
                MemberAddress::Name { .. } => None,
            })
            .collect();
        let mut s = Sources {
            fixed,
            named: BTreeMap::new(),
            gates: BTreeMap::new(),
            per_source,
        };
        s.rebuild();
        s
    }

    /// The permits of `source`, when it is a peer's host.
    pub(super) fn gate(&self, source: IpAddr) -> Option<Arc<Semaphore>> {
        self.gates.get(&source).cloned()
    }

    /// Keeps the permits of the addresses still in use, gives new addresses theirs, drops
    /// the others.
    fn rebuild(&mut self) {
        let now: BTreeSet<IpAddr> = self
            .fixed
            .iter()
            .chain(self.named.values().flatten())
            .copied()
            .collect();
        self.gates.retain(|ip, _| now.contains(ip));
        for ip in now {
            self.gates
                .entry(ip)
                .or_insert_with(|| Arc::new(Semaphore::new(self.per_source)));
        }
    }

    /// Looks up the peers given by host name, now (then says so on `looked_up`) and then
    /// every [`RESOLVE_EVERY`] (after [`Timing::backoff_max`] while one does not resolve),
    /// logging a name that does not resolve ([`LogEvent::Unresolved`]); a name keeps its
    /// last addresses until a lookup finds others.
    pub(super) async fn refresh(
        sources: Arc<Mutex<Sources>>,
        named: Vec<(ProcessId, MemberAddress)>,
        looked_up: tokio::sync::watch::Sender<bool>,
        timing: Timing,
        me: ProcessId,
        log: Logger,
    ) {
        loop {
            let mut all = true;
            for (peer, address) in &named {
                match address.lookup().await {
                    Ok(addrs) => {
                        let ips = addrs.iter().map(|a| a.ip().to_canonical()).collect();
                        let mut s = sources.lock().unwrap_or_else(|p| p.into_inner());
                        if s.named.get(peer) != Some(&ips) {
                            s.named.insert(*peer, ips);
                            s.rebuild();
                        }
                    }
                    Err(error) => {
                        all = false;
                        log(me, &LogEvent::Unresolved { peer: *peer, error });
                    }
                }
            }
            looked_up.send_replace(true);
            tokio::time::sleep(if all {
                RESOLVE_EVERY
            } else {
                timing.backoff_max
            })
            .await;
        }
    }
}

/// How long a connection from an address that is no peer's host is held, unread, before it
/// is closed.
const HOLD: std::time::Duration = std::time::Duration::from_secs(30);

/// Connections from addresses that are no peer's host, shed before any cryptography: each is
/// held open and never read until [`HOLD`] has passed or room is needed, instead of being
/// closed at once. A flooder that keeps N connections open then holds N connections that
/// cost the node nothing (no read, no wake-up), where closing them made it reopen them as
/// fast as it could, each a TCP handshake, an accept and a close: measured on loopback, the
/// cluster kept 0.30-0.39 of its rate under 100 such connections per member closed at once
/// (the flooder reopened 17,000 a second) (examples/flood_bench.rs). Past the room (a share
/// of the open-file limit, [`Held::room`]) or a source's share of it, a connection is closed
/// at once, as before.
pub(super) struct Held {
    conns: VecDeque<(Instant, IpAddr, BoxStream)>,
    per_source: BTreeMap<IpAddr, usize>,
    room: usize,
}

impl Held {
    pub(super) fn new() -> Held {
        Held {
            conns: VecDeque::new(),
            per_source: BTreeMap::new(),
            room: Held::room(),
        }
    }

    /// An eighth of the process's open-file limit (read from /proc/self/limits; 1,024
    /// assumed where it cannot be read), at most 4,096: the rest stays for the links, the
    /// members' own work, the application and other nodes of the same process.
    fn room() -> usize {
        let soft = std::fs::read_to_string("/proc/self/limits")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("Max open files"))
                    .and_then(|l| l.split_whitespace().nth(3).map(str::to_owned))
            })
            .and_then(|v| v.parse::<usize>().ok())
            .unwrap_or(1024);
        (soft / 8).min(4096)
    }

    /// Closes what was held for [`HOLD`].
    fn expire(&mut self, now: Instant) {
        while let Some((since, _, _)) = self.conns.front() {
            if now.duration_since(*since) < HOLD {
                break;
            }
            self.pop();
        }
    }

    fn pop(&mut self) {
        if let Some((_, source, _)) = self.conns.pop_front()
            && let Some(n) = self.per_source.get_mut(&source)
        {
            *n -= 1;
            if *n == 0 {
                self.per_source.remove(&source);
            }
        }
    }

    /// Holds `stream` if its source has room (half the room at most for one source; the
    /// oldest held connection is closed to make room when all of it is taken); otherwise
    /// it is closed.
    pub(super) fn hold(&mut self, source: IpAddr, stream: BoxStream, now: Instant) {
        self.expire(now);
        let mine = self.per_source.get(&source).copied().unwrap_or(0);
        if mine >= (self.room / 2).max(1) {
            return;
        }
        if self.conns.len() >= self.room {
            self.pop();
        }
        *self.per_source.entry(source).or_insert(0) += 1;
        self.conns.push_back((now, source, stream));
    }
}
