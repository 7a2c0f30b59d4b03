//! The transforms of the `fft` instruction on complex values, with XLA's conventions, through
//! the `rustfft` crate: one implementation that the reference evaluator and the `cpu` backend's
//! runtime both call, so the two compute every transform, non-finite inputs included, with the
//! same butterflies in the same order.
//!
//! Conventions: the transform runs along each of the last `axes` dimensions, innermost first
//! (as XLA CPU orders them); `IFFT` divides by each length; `RFFT` transforms the last
//! dimension first and keeps its first `n/2 + 1` entries, then transforms the others; `IRFFT`
//! transforms the leading dimensions, rebuilds the Hermitian spectrum of its last dimension
//! (entry `k >= n/2 + 1` is the conjugate of entry `n - k`), transforms it back and keeps the
//! real part (returned as values with a zero imaginary part).
//!
//! XLA CPU computes with DUCC's FFT, whose butterflies differ from rustfft's: on finite inputs
//! the results agree within the `f32`/`f64` tolerances (`analysis/tests/xla`), but where
//! infinities meet in a transform the NaN pattern is the algorithm's, which HLO leaves open
//! (fuzz/README.md).

use num_complex::Complex;
use rustfft::{FftNum, FftPlanner};

/// The four transforms of the `fft` instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FftKind {
    /// Forward complex transform.
    Fft = 0,
    /// Inverse complex transform, divided by the lengths.
    Ifft = 1,
    /// Forward transform of real values (the input's imaginary parts are zero).
    Rfft = 2,
    /// Inverse transform to real values.
    Irfft = 3,
}

impl FftKind {
    /// The kind named by an `fft_type` attribute (`FFT`, `IFFT`, `RFFT`, `IRFFT`).
    pub fn from_name(name: &str) -> Option<FftKind> {
        Some(match name {
            "FFT" => FftKind::Fft,
            "IFFT" => FftKind::Ifft,
            "RFFT" => FftKind::Rfft,
            "IRFFT" => FftKind::Irfft,
            _ => return None,
        })
    }
}

/// The dimensions an `FFT` or `IFFT` of an operand with dimensions `dims` transforms with
/// `fft_length` `lengths`: the operand's, except that a zero length makes the transformed data
/// empty (its result is zeros, as XLA's evaluator gives).
pub fn complex_in_dims(dims: &[i64], lengths: &[i64]) -> Vec<i64> {
    let mut d = dims.to_vec();
    if lengths.contains(&0) && lengths.len() <= d.len() {
        let first = d.len() - lengths.len();
        d[first..].copy_from_slice(lengths);
    }
    d
}

fn numel(d: &[i64]) -> usize {
    d.iter().map(|&x| x.max(0) as usize).product()
}

/// Transform `kind` of `v` (row-major, dimensions `in_dims`) along its last `axes` dimensions,
/// returning the `numel(out_dims)` results row-major. For `RFFT` the imaginary parts of `v` are
/// zero; for `IRFFT` the results' are. `axes` is at least 1 and at most the rank, and
/// `out_dims` is the instruction's result shape.
pub fn transform<T: FftNum>(
    kind: FftKind,
    mut v: Vec<Complex<T>>,
    in_dims: &[i64],
    out_dims: &[i64],
    axes: usize,
) -> Vec<Complex<T>> {
    let (ni, no) = (numel(in_dims), numel(out_dims));
    if ni == 0 || no == 0 {
        return vec![Complex::new(T::zero(), T::zero()); no];
    }
    let rank = in_dims.len();
    let first = rank - axes;
    let mut planner = FftPlanner::<T>::new();
    match kind {
        FftKind::Fft | FftKind::Ifft => {
            for ax in (first..rank).rev() {
                along(&mut planner, &mut v, in_dims, ax, kind == FftKind::Ifft);
            }
            v
        }
        FftKind::Rfft => {
            along(&mut planner, &mut v, in_dims, rank - 1, false);
            let n = in_dims[rank - 1] as usize;
            let h = out_dims[rank - 1] as usize;
            let mut cut = Vec::with_capacity(no);
            for line in v.chunks(n) {
                cut.extend_from_slice(&line[..h]);
            }
            for ax in (first..rank - 1).rev() {
                along(&mut planner, &mut cut, out_dims, ax, false);
            }
            cut
        }
        FftKind::Irfft => {
            for ax in first..rank - 1 {
                along(&mut planner, &mut v, in_dims, ax, true);
            }
            let n = out_dims[rank - 1] as usize;
            let half = in_dims[rank - 1] as usize;
            let mut spec = Vec::with_capacity(no);
            for h in v.chunks(half) {
                spec.extend((0..n).map(|k| if k < half { h[k] } else { h[n - k].conj() }));
            }
            planner.plan_fft_inverse(n).process(&mut spec);
            let len = T::from_usize(n).unwrap_or(T::one());
            spec.iter()
                .map(|x| Complex::new(x.re / len, T::zero()))
                .collect()
        }
    }
}

/// Transforms every line of `v` (dimensions `dims`) along `axis`; an inverse transform divides
/// by the length.
fn along<T: FftNum>(
    planner: &mut FftPlanner<T>,
    v: &mut [Complex<T>],
    dims: &[i64],
    axis: usize,
    inverse: bool,
) {
    let len = dims[axis] as usize;
    if len <= 1 {
        return;
    }
    let fft = if inverse {
        planner.plan_fft_inverse(len)
    } else {
        planner.plan_fft_forward(len)
    };
    let n = T::from_usize(len).unwrap_or(T::one());
    let finish = |x: &mut Complex<T>| {
        if inverse {
            *x = Complex::new(x.re / n, x.im / n);
        }
    };
    let inner = numel(&dims[axis + 1..]);
    if inner == 1 {
        fft.process(v);
        v.iter_mut().for_each(finish);
        return;
    }
    let outer = numel(&dims[..axis]);
    let mut lines = Vec::with_capacity(v.len());
    for o in 0..outer {
        for i in 0..inner {
            lines.extend((0..len).map(|k| v[(o * len + k) * inner + i]));
        }
    }
    fft.process(&mut lines);
    for o in 0..outer {
        for i in 0..inner {
            let line = &mut lines[(o * inner + i) * len..(o * inner + i + 1) * len];
            for (k, x) in line.iter_mut().enumerate() {
                finish(x);
                v[(o * len + k) * inner + i] = *x;
            }
        }
    }
}
