//! Inline forms of the C math library functions the elemental code calls (`exp`, `expm1`,
//! `log`, `log1p`, `pow`, `sin`, `cos`, `tan`, `tanh`, `sinh`, `cosh`, `cbrt`, `erf`,
//! `atan2`, `hypot`, and their `f32` forms), for a target that has no math library for them:
//! the nvptx backend where libdevice is not installed. [`call_libm`] is how the elemental code
//! calls a math function: the target's symbol where it names one, else the inline form.
//!
//! Invariants:
//! - Every function computes in `f64`; an `f32` function extends its arguments to `f64` and
//!   rounds the result once, so its error is within about one `f32` ulp.
//! - The `f64` errors, in `f64` ulps: `exp`, `expm1`, `log`, `sin`, `cos`, `cbrt` about 1;
//!   `log1p`, `tan`, `tanh`, `sinh`, `cosh`, `hypot` a few; `atan2` about 4; `erf` about 10;
//!   `pow` about `|y * log(x)| + 2` (its logarithm is not extended precision).
//! - The special values are C99's (Annex F): NaN in gives NaN out (but `pow(1, NaN)` and
//!   `pow(NaN, 0)` are 1), signed zeros pass through the odd functions, infinities and
//!   overflow give infinities, `log` of a negative number is x86's default NaN as the
//!   evaluator's, `sin`, `cos` and `tan` of an infinity are NaN.
//! - `sin`, `cos` and `tan` reduce any finite argument exactly enough: by three parts of
//!   `pi/2` below `2^19` (Cody and Waite), and by 192 bits of `2/pi` chosen by the argument's
//!   exponent above it (Payne and Hanek), so a huge argument is as accurate as a small one.
//! - Only arithmetic, compares, selects, integer operations and one loop (`erf`'s series,
//!   not unrolled) are emitted, plus one private constant table (the bits of `2/pi`).

use inkwell::module::Linkage;
use inkwell::values::{FloatValue, IntValue};
use inkwell::{FloatPredicate, IntPredicate};

use crate::cg::{bv, Cg, Val, NO_UNROLL};
use crate::error::R;

/// Calls C math library function `name` on `args` (`f32` or `f64` scalars): through the
/// target's symbol where it names one ([`Cg::call_libm`]), else its inline form ([`call`]); an
/// error naming it where there is neither.
pub fn call_libm<'ctx>(cg: &Cg<'ctx>, name: &str, args: &[Val<'ctx>]) -> R<Val<'ctx>> {
    if cg.target.math_function(name).is_none() && args.iter().all(|a| a.is_float_value()) {
        if let Some(v) = call(cg, name, args)? {
            return Ok(v);
        }
    }
    cg.call_libm(name, args)
}

/// The inline form of libm function `name` on `args` (`f32` or `f64` scalars), or `None` for a
/// name this module has no form of.
pub fn call<'ctx>(cg: &Cg<'ctx>, name: &str, args: &[Val<'ctx>]) -> R<Option<Val<'ctx>>> {
    let (base, narrow) = match name.strip_suffix('f') {
        Some(b) if KNOWN.contains(&b) => (b, true),
        _ if KNOWN.contains(&name) => (name, false),
        _ => return Ok(None),
    };
    let m = M { cg };
    let wide: Vec<FloatValue<'ctx>> = args
        .iter()
        .map(|a| {
            let v = a.into_float_value();
            if narrow {
                Ok(cg.b.build_float_ext(v, cg.f64(), "w")?)
            } else {
                Ok(v)
            }
        })
        .collect::<R<_>>()?;
    let arg = |k: usize| {
        wide.get(k)
            .copied()
            .ok_or_else(|| format!("{name} takes {} arguments", k + 1))
    };
    let r = match base {
        "exp" => m.exp(arg(0)?)?,
        "expm1" => m.expm1(arg(0)?)?,
        "log" => m.log(arg(0)?)?,
        "log1p" => m.log1p(arg(0)?)?,
        "pow" => m.pow(arg(0)?, arg(1)?)?,
        "sin" => m.sin_cos_tan(arg(0)?, Trig::Sin)?,
        "cos" => m.sin_cos_tan(arg(0)?, Trig::Cos)?,
        "tan" => m.sin_cos_tan(arg(0)?, Trig::Tan)?,
        "tanh" => m.tanh(arg(0)?)?,
        "sinh" => m.sinh(arg(0)?)?,
        "cosh" => m.cosh(arg(0)?)?,
        "cbrt" => m.cbrt(arg(0)?)?,
        "erf" => m.erf(arg(0)?)?,
        "atan2" => m.atan2(arg(0)?, arg(1)?)?,
        "hypot" => m.hypot(arg(0)?, arg(1)?)?,
        _ => return Ok(None),
    };
    Ok(Some(if narrow {
        bv(cg.b.build_float_trunc(r, cg.f32(), "n")?)
    } else {
        bv(r)
    }))
}

/// The functions [`call`] has forms of (their `f64` names).
const KNOWN: [&str; 15] = [
    "exp", "expm1", "log", "log1p", "pow", "sin", "cos", "tan", "tanh", "sinh", "cosh", "cbrt",
    "erf", "atan2", "hypot",
];

/// `ln 2` in two parts; the first has 32 trailing zero bits, so `k * LN2_HI` is exact for
/// `|k| < 2^21`.
const LN2_HI: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
const LN2_LO: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
const LOG2_E: f64 = std::f64::consts::LOG2_E;
/// `pi/2` in 33-bit parts (`k * PIO2_1`, `k * PIO2_2`, `k * PIO2_3` exact for `|k| < 2^20`)
/// and the rest.
const PIO2_1: f64 = f64::from_bits(0x3ff9_21fb_5440_0000);
const PIO2_2: f64 = f64::from_bits(0x3dd0_b461_1a60_0000);
const PIO2_3: f64 = f64::from_bits(0x3ba3_198a_2e00_0000);
const PIO2_3T: f64 = f64::from_bits(0x397b_839a_2520_49c1);
/// `pi/2` as a double and the double nearest the rest.
const PIO2_H: f64 = std::f64::consts::FRAC_PI_2;
const PIO2_L: f64 = f64::from_bits(0x3c91_a626_3314_5c07);
/// Below this magnitude `sin`, `cos` and `tan` reduce by [`PIO2_1`] and the next parts.
const CODY_WAITE_LIMIT: f64 = 524_288.0;

/// The bits of `2/pi` after the binary point (`0.101000101111...`), 64 to a word, after one
/// word of zeros (the bits before the point), enough for the largest `f64` exponent.
const TWO_OVER_PI: [u64; 20] = [
    0x0000000000000000,
    0xa2f9836e4e441529,
    0xfc2757d1f534ddc0,
    0xdb6295993c439041,
    0xfe5163abdebbc561,
    0xb7246e3a424dd2e0,
    0x06492eea09d1921c,
    0xfe1deb1cb129a73e,
    0xe88235f52ebb4484,
    0xe99c7026b45f7e41,
    0x3991d639835339f4,
    0x9c845f8bbdf9283b,
    0x1ff897ffde05980f,
    0xef2f118b5a0a6d1f,
    0x6d367ecf27cb09b7,
    0x4f463f669e5fea2d,
    0x7527bac7ebe5f17b,
    0x3d0739f78a5292ea,
    0x6bfb5fb11f8d5d08,
    0x56033046fc7b6bab,
];

/// `1/n!` for `n` in `0..=20`.
fn inv_factorial(n: u32) -> f64 {
    (1..=n).fold(1.0, |acc, k| acc / k as f64)
}

#[derive(Clone, Copy, PartialEq)]
enum Trig {
    Sin,
    Cos,
    Tan,
}

/// `f64` scalar arithmetic on one code generator.
struct M<'a, 'ctx> {
    cg: &'a Cg<'ctx>,
}

type F<'ctx> = FloatValue<'ctx>;
type I<'ctx> = IntValue<'ctx>;

impl<'ctx> M<'_, 'ctx> {
    fn c(&self, v: f64) -> F<'ctx> {
        self.cg.f64().const_float(v)
    }
    fn ci(&self, v: i64) -> I<'ctx> {
        self.cg.i64().const_int(v as u64, true)
    }
    fn add(&self, a: F<'ctx>, b: F<'ctx>) -> R<F<'ctx>> {
        Ok(self.cg.b.build_float_add(a, b, "a")?)
    }
    fn sub(&self, a: F<'ctx>, b: F<'ctx>) -> R<F<'ctx>> {
        Ok(self.cg.b.build_float_sub(a, b, "s")?)
    }
    fn mul(&self, a: F<'ctx>, b: F<'ctx>) -> R<F<'ctx>> {
        Ok(self.cg.b.build_float_mul(a, b, "m")?)
    }
    fn div(&self, a: F<'ctx>, b: F<'ctx>) -> R<F<'ctx>> {
        Ok(self.cg.b.build_float_div(a, b, "d")?)
    }
    fn neg(&self, a: F<'ctx>) -> R<F<'ctx>> {
        Ok(self.cg.b.build_float_neg(a, "n")?)
    }
    fn intr(&self, name: &str, args: &[F<'ctx>]) -> R<F<'ctx>> {
        let vals: Vec<Val<'ctx>> = args.iter().map(|&a| bv(a)).collect();
        Ok(self.cg.call_intrinsic(name, &vals)?.into_float_value())
    }
    /// `a * b + c` with one rounding.
    fn fma(&self, a: F<'ctx>, b: F<'ctx>, c: F<'ctx>) -> R<F<'ctx>> {
        self.intr("llvm.fma", &[a, b, c])
    }
    fn abs(&self, a: F<'ctx>) -> R<F<'ctx>> {
        self.intr("llvm.fabs", &[a])
    }
    fn copysign(&self, mag: F<'ctx>, sign: F<'ctx>) -> R<F<'ctx>> {
        self.intr("llvm.copysign", &[mag, sign])
    }
    fn cmp(&self, p: FloatPredicate, a: F<'ctx>, b: F<'ctx>) -> R<I<'ctx>> {
        Ok(self.cg.b.build_float_compare(p, a, b, "c")?)
    }
    fn lt(&self, a: F<'ctx>, b: f64) -> R<I<'ctx>> {
        self.cmp(FloatPredicate::OLT, a, self.c(b))
    }
    fn gt(&self, a: F<'ctx>, b: f64) -> R<I<'ctx>> {
        self.cmp(FloatPredicate::OGT, a, self.c(b))
    }
    fn eq(&self, a: F<'ctx>, b: f64) -> R<I<'ctx>> {
        self.cmp(FloatPredicate::OEQ, a, self.c(b))
    }
    fn is_nan(&self, a: F<'ctx>) -> R<I<'ctx>> {
        self.cmp(FloatPredicate::UNO, a, a)
    }
    fn and(&self, a: I<'ctx>, b: I<'ctx>) -> R<I<'ctx>> {
        Ok(self.cg.b.build_and(a, b, "and")?)
    }
    fn or(&self, a: I<'ctx>, b: I<'ctx>) -> R<I<'ctx>> {
        Ok(self.cg.b.build_or(a, b, "or")?)
    }
    fn not(&self, a: I<'ctx>) -> R<I<'ctx>> {
        Ok(self.cg.b.build_not(a, "not")?)
    }
    fn sel(&self, c: I<'ctx>, a: F<'ctx>, b: F<'ctx>) -> R<F<'ctx>> {
        Ok(self.cg.b.build_select(c, a, b, "sel")?.into_float_value())
    }
    fn isel(&self, c: I<'ctx>, a: I<'ctx>, b: I<'ctx>) -> R<I<'ctx>> {
        Ok(self.cg.b.build_select(c, a, b, "sel")?.into_int_value())
    }
    /// `a` where it is at least `lo` and at most `hi` (NaN passes).
    fn clamp(&self, a: F<'ctx>, lo: f64, hi: f64) -> R<F<'ctx>> {
        let a = self.sel(self.lt(a, lo)?, self.c(lo), a)?;
        self.sel(self.gt(a, hi)?, self.c(hi), a)
    }
    fn bits(&self, a: F<'ctx>) -> R<I<'ctx>> {
        Ok(self
            .cg
            .b
            .build_bit_cast(a, self.cg.i64(), "bits")?
            .into_int_value())
    }
    fn float_of_bits(&self, i: I<'ctx>) -> R<F<'ctx>> {
        Ok(self
            .cg
            .b
            .build_bit_cast(i, self.cg.f64(), "f")?
            .into_float_value())
    }
    fn iadd(&self, a: I<'ctx>, b: I<'ctx>) -> R<I<'ctx>> {
        Ok(self.cg.b.build_int_add(a, b, "i")?)
    }
    fn isub(&self, a: I<'ctx>, b: I<'ctx>) -> R<I<'ctx>> {
        Ok(self.cg.b.build_int_sub(a, b, "i")?)
    }
    fn iand(&self, a: I<'ctx>, b: u64) -> R<I<'ctx>> {
        Ok(self
            .cg
            .b
            .build_and(a, a.get_type().const_int(b, false), "i")?)
    }
    fn shl(&self, a: I<'ctx>, b: u64) -> R<I<'ctx>> {
        Ok(self
            .cg
            .b
            .build_left_shift(a, a.get_type().const_int(b, false), "i")?)
    }
    fn lshr(&self, a: I<'ctx>, b: u64) -> R<I<'ctx>> {
        Ok(self
            .cg
            .b
            .build_right_shift(a, a.get_type().const_int(b, false), false, "i")?)
    }
    fn to_int(&self, a: F<'ctx>) -> R<I<'ctx>> {
        Ok(self.cg.b.build_float_to_signed_int(a, self.cg.i64(), "k")?)
    }
    fn int_to_float(&self, i: I<'ctx>) -> R<F<'ctx>> {
        Ok(self.cg.b.build_signed_int_to_float(i, self.cg.f64(), "f")?)
    }
    fn uint_to_float(&self, i: I<'ctx>) -> R<F<'ctx>> {
        Ok(self
            .cg
            .b
            .build_unsigned_int_to_float(i, self.cg.f64(), "f")?)
    }
    /// `2^k` for an `i64` `k` in `[-1022, 1023]`.
    fn pow2(&self, k: I<'ctx>) -> R<F<'ctx>> {
        let e = self.iadd(k, self.ci(1023))?;
        self.float_of_bits(self.shl(e, 52)?)
    }
    /// Horner's rule with fused steps: `((cs[0] * x + cs[1]) * x + ...) + cs[n]`.
    fn poly(&self, x: F<'ctx>, cs: &[f64]) -> R<F<'ctx>> {
        let mut acc = self.c(cs[0]);
        for &k in &cs[1..] {
            acc = self.fma(acc, x, self.c(k))?;
        }
        Ok(acc)
    }

    /// `x - n ln 2` for `n = rint(x / ln 2)`, and `n`; `x` is finite and at most 1100 in
    /// magnitude.
    fn reduce_ln2(&self, x: F<'ctx>) -> R<(F<'ctx>, F<'ctx>)> {
        let n = self.intr("llvm.rint", &[self.mul(x, self.c(LOG2_E))?])?;
        let nn = self.neg(n)?;
        let r = self.fma(nn, self.c(LN2_HI), x)?;
        let r = self.fma(nn, self.c(LN2_LO), r)?;
        Ok((r, n))
    }

    fn exp(&self, x: F<'ctx>) -> R<F<'ctx>> {
        let nan = self.is_nan(x)?;
        let xc = self.clamp(self.sel(nan, self.c(0.0), x)?, -746.0, 710.0)?;
        let (r, n) = self.reduce_ln2(xc)?;
        // e^r, |r| <= 0.35: Taylor to r^13 (the next term is below 2^-60 of the sum).
        let cs: Vec<f64> = (0..=13).rev().map(inv_factorial).collect();
        let p = self.poly(r, &cs)?;
        // 2^n as two factors, so that n down to -1076 and up to 1024 stay representable.
        let ni = self.to_int(n)?;
        let n1 = self.cg.b.build_right_shift(ni, self.ci(1), true, "n1")?;
        let n2 = self.isub(ni, n1)?;
        let e = self.mul(self.mul(p, self.pow2(n1)?)?, self.pow2(n2)?)?;
        self.sel(nan, x, e)
    }

    fn expm1(&self, x: F<'ctx>) -> R<F<'ctx>> {
        let nan = self.is_nan(x)?;
        let xc = self.clamp(self.sel(nan, self.c(0.0), x)?, -60.0, 700.0)?;
        let (r, n) = self.reduce_ln2(xc)?;
        // e^r - 1 = r (1 + r/2 + r^2/6 + ...), to r^14.
        let cs: Vec<f64> = (1..=14).rev().map(inv_factorial).collect();
        let q = self.mul(r, self.poly(r, &cs)?)?;
        // e^x - 1 = 2^n (e^r - 1) + (2^n - 1), one rounding.
        let t = self.pow2(self.to_int(n)?)?;
        let v = self.fma(t, q, self.sub(t, self.c(1.0))?)?;
        let v = self.sel(self.gt(x, 700.0)?, self.exp(x)?, v)?;
        let v = self.sel(self.eq(x, 0.0)?, x, v)?;
        self.sel(nan, x, v)
    }

    fn log(&self, x: F<'ctx>) -> R<F<'ctx>> {
        // Subnormals scaled into the normal range first.
        let tiny = self.lt(x, f64::MIN_POSITIVE)?;
        let xs = self.sel(tiny, self.mul(x, self.c(2f64.powi(54)))?, x)?;
        let bits = self.bits(xs)?;
        let biased = self.iand(self.lshr(bits, 52)?, 0x7ff)?;
        let adjust = self.isel(tiny, self.ci(1023 + 54), self.ci(1023))?;
        let e = self.isub(biased, adjust)?;
        let mb = self
            .cg
            .b
            .build_or(self.iand(bits, (1 << 52) - 1)?, self.ci(0x3ff << 52), "m")?;
        let m = self.float_of_bits(mb)?;
        // m in [sqrt(1/2), sqrt(2)), x = m 2^e.
        let big = self.gt(m, std::f64::consts::SQRT_2)?;
        let m = self.sel(big, self.mul(m, self.c(0.5))?, m)?;
        let e = self.iadd(e, self.cg.b.build_int_z_extend(big, self.cg.i64(), "b")?)?;
        // log(1 + f) = 2 atanh(s), s = f / (2 + f): f - (f^2/2 - s (f^2/2 + R)), with
        // R = 2s^2/3 + 2s^4/5 + ... (|s| < 0.172: to s^22).
        let f = self.sub(m, self.c(1.0))?;
        let s = self.div(f, self.add(self.c(2.0), f)?)?;
        let z = self.mul(s, s)?;
        let cs: Vec<f64> = (1..=11).rev().map(|k| 2.0 / (2 * k + 1) as f64).collect();
        let rr = self.mul(z, self.poly(z, &cs)?)?;
        let hfsq = self.mul(self.mul(self.c(0.5), f)?, f)?;
        let dk = self.int_to_float(e)?;
        let inner = self.fma(s, self.add(hfsq, rr)?, self.mul(dk, self.c(LN2_LO))?)?;
        let v = self.sub(
            self.mul(dk, self.c(LN2_HI))?,
            self.sub(self.sub(hfsq, inner)?, f)?,
        )?;
        let v = self.sel(self.eq(x, f64::INFINITY)?, x, v)?;
        let v = self.sel(self.eq(x, 0.0)?, self.c(f64::NEG_INFINITY), v)?;
        let default_nan = self.float_of_bits(self.ci(0xfff8_0000_0000_0000_u64 as i64))?;
        let v = self.sel(self.lt(x, 0.0)?, default_nan, v)?;
        self.sel(self.is_nan(x)?, x, v)
    }

    fn log1p(&self, x: F<'ctx>) -> R<F<'ctx>> {
        // log(u) * x / (u - 1), u = 1 + x: the rounding of u cancels (Goldberg).
        let u = self.add(self.c(1.0), x)?;
        let d = self.sub(u, self.c(1.0))?;
        let v = self.mul(self.log(u)?, self.div(x, d)?)?;
        let v = self.sel(self.eq(d, 0.0)?, x, v)?;
        self.sel(self.eq(x, f64::INFINITY)?, x, v)
    }

    fn pow(&self, x: F<'ctx>, y: F<'ctx>) -> R<F<'ctx>> {
        let ax = self.abs(x)?;
        let mag = self.exp(self.mul(y, self.log(ax)?)?)?;
        let fl = |v| self.intr("llvm.floor", &[v]);
        let y_int = self.cmp(FloatPredicate::OEQ, fl(y)?, y)?;
        let half = self.mul(y, self.c(0.5))?;
        let y_odd = self.and(y_int, self.cmp(FloatPredicate::ONE, fl(half)?, half)?)?;
        let x_neg =
            self.cg
                .b
                .build_int_compare(IntPredicate::SLT, self.bits(x)?, self.ci(0), "xn")?;
        let v = self.sel(self.and(x_neg, y_odd)?, self.neg(mag)?, mag)?;
        // A negative finite base to a finite power that is not an integer.
        let finite_neg = self.and(self.lt(x, 0.0)?, self.gt(x, f64::NEG_INFINITY)?)?;
        let y_frac = self.and(self.not(y_int)?, self.not(self.is_nan(y)?)?)?;
        let v = self.sel(self.and(finite_neg, y_frac)?, self.c(f64::NAN), v)?;
        let y_inf = self.eq(self.abs(y)?, f64::INFINITY)?;
        let one = self.or(
            self.or(self.eq(y, 0.0)?, self.eq(x, 1.0)?)?,
            self.and(self.eq(ax, 1.0)?, y_inf)?,
        )?;
        self.sel(one, self.c(1.0), v)
    }

    /// `x - k pi/2` and `k mod 4` (an `i64` in `0..4`) for a finite `x`, with
    /// `|x - k pi/2| <= pi/4`.
    fn reduce_pio2(&self, x: F<'ctx>) -> R<(F<'ctx>, I<'ctx>)> {
        let ax = self.abs(x)?;
        let small = self.lt(ax, CODY_WAITE_LIMIT)?;
        // Cody and Waite: k < 2^19 * 2/pi, so every product is exact.
        let xs = self.sel(small, x, self.c(0.0))?;
        let k = self.intr(
            "llvm.rint",
            &[self.mul(xs, self.c(2.0 / std::f64::consts::PI))?],
        )?;
        let nk = self.neg(k)?;
        let mut r = xs;
        for p in [PIO2_1, PIO2_2, PIO2_3, PIO2_3T] {
            r = self.fma(nk, self.c(p), r)?;
        }
        let (rb, kb) = self.payne_hanek(self.sel(small, self.c(CODY_WAITE_LIMIT), ax)?)?;
        // The large path reduced |x|: negate for a negative x.
        let x_neg = self.lt(x, 0.0)?;
        let rb = self.sel(x_neg, self.neg(rb)?, rb)?;
        let kb = self.isel(x_neg, self.isub(self.ci(0), kb)?, kb)?;
        let r = self.sel(small, r, rb)?;
        let k = self.isel(small, self.to_int(k)?, kb)?;
        Ok((r, self.iand(k, 3)?))
    }

    /// `a - k pi/2` and `k` for a finite `a >= 2^19`: the bits of `a 2/pi` around its binary
    /// point, from `a`'s 53-bit significand times the 192 bits of [`TWO_OVER_PI`] that
    /// matter at `a`'s exponent (those before them add multiples of 4).
    fn payne_hanek(&self, a: F<'ctx>) -> R<(F<'ctx>, I<'ctx>)> {
        let cg = self.cg;
        let b = &cg.b;
        let i64t = cg.i64();
        let i128t = cg.ctx.i128_type();
        let bits = self.bits(a)?;
        // a = mant 2^e.
        let e = self.isub(self.iand(self.lshr(bits, 52)?, 0x7ff)?, self.ci(1075))?;
        let mant = b.build_or(self.iand(bits, (1 << 52) - 1)?, self.ci(1 << 52), "mant")?;
        // The window starts at the table's bit e + 62 (bit 2/pi's e-1st after the point).
        let q0 = self.iadd(e, self.ci(62))?;
        let wq = self.lshr(q0, 6)?;
        let sh = self.iand(q0, 63)?;
        let table = self.table()?;
        let word = |k: i64| -> R<I<'ctx>> {
            let idx = self.iadd(wq, self.ci(k))?;
            let arr = i64t.array_type(TWO_OVER_PI.len() as u32);
            // SAFETY: wq <= 16 for every f64 exponent, so wq + 3 is within the table.
            let p = unsafe { b.build_in_bounds_gep(arr, table, &[self.ci(0), idx], "w")? };
            Ok(b.build_load(i64t, p, "w")?.into_int_value())
        };
        let t: Vec<I<'ctx>> = (0..4).map(word).collect::<R<_>>()?;
        let fshl = |hi: I<'ctx>, lo: I<'ctx>| -> R<I<'ctx>> {
            let f = cg.intrinsic("llvm.fshl", &[i64t.into()])?;
            Ok(cg
                .call(f, &[bv(hi), bv(lo), bv(sh)])?
                .ok_or("fshl returned nothing")?
                .into_int_value())
        };
        let (w2, w1, w0) = (fshl(t[0], t[1])?, fshl(t[1], t[2])?, fshl(t[2], t[3])?);
        // mant * w mod 2^192, in 64-bit limbs p2 p1 p0.
        let wide = |v: I<'ctx>| b.build_int_z_extend(v, i128t, "z");
        let mant128 = wide(mant)?;
        let mul128 = |w: I<'ctx>| -> R<(I<'ctx>, I<'ctx>)> {
            let p = b.build_int_mul(mant128, wide(w)?, "p")?;
            let lo = b.build_int_truncate(p, i64t, "lo")?;
            let hi = b.build_right_shift(p, i128t.const_int(64, false), false, "hi")?;
            Ok((lo, b.build_int_truncate(hi, i64t, "hi")?))
        };
        let (p0, hi0) = mul128(w0)?;
        let (lo1, hi1) = mul128(w1)?;
        let lo2 = b.build_int_mul(mant, w2, "lo2")?;
        let p1 = self.iadd(hi0, lo1)?;
        let carry = b.build_int_compare(IntPredicate::ULT, p1, hi0, "c")?;
        let p2 = self.iadd(
            self.iadd(hi1, lo2)?,
            b.build_int_z_extend(carry, i64t, "c")?,
        )?;
        // The binary point of a 2/pi sits between p2's bits 62 and 61: the integer part's
        // low two bits, then the fraction's first 128 bits as h.
        let k_int = self.lshr(p2, 62)?;
        let h_hi = b.build_or(self.shl(p2, 2)?, self.lshr(p1, 62)?, "hh")?;
        let h_lo = b.build_or(self.shl(p1, 2)?, self.lshr(p0, 62)?, "hl")?;
        let h = b.build_or(
            b.build_left_shift(wide(h_hi)?, i128t.const_int(64, false), "h")?,
            wide(h_lo)?,
            "h",
        )?;
        // A fraction of at least 1/2 rounds k up and is h - 2^128 (h as a signed number).
        let k = self.iadd(k_int, self.lshr(h_hi, 63)?)?;
        let neg = b.build_int_compare(IntPredicate::SLT, h, i128t.const_zero(), "neg")?;
        let habs = b
            .build_select(neg, b.build_int_neg(h, "nh")?, h, "abs")?
            .into_int_value();
        // Normalized to its leading one: the top 53 bits exactly, the next 64 rounded.
        let ctlz = cg.intrinsic("llvm.ctlz", &[i128t.into()])?;
        let lz = cg
            .call(ctlz, &[bv(habs), bv(cg.i1().const_zero())])?
            .ok_or("ctlz returned nothing")?
            .into_int_value();
        let lz = b.build_select(
            b.build_int_compare(IntPredicate::ULT, lz, i128t.const_int(128, false), "lt")?,
            lz,
            i128t.const_zero(),
            "lz",
        )?;
        let lz = lz.into_int_value();
        let norm = b.build_left_shift(habs, lz, "norm")?;
        let top = b.build_int_truncate(
            b.build_right_shift(norm, i128t.const_int(64, false), false, "t")?,
            i64t,
            "top",
        )?;
        let low = b.build_int_truncate(norm, i64t, "low")?;
        let lz64 = b.build_int_truncate(lz, i64t, "lz")?;
        let fh53 = self.lshr(top, 11)?;
        let rest = b.build_or(
            self.shl(self.iand(top, 0x7ff)?, 53)?,
            self.lshr(low, 11)?,
            "r",
        )?;
        let fh = self.mul(
            self.uint_to_float(fh53)?,
            self.pow2(self.isub(self.ci(-53), lz64)?)?,
        )?;
        let fl = self.mul(
            self.uint_to_float(rest)?,
            self.pow2(self.isub(self.ci(-117), lz64)?)?,
        )?;
        // (fh + fl) pi/2, the product's rounding error kept.
        let rh = self.mul(fh, self.c(PIO2_H))?;
        let err = self.fma(fh, self.c(PIO2_H), self.neg(rh)?)?;
        let tail = self.fma(fh, self.c(PIO2_L), self.mul(fl, self.c(PIO2_H))?)?;
        let r = self.add(rh, self.add(err, tail)?)?;
        let r = self.sel(
            b.build_int_compare(IntPredicate::NE, habs, i128t.const_zero(), "nz")?,
            r,
            self.c(0.0),
        )?;
        Ok((self.sel(neg, self.neg(r)?, r)?, k))
    }

    /// The private constant table [`TWO_OVER_PI`] (created once per module).
    fn table(&self) -> R<inkwell::values::PointerValue<'ctx>> {
        let name = "axle.two_over_pi";
        if let Some(g) = self.cg.module.get_global(name) {
            return Ok(g.as_pointer_value());
        }
        let i64t = self.cg.i64();
        let words: Vec<I<'ctx>> = TWO_OVER_PI
            .iter()
            .map(|&w| i64t.const_int(w, false))
            .collect();
        let init = i64t.const_array(&words);
        let g = self.cg.module.add_global(
            init.get_type(),
            Some(self.cg.target.buffer_address_space()),
            name,
        );
        g.set_initializer(&init);
        g.set_constant(true);
        g.set_linkage(Linkage::Private);
        Ok(g.as_pointer_value())
    }

    fn sin_cos_tan(&self, x: F<'ctx>, which: Trig) -> R<F<'ctx>> {
        let finite = self.lt(self.abs(x)?, f64::INFINITY)?;
        let (r, q) = self.reduce_pio2(self.sel(finite, x, self.c(0.0))?)?;
        let z = self.mul(r, r)?;
        // sin r = r + r z S(z), cos r = 1 - z/2 + z^2 C(z), |r| <= pi/4: to r^19 and r^20.
        let sc: Vec<f64> = (1..=9)
            .rev()
            .map(|n| (if n % 2 == 1 { -1.0 } else { 1.0 }) * inv_factorial(2 * n + 1))
            .collect();
        let sin_r = self.fma(self.mul(r, z)?, self.poly(z, &sc)?, r)?;
        let cc: Vec<f64> = (2..=10)
            .rev()
            .map(|n| (if n % 2 == 1 { -1.0 } else { 1.0 }) * inv_factorial(2 * n))
            .collect();
        let hz = self.mul(self.c(0.5), z)?;
        let w = self.sub(self.c(1.0), hz)?;
        let corr = self.sub(self.sub(self.c(1.0), w)?, hz)?;
        let cos_r = self.add(w, self.fma(self.mul(z, z)?, self.poly(z, &cc)?, corr)?)?;
        let qi = |v: i64| {
            self.cg
                .b
                .build_int_compare(IntPredicate::EQ, q, self.ci(v), "q")
        };
        let odd =
            self.cg
                .b
                .build_int_compare(IntPredicate::NE, self.iand(q, 1)?, self.ci(0), "odd")?;
        let v = match which {
            Trig::Sin => {
                let m = self.sel(odd, cos_r, sin_r)?;
                let negate = self.or(qi(2)?, qi(3)?)?;
                self.sel(negate, self.neg(m)?, m)?
            }
            Trig::Cos => {
                let m = self.sel(odd, sin_r, cos_r)?;
                let negate = self.or(qi(1)?, qi(2)?)?;
                self.sel(negate, self.neg(m)?, m)?
            }
            Trig::Tan => {
                let even = self.div(sin_r, cos_r)?;
                let oddv = self.neg(self.div(cos_r, sin_r)?)?;
                self.sel(odd, oddv, even)?
            }
        };
        let v = if which == Trig::Cos {
            v
        } else {
            self.sel(self.eq(x, 0.0)?, x, v)?
        };
        // An infinity or NaN gives NaN.
        self.sel(finite, v, self.sub(x, x)?)
    }

    fn tanh(&self, x: F<'ctx>) -> R<F<'ctx>> {
        let a = self.abs(x)?;
        let t = self.expm1(self.mul(self.c(2.0), self.clamp(a, 0.0, 22.0)?)?)?;
        let th = self.div(t, self.add(t, self.c(2.0))?)?;
        let th = self.sel(
            self.cmp(FloatPredicate::OGE, a, self.c(22.0))?,
            self.c(1.0),
            th,
        )?;
        self.copysign(th, x)
    }

    fn sinh(&self, x: F<'ctx>) -> R<F<'ctx>> {
        let a = self.abs(x)?;
        let t = self.expm1(self.clamp(a, 0.0, 22.0)?)?;
        let small = self.mul(
            self.c(0.5),
            self.add(t, self.div(t, self.add(t, self.c(1.0))?)?)?,
        )?;
        let v = self.sel(self.lt(a, 22.0)?, small, self.half_exp_large(a)?)?;
        self.copysign(v, x)
    }

    fn cosh(&self, x: F<'ctx>) -> R<F<'ctx>> {
        let a = self.abs(x)?;
        let e = self.exp(self.clamp(a, 0.0, 22.0)?)?;
        let small = self.mul(self.c(0.5), self.add(e, self.div(self.c(1.0), e)?)?)?;
        self.sel(self.lt(a, 22.0)?, small, self.half_exp_large(a)?)
    }

    /// `e^a / 2` for `a >= 22` without overflowing before the result does.
    fn half_exp_large(&self, a: F<'ctx>) -> R<F<'ctx>> {
        let e2 = self.exp(self.mul(self.c(0.5), self.clamp(a, 0.0, 711.0)?)?)?;
        self.mul(self.mul(self.c(0.5), e2)?, e2)
    }

    fn cbrt(&self, x: F<'ctx>) -> R<F<'ctx>> {
        let a0 = self.abs(x)?;
        // Tiny arguments scaled by 2^162 (the cube of 2^54), so that y^3 below is normal.
        let tiny = self.lt(a0, 2f64.powi(-900))?;
        let a = self.sel(tiny, self.mul(a0, self.c(2f64.powi(162)))?, a0)?;
        let y = self.exp(self.mul(self.log(a)?, self.c(1.0 / 3.0))?)?;
        // One Newton step: y - (y^3 - a) / (3 y^2).
        let y2 = self.mul(y, y)?;
        let resid = self.fma(y2, y, self.neg(a)?)?;
        let y = self.sub(y, self.div(resid, self.mul(self.c(3.0), y2)?)?)?;
        let y = self.sel(tiny, self.mul(y, self.c(2f64.powi(-54)))?, y)?;
        let a = a0;
        let trivial = self.or(self.eq(a, 0.0)?, self.eq(a, f64::INFINITY)?)?;
        let y = self.sel(trivial, a, y)?;
        self.copysign(y, x)
    }

    fn erf(&self, x: F<'ctx>) -> R<F<'ctx>> {
        // erf x = 2/sqrt(pi) x e^(-x^2) sum (2x^2)^n / (1 3 5 ... (2n+1)): positive terms, so
        // no cancellation; 180 terms reach 2^-60 of the sum for |x| < 6, where erf x rounds
        // to +-1 beyond.
        let a = self.clamp(self.abs(x)?, 0.0, 6.0)?;
        let a2 = self.mul(a, a)?;
        let two_a2 = self.mul(self.c(2.0), a2)?;
        let i64t = self.cg.i64();
        let out = self.cg.for_range_acc_hinted(
            i64t.const_zero(),
            i64t.const_int(180, false),
            &[bv(self.c(1.0)), bv(self.c(1.0))],
            &[NO_UNROLL],
            |n, acc| {
                let (term, sum) = (acc[0].into_float_value(), acc[1].into_float_value());
                let nf = self.int_to_float(n)?;
                let denom = self.fma(self.c(2.0), nf, self.c(3.0))?;
                let term = self.div(self.mul(term, two_a2)?, denom)?;
                Ok(vec![bv(term), bv(self.add(sum, term)?)])
            },
        )?;
        let sum = out[1].into_float_value();
        let pre = self.mul(
            self.c(std::f64::consts::FRAC_2_SQRT_PI),
            self.mul(a, self.exp(self.neg(a2)?)?)?,
        )?;
        let v = self.mul(pre, sum)?;
        let v = self.sel(
            self.cmp(FloatPredicate::OGE, a, self.c(6.0))?,
            self.c(1.0),
            v,
        )?;
        let v = self.copysign(v, x)?;
        self.sel(self.is_nan(x)?, x, v)
    }

    /// `atan t` for `t` in `[0, 1]`: two halvings (`atan t = 2 atan(t / (1 + sqrt(1 + t^2)))`)
    /// to `[0, tan(pi/16)]`, then Taylor to `t^31`.
    fn atan01(&self, t: F<'ctx>) -> R<F<'ctx>> {
        let mut u = t;
        for _ in 0..2 {
            let s = self.intr("llvm.sqrt", &[self.fma(u, u, self.c(1.0))?])?;
            u = self.div(u, self.add(self.c(1.0), s)?)?;
        }
        let z = self.mul(u, u)?;
        let cs: Vec<f64> = (1..=15)
            .rev()
            .map(|n| (if n % 2 == 1 { -1.0 } else { 1.0 }) / (2 * n + 1) as f64)
            .collect();
        let a = self.fma(self.mul(u, z)?, self.poly(z, &cs)?, u)?;
        self.mul(self.c(4.0), a)
    }

    fn atan2(&self, y: F<'ctx>, x: F<'ctx>) -> R<F<'ctx>> {
        use std::f64::consts::{FRAC_PI_2, FRAC_PI_4, PI};
        let (ax, ay) = (self.abs(x)?, self.abs(y)?);
        let swap = self.cmp(FloatPredicate::OGT, ay, ax)?;
        let num = self.sel(swap, ax, ay)?;
        let den = self.sel(swap, ay, ax)?;
        let t = self.div(num, den)?;
        // Both zero (t = 0/0) reads as 0; both infinite as 1.
        let both_zero = self.and(self.eq(ax, 0.0)?, self.eq(ay, 0.0)?)?;
        let both_inf = self.and(self.eq(ax, f64::INFINITY)?, self.eq(ay, f64::INFINITY)?)?;
        let t = self.sel(both_zero, self.c(0.0), t)?;
        let t = self.sel(both_inf, self.c(1.0), t)?;
        let base = self.atan01(t)?;
        let base = self.sel(swap, self.sub(self.c(FRAC_PI_2), base)?, base)?;
        let base = self.sel(both_inf, self.c(FRAC_PI_4), base)?;
        let x_neg =
            self.cg
                .b
                .build_int_compare(IntPredicate::SLT, self.bits(x)?, self.ci(0), "xn")?;
        let base = self.sel(x_neg, self.sub(self.c(PI), base)?, base)?;
        let v = self.copysign(base, y)?;
        let nan = self.or(self.is_nan(x)?, self.is_nan(y)?)?;
        self.sel(nan, self.add(x, y)?, v)
    }

    fn hypot(&self, x: F<'ctx>, y: F<'ctx>) -> R<F<'ctx>> {
        let (ax, ay) = (self.abs(x)?, self.abs(y)?);
        let big = self.intr("llvm.maxnum", &[ax, ay])?;
        let small = self.intr("llvm.minnum", &[ax, ay])?;
        let r = self.div(small, big)?;
        let v = self.mul(
            big,
            self.intr("llvm.sqrt", &[self.fma(r, r, self.c(1.0))?])?,
        )?;
        let v = self.sel(self.eq(big, 0.0)?, self.c(0.0), v)?;
        let inf = self.or(self.eq(ax, f64::INFINITY)?, self.eq(ay, f64::INFINITY)?)?;
        let nan = self.or(self.is_nan(x)?, self.is_nan(y)?)?;
        let v = self.sel(nan, self.add(x, y)?, v)?;
        self.sel(inf, self.c(f64::INFINITY), v)
    }
}
