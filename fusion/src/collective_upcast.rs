//! `collective-upcast`: an `all-reduce` or `reduce-scatter` of `bf16` runs in `f32`, as XLA
//! CPU runs it (its float normalization gives the op an `f32` operand, a copy of the reducer in
//! `f32`, `..._promoted`, and a `convert` of the result back to `bf16`).
//!
//! Each array-form `all-reduce` or `reduce-scatter` whose operand and result are `bf16` and
//! whose reducer is one `add`, `multiply`, `maximum` or `minimum` of its two parameters becomes
//! a `convert` of the operand to `f32` (exact), the same collective (same attributes, groups
//! and channel) in `f32` with a new `f32` reducer of the same op, and a `convert` of its result
//! to `bf16`, which takes over the collective's name and users. The members' values are then
//! summed (or multiplied) in `f32` and rounded once, where HLO's per-op semantics, which the
//! evaluator follows, round after every member; maximum and minimum give the same bits either
//! way.
//!
//! Not rewritten: tuple forms, `-start`/`-done` pairs, other reducers, other narrow types
//! (XLA's optimized modules were only checked for `bf16`).
//!
//! Read phase: the matching collectives, in parallel. Write phase: the rewrite of each, one new
//! reducer per element type and op, shared by every rewritten collective.
//!
//! Pre-conditions: a valid module. Post-conditions: a valid module; no matching collective of
//! `bf16` is left; other instructions are untouched.
//!
//! Counters: `all-reduce`, `reduce-scatter` (collectives upcast).

use axle_ir::{
    AttrKey, AttrValue, Changed, CompId, ElementType, InstId, Module, Opcode, Pass, PassCx,
    PassError,
};
use rayon::prelude::*;

use crate::rewrite::{add_binary_computation, add_retyped, take_over};

/// The `collective-upcast` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct CollectiveUpcast;

/// The op of `c` if it is a reducer of one `add`, `multiply`, `maximum` or `minimum` of its two
/// scalar `bf16` parameters.
fn reducer_op(m: &Module, c: CompId) -> Option<Opcode> {
    let ps = m.params(c);
    if ps.len() != 2
        || ps.iter().any(|&p| {
            m.array_shape(p)
                .is_none_or(|a| a.ty != ElementType::BF16 || !a.dims.is_empty())
        })
    {
        return None;
    }
    let root = m.root(c);
    let op = m.opcode(root);
    let ops = m.operands(root);
    let binary = matches!(
        op,
        Opcode::Add | Opcode::Multiply | Opcode::Maximum | Opcode::Minimum
    );
    (binary && ops.len() == 2 && ops.iter().all(|o| ps.contains(o)) && ops[0] != ops[1])
        .then_some(op)
}

/// The reducer's op if `id` is a collective this pass rewrites.
fn matches(m: &Module, id: InstId) -> Option<Opcode> {
    if !matches!(m.opcode(id), Opcode::AllReduce | Opcode::ReduceScatter) {
        return None;
    }
    let bf16 = |i: InstId| m.array_shape(i).is_some_and(|a| a.ty == ElementType::BF16);
    let ops = m.operands(id);
    if ops.len() != 1 || !bf16(id) || !bf16(ops[0]) {
        return None;
    }
    match m.attr(id, &AttrKey::ToApply) {
        Some(AttrValue::Comp(c)) => reducer_op(m, *c),
        _ => None,
    }
}

impl Pass for CollectiveUpcast {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<(InstId, Opcode)> = m
            .live_ids()
            .into_par_iter()
            .filter_map(|id| matches(m, id).map(|op| (id, op)))
            .collect();
        if plan.is_empty() {
            return Ok(false);
        }
        let mut rw = m.rewriter();
        // One f32 reducer per op, in the order the plan first needs it.
        let mut reducers: Vec<(Opcode, CompId)> = Vec::new();
        for &(id, op) in &plan {
            let reducer = match reducers.iter().find(|(o, _)| *o == op) {
                Some(&(_, c)) => c,
                None => {
                    let base = format!("{}_promoted", op.name());
                    let c = add_binary_computation(&mut rw, &base, ElementType::F32, op);
                    reducers.push((op, c));
                    c
                }
            };
            let m = rw.module();
            let kind = m.opcode(id);
            let attrs: Vec<_> = m
                .attrs(id)
                .iter()
                .map(|(k, v)| match k {
                    AttrKey::ToApply => (k.clone(), AttrValue::Comp(reducer)),
                    _ => (k.clone(), v.clone()),
                })
                .collect();
            let operand = rw.resolve(m.operands(id)[0]);
            let wide = add_retyped(
                &mut rw,
                operand,
                ElementType::F32,
                Opcode::Convert,
                vec![operand],
                Vec::new(),
            );
            let inner = add_retyped(&mut rw, id, ElementType::F32, kind, vec![wide], attrs);
            let new = add_retyped(
                &mut rw,
                id,
                ElementType::BF16,
                Opcode::Convert,
                vec![inner],
                Vec::new(),
            );
            take_over(&mut rw, id, new);
            cx.count(kind.name(), 1);
        }
        Ok(rw.finish())
    }
}
