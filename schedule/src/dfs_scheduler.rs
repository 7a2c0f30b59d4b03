//! The DFS memory scheduler (XLA's `DFSMemoryScheduler`): a depth-first post-order from the
//! root that, at every instruction, visits the operand subtrees with the most extra users first
//! and, among equals, the ones that allocate the most.
//!
//! Per instruction, in a first topological sweep: `extra_users` is its users beyond the first
//! plus its operands' `extra_users`, and `total_bytes` is what it allocates plus its operands'
//! `total_bytes` (both over-count shared subtrees, as XLA's do; they only rank siblings). Big
//! subtrees that feed many users then run early, while little is live, and their results are
//! consumed soon after. Instructions the root does not reach follow in creation order.
//!
//! `O(n log d)` for `n` instructions of in-degree at most `d`; deterministic (ties go to the
//! operand that comes first).

use axle_ir::InstId;

use crate::computation_view::CompView;
use crate::post_order_scheduler::post_order;

/// `cv`'s instructions in XLA's DFS memory order.
pub fn dfs(cv: CompView) -> Vec<InstId> {
    let graph = cv.view.graph;
    let model = cv.view.model;
    let n = cv.insts.len();
    let mut extra = vec![0u64; n];
    let mut total = vec![0u64; n];
    for i in post_order(cv) {
        let k = cv.local(i);
        let mut e = (graph.succs(i).len() as u64).saturating_sub(1);
        let mut t = model.defined_bytes(i);
        for &p in graph.preds(i) {
            e = e.saturating_add(extra[cv.local(p)]);
            t = t.saturating_add(total[cv.local(p)]);
        }
        extra[k] = e;
        total[k] = t;
    }
    let mut state = vec![0u8; n];
    let mut order = Vec::with_capacity(n);
    // Each stack entry: an instruction and its operands still to visit, in visiting order.
    let mut stack: Vec<(InstId, Vec<InstId>)> = Vec::new();
    let sorted_preds = |i: InstId| {
        let mut ps: Vec<(usize, InstId)> = graph.preds(i).iter().copied().enumerate().collect();
        ps.sort_by(|&(ka, a), &(kb, b)| {
            let (la, lb) = (cv.local(a), cv.local(b));
            extra[lb]
                .cmp(&extra[la])
                .then(total[lb].cmp(&total[la]))
                .then(ka.cmp(&kb))
        });
        // Popped from the back: reverse so the first to visit is last.
        ps.into_iter().rev().map(|(_, p)| p).collect::<Vec<_>>()
    };
    let root = cv.root();
    let starts = (!root.is_none() && cv.view.local[root.index()] != u32::MAX)
        .then_some(root)
        .into_iter()
        .chain(cv.insts.iter().copied());
    for s in starts {
        if state[cv.local(s)] != 0 {
            continue;
        }
        state[cv.local(s)] = 1;
        stack.push((s, sorted_preds(s)));
        while let Some((i, todo)) = stack.last_mut() {
            let i = *i;
            match todo.pop() {
                Some(p) => {
                    if state[cv.local(p)] == 0 {
                        state[cv.local(p)] = 1;
                        let ps = sorted_preds(p);
                        stack.push((p, ps));
                    }
                }
                None => {
                    stack.pop();
                    state[cv.local(i)] = 2;
                    order.push(i);
                }
            }
        }
    }
    order
}
