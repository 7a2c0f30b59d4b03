//! The `fft` instruction through the `rustfft` crate, with XLA's conventions: the transform
//! runs along each of the last `fft_length.len()` dimensions; `IFFT` divides by each length;
//! `RFFT` keeps the first `n/2 + 1` entries of the last dimension; `IRFFT` rebuilds the
//! Hermitian spectrum of its last dimension (entry `k >= n/2 + 1` is the conjugate of entry
//! `n - k`), transforms it back and keeps the real part.

use num_complex::Complex;
use num_traits::Float;
use rustfft::{FftNum, FftPlanner};

use super::{read, write, Call, Elem, FftKind};

/// Runs an [`Call::Fft`] from `inp` to `out`.
///
/// # Safety
/// `inp` and `out` must hold the call's operand and result.
pub(crate) unsafe fn run(call: &Call, inp: *mut u8, out: *mut u8) {
    let Call::Fft { elem, .. } = call else { return };
    // SAFETY: forwarded from the caller.
    unsafe {
        match elem {
            Elem::F32 | Elem::C64 => transform::<f32>(call, inp, out),
            Elem::F64 | Elem::C128 => transform::<f64>(call, inp, out),
        }
    }
}

fn numel(d: &[i64]) -> usize {
    d.iter().map(|&x| x.max(0) as usize).product()
}

/// # Safety
/// As [`run`].
unsafe fn transform<T: FftNum + Float + Default>(call: &Call, inp: *mut u8, out: *mut u8) {
    let Call::Fft {
        kind,
        axes,
        in_dims,
        out_dims,
        ..
    } = call
    else {
        return;
    };
    let (ni, no) = (numel(in_dims), numel(out_dims));
    if ni == 0 || no == 0 {
        return;
    }
    let rank = in_dims.len();
    let first = rank - axes;
    let mut planner = FftPlanner::<T>::new();
    let zero = T::zero();
    match kind {
        FftKind::Fft | FftKind::Ifft => {
            // SAFETY: the operand holds `ni` complex elements.
            let mut v: Vec<Complex<T>> = unsafe { read(inp, ni) };
            // Innermost axis first, as XLA CPU transforms them (it decides which infinities
            // meet in an overflowing f32 transform).
            for ax in (first..rank).rev() {
                along(&mut planner, &mut v, in_dims, ax, *kind == FftKind::Ifft);
            }
            // SAFETY: the result has the operand's shape.
            unsafe { write(out, &v) };
        }
        FftKind::Rfft => {
            // SAFETY: the operand holds `ni` real elements.
            let re: Vec<T> = unsafe { read(inp, ni) };
            let mut v: Vec<Complex<T>> = re.iter().map(|&x| Complex::new(x, zero)).collect();
            // The last dimension first, cut to n/2 + 1; the other transforms act on each
            // remaining column independently.
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
            // SAFETY: the result holds `no` complex elements.
            unsafe { write(out, &cut) };
        }
        FftKind::Irfft => {
            // SAFETY: the operand holds `ni` complex elements.
            let mut v: Vec<Complex<T>> = unsafe { read(inp, ni) };
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
            let re: Vec<T> = spec.iter().map(|x| x.re / len).collect();
            // SAFETY: the result holds `no` real elements.
            unsafe { write(out, &re) };
        }
    }
}

/// Transforms every line of `v` (dimensions `dims`) along `axis`; an inverse transform divides
/// by the length.
fn along<T: FftNum + Float + Default>(
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
