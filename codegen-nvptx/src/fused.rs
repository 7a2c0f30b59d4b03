//! Walks of a fused computation that the kernel planners share: linear in the part of the
//! computation walked, never in the module (`Module::comp_insts` scans every instruction of the
//! module, which, asked once per fusion, made planning quadratic).

use std::collections::HashSet;

use axle_ir::{CompId, InstId, Module};

/// The instructions of computation `c` that `root` reaches through operands (itself
/// included), operands before users, in time linear in what is reached (not in the module).
pub(crate) fn reached_in_order(m: &Module, c: CompId, root: InstId) -> Vec<InstId> {
    let mut seen: HashSet<InstId> = HashSet::new();
    let mut out = Vec::new();
    // (instruction, whether its operands have been pushed).
    let mut stack = vec![(root, false)];
    while let Some((x, expanded)) = stack.pop() {
        if expanded {
            out.push(x);
            continue;
        }
        if x.is_none() || m.parent(x) != c || !seen.insert(x) {
            continue;
        }
        stack.push((x, true));
        for &o in m.operands(x).iter().rev() {
            stack.push((o, false));
        }
    }
    out
}
