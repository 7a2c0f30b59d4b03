//! One compiled module on N devices of this process: a thread per device, each running the
//! same [`Executable`] as its device ([`Executable::run_on_device`]) on the one
//! [`DeviceMemory`] given, meeting through an in-process communicator
//! ([`axle_comm::run_device_threads`]) at every collective, which runs on the host
//! ([`crate::collective`]).
//!
//! The devices share the device memory (the simulator's host memory, or one GPU's): each
//! device's arguments, temporaries and results are buffers of its own there, and kernels of
//! different devices take turns on the memory's lock ([`DeviceMemory::launch`]), which no
//! collective holds while it waits for its group.
//!
//! Invariants: the module is compiled once, so every device issues the same collectives in the
//! same order. A device that fails aborts the run (the others stop at their next collective, or
//! when the one they wait in is woken) and the error is the first failing device's, naming
//! it; every buffer a device made (its arguments' copies, each run's results) is freed before
//! its thread ends, also when it fails.

use std::time::{Duration, Instant};

use axle_analysis::eval::Device as RunDevice;
use axle_codegen_llvm::elemental::inst_leaves;
use axle_codegen_llvm::error::finish;
use axle_comm::Communicator;
use axle_ir::collective::DeviceMesh;

use crate::device::{BufferKey, Device, DeviceMemory};
use crate::executor::Executable;
use crate::NvptxError;

/// What a run on several devices produced.
#[derive(Debug)]
pub struct DevicesRun {
    /// Each device's output leaves (of the last run), as bytes, by device.
    pub outputs: Vec<Vec<Vec<u8>>>,
    /// The wall time of each run: the slowest device's.
    pub run_times: Vec<Duration>,
}

/// Frees `keys` (made by one device's thread, each once).
fn free_all<D: Device>(mem: &DeviceMemory<D>, keys: &[BufferKey]) {
    for &k in keys {
        let _ = mem.free(k);
    }
}

/// Runs `exe` `repeat` times (at least once) on the devices of `mesh` in memory `mem`, device
/// `d` on its own thread with `inputs[d]` (the bytes of each array leaf of the entry
/// parameters, depth-first); collectives wait at most `timeout` for their group.
pub fn execute_devices<D: Device>(
    exe: &Executable<D>,
    mem: &DeviceMemory<D>,
    mesh: DeviceMesh,
    inputs: &[Vec<&[u8]>],
    repeat: usize,
    timeout: Duration,
) -> Result<DevicesRun, NvptxError> {
    let n = mesh.devices();
    if inputs.len() != n as usize || n == 0 {
        return Err(NvptxError::Run(format!(
            "{n} devices ({} replicas x {} partitions) need {n} input lists, got {}",
            mesh.replicas,
            mesh.partitions,
            inputs.len()
        )));
    }
    let m = exe.module();
    // Per entry parameter, its number of array leaves.
    let mut per_param = Vec::new();
    for &p in m.params(m.entry()) {
        per_param.push(
            inst_leaves(m, p)
                .map_err(|f| NvptxError::Run(finish(m, f).message))?
                .len(),
        );
    }
    let leaves: usize = per_param.iter().sum();
    if let Some((d, ins)) = inputs.iter().enumerate().find(|(_, i)| i.len() != leaves) {
        return Err(NvptxError::Run(format!(
            "device {d} has {} input arrays, the program takes {leaves}",
            ins.len()
        )));
    }
    let runs = axle_comm::run_device_threads(
        n,
        timeout,
        |c| {
            let dev = RunDevice { comm: c, mesh };
            let mut made = Vec::new();
            let r = (|| -> Result<(Vec<Vec<u8>>, Vec<Duration>), NvptxError> {
                let mut args = Vec::with_capacity(per_param.len());
                let mut bytes = inputs[c.device() as usize].iter();
                for &k in &per_param {
                    let mut keys = Vec::with_capacity(k);
                    for b in bytes.by_ref().take(k) {
                        let key = mem.upload(b)?;
                        made.push(key);
                        keys.push(key);
                    }
                    args.push(keys);
                }
                let mut times = Vec::new();
                let mut outputs = Vec::new();
                for run in 0..repeat.max(1) {
                    let t = Instant::now();
                    let outs = exe.run_on_device(mem, &args, Some(dev))?;
                    times.push(t.elapsed());
                    let downloaded: Result<Vec<Vec<u8>>, NvptxError> = if run + 1 == repeat.max(1) {
                        outs.iter().map(|&k| mem.download(k)).collect()
                    } else {
                        Ok(Vec::new())
                    };
                    free_all(mem, &outs);
                    outputs = downloaded?;
                }
                Ok((outputs, times))
            })();
            free_all(mem, &made);
            match &r {
                Ok(_) => c.finish(),
                Err(e) => c.abort(&e.to_string()),
            }
            r
        },
        |d| NvptxError::Run(format!("device {d}'s run panicked")),
    )
    .map_err(|(device, e)| NvptxError::OnDevice {
        device,
        source: Box::new(e),
    })?;
    let (outputs, run_times) = axle_comm::outputs_and_slowest_runs(runs);
    Ok(DevicesRun { outputs, run_times })
}
