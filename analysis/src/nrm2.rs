//! [`nrm2`]: the 2-norm of a vector with LAPACK `?nrm2`'s scaling against overflow and
//! underflow, the one routine the Jacobi methods ([`crate::jacobi`]) and the `cpu` runtime's
//! Householder reflectors (`?larfg`) use.
//!
//! Invariants: the elements are visited once, in the iterator's order, with the reference
//! `?nrm2` recurrence (a running `scale`, the largest magnitude so far, and `ssq`, the sum of
//! squares in units of `scale`); zeros are skipped. So the result depends only on the values and
//! their order, whatever holds them (a contiguous slice, a strided column), and no square is
//! formed of an unscaled element: the norm overflows only where the result does.

use num_traits::Float;

/// The 2-norm of `x`'s elements in order, scaled as `?nrm2` does (0 for no elements).
pub fn nrm2<T: Float>(x: impl IntoIterator<Item = T>) -> T {
    let (mut scale, mut ssq) = (T::zero(), T::one());
    for v in x {
        if v != T::zero() {
            let a = v.abs();
            if scale < a {
                ssq = T::one() + ssq * (scale / a) * (scale / a);
                scale = a;
            } else {
                ssq = ssq + (a / scale) * (a / scale);
            }
        }
    }
    scale * ssq.sqrt()
}

#[cfg(test)]
mod tests {
    use super::nrm2;

    #[test]
    fn scaled_norms_neither_overflow_nor_underflow() {
        assert_eq!(nrm2([3.0f64, 4.0]), 5.0);
        assert_eq!(nrm2([0.0f64, -3.0, 0.0, 4.0]), 5.0);
        // Squares of these overflow (underflow) where the norms do not.
        assert_eq!(nrm2([1e300f64; 4]), 2e300);
        assert_eq!(nrm2([-1e-300f64; 4]), 2e-300);
        assert_eq!(nrm2([1e30f32; 4]), 2e30);
        assert_eq!(nrm2(Vec::<f64>::new()), 0.0);
        assert_eq!(nrm2([0.0f32; 3]), 0.0);
    }

    #[test]
    fn infinities_and_nans_come_through() {
        assert_eq!(nrm2([1.0f64, f64::NEG_INFINITY, 2.0]), f64::INFINITY);
        assert!(nrm2([1.0f32, f32::NAN, 2.0]).is_nan());
    }
}
