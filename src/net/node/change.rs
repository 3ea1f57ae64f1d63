//! A node's core across a view change: freeze, install, fence, eviction and leaving.

use super::*;

impl<A: CsObject> Core<A> {
    /// Freezes the object for the change to view `next`: no message of the current view is
    /// handled and no move starts from now on. Returns the stable state to report.
    pub(super) fn freeze(&mut self, next: u64) -> (CsState, u64) {
        if self.status.borrow().fenced.is_some() {
            // it gave its slot up when it fenced: out, and its object stays stopped
            return (CsState::OutCs, self.tokens.clock);
        }
        if let Some(v) = &mut self.views {
            v.frozen = Some(next);
        }
        (self.obj.state(), self.tokens.clock)
    }

    /// Restarts in view `number` with its object: publishes its state, handles the messages
    /// of the view that came early, and starts the waiting call's move again.
    pub(super) fn install(
        &mut self,
        number: u64,
        processes: &BTreeMap<ProcessId, u64>,
        rebuilt: Rebuilt<A>,
        rejoined: bool,
    ) {
        let Some(v) = &mut self.views else { return };
        v.number = number;
        let removed = v
            .members
            .iter()
            .filter(|p| !processes.contains_key(p))
            .count();
        self.metrics.view_installed(removed);
        // a member back in the view (a new process, or the one evicted) has its pairs to
        // make again
        let renewed: Vec<ProcessId> = processes
            .iter()
            .filter(|(p, i)| v.processes.get(p) != Some(*i))
            .map(|(p, _)| *p)
            .collect();
        if rejoined {
            // a new lease, from the beats of this view; and its own pairs to make again, as
            // the others see it (its workload starts them again); whatever end of the run
            // it heard while out of the view is reopened
            views::lock(&v.shared.lease).reset();
            self.finished.remove(&self.me);
            self.byes.clear();
            self.said_bye.clear();
            self.bye_marks.clear();
            for p in processes.keys() {
                self.renewed.insert(*p, number);
            }
        }
        for p in &renewed {
            // back in the view: it has its pairs to make, and says bye again at the end
            self.finished.remove(p);
            self.byes.remove(p);
            self.said_bye.remove(p);
            self.bye_marks.remove(p);
            self.renewed.insert(*p, number);
        }
        let now = tokio::time::Instant::now();
        for p in renewed.iter().filter(|p| **p != self.me) {
            // a member back in the view: its link's silence, and an unreachable mark, were
            // its previous process's (or its own before the view had it again); the view
            // evicts it again if it stays silent for `evict_after` from now
            v.shared.links.restart_silence(*p, now);
            self.unreachable.remove(p);
        }
        // what this node sends a member whose link has not met the view's process of it
        // waits until it has: kept for the same process across views, dropped when the
        // view has another (the messages were for a process it no longer has)
        let gauges = self.net.gauges();
        let mut before = std::mem::take(&mut v.held);
        for (&p, &incarnation) in processes.iter().filter(|(p, _)| **p != self.me) {
            match before.remove(&p) {
                Some(h) if h.incarnation == incarnation => {
                    v.held.insert(p, h);
                }
                _ if !views::link_meets(
                    gauges.incarnation(p),
                    incarnation,
                    v.shared.links.saw_restart(p),
                ) =>
                {
                    v.held.insert(
                        p,
                        views::Held {
                            incarnation,
                            queue: Vec::new(),
                        },
                    );
                }
                _ => {}
            }
        }
        let dropped: usize = before.values().map(|h| h.queue.len()).sum();
        v.processes = processes.clone();
        views::lock(&v.shared.lease).installed(&rebuilt.members);
        v.members = rebuilt.members;
        v.frozen = None;
        v.exit_gate = match (rebuilt.deficit, rebuilt.restorable) {
            (false, _) => ExitGate::Open,
            (true, true) => ExitGate::UntilRestored,
            (true, false) => ExitGate::UntilRejoin,
        };
        v.entry_gate = match rebuilt.gates_entries {
            false => EntryGate::Open,
            true => EntryGate::UntilRestored,
        };
        let ahead = std::mem::take(&mut v.ahead);
        let early = ahead.len();
        self.obj = rebuilt.obj;
        let algorithm = match rebuilt.leader_rules_refused {
            Some(why) => {
                format!("; the leader rules refuse its start ({why}): the round trip runs")
            }
            None => String::new(),
        };
        if dropped > 0 {
            self.log(LogEvent::View(format!(
                "view {number}: {dropped} messages kept for processes the view no longer has \
                 dropped"
            )));
        }
        if rejoined {
            // back in a view after an eviction: its calls work again
            self.status.send_modify(|s| s.fenced = None);
            // this process joins the view: the observer hears its state (out) from it, not
            // from the process it replaces
            if let Some(o) = &self.observer {
                o(self.me, self.obj.state(), None);
            }
        } else if self.obj.state() == CsState::InCs && self.published.borrow().0 == CsState::InCs {
            // it holds its slot across the change: a token of the new view
            let token = self.tokens.reissue(number, self.me.index());
            self.status.send_modify(|s| s.token = Some(token));
        }
        // a move that completed unclaimed is in the reported state, which the object starts in
        self.after(Outbox::new());
        if let Some(v) = &mut self.views {
            // cleared after that publication: a process that joins out while it showed in
            // (its first state from the cluster file) made no exit in this view
            v.exited_gated = false;
        }
        self.learn_finished(&[]);
        self.publish_status();
        // the run's end news of this view that came early
        let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.end_ahead)
            .into_iter()
            .partition(|(_, view, _)| *view <= number);
        self.end_ahead = later;
        for (from, view, end) in now {
            self.on_end(from, view, end);
        }
        for (from, view, msg) in ahead {
            if view >= number {
                self.in_view(from, view, msg);
            }
        }
        let waiting = match self.waiting.as_ref().map(|(seq, _)| *seq) {
            Some(Sequence::Entry) => "an entry",
            Some(Sequence::Exit) => "an exit",
            None => "none",
        };
        self.log(LogEvent::View(format!(
            "view {number}: the object restarts {}{}{}{algorithm}; the call waiting: \
             {waiting}{}",
            match self.obj.state() {
                CsState::InCs => "in the CS",
                CsState::OutCs => "out of the CS",
            },
            match self.views.as_ref().map_or(ExitGate::Open, |v| v.exit_gate) {
                ExitGate::UntilRestored => " in a deficit view (exits wait)",
                ExitGate::UntilRejoin => {
                    " in a deficit view (exits wait); a bound here has no room for the \
                     algorithm until a member the view lost is back"
                }
                ExitGate::Open => "",
            },
            match self
                .views
                .as_ref()
                .map_or(EntryGate::Open, |v| v.entry_gate)
            {
                EntryGate::UntilRestored => " in a surplus view (entries wait)",
                EntryGate::Open => "",
            },
            match early {
                0 => String::new(),
                n => format!("; {n} messages of the view came early"),
            }
        )));
        if let Some((seq, reply)) = self.waiting.take() {
            if rejoined && seq == Sequence::Exit && self.obj.state() == CsState::OutCs {
                // a new process whose first state (from the cluster file) was in: it joins
                // out, which is what its exit asked for
                let _ = reply.send(Ok(()));
            } else {
                self.call(seq, reply);
            }
        }
    }

    pub(super) fn lease_expired(&self) -> bool {
        self.views
            .as_ref()
            .is_some_and(|v| views::lock(&v.shared.lease).expired(tokio::time::Instant::now()))
    }

    /// This member cannot run view `view` (its object cannot be built for it): it gives up
    /// its slot ([`Core::give_up`]) and the node stops.
    pub(super) fn fence(&mut self, view: u64, why: String) {
        if self.stopped {
            return;
        }
        self.give_up(view, why);
        self.stop();
    }

    /// Out of view `view`, or its lease ran out: it gives up its slot ([`Core::give_up`]),
    /// its calls return [`NodeError::Evicted`] from now on, the object handles nothing
    /// more, and the view task makes the process rejoin; once a view has it again, it starts
    /// there out of the CS and its calls work again.
    pub(super) fn evicted(&mut self, view: u64, why: String) {
        if self.leaving {
            // out of the view (or of its lease) while leaving: it has left
            self.left();
            return;
        }
        if self.stopped || self.status.borrow().fenced.is_some() {
            return;
        }
        self.give_up(view, why);
        self.unclaimed = None;
        if let Some(v) = &mut self.views {
            v.frozen = Some(u64::MAX);
            // the lease that ran out is not this process's any more: it waits for a new one
            views::lock(&v.shared.lease).reset();
            v.shared
                .rejoin
                .store(true, std::sync::atomic::Ordering::Release);
        }
    }

    /// Starts leaving (see [`NodeHandle::leave`]), unless the member is in the CS or a move
    /// is under way: then it must exit first.
    pub(super) fn leave(&mut self) -> Leaving {
        let Some(v) = &self.views else {
            return Leaving::NoViews;
        };
        let fenced = self.status.borrow().fenced.is_some();
        if !fenced && (self.obj.state() == CsState::InCs || self.obj.pending().is_some()) {
            return Leaving::Busy;
        }
        self.leaving = true;
        v.shared
            .leave
            .store(true, std::sync::atomic::Ordering::Release);
        if let Some((_, reply)) = self.waiting.take() {
            let _ = reply.send(Err(NodeError::Stopped));
        }
        Leaving::Started
    }

    /// The member left: a view without it installed (or it lost its place while leaving).
    pub(super) fn left(&mut self) {
        if self.stopped {
            return;
        }
        self.log(LogEvent::View("left the cluster".into()));
        self.status.send_modify(|s| s.left = true);
        self.stop();
    }

    /// The slot is given up: the status says why ([`NodeStatus::fenced`]), the observer
    /// sees the member leave the CS (if it showed it in), the handle shows it out, and the
    /// waiting call gets [`NodeError::Evicted`].
    pub(super) fn give_up(&mut self, view: u64, why: String) {
        if let Some(v) = &mut self.views {
            // no exit to gate: the calls fail until a view has the member again
            v.exit_gate = ExitGate::Open;
            v.entry_gate = EntryGate::Open;
        }
        self.status.send_modify(|s| {
            s.fenced = Some(Fenced { view, why });
            s.token = None;
            s.exit_gate = ExitGate::Open;
            s.entry_gate = EntryGate::Open;
        });
        self.metrics.fenced();
        if self.published.borrow().0 == CsState::InCs
            && let Some(o) = &self.observer
        {
            o(self.me, CsState::OutCs, None);
        }
        self.published.send_replace((CsState::OutCs, None));
        if let Some((_, reply)) = self.waiting.take() {
            let _ = reply.send(Err(NodeError::Evicted { view }));
        }
    }
}
