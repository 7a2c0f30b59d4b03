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

use std::borrow::Cow;

use crate::computation_view::CompView;
use crate::dep_graph::post_order_from;
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
    let sorted_preds = |i: InstId| -> Cow<'_, [InstId]> {
        let ps = graph.preds(i);
        if ps.len() < 2 {
            return Cow::Borrowed(ps);
        }
        let mut ps: Vec<(usize, InstId)> = ps.iter().copied().enumerate().collect();
        ps.sort_by(|&(ka, a), &(kb, b)| {
            let (la, lb) = (cv.local(a), cv.local(b));
            extra[lb]
                .cmp(&extra[la])
                .then(total[lb].cmp(&total[la]))
                .then(ka.cmp(&kb))
        });
        Cow::Owned(ps.into_iter().map(|(_, p)| p).collect())
    };
    post_order_from(cv.starts(), |i| cv.local(i), &mut state, sorted_preds)
}
