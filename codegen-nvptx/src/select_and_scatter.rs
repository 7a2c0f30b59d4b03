//! Select-and-scatter kernels: a `select-and-scatter` (an unfused one, or the root of a fusion
//! whose other instructions compute its operand, source and init value elementally) as one
//! kernel computing one output (operand-shaped) element per thread by gathering, where the
//! evaluator and XLA scatter.
//!
//! Semantics (the evaluator's, `axle_analysis`): every output element starts at the init
//! value; the windows are visited in row-major order of the source; in each window the
//! selected position is the first element in window (row-major) order that the `select`
//! computation prefers to every later one (`best = e` whenever `select(best, e)` is false),
//! over the window's positions inside the operand (padding is never selected; a window with
//! none selects nothing); then `out[best] = scatter(out[best], source[window])`.
//!
//! Thread `x` (one output element) visits, in row-major order, exactly the windows that
//! contain `x` (along each dimension `o` from `ceil((x + pad_lo - size + 1) / stride)`, at
//! most `ceil(size / stride)` of them, each checked to lie in the source and to contain
//! `x`), recomputes each window's selection the evaluator's way, and where it is `x` folds
//! the window's source value into its own with the `scatter` computation. The windows that
//! select `x` are thereby folded in the evaluator's order (row-major source order), so each
//! element receives the same sequence of `scatter` applications and the result is
//! bit-identical to the evaluator's, floats included. No thread writes another's element: no
//! races, no atomics, no dependence on timing.
//!
//! Cost: each thread evaluates `select` once per position of each window containing it, so
//! overlapping windows (stride below size) are recomputed by each of their elements; the
//! common non-overlapping pooling gradient selects each window once per element.
//!
//! Refused, with an error naming the instruction: dilated windows (as the evaluator refuses
//! them), and computations or operands the elemental generators cannot emit.

use axle_codegen_llvm::cg::Val;
use axle_codegen_llvm::elemental::{arr_of, window, window_pos, Gen};
use axle_codegen_llvm::error::R;
use axle_ir::{AttrKey, ElementType, InstId, Module, Opcode};
use inkwell::values::PointerValue;
use inkwell::IntPredicate;

use crate::launch::LaunchPlan;

/// The select-and-scatter instruction `id` computes: itself, or its fusion's root; `None`
/// for anything else.
pub(crate) fn select_and_scatter_of(m: &Module, id: InstId) -> Option<InstId> {
    let root = match m.opcode(id) {
        Opcode::Fusion => m.root(m.comp_attr(id, &AttrKey::Calls)?),
        _ => id,
    };
    (m.opcode(root) == Opcode::SelectAndScatter).then_some(root)
}

/// Checks what the kernel needs of select-and-scatter `s`: three operands and an undilated
/// window of the operand's rank.
pub(crate) fn check_select_and_scatter(m: &Module, s: InstId) -> R<()> {
    let ops = m.operands(s);
    if ops.len() != 3 {
        return Err("select-and-scatter needs an operand, a source and an init value".into());
    }
    let rank = arr_of(m, ops[0])?.rank();
    let wd = window(m, s, rank)?;
    if wd
        .iter()
        .any(|w| w.lhs_dilate != 1 || w.rhs_dilate != 1 || w.stride < 1 || w.size < 0)
    {
        return Err("select-and-scatter takes no dilated windows".into());
    }
    if arr_of(m, ops[1])?.rank() != rank {
        return Err("select-and-scatter's source must have the operand's rank".into());
    }
    Ok(())
}

/// Emits the body of the kernel of select-and-scatter `s` (launched as `plan`, one thread per
/// output element) at the builder's position, in a kernel whose inputs are bound in `g`,
/// storing output elements of type `ty` at `out`.
pub(crate) fn emit_select_and_scatter<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    s: InstId,
    plan: &LaunchPlan,
    ty: ElementType,
    out: PointerValue<'ctx>,
) -> R<()> {
    let m = g.m;
    let cg = g.cg;
    let ops = m.operands(s).to_vec();
    let (operand, source, init) = (ops[0], ops[1], ops[2]);
    let in_dims = arr_of(m, operand)?.dims.to_vec();
    let src_dims = arr_of(m, source)?.dims.to_vec();
    let rank = in_dims.len();
    let wd = window(m, s, rank)?;
    let select = m
        .comp_attr(s, &AttrKey::Select)
        .ok_or("select-and-scatter needs select")?;
    let scatter = m
        .comp_attr(s, &AttrKey::Scatter)
        .ok_or("select-and-scatter needs scatter")?;
    let t = cg.thread_index(plan.wide_index)?;
    let inside =
        cg.b.build_int_compare(IntPredicate::ULT, t, cg.c64(plan.elements as i64), "inside")?;
    cg.if_then(inside, || {
        let b = &cg.b;
        let x = g.index_linear(&in_dims, t)?;
        let si = g.scalar_index();
        let init_v = g.gen1(init, &si)?;
        // Per dimension: the first window that may contain `x`, and how many may.
        let mut first = Vec::with_capacity(rank);
        let mut counts = Vec::with_capacity(rank);
        for (d, w) in wd.iter().enumerate() {
            let a = b.build_int_nsw_add(x.multi[d], cg.c64(w.pad_lo - w.size + 1), "a")?;
            let up = b.build_int_nsw_add(a, cg.c64(w.stride - 1), "up")?;
            let q = b.build_int_signed_div(up, cg.c64(w.stride), "q")?;
            let pos = b.build_int_compare(IntPredicate::SGT, a, cg.c64(0), "pos")?;
            first.push(b.build_select(pos, q, cg.c64(0), "o0")?.into_int_value());
            counts.push(if w.size == 0 {
                0
            } else {
                ((w.size + w.stride - 1) / w.stride).min(src_dims[d])
            });
        }
        let acc = g.nest(&counts, vec![init_v], &mut |g, js, accs| {
            let b = &cg.b;
            // The window `o`, whether it is in the source and contains `x`.
            let mut valid = cg.i1().const_all_ones();
            let mut o = Vec::with_capacity(rank);
            for d in 0..rank {
                let od = b.build_int_nsw_add(first[d], js[d], "o")?;
                let lt = b.build_int_compare(IntPredicate::SLT, od, cg.c64(src_dims[d]), "o.in")?;
                let lo = b.build_int_nsw_mul(od, cg.c64(wd[d].stride), "lo")?;
                let lo = b.build_int_nsw_sub(lo, cg.c64(wd[d].pad_lo), "lo")?;
                let le = b.build_int_compare(IntPredicate::SLE, lo, x.multi[d], "covers")?;
                valid = b.build_and(valid, b.build_and(lt, le, "v")?, "valid")?;
                o.push(od);
            }
            let o: Vec<_> = o
                .into_iter()
                .map(|od| b.build_select(valid, od, cg.c64(0), "o.safe"))
                .collect::<Result<Vec<_>, _>>()?
                .into_iter()
                .map(|v| v.into_int_value())
                .collect();
            // The window's selection: (any position inside, value, linear position).
            let wsizes: Vec<i64> = wd.iter().map(|w| w.size).collect();
            let (p0, _) = window_pos(cg, &wd, &in_dims, &o, &vec![cg.c64(0); rank])?;
            let p0 = g.index_multi(&in_dims, p0)?;
            let v0 = g.gen1(operand, &p0)?;
            let start: Vec<Val<'ctx>> = vec![cg.i1().const_zero().into(), v0, cg.c64(0).into()];
            let sel = g.nest(&wsizes, start, &mut |g, k, best| {
                let b = &cg.b;
                let (pos, here) = window_pos(cg, &wd, &in_dims, &o, k)?;
                let pi = g.index_multi(&in_dims, pos)?;
                let v = g.gen1(operand, &pi)?;
                let keep = g
                    .apply(select, &[best[1], v])?
                    .into_iter()
                    .next()
                    .ok_or("select returns nothing")?
                    .into_int_value();
                let has = best[0].into_int_value();
                let no_best = b.build_not(has, "none")?;
                let other = b.build_not(keep, "other")?;
                let take = b.build_and(here, b.build_or(no_best, other, "t")?, "take")?;
                Ok(vec![
                    b.build_or(has, here, "has")?.into(),
                    b.build_select(take, v, best[1], "best")?,
                    b.build_select(take, pi.linear, best[2].into_int_value(), "at")?,
                ])
            })?;
            let hit = b.build_and(valid, sel[0].into_int_value(), "hit")?;
            let mine =
                b.build_int_compare(IntPredicate::EQ, sel[2].into_int_value(), x.linear, "mine")?;
            let hit = b.build_and(hit, mine, "hit")?;
            let oi = g.index_multi(&src_dims, o)?;
            let src = g.gen1(source, &oi)?;
            let next = g
                .apply(scatter, &[accs[0], src])?
                .into_iter()
                .next()
                .ok_or("scatter returns nothing")?;
            Ok(vec![b.build_select(hit, next, accs[0], "acc")?])
        })?;
        cg.store(ty, out, t, acc[0])
    })
}
