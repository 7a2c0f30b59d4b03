//! `axle run` under `mpirun -n N`: one device per rank ([`axle_comm_mpi::Mpi`]), on the
//! interpreter or the `cpu` backend; the build's `mpi` feature (on by default).
//!
//! - The launch and the rank are read from the launcher's environment ([`axle_comm_mpi::launch`]:
//!   Open MPI's `OMPI_COMM_WORLD_SIZE`, or PMI); `--devices`, if given, must be the number of
//!   ranks. The mesh, the inputs (one set for every device, or N sets, device 0's first) and
//!   the outputs' layout are those of `--devices N` ([`crate::devices`]).
//! - Every rank loads and compiles the module itself; collectives are checked across ranks
//!   (kind, instruction, group, sizes), so ranks whose programs differ fail instead of
//!   exchanging the wrong buffers.
//! - After the run every device's outputs are gathered on rank 0, which writes
//!   `DIR/dD/outK.npy` and prints the summary; the other ranks print nothing.
//! - A failing rank prints its error and aborts the job (`MPI_Abort`), which ends every rank;
//!   a collective that waits longer than `--timeout` does the same.

use std::time::{Duration, Instant};

use axle_analysis::{evaluate_on_device, Device, EvalOptions};
use axle_comm::{Communicator, Op, OpKind};
use axle_ir::collective::DeviceMesh;
use axle_ir::memory::MemoryBudget;
use axle_ir::{ArrayLiteral, Literal, Module};

use crate::backend::ValueShape;
use crate::devices::{compile_cpu, jitted, output_literals, DevicesReport};
use crate::run::{bind_inputs_within, flatten, try_generate_inputs, write_outputs, RunOptions};

pub use axle_comm_mpi::{launch, Launch};

/// What a rank's part of an MPI run gives: rank 0's report (with every device's outputs), or
/// `None` on the other ranks.
pub type RankReport = Option<DevicesReport>;

/// Runs `m` as this rank's device of the MPI job with the inputs, repeats and output
/// directory of `opts`; collectives wait at most `timeout`. A failure aborts the whole job
/// after printing the error (this function then does not return).
pub fn run_on_rank(
    m: Module,
    opts: &RunOptions,
    devices: Option<u32>,
    timeout: Duration,
) -> Result<RankReport, String> {
    let comm = axle_comm_mpi::Mpi::init(timeout)?;
    match run(&comm, m, opts, devices) {
        Ok(r) => Ok(r),
        Err(e) => {
            comm.abort(&e);
            Err(e)
        }
    }
}

fn run(
    comm: &axle_comm_mpi::Mpi,
    m: Module,
    opts: &RunOptions,
    devices: Option<u32>,
) -> Result<RankReport, String> {
    let n = comm.num_devices();
    let me = comm.device();
    if let Some(d) = devices.filter(|&d| d != n) {
        return Err(format!(
            "--devices {d} under an MPI launch of {n} ranks: one device per rank"
        ));
    }
    let cpu = match opts.backend.as_str() {
        "interpreter" => false,
        "cpu" => true,
        b => {
            return Err(format!(
                "under mpirun, the interpreter and cpu backends run; the {b} backend runs \
                 several devices in one process only (`--devices N`)"
            ))
        }
    };
    if !cpu && opts.pipeline.as_deref().is_some_and(|p| p != "none") {
        return Err(
            "--passes is not supported on the interpreter: the module runs as given".into(),
        );
    }
    if !cpu && opts.repeat > 1 {
        return Err("--repeat is not supported on the interpreter under mpirun".into());
    }
    axle_ir::check_runnable(&m).map_err(|e| e.to_string())?;
    let mesh = DeviceMesh::for_module(&m, n)?;
    let args = rank_inputs(&m, opts, n, me)?;
    let dev = Device { comm, mesh };
    let mut run_times = Vec::new();
    let outputs: Vec<ArrayLiteral> = if cpu {
        let exe = compile_cpu(m, opts)?;
        let j = jitted(&*exe)?;
        let leaves: Vec<ArrayLiteral> = args.into_iter().flat_map(flatten).collect();
        let ins: Vec<&[u8]> = leaves.iter().map(|l| &l.data[..]).collect();
        let mut outs = j.try_alloc_outputs().map_err(|e| e.message)?;
        for _ in 0..opts.repeat.max(1) {
            let t = Instant::now();
            j.execute_on_device(dev, &ins, &mut outs)
                .map_err(|e| e.message)?;
            run_times.push(t.elapsed());
        }
        comm.finish();
        output_literals(j, &outs)
    } else {
        let t = Instant::now();
        let r = evaluate_on_device(&m, m.entry(), &args, &EvalOptions::default(), dev)
            .map_err(|e| e.to_string())?;
        run_times.push(t.elapsed());
        flatten(r)
    };
    // Every device's outputs and run times to rank 0 (the shapes are the program's, the same
    // on every rank).
    let all: Vec<DeviceId> = (0..n).collect();
    let mut payload = Vec::new();
    for t in &run_times {
        payload.extend_from_slice(&t.as_nanos().min(u64::MAX as u128).to_le_bytes()[..8]);
    }
    for o in &outputs {
        payload.extend_from_slice(&o.data);
    }
    let op = Op {
        kind: OpKind::AllGather,
        label: "axle.outputs",
    };
    let parts = comm
        .all_gather(op, &all, &payload)
        .map_err(|e| e.to_string())?;
    if me != 0 {
        return Ok(None);
    }
    let mut per_device = Vec::with_capacity(parts.len());
    let mut times = vec![Duration::ZERO; run_times.len()];
    for p in &parts {
        let mut at = 0;
        for t in times.iter_mut() {
            let ns = u64::from_le_bytes(p[at..at + 8].try_into().expect("8 bytes"));
            *t = (*t).max(Duration::from_nanos(ns));
            at += 8;
        }
        let mut outs = Vec::with_capacity(outputs.len());
        for o in &outputs {
            let len = o.data.len();
            outs.push(ArrayLiteral {
                shape: o.shape.clone(),
                data: p[at..at + len].to_vec(),
            });
            at += len;
        }
        per_device.push(outs);
    }
    let mut written = Vec::new();
    if let Some(dir) = &opts.out_dir {
        for (d, outs) in per_device.iter().enumerate() {
            written.extend(
                write_outputs(&dir.join(format!("d{d}")), outs).map_err(|e| e.to_string())?,
            );
        }
    }
    Ok(Some(DevicesReport {
        backend: format!("{} (MPI, {n} ranks)", opts.backend),
        mesh,
        outputs: per_device,
        run_times: times,
        written,
    }))
}

type DeviceId = u32;

/// Device `me`'s inputs of `n`: the files of `opts` (one set, or `n` sets with device 0's
/// first), or values generated from the seed.
fn rank_inputs(m: &Module, opts: &RunOptions, n: u32, me: u32) -> Result<Vec<Literal>, String> {
    let mut budget = MemoryBudget::new()?;
    if opts.inputs.is_empty() {
        return try_generate_inputs(m, opts.seed, &mut budget).map_err(|e| e.to_string());
    }
    let per: usize = m
        .params(m.entry())
        .iter()
        .map(|&p| ValueShape::of_shape(m, m.shape(p)).leaves().len())
        .sum();
    let n = n as usize;
    if opts.inputs.len() == per * n && n > 1 && per > 0 {
        let d = me as usize;
        bind_inputs_within(m, &opts.inputs[d * per..(d + 1) * per], &mut budget)
            .map_err(|e| format!("device {d}'s inputs: {e}"))
    } else {
        bind_inputs_within(m, &opts.inputs, &mut budget).map_err(|e| {
            format!("{e} (give one file per input array for every device, or {n} times as many, device 0's first)")
        })
    }
}
