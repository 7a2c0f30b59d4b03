//! quickcheck over generated hostile modules ([`axle::ir::hostile`]: zero, huge, overflowing,
//! bounded and unbounded dynamic dimensions, deep tuples, mismatched reducer types) through the
//! whole path a user takes: parse, verify, the runnable check, then `axle::run::run_module` on
//! the `interpreter` and the `cpu` backend (inputs generated, compiled, run) under a 64 MiB
//! memory ceiling. The property: no panic and no abort anywhere; both backends run the same
//! modules and refuse the same ones; and where they run a module, they agree on its outputs. Huge shapes are far over the ceiling, so they must fail
//! cleanly; the shapes that fit are tiny, so every run is fast.
//!
//! This test binary sets the process's memory ceiling, so it holds this one test only.

use axle::ir::hostile::HostileModule;
use axle::ir::{compare_arrays, Tolerance};
use quickcheck::{Arbitrary, QuickCheck, TestResult};

const CEILING: u64 = 64 << 20;

fn run(m: &axle::ir::Module, backend: &str) -> Result<Vec<axle::ir::ArrayLiteral>, String> {
    let opts = axle::run::RunOptions {
        backend: backend.into(),
        seed: 1,
        ..Default::default()
    };
    axle::run::run_module(m.clone(), &opts).map(|r| r.outputs)
}

fn prop(h: HostileModule) -> TestResult {
    let Ok(m) = axle::ir::parse_module(&h.text) else {
        return TestResult::discard();
    };
    if axle::verify_module(&m).is_err() {
        return TestResult::discard();
    }
    let interp = run(&m, "interpreter");
    let cpu = run(&m, "cpu");
    match (&interp, &cpu) {
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => {
            return TestResult::error(format!(
                "one backend runs the module and the other refuses it: {e}\n{}",
                h.text
            ))
        }
        _ => {}
    }
    if let (Ok(a), Ok(b)) = (&interp, &cpu) {
        if a.len() != b.len() {
            return TestResult::error(format!("{} vs {} outputs\n{}", a.len(), b.len(), h.text));
        }
        // Transcendentals and narrow floats round a little differently in the two backends.
        let tol = Tolerance::Close {
            rtol: 2e-2,
            atol: 1e-5,
        };
        for (k, (x, y)) in a.iter().zip(b).enumerate() {
            if let Err(e) = compare_arrays(x, y, tol) {
                return TestResult::error(format!("output {k} differs: {e}\n{}", h.text));
            }
        }
    }
    TestResult::passed()
}

#[test]
fn hostile_modules_run_or_fail_cleanly_on_every_backend() {
    axle::ir::memory::set_limit(Some(CEILING));
    // The generator must reach both backends' success paths, not only their errors.
    let mut g = quickcheck::Gen::new(20);
    let mut ran = 0;
    for _ in 0..200 {
        let h = HostileModule::arbitrary(&mut g);
        if let Ok(m) = axle::ir::parse_module(&h.text) {
            if axle::verify_module(&m).is_ok() && run(&m, "cpu").is_ok() {
                ran += 1;
            }
        }
    }
    assert!(ran >= 20, "only {ran} of 200 generated modules ran on cpu");
    QuickCheck::new()
        .tests(150)
        .max_tests(2000)
        .quickcheck(prop as fn(HostileModule) -> TestResult);
}
