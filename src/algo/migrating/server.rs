//! One MUTEX server at work: its constructor and accessors, the controller's helpers
//! (grant, migrate, forward, the exit-cs handler, the check on unexpected messages) and the
//! [`CsObject`] implementation that handles the client's calls and every message.

use super::{Migrating, MigratingMsg, MigratingRules, MigrationInfo, RequestsInfo};
use crate::cs::{check_call, CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;

impl<R: RequestsInfo, G: MigrationInfo> Migrating<R, G> {
    /// Node `id` of the system whose initial configuration is `initial` (its length is n; at
    /// most one InCS, unchecked here), P0 the initial controller.
    pub fn new(id: ProcessId, initial: &[CsState], migration: G, rules: MigratingRules) -> Self {
        let busy = initial.contains(&CsState::InCs);
        let controller = ProcessId(0);
        let mut migration = migration;
        migration.start(0);
        Migrating {
            id,
            n: initial.len(),
            state: initial.get(id.index()).copied().unwrap_or(CsState::OutCs),
            pending: None,
            controller,
            epoch: 0,
            active: id == controller,
            seq: 0,
            requests: R::initial(busy && id == controller),
            migration,
            now: 0,
            rules,
            holder: match id == controller {
                true => initial
                    .iter()
                    .position(|s| *s == CsState::InCs)
                    .map(ProcessId::from),
                false => None,
            },
        }
    }

    /// Whether this server's controller role is active.
    pub fn is_controller(&self) -> bool {
        self.active
    }

    /// The controller as known here.
    pub fn current_controller(&self) -> ProcessId {
        self.controller
    }

    /// The number of migrations known here.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// The requests info held here.
    pub fn requests(&self) -> &R {
        &self.requests
    }

    fn learn_controller(&mut self, controller: ProcessId, epoch: u64) {
        if self.rules.unstamped_controller || epoch > self.epoch {
            self.controller = controller;
            self.epoch = self.epoch.max(epoch);
        }
    }

    fn grant(&mut self, j: ProcessId, out: &mut Outbox<MigratingMsg<R::Transfer>>) {
        if self.active {
            self.holder = Some(j);
        }
        out.send(j, MigratingMsg::Granted { epoch: self.epoch });
    }

    fn on_exit_cs(&mut self, next: Option<ProcessId>, out: &mut Outbox<MigratingMsg<R::Transfer>>) {
        let target = if self.migration.test_migration_condition(self.now) {
            let hint = self.requests.next_hint(next);
            self.migration.select_next_controller(self.id, hint)
        } else {
            None
        };
        match target {
            Some(k) if !self.rules.migrate_and_grant => {
                let info = self.requests.update_controller_info(next);
                self.migrate(k, info, out);
            }
            Some(k) => {
                // printed: become-controller carries nothing, and the old controller grants
                self.migrate(k, R::empty_transfer(), out);
                if let Some(j) = self.requests.select_request(next) {
                    self.grant(j, out);
                }
            }
            None => {
                if let Some(j) = self.requests.select_request(next) {
                    self.grant(j, out);
                }
            }
        }
    }

    fn migrate(
        &mut self,
        k: ProcessId,
        info: R::Transfer,
        out: &mut Outbox<MigratingMsg<R::Transfer>>,
    ) {
        let epoch = self.epoch.saturating_add(1);
        for q in (0..self.n).map(ProcessId::from) {
            if q != k && q != self.id {
                out.send(
                    q,
                    MigratingMsg::NewController {
                        controller: k,
                        epoch,
                    },
                );
            }
        }
        out.send(k, MigratingMsg::BecomeController { epoch, info });
        self.active = false;
        self.holder = None;
        self.epoch = epoch;
        self.controller = if self.rules.literal_controller_one {
            ProcessId(0)
        } else {
            k
        };
    }

    fn forward(&self, msg: MigratingMsg<R::Transfer>, out: &mut Outbox<MigratingMsg<R::Transfer>>) {
        out.send(self.controller, msg);
    }

    /// Whether a correct server could have sent `msg`: the sender and every server it names
    /// are in `0..n`, and a become-controller's information is consistent
    /// ([`RequestsInfo::accepts`]). See "Unexpected messages".
    fn acceptable(&self, from: ProcessId, msg: &MigratingMsg<R::Transfer>) -> bool {
        let inside = |p: &ProcessId| p.index() < self.n;
        inside(&from)
            && match msg {
                MigratingMsg::Request { requester, .. } => inside(requester),
                MigratingMsg::ExitCs { next } => next.iter().all(inside),
                MigratingMsg::BecomeController { info, .. } => R::accepts(info, self.n),
                MigratingMsg::NewController { controller, .. } => inside(controller),
                MigratingMsg::NextRequestor { next, .. } | MigratingMsg::Orphan { next } => {
                    inside(next)
                }
                MigratingMsg::Granted { .. } | MigratingMsg::WakeUp => true,
            }
    }
}

impl<R: RequestsInfo, G: MigrationInfo> CsObject for Migrating<R, G> {
    type Msg = MigratingMsg<R::Transfer>;

    fn id(&self) -> ProcessId {
        self.id
    }

    fn state(&self) -> CsState {
        self.state
    }

    fn pending(&self) -> Option<Sequence> {
        self.pending
    }

    fn begin_entry(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        check_call(self.state, self.pending, Sequence::Entry)?;
        self.pending = Some(Sequence::Entry);
        self.seq += 1;
        self.requests.register_request(self.seq);
        out.send(
            self.controller,
            MigratingMsg::Request {
                requester: self.id,
                seq: self.seq,
                forwarded: false,
            },
        );
        Ok(())
    }

    fn begin_exit(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        check_call(self.state, self.pending, Sequence::Exit)?;
        self.state = CsState::OutCs;
        let next = self.requests.exit_info();
        out.send(self.controller, MigratingMsg::ExitCs { next });
        out.complete();
        Ok(())
    }

    fn on_message(&mut self, from: ProcessId, msg: Self::Msg, out: &mut Outbox<Self::Msg>) {
        if !self.acceptable(from, &msg) {
            return;
        }
        match msg {
            MigratingMsg::Request { requester, seq, .. } => {
                if !self.active {
                    let forwarded = true;
                    let msg = MigratingMsg::Request {
                        requester,
                        seq,
                        forwarded,
                    };
                    return self.forward(msg, out);
                }
                if let Some(n) = self.requests.enqueue(requester, seq) {
                    out.send(
                        n.to,
                        MigratingMsg::NextRequestor {
                            seq: n.seq,
                            next: requester,
                        },
                    );
                }
                if self.requests.is_free() {
                    out.send(self.id, MigratingMsg::WakeUp);
                }
            }
            MigratingMsg::Granted { epoch } => {
                // the controller knows it is one: only a retired server moves its pointer
                if !self.active && (self.rules.unstamped_controller || epoch >= self.epoch) {
                    self.controller = from;
                    self.epoch = self.epoch.max(epoch);
                }
                if self.pending == Some(Sequence::Entry) {
                    self.pending = None;
                    self.state = CsState::InCs;
                    out.complete();
                }
            }
            MigratingMsg::ExitCs { next } => {
                if self.active {
                    self.holder = None;
                    self.on_exit_cs(next, out);
                } else if !self.rules.unstamped_controller {
                    self.forward(MigratingMsg::ExitCs { next }, out);
                }
            }
            MigratingMsg::WakeUp => {
                if self.active
                    && (self.rules.unguarded_wake_up || self.requests.is_free())
                    && let Some(j) = self.requests.select_request(None)
                {
                    self.grant(j, out);
                }
            }
            MigratingMsg::BecomeController { epoch, info } => {
                self.active = true;
                self.controller = self.id;
                self.epoch = self.epoch.max(epoch);
                self.requests.install(info);
                self.migration.start(self.now);
                out.send(self.id, MigratingMsg::WakeUp);
            }
            MigratingMsg::NewController { controller, epoch } => {
                if !self.active {
                    self.learn_controller(controller, epoch);
                }
            }
            MigratingMsg::NextRequestor { seq, next } => {
                let live = seq == self.seq
                    && (self.pending == Some(Sequence::Entry) || self.state == CsState::InCs);
                let printed = self.rules.unguarded_next_requestor;
                if let Some(head) = self.requests.on_next_requestor(next, live, printed) {
                    self.forward(MigratingMsg::Orphan { next: head }, out);
                }
            }
            MigratingMsg::Orphan { next } => {
                if !self.active {
                    return self.forward(MigratingMsg::Orphan { next }, out);
                }
                self.requests.on_orphan(next);
                if self.requests.is_free() {
                    out.send(self.id, MigratingMsg::WakeUp);
                }
            }
        }
    }

    fn set_time(&mut self, now: u64) {
        self.now = now;
    }

    /// A pending entry waits for the controller's grant: the controller as known here, when
    /// it is another server (a request it forwards on migrates with it). The controller's
    /// own entry waits for the server it granted the CS to, until its exit-cs arrives (empty
    /// when it granted none since it became the controller, or granted itself).
    fn awaiting(&self) -> Vec<ProcessId> {
        match (self.pending, self.active) {
            (Some(Sequence::Entry), false) if self.controller != self.id => vec![self.controller],
            (Some(Sequence::Entry), true) => {
                self.holder.filter(|h| *h != self.id).into_iter().collect()
            }
            _ => Vec::new(),
        }
    }

    fn check_invariants(&self) -> Result<(), String> {
        if self.active && self.controller != self.id {
            return Err(format!(
                "{} is the controller but points at {}",
                self.id, self.controller
            ));
        }
        if self.active {
            self.requests.check()?;
        }
        Ok(())
    }
}
