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
    let runs = axle_comm::run_device_threads(
        n,
        timeout,
        |c| {
            let dev = Device { comm: c, mesh };
            let ins = &inputs[c.device() as usize];
            let r: Result<(Vec<HostBuffer>, Vec<Duration>), CodegenError> = (|| {
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
        },
        |d| whole(format!("device {d}'s run panicked")),
    )
    .map_err(|(d, e)| whole(format!("device {d}: {}", e.message)))?;
    let (outputs, run_times) = axle_comm::outputs_and_slowest_runs(runs);
    Ok(DevicesRun { outputs, run_times })
}
