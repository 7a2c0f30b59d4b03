//! The 8- and 4-bit float types (`f8e5m2`, `f8e4m3`, `f8e3m4`, `f8e4m3fn`, `f8e4m3fnuz`,
//! `f8e5m2fnuz`, `f8e4m3b11fnuz`, `f8e8m0fnu`, `f4e2m1fn`): conversions between their storage
//! bytes and `f32` registers, as branch-free integer LLVM IR (so they vectorize and do not depend
//! on the float mode).
//!
//! Like `f16` and `bf16`, these types live in registers as `f32` values their own type can
//! represent, are computed in `f32` and are rounded after every op (XLA's CPU backend and the
//! reference evaluator do the same). In memory each takes one byte (the 4-bit type its low
//! nibble), the bit pattern the literal holds.
//!
//! Rounding from `f32` is to nearest, ties to even, with the rules of each format family:
//! - IEEE-like (`e5m2`, `e4m3`, `e3m4`): overflow gives an infinity of the value's sign, NaN
//!   gives the quiet NaN with only the top mantissa bit set.
//! - `fn` (`e4m3fn`): no infinities; overflow and NaN give the all-ones NaN (`0x7f`).
//! - `fnuz`: no infinities and no negative zero; `0x80` is the only NaN, the result of
//!   overflow and NaN, and a negative value rounding to zero gives `+0`.
//! - `f4e2m1fn`: neither infinities nor NaN; overflow saturates to `±6`, NaN gives `0x8`
//!   (negative zero), as XLA converts it.
//! - `f8e8m0fnu`: unsigned powers of two `2^(e - 127)` with no zero; `0xff` is NaN, the result
//!   of NaN, zero, negative values and overflow. Values round up from `1.5 * 2^e` (ties to
//!   even), `f32` subnormals included.
//!
//! Decoding is exact; NaN decodes to the canonical quiet `f32` NaN.

use axle_ir::ElementType;
use inkwell::values::{FloatValue, IntValue};
use inkwell::IntPredicate;

use crate::cg::Cg;
use crate::error::R;

/// How a format spends its special bit patterns.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    /// All-ones exponent for infinities (zero mantissa) and NaNs.
    Ieee,
    /// No infinities; all ones below the sign is NaN.
    Fn,
    /// No infinities, no negative zero; the negative zero pattern is NaN.
    Fnuz,
    /// Neither infinities nor NaN (`f4e2m1fn`).
    Finite,
    /// Unsigned exponent-only (`f8e8m0fnu`).
    E8m0,
}

/// The layout of a small float format.
#[derive(Clone, Copy)]
struct Format {
    eb: u32,
    mb: u32,
    bias: u32,
    family: Family,
}

impl Format {
    fn of(t: ElementType) -> Option<Format> {
        use ElementType::*;
        use Family::*;
        let (eb, mb, bias, family) = match t {
            F8E5M2 => (5, 2, 15, Ieee),
            F8E4M3 => (4, 3, 7, Ieee),
            F8E3M4 => (3, 4, 3, Ieee),
            F8E4M3FN => (4, 3, 7, Fn),
            F8E4M3FNUZ => (4, 3, 8, Fnuz),
            F8E5M2FNUZ => (5, 2, 16, Fnuz),
            F8E4M3B11FNUZ => (4, 3, 11, Fnuz),
            F4E2M1FN => (2, 1, 1, Finite),
            F8E8M0FNU => (8, 0, 127, E8m0),
            _ => return None,
        };
        Some(Format {
            eb,
            mb,
            bias,
            family,
        })
    }

    /// The position of the sign bit.
    fn sign_shift(&self) -> u32 {
        self.eb + self.mb
    }

    /// All ones in the exponent field, at its place.
    fn exp_field(&self) -> u32 {
        ((1 << self.eb) - 1) << self.mb
    }

    /// The largest finite magnitude's bits.
    fn max_finite(&self) -> u32 {
        let all = (1u32 << (self.eb + self.mb)) - 1;
        match self.family {
            Family::Ieee => self.exp_field() - 1,
            Family::Fn => all - 1,
            Family::Fnuz | Family::Finite => all,
            Family::E8m0 => 0xfe,
        }
    }

    /// The NaN a conversion produces.
    fn nan(&self) -> u32 {
        match self.family {
            Family::Ieee => self.exp_field() | (1 << (self.mb - 1)),
            Family::Fn => (1 << (self.eb + self.mb)) - 1,
            Family::Fnuz | Family::Finite => 1 << self.sign_shift(),
            Family::E8m0 => 0xff,
        }
    }
}

/// Whether `t` is one of the 8- or 4-bit float types.
pub fn is_minifloat(t: ElementType) -> bool {
    Format::of(t).is_some()
}

fn format(t: ElementType) -> R<Format> {
    Format::of(t).ok_or_else(|| format!("{} is not an 8- or 4-bit float type", t.name()).into())
}

/// Decodes a storage byte (`i8`) of small float type `t` into an `f32` (exact).
pub fn to_f32<'ctx>(cg: &Cg<'ctx>, t: ElementType, byte: IntValue<'ctx>) -> R<FloatValue<'ctx>> {
    let f = format(t)?;
    let b = &cg.b;
    let k = |v: u32| cg.i32().const_int(v as u64, false);
    let eq = |x: IntValue<'ctx>, v: u32, name: &str| {
        b.build_int_compare(IntPredicate::EQ, x, k(v), name)
    };
    let w = b.build_int_z_extend(byte, cg.i32(), "mf")?;
    let bits = if f.family == Family::E8m0 {
        // 2^(w - 127): exponent field w, or the subnormal 2^-127 for w = 0.
        let normal = b.build_left_shift(w, k(23), "e")?;
        let zero = eq(w, 0, "w0")?;
        b.build_select(zero, k(0x0040_0000), normal, "e8m0")?
            .into_int_value()
    } else {
        let total = f.eb + f.mb + 1;
        let w = b.build_and(w, k((1 << total) - 1), "mf")?;
        let sign = b.build_right_shift(w, k(f.sign_shift()), false, "s")?;
        let sign = b.build_left_shift(sign, k(31), "s")?;
        let e = b.build_right_shift(w, k(f.mb), false, "e")?;
        let e = b.build_and(e, k((1 << f.eb) - 1), "e")?;
        let m = b.build_and(w, k((1 << f.mb) - 1), "m")?;
        // Normal: re-bias the exponent, widen the mantissa.
        let ne = b.build_int_add(e, k(127 - f.bias), "ne")?;
        let ne = b.build_left_shift(ne, k(23), "ne")?;
        let nm = b.build_left_shift(m, k(23 - f.mb), "nm")?;
        let normal = b.build_or(ne, nm, "normal")?;
        // Subnormal: m * 2^(1 - bias - mb), exact in f32 (and a normal f32 for every format).
        let mf = b.build_unsigned_int_to_float(m, cg.f32(), "mf")?;
        let scale = cg
            .f32()
            .const_float(2f64.powi(1 - f.bias as i32 - f.mb as i32));
        let sub = b.build_float_mul(mf, scale, "sub")?;
        let sub = b.build_bit_cast(sub, cg.i32(), "sub")?.into_int_value();
        let e0 = eq(e, 0, "e0")?;
        let mag = b.build_select(e0, sub, normal, "mag")?.into_int_value();
        let mut bits = b.build_or(mag, sign, "bits")?;
        let emax = (1 << f.eb) - 1;
        match f.family {
            Family::Ieee => {
                let top = eq(e, emax, "top")?;
                let inf = b.build_or(sign, k(0x7f80_0000), "inf")?;
                let m0 = eq(m, 0, "m0")?;
                let special = b
                    .build_select(m0, inf, k(0x7fc0_0000), "sp")?
                    .into_int_value();
                bits = b.build_select(top, special, bits, "bits")?.into_int_value();
            }
            Family::Fn => {
                let low = (1 << f.sign_shift()) - 1;
                let mag = b.build_and(w, k(low), "mag")?;
                let nan = eq(mag, low, "nan")?;
                bits = b
                    .build_select(nan, k(0x7fc0_0000), bits, "bits")?
                    .into_int_value();
            }
            Family::Fnuz => {
                let nan = eq(w, 1 << f.sign_shift(), "nan")?;
                bits = b
                    .build_select(nan, k(0x7fc0_0000), bits, "bits")?
                    .into_int_value();
            }
            Family::Finite | Family::E8m0 => {}
        }
        bits
    };
    let bits = if f.family == Family::E8m0 {
        let nan = eq(w, 0xff, "nan")?;
        b.build_select(nan, k(0x7fc0_0000), bits, "bits")?
            .into_int_value()
    } else {
        bits
    };
    Ok(b.build_bit_cast(bits, cg.f32(), "mf2f")?.into_float_value())
}

/// Rounds an `f32` to small float type `t` (ties to even, the format's overflow and NaN rules)
/// and returns its storage byte (`i8`).
pub fn from_f32<'ctx>(cg: &Cg<'ctx>, t: ElementType, v: FloatValue<'ctx>) -> R<IntValue<'ctx>> {
    let f = format(t)?;
    let b = &cg.b;
    let i32t = cg.i32();
    let k = |v: u32| i32t.const_int(v as u64, false);
    let x = b.build_bit_cast(v, i32t, "fb")?.into_int_value();
    let sign = b.build_right_shift(x, k(31), false, "s")?;
    let a = b.build_and(x, k(0x7fff_ffff), "a")?;
    let is_nan = b.build_int_compare(IntPredicate::UGT, a, k(0x7f80_0000), "isnan")?;
    let e = b.build_right_shift(a, k(23), false, "e")?;
    let m = b.build_and(a, k(0x007f_ffff), "m")?;
    let out = if f.family == Family::E8m0 {
        // Round the mantissa away: up from 1.5 (ties to even go up, to the even exponent).
        let up = b.build_int_compare(IntPredicate::UGE, m, k(0x0040_0000), "up")?;
        let up = b.build_int_z_extend(up, i32t, "up")?;
        let normal = b.build_int_add(e, up, "field")?;
        // An f32 subnormal m * 2^-149 is 2^-127 (field 0) unless it rounds up to 2^-126.
        let sub = b.build_int_compare(IntPredicate::UGE, m, k(0x0060_0000), "subup")?;
        let sub = b.build_int_z_extend(sub, i32t, "subup")?;
        let e0 = b.build_int_compare(IntPredicate::EQ, e, k(0), "e0")?;
        let field = b.build_select(e0, sub, normal, "field")?.into_int_value();
        let neg = b.build_int_compare(IntPredicate::NE, sign, k(0), "neg")?;
        let zero = b.build_int_compare(IntPredicate::EQ, a, k(0), "zero")?;
        let over = b.build_int_compare(IntPredicate::UGE, field, k(0xff), "over")?;
        let nan = b.build_or(is_nan, neg, "nan")?;
        let nan = b.build_or(nan, zero, "nan")?;
        let nan = b.build_or(nan, over, "nan")?;
        b.build_select(nan, k(0xff), field, "e8m0")?
            .into_int_value()
    } else {
        // The magnitude's bits in the target format, rounded to nearest even: normal targets
        // re-bias the exponent and drop 23 - mb bits; subnormal targets shift the mantissa
        // (hidden bit included) further right, by up to 31 (everything then rounds to 0).
        let normal = b.build_int_compare(IntPredicate::UGE, e, k(128 - f.bias), "normal")?;
        let rebased = b.build_int_sub(a, k((127 - f.bias) << 23), "rebased")?;
        let mant = b.build_or(m, k(0x0080_0000), "mant")?;
        let sub_sh = b.build_int_sub(k(151 - f.mb - f.bias), e, "subsh")?;
        let far = b.build_int_compare(IntPredicate::SGT, sub_sh, k(31), "far")?;
        let sub_sh = b
            .build_select(far, k(31), sub_sh, "subsh")?
            .into_int_value();
        let val = b
            .build_select(normal, rebased, mant, "val")?
            .into_int_value();
        let sh = b
            .build_select(normal, k(23 - f.mb), sub_sh, "sh")?
            .into_int_value();
        let odd = b.build_right_shift(val, sh, false, "odd")?;
        let odd = b.build_and(odd, k(1), "odd")?;
        let sh1 = b.build_int_sub(sh, k(1), "sh1")?;
        let half = b.build_left_shift(k(1), sh1, "half")?;
        let half = b.build_int_sub(half, k(1), "half")?;
        let r = b.build_int_add(val, half, "r")?;
        let r = b.build_int_add(r, odd, "r")?;
        let mag = b.build_right_shift(r, sh, false, "mag")?;
        let max = f.max_finite();
        let over = b.build_int_compare(IntPredicate::UGT, mag, k(max), "over")?;
        let sbit = b.build_left_shift(sign, k(f.sign_shift()), "sbit")?;
        let over_val = match f.family {
            // The infinity just above the largest finite value.
            Family::Ieee => k(max + 1),
            // Saturation.
            Family::Finite => k(max),
            // The (unsigned) NaN.
            _ => k(f.nan()),
        };
        let sat = b.build_select(over, over_val, mag, "sat")?.into_int_value();
        let signed = b.build_or(sat, sbit, "signed")?;
        let res = match f.family {
            Family::Fn => b.build_select(over, sat, signed, "res")?.into_int_value(),
            Family::Fnuz => {
                // No negative zero either.
                let z = b.build_int_compare(IntPredicate::EQ, mag, k(0), "z")?;
                let unsigned = b.build_or(over, z, "unsigned")?;
                b.build_select(unsigned, sat, signed, "res")?
                    .into_int_value()
            }
            _ => signed,
        };
        b.build_select(is_nan, k(f.nan()), res, "res")?
            .into_int_value()
    };
    Ok(b.build_int_truncate(out, cg.i8(), "f2mf")?)
}
