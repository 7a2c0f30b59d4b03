//! `axle run --devices N`: one module on N devices of one process (threads meeting through
//! the in-process communicator), on the interpreter, the `cpu` backend, or the `nvptx-sim`
//! and `nvptx` backends (their collectives staged through the host,
//! `axle_codegen_nvptx::collective`; the devices share the backend's one device memory).
//!
//! - The mesh: the header's `replica_count` x `num_partitions` when they name more than one
//!   device (they must multiply to N), else N partitions when the module has channel ids (JAX's
//!   `shard_map` modules) and N replicas otherwise ([`DeviceMesh::for_module`]). The compiling
//!   backends compile the module with the mesh's counts in its header (as XLA's module config
//!   gives them), so no compile step takes its collectives for one device's.
//! - The interpreter runs the module as given. The `cpu` and nvptx backends compile it once
//!   (with their default pipeline, or `--passes`) and run that one executable on every
//!   device's thread ([`axle_codegen_cpu::execute_devices`],
//!   `axle_codegen_nvptx::devices::execute_devices`), so every device issues the same
//!   collectives in the same order.
//! - Inputs: `--input` files, one per array leaf of the entry parameters, give every device the
//!   same values; N times as many give each device its own (device 0's files first, then
//!   device 1's, ...). Without files, every device gets the same values generated from the
//!   seed. JAX's `shard_map` modules take global values this way: each device keeps its block.
//! - Outputs: every device's output leaves, depth-first, as `DIR/dD/outK.npy` for device `D`
//!   (each directory replaced as a set, as `axle run` does); for JAX's `shard_map` modules
//!   every device holds the global outputs.
//! - Failures: a device that fails ends the run on every device (its error is reported, with
//!   the device), and a collective that waits longer than the timeout for its group fails.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use axle_analysis::{evaluate_devices, EvalOptions};
use axle_ir::collective::DeviceMesh;
use axle_ir::memory::MemoryBudget;
use axle_ir::{ArrayLiteral, Literal, Module};

use crate::backend::{pipeline_for, CompileOptions, Executable, ValueShape};
use crate::run::{bind_inputs_within, flatten, try_generate_inputs, write_outputs, RunOptions};

/// What a run on several devices produced.
#[derive(Clone, Debug)]
pub struct DevicesReport {
    /// The backend that ran it.
    pub backend: String,
    /// The mesh it ran on.
    pub mesh: DeviceMesh,
    /// Each device's output leaves, depth-first, by device.
    pub outputs: Vec<Vec<ArrayLiteral>>,
    /// Wall time of each run (all devices).
    pub run_times: Vec<Duration>,
    /// Output files written.
    pub written: Vec<PathBuf>,
}

/// Runs `m` on `devices` in-process devices with the inputs, repeats and output directory of
/// `opts` (see the module docs); collectives wait at most `timeout`. The interpreter, the
/// `cpu`, `nvptx-sim` and `nvptx` backends run several devices; on the interpreter
/// `opts.pipeline` must be unset (the module runs as given).
pub fn run_on_devices(
    m: Module,
    opts: &RunOptions,
    devices: u32,
    timeout: Duration,
) -> Result<DevicesReport, String> {
    let cpu = match opts.backend.as_str() {
        "interpreter" => false,
        "cpu" | "nvptx-sim" | "nvptx" => true,
        b => {
            return Err(format!(
                "--devices {devices} runs on the interpreter, cpu, nvptx-sim and nvptx \
                 backends, not on {b}"
            ))
        }
    };
    if !cpu && opts.pipeline.as_deref().is_some_and(|p| p != "none") {
        return Err(
            "--passes is not supported with --devices on the interpreter: the module runs as \
             given"
                .into(),
        );
    }
    axle_ir::check_runnable(&m).map_err(|e| e.to_string())?;
    let mesh = DeviceMesh::for_module(&m, devices)?;
    let mut budget = MemoryBudget::new()?;
    let per_device: Vec<Vec<Literal>> = if opts.inputs.is_empty() {
        let a = try_generate_inputs(&m, opts.seed, &mut budget).map_err(|e| e.to_string())?;
        vec![a; devices as usize]
    } else {
        let n = devices as usize;
        let per: usize = m
            .params(m.entry())
            .iter()
            .map(|&p| ValueShape::of_shape(&m, m.shape(p)).leaves().len())
            .sum();
        if opts.inputs.len() == per * n && n > 1 && per > 0 {
            let mut all = Vec::with_capacity(n);
            for d in 0..n {
                let files = &opts.inputs[d * per..(d + 1) * per];
                all.push(
                    bind_inputs_within(&m, files, &mut budget)
                        .map_err(|e| format!("device {d}'s inputs: {e}"))?,
                );
            }
            all
        } else {
            let a = bind_inputs_within(&m, &opts.inputs, &mut budget).map_err(|e| {
                format!("{e} (give one file per input array for every device, or {n} times as many, device 0's first)")
            })?;
            vec![a; n]
        }
    };
    let (outputs, run_times) = if opts.backend.starts_with("nvptx") {
        run_gpu(m, opts, mesh, per_device, timeout)?
    } else if cpu {
        run_cpu(m, opts, mesh, per_device, timeout)?
    } else {
        let eval_opts = EvalOptions::default();
        let mut run_times = Vec::new();
        let mut result = None;
        for _ in 0..opts.repeat.max(1) {
            let t = Instant::now();
            let r = evaluate_devices(&m, m.entry(), mesh, &per_device, &eval_opts, timeout)
                .map_err(|e| e.to_string())?;
            run_times.push(t.elapsed());
            result = Some(r);
        }
        let outputs: Vec<Vec<ArrayLiteral>> = result
            .expect("at least one run")
            .into_iter()
            .map(flatten)
            .collect();
        (outputs, run_times)
    };
    let mut written = Vec::new();
    if let Some(dir) = &opts.out_dir {
        for (d, outs) in outputs.iter().enumerate() {
            written.extend(
                write_outputs(&dir.join(format!("d{d}")), outs).map_err(|e| e.to_string())?,
            );
        }
    }
    Ok(DevicesReport {
        backend: opts.backend.clone(),
        mesh,
        outputs,
        run_times,
        written,
    })
}

/// The executable of a `cpu` compilation of `m` (with `opts`' pipeline and cache).
pub(crate) fn compile_cpu(m: Module, opts: &RunOptions) -> Result<Box<dyn Executable>, String> {
    let platform = crate::backends::registry()
        .get("cpu")
        .map_err(|e| e.to_string())?;
    platform
        .compiler()
        .compile(
            m,
            &CompileOptions {
                pipeline: pipeline_for(&*platform, opts.pipeline.as_deref()),
                cache: opts.cache.clone(),
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())
}

/// The compiled code of a `cpu` executable.
pub(crate) fn jitted(exe: &dyn Executable) -> Result<&crate::cpu::Jitted, String> {
    exe.as_any()
        .and_then(|a| a.downcast_ref::<crate::cpu::CpuExecutable>())
        .map(|c| c.jitted())
        .ok_or_else(|| "the cpu backend gave an executable of another kind".to_string())
}

/// Output leaves of `exe` as literals.
pub(crate) fn output_literals(
    exe: &crate::cpu::Jitted,
    outs: &[crate::cpu::HostBuffer],
) -> Vec<ArrayLiteral> {
    outs.iter()
        .zip(exe.output_shapes())
        .map(|(o, s)| ArrayLiteral {
            shape: s.clone(),
            data: o.bytes().to_vec(),
        })
        .collect()
}

/// The module compiled once for the `cpu` backend and run on every device's thread.
fn run_cpu(
    m: Module,
    opts: &RunOptions,
    mesh: DeviceMesh,
    per_device: Vec<Vec<Literal>>,
    timeout: Duration,
) -> Result<(Vec<Vec<ArrayLiteral>>, Vec<Duration>), String> {
    let exe = compile_cpu(for_mesh(m, mesh), opts)?;
    let j = jitted(&*exe)?;
    let params: Vec<&axle_ir::ArrayShape> = j.param_shapes().iter().collect();
    let leaves = device_leaves(per_device, &params)?;
    let inputs: Vec<Vec<&[u8]>> = leaves
        .iter()
        .map(|d| d.iter().map(|l| &l.data[..]).collect())
        .collect();
    let run = axle_codegen_cpu::execute_devices(j, mesh, &inputs, opts.repeat.max(1), timeout)
        .map_err(|e| e.message)?;
    let outputs = run.outputs.iter().map(|o| output_literals(j, o)).collect();
    Ok((outputs, run.run_times))
}

/// `m` with the mesh's counts in its header where it has more than one device, as XLA's
/// module config gives them, so nothing treats its collectives as one device's (`{}` groups
/// are all of them).
fn for_mesh(mut m: Module, mesh: DeviceMesh) -> Module {
    if mesh.devices() > 1 {
        m.set_replica_count(mesh.replicas);
        m.set_num_partitions(mesh.partitions);
    }
    m
}

/// Every device's input leaves, each checked against the program's parameter leaves
/// `params`.
fn device_leaves(
    per_device: Vec<Vec<Literal>>,
    params: &[&axle_ir::ArrayShape],
) -> Result<Vec<Vec<ArrayLiteral>>, String> {
    let leaves: Vec<Vec<ArrayLiteral>> = per_device
        .into_iter()
        .map(|a| a.into_iter().flat_map(flatten).collect())
        .collect();
    for (d, dev) in leaves.iter().enumerate() {
        if dev.len() != params.len() {
            return Err(format!(
                "device {d} has {} input arrays, the program takes {}",
                dev.len(),
                params.len()
            ));
        }
        for (l, p) in dev.iter().zip(params) {
            if l.shape.ty != p.ty || l.shape.dims != p.dims {
                return Err(format!(
                    "device {d}: an input is {}{:?}, the parameter needs {}{:?}",
                    l.shape.ty, l.shape.dims, p.ty, p.dims
                ));
            }
        }
    }
    Ok(leaves)
}

/// The module compiled once for the `nvptx-sim` or `nvptx` backend (`opts.backend`) and run on
/// every device's thread in the backend's device memory.
fn run_gpu(
    m: Module,
    opts: &RunOptions,
    mesh: DeviceMesh,
    per_device: Vec<Vec<Literal>>,
    timeout: Duration,
) -> Result<(Vec<Vec<ArrayLiteral>>, Vec<Duration>), String> {
    let platform = crate::backends::registry()
        .get(&opts.backend)
        .map_err(|e| e.to_string())?;
    let exe = platform
        .compiler()
        .compile(
            for_mesh(m, mesh),
            &CompileOptions {
                pipeline: pipeline_for(&*platform, opts.pipeline.as_deref()),
                cache: opts.cache.clone(),
                ..Default::default()
            },
        )
        .map_err(|e| e.to_string())?;
    let em = exe.module();
    let params: Vec<ValueShape> = em
        .params(em.entry())
        .iter()
        .map(|&p| ValueShape::of_shape(em, em.shape(p)))
        .collect();
    let param_leaves: Vec<&axle_ir::ArrayShape> = params.iter().flat_map(|p| p.leaves()).collect();
    let leaves = device_leaves(per_device, &param_leaves)?;
    let inputs: Vec<Vec<&[u8]>> = leaves
        .iter()
        .map(|d| d.iter().map(|l| &l.data[..]).collect())
        .collect();
    crate::nvptx::execute_devices(&*exe, mesh, &inputs, opts.repeat.max(1), timeout)
}

/// A short human-readable summary: device 0's outputs, whether the devices agree, timings.
pub fn summary(r: &DevicesReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "{} devices ({} replicas x {} partitions)",
        r.mesh.devices(),
        r.mesh.replicas,
        r.mesh.partitions
    );
    if let Some(first) = r.outputs.first() {
        for (k, o) in first.iter().enumerate() {
            let dims: Vec<String> = o.shape.dims.iter().map(|d| d.to_string()).collect();
            let n = o.len();
            let shown: Vec<String> = (0..n.min(6))
                .map(|i| axle_ir::literal::format_element(o.ty(), o.element_bytes(i)))
                .collect();
            let more = if n > 6 { ", ..." } else { "" };
            let same = r.outputs.iter().all(|d| d.get(k) == Some(o));
            let _ = writeln!(
                s,
                "device 0 out{k}: {}[{}] = [{}{more}]{}",
                o.ty().name(),
                dims.join(","),
                shown.join(", "),
                if same {
                    " (the same on every device)"
                } else {
                    ""
                }
            );
        }
    }
    let mut times = r.run_times.clone();
    times.sort();
    let _ = writeln!(
        s,
        "backend {}: run median {:.3} ms, min {:.3} ms over {} run{}",
        r.backend,
        times[times.len() / 2].as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times.len(),
        if times.len() == 1 { "" } else { "s" }
    );
    for w in &r.written {
        let _ = writeln!(s, "wrote {}", w.display());
    }
    s
}
