//! Jacobi methods for the Hermitian eigenproblem and the singular value decomposition: the
//! implementation that the reference evaluator and the `cpu` backend's runtime both call for
//! JAX's LAPACK custom calls `lapack_?syevd_ffi` / `lapack_?heevd_ffi` ([`syevd`]) and
//! `lapack_?gesdd_ffi` ([`gesdd`]), for `f32`, `f64`, `c64` and `c128`
//! ([`LapackScalar`]), computed in the operand's precision as LAPACK's routines are.
//!
//! - [`syevd`] runs cyclic two-sided Jacobi (Rutishauser's rotations) on the Hermitian matrix
//!   built from the one triangle LAPACK reads (the imaginary part of the diagonal is not
//!   read); each complex pair is first made real by a unit phase on its second index, so every
//!   rotation is a real one. Eigenvalues (real) come out ascending, eigenvector `j` in column
//!   `j`.
//! - [`gesdd`] runs one-sided (Hestenes) Jacobi on the columns of `A` (of `A^H` when `A` is
//!   wide), with the same phase step for complex pairs; singular values come out descending
//!   (non-negative), `U` and `V^H` with LAPACK's shapes for the thin and the full
//!   decomposition. Columns of `U` that the values do not
//!   define (a singular value at rounding level, `len * eps` of the largest, or zero, and the
//!   full basis beyond `min(m, n)`) are completed with unit vectors orthogonalized against the
//!   others, in index order.
//!
//! Invariants: eigen- and singular vectors are defined only up to a unit factor (a sign for
//! real types, and a rotation within equal values), so they are not LAPACK's bits; what is
//! defined holds to a few ulps of the matrix norm: `A = V diag(w) V^H`, `A = U diag(s) V^H`,
//! orthonormal vectors, the values. For real types the phase is exactly `+-1`. A
//! pair is rotated only while its off-diagonal term is above `eps` relative to its diagonal
//! ones, so every sweep but the last changes something and the iteration stops by itself;
//! [`MAX_SWEEPS`] bounds it anyway and reports a non-converged matrix in `info` (LAPACK's
//! `info > 0`). The matrix is scaled by a power of two (exact) so that its largest entry is
//! near one, against overflow and underflow of squares. A matrix with a NaN or an infinity
//! gives NaNs in every output and `info = 0`. The work is sequential, so results do not depend
//! on the thread count.

use num_traits::{Float, One, Zero};

use crate::lapack_scalar::{dotc, nrm2, LapackScalar};

/// Sweeps after which a matrix that still rotates is reported as not converged (cyclic Jacobi
/// converges quadratically; a few tens of sweeps is already far beyond what it needs).
pub const MAX_SWEEPS: usize = 60;

/// One Hermitian eigendecomposition ([`syevd`]'s result).
#[derive(Clone, Debug, PartialEq)]
pub struct Eigh<T: LapackScalar> {
    /// The eigenvalues, ascending.
    pub values: Vec<T::Real>,
    /// The `n`-by-`n` eigenvectors, row-major, eigenvector `j` in column `j` (empty unless
    /// vectors were asked for).
    pub vectors: Vec<T>,
    /// LAPACK's `info`: 0, or the number of sweeps run when the iteration did not converge.
    pub info: i32,
}

/// One singular value decomposition ([`gesdd`]'s result).
#[derive(Clone, Debug, PartialEq)]
pub struct Svd<T: LapackScalar> {
    /// The `min(m, n)` singular values, descending.
    pub values: Vec<T::Real>,
    /// `U`, row-major: `m`-by-`m` (full) or `m`-by-`min(m, n)` (empty unless vectors were
    /// asked for).
    pub u: Vec<T>,
    /// `V^H`, row-major: `n`-by-`n` (full) or `min(m, n)`-by-`n` (empty unless vectors were
    /// asked for).
    pub vt: Vec<T>,
    /// LAPACK's `info`: 0, or the number of sweeps run when the iteration did not converge.
    pub info: i32,
}

/// `2^e` in steps that stay within the type's range, applied to `x`.
fn scale2<T: LapackScalar>(x: T, e: i32) -> T {
    let mut x = x;
    let mut e = e;
    while e != 0 {
        let step = e.clamp(-60, 60);
        x = x.scale(
            <T::Real as num_traits::NumCast>::from(2f64.powi(step)).unwrap_or_else(T::Real::one),
        );
        e -= step;
    }
    x
}

/// The exponent `e` with `2^e <= x < 2^(e+1)` for a finite positive `x`.
fn exponent<R: Float>(x: R) -> i32 {
    x.to_f64().map_or(0, |v| v.log2().floor() as i32)
}

/// The largest modulus in `v`, or `None` if an entry is NaN or infinite.
fn max_abs<T: LapackScalar>(v: &[T]) -> Option<T::Real> {
    let mut m = T::Real::zero();
    for &x in v {
        if !x.finite() {
            return None;
        }
        m = m.max(x.modulus());
    }
    Some(m)
}

/// The tangent of Jacobi's rotation angle for the cotangent of twice the angle, `zeta`: the
/// smaller root of `t^2 + 2 zeta t - 1 = 0`.
fn tangent<R: Float>(zeta: R) -> R {
    let one = R::one();
    if zeta.abs() * R::epsilon() > one {
        // `zeta^2` would overflow; the root is `1 / (2 zeta)` to working precision.
        return one / (zeta + zeta);
    }
    let t = one / (zeta.abs() + (one + zeta * zeta).sqrt());
    if zeta < R::zero() {
        -t
    } else {
        t
    }
}

fn nan<T: LapackScalar>() -> T {
    T::from_parts(T::Real::nan(), T::Real::nan())
}

/// The eigendecomposition of the Hermitian `n`-by-`n` row-major matrix whose `lower` (else
/// upper) triangle `a` holds; the other triangle and the diagonal's imaginary parts are not
/// read.
pub fn syevd<T: LapackScalar>(a: &[T], n: usize, lower: bool, vectors: bool) -> Eigh<T> {
    let zero = T::default();
    let mut s = vec![zero; n * n];
    for i in 0..n {
        for j in 0..n {
            s[i * n + j] = if i == j {
                T::real(a[i * n + i].re())
            } else if (i > j) == lower {
                a[i * n + j]
            } else {
                a[j * n + i].conj()
            };
        }
    }
    let identity = |n: usize| {
        let mut v = vec![zero; n * n];
        for i in 0..n {
            v[i * n + i] = T::real(T::Real::one());
        }
        v
    };
    let Some(anrm) = max_abs(&s) else {
        return Eigh {
            values: vec![T::Real::nan(); n],
            vectors: if vectors { vec![nan(); n * n] } else { vec![] },
            info: 0,
        };
    };
    let e = if anrm > T::Real::zero() {
        exponent(anrm)
    } else {
        0
    };
    for x in &mut s {
        *x = scale2(*x, -e);
    }
    let mut v = if vectors { identity(n) } else { vec![] };
    let eps = T::Real::epsilon();
    let one = T::Real::one();
    let mut info = MAX_SWEEPS as i32;
    for _ in 0..MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..n {
            for q in p + 1..n {
                let apq = s[p * n + q];
                let mag = apq.modulus();
                let (app, aqq) = (s[p * n + p].re(), s[q * n + q].re());
                if mag == T::Real::zero() || mag <= eps * app.abs().sqrt() * aqq.abs().sqrt() {
                    continue;
                }
                rotated = true;
                // The phase that makes the pair real: index q is multiplied by conj(ph).
                let ph = apq.phase().conj();
                let t = tangent((aqq - app) / (mag + mag));
                let c = one / (one + t * t).sqrt();
                let sn = t * c;
                let tau = sn / (one + c);
                let h = t * mag;
                s[p * n + p] = T::real(app - h);
                s[q * n + q] = T::real(aqq + h);
                s[p * n + q] = zero;
                s[q * n + p] = zero;
                for r in 0..n {
                    if r == p || r == q {
                        continue;
                    }
                    let (g, k) = (s[r * n + p], s[r * n + q] * ph);
                    let gp = g - (k + g.scale(tau)).scale(sn);
                    let kq = k + (g - k.scale(tau)).scale(sn);
                    s[r * n + p] = gp;
                    s[p * n + r] = gp.conj();
                    s[r * n + q] = kq;
                    s[q * n + r] = kq.conj();
                }
                if vectors {
                    for r in 0..n {
                        let (g, k) = (v[r * n + p], v[r * n + q] * ph);
                        v[r * n + p] = g - (k + g.scale(tau)).scale(sn);
                        v[r * n + q] = k + (g - k.scale(tau)).scale(sn);
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
        let (x, y) = (s[i * n + i].re(), s[j * n + j].re());
        x.partial_cmp(&y).unwrap_or(std::cmp::Ordering::Equal)
    });
    let values = order
        .iter()
        .map(|&i| scale2(s[i * n + i], e).re())
        .collect();
    let vectors = if vectors {
        let mut out = vec![zero; n * n];
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

/// One-sided Jacobi on `k` vectors of length `len >= k` (`g`, vector `j` at `j * len`):
/// returns the singular values (descending), the left vectors `u_j` (normalized `g_j`, a zero
/// vector where the value is zero) and the right vectors `v_j` (length `k`), so that the
/// matrix whose columns are the input vectors is `sum_j s_j u_j v_j^H`, and the `info`.
fn one_sided<T: LapackScalar>(
    mut g: Vec<T>,
    k: usize,
    len: usize,
    vectors: bool,
) -> (Vec<T::Real>, Vec<T>, Vec<T>, i32) {
    let zero = T::default();
    let rzero = T::Real::zero();
    let mut v = vec![zero; if vectors { k * k } else { 0 }];
    if vectors {
        for j in 0..k {
            v[j * k + j] = T::real(T::Real::one());
        }
    }
    let eps = T::Real::epsilon();
    let one = T::Real::one();
    let mut info = MAX_SWEEPS as i32;
    // Multiplies vector q by the unit `ph`, then rotates the pair (p, q) by (c, s).
    let rotate = |x: &mut [T], width: usize, p: usize, q: usize, ph: T, c: T::Real, s: T::Real| {
        for i in 0..width {
            let (a, b) = (x[p * width + i], x[q * width + i] * ph);
            x[p * width + i] = a.scale(c) - b.scale(s);
            x[q * width + i] = a.scale(s) + b.scale(c);
        }
    };
    for _ in 0..MAX_SWEEPS {
        let mut rotated = false;
        for p in 0..k {
            for q in p + 1..k {
                let (gp, gq) = (&g[p * len..(p + 1) * len], &g[q * len..(q + 1) * len]);
                let gamma = dotc(gp, gq);
                let mag = gamma.modulus();
                let (np, nq) = (nrm2(gp), nrm2(gq));
                if mag == rzero || mag <= eps * np * nq {
                    continue;
                }
                rotated = true;
                let ph = gamma.phase().conj();
                let (alpha, beta) = (np * np, nq * nq);
                let t = tangent((beta - alpha) / (mag + mag));
                let c = one / (one + t * t).sqrt();
                let s = c * t;
                rotate(&mut g, len, p, q, ph, c, s);
                if vectors {
                    rotate(&mut v, k, p, q, ph, c, s);
                }
            }
        }
        if !rotated {
            info = 0;
            break;
        }
    }
    let norms: Vec<T::Real> = (0..k).map(|j| nrm2(&g[j * len..(j + 1) * len])).collect();
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
    let noise = norms.iter().fold(rzero, |m, &x| m.max(x))
        * T::Real::epsilon()
        * <T::Real as num_traits::NumCast>::from(len).unwrap_or_else(T::Real::one);
    if vectors {
        for &j in &order {
            let col = &g[j * len..(j + 1) * len];
            if norms[j] > noise && norms[j] > rzero {
                u.extend(col.iter().map(|&x| x.div_real(norms[j])));
            } else {
                u.resize(u.len() + len, zero);
            }
            vv.extend_from_slice(&v[j * k..(j + 1) * k]);
        }
    }
    (values, u, vv, info)
}

/// Completes `u` (`have` vectors of length `len`, some possibly zero) to `want` orthonormal
/// vectors: zero vectors are replaced and new ones appended, each the first unit vector whose
/// part orthogonal to the vectors so far (two Gram-Schmidt passes) is not small.
fn complete<T: LapackScalar>(u: &mut Vec<T>, have: usize, want: usize, len: usize) {
    let zero = T::default();
    u.resize(want * len, zero);
    let half = <T::Real as num_traits::NumCast>::from(0.5).unwrap_or_else(T::Real::one);
    let mut candidate = 0;
    for j in 0..want {
        if j < have && u[j * len..(j + 1) * len].iter().any(|&x| x != zero) {
            continue;
        }
        while candidate < len {
            let mut x = vec![zero; len];
            x[candidate] = T::real(T::Real::one());
            candidate += 1;
            for _ in 0..2 {
                for i in 0..want {
                    if i == j {
                        continue;
                    }
                    let ui = &u[i * len..(i + 1) * len];
                    let d = dotc(ui, &x);
                    for (xe, &ue) in x.iter_mut().zip(ui) {
                        *xe = *xe - d * ue;
                    }
                }
            }
            let nx = nrm2(&x);
            if nx > half {
                for (dst, &xe) in u[j * len..(j + 1) * len].iter_mut().zip(&x) {
                    *dst = xe.div_real(nx);
                }
                break;
            }
        }
    }
}

/// The singular value decomposition of the `m`-by-`n` row-major matrix `a`: `U` and `V^H`
/// if `vectors`, square (`full`) or thin.
pub fn gesdd<T: LapackScalar>(a: &[T], m: usize, n: usize, vectors: bool, full: bool) -> Svd<T> {
    let k = m.min(n);
    let (ur, uc) = if full { (m, m) } else { (m, k) };
    let (vr, vc) = if full { (n, n) } else { (k, n) };
    let Some(anrm) = max_abs(a) else {
        return Svd {
            values: vec![T::Real::nan(); k],
            u: if vectors {
                vec![nan(); ur * uc]
            } else {
                vec![]
            },
            vt: if vectors {
                vec![nan(); vr * vc]
            } else {
                vec![]
            },
            info: 0,
        };
    };
    let e = if anrm > T::Real::zero() {
        exponent(anrm)
    } else {
        0
    };
    // The vectors Jacobi orthogonalizes: the columns of `A` when it is tall, else those of
    // `A^H` (the conjugated rows).
    let tall = m >= n;
    let len = m.max(n);
    let mut g = vec![T::default(); k * len];
    for i in 0..m {
        for j in 0..n {
            let x = scale2(a[i * n + j], -e);
            if tall {
                g[j * len + i] = x;
            } else {
                g[i * len + j] = x.conj();
            }
        }
    }
    let (values, mut left, right, info) = one_sided(g, k, len, vectors);
    let values = values
        .into_iter()
        .map(|x| scale2(T::real(x), e).re())
        .collect();
    if !vectors {
        return Svd {
            values,
            u: vec![],
            vt: vec![],
            info,
        };
    }
    // `left` holds vectors of length `len` (of `U` when tall, of `V` when wide), `right`
    // vectors of length `k` (the other side, never short of a basis). `V^H`'s rows are the
    // conjugated vectors of `V`.
    complete(&mut left, k, if full { len } else { k }, len);
    let mut u = vec![T::default(); ur * uc];
    let mut vt = vec![T::default(); vr * vc];
    if tall {
        for j in 0..uc {
            for i in 0..m {
                u[i * uc + j] = left[j * len + i];
            }
        }
        for (dst, &x) in vt.iter_mut().zip(&right[..vr * vc]) {
            *dst = x.conj();
        }
    } else {
        for j in 0..k {
            for i in 0..m {
                u[i * uc + j] = right[j * k + i];
            }
        }
        for (dst, &x) in vt.iter_mut().zip(&left[..vr * vc]) {
            *dst = x.conj();
        }
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

    /// A complex matrix from two real ones.
    fn cmatrix(m: usize, n: usize, seed: u64) -> Vec<num_complex::Complex<f64>> {
        let (re, im) = (matrix(m, n, seed), matrix(m, n, seed + 100));
        re.iter()
            .zip(&im)
            .map(|(&r, &i)| num_complex::Complex::new(r, i))
            .collect()
    }

    #[test]
    fn hermitian_eigh_reconstructs() {
        type C = num_complex::Complex<f64>;
        for n in [1, 2, 5, 8] {
            let r = cmatrix(n, n, n as u64);
            // A = R + R^H, with garbage in the upper triangle that must not be read.
            let mut a: Vec<C> = (0..n * n)
                .map(|k| r[k] + r[(k % n) * n + k / n].conj())
                .collect();
            for i in 0..n {
                for j in i + 1..n {
                    a[i * n + j] = C::new(f64::NAN, 7.0);
                }
            }
            let e = syevd(&a, n, true, true);
            assert_eq!(e.info, 0);
            assert!(e.values.windows(2).all(|w| w[0] <= w[1]));
            let v = &e.vectors;
            for i in 0..n {
                for j in 0..=i {
                    let rec: C = (0..n)
                        .map(|k| v[i * n + k] * e.values[k] * v[j * n + k].conj())
                        .sum();
                    let want = if i == j {
                        C::new(a[i * n + i].re, 0.0)
                    } else {
                        a[i * n + j]
                    };
                    assert!((rec - want).norm() < 1e-13, "n={n} ({i},{j})");
                    let vhv: C = (0..n).map(|k| v[k * n + i].conj() * v[k * n + j]).sum();
                    assert!((vhv - C::new(f64::from(i == j), 0.0)).norm() < 1e-13);
                }
            }
        }
    }

    #[test]
    fn complex_svd_reconstructs_thin_and_full() {
        type C = num_complex::Complex<f64>;
        for (m, n) in [(1, 1), (4, 3), (3, 5), (5, 5)] {
            let a = cmatrix(m, n, (m * 10 + n) as u64);
            for full in [false, true] {
                let s = gesdd(&a, m, n, true, full);
                assert_eq!(s.info, 0);
                assert!(s.values.windows(2).all(|w| w[0] >= w[1]));
                let k = m.min(n);
                let (uc, vr) = if full { (m, n) } else { (k, k) };
                for i in 0..m {
                    for j in 0..n {
                        let rec: C = (0..k)
                            .map(|l| s.u[i * uc + l] * s.values[l] * s.vt[l * n + j])
                            .sum();
                        assert!((rec - a[i * n + j]).norm() < 1e-13, "{m}x{n} full={full}");
                    }
                }
                for i in 0..uc {
                    for j in 0..uc {
                        let d: C = (0..m)
                            .map(|r| s.u[r * uc + i].conj() * s.u[r * uc + j])
                            .sum();
                        assert!((d - C::new(f64::from(i == j), 0.0)).norm() < 1e-13);
                    }
                }
                for i in 0..vr {
                    for j in 0..vr {
                        let d: C = (0..n)
                            .map(|c| s.vt[i * n + c] * s.vt[j * n + c].conj())
                            .sum();
                        assert!((d - C::new(f64::from(i == j), 0.0)).norm() < 1e-13);
                    }
                }
            }
        }
    }
}
