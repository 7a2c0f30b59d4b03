//! Scalar semantics of every elementwise op on register values, following XLA (and the
//! reference evaluator): integer arithmetic wraps, `x / 0` is `-1` (signed) or all ones
//! (unsigned), `INT_MIN / -1` is `INT_MIN`, `x % 0` is `x`, shifts by at least the bit width give
//! `0` (or the sign for arithmetic right shifts), `maximum`/`minimum` propagate NaN (the left
//! operand on ties), float-to-int `convert` saturates and maps NaN to `0`, and `f16`/`bf16`
//! arithmetic is done in `f32` and rounded after every op.
//!
//! Everything here is branch-free (selects, intrinsics, libm calls), so loops stay vectorizable;
//! the one exception is integer `power`, a small loop.

use axle_ir::{ComparisonDirection, ComparisonType, ElementType, Opcode};
use inkwell::values::{FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};

use crate::cg::{bv, Cg, Val};
use crate::error::R;

/// The error for an op that is not defined on element type `ty`.
pub(crate) fn not_defined(op: Opcode, ty: ElementType) -> crate::error::Fail {
    format!(
        "{} is not defined for element type {}",
        op.name(),
        ty.name()
    )
    .into()
}

/// The libm name of a float function for a compute type (`f32` or `f64`).
fn libm_name(base: &str, f64: bool) -> String {
    if f64 {
        base.to_string()
    } else {
        format!("{base}f")
    }
}

/// Evaluates a unary op (not `convert`, `bitcast-convert`, `reduce-precision`, `copy`).
pub(crate) fn unary<'ctx>(
    cg: &Cg<'ctx>,
    op: Opcode,
    in_ty: ElementType,
    v: Val<'ctx>,
) -> R<Val<'ctx>> {
    if in_ty.is_complex() {
        return crate::complex::unary(cg, op, in_ty, v);
    }
    if in_ty.is_pred() {
        return match op {
            Opcode::Not => Ok(bv(cg.b.build_not(v.into_int_value(), "not")?)),
            _ => Err(not_defined(op, in_ty)),
        };
    }
    if in_ty.is_float() {
        let r = float_unary(cg, op, in_ty, v.into_float_value())?;
        return if op == Opcode::IsFinite {
            Ok(r)
        } else {
            cg.round(in_ty, r)
        };
    }
    if in_ty.is_int() {
        return int_unary(cg, op, in_ty, v.into_int_value());
    }
    Err(not_defined(op, in_ty))
}

fn float_unary<'ctx>(
    cg: &Cg<'ctx>,
    op: Opcode,
    ty: ElementType,
    v: FloatValue<'ctx>,
) -> R<Val<'ctx>> {
    use Opcode::*;
    let b = &cg.b;
    let is64 = ty == ElementType::F64;
    let ft = v.get_type();
    let one = ft.const_float(1.0);
    let zero = ft.const_float(0.0);
    let libm = |name: &str| cg.call_libm(&libm_name(name, is64), &[bv(v)]);
    let intr = |name: &str| cg.call_intrinsic(name, &[bv(v)]);
    Ok(match op {
        Abs => intr("llvm.fabs")?,
        Negate => bv(b.build_float_neg(v, "neg")?),
        Sign => {
            let c = cg.call_intrinsic("llvm.copysign", &[bv(one), bv(v)])?;
            let keep = b.build_float_compare(FloatPredicate::UEQ, v, zero, "keep")?;
            b.build_select(keep, bv(v), c, "sign")?
        }
        Floor => intr("llvm.floor")?,
        Ceil => intr("llvm.ceil")?,
        RoundNearestAfz => intr("llvm.round")?,
        RoundNearestEven => intr("llvm.roundeven")?,
        Sqrt => intr("llvm.sqrt")?,
        Rsqrt => {
            let s = intr("llvm.sqrt")?.into_float_value();
            bv(b.build_float_div(one, s, "rsqrt")?)
        }
        Cbrt => libm("cbrt")?,
        Exp if !is64 && !cg.libm_math => crate::math::exp_f32(cg, v)?,
        Exp => libm("exp")?,
        Expm1 => libm("expm1")?,
        Log if !is64 && !cg.libm_math => crate::math::log_f32(cg, v)?,
        Log => libm("log")?,
        Log1p => libm("log1p")?,
        Logistic => {
            let n = b.build_float_neg(v, "n")?;
            let e = if is64 || cg.libm_math {
                cg.call_libm(&libm_name("exp", is64), &[bv(n)])?
            } else {
                crate::math::exp_f32(cg, n)?
            }
            .into_float_value();
            let d = b.build_float_add(one, e, "d")?;
            bv(b.build_float_div(one, d, "logistic")?)
        }
        Sin => libm("sin")?,
        Cos => libm("cos")?,
        Tan => libm("tan")?,
        Tanh if !is64 && !cg.libm_math => crate::math::tanh_f32(cg, v)?,
        Tanh => libm("tanh")?,
        Erf => libm("erf")?,
        Real => bv(v),
        Imag => bv(zero),
        IsFinite => {
            let a = intr("llvm.fabs")?.into_float_value();
            let inf = ft.const_float(f64::INFINITY);
            bv(b.build_float_compare(FloatPredicate::OLT, a, inf, "finite")?)
        }
        _ => return Err(not_defined(op, ty)),
    })
}

fn int_unary<'ctx>(cg: &Cg<'ctx>, op: Opcode, ty: ElementType, v: IntValue<'ctx>) -> R<Val<'ctx>> {
    use Opcode::*;
    let b = &cg.b;
    let it = v.get_type();
    let zero = it.const_zero();
    let signed = ty.is_signed_int();
    Ok(match op {
        Abs => {
            if signed {
                let neg = b.build_int_compare(IntPredicate::SLT, v, zero, "isneg")?;
                let n = b.build_int_sub(zero, v, "n")?;
                b.build_select(neg, n, v, "abs")?
            } else {
                bv(v)
            }
        }
        Negate => bv(b.build_int_sub(zero, v, "neg")?),
        Sign => {
            let gt = if signed {
                b.build_int_compare(IntPredicate::SGT, v, zero, "gt")?
            } else {
                b.build_int_compare(IntPredicate::NE, v, zero, "gt")?
            };
            let gt = b.build_int_z_extend(gt, it, "gt")?;
            if signed {
                let lt = b.build_int_compare(IntPredicate::SLT, v, zero, "lt")?;
                let lt = b.build_int_z_extend(lt, it, "lt")?;
                bv(b.build_int_sub(gt, lt, "sign")?)
            } else {
                bv(gt)
            }
        }
        Not => bv(b.build_not(v, "not")?),
        Popcnt => cg.call_intrinsic("llvm.ctpop", &[bv(v)])?,
        Clz => {
            let f = cg.intrinsic("llvm.ctlz", &[it.into()])?;
            cg.call(f, &[bv(v), bv(cg.i1().const_zero())])?
                .ok_or("ctlz returned nothing")?
        }
        _ => return Err(not_defined(op, ty)),
    })
}

/// Evaluates a binary op with operands and result of type `ty` (not `compare`).
pub(crate) fn binary<'ctx>(
    cg: &Cg<'ctx>,
    op: Opcode,
    ty: ElementType,
    a: Val<'ctx>,
    c: Val<'ctx>,
) -> R<Val<'ctx>> {
    use Opcode::*;
    let b = &cg.b;
    if ty.is_complex() {
        return crate::complex::binary(cg, op, ty, a, c);
    }
    if ty.is_pred() {
        let (x, y) = (a.into_int_value(), c.into_int_value());
        return Ok(bv(match op {
            And | Minimum | Multiply => b.build_and(x, y, "and")?,
            Or | Maximum | Add => b.build_or(x, y, "or")?,
            Xor => b.build_xor(x, y, "xor")?,
            _ => return Err(not_defined(op, ty)),
        }));
    }
    if ty.is_float() {
        let r = float_binary(cg, op, ty, a.into_float_value(), c.into_float_value())?;
        return cg.round(ty, r);
    }
    if ty.is_int() {
        return int_binary(cg, op, ty, a.into_int_value(), c.into_int_value());
    }
    Err(not_defined(op, ty))
}

/// XLA's `maximum` on floats: NaN if either is NaN (the left one first), else the larger, the
/// left operand on ties.
pub(crate) fn fmax<'ctx>(
    cg: &Cg<'ctx>,
    a: FloatValue<'ctx>,
    c: FloatValue<'ctx>,
) -> R<FloatValue<'ctx>> {
    let b = &cg.b;
    let take_c = b.build_float_compare(FloatPredicate::ULT, a, c, "ult")?;
    let r = b.build_select(take_c, c, a, "max")?.into_float_value();
    let anan = b.build_float_compare(FloatPredicate::UNO, a, a, "anan")?;
    Ok(b.build_select(anan, a, r, "max")?.into_float_value())
}

/// XLA's `minimum` on floats.
pub(crate) fn fmin<'ctx>(
    cg: &Cg<'ctx>,
    a: FloatValue<'ctx>,
    c: FloatValue<'ctx>,
) -> R<FloatValue<'ctx>> {
    let b = &cg.b;
    let take_c = b.build_float_compare(FloatPredicate::UGT, a, c, "ugt")?;
    let r = b.build_select(take_c, c, a, "min")?.into_float_value();
    let anan = b.build_float_compare(FloatPredicate::UNO, a, a, "anan")?;
    Ok(b.build_select(anan, a, r, "min")?.into_float_value())
}

fn float_binary<'ctx>(
    cg: &Cg<'ctx>,
    op: Opcode,
    ty: ElementType,
    a: FloatValue<'ctx>,
    c: FloatValue<'ctx>,
) -> R<Val<'ctx>> {
    use Opcode::*;
    let b = &cg.b;
    let is64 = ty == ElementType::F64;
    Ok(match op {
        Add => bv(b.build_float_add(a, c, "add")?),
        Subtract => bv(b.build_float_sub(a, c, "sub")?),
        Multiply => bv(b.build_float_mul(a, c, "mul")?),
        Divide => bv(b.build_float_div(a, c, "div")?),
        Remainder => bv(b.build_float_rem(a, c, "rem")?),
        Maximum => bv(fmax(cg, a, c)?),
        Minimum => bv(fmin(cg, a, c)?),
        Power => {
            let ft = a.get_type();
            let one = ft.const_float(1.0);
            let p = cg.call_libm(&libm_name("pow", is64), &[bv(a), bv(c)])?;
            let x1 = b.build_float_compare(FloatPredicate::OEQ, a, one, "x1")?;
            let y0 = b.build_float_compare(FloatPredicate::OEQ, c, ft.const_zero(), "y0")?;
            let t = b.build_or(x1, y0, "trivial")?;
            b.build_select(t, bv(one), p, "pow")?
        }
        Atan2 => cg.call_libm(&libm_name("atan2", is64), &[bv(a), bv(c)])?,
        _ => return Err(not_defined(op, ty)),
    })
}

fn int_binary<'ctx>(
    cg: &Cg<'ctx>,
    op: Opcode,
    ty: ElementType,
    x: IntValue<'ctx>,
    y: IntValue<'ctx>,
) -> R<Val<'ctx>> {
    use Opcode::*;
    let b = &cg.b;
    let it = x.get_type();
    let bits = ty.bits() as u64;
    let signed = ty.is_signed_int();
    let zero = it.const_zero();
    let one = it.const_int(1, false);
    let ones = it.const_all_ones();
    Ok(bv(match op {
        Add => b.build_int_add(x, y, "add")?,
        Subtract => b.build_int_sub(x, y, "sub")?,
        Multiply => b.build_int_mul(x, y, "mul")?,
        Divide | Remainder => {
            let yz = b.build_int_compare(IntPredicate::EQ, y, zero, "y0")?;
            let bad = if signed {
                let min = it.const_int(1u64 << (bits - 1), false);
                let xm = b.build_int_compare(IntPredicate::EQ, x, min, "xmin")?;
                let ym = b.build_int_compare(IntPredicate::EQ, y, ones, "ym1")?;
                let ovf = b.build_and(xm, ym, "ovf")?;
                b.build_or(yz, ovf, "bad")?
            } else {
                yz
            };
            let ys = b.build_select(bad, one, y, "ysafe")?.into_int_value();
            if op == Divide {
                let q = if signed {
                    b.build_int_signed_div(x, ys, "div")?
                } else {
                    b.build_int_unsigned_div(x, ys, "div")?
                };
                b.build_select(yz, ones, q, "div")?.into_int_value()
            } else {
                let r = if signed {
                    b.build_int_signed_rem(x, ys, "rem")?
                } else {
                    b.build_int_unsigned_rem(x, ys, "rem")?
                };
                b.build_select(yz, x, r, "rem")?.into_int_value()
            }
        }
        Maximum | Minimum => {
            let pred = match (op == Maximum, signed) {
                (true, true) => IntPredicate::SGT,
                (true, false) => IntPredicate::UGT,
                (false, true) => IntPredicate::SLT,
                (false, false) => IntPredicate::ULT,
            };
            // Ties keep the left operand, like the evaluator's `max`/`min` (equal anyway).
            let c = b.build_int_compare(pred, y, x, "cmp")?;
            b.build_select(c, y, x, "mm")?.into_int_value()
        }
        And => b.build_and(x, y, "and")?,
        Or => b.build_or(x, y, "or")?,
        Xor => b.build_xor(x, y, "xor")?,
        ShiftLeft | ShiftRightLogical | ShiftRightArithmetic => {
            let w = it.const_int(bits, false);
            let big = b.build_int_compare(IntPredicate::UGE, y, w, "big")?;
            match op {
                ShiftLeft => {
                    let ys = b.build_select(big, zero, y, "amt")?.into_int_value();
                    let s = b.build_left_shift(x, ys, "shl")?;
                    b.build_select(big, zero, s, "shl")?.into_int_value()
                }
                ShiftRightLogical => {
                    let ys = b.build_select(big, zero, y, "amt")?.into_int_value();
                    let s = b.build_right_shift(x, ys, false, "lshr")?;
                    b.build_select(big, zero, s, "lshr")?.into_int_value()
                }
                _ => {
                    let top = it.const_int(bits - 1, false);
                    let ys = b.build_select(big, top, y, "amt")?.into_int_value();
                    b.build_right_shift(x, ys, true, "ashr")?
                }
            }
        }
        Power => return int_power(cg, ty, x, y),
        _ => return Err(not_defined(op, ty)),
    }))
}

/// XLA's integer power: exponentiation by squaring with wraparound; a negative exponent gives
/// `1` for a base of `1` and `0` otherwise.
fn int_power<'ctx>(
    cg: &Cg<'ctx>,
    ty: ElementType,
    x: IntValue<'ctx>,
    y: IntValue<'ctx>,
) -> R<Val<'ctx>> {
    let b = &cg.b;
    let it = x.get_type();
    let zero = it.const_zero();
    let one = it.const_int(1, false);
    let init = [bv(one), bv(x), bv(y)];
    let out = cg.while_loop(
        &init,
        |s| {
            let e = s[2].into_int_value();
            let pred = if ty.is_signed_int() {
                IntPredicate::SGT
            } else {
                IntPredicate::UGT
            };
            Ok(b.build_int_compare(pred, e, zero, "more")?)
        },
        |s| {
            let (acc, base, e) = (
                s[0].into_int_value(),
                s[1].into_int_value(),
                s[2].into_int_value(),
            );
            let odd = b.build_and(e, one, "odd")?;
            let odd = b.build_int_compare(IntPredicate::NE, odd, zero, "odd")?;
            let m = b.build_int_mul(acc, base, "m")?;
            let acc = b.build_select(odd, m, acc, "acc")?;
            let base = b.build_int_mul(base, base, "sq")?;
            let e = b.build_right_shift(e, one, false, "e")?;
            Ok(vec![acc, bv(base), bv(e)])
        },
    )?;
    let r = out[0].into_int_value();
    let x1 = b.build_int_compare(IntPredicate::EQ, x, one, "x1")?;
    let y0 = b.build_int_compare(IntPredicate::EQ, y, zero, "y0")?;
    let triv = b.build_or(x1, y0, "triv")?;
    let r = if ty.is_signed_int() {
        let neg = b.build_int_compare(IntPredicate::SLT, y, zero, "neg")?;
        b.build_select(neg, zero, r, "pow")?.into_int_value()
    } else {
        r
    };
    Ok(b.build_select(triv, one, r, "pow")?)
}

/// The integer key whose signed order is XLA's total order on floats.
fn total_order_key<'ctx>(cg: &Cg<'ctx>, v: FloatValue<'ctx>) -> R<IntValue<'ctx>> {
    let b = &cg.b;
    let bits = if v.get_type() == cg.f64() { 64 } else { 32 };
    let it = cg.int_ty(bits);
    let k = b.build_bit_cast(v, it, "bits")?.into_int_value();
    let s = b.build_right_shift(k, it.const_int(bits as u64 - 1, false), true, "s")?;
    let s = b.build_right_shift(s, it.const_int(1, false), false, "s")?;
    Ok(b.build_xor(k, s, "key")?)
}

/// Evaluates `compare` on operands of type `ty`; the result is an `i1`.
pub(crate) fn compare<'ctx>(
    cg: &Cg<'ctx>,
    dir: ComparisonDirection,
    cty: ComparisonType,
    ty: ElementType,
    a: Val<'ctx>,
    c: Val<'ctx>,
) -> R<Val<'ctx>> {
    use ComparisonDirection as D;
    let b = &cg.b;
    if ty.is_complex() {
        return crate::complex::compare(cg, dir, ty, a, c);
    }
    if ty.is_float() {
        let (x, y) = (a.into_float_value(), c.into_float_value());
        if cty == ComparisonType::TotalOrder {
            let (kx, ky) = (total_order_key(cg, x)?, total_order_key(cg, y)?);
            return Ok(bv(b.build_int_compare(
                int_pred(dir, true),
                kx,
                ky,
                "cmp",
            )?));
        }
        let p = match dir {
            D::Eq => FloatPredicate::OEQ,
            D::Ne => FloatPredicate::UNE,
            D::Lt => FloatPredicate::OLT,
            D::Le => FloatPredicate::OLE,
            D::Gt => FloatPredicate::OGT,
            D::Ge => FloatPredicate::OGE,
        };
        return Ok(bv(b.build_float_compare(p, x, y, "cmp")?));
    }
    if ty.is_int() || ty.is_pred() {
        let signed = ty.is_signed_int();
        return Ok(bv(b.build_int_compare(
            int_pred(dir, signed),
            a.into_int_value(),
            c.into_int_value(),
            "cmp",
        )?));
    }
    Err(format!("compare is not defined for {}", ty.name()).into())
}

fn int_pred(dir: ComparisonDirection, signed: bool) -> IntPredicate {
    use ComparisonDirection as D;
    match (dir, signed) {
        (D::Eq, _) => IntPredicate::EQ,
        (D::Ne, _) => IntPredicate::NE,
        (D::Lt, true) => IntPredicate::SLT,
        (D::Le, true) => IntPredicate::SLE,
        (D::Gt, true) => IntPredicate::SGT,
        (D::Ge, true) => IntPredicate::SGE,
        (D::Lt, false) => IntPredicate::ULT,
        (D::Le, false) => IntPredicate::ULE,
        (D::Gt, false) => IntPredicate::UGT,
        (D::Ge, false) => IntPredicate::UGE,
    }
}

/// `select(p, a, b)` on an `i1` predicate.
pub(crate) fn select<'ctx>(
    cg: &Cg<'ctx>,
    p: Val<'ctx>,
    a: Val<'ctx>,
    c: Val<'ctx>,
) -> R<Val<'ctx>> {
    Ok(cg.b.build_select(p.into_int_value(), a, c, "sel")?)
}

/// `clamp(lo, x, hi)`.
pub(crate) fn clamp<'ctx>(
    cg: &Cg<'ctx>,
    ty: ElementType,
    lo: Val<'ctx>,
    x: Val<'ctx>,
    hi: Val<'ctx>,
) -> R<Val<'ctx>> {
    let b = &cg.b;
    if ty.is_pred() {
        let t = b.build_or(x.into_int_value(), lo.into_int_value(), "t")?;
        return Ok(bv(b.build_and(t, hi.into_int_value(), "clamp")?));
    }
    if ty.is_float() {
        let (l, v, h) = (
            lo.into_float_value(),
            x.into_float_value(),
            hi.into_float_value(),
        );
        let lt = b.build_float_compare(FloatPredicate::OLT, v, l, "lt")?;
        let t = b.build_select(lt, l, v, "t")?.into_float_value();
        let lt = b.build_float_compare(FloatPredicate::OLT, t, h, "lt")?;
        let r = b.build_select(lt, t, h, "r")?;
        let hn = b.build_float_compare(FloatPredicate::UNO, h, h, "hn")?;
        let r = b.build_select(hn, bv(h), r, "r")?;
        let vn = b.build_float_compare(FloatPredicate::UNO, v, v, "vn")?;
        let r = b.build_select(vn, bv(v), r, "r")?;
        let ln = b.build_float_compare(FloatPredicate::UNO, l, l, "ln")?;
        return Ok(b.build_select(ln, bv(l), r, "clamp")?);
    }
    if ty.is_int() {
        let s = ty.is_signed_int();
        let (l, v, h) = (lo.into_int_value(), x.into_int_value(), hi.into_int_value());
        let lt = b.build_int_compare(int_pred(ComparisonDirection::Lt, s), v, l, "lt")?;
        let t = b.build_select(lt, l, v, "t")?.into_int_value();
        let lt = b.build_int_compare(int_pred(ComparisonDirection::Lt, s), t, h, "lt")?;
        return Ok(b.build_select(lt, t, h, "clamp")?);
    }
    Err(format!("clamp is not defined for {}", ty.name()).into())
}

/// `convert` of a register value from `from` to `to`.
pub(crate) fn convert<'ctx>(
    cg: &Cg<'ctx>,
    from: ElementType,
    to: ElementType,
    v: Val<'ctx>,
) -> R<Val<'ctx>> {
    let b = &cg.b;
    if from == to {
        return Ok(v);
    }
    if from.is_complex() || to.is_complex() {
        return crate::complex::convert(cg, from, to, v);
    }
    let to_reg = cg.reg_ty(to)?;
    if to.is_pred() {
        return Ok(bv(if from.is_float() {
            let x = v.into_float_value();
            b.build_float_compare(FloatPredicate::UNE, x, x.get_type().const_zero(), "ne0")?
        } else {
            let x = v.into_int_value();
            b.build_int_compare(IntPredicate::NE, x, x.get_type().const_zero(), "ne0")?
        }));
    }
    if from.is_pred() || from.is_int() {
        let x = v.into_int_value();
        let signed = from.is_signed_int();
        if to.is_int() {
            let it = to_reg.into_int_type();
            return Ok(bv(b.build_int_cast_sign_flag(x, it, signed, "icast")?));
        }
        if to.is_float() {
            let ft = if to == ElementType::F64 {
                cg.f64()
            } else {
                cg.f32()
            };
            let f = if signed {
                b.build_signed_int_to_float(x, ft, "i2f")?
            } else {
                b.build_unsigned_int_to_float(x, ft, "u2f")?
            };
            return cg.round(to, bv(f));
        }
    }
    if from.is_float() {
        let x = v.into_float_value();
        if to.is_int() {
            let name = if to.is_signed_int() {
                "llvm.fptosi.sat"
            } else {
                "llvm.fptoui.sat"
            };
            let f = cg.intrinsic(name, &[to_reg, x.get_type().into()])?;
            return cg
                .call(f, &[bv(x)])?
                .ok_or_else(|| "fptosi.sat returned nothing".into());
        }
        if to.is_float() {
            return Ok(match (from == ElementType::F64, to) {
                (false, ElementType::F64) => bv(b.build_float_ext(x, cg.f64(), "ext")?),
                (false, _) => cg.round(to, v)?,
                (true, ElementType::F16) => {
                    // One rounding straight from f64, as LLVM's fptrunc double -> half does.
                    let h = b.build_float_trunc(x, cg.ctx.f16_type(), "d2h")?;
                    bv(b.build_float_ext(h, cg.f32(), "h2f")?)
                }
                (true, _) => {
                    let f = b.build_float_trunc(x, cg.f32(), "d2f")?;
                    cg.round(to, bv(f))?
                }
            });
        }
    }
    Err(format!(
        "convert from {} to {} is not supported",
        from.name(),
        to.name()
    )
    .into())
}

/// `bitcast-convert` between types of equal width.
pub(crate) fn bitcast_same_width<'ctx>(
    cg: &Cg<'ctx>,
    from: ElementType,
    to: ElementType,
    v: Val<'ctx>,
) -> R<Val<'ctx>> {
    if from.is_complex() || to.is_complex() {
        return Err("bitcast-convert of complex types is not supported".into());
    }
    let m = cg.to_mem(from, v)?;
    let bits = cg.b.build_bit_cast(m, cg.mem_ty(to)?, "bc")?;
    cg.load_form(to, bits)
}

/// XLA's `reduce-precision` to `eb` exponent and `mb` mantissa bits.
pub(crate) fn reduce_precision<'ctx>(
    cg: &Cg<'ctx>,
    ty: ElementType,
    eb: u32,
    mb: u32,
    v: Val<'ctx>,
) -> R<Val<'ctx>> {
    let (nbits, src_eb, src_mb) = match ty {
        ElementType::F32 => (32u32, 8u32, 23u32),
        ElementType::F64 => (64, 11, 52),
        ElementType::F16 => (16, 5, 10),
        ElementType::BF16 => (16, 8, 7),
        _ => return Err(format!("reduce-precision is not defined for {}", ty.name()).into()),
    };
    let b = &cg.b;
    let it = cg.int_ty(nbits);
    let k = |x: u64| it.const_int(x, false);
    let x = cg.to_mem(ty, v)?;
    let x = b.build_bit_cast(x, it, "bits")?.into_int_value();
    let sign_bit = 1u64 << (nbits - 1);
    let exp_mask = ((1u64 << src_eb) - 1) << src_mb;
    let mag = b.build_and(x, k(!sign_bit & mask(nbits)), "mag")?;
    let is_nan = b.build_int_compare(IntPredicate::UGT, mag, k(exp_mask), "isnan")?;
    let mut r = x;
    if mb < src_mb {
        let last = 1u64 << (src_mb - mb);
        let base_bias = (last >> 1) - 1;
        let lb = b.build_and(r, k(last), "lb")?;
        let lb = b.build_right_shift(lb, k((src_mb - mb) as u64), false, "lb")?;
        let bias = b.build_int_add(lb, k(base_bias), "bias")?;
        let t = b.build_int_add(r, bias, "t")?;
        r = b.build_and(t, k(!(last - 1) & mask(nbits)), "trunc")?;
    }
    if eb < src_eb {
        let bias = (1u64 << (src_eb - 1)) - 1;
        let reduced_bias = (1u64 << (eb - 1)) - 1;
        let max_e = bias + reduced_bias;
        let min_e = bias - reduced_bias;
        let e = b.build_and(r, k(exp_mask), "e")?;
        let signed_zero = b.build_and(r, k(sign_bit), "sz")?;
        let signed_inf = b.build_or(signed_zero, k(exp_mask), "si")?;
        let over = b.build_int_compare(IntPredicate::UGT, e, k(max_e << src_mb), "over")?;
        r = b.build_select(over, signed_inf, r, "r")?.into_int_value();
        let under = b.build_int_compare(IntPredicate::ULE, e, k(min_e << src_mb), "under")?;
        r = b.build_select(under, signed_zero, r, "r")?.into_int_value();
    }
    let nan_val = if mb > 0 { x } else { k(exp_mask) };
    let r = b.build_select(is_nan, nan_val, r, "rp")?;
    let m = b.build_bit_cast(r, cg.mem_ty(ty)?, "m")?;
    cg.load_form(ty, m)
}

fn mask(bits: u32) -> u64 {
    if bits == 64 {
        u64::MAX
    } else {
        (1u64 << bits) - 1
    }
}
