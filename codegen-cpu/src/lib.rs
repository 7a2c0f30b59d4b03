//! The CPU backend: loop nests, GEMM and convolution kernels over the shared LLVM layer's
//! elemental emitters (`axle-codegen-llvm`, for the host CPU target), the JIT executable, the
//! threaded runtime and ahead-of-time object + C header output.
//!
//! The pipeline: lowering turns the entry computation into a program of thunks over
//! buffers (kernels, copies, loops and branches; `call` inlined, tuples resolved at compile
//! time), on the buffers of the `schedule` crate's assignment (the module is scheduled first if
//! it came without a schedule; temporaries in one block); each kernel's LLVM function is
//! built from elemental emitters (a generator from an output index to the value at that index,
//! composed across operands, so a fused computation is one loop nest and an unfused op a fusion
//! of one); the entry point runs the thunks; LLVM's `default<O3>` pipeline optimizes for the
//! host CPU (its name and features are put on every function, so loops vectorize for AVX-512
//! where the host has it); MCJIT makes machine code, or the target machine writes an object file.
//!
//! The operations XLA's CPU backend also leaves to a library (`fft`, `cholesky`,
//! `triangular-solve` and JAX's LAPACK custom calls) are host calls: the generated code calls
//! the Rust runtime library with the buffers and a constant descriptor (`host`, `runtime`).
//! The JIT maps its symbols; ahead-of-time objects do not include it, so `compile_aot` refuses
//! modules that need it.
//!
//! Anything the backend cannot compile is a [`CodegenError`] naming the instruction, never a
//! wrong answer; modules no backend runs (unbounded dynamic shapes, opaque entry parameters:
//! [`axle_ir::check_runnable`]) are refused before lowering. A run checks its outputs and
//! temporary block against the memory ceiling ([`axle_ir::memory`]) and allocates them
//! fallibly ([`CpuExecutable::try_alloc_outputs`], [`CpuExecutable::execute`]), so a run too
//! large for memory is an error, not an abort.
#![deny(missing_docs)]
// Index loops over several parallel arrays of per-dimension values read better than zips.
#![allow(clippy::needless_range_loop)]

mod aot;
mod artifact;
mod buf;
pub mod buffer_rules;
mod call_table;
mod collective;
mod conv_fast;
mod cpu_target;
mod devices;
mod emit;
mod epilogue;
mod fused;
pub mod fusion_target;
mod gemm;
mod gemv;
mod host;
mod jit;
mod kernel_cache;
mod kernel_kind;
mod kernels;
mod lane_epilogue;
mod lifted;
mod lower;
mod modules;
mod parallel_cost;
mod plan_cache;
mod pool;
mod radix;
mod reach;
mod row;
mod runtime;
mod select;
mod signature;
mod stream;
mod target_spec;

pub use aot::{c_identifier, compile_aot, AotOutput};
pub use artifact::Artifact;
pub use axle_codegen_llvm::CodegenError;
pub use devices::{execute_devices, DevicesRun};
pub use kernel_cache::KernelCache;

// The shared LLVM layer's modules, under the paths this crate's files name them by.
use axle_codegen_llvm::{cg, contraction as conv, elemental, error, forms, ops, real};
pub use jit::{
    buffer_assignment, AxleRuntime, CompileTimings, CpuExecutable, HostBuffer, KernelFn,
    KernelProfile, TraceSpan, RECYCLE_MAX_BYTES, RECYCLE_MIN_BYTES,
};

use axle_ir::Module;
use inkwell::context::Context;
use inkwell::targets::{FileType, RelocMode};

/// Options of a CPU compilation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CpuOptions {
    /// Threads for parallel kernels: 0 uses `AXLE_CPU_THREADS` or every core, 1 runs everything
    /// on the calling thread.
    pub threads: usize,
    /// The target triple; `None` (or the host's triple) compiles for the host CPU, its name and
    /// features included.
    pub target_triple: Option<String>,
    /// Run with subnormal floats flushed to zero (x86's FTZ and DAZ modes), as XLA's CPU backend
    /// does; on by default. Off gives IEEE gradual underflow.
    pub flush_denormals: bool,
    /// Call the C library for `f32` `exp`, `log`, `tanh`, `logistic` and `erf` (as the
    /// reference evaluator does) instead of the inline vectorizable approximations (a few ulps
    /// from libm at most, as XLA's).
    /// Off by default; differential tests turn it on so ill-conditioned compositions compare.
    pub libm_math: bool,
    /// LLVM's optimization level, 0 to 3 (the default; larger values mean 3): the pass
    /// pipeline `default<ON>` (vectorizers from 2 on) and the code generator's level.
    pub opt_level: u8,
    /// Outputs of at least this many bytes are written with non-temporal (streaming) stores
    /// where the target has them (x86): row kernels (softmax, layernorm) compute each row in a
    /// stack buffer and stream it to memory, skipping the cache. `None` (the default)
    /// takes half the host's last-level cache; `Some(u64::MAX)` never streams.
    pub stream_min_bytes: Option<u64>,
    /// Where output fusions of a dot apply their elementwise epilogue (bias, activation,
    /// scaling): on the GEMM's register tiles where the epilogue allows it (the default), on
    /// a tile buffer, or on each finished block ([`Epilogues`]). All give the same bits.
    /// [`CpuOptions::default`] takes `AXLE_CPU_EPILOGUES` (`registers`, `tiles` or `blocks`)
    /// when it is set, so `axle bench` and `axle compile` can run each.
    pub epilogues: Epilogues,
    /// Dots of `f32` or `f64` operands and result with no fused epilogue call the runtime's
    /// precompiled GEMM (the `gemm` crate's kernels, split into panels the pool shares) instead
    /// of a GEMM generated for each dot: on by default. Ahead-of-time objects and other
    /// targets than the host always generate theirs.
    pub gemm_library: bool,
    /// Radix sorts (and `topk`) run their digit passes in the runtime library, compiled once,
    /// instead of generating them in every sort kernel: on by default. Ahead-of-time objects
    /// and other targets than the host always generate theirs. Both give the same bits.
    pub sort_library: bool,
    /// Convolutions the runtime's precompiled convolution takes (`f32`, features innermost,
    /// see `runtime/conv.rs`) call it instead of a convolution kernel generated for each:
    /// on by default. Ahead-of-time objects and other targets than the host always generate
    /// theirs.
    pub conv_library: bool,
}

/// Where an output fusion of a dot applies its elementwise epilogue; the measurements that
/// chose the default are in the notes of the `epilogue` module (`codegen-cpu/src/epilogue.rs`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Epilogues {
    /// On each register tile of the GEMM on its last `K` block (or of the tiled convolution,
    /// `f32` and `f64`), from the accumulators as they are, a vector of columns at a time, so
    /// the result is written once with its final values and never read back. Epilogues with an
    /// op this path does not compute on vectors (a libm call, a convert, a gather), or
    /// that read another array as large as the result, run on blocks instead.
    #[default]
    Registers,
    /// On each register tile of a GEMM on its last `K` block, through a tile buffer on the
    /// stack, one tile row at a time with the scalar elemental code (epilogues reading another
    /// array as large as the result, and convolutions' epilogues, run on blocks).
    Tiles,
    /// On each finished block of the result after the GEMM stored it.
    Blocks,
}

impl Default for CpuOptions {
    fn default() -> Self {
        CpuOptions {
            threads: 0,
            target_triple: None,
            flush_denormals: true,
            libm_math: false,
            opt_level: 3,
            stream_min_bytes: None,
            epilogues: default_epilogues(),
            gemm_library: true,
            sort_library: true,
            conv_library: true,
        }
    }
}

/// [`CpuOptions::epilogues`] by default: `AXLE_CPU_EPILOGUES` (`registers`, `tiles` or
/// `blocks`) when set, else [`Epilogues::default`].
fn default_epilogues() -> Epilogues {
    match std::env::var("AXLE_CPU_EPILOGUES").as_deref() {
        Ok("tiles") => Epilogues::Tiles,
        Ok("blocks") => Epilogues::Blocks,
        _ => Epilogues::default(),
    }
}

/// This build of the backend: the crate's version and a hash of the sources of every crate
/// that shapes its code (this one, the IR, the passes it runs), computed by the build script.
/// The compilation cache keys on it, so entries of another build never load.
pub const BACKEND_VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    "+",
    env!("AXLE_CODEGEN_CPU_SOURCE_HASH")
);

/// Text forms of a compiled module.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emit {
    /// The optimized LLVM IR.
    LlvmIr,
    /// The target's assembly.
    Asm,
}

/// JIT-compiles the entry computation of a verified module.
pub fn compile(m: &Module, opts: &CpuOptions) -> Result<CpuExecutable, CodegenError> {
    jit::compile(m, opts)
}

/// JIT-compiles the entry computation of a verified module through an object file, and returns
/// the executable with its [`Artifact`] (the object file and runtime facts) for a cache.
pub fn compile_with_artifact(
    m: &Module,
    opts: &CpuOptions,
) -> Result<(CpuExecutable, Artifact), CodegenError> {
    jit::compile_object(m, opts, None)
}

/// [`compile_with_artifact`] with a kernel cache: each LLVM module of kernels that `cache` holds
/// (compiled before for this build, target and options, by any program with the same kernels)
/// is loaded from it instead of compiled, and each module compiled is stored in it. The code is
/// the same as without the cache; [`CompileTimings::cached_modules`] says how many came from
/// it.
pub fn compile_with_kernel_cache(
    m: &Module,
    opts: &CpuOptions,
    cache: &dyn KernelCache,
) -> Result<(CpuExecutable, Artifact), CodegenError> {
    jit::compile_object(m, opts, Some(cache))
}

/// The executable of an artifact from [`compile_with_artifact`], made by this build of the
/// backend in any process: links its object code, running neither LLVM's optimizer nor its
/// code generator. `opts` gives the runtime settings (threads, subnormal flushing); the code
/// settings are the artifact's.
pub fn load_artifact(
    artifact: &Artifact,
    opts: &CpuOptions,
) -> Result<CpuExecutable, CodegenError> {
    jit::load_artifact(artifact, opts)
}

/// The optimized LLVM IR or the assembly of a module, as `axle compile --emit` prints it.
pub fn emit_text(m: &Module, opts: &CpuOptions, what: Emit) -> Result<String, CodegenError> {
    let ctx = Context::create();
    let built = jit::build(&ctx, m, opts, "axle_entry", RelocMode::PIC)?;
    match what {
        Emit::LlvmIr => Ok(built.module.print_to_string().to_string()),
        Emit::Asm => {
            let buf = built
                .tm
                .write_to_memory_buffer(&built.module, FileType::Assembly)
                .map_err(|e| {
                    CodegenError::general(&m.name, format!("assembly emission failed: {e}"))
                })?;
            Ok(String::from_utf8_lossy(buf.as_slice()).into_owned())
        }
    }
}

/// How the backend runs a verified module, one line per kernel in program order (kernels of
/// loop bodies and branches included): the kernel's kind, the instruction it comes from, the
/// root it computes and its plan — the reductions each pass of a row kernel computes, the
/// core of an output fusion's epilogue. Fusions appear as the kernels their stages became, so
/// tests (and people) can see that no reduction is recomputed per element.
pub fn kernel_plan(m: &Module) -> Result<Vec<String>, CodegenError> {
    jit::kernel_plan(m)
}

/// The host's target triple, CPU name and features.
pub fn host_target() -> (String, String, String) {
    let s = target_spec::target_spec(&CpuOptions::default());
    (
        s.triple.as_str().to_string_lossy().into_owned(),
        s.cpu,
        s.features,
    )
}
