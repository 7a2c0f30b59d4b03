//! A MobileNet-style convolution stack with elided constants (the kind of model XLA keeps in its
//! CPU benchmark directory), written by `axle_bench::graphs::conv_stack`: with its constants
//! filled by `--elided-constants random`, it compiles and runs on `cpu` and agrees with the
//! reference evaluator (`interpreter`) on the same generated inputs.

use axle::elided::{apply, ElidedConstants};
use axle::ir::{compare_arrays, parse_module, Tolerance};
use axle::run::{run_module, RunOptions};

#[test]
fn conv_stack_with_random_constants_matches_the_interpreter() {
    let text = axle_bench::graphs::conv_stack(4);
    assert!(text.contains("constant({...})"));
    let mut m = parse_module(&text).expect("parses");
    axle::ir::verify::verify(&m).expect("verifies");
    assert!(apply(&mut m.clone(), ElidedConstants::Error, 0).is_err());
    let filled = apply(&mut m, ElidedConstants::Random, 7).expect("fills");
    assert!(filled > 8, "{filled} constants filled");
    let run = |backend: &str| {
        let opts = RunOptions {
            backend: backend.into(),
            seed: 3,
            ..Default::default()
        };
        run_module(m.clone(), &opts).expect("runs").outputs
    };
    let cpu = run("cpu");
    let interp = run("interpreter");
    assert_eq!(cpu.len(), 1);
    assert!(
        cpu[0].to_f64_vec().iter().any(|&v| v != 0.0),
        "a non-trivial output"
    );
    let tol = Tolerance::Close {
        rtol: 1e-4,
        atol: 1e-5,
    };
    compare_arrays(&interp[0], &cpu[0], tol).expect("cpu matches the interpreter");
}
