//! Helpers shared by the evaluator's test files: locating the shared reference data and running
//! manifest-driven cases (inputs and XLA's outputs as `.npy`) under their tolerances.
#![allow(dead_code)]

use axle_analysis::evaluate;
use axle_ir::compare::{compare_arrays, Tolerance};
use axle_ir::npy::{read_npy, read_npy_as};
use axle_ir::{ArrayLiteral, ConstValue, ElementType, Literal, Module, Opcode};
use libtest_mimic::Failed;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The shared data directory: `$AXLE_SHARED`, else `../shared` beside the repository, else
/// `/work/shared`.
pub fn shared_dir() -> PathBuf {
    if let Ok(d) = std::env::var("AXLE_SHARED") {
        return PathBuf::from(d);
    }
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared");
    if beside.is_dir() {
        return beside;
    }
    PathBuf::from("/work/shared")
}

/// The leaves of a literal, depth-first.
pub fn leaves(l: &Literal) -> Vec<&ArrayLiteral> {
    match l {
        Literal::Array(a) => vec![a],
        Literal::Tuple(v) => v.iter().flat_map(leaves).collect(),
    }
}

// ---------------------------------------------------------------------------------------------
// Manifest-driven cases (the corpus and the XLA reference cases share the format).

pub fn dtype(v: &Value) -> Option<ElementType> {
    ElementType::from_name(v.as_str()?)
}

pub fn tolerance(v: &Value) -> Result<Tolerance, String> {
    match v {
        Value::String(s) if s == "exact" => Ok(Tolerance::Exact),
        Value::Object(o) => Ok(Tolerance::Close {
            rtol: o.get("rtol").and_then(Value::as_f64).ok_or("bad rtol")?,
            atol: o.get("atol").and_then(Value::as_f64).ok_or("bad atol")?,
        }),
        _ => Err(format!("unknown tolerance {v}")),
    }
}

/// Reads a `.npy` file as type `ty` (the manifest's dtype; `bf16` files hold `uint16` bits).
fn read(path: &Path, ty: Option<ElementType>) -> Result<ArrayLiteral, String> {
    match ty {
        Some(t) => read_npy_as(path, t),
        None => read_npy(path),
    }
    .map_err(|e| e.to_string())
}

/// Reads the case's inputs.
pub fn inputs(dir: &Path, case: &Value) -> Result<Vec<Literal>, Failed> {
    let mut args = Vec::new();
    for input in case["inputs"].as_array().ok_or("manifest: no inputs")? {
        let f = input["file"]
            .as_str()
            .ok_or("manifest: input without file")?;
        args.push(Literal::Array(read(&dir.join(f), dtype(&input["dtype"]))?));
    }
    Ok(args)
}

/// Compares result leaf `got` with output `k` of the case.
pub fn check_output(dir: &Path, case: &Value, k: usize, got: &ArrayLiteral) -> Result<(), String> {
    let out = &case["outputs"][k];
    let f = out["file"]
        .as_str()
        .ok_or("manifest: output without file")?;
    let want = read(&dir.join(f), dtype(&out["dtype"]))?;
    compare_arrays(&want, got, tolerance(&out["tolerance"])?).map_err(|e| format!("out{k}: {e}"))
}

/// Whether the entry computation holds a constant whose value the text elided (`{...}`):
/// XLA prints large folded constants that way in its optimized dumps.
fn has_elided_constant(m: &Module) -> bool {
    m.comp_insts(m.entry())
        .into_iter()
        .any(|id| matches!(m.constant(id), Some(ConstValue::Elided)))
}

pub fn run_case(dir: &Path, case: &Value, file: &str) -> Result<(), Failed> {
    let text = std::fs::read_to_string(dir.join(file)).map_err(|e| format!("{file}: {e}"))?;
    let module = axle_ir::parser::parse_module(&text).map_err(|e| format!("{file}: {e}"))?;
    let args = inputs(dir, case)?;
    let n_out = case["outputs"]
        .as_array()
        .ok_or("manifest: no outputs")?
        .len();
    if has_elided_constant(&module) {
        return run_per_output(&module, &args, dir, case, n_out);
    }
    let got = evaluate(&module, &args).map_err(|e| e.to_string())?;
    let got = leaves(&got);
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

/// A module with an elided constant cannot be evaluated as a whole. Each output of the root
/// tuple is evaluated on its own: outputs that do not depend on the missing data must match
/// XLA's, and the others must be refused with an error naming the elided constant (never a
/// wrong answer). At least one output must be checked.
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
        match evaluate(&m, args) {
            Ok(Literal::Array(a)) => {
                checked += 1;
                if let Err(e) = check_output(dir, case, k, &a) {
                    errors.push(e);
                }
            }
            Ok(Literal::Tuple(_)) => errors.push(format!("out{k}: unexpected tuple")),
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
