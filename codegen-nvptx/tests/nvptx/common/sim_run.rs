//! Running a module for the nvptx backend's tests, on the host simulator ([`run_sim`]) or on
//! any device's memory ([`run_on`]): its arguments uploaded, the result's leaves read back,
//! every buffer freed afterwards (and the memory checked empty), with how many buffers the run
//! itself left live (its result's, when the executor keeps its ownership invariant) and how it
//! got its memory (the static assignment's temporary bytes, or why a buffer per value).

use axle_codegen_nvptx::device::{BufferKey, Device, DeviceMemory, Peak};
use axle_codegen_nvptx::executor::Executable;
use axle_codegen_nvptx::sim::SimDevice;
use axle_codegen_nvptx::{KernelOptions, NvptxError};
use axle_ir::{compare_arrays, ArrayLiteral, ArrayShape, Literal, Module, Shape, Tolerance};
use axle_testkit::leaves;

use super::logging::logging_memory;

/// What a run gave.
pub struct Ran {
    /// The result's array leaves, depth-first.
    pub leaves: Vec<ArrayLiteral>,
    /// The buffers live after the run, less the arguments' (the result's, owned by the caller).
    pub left: usize,
    /// The temporary bytes of the static assignment the run used, if it ran from one.
    pub temp_bytes: Option<u64>,
    /// Why the run used a buffer per value instead, if it did.
    pub fallback: Option<String>,
}

/// Runs `m` on the simulator on `args`, giving the result's leaves; every buffer is freed, and
/// the run must have left only its result's buffers live.
pub fn run_sim(m: &Module, args: &[Literal]) -> Result<Vec<ArrayLiteral>, NvptxError> {
    run_sim_with(m, args, &KernelOptions::default())
}

/// [`run_sim`] with the kernels planned with `opts`.
pub fn run_sim_with(
    m: &Module,
    args: &[Literal],
    opts: &KernelOptions,
) -> Result<Vec<ArrayLiteral>, NvptxError> {
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
) -> Result<Ran, NvptxError> {
    run_on_with(mem, m, args, &KernelOptions::default())
}

/// [`run_on`] with the kernels planned with `opts`.
pub fn run_on_with<D: Device>(
    mem: &DeviceMemory<D>,
    m: &Module,
    args: &[Literal],
    opts: &KernelOptions,
) -> Result<Ran, NvptxError> {
    let exe = Executable::compile_with(mem, m.clone(), opts)?;
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
        .collect::<Result<Vec<_>, NvptxError>>()?;
    for k in out.into_iter().chain(keys.into_iter().flatten()) {
        mem.free(k)?;
    }
    assert_eq!(mem.live(), 0, "a run left buffers behind");
    Ok(Ran {
        leaves: got,
        left,
        temp_bytes: exe.assignment().map(|a| a.temp_bytes),
        fallback: exe.fallback_reason().map(str::to_string),
    })
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

/// What [`checked_run`] saw: the run, the sizes of the buffers it allocated in order, and the
/// peak of live buffers and bytes (the arguments' included).
pub struct Logged {
    /// The run.
    pub ran: Ran,
    /// The sizes the device allocated during the run (uploads not included).
    pub allocs: Vec<usize>,
    /// The most buffers and bytes live at once.
    pub peak: Peak,
}

impl Logged {
    /// Asserts the run was made from the static assignment: one temporary allocation, of the
    /// assignment's bytes, then one buffer per result leaf, and nothing else.
    pub fn assert_one_temporary_allocation(&self) {
        let temp = self.ran.temp_bytes.unwrap_or_else(|| {
            panic!(
                "the run used a buffer per value: {}",
                self.ran.fallback.as_deref().unwrap_or("no reason given")
            )
        });
        assert_eq!(self.ran.fallback, None);
        let mut want = vec![temp as usize];
        want.extend(self.ran.leaves.iter().map(|l| l.data.len()));
        assert_eq!(self.allocs, want, "allocations of the run");
    }
}

/// Runs `m` on `args` on the logging simulator ([`crate::common::logging`]) and checks every
/// result leaf against the evaluator (floats within a close tolerance, others exactly) and that
/// the run left exactly the result's buffers live.
pub fn checked_run(m: &Module, args: &[Literal]) -> Logged {
    let mem = logging_memory();
    let ran = run_on(&mem, m, args).unwrap_or_else(|e| panic!("{e}"));
    let want = leaves(&axle_analysis::eval::evaluate(m, args).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(ran.leaves.len(), want.len());
    assert_eq!(ran.left, want.len(), "live buffers after the run");
    for (k, (g, w)) in ran.leaves.iter().zip(&want).enumerate() {
        let tol = if w.shape.ty.is_floating() {
            Tolerance::Close {
                rtol: 1e-5,
                atol: 1e-6,
            }
        } else {
            Tolerance::Exact
        };
        compare_arrays(w, g, tol).unwrap_or_else(|e| panic!("out{k}: {e}"));
    }
    Logged {
        ran,
        allocs: mem.device().take_allocs(),
        peak: mem.peak(),
    }
}
