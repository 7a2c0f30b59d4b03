//! The general (nonsymmetric) eigenproblem: eigenvalues and left and right eigenvectors of one
//! row-major `n`-by-`n` matrix, the implementation that the reference evaluator and the `cpu`
//! backend's runtime both call for JAX's `lapack_?geev_ffi` ([`geev`]), for real and complex
//! types in the operand's precision ([`LapackScalar`]).
//!
//! Invariants: the eigenvalues are those of [`crate::schur::gees`]'s Schur form `A = Z T Z^H`
//! in the order of its diagonal (a real type's conjugate pairs adjacent, the one with the
//! positive imaginary part first). The eigenvectors are `?trevc`'s: right eigenvector `k`
//! solves `(T - w_k I) x = 0` by back substitution from `x_k = 1` (left ones,
//! `u (T - w_k I) = 0`, by forward substitution), a pivot smaller than
//! `smin = max(ulp |w_k|, smlnum)` taken as `smin` (so defective matrices give finite,
//! nearly parallel vectors, as LAPACK's do), a 2-by-2 block of a real `T` solved as one
//! complex 2-by-2 system; then transformed by `Z` (`A v = w v`, `u^H A = w u^H`) and
//! normalized as `?geev` does: unit 2-norm, and, for a complex eigenvalue or a complex type, the
//! component of largest modulus made real and positive. For a real type a real eigenvalue's
//! vector is real, and the second of a conjugate pair has the conjugate of the first's vector.
//! Vectors come out complex for every type (JAX's kernel unpacks LAPACK's real storage of
//! conjugate pairs into complex columns). The matrix is not balanced. As JAX's kernel, a
//! matrix with a non-finite entry is not decomposed: `info = -4` and every result is NaN; a
//! QR iteration that does not converge gives `gees`'s positive `info` and NaN vectors.

use num_complex::Complex;
use num_traits::{Float, Zero};

use crate::lapack_scalar::LapackScalar;
use crate::schur::{gees, lit};

/// The eigendecomposition of one `n`-by-`n` matrix; vectors are the columns of row-major
/// `n`-by-`n` matrices.
#[derive(Clone, Debug)]
pub struct Eig<R> {
    /// The eigenvalues.
    pub w: Vec<Complex<R>>,
    /// The left eigenvectors (`u^H A = w u^H`), or zeros when not asked for.
    pub vl: Vec<Complex<R>>,
    /// The right eigenvectors (`A v = w v`), or zeros when not asked for.
    pub vr: Vec<Complex<R>>,
    /// 0; `-4` for a matrix with a non-finite entry; else the QR iteration's failure row.
    pub info: i32,
}

/// The eigendecompositions of a batch of `n`-by-`n` matrices, each field the batch's [`Eig`]
/// fields one after another.
#[derive(Clone, Debug)]
pub struct EigBatch<R> {
    /// The eigenvalues, `n` per matrix.
    pub w: Vec<Complex<R>>,
    /// The left eigenvectors (zeros where not asked for).
    pub vl: Vec<Complex<R>>,
    /// The right eigenvectors (zeros where not asked for).
    pub vr: Vec<Complex<R>>,
    /// The `info` per matrix.
    pub info: Vec<i32>,
}

/// [`geev`] of each of the `batch` row-major `n`-by-`n` matrices at the start of `a`.
pub fn geev_batch<T: LapackScalar>(
    a: &[T],
    batch: usize,
    n: usize,
    left: bool,
    right: bool,
) -> EigBatch<T::Real> {
    let mut out = EigBatch {
        w: Vec::new(),
        vl: Vec::new(),
        vr: Vec::new(),
        info: Vec::new(),
    };
    for b in 0..batch {
        let e = geev(&a[b * n * n..(b + 1) * n * n], n, left, right);
        out.w.extend(e.w);
        out.vl.extend(e.vl);
        out.vr.extend(e.vr);
        out.info.push(e.info);
    }
    out
}

fn abs1<R: Float>(z: Complex<R>) -> R {
    z.re.abs() + z.im.abs()
}

/// `?geev`: the eigenvalues of the row-major `n`-by-`n` `a`, with its `left` and `right`
/// eigenvectors when asked for.
pub fn geev<T: LapackScalar>(a: &[T], n: usize, left: bool, right: bool) -> Eig<T::Real> {
    let a = &a[..n * n];
    let zero = Complex::new(T::Real::zero(), T::Real::zero());
    let nan = Complex::new(T::Real::nan(), T::Real::nan());
    if !a.iter().all(|x| x.finite()) {
        return Eig {
            w: vec![nan; n],
            vl: vec![nan; n * n],
            vr: vec![nan; n * n],
            info: -4,
        };
    }
    let s = gees(a, n, left || right);
    let mut e = Eig {
        w: s.w,
        vl: vec![zero; n * n],
        vr: vec![zero; n * n],
        info: s.info,
    };
    if s.info != 0 {
        for (v, want) in [(&mut e.vl, left), (&mut e.vr, right)] {
            if want {
                v.iter_mut().for_each(|x| *x = nan);
            }
        }
        return e;
    }
    let c = |x: &T| Complex::new(x.re(), x.im());
    let t: Vec<Complex<T::Real>> = s.t.iter().map(c).collect();
    let z: Vec<Complex<T::Real>> = s.z.iter().map(c).collect();
    let blocks = !T::COMPLEX;
    if right {
        e.vr = vectors(&t, &z, n, &e.w, blocks, false);
    }
    if left {
        e.vl = vectors(&t, &z, n, &e.w, blocks, true);
    }
    e
}

/// Solves the complex 2-by-2 system `m x = r` by elimination with complete pivoting, a pivot
/// below `smin` taken as `smin` (`?laln2`'s perturbation).
fn solve2<R: Float>(m: [[Complex<R>; 2]; 2], r: [Complex<R>; 2], smin: R) -> [Complex<R>; 2] {
    let small = Complex::new(smin, R::zero());
    let (mut p, mut q) = (0, 0);
    for i in 0..2 {
        for j in 0..2 {
            if abs1(m[i][j]) > abs1(m[p][q]) {
                p = i;
                q = j;
            }
        }
    }
    if abs1(m[p][q]) < smin {
        return [r[0].fdiv(small), r[1].fdiv(small)];
    }
    let (po, qo) = (1 - p, 1 - q);
    let l = m[po][q].fdiv(m[p][q]);
    let mut u22 = m[po][qo] - l * m[p][qo];
    if abs1(u22) < smin {
        u22 = small;
    }
    let mut x = [Complex::new(R::zero(), R::zero()); 2];
    x[qo] = (r[po] - l * r[p]).fdiv(u22);
    x[q] = (r[p] - m[p][qo] * x[qo]).fdiv(m[p][q]);
    x
}

/// The right (else left) eigenvectors of `A = Z T Z^H`, normalized, as the columns of a
/// row-major matrix; `blocks`: `T` is a real type's quasi-triangular form.
fn vectors<R: Float>(
    t: &[Complex<R>],
    z: &[Complex<R>],
    n: usize,
    w: &[Complex<R>],
    blocks: bool,
    left: bool,
) -> Vec<Complex<R>> {
    let at = |r: usize, c: usize| r * n + c;
    let zero = Complex::new(R::zero(), R::zero());
    let one = Complex::new(R::one(), R::zero());
    let ulp = R::epsilon();
    let smlnum = R::min_positive_value() * (lit::<R>(n as f64) / ulp);
    // Rescale a growing solution before its sums can overflow.
    let big = R::max_value().sqrt() / lit::<R>((n + 1) as f64);
    // Whether rows and columns `j` and `j + 1` of T are a 2-by-2 block.
    let block = |j: usize| blocks && j + 1 < n && t[at(j + 1, j)] != zero;
    let mut out = vec![zero; n * n];
    let mut k = 0;
    while k < n {
        let lam = w[k];
        let smin = (ulp * abs1(lam)).max(smlnum);
        let pivot = |d: Complex<R>| {
            if abs1(d) < smin {
                Complex::new(smin, R::zero())
            } else {
                d
            }
        };
        let pair = block(k);
        let mut x = vec![zero; n];
        let rescale = |x: &mut [Complex<R>]| {
            let m = x.iter().fold(R::zero(), |m, v| m.max(abs1(*v)));
            if m > big {
                x.iter_mut().for_each(|v| *v = v.unscale(m));
            }
        };
        if !left {
            let top = if pair {
                let (a, b, c, d) = (
                    t[at(k, k)],
                    t[at(k, k + 1)],
                    t[at(k + 1, k)],
                    t[at(k + 1, k + 1)],
                );
                if abs1(b) >= abs1(c) {
                    x[k] = b;
                    x[k + 1] = lam - a;
                } else {
                    x[k] = lam - d;
                    x[k + 1] = c;
                }
                k + 1
            } else {
                x[k] = one;
                k
            };
            let rhs = |x: &[Complex<R>], row: usize, from: usize| {
                -(from..=top).fold(zero, |s, l| s + t[at(row, l)] * x[l])
            };
            let mut j = k;
            while j > 0 {
                if j >= 2 && block(j - 2) {
                    // Rows j-2 and j-1 are a 2-by-2 block.
                    let (r0, r1) = (j - 2, j - 1);
                    let m = [
                        [t[at(r0, r0)] - lam, t[at(r0, r1)]],
                        [t[at(r1, r0)], t[at(r1, r1)] - lam],
                    ];
                    let r = [rhs(&x, r0, j), rhs(&x, r1, j)];
                    let s = solve2(m, r, smin);
                    x[r0] = s[0];
                    x[r1] = s[1];
                    j -= 2;
                } else {
                    let r = rhs(&x, j - 1, j);
                    x[j - 1] = r.fdiv(pivot(t[at(j - 1, j - 1)] - lam));
                    j -= 1;
                }
                rescale(&mut x[..=top]);
            }
            let mut v: Vec<Complex<R>> = (0..n)
                .map(|r| (0..=top).fold(zero, |s, l| s + z[at(r, l)] * x[l]))
                .collect();
            normalize(&mut v, !blocks || lam.im != R::zero());
            store(&mut out, n, k, &v, pair);
        } else {
            let bottom = if pair {
                let (a, b, c, d) = (
                    t[at(k, k)],
                    t[at(k, k + 1)],
                    t[at(k + 1, k)],
                    t[at(k + 1, k + 1)],
                );
                if abs1(c) >= abs1(b) {
                    x[k] = c;
                    x[k + 1] = lam - a;
                } else {
                    x[k] = lam - d;
                    x[k + 1] = b;
                }
                k + 2
            } else {
                x[k] = one;
                k + 1
            };
            // x is the row vector u with u (T - w I) = 0.
            let rhs = |x: &[Complex<R>], col: usize, to: usize| {
                -(k..to).fold(zero, |s, l| s + x[l] * t[at(l, col)])
            };
            let mut j = bottom;
            while j < n {
                if block(j) {
                    let (c0, c1) = (j, j + 1);
                    // u M = r as M^T u^T = r^T.
                    let m = [
                        [t[at(c0, c0)] - lam, t[at(c1, c0)]],
                        [t[at(c0, c1)], t[at(c1, c1)] - lam],
                    ];
                    let r = [rhs(&x, c0, j), rhs(&x, c1, j)];
                    let s = solve2(m, r, smin);
                    x[c0] = s[0];
                    x[c1] = s[1];
                    j += 2;
                } else {
                    let r = rhs(&x, j, j);
                    x[j] = r.fdiv(pivot(t[at(j, j)] - lam));
                    j += 1;
                }
                rescale(&mut x[k..j]);
            }
            // The left eigenvector is Z conj(u).
            let mut v: Vec<Complex<R>> = (0..n)
                .map(|r| (k..n).fold(zero, |s, l| s + z[at(r, l)] * x[l].conj()))
                .collect();
            normalize(&mut v, !blocks || lam.im != R::zero());
            store(&mut out, n, k, &v, pair);
        }
        k += if pair { 2 } else { 1 };
    }
    out
}

/// Writes `v` into column `k` of the row-major `out` (and its conjugate into column `k + 1`
/// for a conjugate pair).
fn store<R: Float>(out: &mut [Complex<R>], n: usize, k: usize, v: &[Complex<R>], pair: bool) {
    for (r, &x) in v.iter().enumerate() {
        out[r * n + k] = x;
        if pair {
            out[r * n + k + 1] = x.conj();
        }
    }
}

/// `?geev`'s normalization: unit 2-norm, then (`rotate`) the first component of largest
/// modulus made real and positive.
fn normalize<R: Float>(v: &mut [Complex<R>], rotate: bool) {
    let m = v
        .iter()
        .fold(R::zero(), |m, x| m.max(x.re.abs()).max(x.im.abs()));
    if m == R::zero() || !m.is_finite() {
        return;
    }
    let ss = v.iter().fold(R::zero(), |s, x| {
        let (a, b) = (x.re / m, x.im / m);
        s + a * a + b * b
    });
    let nrm = m * ss.sqrt();
    v.iter_mut().for_each(|x| *x = x.unscale(nrm));
    if rotate {
        let mut p = 0;
        for (i, x) in v.iter().enumerate() {
            if x.norm_sqr() > v[p].norm_sqr() {
                p = i;
            }
        }
        let r = v[p].norm();
        if r > R::zero() {
            let ph = v[p].conj().unscale(r);
            v.iter_mut().for_each(|x| *x = *x * ph);
            v[p] = Complex::new(r, R::zero());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(k: usize) -> f64 {
        ((k as f64 * 12.9898).sin() * 43758.5453).fract()
    }

    type C = Complex<f64>;

    /// `max |A v_k - w_k v_k|` and `max |u_k^H A - w_k u_k^H|` over the columns, and the
    /// largest deviation of a column's norm from 1.
    fn residuals<T: LapackScalar<Real = f64>>(a: &[T], e: &Eig<f64>, n: usize) -> (f64, f64, f64) {
        let c = |x: T| C::new(x.re(), x.im());
        let (mut right, mut left, mut norm) = (0.0f64, 0.0f64, 0.0f64);
        for k in 0..n {
            for i in 0..n {
                let mut av = C::default();
                let mut ua = C::default();
                for j in 0..n {
                    av += c(a[i * n + j]) * e.vr[j * n + k];
                    ua += e.vl[j * n + k].conj() * c(a[j * n + i]);
                }
                right = right.max((av - e.w[k] * e.vr[i * n + k]).norm());
                left = left.max((ua - e.w[k] * e.vl[i * n + k].conj()).norm());
            }
            for v in [&e.vr, &e.vl] {
                let s: f64 = (0..n).map(|i| v[i * n + k].norm_sqr()).sum();
                norm = norm.max((s.sqrt() - 1.0).abs());
            }
        }
        (right, left, norm)
    }

    #[test]
    fn real_and_complex_eigenvectors_satisfy_their_equations() {
        let mut pairs = 0;
        for n in [1usize, 2, 3, 6, 11] {
            let a: Vec<f64> = (0..n * n).map(|k| noise(k + 7 * n)).collect();
            let e = geev(&a, n, true, true);
            assert_eq!(e.info, 0);
            let (r, l, nrm) = residuals(&a, &e, n);
            assert!(
                r < 1e-12 && l < 1e-12 && nrm < 1e-13,
                "n = {n}: {r} {l} {nrm}"
            );
            for k in 0..n {
                let col = |v: &[C], k: usize| (0..n).map(|i| v[i * n + k]).collect::<Vec<_>>();
                if e.w[k].im == 0.0 {
                    assert!(col(&e.vr, k).iter().all(|x| x.im == 0.0));
                } else if e.w[k].im > 0.0 {
                    assert_eq!(e.w[k + 1], e.w[k].conj());
                    let (v, u) = (col(&e.vr, k), col(&e.vr, k + 1));
                    assert!(v.iter().zip(&u).all(|(x, y)| *y == x.conj()));
                    pairs += 1;
                }
            }
            let ac: Vec<C> = (0..n * n)
                .map(|k| C::new(noise(3 * k), noise(3 * k + 1)))
                .collect();
            let e = geev(&ac, n, true, true);
            assert_eq!(e.info, 0);
            let (r, l, nrm) = residuals(&ac, &e, n);
            assert!(
                r < 1e-12 && l < 1e-12 && nrm < 1e-13,
                "n = {n}: {r} {l} {nrm}"
            );
            // The largest component of every vector is real and positive.
            for k in 0..n {
                let big = (0..n).map(|i| e.vr[i * n + k]).fold(C::default(), |b, x| {
                    if x.norm_sqr() > b.norm_sqr() {
                        x
                    } else {
                        b
                    }
                });
                assert!(big.im == 0.0 && big.re > 0.0);
            }
        }
        assert!(pairs > 0, "no complex pair was tested");
    }

    #[test]
    fn defective_and_non_finite_matrices() {
        // A Jordan block: one eigenvalue, every eigenvector close to e_0.
        let j = [2.0f64, 1.0, 0.0, 0.0, 2.0, 1.0, 0.0, 0.0, 2.0];
        let e = geev(&j, 3, true, true);
        assert_eq!(e.info, 0);
        let (r, l, nrm) = residuals(&j, &e, 3);
        assert!(r < 1e-10 && l < 1e-10 && nrm < 1e-13, "{r} {l} {nrm}");
        for k in 0..3 {
            assert!(e.vr[k].norm() > 1.0 - 1e-9 && e.vl[6 + k].norm() > 1.0 - 1e-9);
        }
        let mut a = [1.0f32; 4];
        a[3] = f32::INFINITY;
        let e = geev(&a, 2, false, true);
        assert_eq!(e.info, -4);
        assert!(e
            .w
            .iter()
            .chain(&e.vr)
            .all(|x| x.re.is_nan() && x.im.is_nan()));
        let e = geev::<f64>(&[], 0, true, true);
        assert!(e.info == 0 && e.w.is_empty());
    }
}
