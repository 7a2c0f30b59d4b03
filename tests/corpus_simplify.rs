//! Every case of the shared corpus (`NAME.hlo` and XLA's optimized `NAME.opt.hlo`) under the
//! full `simplify` pipeline: the pipeline verifies after every pass and checks every pass's
//! changed flag, and the reference evaluator gives bit-identical results before and after (IEEE
//! arithmetic), on the corpus's own inputs. One named test per file. (Files whose constants XLA elided cannot be
//! evaluated; for them the pipeline and the verifier are still checked.)

use std::path::{Path, PathBuf};

use axle::ir::{compare_literals, parse_module, PassManagerOptions, Tolerance, VerifyMode};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

fn shared() -> PathBuf {
    if let Ok(p) = std::env::var("AXLE_SHARED") {
        return PathBuf::from(p);
    }
    let beside = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../shared");
    if beside.exists() {
        beside
    } else {
        PathBuf::from("/work/shared")
    }
}

fn run_case(dir: &Path, case: &Value, file: &str) -> Result<(), Failed> {
    let text = std::fs::read_to_string(dir.join(file)).map_err(|e| format!("{file}: {e}"))?;
    let m = parse_module(&text).map_err(|e| e.render(file))?;
    let files: Vec<PathBuf> = case["inputs"]
        .as_array()
        .ok_or("manifest: no inputs")?
        .iter()
        .map(|i| dir.join(i["file"].as_str().unwrap_or_default()))
        .collect();
    let args = axle::run::bind_inputs(&m, &files)?;
    let mut out = m.clone();
    let opts = PassManagerOptions {
        verify: VerifyMode::Each,
        check_changed: true,
        ..Default::default()
    };
    let pipeline = axle::passes::standard_pipeline("simplify").ok_or("no simplify pipeline")?;
    axle::passes::optimize(&mut out, pipeline, opts).map_err(|e| e.to_string())?;
    let ieee = axle_analysis::equivalence::ieee();
    let before = match axle_analysis::evaluate_with(&m, &args, &ieee) {
        Ok(v) => v,
        Err(e) if text.contains("{...}") => {
            // XLA elided a constant: nothing to evaluate, the pipeline was still checked.
            let _ = e;
            return Ok(());
        }
        Err(e) => return Err(format!("the input does not evaluate: {e}").into()),
    };
    let after = axle_analysis::evaluate_with(&out, &args, &ieee)
        .map_err(|e| format!("the simplified module does not evaluate: {e}"))?;
    compare_literals(&before, &after, Tolerance::Exact).map_err(|e| {
        format!(
            "results differ: {e}\n--- simplified ---\n{}",
            axle::ir::print_module(&out)
        )
    })?;
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let dir = shared().join("corpus");
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("manifest.json")).expect("the corpus manifest"),
    )
    .expect("manifest JSON");
    let cases = manifest["cases"].as_array().expect("cases").clone();
    assert!(cases.len() >= 30, "found {} corpus cases", cases.len());
    let mut trials = Vec::new();
    for case in cases {
        for key in ["hlo", "xla_optimized_hlo"] {
            let Some(file) = case[key].as_str().map(str::to_string) else {
                continue;
            };
            let (dir, case) = (dir.clone(), case.clone());
            trials.push(Trial::test(file.clone(), move || {
                run_case(&dir, &case, &file)
            }));
        }
    }
    libtest_mimic::run(&args, trials).exit();
}
