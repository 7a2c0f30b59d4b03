//! Tridiagonal solves by Gaussian elimination with partial pivoting, LAPACK's `?gtsv`: the
//! implementation that the reference evaluator and the `cpu` backend's runtime both call for
//! JAX's `lapack_?gtsv_ffi`, for real and complex types in the operand's precision.
//!
//! JAX's convention: the three diagonals are each of length `n`, row `i` of the matrix is
//! `dl[i] x[i-1] + d[i] x[i] + du[i] x[i+1]`, and `dl[0]` and `du[n-1]` are not read (JAX
//! passes LAPACK `dl + 1`). The right-hand sides are the `n`-by-`nrhs` row-major `b`.
//!
//! Invariants, as `?gtsv`: at step `i` rows `i` and `i+1` are interchanged when
//! `|d[i]| < |dl[i+1]|` (`|re| + |im|` for complex values), else `d[i]` is divided by (a zero
//! stops the elimination with `info = i + 1`, leaving what was computed so far); on return `d`
//! holds `U`'s diagonal, `du` its first superdiagonal and `dl[1..n-1]` its second (the fill of
//! the interchanges), and `b` the solution. A zero last pivot gives `info = n`.

use crate::lapack_scalar::LapackScalar;

/// Solves the tridiagonal system in place; returns LAPACK's `info`.
pub fn gtsv<T: LapackScalar>(
    dl: &mut [T],
    d: &mut [T],
    du: &mut [T],
    b: &mut [T],
    n: usize,
    nrhs: usize,
) -> i32 {
    if n == 0 {
        return 0;
    }
    let zero = T::default();
    // LAPACK's DL(i) is JAX's dl[i + 1].
    for i in 0..n - 1 {
        if d[i].abs1() >= dl[i + 1].abs1() {
            // No interchange.
            if d[i] == zero {
                return i as i32 + 1;
            }
            let fact = dl[i + 1].over(d[i]);
            d[i + 1] = d[i + 1] - fact * du[i];
            for j in 0..nrhs {
                b[(i + 1) * nrhs + j] = b[(i + 1) * nrhs + j] - fact * b[i * nrhs + j];
            }
            if i + 2 < n {
                dl[i + 1] = zero;
            }
        } else {
            // Interchange rows i and i+1.
            let fact = d[i].over(dl[i + 1]);
            d[i] = dl[i + 1];
            let temp = d[i + 1];
            d[i + 1] = du[i] - fact * temp;
            if i + 2 < n {
                dl[i + 1] = du[i + 1];
                du[i + 1] = -(fact * dl[i + 1]);
            }
            du[i] = temp;
            for j in 0..nrhs {
                let t = b[i * nrhs + j];
                b[i * nrhs + j] = b[(i + 1) * nrhs + j];
                b[(i + 1) * nrhs + j] = t - fact * b[(i + 1) * nrhs + j];
            }
        }
    }
    if d[n - 1] == zero {
        return n as i32;
    }
    for j in 0..nrhs {
        let x = |b: &[T], r: usize| b[r * nrhs + j];
        b[(n - 1) * nrhs + j] = x(b, n - 1).over(d[n - 1]);
        if n > 1 {
            b[(n - 2) * nrhs + j] = (x(b, n - 2) - du[n - 2] * x(b, n - 1)).over(d[n - 2]);
        }
        for i in (0..n.saturating_sub(2)).rev() {
            b[i * nrhs + j] = (x(b, i) - du[i] * x(b, i + 1) - dl[i + 1] * x(b, i + 2)).over(d[i]);
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex;

    /// `A x = b` for systems that need interchanges, and `info` on singular ones.
    #[test]
    fn solves_and_reports_singular_systems() {
        let n = 5;
        let dl0: Vec<Complex<f64>> = (0..n).map(|i| Complex::new(3.0 + i as f64, 1.0)).collect();
        let d0: Vec<Complex<f64>> = (0..n).map(|i| Complex::new(0.5, -(i as f64))).collect();
        let du0: Vec<Complex<f64>> = (0..n).map(|i| Complex::new(1.0, i as f64)).collect();
        let b0: Vec<Complex<f64>> = (0..2 * n)
            .map(|k| Complex::new(k as f64, 1.0 - k as f64))
            .collect();
        let (mut dl, mut d, mut du, mut b) = (dl0.clone(), d0.clone(), du0.clone(), b0.clone());
        assert_eq!(gtsv(&mut dl, &mut d, &mut du, &mut b, n, 2), 0);
        for i in 0..n {
            for j in 0..2 {
                let mut s = d0[i] * b[i * 2 + j];
                if i > 0 {
                    s += dl0[i] * b[(i - 1) * 2 + j];
                }
                if i + 1 < n {
                    s += du0[i] * b[(i + 1) * 2 + j];
                }
                assert!((s - b0[i * 2 + j]).norm() < 1e-12, "row {i}");
            }
        }
        let mut z = vec![0.0f32; 3];
        let mut one = vec![1.0f32; 3];
        assert_eq!(
            gtsv(&mut z.clone(), &mut z, &mut one.clone(), &mut one, 3, 1),
            1
        );
        let (mut dl, mut d, mut du, mut b) = (
            vec![0.0, 1.0],
            vec![1.0, 1.0],
            vec![1.0, 0.0],
            vec![1.0f64, 2.0],
        );
        assert_eq!(gtsv(&mut dl, &mut d, &mut du, &mut b, 2, 1), 2);
    }
}
