//! The CPU backend's answers to the fusion passes ([`axle_fusion::target::FusionTarget`]):
//! what this emitter turns into one kernel and what memory and arithmetic cost on a CPU.
//!
//! Costs: a core does tens of vector operations in the time it moves one byte from memory
//! (about 200 GFLOP/s of `f32` on two AVX-512 cores against about 33 GB/s of copy bandwidth),
//! so a byte counts as 6 elementwise operations; a vectorized transcendental costs about 12.
//! A producer may be evaluated up to 4 times per element when that saves enough traffic.
//! Multi-output fusion pays off when the shared operand no longer fits in the caches (1 MiB).
//!
//! Capabilities follow the emitter: an instruction may be fused when the elemental emitter
//! emits it and its element type is supported; a row reduction needs a single input and an
//! elemental reducer; an output fusion needs a `dot` the blocked GEMM kernel takes or a
//! `convolution` the register-tiled kernel takes; a dot's operand may be a chain of views of a
//! buffer (its prologue), which the GEMM reads through strides. A multi-output fusion's parts must fit one
//! kernel of the fusion planner (`fused.rs`): outputs of equal dimensions (one element loop,
//! one row kernel that computes every part's row reductions once per row, or sibling column
//! reductions), or a value and reductions of its rows over the minor dimensions (one row
//! kernel writes both); no part computes a `dot` or `convolution`.

use axle_fusion::target::{FusionCosts, FusionRule, FusionTarget};
use axle_ir::{AttrKey, InstId, Module, Opcode};

use crate::elemental::{comp_is_elemental, is_elemental};

/// The CPU backend's fusion target (`target=cpu`).
#[derive(Clone, Debug)]
pub struct CpuFusionTarget {
    costs: FusionCosts,
}

impl Default for CpuFusionTarget {
    fn default() -> Self {
        CpuFusionTarget {
            costs: FusionCosts {
                byte_cost: 6.0,
                transcendental_cost: 12.0,
                max_evaluations: 4.0,
                max_fusion_insts: 256,
                max_duplicates: 8,
                sibling_min_bytes: 1 << 20,
                max_outputs: 8,
            },
        }
    }
}

/// The computation that computes `i`: a fusion's root, else `i` itself.
fn computed(m: &Module, i: InstId) -> InstId {
    if m.opcode(i) == Opcode::Fusion {
        if let Some(body) = m.comp_attr(i, &AttrKey::Calls) {
            return m.root(body);
        }
    }
    i
}

/// What a part of a would-be multi-output fusion computes.
#[derive(Clone, Copy, Default)]
struct Part {
    /// A `dot` or `convolution` anywhere.
    matrix: bool,
    /// A `reduce` other than the root (a row fusion).
    inner_reduce: bool,
    /// A `transpose` that moves the last dimension (a loop kernel reads it in tiles; a row
    /// kernel would stride through memory).
    transposes_last: bool,
}

/// The most instructions [`part`] walks in a fused body.
const PART_LIMIT: usize = 512;

/// What `i` (an instruction, or a fusion's body) computes, or `None` for a body too large to
/// walk cheaply (more than [`PART_LIMIT`] instructions).
fn part(m: &Module, i: InstId) -> Option<Part> {
    let root = computed(m, i);
    let mut out = Part::default();
    // Sized for a typical fused body, so that most calls allocate once per set. A hash set:
    // a list's linear search made this walk quadratic in the body (most of multi-output
    // fusion's time on large_wide_100k, whose fused bodies reach the limit).
    let mut stack = Vec::with_capacity(32);
    stack.push(root);
    let mut seen: hashbrown::HashSet<InstId> = hashbrown::HashSet::with_capacity(64);
    while let Some(x) = stack.pop() {
        if seen.contains(&x) {
            continue;
        }
        if seen.len() >= PART_LIMIT {
            return None;
        }
        seen.insert(x);
        match m.opcode(x) {
            Opcode::Dot | Opcode::Convolution => out.matrix = true,
            Opcode::Reduce if x != root => out.inner_reduce = true,
            Opcode::Transpose => {
                let last = m.ints_attr(x, &AttrKey::Dimensions).and_then(|p| {
                    let n = p.len().checked_sub(1)?;
                    Some(p[n] as usize != n)
                });
                out.transposes_last |= last.unwrap_or(true);
            }
            _ => {}
        }
        // An unfused instruction is the part itself: its operands are outside.
        if root != i {
            stack.extend_from_slice(m.operands(x));
        }
    }
    Some(out)
}

/// Whether `short` is a reduction of an input of dimensions `full` over its minor dimensions
/// (so that its value is one element per row of a row kernel over `full`).
fn row_reduction_of(m: &Module, short: InstId, full: &[i64]) -> bool {
    let r = computed(m, short);
    if m.opcode(r) != Opcode::Reduce {
        return false;
    }
    let (Some(input), Some(rd)) = (m.operands(r).first(), m.ints_attr(r, &AttrKey::Dimensions))
    else {
        return false;
    };
    let Some(k) = full.len().checked_sub(rd.len()) else {
        return false;
    };
    m.array_shape(*input).is_some_and(|a| *a.dims == *full)
        && rd.iter().copied().eq(k as i64..full.len() as i64)
}

/// Whether reducer `c` is one elementwise operation of its two parameters (the common case,
/// answered without walking the computation).
fn simple_reducer(m: &Module, c: axle_ir::CompId) -> bool {
    let root = m.root(c);
    let params = m.params(c);
    !root.is_none()
        && params.len() == 2
        && m.opcode(root).is_elementwise()
        && m.operands(root).iter().all(|o| params.contains(o))
}

impl FusionTarget for CpuFusionTarget {
    fn name(&self) -> &str {
        "cpu"
    }

    fn costs(&self) -> &FusionCosts {
        &self.costs
    }

    fn supports(&self, _rule: FusionRule) -> bool {
        true
    }

    fn can_fuse(&self, m: &Module, id: InstId) -> bool {
        is_elemental(m, id)
            && m.array_shape(id)
                .is_none_or(|a| crate::forms::supported_type(a.ty))
    }

    fn can_emit_row_reduce(&self, m: &Module, id: InstId) -> bool {
        m.operands(id).len() == 2
            && m.array_shape(id)
                .is_some_and(|a| crate::forms::supported_type(a.ty))
            && m.comp_attr(id, &AttrKey::ToApply)
                .is_some_and(|c| simple_reducer(m, c) || comp_is_elemental(m, c))
    }

    fn can_emit_output_fusion(&self, m: &Module, id: InstId) -> bool {
        match m.opcode(id) {
            // Whether the GEMM takes a dot does not depend on the target's features or threads
            // (they only choose its blocking).
            Opcode::Dot => {
                crate::gemm::gemm_geo(m, id, &crate::gemm::GemmTarget::default()).is_some()
            }
            Opcode::Convolution => crate::conv_fast::conv_fast(m, id).is_some(),
            _ => false,
        }
    }

    /// The GEMM's packing reads an operand through any strides and offset
    /// (`gemm::operand_view`); a chain it cannot express as strides is staged by the
    /// fusion planner, as it would have been computed outside.
    fn reads_dot_operand_views(&self) -> bool {
        true
    }

    fn multi_output_compatible(&self, m: &Module, a: InstId, b: InstId) -> bool {
        let (Some(sa), Some(sb)) = (m.array_shape(a), m.array_shape(b)) else {
            return false;
        };
        let (Some(pa), Some(pb)) = (part(m, a), part(m, b)) else {
            return false;
        };
        if pa.matrix || pb.matrix {
            return false;
        }
        // Equal dimensions without row fusions: one element loop (tiled where it reads
        // through a transpose) or sibling column reductions.
        let rows = pa.inner_reduce || pb.inner_reduce;
        if sa.dims == sb.dims && !rows {
            return true;
        }
        // Otherwise one row kernel: over equal dimensions, computing every part's row
        // reductions once per row, or over the longer value's dimensions, also writing the
        // shorter one, a reduction of its rows. Row kernels are not tiled, so no part may
        // read through a transpose of the last dimension.
        if pa.transposes_last || pb.transposes_last {
            return false;
        }
        let (short, long) = if sa.dims.len() <= sb.dims.len() {
            (a, &sb.dims)
        } else {
            (b, &sa.dims)
        };
        sa.dims == sb.dims || row_reduction_of(m, short, long)
    }
}
