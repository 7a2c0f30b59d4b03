//! One compiled program on N devices of this process: a thread per device, each running the
//! same [`CpuExecutable`] as its device ([`CpuExecutable::execute_on_device`]), meeting
//! through an in-process communicator ([`axle_comm::InProcess`]).
//!
//! The program is compiled once, so every device issues the same collectives in the same
//! order. A device that fails aborts the run: the others stop at their next collective (or
//! when the one they wait in is woken), and the error reported is the first failing device's,
//! naming it.

use std::time::{Duration, Instant};

use axle_analysis::Device;
use axle_comm::Communicator;
use axle_ir::collective::DeviceMesh;

use crate::error::CodegenError;
use crate::jit::{CpuExecutable, HostBuffer};

/// What a run on several devices produced.
#[derive(Debug)]
pub struct DevicesRun {
    /// Each device's output leaves (of the last run), by device.
    pub outputs: Vec<Vec<HostBuffer>>,
    /// The wall time of each run: the slowest device's.
    pub run_times: Vec<Duration>,
}

/// Runs `exe` `repeat` times (at least once) on the devices of `mesh`, device `d` on its own
/// thread with `inputs[d]` (one byte slice per parameter leaf); collectives wait at most
/// `timeout` for their group.
pub fn execute_devices(
    exe: &CpuExecutable,
    mesh: DeviceMesh,
    inputs: &[Vec<&[u8]>],
    repeat: usize,
    timeout: Duration,
) -> Result<DevicesRun, CodegenError> {
    let n = mesh.devices();
    let whole = |msg: String| CodegenError::general("cpu executable", msg);
    if inputs.len() != n as usize || n == 0 {
        return Err(whole(format!(
            "{n} devices ({} replicas x {} partitions) need {n} input lists, got {}",
            mesh.replicas,
            mesh.partitions,
            inputs.len()
        )));
    }
    let world = axle_comm::InProcess::new(n, timeout);
    let endpoints = world.devices();
    type DeviceResult = Result<(Vec<HostBuffer>, Vec<Duration>), CodegenError>;
    let results: Vec<DeviceResult> = std::thread::scope(|s| {
        let handles: Vec<_> = endpoints
            .iter()
            .zip(inputs)
            .map(|(c, ins)| {
                s.spawn(move || {
                    let dev = Device { comm: c, mesh };
                    let r: DeviceResult = (|| {
                        let mut outs = exe.try_alloc_outputs()?;
                        let mut times = Vec::new();
                        for _ in 0..repeat.max(1) {
                            let t = Instant::now();
                            exe.execute_on_device(dev, ins, &mut outs)?;
                            times.push(t.elapsed());
                        }
                        Ok((outs, times))
                    })();
                    match &r {
                        Ok(_) => c.finish(),
                        Err(e) => c.abort(&e.message),
                    }
                    r
                })
            })
            .collect();
        handles
            .into_iter()
            .enumerate()
            .map(|(d, h)| {
                h.join()
                    .unwrap_or_else(|_| Err(whole(format!("device {d}'s run panicked"))))
            })
            .collect()
    });
    let first = world.aborted().map(|(d, _)| d as usize);
    let mut outputs = Vec::with_capacity(results.len());
    let mut run_times: Vec<Duration> = Vec::new();
    let mut errs: Vec<(usize, CodegenError)> = Vec::new();
    for (d, r) in results.into_iter().enumerate() {
        match r {
            Ok((o, t)) => {
                outputs.push(o);
                run_times.resize(t.len().max(run_times.len()), Duration::ZERO);
                for (k, t) in t.into_iter().enumerate() {
                    run_times[k] = run_times[k].max(t);
                }
            }
            Err(e) => errs.push((d, e)),
        }
    }
    if errs.is_empty() {
        return Ok(DevicesRun { outputs, run_times });
    }
    let (d, e) = match first.and_then(|f| errs.iter().position(|(d, _)| *d == f)) {
        Some(k) => errs.swap_remove(k),
        None => errs.swap_remove(0),
    };
    Err(whole(format!("device {d}: {}", e.message)))
}
