//! The view log's transport over a node's links ([`LinkTransport`]): each request a
//! [`Wire::View`] frame, its answer awaited under a number of its own.

use super::links::ViewLinks;
use super::{encode, ViewFrame};
use crate::id::ProcessId;
use crate::net::link::NetSender;
use crate::net::node::Wire;
use crate::net::view::{Unreachable, ViewConfig, ViewRpc, ViewRpcReply, ViewTransport};
use std::future::Future;
use std::sync::Arc;
use tokio::sync::oneshot;

/// The view log's transport over a node's links: a request goes out as a [`Wire::View`]
/// frame and its answer comes back on the same link. A member whose link is down is
/// unreachable at once (Raft backs off), and a request unanswered in time is unreachable too.
pub struct LinkTransport<M> {
    net: NetSender<Wire<M>>,
    links: Arc<ViewLinks>,
    config: ViewConfig,
}

impl<M> LinkTransport<M> {
    pub(super) fn new(net: NetSender<Wire<M>>, links: Arc<ViewLinks>, config: ViewConfig) -> Self {
        LinkTransport { net, links, config }
    }
}

impl<M: Send + 'static> ViewTransport for LinkTransport<M> {
    fn rpc(
        &self,
        to: ProcessId,
        req: ViewRpc,
    ) -> impl Future<Output = Result<ViewRpcReply, Unreachable>> + Send {
        // a forwarded write waits at the leader for its commit; Raft's own requests are
        // answered at once by a live member
        let wait = match req {
            ViewRpc::Write(_) => self.config.write_timeout,
            _ => self.config.election_min,
        };
        async move {
            let unreachable = |reason: String| Unreachable { member: to, reason };
            if self.links.is_down(to) {
                return Err(unreachable("its link is down".into()));
            }
            let (tx, rx) = oneshot::channel();
            let id = self.links.register(to, tx);
            // however this request ends (answered, timed out, or dropped by Raft), its entry
            // goes
            let _forget = Forget(&self.links, id);
            let resumed = self.links.resumed();
            let sent = encode(&ViewFrame::Request {
                id,
                rpc: req,
                resumed,
            })
            .and_then(|bytes| {
                self.net
                    .send(to, Wire::View(bytes))
                    .map_err(|e| e.to_string())
            });
            if let Err(e) = sent {
                return Err(unreachable(e));
            }
            match tokio::time::timeout(wait, rx).await {
                Ok(Ok(reply)) => Ok(reply),
                Ok(Err(_)) => Err(unreachable("the node stopped".into())),
                Err(_) => Err(unreachable(format!("no answer within {wait:?}"))),
            }
        }
    }
}

/// Forgets a request's entry when dropped.
struct Forget<'a>(&'a ViewLinks, u64);

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.0.forget(self.1);
    }
}
