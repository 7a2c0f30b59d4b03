//! Differential cases against XLA CPU: small HLO modules on edge-case inputs whose outputs were
//! computed by XLA CPU (jax/jaxlib 0.10.2, `tests/xla/gen.py`). They pin down semantics the
//! corpus leaves open: signed zeros in maximum/minimum, integer power, division and shifts per
//! type, saturating converts and double rounding, f16/bf16 arithmetic, reduce-precision,
//! total-order compares, rng-bit-generator bit for bit, FFT, Cholesky, triangular solve,
//! convolution groups, out-of-bounds gather/scatter, windows, sort, top-k, complex numbers.
//!
//! One named test per case.

mod common;

use common::run_case;
use libtest_mimic::{Arguments, Trial};
use serde_json::Value;
use std::path::PathBuf;

fn main() {
    let args = Arguments::from_args();
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/xla");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json")).expect("tests/xla/manifest.json"),
    )
    .expect("manifest.json parses");
    let trials = manifest["cases"]
        .as_array()
        .expect("manifest cases")
        .iter()
        .map(|case| {
            let name = case["name"].as_str().expect("case name").to_string();
            let (dir, case) = (dir.clone(), case.clone());
            let file = format!("{name}.hlo");
            Trial::test(name, move || run_case(&dir, &case, &file))
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
