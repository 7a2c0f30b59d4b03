//! The post-order scheduler: a depth-first post-order of the dependency graph from the root,
//! operands in operand order then control predecessors, followed by whatever the root does not
//! reach, in creation order. It ignores memory; it is the baseline `memory-schedule` compares
//! the memory-aware heuristics against, and often the best order for chains.
//!
//! Linear in the computation; deterministic.

use axle_ir::InstId;

use crate::computation_view::CompView;

/// `cv`'s instructions in depth-first post-order from the root.
pub fn post_order(cv: CompView) -> Vec<InstId> {
    let graph = cv.view.graph;
    let n = cv.insts.len();
    let mut state = vec![0u8; n];
    let mut order = Vec::with_capacity(n);
    let mut stack: Vec<(InstId, u32)> = Vec::new();
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
        stack.push((s, 0));
        while let Some((i, k)) = stack.pop() {
            match graph.preds(i).get(k as usize) {
                Some(&p) => {
                    stack.push((i, k + 1));
                    if state[cv.local(p)] == 0 {
                        state[cv.local(p)] = 1;
                        stack.push((p, 0));
                    }
                }
                None => {
                    state[cv.local(i)] = 2;
                    order.push(i);
                }
            }
        }
    }
    order
}
