//! [`Member`] over TCP: the node of one member of a [`Cluster`], behind the same calls as a
//! member of an in-process [`Quota`](crate::Quota) (blocking, with timeouts, async).

use super::{Cluster, Logger, NetError, NodeError, NodeHandle};
use crate::facade::member::MemberEngine;
use crate::{
    cs::{CsState, Sequence},
    Member, ProcessId, QuotaError,
};
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

type Moving = Pin<Box<dyn Future<Output = Result<(), NodeError>> + Send>>;

/// The engine of a member over TCP: its node, and the thread its tasks run on.
struct NetEngine {
    node: NodeHandle,
    /// Stops the node's thread, which then drops the node's tasks and sockets (as
    /// `Runtime::shutdown_background` does: no call waits for it).
    stop: Mutex<Option<tokio::sync::oneshot::Sender<()>>>,
    /// The move an async call is waiting for, and where it goes.
    polled: Mutex<Option<(CsState, Moving)>>,
    /// With views, how long dropping the member waits for its graceful leave.
    leave_within: Option<std::time::Duration>,
    /// Without views, how long dropping the member waits for its peers to acknowledge what
    /// it sent (twice the peer timeout, as `lkcs node` waits at the end of its run).
    drain_within: std::time::Duration,
    /// The node's runtime: a drain waits on its timers.
    runtime: tokio::runtime::Handle,
}

fn quota_error(e: NodeError) -> QuotaError {
    match e {
        NodeError::PeerUnreachable(p) => QuotaError::PeerUnreachable(p.index()),
        NodeError::Stopped => QuotaError::Shutdown,
        NodeError::Evicted { .. } => QuotaError::Evicted,
        NodeError::Call(e) => QuotaError::Internal(format!("the node refused a call: {e}")),
    }
}

fn moving(node: &NodeHandle, target: CsState) -> Moving {
    let node = node.clone();
    Box::pin(async move { node.reach(target).await })
}

/// How long past its own bound dropping a member waits for its drain.
const DRAIN_MARGIN: std::time::Duration = std::time::Duration::from_millis(100);

/// `fut` for [`block_on`]: outside tokio's cooperative budget. A member dropped or called
/// inside a tokio task whose budget ran out would otherwise have its wake-up deferred to
/// the end of a scheduler pass that never ends, since this thread is parked.
fn blocking<T: 'static>(
    fut: Pin<Box<dyn Future<Output = T> + Send>>,
) -> Pin<Box<dyn Future<Output = T> + Send>> {
    Box::pin(tokio::task::unconstrained(fut))
}

struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `fut` on this thread until it is ready or `deadline` passes (`None`). The node's
/// futures need no runtime of their own (its channels wake any waker), so a blocking call
/// works from any thread, inside an async runtime or not.
fn block_on<T>(mut fut: Pin<&mut dyn Future<Output = T>>, deadline: Option<Instant>) -> Option<T> {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return Some(v);
        }
        match deadline {
            None => std::thread::park(),
            Some(d) => {
                let now = Instant::now();
                if now >= d {
                    return None;
                }
                std::thread::park_timeout(d - now);
            }
        }
    }
}

impl MemberEngine for NetEngine {
    fn progress(&self) -> (CsState, Option<Sequence>) {
        (self.node.state(), self.node.pending())
    }
    fn token(&self) -> Option<crate::FencingToken> {
        self.node.token()
    }

    fn reach(&self, target: CsState, deadline: Option<Instant>) -> Result<(), QuotaError> {
        let mut fut = blocking(moving(&self.node, target));
        match block_on(fut.as_mut(), deadline) {
            Some(r) => r.map_err(quota_error),
            None => Err(QuotaError::Timeout),
        }
    }

    fn poll_reach(&self, target: CsState, waker: &Waker) -> Poll<Result<(), QuotaError>> {
        let mut polled = self.polled.lock().unwrap_or_else(|p| p.into_inner());
        if polled.as_ref().is_none_or(|(t, _)| *t != target) {
            *polled = Some((target, moving(&self.node, target)));
        }
        let (_, fut) = polled.as_mut().expect("set above");
        let r = fut.as_mut().poll(&mut Context::from_waker(waker));
        if r.is_ready() {
            *polled = None;
        }
        r.map(|r| r.map_err(quota_error))
    }

    fn cancel_poll(&self) {
        *self.polled.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    fn retire(&self) {
        match self.leave_within {
            Some(within) => {
                // a graceful leave: out of the CS first, then out of the view; past the
                // bound, the node stops and the others evict it
                let mut leave: Moving = {
                    let node = self.node.clone();
                    blocking(Box::pin(async move { node.leave().await }))
                };
                let _ = block_on(leave.as_mut(), Some(Instant::now() + within));
            }
            None => {
                // the node stops for good, and its links resend what a reset lost only while
                // it lives: first the peers acknowledge what it sent (the releases of its
                // last exit, say), or the bound passes
                let node = self.node.clone();
                let within = self.drain_within;
                let drained = self.runtime.spawn(async move { node.drain(within).await });
                let mut drained: Pin<Box<dyn Future<Output = _> + Send>> =
                    Box::pin(tokio::task::unconstrained(drained));
                // the drain ends by its own bound (a runtime that shut down cancels it at
                // once); the margin covers a node thread slow to run it
                let _ = block_on(
                    drained.as_mut(),
                    Some(Instant::now() + within + DRAIN_MARGIN),
                );
            }
        }
        self.node.shutdown();
        if let Some(stop) = self.stop.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = stop.send(());
        }
    }
}

impl Cluster {
    /// Starts member `id`'s node in this process, listening at its address in the cluster
    /// file, logging to stderr, and returns it as a [`Member`]: `enter`, `exit`, their
    /// timeouts and async forms behave as for an in-process quota; a call that waits on a
    /// member silent beyond the peer timeout returns [`QuotaError::PeerUnreachable`] naming
    /// it. The node runs on a thread of its own until the member is dropped. With views,
    /// dropping it is a graceful leave ([`NodeHandle::leave`]: it exits first if active,
    /// then a view without it installs), waiting at most twice `evict_after`; then the node
    /// stops. Without views, dropping it waits (at most twice the peer timeout and 100 ms) until its
    /// peers acknowledged what it sent, through a reset of the link if one comes, then stops
    /// the node: its peers then see it unreachable, and a member dropped while active stays
    /// active in their counts.
    ///
    /// ```no_run
    /// let cluster = lkcs::net::Cluster::load("examples/cluster3.toml".as_ref())?;
    /// let mut me = cluster.member(0)?;
    /// me.enter()?;
    /// // ... at least 1 and at most 2 of the three members are active ...
    /// me.exit()?;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn member(&self, id: usize) -> Result<Member, NetError> {
        self.member_with(id, None, super::stderr_logger())
    }

    /// [`Cluster::member`] listening at `bind` (when given) and logging to `log`. Without
    /// `bind`, a host name in the member's address is looked up now: one that does not
    /// resolve is [`NetError::Unresolved`].
    pub fn member_with(
        &self,
        id: usize,
        bind: Option<SocketAddr>,
        log: Logger,
    ) -> Result<Member, NetError> {
        let me = u32::try_from(id)
            .ok()
            .filter(|&i| (i as usize) < self.len())
            .map(ProcessId)
            .ok_or_else(|| {
                NetError::Config(format!(
                    "no member {id}: the cluster has members 0..{}",
                    self.len()
                ))
            })?;
        let addrs = match bind {
            Some(a) => vec![a],
            None => self.address(me).expect("id checked").resolve()?,
        };
        // one thread runs every task of the node (links, acceptor, the object): a
        // current-thread runtime, with no work-stealing scheduler to keep informed
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(|e| NetError::Io(format!("cannot start the node's runtime: {e}")))?;
        let node = {
            let _in = runtime.enter();
            let listener = std::net::TcpListener::bind(&addrs[..])
                .and_then(|l| l.set_nonblocking(true).map(|()| l))
                .and_then(tokio::net::TcpListener::from_std)
                .map_err(|e| {
                    let at = bind.map_or_else(
                        || self.address(me).expect("id checked").to_string(),
                        |a| a.to_string(),
                    );
                    NetError::Io(format!("{me} cannot listen on {at}: {e}"))
                })?;
            self.spawn(me, listener, None, log)?
        };
        let handle = runtime.handle().clone();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::Builder::new()
            .name(format!("lkcs-node-{id}"))
            .spawn(move || {
                runtime.block_on(async {
                    let _ = stopped.await;
                });
                runtime.shutdown_background();
            })
            .map_err(|e| NetError::Io(format!("cannot start the node's thread: {e}")))?;
        let engine = NetEngine {
            node,
            stop: Mutex::new(Some(stop)),
            polled: Mutex::new(None),
            leave_within: self.views().map(|v| 2 * v.evict_after),
            drain_within: 2 * self.timing().peer_timeout,
            runtime: handle,
        };
        Ok(Member::new(id, Box::new(engine)))
    }
}
