//! Kernels: the LLVM function of each kernel thunk.
//!
//! Every kernel has the signature `void kernel(void *const *bufs, int64_t start, int64_t end)`:
//! `bufs` holds its output buffers, then the buffers of its bindings (then its scratch buffers,
//! its GEMM operand views and its lifted constants, [`crate::lifted`]),
//! and `[start, end)` is the part of its work items to do, so the runtime can split the items
//! across threads. Results never depend on the split: every output element is computed by one
//! item with the same code.
//!
//! - `Loop`: items are output elements (a flat loop when every index is the linear one, so the
//!   loop vectorizes with no index arithmetic) or output rows (an outer loop over rows and a
//!   vectorizable inner loop over the last dimension); a root that reads an array through a
//!   transpose moving its last dimension runs in 32 x 32 tiles instead (items: 32-row blocks).
//! - `Reduce`: when the last input dimension is kept, items are output rows and the loops run
//!   over the input in row-major order, accumulating into the output row: the inner loop is
//!   contiguous and vectorizes, and each output element still sees its inputs in the
//!   evaluator's order; sibling reductions of one geometry (a tuple root) share the loops.
//!   Otherwise it is a `Loop` over the elemental reduce.
//! - `Row`: see [`crate::row`]; `Gemm` and `Conv` with an epilogue: see [`crate::epilogue`].
//! - `Dus` in place writes only the update window; `Scatter` and `SelectAndScatter` are
//!   sequential; `Sort` and `TopK` sort each row's indices with a stable merge sort (the
//!   evaluator's algorithm, so any comparator gives the same permutation), or radix-sort them
//!   ([`crate::radix`]); a `TopK` with a small `k` keeps its best by selection instead
//!   ([`crate::select`]), with the same result.

use axle_codegen_llvm::rng_bit_generator::emit_rng;
use axle_ir::{
    ArrayShape, AttrKey, ComparisonDirection, ComparisonType, ElementType, InstId, Module, Opcode,
};
use inkwell::module::Linkage;
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::cg::{bv, numel, Cg, Val, NO_UNROLL};
use crate::elemental::{
    arr_of, inst_leaves, narrow_sum, simple_binary, sum_spans, widen_sum, window, window_pos, Ext,
    Gen, Index, SUM_FAN,
};
use crate::error::{at, R};
use crate::fused::KernelPlan;
use crate::gemm::{ceil_div64, GemmTarget};
use crate::lower::{Kernel, KernelKind};
use crate::ops;

pub(crate) use crate::parallel_cost::GRAIN_ELEMS;

/// Block calls of an `rng-bit-generator` per work item group below which splitting across
/// threads does not pay.
const RNG_GRAIN_BLOCKS: i64 = 1 << 12;

/// An emitted kernel: its number of work items and the smallest useful group.
pub(crate) struct Emitted {
    pub items: i64,
    pub grain: i64,
}

/// The type of every kernel function, `void (ptr bufs, i64 start, i64 end)`.
pub(crate) fn kernel_type<'ctx>(cg: &Cg<'ctx>) -> inkwell::types::FunctionType<'ctx> {
    let (ptr, i64t) = (cg.ptr(), cg.i64());
    cg.ctx
        .void_type()
        .fn_type(&[ptr.into(), i64t.into(), i64t.into()], false)
}

/// Emits the function of kernel `k`; `ptrs` is the number of buffers it takes.
pub(crate) fn emit_kernel<'ctx>(
    cg: &Cg<'ctx>,
    gemm: &GemmTarget,
    m: &Module,
    k: &Kernel,
    shared: &[(usize, usize)],
    name: &str,
) -> R<Emitted> {
    let ptr = cg.ptr();
    let fty = kernel_type(cg);
    // External: the entry point calling it is in another LLVM module (see `crate::modules`).
    let f = cg.add_fn(name, fty, Some(Linkage::External));
    // Kernels stay functions of their own: the runtime takes their address, and one function
    // per kernel keeps instruction selection linear in the number of kernels.
    f.add_attribute(
        inkwell::attributes::AttributeLoc::Function,
        cg.enum_attr("noinline"),
    );
    let entry = cg.ctx.append_basic_block(f, "entry");
    cg.b.position_at_end(entry);
    let bufs = f
        .get_nth_param(0)
        .ok_or("kernel without parameters")?
        .into_pointer_value();
    let start = f
        .get_nth_param(1)
        .ok_or("kernel without start")?
        .into_int_value();
    let end = f
        .get_nth_param(2)
        .ok_or("kernel without end")?
        .into_int_value();
    let mut slot = 0i64;
    let mut next_ptr = || -> R<PointerValue<'ctx>> {
        let p = cg.gep(ptr.into(), bufs, cg.c64(slot))?;
        slot += 1;
        Ok(cg.b.build_load(ptr, p, "buf")?.into_pointer_value())
    };
    let mut outs = Vec::with_capacity(k.outputs.len());
    for _ in &k.outputs {
        outs.push(next_ptr()?);
    }
    let mut g = Gen::new(cg, m).with_contraction(crate::conv::gen_contraction);
    let mut inputs = Vec::new();
    for (inst, bs) in &k.bindings {
        let mut ps = Vec::with_capacity(bs.len());
        for _ in bs {
            ps.push(next_ptr()?);
        }
        inputs.extend_from_slice(&ps);
        g.bind(*inst, Ext::Bufs(ps));
    }
    // An output in the memory of an input is written through the input's pointer.
    for &(o, i) in shared {
        *outs.get_mut(o).ok_or("a shared output out of range")? =
            *inputs.get(i).ok_or("a shared input out of range")?;
    }
    let mut scratch = Vec::with_capacity(k.scratch.len());
    for _ in &k.scratch {
        scratch.push(next_ptr()?);
    }
    let scratch_ptr = scratch.first().copied();
    let mut views = Vec::with_capacity(k.views.len());
    for _ in &k.views {
        views.push(next_ptr()?);
    }
    // Lifted constants are values from the kernel's first block on.
    for &c in &k.lifted {
        let ty = crate::elemental::arr_of(m, c)?.ty;
        let v = cg.load(ty, next_ptr()?, cg.c64(0))?;
        g.bind(c, Ext::Vals(vec![v]));
    }
    let mut kc = Kc {
        g,
        m,
        gemm,
        root: k.root,
        outs,
        views,
        bound: crate::lower::bound_arrays(&k.bindings),
        start,
        end,
    };
    let (items, grain) = match k.kind {
        KernelKind::Loop => kc.emit_loop()?,
        KernelKind::Reduce => kc.emit_reduce()?,
        KernelKind::Dus if k.in_place => kc.emit_dus_in_place()?,
        KernelKind::Dus => kc.emit_loop()?,
        KernelKind::Scatter => kc.emit_scatter(k.in_place)?,
        KernelKind::SelectAndScatter => kc.emit_select_and_scatter()?,
        KernelKind::Sort => kc.emit_sort(scratch_ptr.ok_or("sort without scratch")?)?,
        KernelKind::TopK => kc.emit_topk(scratch_ptr.ok_or("topk without scratch")?)?,
        KernelKind::Row => match &k.plan {
            KernelPlan::Row(p) => kc.emit_row(p)?,
            _ => return Err("a row kernel without a row plan".into()),
        },
        KernelKind::Gemm | KernelKind::Conv if matches!(k.plan, KernelPlan::Epilogue(_)) => {
            let KernelPlan::Epilogue(e) = &k.plan else {
                return Err("an epilogue kernel without its plan".into());
            };
            kc.emit_epilogue(e, &scratch)?
        }
        KernelKind::Gemm => kc.emit_gemm(scratch_ptr)?,
        KernelKind::Conv => kc.emit_conv(scratch_ptr)?,
        KernelKind::Rng => (
            emit_rng(&mut kc.g, m, k.root, &kc.outs, kc.start, kc.end)?,
            RNG_GRAIN_BLOCKS,
        ),
    };
    cg.b.build_return(None)?;
    let ns = crate::parallel_cost::kernel_ns(m, k.origin, k.root);
    Ok(Emitted {
        items,
        grain: crate::parallel_cost::grain_by_cost(items, grain, ns),
    })
}

/// Loads the values of a sort row's operands at a position: `(gen, row coordinates, position)`.
pub(crate) type RowLoad<'r, 'a, 'ctx> =
    dyn FnMut(&mut Gen<'a, 'ctx>, &[IntValue<'ctx>], IntValue<'ctx>) -> R<Vec<Val<'ctx>>> + 'r;

/// Whether the first element comes before the second in a sort row: `(gen, first values,
/// second values, first position, second position)`.
pub(crate) type RowLess<'r, 'a, 'ctx> = dyn FnMut(
        &mut Gen<'a, 'ctx>,
        &[Val<'ctx>],
        &[Val<'ctx>],
        IntValue<'ctx>,
        IntValue<'ctx>,
    ) -> R<IntValue<'ctx>>
    + 'r;

/// Writes a sorted row out: `(gen, row coordinates, index plane, value planes)`.
pub(crate) type RowFinish<'r, 'a, 'ctx> = dyn FnMut(&mut Gen<'a, 'ctx>, &[IntValue<'ctx>], PointerValue<'ctx>, &[PointerValue<'ctx>]) -> R<()>
    + 'r;

/// The state of one kernel being emitted.
pub(crate) struct Kc<'a, 'ctx> {
    pub g: Gen<'a, 'ctx>,
    pub m: &'a Module,
    /// The target and thread count the GEMM's blocking is chosen for (the same the lowering
    /// used).
    pub gemm: &'a GemmTarget,
    pub root: InstId,
    pub outs: Vec<PointerValue<'ctx>>,
    /// A GEMM's operands where their views start ([`crate::lower::Kernel::views`]).
    pub views: Vec<PointerValue<'ctx>>,
    /// The bindings that are one array in memory, where views of a GEMM operand start (the
    /// lowering's choice, [`crate::lower::bound_arrays`]).
    pub bound: Vec<InstId>,
    pub start: IntValue<'ctx>,
    pub end: IntValue<'ctx>,
}

impl<'ctx> Kc<'_, 'ctx> {
    /// The GEMM geometry of `dot` reading its operands through their views, and the operands'
    /// pointers: where each view starts, passed in by the entry code, so the geometry's own
    /// offsets are zero.
    pub(crate) fn gemm_operands(
        &self,
        dot: InstId,
    ) -> R<(crate::gemm::GemmGeo, [PointerValue<'ctx>; 2])> {
        let (mut geo, _) =
            crate::gemm::gemm_geo_views(self.m, dot, self.gemm, &|x| self.bound.contains(&x))
                .ok_or("dot is not a GEMM")?;
        (geo.a_off, geo.b_off) = (0, 0);
        match self.views[..] {
            [a, b] => Ok((geo, [a, b])),
            _ => Err("a GEMM without its operands' views".into()),
        }
    }
}

/// Whether every index `gen` needs below `id` is the linear index of a same-sized array, so a
/// flat loop with no coordinate arithmetic computes it.
pub(crate) fn flat_ok(m: &Module, g: &Gen, id: InstId, dims: &[i64], depth: usize) -> bool {
    use Opcode::*;
    if depth > 64 {
        return false;
    }
    if g.is_bound(id) {
        return true;
    }
    let op = m.opcode(id);
    let Some(s) = m.array_shape(id) else {
        return false;
    };
    let same_or_scalar = |o: &InstId| -> bool {
        match m.array_shape(*o) {
            Some(a) if a.rank() == 0 => flat_ok(m, g, *o, &[], depth + 1),
            Some(a) if a.dims[..] == *dims => flat_ok(m, g, *o, dims, depth + 1),
            _ => false,
        }
    };
    match op {
        Constant => true,
        Reshape => m
            .array_shape(m.operands(id)[0])
            .is_some_and(|a| flat_ok(m, g, m.operands(id)[0], &a.dims.clone(), depth + 1)),
        Bitcast => {
            crate::elemental::bitcast_is_reshape(m, id).unwrap_or(false)
                && m.array_shape(m.operands(id)[0])
                    .is_some_and(|a| flat_ok(m, g, m.operands(id)[0], &a.dims.clone(), depth + 1))
        }
        Broadcast
            if s.rank() == 0
                || m.array_shape(m.operands(id)[0])
                    .is_some_and(|a| a.rank() == 0) =>
        {
            m.operands(id)
                .iter()
                .all(|o| flat_ok(m, g, *o, &[], depth + 1))
        }
        Copy => m.operands(id).iter().all(same_or_scalar),
        BitcastConvert => {
            let a = m.array_shape(m.operands(id)[0]);
            a.is_some_and(|a| a.ty.bits() == s.ty.bits())
                && m.operands(id).iter().all(same_or_scalar)
        }
        _ if op.is_elementwise() && op != Opcode::Map => m.operands(id).iter().all(same_or_scalar),
        _ => false,
    }
}

impl<'a, 'ctx> Kc<'a, 'ctx> {
    pub(crate) fn cg(&self) -> &'a Cg<'ctx> {
        self.g.cg
    }

    /// Stores leaf values in memory form ([`Gen::gen_mem`]) at linear offset `lin` of the
    /// outputs.
    pub(crate) fn store_leaves(
        &self,
        shapes: &[ArrayShape],
        vals: &[Val<'ctx>],
        lin: IntValue<'ctx>,
    ) -> R<()> {
        for ((s, p), v) in shapes.iter().zip(&self.outs).zip(vals) {
            self.cg().store_mem(s.ty, *p, lin, *v)?;
        }
        Ok(())
    }

    /// Computes the root at coordinates `multi` (linear offset `lin`) inside the scope the
    /// caller pushed, closes that scope, and stores the root's leaves at `lin`.
    fn gen_and_store(
        &mut self,
        shapes: &[ArrayShape],
        multi: Vec<IntValue<'ctx>>,
        lin: IntValue<'ctx>,
    ) -> R<()> {
        let idx = Index {
            id: self.g.fresh_id(),
            multi,
            linear: lin,
        };
        let v = self.g.gen_mem(self.root, &idx)?;
        self.g.pop_scope();
        self.store_leaves(shapes, &v, lin)
    }

    /// The output dimension to tile with the last one when the root reads an array through a
    /// transpose that moves its last dimension elsewhere (reading it row by row would stride
    /// through memory): the first such transpose met walking from the root's leaves through
    /// elementwise ops of the root's dimensions.
    fn transposed_dim(&self, dims: &[i64]) -> Option<usize> {
        let m = self.m;
        let rank = dims.len();
        if rank < 2 {
            return None;
        }
        let mut stack: Vec<InstId> = match m.opcode(self.root) {
            Opcode::Tuple => m.operands(self.root).to_vec(),
            _ => vec![self.root],
        };
        let mut seen = std::collections::HashSet::new();
        while let Some(id) = stack.pop() {
            if !seen.insert(id)
                || self.g.is_bound(id)
                || m.array_shape(id).map(|a| &a.dims[..]) != Some(dims)
            {
                continue;
            }
            let op = m.opcode(id);
            if op == Opcode::Transpose {
                let perm = m.ints_attr(id, &AttrKey::Dimensions)?;
                let a = perm.iter().position(|&p| p as usize == rank - 1)?;
                if a != rank - 1 {
                    return Some(a);
                }
            } else if op.is_elementwise() || matches!(op, Opcode::Copy | Opcode::Map) {
                stack.extend_from_slice(m.operands(id));
            }
        }
        None
    }

    /// The root's leaves in tiles of 32 x 32 over output dimensions `a` and the last one (the
    /// others outermost): a transposed read and the row-major writes both stay within a few
    /// cache lines per tile. Items are blocks of 32 along `a`.
    fn emit_tiled(&mut self, dims: &[i64], a: usize) -> R<(i64, i64)> {
        const T: i64 = 32;
        let m = self.m;
        let cg = self.cg();
        let b = &cg.b;
        let root = self.root;
        let shapes = inst_leaves(m, root)?;
        let rank = dims.len();
        let last = rank - 1;
        let others: Vec<usize> = (0..rank).filter(|&d| d != a && d != last).collect();
        let odims: Vec<i64> = others.iter().map(|&d| dims[d]).collect();
        let blocks = (dims[a] as u64).div_ceil(T as u64) as i64;
        let col_blocks = (dims[last] as u64).div_ceil(T as u64) as i64;
        let st = crate::cg::strides(dims);
        let (start, end) = (self.start, self.end);
        cg.for_range(start, end, |item| {
            self.g.push_scope();
            let ob = b.build_int_unsigned_div(item, cg.c64(blocks), "ob")?;
            let ab = b.build_int_unsigned_rem(item, cg.c64(blocks), "ab")?;
            let oc = self.g.index_linear(&odims, ob)?;
            let mut base = cg.c64(0);
            for (k, &d) in others.iter().enumerate() {
                let t = b.build_int_nsw_mul(oc.multi[k], cg.c64(st[d]), "t")?;
                base = b.build_int_nsw_add(base, t, "base")?;
            }
            let i0 = b.build_int_nsw_mul(ab, cg.c64(T), "i0")?;
            let i1 = crate::gemm::min64(
                cg,
                b.build_int_nsw_add(i0, cg.c64(T), "i1")?,
                cg.c64(dims[a]),
            )?;
            cg.for_range(cg.c64(0), cg.c64(col_blocks), |cb| {
                let j0 = b.build_int_nsw_mul(cb, cg.c64(T), "j0")?;
                let j1 = crate::gemm::min64(
                    cg,
                    b.build_int_nsw_add(j0, cg.c64(T), "j1")?,
                    cg.c64(dims[last]),
                )?;
                cg.for_range(i0, i1, |i| {
                    self.g.push_scope();
                    let row = b.build_int_nsw_add(
                        base,
                        b.build_int_nsw_mul(i, cg.c64(st[a]), "r")?,
                        "row",
                    )?;
                    cg.for_range(j0, j1, |j| {
                        self.g.push_scope();
                        let mut multi = vec![cg.c64(0); rank];
                        for (k, &d) in others.iter().enumerate() {
                            multi[d] = oc.multi[k];
                        }
                        multi[a] = i;
                        multi[last] = j;
                        let lin = b.build_int_nsw_add(row, j, "lin")?;
                        self.gen_and_store(&shapes, multi, lin)
                    })?;
                    self.g.pop_scope();
                    Ok(())
                })
            })?;
            self.g.pop_scope();
            Ok(())
        })?;
        let items = numel(&odims) * blocks;
        Ok((items, (GRAIN_ELEMS / (T * dims[last])).max(1)))
    }

    fn emit_loop(&mut self) -> R<(i64, i64)> {
        let m = self.m;
        let cg = self.cg();
        let shapes = inst_leaves(m, self.root)?;
        let dims = shapes.first().map(|s| s.dims.to_vec()).unwrap_or_default();
        let n = numel(&dims);
        if n == 0 {
            return Ok((0, 1));
        }
        if let Some(a) = self.transposed_dim(&dims) {
            return self.emit_tiled(&dims, a);
        }
        let (start, end) = (self.start, self.end);
        // Elements read per output element: a reduce root reads its whole reduced extent.
        let per_elem = self.reduced_per_element()?;
        if self.loop_is_flat(&dims) {
            self.emit_elements(&dims, start, end)?;
            return Ok((n, (GRAIN_ELEMS / per_elem).max(1)));
        }
        // Items are rows of the last dimension.
        let last = dims[dims.len() - 1];
        let lo = cg.b.build_int_nsw_mul(start, cg.c64(last), "lo")?;
        let hi = cg.b.build_int_nsw_mul(end, cg.c64(last), "hi")?;
        self.emit_elements(&dims, lo, hi)?;
        Ok((n / last, (GRAIN_ELEMS / (last * per_elem)).max(1)))
    }

    /// The input elements a `Loop` kernel reads per output element: the reduced extent of a
    /// reduce root (the largest of a tuple's), 1 for any other root.
    fn reduced_per_element(&self) -> R<i64> {
        let m = self.m;
        let leaves: Vec<InstId> = if m.opcode(self.root) == Opcode::Tuple {
            m.operands(self.root).to_vec()
        } else {
            vec![self.root]
        };
        let mut most = 1;
        for l in leaves {
            if m.opcode(l) == Opcode::Reduce {
                let input = numel(&arr_of(m, m.operands(l)[0])?.dims);
                let out = inst_leaves(m, l)?
                    .first()
                    .map_or(1, |s| numel(&s.dims).max(1));
                most = most.max(input / out);
            }
        }
        Ok(most.max(1))
    }

    /// Whether the root's leaves (of dimensions `dims`) can be computed in a flat loop with
    /// no coordinate arithmetic.
    pub(crate) fn loop_is_flat(&self, dims: &[i64]) -> bool {
        let m = self.m;
        dims.len() <= 1 || {
            let ops_flat = |id: InstId| flat_ok(m, &self.g, id, dims, 0);
            match m.opcode(self.root) {
                Opcode::Tuple => m.operands(self.root).iter().all(|&o| ops_flat(o)),
                _ => ops_flat(self.root),
            }
        }
    }

    /// Computes and stores the root's leaves (all of dimensions `dims`) at linear offsets
    /// `[lo, hi)`: a flat loop when [`Self::loop_is_flat`], otherwise a loop over the rows
    /// of the last dimension that `[lo, hi)` touches with a vectorizable inner loop over the
    /// part of each row inside the range.
    pub(crate) fn emit_elements(
        &mut self,
        dims: &[i64],
        lo: IntValue<'ctx>,
        hi: IntValue<'ctx>,
    ) -> R<()> {
        let m = self.m;
        let cg = self.cg();
        let b = &cg.b;
        let root = self.root;
        let shapes = inst_leaves(m, root)?;
        if self.loop_is_flat(dims) {
            return cg.for_range(lo, hi, |i| {
                self.g.push_scope();
                let idx = self.g.index_linear(dims, i)?;
                let v = self.g.gen_mem(root, &idx)?;
                self.g.pop_scope();
                self.store_leaves(&shapes, &v, i)
            });
        }
        let last = dims[dims.len() - 1];
        let r0 = b.build_int_unsigned_div(lo, cg.c64(last), "r0")?;
        let r1 = b.build_int_unsigned_div(
            b.build_int_nsw_add(hi, cg.c64(last - 1), "r1")?,
            cg.c64(last),
            "r1",
        )?;
        cg.for_range(r0, r1, |row| {
            let base = b.build_int_nsw_mul(row, cg.c64(last), "base")?;
            let j0 = max64(cg, b.build_int_nsw_sub(lo, base, "j0")?, cg.c64(0))?;
            let j1 = crate::gemm::min64(cg, b.build_int_nsw_sub(hi, base, "j1")?, cg.c64(last))?;
            self.emit_row_part(dims, row, j0, j1, &[])
        })
    }

    /// Computes and stores the root's leaves (all of dimensions `dims`) at linear offsets
    /// `[lo, lo + len)`, which lie in one row of the last dimension (`len` at least 1): one
    /// vectorizable loop, its row's coordinates computed once, that carries `hints` for LLVM's
    /// loop passes ([`Cg::for_range_hinted`]).
    pub(crate) fn emit_segment(
        &mut self,
        dims: &[i64],
        lo: IntValue<'ctx>,
        len: IntValue<'ctx>,
        hints: &[&str],
    ) -> R<()> {
        let cg = self.cg();
        let b = &cg.b;
        if self.loop_is_flat(dims) {
            let shapes = inst_leaves(self.m, self.root)?;
            let hi = b.build_int_nsw_add(lo, len, "hi")?;
            return cg.for_range_hinted(lo, hi, hints, |i| {
                self.g.push_scope();
                let idx = self.g.index_linear(dims, i)?;
                let v = self.g.gen_mem(self.root, &idx)?;
                self.g.pop_scope();
                self.store_leaves(&shapes, &v, i)
            });
        }
        let last = dims[dims.len() - 1];
        let row = b.build_int_unsigned_div(lo, cg.c64(last), "row")?;
        let base = b.build_int_nsw_mul(row, cg.c64(last), "base")?;
        let j0 = b.build_int_nsw_sub(lo, base, "j0")?;
        let j1 = b.build_int_nsw_add(j0, len, "j1")?;
        self.emit_row_part(dims, row, j0, j1, hints)
    }

    /// Computes and stores the root's leaves (all of dimensions `dims`, rank at least 2) at
    /// columns `j0..j1` of row `row` of the last dimension, in a vectorizable loop carrying
    /// `hints`.
    fn emit_row_part(
        &mut self,
        dims: &[i64],
        row: IntValue<'ctx>,
        j0: IntValue<'ctx>,
        j1: IntValue<'ctx>,
        hints: &[&str],
    ) -> R<()> {
        let cg = self.cg();
        let b = &cg.b;
        let shapes = inst_leaves(self.m, self.root)?;
        let rank = dims.len();
        let last = dims[rank - 1];
        self.g.push_scope();
        let oi = self.g.index_linear(&dims[..rank - 1], row)?;
        let base = b.build_int_nsw_mul(row, cg.c64(last), "base")?;
        cg.for_range_hinted(j0, j1, hints, |j| {
            self.g.push_scope();
            let mut multi = oi.multi.clone();
            multi.push(j);
            let lin = b.build_int_nsw_add(base, j, "lin")?;
            self.gen_and_store(&shapes, multi, lin)
        })?;
        self.g.pop_scope();
        Ok(())
    }

    /// Reduce roots (one, or a tuple of siblings reducing inputs of the same dimensions over
    /// the same dimensions): when the last input dimension is kept, items are output rows and
    /// the loops run over the inputs in row-major order, accumulating into the output rows.
    fn emit_reduce(&mut self) -> R<(i64, i64)> {
        let m = self.m;
        let root = self.root;
        let reduces: Vec<InstId> = if m.opcode(root) == Opcode::Tuple {
            m.operands(root).to_vec()
        } else {
            vec![root]
        };
        let first = reduces[0];
        let in_shape = arr_of(m, m.operands(first)[0])?.clone();
        let rank = in_shape.rank();
        let rdims = m
            .ints_attr(first, &AttrKey::Dimensions)
            .ok_or("reduce needs dimensions")?
            .to_vec();
        let mut reduced = vec![false; rank];
        for &d in &rdims {
            *reduced
                .get_mut(d as usize)
                .ok_or("reduce dimension out of range")? = true;
        }
        if rank == 0 || reduced[rank - 1] || numel(&in_shape.dims) == 0 {
            return self.emit_loop();
        }
        struct Red {
            comp: axle_ir::CompId,
            inputs: Vec<InstId>,
            inits: Vec<InstId>,
            shapes: Vec<ArrayShape>,
        }
        let cg = self.cg();
        let mut reds = Vec::with_capacity(reduces.len());
        let mut out_k = 0;
        let mut outs_of = Vec::with_capacity(reduces.len());
        for &r in &reduces {
            if m.opcode(r) != Opcode::Reduce
                || arr_of(m, m.operands(r)[0])?.dims != in_shape.dims
                || m.ints_attr(r, &AttrKey::Dimensions) != Some(&rdims[..])
            {
                return Err("sibling reductions must share their geometry".into());
            }
            let ops = m.operands(r);
            let nin = ops.len() / 2;
            let shapes = inst_leaves(m, r)?;
            outs_of.push(self.outs[out_k..out_k + shapes.len()].to_vec());
            out_k += shapes.len();
            reds.push(Red {
                comp: m
                    .comp_attr(r, &AttrKey::ToApply)
                    .ok_or("reduce needs to_apply")?,
                inputs: ops[..nin].to_vec(),
                inits: ops[nin..].to_vec(),
                shapes,
            });
        }
        let out_dims = reds[0].shapes[0].dims.to_vec();
        let dl = *out_dims.last().ok_or("reduce output of rank 0")?;
        let outer = out_dims[..out_dims.len() - 1].to_vec();
        let rows = numel(&outer);
        let red_dims: Vec<i64> = (0..rank)
            .filter(|&d| reduced[d])
            .map(|d| in_shape.dims[d])
            .collect();
        let in_dims = in_shape.dims.to_vec();
        // One float sum over a long innermost reduced dimension: a tree of short chains in
        // buffers of a row of outputs each (see `column_sum_level`).
        let tree = match (&reds[..], red_dims.last()) {
            ([red], Some(&n)) if red.inputs.len() == 1 && n > SUM_FAN => {
                let ty = red.shapes[0].ty;
                let sum = matches!(ty, ElementType::F32 | ElementType::F64)
                    && simple_binary(m, red.comp) == Some(Opcode::Add);
                let spans = sum_spans(n, SUM_FAN);
                (sum && spans.len() as i64 * dl <= COLUMN_TREE_ELEMS)
                    .then(|| -> R<_> {
                        let bufs = crate::stream::entry_alloca(
                            cg,
                            level_type(ty),
                            spans.len() as i64 * dl,
                            "colsum",
                        )?;
                        Ok((ty, spans, bufs))
                    })
                    .transpose()?
            }
            _ => None,
        };
        let (start, end) = (self.start, self.end);
        cg.for_range(start, end, |row| {
            let g = &mut self.g;
            g.push_scope();
            let oi = g.index_linear(&outer, row)?;
            let base = cg.b.build_int_nsw_mul(row, cg.c64(dl), "base")?;
            let s = g.scalar_index();
            let mut init = Vec::with_capacity(reds.len());
            for red in &reds {
                let mut v = Vec::with_capacity(red.inits.len());
                for &o in &red.inits {
                    v.push(g.gen1(o, &s)?);
                }
                init.push(v);
            }
            cg.for_range(cg.c64(0), cg.c64(dl), |j| {
                let lin = cg.b.build_int_nsw_add(base, j, "lin")?;
                for (r, red) in reds.iter().enumerate() {
                    for (k, sh) in red.shapes.iter().enumerate() {
                        cg.store(sh.ty, outs_of[r][k], lin, init[r][k])?;
                    }
                }
                Ok(())
            })?;
            if let Some((ty, spans, bufs)) = &tree {
                let (&n, outer_red) = red_dims.split_last().ok_or("no reduced dimension")?;
                let input = reds[0].inputs[0];
                let out = outs_of[0][0];
                let at = |g: &mut Gen<'_, 'ctx>, rmulti: &[IntValue<'ctx>], j: IntValue<'ctx>| {
                    g.index_multi(&in_dims, interleave(&reduced, rmulti, &oi.multi, j))
                };
                let col = ColumnSum {
                    ty: *ty,
                    spans,
                    n,
                    dl,
                    bufs: *bufs,
                    input,
                    at: &at,
                };
                g.nest(outer_red, Vec::new(), &mut |g, om, _| {
                    let top = spans.len() - 1;
                    let mut prefix = om.to_vec();
                    let sums = column_sum_level(g, &col, top, cg.c64(0), &mut prefix)?;
                    cg.for_range(cg.c64(0), cg.c64(dl), |j| {
                        let lin = cg.b.build_int_nsw_add(base, j, "lin")?;
                        let x = cg.load(*ty, out, lin)?;
                        let y = cg.load(level_type(*ty), sums, j)?;
                        let y = narrow_sum(cg, y, x)?;
                        let s =
                            cg.b.build_float_add(x.into_float_value(), y.into_float_value(), "s")?;
                        cg.store(*ty, out, lin, bv(s))
                    })?;
                    Ok(Vec::new())
                })?;
                g.pop_scope();
                return Ok(());
            }
            // The reduced coordinates in one loop, row-major (the nest's order), that LLVM
            // does not unroll: each iteration holds a vectorized loop over the row, and a
            // global average pool's 7 x 7 positions unrolled were 49 copies of it.
            let red_total = numel(&red_dims);
            cg.for_range_hinted(cg.c64(0), cg.c64(red_total), &[NO_UNROLL], |ri| {
                g.push_scope();
                let rmulti = g.index_linear(&red_dims, ri)?.multi;
                let done = cg.for_range(cg.c64(0), cg.c64(dl), |j| {
                    g.push_scope();
                    let lin = cg.b.build_int_nsw_add(base, j, "lin")?;
                    let idx =
                        g.index_multi(&in_dims, interleave(&reduced, &rmulti, &oi.multi, j))?;
                    for (r, red) in reds.iter().enumerate() {
                        let mut args = Vec::with_capacity(2 * red.inputs.len());
                        for (k, sh) in red.shapes.iter().enumerate() {
                            args.push(cg.load(sh.ty, outs_of[r][k], lin)?);
                        }
                        for &o in &red.inputs {
                            args.push(g.gen1(o, &idx)?);
                        }
                        let res = g.apply(red.comp, &args)?;
                        for (k, sh) in red.shapes.iter().enumerate() {
                            cg.store(sh.ty, outs_of[r][k], lin, res[k])?;
                        }
                    }
                    g.pop_scope();
                    Ok(())
                });
                g.pop_scope();
                done
            })?;
            g.pop_scope();
            Ok(())
        })?;
        let per_row = numel(&red_dims).max(1) * dl;
        Ok((rows, (GRAIN_ELEMS / per_row).max(1)))
    }

    fn emit_gemm(&mut self, scratch: Option<PointerValue<'ctx>>) -> R<(i64, i64)> {
        let (geo, [a, b]) = self.gemm_operands(self.root)?;
        let geo = geo.for_library(self.gemm);
        if let Some(lib) = &geo.library {
            let c = self.outs[0];
            crate::gemm::emit_library(self.cg(), lib, a, b, c, self.start, self.end)?;
            return Ok((geo.items(), geo.grain()));
        }
        let scratch = scratch.ok_or("gemm without scratch")?;
        crate::gemv::emit_dot(
            self.cg(),
            &geo,
            a,
            b,
            self.outs[0],
            scratch,
            self.start,
            self.end,
            None,
        )?;
        Ok((geo.items(), geo.grain()))
    }

    fn emit_conv(&mut self, pack: Option<PointerValue<'ctx>>) -> R<(i64, i64)> {
        let m = self.m;
        let geo = crate::conv_fast::conv_fast(m, self.root)
            .ok_or("not a tiled convolution")?
            .for_target(self.gemm);
        let ops = m.operands(self.root);
        let a = self
            .g
            .bound_ptr(ops[0])
            .ok_or("convolution operand is not in memory")?;
        let b = self
            .g
            .bound_ptr(ops[1])
            .ok_or("convolution operand is not in memory")?;
        crate::conv_fast::emit_conv(
            self.cg(),
            &geo,
            a,
            b,
            self.outs[0],
            pack,
            self.start,
            self.end,
            None,
        )?;
        Ok((
            geo.items(),
            (GRAIN_ELEMS * 64 / geo.item_work().max(1)).max(1),
        ))
    }

    fn emit_dus_in_place(&mut self) -> R<(i64, i64)> {
        let m = self.m;
        let cg = self.cg();
        let root = self.root;
        let ops = m.operands(root);
        let a = arr_of(m, ops[0])?.clone();
        let u = arr_of(m, ops[1])?.clone();
        let n = numel(&u.dims);
        if n == 0 {
            return Ok((0, 1));
        }
        let out = self.outs[0];
        let (start, end) = (self.start, self.end);
        let g = &mut self.g;
        let starts = g.dynamic_starts_pub(&ops[2..], a.rank())?;
        let mut clamped = Vec::with_capacity(a.rank());
        for k in 0..a.rank() {
            clamped.push(g.clamp64_pub(starts[k], 0, (a.dims[k] - u.dims[k]).max(0))?);
        }
        cg.for_range(start, end, |i| {
            g.push_scope();
            let ui = g.index_linear(&u.dims, i)?;
            let v = g.gen1(ops[1], &ui)?;
            let mut multi = Vec::with_capacity(a.rank());
            for k in 0..a.rank() {
                multi.push(cg.b.build_int_nsw_add(clamped[k], ui.multi[k], "o")?);
            }
            let oi = g.index_multi(&a.dims, multi)?;
            g.pop_scope();
            cg.store(a.ty, out, oi.linear, v)
        })?;
        Ok((n, GRAIN_ELEMS))
    }

    /// Runs `body` once, on the work item that starts at 0 (sequential kernels have one item).
    fn once(&mut self, body: impl FnOnce(&mut Self) -> R<()>) -> R<()> {
        let cg = self.cg();
        let first =
            cg.b.build_int_compare(IntPredicate::EQ, self.start, cg.c64(0), "first")?;
        let then = cg.block("once")?;
        let done = cg.block("done")?;
        cg.b.build_conditional_branch(first, then, done)?;
        cg.b.position_at_end(then);
        body(self)?;
        cg.b.build_unconditional_branch(done)?;
        cg.b.position_at_end(done);
        Ok(())
    }

    /// Writes operand `op` (computed elementally) into output `k`.
    fn copy_in(&mut self, op: InstId, k: usize) -> R<()> {
        let m = self.m;
        let cg = self.cg();
        let s = arr_of(m, op)?.clone();
        let n = numel(&s.dims);
        let out = self.outs[k];
        let g = &mut self.g;
        cg.for_range(cg.c64(0), cg.c64(n), |i| {
            g.push_scope();
            let idx = g.index_linear(&s.dims, i)?;
            let v = g.gen1(op, &idx)?;
            g.pop_scope();
            cg.store(s.ty, out, i, v)
        })
    }

    fn emit_scatter(&mut self, in_place: bool) -> R<(i64, i64)> {
        self.once(|kc| {
            let m = kc.m;
            let root = kc.root;
            let ops = m.operands(root).to_vec();
            if ops.len() < 3 || ops.len().is_multiple_of(2) {
                return Err("scatter needs operands, indices and as many updates".into());
            }
            let n = (ops.len() - 1) / 2;
            if !in_place {
                for k in 0..n {
                    kc.copy_in(ops[k], k)?;
                }
            } else {
                for k in 1..n {
                    kc.copy_in(ops[k], k)?;
                }
            }
            kc.scatter_updates(&ops, n)
        })?;
        Ok((1, 1))
    }

    fn scatter_updates(&mut self, ops: &[InstId], n: usize) -> R<()> {
        let m = self.m;
        let cg = self.cg();
        let root = self.root;
        let empty: &[i64] = &[];
        let ints = |k: AttrKey| m.ints_attr(root, &k).unwrap_or(empty).to_vec();
        let window_dims = ints(AttrKey::UpdateWindowDims);
        let inserted = ints(AttrKey::InsertedWindowDims);
        let to_operand = ints(AttrKey::ScatterDimsToOperandDims);
        let in_batch = ints(AttrKey::InputBatchingDims);
        let idx_batch = ints(AttrKey::ScatterIndicesBatchingDims);
        let ivd = m
            .int_attr(root, &AttrKey::IndexVectorDim)
            .ok_or("scatter needs index_vector_dim")? as usize;
        let comp = m
            .comp_attr(root, &AttrKey::ToApply)
            .ok_or("scatter needs to_apply")?;
        let op_shapes: Vec<ArrayShape> = ops[..n]
            .iter()
            .map(|&o| arr_of(m, o).cloned())
            .collect::<R<_>>()?;
        let ind = arr_of(m, ops[n])?.clone();
        let up = arr_of(m, ops[n + 1])?.clone();
        let op_dims = op_shapes[0].dims.to_vec();
        let op_rank = op_dims.len();
        let up_rank = up.rank();
        let scatter_dims: Vec<usize> = (0..up_rank)
            .filter(|d| !window_dims.contains(&(*d as i64)))
            .collect();
        let window_operand: Vec<usize> = (0..op_rank)
            .filter(|d| !inserted.contains(&(*d as i64)) && !in_batch.contains(&(*d as i64)))
            .collect();
        let ind_batch: Vec<usize> = (0..ind.rank()).filter(|&d| d != ivd).collect();
        let vec_len = if ivd < ind.rank() {
            ind.dims[ivd] as usize
        } else {
            1
        };
        if vec_len != to_operand.len()
            || window_operand.len() != window_dims.len()
            || scatter_dims.len() != ind_batch.len()
        {
            return Err("scatter dimension numbers do not match the shapes".into());
        }
        let mut win_size = vec![1i64; op_rank];
        for (k, &d) in window_operand.iter().enumerate() {
            win_size[d] = up.dims[window_dims[k] as usize];
        }
        let sdims: Vec<i64> = scatter_dims.iter().map(|&d| up.dims[d]).collect();
        let wdims: Vec<i64> = window_dims.iter().map(|&d| up.dims[d as usize]).collect();
        if numel(&wdims) == 0 {
            return Ok(());
        }
        let outs = self.outs.clone();
        let g = &mut self.g;
        g.nest(&sdims, Vec::new(), &mut |g, gm, _| {
            let b = &cg.b;
            let mut start = vec![cg.c64(0); op_rank];
            for (k, &d) in to_operand.iter().enumerate() {
                let mut multi = vec![cg.c64(0); ind.rank()];
                for (j, &bd) in ind_batch.iter().enumerate() {
                    multi[bd] = gm[j];
                }
                if ivd < ind.rank() {
                    multi[ivd] = cg.c64(k as i64);
                }
                let i = g.index_multi(&ind.dims, multi)?;
                let v = g.gen1(ops[n], &i)?;
                start[d as usize] = g.to_i64(ind.ty, v)?;
            }
            for (k, &d) in in_batch.iter().enumerate() {
                let pos = ind_batch
                    .iter()
                    .position(|&x| x as i64 == idx_batch[k])
                    .ok_or("batching dimension is the index vector dimension")?;
                start[d as usize] = gm[pos];
            }
            let mut ok = cg.i1().const_all_ones();
            for d in 0..op_rank {
                let ge = b.build_int_compare(IntPredicate::SGE, start[d], cg.c64(0), "ge")?;
                let le = b.build_int_compare(
                    IntPredicate::SLE,
                    start[d],
                    cg.c64(op_dims[d] - win_size[d]),
                    "le",
                )?;
                ok = b.build_and(ok, b.build_and(ge, le, "in")?, "ok")?;
            }
            let gm = gm.to_vec();
            let then = cg.block("scatter.in")?;
            let done = cg.block("scatter.next")?;
            b.build_conditional_branch(ok, then, done)?;
            b.position_at_end(then);
            g.push_scope();
            g.nest(&wdims, Vec::new(), &mut |g, wm, _| {
                let mut om = start.clone();
                for (k, &x) in wm.iter().enumerate() {
                    let d = window_operand[k];
                    om[d] = cg.b.build_int_nsw_add(om[d], x, "o")?;
                }
                let mut um = vec![cg.c64(0); up_rank];
                for (j, &d) in scatter_dims.iter().enumerate() {
                    um[d] = gm[j];
                }
                for (k, &d) in window_dims.iter().enumerate() {
                    um[d as usize] = wm[k];
                }
                let oi = g.index_multi(&op_dims, om)?;
                let ui = g.index_multi(&up.dims, um)?;
                let mut args = Vec::with_capacity(2 * n);
                for k in 0..n {
                    args.push(cg.load(op_shapes[k].ty, outs[k], oi.linear)?);
                }
                for k in 0..n {
                    args.push(g.gen1(ops[n + 1 + k], &ui)?);
                }
                let r = g.apply(comp, &args)?;
                for k in 0..n {
                    cg.store(op_shapes[k].ty, outs[k], oi.linear, r[k])?;
                }
                Ok(Vec::new())
            })?;
            g.pop_scope();
            cg.b.build_unconditional_branch(done)?;
            cg.b.position_at_end(done);
            Ok(Vec::new())
        })?;
        Ok(())
    }

    fn emit_select_and_scatter(&mut self) -> R<(i64, i64)> {
        self.once(|kc| {
            let m = kc.m;
            let cg = kc.cg();
            let root = kc.root;
            let ops = m.operands(root).to_vec();
            let a = arr_of(m, ops[0])?.clone();
            let src = arr_of(m, ops[1])?.clone();
            let out_ty = arr_of(m, root)?.ty;
            let wd = window(m, root, a.rank())?;
            if wd.iter().any(|w| w.lhs_dilate != 1 || w.rhs_dilate != 1) {
                return Err("select-and-scatter does not take dilated windows".into());
            }
            let sel = m
                .comp_attr(root, &AttrKey::Select)
                .ok_or("missing select")?;
            let sc = m
                .comp_attr(root, &AttrKey::Scatter)
                .ok_or("missing scatter")?;
            let out = kc.outs[0];
            let g = &mut kc.g;
            let s = g.scalar_index();
            let init = g.gen1(ops[2], &s)?;
            let n = numel(&a.dims);
            cg.for_range(cg.c64(0), cg.c64(n), |i| cg.store(out_ty, out, i, init))?;
            if n == 0 {
                // An empty operand has no window element to select, nor an output to scatter
                // into (and the loop below would load from its empty buffer).
                return Ok(());
            }
            let wsizes: Vec<i64> = wd.iter().map(|w| w.size).collect();
            let elem_ty = cg.reg_ty(a.ty)?;
            g.nest(&src.dims, Vec::new(), &mut |g, om, _| {
                let om = om.to_vec();
                let init = vec![bv(cg.i1().const_zero()), bv(cg.c64(0)), zero_of(elem_ty)];
                let best = g.nest(&wsizes, init, &mut |g, wm, st| {
                    let b = &cg.b;
                    let (pos, ok) = window_pos(cg, &wd, &a.dims, &om, wm)?;
                    let pi = g.index_multi(&a.dims, pos)?;
                    let x = g.gen1(ops[0], &pi)?;
                    let keep = g.apply(sel, &[st[2], x])?;
                    let keep = keep
                        .first()
                        .ok_or("select returns nothing")?
                        .into_int_value();
                    let not_keep = b.build_not(keep, "nk")?;
                    let have = st[0].into_int_value();
                    let fresh = b.build_not(have, "fresh")?;
                    let take = b.build_and(ok, b.build_or(fresh, not_keep, "t")?, "take")?;
                    Ok(vec![
                        bv(b.build_or(have, ok, "have")?),
                        b.build_select(take, bv(pi.linear), st[1], "best")?,
                        b.build_select(take, x, st[2], "bv")?,
                    ])
                })?;
                let have = best[0].into_int_value();
                let lin = best[1].into_int_value();
                let si = g.index_multi(&src.dims, om.clone())?;
                let sv = g.gen1(ops[1], &si)?;
                cg.if_then(have, || {
                    let cur = cg.load(out_ty, out, lin)?;
                    let r = g.apply(sc, &[cur, sv])?;
                    cg.store(
                        out_ty,
                        out,
                        lin,
                        *r.first().ok_or("scatter returns nothing")?,
                    )
                })?;
                Ok(Vec::new())
            })?;
            Ok(())
        })?;
        Ok((1, 1))
    }

    /// Sorts each row of `len` records (an `i32` index and one value per entry of `tys`,
    /// loaded by `load(g, row coordinates, position)`) with `less(g, x values, y values, x
    /// index, y index)`: a stable merge sort (insertion sort on runs of 16, then pairwise
    /// merges, the evaluator's algorithm) that moves whole records, so every pass streams
    /// through memory. Then `finish(g, row coordinates, index plane, value planes)`.
    #[allow(clippy::too_many_arguments)]
    fn sort_rows(
        &mut self,
        dims: &[i64],
        d: usize,
        scratch: PointerValue<'ctx>,
        tys: &[ElementType],
        load: &mut RowLoad<'_, 'a, 'ctx>,
        less: &mut RowLess<'_, 'a, 'ctx>,
        finish: &mut RowFinish<'_, 'a, 'ctx>,
    ) -> R<(i64, i64)> {
        let cg = self.cg();
        let len = dims[d];
        let row_dims = crate::cg::dims_without(dims, d);
        let rows = numel(&row_dims);
        if rows == 0 || len == 0 {
            return Ok((0, 1));
        }
        let layout = SortLayout::new(tys, len);
        let i32t = cg.i32();
        let (start, end) = (self.start, self.end);
        let g = &mut self.g;
        cg.for_range(start, end, |row| {
            let b = &cg.b;
            g.push_scope();
            let ri = g.index_linear(&row_dims, row)?;
            let rm = ri.multi.clone();
            let off = b.build_int_nsw_mul(row, cg.c64(layout.row_bytes), "off")?;
            let base = cg.gep(cg.i8().into(), scratch, off)?;
            let planes = |half: i64| -> R<(PointerValue<'ctx>, Vec<PointerValue<'ctx>>)> {
                let h = half * layout.half_bytes;
                let idx = cg.byte_gep(base, h)?;
                let vals = layout
                    .val_offsets
                    .iter()
                    .map(|&o| cg.byte_gep(base, h + o))
                    .collect::<R<Vec<_>>>()?;
                Ok((idx, vals))
            };
            let (a_idx, a_vals) = planes(0)?;
            let (b_idx, b_vals) = planes(1)?;
            let ld_idx = |p: PointerValue<'ctx>, i: IntValue<'ctx>| -> R<IntValue<'ctx>> {
                let q = cg.gep(i32t.into(), p, i)?;
                Ok(cg.b.build_load(i32t, q, "ix")?.into_int_value())
            };
            let st_idx = |p: PointerValue<'ctx>, i: IntValue<'ctx>, v: IntValue<'ctx>| -> R<()> {
                let q = cg.gep(i32t.into(), p, i)?;
                cg.b.build_store(q, v)?;
                Ok(())
            };
            let ld_vals = |ps: &[PointerValue<'ctx>], i: IntValue<'ctx>| -> R<Vec<Val<'ctx>>> {
                ps.iter()
                    .zip(tys)
                    .map(|(&p, &t)| cg.load(t, p, i))
                    .collect()
            };
            let st_vals =
                |ps: &[PointerValue<'ctx>], i: IntValue<'ctx>, vs: &[Val<'ctx>]| -> R<()> {
                    for ((&p, &t), &v) in ps.iter().zip(tys).zip(vs) {
                        cg.store(t, p, i, v)?;
                    }
                    Ok(())
                };
            cg.for_range(cg.c64(0), cg.c64(len), |i| {
                g.push_scope();
                let vs = load(g, &rm, i)?;
                g.pop_scope();
                st_idx(a_idx, i, cg.b.build_int_truncate(i, i32t, "i")?)?;
                st_vals(&a_vals, i, &vs)
            })?;
            // Insertion sort of each run of 16.
            let runs = (len + 15) / 16;
            cg.for_range(cg.c64(0), cg.c64(runs), |r| {
                let s = b.build_int_nsw_mul(r, cg.c64(16), "s")?;
                let e = b.build_int_nsw_add(s, cg.c64(16), "e")?;
                let lt = b.build_int_compare(IntPredicate::SLT, e, cg.c64(len), "lt")?;
                let e = b.build_select(lt, e, cg.c64(len), "e")?.into_int_value();
                let s1 = b.build_int_nsw_add(s, cg.c64(1), "s1")?;
                cg.for_range(s1, e, |i| {
                    cg.while_loop(
                        &[bv(i)],
                        |st_| {
                            let j = st_[0].into_int_value();
                            let gt = cg.b.build_int_compare(IntPredicate::SGT, j, s, "gt")?;
                            // Only ask the comparator when j > s (a short-circuit `&&`).
                            let pre = cg.cur_block()?;
                            let ask = cg.block("ask")?;
                            let join = cg.block("join")?;
                            cg.b.build_conditional_branch(gt, ask, join)?;
                            cg.b.position_at_end(ask);
                            g.push_scope();
                            let jm1 = cg.b.build_int_nsw_sub(j, cg.c64(1), "jm1")?;
                            let xv = ld_vals(&a_vals, j)?;
                            let yv = ld_vals(&a_vals, jm1)?;
                            let xi = ld_idx(a_idx, j)?;
                            let yi = ld_idx(a_idx, jm1)?;
                            let l = less(g, &xv, &yv, xi, yi)?;
                            g.pop_scope();
                            let ask_end = cg.cur_block()?;
                            cg.b.build_unconditional_branch(join)?;
                            cg.b.position_at_end(join);
                            let p = cg.b.build_phi(cg.i1(), "go")?;
                            p.add_incoming(&[(&cg.i1().const_zero(), pre), (&l, ask_end)]);
                            Ok(p.as_basic_value().into_int_value())
                        },
                        |st_| {
                            let j = st_[0].into_int_value();
                            let jm1 = cg.b.build_int_nsw_sub(j, cg.c64(1), "jm1")?;
                            let (xi, yi) = (ld_idx(a_idx, j)?, ld_idx(a_idx, jm1)?);
                            let (xv, yv) = (ld_vals(&a_vals, j)?, ld_vals(&a_vals, jm1)?);
                            st_idx(a_idx, j, yi)?;
                            st_idx(a_idx, jm1, xi)?;
                            st_vals(&a_vals, j, &yv)?;
                            st_vals(&a_vals, jm1, &xv)?;
                            Ok(vec![bv(jm1)])
                        },
                    )?;
                    Ok(())
                })
            })?;
            // Merge passes, a runtime loop: runs of `width` from one half into the other.
            let state = cg.while_loop(
                &[bv(cg.c64(16)), bv(cg.i1().const_zero())],
                |st_| {
                    Ok(cg.b.build_int_compare(
                        IntPredicate::SLT,
                        st_[0].into_int_value(),
                        cg.c64(len),
                        "more",
                    )?)
                },
                |st_| {
                    let width = st_[0].into_int_value();
                    let flipped = st_[1].into_int_value();
                    let pick =
                        |x: PointerValue<'ctx>, y: PointerValue<'ctx>| -> R<PointerValue<'ctx>> {
                            Ok(cg.b.build_select(flipped, y, x, "pl")?.into_pointer_value())
                        };
                    let s_idx = pick(a_idx, b_idx)?;
                    let d_idx = pick(b_idx, a_idx)?;
                    let s_vals = a_vals
                        .iter()
                        .zip(&b_vals)
                        .map(|(&x, &y)| pick(x, y))
                        .collect::<R<Vec<_>>>()?;
                    let d_vals = a_vals
                        .iter()
                        .zip(&b_vals)
                        .map(|(&x, &y)| pick(y, x))
                        .collect::<R<Vec<_>>>()?;
                    let w2 = b.build_int_nsw_mul(width, cg.c64(2), "w2")?;
                    let pairs = b.build_int_unsigned_div(
                        b.build_int_nsw_add(
                            cg.c64(len),
                            b.build_int_nsw_sub(w2, cg.c64(1), "w")?,
                            "p",
                        )?,
                        w2,
                        "pairs",
                    )?;
                    let clamp = |v: IntValue<'ctx>| -> R<IntValue<'ctx>> {
                        let lt =
                            cg.b.build_int_compare(IntPredicate::SLT, v, cg.c64(len), "lt")?;
                        Ok(cg.b.build_select(lt, v, cg.c64(len), "c")?.into_int_value())
                    };
                    let copy = |from: IntValue<'ctx>, to: IntValue<'ctx>| -> R<()> {
                        st_idx(d_idx, to, ld_idx(s_idx, from)?)?;
                        let vs = ld_vals(&s_vals, from)?;
                        st_vals(&d_vals, to, &vs)
                    };
                    cg.for_range(cg.c64(0), pairs, |pi| {
                        let s = b.build_int_nsw_mul(pi, w2, "s")?;
                        let mid = clamp(b.build_int_nsw_add(s, width, "mid")?)?;
                        let e = clamp(b.build_int_nsw_add(s, w2, "e")?)?;
                        let out = cg.while_loop(
                            &[bv(s), bv(mid), bv(s)],
                            |st_| {
                                let (i, j) = (st_[0].into_int_value(), st_[1].into_int_value());
                                let a1 = cg.b.build_int_compare(IntPredicate::SLT, i, mid, "a")?;
                                let a2 = cg.b.build_int_compare(IntPredicate::SLT, j, e, "b")?;
                                Ok(cg.b.build_and(a1, a2, "both")?)
                            },
                            |st_| {
                                let (i, j, o) = (
                                    st_[0].into_int_value(),
                                    st_[1].into_int_value(),
                                    st_[2].into_int_value(),
                                );
                                let (xi, yi) = (ld_idx(s_idx, i)?, ld_idx(s_idx, j)?);
                                let (xv, yv) = (ld_vals(&s_vals, i)?, ld_vals(&s_vals, j)?);
                                g.push_scope();
                                let take_j = less(g, &yv, &xv, yi, xi)?;
                                g.pop_scope();
                                let vi = cg.b.build_select(take_j, yi, xi, "vi")?.into_int_value();
                                st_idx(d_idx, o, vi)?;
                                let mut vv = Vec::with_capacity(xv.len());
                                for (x, y) in xv.iter().zip(&yv) {
                                    vv.push(cg.b.build_select(take_j, *y, *x, "vv")?);
                                }
                                st_vals(&d_vals, o, &vv)?;
                                let one = cg.c64(1);
                                let j1 = cg.b.build_int_nsw_add(j, one, "j1")?;
                                let i1 = cg.b.build_int_nsw_add(i, one, "i1")?;
                                Ok(vec![
                                    cg.b.build_select(take_j, bv(i), bv(i1), "i")?,
                                    cg.b.build_select(take_j, bv(j1), bv(j), "j")?,
                                    bv(cg.b.build_int_nsw_add(o, one, "o")?),
                                ])
                            },
                        )?;
                        let (i, j, o) = (
                            out[0].into_int_value(),
                            out[1].into_int_value(),
                            out[2].into_int_value(),
                        );
                        // Copy what is left of either run.
                        cg.for_range(i, mid, |t| {
                            let dd = cg.b.build_int_nsw_sub(t, i, "d")?;
                            copy(t, cg.b.build_int_nsw_add(o, dd, "oo")?)
                        })?;
                        let left = cg.b.build_int_nsw_sub(mid, i, "left")?;
                        let neg =
                            cg.b.build_int_compare(IntPredicate::SLT, left, cg.c64(0), "n")?;
                        let left =
                            cg.b.build_select(neg, cg.c64(0), left, "l")?
                                .into_int_value();
                        let o2 = cg.b.build_int_nsw_add(o, left, "o2")?;
                        cg.for_range(j, e, |t| {
                            let dd = cg.b.build_int_nsw_sub(t, j, "d")?;
                            copy(t, cg.b.build_int_nsw_add(o2, dd, "oo")?)
                        })
                    })?;
                    Ok(vec![bv(w2), bv(cg.b.build_not(flipped, "flip")?)])
                },
            )?;
            let flipped = state[1].into_int_value();
            let idx =
                cg.b.build_select(flipped, b_idx, a_idx, "res")?
                    .into_pointer_value();
            let mut vals = Vec::with_capacity(a_vals.len());
            for (&x, &y) in a_vals.iter().zip(&b_vals) {
                vals.push(
                    cg.b.build_select(flipped, y, x, "res")?
                        .into_pointer_value(),
                );
            }
            finish(g, &rm, idx, &vals)?;
            g.pop_scope();
            Ok(())
        })?;
        Ok((rows, (GRAIN_ELEMS / len.max(1)).max(1)))
    }

    fn emit_sort(&mut self, scratch: PointerValue<'ctx>) -> R<(i64, i64)> {
        let m = self.m;
        let cg = self.cg();
        let root = self.root;
        let ops = m.operands(root).to_vec();
        let shape = arr_of(m, ops[0])?.clone();
        let dims = shape.dims.to_vec();
        let rank = dims.len();
        let comp = m
            .comp_attr(root, &AttrKey::ToApply)
            .ok_or("sort needs to_apply")?;
        let shapes: Vec<ArrayShape> = ops
            .iter()
            .map(|&o| arr_of(m, o).cloned())
            .collect::<R<_>>()?;
        for s in &shapes {
            if s.dims != shape.dims {
                return Err("sort operands must have the same dimensions".into());
            }
        }
        let outs = self.outs.clone();
        if rank == 0 {
            self.once(|kc| {
                for (k, &o) in ops.iter().enumerate() {
                    kc.copy_in(o, k)?;
                }
                Ok(())
            })?;
            return Ok((1, 1));
        }
        let d = match m
            .ints_attr(root, &AttrKey::Dimensions)
            .and_then(|v| v.first())
        {
            Some(&d) if (d as usize) < rank => d as usize,
            _ => return Err("sort dimension out of range".into()),
        };
        let at_pos =
            |g: &mut Gen<'a, 'ctx>, rm: &[IntValue<'ctx>], p: IntValue<'ctx>| -> R<Index<'ctx>> {
                let mut multi = Vec::with_capacity(rank);
                let mut r = 0;
                for k in 0..rank {
                    if k == d {
                        multi.push(p);
                    } else {
                        multi.push(rm[r]);
                        r += 1;
                    }
                }
                g.index_multi(&dims, multi)
            };
        let tys: Vec<ElementType> = shapes.iter().map(|s| s.ty).collect();
        if let Some(p) =
            crate::radix::plan(m, root).filter(|_| dims[d] >= crate::radix::RADIX_MIN_LEN)
        {
            let rows = crate::radix::Rows {
                dims: &dims,
                d,
                ops: &ops,
                tys: &tys,
                outs: &outs,
                topk: None,
                library: self.gemm.sort_library,
            };
            return crate::radix::emit(&mut self.g, &p, &rows, scratch, self.start, self.end);
        }
        let ops2 = ops.clone();
        let mut load = |g: &mut Gen<'a, 'ctx>,
                        rm: &[IntValue<'ctx>],
                        p: IntValue<'ctx>|
         -> R<Vec<Val<'ctx>>> {
            let i = at_pos(g, rm, p)?;
            ops2.iter().map(|&o| g.gen1(o, &i)).collect()
        };
        let mut less = |g: &mut Gen<'a, 'ctx>,
                        xs: &[Val<'ctx>],
                        ys: &[Val<'ctx>],
                        _xi: IntValue<'ctx>,
                        _yi: IntValue<'ctx>|
         -> R<IntValue<'ctx>> {
            let mut args = Vec::with_capacity(2 * xs.len());
            for (x, y) in xs.iter().zip(ys) {
                args.push(*x);
                args.push(*y);
            }
            let r = g.apply(comp, &args)?;
            let r = r.first().ok_or("comparator returns nothing")?;
            if r.get_type() != cg.i1().into() {
                return Err("sort comparator must return pred".into());
            }
            Ok(r.into_int_value())
        };
        let mut finish = |g: &mut Gen<'a, 'ctx>,
                          rm: &[IntValue<'ctx>],
                          _idx: PointerValue<'ctx>,
                          vals: &[PointerValue<'ctx>]|
         -> R<()> {
            cg.for_range(cg.c64(0), cg.c64(dims[d]), |i| {
                g.push_scope();
                let dst = at_pos(g, rm, i)?;
                for (k, s) in shapes.iter().enumerate() {
                    let v = cg.load(s.ty, vals[k], i)?;
                    cg.store(s.ty, outs[k], dst.linear, v)?;
                }
                g.pop_scope();
                Ok(())
            })
        };
        self.sort_rows(&dims, d, scratch, &tys, &mut load, &mut less, &mut finish)
    }

    fn emit_topk(&mut self, scratch: PointerValue<'ctx>) -> R<(i64, i64)> {
        let m = self.m;
        let cg = self.cg();
        let root = self.root;
        let x = m.operands(root)[0];
        let shape = arr_of(m, x)?.clone();
        let dims = shape.dims.to_vec();
        let rank = dims.len();
        if rank == 0 {
            return Err("topk needs an operand of rank >= 1".into());
        }
        let d = rank - 1;
        let len = dims[d];
        let leaves = inst_leaves(m, root)?;
        if leaves.len() != 2 {
            return Err("topk must return (values, indices)".into());
        }
        let k = *leaves[0].dims.last().ok_or("topk result of rank 0")?;
        if k > len {
            return Err("k exceeds the size of the last dimension".into());
        }
        if leaves[1].ty != ElementType::S32 {
            return Err("topk indices must be s32".into());
        }
        let custom = m.opcode(root) == Opcode::CustomCall;
        let comp = if custom {
            match m.attr(root, &AttrKey::CalledComputations) {
                Some(axle_ir::AttrValue::Comps(c)) if c.len() == 1 => Some(c[0]),
                // Without a comparator: the k largest, descending (as `topk`).
                _ => m.comp_attr(root, &AttrKey::ToApply),
            }
        } else {
            None
        };
        let largest = m.bool_attr(root, &AttrKey::Largest).unwrap_or(true);
        let ty = shape.ty;
        let select = crate::kernel_kind::topk_selects(m, root);
        if let Some(p) = crate::radix::plan_topk(m, root)
            .filter(|_| select.is_none() && len >= crate::radix::RADIX_MIN_LEN)
        {
            let outs = self.outs.clone();
            let rows = crate::radix::Rows {
                dims: &dims,
                d,
                ops: &[x],
                tys: &[ty],
                outs: &outs,
                topk: Some(k),
                library: self.gemm.sort_library,
            };
            return crate::radix::emit(&mut self.g, &p, &rows, scratch, self.start, self.end);
        }
        let mut load = |g: &mut Gen<'a, 'ctx>,
                        rm: &[IntValue<'ctx>],
                        p: IntValue<'ctx>|
         -> R<Vec<Val<'ctx>>> {
            let mut multi = rm.to_vec();
            multi.push(p);
            let i = g.index_multi(&dims, multi)?;
            Ok(vec![g.gen1(x, &i)?])
        };
        let mut less = |g: &mut Gen<'a, 'ctx>,
                        xs: &[Val<'ctx>],
                        ys: &[Val<'ctx>],
                        xi: IntValue<'ctx>,
                        yi: IntValue<'ctx>|
         -> R<IntValue<'ctx>> {
            let (va, vb) = (xs[0], ys[0]);
            match comp {
                Some(c) => {
                    let n = m.params(c).len();
                    let args = if n == 4 {
                        vec![va, vb, bv(xi), bv(yi)]
                    } else {
                        vec![va, vb]
                    };
                    let r = g.apply(c, &args)?;
                    Ok(r.first()
                        .ok_or("comparator returns nothing")?
                        .into_int_value())
                }
                None => {
                    let dir = if largest {
                        ComparisonDirection::Gt
                    } else {
                        ComparisonDirection::Lt
                    };
                    Ok(
                        ops::compare(cg, dir, ComparisonType::TotalOrder, ty, va, vb)?
                            .into_int_value(),
                    )
                }
            }
        };
        let outs = self.outs.clone();
        let kdims = leaves[0].dims.to_vec();
        let mut finish = |g: &mut Gen<'a, 'ctx>,
                          rm: &[IntValue<'ctx>],
                          idx: PointerValue<'ctx>,
                          vals: &[PointerValue<'ctx>]|
         -> R<()> {
            cg.for_range(cg.c64(0), cg.c64(k), |i| {
                g.push_scope();
                let q = cg.gep(cg.i32().into(), idx, i)?;
                let p32 = cg.b.build_load(cg.i32(), q, "p")?.into_int_value();
                let mut multi = rm.to_vec();
                multi.push(i);
                let dst = g.index_multi(&kdims, multi)?;
                let v = cg.load(ty, vals[0], i)?;
                cg.store(ty, outs[0], dst.linear, v)?;
                cg.store(ElementType::S32, outs[1], dst.linear, bv(p32))?;
                g.pop_scope();
                Ok(())
            })
        };
        match select {
            Some(k) => {
                self.select_rows(&dims, d, k, ty, scratch, &mut load, &mut less, &mut finish)
            }
            None => self.sort_rows(&dims, d, scratch, &[ty], &mut load, &mut less, &mut finish),
        }
    }
}

/// Where the planes of a sort's scratch live: per row, two halves, each an `i32` index plane
/// and one value plane per operand (8-byte aligned).
pub(crate) struct SortLayout {
    pub val_offsets: Vec<i64>,
    pub half_bytes: i64,
    pub row_bytes: i64,
}

impl SortLayout {
    pub fn new(tys: &[ElementType], len: i64) -> SortLayout {
        let up = |x: i64| (x + 7) / 8 * 8;
        let mut off = up(4 * len);
        let mut val_offsets = Vec::with_capacity(tys.len());
        for t in tys {
            val_offsets.push(off);
            off = up(off + t.byte_size() as i64 * len);
        }
        SortLayout {
            val_offsets,
            half_bytes: off,
            row_bytes: 2 * off,
        }
    }
}

/// Scratch bytes of a sort or top-k kernel rooted at `root`.
pub(crate) fn sort_scratch_bytes(m: &Module, root: InstId) -> R<i64> {
    let ops = m.operands(root);
    let shape = arr_of(m, ops[0])?;
    let (tys, d): (Vec<ElementType>, usize) = match m.opcode(root) {
        Opcode::Sort => (
            ops.iter()
                .map(|&o| arr_of(m, o).map(|s| s.ty))
                .collect::<R<_>>()?,
            m.ints_attr(root, &AttrKey::Dimensions)
                .and_then(|v| v.first())
                .map_or(0, |&d| d.max(0) as usize),
        ),
        _ => (vec![shape.ty], shape.rank().saturating_sub(1)),
    };
    if shape.rank() == 0 {
        return Ok(0);
    }
    let len = *shape.dims.get(d).ok_or("sort dimension out of range")?;
    let rows = if len == 0 {
        0
    } else {
        numel(&shape.dims) / len
    };
    if let Some(k) = crate::kernel_kind::topk_selects(m, root) {
        return Ok(rows * SortLayout::new(&tys, k).half_bytes);
    }
    let radix = crate::radix::plan(m, root)
        .or_else(|| crate::radix::plan_topk(m, root))
        .map_or(0, |p| crate::radix::scratch_bytes(&p, rows, len));
    Ok((rows * SortLayout::new(&tys, len).row_bytes).max(radix))
}

/// The larger of two signed `i64` values.
/// A reduction input's index: the reduced dimensions (where `reduced` says) from `rmulti`, the
/// kept ones from `kept`, and `j` for the kept dimension past `kept`'s end (the innermost).
fn interleave<'ctx>(
    reduced: &[bool],
    rmulti: &[IntValue<'ctx>],
    kept: &[IntValue<'ctx>],
    j: IntValue<'ctx>,
) -> Vec<IntValue<'ctx>> {
    let mut multi = Vec::with_capacity(reduced.len());
    let (mut ki, mut ri) = (0, 0);
    for &red in reduced {
        if red {
            multi.push(rmulti[ri]);
            ri += 1;
        } else {
            multi.push(kept.get(ki).copied().unwrap_or(j));
            ki += 1;
        }
    }
    multi
}

fn max64<'ctx>(cg: &Cg<'ctx>, a: IntValue<'ctx>, b: IntValue<'ctx>) -> R<IntValue<'ctx>> {
    let gt = cg.b.build_int_compare(IntPredicate::SGT, a, b, "gt")?;
    Ok(cg.b.build_select(gt, a, b, "max")?.into_int_value())
}

fn zero_of(t: inkwell::types::BasicTypeEnum<'_>) -> Val<'_> {
    match t {
        inkwell::types::BasicTypeEnum::FloatType(f) => bv(f.const_zero()),
        inkwell::types::BasicTypeEnum::IntType(i) => bv(i.const_zero()),
        other => other.const_zero(),
    }
}

/// Attributes a kernel failure to its instruction.
pub(crate) fn attribute(m: &Module, k: &Kernel, f: crate::error::Fail) -> crate::error::Fail {
    at(m, k.origin, f)
}

/// The most elements of the stack buffers of a column reduction's tree ([`column_sum_level`]):
/// a buffer of a row of outputs per level of the tree.
const COLUMN_TREE_ELEMS: i64 = 16 << 10;

/// The type the levels of a column reduction's tree above its runs add in: `f64` for an `f32`
/// sum (as the elemental sum tree's, [`widen_sum`]), else the sum's own.
fn level_type(ty: ElementType) -> ElementType {
    if ty == ElementType::F32 {
        ElementType::F64
    } else {
        ty
    }
}

/// A float sum over the innermost reduced dimension (`n` long) of a reduction that keeps the
/// input's last dimension (`dl` outputs per row, side by side), summed as a tree.
struct ColumnSum<'r, 'ctx> {
    ty: ElementType,
    /// [`sum_spans`] of `n`, runs of [`SUM_FAN`].
    spans: &'r [i64],
    n: i64,
    dl: i64,
    /// `spans.len()` buffers of `dl` elements of [`level_type`], one per level (the runs'
    /// buffer holds elements of `ty`).
    bufs: PointerValue<'ctx>,
    input: InstId,
    /// The input's index at reduced coordinates `rmulti` and output column `j`.
    at: &'r ColumnIndex<'r, 'ctx>,
}

/// The input's index of a column reduction at reduced coordinates and an output column.
type ColumnIndex<'f, 'ctx> =
    dyn Fn(&mut Gen<'_, 'ctx>, &[IntValue<'ctx>], IntValue<'ctx>) -> R<Index<'ctx>> + 'f;

/// Sums coordinates `base .. min(base + spans[level], n)` of the innermost reduced dimension
/// (the outer reduced coordinates in `prefix`) for every output column, from `-0.0`, into
/// buffer `level`, and returns it: a run adds its terms one by one in the sum's type (each
/// column's chain in its own lane of the vectorized loop over the columns), a higher level
/// adds the buffers of its parts in order, in [`level_type`]. The tree depends on `n` alone.
fn column_sum_level<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    col: &ColumnSum<'_, 'ctx>,
    level: usize,
    base: IntValue<'ctx>,
    prefix: &mut Vec<IntValue<'ctx>>,
) -> R<PointerValue<'ctx>> {
    let cg = g.cg;
    let b = &cg.b;
    let dl = col.dl;
    let level_ty = |l: usize| if l == 0 { col.ty } else { level_type(col.ty) };
    let ty = level_ty(level);
    let buf = cg.gep(
        cg.mem_ty(level_type(col.ty))?,
        col.bufs,
        cg.c64(level as i64 * dl),
    )?;
    let zero = cg.const_f(ty, -0.0)?;
    cg.for_range(cg.c64(0), cg.c64(dl), |j| cg.store(ty, buf, j, zero))?;
    let left = b.build_int_nsw_sub(cg.c64(col.n), base, "left")?;
    let span = cg.c64(col.spans[level]);
    let lt = b.build_int_compare(IntPredicate::SLT, left, span, "lt")?;
    let cover = b.build_select(lt, left, span, "cover")?.into_int_value();
    let add_into = |j: IntValue<'ctx>, y: Val<'ctx>| -> R<()> {
        let x = cg.load(ty, buf, j)?;
        let y = if level > 0 { widen_sum(cg, y)? } else { y };
        let s = b.build_float_add(x.into_float_value(), y.into_float_value(), "s")?;
        cg.store(ty, buf, j, bv(s))
    };
    if level == 0 {
        let end = b.build_int_nsw_add(base, cover, "end")?;
        // Not unrolled: each term is a vectorized loop over the row (a run of 16 unrolled was
        // 16 copies of it, most of a training step's bias-gradient kernel).
        cg.for_range_hinted(base, end, &[NO_UNROLL], |i| {
            prefix.push(i);
            let r = cg.for_range(cg.c64(0), cg.c64(dl), |j| {
                g.push_scope();
                let idx = (col.at)(g, prefix, j)?;
                let x = g.gen1(col.input, &idx)?;
                g.pop_scope();
                add_into(j, x)
            });
            prefix.pop();
            r
        })?;
        return Ok(buf);
    }
    let sub = col.spans[level - 1];
    let parts = ceil_div64(cg, cover, sub)?;
    // As the elemental sum tree's levels: one copy of the level below, not one per part.
    cg.for_range_hinted(cg.c64(0), parts, &[NO_UNROLL], |p| {
        let at = b.build_int_nsw_add(base, b.build_int_nsw_mul(p, cg.c64(sub), "o")?, "at")?;
        let part = column_sum_level(g, col, level - 1, at, prefix)?;
        cg.for_range(cg.c64(0), cg.c64(dl), |j| {
            add_into(j, cg.load(level_ty(level - 1), part, j)?)
        })
    })?;
    Ok(buf)
}
