//! `cholesky`, `triangular-solve` and `fft`, computed in the precision XLA CPU computes them in:
//! `f64` arithmetic for `f64` and `c128`, `f32` arithmetic for every other floating type (`f32`,
//! `c64`, and the narrow floats, which XLA computes in `f32` too), then rounded to the result
//! type. Computing `f32` operands in `f64` would be more accurate than XLA, and on inputs near
//! `f32`'s range it overflows differently (an `f64` intermediate of `1e40` stays finite where
//! XLA's becomes infinite); this was checked against XLA 0.10.2 op by op (`tests/xla` of this
//! crate holds the cases).
//!
//! `cholesky` runs [`crate::cholesky::cholesky`] (XLA's expansion: a factor of NaNs where a
//! pivot's square root is NaN), the implementation the `cpu` backend's runtime calls too.
//! `triangular-solve` substitutes, in real arithmetic for real types. `fft` runs
//! [`crate::fft::transform`], the implementation the `cpu` backend's runtime calls too.
//!
//! In XLA CPU's float mode (the evaluator's `ftz`), `cholesky` and `triangular-solve` run the
//! shared routines on [`Flushed`] values, whose arithmetic is the FTZ and DAZ modes' computed
//! explicitly (the tests below hold them to the hardware modes bit for bit); `fft` runs in
//! the hardware modes ([`crate::float_mode`]), since rustfft's butterflies take no explicit
//! flushing.

use super::elem::{from_slice, to_vec, Complex, Float};
use super::elementwise::convert;
use super::shape_ops as so;
use super::{Evaluator, R};
use crate::cholesky;
use crate::fft::{self, FftKind};
use crate::flushed::Flushed;
use crate::trsm::{self, TriSolve};
use axle_ir::{ArrayLiteral, AttrKey, AttrValue, ElementType, InstId, Literal};

type C<F> = Complex<F>;

fn c<F: Float>(re: F, im: F) -> C<F> {
    Complex::new(re, im)
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

/// Stores complex values as type `ty` (the real part for real types), rounding once. Values
/// computed in `f32` convert from `f32`, as the backend's `f32` results do: through `f64`, a
/// narrow type's NaN would lose its sign (the cpu campaign of seed 17955161643, case 17235:
/// an `f16` triangular solve's `-0 / -0`, compared in total order).
fn store_c<F: Float>(v: &[C<F>], ty: ElementType, dims: &[i64]) -> R<ArrayLiteral> {
    let mut data = vec![0u8; v.len() * ty.byte_size()];
    if !in_f64(ty) {
        if ty.is_complex() {
            let narrow: Vec<Complex<f32>> = v
                .iter()
                .map(|x| Complex::new(x.re.to_f64() as f32, x.im.to_f64() as f32))
                .collect();
            convert(ElementType::C64, ty, &from_slice(&narrow), &mut data, false)?;
        } else {
            let re: Vec<f32> = v.iter().map(|x| x.re.to_f64() as f32).collect();
            convert(ElementType::F32, ty, &from_slice(&re), &mut data, false)?;
        }
    } else if ty.is_complex() {
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

/// The evaluator's complex values as `num_complex`'s, the type of the shared kernels
/// ([`fft::transform`], [`trsm::solve`]).
fn to_num<F: Float>(v: Vec<C<F>>) -> Vec<num_complex::Complex<F>> {
    v.into_iter()
        .map(|x| num_complex::Complex::new(x.re, x.im))
        .collect()
}

/// The inverse of [`to_num`].
fn from_num<F: Float>(v: Vec<num_complex::Complex<F>>) -> Vec<C<F>> {
    v.into_iter().map(|x| c(x.re, x.im)).collect()
}

/// Real values as [`Flushed`] ones (the same bits).
fn flush_r<F>(v: Vec<F>) -> Vec<Flushed<F>> {
    v.into_iter().map(Flushed).collect()
}

/// The inverse of [`flush_r`].
fn unflush_r<F>(v: Vec<Flushed<F>>) -> Vec<F> {
    v.into_iter().map(|x| x.0).collect()
}

/// Complex values as ones with [`Flushed`] components (the same bits).
fn flush_c<F>(v: Vec<num_complex::Complex<F>>) -> Vec<num_complex::Complex<Flushed<F>>> {
    v.into_iter()
        .map(|x| num_complex::Complex::new(Flushed(x.re), Flushed(x.im)))
        .collect()
}

/// The inverse of [`flush_c`].
fn unflush_c<F>(v: Vec<num_complex::Complex<Flushed<F>>>) -> Vec<num_complex::Complex<F>> {
    v.into_iter()
        .map(|x| num_complex::Complex::new(x.re.0, x.im.0))
        .collect()
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

/// `cholesky`.
pub(crate) fn cholesky(ev: &mut Evaluator, id: InstId, a: &ArrayLiteral) -> R<ArrayLiteral> {
    let lower = ev.m.bool_attr(id, &AttrKey::Lower).unwrap_or(false);
    factor(a, lower, ev.ftz)
}

/// The `cholesky` of `a` (the `lower` factor, else the upper one), in XLA CPU's float mode
/// with `ftz` (computed explicitly on [`Flushed`] values).
fn factor(a: &ArrayLiteral, lower: bool, ftz: bool) -> R<ArrayLiteral> {
    let (batch, n, n2) = matrix_dims(a)?;
    if n != n2 {
        return Err("cholesky needs square matrices".into());
    }
    if !a.ty().is_floating() {
        return Err(format!("cholesky is not defined for {}", a.ty().name()).into());
    }
    let (ty, dims) = (a.ty(), &a.shape.dims);
    match (ty.is_complex(), in_f64(ty)) {
        (true, true) => {
            let v = to_num(load_c::<f64>(a)?);
            let out = if ftz {
                unflush_c(cholesky::cholesky(&flush_c(v), batch, n, lower))
            } else {
                cholesky::cholesky(&v, batch, n, lower)
            };
            store_c(&from_num(out), ty, dims)
        }
        (true, false) => {
            let v = to_num(load_c::<f32>(a)?);
            let out = if ftz {
                unflush_c(cholesky::cholesky(&flush_c(v), batch, n, lower))
            } else {
                cholesky::cholesky(&v, batch, n, lower)
            };
            store_c(&from_num(out), ty, dims)
        }
        (false, true) => {
            let v = load_real::<f64>(a)?;
            let out = if ftz {
                unflush_r(cholesky::cholesky(&flush_r(v), batch, n, lower))
            } else {
                cholesky::cholesky(&v, batch, n, lower)
            };
            store_real(&out, ty, dims)
        }
        (false, false) => {
            let v = load_real::<f32>(a)?;
            let out = if ftz {
                unflush_r(cholesky::cholesky(&flush_r(v), batch, n, lower))
            } else {
                cholesky::cholesky(&v, batch, n, lower)
            };
            store_real(&out, ty, dims)
        }
    }
}

/// LAPACK's `?potrf` of the `batch` matrices of `a` with [`cholesky::potf2`] (the `cpu`
/// backend's too), in the precision of `a`'s type (LAPACK's `spotrf` and `cpotrf` run in
/// `f32`): the factors (the other triangle as it was) and one `info` per matrix.
pub(crate) fn potrf(a: &ArrayLiteral, lower: bool) -> R<(ArrayLiteral, Vec<i32>)> {
    let (batch, n, n2) = matrix_dims(a)?;
    if n != n2 {
        return Err("potrf needs square matrices".into());
    }
    fn each<T: cholesky::Scalar>(v: &mut [T], batch: usize, n: usize, lower: bool) -> Vec<i32> {
        (0..batch)
            .map(|b| cholesky::potf2(&mut v[b * n * n..(b + 1) * n * n], n, lower))
            .collect()
    }
    let (ty, dims) = (a.ty(), &a.shape.dims);
    Ok(match (ty.is_complex(), in_f64(ty)) {
        (true, true) => {
            let mut v = to_num(load_c::<f64>(a)?);
            let info = each(&mut v, batch, n, lower);
            (store_c(&from_num(v), ty, dims)?, info)
        }
        (true, false) => {
            let mut v = to_num(load_c::<f32>(a)?);
            let info = each(&mut v, batch, n, lower);
            (store_c(&from_num(v), ty, dims)?, info)
        }
        (false, true) => {
            let mut v = load_real::<f64>(a)?;
            let info = each(&mut v, batch, n, lower);
            (store_real(&v, ty, dims)?, info)
        }
        (false, false) => {
            let mut v = load_real::<f32>(a)?;
            let info = each(&mut v, batch, n, lower);
            (store_real(&v, ty, dims)?, info)
        }
    })
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
    solve(a, b, p, ev.ftz)
}

/// Solves `p` for the arrays `a` and `b` with [`trsm::solve`] (the `cpu` backend's solve too),
/// in the arithmetic XLA uses for `b`'s type (real for real types; `f64` for `f64` and `c128`,
/// `f32` otherwise), rounded to `b`'s type; with `ftz` in XLA CPU's float mode
/// (flush-to-zero, denormals-are-zero), computed explicitly on [`Flushed`] values.
///
/// Only the solve's arithmetic reads and writes subnormals as zero: the conversions in and out
/// are exact, so an element of `b` the substitution passes through unchanged (a unit diagonal,
/// nothing to subtract) keeps its subnormal value, as in the backend (which converts with
/// integer instructions) and XLA (a 1-by-1 unit solve returns `b`): an `f32` `1e-40` stays
/// `1e-40`, and an `f8e8m0fnu` `2^-127` (an `f32` subnormal; the format has no zero) stays
/// `2^-127`.
pub(crate) fn solve(a: &ArrayLiteral, b: &ArrayLiteral, p: TriSolve, ftz: bool) -> R<ArrayLiteral> {
    let (ty, dims) = (b.ty(), &b.shape.dims);
    match (ty.is_complex(), in_f64(ty)) {
        (true, true) => {
            let (a, b) = (to_num(load_c::<f64>(a)?), to_num(load_c::<f64>(b)?));
            let out = if ftz {
                unflush_c(trsm::solve(&flush_c(a), &flush_c(b), &p))
            } else {
                trsm::solve(&a, &b, &p)
            };
            store_c(&from_num(out), ty, dims)
        }
        (true, false) => {
            let (a, b) = (to_num(load_c::<f32>(a)?), to_num(load_c::<f32>(b)?));
            let out = if ftz {
                unflush_c(trsm::solve(&flush_c(a), &flush_c(b), &p))
            } else {
                trsm::solve(&a, &b, &p)
            };
            store_c(&from_num(out), ty, dims)
        }
        (false, true) => {
            let (a, b) = (load_real::<f64>(a)?, load_real::<f64>(b)?);
            let out = if ftz {
                unflush_r(trsm::solve(&flush_r(a), &flush_r(b), &p))
            } else {
                trsm::solve(&a, &b, &p)
            };
            store_real(&out, ty, dims)
        }
        (false, false) => {
            let (a, b) = (load_real::<f32>(a)?, load_real::<f32>(b)?);
            let out = if ftz {
                unflush_r(trsm::solve(&flush_r(a), &flush_r(b), &p))
            } else {
                trsm::solve(&a, &b, &p)
            };
            store_real(&out, ty, dims)
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
    let in_dims = match kind.as_str() {
        "FFT" | "IFFT" => fft::complex_in_dims(&a.shape.dims, &lengths),
        _ => a.shape.dims.to_vec(),
    };
    let result = if in_f64(shape.ty) {
        fft_in::<f64>(&kind, a, &in_dims, first, shape.ty, &out_dims)?
    } else {
        fft_in::<f32>(&kind, a, &in_dims, first, shape.ty, &out_dims)?
    };
    Ok(Literal::Array(result))
}

/// The transform `kind` of `a` (read as `in_dims`: see [`fft::complex_in_dims`]) along its
/// dimensions from `first` on, in the arithmetic of `F`,
/// stored as `ty[out_dims]` (through [`crate::fft::transform`], which the `cpu` backend runs
/// too).
fn fft_in<F: Float + rustfft::FftNum>(
    kind: &str,
    a: &ArrayLiteral,
    in_dims: &[i64],
    first: usize,
    ty: ElementType,
    out_dims: &[i64],
) -> R<ArrayLiteral> {
    let kind = FftKind::from_name(kind).ok_or_else(|| format!("unknown fft_type {kind}"))?;
    let axes = a.shape.rank() - first;
    let out = fft::transform(kind, to_num(load_c::<F>(a)?), in_dims, out_dims, axes);
    store_c(&from_num(out), ty, out_dims)
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    //! The explicit flushing of [`Flushed`] against the hardware's FTZ and DAZ modes
    //! ([`crate::float_mode::with_float_mode`]), the way the shared routines ran before and
    //! still run in the `cpu` backend's runtime: the same bits on inputs around the subnormal
    //! range, for every element type.
    use super::*;
    use crate::float_mode::with_float_mode;

    /// A deterministic stream of values around the subnormal range of `f32` (`wide`: of
    /// `f64`), of both signs, with some zeros and some ordinary values.
    fn values(seed: u64, count: usize, wide: bool) -> Vec<f64> {
        let mut x = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (0..count)
            .map(|_| {
                x = x
                    .wrapping_mul(6364136223846793005)
                    .wrapping_add(1442695040888963407);
                let r = (x >> 33) as u32;
                let sign = if r & 1 == 0 { 1.0 } else { -1.0 };
                let k = (r >> 1) as i32;
                let e = if wide { -1040 + k % 50 } else { -142 + k % 40 };
                match r % 11 {
                    0 => 0.0,
                    1 => sign * 1.5,
                    _ => sign * (1.0 + f64::from((r >> 8) % 97) / 97.0) * 2f64.powi(e),
                }
            })
            .collect()
    }

    fn literal(ty: ElementType, dims: &[i64], v: &[f64]) -> ArrayLiteral {
        let (src, bytes): (ElementType, Vec<u8>) = if ty.is_complex() {
            let pairs: Vec<u8> = v
                .iter()
                .flat_map(|x| [x.to_le_bytes(), (x * 0.75).to_le_bytes()])
                .flatten()
                .collect();
            (ElementType::C128, pairs)
        } else {
            (
                ElementType::F64,
                v.iter().flat_map(|x| x.to_le_bytes()).collect(),
            )
        };
        let n: usize = dims.iter().product::<i64>() as usize;
        let mut data = vec![0u8; n * ty.byte_size()];
        convert(src, ty, &bytes, &mut data, false).expect("converts");
        so::array(ty, dims, data)
    }

    fn ok<T>(r: R<T>) -> T {
        r.unwrap_or_else(|_| panic!("the evaluator refused a test input"))
    }

    const TYPES: [ElementType; 6] = [
        ElementType::F32,
        ElementType::F64,
        ElementType::BF16,
        ElementType::F16,
        ElementType::C64,
        ElementType::C128,
    ];

    #[test]
    fn cholesky_flushed_explicitly_matches_the_hardware_mode() {
        let mut differ = 0;
        for ty in TYPES {
            for seed in 0..40u64 {
                let n = 1 + (seed % 5) as i64;
                let a = literal(
                    ty,
                    &[2, n, n],
                    &values(seed, (2 * n * n) as usize, in_f64(ty)),
                );
                for lower in [true, false] {
                    let hw = ok(with_float_mode(true, || factor(&a, lower, false)));
                    let explicit = ok(factor(&a, lower, true));
                    assert_eq!(explicit.data, hw.data, "{ty} seed {seed} lower {lower}");
                    let plain = ok(factor(&a, lower, false));
                    differ += usize::from(plain.data != hw.data);
                }
            }
        }
        assert!(differ > 0, "the inputs reach the subnormal range");
    }

    #[test]
    fn triangular_solves_flushed_explicitly_match_the_hardware_mode() {
        let mut differ = 0;
        for ty in [
            ElementType::F32,
            ElementType::F64,
            ElementType::C64,
            ElementType::C128,
        ] {
            for seed in 0..40u64 {
                let m = 1 + (seed % 4) as usize;
                let cols = 2;
                let wide = in_f64(ty);
                let a = literal(ty, &[1, m as i64, m as i64], &values(seed, m * m, wide));
                let b = literal(
                    ty,
                    &[1, m as i64, cols as i64],
                    &values(seed + 99, m * cols, wide),
                );
                let p = TriSolve {
                    batch: 1,
                    m,
                    rows: m,
                    cols,
                    left: true,
                    lower: seed % 2 == 0,
                    unit: seed % 3 == 0,
                    transpose: seed % 5 == 0,
                    adjoint: seed % 10 == 0,
                };
                // The hardware mode around the solve's arithmetic only, exact conversions.
                let hw = match (ty.is_complex(), wide) {
                    (true, true) => {
                        let (x, y) = (to_num(ok(load_c::<f64>(&a))), to_num(ok(load_c::<f64>(&b))));
                        let out = with_float_mode(true, || trsm::solve(&x, &y, &p));
                        ok(store_c(&from_num(out), ty, &b.shape.dims))
                    }
                    (true, false) => {
                        let (x, y) = (to_num(ok(load_c::<f32>(&a))), to_num(ok(load_c::<f32>(&b))));
                        let out = with_float_mode(true, || trsm::solve(&x, &y, &p));
                        ok(store_c(&from_num(out), ty, &b.shape.dims))
                    }
                    (false, true) => {
                        let (x, y) = (ok(load_real::<f64>(&a)), ok(load_real::<f64>(&b)));
                        let out = with_float_mode(true, || trsm::solve(&x, &y, &p));
                        ok(store_real(&out, ty, &b.shape.dims))
                    }
                    (false, false) => {
                        let (x, y) = (ok(load_real::<f32>(&a)), ok(load_real::<f32>(&b)));
                        let out = with_float_mode(true, || trsm::solve(&x, &y, &p));
                        ok(store_real(&out, ty, &b.shape.dims))
                    }
                };
                let explicit = ok(solve(&a, &b, p, true));
                assert_eq!(explicit.data, hw.data, "{ty} seed {seed} {p:?}");
                differ += usize::from(ok(solve(&a, &b, p, false)).data != hw.data);
            }
        }
        assert!(differ > 0, "the inputs reach the subnormal range");
    }
}
