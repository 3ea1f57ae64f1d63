//! The application's side of a node: [`NodeHandle`]'s calls, each counted in the metrics.

use super::*;

/// Counts one call when it ends: with its outcome, or as cancelled when its future is
/// dropped first (a timeout).
struct CallRecord<'a> {
    metrics: &'a Recorder,
    kind: &'static str,
    started: std::time::Instant,
    outcome: CallOutcome,
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        self.metrics
            .call(self.kind, self.outcome, self.started.elapsed());
    }
}

impl fmt::Debug for NodeHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NodeHandle")
            .field("id", &self.id)
            .field("state", &*self.state.borrow())
            .finish_non_exhaustive()
    }
}

impl NodeHandle {
    /// The member's id.
    pub fn id(&self) -> ProcessId {
        self.id
    }

    /// The published state.
    pub fn state(&self) -> CsState {
        self.state.borrow().0
    }

    /// The move in progress, if any (a call that returned `PeerUnreachable`, timed out or
    /// was dropped leaves it running).
    pub fn pending(&self) -> Option<Sequence> {
        self.state.borrow().1
    }

    /// The fencing token of the entry the member holds: `Some` while it is in the CS, was
    /// granted a lease (with views), is not fenced and its node runs. A lease that ran out
    /// fences the member at the view task's next look (every 20 ms): until then the token is
    /// still given. With views, a member that stays in across a view change gets a new token in
    /// the new view: read it before each use of the protected resource (see
    /// [`FencingToken`]).
    pub fn token(&self) -> Option<FencingToken> {
        if self.status.has_changed().is_err() {
            return None; // the node stopped
        }
        let (fenced, leased, token) = {
            let s = self.status.borrow();
            (s.fenced.is_some(), s.leased, s.token)
        };
        match (fenced, leased, self.state()) {
            (false, true, CsState::InCs) => token,
            _ => None,
        }
    }

    /// What the node tells besides the calls' answers (unreachable peers, messages sent, how
    /// far the run's end has come).
    pub fn status(&self) -> NodeStatus {
        self.status.borrow().clone()
    }

    /// Waits until the status satisfies `f` (or the node stopped: `Err`).
    pub async fn wait_status(
        &self,
        f: impl FnMut(&NodeStatus) -> bool,
    ) -> Result<NodeStatus, NodeError> {
        let mut rx = self.status.clone();
        match rx.wait_for(f).await {
            Ok(s) => Ok(s.clone()),
            Err(_) => Err(NodeError::Stopped),
        }
    }

    /// Leaves the cluster for good, gracefully: exits the CS first if the member is in it
    /// (waiting as an exit waits), then asks the view log to remove it
    /// ([`Proposal::Leave`](crate::net::view::Proposal::Leave)) and returns once a view without
    /// it installed ([`NodeStatus::left`]); the node then stops. Later calls return
    /// [`NodeError::Stopped`]. Without views, the node just stops. The members install the
    /// view without it at once: it is out of the CS and promised not to come back, so no
    /// lease needs to run out. Bound it with a timeout: without a majority no view
    /// installs, and after [`NodeHandle::shutdown`] the others evict it instead.
    pub async fn leave(&self) -> Result<(), NodeError> {
        loop {
            let fenced = self.status.borrow().fenced.is_some();
            if !fenced && (self.state() == CsState::InCs || self.pending().is_some()) {
                self.reach(CsState::OutCs).await?;
            }
            // out (another handle's call may have moved it since: then out again first)
            match self.core.leave() {
                Leaving::Busy => continue,
                Leaving::NoViews => return Ok(()), // stopped
                Leaving::Started => break,
            }
        }
        match self.wait_status(|s| s.left).await {
            Ok(_) => Ok(()),
            Err(_) if self.status.borrow().left => Ok(()),
            Err(e) => Err(e),
        }
    }

    /// Says this member made its own moves: once every member of the cluster has, the run
    /// ends together (see the module doc).
    pub fn finish(&self) -> Result<(), NodeError> {
        match self.core.finish() {
            true => Ok(()),
            false => Err(NodeError::Stopped),
        }
    }

    /// Enters the CS: returns once in, or with why not.
    pub async fn enter(&self) -> Result<(), NodeError> {
        self.counted("enter", self.call(Sequence::Entry)).await
    }

    /// Exits the CS: returns once out, or with why not.
    pub async fn exit(&self) -> Result<(), NodeError> {
        self.counted("exit", self.call(Sequence::Exit)).await
    }

    /// Brings the member to `target`, as [`Member`](crate::Member) calls do: at once if it is
    /// there with nothing pending; a pending move away from `target` completes first, then
    /// the member comes back; a pending move to `target` is waited for.
    pub async fn reach(&self, target: CsState) -> Result<(), NodeError> {
        let kind = match target {
            CsState::InCs => "enter",
            CsState::OutCs => "exit",
        };
        self.counted(kind, self.reach_uncounted(target)).await
    }

    /// Runs the call `fut` of `kind`, counted in the metrics with its outcome and waiting
    /// time (as cancelled when dropped first).
    async fn counted(
        &self,
        kind: &'static str,
        fut: impl std::future::Future<Output = Result<(), NodeError>>,
    ) -> Result<(), NodeError> {
        let mut record = CallRecord {
            metrics: &self.metrics,
            kind,
            started: std::time::Instant::now(),
            outcome: CallOutcome::Cancelled,
        };
        let r = fut.await;
        record.outcome = match &r {
            Ok(()) => CallOutcome::Ok,
            Err(NodeError::PeerUnreachable(_)) => CallOutcome::Unreachable,
            Err(NodeError::Evicted { .. }) => CallOutcome::Evicted,
            Err(NodeError::Stopped) => CallOutcome::Stopped,
            Err(NodeError::Call(_)) => CallOutcome::Refused,
        };
        r
    }

    /// The node's numbers now: calls by outcome, waiting times, messages and link events per
    /// peer, views and fences, the member's state (docs/operations.md lists them).
    pub fn metrics(&self) -> NodeMetrics {
        // one borrow of the status, released before the state's (a second read borrow
        // while the core waits to write could deadlock)
        let state = self.state_name();
        let status = self.status.borrow().clone();
        self.metrics.snapshot(self.id, &status, state)
    }

    /// The member's state in one word: `active`, `inactive`, `entering`, `exiting`, or
    /// `evicted` while it is fenced.
    pub fn state_name(&self) -> &'static str {
        let fenced = self.status.borrow().fenced.is_some();
        let (state, pending) = *self.state.borrow();
        state_word(fenced, state, pending)
    }

    async fn reach_uncounted(&self, target: CsState) -> Result<(), NodeError> {
        // evicted: no call, an exit included, answers as if the member still had a place
        if let Some(e) = self.why_stopped() {
            return Err(e);
        }
        // no slot is acted on before the first lease (a member that starts in the CS too)
        if !self.status.borrow().leased
            && let Err(e) = self.wait_status(|s| s.leased).await
        {
            return Err(self.why_stopped().unwrap_or(e));
        }
        if self.state() == target {
            if self.pending().is_none() {
                return Ok(());
            }
            self.call(Sequence::leaving(target)).await?;
        }
        self.call(Sequence::leaving(target).flip()).await
    }

    /// [`NodeError::Evicted`] once the member fenced.
    fn why_stopped(&self) -> Option<NodeError> {
        let view = self.status.borrow().fenced.as_ref()?.view;
        Some(NodeError::Evicted { view })
    }

    async fn call(&self, seq: Sequence) -> Result<(), NodeError> {
        let (tx, rx) = oneshot::channel();
        // runs the object's handler here, under the node's lock
        self.core.call(seq, tx);
        rx.await.unwrap_or(Err(NodeError::Stopped))
    }

    /// Waits, at most `within`, until every peer acknowledged what this node sent it up to
    /// its bye (before the byes: everything so far; after them, nothing from a member it
    /// says no bye to, which shares only the view log with it), or cannot (it is unreachable, it
    /// restarted, its link was lost or stopped), after acknowledging at once what the peers
    /// sent. A process that ends right after its run calls this first: its links keep the
    /// unacknowledged messages, and resend them after a reset, only while it lives. Returns
    /// the peers left unsettled.
    pub async fn drain(&self, within: std::time::Duration) -> Vec<ProcessId> {
        let (gauges, marks) = self.core.drain_marks();
        gauges.drain(&marks, within).await
    }

    /// Stops the node (and, with it, its links): every waiting and later call returns
    /// [`NodeError::Stopped`].
    pub fn shutdown(&self) {
        self.core.stop();
    }
}
