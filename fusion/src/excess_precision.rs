//! `excess-precision`: a `convert` to `f32` of a `bf16` arithmetic result reads that result
//! before its rounding to `bf16`, as XLA CPU computes it (its float normalization computes each
//! `bf16` op in `f32` and, under `xla_allow_excess_precision`, on by default, hands the `f32`
//! value to a user that converts it to `f32` instead of rounding it and widening it back).
//!
//! Each `convert` of result type `f32` whose operand is a `bf16` elementwise arithmetic op
//! (unary or binary math, not a data movement, `select`, `clamp`, compare or convert) becomes
//! the same op in `f32` of its operands converted to `f32` (exact); a `convert` to `f32` of a
//! `bf16` `dot` becomes the dot with the same operands and an `f32` result (the accumulator,
//! unrounded). The op itself stays for its other users, which still read the rounded `bf16`
//! value: only a direct convert to `f32` is affected, as in XLA (a reshape, a transpose or a
//! second op in between keeps the rounding; so do a convert to `f64` or `f16` and a `reduce`,
//! which XLA CPU accumulates in `bf16`).
//!
//! The `cpu` pipeline runs it first (after `inline`), on the module as the front end wrote it:
//! simplification could otherwise move a reshape out from between an op and its convert.
//!
//! Not exact against the reference evaluator, which rounds every `bf16` op (HLO's per-op
//! semantics): the rewritten module differs from it by at most one rounding to `bf16` at each
//! rewritten convert, and agrees bit for bit with the evaluator on the same computation written
//! in `f32`.
//!
//! Read phase: the matching converts, in parallel. Write phase: one new op (and the converts of
//! its operands) per match, which takes over the convert's name and users.
//!
//! Pre-conditions: a valid module. Post-conditions: a valid module; no `convert` to `f32` reads
//! a `bf16` arithmetic op or dot; other instructions are untouched.
//!
//! Counters: one per rewritten op's name (`add`, `multiply`, `dot`, ...).

use axle_ir::{Changed, ElementType, InstId, Module, Opcode, Pass, PassCx, PassError, Rewriter};
use rayon::prelude::*;

use crate::rewrite::{add_retyped, take_over};

/// The `excess-precision` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExcessPrecision;

/// Whether `op` is one XLA CPU computes in `f32` and rounds to `bf16` afterwards (its float
/// normalization's unsupported ops that compute a new value), apart from `dot`.
fn computed_wide(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Abs | Cbrt
            | Ceil
            | Cos
            | Erf
            | Exp
            | Expm1
            | Floor
            | Log
            | Log1p
            | Logistic
            | Negate
            | RoundNearestAfz
            | RoundNearestEven
            | Rsqrt
            | Sign
            | Sin
            | Sqrt
            | Tan
            | Tanh
            | Add
            | Atan2
            | Divide
            | Maximum
            | Minimum
            | Multiply
            | Power
            | Remainder
            | Subtract
    )
}

/// Whether `id` is an array of element type `ty`.
fn is_array_of(m: &Module, id: InstId, ty: ElementType) -> bool {
    m.array_shape(id).is_some_and(|a| a.ty == ty)
}

/// Whether `id` is a `convert` this pass rewrites: to `f32`, of a `bf16` arithmetic op whose
/// operands are `bf16` arrays, or of a `bf16` dot.
fn matches(m: &Module, id: InstId) -> bool {
    if m.opcode(id) != Opcode::Convert || !is_array_of(m, id, ElementType::F32) {
        return false;
    }
    let Some(&x) = m.operands(id).first() else {
        return false;
    };
    if !is_array_of(m, x, ElementType::BF16) {
        return false;
    }
    let op = m.opcode(x);
    op == Opcode::Dot
        || (computed_wide(op)
            && m.operands(x)
                .iter()
                .all(|&o| is_array_of(m, o, ElementType::BF16)))
}

/// Whether `m` has a `convert` that `excess-precision` rewrites.
pub fn has_excess_precision_site(m: &Module) -> bool {
    m.live_ids().into_par_iter().any(|id| matches(m, id))
}

/// The `f32` op standing for the convert `id` of a `bf16` op.
fn widen(rw: &mut Rewriter<'_>, id: InstId) -> InstId {
    let m = rw.module();
    let x = m.operands(id)[0];
    let op = m.opcode(x);
    let attrs = m.attrs(x).to_vec();
    let operands: Vec<InstId> = m.operands(x).iter().map(|&o| rw.resolve(o)).collect();
    let operands = if op == Opcode::Dot {
        // The same bf16 operands; the result is the f32 accumulator.
        operands
    } else {
        operands
            .into_iter()
            .map(|o| {
                add_retyped(
                    rw,
                    o,
                    ElementType::F32,
                    Opcode::Convert,
                    vec![o],
                    Vec::new(),
                )
            })
            .collect()
    };
    // `id` has `x`'s dimensions; its layout is the one its users read.
    add_retyped(rw, id, ElementType::F32, op, operands, attrs)
}

impl Pass for ExcessPrecision {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<InstId> = m
            .live_ids()
            .into_par_iter()
            .filter(|&id| matches(m, id))
            .collect();
        if plan.is_empty() {
            return Ok(false);
        }
        let mut rw = m.rewriter();
        for &id in &plan {
            let op = rw.module().opcode(rw.module().operands(id)[0]);
            let new = widen(&mut rw, id);
            take_over(&mut rw, id, new);
            cx.count(op.name(), 1);
        }
        Ok(rw.finish())
    }
}
