//! The simulator's code: a module's NVPTX kernels, emitted by the same code as for the GPU
//! ([`crate::kernels::emit_kernels`]), retargeted to the host and compiled there.
//!
//! Math: without libdevice, math is the shared approximations and inline math library forms of
//! `axle-codegen-llvm` (`math`, `libm_fallback`), as on the GPU without libdevice; with
//! libdevice, its bitcode is linked as for the GPU (then unused functions dropped) and the NVVM
//! math intrinsics it calls run as host functions (`sim_intrinsics`, which says where
//! they are not bit-exact), `__nvvm_reflect` answering as for the GPU's PTX.
//!
//! Retargeting: the module gets the host's triple and data layout before any kernel is
//! emitted; the GPU's special registers (`llvm.nvvm.read.ptx.sreg.{tid,ctaid,ntid}.x`), its
//! block barrier (`llvm.nvvm.barrier0`) and its warp shuffle (`llvm.nvvm.shfl.sync.bfly.i32`)
//! are replaced by calls to host functions of the same types (`sim_threads`'s hooks),
//! bound to their addresses in the JIT; the tensor-core `mma` intrinsics
//! (`llvm.nvvm.mma.m16n8k16.row.col.*`, [`MmaType`]) by internal functions of the same types
//! that pass the operands as 32-bit registers to the warp-collective hook `axle_sim_mma` and
//! return the four `f32` it writes back (`crate::sim_mma` says what it computes); the
//! kernels' shared arrays (address space 3) get external linkage, so LLVM assumes the hooks
//! (a barrier, a shuffle) may read and write them, as other threads do between two of this
//! thread's accesses; each kernel gets an entry point
//! `axle_sim_entry_<k>(ptr args)` taking its buffers as one array of pointers, in kernel
//! parameter order. Non-zero address spaces are plain 64-bit pointers on the host.
//!
//! The module is compiled to a host object file and linked into the process by ORC
//! ([`LoadedObject`]), with the hooks as absolute symbols.
//!
//! With libdevice, `__nvvm_reflect` is folded by NVPTX's own pipeline-start passes (run with
//! an `sm_80` target machine on the host module) before the host optimizer drops the branches
//! not taken; the NVVM math intrinsics and libdevice's inline PTX left after it are bound to
//! host forms.
//!
//! Invariants: no NVVM intrinsic and no inline assembly is left in the host module (checked:
//! an error names what has no host form, never a crash in the host's code generator); the
//! machine code lives as long as the [`SimCode`]; the shared arrays are one copy per loaded
//! module, so blocks of a kernel must run one after another.

use std::path::Path;

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
use inkwell::values::{BasicMetadataValueEnum, BasicValue};
use inkwell::{AddressSpace, OptimizationLevel};

use crate::kernels::{kernel_module, KernelInfo};
use crate::mma_product::MmaType;
use crate::sim_intrinsics;
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
        axle_codegen_llvm::llvm_options::configure();
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
pub fn compile(
    m: &Module,
    kernels: &[KernelInfo],
    libdevice: Option<&Path>,
) -> Result<SimCode, CodegenError> {
    let general = |msg: String| CodegenError::general(&m.name, msg);
    if kernels.is_empty() {
        return Ok(SimCode {
            entries: Vec::new(),
            _code: None,
        });
    }
    let tm = host_machine().map_err(general)?;
    let ctx = Context::create();
    let (cg, linked) = kernel_module(
        &ctx,
        m,
        kernels,
        libdevice,
        &tm.get_triple(),
        &tm.get_target_data(),
    )?;
    if linked {
        // NVPTX's pipeline-start passes fold `__nvvm_reflect` as for the GPU's `sm_80` PTX
        // (`__CUDA_ARCH` 800, `__CUDA_FTZ` from the module flag `link_into` sets), so the
        // branches libdevice does not take on the GPU are dropped below.
        let nvptx = crate::target_machine(crate::GpuArch::Sm80).map_err(general)?;
        cg.module
            .run_passes("default<O0>", &nvptx, PassBuilderOptions::create())
            .map_err(|e| general(format!("NVVM reflection failed: {e}")))?;
    }
    bind_threads(&cg, kernels).map_err(general)?;
    cg.module
        .verify()
        .map_err(|e| general(format!("LLVM rejected the simulator's kernels: {e}")))?;
    cg.module
        .run_passes("default<O2>", &tm, PassBuilderOptions::create())
        .map_err(|e| general(format!("LLVM's optimizer failed: {e}")))?;
    // After optimization only the intrinsics of the paths taken are left.
    bind_math(&cg).map_err(general)?;
    bind_inline_asm(&cg).map_err(general)?;
    let object = tm
        .write_to_memory_buffer(&cg.module, FileType::Object)
        .map_err(|e| general(format!("host code emission failed: {e}")))?;
    let mut symbols: Vec<(&str, usize)> = hooks().iter().map(|&(_, s, a)| (s, a)).collect();
    symbols.push((MMA_HOOK, sim_threads::hook_mma as *const () as usize));
    symbols.extend(sim_intrinsics::intrinsics().iter().map(|&(_, s, a)| (s, a)));
    symbols.push(sim_intrinsics::reflect());
    symbols.extend(
        sim_intrinsics::asm_functions()
            .iter()
            .map(|&(_, s, a, _)| (s, a)),
    );
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
        // SAFETY: `axle_sim_entry_<k>` is defined by `bind_threads` as `void (ptr)`.
        entries.push(unsafe { std::mem::transmute::<usize, EntryFn>(addr) });
    }
    Ok(SimCode {
        entries,
        _code: Some(code),
    })
}

/// Binds a function's uses to another of the same type: the declaration of `intrinsic`, if the
/// module has one, becomes calls of the host symbol `symbol`.
fn rebind(cg: &Cg<'_>, intrinsic: &str, symbol: &str) {
    let module = &cg.module;
    let Some(f) = module.get_function(intrinsic) else {
        return;
    };
    let hook = module.add_function(symbol, f.get_type(), Some(Linkage::External));
    f.replace_all_uses_with(hook);
    // SAFETY: the declaration has no uses left.
    unsafe { f.delete() };
}

/// The host symbol of the warp-collective `mma` hook.
const MMA_HOOK: &str = "axle_sim_mma";

/// Replaces each tensor-core intrinsic the module declares by an internal function of the same
/// type that passes its operands, as 32-bit registers, to the hook `axle_sim_mma` (with the
/// operand type's `kind`: 0 `f16`, 1 `bf16`) and returns the four `f32` it writes back.
fn bind_mma(cg: &Cg<'_>) -> Result<(), String> {
    let module = &cg.module;
    let (i32t, f32t) = (cg.i32(), cg.f32());
    let ptr = cg.ctx.ptr_type(AddressSpace::default());
    let mut params: Vec<BasicMetadataTypeEnum> = vec![i32t.into(); 7];
    params.extend([BasicMetadataTypeEnum::from(f32t); 4]);
    params.push(ptr.into());
    let hook_ty = cg.ctx.void_type().fn_type(&params, false);
    for (kind, mma) in [(0u64, MmaType::F16), (1, MmaType::Bf16)] {
        let Some(f) = module.get_function(mma.intrinsic()) else {
            continue;
        };
        let hook = module
            .get_function(MMA_HOOK)
            .unwrap_or_else(|| module.add_function(MMA_HOOK, hook_ty, Some(Linkage::External)));
        let w = module.add_function(
            &format!("axle_sim_mma_{kind}"),
            f.get_type(),
            Some(Linkage::Internal),
        );
        let st = f
            .get_type()
            .get_return_type()
            .filter(|t| t.is_struct_type())
            .ok_or("an mma intrinsic that returns no struct")?
            .into_struct_type();
        if w.count_params() != 10 || st.count_fields() != 4 {
            return Err(format!("{} has an unexpected signature", mma.intrinsic()));
        }
        cg.b.position_at_end(cg.ctx.append_basic_block(w, "entry"));
        let d = err_str(cg.b.build_alloca(f32t.array_type(4), "d"))?;
        let mut args: Vec<BasicMetadataValueEnum> = vec![i32t.const_int(kind, false).into()];
        for (k, p) in w.get_param_iter().enumerate() {
            args.push(if k < 6 {
                err_str(cg.b.build_bit_cast(p, i32t, "reg"))?.into()
            } else {
                p.into()
            });
        }
        args.push(d.into());
        err_str(cg.b.build_call(hook, &args, ""))?;
        let mut v = st.get_undef();
        for i in 0..4u32 {
            // SAFETY: `i` is within the four-element array.
            let e = err_str(unsafe {
                cg.b.build_in_bounds_gep(f32t, d, &[i32t.const_int(i as u64, false)], "d.i")
            })?;
            let x = err_str(cg.b.build_load(f32t, e, "d.v"))?;
            v = err_str(cg.b.build_insert_value(v, x, i, "d.s"))?.into_struct_value();
        }
        err_str(cg.b.build_return(Some(&v)))?;
        f.replace_all_uses_with(w);
        // SAFETY: the declaration has no uses left.
        unsafe { f.delete() };
    }
    Ok(())
}

/// Replaces the special registers, the barrier, the shuffle and the tensor-core `mma` by the
/// host hooks, makes the shared arrays external and adds each kernel's entry point.
fn bind_threads(cg: &Cg<'_>, kernels: &[KernelInfo]) -> Result<(), String> {
    let module = &cg.module;
    for (intrinsic, symbol, _) in hooks() {
        rebind(cg, intrinsic, symbol);
    }
    bind_mma(cg)?;
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
            // SAFETY: `i` is within the table of the kernel's parameter count (the launch passes
            // one pointer per parameter), so the in-bounds GEP stays in bounds.
            let e = err_str(unsafe {
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
    Ok(())
}

/// Replaces the NVVM math intrinsics libdevice calls by their host forms; an error names one
/// that has none.
fn bind_math(cg: &Cg<'_>) -> Result<(), String> {
    for (intrinsic, symbol, _) in sim_intrinsics::intrinsics() {
        rebind(cg, intrinsic, symbol);
    }
    let mut f = cg.module.get_first_function();
    while let Some(func) = f {
        let name = func.get_name().to_string_lossy();
        if name.starts_with("llvm.nvvm.") {
            return Err(format!(
                "the simulator has no host form of NVVM intrinsic {name}"
            ));
        }
        f = func.get_next_function();
    }
    Ok(())
}

/// `($0, $1) = lo, hi of $2 * $3 + $4` (32-bit operands, a 64-bit result).
const MAD_WIDE_U32: &str = "{ mad.lo.cc.u32 $0, $2, $3, $4; madc.hi.u32 $1, $2, $3, 0; }";
/// `($0, $1) = ($2, $3) - ($4, $5)`, 128-bit values as 64-bit halves.
const SUB_U128: &str = "{ .reg .u32 r0, r1, r2, r3, a0, a1, a2, a3, b0, b1, b2, b3; \
    mov.b64 {a0,a1}, $2; mov.b64 {a2,a3}, $3; mov.b64 {b0,b1}, $4; mov.b64 {b2,b3}, $5; \
    sub.cc.u32 r0, a0, b0; subc.cc.u32 r1, a1, b1; subc.cc.u32 r2, a2, b2; \
    subc.u32 r3, a3, b3; mov.b64 $0, {r0,r1}; mov.b64 $1, {r2,r3}; }";
/// `($0, $1) = ($2, $3) + ($4, $5)`, 128-bit values as 64-bit halves.
const ADD_U128: &str = "{ .reg .u32 r0, r1, r2, r3, a0, a1, a2, a3, b0, b1, b2, b3; \
    mov.b64 {a0,a1}, $2; mov.b64 {a2,a3}, $3; mov.b64 {b0,b1}, $4; mov.b64 {b2,b3}, $5; \
    add.cc.u32 r0, a0, b0; addc.cc.u32 r1, a1, b1; addc.cc.u32 r2, a2, b2; \
    addc.u32 r3, a3, b3; mov.b64 $0, {r0,r1}; mov.b64 $1, {r2,r3}; }";
/// `($0, $1) = lo, hi of $2 * $3 + $4` (64-bit operands, a 128-bit result; checked against
/// the exact product-sum on random and extreme operands when it was added).
const MAD_WIDE_U64: &str = "{ .reg .u32 r0, r1, r2, r3, alo, ahi, blo, bhi, clo, chi; \
    mov.b64 {alo,ahi}, $2; mov.b64 {blo,bhi}, $3; mov.b64 {clo,chi}, $4; \
    mad.lo.cc.u32 r0, alo, blo, clo; madc.hi.cc.u32 r1, alo, blo, chi; \
    madc.hi.u32 r2, alo, bhi, 0; mad.lo.cc.u32 r1, alo, bhi, r1; \
    madc.hi.cc.u32 r2, ahi, blo, r2; madc.hi.u32 r3, ahi, bhi, 0; \
    mad.lo.cc.u32 r1, ahi, blo, r1; madc.lo.cc.u32 r2, ahi, bhi, r2; addc.u32 r3, r3, 0; \
    mov.b64 $0, {r0,r1}; mov.b64 $1, {r2,r3}; }";
/// `($0, $1) = lo, hi of $2 * $3` (64-bit operands, a 128-bit product).
const MUL_WIDE_U64: &str = "{ .reg .u32 r0, r1, r2, r3, alo, ahi, blo, bhi; \
    mov.b64 {alo,ahi}, $2; mov.b64 {blo,bhi}, $3; mul.lo.u32 r0, alo, blo; \
    mul.hi.u32 r1, alo, blo; mad.lo.cc.u32 r1, alo, bhi, r1; madc.hi.u32 r2, alo, bhi, 0; \
    mad.lo.cc.u32 r1, ahi, blo, r1; madc.hi.cc.u32 r2, ahi, blo, r2; \
    madc.hi.u32 r3, ahi, bhi, 0; mad.lo.cc.u32 r2, ahi, bhi, r2; addc.u32 r3, r3, 0; \
    mov.b64 $0, {r0,r1}; mov.b64 $1, {r2,r3}; }";

/// `text` with every run of whitespace one space, trimmed.
fn collapse(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Replaces libdevice's inline PTX by host code, each template recognized exactly (whitespace
/// aside) with the operand count and types it takes: `rcp.approx.ftz.f32` by a host function,
/// the wide multiply-adds, the 128-bit subtraction and the 128-bit product by the integer
/// arithmetic they compute; an error names any other inline assembly (which the host's
/// assembler cannot take).
fn bind_inline_asm<'ctx>(cg: &Cg<'ctx>) -> Result<(), String> {
    use inkwell::values::{AsValueRef, InstructionOpcode, IntValue};
    let mut calls = Vec::new();
    let mut f = cg.module.get_first_function();
    while let Some(func) = f {
        for bb in func.get_basic_blocks() {
            let mut i = bb.get_first_instruction();
            while let Some(inst) = i {
                if inst.get_opcode() == InstructionOpcode::Call {
                    // SAFETY: `inst` is a live call instruction.
                    let callee = unsafe { llvm_sys::core::LLVMGetCalledValue(inst.as_value_ref()) };
                    // SAFETY: `callee` is a live value (or null, which `LLVMIsAInlineAsm` takes).
                    if !callee.is_null()
                        && !unsafe { llvm_sys::core::LLVMIsAInlineAsm(callee) }.is_null()
                    {
                        let mut len = 0usize;
                        // SAFETY: `callee` is inline assembly; the string is copied at once.
                        let text = unsafe {
                            let p = llvm_sys::core::LLVMGetInlineAsmAsmString(callee, &mut len);
                            String::from_utf8_lossy(std::slice::from_raw_parts(p.cast::<u8>(), len))
                                .into_owned()
                        };
                        calls.push((inst, collapse(&text)));
                    }
                }
                i = inst.get_next_instruction();
            }
        }
        f = func.get_next_function();
    }
    let b = &cg.b;
    let (mad, sub, add, mul, mad64) = (
        collapse(MAD_WIDE_U32),
        collapse(SUB_U128),
        collapse(ADD_U128),
        collapse(MUL_WIDE_U64),
        collapse(MAD_WIDE_U64),
    );
    let functions = sim_intrinsics::asm_functions();
    for (inst, text) in calls {
        let unknown = || format!("the simulator cannot run libdevice's inline PTX `{text}`");
        // The call's arguments (its last operand is the callee), each of `bits` bits.
        let args = |n: u32, bits: u32| -> Result<Vec<IntValue<'ctx>>, String> {
            if inst.get_num_operands() != n + 1 {
                return Err(unknown());
            }
            (0..n)
                .map(|k| match inst.get_operand(k).and_then(|o| o.value()) {
                    Some(inkwell::values::BasicValueEnum::IntValue(v))
                        if v.get_type().get_bit_width() == bits =>
                    {
                        Ok(v)
                    }
                    _ => Err(unknown()),
                })
                .collect()
        };
        // The asm's `{lo, hi}` result from a `2 * bits`-bit integer.
        let pair = |r: IntValue<'ctx>,
                    bits: u32|
         -> Result<inkwell::values::BasicValueEnum<'ctx>, String> {
            let half = cg.int_ty(bits);
            let ty = inst.get_type();
            if !ty.is_struct_type() {
                return Err(unknown());
            }
            let lo = err_str(b.build_int_truncate(r, half, "asm.lo"))?;
            let sh = r.get_type().const_int(bits as u64, false);
            let hi = err_str(b.build_right_shift(r, sh, false, "asm.h"))?;
            let hi = err_str(b.build_int_truncate(hi, half, "asm.hi"))?;
            let st = ty.into_struct_type();
            let s = err_str(b.build_insert_value(st.get_undef(), lo, 0, "asm.s0"))?;
            let s = err_str(b.build_insert_value(s, hi, 1, "asm.s1"))?;
            Ok(s.as_basic_value_enum())
        };
        let widen = |v: IntValue<'ctx>, bits: u32| -> Result<IntValue<'ctx>, String> {
            err_str(b.build_int_z_extend(v, cg.int_ty(bits), "asm.w"))
        };
        // `lo | hi << 64` as an i128.
        let join = |lo: IntValue<'ctx>, hi: IntValue<'ctx>| -> Result<IntValue<'ctx>, String> {
            let (lo, hi) = (widen(lo, 128)?, widen(hi, 128)?);
            let sh = cg.ctx.i128_type().const_int(64, false);
            let hi = err_str(b.build_left_shift(hi, sh, "asm.sh"))?;
            err_str(b.build_or(lo, hi, "asm.j"))
        };
        b.position_before(&inst);
        let value: inkwell::values::BasicValueEnum =
            if let Some(&(_, symbol, _, sig)) = functions.iter().find(|f| f.0 == text) {
                host_call(cg, inst, symbol, sig).ok_or_else(unknown)??
            } else if text == mad {
                let a = args(3, 32)?;
                let (x, y, c) = (widen(a[0], 64)?, widen(a[1], 64)?, widen(a[2], 64)?);
                let r = err_str(b.build_int_mul(x, y, "mad.m"))?;
                pair(err_str(b.build_int_add(r, c, "mad"))?, 32)?
            } else if text == sub {
                let a = args(4, 64)?;
                let r = err_str(b.build_int_sub(join(a[0], a[1])?, join(a[2], a[3])?, "sub128"))?;
                pair(r, 64)?
            } else if text == add {
                let a = args(4, 64)?;
                let r = err_str(b.build_int_add(join(a[0], a[1])?, join(a[2], a[3])?, "add128"))?;
                pair(r, 64)?
            } else if text == mul {
                let a = args(2, 64)?;
                let r = err_str(b.build_int_mul(widen(a[0], 128)?, widen(a[1], 128)?, "mul128"))?;
                pair(r, 64)?
            } else if text == mad64 {
                let a = args(3, 64)?;
                let r = err_str(b.build_int_mul(widen(a[0], 128)?, widen(a[1], 128)?, "mad128.m"))?;
                pair(
                    err_str(b.build_int_add(r, widen(a[2], 128)?, "mad128"))?,
                    64,
                )?
            } else {
                return Err(unknown());
            };
        // SAFETY: both are live values of the same type; the call has no uses left after.
        unsafe {
            llvm_sys::core::LLVMReplaceAllUsesWith(inst.as_value_ref(), value.as_value_ref())
        };
        inst.erase_from_basic_block();
    }
    Ok(())
}

/// The call of host function `symbol` replacing inline-asm call `inst`, when the call's
/// argument and result types are `sig` (`f`: `f32`, `d`: `f64`, `i`: `i32`; arguments, `>`,
/// result); `None` when they are not.
fn host_call<'ctx>(
    cg: &Cg<'ctx>,
    inst: inkwell::values::InstructionValue<'ctx>,
    symbol: &str,
    sig: &str,
) -> Option<Result<inkwell::values::BasicValueEnum<'ctx>, String>> {
    use inkwell::types::{AnyType, AnyTypeEnum, BasicType, BasicTypeEnum};
    let code = |t: AnyTypeEnum<'ctx>| -> char {
        match t {
            AnyTypeEnum::FloatType(f) if f == cg.ctx.f32_type() => 'f',
            AnyTypeEnum::FloatType(f) if f == cg.ctx.f64_type() => 'd',
            AnyTypeEnum::IntType(i) if i.get_bit_width() == 32 => 'i',
            _ => '?',
        }
    };
    let n = inst.get_num_operands().checked_sub(1)?;
    let mut args = Vec::with_capacity(n as usize);
    let mut got = String::new();
    for k in 0..n {
        let v = inst.get_operand(k)?.value()?;
        got.push(code(v.get_type().as_any_type_enum()));
        args.push(v);
    }
    got.push('>');
    got.push(code(inst.get_type()));
    if got != sig {
        return None;
    }
    let params: Vec<BasicMetadataTypeEnum> = args.iter().map(|a| a.get_type().into()).collect();
    let ret = BasicTypeEnum::try_from(inst.get_type()).ok()?;
    let hook = cg.module.get_function(symbol).unwrap_or_else(|| {
        cg.module
            .add_function(symbol, ret.fn_type(&params, false), Some(Linkage::External))
    });
    let args: Vec<BasicMetadataValueEnum> = args.into_iter().map(Into::into).collect();
    Some(
        err_str(cg.b.build_call(hook, &args, "asm.call")).and_then(|c| {
            c.try_as_basic_value()
                .basic()
                .ok_or_else(|| format!("{symbol} returned nothing"))
        }),
    )
}

fn err_str<T>(r: Result<T, inkwell::builder::BuilderError>) -> Result<T, String> {
    r.map_err(|e| e.to_string())
}
