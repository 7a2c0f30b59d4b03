//! Fusion kernel planning: how the CPU backend runs one `fusion` instruction, whoever made it
//! (Axle's fusion passes, or XLA's optimized dumps: `kLoop`, `kInput`, `kOutput`, `kCustom`).
//!
//! The elemental emitter computes an instruction at an index by asking its operands for the
//! elements it needs, so inside one loop nest every value is recomputed wherever it is read.
//! That is right for elementwise work and ruinous for a `reduce` read through a `broadcast`
//! (recomputed for every element of the row). The planner decides, per fused computation:
//!
//! - which inner values are *staged*: computed first into buffers of their own, in order,
//!   each by a kernel of its own (or lowered as an unfused instruction), then read from
//!   memory by everything after them;
//! - how each staged value and the fused root are computed: a [`KernelKind`] plus a
//!   [`KernelPlan`] — element by element (`Loop`), by rows ([`RowPlan`]: each reduction over
//!   the minor dimensions computed once per row, in passes, then the row's outputs), a
//!   column reduction (`Reduce`), a dot or convolution with its elementwise epilogue applied
//!   to each finished block ([`Epilogue`]), or a kernel-only root (sort, scatter, ...).
//!
//! How a value is read decides what a kernel may absorb: walking from the kernel's root
//! leaves towards the parameters, every value gets a [`Reach`] ([`crate::reach`]): `Identity`
//! (read at the root's own index), `Aligned` (at an index whose first `k` coordinates are the
//! row's) or `Other`.
//!
//! Invariants of every plan:
//! - A heavy value (`reduce`, `reduce-window`, `dot`, `convolution`) is absorbed into a kernel
//!   only where it is computed at most once per element it has: a row reduction reached only
//!   `Aligned` (computed once per row, read from registers), a heavy value reached only
//!   `Identity` (once per root element, memoized), the core of an epilogue (by the GEMM or
//!   convolution kernel), or the root reductions of a column kernel. Every other heavy value
//!   is staged. No heavy value is absorbed by two kernels.
//! - A GEMM reads each operand through its chain of views (its prologue: transposes, slices,
//!   broadcasts, reshapes of one run of memory; [`crate::gemm::operand_view`]) from the
//!   parameter or stage the chain starts at, so the chain is never staged; a chain that is no
//!   strided view is staged as the operand it computes.
//! - Sorts, scatters and other kernel-only ops are staged; instructions the kernels cannot
//!   emit (nested fusions, loops, host calls) are staged and lowered as unfused instructions,
//!   with their operands staged too.
//! - A stage reads only parameters and earlier stages; stages are in instruction order.
//! - A multi-output root is one kernel when its leaves fit one loop nest (same dimensions,
//!   or the full dimensions and the row dimensions of a row kernel, or sibling column
//!   reductions, or a dot's epilogue); otherwise each leaf is staged on its own.
//! - The plan depends only on the fused computation, so it is deterministic.

use std::collections::{HashMap, HashSet};

use axle_ir::{AttrKey, CompId, InstId, Module, Opcode};
use axle_schedule::views::is_operand_view;

use crate::error::R;
use crate::kernel_kind::{order, root_kind, KernelKind};
use crate::reach::{
    blocked_core, class, dims, element_ok, is_row_reduce, is_transcendental, is_view,
    operand_reach, Class, Reach,
};

/// The name of instruction `id` in kernel names and plans: its own, or for instructions the
/// passes made without one, its opcode and id (`fusion_81`).
pub(crate) fn inst_label(m: &Module, id: InstId) -> String {
    match m.name(id) {
        "" => format!("{}_{}", m.opcode(id).name(), id.index()),
        n => n.to_string(),
    }
}

/// How a kernel computes its root beyond what its [`KernelKind`] says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum KernelPlan {
    /// Element by element, or as the kind's own kernel does.
    Plain,
    /// Row by row, reductions first.
    Row(RowPlan),
    /// A dot or convolution, then an elementwise epilogue over each finished block.
    Epilogue(Epilogue),
}

impl KernelPlan {
    /// The instruction doing the kernel's work: an epilogue's core, else the root.
    pub(crate) fn core(&self, root: InstId) -> InstId {
        match self {
            KernelPlan::Epilogue(e) => e.core,
            _ => root,
        }
    }

    /// The scratch a kernel of `kind` with this plan, rooted at `root`, reads after its
    /// bindings, in this order: whether an arena buffer (a sort's planes, a GEMM's packed
    /// blocks, a strip-major convolution's packed kernel), and whether a temporary for an
    /// epilogue's core that has no output of its own. The buffer rules size them; lowering
    /// checks the assignment gave them.
    pub(crate) fn scratch_needs(&self, m: &Module, kind: KernelKind, root: InstId) -> (bool, bool) {
        let arena = match kind {
            KernelKind::Sort | KernelKind::TopK | KernelKind::Gemm => true,
            KernelKind::Conv => {
                crate::conv_fast::conv_fast(m, self.core(root)).is_some_and(|g| g.strip_major)
            }
            _ => false,
        };
        let core_temp = matches!(self, KernelPlan::Epilogue(e) if e.c_leaf.is_none());
        (arena, core_temp)
    }
}

/// A row kernel: items are rows (the first `k` dimensions of the root); for each row the
/// absorbed reductions run in passes over the row (a pass reads each input element once,
/// several independent reductions share it), their results stay in registers, then one pass
/// writes the row's outputs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct RowPlan {
    /// The row dimensions: the first `k` dimensions of every full-size root leaf, and all of
    /// the dimensions of every row-size leaf.
    pub rows: Vec<i64>,
    /// The full dimensions of the root's leaves (`rows` followed by the inner dimensions).
    pub full: Vec<i64>,
    /// The reductions of each pass, in order; those of one pass reduce inputs of the same
    /// dimensions and read only reductions of earlier passes.
    pub passes: Vec<Vec<InstId>>,
    /// Values kept for the rest of the row in a row-sized buffer on the stack, with the pass
    /// that computes them: transcendental values of the full dimensions that a pass computes
    /// for every element of the row anyway (softmax's `exp`), so later passes and the outputs
    /// load them instead of computing them again.
    pub cached: Vec<(usize, InstId)>,
}

/// An output fusion: the `core` dot or convolution runs as its blocked kernel, and the root's
/// elementwise epilogue is applied to each GEMM register tile as it is finished, or to each
/// block the kernel has just written ([`crate::epilogue`]). The planner absorbs the core only
/// where the epilogue reads it at the index it writes and nowhere else, which is what lets the
/// epilogue take the core's value from the tile, or overwrite the core in place.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Epilogue {
    /// The dot or convolution.
    pub core: InstId,
    /// The output leaf the core writes its result into (the epilogue then reads it there and
    /// overwrites it in place), or `None` for a scratch buffer of the core's shape.
    pub c_leaf: Option<usize>,
}

/// How one stage is computed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum StageHow {
    /// A kernel rooted at the stage's instruction.
    Kernel(KernelKind, KernelPlan),
    /// Lowered as an unfused instruction (its operands are parameters or earlier stages):
    /// views (tuples, reshapes) move no data, anything else is lowered as usual.
    Unfused,
}

/// One value of a fused computation computed into buffers of its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Stage {
    /// The instruction computed.
    pub inst: InstId,
    /// How.
    pub how: StageHow,
}

/// The plan of one fused computation: its stages, in order; the last one computes the root.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct FusionPlan {
    /// The stages in instruction order, ending with the root.
    pub stages: Vec<Stage>,
}

/// How a kernel absorbs a heavy value.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Absorb {
    /// Once per row, in a pass before the row's outputs.
    Row,
    /// Once per element, where it is read (or as a column kernel's root).
    Element,
    /// As the core of an epilogue (its operands must be in memory).
    Core,
}

/// The kind of kernel a walk plans for.
#[derive(Clone, Copy, Debug)]
enum Mode<'a> {
    /// Element or row loops with rows of `k` dimensions `rows` (`k` = rank: no rows).
    Rows { k: usize, rows: &'a [i64] },
    /// An epilogue around `core`.
    Epilogue { core: InstId },
    /// Column reductions at the root.
    Column { roots: &'a [InstId] },
    /// A kernel-only root: every operand is read anywhere.
    RootOnly,
}

/// The outcome of one walk.
#[derive(Default, Debug)]
struct Walked {
    absorbed: Vec<(InstId, Absorb)>,
    needs: Vec<InstId>,
    /// How each value the kernel computes is read.
    reach: HashMap<InstId, Reach>,
}

/// The planner of one fused computation.
struct Planner<'m> {
    m: &'m Module,
    /// Every instruction the root depends on, operands before users.
    ord: Vec<InstId>,
    /// Position of each instruction in `ord`.
    pos: HashMap<InstId, usize>,
}

/// The values blocked core `core` reads from memory (with `bound` in memory): a dot's
/// operands through their chains of views ([`crate::gemm::operand_view`]: the dot's prologue,
/// read in place by the GEMM's packing), a convolution's operands.
fn core_operands(m: &Module, core: InstId, bound: &HashSet<InstId>) -> Vec<InstId> {
    let ops = m.operands(core);
    if m.opcode(core) != Opcode::Dot {
        return ops.to_vec();
    }
    let in_memory = |x: InstId| bound.contains(&x) || m.opcode(x) == Opcode::Parameter;
    ops.iter()
        .map(|&o| crate::gemm::operand_view(m, o, &in_memory).base)
        .collect()
}

/// The largest row buffer a row kernel keeps on the stack.
pub(crate) const ROW_CACHE_BYTES: i64 = 64 << 10;

impl<'m> Planner<'m> {
    fn new(m: &'m Module, comp: CompId) -> R<Self> {
        let ord = order(m, comp)?;
        let pos = ord.iter().enumerate().map(|(k, &i)| (i, k)).collect();
        Ok(Planner { m, ord, pos })
    }

    /// Walks from `seeds` towards the parameters, deciding for every heavy value met whether
    /// the kernel absorbs it (given `mode`) or it must be staged; `bound` values are in memory.
    fn walk(&self, seeds: &[(InstId, Reach)], mode: Mode, bound: &HashSet<InstId>) -> Walked {
        let m = self.m;
        let mut state: HashMap<InstId, Reach> = HashMap::new();
        let join = |state: &mut HashMap<InstId, Reach>, id: InstId, r: Reach| {
            let e = state.entry(id).or_insert(r);
            *e = (*e).max(r);
        };
        for &(s, r) in seeds {
            join(&mut state, s, r);
        }
        let k = match mode {
            Mode::Rows { k, .. } => k,
            _ => usize::MAX,
        };
        let mut out = Walked::default();
        let mut staged: HashSet<InstId> = HashSet::new();
        for &id in self.ord.iter().rev() {
            let Some(&s) = state.get(&id) else { continue };
            if bound.contains(&id) || staged.contains(&id) || m.opcode(id) == Opcode::Parameter {
                continue;
            }
            let ops = m.operands(id);
            let stage = |out: &mut Walked, staged: &mut HashSet<InstId>, id: InstId| {
                if staged.insert(id) {
                    out.needs.push(id);
                }
            };
            match class(m, id) {
                Class::Opaque | Class::RootOnly => stage(&mut out, &mut staged, id),
                Class::Heavy => {
                    let how = match mode {
                        Mode::Column { roots } if roots.contains(&id) => Some(Absorb::Element),
                        Mode::Epilogue { core } if core == id => {
                            (s == Reach::Identity).then_some(Absorb::Core)
                        }
                        Mode::Rows { k, rows }
                            if m.opcode(id) == Opcode::Reduce
                                && s <= Reach::Aligned
                                && is_row_reduce(m, id, k, rows) =>
                        {
                            Some(Absorb::Row)
                        }
                        _ if s == Reach::Identity && element_ok(m, id) => Some(Absorb::Element),
                        _ => None,
                    };
                    let Some(how) = how else {
                        stage(&mut out, &mut staged, id);
                        continue;
                    };
                    out.absorbed.push((id, how));
                    match how {
                        Absorb::Row => {
                            let n = ops.len() / 2;
                            for (j, &o) in ops.iter().enumerate() {
                                let r = if j < n { Reach::Aligned } else { Reach::Other };
                                join(&mut state, o, r);
                            }
                        }
                        Absorb::Element => {
                            for &o in ops {
                                join(&mut state, o, Reach::Other);
                            }
                        }
                        Absorb::Core => {
                            for o in core_operands(m, id, bound) {
                                if !bound.contains(&o) && m.opcode(o) != Opcode::Parameter {
                                    stage(&mut out, &mut staged, o);
                                }
                            }
                        }
                    }
                }
                Class::Cheap => {
                    for (j, &o) in ops.iter().enumerate() {
                        let r = if matches!(mode, Mode::RootOnly) {
                            Reach::Other
                        } else {
                            operand_reach(m, id, j, s, k)
                        };
                        join(&mut state, o, r);
                    }
                }
            }
        }
        out.reach = state;
        out
    }

    /// Plans the kernel that computes `x` (with `bound` in memory), or says it is lowered as
    /// an unfused instruction; returns the stages it needs first.
    fn plan_stage(&self, x: InstId, bound: &HashSet<InstId>) -> (StageHow, Walked) {
        let m = self.m;
        let unbound_operands = |x: InstId| Walked {
            absorbed: Vec::new(),
            reach: HashMap::new(),
            needs: m
                .operands(x)
                .iter()
                .copied()
                .filter(|o| !bound.contains(o) && m.opcode(*o) != Opcode::Parameter)
                .collect(),
        };
        let views_of_bound = is_view(m, x)
            && m.operands(x)
                .iter()
                .all(|o| bound.contains(o) || m.opcode(*o) == Opcode::Parameter);
        if views_of_bound {
            return (StageHow::Unfused, Walked::default());
        }
        match class(m, x) {
            Class::Opaque => return (StageHow::Unfused, unbound_operands(x)),
            Class::RootOnly => {
                let Some(kind) = root_kind(m, x) else {
                    return (StageHow::Unfused, unbound_operands(x));
                };
                let seeds: Vec<_> = m.operands(x).iter().map(|&o| (o, Reach::Other)).collect();
                let w = self.walk(&seeds, Mode::RootOnly, bound);
                return (StageHow::Kernel(kind, KernelPlan::Plain), w);
            }
            _ => {}
        }
        if blocked_core(m, x) {
            let kind = if m.opcode(x) == Opcode::Dot {
                KernelKind::Gemm
            } else {
                KernelKind::Conv
            };
            let w = Walked {
                needs: core_operands(m, x, bound)
                    .into_iter()
                    .filter(|o| !bound.contains(o) && m.opcode(*o) != Opcode::Parameter)
                    .collect(),
                ..Walked::default()
            };
            return (StageHow::Kernel(kind, KernelPlan::Plain), w);
        }
        if m.opcode(x) == Opcode::Reduce && m.shape(x).is_tuple() && class(m, x) == Class::Heavy {
            // A variadic reduce (argmax's values and indices) is one reduce kernel computing
            // its inputs inline, as an unfused one is with its inputs in memory: staging an
            // input such as argmax's `broadcast(iota)` would only fill a buffer with it.
            let seeds = [(x, Reach::Identity)];
            let w = self.walk(&seeds, Mode::Column { roots: &[x] }, bound);
            return (StageHow::Kernel(KernelKind::Reduce, KernelPlan::Plain), w);
        }
        let leaves: Vec<InstId> = if m.opcode(x) == Opcode::Tuple {
            m.operands(x).to_vec()
        } else {
            vec![x]
        };
        let all_arrays = leaves.iter().all(|&l| m.array_shape(l).is_some());
        if !all_arrays {
            // A nested tuple: each part on its own.
            return (StageHow::Unfused, unbound_operands(x));
        }
        if m.opcode(x) == Opcode::DynamicUpdateSlice {
            let seeds: Vec<_> = m.operands(x).iter().map(|&o| (o, Reach::Other)).collect();
            let w = self.walk(&seeds, Mode::RootOnly, bound);
            return (StageHow::Kernel(KernelKind::Dus, KernelPlan::Plain), w);
        }
        if let Some(p) = self.plan_column(&leaves, bound) {
            return p;
        }
        // Rows that absorb reductions beat an epilogue (whose core is then staged); an
        // epilogue beats plain element loops (which would stage the core).
        let rows = self.plan_rows(&leaves, bound);
        if let Some((how, w, true)) = rows {
            return (how, w);
        }
        if let Some(p) = self.plan_epilogue(x, &leaves, bound) {
            return p;
        }
        if let Some((how, w, _)) = rows {
            return (how, w);
        }
        // Leaves that fit no single loop nest: each is staged on its own.
        (StageHow::Unfused, unbound_operands(x))
    }

    /// Sibling column reductions (the last input dimension kept) at the root.
    fn plan_column(
        &self,
        leaves: &[InstId],
        bound: &HashSet<InstId>,
    ) -> Option<(StageHow, Walked)> {
        let m = self.m;
        let geo = |r: InstId| -> Option<(Vec<i64>, Vec<i64>)> {
            if m.opcode(r) != Opcode::Reduce || class(m, r) != Class::Heavy {
                return None;
            }
            let input = *m.operands(r).first()?;
            let in_dims = dims(m, input).to_vec();
            let rd = m.ints_attr(r, &AttrKey::Dimensions)?.to_vec();
            let last_kept = !in_dims.is_empty() && !rd.contains(&(in_dims.len() as i64 - 1));
            last_kept.then_some((in_dims, rd))
        };
        let first = geo(*leaves.first()?)?;
        let mut roots: Vec<InstId> = Vec::new();
        for &l in leaves {
            if geo(l)? != first {
                return None;
            }
            if !roots.contains(&l) {
                roots.push(l);
            }
        }
        let seeds: Vec<_> = roots.iter().map(|&r| (r, Reach::Identity)).collect();
        let w = self.walk(&seeds, Mode::Column { roots: &roots }, bound);
        Some((StageHow::Kernel(KernelKind::Reduce, KernelPlan::Plain), w))
    }

    /// A blocked dot or convolution read at the root's index, with an elementwise epilogue.
    fn plan_epilogue(
        &self,
        x: InstId,
        leaves: &[InstId],
        bound: &HashSet<InstId>,
    ) -> Option<(StageHow, Walked)> {
        let m = self.m;
        let full = dims(m, leaves[0]);
        if leaves.iter().any(|&l| dims(m, l) != full) {
            return None;
        }
        let seeds: Vec<_> = leaves.iter().map(|&l| (l, Reach::Identity)).collect();
        let upto = self.pos.get(&x).copied().unwrap_or(self.ord.len());
        let candidates = self.ord[..=upto.min(self.ord.len() - 1)]
            .iter()
            .copied()
            .filter(|&c| !bound.contains(&c) && blocked_core(m, c) && dims(m, c) == full);
        for core in candidates {
            let w = self.walk(&seeds, Mode::Epilogue { core }, bound);
            if !w.absorbed.contains(&(core, Absorb::Core)) {
                continue;
            }
            let cty = m.array_shape(core)?.ty;
            let c_leaf = leaves.iter().position(|&l| l == core).or_else(|| {
                leaves
                    .iter()
                    .position(|&l| m.array_shape(l).map(|a| a.ty) == Some(cty))
            });
            let kind = if m.opcode(core) == Opcode::Dot {
                KernelKind::Gemm
            } else {
                KernelKind::Conv
            };
            return Some((
                StageHow::Kernel(kind, KernelPlan::Epilogue(Epilogue { core, c_leaf })),
                w,
            ));
        }
        None
    }

    /// Element or row loops: the row dimensions are chosen to absorb the most reductions.
    /// The flag says whether any reduction is absorbed by rows.
    fn plan_rows(
        &self,
        leaves: &[InstId],
        bound: &HashSet<InstId>,
    ) -> Option<(StageHow, Walked, bool)> {
        let m = self.m;
        let full: Vec<i64> = leaves
            .iter()
            .map(|&l| dims(m, l))
            .max_by_key(|d| d.len())?
            .to_vec();
        let short: Vec<&[i64]> = leaves
            .iter()
            .map(|&l| dims(m, l))
            .filter(|d| d.len() < full.len())
            .collect();
        // Leaves shorter than the full ones must all be the same row prefix of them.
        let forced_k = match short.first() {
            Some(s) => {
                let k = s.len();
                if short.iter().any(|d| *d != *s) || full[..k] != **s {
                    return None;
                }
                Some(k)
            }
            None => None,
        };
        if leaves
            .iter()
            .any(|&l| dims(m, l).len() == full.len() && dims(m, l) != full)
        {
            return None;
        }
        let mut ks: Vec<usize> = match forced_k {
            Some(k) => vec![k],
            None => {
                let mut ks: Vec<usize> = self
                    .ord
                    .iter()
                    .filter(|&&r| m.opcode(r) == Opcode::Reduce && !bound.contains(&r))
                    .filter_map(|&r| {
                        let k = dims(m, r).len();
                        (k <= full.len() && dims(m, r) == &full[..k]).then_some(k)
                    })
                    .collect();
                ks.push(full.len());
                ks
            }
        };
        ks.sort_unstable();
        ks.dedup();
        let mut best: Option<(usize, usize, Walked)> = None;
        for k in ks {
            let rows = &full[..k];
            let seeds: Vec<_> = leaves
                .iter()
                .map(|&l| {
                    let r = if dims(m, l).len() == full.len() {
                        Reach::Identity
                    } else {
                        Reach::Aligned
                    };
                    (l, r)
                })
                .collect();
            let w = self.walk(&seeds, Mode::Rows { k, rows }, bound);
            let n = w.absorbed.iter().filter(|a| a.1 == Absorb::Row).count();
            if best.as_ref().is_none_or(|b| n >= b.1) {
                best = Some((k, n, w));
            }
        }
        let (k, n, w) = best?;
        if n == 0 && forced_k.is_none() {
            return Some((
                StageHow::Kernel(KernelKind::Loop, KernelPlan::Plain),
                w,
                false,
            ));
        }
        let row_reduces: Vec<InstId> = w
            .absorbed
            .iter()
            .filter(|a| a.1 == Absorb::Row)
            .map(|a| a.0)
            .collect();
        let passes = self.passes(&row_reduces);
        let cached = self.row_cache(&passes, &full, k, &w, bound);
        let plan = RowPlan {
            rows: full[..k].to_vec(),
            full,
            passes,
            cached,
        };
        Some((
            StageHow::Kernel(KernelKind::Row, KernelPlan::Row(plan)),
            w,
            n > 0,
        ))
    }

    /// The values a row kernel keeps in a row buffer (see [`RowPlan::cached`]): walking from
    /// each pass's inputs through elementwise ops of the full dimensions (which read their
    /// operands at the pass's own index), the first transcendental value met that every
    /// reader reads in the current row. Rows longer than [`ROW_CACHE_BYTES`] keep nothing.
    fn row_cache(
        &self,
        passes: &[Vec<InstId>],
        full: &[i64],
        k: usize,
        w: &Walked,
        bound: &HashSet<InstId>,
    ) -> Vec<(usize, InstId)> {
        let m = self.m;
        let absorbed: HashSet<InstId> = w.absorbed.iter().map(|a| a.0).collect();
        let inner: i64 = full[k..].iter().product();
        let mut seen: HashSet<InstId> = HashSet::new();
        let mut out = Vec::new();
        for (pi, pass) in passes.iter().enumerate() {
            let input = m.operands(pass[0])[0];
            if dims(m, input) != full {
                continue;
            }
            let mut stack: Vec<InstId> = pass
                .iter()
                .flat_map(|&r| {
                    let ops = m.operands(r);
                    ops[..ops.len() / 2].to_vec()
                })
                .collect();
            while let Some(v) = stack.pop() {
                if !seen.insert(v)
                    || bound.contains(&v)
                    || absorbed.contains(&v)
                    || m.opcode(v) == Opcode::Parameter
                    || class(m, v) != Class::Cheap
                    || dims(m, v) != full
                {
                    continue;
                }
                let op = m.opcode(v);
                let bytes = m.array_shape(v).map_or(0, |a| a.ty.byte_size() as i64) * inner;
                if is_transcendental(op)
                    && w.reach.get(&v).is_some_and(|&r| r <= Reach::Aligned)
                    && bytes <= ROW_CACHE_BYTES
                {
                    out.push((pi, v));
                    continue;
                }
                if op.is_elementwise() && op != Opcode::BitcastConvert || op == Opcode::Map {
                    stack.extend_from_slice(m.operands(v));
                }
            }
        }
        out
    }

    /// Groups row reductions into passes: a reduction runs in the pass after the last one it
    /// reads; reductions of one pass share their input dimensions.
    fn passes(&self, reduces: &[InstId]) -> Vec<Vec<InstId>> {
        let m = self.m;
        let set: HashSet<InstId> = reduces.iter().copied().collect();
        // The pass of each reduction: one more than the deepest reduction below it.
        let mut depth: HashMap<InstId, usize> = HashMap::new();
        for &id in &self.ord {
            let below = m
                .operands(id)
                .iter()
                .map(|o| depth.get(o).copied().unwrap_or(0))
                .max()
                .unwrap_or(0);
            let d = if set.contains(&id) { below + 1 } else { below };
            depth.insert(id, d);
        }
        let mut in_order: Vec<InstId> = reduces.to_vec();
        in_order.sort_by_key(|r| self.pos[r]);
        let mut passes: Vec<(usize, Vec<i64>, Vec<InstId>)> = Vec::new();
        for r in in_order {
            let d = depth[&r];
            let in_dims = dims(m, m.operands(r)[0]).to_vec();
            match passes.iter_mut().find(|p| p.0 == d && p.1 == in_dims) {
                Some(p) => p.2.push(r),
                None => passes.push((d, in_dims, vec![r])),
            }
        }
        passes.sort_by_key(|p| p.0);
        passes.into_iter().map(|p| p.2).collect()
    }
}

/// Plans fused computation `comp`: which values are staged and how each stage and the root
/// are computed (see the module documentation).
pub(crate) fn plan_fusion(m: &Module, comp: CompId) -> R<FusionPlan> {
    let p = Planner::new(m, comp)?;
    let root = m.root(comp);
    let params: HashSet<InstId> = m.params(comp).iter().copied().collect();
    if params.contains(&root) {
        // The fusion returns its operand: no stage at all.
        return Ok(FusionPlan { stages: Vec::new() });
    }
    let mut staged: Vec<InstId> = vec![root];
    // Every stage is planned with all the others in memory. Planning asks for more stages
    // (values a kernel cannot absorb, heavy values two kernels would both absorb); staging
    // only grows, by at most every instruction, so this ends.
    loop {
        let set: HashSet<InstId> = staged.iter().chain(&params).copied().collect();
        let plans: Vec<(InstId, StageHow, Walked)> = staged
            .iter()
            .map(|&x| {
                let mut bound = set.clone();
                bound.remove(&x);
                let (how, w) = p.plan_stage(x, &bound);
                (x, how, w)
            })
            .collect();
        let mut more: Vec<InstId> = Vec::new();
        let mut absorbed_by: HashMap<InstId, usize> = HashMap::new();
        for (_, _, w) in &plans {
            more.extend(w.needs.iter().filter(|n| !set.contains(n)));
            for &(h, _) in &w.absorbed {
                *absorbed_by.entry(h).or_default() += 1;
            }
        }
        more.extend(
            absorbed_by
                .into_iter()
                .filter(|&(_, c)| c > 1)
                .map(|(h, _)| h),
        );
        if more.is_empty() && plans.len() > 1 {
            // A fusion run in steps: the buffer assignment takes a tuple, reshape, copy or
            // bitcast step for a view of its operands (`axle_schedule::views::is_operand_view`), so
            // such a stage cannot be a kernel writing buffers of its own. Its operands are
            // staged, and it becomes a view of them. (A fusion of one stage is one kernel,
            // which may compute any root.)
            for (x, how, _) in &plans {
                if matches!(how, StageHow::Kernel(..)) && is_operand_view(m, *x) {
                    more.extend(m.operands(*x).iter().filter(|o| !set.contains(o)));
                }
            }
        }
        more.sort_by_key(|i| p.pos[i]);
        more.dedup();
        if more.is_empty() {
            let mut plans = plans;
            plans.sort_by_key(|(x, _, _)| p.pos[x]);
            return Ok(FusionPlan {
                stages: plans
                    .into_iter()
                    .map(|(inst, how, _)| Stage { inst, how })
                    .collect(),
            });
        }
        staged.extend(more);
    }
}

/// The instructions a kernel rooted at `root` reads from memory: the `bound` ones it reaches
/// (it reads nothing below them), in instruction order.
pub(crate) fn reached_bound(
    m: &Module,
    root: InstId,
    bound: &dyn Fn(InstId) -> bool,
) -> Vec<InstId> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![root];
    while let Some(i) = stack.pop() {
        if !seen.insert(i) {
            continue;
        }
        if bound(i) {
            out.push(i);
            continue;
        }
        stack.extend_from_slice(m.operands(i));
    }
    out.sort_by_key(|i| i.index());
    out
}

/// A one-line description of a kernel of kind `kind` computing `root` for instruction `origin`
/// with plan `plan`: its kind, the instruction it came from, its root and its plan (with
/// instructions by name), as [`crate::kernel_plan`] lists it.
pub(crate) fn describe(
    m: &Module,
    kind: KernelKind,
    origin: InstId,
    root: InstId,
    plan: &KernelPlan,
) -> String {
    let name = |i: &InstId| inst_label(m, *i);
    let mut s = format!(
        "{:?} {} root={} ({})",
        kind,
        inst_label(m, origin),
        inst_label(m, root),
        m.opcode(root).name()
    );
    match plan {
        KernelPlan::Plain => {}
        KernelPlan::Row(p) => {
            let passes: Vec<String> = p
                .passes
                .iter()
                .map(|pass| format!("[{}]", pass.iter().map(name).collect::<Vec<_>>().join(",")))
                .collect();
            s += &format!(" rows={:?} passes={}", p.rows, passes.join(""));
            if !p.cached.is_empty() {
                let c: Vec<String> = p.cached.iter().map(|(_, v)| name(v)).collect();
                s += &format!(" cached={}", c.join(","));
            }
        }
        KernelPlan::Epilogue(e) => {
            let into = match e.c_leaf {
                Some(l) => format!("output {l}"),
                None => "scratch".to_string(),
            };
            s += &format!(" epilogue core={} into {into}", name(&e.core));
        }
    }
    s
}
