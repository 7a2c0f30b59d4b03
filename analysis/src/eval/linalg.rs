//! `cholesky`, `triangular-solve` and `fft`, computed in the precision XLA CPU computes them in:
//! `f64` arithmetic for `f64` and `c128`, `f32` arithmetic for every other floating type (`f32`,
//! `c64`, and the narrow floats, which XLA computes in `f32` too), then rounded to the result
//! type. Computing `f32` operands in `f64` would be more accurate than XLA, and on inputs near
//! `f32`'s range it overflows differently (an `f64` intermediate of `1e40` stays finite where
//! XLA's becomes infinite); this was checked against XLA 0.10.2 op by op (`tests/xla` of this
//! crate holds the cases).
//!
//! `cholesky` reads only the triangle it is asked for and zeroes the other one; when a
//! matrix is not positive definite (a diagonal of the factor is NaN), the whole factor of that
//! matrix is NaN (a real NaN for complex types), as XLA's Cholesky expansion makes it.
//! `triangular-solve` substitutes, in real arithmetic for real types. `fft` runs a mixed-radix
//! Cooley-Tukey transform (a direct DFT for prime lengths) along each transformed dimension,
//! innermost first; `IFFT` and `IRFFT` divide by the length, and `IRFFT` rebuilds the
//! Hermitian spectrum of its last dimension.

use super::elem::{from_slice, to_vec, Complex, Float};
use super::elementwise::convert;
use super::shape_ops as so;
use super::{Evaluator, R};
use axle_ir::{ArrayLiteral, AttrKey, AttrValue, ElementType, InstId, Literal};

type C<F> = Complex<F>;

fn c<F: Float>(re: F, im: F) -> C<F> {
    Complex::new(re, im)
}

fn zero<F: Float>() -> C<F> {
    c(F::ZERO, F::ZERO)
}

fn conj<F: Float>(x: C<F>) -> C<F> {
    c(x.re, -x.im)
}

/// Whether XLA computes these ops on type `ty` in `f64` (else in `f32`).
fn in_f64(ty: ElementType) -> bool {
    matches!(ty, ElementType::F64 | ElementType::C128)
}

/// Loads an array as complex values of compute type `F` (reals get a zero imaginary part).
/// Exact: `F` is `f64`, or `f32` for a type no wider than `f32`.
fn load_c<F: Float>(a: &ArrayLiteral) -> R<Vec<C<F>>> {
    let mut bytes = vec![0u8; a.len() * 16];
    convert(a.ty(), ElementType::C128, &a.data, &mut bytes, false)?;
    Ok(to_vec::<Complex<f64>>(&bytes)
        .into_iter()
        .map(|x| c(F::from_f64(x.re), F::from_f64(x.im)))
        .collect())
}

/// Stores complex values as type `ty` (the real part for real types), rounding once.
fn store_c<F: Float>(v: &[C<F>], ty: ElementType, dims: &[i64]) -> R<ArrayLiteral> {
    let mut data = vec![0u8; v.len() * ty.byte_size()];
    if ty.is_complex() {
        let wide: Vec<Complex<f64>> = v
            .iter()
            .map(|x| Complex::new(x.re.to_f64(), x.im.to_f64()))
            .collect();
        convert(ElementType::C128, ty, &from_slice(&wide), &mut data, false)?;
    } else {
        let re: Vec<f64> = v.iter().map(|x| x.re.to_f64()).collect();
        convert(ElementType::F64, ty, &from_slice(&re), &mut data, false)?;
    }
    Ok(so::array(ty, dims, data))
}

/// Loads a real array as values of compute type `F`.
fn load_real<F: Float>(a: &ArrayLiteral) -> R<Vec<F>> {
    Ok(load_c::<F>(a)?.into_iter().map(|x| x.re).collect())
}

/// Stores real values as type `ty`, rounding once.
fn store_real<F: Float>(v: &[F], ty: ElementType, dims: &[i64]) -> R<ArrayLiteral> {
    let wide: Vec<C<F>> = v.iter().map(|&x| c(x, F::ZERO)).collect();
    store_c(&wide, ty, dims)
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

/// The arithmetic a triangular solve needs, on real (`f32`, `f64`) and complex values: a real
/// solve runs in real arithmetic, as XLA's does (a real value carried as a complex one would
/// meet `0 * inf = NaN` in the imaginary part, and Smith's division would spread it).
trait Field: Copy {
    /// `0`.
    fn zero() -> Self;
    /// `1`.
    fn one() -> Self;
    /// `self - o`.
    fn minus(self, o: Self) -> Self;
    /// `self * o`.
    fn times(self, o: Self) -> Self;
    /// `self / o`.
    fn over(self, o: Self) -> Self;
    /// The complex conjugate (the value itself for reals).
    fn conjugate(self) -> Self;
}

macro_rules! real_field {
    ($($t:ty),*) => {$(
        impl Field for $t {
            fn zero() -> Self {
                0.0
            }
            fn one() -> Self {
                1.0
            }
            fn minus(self, o: Self) -> Self {
                self - o
            }
            fn times(self, o: Self) -> Self {
                self * o
            }
            fn over(self, o: Self) -> Self {
                self / o
            }
            fn conjugate(self) -> Self {
                self
            }
        }
    )*};
}
real_field!(f32, f64);

impl<F: Float> Field for Complex<F> {
    fn zero() -> Self {
        zero()
    }
    fn one() -> Self {
        c(F::ONE, F::ZERO)
    }
    fn minus(self, o: Self) -> Self {
        self.sub(o)
    }
    fn times(self, o: Self) -> Self {
        self.mul(o)
    }
    fn over(self, o: Self) -> Self {
        self.div(o)
    }
    fn conjugate(self) -> Self {
        conj(self)
    }
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
    if in_f64(a.ty()) {
        cholesky_in::<f64>(a, batch, n, lower)
    } else {
        cholesky_in::<f32>(a, batch, n, lower)
    }
}

fn cholesky_in<F: Float>(a: &ArrayLiteral, batch: usize, n: usize, lower: bool) -> R<ArrayLiteral> {
    let x = load_c::<F>(a)?;
    let mut out = vec![zero::<F>(); x.len()];
    for b in 0..batch {
        let m = &x[b * n * n..(b + 1) * n * n];
        // The lower triangle of the (Hermitian) input, read from the triangle asked for.
        let at = |i: usize, j: usize| -> C<F> {
            if lower {
                m[i * n + j]
            } else {
                conj(m[j * n + i])
            }
        };
        let mut l = vec![zero::<F>(); n * n];
        for j in 0..n {
            let mut s = at(j, j).re;
            for k in 0..j {
                let v = l[j * n + k];
                s = s - (v.re * v.re + v.im * v.im);
            }
            let d = s.sqrt();
            l[j * n + j] = c(d, F::ZERO);
            for i in j + 1..n {
                let mut s = at(i, j);
                for k in 0..j {
                    s = s.sub(l[i * n + k].mul(conj(l[j * n + k])));
                }
                l[i * n + j] = c(s.re / d, s.im / d);
            }
        }
        let o = &mut out[b * n * n..(b + 1) * n * n];
        if (0..n).any(|j| l[j * n + j].re.is_nan()) {
            o.fill(c(F::from_f64(f64::NAN), F::ZERO));
            continue;
        }
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
    let p = TriSolve {
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
    solve(a, b, p)
}

/// Solves `p` for the arrays `a` and `b` in the arithmetic XLA uses for `b`'s type (real for
/// real types; `f64` for `f64` and `c128`, `f32` otherwise), rounded to `b`'s type.
pub(crate) fn solve(a: &ArrayLiteral, b: &ArrayLiteral, p: TriSolve) -> R<ArrayLiteral> {
    let (ty, dims) = (b.ty(), &b.shape.dims);
    match (ty.is_complex(), in_f64(ty)) {
        (true, true) => {
            let out = solve_triangular(&load_c::<f64>(a)?, &load_c::<f64>(b)?, p);
            store_c(&out, ty, dims)
        }
        (true, false) => {
            let out = solve_triangular(&load_c::<f32>(a)?, &load_c::<f32>(b)?, p);
            store_c(&out, ty, dims)
        }
        (false, true) => {
            let out = solve_triangular(&load_real::<f64>(a)?, &load_real::<f64>(b)?, p);
            store_real(&out, ty, dims)
        }
        (false, false) => {
            let out = solve_triangular(&load_real::<f32>(a)?, &load_real::<f32>(b)?, p);
            store_real(&out, ty, dims)
        }
    }
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
fn solve_triangular<T: Field>(av: &[T], bv: &[T], p: TriSolve) -> Vec<T> {
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
    let mut out = vec![T::zero(); bv.len()];
    for k in 0..batch {
        let am = &av[k * m * m..(k + 1) * m * m];
        // T = op(tri(a)).
        let tri = |i: usize, j: usize| -> T {
            if i == j && unit {
                return T::one();
            }
            if (lower && j > i) || (!lower && j < i) {
                return T::zero();
            }
            am[i * m + j]
        };
        let t = |i: usize, j: usize| -> T {
            if transpose {
                let v = tri(j, i);
                if adjoint {
                    v.conjugate()
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
                            s = s.minus(t(i, j).times(om[j * bc + col]));
                        }
                    }
                    om[i * bc + col] = s.over(t(i, i));
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
                            s = s.minus(om[row * bc + i].times(t(i, j)));
                        }
                    }
                    om[row * bc + j] = s.over(t(j, j));
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

/// `v` times the twiddle factor `exp(sign * 2 pi i * num / den)`. A factor that is a quarter
/// turn (`1`, `i`, `-1`, `-i`) rotates `v` without multiplying, as FFT libraries' butterflies
/// do (so an infinite component stays infinite instead of meeting a zero in a product); any
/// other factor is computed in `f64`, rounded once to `F`, and multiplied in `F`.
fn twiddle<F: Float>(v: C<F>, num: usize, den: usize, sign: f64) -> C<F> {
    let q = num % den;
    if (4 * q).is_multiple_of(den) {
        // The quarter turns counted counterclockwise.
        let turns = if sign > 0.0 {
            4 * q / den
        } else {
            (4 - 4 * q / den) % 4
        };
        return match turns {
            0 => v,
            1 => c(-v.im, v.re),
            2 => c(-v.re, -v.im),
            _ => c(v.im, -v.re),
        };
    }
    let ang = sign * 2.0 * std::f64::consts::PI * q as f64 / den as f64;
    v.mul(c(F::from_f64(ang.cos()), F::from_f64(ang.sin())))
}

/// Unnormalized DFT of `x` with exponent sign `sign` (-1 forward, +1 inverse), in the
/// arithmetic of `F` (twiddle factors as [`twiddle`] applies them).
fn dft<F: Float>(x: &[C<F>], sign: f64) -> Vec<C<F>> {
    let n = x.len();
    if n <= 1 {
        return x.to_vec();
    }
    let p = smallest_factor(n);
    if p == n {
        return (0..n)
            .map(|k| {
                let mut s = zero();
                for (j, &v) in x.iter().enumerate() {
                    s = s.add(twiddle(v, j * k, n, sign));
                }
                s
            })
            .collect();
    }
    let m = n / p;
    let subs: Vec<Vec<C<F>>> = (0..p)
        .map(|r| dft(&(0..m).map(|t| x[r + p * t]).collect::<Vec<_>>(), sign))
        .collect();
    (0..n)
        .map(|k| {
            let mut s = zero();
            for (r, sub) in subs.iter().enumerate() {
                s = s.add(twiddle(sub[k % m], r * k, n, sign));
            }
            s
        })
        .collect()
}

/// Applies `f` to every line of `v` (dimensions `dims`) along `axis`.
fn along_axis<F: Float>(
    v: &mut [C<F>],
    dims: &[i64],
    axis: usize,
    mut f: impl FnMut(&mut Vec<C<F>>),
) {
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
    let result = if in_f64(shape.ty) {
        fft_in::<f64>(&kind, a, first, shape.ty, &out_dims)?
    } else {
        fft_in::<f32>(&kind, a, first, shape.ty, &out_dims)?
    };
    Ok(Literal::Array(result))
}

/// The transform `kind` of `a` along its dimensions from `first` on, in the arithmetic of `F`,
/// stored as `ty[out_dims]`.
fn fft_in<F: Float>(
    kind: &str,
    a: &ArrayLiteral,
    first: usize,
    ty: ElementType,
    out_dims: &[i64],
) -> R<ArrayLiteral> {
    let rank = a.shape.rank();
    let ratio = |x: C<F>, n: usize| {
        let n = F::from_f64(n as f64);
        c(x.re / n, x.im / n)
    };
    Ok(match kind {
        "FFT" | "IFFT" => {
            let inverse = kind == "IFFT";
            let mut v = load_c::<F>(a)?;
            let dims = a.shape.dims.to_vec();
            // Innermost axis first, as XLA CPU transforms them (it decides which infinities
            // meet in an overflowing transform).
            for ax in (first..rank).rev() {
                along_axis(&mut v, &dims, ax, |line| {
                    let n = line.len();
                    let mut r = dft(line, if inverse { 1.0 } else { -1.0 });
                    if inverse {
                        r.iter_mut().for_each(|x| *x = ratio(*x, n));
                    }
                    *line = r;
                });
            }
            store_c(&v, ty, out_dims)?
        }
        "RFFT" => {
            let mut v = load_c::<F>(a)?;
            let dims = a.shape.dims.to_vec();
            // The last dimension first, cut to its first n/2 + 1 entries; then the other
            // transformed dimensions, innermost first.
            along_axis(&mut v, &dims, rank - 1, |line| *line = dft(line, -1.0));
            let (n, keep) = (dims[rank - 1] as usize, out_dims[rank - 1] as usize);
            let mut cut: Vec<C<F>> = v
                .chunks(n.max(1))
                .flat_map(|row| row[..keep.min(row.len())].iter().copied())
                .collect();
            for ax in (first..rank - 1).rev() {
                along_axis(&mut cut, out_dims, ax, |line| *line = dft(line, -1.0));
            }
            store_c(&cut, ty, out_dims)?
        }
        "IRFFT" => {
            let mut v = load_c::<F>(a)?;
            let in_dims = a.shape.dims.to_vec();
            for ax in first..rank - 1 {
                along_axis(&mut v, &in_dims, ax, |line| {
                    let n = line.len();
                    *line = dft(line, 1.0).into_iter().map(|x| ratio(x, n)).collect();
                });
            }
            let n = out_dims[rank - 1] as usize;
            let half = in_dims[rank - 1] as usize;
            let rows = v.len().checked_div(half).unwrap_or(0);
            let mut out = Vec::with_capacity(rows * n);
            for r in 0..rows {
                let h = &v[r * half..(r + 1) * half];
                let spec: Vec<C<F>> = (0..n)
                    .map(|k| if k < half { h[k] } else { conj(h[n - k]) })
                    .collect();
                let t = dft(&spec, 1.0);
                out.extend(t.into_iter().map(|x| c(ratio(x, n).re, F::ZERO)));
            }
            store_c(&out, ty, out_dims)?
        }
        k => return Err(format!("unknown fft_type {k}").into()),
    })
}
