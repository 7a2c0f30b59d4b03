//! The LAPACK custom calls JAX emits for linear algebra on CPU (they stay in XLA's optimized
//! CPU dumps): `lapack_?potrf_ffi` (Cholesky), `lapack_?getrf_ffi` (LU with partial pivoting),
//! `lapack_?trsm_ffi` (triangular solve), `lapack_?geqrf_ffi` and `lapack_?orgqr_ffi` /
//! `lapack_?ungqr_ffi` (Householder QR), for `s`, `d`, `c` and `z` types (QR for `s` and `d`).
//!
//! Each follows its LAPACK routine's contract, batched over leading dimensions: `potrf` leaves
//! the other triangle as it was and reports the first non-positive leading minor in `info`;
//! `getrf` picks the first largest pivot (`i?amax`), returns 1-based pivots and the first zero
//! pivot in `info`; `geqrf` builds reflectors with `?larfg`'s conventions. Arithmetic runs in
//! `f64` (complex `f64`), so results agree with LAPACK's up to rounding, except `potrf` and
//! `trsm`, which run in the operand's precision (`spotrf` and `strsm` in `f32`), as LAPACK does,
//! through the implementations the `cpu` backend's runtime shares
//! ([`crate::cholesky::potf2`], [`crate::trsm::solve`]).
//!
//! `lapack_?syevd_ffi` (symmetric eigendecomposition) and `lapack_?gesdd_ffi` (SVD), real
//! types only, run [`crate::jacobi`] in the operand's precision, the routines the `cpu`
//! backend's runtime calls too: their vectors are defined only up to sign, so they are not
//! LAPACK's bits (the module says what is). The first result (LAPACK's overwritten input) is
//! the eigenvectors for `syevd` with `mode = V`, else the operand unchanged; `U` and `V^T`
//! are zeros when `gesdd`'s `mode` is `N`. Complex `heevd` and `gesdd` and the general
//! eigenproblem (`geev`) are refused by name.

use super::elem::{from_slice, to_vec, Complex};
use super::elementwise::convert;
use super::shape_ops as so;
use super::{arr, Evaluator, R};
use crate::float_mode::with_float_mode;
use crate::jacobi;
use axle_ir::{ArrayLiteral, AttrKey, AttrValue, ElementType, InstId, Literal, Shape};
use num_traits::Float;

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
        "geqrf" if matches!(prefix, "s" | "d") => with_float_mode(ftz, || geqrf(ops)),
        "orgqr" if matches!(prefix, "s" | "d") => with_float_mode(ftz, || orgqr(ops)),
        "syevd" if matches!(prefix, "s" | "d") => with_float_mode(ftz, || syevd(ev, id, ops)),
        "gesdd" if matches!(prefix, "s" | "d") => with_float_mode(ftz, || gesdd(ev, id, ops)),
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

fn geqrf(ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    let (batch, m, n) = mat(a)?;
    let k = m.min(n);
    let mut v = load(a)?;
    let mut tau = vec![c(0.0); batch * k];
    for b in 0..batch {
        let x = &mut v[b * m * n..(b + 1) * m * n];
        for i in 0..k {
            // ?larfg on (x[i][i], x[i+1..m][i]).
            let alpha = x[i * n + i].re;
            let xnorm = (i + 1..m)
                .map(|r| x[r * n + i].re)
                .fold(0.0f64, |s, e| s.hypot(e));
            let t = if xnorm == 0.0 {
                0.0
            } else {
                let beta = -alpha.hypot(xnorm).copysign(alpha);
                let t = (beta - alpha) / beta;
                let scale = 1.0 / (alpha - beta);
                for r in i + 1..m {
                    x[r * n + i] = c(x[r * n + i].re * scale);
                }
                x[i * n + i] = c(beta);
                t
            };
            tau[b * k + i] = c(t);
            // Apply H = I - t v v^T (v = [1; x[i+1..m][i]]) to the columns right of i.
            if t != 0.0 {
                for col in i + 1..n {
                    let mut w = x[i * n + col].re;
                    for r in i + 1..m {
                        w += x[r * n + i].re * x[r * n + col].re;
                    }
                    let tw = t * w;
                    x[i * n + col] = c(x[i * n + col].re - tw);
                    for r in i + 1..m {
                        x[r * n + col] = c(x[r * n + col].re - tw * x[r * n + i].re);
                    }
                }
            }
        }
    }
    let mut td = batch_dims(a, 2);
    td.push(k as i64);
    Ok(Literal::Tuple(vec![
        Literal::Array(store(&v, a.ty(), &a.shape.dims)?),
        Literal::Array(store(&tau, a.ty(), &td)?),
    ]))
}

fn orgqr(ops: &[&Literal]) -> R<Literal> {
    let (a, t) = (arr(ops[0])?, arr(ops[1])?);
    let (batch, m, n) = mat(a)?;
    let k = *t.shape.dims.last().ok_or("orgqr needs tau")? as usize;
    if k > n || n > m {
        return Err("orgqr needs m >= n >= k".into());
    }
    let mut v = load(a)?;
    let tau = load(t)?;
    for b in 0..batch {
        let x = &mut v[b * m * n..(b + 1) * m * n];
        // ?org2r: columns k..n start as unit vectors.
        for j in k..n {
            for r in 0..m {
                x[r * n + j] = c(if r == j { 1.0 } else { 0.0 });
            }
        }
        for i in (0..k).rev() {
            let ti = tau[b * k + i].re;
            if i + 1 < n {
                x[i * n + i] = c(1.0);
                for col in i + 1..n {
                    let mut w = 0.0;
                    for r in i..m {
                        w += x[r * n + i].re * x[r * n + col].re;
                    }
                    let tw = ti * w;
                    for r in i..m {
                        x[r * n + col] = c(x[r * n + col].re - tw * x[r * n + i].re);
                    }
                }
            }
            for r in i + 1..m {
                x[r * n + i] = c(-ti * x[r * n + i].re);
            }
            x[i * n + i] = c(1.0 - ti);
            for r in 0..i {
                x[r * n + i] = c(0.0);
            }
        }
    }
    Ok(Literal::Array(store(&v, a.ty(), &a.shape.dims)?))
}

/// The leaves of `id`'s result shape.
fn result_dims(ev: &Evaluator, id: InstId) -> Vec<Vec<i64>> {
    match ev.m.shape(id) {
        Shape::Tuple(ids) => ids
            .iter()
            .map(|&i| match ev.m.shape_of(i) {
                Shape::Array(a) => a.dims.to_vec(),
                _ => Vec::new(),
            })
            .collect(),
        Shape::Array(a) => vec![a.dims.to_vec()],
        _ => Vec::new(),
    }
}

/// A real operand as values of `T` (`f32` for `s` routines: exact, the operand is `f32`).
fn load_as<T: Float>(a: &ArrayLiteral) -> R<Vec<T>> {
    Ok(load(a)?
        .into_iter()
        .map(|x| T::from(x.re).unwrap_or_else(T::nan))
        .collect())
}

fn store_as<T: Float>(v: &[T], ty: ElementType, dims: &[i64]) -> R<ArrayLiteral> {
    let wide: Vec<C> = v
        .iter()
        .map(|x| c(x.to_f64().unwrap_or(f64::NAN)))
        .collect();
    store(&wide, ty, dims)
}

fn syevd(ev: &Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let a = arr(ops[0])?;
    let lower = match config_char(ev, id, "uplo") {
        Some('L') => true,
        Some('U') => false,
        _ => return Err("syevd needs uplo = L or U".into()),
    };
    let vectors = match config_char(ev, id, "mode") {
        Some('V') => true,
        Some('N') => false,
        _ => return Err("syevd needs mode = V or N".into()),
    };
    let (batch, n, n2) = mat(a)?;
    if n != n2 {
        return Err("syevd needs square matrices".into());
    }
    if a.ty() == ElementType::F32 {
        syevd_t::<f32>(a, batch, n, lower, vectors)
    } else {
        syevd_t::<f64>(a, batch, n, lower, vectors)
    }
}

fn syevd_t<T: Float>(
    a: &ArrayLiteral,
    batch: usize,
    n: usize,
    lower: bool,
    vectors: bool,
) -> R<Literal> {
    let x = load_as::<T>(a)?;
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
        Literal::Array(store_as(&vecs, a.ty(), &a.shape.dims)?),
        Literal::Array(store_as(&w, a.ty(), &wd)?),
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
    let dims = result_dims(ev, id);
    if dims.len() != 5 {
        return Err("gesdd returns (a, s, u, vt, info)".into());
    }
    if a.ty() == ElementType::F32 {
        gesdd_t::<f32>(a, &dims, vectors, full)
    } else {
        gesdd_t::<f64>(a, &dims, vectors, full)
    }
}

fn gesdd_t<T: Float>(a: &ArrayLiteral, dims: &[Vec<i64>], vectors: bool, full: bool) -> R<Literal> {
    let (batch, m, n) = mat(a)?;
    let x = load_as::<T>(a)?;
    let k = m.min(n);
    let count = |d: &[i64]| d.iter().product::<i64>().max(0) as usize;
    let (u_len, vt_len) = (count(&dims[2]), count(&dims[3]));
    let (mut s, mut u, mut vt, mut info) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for b in 0..batch {
        let r = jacobi::gesdd(&x[b * m * n..(b + 1) * m * n], m, n, vectors, full);
        s.extend(r.values);
        u.extend(r.u);
        vt.extend(r.vt);
        info.push(r.info);
    }
    if !vectors {
        u = vec![T::zero(); u_len];
        vt = vec![T::zero(); vt_len];
    }
    if s.len() != batch * k
        || count(&dims[1]) != batch * k
        || count(&dims[4]) != batch
        || u.len() != u_len
        || vt.len() != vt_len
    {
        return Err("gesdd's result shapes do not match its operand and mode".into());
    }
    Ok(Literal::Tuple(vec![
        Literal::Array(a.clone()),
        Literal::Array(store_as(&s, a.ty(), &dims[1])?),
        Literal::Array(store_as(&u, a.ty(), &dims[2])?),
        Literal::Array(store_as(&vt, a.ty(), &dims[3])?),
        Literal::Array(s32s(&info, &dims[4])),
    ]))
}
