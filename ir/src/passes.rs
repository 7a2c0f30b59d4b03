//! The utility passes the IR crate owns: `dce`, `cse` and `verify`, and helpers other passes
//! share (effect analysis of computations, per-computation topological orders).
//!
//! [`register`] adds them to a [`PassRegistry`]; the root `axle` crate builds the full registry.

pub mod cse;
pub mod dce;
pub mod verify;

use crate::module::{CompId, InstId, Module};
use crate::opcode::Opcode;
use crate::pass::{PassInfo, PassRegistry};

/// Registers `dce`, `cse` and `verify`.
pub fn register(reg: &mut PassRegistry) {
    reg.register(PassInfo {
        name: "dce",
        doc: "dead code elimination: drops unused side-effect-free instructions and unreachable computations",
        options: &[],
        create: |_| Box::new(dce::Dce),
    });
    reg.register(PassInfo {
        name: "cse",
        doc: "common subexpression elimination: merges identical instructions and structurally identical computations",
        options: &[],
        create: |_| Box::new(cse::Cse),
    });
    reg.register(PassInfo {
        name: "verify",
        doc: "runs the verifier; fails the pipeline if the module breaks an invariant",
        options: &[],
        create: |_| Box::new(verify::VerifyPass),
    });
}

/// Whether `id` has an effect beyond its result by itself: a side-effecting opcode, or a
/// custom call (whose effects the IR cannot see).
pub fn has_own_effect(m: &Module, id: InstId) -> bool {
    let op = m.opcode(id);
    op.has_side_effect() || op == Opcode::CustomCall
}

/// For every computation (indexed by id): whether running it may have an effect, i.e. it holds
/// an instruction with its own effect or calls such a computation, transitively.
pub fn effectful_computations(m: &Module) -> Vec<bool> {
    let by_comp = m.insts_by_comp();
    let mut eff = vec![false; m.comp_capacity()];
    // Callees come first in print order, so one sweep settles every computation (a cycle, which
    // the verifier rejects, is cut where it closes).
    for c in crate::printer::computation_order(m) {
        eff[c.index()] = by_comp[c.index()].iter().any(|&i| {
            has_own_effect(m, i)
                || m.called_comps(i)
                    .iter()
                    .any(|cc| !cc.is_none() && cc.index() < eff.len() && eff[cc.index()])
        });
    }
    eff
}

/// Whether `id` may have an effect: its own, or through a computation it calls.
pub fn is_effectful(m: &Module, id: InstId, effectful: &[bool]) -> bool {
    has_own_effect(m, id)
        || m.called_comps(id)
            .iter()
            .any(|c| !c.is_none() && c.index() < effectful.len() && effectful[c.index()])
}

/// Live instructions of every computation in a stable topological order (operands and control
/// predecessors first, creation order otherwise): `result[c.index()]`.
pub fn topo_orders(m: &Module) -> Vec<Vec<InstId>> {
    let by_comp = m.insts_by_comp();
    let mut state = vec![0u8; m.inst_capacity()];
    by_comp
        .iter()
        .map(|insts| crate::printer::topo_order_with(m, insts, &mut state))
        .collect()
}

/// Computations reachable from the entry through called computations of the given
/// instructions (`callers[c]` lists the computations instructions of `c` call).
pub fn reachable_computations(m: &Module, callers: &[Vec<CompId>]) -> Vec<bool> {
    let mut seen = vec![false; m.comp_capacity()];
    let entry = m.entry();
    if entry.is_none() || entry.index() >= seen.len() {
        return seen;
    }
    let mut stack = vec![entry];
    seen[entry.index()] = true;
    while let Some(c) = stack.pop() {
        for &cc in &callers[c.index()] {
            if !cc.is_none() && cc.index() < seen.len() && !seen[cc.index()] {
                seen[cc.index()] = true;
                stack.push(cc);
            }
        }
    }
    seen
}
