//! The element types of the dense factorizations the evaluator and the `cpu` backend's runtime
//! share ([`crate::householder`], [`crate::tridiagonal`], [`crate::jacobi`]): `f32`, `f64`,
//! `Complex<f32>` and `Complex<f64>`, each computed in its own precision as LAPACK's `s`, `d`,
//! `c` and `z` routines are.
//!
//! Invariants: a real type's complex-only operations are exact identities (`conj` is the value,
//! `im` is zero, `phase` is exactly `+-1`), so one generic routine gives a real type exactly
//! the real algorithm; complex division is Smith's algorithm (the `smith` module), the evaluator's
//! elementwise `divide`.

use std::fmt::Debug;
use std::ops::{Add, Mul, Neg, Sub};

use num_complex::Complex;
use num_traits::{Float, One, Zero};

/// A real or complex scalar of a dense factorization.
pub trait LapackScalar:
    Copy
    + PartialEq
    + Debug
    + Default
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Neg<Output = Self>
    + Send
    + Sync
    + 'static
{
    /// The real type of the components (and of eigen- and singular values).
    type Real: Float + Debug + Default + Send + Sync + 'static;
    /// Whether the type is complex.
    const COMPLEX: bool;
    /// The value with real part `r` and no imaginary part.
    fn real(r: Self::Real) -> Self;
    /// The value `re + i im` (`im` is dropped for a real type).
    fn from_parts(re: Self::Real, im: Self::Real) -> Self;
    /// The real part.
    fn re(self) -> Self::Real;
    /// The imaginary part (zero for a real type).
    fn im(self) -> Self::Real;
    /// The complex conjugate.
    fn conj(self) -> Self;
    /// `|re| + |im|`, the magnitude LAPACK's complex routines compare (`cabs1`).
    fn abs1(self) -> Self::Real;
    /// The modulus `|z|` (without overflow of the squares).
    fn modulus(self) -> Self::Real;
    /// `self * r` for a real `r`, componentwise.
    fn scale(self, r: Self::Real) -> Self;
    /// `self / r` for a real `r`, componentwise.
    fn div_real(self, r: Self::Real) -> Self;
    /// `self / o` (Smith's algorithm for complex values).
    fn over(self, o: Self) -> Self;
    /// The unit-modulus value in the direction of a non-zero `self` (`+-1` for a real type).
    fn phase(self) -> Self;
    /// Whether both parts are finite.
    fn finite(self) -> bool;
}

macro_rules! real_scalar {
    ($($t:ty),*) => {$(
        impl LapackScalar for $t {
            type Real = $t;
            const COMPLEX: bool = false;
            fn real(r: $t) -> $t {
                r
            }
            fn from_parts(re: $t, _im: $t) -> $t {
                re
            }
            fn re(self) -> $t {
                self
            }
            fn im(self) -> $t {
                0.0
            }
            fn conj(self) -> $t {
                self
            }
            fn abs1(self) -> $t {
                self.abs()
            }
            fn modulus(self) -> $t {
                self.abs()
            }
            fn scale(self, r: $t) -> $t {
                self * r
            }
            fn div_real(self, r: $t) -> $t {
                self / r
            }
            fn over(self, o: $t) -> $t {
                self / o
            }
            fn phase(self) -> $t {
                (1.0 as $t).copysign(self)
            }
            fn finite(self) -> bool {
                self.is_finite()
            }
        }
    )*};
}
real_scalar!(f32, f64);

macro_rules! complex_scalar {
    ($($t:ty),*) => {$(
        impl LapackScalar for Complex<$t> {
            type Real = $t;
            const COMPLEX: bool = true;
            fn real(r: $t) -> Self {
                Complex::new(r, 0.0)
            }
            fn from_parts(re: $t, im: $t) -> Self {
                Complex::new(re, im)
            }
            fn re(self) -> $t {
                self.re
            }
            fn im(self) -> $t {
                self.im
            }
            fn conj(self) -> Self {
                Complex::new(self.re, -self.im)
            }
            fn abs1(self) -> $t {
                self.re.abs() + self.im.abs()
            }
            fn modulus(self) -> $t {
                self.re.hypot(self.im)
            }
            fn scale(self, r: $t) -> Self {
                Complex::new(self.re * r, self.im * r)
            }
            fn div_real(self, r: $t) -> Self {
                Complex::new(self.re / r, self.im / r)
            }
            fn over(self, o: Self) -> Self {
                let (re, im) = crate::smith::div((self.re, self.im), (o.re, o.im));
                Complex::new(re, im)
            }
            fn phase(self) -> Self {
                let m = self.modulus();
                Complex::new(self.re / m, self.im / m)
            }
            fn finite(self) -> bool {
                self.re.is_finite() && self.im.is_finite()
            }
        }
    )*};
}
complex_scalar!(f32, f64);

/// `conj(x) . y`, summed in index order.
pub fn dotc<T: LapackScalar>(x: &[T], y: &[T]) -> T {
    x.iter()
        .zip(y)
        .fold(T::default(), |s, (&a, &b)| s + a.conj() * b)
}

/// The 2-norm of `x`, scaled against overflow and underflow (`?nrm2`'s recurrence, over the
/// real and imaginary parts of complex values as `?znrm2` does).
pub fn nrm2<T: LapackScalar>(x: &[T]) -> T::Real {
    let zero = T::Real::zero();
    let (mut scale, mut ssq) = (zero, T::Real::one());
    let mut add = |v: T::Real| {
        if v != zero {
            let a = v.abs();
            if scale < a {
                ssq = T::Real::one() + ssq * (scale / a) * (scale / a);
                scale = a;
            } else {
                ssq = ssq + (a / scale) * (a / scale);
            }
        }
    };
    for &v in x {
        add(v.re());
        if T::COMPLEX {
            add(v.im());
        }
    }
    scale * ssq.sqrt()
}

#[cfg(test)]
mod tests {
    use super::nrm2;
    use num_complex::Complex;

    #[test]
    fn scaled_norms_neither_overflow_nor_underflow() {
        assert_eq!(nrm2(&[3.0f64, 4.0]), 5.0);
        assert_eq!(nrm2(&[0.0f64, -3.0, 0.0, 4.0]), 5.0);
        // Squares of these overflow (underflow) where the norms do not.
        assert_eq!(nrm2(&[1e300f64; 4]), 2e300);
        assert_eq!(nrm2(&[-1e-300f64; 4]), 2e-300);
        assert_eq!(nrm2(&[1e30f32; 4]), 2e30);
        assert_eq!(nrm2::<f64>(&[]), 0.0);
        assert_eq!(nrm2(&[0.0f32; 3]), 0.0);
        // Complex values count their real and imaginary parts.
        assert_eq!(nrm2(&[Complex::new(3.0f64, 4.0)]), 5.0);
        assert_eq!(nrm2(&[Complex::new(1e300f64, 1e300); 2]), 2e300);
    }

    #[test]
    fn infinities_and_nans_come_through() {
        assert_eq!(nrm2(&[1.0f64, f64::NEG_INFINITY, 2.0]), f64::INFINITY);
        assert!(nrm2(&[1.0f32, f32::NAN, 2.0]).is_nan());
    }
}
