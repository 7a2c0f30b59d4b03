//! Batched Cholesky factorizations: one implementation that the reference evaluator (the
//! `cholesky` instruction and the LAPACK `potrf` custom call) and the `cpu` backend's runtime
//! both call, so the two meet singular and indefinite matrices in the same operations and give
//! the same factors, NaNs included.
//!
//! Two recurrences, for two contracts:
//! - [`cholesky`] follows XLA's expansion of the `cholesky` instruction (`CholeskyExpander`,
//!   unblocked): for column `j`, `t = A(j.., j) - L(j.., ..j) L(j, ..j)^H` (each sum a dot
//!   accumulated from `+0` in increasing `k`, as XLA CPU's dot there does: with fused
//!   multiply-adds for `f32` only, [`Scalar::mul_add`]), `d = sqrt(re t(j))`, and the whole column,
//!   diagonal included, is `t / d` (plus zero), which for real types XLA's simplifier turns
//!   into `t * (1 / d)` ([`Scalar::div_pivot`]). So a zero pivot leaves NaN (`0 * inf`) on the
//!   diagonal without failing, and a matrix whose `d` is NaN (a negative or NaN pivot) gives a
//!   factor of NaNs (a real NaN for complex types). An upper factor is the lower factor of the
//!   plain transpose, transposed back (no conjugation), as XLA builds it; a `1 x 1` matrix is a
//!   square root alone (its imaginary part dropped). XLA blocks matrices larger than 128 (a
//!   triangular solve per block); within a block of 128 the operations are the same.
//! - [`potf2`] is LAPACK's `?potf2`: `a(j, j) = re A(j, j) - L(j, ..j) L(j, ..j)^H` (a dot as
//!   above), stopping at the first pivot that is not positive (stored as computed, `info` its
//!   1-based column); the column below is scaled by `1 / sqrt(a(j, j))`. The other triangle is
//!   left as it was.
//!
//! Invariants: real types factor in real arithmetic; complex division is Smith's algorithm
//! ([`Field::over`]); only the triangle asked for is read. Checked against XLA 0.10.2 on
//! singular and indefinite matrices (`analysis/tests/xla/cholesky_*`).

use num_complex::Complex;

use crate::flushed::{Flushed, Lit};
use crate::trsm::Field;

/// The arithmetic a Cholesky factorization needs beyond a triangular solve's.
pub trait Scalar: Field {
    /// `self + o`.
    fn plus(self, o: Self) -> Self;
    /// `acc + self * b` as XLA CPU's dot inside the Cholesky expansion accumulates: a fused
    /// multiply-add for `f32`, a product and a sum for `f64` and the complex types (bit for bit
    /// against XLA 0.10.2 on singular matrices of each type).
    fn mul_add(self, b: Self, acc: Self) -> Self;
    /// The value with its imaginary part zeroed.
    fn re_only(self) -> Self;
    /// The square root of the real part, with no imaginary part.
    fn sqrt_re(self) -> Self;
    /// `self` times the real part of `r` (componentwise for complex values).
    fn scale_re(self, r: Self) -> Self;
    /// Whether the real part is NaN.
    fn re_is_nan(self) -> bool;
    /// Whether the real part is not positive (zero, negative or NaN).
    fn re_not_positive(self) -> bool;
    /// A real NaN (imaginary part zero).
    fn nan() -> Self;
    /// `1`.
    fn one() -> Self;
    /// `self / d` for a pivot `d` (no imaginary part) as XLA's expansion computes it: for reals
    /// `self * (1 / d)` (XLA's simplifier turns the division by a broadcast scalar into a
    /// multiplication by its reciprocal), for complex values Smith's division.
    fn div_pivot(self, d: Self) -> Self;
}

macro_rules! real_scalar {
    ($($t:ty: $fused:expr),*) => {$(
        impl Scalar for $t {
            fn plus(self, o: Self) -> Self {
                self + o
            }
            fn mul_add(self, b: Self, acc: Self) -> Self {
                if $fused {
                    <$t>::mul_add(self, b, acc)
                } else {
                    acc + self * b
                }
            }
            fn re_only(self) -> Self {
                self
            }
            fn sqrt_re(self) -> Self {
                self.sqrt()
            }
            fn scale_re(self, r: Self) -> Self {
                self * r
            }
            fn re_is_nan(self) -> bool {
                self.is_nan()
            }
            fn re_not_positive(self) -> bool {
                self <= <$t as Lit>::lit(0.0) || self.is_nan()
            }
            fn nan() -> Self {
                <$t>::NAN
            }
            fn one() -> Self {
                <$t as Lit>::lit(1.0)
            }
            fn div_pivot(self, d: Self) -> Self {
                self * (<$t as Lit>::lit(1.0) / d)
            }
        }
    )*};
}
real_scalar!(f32: true, f64: false, Flushed<f32>: true, Flushed<f64>: false);

macro_rules! complex_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for Complex<$t> {
            fn plus(self, o: Self) -> Self {
                Complex::new(self.re + o.re, self.im + o.im)
            }
            fn mul_add(self, b: Self, acc: Self) -> Self {
                acc.plus(self.times(b))
            }
            fn re_only(self) -> Self {
                Complex::new(self.re, <$t as Lit>::lit(0.0))
            }
            fn sqrt_re(self) -> Self {
                Complex::new(self.re.sqrt(), <$t as Lit>::lit(0.0))
            }
            fn scale_re(self, r: Self) -> Self {
                Complex::new(self.re * r.re, self.im * r.re)
            }
            fn re_is_nan(self) -> bool {
                self.re.is_nan()
            }
            fn re_not_positive(self) -> bool {
                self.re <= <$t as Lit>::lit(0.0) || self.re.is_nan()
            }
            fn nan() -> Self {
                Complex::new(<$t>::NAN, <$t as Lit>::lit(0.0))
            }
            fn one() -> Self {
                Complex::new(<$t as Lit>::lit(1.0), <$t as Lit>::lit(0.0))
            }
            fn div_pivot(self, d: Self) -> Self {
                self.over(d)
            }
        }
    )*};
}
complex_scalar!(f32, f64, Flushed<f32>, Flushed<f64>);

/// `sum_k x(k) * conj(y(k))` over `k < len`, accumulated from zero in increasing `k`.
fn dot<T: Scalar>(len: usize, x: impl Fn(usize) -> T, y: impl Fn(usize) -> T) -> T {
    (0..len).fold(T::zero(), |acc, k| x(k).mul_add(y(k).conjugate(), acc))
}

/// The factors of the `batch` row-major `n`-by-`n` matrices in `a` as the `cholesky`
/// instruction defines them (XLA's expansion; see the module header): the `lower` (else upper)
/// factor with the other triangle zero, or all NaN where a pivot's square root is NaN.
pub fn cholesky<T: Scalar>(a: &[T], batch: usize, n: usize, lower: bool) -> Vec<T> {
    let mut out = vec![T::zero(); batch * n * n];
    for b in 0..batch {
        let m = &a[b * n * n..(b + 1) * n * n];
        // The input of the lower factorization: the matrix, or its plain transpose.
        let x = |i: usize, j: usize| if lower { m[i * n + j] } else { m[j * n + i] };
        let mut l = vec![T::zero(); n * n];
        let mut failed = false;
        if n == 1 {
            l[0] = x(0, 0).sqrt_re();
            failed = l[0].re_is_nan();
        } else {
            let mut t = vec![T::zero(); n];
            for j in 0..n {
                for (r, tr) in t.iter_mut().enumerate().skip(j) {
                    *tr = x(r, j).minus(dot(j, |k| l[r * n + k], |k| l[j * n + k]));
                }
                let d = t[j].sqrt_re();
                failed |= d.re_is_nan();
                for r in j..n {
                    l[r * n + j] = t[r].div_pivot(d).plus(T::zero());
                }
            }
        }
        let o = &mut out[b * n * n..(b + 1) * n * n];
        if failed {
            o.fill(T::nan());
        } else if lower {
            o.copy_from_slice(&l);
        } else {
            for i in 0..n {
                for j in 0..n {
                    o[i * n + j] = l[j * n + i];
                }
            }
        }
    }
    out
}

/// LAPACK's `?potf2` on one row-major `n`-by-`n` matrix in place (the `lower` triangle holds
/// `L` of `A = L L^H`, else the upper one `U` of `A = U^H U`); returns `info` (0, or the 1-based
/// column of the first pivot that is not positive, where it stopped). See the module header.
pub fn potf2<T: Scalar>(m: &mut [T], n: usize, lower: bool) -> i32 {
    // Both triangles are handled as the lower factor L; for `U`, L(i, j) = conj(U(j, i)).
    let at = |i: usize, j: usize| if lower { i * n + j } else { j * n + i };
    let get = |m: &[T], i: usize, j: usize| {
        let v = m[at(i, j)];
        if lower {
            v
        } else {
            v.conjugate()
        }
    };
    for j in 0..n {
        let ajj = m[at(j, j)]
            .re_only()
            .minus(dot(j, |k| get(m, j, k), |k| get(m, j, k)).re_only());
        if ajj.re_not_positive() {
            m[at(j, j)] = ajj;
            return j as i32 + 1;
        }
        let d = ajj.sqrt_re();
        m[at(j, j)] = d;
        let r = T::one().over(d);
        for i in j + 1..n {
            let s = get(m, i, j).minus(dot(j, |k| get(m, i, k), |k| get(m, j, k)));
            let v = s.scale_re(r);
            m[at(i, j)] = if lower { v } else { v.conjugate() };
        }
    }
    0
}
