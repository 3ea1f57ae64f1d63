//! The model the explorer searches: a process's local state ([`Node`]) interned once in an
//! arena with its remembered steps ([`World`]), a global state ([`Sys`]) as arena indices plus
//! the messages in flight, and the actions ([`Act`]) that lead from one global state to the next.

use super::tables::{fingerprint, table_bytes, table_growth, vec_growth, Fingerprinter, IdHasher};
use crate::check::{Network, PathStep, MAX_CHECK_PROCESSES};
use crate::cs::{CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};

/// One process of the model: its object, how many sequences it has started, and whether its
/// client step is enabled.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(super) struct Node<A> {
    pub(super) obj: A,
    pub(super) started: usize,
    /// The client may start the next sequence (the previous one completed and sequences are
    /// left).
    pub(super) armed: bool,
    /// A calling-convention error the object returned to a client step (a driver or object
    /// bug); it fails the `invariants` property.
    pub(super) call_error: Option<CallError>,
    /// The processes it may send to: its closed neighbourhood in the instance's topology.
    pub(super) peers: u64,
    /// It sent to a process outside `peers` (the message was dropped); it fails the
    /// `invariants` property.
    pub(super) stray: bool,
}

impl<A: CsObject> Node<A> {
    fn invariants_hold(&self) -> bool {
        self.call_error.is_none() && !self.stray && self.obj.check_invariants().is_ok()
    }

    /// One action of this process: the client step (`msg` = `None`) or the delivery of `msg`
    /// from its sender. Returns the sends, in order; a send outside `peers` is dropped and
    /// recorded.
    fn run(&mut self, msg: Option<(usize, A::Msg)>, sequences: usize) -> Vec<(u8, A::Msg)> {
        let mut out = Outbox::new();
        match msg {
            None => {
                self.armed = false;
                let seq = Sequence::leaving(self.obj.state());
                self.started += 1;
                // the driver only steps a process whose previous sequence completed, so the
                // calling convention holds; an error here is a bug, recorded to fail
                // `invariants`
                if let Err(e) = self.obj.begin(seq, &mut out) {
                    self.call_error = Some(e);
                }
            }
            Some((src, msg)) => self.obj.on_message(ProcessId::from(src), msg, &mut out),
        }
        if out.completed() && self.started < sequences {
            self.armed = true;
        }
        let mut sends = Vec::with_capacity(out.sends().len());
        for (to, m) in out.drain() {
            if self.peers & (1 << to.index()) != 0 {
                sends.push((to.index() as u8, m));
            } else {
                self.stray = true;
            }
        }
        sends
    }
}

/// A local state in the arena, with what the search reads of it.
pub(super) struct Local<A> {
    node: Node<A>,
    /// Its invariants hold.
    pub(super) ok: bool,
    pub(super) cs: CsState,
    pub(super) pending: bool,
    pub(super) armed: bool,
}

/// A remembered local step: the local state it leads to and its sends (a range of
/// [`World::sends`]).
#[derive(Clone, Copy)]
pub(super) struct Step {
    pub(super) to: u32,
    from: u32,
    len: u32,
}

/// A local step's input: a local state and the message it takes with its sender (`None`:
/// its client step).
type StepKey<A> = (u32, Option<(u16, <A as CsObject>::Msg)>);

/// Every local state met so far and every local step computed so far.
pub(super) struct World<A: CsObject> {
    pub(super) locals: Vec<Local<A>>,
    pub(super) ids: HashMap<u128, u32, BuildHasherDefault<IdHasher>>,
    pub(super) steps: HashMap<StepKey<A>, Step, BuildHasherDefault<Fingerprinter>>,
    pub(super) sends: Vec<(u8, A::Msg)>,
    pub(super) sequences: usize,
    pub(super) network: Network,
}

impl<A: CsObject> World<A> {
    pub(super) fn intern(&mut self, node: Node<A>) -> u32 {
        let fp = fingerprint(&node);
        if let Some(&id) = self.ids.get(&fp) {
            return id;
        }
        let id = u32::try_from(self.locals.len()).expect("fewer than 2^32 local states");
        self.locals.push(Local {
            ok: node.invariants_hold(),
            cs: node.obj.state(),
            pending: node.obj.pending().is_some(),
            armed: node.armed,
            node,
        });
        self.ids.insert(fp, id);
        id
    }

    /// The step of local state `id` taking `input` (`None`: its client step), computed once.
    pub(super) fn step(&mut self, id: u32, input: Option<(u16, A::Msg)>) -> Step {
        if let Some(&st) = self.steps.get(&(id, input.clone())) {
            return st;
        }
        let mut node = self.locals[id as usize].node.clone();
        let sends = node.run(
            input.clone().map(|(src, m)| (usize::from(src), m)),
            self.sequences,
        );
        let from = u32::try_from(self.sends.len()).expect("fewer than 2^32 sends");
        let len = sends.len() as u32;
        self.sends.extend(sends);
        let to = self.intern(node);
        let st = Step { to, from, len };
        self.steps.insert((id, input), st);
        st
    }

    pub(super) fn sends(&self, st: Step) -> &[(u8, A::Msg)] {
        &self.sends[st.from as usize..(st.from + st.len) as usize]
    }

    /// Bytes its tables hold: the arena, its index, the remembered steps and their sends
    /// (what a local state allocates on the heap is not counted).
    pub(super) fn bytes(&self) -> usize {
        self.locals.capacity() * std::mem::size_of::<Local<A>>()
            + table_bytes::<(u128, u32)>(self.ids.capacity())
            + table_bytes::<(StepKey<A>, Step)>(self.steps.capacity())
            + self.sends.capacity() * std::mem::size_of::<(u8, A::Msg)>()
    }

    /// Bytes its tables may allocate on top of [`World::bytes`] before the next state is
    /// expanded: the growth step of every table within [`SLACK`] entries of growing.
    pub(super) fn growth(&self) -> usize {
        vec_growth::<Local<A>>(self.locals.len(), self.locals.capacity(), SLACK)
            + table_growth::<(u128, u32)>(self.ids.len(), self.ids.capacity(), SLACK)
            + table_growth::<(StepKey<A>, Step)>(self.steps.len(), self.steps.capacity(), SLACK)
            + vec_growth::<(u8, A::Msg)>(self.sends.len(), self.sends.capacity(), 4 * SLACK)
    }
}

/// Entries a table may gain while one state is expanded (its successors' local states and
/// steps, and the solo explorations, up to [`SOLO_BUDGET`] steps per process), counted
/// generously.
///
/// [`SOLO_BUDGET`]: super::reduce::SOLO_BUDGET
const SLACK: usize = 2048;

/// The most links an instance has (self-links included).
const MAX_LINKS: usize = MAX_CHECK_PROCESSES * MAX_CHECK_PROCESSES;

/// A global state: every process, by its index in the arena, and every FIFO link
/// `(src, dst)`, self-links included, at index `src * n + dst`.
#[derive(Clone, Debug)]
pub(super) struct Sys<A: CsObject> {
    pub(super) locals: [u32; MAX_CHECK_PROCESSES],
    pub(super) n: u8,
    /// Every message in flight with its link `src * n + dst`, sorted by link: on FIFO links
    /// stably (each link's messages in FIFO order), otherwise by link and message (a link
    /// holds a multiset, on a duplicating network a set). One vector rather than n² queues:
    /// a step copies one allocation.
    pub(super) msgs: Vec<(u16, A::Msg)>,
}

impl<A: CsObject> Hash for Sys<A> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        // arena indices name local states exactly within one search
        for &id in &self.locals[..self.n()] {
            h.write_u32(id);
        }
        self.msgs.hash(h);
    }
}

/// An action of the model; each belongs to one process (its `owner`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Act {
    /// The client of this process starts its next sequence.
    Step(usize),
    /// The message at index `at` of [`Sys::msgs`], on link `(src, dst)`, is delivered to
    /// `dst` (on FIFO links: the link's head).
    Deliver { src: usize, dst: usize, at: usize },
}

impl Act {
    pub(super) fn owner(self) -> usize {
        match self {
            Act::Step(p) => p,
            Act::Deliver { dst, .. } => dst,
        }
    }
}

/// Where each link's messages start in [`Sys::msgs`] (link `l` spans `start[l]..start[l+1]`).
pub(super) struct Links {
    pub(super) start: [u16; MAX_LINKS + 1],
}

impl<A: CsObject> Sys<A> {
    pub(super) fn n(&self) -> usize {
        usize::from(self.n)
    }

    pub(super) fn links(&self) -> Links {
        let links = self.n() * self.n();
        let mut start = [0u16; MAX_LINKS + 1];
        for &(l, _) in &self.msgs {
            start[usize::from(l) + 1] += 1;
        }
        for l in 0..links {
            start[l + 1] += start[l];
        }
        Links { start }
    }

    /// Every enabled action, in a fixed order: deliveries by link (on FIFO links each link's
    /// head, otherwise each distinct message), then client steps by process (the search
    /// takes them from the back, like stateright's depth-first search).
    pub(super) fn enabled(&self, w: &World<A>) -> Vec<Act> {
        let n = self.n();
        let mut acts: Vec<Act> = Vec::with_capacity(self.msgs.len() + n);
        for (at, (l, m)) in self.msgs.iter().enumerate() {
            let new = match at.checked_sub(1).map(|i| &self.msgs[i]) {
                None => true,
                Some((k, _)) if k != l => true,
                Some((_, prev)) => w.network != Network::Fifo && prev != m,
            };
            if new {
                let l = usize::from(*l);
                acts.push(Act::Deliver {
                    src: l / n,
                    dst: l % n,
                    at,
                });
            }
        }
        acts.extend(
            (0..n)
                .filter(|&p| w.locals[self.locals[p] as usize].armed)
                .map(Act::Step),
        );
        acts
    }

    pub(super) fn local<'w>(&self, w: &'w World<A>, p: usize) -> &'w Local<A> {
        &w.locals[self.locals[p] as usize]
    }

    /// Whether nothing can happen: no client step left to take and no message in flight;
    /// on a duplicating network, where a delivered message stays in flight, no delivery
    /// that changes its receiver or sends a message not in flight yet.
    pub(super) fn quiet(&self, w: &World<A>) -> bool {
        if (0..self.n()).any(|p| self.local(w, p).armed) {
            return false;
        }
        if w.network != Network::Duplicating {
            return self.msgs.is_empty();
        }
        let n = self.n();
        self.msgs.iter().all(|(l, m)| {
            let (src, dst) = (usize::from(*l) / n, usize::from(*l) % n);
            let before = &self.local(w, dst).node;
            let mut node = before.clone();
            let sends = node.run(Some((src, m.clone())), w.sequences);
            node == *before
                && sends.iter().all(|(to, m)| {
                    let l = (dst * n + usize::from(*to)) as u16;
                    self.msgs
                        .binary_search_by(|(k, x)| (*k, x).cmp(&(l, m)))
                        .is_ok()
                })
        })
    }

    pub(super) fn cs_states(&self, w: &World<A>) -> Vec<CsState> {
        (0..self.n()).map(|p| self.local(w, p).cs).collect()
    }

    /// The published states as a bit set: bit `p` set when process `p` is in the CS.
    pub(super) fn cs_mask(&self, w: &World<A>) -> usize {
        (0..self.n())
            .filter(|&p| self.local(w, p).cs == CsState::InCs)
            .fold(0, |m, p| m | 1 << p)
    }

    /// The step `act` describes, read before it is applied.
    pub(super) fn describe(&self, act: Act) -> PathStep {
        match act {
            Act::Step(p) => PathStep::Client(p),
            Act::Deliver { src, dst, at } => PathStep::Deliver {
                src,
                dst,
                msg: format!("{:?}", self.msgs[at].1),
            },
        }
    }

    /// Applies an enabled action.
    pub(super) fn apply(&self, w: &mut World<A>, act: Act) -> Sys<A> {
        let n = self.n();
        let p = act.owner();
        let mut msgs = self.msgs.clone();
        let network = w.network;
        let input = match act {
            Act::Step(_) => None,
            Act::Deliver { src, at, .. } => {
                let m = match network {
                    Network::Duplicating => msgs[at].1.clone(),
                    Network::Fifo | Network::Unordered => msgs.remove(at).1,
                };
                Some((src as u16, m))
            }
        };
        let st = w.step(self.locals[p], input);
        for (to, msg) in w.sends(st) {
            let l = (p * n + usize::from(*to)) as u16;
            match network {
                Network::Fifo => {
                    let at = msgs.partition_point(|&(k, _)| k <= l);
                    msgs.insert(at, (l, msg.clone()));
                }
                Network::Unordered => {
                    let at = msgs.partition_point(|(k, x)| (*k, x) <= (l, msg));
                    msgs.insert(at, (l, msg.clone()));
                }
                Network::Duplicating => {
                    if let Err(at) = msgs.binary_search_by(|(k, x)| (*k, x).cmp(&(l, msg))) {
                        msgs.insert(at, (l, msg.clone()));
                    }
                }
            }
        }
        let mut locals = self.locals;
        locals[p] = st.to;
        Sys {
            locals,
            n: self.n,
            msgs,
        }
    }
}
