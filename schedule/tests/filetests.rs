//! The schedule crate's filetests: `tests/filetests/<pass>/<case>.hlo`, one named test per file
//! (see `axle_ir::filetest` for the format; `BLESS=1` rewrites the `EXPECT:` blocks). Every
//! pass of this crate keeps what a module computes, which the evaluator checks exactly.

use std::path::PathBuf;
use std::sync::Arc;

use axle_analysis::same_results;
use axle_ir::filetest::{collect_filetests, run_filetest, test_name, ExtraCheck};
use axle_ir::{Module, PassRegistry, Tolerance};
use libtest_mimic::{Arguments, Trial};

fn same_values(before: &Module, after: &Module) -> Result<(), String> {
    same_results(before, after, 7, 4, Tolerance::Exact).map(|_| ())
}

fn main() {
    let args = Arguments::from_args();
    let mut reg = PassRegistry::new();
    axle_ir::passes::register(&mut reg);
    axle_schedule::register(&mut reg);
    let reg = Arc::new(reg);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let files = collect_filetests(&root);
    assert!(!files.is_empty(), "no filetests under {}", root.display());
    let trials = files
        .into_iter()
        .map(|p| {
            let reg = Arc::clone(&reg);
            let extra: Option<ExtraCheck> = Some(same_values);
            Trial::test(test_name(&root, &p), move || {
                run_filetest(&p, &reg, extra).map_err(Into::into)
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
