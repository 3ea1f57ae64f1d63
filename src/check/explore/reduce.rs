//! The partial-order reduction (see the module doc of [`check`](mod@crate::check)): which
//! moves are harmless, what a process can do alone, the persistent sets, and the successors a
//! state is expanded into.

use super::model::{Act, Links, Local, Sys, World};
use super::tables::{fingerprint, Fingerprinter, FpSet};
use super::{Explorer, Stats};
use crate::check::{Network, MAX_CHECK_PROCESSES};
use crate::config::Instance;
use crate::cs::{CsObject, CsState};
use std::collections::VecDeque;
use std::hash::{Hash, Hasher};

/// Per process: whether moving it into the CS (`enter`) or out of it (`leave`) can never
/// repair a broken bound.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::check) struct Harmless {
    pub(in crate::check) enter: bool,
    pub(in crate::check) leave: bool,
}

impl Harmless {
    /// Whether moving into `to` is harmless.
    pub(in crate::check) fn allows(self, to: CsState) -> bool {
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
pub(in crate::check) fn harmless_moves(instance: &Instance) -> Vec<Harmless> {
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
pub(super) const SOLO_BUDGET: usize = 64;

/// Remembered solo explorations before the memo is emptied.
const SOLO_MEMO: usize = 1 << 20;

impl<'a, A: CsObject> Explorer<'a, A> {
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
        let key = alone_key(s, links, y, None);
        if let Some(&r) = self.solo_memo.get(&key) {
            return r;
        }
        if self.solo_memo.len() >= SOLO_MEMO {
            self.solo_memo.clear();
        }
        let r = Self::solo_explore(w, s.locals[y], inbox(s, links, y), y);
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
                to_mask |= route(w.sends(st), y, &mut inbox);
                stack.push((st.to, inbox));
            }
        }
        Solo::Sends {
            to: to_mask,
            visible,
        }
    }

    /// What an outside process `y` may do before the selected set acts: the processes it may
    /// send to (a bit set) and whether it may change its observation. Its solo behaviour,
    /// unless it is `wild` (or its solo budget ran out): then any neighbour, and maybe.
    fn may_send(&self, y: usize, solo: &[Solo], wild: u64) -> (u64, bool) {
        match solo[y] {
            Solo::Sends { to, visible } if wild & (1 << y) == 0 => (to, visible),
            _ => (self.peers[y], true),
        }
    }

    /// The processes of `outside` (a bit set) that may do something not seen alone, so may
    /// send to any neighbour: those of `fed` (within `outside`), those whose solo budget ran
    /// out, and those another process of `outside` may send to (wildness spreads along the
    /// peers of wild processes).
    fn wild(&self, n: usize, outside: u64, solo: &[Solo], fed: u64) -> u64 {
        let mut wild = fed & outside;
        for (y, s) in solo.iter().enumerate().take(n) {
            if outside & (1 << y) != 0 && *s == Solo::Unknown {
                wild |= 1 << y;
            }
        }
        loop {
            // every process an outside process may send to, itself aside
            let mut reached = 0u64;
            for z in (0..n).filter(|&z| outside & (1 << z) != 0) {
                reached |= self.may_send(z, solo, wild).0 & !(1 << z);
            }
            let grown = wild | (reached & outside);
            if grown == wild {
                return wild;
            }
            wild = grown;
        }
    }

    /// What `p` can do before the delivery of the head of link `(x, p)`, alone: see
    /// [`Commute`]. Remembered: it depends only on `p`'s local state, `x` and the links into
    /// `p`.
    fn commute(
        &mut self,
        w: &mut World<A>,
        s: &Sys<A>,
        links: &Links,
        p: usize,
        x: usize,
    ) -> Commute {
        let key = alone_key(s, links, p, Some(x));
        if let Some(&r) = self.commute_memo.get(&key) {
            return r;
        }
        if self.commute_memo.len() >= SOLO_MEMO {
            self.commute_memo.clear();
        }
        let r = self.commute_explore(w, s.locals[p], inbox(s, links, p), p, x);
        self.commute_memo.insert(key, r);
        r
    }

    /// The exploration of [`Explorer::commute`]: `p` alone from local state `id` with
    /// `inbox` (per link into it), never taking from link `x`, whose head is the delivery.
    fn commute_explore(
        &self,
        w: &mut World<A>,
        id: u32,
        inbox: Vec<VecDeque<A::Msg>>,
        p: usize,
        x: usize,
    ) -> Commute {
        let n = inbox.len();
        let fail = Commute {
            ok: false,
            sends: 0,
            drains: 0,
        };
        let Some(head) = inbox[x].front().cloned() else {
            return fail;
        };
        let t = Some((x as u16, head));
        // links into `p` from others, empty from the start
        let mut drains = (0..n)
            .filter(|&y| y != p && inbox[y].is_empty())
            .fold(0u64, |m, y| m | 1 << y);
        let mut sends = 0u64;
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![(id, inbox)];
        let mut budget = SOLO_BUDGET;
        while let Some((id, inbox)) = stack.pop() {
            // the delivery from here must not improve the observation
            let after_t = w.step(id, t.clone());
            if self.improving(p, &w.locals[id as usize], &w.locals[after_t.to as usize]) {
                return fail;
            }
            let armed = w.locals[id as usize].armed;
            let moves: Vec<Option<usize>> = (armed.then_some(None))
                .into_iter()
                .chain((0..n).filter(|&y| y != x && !inbox[y].is_empty()).map(Some))
                .collect();
            for mv in moves {
                if budget == 0 {
                    return fail;
                }
                budget -= 1;
                let mut inbox = inbox.clone();
                let input = mv.map(|y| (y as u16, inbox[y].pop_front().expect("non-empty")));
                if let Some(y) = mv
                    && y != p
                    && inbox[y].is_empty()
                {
                    drains |= 1 << y;
                }
                // `b` then the delivery, against the delivery then `b`
                let b = w.step(id, input.clone());
                if mv.is_none() && !w.locals[after_t.to as usize].armed {
                    return fail;
                }
                let bt = w.step(b.to, t.clone());
                let tb = w.step(after_t.to, input);
                if bt.to != tb.to {
                    return fail;
                }
                let same = (0..n).all(|z| {
                    let one = on_link(w.sends(b), z).chain(on_link(w.sends(bt), z));
                    let two = on_link(w.sends(after_t), z).chain(on_link(w.sends(tb), z));
                    one.eq(two)
                });
                if !same {
                    return fail;
                }
                sends |= route(w.sends(b), p, &mut inbox);
                if seen.insert((b.to, fingerprint(&inbox))) {
                    stack.push((b.to, inbox));
                }
            }
        }
        Commute {
            ok: true,
            sends,
            drains,
        }
    }

    /// The processes `C` (a bit set, without `p`) such that the delivery of the head of link
    /// `(x, p)` (given as the pair `(p, x)`) with every enabled action of `C` is a persistent
    /// set of `s`: the *commuting delivery* of the module doc of [`crate::check`]. `None` when there is none: `p`'s
    /// other actions do not all commute with the delivery, or the delivery may improve the
    /// observation, or `p` may send into an empty link into `C`.
    ///
    /// `C` grows from nothing: a process outside `C` and other than `p` that may send to `p`
    /// joins when its link into `p` is empty or `p` may empty it (the message `p` would take
    /// next is then unknown), and one that may fill an empty link into `C` joins (as in
    /// [`Explorer::persistent`]). What outside processes may send is their solo behaviour;
    /// one that `p` may send to is wild, like one fed by another outside process.
    fn commuting_delivery(
        &mut self,
        w: &mut World<A>,
        s: &Sys<A>,
        links: &Links,
        nonempty: &[u64],
        solo: &[Solo],
        (p, x): (usize, usize),
    ) -> Option<u64> {
        let n = s.n();
        let all = (1u64 << n) - 1;
        let alone = self.commute(w, s, links, p, x);
        if !alone.ok {
            return None;
        }
        let mut c = 0u64;
        loop {
            let outside = all & !c & !(1 << p);
            let wild = self.wild(n, outside, solo, alone.sends & outside);
            let mut joins = 0u64;
            for y in (0..n).filter(|&y| outside & (1 << y) != 0) {
                let may = self.may_send(y, solo, wild).0;
                let starves_p = may & (1 << p) != 0 && alone.drains & (1 << y) != 0;
                if starves_p || fills(c, may, nonempty, y) {
                    joins |= 1 << y;
                }
            }
            if joins == 0 {
                break;
            }
            c |= joins;
        }
        // `p`'s other actions must not enable an action of `C`
        (!fills(c, alone.sends, nonempty, p)).then_some(c)
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
            let wild = self.wild(n, outside, solo, 0);
            // an outside process that may fill an empty link into the set joins it
            let mut joins = 0u64;
            for y in (0..n).filter(|&y| outside & (1 << y) != 0) {
                let (may, shows) = self.may_send(y, solo, wild);
                if fills(c, may, nonempty, y) || (visible && shows) {
                    joins |= 1 << y;
                }
            }
            if joins == 0 {
                return c;
            }
            c |= joins;
        }
    }

    /// The actions to explore from `s` and their successors: all enabled actions, or with the
    /// reduction a persistent subset that closes no cycle on the stack and either improves no
    /// observation or meets the visibility condition.
    pub(super) fn expand(
        &mut self,
        w: &mut World<A>,
        s: &Sys<A>,
        on_stack: &FpSet,
        stats: &mut Stats,
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
        let owned = |c: u64| -> Vec<usize> {
            (0..enabled.len())
                .filter(|&i| c & (1 << enabled[i].owner()) != 0)
                .collect()
        };
        let mut cache: Vec<Option<(Act, Sys<A>, u128)>> = vec![None; enabled.len()];
        let mut best: Option<Vec<usize>> = None;
        let mut commuting = false;
        let best_len = |best: &Option<Vec<usize>>| best.as_ref().map_or(enabled.len(), Vec::len);
        // the closures: from each process with an enabled action, without the visibility
        // condition first; if it selects an improving action, with it
        let mut order: Vec<(usize, u64)> = (0..n)
            .filter(|&p| enabled.iter().any(|a| a.owner() == p))
            .map(|p| (p, self.persistent(n, &nonempty, p, &solo, false)))
            .collect();
        let size = |c: u64| enabled.iter().filter(|a| c & (1 << a.owner()) != 0).count();
        order.sort_by_key(|&(_, c)| size(c));
        for (p, mut c) in order {
            let mut with_visibility = false;
            loop {
                if size(c) >= best_len(&best) {
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
                best = Some(owned(c));
                break;
            }
        }
        // commuting deliveries, each with the enabled actions of its set `C`, where the
        // delivery's process has another enabled action to leave out
        if self.network == Network::Fifo {
            for (i, a) in enabled.iter().enumerate() {
                let Act::Deliver { src, dst, .. } = *a else {
                    continue;
                };
                // no gain where a single action is selected already, or where `dst` has
                // nothing else to leave out
                if best_len(&best) <= 1 || enabled.iter().filter(|b| b.owner() == dst).count() < 2 {
                    continue;
                }
                let Some(c) = self.commuting_delivery(w, s, &links, &nonempty, &solo, (dst, src))
                else {
                    continue;
                };
                if size(c) + 1 >= best_len(&best) {
                    continue;
                }
                let mut pick = owned(c);
                pick.push(i);
                // off the stack, and (the delivery aside, checked already) nothing improving
                let fits = pick.iter().all(|&j| {
                    let (_, t, fp) = cache[j].get_or_insert_with(|| succ(w, enabled[j]));
                    let q = enabled[j].owner();
                    !on_stack.contains(fp)
                        && (j == i || !self.improving(q, s.local(w, q), t.local(w, q)))
                });
                if fits {
                    best = Some(pick);
                    commuting = true;
                }
            }
        }
        stats.commuting += usize::from(commuting);
        let keep = best.unwrap_or_else(|| (0..enabled.len()).collect());
        keep.into_iter()
            .map(|i| cache[i].take().unwrap_or_else(|| succ(w, enabled[i])))
            .collect()
    }
}

/// What a process `p` can do alone before the delivery of the head of one of its links
/// (never taking from that link; see [`Explorer::commuting_delivery`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Commute {
    /// Every action it can take commutes with the delivery and the delivery never improves
    /// its observation, from every local state it can reach (within [`SOLO_BUDGET`] actions).
    ok: bool,
    /// The other processes it may send to meanwhile (a bit set).
    sends: u64,
    /// The processes whose link into it is empty or may become empty meanwhile (a bit set).
    drains: u64,
}

/// The messages of `sends` to process `to`, in order.
fn on_link<M>(sends: &[(u8, M)], to: usize) -> impl Iterator<Item = &M> {
    sends
        .iter()
        .filter(move |(z, _)| usize::from(*z) == to)
        .map(|(_, m)| m)
}

/// The messages in flight on the links into process `p`, per sender.
fn incoming<'s, A: CsObject>(
    s: &'s Sys<A>,
    links: &Links,
    p: usize,
) -> impl Iterator<Item = &'s [(u16, A::Msg)]> {
    let n = s.n();
    let start = links.start;
    (0..n).map(move |y| {
        let l = y * n + p;
        &s.msgs[usize::from(start[l])..usize::from(start[l + 1])]
    })
}

/// What process `p` alone depends on in `s`: its local state and the links into it (and,
/// for [`Explorer::commute`], the link `(x, p)` it leaves alone), as a memo key.
fn alone_key<A: CsObject>(s: &Sys<A>, links: &Links, p: usize, x: Option<usize>) -> u128 {
    let mut h = Fingerprinter::default();
    h.write_usize(p);
    if let Some(x) = x {
        h.write_usize(x);
    }
    h.write_u32(s.locals[p]);
    for link in incoming(s, links, p) {
        link.hash(&mut h);
    }
    h.finish128()
}

/// The links into process `p` as queues, per sender.
fn inbox<A: CsObject>(s: &Sys<A>, links: &Links, p: usize) -> Vec<VecDeque<A::Msg>> {
    incoming(s, links, p)
        .map(|link| link.iter().map(|(_, m)| m.clone()).collect())
        .collect()
}

/// Routes the sends of a step of process `me` run alone: a self-send joins its own link in
/// `inbox`; the others are returned as the set of processes sent to (a bit set).
fn route<M: Clone>(sends: &[(u8, M)], me: usize, inbox: &mut [VecDeque<M>]) -> u64 {
    let mut to_mask = 0;
    for (to, m) in sends {
        let to = usize::from(*to);
        if to == me {
            inbox[me].push_back(m.clone());
        } else {
            to_mask |= 1 << to;
        }
    }
    to_mask
}

/// Whether a process `y` that may send to the processes of `may` (a bit set) may fill an
/// empty link into one of `set`'s: `nonempty[x]` has bit `y` set when link `(y, x)` holds a
/// message.
fn fills(set: u64, may: u64, nonempty: &[u64], y: usize) -> bool {
    (0..nonempty.len()).any(|x| set & may & (1 << x) != 0 && nonempty[x] & (1 << y) == 0)
}
