//! Test support shared by Axle's crates: locating the shared reference data, and running
//! manifest-driven cases (the corpus in `../shared/corpus` and the XLA reference cases in
//! `analysis/tests/xla` share the format: `NAME.hlo`, inputs and XLA's outputs as `.npy`, a
//! tolerance per output) on any way of running a module, so the evaluator and every backend are
//! held to the same harness.
#![deny(missing_docs)]

use axle_ir::filetest::{collect_filetests, run_filetest, test_name, ExtraCheck};
use axle_ir::{
    compare_arrays, read_npy, read_npy_as, ArrayLiteral, ConstValue, ElementType, Literal, Module,
    Opcode, PassRegistry, Tolerance,
};
use libtest_mimic::{Failed, Trial};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Arc;

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

/// Why a module did not run: the instruction's opcode (empty when none is to blame) and the
/// message.
#[derive(Clone, Debug)]
pub struct RunFailure {
    /// The opcode of the instruction the failure names, or empty.
    pub opcode: String,
    /// The whole message.
    pub message: String,
}

impl RunFailure {
    /// A failure that names no instruction.
    pub fn msg(message: impl Into<String>) -> Self {
        RunFailure {
            opcode: String::new(),
            message: message.into(),
        }
    }
}

/// A way of running a module: compiles (or not) and runs it on the arguments, giving the
/// result's array leaves depth-first.
pub type Runner =
    Arc<dyn Fn(&Module, &[Literal]) -> Result<Vec<ArrayLiteral>, RunFailure> + Send + Sync>;

/// The leaves of a literal, depth-first.
pub fn leaves(l: &Literal) -> Vec<ArrayLiteral> {
    match l {
        Literal::Array(a) => vec![a.clone()],
        Literal::Tuple(v) => v.iter().flat_map(leaves).collect(),
    }
}

/// The bytes of each argument, for a compiled executable's inputs; every argument must be an
/// array (a tuple panics: a test's own inputs are arrays).
pub fn array_bytes(args: &[Literal]) -> Vec<&[u8]> {
    args.iter()
        .map(|l| match l {
            Literal::Array(a) => &a.data[..],
            Literal::Tuple(_) => panic!("array parameters"),
        })
        .collect()
}

/// The element type a manifest names (`f32`, `bf16`, ...).
pub fn dtype(v: &Value) -> Option<ElementType> {
    ElementType::from_name(v.as_str()?)
}

/// The tolerance a manifest gives: `"exact"` or `{"rtol": R, "atol": A}`.
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
pub fn read(path: &Path, ty: Option<ElementType>) -> Result<ArrayLiteral, String> {
    match ty {
        Some(t) => read_npy_as(path, t),
        None => read_npy(path),
    }
    .map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads a case's inputs.
pub fn inputs(dir: &Path, case: &Value) -> Result<Vec<Literal>, String> {
    let mut args = Vec::new();
    for input in case["inputs"].as_array().ok_or("manifest: no inputs")? {
        let f = input["file"]
            .as_str()
            .ok_or("manifest: input without file")?;
        args.push(Literal::Array(read(&dir.join(f), dtype(&input["dtype"]))?));
    }
    Ok(args)
}

/// Compares result leaf `got` with output `k` of the case (its defined part where the output
/// has dynamic dimensions: [`defined_part`]).
pub fn check_output(dir: &Path, case: &Value, k: usize, got: &ArrayLiteral) -> Result<(), String> {
    let out = &case["outputs"][k];
    let f = out["file"]
        .as_str()
        .ok_or("manifest: output without file")?;
    let want = read(&dir.join(f), dtype(&out["dtype"]))?;
    let defined;
    let got = match out.get("bound") {
        Some(b) => {
            defined = defined_part(&want, got, b).map_err(|e| format!("out{k}: {e}"))?;
            &defined
        }
        None => got,
    };
    compare_arrays(&want, got, tolerance(&out["tolerance"])?).map_err(|e| format!("out{k}: {e}"))
}

/// A result with dynamic dimensions (its manifest output has a `bound`): Axle returns it at
/// `bound` with every element past the runtime sizes zero, XLA's reference is its defined part
/// (`want`, whose dimensions are the runtime sizes). Checks the shape and the zeros and returns
/// the leading block of `got` that `want` is compared with.
pub fn defined_part(
    want: &ArrayLiteral,
    got: &ArrayLiteral,
    bound: &Value,
) -> Result<ArrayLiteral, String> {
    let bound: Vec<i64> = bound
        .as_array()
        .and_then(|b| b.iter().map(Value::as_i64).collect())
        .ok_or("manifest: bound is not a list of sizes")?;
    if *got.shape.dims != *bound || want.shape.rank() != bound.len() {
        return Err(format!(
            "{:?} against XLA's {:?} within a bound of {bound:?}",
            got.shape.dims, want.shape.dims
        ));
    }
    let (block, rest_zero) = got
        .leading_block(&want.shape.dims)
        .ok_or_else(|| format!("XLA's {:?} is not within {bound:?}", want.shape.dims))?;
    if !rest_zero {
        return Err(format!(
            "an element past the sizes {:?} is not zero",
            want.shape.dims
        ));
    }
    Ok(block)
}

/// Whether the entry computation holds a constant whose value the text elided (`{...}`): XLA
/// prints large folded constants that way in its optimized dumps.
pub fn has_elided_constant(m: &Module) -> bool {
    m.comp_insts(m.entry())
        .into_iter()
        .any(|id| matches!(m.constant(id), Some(ConstValue::Elided)))
}

/// Parses and verifies `dir/file`.
pub fn load(dir: &Path, file: &str) -> Result<Module, String> {
    let text = std::fs::read_to_string(dir.join(file)).map_err(|e| format!("{file}: {e}"))?;
    let module = axle_ir::parse_module(&text).map_err(|e| format!("{file}: {e}"))?;
    axle_ir::verify(&module).map_err(|e| format!("{file}: {e}"))?;
    Ok(module)
}

/// Runs `file` of a case with `run` and checks every output leaf against XLA's under the
/// manifest's tolerance. A module with an elided constant goes through [`run_per_output`].
pub fn run_case(dir: &Path, case: &Value, file: &str, run: &Runner) -> Result<(), Failed> {
    let module = load(dir, file)?;
    let args = inputs(dir, case)?;
    let n_out = case["outputs"]
        .as_array()
        .ok_or("manifest: no outputs")?
        .len();
    if has_elided_constant(&module) {
        return run_per_output(&module, &args, dir, case, n_out, run);
    }
    let got = run(&module, &args).map_err(|e| e.message)?;
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

/// A module with an elided constant cannot run as a whole. Each output of the root tuple runs
/// on its own: outputs that do not depend on the missing data must match XLA's, and the others
/// must be refused with an error naming the elided constant (never a wrong answer). At least
/// one output must be checked.
pub fn run_per_output(
    module: &Module,
    args: &[Literal],
    dir: &Path,
    case: &Value,
    n_out: usize,
    run: &Runner,
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
        match run(&m, args) {
            Ok(got) if got.len() == 1 => {
                checked += 1;
                if let Err(e) = check_output(dir, case, k, &got[0]) {
                    errors.push(e);
                }
            }
            Ok(_) => errors.push(format!("out{k}: unexpected tuple")),
            Err(e) if e.opcode == "constant" && e.message.contains("elided") => {}
            Err(e) => errors.push(format!("out{k}: {}", e.message)),
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

/// The cases of `dir/manifest.json`.
pub fn manifest_cases(dir: &Path) -> Vec<Value> {
    let path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let manifest: Value =
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    manifest["cases"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no cases", path.display()))
        .clone()
}

/// One named trial per case of `dir/manifest.json` and file: `NAME.hlo`, and `NAME.opt.hlo`
/// too when `with_opt`. With `mismatch_check`, one more trial proves the harness notices a
/// wrong answer (a case's first output compared with another output's expectation must fail).
pub fn trials(dir: &Path, with_opt: bool, mismatch_check: bool, run: Runner) -> Vec<Trial> {
    let cases = manifest_cases(dir);
    let mut trials = Vec::new();
    for case in &cases {
        let name = case["name"].as_str().expect("case name").to_string();
        let mut files = vec![format!("{name}.hlo")];
        if with_opt {
            files.push(format!("{name}.opt.hlo"));
        }
        for file in files {
            let (dir, case, run) = (dir.to_path_buf(), case.clone(), run.clone());
            let f = file.clone();
            trials.push(Trial::test(file, move || run_case(&dir, &case, &f, &run)));
        }
    }
    if mismatch_check {
        let first = cases
            .iter()
            .find(|c| c["outputs"].as_array().is_some_and(|o| o.len() > 1))
            .cloned()
            .expect("a case with two outputs");
        let dir = dir.to_path_buf();
        trials.push(Trial::test("harness_detects_mismatch", move || {
            harness_detects_mismatch(&dir, &first, &run)
        }));
    }
    trials
}

/// One named trial per filetest under `root` (`<pass>/<case>.hlo`; see `axle_ir::filetest`),
/// each run with the passes of `reg` and the extra check `extra` picks for its path. Panics when
/// `root` holds no filetest, so a moved directory cannot pass as an empty suite.
pub fn filetest_trials(
    root: &Path,
    reg: PassRegistry,
    extra: impl Fn(&Path) -> Option<ExtraCheck>,
) -> Vec<Trial> {
    let reg = Arc::new(reg);
    let files = collect_filetests(root);
    assert!(!files.is_empty(), "no filetests under {}", root.display());
    files
        .into_iter()
        .map(|p| {
            let (reg, check) = (Arc::clone(&reg), extra(&p));
            Trial::test(test_name(root, &p), move || {
                run_filetest(&p, &reg, check).map_err(Into::into)
            })
        })
        .collect()
}

/// The harness itself must notice a wrong answer: one case's first output compared with the
/// expectation of its second output must fail.
pub fn harness_detects_mismatch(dir: &Path, case: &Value, run: &Runner) -> Result<(), Failed> {
    let file = format!("{}.hlo", case["name"].as_str().unwrap_or_default());
    let module = load(dir, &file)?;
    let got = run(&module, &inputs(dir, case)?).map_err(|e| e.message)?;
    match check_output(dir, case, 1, &got[0]) {
        Err(_) => Ok(()),
        Ok(()) => Err("out0 compared equal to out1's expectation".into()),
    }
}

/// A deterministic value in `[-1, 1)` from a seed and an index (a splitmix-style hash), for
/// test inputs that must not depend on a random number generator's version.
pub fn noise(seed: u64, i: u64) -> f64 {
    let mut x = seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(i.wrapping_mul(0xBF58_476D_1CE4_E5B9));
    x ^= x >> 31;
    x = x.wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 29;
    (x >> 11) as f64 / (1u64 << 52) as f64 - 1.0
}

/// An array of real element type `ty` whose element at flat index `k` is `f(k)` rounded to `ty`.
pub fn real_array(ty: ElementType, dims: &[i64], f: impl Fn(usize) -> f64) -> Literal {
    let n: i64 = dims.iter().product();
    let data = (0..n.max(0) as usize)
        .flat_map(|k| axle_ir::literal::f64_to_element(ty, f(k)))
        .collect();
    Literal::Array(ArrayLiteral {
        shape: axle_ir::ArrayShape::new(ty, dims),
        data,
    })
}

/// The smallest and largest value of integer type `ty`.
pub fn int_range(ty: ElementType) -> (i128, i128) {
    let n = ty.bits();
    if ty.is_signed_int() {
        (-(1i128 << (n - 1)), (1i128 << (n - 1)) - 1)
    } else {
        (0, (1i128 << n) - 1)
    }
}

/// Operand pairs for a binary op on integer type `ty`: every pair of its extremes (min,
/// min + 1, -2, -1, 0, 1, 2, the middle of its range and the next value, max - 1, max: those in
/// range), or of all its values when it has at most 16, then `random` pairs of values from a
/// fixed hash (their bits wrapped into the type, so they cover its whole range).
pub fn int_pairs(ty: ElementType, random: u64) -> (Vec<i128>, Vec<i128>) {
    let (lo, hi) = int_range(ty);
    let special: Vec<i128> = if hi - lo < 16 {
        (lo..=hi).collect()
    } else {
        let mid = lo + (hi - lo) / 2;
        let mut v: Vec<i128> = [lo, lo + 1, -2, -1, 0, 1, 2, mid, mid + 1, hi - 1, hi]
            .into_iter()
            .filter(|v| (lo..=hi).contains(v))
            .collect();
        v.sort();
        v.dedup();
        v
    };
    let mut a = Vec::new();
    let mut b = Vec::new();
    for &x in &special {
        for &y in &special {
            a.push(x);
            b.push(y);
        }
    }
    let bits = |seed: u64, k: u64| {
        // `noise` keeps 53 bits; two of them make 64.
        let hi = ((noise(seed, k) + 1.0) * (1u64 << 31) as f64) as u64;
        let lo = ((noise(seed + 1, k) + 1.0) * (1u64 << 31) as f64) as u64;
        ((hi << 32) | (lo & 0xffff_ffff)) as i64 as i128
    };
    for k in 0..random {
        a.push(bits(1, k));
        b.push(bits(3, k));
    }
    (a, b)
}

/// A one-dimensional array of integer type `ty` holding `values` (each wrapped into the type).
pub fn int_array(ty: ElementType, values: &[i128]) -> Literal {
    Literal::Array(ArrayLiteral {
        shape: axle_ir::ArrayShape::new(ty, &[values.len() as i64]),
        data: values
            .iter()
            .flat_map(|&x| axle_ir::literal::i128_to_element(ty, x))
            .collect(),
    })
}
