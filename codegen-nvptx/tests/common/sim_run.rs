//! Running a module on the host simulator for the nvptx backend's tests: its result's leaves,
//! every buffer freed.

use axle_codegen_nvptx::device::{BufferKey, DeviceMemory};
use axle_codegen_nvptx::executor::Executable;
use axle_codegen_nvptx::sim::SimDevice;
use axle_ir::{ArrayLiteral, Literal, Module, Shape};
use axle_testkit::leaves;

/// Runs `m` on the simulator on `args`, giving the result's leaves; every buffer is freed.
pub fn run_sim(m: &Module, args: &[Literal]) -> Result<Vec<ArrayLiteral>, String> {
    let mem = DeviceMemory::new(SimDevice::default());
    let exe = Executable::compile(&mem, m.clone()).map_err(|e| e.to_string())?;
    let keys: Vec<Vec<BufferKey>> = args
        .iter()
        .map(|a| leaves(a).iter().map(|l| mem.upload(&l.data)).collect())
        .collect::<Result<_, _>>()?;
    let out = exe.run(&mem, &keys)?;
    let root = m.root(m.entry());
    let mut shapes = Vec::new();
    collect_shapes(m, m.shape(root), &mut shapes);
    let got = shapes
        .into_iter()
        .zip(&out)
        .map(|(shape, &k)| {
            Ok(ArrayLiteral {
                shape,
                data: mem.download(k)?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    for k in out.into_iter().chain(keys.into_iter().flatten()) {
        mem.free(k)?;
    }
    assert_eq!(mem.live(), 0, "a run left buffers behind");
    Ok(got)
}

fn collect_shapes(m: &Module, s: &Shape, out: &mut Vec<axle_ir::ArrayShape>) {
    match s {
        Shape::Array(a) => out.push(a.clone()),
        Shape::Tuple(es) => es
            .iter()
            .for_each(|&e| collect_shapes(m, m.shape_of(e), out)),
        _ => {}
    }
}
