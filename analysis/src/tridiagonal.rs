//! Tridiagonal solves by Gaussian elimination with partial pivoting: LAPACK's `?gtsv`
//! ([`gtsv`]) and the perturbed solve of JAX's `tridiagonal_solve_perturbed_ffi`
//! ([`solve_perturbed`]), the implementations that the reference evaluator and the `cpu`
//! backend's runtime both call, for real and complex types in the operand's precision.
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
//!
//! [`solve_perturbed`] (JAX's kernel, after LAPACK's `?lagtf` and `?lagts`) never fails: it
//! pivots on the larger of `|d[i]|` and `|dl[i+1]|` each relative to its row's 1-norm, keeps
//! `U`'s three diagonals, and in the back substitution moves a pivot `p` with `|p| < 1` that
//! would overflow the solution (`|p| < max_j |rhs_j| / bignum`, or below the safe minimum) away
//! from zero by `eps * max |U|` (with the sign of its real part), doubled until it no longer
//! would; a non-zero pivot below the safe minimum whose row is small enough is instead scaled
//! up with its row. So a singular system gives a finite solution, which inverse iteration uses
//! as an eigenvector, and a nonsingular, well-scaled one `?gtsv`'s solution up to rounding.
//! NaNs propagate.

use num_traits::{Float, One, Zero};

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

/// Moves the pivot `p` away from zero (or scales it and its row `rhs` up) so that
/// `rhs / p` cannot overflow, as the module header says. `perturb` is `eps * max |U|`.
fn perturb_pivot<T: LapackScalar>(perturb: T::Real, p: &mut T, rhs: &mut [T]) {
    let one = T::Real::one();
    let tiny = T::Real::min_positive_value();
    let small = one / T::Real::max_value();
    // ?lamch's safe minimum.
    let safmin = if small < tiny {
        tiny
    } else {
        small * (one + T::Real::epsilon())
    };
    let bignum = one / safmin;
    let mut size = p.modulus();
    if size >= one {
        return;
    }
    // At least the safe minimum (so doubling ends), with the sign of the pivot's real part; a
    // NaN stays NaN.
    let mut step = if perturb.abs() < safmin {
        safmin
    } else {
        perturb.abs()
    }
    .copysign(p.re());
    let largest = rhs.iter().fold(T::Real::zero(), |m, x| {
        if x.modulus() > m {
            x.modulus()
        } else {
            m
        }
    });
    while size < one {
        if size < safmin {
            if size == T::Real::zero() || largest * safmin > size {
                *p = *p + T::real(step);
                step = step + step;
            } else {
                *p = p.scale(bignum);
                rhs.iter_mut().for_each(|x| *x = x.scale(bignum));
                return;
            }
        } else if largest > size * bignum {
            *p = *p + T::real(step);
            step = step + step;
        } else {
            return;
        }
        size = p.modulus();
    }
}

/// Solves the tridiagonal system (JAX's diagonals of length `n`, the `n`-by-`nrhs` row-major
/// `b`) in place, perturbing tiny pivots as the module header says; `dl`, `d` and `du` are
/// only read.
pub fn solve_perturbed<T: LapackScalar>(
    dl: &[T],
    d: &[T],
    du: &[T],
    b: &mut [T],
    n: usize,
    nrhs: usize,
) {
    let zero = T::default();
    let eps = T::Real::epsilon();
    if n == 0 {
        return;
    }
    if n == 1 {
        let mut p = d[0];
        perturb_pivot(eps * p.modulus(), &mut p, &mut b[..nrhs]);
        let inv = T::real(T::Real::one()).over(p);
        b[..nrhs].iter_mut().for_each(|x| *x = *x * inv);
        return;
    }
    let row = |b: &[T], r: usize| b[r * nrhs..(r + 1) * nrhs].to_vec();
    // U's diagonal, first and second superdiagonals.
    let mut u = vec![[zero; 3]; n];
    u[0] = [d[0], du[0], zero];
    let mut max_u = d[0].modulus().max(du[0].modulus());
    let mut scale1 = d[0].modulus() + du[0].modulus();
    for k in 0..n - 1 {
        u[k + 1][0] = d[k + 1];
        let mut scale2 = dl[k + 1].modulus() + d[k + 1].modulus();
        if k + 2 < n {
            scale2 = scale2 + du[k + 1].modulus();
        }
        if dl[k + 1] == zero {
            // Row k+1 has nothing to eliminate.
            scale1 = scale2;
            u[k + 1][1] = du[k + 1];
            u[k][2] = zero;
        } else {
            let piv1 = if u[k][0] == zero {
                T::Real::zero()
            } else {
                u[k][0].modulus() / scale1
            };
            let piv2 = dl[k + 1].modulus() / scale2;
            if piv2 <= piv1 {
                scale1 = scale2;
                let factor = dl[k + 1].over(u[k][0]);
                u[k + 1][0] = u[k + 1][0] - factor * u[k][1];
                u[k + 1][1] = du[k + 1];
                u[k][2] = zero;
                for j in 0..nrhs {
                    b[(k + 1) * nrhs + j] = b[(k + 1) * nrhs + j] - factor * b[k * nrhs + j];
                }
            } else {
                // Interchange rows k and k+1.
                let factor = u[k][0].over(dl[k + 1]);
                let above = u[k][1];
                u[k][0] = dl[k + 1];
                u[k + 1][0] = above - factor * d[k + 1];
                u[k][1] = d[k + 1];
                if k + 2 < n {
                    u[k][2] = du[k + 1];
                    u[k + 1][1] = -(factor * du[k + 1]);
                }
                let next = row(b, k + 1);
                for (j, &r) in next.iter().enumerate() {
                    b[(k + 1) * nrhs + j] = b[k * nrhs + j] - factor * r;
                    b[k * nrhs + j] = r;
                }
                scale1 = u[k + 1][0].modulus() + u[k + 1][1].modulus();
            }
        }
        if k + 2 < n {
            for x in u[k] {
                max_u = max_u.max(x.modulus());
            }
        }
    }
    max_u = max_u.max(u[n - 1][0].modulus());
    let perturb = eps * max_u;
    // Back substitution: row k is (x_k - u1 x_{k+1} - u2 x_{k+2}) / p.
    for k in (0..n).rev() {
        let mut r = row(b, k);
        for (j, x) in r.iter_mut().enumerate() {
            if k + 1 < n {
                *x = *x - u[k][1] * b[(k + 1) * nrhs + j];
            }
            if k + 2 < n {
                *x = *x - u[k][2] * b[(k + 2) * nrhs + j];
            }
        }
        let mut p = u[k][0];
        perturb_pivot(perturb, &mut p, &mut r);
        let inv = T::real(T::Real::one()).over(p);
        for (j, x) in r.into_iter().enumerate() {
            b[k * nrhs + j] = x * inv;
        }
    }
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

    /// The perturbed solve gives `?gtsv`'s solution of a nonsingular system, a finite one of a
    /// singular system (an eigenvector of `T` by one step of inverse iteration), and NaNs for
    /// NaN input.
    #[test]
    fn perturbed_solves_stay_finite() {
        let n = 6;
        let dl: Vec<Complex<f64>> = (0..n).map(|i| Complex::new(1.0 + i as f64, 0.5)).collect();
        let d: Vec<Complex<f64>> = (0..n).map(|i| Complex::new(0.25, -(i as f64))).collect();
        let du: Vec<Complex<f64>> = (0..n).map(|i| Complex::new(-2.0, i as f64)).collect();
        let b0: Vec<Complex<f64>> = (0..n).map(|k| Complex::new(k as f64, 1.0)).collect();
        let mut x = b0.clone();
        solve_perturbed(&dl, &d, &du, &mut x, n, 1);
        let (mut l, mut dd, mut u, mut y) = (dl.clone(), d.clone(), du.clone(), b0.clone());
        assert_eq!(gtsv(&mut l, &mut dd, &mut u, &mut y, n, 1), 0);
        for i in 0..n {
            assert!((x[i] - y[i]).norm() < 1e-12, "row {i}");
        }
        // T - 2 I with T = tridiag(1, 2, 1) of order 3 is singular (2 is an eigenvalue, with
        // eigenvector (1, 0, -1)).
        let ones = vec![1.0f64; 3];
        let zeros = vec![0.0f64; 3];
        let mut v = vec![1.0f64, 0.5, 0.25];
        solve_perturbed(&ones, &zeros, &ones, &mut v, 3, 1);
        assert!(v.iter().all(|x| x.is_finite()), "{v:?}");
        let norm = v.iter().map(|x| x * x).sum::<f64>().sqrt();
        let want = [1.0, 0.0, -1.0].map(|x: f64| x / 2f64.sqrt());
        let sign = v[0].signum();
        for (x, w) in v.iter().zip(want) {
            assert!((sign * x / norm - w).abs() < 1e-6, "{v:?}");
        }
        let mut one = vec![0.0f32; 2];
        solve_perturbed(&[0.0], &[0.0], &[0.0], &mut one, 1, 2);
        assert_eq!(one, vec![0.0, 0.0]);
        let mut nan = vec![1.0f32, 2.0];
        solve_perturbed(&[0.0, 1.0], &[f32::NAN, 1.0], &[1.0, 0.0], &mut nan, 2, 1);
        assert!(nan.iter().any(|x| x.is_nan()), "{nan:?}");
    }
}
