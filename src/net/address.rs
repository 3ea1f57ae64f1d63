//! [`MemberAddress`]: where a member listens, as the cluster file gives it: an IP address
//! and port, or a host name and port looked up when it is needed (when the member binds,
//! when a peer dials it, and to admit its connections), never when the file is read.

use super::NetError;
use std::fmt;
use std::net::{SocketAddr, ToSocketAddrs};
use std::str::FromStr;

/// The longest host name (RFC 1035: 253 characters, dots included).
const MAX_HOST: usize = 253;

/// A member's address: `IP:PORT` (`[IPv6]:PORT`), or `HOST:PORT` with a host name looked
/// up when it is used ([`MemberAddress::resolve`], [`MemberAddress::lookup`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum MemberAddress {
    /// An IP address and port: used as it is, never looked up.
    Ip(SocketAddr),
    /// A host name and port, looked up each time it is used.
    Name {
        /// The host name, in lower case (names are compared without regard to case).
        host: String,
        /// The port.
        port: u16,
    },
}

impl MemberAddress {
    /// Reads `IP:PORT`, `[IPv6]:PORT` or `HOST:PORT` (a host name of letters, digits, `-`,
    /// `_` and `.`, not all digits and dots, kept in lower case); `None` for anything else.
    /// Nothing is looked up.
    pub fn parse(text: &str) -> Option<MemberAddress> {
        if let Ok(a) = SocketAddr::from_str(text) {
            return Some(MemberAddress::Ip(a));
        }
        let (host, port) = text.rsplit_once(':')?;
        let port = port.parse::<u16>().ok()?;
        let name_like = !host.is_empty()
            && host.len() <= MAX_HOST
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
            && !host.starts_with(['.', '-'])
            // 999.1.1.1 is a bad IP address, not a name
            && !host.chars().all(|c| c.is_ascii_digit() || c == '.');
        name_like.then(|| MemberAddress::Name {
            host: host.to_ascii_lowercase(),
            port,
        })
    }

    /// The port.
    pub fn port(&self) -> u16 {
        match self {
            MemberAddress::Ip(a) => a.port(),
            MemberAddress::Name { port, .. } => *port,
        }
    }

    /// Its socket addresses: the address itself, or every address the host name has now
    /// (a blocking lookup). A name that does not resolve, or resolves to nothing, is
    /// [`NetError::Unresolved`] naming it.
    pub fn resolve(&self) -> Result<Vec<SocketAddr>, NetError> {
        match self {
            MemberAddress::Ip(a) => Ok(vec![*a]),
            MemberAddress::Name { host, port } => {
                let found = (host.as_str(), *port).to_socket_addrs();
                self.found(found.map(Iterator::collect))
            }
        }
    }

    /// [`MemberAddress::resolve`] without blocking the runtime (tokio's `lookup_host`).
    pub async fn lookup(&self) -> Result<Vec<SocketAddr>, NetError> {
        match self {
            MemberAddress::Ip(a) => Ok(vec![*a]),
            MemberAddress::Name { host, port } => {
                let found = tokio::net::lookup_host((host.as_str(), *port)).await;
                self.found(found.map(Iterator::collect))
            }
        }
    }

    fn found(&self, found: std::io::Result<Vec<SocketAddr>>) -> Result<Vec<SocketAddr>, NetError> {
        match found {
            Ok(addrs) if !addrs.is_empty() => Ok(addrs),
            Ok(_) => Err(NetError::Unresolved {
                address: self.to_string(),
                reason: "the name has no address".into(),
            }),
            Err(e) => Err(NetError::Unresolved {
                address: self.to_string(),
                reason: e.to_string(),
            }),
        }
    }
}

impl From<SocketAddr> for MemberAddress {
    fn from(a: SocketAddr) -> Self {
        MemberAddress::Ip(a)
    }
}

impl fmt::Display for MemberAddress {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MemberAddress::Ip(a) => write!(f, "{a}"),
            MemberAddress::Name { host, port } => write!(f, "{host}:{port}"),
        }
    }
}

/// Binds and connects as [`MemberAddress::resolve`] resolves (`TcpListener::bind(&address)`
/// tries each address in turn).
impl ToSocketAddrs for MemberAddress {
    type Iter = std::vec::IntoIter<SocketAddr>;

    fn to_socket_addrs(&self) -> std::io::Result<Self::Iter> {
        self.resolve()
            .map(Vec::into_iter)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::NotFound, e.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn addresses_parse_without_a_lookup() {
        let ip = MemberAddress::parse("127.0.0.1:7411").unwrap();
        assert_eq!(ip, MemberAddress::Ip("127.0.0.1:7411".parse().unwrap()));
        assert!(matches!(
            MemberAddress::parse("[::1]:7411"),
            Some(MemberAddress::Ip(_))
        ));
        assert_eq!(
            MemberAddress::parse("Node-A.example:7001"),
            Some(MemberAddress::Name {
                host: "node-a.example".into(),
                port: 7001
            })
        );
        for bad in [
            "127.0.0.1:99999",
            "999.1.1.1:80",
            "localhost",
            ":80",
            "a b:80",
            "[::1:80",
            "host:",
            "-x:80",
        ] {
            assert_eq!(MemberAddress::parse(bad), None, "{bad}");
        }
    }
}
