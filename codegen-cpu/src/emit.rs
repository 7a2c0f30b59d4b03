//! The LLVM module of a program: one function per kernel and the entry point that runs the
//! thunks in order, with `while` and `conditional` as control flow.
//!
//! The entry point is `void NAME(void *const *params, void *const *outputs, void *temp,
//! const AxleRuntime *rt)`: one pointer per array leaf of the entry parameters and of the result,
//! the temporary block, and the runtime (`NULL` runs every kernel on the calling thread). A
//! kernel with enough work items is handed to `rt->parallel_for(rt, kernel, bufs, items,
//! grain)`, which may split `[0, items)` across threads.

use std::collections::HashMap;

use axle_ir::{ElementType, Module};
use inkwell::module::Linkage;
use inkwell::values::{FunctionValue, IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::cg::Cg;
use crate::error::R;
use crate::fused::inst_label;
use crate::kernels::{attribute, emit_kernel, Emitted};
use crate::lower::{BufId, BufKind, Program, Thunk};
use crate::signature::kernel_signature;

struct Entry<'a, 'ctx> {
    cg: &'a Cg<'ctx>,
    m: &'a Module,
    prog: &'a Program,
    kernels: Vec<Emitted<'ctx>>,
    next_kernel: usize,
    params: PointerValue<'ctx>,
    outputs: PointerValue<'ctx>,
    temp: PointerValue<'ctx>,
    rt: PointerValue<'ctx>,
    bufs_array: PointerValue<'ctx>,
    bufs_ty: inkwell::types::ArrayType<'ctx>,
    dispatch: FunctionValue<'ctx>,
    parts: usize,
}

/// Thunks per function of the entry point.
const PART: usize = 32;

/// Emits `dispatch(rt, kernel, bufs, items, grain, id)`: traces the kernel when the runtime
/// asks, hands it to `rt->parallel_for` when there is a runtime and enough work, and otherwise
/// calls it on this thread.
fn emit_dispatch<'ctx>(cg: &Cg<'ctx>) -> R<FunctionValue<'ctx>> {
    let ptr = cg.ptr();
    let i64t = cg.i64();
    let fty = cg.ctx.void_type().fn_type(
        &[
            ptr.into(),
            ptr.into(),
            ptr.into(),
            i64t.into(),
            i64t.into(),
            i64t.into(),
        ],
        false,
    );
    let f = cg.add_fn("axle.dispatch", fty, Some(Linkage::Internal));
    f.add_attribute(
        inkwell::attributes::AttributeLoc::Function,
        cg.enum_attr("noinline"),
    );
    let entry = cg.ctx.append_basic_block(f, "entry");
    cg.b.position_at_end(entry);
    let arg = |i: u32| f.get_nth_param(i).ok_or("dispatch without parameters");
    let rt = arg(0)?.into_pointer_value();
    let kernel = arg(1)?.into_pointer_value();
    let bufs = arg(2)?.into_pointer_value();
    let items = arg(3)?.into_int_value();
    let grain = arg(4)?.into_int_value();
    let id = arg(5)?.into_int_value();
    let kty = cg
        .ctx
        .void_type()
        .fn_type(&[ptr.into(), i64t.into(), i64t.into()], false);
    let tty = cg
        .ctx
        .void_type()
        .fn_type(&[ptr.into(), i64t.into(), i64t.into()], false);
    let has_rt = cg.b.build_is_not_null(rt, "has_rt")?;
    let trace = |phase: i64| -> R<()> {
        cg.if_then(has_rt, || {
            let slot = cg.byte_gep(rt, 16)?;
            let tf = cg.b.build_load(ptr, slot, "trace")?.into_pointer_value();
            let has = cg.b.build_is_not_null(tf, "has_trace")?;
            cg.if_then(has, || {
                cg.b.build_indirect_call(
                    tty,
                    tf,
                    &[rt.into(), id.into(), cg.c64(phase).into()],
                    "",
                )?;
                Ok(())
            })
        })
    };
    trace(0)?;
    let twice = cg.b.build_int_nsw_mul(grain, cg.c64(2), "twice")?;
    let enough =
        cg.b.build_int_compare(IntPredicate::SGE, items, twice, "enough")?;
    let par = cg.b.build_and(has_rt, enough, "par")?;
    let pb = cg.block("par")?;
    let sb = cg.block("seq")?;
    let done = cg.block("done")?;
    cg.b.build_conditional_branch(par, pb, sb)?;
    cg.b.position_at_end(pb);
    let pf = cg.b.build_load(ptr, rt, "pf")?.into_pointer_value();
    let pfty = cg.ctx.void_type().fn_type(
        &[ptr.into(), ptr.into(), ptr.into(), i64t.into(), i64t.into()],
        false,
    );
    cg.b.build_indirect_call(
        pfty,
        pf,
        &[
            rt.into(),
            kernel.into(),
            bufs.into(),
            items.into(),
            grain.into(),
        ],
        "",
    )?;
    cg.b.build_unconditional_branch(done)?;
    cg.b.position_at_end(sb);
    cg.b.build_indirect_call(
        kty,
        kernel,
        &[bufs.into(), cg.c64(0).into(), items.into()],
        "",
    )?;
    cg.b.build_unconditional_branch(done)?;
    cg.b.position_at_end(done);
    trace(1)?;
    cg.b.build_return(None)?;
    Ok(f)
}

/// Emits every kernel and the entry point `name` into `cg`'s module; returns a description of
/// each kernel (`kN.name (opcode)`), in kernel number order.
pub(crate) fn build(
    cg: &Cg,
    m: &Module,
    prog: &Program,
    name: &str,
    export: bool,
) -> R<Vec<String>> {
    let mut kernels = Vec::new();
    let mut max_bufs = 1usize;
    emit_kernels(
        cg,
        m,
        &prog.body,
        &mut kernels,
        &mut max_bufs,
        &mut HashMap::new(),
    )?;
    let dispatch = emit_dispatch(cg)?;
    let ptr = cg.ptr();
    let fty = cg
        .ctx
        .void_type()
        .fn_type(&[ptr.into(), ptr.into(), ptr.into(), ptr.into()], false);
    let linkage = if export {
        Linkage::External
    } else {
        Linkage::Internal
    };
    let f = cg.add_fn(name, fty, Some(linkage));
    let entry = cg.ctx.append_basic_block(f, "entry");
    cg.b.position_at_end(entry);
    let p = |i: u32| -> R<PointerValue> {
        Ok(f.get_nth_param(i)
            .ok_or("entry without parameters")?
            .into_pointer_value())
    };
    let arr_ty = ptr.array_type(max_bufs as u32);
    let bufs_array = cg.b.build_alloca(arr_ty, "bufs")?;
    let mut e = Entry {
        cg,
        m,
        prog,
        kernels,
        next_kernel: 0,
        params: p(0)?,
        outputs: p(1)?,
        temp: p(2)?,
        rt: p(3)?,
        bufs_array,
        bufs_ty: arr_ty,
        dispatch,
        parts: 0,
    };
    e.thunks(&prog.body)?;
    cg.b.build_return(None)?;
    Ok(e.kernels.iter().map(|k| k.name.clone()).collect())
}

fn emit_kernels<'ctx>(
    cg: &Cg<'ctx>,
    m: &Module,
    thunks: &[Thunk],
    out: &mut Vec<Emitted<'ctx>>,
    max_bufs: &mut usize,
    seen: &mut HashMap<String, usize>,
) -> R<()> {
    for t in thunks {
        match t {
            Thunk::Kernel(k) => {
                let n = k.outputs.len()
                    + k.bindings.iter().map(|(_, b)| b.len()).sum::<usize>()
                    + k.scratch.len();
                *max_bufs = (*max_bufs).max(n);
                let name = format!("k{}.{}", out.len(), sanitize(&inst_label(m, k.origin)));
                let label = format!("{name} ({})", m.opcode(k.root).name());
                let sig = kernel_signature(m, k);
                if let Some(&first) = seen.get(&sig) {
                    // The same code as an earlier kernel: share its function.
                    let e = &out[first];
                    let shared = Emitted {
                        func: e.func,
                        name: label,
                        items: e.items,
                        grain: e.grain,
                    };
                    out.push(shared);
                    continue;
                }
                let mut e = emit_kernel(cg, m, k, &name).map_err(|f| attribute(m, k, f))?;
                e.name = label;
                seen.insert(sig, out.len());
                out.push(e);
            }
            Thunk::Copy { .. } => {}
            Thunk::HostCall(h) => *max_bufs = (*max_bufs).max(h.buffers().len()),
            Thunk::While { cond, body, .. } => {
                emit_kernels(cg, m, cond, out, max_bufs, seen)?;
                emit_kernels(cg, m, body, out, max_bufs, seen)?;
            }
            Thunk::Cond { branches, .. } => {
                for (b, _) in branches {
                    emit_kernels(cg, m, b, out, max_bufs, seen)?;
                }
            }
        }
    }
    Ok(())
}

/// A symbol-safe version of an instruction name.
fn sanitize(s: &str) -> String {
    s.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .take(40)
        .collect()
}

impl<'a, 'ctx> Entry<'a, 'ctx> {
    /// The address of buffer `b`.
    fn buf(&self, b: BufId) -> R<PointerValue<'ctx>> {
        let cg = self.cg;
        let buf = &self.prog.bufs[b as usize];
        let off = self.prog.offsets[b as usize] as i64;
        let slot = |base: PointerValue<'ctx>, k: u32| -> R<PointerValue<'ctx>> {
            let p = cg.gep(cg.ptr().into(), base, cg.c64(k as i64))?;
            Ok(cg.b.build_load(cg.ptr(), p, "arg")?.into_pointer_value())
        };
        match &buf.kind {
            BufKind::Param(k) => slot(self.params, *k),
            BufKind::Output(k) if off == 0 => slot(self.outputs, *k),
            BufKind::Output(k) => cg.byte_gep(slot(self.outputs, *k)?, off),
            BufKind::Const(id, k) => crate::elemental::const_leaf_global(cg, self.m, *id, *k),
            BufKind::Temp => cg.byte_gep(self.temp, off),
            BufKind::Arena => cg.byte_gep(self.temp, self.prog.arena_base() as i64 + off),
        }
    }

    fn copy(&self, src: BufId, dst: BufId) -> R<()> {
        let (s, d) = (src, dst);
        if s == d {
            return Ok(());
        }
        let bytes = self.prog.bufs[d as usize].bytes;
        let (sp, dp) = (self.buf(s)?, self.buf(d)?);
        self.cg.memcpy(dp, sp, bytes)
    }

    /// Emits a thunk list; long lists go into functions of at most [`PART`] thunks each, so
    /// no function grows with the program (LLVM's passes are superlinear in function size).
    fn thunks(&mut self, thunks: &[Thunk]) -> R<()> {
        if thunks.len() <= PART {
            for t in thunks {
                self.thunk(t)?;
            }
            return Ok(());
        }
        for chunk in thunks.chunks(PART) {
            self.part(chunk)?;
        }
        Ok(())
    }

    /// Emits `chunk` as a function of its own and calls it.
    fn part(&mut self, chunk: &[Thunk]) -> R<()> {
        let cg = self.cg;
        let ptr = cg.ptr();
        let fty = cg
            .ctx
            .void_type()
            .fn_type(&[ptr.into(), ptr.into(), ptr.into(), ptr.into()], false);
        let f = cg.add_fn(
            &format!("axle.part{}", self.parts),
            fty,
            Some(Linkage::Internal),
        );
        self.parts += 1;
        f.add_attribute(
            inkwell::attributes::AttributeLoc::Function,
            cg.enum_attr("noinline"),
        );
        let here = cg.cur_block()?;
        let saved = (
            self.params,
            self.outputs,
            self.temp,
            self.rt,
            self.bufs_array,
        );
        let entry = cg.ctx.append_basic_block(f, "entry");
        cg.b.position_at_end(entry);
        let p = |i: u32| -> R<PointerValue<'ctx>> {
            Ok(f.get_nth_param(i)
                .ok_or("part without parameters")?
                .into_pointer_value())
        };
        self.params = p(0)?;
        self.outputs = p(1)?;
        self.temp = p(2)?;
        self.rt = p(3)?;
        self.bufs_array = cg.b.build_alloca(self.bufs_ty, "bufs")?;
        for t in chunk {
            self.thunk(t)?;
        }
        cg.b.build_return(None)?;
        (
            self.params,
            self.outputs,
            self.temp,
            self.rt,
            self.bufs_array,
        ) = saved;
        cg.b.position_at_end(here);
        cg.b.build_call(
            f,
            &[
                self.params.into(),
                self.outputs.into(),
                self.temp.into(),
                self.rt.into(),
            ],
            "",
        )?;
        Ok(())
    }

    fn thunk(&mut self, t: &Thunk) -> R<()> {
        let cg = self.cg;
        match t {
            Thunk::Kernel(k) => {
                let id = self.next_kernel;
                let e = &self.kernels[id];
                self.next_kernel += 1;
                let (func, items, grain) = (e.func, e.items, e.grain);
                if items == 0 {
                    return Ok(());
                }
                let mut all: Vec<BufId> = k.outputs.clone();
                for (_, bs) in &k.bindings {
                    all.extend_from_slice(bs);
                }
                all.extend(k.scratch.iter());
                for (i, &b) in all.iter().enumerate() {
                    let p = self.buf(b)?;
                    let slot = cg.gep(cg.ptr().into(), self.bufs_array, cg.c64(i as i64))?;
                    cg.b.build_store(slot, p)?;
                }
                self.call_kernel(func, items, grain, id)
            }
            Thunk::Copy { src, dst } => self.copy(*src, *dst),
            Thunk::HostCall(h) => {
                let ptrs = h
                    .buffers()
                    .into_iter()
                    .map(|b| self.buf(b))
                    .collect::<R<Vec<_>>>()?;
                crate::host::emit(cg, h, &ptrs, self.bufs_array)
            }
            Thunk::While {
                copy_in,
                cond,
                pred,
                body,
                copy_back,
            } => {
                for &(s, d) in copy_in {
                    self.copy(s, d)?;
                }
                let head = cg.block("while.cond")?;
                let bodyb = cg.block("while.body")?;
                let exit = cg.block("while.exit")?;
                cg.b.build_unconditional_branch(head)?;
                cg.b.position_at_end(head);
                self.thunks(cond)?;
                let pp = self.buf(*pred)?;
                let go = cg.load(ElementType::Pred, pp, cg.c64(0))?.into_int_value();
                cg.b.build_conditional_branch(go, bodyb, exit)?;
                cg.b.position_at_end(bodyb);
                self.thunks(body)?;
                for &(s, d) in copy_back {
                    self.copy(s, d)?;
                }
                cg.b.build_unconditional_branch(head)?;
                cg.b.position_at_end(exit);
                Ok(())
            }
            Thunk::Cond { selector, branches } => {
                let sb = *selector;
                let sty = self.prog.bufs[sb as usize].shape.ty;
                let sp = self.buf(sb)?;
                let n = branches.len() as i64;
                let k: IntValue = if sty == ElementType::Pred {
                    let v = cg.load(sty, sp, cg.c64(0))?.into_int_value();
                    // True runs the first branch.
                    cg.b.build_select(v, cg.c64(0), cg.c64(1), "k")?
                        .into_int_value()
                } else if sty.is_int() {
                    let v = cg.load(sty, sp, cg.c64(0))?;
                    let v = cg.b.build_int_cast_sign_flag(
                        v.into_int_value(),
                        cg.i64(),
                        sty.is_signed_int(),
                        "k",
                    )?;
                    let bad_lo =
                        cg.b.build_int_compare(IntPredicate::SLT, v, cg.c64(0), "lo")?;
                    let bad_hi =
                        cg.b.build_int_compare(IntPredicate::SGE, v, cg.c64(n), "hi")?;
                    let bad = cg.b.build_or(bad_lo, bad_hi, "bad")?;
                    // An out-of-range index runs the last branch.
                    cg.b.build_select(bad, cg.c64(n - 1), v, "k")?
                        .into_int_value()
                } else {
                    return Err("conditional selector must be pred or an integer".into());
                };
                let done = cg.block("cond.done")?;
                let blocks: Vec<_> = (0..branches.len())
                    .map(|i| cg.block(&format!("branch{i}")))
                    .collect::<R<_>>()?;
                let cases: Vec<_> = blocks
                    .iter()
                    .enumerate()
                    .map(|(i, &b)| (cg.c64(i as i64), b))
                    .collect();
                cg.b.build_switch(k, blocks[blocks.len() - 1], &cases)?;
                for ((thunks, copies), &bb) in branches.iter().zip(&blocks) {
                    cg.b.position_at_end(bb);
                    self.thunks(thunks)?;
                    for &(s, d) in copies {
                        self.copy(s, d)?;
                    }
                    cg.b.build_unconditional_branch(done)?;
                }
                cg.b.position_at_end(done);
                Ok(())
            }
        }
    }

    fn call_kernel(&self, func: FunctionValue<'ctx>, items: i64, grain: i64, id: usize) -> R<()> {
        let cg = self.cg;
        cg.b.build_call(
            self.dispatch,
            &[
                self.rt.into(),
                func.as_global_value().as_pointer_value().into(),
                self.bufs_array.into(),
                cg.c64(items).into(),
                cg.c64(grain).into(),
                cg.c64(id as i64).into(),
            ],
            "",
        )?;
        Ok(())
    }
}
