//! The computations the host steps through, as XLA's GPU backend runs them with its while,
//! conditional and call thunks: the entry, and every `while` condition and body, `conditional`
//! branch and `call` computation reached from it. Kernels are planned for the instructions of
//! each (`crate::kernels`), and the executor steps through them (`crate::control_flow`).
//! Computations run inside a kernel (fusion bodies, reducers, comparators, a `while` inside a
//! fusion) are not host computations: the elemental generators compute them.
//!
//! Invariants: [`host_computations`] lists each host computation once, callers before callees,
//! the entry first, each with its instructions in a topological order: the module's schedule
//! ([`axle_ir::schedule`], the memory scheduler's order the executor runs) where it has one,
//! else a post-order; [`control_callees`] is empty for every instruction but `while`,
//! `conditional` and `call`.

use axle_ir::{AttrKey, CompId, InstId, Module, Opcode};

/// The computations instruction `id` runs on the host, as steps of its computation: a `while`'s
/// condition and body, a `conditional`'s branches, a `call`'s computation; none for any other
/// instruction.
pub fn control_callees(m: &Module, id: InstId) -> Vec<CompId> {
    match m.opcode(id) {
        Opcode::While => [AttrKey::Condition, AttrKey::Body]
            .iter()
            .filter_map(|k| m.comp_attr(id, k))
            .collect(),
        Opcode::Conditional => m.branch_computations(id).unwrap_or_default(),
        Opcode::Call => m.comp_attr(id, &AttrKey::ToApply).into_iter().collect(),
        _ => Vec::new(),
    }
}

/// Every computation the host runs step by step, each once with its instructions in a
/// topological order (the module's schedule where it has a current one): the entry first, then the computations reached from host computations
/// through `while`, `conditional` and `call`, each after its first caller.
pub fn host_computations(m: &Module) -> Vec<(CompId, Vec<InstId>)> {
    let mut orders = axle_ir::passes::topo_orders(m);
    if let Some(s) = m.schedule() {
        for (c, order) in orders.iter_mut().enumerate() {
            if let Some(seq) = s.sequence(CompId::new(c)) {
                order.clear();
                order.extend_from_slice(seq);
            }
        }
    }
    let mut seen = vec![false; orders.len()];
    let mut out: Vec<(CompId, Vec<InstId>)> = Vec::new();
    let mut visit = |c: CompId, out: &mut Vec<(CompId, Vec<InstId>)>| {
        if let Some(s) = seen.get_mut(c.index()).filter(|s| !**s) {
            *s = true;
            out.push((c, std::mem::take(&mut orders[c.index()])));
        }
    };
    visit(m.entry(), &mut out);
    let mut k = 0;
    while k < out.len() {
        let callees: Vec<CompId> = out[k]
            .1
            .iter()
            .flat_map(|&i| control_callees(m, i))
            .collect();
        for c in callees {
            visit(c, &mut out);
        }
        k += 1;
    }
    out
}
