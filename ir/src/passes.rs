//! The utility passes the IR crate owns: `dce`, `cse` and `verify`, and helpers other passes
//! share (effect analysis of computations, per-computation topological orders).
//!
//! [`register`] adds them to a [`PassRegistry`]; the root `axle` crate builds the full registry.

pub mod cse;
pub mod dce;
pub mod verify;

use crate::module::{CompId, InstId, Module};
use crate::opcode::Opcode;
use crate::pass::{Analysis, PassInfo, PassRegistry};
use crate::traversal::Marks;

pub use crate::traversal::callee_first_order;

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

/// Calls `f` with every computation `id` calls (attribute order), without allocating.
#[inline]
pub fn for_each_callee(m: &Module, id: InstId, mut f: impl FnMut(CompId)) {
    for (_, v) in m.attrs(id) {
        match v {
            crate::attrs::AttrValue::Comp(c) => f(*c),
            crate::attrs::AttrValue::Comps(cs) => cs.iter().for_each(|&c| f(c)),
            _ => {}
        }
    }
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
    effectful_computations_in(m, &m.insts_by_comp())
}

/// [`effectful_computations`] from the instructions of each computation.
pub fn effectful_computations_in(m: &Module, by_comp: &[Vec<InstId>]) -> Vec<bool> {
    let mut eff = vec![false; m.comp_capacity()];
    for c in callee_first_order(m, by_comp) {
        let mut e = false;
        for &i in &by_comp[c.index()] {
            if has_own_effect(m, i) {
                e = true;
                break;
            }
            for_each_callee(m, i, |cc| {
                e |= !cc.is_none() && cc.index() < eff.len() && eff[cc.index()];
            });
            if e {
                break;
            }
        }
        eff[c.index()] = e;
    }
    eff
}

/// Whether `id` may have an effect: its own, or through a computation it calls.
pub fn is_effectful(m: &Module, id: InstId, effectful: &[bool]) -> bool {
    if has_own_effect(m, id) {
        return true;
    }
    let mut e = false;
    for_each_callee(m, id, |c| {
        e |= !c.is_none() && c.index() < effectful.len() && effectful[c.index()];
    });
    e
}

/// Live instructions of every computation in a stable topological order (operands and control
/// predecessors first, creation order otherwise): `result[c.index()]`.
pub fn topo_orders(m: &Module) -> Vec<Vec<InstId>> {
    topo_orders_in(m, &m.insts_by_comp())
}

/// [`topo_orders`] from the instructions of each computation.
pub fn topo_orders_in(m: &Module, by_comp: &[Vec<InstId>]) -> Vec<Vec<InstId>> {
    let mut marks = Marks::with_capacity(m.inst_capacity());
    by_comp
        .iter()
        .map(|insts| crate::traversal::topo_order_with(m, insts, &mut marks))
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

/// Live instructions per computation, in creation order; cached by epoch.
#[derive(Clone, Debug, Default)]
pub struct ByComp(pub Vec<Vec<InstId>>);

impl Analysis for ByComp {
    fn compute(m: &Module) -> Self {
        ByComp(m.insts_by_comp())
    }
}

/// Per computation: its live instructions, their topological order, and whether it may have
/// an effect; cached by epoch (most passes need all three).
#[derive(Clone, Debug, Default)]
pub struct Structure {
    /// Live instructions per computation, in creation order.
    pub by_comp: Vec<Vec<InstId>>,
    /// Live instructions per computation, in topological order.
    pub topo: Vec<Vec<InstId>>,
    /// Whether each computation may have an effect.
    pub effectful: Vec<bool>,
    /// Live computations, callees first.
    pub callee_first: Vec<CompId>,
}

impl Analysis for Structure {
    fn compute(m: &Module) -> Self {
        let by_comp = m.insts_by_comp();
        let (topo, effectful) = rayon::join(
            || topo_orders_in(m, &by_comp),
            || effectful_computations_in(m, &by_comp),
        );
        let callee_first = callee_first_order(m, &by_comp);
        Structure {
            by_comp,
            topo,
            effectful,
            callee_first,
        }
    }
}
