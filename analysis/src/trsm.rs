//! Batched triangular solves by substitution: one implementation that the reference evaluator
//! (`triangular-solve` and the LAPACK `trsm` custom call) and the `cpu` backend's runtime both
//! call, so the two meet overflows and infinities in the same operations.
//!
//! Invariants: real types solve in real arithmetic (a real value carried as a complex one
//! would meet `0 * inf = NaN` in its imaginary part); complex division is Smith's algorithm,
//! the one the evaluator's and the backend's elementwise `divide` use; every sum subtracts its
//! terms in increasing column (or row) order; a unit diagonal is never read and never divided
//! by. XLA's `TriangularSolveExpander` instead inverts the diagonal blocks and multiplies, which
//! agrees within tolerance on finite results but not where substitution overflows
//! (fuzz/README.md, "What XLA CPU computes").

use num_complex::Complex;

use crate::flushed::{Flushed, Lit};

/// The arithmetic a triangular solve needs, on real (`f32`, `f64`) and complex (`Complex<f32>`,
/// `Complex<f64>`) values.
pub trait Field: Copy {
    /// `0`.
    fn zero() -> Self;
    /// `self - o`.
    fn minus(self, o: Self) -> Self;
    /// `self * o`.
    fn times(self, o: Self) -> Self;
    /// `self / o` (Smith's algorithm for complex values).
    fn over(self, o: Self) -> Self;
    /// The complex conjugate (the value itself for reals).
    fn conjugate(self) -> Self;
}

macro_rules! real_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn zero() -> Self {
                <$t as Lit>::lit(0.0)
            }
            fn minus(self, o: Self) -> Self {
                self - o
            }
            fn times(self, o: Self) -> Self {
                self * o
            }
            fn over(self, o: Self) -> Self {
                self / o
            }
            fn conjugate(self) -> Self {
                self
            }
        }
    )*};
}
real_field!(f32, f64, Flushed<f32>, Flushed<f64>);

macro_rules! complex_field {
    ($($t:ty),*) => {$(
        impl Field for Complex<$t> {
            fn zero() -> Self {
                Complex::new(<$t as Lit>::lit(0.0), <$t as Lit>::lit(0.0))
            }
            fn minus(self, o: Self) -> Self {
                Complex::new(self.re - o.re, self.im - o.im)
            }
            fn times(self, o: Self) -> Self {
                Complex::new(
                    self.re * o.re - self.im * o.im,
                    self.re * o.im + self.im * o.re,
                )
            }
            fn over(self, o: Self) -> Self {
                let (re, im) = crate::smith::div((self.re, self.im), (o.re, o.im));
                Complex::new(re, im)
            }
            fn conjugate(self) -> Self {
                Complex::new(self.re, -self.im)
            }
        }
    )*};
}
complex_field!(f32, f64, Flushed<f32>, Flushed<f64>);

/// A batched triangular solve: `op(T) X = B` (`left`) or `X op(T) = B`, where `T` is the
/// `lower` or upper triangle of the `m`-by-`m` matrices (unit diagonal if `unit`), `op` is the
/// identity, the transpose or (with `adjoint`) the conjugate transpose, and `B` is
/// `rows`-by-`cols`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TriSolve {
    /// The number of matrices.
    pub batch: usize,
    /// The order of each triangular matrix.
    pub m: usize,
    /// The rows of each right-hand side.
    pub rows: usize,
    /// The columns of each right-hand side.
    pub cols: usize,
    /// Whether `op(T)` multiplies `X` from the left.
    pub left: bool,
    /// Whether the lower triangle of `T` is read (else the upper).
    pub lower: bool,
    /// Whether the diagonal is taken as ones.
    pub unit: bool,
    /// Whether `op` transposes.
    pub transpose: bool,
    /// Whether `op` conjugates too (with `transpose`).
    pub adjoint: bool,
}

/// Solves `p` by substitution; `a` holds the `batch` matrices `T` and `b` the right-hand sides,
/// row-major. Returns `X` (`b`'s size). Only the triangle `p.lower` names is read.
pub fn solve<T: Field>(a: &[T], b: &[T], p: &TriSolve) -> Vec<T> {
    let &TriSolve {
        batch,
        m,
        rows,
        cols,
        left,
        lower,
        unit,
        transpose,
        adjoint,
    } = p;
    let mut x = b.to_vec();
    for k in 0..batch {
        let t = &a[k * m * m..(k + 1) * m * m];
        let xb = &mut x[k * rows * cols..(k + 1) * rows * cols];
        // op(T)(i, j), read from the stored triangle only.
        let op = |i: usize, j: usize| -> T {
            if !transpose {
                t[i * m + j]
            } else if adjoint {
                t[j * m + i].conjugate()
            } else {
                t[j * m + i]
            }
        };
        // Whether op(T) is lower triangular.
        let op_lower = lower != transpose;
        if left {
            // op(T) X = B, one column at a time.
            for c in 0..cols {
                for step in 0..m {
                    let i = if op_lower { step } else { m - 1 - step };
                    let mut s = xb[i * cols + c];
                    let range = if op_lower { 0..i } else { i + 1..m };
                    for j in range {
                        s = s.minus(op(i, j).times(xb[j * cols + c]));
                    }
                    xb[i * cols + c] = if unit { s } else { s.over(op(i, i)) };
                }
            }
        } else {
            // X op(T) = B, one row at a time.
            for r in 0..rows {
                for step in 0..m {
                    let j = if op_lower { m - 1 - step } else { step };
                    let mut s = xb[r * cols + j];
                    let range = if op_lower { j + 1..m } else { 0..j };
                    for i in range {
                        s = s.minus(xb[r * cols + i].times(op(i, j)));
                    }
                    xb[r * cols + j] = if unit { s } else { s.over(op(j, j)) };
                }
            }
        }
    }
    x
}
