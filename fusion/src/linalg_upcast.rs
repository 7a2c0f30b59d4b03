//! `linalg-upcast`: runs `cholesky` and `triangular-solve` on `f16`, `bf16` and the 8- and 4-bit
//! float types in `f32`,
//! as XLA's float-normalization passes do for ops a backend cannot compute in a narrow type.
//! Each such instruction becomes `convert` of its operands to `f32`, the same op (same
//! attributes, same dimensions and layout) in `f32`, and a `convert` back to the original
//! element type, which takes over the instruction's name and users.
//!
//! The reference evaluator computes these ops in `f64` and rounds once to the element type; the
//! rewritten module rounds to `f32` first, so the two agree within the rounding of the narrow
//! type (double rounding can move a result by one unit in its last place), not bit for bit.
//!
//! Read phase: the narrow-typed linear-algebra instructions, in parallel. Write phase: the
//! rewrite of each (an op fed by another one ends up reading the other's final convert, through
//! the rewriter's forwarding).
//!
//! Pre-conditions: a valid module. Post-conditions: the same values up to rounding of the
//! element type; no `cholesky` or `triangular-solve` with an array operand or result of a float
//! type narrower than 32 bits is left; other instructions are untouched.
//!
//! Counters: `cholesky`, `triangular-solve` (instructions upcast).

use axle_ir::{
    ArrayShape, Changed, ElementType, InstId, Module, Opcode, Pass, PassCx, PassError, Rewriter,
};
use rayon::prelude::*;

use crate::rewrite::{add_retyped, take_over};

/// The `linalg-upcast` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct LinalgUpcast;

/// The element types this pass computes in `f32` instead.
fn narrow(ty: ElementType) -> bool {
    ty.is_float() && ty.bits() < 32
}

/// The array shape of `id` if it is one with a narrow element type.
fn narrow_array(m: &Module, id: InstId) -> Option<&ArrayShape> {
    m.array_shape(id).filter(|a| narrow(a.ty))
}

/// Whether `id` is a linear-algebra op this pass rewrites: its result and every operand are
/// arrays of one narrow element type.
fn matches(m: &Module, id: InstId) -> bool {
    if !matches!(m.opcode(id), Opcode::Cholesky | Opcode::TriangularSolve) {
        return false;
    }
    let Some(ty) = narrow_array(m, id).map(|a| a.ty) else {
        return false;
    };
    m.operands(id)
        .iter()
        .all(|&o| narrow_array(m, o).is_some_and(|a| a.ty == ty))
}

/// Rewrites `id` into converts around the op in `f32`; returns the final convert.
fn upcast(rw: &mut Rewriter<'_>, id: InstId) -> InstId {
    let m = rw.module();
    let ty = m
        .array_shape(id)
        .expect("matched instructions are arrays")
        .ty;
    let op = m.opcode(id);
    let attrs = m.attrs(id).to_vec();
    let operands: Vec<InstId> = m.operands(id).to_vec();
    let wide: Vec<InstId> = operands
        .into_iter()
        .map(|o| {
            let o = rw.resolve(o);
            add_retyped(
                rw,
                o,
                ElementType::F32,
                Opcode::Convert,
                vec![o],
                Vec::new(),
            )
        })
        .collect();
    // The converts of the operands live where the operands do; the op where `id` does. Both
    // are the same computation (operands never cross computations).
    let inner = add_retyped(rw, id, ElementType::F32, op, wide, attrs);
    add_retyped(rw, id, ty, Opcode::Convert, vec![inner], Vec::new())
}

impl Pass for LinalgUpcast {
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
            let new = upcast(&mut rw, id);
            let op = rw.module().opcode(id);
            take_over(&mut rw, id, new);
            cx.count(op.name(), 1);
        }
        Ok(rw.finish())
    }
}

/// Whether `m` has an instruction `linalg-upcast` rewrites.
pub fn has_narrow_linalg(m: &Module) -> bool {
    m.live_ids().into_par_iter().any(|id| matches(m, id))
}
