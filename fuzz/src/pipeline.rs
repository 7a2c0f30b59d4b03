//! The `pipeline` target: a generated module through a pipeline drawn from every pass of a
//! registry (the compiler's, `axle::passes::registry()`; the `pipeline-planted` target's adds
//! [`crate::planted_sub_self`]), checked against the reference evaluator.
//!
//! The rules are those of the semantics property (`tests/library/semantics.rs`): the generated
//! module verifies; the pass manager verifies after every pass and checks each pass's `changed`
//! flag; the optimized module is the same at 1 and 4 threads; it round-trips through text; and on
//! two sets of adversarial inputs (`±0.0`, `±inf`, NaN, subnormals, integer extremes) the
//! evaluator's results before and after agree bit for bit (NaN matching NaN), with IEEE
//! arithmetic. The evaluator must run every generated module. The exceptions are passes
//! documented as inexact, `linalg-upcast` on narrow-float linear algebra and `excess-precision`
//! on bf16 ops converted to f32 (`inexact` below), where every check but the comparison of
//! results applies.

use axle::ir::{
    print_module, verify, Module, Opcode, PassManager, PassManagerOptions, PassRegistry, Tolerance,
    VerifyMode,
};
use axle_analysis::{same_results, Equivalence};
use rayon::ThreadPool;

use crate::case::Case;

/// Input sets each module is evaluated on.
const INPUT_SETS: usize = 2;

thread_local! {
    /// One- and four-thread pools for this worker (building pools per case is slow).
    static POOLS: (ThreadPool, ThreadPool) = (pool(1), pool(4));
}

fn pool(n: usize) -> ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(n)
        .build()
        .expect("a thread pool")
}

/// The steps a random pipeline draws from: every pass of `registry`, in registry order, then
/// [`axle::passes::PROPERTY_STEPS`] (size-thresholded passes set to fire on small programs).
pub fn pass_names(registry: &PassRegistry) -> Vec<&'static str> {
    let mut names = registry.names();
    names.extend_from_slice(axle::passes::PROPERTY_STEPS);
    names
}

/// Checks the property on a case, its pipeline drawn from `registry`'s passes.
pub fn check(case: &Case, registry: &PassRegistry) -> Result<(), String> {
    let m = case.program.build();
    verify(&m).map_err(|e| format!("the generator built an invalid module: {e}"))?;
    check_module(
        &m,
        &case.pipeline(&pass_names(registry)),
        case.seed,
        registry,
    )
}

/// Checks the property for `m`, `pipeline` (resolved against `registry`) and inputs from
/// `seed` (what a repro replays).
pub fn check_module(
    m: &Module,
    pipeline: &str,
    seed: u64,
    registry: &PassRegistry,
) -> Result<(), String> {
    round_trip(m).map_err(|e| format!("input module: {e}"))?;
    let (out, out4) = POOLS.with(|(one, four)| {
        (
            one.install(|| optimize(m, pipeline, registry)),
            four.install(|| optimize(m, pipeline, registry)),
        )
    });
    let out = out?;
    let text = print_module(&out);
    if print_module(&out4?) != text {
        return Err(format!("{pipeline}: the output differs at 1 and 4 threads"));
    }
    round_trip(&out).map_err(|e| format!("{pipeline}: optimized module: {e}"))?;
    if inexact(m, pipeline) {
        return Ok(());
    }
    match same_results(m, &out, seed, INPUT_SETS, Tolerance::Exact) {
        Ok(Equivalence::Same(_)) => Ok(()),
        Ok(Equivalence::NotComparable(e)) => {
            Err(format!("the evaluator rejects a generated module: {e}"))
        }
        Err(e) => Err(format!("{pipeline}: {e}\n--- after ---\n{text}")),
    }
}

/// Whether `pipeline` runs a pass whose documented contract is not bit-exactness on an
/// instruction of `m` it rewrites: `excess-precision` (below), and `linalg-upcast`, which computes narrow-float `cholesky` and
/// `triangular-solve` in `f32` (as XLA does), which the evaluator computes in `f64` and rounds
/// once, so results agree only up to rounding, and on the inputs that make these factorizations
/// break down (NaN, zero pivots) not even that. Such cases keep every other check.
fn inexact(m: &Module, pipeline: &str) -> bool {
    let linalg = pipeline.contains("linalg-upcast")
        && m.live_ids().iter().any(|&i| {
            matches!(m.opcode(i), Opcode::Cholesky | Opcode::TriangularSolve)
                && m.array_shape(i)
                    .is_some_and(|a| a.ty.is_float() && a.ty.bits() < 32)
        });
    // `excess-precision` reads a bf16 op converted to f32 unrounded, as XLA CPU does, where the
    // evaluator rounds it (its own test compares it with the computation written in f32).
    let excess = pipeline.contains("excess-precision")
        && axle::fusion::excess_precision::has_excess_precision_site(m);
    linalg || excess
}

/// `m` after `pipeline`, each pass verified and its `changed` flag checked.
fn optimize(m: &Module, pipeline: &str, registry: &PassRegistry) -> Result<Module, String> {
    let mut out = m.clone();
    let opts = PassManagerOptions {
        verify: VerifyMode::Each,
        check_changed: true,
        ..Default::default()
    };
    PassManager::new(registry, pipeline, opts)
        .map_err(|e| format!("{pipeline}: {}", e.render()))?
        .run(&mut out)
        .map_err(|e| format!("{pipeline}: {e}"))?;
    Ok(out)
}

/// Printing `m` gives text that parses, verifies and prints identically.
fn round_trip(m: &Module) -> Result<(), String> {
    crate::parse::round_trip(&print_module(m))
}
