//! Output fusions ([`Epilogue`]): a dot run by the blocked GEMM, or a convolution run by the
//! tiled kernel, with the fusion's elementwise epilogue (bias, activation, residual, scaling)
//! applied while the core's values are still in registers or in cache.
//!
//! The contract that makes this possible is the planner's: it absorbs a core into an epilogue
//! only where every read of the core is at the root's own index ([`crate::reach::Reach`]
//! `Identity`), so the epilogue reads each core element once, at the index it writes, and
//! never at another. Operands of the epilogue other than the core (a bias vector, a residual)
//! are read through the elemental generator at the same index, from memory.
//!
//! - Dots, with [`crate::gemm::GemmTarget::tile_epilogues`] (the default) and an epilogue that
//!   reads no other array as large as the core (see [`Kc::on_tiles`]): on the last `K`
//!   block of each register tile the GEMM hands the tile's final sums, rounded to the result
//!   type as they would be stored, to [`Kc::emit_tile`] instead of storing them to `C`; the
//!   epilogue computes the root's leaves at the tile's indices, with the core bound to the
//!   tile ([`Ext::Row`] over the tile buffer, which LLVM forwards from the registers, so the
//!   buffer usually disappears), and stores them. `C` is written once with final values and
//!   never read back. A full tile's rows are emitted lane by lane as straight-line code with
//!   every store after every value, which the SLP vectorizer turns into vector code on the
//!   accumulators; a partial tile runs loops. Whatever the epilogue holds, the code is the
//!   elemental generator's, so anything the block path emits the tile path emits too.
//! - Otherwise (convolutions, epilogues reading a residual, or the option off), each work item first runs the core kernel
//!   for that one item (its output block: a rectangle of GEMM rows and columns of one batch,
//!   [`crate::gemm::item_block`], or a tile of convolution output pixels, a contiguous range
//!   of the core's row-major result), then computes the root's leaves over that block with the
//!   core bound to the memory it was written to.
//!
//! Either way, when an output leaf has the core's element type the core writes straight into
//! it (a GEMM's partial sums between `K` blocks, or the whole block) and the epilogue
//! overwrites it in place; otherwise the core goes to a scratch buffer of its shape. Both
//! paths give the same bits: the epilogue sees the same rounded core value and runs the same
//! elemental code on it.
//!
//! Results do not depend on the thread count: an item's block is computed, then finished, by
//! the same code whatever the split.

use axle_ir::{InstId, Opcode};
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::cg::{numel, Val};
use crate::elemental::{arr_of, inst_leaves, Ext, Index};
use crate::error::R;
use crate::fused::Epilogue;
use crate::kernels::{Kc, GRAIN_ELEMS};
use crate::reach::dims as dims_of;

impl<'a, 'ctx> Kc<'a, 'ctx> {
    /// Emits an output fusion: per work item, the core's block, then the epilogue over it.
    /// `scratch` holds the GEMM's packing scratch (dots) and then the core's buffer when no
    /// output leaf holds it.
    pub(crate) fn emit_epilogue(
        &mut self,
        e: &Epilogue,
        scratch: &[PointerValue<'ctx>],
    ) -> R<(i64, i64)> {
        let m = self.m;
        let cg = self.cg();
        let b = &cg.b;
        let core = e.core;
        let ops = m.operands(core);
        let (lhs, rhs) = (
            self.g
                .bound_ptr(ops[0])
                .ok_or("the core's operand is not in memory")?,
            self.g
                .bound_ptr(ops[1])
                .ok_or("the core's operand is not in memory")?,
        );
        let c = match e.c_leaf {
            Some(l) => self.outs[l],
            None => *scratch
                .last()
                .ok_or("an epilogue without its core's scratch")?,
        };
        self.g.bind(core, Ext::Bufs(vec![c]));
        let dims = arr_of(m, core)?.dims.to_vec();
        let (start, end) = (self.start, self.end);
        let (items, grain) = match m.opcode(core) {
            Opcode::Dot if self.on_tiles(core) => {
                let geo = crate::gemm::gemm_geo(m, core, self.gemm).ok_or("dot is not a GEMM")?;
                let pack = *scratch.first().ok_or("gemm without scratch")?;
                let buf = crate::stream::entry_alloca(cg, geo.out_ty, geo.mr * geo.nr(), "tile")?;
                let mut finish = |t: &crate::gemm::Tile<'ctx>| self.emit_tile(&geo, &dims, core, t);
                crate::gemm::emit_gemm(
                    cg,
                    &geo,
                    lhs,
                    rhs,
                    c,
                    pack,
                    start,
                    end,
                    Some((buf, &mut finish)),
                )?;
                (geo.items(), geo.grain())
            }
            Opcode::Dot => {
                let geo = crate::gemm::gemm_geo(m, core, self.gemm).ok_or("dot is not a GEMM")?;
                let pack = *scratch.first().ok_or("gemm without scratch")?;
                let (mm, n) = (geo.m, geo.n);
                let whole_rows = geo.cb == 1;
                cg.for_range(start, end, |item| {
                    let next = b.build_int_nsw_add(item, cg.c64(1), "next")?;
                    crate::gemm::emit_gemm(cg, &geo, lhs, rhs, c, pack, item, next, None)?;
                    // The item's block: rows `i0..i1` and columns `j0..j1` of one batch.
                    let blk = crate::gemm::item_block(cg, &geo, item)?;
                    let off = b.build_int_nsw_mul(blk.batch, cg.c64(mm * n), "off")?;
                    let at = |i: IntValue<'ctx>, j: IntValue<'ctx>| -> R<IntValue<'ctx>> {
                        let r = b.build_int_nsw_mul(i, cg.c64(n), "r")?;
                        Ok(b.build_int_nsw_add(off, b.build_int_nsw_add(r, j, "rj")?, "at")?)
                    };
                    if whole_rows {
                        // Whole rows: one contiguous range.
                        let (lo, hi) = (at(blk.i0, cg.c64(0))?, at(blk.i1, cg.c64(0))?);
                        return self.emit_elements(&dims, lo, hi);
                    }
                    cg.for_range(blk.i0, blk.i1, |i| {
                        let (lo, hi) = (at(i, blk.j0)?, at(i, blk.j1)?);
                        self.emit_elements(&dims, lo, hi)
                    })
                })?;
                (geo.items(), geo.grain())
            }
            Opcode::Convolution => {
                let geo = crate::conv_fast::conv_fast(m, core).ok_or("not a tiled convolution")?;
                let npix = numel(&geo.pix_dims);
                let o = geo.o;
                cg.for_range(start, end, |item| {
                    let next = b.build_int_nsw_add(item, cg.c64(1), "next")?;
                    crate::conv_fast::emit_conv(cg, &geo, lhs, rhs, c, item, next)?;
                    // The item's output pixels, all features of each.
                    let p0 = b.build_int_nsw_mul(item, cg.c64(crate::conv_fast::MR), "p0")?;
                    let p1 = crate::gemm::min64(
                        cg,
                        b.build_int_nsw_add(p0, cg.c64(crate::conv_fast::MR), "p1")?,
                        cg.c64(npix),
                    )?;
                    let lo = b.build_int_nsw_mul(p0, cg.c64(o), "lo")?;
                    let hi = b.build_int_nsw_mul(p1, cg.c64(o), "hi")?;
                    self.emit_elements(&dims, lo, hi)
                })?;
                let per_item =
                    crate::conv_fast::MR * geo.o * geo.c * geo.k_sp.iter().product::<i64>();
                (geo.items(), (GRAIN_ELEMS * 64 / per_item.max(1)).max(1))
            }
            _ => return Err("an epilogue's core must be a dot or a convolution".into()),
        };
        self.g.unbind(core);
        Ok((items, grain))
    }

    /// Whether dot `core`'s epilogue runs on the GEMM's register tiles: when the target says
    /// so, unless the epilogue reads, besides the core, an array in memory as large as the
    /// core and more than one of its rows or columns (a residual, the weights an update step
    /// subtracts from). Read a tile at a time, `MR` short pieces of rows far apart, such an
    /// array costs more than writing `C` once saves: the weight updates of
    /// `mlp3_train_step_b256_w1024`, whose epilogue reads `w`, took 20% longer on tiles.
    fn on_tiles(&self, core: InstId) -> bool {
        let m = self.m;
        let Some(geo) = crate::gemm::gemm_geo(m, core, self.gemm) else {
            return false;
        };
        if !self.gemm.tile_epilogues {
            return false;
        }
        let size = numel(dims_of(m, core));
        let line = geo.m.max(geo.n);
        let mut seen = std::collections::HashSet::new();
        let mut stack = vec![self.root];
        while let Some(i) = stack.pop() {
            if i == core || !seen.insert(i) {
                continue;
            }
            if self.g.is_bound(i) || m.opcode(i) == Opcode::Constant {
                let n = numel(dims_of(m, i));
                if n >= size && n > line {
                    return false;
                }
                continue;
            }
            stack.extend_from_slice(m.operands(i));
        }
        true
    }

    /// The epilogue of one finished GEMM tile: the root's leaves at each of the tile's
    /// elements, the core read from the tile's buffer. A full tile (`MR x NR`) computes each
    /// row's `NR` elements as straight-line code, every value before any store, which LLVM's
    /// SLP vectorizer turns into vector code (a loop of constant length would be unrolled
    /// first, and its interleaved loads and stores, which may alias, would stay scalar); a
    /// partial one (at the right or bottom edge of `C`) runs a loop to its rows and columns,
    /// which the loop vectorizer takes.
    fn emit_tile(
        &mut self,
        geo: &crate::gemm::GemmGeo,
        dims: &[i64],
        core: InstId,
        t: &crate::gemm::Tile<'ctx>,
    ) -> R<()> {
        let cg = self.cg();
        let b = &cg.b;
        let (mr, nr) = (geo.mr, geo.nr());
        let full_rows = b.build_int_compare(IntPredicate::EQ, t.rows, cg.c64(mr), "fr")?;
        let full_cols = b.build_int_compare(IntPredicate::EQ, t.cols, cg.c64(nr), "fc")?;
        let full = b.build_and(full_rows, full_cols, "full")?;
        let rows = |kc: &mut Self, rows: IntValue<'ctx>, cols: Cols<'ctx>| {
            cg.for_range(cg.c64(0), rows, |r| {
                let lo =
                    b.build_int_nsw_add(t.lin, b.build_int_nsw_mul(r, cg.c64(geo.n), "tr")?, "lo")?;
                let row = cg.gep(
                    cg.mem_ty(geo.out_ty)?,
                    t.buf,
                    b.build_int_nsw_mul(r, cg.c64(nr), "tb")?,
                )?;
                kc.g.push_scope();
                kc.g.bind(core, Ext::Row(row, lo));
                kc.emit_segment(dims, lo, cols)?;
                kc.g.pop_scope();
                Ok(())
            })
            .map(|_| Vec::new())
        };
        cg.if_else_with(
            self,
            full,
            |kc| rows(kc, cg.c64(mr), Cols::Straight(nr)),
            |kc| rows(kc, t.rows, Cols::Loop(t.cols)),
        )?;
        Ok(())
    }

    /// Computes and stores the root's leaves (of dimensions `dims`) at the linear offsets
    /// `cols` counts from `lo`, which lie in one row of the last dimension (or are one
    /// element).
    fn emit_segment(&mut self, dims: &[i64], lo: IntValue<'ctx>, cols: Cols<'ctx>) -> R<()> {
        let cg = self.cg();
        let b = &cg.b;
        let shapes = inst_leaves(self.m, self.root)?;
        let rank = dims.len();
        let flat = self.loop_is_flat(dims);
        // The segment's row, indexed once (unless every index is the linear one).
        let row_index = if flat {
            None
        } else {
            let last = dims[rank - 1];
            let row = b.build_int_unsigned_div(lo, cg.c64(last), "row")?;
            let j0 =
                b.build_int_nsw_sub(lo, b.build_int_nsw_mul(row, cg.c64(last), "rb")?, "j0")?;
            Some((self.g.index_linear(&dims[..rank - 1], row)?, j0))
        };
        // The root's leaves at element `j` of the segment, in a memo scope of their own.
        let at = |kc: &mut Self, j: IntValue<'ctx>| -> R<(IntValue<'ctx>, Vec<Val<'ctx>>)> {
            let lin = b.build_int_nsw_add(lo, j, "lin")?;
            kc.g.push_scope();
            let idx = match &row_index {
                None => kc.g.index_linear(dims, lin)?,
                Some((oi, j0)) => {
                    let mut multi = oi.multi.clone();
                    multi.push(b.build_int_nsw_add(*j0, j, "col")?);
                    Index {
                        id: kc.g.fresh_id(),
                        multi,
                        linear: lin,
                    }
                }
            };
            let v = kc.g.gen(kc.root, &idx)?;
            kc.g.pop_scope();
            Ok((lin, v))
        };
        match cols {
            Cols::Loop(n) => cg.for_range(cg.c64(0), n, |j| {
                let (lin, v) = at(self, j)?;
                self.store_leaves(&shapes, &v, lin)
            }),
            Cols::Straight(n) => {
                let mut vals = Vec::with_capacity(n as usize);
                for j in 0..n {
                    vals.push(at(self, cg.c64(j))?);
                }
                for (lin, v) in vals {
                    self.store_leaves(&shapes, &v, lin)?;
                }
                Ok(())
            }
        }
    }
}

/// How many elements of a tile row an epilogue computes, and how.
#[derive(Clone, Copy)]
enum Cols<'ctx> {
    /// A loop to this many.
    Loop(IntValue<'ctx>),
    /// This many, as straight-line code with every store after every value.
    Straight(i64),
}
