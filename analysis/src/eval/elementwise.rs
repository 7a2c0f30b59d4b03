//! Elementwise kernels: unary, binary and ternary ops, `compare`, `convert` and
//! `reduce-precision`, for every element type they accept, on raw literal bytes.
//!
//! Every kernel takes input byte slices of `n` elements each and writes `n` output elements.
//! Dispatch on the opcode and element type happens once per call; the loops inside are
//! monomorphized. Semantics follow XLA: integer arithmetic wraps, `x / 0` is `-1` (signed) or
//! all ones (unsigned), `INT_MIN / -1` is `INT_MIN`, `x % 0` is `x`, `INT_MIN % -1` is `0`,
//! shifts by at least the bit width give `0` (or the sign for arithmetic right shifts),
//! `maximum`/`minimum` propagate NaN, float-to-int `convert` saturates and maps NaN to `0`,
//! and `f16`/`bf16`/f8 arithmetic is computed in `f32` and rounded after every op. A real
//! `add`, `subtract`, `multiply` or `divide` that gives NaN gives x86's NaN (`x86_nan`, in
//! `elem`): its first NaN operand, quieted, or the default NaN `0xffc00000`, as XLA CPU's code
//! does, whatever order the compiled loop put the operands in.
//!
//! With `ftz` set, float arithmetic runs the way XLA's CPU backend runs it, with x86's DAZ and
//! FTZ modes: subnormal operands read as zero and subnormal `f32`/`f64` results are written as
//! zero (same sign). Ops XLA implements with integer instructions are exact either way:
//! `negate`, `abs`, total-order compares, `reduce-precision`, and converts between `f32` and
//! `bf16` or from `f16` or the 8- and 4-bit floats (except to `pred`, a float compare).
//! `power` (a `powf`/`pow` call) reads its operands exactly and flushes only its result.
//! `remainder` (a `fmod` call) reads only its divisor flushed: a divisor
//! that flushes to zero gives NaN, otherwise the exact remainder of the unflushed operands.
//! The 8- and 4-bit floats compute in `f32` under the same rules, which matters for
//! `f8e8m0fnu`: `2^-127` is an `f32` subnormal, so it reads as zero in arithmetic and an
//! arithmetic result of `2^-127` or below flushes to zero, which the format (no zero) stores
//! as NaN.
//!
//! Complex arithmetic is real arithmetic on the components, flushed the same way: operand
//! components read flushed and result components are written flushed (`multiply` flushes
//! each real product too); `abs` and `compare` read flushed components; complex `sign` is
//! `select(abs(x) == 0, x, x / abs(x))` with `abs` flushed, so an operand that flushes to zero
//! comes back unchanged; `real`, `imag`, `negate` and `complex` are exact; converts between
//! `c64` and `c128` flush their components as the `f32`/`f64` converts do. Inside the
//! transcendental complex ops (`log`, `sqrt`, `sin`, ...) intermediate values are not flushed
//! one by one, and XLA's own `atan2` keeps some subnormals (so `log`/`log1p` of operands with
//! subnormal components can differ from XLA).

use super::elem::*;
use axle_ir::{ComparisonDirection, ComparisonType, ElementType, Opcode};

/// Runs `$body` with `$S` bound to the storage type of float element type `$ty`.
macro_rules! with_float {
    ($ty:expr, $S:ident => $body:expr, else $other:expr) => {{
        use axle_ir::ElementType as ET;
        #[allow(unused_imports)]
        use $crate::eval::elem::{mini_index, Mini};
        match $ty {
            ET::F32 => {
                type $S = f32;
                $body
            }
            ET::F64 => {
                type $S = f64;
                $body
            }
            ET::F16 => {
                type $S = half::f16;
                $body
            }
            ET::BF16 => {
                type $S = half::bf16;
                $body
            }
            ET::F8E5M2 => {
                type $S = Mini<{ mini_index(ET::F8E5M2) }>;
                $body
            }
            ET::F8E4M3 => {
                type $S = Mini<{ mini_index(ET::F8E4M3) }>;
                $body
            }
            ET::F8E4M3FN => {
                type $S = Mini<{ mini_index(ET::F8E4M3FN) }>;
                $body
            }
            ET::F8E4M3B11FNUZ => {
                type $S = Mini<{ mini_index(ET::F8E4M3B11FNUZ) }>;
                $body
            }
            ET::F8E5M2FNUZ => {
                type $S = Mini<{ mini_index(ET::F8E5M2FNUZ) }>;
                $body
            }
            ET::F8E4M3FNUZ => {
                type $S = Mini<{ mini_index(ET::F8E4M3FNUZ) }>;
                $body
            }
            ET::F8E3M4 => {
                type $S = Mini<{ mini_index(ET::F8E3M4) }>;
                $body
            }
            ET::F8E8M0FNU => {
                type $S = Mini<{ mini_index(ET::F8E8M0FNU) }>;
                $body
            }
            ET::F4E2M1FN => {
                type $S = Mini<{ mini_index(ET::F4E2M1FN) }>;
                $body
            }
            _ => $other,
        }
    }};
}
pub(crate) use with_float;

/// Runs `$body` with `$S` bound to the storage type of `f32`, `f64`, `f16` or `bf16` (the
/// types with kernels of their own; the 8- and 4-bit floats go through `f32`).
macro_rules! with_native_float {
    ($ty:expr, $S:ident => $body:expr, else $other:expr) => {{
        use axle_ir::ElementType as ET;
        match $ty {
            ET::F32 => {
                type $S = f32;
                $body
            }
            ET::F64 => {
                type $S = f64;
                $body
            }
            ET::F16 => {
                type $S = half::f16;
                $body
            }
            ET::BF16 => {
                type $S = half::bf16;
                $body
            }
            _ => $other,
        }
    }};
}
pub(crate) use with_native_float;

/// Whether `t` is an 8- or 4-bit float (computed through `f32`).
pub(crate) fn is_small_float(t: ElementType) -> bool {
    t.is_float()
        && !matches!(
            t,
            ElementType::F32 | ElementType::F64 | ElementType::F16 | ElementType::BF16
        )
}

/// `x` (type `ty`) converted to `f32` bytes.
fn to_f32(ty: ElementType, x: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = vec![0u8; x.len() / ty.byte_size() * 4];
    convert(ty, ElementType::F32, x, &mut out, false)?;
    Ok(out)
}

/// Runs `$body` with `$T` bound to the [`Int`] type of integer element type `$ty`.
macro_rules! with_int {
    ($ty:expr, $T:ident => $body:expr, else $other:expr) => {{
        use axle_ir::ElementType as ET;
        #[allow(unused_imports)]
        use $crate::eval::elem::Narrow;
        match $ty {
            ET::S8 => {
                type $T = i8;
                $body
            }
            ET::S16 => {
                type $T = i16;
                $body
            }
            ET::S32 => {
                type $T = i32;
                $body
            }
            ET::S64 => {
                type $T = i64;
                $body
            }
            ET::U8 => {
                type $T = u8;
                $body
            }
            ET::U16 => {
                type $T = u16;
                $body
            }
            ET::U32 => {
                type $T = u32;
                $body
            }
            ET::U64 => {
                type $T = u64;
                $body
            }
            ET::S4 => {
                type $T = Narrow<4, true>;
                $body
            }
            ET::S2 => {
                type $T = Narrow<2, true>;
                $body
            }
            ET::U4 => {
                type $T = Narrow<4, false>;
                $body
            }
            ET::U2 => {
                type $T = Narrow<2, false>;
                $body
            }
            _ => $other,
        }
    }};
}
pub(crate) use with_int;

/// Runs `$body` with `$F` bound to the component type of complex element type `$ty`.
macro_rules! with_complex {
    ($ty:expr, $F:ident => $body:expr, else $other:expr) => {{
        match $ty {
            axle_ir::ElementType::C64 => {
                type $F = f32;
                $body
            }
            axle_ir::ElementType::C128 => {
                type $F = f64;
                $body
            }
            _ => $other,
        }
    }};
}
#[allow(unused_imports)]
pub(crate) use with_complex;

fn unsupported(op: Opcode, ty: ElementType) -> String {
    format!(
        "{} is not defined for element type {}",
        op.name(),
        ty.name()
    )
}

// ---------------------------------------------------------------------------------------------
// Unary.

/// Evaluates a unary elementwise op (everything but `convert`, `bitcast-convert` and
/// `reduce-precision`). `out_ty` differs from `in_ty` for `is-finite` (pred) and for `abs`,
/// `real` and `imag` of complex operands.
pub(crate) fn unary(
    op: Opcode,
    in_ty: ElementType,
    out_ty: ElementType,
    x: &[u8],
    out: &mut [u8],
    ftz: bool,
) -> Result<(), String> {
    if op == Opcode::Copy {
        out.copy_from_slice(x);
        return Ok(());
    }
    if in_ty.is_pred() {
        return match op {
            Opcode::Not => {
                map1::<Pred, Pred>(x, out, |v| Pred(!v.0));
                Ok(())
            }
            _ => Err(unsupported(op, in_ty)),
        };
    }
    if is_small_float(in_ty) {
        // Computed in f32 and rounded back.
        let x32 = to_f32(in_ty, x)?;
        let n = x32.len() / 4;
        let out32_ty = if out_ty.is_pred() {
            out_ty
        } else {
            ElementType::F32
        };
        let mut out32 = vec![0u8; n * out32_ty.byte_size()];
        unary(op, ElementType::F32, out32_ty, &x32, &mut out32, ftz)?;
        return convert(out32_ty, out_ty, &out32, out, false);
    }
    // f16 values are normal in f32, so flushing never changes them.
    let ftz = ftz && in_ty != ElementType::F16;
    with_native_float!(in_ty, S => return if ftz {
        float_unary::<S, true>(op, x, out)
    } else {
        float_unary::<S, false>(op, x, out)
    }, else ());
    with_int!(in_ty, T => return int_unary::<T>(op, x, out), else ());
    with_complex!(in_ty, F => return if ftz {
        complex_unary::<F, true>(op, x, out)
    } else {
        complex_unary::<F, false>(op, x, out)
    }, else ());
    Err(unsupported(op, in_ty))
}

fn float_unary<S: FloatStorage, const FTZ: bool>(
    op: Opcode,
    x: &[u8],
    out: &mut [u8],
) -> Result<(), String> {
    use Opcode::*;
    macro_rules! m {
        (|$v:ident| $e:expr) => {
            map1::<S, S>(x, out, |s: S| {
                let $v = fl::<_, FTZ>(s.up());
                S::down(fl::<_, FTZ>($e))
            })
        };
    }
    // Sign-bit operations, exact on subnormals.
    macro_rules! exact {
        (|$v:ident| $e:expr) => {
            map1::<S, S>(x, out, |s: S| {
                let $v = s.up();
                S::down($e)
            })
        };
    }
    let one = <S::C as Float>::ONE;
    let zero = <S::C as Float>::ZERO;
    match op {
        Abs => exact!(|v| v.abs()),
        Negate => exact!(|v| -v),
        Sign => m!(|v| if v.is_nan() || v == zero {
            v
        } else {
            one.copysign(v)
        }),
        Floor => m!(|v| v.floor()),
        Ceil => m!(|v| v.ceil()),
        RoundNearestAfz => m!(|v| v.round_afz()),
        RoundNearestEven => m!(|v| v.round_even()),
        Sqrt => m!(|v| v.sqrt()),
        Rsqrt => m!(|v| one / v.sqrt()),
        Cbrt => m!(|v| v.cbrt()),
        Exp => m!(|v| v.exp()),
        Expm1 => m!(|v| v.exp_m1()),
        Log => m!(|v| v.ln()),
        Log1p => m!(|v| v.ln_1p()),
        Logistic => m!(|v| one / (one + (-v).exp())),
        Sin => m!(|v| v.sin()),
        Cos => m!(|v| v.cos()),
        Tan => m!(|v| v.tan()),
        Tanh => m!(|v| v.tanh()),
        Erf => m!(|v| v.erf()),
        Real => exact!(|v| v),
        Imag => exact!(|_v| zero),
        IsFinite => map1::<S, Pred>(x, out, |s| Pred(s.up().is_finite())),
        _ => return Err(format!("{} is not defined for float types", op.name())),
    }
    Ok(())
}

fn int_unary<T: Int>(op: Opcode, x: &[u8], out: &mut [u8]) -> Result<(), String> {
    use Opcode::*;
    match op {
        Abs => map1::<T, T>(x, out, |v| if v.is_negative() { v.wneg() } else { v }),
        Negate => map1::<T, T>(x, out, |v| v.wneg()),
        Sign => map1::<T, T>(x, out, |v| {
            if v == T::ZERO {
                T::ZERO
            } else if v.is_negative() {
                T::ZERO.wsub(T::ONE)
            } else {
                T::ONE
            }
        }),
        Not => map1::<T, T>(x, out, |v| v.not()),
        Popcnt => map1::<T, T>(x, out, |v| v.popcnt()),
        Clz => map1::<T, T>(x, out, |v| v.clz()),
        _ => return Err(format!("{} is not defined for integer types", op.name())),
    }
    Ok(())
}

/// `v` with both components flushed when `FTZ`.
#[inline(always)]
fn cfl<F: Float, const FTZ: bool>(v: Complex<F>) -> Complex<F> {
    Complex::new(fl::<_, FTZ>(v.re), fl::<_, FTZ>(v.im))
}

fn complex_unary<F: Float + Elem, const FTZ: bool>(
    op: Opcode,
    x: &[u8],
    out: &mut [u8],
) -> Result<(), String>
where
    Complex<F>: Elem,
{
    use Opcode::*;
    type C<F> = super::elem::Complex<F>;
    // Arithmetic: operand components read flushed, result components written flushed.
    macro_rules! m {
        (|$v:ident| $e:expr) => {
            map1::<C<F>, C<F>>(x, out, |s: C<F>| {
                let $v = cfl::<F, FTZ>(s);
                cfl::<F, FTZ>($e)
            })
        };
    }
    match op {
        Abs => map1::<C<F>, F>(x, out, |v| fl::<_, FTZ>(cfl::<F, FTZ>(v).abs())),
        Real => map1::<C<F>, F>(x, out, |v| v.re),
        Imag => map1::<C<F>, F>(x, out, |v| v.im),
        Negate => map1::<C<F>, C<F>>(x, out, |v| v.neg()),
        Exp => m!(|v| v.exp()),
        Expm1 => m!(|v| v.exp_m1()),
        Log => m!(|v| v.ln()),
        Log1p => m!(|v| v.add(C::new(F::ONE, F::ZERO)).ln()),
        Sqrt => m!(|v| v.sqrt()),
        Rsqrt => m!(|v| C::new(F::ONE, F::ZERO).div(v.sqrt())),
        Sin => m!(|v| v.sin()),
        Cos => m!(|v| v.cos()),
        Tanh => m!(|v| v.tanh()),
        Tan => m!(|v| v.tan()),
        // XLA: select(abs(x) == 0, x, x / abs(x)), with `abs` flushed; an operand whose
        // flushed magnitude is zero comes back as it was (subnormal components included).
        Sign => map1::<C<F>, C<F>>(x, out, |s| {
            let v = cfl::<F, FTZ>(s);
            let a = fl::<_, FTZ>(v.abs());
            if a == F::ZERO {
                s
            } else {
                cfl::<F, FTZ>(C::new(v.re / a, v.im / a))
            }
        }),
        _ => return Err(format!("{} is not defined for complex types", op.name())),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Binary.

/// Evaluates a binary arithmetic or logical op with operands and result of type `ty` (not
/// `compare`, see [`compare`]; `complex` makes a complex result from two reals).
pub(crate) fn binary(
    op: Opcode,
    ty: ElementType,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
    ftz: bool,
) -> Result<(), String> {
    if op == Opcode::Complex {
        return with_float!(ty, S => {
            complex_from_parts::<S>(ty, a, b, out)
        }, else Err(unsupported(op, ty)));
    }
    if ty.is_pred() {
        use Opcode::*;
        let f: fn(bool, bool) -> bool = match op {
            And | Minimum | Multiply => |x, y| x & y,
            Or | Maximum | Add => |x, y| x | y,
            Xor => |x, y| x ^ y,
            _ => return Err(unsupported(op, ty)),
        };
        map2::<Pred, Pred>(a, b, out, |x, y| Pred(f(x.0, y.0)));
        return Ok(());
    }
    if is_small_float(ty) {
        let (a32, b32) = (to_f32(ty, a)?, to_f32(ty, b)?);
        let mut out32 = vec![0u8; a32.len()];
        binary(op, ElementType::F32, &a32, &b32, &mut out32, ftz)?;
        return convert(ElementType::F32, ty, &out32, out, false);
    }
    let ftz = ftz && ty != ElementType::F16;
    with_native_float!(ty, S => return if ftz {
        float_binary::<S, true>(op, a, b, out)
    } else {
        float_binary::<S, false>(op, a, b, out)
    }, else ());
    with_int!(ty, T => return int_binary::<T>(op, a, b, out), else ());
    with_complex!(ty, F => return if ftz {
        complex_binary::<F, true>(op, a, b, out)
    } else {
        complex_binary::<F, false>(op, a, b, out)
    }, else ());
    Err(unsupported(op, ty))
}

fn complex_from_parts<S: FloatStorage>(
    ty: ElementType,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
) -> Result<(), String> {
    match ty {
        ElementType::F32 => map2::<f32, Complex<f32>>(a, b, out, Complex::new),
        ElementType::F64 => map2::<f64, Complex<f64>>(a, b, out, Complex::new),
        _ => return Err(format!("complex is not defined for {}", ty.name())),
    }
    Ok(())
}

/// XLA's `maximum` (IEEE 754-2019 `maximum`, as XLA's CPU backend computes it): NaN if either
/// side is NaN, else the larger value, with `+0` above `-0`.
#[inline(always)]
pub(crate) fn fmax<F: Float>(a: F, b: F) -> F {
    if a.is_nan() {
        a
    } else if b.is_nan() || a < b {
        b
    } else if a == b && a == F::ZERO {
        // Equal zeros: +0 wins unless both are -0.
        if F::ONE.copysign(a) < F::ZERO {
            b
        } else {
            a
        }
    } else {
        a
    }
}

/// XLA's `minimum` (IEEE 754-2019 `minimum`): NaN if either side is NaN, else the smaller
/// value, with `-0` below `+0`.
#[inline(always)]
pub(crate) fn fmin<F: Float>(a: F, b: F) -> F {
    if a.is_nan() {
        a
    } else if b.is_nan() || b < a {
        b
    } else if a == b && a == F::ZERO {
        if F::ONE.copysign(a) < F::ZERO {
            a
        } else {
            b
        }
    } else {
        a
    }
}

fn float_binary<S: FloatStorage, const FTZ: bool>(
    op: Opcode,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
) -> Result<(), String> {
    use Opcode::*;
    macro_rules! m {
        (|$x:ident, $y:ident| $e:expr) => {
            map2::<S, S>(a, b, out, |p: S, q: S| {
                let $x = fl::<_, FTZ>(p.up());
                let $y = fl::<_, FTZ>(q.up());
                S::down(fl::<_, FTZ>($e))
            })
        };
    }
    let one = <S::C as Float>::ONE;
    let zero = <S::C as Float>::ZERO;
    // The hardware's default NaN, as `fmod` returns it for a zero divisor.
    #[allow(clippy::eq_op)]
    let nan = zero / zero;
    match op {
        Add => m!(|x, y| x86_nan(x, y, x + y)),
        Subtract => m!(|x, y| x86_nan(x, y, x - y)),
        Multiply => m!(|x, y| x86_nan(x, y, x * y)),
        Divide => m!(|x, y| x86_nan(x, y, x / y)),
        // XLA calls `fmodf`/`fmod`, which tests the divisor for zero with a float compare (so
        // a subnormal divisor gives NaN under DAZ) but computes the rest with integer
        // instructions: a subnormal dividend or result is kept.
        Remainder => map2::<S, S>(a, b, out, |p: S, q: S| {
            let (x, y) = (p.up(), q.up());
            S::down(if fl::<_, FTZ>(y) == zero { nan } else { x % y })
        }),
        Maximum => m!(|x, y| fmax(x, y)),
        Minimum => m!(|x, y| fmin(x, y)),
        // `powf`/`pow` read their operands exactly (libm tests them with integer
        // instructions); only the result is flushed.
        Power => map2::<S, S>(a, b, out, |p: S, q: S| {
            let (x, y) = (p.up(), q.up());
            S::down(fl::<_, FTZ>(if x == one || y == zero {
                one
            } else {
                x.powf(y)
            }))
        }),
        Atan2 => m!(|x, y| x.atan2(y)),
        _ => return Err(format!("{} is not defined for float types", op.name())),
    }
    Ok(())
}

/// Integer power as XLA's CPU backend computes it: exponentiation by squaring over the low six
/// bits of the exponent (wrapping); an exponent whose sign bit is set (unsigned types included)
/// gives `1` for a base of `1`, `±1` by parity for a base of `-1`, and `0` otherwise.
fn ipow<T: Int>(base: T, exp: T) -> T {
    let mut acc = T::ONE;
    let mut b = base;
    let mut e = exp.amount();
    for _ in 0..6 {
        if e & 1 == 1 {
            acc = acc.wmul(b);
        }
        b = b.wmul(b);
        e >>= 1;
    }
    if !exp.sign_bit() {
        acc
    } else if base == T::ONE {
        T::ONE
    } else if base == T::ZERO.wsub(T::ONE) {
        if exp.amount() & 1 == 1 {
            base
        } else {
            T::ONE
        }
    } else {
        T::ZERO
    }
}

/// XLA's `mulhi`: the high half of the double-width product, the operands sign-extended for
/// signed types and zero-extended for unsigned ones, as XLA's CPU backend computes it. That is
/// the high `BITS` bits for every type but the 4-bit ones: XLA's CPU pipeline
/// (`float-normalization-s4`/`-u4`) widens a 4-bit `mulhi`, which its 4-bit support does not
/// list, to 8 bits and converts the result back, so `s4` and `u4` give bits 8..12 of the
/// 16-bit product (the product's sign for `s4`, always 0 for `u4`); `s2` and `u2` keep their
/// own width (bits 2..4 of the 4-bit product).
fn mulhi_width(bits: u32) -> u32 {
    if bits == 4 {
        8
    } else {
        bits
    }
}

fn mulhi<T: Int>(x: T, y: T) -> T {
    // Exact for every type up to 64 bits: a signed product fits in an `i128`; an unsigned one
    // may not, but its bits do, read back as a `u128`. Extending a 4-bit operand to 8 bits
    // keeps its value, so only the shift differs.
    let p = x.to_i128().wrapping_mul(y.to_i128());
    let n = mulhi_width(T::BITS);
    let hi = if T::SIGNED {
        p >> n
    } else {
        ((p as u128) >> n) as i128
    };
    T::from_i128(hi)
}

fn int_binary<T: Int>(op: Opcode, a: &[u8], b: &[u8], out: &mut [u8]) -> Result<(), String> {
    use Opcode::*;
    let bits = T::BITS as u64;
    match op {
        Add => map2::<T, T>(a, b, out, |x, y| x.wadd(y)),
        Subtract => map2::<T, T>(a, b, out, |x, y| x.wsub(y)),
        Multiply => map2::<T, T>(a, b, out, |x, y| x.wmul(y)),
        MulHi => map2::<T, T>(a, b, out, mulhi::<T>),
        Divide => map2::<T, T>(a, b, out, |x, y| {
            if y == T::ZERO {
                if T::SIGNED {
                    T::ZERO.wsub(T::ONE)
                } else {
                    T::MAX
                }
            } else {
                // Wrapping division gives INT_MIN for INT_MIN / -1.
                x.wdiv(y)
            }
        }),
        Remainder => map2::<T, T>(a, b, out, |x, y| {
            if y == T::ZERO {
                x
            } else {
                // Wrapping remainder gives 0 for INT_MIN % -1.
                x.wrem(y)
            }
        }),
        Maximum => map2::<T, T>(a, b, out, |x, y| x.max(y)),
        Minimum => map2::<T, T>(a, b, out, |x, y| x.min(y)),
        And => map2::<T, T>(a, b, out, |x, y| x.and(y)),
        Or => map2::<T, T>(a, b, out, |x, y| x.or(y)),
        Xor => map2::<T, T>(a, b, out, |x, y| x.xor(y)),
        ShiftLeft => map2::<T, T>(a, b, out, |x, y| {
            if y.amount() >= bits {
                T::ZERO
            } else {
                x.shl(y.amount() as u32)
            }
        }),
        ShiftRightArithmetic => map2::<T, T>(a, b, out, |x, y| {
            if y.amount() >= bits {
                x.sra(T::BITS - 1)
            } else {
                x.sra(y.amount() as u32)
            }
        }),
        ShiftRightLogical => map2::<T, T>(a, b, out, |x, y| {
            if y.amount() >= bits {
                T::ZERO
            } else {
                x.srl(y.amount() as u32)
            }
        }),
        Power => map2::<T, T>(a, b, out, ipow::<T>),
        _ => return Err(format!("{} is not defined for integer types", op.name())),
    }
    Ok(())
}

fn complex_binary<F: Float, const FTZ: bool>(
    op: Opcode,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
) -> Result<(), String>
where
    Complex<F>: Elem,
{
    use Opcode::*;
    type C<F> = super::elem::Complex<F>;
    macro_rules! m {
        (|$x:ident, $y:ident| $e:expr) => {
            map2::<C<F>, C<F>>(a, b, out, |p: C<F>, q: C<F>| {
                let ($x, $y) = (cfl::<F, FTZ>(p), cfl::<F, FTZ>(q));
                cfl::<F, FTZ>($e)
            })
        };
    }
    // Each real product and sum rounded (and flushed) on its own, as XLA emits them.
    let f = |v: F| fl::<_, FTZ>(v);
    match op {
        Add => m!(|x, y| x.add(y)),
        Subtract => m!(|x, y| x.sub(y)),
        Multiply => m!(|x, y| C::new(
            f(x.re * y.re) - f(x.im * y.im),
            f(x.re * y.im) + f(x.im * y.re)
        )),
        Divide => m!(|x, y| x.div(y)),
        Power => m!(|x, y| x.pow(y)),
        _ => return Err(format!("{} is not defined for complex types", op.name())),
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------
// Compare.

/// Evaluates `compare` on operands of type `ty`, writing `pred` elements.
pub(crate) fn compare(
    dir: ComparisonDirection,
    cty: ComparisonType,
    ty: ElementType,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
    ftz: bool,
) -> Result<(), String> {
    use ComparisonDirection as D;
    macro_rules! each_dir {
        ($T:ty, |$x:ident| $key:expr) => {
            match dir {
                D::Eq => map2::<$T, Pred>(a, b, out, |p, q| {
                    let ($x, y) = (p, q);
                    let k1 = $key;
                    let $x = y;
                    Pred(k1 == $key)
                }),
                D::Ne => map2::<$T, Pred>(a, b, out, |p, q| {
                    let ($x, y) = (p, q);
                    let k1 = $key;
                    let $x = y;
                    Pred(k1 != $key)
                }),
                D::Lt => map2::<$T, Pred>(a, b, out, |p, q| {
                    let ($x, y) = (p, q);
                    let k1 = $key;
                    let $x = y;
                    Pred(k1 < $key)
                }),
                D::Le => map2::<$T, Pred>(a, b, out, |p, q| {
                    let ($x, y) = (p, q);
                    let k1 = $key;
                    let $x = y;
                    Pred(k1 <= $key)
                }),
                D::Gt => map2::<$T, Pred>(a, b, out, |p, q| {
                    let ($x, y) = (p, q);
                    let k1 = $key;
                    let $x = y;
                    Pred(k1 > $key)
                }),
                D::Ge => map2::<$T, Pred>(a, b, out, |p, q| {
                    let ($x, y) = (p, q);
                    let k1 = $key;
                    let $x = y;
                    Pred(k1 >= $key)
                }),
            }
        };
    }
    if ty.is_pred() {
        each_dir!(Pred, |v| v.0);
        return Ok(());
    }
    with_float!(ty, S => {
        if cty == ComparisonType::TotalOrder {
            each_dir!(S, |v| v.up().total_order_key());
        } else if ftz {
            each_dir!(S, |v| v.up().flush());
        } else {
            each_dir!(S, |v| v.up());
        }
        return Ok(());
    }, else ());
    with_int!(ty, T => {
        each_dir!(T, |v| v);
        return Ok(());
    }, else ());
    with_complex!(ty, F => {
        // Compares read subnormal components as zero (DAZ) like real compares.
        let cf = move |v: F| if ftz { v.flush() } else { v };
        match dir {
            D::Eq => map2::<Complex<F>, Pred>(a, b, out, |x, y| {
                Pred(cf(x.re) == cf(y.re) && cf(x.im) == cf(y.im))
            }),
            D::Ne => map2::<Complex<F>, Pred>(a, b, out, |x, y| {
                Pred(cf(x.re) != cf(y.re) || cf(x.im) != cf(y.im))
            }),
            _ => return Err(format!("compare {} is not defined for complex types", dir.name())),
        }
        return Ok(());
    }, else ());
    Err(format!("compare is not defined for {}", ty.name()))
}

// ---------------------------------------------------------------------------------------------
// Select and clamp.

/// `select(p, a, b)`: `p` is `pred` with `n` elements or a scalar; `a`, `b` and `out` hold `n`
/// elements of `w` bytes.
pub(crate) fn select(p: &[u8], a: &[u8], b: &[u8], w: usize, out: &mut [u8]) {
    if p.len() == 1 {
        out.copy_from_slice(if p[0] != 0 { a } else { b });
        return;
    }
    macro_rules! sel {
        ($w:literal) => {
            for (i, o) in out.chunks_exact_mut($w).enumerate() {
                let src = if p[i] != 0 { a } else { b };
                o.copy_from_slice(&src[i * $w..(i + 1) * $w]);
            }
        };
    }
    match w {
        1 => sel!(1),
        2 => sel!(2),
        4 => sel!(4),
        8 => sel!(8),
        16 => sel!(16),
        _ => {
            for (i, o) in out.chunks_exact_mut(w).enumerate() {
                let src = if p[i] != 0 { a } else { b };
                o.copy_from_slice(&src[i * w..(i + 1) * w]);
            }
        }
    }
}

/// `clamp(lo, x, hi)` with `lo`/`hi` either scalars or `n` elements like `x`.
pub(crate) fn clamp(
    ty: ElementType,
    lo: &[u8],
    x: &[u8],
    hi: &[u8],
    out: &mut [u8],
    ftz: bool,
) -> Result<(), String> {
    fn run<T: Elem>(lo: &[u8], x: &[u8], hi: &[u8], out: &mut [u8], f: impl Fn(T, T, T) -> T) {
        let w = T::SIZE;
        let ls = if lo.len() == w { 0 } else { w };
        let hs = if hi.len() == w { 0 } else { w };
        for (i, (o, v)) in out.chunks_exact_mut(w).zip(x.chunks_exact(w)).enumerate() {
            let l = T::load(&lo[i * ls..i * ls + w]);
            let h = T::load(&hi[i * hs..i * hs + w]);
            f(l, T::load(v), h).store(o);
        }
    }
    if ty.is_pred() {
        run::<Pred>(lo, x, hi, out, |l, v, h| v.max(l).min(h));
        return Ok(());
    }
    with_float!(ty, S => {
        run::<S>(lo, x, hi, out, |l, v, h| {
            let (l, v, h) = (l.up(), v.up(), h.up());
            let (l, v, h) = if ftz { (l.flush(), v.flush(), h.flush()) } else { (l, v, h) };
            let r = if l.is_nan() {
                l
            } else if v.is_nan() {
                v
            } else if h.is_nan() {
                h
            } else {
                fmin(fmax(v, l), h)
            };
            S::down(r)
        });
        return Ok(());
    }, else ());
    with_int!(ty, T => {
        run::<T>(lo, x, hi, out, |l, v, h| {
            let t = if v < l { l } else { v };
            if t < h { t } else { h }
        });
        return Ok(());
    }, else ());
    Err(format!("clamp is not defined for {}", ty.name()))
}

// ---------------------------------------------------------------------------------------------
// Convert.

/// Conversions into a float storage type.
trait ConvertTo: FloatStorage {
    fn from_f32_convert(v: f32) -> Self;
    fn from_i128_convert(v: i128) -> Self;
}

impl<S: FloatStorage> ConvertTo for S {
    #[inline(always)]
    fn from_f32_convert(v: f32) -> Self {
        if S::SIZE == 8 {
            S::from_f64_convert(v as f64)
        } else {
            // f32 and narrower: one rounding from f32 (exact for f32 itself).
            S::down(<S::C as Float>::from_f64(v as f64))
        }
    }
    #[inline(always)]
    fn from_i128_convert(v: i128) -> Self {
        if S::SIZE == 8 {
            S::from_f64_convert(v as f64)
        } else {
            // XLA converts integers to f32 first, then to narrower floats.
            Self::from_f32_convert(v as f32)
        }
    }
}

/// Saturating float-to-integer conversion (NaN becomes 0), as XLA's convert does it.
#[inline(always)]
fn f64_to_int<T: Int>(v: f64) -> T {
    if v.is_nan() {
        return T::ZERO;
    }
    let lo = T::MIN.to_i128() as f64;
    let hi = T::MAX.to_i128() as f64;
    if v <= lo {
        T::MIN
    } else if v >= hi {
        T::MAX
    } else {
        T::from_i128(v as i128)
    }
}

/// Converts `x` of type `from` into `out` of type `to`. With `ftz`, conversions XLA's CPU
/// backend performs with float instructions flush subnormals: `f64` sources converted to
/// narrower floats or to `pred`, `f32`-computed sources converted to `f64` or `pred`, and the
/// `f32` results of `f64` to `f32`/`bf16` conversions.
pub(crate) fn convert(
    from: ElementType,
    to: ElementType,
    x: &[u8],
    out: &mut [u8],
    ftz: bool,
) -> Result<(), String> {
    // Complex to real takes the real part (as XLA does), then converts it like a real value.
    if from.is_complex() && !to.is_complex() {
        if to.is_pred() {
            return Err(format!(
                "convert from {} to pred is not defined",
                from.name()
            ));
        }
        let part = from.component_type();
        let w = part.byte_size();
        let re: Vec<u8> = x
            .chunks_exact(2 * w)
            .flat_map(|c| c[..w].iter().copied())
            .collect();
        return convert(part, to, &re, out, ftz);
    }
    if from == to {
        out.copy_from_slice(x);
        return Ok(());
    }
    let err = || {
        format!(
            "convert from {} to {} is not supported",
            from.name(),
            to.name()
        )
    };
    // 8- and 4-bit floats convert through f32 (exact for them as sources).
    if is_small_float(from) || is_small_float(to) {
        let mid_ty = ElementType::F32;
        let n = x.len() / from.byte_size().max(1);
        let mut mid = vec![0u8; n * 4];
        if is_small_float(from) {
            with_float!(from, S => map1::<S, f32>(x, &mut mid, |v| v.up().to_f64() as f32), else ());
        } else {
            convert(from, mid_ty, x, &mut mid, ftz)?;
        }
        if is_small_float(to) {
            with_float!(to, D => {
                map1::<f32, D>(&mid, out, |v| D::from_f64_convert(v as f64));
                return Ok(());
            }, else ());
        }
        // Widening a small float is exact (XLA converts the bits), so only a narrowing
        // source reads flushed; a conversion to pred is a float compare, which reads
        // f8e8m0fnu's 2^-127 (an f32 subnormal) as zero.
        return convert(
            mid_ty,
            to,
            &mid,
            out,
            ftz && (!is_small_float(from) || to.is_pred()),
        );
    }
    if from.is_pred() {
        return convert_from(to, x, out, false, |b: Pred| Value::Int(b.0 as i128)).ok_or_else(err);
    }
    with_native_float!(from, S => {
        return if S::SIZE == 8 {
            let flush = ftz && (to.is_float() || to.is_pred() || to == ElementType::C64);
            convert_from(to, x, out, ftz, |v: S| {
                let f = v.up().to_f64();
                Value::F64(if flush { f.flush() } else { f })
            })
        } else {
            let flush = ftz
                && matches!(to, ElementType::F64 | ElementType::C128 | ElementType::Pred);
            convert_from(to, x, out, ftz, |v: S| {
                let f = v.up().to_f64() as f32;
                Value::F32(if flush { f.flush() } else { f })
            })
        }
        .ok_or_else(err);
    }, else ());
    with_int!(from, T => {
        return convert_from(to, x, out, false, |v: T| Value::Int(v.to_i128())).ok_or_else(err);
    }, else ());
    with_complex!(from, F => {
        // Component by component, flushed the way the real conversions are (f32 to f64
        // reads flushed; f64 to f32 reads and writes flushed).
        let f = move |v: F| if ftz { v.flush() } else { v };
        return match to {
            ElementType::C64 => {
                map1::<Complex<F>, Complex<f32>>(x, out, |v| {
                    let g = |c: F| {
                        let r = f(c).to_f64() as f32;
                        if ftz { r.flush() } else { r }
                    };
                    Complex::new(g(v.re), g(v.im))
                });
                Ok(())
            }
            ElementType::C128 => {
                map1::<Complex<F>, Complex<f64>>(x, out, |v| {
                    Complex::new(f(v.re).to_f64(), f(v.im).to_f64())
                });
                Ok(())
            }
            _ => Err(err()),
        };
    }, else ());
    Err(err())
}

/// A source value on its way through `convert`.
#[derive(Clone, Copy)]
enum Value {
    Int(i128),
    F32(f32),
    F64(f64),
}

impl Value {
    /// The value as float type `D`; with `ftz`, an `f64` narrowed through `f32` (to `f32` or
    /// `bf16`) has a subnormal `f32` result flushed.
    #[inline(always)]
    fn to_float<D: ConvertTo>(self, ftz: bool) -> D {
        use std::any::TypeId;
        match self {
            Value::Int(i) => D::from_i128_convert(i),
            Value::F32(f) => D::from_f32_convert(f),
            Value::F64(f) => {
                let via_f32 = TypeId::of::<D>() == TypeId::of::<f32>()
                    || TypeId::of::<D>() == TypeId::of::<half::bf16>();
                if ftz && via_f32 {
                    D::from_f32_convert((f as f32).flush())
                } else {
                    D::from_f64_convert(f)
                }
            }
        }
    }
    #[inline(always)]
    fn to_int<T: Int>(self) -> T {
        match self {
            Value::Int(i) => T::from_i128(i),
            Value::F32(f) => f64_to_int(f as f64),
            Value::F64(f) => f64_to_int(f),
        }
    }
    #[inline(always)]
    fn to_pred(self) -> Pred {
        Pred(match self {
            Value::Int(i) => i != 0,
            Value::F32(f) => f != 0.0,
            Value::F64(f) => f != 0.0,
        })
    }
}

/// Converts every element read by `read` (which is monomorphic per source type, so the match on
/// `Value` folds away) into `to`.
#[inline(always)]
fn convert_from<T: Elem>(
    to: ElementType,
    x: &[u8],
    out: &mut [u8],
    ftz: bool,
    read: impl Fn(T) -> Value + Sync,
) -> Option<()> {
    if to.is_pred() {
        map1::<T, Pred>(x, out, |v| read(v).to_pred());
        return Some(());
    }
    with_native_float!(to, D => {
        map1::<T, D>(x, out, |v| read(v).to_float::<D>(ftz));
        return Some(());
    }, else ());
    with_int!(to, I => {
        map1::<T, I>(x, out, |v| read(v).to_int::<I>());
        return Some(());
    }, else ());
    match to {
        ElementType::C64 => {
            map1::<T, Complex<f32>>(x, out, |v| Complex::new(read(v).to_float::<f32>(ftz), 0.0))
        }
        ElementType::C128 => {
            map1::<T, Complex<f64>>(x, out, |v| Complex::new(read(v).to_float::<f64>(ftz), 0.0))
        }
        _ => return None,
    }
    Some(())
}

// ---------------------------------------------------------------------------------------------
// Reduce precision.

/// XLA's `reduce-precision` on the bits of one element of a format with `nbits` bits,
/// `src_eb` exponent and `src_mb` mantissa bits.
pub(crate) fn reduce_precision_bits(
    x: u64,
    nbits: u32,
    src_eb: u32,
    src_mb: u32,
    eb: u32,
    mb: u32,
) -> u64 {
    let mask = if nbits == 64 {
        u64::MAX
    } else {
        (1u64 << nbits) - 1
    };
    let sign_bit = 1u64 << (nbits - 1);
    let exp_mask = ((1u64 << src_eb) - 1) << src_mb;
    let is_nan = (x & !sign_bit & mask) > exp_mask;
    let mut v = x;
    if mb < src_mb {
        let last = 1u64 << (src_mb - mb);
        let base_bias = (last >> 1) - 1;
        let last_bit = (v & last) >> (src_mb - mb);
        let bias = last_bit + base_bias;
        let trunc = !(last - 1);
        v = (v.wrapping_add(bias) & trunc) & mask;
    }
    if eb < src_eb {
        let bias = (1u64 << (src_eb - 1)) - 1;
        let reduced_bias = (1u64 << (eb - 1)) - 1;
        let max_e = bias + reduced_bias;
        let min_e = bias - reduced_bias;
        let e = v & exp_mask;
        let signed_zero = v & sign_bit;
        let signed_inf = signed_zero | exp_mask;
        if e > max_e << src_mb {
            v = signed_inf;
        }
        if e <= min_e << src_mb {
            v = signed_zero;
        }
    }
    // NaN stays NaN (XLA's CPU backend keeps the input, even with no mantissa bits left).
    if is_nan {
        x
    } else {
        v
    }
}

/// `reduce-precision` of `x` (type `ty`) to `eb` exponent and `mb` mantissa bits.
pub(crate) fn reduce_precision(
    ty: ElementType,
    eb: u32,
    mb: u32,
    x: &[u8],
    out: &mut [u8],
) -> Result<(), String> {
    match ty {
        ElementType::F32 => map1::<u32, u32>(x, out, |v| {
            reduce_precision_bits(v as u64, 32, 8, 23, eb, mb) as u32
        }),
        ElementType::F64 => {
            map1::<u64, u64>(x, out, |v| reduce_precision_bits(v, 64, 11, 52, eb, mb))
        }
        ElementType::F16 => map1::<u16, u16>(x, out, |v| {
            reduce_precision_bits(v as u64, 16, 5, 10, eb, mb) as u16
        }),
        ElementType::BF16 => map1::<u16, u16>(x, out, |v| {
            reduce_precision_bits(v as u64, 16, 8, 7, eb, mb) as u16
        }),
        _ => return Err(format!("reduce-precision is not defined for {}", ty.name())),
    }
    Ok(())
}
