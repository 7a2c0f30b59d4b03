//! The list scheduler (XLA's `ListMemoryScheduler`): greedy on memory. Among the instructions
//! whose operands and control predecessors have all run, it runs next the one that frees the
//! most bytes net of what it allocates; ties go to the one created first.
//!
//! An instruction frees the buffers it is the last user of (not those behind the root). Its
//! priority changes when another instruction runs and leaves it the last user of a buffer;
//! the ready set is a binary heap with lazy deletion: a re-prioritised instruction is pushed
//! again under a new version and stale entries are skipped when they surface. Each buffer
//! triggers at most one re-prioritisation, so the scheduler is `O((n + e) log n)`;
//! deterministic.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use axle_ir::InstId;

use crate::computation_view::CompView;

/// `cv`'s instructions in greedy memory order.
pub fn list(cv: CompView) -> Vec<InstId> {
    let graph = cv.view.graph;
    let model = cv.view.model;
    let n = cv.insts.len();
    // Remaining users per buffer of the computation (indexed from its first buffer id).
    let (first, count) = model.comp_buffers(cv.comp);
    let mut remaining = vec![0u32; count as usize];
    for v in first..first + count {
        remaining[(v - first) as usize] = model.users(v).len() as u32;
    }
    let remaining = &mut remaining[..];
    let mut indeg: Vec<u32> = cv
        .insts
        .iter()
        .map(|&i| graph.preds(i).len() as u32)
        .collect();
    let mut version = vec![0u32; n];
    let mut done = vec![false; n];
    let priority = |i: InstId, remaining: &[u32]| -> i64 {
        // Saturating: a hostile module's sizes fit in i64 one by one, not summed.
        let freed: u64 = model
            .uses(i)
            .iter()
            .filter(|&&v| remaining[(v - first) as usize] == 1 && !model.pinned(v))
            .fold(0u64, |a, &v| a.saturating_add(model.bytes(v)));
        let signed = |b: u64| i64::try_from(b).unwrap_or(i64::MAX);
        signed(freed).saturating_sub(signed(model.defined_bytes(i)))
    };
    // (priority, earliest creation first, version, instruction)
    let mut ready: BinaryHeap<(i64, Reverse<u32>, u32, InstId)> = BinaryHeap::new();
    for (k, &i) in cv.insts.iter().enumerate() {
        if indeg[k] == 0 {
            ready.push((priority(i, remaining), Reverse(k as u32), 0, i));
        }
    }
    let mut order = Vec::with_capacity(n);
    while let Some((_, Reverse(k), ver, i)) = ready.pop() {
        let k = k as usize;
        if done[k] || ver != version[k] {
            continue;
        }
        done[k] = true;
        order.push(i);
        for &v in model.uses(i) {
            let r = &mut remaining[(v - first) as usize];
            *r -= 1;
            if *r == 1 && !model.pinned(v) {
                // The one user left now frees `v`: raise its priority if it is ready.
                if let Some(&u) = model
                    .users(v)
                    .iter()
                    .find(|&&u| !done[cv.local(u)] && u != i)
                {
                    let ku = cv.local(u);
                    if indeg[ku] == 0 {
                        version[ku] += 1;
                        ready.push((priority(u, remaining), Reverse(ku as u32), version[ku], u));
                    }
                }
            }
        }
        for &s in graph.succs(i) {
            let ks = cv.local(s);
            indeg[ks] -= 1;
            if indeg[ks] == 0 {
                ready.push((priority(s, remaining), Reverse(ks as u32), version[ks], s));
            }
        }
    }
    order
}
