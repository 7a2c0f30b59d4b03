//! Collectives on the host simulator's devices from both ways the executor runs a module: an
//! all-reduce at the bottom of a nest of calls runs from the static assignment when the nest is
//! shallow, and with a buffer per value when it is deeper than the assignment's program goes;
//! on 2 devices with their own inputs, both give the reference evaluator's bits
//! ([`axle_analysis::evaluate_devices`]) on every device.

use std::time::Duration;

use axle_analysis::eval::{evaluate_devices, EvalOptions};
use axle_codegen_nvptx::device::DeviceMemory;
use axle_codegen_nvptx::devices::execute_devices;
use axle_codegen_nvptx::executor::Executable;
use axle_codegen_nvptx::sim::SimDevice;
use axle_ir::collective::DeviceMesh;
use axle_ir::types::ElementType;
use axle_ir::{Literal, Module};
use axle_testkit::{leaves, real_array};

mod common;
use common::module;

const TIMEOUT: Duration = Duration::from_secs(60);

/// An all-reduce over 2 replicas of a kernel's result, `depth` calls deep.
fn nested_all_reduce(depth: usize) -> Module {
    let mut text = String::from(
        "HloModule deep, replica_count=2\n\nadd {\n  a = f32[] parameter(0)\n  \
         b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n\n",
    );
    text += &format!(
        "c{depth} {{\n  x = f32[8] parameter(0)\n  y = f32[8] multiply(x, x)\n  \
         r = f32[8] all-reduce(y), replica_groups={{}}, to_apply=add\n  \
         ROOT z = f32[8] add(r, x)\n}}\n"
    );
    for k in (0..depth).rev() {
        text += &format!(
            "c{k} {{\n  x = f32[8] parameter(0)\n  ROOT r = f32[8] call(x), to_apply=c{}\n}}\n",
            k + 1
        );
    }
    text += "ENTRY e {\n  x = f32[8] parameter(0)\n  ROOT r = f32[8] call(x), to_apply=c0\n}\n";
    module(&text)
}

#[test]
fn an_all_reduce_runs_from_the_assignment_and_per_value_with_the_evaluators_bits() {
    let mesh = DeviceMesh {
        replicas: 2,
        partitions: 1,
    };
    let args: Vec<Vec<Literal>> = (0..2)
        .map(|d| {
            vec![real_array(ElementType::F32, &[8], move |i| {
                (i as f64 + 0.1) / (3.0 + d as f64)
            })]
        })
        .collect();
    let shallow = nested_all_reduce(4);
    let want: Vec<_> = evaluate_devices(
        &shallow,
        shallow.entry(),
        mesh,
        &args,
        &EvalOptions::default(),
        TIMEOUT,
    )
    .unwrap_or_else(|e| panic!("{e}"))
    .iter()
    .map(leaves)
    .collect();
    assert_ne!(want[0], want[1], "the devices' inputs differ");
    for (depth, per_value) in [(4, false), (260, true)] {
        let mem = DeviceMemory::new(SimDevice::default());
        let exe =
            Executable::compile(&mem, nested_all_reduce(depth)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(exe.fallback_reason().is_some(), per_value, "depth {depth}");
        let bytes: Vec<Vec<Vec<u8>>> = args
            .iter()
            .map(|a| leaves(&a[0]).into_iter().map(|l| l.data).collect())
            .collect();
        let inputs: Vec<Vec<&[u8]>> = bytes
            .iter()
            .map(|d| d.iter().map(|b| &b[..]).collect())
            .collect();
        let run = execute_devices(&exe, &mem, mesh, &inputs, 2, TIMEOUT)
            .unwrap_or_else(|e| panic!("depth {depth}: {e}"));
        for (d, outs) in run.outputs.iter().enumerate() {
            assert_eq!(
                outs,
                &[want[d][0].data.clone()],
                "depth {depth}, device {d}"
            );
        }
        assert_eq!(mem.live(), 0, "depth {depth}: the run left buffers");
    }
}
