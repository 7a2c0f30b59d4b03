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
//! - `geqrf`: `?geqr2` with `?larfg`'s reflectors; `geqp3`: `?laqp2` (column pivoting);
//!   `orgqr` / `ungqr`: `?ung2r`
//!   ([`axle_analysis::householder`], the evaluator's too).
//! - `gtsv`: Gaussian elimination with partial pivoting as `?gtsv`, and JAX's perturbed
//!   solve (`tridiagonal_solve_perturbed_ffi`) ([`axle_analysis::tridiagonal`], the
//!   evaluator's too).
//! - `ormqr` / `unmqr`: `?unm2r` ([`axle_analysis::householder::unmqr`]); `sytrd` / `hetrd`
//!   and `gehrd`: `?hetd2` and `?gehd2` ([`axle_analysis::reduction`]), the evaluator's too.
//! - `gees` and `geev`: Hessenberg reduction and `?lahqr`'s shifted QR iteration
//!   ([`axle_analysis::schur::gees`]), then `?trevc`'s eigenvectors
//!   ([`axle_analysis::geev::geev`]), the evaluator's too; eigenvectors are complex for every
//!   type, as JAX's kernel returns them.
//! - `syevd` / `heevd` and `gesdd`: Jacobi's methods ([`axle_analysis::jacobi`], the
//!   evaluator's too), eigenvalues ascending and singular values descending as LAPACK returns
//!   them; vectors are defined up to a unit factor, not LAPACK's bits.

use axle_analysis::lapack_scalar::LapackScalar;
use axle_analysis::trsm::{solve, Field, TriSolve};
use axle_analysis::{cholesky, geev, householder, jacobi, reduction, schur, tridiagonal};
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

/// Runs a [`Call::Geqrf`].
///
/// # Safety
/// `a` and `qr` hold the batch of matrices, `tau` `min(m, n)` scalars per matrix.
pub(crate) unsafe fn geqrf(call: &Call, a: *mut u8, qr: *mut u8, tau: *mut u8) {
    let &Call::Geqrf { elem, batch, m, n } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, geqrf_t(a, qr, tau, batch, m, n)) }
}

/// # Safety
/// As [`geqrf`].
unsafe fn geqrf_t<T: LapackScalar>(
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
    let mut taus = vec![T::default(); batch * k];
    for b in 0..batch {
        householder::geqrf(
            &mut x[b * m * n..(b + 1) * m * n],
            m,
            n,
            &mut taus[b * k..(b + 1) * k],
        );
    }
    // SAFETY: the results' sizes.
    unsafe {
        write(qr, &x);
        write(tau, &taus);
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
    unsafe { by_elem!(elem, orgqr_t(a, tau, q, batch, m, n, k)) }
}

/// # Safety
/// As [`orgqr`].
unsafe fn orgqr_t<T: LapackScalar>(
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
        householder::ungqr(
            &mut x[b * m * n..(b + 1) * m * n],
            m,
            n,
            &taus[b * k..(b + 1) * k],
        );
    }
    // SAFETY: the result has the operand's size.
    unsafe { write(q, &x) };
}

/// Runs a [`Call::Gtsv`] on the buffers `[dl, d, du, b, dl_out, d_out, du_out, x, info]`.
///
/// # Safety
/// The three diagonals hold `n` scalars per system, `b` and `x` `n * nrhs`, `info` one `s32`
/// per system.
pub(crate) unsafe fn gtsv(call: &Call, bufs: [*mut u8; 9]) {
    let &Call::Gtsv { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, gtsv_t(call, bufs)) }
}

/// # Safety
/// As [`gtsv`].
unsafe fn gtsv_t<T: LapackScalar>(call: &Call, bufs: [*mut u8; 9]) {
    let &Call::Gtsv { batch, n, nrhs, .. } = call else {
        return;
    };
    let [dl, d, du, b, dl_out, d_out, du_out, x, info] = bufs;
    // SAFETY: the operands' sizes.
    let (mut l, mut dd, mut u, mut rhs): (Vec<T>, Vec<T>, Vec<T>, Vec<T>) = unsafe {
        (
            read(dl, batch * n),
            read(d, batch * n),
            read(du, batch * n),
            read(b, batch * n * nrhs),
        )
    };
    let infos: Vec<i32> = (0..batch)
        .map(|k| {
            tridiagonal::gtsv(
                &mut l[k * n..(k + 1) * n],
                &mut dd[k * n..(k + 1) * n],
                &mut u[k * n..(k + 1) * n],
                &mut rhs[k * n * nrhs..(k + 1) * n * nrhs],
                n,
                nrhs,
            )
        })
        .collect();
    // SAFETY: the results' sizes.
    unsafe {
        write(dl_out, &l);
        write(d_out, &dd);
        write(du_out, &u);
        write(x, &rhs);
        write(info, &infos);
    }
}

/// Runs a [`Call::Syevd`].
///
/// # Safety
/// `a` and `vecs` hold the batch of `n`-by-`n` matrices, `w` `n` real scalars and `info` one
/// `s32` per matrix.
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
    unsafe { by_elem!(elem, syevd_t(a, vecs, w, info, batch, n, lower, vectors)) }
}

/// # Safety
/// As [`syevd`].
#[allow(clippy::too_many_arguments)]
unsafe fn syevd_t<T: LapackScalar>(
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
/// `a` and `a_out` hold the batch of `m`-by-`n` matrices, `s` `min(m, n)` real scalars per
/// matrix, `u` and `vt` the sizes the call's mode gives them, `info` one `s32` per matrix.
pub(crate) unsafe fn gesdd(call: &Call, bufs: [*mut u8; 6]) {
    let Call::Gesdd { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(*elem, gesdd_t(call, bufs)) }
}

/// # Safety
/// As [`gesdd`].
unsafe fn gesdd_t<T: LapackScalar>(call: &Call, bufs: [*mut u8; 6]) {
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
        us = vec![T::default(); u_len];
        vts = vec![T::default(); vt_len];
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

/// Runs a [`Call::GtsvPerturbed`] on the buffers `[dl, d, du, b, x]`.
///
/// # Safety
/// The three diagonals hold `n` scalars per system, `b` and `x` `n * nrhs`.
pub(crate) unsafe fn gtsv_perturbed(call: &Call, bufs: [*mut u8; 5]) {
    let &Call::GtsvPerturbed { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, gtsv_perturbed_t(call, bufs)) }
}

/// # Safety
/// As [`gtsv_perturbed`].
unsafe fn gtsv_perturbed_t<T: LapackScalar>(call: &Call, bufs: [*mut u8; 5]) {
    let &Call::GtsvPerturbed { batch, n, nrhs, .. } = call else {
        return;
    };
    let [dl, d, du, b, x] = bufs;
    // SAFETY: the operands' sizes.
    let (l, dd, u, mut rhs): (Vec<T>, Vec<T>, Vec<T>, Vec<T>) = unsafe {
        (
            read(dl, batch * n),
            read(d, batch * n),
            read(du, batch * n),
            read(b, batch * n * nrhs),
        )
    };
    for k in 0..batch {
        tridiagonal::solve_perturbed(
            &l[k * n..(k + 1) * n],
            &dd[k * n..(k + 1) * n],
            &u[k * n..(k + 1) * n],
            &mut rhs[k * n * nrhs..(k + 1) * n * nrhs],
            n,
            nrhs,
        );
    }
    // SAFETY: the result has `b`'s size.
    unsafe { write(x, &rhs) };
}

/// Runs a [`Call::Ormqr`] on the buffers `[a, tau, c, out]`.
///
/// # Safety
/// `a` holds `batch` `m`-by-`na` matrices, `tau` `k` scalars per matrix, `c` and `out` `batch`
/// `rows`-by-`cols` matrices.
pub(crate) unsafe fn ormqr(call: &Call, bufs: [*mut u8; 4]) {
    let &Call::Ormqr { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, ormqr_t(call, bufs)) }
}

/// # Safety
/// As [`ormqr`].
unsafe fn ormqr_t<T: LapackScalar>(call: &Call, bufs: [*mut u8; 4]) {
    let &Call::Ormqr {
        batch,
        m,
        na,
        k,
        rows,
        cols,
        left,
        adjoint,
        ..
    } = call
    else {
        return;
    };
    let [a, tau, c, out] = bufs;
    // SAFETY: the operands' sizes.
    let (v, taus, mut x): (Vec<T>, Vec<T>, Vec<T>) = unsafe {
        (
            read(a, batch * m * na),
            read(tau, batch * k),
            read(c, batch * rows * cols),
        )
    };
    for b in 0..batch {
        householder::unmqr(
            &v[b * m * na..(b + 1) * m * na],
            m,
            na,
            &taus[b * k..(b + 1) * k],
            &mut x[b * rows * cols..(b + 1) * rows * cols],
            rows,
            cols,
            left,
            adjoint,
        );
    }
    // SAFETY: the result has `c`'s size.
    unsafe { write(out, &x) };
}

/// Runs a [`Call::Sytrd`] on the buffers `[a, a_out, d, e, tau, info]`.
///
/// # Safety
/// `a` and `a_out` hold `batch` `n`-by-`n` matrices, `d` `n` real scalars, `e` and `tau`
/// `n - 1` (real and of the operand's type) and `info` one `s32` per matrix.
pub(crate) unsafe fn sytrd(call: &Call, bufs: [*mut u8; 6]) {
    let &Call::Sytrd { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, sytrd_t(call, bufs)) }
}

/// # Safety
/// As [`sytrd`].
unsafe fn sytrd_t<T: LapackScalar>(call: &Call, bufs: [*mut u8; 6]) {
    let &Call::Sytrd {
        batch, n, lower, ..
    } = call
    else {
        return;
    };
    let [a, a_out, d, e, tau, info] = bufs;
    let k = n.saturating_sub(1);
    // SAFETY: the operand's size.
    let mut x: Vec<T> = unsafe { read(a, batch * n * n) };
    let mut ds = vec![T::Real::default(); batch * n];
    let mut es = vec![T::Real::default(); batch * k];
    let mut taus = vec![T::default(); batch * k];
    for b in 0..batch {
        reduction::hetrd(
            &mut x[b * n * n..(b + 1) * n * n],
            n,
            lower,
            &mut ds[b * n..(b + 1) * n],
            &mut es[b * k..(b + 1) * k],
            &mut taus[b * k..(b + 1) * k],
        );
    }
    // SAFETY: the results' sizes.
    unsafe {
        write(a_out, &x);
        write(d, &ds);
        write(e, &es);
        write(tau, &taus);
        write(info, &vec![0i32; batch]);
    }
}

/// Runs a [`Call::Gehrd`] on the buffers `[a, a_out, tau, info]`.
///
/// # Safety
/// `a` and `a_out` hold `batch` `n`-by-`n` matrices, `tau` `n - 1` scalars and `info` one
/// `s32` per matrix.
pub(crate) unsafe fn gehrd(call: &Call, bufs: [*mut u8; 4]) {
    let &Call::Gehrd { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, gehrd_t(call, bufs)) }
}

/// # Safety
/// As [`gehrd`].
unsafe fn gehrd_t<T: LapackScalar>(call: &Call, bufs: [*mut u8; 4]) {
    let &Call::Gehrd {
        batch, n, ilo, ihi, ..
    } = call
    else {
        return;
    };
    let [a, a_out, tau, info] = bufs;
    let k = n.saturating_sub(1);
    // SAFETY: the operand's size.
    let mut x: Vec<T> = unsafe { read(a, batch * n * n) };
    let mut taus = vec![T::default(); batch * k];
    for b in 0..batch {
        reduction::gehrd(
            &mut x[b * n * n..(b + 1) * n * n],
            n,
            ilo,
            ihi,
            &mut taus[b * k..(b + 1) * k],
        );
    }
    // SAFETY: the results' sizes.
    unsafe {
        write(a_out, &x);
        write(tau, &taus);
        write(info, &vec![0i32; batch]);
    }
}

/// Runs a [`Call::Geqp3`] on the buffers `[a, jpvt, qr, jpvt_out, tau]`.
///
/// # Safety
/// `a` and `qr` hold `batch` `m`-by-`n` matrices, `jpvt` and `jpvt_out` `n` `s32`s and `tau`
/// `min(m, n)` scalars per matrix.
pub(crate) unsafe fn geqp3(call: &Call, bufs: [*mut u8; 5]) {
    let &Call::Geqp3 { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, geqp3_t(call, bufs)) }
}

/// # Safety
/// As [`geqp3`].
unsafe fn geqp3_t<T: LapackScalar>(call: &Call, bufs: [*mut u8; 5]) {
    let &Call::Geqp3 { batch, m, n, .. } = call else {
        return;
    };
    let [a, jpvt, qr, jpvt_out, tau] = bufs;
    let k = m.min(n);
    // SAFETY: the operands' sizes.
    let (mut x, mut p): (Vec<T>, Vec<i32>) =
        unsafe { (read(a, batch * m * n), read(jpvt, batch * n)) };
    let mut taus = vec![T::default(); batch * k];
    for b in 0..batch {
        householder::geqp3(
            &mut x[b * m * n..(b + 1) * m * n],
            m,
            n,
            &mut p[b * n..(b + 1) * n],
            &mut taus[b * k..(b + 1) * k],
        );
    }
    // SAFETY: the results' sizes.
    unsafe {
        write(qr, &x);
        write(jpvt_out, &p);
        write(tau, &taus);
    }
}

/// Runs a [`Call::Gees`] on its buffers (`[a, t, z, wr, wi, sdim, info]` for real types,
/// `[a, t, z, w, sdim, info]` for complex ones).
///
/// # Safety
/// `a`, `t` and `z` hold `batch` `n`-by-`n` matrices, the eigenvalue buffers `n` scalars and
/// `sdim` and `info` one `s32` per matrix.
pub(crate) unsafe fn gees(call: &Call, bufs: &[*mut u8]) {
    let &Call::Gees { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, gees_t(call, bufs)) }
}

/// # Safety
/// As [`gees`].
unsafe fn gees_t<T: LapackScalar>(call: &Call, bufs: &[*mut u8]) {
    let &Call::Gees {
        batch, n, vectors, ..
    } = call
    else {
        return;
    };
    if bufs.len() != if T::COMPLEX { 6 } else { 7 } {
        return;
    }
    // SAFETY: the operand's size.
    let x: Vec<T> = unsafe { read(bufs[0], batch * n * n) };
    let schur::SchurBatch { t, z, w, info } = schur::gees_batch(&x, batch, n, vectors);
    let tail = &bufs[3..];
    // SAFETY: the results' sizes.
    unsafe {
        write(bufs[1], &t);
        write(bufs[2], &z);
        let rest = write_eigenvalues::<T>(tail, &w);
        write(rest[0], &vec![0i32; batch]);
        write(rest[1], &info);
    }
}

/// Writes eigenvalues `w` to the first buffers of `bufs` as LAPACK hands them back: one buffer
/// of complex values for a complex `T`, the real and the imaginary parts in two buffers of
/// `T`'s own type for a real `T`. Returns the buffers after them.
///
/// # Safety
/// The first one or two buffers hold `w.len()` scalars of that type each.
unsafe fn write_eigenvalues<'b, T: LapackScalar>(
    bufs: &'b [*mut u8],
    w: &[Complex<T::Real>],
) -> &'b [*mut u8] {
    // SAFETY: the caller's contract; complex values are pairs of their real type, as `c64`
    // and `c128` are laid out.
    unsafe {
        if T::COMPLEX {
            write(bufs[0], w);
            &bufs[1..]
        } else {
            let re: Vec<T::Real> = w.iter().map(|c| c.re).collect();
            let im: Vec<T::Real> = w.iter().map(|c| c.im).collect();
            write(bufs[0], &re);
            write(bufs[1], &im);
            &bufs[2..]
        }
    }
}

/// Runs a [`Call::Geev`] on its buffers (`[a, wr, wi, vl, vr, info]` for real types,
/// `[a, w, vl, vr, info]` for complex ones).
///
/// # Safety
/// `a` holds `batch` `n`-by-`n` matrices, `vl` and `vr` as many complex ones, the eigenvalue
/// buffers `n` scalars (real parts and imaginary parts, or complex) and `info` one `s32` per
/// matrix.
pub(crate) unsafe fn geev(call: &Call, bufs: &[*mut u8]) {
    let &Call::Geev { elem, .. } = call else {
        return;
    };
    // SAFETY: forwarded from the caller.
    unsafe { by_elem!(elem, geev_t(call, bufs)) }
}

/// # Safety
/// As [`geev`].
unsafe fn geev_t<T: LapackScalar>(call: &Call, bufs: &[*mut u8]) {
    let &Call::Geev {
        batch,
        n,
        left,
        right,
        ..
    } = call
    else {
        return;
    };
    if bufs.len() != if T::COMPLEX { 5 } else { 6 } {
        return;
    }
    // SAFETY: the operand's size.
    let x: Vec<T> = unsafe { read(bufs[0], batch * n * n) };
    let geev::EigBatch { w, vl, vr, info } = geev::geev_batch(&x, batch, n, left, right);
    // SAFETY: the results' sizes (complex values are pairs of their real type, as `c64` and
    // `c128` are laid out).
    unsafe {
        let rest = write_eigenvalues::<T>(&bufs[1..], &w);
        write(rest[0], &vl);
        write(rest[1], &vr);
        write(rest[2], &info);
    }
}
