//! Batched Cholesky factorizations: one implementation that the reference evaluator (the
//! `cholesky` instruction and the LAPACK `potrf` custom call) and the `cpu` backend's runtime
//! both call, so the two meet singular and indefinite matrices in the same operations and give
//! the same factors, NaNs included.
//!
//! Two recurrences, for two contracts:
//! - [`cholesky`] follows XLA's expansion of the `cholesky` instruction (`CholeskyExpander`,
//!   unblocked): for column `j`, `t = A(j.., j) - L(j.., ..j) L(j, ..j)^H` (each sum a dot
//!   accumulated from `+0` with fused multiply-adds in increasing `k`, as XLA CPU's dot
//!   kernels and the evaluator's dots contract it), `d = sqrt(re t(j))`, and the whole column,
//!   diagonal included, is `t / d` (plus zero). So a zero pivot leaves `0 / 0 = NaN` on the
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

use crate::trsm::Field;

/// The arithmetic a Cholesky factorization needs beyond a triangular solve's.
pub trait Scalar: Field {
    /// `self + o`.
    fn plus(self, o: Self) -> Self;
    /// `acc + self * b`, rounded once for reals (a fused multiply-add).
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
}

macro_rules! real_scalar {
    ($($t:ty),*) => {$(
        impl Scalar for $t {
            fn plus(self, o: Self) -> Self {
                self + o
            }
            fn mul_add(self, b: Self, acc: Self) -> Self {
                <$t>::mul_add(self, b, acc)
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
                !(self > 0.0)
            }
            fn nan() -> Self {
                <$t>::NAN
            }
            fn one() -> Self {
                1.0
            }
        }
    )*};
}
real_scalar!(f32, f64);

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
                Complex::new(self.re, 0.0)
            }
            fn sqrt_re(self) -> Self {
                Complex::new(self.re.sqrt(), 0.0)
            }
            fn scale_re(self, r: Self) -> Self {
                Complex::new(self.re * r.re, self.im * r.re)
            }
            fn re_is_nan(self) -> bool {
                self.re.is_nan()
            }
            fn re_not_positive(self) -> bool {
                !(self.re > 0.0)
            }
            fn nan() -> Self {
                Complex::new(<$t>::NAN, 0.0)
            }
            fn one() -> Self {
                Complex::new(1.0, 0.0)
            }
        }
    )*};
}
complex_scalar!(f32, f64);

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
                    l[r * n + j] = t[r].over(d).plus(T::zero());
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
