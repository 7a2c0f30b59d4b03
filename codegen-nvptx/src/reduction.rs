//! Reduction kernels: a fusion that computes `reduce`s (and what reads their results at the
//! same output), or an unfused `reduce`, as one kernel that reads each input element once per
//! pass, accumulates in registers, and combines the threads' partial results with warp
//! shuffles and shared memory, in the manner of XLA's GPU reduction emitter (our own tiling,
//! simpler than XLA's: no vectorized loads, no multi-row warps, no split of tall columns).
//!
//! The input's dimensions split into the kept ones (the output's, `K` elements) and the
//! reduced ones (`L` elements per output). The kind is chosen from the minor-most input
//! dimension longer than 1:
//! - reduced: a **row reduction** ([`ReductionKind::Row`]). The threads of one row read it at
//!   consecutive addresses, strided by the row's thread count, each folding its elements into
//!   a register; a butterfly of `shfl.sync.bfly` (masks 16, 8, 4, 2, 1) combines a warp's 32
//!   partial results, leaving the row's result in every lane. A row of at most
//!   [`WARP_ROW_MAX`] elements gets one warp (8 rows per block of 256 threads); a longer row
//!   gets a whole block of 256 threads, whose 8 warp results meet in shared memory after a
//!   barrier and are combined again by a butterfly (masks 4, 2, 1) in every group of 8 lanes.
//!   A row kernel runs in passes: a reduction whose input reads another's result (layernorm's
//!   variance after its mean, softmax's sum after its maximum) is computed in a later pass over
//!   the same row, with the earlier results in registers; outputs of the input's dimensions
//!   (softmax's quotient) are then computed and stored by the row's threads.
//! - kept: a **column reduction** ([`ReductionKind::Column`]). A block of 8 warps covers 32
//!   consecutive outputs (one per lane, so each warp reads 32 consecutive elements of one
//!   input row); warp `w` folds reduced positions `w, w + 8, ...`; the 8 partial results of
//!   each output meet in shared memory (`[8][32]`, conflict-free) after a barrier, and warp 0
//!   combines them in warp order. One pass only.
//!
//! In both kinds an output of the output's dimensions may be any elementwise function of the
//! reductions' results (an epilogue such as `log(sum)`), computed by the thread that stores it.
//!
//! Invariants: every thread of a block reaches every barrier and every shuffle (threads past
//! the end fold nothing and store nothing, but take part), so `shfl.sync` runs with the full
//! mask and `bar.sync` with the whole block; each pass has shared arrays of its own, so no
//! barrier is needed before they are written. Each output element is stored by exactly one
//! thread. Every read of a reduction's result is at the current output (checked by
//! [`reduction_geometry`]), which is what makes binding it to registers exact. Indices are
//! computed in 64 bits from the block and thread registers.
//!
//! Semantics: each partial result starts from the init value, so the init value is combined
//! once per partial (as in XLA's GPU emitter; it must be the reducer's identity, as XLA
//! requires), and the combination order is a fixed tree (floating-point results differ from a
//! sequential sum within the corpus tolerances). An unfused reduction over zero elements is
//! left to the loop kernels (its output is the init value).
//!
//! What is refused, with an error naming the instruction: a reduction's result read other than
//! at its own output (through a transpose, a slice, a reverse, ...), reductions of one fusion
//! over different shapes or dimensions, a column reduction reading another's result or with
//! outputs of the input's dimensions, outputs of any other dimensions, and a fused reduction
//! over zero elements.

use std::collections::{HashMap, HashSet};

use axle_codegen_llvm::cg::{numel, Cg, Val};
use axle_codegen_llvm::elemental::{
    arr_of, bitcast_is_reshape, inst_leaves, minmax_intrinsic, Ext, Gen, Index,
};
use axle_codegen_llvm::error::{at, Fail, R};
use axle_ir::{AttrKey, CompId, InstId, Module, Opcode};
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::fused::reached_in_order;
use crate::launch::{LaunchPlan, WARP};
use crate::primitives::{barrier, kernel_name, registers, shared_array, shuffle_xor, trip_count};

/// Threads of a reduction kernel's block.
pub const REDUCTION_BLOCK: u64 = 256;
/// Warps of a reduction kernel's block.
const WARPS: u64 = REDUCTION_BLOCK / WARP;
/// The longest row one warp reduces; longer rows get a block each.
pub const WARP_ROW_MAX: u64 = 512;

/// How a reduction kernel maps outputs to threads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReductionKind {
    /// The reduced dimensions are minor: `threads_per_row` threads (a warp or a block) reduce
    /// each output's contiguous elements.
    Row {
        /// Threads reducing one row: [`WARP`] or [`REDUCTION_BLOCK`].
        threads_per_row: u64,
    },
    /// A kept dimension is minor: each block covers 32 consecutive outputs.
    Column,
}

/// The geometry of a reduction kernel: the input's dimensions and which are reduced, the
/// reductions in the order they are computed, and the outputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReductionGeometry {
    /// The `reduce`s, in passes: each pass reads its rows once and computes its reductions
    /// together; a reduction's input reads only the results of earlier passes.
    pub passes: Vec<Vec<InstId>>,
    /// The kernel's outputs (the fusion root, or the tuple root's operands), each of the
    /// output's dimensions (stored once per output element) or, in a row reduction, of the
    /// input's (stored by the row's threads).
    pub roots: Vec<InstId>,
    /// The input's dimensions (every reduction's inputs have them).
    pub in_dims: Vec<i64>,
    /// Whether each input dimension is reduced.
    pub reduced: Vec<bool>,
    /// The kind of kernel.
    pub kind: ReductionKind,
}

impl ReductionGeometry {
    /// The kept dimensions, in order (the output's dimensions).
    pub fn kept_dims(&self) -> Vec<i64> {
        self.pick(false)
    }

    /// The reduced dimensions, in order.
    pub fn reduced_dims(&self) -> Vec<i64> {
        self.pick(true)
    }

    fn pick(&self, reduced: bool) -> Vec<i64> {
        self.in_dims
            .iter()
            .zip(&self.reduced)
            .filter(|(_, &r)| r == reduced)
            .map(|(&d, _)| d)
            .collect()
    }

    /// The output elements (`K`).
    pub fn outputs(&self) -> u64 {
        numel(&self.kept_dims()).max(0) as u64
    }

    /// The elements reduced into each output (`L`).
    pub fn row_len(&self) -> u64 {
        numel(&self.reduced_dims()).max(0) as u64
    }

    /// The launch plan: blocks of [`REDUCTION_BLOCK`] threads, as many as the outputs need.
    pub fn launch_plan(&self) -> Result<LaunchPlan, crate::NvptxError> {
        let outputs = self.outputs();
        let per_block = match self.kind {
            ReductionKind::Row { threads_per_row } => REDUCTION_BLOCK / threads_per_row,
            ReductionKind::Column => WARP,
        };
        LaunchPlan::for_blocks(outputs, outputs.div_ceil(per_block), REDUCTION_BLOCK)
    }

    /// Whether output `root` has the input's dimensions (stored by the row's threads).
    fn full_size(&self, m: &Module, root: InstId) -> bool {
        m.array_shape(root)
            .is_some_and(|a| a.dims[..] == self.in_dims[..])
    }
}

/// The reduction error for instruction `id`.
fn refuse(m: &Module, id: InstId, what: &str) -> Fail {
    at(
        m,
        id,
        Fail::Msg(format!(
            "the nvptx backend's reduction kernels do not yet emit {what}"
        )),
    )
}

/// The reduction kernel for instruction `id` (a fusion or a `reduce` of the entry
/// computation): its geometry, or `None` when `id` computes no reduction (or is an unfused
/// `reduce` of zero elements, which a loop kernel computes); an error naming the instruction
/// when it is a reduction this kernel does not cover.
///
/// Every instruction that depends on a reduction's result must read it at the current
/// output: elementwise ops and `get-tuple-element` of the output's or the input's dimensions
/// (the output's up to unit dimensions), reshapes that only add or remove unit dimensions,
/// and broadcasts from the output's dimensions back to the input's along the kept ones.
pub fn reduction_geometry(m: &Module, id: InstId) -> R<Option<ReductionGeometry>> {
    let (c, root) = match m.opcode(id) {
        Opcode::Fusion => {
            let c = m
                .comp_attr(id, &AttrKey::Calls)
                .ok_or_else(|| at(m, id, "fusion needs calls".into()))?;
            (c, m.root(c))
        }
        Opcode::Reduce => (m.parent(id), id),
        _ => return Ok(None),
    };
    let roots: Vec<InstId> = if m.opcode(root) == Opcode::Tuple {
        m.operands(root).to_vec()
    } else {
        vec![root]
    };
    // Every instruction the kernel computes, operands before users.
    let insts = if m.opcode(id) == Opcode::Fusion {
        reached_in_order(m, c, root)
    } else {
        vec![id]
    };
    let reduces: Vec<InstId> = insts.iter().copied().filter(|&x| is_reduce(m, x)).collect();
    let Some(&first) = reduces.first() else {
        return Ok(None);
    };
    let in_dims = arr_of(m, m.operands(first)[0])
        .map_err(|f| at(m, first, f))?
        .dims
        .to_vec();
    let dims = reduce_dims(m, first)?;
    let mut reduced = vec![false; in_dims.len()];
    for &d in &dims {
        *reduced
            .get_mut(d as usize)
            .ok_or_else(|| at(m, first, "reduce dimension out of range".into()))? = true;
    }
    for &r in &reduces {
        let rd = &arr_of(m, m.operands(r)[0]).map_err(|f| at(m, r, f))?.dims;
        if rd[..] != in_dims[..] || reduce_dims(m, r)? != dims {
            return Err(refuse(
                m,
                r,
                "reduces of different shapes or dimensions in one fusion",
            ));
        }
    }
    let kept_pos: Vec<i64> = (0..in_dims.len() as i64)
        .filter(|&d| !reduced[d as usize])
        .collect();
    let kept_dims: Vec<i64> = kept_pos.iter().map(|&d| in_dims[d as usize]).collect();
    let row_len = numel(
        &dims
            .iter()
            .map(|&d| in_dims[d as usize])
            .collect::<Vec<_>>(),
    );
    if row_len == 0 {
        if m.opcode(id) == Opcode::Reduce {
            return Ok(None);
        }
        return Err(refuse(m, first, "a fused reduction over zero elements"));
    }
    let kind = match (0..in_dims.len()).rev().find(|&d| in_dims[d] > 1) {
        Some(d) if !reduced[d] => ReductionKind::Column,
        _ => ReductionKind::Row {
            threads_per_row: if row_len as u64 <= WARP_ROW_MAX {
                WARP
            } else {
                REDUCTION_BLOCK
            },
        },
    };
    let row = matches!(kind, ReductionKind::Row { .. });
    // Which instructions depend on a reduction's result.
    let mut depends: HashSet<InstId> = HashSet::new();
    for &x in &insts {
        if is_reduce(m, x) || m.operands(x).iter().any(|o| depends.contains(o)) {
            depends.insert(x);
        }
    }
    let dims_of = |x: InstId| m.array_shape(x).map(|a| a.dims.to_vec());
    // Dimensions without their unit ones: adding or removing unit dimensions keeps every
    // element's row-major position, so a value of the output's dimensions up to unit ones
    // (JAX's `keepdims` reshapes) is read at the current output too.
    let squeezed = |d: &[i64]| -> Vec<i64> { d.iter().copied().filter(|&n| n != 1).collect() };
    let kept_squeezed = squeezed(&kept_dims);
    let at_output_of = |x: InstId| dims_of(x).is_some_and(|d| squeezed(&d) == kept_squeezed);
    // The kept dimensions longer than 1, as positions in the input.
    let kept_long: Vec<i64> = kept_pos
        .iter()
        .zip(&kept_dims)
        .filter(|(_, &n)| n != 1)
        .map(|(&p, _)| p)
        .collect();
    for &x in &insts {
        if !depends.contains(&x) || is_reduce(m, x) || (x == root && roots.len() > 1) {
            continue;
        }
        let d = dims_of(x);
        let at_output = at_output_of(x);
        let at_input = row && d.as_deref() == Some(&in_dims[..]);
        let op = m.opcode(x);
        let ok = match op {
            Opcode::GetTupleElement => true,
            Opcode::Broadcast => {
                let o = m.operands(x)[0];
                let od = dims_of(o).unwrap_or_default();
                let bd = m.ints_attr(x, &AttrKey::Dimensions).unwrap_or(&[]);
                let long: Vec<i64> = bd
                    .iter()
                    .zip(&od)
                    .filter(|(_, &n)| n != 1)
                    .map(|(&p, _)| p)
                    .collect();
                at_input && at_output_of(o) && long == kept_long
            }
            Opcode::Reshape => at_output && at_output_of(m.operands(x)[0]),
            // XLA's optimized modules write a reshape as a bitcast between row-major layouts.
            Opcode::Bitcast => {
                at_output
                    && at_output_of(m.operands(x)[0])
                    && bitcast_is_reshape(m, x).map_err(|f| at(m, x, f))?
            }
            _ => op.is_elementwise() && (at_output || at_input),
        };
        if !ok {
            return Err(refuse(
                m,
                x,
                &format!(
                    "{} reading a reduction's result (only elementwise ops of the output's \
                     dimensions{} read one)",
                    op.name(),
                    if row {
                        " or the input's, and broadcasts back along the kept dimensions,"
                    } else {
                        ""
                    }
                ),
            ));
        }
    }
    for &r in &roots {
        let d = dims_of(r);
        let fits = is_reduce(m, r) || at_output_of(r) || row && d.as_deref() == Some(&in_dims[..]);
        if !fits {
            return Err(refuse(
                m,
                r,
                "an output whose dimensions are neither the reduction's output's nor, in a row \
                 reduction, its input's (up to unit dimensions)",
            ));
        }
    }
    // Passes: a reduction whose input reads others' results comes after them.
    let mut pass_of: HashMap<InstId, usize> = HashMap::new();
    for &x in &insts {
        if !depends.contains(&x) {
            continue;
        }
        let mut p = 0;
        for o in m.operands(x) {
            if let Some(&q) = pass_of.get(o) {
                p = p.max(q + usize::from(is_reduce(m, *o)));
            }
        }
        pass_of.insert(x, p);
    }
    let passes_n = reduces.iter().map(|r| pass_of[r]).max().unwrap_or(0) + 1;
    if passes_n > 1 && !row {
        let late = reduces
            .iter()
            .copied()
            .find(|r| pass_of[r] > 0)
            .unwrap_or(first);
        return Err(refuse(
            m,
            late,
            "a column reduction whose input reads another reduction's result",
        ));
    }
    let mut passes = vec![Vec::new(); passes_n];
    for &r in &reduces {
        passes[pass_of[&r]].push(r);
    }
    Ok(Some(ReductionGeometry {
        passes,
        roots,
        in_dims,
        reduced,
        kind,
    }))
}

fn is_reduce(m: &Module, id: InstId) -> bool {
    m.opcode(id) == Opcode::Reduce
}

fn reduce_dims(m: &Module, id: InstId) -> R<Vec<i64>> {
    m.ints_attr(id, &AttrKey::Dimensions)
        .map(|d| d.to_vec())
        .ok_or_else(|| at(m, id, "reduce needs dimensions".into()))
}

/// One `reduce` being computed: its reducer, inputs and init values.
struct Hero {
    id: InstId,
    comp: CompId,
    minmax: Option<&'static str>,
    inputs: Vec<InstId>,
    inits: Vec<InstId>,
}

impl Hero {
    fn of(m: &Module, id: InstId) -> R<Hero> {
        let ops = m.operands(id);
        let n = ops.len() / 2;
        if n == 0 || ops.len() != 2 * n {
            return Err("reduce needs pairs of operands and init values".into());
        }
        Ok(Hero {
            id,
            comp: m
                .comp_attr(id, &AttrKey::ToApply)
                .ok_or("reduce needs to_apply")?,
            minmax: minmax_intrinsic(m, id),
            inputs: ops[..n].to_vec(),
            inits: ops[n..].to_vec(),
        })
    }
}

/// The partial results of every hero (one value per leaf) and how to combine two of them.
struct Partials<'g, 'a, 'ctx> {
    g: &'g mut Gen<'a, 'ctx>,
    heroes: Vec<Hero>,
}

impl<'g, 'a, 'ctx> Partials<'g, 'a, 'ctx> {
    /// The partial results of the reductions `ids`, computed through `g`.
    fn new(g: &'g mut Gen<'a, 'ctx>, m: &Module, ids: &[InstId]) -> R<Self> {
        let mut heroes = Vec::with_capacity(ids.len());
        for &h in ids {
            heroes.push(Hero::of(m, h).map_err(|f| at(m, h, f))?);
        }
        Ok(Partials { g, heroes })
    }

    /// Binds every reduction to its result (`acc`, flattened over the reductions), so what
    /// reads it gets registers.
    fn bind_results(&mut self, acc: &[Val<'ctx>]) {
        let mut at = 0;
        for h in &self.heroes {
            let n = h.inits.len();
            self.g.bind(h.id, Ext::Vals(acc[at..at + n].to_vec()));
            at += n;
        }
    }

    /// Folds the input elements at reduced positions `start, start + step, ...` below `end`
    /// of output `kept` into the init values (each position at its own index, in a loop).
    fn fold_strided(
        &mut self,
        geo: &ReductionGeometry,
        kept: &Index<'ctx>,
        start: IntValue<'ctx>,
        end: IntValue<'ctx>,
        step: u64,
    ) -> R<Vec<Val<'ctx>>> {
        let cg = self.g.cg;
        let b = &cg.b;
        let init = self.inits()?;
        let trips = trip_count(cg, start, end, step)?;
        cg.for_range_acc(cg.c64(0), trips, &init, |s, a| {
            let j = b.build_int_nuw_mul(s, cg.c64(step as i64), "j.s")?;
            let j = b.build_int_nuw_add(j, start, "j")?;
            self.g.push_scope();
            let idx = input_index(self.g, geo, kept, j);
            let r = idx.and_then(|idx| self.fold(a, &idx));
            self.g.pop_scope();
            r
        })
    }

    /// The init values of every hero, leaves flattened.
    fn inits(&mut self) -> R<Vec<Val<'ctx>>> {
        let s = self.g.scalar_index();
        let mut out = Vec::new();
        for h in &self.heroes {
            for &i in &h.inits {
                out.push(self.g.gen1(i, &s)?);
            }
        }
        Ok(out)
    }

    /// `acc` combined with `other` (both flattened over the heroes), hero by hero.
    fn combine(&mut self, acc: &[Val<'ctx>], other: &[Val<'ctx>]) -> R<Vec<Val<'ctx>>> {
        let mut out = Vec::with_capacity(acc.len());
        let mut at = 0;
        for h in &self.heroes {
            let n = h.inits.len();
            let mut args = acc[at..at + n].to_vec();
            args.extend_from_slice(&other[at..at + n]);
            out.extend(self.g.reduce_step(h.comp, h.minmax, &args)?);
            at += n;
        }
        Ok(out)
    }

    /// `acc` with the input elements at `idx` folded in.
    fn fold(&mut self, acc: &[Val<'ctx>], idx: &Index<'ctx>) -> R<Vec<Val<'ctx>>> {
        let mut elems = Vec::with_capacity(acc.len());
        for h in &self.heroes {
            for &i in &h.inputs {
                elems.push(self.g.gen1(i, idx)?);
            }
        }
        self.combine(acc, &elems)
    }
}

/// Combines the partial results of the lanes `lane ^ mask` for every `mask` in `masks`: with
/// `16, 8, 4, 2, 1`, every lane ends with the whole warp's result.
fn butterfly<'ctx>(
    cg: &Cg<'ctx>,
    p: &mut Partials<'_, '_, 'ctx>,
    mut acc: Vec<Val<'ctx>>,
    masks: &[u64],
) -> R<Vec<Val<'ctx>>> {
    for &mask in masks {
        let mut other = Vec::with_capacity(acc.len());
        for &v in &acc {
            other.push(shuffle_xor(cg, v, mask)?);
        }
        acc = p.combine(&acc, &other)?;
    }
    Ok(acc)
}

/// The butterfly masks covering `n` lanes (a power of two at most 32), widest first.
fn masks_for(n: u64) -> Vec<u64> {
    let mut out = Vec::new();
    let mut k = n / 2;
    while k >= 1 {
        out.push(k);
        k /= 2;
    }
    out
}

/// The input index of output `k` (linear over the kept dimensions, whose coordinates are
/// `kept`) and reduced position `j` (linear over the reduced dimensions).
fn input_index<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &ReductionGeometry,
    kept: &Index<'ctx>,
    j: IntValue<'ctx>,
) -> R<Index<'ctx>> {
    let r = g.index_linear(&geo.reduced_dims(), j)?;
    let (mut ki, mut ri) = (kept.multi.iter(), r.multi.iter());
    let mut multi = Vec::with_capacity(geo.in_dims.len());
    for &red in &geo.reduced {
        let c = if red { ri.next() } else { ki.next() };
        multi.push(*c.ok_or("reduction index rank mismatch")?);
    }
    g.index_multi(&geo.in_dims, multi)
}

/// Emits the body of a reduction kernel at the builder's position (the entry block of a kernel
/// whose operands are bound in `g`): stores the leaves of every output of `geo.roots`, in
/// order, at `outs`.
pub(crate) fn emit_reduction<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    m: &Module,
    geo: &ReductionGeometry,
    outs: &[(axle_ir::ElementType, PointerValue<'ctx>)],
) -> R<()> {
    let cg = g.cg;
    let (tid, bid) = registers(cg)?;
    let b = &cg.b;
    let name = kernel_name(cg)?;
    let lane = b.build_and(tid, cg.c64(WARP as i64 - 1), "lane")?;
    let warp = b.build_right_shift(tid, cg.c64(5), false, "warp")?;
    let outputs = cg.c64(geo.outputs() as i64);
    let row_len = cg.c64(geo.row_len() as i64);
    let kept_dims = geo.kept_dims();
    // The output leaves of each root.
    let mut root_outs = Vec::with_capacity(geo.roots.len());
    let mut next = 0;
    for &r in &geo.roots {
        let n = inst_leaves(m, r)?.len();
        root_outs.push(
            outs.get(next..next + n)
                .ok_or("a reduction output missing")?,
        );
        next += n;
    }
    match geo.kind {
        ReductionKind::Row { threads_per_row } => {
            let (row, t) = if threads_per_row == WARP {
                let base = b.build_int_nuw_mul(bid, cg.c64(WARPS as i64), "rows.base")?;
                (b.build_int_nuw_add(base, warp, "row")?, lane)
            } else {
                (bid, tid)
            };
            let valid = b.build_int_compare(IntPredicate::ULT, row, outputs, "row.valid")?;
            let end = b
                .build_select(valid, row_len, cg.c64(0), "row.end")?
                .into_int_value();
            let kept = g.index_linear(&kept_dims, row)?;
            for (pi, pass) in geo.passes.iter().enumerate() {
                let mut p = Partials::new(g, m, pass)?;
                let acc = p.fold_strided(geo, &kept, t, end, threads_per_row)?;
                let mut acc = butterfly(cg, &mut p, acc, &masks_for(WARP))?;
                if threads_per_row > WARP {
                    // The warps' results meet in shared memory; each group of 8 lanes of
                    // every warp then loads all 8 and combines them, so every thread holds
                    // the row's result.
                    let first = b.build_int_compare(IntPredicate::EQ, lane, cg.c64(0), "lane0")?;
                    let mut slots = Vec::with_capacity(acc.len());
                    for (k, v) in acc.iter().enumerate() {
                        slots.push(shared_array(
                            cg,
                            v.get_type(),
                            WARPS as u32,
                            &format!("{name}.pass{pi}.warps{k}"),
                        ));
                    }
                    cg.if_then(first, || {
                        for (&s, &v) in slots.iter().zip(&acc) {
                            let at = cg.gep(v.get_type(), s, warp)?;
                            b.build_store(at, v)?;
                        }
                        Ok(())
                    })?;
                    barrier(cg)?;
                    let slot = b.build_and(lane, cg.c64(WARPS as i64 - 1), "slot")?;
                    let mut gathered = Vec::with_capacity(acc.len());
                    for (&s, &v) in slots.iter().zip(&acc) {
                        let at = cg.gep(v.get_type(), s, slot)?;
                        gathered.push(b.build_load(v.get_type(), at, "warp.part")?);
                    }
                    acc = butterfly(cg, &mut p, gathered, &masks_for(WARPS))?;
                }
                p.bind_results(&acc);
            }
            // Outputs of the input's dimensions: the row's threads, strided over the row.
            let full: Vec<usize> = (0..geo.roots.len())
                .filter(|&i| geo.full_size(m, geo.roots[i]))
                .collect();
            if !full.is_empty() {
                let trips = trip_count(cg, t, end, threads_per_row)?;
                cg.for_range_acc(cg.c64(0), trips, &[], |s, _| {
                    let j = b.build_int_nuw_mul(s, cg.c64(threads_per_row as i64), "j.s")?;
                    let j = b.build_int_nuw_add(j, t, "j")?;
                    g.push_scope();
                    let r = input_index(g, geo, &kept, j).and_then(|idx| {
                        for &i in &full {
                            let vals = g.gen(geo.roots[i], &idx)?;
                            store_outputs(cg, root_outs[i], idx.linear, &vals)?;
                        }
                        Ok(())
                    });
                    g.pop_scope();
                    r.map(|()| Vec::new())
                })?;
            }
            // Outputs of the output's dimensions: the row's first thread.
            let t0 = b.build_int_compare(IntPredicate::EQ, t, cg.c64(0), "t0")?;
            let store = b.build_and(t0, valid, "store")?;
            cg.if_then(store, || {
                store_roots(g, geo, &root_outs, |i| !full.contains(&i), &kept)
            })?;
        }
        ReductionKind::Column => {
            let [pass] = &geo.passes[..] else {
                return Err("a column reduction has one pass".into());
            };
            let base = b.build_int_nuw_mul(bid, cg.c64(WARP as i64), "cols.base")?;
            let col = b.build_int_nuw_add(base, lane, "col")?;
            let valid = b.build_int_compare(IntPredicate::ULT, col, outputs, "col.valid")?;
            let end = b
                .build_select(valid, row_len, cg.c64(0), "col.end")?
                .into_int_value();
            // Threads past the last output take output 0's coordinates but fold nothing.
            let safe = b
                .build_select(valid, col, cg.c64(0), "col.safe")?
                .into_int_value();
            let kept = g.index_linear(&kept_dims, safe)?;
            let mut p = Partials::new(g, m, pass)?;
            let acc = p.fold_strided(geo, &kept, warp, end, WARPS)?;
            let mut slots = Vec::with_capacity(acc.len());
            for (k, v) in acc.iter().enumerate() {
                slots.push(shared_array(
                    cg,
                    v.get_type(),
                    REDUCTION_BLOCK as u32,
                    &format!("{name}.tile{k}"),
                ));
            }
            for (&s, &v) in slots.iter().zip(&acc) {
                let at = cg.gep(v.get_type(), s, tid)?;
                b.build_store(at, v)?;
            }
            barrier(cg)?;
            let w0 = b.build_int_compare(IntPredicate::EQ, warp, cg.c64(0), "warp0")?;
            let store = b.build_and(w0, valid, "store")?;
            cg.if_then(store, || {
                let read = |w: u64| -> R<Vec<Val<'ctx>>> {
                    let at = b.build_int_nuw_add(lane, cg.c64((w * WARP) as i64), "tile.at")?;
                    let mut v = Vec::with_capacity(slots.len());
                    for (&s, &a) in slots.iter().zip(&acc) {
                        let p = cg.gep(a.get_type(), s, at)?;
                        v.push(b.build_load(a.get_type(), p, "tile.part")?);
                    }
                    Ok(v)
                };
                let mut total = read(0)?;
                for w in 1..WARPS {
                    let part = read(w)?;
                    total = p.combine(&total, &part)?;
                }
                p.bind_results(&total);
                store_roots(p.g, geo, &root_outs, |_| true, &kept)
            })?;
        }
    }
    Ok(())
}

/// Stores the roots `which` selects, computed at output index `kept` (the reductions bound to
/// their results), in a scope of their own.
fn store_roots<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &ReductionGeometry,
    root_outs: &[&[(axle_ir::ElementType, PointerValue<'ctx>)]],
    which: impl Fn(usize) -> bool,
    kept: &Index<'ctx>,
) -> R<()> {
    g.push_scope();
    let r = (|| {
        for (i, &r) in geo.roots.iter().enumerate() {
            if which(i) {
                // A root with unit dimensions added or removed is indexed in its own
                // dimensions; the row-major position is the same.
                let kept_dims = geo.kept_dims();
                let own = match g.m.array_shape(r) {
                    Some(a) if a.dims[..] != kept_dims[..] => {
                        let dims = a.dims.to_vec();
                        g.index_linear(&dims, kept.linear)?
                    }
                    _ => kept.clone(),
                };
                let vals = g.gen(r, &own)?;
                store_outputs(g.cg, root_outs[i], kept.linear, &vals)?;
            }
        }
        Ok(())
    })();
    g.pop_scope();
    r
}

/// Stores output `k` of every leaf.
fn store_outputs<'ctx>(
    cg: &Cg<'ctx>,
    outs: &[(axle_ir::ElementType, PointerValue<'ctx>)],
    k: IntValue<'ctx>,
    vals: &[Val<'ctx>],
) -> R<()> {
    for (&(ty, ptr), &v) in outs.iter().zip(vals) {
        cg.store(ty, ptr, k, v)?;
    }
    Ok(())
}
