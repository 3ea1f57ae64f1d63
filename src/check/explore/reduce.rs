//! The partial-order reduction (see the module doc of [`check`](mod@crate::check)): which
//! moves are harmless, what a process can do alone, the persistent sets, and the successors a
//! state is expanded into.

use super::model::{Act, Links, Local, Sys, World};
use super::tables::{fingerprint, Fingerprinter, FpSet};
use super::Explorer;
use crate::check::MAX_CHECK_PROCESSES;
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

    /// The actions to explore from `s` and their successors: all enabled actions, or with the
    /// reduction a persistent subset that closes no cycle on the stack and either improves no
    /// observation or meets the visibility condition.
    pub(super) fn expand(
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
}
