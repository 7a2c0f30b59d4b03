//! Host implementations of the NVVM math intrinsics and of `__nvvm_reflect`, which libdevice's
//! functions call, for the simulator ([`crate::sim_jit`] binds each intrinsic's uses to the
//! function of the same type here).
//!
//! Semantics, per PTX instruction:
//! - `add.rn`, `mul.rn`, `fma.rn`, `abs`, `sqrt.rn`, `cvt.rni` (round to nearest even) and
//!   `cvt.rm`/`rp`/`rz` (floor, ceil, trunc), `cvt.rni.s32` (saturating, NaN to 0), `cvt.sat`,
//!   `min`/`max` (NaN only when both are, `-0.0` below `+0.0`), `mov.b64` halves: exactly the
//!   GPU's result (`sqrt.approx.f32`, bound to the same correctly rounded root, excepted);
//! - `add.rz` and `sub.rz`/`rm`/`rp` (directed roundings): exact, from the round-to-nearest
//!   sum and its error (TwoSum), with IEEE's overflow and signed-zero rules;
//! - `ex2.approx`, `lg2.approx`, `rcp.approx`, `rsqrt.approx.f64`: the GPU's are approximations (ex2 and
//!   lg2 within about 2 ulp of f32, rcp.approx.f64 about 20 bits before libdevice's Newton steps
//!   refine it); here they are the host's correctly rounded `exp2`, `log2` and division, so a
//!   libdevice function may differ from the GPU's in its last bits: the only place the
//!   simulator's math is not the GPU's bit for bit. The `.ftz` forms flush subnormal inputs
//!   and results to zero of the same sign.
//!
//! libdevice's inline PTX: its one-instruction templates run as the functions of
//! [`asm_functions`] (the same semantics as the intrinsics above; `bfind.shiftamt` as a count
//! of leading zeros, all ones for 0); `crate::sim_jit` computes its multi-word integer
//! templates (wide multiply-adds, 128-bit sums and differences) in LLVM integers. Each template
//! is matched exactly.
//!
//! `__nvvm_reflect` answers as LLVM's NVVMReflect pass does for the PTX the backend emits:
//! `__CUDA_FTZ` is 0 (the backend links libdevice with `nvvm-reflect-ftz` 0), `__CUDA_ARCH` is
//! 800 (`sm_80`), anything else 0.
//!
//! Invariants: every function here is total (no panic on any input: NaN, infinities,
//! subnormals), and [`INTRINSICS`] gives each one's NVVM name, host symbol and address.

use std::ffi::{c_char, CStr};

/// Flushes a subnormal `f32` to zero of the same sign.
fn ftz(x: f32) -> f32 {
    if x.is_subnormal() {
        0.0f32.copysign(x)
    } else {
        x
    }
}

extern "C" fn add_rn_f(a: f32, b: f32) -> f32 {
    a + b
}

extern "C" fn add_rn_d(a: f64, b: f64) -> f64 {
    a + b
}

extern "C" fn mul_rn_f(a: f32, b: f32) -> f32 {
    a * b
}

extern "C" fn mul_rn_d(a: f64, b: f64) -> f64 {
    a * b
}

extern "C" fn fma_rn_f(a: f32, b: f32, c: f32) -> f32 {
    a.mul_add(b, c)
}

extern "C" fn fma_rn_d(a: f64, b: f64, c: f64) -> f64 {
    a.mul_add(b, c)
}

extern "C" fn add_rz_f(a: f32, b: f32) -> f32 {
    directed_sum(a, b, Round::Zero)
}

extern "C" fn fabs_f(x: f32) -> f32 {
    x.abs()
}

extern "C" fn fabs_d(x: f64) -> f64 {
    x.abs()
}

extern "C" fn round_f(x: f32) -> f32 {
    x.round_ties_even()
}

extern "C" fn round_d(x: f64) -> f64 {
    x.round_ties_even()
}

extern "C" fn floor_f(x: f32) -> f32 {
    x.floor()
}

extern "C" fn floor_d(x: f64) -> f64 {
    x.floor()
}

extern "C" fn ceil_f(x: f32) -> f32 {
    x.ceil()
}

extern "C" fn ceil_d(x: f64) -> f64 {
    x.ceil()
}

extern "C" fn trunc_f(x: f32) -> f32 {
    x.trunc()
}

extern "C" fn trunc_d(x: f64) -> f64 {
    x.trunc()
}

extern "C" fn sqrt_f(x: f32) -> f32 {
    x.sqrt()
}

extern "C" fn sqrt_d(x: f64) -> f64 {
    x.sqrt()
}

/// `min`: NaN only when both are NaN, else the smaller, `-0.0` below `+0.0`.
fn min_total<T: PartialOrd + Copy>(a: T, b: T, nan: fn(T) -> bool, neg: fn(T) -> bool) -> T {
    if nan(a) {
        b
    } else if nan(b) || a < b || (a == b && neg(a)) {
        a
    } else {
        b
    }
}

/// `max`: NaN only when both are NaN, else the larger, `+0.0` above `-0.0`.
fn max_total<T: PartialOrd + Copy>(a: T, b: T, nan: fn(T) -> bool, neg: fn(T) -> bool) -> T {
    if nan(a) {
        b
    } else if nan(b) || a > b || (a == b && !neg(a)) {
        a
    } else {
        b
    }
}

extern "C" fn fmin_f(a: f32, b: f32) -> f32 {
    min_total(a, b, f32::is_nan, f32::is_sign_negative)
}

extern "C" fn fmax_f(a: f32, b: f32) -> f32 {
    max_total(a, b, f32::is_nan, f32::is_sign_negative)
}

extern "C" fn fmin_d(a: f64, b: f64) -> f64 {
    min_total(a, b, f64::is_nan, f64::is_sign_negative)
}

extern "C" fn fmax_d(a: f64, b: f64) -> f64 {
    max_total(a, b, f64::is_nan, f64::is_sign_negative)
}

extern "C" fn saturate_f(x: f32) -> f32 {
    // `cvt.sat`: clamped to [0, 1], NaN to 0.
    if x.is_nan() {
        0.0
    } else {
        x.clamp(0.0, 1.0)
    }
}

extern "C" fn f2i_rn(x: f32) -> i32 {
    // `as` saturates and maps NaN to 0, as `cvt.rni.s32.f32` does.
    x.round_ties_even() as i32
}

extern "C" fn d2i_rn(x: f64) -> i32 {
    x.round_ties_even() as i32
}

extern "C" fn d2i_hi(x: f64) -> i32 {
    (x.to_bits() >> 32) as u32 as i32
}

extern "C" fn d2i_lo(x: f64) -> i32 {
    x.to_bits() as u32 as i32
}

extern "C" fn lohi_i2d(lo: i32, hi: i32) -> f64 {
    f64::from_bits(((hi as u32 as u64) << 32) | lo as u32 as u64)
}

extern "C" fn ex2_approx_f(x: f32) -> f32 {
    x.exp2()
}

extern "C" fn ex2_approx_ftz_f(x: f32) -> f32 {
    ftz(ftz(x).exp2())
}

extern "C" fn lg2_approx_f(x: f32) -> f32 {
    x.log2()
}

extern "C" fn lg2_approx_ftz_f(x: f32) -> f32 {
    ftz(ftz(x).log2())
}

extern "C" fn rcp_approx_ftz_d(x: f64) -> f64 {
    // The f64 form flushes as the f32 range does (PTX: subnormal f64 inputs and results).
    let flush = |v: f64| {
        if v.is_subnormal() {
            0.0f64.copysign(v)
        } else {
            v
        }
    };
    flush(1.0 / flush(x))
}

/// A directed rounding of a sum.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Round {
    /// Toward zero.
    Zero,
    /// Toward minus infinity.
    Down,
    /// Toward plus infinity.
    Up,
}

/// The float operations directed sums need, for `f32` and `f64`.
trait Float: Copy + PartialOrd + std::ops::Add<Output = Self> + std::ops::Sub<Output = Self> {
    const ZERO: Self;
    const NEG_ZERO: Self;
    const MAX: Self;
    fn is_nan(self) -> bool;
    fn is_infinite(self) -> bool;
    fn is_finite(self) -> bool;
    fn is_sign_negative(self) -> bool;
    fn neg(self) -> Self;
    /// The next float away from zero (`away`) or toward it, for a finite non-zero value.
    fn step(self, away: bool) -> Self;
}

macro_rules! float {
    ($t:ty) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const NEG_ZERO: Self = -0.0;
            const MAX: Self = <$t>::MAX;
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            fn is_infinite(self) -> bool {
                <$t>::is_infinite(self)
            }
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            fn is_sign_negative(self) -> bool {
                <$t>::is_sign_negative(self)
            }
            fn neg(self) -> Self {
                -self
            }
            fn step(self, away: bool) -> Self {
                let b = self.to_bits();
                <$t>::from_bits(if away { b + 1 } else { b - 1 })
            }
        }
    };
}
float!(f32);
float!(f64);

/// `a + b` rounded as `mode` says, exactly: from the round-to-nearest sum and its error
/// (TwoSum), with IEEE's overflow and signed-zero rules for the directed roundings.
fn directed_sum<F: Float>(a: F, b: F, mode: Round) -> F {
    let s = a + b;
    if s.is_nan() {
        return s;
    }
    let neg = s.is_sign_negative();
    if s.is_infinite() {
        if !(a.is_finite() && b.is_finite()) {
            return s;
        }
        // Round-to-nearest overflowed: a directed rounding toward zero stops at the largest
        // finite value.
        let toward_zero = match mode {
            Round::Zero => true,
            Round::Down => !neg,
            Round::Up => neg,
        };
        let max = if neg { F::MAX.neg() } else { F::MAX };
        return if toward_zero { max } else { s };
    }
    if s == F::ZERO {
        // A sum rounding to zero is exact; toward minus infinity, an exact zero of operands
        // of opposite signs (or two zeros, one negative) is -0.
        let both_zero = a == F::ZERO && b == F::ZERO;
        let negative_zero = if both_zero {
            a.is_sign_negative() && b.is_sign_negative()
                || mode == Round::Down && (a.is_sign_negative() || b.is_sign_negative())
        } else {
            mode == Round::Down
        };
        return if negative_zero { F::NEG_ZERO } else { F::ZERO };
    }
    let bb = s - a;
    let err = (a - (s - bb)) + (b - bb);
    if err == F::ZERO {
        return s;
    }
    // The exact sum is `s + err`; `err`'s sign says which side of `s` it lies on.
    let below = err < F::ZERO;
    let step = match mode {
        Round::Zero => below != neg,
        Round::Down => below,
        Round::Up => !below,
    };
    if !step {
        return s;
    }
    // Down from a positive `s` is toward zero, from a negative one away from it.
    s.step(below == neg)
}

/// Flushes a subnormal `f64` to zero of the same sign.
fn ftz64(x: f64) -> f64 {
    if x.is_subnormal() {
        0.0f64.copysign(x)
    } else {
        x
    }
}

extern "C" fn rcp_approx_ftz_f(x: f32) -> f32 {
    ftz(1.0 / ftz(x))
}

extern "C" fn rsqrt_approx_ftz_d(x: f64) -> f64 {
    ftz64(1.0 / ftz64(x).sqrt())
}

extern "C" fn sub_rn_f(a: f32, b: f32) -> f32 {
    a - b
}

extern "C" fn sub_rn_ftz_f(a: f32, b: f32) -> f32 {
    ftz(ftz(a) - ftz(b))
}

extern "C" fn sub_rn_d(a: f64, b: f64) -> f64 {
    a - b
}

extern "C" fn sub_rz_f(a: f32, b: f32) -> f32 {
    directed_sum(a, -b, Round::Zero)
}

extern "C" fn sub_rm_f(a: f32, b: f32) -> f32 {
    directed_sum(a, -b, Round::Down)
}

extern "C" fn sub_rp_f(a: f32, b: f32) -> f32 {
    directed_sum(a, -b, Round::Up)
}

extern "C" fn sub_rz_ftz_f(a: f32, b: f32) -> f32 {
    ftz(directed_sum(ftz(a), -ftz(b), Round::Zero))
}

extern "C" fn sub_rm_ftz_f(a: f32, b: f32) -> f32 {
    ftz(directed_sum(ftz(a), -ftz(b), Round::Down))
}

extern "C" fn sub_rp_ftz_f(a: f32, b: f32) -> f32 {
    ftz(directed_sum(ftz(a), -ftz(b), Round::Up))
}

extern "C" fn sub_rz_d(a: f64, b: f64) -> f64 {
    directed_sum(a, -b, Round::Zero)
}

extern "C" fn sub_rm_d(a: f64, b: f64) -> f64 {
    directed_sum(a, -b, Round::Down)
}

extern "C" fn sub_rp_d(a: f64, b: f64) -> f64 {
    directed_sum(a, -b, Round::Up)
}

extern "C" fn bfind_shiftamt_u32(x: u32) -> u32 {
    if x == 0 {
        u32::MAX
    } else {
        x.leading_zeros()
    }
}

/// libdevice's one-instruction inline PTX templates (whitespace collapsed), with the host
/// symbol and address of the function computing each and its signature (`f` an `f32`, `d` an
/// `f64`, `i` an `i32`: arguments, `>`, result).
pub(crate) fn asm_functions() -> Vec<(&'static str, &'static str, usize, &'static str)> {
    macro_rules! table {
        ($($asm:literal, $sig:literal => $f:ident),* $(,)?) => {
            vec![$(($asm, concat!("axle_sim_", stringify!($f)), $f as *const () as usize, $sig)),*]
        };
    }
    table![
        "rcp.approx.ftz.f32 $0,$1;", "f>f" => rcp_approx_ftz_f,
        "rsqrt.approx.ftz.f64 $0, $1;", "d>d" => rsqrt_approx_ftz_d,
        "sub.rn.f32 $0, $1, $2;", "ff>f" => sub_rn_f,
        "sub.rn.ftz.f32 $0, $1, $2;", "ff>f" => sub_rn_ftz_f,
        "sub.rn.f64 $0, $1, $2;", "dd>d" => sub_rn_d,
        "sub.rz.f32 $0, $1, $2;", "ff>f" => sub_rz_f,
        "sub.rm.f32 $0, $1, $2;", "ff>f" => sub_rm_f,
        "sub.rp.f32 $0, $1, $2;", "ff>f" => sub_rp_f,
        "sub.rz.ftz.f32 $0, $1, $2;", "ff>f" => sub_rz_ftz_f,
        "sub.rm.ftz.f32 $0, $1, $2;", "ff>f" => sub_rm_ftz_f,
        "sub.rp.ftz.f32 $0, $1, $2;", "ff>f" => sub_rp_ftz_f,
        "sub.rz.f64 $0, $1, $2;", "dd>d" => sub_rz_d,
        "sub.rm.f64 $0, $1, $2;", "dd>d" => sub_rm_d,
        "sub.rp.f64 $0, $1, $2;", "dd>d" => sub_rp_d,
        "bfind.shiftamt.u32 $0, $1;", "i>i" => bfind_shiftamt_u32,
    ]
}

/// `__nvvm_reflect(name)`.
extern "C" fn nvvm_reflect(name: *const c_char) -> i32 {
    if name.is_null() {
        return 0;
    }
    // SAFETY: libdevice passes a NUL-terminated constant string.
    let name = unsafe { CStr::from_ptr(name) };
    match name.to_bytes() {
        b"__CUDA_ARCH" => 800,
        _ => 0,
    }
}

/// The host symbol `__nvvm_reflect` resolves to, and its address.
pub(crate) fn reflect() -> (&'static str, usize) {
    ("__nvvm_reflect", nvvm_reflect as *const () as usize)
}

/// (NVVM intrinsic, host symbol, address) of every intrinsic implemented here.
pub(crate) fn intrinsics() -> Vec<(&'static str, &'static str, usize)> {
    macro_rules! table {
        ($($name:literal => $f:ident),* $(,)?) => {
            vec![$(($name, concat!("axle_sim_", stringify!($f)), $f as *const () as usize)),*]
        };
    }
    table![
        "llvm.nvvm.add.rn.f" => add_rn_f,
        "llvm.nvvm.add.rn.d" => add_rn_d,
        "llvm.nvvm.add.rz.f" => add_rz_f,
        "llvm.nvvm.mul.rn.f" => mul_rn_f,
        "llvm.nvvm.mul.rn.d" => mul_rn_d,
        "llvm.nvvm.fma.rn.f" => fma_rn_f,
        "llvm.nvvm.fma.rn.d" => fma_rn_d,
        "llvm.nvvm.fabs.f" => fabs_f,
        "llvm.nvvm.fabs.d" => fabs_d,
        "llvm.nvvm.round.f" => round_f,
        "llvm.nvvm.round.d" => round_d,
        "llvm.nvvm.floor.f" => floor_f,
        "llvm.nvvm.floor.d" => floor_d,
        "llvm.nvvm.ceil.f" => ceil_f,
        "llvm.nvvm.ceil.d" => ceil_d,
        "llvm.nvvm.trunc.f" => trunc_f,
        "llvm.nvvm.trunc.d" => trunc_d,
        "llvm.nvvm.sqrt.f" => sqrt_f,
        "llvm.nvvm.sqrt.rn.f" => sqrt_f,
        "llvm.nvvm.sqrt.rn.d" => sqrt_d,
        "llvm.nvvm.fmin.f" => fmin_f,
        "llvm.nvvm.fmax.f" => fmax_f,
        "llvm.nvvm.fmin.d" => fmin_d,
        "llvm.nvvm.fmax.d" => fmax_d,
        "llvm.nvvm.saturate.f" => saturate_f,
        "llvm.nvvm.f2i.rn" => f2i_rn,
        "llvm.nvvm.d2i.rn" => d2i_rn,
        "llvm.nvvm.d2i.hi" => d2i_hi,
        "llvm.nvvm.d2i.lo" => d2i_lo,
        "llvm.nvvm.lohi.i2d" => lohi_i2d,
        "llvm.nvvm.ex2.approx.f" => ex2_approx_f,
        "llvm.nvvm.ex2.approx.ftz.f" => ex2_approx_ftz_f,
        "llvm.nvvm.lg2.approx.f" => lg2_approx_f,
        "llvm.nvvm.lg2.approx.ftz.f" => lg2_approx_ftz_f,
        "llvm.nvvm.rcp.approx.ftz.d" => rcp_approx_ftz_d,
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_rz_rounds_toward_zero_exactly() {
        // 1 + 2^-30 is 1 to nearest and toward zero; 1 - 2^-30 is 1 to nearest but the float
        // below 1 toward zero.
        let tiny = 2f32.powi(-30);
        assert_eq!(add_rz_f(1.0, tiny), 1.0);
        assert_eq!(add_rz_f(1.0, -tiny), f32::from_bits(1.0f32.to_bits() - 1));
        assert_eq!(add_rz_f(-1.0, tiny), -f32::from_bits(1.0f32.to_bits() - 1));
        assert_eq!(add_rz_f(f32::MAX, f32::MAX), f32::MAX);
        assert_eq!(add_rz_f(-f32::MAX, -f32::MAX), -f32::MAX);
        assert!(add_rz_f(f32::NAN, 1.0).is_nan());
        assert_eq!(add_rz_f(f32::INFINITY, 1.0), f32::INFINITY);
        assert_eq!(add_rz_f(0.5, 0.25), 0.75);
        // Against f64 arithmetic truncated toward zero, where the f64 sum is exact.
        for (a, b) in [(1.5f32, 3e-8f32), (-7.25, 1e-7), (3.0, -1e-9), (1e10, -0.3)] {
            let exact = a as f64 + b as f64;
            let mut r = exact as f32;
            if (r as f64).abs() > exact.abs() {
                r = f32::from_bits(r.to_bits() - 1);
            }
            assert_eq!(add_rz_f(a, b), r, "{a} + {b}");
        }
    }

    #[test]
    fn directed_differences_agree_with_exact_arithmetic() {
        // f32 differences are exact in f64 for these operands; round the exact value by hand.
        let cases = [
            (1.0f32, 3e-9f32),
            (-2.5, 1e-8),
            (1e-3, 7.0),
            (3.0, 3.0),
            (-0.0, 0.0),
        ];
        for (a, b) in cases {
            let exact = a as f64 - b as f64;
            let near = exact as f32;
            let (down, up) = if (near as f64) > exact {
                (
                    f32::from_bits(if near > 0.0 {
                        near.to_bits() - 1
                    } else {
                        near.to_bits() + 1
                    }),
                    near,
                )
            } else if (near as f64) < exact {
                (
                    near,
                    f32::from_bits(if near >= 0.0 {
                        near.to_bits() + 1
                    } else {
                        near.to_bits() - 1
                    }),
                )
            } else {
                (near, near)
            };
            if exact != 0.0 {
                assert_eq!(sub_rm_f(a, b), down, "{a} - {b} down");
                assert_eq!(sub_rp_f(a, b), up, "{a} - {b} up");
                let z = if exact > 0.0 { down } else { up };
                assert_eq!(sub_rz_f(a, b), z, "{a} - {b} toward zero");
            }
        }
        // x - x is +0, but -0 toward minus infinity.
        assert!(sub_rm_f(3.0, 3.0).is_sign_negative());
        assert!(!sub_rp_f(3.0, 3.0).is_sign_negative());
        assert!(!sub_rz_d(3.0, 3.0).is_sign_negative());
        // Overflow: toward zero stops at the largest finite value.
        assert_eq!(sub_rz_f(f32::MAX, -f32::MAX), f32::MAX);
        assert_eq!(sub_rm_f(f32::MAX, -f32::MAX), f32::MAX);
        assert_eq!(sub_rp_f(f32::MAX, -f32::MAX), f32::INFINITY);
        assert_eq!(sub_rm_d(-f64::MAX, f64::MAX), f64::NEG_INFINITY);
        assert_eq!(bfind_shiftamt_u32(1), 31);
        assert_eq!(bfind_shiftamt_u32(0), u32::MAX);
    }

    #[test]
    fn conversions_saturate_and_split_bits() {
        assert_eq!(f2i_rn(2.5), 2);
        assert_eq!(f2i_rn(3.5), 4);
        assert_eq!(f2i_rn(f32::NAN), 0);
        assert_eq!(f2i_rn(1e20), i32::MAX);
        let x = -1234.5678f64;
        assert_eq!(lohi_i2d(d2i_lo(x), d2i_hi(x)), x);
        assert_eq!(round_f(-2.5), -2.0);
        assert_eq!(ex2_approx_ftz_f(-140.0), 0.0);
        assert!(ex2_approx_f(-140.0) > 0.0);
        assert_eq!(fmin_f(f32::NAN, 1.0), 1.0);
        assert!(fmin_f(f32::NAN, f32::NAN).is_nan());
        assert!(fmin_f(0.0, -0.0).is_sign_negative() && fmin_f(-0.0, 0.0).is_sign_negative());
        assert!(!fmax_f(0.0, -0.0).is_sign_negative() && !fmax_f(-0.0, 0.0).is_sign_negative());
        assert_eq!(fmax_d(2.0, f64::NAN), 2.0);
        assert_eq!(saturate_f(f32::NAN), 0.0);
        assert_eq!(saturate_f(1.5), 1.0);
    }

    #[test]
    fn reflect_answers_as_nvvm_reflect_for_sm_80_without_ftz() {
        assert_eq!(nvvm_reflect(c"__CUDA_ARCH".as_ptr()), 800);
        assert_eq!(nvvm_reflect(c"__CUDA_FTZ".as_ptr()), 0);
        assert_eq!(nvvm_reflect(std::ptr::null()), 0);
    }
}
