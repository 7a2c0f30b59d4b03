//! The evaluator's differential cases against XLA CPU (`analysis/tests/xla`: edge-case inputs
//! for signed zeros, integer division and shifts, saturating converts, f16/bf16 and f8
//! arithmetic, reduce-precision, total-order compares, rng-bit-generator, FFT, Cholesky,
//! triangular solve, convolution groups, out-of-bounds gather/scatter, windows, sort, top-k,
//! complex numbers, ...) run on the CPU backend: every case must give XLA's outputs under its
//! tolerance.
//!
//! One named test per case.

mod common;

use axle_testkit::trials;
use common::cpu;
use libtest_mimic::Arguments;
use std::path::PathBuf;

fn main() {
    let args = Arguments::from_args();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../analysis/tests/xla");
    libtest_mimic::run(&args, trials(&dir, false, false, cpu())).exit();
}
