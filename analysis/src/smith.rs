//! Complex division by Smith's algorithm, the one division of complex values in Axle: the
//! evaluator's elementwise `divide` and the shared triangular solve ([`crate::trsm`]) both call
//! [`div`], and the `cpu` backend emits the same steps.
//!
//! Invariant: the branch is on the larger magnitude of the divisor's parts (the real part on a
//! tie), so no intermediate overflows where the quotient does not; a zero divisor divides each
//! part by the zero real part (giving infinities or NaN as real division would).

use std::ops::{Add, Div, Mul, Sub};

/// The real types Smith's algorithm runs in (`f32`, `f64`).
pub(crate) trait Real:
    Copy
    + PartialOrd
    + Add<Output = Self>
    + Sub<Output = Self>
    + Mul<Output = Self>
    + Div<Output = Self>
{
    /// `|self|`.
    fn magnitude(self) -> Self;
    /// Whether `self` is `0` or `-0`.
    fn is_zero(self) -> bool;
}

impl Real for f32 {
    fn magnitude(self) -> Self {
        self.abs()
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
}

impl Real for f64 {
    fn magnitude(self) -> Self {
        self.abs()
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
}

/// `(a_re + a_im i) / (b_re + b_im i)` as `(re, im)`.
pub(crate) fn div<F: Real>((a_re, a_im): (F, F), (b_re, b_im): (F, F)) -> (F, F) {
    if b_re.magnitude() >= b_im.magnitude() {
        if b_re.is_zero() && b_im.is_zero() {
            return (a_re / b_re, a_im / b_re);
        }
        let r = b_im / b_re;
        let d = b_re + b_im * r;
        ((a_re + a_im * r) / d, (a_im - a_re * r) / d)
    } else {
        let r = b_re / b_im;
        let d = b_re * r + b_im;
        ((a_re * r + a_im) / d, (a_im * r - a_re) / d)
    }
}
