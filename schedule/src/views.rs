//! Which instructions define new buffers and which only name existing ones.
//!
//! Buffers hold arrays in their logical row-major order whatever the layout says (both LLVM
//! backends keep arrays that way), so an instruction that only renames bytes moves no data: its
//! array leaves are its operands' leaves. These are `tuple`, `get-tuple-element`, `reshape`,
//! `copy`, `opt-barrier`, `add-dependency`, `domain`, a `bitcast` that keeps the element type
//! and reinterprets row-major bytes ([`bitcast_is_view`]), `call` (its leaves are the callee
//! root's), and a `fusion` the backend runs as steps (its root step's). `while` and
//! `conditional` define their result buffers (the loop state and the branch outputs);
//! parameters of called computations name their call site's operands. Everything else writes
//! new buffers.

use axle_ir::{InstId, Layout, Module, Opcode};

use crate::rules::{BufferRules, FusionRun};

/// How an instruction of a sequential computation gets its array leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Def {
    /// New buffers, one per array leaf (kernels, host calls).
    Fresh,
    /// A parameter: the entry's own buffers, or the call site's operand in a called computation.
    Parameter,
    /// A constant: read-only buffers of its literal.
    Constant,
    /// The operands' leaves, concatenated (`tuple`; `opt-barrier`, `reshape`, `copy`, views
    /// of one operand).
    Operands,
    /// The leaves of operand 0's tuple element `k` (`get-tuple-element`).
    Element(usize),
    /// Operand 0's leaves (`add-dependency`, `domain`).
    First,
    /// The leaves of the called computation's root (`call`).
    CalleeRoot,
    /// A fusion run as steps ([`crate::rules::FusionRun::Steps`]): the leaves of its root step.
    Steps,
    /// The loop state of a `while`, shared by its condition's and body's parameters.
    While,
    /// The outputs of a `conditional`, written by whichever branch runs.
    Conditional,
}

/// Whether `i` takes its operands' leaves as its own ([`Def::Operands`]): a tuple,
/// opt-barrier, reshape, copy or row-major bitcast, which moves no data under any rules.
pub fn is_operand_view(m: &Module, i: InstId) -> bool {
    use Opcode::*;
    match m.opcode(i) {
        Tuple | OptBarrier | Reshape | Copy => true,
        Bitcast => bitcast_is_view(m, i),
        _ => false,
    }
}

/// How `i` gets its leaves under `rules`.
pub fn def_kind(m: &Module, i: InstId, rules: &dyn BufferRules) -> Def {
    use Opcode::*;
    if is_operand_view(m, i) {
        return Def::Operands;
    }
    match m.opcode(i) {
        Parameter => Def::Parameter,
        Constant => Def::Constant,
        GetTupleElement => {
            Def::Element(m.int_attr(i, &axle_ir::AttrKey::Index).unwrap_or(0).max(0) as usize)
        }
        AddDependency | Domain => Def::First,
        Call => Def::CalleeRoot,
        Fusion if rules.fusion_run(m, i) != FusionRun::Kernel => Def::Steps,
        While => Def::While,
        Conditional => Def::Conditional,
        _ => Def::Fresh,
    }
}

/// Whether `bitcast` `i` reinterprets its operand's row-major bytes: same element type, and
/// both layouts row-major once size-1 dimensions are ignored (no layout counts as row-major;
/// tiled layouts do not).
pub fn bitcast_is_view(m: &Module, i: InstId) -> bool {
    let Some(&op) = m.operands(i).first() else {
        return false;
    };
    match (m.array_shape(op), m.array_shape(i)) {
        (Some(a), Some(o)) => {
            a.ty == o.ty && is_row_major(m, op, &a.dims) && is_row_major(m, i, &o.dims)
        }
        _ => false,
    }
}

/// Whether `id`'s layout orders its non-unit dimensions row-major (major to minor ascending).
pub fn is_row_major(m: &Module, id: InstId, dims: &[i64]) -> bool {
    match m.layout_of(m.layout_id(id)) {
        Layout::Array(l) if !l.minor_to_major.is_empty() => {
            if !l.tiles.is_empty() || l.minor_to_major.len() != dims.len() {
                return false;
            }
            let order: Vec<i64> = l
                .minor_to_major
                .iter()
                .rev()
                .copied()
                .filter(|&d| dims.get(d as usize).is_some_and(|&n| n != 1))
                .collect();
            order.windows(2).all(|w| w[0] < w[1])
        }
        _ => true,
    }
}
