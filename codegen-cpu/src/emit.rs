//! The LLVM module of a program: one function per kernel and the entry point that runs the
//! thunks in order, with `while` and `conditional` as control flow.
//!
//! The entry point is `void NAME(void *const *params, void *const *outputs, void *temp,
//! const AxleRuntime *rt)`: one pointer per array leaf of the entry parameters and of the result,
//! the temporary block, and the runtime (`NULL` runs every kernel on the calling thread). A
//! kernel with enough work items is handed to `rt->parallel_for(rt, kernel, bufs, items,
//! grain)`, which may split `[0, items)` across threads. Runs of at least
//! [`crate::call_table::RUN_MIN`] consecutive kernel calls are tables that `axle.run` walks
//! ([`crate::call_table`]); other thunks, and shorter runs, are straight-line code.

use axle_ir::{AttrKey, AttrValue, ElementType, InstId, Module};
use inkwell::module::Linkage;
use inkwell::values::{FunctionValue, IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::call_table::{emit_run, Call, Frame, RUN_MIN};
use crate::cg::Cg;
use crate::error::R;
use crate::fused::inst_label;
use crate::kernels::kernel_type;
use crate::lower::{Bound, BufId, BufKind, Kernel, Program, Thunk};

struct Entry<'a, 'ctx> {
    cg: &'a Cg<'ctx>,
    m: &'a Module,
    prog: &'a Program,
    kernels: &'a [EntryKernel],
    next_kernel: usize,
    params: PointerValue<'ctx>,
    outputs: PointerValue<'ctx>,
    temp: PointerValue<'ctx>,
    rt: PointerValue<'ctx>,
    bufs_array: PointerValue<'ctx>,
    bufs_ty: inkwell::types::ArrayType<'ctx>,
    dispatch: FunctionValue<'ctx>,
    /// Whether the program makes collective calls: then every loop also stops when the run
    /// has failed (`axle_rt_failed`), so a failed collective ends the run in bounded time.
    /// Found when a loop first asks (a walk of the whole program, which each of a large
    /// program's many entry modules would otherwise repeat).
    collectives: std::cell::OnceCell<bool>,
}

/// Whether `thunks` make a collective host call, at any depth.
fn has_collectives(thunks: &[Thunk]) -> bool {
    thunks.iter().any(|t| match t {
        Thunk::HostCall(h) => matches!(h.call, crate::runtime::Call::Collective(_)),
        Thunk::While { cond, body, .. } => has_collectives(cond) || has_collectives(body),
        Thunk::Cond { branches, .. } => branches.iter().any(|(b, _)| has_collectives(b)),
        Thunk::Kernel(_) | Thunk::Copy { .. } => false,
    })
}

/// Thunks per function of the entry point.
pub(crate) const PART: usize = 32;

/// What the entry point knows of a kernel: its function's name (defined in another module or
/// this one; declared when first called), its work items and its grain.
pub(crate) struct EntryKernel {
    pub symbol: String,
    pub items: i64,
    pub grain: i64,
}

/// The name of the function running chunk `c` of the program's top-level thunks.
fn top_part(c: usize) -> String {
    format!("axle.top{c}")
}

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
    let kty = kernel_type(cg);
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

/// Emits the entry point `name` into `cg`'s module, calling `kernels` (one per kernel number,
/// in program order) with bind arrays of `max_bufs` pointers. A body longer than [`PART`]
/// thunks calls its chunks as external functions that [`build_top_parts`] defines.
pub(crate) fn build_entry(
    cg: &Cg,
    m: &Module,
    prog: &Program,
    name: &str,
    export: bool,
    kernels: &[EntryKernel],
    max_bufs: usize,
) -> R<()> {
    let linkage = if export {
        Linkage::External
    } else {
        Linkage::Internal
    };
    let mut e = Entry::new(cg, m, prog, kernels, max_bufs)?;
    e.enter(name, linkage)?;
    if prog.body.len() > PART {
        for c in 0..prog.body.len().div_ceil(PART) {
            let f = e.part_fn_type();
            let f = cg.module.get_function(&top_part(c)).unwrap_or_else(|| {
                cg.module
                    .add_function(&top_part(c), f, Some(Linkage::External))
            });
            e.call_part(f)?;
        }
    } else {
        e.thunks(&prog.body)?;
    }
    cg.b.build_return(None)?;
    Ok(())
}

/// Emits the functions of chunks `chunks` of the program's top-level thunks (see
/// [`build_entry`]), the first of whose kernels is kernel number `first_kernel`.
pub(crate) fn build_top_parts(
    cg: &Cg,
    m: &Module,
    prog: &Program,
    kernels: &[EntryKernel],
    max_bufs: usize,
    chunks: std::ops::Range<usize>,
    first_kernel: usize,
) -> R<()> {
    let mut e = Entry::new(cg, m, prog, kernels, max_bufs)?;
    e.next_kernel = first_kernel;
    for c in chunks {
        let end = (c * PART + PART).min(prog.body.len());
        e.part_fn(&prog.body[c * PART..end], &top_part(c), Linkage::External)?;
    }
    Ok(())
}

/// The readable function name of kernel number `number` (rooted at `k`'s origin), unique in
/// the program: what printed IR and ahead-of-time objects call it (JIT objects name kernels by
/// content, [`crate::kernel_cache`]).
pub(crate) fn kernel_symbol(m: &Module, k: &Kernel, number: usize) -> String {
    format!("k{number}.{}", sanitize(&inst_label(m, k.origin)))
}

/// Kernel `k`'s description, `kN.name (opcode)`.
pub(crate) fn kernel_label(m: &Module, k: &Kernel, number: usize) -> String {
    format!(
        "{} ({})",
        kernel_symbol(m, k, number),
        m.opcode(k.root).name()
    )
}

/// What kernel `k` computes, for profiles and traces: its kind, the instruction doing the work
/// (the first dot, convolution, reduction, scatter, sort, ... of a fusion, else its root) with
/// its operand and result shapes and dimension numbers, and the other operations fused with it.
pub(crate) fn kernel_detail(m: &Module, k: &Kernel) -> String {
    use axle_ir::Opcode::*;
    let insts: Vec<InstId> = match m.called_comps(k.origin).first() {
        Some(&c) if m.opcode(k.origin) == Fusion => m
            .root_reach(c)
            .into_iter()
            .filter(|&i| !matches!(m.opcode(i), Parameter | Constant))
            .collect(),
        _ => vec![k.origin],
    };
    let weight = |op: axle_ir::Opcode| match op {
        Dot | Convolution => 0,
        Reduce | ReduceWindow | Scatter | SelectAndScatter | Sort | Gather => 1,
        DynamicUpdateSlice | DynamicSlice | Fft => 2,
        _ => 3,
    };
    let core = insts
        .iter()
        .copied()
        .min_by_key(|&i| weight(m.opcode(i)))
        .unwrap_or(k.root);
    let shape = |i: InstId| axle_ir::printer::shape_to_string(m, m.shape_id(i), m.layout_id(i));
    let operands: Vec<String> = m.operands(core).iter().map(|&o| shape(o)).collect();
    let mut s = format!(
        "{}: {} {} -> {}",
        k.kind.name(),
        m.opcode(core).name(),
        operands.join(" x "),
        shape(core)
    );
    for key in [
        AttrKey::LhsBatchDims,
        AttrKey::LhsContractingDims,
        AttrKey::RhsBatchDims,
        AttrKey::RhsContractingDims,
        AttrKey::Dimensions,
    ] {
        if let Some(v) = m.ints_attr(core, &key) {
            let v: Vec<String> = v.iter().map(|d| d.to_string()).collect();
            s.push_str(&format!(", {}={{{}}}", key.name(), v.join(",")));
        }
    }
    if let Some(AttrValue::Window(w)) = m.attr(core, &AttrKey::Window) {
        s.push_str(", window=");
        s.push_str(&axle_ir::printer::format_window(w));
    }
    if let Some(AttrValue::DimLabels(d)) = m.attr(core, &AttrKey::DimLabels) {
        s.push_str(", dim_labels=");
        s.push_str(&axle_ir::printer::format_dim_labels(d));
    }
    // The other operations, by opcode, in order of first appearance.
    let mut others: Vec<(axle_ir::Opcode, usize)> = Vec::new();
    for &i in &insts {
        if i == core {
            continue;
        }
        let op = m.opcode(i);
        match others.iter_mut().find(|(o, _)| *o == op) {
            Some((_, n)) => *n += 1,
            None => others.push((op, 1)),
        }
    }
    if !others.is_empty() {
        let list: Vec<String> = others
            .iter()
            .map(|(o, n)| match n {
                1 => o.name().to_string(),
                n => format!("{} x{n}", o.name()),
            })
            .collect();
        s.push_str("; with ");
        s.push_str(&list.join(", "));
    }
    s
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
        let buf = &self.prog.bufs[b];
        let off = self.prog.offsets[b] as i64;
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

    /// `dst`'s bytes copied from `src`'s, from `offset` bytes into `src`.
    fn copy(&self, src: BufId, offset: u64, dst: BufId) -> R<()> {
        let (s, d) = (src, dst);
        if s == d && offset == 0 {
            return Ok(());
        }
        let bytes = self.prog.bufs[d].bytes;
        let (sp, dp) = (self.cg.byte_gep(self.buf(s)?, offset as i64)?, self.buf(d)?);
        self.cg.memcpy(dp, sp, bytes)
    }

    /// Emits a thunk list; long lists go into functions of at most [`PART`] thunks each, so
    /// no function grows with the program (LLVM's passes are superlinear in function size).
    fn thunks(&mut self, thunks: &[Thunk]) -> R<()> {
        if thunks.len() <= PART {
            return self.seq(thunks);
        }
        for chunk in thunks.chunks(PART) {
            self.part(chunk)?;
        }
        Ok(())
    }

    /// A state for emitting functions of the entry point into `cg`'s module (the dispatcher
    /// added); its function values are set by [`Entry::enter`].
    fn new(
        cg: &'a Cg<'ctx>,
        m: &'a Module,
        prog: &'a Program,
        kernels: &'a [EntryKernel],
        max_bufs: usize,
    ) -> R<Self> {
        let dispatch = emit_dispatch(cg)?;
        let null = cg.ptr().const_null();
        Ok(Entry {
            cg,
            m,
            prog,
            kernels,
            next_kernel: 0,
            params: null,
            outputs: null,
            temp: null,
            rt: null,
            bufs_array: null,
            bufs_ty: cg.ptr().array_type(max_bufs.max(1) as u32),
            dispatch,
            collectives: std::cell::OnceCell::new(),
        })
    }

    /// The type of the entry point and of its parts: `(params, outputs, temp, rt)`.
    fn part_fn_type(&self) -> inkwell::types::FunctionType<'ctx> {
        let ptr = self.cg.ptr();
        self.cg
            .ctx
            .void_type()
            .fn_type(&[ptr.into(), ptr.into(), ptr.into(), ptr.into()], false)
    }

    /// Adds function `name` of the entry point's type and positions the builder in its entry
    /// block, with its parameters and a new bind array as the current values.
    fn enter(&mut self, name: &str, linkage: Linkage) -> R<FunctionValue<'ctx>> {
        let cg = self.cg;
        let f = cg.add_fn(name, self.part_fn_type(), Some(linkage));
        let entry = cg.ctx.append_basic_block(f, "entry");
        cg.b.position_at_end(entry);
        let p = |i: u32| -> R<PointerValue<'ctx>> {
            Ok(f.get_nth_param(i)
                .ok_or("entry function without parameters")?
                .into_pointer_value())
        };
        self.params = p(0)?;
        self.outputs = p(1)?;
        self.temp = p(2)?;
        self.rt = p(3)?;
        self.bufs_array = cg.b.build_alloca(self.bufs_ty, "bufs")?;
        Ok(f)
    }

    /// Emits `chunk` as a function of its own (internal) and calls it.
    fn part(&mut self, chunk: &[Thunk]) -> R<()> {
        let name = format!("axle.part{}", self.next_kernel);
        let f = self.part_fn(chunk, &name, Linkage::Internal)?;
        self.call_part(f)
    }

    /// Emits `chunk` as function `name`, leaving the builder where it was.
    fn part_fn(&mut self, chunk: &[Thunk], name: &str, linkage: Linkage) -> R<FunctionValue<'ctx>> {
        let cg = self.cg;
        let here = cg.b.get_insert_block();
        let saved = (
            self.params,
            self.outputs,
            self.temp,
            self.rt,
            self.bufs_array,
        );
        let f = self.enter(name, linkage)?;
        f.add_attribute(
            inkwell::attributes::AttributeLoc::Function,
            cg.enum_attr("noinline"),
        );
        self.seq(chunk)?;
        cg.b.build_return(None)?;
        (
            self.params,
            self.outputs,
            self.temp,
            self.rt,
            self.bufs_array,
        ) = saved;
        if let Some(b) = here {
            cg.b.position_at_end(b);
        }
        Ok(f)
    }

    /// Calls part `f` with the current function's arguments.
    fn call_part(&mut self, f: FunctionValue<'ctx>) -> R<()> {
        self.cg.b.build_call(
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

    /// Kernel `id`'s function, declared in this module when first called.
    fn kernel_fn(&self, id: usize) -> R<FunctionValue<'ctx>> {
        let cg = self.cg;
        let k = self.kernels.get(id).ok_or("kernel number out of range")?;
        if let Some(f) = cg.module.get_function(&k.symbol) {
            return Ok(f);
        }
        Ok(cg
            .module
            .add_function(&k.symbol, kernel_type(cg), Some(Linkage::External)))
    }

    /// Emits `thunks` in order: runs of at least [`RUN_MIN`] kernel calls as tables
    /// ([`crate::call_table`]), everything else as code.
    fn seq(&mut self, thunks: &[Thunk]) -> R<()> {
        let mut i = 0;
        while i < thunks.len() {
            let run = thunks[i..]
                .iter()
                .take_while(|t| matches!(t, Thunk::Kernel(_)))
                .count();
            if run >= RUN_MIN {
                self.run(&thunks[i..i + run])?;
                i += run;
            } else {
                self.thunk(&thunks[i])?;
                i += 1;
            }
        }
        Ok(())
    }

    /// Emits a run of kernel thunks as one table and a call of its runner.
    fn run(&mut self, run: &[Thunk]) -> R<()> {
        let mut calls = Vec::with_capacity(run.len());
        for t in run {
            let Thunk::Kernel(k) = t else {
                return Err("a run of kernel calls holds another thunk".into());
            };
            let id = self.next_kernel;
            let e = self.kernels.get(id).ok_or("kernel number out of range")?;
            self.next_kernel += 1;
            if e.items == 0 {
                continue;
            }
            calls.push(Call {
                kernel: k,
                func: self.kernel_fn(id)?,
                items: e.items,
                grain: e.grain,
                id,
            });
        }
        if calls.is_empty() {
            return Ok(());
        }
        let frame = Frame {
            params: self.params,
            outputs: self.outputs,
            temp: self.temp,
            rt: self.rt,
        };
        emit_run(
            self.cg,
            self.m,
            self.prog,
            &calls,
            &frame,
            self.dispatch,
            self.bufs_ty.len() as usize,
        )
    }

    fn thunk(&mut self, t: &Thunk) -> R<()> {
        let cg = self.cg;
        match t {
            Thunk::Kernel(k) => {
                let id = self.next_kernel;
                let e = self.kernels.get(id).ok_or("kernel number out of range")?;
                self.next_kernel += 1;
                let (items, grain) = (e.items, e.grain);
                if items == 0 {
                    return Ok(());
                }
                for (i, bound) in k.bound().enumerate() {
                    let p = match bound {
                        Bound::Buf(b, 0) => self.buf(b)?,
                        // A GEMM operand read through a view that starts inside its buffer.
                        Bound::Buf(b, off) => {
                            cg.gep(cg.ctx.i8_type().into(), self.buf(b)?, cg.c64(off))?
                        }
                        // A lifted constant: a pointer to its value.
                        Bound::Lifted(c) => crate::elemental::const_leaf_global(cg, self.m, c, 0)?,
                    };
                    let slot = cg.gep(cg.ptr().into(), self.bufs_array, cg.c64(i as i64))?;
                    cg.b.build_store(slot, p)?;
                }
                let func = self.kernel_fn(id)?;
                self.call_kernel(func, items, grain, id)
            }
            Thunk::Copy { src, offset, dst } => self.copy(*src, *offset, *dst),
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
                    self.copy(s, 0, d)?;
                }
                let head = cg.block("while.cond")?;
                let bodyb = cg.block("while.body")?;
                let exit = cg.block("while.exit")?;
                cg.b.build_unconditional_branch(head)?;
                cg.b.position_at_end(head);
                self.thunks(cond)?;
                let pp = self.buf(*pred)?;
                let mut go = cg.load(ElementType::Pred, pp, cg.c64(0))?.into_int_value();
                if *self
                    .collectives
                    .get_or_init(|| has_collectives(&self.prog.body))
                {
                    let failed = self.failed_flag()?;
                    let ok = cg.b.build_not(failed, "ok")?;
                    go = cg.b.build_and(go, ok, "go")?;
                }
                cg.b.build_conditional_branch(go, bodyb, exit)?;
                cg.b.position_at_end(bodyb);
                self.thunks(body)?;
                for &(s, d) in copy_back {
                    self.copy(s, 0, d)?;
                }
                cg.b.build_unconditional_branch(head)?;
                cg.b.position_at_end(exit);
                Ok(())
            }
            Thunk::Cond { selector, branches } => {
                let sb = *selector;
                let sty = self.prog.bufs[sb].shape.ty;
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
                        self.copy(s, 0, d)?;
                    }
                    cg.b.build_unconditional_branch(done)?;
                }
                cg.b.position_at_end(done);
                Ok(())
            }
        }
    }

    /// `axle_rt_failed() != 0` as an `i1`: whether this run's collectives have failed.
    fn failed_flag(&self) -> R<IntValue<'ctx>> {
        let cg = self.cg;
        let name = "axle_rt_failed";
        let f = crate::host::runtime_function(cg, name, cg.ctx.i8_type().fn_type(&[], false));
        let v =
            cg.b.build_call(f, &[], "failed")?
                .try_as_basic_value()
                .basic()
                .ok_or("axle_rt_failed returns nothing")?
                .into_int_value();
        Ok(cg
            .b
            .build_int_compare(IntPredicate::NE, v, cg.ctx.i8_type().const_zero(), "failed")?)
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
