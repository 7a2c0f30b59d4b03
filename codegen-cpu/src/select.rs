//! Top-k by selection: a `topk` with a small `k` keeps the `k` best elements of each row seen
//! so far, in order, instead of sorting the whole row.
//!
//! Per row, element `p` is compared with the last of the kept elements (once `k` are kept);
//! when it comes before it, it is inserted by moving the kept elements that it comes before
//! one place down, the last one falling off. An element comes before a kept one only when it
//! is strictly greater (smaller with `largest=false`) in the total order, so among equal
//! elements the earlier index stays first: the kept elements are exactly the first `k` of the
//! stable sort the other paths compute, bit for bit. That holds because the total order is a
//! strict weak order; XLA's `TopK` custom call brings a comparator of its own, which need not
//! be one (a plain `compare GT` on floats with NaN is not), so it keeps the merge sort, the
//! evaluator's algorithm. The cost is one comparison per element plus at most `k` moves per
//! insertion (inputs already in order are the worst case), against `log2(len)` merge passes or
//! four radix passes over the whole row.
//!
//! Invariants: the kept elements live in the kernel's sort scratch, an `i32` index plane and a
//! value plane of `k` entries per row ([`crate::kernels::SortLayout`] for `k` elements, one half
//! per row, which is what [`crate::kernels::sort_scratch_bytes`] reserves when
//! [`crate::kernel_kind::topk_selects`]);
//! a row is computed by one item, so results do not depend on the thread count.

use axle_ir::ElementType;
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::cg::{bv, numel, Cg, Val};
use crate::error::R;
use crate::kernels::{Kc, RowFinish, RowLess, RowLoad, SortLayout};

impl<'a, 'ctx> Kc<'a, 'ctx> {
    /// Keeps the `k` first elements of each row (of `dims` along `d`) in the order `less` puts
    /// them, in the scratch planes, then calls `finish` with the row's coordinates and the
    /// planes (indices first).
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn select_rows(
        &mut self,
        dims: &[i64],
        d: usize,
        k: i64,
        ty: ElementType,
        scratch: PointerValue<'ctx>,
        load: &mut RowLoad<'_, 'a, 'ctx>,
        less: &mut RowLess<'_, 'a, 'ctx>,
        finish: &mut RowFinish<'_, 'a, 'ctx>,
    ) -> R<(i64, i64)> {
        let cg = self.cg();
        let len = dims[d];
        let row_dims = crate::cg::dims_without(dims, d);
        let rows = numel(&row_dims);
        if rows == 0 || len == 0 || k == 0 {
            return Ok((rows, 1));
        }
        let layout = SortLayout::new(&[ty], k);
        let i32t = cg.i32();
        let (start, end) = (self.start, self.end);
        let g = &mut self.g;
        cg.for_range(start, end, |row| {
            let b = &cg.b;
            g.push_scope();
            let ri = g.index_linear(&row_dims, row)?;
            let rm = ri.multi.clone();
            let off = b.build_int_nsw_mul(row, cg.c64(layout.half_bytes), "off")?;
            let idx = cg.gep(cg.i8().into(), scratch, off)?;
            let vals = cg.byte_gep(idx, layout.val_offsets[0])?;
            let ld = |j: IntValue<'ctx>| -> R<(Val<'ctx>, IntValue<'ctx>)> {
                let v = cg.load(ty, vals, j)?;
                let q = cg.gep(i32t.into(), idx, j)?;
                Ok((v, cg.b.build_load(i32t, q, "ix")?.into_int_value()))
            };
            let st = |j: IntValue<'ctx>, v: Val<'ctx>, i: IntValue<'ctx>| -> R<()> {
                cg.store(ty, vals, j, v)?;
                cg.b.build_store(cg.gep(i32t.into(), idx, j)?, i)?;
                Ok(())
            };
            cg.for_range(cg.c64(0), cg.c64(len), |p| {
                g.push_scope();
                let x = *load(g, &rm, p)?.first().ok_or("topk loads one value")?;
                g.pop_scope();
                let p32 = cg.b.build_int_truncate(p, i32t, "p32")?;
                // Kept so far: min(p, k). Once full, `x` enters only if it comes before the last.
                let full = b.build_int_compare(IntPredicate::SGE, p, cg.c64(k), "full")?;
                let enter = only_if(cg, full, true, || {
                    g.push_scope();
                    let (lv, li) = ld(cg.c64(k - 1))?;
                    let beats = less(g, &[x], &[lv], p32, li)?;
                    g.pop_scope();
                    Ok(beats)
                })?;
                let insert = cg.block("sel.insert")?;
                let done = cg.block("sel.done")?;
                b.build_conditional_branch(enter, insert, done)?;
                b.position_at_end(insert);
                // The slot `x` starts from: the first free one, or the last when full.
                let j0 = b
                    .build_select(full, cg.c64(k - 1), p, "j0")?
                    .into_int_value();
                let fin = cg.while_loop(
                    &[bv(j0)],
                    |s| {
                        let j = s[0].into_int_value();
                        let more = b.build_int_compare(IntPredicate::SGT, j, cg.c64(0), "more")?;
                        only_if(cg, more, false, || {
                            g.push_scope();
                            let jm1 = b.build_int_nsw_sub(j, cg.c64(1), "jm1")?;
                            let (yv, yi) = ld(jm1)?;
                            let l = less(g, &[x], &[yv], p32, yi)?;
                            g.pop_scope();
                            Ok(l)
                        })
                    },
                    |s| {
                        let j = s[0].into_int_value();
                        let jm1 = b.build_int_nsw_sub(j, cg.c64(1), "jm1")?;
                        let (yv, yi) = ld(jm1)?;
                        st(j, yv, yi)?;
                        Ok(vec![bv(jm1)])
                    },
                )?;
                st(fin[0].into_int_value(), x, p32)?;
                b.build_unconditional_branch(done)?;
                b.position_at_end(done);
                Ok(())
            })?;
            finish(g, &rm, idx, &[vals])?;
            g.pop_scope();
            Ok(())
        })?;
        Ok((rows, (crate::kernels::GRAIN_ELEMS / len).max(1)))
    }
}

/// `cond ? f() : otherwise`, with `f`'s code (a comparator call) run only when `cond` holds.
fn only_if<'ctx>(
    cg: &Cg<'ctx>,
    cond: IntValue<'ctx>,
    otherwise: bool,
    f: impl FnOnce() -> R<IntValue<'ctx>>,
) -> R<IntValue<'ctx>> {
    let b = &cg.b;
    let pre = cg.cur_block()?;
    let ask = cg.block("sel.ask")?;
    let join = cg.block("sel.join")?;
    b.build_conditional_branch(cond, ask, join)?;
    b.position_at_end(ask);
    let v = f()?;
    let ask_end = cg.cur_block()?;
    b.build_unconditional_branch(join)?;
    b.position_at_end(join);
    let phi = b.build_phi(cg.i1(), "sel.go")?;
    let skip = cg.i1().const_int(u64::from(otherwise), false);
    phi.add_incoming(&[(&skip, pre), (&v, ask_end)]);
    Ok(phi.as_basic_value().into_int_value())
}
