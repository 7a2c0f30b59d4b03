//! Matrix-vector products: a GEMM ([`GemmGeo`]) whose left side is one row (`M = 1`, of the
//! accumulation type, as are `B` and the result), read where `B` lies instead of packed. A
//! vector times a matrix moves every element of `B` once and multiplies it once, so packing
//! `B` (read, write, read again) would triple its memory traffic for nothing: the kernel is
//! bound by reading `B`, and reads it in the order it lies.
//!
//! Two forms, by which of `B`'s dimensions is contiguous:
//! - **Rows** (`B` is `N x K` with `K` contiguous, `A` contiguous; the vocabulary projection
//!   `x @ W^T`): each output is the dot product of two contiguous runs of `K`. Four outputs at
//!   a time run over `K` with two vector accumulators each: lane `l` of the first sums the
//!   products of `k = l, l + 2L, l + 4L, ..` in order of `k`, the second those of
//!   `k = L + l, 3L + l, ..` (`L` lanes; the tail of `K` read with masked loads, zeros past the
//!   end), then the two are added and their lanes combined by a fixed tree of halving adds.
//!   The order of each output's sum is fixed by `K` and the vector width alone.
//! - **Columns** (`B` is `K x N` with `N` contiguous): the item's columns in chunks of at most
//!   [`CHUNK`]; for each chunk, [`TILE_K`] rows of `B` at a time are read across the whole
//!   chunk (contiguous runs, as they lie) and added into the outputs' sums, which live in
//!   stack buffers: each output sums over `k` with fused multiply-adds in a fixed tree of short
//!   chains (as the GEMM's, not its bits): runs of [`SUB_K`] steps of `k` from zero, added in
//!   groups of [`K_GROUP`] runs from zero, the groups added in order. Every output's chain is
//!   the same whatever the chunk or the rows read together.
//!
//! Either way an item's outputs are strips of `2 L` columns ([`item_block`]'s), each ending as
//! a GEMM tile of one row ends: stored to `C` with masked stores, or handed to its epilogue
//! ([`TileEnd`]). Results never depend on the item split or the thread count.

use inkwell::types::VectorType;
use inkwell::values::{BasicValue, IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;

use crate::cg::{bv, Cg};
use crate::error::R;
use crate::gemm::{
    batch_bases, ceil_div64, col_masks, item_block, min64, GemmGeo, GemvForm, RegTile, Tile,
    TileEnd, K_GROUP, SUB_K,
};

/// Outputs of the rows form computed together (each with two accumulators).
const ROWS: i64 = 4;

/// Emits a dot's GEMM ([`GemmGeo`]) into the current kernel function, items `start..end`: as a
/// matrix-vector product when [`GemmGeo::gemv`] says so, else by [`crate::gemm::emit_gemm`]
/// (with its scratch).
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_dot<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    a: PointerValue<'ctx>,
    b: PointerValue<'ctx>,
    c: PointerValue<'ctx>,
    scratch: PointerValue<'ctx>,
    start: IntValue<'ctx>,
    end: IntValue<'ctx>,
    mut finish: Option<TileEnd<'_, 'ctx>>,
) -> R<()> {
    let Some(form) = geo.gemv else {
        return crate::gemm::emit_gemm(cg, geo, a, b, c, scratch, start, end, finish);
    };
    cg.for_range(start, end, |item| {
        let blk = item_block(cg, geo, item)?;
        let (abase, bbase, cbase, c_off) = batch_bases(cg, geo, a, b, c, blk.batch)?;
        emit_item(
            cg,
            geo,
            form,
            abase,
            bbase,
            cbase,
            c_off,
            blk.batch,
            blk.j0,
            blk.j1,
            finish.as_mut(),
        )
    })
}

/// The strips of one item: columns `j0..j1` of the product of row `abase` and `bbase`,
/// ending as `finish` says (or stored at `cbase`, whose first element is `C`'s `c_off`).
#[allow(clippy::too_many_arguments)]
fn emit_item<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    form: GemvForm,
    abase: PointerValue<'ctx>,
    bbase: PointerValue<'ctx>,
    cbase: PointerValue<'ctx>,
    c_off: IntValue<'ctx>,
    batch: IntValue<'ctx>,
    j0: IntValue<'ctx>,
    j1: IntValue<'ctx>,
    mut finish: Option<&mut TileEnd<'_, 'ctx>>,
) -> R<()> {
    let bb = &cg.b;
    let nr = geo.nr();
    let cols = bb.build_int_nsw_sub(j1, j0, "cols")?;
    let strips = bb.build_int_unsigned_div(
        bb.build_int_nsw_add(cols, cg.c64(nr - 1), "cs")?,
        cg.c64(nr),
        "strips",
    )?;
    if form == GemvForm::Rows {
        return cg.for_range(cg.c64(0), strips, |s| {
            let jr = bb.build_int_nsw_add(j0, bb.build_int_nsw_mul(s, cg.c64(nr), "so")?, "jr")?;
            let w = min64(cg, bb.build_int_nsw_sub(j1, jr, "w")?, cg.c64(nr))?;
            let masks = col_masks(cg, geo.lanes, w)?;
            let accs = rows_strip(cg, geo, abase, bbase, jr, w)?;
            end_strip(
                cg,
                geo,
                cbase,
                c_off,
                batch,
                jr,
                w,
                &masks,
                accs,
                finish.as_deref_mut(),
            )
        });
    }
    // The columns form sweeps the item's columns in chunks of at most `CHUNK`, each chunk
    // summed over all of `K` (`cols_chunk`), then ends strip by strip.
    let chunks = ceil_div64(cg, cols, CHUNK)?;
    let ety = cg.reg_ty(geo.acc)?.into_float_type();
    let vty = ety.vec_type(geo.lanes as u32);
    let mload = cg.intrinsic("llvm.masked.load", &[vty.into(), cg.ptr().into()])?;
    let align = cg.i32().const_int(geo.acc.byte_size() as u64, false);
    let bufs = [
        crate::stream::entry_alloca(cg, geo.acc, CHUNK, "gv_run")?,
        crate::stream::entry_alloca(cg, geo.acc, CHUNK, "gv_sum")?,
        crate::stream::entry_alloca(cg, geo.acc, CHUNK, "gv_tot")?,
    ];
    cg.for_range(cg.c64(0), chunks, |ch| {
        let c0 = bb.build_int_nsw_add(j0, bb.build_int_nsw_mul(ch, cg.c64(CHUNK), "cc")?, "c0")?;
        let cw = min64(cg, bb.build_int_nsw_sub(j1, c0, "cw")?, cg.c64(CHUNK))?;
        let sums = cols_chunk(cg, geo, abase, bbase, c0, cw, &bufs)?;
        let strips = ceil_div64(cg, cw, nr)?;
        cg.for_range(cg.c64(0), strips, |s| {
            let off = bb.build_int_nsw_mul(s, cg.c64(nr), "so")?;
            let jr = bb.build_int_nsw_add(c0, off, "jr")?;
            let w = min64(cg, bb.build_int_nsw_sub(cw, off, "w")?, cg.c64(nr))?;
            let masks = col_masks(cg, geo.lanes, w)?;
            let mut accs = Vec::with_capacity(2);
            for (h, mask) in masks.iter().enumerate() {
                let at = bb.build_int_nsw_add(off, cg.c64(h as i64 * geo.lanes), "sa")?;
                let q = cg.gep(ety.into(), sums, at)?;
                let zero = vty.const_zero();
                accs.push(
                    cg.call(mload, &[bv(q), bv(align), bv(*mask), bv(zero)])?
                        .ok_or("masked load returned nothing")?,
                );
            }
            end_strip(cg, geo, cbase, c_off, batch, jr, w, &masks, accs, finish)
        })
    })
}

/// Columns of the columns form summed at once (a multiple of every strip width): the sums
/// of a chunk live in three stack buffers of this many elements.
const CHUNK: i64 = 512;

/// Rows of `B` the columns form reads side by side.
const TILE_K: i64 = 8;

/// The columns form over columns `c0..c0 + cw` (`cw <= CHUNK`): every output's sum over `k`
/// as the module header says (runs of [`SUB_K`] steps from zero, added in groups of
/// [`K_GROUP`] runs from zero, the groups added in order), computed by sweeping the chunk for
/// [`TILE_K`] rows of `B` at a time with each output's run sum in `bufs[0]` (so each step
/// reads `TILE_K` contiguous runs of `cw` elements of `B`), the group sums in `bufs[1]` and
/// the totals in `bufs[2]`. Returns the buffer holding the final sums.
fn cols_chunk<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    abase: PointerValue<'ctx>,
    bbase: PointerValue<'ctx>,
    c0: IntValue<'ctx>,
    cw: IntValue<'ctx>,
    bufs: &[PointerValue<'ctx>; 3],
) -> R<PointerValue<'ctx>> {
    let bb = &cg.b;
    let lanes = geo.lanes;
    let ety = cg.reg_ty(geo.acc)?.into_float_type();
    let vty = ety.vec_type(lanes as u32);
    let fma = cg.intrinsic("llvm.fmuladd", &[vty.into()])?;
    let mload = cg.intrinsic("llvm.masked.load", &[vty.into(), cg.ptr().into()])?;
    let align = cg.i32().const_int(geo.acc.byte_size() as u64, false);
    let zero = vty.const_zero();
    let full = bb.build_int_unsigned_div(cw, cg.c64(lanes), "fv")?;
    let tail = bb.build_int_nsw_sub(cw, bb.build_int_nsw_mul(full, cg.c64(lanes), "fl")?, "tl")?;
    let has_tail = bb.build_int_compare(IntPredicate::SGT, tail, cg.c64(0), "ht")?;
    let vecs =
        bb.build_int_nsw_add(full, bb.build_int_z_extend(has_tail, cg.i64(), "t1")?, "vs")?;
    let tail_mask = col_masks(cg, lanes, tail)?[0];
    let vec_at = |buf: PointerValue<'ctx>, v: IntValue<'ctx>| -> R<PointerValue<'ctx>> {
        cg.gep(
            ety.into(),
            buf,
            bb.build_int_nsw_mul(v, cg.c64(lanes), "vo")?,
        )
    };
    // The chunk's vectors of a buffer set to zero, or to `buf[v] + add[v]`.
    let zero_buf = |buf: PointerValue<'ctx>| -> R<()> {
        cg.for_range(cg.c64(0), vecs, |v| {
            store_vec(cg, vec_at(buf, v)?, zero)?;
            Ok(())
        })
    };
    let add_into = |buf: PointerValue<'ctx>, add: PointerValue<'ctx>| -> R<()> {
        cg.for_range(cg.c64(0), vecs, |v| {
            let (p, q) = (vec_at(buf, v)?, vec_at(add, v)?);
            let x = load(cg, vty, p, None, mload, align, zero)?;
            let y = load(cg, vty, q, None, mload, align, zero)?;
            store_vec(cg, p, bb.build_float_add(x, y, "sum")?)
        })
    };
    // `run[v] = fma(a[k], B[k, c0 + v], run[v])` for `k` in `k0..k1` in order, `rows` rows of
    // `B` per sweep of the chunk.
    let sweep = |k: IntValue<'ctx>, rows: i64| -> R<()> {
        let mut a_s = Vec::with_capacity(rows as usize);
        let mut b_rows = Vec::with_capacity(rows as usize);
        for i in 0..rows {
            let ki = bb.build_int_nsw_add(k, cg.c64(i), "ki")?;
            let aq = cg.gep(
                ety.into(),
                abase,
                bb.build_int_nsw_mul(ki, cg.c64(geo.a_sk), "ak")?,
            )?;
            let a = bb.build_load(ety, aq, "a")?.into_float_value();
            a_s.push(crate::gemm::splat_float(cg, a, lanes)?);
            let row =
                bb.build_int_nsw_add(bb.build_int_nsw_mul(ki, cg.c64(geo.b_sk), "bk")?, c0, "br")?;
            b_rows.push(cg.gep(ety.into(), bbase, row)?);
        }
        let step = |v: IntValue<'ctx>, mask: Option<VectorValue<'ctx>>| -> R<()> {
            let p = vec_at(bufs[0], v)?;
            let mut acc = load(cg, vty, p, None, mload, align, zero)?;
            for (a, row) in a_s.iter().zip(&b_rows) {
                let x = load(cg, vty, vec_at(*row, v)?, mask, mload, align, zero)?;
                acc = cg
                    .call(fma, &[bv(*a), bv(x), bv(acc)])?
                    .ok_or("fmuladd returned nothing")?
                    .into_vector_value();
            }
            store_vec(cg, p, acc)
        };
        cg.for_range(cg.c64(0), full, |v| step(v, None))?;
        cg.if_then(has_tail, || step(full, Some(tail_mask)))
    };
    let run = |k0: IntValue<'ctx>, k1: IntValue<'ctx>| -> R<()> {
        zero_buf(bufs[0])?;
        let tiles = bb.build_int_unsigned_div(
            bb.build_int_nsw_sub(k1, k0, "rk")?,
            cg.c64(TILE_K),
            "tiles",
        )?;
        cg.for_range(cg.c64(0), tiles, |t| {
            sweep(
                bb.build_int_nsw_add(k0, bb.build_int_nsw_mul(t, cg.c64(TILE_K), "to")?, "kt")?,
                TILE_K,
            )
        })?;
        let rest =
            bb.build_int_nsw_add(k0, bb.build_int_nsw_mul(tiles, cg.c64(TILE_K), "tk")?, "rs")?;
        cg.for_range(rest, k1, |k| sweep(k, 1))
    };
    let k = geo.k;
    if k <= SUB_K {
        run(cg.c64(0), cg.c64(k))?;
        return Ok(bufs[0]);
    }
    let group = SUB_K * K_GROUP;
    let groups = (k as u64).div_ceil(group as u64) as i64;
    zero_buf(bufs[2])?;
    cg.for_range(cg.c64(0), cg.c64(groups), |g| {
        let g0 = bb.build_int_nsw_mul(g, cg.c64(group), "g0")?;
        let g1 = min64(
            cg,
            bb.build_int_nsw_add(g0, cg.c64(group), "g1")?,
            cg.c64(k),
        )?;
        zero_buf(bufs[1])?;
        let runs = ceil_div64(cg, bb.build_int_nsw_sub(g1, g0, "gk")?, SUB_K)?;
        cg.for_range(cg.c64(0), runs, |r| {
            let k0 =
                bb.build_int_nsw_add(g0, bb.build_int_nsw_mul(r, cg.c64(SUB_K), "r0")?, "k0")?;
            let k1 = min64(cg, bb.build_int_nsw_add(k0, cg.c64(SUB_K), "k1")?, g1)?;
            run(k0, k1)?;
            add_into(bufs[1], bufs[0])
        })?;
        add_into(bufs[2], bufs[1])
    })?;
    Ok(bufs[2])
}

/// A full vector stored at `q` (aligned to its element).
fn store_vec<'ctx>(cg: &Cg<'ctx>, q: PointerValue<'ctx>, v: VectorValue<'ctx>) -> R<()> {
    let st = cg.b.build_store(q, v)?;
    let _ = st.set_alignment(
        v.get_type()
            .get_element_type()
            .into_float_type()
            .get_bit_width()
            / 8,
    );
    Ok(())
}

/// The rows form: outputs `jr..jr + w`, each a dot product over `K`, gathered into the
/// strip's two vectors (zero past `w`).
fn rows_strip<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    abase: PointerValue<'ctx>,
    bbase: PointerValue<'ctx>,
    jr: IntValue<'ctx>,
    w: IntValue<'ctx>,
) -> R<Vec<inkwell::values::BasicValueEnum<'ctx>>> {
    let bb = &cg.b;
    let lanes = geo.lanes;
    let ety = cg.reg_ty(geo.acc)?.into_float_type();
    let vty = ety.vec_type(lanes as u32);
    let fma = cg.intrinsic("llvm.fmuladd", &[vty.into()])?;
    let mload = cg.intrinsic("llvm.masked.load", &[vty.into(), cg.ptr().into()])?;
    let align = cg.i32().const_int(geo.acc.byte_size() as u64, false);
    let zero = vty.const_zero();
    let step = 2 * lanes;
    let main = geo.k / step * step;
    let tail = geo.k - main;
    let mut outs = vec![zero; 2];
    for g in 0..(geo.nr() / ROWS) {
        // Rows of `B` of this group, clamped to the strip's last (results past `w` unused).
        let mut rows = Vec::with_capacity(ROWS as usize);
        for r in 0..ROWS {
            let j = min64(
                cg,
                cg.c64(g * ROWS + r),
                bb.build_int_nsw_sub(w, cg.c64(1), "wl")?,
            )?;
            let n = bb.build_int_nsw_add(jr, j, "n")?;
            rows.push(cg.gep(
                ety.into(),
                bbase,
                bb.build_int_nsw_mul(n, cg.c64(geo.b_sn), "bn")?,
            )?);
        }
        let init: Vec<_> = (0..2 * ROWS).map(|_| bv(zero)).collect();
        let body = |k: IntValue<'ctx>,
                    acc: &[inkwell::values::BasicValueEnum<'ctx>],
                    mask: Option<[VectorValue<'ctx>; 2]>|
         -> R<Vec<inkwell::values::BasicValueEnum<'ctx>>> {
            let mut xs = Vec::with_capacity(2);
            for h in 0..2 {
                let kk = bb.build_int_nsw_add(k, cg.c64(h * lanes), "kk")?;
                let q = cg.gep(ety.into(), abase, kk)?;
                xs.push(load(
                    cg,
                    vty,
                    q,
                    mask.map(|m| m[h as usize]),
                    mload,
                    align,
                    zero,
                )?);
            }
            let mut next = Vec::with_capacity(acc.len());
            for (r, row) in rows.iter().enumerate() {
                for h in 0..2 {
                    let kk = bb.build_int_nsw_add(k, cg.c64(h * lanes), "kk")?;
                    let q = cg.gep(ety.into(), *row, kk)?;
                    let v = load(cg, vty, q, mask.map(|m| m[h as usize]), mload, align, zero)?;
                    let x = cg
                        .call(fma, &[bv(xs[h as usize]), bv(v), acc[2 * r + h as usize]])?
                        .ok_or("fmuladd returned nothing")?;
                    next.push(x);
                }
            }
            Ok(next)
        };
        let mut acc = cg.for_range_acc(cg.c64(0), cg.c64(main / step), &init, |i, acc| {
            body(bb.build_int_nsw_mul(i, cg.c64(step), "k")?, acc, None)
        })?;
        if tail > 0 {
            let m = col_masks(cg, lanes, cg.c64(tail))?;
            acc = body(cg.c64(main), &acc, Some(m))?;
        }
        for r in 0..ROWS {
            let sum = bb.build_float_add(
                acc[2 * r as usize].into_vector_value(),
                acc[2 * r as usize + 1].into_vector_value(),
                "s",
            )?;
            let x = hsum(cg, sum, lanes)?;
            let col = g * ROWS + r;
            let (h, lane) = (col / lanes, col % lanes);
            outs[h as usize] = bb.build_insert_element(outs[h as usize], x, cg.c32(lane), "o")?;
        }
    }
    Ok(outs.into_iter().map(bv).collect())
}

/// A vector load, masked (zeros where off) when `mask` is given.
fn load<'ctx>(
    cg: &Cg<'ctx>,
    vty: inkwell::types::VectorType<'ctx>,
    q: PointerValue<'ctx>,
    mask: Option<VectorValue<'ctx>>,
    mload: inkwell::values::FunctionValue<'ctx>,
    align: IntValue<'ctx>,
    zero: VectorValue<'ctx>,
) -> R<VectorValue<'ctx>> {
    Ok(match mask {
        Some(m) => cg
            .call(mload, &[bv(q), bv(align), bv(m), bv(zero)])?
            .ok_or("masked load returned nothing")?
            .into_vector_value(),
        None => {
            let v = cg.b.build_load(vty, q, "v")?;
            if let Some(i) = v.as_instruction_value() {
                let _ =
                    i.set_alignment(vty.get_element_type().into_float_type().get_bit_width() / 8);
            }
            v.into_vector_value()
        }
    })
}

/// The sum of a vector's lanes by a fixed tree: the upper half added to the lower, halving
/// until one lane is left.
fn hsum<'ctx>(
    cg: &Cg<'ctx>,
    mut v: VectorValue<'ctx>,
    lanes: i64,
) -> R<inkwell::values::FloatValue<'ctx>> {
    let mut n = lanes;
    while n > 1 {
        let half = n / 2;
        let idx = |base: i64| {
            let m: Vec<_> = (0..half)
                .map(|i| cg.i32().const_int((base + i) as u64, false))
                .collect();
            VectorType::const_vector(&m)
        };
        let lo = cg.b.build_shuffle_vector(v, v, idx(0), "lo")?;
        let hi = cg.b.build_shuffle_vector(v, v, idx(half), "hi")?;
        v = cg.b.build_float_add(lo, hi, "h")?;
        n = half;
    }
    Ok(cg
        .b
        .build_extract_element(v, cg.c32(0), "sum")?
        .into_float_value())
}

/// A strip's end: its two vectors stored to `C` (masked to `w` columns), or handed to the
/// epilogue as a one-row tile.
#[allow(clippy::too_many_arguments)]
fn end_strip<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    cbase: PointerValue<'ctx>,
    c_off: IntValue<'ctx>,
    batch: IntValue<'ctx>,
    jr: IntValue<'ctx>,
    w: IntValue<'ctx>,
    masks: &[VectorValue<'ctx>; 2],
    accs: Vec<inkwell::values::BasicValueEnum<'ctx>>,
    finish: Option<&mut TileEnd<'_, 'ctx>>,
) -> R<()> {
    let bb = &cg.b;
    let lanes = geo.lanes;
    let ety = cg.reg_ty(geo.acc)?.into_float_type();
    let vty = ety.vec_type(lanes as u32);
    let mstore = cg.intrinsic("llvm.masked.store", &[vty.into(), cg.ptr().into()])?;
    let align = cg.i32().const_int(geo.acc.byte_size() as u64, false);
    let store = |base: PointerValue<'ctx>, off: IntValue<'ctx>| -> R<()> {
        for (h, mask) in masks.iter().enumerate() {
            let q = cg.gep(
                ety.into(),
                base,
                bb.build_int_nsw_add(off, cg.c64(h as i64 * lanes), "cq")?,
            )?;
            cg.call(mstore, &[accs[h], bv(q), bv(align), bv(*mask)])?;
        }
        Ok(())
    };
    match finish {
        None => store(cbase, jr),
        Some(TileEnd::Buffer(buf, finish)) => {
            store(*buf, cg.c64(0))?;
            finish(&Tile {
                buf: *buf,
                lin: bb.build_int_nsw_add(c_off, jr, "tl")?,
                rows: cg.c64(1),
                cols: w,
            })
        }
        Some(TileEnd::Registers(finish)) => finish(&RegTile {
            accs: accs.clone(),
            lanes,
            masks: vec![*masks],
            col_masks: *masks,
            rows: vec![batch],
            col0: jr,
        }),
    }
}
