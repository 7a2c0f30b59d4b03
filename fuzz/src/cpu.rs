//! The `cpu` target: a generated module on the `cpu` backend against the reference evaluator.
//!
//! The evaluator runs in its default mode, XLA CPU's flush-to-zero semantics, which the backend
//! implements; the backend uses the C library's transcendentals (the evaluator's), so what may
//! differ is the order of float sums and fused multiply-adds in dots. Results are compared with
//! per-type tolerances ([`tolerance`]); NaN must match NaN, infinities the same infinity,
//! integers and `pred` exactly. Inputs are the adversarial ones of the pipeline target on odd
//! seeds (with `±2^8` for their large value, [`HUGE`]), ordinary random values on even ones. A module the backend reports it does not
//! support (an op or type it names) is [`Outcome::Unsupported`], not a failure.

use axle::ir::{
    compare_arrays, print_module, verify, ArrayLiteral, ElementType, Literal, Module, Opcode,
    Tolerance,
};
use axle_analysis::equivalence::adversarial_inputs_with_huge;
use axle_codegen_cpu::{compile, CpuOptions};

use crate::case::Case;
use crate::outcome::Outcome;

/// The large finite special value of the adversarial inputs (`2^8` where the pipeline target
/// uses `1e30`). With it every product of two inputs is a multiple of `2^-6` below `2^16`, so
/// the sums of a dot or convolution of inputs are exact in `f32` in any order: HLO leaves that
/// order open, and with `1e30` it decided between NaN, infinity and a finite value (overflowing
/// products), or with `2^20` between two finite values (cancelling `2^40` terms) (fuzz/README.md,
/// "Comparison rules").
pub const HUGE: f64 = 256.0;

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

/// The inputs of `m` for input seed `seed`: adversarial ones on odd seeds, ordinary random
/// values on even ones.
pub fn inputs(m: &Module, seed: u64) -> Result<Vec<Literal>, String> {
    if seed % 2 == 1 {
        Ok(adversarial_inputs_with_huge(m, seed, HUGE))
    } else {
        axle::run::generate_inputs(m, seed).map_err(|e| format!("generating inputs: {e}"))
    }
}

/// Checks the property for `m` with inputs from `seed` (what a repro replays).
pub fn check_module(m: &Module, seed: u64) -> Outcome {
    let args = match inputs(m, seed) {
        Ok(a) => a,
        Err(e) => return Outcome::Fail(e),
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
            return if ["not supported", "unsupported", "does not support"]
                .iter()
                .any(|r| msg.contains(r))
            {
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
    let widened = widened_from(m);
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        if let Err(e) = compare(w, g, &widened) {
            return Outcome::Fail(format!("result {k}: {e}\n{}", print_module(m)));
        }
    }
    Outcome::Pass
}

/// For each floating-point type of `m`, the least precise floating-point type whose values
/// `convert`s carry into it, directly or through other converts (the type itself when none is
/// less precise). A value computed in `f32` (a libm function, a reassociated sum, each within
/// `f32`'s few ulps) and converted to `f64` carries `f32`'s error, so it is compared with
/// `f32`'s tolerance (cpu campaign seed 1795800001, case 5514: `convert(cbrt(x))` to `f64`
/// differed by one `f32` ulp).
fn widened_from(m: &Module) -> Vec<(ElementType, ElementType)> {
    let rtol = |t: ElementType| match tolerance(t) {
        Tolerance::Close { rtol, .. } => rtol,
        _ => 0.0,
    };
    let ty = |i| m.array_shape(i).map(|a| a.ty);
    let edges: Vec<(ElementType, ElementType)> = m
        .live_ids()
        .into_iter()
        .filter(|&i| m.opcode(i) == Opcode::Convert)
        .filter_map(|i| Some((ty(*m.operands(i).first()?)?, ty(i)?)))
        .filter(|(from, to)| from.is_floating() && to.is_floating())
        .collect();
    let mut worst: Vec<(ElementType, ElementType)> = Vec::new();
    let get = |w: &[(ElementType, ElementType)], t: ElementType| {
        w.iter().find(|(k, _)| *k == t).map_or(t, |&(_, v)| v)
    };
    // A fixed point over at most as many rounds as there are types.
    loop {
        let mut changed = false;
        for &(from, to) in &edges {
            let src = get(&worst, from);
            if rtol(src) > rtol(get(&worst, to)) {
                worst.retain(|(k, _)| *k != to);
                worst.push((to, src));
                changed = true;
            }
        }
        if !changed {
            return worst;
        }
    }
}

fn compare(
    want: &ArrayLiteral,
    got: &ArrayLiteral,
    widened: &[(ElementType, ElementType)],
) -> Result<(), String> {
    let ty = want.ty();
    let from = widened
        .iter()
        .find(|(k, _)| *k == ty)
        .map_or(ty, |&(_, v)| v);
    // Integers stay exact whatever fed them.
    let tol = if ty.is_floating() {
        tolerance(from)
    } else {
        tolerance(ty)
    };
    compare_arrays(want, got, tol).map_err(|e| e.to_string())
}
