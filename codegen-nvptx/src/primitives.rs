//! The GPU primitives the shaped kernels are built from: the block and thread registers,
//! strided loop trip counts, kernel-private shared memory, the block barrier and the warp
//! butterfly shuffle.
//!
//! Invariants: `shfl.sync` is always called with the full mask (every lane of the warp must
//! reach it) and `bar.sync 0` by every thread of the block; callers keep that.

use axle_codegen_llvm::cg::{Cg, Val};
use axle_codegen_llvm::error::{Fail, R};
use inkwell::module::Linkage;
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{IntValue, PointerValue};
use inkwell::AddressSpace;

/// NVPTX's shared address space.
const SHARED: u16 = 3;

/// The block's thread index and the block's index, as `i64`.
pub(crate) fn registers<'ctx>(cg: &Cg<'ctx>) -> R<(IntValue<'ctx>, IntValue<'ctx>)> {
    let regs = cg
        .target
        .thread_registers()
        .ok_or("the target has no thread registers")?;
    let read = |name: &str| -> R<IntValue<'ctx>> {
        let f = cg.intrinsic(name, &[])?;
        let v = cg
            .call(f, &[])?
            .ok_or_else(|| format!("{name} returned nothing"))?
            .into_int_value();
        Ok(cg.b.build_int_z_extend(v, cg.i64(), "sreg")?)
    };
    Ok((read(regs.thread)?, read(regs.block)?))
}

/// The number of strided steps `start, start + step, ...` below `end` (`end >= 0`,
/// `0 <= start < step`).
pub(crate) fn trip_count<'ctx>(
    cg: &Cg<'ctx>,
    start: IntValue<'ctx>,
    end: IntValue<'ctx>,
    step: u64,
) -> R<IntValue<'ctx>> {
    let b = &cg.b;
    let t = b.build_int_nuw_add(end, cg.c64(step as i64 - 1), "trip.t")?;
    let t = b.build_int_sub(t, start, "trip.s")?;
    Ok(b.build_int_unsigned_div(t, cg.c64(step as i64), "trip")?)
}

/// A shared-memory array of `n` values of type `ty`, private to the kernel being emitted.
pub(crate) fn shared_array<'ctx>(
    cg: &Cg<'ctx>,
    ty: BasicTypeEnum<'ctx>,
    n: u32,
    name: &str,
) -> PointerValue<'ctx> {
    let arr = ty.array_type(n);
    let g = cg
        .module
        .add_global(arr, Some(AddressSpace::from(SHARED)), name);
    g.set_linkage(Linkage::Internal);
    g.set_initializer(&arr.get_undef());
    g.set_alignment(16);
    g.as_pointer_value()
}

/// `bar.sync 0`: every thread of the block waits for the others.
pub(crate) fn barrier(cg: &Cg<'_>) -> R<()> {
    let f = cg.intrinsic("llvm.nvvm.barrier0", &[])?;
    cg.call(f, &[])?;
    Ok(())
}

/// `v` from the lane whose index differs from this one's in the bits of `mask` (a butterfly
/// step, `shfl.sync.bfly.b32` with the full mask); wider values go through in 32-bit pieces.
pub(crate) fn shuffle_xor<'ctx>(cg: &Cg<'ctx>, v: Val<'ctx>, mask: u64) -> R<Val<'ctx>> {
    let b = &cg.b;
    let i32t = cg.i32();
    let shfl32 = |x: IntValue<'ctx>| -> R<IntValue<'ctx>> {
        let f = cg.intrinsic("llvm.nvvm.shfl.sync.bfly.i32", &[])?;
        let all = i32t.const_int(u32::MAX as u64, false);
        let r = cg
            .call(
                f,
                &[
                    all.into(),
                    x.into(),
                    i32t.const_int(mask, false).into(),
                    i32t.const_int(0x1f, false).into(),
                ],
            )?
            .ok_or("shfl.sync returned nothing")?;
        Ok(r.into_int_value())
    };
    let int = |x: IntValue<'ctx>| -> R<IntValue<'ctx>> {
        let w = x.get_type().get_bit_width();
        if w == 32 {
            shfl32(x)
        } else if w < 32 {
            let wide = b.build_int_z_extend(x, i32t, "sh.z")?;
            Ok(b.build_int_truncate(shfl32(wide)?, x.get_type(), "sh.t")?)
        } else if w == 64 {
            let lo = b.build_int_truncate(x, i32t, "sh.lo")?;
            let hi = b.build_right_shift(x, cg.i64().const_int(32, false), false, "sh.hi")?;
            let hi = b.build_int_truncate(hi, i32t, "sh.hi32")?;
            let (lo, hi) = (shfl32(lo)?, shfl32(hi)?);
            let lo = b.build_int_z_extend(lo, cg.i64(), "sh.lo64")?;
            let hi = b.build_int_z_extend(hi, cg.i64(), "sh.hi64")?;
            let hi = b.build_left_shift(hi, cg.i64().const_int(32, false), "sh.hish")?;
            Ok(b.build_or(lo, hi, "sh.64")?)
        } else {
            Err(format!("a {w}-bit value cannot go through a warp shuffle").into())
        }
    };
    Ok(match v {
        Val::IntValue(x) => int(x)?.into(),
        Val::FloatValue(x) => {
            let bits = if x.get_type() == cg.f64() { 64 } else { 32 };
            let it = cg.int_ty(bits);
            let xi = b.build_bit_cast(x, it, "sh.bits")?.into_int_value();
            b.build_bit_cast(int(xi)?, x.get_type(), "sh.f")?
        }
        Val::StructValue(s) => {
            let mut out = s.get_type().get_undef();
            for k in 0..s.get_type().count_fields() {
                let f = b
                    .build_extract_value(s, k, "sh.field")
                    .map_err(|e| Fail::Msg(e.to_string()))?;
                let f = shuffle_xor(cg, f, mask)?;
                out = b
                    .build_insert_value(out, f, k, "sh.ins")
                    .map_err(|e| Fail::Msg(e.to_string()))?
                    .into_struct_value();
            }
            out.into()
        }
        _ => return Err("a vector or array value cannot go through a warp shuffle".into()),
    })
}

/// The name of the function being emitted (shared arrays are named after their kernel).
pub(crate) fn kernel_name(cg: &Cg<'_>) -> R<String> {
    Ok(cg.cur_fn()?.get_name().to_string_lossy().into_owned())
}
