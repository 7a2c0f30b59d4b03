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
//! `convolution` the register-tiled kernel takes; a multi-output fusion needs outputs of equal
//! dimensions (one loop nest writes them all) and no row or output fusion among its parts.

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

/// Whether `i` is a plain loop or reduction computation: not a `dot` or `convolution`, and,
/// for a fusion, with no `reduce`, `dot` or `convolution` other than its root.
fn plain(m: &Module, i: InstId) -> bool {
    match m.opcode(i) {
        Opcode::Dot | Opcode::Convolution => false,
        Opcode::Fusion => {
            let Some(body) = m.comp_attr(i, &AttrKey::Calls) else {
                return false;
            };
            let root = m.root(body);
            let mut stack = vec![root];
            // Fused bodies are small: a list is the cheapest visited set; a body too large to
            // walk cheaply counts as not plain.
            let mut seen: Vec<InstId> = Vec::new();
            while let Some(x) = stack.pop() {
                if seen.contains(&x) {
                    continue;
                }
                if seen.len() >= 512 {
                    return false;
                }
                seen.push(x);
                let op = m.opcode(x);
                if matches!(op, Opcode::Dot | Opcode::Convolution)
                    || (op == Opcode::Reduce && x != root)
                {
                    return false;
                }
                stack.extend_from_slice(m.operands(x));
            }
            true
        }
        _ => true,
    }
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
                .is_none_or(|a| crate::cg::supported_type(a.ty))
    }

    fn can_emit_row_reduce(&self, m: &Module, id: InstId) -> bool {
        m.operands(id).len() == 2
            && m.array_shape(id)
                .is_some_and(|a| crate::cg::supported_type(a.ty))
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

    fn multi_output_compatible(&self, m: &Module, a: InstId, b: InstId) -> bool {
        let dims = |i: InstId| m.array_shape(i).map(|s| s.dims.clone());
        let (da, db) = (dims(a), dims(b));
        da.is_some() && da == db && plain(m, a) && plain(m, b)
    }
}
