//! The LLVM target a CPU compilation is for: the triple, CPU name and features (the host's, or
//! an ahead-of-time triple's), its target machine, the thread count, and what the GEMM's
//! blocking depends on.
//!
//! Invariant: LLVM's x86 and AArch64 targets are initialized (once per process) before any
//! target is looked up.

use std::sync::OnceLock;

use inkwell::targets::{
    CodeModel, InitializationConfig, RelocMode, Target, TargetMachine, TargetTriple,
};
use inkwell::OptimizationLevel;

use crate::CpuOptions;

/// The number of threads `opts` asks for.
pub(crate) fn thread_count(opts: &CpuOptions) -> usize {
    if opts.threads > 0 {
        return opts.threads;
    }
    if let Some(n) = std::env::var("AXLE_CPU_THREADS")
        .ok()
        .and_then(|s| s.parse::<usize>().ok())
        .filter(|&n| n > 0)
    {
        return n;
    }
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

pub(crate) fn init_llvm() {
    static INIT: OnceLock<()> = OnceLock::new();
    INIT.get_or_init(|| {
        axle_codegen_llvm::llvm_options::configure();
        // The targets Axle compiles for (the host is one of them); llvm-sys's
        // `initialize_native` wrappers are not built (see build.rs).
        let cfg = InitializationConfig::default();
        Target::initialize_x86(&cfg);
        Target::initialize_aarch64(&cfg);
    });
}

/// A target: triple, CPU name and feature string.
pub(crate) struct TargetSpec {
    pub triple: TargetTriple,
    pub cpu: String,
    pub features: String,
}

pub(crate) fn target_spec(opts: &CpuOptions) -> TargetSpec {
    init_llvm();
    match &opts.target_triple {
        Some(t) if !is_host_triple(t) => TargetSpec {
            triple: TargetTriple::create(t),
            cpu: String::new(),
            features: String::new(),
        },
        _ => TargetSpec {
            triple: TargetMachine::get_default_triple(),
            cpu: TargetMachine::get_host_cpu_name().to_string(),
            features: TargetMachine::get_host_cpu_features().to_string(),
        },
    }
}

fn is_host_triple(t: &str) -> bool {
    let host = TargetMachine::get_default_triple();
    let host = host.as_str().to_string_lossy();
    let norm = TargetMachine::normalize_triple(&TargetTriple::create(t));
    norm.as_str().to_string_lossy() == host
}

/// LLVM's code generation level for `CpuOptions::opt_level`.
fn llvm_level(opt_level: u8) -> OptimizationLevel {
    match opt_level {
        0 => OptimizationLevel::None,
        1 => OptimizationLevel::Less,
        2 => OptimizationLevel::Default,
        _ => OptimizationLevel::Aggressive,
    }
}

pub(crate) fn target_machine(
    spec: &TargetSpec,
    reloc: RelocMode,
    opt_level: u8,
) -> Result<TargetMachine, String> {
    let target = Target::from_triple(&spec.triple).map_err(|e| e.to_string())?;
    target
        .create_target_machine(
            &spec.triple,
            &spec.cpu,
            &spec.features,
            llvm_level(opt_level),
            reloc,
            CodeModel::Default,
        )
        .ok_or_else(|| format!("cannot create a target machine for {}", spec.triple))
}

/// What the GEMM's blocking depends on when compiling with `opts`.
pub(crate) fn gemm_target(opts: &CpuOptions) -> crate::gemm::GemmTarget {
    let features = target_spec(opts).features;
    let stream_min = crate::stream::can_stream(&features).then(|| {
        opts.stream_min_bytes
            .map_or_else(crate::stream::default_stream_min, |b| {
                i64::try_from(b).unwrap_or(i64::MAX)
            })
    });
    crate::gemm::GemmTarget {
        features,
        threads: thread_count(opts),
        stream_min,
        epilogues: opts.epilogues,
        // The runtime's GEMM runs on the host, in the JIT's process.
        library: opts.gemm_library && opts.target_triple.as_deref().is_none_or(is_host_triple),
        sort_library: opts.sort_library && opts.target_triple.as_deref().is_none_or(is_host_triple),
        conv_library: opts.conv_library && opts.target_triple.as_deref().is_none_or(is_host_triple),
    }
}
