//! The (l,k) composition of Kamei & Kakugawa 2019, §5, Algorithm 3: a CS object for the
//! global (l,k)-CS problem from an l-mutual-inclusion object `lmin` and a k-mutual-exclusion
//! object `kmex`, each with its own messages.
//!
//! ```text
//! Exit():  lmin.Exit();  state := OutCS;  kmex.Exit();
//! Entry(): kmex.Entry(); state := InCS;   lmin.Entry();
//! ```
//!
//! The published state changes just after `lmin.Exit()` (resp. `kmex.Entry()`), before
//! `kmex.Exit()` (resp. `lmin.Entry()`), as the paper places it; the call returns — the
//! outbox signals completion — once the second inner sequence has completed too, since
//! Algorithm 3's method body includes it. The second halves only give a right back (Lemma 9:
//! they never block); with MUTIN-based objects they complete at once, in the same handler as
//! the state change. Safety (Lemma 8) holds with either point of publication: each process
//! keeps #G_i ≥ #L_i and #G_i ≤ #K_i throughout.
//!
//! Preconditions: `lmin` and `kmex` of a process start in the same state as the composite,
//! with nothing pending (Lemma 5); each solves its own problem (l-mutual inclusion,
//! k-mutual exclusion) from that configuration.
//!
//! **Withdrawal** ([`CsObject::withdraw`]): a sequence whose first inner sequence still
//! runs is taken back inside. That inner sequence completes when its object lets it and is
//! reversed at once, the state never changing; the reverse is a second half, which never
//! blocks. Lemma 8's invariants hold meanwhile (see [`Gcs`]'s `withdraw`).
//!
//! **Unexpected messages.** GCS adds no message of its own: each one goes to the inner
//! object it names, whose rules decide (MUTIN's, Maekawa's: see their "Unexpected
//! messages"). An inner object that completed a sequence GCS did not start would be
//! recorded and reported by [`CsObject::check_invariants`], never panic; the MUTIN-based
//! objects complete only what was started, whatever arrives (`tests/hostile.rs`).
//!
//! Network assumptions: those of the objects inside (Maekawa, MUTIN: FIFO and at-most-once
//! delivery for Maekawa); on complete:3 with l = 1, k = 2 the checker found no violation within
//! 2 M generated states over FIFO and unordered links, nor within 1 GiB with duplication:
//! bounded. See docs/checker.md.

use super::{check_call, CsObject, CsState, Message, Outbox, Sequence};
use crate::error::{CallError, ConfigError, Problem};
use crate::id::ProcessId;
use std::borrow::Cow;

/// The messages of [`Gcs`]: each inner object's traffic in its own namespace.
#[derive(
    Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum GcsMsg<LM, KM> {
    /// A message of the l-mutual-inclusion object (kinds `lmin.X`).
    Lmin(LM),
    /// A message of the k-mutual-exclusion object (kinds `kmex.X`).
    Kmex(KM),
}

impl<LM: Message, KM: Message> Message for GcsMsg<LM, KM> {
    fn kind(&self) -> Cow<'static, str> {
        match self {
            GcsMsg::Lmin(m) => Cow::Owned(format!("lmin.{}", m.kind())),
            GcsMsg::Kmex(m) => Cow::Owned(format!("kmex.{}", m.kind())),
        }
    }
}

/// How far a pending sequence of [`Gcs`] got.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum GcsStage {
    /// The first inner sequence (`lmin.Exit` or `kmex.Entry`) is running.
    First,
    /// The state changed; the second inner sequence (`kmex.Exit` or `lmin.Entry`) is running.
    Second,
    /// The sequence was withdrawn ([`CsObject::withdraw`]) while its first inner sequence ran,
    /// which keeps running: once it completes, its reverse starts, and the state never
    /// changes.
    Withdrawn,
    /// The first inner sequence of a withdrawn sequence completed; its reverse (`kmex.Exit`
    /// or `lmin.Entry`, which never wait on a bound) is running. Back where the sequence
    /// started once it completes.
    Undoing,
}

/// (l,k)-GCS: the composition of an l-mutual-inclusion object `L` and a k-mutual-exclusion
/// object `K` (Algorithm 3).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Gcs<L, K> {
    lmin: L,
    kmex: K,
    state: CsState,
    pending: Option<(Sequence, GcsStage)>,
    fault: Option<String>,
}

impl<L: CsObject, K: CsObject> Gcs<L, K> {
    /// Composes one process's objects. Both must be the same process, in the same state,
    /// with nothing pending.
    pub fn new(lmin: L, kmex: K) -> Result<Gcs<L, K>, Problem> {
        if lmin.id() != kmex.id() {
            return Err(Problem::Invalid(format!(
                "lmin is {} but kmex is {}",
                lmin.id(),
                kmex.id()
            )));
        }
        if lmin.state() != kmex.state() || lmin.pending().is_some() || kmex.pending().is_some() {
            return Err(Problem::Invalid(format!(
                "{}: lmin and kmex must start idle in the same state",
                lmin.id()
            )));
        }
        Ok(Gcs {
            state: lmin.state(),
            lmin,
            kmex,
            pending: None,
            fault: None,
        })
    }

    /// Composes whole systems, process by process; reports every process that does not fit.
    pub fn system(lmin: Vec<L>, kmex: Vec<K>) -> Result<Vec<Gcs<L, K>>, ConfigError> {
        if lmin.len() != kmex.len() {
            return Err(ConfigError::one(Problem::Invalid(format!(
                "{} lmin objects but {} kmex objects",
                lmin.len(),
                kmex.len()
            ))));
        }
        let mut problems = Vec::new();
        let mut procs = Vec::with_capacity(lmin.len());
        for (l, k) in lmin.into_iter().zip(kmex) {
            match Gcs::new(l, k) {
                Ok(g) => procs.push(g),
                Err(p) => problems.push(p),
            }
        }
        ConfigError::check(problems)?;
        Ok(procs)
    }

    /// The l-mutual-inclusion object.
    pub fn lmin(&self) -> &L {
        &self.lmin
    }

    /// The k-mutual-exclusion object.
    pub fn kmex(&self) -> &K {
        &self.kmex
    }

    /// The pending sequence and how far it got.
    pub fn stage(&self) -> Option<(Sequence, GcsStage)> {
        self.pending
    }

    fn run_lmin(
        &mut self,
        out: &mut Outbox<GcsMsg<L::Msg, K::Msg>>,
        f: impl FnOnce(&mut L, &mut Outbox<L::Msg>) -> Result<(), CallError>,
    ) -> bool {
        let mut inner = Outbox::new();
        if let Err(e) = f(&mut self.lmin, &mut inner) {
            self.fault = Some(format!("{}: lmin refused a call: {e}", self.lmin.id()));
        }
        for (to, m) in inner.drain() {
            out.send(to, GcsMsg::Lmin(m));
        }
        inner.completed()
    }

    fn run_kmex(
        &mut self,
        out: &mut Outbox<GcsMsg<L::Msg, K::Msg>>,
        f: impl FnOnce(&mut K, &mut Outbox<K::Msg>) -> Result<(), CallError>,
    ) -> bool {
        let mut inner = Outbox::new();
        if let Err(e) = f(&mut self.kmex, &mut inner) {
            self.fault = Some(format!("{}: kmex refused a call: {e}", self.kmex.id()));
        }
        for (to, m) in inner.drain() {
            out.send(to, GcsMsg::Kmex(m));
        }
        inner.completed()
    }

    /// The first inner sequence completed: publish the new state, start the second.
    fn first_done(&mut self, seq: Sequence, out: &mut Outbox<GcsMsg<L::Msg, K::Msg>>) {
        self.pending = Some((seq, GcsStage::Second));
        let done = match seq {
            Sequence::Exit => {
                self.state = CsState::OutCs;
                self.run_kmex(out, |k, o| k.begin_exit(o))
            }
            Sequence::Entry => {
                self.state = CsState::InCs;
                self.run_lmin(out, |l, o| l.begin_entry(o))
            }
        };
        if done {
            self.second_done(out);
        }
    }

    fn second_done(&mut self, out: &mut Outbox<GcsMsg<L::Msg, K::Msg>>) {
        self.pending = None;
        out.complete();
    }

    /// The first inner sequence of a withdrawn `seq` completed: run its reverse, the state
    /// unchanged.
    fn undo(&mut self, seq: Sequence, out: &mut Outbox<GcsMsg<L::Msg, K::Msg>>) {
        self.pending = Some((seq, GcsStage::Undoing));
        let done = match seq {
            Sequence::Exit => self.run_lmin(out, |l, o| l.begin_entry(o)),
            Sequence::Entry => self.run_kmex(out, |k, o| k.begin_exit(o)),
        };
        if done {
            self.second_done(out);
        }
    }

    /// An inner object completed a sequence: `from_lmin` says which one.
    fn inner_done(&mut self, from_lmin: bool, out: &mut Outbox<GcsMsg<L::Msg, K::Msg>>) {
        match (self.pending, from_lmin) {
            (Some((Sequence::Exit, GcsStage::First)), true) => self.first_done(Sequence::Exit, out),
            (Some((Sequence::Entry, GcsStage::First)), false) => {
                self.first_done(Sequence::Entry, out)
            }
            (Some((Sequence::Exit, GcsStage::Second)), false)
            | (Some((Sequence::Entry, GcsStage::Second)), true) => self.second_done(out),
            (Some((Sequence::Exit, GcsStage::Withdrawn)), true) => self.undo(Sequence::Exit, out),
            (Some((Sequence::Entry, GcsStage::Withdrawn)), false) => {
                self.undo(Sequence::Entry, out)
            }
            (Some((Sequence::Exit, GcsStage::Undoing)), true)
            | (Some((Sequence::Entry, GcsStage::Undoing)), false) => self.second_done(out),
            _ => {
                self.fault = Some(format!(
                    "{}: an inner object completed a sequence GCS did not start",
                    self.lmin.id()
                ))
            }
        }
    }
}

impl<L: CsObject, K: CsObject> CsObject for Gcs<L, K> {
    type Msg = GcsMsg<L::Msg, K::Msg>;

    fn id(&self) -> ProcessId {
        self.lmin.id()
    }

    fn state(&self) -> CsState {
        self.state
    }

    fn pending(&self) -> Option<Sequence> {
        self.pending.map(|(s, _)| s)
    }

    fn begin_exit(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        check_call(self.state, self.pending(), Sequence::Exit)?;
        self.pending = Some((Sequence::Exit, GcsStage::First));
        if self.run_lmin(out, |l, o| l.begin_exit(o)) {
            self.first_done(Sequence::Exit, out);
        }
        Ok(())
    }

    fn begin_entry(&mut self, out: &mut Outbox<Self::Msg>) -> Result<(), CallError> {
        check_call(self.state, self.pending(), Sequence::Entry)?;
        self.pending = Some((Sequence::Entry, GcsStage::First));
        if self.run_kmex(out, |k, o| k.begin_entry(o)) {
            self.first_done(Sequence::Entry, out);
        }
        Ok(())
    }

    fn on_message(&mut self, from: ProcessId, msg: Self::Msg, out: &mut Outbox<Self::Msg>) {
        match msg {
            GcsMsg::Lmin(m) => {
                if self.run_lmin(out, |l, o| {
                    l.on_message(from, m, o);
                    Ok(())
                }) {
                    self.inner_done(true, out);
                }
            }
            GcsMsg::Kmex(m) => {
                if self.run_kmex(out, |k, o| {
                    k.on_message(from, m, o);
                    Ok(())
                }) {
                    self.inner_done(false, out);
                }
            }
        }
    }

    /// Withdraws a sequence whose first inner sequence is still running (the one that waits
    /// on a bound: `kmex.Entry` on k, `lmin.Exit` on l). That inner sequence completes when
    /// its object lets it and is reversed at once inside, the composite's state unchanged;
    /// the reverse (`kmex.Exit`, `lmin.Entry`) never waits on a bound (Lemma 9). Lemma 8's
    /// invariants hold throughout: a withdrawn entry holds a kmex right while out of the CS
    /// (#G_i ≤ #K_i), a withdrawn exit is out of lmin while in the CS (#L_i ≤ #G_i). Past
    /// the first inner sequence (the state changed) it is too late: `false`.
    fn withdraw(&mut self, _out: &mut Outbox<Self::Msg>) -> bool {
        match self.pending {
            Some((seq, GcsStage::First)) => {
                self.pending = Some((seq, GcsStage::Withdrawn));
                true
            }
            Some((_, GcsStage::Withdrawn | GcsStage::Undoing)) => true,
            _ => false,
        }
    }

    fn can_withdraw(&self) -> bool {
        true
    }

    /// The inner object whose sequence runs (only that one has one pending).
    fn awaiting(&self) -> Vec<ProcessId> {
        let mut who = self.lmin.awaiting();
        who.extend(self.kmex.awaiting());
        who
    }

    /// What both inner objects lent.
    fn lent_to(&self) -> Vec<ProcessId> {
        let mut who = self.lmin.lent_to();
        who.extend(self.kmex.lent_to());
        who.sort_unstable();
        who.dedup();
        who
    }

    fn set_time(&mut self, now: u64) {
        self.lmin.set_time(now);
        self.kmex.set_time(now);
    }

    fn check_invariants(&self) -> Result<(), String> {
        if let Some(f) = &self.fault {
            return Err(f.clone());
        }
        self.lmin.check_invariants()?;
        self.kmex.check_invariants()?;
        if self.pending.is_none()
            && (self.lmin.state() != self.state || self.kmex.state() != self.state)
        {
            return Err(format!(
                "{}: idle in {:?} but lmin is {:?} and kmex {:?}",
                self.id(),
                self.state,
                self.lmin.state(),
                self.kmex.state()
            ));
        }
        Ok(())
    }
}
