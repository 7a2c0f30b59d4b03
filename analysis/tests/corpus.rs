//! Runs every case of the shared corpus on the reference evaluator, from the pre-optimization
//! HLO (`NAME.hlo`) and from XLA CPU's optimized HLO (`NAME.opt.hlo`), and compares every output
//! leaf with XLA's output (`NAME.outK.npy`) under the manifest's tolerance.
//!
//! One named test per case and file: `NAME.hlo` and `NAME.opt.hlo`.

mod common;

use axle_analysis::evaluate;
use common::{check_output, inputs, leaves, run_case, shared_dir};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The harness itself must notice a wrong answer: compare one case's first output with the
/// expectation of another output.
fn harness_detects_mismatch(dir: &Path, case: &Value) -> Result<(), Failed> {
    let file = format!("{}.hlo", case["name"].as_str().unwrap());
    let text = std::fs::read_to_string(dir.join(&file)).map_err(|e| e.to_string())?;
    let module = axle_ir::parser::parse_module(&text).map_err(|e| e.to_string())?;
    let got = evaluate(&module, &inputs(dir, case)?).map_err(|e| e.to_string())?;
    let got = leaves(&got);
    match check_output(dir, case, 1, got[0]) {
        Err(_) => Ok(()),
        Ok(()) => Err("out0 compared equal to out1's expectation".into()),
    }
}

fn main() {
    let args = Arguments::from_args();
    let dir: PathBuf = shared_dir().join("corpus");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json")).expect("corpus manifest.json"),
    )
    .expect("manifest.json parses");
    let mut trials = Vec::new();
    for case in manifest["cases"].as_array().expect("manifest cases") {
        let name = case["name"].as_str().expect("case name").to_string();
        for file in [format!("{name}.hlo"), format!("{name}.opt.hlo")] {
            let (dir, case) = (dir.clone(), case.clone());
            let f = file.clone();
            trials.push(Trial::test(file, move || run_case(&dir, &case, &f)));
        }
    }
    let first = manifest["cases"]
        .as_array()
        .and_then(|c| {
            c.iter()
                .find(|c| c["outputs"].as_array().is_some_and(|o| o.len() > 1))
        })
        .cloned()
        .expect("a case with two outputs");
    trials.push(Trial::test("harness_detects_mismatch", move || {
        harness_detects_mismatch(&dir, &first)
    }));
    libtest_mimic::run(&args, trials).exit();
}
