//! Typed views of literal bytes: the element traits the kernels are generic over.
//!
//! Literals keep their elements as row-major little-endian bytes. Kernels load and store typed
//! values with [`Elem`] and are monomorphized per element type, so inner loops never dispatch on
//! the element type. Floating-point kernels are written once over [`FloatStorage`]: `f16`, `bf16`
//! and the 8-bit and 4-bit float formats compute in `f32` and round back to their own type after
//! every operation, as XLA does. Integer kernels are written over [`Int`], implemented for the
//! native widths and for the sub-byte types (`s2`, `s4`, `u2`, `u4`).

use axle_ir::literal::minifloat_to_f64;
use axle_ir::ElementType;
use half::{bf16, f16};
use rayon::prelude::*;

/// A value that can be loaded from and stored to little-endian element bytes.
pub(crate) trait Elem: Copy + Send + Sync + 'static {
    /// Bytes per element.
    const SIZE: usize;
    /// Loads one element from exactly `SIZE` bytes.
    fn load(b: &[u8]) -> Self;
    /// Stores one element into exactly `SIZE` bytes.
    fn store(self, b: &mut [u8]);
}

macro_rules! elem_le {
    ($($t:ty),*) => {$(
        impl Elem for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            #[inline(always)]
            fn load(b: &[u8]) -> Self {
                <$t>::from_le_bytes(b.try_into().unwrap())
            }
            #[inline(always)]
            fn store(self, b: &mut [u8]) {
                b.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}
elem_le!(i8, i16, i32, i64, u8, u16, u32, u64, f32, f64);

impl Elem for f16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        f16::from_bits(u16::from_le_bytes([b[0], b[1]]))
    }
    #[inline(always)]
    fn store(self, b: &mut [u8]) {
        b.copy_from_slice(&self.to_bits().to_le_bytes());
    }
}

impl Elem for bf16 {
    const SIZE: usize = 2;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        bf16::from_bits(u16::from_le_bytes([b[0], b[1]]))
    }
    #[inline(always)]
    fn store(self, b: &mut [u8]) {
        b.copy_from_slice(&self.to_bits().to_le_bytes());
    }
}

/// A `pred` element: one byte, 0 or 1 (any non-zero byte reads as true).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Pred(pub bool);

impl Elem for Pred {
    const SIZE: usize = 1;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        Pred(b[0] != 0)
    }
    #[inline(always)]
    fn store(self, b: &mut [u8]) {
        b[0] = self.0 as u8;
    }
}

/// Loads every element of `data` as `T`.
pub(crate) fn to_vec<T: Elem>(data: &[u8]) -> Vec<T> {
    data.chunks_exact(T::SIZE).map(T::load).collect()
}

/// Stores `v` as little-endian bytes.
pub(crate) fn from_slice<T: Elem>(v: &[T]) -> Vec<u8> {
    let mut out = vec![0u8; v.len() * T::SIZE];
    for (o, x) in out.chunks_exact_mut(T::SIZE).zip(v) {
        x.store(o);
    }
    out
}

/// Arrays at least this long are mapped in parallel chunks.
const PAR_MIN: usize = 1 << 16;
/// Elements per parallel chunk.
const PAR_CHUNK: usize = 1 << 14;

#[inline(always)]
fn seq_map1<T: Elem, U: Elem>(x: &[u8], out: &mut [u8], f: &impl Fn(T) -> U) {
    for (o, i) in out.chunks_exact_mut(U::SIZE).zip(x.chunks_exact(T::SIZE)) {
        f(T::load(i)).store(o);
    }
}

#[inline(always)]
fn seq_map2<T: Elem, U: Elem>(a: &[u8], b: &[u8], out: &mut [u8], f: &impl Fn(T, T) -> U) {
    for ((o, x), y) in out
        .chunks_exact_mut(U::SIZE)
        .zip(a.chunks_exact(T::SIZE))
        .zip(b.chunks_exact(T::SIZE))
    {
        f(T::load(x), T::load(y)).store(o);
    }
}

/// Runs `work(chunk index, chunk)` over `out` in chunks of `chunk` bytes, in parallel. Not
/// generic, so the rayon machinery is instantiated once; `work` is called once per chunk.
fn par_chunks(out: &mut [u8], chunk: usize, work: &(dyn Fn(usize, &mut [u8]) + Sync)) {
    out.par_chunks_mut(chunk)
        .enumerate()
        .for_each(|(i, o)| work(i, o));
}

/// Applies `f` to every element of `x`, writing `out` (in parallel chunks for long arrays;
/// every element is independent, so the result does not depend on the thread count).
#[inline(always)]
pub(crate) fn map1<T: Elem, U: Elem>(x: &[u8], out: &mut [u8], f: impl Fn(T) -> U + Sync) {
    if out.len() / U::SIZE >= PAR_MIN {
        par_chunks(out, PAR_CHUNK * U::SIZE, &|i, o| {
            let start = i * PAR_CHUNK * T::SIZE;
            let xi = &x[start..start + o.len() / U::SIZE * T::SIZE];
            seq_map1(xi, o, &f);
        });
    } else {
        seq_map1(x, out, &f);
    }
}

/// Applies `f` to every pair of elements of `a` and `b`, writing `out` (in parallel chunks for
/// long arrays).
#[inline(always)]
pub(crate) fn map2<T: Elem, U: Elem>(
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
    f: impl Fn(T, T) -> U + Sync,
) {
    if out.len() / U::SIZE >= PAR_MIN {
        par_chunks(out, PAR_CHUNK * U::SIZE, &|i, o| {
            let start = i * PAR_CHUNK * T::SIZE;
            let end = start + o.len() / U::SIZE * T::SIZE;
            seq_map2(&a[start..end], &b[start..end], o, &f);
        });
    } else {
        seq_map2(a, b, out, &f);
    }
}

// ---------------------------------------------------------------------------------------------
// Floating point.

/// A floating-point compute type (`f32` or `f64`) with the math XLA's ops need.
pub(crate) trait Float:
    crate::smith::Real
    + Copy
    + PartialOrd
    + std::ops::Add<Output = Self>
    + std::ops::Sub<Output = Self>
    + std::ops::Mul<Output = Self>
    + std::ops::Div<Output = Self>
    + std::ops::Rem<Output = Self>
    + std::ops::Neg<Output = Self>
    + Send
    + Sync
    + 'static
{
    const ZERO: Self;
    const ONE: Self;
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn is_nan(self) -> bool;
    fn is_finite(self) -> bool;
    fn abs(self) -> Self;
    fn copysign(self, sign: Self) -> Self;
    fn floor(self) -> Self;
    fn ceil(self) -> Self;
    fn round_afz(self) -> Self;
    fn round_even(self) -> Self;
    fn sqrt(self) -> Self;
    fn cbrt(self) -> Self;
    fn exp(self) -> Self;
    fn exp_m1(self) -> Self;
    fn ln(self) -> Self;
    fn ln_1p(self) -> Self;
    fn sin(self) -> Self;
    fn cos(self) -> Self;
    fn tan(self) -> Self;
    fn tanh(self) -> Self;
    fn erf(self) -> Self;
    fn atan2(self, x: Self) -> Self;
    fn powf(self, y: Self) -> Self;
    /// Maps the value to an integer whose order is XLA's total order on this type.
    fn total_order_key(self) -> i64;
    /// The value with a subnormal flushed to a zero of the same sign (what x86's DAZ and FTZ
    /// modes do to operands and results).
    fn flush(self) -> Self;
    /// x86's default NaN, what an invalid operation without NaN operands (`inf - inf`,
    /// `0 * inf`, `0 / 0`) gives: the negative quiet NaN (`0xffc00000` for `f32`).
    fn default_nan() -> Self;
    /// A NaN with its quiet bit set (what x86 arithmetic makes of a signaling NaN operand).
    fn quieted(self) -> Self;
}

/// The NaN rule of x86's `addss`/`subss`/`mulss`/`divss` (and their `sd` forms), which XLA CPU
/// and the cpu backend compute with: `r = x op y` unless it is NaN, and then the first NaN
/// operand quieted, else (an invalid operation) the default NaN. Rust and LLVM leave which NaN
/// an operation returns open (LLVM commutes `fadd`/`fmul` freely), so without this rule the
/// evaluator's NaN sign depended on how its loop compiled, and a `bitcast-convert` or a
/// total-order sort exposed it (cpu campaign seed 17955177449, case 16345: `NaN + (-NaN)` in a
/// scatter; seed 1795530001, case 9471: `inf + (-inf) + NaN` in a reduce).
#[inline(always)]
pub(crate) fn x86_nan<F: Float>(x: F, y: F, r: F) -> F {
    if !r.is_nan() {
        r
    } else if x.is_nan() {
        x.quieted()
    } else if y.is_nan() {
        y.quieted()
    } else {
        F::default_nan()
    }
}

/// `v` flushed when `FTZ`.
#[inline(always)]
pub(crate) fn fl<F: Float, const FTZ: bool>(v: F) -> F {
    if FTZ {
        v.flush()
    } else {
        v
    }
}

macro_rules! float_impl {
    ($t:ty, $bits:ty, $sbits:ty, $erf:path) => {
        impl Float for $t {
            const ZERO: Self = 0.0;
            const ONE: Self = 1.0;
            #[inline(always)]
            fn from_f64(v: f64) -> Self {
                v as $t
            }
            #[inline(always)]
            fn to_f64(self) -> f64 {
                self as f64
            }
            #[inline(always)]
            fn is_nan(self) -> bool {
                <$t>::is_nan(self)
            }
            #[inline(always)]
            fn is_finite(self) -> bool {
                <$t>::is_finite(self)
            }
            #[inline(always)]
            fn abs(self) -> Self {
                <$t>::abs(self)
            }
            #[inline(always)]
            fn copysign(self, sign: Self) -> Self {
                <$t>::copysign(self, sign)
            }
            #[inline(always)]
            fn floor(self) -> Self {
                <$t>::floor(self)
            }
            #[inline(always)]
            fn ceil(self) -> Self {
                <$t>::ceil(self)
            }
            #[inline(always)]
            fn round_afz(self) -> Self {
                <$t>::round(self)
            }
            #[inline(always)]
            fn round_even(self) -> Self {
                <$t>::round_ties_even(self)
            }
            #[inline(always)]
            fn sqrt(self) -> Self {
                <$t>::sqrt(self)
            }
            #[inline(always)]
            fn cbrt(self) -> Self {
                <$t>::cbrt(self)
            }
            #[inline(always)]
            fn exp(self) -> Self {
                <$t>::exp(self)
            }
            #[inline(always)]
            fn exp_m1(self) -> Self {
                <$t>::exp_m1(self)
            }
            #[inline(always)]
            fn ln(self) -> Self {
                <$t>::ln(self)
            }
            #[inline(always)]
            fn ln_1p(self) -> Self {
                <$t>::ln_1p(self)
            }
            #[inline(always)]
            fn sin(self) -> Self {
                <$t>::sin(self)
            }
            #[inline(always)]
            fn cos(self) -> Self {
                <$t>::cos(self)
            }
            #[inline(always)]
            fn tan(self) -> Self {
                <$t>::tan(self)
            }
            #[inline(always)]
            fn tanh(self) -> Self {
                <$t>::tanh(self)
            }
            #[inline(always)]
            fn erf(self) -> Self {
                $erf(self)
            }
            #[inline(always)]
            fn atan2(self, x: Self) -> Self {
                <$t>::atan2(self, x)
            }
            #[inline(always)]
            fn powf(self, y: Self) -> Self {
                <$t>::powf(self, y)
            }
            #[inline(always)]
            fn flush(self) -> Self {
                if <$t>::abs(self) < <$t>::MIN_POSITIVE {
                    <$t>::copysign(0.0, self)
                } else {
                    self
                }
            }
            #[inline(always)]
            fn default_nan() -> Self {
                // The sign, every exponent bit and the quiet bit.
                let quiet: $bits = 1 << (<$t>::MANTISSA_DIGITS - 2);
                <$t>::from_bits(!(<$bits>::MAX >> 1) | <$t>::INFINITY.to_bits() | quiet)
            }
            #[inline(always)]
            fn quieted(self) -> Self {
                // The quiet bit is the highest fraction bit.
                let quiet: $bits = 1 << (<$t>::MANTISSA_DIGITS - 2);
                <$t>::from_bits(self.to_bits() | quiet)
            }
            #[inline(always)]
            fn total_order_key(self) -> i64 {
                let b = self.to_bits() as $sbits;
                // Negative values: flip every bit but the sign, so more negative sorts lower.
                let k = b ^ ((((b >> (<$bits>::BITS - 1)) as $bits) >> 1) as $sbits);
                k as i64
            }
        }
    };
}
float_impl!(f32, u32, i32, c_math::erff);
float_impl!(f64, u64, i64, c_math::erf);

/// The platform C library's `erf`, which Rust's standard library does not wrap: the
/// evaluator's other transcendentals (`f64::tanh`, `f32::exp`, ...) are the platform's libm
/// too, and the cpu backend's libm path calls the same functions, so both give the same bits
/// (the `libm` crate's port differed from glibc's in the last bit on some inputs: cpu
/// campaign seed 1824015, case 2714).
mod c_math {
    mod sys {
        extern "C" {
            pub fn erf(x: f64) -> f64;
            pub fn erff(x: f32) -> f32;
        }
    }

    /// `erf` of an `f64`.
    pub fn erf(x: f64) -> f64 {
        // SAFETY: a pure C99 math function of one float: no pointers, no state, defined for
        // every input (NaN and infinities included).
        unsafe { sys::erf(x) }
    }

    /// `erf` of an `f32`.
    pub fn erff(x: f32) -> f32 {
        // SAFETY: as `erf`.
        unsafe { sys::erff(x) }
    }
}

/// A stored floating-point type and the type XLA computes it in.
pub(crate) trait FloatStorage: Elem {
    /// The compute type (`f32` for every type narrower than `f64`).
    type C: Float;
    /// Widens to the compute type (exact).
    fn up(self) -> Self::C;
    /// Rounds a compute value to this type (round to nearest even).
    fn down(v: Self::C) -> Self;
    /// Rounds an `f64` to this type the way XLA converts it.
    fn from_f64_convert(v: f64) -> Self;
}

impl FloatStorage for f32 {
    type C = f32;
    #[inline(always)]
    fn up(self) -> f32 {
        self
    }
    #[inline(always)]
    fn down(v: f32) -> Self {
        v
    }
    #[inline(always)]
    fn from_f64_convert(v: f64) -> Self {
        v as f32
    }
}

impl FloatStorage for f64 {
    type C = f64;
    #[inline(always)]
    fn up(self) -> f64 {
        self
    }
    #[inline(always)]
    fn down(v: f64) -> Self {
        v
    }
    #[inline(always)]
    fn from_f64_convert(v: f64) -> Self {
        v
    }
}

impl FloatStorage for f16 {
    type C = f32;
    #[inline(always)]
    fn up(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn down(v: f32) -> Self {
        f16::from_f32(v)
    }
    fn from_f64_convert(v: f64) -> Self {
        // One rounding straight from f64 (LLVM's fptrunc double -> half).
        f16::from_bits(round_f64_to_format(v, &FloatFormat::F16) as u16)
    }
}

impl FloatStorage for bf16 {
    type C = f32;
    #[inline(always)]
    fn up(self) -> f32 {
        self.to_f32()
    }
    #[inline(always)]
    fn down(v: f32) -> Self {
        bf16::from_f32(v)
    }
    fn from_f64_convert(v: f64) -> Self {
        // XLA converts f64 to bf16 through f32.
        bf16::from_f32(v as f32)
    }
}

/// An 8-bit or 4-bit float, one byte per element; `K` is the [`ElementType`] discriminant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Mini<const K: u8>(pub u8);

impl<const K: u8> Mini<K> {
    fn ty() -> ElementType {
        ElementType::ALL[K as usize]
    }
}

impl<const K: u8> Elem for Mini<K> {
    const SIZE: usize = 1;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        Mini(b[0])
    }
    #[inline(always)]
    fn store(self, b: &mut [u8]) {
        b[0] = self.0;
    }
}

impl<const K: u8> FloatStorage for Mini<K> {
    type C = f32;
    fn up(self) -> f32 {
        minifloat_to_f64(Self::ty(), self.0) as f32
    }
    fn down(v: f32) -> Self {
        Mini(round_f64_to_format(v as f64, &FloatFormat::of(Self::ty())) as u8)
    }
    fn from_f64_convert(v: f64) -> Self {
        Mini(round_f64_to_format(v, &FloatFormat::of(Self::ty())) as u8)
    }
}

/// The `K` parameter of [`Mini`] for element type `t`.
pub(crate) const fn mini_index(t: ElementType) -> u8 {
    t as u8
}

/// Bit layout of a small binary float format.
#[derive(Clone, Copy, Debug)]
pub(crate) struct FloatFormat {
    /// Exponent bits.
    pub eb: u32,
    /// Mantissa bits.
    pub mb: u32,
    /// Exponent bias.
    pub bias: i32,
    /// Whether the format has infinities (IEEE-style all-ones exponent).
    pub ieee: bool,
    /// Whether there is a sign bit.
    pub signed: bool,
    /// Whether negative zero is the NaN pattern (the `fnuz` formats).
    pub nuz: bool,
    /// Whether the format has a NaN at all.
    pub has_nan: bool,
    /// Whether exponent field 0 denotes subnormals (false for e8m0).
    pub subnormals: bool,
}

impl FloatFormat {
    /// IEEE half precision.
    pub const F16: FloatFormat = FloatFormat {
        eb: 5,
        mb: 10,
        bias: 15,
        ieee: true,
        signed: true,
        nuz: false,
        has_nan: true,
        subnormals: true,
    };

    /// The format of a small float element type.
    pub fn of(t: ElementType) -> FloatFormat {
        use ElementType::*;
        let (eb, mb, bias, ieee, nuz, has_nan) = match t {
            F16 => return FloatFormat::F16,
            F8E5M2 => (5, 2, 15, true, false, true),
            F8E4M3 => (4, 3, 7, true, false, true),
            F8E3M4 => (3, 4, 3, true, false, true),
            F8E4M3FN => (4, 3, 7, false, false, true),
            F8E4M3B11FNUZ => (4, 3, 11, false, true, true),
            F8E5M2FNUZ => (5, 2, 16, false, true, true),
            F8E4M3FNUZ => (4, 3, 8, false, true, true),
            F8E8M0FNU => {
                return FloatFormat {
                    eb: 8,
                    mb: 0,
                    bias: 127,
                    ieee: false,
                    signed: false,
                    nuz: false,
                    has_nan: true,
                    subnormals: false,
                }
            }
            F4E2M1FN => (2, 1, 1, false, false, false),
            _ => unreachable!("not a small float type: {t}"),
        };
        FloatFormat {
            eb,
            mb,
            bias,
            ieee,
            signed: true,
            nuz,
            has_nan,
            subnormals: true,
        }
    }

    fn decode(&self, bits: u32) -> f64 {
        let sign = if self.signed && (bits >> (self.eb + self.mb)) & 1 == 1 {
            -1.0
        } else {
            1.0
        };
        let e = (bits >> self.mb) & ((1 << self.eb) - 1);
        let m = bits & ((1 << self.mb) - 1);
        if !self.subnormals {
            return 2f64.powi(e as i32 - self.bias);
        }
        if e == 0 {
            sign * m as f64 * 2f64.powi(1 - self.bias - self.mb as i32)
        } else {
            sign * (1.0 + m as f64 / (1u64 << self.mb) as f64) * 2f64.powi(e as i32 - self.bias)
        }
    }

    fn is_nan_bits(&self, bits: u32) -> bool {
        let emax = (1u32 << self.eb) - 1;
        let e = (bits >> self.mb) & emax;
        let m = bits & ((1 << self.mb) - 1);
        let total = self.eb + self.mb + self.signed as u32;
        if !self.has_nan {
            false
        } else if self.ieee {
            e == emax && m != 0
        } else if self.nuz {
            bits == 1 << (total - 1)
        } else if !self.signed {
            bits == (1 << total) - 1
        } else {
            e == emax && m == (1 << self.mb) - 1
        }
    }

    fn nan_bits(&self) -> u32 {
        let total = self.eb + self.mb + self.signed as u32;
        if self.ieee {
            (((1 << self.eb) - 1) << self.mb) | (1 << (self.mb.max(1) - 1))
        } else if self.nuz {
            1 << (total - 1)
        } else {
            // All ones below the sign bit (fn formats), or all ones (e8m0).
            (1 << (total - self.signed as u32)) - 1
        }
    }

    /// The largest finite magnitude and its bit pattern.
    fn max_finite(&self) -> (f64, u32) {
        let total = self.eb + self.mb + self.signed as u32;
        let mut best = (0.0, 0);
        for b in 0..(1u32 << (total - self.signed as u32)) {
            if self.is_nan_bits(b) {
                continue;
            }
            let e = (b >> self.mb) & ((1 << self.eb) - 1);
            if self.ieee && e == (1 << self.eb) - 1 {
                continue;
            }
            let v = self.decode(b);
            if v > best.0 {
                best = (v, b);
            }
        }
        best
    }
}

/// Rounds `v` to the nearest value of format `f` (ties to even) and returns its bits. Overflow
/// gives infinity where the format has one, else NaN (or the largest value for formats without
/// NaN); NaN gives the format's NaN.
pub(crate) fn round_f64_to_format(v: f64, f: &FloatFormat) -> u32 {
    let total = f.eb + f.mb + f.signed as u32;
    let sign_bit = if f.signed { 1u32 << (total - 1) } else { 0 };
    if v.is_nan() {
        // Formats without NaN (f4e2m1fn) get negative zero, as XLA converts it.
        return if f.has_nan { f.nan_bits() } else { sign_bit };
    }
    let neg = v.is_sign_negative();
    let a = v.abs();
    if !f.signed && (neg || a == 0.0) {
        // Unsigned exponent-only formats have neither negative values nor zero.
        return f.nan_bits();
    }
    let signed = |bits: u32| {
        if neg && f.signed && !(f.nuz && bits == 0) {
            bits | sign_bit
        } else {
            bits
        }
    };
    let (max, max_bits) = f.max_finite();
    let overflow = || {
        if f.ieee {
            signed(((1 << f.eb) - 1) << f.mb)
        } else if f.has_nan {
            f.nan_bits()
        } else {
            signed(max_bits)
        }
    };
    if a.is_infinite() {
        return overflow();
    }
    if !f.subnormals {
        // Exponent-only format: round the mantissa of `a` to zero bits.
        let e = a.log2().floor() as i32;
        let q = 2f64.powi(e);
        let r = (a / q).round_ties_even() * q;
        let e = r.log2().round() as i32;
        let field = (e + f.bias).max(0);
        if field > 254 {
            return f.nan_bits();
        }
        return field as u32;
    }
    let emin = 1 - f.bias;
    let e = if a == 0.0 {
        emin
    } else {
        (a.log2().floor() as i32).max(emin)
    };
    // Guard against log2 rounding at exact powers of two.
    let e = if a >= 2f64.powi(e + 1) {
        e + 1
    } else if a < 2f64.powi(e) && e > emin {
        e - 1
    } else {
        e
    };
    let q = 2f64.powi(e - f.mb as i32);
    let r = (a / q).round_ties_even() * q;
    if r > max {
        return overflow();
    }
    if r == 0.0 {
        return signed(0);
    }
    let re = (r.log2().floor() as i32).max(emin);
    let re = if r >= 2f64.powi(re + 1) { re + 1 } else { re };
    let bits = if re == emin && r < 2f64.powi(emin) {
        (r / 2f64.powi(emin - f.mb as i32)) as u32
    } else {
        let field = (re + f.bias) as u32;
        let m = ((r / 2f64.powi(re) - 1.0) * (1u64 << f.mb) as f64) as u32;
        (field << f.mb) | m
    };
    signed(bits)
}

// ---------------------------------------------------------------------------------------------
// Integers.

/// An integer element type with XLA's wrapping semantics.
pub(crate) trait Int: Elem + Ord + Eq {
    const BITS: u32;
    const SIGNED: bool;
    const ZERO: Self;
    const ONE: Self;
    const MIN: Self;
    const MAX: Self;
    fn wadd(self, o: Self) -> Self;
    fn wsub(self, o: Self) -> Self;
    fn wmul(self, o: Self) -> Self;
    /// Wrapping division; the divisor is non-zero.
    fn wdiv(self, o: Self) -> Self;
    /// Wrapping remainder; the divisor is non-zero.
    fn wrem(self, o: Self) -> Self;
    fn wneg(self) -> Self;
    fn and(self, o: Self) -> Self;
    fn or(self, o: Self) -> Self;
    fn xor(self, o: Self) -> Self;
    fn not(self) -> Self;
    /// The value's bits read as an unsigned shift amount.
    fn amount(self) -> u64;
    /// Shift left by `n < BITS`.
    fn shl(self, n: u32) -> Self;
    /// Arithmetic shift right by `n < BITS`.
    fn sra(self, n: u32) -> Self;
    /// Logical shift right by `n < BITS`.
    fn srl(self, n: u32) -> Self;
    fn popcnt(self) -> Self;
    fn clz(self) -> Self;
    fn is_negative(self) -> bool;
    /// Whether the most significant bit is set (the sign bit read as if the type were signed).
    fn sign_bit(self) -> bool;
    fn to_i128(self) -> i128;
    /// The value `v` wrapped to this type.
    fn from_i128(v: i128) -> Self;
}

macro_rules! int_impl {
    ($t:ty, $u:ty, $s:ty, $signed:expr) => {
        impl Int for $t {
            const BITS: u32 = <$t>::BITS;
            const SIGNED: bool = $signed;
            const ZERO: Self = 0;
            const ONE: Self = 1;
            const MIN: Self = <$t>::MIN;
            const MAX: Self = <$t>::MAX;
            #[inline(always)]
            fn wadd(self, o: Self) -> Self {
                self.wrapping_add(o)
            }
            #[inline(always)]
            fn wsub(self, o: Self) -> Self {
                self.wrapping_sub(o)
            }
            #[inline(always)]
            fn wmul(self, o: Self) -> Self {
                self.wrapping_mul(o)
            }
            #[inline(always)]
            fn wdiv(self, o: Self) -> Self {
                self.wrapping_div(o)
            }
            #[inline(always)]
            fn wrem(self, o: Self) -> Self {
                self.wrapping_rem(o)
            }
            #[inline(always)]
            fn wneg(self) -> Self {
                self.wrapping_neg()
            }
            #[inline(always)]
            fn and(self, o: Self) -> Self {
                self & o
            }
            #[inline(always)]
            fn or(self, o: Self) -> Self {
                self | o
            }
            #[inline(always)]
            fn xor(self, o: Self) -> Self {
                self ^ o
            }
            #[inline(always)]
            fn not(self) -> Self {
                !self
            }
            #[inline(always)]
            fn amount(self) -> u64 {
                self as $u as u64
            }
            #[inline(always)]
            fn shl(self, n: u32) -> Self {
                self << n
            }
            #[inline(always)]
            fn sra(self, n: u32) -> Self {
                ((self as $s) >> n) as $t
            }
            #[inline(always)]
            fn srl(self, n: u32) -> Self {
                ((self as $u) >> n) as $t
            }
            #[inline(always)]
            fn popcnt(self) -> Self {
                self.count_ones() as $t
            }
            #[inline(always)]
            fn clz(self) -> Self {
                self.leading_zeros() as $t
            }
            #[inline(always)]
            #[allow(unused_comparisons)]
            fn is_negative(self) -> bool {
                self < 0
            }
            #[inline(always)]
            fn sign_bit(self) -> bool {
                (self as $s) < 0
            }
            #[inline(always)]
            fn to_i128(self) -> i128 {
                self as i128
            }
            #[inline(always)]
            fn from_i128(v: i128) -> Self {
                v as $t
            }
        }
    };
}
int_impl!(i8, u8, i8, true);
int_impl!(i16, u16, i16, true);
int_impl!(i32, u32, i32, true);
int_impl!(i64, u64, i64, true);
int_impl!(u8, u8, i8, false);
int_impl!(u16, u16, i16, false);
int_impl!(u32, u32, i32, false);
int_impl!(u64, u64, i64, false);

/// A sub-byte integer (`s2`, `s4`, `u2`, `u4`) stored one per byte, kept normalized (sign
/// extended or masked to `B` bits).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Narrow<const B: u32, const S: bool>(pub i16);

impl<const B: u32, const S: bool> Narrow<B, S> {
    #[inline(always)]
    fn wrap(v: i128) -> Self {
        let m = (v as i16) & ((1 << B) - 1);
        if S && m >= 1 << (B - 1) {
            Narrow(m - (1 << B))
        } else {
            Narrow(m)
        }
    }
    #[inline(always)]
    fn bits(self) -> u16 {
        (self.0 as u16) & ((1 << B) - 1)
    }
}

impl<const B: u32, const S: bool> Elem for Narrow<B, S> {
    const SIZE: usize = 1;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        Self::wrap(b[0] as i128)
    }
    #[inline(always)]
    fn store(self, b: &mut [u8]) {
        b[0] = self.bits() as u8;
    }
}

impl<const B: u32, const S: bool> Int for Narrow<B, S> {
    const BITS: u32 = B;
    const SIGNED: bool = S;
    const ZERO: Self = Narrow(0);
    const ONE: Self = Narrow(1);
    const MIN: Self = if S {
        Narrow(-(1 << (B - 1)))
    } else {
        Narrow(0)
    };
    const MAX: Self = if S {
        Narrow((1 << (B - 1)) - 1)
    } else {
        Narrow((1 << B) - 1)
    };
    fn wadd(self, o: Self) -> Self {
        Self::wrap(self.0 as i128 + o.0 as i128)
    }
    fn wsub(self, o: Self) -> Self {
        Self::wrap(self.0 as i128 - o.0 as i128)
    }
    fn wmul(self, o: Self) -> Self {
        Self::wrap(self.0 as i128 * o.0 as i128)
    }
    fn wdiv(self, o: Self) -> Self {
        Self::wrap(self.0 as i128 / o.0 as i128)
    }
    fn wrem(self, o: Self) -> Self {
        Self::wrap(self.0 as i128 % o.0 as i128)
    }
    fn wneg(self) -> Self {
        Self::wrap(-(self.0 as i128))
    }
    fn and(self, o: Self) -> Self {
        Self::wrap((self.0 & o.0) as i128)
    }
    fn or(self, o: Self) -> Self {
        Self::wrap((self.0 | o.0) as i128)
    }
    fn xor(self, o: Self) -> Self {
        Self::wrap((self.0 ^ o.0) as i128)
    }
    fn not(self) -> Self {
        Self::wrap(!self.0 as i128)
    }
    fn amount(self) -> u64 {
        self.bits() as u64
    }
    fn shl(self, n: u32) -> Self {
        Self::wrap((self.0 as i128) << n)
    }
    fn sra(self, n: u32) -> Self {
        // Shift the bits read as a signed value.
        let b = self.bits() as i16;
        let sv = if b >> (B - 1) == 1 { b - (1 << B) } else { b };
        Self::wrap((sv >> n) as i128)
    }
    fn srl(self, n: u32) -> Self {
        Self::wrap((self.bits() >> n) as i128)
    }
    fn popcnt(self) -> Self {
        Self::wrap(self.bits().count_ones() as i128)
    }
    fn clz(self) -> Self {
        Self::wrap((self.bits().leading_zeros() - (16 - B)) as i128)
    }
    fn is_negative(self) -> bool {
        self.0 < 0
    }
    fn sign_bit(self) -> bool {
        self.bits() >> (B - 1) == 1
    }
    fn to_i128(self) -> i128 {
        self.0 as i128
    }
    fn from_i128(v: i128) -> Self {
        Self::wrap(v)
    }
}

// ---------------------------------------------------------------------------------------------
// Complex numbers.

/// A complex number with components of compute type `F`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Complex<F> {
    pub re: F,
    pub im: F,
}

impl Elem for Complex<f32> {
    const SIZE: usize = 8;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        Complex {
            re: f32::load(&b[..4]),
            im: f32::load(&b[4..]),
        }
    }
    #[inline(always)]
    fn store(self, b: &mut [u8]) {
        self.re.store(&mut b[..4]);
        self.im.store(&mut b[4..]);
    }
}

impl Elem for Complex<f64> {
    const SIZE: usize = 16;
    #[inline(always)]
    fn load(b: &[u8]) -> Self {
        Complex {
            re: f64::load(&b[..8]),
            im: f64::load(&b[8..]),
        }
    }
    #[inline(always)]
    fn store(self, b: &mut [u8]) {
        self.re.store(&mut b[..8]);
        self.im.store(&mut b[8..]);
    }
}

impl<F: Float> Complex<F> {
    pub fn new(re: F, im: F) -> Self {
        Complex { re, im }
    }
    pub fn add(self, o: Self) -> Self {
        Complex::new(self.re + o.re, self.im + o.im)
    }
    pub fn sub(self, o: Self) -> Self {
        Complex::new(self.re - o.re, self.im - o.im)
    }
    pub fn mul(self, o: Self) -> Self {
        Complex::new(
            self.re * o.re - self.im * o.im,
            self.re * o.im + self.im * o.re,
        )
    }
    pub fn div(self, o: Self) -> Self {
        let (re, im) = crate::smith::div((self.re, self.im), (o.re, o.im));
        Complex::new(re, im)
    }
    pub fn neg(self) -> Self {
        Complex::new(-self.re, -self.im)
    }
    pub fn abs(self) -> F {
        F::from_f64(self.re.to_f64().hypot(self.im.to_f64()))
    }
    pub fn exp(self) -> Self {
        let e = self.re.exp();
        Complex::new(e * self.im.cos(), e * self.im.sin())
    }
    pub fn ln(self) -> Self {
        Complex::new(self.abs().ln(), self.im.atan2(self.re))
    }
    pub fn sqrt(self) -> Self {
        let (re, im) = (self.re.to_f64(), self.im.to_f64());
        let r = re.hypot(im);
        let (a, b) = if r == 0.0 {
            (0.0, im)
        } else if re >= 0.0 {
            let t = ((r + re) / 2.0).sqrt();
            (t, im / (2.0 * t))
        } else {
            let t = ((r - re) / 2.0).sqrt();
            (im.abs() / (2.0 * t), t.copysign(im))
        };
        Complex::new(F::from_f64(a), F::from_f64(b))
    }
    /// `sin(a)cosh(b) + i cos(a)sinh(b)`, with `sinh` and `cosh` from `exp(b)` and `exp(-b)`
    /// as XLA computes them (so `sinh` of a tiny `b` is `0`).
    pub fn sin(self) -> Self {
        let (re, im) = (self.re.to_f64(), self.im.to_f64());
        let (ep, em) = (im.exp(), (-im).exp());
        Complex::new(
            F::from_f64(re.sin() * ((ep + em) / 2.0)),
            F::from_f64(re.cos() * ((ep - em) / 2.0)),
        )
    }
    pub fn cos(self) -> Self {
        let (re, im) = (self.re.to_f64(), self.im.to_f64());
        Complex::new(
            F::from_f64(re.cos() * im.cosh()),
            F::from_f64(-(re.sin() * im.sinh())),
        )
    }
    /// `exp(z) - 1` without cancellation: `expm1(a)cos(b) - 2sin²(b/2) + i exp(a)sin(b)`.
    pub fn exp_m1(self) -> Self {
        let (re, im) = (self.re.to_f64(), self.im.to_f64());
        let h = (im / 2.0).sin();
        Complex::new(
            F::from_f64(re.exp_m1() * im.cos() - 2.0 * h * h),
            F::from_f64(re.exp() * im.sin()),
        )
    }
    /// `(t(1 + u²) + i u(1 - t²)) / (1 + t²u²)` with `t = tanh(a)`, `u = tan(b)`: accurate
    /// for tiny arguments and `±1` for large `|a|`.
    pub fn tanh(self) -> Self {
        let (re, im) = (self.re.to_f64(), self.im.to_f64());
        let (t, u) = (re.tanh(), im.tan());
        let d = 1.0 + t * t * u * u;
        if !d.is_finite() {
            let two = Complex::new(self.re + self.re, self.im + self.im);
            let e = two.exp();
            let one = Complex::new(F::ONE, F::ZERO);
            return e.sub(one).div(e.add(one));
        }
        Complex::new(
            F::from_f64(t * (1.0 + u * u) / d),
            F::from_f64(u * (1.0 - t * t) / d),
        )
    }
    /// `-i tanh(iz)`.
    pub fn tan(self) -> Self {
        let w = Complex::new(-self.im, self.re).tanh();
        Complex::new(w.im, -w.re)
    }
    pub fn pow(self, o: Self) -> Self {
        if (self.re == F::ONE && self.im == F::ZERO) || (o.re == F::ZERO && o.im == F::ZERO) {
            return Complex::new(F::ONE, F::ZERO);
        }
        if self.re == F::ZERO && self.im == F::ZERO && o.re > F::ZERO {
            return Complex::new(F::ZERO, F::ZERO);
        }
        o.mul(self.ln()).exp()
    }
}
