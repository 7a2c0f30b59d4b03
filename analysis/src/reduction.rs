//! Householder reductions of a square matrix to condensed form with LAPACK's unblocked
//! algorithms and storage, on one row-major `n`-by-`n` matrix (`A(i, j)` is element
//! `i * n + j`): the implementation that the reference evaluator and the `cpu` backend's
//! runtime both call for JAX's `lapack_?sytrd_ffi` / `lapack_?hetrd_ffi` ([`hetrd`]) and
//! `lapack_?gehrd_ffi` ([`gehrd`]), for real and complex types in the operand's precision
//! ([`LapackScalar`]).
//!
//! Invariants, as `?hetd2` and `?gehd2` (whose blocked forms `?hetrd` and `?gehrd` compute the
//! same reflectors up to rounding): every reflector is `?larfg`'s (`H = I - tau v v^H`,
//! `v` with a unit entry that is not stored, `beta` real), so the reduced matrix's
//! off-diagonal `e` is real.
//! - `hetrd` reads and writes only the `lower` (else upper) triangle and leaves the other as it
//!   was. With `lower`, `Q = H(0) ... H(n-2)`, `v(i+1) = 1` and `v(i+2..n)` stored in column
//!   `i` below the subdiagonal; else `Q = H(n-2) ... H(0)`, `v(i) = 1` and `v(0..i)` stored in
//!   column `i + 1` above the superdiagonal. `Q^H A Q` is the real symmetric tridiagonal
//!   matrix with diagonal `d` and off-diagonal `e`, which overwrite the diagonal and the
//!   first sub- (super-) diagonal; the diagonal of a complex matrix is taken as real.
//! - `gehrd` reduces rows and columns `ilo - 1..ihi` (LAPACK's 1-based `ilo`, `ihi`; the rest
//!   must already be triangular for `Q^H A Q` to be similar to `A`): `Q = H(ilo-1) ... H(ihi-2)`,
//!   `v(i+1) = 1` and `v(i+2..ihi)` stored in column `i` below the subdiagonal, the upper
//!   Hessenberg `Q^H A Q` on and above it; `tau` is zero outside `ilo - 1..ihi - 1`.

use num_traits::One;

use crate::householder::{larfg_vec, reflect_left, reflect_right};
use crate::lapack_scalar::{dotc, LapackScalar};

/// The element `(r, c)` of the Hermitian matrix whose `lower` (else upper) triangle `a`
/// holds; its diagonal is taken as real.
fn hermitian<T: LapackScalar>(a: &[T], n: usize, lower: bool, r: usize, c: usize) -> T {
    if r == c {
        T::real(a[r * n + r].re())
    } else if (r > c) == lower {
        a[r * n + c]
    } else {
        a[c * n + r].conj()
    }
}

/// The rank-two update `A := A - v w^H - w v^H` of the Hermitian block `A(r0.., r0..)` of
/// `v.len()` rows, in its stored triangle only (`?her2`; the diagonal stays real).
fn her2<T: LapackScalar>(a: &mut [T], n: usize, lower: bool, r0: usize, v: &[T], w: &[T]) {
    let len = v.len();
    for r in 0..len {
        let cols = if lower { 0..r + 1 } else { r..len };
        for c in cols {
            let x = &mut a[(r0 + r) * n + r0 + c];
            let y = *x - v[r] * w[c].conj() - w[r] * v[c].conj();
            *x = if r == c { T::real(y.re()) } else { y };
        }
    }
}

/// Applies the reflector `(v, tau)` from both sides to the Hermitian block `A(r0.., r0..)`:
/// `A := H^H A H` through `?hetd2`'s `y = tau A v`, `w = y - tau/2 (y^H v) v`.
fn two_sided<T: LapackScalar>(a: &mut [T], n: usize, lower: bool, r0: usize, v: &[T], tau: T) {
    let len = v.len();
    let y: Vec<T> = (0..len)
        .map(|r| {
            let s = (0..len).fold(T::default(), |s, c| {
                s + hermitian(a, n, lower, r0 + r, r0 + c) * v[c]
            });
            tau * s
        })
        .collect();
    let half = T::Real::one() / (T::Real::one() + T::Real::one());
    let alpha = -(tau.scale(half) * dotc(&y, v));
    let w: Vec<T> = y.iter().zip(v).map(|(&yr, &vr)| yr + alpha * vr).collect();
    her2(a, n, lower, r0, v, &w);
}

/// `?hetrd` / `?sytrd` (`?hetd2`) on the `n`-by-`n` row-major `a`: fills `d` (`n`), `e` and
/// `tau` (`n - 1` each) and leaves the reflectors in `a` as the module header says.
pub fn hetrd<T: LapackScalar>(
    a: &mut [T],
    n: usize,
    lower: bool,
    d: &mut [T::Real],
    e: &mut [T::Real],
    tau: &mut [T],
) {
    if n == 0 {
        return;
    }
    let at = |r: usize, c: usize| r * n + c;
    if lower {
        a[0] = T::real(a[0].re());
        for i in 0..n - 1 {
            // The reflector of column i, rows i+1..n.
            let mut alpha = a[at(i + 1, i)];
            let mut x: Vec<T> = (i + 2..n).map(|r| a[at(r, i)]).collect();
            let t = larfg_vec(&mut alpha, &mut x);
            for (r, &v) in (i + 2..n).zip(&x) {
                a[at(r, i)] = v;
            }
            e[i] = alpha.re();
            if t != T::default() {
                let mut v = vec![T::real(T::Real::one())];
                v.extend_from_slice(&x);
                two_sided(a, n, true, i + 1, &v, t);
            } else {
                a[at(i + 1, i + 1)] = T::real(a[at(i + 1, i + 1)].re());
            }
            a[at(i + 1, i)] = T::real(e[i]);
            d[i] = a[at(i, i)].re();
            tau[i] = t;
        }
        d[n - 1] = a[at(n - 1, n - 1)].re();
    } else {
        a[at(n - 1, n - 1)] = T::real(a[at(n - 1, n - 1)].re());
        for i in (0..n - 1).rev() {
            // The reflector of column i+1, rows 0..=i (its unit entry last).
            let mut alpha = a[at(i, i + 1)];
            let mut x: Vec<T> = (0..i).map(|r| a[at(r, i + 1)]).collect();
            let t = larfg_vec(&mut alpha, &mut x);
            for (r, &v) in x.iter().enumerate() {
                a[at(r, i + 1)] = v;
            }
            e[i] = alpha.re();
            if t != T::default() {
                let mut v = x;
                v.push(T::real(T::Real::one()));
                two_sided(a, n, false, 0, &v, t);
            } else {
                a[at(i, i)] = T::real(a[at(i, i)].re());
            }
            a[at(i, i + 1)] = T::real(e[i]);
            d[i + 1] = a[at(i + 1, i + 1)].re();
            tau[i] = t;
        }
        d[0] = a[0].re();
    }
}

/// `?gehrd` (`?gehd2`) on the `n`-by-`n` row-major `a` with LAPACK's 1-based
/// `1 <= ilo <= ihi <= n` (`ilo = 1`, `ihi = 0` for `n = 0`): fills `tau` (`n - 1`) and
/// leaves the Hessenberg matrix and the reflectors in `a` as the module header says.
pub fn gehrd<T: LapackScalar>(a: &mut [T], n: usize, ilo: usize, ihi: usize, tau: &mut [T]) {
    tau.iter_mut().for_each(|t| *t = T::default());
    let at = |r: usize, c: usize| r * n + c;
    for i in ilo.saturating_sub(1)..ihi.saturating_sub(1) {
        // The reflector of column i, rows i+1..ihi.
        let mut alpha = a[at(i + 1, i)];
        let mut x: Vec<T> = (i + 2..ihi).map(|r| a[at(r, i)]).collect();
        let t = larfg_vec(&mut alpha, &mut x);
        let mut v = vec![T::real(T::Real::one())];
        v.extend_from_slice(&x);
        reflect_right(a, n, &v, t, 0..ihi, i + 1);
        reflect_left(a, n, &v, t.conj(), i + 1, i + 1..n);
        a[at(i + 1, i)] = alpha;
        for (r, &xv) in (i + 2..ihi).zip(&x) {
            a[at(r, i)] = xv;
        }
        tau[i] = t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex;

    fn noise(k: usize) -> f64 {
        ((k as f64 * 12.9898).sin() * 43758.5453).fract()
    }

    type C = Complex<f64>;

    /// `Q` from the reflectors `(v_i, tau_i)`, each `v_i` a full column of length `n`,
    /// multiplied in the given order.
    fn q_of(n: usize, refl: &[(Vec<C>, C)]) -> Vec<C> {
        let mut q: Vec<C> = (0..n * n)
            .map(|k| C::new(f64::from(k / n == k % n), 0.0))
            .collect();
        for (v, t) in refl {
            // Q := Q H
            reflect_right(&mut q, n, v, *t, 0..n, 0);
        }
        q
    }

    fn qhaq(a: &[C], q: &[C], n: usize) -> Vec<C> {
        let mut out = vec![C::default(); n * n];
        for i in 0..n {
            for j in 0..n {
                let mut s = C::default();
                for r in 0..n {
                    for c in 0..n {
                        s += q[r * n + i].conj() * a[r * n + c] * q[c * n + j];
                    }
                }
                out[i * n + j] = s;
            }
        }
        out
    }

    /// `Q^H A Q` is the tridiagonal matrix of `d` and `e` for both triangles.
    #[test]
    fn hermitian_matrices_reduce_to_tridiagonal() {
        let n = 5;
        let mut h = vec![C::default(); n * n];
        for i in 0..n {
            for j in 0..=i {
                let x = C::new(noise(2 * (i * n + j)), noise(2 * (i * n + j) + 1));
                h[i * n + j] = if i == j { C::new(x.re, 0.0) } else { x };
                h[j * n + i] = h[i * n + j].conj();
            }
        }
        for lower in [true, false] {
            let mut a = h.clone();
            let (mut d, mut e, mut tau) =
                (vec![0.0; n], vec![0.0; n - 1], vec![C::default(); n - 1]);
            hetrd(&mut a, n, lower, &mut d, &mut e, &mut tau);
            let refl: Vec<(Vec<C>, C)> = (0..n - 1)
                .map(|i| {
                    let mut v = vec![C::default(); n];
                    if lower {
                        v[i + 1] = C::new(1.0, 0.0);
                        for r in i + 2..n {
                            v[r] = a[r * n + i];
                        }
                    } else {
                        v[i] = C::new(1.0, 0.0);
                        for r in 0..i {
                            v[r] = a[r * n + i + 1];
                        }
                    }
                    (v, tau[i])
                })
                .collect();
            let refl: Vec<_> = if lower {
                refl
            } else {
                refl.into_iter().rev().collect()
            };
            let t = qhaq(&h, &q_of(n, &refl), n);
            for i in 0..n {
                for j in 0..n {
                    let want = if i == j {
                        d[i]
                    } else if i == j + 1 {
                        e[j]
                    } else if j == i + 1 {
                        e[i]
                    } else {
                        0.0
                    };
                    assert!(
                        (t[i * n + j] - C::new(want, 0.0)).norm() < 1e-13,
                        "{lower} ({i},{j})"
                    );
                }
                assert_eq!(a[i * n + i], C::new(d[i], 0.0));
            }
        }
    }

    /// `Q^H A Q` is the upper Hessenberg part of the result.
    #[test]
    fn general_matrices_reduce_to_hessenberg() {
        let n = 5;
        let g: Vec<C> = (0..n * n)
            .map(|k| C::new(noise(3 * k), noise(3 * k + 1)))
            .collect();
        let mut a = g.clone();
        let mut tau = vec![C::default(); n - 1];
        gehrd(&mut a, n, 1, n, &mut tau);
        let refl: Vec<(Vec<C>, C)> = (0..n - 1)
            .map(|i| {
                let mut v = vec![C::default(); n];
                v[i + 1] = C::new(1.0, 0.0);
                for r in i + 2..n {
                    v[r] = a[r * n + i];
                }
                (v, tau[i])
            })
            .collect();
        let t = qhaq(&g, &q_of(n, &refl), n);
        for i in 0..n {
            for j in 0..n {
                let want = if i <= j + 1 {
                    a[i * n + j]
                } else {
                    C::default()
                };
                assert!((t[i * n + j] - want).norm() < 1e-13, "({i},{j})");
            }
        }
    }
}
