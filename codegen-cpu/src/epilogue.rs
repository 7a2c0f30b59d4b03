//! Output fusions ([`Epilogue`]): a dot run by the blocked GEMM, or a convolution run by the
//! tiled kernel, with the fusion's elementwise epilogue (bias, activation, residual, scaling)
//! applied to each block right after the block is finished, while it is still in cache.
//!
//! The hook is deliberately separate from the micro-kernels: each work item first runs the
//! core kernel for that one item (its output block: a rectangle of GEMM rows and columns of one
//! batch, [`crate::gemm::item_block`], or a tile of convolution output pixels, a contiguous
//! range of the core's row-major result), then computes the root's leaves over that block with
//! the core bound to the memory it was written to. When an output leaf has the core's element type the core writes straight into
//! it and the epilogue overwrites it in place (it reads the core only at the index it writes,
//! which the planner guarantees), so no scratch is needed; otherwise the core goes to a
//! scratch buffer of its shape.
//!
//! The contract the in-place overwrite rests on is the planner's: it absorbs a core into an
//! epilogue only where every read of the core is at the root's own index
//! ([`crate::reach::Reach`] `Identity`), so the epilogue reads each core element once, at the
//! index it writes, and never at another; its other operands (a bias vector, a residual) are
//! read through the elemental generator at that index, from memory.
//!
//! Results do not depend on the thread count: an item's block is computed, then finished, by
//! the same code whatever the split.
//!
//! Measured and not kept: applying the epilogue to each GEMM register tile on its last `K`
//! block instead, so `C` is written once and never re-read (branch `cpu16`, commits `a25aef3`
//! and `b15b688`: the tile's sums bound to the core, full tiles emitted lane by lane for the SLP
//! vectorizer, bit-identical to this path). Run time did not change beyond noise on
//! `mlp3_b256_w1024` and `mlp3_train_step_b256_w1024` (one thread, tiles over blocks 0.99 to
//! 1.00, as `matmul_1024`, which has no epilogue), `transformer_block_s512_d512` took 1% more
//! CPU time and a `[1024, 4096] x [4096, 4096]` bias and ReLU 2% more, while compiling took 9%
//! to 35% longer (32 lanes times 8 rows of scalar epilogue for LLVM to vectorize per kernel).
//! The block path's extra pass reads a block it has just written, mostly from cache, and the
//! epilogue's own arithmetic costs the same on either path. An epilogue reading another array
//! as large as the core does worse on tiles, which read it in short pieces of rows far apart:
//! the weight updates of `mlp3_train_step_b256_w1024` (`w - lr * dW`) took about 20% longer
//! each (`axle bench --profile`, one thread).

use axle_ir::Opcode;
use inkwell::values::{IntValue, PointerValue};

use crate::cg::numel;
use crate::elemental::{arr_of, Ext};
use crate::error::R;
use crate::fused::Epilogue;
use crate::kernels::{Kc, GRAIN_ELEMS};

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
        // A dot reads its operands through their views ([`crate::gemm::operand_view`]).
        let gemm = match m.opcode(core) {
            Opcode::Dot => Some(self.gemm_operands(core)?),
            _ => None,
        };
        let (lhs, rhs) = match &gemm {
            Some((_, [a, b])) => (*a, *b),
            None => {
                let ops = m.operands(core);
                (
                    self.g
                        .bound_ptr(ops[0])
                        .ok_or("the core's operand is not in memory")?,
                    self.g
                        .bound_ptr(ops[1])
                        .ok_or("the core's operand is not in memory")?,
                )
            }
        };
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
            Opcode::Dot => {
                let geo = gemm.ok_or("dot is not a GEMM")?.0;
                let pack = *scratch.first().ok_or("gemm without scratch")?;
                let (mm, n) = (geo.m, geo.n);
                let whole_rows = geo.cb == 1;
                cg.for_range(start, end, |item| {
                    let next = b.build_int_nsw_add(item, cg.c64(1), "next")?;
                    crate::gemm::emit_gemm(cg, &geo, lhs, rhs, c, pack, item, next)?;
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
}
