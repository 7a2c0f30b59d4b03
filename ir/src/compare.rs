//! Comparing a computed literal against a reference with the corpus rules.
//!
//! The rules (see the corpus README and the `tolerance` entries of its manifest):
//! - Tuple structure, element types and dimensions must match exactly (bounded-dynamic flags are
//!   not compared).
//! - Integers and `pred` must be equal, whatever the tolerance.
//! - Floats (`bf16`, `f16` and the f8 types are first widened to `f64`, which is exact): NaN
//!   matches NaN and nothing else, whatever the payload or sign; an infinity matches only the
//!   same infinity. Otherwise [`Tolerance::Exact`] needs identical values, including the sign of
//!   zero (so, for non-NaN values, identical bits), and [`Tolerance::Close`] needs NumPy
//!   `allclose` closeness, `|actual - expected| <= atol + rtol * |expected|`, evaluated in `f64`.
//! - Complex numbers compare their real and imaginary parts separately by the float rules.
//! - A [`Tolerance::Close`] with a negative or non-finite `rtol` or `atol` is refused
//!   ([`MismatchKind::InvalidTolerance`]) before anything is compared.
//!
//! A [`Mismatch`] says where (the tuple path and the multi-dimensional element index), shows the
//! first [`MAX_REPORTED`] differing elements with both values, and counts all of them.

use crate::literal::{element_to_f64, element_to_i128, format_element, ArrayLiteral, Literal};
use crate::types::ElementType;
use std::fmt;

/// How many differing elements a [`Mismatch`] lists.
pub const MAX_REPORTED: usize = 10;

/// How closely floating-point elements must agree.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Tolerance {
    /// Identical values (NaN matches NaN; `-0.0` does not match `0.0`).
    Exact,
    /// NumPy `allclose`: `|actual - expected| <= atol + rtol * |expected|`.
    Close {
        /// Relative tolerance, scaled by `|expected|`.
        rtol: f64,
        /// Absolute tolerance.
        atol: f64,
    },
}

impl Tolerance {
    /// Whether this is a tolerance: `Exact`, or `rtol` and `atol` finite and non-negative.
    pub fn is_valid(&self) -> bool {
        match *self {
            Tolerance::Exact => true,
            Tolerance::Close { rtol, atol } => {
                rtol.is_finite() && atol.is_finite() && rtol >= 0.0 && atol >= 0.0
            }
        }
    }
}

impl fmt::Display for Tolerance {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tolerance::Exact => f.write_str("exact"),
            Tolerance::Close { rtol, atol } => write!(f, "rtol={rtol:e}, atol={atol:e}"),
        }
    }
}

/// Why two literals do not match, and where.
#[derive(Clone, Debug, PartialEq)]
pub struct Mismatch {
    /// The tuple indices leading to the array that differs (empty for a top-level array).
    pub tuple_index: Vec<usize>,
    /// What differs.
    pub kind: MismatchKind,
}

/// What differs between two literals.
#[derive(Clone, Debug, PartialEq)]
pub enum MismatchKind {
    /// One is a tuple and the other an array, or the tuples have different lengths.
    Structure {
        /// The expected value's structure (`f32[2,3]`, `tuple of 2`).
        expected: String,
        /// The actual value's structure.
        actual: String,
    },
    /// The element types differ.
    ElementType {
        /// The expected element type.
        expected: ElementType,
        /// The actual element type.
        actual: ElementType,
    },
    /// The dimensions differ.
    Shape {
        /// The expected dimensions.
        expected: Vec<i64>,
        /// The actual dimensions.
        actual: Vec<i64>,
    },
    /// A literal's data length does not fit its shape (a bug in whatever built it).
    Malformed {
        /// `"expected"` or `"actual"`.
        which: &'static str,
        /// Bytes the shape needs.
        needed: usize,
        /// Bytes the literal has.
        len: usize,
    },
    /// The tolerance is not one (a negative or non-finite `rtol` or `atol`): nothing was
    /// compared.
    InvalidTolerance(Tolerance),
    /// Some elements differ.
    Values {
        /// How many elements differ.
        count: usize,
        /// How many elements there are.
        total: usize,
        /// The tolerance that was applied.
        tolerance: Tolerance,
        /// The first [`MAX_REPORTED`] differing elements, in row-major order.
        first: Vec<ElementMismatch>,
    },
}

/// One differing element.
#[derive(Clone, Debug, PartialEq)]
pub struct ElementMismatch {
    /// The element's index, one entry per dimension.
    pub index: Vec<i64>,
    /// The expected value, as HLO text writes it.
    pub expected: String,
    /// The actual value, as HLO text writes it.
    pub actual: String,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if !self.tuple_index.is_empty() {
            let path: Vec<String> = self.tuple_index.iter().map(|i| i.to_string()).collect();
            write!(f, "at tuple element {{{}}}: ", path.join(","))?;
        }
        match &self.kind {
            MismatchKind::Structure { expected, actual } => {
                write!(f, "expected {expected}, got {actual}")
            }
            MismatchKind::ElementType { expected, actual } => {
                write!(f, "expected element type {expected}, got {actual}")
            }
            MismatchKind::Shape { expected, actual } => {
                write!(f, "expected dimensions {expected:?}, got {actual:?}")
            }
            MismatchKind::InvalidTolerance(t) => write!(
                f,
                "invalid tolerance ({t}): rtol and atol must be finite and non-negative"
            ),
            MismatchKind::Malformed { which, needed, len } => write!(
                f,
                "the {which} literal is malformed: its shape needs {needed} bytes but it has {len}"
            ),
            MismatchKind::Values {
                count,
                total,
                tolerance,
                first,
            } => {
                write!(f, "{count} of {total} elements differ ({tolerance})")?;
                if !first.is_empty() {
                    let shown = if first.len() < *count { "first " } else { "" };
                    write!(f, "; {shown}{}:", first.len())?;
                }
                for m in first {
                    write!(
                        f,
                        "\n  at {:?}: expected {}, actual {}",
                        m.index, m.expected, m.actual
                    )?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Mismatch {}

/// Compares `actual` against the reference `expected` with the corpus rules (see the module
/// documentation); tuples compare leaf by leaf with the same tolerance.
pub fn compare_literals(
    expected: &Literal,
    actual: &Literal,
    tol: Tolerance,
) -> Result<(), Mismatch> {
    if !tol.is_valid() {
        return Err(Mismatch {
            tuple_index: Vec::new(),
            kind: MismatchKind::InvalidTolerance(tol),
        });
    }
    let mut path = Vec::new();
    compare_at(expected, actual, tol, &mut path)
}

/// Compares two arrays with the corpus rules (see the module documentation).
pub fn compare_arrays(
    expected: &ArrayLiteral,
    actual: &ArrayLiteral,
    tol: Tolerance,
) -> Result<(), Mismatch> {
    if !tol.is_valid() {
        return Err(Mismatch {
            tuple_index: Vec::new(),
            kind: MismatchKind::InvalidTolerance(tol),
        });
    }
    compare_array_kind(expected, actual, tol).map_err(|kind| Mismatch {
        tuple_index: Vec::new(),
        kind,
    })
}

fn compare_at(
    expected: &Literal,
    actual: &Literal,
    tol: Tolerance,
    path: &mut Vec<usize>,
) -> Result<(), Mismatch> {
    match (expected, actual) {
        (Literal::Array(e), Literal::Array(a)) => {
            compare_array_kind(e, a, tol).map_err(|kind| Mismatch {
                tuple_index: path.clone(),
                kind,
            })
        }
        (Literal::Tuple(e), Literal::Tuple(a)) if e.len() == a.len() => {
            for (i, (e, a)) in e.iter().zip(a).enumerate() {
                path.push(i);
                compare_at(e, a, tol, path)?;
                path.pop();
            }
            Ok(())
        }
        _ => Err(Mismatch {
            tuple_index: path.clone(),
            kind: MismatchKind::Structure {
                expected: describe(expected),
                actual: describe(actual),
            },
        }),
    }
}

fn describe(l: &Literal) -> String {
    match l {
        Literal::Array(a) => {
            let dims: Vec<String> = a.shape.dims.iter().map(|d| d.to_string()).collect();
            format!("{}[{}]", a.ty(), dims.join(","))
        }
        Literal::Tuple(t) => format!("a tuple of {}", t.len()),
    }
}

fn compare_array_kind(
    expected: &ArrayLiteral,
    actual: &ArrayLiteral,
    tol: Tolerance,
) -> Result<(), MismatchKind> {
    let ty = expected.ty();
    if ty != actual.ty() {
        return Err(MismatchKind::ElementType {
            expected: ty,
            actual: actual.ty(),
        });
    }
    if expected.shape.dims != actual.shape.dims {
        return Err(MismatchKind::Shape {
            expected: expected.shape.dims.to_vec(),
            actual: actual.shape.dims.to_vec(),
        });
    }
    let total = expected.len();
    let needed = total.saturating_mul(ty.byte_size());
    for (which, lit) in [("expected", expected), ("actual", actual)] {
        if lit.data.len() != needed {
            return Err(MismatchKind::Malformed {
                which,
                needed,
                len: lit.data.len(),
            });
        }
    }
    let mut count = 0;
    let mut first = Vec::new();
    for i in 0..total {
        let (e, a) = (expected.element_bytes(i), actual.element_bytes(i));
        if !element_matches(ty, e, a, tol) {
            count += 1;
            if first.len() < MAX_REPORTED {
                first.push(ElementMismatch {
                    index: unravel(i, &expected.shape.dims),
                    expected: format_element(ty, e),
                    actual: format_element(ty, a),
                });
            }
        }
    }
    if count == 0 {
        Ok(())
    } else {
        Err(MismatchKind::Values {
            count,
            total,
            tolerance: tol,
            first,
        })
    }
}

/// Whether one element matches, by the rules in the module documentation.
fn element_matches(ty: ElementType, e: &[u8], a: &[u8], tol: Tolerance) -> bool {
    if ty.is_complex() {
        let part = ty.component_type();
        let w = part.byte_size();
        float_matches(part, &e[..w], &a[..w], tol) && float_matches(part, &e[w..], &a[w..], tol)
    } else if ty.is_float() {
        float_matches(ty, e, a, tol)
    } else {
        element_to_i128(ty, e) == element_to_i128(ty, a)
    }
}

fn float_matches(ty: ElementType, e: &[u8], a: &[u8], tol: Tolerance) -> bool {
    let (e, a) = (element_to_f64(ty, e), element_to_f64(ty, a));
    if e.is_nan() || a.is_nan() {
        return e.is_nan() && a.is_nan();
    }
    match tol {
        Tolerance::Exact => e == a && e.is_sign_negative() == a.is_sign_negative(),
        Tolerance::Close { rtol, atol } => {
            if e.is_infinite() || a.is_infinite() {
                e == a
            } else {
                (a - e).abs() <= atol + rtol * e.abs()
            }
        }
    }
}

/// The multi-dimensional index of row-major element `flat`.
fn unravel(mut flat: usize, dims: &[i64]) -> Vec<i64> {
    let mut index = vec![0i64; dims.len()];
    for (k, &d) in dims.iter().enumerate().rev() {
        let d = d.max(1) as usize;
        index[k] = (flat % d) as i64;
        flat /= d;
    }
    index
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::types::ArrayShape;
    use half::{bf16, f16};

    const CLOSE: Tolerance = Tolerance::Close {
        rtol: 1e-5,
        atol: 1e-6,
    };

    fn f32s(dims: &[i64], v: &[f32]) -> Literal {
        Literal::Array(ArrayLiteral::from_slice(dims, v))
    }

    fn values(m: &Mismatch) -> (usize, &[ElementMismatch]) {
        match &m.kind {
            MismatchKind::Values { count, first, .. } => (*count, first),
            other => panic!("expected a value mismatch, got {other:?}"),
        }
    }

    #[test]
    fn nan_matches_only_nan() {
        let nan = f32s(&[2], &[f32::NAN, 1.0]);
        let other_nan = f32s(&[2], &[-f32::NAN, 1.0]);
        for tol in [Tolerance::Exact, CLOSE] {
            assert_eq!(compare_literals(&nan, &other_nan, tol), Ok(()));
            let m = compare_literals(&nan, &f32s(&[2], &[1.0, 1.0]), tol).unwrap_err();
            let (count, first) = values(&m);
            assert_eq!(count, 1);
            assert_eq!(first[0].index, vec![0]);
            assert_eq!(first[0].expected, "nan");
            assert_eq!(first[0].actual, "1");
            // Also the other way round: a NaN where a number was expected.
            assert!(compare_literals(&f32s(&[2], &[1.0, 1.0]), &nan, tol).is_err());
        }
    }

    #[test]
    fn infinities_must_be_equal() {
        let inf = f32s(&[1], &[f32::INFINITY]);
        let neg = f32s(&[1], &[f32::NEG_INFINITY]);
        let big = f32s(&[1], &[f32::MAX]);
        for tol in [Tolerance::Exact, CLOSE] {
            assert_eq!(compare_literals(&inf, &inf, tol), Ok(()));
            assert!(compare_literals(&inf, &neg, tol).is_err());
            assert!(compare_literals(&inf, &big, tol).is_err());
            assert!(compare_literals(&big, &inf, tol).is_err());
        }
        // A huge tolerance still does not make an infinity close to a finite value.
        let loose = Tolerance::Close {
            rtol: 1e300,
            atol: 1e300,
        };
        assert!(compare_literals(&big, &inf, loose).is_err());
    }

    #[test]
    fn close_follows_allclose() {
        let e = f32s(&[3], &[1000.0, 0.0, -2.0]);
        // Within: |diff| <= 1e-6 + 1e-5 * |e|.
        let within = f32s(&[3], &[1000.009, 9e-7, -2.00001]);
        assert_eq!(compare_literals(&e, &within, CLOSE), Ok(()));
        // Beyond, in each element.
        let beyond = f32s(&[3], &[1000.02, 2e-6, -2.0001]);
        let m = compare_literals(&e, &beyond, CLOSE).unwrap_err();
        assert_eq!(values(&m).0, 3);
        // The tolerance scales with the expected value, not the actual one.
        let e = f32s(&[1], &[1.0]);
        let a = f32s(&[1], &[2.0]);
        let half = Tolerance::Close {
            rtol: 0.5,
            atol: 0.0,
        };
        assert!(compare_literals(&e, &a, half).is_err());
        assert_eq!(compare_literals(&a, &e, half), Ok(()));
    }

    #[test]
    fn exact_floats_need_identical_values() {
        let e = f32s(&[2], &[1.0, 0.0]);
        assert_eq!(compare_literals(&e, &e.clone(), Tolerance::Exact), Ok(()));
        let next = f32s(&[2], &[f32::from_bits(1.0f32.to_bits() + 1), 0.0]);
        assert!(compare_literals(&e, &next, Tolerance::Exact).is_err());
        assert_eq!(compare_literals(&e, &next, CLOSE), Ok(()));
        let neg_zero = f32s(&[2], &[1.0, -0.0]);
        assert!(compare_literals(&e, &neg_zero, Tolerance::Exact).is_err());
        assert_eq!(compare_literals(&e, &neg_zero, CLOSE), Ok(()));
    }

    #[test]
    fn integers_and_pred_are_always_exact() {
        let loose = Tolerance::Close {
            rtol: 1.0,
            atol: 10.0,
        };
        let e = Literal::Array(ArrayLiteral::from_slice(&[2, 2], &[1i32, 2, 3, 4]));
        let a = Literal::Array(ArrayLiteral::from_slice(&[2, 2], &[1i32, 2, 3, 5]));
        for tol in [Tolerance::Exact, loose] {
            assert_eq!(compare_literals(&e, &e, tol), Ok(()));
            let m = compare_literals(&e, &a, tol).unwrap_err();
            let (count, first) = values(&m);
            assert_eq!(count, 1);
            assert_eq!(first[0].index, vec![1, 1]);
            assert_eq!(
                (first[0].expected.as_str(), first[0].actual.as_str()),
                ("4", "5")
            );
        }
        let e = Literal::Array(ArrayLiteral::from_slice(&[3], &[true, false, true]));
        let a = Literal::Array(ArrayLiteral::from_slice(&[3], &[true, true, true]));
        assert!(compare_literals(&e, &a, loose).is_err());
        let big = Literal::Array(ArrayLiteral::from_slice(&[1], &[u64::MAX]));
        let less = Literal::Array(ArrayLiteral::from_slice(&[1], &[u64::MAX - 1]));
        assert!(compare_literals(&big, &less, loose).is_err());
    }

    #[test]
    fn shapes_types_and_structure_must_match() {
        let e = f32s(&[2, 3], &[0.0; 6]);
        let m = compare_literals(&e, &f32s(&[3, 2], &[0.0; 6]), CLOSE).unwrap_err();
        assert_eq!(
            m.kind,
            MismatchKind::Shape {
                expected: vec![2, 3],
                actual: vec![3, 2]
            }
        );
        assert!(m.to_string().contains("[2, 3]"), "{m}");
        let m = compare_literals(&e, &f32s(&[6], &[0.0; 6]), CLOSE).unwrap_err();
        assert!(matches!(m.kind, MismatchKind::Shape { .. }));
        let ints = Literal::Array(ArrayLiteral::from_slice(&[2, 3], &[0i32; 6]));
        let m = compare_literals(&e, &ints, CLOSE).unwrap_err();
        assert_eq!(
            m.kind,
            MismatchKind::ElementType {
                expected: ElementType::F32,
                actual: ElementType::S32
            }
        );
        let tuple = Literal::Tuple(vec![e.clone()]);
        let m = compare_literals(&tuple, &e, CLOSE).unwrap_err();
        assert!(matches!(m.kind, MismatchKind::Structure { .. }));
        let m = compare_literals(&tuple, &Literal::Tuple(vec![]), CLOSE).unwrap_err();
        assert!(matches!(m.kind, MismatchKind::Structure { .. }));
    }

    #[test]
    fn tuples_compare_leaf_by_leaf_and_name_the_leaf() {
        let e = Literal::Tuple(vec![
            f32s(&[1], &[1.0]),
            Literal::Tuple(vec![f32s(&[2], &[1.0, 2.0])]),
        ]);
        let a = Literal::Tuple(vec![
            f32s(&[1], &[1.0]),
            Literal::Tuple(vec![f32s(&[2], &[1.0, 3.0])]),
        ]);
        assert_eq!(compare_literals(&e, &e, CLOSE), Ok(()));
        let m = compare_literals(&e, &a, CLOSE).unwrap_err();
        assert_eq!(m.tuple_index, vec![1, 0]);
        let text = m.to_string();
        assert!(
            text.starts_with("at tuple element {1,0}: 1 of 2 elements differ"),
            "{text}"
        );
        assert!(text.contains("at [1]: expected 2, actual 3"), "{text}");
    }

    #[test]
    fn reports_the_first_few_and_counts_all() {
        let e = f32s(&[4, 5], &[0.0; 20]);
        let a = f32s(&[4, 5], &[1.0; 20]);
        let m = compare_literals(&e, &a, CLOSE).unwrap_err();
        let (count, first) = values(&m);
        assert_eq!(count, 20);
        assert_eq!(first.len(), MAX_REPORTED);
        assert_eq!(first[7].index, vec![1, 2]);
        assert!(m.to_string().contains("20 of 20 elements differ"), "{m}");
    }

    #[test]
    fn half_types_are_widened() {
        let e = ArrayLiteral::from_slice(&[2], &[bf16::from_f32(1.0), bf16::NAN]);
        let a = ArrayLiteral::from_slice(&[2], &[bf16::from_f32(1.0078125), bf16::NAN]);
        let loose = Tolerance::Close {
            rtol: 1e-2,
            atol: 0.0,
        };
        assert_eq!(compare_arrays(&e, &a, loose), Ok(()));
        assert!(compare_arrays(&e, &a, CLOSE).is_err());
        let e = ArrayLiteral::from_slice(&[1], &[f16::INFINITY]);
        let a = ArrayLiteral::from_slice(&[1], &[f16::MAX]);
        assert!(compare_arrays(&e, &a, loose).is_err());
    }

    #[test]
    fn complex_compares_both_parts() {
        let c = |re: f32, im: f32| {
            let mut a = ArrayLiteral::zeros(ArrayShape::new(ElementType::C64, &[1]));
            a.data = crate::literal::complex_to_element(ElementType::C64, re as f64, im as f64);
            Literal::Array(a)
        };
        assert_eq!(compare_literals(&c(1.0, 2.0), &c(1.0, 2.0), CLOSE), Ok(()));
        assert!(compare_literals(&c(1.0, 2.0), &c(1.0, 2.5), CLOSE).is_err());
        assert!(compare_literals(&c(1.0, 2.0), &c(1.5, 2.0), CLOSE).is_err());
        assert!(compare_literals(&c(f32::NAN, 0.0), &c(f32::NAN, 0.0), CLOSE).is_ok());
        let m = compare_literals(&c(1.0, 2.0), &c(1.0, f32::NAN), CLOSE).unwrap_err();
        assert_eq!(values(&m).1[0].actual, "(1, nan)");
    }

    #[test]
    fn malformed_literals_are_reported_not_panicked_on() {
        let e = ArrayLiteral::from_slice(&[2], &[1.0f32, 2.0]);
        let mut a = e.clone();
        a.data.pop();
        let m = compare_arrays(&e, &a, CLOSE).unwrap_err();
        assert!(matches!(
            m.kind,
            MismatchKind::Malformed {
                which: "actual",
                ..
            }
        ));
    }

    #[test]
    fn unravel_is_row_major() {
        assert_eq!(unravel(0, &[]), Vec::<i64>::new());
        assert_eq!(unravel(5, &[2, 3]), vec![1, 2]);
        assert_eq!(unravel(7, &[2, 2, 2]), vec![1, 1, 1]);
        assert_eq!(unravel(3, &[4, 1]), vec![3, 0]);
    }
}
