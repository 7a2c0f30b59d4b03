//! Complex division by Smith's algorithm, the one division of complex values in Axle: the
//! evaluator's elementwise `divide` and the shared triangular solve ([`crate::trsm`]) both call
//! [`div`], and the `cpu` backend emits the same steps.
//!
//! Invariant: the branch is on the larger magnitude of the divisor's parts (the real part on a
//! tie), so no intermediate overflows where the quotient does not; a zero divisor divides each
//! part by the zero real part (giving infinities or NaN as real division would). A quotient
//! whose parts are both NaN is recovered as C99's Annex G and XLA's emitter recover it: an
//! infinite numerator over a finite divisor is an infinity in the direction of
//! `a' * conj(b)` (`a'` the numerator with its infinite parts as +-1 and the others as +-0),
//! a finite numerator over an infinite divisor is a zero of the direction `a * conj(b')`; so
//! `(1+1i)/(nan+inf i)` is `(0, -0)` and `(inf+nan i)/(1+1i)` is `(inf, -inf)`.

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
    /// Whether `self` is NaN.
    fn nan(self) -> bool;
    /// Whether `self` is an infinity.
    fn inf(self) -> bool;
    /// `1` with the sign of `self` when `self` is an infinity, else `0` with its sign.
    fn unit_if_inf(self) -> Self;
    /// `value` as `Self` (0, 1 or infinity, exact in every type).
    fn of(value: f64) -> Self;
}

impl Real for f32 {
    fn magnitude(self) -> Self {
        self.abs()
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn inf(self) -> bool {
        self.is_infinite()
    }
    fn unit_if_inf(self) -> Self {
        let m: f32 = if self.is_infinite() { 1.0 } else { 0.0 };
        m.copysign(self)
    }
    fn of(value: f64) -> Self {
        value as f32
    }
}

impl Real for f64 {
    fn magnitude(self) -> Self {
        self.abs()
    }
    fn is_zero(self) -> bool {
        self == 0.0
    }
    fn nan(self) -> bool {
        self.is_nan()
    }
    fn inf(self) -> bool {
        self.is_infinite()
    }
    fn unit_if_inf(self) -> Self {
        let m: f64 = if self.is_infinite() { 1.0 } else { 0.0 };
        m.copysign(self)
    }
    fn of(value: f64) -> Self {
        value
    }
}

/// `(a_re + a_im i) / (b_re + b_im i)` as `(re, im)`.
pub(crate) fn div<F: Real>((a_re, a_im): (F, F), (b_re, b_im): (F, F)) -> (F, F) {
    let (re, im) = smith((a_re, a_im), (b_re, b_im));
    if !(re.nan() && im.nan()) {
        return (re, im);
    }
    let finite = |x: F| !x.nan() && !x.inf();
    if (a_re.inf() || a_im.inf()) && finite(b_re) && finite(b_im) {
        let (u, v) = (a_re.unit_if_inf(), a_im.unit_if_inf());
        let inf = F::of(f64::INFINITY);
        return (inf * (u * b_re + v * b_im), inf * (v * b_re - u * b_im));
    }
    if (b_re.inf() || b_im.inf()) && finite(a_re) && finite(a_im) {
        let (u, v) = (b_re.unit_if_inf(), b_im.unit_if_inf());
        let zero = F::of(0.0);
        return (zero * (a_re * u + a_im * v), zero * (a_im * u - a_re * v));
    }
    (re, im)
}

/// Smith's algorithm alone (the zero divisor as the header says).
fn smith<F: Real>((a_re, a_im): (F, F), (b_re, b_im): (F, F)) -> (F, F) {
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
