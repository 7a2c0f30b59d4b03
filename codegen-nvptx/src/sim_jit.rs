//! The simulator's code: a module's NVPTX kernels, emitted by the same code as for the GPU
//! ([`crate::kernels::emit_kernels`], without libdevice, so math is the shared approximations
//! of `axle-codegen-llvm`), retargeted to the host and compiled there by LLVM's JIT.
//!
//! Retargeting: the module gets the host's triple and data layout before any kernel is
//! emitted; the GPU's special registers (`llvm.nvvm.read.ptx.sreg.{tid,ctaid,ntid}.x`), its
//! block barrier (`llvm.nvvm.barrier0`) and its warp shuffle (`llvm.nvvm.shfl.sync.bfly.i32`)
//! are replaced by calls to host functions of the same types ([`crate::sim_threads`]'s hooks),
//! bound to their addresses in the JIT; the kernels' shared arrays (address space 3) get
//! external linkage, so LLVM assumes the hooks (a barrier, a shuffle) may read and write them,
//! as other threads do between two of this thread's accesses; each kernel gets an entry point
//! `axle_sim_entry_<k>(ptr args)` taking its buffers as one array of pointers, in kernel
//! parameter order. Non-zero address spaces are plain 64-bit pointers on the host.
//!
//! The module is compiled to a host object file and linked into the process by ORC
//! ([`LoadedObject`]), with the hooks as absolute symbols.
//!
//! Invariants: no NVVM intrinsic is left in the host module (checked, an error otherwise); the
//! machine code lives as long as the [`SimCode`]; the shared arrays are one copy per loaded
//! module, so blocks of a kernel must run one after another.

use axle_codegen_llvm::cg::Cg;
use axle_codegen_llvm::object_loader::LoadedObject;
use axle_ir::Module;
use inkwell::context::Context;
use inkwell::module::Linkage;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{
    CodeModel, FileType, InitializationConfig, RelocMode, Target, TargetMachine,
};
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::BasicMetadataValueEnum;
use inkwell::{AddressSpace, OptimizationLevel};

use crate::gpu_target::NvptxTarget;
use crate::kernels::{emit_kernels, KernelInfo};
use crate::sim_threads::{self, EntryFn};
use crate::CodegenError;

/// The shared address space.
const SHARED: u16 = 3;

/// JIT-compiled kernels of one module; the machine code is freed when it is dropped.
pub struct SimCode {
    /// One entry point per kernel, in launch order.
    pub(crate) entries: Vec<EntryFn>,
    /// The machine code (none when the module has no kernel).
    _code: Option<LoadedObject>,
}

/// The host's target machine (the targets are initialized once; llvm-sys's
/// `initialize_native` wrappers are not built).
fn host_machine() -> Result<TargetMachine, String> {
    static INIT: std::sync::OnceLock<()> = std::sync::OnceLock::new();
    INIT.get_or_init(|| {
        let cfg = InitializationConfig::default();
        Target::initialize_x86(&cfg);
        Target::initialize_aarch64(&cfg);
    });
    let triple = TargetMachine::get_default_triple();
    let target = Target::from_triple(&triple).map_err(|e| e.to_string())?;
    target
        .create_target_machine(
            &triple,
            &TargetMachine::get_host_cpu_name().to_string(),
            &TargetMachine::get_host_cpu_features().to_string(),
            OptimizationLevel::Default,
            RelocMode::PIC,
            CodeModel::Default,
        )
        .ok_or_else(|| "cannot create a target machine for the host".to_string())
}

/// The hooks: NVVM intrinsic, host symbol, host address.
fn hooks() -> [(&'static str, &'static str, usize); 5] {
    [
        (
            "llvm.nvvm.read.ptx.sreg.tid.x",
            "axle_sim_tid",
            sim_threads::hook_tid as *const () as usize,
        ),
        (
            "llvm.nvvm.read.ptx.sreg.ctaid.x",
            "axle_sim_ctaid",
            sim_threads::hook_ctaid as *const () as usize,
        ),
        (
            "llvm.nvvm.read.ptx.sreg.ntid.x",
            "axle_sim_ntid",
            sim_threads::hook_ntid as *const () as usize,
        ),
        (
            "llvm.nvvm.barrier0",
            "axle_sim_barrier",
            sim_threads::hook_barrier as *const () as usize,
        ),
        (
            "llvm.nvvm.shfl.sync.bfly.i32",
            "axle_sim_shfl_bfly",
            sim_threads::hook_shfl_bfly as *const () as usize,
        ),
    ]
}

/// Emits the kernels `kernels` of `m` for the host and JIT-compiles them.
pub fn compile(m: &Module, kernels: &[KernelInfo]) -> Result<SimCode, CodegenError> {
    let general = |msg: String| CodegenError::general(&m.name, msg);
    if kernels.is_empty() {
        return Ok(SimCode {
            entries: Vec::new(),
            _code: None,
        });
    }
    let tm = host_machine().map_err(general)?;
    let ctx = Context::create();
    let cg = Cg::new(&ctx, &m.name, Box::new(NvptxTarget::default()));
    cg.module.set_triple(&tm.get_triple());
    cg.module
        .set_data_layout(&tm.get_target_data().get_data_layout());
    emit_kernels(&cg, m, kernels)?;
    retarget(&cg, kernels).map_err(general)?;
    cg.module
        .verify()
        .map_err(|e| general(format!("LLVM rejected the simulator's kernels: {e}")))?;
    cg.module
        .run_passes("default<O2>", &tm, PassBuilderOptions::create())
        .map_err(|e| general(format!("LLVM's optimizer failed: {e}")))?;
    let object = tm
        .write_to_memory_buffer(&cg.module, FileType::Object)
        .map_err(|e| general(format!("host code emission failed: {e}")))?;
    let symbols: Vec<(&str, usize)> = hooks().iter().map(|&(_, s, a)| (s, a)).collect();
    let (code, first) =
        LoadedObject::load(&[object.as_slice().to_vec()], &symbols, "axle_sim_entry_0")
            .map_err(general)?;
    let mut entries = Vec::with_capacity(kernels.len());
    for k in 0..kernels.len() {
        let addr = if k == 0 {
            first
        } else {
            code.lookup(&format!("axle_sim_entry_{k}"))
                .map_err(general)?
        };
        // SAFETY: `axle_sim_entry_<k>` is defined by `retarget` as `void (ptr)`.
        entries.push(unsafe { std::mem::transmute::<usize, EntryFn>(addr) });
    }
    Ok(SimCode {
        entries,
        _code: Some(code),
    })
}

/// Replaces the NVVM intrinsics by the host hooks, makes the shared arrays external and adds
/// each kernel's entry point.
fn retarget(cg: &Cg<'_>, kernels: &[KernelInfo]) -> Result<(), String> {
    let module = &cg.module;
    for (intrinsic, symbol, _) in hooks() {
        let Some(f) = module.get_function(intrinsic) else {
            continue;
        };
        let hook = module.add_function(symbol, f.get_type(), Some(Linkage::External));
        f.replace_all_uses_with(hook);
        // SAFETY: the declaration has no uses left.
        unsafe { f.delete() };
    }
    let mut g = module.get_first_global();
    while let Some(global) = g {
        if global.as_pointer_value().get_type().get_address_space() == AddressSpace::from(SHARED) {
            global.set_linkage(Linkage::External);
        }
        g = global.get_next_global();
    }
    let ptr = cg.ctx.ptr_type(AddressSpace::default());
    let entry_ty = cg
        .ctx
        .void_type()
        .fn_type(&[BasicMetadataTypeEnum::from(ptr)], false);
    for (k, info) in kernels.iter().enumerate() {
        let kernel = module
            .get_function(&info.name)
            .ok_or_else(|| format!("kernel {} was not emitted", info.name))?;
        let f = module.add_function(&format!("axle_sim_entry_{k}"), entry_ty, None);
        let bb = cg.ctx.append_basic_block(f, "entry");
        cg.b.position_at_end(bb);
        let table = f
            .get_first_param()
            .ok_or("entry point without its parameter")?
            .into_pointer_value();
        let mut args: Vec<BasicMetadataValueEnum> = Vec::new();
        for (i, p) in kernel.get_param_iter().enumerate() {
            let e = err_str(unsafe {
                // SAFETY: `i` is within the table of the kernel's parameter count.
                cg.b.build_in_bounds_gep(ptr, table, &[cg.i64().const_int(i as u64, false)], "slot")
            })?;
            let v = err_str(cg.b.build_load(ptr, e, "buf"))?.into_pointer_value();
            let want = p.get_type().into_pointer_type();
            let v = err_str(cg.b.build_address_space_cast(v, want, "buf.as"))?;
            args.push(v.into());
        }
        err_str(cg.b.build_call(kernel, &args, ""))?;
        err_str(cg.b.build_return(None))?;
    }
    let mut f = module.get_first_function();
    while let Some(func) = f {
        let name = func.get_name().to_string_lossy();
        if name.starts_with("llvm.nvvm.") {
            return Err(format!("the simulator cannot run NVVM intrinsic {name}"));
        }
        f = func.get_next_function();
    }
    Ok(())
}

fn err_str<T>(r: Result<T, inkwell::builder::BuilderError>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}
