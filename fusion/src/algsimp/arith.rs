//! Arithmetic rules: identities, absorbing elements and sign algebra that hold exactly (see the
//! pass documentation for why each float rule is IEEE-safe).

use axle_ir::{ElementType, InstId, Opcode};

use super::{Cx, Hit};
use crate::rewrite::{
    elem_ty, forward, int_range, is_float_splat, is_float_zero, is_int_splat, is_one, splat,
    splat_nodes, Node, Num, Rewrite, ShapeSpec, Val,
};

fn hit(rule: &'static str, r: Option<Rewrite>) -> Hit {
    r.map(|r| (rule, r))
}

fn build1(op: Opcode, id: InstId, ops: &[InstId]) -> Rewrite {
    Rewrite::Build(vec![Node::new(
        op,
        ShapeSpec::Of(id),
        ops.iter().map(|&o| Val::Old(o)).collect(),
    )])
}

fn negated(m: &axle_ir::Module, x: InstId) -> Option<InstId> {
    // f8e8m0fnu has no sign: its negation of any value is NaN, so no rule may see through it.
    (m.opcode(x) == Opcode::Negate && elem_ty(m, x) != Some(ElementType::F8E8M0FNU))
        .then(|| m.operands(x)[0])
}

pub(super) fn rules(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let ty = elem_ty(m, id)?;
    if ty.is_complex() {
        // Only sign flips are exact on complex numbers.
        if m.opcode(id) == Opcode::Negate {
            let x = m.operands(id)[0];
            if let Some(y) = negated(m, x) {
                return hit("neg-neg", forward(m, id, y));
            }
        }
        return None;
    }
    let float = ty.is_float();
    let ops = m.operands(id);
    use Opcode::*;
    match m.opcode(id) {
        Add => {
            let (a, b) = (ops[0], ops[1]);
            for (x, z) in [(a, b), (b, a)] {
                if !float && is_int_splat(m, z, 0) {
                    return hit("add-zero", forward(m, id, x));
                }
                if float && is_float_zero(m, z, true) {
                    return hit("add-neg-zero", forward(m, id, x));
                }
            }
            // Integers only: on floats `x + (-y)` and `x - y` differ in the sign of a NaN
            // result, which total-order compares and bitcasts can see.
            if float {
                return None;
            }
            if let Some(y) = negated(m, b) {
                return hit("add-negate", Some(build1(Subtract, id, &[a, y])));
            }
            if let Some(y) = negated(m, a) {
                return hit("add-negate", Some(build1(Subtract, id, &[b, y])));
            }
            None
        }
        Subtract => {
            let (a, b) = (ops[0], ops[1]);
            if (!float && is_int_splat(m, b, 0)) || (float && is_float_zero(m, b, false)) {
                return hit("sub-zero", forward(m, id, a));
            }
            // Integers only (float `x - x` is NaN for an infinity or a NaN).
            if !float && a == b {
                return hit(
                    "sub-self",
                    splat_nodes(m, id, Num::Int(0)).map(Rewrite::Build),
                );
            }
            // Integers only (the sign of a NaN result would change on floats).
            if float {
                return None;
            }
            if let Some(y) = negated(m, b) {
                return hit("sub-negate", Some(build1(Add, id, &[a, y])));
            }
            if is_int_splat(m, a, 0) {
                return hit("zero-sub", Some(build1(Negate, id, &[b])));
            }
            None
        }
        Multiply => {
            let (a, b) = (ops[0], ops[1]);
            for (x, c) in [(a, b), (b, a)] {
                if is_one(m, c) {
                    return hit("mul-one", forward(m, id, x));
                }
                if !float && is_int_splat(m, c, 0) {
                    return hit("mul-zero", forward(m, id, c));
                }
                // Integers only (on floats `x * -1` keeps a NaN's sign, `-x` flips it).
                if ty.is_signed_int() && is_int_splat(m, c, -1) {
                    return hit("mul-neg-one", Some(build1(Negate, id, &[x])));
                }
            }
            if float {
                return None;
            }
            if let (Some(x), Some(y)) = (negated(m, a), negated(m, b)) {
                return hit("mul-negate-negate", Some(build1(Multiply, id, &[x, y])));
            }
            None
        }
        Divide => {
            let (a, b) = (ops[0], ops[1]);
            if is_one(m, b) {
                return hit("div-one", forward(m, id, a));
            }
            if float {
                if let Some(Num::Float(c)) = splat(m, b) {
                    if let Some(r) = exact_reciprocal(ty, c) {
                        let mut nodes = splat_nodes(m, id, Num::Float(r))?;
                        let k = nodes.len() as u32 - 1;
                        nodes.push(Node::new(
                            Multiply,
                            ShapeSpec::Of(id),
                            vec![Val::Old(a), Val::New(k)],
                        ));
                        return Some(("div-pow2", Rewrite::Build(nodes)));
                    }
                }
            }
            None
        }
        Maximum | Minimum => {
            let (a, b) = (ops[0], ops[1]);
            if a == b {
                return hit("max-self", forward(m, id, a));
            }
            let is_max = m.opcode(id) == Maximum;
            for (x, c) in [(a, b), (b, a)] {
                let Some(v) = splat(m, c) else { continue };
                if float {
                    let identity = if is_max {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    };
                    if v == Num::Float(identity) {
                        return hit("max-identity", forward(m, id, x));
                    }
                } else {
                    let (lo, hi) = int_range(ty);
                    let (identity, absorbing) = if is_max { (lo, hi) } else { (hi, lo) };
                    if v == Num::Int(identity) {
                        return hit("max-identity", forward(m, id, x));
                    }
                    if v == Num::Int(absorbing) {
                        return hit("max-absorb", forward(m, id, c));
                    }
                }
            }
            None
        }
        Power => {
            let (a, b) = (ops[0], ops[1]);
            if is_one(m, b) {
                return hit("pow-one", forward(m, id, a));
            }
            if matches!(splat(m, b), Some(Num::Int(0))) || is_float_splat(m, b, 0.0) {
                let one = if float { Num::Float(1.0) } else { Num::Int(1) };
                return hit("pow-zero", splat_nodes(m, id, one).map(Rewrite::Build));
            }
            None
        }
        Negate => {
            let x = ops[0];
            negated(m, x).and_then(|y| hit("neg-neg", forward(m, id, y)))
        }
        Abs => {
            let x = ops[0];
            match m.opcode(x) {
                Abs => hit("abs-abs", forward(m, id, x)),
                Negate => negated(m, x).and_then(|y| hit("abs-neg", Some(build1(Abs, id, &[y])))),
                _ => None,
            }
        }
        Floor | Ceil | RoundNearestAfz | RoundNearestEven | Sign => {
            let x = ops[0];
            (m.opcode(x) == m.opcode(id))
                .then(|| hit("idempotent-unary", forward(m, id, x)))
                .flatten()
        }
        ShiftLeft | ShiftRightArithmetic | ShiftRightLogical => {
            let (a, b) = (ops[0], ops[1]);
            is_int_splat(m, b, 0)
                .then(|| hit("shift-zero", forward(m, id, a)))
                .flatten()
        }
        _ => None,
    }
}

/// `1/c` when `c` and `1/c` are both normal powers of two of type `ty`, so that `x / c` and
/// `x * (1/c)` are the same correctly rounded value for every `x`.
fn exact_reciprocal(ty: ElementType, c: f64) -> Option<f64> {
    let (emin, emax) = match ty {
        ElementType::F16 => (-14, 15),
        ElementType::BF16 | ElementType::F32 => (-126, 127),
        ElementType::F64 => (-1022, 1023),
        _ => return None,
    };
    if !c.is_finite() || c == 0.0 {
        return None;
    }
    let a = c.abs();
    let bits = a.to_bits();
    if bits & ((1u64 << 52) - 1) != 0 {
        return None; // not a power of two (or subnormal in f64)
    }
    let k = ((bits >> 52) as i64) - 1023;
    if k < emin || k > emax || -k < emin || -k > emax {
        return None;
    }
    Some(1.0 / c)
}
