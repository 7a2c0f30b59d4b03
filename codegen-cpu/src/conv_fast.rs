//! A register-tiled convolution for `f32`/`f64`, and for `f16`/`bf16` widened to `f32` as they
//! are loaded and rounded once as they are stored, with the output features innermost in the
//! output and the kernel (`b01f`-style outputs with `01io`-style kernels, any input layout):
//! `MR` consecutive output pixels times `NR` output features are accumulated in vector
//! registers over the kernel positions and input features, reading the input through an
//! implicit im2col (scalar broadcasts, zero where the window hangs over the padding). Feature
//! and batch groups and base (lhs) dilation go to the elemental emitter.
//!
//! Each output element sums its terms in the evaluator's order (kernel positions, then input
//! features) with fused multiply-adds; padding terms add zero. Narrow floats accumulate in
//! `f32` and round to nearest even once per output element, as the evaluator does.

use axle_ir::{conv_geo, ElementType, InstId, Module};
use inkwell::types::{BasicTypeEnum, VectorType};
use inkwell::values::{BasicValue, IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;

use crate::cg::{bv, numel, strides, Cg, Val};
use crate::error::R;
use crate::gemm::{delinearize, min64, splat_float, splat_int, RegFn, RegTile};

/// Output pixels per register tile.
pub(crate) const MR: i64 = 6;

/// The geometry of a convolution the tiled kernel handles.
#[derive(Clone, Debug)]
pub(crate) struct ConvFast {
    pub ty: ElementType,
    /// Output dimensions other than the feature dimension (the last), and for each the
    /// role: `None` for the batch, `Some(d)` for spatial dimension `d`.
    pub pix_dims: Vec<i64>,
    pub pix_role: Vec<Option<usize>>,
    /// Output features.
    pub o: i64,
    /// Input features.
    pub c: i64,
    pub in_st_batch: i64,
    pub in_st_feat: i64,
    pub in_st_sp: Vec<i64>,
    pub in_sp: Vec<i64>,
    pub k_sp: Vec<i64>,
    pub k_st_sp: Vec<i64>,
    pub k_st_in: i64,
    pub window: Vec<axle_ir::WindowDim>,
}

impl ConvFast {
    fn lanes(&self) -> i64 {
        if self.ty == ElementType::F64 {
            8
        } else {
            16
        }
    }
    /// Work items: tiles of `MR` output pixels.
    pub fn items(&self) -> i64 {
        (numel(&self.pix_dims) as u64).div_ceil(MR as u64) as i64
    }
}

/// The tiled geometry of convolution `id`, if the tiled kernel handles it.
pub(crate) fn conv_fast(m: &Module, id: InstId) -> Option<ConvFast> {
    let ops = m.operands(id);
    let (l, r, out) = (
        m.array_shape(ops[0])?,
        m.array_shape(ops[1])?,
        m.array_shape(id)?,
    );
    if !matches!(
        out.ty,
        ElementType::F32 | ElementType::F64 | ElementType::F16 | ElementType::BF16
    ) || l.ty != out.ty
        || r.ty != out.ty
    {
        return None;
    }
    let g = conv_geo(m, id).ok()?;
    if g.fgc != 1 || g.bgc != 1 || g.window.iter().any(|w| w.lhs_dilate != 1) {
        return None;
    }
    let dn = &g.dn;
    let orank = out.rank();
    let krank = r.rank();
    if dn.output_feature as usize != orank - 1 || dn.kernel_output_feature as usize != krank - 1 {
        return None;
    }
    if numel(&out.dims) == 0 || numel(&l.dims) == 0 {
        return None;
    }
    let (sl, sk) = (strides(&l.dims), strides(&r.dims));
    let pix_dims = out.dims[..orank - 1].to_vec();
    let pix_role = (0..orank - 1)
        .map(|d| dn.output_spatial.iter().position(|&s| s as usize == d))
        .collect();
    Some(ConvFast {
        ty: out.ty,
        pix_dims,
        pix_role,
        o: out.dims[orank - 1],
        c: g.c_in,
        in_st_batch: sl[dn.input_batch as usize],
        in_st_feat: sl[dn.input_feature as usize],
        in_st_sp: dn.input_spatial.iter().map(|&d| sl[d as usize]).collect(),
        in_sp: g.in_sp.clone(),
        k_sp: g.k_sp.clone(),
        k_st_sp: dn.kernel_spatial.iter().map(|&d| sk[d as usize]).collect(),
        k_st_in: sk[dn.kernel_input_feature as usize],
        window: g.window.clone(),
    })
}

/// The body of [`nest_acc`]: `(coordinates, loop-carried values) -> next values`.
type NestFn<'f, 'ctx> = dyn FnMut(&[IntValue<'ctx>], Vec<Val<'ctx>>) -> R<Vec<Val<'ctx>>> + 'f;

/// Loops over `dims` threading `accs` through `body(coordinates, accs)`.
fn nest_acc<'ctx>(
    cg: &Cg<'ctx>,
    dims: &[i64],
    multi: &mut Vec<IntValue<'ctx>>,
    accs: Vec<Val<'ctx>>,
    body: &mut NestFn<'_, 'ctx>,
) -> R<Vec<Val<'ctx>>> {
    let k = multi.len();
    if k == dims.len() {
        return body(multi, accs);
    }
    let mut inner = multi.clone();
    cg.for_range_acc(cg.c64(0), cg.c64(dims[k]), &accs, |i, a| {
        inner.push(i);
        nest_acc(cg, dims, &mut inner, a.to_vec(), body)
    })
}

/// Emits the tiled convolution into the current kernel function: work items `start..end`,
/// each tile stored to `out`, or with `finish` handed as it is to that register epilogue
/// ([`RegFn`], `f32` and `f64` only). `finish.as_deref_mut()` reborrows the epilogue for each
/// tile the loops emit (clippy takes it for a no-op).
#[allow(clippy::too_many_arguments, clippy::needless_option_as_deref)]
pub(crate) fn emit_conv<'ctx>(
    cg: &Cg<'ctx>,
    geo: &ConvFast,
    input: PointerValue<'ctx>,
    kernel: PointerValue<'ctx>,
    out: PointerValue<'ctx>,
    start: IntValue<'ctx>,
    end: IntValue<'ctx>,
    mut finish: Option<&mut RegFn<'_, 'ctx>>,
) -> R<()> {
    if finish.is_some() && !matches!(geo.ty, ElementType::F32 | ElementType::F64) {
        return Err("a register epilogue of a narrow-float convolution".into());
    }
    let bb = &cg.b;
    let p_total = numel(&geo.pix_dims);
    cg.for_range(start, end, |t| {
        let p0 = bb.build_int_nsw_mul(t, cg.c64(MR), "p0")?;
        let full = bb.build_int_compare(
            IntPredicate::SLE,
            bb.build_int_nsw_add(p0, cg.c64(MR), "pe")?,
            cg.c64(p_total),
            "full",
        )?;
        let tb = cg.block("conv.full")?;
        let rb = cg.block("conv.rest")?;
        let done = cg.block("conv.done")?;
        bb.build_conditional_branch(full, tb, rb)?;
        bb.position_at_end(tb);
        tile(cg, geo, MR, p0, input, kernel, out, finish.as_deref_mut())?;
        bb.build_unconditional_branch(done)?;
        bb.position_at_end(rb);
        let pend = min64(
            cg,
            bb.build_int_nsw_add(p0, cg.c64(MR), "pe")?,
            cg.c64(p_total),
        )?;
        cg.for_range(p0, pend, |p| {
            tile(cg, geo, 1, p, input, kernel, out, finish.as_deref_mut())
        })?;
        bb.build_unconditional_branch(done)?;
        bb.position_at_end(done);
        Ok(())
    })
}

/// Output pixels `p0 .. p0 + rows`, every strip of output features: stored to `out`, or
/// handed to `finish` (a register epilogue, [`RegFn`]) as they are.
#[allow(clippy::too_many_arguments)]
fn tile<'ctx>(
    cg: &Cg<'ctx>,
    geo: &ConvFast,
    rows: i64,
    p0: IntValue<'ctx>,
    input: PointerValue<'ctx>,
    kernel: PointerValue<'ctx>,
    out: PointerValue<'ctx>,
    mut finish: Option<&mut RegFn<'_, 'ctx>>,
) -> R<()> {
    let bb = &cg.b;
    let lanes = geo.lanes();
    let nr = 2 * lanes;
    let ety = cg.reg_ty(geo.ty)?.into_float_type();
    let vty = ety.vec_type(lanes as u32);
    // The in-memory element and vector types: `i16` for the narrow floats.
    let mty = cg.mem_ty(geo.ty)?;
    let mvty = match mty {
        BasicTypeEnum::FloatType(t) => t.vec_type(lanes as u32),
        BasicTypeEnum::IntType(t) => t.vec_type(lanes as u32),
        _ => return Err(format!("no tiled convolution for {:?}", geo.ty).into()),
    };
    let fma = cg.intrinsic("llvm.fmuladd", &[vty.into()])?;
    let mload = cg.intrinsic("llvm.masked.load", &[mvty.into(), cg.ptr().into()])?;
    let mstore = cg.intrinsic("llvm.masked.store", &[mvty.into(), cg.ptr().into()])?;
    let align = cg.i32().const_int(geo.ty.byte_size() as u64, false);
    let lane_ids: Vec<_> = (0..lanes)
        .map(|i| cg.i64().const_int(i as u64, false))
        .collect();
    let lane_vec = VectorType::const_vector(&lane_ids);
    let nsp = geo.k_sp.len();
    // Per pixel: input base offset (batch) and output spatial coordinates.
    let mut bases = Vec::with_capacity(rows as usize);
    let mut ocs: Vec<Vec<IntValue>> = Vec::with_capacity(rows as usize);
    for r in 0..rows {
        let p = bb.build_int_nsw_add(p0, cg.c64(r), "p")?;
        let multi = delinearize(cg, &geo.pix_dims, p)?;
        let mut base = cg.c64(0);
        let mut oc = vec![cg.c64(0); nsp];
        for (d, role) in geo.pix_role.iter().enumerate() {
            match role {
                Some(s) => oc[*s] = multi[d],
                None => base = bb.build_int_nsw_mul(multi[d], cg.c64(geo.in_st_batch), "b")?,
            }
        }
        bases.push(base);
        ocs.push(oc);
    }
    let strips = (geo.o as u64).div_ceil(nr as u64) as i64;
    cg.for_range(cg.c64(0), cg.c64(strips), |s| {
        let o0 = bb.build_int_nsw_mul(s, cg.c64(nr), "o0")?;
        let w = min64(
            cg,
            bb.build_int_nsw_sub(cg.c64(geo.o), o0, "w")?,
            cg.c64(nr),
        )?;
        let mut masks = Vec::with_capacity(2);
        for v in 0..2 {
            let lim = bb.build_int_nsw_sub(w, cg.c64(v * lanes), "lim")?;
            masks.push(bb.build_int_compare(
                IntPredicate::SLT,
                lane_vec,
                splat_int(cg, lim, lanes)?,
                "mask",
            )?);
        }
        let zero = vty.const_zero();
        let mzero = mvty.const_zero();
        let init: Vec<Val> = (0..2 * rows).map(|_| bv(zero)).collect();
        let mut multi = Vec::new();
        let accs = nest_acc(cg, &geo.k_sp, &mut multi, init, &mut |kc, acc| {
            // Input offsets and validity of each pixel at this kernel position.
            let mut offs = Vec::with_capacity(rows as usize);
            let mut oks = Vec::with_capacity(rows as usize);
            for r in 0..rows as usize {
                let mut ok = cg.i1().const_all_ones();
                let mut off = bases[r];
                for d in 0..nsp {
                    let wdim = &geo.window[d];
                    let p = bb.build_int_nsw_mul(ocs[r][d], cg.c64(wdim.stride), "p")?;
                    let p = bb.build_int_nsw_sub(p, cg.c64(wdim.pad_lo), "p")?;
                    let kk = bb.build_int_nsw_mul(kc[d], cg.c64(wdim.rhs_dilate), "kk")?;
                    let p = bb.build_int_nsw_add(p, kk, "p")?;
                    let ge = bb.build_int_compare(IntPredicate::SGE, p, cg.c64(0), "ge")?;
                    let lt =
                        bb.build_int_compare(IntPredicate::SLT, p, cg.c64(geo.in_sp[d]), "lt")?;
                    ok = bb.build_and(ok, bb.build_and(ge, lt, "in")?, "ok")?;
                    let t = bb.build_int_nsw_mul(p, cg.c64(geo.in_st_sp[d]), "t")?;
                    off = bb.build_int_nsw_add(off, t, "off")?;
                }
                offs.push(bb.build_select(ok, off, cg.c64(0), "off")?.into_int_value());
                oks.push(ok);
            }
            let mut koff = o0;
            for d in 0..nsp {
                let kq = if geo.window[d].reversal {
                    bb.build_int_nsw_sub(cg.c64(geo.k_sp[d] - 1), kc[d], "kr")?
                } else {
                    kc[d]
                };
                let t = bb.build_int_nsw_mul(kq, cg.c64(geo.k_st_sp[d]), "kt")?;
                koff = bb.build_int_nsw_add(koff, t, "ko")?;
            }
            cg.for_range_acc(cg.c64(0), cg.c64(geo.c), &acc, |c, acc| {
                let kc_off = bb.build_int_nsw_add(
                    koff,
                    bb.build_int_nsw_mul(c, cg.c64(geo.k_st_in), "kc")?,
                    "k",
                )?;
                let mut kv: Vec<VectorValue> = Vec::with_capacity(2);
                for (h, mask) in masks.iter().enumerate() {
                    let q = cg.gep(
                        mty,
                        kernel,
                        bb.build_int_nsw_add(kc_off, cg.c64(h as i64 * lanes), "q")?,
                    )?;
                    let v = cg
                        .call(mload, &[bv(q), bv(align), bv(*mask), bv(mzero)])?
                        .ok_or("masked load returned nothing")?;
                    kv.push(widen(cg, geo.ty, v.into_vector_value(), lanes)?);
                }
                let cterm = bb.build_int_nsw_mul(c, cg.c64(geo.in_st_feat), "ct")?;
                let mut next = Vec::with_capacity(acc.len());
                for r in 0..rows as usize {
                    let q = cg.gep(mty, input, bb.build_int_nsw_add(offs[r], cterm, "io")?)?;
                    let a = bb.build_load(mty, q, "a")?;
                    if let Some(i) = a.as_instruction_value() {
                        let _ = i.set_alignment(geo.ty.byte_size() as u32);
                    }
                    let a = cg.load_form(geo.ty, a)?;
                    let a = bb
                        .build_select(oks[r], a.into_float_value(), ety.const_zero(), "a")?
                        .into_float_value();
                    let sa = splat_float(cg, a, lanes)?;
                    for h in 0..2 {
                        let x = cg
                            .call(fma, &[bv(sa), bv(kv[h]), acc[2 * r + h]])?
                            .ok_or("fmuladd returned nothing")?;
                        next.push(x);
                    }
                }
                Ok(next)
            })
        })?;
        if let Some(finish) = &mut finish {
            let mut pixels = Vec::with_capacity(rows as usize);
            for r in 0..rows {
                pixels.push(bb.build_int_nsw_add(p0, cg.c64(r), "p")?);
            }
            let m2 = [masks[0], masks[1]];
            return finish(&RegTile {
                accs,
                lanes,
                masks: vec![m2; rows as usize],
                col_masks: m2,
                rows: pixels,
                col0: o0,
            });
        }
        for r in 0..rows {
            let p = bb.build_int_nsw_add(p0, cg.c64(r), "p")?;
            let off =
                bb.build_int_nsw_add(bb.build_int_nsw_mul(p, cg.c64(geo.o), "po")?, o0, "oo")?;
            for (h, mask) in masks.iter().enumerate() {
                let q = cg.gep(
                    mty,
                    out,
                    bb.build_int_nsw_add(off, cg.c64(h as i64 * lanes), "q")?,
                )?;
                let v = narrow(
                    cg,
                    geo.ty,
                    accs[(2 * r) as usize + h].into_vector_value(),
                    lanes,
                )?;
                cg.call(mstore, &[bv(v), bv(q), bv(align), bv(*mask)])?;
            }
        }
        Ok(())
    })
}

/// A vector of `f16`/`bf16` bits as loaded from memory, widened to `f32` lanes (exact); other
/// types are already in register form.
fn widen<'ctx>(
    cg: &Cg<'ctx>,
    ty: ElementType,
    v: VectorValue<'ctx>,
    lanes: i64,
) -> R<VectorValue<'ctx>> {
    let b = &cg.b;
    let f32v = cg.f32().vec_type(lanes as u32);
    Ok(match ty {
        ElementType::BF16 => {
            let w = b.build_int_z_extend(v, cg.i32().vec_type(lanes as u32), "bfw")?;
            let w = b.build_left_shift(w, splat_int(cg, cg.c32(16), lanes)?, "bfs")?;
            b.build_bit_cast(w, f32v, "bf2f")?.into_vector_value()
        }
        ElementType::F16 => {
            let h = b
                .build_bit_cast(v, cg.ctx.f16_type().vec_type(lanes as u32), "h")?
                .into_vector_value();
            b.build_float_ext(h, f32v, "h2f")?
        }
        _ => v,
    })
}

/// The inverse of [`widen`]: `f32` lanes rounded to nearest even as `f16`/`bf16` bits, lane by
/// lane the same as [`Cg::to_mem`] (a NaN stays a quiet NaN with its sign).
fn narrow<'ctx>(
    cg: &Cg<'ctx>,
    ty: ElementType,
    v: VectorValue<'ctx>,
    lanes: i64,
) -> R<VectorValue<'ctx>> {
    let b = &cg.b;
    let i16v = cg.ctx.i16_type().vec_type(lanes as u32);
    Ok(match ty {
        ElementType::BF16 => {
            let c = |x: i64| splat_int(cg, cg.c32(x), lanes);
            let bits = b
                .build_bit_cast(v, cg.i32().vec_type(lanes as u32), "fb")?
                .into_vector_value();
            let hi = b.build_right_shift(bits, c(16)?, false, "hi")?;
            let lsb = b.build_and(hi, c(1)?, "lsb")?;
            let bias = b.build_int_add(lsb, c(0x7fff)?, "bias")?;
            let r = b.build_right_shift(b.build_int_add(bits, bias, "r")?, c(16)?, false, "r")?;
            let qnan = b.build_or(hi, c(0x40)?, "qnan")?;
            let isnan = b.build_float_compare(inkwell::FloatPredicate::UNO, v, v, "isnan")?;
            let out = b.build_select(isnan, qnan, r, "bf")?.into_vector_value();
            b.build_int_truncate(out, i16v, "bf16")?
        }
        ElementType::F16 => {
            let h = b.build_float_trunc(v, cg.ctx.f16_type().vec_type(lanes as u32), "f2h")?;
            b.build_bit_cast(h, i16v, "hb")?.into_vector_value()
        }
        _ => v,
    })
}
