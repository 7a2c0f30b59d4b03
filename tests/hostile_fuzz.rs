//! quickcheck over generated hostile modules ([`axle::ir::hostile`]: zero, huge, overflowing,
//! bounded and unbounded dynamic dimensions, deep tuples, mismatched reducer types) through the
//! whole path a user takes: parse, verify, the runnable check, then `axle::run::run_module`
//! (inputs generated, compiled, run) under a 64 MiB memory ceiling, on the `interpreter`, on
//! `cpu` with no pipeline (`none`: the module as written) and on `cpu` with its default
//! pipeline (simplification and fusion). The property:
//! - nothing panics or aborts;
//! - the interpreter and unfused `cpu` run the same modules and refuse the same ones;
//! - the default pipeline may remove what stops a run (an unsupported op on a zero-sized
//!   array, a huge temporary fused away) but never adds a refusal: where it refuses, the
//!   interpreter refuses too;
//! - wherever two of them run a module, they agree on its outputs.
//!
//! Huge shapes are far over the ceiling, so the interpreter and unfused `cpu` must refuse them
//! cleanly. A fused program over a huge shape needs no memory but may run for hours (a
//! reduction of 2^62 broadcast elements is a valid program), so a module with an array of more
//! than [`MAX_RUN_ELEMENTS`] elements is only compiled with the default pipeline, not run. The
//! shapes that fit are tiny, so every run is fast. (The count of modules that run, checked
//! first, applies the same bound.) A zero-element array may still have huge dimensions
//! (`pred[2^62, 0]`); every backend runs it in no time, since a loop nest with an empty
//! dimension emits no loop (`Gen::nest` in codegen-llvm), so a reduction of such an array ends
//! at once on the unfused `cpu` run too.
//!
//! The generator's seed is random per run unless `AXLE_HOSTILE_SEED` gives one; the test prints
//! it (cargo shows it when the test fails), so a failing run is rerun with
//! `AXLE_HOSTILE_SEED=S cargo test --test hostile_fuzz`.
//!
//! This test binary sets the process's memory ceiling, so it holds this one test only.

use axle::ir::hostile::HostileModule;
use axle::ir::{compare_arrays, Tolerance};
use quickcheck::{Arbitrary, QuickCheck, TestResult};

const CEILING: u64 = 64 << 20;

/// The configurations: a backend and its pipeline (`None`: the backend's default).
const INTERPRETER: (&str, Option<&str>) = ("interpreter", None);
const CPU_UNFUSED: (&str, Option<&str>) = ("cpu", Some("none"));
const CPU_DEFAULT: (&str, Option<&str>) = ("cpu", None);

/// Modules with a larger array are compiled with the default pipeline but not run.
const MAX_RUN_ELEMENTS: i64 = 1 << 22;

fn run(
    m: &axle::ir::Module,
    (backend, pipeline): (&str, Option<&str>),
) -> Result<Vec<axle::ir::ArrayLiteral>, String> {
    let opts = axle::run::RunOptions {
        backend: backend.into(),
        seed: 1,
        pipeline: pipeline.map(str::to_string),
        ..Default::default()
    };
    axle::run::run_module(m.clone(), &opts)
        .map(|r| r.outputs)
        .map_err(|e| e.to_string())
}

/// The element count of the largest array (or tuple leaf) any instruction of `m` defines.
fn largest_array(m: &axle::ir::Module) -> i64 {
    m.insts_by_comp()
        .values()
        .flatten()
        .flat_map(|&i| {
            axle::backend::ValueShape::of_shape(m, m.shape(i))
                .leaves()
                .into_iter()
                .map(|a| {
                    a.dims
                        .iter()
                        .map(|&d| d.max(1))
                        .fold(1i64, i64::saturating_mul)
                })
                .collect::<Vec<_>>()
        })
        .max()
        .unwrap_or(0)
}

/// Compares the outputs of two runs of `text`.
fn agree(
    what: &str,
    a: &[axle::ir::ArrayLiteral],
    b: &[axle::ir::ArrayLiteral],
    text: &str,
    largest: i64,
) -> Result<(), String> {
    if a.len() != b.len() {
        return Err(format!(
            "{what}: {} vs {} outputs\n{text}",
            a.len(),
            b.len()
        ));
    }
    // Transcendentals round a little differently in the backends. A float narrower than f32
    // rounds after every operation, so a reduction accumulated in another order (the evaluator
    // adds in sequence, the cpu kernels in vector lanes) may differ by its rounding step for
    // every element added: up to `largest` steps of 2^-7 (bf16, the coarsest 16-bit format) or
    // 2^-3 (the 8-bit formats), relative to values of order one.
    let tol_for = |x: &axle::ir::ArrayLiteral| {
        let ty = x.ty();
        let step = match ty.bits() {
            _ if !ty.is_float() || ty.bits() >= 32 => 0.0,
            b if b > 8 => 2f64.powi(-7),
            _ => 2f64.powi(-3),
        };
        let narrow = (largest.max(1) as f64 * step).min(1.0);
        Tolerance::Close {
            rtol: 2e-2f64.max(narrow),
            atol: 1e-5f64.max(narrow),
        }
    };
    for (k, (x, y)) in a.iter().zip(b).enumerate() {
        compare_arrays(x, y, tol_for(x))
            .map_err(|e| format!("{what}: output {k} differs: {e}\n{text}"))?;
    }
    Ok(())
}

fn check(h: &HostileModule, m: &axle::ir::Module) -> Result<(), String> {
    let text = &h.text;
    let interp = run(m, INTERPRETER);
    let unfused = run(m, CPU_UNFUSED);
    match (&interp, &unfused) {
        (Ok(a), Ok(b)) => agree("interpreter and unfused cpu", a, b, text, largest_array(m))?,
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => {
            return Err(format!(
                "the interpreter and unfused cpu do not both run or both refuse: {e}\n{text}"
            ))
        }
        (Err(_), Err(_)) => {}
    }
    if largest_array(m) > MAX_RUN_ELEMENTS {
        // Compiling runs the whole pipeline and the code generator; it must not panic.
        let platform = axle::backends::registry()
            .get("cpu")
            .map_err(|e| e.to_string())?;
        let opts = axle::backend::CompileOptions {
            pipeline: axle::backend::pipeline_for(&*platform, None),
            ..Default::default()
        };
        let _ = platform.compiler().compile(m.clone(), &opts);
        return Ok(());
    }
    match (&interp, run(m, CPU_DEFAULT)) {
        (Ok(a), Ok(b)) => agree("interpreter and fused cpu", a, &b, text, largest_array(m)),
        (Ok(_), Err(e)) => Err(format!(
            "the default pipeline refuses what the interpreter runs: {e}\n{text}"
        )),
        _ => Ok(()),
    }
}

fn prop(h: HostileModule) -> TestResult {
    let Ok(m) = axle::ir::parse_module(&h.text) else {
        return TestResult::discard();
    };
    if axle::verify_module(&m).is_err() {
        return TestResult::discard();
    }
    match check(&h, &m) {
        Ok(()) => TestResult::passed(),
        Err(e) => TestResult::error(e),
    }
}

/// The generator's seed: `AXLE_HOSTILE_SEED` if set, else a random one.
fn seed() -> u64 {
    match std::env::var("AXLE_HOSTILE_SEED") {
        Ok(s) => s
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("AXLE_HOSTILE_SEED={s:?} is not a u64")),
        Err(_) => {
            use std::hash::{BuildHasher, Hasher};
            std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish()
        }
    }
}

#[test]
fn hostile_modules_run_or_fail_cleanly_on_every_backend() {
    axle::ir::memory::set_limit(Some(CEILING));
    let seed = seed();
    println!(
        "hostile_fuzz seed {seed} (rerun: AXLE_HOSTILE_SEED={seed} cargo test --test hostile_fuzz)"
    );
    // The generator must reach both backends' success paths, not only their errors.
    let mut g = quickcheck::Gen::from_size_and_seed(20, seed);
    let mut ran = 0;
    for _ in 0..200 {
        let h = HostileModule::arbitrary(&mut g);
        if let Ok(m) = axle::ir::parse_module(&h.text) {
            // The same bound as the property's: a huge fused loop may run for hours.
            if axle::verify_module(&m).is_ok()
                && largest_array(&m) <= MAX_RUN_ELEMENTS
                && run(&m, CPU_DEFAULT).is_ok()
            {
                ran += 1;
            }
        }
    }
    assert!(ran >= 20, "only {ran} of 200 generated modules ran on cpu");
    // The property's generator has quickcheck's default size, from the same seed.
    let size = std::env::var("QUICKCHECK_GENERATOR_SIZE")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100);
    QuickCheck::new()
        .rng(quickcheck::Gen::from_size_and_seed(size, seed))
        .tests(150)
        .max_tests(2000)
        .quickcheck(prop as fn(HostileModule) -> TestResult);
}
