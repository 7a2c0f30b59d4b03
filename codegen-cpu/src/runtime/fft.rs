//! The `fft` instruction: [`axle_analysis::fft::transform`], the implementation the reference
//! evaluator runs too (rustfft, XLA's conventions), on the call's buffers.

use axle_analysis::fft::transform;
use num_complex::Complex;
use rustfft::FftNum;

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
            Elem::F32 | Elem::C64 => run_in::<f32>(call, inp, out),
            Elem::F64 | Elem::C128 => run_in::<f64>(call, inp, out),
        }
    }
}

fn numel(d: &[i64]) -> usize {
    d.iter().map(|&x| x.max(0) as usize).product()
}

/// # Safety
/// As [`run`].
unsafe fn run_in<T: FftNum + Default>(call: &Call, inp: *mut u8, out: *mut u8) {
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
    let v: Vec<Complex<T>> = if *kind == FftKind::Rfft {
        // SAFETY: the operand holds `ni` real elements.
        let re: Vec<T> = unsafe { read(inp, ni) };
        re.into_iter().map(|x| Complex::new(x, T::zero())).collect()
    } else {
        // SAFETY: the operand holds `ni` complex elements.
        unsafe { read(inp, ni) }
    };
    let r = transform(*kind, v, in_dims, out_dims, *axes);
    if *kind == FftKind::Irfft {
        let re: Vec<T> = r.iter().map(|x| x.re).collect();
        // SAFETY: the result holds `no` real elements.
        unsafe { write(out, &re) };
    } else {
        // SAFETY: the result holds `no` complex elements.
        unsafe { write(out, &r) };
    }
}
