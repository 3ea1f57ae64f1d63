//! The checker's own explorer: a depth-first search over the model's states with a set of
//! 128-bit state fingerprints, optionally with the partial-order reduction described in the
//! module doc of [`crate::check`].
//!
//! Representation. Every distinct local state of a process (its object and client) is stored
//! once, in an arena, and a global state names its processes by their arena index; so a
//! global state is a fixed array of indices plus the messages in flight, and copying it
//! allocates once. A local step (a process taking one message, or its client step) is
//! computed once per local state and input and remembered: the search mostly replays
//! remembered steps instead of cloning and running objects.

use super::{deadlocked, Limit, Network, Outcome, Path, PathStep, Progress, MAX_CHECK_PROCESSES};
use crate::config::Instance;
use crate::cs::{CsObject, CsState, Outbox, Sequence};
use crate::error::CallError;
use crate::id::ProcessId;
use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::time::{Duration, Instant};

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
struct Local<A> {
    node: Node<A>,
    /// Its invariants hold.
    ok: bool,
    cs: CsState,
    pending: bool,
    armed: bool,
}

/// A remembered local step: the local state it leads to and its sends (a range of
/// [`World::sends`]).
#[derive(Clone, Copy)]
struct Step {
    to: u32,
    from: u32,
    len: u32,
}

/// A local step's input: a local state and the message it takes with its sender (`None`:
/// its client step).
type StepKey<A> = (u32, Option<(u16, <A as CsObject>::Msg)>);

/// Every local state met so far and every local step computed so far.
struct World<A: CsObject> {
    locals: Vec<Local<A>>,
    ids: HashMap<u128, u32, BuildHasherDefault<IdHasher>>,
    steps: HashMap<StepKey<A>, Step, BuildHasherDefault<Fingerprinter>>,
    sends: Vec<(u8, A::Msg)>,
    sequences: usize,
    network: Network,
}

impl<A: CsObject> World<A> {
    fn intern(&mut self, node: Node<A>) -> u32 {
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
    fn step(&mut self, id: u32, input: Option<(u16, A::Msg)>) -> Step {
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

    fn sends(&self, st: Step) -> &[(u8, A::Msg)] {
        &self.sends[st.from as usize..(st.from + st.len) as usize]
    }

    /// Bytes its tables hold: the arena, its index, the remembered steps and their sends
    /// (what a local state allocates on the heap is not counted).
    fn bytes(&self) -> usize {
        self.locals.capacity() * std::mem::size_of::<Local<A>>()
            + table_bytes::<(u128, u32)>(self.ids.capacity())
            + table_bytes::<(StepKey<A>, Step)>(self.steps.capacity())
            + self.sends.capacity() * std::mem::size_of::<(u8, A::Msg)>()
    }

    /// Bytes its tables may allocate on top of [`World::bytes`] before the next state is
    /// expanded: the growth step of every table within [`SLACK`] entries of growing.
    fn growth(&self) -> usize {
        vec_growth::<Local<A>>(self.locals.len(), self.locals.capacity(), SLACK)
            + table_growth::<(u128, u32)>(self.ids.len(), self.ids.capacity(), SLACK)
            + table_growth::<(StepKey<A>, Step)>(self.steps.len(), self.steps.capacity(), SLACK)
            + vec_growth::<(u8, A::Msg)>(self.sends.len(), self.sends.capacity(), 4 * SLACK)
    }
}

/// Entries a table may gain while one state is expanded (its successors' local states and
/// steps, and the solo explorations, up to [`SOLO_BUDGET`] steps per process), counted
/// generously.
const SLACK: usize = 2048;

/// The bytes a vector of `len` of `cap` `T`s allocates when it grows within `slack` more
/// entries: its new buffer, twice the old (a large buffer is moved by `mremap`, so the old
/// one is not held beside it).
fn vec_growth<T>(len: usize, cap: usize, slack: usize) -> usize {
    if len + slack > cap {
        cap.max(slack) * std::mem::size_of::<T>()
    } else {
        0
    }
}

/// The bytes a hash table of `len` of `capacity` entries allocates when it grows within
/// `slack` more entries: its new table, twice the old, held beside the old while the
/// entries move.
fn table_growth<T>(len: usize, capacity: usize, slack: usize) -> usize {
    if len + slack > capacity {
        table_bytes::<T>(2 * capacity.max(slack))
    } else {
        0
    }
}

/// Bytes of a hash table holding up to `capacity` entries of type `T` without growing: its
/// buckets (the table keeps at most 7 of every 8 full) with one control byte each.
fn table_bytes<T>(capacity: usize) -> usize {
    (capacity * 8 / 7 + 1) * (std::mem::size_of::<T>() + 1)
}

/// How far one process can go on its own (see [`Explorer::solo`]).
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

/// The most links an instance has (self-links included).
const MAX_LINKS: usize = MAX_CHECK_PROCESSES * MAX_CHECK_PROCESSES;

/// A global state: every process, by its index in the arena, and every FIFO link
/// `(src, dst)`, self-links included, at index `src * n + dst`.
#[derive(Clone, Debug)]
pub(super) struct Sys<A: CsObject> {
    locals: [u32; MAX_CHECK_PROCESSES],
    n: u8,
    /// Every message in flight with its link `src * n + dst`, sorted by link: on FIFO links
    /// stably (each link's messages in FIFO order), otherwise by link and message (a link
    /// holds a multiset, on a duplicating network a set). One vector rather than n² queues:
    /// a step copies one allocation.
    msgs: Vec<(u16, A::Msg)>,
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
    fn owner(self) -> usize {
        match self {
            Act::Step(p) => p,
            Act::Deliver { dst, .. } => dst,
        }
    }
}

/// Where each link's messages start in [`Sys::msgs`] (link `l` spans `start[l]..start[l+1]`).
struct Links {
    start: [u16; MAX_LINKS + 1],
}

impl<A: CsObject> Sys<A> {
    fn n(&self) -> usize {
        usize::from(self.n)
    }

    fn links(&self) -> Links {
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
    fn enabled(&self, w: &World<A>) -> Vec<Act> {
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

    fn local<'w>(&self, w: &'w World<A>, p: usize) -> &'w Local<A> {
        &w.locals[self.locals[p] as usize]
    }

    /// Whether nothing can happen: no client step left to take and no message in flight;
    /// on a duplicating network, where a delivered message stays in flight, no delivery
    /// that changes its receiver or sends a message not in flight yet.
    fn quiet(&self, w: &World<A>) -> bool {
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

    fn cs_states(&self, w: &World<A>) -> Vec<CsState> {
        (0..self.n()).map(|p| self.local(w, p).cs).collect()
    }

    /// The published states as a bit set: bit `p` set when process `p` is in the CS.
    fn cs_mask(&self, w: &World<A>) -> usize {
        (0..self.n())
            .filter(|&p| self.local(w, p).cs == CsState::InCs)
            .fold(0, |m, p| m | 1 << p)
    }

    /// The step `act` describes, read before it is applied.
    fn describe(&self, act: Act) -> PathStep {
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
    fn apply(&self, w: &mut World<A>, act: Act) -> Sys<A> {
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

/// A global state as the search's callback sees it.
#[cfg_attr(not(test), allow(dead_code))]
pub(super) struct View<'a, A: CsObject> {
    sys: &'a Sys<A>,
    world: &'a World<A>,
}

impl<A: CsObject> View<'_, A> {
    /// The observation the reduction preserves: every process's published state and whether
    /// its invariants hold.
    #[cfg(test)]
    pub(super) fn observation(&self) -> Vec<(CsState, bool)> {
        (0..self.sys.n())
            .map(|p| {
                let l = self.sys.local(self.world, p);
                (l.cs, l.ok)
            })
            .collect()
    }

    /// Whether nothing is enabled.
    #[cfg(test)]
    pub(super) fn quiet(&self) -> bool {
        self.sys.quiet(self.world)
    }

    /// Every process's published state.
    #[cfg(test)]
    pub(super) fn cs_states(&self) -> Vec<CsState> {
        self.sys.cs_states(self.world)
    }
}

/// Per process: whether moving it into the CS (`enter`) or out of it (`leave`) can never
/// repair a broken bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Harmless {
    pub(super) enter: bool,
    pub(super) leave: bool,
}

impl Harmless {
    /// Whether moving into `to` is harmless.
    pub(super) fn allows(self, to: CsState) -> bool {
        match to {
            CsState::InCs => self.enter,
            CsState::OutCs => self.leave,
        }
    }
}

/// Per process `p`: whether `p` moving into the CS, or out of it, can never repair a broken
/// bound. Such a move changes |CS_i| only for the processes `i` whose closed neighbourhood
/// holds `p`: entering raises it, which repairs nothing when l_i = 0 (only an upper bound can
/// be broken, and a larger count breaks it still); leaving lowers it, which repairs nothing
/// when k_i ≥ |N_i|+1 (the upper bound cannot be broken). So LMUTIN's exits, LMUTEX's entries,
/// and every move when l = 0 and k = |N_i|+1, are harmless.
pub(super) fn harmless_moves(instance: &Instance) -> Vec<Harmless> {
    let t = instance.topology();
    t.processes()
        .map(|p| {
            let around = t.closed(p);
            Harmless {
                enter: around.iter().all(|&i| instance.bounds(i).l == 0),
                leave: around
                    .iter()
                    .all(|&i| instance.bounds(i).k >= t.closed(i).len()),
            }
        })
        .collect()
}

/// A 128-bit state fingerprint: two independent multiply-rotate lanes over the words the
/// derived `Hash` writes, each finished with a 64-bit mixer. (Also the hasher of the step
/// memo, through [`Hasher::finish`].)
#[derive(Default)]
pub(super) struct Fingerprinter {
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

/// Tables the visited set is split into.
const SHARDS: usize = 256;

/// The visited fingerprints, split by their top 8 bits into [`SHARDS`] tables. A table
/// doubles when it is full and holds its old and new buckets while it moves; split, one
/// growth holds one table three times over instead of the whole set, so the peak stays
/// within a few percent of the set's size.
struct Visited {
    shards: Vec<FpSet>,
    /// Bytes of the tables, kept up to date.
    bytes: usize,
    /// The largest table's capacity.
    largest: usize,
}

impl Visited {
    fn new() -> Self {
        let shards: Vec<FpSet> = (0..SHARDS).map(|_| FpSet::default()).collect();
        Visited {
            bytes: shards
                .iter()
                .map(|t| table_bytes::<u128>(t.capacity()))
                .sum(),
            largest: 0,
            shards,
        }
    }

    fn shard(fp: u128) -> usize {
        (fp >> 120) as usize
    }

    /// Inserts `fp`; `false` if it was there.
    fn insert(&mut self, fp: u128) -> bool {
        let t = &mut self.shards[Self::shard(fp)];
        let before = t.capacity();
        let new = t.insert(fp);
        if t.capacity() != before {
            self.bytes =
                self.bytes + table_bytes::<u128>(t.capacity()) - table_bytes::<u128>(before);
            self.largest = self.largest.max(t.capacity());
        }
        new
    }

    /// Bytes of the tables.
    fn bytes(&self) -> usize {
        self.bytes
    }

    /// Bytes the next growth of a table may allocate beside it (its new table): at most
    /// twice the largest table.
    fn growth(&self) -> usize {
        table_bytes::<u128>(2 * self.largest.max(16))
    }
}

/// New states between two readings of the resident memory while it grows slowly.
const RESIDENT_EVERY: usize = 1 << 12;

/// The process's resident memory in bytes (`VmRSS` in `/proc/self/status`; `None` where it
/// cannot be read).
fn resident_bytes() -> Option<usize> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let line = status.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kib: usize = line["VmRSS:".len()..]
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    kib.checked_mul(1024)
}

/// The depth-first stack.
type Stack<A> = Vec<Frame<A>>;

/// Bytes the messages in flight of `s` take on the heap.
fn msgs_heap<A: CsObject>(s: &Sys<A>) -> usize {
    s.msgs.capacity() * std::mem::size_of::<(u16, A::Msg)>()
}

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

/// A callback that receives a progress report every 2^16 generated states.
pub(super) type ProgressFn<'a> = &'a mut dyn FnMut(&Progress);

/// A callback that sees every state a search reaches.
pub(super) type Visit<'a, A> = &'a mut dyn FnMut(&View<'_, A>);

/// Remembered solo explorations before the memo is emptied.
const SOLO_MEMO: usize = 1 << 20;

/// The explorer. `reduce` turns the partial-order reduction on; `visit` sees every state
/// the search reaches (tests compare what the two searches see).
pub(super) struct Explorer<'a, A: CsObject> {
    instance: &'a Instance,
    sequences: usize,
    reduce: bool,
    max_states: Option<usize>,
    /// Stop before the tables would grow past this many bytes.
    max_memory: Option<usize>,
    /// With [`crate::check::CheckConfig::count_resident`]: the process's resident bytes
    /// when the search started, and the growth since then not counted by the tables, as
    /// last read.
    resident: Option<(usize, usize)>,
    /// New states between two readings of the resident memory, and how many are left
    /// before the next: 4,096 while it grows slowly, down to 1 while it grows by more than
    /// 1/64 of the budget between readings.
    resident_every: (usize, usize),
    /// Stop once this much time has passed since this instant.
    deadline: Option<(Instant, Duration)>,
    /// The links' delivery discipline.
    network: Network,
    /// Bytes the frames on the depth-first stack hold on the heap: their successor lists
    /// and the messages in flight of their states and successors.
    stack_heap: usize,
    progress: Option<ProgressFn<'a>>,
    visit: Option<Visit<'a, A>>,
    /// Per process: the processes it may send to (its closed neighbourhood), a bit set.
    peers: Vec<u64>,
    solo_memo: HashMap<u128, Solo, BuildHasherDefault<IdHasher>>,
    /// Per process: whether a move into each published state is harmless (see
    /// [`harmless_moves`]).
    harmless: Vec<Harmless>,
    /// Per set of processes in the CS (a bit set): whether a bound fails.
    unsafe_mask: Vec<bool>,
    /// Per set of processes in the CS: whether a quiet state in which every process is
    /// blocked is a deadlock (computed when first needed).
    deadlock_mask: Vec<Option<bool>>,
}

impl<'a, A: CsObject> Explorer<'a, A> {
    /// An explorer of `instance` with `sequences` client sequences per process.
    pub(super) fn new(
        instance: &'a Instance,
        sequences: usize,
        reduce: bool,
        max_states: Option<usize>,
        visit: Option<Visit<'a, A>>,
    ) -> Self {
        let topology = instance.topology();
        let n = topology.len();
        let peers = topology
            .processes()
            .map(|p| topology.closed(p).iter().fold(0, |m, q| m | 1 << q.index()))
            .collect();
        let states = |mask: usize| -> Vec<CsState> {
            (0..n)
                .map(|p| {
                    if mask & (1 << p) != 0 {
                        CsState::InCs
                    } else {
                        CsState::OutCs
                    }
                })
                .collect()
        };
        let configs = if n <= MAX_CHECK_PROCESSES { 1 << n } else { 0 };
        Explorer {
            instance,
            sequences,
            reduce,
            max_states,
            max_memory: None,
            resident: None,
            resident_every: (RESIDENT_EVERY, RESIDENT_EVERY),
            deadline: None,
            network: Network::Fifo,
            stack_heap: 0,
            progress: None,
            visit,
            peers,
            solo_memo: Default::default(),
            harmless: harmless_moves(instance),
            unsafe_mask: (0..configs)
                .map(|m| !instance.violations(&states(m)).is_empty())
                .collect(),
            deadlock_mask: vec![None; configs],
        }
    }

    /// Stops the search (a bounded check) before its tables would hold more than `bytes`
    /// bytes; see [`Explorer::over_budget`].
    pub(super) fn with_memory_budget(mut self, bytes: Option<usize>, resident: bool) -> Self {
        self.max_memory = bytes;
        self.resident = if resident && bytes.is_some() {
            resident_bytes().map(|start| (start, 0))
        } else {
            None
        };
        self
    }

    /// Counts one new state; when it is time, reads the process's resident memory again
    /// and keeps its growth beyond `counted` (see [`Explorer::resident_every`]).
    fn measure_resident(&mut self, counted: usize) {
        let (every, left) = &mut self.resident_every;
        *left -= 1;
        if *left > 0 {
            return;
        }
        if let (Some((start, extra)), Some(now)) = (self.resident.as_mut(), resident_bytes()) {
            let before = *extra;
            *extra = now.saturating_sub(*start).saturating_sub(counted);
            let fast = extra.saturating_sub(before) > self.max_memory.unwrap_or(0) / 64;
            *every = if fast {
                (*every / 4).max(1)
            } else {
                (*every * 2).min(RESIDENT_EVERY)
            };
        }
        *left = *every;
    }

    /// Stops the search (a bounded check, [`Limit::Time`]) once `budget` has passed since
    /// `start`.
    pub(super) fn with_deadline(mut self, deadline: Option<(Instant, Duration)>) -> Self {
        self.deadline = deadline;
        self
    }

    /// Delivers messages as `network` does.
    pub(super) fn with_network(mut self, network: Network) -> Self {
        self.network = network;
        self
    }

    /// Sends a progress report to the callback, if any.
    pub(super) fn with_progress(mut self, progress: Option<ProgressFn<'a>>) -> Self {
        self.progress = progress;
        self
    }

    /// Bytes the search holds, by the capacity of every table: the visited and on-stack
    /// fingerprint sets, the arena with its remembered steps, the solo memo, and the
    /// depth-first stack with what its frames hold on the heap (what a local state or a
    /// message allocates on the heap is not counted).
    fn bytes(&self, w: &World<A>, visited: &Visited, on_stack: &FpSet, stack: &Stack<A>) -> usize {
        visited.bytes()
            + table_bytes::<u128>(on_stack.capacity())
            + table_bytes::<(u128, Solo)>(self.solo_memo.capacity())
            + stack.capacity() * std::mem::size_of::<Frame<A>>()
            + self.stack_heap
            + w.bytes()
    }

    /// Bytes the search may allocate on top of [`Explorer::bytes`] before the next check:
    /// the growth step of every table close to growing, and of the largest visited table.
    fn growth(&self, w: &World<A>, visited: &Visited, on_stack: &FpSet, stack: &Stack<A>) -> usize {
        visited.growth()
            + table_growth::<u128>(on_stack.len(), on_stack.capacity(), 1)
            + table_growth::<(u128, Solo)>(
                self.solo_memo.len(),
                self.solo_memo.capacity(),
                MAX_CHECK_PROCESSES,
            )
            + vec_growth::<Frame<A>>(stack.len(), stack.capacity(), 1)
            + w.growth()
    }

    /// Whether the search could pass the memory budget before the next check: what it holds
    /// and what its tables' next growth steps may allocate. Checked before every state is
    /// expanded.
    fn over_budget(
        &self,
        w: &World<A>,
        visited: &Visited,
        on_stack: &FpSet,
        stack: &Stack<A>,
    ) -> bool {
        self.max_memory.is_some_and(|budget| {
            self.bytes(w, visited, on_stack, stack)
                + self.growth(w, visited, on_stack, stack)
                + self.resident.map_or(0, |(_, extra)| extra)
                > budget
        })
    }

    /// Whether the time budget has run out.
    fn out_of_time(&self) -> bool {
        self.deadline
            .is_some_and(|(start, budget)| start.elapsed() >= budget)
    }

    /// Bytes a frame holds on the heap (see [`Explorer::stack_heap`]).
    fn frame_heap(f: &Frame<A>) -> usize {
        f.todo.capacity() * std::mem::size_of::<(Act, Sys<A>, u128)>()
            + msgs_heap(&f.state)
            + f.todo.iter().map(|(_, t, _)| msgs_heap(t)).sum::<usize>()
    }

    /// Whether a step of process `p` from local state `before` (in a state where every
    /// property holds) to `after` may *improve* the observation: move `p` into a published
    /// state from which it could repair a broken bound, or make its failing invariants hold.
    /// The reduction treats only such steps as visible (see the module doc of
    /// [`crate::check`]).
    fn improving(&self, p: usize, before: &Local<A>, after: &Local<A>) -> bool {
        (after.cs != before.cs && !self.harmless[p].allows(after.cs)) || (after.ok && !before.ok)
    }

    /// Every behaviour of process `y` running alone from `s`: no other process acts, so `y`
    /// sees its incoming links as they are (minus what it takes) plus its own self-sends.
    /// Collects the processes it can send to; each behaviour is deterministic in `y`'s local
    /// state and the messages it takes, so this is exact up to the budget. Remembered: it
    /// depends only on `y`'s local state and its incoming links.
    fn solo(&mut self, w: &mut World<A>, s: &Sys<A>, links: &Links, y: usize) -> Solo {
        let n = s.n();
        let incoming = |x: usize| {
            let l = x * n + y;
            &s.msgs[usize::from(links.start[l])..usize::from(links.start[l + 1])]
        };
        let mut h = Fingerprinter::default();
        h.write_usize(y);
        h.write_u32(s.locals[y]);
        for x in 0..n {
            incoming(x).hash(&mut h);
        }
        let key = h.finish128();
        if let Some(&r) = self.solo_memo.get(&key) {
            return r;
        }
        if self.solo_memo.len() >= SOLO_MEMO {
            self.solo_memo.clear();
        }
        let inbox: Vec<VecDeque<A::Msg>> = (0..n)
            .map(|x| incoming(x).iter().map(|(_, m)| m.clone()).collect())
            .collect();
        let r = Self::solo_explore(w, s.locals[y], inbox, y);
        self.solo_memo.insert(key, r);
        r
    }

    fn solo_explore(w: &mut World<A>, id: u32, inbox: Vec<VecDeque<A::Msg>>, y: usize) -> Solo {
        let n = inbox.len();
        let mut stack = vec![(id, inbox)];
        let (mut to_mask, mut visible, mut budget) = (0u64, false, SOLO_BUDGET);
        while let Some((id, inbox)) = stack.pop() {
            let armed = w.locals[id as usize].armed;
            let moves = (armed.then_some(None))
                .into_iter()
                .chain((0..n).filter(|&x| !inbox[x].is_empty()).map(Some));
            for mv in moves {
                if budget == 0 {
                    return Solo::Unknown;
                }
                budget -= 1;
                let mut inbox = inbox.clone();
                let msg = mv.map(|x| (x as u16, inbox[x].pop_front().expect("non-empty")));
                let st = w.step(id, msg);
                let (before, after) = (&w.locals[id as usize], &w.locals[st.to as usize]);
                visible = visible || after.cs != before.cs || after.ok != before.ok;
                for (to, m) in w.sends(st) {
                    let to = usize::from(*to);
                    if to == y {
                        inbox[y].push_back(m.clone());
                    } else {
                        to_mask |= 1 << to;
                    }
                }
                stack.push((st.to, inbox));
            }
        }
        Solo::Sends {
            to: to_mask,
            visible,
        }
    }

    /// The smallest set of processes containing `p` whose enabled actions form a persistent
    /// set, given what every process can do alone (`solo`); see the module doc of
    /// [`crate::check`] for the argument. `nonempty[x]` has bit `y` set when link `(y, x)`
    /// holds a message. Returns a bit set.
    ///
    /// With `visible` (the set's enabled actions include an improving one, see
    /// [`Explorer::improving`]) the set also takes every process that could change its
    /// observation in any way before the set's processes act.
    fn persistent(
        &self,
        n: usize,
        nonempty: &[u64],
        p: usize,
        solo: &[Solo],
        visible: bool,
    ) -> u64 {
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
                            && (wild & (1 << z) != 0 && self.peers[z] & (1 << y) != 0
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
                    _ => (self.peers[y], true),
                };
                let fills = (0..n).any(|x| c & may & (1 << x) != 0 && nonempty[x] & (1 << y) == 0);
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

    /// The first property `s` fails, if any.
    fn violated(&mut self, w: &World<A>, s: &Sys<A>) -> Option<&'static str> {
        let mask = s.cs_mask(w);
        if self.unsafe_mask.get(mask).copied().unwrap_or(false) {
            Some("safety")
        } else if !(0..s.n()).all(|p| s.local(w, p).ok) {
            Some("invariants")
        } else if (0..s.n()).all(|p| s.local(w, p).pending) && s.quiet(w) && {
            let instance = self.instance;
            let states = s.cs_states(w);
            *self.deadlock_mask[mask].get_or_insert_with(|| deadlocked(instance, &states))
        } {
            Some("no deadlock")
        } else {
            None
        }
    }

    /// The actions to explore from `s` and their successors: all enabled actions, or with the
    /// reduction a persistent subset that closes no cycle on the stack and either improves no
    /// observation or meets the visibility condition.
    fn expand(
        &mut self,
        w: &mut World<A>,
        s: &Sys<A>,
        on_stack: &FpSet,
    ) -> Vec<(Act, Sys<A>, u128)> {
        let enabled = s.enabled(w);
        let succ = |w: &mut World<A>, a: Act| {
            let t = s.apply(w, a);
            let fp = fingerprint(&t);
            (a, t, fp)
        };
        if !self.reduce || enabled.len() <= 1 {
            return enabled.into_iter().map(|a| succ(w, a)).collect();
        }
        // candidate persistent sets: from each process with an enabled action, the closure
        // without the visibility condition first; if it selects an improving action, the
        // closure with it. The smallest candidate whose successors are off the stack wins.
        let n = s.n();
        let links = s.links();
        let mut nonempty = [0u64; MAX_CHECK_PROCESSES];
        for (x, ne) in nonempty.iter_mut().enumerate().take(n) {
            for y in 0..n {
                let l = y * n + x;
                if links.start[l] != links.start[l + 1] {
                    *ne |= 1 << y;
                }
            }
        }
        let solo: Vec<Solo> = (0..n).map(|y| self.solo(w, s, &links, y)).collect();
        let size = |c: u64| enabled.iter().filter(|a| c & (1 << a.owner()) != 0).count();
        let mut order: Vec<(usize, u64)> = (0..n)
            .filter(|&p| enabled.iter().any(|a| a.owner() == p))
            .map(|p| (p, self.persistent(n, &nonempty, p, &solo, false)))
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
                        let (_, t, fp) = cache[i].get_or_insert_with(|| succ(w, *a));
                        let p = a.owner();
                        visible |= self.improving(p, s.local(w, p), t.local(w, p));
                        cycle |= on_stack.contains(fp);
                    }
                }
                if cycle {
                    break;
                }
                if visible && !with_visibility {
                    with_visibility = true;
                    c = self.persistent(n, &nonempty, p, &solo, true);
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
            .map(|(i, a)| cache[i].take().unwrap_or_else(|| succ(w, *a)))
            .collect()
    }

    /// Runs the search from the system `procs` (process `i` at index `i`).
    pub(super) fn run(mut self, procs: Vec<A>) -> (Outcome, Stats) {
        let n = procs.len();
        assert!(n <= MAX_CHECK_PROCESSES, "checked by the caller");
        let mut w = World {
            locals: Vec::new(),
            ids: Default::default(),
            steps: Default::default(),
            sends: Vec::new(),
            sequences: self.sequences,
            network: self.network,
        };
        let mut locals = [0u32; MAX_CHECK_PROCESSES];
        for (i, obj) in procs.into_iter().enumerate() {
            locals[i] = w.intern(Node {
                obj,
                started: 0,
                armed: self.sequences > 0,
                call_error: None,
                peers: self.peers[i],
                stray: false,
            });
        }
        let init = Sys {
            locals,
            n: n as u8,
            msgs: Vec::new(),
        };
        let mut visited = Visited::new();
        let mut on_stack = FpSet::default();
        let mut stats = Stats {
            unique: 1,
            generated: 1,
            max_depth: 1,
        };
        let fp = fingerprint(&init);
        visited.insert(fp);
        if let Some(v) = self.visit.as_mut() {
            v(&View {
                sys: &init,
                world: &w,
            });
        }
        if let Some(property) = self.violated(&w, &init) {
            let path = vec![(init.cs_states(&w), None)];
            return (Outcome::Violated { property, path }, stats);
        }
        on_stack.insert(fp);
        let todo = self.expand(&mut w, &init, &on_stack);
        let mut stack: Stack<A> = Vec::new();
        let frame = Frame {
            state: init,
            fp,
            todo,
            taken: None,
        };
        self.stack_heap += Self::frame_heap(&frame);
        stack.push(frame);
        while let Some(top) = stack.last_mut() {
            let Some((act, next, fp)) = top.todo.pop() else {
                on_stack.remove(&top.fp);
                self.stack_heap -= Self::frame_heap(top);
                stack.pop();
                continue;
            };
            self.stack_heap -= msgs_heap(&next);
            stats.generated += 1;
            if stats.generated % (1 << 16) == 0 && self.progress.is_some() {
                let memory = self.bytes(&w, &visited, &on_stack, &stack);
                if let Some(report) = self.progress.as_mut() {
                    report(&Progress {
                        states: stats.unique,
                        generated: stats.generated,
                        max_depth: stats.max_depth,
                        memory,
                    });
                }
            }
            if stats.generated % (1 << 10) == 0 && self.out_of_time() {
                return (Outcome::Bounded(Limit::Time), stats);
            }
            let Some(top) = stack.last_mut() else {
                unreachable!("the loop holds a frame")
            };
            if !visited.insert(fp) {
                continue;
            }
            stats.unique += 1;
            top.taken = Some(act);
            if let Some(v) = self.visit.as_mut() {
                v(&View {
                    sys: &next,
                    world: &w,
                });
            }
            if let Some(property) = self.violated(&w, &next) {
                let mut path: Path = stack
                    .iter()
                    .map(|f| {
                        let a = f.taken.expect("every frame below the top took a step");
                        (f.state.cs_states(&w), Some(f.state.describe(a)))
                    })
                    .collect();
                path.push((next.cs_states(&w), None));
                return (Outcome::Violated { property, path }, stats);
            }
            if self.max_states.is_some_and(|m| stats.generated >= m) {
                return (Outcome::Bounded(Limit::States), stats);
            }
            if self.resident.is_some() {
                let counted = self.bytes(&w, &visited, &on_stack, &stack);
                self.measure_resident(counted);
            }
            if self.over_budget(&w, &visited, &on_stack, &stack) {
                return (Outcome::Bounded(Limit::Memory), stats);
            }
            on_stack.insert(fp);
            let todo = self.expand(&mut w, &next, &on_stack);
            let frame = Frame {
                state: next,
                fp,
                todo,
                taken: None,
            };
            self.stack_heap += Self::frame_heap(&frame);
            stack.push(frame);
            stats.max_depth = stats.max_depth.max(stack.len());
        }
        (Outcome::Complete, stats)
    }
}
