//! Row kernels ([`RowPlan`]): softmax, layernorm, RMS norm and every other fusion whose
//! reductions over the minor dimensions feed work on the same rows.
//!
//! Items are rows (the leading dimensions the plan names). For each row, each pass loops once
//! over the row's elements of its reductions' inputs (several independent reductions share
//! the pass) with the accumulators in registers; the reductions' results are then bound as
//! the row's values, so everything reading them (through broadcasts) gets registers, not a
//! recomputation. A last pass computes and stores the row's full-size outputs (a vectorizable
//! loop over the inner dimensions) and its row-size outputs. A full-size output much larger
//! than the cache goes to a row buffer on the stack instead and is streamed from there to
//! memory with non-temporal stores ([`crate::stream`]); the kernel then ends with a fence.
//!
//! Invariants (established by the planner, [`crate::fused`]): every read of an absorbed
//! reduction is at the current row, and a pass only reads reductions of earlier passes. A row
//! is computed by one item with the same code, so results do not depend on how rows are split
//! across threads.

use axle_ir::{AttrKey, ElementType, InstId, Opcode};
use inkwell::values::{IntValue, PointerValue};

use crate::cg::{numel, strides, Val};
use crate::elemental::{
    arr_of, inst_leaves, minmax_intrinsic, simple_binary, Ext, Gen, Index, SUM_RUN_MINOR,
};
use crate::error::R;
use crate::fused::RowPlan;
use crate::kernels::{Kc, GRAIN_ELEMS};

/// The largest row (in bytes) of a full-size output that is streamed through a row buffer on
/// the stack: 64 KiB stays within L2 beside the row's inputs.
const STREAM_ROW_BYTES: i64 = 64 << 10;

impl<'a, 'ctx> Kc<'a, 'ctx> {
    /// Emits a row kernel; returns its items (rows) and grain.
    pub(crate) fn emit_row(&mut self, plan: &RowPlan) -> R<(i64, i64)> {
        let m = self.m;
        let cg = self.cg();
        let b = &cg.b;
        let root = self.root;
        let leaves: Vec<InstId> = if m.opcode(root) == Opcode::Tuple {
            m.operands(root).to_vec()
        } else {
            vec![root]
        };
        let shapes = inst_leaves(m, root)?;
        if shapes.len() != leaves.len() {
            return Err("a row kernel's leaves must be arrays".into());
        }
        let k = plan.rows.len();
        let rows = numel(&plan.rows);
        let inner = plan.full[k..].to_vec();
        let inner_n = numel(&inner);
        if rows == 0 {
            return Ok((0, 1));
        }
        let inner_st = strides(&inner);
        // Elements each row reads and writes, for the grain.
        let mut per_row = inner_n.max(1);
        for pass in &plan.passes {
            let input = m.operands(pass[0])[0];
            per_row += numel(&arr_of(m, input)?.dims[k..]);
        }
        // Row buffers of the cached values, on the stack (in the entry block, so they are
        // allocated once per call).
        let row_buffer = |ty: axle_ir::ElementType, name: &str| {
            crate::stream::entry_alloca(cg, ty, inner_n, name)
        };
        let mut caches = Vec::with_capacity(plan.cached.len());
        for &(pass, v) in &plan.cached {
            let ty = arr_of(m, v)?.ty;
            caches.push((pass, v, ty, row_buffer(ty, "row.cache")?));
        }
        // Full-size outputs much larger than the cache are computed into a row buffer and
        // streamed to memory from there ([`crate::stream`]), when the row buffer is small.
        let mut streamed: Vec<Option<(i64, PointerValue<'ctx>)>> = vec![None; leaves.len()];
        for (l, sh) in shapes.iter().enumerate() {
            let es = sh.ty.byte_size() as i64;
            let whole = numel(&sh.dims).saturating_mul(es);
            if sh.dims.len() > k && inner_n * es <= STREAM_ROW_BYTES {
                if let Some(vb) = crate::stream::stream_bytes(self.gemm, sh.ty, whole) {
                    streamed[l] = Some((vb, row_buffer(sh.ty, "row.out")?));
                }
            }
        }
        let (start, end) = (self.start, self.end);
        cg.for_range(start, end, |row| {
            self.g.push_scope();
            let ri = self.g.index_linear(&plan.rows, row)?;
            let base = b.build_int_nsw_mul(row, cg.c64(inner_n), "base")?;
            for (pi, pass) in plan.passes.iter().enumerate() {
                let keep: Vec<_> = caches
                    .iter()
                    .filter(|c| c.0 == pi)
                    .map(|&(_, v, ty, p)| (v, ty, p))
                    .collect();
                self.row_pass(pass, &ri.multi, base, &keep)?;
                for (v, _, p) in keep {
                    self.g.bind(v, Ext::Row(p, base));
                }
            }
            // The row's outputs.
            for (l, (&leaf, sh)) in leaves.iter().zip(&shapes).enumerate() {
                if sh.dims.len() == k {
                    let v = self.g.gen1(leaf, &ri)?;
                    cg.store(sh.ty, self.outs[l], row, v)?;
                }
            }
            let full: Vec<usize> = (0..leaves.len())
                .filter(|&l| shapes[l].dims.len() > k)
                .collect();
            if !full.is_empty() && inner_n > 0 {
                let outs = self.outs.clone();
                self.g.nest(&inner, Vec::new(), &mut |g, im, _| {
                    let mut multi = ri.multi.clone();
                    multi.extend_from_slice(im);
                    let mut lin = base;
                    for (d, &c) in im.iter().enumerate() {
                        if inner[d] != 1 {
                            let t = cg.b.build_int_nsw_mul(c, cg.c64(inner_st[d]), "t")?;
                            lin = cg.b.build_int_nsw_add(lin, t, "lin")?;
                        }
                    }
                    let idx = Index {
                        id: g.fresh_id(),
                        multi,
                        linear: lin,
                    };
                    for &l in &full {
                        let v = g.gen1(leaves[l], &idx)?;
                        match streamed[l] {
                            Some((_, buf)) => {
                                let at = cg.b.build_int_nsw_sub(lin, base, "at")?;
                                cg.store(shapes[l].ty, buf, at, v)?;
                            }
                            None => cg.store(shapes[l].ty, outs[l], lin, v)?,
                        }
                    }
                    Ok(Vec::new())
                })?;
                for &l in &full {
                    if let Some((vb, buf)) = streamed[l] {
                        let ty = shapes[l].ty;
                        let dst = cg.gep(cg.mem_ty(ty)?, self.outs[l], base)?;
                        crate::stream::emit_stream_copy(cg, ty, vb, dst, buf, cg.c64(inner_n))?;
                    }
                }
            }
            for pass in &plan.passes {
                for &r in pass {
                    self.g.unbind(r);
                }
            }
            for &(_, v, _, _) in &caches {
                self.g.unbind(v);
            }
            self.g.pop_scope();
            Ok(())
        })?;
        if streamed.iter().any(Option::is_some) {
            crate::stream::emit_sfence(cg)?;
        }
        Ok((rows, (GRAIN_ELEMS / per_row).max(1)))
    }

    /// One pass over the current row (coordinates `row`, starting at linear offset `base` of
    /// the full dimensions) computing the reductions `pass` (their inputs share their
    /// dimensions) and storing the values `keep` into their row buffers, then binding each
    /// reduction to its result.
    fn row_pass(
        &mut self,
        pass: &[InstId],
        row: &[IntValue<'ctx>],
        base: IntValue<'ctx>,
        keep: &[(InstId, axle_ir::ElementType, PointerValue<'ctx>)],
    ) -> R<()> {
        let m = self.m;
        let cg = self.cg();
        let first_input = m.operands(pass[0])[0];
        let in_dims = arr_of(m, first_input)?.dims.to_vec();
        let k = row.len();
        let red_dims = in_dims[k..].to_vec();
        let s = self.g.scalar_index();
        let mut init = Vec::new();
        let mut spans = Vec::with_capacity(pass.len());
        for &r in pass {
            let ops = m.operands(r);
            let n = ops.len() / 2;
            spans.push((init.len(), n));
            for &o in &ops[n..] {
                init.push(self.g.gen1(o, &s)?);
            }
        }
        let mut steps = Vec::with_capacity(pass.len());
        for &r in pass {
            let comp = m
                .comp_attr(r, &AttrKey::ToApply)
                .ok_or("reduce needs to_apply")?;
            steps.push((comp, minmax_intrinsic(m, r)));
        }
        // A pass of float sums only sums each row as a tree of short chains
        // ([`Gen::nest_sum`]).
        let mut zeros = Vec::with_capacity(pass.len());
        for &r in pass {
            let ty = arr_of(m, m.operands(r)[0])?.ty;
            let comp = m.comp_attr(r, &AttrKey::ToApply);
            let sum = m.operands(r).len() == 2
                && matches!(ty, ElementType::F32 | ElementType::F64)
                && comp.and_then(|c| simple_binary(m, c)) == Some(Opcode::Add);
            if sum {
                zeros.push(cg.const_f(ty, -0.0)?);
            }
        }
        let sums = zeros.len() == pass.len();
        let row = row.to_vec();
        let mut body = |g: &mut Gen<'_, 'ctx>, rm: &[IntValue<'ctx>], accs: Vec<Val<'ctx>>| {
            let mut multi = row.clone();
            multi.extend_from_slice(rm);
            let idx = g.index_multi(&in_dims, multi)?;
            let mut next = Vec::with_capacity(accs.len());
            for (j, &r) in pass.iter().enumerate() {
                let (at, n) = spans[j];
                let mut args = accs[at..at + n].to_vec();
                for &o in &m.operands(r)[..n] {
                    args.push(g.gen1(o, &idx)?);
                }
                let (comp, minmax) = steps[j];
                next.extend(g.reduce_step(comp, minmax, &args)?);
            }
            for &(v, ty, p) in keep {
                let x = g.gen1(v, &idx)?;
                let at = cg.b.build_int_nsw_sub(idx.linear, base, "at")?;
                cg.store(ty, p, at, x)?;
            }
            Ok(next)
        };
        let accs = if sums {
            self.g
                .nest_sum(&red_dims, init, SUM_RUN_MINOR, &zeros, &mut body)?
        } else {
            self.g.nest(&red_dims, init, &mut body)?
        };
        for (j, &r) in pass.iter().enumerate() {
            let (at, n) = spans[j];
            self.g.bind(r, Ext::Vals(accs[at..at + n].to_vec()));
        }
        Ok(())
    }
}
