//! The self-test's planted bug: `planted-sub-self` is in the `pipeline-planted` target's registry
//! only, drawn into its random pipelines like any other pass, and the pipeline check reports the
//! wrong results it makes, where the compiler's own passes on the same module pass.

use axle::ir::{parse_module, Module};
use axle_fuzz::pipeline::{check_module, pass_names};
use axle_fuzz::planted_sub_self::NAME;
use axle_fuzz::Target;

/// `x - x` of a float and of an integer parameter (64 elements, so the adversarial inputs hold
/// infinities and NaNs).
fn sub_self() -> Module {
    parse_module(
        "HloModule sub_self\n\
         ENTRY main {\n\
         \x20 f = f32[64] parameter(0)\n\
         \x20 i = s32[64] parameter(1)\n\
         \x20 df = f32[64] subtract(f, f)\n\
         \x20 di = s32[64] subtract(i, i)\n\
         \x20 ROOT t = (f32[64], s32[64]) tuple(df, di)\n\
         }\n",
    )
    .expect("the module parses")
}

#[test]
fn the_planted_pass_is_only_in_the_self_tests_registry() {
    let normal = pass_names(Target::Pipeline.pass_registry().expect("a pipeline target"));
    let planted = pass_names(
        Target::PipelinePlanted
            .pass_registry()
            .expect("a pipeline target"),
    );
    assert!(!normal.contains(&NAME));
    assert!(!axle::passes::registry().names().contains(&NAME));
    let mut without: Vec<&str> = planted.iter().copied().filter(|&n| n != NAME).collect();
    assert_eq!(planted.len(), without.len() + 1, "{planted:?}");
    without.sort();
    let mut normal_sorted = normal.clone();
    normal_sorted.sort();
    assert_eq!(without, normal_sorted);
}

#[test]
fn the_pipeline_check_reports_the_planted_pass() {
    let m = sub_self();
    let planted = Target::PipelinePlanted.pass_registry().expect("a registry");
    let normal = Target::Pipeline.pass_registry().expect("a registry");
    for seed in [0, 1, 2] {
        let err = check_module(&m, NAME, seed, planted).expect_err("the planted pass is wrong");
        assert!(err.contains("differ"), "{err}");
        check_module(&m, "algsimp,constant-folding,cse,dce", seed, normal)
            .expect("the compiler's passes keep x - x");
    }
    // The integer `x - x` alone is not the planted pass's business (and is 0 anyway).
    let ints = parse_module(
        "HloModule ints\nENTRY main {\n  i = s32[8] parameter(0)\n  ROOT d = s32[8] subtract(i, i)\n}\n",
    )
    .expect("the module parses");
    check_module(&ints, NAME, 0, planted).expect("the planted pass leaves integers alone");
}
