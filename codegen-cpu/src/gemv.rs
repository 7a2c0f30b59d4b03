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
//! - **Columns** (`B` is `K x N` with `N` contiguous): a strip of `2 L` outputs is two vectors
//!   of accumulators summing over `k` with fused multiply-adds, `A`'s element broadcast, in a
//!   fixed tree of short chains (as the GEMM's, not its bits): runs of [`SUB_K`] steps of `k`
//!   from zero, added in groups of [`K_GROUP`] runs from zero, the groups added in order.
//!   Four strips run side by side, so each step of `k` reads a run of a row of `B` four
//!   strips long.
//!
//! Either way an item's outputs are strips of `2 L` columns ([`item_block`]'s), each ending as
//! a GEMM tile of one row ends: stored to `C` with masked stores, or handed to its epilogue
//! ([`TileEnd`]). Results never depend on the item split or the thread count.

use inkwell::types::VectorType;
use inkwell::values::{BasicValue, IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;

use crate::cg::{bv, Cg, Val, NO_UNROLL};
use crate::error::R;
use crate::gemm::{
    add_vecs, batch_bases, ceil_div64, col_masks, item_block, min64, GemmGeo, GemvForm, RegTile,
    Tile, TileEnd, K_GROUP, SUB_K,
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
    // The columns form runs `GROUP` strips side by side, so that each step of `k` reads a
    // longer run of a row of `B` (strips past the item's end are masked off, read nothing).
    let groups = ceil_div64(cg, strips, GROUP)?;
    cg.for_range(cg.c64(0), groups, |g| {
        let mut strips_of = Vec::with_capacity(GROUP as usize);
        for i in 0..GROUP {
            let s = bb.build_int_nsw_add(
                bb.build_int_nsw_mul(g, cg.c64(GROUP), "g0")?,
                cg.c64(i),
                "s",
            )?;
            let jr = bb.build_int_nsw_add(j0, bb.build_int_nsw_mul(s, cg.c64(nr), "so")?, "jr")?;
            let w = bb.build_int_nsw_sub(j1, jr, "w")?;
            let w = min64(cg, w, cg.c64(nr))?;
            let masks = col_masks(cg, geo.lanes, w)?;
            strips_of.push((jr, w, masks));
        }
        let accs = cols_group(cg, geo, abase, bbase, &strips_of)?;
        for (i, (jr, w, masks)) in strips_of.iter().enumerate() {
            let exists = bb.build_int_compare(IntPredicate::SGT, *w, cg.c64(0), "ex")?;
            let mine = accs[2 * i..2 * i + 2].to_vec();
            cg.if_then(exists, || {
                end_strip(
                    cg,
                    geo,
                    cbase,
                    c_off,
                    batch,
                    *jr,
                    *w,
                    masks,
                    mine,
                    finish.as_deref_mut(),
                )
            })?;
        }
        Ok(())
    })
}

/// Strips of the columns form run side by side.
const GROUP: i64 = 4;

/// The columns form: each strip's outputs `jr..jr + 2L` (masked to its `w`) summed over `k`
/// as the module header says; the strips' accumulators in order, two per strip.
fn cols_group<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    abase: PointerValue<'ctx>,
    bbase: PointerValue<'ctx>,
    strips: &[(IntValue<'ctx>, IntValue<'ctx>, [VectorValue<'ctx>; 2])],
) -> R<Vec<inkwell::values::BasicValueEnum<'ctx>>> {
    let bb = &cg.b;
    let lanes = geo.lanes;
    let ety = cg.reg_ty(geo.acc)?.into_float_type();
    let vty = ety.vec_type(lanes as u32);
    let fma = cg.intrinsic("llvm.fmuladd", &[vty.into()])?;
    let mload = cg.intrinsic("llvm.masked.load", &[vty.into(), cg.ptr().into()])?;
    let align = cg.i32().const_int(geo.acc.byte_size() as u64, false);
    let zero = vty.const_zero();
    let init: Vec<_> = (0..2 * strips.len()).map(|_| bv(zero)).collect();
    let step = |k: IntValue<'ctx>, acc: &[Val<'ctx>]| -> R<Vec<Val<'ctx>>> {
        let aq = cg.gep(
            ety.into(),
            abase,
            bb.build_int_nsw_mul(k, cg.c64(geo.a_sk), "ak")?,
        )?;
        let a = bb.build_load(ety, aq, "a")?.into_float_value();
        let sa = crate::gemm::splat_float(cg, a, lanes)?;
        let row = bb.build_int_nsw_mul(k, cg.c64(geo.b_sk), "bk")?;
        let mut next = Vec::with_capacity(acc.len());
        for (i, (jr, _, masks)) in strips.iter().enumerate() {
            let at = bb.build_int_nsw_add(row, *jr, "row")?;
            for (h, mask) in masks.iter().enumerate() {
                let q = cg.gep(
                    ety.into(),
                    bbase,
                    bb.build_int_nsw_add(at, cg.c64(h as i64 * lanes), "bq")?,
                )?;
                let v = cg
                    .call(mload, &[bv(q), bv(align), bv(*mask), bv(zero)])?
                    .ok_or("masked load returned nothing")?;
                let x = cg
                    .call(fma, &[bv(sa), v, acc[2 * i + h]])?
                    .ok_or("fmuladd returned nothing")?;
                next.push(x);
            }
        }
        Ok(next)
    };
    // Runs of `SUB_K` steps of `k` from zero, added in groups of `K_GROUP` runs from zero,
    // the groups added in order into the totals (see the module header).
    let k = geo.k;
    if k <= SUB_K {
        return cg.for_range_acc(cg.c64(0), cg.c64(k), &init, |kk, acc| step(kk, acc));
    }
    let group = SUB_K * K_GROUP;
    let groups = (k as u64).div_ceil(group as u64) as i64;
    cg.for_range_acc_hinted(cg.c64(0), cg.c64(groups), &init, &[NO_UNROLL], |g, tot| {
        let g0 = bb.build_int_nsw_mul(g, cg.c64(group), "g0")?;
        let g1 = min64(
            cg,
            bb.build_int_nsw_add(g0, cg.c64(group), "g1")?,
            cg.c64(k),
        )?;
        let runs = ceil_div64(cg, bb.build_int_nsw_sub(g1, g0, "gk")?, SUB_K)?;
        let sum = cg.for_range_acc_hinted(cg.c64(0), runs, &init, &[NO_UNROLL], |r, sum| {
            let k0 =
                bb.build_int_nsw_add(g0, bb.build_int_nsw_mul(r, cg.c64(SUB_K), "r0")?, "k0")?;
            let k1 = min64(cg, bb.build_int_nsw_add(k0, cg.c64(SUB_K), "k1")?, g1)?;
            let part = cg.for_range_acc(k0, k1, &init, |kk, acc| step(kk, acc))?;
            add_vecs(cg, sum, &part)
        })?;
        add_vecs(cg, tot, &sum)
    })
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
