//! Jacobi methods for the symmetric eigenproblem and the singular value decomposition: the
//! implementation that the reference evaluator and the `cpu` backend's runtime both call for
//! JAX's LAPACK custom calls `lapack_?syevd_ffi` ([`syevd`]) and `lapack_?gesdd_ffi`
//! ([`gesdd`]), for `f32` and `f64`, computed in the operand's precision as LAPACK's `s` and
//! `d` routines are.
//!
//! - [`syevd`] runs cyclic two-sided Jacobi (Rutishauser's rotations) on the symmetric matrix
//!   built from the one triangle LAPACK reads; eigenvalues come out ascending, eigenvector `j`
//!   in column `j`.
//! - [`gesdd`] runs one-sided (Hestenes) Jacobi on the columns of `A` (of `A^T` when `A` is
//!   wide); singular values come out descending (non-negative), `U` and `V^T` with LAPACK's
//!   shapes for the thin and the full decomposition. Columns of `U` that the values do not
//!   define (a singular value at rounding level, `len * eps` of the largest, or zero, and the
//!   full basis beyond `min(m, n)`) are completed with unit vectors orthogonalized against the
//!   others, in index order.
//!
//! Invariants: eigen- and singular vectors are defined only up to sign (and a rotation within
//! equal values), so they are not LAPACK's bits; what is defined holds to a few ulps of the
//! matrix norm: `A = V diag(w) V^T`, `A = U diag(s) V^T`, orthonormal vectors, the values. A
//! pair is rotated only while its off-diagonal term is above `eps` relative to its diagonal
//! ones, so every sweep but the last changes something and the iteration stops by itself;
//! [`MAX_SWEEPS`] bounds it anyway and reports a non-converged matrix in `info` (LAPACK's
//! `info > 0`). The matrix is scaled by a power of two (exact) so that its largest entry is
//! near one, against overflow and underflow of squares. A matrix with a NaN or an infinity
//! gives NaNs in every output and `info = 0`. The work is sequential, so results do not depend
//! on the thread count.

use num_traits::Float;

use crate::nrm2::nrm2;

/// Sweeps after which a matrix that still rotates is reported as not converged (cyclic Jacobi
/// converges quadratically; a few tens of sweeps is already far beyond what it needs).
pub const MAX_SWEEPS: usize = 60;

/// One symmetric eigendecomposition ([`syevd`]'s result).
#[derive(Clone, Debug, PartialEq)]
pub struct Eigh<T> {
    /// The eigenvalues, ascending.
    pub values: Vec<T>,
    /// The `n`-by-`n` eigenvectors, row-major, eigenvector `j` in column `j` (empty unless
    /// vectors were asked for).
    pub vectors: Vec<T>,
    /// LAPACK's `info`: 0, or the number of sweeps run when the iteration did not converge.
    pub info: i32,
}

/// One singular value decomposition ([`gesdd`]'s result).
#[derive(Clone, Debug, PartialEq)]
pub struct Svd<T> {
    /// The `min(m, n)` singular values, descending.
    pub values: Vec<T>,
    /// `U`, row-major: `m`-by-`m` (full) or `m`-by-`min(m, n)` (empty unless vectors were
    /// asked for).
    pub u: Vec<T>,
    /// `V^T`, row-major: `n`-by-`n` (full) or `min(m, n)`-by-`n` (empty unless vectors were
    /// asked for).
    pub vt: Vec<T>,
    /// LAPACK's `info`: 0, or the number of sweeps run when the iteration did not converge.
    pub info: i32,
}

/// `x * 2^e`, in steps that stay within the type's range.
fn scale2<T: Float>(x: T, e: i32) -> T {
    let mut x = x;
    let mut e = e;
    while e != 0 {
        let step = e.clamp(-60, 60);
        x = x * T::from(2f64.powi(step)).unwrap_or_else(T::one);
        e -= step;
    }
    x
}

/// The exponent `e` with `2^e <= x < 2^(e+1)` for a finite positive `x`.
fn exponent<T: Float>(x: T) -> i32 {
    x.to_f64().map_or(0, |v| v.log2().floor() as i32)
}

/// The largest magnitude in `v`, or `None` if an entry is NaN or infinite.
fn max_abs<T: Float>(v: &[T]) -> Option<T> {
    let mut m = T::zero();
    for &x in v {
        if !x.is_finite() {
            return None;
        }
        m = m.max(x.abs());
    }
    Some(m)
}

/// The tangent of Jacobi's rotation angle for the cotangent of twice the angle, `zeta`: the
/// smaller root of `t^2 + 2 zeta t - 1 = 0`.
fn tangent<T: Float>(zeta: T) -> T {
    let one = T::one();
    if zeta.abs() * T::epsilon() > one {
        // `zeta^2` would overflow; the root is `1 / (2 zeta)` to working precision.
        return one / (zeta + zeta);
    }
    let t = one / (zeta.abs() + (one + zeta * zeta).sqrt());
    if zeta < T::zero() {
        -t
    } else {
        t
    }
}

/// The eigendecomposition of the symmetric `n`-by-`n` row-major matrix whose `lower` (else
/// upper) triangle `a` holds; the other triangle is not read.
pub fn syevd<T: Float>(a: &[T], n: usize, lower: bool, vectors: bool) -> Eigh<T> {
    let mut s = vec![T::zero(); n * n];
    for i in 0..n {
        for j in 0..n {
            let (r, c) = if (i >= j) == lower { (i, j) } else { (j, i) };
            s[i * n + j] = a[r * n + c];
        }
    }
    let identity = |n: usize| {
        let mut v = vec![T::zero(); n * n];
        for i in 0..n {
            v[i * n + i] = T::one();
        }
        v
    };
    let Some(anrm) = max_abs(&s) else {
        return Eigh {
            values: vec![T::nan(); n],
            vectors: if vectors {
                vec![T::nan(); n * n]
            } else {
                vec![]
            },
            info: 0,
        };
    };
    let e = if anrm > T::zero() { exponent(anrm) } else { 0 };
    for x in &mut s {
        *x = scale2(*x, -e);
    }
    let mut v = if vectors { identity(n) } else { vec![] };
    let eps = T::epsilon();
    let mut info = MAX_SWEEPS as i32;
    for _ in 0..MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let apq = s[p * n + q];
                let (app, aqq) = (s[p * n + p], s[q * n + q]);
                if apq == T::zero() || apq.abs() <= eps * app.abs().sqrt() * aqq.abs().sqrt() {
                    continue;
                }
                rotated = true;
                let t = tangent((aqq - app) / (apq + apq));
                let c = T::one() / (T::one() + t * t).sqrt();
                let sn = t * c;
                let tau = sn / (T::one() + c);
                let h = t * apq;
                s[p * n + p] = app - h;
                s[q * n + q] = aqq + h;
                s[p * n + q] = T::zero();
                s[q * n + p] = T::zero();
                for r in 0..n {
                    if r == p || r == q {
                        continue;
                    }
                    let (g, k) = (s[r * n + p], s[r * n + q]);
                    let gp = g - sn * (k + g * tau);
                    let kq = k + sn * (g - k * tau);
                    s[r * n + p] = gp;
                    s[p * n + r] = gp;
                    s[r * n + q] = kq;
                    s[q * n + r] = kq;
                }
                if vectors {
                    for r in 0..n {
                        let (g, k) = (v[r * n + p], v[r * n + q]);
                        v[r * n + p] = g - sn * (k + g * tau);
                        v[r * n + q] = k + sn * (g - k * tau);
                    }
                }
            }
        }
        if !rotated {
            info = 0;
            break;
        }
    }
    let mut order: Vec<usize> = (0..n).collect();
    order.sort_by(|&i, &j| {
        let (x, y) = (s[i * n + i], s[j * n + j]);
        x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal)
    });
    let values = order.iter().map(|&i| scale2(s[i * n + i], e)).collect();
    let vectors = if vectors {
        let mut out = vec![T::zero(); n * n];
        for r in 0..n {
            for (j, &src) in order.iter().enumerate() {
                out[r * n + j] = v[r * n + src];
            }
        }
        out
    } else {
        vec![]
    };
    Eigh {
        values,
        vectors,
        info,
    }
}

fn dot<T: Float>(x: &[T], y: &[T]) -> T {
    x.iter().zip(y).fold(T::zero(), |s, (&a, &b)| s + a * b)
}

/// One-sided Jacobi on `k` vectors of length `len >= k` (`g`, vector `j` at `j * len`):
/// returns the singular values (descending), the left vectors `u_j` (normalized `g_j`, a zero
/// vector where the value is zero) and the right vectors `v_j` (length `k`), so that the
/// matrix whose columns are the input vectors is `sum_j s_j u_j v_j^T`, and the `info`.
fn one_sided<T: Float>(
    mut g: Vec<T>,
    k: usize,
    len: usize,
    vectors: bool,
) -> (Vec<T>, Vec<T>, Vec<T>, i32) {
    let mut v = vec![T::zero(); if vectors { k * k } else { 0 }];
    if vectors {
        for j in 0..k {
            v[j * k + j] = T::one();
        }
    }
    let eps = T::epsilon();
    let mut info = MAX_SWEEPS as i32;
    let rotate = |x: &mut [T], width: usize, p: usize, q: usize, c: T, s: T| {
        for i in 0..width {
            let (a, b) = (x[p * width + i], x[q * width + i]);
            x[p * width + i] = c * a - s * b;
            x[q * width + i] = s * a + c * b;
        }
    };
    for _ in 0..MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..k {
            for q in p + 1..k {
                let (gp, gq) = (&g[p * len..(p + 1) * len], &g[q * len..(q + 1) * len]);
                let gamma = dot(gp, gq);
                let (np, nq) = (nrm2(gp.iter().copied()), nrm2(gq.iter().copied()));
                if gamma == T::zero() || gamma.abs() <= eps * np * nq {
                    continue;
                }
                rotated = true;
                let (alpha, beta) = (np * np, nq * nq);
                let t = tangent((beta - alpha) / (gamma + gamma));
                let c = T::one() / (T::one() + t * t).sqrt();
                let s = c * t;
                rotate(&mut g, len, p, q, c, s);
                if vectors {
                    rotate(&mut v, k, p, q, c, s);
                }
            }
        }
        if !rotated {
            info = 0;
            break;
        }
    }
    let norms: Vec<T> = (0..k)
        .map(|j| nrm2(g[j * len..(j + 1) * len].iter().copied()))
        .collect();
    let mut order: Vec<usize> = (0..k).collect();
    order.sort_by(|&i, &j| {
        norms[j]
            .partial_cmp(&norms[i])
            .unwrap_or(std::cmp::Ordering::Equal)
    });
    let values = order.iter().map(|&j| norms[j]).collect();
    let (mut u, mut vv) = (vec![], vec![]);
    // Below this a vector is rounding noise of the larger ones: its direction is not reliably
    // orthogonal to theirs, so it is left zero (for [`complete`] to replace), which changes the
    // product by at most its norm.
    let noise = norms.iter().fold(T::zero(), |m, &x| m.max(x))
        * T::epsilon()
        * T::from(len).unwrap_or_else(T::one);
    if vectors {
        for &j in &order {
            let col = &g[j * len..(j + 1) * len];
            if norms[j] > noise && norms[j] > T::zero() {
                u.extend(col.iter().map(|&x| x / norms[j]));
            } else {
                u.resize(u.len() + len, T::zero());
            }
            vv.extend_from_slice(&v[j * k..(j + 1) * k]);
        }
    }
    (values, u, vv, info)
}

/// Completes `u` (`have` vectors of length `len`, some possibly zero) to `want` orthonormal
/// vectors: zero vectors are replaced and new ones appended, each the first unit vector whose
/// part orthogonal to the vectors so far (two Gram-Schmidt passes) is not small.
fn complete<T: Float>(u: &mut Vec<T>, have: usize, want: usize, len: usize) {
    u.resize(want * len, T::zero());
    let half = T::from(0.5).unwrap_or_else(T::one);
    let mut candidate = 0;
    for j in 0..want {
        if j < have && u[j * len..(j + 1) * len].iter().any(|&x| x != T::zero()) {
            continue;
        }
        while candidate < len {
            let mut x = vec![T::zero(); len];
            x[candidate] = T::one();
            candidate += 1;
            for _ in 0..2 {
                for i in 0..want {
                    if i == j {
                        continue;
                    }
                    let ui = &u[i * len..(i + 1) * len];
                    let d = dot(ui, &x);
                    for (xe, &ue) in x.iter_mut().zip(ui) {
                        *xe = *xe - d * ue;
                    }
                }
            }
            let nx = nrm2(x.iter().copied());
            if nx > half {
                for (dst, &xe) in u[j * len..(j + 1) * len].iter_mut().zip(&x) {
                    *dst = xe / nx;
                }
                break;
            }
        }
    }
}

/// The singular value decomposition of the `m`-by-`n` row-major matrix `a`: `U` and `V^T`
/// if `vectors`, square (`full`) or thin.
pub fn gesdd<T: Float>(a: &[T], m: usize, n: usize, vectors: bool, full: bool) -> Svd<T> {
    let k = m.min(n);
    let (ur, uc) = if full { (m, m) } else { (m, k) };
    let (vr, vc) = if full { (n, n) } else { (k, n) };
    let Some(anrm) = max_abs(a) else {
        return Svd {
            values: vec![T::nan(); k],
            u: if vectors {
                vec![T::nan(); ur * uc]
            } else {
                vec![]
            },
            vt: if vectors {
                vec![T::nan(); vr * vc]
            } else {
                vec![]
            },
            info: 0,
        };
    };
    let e = if anrm > T::zero() { exponent(anrm) } else { 0 };
    // The vectors Jacobi orthogonalizes: the columns of `A` when it is tall, else its rows
    // (the columns of `A^T`).
    let tall = m >= n;
    let len = m.max(n);
    let mut g = vec![T::zero(); k * len];
    for i in 0..m {
        for j in 0..n {
            let x = scale2(a[i * n + j], -e);
            if tall {
                g[j * len + i] = x;
            } else {
                g[i * len + j] = x;
            }
        }
    }
    let (values, mut left, right, info) = one_sided(g, k, len, vectors);
    let values = values.into_iter().map(|x| scale2(x, e)).collect();
    if !vectors {
        return Svd {
            values,
            u: vec![],
            vt: vec![],
            info,
        };
    }
    // `left` holds vectors of length `len` (of `U` when tall, of `V` when wide), `right`
    // vectors of length `k` (the other side, never short of a basis).
    complete(&mut left, k, if full { len } else { k }, len);
    let mut u = vec![T::zero(); ur * uc];
    let mut vt = vec![T::zero(); vr * vc];
    if tall {
        for j in 0..uc {
            for i in 0..m {
                u[i * uc + j] = left[j * len + i];
            }
        }
        vt.copy_from_slice(&right[..vr * vc]);
    } else {
        for j in 0..k {
            for i in 0..m {
                u[i * uc + j] = right[j * k + i];
            }
        }
        vt.copy_from_slice(&left[..vr * vc]);
    }
    Svd {
        values,
        u,
        vt,
        info,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A deterministic pseudo-random matrix in [-1, 1).
    fn matrix(m: usize, n: usize, seed: u64) -> Vec<f64> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..m * n)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
            })
            .collect()
    }

    // Vectors are defined only up to sign, so these check reconstruction and orthogonality,
    // never particular vectors.
    #[test]
    fn eigh_reconstructs_and_sorts() {
        for n in [1, 2, 5, 9] {
            let r = matrix(n, n, n as u64);
            let a: Vec<f64> = (0..n * n).map(|i| r[i] + r[(i % n) * n + i / n]).collect();
            let e = syevd(&a, n, true, true);
            assert_eq!(e.info, 0);
            assert!(e.values.windows(2).all(|w| w[0] <= w[1]));
            for i in 0..n {
                for j in 0..n {
                    let rec: f64 = (0..n)
                        .map(|k| e.vectors[i * n + k] * e.values[k] * e.vectors[j * n + k])
                        .sum();
                    assert!((rec - a[i * n + j]).abs() < 1e-13, "n={n} ({i},{j})");
                    let vtv: f64 = (0..n)
                        .map(|k| e.vectors[k * n + i] * e.vectors[k * n + j])
                        .sum();
                    assert!((vtv - f64::from(i == j)).abs() < 1e-13);
                }
            }
        }
    }

    #[test]
    fn svd_reconstructs_thin_and_full() {
        for (m, n) in [(1, 1), (4, 3), (3, 5), (6, 6)] {
            let a = matrix(m, n, (m * 10 + n) as u64);
            for full in [false, true] {
                let s = gesdd(&a, m, n, true, full);
                assert_eq!(s.info, 0);
                assert!(s.values.windows(2).all(|w| w[0] >= w[1]));
                let k = m.min(n);
                let uc = if full { m } else { k };
                for i in 0..m {
                    for j in 0..n {
                        let rec: f64 = (0..k)
                            .map(|l| s.u[i * uc + l] * s.values[l] * s.vt[l * n + j])
                            .sum();
                        assert!((rec - a[i * n + j]).abs() < 1e-13, "{m}x{n} full={full}");
                    }
                }
                for i in 0..uc {
                    for j in 0..uc {
                        let utu: f64 = (0..m).map(|r| s.u[r * uc + i] * s.u[r * uc + j]).sum();
                        assert!((utu - f64::from(i == j)).abs() < 1e-13);
                    }
                }
            }
        }
    }

    #[test]
    fn zero_and_non_finite_matrices() {
        let s = gesdd(&[0.0f32; 6], 2, 3, true, true);
        assert_eq!(s.values, vec![0.0, 0.0]);
        assert_eq!(s.u, vec![1.0, 0.0, 0.0, 1.0]);
        let e = syevd(&[f32::NAN, 0.0, 1.0, 2.0], 2, true, true);
        assert!(e.values.iter().chain(&e.vectors).all(|x| x.is_nan()));
        // The upper triangle is not read.
        let e = syevd(&[1.0f64, f64::NAN, 0.0, 1.0], 2, true, false);
        assert_eq!(e.values, vec![1.0, 1.0]);
    }
}
