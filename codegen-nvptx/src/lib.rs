//! The NVPTX backend: NVIDIA GPU kernels emitted through LLVM's NVPTX target from the shared
//! LLVM layer (`axle-codegen-llvm`), with a launch plan per kernel, as PTX for `sm_80` or
//! `sm_90`.
//!
//! It compiles the kernels of the entry computation and of the computations its control flow
//! runs ([`kernels`], [`control_flow`]): one kernel per fusion and per unfused
//! instruction, on the grid and block of its [`LaunchPlan`] ([`launch`]): loop kernels (one element
//! per thread, or four with 128-bit accesses where aligned), row and column reductions with warp
//! shuffles and shared memory ([`reduction`]), transposes through shared-memory tiles
//! ([`transpose`]), shared-memory-tiled dots ([`dot`]) and convolutions (implicit GEMMs,
//! [`convolution`]) on one tile loop ([`tiled_product`]), `f16` and `bf16` dots on tensor
//! cores (`mma.sync`, [`mma_product`]), bitonic sorts ([`sort`]), FFTs as chains of
//! mixed-radix Stockham stages ([`fft`]), `rng-bit-generator` ([`kernels`]), scatters as a copy then
//! an update kernel ([`scatter`]) and select-and-scatters gathering per output element
//! ([`select_and_scatter`]). `while`, `conditional` and `call` run on the host between kernels,
//! as XLA's while and conditional thunks do ([`control_flow`]), and so do collectives, staged
//! through the host: operands read back, the collective run by the reference evaluator over the
//! run's communicator, results written back ([`collective`]); one executable runs on N devices
//! of one process, a thread each ([`devices`]).
//!
//! The kernels run on a [`device::Device`] through the launch-plan executor ([`executor`]),
//! with device buffers behind generational keys ([`device::DeviceMemory`]): a GPU through the
//! CUDA driver ([`cuda`], loaded at run time), or the host simulator `nvptx-sim` ([`sim`]),
//! which runs the same kernels retargeted to the host ([`sim_jit`]) with the GPU's threads,
//! barriers, shared memory and warp shuffles emulated. The executor runs each host computation
//! in the memory-aware schedule from the module's static buffer assignment ([`buffer_rules`]
//! gives the schedule crate the backend's rules): one temporary allocation per run, every
//! kernel and every loop or branch copy on offsets inside it ([`arena`]); a module the
//! assignment refuses runs with a buffer per value, each freed after its last reader
//! ([`host_liveness`]), and the executor says why.
//!
//! The PTX is LLVM's (`default<O3>`, then the NVPTX code generator for the chosen
//! [`GpuArch`], PTX ISA 7.8, the first version `sm_90` accepts).
#![deny(missing_docs)]

pub mod arena;
pub mod buffer_rules;
pub mod collective;
pub mod control_flow;
pub mod convolution;
pub mod cuda;
pub mod device;
pub mod devices;
pub mod dot;
pub mod error;
pub mod executor;
pub mod fft;
mod fused;
pub mod gpu_target;
pub mod host_computations;
pub mod host_liveness;
pub mod kernels;
pub mod launch;
pub mod libdevice;
pub mod mma_product;
mod primitives;
pub mod ptxas;
pub mod reduction;
pub mod scatter;
pub mod select_and_scatter;
pub mod sim;
mod sim_intrinsics;
pub mod sim_jit;
mod sim_mma;
mod sim_threads;
pub mod sort;
pub mod tiled_product;
pub mod toolkit;
pub mod transpose;

pub use axle_codegen_llvm::CodegenError;
pub use dot::TensorCores;
pub use error::NvptxError;
pub use kernels::{plan_kernels, plan_kernels_with, KernelInfo, KernelKind, KernelOptions};
pub use launch::LaunchPlan;

use axle_ir::Module;
use inkwell::context::Context;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;

/// The GPU architectures the backend emits for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuArch {
    /// Ampere (A100).
    #[default]
    Sm80,
    /// Hopper (H100, H200).
    Sm90,
}

impl GpuArch {
    /// Every architecture, in order.
    pub const ALL: [GpuArch; 2] = [GpuArch::Sm80, GpuArch::Sm90];

    /// The architecture named `name` (`sm_80`, `sm_90`).
    pub fn from_name(name: &str) -> Result<GpuArch, NvptxError> {
        GpuArch::ALL
            .into_iter()
            .find(|a| a.name() == name)
            .ok_or_else(|| NvptxError::UnknownArch(name.to_string()))
    }

    /// Its name, as `ptxas -arch` takes it.
    pub fn name(self) -> &'static str {
        match self {
            GpuArch::Sm80 => "sm_80",
            GpuArch::Sm90 => "sm_90",
        }
    }
}

/// Options of an NVPTX compilation.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NvptxOptions {
    /// The architecture the PTX is for.
    pub gpu_arch: GpuArch,
    /// The libdevice bitcode to link for math functions ([`libdevice::find_libdevice`]);
    /// without it, a math function with no inline form is an error naming its op.
    pub libdevice: Option<std::path::PathBuf>,
    /// The kernel planner's choices (which dots run on tensor cores).
    pub kernels: KernelOptions,
}

/// Text forms of a compiled module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    /// The optimized LLVM IR (NVPTX triple).
    LlvmIr,
    /// The PTX assembly.
    Ptx,
}

/// The NVPTX target triple (64-bit pointers, CUDA driver interface).
const TRIPLE: &str = "nvptx64-nvidia-cuda";
/// The PTX ISA version: 7.8 is the first `sm_90` accepts, and `sm_80` accepts it too.
const PTX_FEATURES: &str = "+ptx78";

/// The target machine of `arch`.
fn target_machine(arch: GpuArch) -> Result<TargetMachine, String> {
    axle_codegen_llvm::llvm_options::configure();
    Target::initialize_nvptx(&InitializationConfig::default());
    let triple = TargetTriple::create(TRIPLE);
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    target
        .create_target_machine(
            &triple,
            arch.name(),
            PTX_FEATURES,
            OptimizationLevel::Aggressive,
            RelocMode::Default,
            CodeModel::Default,
        )
        .ok_or_else(|| {
            format!(
                "cannot create a target machine for {TRIPLE} {}",
                arch.name()
            )
        })
}

/// The optimized LLVM IR or the PTX of a verified module's kernels, as `axle compile --backend
/// nvptx --emit llvm|ptx` prints it.
pub fn emit_text(m: &Module, opts: &NvptxOptions, what: Emit) -> Result<String, CodegenError> {
    let general = |msg: String| CodegenError::general(&m.name, msg);
    axle_ir::check_runnable(m).map_err(|e| general(e.to_string()))?;
    let kernels = plan_kernels_with(m, &opts.kernels)?;
    emit_planned(m, &kernels, opts, what)
}

/// The text of [`emit_text`] for kernels `kernels` of `m`, planned already (`opts.kernels` is
/// not consulted), as a device loads the kernels its executor planned.
pub fn emit_planned(
    m: &Module,
    kernels: &[KernelInfo],
    opts: &NvptxOptions,
    what: Emit,
) -> Result<String, CodegenError> {
    let general = |msg: String| CodegenError::general(&m.name, msg);
    let tm = target_machine(opts.gpu_arch).map_err(general)?;
    let ctx = Context::create();
    let (cg, _) = kernels::kernel_module(
        &ctx,
        m,
        kernels,
        opts.libdevice.as_deref(),
        &TargetTriple::create(TRIPLE),
        &tm.get_target_data(),
    )?;
    cg.module
        .verify()
        .map_err(|e| general(format!("LLVM rejected the kernels: {e}")))?;
    cg.module
        .run_passes("default<O3>", &tm, PassBuilderOptions::create())
        .map_err(|e| general(format!("LLVM's optimizer failed: {e}")))?;
    match what {
        Emit::LlvmIr => Ok(cg.module.print_to_string().to_string()),
        Emit::Ptx => {
            let buf = tm
                .write_to_memory_buffer(&cg.module, FileType::Assembly)
                .map_err(|e| general(format!("PTX emission failed: {e}")))?;
            Ok(String::from_utf8_lossy(buf.as_slice()).into_owned())
        }
    }
}
