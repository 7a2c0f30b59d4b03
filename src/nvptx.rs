//! The `nvptx` backend: NVIDIA GPU kernels through LLVM's NVPTX target
//! (`axle-codegen-nvptx`). Its kernels and their PTX exist; the GPU runtime does not yet, so
//! compiling for execution is a clear error and `axle compile --backend nvptx --emit
//! ptx|llvm` prints what it emits ([`emit_text`]).
//!
//! Its default pipeline is the standard `gpu` pipeline: simplification, then fusion and
//! multi-output fusion for the gpu target.

use axle_codegen_nvptx::{Emit, GpuArch, NvptxOptions};
use axle_ir::{Literal, Module};

use crate::backend::{
    BackendError, CompileOptions, Compiler, DeviceBuffer, DeviceInfo, Executable, Platform,
    TransferManager,
};

const NAME: &str = "nvptx";

/// What the backend cannot do yet, in every error that says so.
const NO_RUNTIME: &str = "the nvptx backend has no GPU runtime yet; \
    `axle compile --backend nvptx --emit ptx|llvm` prints its kernels";

/// The NVPTX platform: no device is driven yet.
#[derive(Default)]
pub struct NvptxPlatform {
    compiler: NvptxCompiler,
    transfer: NvptxTransfer,
}

impl NvptxPlatform {
    /// The platform.
    pub fn new() -> Self {
        Self::default()
    }
}

impl Platform for NvptxPlatform {
    fn name(&self) -> &str {
        NAME
    }

    fn devices(&self) -> Vec<DeviceInfo> {
        Vec::new()
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

#[derive(Default)]
struct NvptxCompiler;

impl Compiler for NvptxCompiler {
    fn compile(
        &self,
        _m: Module,
        _opts: &CompileOptions,
    ) -> Result<Box<dyn Executable>, BackendError> {
        Err(BackendError::new(NAME, NO_RUNTIME))
    }
}

#[derive(Default)]
struct NvptxTransfer;

impl TransferManager for NvptxTransfer {
    fn to_device(&self, _lit: &Literal, _device: usize) -> Result<DeviceBuffer, BackendError> {
        Err(BackendError::new(NAME, NO_RUNTIME))
    }

    fn from_device(&self, _buf: &DeviceBuffer) -> Result<Literal, BackendError> {
        Err(BackendError::new(NAME, NO_RUNTIME))
    }
}

/// The PTX (`ptx`) or optimized LLVM IR (`llvm`) of a module's kernels for GPU architecture
/// `gpu_arch` (`sm_80`, `sm_90`), after the pipeline of `opts` (the `gpu` pipeline unless told
/// otherwise).
pub fn emit_text(
    m: Module,
    opts: &CompileOptions,
    gpu_arch: &str,
    what: &str,
) -> Result<String, BackendError> {
    let gpu_arch = GpuArch::from_name(gpu_arch).map_err(|e| BackendError::new(NAME, e))?;
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
    };
    axle_codegen_nvptx::emit_text(&m, &opts, what)
        .map_err(|e| BackendError::new(NAME, e.to_string()))
}
