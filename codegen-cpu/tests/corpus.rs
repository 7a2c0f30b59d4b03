//! Runs every case of the shared corpus on the CPU backend, from the pre-optimization HLO
//! (`NAME.hlo`) and from XLA CPU's optimized HLO (`NAME.opt.hlo`), and compares every output leaf
//! with XLA's output (`NAME.outK.npy`) under the manifest's tolerance. Each file is compiled
//! once.
//!
//! One named test per case and file: `NAME.hlo` and `NAME.opt.hlo`.

use axle_codegen_cpu::{compile, CpuOptions};
use axle_ir::{
    compare_arrays, ArrayLiteral, ConstValue, ElementType, Literal, Module, Opcode, Tolerance,
};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;
use std::path::{Path, PathBuf};

fn shared_dir() -> PathBuf {
    if let Ok(d) = std::env::var("AXLE_SHARED") {
        return PathBuf::from(d);
    }
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared");
    if beside.is_dir() {
        return beside;
    }
    PathBuf::from("/work/shared")
}

fn dtype(v: &Value) -> Result<ElementType, String> {
    v.as_str()
        .and_then(ElementType::from_name)
        .ok_or_else(|| format!("manifest: unknown dtype {v}"))
}

fn tolerance(v: &Value) -> Result<Tolerance, String> {
    match v {
        Value::String(s) if s == "exact" => Ok(Tolerance::Exact),
        Value::Object(o) => Ok(Tolerance::Close {
            rtol: o.get("rtol").and_then(Value::as_f64).ok_or("bad rtol")?,
            atol: o.get("atol").and_then(Value::as_f64).ok_or("bad atol")?,
        }),
        _ => Err(format!("unknown tolerance {v}")),
    }
}

fn inputs(dir: &Path, case: &Value) -> Result<Vec<Literal>, String> {
    let mut args = Vec::new();
    for input in case["inputs"].as_array().ok_or("manifest: no inputs")? {
        let f = input["file"]
            .as_str()
            .ok_or("manifest: input without file")?;
        let lit = axle_ir::read_npy_as(dir.join(f), dtype(&input["dtype"])?)
            .map_err(|e| format!("{f}: {e}"))?;
        args.push(Literal::Array(lit));
    }
    Ok(args)
}

fn check_output(dir: &Path, case: &Value, k: usize, got: &ArrayLiteral) -> Result<(), String> {
    let out = &case["outputs"][k];
    let f = out["file"]
        .as_str()
        .ok_or("manifest: output without file")?;
    let want = axle_ir::read_npy_as(dir.join(f), dtype(&out["dtype"])?)
        .map_err(|e| format!("{f}: {e}"))?;
    compare_arrays(&want, got, tolerance(&out["tolerance"])?).map_err(|e| format!("out{k}: {e}"))
}

fn has_elided_constant(m: &Module) -> bool {
    m.comp_insts(m.entry())
        .into_iter()
        .any(|id| matches!(m.constant(id), Some(ConstValue::Elided)))
}

fn run_case(dir: &Path, case: &Value, file: &str) -> Result<(), Failed> {
    let text = std::fs::read_to_string(dir.join(file)).map_err(|e| format!("{file}: {e}"))?;
    let module = axle_ir::parse_module(&text).map_err(|e| format!("{file}: {e}"))?;
    axle_ir::verify(&module).map_err(|e| format!("{file}: {e}"))?;
    let args = inputs(dir, case)?;
    let n_out = case["outputs"]
        .as_array()
        .ok_or("manifest: no outputs")?
        .len();
    if has_elided_constant(&module) {
        return run_per_output(&module, &args, dir, case, n_out);
    }
    let exe = compile(&module, &CpuOptions::default()).map_err(|e| e.to_string())?;
    let got = exe.run_literals(&args).map_err(|e| e.to_string())?;
    if got.len() != n_out {
        return Err(format!(
            "got {} result leaves, the manifest lists {n_out}",
            got.len()
        )
        .into());
    }
    let errors: Vec<String> = got
        .iter()
        .enumerate()
        .filter_map(|(k, g)| check_output(dir, case, k, g).err())
        .collect();
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n").into())
    }
}

/// A module with an elided constant cannot be compiled as a whole: each output of the root
/// tuple is compiled on its own; outputs that do not depend on the missing data must match
/// XLA's, the others must be refused with an error naming the constant.
fn run_per_output(
    module: &Module,
    args: &[Literal],
    dir: &Path,
    case: &Value,
    n_out: usize,
) -> Result<(), Failed> {
    let entry = module.entry();
    let root = module.root(entry);
    if module.opcode(root) != Opcode::Tuple || module.operands(root).len() != n_out {
        return Err("an elided constant and no flat root tuple to split".into());
    }
    let mut checked = 0;
    let mut errors = Vec::new();
    for k in 0..n_out {
        let mut m = module.clone();
        m.set_root(entry, module.operands(root)[k]);
        // The declared entry layout describes the whole tuple.
        m.entry_layout = None;
        match compile(&m, &CpuOptions::default()) {
            Ok(exe) => match exe.run_literals(args) {
                Ok(got) if got.len() == 1 => {
                    checked += 1;
                    if let Err(e) = check_output(dir, case, k, &got[0]) {
                        errors.push(e);
                    }
                }
                Ok(_) => errors.push(format!("out{k}: unexpected tuple")),
                Err(e) => errors.push(format!("out{k}: {e}")),
            },
            Err(e) if e.opcode == "constant" && e.message.contains("elided") => {}
            Err(e) => errors.push(format!("out{k}: {e}")),
        }
    }
    if checked == 0 {
        errors.push("no output could be checked".into());
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n").into())
    }
}

/// The harness itself must notice a wrong answer: compare one case's first output with the
/// expectation of another output.
fn harness_detects_mismatch(dir: &Path, case: &Value) -> Result<(), Failed> {
    let file = format!("{}.hlo", case["name"].as_str().unwrap_or_default());
    let text = std::fs::read_to_string(dir.join(&file)).map_err(|e| e.to_string())?;
    let module = axle_ir::parse_module(&text).map_err(|e| e.to_string())?;
    let exe = compile(&module, &CpuOptions::default()).map_err(|e| e.to_string())?;
    let got = exe
        .run_literals(&inputs(dir, case)?)
        .map_err(|e| e.to_string())?;
    match check_output(dir, case, 1, &got[0]) {
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
