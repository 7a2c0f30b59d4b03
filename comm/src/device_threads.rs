//! [`run_device_threads`]: one program on the `N` devices of an [`InProcess`] run, device `d`
//! on its own thread, and the one outcome of the run.
//!
//! Invariants: every device's thread is joined before the function returns; the results are
//! in device order; when devices fail, the error reported is that of the device that aborted
//! the run first ([`InProcess::aborted`]), else that of the lowest failing device, so the
//! message does not depend on which thread the scheduler ran first. A device's program is
//! expected to end its part of the run itself ([`Communicator::finish`] on success,
//! [`Communicator::abort`] on failure), as a program run on one rank of a job must.
//!
//! [`Communicator::finish`]: crate::Communicator::finish
//! [`Communicator::abort`]: crate::Communicator::abort

use std::time::Duration;

use crate::{DeviceId, InProcess, InProcessDevice};

/// Runs `device(endpoint)` for every device of a new in-process run of `n` devices whose
/// collectives wait at most `timeout`, each on its own thread. Returns every device's result
/// in device order, or the failing device and its error (a device whose thread panicked
/// fails with `panicked(d)`).
pub fn run_device_threads<T: Send, E: Send>(
    n: u32,
    timeout: Duration,
    device: impl Fn(&InProcessDevice) -> Result<T, E> + Sync,
    panicked: impl Fn(DeviceId) -> E,
) -> Result<Vec<T>, (DeviceId, E)> {
    let world = InProcess::new(n, timeout);
    let endpoints = world.devices();
    let device = &device;
    let results: Vec<Result<T, E>> = std::thread::scope(|s| {
        let handles: Vec<_> = endpoints
            .iter()
            .map(|c| s.spawn(move || device(c)))
            .collect();
        handles
            .into_iter()
            .zip(0..)
            .map(|(h, d)| h.join().unwrap_or_else(|_| Err(panicked(d))))
            .collect()
    });
    let first = world.aborted().map(|(d, _)| d);
    let mut out = Vec::with_capacity(results.len());
    let mut errs: Vec<(DeviceId, E)> = Vec::new();
    for (r, d) in results.into_iter().zip(0..) {
        match r {
            Ok(v) => out.push(v),
            Err(e) => errs.push((d, e)),
        }
    }
    if errs.is_empty() {
        return Ok(out);
    }
    let k = first
        .and_then(|f| errs.iter().position(|(d, _)| *d == f))
        .unwrap_or(0);
    Err(errs.swap_remove(k))
}

/// Splits the devices' results of [`run_device_threads`], each a device's outputs and the wall
/// time of each of its runs, into the outputs in device order and, per run, the slowest
/// device's time (the run's time: it ends when its last device does).
pub fn outputs_and_slowest_runs<T>(runs: Vec<(T, Vec<Duration>)>) -> (Vec<T>, Vec<Duration>) {
    let mut outputs = Vec::with_capacity(runs.len());
    let mut run_times: Vec<Duration> = Vec::new();
    for (o, t) in runs {
        outputs.push(o);
        run_times.resize(t.len().max(run_times.len()), Duration::ZERO);
        for (k, t) in t.into_iter().enumerate() {
            run_times[k] = run_times[k].max(t);
        }
    }
    (outputs, run_times)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Communicator, Op, OpKind};

    const T: Duration = Duration::from_secs(10);

    #[test]
    fn results_come_in_device_order() {
        let r = run_device_threads(
            4,
            T,
            |c: &InProcessDevice| -> Result<u32, String> {
                let op = Op {
                    kind: OpKind::AllGather,
                    label: "g",
                };
                let all = c
                    .all_gather(op, &[0, 1, 2, 3], &[c.device() as u8])
                    .map_err(|e| e.to_string())?;
                c.finish();
                Ok(all.iter().map(|b| u32::from(b[0])).sum::<u32>() * 10 + c.device())
            },
            |d| format!("device {d} panicked"),
        );
        assert_eq!(r, Ok(vec![60, 61, 62, 63]));
    }

    #[test]
    fn the_first_device_to_abort_is_reported() {
        // Device 2 fails and aborts; the others fail in the gather with `Aborted`.
        let r = run_device_threads(
            3,
            T,
            |c: &InProcessDevice| -> Result<(), String> {
                if c.device() == 2 {
                    c.abort("bad input");
                    return Err("bad input".into());
                }
                let op = Op {
                    kind: OpKind::AllGather,
                    label: "g",
                };
                c.all_gather(op, &[0, 1, 2], &[1])
                    .map_err(|e| e.to_string())?;
                Ok(())
            },
            |d| format!("device {d} panicked"),
        );
        assert_eq!(r, Err((2, "bad input".to_string())));
    }

    #[test]
    fn a_panicking_device_fails_the_run() {
        let r = run_device_threads(
            2,
            T,
            |c: &InProcessDevice| -> Result<(), String> {
                if c.device() == 1 {
                    panic!("device thread panics");
                }
                Ok(())
            },
            |d| format!("device {d} panicked"),
        );
        assert_eq!(r, Err((1, "device 1 panicked".to_string())));
    }

    #[test]
    fn a_run_takes_its_slowest_device() {
        let ms = Duration::from_millis;
        let runs = vec![("a", vec![ms(3), ms(1)]), ("b", vec![ms(2), ms(5), ms(4)])];
        let (outputs, times) = super::outputs_and_slowest_runs(runs);
        assert_eq!(outputs, ["a", "b"]);
        assert_eq!(times, [ms(3), ms(5), ms(4)]);
    }
}
