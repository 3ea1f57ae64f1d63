//! The checker's own explorer: a depth-first search over the model's states with a set of
//! 128-bit state fingerprints, optionally with the partial-order reduction described in the
//! module doc of [`crate::check`].

use super::{deadlocked, Outcome, Path, PathStep};
use crate::config::Instance;
use crate::cs::{CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;
use std::cell::RefCell;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::Arc;

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
    peers: u64,
    /// It sent to a process outside `peers` (the message was dropped); it fails the
    /// `invariants` property.
    stray: bool,
}

impl<A: CsObject> Node<A> {
    pub(super) fn invariants_hold(&self) -> bool {
        self.call_error.is_none() && !self.stray && self.obj.check_invariants().is_ok()
    }

    /// One action of this process: the client step (`msg` = `None`) or the delivery of `msg`
    /// from its sender. Returns the sends, in order; a send outside `peers` is dropped and
    /// recorded.
    fn run(&mut self, msg: Option<(usize, A::Msg)>, sequences: usize) -> Vec<(usize, A::Msg)> {
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
                sends.push((to.index(), m));
            } else {
                self.stray = true;
            }
        }
        sends
    }
}

/// How far one process can go on its own (see [`Sys::solo`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Solo {
    /// Every behaviour of the process alone sends only to these processes (a bit set; the
    /// process itself excluded); `visible`: some step changes its observation (published
    /// state or invariant verdict).
    Sends { to: u64, visible: bool },
    /// The exploration budget ran out: it may send to anyone.
    Unknown,
}

/// Local states a solo exploration may visit before it gives up.
const SOLO_BUDGET: usize = 64;

/// A global state: every process and every FIFO link `(src, dst)`, self-links included, at
/// index `src * n + dst`. Processes are shared between states (a step copies only the
/// process it changes) and carry their fingerprint and invariant verdict, computed once.
#[derive(Clone, Debug)]
pub(super) struct Sys<A: CsObject> {
    pub(super) nodes: Vec<Arc<Node<A>>>,
    /// Per process: its fingerprint and whether its invariants hold.
    meta: Vec<(u128, bool)>,
    /// Every message in flight with its link `src * n + dst`, sorted by link (stably: each
    /// link's messages in FIFO order). One vector rather than n² queues: a step copies one
    /// allocation.
    msgs: Vec<(u16, A::Msg)>,
}

impl<A: CsObject> Hash for Sys<A> {
    fn hash<H: Hasher>(&self, h: &mut H) {
        for (fp, _) in &self.meta {
            h.write_u128(*fp);
        }
        self.msgs.hash(h);
    }
}

/// An action of the model; each belongs to one process (its `owner`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Act {
    /// The client of this process starts its next sequence.
    Step(usize),
    /// The head of link `(src, dst)` is delivered to `dst`.
    Deliver { src: usize, dst: usize },
}

impl Act {
    fn owner(self) -> usize {
        match self {
            Act::Step(p) => p,
            Act::Deliver { dst, .. } => dst,
        }
    }
}

impl<A: CsObject> Sys<A> {
    pub(super) fn initial(procs: Vec<A>, sequences: usize, peers: &[u64]) -> Self {
        let nodes: Vec<Arc<Node<A>>> = procs
            .into_iter()
            .enumerate()
            .map(|(obj_index, obj)| {
                Arc::new(Node {
                    obj,
                    started: 0,
                    armed: sequences > 0,
                    call_error: None,
                    peers: peers[obj_index],
                    stray: false,
                })
            })
            .collect();
        Sys {
            meta: nodes
                .iter()
                .map(|n| (fingerprint(&**n), n.invariants_hold()))
                .collect(),
            nodes,
            msgs: Vec::new(),
        }
    }

    fn n(&self) -> usize {
        self.nodes.len()
    }

    /// The messages in flight on link `l`, in FIFO order.
    fn link(&self, l: usize) -> &[(u16, A::Msg)] {
        let from = self.msgs.partition_point(|&(k, _)| usize::from(k) < l);
        let to = self.msgs.partition_point(|&(k, _)| usize::from(k) <= l);
        &self.msgs[from..to]
    }

    /// The index in `msgs` of the head of the non-empty link `l`.
    fn head(&self, l: usize) -> usize {
        let at = self.msgs.partition_point(|&(k, _)| usize::from(k) < l);
        debug_assert!(self.msgs.get(at).is_some_and(|&(k, _)| usize::from(k) == l));
        at
    }

    /// The observation the reduction preserves: every process's published state and whether
    /// its invariants hold.
    #[cfg(test)]
    pub(super) fn observation(&self) -> Vec<(CsState, bool)> {
        (0..self.n()).map(|p| observation(self, p)).collect()
    }

    pub(super) fn cs_states(&self) -> Vec<CsState> {
        self.nodes.iter().map(|n| n.obj.state()).collect()
    }

    /// Every enabled action, in a fixed order: deliveries by link, then client steps by
    /// process (the search takes them from the back, like stateright's depth-first search).
    fn enabled(&self) -> Vec<Act> {
        let n = self.n();
        let mut acts: Vec<Act> = Vec::new();
        let mut last = None;
        for &(l, _) in &self.msgs {
            if last != Some(l) {
                last = Some(l);
                let l = usize::from(l);
                acts.push(Act::Deliver {
                    src: l / n,
                    dst: l % n,
                });
            }
        }
        acts.extend((0..n).filter(|&p| self.nodes[p].armed).map(Act::Step));
        acts
    }

    /// Whether nothing is enabled: no message in flight and no client step left to take.
    pub(super) fn quiet(&self) -> bool {
        self.msgs.is_empty() && self.nodes.iter().all(|n| !n.armed)
    }

    /// The step `act` describes, read before it is applied.
    fn describe(&self, act: Act) -> PathStep {
        match act {
            Act::Step(p) => PathStep::Client(p),
            Act::Deliver { src, dst } => PathStep::Deliver {
                src,
                dst,
                msg: format!("{:?}", self.msgs[self.head(src * self.n() + dst)].1),
            },
        }
    }

    /// Applies an enabled action.
    fn apply(&self, act: Act, sequences: usize) -> Sys<A> {
        let mut next = self.clone();
        let n = self.n();
        let p = act.owner();
        let msg = match act {
            Act::Step(_) => None,
            Act::Deliver { src, dst } => Some((src, next.msgs.remove(self.head(src * n + dst)).1)),
        };
        let node = Arc::make_mut(&mut next.nodes[p]);
        let sends = node.run(msg, sequences);
        next.meta[p] = (fingerprint(&*node), node.invariants_hold());
        for (to, msg) in sends {
            let l = (p * n + to) as u16;
            let at = next.msgs.partition_point(|&(k, _)| k <= l);
            next.msgs.insert(at, (l, msg));
        }
        next
    }

    /// Every behaviour of process `y` running alone from this state: no other process acts,
    /// so `y` sees its incoming links as they are (minus what it takes) plus its own
    /// self-sends. Collects the processes it can send to; each behaviour is deterministic in
    /// `y`'s local state and the messages it takes, so this is exact up to the budget.
    fn solo(&self, y: usize, sequences: usize) -> Solo {
        let n = self.n();
        let inbox: Vec<VecDeque<A::Msg>> = (0..n)
            .map(|x| {
                self.link(x * n + y)
                    .iter()
                    .map(|(_, m)| m.clone())
                    .collect()
            })
            .collect();
        let mut stack = vec![((*self.nodes[y]).clone(), inbox)];
        let (mut to_mask, mut visible, mut budget) = (0u64, false, SOLO_BUDGET);
        while let Some((node, inbox)) = stack.pop() {
            let moves = (node.armed.then_some(None))
                .into_iter()
                .chain((0..n).filter(|&x| !inbox[x].is_empty()).map(Some));
            for mv in moves {
                if budget == 0 {
                    return Solo::Unknown;
                }
                budget -= 1;
                let (mut next, mut inbox) = (node.clone(), inbox.clone());
                let msg = mv.map(|x| (x, inbox[x].pop_front().expect("non-empty")));
                let sends = next.run(msg, sequences);
                visible = visible
                    || next.obj.state() != node.obj.state()
                    || next.invariants_hold() != node.invariants_hold();
                for (to, m) in sends {
                    if to == y {
                        inbox[y].push_back(m);
                    } else {
                        to_mask |= 1 << to;
                    }
                }
                stack.push((next, inbox));
            }
        }
        Solo::Sends {
            to: to_mask,
            visible,
        }
    }

    /// The smallest set of processes containing `p` whose enabled actions form a persistent
    /// set, given what every process can do alone (`solo`); see the module doc of
    /// [`crate::check`] for the argument. Returns a bit set.
    ///
    /// With `visible` (the set's enabled actions include a visible one) the set also takes
    /// every process that could make a visible step before the set's processes act.
    fn persistent(&self, p: usize, solo: &[Solo], visible: bool) -> u64 {
        let n = self.n();
        let all = (1u64 << n) - 1;
        let mut c = 1u64 << p;
        loop {
            let outside = all & !c;
            // wild: outside processes that may do something not seen alone, so may send to
            // anyone: their solo budget ran out, or another outside process may send to them
            let mut wild: u64 = (0..n)
                .filter(|&y| outside & (1 << y) != 0 && solo[y] == Solo::Unknown)
                .fold(0, |m, y| m | 1 << y);
            loop {
                let mut grown = wild;
                for y in (0..n).filter(|&y| outside & !wild & (1 << y) != 0) {
                    let fed = (0..n).any(|z| {
                        z != y
                            && outside & (1 << z) != 0
                            && (wild & (1 << z) != 0 && self.nodes[z].peers & (1 << y) != 0
                                || matches!(solo[z], Solo::Sends { to, .. } if to & (1 << y) != 0))
                    });
                    if fed {
                        grown |= 1 << y;
                    }
                }
                if grown == wild {
                    break;
                }
                wild = grown;
            }
            // an outside process that may fill an empty link into the set joins it
            let mut joins = 0u64;
            for y in (0..n).filter(|&y| outside & (1 << y) != 0) {
                let (may, shows) = match solo[y] {
                    Solo::Sends { to, visible } if wild & (1 << y) == 0 => (to, visible),
                    _ => (self.nodes[y].peers, true),
                };
                let fills =
                    (0..n).any(|x| c & may & (1 << x) != 0 && self.link(y * n + x).is_empty());
                if fills || (visible && shows) {
                    joins |= 1 << y;
                }
            }
            if joins == 0 {
                return c;
            }
            c |= joins;
        }
    }
}

/// A 128-bit state fingerprint: two independent multiply-rotate lanes over the words the
/// derived `Hash` writes, each finished with a 64-bit mixer.
#[derive(Default)]
struct Fingerprinter {
    a: u64,
    b: u64,
}

impl Fingerprinter {
    #[inline]
    fn word(&mut self, x: u64) {
        self.a = (self.a ^ x)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(31);
        self.b = (self.b.rotate_left(17) ^ x)
            .wrapping_mul(0xD6E8_FEB8_6659_FD93)
            .wrapping_add(0x2545_F491_4F6C_DD1D);
    }

    fn mix(mut z: u64) -> u64 {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn finish128(&self) -> u128 {
        (u128::from(Self::mix(self.a)) << 64) | u128::from(Self::mix(self.b ^ 0x5851_F42D))
    }
}

impl Hasher for Fingerprinter {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.word(u64::from_le_bytes(c.try_into().expect("8 bytes")));
        }
        let rest = chunks.remainder();
        if !rest.is_empty() {
            let mut w = [0u8; 8];
            w[..rest.len()].copy_from_slice(rest);
            self.word(u64::from_le_bytes(w) ^ (rest.len() as u64) << 59);
        }
    }
    fn write_u8(&mut self, x: u8) {
        self.word(u64::from(x));
    }
    fn write_u16(&mut self, x: u16) {
        self.word(u64::from(x));
    }
    fn write_u32(&mut self, x: u32) {
        self.word(u64::from(x));
    }
    fn write_u64(&mut self, x: u64) {
        self.word(x);
    }
    fn write_usize(&mut self, x: usize) {
        self.word(x as u64);
    }
    fn finish(&self) -> u64 {
        Self::mix(self.a)
    }
}

fn fingerprint<T: Hash>(t: &T) -> u128 {
    let mut h = Fingerprinter::default();
    t.hash(&mut h);
    h.finish128()
}

/// Keys are fingerprints already: the set uses their low bits as they are.
#[derive(Default)]
pub(super) struct IdHasher(u64);

impl Hasher for IdHasher {
    fn write(&mut self, _: &[u8]) {
        unreachable!("only u128 keys are hashed")
    }
    fn write_u128(&mut self, x: u128) {
        self.0 = x as u64;
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type FpSet = HashSet<u128, BuildHasherDefault<IdHasher>>;

/// One state on the depth-first stack, with the successors still to visit.
struct Frame<A: CsObject> {
    state: Sys<A>,
    fp: u128,
    /// Successors along the selected actions, explored from the back.
    todo: Vec<(Act, Sys<A>, u128)>,
    /// The action taken from this state towards the next frame.
    taken: Option<Act>,
}

/// Search statistics.
pub(super) struct Stats {
    pub(super) unique: usize,
    pub(super) generated: usize,
    pub(super) max_depth: usize,
}

/// The observation the reduction preserves, process `p`'s part: its published state and
/// whether its invariants hold.
fn observation<A: CsObject>(s: &Sys<A>, p: usize) -> (CsState, bool) {
    (s.nodes[p].obj.state(), s.meta[p].1)
}

/// The explorer. `reduce` turns the partial-order reduction on; `visit` sees every state
/// the search reaches (tests compare what the two searches see).
pub(super) struct Explorer<'a, A: CsObject> {
    pub(super) instance: &'a Instance,
    pub(super) sequences: usize,
    pub(super) reduce: bool,
    pub(super) max_states: Option<usize>,
    pub(super) visit: Option<Visit<'a, A>>,
    pub(super) solo_memo: RefCell<HashMap<u128, Solo, BuildHasherDefault<IdHasher>>>,
}

/// A callback that sees every state a search reaches.
pub(super) type Visit<'a, A> = &'a mut dyn FnMut(&Sys<A>);

/// Remembered solo explorations before the memo is emptied.
const SOLO_MEMO: usize = 1 << 20;

impl<A: CsObject> Explorer<'_, A> {
    /// [`Sys::solo`], remembered: it depends only on the process and its incoming links.
    fn solo(&self, s: &Sys<A>, y: usize) -> Solo {
        let n = s.n();
        let mut h = Fingerprinter::default();
        h.write_usize(y);
        h.write_u128(s.meta[y].0);
        for x in 0..n {
            s.link(x * n + y).hash(&mut h);
        }
        let key = h.finish128();
        let mut memo = self.solo_memo.borrow_mut();
        if let Some(&r) = memo.get(&key) {
            return r;
        }
        if memo.len() >= SOLO_MEMO {
            memo.clear();
        }
        let r = s.solo(y, self.sequences);
        memo.insert(key, r);
        r
    }

    /// The first property `s` fails, if any.
    fn violated(&self, s: &Sys<A>) -> Option<&'static str> {
        if !self.instance.violations(&s.cs_states()).is_empty() {
            Some("safety")
        } else if !s.meta.iter().all(|&(_, ok)| ok) {
            Some("invariants")
        } else if s.quiet()
            && s.nodes.iter().all(|n| n.obj.pending().is_some())
            && deadlocked(self.instance, &s.cs_states())
        {
            Some("no deadlock")
        } else {
            None
        }
    }

    /// The actions to explore from `s` and their successors: all enabled actions, or with the
    /// reduction a persistent subset that is invisible and closes no cycle on the stack.
    fn expand(&self, s: &Sys<A>, on_stack: &FpSet) -> Vec<(Act, Sys<A>, u128)> {
        let enabled = s.enabled();
        let succ = |a: Act| {
            let t = s.apply(a, self.sequences);
            let fp = fingerprint(&t);
            (a, t, fp)
        };
        if !self.reduce || enabled.len() <= 1 {
            return enabled.into_iter().map(succ).collect();
        }
        // candidate persistent sets: from each process with an enabled action, the closure
        // without the visibility condition first; if it selects a visible action, the closure
        // with it. The smallest candidate whose successors are off the stack wins.
        let n = s.n();
        let solo: Vec<Solo> = (0..n).map(|y| self.solo(s, y)).collect();
        let size = |c: u64| enabled.iter().filter(|a| c & (1 << a.owner()) != 0).count();
        let mut order: Vec<(usize, u64)> = (0..n)
            .filter(|&p| enabled.iter().any(|a| a.owner() == p))
            .map(|p| (p, s.persistent(p, &solo, false)))
            .collect();
        order.sort_by_key(|&(_, c)| size(c));
        let mut cache: Vec<Option<(Act, Sys<A>, u128)>> = vec![None; enabled.len()];
        let mut best: Option<u64> = None;
        for (p, mut c) in order {
            let mut with_visibility = false;
            loop {
                if size(c) >= best.map_or(enabled.len(), size) {
                    break;
                }
                let (mut visible, mut cycle) = (false, false);
                for (i, a) in enabled.iter().enumerate() {
                    if c & (1 << a.owner()) != 0 {
                        let (_, t, fp) = cache[i].get_or_insert_with(|| succ(*a));
                        visible |= observation(t, a.owner()) != observation(s, a.owner());
                        cycle |= on_stack.contains(fp);
                    }
                }
                if cycle {
                    break;
                }
                if visible && !with_visibility {
                    with_visibility = true;
                    c = s.persistent(p, &solo, true);
                    continue;
                }
                best = Some(c);
                break;
            }
        }
        let keep = best.unwrap_or(u64::MAX);
        enabled
            .iter()
            .enumerate()
            .filter(|(_, a)| keep & (1 << a.owner()) != 0)
            .map(|(i, a)| cache[i].take().unwrap_or_else(|| succ(*a)))
            .collect()
    }

    /// Runs the search from `init`.
    pub(super) fn run(mut self, init: Sys<A>) -> (Outcome, Stats) {
        let mut visited = FpSet::default();
        let mut on_stack = FpSet::default();
        let mut stats = Stats {
            unique: 1,
            generated: 1,
            max_depth: 1,
        };
        let fp = fingerprint(&init);
        visited.insert(fp);
        if let Some(v) = self.visit.as_mut() {
            v(&init);
        }
        if let Some(property) = self.violated(&init) {
            let path = vec![(init.cs_states(), None)];
            return (Outcome::Violated { property, path }, stats);
        }
        on_stack.insert(fp);
        let todo = self.expand(&init, &on_stack);
        let mut stack = vec![Frame {
            state: init,
            fp,
            todo,
            taken: None,
        }];
        while let Some(top) = stack.last_mut() {
            let Some((act, next, fp)) = top.todo.pop() else {
                on_stack.remove(&top.fp);
                stack.pop();
                continue;
            };
            stats.generated += 1;
            if !visited.insert(fp) {
                continue;
            }
            stats.unique += 1;
            top.taken = Some(act);
            if let Some(v) = self.visit.as_mut() {
                v(&next);
            }
            if let Some(property) = self.violated(&next) {
                let mut path: Path = stack
                    .iter()
                    .map(|f| {
                        let a = f.taken.expect("every frame below the top took a step");
                        (f.state.cs_states(), Some(f.state.describe(a)))
                    })
                    .collect();
                path.push((next.cs_states(), None));
                return (Outcome::Violated { property, path }, stats);
            }
            if self.max_states.is_some_and(|m| stats.generated >= m) {
                return (Outcome::Bounded, stats);
            }
            on_stack.insert(fp);
            let todo = self.expand(&next, &on_stack);
            stack.push(Frame {
                state: next,
                fp,
                todo,
                taken: None,
            });
            stats.max_depth = stats.max_depth.max(stack.len());
        }
        (Outcome::Complete, stats)
    }
}
