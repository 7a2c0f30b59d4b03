//! Householder QR with LAPACK's unblocked algorithms and conventions, on one row-major matrix
//! (`A(i, j)` is element `i * n + j`): the implementation that the reference evaluator and the
//! `cpu` backend's runtime both call for JAX's `lapack_?geqrf_ffi` ([`geqrf`]),
//! `lapack_?geqp3_ffi` (with column pivoting, [`geqp3`]),
//! `lapack_?orgqr_ffi` / `lapack_?ungqr_ffi` ([`ungqr`]) and `lapack_?ormqr_ffi` /
//! `lapack_?unmqr_ffi` ([`unmqr`]), for real and complex types in the operand's precision
//! ([`LapackScalar`]); its reflector steps (`?larfg`, and `?larf` from either side) also
//! build [`crate::reduction`]'s.
//!
//! Invariants: reflectors follow `?larfg` (`H = I - tau v v^H`, `v(0) = 1` implied, `beta`
//! real with the sign opposite to `re(alpha)`, so `R`'s diagonal is real; `tau = 0` where the
//! column below the diagonal is already zero and `alpha` is real; LAPACK's rescaling when
//! `|beta|` is below the safe minimum); `geqrf` applies `H^H` (`?geqr2`) and `ungqr` forms
//! `Q = H(0) ... H(k-1)` (`?ung2r`, `?org2r`), so `A = Q R` with `Q` unitary; `unmqr` applies
//! the same `Q` (or `Q^H`) one reflector at a time without forming it (`?unm2r`). For real types
//! every complex-only step is an exact identity, so results are those of `?geqr2`/`?org2r`.
//!
//! XLA's own QR custom calls (`Qr`: `(a, taus)` of a batch of matrices;
//! `ProductOfElementaryHouseholderReflectors`: `Q` from them) are the same two routines under
//! other names ([`xla_qr_target`]).

use num_traits::{Float, One, Zero};

use crate::lapack_scalar::{nrm2, LapackScalar};

/// The LAPACK custom-call target (`lapack_?geqrf_ffi`, `lapack_?orgqr_ffi`,
/// `lapack_?ungqr_ffi`) that computes XLA's custom call `target` on operands of element type
/// `ty`: `Qr` is `?geqrf` (the matrix overwritten by `R` and the reflectors, then the `tau`s)
/// and `ProductOfElementaryHouseholderReflectors` is `?orgqr` / `?ungqr`, with the same
/// conventions (XLA's Householder reflectors are LAPACK's). `None` for any other target or
/// type.
pub fn xla_qr_target(target: &str, ty: axle_ir::ElementType) -> Option<String> {
    use axle_ir::ElementType::{C128, C64, F32, F64};
    let p = match ty {
        F32 => "s",
        F64 => "d",
        C64 => "c",
        C128 => "z",
        _ => return None,
    };
    let routine = match target {
        "Qr" => "geqrf",
        "ProductOfElementaryHouseholderReflectors" if ty.is_complex() => "ungqr",
        "ProductOfElementaryHouseholderReflectors" => "orgqr",
        _ => return None,
    };
    Some(format!("lapack_{p}{routine}_ffi"))
}

/// `sqrt(x^2 + y^2 + z^2)` without overflow (`?lapy3`).
fn lapy3<R: Float>(x: R, y: R, z: R) -> R {
    let (x, y, z) = (x.abs(), y.abs(), z.abs());
    let w = x.max(y).max(z);
    if w == R::zero() {
        return x + y + z;
    }
    w * ((x / w) * (x / w) + (y / w) * (y / w) + (z / w) * (z / w)).sqrt()
}

/// Column `col` of rows `r0..m`.
fn column<T: LapackScalar>(a: &[T], n: usize, col: usize, r0: usize, m: usize) -> Vec<T> {
    (r0..m).map(|r| a[r * n + col]).collect()
}

/// `?larfg` on `alpha = A(i, i)` and `x = A(i+1..m, i)`: overwrites them with `beta` and the
/// reflector's tail `v(1..)`, returns `tau`.
fn larfg<T: LapackScalar>(a: &mut [T], n: usize, i: usize, m: usize) -> T {
    if m <= i {
        return T::default();
    }
    let mut x = column(a, n, i, i + 1, m);
    let tau = larfg_vec(&mut a[i * n + i], &mut x);
    for (r, v) in (i + 1..m).zip(x) {
        a[r * n + i] = v;
    }
    tau
}

/// `?larfg` on the vector `(alpha, x)`: returns `tau` and overwrites `alpha` with `beta` (real)
/// and `x` with the reflector's tail `v(1..)`, so that `H^H (alpha, x) = (beta, 0)` for
/// `H = I - tau v v^H`, `v(0) = 1`.
pub(crate) fn larfg_vec<T: LapackScalar>(alpha: &mut T, x: &mut [T]) -> T {
    let zero = T::Real::zero();
    let mut xnorm = nrm2(x);
    let (mut alphr, mut alphi) = (alpha.re(), alpha.im());
    if xnorm == zero && alphi == zero {
        return T::default();
    }
    let norm = |re: T::Real, im: T::Real, xn: T::Real| {
        if T::COMPLEX {
            lapy3(re, im, xn)
        } else {
            re.hypot(xn)
        }
    };
    let mut beta = -norm(alphr, alphi, xnorm).copysign(alphr);
    let two = T::Real::one() + T::Real::one();
    let safmin = T::Real::min_positive_value() / (T::Real::epsilon() / two);
    let mut knt = 0;
    if beta.abs() < safmin {
        let rsafmn = T::Real::one() / safmin;
        loop {
            knt += 1;
            for v in x.iter_mut() {
                *v = v.scale(rsafmn);
            }
            beta = beta * rsafmn;
            alphr = alphr * rsafmn;
            alphi = alphi * rsafmn;
            if !(beta.abs() < safmin && knt < 20) {
                break;
            }
        }
        xnorm = nrm2(x);
        beta = -norm(alphr, alphi, xnorm).copysign(alphr);
    }
    let tau = T::from_parts((beta - alphr) / beta, -alphi / beta);
    let s = T::real(T::Real::one()).over(T::from_parts(alphr, alphi) - T::real(beta));
    for v in x.iter_mut() {
        *v = *v * s;
    }
    for _ in 0..knt {
        beta = beta * safmin;
    }
    *alpha = T::real(beta);
    tau
}

/// Applies `H = I - tau v v^H` from the left to rows `r0..r0 + v.len()` and the columns `cols`
/// of the row-major `a` with `ld` columns: `C := C - tau v (v^H C)`.
pub(crate) fn reflect_left<T: LapackScalar>(
    a: &mut [T],
    ld: usize,
    v: &[T],
    tau: T,
    r0: usize,
    cols: std::ops::Range<usize>,
) {
    if tau == T::default() {
        return;
    }
    for c in cols {
        let mut w = T::default();
        for (r, &vr) in v.iter().enumerate() {
            w = w + vr.conj() * a[(r0 + r) * ld + c];
        }
        let t = -(tau * w);
        for (r, &vr) in v.iter().enumerate() {
            a[(r0 + r) * ld + c] = a[(r0 + r) * ld + c] + vr * t;
        }
    }
}

/// Applies `H = I - tau v v^H` from the right to the rows `rows` and columns
/// `c0..c0 + v.len()` of the row-major `a` with `ld` columns: `C := C - tau (C v) v^H`.
pub(crate) fn reflect_right<T: LapackScalar>(
    a: &mut [T],
    ld: usize,
    v: &[T],
    tau: T,
    rows: std::ops::Range<usize>,
    c0: usize,
) {
    if tau == T::default() {
        return;
    }
    for r in rows {
        let row = &mut a[r * ld + c0..r * ld + c0 + v.len()];
        let mut w = T::default();
        for (&x, &vc) in row.iter().zip(v) {
            w = w + x * vc;
        }
        let t = -(tau * w);
        for (x, &vc) in row.iter_mut().zip(v) {
            *x = *x + t * vc.conj();
        }
    }
}

/// `?larf` from the left: applies `I - tau v v^H`, with `v = A(i..m, i)` (its first entry
/// taken as it stands), to the columns `c0..n` of rows `i..m`.
fn larf_left<T: LapackScalar>(a: &mut [T], n: usize, i: usize, m: usize, c0: usize, tau: T) {
    if tau == T::default() {
        return;
    }
    for c in c0..n {
        let mut w = T::default();
        for r in i..m {
            w = w + a[r * n + i].conj() * a[r * n + c];
        }
        let t = -(tau * w);
        for r in i..m {
            a[r * n + c] = a[r * n + c] + a[r * n + i] * t;
        }
    }
}

/// `?geqrf` (`?geqr2`) on the `m`-by-`n` row-major `a`: `R` on and above the diagonal, the
/// reflectors' tails below it, and their `min(m, n)` scalars in `tau`.
pub fn geqrf<T: LapackScalar>(a: &mut [T], m: usize, n: usize, tau: &mut [T]) {
    let k = m.min(n);
    for (i, t) in tau.iter_mut().enumerate().take(k) {
        *t = larfg(a, n, i, m);
        if i + 1 < n {
            let aii = a[i * n + i];
            a[i * n + i] = T::real(T::Real::one());
            larf_left(a, n, i, m, i + 1, t.conj());
            a[i * n + i] = aii;
        }
    }
}

/// `?ungqr` / `?orgqr` (`?ung2r`) on the `m`-by-`n` row-major `a` holding `tau.len() = k`
/// reflectors in its first columns (`m >= n >= k`): overwrites it with the first `n` columns
/// of `Q = H(0) ... H(k-1)`.
pub fn ungqr<T: LapackScalar>(a: &mut [T], m: usize, n: usize, tau: &[T]) {
    let k = tau.len();
    let (zero, one) = (T::default(), T::real(T::Real::one()));
    for j in k..n {
        for r in 0..m {
            a[r * n + j] = if r == j { one } else { zero };
        }
    }
    for i in (0..k).rev() {
        let t = tau[i];
        if i + 1 < n {
            a[i * n + i] = one;
            larf_left(a, n, i, m, i + 1, t);
        }
        for r in i + 1..m {
            a[r * n + i] = -(t * a[r * n + i]);
        }
        a[i * n + i] = one - t;
        for r in 0..i {
            a[r * n + i] = zero;
        }
    }
}

/// `?geqp3` (`?laqp2`, unblocked): QR with column pivoting of the `m`-by-`n` row-major `a`,
/// stored as [`geqrf`] stores it, so that `A P = Q R`. On entry a non-zero `jpvt[j]` marks
/// column `j` to be moved to the front (the marked columns keep their order and are factored
/// without pivoting); the others are chosen one at a time by the largest norm of what is left
/// of them below the rows already factored (the first of equal norms), downdated after each
/// step and recomputed when cancellation makes the downdate unreliable. On return `jpvt` is
/// the 1-based permutation: column `j` of `A P` is column `jpvt[j] - 1` of `A`; `tau` has
/// `min(m, n)` entries.
pub fn geqp3<T: LapackScalar>(a: &mut [T], m: usize, n: usize, jpvt: &mut [i32], tau: &mut [T]) {
    let k = m.min(n);
    let swap_columns = |a: &mut [T], i: usize, j: usize| {
        for r in 0..m {
            a.swap(r * n + i, r * n + j);
        }
    };
    // The marked columns to the front.
    let mut fixed = 0;
    for j in 0..n {
        if jpvt[j] != 0 {
            if j != fixed {
                swap_columns(a, j, fixed);
                jpvt[j] = jpvt[fixed];
                jpvt[fixed] = j as i32 + 1;
            } else {
                jpvt[j] = j as i32 + 1;
            }
            fixed += 1;
        } else {
            jpvt[j] = j as i32 + 1;
        }
    }
    // One Householder step on column i, applied to the columns after it.
    let step = |a: &mut [T], i: usize, tau: &mut [T]| {
        tau[i] = larfg(a, n, i, m);
        if i + 1 < n {
            let aii = a[i * n + i];
            a[i * n + i] = T::real(T::Real::one());
            larf_left(a, n, i, m, i + 1, tau[i].conj());
            a[i * n + i] = aii;
        }
    };
    let fixed_steps = fixed.min(k);
    for i in 0..fixed_steps {
        step(a, i, tau);
    }
    if fixed_steps >= k {
        return;
    }
    // ?lamch's relative machine precision is half the Rust epsilon.
    let half = T::Real::one() / (T::Real::one() + T::Real::one());
    let tol3z = (T::Real::epsilon() * half).sqrt();
    let mut vn1: Vec<T::Real> = (0..n)
        .map(|j| {
            if j < fixed_steps {
                T::Real::zero()
            } else {
                nrm2(&column(a, n, j, fixed_steps, m))
            }
        })
        .collect();
    let mut vn2 = vn1.clone();
    for i in fixed_steps..k {
        let mut pvt = i;
        for j in i + 1..n {
            if vn1[j] > vn1[pvt] {
                pvt = j;
            }
        }
        if pvt != i {
            swap_columns(a, pvt, i);
            jpvt.swap(pvt, i);
            vn1[pvt] = vn1[i];
            vn2[pvt] = vn2[i];
        }
        step(a, i, tau);
        for j in i + 1..n {
            if vn1[j] == T::Real::zero() {
                continue;
            }
            let ratio = a[i * n + j].modulus() / vn1[j];
            let left = (T::Real::one() - ratio * ratio).max(T::Real::zero());
            let drift = vn1[j] / vn2[j];
            if left * drift * drift <= tol3z {
                vn1[j] = if i + 1 < m {
                    nrm2(&column(a, n, j, i + 1, m))
                } else {
                    T::Real::zero()
                };
                vn2[j] = vn1[j];
            } else {
                vn1[j] = vn1[j] * left.sqrt();
            }
        }
    }
}

/// `?unmqr` / `?ormqr` (`?unm2r`): overwrites the `rows`-by-`cols` row-major `c` with `Q C`
/// (`left`) or `C Q`, or with `Q^H` in place of `Q` (`adjoint`), where
/// `Q = H(0) ... H(k-1)` is held by the `m`-by-`na` row-major `a` (reflector `i` below the
/// diagonal of column `i`, as [`geqrf`] leaves them) and `tau.len() = k` (`k <= min(m, na)`;
/// `c` has `m` rows if `left`, else `m` columns).
#[allow(clippy::too_many_arguments)]
pub fn unmqr<T: LapackScalar>(
    a: &[T],
    m: usize,
    na: usize,
    tau: &[T],
    c: &mut [T],
    rows: usize,
    cols: usize,
    left: bool,
    adjoint: bool,
) {
    let k = tau.len();
    // `Q C` and `C Q^H` apply `H(k-1)` first; `Q^H C` and `C Q` apply `H(0)` first.
    let order: Vec<usize> = if left == adjoint {
        (0..k).collect()
    } else {
        (0..k).rev().collect()
    };
    for i in order {
        let t = if adjoint { tau[i].conj() } else { tau[i] };
        let mut v = column(a, na, i, i, m);
        v[0] = T::real(T::Real::one());
        if left {
            reflect_left(c, cols, &v, t, i, 0..cols);
        } else {
            reflect_right(c, cols, &v, t, 0..rows, i);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use num_complex::Complex;

    fn noise(k: usize) -> f64 {
        ((k as f64 * 12.9898).sin() * 43758.5453).fract()
    }

    /// `Q R = A` and `Q^H Q = I` for the reduced QR of tall, square and wide matrices.
    #[test]
    fn complex_qr_reconstructs() {
        for (m, n) in [(1, 1), (5, 3), (4, 4), (3, 5)] {
            let a: Vec<Complex<f64>> = (0..m * n)
                .map(|k| Complex::new(noise(2 * k), noise(2 * k + 1)))
                .collect();
            let k = m.min(n);
            let mut f = a.clone();
            let mut tau = vec![Complex::default(); k];
            geqrf(&mut f, m, n, &mut tau);
            // Q: the first k columns of the factor.
            let mut q: Vec<_> = (0..m * k).map(|e| f[e / k * n + e % k]).collect();
            ungqr(&mut q, m, k, &tau);
            for i in 0..m {
                for j in 0..n {
                    let mut s = Complex::<f64>::default();
                    for l in 0..=j.min(k - 1) {
                        s += q[i * k + l] * f[l * n + j];
                    }
                    assert!((s - a[i * n + j]).norm() < 1e-14, "{m}x{n} ({i},{j})");
                }
            }
            for i in 0..k {
                assert_eq!(f[i * n + i].im, 0.0);
                for j in 0..k {
                    let d: Complex<f64> = (0..m).map(|r| q[r * k + i].conj() * q[r * k + j]).sum();
                    assert!((d - Complex::new(f64::from(i == j), 0.0)).norm() < 1e-14);
                }
            }
        }
    }

    /// `unmqr` applies the `Q` that `ungqr` forms, from either side, plain or adjoint.
    #[test]
    fn applying_q_matches_forming_it() {
        let (m, n) = (5, 3);
        let a: Vec<Complex<f64>> = (0..m * n)
            .map(|k| Complex::new(noise(5 * k), noise(5 * k + 2)))
            .collect();
        let mut f = a.clone();
        let mut tau = vec![Complex::default(); n];
        geqrf(&mut f, m, n, &mut tau);
        // The square Q: the reflectors padded with zero columns.
        let mut q: Vec<_> = (0..m * m)
            .map(|e| {
                if e % m < n {
                    f[e / m * n + e % m]
                } else {
                    Complex::default()
                }
            })
            .collect();
        ungqr(&mut q, m, m, &tau);
        let c: Vec<Complex<f64>> = (0..m * 2)
            .map(|k| Complex::new(noise(7 * k + 1), noise(7 * k + 3)))
            .collect();
        let qe = |i: usize, j: usize, adj: bool| {
            if adj {
                q[j * m + i].conj()
            } else {
                q[i * m + j]
            }
        };
        for adjoint in [false, true] {
            // Q C with C m-by-2.
            let mut got = c.clone();
            unmqr(&f, m, n, &tau, &mut got, m, 2, true, adjoint);
            for i in 0..m {
                for j in 0..2 {
                    let want: Complex<f64> = (0..m).map(|l| qe(i, l, adjoint) * c[l * 2 + j]).sum();
                    assert!((got[i * 2 + j] - want).norm() < 1e-14, "left {adjoint}");
                }
            }
            // C Q with C 2-by-m.
            let mut got = c.clone();
            unmqr(&f, m, n, &tau, &mut got, 2, m, false, adjoint);
            for i in 0..2 {
                for j in 0..m {
                    let want: Complex<f64> = (0..m).map(|l| c[i * m + l] * qe(l, j, adjoint)).sum();
                    assert!((got[i * m + j] - want).norm() < 1e-14, "right {adjoint}");
                }
            }
        }
    }
}
