//! A blocked GEMM for `f32` and `f64` dots, emitted as an LLVM loop nest.
//!
//! `dot` with at most one free dimension per side and at most one contracting dimension (any
//! number of batch dimensions, any operand layout) is `C[b] = A[b] @ B[b]` with `A` read through
//! strides and `C` row-major. Work items are blocks of up to `MC_MAX` rows of one batch; each item walks
//! `B` in panels of `KC x NC`, packs the panel into its own scratch (`NR`-wide column strips,
//! zero-padded, so transposed right-hand sides cost one copy), and runs an `MR x NR` register
//! tile over it: `MR` broadcast loads of `A` and two vector loads of the packed panel feed
//! `2 * MR` vector fused multiply-adds per step of `k`. Partial column strips are stored with
//! masked stores; leftover rows run a one-row tile.
//!
//! Each output element accumulates its products in order of `k` (with fused multiply-adds), so
//! results differ from the evaluator's separate multiply and add by rounding only, and never
//! depend on how items are split across threads.

use axle_ir::{ElementType, InstId, Module};
use inkwell::types::VectorType;
use inkwell::values::{BasicValue, IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;

use crate::cg::{bv, strides, Cg};
use crate::conv::dot_dims;
use crate::error::R;

/// Rows of the register tile.
const MR: i64 = 12;
/// Depth of a packed panel.
const KC: i64 = 256;
/// Rows per work item, at most (fewer when `M` is small, so there are items for every core).
const MC_MAX: i64 = 240;

/// The geometry of a dot the GEMM handles.
#[derive(Clone, Debug)]
pub(crate) struct GemmGeo {
    pub ty: ElementType,
    /// Sizes of the batch dimensions.
    pub batch: Vec<i64>,
    /// Strides of the batch dimensions in the left and right operands.
    pub lb_st: Vec<i64>,
    pub rb_st: Vec<i64>,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    /// Strides of `A` along `m` and `k`, of `B` along `k` and `n`.
    pub a_sm: i64,
    pub a_sk: i64,
    pub b_sk: i64,
    pub b_sn: i64,
}

impl GemmGeo {
    /// Vector lanes (one 512-bit vector).
    pub fn lanes(&self) -> i64 {
        if self.ty == ElementType::F64 {
            8
        } else {
            16
        }
    }
    /// Columns of the register tile (two vectors).
    pub fn nr(&self) -> i64 {
        2 * self.lanes()
    }
    /// Columns of a packed panel.
    pub fn nc(&self) -> i64 {
        // A packed panel stays in L2 while its strips run (256 KiB for f32, 512 KiB for f64).
        let nc = 256;
        nc.min((self.n as u64).div_ceil(self.nr() as u64) as i64 * self.nr())
            .max(self.nr())
    }
    /// Rows per work item: a multiple of `MR`, at most `MC_MAX`, and small enough that `M`
    /// splits into at least four items when it can.
    pub fn mc(&self) -> i64 {
        let quarter = (self.m + 3) / 4;
        let mc = (quarter + MR - 1) / MR * MR;
        mc.clamp(MR, MC_MAX)
    }
    /// Row blocks per batch (work items per batch).
    pub(crate) fn mtiles(&self) -> i64 {
        ((self.m as u64).div_ceil(self.mc() as u64) as i64).max(1)
    }
    /// Work items: row blocks times batches.
    pub fn items(&self) -> i64 {
        self.batch.iter().product::<i64>() * self.mtiles()
    }
    /// Elements of one item's scratch: a packed `KC x NC` panel of `B` and a packed
    /// `MC x KC` block of `A`.
    fn scratch_elems(&self) -> i64 {
        let kc = KC.min(self.k.max(1));
        kc * self.nc() + self.mc() * kc
    }
    /// Scratch bytes: one pair of packed blocks per item.
    pub fn scratch_bytes(&self) -> i64 {
        self.items() * self.scratch_elems() * self.ty.byte_size() as i64
    }
}

/// The GEMM geometry of `dot` instruction `id`, if the GEMM handles it.
pub(crate) fn gemm_geo(m: &Module, id: InstId) -> Option<GemmGeo> {
    let ops = m.operands(id);
    let (l, r) = (m.array_shape(ops[0])?, m.array_shape(ops[1])?);
    let out = m.array_shape(id)?;
    if !matches!(out.ty, ElementType::F32 | ElementType::F64) || l.ty != out.ty || r.ty != out.ty {
        return None;
    }
    let dd = dot_dims(m, id, l.rank(), r.rank()).ok()?;
    if dd.lfree.len() > 1 || dd.rfree.len() > 1 || dd.lc.len() > 1 {
        return None;
    }
    let (sl, sr) = (strides(&l.dims), strides(&r.dims));
    let size = |dims: &[i64], d: Option<&i64>| d.map_or(1, |&d| dims[d as usize]);
    let st = |s: &[i64], d: Option<&i64>| d.map_or(0, |&d| s[d as usize]);
    let geo = GemmGeo {
        ty: out.ty,
        batch: dd.lb.iter().map(|&d| l.dims[d as usize]).collect(),
        lb_st: dd.lb.iter().map(|&d| sl[d as usize]).collect(),
        rb_st: dd.rb.iter().map(|&d| sr[d as usize]).collect(),
        m: size(&l.dims, dd.lfree.first()),
        n: size(&r.dims, dd.rfree.first()),
        k: size(&l.dims, dd.lc.first()),
        a_sm: st(&sl, dd.lfree.first()),
        a_sk: st(&sl, dd.lc.first()),
        b_sk: st(&sr, dd.rc.first()),
        b_sn: st(&sr, dd.rfree.first()),
    };
    if geo.m == 0 || geo.n == 0 || geo.batch.contains(&0) {
        return None;
    }
    Some(geo)
}

/// Emits the GEMM body into the current kernel function.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_gemm<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    a: PointerValue<'ctx>,
    b: PointerValue<'ctx>,
    c: PointerValue<'ctx>,
    scratch: PointerValue<'ctx>,
    start: IntValue<'ctx>,
    end: IntValue<'ctx>,
) -> R<()> {
    let ty = geo.ty;
    let ety = cg.reg_ty(ty)?.into_float_type();
    let lanes = geo.lanes();
    let vty = ety.vec_type(lanes as u32);
    let nr = geo.nr();
    let nc = geo.nc();
    let kc_max = KC.min(geo.k.max(1));
    let mtiles = geo.mtiles();
    let (m, n, k) = (geo.m, geo.n, geo.k);
    let bb = &cg.b;
    cg.for_range(start, end, |item| {
        let bi = bb.build_int_unsigned_div(item, cg.c64(mtiles), "b")?;
        let mt = bb.build_int_unsigned_rem(item, cg.c64(mtiles), "mt")?;
        // Batch offsets.
        let bidx = delinearize(cg, &geo.batch, bi)?;
        let mut a_off = cg.c64(0);
        let mut b_off = cg.c64(0);
        for (d, &x) in bidx.iter().enumerate() {
            let t = bb.build_int_nsw_mul(x, cg.c64(geo.lb_st[d]), "t")?;
            a_off = bb.build_int_nsw_add(a_off, t, "ao")?;
            let t = bb.build_int_nsw_mul(x, cg.c64(geo.rb_st[d]), "t")?;
            b_off = bb.build_int_nsw_add(b_off, t, "bo")?;
        }
        let c_off = bb.build_int_nsw_mul(bi, cg.c64(m * n), "co")?;
        let ab = cg.gep(ety.into(), a, a_off)?;
        let bbase = cg.gep(ety.into(), b, b_off)?;
        let cb = cg.gep(ety.into(), c, c_off)?;
        let pack = cg.gep(
            ety.into(),
            scratch,
            bb.build_int_nsw_mul(item, cg.c64(geo.scratch_elems()), "po")?,
        )?;
        let apack = cg.gep(ety.into(), pack, cg.c64(kc_max * nc))?;
        let mc = geo.mc();
        let i0 = bb.build_int_nsw_mul(mt, cg.c64(mc), "i0")?;
        let i1 = min64(cg, bb.build_int_nsw_add(i0, cg.c64(mc), "i1")?, cg.c64(m))?;
        let rows = bb.build_int_nsw_sub(i1, i0, "rows")?;
        let strips = bb.build_int_unsigned_div(
            bb.build_int_nsw_add(rows, cg.c64(MR - 1), "r")?,
            cg.c64(MR),
            "strips",
        )?;
        let jcs = (n as u64).div_ceil(nc as u64) as i64;
        cg.for_range(cg.c64(0), cg.c64(jcs), |jci| {
            let jc = bb.build_int_nsw_mul(jci, cg.c64(nc), "jc")?;
            let ncur = min64(cg, bb.build_int_nsw_sub(cg.c64(n), jc, "nl")?, cg.c64(nc))?;
            let panels = bb.build_int_nsw_add(ncur, cg.c64(nr - 1), "p")?;
            let panels = bb.build_int_unsigned_div(panels, cg.c64(nr), "panels")?;
            let pcs = ((k as u64).div_ceil(KC as u64) as i64).max(1);
            cg.for_range(cg.c64(0), cg.c64(pcs), |pci| {
                let pc = bb.build_int_nsw_mul(pci, cg.c64(KC), "pc")?;
                let kc = min64(cg, bb.build_int_nsw_sub(cg.c64(k), pc, "kl")?, cg.c64(KC))?;
                let first = bb.build_int_compare(IntPredicate::EQ, pci, cg.c64(0), "first")?;
                pack_panel(cg, geo, ety, bbase, pack, pc, kc, jc, ncur, panels)?;
                pack_a(cg, geo, ety, ab, apack, pc, kc, i0, i1, strips)?;
                // Each strip of B stays in L1 while every row tile of A runs over it.
                cg.for_range(cg.c64(0), panels, |p| {
                    cg.for_range(cg.c64(0), strips, |s| {
                        tile(
                            cg, geo, vty, apack, pack, cb, s, i0, i1, pc, kc, jc, p, first,
                        )
                    })
                })
            })
        })
    })
}

/// Packs rows `i0..i1` of `A[.., pc..pc+kc]` as strips of `MR` rows, each `kc x MR` with the
/// rows innermost, zero beyond `i1`.
#[allow(clippy::too_many_arguments)]
fn pack_a<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    ety: inkwell::types::FloatType<'ctx>,
    a: PointerValue<'ctx>,
    apack: PointerValue<'ctx>,
    pc: IntValue<'ctx>,
    kc: IntValue<'ctx>,
    i0: IntValue<'ctx>,
    i1: IntValue<'ctx>,
    strips: IntValue<'ctx>,
) -> R<()> {
    let bb = &cg.b;
    cg.for_range(cg.c64(0), strips, |s| {
        let sbase = bb.build_int_nsw_mul(bb.build_int_nsw_mul(s, kc, "sb")?, cg.c64(MR), "sb")?;
        let row0 = bb.build_int_nsw_add(i0, bb.build_int_nsw_mul(s, cg.c64(MR), "r0")?, "r0")?;
        let copy = |kk: IntValue<'ctx>, r: IntValue<'ctx>| -> R<()> {
            let row = bb.build_int_nsw_add(row0, r, "row")?;
            let inside = bb.build_int_compare(IntPredicate::SLT, row, i1, "in")?;
            let safe = bb.build_select(inside, row, i0, "sr")?.into_int_value();
            let kabs = bb.build_int_nsw_add(pc, kk, "k")?;
            let off = bb.build_int_nsw_add(
                bb.build_int_nsw_mul(safe, cg.c64(geo.a_sm), "am")?,
                bb.build_int_nsw_mul(kabs, cg.c64(geo.a_sk), "ak")?,
                "ao",
            )?;
            let v = bb.build_load(ety, cg.gep(ety.into(), a, off)?, "av")?;
            let v = bb.build_select(inside, v, ety.const_zero().into(), "az")?;
            let d =
                bb.build_int_nsw_add(sbase, bb.build_int_nsw_mul(kk, cg.c64(MR), "dk")?, "d")?;
            let d = bb.build_int_nsw_add(d, r, "d")?;
            bb.build_store(cg.gep(ety.into(), apack, d)?, v)?;
            Ok(())
        };
        if geo.a_sk == 1 {
            cg.for_range(cg.c64(0), cg.c64(MR), |r| {
                cg.for_range(cg.c64(0), kc, |kk| copy(kk, r))
            })
        } else {
            cg.for_range(cg.c64(0), kc, |kk| {
                cg.for_range(cg.c64(0), cg.c64(MR), |r| copy(kk, r))
            })
        }
    })
}

pub(crate) fn min64<'ctx>(
    cg: &Cg<'ctx>,
    a: IntValue<'ctx>,
    b: IntValue<'ctx>,
) -> R<IntValue<'ctx>> {
    let lt = cg.b.build_int_compare(IntPredicate::SLT, a, b, "lt")?;
    Ok(cg.b.build_select(lt, a, b, "min")?.into_int_value())
}

pub(crate) fn delinearize<'ctx>(
    cg: &Cg<'ctx>,
    dims: &[i64],
    lin: IntValue<'ctx>,
) -> R<Vec<IntValue<'ctx>>> {
    let st = strides(dims);
    let mut out = Vec::with_capacity(dims.len());
    for d in 0..dims.len() {
        let q = cg.b.build_int_unsigned_div(lin, cg.c64(st[d]), "q")?;
        out.push(if d == 0 {
            q
        } else {
            cg.b.build_int_unsigned_rem(q, cg.c64(dims[d]), "c")?
        });
    }
    Ok(out)
}

/// Packs `B[pc..pc+kc, jc..jc+ncur]` as `panels` strips of `NR` columns, each `kc x NR`
/// row-major, zero beyond column `ncur`.
#[allow(clippy::too_many_arguments)]
fn pack_panel<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    ety: inkwell::types::FloatType<'ctx>,
    b: PointerValue<'ctx>,
    pack: PointerValue<'ctx>,
    pc: IntValue<'ctx>,
    kc: IntValue<'ctx>,
    jc: IntValue<'ctx>,
    ncur: IntValue<'ctx>,
    panels: IntValue<'ctx>,
) -> R<()> {
    let bb = &cg.b;
    let nr = geo.nr();
    cg.for_range(cg.c64(0), panels, |p| {
        let pbase = bb.build_int_nsw_mul(p, kc, "pb")?;
        let pbase = bb.build_int_nsw_mul(pbase, cg.c64(nr), "pb")?;
        let col0 = bb.build_int_nsw_mul(p, cg.c64(nr), "c0")?;
        // Columns of this strip inside the panel; the rest is zero.
        let w = min64(cg, bb.build_int_nsw_sub(ncur, col0, "w")?, cg.c64(nr))?;
        let gcol0 = bb.build_int_nsw_add(jc, col0, "gc0")?;
        let copy = |kk: IntValue<'ctx>, jj: IntValue<'ctx>| -> R<()> {
            let kabs = bb.build_int_nsw_add(pc, kk, "k")?;
            let gcol = bb.build_int_nsw_add(gcol0, jj, "gc")?;
            let off = bb.build_int_nsw_add(
                bb.build_int_nsw_mul(kabs, cg.c64(geo.b_sk), "sr")?,
                bb.build_int_nsw_mul(gcol, cg.c64(geo.b_sn), "sc")?,
                "o",
            )?;
            let v = bb.build_load(ety, cg.gep(ety.into(), b, off)?, "bv")?;
            let d =
                bb.build_int_nsw_add(pbase, bb.build_int_nsw_mul(kk, cg.c64(nr), "dr")?, "d")?;
            let d = bb.build_int_nsw_add(d, jj, "d")?;
            bb.build_store(cg.gep(ety.into(), pack, d)?, v)?;
            Ok(())
        };
        if geo.b_sn == 1 {
            // Rows of B are contiguous: copy row by row.
            cg.for_range(cg.c64(0), kc, |kk| {
                cg.for_range(cg.c64(0), w, |jj| copy(kk, jj))
            })?;
        } else {
            // Columns of B are contiguous (a transposed operand): copy column by column.
            cg.for_range(cg.c64(0), w, |jj| {
                cg.for_range(cg.c64(0), kc, |kk| copy(kk, jj))
            })?;
        }
        cg.for_range(cg.c64(0), kc, |kk| {
            let d =
                bb.build_int_nsw_add(pbase, bb.build_int_nsw_mul(kk, cg.c64(nr), "dr")?, "d")?;
            cg.for_range(w, cg.c64(nr), |jj| {
                let q = cg.gep(ety.into(), pack, bb.build_int_nsw_add(d, jj, "d")?)?;
                bb.build_store(q, ety.const_zero())?;
                Ok(())
            })
        })
    })
}

/// One `MR x NR` register tile: rows `i0 + s*MR ..` (stores masked beyond `i1`) and column
/// strip `p` of the panel.
#[allow(clippy::too_many_arguments)]
fn tile<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    vty: VectorType<'ctx>,
    apack: PointerValue<'ctx>,
    pack: PointerValue<'ctx>,
    c: PointerValue<'ctx>,
    s: IntValue<'ctx>,
    i0: IntValue<'ctx>,
    i1: IntValue<'ctx>,
    pc: IntValue<'ctx>,
    kc: IntValue<'ctx>,
    jc: IntValue<'ctx>,
    p: IntValue<'ctx>,
    first: IntValue<'ctx>,
) -> R<()> {
    let bb = &cg.b;
    let lanes = geo.lanes();
    let nr = geo.nr();
    let ety = vty.get_element_type().into_float_type();
    let fma = cg.intrinsic("llvm.fmuladd", &[vty.into()])?;
    let mload = cg.intrinsic("llvm.masked.load", &[vty.into(), cg.ptr().into()])?;
    let mstore = cg.intrinsic("llvm.masked.store", &[vty.into(), cg.ptr().into()])?;
    let align = cg.i32().const_int(geo.ty.byte_size() as u64, false);
    let lane_ids: Vec<_> = (0..lanes)
        .map(|i| cg.i64().const_int(i as u64, false))
        .collect();
    let lane_vec = VectorType::const_vector(&lane_ids);
    let _ = pc;
    let jr = bb.build_int_nsw_add(jc, bb.build_int_nsw_mul(p, cg.c64(nr), "j")?, "jr")?;
    let w = min64(
        cg,
        bb.build_int_nsw_sub(cg.c64(geo.n), jr, "w")?,
        cg.c64(nr),
    )?;
    let mut colmask = Vec::with_capacity(2);
    for v in 0..2 {
        let lim = bb.build_int_nsw_sub(w, cg.c64(v * lanes), "lim")?;
        let splat = splat_int(cg, lim, lanes)?;
        colmask.push(bb.build_int_compare(IntPredicate::SLT, lane_vec, splat, "mask")?);
    }
    let row0 = bb.build_int_nsw_add(i0, bb.build_int_nsw_mul(s, cg.c64(MR), "r0")?, "r0")?;
    let none = colmask[0].get_type().const_zero();
    // Per row: its C pointer and masks (all off for rows past the end).
    let mut rowsel = Vec::with_capacity(MR as usize);
    for r in 0..MR {
        let row = bb.build_int_nsw_add(row0, cg.c64(r), "row")?;
        let inside = bb.build_int_compare(IntPredicate::SLT, row, i1, "in")?;
        let safe = bb.build_select(inside, row, i0, "sr")?.into_int_value();
        let off =
            bb.build_int_nsw_add(bb.build_int_nsw_mul(safe, cg.c64(geo.n), "ro")?, jr, "co")?;
        let cp = cg.gep(ety.into(), c, off)?;
        let mut masks = Vec::with_capacity(2);
        for m in &colmask {
            masks.push(bb.build_select(inside, *m, none, "rm")?.into_vector_value());
        }
        rowsel.push((cp, masks));
    }
    let zero = vty.const_zero();
    let init = cg.if_else_with(
        &mut (),
        first,
        |_| Ok((0..2 * MR).map(|_| bv(zero)).collect()),
        |_| {
            let mut v = Vec::new();
            for (cp, masks) in &rowsel {
                for (h, mask) in masks.iter().enumerate() {
                    let q = cg.gep(ety.into(), *cp, cg.c64(h as i64 * lanes))?;
                    let x = cg
                        .call(mload, &[bv(q), bv(align), bv(*mask), bv(zero)])?
                        .ok_or("masked load returned nothing")?;
                    v.push(x);
                }
            }
            Ok(v)
        },
    )?;
    let pbase = bb.build_int_nsw_mul(bb.build_int_nsw_mul(p, kc, "pb")?, cg.c64(nr), "pb")?;
    let abase = bb.build_int_nsw_mul(bb.build_int_nsw_mul(s, kc, "ab")?, cg.c64(MR), "ab")?;
    let accs = cg.for_range_acc(cg.c64(0), kc, &init, |kk, acc| {
        let boff =
            bb.build_int_nsw_add(pbase, bb.build_int_nsw_mul(kk, cg.c64(nr), "bk")?, "bo")?;
        let mut bvs: Vec<VectorValue> = Vec::with_capacity(2);
        for h in 0..2 {
            let q = cg.gep(
                ety.into(),
                pack,
                bb.build_int_nsw_add(boff, cg.c64(h * lanes), "q")?,
            )?;
            let l = bb.build_load(vty, q, "bvec")?;
            if let Some(i) = l.as_instruction_value() {
                let _ = i.set_alignment(geo.ty.byte_size() as u32);
            }
            bvs.push(l.into_vector_value());
        }
        let aoff =
            bb.build_int_nsw_add(abase, bb.build_int_nsw_mul(kk, cg.c64(MR), "ak")?, "ao")?;
        let mut out = Vec::with_capacity(acc.len());
        for r in 0..MR {
            let ap = cg.gep(
                ety.into(),
                apack,
                bb.build_int_nsw_add(aoff, cg.c64(r), "ar")?,
            )?;
            let av = bb.build_load(ety, ap, "a")?.into_float_value();
            let sa = splat_float(cg, av, lanes)?;
            for h in 0..2 {
                let x = cg
                    .call(fma, &[bv(sa), bv(bvs[h]), acc[(2 * r + h as i64) as usize]])?
                    .ok_or("fmuladd returned nothing")?;
                out.push(x);
            }
        }
        Ok(out)
    })?;
    for (r, (cp, masks)) in rowsel.iter().enumerate() {
        for (h, mask) in masks.iter().enumerate() {
            let q = cg.gep(ety.into(), *cp, cg.c64(h as i64 * lanes))?;
            cg.call(mstore, &[accs[2 * r + h], bv(q), bv(align), bv(*mask)])?;
        }
    }
    Ok(())
}

pub(crate) fn splat_float<'ctx>(
    cg: &Cg<'ctx>,
    v: inkwell::values::FloatValue<'ctx>,
    lanes: i64,
) -> R<VectorValue<'ctx>> {
    let vty = v.get_type().vec_type(lanes as u32);
    let undef = vty.get_poison();
    let ins = cg.b.build_insert_element(undef, v, cg.c32(0), "ins")?;
    let zeros = VectorType::const_vector(&vec![cg.i32().const_zero(); lanes as usize]);
    Ok(cg.b.build_shuffle_vector(ins, undef, zeros, "splat")?)
}

pub(crate) fn splat_int<'ctx>(
    cg: &Cg<'ctx>,
    v: IntValue<'ctx>,
    lanes: i64,
) -> R<VectorValue<'ctx>> {
    let vty = v.get_type().vec_type(lanes as u32);
    let undef = vty.get_poison();
    let ins = cg.b.build_insert_element(undef, v, cg.c32(0), "ins")?;
    let zeros = VectorType::const_vector(&vec![cg.i32().const_zero(); lanes as usize]);
    Ok(cg.b.build_shuffle_vector(ins, undef, zeros, "splat")?)
}
