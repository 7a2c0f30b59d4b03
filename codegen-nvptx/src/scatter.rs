//! Scatter kernels: a `scatter` (an unfused one, or the root of a fusion whose other
//! instructions compute its operands, indices and updates elementally) as two consecutive
//! kernels on the same output buffers ([`crate::kernels`]): the **copy** kernel writes the
//! operands into the outputs (one element per thread, every output), then the **update**
//! kernel applies the updates with the `to_apply` combiner, on one of two paths
//! ([`UpdateStrategy`]): the **owner** path for any combiner the elemental generators emit
//! (several operands and updates included), and the **atomic** path for the combiners whose
//! result cannot depend on the order of the updates.
//!
//! Semantics are XLA's and the evaluator's: the scatter indices are visited in row-major
//! order and, for each, the update window; an index whose window would leave the operand
//! along any dimension (start below 0 or past `dim - window`) is skipped as a whole; every
//! update reads the output as earlier updates left it (`out = combiner(out, update)`).
//! `indices_are_sorted` and `unique_indices` are accepted and change nothing: neither path's
//! result depends on them (nor on timing), so a hint that is false is harmless.
//!
//! **Which path** ([`atomic_combiner`], decided when the kernels are planned): the atomic
//! path exactly when the scatter has one operand of an integer type of 8 to 64 bits or pred
//! ([`ATOMIC_TYPES`]) and its combiner is a single `add` (not for pred), `minimum`,
//! `maximum`, `and`, `or` or `xor` of its two scalar parameters, in either order. Each of
//! those is commutative and associative *exactly* (wrapping integer addition, integer and
//! boolean lattice operations), so applying an element's updates in any order gives the
//! evaluator's bits; `minimum`/`maximum` are signed for signed types and unsigned for
//! unsigned ones and pred (false < true). Everything else takes the owner path: float `add`
//! (rounding depends on the order, so atomics would make results vary from run to run),
//! float `minimum`/`maximum` (when two NaNs meet, the evaluator keeps the first one's bits,
//! sign and payload, so the result depends on the order; and PTX's float min/max atomics
//! return the other operand for a NaN instead of propagating it), `multiply`
//! (no atomic instruction), overwriting (`set`) combiners even with `unique_indices=true`
//! (XLA leaves duplicates implementation-defined then, but the evaluator applies them in
//! order, and the hint may be false), pred `add` (the evaluator's is `or`, but an
//! `atomicrmw add` on the byte would not be), sub-byte integers (no byte of their own),
//! several operands (no multi-word atomic), and any combiner that is more than one op.
//!
//! **Atomic path**: one thread per update element (row-major over the updates): it finds its
//! scatter index and window position, skips the element when that index's window leaves the
//! operand (the same whole-window check as the owner path), and combines its update into
//! the output element with an LLVM `atomicrmw` (monotonic) on the global buffer. LLVM's
//! NVPTX backend makes 32- and 64-bit ones `atom.global.*`/`red.global.*` and 8- and 16-bit
//! ones a compare-and-swap loop on the containing aligned 32-bit word, which writes the
//! word's other bytes back unchanged and stays in mapped memory (buffers start
//! [`crate::kernels::BUFFER_ALIGN`]-aligned and `cuMemAlloc` maps whole pages; on the
//! simulator the host's byte atomics touch only the element). Every write of the update
//! kernel is atomic, so such a loop never loses a neighbour's update. The simulator runs this kernel's threads as
//! concurrent OS threads, so its atomics are exercised under real races.
//!
//! **Owner path** (the invariant that makes it race-free): the update kernel's
//! thread `t` owns the output elements whose coordinates along the **owned** operand
//! dimensions ([`UpdateStrategy::Owner`]) are `t`'s (row-major over the owned dimensions),
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
//! thread per column looping over the indices (a thread per update element on the atomic
//! path); a scatter of single elements into a small array gets one thread per element
//! checking every index.
//!
//! Float atomics, opt-in: XLA's GPU backend uses atomic read-modify-writes for a float `add`
//! too (unless told to be deterministic), so concurrent updates of one element land in an
//! order the hardware picks, and float sums then vary from run to run. By default results here
//! never depend on timing; kernels planned with
//! [`KernelOptions::float_atomics`](crate::kernels::KernelOptions::float_atomics) (`axle
//! compile --float-atomics`, `AXLE_NVPTX_FLOAT_ATOMICS=1` for runs) send a one-operand `f32`
//! or `f64` scatter whose combiner is one `add` ([`AtomicCombiner::FAdd`]) down the atomic
//! path, an `atomicrmw fadd` (PTX `atom.global.add.f32`/`.f64`, which also flushes subnormal
//! inputs and results): the sums then differ from the evaluator's by the rounding of another
//! summation order (and subnormals), and from run to run. Float `minimum`/`maximum` and
//! narrower floats keep the owner path even then.
//!
//! Refused, with an error naming the instruction: a scatter whose combiner, operands,
//! indices or updates the elemental generators cannot emit, and a scatter read inside a
//! fusion other than as its root.

use axle_codegen_llvm::cg::{numel, Cg, Val};
use axle_codegen_llvm::elemental::{arr_of, inst_leaves, simple_binary, Gen, Index};
use axle_codegen_llvm::error::R;
use axle_ir::{ArrayShape, AttrKey, ElementType, InstId, Module, Opcode};
use inkwell::values::{FloatValue, IntValue, PointerValue};
use inkwell::{AtomicOrdering, AtomicRMWBinOp, IntPredicate};

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
    /// How the update kernel applies the updates.
    pub update: UpdateStrategy,
}

/// How a scatter's update kernel applies the updates (the rule is in the module's header).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UpdateStrategy {
    /// Each thread owns disjoint output elements and applies every update of them in index
    /// order.
    Owner {
        /// Per operand dimension, whether the threads are laid out along it.
        owned: Vec<bool>,
    },
    /// One thread per update element, combining it into its output element with an atomic
    /// read-modify-write.
    Atomic {
        /// The read-modify-write the combiner is.
        op: AtomicCombiner,
        /// The updates' dimensions (one thread per element).
        updates: Vec<i64>,
    },
}

/// A combiner that an atomic read-modify-write computes exactly, whatever the order in which
/// the updates of one element arrive.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AtomicCombiner {
    /// Wrapping integer `add`.
    Add,
    /// Signed `minimum`.
    Min,
    /// Signed `maximum`.
    Max,
    /// Unsigned (and pred) `minimum`.
    UMin,
    /// Unsigned (and pred) `maximum`.
    UMax,
    /// Bitwise (and pred) `and`.
    And,
    /// Bitwise (and pred) `or`.
    Or,
    /// Bitwise (and pred) `xor`.
    Xor,
    /// Float `add` of `f32` or `f64`, only when the kernels are planned with
    /// [`KernelOptions::float_atomics`](crate::kernels::KernelOptions::float_atomics): the one
    /// combiner here whose result depends on the order the updates arrive in.
    FAdd,
}

impl AtomicCombiner {
    /// LLVM's `atomicrmw` operation.
    fn llvm(self) -> AtomicRMWBinOp {
        match self {
            AtomicCombiner::Add => AtomicRMWBinOp::Add,
            AtomicCombiner::Min => AtomicRMWBinOp::Min,
            AtomicCombiner::Max => AtomicRMWBinOp::Max,
            AtomicCombiner::UMin => AtomicRMWBinOp::UMin,
            AtomicCombiner::UMax => AtomicRMWBinOp::UMax,
            AtomicCombiner::And => AtomicRMWBinOp::And,
            AtomicCombiner::Or => AtomicRMWBinOp::Or,
            AtomicCombiner::Xor => AtomicRMWBinOp::Xor,
            AtomicCombiner::FAdd => AtomicRMWBinOp::FAdd,
        }
    }
}

/// The atomic read-modify-write that scatter `s` may use, by the rule of the module's header:
/// one operand of a type in [`ATOMIC_TYPES`] and a combiner that is one order-independent
/// exact binary op of its two parameters; with `float_atomics`, also a float `add` of one
/// `f32` or `f64` operand ([`FLOAT_ATOMIC_TYPES`]); `None` for anything else (the owner path).
pub fn atomic_combiner(m: &Module, s: InstId, float_atomics: bool) -> Option<AtomicCombiner> {
    use AtomicCombiner::*;
    let ops = m.operands(s);
    if ops.len() != 3 {
        return None;
    }
    let t = m.array_shape(ops[0])?.ty;
    let float = float_atomics && FLOAT_ATOMIC_TYPES.contains(&t);
    if !(ATOMIC_TYPES.contains(&t) || float) || m.array_shape(ops[2])?.ty != t {
        return None;
    }
    let comp = m.comp_attr(s, &AttrKey::ToApply)?;
    let scalar_t = |id: InstId| {
        m.array_shape(id)
            .is_some_and(|a| a.ty == t && a.dims.is_empty())
    };
    if !m.params(comp).iter().all(|&p| scalar_t(p)) || !scalar_t(m.root(comp)) {
        return None;
    }
    let signed = t.is_signed_int();
    Some(match simple_binary(m, comp)? {
        Opcode::Add if float => FAdd,
        _ if float => return None,
        Opcode::Add if t != ElementType::Pred => Add,
        Opcode::Minimum if signed => Min,
        Opcode::Maximum if signed => Max,
        Opcode::Minimum => UMin,
        Opcode::Maximum => UMax,
        Opcode::And => And,
        Opcode::Or => Or,
        Opcode::Xor => Xor,
        _ => return None,
    })
}

/// The float types whose `add` scatters take the atomic path when the kernels are planned
/// with `float_atomics` (PTX `atom.global.add.f32`, and `.f64` from sm_60).
pub const FLOAT_ATOMIC_TYPES: [ElementType; 2] = [ElementType::F32, ElementType::F64];

/// The element types an atomic update kernel combines: the integers of 8 to 64 bits (8- and
/// 16-bit ones through a compare-and-swap loop on the containing 32-bit word, which LLVM's
/// NVPTX backend emits) and pred (one byte, 0 or 1).
pub const ATOMIC_TYPES: [ElementType; 9] = [
    ElementType::Pred,
    ElementType::S8,
    ElementType::U8,
    ElementType::S16,
    ElementType::U16,
    ElementType::S32,
    ElementType::U32,
    ElementType::S64,
    ElementType::U64,
];

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
pub(crate) fn scatter_geometry(
    m: &Module,
    id: InstId,
    float_atomics: bool,
) -> R<Option<ScatterGeometry>> {
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
    let update = match atomic_combiner(m, s, float_atomics) {
        Some(op) => UpdateStrategy::Atomic { op, updates: up },
        None => UpdateStrategy::Owner {
            owned: owned_dims(&dims, &window),
        },
    };
    Ok(Some(ScatterGeometry {
        scatter: s,
        dims,
        window,
        update,
    }))
}

/// The dimensions an owner update kernel lays its threads along: every dimension the window
/// spans whole, then the cheapest others while the threads are few and the work stays within
/// bounds.
fn owned_dims(dims: &[i64], window: &[i64]) -> Vec<bool> {
    let mut owned: Vec<bool> = dims.iter().zip(window).map(|(d, w)| d == w).collect();
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
    owned
}

impl ScatterGeometry {
    /// The threads of the update kernel: the elements of the owned dimensions, or the
    /// updates' elements.
    pub fn update_threads(&self) -> u64 {
        match &self.update {
            UpdateStrategy::Owner { owned } => self
                .dims
                .iter()
                .zip(owned)
                .filter(|(_, &o)| o)
                .map(|(&d, _)| d.max(0) as u64)
                .product(),
            UpdateStrategy::Atomic { updates, .. } => numel(updates).max(0) as u64,
        }
    }
}

impl ScatterKernel {
    /// The launch plan: one thread per output element (copy) or per owned position
    /// (update); no launch when the output is empty.
    pub fn launch_plan(&self) -> Result<LaunchPlan, crate::NvptxError> {
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
    cg.if_then(inside, || match (k.pass, &k.geo.update) {
        (ScatterPass::Copy, _) => copy(g, &k.geo, t, outs),
        (ScatterPass::Update, UpdateStrategy::Owner { owned }) => {
            owner_update(g, &k.geo, owned, t, outs)
        }
        (ScatterPass::Update, UpdateStrategy::Atomic { op, .. }) => {
            atomic_update(g, &k.geo, *op, t, outs)
        }
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

/// Where a scatter's indices put its update windows: the dimension numbers resolved against
/// the shapes of the indices and updates.
struct Placement {
    dn: Dims,
    /// The indices' shape.
    ind: ArrayShape,
    /// The updates' dimensions.
    up: Vec<i64>,
    /// The index array's dimensions other than the index vector's, paired in order with
    /// [`Placement::up_scatter`].
    ind_batch: Vec<usize>,
    /// The updates' scatter (non-window) dimensions.
    up_scatter: Vec<usize>,
    /// Per batching dimension, its position among [`Placement::ind_batch`].
    batch_pos: Vec<usize>,
}

impl Placement {
    fn new(m: &Module, geo: &ScatterGeometry) -> R<Placement> {
        let s = geo.scatter;
        let ops = m.operands(s);
        let n = (ops.len() - 1) / 2;
        let ind = arr_of(m, ops[n])?.clone();
        let up = arr_of(m, ops[n + 1])?.dims.to_vec();
        let dn = dims_of(m, s, geo.dims.len())?;
        let ivd = dn.index_vector_dim;
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
        Ok(Placement {
            dn,
            ind,
            up,
            ind_batch,
            up_scatter,
            batch_pos,
        })
    }

    /// The start in the operand of the window of scatter index `gi` (its coordinates along
    /// [`Placement::up_scatter`]), and whether the window lies in the operand as a whole.
    fn window_start<'ctx>(
        &self,
        g: &mut Gen<'_, 'ctx>,
        geo: &ScatterGeometry,
        gi: &[IntValue<'ctx>],
    ) -> R<(Vec<IntValue<'ctx>>, IntValue<'ctx>)> {
        let cg = g.cg;
        let b = &cg.b;
        let rank = geo.dims.len();
        let ops = g.m.operands(geo.scatter);
        let indices = ops[(ops.len() - 1) / 2];
        let ivd = self.dn.index_vector_dim;
        let mut start = vec![cg.c64(0); rank];
        for (k, &d) in self.dn.scatter_to_operand.iter().enumerate() {
            let mut multi = vec![cg.c64(0); self.ind.rank()];
            for (j, &bd) in self.ind_batch.iter().enumerate() {
                multi[bd] = gi[j];
            }
            if ivd < self.ind.rank() {
                multi[ivd] = cg.c64(k as i64);
            }
            let i = g.index_multi(&self.ind.dims, multi)?;
            let v = g.gen1(indices, &i)?;
            *start
                .get_mut(d as usize)
                .ok_or("scatter dimension out of range")? = g.to_i64(self.ind.ty, v)?;
        }
        for (k, &d) in self.dn.input_batching.iter().enumerate() {
            *start
                .get_mut(d as usize)
                .ok_or("batching dimension out of range")? = gi[self.batch_pos[k]];
        }
        let mut ok = cg.i1().const_all_ones();
        for (d, &s) in start.iter().enumerate() {
            let limit = cg.c64(geo.dims[d] - geo.window[d]);
            let ge = b.build_int_compare(IntPredicate::SGE, s, cg.c64(0), "ge")?;
            let le = b.build_int_compare(IntPredicate::SLE, s, limit, "le")?;
            ok = b.build_and(ok, b.build_and(ge, le, "in")?, "ok")?;
        }
        Ok((start, ok))
    }

    /// The updates' index of scatter index `gi` at window position `w` (per operand
    /// dimension).
    fn update_index<'ctx>(
        &self,
        g: &mut Gen<'_, 'ctx>,
        gi: &[IntValue<'ctx>],
        w: &[IntValue<'ctx>],
    ) -> R<Index<'ctx>> {
        let mut um = vec![g.cg.c64(0); self.up.len()];
        for (j, &d) in self.up_scatter.iter().enumerate() {
            um[d] = gi[j];
        }
        for (k, &d) in self.dn.window_operand.iter().enumerate() {
            um[self.dn.window_dims[k] as usize] = w[d];
        }
        g.index_multi(&self.up, um)
    }
}

/// Every update of the elements thread `t` owns (along the dimensions `owned`), in the
/// sequential order.
fn owner_update<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &ScatterGeometry,
    owned: &[bool],
    t: IntValue<'ctx>,
    outs: &[(ArrayShape, PointerValue<'ctx>)],
) -> R<()> {
    let m = g.m;
    let cg = g.cg;
    let s = geo.scatter;
    let ops = m.operands(s).to_vec();
    let n = (ops.len() - 1) / 2;
    let updates = ops[n + 1..].to_vec();
    let comp = m
        .comp_attr(s, &AttrKey::ToApply)
        .ok_or("scatter needs to_apply")?;
    let pl = Placement::new(m, geo)?;
    let rank = geo.dims.len();
    // This thread's coordinates along the owned dimensions.
    let owned_dims: Vec<i64> = (0..rank)
        .map(|d| if owned[d] { geo.dims[d] } else { 1 })
        .collect();
    let mine = g.index_linear(&owned_dims, t)?.multi;
    let sdims: Vec<i64> = pl.up_scatter.iter().map(|&d| pl.up[d]).collect();
    let loop_window: Vec<i64> = (0..rank)
        .map(|d| if owned[d] { 1 } else { geo.window[d] })
        .collect();
    g.nest(&sdims, Vec::new(), &mut |g, gi, _| {
        let b = &cg.b;
        // In bounds as a whole, and covering this thread's coordinates where it owns them.
        let (start, mut ok) = pl.window_start(g, geo, gi)?;
        let mut at_owned = vec![cg.c64(0); rank];
        for d in (0..rank).filter(|&d| owned[d]) {
            let w = b.build_int_nsw_sub(mine[d], start[d], "w")?;
            let inw = b.build_int_compare(IntPredicate::ULT, w, cg.c64(geo.window[d]), "inw")?;
            ok = b.build_and(ok, inw, "ok")?;
            at_owned[d] = w;
        }
        g.push_scope();
        let r = cg.if_then(ok, || {
            g.nest(&loop_window, Vec::new(), &mut |g, wl, _| {
                let b = &cg.b;
                let mut w = Vec::with_capacity(rank);
                let mut e = Vec::with_capacity(rank);
                for d in 0..rank {
                    if owned[d] {
                        w.push(at_owned[d]);
                        e.push(mine[d]);
                    } else {
                        w.push(wl[d]);
                        e.push(b.build_int_nsw_add(start[d], wl[d], "e")?);
                    }
                }
                let ui = pl.update_index(g, gi, &w)?;
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

/// Update element `t` (row-major over the updates) combined into its output element with
/// the atomic read-modify-write `op`, unless its scatter index's window leaves the operand.
fn atomic_update<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &ScatterGeometry,
    op: AtomicCombiner,
    t: IntValue<'ctx>,
    outs: &[(ArrayShape, PointerValue<'ctx>)],
) -> R<()> {
    let cg = g.cg;
    let ops = g.m.operands(geo.scatter);
    let update = ops[ops.len() - 1];
    let [(sh, out)] = outs else {
        return Err("an atomic scatter has one output".into());
    };
    let pl = Placement::new(g.m, geo)?;
    let ui = g.index_linear(&pl.up, t)?;
    let gi: Vec<IntValue<'ctx>> = pl.up_scatter.iter().map(|&d| ui.multi[d]).collect();
    let (start, ok) = pl.window_start(g, geo, &gi)?;
    g.push_scope();
    let r = cg.if_then(ok, || {
        let mut e = start.clone();
        for (k, &d) in pl.dn.window_operand.iter().enumerate() {
            let w = ui.multi[pl.dn.window_dims[k] as usize];
            e[d] = cg.b.build_int_nsw_add(start[d], w, "e")?;
        }
        let ei = g.index_multi(&geo.dims, e)?;
        let v = g.gen1(update, &ui)?;
        let v = cg.to_mem(sh.ty, v)?;
        let p = cg.gep(cg.mem_ty(sh.ty)?, *out, ei.linear)?;
        if op == AtomicCombiner::FAdd {
            float_atomic_add(cg, p, v.into_float_value())
        } else {
            cg.b.build_atomicrmw(op.llvm(), p, v.into_int_value(), AtomicOrdering::Monotonic)?;
            Ok(())
        }
    });
    g.pop_scope();
    r
}

/// `atomicrmw fadd` (monotonic) of `v` into `*p`, which inkwell's builder does not offer for
/// float values: PTX `atom.global.add.f32`/`.f64` on the device, a compare-and-swap loop on the
/// host the simulator runs on.
fn float_atomic_add<'ctx>(cg: &Cg<'ctx>, p: PointerValue<'ctx>, v: FloatValue<'ctx>) -> R<()> {
    use inkwell::values::AsValueRef;
    use llvm_sys::LLVMAtomicOrdering::LLVMAtomicOrderingMonotonic;
    use llvm_sys::LLVMAtomicRMWBinOp::LLVMAtomicRMWBinOpFAdd;
    if cg.b.get_insert_block().is_none() {
        return Err("an atomic add outside a basic block".into());
    }
    // SAFETY: the builder is positioned, `p` is a pointer and `v` a float of the pointee's
    // type (both made by `Cg` in this module and context), which is all LLVMBuildAtomicRMW
    // requires.
    unsafe {
        llvm_sys::core::LLVMBuildAtomicRMW(
            cg.b.as_mut_ptr(),
            LLVMAtomicRMWBinOpFAdd,
            p.as_value_ref(),
            v.as_value_ref(),
            LLVMAtomicOrderingMonotonic,
            0,
        );
    }
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
