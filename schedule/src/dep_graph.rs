//! The dependency graph the schedulers walk: for every live instruction, its predecessors
//! (operands and control predecessors) and successors (users and control successors), as flat
//! CSR arrays indexed by instruction id.
//!
//! Successors are the predecessor lists inverted: the users table (as [`axle_analysis::Users`]
//! builds it, by counting then filling) plus the control edges. Both lists are deduplicated (`multiply(x, x)` is one edge) and keep only live instructions of
//! the same computation, so a computation's graph is the restriction of the module's to its
//! instructions. Predecessors are in operand order, control predecessors after; successors in
//! instruction id order. Building it is linear in the module.

use std::borrow::Cow;

use axle_ir::entity::{dense_map, SecondaryMap};
use axle_ir::{InstId, Module};

/// Predecessors and successors of every instruction.
#[derive(Clone, Debug, Default)]
pub struct DepGraph {
    pred_off: Vec<u32>,
    preds: Vec<InstId>,
    succ_off: Vec<u32>,
    succs: Vec<InstId>,
}

impl DepGraph {
    /// The dependency graph of `m`. Successors are the predecessor lists inverted (the users
    /// table restricted to live users of the same computation, plus control successors), in
    /// instruction id order.
    pub fn new(m: &Module) -> DepGraph {
        let cap = m.inst_capacity();
        let mut pred_off = vec![0u32; cap + 1];
        let mut preds = Vec::with_capacity(cap * 2);
        // `stamp[o] == i + 1` once `o` is a predecessor of `i` (deduplicates in operand order).
        let mut stamp: SecondaryMap<InstId, u32> = dense_map(cap, 0);
        let mut succ_count = vec![0u32; cap + 1];
        for (i, off) in pred_off.iter_mut().enumerate().take(cap) {
            *off = preds.len() as u32;
            let id = InstId::new(i);
            if !m.is_live(id) {
                continue;
            }
            let comp = m.parent(id);
            let ctrl = if m.attrs(id).is_empty() {
                &[][..]
            } else {
                m.control_predecessors(id)
            };
            for &o in m.operands(id).iter().chain(ctrl) {
                if !o.is_none()
                    && o.index() < cap
                    && m.is_live(o)
                    && m.parent(o) == comp
                    && stamp[o] != i as u32 + 1
                {
                    stamp[o] = i as u32 + 1;
                    preds.push(o);
                    succ_count[o.index() + 1] += 1;
                }
            }
        }
        pred_off[cap] = preds.len() as u32;
        for k in 0..cap {
            succ_count[k + 1] += succ_count[k];
        }
        let succ_off = succ_count;
        let mut fill = succ_off.clone();
        let mut succs = vec![InstId::NONE; preds.len()];
        for i in 0..cap {
            for &p in &preds[pred_off[i] as usize..pred_off[i + 1] as usize] {
                succs[fill[p.index()] as usize] = InstId::new(i);
                fill[p.index()] += 1;
            }
        }
        DepGraph {
            pred_off,
            preds,
            succ_off,
            succs,
        }
    }

    /// `insts` (one computation's) in a depth-first post-order: every instruction after its
    /// predecessors, otherwise in the given order. `state` is module-sized scratch, zero for
    /// `insts` on entry; it is left marked.
    pub fn post_order(&self, insts: &[InstId], state: &mut [u8]) -> Vec<InstId> {
        post_order_from(
            insts.iter().copied(),
            |i| i.index(),
            state,
            |i| Cow::Borrowed(self.preds(i)),
        )
    }

    /// Operands and control predecessors of `i` (deduplicated, same computation).
    pub fn preds(&self, i: InstId) -> &[InstId] {
        let k = i.index();
        &self.preds[self.pred_off[k] as usize..self.pred_off[k + 1] as usize]
    }

    /// Users and control successors of `i` (deduplicated, same computation, id order).
    pub fn succs(&self, i: InstId) -> &[InstId] {
        let k = i.index();
        &self.succs[self.succ_off[k] as usize..self.succ_off[k + 1] as usize]
    }
}

/// A depth-first post-order: from each of `starts` in turn, every instruction not yet visited
/// after its predecessors, which `preds(i)` lists in the order to visit them. `index` maps an
/// instruction to its entry of `state` (zero for everything on entry; left marked).
pub fn post_order_from<'a>(
    starts: impl IntoIterator<Item = InstId>,
    index: impl Fn(InstId) -> usize,
    state: &mut [u8],
    mut preds: impl FnMut(InstId) -> Cow<'a, [InstId]>,
) -> Vec<InstId> {
    let mut order = Vec::new();
    let mut stack: Vec<(InstId, Cow<'a, [InstId]>, usize)> = Vec::new();
    for r in starts {
        if state[index(r)] != 0 {
            continue;
        }
        state[index(r)] = 1;
        stack.push((r, preds(r), 0));
        while let Some((i, ps, k)) = stack.last_mut() {
            match ps.get(*k).copied() {
                Some(p) => {
                    *k += 1;
                    if state[index(p)] == 0 {
                        state[index(p)] = 1;
                        let pp = preds(p);
                        stack.push((p, pp, 0));
                    }
                }
                None => {
                    let i = *i;
                    stack.pop();
                    state[index(i)] = 2;
                    order.push(i);
                }
            }
        }
    }
    order
}
