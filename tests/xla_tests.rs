//! XLA's own test modules (`testkit/xlatests`: the raw-string HLO modules of `xla/tests/*.cc`,
//! the evaluator's and the parser's tests; `testkit/xlatests-passes`: those of the HLO passes'
//! tests that fit CI's time; all extracted by `extract.py`, with inputs and XLA CPU's outputs
//! made by `gen.py`) on the `interpreter` and `cpu` backends, and the execution tests' and the
//! evaluator's also on `nvptx-sim`, each compiled with the backend's default pipeline as `axle
//! run` does, against XLA's outputs under the manifest's tolerances. `AXLE_XLATESTS_DIR` runs
//! one other case directory instead (a scratch one `gen.py --out` wrote).
//!
//! Two lists beside each manifest say where a case is not held to XLA's bits:
//! - `refused.txt` (`NAME BACKEND REASON`, `*` for every backend): the case must fail with an
//!   error containing REASON, so a refusal that changes, or a case that starts passing, is
//!   noticed;
//! - `implementation_defined.txt` (`NAME BACKEND REASON`, `*` for every backend): XLA's answer
//!   is one of several the HLO semantics allow (a reduce whose init is not the reducer's
//!   identity, ties in an unstable sort, the order of a narrow-float sum); the case must run and
//!   give XLA's number, element types and shapes of results, and on `cpu` the interpreter's
//!   values under the manifest's tolerances (`cpu` follows the evaluator's orders; the nvptx
//!   kernels have their own, XLA's GPU ones).
//!
//! An output with dynamic dimensions (a `bound` in its manifest entry) is XLA's defined part:
//! Axle's result, at the bound, is held to it in its leading block and must be zero past it
//! (`axle_testkit::defined_part`).
//!
//! A case with `replicas` and `partitions` in the manifest (collectives its XLA test runs on
//! several devices) runs on that many in-process devices (`axle run --devices N`'s
//! [`run_on_devices`]: one thread per device, the same inputs on each), and every device's
//! outputs are held to XLA's (`NAME.dD.outK.npy`, from XLA CPU run on as many devices), on
//! `nvptx-sim` too (its collectives staged through the host).
//!
//! One named trial per case and backend (`BACKEND/NAME`), plus two proving the comparisons
//! notice a wrong answer (one device, several devices), and per backend
//! `topk_without_comparator_order` (the order of XLA's `TopK` custom call without a
//! comparator; refused on `nvptx-sim`, whose TopK needs one) and `rng_distributions` (what is
//! defined of `rng`). A full run prints how many cases matched XLA per backend.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use axle::backend::{pipeline_for, CompileOptions};
use axle::backends::registry;
use axle::devices::run_on_devices;
use axle::run::RunOptions;
use axle_ir::{compare_arrays, ArrayLiteral, Literal, Module};
use axle_testkit::{
    dtype, harness_detects_mismatch, inputs, load, manifest_cases, read, run_case, tolerance,
    RunFailure, Runner,
};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

/// The backends the cases run on (`nvptx-sim` only the execution tests' cases: [`runs_on`]).
const BACKENDS: [&str; 3] = ["interpreter", "cpu", "nvptx-sim"];

/// The XLA test files whose modules run on every backend: the execution tests and the
/// evaluator's. The parser's and the passes' tests' modules run on `interpreter` and `cpu`
/// only: the nvptx backend's host simulator runs its GPU threads as OS threads, which would
/// add minutes to a test CI runs within its limit.
const ALL_BACKEND_SOURCES: [&str; 2] = ["xla/tests/", "xla/hlo/evaluator/"];

/// Whether `case` runs on `backend`.
fn runs_on(case: &Value, backend: &str) -> bool {
    let file = case["origin"]["file"].as_str().unwrap_or_default();
    backend != "nvptx-sim" || ALL_BACKEND_SOURCES.iter().any(|s| file.starts_with(s))
}

/// How `nvptx-sim` refuses XLA's `TopK` custom call without a comparator.
const TOPK_WITHOUT_COMPARATOR: &str = "the TopK custom call needs a comparator";

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("testkit/xlatests")
}

/// A backend as a [`Runner`]: what every backend refuses is checked first, then the module is
/// compiled with the backend's default pipeline and run once, as `axle run` does.
fn backend(name: &'static str) -> Runner {
    Arc::new(move |m: &Module, args: &[Literal]| {
        axle_ir::check_runnable(m).map_err(|e| RunFailure::msg(e.to_string()))?;
        let platform = registry()
            .get(name)
            .map_err(|e| RunFailure::msg(e.to_string()))?;
        let opts = CompileOptions {
            pipeline: pipeline_for(&*platform, None),
            ..Default::default()
        };
        let exe = platform
            .compiler()
            .compile(m.clone(), &opts)
            .map_err(|e| RunFailure::msg(e.to_string()))?;
        axle::run::run_literals(&*platform, &*exe, args).map_err(|e| RunFailure::msg(e.to_string()))
    })
}

/// How long a collective waits for the rest of its group in a multi-device case.
const DEVICE_TIMEOUT: Duration = Duration::from_secs(60);

/// The `(replicas, partitions)` a case runs on, when the manifest gives them.
fn device_layout(case: &Value) -> Option<(u32, u32)> {
    let r = u32::try_from(case["replicas"].as_u64()?).ok()?;
    let p = u32::try_from(case["partitions"].as_u64()?).ok()?;
    Some((r, p))
}

/// Runs a multi-device case on `backend` with its inputs on every device: each device's output
/// leaves, after checking the mesh is XLA's (`replicas` x `partitions`).
fn run_devices(
    dir: &Path,
    case: &Value,
    backend: &str,
    (replicas, partitions): (u32, u32),
) -> Result<Vec<Vec<ArrayLiteral>>, String> {
    let name = case["name"].as_str().unwrap_or_default();
    let mut m = load(dir, &format!("{name}.hlo"))?;
    // XLA's test gives the counts in the module's config; here the header carries them.
    m.set_replica_count(replicas);
    m.set_num_partitions(partitions);
    let files = case["inputs"]
        .as_array()
        .ok_or("manifest: no inputs")?
        .iter()
        .map(|i| i["file"].as_str().map(|f| dir.join(f)))
        .collect::<Option<Vec<PathBuf>>>()
        .ok_or("manifest: input without file")?;
    let opts = RunOptions {
        backend: backend.to_string(),
        inputs: files,
        ..Default::default()
    };
    let report = run_on_devices(m, &opts, replicas * partitions, DEVICE_TIMEOUT)?;
    if (report.mesh.replicas, report.mesh.partitions) != (replicas, partitions) {
        return Err(format!(
            "ran on {} replicas x {} partitions, XLA on {replicas} x {partitions}",
            report.mesh.replicas, report.mesh.partitions
        ));
    }
    Ok(report.outputs)
}

/// Every device's outputs of a multi-device case against XLA's (`NAME.dD.outK.npy`).
fn check_devices(
    dir: &Path,
    case: &Value,
    backend: &str,
    layout: (u32, u32),
) -> Result<(), Failed> {
    let name = case["name"].as_str().unwrap_or_default();
    let outs = case["outputs"].as_array().ok_or("manifest: no outputs")?;
    let got = run_devices(dir, case, backend, layout)?;
    let n = (layout.0 * layout.1) as usize;
    if got.len() != n {
        return Err(format!("{} devices gave results, {n} ran", got.len()).into());
    }
    let mut errors = Vec::new();
    for (d, dev) in got.iter().enumerate() {
        if dev.len() != outs.len() {
            return Err(format!(
                "device {d}: {} results, XLA gives {}",
                dev.len(),
                outs.len()
            )
            .into());
        }
        for (k, (g, o)) in dev.iter().zip(outs).enumerate() {
            let want = read(
                &dir.join(format!("{name}.d{d}.out{k}.npy")),
                dtype(&o["dtype"]),
            )?;
            if let Err(e) = compare_arrays(&want, g, tolerance(&o["tolerance"])?) {
                errors.push(format!("device {d} out{k}: {e}"));
            }
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors.join("\n").into())
    }
}

/// The multi-device comparison notices a device's wrong answer: `collective_ops_test_7` gives
/// each device its replica id, so device `d`'s results held to device `d + 1`'s file differ.
fn devices_detect_mismatch(dir: &Path, case: &Value) -> Result<(), Failed> {
    let name = case["name"].as_str().unwrap_or_default();
    let layout = device_layout(case).ok_or("not a multi-device case")?;
    let o = &case["outputs"][0];
    let got = run_devices(dir, case, "cpu", layout)?;
    let n = got.len();
    for (d, dev) in got.iter().enumerate() {
        let other = read(
            &dir.join(format!("{name}.d{}.out0.npy", (d + 1) % n)),
            dtype(&o["dtype"]),
        )?;
        if compare_arrays(&other, &dev[0], tolerance(&o["tolerance"])?).is_ok() {
            return Err(format!("device {d}'s result passed as device {}'s", (d + 1) % n).into());
        }
    }
    Ok(())
}

/// XLA's `TopK` custom call without a comparator (XLA CPU's runtime TopK): the `k` largest in
/// descending order of `-NaN < -inf < -0 < +0 < +inf < +NaN`, equal values by lower index.
fn topk_order(backend_name: &'static str) -> Result<(), Failed> {
    let text = "HloModule topk\n\nENTRY e {\n  x = f32[2,7] parameter(0)\n  \
                ROOT t = (f32[2,5], s32[2,5]) custom-call(x), custom_call_target=\"TopK\"\n}\n";
    let m = axle_ir::parse_module(text).map_err(|e| e.to_string())?;
    if backend_name == "nvptx-sim" {
        let x = axle_testkit::real_array(axle_ir::ElementType::F32, &[2, 7], |i| i as f64);
        return match backend(backend_name)(&m, &[x]) {
            Err(e) if e.message.contains(TOPK_WITHOUT_COMPARATOR) => Ok(()),
            Err(e) => Err(format!("refused with {:?}", e.message).into()),
            Ok(_) => Err("runs now: check its order here".into()),
        };
    }
    let nan = f32::NAN;
    let row0 = [1.0, nan, -0.0, 0.0, 1.0, -nan, f32::NEG_INFINITY];
    let row1 = [2.0, 3.0, 2.0, f32::INFINITY, -1.0, 2.0, 3.0];
    let x: Vec<f32> = row0.iter().chain(&row1).copied().collect();
    let arg = axle_testkit::real_array(axle_ir::ElementType::F32, &[2, 7], |i| f64::from(x[i]));
    let got = backend(backend_name)(&m, &[arg]).map_err(|e| e.message)?;
    let [v, i] = &got[..] else {
        return Err(format!("{} results, not 2", got.len()).into());
    };
    let bits: Vec<u32> = v
        .to_f64_vec()
        .iter()
        .map(|&f| (f as f32).to_bits())
        .collect();
    let want: Vec<u32> = [nan, 1.0, 1.0, 0.0, -0.0, f32::INFINITY, 3.0, 3.0, 2.0, 2.0]
        .iter()
        .map(|f| f.to_bits())
        .collect();
    let idx: Vec<f64> = i.to_f64_vec();
    let want_idx = [1.0, 0.0, 4.0, 3.0, 2.0, 3.0, 1.0, 6.0, 0.0, 2.0];
    if bits != want || idx != want_idx {
        return Err(
            format!("values {bits:x?} indices {idx:?}, want {want:x?} {want_idx:?}").into(),
        );
    }
    Ok(())
}

/// Large samples of `rng`, whose values XLA leaves to the implementation (its own generator;
/// Axle's is `axle_analysis::rng_op`), checked for what is defined: types and shapes, the
/// uniform range `[a, b)` in f32, bf16 and f64, and loose statistics (a uniform on `[-2, 3)`:
/// mean 0.5 and variance 25/12; a normal of mean 1 and deviation 2), each within many standard
/// errors, so only a broken generator fails them. On `cpu`, the values are also the
/// interpreter's (same generator, same ops). An integer `rng` is refused naming it.
fn rng_distributions(backend_name: &'static str) -> Result<(), Failed> {
    const N: usize = 100_000;
    let text = format!(
        "HloModule rng_distributions\n\nENTRY e {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
         mu = f32[] parameter(2)\n  sd = f32[] parameter(3)\n  ah = bf16[] parameter(4)\n  \
         bh = bf16[] parameter(5)\n  ad = f64[] parameter(6)\n  bd = f64[] parameter(7)\n  \
         u = f32[{N}] rng(a, b), distribution=rng_uniform\n  \
         n = f32[{N}] rng(mu, sd), distribution=rng_normal\n  \
         uh = bf16[4096] rng(ah, bh), distribution=rng_uniform\n  \
         ud = f64[2,1000] rng(ad, bd), distribution=rng_uniform\n  \
         ROOT t = (f32[{N}], f32[{N}], bf16[4096], f64[2,1000]) tuple(u, n, uh, ud)\n}}\n"
    );
    let m = axle_ir::parse_module(&text).map_err(|e| e.to_string())?;
    let scalar = |ty, v: f64| axle_testkit::real_array(ty, &[], move |_| v);
    // Integer rng is refused by name, never a wrong answer.
    let ints = "HloModule r\n\nENTRY e {\n  a = s32[] parameter(0)\n  b = s32[] parameter(1)\n  \
                ROOT r = s32[4] rng(a, b), distribution=rng_uniform\n}\n";
    let ints = axle_ir::parse_module(ints).map_err(|e| e.to_string())?;
    let int_args = [
        scalar(axle_ir::ElementType::S32, 0.0),
        scalar(axle_ir::ElementType::S32, 9.0),
    ];
    match backend(backend_name)(&ints, &int_args) {
        Err(e) if e.message.contains("rng r: rng of s32 is not supported") => {}
        Err(e) => return Err(format!("s32 rng refused with {:?}", e.message).into()),
        Ok(_) => return Err("s32 rng ran".into()),
    }
    use axle_ir::ElementType::{BF16, F32, F64};
    let args = [
        scalar(F32, -2.0),
        scalar(F32, 3.0),
        scalar(F32, 1.0),
        scalar(F32, 2.0),
        scalar(BF16, 1.0),
        scalar(BF16, 1.5),
        scalar(F64, -1e-3),
        scalar(F64, 1e-3),
    ];
    let got = backend(backend_name)(&m, &args).map_err(|e| e.message)?;
    let dims: Vec<Vec<i64>> = got.iter().map(|g| g.shape.dims.to_vec()).collect();
    let tys: Vec<_> = got.iter().map(|g| g.shape.ty).collect();
    if tys != [F32, F32, BF16, F64]
        || dims != [vec![N as i64], vec![N as i64], vec![4096], vec![2, 1000]]
    {
        return Err(format!("results {tys:?} {dims:?}").into());
    }
    let stats = |v: &[f64]| {
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let var = v.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / v.len() as f64;
        (mean, var)
    };
    let in_range = |k: usize, lo: f64, hi: f64| -> Result<(), String> {
        match got[k]
            .to_f64_vec()
            .into_iter()
            .find(|x| !(lo <= *x && *x < hi))
        {
            Some(x) => Err(format!("out{k}: {x} is outside [{lo}, {hi})")),
            None => Ok(()),
        }
    };
    in_range(0, -2.0, 3.0)?;
    in_range(2, 1.0, 1.5)?;
    in_range(3, -1e-3, 1e-3)?;
    let (mean, var) = stats(&got[0].to_f64_vec());
    // Standard errors: of the mean 5/sqrt(12 N) = 0.0046, of the variance about 0.0075.
    if (mean - 0.5).abs() > 0.05 || (var - 25.0 / 12.0).abs() > 0.1 {
        return Err(format!("uniform on [-2, 3): mean {mean}, variance {var}").into());
    }
    let (mean, var) = stats(&got[1].to_f64_vec());
    // Standard errors: of the mean 2/sqrt(N) = 0.0063, of the variance about 0.018.
    if (mean - 1.0).abs() > 0.06 || (var - 4.0).abs() > 0.2 {
        return Err(format!("normal(1, 2): mean {mean}, variance {var}").into());
    }
    let distinct = |k: usize| {
        let mut v: Vec<u64> = got[k].to_f64_vec().iter().map(|x| x.to_bits()).collect();
        v.sort_unstable();
        v.dedup();
        v.len()
    };
    // bf16 has 64 values in [1, 1.5); f64 draws hardly ever repeat.
    if distinct(2) < 60 || distinct(3) < 1990 {
        return Err(format!(
            "too few distinct values: {} bf16, {} f64",
            distinct(2),
            distinct(3)
        )
        .into());
    }
    if backend_name != "interpreter" {
        let want = backend("interpreter")(&m, &args).map_err(|e| e.message)?;
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            let tol = match w.shape.ty {
                F64 => axle_ir::Tolerance::Close {
                    rtol: 1e-12,
                    atol: 1e-15,
                },
                BF16 => axle_ir::Tolerance::Close {
                    rtol: 1e-2,
                    atol: 1e-2,
                },
                _ => axle_ir::Tolerance::Close {
                    rtol: 1e-6,
                    atol: 1e-6,
                },
            };
            compare_arrays(w, g, tol)
                .map_err(|e| format!("out{k} against the interpreter: {e}"))?;
        }
    }
    Ok(())
}

/// `NAME BACKEND REASON` lines of `file` (`refused.txt`, `implementation_defined.txt`), keyed
/// by (name, backend).
fn backend_lines(dir: &Path, file: &str) -> BTreeMap<(String, String), String> {
    let text = std::fs::read_to_string(dir.join(file)).expect(file);
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let mut it = line.splitn(3, ' ');
        let (n, b, r) = (it.next(), it.next(), it.next());
        let (Some(n), Some(b), Some(r)) = (n, b, r) else {
            panic!("{file}: bad line {line:?}");
        };
        out.insert((n.to_string(), b.to_string()), r.trim().to_string());
    }
    out
}

/// The line of `lines` for case `name` on backend `b`, or its `*` line.
fn for_backend<'a>(
    lines: &'a BTreeMap<(String, String), String>,
    name: &str,
    b: &str,
) -> Option<&'a String> {
    lines
        .get(&(name.to_string(), b.to_string()))
        .or_else(|| lines.get(&(name.to_string(), "*".to_string())))
}

/// A case that must be refused with `reason`.
/// A multi-device case runs on its devices.
fn check_refused(
    dir: &Path,
    case: &Value,
    run: &Runner,
    backend: &str,
    reason: &str,
) -> Result<(), Failed> {
    let file = format!("{}.hlo", case["name"].as_str().unwrap_or_default());
    let result = match (load(dir, &file), device_layout(case)) {
        (Err(e), _) => Err(e),
        (Ok(_), Some(layout)) => run_devices(dir, case, backend, layout).map(|_| ()),
        (Ok(m), None) => run(&m, &inputs(dir, case)?)
            .map(|_| ())
            .map_err(|e| e.message),
    };
    let err = match result {
        Err(e) => e,
        Ok(()) => {
            return Err(format!("runs now, where refused.txt expects {reason:?}").into());
        }
    };
    if err.contains(reason) {
        Ok(())
    } else {
        Err(format!("refused with {err:?}, not the documented {reason:?}").into())
    }
}

/// A case whose answer is implementation-defined: XLA's result count, element types and shapes,
/// and on `cpu` the interpreter's values.
fn check_defined_part(
    dir: &Path,
    case: &Value,
    run: &Runner,
    backend_name: &str,
) -> Result<(), Failed> {
    let file = format!("{}.hlo", case["name"].as_str().unwrap_or_default());
    let m = load(dir, &file)?;
    let args = inputs(dir, case)?;
    let got = run(&m, &args).map_err(|e| e.message)?;
    let outs = case["outputs"].as_array().ok_or("manifest: no outputs")?;
    if got.len() != outs.len() {
        return Err(format!("{} results, XLA gives {}", got.len(), outs.len()).into());
    }
    for (k, (g, o)) in got.iter().zip(outs).enumerate() {
        let dims: Vec<i64> = o["shape"]
            .as_array()
            .ok_or("manifest: no shape")?
            .iter()
            .filter_map(Value::as_i64)
            .collect();
        if g.shape.ty.name() != o["dtype"].as_str().unwrap_or_default() || *g.shape.dims != *dims {
            return Err(format!("out{k}: {:?}, XLA's is {o}", g.shape).into());
        }
    }
    if backend_name == "cpu" {
        let want: Vec<ArrayLiteral> = backend("interpreter")(&m, &args).map_err(|e| e.message)?;
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            compare_arrays(w, g, tolerance(&outs[k]["tolerance"])?)
                .map_err(|e| format!("out{k} against the interpreter: {e}"))?;
        }
    }
    Ok(())
}

/// The corpus directories the test runs: `testkit/xlatests` (the execution, evaluator and
/// parser tests' cases) and `testkit/xlatests-passes` (the HLO passes' tests' cases that fit
/// CI's time), or only the directory `AXLE_XLATESTS_DIR` names (a case directory `gen.py
/// --out` wrote, with its own `refused.txt` and `implementation_defined.txt`, empty if absent).
fn corpus_dirs() -> Vec<PathBuf> {
    match std::env::var_os("AXLE_XLATESTS_DIR") {
        Some(d) => vec![PathBuf::from(d)],
        None => vec![dir(), dir().with_file_name("xlatests-passes")],
    }
}

/// `backend_lines` of `file` when it exists, else none.
fn optional_lines(dir: &Path, file: &str) -> BTreeMap<(String, String), String> {
    if dir.join(file).exists() {
        backend_lines(dir, file)
    } else {
        BTreeMap::new()
    }
}

/// Per backend: cases run, matched XLA, held as refusals, held as implementation-defined.
type Counts = [(usize, Arc<AtomicUsize>, usize, usize); BACKENDS.len()];

/// One trial per case of `dir` and backend it runs on (`BACKEND/NAME`), checked against the
/// directory's `refused.txt` and `implementation_defined.txt`; counts go to `counts`.
fn corpus_trials(dir: &Path, cases: &[Value], counts: &mut Counts, trials: &mut Vec<Trial>) {
    let refused = optional_lines(dir, "refused.txt");
    let loose = optional_lines(dir, "implementation_defined.txt");
    for (n, b) in refused.keys().chain(loose.keys()) {
        let case = cases.iter().find(|c| c["name"] == n.as_str());
        assert!(
            case.is_some(),
            "{}: lists name a case not in the manifest: {n}",
            dir.display()
        );
        assert!(
            b == "*" || BACKENDS.contains(&b.as_str()),
            "lists name a backend not tested: {b}"
        );
        assert!(
            case.is_some_and(|c| b == "*" || runs_on(c, b)),
            "lists name {n} on {b}, where it does not run"
        );
    }
    for (bi, b) in BACKENDS.into_iter().enumerate() {
        let run = backend(b);
        for case in cases.iter().filter(|c| runs_on(c, b)) {
            let name = case["name"].as_str().expect("case name").to_string();
            let reason = for_backend(&refused, &name, b).cloned();
            let defined = for_backend(&loose, &name, b).is_some();
            counts[bi].0 += 1;
            if reason.is_some() {
                counts[bi].2 += 1;
            } else if defined {
                counts[bi].3 += 1;
            }
            let (dir, case, run, matched) = (
                dir.to_path_buf(),
                case.clone(),
                run.clone(),
                counts[bi].1.clone(),
            );
            trials.push(Trial::test(format!("{b}/{name}"), move || {
                if let Some(reason) = reason {
                    return check_refused(&dir, &case, &run, b, &reason);
                }
                if defined {
                    return check_defined_part(&dir, &case, &run, b);
                }
                match device_layout(&case) {
                    Some(layout) => check_devices(&dir, &case, b, layout)?,
                    None => run_case(&dir, &case, &format!("{name}.hlo"), &run)?,
                }
                matched.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }));
        }
    }
}

fn main() {
    let args = Arguments::from_args();
    let mut trials = Vec::new();
    let mut names = std::collections::BTreeSet::new();
    let mut report = Vec::new();
    for d in corpus_dirs() {
        let cases = manifest_cases(&d);
        for c in &cases {
            let n = c["name"].as_str().expect("case name");
            assert!(
                names.insert(n.to_string()),
                "case {n} is in two directories"
            );
        }
        let mut counts: Counts = Default::default();
        corpus_trials(&d, &cases, &mut counts, &mut trials);
        report.push((d, counts));
    }
    let dir = dir();
    let cases = manifest_cases(&dir);
    let first = cases
        .iter()
        .find(|c| {
            device_layout(c).is_none() && c["outputs"].as_array().is_some_and(|o| o.len() > 1)
        })
        .cloned()
        .expect("a case with two outputs");
    let (d, cpu) = (dir.clone(), backend("cpu"));
    trials.push(Trial::test("harness_detects_mismatch", move || {
        harness_detects_mismatch(&d, &first, &cpu)
    }));
    if let Some(multi) = cases
        .iter()
        .find(|c| c["name"] == "collective_ops_test_7" && device_layout(c).is_some())
        .cloned()
    {
        let d = dir.clone();
        trials.push(Trial::test("devices_harness_detects_mismatch", move || {
            devices_detect_mismatch(&d, &multi)
        }));
    }
    for b in BACKENDS {
        trials.push(Trial::test(format!("{b}/rng_distributions"), move || {
            rng_distributions(b)
        }));
        trials.push(Trial::test(
            format!("{b}/topk_without_comparator_order"),
            move || topk_order(b),
        ));
    }
    let full = args.filter.is_none() && args.skip.is_empty();
    let conclusion = libtest_mimic::run(&args, trials);
    if full {
        for (d, counts) in &report {
            let dname = d.file_name().unwrap_or_default().to_string_lossy();
            for (b, (run, matched, refused, defined)) in BACKENDS.iter().zip(counts) {
                if *run == 0 {
                    continue;
                }
                println!(
                    "{dname} {b}: {} of {run} cases match XLA, {refused} documented refusals, \
                     {defined} implementation-defined",
                    matched.load(Ordering::Relaxed),
                );
            }
        }
    }
    conclusion.exit();
}
