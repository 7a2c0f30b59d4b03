//! The LAPACK custom calls JAX emits for linear algebra on CPU (they stay in XLA's optimized
//! CPU dumps), for `s`, `d`, `c` and `z` types: `lapack_?potrf_ffi` (Cholesky),
//! `lapack_?getrf_ffi` (LU with partial pivoting), `lapack_?trsm_ffi` (triangular solve),
//! `lapack_?geqrf_ffi`, `lapack_?geqp3_ffi` (with column pivoting) and `lapack_?orgqr_ffi` /
//! `lapack_?ungqr_ffi` (Householder QR),
//! `lapack_?gtsv_ffi` (tridiagonal solve), `lapack_?syevd_ffi` / `lapack_?heevd_ffi`
//! (symmetric and Hermitian eigendecomposition), `lapack_?gesdd_ffi` / `lapack_?gesvd_ffi`
//! (SVD; the two LAPACK algorithms define the same decomposition, computed here by one),
//! `lapack_?ormqr_ffi` / `lapack_?unmqr_ffi` (applying a QR factorization's `Q`),
//! `lapack_?sytrd_ffi` / `lapack_?hetrd_ffi` (reduction to tridiagonal form),
//! `lapack_?gehrd_ffi` (reduction to Hessenberg form), `lapack_?gees_ffi` (Schur
//! decomposition) and `lapack_?geev_ffi` (the general eigenproblem), and JAX's own
//! `tridiagonal_solve_perturbed_ffi` (the tridiagonal solve of inverse iteration).
//!
//! Each follows its LAPACK routine's contract, batched over leading dimensions: `potrf` leaves
//! the other triangle as it was and reports the first non-positive leading minor in `info`;
//! `getrf` picks the first largest pivot (`i?amax`), returns 1-based pivots and the first zero
//! pivot in `info`, in `f64` (complex `f64`) arithmetic, so it agrees with LAPACK up to
//! rounding. The others run in the operand's precision, through the implementations the `cpu`
//! backend's runtime shares: [`crate::cholesky::potf2`], [`crate::trsm::solve`],
//! [`crate::householder`] (`geqrf` with `?larfg`'s reflectors, `ungqr`),
//! [`crate::tridiagonal::gtsv`] (JAX's diagonals of length `n`; the first three results are
//! LAPACK's overwritten diagonals, the fourth the solution), [`crate::jacobi`],
//! [`crate::householder::unmqr`] (`left` and `transpose` from the backend config; `transpose`
//! is the adjoint for complex types), [`crate::reduction`] (`sytrd`/`hetrd` return the
//! reflectors, the real `d` and `e`, `tau` and `info = 0`; `gehrd` the reflectors, `tau` and
//! `info = 0`, for the config's 1-based `low` and `high`), [`crate::schur::gees`] (`mode` V or
//! N; `sort` must be N, the only value JAX sends; results `(T, Z, wr, wi, sdim, info)` for real
//! types and `(T, Z, w, sdim, info)` for complex ones, `sdim = 0`, `Z` zeros with `mode = N`),
//! [`crate::geev::geev`] (`compute_left` / `compute_right` V or N; results
//! `(wr, wi, vl, vr, info)` for real types, `(w, vl, vr, info)` for complex ones, the vectors
//! always complex as JAX's kernel unpacks them, zeros where not asked for) and
//! [`crate::tridiagonal::solve_perturbed`] (the solution only).
//!
//! Eigen- and singular vectors are defined only up to a unit factor, so they are not LAPACK's
//! bits ([`crate::jacobi`] says what is). The first result of `syevd`/`heevd` (LAPACK's
//! overwritten input) is the eigenvectors with `mode = V`, else the operand unchanged;
//! eigenvalues and singular values are of the real type; `U` and `V^H` are zeros when
//! `gesdd`'s `mode` is `N`. The other LAPACK calls are refused by name.

use super::elem::{from_slice, to_vec, Complex};
use super::elementwise::convert;
use super::shape_ops as so;
use super::{arr, Evaluator, R};
use crate::float_mode::with_float_mode;
use crate::lapack_scalar::LapackScalar;
use crate::{geev, householder, jacobi, reduction, schur, tridiagonal};
use axle_ir::{ArrayLiteral, AttrKey, AttrValue, ElementType, InstId, Literal, Shape};
use num_traits::{Float, NumCast, ToPrimitive, Zero};

/// Runs `$f::<T>(..)` with `T` the scalar type of element type `$ty` (`f32`, `f64` or a
/// complex of either; anything else is an error).
macro_rules! by_type {
    ($ty:expr, $f:ident ( $($arg:expr),* )) => {
        match $ty {
            ElementType::F32 => $f::<f32>($($arg),*),
            ElementType::F64 => $f::<f64>($($arg),*),
            ElementType::C64 => $f::<num_complex::Complex<f32>>($($arg),*),
            ElementType::C128 => $f::<num_complex::Complex<f64>>($($arg),*),
            t => Err(format!("LAPACK calls take f32, f64, c64 or c128 operands, not {}", t.name()).into()),
        }
    };
}

type C = Complex<f64>;

fn c(re: f64) -> C {
    Complex::new(re, 0.0)
}

fn load(a: &ArrayLiteral) -> R<Vec<C>> {
    let mut bytes = vec![0u8; a.len() * 16];
    convert(a.ty(), ElementType::C128, &a.data, &mut bytes, false)?;
    Ok(to_vec(&bytes))
}

fn store(v: &[C], ty: ElementType, dims: &[i64]) -> R<ArrayLiteral> {
    let mut data = vec![0u8; v.len() * ty.byte_size()];
    if ty.is_complex() {
        convert(ElementType::C128, ty, &from_slice(v), &mut data, false)?;
    } else {
        let re: Vec<f64> = v.iter().map(|x| x.re).collect();
        convert(ElementType::F64, ty, &from_slice(&re), &mut data, false)?;
    }
    Ok(so::array(ty, dims, data))
}

fn s32s(v: &[i32], dims: &[i64]) -> ArrayLiteral {
    so::array(
        ElementType::S32,
        dims,
        v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    )
}

/// A byte attribute of the FFI backend config (`{uplo = 76 : ui8, ...}`) as a character.
fn config_char(ev: &Evaluator, id: InstId, key: &str) -> Option<char> {
    let text = match ev.m.attr(id, &AttrKey::BackendConfig) {
        Some(AttrValue::Raw(s)) | Some(AttrValue::Str(s)) => s.to_string(),
        _ => return None,
    };
    let start = text.find(&format!("{key} ="))? + key.len() + 2;
    let num: String = text[start..]
        .trim_start()
        .chars()
        .take_while(|ch| ch.is_ascii_digit())
        .collect();
    num.parse::<u8>().ok().map(|b| b as char)
}

/// The text of a field of the FFI backend config (`{left = true, low = 1 : i32}`) up to its
/// type or the next field: `true`, `1`, ...
fn config_field(ev: &Evaluator, id: InstId, key: &str) -> Option<String> {
    let text = match ev.m.attr(id, &AttrKey::BackendConfig) {
        Some(AttrValue::Raw(s)) | Some(AttrValue::Str(s)) => s.to_string(),
        _ => return None,
    };
    let pat = format!("{key} =");
    let at = text.match_indices(&pat).map(|(i, _)| i).find(|&i| {
        // The key itself, not the end of a longer one.
        let before = text.as_bytes()[..i].last().copied();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == b'_')
    })?;
    let rest = text[at + pat.len()..].trim_start();
    Some(
        rest.chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-')
            .collect(),
    )
}

/// A boolean field of the FFI backend config.
fn config_bool(ev: &Evaluator, id: InstId, key: &str) -> R<bool> {
    match config_field(ev, id, key).as_deref() {
        Some("true") => Ok(true),
        Some("false") => Ok(false),
        _ => Err(format!("the backend config needs {key} = true or false").into()),
    }
}

/// An integer field of the FFI backend config.
fn config_int(ev: &Evaluator, id: InstId, key: &str) -> R<i64> {
    config_field(ev, id, key)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| format!("the backend config needs an integer {key}").into())
}

/// `(batch, rows, cols)` of an operand of rank >= 2.
fn mat(a: &ArrayLiteral) -> R<(usize, usize, usize)> {
    let d = &a.shape.dims;
    if d.len() < 2 {
        return Err("expected an operand of rank >= 2".into());
    }
    let (r, cc) = (d[d.len() - 2] as usize, d[d.len() - 1] as usize);
    Ok((a.len().checked_div(r * cc).unwrap_or(0), r, cc))
}

fn batch_dims(a: &ArrayLiteral, drop: usize) -> Vec<i64> {
    a.shape.dims[..a.shape.rank() - drop].to_vec()
}

/// Evaluates a LAPACK custom call, or `None` if `target` is not one.
pub(crate) fn lapack(
    ev: &mut Evaluator,
    id: InstId,
    target: &str,
    ops: &[&Literal],
) -> Option<R<Literal>> {
    if target == "tridiagonal_solve_perturbed_ffi" {
        let ftz = ev.ftz;
        return Some(with_float_mode(ftz, || gtsv_perturbed(ops)));
    }
    let name = target.strip_prefix("lapack_")?.strip_suffix("_ffi")?;
    let (prefix, routine) = name.split_at(1);
    if !matches!(prefix, "s" | "d" | "c" | "z") {
        return None;
    }
    let ftz = ev.ftz;
    Some(match routine {
        "potrf" => with_float_mode(ftz, || potrf(ev, id, ops)),
        "getrf" => with_float_mode(ftz, || getrf(ops)),
        "trsm" => trsm(ev, id, ops),
        "geqrf" => with_float_mode(ftz, || geqrf(ops)),
        "geqp3" => with_float_mode(ftz, || geqp3(ev, id, ops)),
        "orgqr" if matches!(prefix, "s" | "d") => with_float_mode(ftz, || orgqr(ops)),
        "ungqr" if matches!(prefix, "c" | "z") => with_float_mode(ftz, || orgqr(ops)),
        "syevd" if matches!(prefix, "s" | "d") => with_float_mode(ftz, || syevd(ev, id, ops)),
        "heevd" if matches!(prefix, "c" | "z") => with_float_mode(ftz, || syevd(ev, id, ops)),
        "gesdd" | "gesvd" => with_float_mode(ftz, || gesdd(ev, id, ops)),
        "gtsv" => with_float_mode(ftz, || gtsv(ops)),
        "ormqr" if matches!(prefix, "s" | "d") => with_float_mode(ftz, || ormqr(ev, id, ops)),
        "unmqr" if matches!(prefix, "c" | "z") => with_float_mode(ftz, || ormqr(ev, id, ops)),
        "sytrd" if matches!(prefix, "s" | "d") => with_float_mode(ftz, || sytrd(ev, id, ops)),
        "hetrd" if matches!(prefix, "c" | "z") => with_float_mode(ftz, || sytrd(ev, id, ops)),
        "gehrd" => with_float_mode(ftz, || gehrd(ev, id, ops)),
        "gees" => with_float_mode(ftz, || gees(ev, id, ops)),
        "geev" => with_float_mode(ftz, || geev(ev, id, ops)),
        _ => Err(format!("the evaluator does not support the LAPACK call {target}").into()),
    })
}

fn potrf(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    let lower = match config_char(ev, id, "uplo") {
        Some('L') => true,
        Some('U') => false,
        _ => return Err("potrf needs uplo = L or U".into()),
    };
    let (factors, info) = super::linalg::potrf(a, lower)?;
    Ok(Literal::Tuple(vec![
        Literal::Array(factors),
        Literal::Array(s32s(&info, &batch_dims(a, 2))),
    ]))
}

fn getrf(ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    let (batch, m, n) = mat(a)?;
    let k = m.min(n);
    let mut v = load(a)?;
    let mut piv = vec![0i32; batch * k];
    let mut info = vec![0i32; batch];
    for b in 0..batch {
        let x = &mut v[b * m * n..(b + 1) * m * n];
        for j in 0..k {
            // First row with the largest |re| + |im| (i?amax's measure).
            let mut p = j;
            let mut best = -1.0;
            for i in j..m {
                let e = x[i * n + j];
                let mag = e.re.abs() + e.im.abs();
                if mag > best {
                    best = mag;
                    p = i;
                }
            }
            piv[b * k + j] = p as i32 + 1;
            if x[p * n + j].re == 0.0 && x[p * n + j].im == 0.0 {
                if info[b] == 0 {
                    info[b] = j as i32 + 1;
                }
                continue;
            }
            if p != j {
                for col in 0..n {
                    x.swap(j * n + col, p * n + col);
                }
            }
            let inv = Complex::new(1.0, 0.0).div(x[j * n + j]);
            for i in j + 1..m {
                x[i * n + j] = x[i * n + j].mul(inv);
            }
            for i in j + 1..m {
                let l = x[i * n + j];
                for col in j + 1..n {
                    x[i * n + col] = x[i * n + col].sub(l.mul(x[j * n + col]));
                }
            }
        }
    }
    let bd = batch_dims(a, 2);
    let mut pd = bd.clone();
    pd.push(k as i64);
    Ok(Literal::Tuple(vec![
        Literal::Array(store(&v, a.ty(), &a.shape.dims)?),
        Literal::Array(s32s(&piv, &pd)),
        Literal::Array(s32s(&info, &bd)),
    ]))
}

fn trsm(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    if ops.len() < 2 {
        return Err("trsm takes the triangular matrix and the right-hand sides".into());
    }
    let (a, b) = (arr(ops[0])?, arr(ops[1])?);
    let left = matches!(config_char(ev, id, "side"), Some('L') | None);
    let lower = matches!(config_char(ev, id, "uplo"), Some('L') | None);
    let unit = matches!(config_char(ev, id, "diag"), Some('U'));
    let (transpose, adjoint) = match config_char(ev, id, "trans_x") {
        Some('N') | None => (false, false),
        Some('T') => (true, false),
        Some('C') => (true, true),
        Some(t) => return Err(format!("unknown trans_x {t}").into()),
    };
    let (batch, m, m2) = mat(a)?;
    let (bb, br, bc) = mat(b)?;
    if m != m2 || bb != batch || (left && br != m) || (!left && bc != m) {
        return Err("trsm operand shapes do not match".into());
    }
    let p = crate::trsm::TriSolve {
        batch,
        m,
        rows: br,
        cols: bc,
        left,
        lower,
        unit,
        transpose,
        adjoint,
    };
    Ok(Literal::Array(super::linalg::solve(a, b, p, ev.ftz)?))
}

/// The operand as values of `T` (exact: `T` is the operand's own type).
fn load_t<T: LapackScalar>(a: &ArrayLiteral) -> R<Vec<T>> {
    let part = |x: f64| <T::Real as NumCast>::from(x).unwrap_or_else(T::Real::nan);
    Ok(load(a)?
        .into_iter()
        .map(|z| T::from_parts(part(z.re), part(z.im)))
        .collect())
}

fn store_t<T: LapackScalar>(v: &[T], ty: ElementType, dims: &[i64]) -> R<ArrayLiteral> {
    let wide = |x: T::Real| x.to_f64().unwrap_or(f64::NAN);
    let w: Vec<C> = v
        .iter()
        .map(|z| Complex::new(wide(z.re()), wide(z.im())))
        .collect();
    store(&w, ty, dims)
}

/// Real values (eigen- and singular values) as an array of the real type `ty`.
fn store_real<F: Float>(v: &[F], ty: ElementType, dims: &[i64]) -> R<ArrayLiteral> {
    let w: Vec<C> = v
        .iter()
        .map(|x| c(x.to_f64().unwrap_or(f64::NAN)))
        .collect();
    store(&w, ty, dims)
}

fn geqrf(ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    by_type!(a.ty(), geqrf_t(a))
}

fn geqrf_t<T: LapackScalar>(a: &ArrayLiteral) -> R<Literal> {
    let (batch, m, n) = mat(a)?;
    let k = m.min(n);
    let mut v = load_t::<T>(a)?;
    let mut tau = vec![T::default(); batch * k];
    for b in 0..batch {
        householder::geqrf(
            &mut v[b * m * n..(b + 1) * m * n],
            m,
            n,
            &mut tau[b * k..(b + 1) * k],
        );
    }
    let mut td = batch_dims(a, 2);
    td.push(k as i64);
    Ok(Literal::Tuple(vec![
        Literal::Array(store_t(&v, a.ty(), &a.shape.dims)?),
        Literal::Array(store_t(&tau, a.ty(), &td)?),
    ]))
}

fn geqp3(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    if ops.len() != 2 {
        return Err("geqp3 takes a and jpvt".into());
    }
    let (a, p) = (arr(ops[0])?, arr(ops[1])?);
    let (_, m, n) = mat(a)?;
    let bd = batch_dims(a, 2);
    let with = |last: usize| [&bd[..], &[last as i64]].concat();
    let want = [
        (a.ty(), a.shape.dims.to_vec()),
        (ElementType::S32, with(n)),
        (a.ty(), with(m.min(n))),
    ];
    if p.ty() != ElementType::S32
        || p.shape.dims[..] != with(n)[..]
        || result_leaves(ev, id) != want
    {
        return Err(
            "geqp3 takes a and s32 jpvt of shape [batch..., n] and returns (a, jpvt, tau)".into(),
        );
    }
    by_type!(a.ty(), geqp3_t(a, p))
}

fn geqp3_t<T: LapackScalar>(a: &ArrayLiteral, p: &ArrayLiteral) -> R<Literal> {
    let (batch, m, n) = mat(a)?;
    let k = m.min(n);
    let mut v = load_t::<T>(a)?;
    let mut jpvt: Vec<i32> = p.to_vec::<i32>().ok_or("geqp3 needs s32 jpvt")?;
    let mut tau = vec![T::default(); batch * k];
    for b in 0..batch {
        householder::geqp3(
            &mut v[b * m * n..(b + 1) * m * n],
            m,
            n,
            &mut jpvt[b * n..(b + 1) * n],
            &mut tau[b * k..(b + 1) * k],
        );
    }
    let bd = batch_dims(a, 2);
    Ok(Literal::Tuple(vec![
        Literal::Array(store_t(&v, a.ty(), &a.shape.dims)?),
        Literal::Array(s32s(&jpvt, &p.shape.dims)),
        Literal::Array(store_t(&tau, a.ty(), &[&bd[..], &[k as i64]].concat())?),
    ]))
}

fn orgqr(ops: &[&Literal]) -> R<Literal> {
    if ops.len() != 2 {
        return Err("orgqr/ungqr takes the reflectors and tau".into());
    }
    let (a, t) = (arr(ops[0])?, arr(ops[1])?);
    by_type!(a.ty(), orgqr_t(a, t))
}

fn orgqr_t<T: LapackScalar>(a: &ArrayLiteral, t: &ArrayLiteral) -> R<Literal> {
    let (batch, m, n) = mat(a)?;
    let k = *t.shape.dims.last().ok_or("orgqr needs tau")? as usize;
    if k > n || n > m || t.ty() != a.ty() || t.len() != batch * k {
        return Err("orgqr/ungqr needs m >= n >= k and tau of a's type".into());
    }
    let mut v = load_t::<T>(a)?;
    let tau = load_t::<T>(t)?;
    for b in 0..batch {
        householder::ungqr(
            &mut v[b * m * n..(b + 1) * m * n],
            m,
            n,
            &tau[b * k..(b + 1) * k],
        );
    }
    Ok(Literal::Array(store_t(&v, a.ty(), &a.shape.dims)?))
}

fn gtsv(ops: &[&Literal]) -> R<Literal> {
    if ops.len() != 4 {
        return Err("gtsv takes dl, d, du and b".into());
    }
    let b = arr(ops[3])?;
    by_type!(b.ty(), gtsv_t(ops))
}

fn gtsv_t<T: LapackScalar>(ops: &[&Literal]) -> R<Literal> {
    let (dl, d, du, b) = (arr(ops[0])?, arr(ops[1])?, arr(ops[2])?, arr(ops[3])?);
    let (batch, n, nrhs) = mat(b)?;
    let bd = batch_dims(b, 2);
    let mut diag_dims = bd.clone();
    diag_dims.push(n as i64);
    for x in [dl, d, du] {
        if x.ty() != b.ty() || x.shape.dims[..] != diag_dims[..] {
            return Err("gtsv's diagonals must be of b's type and shape [batch..., n]".into());
        }
    }
    let (mut l, mut dd, mut u, mut x) = (
        load_t::<T>(dl)?,
        load_t::<T>(d)?,
        load_t::<T>(du)?,
        load_t::<T>(b)?,
    );
    let mut info = Vec::with_capacity(batch);
    for k in 0..batch {
        let r = k * n..(k + 1) * n;
        info.push(tridiagonal::gtsv(
            &mut l[r.clone()],
            &mut dd[r.clone()],
            &mut u[r],
            &mut x[k * n * nrhs..(k + 1) * n * nrhs],
            n,
            nrhs,
        ));
    }
    Ok(Literal::Tuple(vec![
        Literal::Array(store_t(&l, b.ty(), &diag_dims)?),
        Literal::Array(store_t(&dd, b.ty(), &diag_dims)?),
        Literal::Array(store_t(&u, b.ty(), &diag_dims)?),
        Literal::Array(store_t(&x, b.ty(), &b.shape.dims)?),
        Literal::Array(s32s(&info, &bd)),
    ]))
}

fn gtsv_perturbed(ops: &[&Literal]) -> R<Literal> {
    if ops.len() != 4 {
        return Err("tridiagonal_solve_perturbed takes dl, d, du and b".into());
    }
    let b = arr(ops[3])?;
    by_type!(b.ty(), gtsv_perturbed_t(ops))
}

fn gtsv_perturbed_t<T: LapackScalar>(ops: &[&Literal]) -> R<Literal> {
    let (dl, d, du, b) = (arr(ops[0])?, arr(ops[1])?, arr(ops[2])?, arr(ops[3])?);
    let (batch, n, nrhs) = mat(b)?;
    let mut diag_dims = batch_dims(b, 2);
    diag_dims.push(n as i64);
    for x in [dl, d, du] {
        if x.ty() != b.ty() || x.shape.dims[..] != diag_dims[..] {
            return Err(
                "tridiagonal_solve_perturbed's diagonals must be of b's type and shape \
                 [batch..., n]"
                    .into(),
            );
        }
    }
    let (l, dd, u, mut x) = (
        load_t::<T>(dl)?,
        load_t::<T>(d)?,
        load_t::<T>(du)?,
        load_t::<T>(b)?,
    );
    for k in 0..batch {
        let r = k * n..(k + 1) * n;
        tridiagonal::solve_perturbed(
            &l[r.clone()],
            &dd[r.clone()],
            &u[r],
            &mut x[k * n * nrhs..(k + 1) * n * nrhs],
            n,
            nrhs,
        );
    }
    Ok(Literal::Array(store_t(&x, b.ty(), &b.shape.dims)?))
}

fn ormqr(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    if ops.len() != 3 {
        return Err("ormqr/unmqr takes the reflectors, tau and c".into());
    }
    let left = config_bool(ev, id, "left")?;
    let adjoint = config_bool(ev, id, "transpose")?;
    let a = arr(ops[0])?;
    by_type!(a.ty(), ormqr_t(ops, left, adjoint))
}

fn ormqr_t<T: LapackScalar>(ops: &[&Literal], left: bool, adjoint: bool) -> R<Literal> {
    let (a, t, c) = (arr(ops[0])?, arr(ops[1])?, arr(ops[2])?);
    let (batch, m, na) = mat(a)?;
    let (cb, rows, cols) = mat(c)?;
    let k = *t.shape.dims.last().ok_or("ormqr needs tau")? as usize;
    if t.ty() != a.ty()
        || c.ty() != a.ty()
        || cb != batch
        || t.len() != batch * k
        || k > m.min(na)
        || (if left { rows } else { cols }) != m
    {
        return Err(
            "ormqr/unmqr needs k <= min(m, n) reflectors of c's type and c with m \
                    rows (left) or columns (right)"
                .into(),
        );
    }
    let (v, tau, mut x) = (load_t::<T>(a)?, load_t::<T>(t)?, load_t::<T>(c)?);
    for b in 0..batch {
        householder::unmqr(
            &v[b * m * na..(b + 1) * m * na],
            m,
            na,
            &tau[b * k..(b + 1) * k],
            &mut x[b * rows * cols..(b + 1) * rows * cols],
            rows,
            cols,
            left,
            adjoint,
        );
    }
    Ok(Literal::Array(store_t(&x, c.ty(), &c.shape.dims)?))
}

fn sytrd(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    let lower = match config_char(ev, id, "uplo") {
        Some('L') => true,
        Some('U') => false,
        _ => return Err("sytrd/hetrd needs uplo = L or U".into()),
    };
    let (_, n, n2) = mat(a)?;
    let leaves = result_leaves(ev, id);
    if n != n2 || leaves.len() != 5 {
        return Err("sytrd/hetrd takes square matrices and returns (a, d, e, tau, info)".into());
    }
    let bd = batch_dims(a, 2);
    let with = |last: usize| [&bd[..], &[last as i64]].concat();
    let real = match a.ty() {
        ElementType::C64 => ElementType::F32,
        ElementType::C128 => ElementType::F64,
        t => t,
    };
    let k = n.saturating_sub(1);
    let want = [
        (a.ty(), a.shape.dims.to_vec()),
        (real, with(n)),
        (real, with(k)),
        (a.ty(), with(k)),
        (ElementType::S32, bd.clone()),
    ];
    if leaves != want {
        return Err("sytrd/hetrd's result shape does not match its operand".into());
    }
    by_type!(a.ty(), sytrd_t(a, real, lower))
}

fn sytrd_t<T: LapackScalar>(a: &ArrayLiteral, real: ElementType, lower: bool) -> R<Literal> {
    let (batch, n, _) = mat(a)?;
    let k = n.saturating_sub(1);
    let mut x = load_t::<T>(a)?;
    let mut d = vec![T::Real::zero(); batch * n];
    let mut e = vec![T::Real::zero(); batch * k];
    let mut tau = vec![T::default(); batch * k];
    for b in 0..batch {
        reduction::hetrd(
            &mut x[b * n * n..(b + 1) * n * n],
            n,
            lower,
            &mut d[b * n..(b + 1) * n],
            &mut e[b * k..(b + 1) * k],
            &mut tau[b * k..(b + 1) * k],
        );
    }
    let bd = batch_dims(a, 2);
    let with = |last: usize| [&bd[..], &[last as i64]].concat();
    Ok(Literal::Tuple(vec![
        Literal::Array(store_t(&x, a.ty(), &a.shape.dims)?),
        Literal::Array(store_real(&d, real, &with(n))?),
        Literal::Array(store_real(&e, real, &with(k))?),
        Literal::Array(store_t(&tau, a.ty(), &with(k))?),
        Literal::Array(s32s(&vec![0; batch], &bd)),
    ]))
}

fn gehrd(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    let (_, n, n2) = mat(a)?;
    let (low, high) = (config_int(ev, id, "low")?, config_int(ev, id, "high")?);
    let ok = if n == 0 {
        low == 1 && high == 0
    } else {
        1 <= low && low <= high && high <= n as i64
    };
    if n != n2 || !ok {
        return Err("gehrd needs square matrices and 1 <= low <= high <= n".into());
    }
    let bd = batch_dims(a, 2);
    let want = [
        (a.ty(), a.shape.dims.to_vec()),
        (a.ty(), [&bd[..], &[n.saturating_sub(1) as i64]].concat()),
        (ElementType::S32, bd.clone()),
    ];
    if result_leaves(ev, id) != want {
        return Err("gehrd's result shape does not match its operand".into());
    }
    by_type!(a.ty(), gehrd_t(a, low as usize, high as usize))
}

fn gehrd_t<T: LapackScalar>(a: &ArrayLiteral, low: usize, high: usize) -> R<Literal> {
    let (batch, n, _) = mat(a)?;
    let k = n.saturating_sub(1);
    let mut x = load_t::<T>(a)?;
    let mut tau = vec![T::default(); batch * k];
    for b in 0..batch {
        reduction::gehrd(
            &mut x[b * n * n..(b + 1) * n * n],
            n,
            low,
            high,
            &mut tau[b * k..(b + 1) * k],
        );
    }
    let bd = batch_dims(a, 2);
    Ok(Literal::Tuple(vec![
        Literal::Array(store_t(&x, a.ty(), &a.shape.dims)?),
        Literal::Array(store_t(&tau, a.ty(), &[&bd[..], &[k as i64]].concat())?),
        Literal::Array(s32s(&vec![0; batch], &bd)),
    ]))
}

/// A `V`/`N` field of the FFI backend config as a boolean.
fn config_mode(ev: &Evaluator, id: InstId, routine: &str, key: &str) -> R<bool> {
    match config_char(ev, id, key) {
        Some('V') => Ok(true),
        Some('N') => Ok(false),
        _ => Err(format!("{routine} needs {key} = V or N").into()),
    }
}

/// The complex type of the same precision as `ty`.
fn complex_of(ty: ElementType) -> ElementType {
    match ty {
        ElementType::F32 => ElementType::C64,
        ElementType::F64 => ElementType::C128,
        t => t,
    }
}

/// The real type of the same precision as `ty`.
fn real_of(ty: ElementType) -> ElementType {
    match ty {
        ElementType::C64 => ElementType::F32,
        ElementType::C128 => ElementType::F64,
        t => t,
    }
}

fn gees(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    let vectors = config_mode(ev, id, "gees", "mode")?;
    match config_char(ev, id, "sort") {
        Some('N') => {}
        Some(c) => {
            return Err(format!(
                "gees with sort = {c} (eigenvalues ordered by a select function) is not supported"
            )
            .into())
        }
        None => return Err("gees needs sort = N".into()),
    }
    let (_, n, n2) = mat(a)?;
    if n != n2 {
        return Err("gees needs square matrices".into());
    }
    let bd = batch_dims(a, 2);
    let wd = [&bd[..], &[n as i64]].concat();
    let mut want = vec![
        (a.ty(), a.shape.dims.to_vec()),
        (a.ty(), a.shape.dims.to_vec()),
    ];
    if a.ty().is_complex() {
        want.push((a.ty(), wd.clone()));
    } else {
        want.extend([(a.ty(), wd.clone()), (a.ty(), wd.clone())]);
    }
    want.extend([(ElementType::S32, bd.clone()), (ElementType::S32, bd)]);
    if result_leaves(ev, id) != want {
        return Err("gees's result shape does not match its operand".into());
    }
    by_type!(a.ty(), gees_t(a, vectors))
}

fn gees_t<T: LapackScalar>(a: &ArrayLiteral, vectors: bool) -> R<Literal> {
    let (batch, n, _) = mat(a)?;
    let x = load_t::<T>(a)?;
    let schur::SchurBatch { t, z, w, info } = schur::gees_batch(&x, batch, n, vectors);
    let bd = batch_dims(a, 2);
    let wd = [&bd[..], &[n as i64]].concat();
    let mut out = vec![
        Literal::Array(store_t(&t, a.ty(), &a.shape.dims)?),
        Literal::Array(store_t(&z, a.ty(), &a.shape.dims)?),
    ];
    if T::COMPLEX {
        let wc: Vec<T> = w.iter().map(|c| T::from_parts(c.re, c.im)).collect();
        out.push(Literal::Array(store_t(&wc, a.ty(), &wd)?));
    } else {
        let re: Vec<T::Real> = w.iter().map(|c| c.re).collect();
        let im: Vec<T::Real> = w.iter().map(|c| c.im).collect();
        out.push(Literal::Array(store_real(&re, a.ty(), &wd)?));
        out.push(Literal::Array(store_real(&im, a.ty(), &wd)?));
    }
    out.push(Literal::Array(s32s(&vec![0; batch], &bd)));
    out.push(Literal::Array(s32s(&info, &bd)));
    Ok(Literal::Tuple(out))
}

fn geev(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    let left = config_mode(ev, id, "geev", "compute_left")?;
    let right = config_mode(ev, id, "geev", "compute_right")?;
    let (_, n, n2) = mat(a)?;
    if n != n2 {
        return Err("geev needs square matrices".into());
    }
    let bd = batch_dims(a, 2);
    let wd = [&bd[..], &[n as i64]].concat();
    let cty = complex_of(a.ty());
    let mut want = if a.ty().is_complex() {
        vec![(a.ty(), wd)]
    } else {
        vec![(a.ty(), wd.clone()), (a.ty(), wd)]
    };
    want.extend([
        (cty, a.shape.dims.to_vec()),
        (cty, a.shape.dims.to_vec()),
        (ElementType::S32, bd),
    ]);
    if result_leaves(ev, id) != want {
        return Err("geev's result shape does not match its operand".into());
    }
    by_type!(a.ty(), geev_t(a, left, right))
}

fn geev_t<T: LapackScalar>(a: &ArrayLiteral, left: bool, right: bool) -> R<Literal> {
    let (batch, n, _) = mat(a)?;
    let x = load_t::<T>(a)?;
    let geev::EigBatch { w, vl, vr, info } = geev::geev_batch(&x, batch, n, left, right);
    let wide = |v: &[num_complex::Complex<T::Real>]| -> Vec<C> {
        let f = |x: T::Real| x.to_f64().unwrap_or(f64::NAN);
        v.iter().map(|z| Complex::new(f(z.re), f(z.im))).collect()
    };
    let bd = batch_dims(a, 2);
    let wd = [&bd[..], &[n as i64]].concat();
    let cty = complex_of(a.ty());
    let mut out = Vec::new();
    if T::COMPLEX {
        out.push(Literal::Array(store(&wide(&w), cty, &wd)?));
    } else {
        let re: Vec<T::Real> = w.iter().map(|c| c.re).collect();
        let im: Vec<T::Real> = w.iter().map(|c| c.im).collect();
        let rty = real_of(a.ty());
        out.push(Literal::Array(store_real(&re, rty, &wd)?));
        out.push(Literal::Array(store_real(&im, rty, &wd)?));
    }
    out.push(Literal::Array(store(&wide(&vl), cty, &a.shape.dims)?));
    out.push(Literal::Array(store(&wide(&vr), cty, &a.shape.dims)?));
    out.push(Literal::Array(s32s(&info, &bd)));
    Ok(Literal::Tuple(out))
}

/// The leaves of `id`'s result shape: element type and dimensions.
fn result_leaves(ev: &Evaluator, id: InstId) -> Vec<(ElementType, Vec<i64>)> {
    let leaf = |s: &Shape| match s {
        Shape::Array(a) => (a.ty, a.dims.to_vec()),
        _ => (ElementType::Pred, Vec::new()),
    };
    match ev.m.shape(id) {
        Shape::Tuple(ids) => ids.iter().map(|&i| leaf(ev.m.shape_of(i))).collect(),
        s => vec![leaf(s)],
    }
}

fn syevd(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    let lower = match config_char(ev, id, "uplo") {
        Some('L') => true,
        Some('U') => false,
        _ => return Err("syevd/heevd needs uplo = L or U".into()),
    };
    let vectors = match config_char(ev, id, "mode") {
        Some('V') => true,
        Some('N') => false,
        _ => return Err("syevd/heevd needs mode = V or N".into()),
    };
    let (_, n, n2) = mat(a)?;
    if n != n2 {
        return Err("syevd/heevd needs square matrices".into());
    }
    let leaves = result_leaves(ev, id);
    if leaves.len() != 3 {
        return Err("syevd/heevd returns (vectors, values, info)".into());
    }
    let wty = leaves[1].0;
    by_type!(a.ty(), syevd_t(a, wty, lower, vectors))
}

fn syevd_t<T: LapackScalar>(
    a: &ArrayLiteral,
    wty: ElementType,
    lower: bool,
    vectors: bool,
) -> R<Literal> {
    let (batch, n, _) = mat(a)?;
    let x = load_t::<T>(a)?;
    let (mut vecs, mut w, mut info) = (Vec::new(), Vec::new(), Vec::new());
    for b in 0..batch {
        let m = &x[b * n * n..(b + 1) * n * n];
        let e = jacobi::syevd(m, n, lower, vectors);
        vecs.extend_from_slice(if vectors { &e.vectors } else { m });
        w.extend(e.values);
        info.push(e.info);
    }
    let bd = batch_dims(a, 2);
    let mut wd = bd.clone();
    wd.push(n as i64);
    Ok(Literal::Tuple(vec![
        Literal::Array(store_t(&vecs, a.ty(), &a.shape.dims)?),
        Literal::Array(store_real(&w, wty, &wd)?),
        Literal::Array(s32s(&info, &bd)),
    ]))
}

fn gesdd(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    let (vectors, full) = match config_char(ev, id, "mode") {
        Some('A') => (true, true),
        Some('S') => (true, false),
        Some('N') => (false, false),
        _ => return Err("gesdd needs mode = A, S or N".into()),
    };
    let leaves = result_leaves(ev, id);
    if leaves.len() != 5 {
        return Err("gesdd returns (a, s, u, vt, info)".into());
    }
    by_type!(a.ty(), gesdd_t(a, &leaves, vectors, full))
}

fn gesdd_t<T: LapackScalar>(
    a: &ArrayLiteral,
    leaves: &[(ElementType, Vec<i64>)],
    vectors: bool,
    full: bool,
) -> R<Literal> {
    let (batch, m, n) = mat(a)?;
    let x = load_t::<T>(a)?;
    let k = m.min(n);
    let count = |d: &[i64]| d.iter().product::<i64>().max(0) as usize;
    let (u_len, vt_len) = (count(&leaves[2].1), count(&leaves[3].1));
    let (mut s, mut u, mut vt, mut info) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for b in 0..batch {
        let r = jacobi::gesdd(&x[b * m * n..(b + 1) * m * n], m, n, vectors, full);
        s.extend(r.values);
        u.extend(r.u);
        vt.extend(r.vt);
        info.push(r.info);
    }
    if !vectors {
        u = vec![T::default(); u_len];
        vt = vec![T::default(); vt_len];
    }
    if s.len() != batch * k
        || count(&leaves[1].1) != batch * k
        || count(&leaves[4].1) != batch
        || u.len() != u_len
        || vt.len() != vt_len
    {
        return Err("gesdd's result shapes do not match its operand and mode".into());
    }
    Ok(Literal::Tuple(vec![
        Literal::Array(a.clone()),
        Literal::Array(store_real(&s, leaves[1].0, &leaves[1].1)?),
        Literal::Array(store_t(&u, a.ty(), &leaves[2].1)?),
        Literal::Array(store_t(&vt, a.ty(), &leaves[3].1)?),
        Literal::Array(s32s(&info, &leaves[4].1)),
    ]))
}
