//! [`Flushed`]: an `f32` or `f64` whose arithmetic is x86's under the flush-to-zero (FTZ) and
//! denormals-are-zero (DAZ) modes, computed explicitly in the default floating-point mode.
//!
//! Invariants, instruction by instruction as the hardware modes apply them:
//! - `+ - * /`, `sqrt` and the fused [`Flushed::mul_add`] read each operand flushed (a
//!   subnormal reads as zero of its sign) and write a subnormal result as zero of its sign.
//! - Comparisons read both sides flushed (a subnormal compares equal to zero).
//! - Sign-bit operations (negation, `abs`, `copysign`) and NaN or infinity tests are exact, as
//!   the instructions behind them (bitwise, or unordered compares that see only the exponent)
//!   are.
//! - A value no operation touches keeps its bits: flushing happens where an instruction reads
//!   or writes, never on load or store.
//!
//! The routines shared with the `cpu` backend's runtime ([`crate::trsm`],
//! [`crate::cholesky`]) are generic over their scalar, so the evaluator runs them on
//! `Flushed` values and gets, bit for bit, what the runtime gets from the same code in the
//! hardware modes (tested against the hardware mode in `eval/linalg.rs`).

use std::cmp::Ordering;
use std::ops::{Add, Div, Mul, Neg, Sub};

/// An `f32` or `f64` computed as in x86's FTZ and DAZ modes (see the module header).
#[derive(Clone, Copy, Debug, Default)]
#[repr(transparent)]
pub struct Flushed<F>(pub F);

/// Literals of the scalar types the shared routines are generic over (`f32`, `f64` and their
/// [`Flushed`] forms), so one body serves all of them.
pub(crate) trait Lit: Copy {
    /// The value `x` (exact for the small constants the routines use).
    fn lit(x: f64) -> Self;
}

impl Lit for f32 {
    #[inline(always)]
    fn lit(x: f64) -> Self {
        x as f32
    }
}

impl Lit for f64 {
    #[inline(always)]
    fn lit(x: f64) -> Self {
        x
    }
}

macro_rules! flushed {
    ($($t:ty),*) => {$(
        impl Flushed<$t> {
            /// The quiet NaN of the type.
            pub const NAN: Self = Flushed(<$t>::NAN);

            /// `x` with a subnormal value replaced by zero of its sign.
            #[inline(always)]
            fn fl(x: $t) -> $t {
                if x.abs() < <$t>::MIN_POSITIVE {
                    <$t>::copysign(0.0, x)
                } else {
                    x
                }
            }

            /// `self * a + b` rounded once, operands and result flushed.
            #[inline(always)]
            pub fn mul_add(self, a: Self, b: Self) -> Self {
                Flushed(Self::fl(<$t>::mul_add(Self::fl(self.0), Self::fl(a.0), Self::fl(b.0))))
            }

            /// The square root, operand and result flushed.
            #[inline(always)]
            pub fn sqrt(self) -> Self {
                Flushed(Self::fl(Self::fl(self.0).sqrt()))
            }

            /// Whether the value is NaN.
            #[inline(always)]
            pub fn is_nan(self) -> bool {
                self.0.is_nan()
            }

            /// Whether the value is infinite.
            #[inline(always)]
            pub fn is_infinite(self) -> bool {
                self.0.is_infinite()
            }

            /// The absolute value (exact: a sign-bit operation).
            #[inline(always)]
            pub fn abs(self) -> Self {
                Flushed(self.0.abs())
            }
        }

        impl Lit for Flushed<$t> {
            #[inline(always)]
            fn lit(x: f64) -> Self {
                Flushed(x as $t)
            }
        }

        impl Add for Flushed<$t> {
            type Output = Self;
            #[inline(always)]
            fn add(self, o: Self) -> Self {
                Flushed(Self::fl(Self::fl(self.0) + Self::fl(o.0)))
            }
        }

        impl Sub for Flushed<$t> {
            type Output = Self;
            #[inline(always)]
            fn sub(self, o: Self) -> Self {
                Flushed(Self::fl(Self::fl(self.0) - Self::fl(o.0)))
            }
        }

        impl Mul for Flushed<$t> {
            type Output = Self;
            #[inline(always)]
            fn mul(self, o: Self) -> Self {
                Flushed(Self::fl(Self::fl(self.0) * Self::fl(o.0)))
            }
        }

        impl Div for Flushed<$t> {
            type Output = Self;
            #[inline(always)]
            fn div(self, o: Self) -> Self {
                Flushed(Self::fl(Self::fl(self.0) / Self::fl(o.0)))
            }
        }

        impl Neg for Flushed<$t> {
            type Output = Self;
            #[inline(always)]
            fn neg(self) -> Self {
                Flushed(-self.0)
            }
        }

        impl PartialEq for Flushed<$t> {
            #[inline(always)]
            fn eq(&self, o: &Self) -> bool {
                Self::fl(self.0) == Self::fl(o.0)
            }
        }

        impl PartialOrd for Flushed<$t> {
            #[inline(always)]
            fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
                Self::fl(self.0).partial_cmp(&Self::fl(o.0))
            }
        }

        impl crate::smith::Real for Flushed<$t> {
            fn magnitude(self) -> Self {
                self.abs()
            }
            fn is_zero(self) -> bool {
                self == Self::lit(0.0)
            }
            fn nan(self) -> bool {
                self.is_nan()
            }
            fn inf(self) -> bool {
                self.is_infinite()
            }
            fn unit_if_inf(self) -> Self {
                Flushed(self.0.unit_if_inf())
            }
            fn of(value: f64) -> Self {
                Flushed(<$t as crate::smith::Real>::of(value))
            }
        }
    )*};
}
flushed!(f32, f64);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_and_results_flush_and_sign_operations_are_exact() {
        let tiny = Flushed(f32::from_bits(1));
        let min = Flushed(f32::MIN_POSITIVE);
        assert_eq!((min + tiny).0.to_bits(), min.0.to_bits());
        assert_eq!((min / Flushed(2.0)).0.to_bits(), 0);
        assert_eq!((-min / Flushed(2.0)).0.to_bits(), 0x8000_0000);
        assert_eq!(tiny.sqrt().0, 0.0);
        assert!(tiny == Flushed(0.0));
        assert_eq!(tiny.partial_cmp(&Flushed(0.0)), Some(Ordering::Equal));
        assert_eq!((-tiny).0.to_bits(), 0x8000_0001);
        assert_eq!(tiny.abs().0.to_bits(), 1);
        assert_eq!(min.mul_add(Flushed(0.5), Flushed(0.0)).0, 0.0);
    }
}
