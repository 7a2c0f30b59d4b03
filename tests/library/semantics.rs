//! Passes never change what a program computes: for generated valid modules and random
//! pipelines drawn from every registered pass, the reference evaluator gives bit-identical
//! results before and after (integers exactly, floats bit for bit with NaN matching NaN), on
//! inputs full of special values (`±0.0`, `±inf`, NaN, integer extremes). Every pipeline runs
//! with the verifier after each pass and the changed-flag check on, and gives the same output
//! at 1 and 8 threads. The fusion passes are drawn like every other pass, and also run on
//! their own on every target and as the standard `cpu` pipeline.

use axle::ir::gen::Recipe;
use axle::ir::{print_module, PassManagerOptions, Tolerance, VerifyMode};
use axle_analysis::{same_results, Equivalence};
use quickcheck::{QuickCheck, TestResult};

fn pipeline_from(picks: &[u8]) -> String {
    let mut names = axle::passes::registry().names();
    names.extend_from_slice(axle::passes::PROPERTY_STEPS);
    let steps: Vec<&str> = picks
        .iter()
        .take(8)
        .map(|&p| names[p as usize % names.len()])
        .collect();
    if steps.is_empty() {
        "dce".to_string()
    } else {
        steps.join(",")
    }
}

fn run(m: &axle::ir::Module, pipeline: &str, threads: usize) -> Result<axle::ir::Module, String> {
    let mut out = m.clone();
    let opts = PassManagerOptions {
        verify: VerifyMode::Each,
        check_changed: true,
        ..Default::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| e.to_string())?;
    pool.install(|| axle::passes::optimize(&mut out, pipeline, opts))
        .map_err(|e| e.to_string())?;
    Ok(out)
}

/// `pipeline` on `m` at 1 and at 8 threads, which must agree.
fn run_both(m: &axle::ir::Module, pipeline: &str) -> Result<axle::ir::Module, TestResult> {
    let out = run(m, pipeline, 1)
        .map_err(|e| TestResult::error(format!("{pipeline}: {e}\n{}", print_module(m))))?;
    match run(m, pipeline, 8) {
        Ok(o8) if print_module(&o8) == print_module(&out) => Ok(out),
        Ok(_) => Err(TestResult::error(format!(
            "{pipeline}: output differs at 8 threads"
        ))),
        Err(e) => Err(TestResult::error(format!("{pipeline} at 8 threads: {e}"))),
    }
}

/// Whether `m` and `out` (after `pipeline`) give identical evaluator results.
fn same_values(
    m: &axle::ir::Module,
    out: &axle::ir::Module,
    pipeline: &str,
    seed: u64,
) -> TestResult {
    match same_results(m, out, seed, 2, Tolerance::Exact) {
        Ok(Equivalence::Same(_)) => TestResult::passed(),
        Ok(Equivalence::NotComparable(e)) => {
            TestResult::error(format!("generated modules always evaluate: {e}"))
        }
        Err(e) => TestResult::error(format!(
            "{pipeline}: {e}\n--- before ---\n{}\n--- after ---\n{}",
            print_module(m),
            print_module(out)
        )),
    }
}

/// Whether `pipeline` runs `excess-precision` on a module where it rewrites something: it skips
/// a bf16 rounding the evaluator does (as XLA CPU), so results agree only up to that rounding
/// (`fusion/tests/excess_precision.rs` checks it against the computation in f32 instead).
fn inexact(m: &axle::ir::Module, pipeline: &str) -> bool {
    pipeline.contains("excess-precision")
        && axle::fusion::excess_precision::has_excess_precision_site(m)
}

fn pipelines_keep_results(r: Recipe, picks: Vec<u8>, seed: u64) -> TestResult {
    let m = r.build();
    let pipeline = pipeline_from(&picks);
    match run_both(&m, &pipeline) {
        Ok(_) if inexact(&m, &pipeline) => TestResult::discard(),
        Ok(out) => same_values(&m, &out, &pipeline, seed),
        Err(e) => e,
    }
}

#[test]
fn random_pipelines_keep_evaluator_results() {
    QuickCheck::new()
        .tests(300)
        .quickcheck(pipelines_keep_results as fn(Recipe, Vec<u8>, u64) -> TestResult);
}

fn simplify_keeps_results(r: Recipe, seed: u64) -> TestResult {
    let m = r.build();
    let text = axle::passes::standard_pipeline("simplify").expect("the simplify pipeline");
    let out = match run(&m, text, 1) {
        Ok(o) => o,
        Err(e) => return TestResult::error(format!("{e}\n{}", print_module(&m))),
    };
    match same_results(&m, &out, seed, 2, Tolerance::Exact) {
        Ok(Equivalence::Same(_)) => {
            TestResult::from_bool(out.num_live_insts() <= m.num_live_insts() + 8)
        }
        Ok(Equivalence::NotComparable(e)) => TestResult::error(e),
        Err(e) => TestResult::error(format!(
            "{e}\n--- before ---\n{}\n--- after ---\n{}",
            print_module(&m),
            print_module(&out)
        )),
    }
}

#[test]
fn simplify_keeps_evaluator_results() {
    QuickCheck::new()
        .tests(200)
        .quickcheck(simplify_keeps_results as fn(Recipe, u64) -> TestResult);
}

static FUSED_MODULES: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The `cpu` pipeline (simplification, then fusion and multi-output fusion) and the fusion
/// passes alone on each target keep the evaluator's results, at 1 and 8 threads alike.
fn fusion_keeps_results(r: Recipe, target: u8, seed: u64) -> TestResult {
    let m = r.build();
    let pipeline = match target % 4 {
        0 => axle::passes::standard_pipeline("cpu")
            .expect("the cpu pipeline")
            .to_string(),
        1 => "fusion{target=cpu},multi-output-fusion{target=cpu}".to_string(),
        2 => "fusion{target=generic},multi-output-fusion{target=generic},dce".to_string(),
        _ => {
            "fusion{target=gpu},cse,fusion{target=gpu},multi-output-fusion{target=gpu}".to_string()
        }
    };
    let out = match run_both(&m, &pipeline) {
        Ok(o) => o,
        Err(e) => return e,
    };
    if out
        .live_ids()
        .iter()
        .any(|&i| out.opcode(i) == axle::ir::Opcode::Fusion)
    {
        FUSED_MODULES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    if inexact(&m, &pipeline) {
        return TestResult::discard();
    }
    same_values(&m, &out, &pipeline, seed)
}

#[test]
fn fusion_keeps_evaluator_results() {
    QuickCheck::new()
        .tests(200)
        .quickcheck(fusion_keeps_results as fn(Recipe, u8, u64) -> TestResult);
    // The property means something only if the generated modules do get fused.
    let fused = FUSED_MODULES.load(std::sync::atomic::Ordering::Relaxed);
    assert!(
        fused >= 50,
        "only {fused} of 200 generated modules were fused"
    );
}

#[test]
fn every_registered_pass_is_drawn() {
    // The property draws from the registry; make sure the registry has every pass of issue 5.
    let names = axle::passes::registry().names();
    for p in [
        "algsimp",
        "broadcast-canonicalize",
        "constant-folding",
        "cse",
        "dce",
        "fusion",
        "inline",
        "multi-output-fusion",
        "reshape-mover",
        "tuple-simplify",
        "verify",
        "while-simplify",
        "zero-sized-elim",
    ] {
        assert!(names.contains(&p), "{p} is not registered: {names:?}");
    }
    // The extra steps with small thresholds are valid pipelines (a typo would make every
    // pipeline drawing one fail to parse, and the property would test nothing there).
    for step in axle::passes::PROPERTY_STEPS {
        axle::passes::canonical_pipeline(step).unwrap_or_else(|e| panic!("{step}: {e}"));
    }
}
