//! Every `.hlo`, `.opt.hlo` and `.debug.hlo` of the shared corpus and every `.hlo` of the
//! baseline parses and verifies clean.

use crate::common;
use axle_ir::{parse_module, verify};

#[test]
fn corpus_and_baseline_verify_clean() {
    let files: Vec<_> = common::all_hlo_files()
        .into_iter()
        .filter(|f| f.extension().is_some_and(|e| e == "hlo"))
        .collect();
    assert!(
        files.len() >= 100,
        "expected the shared corpus, found {} files",
        files.len()
    );
    let mut failures = Vec::new();
    for f in &files {
        let text = common::read_text(f);
        let m = match parse_module(&text) {
            Ok(m) => m,
            Err(e) => {
                failures.push(e.render(&f.display().to_string()));
                continue;
            }
        };
        if let Err(errs) = verify(&m) {
            let shown: Vec<String> = errs
                .errors
                .iter()
                .take(10)
                .map(|e| format!("{}:{e}", f.display()))
                .collect();
            failures.push(format!("{} errors:\n{}", errs.len(), shown.join("\n")));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} files fail:\n{}",
        failures.len(),
        files.len(),
        failures.join("\n")
    );
}
