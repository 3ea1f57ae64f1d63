//! Where a member's connections come from and go: TCP through tokio, or any other network
//! that carries byte streams (a simulated one in the tests: `tests/sim_net.rs` runs the real
//! links, handshakes, view log and nodes over turmoil's simulated network, with partitions,
//! crashes and restarts replayed from a seed).
//!
//! [`Net::start`](super::Net::start) takes a [`Listener`]: a `tokio::net::TcpListener`
//! converts into one, and its links then dial with TCP ([`Listener::new`] pairs any other
//! acceptor with its [`Network`]).

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use tokio::io::{AsyncRead, AsyncWrite};

/// A connection's byte stream.
pub trait Stream: AsyncRead + AsyncWrite + Send + Unpin + 'static {
    /// The address of the other end.
    fn peer_addr(&self) -> io::Result<SocketAddr>;
}

impl Stream for tokio::net::TcpStream {
    fn peer_addr(&self) -> io::Result<SocketAddr> {
        tokio::net::TcpStream::peer_addr(self)
    }
}

/// A boxed [`Stream`]: what every connection of a [`Net`](super::Net) runs on.
pub type BoxStream = Box<dyn Stream>;

/// A future the network traits return.
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How a member's links dial their peers.
pub trait Network: Send + Sync + 'static {
    /// Opens a connection to `addr`.
    fn connect(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<BoxStream>>;
}

/// The connections that come to a member.
pub trait Accept: Send + 'static {
    /// The next connection, with the address it comes from.
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>>;

    /// The address it listens on.
    fn local_addr(&self) -> io::Result<SocketAddr>;
}

/// A member's listening end and the network its links dial on.
pub struct Listener {
    pub(crate) accept: Box<dyn Accept>,
    pub(crate) network: Arc<dyn Network>,
}

impl Listener {
    /// Connections come from `accept`, and links dial through `network`.
    pub fn new(accept: impl Accept, network: Arc<dyn Network>) -> Listener {
        Listener {
            accept: Box::new(accept),
            network,
        }
    }
}

impl std::fmt::Debug for Listener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener")
            .field("local_addr", &self.accept.local_addr().ok())
            .finish_non_exhaustive()
    }
}

/// TCP through tokio, every connection with `TCP_NODELAY` (a frame goes out at once).
#[derive(Clone, Copy, Debug, Default)]
pub struct Tcp;

impl Network for Tcp {
    fn connect(&self, addr: SocketAddr) -> BoxFuture<'static, io::Result<BoxStream>> {
        Box::pin(async move {
            let stream = tokio::net::TcpStream::connect(addr).await?;
            let _ = stream.set_nodelay(true);
            Ok(Box::new(stream) as BoxStream)
        })
    }
}

impl Accept for tokio::net::TcpListener {
    fn accept(&mut self) -> BoxFuture<'_, io::Result<(BoxStream, SocketAddr)>> {
        Box::pin(async move {
            let (stream, addr) = tokio::net::TcpListener::accept(self).await?;
            let _ = stream.set_nodelay(true);
            Ok((Box::new(stream) as BoxStream, addr))
        })
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        tokio::net::TcpListener::local_addr(self)
    }
}

impl From<tokio::net::TcpListener> for Listener {
    fn from(listener: tokio::net::TcpListener) -> Listener {
        Listener::new(listener, Arc::new(Tcp))
    }
}
