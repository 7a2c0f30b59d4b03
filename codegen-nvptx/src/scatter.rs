//! Scatter kernels: a `scatter` (an unfused one, or the root of a fusion whose other
//! instructions compute its operands, indices and updates elementally) as two consecutive
//! kernels on the same output buffers ([`crate::kernels`]): the **copy** kernel writes the
//! operands into the outputs (one element per thread, every output), then the **update**
//! kernel applies the updates with the `to_apply` combiner (any computation the elemental
//! generators emit, several operands and updates included).
//!
//! Semantics are XLA's and the evaluator's: the scatter indices are visited in row-major
//! order and, for each, the update window; an index whose window would leave the operand
//! along any dimension (start below 0 or past `dim - window`) is skipped as a whole; every
//! update reads the output as earlier updates left it (`out = combiner(out, update)`).
//! `indices_are_sorted` and `unique_indices` are accepted and change nothing: the kernel's
//! result never depends on them (nor on timing), so a hint that is false is harmless.
//!
//! Partition of the update work (the invariant that makes it race-free): the update kernel's
//! thread `t` owns the output elements whose coordinates along the **owned** operand
//! dimensions ([`ScatterGeometry::owned`]) are `t`'s (row-major over the owned dimensions),
//! and only those: it loops over the scatter indices in order and, for each index in bounds,
//! over the window positions along the other dimensions, updating the elements of its own
//! that the window covers (along an owned dimension `d` the element's window position is
//! `e[d] - start[d]`, skipped unless inside the window). Threads own disjoint sets of
//! elements, so no two threads ever touch one element, whatever the indices: windows of
//! different indices that overlap (duplicate indices, or starts closer than the window size)
//! meet in the elements of one thread, which applies their updates in index order, as the
//! sequential semantics does. Within one index each element is covered at most once, so the
//! order of a thread's window positions does not matter. Hence each element receives exactly
//! the evaluator's sequence of combiner applications and the result is bit-identical to it,
//! floats included. (One thread per update-window position, looping over the indices, would
//! race: two threads with different window positions write one element when the windows of
//! two indices overlap.)
//!
//! Which dimensions are owned is a cost choice, not a correctness one: every dimension whose
//! window spans it whole (a start in bounds is 0 there) costs nothing to own; each further
//! dimension multiplies the threads by its size and the total work by `size / window`, and
//! is owned while the threads are fewer than [`MIN_THREADS`] and the work grows at most
//! [`MAX_WORK_GROWTH`] times. An embedding gradient (`[V, D]`, windows of one row) gets one
//! thread per column looping over the indices; a scatter of single elements into a small
//! array gets one thread per element checking every index.
//!
//! Why not atomics: XLA's GPU backend uses atomic read-modify-writes when the combiner is a
//! commutative add, so concurrent updates of one element land in an order the hardware
//! picks, and float sums then vary from run to run. Here results never depend on timing, and
//! any combiner (non-commutative ones, several operands) works the same way.
//!
//! Refused, with an error naming the instruction: a scatter whose combiner, operands,
//! indices or updates the elemental generators cannot emit, and a scatter read inside a
//! fusion other than as its root.

use axle_codegen_llvm::cg::{numel, Val};
use axle_codegen_llvm::elemental::{arr_of, inst_leaves, Gen};
use axle_codegen_llvm::error::R;
use axle_ir::{ArrayShape, AttrKey, InstId, Module, Opcode};
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::launch::LaunchPlan;

/// An update kernel gets more owned dimensions while it has fewer threads than this.
pub const MIN_THREADS: u64 = 1024;

/// How many times the update kernel's total work may grow by owning dimensions that the
/// window does not span whole (each element of such a dimension checks every index).
pub const MAX_WORK_GROWTH: u64 = 32;

/// The shape of a scatter's work.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScatterGeometry {
    /// The `scatter` (the kernel's instruction, or its fusion's root).
    pub scatter: InstId,
    /// The operands' (and outputs') dimensions.
    pub dims: Vec<i64>,
    /// The update window's size along each operand dimension (1 along inserted and batching
    /// dimensions).
    pub window: Vec<i64>,
    /// Per operand dimension, whether the update kernel's threads are laid out along it.
    pub owned: Vec<bool>,
}

/// The two kernels of a scatter, in launch order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScatterPass {
    /// Writes the operands into the outputs.
    Copy,
    /// Applies the updates in place.
    Update,
}

/// One kernel of a scatter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScatterKernel {
    /// Which of the two it is.
    pub pass: ScatterPass,
    /// The scatter's geometry.
    pub geo: ScatterGeometry,
}

/// The dimension numbers of a scatter, read from its attributes.
struct Dims {
    /// The updates' window dimensions.
    window_dims: Vec<i64>,
    /// The operand dimensions the window spans (not inserted, not batching), in order.
    window_operand: Vec<usize>,
    scatter_to_operand: Vec<i64>,
    input_batching: Vec<i64>,
    indices_batching: Vec<i64>,
    index_vector_dim: usize,
}

fn dims_of(m: &Module, s: InstId, op_rank: usize) -> R<Dims> {
    let ints = |k: AttrKey| m.ints_attr(s, &k).unwrap_or(&[]).to_vec();
    let inserted = ints(AttrKey::InsertedWindowDims);
    let input_batching = ints(AttrKey::InputBatchingDims);
    let window_operand = (0..op_rank)
        .filter(|d| !inserted.contains(&(*d as i64)) && !input_batching.contains(&(*d as i64)))
        .collect();
    Ok(Dims {
        window_dims: ints(AttrKey::UpdateWindowDims),
        window_operand,
        scatter_to_operand: ints(AttrKey::ScatterDimsToOperandDims),
        input_batching,
        indices_batching: ints(AttrKey::ScatterIndicesBatchingDims),
        index_vector_dim: m
            .int_attr(s, &AttrKey::IndexVectorDim)
            .ok_or("scatter needs index_vector_dim")? as usize,
    })
}

/// The scatter instruction `id` computes: itself, or its fusion's root; `None` for anything
/// else.
pub(crate) fn scatter_of(m: &Module, id: InstId) -> Option<InstId> {
    let root = match m.opcode(id) {
        Opcode::Fusion => m.root(m.comp_attr(id, &AttrKey::Calls)?),
        _ => id,
    };
    (m.opcode(root) == Opcode::Scatter).then_some(root)
}

/// The geometry of instruction `id` when it computes a scatter (see [`scatter_of`]).
pub(crate) fn scatter_geometry(m: &Module, id: InstId) -> R<Option<ScatterGeometry>> {
    let Some(s) = scatter_of(m, id) else {
        return Ok(None);
    };
    let ops = m.operands(s);
    if ops.len() < 3 || ops.len().is_multiple_of(2) {
        return Err("scatter needs operands, indices and as many updates".into());
    }
    let n = (ops.len() - 1) / 2;
    let dims = arr_of(m, ops[0])?.dims.to_vec();
    let up = arr_of(m, ops[n + 1])?.dims.to_vec();
    let dn = dims_of(m, s, dims.len())?;
    if dn.window_operand.len() != dn.window_dims.len() {
        return Err("scatter dimension numbers do not match the shapes".into());
    }
    let mut window = vec![1i64; dims.len()];
    for (k, &d) in dn.window_operand.iter().enumerate() {
        window[d] = *up
            .get(dn.window_dims[k] as usize)
            .ok_or("update_window_dims out of range")?;
    }
    // Own every dimension the window spans whole, then the cheapest others while the
    // threads are few and the work stays within bounds.
    let mut owned: Vec<bool> = dims.iter().zip(&window).map(|(d, w)| d == w).collect();
    let mut threads: u64 = (0..dims.len())
        .filter(|&d| owned[d])
        .map(|d| dims[d].max(0) as u64)
        .product();
    let mut growth = 1u64;
    let mut rest: Vec<usize> = (0..dims.len()).filter(|&d| !owned[d]).collect();
    // The dimension whose work grows least first (ties: the minor-most, for coalescing).
    rest.sort_by_key(|&d| {
        (
            (dims[d].max(0) as u64).div_ceil(window[d].max(1) as u64),
            usize::MAX - d,
        )
    });
    for d in rest {
        let g = (dims[d].max(0) as u64).div_ceil(window[d].max(1) as u64);
        if threads >= MIN_THREADS || growth.saturating_mul(g) > MAX_WORK_GROWTH {
            break;
        }
        owned[d] = true;
        threads = threads.saturating_mul(dims[d].max(0) as u64);
        growth *= g;
    }
    Ok(Some(ScatterGeometry {
        scatter: s,
        dims,
        window,
        owned,
    }))
}

impl ScatterGeometry {
    /// The threads of the update kernel: the elements of the owned dimensions.
    pub fn update_threads(&self) -> u64 {
        self.dims
            .iter()
            .zip(&self.owned)
            .filter(|(_, &o)| o)
            .map(|(&d, _)| d.max(0) as u64)
            .product()
    }
}

impl ScatterKernel {
    /// The launch plan: one thread per output element (copy) or per owned position
    /// (update); no launch when the output is empty.
    pub fn launch_plan(&self) -> Result<LaunchPlan, String> {
        let elements = numel(&self.geo.dims).max(0) as u64;
        LaunchPlan::for_elements(match (elements, self.pass) {
            (0, _) => 0,
            (n, ScatterPass::Copy) => n,
            (_, ScatterPass::Update) => self.geo.update_threads(),
        })
    }
}

/// Emits the body of scatter kernel `k` (launched as `plan`) at the builder's position (the
/// entry block of a kernel whose inputs are bound in `g`), writing the output leaves `outs`.
pub(crate) fn emit_scatter<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    k: &ScatterKernel,
    plan: &LaunchPlan,
    outs: &[(ArrayShape, PointerValue<'ctx>)],
) -> R<()> {
    let cg = g.cg;
    let t = cg.thread_index(plan.wide_index)?;
    let inside =
        cg.b.build_int_compare(IntPredicate::ULT, t, cg.c64(plan.elements as i64), "inside")?;
    cg.if_then(inside, || match k.pass {
        ScatterPass::Copy => copy(g, &k.geo, t, outs),
        ScatterPass::Update => update(g, &k.geo, t, outs),
    })
}

/// Output element `t` of every leaf: the operand's element.
fn copy<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &ScatterGeometry,
    t: IntValue<'ctx>,
    outs: &[(ArrayShape, PointerValue<'ctx>)],
) -> R<()> {
    let ops = g.m.operands(geo.scatter).to_vec();
    let idx = g.index_linear(&geo.dims, t)?;
    let mut vals = Vec::with_capacity(outs.len());
    for (&o, _) in ops.iter().zip(outs) {
        vals.push(g.gen1(o, &idx)?);
    }
    for ((s, p), v) in outs.iter().zip(vals) {
        g.cg.store(s.ty, *p, t, v)?;
    }
    Ok(())
}

/// Every update of the elements thread `t` owns, in the sequential order.
fn update<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &ScatterGeometry,
    t: IntValue<'ctx>,
    outs: &[(ArrayShape, PointerValue<'ctx>)],
) -> R<()> {
    let m = g.m;
    let cg = g.cg;
    let s = geo.scatter;
    let ops = m.operands(s).to_vec();
    let n = (ops.len() - 1) / 2;
    let (indices, updates) = (ops[n], ops[n + 1..].to_vec());
    let comp = m
        .comp_attr(s, &AttrKey::ToApply)
        .ok_or("scatter needs to_apply")?;
    let ind = arr_of(m, indices)?.clone();
    let up = arr_of(m, updates[0])?.dims.to_vec();
    let rank = geo.dims.len();
    let dn = dims_of(m, s, rank)?;
    let ivd = dn.index_vector_dim;
    // The index array's dimensions other than the index vector's, paired in order with the
    // updates' scatter dimensions.
    let ind_batch: Vec<usize> = (0..ind.rank()).filter(|&d| d != ivd).collect();
    let up_scatter: Vec<usize> = (0..up.len())
        .filter(|d| !dn.window_dims.contains(&(*d as i64)))
        .collect();
    if ind_batch.len() != up_scatter.len() {
        return Err("scatter dimension numbers do not match the shapes".into());
    }
    let batch_pos: Vec<usize> = dn
        .indices_batching
        .iter()
        .map(|&d| {
            ind_batch
                .iter()
                .position(|&x| x as i64 == d)
                .ok_or("a batching dimension is the index vector dimension")
        })
        .collect::<Result<_, _>>()?;
    // This thread's coordinates along the owned dimensions.
    let owned_dims: Vec<i64> = (0..rank)
        .map(|d| if geo.owned[d] { geo.dims[d] } else { 1 })
        .collect();
    let mine = g.index_linear(&owned_dims, t)?.multi;
    let sdims: Vec<i64> = up_scatter.iter().map(|&d| up[d]).collect();
    let loop_window: Vec<i64> = (0..rank)
        .map(|d| if geo.owned[d] { 1 } else { geo.window[d] })
        .collect();
    g.nest(&sdims, Vec::new(), &mut |g, gi, _| {
        let b = &cg.b;
        // The window's start in the operand.
        let mut start = vec![cg.c64(0); rank];
        for (k, &d) in dn.scatter_to_operand.iter().enumerate() {
            let mut multi = vec![cg.c64(0); ind.rank()];
            for (j, &bd) in ind_batch.iter().enumerate() {
                multi[bd] = gi[j];
            }
            if ivd < ind.rank() {
                multi[ivd] = cg.c64(k as i64);
            }
            let i = g.index_multi(&ind.dims, multi)?;
            let v = g.gen1(indices, &i)?;
            *start
                .get_mut(d as usize)
                .ok_or("scatter dimension out of range")? = g.to_i64(ind.ty, v)?;
        }
        for (k, &d) in dn.input_batching.iter().enumerate() {
            *start
                .get_mut(d as usize)
                .ok_or("batching dimension out of range")? = gi[batch_pos[k]];
        }
        // In bounds as a whole, and covering this thread's coordinates where it owns them.
        let mut ok = cg.i1().const_all_ones();
        let mut at_owned = vec![cg.c64(0); rank];
        for d in 0..rank {
            let limit = cg.c64(geo.dims[d] - geo.window[d]);
            let ge = b.build_int_compare(IntPredicate::SGE, start[d], cg.c64(0), "ge")?;
            let le = b.build_int_compare(IntPredicate::SLE, start[d], limit, "le")?;
            ok = b.build_and(ok, b.build_and(ge, le, "in")?, "ok")?;
            if geo.owned[d] {
                let w = b.build_int_nsw_sub(mine[d], start[d], "w")?;
                let inw =
                    b.build_int_compare(IntPredicate::ULT, w, cg.c64(geo.window[d]), "inw")?;
                ok = b.build_and(ok, inw, "ok")?;
                at_owned[d] = w;
            }
        }
        g.push_scope();
        let r = cg.if_then(ok, || {
            g.nest(&loop_window, Vec::new(), &mut |g, wl, _| {
                let b = &cg.b;
                let mut w = Vec::with_capacity(rank);
                let mut e = Vec::with_capacity(rank);
                for d in 0..rank {
                    if geo.owned[d] {
                        w.push(at_owned[d]);
                        e.push(mine[d]);
                    } else {
                        w.push(wl[d]);
                        e.push(b.build_int_nsw_add(start[d], wl[d], "e")?);
                    }
                }
                let mut um = vec![cg.c64(0); up.len()];
                for (j, &d) in up_scatter.iter().enumerate() {
                    um[d] = gi[j];
                }
                for (k, &d) in dn.window_operand.iter().enumerate() {
                    um[dn.window_dims[k] as usize] = w[d];
                }
                let ui = g.index_multi(&up, um)?;
                let ei = g.index_multi(&geo.dims, e)?;
                let mut args: Vec<Val<'ctx>> = Vec::with_capacity(2 * n);
                for (sh, p) in outs {
                    args.push(cg.load(sh.ty, *p, ei.linear)?);
                }
                for &u in &updates {
                    args.push(g.gen1(u, &ui)?);
                }
                let r = g.apply(comp, &args)?;
                for ((sh, p), v) in outs.iter().zip(r) {
                    cg.store(sh.ty, *p, ei.linear, v)?;
                }
                Ok(Vec::new())
            })?;
            Ok(())
        });
        g.pop_scope();
        r?;
        Ok(Vec::new())
    })?;
    Ok(())
}

/// The output leaves of a scatter's kernel, checked against its operands.
pub(crate) fn check_outputs(m: &Module, id: InstId, geo: &ScatterGeometry) -> R<()> {
    let n = (m.operands(geo.scatter).len() - 1) / 2;
    let leaves = inst_leaves(m, id)?;
    if leaves.len() != n || leaves.iter().any(|l| *l.dims != *geo.dims) {
        return Err("a scatter's outputs must be its operands' shapes".into());
    }
    Ok(())
}
