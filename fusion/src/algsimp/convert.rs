//! Conversion rules: no-op conversions, copies and sharding annotations, and chains of
//! conversions whose first step loses nothing.

use axle_ir::{AttrKey, AttrValue, ElementType, InstId, Opcode};

use super::{Cx, Hit};
use crate::rewrite::{elem_ty, forward, int_range, Node, Rewrite, ShapeSpec, Val};

/// Whether converting `from` to `to` keeps every value exactly (sign of zero, infinities and NaN
/// included).
pub(crate) fn lossless(from: ElementType, to: ElementType) -> bool {
    use ElementType::*;
    if from == to {
        return true;
    }
    if from.is_pred() {
        // f8e8m0fnu has no zero: `false` becomes NaN there.
        return to.is_int() || (to.is_float() && to != F8E8M0FNU);
    }
    if from.is_int() && to.is_int() {
        let (lo, hi) = int_range(from);
        let (tlo, thi) = int_range(to);
        return tlo <= lo && hi <= thi;
    }
    if from.is_int() && to.is_float() {
        // Integers of at most `precision` significant bits are exact.
        let precision = match to {
            F16 => 11,
            BF16 => 8,
            F32 => 24,
            F64 => 53,
            _ => return false,
        };
        let (lo, hi) = int_range(from);
        return hi <= (1i128 << precision) && lo >= -(1i128 << precision);
    }
    matches!((from, to), (F16 | BF16, F32 | F64) | (F32, F64))
}

pub(super) fn rules(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let x = m.operands(id)[0];
    let (rty, xty) = (elem_ty(m, id)?, elem_ty(m, x)?);
    match m.opcode(id) {
        Opcode::Convert => {
            if rty == xty {
                return forward(m, id, x).map(|r| ("convert-same-type", r));
            }
            if m.opcode(x) != Opcode::Convert {
                return None;
            }
            let w = m.operands(x)[0];
            let wty = elem_ty(m, w)?;
            if wty.is_complex() || xty.is_complex() || rty.is_complex() || !lossless(wty, xty) {
                return None;
            }
            // Integer -> float -> integer saturates where integer -> integer wraps: only when
            // every value of the source fits the result do both agree.
            if wty.is_int() && xty.is_float() && rty.is_int() {
                let (lo, hi) = int_range(wty);
                let (rlo, rhi) = int_range(rty);
                if lo < rlo || hi > rhi {
                    return None;
                }
            }
            if wty == rty {
                return forward(m, id, w).map(|r| ("convert-convert", r));
            }
            Some((
                "convert-convert",
                Rewrite::Build(vec![Node::new(
                    Opcode::Convert,
                    ShapeSpec::Of(id),
                    vec![Val::Old(w)],
                )]),
            ))
        }
        Opcode::BitcastConvert if rty == xty => {
            forward(m, id, x).map(|r| ("bitcast-convert-same-type", r))
        }
        Opcode::Copy => forward(m, id, x).map(|r| ("copy-same-layout", r)),
        _ => None,
    }
}

/// `custom-call(x)` of a sharding annotation target ([`axle_ir::SHARDING_ANNOTATIONS`]: what
/// `jax.lax.with_sharding_constraint`, JAX's lowering and Shardy write) whose result has `x`'s
/// shape: the identity (a sharding changes where the value lives, not what it is; where it
/// would change the shape, the shapes differ and the rule does not apply).
pub(super) fn annotation(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let target = match m.attr(id, &AttrKey::CustomCallTarget) {
        Some(AttrValue::Str(s)) | Some(AttrValue::Raw(s)) | Some(AttrValue::Ident(s)) => s,
        _ => return None,
    };
    match m.operands(id) {
        [x] if axle_ir::SHARDING_ANNOTATIONS.contains(&&**target) => {
            forward(m, id, *x).map(|r| ("sharding-annotation", r))
        }
        _ => None,
    }
}
