//! Runs of kernel calls as data: a run of consecutive kernel thunks in the entry point becomes
//! a constant table (per call: the kernel's function, its work items, grain and number, and
//! where each of its buffers lies) and one call of a small loop, `axle.run`, that binds each
//! call's buffers and hands the kernel to the dispatcher, as XLA's thunk sequence walks a list
//! of (kernel, buffer slices) instead of compiling a call per kernel. The entry point's machine
//! code then grows with the number of runs, not of kernel calls; a million-instruction graph
//! has some 170k kernel calls, which as straight-line calls were most of its LLVM time.
//!
//! The table of a run is three private constants of the entry module: `words` (`i64`), per call
//! `[buffers, items, grain, number]` then per buffer `[where, offset]`; `fns`, per call its
//! kernel's function; and `ptrs`, the constants' globals the calls read. `where` is
//! `kind | index << 2`: kind 0 the temporary block (index 0; the offset counts from the block's
//! start, the scratch arena included), 1 entry parameter `index`, 2 output `index`, 3 `ptrs[index]`.
//! A buffer's address is its base plus the offset.
//!
//! Invariants: the loop binds exactly the pointers, in the order, that the straight-line call
//! binds (both bind [`Kernel::bound`]) and calls the same dispatcher with the same arguments, so a run computes what the
//! calls it replaces compute, in the same order; the table depends only on the program, so the
//! code is the same at any thread count.

use std::collections::HashMap;

use axle_ir::{InstId, Module};
use inkwell::module::Linkage;
use inkwell::values::{FunctionValue, PointerValue};
use inkwell::IntPredicate;

use crate::buf::BufId;
use crate::cg::Cg;
use crate::error::R;
use crate::lower::{Bound, BufKind, Kernel, Program};

/// The fewest consecutive kernel calls made a table: below it the straight-line calls are
/// about as much code as the table's call and its constants.
pub(crate) const RUN_MIN: usize = 4;

/// The name of the loop that runs a table, one per module.
const RUNNER: &str = "axle.run";

/// Words of a call's header in `words`.
const HEADER: usize = 4;

/// One call of a run: the kernel, its function, work items and grain, and its number.
pub(crate) struct Call<'a, 'ctx> {
    pub kernel: &'a Kernel,
    pub func: FunctionValue<'ctx>,
    pub items: i64,
    pub grain: i64,
    pub id: usize,
}

/// The entry function's values a run reads.
pub(crate) struct Frame<'ctx> {
    pub params: PointerValue<'ctx>,
    pub outputs: PointerValue<'ctx>,
    pub temp: PointerValue<'ctx>,
    pub rt: PointerValue<'ctx>,
}

/// Where buffer `b` lies in a table: `(kind, index, offset)` as `where` and the offset word
/// encode them.
fn base(prog: &Program, b: BufId, consts: &mut Consts) -> (i64, i64, i64) {
    let off = prog.offsets[b] as i64;
    match &prog.bufs[b].kind {
        // The straight-line call reads parameters at their start whatever the offset.
        BufKind::Param(k) => (1, *k as i64, 0),
        BufKind::Output(k) => (2, *k as i64, off),
        BufKind::Const(id, k) => (3, consts.index(*id, *k), 0),
        BufKind::Temp => (0, 0, off),
        BufKind::Arena => (0, 0, prog.arena_base() as i64 + off),
    }
}

/// The constants' globals a table points at, each once, in order of first use.
#[derive(Default)]
struct Consts {
    at: HashMap<(InstId, u32), i64>,
    list: Vec<(InstId, u32)>,
}

impl Consts {
    fn index(&mut self, id: InstId, k: u32) -> i64 {
        *self.at.entry((id, k)).or_insert_with(|| {
            self.list.push((id, k));
            self.list.len() as i64 - 1
        })
    }
}

/// Emits the run `calls` at the builder's position: its table's constants, named after its
/// first call's number, and a call of the module's runner (emitted with the first run),
/// whose bind array holds `max_bufs` pointers.
pub(crate) fn emit_run<'ctx>(
    cg: &Cg<'ctx>,
    m: &Module,
    prog: &Program,
    calls: &[Call<'_, 'ctx>],
    frame: &Frame<'ctx>,
    dispatch: FunctionValue<'ctx>,
    max_bufs: usize,
) -> R<()> {
    let first = calls.first().ok_or("an empty run of kernel calls")?.id;
    let mut consts = Consts::default();
    let mut words: Vec<u64> = Vec::new();
    for c in calls {
        let k = c.kernel;
        let mut args: Vec<(i64, i64, i64)> = Vec::new();
        for bound in k.bound() {
            args.push(match bound {
                Bound::Buf(b, view) => {
                    let (kind, index, off) = base(prog, b, &mut consts);
                    (kind, index, off + view)
                }
                Bound::Lifted(c) => (3, consts.index(c, 0), 0),
            });
        }
        if args.len() > max_bufs.max(1) {
            return Err("a kernel binds more buffers than the entry point's bind array".into());
        }
        words.extend([
            args.len() as u64,
            c.items as u64,
            c.grain as u64,
            c.id as u64,
        ]);
        for (kind, index, off) in args {
            words.push((kind | index << 2) as u64);
            words.push(off as u64);
        }
    }
    let ptr = cg.ptr();
    let global = |name: String, v: inkwell::values::BasicValueEnum<'ctx>| {
        let g = cg.module.add_global(v.get_type(), None, &name);
        g.set_initializer(&v);
        g.set_constant(true);
        g.set_linkage(Linkage::Private);
        g.as_pointer_value()
    };
    let words = global(
        format!("axle.run{first}.words"),
        cg.i64()
            .const_array(
                &words
                    .iter()
                    .map(|&w| cg.i64().const_int(w, false))
                    .collect::<Vec<_>>(),
            )
            .into(),
    );
    let fns: Vec<PointerValue> = calls
        .iter()
        .map(|c| c.func.as_global_value().as_pointer_value())
        .collect();
    let fns = global(format!("axle.run{first}.fns"), ptr.const_array(&fns).into());
    let ptrs = if consts.list.is_empty() {
        ptr.const_null()
    } else {
        let list = consts
            .list
            .iter()
            .map(|&(id, k)| crate::elemental::const_leaf_global(cg, m, id, k))
            .collect::<R<Vec<_>>>()?;
        global(
            format!("axle.run{first}.ptrs"),
            ptr.const_array(&list).into(),
        )
    };
    let runner = runner(cg, dispatch, max_bufs)?;
    cg.b.build_call(
        runner,
        &[
            frame.params.into(),
            frame.outputs.into(),
            frame.temp.into(),
            frame.rt.into(),
            words.into(),
            fns.into(),
            ptrs.into(),
            cg.c64(calls.len() as i64).into(),
        ],
        "",
    )?;
    Ok(())
}

/// The module's runner `axle.run(params, outputs, temp, rt, words, fns, ptrs, calls)`, emitted
/// when first asked for (the builder left where it was).
fn runner<'ctx>(
    cg: &Cg<'ctx>,
    dispatch: FunctionValue<'ctx>,
    max_bufs: usize,
) -> R<FunctionValue<'ctx>> {
    if let Some(f) = cg.module.get_function(RUNNER) {
        return Ok(f);
    }
    let here = cg.b.get_insert_block();
    let (ptr, i64t) = (cg.ptr(), cg.i64());
    let fty = cg.ctx.void_type().fn_type(
        &[
            ptr.into(),
            ptr.into(),
            ptr.into(),
            ptr.into(),
            ptr.into(),
            ptr.into(),
            ptr.into(),
            i64t.into(),
        ],
        false,
    );
    let f = cg.add_fn(RUNNER, fty, Some(Linkage::Internal));
    f.add_attribute(
        inkwell::attributes::AttributeLoc::Function,
        cg.enum_attr("noinline"),
    );
    let p = |i: u32| -> R<inkwell::values::BasicValueEnum<'ctx>> {
        f.get_nth_param(i)
            .ok_or_else(|| "runner without parameters".into())
    };
    let (params, outputs, temp, rt) = (
        p(0)?.into_pointer_value(),
        p(1)?.into_pointer_value(),
        p(2)?.into_pointer_value(),
        p(3)?.into_pointer_value(),
    );
    let (words, fns, ptrs, n) = (
        p(4)?.into_pointer_value(),
        p(5)?.into_pointer_value(),
        p(6)?.into_pointer_value(),
        p(7)?.into_int_value(),
    );
    let entry = cg.ctx.append_basic_block(f, "entry");
    let call = cg.ctx.append_basic_block(f, "call");
    let arg = cg.ctx.append_basic_block(f, "arg");
    let go = cg.ctx.append_basic_block(f, "go");
    let exit = cg.ctx.append_basic_block(f, "exit");
    cg.b.position_at_end(entry);
    let bufs =
        cg.b.build_alloca(ptr.array_type(max_bufs.max(1) as u32), "bufs")?;
    // The temporary block's address as a one-entry table, so every kind is a table's entry.
    let tslot = cg.b.build_alloca(ptr, "temp")?;
    cg.b.build_store(tslot, temp)?;
    let any =
        cg.b.build_int_compare(IntPredicate::SGT, n, cg.c64(0), "any")?;
    cg.b.build_conditional_branch(any, call, exit)?;

    // One call: its header, then its buffers.
    cg.b.position_at_end(call);
    let r = cg.b.build_phi(i64t, "r")?;
    let w = cg.b.build_phi(i64t, "w")?;
    let (rv, wv) = (
        r.as_basic_value().into_int_value(),
        w.as_basic_value().into_int_value(),
    );
    let word = |at: inkwell::values::IntValue<'ctx>, name: &str| -> R<_> {
        let slot = cg.gep(i64t.into(), words, at)?;
        Ok(cg.b.build_load(i64t, slot, name)?.into_int_value())
    };
    let nargs = word(wv, "nargs")?;
    let items = word(cg.b.build_int_add(wv, cg.c64(1), "")?, "items")?;
    let grain = word(cg.b.build_int_add(wv, cg.c64(2), "")?, "grain")?;
    let id = word(cg.b.build_int_add(wv, cg.c64(3), "")?, "id")?;
    let first_arg = cg.b.build_int_add(wv, cg.c64(HEADER as i64), "a0")?;
    let has =
        cg.b.build_int_compare(IntPredicate::SGT, nargs, cg.c64(0), "has")?;
    cg.b.build_conditional_branch(has, arg, go)?;

    // One buffer: base from its table, plus the offset, into the bind array.
    cg.b.position_at_end(arg);
    let a = cg.b.build_phi(i64t, "a")?;
    let av = a.as_basic_value().into_int_value();
    let two_a = cg.b.build_int_mul(av, cg.c64(2), "")?;
    let at = cg.b.build_int_add(first_arg, two_a, "")?;
    let place = word(at, "where")?;
    let off = word(cg.b.build_int_add(at, cg.c64(1), "")?, "off")?;
    let kind = cg.b.build_and(place, cg.c64(3), "kind")?;
    let index = cg.b.build_right_shift(place, cg.c64(2), false, "index")?;
    let is = |k: i64| {
        cg.b.build_int_compare(IntPredicate::EQ, kind, cg.c64(k), "is")
    };
    let table = cg.b.build_select(is(1)?, params, tslot, "t")?;
    let table =
        cg.b.build_select(is(2)?, outputs, table.into_pointer_value(), "t")?;
    let table =
        cg.b.build_select(is(3)?, ptrs, table.into_pointer_value(), "t")?;
    let slot = cg.gep(ptr.into(), table.into_pointer_value(), index)?;
    let basep = cg.b.build_load(ptr, slot, "base")?.into_pointer_value();
    // SAFETY: the offset is within the buffer the base starts.
    let p = unsafe { cg.b.build_gep(cg.i8(), basep, &[off], "p")? };
    let dst = cg.gep(ptr.into(), bufs, av)?;
    cg.b.build_store(dst, p)?;
    let a1 = cg.b.build_int_add(av, cg.c64(1), "a1")?;
    let more =
        cg.b.build_int_compare(IntPredicate::SLT, a1, nargs, "more")?;
    cg.b.build_conditional_branch(more, arg, go)?;
    a.add_incoming(&[(&cg.c64(0), call), (&a1, arg)]);

    // The kernel, through the dispatcher, then the next call.
    cg.b.position_at_end(go);
    let fslot = cg.gep(ptr.into(), fns, rv)?;
    let func = cg.b.build_load(ptr, fslot, "kernel")?;
    cg.b.build_call(
        dispatch,
        &[
            rt.into(),
            func.into(),
            bufs.into(),
            items.into(),
            grain.into(),
            id.into(),
        ],
        "",
    )?;
    let r1 = cg.b.build_int_add(rv, cg.c64(1), "r1")?;
    let two_n = cg.b.build_int_mul(nargs, cg.c64(2), "")?;
    let w1 = cg.b.build_int_add(first_arg, two_n, "w1")?;
    let again = cg.b.build_int_compare(IntPredicate::SLT, r1, n, "again")?;
    cg.b.build_conditional_branch(again, call, exit)?;
    r.add_incoming(&[(&cg.c64(0), entry), (&r1, go)]);
    w.add_incoming(&[(&cg.c64(0), entry), (&w1, go)]);

    cg.b.position_at_end(exit);
    cg.b.build_return(None)?;
    if let Some(b) = here {
        cg.b.position_at_end(b);
    }
    Ok(f)
}
