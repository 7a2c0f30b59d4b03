//! Scalar semantics of every elementwise op on register values of the real (non-complex) types
//! (complex ones are [`crate::complex`]; [`crate::ops`] dispatches between them), following XLA (and the
//! reference evaluator): integer arithmetic wraps, `x / 0` is `-1` (signed) or all ones
//! (unsigned), `INT_MIN / -1` is `INT_MIN`, `x % 0` is `x`, `INT_MIN % -1` is `0`, shifts by at
//! least the bit width give `0` (or the sign for arithmetic right shifts), `mulhi` is the high
//! half of the double-width product (of the 8-bit product for `s4`/`u4`), integer `power`
//! squares over the exponent's low six bits, float `maximum`/`minimum` propagate NaN (the left
//! one first) and order `-0` below `+0`, float-to-int `convert` saturates and maps NaN to `0`,
//! and the floats narrower than `f32` (`f16`, `bf16`, the 8- and 4-bit formats) are computed in
//! `f32` and rounded after every op.
//!
//! Subnormals: with FTZ (the default, as XLA's CPU backend runs) the hardware flushes operands
//! and results of float instructions; ops whose results come from anything else (selects,
//! libm calls, rounding intrinsics) flush their `f32`/`f64`/`bf16`/`f8e8m0fnu` operands and
//! results explicitly ([`flush`]), with integer instructions; `power` reads its operands exactly
//! (its `y == 0` test is a bit test) and flushes only its result, `remainder` reads only its
//! divisor flushed (XLA's libm calls). `abs`, `negate`, total-order compares,
//! `reduce-precision`, bit-level converts and converts from the 8- and 4-bit floats stay exact,
//! as in XLA. For `f8e8m0fnu` (no zero) a result that flushes to zero is stored as NaN.
//!
//! Everything here is branch-free (selects, intrinsics, libm calls), so loops stay vectorizable.

use axle_ir::{ComparisonDirection, ComparisonType, ElementType, Opcode};
use inkwell::values::{FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};

use crate::cg::{bv, Cg, Val};
use crate::error::{Fail, R};
use crate::lanes;
use crate::minifloat::is_minifloat;

/// The error for an op that is not defined on element type `ty`.
pub fn not_defined(op: Opcode, ty: ElementType) -> Fail {
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
pub fn unary<'ctx>(cg: &Cg<'ctx>, op: Opcode, in_ty: ElementType, v: Val<'ctx>) -> R<Val<'ctx>> {
    if in_ty.is_pred() {
        return match op {
            Opcode::Not => Ok(bv(cg.b.build_not(v.into_int_value(), "not")?)),
            _ => Err(not_defined(op, in_ty)),
        };
    }
    if in_ty.is_float() {
        use Opcode::*;
        // Ops not computed by one float instruction flush explicitly under FTZ: a select
        // passes its operand's bits through, a libm function may return a tiny input as is.
        // The inline `erf` only does float arithmetic on its input and selects between results
        // of it ([`crate::math::erf`]).
        let inline_erf = op == Erf && in_ty != ElementType::F64 && !cg.libm_math;
        let flushes =
            !matches!(op, Abs | Negate | Real | Imag | IsFinite | Sqrt | Rsqrt) && !inline_erf;
        let x = if flushes { flush_val(cg, in_ty, v)? } else { v };
        let r = float_unary(cg, op, in_ty, x)?;
        return if op == IsFinite {
            Ok(r)
        } else if flushes {
            let r = flush_val(cg, in_ty, r)?;
            cg.round(in_ty, r)
        } else {
            cg.round(in_ty, r)
        };
    }
    if in_ty.is_int() {
        return int_unary(cg, op, in_ty, v.into_int_value());
    }
    Err(not_defined(op, in_ty))
}

/// A float unary op on `v`, a scalar or (for the ops [`vector_unary`] admits) a vector.
fn float_unary<'ctx>(cg: &Cg<'ctx>, op: Opcode, ty: ElementType, v: Val<'ctx>) -> R<Val<'ctx>> {
    use Opcode::*;
    let is64 = ty == ElementType::F64;
    let one = lanes::float_const(v, 1.0)?;
    let intr = |name: &str| cg.call_intrinsic(name, &[v]);
    Ok(match op {
        Abs => intr("llvm.fabs")?,
        Negate => lanes::fneg(cg, v, "neg")?,
        Sqrt => intr("llvm.sqrt")?,
        Rsqrt => {
            let s = intr("llvm.sqrt")?;
            lanes::fdiv(cg, one, s, "rsqrt")?
        }
        Exp if !is64 && !cg.libm_math => crate::math::exp(cg, v)?,
        Tanh if !is64 && !cg.libm_math => crate::math::tanh(cg, v)?,
        Erf if !is64 && !cg.libm_math => crate::math::erf(cg, v)?,
        Logistic => {
            let n = lanes::fneg(cg, v, "n")?;
            let e = if is64 || cg.libm_math {
                crate::libm_fallback::call_libm(cg, &libm_name("exp", is64), &[n])?
            } else {
                crate::math::exp(cg, n)?
            };
            let d = lanes::fadd(cg, one, e, "d")?;
            lanes::fdiv(cg, one, d, "logistic")?
        }
        _ => scalar_float_unary(cg, op, ty, lanes::scalar_float(v, op.name())?)?,
    })
}

/// Whether [`unary`] computes `op` on a vector of `ty` (lane by lane, with the scalar code's
/// bits): the ops of single instructions and the inline polynomials, not libm calls.
pub fn vector_unary(cg: &Cg<'_>, op: Opcode, ty: ElementType) -> bool {
    use Opcode::*;
    let poly = ty == ElementType::F32 && !cg.libm_math;
    matches!(ty, ElementType::F32 | ElementType::F64)
        && (matches!(op, Abs | Negate | Sqrt | Rsqrt)
            || (poly && matches!(op, Exp | Tanh | Logistic | Erf)))
}

/// The float unary ops computed on scalars only (libm calls, and ops no vector path needs).
fn scalar_float_unary<'ctx>(
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
    let libm = |name: &str| crate::libm_fallback::call_libm(cg, &libm_name(name, is64), &[bv(v)]);
    let intr = |name: &str| cg.call_intrinsic(name, &[bv(v)]);
    Ok(match op {
        Sign => {
            let c = cg.call_intrinsic("llvm.copysign", &[bv(one), bv(v)])?;
            let keep = b.build_float_compare(FloatPredicate::UEQ, v, zero, "keep")?;
            b.build_select(keep, bv(v), c, "sign")?
        }
        Floor => intr("llvm.floor")?,
        Ceil => intr("llvm.ceil")?,
        RoundNearestAfz => intr("llvm.round")?,
        RoundNearestEven => intr("llvm.roundeven")?,
        Cbrt => libm("cbrt")?,
        Exp => libm("exp")?,
        Expm1 => libm("expm1")?,
        Log if !is64 && !cg.libm_math => crate::math::log_f32(cg, v)?,
        Log => libm("log")?,
        Log1p => libm("log1p")?,
        Sin => libm("sin")?,
        Cos => libm("cos")?,
        Tan => libm("tan")?,
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
pub fn binary<'ctx>(
    cg: &Cg<'ctx>,
    op: Opcode,
    ty: ElementType,
    a: Val<'ctx>,
    c: Val<'ctx>,
) -> R<Val<'ctx>> {
    use Opcode::*;
    let b = &cg.b;
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
        use Opcode::*;
        // As for unary ops: only the single-instruction arithmetic is flushed by the hardware.
        let flushes = !matches!(op, Add | Subtract | Multiply | Divide | Remainder | Power);
        let r = if matches!(op, Remainder | Power) {
            let (x, y) = (
                lanes::scalar_float(a, op.name())?,
                lanes::scalar_float(c, op.name())?,
            );
            scalar_float_binary(cg, op, ty, x, y)?
        } else if matches!(op, Maximum | Minimum) {
            // The result is one of the flushed operands, or the AND or OR of two equal ones'
            // bits (both zeros, or the same bits): never subnormal, so it needs no flush.
            let (x, y) = (flush_val(cg, ty, a)?, flush_val(cg, ty, c)?);
            float_binary(cg, op, ty, x, y)?
        } else if flushes {
            let (x, y) = (flush_val(cg, ty, a)?, flush_val(cg, ty, c)?);
            let r = float_binary(cg, op, ty, x, y)?;
            flush_val(cg, ty, r)?
        } else {
            float_binary(cg, op, ty, a, c)?
        };
        return cg.round(ty, r);
    }
    if ty.is_int() {
        return int_binary(cg, op, ty, a.into_int_value(), c.into_int_value());
    }
    Err(not_defined(op, ty))
}

/// Whether [`binary`] computes `op` on vectors of `ty` (lane by lane, with the scalar code's
/// bits).
pub fn vector_binary(op: Opcode, ty: ElementType) -> bool {
    use Opcode::*;
    matches!(ty, ElementType::F32 | ElementType::F64)
        && matches!(op, Add | Subtract | Multiply | Divide | Maximum | Minimum)
}

/// Whether [`clamp`] computes on vectors of `ty` (lane by lane, with the scalar code's bits).
pub fn vector_clamp(ty: ElementType) -> bool {
    matches!(ty, ElementType::F32 | ElementType::F64)
}

/// `remainder` and `power` on scalar floats (libm calls).
fn scalar_float_binary<'ctx>(
    cg: &Cg<'ctx>,
    op: Opcode,
    ty: ElementType,
    x: FloatValue<'ctx>,
    y: FloatValue<'ctx>,
) -> R<Val<'ctx>> {
    let b = &cg.b;
    if op == Opcode::Remainder {
        // XLA's `fmod` call tests the divisor for zero with a float compare (DAZ) and
        // computes the rest exactly: NaN for a divisor that flushes to zero, else the
        // remainder of the unflushed operands.
        let r = scalar_float_binary_op(cg, op, ty, x, y)?.into_float_value();
        let y0 = b.build_float_compare(
            FloatPredicate::OEQ,
            flush(cg, ty, y)?,
            y.get_type().const_zero(),
            "y0",
        )?;
        let nan = y.get_type().const_float(f64::NAN);
        Ok(b.build_select(y0, nan, r, "rem")?)
    } else {
        // `powf`/`pow` read their operands exactly; the result is flushed.
        let r = scalar_float_binary_op(cg, op, ty, x, y)?;
        Ok(bv(flush(cg, ty, r.into_float_value())?))
    }
}

/// A subnormal `f32`/`f64` register value replaced by a zero of its sign when the module runs
/// with FTZ (as XLA's CPU backend does); integer operations, so the result does not depend on
/// the float mode. The narrower floats compute in `f32` under the same rules, but only `bf16`
/// and `f8e8m0fnu` (`2^-127`) hold values that are subnormal there; the others pass through.
pub fn flush<'ctx>(cg: &Cg<'ctx>, ty: ElementType, v: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
    lanes::scalar_float(flush_val(cg, ty, bv(v))?, "flush")
}

/// [`flush`] of a scalar or a vector of `ty` in its register form.
pub fn flush_val<'ctx>(cg: &Cg<'ctx>, ty: ElementType, v: Val<'ctx>) -> R<Val<'ctx>> {
    use ElementType::*;
    if !matches!(ty, F32 | F64 | BF16 | F8E8M0FNU) {
        return Ok(v);
    }
    flush_bits(cg, v)
}

/// [`flush`] of any `f32` or `f64` register value, whatever type it holds.
fn flush_reg<'ctx>(cg: &Cg<'ctx>, v: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
    lanes::scalar_float(flush_bits(cg, bv(v))?, "flush")
}

/// [`flush_reg`] of a scalar or a vector of `f32` or `f64`.
fn flush_bits<'ctx>(cg: &Cg<'ctx>, v: Val<'ctx>) -> R<Val<'ctx>> {
    if !cg.ftz {
        return Ok(v);
    }
    let it = lanes::int_type_like(cg, v)?;
    let (exp, sign) = if lanes::float_bits(cg, v)? == 64 {
        (0x7ff0_0000_0000_0000u64, 1u64 << 63)
    } else {
        (0x7f80_0000, 1 << 31)
    };
    let x = lanes::bitcast(cg, v, it, "fb")?;
    let e = lanes::and(cg, x, lanes::int_const(it, exp)?, "fe")?;
    let sub = lanes::icmp(cg, IntPredicate::EQ, e, lanes::int_const(it, 0)?, "sub")?;
    let z = lanes::and(cg, x, lanes::int_const(it, sign)?, "fz")?;
    let r = lanes::select(cg, sub, z, x, "ftz")?;
    lanes::bitcast(cg, r, v.get_type(), "f")
}

/// The result of `maximum` (`max`) or `minimum` on two equal zeros: `+0` wins `maximum` unless
/// both are `-0`, `-0` wins `minimum` (the bits' AND or OR). Equal non-zero values have equal
/// bits, so this is right whenever the operands compare equal.
fn zero_tie<'ctx>(cg: &Cg<'ctx>, max: bool, a: Val<'ctx>, c: Val<'ctx>) -> R<Val<'ctx>> {
    let it = lanes::int_type_like(cg, a)?;
    let x = lanes::bitcast(cg, a, it, "xb")?;
    let y = lanes::bitcast(cg, c, it, "yb")?;
    let r = if max {
        lanes::and(cg, x, y, "tie")?
    } else {
        lanes::or(cg, x, y, "tie")?
    };
    lanes::bitcast(cg, r, a.get_type(), "tie")
}

/// XLA's `maximum` on floats (IEEE 754-2019 `maximum`, as XLA's CPU backend computes it): NaN
/// if either is NaN (the left one first), else the larger, with `+0` above `-0`. Operands are
/// already flushed where the module flushes.
pub fn fmax<'ctx>(cg: &Cg<'ctx>, a: FloatValue<'ctx>, c: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
    lanes::scalar_float(extremum(cg, true, bv(a), bv(c))?, "maximum")
}

/// XLA's `minimum` on floats: as [`fmax`], with `-0` below `+0`.
pub fn fmin<'ctx>(cg: &Cg<'ctx>, a: FloatValue<'ctx>, c: FloatValue<'ctx>) -> R<FloatValue<'ctx>> {
    lanes::scalar_float(extremum(cg, false, bv(a), bv(c))?, "minimum")
}

/// [`fmax`] (`max`) or [`fmin`], on scalars or vectors.
fn extremum<'ctx>(cg: &Cg<'ctx>, max: bool, a: Val<'ctx>, c: Val<'ctx>) -> R<Val<'ctx>> {
    // Unordered: a NaN `c` is taken here, a NaN `a` below.
    let pred = if max {
        FloatPredicate::ULT
    } else {
        FloatPredicate::UGT
    };
    let take_c = lanes::fcmp(cg, pred, a, c, "take")?;
    let r = lanes::select(cg, take_c, c, a, "ext")?;
    let eq = lanes::fcmp(cg, FloatPredicate::OEQ, a, c, "eq")?;
    let tie = zero_tie(cg, max, a, c)?;
    let r = lanes::select(cg, eq, tie, r, "ext")?;
    let anan = lanes::fcmp(cg, FloatPredicate::UNO, a, a, "anan")?;
    lanes::select(cg, anan, a, r, "ext")
}

/// The float binary ops of single instructions and `maximum`/`minimum`, on scalars or vectors.
fn float_binary<'ctx>(
    cg: &Cg<'ctx>,
    op: Opcode,
    ty: ElementType,
    a: Val<'ctx>,
    c: Val<'ctx>,
) -> R<Val<'ctx>> {
    use Opcode::*;
    Ok(match op {
        Add => lanes::fadd(cg, a, c, "add")?,
        Subtract => lanes::fsub(cg, a, c, "sub")?,
        Multiply => lanes::fmul(cg, a, c, "mul")?,
        Divide => lanes::fdiv(cg, a, c, "div")?,
        Maximum => extremum(cg, true, a, c)?,
        Minimum => extremum(cg, false, a, c)?,
        _ => scalar_float_binary_op(
            cg,
            op,
            ty,
            lanes::scalar_float(a, op.name())?,
            lanes::scalar_float(c, op.name())?,
        )?,
    })
}

/// The float binary ops of libm calls, on scalars.
fn scalar_float_binary_op<'ctx>(
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
        Remainder => bv(b.build_float_rem(a, c, "rem")?),
        Power => {
            let ft = a.get_type();
            let one = ft.const_float(1.0);
            let p = crate::libm_fallback::call_libm(cg, &libm_name("pow", is64), &[bv(a), bv(c)])?;
            let x1 = b.build_float_compare(FloatPredicate::OEQ, a, one, "x1")?;
            // A bit test, not a float compare: `pow` reads a subnormal exponent exactly.
            let (it, mag) = if is64 {
                (cg.i64(), cg.i64().const_int(u64::MAX >> 1, false))
            } else {
                (cg.i32(), cg.i32().const_int(u32::MAX as u64 >> 1, false))
            };
            let cb = b.build_bit_cast(c, it, "yb")?.into_int_value();
            let cm = b.build_and(cb, mag, "ym")?;
            let y0 = b.build_int_compare(IntPredicate::EQ, cm, it.const_zero(), "y0")?;
            let t = b.build_or(x1, y0, "trivial")?;
            b.build_select(t, bv(one), p, "pow")?
        }
        Atan2 => crate::libm_fallback::call_libm(cg, &libm_name("atan2", is64), &[bv(a), bv(c)])?,
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
        MulHi => {
            // The high half of the double-width product (operands sign- or zero-extended by
            // the type's signedness); LLVM selects a widening multiply (`imul`/`mul` on x86,
            // `smulh`/`umulh` on AArch64, `mul.hi` on NVPTX), i128 included. A 4-bit type takes
            // the high half of the 8-bit types' product, as XLA's CPU pipeline widens it (see
            // the evaluator's `mulhi`).
            let n = if bits == 4 { 8 } else { bits };
            let wide = cg.int_ty(2 * n as u32);
            let (xw, yw) = if signed {
                (
                    b.build_int_s_extend(x, wide, "xw")?,
                    b.build_int_s_extend(y, wide, "yw")?,
                )
            } else {
                (
                    b.build_int_z_extend(x, wide, "xw")?,
                    b.build_int_z_extend(y, wide, "yw")?,
                )
            };
            let p = b.build_int_mul(xw, yw, "wide")?;
            let hi = b.build_right_shift(p, wide.const_int(n, false), signed, "hi")?;
            b.build_int_truncate(hi, it, "mulhi")?
        }
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
        Power => return int_power(cg, x, y),
        _ => return Err(not_defined(op, ty)),
    }))
}

/// XLA's integer power, as its CPU backend computes it: exponentiation by squaring over the
/// low six bits of the exponent, wrapping; an exponent whose top bit is set (unsigned types
/// included) gives `1` for a base of `1`, `±1` by the exponent's parity for a base of `-1`
/// (all ones), and `0` otherwise. Unrolled, so branch-free.
fn int_power<'ctx>(cg: &Cg<'ctx>, x: IntValue<'ctx>, y: IntValue<'ctx>) -> R<Val<'ctx>> {
    let b = &cg.b;
    let it = x.get_type();
    let zero = it.const_zero();
    let one = it.const_int(1, false);
    let ones = it.const_all_ones();
    let bits = it.get_bit_width();
    let mut acc = one;
    let mut base = x;
    for k in 0..6u32 {
        if k >= bits {
            break;
        }
        let bit = b.build_right_shift(y, it.const_int(k as u64, false), false, "eb")?;
        let bit = b.build_and(bit, one, "eb")?;
        let odd = b.build_int_compare(IntPredicate::NE, bit, zero, "odd")?;
        let m = b.build_int_mul(acc, base, "m")?;
        acc = b.build_select(odd, m, acc, "acc")?.into_int_value();
        base = b.build_int_mul(base, base, "sq")?;
    }
    let top = b.build_int_compare(IntPredicate::SLT, y, zero, "top")?;
    let y_odd = b.build_and(y, one, "yodd")?;
    let y_odd = b.build_int_compare(IntPredicate::NE, y_odd, zero, "yodd")?;
    let m1 = b.build_select(y_odd, ones, one, "m1")?.into_int_value();
    let x1 = b.build_int_compare(IntPredicate::EQ, x, one, "x1")?;
    let xm1 = b.build_int_compare(IntPredicate::EQ, x, ones, "xm1")?;
    let neg = b.build_select(xm1, m1, zero, "neg")?.into_int_value();
    let neg = b.build_select(x1, one, neg, "neg")?.into_int_value();
    Ok(b.build_select(top, neg, acc, "pow")?)
}

/// The integer key whose signed order is XLA's total order on floats.
pub fn total_order_key<'ctx>(cg: &Cg<'ctx>, v: FloatValue<'ctx>) -> R<IntValue<'ctx>> {
    let b = &cg.b;
    let bits = if v.get_type() == cg.f64() { 64 } else { 32 };
    let it = cg.int_ty(bits);
    let k = b.build_bit_cast(v, it, "bits")?.into_int_value();
    let s = b.build_right_shift(k, it.const_int(bits as u64 - 1, false), true, "s")?;
    let s = b.build_right_shift(s, it.const_int(1, false), false, "s")?;
    Ok(b.build_xor(k, s, "key")?)
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
    use ComparisonDirection as D;
    let b = &cg.b;
    if ty.is_float() {
        if cty == ComparisonType::TotalOrder {
            let (x, y) = (
                lanes::scalar_float(a, "a total-order compare")?,
                lanes::scalar_float(c, "a total-order compare")?,
            );
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
        return lanes::fcmp(cg, p, a, c, "cmp");
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
pub fn select<'ctx>(cg: &Cg<'ctx>, p: Val<'ctx>, a: Val<'ctx>, c: Val<'ctx>) -> R<Val<'ctx>> {
    lanes::select(cg, p, a, c, "sel")
}

/// `clamp(lo, x, hi)`.
pub fn clamp<'ctx>(
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
        // Scalars or vectors alike ([`vector_clamp`]).
        let (l, v, h) = (
            flush_val(cg, ty, lo)?,
            flush_val(cg, ty, x)?,
            flush_val(cg, ty, hi)?,
        );
        let r = extremum(cg, false, extremum(cg, true, v, l)?, h)?;
        let hn = lanes::fcmp(cg, FloatPredicate::UNO, h, h, "hn")?;
        let r = lanes::select(cg, hn, h, r, "r")?;
        let vn = lanes::fcmp(cg, FloatPredicate::UNO, v, v, "vn")?;
        let r = lanes::select(cg, vn, v, r, "r")?;
        let ln = lanes::fcmp(cg, FloatPredicate::UNO, l, l, "ln")?;
        return lanes::select(cg, ln, l, r, "clamp");
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
pub fn convert<'ctx>(
    cg: &Cg<'ctx>,
    from: ElementType,
    to: ElementType,
    v: Val<'ctx>,
) -> R<Val<'ctx>> {
    let b = &cg.b;
    if from == to {
        return Ok(v);
    }
    let to_reg = cg.reg_ty(to)?;
    if to.is_pred() {
        return Ok(bv(if from.is_float() {
            let x = v.into_float_value();
            // XLA compares with a float instruction: subnormals (f8e8m0fnu's 2^-127 among
            // them) read as zero.
            let x = flush_reg(cg, x)?;
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
                // A float instruction in XLA, so subnormal sources read as zero.
                // Widening an 8- or 4-bit float is exact (XLA converts the bits).
                (false, ElementType::F64) if is_minifloat(from) => {
                    bv(b.build_float_ext(x, cg.f64(), "ext")?)
                }
                (false, ElementType::F64) => {
                    bv(b.build_float_ext(flush_reg(cg, x)?, cg.f64(), "ext")?)
                }
                (false, _) => cg.round(to, v)?,
                (true, ElementType::F16) => {
                    // One rounding straight from f64, as LLVM's fptrunc double -> half does.
                    let h = b.build_float_trunc(x, cg.ctx.f16_type(), "d2h")?;
                    bv(b.build_float_ext(h, cg.f32(), "h2f")?)
                }
                (true, _) => {
                    // Through f32 (a float instruction in XLA, flushing a subnormal result).
                    let f = b.build_float_trunc(x, cg.f32(), "d2f")?;
                    cg.round(to, bv(flush_reg(cg, f)?))?
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
pub fn bitcast_same_width<'ctx>(
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
pub fn reduce_precision<'ctx>(
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
    // NaN stays the input NaN, even with no mantissa bits left (as XLA's CPU backend does).
    let r = b.build_select(is_nan, x, r, "rp")?;
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
