//! The post-order scheduler: a depth-first post-order of the dependency graph from the root,
//! operands in operand order then control predecessors, followed by whatever the root does not
//! reach, in creation order. It ignores memory; it is the baseline `memory-schedule` compares
//! the memory-aware heuristics against, and often the best order for chains.
//!
//! Linear in the computation; deterministic.

use axle_ir::InstId;

use std::borrow::Cow;

use crate::computation_view::CompView;
use crate::dep_graph::post_order_from;

/// `cv`'s instructions in depth-first post-order from the root.
pub fn post_order(cv: CompView) -> Vec<InstId> {
    let graph = cv.view.graph;
    let mut state = vec![0u8; cv.insts.len()];
    post_order_from(
        cv.starts(),
        |i| cv.local(i),
        &mut state,
        |i| Cow::Borrowed(graph.preds(i)),
    )
}
