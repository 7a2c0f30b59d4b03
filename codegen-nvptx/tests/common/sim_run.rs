//! Running a module for the nvptx backend's tests, on the host simulator ([`run_sim`]) or on
//! any device's memory ([`run_on`]): its arguments uploaded, the result's leaves read back,
//! every buffer freed afterwards (and the memory checked empty), with how many buffers the run
//! itself left live (its result's, when the executor keeps its ownership invariant).

use axle_codegen_nvptx::device::{BufferKey, Device, DeviceMemory};
use axle_codegen_nvptx::executor::Executable;
use axle_codegen_nvptx::sim::SimDevice;
use axle_codegen_nvptx::KernelOptions;
use axle_ir::{ArrayLiteral, ArrayShape, Literal, Module, Shape};
use axle_testkit::leaves;

/// What a run gave.
pub struct Ran {
    /// The result's array leaves, depth-first.
    pub leaves: Vec<ArrayLiteral>,
    /// The buffers live after the run, less the arguments' (the result's, owned by the caller).
    pub left: usize,
}

/// Runs `m` on the simulator on `args`, giving the result's leaves; every buffer is freed, and
/// the run must have left only its result's buffers live.
pub fn run_sim(m: &Module, args: &[Literal]) -> Result<Vec<ArrayLiteral>, String> {
    run_sim_with(m, args, &KernelOptions::default())
}

/// [`run_sim`] with the kernels planned with `opts`.
pub fn run_sim_with(
    m: &Module,
    args: &[Literal],
    opts: &KernelOptions,
) -> Result<Vec<ArrayLiteral>, String> {
    let ran = run_on_with(&DeviceMemory::new(SimDevice::default()), m, args, opts)?;
    assert_eq!(
        ran.left,
        ran.leaves.len(),
        "the run left other buffers than its result's"
    );
    Ok(ran.leaves)
}

/// Compiles `m` for the device of `mem` and runs it on `args`; every buffer is freed after
/// (the memory is checked empty).
pub fn run_on<D: Device>(
    mem: &DeviceMemory<D>,
    m: &Module,
    args: &[Literal],
) -> Result<Ran, String> {
    run_on_with(mem, m, args, &KernelOptions::default())
}

/// [`run_on`] with the kernels planned with `opts`.
pub fn run_on_with<D: Device>(
    mem: &DeviceMemory<D>,
    m: &Module,
    args: &[Literal],
    opts: &KernelOptions,
) -> Result<Ran, String> {
    let exe = Executable::compile_with(mem, m.clone(), opts).map_err(|e| e.to_string())?;
    let keys: Vec<Vec<BufferKey>> = args
        .iter()
        .map(|a| leaves(a).iter().map(|l| mem.upload(&l.data)).collect())
        .collect::<Result<_, _>>()?;
    let arguments = mem.live();
    let out = exe.run(mem, &keys);
    let left = mem.live() - arguments;
    let out = out?;
    let mut shapes = Vec::new();
    collect_shapes(m, m.shape(m.root(m.entry())), &mut shapes);
    assert_eq!(shapes.len(), out.len(), "the result has a buffer per leaf");
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
    Ok(Ran { leaves: got, left })
}

/// The array leaves of shape `s`, depth-first.
fn collect_shapes(m: &Module, s: &Shape, out: &mut Vec<ArrayShape>) {
    match s {
        Shape::Array(a) => out.push(a.clone()),
        Shape::Tuple(es) => es
            .iter()
            .for_each(|&e| collect_shapes(m, m.shape_of(e), out)),
        _ => {}
    }
}
