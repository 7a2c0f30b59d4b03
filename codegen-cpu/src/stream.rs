//! Streaming (non-temporal) stores for large outputs that a kernel writes once.
//!
//! A plain store to a line that is not in cache first reads the line from memory (the read for
//! ownership), so a kernel writing an output much larger than the last-level cache moves each
//! output byte twice. A non-temporal store skips that read and the cache: on an output larger
//! than the cache, which would be evicted before anything read it again, that is a third less
//! memory traffic for a kernel reading one input of the output's size.
//!
//! Row kernels ([`crate::row`]) that stream an output compute each row of it into a small
//! buffer on the stack, as they would into the output, then copy the row with
//! [`emit_stream_copy`]: a few plain stores up to the first vector-aligned address of the
//! destination, aligned vector stores marked `!nontemporal` (LLVM's x86 back end emits
//! `vmovntps` and its kin for those), and plain stores for the rest. A kernel that streamed
//! ends with [`emit_sfence`], so its weakly ordered stores are visible before the runtime's
//! completion signal. (LLVM's loop vectorizer refuses `!nontemporal` on the scalar stores of a
//! loop, since their alignment is the element's, hence the explicit copy.)
//!
//! Flat elementwise loops do not stream (through the stack in chunks they ran slower than with
//! plain stores; `codegen-cpu/BENCH.md`, "Moved from module headers"): row kernels do.
//!
//! Which outputs stream: those of at least [`GemmTarget::stream_min`] bytes (by default half the
//! host's last-level cache, [`crate::CpuOptions::stream_min_bytes`] overrides it).
//!
//! Invariants: only x86 targets with SSE2 stream ([`can_stream`]; not ahead-of-time targets
//! whose features are unknown); the copy moves elements as integers of their memory size,
//! bit for bit, so any non-complex element type streams; results are the
//! same bits as with plain stores at any thread count (only the cache traffic differs).

use std::sync::OnceLock;

use axle_ir::ElementType;
use inkwell::values::{BasicValue, IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::cg::Cg;
use crate::error::R;
use crate::gemm::{min64, GemmTarget};

/// The host's last-level cache in bytes (the largest data or unified cache sysfs lists), or
/// 32 MiB when the system does not say.
fn last_level_cache() -> i64 {
    static SIZE: OnceLock<i64> = OnceLock::new();
    *SIZE.get_or_init(|| {
        let mut llc = 0;
        for idx in 0..8 {
            let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{idx}");
            let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
            let (Some(ty), Some(size)) = (read("type"), read("size")) else {
                continue;
            };
            if ty.trim() == "Instruction" {
                continue;
            }
            if let Some(bytes) = crate::gemm::parse_cache_size(size.trim()) {
                llc = llc.max(bytes);
            }
        }
        if llc == 0 {
            32 << 20
        } else {
            llc
        }
    })
}

/// The smallest output (in bytes) kernels of the host stream when the options do not say:
/// half the last-level cache. The kernel's input is then at least as large again in every
/// kernel that streams, so the output's start is evicted before the kernel ends anyway.
pub(crate) fn default_stream_min() -> i64 {
    last_level_cache() / 2
}

/// Whether target features `features` (LLVM's string) have the non-temporal vector stores and
/// the fence the streaming copy uses (x86 with SSE2).
pub(crate) fn can_stream(features: &str) -> bool {
    features.split(',').any(|f| f == "+sse2")
}

/// The vector width in bytes the streaming copy stores with, when a kernel of target `t`
/// streams an output of `bytes` bytes of element type `ty`: on targets that stream
/// ([`GemmTarget::stream_min`]), for non-complex types, from that size on.
pub(crate) fn stream_bytes(t: &GemmTarget, ty: ElementType, bytes: i64) -> Option<i64> {
    t.stream_min
        .filter(|&min| !ty.is_complex() && bytes >= min)
        .map(|_| crate::gemm::vector_bytes(&t.features))
}

/// Copies `n` elements of `ty` from `src` to `dst` (which do not overlap) with non-temporal
/// vector stores of `vbytes` bytes wherever `dst` is aligned to them, plain stores before the
/// first such address and after the last.
pub(crate) fn emit_stream_copy<'ctx>(
    cg: &Cg<'ctx>,
    ty: ElementType,
    vbytes: i64,
    dst: PointerValue<'ctx>,
    src: PointerValue<'ctx>,
    n: IntValue<'ctx>,
) -> R<()> {
    let b = &cg.b;
    let es = ty.byte_size() as i64;
    let ity = match es {
        1 => cg.ctx.i8_type(),
        2 => cg.ctx.i16_type(),
        4 => cg.ctx.i32_type(),
        8 => cg.ctx.i64_type(),
        _ => return Err(format!("no streaming copy of {es}-byte elements").into()),
    };
    let lanes = vbytes / es;
    let vty = ity.vec_type(lanes as u32);
    let scalar = |i: IntValue<'ctx>| -> R<()> {
        let v = b.build_load(ity, cg.gep(ity.into(), src, i)?, "sc.ld")?;
        if let Some(l) = v.as_instruction_value() {
            let _ = l.set_alignment(es as u32);
        }
        let s = b.build_store(cg.gep(ity.into(), dst, i)?, v)?;
        let _ = s.set_alignment(es as u32);
        Ok(())
    };
    // Elements before the first aligned address: all of them when `dst` is not even aligned
    // to its element (never for the runtime's buffers, but the copy must not assume it).
    let addr = b.build_ptr_to_int(dst, cg.i64(), "dst.addr")?;
    let mis = b.build_and(addr, cg.c64(vbytes - 1), "dst.mis")?;
    let gap = b.build_and(
        b.build_int_sub(cg.c64(vbytes), mis, "gap")?,
        cg.c64(vbytes - 1),
        "gap",
    )?;
    let odd = b.build_int_compare(
        IntPredicate::NE,
        b.build_and(addr, cg.c64(es - 1), "odd")?,
        cg.c64(0),
        "odd",
    )?;
    let head = b.build_int_unsigned_div(gap, cg.c64(es), "head")?;
    let head = b.build_select(odd, n, head, "head")?.into_int_value();
    let head = min64(cg, head, n)?;
    cg.for_range(cg.c64(0), head, scalar)?;
    let rest = b.build_int_nsw_sub(n, head, "rest")?;
    let vecs = b.build_int_signed_div(rest, cg.c64(lanes), "vecs")?;
    let nt = cg.ctx.get_kind_id("nontemporal");
    let one = cg
        .ctx
        .metadata_node(&[cg.ctx.i32_type().const_int(1, false).into()]);
    cg.for_range(cg.c64(0), vecs, |v| {
        let i = b.build_int_nsw_add(head, b.build_int_nsw_mul(v, cg.c64(lanes), "vi")?, "vi")?;
        let x = b.build_load(vty, cg.gep(ity.into(), src, i)?, "nt.ld")?;
        if let Some(l) = x.as_instruction_value() {
            let _ = l.set_alignment(es as u32);
        }
        let s = b.build_store(cg.gep(ity.into(), dst, i)?, x)?;
        let _ = s.set_alignment(vbytes as u32);
        s.set_metadata(one, nt)
            .map_err(|e| format!("nontemporal metadata: {e}"))?;
        Ok(())
    })?;
    let tail = b.build_int_nsw_add(
        head,
        b.build_int_nsw_mul(vecs, cg.c64(lanes), "tail")?,
        "tail",
    )?;
    cg.for_range(tail, n, scalar)
}

/// Orders the kernel's non-temporal stores before everything after it (x86's `sfence`).
pub(crate) fn emit_sfence(cg: &Cg<'_>) -> R<()> {
    let f = cg.intrinsic("llvm.x86.sse.sfence", &[])?;
    cg.b.build_call(f, &[], "")?;
    Ok(())
}

/// A buffer of `n` elements of `ty` on the stack, 64-byte aligned, allocated in the entry
/// block of the current function (so once per call, not once per loop iteration).
pub(crate) fn entry_alloca<'ctx>(
    cg: &Cg<'ctx>,
    ty: ElementType,
    n: i64,
    name: &str,
) -> R<PointerValue<'ctx>> {
    let mty = cg.mem_ty(ty)?;
    let entry = cg
        .cur_fn()?
        .get_first_basic_block()
        .ok_or("a kernel without an entry block")?;
    let eb = cg.ctx.create_builder();
    match entry.get_first_instruction() {
        Some(i) => eb.position_before(&i),
        None => eb.position_at_end(entry),
    }
    let p = eb.build_array_alloca(mty, cg.c64(n.max(1)), name)?;
    if let Some(i) = p.as_instruction() {
        let _ = i.set_alignment(64);
    }
    Ok(p)
}
