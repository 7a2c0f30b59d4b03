//! The IR crate's filetests: `tests/filetests/<pass>/<case>.hlo`, one named test per file (see
//! `axle_ir::filetest` for the format; `BLESS=1` rewrites the `EXPECT:` blocks).

use std::path::PathBuf;
use std::sync::Arc;

use axle_ir::filetest::{collect_filetests, run_filetest, test_name};
use axle_ir::PassRegistry;
use libtest_mimic::{Arguments, Trial};

fn main() {
    let args = Arguments::from_args();
    let mut reg = PassRegistry::new();
    axle_ir::passes::register(&mut reg);
    let reg = Arc::new(reg);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/filetests");
    let files = collect_filetests(&root);
    assert!(!files.is_empty(), "no filetests under {}", root.display());
    let trials = files
        .into_iter()
        .map(|p| {
            let reg = Arc::clone(&reg);
            Trial::test(test_name(&root, &p), move || {
                run_filetest(&p, &reg, None).map_err(Into::into)
            })
        })
        .collect();
    libtest_mimic::run(&args, trials).exit();
}
