//! Householder QR with LAPACK's unblocked algorithms and conventions, on one row-major matrix
//! (`A(i, j)` is element `i * n + j`): the implementation that the reference evaluator and the
//! `cpu` backend's runtime both call for JAX's `lapack_?geqrf_ffi` ([`geqrf`]) and
//! `lapack_?orgqr_ffi` / `lapack_?ungqr_ffi` ([`ungqr`]), for real and complex types in the
//! operand's precision ([`LapackScalar`]).
//!
//! Invariants: reflectors follow `?larfg` (`H = I - tau v v^H`, `v(0) = 1` implied, `beta`
//! real with the sign opposite to `re(alpha)`, so `R`'s diagonal is real; `tau = 0` where the
//! column below the diagonal is already zero and `alpha` is real; LAPACK's rescaling when
//! `|beta|` is below the safe minimum); `geqrf` applies `H^H` (`?geqr2`) and `ungqr` forms
//! `Q = H(0) ... H(k-1)` (`?ung2r`, `?org2r`), so `A = Q R` with `Q` unitary. For real types
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
    let zero = T::Real::zero();
    if m <= i {
        return T::default();
    }
    let mut xnorm = nrm2(&column(a, n, i, i + 1, m));
    let alpha = a[i * n + i];
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
            for r in i + 1..m {
                a[r * n + i] = a[r * n + i].scale(rsafmn);
            }
            beta = beta * rsafmn;
            alphr = alphr * rsafmn;
            alphi = alphi * rsafmn;
            if !(beta.abs() < safmin && knt < 20) {
                break;
            }
        }
        xnorm = nrm2(&column(a, n, i, i + 1, m));
        beta = -norm(alphr, alphi, xnorm).copysign(alphr);
    }
    let tau = T::from_parts((beta - alphr) / beta, -alphi / beta);
    let s = T::real(T::Real::one()).over(T::from_parts(alphr, alphi) - T::real(beta));
    for r in i + 1..m {
        a[r * n + i] = a[r * n + i] * s;
    }
    for _ in 0..knt {
        beta = beta * safmin;
    }
    a[i * n + i] = T::real(beta);
    tau
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
}
