//! Stable topological order of a computation's instructions: each instruction after its
//! operands and control predecessors, otherwise in the order given (so an order that is
//! already topological comes back unchanged). Used by the printer, schedules and passes.
//!
//! Invariant: only live instructions of the same computation as the first one given are pulled
//! in as dependencies; the state buffer marks what was emitted, so one buffer serves every
//! computation of a module in turn.

use crate::module::{InstId, Module};

/// Instructions of a computation in a stable topological order: each instruction after its
/// operands and control predecessors, otherwise in the order given.
pub fn topo_order(m: &Module, insts: &[InstId]) -> Vec<InstId> {
    let mut state = vec![0u8; m.inst_capacity()];
    topo_order_with(m, insts, &mut state)
}

/// [`topo_order`] with a caller-owned state buffer of `m.inst_capacity()` zeros, which it leaves
/// marked for `insts` (so one buffer serves every computation of a module in turn).
pub fn topo_order_with(m: &Module, insts: &[InstId], state: &mut [u8]) -> Vec<InstId> {
    // state: 0 unvisited, 1 on the DFS stack, 2 emitted.
    let Some(&first) = insts.first() else {
        return Vec::new();
    };
    let comp = m.parent(first);
    let cap = m.inst_capacity();
    let mut order = Vec::with_capacity(insts.len());
    let mut stack: Vec<(InstId, u32)> = Vec::new();
    for &r in insts {
        if state[r.index()] != 0 {
            continue;
        }
        stack.push((r, 0));
        state[r.index()] = 1;
        while let Some((i, k)) = stack.pop() {
            let ops = m.operands(i);
            let k = k as usize;
            let dep = if k < ops.len() {
                Some(ops[k])
            } else {
                m.control_predecessors(i).get(k - ops.len()).copied()
            };
            if let Some(d) = dep {
                stack.push((i, k as u32 + 1));
                if !d.is_none()
                    && d.index() < cap
                    && state[d.index()] == 0
                    && m.is_live(d)
                    && m.parent(d) == comp
                {
                    state[d.index()] = 1;
                    stack.push((d, 0));
                }
            } else {
                state[i.index()] = 2;
                order.push(i);
            }
        }
    }
    order
}
