//! The fusion crate's filetests: `tests/filetests/<pass>/<case>.hlo`, one named test per file
//! (see `axle_ir::filetest` for the format; `BLESS=1` rewrites the `EXPECT:` blocks).

use std::path::PathBuf;

use axle_analysis::same_results;
use axle_ir::filetest::ExtraCheck;
use axle_ir::{Module, PassRegistry, Tolerance};
use libtest_mimic::Arguments;

/// Every rewrite is exact: the evaluator gives bit-identical results (NaN matching NaN) before
/// and after on inputs full of special values.
fn same_values(before: &Module, after: &Module) -> Result<(), String> {
    same_results(before, after, 7, 4, Tolerance::Exact).map(|_| ())
}

fn main() {
    let args = Arguments::from_args();
    let mut reg = PassRegistry::new();
    axle_ir::passes::register(&mut reg);
    axle_fusion::register(&mut reg);
    axle_fusion::register_fusion_builtin(&mut reg);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    // The batch-norm expansion computes in the element type and the linalg upcast in f32 where
    // the evaluator's ops compute in f64, so they are not exact; `tests/batchnorm_expander.rs`
    // and `tests/linalg_upcast.rs` compare them with the evaluator within a tolerance instead.
    // The excess precision skips a bf16 rounding the evaluator does; `tests/excess_precision.rs`
    // compares it with the evaluator on the computation written in f32. The evaluator cannot
    // run a module before `dynamic-padder` (it sets runtime sizes); `tests/dynamic_padder.rs`
    // compares the padded module with static ones written for each size instead.
    let trials = axle_testkit::filetest_trials(&root, reg, |p| {
        let inexact = p.parent().is_some_and(|d| {
            d.ends_with("batchnorm-expander")
                || d.ends_with("linalg-upcast")
                || d.ends_with("excess-precision")
                || d.ends_with("dynamic-padder")
        });
        (!inexact).then_some(same_values as ExtraCheck)
    });
    libtest_mimic::run(&args, trials).exit();
}
