//! What one element of a `dot` or `convolution` is, for every backend: the dimension numbers
//! of a dot, the elemental forms of both ([`gen_contraction`]: the value of one output element
//! as a loop over the contraction, rounded to the result type once, its innermost dimension
//! summed as a tree of short chains for `f32` and `f64` (see [`Gen::nest_sum`]);
//! the CPU and NVPTX backends give it to their generators; a convolution's checked geometry is
//! [`axle_ir::conv_geo()`], which the evaluator reads too), the accumulation type (`f32` for
//! `f32` and narrower floats, `f64`, wrapping `i64` for integers and pred, `c64` for complex
//! unless `c128` or `f64` is involved, then `c128`, as the evaluator accumulates) and one
//! accumulation step (a fused multiply-add for `f32` and `f64`, as the evaluator's). The
//! backends' loops and tilings are their own.

use axle_ir::{conv_geo, AttrKey, ElementType, InstId};
use inkwell::values::IntValue;

use crate::cg::{Cg, Val};
use crate::elemental::{window_dim_pos, Gen, Index, NestBody, SUM_FAN};
use crate::error::R;
use crate::ops;

/// The accumulation type of a dot or convolution with result `out` and operands `a`, `b`.
pub fn acc_type(out: ElementType, a: ElementType, b: ElementType) -> R<ElementType> {
    if out.is_complex() || a.is_complex() || b.is_complex() {
        // `c64` unless `c128` (or `f64`) is involved, as XLA and the evaluator accumulate:
        // products of large `c64` values overflow to infinities (and `inf - inf` to NaN) where
        // `c128` kept them finite until the final rounding (cpu campaign seed 17955192027,
        // case 4551).
        if [out, a, b]
            .iter()
            .any(|t| matches!(t, ElementType::C128 | ElementType::F64))
        {
            Ok(ElementType::C128)
        } else {
            Ok(ElementType::C64)
        }
    } else if out.is_float() {
        if out == ElementType::F64 || a == ElementType::F64 || b == ElementType::F64 {
            Ok(ElementType::F64)
        } else {
            Ok(ElementType::F32)
        }
    } else if out.is_int() || out.is_pred() {
        // A pred result is true where some product is (XLA's `dot` on `pred`): the count of
        // true products, converted to pred.
        Ok(ElementType::S64)
    } else {
        Err(format!("dot and convolution are not supported for {}", out.name()).into())
    }
}

/// `acc + a * b` in the accumulation type: one fused multiply-add (`llvm.fma`, one rounding)
/// for real `f32` and `f64` accumulators, as the evaluator and XLA CPU's kernels contract a
/// dot or convolution (a two-term sum is `fma(a1, b1, a0 * b0)`; unfused, terms far larger
/// than the result cancel to another value, cpu campaign seed 1795530001, case 8640); a
/// product then a sum otherwise (complex, integer).
pub fn mul_add<'ctx>(
    cg: &Cg<'ctx>,
    acc_ty: ElementType,
    acc: Val<'ctx>,
    a: Val<'ctx>,
    b: Val<'ctx>,
) -> R<Val<'ctx>> {
    if matches!(acc_ty, ElementType::F32 | ElementType::F64) {
        return cg.call_intrinsic("llvm.fma", &[a, b, acc]);
    }
    let p = ops::binary(cg, axle_ir::Opcode::Multiply, acc_ty, a, b)?;
    ops::binary(cg, axle_ir::Opcode::Add, acc_ty, acc, p)
}

/// The dimension numbers of a dot: batch and contracting dimensions of both sides and the free
/// dimensions.
pub struct DotDims {
    /// The left operand's batch dimensions.
    pub lb: Vec<i64>,
    /// The right operand's batch dimensions (paired with `lb`).
    pub rb: Vec<i64>,
    /// The left operand's contracting dimensions.
    pub lc: Vec<i64>,
    /// The right operand's contracting dimensions (paired with `lc`).
    pub rc: Vec<i64>,
    /// The left operand's free dimensions, in order (the output's after the batch ones).
    pub lfree: Vec<i64>,
    /// The right operand's free dimensions, in order (the output's last ones).
    pub rfree: Vec<i64>,
}

/// The dimension numbers of `dot` `id` whose operands have ranks `lrank` and `rrank`.
pub fn dot_dims(m: &axle_ir::Module, id: InstId, lrank: usize, rrank: usize) -> R<DotDims> {
    let get = |k: AttrKey| m.ints_attr(id, &k).unwrap_or(&[]).to_vec();
    let lb = get(AttrKey::LhsBatchDims);
    let rb = get(AttrKey::RhsBatchDims);
    let lc = get(AttrKey::LhsContractingDims);
    let rc = get(AttrKey::RhsContractingDims);
    if lb.len() != rb.len() || lc.len() != rc.len() {
        return Err("dot dimension numbers do not pair up".into());
    }
    let lfree = (0..lrank as i64)
        .filter(|d| !lb.contains(d) && !lc.contains(d))
        .collect();
    let rfree = (0..rrank as i64)
        .filter(|d| !rb.contains(d) && !rc.contains(d))
        .collect();
    Ok(DotDims {
        lb,
        rb,
        lc,
        rc,
        lfree,
        rfree,
    })
}

/// The value of `dot` or `convolution` `id` at `idx`: the elemental form of both, which a
/// backend gives its generators ([`Gen::with_contraction`]) where it computes them one output
/// element at a time.
pub fn gen_contraction<'ctx>(g: &mut Gen<'_, 'ctx>, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
    match g.m.opcode(id) {
        axle_ir::Opcode::Dot => gen_dot(g, id, idx),
        axle_ir::Opcode::Convolution => gen_convolution(g, id, idx),
        op => Err(format!("{} is not a contraction", op.name()).into()),
    }
}

/// Elemental `dot`: the sum over the contracting dimensions in row-major order.
pub fn gen_dot<'ctx>(g: &mut Gen<'_, 'ctx>, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
    let m = g.m;
    let cg = g.cg;
    let ops = m.operands(id);
    let (l, r) = (ops[0], ops[1]);
    let ls = m.array_shape(l).ok_or("dot of a non-array")?.clone();
    let rs = m.array_shape(r).ok_or("dot of a non-array")?.clone();
    let out = m.array_shape(id).ok_or("dot of a non-array")?.clone();
    let dd = dot_dims(m, id, ls.rank(), rs.rank())?;
    let acc_ty = acc_type(out.ty, ls.ty, rs.ty)?;
    let nb = dd.lb.len();
    let nlf = dd.lfree.len();
    let cdims: Vec<i64> = dd.lc.iter().map(|&d| ls.dims[d as usize]).collect();
    for (a, b) in dd.lc.iter().zip(&dd.rc) {
        if ls.dims[*a as usize] != rs.dims[*b as usize] {
            return Err("dot dimension sizes do not match".into());
        }
    }
    let zero = cg.const_f(acc_ty, 0.0)?;
    let out_multi = idx.multi.clone();
    let mut body = |g: &mut Gen<'_, 'ctx>, c: &[IntValue<'ctx>], accs: Vec<Val<'ctx>>| {
        let mut lm = vec![cg.c64(0); ls.rank()];
        let mut rm = vec![cg.c64(0); rs.rank()];
        for k in 0..nb {
            lm[dd.lb[k] as usize] = out_multi[k];
            rm[dd.rb[k] as usize] = out_multi[k];
        }
        for (j, &d) in dd.lfree.iter().enumerate() {
            lm[d as usize] = out_multi[nb + j];
        }
        for (j, &d) in dd.rfree.iter().enumerate() {
            rm[d as usize] = out_multi[nb + nlf + j];
        }
        for k in 0..dd.lc.len() {
            lm[dd.lc[k] as usize] = c[k];
            rm[dd.rc[k] as usize] = c[k];
        }
        let li = g.index_multi(&ls.dims, lm)?;
        let ri = g.index_multi(&rs.dims, rm)?;
        let a = g.gen1(l, &li)?;
        let b = g.gen1(r, &ri)?;
        let a = ops::convert(cg, ls.ty, acc_ty, a)?;
        let b = ops::convert(cg, rs.ty, acc_ty, b)?;
        Ok(vec![mul_add(cg, acc_ty, accs[0], a, b)?])
    };
    let acc = sum_nest(g, acc_ty, &cdims, zero, &mut body)?;
    ops::convert(cg, acc_ty, out.ty, acc[0])
}

/// Elemental `convolution`: the sum over the kernel's spatial positions (row-major), then the
/// input features of the output feature's group, skipping padding and dilation holes.
pub fn gen_convolution<'ctx>(g: &mut Gen<'_, 'ctx>, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
    let m = g.m;
    let cg = g.cg;
    let b = &cg.b;
    let ops = m.operands(id);
    let (l, r) = (ops[0], ops[1]);
    let ls = m
        .array_shape(l)
        .ok_or("convolution of a non-array")?
        .clone();
    let rs = m
        .array_shape(r)
        .ok_or("convolution of a non-array")?
        .clone();
    let out = m
        .array_shape(id)
        .ok_or("convolution of a non-array")?
        .clone();
    let geo = conv_geo(m, id)?;
    let acc_ty = acc_type(out.ty, ls.ty, rs.ty)?;
    if ls.dims.contains(&0) {
        // Every window position is padding: the sum is empty. (The loop below loads at a
        // clamped position before masking the value, which would read an empty buffer.)
        return ops::convert(cg, acc_ty, out.ty, cg.const_f(acc_ty, 0.0)?);
    }
    let dn = &geo.dn;
    let nsp = geo.k_sp.len();
    let blocks = geo.fgc.max(geo.bgc);
    let cgs = geo.c_in / geo.fgc;
    let ob = geo.o_ch / blocks;
    let n = idx.multi[dn.output_batch as usize];
    let o = idx.multi[dn.output_feature as usize];
    let oc: Vec<IntValue> = dn
        .output_spatial
        .iter()
        .map(|&d| idx.multi[d as usize])
        .collect();
    let blk = if blocks > 1 {
        b.build_int_unsigned_div(o, cg.c64(ob), "blk")?
    } else {
        cg.c64(0)
    };
    let img = if geo.bgc > 1 {
        let t = b.build_int_nsw_mul(blk, cg.c64(geo.n_out), "img")?;
        b.build_int_nsw_add(t, n, "img")?
    } else {
        n
    };
    let c0 = if geo.fgc > 1 {
        b.build_int_nsw_mul(blk, cg.c64(cgs), "c0")?
    } else {
        cg.c64(0)
    };
    let mut loop_dims = geo.k_sp.clone();
    loop_dims.push(cgs);
    let zero = cg.const_f(acc_ty, 0.0)?;
    let mut body = |g: &mut Gen<'_, 'ctx>, c: &[IntValue<'ctx>], accs: Vec<Val<'ctx>>| {
        let b = &cg.b;
        let mut ok = cg.i1().const_all_ones();
        let mut lm = vec![cg.c64(0); ls.rank()];
        let mut rm = vec![cg.c64(0); rs.rank()];
        for d in 0..nsp {
            let (q, here) = window_dim_pos(cg, &geo.window[d], geo.in_sp[d], oc[d], c[d])?;
            ok = b.build_and(ok, here, "ok")?;
            lm[dn.input_spatial[d] as usize] = q;
            let kc = if geo.window[d].reversal {
                b.build_int_nsw_sub(cg.c64(geo.k_sp[d] - 1), c[d], "kr")?
            } else {
                c[d]
            };
            rm[dn.kernel_spatial[d] as usize] = kc;
        }
        for x in lm.iter_mut() {
            *x = b.build_select(ok, *x, cg.c64(0), "q")?.into_int_value();
        }
        let ic = c[nsp];
        lm[dn.input_batch as usize] = img;
        lm[dn.input_feature as usize] = b.build_int_nsw_add(c0, ic, "c")?;
        rm[dn.kernel_input_feature as usize] = ic;
        rm[dn.kernel_output_feature as usize] = o;
        let li = g.index_multi(&ls.dims, lm)?;
        let ri = g.index_multi(&rs.dims, rm)?;
        let a = g.gen1(l, &li)?;
        let w = g.gen1(r, &ri)?;
        let a = ops::convert(cg, ls.ty, acc_ty, a)?;
        let w = ops::convert(cg, rs.ty, acc_ty, w)?;
        let next = mul_add(cg, acc_ty, accs[0], a, w)?;
        Ok(vec![b.build_select(ok, next, accs[0], "acc")?])
    };
    let acc = sum_nest(g, acc_ty, &loop_dims, zero, &mut body)?;
    ops::convert(cg, acc_ty, out.ty, acc[0])
}

/// The loop nest of a contraction over `dims` from `zero`: for an `f32` or `f64` sum, the
/// innermost dimension summed as a tree of short chains ([`Gen::nest_sum`]), so that a long
/// contraction is not one rounding chain; else [`Gen::nest`].
fn sum_nest<'a, 'ctx>(
    g: &mut Gen<'a, 'ctx>,
    acc_ty: ElementType,
    dims: &[i64],
    zero: Val<'ctx>,
    body: &mut NestBody<'_, 'a, 'ctx>,
) -> R<Vec<Val<'ctx>>> {
    if matches!(acc_ty, ElementType::F32 | ElementType::F64) {
        let minus = g.cg.const_f(acc_ty, -0.0)?;
        g.nest_sum(dims, vec![zero], SUM_FAN, &[minus], body)
    } else {
        g.nest(dims, vec![zero], body)
    }
}
