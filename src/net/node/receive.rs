//! What the links bring a node's core: the object's messages in their view, the run's
//! end news, reachability.

use super::*;

impl<A: CsObject> Core<A> {
    pub(super) fn on_net(&mut self, e: NetEvent<Wire<A::Msg>>) {
        match e {
            NetEvent::Message {
                from,
                msg: Wire::View(bytes),
            } => {
                let handled = match &self.views {
                    Some(v) => v.on_frame(from, &bytes, &self.net),
                    None => Err("a view frame, and this node runs no view log".into()),
                };
                match handled {
                    Err(reason) => self.log(LogEvent::Dropped { peer: from, reason }),
                    Ok(Some(_)) if !self.status.borrow().leased => {
                        // this process never held the slot: it is a new process of its
                        // member (restarted), which the view does not have yet; it rejoins
                        if let Some(v) = &self.views {
                            v.shared
                                .rejoin
                                .store(true, std::sync::atomic::Ordering::Release);
                        }
                    }
                    Ok(Some(view)) => {
                        let why = format!("{from} is in view {view}, which leaves this member out");
                        self.log(LogEvent::View(format!("fenced: {why}")));
                        self.evicted(view, why);
                        return;
                    }
                    Ok(None) => {}
                }
                // the first lease may have come with it
                self.resume_held();
            }
            NetEvent::Message { from, msg } => {
                if !self.peers.contains(&from) {
                    self.log(LogEvent::Dropped {
                        peer: from,
                        reason: "a message from a non-neighbour".into(),
                    });
                    return;
                }
                match msg {
                    Wire::Cs { .. } if self.views.is_some() => self.log(LogEvent::Dropped {
                        peer: from,
                        reason: "a message outside any view, and this node runs views".into(),
                    }),
                    Wire::Cs { clock, msg } => {
                        self.tokens.seen(clock);
                        self.tally_received(from, &msg);
                        self.handle(from, msg)
                    }
                    Wire::InView { view, clock, msg } => {
                        self.tokens.seen(clock);
                        self.in_view(from, view, msg)
                    }
                    Wire::Finished { view, ids } => self.on_end(from, view, End::Finished(ids)),
                    Wire::Bye { view } => {
                        // the peer waits for this acknowledgement before its process ends,
                        // whatever view the bye is of
                        self.net.gauges().acknowledge_now(from);
                        self.on_end(from, view, End::Bye)
                    }
                    Wire::View(_) => {} // handled above
                }
            }
            NetEvent::Unreachable(p) | NetEvent::Lost(p) => {
                if let Some(v) = &self.views {
                    // unreachable: silent for the peer timeout, so last heard that long ago
                    let now = tokio::time::Instant::now();
                    let since = match e {
                        NetEvent::Unreachable(_) => now.checked_sub(v.silence).unwrap_or(now),
                        _ => now,
                    };
                    v.shared.links.down(p, since);
                }
                // a link the view log alone uses fails no call
                if self.peers.contains(&p) {
                    self.unreachable.insert(p);
                    self.publish_status();
                    self.fail_blocked();
                }
            }
            NetEvent::Reachable(p) => {
                if let Some(v) = &self.views {
                    v.shared.links.up(p);
                }
                if self.unreachable.remove(&p) {
                    self.publish_status();
                }
            }
            NetEvent::Restarted {
                peer,
                previous,
                incarnation,
            } => {
                // the link talks to a new process of `peer`: until a view has it, neither its
                // object's messages nor its beats count
                if let Some(v) = &self.views {
                    v.shared.links.restarted(peer, previous, incarnation);
                    v.shared.links.up(peer);
                }
                // a view that has the new process already: what it sent it meanwhile goes
                self.release_held(peer);
            }
            NetEvent::Connected(p) => {
                if let Some(v) = &self.views {
                    v.shared.links.up(p);
                }
                if self.peers.contains(&p) {
                    self.unreachable.remove(&p);
                    self.connected.insert(p);
                    self.publish_status();
                }
                self.release_held(p);
            }
        }
    }

    /// What the member tells the operator ([`crate::net::MemberReport`]).
    pub(super) fn report(&self) -> crate::net::MemberReport {
        let status = self.status.borrow();
        let (state, pending) = *self.published.borrow();
        let state = state_word(status.fenced.is_some(), state, pending);
        let awaiting = match (&self.views, self.obj.pending()) {
            (_, None) => Vec::new(),
            (Some(v), Some(_)) => self
                .obj
                .awaiting()
                .into_iter()
                .map(|d| v.cluster(d))
                .collect(),
            (None, Some(_)) => self.obj.awaiting().into_iter().collect(),
        };
        crate::net::MemberReport {
            member: self.me.index(),
            view: status.view.as_ref().map(|v| v.number),
            members: status
                .view
                .as_ref()
                .map(|v| v.members.iter().map(|p| p.index()).collect())
                .unwrap_or_default(),
            state: state.into(),
            awaiting: awaiting.iter().map(|p| p.index()).collect(),
            unreachable: self.unreachable.iter().map(|p| p.index()).collect(),
            fenced: status.fenced.as_ref().map(|f| f.why.clone()),
        }
    }

    /// A message of the run's end from `from`, sent in view `view`: kept until that view
    /// installs when it is ahead; news older than a member's return to the view (its
    /// `renewed` view) is about the member's previous life, and ignored.
    pub(super) fn on_end(&mut self, from: ProcessId, view: u64, end: End) {
        let current = self.views.as_ref().map_or(0, |v| v.number);
        if view > current {
            if self.end_ahead.len() < MAX_AHEAD {
                self.end_ahead.push((from, view, end));
            }
            return;
        }
        let stale = |p: &ProcessId| self.renewed.get(p).is_some_and(|r| view < *r);
        match end {
            End::Finished(ids) => {
                let ids: Vec<ProcessId> = ids.into_iter().filter(|p| !stale(p)).collect();
                self.learn_finished(&ids);
            }
            End::Bye if stale(&from) => {}
            End::Bye => {
                self.byes.insert(from);
                self.publish_status();
            }
        }
    }

    pub(super) fn tally_received(&self, from: ProcessId, msg: &A::Msg) {
        if !self.byes.contains(&from) {
            self.count(|s| {
                s.links.entry(from).or_default().received.add(msg);
            });
        }
    }

    /// A message of view `view`'s object from `from` (a cluster id): handled in that view,
    /// kept until a later view installs, dropped when older or while frozen.
    pub(super) fn in_view(&mut self, from: ProcessId, view: u64, msg: A::Msg) {
        let Some(v) = &mut self.views else {
            self.log(LogEvent::Dropped {
                peer: from,
                reason: "a message of a view, and this node runs no view log".into(),
            });
            return;
        };
        if view > v.number {
            // kept until its view installs: the next one, or a later one for a process that
            // rejoins (it installs the first view that has it, skipping those before)
            if v.ahead.len() < MAX_AHEAD {
                v.ahead.push((from, view, msg));
            } else {
                let at = v.number;
                self.log(LogEvent::Dropped {
                    peer: from,
                    reason: format!("a message of view {view}, this member is at {at}"),
                });
            }
            return;
        }
        if view < v.number || v.frozen.is_some() {
            return; // of a view that ended (or is ending): its objects are gone
        }
        if !v.shared.links.current(from) {
            // a new process of `from`: the view has its old one, whose state it lost
            self.log(LogEvent::Dropped {
                peer: from,
                reason: format!("a message of view {view} from a process the view does not have"),
            });
            return;
        }
        match v.dense(from) {
            Some(d) => {
                self.tally_received(from, &msg);
                self.handle(d, msg)
            }
            None => self.log(LogEvent::Dropped {
                peer: from,
                reason: format!("a message of view {view}, which it is not in"),
            }),
        }
    }
}
