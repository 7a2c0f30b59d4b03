//! Output fusions ([`Epilogue`]): a dot run by the blocked GEMM, or a convolution run by the
//! tiled kernel, with the fusion's elementwise epilogue (bias, activation, residual, scaling)
//! applied while the core's values are still in registers or in cache.
//!
//! The contract both paths rest on is the planner's: it absorbs a core into an epilogue only
//! where every read of the core is at the root's own index ([`crate::reach::Reach`]
//! `Identity`), so the epilogue reads each core element once, at the index it writes, and never
//! at another. Its other operands (a bias vector, a residual) are read through the elemental
//! generator at that index, from memory.
//!
//! Where the epilogue runs ([`crate::CpuOptions::epilogues`]):
//! - Register epilogues (dots and `f32`/`f64` convolutions, the default,
//!   [`crate::Epilogues::Registers`], where [`crate::lane_epilogue::LanePlan`] admits every op
//!   of the epilogue and it reads no other array as large as the core, [`Kc::on_tiles`]): the
//!   GEMM on the last `K` block of each register tile, or the tiled convolution on each of
//!   its tiles, hands its accumulators, as they are, to [`Kc::emit_lane_tile`], which
//!   computes the root on each accumulator vector with the scalar path's own op functions
//!   and stores it to the output once with masked stores. The result is written once with
//!   final values, the core is never stored or read back, and no loop runs over the tile.
//! - Tile epilogues (dots, [`crate::Epilogues::Tiles`], with the same exclusion): on the last
//!   `K` block of each register tile the GEMM stores the tile's final sums, rounded to the
//!   result type exactly as a store to `C` rounds them, to a tile buffer on the stack (one
//!   tile, `MR x NR`, in L1) instead of to `C`, and [`Kc::emit_tile`] runs the epilogue over
//!   it: a loop over the tile's rows (not unrolled) whose body computes the root's leaves on
//!   the row's columns in one loop with the core bound to the row of the buffer
//!   ([`Ext::Row`]), which the loop vectorizer turns into vector code. So `C` is written once
//!   with final values and never read back, and the epilogue is emitted once per kernel, as
//!   on the block path: its code does not grow with the tile.
//! - Block epilogues (epilogues reading a residual, epilogues the register path does not
//!   admit, narrow-float convolutions, or [`crate::Epilogues::Blocks`], and for convolutions
//!   [`crate::Epilogues::Tiles`]): each work item first runs the core
//!   kernel for that one item (its output block: a rectangle of GEMM rows and columns of one
//!   batch, [`crate::gemm::item_block`], or a tile of convolution output pixels, a contiguous
//!   range of the core's row-major result), then computes the root's leaves over that block
//!   with the core bound to the memory it was written to.
//!
//! Either way, when an output leaf has the core's element type the core writes straight into
//! it (a GEMM's partial sums between `K` blocks, or the whole block) and the epilogue
//! overwrites it in place, which the contract above allows; otherwise the core goes to a
//! scratch buffer of its shape. All paths give the same bits: the epilogue sees the same
//! rounded core value and runs the same op code on it (on vectors in registers, through
//! [`axle_codegen_llvm::lanes`]). Results do not depend on the thread count: an element is
//! finished by the same code whatever the split.
//!
//! Which path runs which epilogue (the figures behind each rule are in `codegen-cpu/BENCH.md`,
//! "Moved from module headers"):
//! - Registers are the default: on the programs that have such epilogues they run as fast as
//!   blocks, with the core never stored or read back.
//! - An epilogue reading another array as large as the core (a residual, a weight update's
//!   `dW`) stays on blocks on every path: at a register or tile epilogue it would be read in
//!   `MR` short row pieces per tile, far apart, while the block path reads it in long rows,
//!   once per work item, which the hardware prefetchers stream.
//! - Tiles are never the default: they run no faster than blocks (the block path's extra pass
//!   reads a block it has just written, mostly from L2, at full vector width over long rows,
//!   while a tile row is two vectors behind a loop entry and an alias check). The tile's loops
//!   carry `llvm.loop.unroll.disable`, so its code is emitted once per kernel and does not grow
//!   with the tile.

use std::collections::HashSet;

use axle_ir::{ElementType, InstId, Opcode};
use inkwell::values::{IntValue, PointerValue};

use crate::cg::{numel, NO_UNROLL};
use crate::elemental::{arr_of, Ext};
use crate::error::R;
use crate::fused::Epilogue;
use crate::gemm::{GemmGeo, TileEnd};
use crate::kernels::{Kc, GRAIN_ELEMS};
use crate::lane_epilogue::LanePlan;
use crate::reach::dims as dims_of;
use crate::Epilogues;

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
        // On the precompiled GEMM, the epilogue runs on each finished panel.
        let gemm = match m.opcode(core) {
            Opcode::Dot => {
                let (geo, views) = self.gemm_operands(core)?;
                Some((geo.for_library(self.gemm), views))
            }
            _ => None,
        };
        let library = matches!(&gemm, Some((g, _)) if g.library.is_some());
        let conv = match m.opcode(core) {
            Opcode::Convolution => {
                let geo = crate::conv_fast::conv_fast(m, core).ok_or("not a tiled convolution")?;
                Some(geo.for_target(self.gemm))
            }
            _ => None,
        };
        let library = library || matches!(&conv, Some(g) if g.library.is_some());
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
        // The core's register tile: the longest line of its result (rows or columns), its
        // accumulation type, and whether its rows and columns are the result's (all but the
        // last dimension, and the last) in the result's own type.
        let tile = match (&gemm, &conv) {
            (Some((geo, _)), _) => {
                let rank = dims.len();
                let batches: i64 = dims.iter().take(rank.saturating_sub(2)).product();
                let rows_cols = geo.out_ty == geo.acc
                    && rank >= 2
                    && dims[rank - 1] == geo.n
                    && dims[rank - 2] == geo.m
                    && batches == geo.batch.iter().product::<i64>();
                Some((geo.m.max(geo.n), geo.acc, rows_cols))
            }
            (None, Some(geo)) => {
                let rows_cols = matches!(geo.ty, ElementType::F32 | ElementType::F64)
                    && dims[..dims.len() - 1] == geo.pix_dims[..]
                    && dims.last() == Some(&geo.o);
                Some((numel(&geo.pix_dims).max(geo.o), geo.ty, rows_cols))
            }
            _ => None,
        };
        let place = match tile {
            Some((line, _, _)) if !library && self.on_tiles(core, line) => self.gemm.epilogues,
            _ => Epilogues::Blocks,
        };
        let lanes = match (place, tile) {
            (Epilogues::Registers, Some((_, acc, true))) => {
                LanePlan::new(cg, m, &self.g, self.root, core, acc)
            }
            _ => None,
        };
        let (items, grain) = match m.opcode(core) {
            Opcode::Dot if lanes.is_some() || place == Epilogues::Tiles => {
                let geo = gemm.ok_or("dot is not a GEMM")?.0;
                let pack = *scratch.first().ok_or("gemm without scratch")?;
                let run = |finish: TileEnd<'_, 'ctx>| {
                    crate::gemv::emit_dot(cg, &geo, lhs, rhs, c, pack, start, end, Some(finish))
                };
                match &lanes {
                    Some(plan) => {
                        let mut finish =
                            |t: &crate::gemm::RegTile<'ctx>| self.emit_lane_tile(plan, &dims, t);
                        run(TileEnd::Registers(&mut finish))?;
                    }
                    None => {
                        let buf =
                            crate::stream::entry_alloca(cg, geo.out_ty, geo.mr * geo.nr(), "tile")?;
                        let mut finish =
                            |t: &crate::gemm::Tile<'ctx>| self.emit_tile(&geo, &dims, core, t);
                        run(TileEnd::Buffer(buf, &mut finish))?;
                    }
                }
                (geo.items(), geo.grain())
            }
            Opcode::Dot => {
                let geo = gemm.ok_or("dot is not a GEMM")?.0;
                let pack = match &geo.library {
                    Some(_) => None,
                    None => Some(*scratch.first().ok_or("gemm without scratch")?),
                };
                let (mm, n) = (geo.m, geo.n);
                let whole_rows = match &geo.library {
                    Some(lib) => lib.by_rows,
                    None => geo.cb == 1,
                };
                cg.for_range(start, end, |item| {
                    let next = b.build_int_nsw_add(item, cg.c64(1), "next")?;
                    match (&geo.library, pack) {
                        (Some(lib), _) => {
                            crate::gemm::emit_library(cg, lib, lhs, rhs, c, item, next)?
                        }
                        (None, Some(pack)) => {
                            crate::gemv::emit_dot(cg, &geo, lhs, rhs, c, pack, item, next, None)?
                        }
                        (None, None) => return Err("gemm without scratch".into()),
                    }
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
                let geo = conv.ok_or("not a tiled convolution")?;
                let o = geo.o;
                if let Some(plan) = &lanes {
                    let mut finish =
                        |t: &crate::gemm::RegTile<'ctx>| self.emit_lane_tile(plan, &dims, t);
                    let pack = if geo.strip_major {
                        Some(*scratch.first().ok_or("a convolution without its scratch")?)
                    } else {
                        None
                    };
                    crate::conv_fast::emit_conv(
                        cg,
                        &geo,
                        lhs,
                        rhs,
                        c,
                        pack,
                        start,
                        end,
                        Some(&mut finish),
                    )?;
                } else {
                    // The epilogue runs on each item's output as a block of pixels.
                    let geo = geo.unphased();
                    let pack = if geo.strip_major {
                        Some(*scratch.first().ok_or("a convolution without its scratch")?)
                    } else {
                        None
                    };
                    cg.for_range(start, end, |item| {
                        let next = b.build_int_nsw_add(item, cg.c64(1), "next")?;
                        crate::conv_fast::emit_conv(cg, &geo, lhs, rhs, c, pack, item, next, None)?;
                        // The item's output: its pixels, its features of each.
                        let blk = crate::conv_fast::item_block(cg, &geo, item)?;
                        let whole = match &geo.library {
                            Some(lib) => lib.whole_pixels(),
                            None => !geo.strip_major,
                        };
                        if whole {
                            // Whole pixels: one contiguous range.
                            let lo = b.build_int_nsw_mul(blk.p0, cg.c64(o), "lo")?;
                            let hi = b.build_int_nsw_mul(blk.p1, cg.c64(o), "hi")?;
                            return self.emit_elements(&dims, lo, hi);
                        }
                        cg.for_range(blk.p0, blk.p1, |p| {
                            let row = b.build_int_nsw_mul(p, cg.c64(o), "row")?;
                            let lo = b.build_int_nsw_add(row, blk.o0, "lo")?;
                            let hi = b.build_int_nsw_add(row, blk.o1, "hi")?;
                            self.emit_elements(&dims, lo, hi)
                        })
                    })?;
                }
                (
                    geo.items(),
                    (GRAIN_ELEMS * 64 / geo.item_work().max(1)).max(1),
                )
            }
            _ => return Err("an epilogue's core must be a dot or a convolution".into()),
        };
        self.g.unbind(core);
        Ok((items, grain))
    }

    /// Whether `core`'s epilogue may run on its register tiles (in registers, or for a dot
    /// through a tile buffer): unless the epilogue reads, besides the core, an array in memory
    /// as large as the core and longer than `line`, the core's longest row or column (a
    /// residual, the weights an update step subtracts from), which a tile would read in `MR`
    /// short pieces of rows far apart.
    fn on_tiles(&self, core: InstId, line: i64) -> bool {
        let m = self.m;
        let size = numel(dims_of(m, core));
        let mut seen = HashSet::new();
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

    /// The epilogue of one finished GEMM tile: a loop over the tile's rows whose body computes
    /// and stores the root's leaves on the row's columns in one loop ([`Kc::emit_segment`]),
    /// the core read from the tile's buffer. The loop vectorizer turns that inner loop into
    /// vector code, so the epilogue is emitted once per kernel, as on the block path, and its
    /// size does not grow with the tile.
    fn emit_tile(
        &mut self,
        geo: &GemmGeo,
        dims: &[i64],
        core: InstId,
        t: &crate::gemm::Tile<'ctx>,
    ) -> R<()> {
        let cg = self.cg();
        let b = &cg.b;
        let mty = cg.mem_ty(geo.out_ty)?;
        // Neither loop is unrolled: the rows' loop runs at most `MR` times, and LLVM would
        // otherwise copy the vectorized row (with its scalar remainder) once per row it may
        // run; the columns' loop often has a known trip count (`NR`), and fully unrolled
        // before the loop vectorizer sees it, it would stay `NR` scalar copies (its loads and
        // stores may alias, so the SLP vectorizer leaves them).
        cg.for_range_hinted(cg.c64(0), t.rows, &[NO_UNROLL], |r| {
            let lo =
                b.build_int_nsw_add(t.lin, b.build_int_nsw_mul(r, cg.c64(geo.n), "tr")?, "lo")?;
            let row = cg.gep(mty, t.buf, b.build_int_nsw_mul(r, cg.c64(geo.nr()), "tb")?)?;
            self.g.bind(core, Ext::Row(row, lo));
            self.emit_segment(dims, lo, t.cols, &[NO_UNROLL])
        })
    }
}
