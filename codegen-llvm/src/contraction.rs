//! What one element of a `dot` or `convolution` is, for every backend: the dimension numbers
//! of a dot, the accumulation type (`f32` for `f32` and narrower floats, `f64`, wrapping `i64`
//! for integers and pred, `c64` for complex unless `c128` or `f64` is involved, then `c128`,
//! as the evaluator accumulates) and one accumulation step (a fused multiply-add for `f32` and
//! `f64`, as the evaluator's). The backends' loops and tilings are their own.

use axle_ir::{AttrKey, ElementType, InstId};

use crate::cg::{Cg, Val};
use crate::error::R;
use crate::ops;

/// The accumulation type of a dot or convolution with result `out` and operands `a`, `b`.
pub fn acc_type(out: ElementType, a: ElementType, b: ElementType) -> R<ElementType> {
    if out.is_complex() || a.is_complex() || b.is_complex() {
        // `c64` unless `c128` (or `f64`) is involved, as XLA and the evaluator accumulate:
        // products of large `c64` values overflow to infinities (and `inf - inf` to NaN) where
        // `c128` kept them finite until the final rounding (cpu campaign seed 17955192027,
        // case 4551).
        if [out, a, b]
            .iter()
            .any(|t| matches!(t, ElementType::C128 | ElementType::F64))
        {
            Ok(ElementType::C128)
        } else {
            Ok(ElementType::C64)
        }
    } else if out.is_float() {
        if out == ElementType::F64 || a == ElementType::F64 || b == ElementType::F64 {
            Ok(ElementType::F64)
        } else {
            Ok(ElementType::F32)
        }
    } else if out.is_int() || out.is_pred() {
        // A pred result is true where some product is (XLA's `dot` on `pred`): the count of
        // true products, converted to pred.
        Ok(ElementType::S64)
    } else {
        Err(format!("dot and convolution are not supported for {}", out.name()).into())
    }
}

/// `acc + a * b` in the accumulation type: one fused multiply-add (`llvm.fma`, one rounding)
/// for real `f32` and `f64` accumulators, as the evaluator and XLA CPU's kernels contract a
/// dot or convolution (a two-term sum is `fma(a1, b1, a0 * b0)`; unfused, terms far larger
/// than the result cancel to another value, cpu campaign seed 1795530001, case 8640); a
/// product then a sum otherwise (complex, integer).
pub fn mul_add<'ctx>(
    cg: &Cg<'ctx>,
    acc_ty: ElementType,
    acc: Val<'ctx>,
    a: Val<'ctx>,
    b: Val<'ctx>,
) -> R<Val<'ctx>> {
    if matches!(acc_ty, ElementType::F32 | ElementType::F64) {
        return cg.call_intrinsic("llvm.fma", &[a, b, acc]);
    }
    let p = ops::binary(cg, axle_ir::Opcode::Multiply, acc_ty, a, b)?;
    ops::binary(cg, axle_ir::Opcode::Add, acc_ty, acc, p)
}

/// The dimension numbers of a dot: batch and contracting dimensions of both sides and the free
/// dimensions.
pub struct DotDims {
    /// The left operand's batch dimensions.
    pub lb: Vec<i64>,
    /// The right operand's batch dimensions (paired with `lb`).
    pub rb: Vec<i64>,
    /// The left operand's contracting dimensions.
    pub lc: Vec<i64>,
    /// The right operand's contracting dimensions (paired with `lc`).
    pub rc: Vec<i64>,
    /// The left operand's free dimensions, in order (the output's after the batch ones).
    pub lfree: Vec<i64>,
    /// The right operand's free dimensions, in order (the output's last ones).
    pub rfree: Vec<i64>,
}

/// The dimension numbers of `dot` `id` whose operands have ranks `lrank` and `rrank`.
pub fn dot_dims(m: &axle_ir::Module, id: InstId, lrank: usize, rrank: usize) -> R<DotDims> {
    let get = |k: AttrKey| m.ints_attr(id, &k).unwrap_or(&[]).to_vec();
    let lb = get(AttrKey::LhsBatchDims);
    let rb = get(AttrKey::RhsBatchDims);
    let lc = get(AttrKey::LhsContractingDims);
    let rc = get(AttrKey::RhsContractingDims);
    if lb.len() != rb.len() || lc.len() != rc.len() {
        return Err("dot dimension numbers do not pair up".into());
    }
    let lfree = (0..lrank as i64)
        .filter(|d| !lb.contains(d) && !lc.contains(d))
        .collect();
    let rfree = (0..rrank as i64)
        .filter(|d| !rb.contains(d) && !rc.contains(d))
        .collect();
    Ok(DotDims {
        lb,
        rb,
        lc,
        rc,
        lfree,
        rfree,
    })
}
