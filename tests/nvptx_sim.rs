//! Every case of the shared corpus (`NAME.hlo` and XLA's optimized `NAME.opt.hlo`) on the
//! `nvptx-sim` backend after its default pipeline (`gpu`): the nvptx backend's kernels, run on
//! the host by the simulator following their launch plans, must match both the reference
//! evaluator (run on the module as given) and XLA's outputs, under the manifest's tolerances
//! (NaN matches NaN). A case the backend refuses must be refused with an error naming the op
//! it does not support.
//!
//! Both math paths run: with libdevice where it is found (as the CLI and the GPU's kernels
//! link it; `NAME.hlo`), and without it (`no_libdevice/NAME.hlo`).
//!
//! One named trial per file and mode, plus `harness_detects_mismatch`, which proves the
//! comparison notices a wrong answer, a stale device buffer trial, and one for the `nvptx`
//! platform without a CUDA driver. When every trial ran (no
//! filter), the run also fails when fewer files pass than the mode's floor
//! ([`PASSED_FLOOR`], [`PASSED_FLOOR_WITHOUT_LIBDEVICE`]: the counts reached so far, which only
//! go up), when buffers were left, or when a compiled file runs with a buffer per value
//! instead of from its static buffer assignment (`Executable::fallback_reason`), and prints
//! which files passed and which were refused with which op, and how many run from their
//! assignment (those with host control flow among them).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use axle::backend::{prepare_module, CompileOptions};
use axle_codegen_nvptx::device::DeviceMemory;
use axle_codegen_nvptx::executor::Executable;
use axle_codegen_nvptx::host_computations::host_computations;
use axle_codegen_nvptx::sim::SimDevice;
use axle_codegen_nvptx::NvptxError;
use axle_ir::{compare_arrays, ArrayLiteral, Literal, Module};
use axle_testkit::{
    check_output, has_elided_constant, inputs, leaves, load, manifest_cases, run_case, shared_dir,
    tolerance, RunFailure, Runner,
};
use libtest_mimic::{Arguments, Failed, Trial};
use serde_json::Value;

/// The fewest corpus files (of 78) whose sim results must match the evaluator and XLA, with
/// libdevice linked for math functions as the GPU's kernels link it.
const PASSED_FLOOR: usize = 78;
/// The same without libdevice (math functions are the inline forms of
/// `axle_codegen_llvm::libm_fallback`).
const PASSED_FLOOR_WITHOUT_LIBDEVICE: usize = 78;

/// What happened to one file.
#[derive(Clone, Debug)]
enum Outcome {
    /// Matched the evaluator and XLA.
    Passed,
    /// Refused with an error naming this op.
    Refused(String),
}

/// How a compiled file gets its device memory.
#[derive(Clone, Debug)]
struct Memory {
    /// Whether the module has host control flow (`while`, `conditional`, `call` on the host).
    control_flow: bool,
    /// Why it runs with a buffer per value, or `None`: from its static assignment.
    fallback: Option<String>,
}

/// The module after the `gpu` pipeline, compiled for the simulator.
fn compile(mem: &DeviceMemory<SimDevice>, m: &Module) -> Result<Executable<SimDevice>, RunFailure> {
    let opts = CompileOptions {
        pipeline: Some("gpu".into()),
        ..Default::default()
    };
    let m = prepare_module("nvptx-sim", m.clone(), &opts)
        .map_err(|e| RunFailure::msg(e.to_string()))?;
    Executable::compile(mem, m).map_err(|e| RunFailure {
        opcode: e.opcode.clone(),
        message: e.to_string(),
    })
}

/// Runs a compiled module on host literals; the result's array leaves.
fn run(
    mem: &DeviceMemory<SimDevice>,
    exe: &Executable<SimDevice>,
    args: &[Literal],
) -> Result<Vec<ArrayLiteral>, NvptxError> {
    let mut keys = Vec::new();
    for a in args {
        keys.push(
            leaves(a)
                .iter()
                .map(|l| mem.upload(&l.data))
                .collect::<Result<Vec<_>, _>>()?,
        );
    }
    let out = exe.run(mem, &keys);
    for k in keys.into_iter().flatten() {
        mem.free(k)?;
    }
    let out = out?;
    let m = exe.module();
    let shapes = axle::backend::ValueShape::of_shape(m, m.shape(m.root(m.entry())));
    let mut got = Vec::new();
    for (shape, k) in shapes.leaves().into_iter().zip(&out) {
        got.push(ArrayLiteral {
            shape: shape.clone(),
            data: mem.download(*k)?,
        });
    }
    for k in out {
        mem.free(k)?;
    }
    Ok(got)
}

/// The simulator as a testkit runner (for modules with elided constants, run per output).
fn runner(mem: Arc<DeviceMemory<SimDevice>>) -> Runner {
    Arc::new(move |m, args| {
        let exe = compile(&mem, m)?;
        run(&mem, &exe, args).map_err(|e| RunFailure::msg(e.to_string()))
    })
}

/// Runs one file of a case and checks it against XLA and the evaluator.
fn check_file(
    mem: &Arc<DeviceMemory<SimDevice>>,
    dir: &Path,
    case: &Value,
    file: &str,
    memory: &Mutex<BTreeMap<String, Memory>>,
) -> Result<Outcome, Failed> {
    let module = load(dir, file)?;
    let args = inputs(dir, case)?;
    let exe = match compile(mem, &module) {
        Ok(exe) => {
            let seen = Memory {
                control_flow: host_computations(exe.module()).len() > 1,
                fallback: exe.fallback_reason().map(str::to_string),
            };
            memory
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(file.to_string(), seen);
            Some(exe)
        }
        // An elided constant: each output that does not need it runs on its own below.
        Err(e) if e.opcode == "constant" && e.message.contains("elided") => None,
        Err(e) if !e.opcode.is_empty() && e.message.contains(&e.opcode) => {
            return Ok(Outcome::Refused(e.opcode))
        }
        Err(e) => return Err(format!("refused without naming an op: {}", e.message).into()),
    };
    let Some(exe) = exe else {
        if !has_elided_constant(&module) {
            return Err("an elided constant reported where the module has none".into());
        }
        // Checked against XLA only: the evaluator cannot run the missing data either.
        run_case(dir, case, file, &runner(mem.clone()))?;
        return Ok(Outcome::Passed);
    };
    let got = run(mem, &exe, &args)?;
    let outputs = case["outputs"].as_array().ok_or("manifest: no outputs")?;
    if got.len() != outputs.len() {
        return Err(format!(
            "{} result leaves, the manifest lists {}",
            got.len(),
            outputs.len()
        )
        .into());
    }
    let want = axle_analysis::eval::evaluate(&module, &args).map_err(|e| e.to_string())?;
    let want = leaves(&want);
    let mut errors = Vec::new();
    for (k, g) in got.iter().enumerate() {
        if let Err(e) = check_output(dir, case, k, g) {
            errors.push(format!("against XLA: {e}"));
        }
        let tol = tolerance(&outputs[k]["tolerance"])?;
        if let Err(e) = compare_arrays(&want[k], g, tol) {
            errors.push(format!("against the evaluator: out{k}: {e}"));
        }
    }
    if errors.is_empty() {
        Ok(Outcome::Passed)
    } else {
        Err(errors.join("\n").into())
    }
}

/// The comparison must notice a wrong answer: a case's first output from the simulator,
/// compared with XLA's second output, fails.
fn harness_detects_mismatch(
    mem: &DeviceMemory<SimDevice>,
    dir: &Path,
    case: &Value,
) -> Result<(), Failed> {
    let file = format!("{}.hlo", case["name"].as_str().unwrap_or_default());
    let module = load(dir, &file)?;
    let exe = compile(mem, &module).map_err(|e| e.message)?;
    let got = run(mem, &exe, &inputs(dir, case)?)?;
    match check_output(dir, case, 1, &got[0]) {
        Err(_) => Ok(()),
        Ok(()) => Err("out0 compared equal to out1's expectation".into()),
    }
}

/// Through the backend interface: a device buffer freed early is a "stale buffer handle" error
/// when read back, passed to a run, or freed again; its drop afterwards is harmless.
fn stale_device_buffer() -> Result<(), Failed> {
    let platform = axle::backends::registry().get("nvptx-sim")?;
    let tm = platform.transfer_manager();
    let lit = axle_testkit::real_array(axle_ir::ElementType::F32, &[4], |k| k as f64);
    let buf = tm.to_device(&lit, 0)?;
    if tm.from_device(&buf)? != lit {
        return Err("the round trip changed the data".into());
    }
    let m = axle_ir::parse_module(
        "HloModule n\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n",
    )?;
    let exe = platform.compiler().compile(m, &CompileOptions::default())?;
    let out = exe.run(&[&buf])?;
    let want = axle_testkit::real_array(axle_ir::ElementType::F32, &[4], |k| -(k as f64));
    if tm.from_device(&out)? != want {
        return Err("negate gave the wrong answer".into());
    }
    axle::nvptx::free(&buf)?;
    for (what, e) in [
        ("read back", tm.from_device(&buf).err()),
        ("run", exe.run(&[&buf]).err()),
        ("freed again", axle::nvptx::free(&buf).err()),
    ] {
        match e {
            Some(e) if e.to_string().contains("stale buffer handle") => {
                // The backend's own error is the source, its variant the device's for a read
                // or a free and the executor's for a run.
                let source = std::error::Error::source(&e)
                    .and_then(|s| s.downcast_ref::<NvptxError>())
                    .ok_or_else(|| format!("{what}: no NvptxError source in {e:?}"))?;
                let device = matches!(source, NvptxError::Device(_));
                if device == (what == "run") {
                    return Err(format!("{what}: source {source:?}").into());
                }
            }
            other => return Err(format!("{what}: {other:?}").into()),
        }
    }
    Ok(())
}

/// One way of running the simulator: its trials' name prefix, its device memory, its floor,
/// and what its trials saw.
struct Mode {
    prefix: &'static str,
    mem: Arc<DeviceMemory<SimDevice>>,
    floor: usize,
    outcomes: Arc<Mutex<BTreeMap<String, Outcome>>>,
    memory: Arc<Mutex<BTreeMap<String, Memory>>>,
}

/// Without a CUDA driver the `nvptx` platform lists no device, and compiling or transferring
/// is an error saying why (never a panic).
fn nvptx_without_a_driver() -> Result<(), Failed> {
    if axle_codegen_nvptx::cuda::driver_present() {
        eprintln!("a CUDA driver is present: the no-driver path is not exercised here");
        return Ok(());
    }
    let platform = axle::backends::registry().get("nvptx")?;
    if !platform.devices().is_empty() {
        return Err("devices listed without a driver".into());
    }
    let lit = axle_testkit::real_array(axle_ir::ElementType::F32, &[4], |k| k as f64);
    let m = axle_ir::parse_module(
        "HloModule n\nENTRY e {\n  a = f32[4] parameter(0)\n  ROOT n = f32[4] negate(a)\n}\n",
    )?;
    for (what, e) in [
        (
            "to_device",
            platform.transfer_manager().to_device(&lit, 0).err(),
        ),
        (
            "compile",
            platform
                .compiler()
                .compile(m, &CompileOptions::default())
                .err(),
        ),
    ] {
        match e {
            Some(e) if e.to_string().contains("no CUDA driver") => {}
            other => return Err(format!("{what}: {other:?}").into()),
        }
    }
    Ok(())
}

fn main() {
    let args = Arguments::from_args();
    let dir = shared_dir().join("corpus");
    let found = SimDevice::with_found_libdevice();
    if found.libdevice.is_none() {
        eprintln!(
            "nvptx_sim: no libdevice (run `make deps`): the floor without it applies to both modes"
        );
    }
    let floor = if found.libdevice.is_some() {
        PASSED_FLOOR
    } else {
        PASSED_FLOOR_WITHOUT_LIBDEVICE
    };
    let modes = [
        Mode {
            prefix: "",
            mem: Arc::new(DeviceMemory::new(found)),
            floor,
            outcomes: Arc::default(),
            memory: Arc::default(),
        },
        Mode {
            prefix: "no_libdevice/",
            mem: Arc::new(DeviceMemory::new(SimDevice::default())),
            floor: PASSED_FLOOR_WITHOUT_LIBDEVICE,
            outcomes: Arc::default(),
            memory: Arc::default(),
        },
    ];
    let cases = manifest_cases(&dir);
    let mut trials = Vec::new();
    let mut files = 0;
    for mode in &modes {
        for case in &cases {
            let name = case["name"].as_str().expect("case name").to_string();
            for file in [format!("{name}.hlo"), format!("{name}.opt.hlo")] {
                files += 1;
                let (dir, case, mem, outcomes, memory): (PathBuf, _, _, _, _) = (
                    dir.clone(),
                    case.clone(),
                    mode.mem.clone(),
                    mode.outcomes.clone(),
                    mode.memory.clone(),
                );
                trials.push(Trial::test(format!("{}{file}", mode.prefix), move || {
                    let o = check_file(&mem, &dir, &case, &file, &memory)?;
                    outcomes
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .insert(file, o);
                    Ok(())
                }));
            }
        }
    }
    let two_outputs = cases
        .iter()
        .find(|c| {
            c["name"] == "reduce_axes" && c["outputs"].as_array().is_some_and(|o| o.len() > 1)
        })
        .cloned()
        .expect("reduce_axes, a case with two outputs");
    let (d, m) = (dir.clone(), modes[1].mem.clone());
    trials.push(Trial::test("harness_detects_mismatch", move || {
        harness_detects_mismatch(&m, &d, &two_outputs)
    }));
    trials.push(Trial::test(
        "a_freed_device_buffer_is_a_stale_handle_error",
        stale_device_buffer,
    ));
    trials.push(Trial::test(
        "nvptx_without_a_driver_is_a_clear_error",
        nvptx_without_a_driver,
    ));
    let filtered = args.filter.is_some() || !args.skip.is_empty();
    let conclusion = libtest_mimic::run(&args, trials);
    let mut low = false;
    for mode in &modes {
        let outcomes = mode.outcomes.lock().unwrap_or_else(|e| e.into_inner());
        let passed: Vec<&str> = outcomes
            .iter()
            .filter(|(_, o)| matches!(o, Outcome::Passed))
            .map(|(f, _)| f.as_str())
            .collect();
        let refused: Vec<String> = outcomes
            .iter()
            .filter_map(|(f, o)| match o {
                Outcome::Refused(op) => Some(format!("{f} ({op})")),
                Outcome::Passed => None,
            })
            .collect();
        eprintln!(
            "nvptx-sim{}: {} of {} corpus files match the evaluator and XLA: {}\nrefused: {}\n\
             buffers left: {}",
            if mode.prefix.is_empty() {
                ""
            } else {
                " without libdevice"
            },
            passed.len(),
            files / modes.len(),
            passed.join(", "),
            refused.join(", "),
            mode.mem.live()
        );
        let memory = mode.memory.lock().unwrap_or_else(|e| e.into_inner());
        let assigned = memory.values().filter(|x| x.fallback.is_none()).count();
        let assigned_control_flow = memory
            .values()
            .filter(|x| x.fallback.is_none() && x.control_flow)
            .count();
        let per_value: Vec<String> = memory
            .iter()
            .filter_map(|(f, x)| x.fallback.as_ref().map(|why| format!("{f} ({why})")))
            .collect();
        eprintln!(
            "nvptx-sim{}: {assigned} of {} compiled files run from their static assignment \
             (one temporary allocation), {assigned_control_flow} of them with host control flow; \
             a buffer per value: {}",
            if mode.prefix.is_empty() {
                ""
            } else {
                " without libdevice"
            },
            memory.len(),
            if per_value.is_empty() {
                "none".to_string()
            } else {
                per_value.join(", ")
            }
        );
        if !filtered && !args.list {
            if !per_value.is_empty() {
                eprintln!(
                    "error: {} corpus files run with a buffer per value instead of from their \
                     static assignment",
                    per_value.len()
                );
                low = true;
            }
            if passed.len() < mode.floor {
                eprintln!(
                    "error: {} corpus files pass on nvptx-sim{}, fewer than the {} passed before",
                    passed.len(),
                    mode.prefix,
                    mode.floor
                );
                low = true;
            }
            if mode.mem.live() != 0 {
                eprintln!("error: {} device buffers were not freed", mode.mem.live());
                low = true;
            }
        }
    }
    if low {
        std::process::exit(101);
    }
    conclusion.exit();
}
