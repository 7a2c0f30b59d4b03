//! Instructions on register values that are either one float or a vector of floats, for the
//! float semantics in [`crate::real`] and the polynomials in [`crate::math`], so a kernel that
//! computes a vector of elements at once (the CPU GEMM's epilogue on its register tile) runs
//! the very code the scalar elemental generators run and gets the same bits per lane.
//!
//! Invariants: every function here takes operands of one shape (all scalars, or all vectors of
//! one length) and returns a value of that shape (a compare returns `i1` or a vector of `i1`);
//! an operand of any other kind is an error, never a panic. Constants are made in the shape of
//! a value they go with ([`float_const`], [`int_const`]). On scalars each function emits the
//! one instruction the scalar code emitted before, so scalar kernels do not change.

use inkwell::types::{BasicType, BasicTypeEnum, VectorType};
use inkwell::values::{BasicValueEnum, FloatValue, VectorValue};
use inkwell::{FloatPredicate, IntPredicate};

use crate::cg::{bv, Cg, Val};
use crate::error::R;

/// Applies a generic builder call to two operands that are both scalars or both vectors of
/// the given scalar kind (`FloatValue` or `IntValue`), naming the operation in the error.
macro_rules! pair {
    ($kind:ident, $what:expr, $a:expr, $c:expr, |$x:ident, $y:ident| $body:expr) => {
        match ($a, $c) {
            (BasicValueEnum::$kind($x), BasicValueEnum::$kind($y)) => bv($body?),
            (BasicValueEnum::VectorValue($x), BasicValueEnum::VectorValue($y)) => bv($body?),
            _ => return Err(format!("{}: operands of different shapes or kinds", $what).into()),
        }
    };
}

/// `v` as a scalar float: an error (not a panic) for a vector or a non-float, for the code
/// paths that exist only for scalars (libm calls, total-order keys).
pub fn scalar_float<'ctx>(v: Val<'ctx>, what: &str) -> R<FloatValue<'ctx>> {
    match v {
        BasicValueEnum::FloatValue(f) => Ok(f),
        _ => Err(format!("{what} is computed on scalar floats only").into()),
    }
}

/// The float constant `x` in the shape of float value `like` (a splat for a vector).
pub fn float_const<'ctx>(like: Val<'ctx>, x: f64) -> R<Val<'ctx>> {
    match like.get_type() {
        BasicTypeEnum::FloatType(t) => Ok(bv(t.const_float(x))),
        BasicTypeEnum::VectorType(t) => {
            let e = t.get_element_type().into_float_type().const_float(x);
            Ok(bv(splat_const(e.into(), t.get_size())))
        }
        _ => Err("a float constant shaped like a non-float".into()),
    }
}

/// The width in bits of the float type (or float vector's element type) of `like`: 32 or 64.
pub fn float_bits<'ctx>(cg: &Cg<'ctx>, like: Val<'ctx>) -> R<u32> {
    let t = match like.get_type() {
        BasicTypeEnum::VectorType(v) => v.get_element_type(),
        t => t,
    };
    match t {
        BasicTypeEnum::FloatType(f) if f == cg.f64() => Ok(64),
        BasicTypeEnum::FloatType(f) if f == cg.f32() => Ok(32),
        _ => Err("a float register value that is neither f32 nor f64".into()),
    }
}

/// The integer type as wide as the float type of `like`, in its shape (`f32` to `i32`,
/// `<16 x f32>` to `<16 x i32>`).
pub fn int_type_like<'ctx>(cg: &Cg<'ctx>, like: Val<'ctx>) -> R<BasicTypeEnum<'ctx>> {
    let it = cg.int_ty(float_bits(cg, like)?);
    Ok(match like.get_type() {
        BasicTypeEnum::VectorType(v) => it.vec_type(v.get_size()).as_basic_type_enum(),
        _ => it.as_basic_type_enum(),
    })
}

/// The integer constant `x` of integer type (or integer vector type) `ty`.
pub fn int_const<'ctx>(ty: BasicTypeEnum<'ctx>, x: u64) -> R<Val<'ctx>> {
    match ty {
        BasicTypeEnum::IntType(t) => Ok(bv(t.const_int(x, false))),
        BasicTypeEnum::VectorType(t) => {
            let e = t.get_element_type().into_int_type().const_int(x, false);
            Ok(bv(splat_const(e.into(), t.get_size())))
        }
        _ => Err("an integer constant of a non-integer type".into()),
    }
}

/// The constant vector of `n` copies of `e`.
fn splat_const<'ctx>(e: BasicValueEnum<'ctx>, n: u32) -> VectorValue<'ctx> {
    VectorType::const_vector(&vec![e; n as usize])
}

/// Float `a + c`.
pub fn fadd<'ctx>(cg: &Cg<'ctx>, a: Val<'ctx>, c: Val<'ctx>, name: &str) -> R<Val<'ctx>> {
    Ok(pair!(FloatValue, "fadd", a, c, |x, y| cg
        .b
        .build_float_add(x, y, name)))
}

/// Float `a - c`.
pub fn fsub<'ctx>(cg: &Cg<'ctx>, a: Val<'ctx>, c: Val<'ctx>, name: &str) -> R<Val<'ctx>> {
    Ok(pair!(FloatValue, "fsub", a, c, |x, y| cg
        .b
        .build_float_sub(x, y, name)))
}

/// Float `a * c`.
pub fn fmul<'ctx>(cg: &Cg<'ctx>, a: Val<'ctx>, c: Val<'ctx>, name: &str) -> R<Val<'ctx>> {
    Ok(pair!(FloatValue, "fmul", a, c, |x, y| cg
        .b
        .build_float_mul(x, y, name)))
}

/// Float `a / c`.
pub fn fdiv<'ctx>(cg: &Cg<'ctx>, a: Val<'ctx>, c: Val<'ctx>, name: &str) -> R<Val<'ctx>> {
    Ok(pair!(FloatValue, "fdiv", a, c, |x, y| cg
        .b
        .build_float_div(x, y, name)))
}

/// Float `-a`.
pub fn fneg<'ctx>(cg: &Cg<'ctx>, a: Val<'ctx>, name: &str) -> R<Val<'ctx>> {
    Ok(match a {
        BasicValueEnum::FloatValue(x) => bv(cg.b.build_float_neg(x, name)?),
        BasicValueEnum::VectorValue(x) => bv(cg.b.build_float_neg(x, name)?),
        _ => return Err("fneg of a non-float".into()),
    })
}

/// The float comparison `a p c`: `i1`, or a vector of `i1`.
pub fn fcmp<'ctx>(
    cg: &Cg<'ctx>,
    p: FloatPredicate,
    a: Val<'ctx>,
    c: Val<'ctx>,
    name: &str,
) -> R<Val<'ctx>> {
    Ok(pair!(FloatValue, "fcmp", a, c, |x, y| cg
        .b
        .build_float_compare(p, x, y, name)))
}

/// The integer comparison `a p c`: `i1`, or a vector of `i1`.
pub fn icmp<'ctx>(
    cg: &Cg<'ctx>,
    p: IntPredicate,
    a: Val<'ctx>,
    c: Val<'ctx>,
    name: &str,
) -> R<Val<'ctx>> {
    Ok(pair!(IntValue, "icmp", a, c, |x, y| cg
        .b
        .build_int_compare(p, x, y, name)))
}

/// Integer `a & c`.
pub fn and<'ctx>(cg: &Cg<'ctx>, a: Val<'ctx>, c: Val<'ctx>, name: &str) -> R<Val<'ctx>> {
    Ok(pair!(IntValue, "and", a, c, |x, y| cg
        .b
        .build_and(x, y, name)))
}

/// Integer `a | c`.
pub fn or<'ctx>(cg: &Cg<'ctx>, a: Val<'ctx>, c: Val<'ctx>, name: &str) -> R<Val<'ctx>> {
    Ok(pair!(IntValue, "or", a, c, |x, y| cg
        .b
        .build_or(x, y, name)))
}

/// Integer `a + c` (wrapping).
pub fn iadd<'ctx>(cg: &Cg<'ctx>, a: Val<'ctx>, c: Val<'ctx>, name: &str) -> R<Val<'ctx>> {
    Ok(pair!(IntValue, "iadd", a, c, |x, y| cg
        .b
        .build_int_add(x, y, name)))
}

/// Integer `a - c` (wrapping).
pub fn isub<'ctx>(cg: &Cg<'ctx>, a: Val<'ctx>, c: Val<'ctx>, name: &str) -> R<Val<'ctx>> {
    Ok(pair!(IntValue, "isub", a, c, |x, y| cg
        .b
        .build_int_sub(x, y, name)))
}

/// Integer `a << c`.
pub fn shl<'ctx>(cg: &Cg<'ctx>, a: Val<'ctx>, c: Val<'ctx>, name: &str) -> R<Val<'ctx>> {
    Ok(pair!(IntValue, "shl", a, c, |x, y| cg
        .b
        .build_left_shift(x, y, name)))
}

/// Integer `a >> c`, arithmetic (sign-filling) where `signed`.
pub fn shr<'ctx>(
    cg: &Cg<'ctx>,
    a: Val<'ctx>,
    c: Val<'ctx>,
    signed: bool,
    name: &str,
) -> R<Val<'ctx>> {
    Ok(pair!(IntValue, "shr", a, c, |x, y| cg
        .b
        .build_right_shift(x, y, signed, name)))
}

/// `p ? a : c` on an `i1` predicate, or lane by lane on a vector of `i1`.
pub fn select<'ctx>(
    cg: &Cg<'ctx>,
    p: Val<'ctx>,
    a: Val<'ctx>,
    c: Val<'ctx>,
    name: &str,
) -> R<Val<'ctx>> {
    Ok(match p {
        BasicValueEnum::IntValue(p) => cg.b.build_select(p, a, c, name)?,
        BasicValueEnum::VectorValue(p) => cg.b.build_select(p, a, c, name)?,
        _ => return Err("a select on a non-predicate".into()),
    })
}

/// The bits of `v` reinterpreted as type `ty` of the same size and shape.
pub fn bitcast<'ctx>(
    cg: &Cg<'ctx>,
    v: Val<'ctx>,
    ty: BasicTypeEnum<'ctx>,
    name: &str,
) -> R<Val<'ctx>> {
    Ok(cg.b.build_bit_cast(v, ty, name)?)
}

/// Float `v` converted to signed integer type `ty` of its shape (rounding toward zero).
pub fn fptosi<'ctx>(
    cg: &Cg<'ctx>,
    v: Val<'ctx>,
    ty: BasicTypeEnum<'ctx>,
    name: &str,
) -> R<Val<'ctx>> {
    Ok(match (v, ty) {
        (BasicValueEnum::FloatValue(x), BasicTypeEnum::IntType(t)) => {
            bv(cg.b.build_float_to_signed_int(x, t, name)?)
        }
        (BasicValueEnum::VectorValue(x), BasicTypeEnum::VectorType(t)) => {
            bv(cg.b.build_float_to_signed_int(x, t, name)?)
        }
        _ => return Err("fptosi between different shapes".into()),
    })
}
