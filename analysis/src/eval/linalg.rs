//! `cholesky`, `triangular-solve` and `fft`, computed in `f64` (or complex `f64`) and rounded
//! to the result type.
//!
//! `cholesky` reads only the triangle it is asked for and zeroes the other one; a matrix that is
//! not positive definite yields NaNs. `fft` runs a mixed-radix Cooley-Tukey transform (a direct
//! DFT for prime lengths) along each transformed dimension; `IFFT` and `IRFFT` divide by the
//! length, and `IRFFT` rebuilds the Hermitian spectrum of its last dimension.

use super::elem::{from_slice, to_vec, Complex};
use super::elementwise::convert;
use super::shape_ops as so;
use super::{Evaluator, R};
use axle_ir::{ArrayLiteral, AttrKey, AttrValue, ElementType, InstId, Literal};

type C = Complex<f64>;

fn c(re: f64, im: f64) -> C {
    Complex::new(re, im)
}

fn conj(x: C) -> C {
    c(x.re, -x.im)
}

/// Loads an array as complex `f64` values (reals get a zero imaginary part).
fn load_c(a: &ArrayLiteral) -> R<Vec<C>> {
    let mut bytes = vec![0u8; a.len() * 16];
    convert(a.ty(), ElementType::C128, &a.data, &mut bytes, false)?;
    Ok(to_vec(&bytes))
}

/// Stores complex values as type `ty` (the real part for real types).
fn store_c(v: &[C], ty: ElementType, dims: &[i64]) -> R<ArrayLiteral> {
    let mut data = vec![0u8; v.len() * ty.byte_size()];
    if ty.is_complex() {
        convert(ElementType::C128, ty, &from_slice(v), &mut data, false)?;
    } else {
        let re: Vec<f64> = v.iter().map(|x| x.re).collect();
        convert(ElementType::F64, ty, &from_slice(&re), &mut data, false)?;
    }
    Ok(so::array(ty, dims, data))
}

fn matrix_dims(a: &ArrayLiteral) -> R<(usize, usize, usize)> {
    let d = &a.shape.dims;
    if d.len() < 2 {
        return Err("expected an operand of rank >= 2".into());
    }
    let (r, cc) = (d[d.len() - 2] as usize, d[d.len() - 1] as usize);
    // From the dimensions, not the element count: with a zero-sized matrix dimension the
    // batch would read as 0 and no longer match the other operand's.
    let batch = d[..d.len() - 2].iter().map(|&k| k as usize).product();
    Ok((batch, r, cc))
}

/// `cholesky`.
pub(crate) fn cholesky(ev: &mut Evaluator, id: InstId, a: &ArrayLiteral) -> R<ArrayLiteral> {
    let lower = ev.m.bool_attr(id, &AttrKey::Lower).unwrap_or(false);
    let (batch, n, n2) = matrix_dims(a)?;
    if n != n2 {
        return Err("cholesky needs square matrices".into());
    }
    if !a.ty().is_floating() {
        return Err(format!("cholesky is not defined for {}", a.ty().name()).into());
    }
    let x = load_c(a)?;
    let mut out = vec![c(0.0, 0.0); x.len()];
    for b in 0..batch {
        let m = &x[b * n * n..(b + 1) * n * n];
        // The lower triangle of the (Hermitian) input, read from the triangle asked for.
        let at = |i: usize, j: usize| -> C {
            if lower {
                m[i * n + j]
            } else {
                conj(m[j * n + i])
            }
        };
        let mut l = vec![c(0.0, 0.0); n * n];
        for j in 0..n {
            let mut s = at(j, j).re;
            for k in 0..j {
                let v = l[j * n + k];
                s -= v.re * v.re + v.im * v.im;
            }
            let d = s.sqrt();
            l[j * n + j] = c(d, 0.0);
            for i in j + 1..n {
                let mut s = at(i, j);
                for k in 0..j {
                    s = s.sub(l[i * n + k].mul(conj(l[j * n + k])));
                }
                l[i * n + j] = c(s.re / d, s.im / d);
            }
        }
        let o = &mut out[b * n * n..(b + 1) * n * n];
        for i in 0..n {
            for j in 0..n {
                if lower {
                    o[i * n + j] = l[i * n + j];
                } else {
                    o[i * n + j] = conj(l[j * n + i]);
                }
            }
        }
    }
    store_c(&out, a.ty(), &a.shape.dims)
}

/// `triangular-solve`.
pub(crate) fn triangular_solve(
    ev: &mut Evaluator,
    id: InstId,
    a: &ArrayLiteral,
    b: &ArrayLiteral,
) -> R<ArrayLiteral> {
    let mm = ev.m;
    let left = mm.bool_attr(id, &AttrKey::LeftSide).unwrap_or(false);
    let lower = mm.bool_attr(id, &AttrKey::Lower).unwrap_or(false);
    let unit = mm.bool_attr(id, &AttrKey::UnitDiagonal).unwrap_or(false);
    let trans = match mm.attr(id, &AttrKey::TransposeA) {
        Some(AttrValue::Ident(s)) => s.to_string(),
        None => "NO_TRANSPOSE".into(),
        _ => return Err("bad transpose_a".into()),
    };
    let (transpose, adjoint) = match trans.as_str() {
        "NO_TRANSPOSE" => (false, false),
        "TRANSPOSE" => (true, false),
        "ADJOINT" => (true, true),
        t => return Err(format!("unknown transpose_a {t}").into()),
    };
    let (batch, m, m2) = matrix_dims(a)?;
    let (bb, br, bc) = matrix_dims(b)?;
    if m != m2 || bb != batch || (left && br != m) || (!left && bc != m) {
        return Err("triangular-solve operand shapes do not match".into());
    }
    let av = load_c(a)?;
    let bv = load_c(b)?;
    let out = solve_triangular(
        &av,
        &bv,
        TriSolve {
            batch,
            m,
            rows: br,
            cols: bc,
            left,
            lower,
            unit,
            transpose,
            adjoint,
        },
    );
    store_c(&out, b.ty(), &b.shape.dims)
}

/// A batched triangular solve: `op(T) X = B` (`left`) or `X op(T) = B`, where `T` is the
/// `lower` or upper triangle of the `m`-by-`m` matrices (unit diagonal if `unit`), `op` is the
/// identity, the transpose or the conjugate transpose, and `B` is `rows`-by-`cols`.
pub(crate) struct TriSolve {
    pub batch: usize,
    pub m: usize,
    pub rows: usize,
    pub cols: usize,
    pub left: bool,
    pub lower: bool,
    pub unit: bool,
    pub transpose: bool,
    pub adjoint: bool,
}

/// Solves [`TriSolve`] by substitution; `av` and `bv` are the batched matrices, row-major.
pub(crate) fn solve_triangular(av: &[C], bv: &[C], p: TriSolve) -> Vec<C> {
    let TriSolve {
        batch,
        m,
        rows: br,
        cols: bc,
        left,
        lower,
        unit,
        transpose,
        adjoint,
    } = p;
    let mut out = vec![c(0.0, 0.0); bv.len()];
    for k in 0..batch {
        let am = &av[k * m * m..(k + 1) * m * m];
        // T = op(tri(a)).
        let tri = |i: usize, j: usize| -> C {
            if i == j && unit {
                return c(1.0, 0.0);
            }
            if (lower && j > i) || (!lower && j < i) {
                return c(0.0, 0.0);
            }
            am[i * m + j]
        };
        let t = |i: usize, j: usize| -> C {
            if transpose {
                let v = tri(j, i);
                if adjoint {
                    conj(v)
                } else {
                    v
                }
            } else {
                tri(i, j)
            }
        };
        let t_lower = lower != transpose;
        let bm = &bv[k * br * bc..(k + 1) * br * bc];
        let om = &mut out[k * br * bc..(k + 1) * br * bc];
        if left {
            // T X = B, column by column.
            for col in 0..bc {
                let order: Vec<usize> = if t_lower {
                    (0..m).collect()
                } else {
                    (0..m).rev().collect()
                };
                for &i in &order {
                    let mut s = bm[i * bc + col];
                    for j in 0..m {
                        if j != i && ((t_lower && j < i) || (!t_lower && j > i)) {
                            s = s.sub(t(i, j).mul(om[j * bc + col]));
                        }
                    }
                    om[i * bc + col] = s.div(t(i, i));
                }
            }
        } else {
            // X T = B, row by row: x[r][j] = (b[r][j] - sum over i != j of x[r][i] T[i][j]) / T[j][j].
            for row in 0..br {
                let order: Vec<usize> = if t_lower {
                    (0..m).rev().collect()
                } else {
                    (0..m).collect()
                };
                for &j in &order {
                    let mut s = bm[row * bc + j];
                    for i in 0..m {
                        if i != j && ((t_lower && i > j) || (!t_lower && i < j)) {
                            s = s.sub(om[row * bc + i].mul(t(i, j)));
                        }
                    }
                    om[row * bc + j] = s.div(t(j, j));
                }
            }
        }
    }
    out
}

fn smallest_factor(n: usize) -> usize {
    let mut p = 2;
    while p * p <= n {
        if n.is_multiple_of(p) {
            return p;
        }
        p += 1;
    }
    n
}

/// Unnormalized DFT of `x` with exponent sign `sign` (-1 forward, +1 inverse).
fn dft(x: &[C], sign: f64) -> Vec<C> {
    let n = x.len();
    if n <= 1 {
        return x.to_vec();
    }
    let tw = |num: usize, den: usize| -> C {
        let ang = sign * 2.0 * std::f64::consts::PI * (num % den) as f64 / den as f64;
        c(ang.cos(), ang.sin())
    };
    let p = smallest_factor(n);
    if p == n {
        return (0..n)
            .map(|k| {
                let mut s = c(0.0, 0.0);
                for (j, &v) in x.iter().enumerate() {
                    s = s.add(v.mul(tw(j * k, n)));
                }
                s
            })
            .collect();
    }
    let m = n / p;
    let subs: Vec<Vec<C>> = (0..p)
        .map(|r| dft(&(0..m).map(|t| x[r + p * t]).collect::<Vec<_>>(), sign))
        .collect();
    (0..n)
        .map(|k| {
            let mut s = c(0.0, 0.0);
            for (r, sub) in subs.iter().enumerate() {
                s = s.add(sub[k % m].mul(tw(r * k, n)));
            }
            s
        })
        .collect()
}

/// Applies `f` to every line of `v` (dimensions `dims`) along `axis`.
fn along_axis(v: &mut [C], dims: &[i64], axis: usize, mut f: impl FnMut(&mut Vec<C>)) {
    let len = dims[axis] as usize;
    let inner: usize = so::numel(&dims[axis + 1..]);
    let outer: usize = so::numel(&dims[..axis]);
    let mut line = Vec::with_capacity(len);
    for o in 0..outer {
        for i in 0..inner {
            line.clear();
            line.extend((0..len).map(|k| v[(o * len + k) * inner + i]));
            f(&mut line);
            for (k, &x) in line.iter().enumerate() {
                v[(o * len + k) * inner + i] = x;
            }
        }
    }
}

/// `fft`.
pub(crate) fn fft(ev: &mut Evaluator, id: InstId, a: &ArrayLiteral) -> R<Literal> {
    let m = ev.m;
    let kind = match m.attr(id, &AttrKey::FftType) {
        Some(AttrValue::Ident(s)) => s.to_string(),
        _ => return Err("fft needs fft_type".into()),
    };
    let lengths = ev.ints(id, AttrKey::FftLength)?.to_vec();
    let shape = ev.out_array(id)?;
    let rank = a.shape.rank();
    let l = lengths.len();
    if l == 0 || l > rank {
        return Err("bad fft_length".into());
    }
    let first = rank - l;
    let out_dims = shape.dims.to_vec();
    let result = match kind.as_str() {
        "FFT" | "IFFT" => {
            let inverse = kind == "IFFT";
            let mut v = load_c(a)?;
            let dims = a.shape.dims.to_vec();
            for ax in first..rank {
                along_axis(&mut v, &dims, ax, |line| {
                    let n = line.len() as f64;
                    let mut r = dft(line, if inverse { 1.0 } else { -1.0 });
                    if inverse {
                        r.iter_mut().for_each(|x| *x = c(x.re / n, x.im / n));
                    }
                    *line = r;
                });
            }
            store_c(&v, shape.ty, &out_dims)?
        }
        "RFFT" => {
            let mut v = load_c(a)?;
            let dims = a.shape.dims.to_vec();
            for ax in first..rank {
                along_axis(&mut v, &dims, ax, |line| *line = dft(line, -1.0));
            }
            // Keep the first n/2 + 1 entries of the last dimension.
            let full = so::array(ElementType::C128, &dims, from_slice(&v));
            let mut bounds: Vec<[i64; 3]> = dims.iter().map(|&d| [0, d, 1]).collect();
            bounds[rank - 1][1] = out_dims[rank - 1];
            let cut = so::slice(&full, &bounds);
            store_c(&to_vec::<C>(&cut.data), shape.ty, &out_dims)?
        }
        "IRFFT" => {
            let mut v = load_c(a)?;
            let in_dims = a.shape.dims.to_vec();
            for ax in first..rank - 1 {
                along_axis(&mut v, &in_dims, ax, |line| {
                    let n = line.len() as f64;
                    *line = dft(line, 1.0)
                        .into_iter()
                        .map(|x| c(x.re / n, x.im / n))
                        .collect();
                });
            }
            let n = out_dims[rank - 1] as usize;
            let half = in_dims[rank - 1] as usize;
            let rows = v.len().checked_div(half).unwrap_or(0);
            let mut out = Vec::with_capacity(rows * n);
            for r in 0..rows {
                let h = &v[r * half..(r + 1) * half];
                let spec: Vec<C> = (0..n)
                    .map(|k| if k < half { h[k] } else { conj(h[n - k]) })
                    .collect();
                let t = dft(&spec, 1.0);
                out.extend(t.into_iter().map(|x| c(x.re / n as f64, 0.0)));
            }
            store_c(&out, shape.ty, &out_dims)?
        }
        k => return Err(format!("unknown fft_type {k}").into()),
    };
    Ok(Literal::Array(result))
}
