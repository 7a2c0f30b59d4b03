//! Helpers shared by the evaluator's test files: reading `.npy` files, comparing literals under
//! a tolerance, and locating the shared reference data.
#![allow(dead_code)]

use axle_analysis::evaluate;
use axle_ir::{ArrayLiteral, ArrayShape, ConstValue, ElementType, Literal, Module, Opcode};
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

/// Reads a `.npy` file as a literal of element type `ty` (`bf16` arrays are stored as `uint16`
/// bit patterns, so the requested type wins when the widths agree).
pub fn read_npy(path: &Path, ty: Option<ElementType>) -> Result<Literal, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(format!("{}: not an npy file", path.display()));
    }
    let (hlen, hstart) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        )
    };
    let header = std::str::from_utf8(&bytes[hstart..hstart + hlen]).map_err(|e| e.to_string())?;
    let field = |key: &str| -> Result<&str, String> {
        let i = header
            .find(&format!("'{key}'"))
            .ok_or_else(|| format!("npy header without {key}: {header}"))?;
        Ok(header[i + key.len() + 2..].trim_start_matches([':', ' ']))
    };
    let descr = field("descr")?;
    let descr = &descr[1..descr[1..].find('\'').unwrap() + 1];
    if field("fortran_order")?.starts_with("True") {
        return Err("fortran-order npy files are not supported".into());
    }
    let shape_txt = field("shape")?;
    let shape_txt = &shape_txt[1..shape_txt.find(')').unwrap()];
    let dims: Vec<i64> = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<i64>().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let npy_ty = match &descr[1..] {
        "f2" => ElementType::F16,
        "f4" => ElementType::F32,
        "f8" => ElementType::F64,
        "c8" => ElementType::C64,
        "c16" => ElementType::C128,
        "i1" => ElementType::S8,
        "i2" => ElementType::S16,
        "i4" => ElementType::S32,
        "i8" => ElementType::S64,
        "u1" => ElementType::U8,
        "u2" => ElementType::U16,
        "u4" => ElementType::U32,
        "u8" => ElementType::U64,
        "b1" => ElementType::Pred,
        d => return Err(format!("unsupported npy dtype {d}")),
    };
    if descr.starts_with('>') && npy_ty.byte_size() > 1 {
        return Err("big-endian npy files are not supported".into());
    }
    let ty = match ty {
        Some(t) if t.byte_size() == npy_ty.byte_size() => t,
        Some(t) => return Err(format!("npy dtype {descr} cannot hold {t}")),
        None => npy_ty,
    };
    let data = bytes[hstart + hlen..].to_vec();
    let n: i64 = dims.iter().product();
    if data.len() != n as usize * ty.byte_size() {
        return Err(format!(
            "{}: data size does not match the shape",
            path.display()
        ));
    }
    Ok(Literal::Array(ArrayLiteral {
        shape: ArrayShape::new(ty, &dims),
        data,
    }))
}

/// A comparison tolerance.
#[derive(Clone, Copy, Debug)]
pub enum Tolerance {
    /// Bit-identical (NaN payloads aside).
    Exact,
    /// `|got - want| <= atol + rtol * |want|`, as numpy's `allclose`.
    Close { rtol: f64, atol: f64 },
}

/// The leaves of a literal, depth-first.
pub fn leaves(l: &Literal) -> Vec<&ArrayLiteral> {
    match l {
        Literal::Array(a) => vec![a],
        Literal::Tuple(v) => v.iter().flat_map(leaves).collect(),
    }
}

/// Compares `got` against `want`: same type and dimensions, NaN at the same positions, other
/// elements within `tol`. Returns a description of the first mismatches.
pub fn compare(got: &ArrayLiteral, want: &ArrayLiteral, tol: Tolerance) -> Result<(), String> {
    if got.shape.ty != want.shape.ty || got.shape.dims != want.shape.dims {
        return Err(format!(
            "shape mismatch: got {}{:?}, want {}{:?}",
            got.shape.ty, got.shape.dims, want.shape.ty, want.shape.dims
        ));
    }
    let ty = got.ty();
    let mut bad = Vec::new();
    let mut count = 0;
    for i in 0..got.len() {
        let ok = if ty.is_floating() {
            let parts = if ty.is_complex() { 2 } else { 1 };
            let w = ty.component_type().byte_size();
            (0..parts).all(|p| {
                let gb = &got.element_bytes(i)[p * w..(p + 1) * w];
                let wb = &want.element_bytes(i)[p * w..(p + 1) * w];
                let g = axle_ir::literal::element_to_f64(ty.component_type(), gb);
                let e = axle_ir::literal::element_to_f64(ty.component_type(), wb);
                if g.is_nan() || e.is_nan() {
                    return g.is_nan() && e.is_nan();
                }
                match tol {
                    Tolerance::Exact => gb == wb,
                    Tolerance::Close { rtol, atol } => {
                        if g.is_infinite() || e.is_infinite() {
                            g == e
                        } else {
                            (g - e).abs() <= atol + rtol * e.abs()
                        }
                    }
                }
            })
        } else {
            got.element_bytes(i) == want.element_bytes(i)
        };
        if !ok {
            count += 1;
            if bad.len() < 8 {
                bad.push(format!(
                    "[{i}] got {} want {}",
                    axle_ir::literal::format_element(ty, got.element_bytes(i)),
                    axle_ir::literal::format_element(ty, want.element_bytes(i))
                ));
            }
        }
    }
    if count == 0 {
        Ok(())
    } else {
        Err(format!(
            "{count} of {} elements differ: {}",
            got.len(),
            bad.join(", ")
        ))
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

/// Reads the case's inputs.
pub fn inputs(dir: &Path, case: &Value) -> Result<Vec<Literal>, Failed> {
    let mut args = Vec::new();
    for input in case["inputs"].as_array().ok_or("manifest: no inputs")? {
        let f = input["file"]
            .as_str()
            .ok_or("manifest: input without file")?;
        args.push(read_npy(&dir.join(f), dtype(&input["dtype"]))?);
    }
    Ok(args)
}

/// Compares result leaf `got` with output `k` of the case.
pub fn check_output(dir: &Path, case: &Value, k: usize, got: &ArrayLiteral) -> Result<(), String> {
    let out = &case["outputs"][k];
    let f = out["file"]
        .as_str()
        .ok_or("manifest: output without file")?;
    let want = read_npy(&dir.join(f), dtype(&out["dtype"]))?;
    let Literal::Array(want) = want else {
        unreachable!("npy files hold arrays")
    };
    compare(got, &want, tolerance(&out["tolerance"])?).map_err(|e| format!("out{k}: {e}"))
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
