//! The in-process communicator: results in group order, deterministic reductions, and errors
//! (mismatch, dead device, timeout) on every device instead of hangs.

use axle_comm::{CommError, Communicator, InProcess, Op, OpKind};
use std::time::{Duration, Instant};

fn op(kind: OpKind) -> Op<'static> {
    Op { kind, label: "%x" }
}

/// Runs `f` on every device of a run of `n` on its own thread; results by device.
fn run<T: Send>(n: u32, timeout: Duration, f: impl Fn(&dyn Communicator) -> T + Sync) -> Vec<T> {
    let world = InProcess::new(n, timeout);
    let devices = world.devices();
    std::thread::scope(|s| {
        let hs: Vec<_> = devices
            .iter()
            .map(|d| {
                let f = &f;
                s.spawn(move || f(d))
            })
            .collect();
        hs.into_iter()
            .map(|h| h.join().expect("no panic"))
            .collect()
    })
}

const T: Duration = Duration::from_secs(10);

#[test]
fn all_gather_is_in_group_order_per_group() {
    let out = run(4, T, |c| {
        let d = c.device();
        // Groups {3,1} and {0,2}: group order, not id order.
        let group = if d % 2 == 1 { vec![3, 1] } else { vec![0, 2] };
        c.all_gather(op(OpKind::AllGather), &group, &[d as u8; 2])
            .unwrap()
    });
    assert_eq!(out[1], vec![vec![3, 3], vec![1, 1]]);
    assert_eq!(out[3], out[1]);
    assert_eq!(out[0], vec![vec![0, 0], vec![2, 2]]);
}

#[test]
fn all_reduce_folds_in_group_order() {
    // A non-commutative reducer (acc * 10 + x) shows the order: 0,1,2,3 gives 123.
    let out = run(4, T, |c| {
        let mut r = |acc: &mut [u8], x: &[u8]| {
            let v = u32::from_le_bytes(acc[..4].try_into().unwrap()) * 10
                + u32::from_le_bytes(x[..4].try_into().unwrap());
            acc.copy_from_slice(&v.to_le_bytes());
            Ok(())
        };
        let data = c.device().to_le_bytes();
        let v = c
            .all_reduce(op(OpKind::AllReduce), &[0, 1, 2, 3], &data, &mut r)
            .unwrap();
        u32::from_le_bytes(v.try_into().unwrap())
    });
    assert_eq!(out, vec![123; 4]);
}

#[test]
fn all_to_all_and_broadcast_and_permute() {
    let out = run(3, T, |c| {
        let d = c.device() as u8;
        let chunks: Vec<Vec<u8>> = (0..3).map(|j| vec![d * 10 + j]).collect();
        let refs: Vec<&[u8]> = chunks.iter().map(|c| &c[..]).collect();
        let a2a = c
            .all_to_all(op(OpKind::AllToAll), &[0, 1, 2], &refs)
            .unwrap();
        let b = c
            .broadcast(op(OpKind::Broadcast), &[2, 0, 1], 0, &[d])
            .unwrap();
        // Ring 0 -> 1 -> 2; device 0 receives nothing.
        let to: Vec<u32> = if d < 2 { vec![d as u32 + 1] } else { vec![] };
        let from = if d > 0 { Some(d as u32 - 1) } else { None };
        let p = c
            .permute(op(OpKind::Permute), &to, from, &[d + 100])
            .unwrap();
        (a2a, b, p)
    });
    assert_eq!(out[1].0, vec![vec![1], vec![11], vec![21]]);
    assert!(out.iter().all(|o| o.1 == vec![2]));
    assert_eq!(
        out.iter().map(|o| o.2.clone()).collect::<Vec<_>>(),
        vec![None, Some(vec![100]), Some(vec![101])]
    );
}

#[test]
fn mismatched_calls_fail_on_every_device() {
    let out = run(2, T, |c| {
        let len = if c.device() == 0 { 4 } else { 8 };
        c.all_gather(op(OpKind::AllGather), &[0, 1], &vec![0; len])
    });
    for r in &out {
        let e = r.as_ref().unwrap_err();
        assert!(
            matches!(e, CommError::Mismatch { .. } | CommError::Aborted { .. }),
            "{e}"
        );
        assert!(e.to_string().contains("differs between devices"), "{e}");
    }
}

#[test]
fn a_dead_device_ends_the_run_quickly() {
    let start = Instant::now();
    let out = run(3, Duration::from_secs(60), |c| {
        if c.device() == 1 {
            c.abort("out of memory");
            return Err(CommError::Invalid {
                device: 1,
                msg: "gone".into(),
            });
        }
        c.all_gather(op(OpKind::AllGather), &[0, 1, 2], &[1])
    });
    assert!(start.elapsed() < Duration::from_secs(30));
    for d in [0, 2] {
        let e = out[d].as_ref().unwrap_err().to_string();
        assert!(e.contains("device 1 failed: out of memory"), "{e}");
    }
}

#[test]
fn a_missing_device_times_out_everywhere() {
    let out = run(3, Duration::from_millis(200), |c| {
        if c.device() == 2 {
            // Device 2 runs one collective fewer (a mismatched program).
            return Ok(Vec::new());
        }
        c.all_gather(op(OpKind::AllGather), &[0, 1, 2], &[1])
    });
    let e0 = out[0].as_ref().unwrap_err().to_string();
    let e1 = out[1].as_ref().unwrap_err().to_string();
    assert!(
        e0.contains("waiting for devices [2]") || e0.contains("aborted"),
        "{e0}"
    );
    assert!(
        e1.contains("waiting for devices [2]") || e1.contains("aborted"),
        "{e1}"
    );
}

#[test]
fn bad_groups_are_errors() {
    let out = run(2, T, |c| {
        (
            c.all_gather(op(OpKind::AllGather), &[0, 5], &[1])
                .unwrap_err(),
            c.all_gather(op(OpKind::AllGather), &[c.device() ^ 1], &[1])
                .unwrap_err(),
        )
    });
    assert!(out[0].0.to_string().contains("outside the run's 2 devices"));
    assert!(out[1]
        .1
        .to_string()
        .contains("does not contain this device"));
}

#[test]
fn results_are_identical_across_runs() {
    let f = |c: &dyn Communicator| {
        let mut r = |acc: &mut [u8], x: &[u8]| {
            let a = f32::from_le_bytes(acc[..4].try_into().unwrap());
            let b = f32::from_le_bytes(x[..4].try_into().unwrap());
            acc.copy_from_slice(&(a + b).to_le_bytes());
            Ok(())
        };
        let v = 0.1f32 * (c.device() as f32 + 1.0) + 1e7 * (c.device() % 2) as f32;
        c.all_reduce(
            op(OpKind::AllReduce),
            &(0..8).collect::<Vec<_>>(),
            &v.to_le_bytes(),
            &mut r,
        )
        .unwrap()
    };
    let first = run(8, T, f);
    for _ in 0..5 {
        assert_eq!(run(8, T, f), first);
    }
}

#[test]
fn a_finished_device_fails_its_waiters_at_once() {
    let start = Instant::now();
    let out = run(2, Duration::from_secs(60), |c| {
        if c.device() == 1 {
            c.finish();
            return Ok(Vec::new());
        }
        c.all_gather(op(OpKind::AllGather), &[0, 1], &[1])
    });
    assert!(start.elapsed() < Duration::from_secs(30));
    let e = out[0].as_ref().unwrap_err().to_string();
    assert!(
        e.contains("device 1 finished its program after 0 collectives"),
        "{e}"
    );
}
