//! The `cpu` target: a generated module on the `cpu` backend against the reference evaluator.
//!
//! The evaluator runs in its default mode, XLA CPU's flush-to-zero semantics, which the backend
//! implements; the backend uses the C library's transcendentals (the evaluator's), so what may
//! differ is the order of float sums and fused multiply-adds in dots. Results are compared with
//! per-type tolerances ([`tolerance`]); NaN must match NaN, infinities the same infinity,
//! integers and `pred` exactly. Inputs are the adversarial ones of the pipeline target on odd
//! seeds, ordinary random values on even ones. A module the backend reports it does not
//! support (an op or type it names) is [`Outcome::Unsupported`], not a failure.

use axle::ir::{
    compare_arrays, print_module, verify, ArrayLiteral, ElementType, Module, Tolerance,
};
use axle_analysis::equivalence::adversarial_inputs;
use axle_codegen_cpu::{compile, CpuOptions};

use crate::case::Case;
use crate::target::Outcome;

/// The tolerance for results of type `ty`: exact for integers and `pred`, else relative and
/// absolute bounds a few ulps of reassociated sums wide for the type's precision.
pub fn tolerance(ty: ElementType) -> Tolerance {
    use ElementType::*;
    let (rtol, atol) = match ty {
        F64 | C128 => (1e-9, 1e-12),
        F32 | C64 => (1e-4, 1e-5),
        F16 | BF16 => (2e-2, 1e-2),
        t if t.is_float() => (0.25, 0.125),
        _ => return Tolerance::Exact,
    };
    Tolerance::Close { rtol, atol }
}

/// Checks the property on a case.
pub fn check(case: &Case) -> Outcome {
    let m = case.program.build();
    if let Err(e) = verify(&m) {
        return Outcome::Fail(format!("the generator built an invalid module: {e}"));
    }
    check_module(&m, case.seed)
}

/// Checks the property for `m` with inputs from `seed` (what a repro replays).
pub fn check_module(m: &Module, seed: u64) -> Outcome {
    let args = if seed % 2 == 1 {
        adversarial_inputs(m, seed)
    } else {
        match axle::run::generate_inputs(m, seed) {
            Ok(a) => a,
            Err(e) => return Outcome::Fail(format!("generating inputs: {e}")),
        }
    };
    let want = match axle_analysis::evaluate(m, &args) {
        Ok(w) => axle::run::flatten(w),
        Err(e) => return Outcome::Fail(format!("the evaluator rejects a generated module: {e}")),
    };
    let opts = CpuOptions {
        libm_math: true,
        ..Default::default()
    };
    let exe = match compile(m, &opts) {
        Ok(x) => x,
        Err(e) => {
            let msg = e.to_string();
            return if msg.contains("not supported") || msg.contains("unsupported") {
                Outcome::Unsupported(msg)
            } else {
                Outcome::Fail(format!("cpu compile: {msg}"))
            };
        }
    };
    let got = match exe.run_literals(&args) {
        Ok(g) => g,
        Err(e) => return Outcome::Fail(format!("cpu run: {e}")),
    };
    if got.len() != want.len() {
        return Outcome::Fail(format!(
            "{} results from cpu, {} from the evaluator",
            got.len(),
            want.len()
        ));
    }
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = compare(w, g) {
            return Outcome::Fail(format!("result {k}: {e}\n{}", print_module(m)));
        }
    }
    Outcome::Pass
}

fn compare(want: &ArrayLiteral, got: &ArrayLiteral) -> Result<(), String> {
    compare_arrays(want, got, tolerance(want.ty())).map_err(|e| e.to_string())
}
