//! Kernel kinds: what kind of kernel the CPU backend emits for a root instruction (and whether a
//! `topk` keeps its best by selection, [`topk_selects`]), and the order in which a
//! computation's instructions are lowered (operands before users).
//!
//! Invariant: [`root_kind`] answers from the instruction alone (its op, attributes and shapes),
//! so the fusion planner, the buffer rules and the lowering agree on every root.

use axle_ir::{AttrKey, AttrValue, CompId, InstId, Module, Opcode};

use crate::elemental::{inst_leaves, is_elemental};
use crate::error::R;

/// What a kernel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KernelKind {
    /// One loop nest over the root's elements, every leaf computed elementally.
    Loop,
    /// `reduce` roots keeping the last input dimension (siblings of one geometry), with a loop
    /// order that keeps the evaluator's accumulation order.
    Reduce,
    /// Rows: reductions over the minor dimensions once per row, then the row's outputs
    /// ([`crate::fused::RowPlan`]).
    Row,
    /// A `dynamic-update-slice` root (in place when allowed).
    Dus,
    /// A `scatter` root (in place when allowed).
    Scatter,
    /// A `select-and-scatter` root.
    SelectAndScatter,
    /// A `sort` root.
    Sort,
    /// A `topk` root or the `TopK` custom call.
    TopK,
    /// An `f32`/`f64` `dot` of buffers, as a blocked GEMM (with an epilogue when its plan
    /// says so).
    Gemm,
    /// An `f32`/`f64` `convolution` of buffers, register-tiled (with an epilogue when its plan
    /// says so).
    Conv,
    /// An `rng-bit-generator` root: items are block calls of its generator.
    Rng,
}

impl KernelKind {
    /// The kind's name in profiles and traces.
    pub(crate) fn name(self) -> &'static str {
        match self {
            KernelKind::Loop => "loop",
            KernelKind::Reduce => "reduce",
            KernelKind::Row => "row",
            KernelKind::Dus => "dynamic-update-slice",
            KernelKind::Scatter => "scatter",
            KernelKind::SelectAndScatter => "select-and-scatter",
            KernelKind::Sort => "sort",
            KernelKind::TopK => "topk",
            KernelKind::Gemm => "gemm",
            KernelKind::Conv => "conv",
            KernelKind::Rng => "rng",
        }
    }
}

/// The instructions `comp`'s root depends on, operands before users.
pub(crate) fn order(m: &Module, comp: CompId) -> R<Vec<InstId>> {
    let root = m.root(comp);
    if root.is_none() {
        return Err(format!("computation {} has no root", m.comp_name(comp)).into());
    }
    axle_ir::traversal::operand_post_order(m, root)
        .map_err(|o| format!("cycle through %{}", m.name(o)).into())
}

/// The kernel kind for a root instruction, if it has one.
pub(crate) fn root_kind(m: &Module, id: InstId) -> Option<KernelKind> {
    use Opcode::*;
    Some(match m.opcode(id) {
        Reduce => KernelKind::Reduce,
        DynamicUpdateSlice => KernelKind::Dus,
        Scatter => KernelKind::Scatter,
        SelectAndScatter => KernelKind::SelectAndScatter,
        Sort => KernelKind::Sort,
        TopK => KernelKind::TopK,
        RngBitGenerator => KernelKind::Rng,
        CustomCall if is_topk_custom_call(m, id) => KernelKind::TopK,
        Dot if crate::gemm::gemm_geo(m, id, &Default::default()).is_some() => KernelKind::Gemm,
        Convolution if crate::conv_fast::conv_fast(m, id).is_some() => KernelKind::Conv,
        _ if is_elemental(m, id) => KernelKind::Loop,
        _ => return None,
    })
}

/// Whether `id` is XLA's `TopK` custom call.
pub(crate) fn is_topk_custom_call(m: &Module, id: InstId) -> bool {
    matches!(
        m.attr(id, &AttrKey::CustomCallTarget),
        Some(AttrValue::Str(s)) | Some(AttrValue::Raw(s)) | Some(AttrValue::Ident(s)) if s.as_ref() == "TopK"
    )
}

/// The largest `k` that top-k selects instead of sorting. Random rows insert rarely (one
/// comparison per element: 256 rows of 32768 `f32`, k = 8, took 6 ms against the radix sort's
/// 99 ms); rows already in order insert every element with `k` moves, and at `k = 16` that was
/// 1.5x the radix sort's time, so selection stops at 8.
pub(crate) const SELECT_MAX_K: i64 = 8;

/// `k` when `topk` instruction `root` keeps its `k` best by selection.
pub(crate) fn topk_selects(m: &Module, root: InstId) -> Option<i64> {
    if m.opcode(root) != Opcode::TopK {
        return None;
    }
    let k = *inst_leaves(m, root).ok()?.first()?.dims.last()?;
    (k <= SELECT_MAX_K).then_some(k)
}
