//! A node: one member's CS object driven by its [`Net`], and the application's
//! [`NodeHandle`].
//!
//! The node task owns the object and handles one input at a time, atomically: a call from the
//! handle (`begin_entry` / `begin_exit`) or a message from a link (`on_message`). The object's
//! sends go to the links (a send to itself is handled next, in order, without the network; a
//! send to a member that is not a peer is dropped and logged), and its completion answers the
//! waiting call. The [`Observer`] sees every change of the published state inside the handler
//! that made it, before any message that handler sends leaves the node: a monitor counting
//! members in the CS from it never undercounts.
//!
//! A call waiting on a peer that becomes unreachable (or whose link is lost) returns
//! [`NodeError::PeerUnreachable`] naming it; the peers waited on are the object's
//! [`awaiting`](crate::CsObject::awaiting) set, or every unreachable peer when the algorithm
//! does not say. The move keeps running: the next call of the same kind waits for it again,
//! and returns at once once it completed.

use super::link::{Net, NetEvent};
use super::{LogEvent, Logger};
use crate::cs::{CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;
use std::collections::{BTreeSet, VecDeque};
use std::fmt;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;

/// Sees every change of a member's published state, inside the handler that made it.
pub type Observer = Arc<dyn Fn(ProcessId, CsState) + Send + Sync>;

/// Why a node call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeError {
    /// The calling convention was broken (entry while in the CS, ...).
    Call(CallError),
    /// The call waits on this peer, and it is silent beyond the peer timeout (or its link is
    /// lost). The move keeps running; the next call of the same kind waits for it again.
    PeerUnreachable(ProcessId),
    /// The node stopped.
    Stopped,
}

impl fmt::Display for NodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NodeError::Call(e) => write!(f, "{e}"),
            NodeError::PeerUnreachable(p) => write!(
                f,
                "{p} is unreachable; the move keeps running and the next call resolves it"
            ),
            NodeError::Stopped => f.write_str("the node stopped"),
        }
    }
}

impl std::error::Error for NodeError {}

type Reply = oneshot::Sender<Result<(), NodeError>>;

enum Command {
    Move(Sequence, Reply),
}

/// The application's side of a node: enter and exit the CS. Clones share the node.
#[derive(Clone, Debug)]
pub struct NodeHandle {
    id: ProcessId,
    commands: mpsc::UnboundedSender<Command>,
    state: watch::Receiver<CsState>,
    task: Arc<JoinHandle<()>>,
}

impl NodeHandle {
    /// The member's id.
    pub fn id(&self) -> ProcessId {
        self.id
    }

    /// The published state.
    pub fn state(&self) -> CsState {
        *self.state.borrow()
    }

    /// Enters the CS: returns once in, or with why not.
    pub async fn enter(&self) -> Result<(), NodeError> {
        self.call(Sequence::Entry).await
    }

    /// Exits the CS: returns once out, or with why not.
    pub async fn exit(&self) -> Result<(), NodeError> {
        self.call(Sequence::Exit).await
    }

    async fn call(&self, seq: Sequence) -> Result<(), NodeError> {
        let (tx, rx) = oneshot::channel();
        self.commands
            .send(Command::Move(seq, tx))
            .map_err(|_| NodeError::Stopped)?;
        rx.await.unwrap_or(Err(NodeError::Stopped))
    }

    /// Stops the node (and, with it, its links): every waiting and later call returns
    /// [`NodeError::Stopped`].
    pub fn shutdown(&self) {
        self.task.abort();
    }
}

/// One member's CS object and its links.
pub struct Node<A: CsObject> {
    obj: A,
    net: Net<A::Msg>,
    peers: BTreeSet<ProcessId>,
    observer: Option<Observer>,
    log: Logger,
    published: watch::Sender<CsState>,
    waiting: Option<(Sequence, Reply)>,
    /// A move that completed after its call returned `PeerUnreachable`: the next call of
    /// its kind returns at once.
    unclaimed: Option<Sequence>,
    unreachable: BTreeSet<ProcessId>,
    start: std::time::Instant,
}

impl<A: CsObject> fmt::Debug for Node<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Node")
            .field("obj", &self.obj)
            .field("peers", &self.peers)
            .field("unreachable", &self.unreachable)
            .finish_non_exhaustive()
    }
}

impl<A: CsObject> Node<A> {
    /// Starts the node task for `obj` over `net` (the object's id must be the net's). Must run
    /// inside a tokio runtime.
    pub fn spawn(
        obj: A,
        net: Net<A::Msg>,
        observer: Option<Observer>,
        log: Logger,
    ) -> Result<NodeHandle, super::NetError> {
        let id = obj.id();
        if id != net.id() {
            return Err(super::NetError::Config(format!(
                "the object is {id}, the net is {}",
                net.id()
            )));
        }
        let (published, state) = watch::channel(obj.state());
        let (commands, rx) = mpsc::unbounded_channel();
        let node = Node {
            peers: net.peers().collect(),
            obj,
            net,
            observer,
            log,
            published,
            waiting: None,
            unclaimed: None,
            unreachable: BTreeSet::new(),
            start: std::time::Instant::now(),
        };
        let task = tokio::spawn(node.run(rx));
        Ok(NodeHandle {
            id,
            commands,
            state,
            task: Arc::new(task),
        })
    }

    fn log(&self, event: LogEvent) {
        (self.log)(self.obj.id(), &event);
    }

    async fn run(mut self, mut commands: mpsc::UnboundedReceiver<Command>) {
        loop {
            tokio::select! {
                c = commands.recv() => match c {
                    None => return,
                    Some(Command::Move(seq, reply)) => self.call(seq, reply),
                },
                e = self.net.recv() => match e {
                    None => return,
                    Some(NetEvent::Message { from, msg }) => {
                        if self.peers.contains(&from) {
                            self.handle(from, msg);
                        } else {
                            self.log(LogEvent::Dropped { peer: from, reason: "a message from a non-neighbour".into() });
                        }
                    }
                    Some(NetEvent::Unreachable(p) | NetEvent::Lost(p)) => {
                        self.unreachable.insert(p);
                        self.fail_blocked();
                    }
                    Some(NetEvent::Reachable(p)) => {
                        self.unreachable.remove(&p);
                    }
                },
            }
        }
    }

    fn now(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX)
    }

    fn call(&mut self, seq: Sequence, reply: Reply) {
        if self.unclaimed.take() == Some(seq) {
            let _ = reply.send(Ok(()));
            return;
        }
        if self.obj.pending() == Some(seq) {
            // the move of an earlier call that returned PeerUnreachable: wait for it again
            if let Some((_, older)) = self.waiting.take() {
                let _ = older.send(Err(NodeError::Call(CallError::Busy)));
            }
            self.waiting = Some((seq, reply));
            self.fail_blocked();
            return;
        }
        let mut out = Outbox::new();
        self.obj.set_time(self.now());
        if let Err(e) = self.obj.begin(seq, &mut out) {
            let _ = reply.send(Err(NodeError::Call(e)));
            return;
        }
        self.waiting = Some((seq, reply));
        self.after(out);
        self.fail_blocked();
    }

    fn handle(&mut self, from: ProcessId, msg: A::Msg) {
        let mut out = Outbox::new();
        self.obj.set_time(self.now());
        self.obj.on_message(from, msg, &mut out);
        self.after(out);
    }

    /// After a handler: publish a state change (before any send), answer a completed call,
    /// then send, handling messages to itself in order.
    fn after(&mut self, mut out: Outbox<A::Msg>) {
        let me = self.obj.id();
        let mut local = VecDeque::new();
        loop {
            let state = self.obj.state();
            if state != *self.published.borrow() {
                if let Some(o) = &self.observer {
                    o(me, state);
                }
                self.published.send_replace(state);
            }
            if out.take_completed() {
                match self.waiting.take() {
                    Some((_, reply)) => {
                        let _ = reply.send(Ok(()));
                    }
                    None => {
                        self.unclaimed = Some(match state {
                            CsState::InCs => Sequence::Entry,
                            CsState::OutCs => Sequence::Exit,
                        })
                    }
                }
            }
            for (to, msg) in out.drain() {
                if to == me {
                    local.push_back(msg);
                } else if let Err(e) = self.net.send(to, msg) {
                    self.log(LogEvent::Dropped {
                        peer: to,
                        reason: format!("a send the object made: {e}"),
                    });
                }
            }
            let Some(msg) = local.pop_front() else { break };
            self.obj.set_time(self.now());
            self.obj.on_message(me, msg, &mut out);
        }
    }

    /// Answers a waiting call with `PeerUnreachable` when a peer it waits on is unreachable.
    fn fail_blocked(&mut self) {
        if self.waiting.is_none() || self.unreachable.is_empty() {
            return;
        }
        let awaiting = self.obj.awaiting();
        let blocker = if awaiting.is_empty() {
            self.unreachable.iter().next().copied()
        } else {
            awaiting.into_iter().find(|p| self.unreachable.contains(p))
        };
        if let Some(p) = blocker {
            if let Some((_, reply)) = self.waiting.take() {
                let _ = reply.send(Err(NodeError::PeerUnreachable(p)));
            }
        }
    }
}
