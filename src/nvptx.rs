//! The GPU backends built on `axle-codegen-nvptx`'s kernels and launch plans: `nvptx`, which
//! runs them on an NVIDIA GPU through the CUDA driver ([`CudaDevice`]), and `nvptx-sim`, which
//! runs the same kernels on the host ([`SimDevice`]). Both go through one launch-plan executor
//! ([`axle_codegen_nvptx::executor`]) and keep device buffers behind generational keys
//! ([`DeviceMemory`]). `axle compile --backend nvptx --emit ptx|llvm` prints the kernels
//! ([`emit_text`]).
//!
//! Invariants: a platform opens its device on first use (compiling, a transfer, or listing
//! devices), once; where that fails (`nvptx` without a CUDA driver or GPU) every compile and
//! transfer is an error saying why, never a panic. A [`DeviceBuffer`] of these backends owns its
//! buffers' keys and frees them when dropped; a buffer freed already ([`free`]) or from another
//! device of the same backend is an error, never a read of other memory.
//!
//! Their default pipeline is the standard `gpu` pipeline: simplification, fusion and
//! multi-output fusion for the gpu target, then the memory-aware schedule the executor runs
//! each host computation in (freeing every buffer after its last reader).

use std::sync::{Arc, OnceLock};
use std::time::Instant;

use axle_codegen_nvptx::cuda::CudaDevice;
use axle_codegen_nvptx::device::{BufferKey, Device, DeviceMemory};
use axle_codegen_nvptx::executor::Executable as GpuProgram;
use axle_codegen_nvptx::sim::SimDevice;
use axle_codegen_nvptx::{Emit, GpuArch, KernelOptions, NvptxError, NvptxOptions, TensorCores};
use axle_ir::{ArrayLiteral, Literal, Module};

use crate::backend::{
    BackendError, CompileOptions, Compiler, DeviceBuffer, DeviceInfo, Executable, ExecutableStats,
    Platform, TransferManager, ValueShape,
};

const NAME: &str = "nvptx";
const SIM_NAME: &str = axle_codegen_nvptx::sim::SIM_BACKEND;

/// What one platform shares between its compiler and its transfer manager: the device,
/// opened on first use.
struct Shared<D: Device> {
    name: &'static str,
    open: fn() -> Result<D, NvptxError>,
    memory: OnceLock<Result<Arc<DeviceMemory<D>>, NvptxError>>,
}

impl<D: Device> Shared<D> {
    fn memory(&self) -> Result<Arc<DeviceMemory<D>>, BackendError> {
        self.memory
            .get_or_init(|| (self.open)().map(|d| Arc::new(DeviceMemory::new(d))))
            .clone()
            .map_err(|e| BackendError::with_source(self.name, e))
    }
}

/// A GPU platform over device type `D`.
pub struct GpuPlatform<D: Device> {
    shared: Arc<Shared<D>>,
    compiler: GpuCompiler<D>,
    transfer: GpuTransfer<D>,
}

/// The `nvptx` platform: an NVIDIA GPU through the CUDA driver.
pub type NvptxPlatform = GpuPlatform<CudaDevice>;
/// The `nvptx-sim` platform: the same kernels on the host.
pub type NvptxSimPlatform = GpuPlatform<SimDevice>;

impl<D: Device> GpuPlatform<D> {
    fn with(name: &'static str, open: fn() -> Result<D, NvptxError>) -> Self {
        let shared = Arc::new(Shared {
            name,
            open,
            memory: OnceLock::new(),
        });
        GpuPlatform {
            compiler: GpuCompiler {
                shared: shared.clone(),
            },
            transfer: GpuTransfer {
                shared: shared.clone(),
            },
            shared,
        }
    }
}

impl GpuPlatform<CudaDevice> {
    /// The platform of GPU 0 (PTX for `sm_80`, which later GPUs also run).
    pub fn new() -> Self {
        GpuPlatform::with(NAME, || CudaDevice::open(0, GpuArch::Sm80))
    }
}

impl Default for GpuPlatform<CudaDevice> {
    fn default() -> Self {
        Self::new()
    }
}

impl GpuPlatform<SimDevice> {
    /// The simulator platform.
    pub fn new() -> Self {
        GpuPlatform::with(SIM_NAME, || Ok(SimDevice::with_found_libdevice()))
    }
}

impl Default for GpuPlatform<SimDevice> {
    fn default() -> Self {
        Self::new()
    }
}

impl<D: Device> Platform for GpuPlatform<D> {
    fn name(&self) -> &str {
        self.shared.name
    }

    fn devices(&self) -> Vec<DeviceInfo> {
        match self.shared.memory() {
            Ok(mem) => vec![DeviceInfo {
                ordinal: 0,
                description: mem.device().description(),
                memory_bytes: None,
            }],
            Err(_) => Vec::new(),
        }
    }

    fn compiler(&self) -> &dyn Compiler {
        &self.compiler
    }

    fn transfer_manager(&self) -> &dyn TransferManager {
        &self.transfer
    }

    fn default_pipeline(&self) -> Option<&str> {
        Some("gpu")
    }
}

/// The payload of a [`DeviceBuffer`] of a GPU backend: one key per array leaf, depth-first,
/// freed when the buffer is dropped.
pub struct GpuBuffer<D: Device> {
    keys: Vec<BufferKey>,
    memory: Arc<DeviceMemory<D>>,
}

impl<D: Device> Drop for GpuBuffer<D> {
    fn drop(&mut self) {
        for &k in &self.keys {
            // A key freed already by `free` is simply gone.
            let _ = self.memory.free(k);
        }
    }
}

/// The keys of `buf`, a buffer of the backend `shared` names on its device.
fn keys_of<'a, D: Device>(
    shared: &Shared<D>,
    memory: &Arc<DeviceMemory<D>>,
    buf: &'a DeviceBuffer,
) -> Result<&'a [BufferKey], BackendError> {
    let b: &GpuBuffer<D> = buf.payload_of(shared.name, "a GPU buffer")?;
    if !Arc::ptr_eq(&b.memory, memory) {
        return Err(BackendError::new(
            shared.name,
            "the buffer belongs to another device of this backend",
        ));
    }
    Ok(&b.keys)
}

/// Frees the device memory of `buf` (a buffer of `nvptx` or `nvptx-sim`) now, before it is
/// dropped; using it afterwards is an error ("stale buffer handle"), as is freeing it twice.
pub fn free(buf: &DeviceBuffer) -> Result<(), BackendError> {
    fn go<D: Device>(name: &str, buf: &DeviceBuffer) -> Option<Result<(), BackendError>> {
        let b = buf.payload.downcast_ref::<GpuBuffer<D>>()?;
        Some(
            b.keys
                .iter()
                .try_for_each(|&k| b.memory.free(k))
                .map_err(|e| BackendError::with_source(name, e)),
        )
    }
    go::<SimDevice>(SIM_NAME, buf)
        .or_else(|| go::<CudaDevice>(NAME, buf))
        .unwrap_or_else(|| {
            Err(BackendError::new(
                &buf.platform,
                "not a buffer of the nvptx or nvptx-sim backend",
            ))
        })
}

struct GpuCompiler<D: Device> {
    shared: Arc<Shared<D>>,
}

impl<D: Device> Compiler for GpuCompiler<D> {
    fn compile(
        &self,
        m: Module,
        opts: &CompileOptions,
    ) -> Result<Box<dyn Executable>, BackendError> {
        let name = self.shared.name;
        let t0 = Instant::now();
        let memory = self.shared.memory()?;
        let (m, mut phases) = crate::backend::prepare_module_phases(name, m, opts)?;
        let instructions = m.num_live_insts();
        let kernels = kernel_options_from_env().map_err(|e| BackendError::new(name, e))?;
        let t = Instant::now();
        let program = GpuProgram::compile_with(&memory, m, &kernels)
            .map_err(|e| BackendError::new(name, e.to_string()))?;
        phases.push(crate::backend::Phase {
            name: "kernels (planning, LLVM, PTX)".into(),
            time: t.elapsed(),
        });
        // The one temporary allocation a run makes, where the module runs from its static
        // assignment (a run with a buffer per value has no fixed figure).
        let temp_bytes = program.assignment().map(|a| a.temp_bytes);
        Ok(Box::new(GpuExecutable {
            shared: self.shared.clone(),
            memory,
            program,
            stats: ExecutableStats {
                compile_time: t0.elapsed(),
                instructions,
                temp_bytes,
                phases,
                ..Default::default()
            },
        }))
    }
}

/// The kernel planner's choices for `axle run`, `axle bench` and the library's compiles, from
/// the environment: `AXLE_NVPTX_TENSOR_CORES` (`auto`, the default, `off` or `always`:
/// [`TensorCores`]) and `AXLE_NVPTX_FLOAT_ATOMICS` (`1` lets `f32`/`f64` add scatters use
/// float atomics, whose sums may differ from run to run; `0` or unset keeps results
/// bit-identical from run to run). Any other value is an error naming the variable.
pub fn kernel_options_from_env() -> Result<KernelOptions, String> {
    let var = |name: &str| std::env::var(name).ok().filter(|v| !v.is_empty());
    let tensor_cores = match var("AXLE_NVPTX_TENSOR_CORES") {
        Some(v) => {
            TensorCores::from_name(&v).map_err(|e| format!("AXLE_NVPTX_TENSOR_CORES: {e}"))?
        }
        None => TensorCores::default(),
    };
    let float_atomics = match var("AXLE_NVPTX_FLOAT_ATOMICS").as_deref() {
        None | Some("0") => false,
        Some("1") => true,
        Some(v) => {
            return Err(format!(
                "AXLE_NVPTX_FLOAT_ATOMICS={v}: expected 1 (float atomics allowed) or 0"
            ))
        }
    };
    Ok(KernelOptions {
        tensor_cores,
        float_atomics,
    })
}

/// A module compiled for a GPU backend.
struct GpuExecutable<D: Device> {
    shared: Arc<Shared<D>>,
    memory: Arc<DeviceMemory<D>>,
    program: GpuProgram<D>,
    stats: ExecutableStats,
}

impl<D: Device> Executable for GpuExecutable<D> {
    fn backend(&self) -> &str {
        self.shared.name
    }

    fn execute(&self, args: &[&DeviceBuffer]) -> Result<DeviceBuffer, BackendError> {
        let name = self.shared.name;
        let keys = args
            .iter()
            .map(|b| keys_of(&self.shared, &self.memory, b).map(<[BufferKey]>::to_vec))
            .collect::<Result<Vec<_>, _>>()?;
        let out = self
            .program
            .run(&self.memory, &keys)
            .map_err(|e| BackendError::with_source(name, e))?;
        let m = self.program.module();
        Ok(DeviceBuffer {
            platform: name.into(),
            device: 0,
            shape: ValueShape::of_shape(m, m.shape(m.root(m.entry()))),
            payload: Box::new(GpuBuffer {
                keys: out,
                memory: self.memory.clone(),
            }),
        })
    }

    fn module(&self) -> &Module {
        self.program.module()
    }

    fn compiled_text(&self) -> String {
        let mut s = format!("// {}\n", self.program.memory_summary());
        for k in self.program.kernels() {
            s.push_str(&format!("// {}: {:?} kernel, {}\n", k.name, k.kind, k.plan));
        }
        s.push_str(&axle_ir::print_module(self.program.module()));
        s
    }

    fn stats(&self) -> ExecutableStats {
        self.stats.clone()
    }

    fn as_any(&self) -> Option<&dyn std::any::Any> {
        Some(self)
    }
}

/// Runs `exe` (an executable of `nvptx` or `nvptx-sim`) `repeat` times on the devices of
/// `mesh`, each device on its own thread in the backend's device memory with `inputs[d]` (the
/// bytes of every entry parameter leaf): each device's output leaves (of the last run) and the
/// wall time of each run ([`axle_codegen_nvptx::devices::execute_devices`]).
pub(crate) fn execute_devices(
    exe: &dyn Executable,
    mesh: axle_ir::collective::DeviceMesh,
    inputs: &[Vec<&[u8]>],
    repeat: usize,
    timeout: std::time::Duration,
) -> Result<(Vec<Vec<ArrayLiteral>>, Vec<std::time::Duration>), String> {
    fn go<D: Device>(
        exe: &GpuExecutable<D>,
        mesh: axle_ir::collective::DeviceMesh,
        inputs: &[Vec<&[u8]>],
        repeat: usize,
        timeout: std::time::Duration,
    ) -> Result<(Vec<Vec<ArrayLiteral>>, Vec<std::time::Duration>), String> {
        let m = exe.program.module();
        let shape = ValueShape::of_shape(m, m.shape(m.root(m.entry())));
        let run = axle_codegen_nvptx::devices::execute_devices(
            &exe.program,
            &exe.memory,
            mesh,
            inputs,
            repeat,
            timeout,
        )
        .map_err(|e| e.to_string())?;
        let leaves = shape.leaves();
        let outputs = run
            .outputs
            .into_iter()
            .map(|o| {
                o.into_iter()
                    .zip(&leaves)
                    .map(|(data, &s)| ArrayLiteral {
                        shape: s.clone(),
                        data,
                    })
                    .collect()
            })
            .collect();
        Ok((outputs, run.run_times))
    }
    let any = exe.as_any();
    if let Some(e) = any.and_then(|a| a.downcast_ref::<GpuExecutable<SimDevice>>()) {
        go(e, mesh, inputs, repeat, timeout)
    } else if let Some(e) = any.and_then(|a| a.downcast_ref::<GpuExecutable<CudaDevice>>()) {
        go(e, mesh, inputs, repeat, timeout)
    } else {
        Err("not an executable of the nvptx or nvptx-sim backend".into())
    }
}

struct GpuTransfer<D: Device> {
    shared: Arc<Shared<D>>,
}

/// The array leaves of a literal, depth-first.
fn literal_leaves<'a>(l: &'a Literal, out: &mut Vec<&'a ArrayLiteral>) {
    match l {
        Literal::Array(a) => out.push(a),
        Literal::Tuple(es) => es.iter().for_each(|e| literal_leaves(e, out)),
    }
}

/// The literal of shape `s` from the next downloaded leaves.
fn rebuild(
    name: &str,
    s: &ValueShape,
    leaves: &mut impl Iterator<Item = Vec<u8>>,
) -> Result<Literal, BackendError> {
    Ok(match s {
        ValueShape::Array(a) => {
            let data = leaves
                .next()
                .ok_or_else(|| BackendError::new(name, "too few buffers for the shape"))?;
            let want = a.num_elements().max(0) as usize * a.ty.byte_size();
            if data.len() != want {
                return Err(BackendError::new(
                    name,
                    format!("a buffer of {} bytes for {want}", data.len()),
                ));
            }
            Literal::Array(ArrayLiteral {
                shape: a.clone(),
                data,
            })
        }
        ValueShape::Tuple(es) => Literal::Tuple(
            es.iter()
                .map(|e| rebuild(name, e, leaves))
                .collect::<Result<_, _>>()?,
        ),
        ValueShape::Token => Literal::Tuple(Vec::new()),
    })
}

impl<D: Device> TransferManager for GpuTransfer<D> {
    fn to_device(&self, lit: &Literal, device: usize) -> Result<DeviceBuffer, BackendError> {
        let name = self.shared.name;
        if device != 0 {
            return Err(BackendError::new(name, format!("no device {device}")));
        }
        let memory = self.shared.memory()?;
        let mut leaves = Vec::new();
        literal_leaves(lit, &mut leaves);
        // The buffer owns its keys as they are made, so a failed upload frees the others.
        let mut buf = GpuBuffer {
            keys: Vec::with_capacity(leaves.len()),
            memory: memory.clone(),
        };
        for a in leaves {
            let k = memory
                .upload(&a.data)
                .map_err(|e| BackendError::with_source(name, e))?;
            buf.keys.push(k);
        }
        Ok(DeviceBuffer {
            platform: name.into(),
            device,
            shape: ValueShape::of_literal(lit),
            payload: Box::new(buf),
        })
    }

    fn from_device(&self, buf: &DeviceBuffer) -> Result<Literal, BackendError> {
        let name = self.shared.name;
        let memory = self.shared.memory()?;
        let keys = keys_of(&self.shared, &memory, buf)?;
        let data = keys
            .iter()
            .map(|&k| memory.download(k))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| BackendError::with_source(name, e))?;
        rebuild(name, &buf.shape, &mut data.into_iter())
    }
}

/// The PTX (`ptx`) or optimized LLVM IR (`llvm`) of a module's kernels for GPU architecture
/// `gpu_arch` (`sm_80`, `sm_90`), with the `f16` and `bf16` dots `tensor_cores` (`auto`, `off`,
/// `always`: [`TensorCores`]) selects on tensor cores and, with `float_atomics`, `f32`/`f64`
/// add scatters on float atomics ([`KernelOptions::float_atomics`]), after the pipeline of `opts` (the `gpu`
/// pipeline unless told otherwise).
pub fn emit_text(
    m: Module,
    opts: &CompileOptions,
    gpu_arch: &str,
    tensor_cores: &str,
    float_atomics: bool,
    what: &str,
) -> Result<String, BackendError> {
    let gpu_arch = GpuArch::from_name(gpu_arch).map_err(|e| BackendError::with_source(NAME, e))?;
    let tensor_cores =
        TensorCores::from_name(tensor_cores).map_err(|e| BackendError::with_source(NAME, e))?;
    let what = match what {
        "ptx" => Emit::Ptx,
        "llvm" => Emit::LlvmIr,
        other => {
            return Err(BackendError::new(
                NAME,
                format!("--emit {other}: the nvptx backend emits ptx or llvm"),
            ))
        }
    };
    let m = crate::backend::prepare_module(NAME, m, opts)?;
    let opts = NvptxOptions {
        gpu_arch,
        libdevice: axle_codegen_nvptx::libdevice::find_libdevice(),
        kernels: KernelOptions {
            tensor_cores,
            float_atomics,
        },
    };
    axle_codegen_nvptx::emit_text(&m, &opts, what)
        .map_err(|e| BackendError::new(NAME, e.to_string()))
}
