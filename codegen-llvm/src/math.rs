//! `f32` transcendentals as inline polynomial code, so loops that use them vectorize (a libm
//! call per element does not). `exp` and `log` are Cephes' `expf` and `logf` with Cody-Waite
//! range reduction (about 1 ulp) and `tanh` is Eigen's rational form on `[-9, 9]` (a few ulps),
//! as in XLA's CPU backend; `erf` is polynomials of our own fit, with no division (at most
//! 1 ulp, see [`erf`]). NaN, infinities, zeros and subnormal results are handled like libm does. `f64`
//! and the other functions call libm.
//!
//! Invariants: every function here is branch-free (compares and selects) and emits the same
//! instructions for a scalar and for each lane of a vector, so a vector kernel gets the scalar
//! code's bits; the stated errors assume `llvm.fmuladd` is fused, as on every target with FMA.

use inkwell::values::FloatValue;
use inkwell::FloatPredicate;

use crate::cg::{bv, Cg, Val};
use crate::error::R;
use crate::lanes;

/// The instructions of the approximations, on `f32` values of one shape: scalars, or vectors
/// of `f32` ([`crate::lanes`]); constants take the shape of `like`.
struct F<'a, 'ctx> {
    cg: &'a Cg<'ctx>,
    like: Val<'ctx>,
}

impl<'a, 'ctx> F<'a, 'ctx> {
    fn c(&self, v: f64) -> R<Val<'ctx>> {
        lanes::float_const(self.like, v)
    }
    fn add(&self, a: Val<'ctx>, b: Val<'ctx>) -> R<Val<'ctx>> {
        lanes::fadd(self.cg, a, b, "a")
    }
    fn sub(&self, a: Val<'ctx>, b: Val<'ctx>) -> R<Val<'ctx>> {
        lanes::fsub(self.cg, a, b, "s")
    }
    fn mul(&self, a: Val<'ctx>, b: Val<'ctx>) -> R<Val<'ctx>> {
        lanes::fmul(self.cg, a, b, "m")
    }
    /// `a * b + c`, fused where the target has it.
    fn fma(&self, a: Val<'ctx>, b: Val<'ctx>, c: Val<'ctx>) -> R<Val<'ctx>> {
        self.cg.call_intrinsic("llvm.fmuladd", &[a, b, c])
    }
    /// Horner's rule: `((c0 * x + c1) * x + ...) + cn`.
    fn poly(&self, x: Val<'ctx>, cs: &[f64]) -> R<Val<'ctx>> {
        let mut acc = self.c(cs[0])?;
        for &c in &cs[1..] {
            acc = self.fma(acc, x, self.c(c)?)?;
        }
        Ok(acc)
    }
    fn sel(&self, p: Val<'ctx>, a: Val<'ctx>, b: Val<'ctx>) -> R<Val<'ctx>> {
        lanes::select(self.cg, p, a, b, "sel")
    }
    fn cmp(&self, p: FloatPredicate, a: Val<'ctx>, b: Val<'ctx>) -> R<Val<'ctx>> {
        lanes::fcmp(self.cg, p, a, b, "c")
    }
    /// `2^n` for an integer `n` (of `like`'s shape) in `[-126, 127]`.
    fn pow2(&self, n: Val<'ctx>) -> R<Val<'ctx>> {
        let it = n.get_type();
        let e = lanes::iadd(self.cg, n, lanes::int_const(it, 127)?, "e")?;
        let e = lanes::shl(self.cg, e, lanes::int_const(it, 23)?, "e")?;
        lanes::bitcast(self.cg, e, self.like.get_type(), "p2")
    }
    /// `1 - 2^k` for `|k| < 2^21` or NaN, rounded once: `k = n + r` with `n` an integer
    /// and `|r| <= 1/2` (`n` rounded by adding `1.5 * 2^23`, whose low bits then hold it in
    /// two's complement, so no conversion, and `r = k - n` is exact), `2^r = 1 + r q(r)` with
    /// `q` a degree-5 polynomial fitted to `(2^r - 1) / r` (relative error 0.03 ulp), then
    /// `1 - 2^r * 2^n` in one fused multiply-add, `-2^n` built from `n`'s bits. A NaN `k`
    /// gives NaN (its bits make some power of two, and no conversion of it is poison).
    fn one_minus_exp2(&self, k: Val<'ctx>) -> R<Val<'ctx>> {
        let magic = self.c(12_582_912.0)?;
        let z = self.add(k, magic)?;
        let r = self.sub(k, self.sub(z, magic)?)?;
        let q = self.poly(
            r,
            &[
                1.535_330_957e-4,
                1.339_893_905e-3,
                9.618_437_849e-3,
                5.550_332_367e-2,
                2.402_264_774e-1,
                6.931_471_825e-1,
            ],
        )?;
        let p = self.fma(r, q, self.c(1.0)?)?;
        let it = lanes::int_type_like(self.cg, k)?;
        let bits = lanes::bitcast(self.cg, z, it, "zb")?;
        let e = lanes::shl(self.cg, bits, lanes::int_const(it, 23)?, "e")?;
        // The bits of -1.0: the sign, and the exponent's bias.
        let e = lanes::iadd(self.cg, e, lanes::int_const(it, 0xbf80_0000)?, "e")?;
        let minus_scale = lanes::bitcast(self.cg, e, self.like.get_type(), "p2")?;
        self.fma(p, minus_scale, self.c(1.0)?)
    }
}

/// `exp(x)` for an `f32` or a vector of `f32` (the same code per lane, [`crate::lanes`]).
pub fn exp<'ctx>(cg: &Cg<'ctx>, x: Val<'ctx>) -> R<Val<'ctx>> {
    let f = F { cg, like: x };
    // Keep NaN (ordered compares are false for it); beyond these bounds the result is inf or 0.
    let hi = f.cmp(FloatPredicate::OGT, x, f.c(89.0)?)?;
    let x = f.sel(hi, f.c(89.0)?, x)?;
    let lo = f.cmp(FloatPredicate::OLT, x, f.c(-104.0)?)?;
    let x = f.sel(lo, f.c(-104.0)?, x)?;
    let fx = cg.call_intrinsic(
        "llvm.roundeven",
        &[f.mul(x, f.c(std::f64::consts::LOG2_E)?)?],
    )?;
    let r = f.fma(fx, f.c(-0.693359375)?, x)?;
    let r = f.fma(fx, f.c(2.121_944_4e-4)?, r)?;
    let p = f.poly(
        r,
        &[
            1.987_569_15e-4,
            1.398_199_950_7e-3,
            8.333_451_907_3e-3,
            4.166_579_589_4e-2,
            1.666_666_545_9e-1,
            5.000_000_120_1e-1,
        ],
    )?;
    let r2 = f.mul(r, r)?;
    let p = f.fma(p, r2, r)?;
    let p = f.add(p, f.c(1.0)?)?;
    // p * 2^n with n split in two so subnormal and overflowing results come out right. `fx`
    // is an integer in [-151, 129] or NaN (then `p` is NaN too and `n` does not matter): a
    // plain conversion of NaN-as-zero vectorizes, a saturating one is scalarized on x86.
    let ordered = f.cmp(FloatPredicate::ORD, fx, fx)?;
    let fx0 = f.sel(ordered, fx, f.c(0.0)?)?;
    let it = lanes::int_type_like(cg, x)?;
    let n = lanes::fptosi(cg, fx0, it, "n")?;
    let n1 = lanes::shr(cg, n, lanes::int_const(it, 1)?, true, "n1")?;
    let n2 = lanes::isub(cg, n, n1, "n2")?;
    f.mul(f.mul(p, f.pow2(n1)?)?, f.pow2(n2)?)
}

/// `log(x)` for `f32`.
pub fn log_f32<'ctx>(cg: &Cg<'ctx>, x0: FloatValue<'ctx>) -> R<Val<'ctx>> {
    let f = F { cg, like: bv(x0) };
    // `x0` is a scalar, so every compare below is an `i1`.
    let x0 = bv(x0);
    let b = &cg.b;
    let i32t = cg.i32();
    // Subnormals: scale into the normal range first.
    let tiny = f.cmp(FloatPredicate::OLT, x0, f.c(1.175_494_4e-38)?)?;
    let x = f.sel(tiny, f.mul(x0, f.c(8_388_608.0)?)?, x0)?;
    let bias = b
        .build_select(tiny.into_int_value(), cg.c32(23), cg.c32(0), "bias")?
        .into_int_value();
    let bits = b.build_bit_cast(x, i32t, "bits")?.into_int_value();
    let e = b.build_right_shift(bits, cg.c32(23), false, "e")?;
    let e = b.build_int_sub(e, cg.c32(126), "e")?;
    let e = b.build_int_sub(e, bias, "e")?;
    let mbits = b.build_and(bits, cg.c32(0x007f_ffff), "m")?;
    let mbits = b.build_or(mbits, cg.c32(0x3f00_0000), "m")?;
    let m = b.build_bit_cast(mbits, cg.f32(), "m")?;
    // m in [0.5, 1): fold to [sqrt(1/2), sqrt(2)) - 1.
    let small = f.cmp(
        FloatPredicate::OLT,
        m,
        f.c(std::f64::consts::FRAC_1_SQRT_2)?,
    )?;
    let e = b.build_int_sub(
        e,
        b.build_int_z_extend(small.into_int_value(), i32t, "s")?,
        "e",
    )?;
    let m = f.sel(small, f.add(m, m)?, m)?;
    let m = f.sub(m, f.c(1.0)?)?;
    let ef = bv(b.build_signed_int_to_float(e, cg.f32(), "ef")?);
    let z = f.mul(m, m)?;
    let y = f.poly(
        m,
        &[
            7.037_683_629_2e-2,
            -1.151_461_031_0e-1,
            1.167_699_874_0e-1,
            -1.242_014_084_6e-1,
            1.424_932_278_7e-1,
            -1.666_805_766_5e-1,
            2.000_071_476_5e-1,
            -2.499_999_399_3e-1,
            3.333_333_117_4e-1,
        ],
    )?;
    let y = f.mul(f.mul(y, m)?, z)?;
    let y = f.fma(ef, f.c(-2.121_944_4e-4)?, y)?;
    let y = f.fma(z, f.c(-0.5)?, y)?;
    let r = f.add(m, y)?;
    let r = f.fma(ef, f.c(0.693_359_375)?, r)?;
    // Special values: log(0) = -inf, log(x < 0) = NaN, log(inf) = inf, NaN stays NaN. The NaN
    // of a negative input is x86's default NaN (`0xffc00000`), as the evaluator's `log` and
    // negative as XLA's (`0xffffffff`): a total order (`topk`, a TOTALORDER sort) puts it
    // first, where a positive NaN would sort last.
    let r = f.sel(
        f.cmp(FloatPredicate::OEQ, x0, f.c(0.0)?)?,
        f.c(f64::NEG_INFINITY)?,
        r,
    )?;
    let r = f.sel(
        f.cmp(FloatPredicate::OLT, x0, f.c(0.0)?)?,
        f.c(-f64::NAN)?,
        r,
    )?;
    let r = f.sel(f.cmp(FloatPredicate::OEQ, x0, f.c(f64::INFINITY)?)?, x0, r)?;
    let r = f.sel(f.cmp(FloatPredicate::UNO, x0, x0)?, x0, r)?;
    Ok(r)
}

/// `tanh(x)` for an `f32` or a vector of `f32` (the same code per lane, [`crate::lanes`]).
pub fn tanh<'ctx>(cg: &Cg<'ctx>, x0: Val<'ctx>) -> R<Val<'ctx>> {
    let f = F { cg, like: x0 };
    let hi = f.cmp(FloatPredicate::OGT, x0, f.c(9.0)?)?;
    let x = f.sel(hi, f.c(9.0)?, x0)?;
    let lo = f.cmp(FloatPredicate::OLT, x, f.c(-9.0)?)?;
    let x = f.sel(lo, f.c(-9.0)?, x)?;
    let x2 = f.mul(x, x)?;
    let p = f.poly(
        x2,
        &[
            -2.760_768_477_423_55e-16,
            2.000_187_904_824_77e-13,
            -8.604_671_522_137_35e-11,
            5.122_297_090_371_14e-8,
            1.485_722_357_179_79e-5,
            6.372_619_288_754_36e-4,
            4.893_524_558_917_86e-3,
        ],
    )?;
    let p = f.mul(p, x)?;
    let q = f.poly(
        x2,
        &[
            1.198_258_394_667_02e-6,
            1.185_347_056_866_54e-4,
            2.268_434_632_439e-3,
            4.893_525_185_543_85e-3,
        ],
    )?;
    let r = lanes::fdiv(cg, p, q, "tanh")?;
    // Tiny inputs: tanh(x) = x (keeps the sign of zero).
    let a = cg.call_intrinsic("llvm.fabs", &[x0])?;
    let small = f.cmp(FloatPredicate::OLT, a, f.c(4e-4)?)?;
    f.sel(small, x0, r)
}

/// `erf(x)` for an `f32` or a vector of `f32` (the same code per lane, [`crate::lanes`]):
/// within 1 ulp of the correctly rounded value for every `f32` input (0.991 ulp at most, on an
/// exhaustive comparison with the C library's `f64` `erf` under gradual underflow); `erf(±0) =
/// ±0`, `erf(±inf) = ±1`, NaN gives NaN. No division, so it is cheap on vectors.
///
/// Two pieces, both computed, one selected per lane:
/// - `|x| < 1`: `erf(x) = x + x * c(x^2)`, `c` a degree-6 polynomial fitted to `erf(x)/x - 1`
///   (relative error 0.02 ulp); the final fused multiply-add rounds once, so subnormal and tiny
///   inputs come out correctly rounded.
/// - `|x| >= 1`: `erf(|x|) = 1 - 2^k(|x| - 1)`, `k` a degree-6 polynomial fitted to
///   `log2(erfc)` on `[1, 4]`, weighted by `erfc` so its error is small where `erfc` is large
///   (0.02 ulp of the result), and `1 - 2^k` rounded once; `|x|` is clamped to 4 first, where
///   the result rounds to 1 (it does from 3.9192 on), so infinities give exactly `±1`, and `k`
///   stays in `[-26, 0]` for every `|x| <= 4` (the branch is computed for `|x| < 1` too). The
///   sign comes back by `copysign`.
///
/// Under FTZ with DAZ the result needs no explicit flush: it comes from float arithmetic (a
/// select between two results, a `copysign` of one in `[0.8, 1]`), and a subnormal input acts
/// as `±0` in that arithmetic, giving `±0`.
///
/// The polynomials are minimax fits (Lawson-weighted least squares on Chebyshev points,
/// `bench/math/erf_fit.py`) with the coefficients rounded to `f32`;
/// `bench/math/erf_exhaustive.c` emulates this code operation for operation and measures it
/// over every input.
pub fn erf<'ctx>(cg: &Cg<'ctx>, x: Val<'ctx>) -> R<Val<'ctx>> {
    let f = F { cg, like: x };
    let a = cg.call_intrinsic("llvm.fabs", &[x])?;
    // |x| < 1.
    let t = f.mul(x, x)?;
    let c = f.poly(
        t,
        &[
            7.853_861_462e-5,
            -8.010_193_706e-4,
            5.188_327_748e-3,
            -2.685_381_286e-2,
            1.128_358_543e-1,
            -3.761_262_596e-1,
            1.283_791_661e-1,
        ],
    )?;
    let near = f.fma(x, c, x)?;
    // |x| >= 1 (NaN too: the ordered compare keeps it, and it propagates to the result).
    let big = f.cmp(FloatPredicate::OGT, a, f.c(4.0)?)?;
    let ac = f.sel(big, f.c(4.0)?, a)?;
    let u = f.sub(ac, f.c(1.0)?)?;
    let k = f.poly(
        u,
        &[
            2.677_267_184e-4,
            -2.634_596_778e-3,
            1.426_954_102e-2,
            -5.987_283_587e-2,
            -1.216_362_596,
            -3.807_224_274,
            -2.668_416_739,
        ],
    )?;
    let far = f.one_minus_exp2(k)?;
    let far = cg.call_intrinsic("llvm.copysign", &[far, x])?;
    let small = f.cmp(FloatPredicate::OLT, a, f.c(1.0)?)?;
    f.sel(small, near, far)
}
