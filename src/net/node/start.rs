//! Starting a node: [`Node::spawn`] and its variants, and the view task's hold on the core.

use super::*;

impl<A: CsObject> Node<A> {
    /// Starts the node task for `obj` over `net` (the object's id must be the net's), in a
    /// cluster of the node and its peers (a complete graph; see [`Node::spawn_in`]). Must run
    /// inside a tokio runtime.
    pub fn spawn(
        obj: A,
        net: Net<Wire<A::Msg>>,
        observer: Option<Observer>,
        log: Logger,
    ) -> Result<NodeHandle, crate::net::NetError> {
        let members = net.peers().count() + 1;
        Self::spawn_in(obj, net, members, observer, log)
    }

    /// [`Node::spawn`] in a cluster of `members` members (ids `0..members`), which the end
    /// of a run counts.
    pub fn spawn_in(
        obj: A,
        net: Net<Wire<A::Msg>>,
        members: usize,
        observer: Option<Observer>,
        log: Logger,
    ) -> Result<NodeHandle, crate::net::NetError> {
        let peers = net.peers().collect();
        Self::start(obj, net, members, peers, None, observer, log)
    }

    /// [`Node::spawn_in`] with the view log running beside the object
    /// (the module doc's "Views", docs/fault-tolerance.md): the cluster is the initial view's
    /// members, which must be `P0..Pn` (the object's system's numbering); `net` links this
    /// member to every one of them, the object talks to `views.neighbours` (a subset), and the
    /// view log's messages go to any member. At each view change the object is rebuilt with
    /// `rebuild` ([`rebuild_from`] builds it from the cluster's spec). Refused
    /// (`NetError::Config`) when the initial view is not `P0..Pn` or does not hold this
    /// member, when the net has no link to one of its members, or when a neighbour has no
    /// link.
    pub fn spawn_with_views(
        obj: A,
        net: Net<Wire<A::Msg>>,
        views: ViewOptions,
        rebuild: Rebuild<A>,
        observer: Option<Observer>,
        log: Logger,
    ) -> Result<NodeHandle, crate::net::NetError> {
        let id = obj.id();
        let links: BTreeSet<ProcessId> = net.peers().collect();
        let members = views.initial.members.len();
        if !views.initial.members.contains_key(&id) {
            return Err(crate::net::NetError::Config(format!(
                "{id} is not a member of the initial view"
            )));
        }
        if !views
            .initial
            .members
            .keys()
            .copied()
            .eq((0..members).map(ProcessId::from))
        {
            return Err(crate::net::NetError::Config(
                "the initial view's members must be P0..Pn, the object's numbering".into(),
            ));
        }
        views.check().map_err(crate::net::NetError::Config)?;
        let neighbours = views.neighbours.clone();
        let missing = |p: &ProcessId| *p != id && !links.contains(p);
        if let Some(p) = views.initial.members.keys().find(|p| missing(p)) {
            return Err(crate::net::NetError::Config(format!(
                "no link to {p}, a member of the initial view: the view log needs one to every member"
            )));
        }
        if let Some(p) = neighbours.iter().find(|p| missing(p)) {
            return Err(crate::net::NetError::Config(format!(
                "no link to the neighbour {p}"
            )));
        }
        Self::start(
            obj,
            net,
            members,
            neighbours,
            Some((views, rebuild)),
            observer,
            log,
        )
    }

    fn start(
        obj: A,
        net: Net<Wire<A::Msg>>,
        members: usize,
        peers: BTreeSet<ProcessId>,
        views: Option<(ViewOptions, Rebuild<A>)>,
        observer: Option<Observer>,
        log: Logger,
    ) -> Result<NodeHandle, crate::net::NetError> {
        let id = obj.id();
        if id != net.id() {
            return Err(crate::net::NetError::Config(format!(
                "the object is {id}, the net is {}",
                net.id()
            )));
        }
        let node_views = views
            .as_ref()
            .map(|(o, _)| NodeViews::new(id, o, net.timing().peer_timeout, net.incarnation()));
        // what the view task gets: the state it shares with the core, the links, the log
        let view_task_parts = node_views
            .as_ref()
            .map(|v| (v.shared.clone(), net.sender(), log.clone()));
        let metrics = net.recorder();
        let (published, state) = watch::channel((obj.state(), obj.pending()));
        // a member that starts in the CS holds its entry from the start
        let mut tokens = Tokens::default();
        let token = (obj.state() == CsState::InCs).then(|| tokens.entry(0, id.index()));
        let (status_tx, status) = watch::channel(NodeStatus {
            leased: views.is_none(),
            token,
            ..NodeStatus::default()
        });
        let core = Core {
            members,
            finished: BTreeSet::new(),
            byes: BTreeSet::new(),
            said_bye: BTreeSet::new(),
            bye_marks: BTreeMap::new(),
            connected: BTreeSet::new(),
            status: status_tx,
            me: id,
            peers,
            views: node_views,
            obj,
            net: net.sender(),
            observer,
            log,
            published,
            waiting: None,
            unclaimed: None,
            unreachable: BTreeSet::new(),
            start: std::time::Instant::now(),
            stopped: false,
            leaving: false,
            tokens,
            metrics: metrics.clone(),
            end_ahead: Vec::new(),
            renewed: BTreeMap::new(),
        };
        core.publish_status();
        let core = Arc::new(Shared {
            core: Mutex::new(core),
            task: std::sync::OnceLock::new(),
        });
        // the operator's status request (`lkcs status`), answered under the core's lock
        let reporting = Arc::downgrade(&core);
        net.serve_status(Arc::new(move || {
            reporting
                .upgrade()
                .and_then(|shared| postcard::to_allocvec(&shared.lock().report()).ok())
                .unwrap_or_default()
        }));
        let node = Node {
            core: core.clone(),
            net,
        };
        let views_task =
            views
                .zip(view_task_parts)
                .map(|((options, rebuild), (shared, net, log))| {
                    let handle = Box::new(CoreRef {
                        shared: Arc::downgrade(&core),
                        rebuild,
                    });
                    views::run(id, options, shared, net, log, handle)
                });
        // made before the task runs: a task dropped before its first poll stops the core too
        let stop = StopOnDrop(core.clone());
        let task = tokio::spawn(node.run(stop));
        let _ = core.task.set(task.abort_handle());
        if let Some(views_task) = views_task {
            tokio::spawn(views_task);
        }
        Ok(NodeHandle {
            id,
            core,
            metrics,
            state,
            status,
        })
    }

    /// The node task: hands the links' events to the core, until the links stop.
    async fn run(mut self, _stop: StopOnDrop<A>) {
        while let Some(e) = self.net.recv().await {
            self.core.run(|core| core.on_net(e));
            // what else arrived meanwhile, up to a bound
            for _ in 1..DRAIN_AT_MOST {
                let Some(e) = self.net.try_recv() else { break };
                self.core.run(|core| core.on_net(e));
            }
            if self.core.lock().stopped {
                return;
            }
        }
    }
}

/// The view task's hold on the core: it does not keep the node alive.
struct CoreRef<A: CsObject> {
    shared: std::sync::Weak<Shared<A>>,
    rebuild: Rebuild<A>,
}

impl<A: CsObject> ViewCore for CoreRef<A> {
    fn publish(&self, status: Option<ViewStatus>) -> bool {
        self.shared.upgrade().is_some_and(|shared| {
            shared.run(|core| {
                if let Some(status) = status {
                    core.status.send_modify(|s| s.view = Some(status));
                }
            })
        })
    }

    fn freeze(&self, next: u64) -> Option<(CsState, u64)> {
        let shared = self.shared.upgrade()?;
        let mut stable = None;
        shared.run(|core| stable = Some(core.freeze(next)));
        stable
    }

    fn install(&self, view: &crate::net::view::View, rejoined: bool) -> Result<(), String> {
        let rebuilt = (self.rebuild)(view)?;
        let shared = self.shared.upgrade().ok_or("the node stopped")?;
        match shared.run(|core| core.install(view.number, &view.members, rebuilt, rejoined)) {
            true => Ok(()),
            false => Err("the node stopped".into()),
        }
    }

    fn fence(&self, view: u64, why: String) {
        if let Some(shared) = self.shared.upgrade() {
            shared.run(|core| core.fence(view, why));
            shared.end_task();
        }
    }

    fn evicted(&self, view: u64, why: String) {
        if let Some(shared) = self.shared.upgrade() {
            shared.run(|core| core.evicted(view, why));
            if shared.lock().stopped {
                shared.end_task(); // it left
            }
        }
    }

    fn gated(&self) -> Option<views::Restore> {
        self.shared.upgrade().and_then(|shared| {
            let core = shared.lock();
            let v = core.views.as_ref()?;
            let exit_waits = matches!(core.waiting, Some((Sequence::Exit, _)));
            if exit_waits && v.exit_gate == ExitGate::UntilRestored {
                Some(views::Restore::Deficit)
            } else if v.exited_gated && v.entry_gate == EntryGate::UntilRestored {
                Some(views::Restore::Surplus)
            } else {
                None
            }
        })
    }
}
