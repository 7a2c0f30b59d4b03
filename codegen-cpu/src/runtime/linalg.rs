//! Dense linear algebra with LAPACK's unblocked algorithms and output conventions, batched over
//! leading dimensions, on row-major matrices (`A(i, j)` is element `i * cols + j`):
//!
//! - `potrf`: `?potf2` (the factor overwrites its triangle; `info` is the first non-positive
//!   leading minor, where the factorization stops); the `cholesky` instruction runs XLA's
//!   expansion (a factor of NaNs where a pivot's square root is NaN). Both are
//!   [`axle_analysis::cholesky`]'s, the evaluator's too.
//! - `getrf`: `?getf2`, partial pivoting on the first largest `|re| + |im|` (`i?amax`),
//!   pivots 1-based, `info` the first exactly zero pivot.
//! - `trsm`: substitution for every side, triangle, transpose and diagonal
//!   ([`axle_analysis::trsm::solve`], the evaluator's solve too).
//! - `geqrf`: `?geqr2` with `?larfg`'s reflectors (`beta = -sign(alpha) * norm`,
//!   `tau = (beta - alpha) / beta`, `v(0) = 1`); `orgqr`: `?org2r`. Real types only.
//! - `syevd` and `gesdd`: Jacobi's methods ([`axle_analysis::jacobi`], the evaluator's too),
//!   eigenvalues ascending and singular values descending as LAPACK returns them; vectors are
//!   defined up to sign, not LAPACK's bits. Real types only.

use axle_analysis::cholesky;
use axle_analysis::jacobi;
use axle_analysis::nrm2::nrm2;
use axle_analysis::trsm::{solve, Field, TriSolve};
use num_complex::Complex;
use num_traits::Float;

use super::{read, write, Call, Elem, Scalar};

/// Runs `$f::<T>(..)` with `T` the scalar type of element type `$e`.
macro_rules! by_elem {
    ($e:expr, $f:ident ( $($arg:expr),* )) => {
        match $e {
            Elem::F32 => $f::<f32>($($arg),*),
            Elem::F64 => $f::<f64>($($arg),*),
            Elem::C64 => $f::<Complex<f32>>($($arg),*),
            Elem::C128 => $f::<Complex<f64>>($($arg),*),
        }
    };
}

/// Runs a [`Call::Potrf`].
///
/// # Safety
/// `a` and `out` hold the batch of matrices, `info` (LAPACK form only) one `s32` per matrix.
pub(crate) unsafe fn potrf(call: &Call, a: *mut u8, out: *mut u8, info: *mut u8) {
    let &Call::Potrf {
        elem,
        batch,
        n,
        lower,
        lapack,
    } = call
    else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, potrf_t(a, out, info, batch, n, lower, lapack)) }
}

/// # Safety
/// As [`potrf`].
unsafe fn potrf_t<T: Scalar + cholesky::Scalar + Default>(
    a: *mut u8,
    out: *mut u8,
    info: *mut u8,
    batch: usize,
    n: usize,
    lower: bool,
    lapack: bool,
) {
    // SAFETY: the operand holds `batch` matrices.
    let mut x: Vec<T> = unsafe { read(a, batch * n * n) };
    if !lapack {
        // SAFETY: the result has the operand's size.
        unsafe { write(out, &cholesky::cholesky(&x, batch, n, lower)) };
        return;
    }
    let infos: Vec<i32> = (0..batch)
        .map(|b| cholesky::potf2(&mut x[b * n * n..(b + 1) * n * n], n, lower))
        .collect();
    // SAFETY: the result has the operand's size; `info` one `s32` per matrix.
    unsafe {
        write(out, &x);
        write(info, &infos);
    }
}

/// Runs a [`Call::Getrf`].
///
/// # Safety
/// `a` and `lu` hold the batch of matrices, `piv` `min(m, n)` `s32`s and `info` one `s32` per
/// matrix.
pub(crate) unsafe fn getrf(call: &Call, a: *mut u8, lu: *mut u8, piv: *mut u8, info: *mut u8) {
    let &Call::Getrf { elem, batch, m, n } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, getrf_t(a, lu, piv, info, batch, m, n)) }
}

/// # Safety
/// As [`getrf`].
unsafe fn getrf_t<T: Scalar + Default>(
    a: *mut u8,
    lu: *mut u8,
    piv: *mut u8,
    info: *mut u8,
    batch: usize,
    m: usize,
    n: usize,
) {
    let k = m.min(n);
    // SAFETY: the operand holds `batch` matrices.
    let mut x: Vec<T> = unsafe { read(a, batch * m * n) };
    let mut pivots = vec![0i32; batch * k];
    let mut infos = vec![0i32; batch];
    for b in 0..batch {
        infos[b] = getf2(
            &mut x[b * m * n..(b + 1) * m * n],
            m,
            n,
            &mut pivots[b * k..(b + 1) * k],
        );
    }
    // SAFETY: the results' sizes.
    unsafe {
        write(lu, &x);
        write(piv, &pivots);
        write(info, &infos);
    }
}

/// LU-factors one `m`-by-`n` matrix in place with row interchanges; returns LAPACK's `info`.
fn getf2<T: Scalar>(x: &mut [T], m: usize, n: usize, piv: &mut [i32]) -> i32 {
    let zero = T::real(num_traits::zero::<T::Real>());
    let sfmin = <T::Real as Float>::min_positive_value();
    let mut info = 0;
    let k = m.min(n);
    for j in 0..k {
        let mut p = j;
        let mut best = x[j * n + j].abs1();
        for i in j + 1..m {
            let v = x[i * n + j].abs1();
            if v > best {
                best = v;
                p = i;
            }
        }
        piv[j] = p as i32 + 1;
        if x[p * n + j] != zero {
            if p != j {
                for c in 0..n {
                    x.swap(j * n + c, p * n + c);
                }
            }
            let d = x[j * n + j];
            if d.modulus() >= sfmin {
                let r = T::real(num_traits::one::<T::Real>()) / d;
                for i in j + 1..m {
                    x[i * n + j] = x[i * n + j] * r;
                }
            } else {
                for i in j + 1..m {
                    x[i * n + j] = x[i * n + j] / d;
                }
            }
        } else if info == 0 {
            info = j as i32 + 1;
        }
        if j + 1 < k {
            for i in j + 1..m {
                let l = x[i * n + j];
                for c in j + 1..n {
                    x[i * n + c] = x[i * n + c] - l * x[j * n + c];
                }
            }
        }
    }
    info
}

/// Runs a [`Call::Trsm`].
///
/// # Safety
/// `a` holds the batch of `m`-by-`m` matrices, `b` and `x` the right-hand sides.
pub(crate) unsafe fn trsm(call: &Call, a: *mut u8, b: *mut u8, x: *mut u8) {
    let Call::Trsm { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(*elem, trsm_t(call, a, b, x)) }
}

/// # Safety
/// As [`trsm`].
unsafe fn trsm_t<T: Field + Default>(call: &Call, a: *mut u8, b: *mut u8, x: *mut u8) {
    let Call::Trsm { solve: p, .. } = call else {
        return;
    };
    let TriSolve {
        batch,
        m,
        rows,
        cols,
        ..
    } = *p;
    // SAFETY: the operands' sizes.
    let (av, bv): (Vec<T>, Vec<T>) =
        unsafe { (read(a, batch * m * m), read(b, batch * rows * cols)) };
    // SAFETY: the result has `b`'s size.
    unsafe { write(x, &solve(&av, &bv, p)) };
}

/// Runs `$f::<T>(..)` for the real element types (QR is real-only).
macro_rules! by_real {
    ($e:expr, $f:ident ( $($arg:expr),* )) => {
        match $e {
            Elem::F32 => $f::<f32>($($arg),*),
            Elem::F64 => $f::<f64>($($arg),*),
            // Lowering refuses complex QR; nothing is written rather than a wrong answer.
            Elem::C64 | Elem::C128 => {}
        }
    };
}

/// Runs a [`Call::Geqrf`].
///
/// # Safety
/// `a` and `qr` hold the batch of matrices, `tau` `min(m, n)` scalars per matrix.
pub(crate) unsafe fn geqrf(call: &Call, a: *mut u8, qr: *mut u8, tau: *mut u8) {
    let &Call::Geqrf { elem, batch, m, n } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_real!(elem, geqrf_t(a, qr, tau, batch, m, n)) }
}

/// # Safety
/// As [`geqrf`].
unsafe fn geqrf_t<T: Float + Default>(
    a: *mut u8,
    qr: *mut u8,
    tau: *mut u8,
    batch: usize,
    m: usize,
    n: usize,
) {
    let k = m.min(n);
    // SAFETY: the operand's size.
    let mut x: Vec<T> = unsafe { read(a, batch * m * n) };
    let mut taus = vec![T::zero(); batch * k];
    for b in 0..batch {
        let x = &mut x[b * m * n..(b + 1) * m * n];
        for i in 0..k {
            let t = larfg(x, n, i, m);
            taus[b * k + i] = t;
            if i + 1 < n {
                let aii = x[i * n + i];
                x[i * n + i] = T::one();
                larf_left(x, n, i, m, i + 1, t);
                x[i * n + i] = aii;
            }
        }
    }
    // SAFETY: the results' sizes.
    unsafe {
        write(qr, &x);
        write(tau, &taus);
    }
}

/// The 2-norm of column `col`, rows `r0..m`, of the row-major matrix `x` with `n` columns
/// ([`nrm2`], `?nrm2`'s scaling against overflow).
fn column_nrm2<T: Float>(x: &[T], n: usize, col: usize, r0: usize, m: usize) -> T {
    nrm2((r0..m).map(|r| x[r * n + col]))
}

/// `?larfg` on `alpha = A(i, i)` and `x = A(i+1..m, i)`: overwrites them with `beta` and the
/// reflector's tail `v(1..)`, returns `tau`.
fn larfg<T: Float>(x: &mut [T], n: usize, i: usize, m: usize) -> T {
    if m - i <= 1 {
        return T::zero();
    }
    let mut xnorm = column_nrm2(x, n, i, i + 1, m);
    if xnorm == T::zero() {
        return T::zero();
    }
    let mut alpha = x[i * n + i];
    let mut beta = -alpha.hypot(xnorm).copysign(alpha);
    // LAPACK's safe minimum: the smallest normal over half the machine epsilon.
    let two = T::one() + T::one();
    let safmin = T::min_positive_value() / (T::epsilon() / two);
    let mut knt = 0;
    if beta.abs() < safmin {
        let rsafmn = T::one() / safmin;
        loop {
            knt += 1;
            for r in i + 1..m {
                x[r * n + i] = x[r * n + i] * rsafmn;
            }
            beta = beta * rsafmn;
            alpha = alpha * rsafmn;
            if !(beta.abs() < safmin && knt < 20) {
                break;
            }
        }
        xnorm = column_nrm2(x, n, i, i + 1, m);
        beta = -alpha.hypot(xnorm).copysign(alpha);
    }
    let tau = (beta - alpha) / beta;
    let s = T::one() / (alpha - beta);
    for r in i + 1..m {
        x[r * n + i] = x[r * n + i] * s;
    }
    for _ in 0..knt {
        beta = beta * safmin;
    }
    x[i * n + i] = beta;
    tau
}

/// `?larf` from the left: applies `I - tau v v^T`, with `v = A(i..m, i)`, to the columns
/// `c0..n` of rows `i..m`.
fn larf_left<T: Float>(x: &mut [T], n: usize, i: usize, m: usize, c0: usize, tau: T) {
    if tau == T::zero() {
        return;
    }
    for c in c0..n {
        let mut w = T::zero();
        for r in i..m {
            w = w + x[r * n + c] * x[r * n + i];
        }
        let t = -tau * w;
        for r in i..m {
            x[r * n + c] = x[r * n + c] + x[r * n + i] * t;
        }
    }
}

/// Runs a [`Call::Orgqr`].
///
/// # Safety
/// `a` and `q` hold the batch of matrices, `tau` `k` scalars per matrix.
pub(crate) unsafe fn orgqr(call: &Call, a: *mut u8, tau: *mut u8, q: *mut u8) {
    let &Call::Orgqr {
        elem,
        batch,
        m,
        n,
        k,
    } = call
    else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_real!(elem, orgqr_t(a, tau, q, batch, m, n, k)) }
}

/// # Safety
/// As [`orgqr`].
unsafe fn orgqr_t<T: Float + Default>(
    a: *mut u8,
    tau: *mut u8,
    q: *mut u8,
    batch: usize,
    m: usize,
    n: usize,
    k: usize,
) {
    // SAFETY: the operands' sizes.
    let (mut x, taus): (Vec<T>, Vec<T>) = unsafe { (read(a, batch * m * n), read(tau, batch * k)) };
    for b in 0..batch {
        let x = &mut x[b * m * n..(b + 1) * m * n];
        // Columns k..n start as those of the identity.
        for j in k..n {
            for r in 0..m {
                x[r * n + j] = if r == j { T::one() } else { T::zero() };
            }
        }
        for i in (0..k).rev() {
            let t = taus[b * k + i];
            if i + 1 < n {
                x[i * n + i] = T::one();
                larf_left(x, n, i, m, i + 1, t);
            }
            for r in i + 1..m {
                x[r * n + i] = x[r * n + i] * -t;
            }
            x[i * n + i] = T::one() - t;
            for r in 0..i {
                x[r * n + i] = T::zero();
            }
        }
    }
    // SAFETY: the result has the operand's size.
    unsafe { write(q, &x) };
}

/// Runs a [`Call::Syevd`].
///
/// # Safety
/// `a` and `vecs` hold the batch of `n`-by-`n` matrices, `w` `n` scalars and `info` one `s32`
/// per matrix.
pub(crate) unsafe fn syevd(call: &Call, a: *mut u8, vecs: *mut u8, w: *mut u8, info: *mut u8) {
    let &Call::Syevd {
        elem,
        batch,
        n,
        lower,
        vectors,
    } = call
    else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_real!(elem, syevd_t(a, vecs, w, info, batch, n, lower, vectors)) }
}

/// # Safety
/// As [`syevd`].
#[allow(clippy::too_many_arguments)]
unsafe fn syevd_t<T: Float + Default>(
    a: *mut u8,
    vecs: *mut u8,
    w: *mut u8,
    info: *mut u8,
    batch: usize,
    n: usize,
    lower: bool,
    vectors: bool,
) {
    // SAFETY: the operand's size.
    let x: Vec<T> = unsafe { read(a, batch * n * n) };
    let (mut vs, mut ws, mut infos) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..batch {
        let m = &x[b * n * n..(b + 1) * n * n];
        let e = jacobi::syevd(m, n, lower, vectors);
        vs.extend_from_slice(if vectors { &e.vectors } else { m });
        ws.extend(e.values);
        infos.push(e.info);
    }
    // SAFETY: the results' sizes.
    unsafe {
        write(vecs, &vs);
        write(w, &ws);
        write(info, &infos);
    }
}

/// Runs a [`Call::Gesdd`] on the buffers `[a, a_out, s, u, vt, info]`.
///
/// # Safety
/// `a` and `a_out` hold the batch of `m`-by-`n` matrices, `s` `min(m, n)` scalars per matrix,
/// `u` and `vt` the sizes the call's mode gives them, `info` one `s32` per matrix.
pub(crate) unsafe fn gesdd(call: &Call, bufs: [*mut u8; 6]) {
    let Call::Gesdd { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_real!(*elem, gesdd_t(call, bufs)) }
}

/// # Safety
/// As [`gesdd`].
unsafe fn gesdd_t<T: Float + Default>(call: &Call, bufs: [*mut u8; 6]) {
    let &Call::Gesdd {
        batch,
        m,
        n,
        vectors,
        full,
        u_len,
        vt_len,
        ..
    } = call
    else {
        return;
    };
    let [a, a_out, s, u, vt, info] = bufs;
    // SAFETY: the operand's size.
    let x: Vec<T> = unsafe { read(a, batch * m * n) };
    let (mut ss, mut us, mut vts, mut infos) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for b in 0..batch {
        let r = jacobi::gesdd(&x[b * m * n..(b + 1) * m * n], m, n, vectors, full);
        ss.extend(r.values);
        us.extend(r.u);
        vts.extend(r.vt);
        infos.push(r.info);
    }
    if !vectors {
        us = vec![T::zero(); u_len];
        vts = vec![T::zero(); vt_len];
    }
    // Lowering checked that the shapes agree; a mismatch writes nothing rather than overrun.
    if us.len() != u_len || vts.len() != vt_len {
        return;
    }
    // SAFETY: the results' sizes.
    unsafe {
        write(a_out, &x);
        write(s, &ss);
        write(u, &us);
        write(vt, &vts);
        write(info, &infos);
    }
}
