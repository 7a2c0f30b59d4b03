//! Differential cases against XLA CPU: small HLO modules on edge-case inputs whose outputs were
//! computed by XLA CPU (jax/jaxlib 0.10.2, `tests/xla/gen.py`). They pin down semantics the
//! corpus leaves open: signed zeros in maximum/minimum, integer power, division and shifts per
//! type, saturating converts and double rounding, f16/bf16 arithmetic, reduce-precision,
//! total-order compares, rng-bit-generator bit for bit, FFT, Cholesky, triangular solve,
//! convolution groups, out-of-bounds gather/scatter, windows, sort, top-k, complex numbers.
//! The CPU backend runs the same cases (`codegen-cpu/tests/xla_ref.rs`).
//!
//! One named test per case.

use axle_analysis::evaluate;
use axle_testkit::{leaves, trials, RunFailure};
use libtest_mimic::Arguments;
use std::path::PathBuf;
use std::sync::Arc;

fn main() {
    let args = Arguments::from_args();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/xla");
    let run = Arc::new(|m: &axle_ir::Module, args: &[axle_ir::Literal]| {
        evaluate(m, args)
            .map(|l| leaves(&l))
            .map_err(|e| RunFailure {
                opcode: e.opcode.to_string(),
                message: e.to_string(),
            })
    });
    libtest_mimic::run(&args, trials(&dir, false, false, run)).exit();
}
