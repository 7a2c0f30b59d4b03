//! The Schur decomposition of a general square matrix with LAPACK's unblocked algorithms, on
//! one row-major `n`-by-`n` matrix (`A(i, j)` is element `i * n + j`): the implementation that
//! the reference evaluator and the `cpu` backend's runtime both call for JAX's
//! `lapack_?gees_ffi` ([`gees`]), and the first half of `lapack_?geev_ffi`
//! ([`crate::geev`]), for real and complex types in the operand's precision
//! ([`LapackScalar`]).
//!
//! Invariants: `A = Z T Z^H` with `Z` unitary (orthogonal for real types). The matrix is reduced
//! to Hessenberg form by [`crate::reduction::gehrd`] (`?gehd2`), `Z` starts as its `Q`
//! (`?orghr`'s product of the same reflectors), and the shifted QR iteration of `?lahqr` runs
//! on the whole matrix (LAPACK's `wantt` and `wantz`): for real types Francis's double shift
//! with `?lanv2`'s standardization of every 2-by-2 block, so `T` is upper quasi-triangular with
//! 2-by-2 blocks only for complex-conjugate pairs, each with equal diagonal entries and
//! off-diagonal entries of opposite signs; for complex types a single shift with `?lahqr`'s
//! real subdiagonal, so `T` is upper triangular. Everything below the first subdiagonal of `T`
//! is zero. Deflation, the exceptional shifts and the iteration limit (`30 max(10, n)`
//! iterations per eigenvalue) are `?lahqr`'s: when the limit is reached `info` is the 1-based
//! index of the last row of the unreduced block, as LAPACK reports it, and `T`, `Z` hold the
//! partly converged form. Eigenvalues are returned in the order of `T`'s diagonal, the first of
//! a real type's conjugate pair with the positive imaginary part. There is no balancing and no
//! eigenvalue reordering (JAX never asks for either through `gees`).

use num_complex::Complex;
use num_traits::{Float, NumCast, One, Zero};

use crate::householder::{larfg_vec, reflect_left};
use crate::lapack_scalar::LapackScalar;
use crate::reduction::gehrd;

/// A Schur decomposition `A = Z T Z^H` of one `n`-by-`n` matrix, row-major.
#[derive(Clone, Debug)]
pub struct Schur<T: LapackScalar> {
    /// The Schur form `T` (upper triangular, or quasi-triangular for real types).
    pub t: Vec<T>,
    /// The Schur vectors `Z` (the columns); zeros when they were not asked for.
    pub z: Vec<T>,
    /// The eigenvalues in the order of `T`'s diagonal.
    pub w: Vec<Complex<T::Real>>,
    /// LAPACK's `info`: 0, or the 1-based row where the QR iteration did not converge.
    pub info: i32,
}

/// The Schur decompositions of a batch of `n`-by-`n` matrices, each field the batch's
/// [`Schur`] fields one after another.
#[derive(Clone, Debug)]
pub struct SchurBatch<T: LapackScalar> {
    /// The Schur forms.
    pub t: Vec<T>,
    /// The Schur vectors (zeros where they were not asked for).
    pub z: Vec<T>,
    /// The eigenvalues, `n` per matrix.
    pub w: Vec<Complex<T::Real>>,
    /// LAPACK's `info` per matrix.
    pub info: Vec<i32>,
}

/// [`gees`] of each of the `batch` row-major `n`-by-`n` matrices at the start of `a`.
pub fn gees_batch<T: LapackScalar>(
    a: &[T],
    batch: usize,
    n: usize,
    vectors: bool,
) -> SchurBatch<T> {
    let mut out = SchurBatch {
        t: Vec::with_capacity(batch * n * n),
        z: Vec::with_capacity(batch * n * n),
        w: Vec::new(),
        info: Vec::new(),
    };
    for b in 0..batch {
        let s = gees(&a[b * n * n..(b + 1) * n * n], n, vectors);
        out.t.extend(s.t);
        out.z.extend(s.z);
        out.w.extend(s.w);
        out.info.push(s.info);
    }
    out
}

/// A constant of the real type (every value used is exact in `f32`).
pub(crate) fn lit<R: Float>(x: f64) -> R {
    <R as NumCast>::from(x).unwrap_or_else(R::nan)
}

/// `?gees` without sorting: the Schur form of the row-major `n`-by-`n` `a`, with the Schur
/// vectors when `vectors` (LAPACK's `jobvs = V`).
pub fn gees<T: LapackScalar>(a: &[T], n: usize, vectors: bool) -> Schur<T> {
    let mut h = a[..n * n].to_vec();
    let mut z = vec![T::default(); n * n];
    if n > 0 {
        let mut tau = vec![T::default(); n - 1];
        gehrd(&mut h, n, 1, n, &mut tau);
        if vectors {
            // Q = H(0) ... H(n-2), applied to the identity from the last reflector on.
            for i in 0..n {
                z[i * n + i] = T::real(T::Real::one());
            }
            for i in (0..n.saturating_sub(1)).rev() {
                let mut v = vec![T::real(T::Real::one())];
                v.extend((i + 2..n).map(|r| h[r * n + i]));
                reflect_left(&mut z, n, &v, tau[i], i + 1, i + 1..n);
            }
        }
        for r in 2..n {
            for c in 0..r - 1 {
                h[r * n + c] = T::default();
            }
        }
    }
    let mut w = vec![Complex::new(T::Real::zero(), T::Real::zero()); n];
    let info = if T::COMPLEX {
        complex_hqr(&mut h, &mut z, n, vectors, &mut w)
    } else {
        let mut hr: Vec<T::Real> = h.iter().map(|x| x.re()).collect();
        let mut zr: Vec<T::Real> = z.iter().map(|x| x.re()).collect();
        let larfg = |alpha: &mut T::Real, x: &mut [T::Real]| -> T::Real {
            let mut a = T::real(*alpha);
            let mut xs = [T::default(); 2];
            for (d, &s) in xs.iter_mut().zip(x.iter()) {
                *d = T::real(s);
            }
            let t = larfg_vec(&mut a, &mut xs[..x.len()]);
            *alpha = a.re();
            for (d, s) in x.iter_mut().zip(xs) {
                *d = s.re();
            }
            t.re()
        };
        let info = real_hqr(&mut hr, &mut zr, n, vectors, &mut w, larfg);
        h = hr.into_iter().map(T::real).collect();
        z = zr.into_iter().map(T::real).collect();
        info
    };
    Schur { t: h, z, w, info }
}

/// `sqrt(z)` on the principal branch (a non-negative real part).
fn csqrt<T: LapackScalar>(z: T) -> T {
    let (x, y) = (z.re(), z.im());
    let zero = T::Real::zero();
    if x == zero && y == zero {
        return T::from_parts(zero, y);
    }
    let two = lit::<T::Real>(2.0);
    let t = ((z.modulus() + x.abs()) / two).sqrt();
    if x >= zero {
        T::from_parts(t, y / (two * t))
    } else {
        T::from_parts(y.abs() / (two * t), t.copysign(y))
    }
}

/// Scales row `r`'s columns `cols` of the row-major `a` by `s`.
fn scale_row<T: LapackScalar>(a: &mut [T], n: usize, r: usize, cols: std::ops::Range<usize>, s: T) {
    for c in cols {
        a[r * n + c] = a[r * n + c] * s;
    }
}

/// Scales column `c`'s rows `rows` of the row-major `a` by `s`.
fn scale_col<T: LapackScalar>(a: &mut [T], n: usize, c: usize, rows: std::ops::Range<usize>, s: T) {
    for r in rows {
        a[r * n + c] = a[r * n + c] * s;
    }
}

/// The steps of `?lahqr` between two exceptional shifts.
const KEXSH: usize = 10;

/// `?lahqr` for a complex type on the whole upper Hessenberg `h` (`wantt`), accumulating into
/// `z` when `vectors`; fills `w` and returns `info`.
fn complex_hqr<T: LapackScalar>(
    h: &mut [T],
    z: &mut [T],
    n: usize,
    vectors: bool,
    w: &mut [Complex<T::Real>],
) -> i32 {
    let at = |r: usize, c: usize| r * n + c;
    let zero = T::Real::zero();
    let one = T::Real::one();
    let cw = |x: T| Complex::new(x.re(), x.im());
    if n == 0 {
        return 0;
    }
    if n == 1 {
        w[0] = cw(h[0]);
        return 0;
    }
    // Make the subdiagonal real.
    for i in 1..n {
        let x = h[at(i, i - 1)];
        if x.im() != zero {
            let sc = x.div_real(x.abs1());
            let sc = sc.conj().div_real(sc.modulus());
            h[at(i, i - 1)] = T::real(x.modulus());
            scale_row(h, n, i, i..n, sc);
            scale_col(h, n, i, 0..(i + 2).min(n), sc.conj());
            if vectors {
                scale_col(z, n, i, 0..n, sc.conj());
            }
        }
    }
    let ulp = T::Real::epsilon();
    let smlnum = T::Real::min_positive_value() * (lit::<T::Real>(n as f64) / ulp);
    let half = lit::<T::Real>(0.5);
    let dat1 = lit::<T::Real>(0.75);
    let itmax = 30 * n.max(10);
    let mut kdefl = 0usize;
    let mut i = n - 1;
    loop {
        let mut l = 0usize;
        let mut converged = false;
        for _ in 0..=itmax {
            // A negligible subdiagonal entry splits the active block.
            let mut k = i;
            while k > l {
                let sub = h[at(k, k - 1)];
                if sub.abs1() <= smlnum {
                    break;
                }
                let mut tst = h[at(k - 1, k - 1)].abs1() + h[at(k, k)].abs1();
                if tst == zero {
                    if k >= 2 {
                        tst = tst + h[at(k - 1, k - 2)].re().abs();
                    }
                    if k + 1 < n {
                        tst = tst + h[at(k + 1, k)].re().abs();
                    }
                }
                if sub.re().abs() <= ulp * tst {
                    let up = h[at(k - 1, k)].abs1();
                    let (ab, ba) = (sub.abs1().max(up), sub.abs1().min(up));
                    let d = h[at(k, k)].abs1();
                    let e = (h[at(k - 1, k - 1)] - h[at(k, k)]).abs1();
                    let (aa, bb) = (d.max(e), d.min(e));
                    let s = aa + ab;
                    if ba * (ab / s) <= smlnum.max(ulp * (bb * (aa / s))) {
                        break;
                    }
                }
                k -= 1;
            }
            l = k;
            if l > 0 {
                h[at(l, l - 1)] = T::default();
            }
            if l >= i {
                converged = true;
                break;
            }
            kdefl += 1;
            let t = if kdefl.is_multiple_of(2 * KEXSH) {
                let s = dat1 * h[at(i, i - 1)].re().abs();
                T::real(s) + h[at(i, i)]
            } else if kdefl.is_multiple_of(KEXSH) {
                let s = dat1 * h[at(l + 1, l)].re().abs();
                T::real(s) + h[at(l, l)]
            } else {
                // Wilkinson's shift.
                let mut t = h[at(i, i)];
                let u = csqrt(h[at(i - 1, i)]) * csqrt(h[at(i, i - 1)]);
                let s = u.abs1();
                if s != zero {
                    let x = (h[at(i - 1, i - 1)] - t).scale(half);
                    let sx = x.abs1();
                    let s = s.max(x.abs1());
                    let (xs, us) = (x.div_real(s), u.div_real(s));
                    let mut y = csqrt(xs * xs + us * us).scale(s);
                    if sx > zero {
                        let d = x.div_real(sx);
                        if d.re() * y.re() + d.im() * y.im() < zero {
                            y = -y;
                        }
                    }
                    t = t - u * u.over(x + y);
                }
                t
            };
            // Two consecutive small subdiagonal entries start the sweep lower.
            let start = |h: &[T], m: usize| -> [T; 2] {
                let h11s = h[at(m, m)] - t;
                let h21 = h[at(m + 1, m)].re();
                let s = h11s.abs1() + h21.abs();
                [h11s.div_real(s), T::real(h21 / s)]
            };
            let mut m = i - 1;
            let mut v;
            loop {
                v = start(h, m);
                if m == l {
                    break;
                }
                let h10 = h[at(m, m - 1)].re();
                let h21 = v[1].re();
                let (h11, h22) = (h[at(m, m)], h[at(m + 1, m + 1)]);
                if h10.abs() * h21.abs() <= ulp * (v[0].abs1() * (h11.abs1() + h22.abs1())) {
                    break;
                }
                m -= 1;
            }
            // The single-shift QR sweep.
            for k in m..i {
                if k > m {
                    v = [h[at(k, k - 1)], h[at(k + 1, k - 1)]];
                }
                let (head, tail) = v.split_at_mut(1);
                let t1 = larfg_vec(&mut head[0], tail);
                if k > m {
                    h[at(k, k - 1)] = v[0];
                    h[at(k + 1, k - 1)] = T::default();
                }
                let v2 = v[1];
                let t2 = T::real((t1 * v2).re());
                for j in k..n {
                    let sum = t1.conj() * h[at(k, j)] + t2 * h[at(k + 1, j)];
                    h[at(k, j)] = h[at(k, j)] - sum;
                    h[at(k + 1, j)] = h[at(k + 1, j)] - sum * v2;
                }
                for j in 0..=(k + 2).min(i) {
                    let sum = t1 * h[at(j, k)] + t2 * h[at(j, k + 1)];
                    h[at(j, k)] = h[at(j, k)] - sum;
                    h[at(j, k + 1)] = h[at(j, k + 1)] - sum * v2.conj();
                }
                if vectors {
                    for j in 0..n {
                        let sum = t1 * z[at(j, k)] + t2 * z[at(j, k + 1)];
                        z[at(j, k)] = z[at(j, k)] - sum;
                        z[at(j, k + 1)] = z[at(j, k + 1)] - sum * v2.conj();
                    }
                }
                if k == m && m > l {
                    // Keep H(m, m-1) real after a sweep that started below l.
                    let temp = T::real(one) - t1;
                    let temp = temp.div_real(temp.modulus());
                    h[at(m + 1, m)] = h[at(m + 1, m)] * temp.conj();
                    if m + 2 <= i {
                        h[at(m + 2, m + 1)] = h[at(m + 2, m + 1)] * temp;
                    }
                    for j in m..=i {
                        if j != m + 1 {
                            if n > j + 1 {
                                scale_row(h, n, j, j + 1..n, temp);
                            }
                            scale_col(h, n, j, 0..j, temp.conj());
                            if vectors {
                                scale_col(z, n, j, 0..n, temp.conj());
                            }
                        }
                    }
                }
            }
            // Keep H(i, i-1) real.
            let temp = h[at(i, i - 1)];
            if temp.im() != zero {
                let r = temp.modulus();
                h[at(i, i - 1)] = T::real(r);
                let temp = temp.div_real(r);
                if n > i + 1 {
                    scale_row(h, n, i, i + 1..n, temp.conj());
                }
                scale_col(h, n, i, 0..i, temp);
                if vectors {
                    scale_col(z, n, i, 0..n, temp);
                }
            }
        }
        if !converged {
            return i as i32 + 1;
        }
        w[i] = cw(h[at(i, i)]);
        kdefl = 0;
        if l == 0 {
            return 0;
        }
        i = l - 1;
    }
}

/// `?lanv2`: the standard form `[aa bb; cc dd] = Q^T [a b; c d] Q` of a real 2-by-2 block with
/// `Q = [cs -sn; sn cs]`: upper triangular for real eigenvalues, else `aa = dd` and
/// `bb cc < 0`. Returns `(aa, bb, cc, dd)`, the eigenvalues `(rt1r, rt1i, rt2r, rt2i)` and
/// `(cs, sn)`.
#[allow(clippy::type_complexity)]
fn lanv2<R: Float>(a: R, b: R, c: R, d: R) -> ([R; 4], [R; 4], (R, R)) {
    let zero = R::zero();
    let one = R::one();
    let half = lit::<R>(0.5);
    let eps = R::epsilon();
    let sign = |x: R| one.copysign(x);
    let (mut a, mut b, mut c, mut d) = (a, b, c, d);
    let (mut cs, mut sn) = (one, zero);
    // Upper triangular, or already of equal diagonal and opposite off-diagonal signs.
    let standard = c == zero || (b != zero && a - d == zero && sign(b) != sign(c));
    if standard {
        // Nothing to do.
    } else if b == zero {
        // Swap rows and columns.
        cs = zero;
        sn = one;
        std::mem::swap(&mut a, &mut d);
        b = -c;
        c = zero;
    } else {
        let temp = a - d;
        let p = half * temp;
        let bcmax = b.abs().max(c.abs());
        let bcmis = b.abs().min(c.abs()) * sign(b) * sign(c);
        let scale = p.abs().max(bcmax);
        let mut z = (p / scale) * p + (bcmax / scale) * bcmis;
        if z >= lit::<R>(4.0) * eps {
            // Real eigenvalues.
            z = p + (scale.sqrt() * z.sqrt()).copysign(p);
            a = d + z;
            d = d - (bcmax / z) * bcmis;
            let tau = c.hypot(z);
            cs = z / tau;
            sn = c / tau;
            b = b - c;
            c = zero;
        } else {
            // Complex or almost equal real eigenvalues: make the diagonal entries equal.
            let sigma = b + c;
            let tau = sigma.hypot(temp);
            cs = (half * (one + sigma.abs() / tau)).sqrt();
            sn = -(p / (tau * cs)) * sign(sigma);
            let (aa, bb) = (a * cs + b * sn, -a * sn + b * cs);
            let (cc, dd) = (c * cs + d * sn, -c * sn + d * cs);
            a = aa * cs + cc * sn;
            b = bb * cs + dd * sn;
            c = -aa * sn + cc * cs;
            d = -bb * sn + dd * cs;
            let temp = half * (a + d);
            a = temp;
            d = temp;
            if c != zero {
                if b != zero {
                    if sign(b) == sign(c) {
                        // Real eigenvalues: reduce to upper triangular form.
                        let sab = b.abs().sqrt();
                        let sac = c.abs().sqrt();
                        let p = (sab * sac).copysign(c);
                        let tau = one / (b + c).abs().sqrt();
                        a = temp + p;
                        d = temp - p;
                        b = b - c;
                        c = zero;
                        let cs1 = sab * tau;
                        let sn1 = sac * tau;
                        let t = cs * cs1 - sn * sn1;
                        sn = cs * sn1 + sn * cs1;
                        cs = t;
                    }
                } else {
                    b = -c;
                    c = zero;
                    let t = cs;
                    cs = -sn;
                    sn = t;
                }
            }
        }
    }
    let (rt1i, rt2i) = if c == zero {
        (zero, zero)
    } else {
        let im = b.abs().sqrt() * c.abs().sqrt();
        (im, -im)
    };
    ([a, b, c, d], [a, rt1i, d, rt2i], (cs, sn))
}

/// `?lahqr` for a real type on the whole upper Hessenberg `h` (`wantt`), accumulating into `z`
/// when `vectors`, with `larfg` the real `?larfg` (`alpha`, `x` -> `tau`); fills `w` and
/// returns `info`.
fn real_hqr<R: Float>(
    h: &mut [R],
    z: &mut [R],
    n: usize,
    vectors: bool,
    w: &mut [Complex<R>],
    larfg: impl Fn(&mut R, &mut [R]) -> R,
) -> i32 {
    let at = |r: usize, c: usize| r * n + c;
    let zero = R::zero();
    let one = R::one();
    if n == 0 {
        return 0;
    }
    if n == 1 {
        w[0] = Complex::new(h[0], zero);
        return 0;
    }
    let ulp = R::epsilon();
    let smlnum = R::min_positive_value() * (lit::<R>(n as f64) / ulp);
    let (dat1, dat2) = (lit::<R>(0.75), lit::<R>(-0.4375));
    let half = lit::<R>(0.5);
    let itmax = 30 * n.max(10);
    let mut kdefl = 0usize;
    let mut i = n - 1;
    loop {
        let mut l = 0usize;
        let mut converged = false;
        for _ in 0..=itmax {
            // A negligible subdiagonal entry splits the active block.
            let mut k = i;
            while k > l {
                let sub = h[at(k, k - 1)].abs();
                if sub <= smlnum {
                    break;
                }
                let mut tst = h[at(k - 1, k - 1)].abs() + h[at(k, k)].abs();
                if tst == zero {
                    if k >= 2 {
                        tst = tst + h[at(k - 1, k - 2)].abs();
                    }
                    if k + 1 < n {
                        tst = tst + h[at(k + 1, k)].abs();
                    }
                }
                if sub <= ulp * tst {
                    let up = h[at(k - 1, k)].abs();
                    let (ab, ba) = (sub.max(up), sub.min(up));
                    let d = h[at(k, k)].abs();
                    let e = (h[at(k - 1, k - 1)] - h[at(k, k)]).abs();
                    let (aa, bb) = (d.max(e), d.min(e));
                    let s = aa + ab;
                    if ba * (ab / s) <= smlnum.max(ulp * (bb * (aa / s))) {
                        break;
                    }
                }
                k -= 1;
            }
            l = k;
            if l > 0 {
                h[at(l, l - 1)] = zero;
            }
            if l + 1 >= i {
                converged = true;
                break;
            }
            kdefl += 1;
            let (h11, h12, h21, h22) = if kdefl.is_multiple_of(2 * KEXSH) {
                let s = h[at(i, i - 1)].abs() + h[at(i - 1, i - 2)].abs();
                let h11 = dat1 * s + h[at(i, i)];
                (h11, dat2 * s, s, h11)
            } else if kdefl.is_multiple_of(KEXSH) {
                let s = h[at(l + 1, l)].abs() + h[at(l + 2, l + 1)].abs();
                let h11 = dat1 * s + h[at(l, l)];
                (h11, dat2 * s, s, h11)
            } else {
                (
                    h[at(i - 1, i - 1)],
                    h[at(i - 1, i)],
                    h[at(i, i - 1)],
                    h[at(i, i)],
                )
            };
            // The shifts: the eigenvalues of the trailing 2-by-2 block (one real shift twice
            // if they are real).
            let s = h11.abs() + h12.abs() + h21.abs() + h22.abs();
            let (rt1r, rt1i, rt2r, rt2i) = if s == zero {
                (zero, zero, zero, zero)
            } else {
                let (h11, h12, h21, h22) = (h11 / s, h12 / s, h21 / s, h22 / s);
                let tr = (h11 + h22) * half;
                let det = (h11 - tr) * (h22 - tr) - h12 * h21;
                let rtdisc = det.abs().sqrt();
                if det >= zero {
                    (tr * s, rtdisc * s, tr * s, -(rtdisc * s))
                } else {
                    let (a, b) = (tr + rtdisc, tr - rtdisc);
                    let r = if (a - h22).abs() <= (b - h22).abs() {
                        a * s
                    } else {
                        b * s
                    };
                    (r, zero, r, zero)
                }
            };
            // Two consecutive small subdiagonal entries start the sweep lower.
            let mut m = i - 2;
            let mut v = [zero; 3];
            loop {
                let h21s = h[at(m + 1, m)];
                let s = (h[at(m, m)] - rt2r).abs() + rt2i.abs() + h21s.abs();
                let h21s = h[at(m + 1, m)] / s;
                v[0] = h21s * h[at(m, m + 1)] + (h[at(m, m)] - rt1r) * ((h[at(m, m)] - rt2r) / s)
                    - rt1i * (rt2i / s);
                v[1] = h21s * (h[at(m, m)] + h[at(m + 1, m + 1)] - rt1r - rt2r);
                v[2] = h21s * h[at(m + 2, m + 1)];
                let s = v[0].abs() + v[1].abs() + v[2].abs();
                for x in v.iter_mut() {
                    *x = *x / s;
                }
                if m == l {
                    break;
                }
                let h00 = h[at(m, m - 1)].abs() * (v[1].abs() + v[2].abs());
                let h01 = v[0].abs()
                    * (h[at(m - 1, m - 1)].abs() + h[at(m, m)].abs() + h[at(m + 1, m + 1)].abs());
                if h00 <= ulp * h01 {
                    break;
                }
                m -= 1;
            }
            // The double-shift QR sweep.
            for k in m..i {
                let nr = 3.min(i - k + 1);
                if k > m {
                    for (j, x) in v.iter_mut().enumerate().take(nr) {
                        *x = h[at(k + j, k - 1)];
                    }
                }
                let (head, tail) = v.split_at_mut(1);
                let t1 = larfg(&mut head[0], &mut tail[..nr - 1]);
                if k > m {
                    h[at(k, k - 1)] = v[0];
                    h[at(k + 1, k - 1)] = zero;
                    if k + 1 < i {
                        h[at(k + 2, k - 1)] = zero;
                    }
                } else if m > l {
                    // Not -H(k, k-1), which goes wrong when v(1) and v(2) underflow.
                    h[at(k, k - 1)] = h[at(k, k - 1)] * (one - t1);
                }
                let v2 = v[1];
                let t2 = t1 * v2;
                if nr == 3 {
                    let v3 = v[2];
                    let t3 = t1 * v3;
                    for j in k..n {
                        let sum = h[at(k, j)] + v2 * h[at(k + 1, j)] + v3 * h[at(k + 2, j)];
                        h[at(k, j)] = h[at(k, j)] - sum * t1;
                        h[at(k + 1, j)] = h[at(k + 1, j)] - sum * t2;
                        h[at(k + 2, j)] = h[at(k + 2, j)] - sum * t3;
                    }
                    for j in 0..=(k + 3).min(i) {
                        let sum = h[at(j, k)] + v2 * h[at(j, k + 1)] + v3 * h[at(j, k + 2)];
                        h[at(j, k)] = h[at(j, k)] - sum * t1;
                        h[at(j, k + 1)] = h[at(j, k + 1)] - sum * t2;
                        h[at(j, k + 2)] = h[at(j, k + 2)] - sum * t3;
                    }
                    if vectors {
                        for j in 0..n {
                            let sum = z[at(j, k)] + v2 * z[at(j, k + 1)] + v3 * z[at(j, k + 2)];
                            z[at(j, k)] = z[at(j, k)] - sum * t1;
                            z[at(j, k + 1)] = z[at(j, k + 1)] - sum * t2;
                            z[at(j, k + 2)] = z[at(j, k + 2)] - sum * t3;
                        }
                    }
                } else if nr == 2 {
                    for j in k..n {
                        let sum = h[at(k, j)] + v2 * h[at(k + 1, j)];
                        h[at(k, j)] = h[at(k, j)] - sum * t1;
                        h[at(k + 1, j)] = h[at(k + 1, j)] - sum * t2;
                    }
                    for j in 0..=i {
                        let sum = h[at(j, k)] + v2 * h[at(j, k + 1)];
                        h[at(j, k)] = h[at(j, k)] - sum * t1;
                        h[at(j, k + 1)] = h[at(j, k + 1)] - sum * t2;
                    }
                    if vectors {
                        for j in 0..n {
                            let sum = z[at(j, k)] + v2 * z[at(j, k + 1)];
                            z[at(j, k)] = z[at(j, k)] - sum * t1;
                            z[at(j, k + 1)] = z[at(j, k + 1)] - sum * t2;
                        }
                    }
                }
            }
        }
        if !converged {
            return i as i32 + 1;
        }
        if l == i {
            w[i] = Complex::new(h[at(i, i)], zero);
        } else {
            // A 2-by-2 block converged: its standard form, and the rotation applied to the
            // rest of T and to Z.
            let (std, rts, (cs, sn)) = lanv2(
                h[at(i - 1, i - 1)],
                h[at(i - 1, i)],
                h[at(i, i - 1)],
                h[at(i, i)],
            );
            h[at(i - 1, i - 1)] = std[0];
            h[at(i - 1, i)] = std[1];
            h[at(i, i - 1)] = std[2];
            h[at(i, i)] = std[3];
            w[i - 1] = Complex::new(rts[0], rts[1]);
            w[i] = Complex::new(rts[2], rts[3]);
            let rot = |x: R, y: R| (cs * x + sn * y, cs * y - sn * x);
            for j in i + 1..n {
                let (x, y) = rot(h[at(i - 1, j)], h[at(i, j)]);
                h[at(i - 1, j)] = x;
                h[at(i, j)] = y;
            }
            for j in 0..i - 1 {
                let (x, y) = rot(h[at(j, i - 1)], h[at(j, i)]);
                h[at(j, i - 1)] = x;
                h[at(j, i)] = y;
            }
            if vectors {
                for j in 0..n {
                    let (x, y) = rot(z[at(j, i - 1)], z[at(j, i)]);
                    z[at(j, i - 1)] = x;
                    z[at(j, i)] = y;
                }
            }
        }
        kdefl = 0;
        if l == 0 {
            return 0;
        }
        i = l - 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn noise(k: usize) -> f64 {
        ((k as f64 * 12.9898).sin() * 43758.5453).fract()
    }

    type C = Complex<f64>;

    /// `max |A - Z T Z^H|` and `max |Z Z^H - I|`.
    fn residuals<T: LapackScalar<Real = f64>>(a: &[T], s: &Schur<T>, n: usize) -> (f64, f64) {
        let c = |x: T| C::new(x.re(), x.im());
        let (mut rec, mut orth) = (0.0f64, 0.0f64);
        for i in 0..n {
            for j in 0..n {
                let mut x = C::default();
                let mut y = C::default();
                for k in 0..n {
                    y += c(s.z[i * n + k]) * c(s.z[j * n + k]).conj();
                    for l in 0..n {
                        x += c(s.z[i * n + k]) * c(s.t[k * n + l]) * c(s.z[j * n + l]).conj();
                    }
                }
                rec = rec.max((x - c(a[i * n + j])).norm());
                orth = orth.max((y - C::new(if i == j { 1.0 } else { 0.0 }, 0.0)).norm());
            }
        }
        (rec, orth)
    }

    #[test]
    fn real_matrices_have_quasi_triangular_schur_forms() {
        let mut blocks = 0;
        for n in [1usize, 2, 3, 5, 8, 13] {
            let a: Vec<f64> = (0..n * n).map(|k| noise(k + n)).collect();
            let s = gees(&a, n, true);
            assert_eq!(s.info, 0, "n = {n}");
            let (rec, orth) = residuals(&a, &s, n);
            assert!(rec < 1e-13 && orth < 1e-13, "n = {n}: {rec} {orth}");
            let t = |r: usize, c: usize| s.t[r * n + c];
            for r in 0..n {
                for c in 0..r.saturating_sub(1) {
                    assert_eq!(t(r, c), 0.0);
                }
            }
            for r in 1..n {
                if t(r, r - 1) != 0.0 {
                    // A standard 2-by-2 block: equal diagonal, opposite off-diagonal signs,
                    // the conjugate pair in w with the positive part first.
                    assert!(r < 2 || t(r - 1, r - 2) == 0.0);
                    assert!(r + 1 >= n || t(r + 1, r) == 0.0);
                    assert_eq!(t(r - 1, r - 1), t(r, r));
                    assert!(t(r - 1, r) * t(r, r - 1) < 0.0);
                    assert!(s.w[r - 1].im > 0.0 && s.w[r] == s.w[r - 1].conj());
                    blocks += 1;
                } else if r + 1 >= n || t(r + 1, r) == 0.0 {
                    assert_eq!(s.w[r], C::new(t(r, r), 0.0));
                }
            }
        }
        assert!(blocks > 0, "no complex pair was tested");
    }

    #[test]
    fn complex_matrices_have_triangular_schur_forms() {
        for n in [1usize, 2, 4, 9] {
            let a: Vec<C> = (0..n * n)
                .map(|k| C::new(noise(2 * k), noise(2 * k + 1)))
                .collect();
            let s = gees(&a, n, true);
            assert_eq!(s.info, 0);
            let (rec, orth) = residuals(&a, &s, n);
            assert!(rec < 1e-13 && orth < 1e-13, "n = {n}: {rec} {orth}");
            for r in 0..n {
                for c in 0..r {
                    assert_eq!(s.t[r * n + c], C::default());
                }
                assert_eq!(s.w[r], s.t[r * n + r]);
            }
        }
    }

    #[test]
    fn rotations_and_nilpotent_matrices_converge() {
        // A rotation has the pair +-i; a shift matrix (one Jordan block) only zeros; the
        // exceptional shifts are what moves a cyclic permutation.
        let rot = [0.0f64, -1.0, 1.0, 0.0];
        let s = gees(&rot, 2, true);
        assert_eq!(s.info, 0);
        assert_eq!(s.w[0], C::new(0.0, 1.0));
        let n = 6;
        let mut cyc = vec![0.0f64; n * n];
        for i in 0..n {
            cyc[((i + 1) % n) * n + i] = 1.0;
        }
        let s = gees(&cyc, n, true);
        assert_eq!(s.info, 0);
        assert!(residuals(&cyc, &s, n).0 < 1e-13);
        for w in &s.w {
            assert!((w.norm() - 1.0).abs() < 1e-12, "{w}");
        }
        let mut nil = vec![0.0f32; 16];
        for i in 0..3 {
            nil[i * 4 + i + 1] = 1.0;
        }
        let s = gees(&nil, 4, true);
        assert_eq!(s.info, 0);
        assert!(s.w.iter().all(|w| w.norm() == 0.0));
    }

    #[test]
    fn nan_input_reports_the_unconverged_row() {
        let a = vec![f64::NAN; 9];
        let s = gees(&a, 3, true);
        assert_eq!(s.info, 3);
    }
}
