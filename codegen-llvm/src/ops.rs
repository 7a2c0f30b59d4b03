//! The scalar semantics of every elementwise op on register values of any element type: the
//! entry point emitters call. Complex operands go to [`crate::complex`], the others to
//! [`crate::real`], whose header states XLA's rules (FTZ, integer edge cases, narrow floats).
//!
//! Invariant: an op on a complex type never reaches [`crate::real`] with complex values, and
//! [`crate::complex`] computes on its parts through [`crate::real`] alone, so the two do not
//! call each other back.

use axle_ir::{ComparisonDirection, ComparisonType, ElementType, Opcode};

use crate::cg::{Cg, Val};
use crate::error::R;

pub use crate::real::{
    bitcast_same_width, clamp, flush, fmax, fmin, not_defined, reduce_precision, select,
    total_order_key,
};

/// Evaluates a unary op (not `convert`, `bitcast-convert`, `reduce-precision`, `copy`).
pub fn unary<'ctx>(cg: &Cg<'ctx>, op: Opcode, in_ty: ElementType, v: Val<'ctx>) -> R<Val<'ctx>> {
    if in_ty.is_complex() {
        crate::complex::unary(cg, op, in_ty, v)
    } else {
        crate::real::unary(cg, op, in_ty, v)
    }
}

/// Evaluates a binary op with operands and result of type `ty` (not `compare`).
pub fn binary<'ctx>(
    cg: &Cg<'ctx>,
    op: Opcode,
    ty: ElementType,
    a: Val<'ctx>,
    c: Val<'ctx>,
) -> R<Val<'ctx>> {
    if ty.is_complex() {
        crate::complex::binary(cg, op, ty, a, c)
    } else {
        crate::real::binary(cg, op, ty, a, c)
    }
}

/// Evaluates `compare` on operands of type `ty`; the result is an `i1`.
pub fn compare<'ctx>(
    cg: &Cg<'ctx>,
    dir: ComparisonDirection,
    cty: ComparisonType,
    ty: ElementType,
    a: Val<'ctx>,
    c: Val<'ctx>,
) -> R<Val<'ctx>> {
    if ty.is_complex() {
        crate::complex::compare(cg, dir, ty, a, c)
    } else {
        crate::real::compare(cg, dir, cty, ty, a, c)
    }
}

/// `convert` of a register value from `from` to `to`.
pub fn convert<'ctx>(
    cg: &Cg<'ctx>,
    from: ElementType,
    to: ElementType,
    v: Val<'ctx>,
) -> R<Val<'ctx>> {
    if from.is_complex() || to.is_complex() {
        crate::complex::convert(cg, from, to, v)
    } else {
        crate::real::convert(cg, from, to, v)
    }
}
