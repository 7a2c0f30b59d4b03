//! The utility passes the IR crate owns: `dce`, `cse` and `verify`, and helpers other passes
//! share (effect analysis of computations, per-computation topological orders).
//!
//! [`register`] adds them to a [`PassRegistry`]; the root `axle` crate builds the full registry.

pub mod cse;
pub mod dce;
pub mod verify;

use crate::entity::{EntitySet, SecondaryMap};
use crate::module::{CompId, InstId, InstsByComp, Module};
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

/// The computations whose running may have an effect: they hold an instruction with its own
/// effect or call such a computation, transitively.
pub fn effectful_computations(m: &Module) -> EntitySet<CompId> {
    effectful_computations_in(m, &m.insts_by_comp())
}

/// [`effectful_computations`] from the instructions of each computation.
pub fn effectful_computations_in(m: &Module, by_comp: &InstsByComp) -> EntitySet<CompId> {
    let mut eff = EntitySet::with_capacity(m.comp_capacity());
    for c in callee_first_order(m, by_comp) {
        let mut e = false;
        for &i in &by_comp[c] {
            if has_own_effect(m, i) {
                e = true;
                break;
            }
            for_each_callee(m, i, |cc| {
                e |= !cc.is_none() && eff.contains(cc);
            });
            if e {
                break;
            }
        }
        if e {
            eff.insert(c);
        }
    }
    eff
}

/// Whether `id` may have an effect: its own, or through a computation it calls.
pub fn is_effectful(m: &Module, id: InstId, effectful: &EntitySet<CompId>) -> bool {
    if has_own_effect(m, id) {
        return true;
    }
    let mut e = false;
    for_each_callee(m, id, |c| {
        e |= !c.is_none() && effectful.contains(c);
    });
    e
}

/// Live instructions of every computation in a stable topological order (operands and control
/// predecessors first, creation order otherwise): `result[c.index()]`. The vector form of
/// [`topo_orders_in`], for callers that take each order out by position.
pub fn topo_orders(m: &Module) -> Vec<Vec<InstId>> {
    let by_comp = m.insts_by_comp();
    let mut marks = Marks::with_capacity(m.inst_capacity());
    by_comp
        .values()
        .map(|insts| crate::traversal::topo_order_with(m, insts, &mut marks))
        .collect()
}

/// Live instructions of every computation of `by_comp` in a stable topological order
/// (operands and control predecessors first, creation order otherwise): `result[c]`.
pub fn topo_orders_in(m: &Module, by_comp: &InstsByComp) -> InstsByComp {
    let mut marks = Marks::with_capacity(m.inst_capacity());
    let mut out: InstsByComp = SecondaryMap::with_capacity(m.comp_capacity());
    for (c, insts) in by_comp.iter() {
        out[c] = crate::traversal::topo_order_with(m, insts, &mut marks);
    }
    out
}

/// The computations reachable from the entry through the called computations of the given
/// instructions (`callees[c]` lists the computations instructions of `c` call).
pub fn reachable_computations(
    m: &Module,
    callees: &SecondaryMap<CompId, Vec<CompId>>,
) -> EntitySet<CompId> {
    let mut seen = EntitySet::with_capacity(m.comp_capacity());
    let entry = m.entry();
    if entry.is_none() || entry.index() >= m.comp_capacity() {
        return seen;
    }
    let mut stack = vec![entry];
    seen.insert(entry);
    while let Some(c) = stack.pop() {
        for &cc in &callees[c] {
            if !cc.is_none() && cc.index() < m.comp_capacity() && seen.insert(cc) {
                stack.push(cc);
            }
        }
    }
    seen
}

/// Live instructions per computation, in creation order; cached by epoch.
#[derive(Clone, Debug, Default)]
pub struct ByComp(pub InstsByComp);

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
    pub by_comp: InstsByComp,
    /// Live instructions per computation, in topological order.
    pub topo: InstsByComp,
    /// The computations that may have an effect.
    pub effectful: EntitySet<CompId>,
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
