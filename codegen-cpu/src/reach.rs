//! How the values below a kernel's root are computed and read, for the fusion planner
//! ([`crate::fused`]).
//!
//! Every instruction of a fused computation has a [`Class`]: cheap per element (recomputed
//! wherever it is read), heavy (a loop per element: `reduce`, `reduce-window`, `dot`,
//! `convolution`), emitted only as a kernel root (sorts, scatters), or opaque (lowered as an
//! unfused instruction). Every read has a [`Reach`]: walking from a kernel's root towards the
//! parameters, [`operand_reach`] says at which index an instruction reads each operand when it
//! is itself read at `Identity` (the root's own index value), `Aligned` (an index whose first
//! `k` coordinates are the current row's) or `Other` (anywhere).
//!
//! Invariants: `Identity` passes only through ops that hand their own index value to the
//! operand (so the elemental emitter's memo computes the operand once per root element);
//! `Aligned` passes only through ops that keep the first `k` coordinates (elementwise ops,
//! broadcasts, transposes, reshapes, slices, pads, concatenations and reversals that leave
//! those dimensions alone), so a value with one element per row is read only at the current
//! row. With `k = 0` (a single row) every read is `Aligned`.

use axle_ir::{AttrKey, AttrValue, InstId, Module, Opcode};

use crate::elemental::{bitcast_is_reshape, comp_is_elemental, inst_leaves, is_elemental};
use crate::kernel_kind::root_kind;

/// What a value costs to compute per element.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Class {
    /// Cheap per element: recomputed wherever it is read.
    Cheap,
    /// A loop per element (`reduce`, `reduce-window`, `dot`, `convolution`).
    Heavy,
    /// Emitted only as a kernel root (sort, scatter, top-k, ...), reading its operands
    /// elementally.
    RootOnly,
    /// Not emitted by kernels at all: lowered as an unfused instruction.
    Opaque,
}

/// How a value is read from a kernel's root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Reach {
    /// At the root's own index (the same index value: memoized).
    Identity,
    /// At an index whose first `k` coordinates are the current row's.
    Aligned,
    /// Anywhere.
    Other,
}

/// Whether `id` is a `dot` the GEMM kernel runs or a `convolution` the tiled kernel runs.
pub(crate) fn blocked_core(m: &Module, id: InstId) -> bool {
    match m.opcode(id) {
        Opcode::Dot => crate::gemm::gemm_geo(m, id, &Default::default()).is_some(),
        Opcode::Convolution => crate::conv_fast::conv_fast(m, id).is_some(),
        _ => false,
    }
}

/// Whether every array leaf of `id`'s shape has a type the kernels handle.
pub(crate) fn types_ok(m: &Module, id: InstId) -> bool {
    inst_leaves(m, id)
        .map(|ls| ls.iter().all(|l| crate::forms::supported_type(l.ty)))
        .unwrap_or(false)
}

pub(crate) fn class(m: &Module, id: InstId) -> Class {
    use Opcode::*;
    if crate::host::plan(m, id).is_some() || !types_ok(m, id) {
        return Class::Opaque;
    }
    let applied_ok = || {
        m.comp_attr(id, &AttrKey::ToApply)
            .is_some_and(|c| comp_is_elemental(m, c))
    };
    match m.opcode(id) {
        Reduce | ReduceWindow if applied_ok() => Class::Heavy,
        Reduce | ReduceWindow => Class::Opaque,
        Dot | Convolution => Class::Heavy,
        Map if !applied_ok() => Class::Opaque,
        Parameter => Class::Cheap,
        _ if is_elemental(m, id) => {
            if matches!(m.opcode(id), Call | Fusion | Conditional | While)
                && !m.called_comps_iter(id).all(|c| comp_is_elemental(m, c))
            {
                Class::Opaque
            } else {
                Class::Cheap
            }
        }
        _ if root_kind(m, id).is_some() => {
            let applied = match m.opcode(id) {
                Fusion | Call | While | Conditional => true,
                _ => m.called_comps(id).iter().all(|&c| comp_is_elemental(m, c)),
            };
            if applied {
                Class::RootOnly
            } else {
                Class::Opaque
            }
        }
        _ => Class::Opaque,
    }
}

/// Whether `op` costs far more than a load per element (a polynomial or a loop).
pub(crate) fn is_transcendental(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Exp | Expm1 | Log | Log1p | Logistic | Tanh | Power | Sin | Cos | Tan | Atan2 | Erf | Cbrt
    )
}

/// Whether an instruction only rearranges its operands' buffers (lowering moves no data).
pub(crate) fn is_view(m: &Module, id: InstId) -> bool {
    use Opcode::*;
    match m.opcode(id) {
        Tuple | GetTupleElement | Copy | OptBarrier | AddDependency | Reshape => true,
        Bitcast => bitcast_is_reshape(m, id).unwrap_or(false),
        _ => false,
    }
}

/// The dimensions of array instruction `id` (empty for tuples).
pub(crate) fn dims(m: &Module, id: InstId) -> &[i64] {
    m.array_shape(id).map(|a| &a.dims[..]).unwrap_or(&[])
}

/// Whether reduce `id` reduces exactly the dimensions after the first `k` of inputs whose
/// first `k` dimensions are `rows` (so its result has one element per row).
pub(crate) fn is_row_reduce(m: &Module, id: InstId, k: usize, rows: &[i64]) -> bool {
    let ops = m.operands(id);
    let Some(input) = ops.first() else {
        return false;
    };
    let in_dims = dims(m, *input);
    let Some(rd) = m.ints_attr(id, &AttrKey::Dimensions) else {
        return false;
    };
    let rank = in_dims.len();
    rank > k
        && in_dims[..k] == *rows
        && rd.len() == rank - k
        && (k..rank).all(|d| rd.contains(&(d as i64)))
}

/// Whether heavy `id`, read once per root element, runs an inner loop that is fast there:
/// reductions over the last input dimension (contiguous), windows, and dots or convolutions
/// that the blocked kernels do not run anyway.
pub(crate) fn element_ok(m: &Module, id: InstId) -> bool {
    match m.opcode(id) {
        Opcode::Reduce => {
            let rank = m.operands(id).first().map_or(0, |&i| dims(m, i).len());
            let rd = m.ints_attr(id, &AttrKey::Dimensions).unwrap_or(&[]);
            rd.is_empty() || rd.contains(&(rank as i64 - 1))
        }
        Opcode::ReduceWindow => true,
        _ => !blocked_core(m, id),
    }
}

/// How operand `i` of cheap instruction `id` is reached when `id` is reached by `s`, with
/// rows of `k` dimensions.
pub(crate) fn operand_reach(m: &Module, id: InstId, i: usize, s: Reach, k: usize) -> Reach {
    use Opcode::*;
    if s == Reach::Other {
        return Reach::Other;
    }
    let o = m.operands(id)[i];
    let (out, od) = (dims(m, id), dims(m, o));
    let prefix_same = out.len() >= k && od.len() >= k && out[..k] == od[..k];
    let r = match m.opcode(id) {
        Tuple | GetTupleElement | OptBarrier | Copy | AddDependency => s,
        op if (op.is_elementwise() || op == Map)
            && m.array_shape(o).is_some()
            && m.array_shape(id).is_some() =>
        {
            if od == out {
                s
            } else {
                // A rank-0 operand (read at the scalar index) or a bitcast-convert that
                // changes the element width.
                Reach::Other
            }
        }
        Broadcast => {
            let map = m.ints_attr(id, &AttrKey::Dimensions).unwrap_or(&[]);
            let keeps = od.len() >= k && (0..k).all(|d| map.get(d) == Some(&(d as i64)));
            if keeps {
                Reach::Aligned
            } else {
                Reach::Other
            }
        }
        Transpose => {
            let perm = m.ints_attr(id, &AttrKey::Dimensions).unwrap_or(&[]);
            if (0..k).all(|d| perm.get(d) == Some(&(d as i64))) {
                Reach::Aligned
            } else {
                Reach::Other
            }
        }
        Reshape => {
            if prefix_same {
                Reach::Aligned
            } else {
                Reach::Other
            }
        }
        Bitcast if bitcast_is_reshape(m, id).unwrap_or(false) && prefix_same => Reach::Aligned,
        Slice => match m.attr(id, &AttrKey::Slice) {
            Some(AttrValue::Slice(b))
                if prefix_same
                    && (0..k).all(|d| b.get(d).is_some_and(|&[st, _, sd]| st == 0 && sd == 1)) =>
            {
                Reach::Aligned
            }
            _ => Reach::Other,
        },
        Pad if i == 0 => match m.attr(id, &AttrKey::Padding) {
            Some(AttrValue::Padding(p))
                if prefix_same && (0..k).all(|d| p.get(d).is_some_and(|c| *c == [0, 0, 0])) =>
            {
                Reach::Aligned
            }
            _ => Reach::Other,
        },
        Concatenate => {
            let d = m
                .ints_attr(id, &AttrKey::Dimensions)
                .and_then(|v| v.first().copied())
                .unwrap_or(0);
            if d as usize >= k && prefix_same {
                Reach::Aligned
            } else {
                Reach::Other
            }
        }
        Reverse => {
            let rev = m.ints_attr(id, &AttrKey::Dimensions).unwrap_or(&[]);
            if rev.iter().all(|&d| d as usize >= k) && prefix_same {
                Reach::Aligned
            } else {
                Reach::Other
            }
        }
        _ => Reach::Other,
    };
    // One row holds everything: every read stays in it.
    if r == Reach::Other && k == 0 {
        Reach::Aligned
    } else {
        r
    }
}
