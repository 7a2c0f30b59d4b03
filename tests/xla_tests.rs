//! XLA's own test modules (`testkit/xlatests`: the raw-string HLO modules of `xla/tests/*.cc`
//! and the evaluator's tests, extracted by `extract.py`, with inputs and XLA CPU's outputs made
//! by `gen.py`) on the `interpreter` and `cpu` backends, each compiled with the backend's default
//! pipeline as `axle run` does, against XLA's outputs under the manifest's tolerances.
//!
//! Two lists beside the manifest say where a case is not held to XLA's bits:
//! - `refused.txt` (`NAME BACKEND REASON`, `*` for every backend): the case must fail with an
//!   error containing REASON, so a refusal that changes, or a case that starts passing, is
//!   noticed;
//! - `implementation_defined.txt` (`NAME REASON`): XLA's answer is one of several the HLO
//!   semantics allow (a reduce whose init is not the reducer's identity, ties in an unstable
//!   sort); the case must run and give XLA's number, element types and shapes of results, and on
//!   `cpu` the interpreter's values under the manifest's tolerances.
//!
//! One named trial per case and backend (`BACKEND/NAME`), plus one proving the comparison
//! notices a wrong answer. A full run prints how many cases matched XLA per backend.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axle::backend::{pipeline_for, CompileOptions};
use axle::backends::registry;
use axle_ir::{compare_arrays, ArrayLiteral, Literal, Module};
use axle_testkit::{
    harness_detects_mismatch, inputs, load, manifest_cases, run_case, tolerance, RunFailure, Runner,
};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

/// The backends every case runs on.
const BACKENDS: [&str; 2] = ["interpreter", "cpu"];

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
        axle::run::run_literals(&*platform, &*exe, args).map_err(RunFailure::msg)
    })
}

/// `NAME BACKEND REASON` lines of `refused.txt`, keyed by (name, backend).
fn refusals(dir: &Path) -> BTreeMap<(String, String), String> {
    let text = std::fs::read_to_string(dir.join("refused.txt")).expect("refused.txt");
    let mut out = BTreeMap::new();
    for line in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let mut it = line.splitn(3, ' ');
        let (n, b, r) = (it.next(), it.next(), it.next());
        let (Some(n), Some(b), Some(r)) = (n, b, r) else {
            panic!("refused.txt: bad line {line:?}");
        };
        out.insert((n.to_string(), b.to_string()), r.trim().to_string());
    }
    out
}

/// `NAME REASON` lines of `implementation_defined.txt`.
fn implementation_defined(dir: &Path) -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(dir.join("implementation_defined.txt"))
        .expect("implementation_defined.txt");
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (n, r) = l.split_once(' ').expect("NAME REASON");
            (n.to_string(), r.trim().to_string())
        })
        .collect()
}

/// A case that must be refused with `reason`.
fn check_refused(dir: &Path, case: &Value, run: &Runner, reason: &str) -> Result<(), Failed> {
    let file = format!("{}.hlo", case["name"].as_str().unwrap_or_default());
    let err = match load(dir, &file) {
        Err(e) => e,
        Ok(m) => match run(&m, &inputs(dir, case)?) {
            Err(e) => e.message,
            Ok(_) => {
                return Err(format!("runs now, where refused.txt expects {reason:?}").into());
            }
        },
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
    if backend_name != "interpreter" {
        let want: Vec<ArrayLiteral> = backend("interpreter")(&m, &args).map_err(|e| e.message)?;
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            compare_arrays(w, g, tolerance(&outs[k]["tolerance"])?)
                .map_err(|e| format!("out{k} against the interpreter: {e}"))?;
        }
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let dir = dir();
    let cases = manifest_cases(&dir);
    let refused = refusals(&dir);
    let loose = implementation_defined(&dir);
    let names: Vec<&str> = cases.iter().filter_map(|c| c["name"].as_str()).collect();
    for n in refused.keys().map(|(n, _)| n).chain(loose.keys()) {
        assert!(
            names.contains(&n.as_str()),
            "lists name a case not in the manifest: {n}"
        );
    }
    let matched: Arc<[AtomicUsize; 2]> = Arc::new([AtomicUsize::new(0), AtomicUsize::new(0)]);
    let mut trials = Vec::new();
    for (bi, b) in BACKENDS.into_iter().enumerate() {
        let run = backend(b);
        for case in &cases {
            let name = case["name"].as_str().expect("case name").to_string();
            let reason = refused
                .get(&(name.clone(), b.to_string()))
                .or_else(|| refused.get(&(name.clone(), "*".to_string())))
                .cloned();
            let defined = loose.contains_key(&name);
            let (dir, case, run, matched) =
                (dir.clone(), case.clone(), run.clone(), matched.clone());
            trials.push(Trial::test(format!("{b}/{name}"), move || {
                if let Some(reason) = reason {
                    return check_refused(&dir, &case, &run, &reason);
                }
                if defined {
                    return check_defined_part(&dir, &case, &run, b);
                }
                run_case(&dir, &case, &format!("{name}.hlo"), &run)?;
                matched[bi].fetch_add(1, Ordering::Relaxed);
                Ok(())
            }));
        }
    }
    let first = cases
        .iter()
        .find(|c| c["outputs"].as_array().is_some_and(|o| o.len() > 1))
        .cloned()
        .expect("a case with two outputs");
    let (d, cpu) = (dir.clone(), backend("cpu"));
    trials.push(Trial::test("harness_detects_mismatch", move || {
        harness_detects_mismatch(&d, &first, &cpu)
    }));
    let full = args.filter.is_none() && args.skip.is_empty();
    let conclusion = libtest_mimic::run(&args, trials);
    if full {
        for (bi, b) in BACKENDS.iter().enumerate() {
            let n_refused = refused
                .keys()
                .filter(|(_, rb)| rb == b || rb == "*")
                .count();
            println!(
                "{b}: {} of {} cases match XLA, {} documented refusals, {} implementation-defined",
                matched[bi].load(Ordering::Relaxed),
                cases.len(),
                n_refused,
                loose.len()
            );
        }
    }
    conclusion.exit();
}
