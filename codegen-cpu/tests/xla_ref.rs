//! The evaluator's differential cases against XLA CPU (`analysis/tests/xla`: edge-case inputs
//! for signed zeros, integer division and shifts, saturating converts, f16/bf16 and f8
//! arithmetic, reduce-precision, total-order compares, rng-bit-generator, FFT, Cholesky,
//! triangular solve, convolution groups, out-of-bounds gather/scatter, windows, sort, top-k,
//! complex numbers, ...) run on the CPU backend: every case must give XLA's outputs under its
//! tolerance.
//!
//! One named test per case.

use axle_codegen_cpu::{compile, CpuOptions};
use axle_testkit::{trials, RunFailure, Runner};
use libtest_mimic::Arguments;
use std::path::PathBuf;
use std::sync::Arc;

/// The CPU backend with default options as a [`Runner`].
fn cpu() -> Runner {
    Arc::new(|m, args| {
        let exe = compile(m, &CpuOptions::default()).map_err(|e| RunFailure {
            opcode: e.opcode.clone(),
            message: e.to_string(),
        })?;
        exe.run_literals(args)
            .map_err(|e| RunFailure::msg(e.to_string()))
    })
}

fn main() {
    let args = Arguments::from_args();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../analysis/tests/xla");
    libtest_mimic::run(&args, trials(&dir, false, false, cpu())).exit();
}
