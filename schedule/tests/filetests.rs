//! The schedule crate's filetests: `tests/filetests/<pass>/<case>.hlo`, one named test per file
//! (see `axle_ir::filetest` for the format; `BLESS=1` rewrites the `EXPECT:` blocks). Every
//! pass of this crate keeps what a module computes, which the evaluator checks exactly.

use std::path::PathBuf;

use axle_analysis::same_results;
use axle_ir::filetest::ExtraCheck;
use axle_ir::{Module, PassRegistry, Tolerance};
use libtest_mimic::Arguments;

fn same_values(before: &Module, after: &Module) -> Result<(), String> {
    same_results(before, after, 7, 4, Tolerance::Exact).map(|_| ())
}

fn main() {
    let args = Arguments::from_args();
    let mut reg = PassRegistry::new();
    axle_ir::passes::register(&mut reg);
    axle_schedule::register(&mut reg);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let trials = axle_testkit::filetest_trials(&root, reg, |_| Some(same_values as ExtraCheck));
    libtest_mimic::run(&args, trials).exit();
}
