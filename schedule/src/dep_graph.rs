//! The dependency graph the schedulers walk: for every live instruction, its predecessors
//! (operands and control predecessors) and successors (users and control successors), as flat
//! CSR arrays indexed by instruction id.
//!
//! Successors come from the users table ([`axle_analysis::Users`]) plus the control edges.
//! Both lists are deduplicated (`multiply(x, x)` is one edge) and keep only live instructions of
//! the same computation, so a computation's graph is the restriction of the module's to its
//! instructions. Predecessors are in operand order, control predecessors after; successors in
//! instruction id order. Building it is linear in the module.

use axle_analysis::Users;
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
    /// The dependency graph of `m`, with `users` the users table of `m`.
    pub fn new(m: &Module, users: &Users) -> DepGraph {
        let cap = m.inst_capacity();
        let live = m.live_ids();
        let edge = |from: InstId, to: InstId| {
            !from.is_none()
                && from.index() < cap
                && m.is_live(from)
                && m.parent(from) == m.parent(to)
        };
        let mut pred_off = vec![0u32; cap + 1];
        let mut preds = Vec::with_capacity(live.len() * 2);
        let mut ctrl_succ_count = vec![0u32; cap];
        // `stamp[o] == i + 1` once `o` is a predecessor of `i` (deduplicates in operand order).
        let mut stamp = vec![0u32; cap];
        let mut k = 0;
        for (i, off) in pred_off.iter_mut().enumerate().take(cap) {
            *off = preds.len() as u32;
            if k < live.len() && live[k].index() == i {
                k += 1;
                let id = InstId::new(i);
                for &o in m.operands(id).iter().chain(m.control_predecessors(id)) {
                    if edge(o, id) && stamp[o.index()] != i as u32 + 1 {
                        stamp[o.index()] = i as u32 + 1;
                        preds.push(o);
                    }
                }
                for &c in m.control_predecessors(id) {
                    if edge(c, id) {
                        ctrl_succ_count[c.index()] += 1;
                    }
                }
            }
        }
        pred_off[cap] = preds.len() as u32;
        let mut succ_off = vec![0u32; cap + 1];
        let mut succs = Vec::with_capacity(preds.len());
        let mut scratch: Vec<InstId> = Vec::new();
        // Control successors, grouped by predecessor.
        let mut ctrl_off = vec![0u32; cap + 1];
        for i in 0..cap {
            ctrl_off[i + 1] = ctrl_off[i] + ctrl_succ_count[i];
        }
        let mut ctrl = vec![InstId::NONE; ctrl_off[cap] as usize];
        let mut fill = ctrl_off.clone();
        for &id in &live {
            for &c in m.control_predecessors(id) {
                if edge(c, id) {
                    ctrl[fill[c.index()] as usize] = id;
                    fill[c.index()] += 1;
                }
            }
        }
        for i in 0..cap {
            succ_off[i] = succs.len() as u32;
            let id = InstId::new(i);
            if !m.is_live(id) {
                continue;
            }
            scratch.clear();
            scratch.extend(users.users(id).iter().copied().filter(|&u| edge(id, u)));
            scratch.extend_from_slice(&ctrl[ctrl_off[i] as usize..ctrl_off[i + 1] as usize]);
            scratch.sort_unstable();
            scratch.dedup();
            succs.extend_from_slice(&scratch);
        }
        succ_off[cap] = succs.len() as u32;
        DepGraph {
            pred_off,
            preds,
            succ_off,
            succs,
        }
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
