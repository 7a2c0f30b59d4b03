//! [`ParamTarget`]: a fusion target given by its numbers and rule switches alone, with no
//! emitter behind it to ask. Two parameter sets come with the crate:
//!
//! - `generic`: a memory-bound CPU-like machine (a byte costs 4 operations, a transcendental 16);
//!   every rule on. The fusion crate's own filetests run on it.
//! - `gpu`: a GPU-flavoured set for the NVPTX backend to come: memory traffic dearer relative to
//!   arithmetic (16 operations per byte), transcendentals cheap (special function units), larger
//!   fusions and more recomputation allowed, every rule on.
//!
//! Instruction-level questions get structural answers: any array instruction may be fused; a
//! row reduction needs a single input and a reducer applying one binary operation; an output
//! fusion needs a floating-point `dot` or `convolution`; multi-output fusion needs outputs of
//! one iteration space (equal dimensions).

use axle_ir::{InstId, Module, Opcode};

use crate::rewrite::{dims, elem_ty, simple_reducer};
use crate::target::{FusionCosts, FusionRule, FusionTarget};

/// A target described by numbers and rule switches.
#[derive(Clone, Debug)]
pub struct ParamTarget {
    /// The target's name.
    pub name: &'static str,
    /// The cost model's numbers.
    pub costs: FusionCosts,
    /// The rules it supports.
    pub rules: Vec<FusionRule>,
}

const ALL_RULES: [FusionRule; 6] = [
    FusionRule::Loop,
    FusionRule::Reduction,
    FusionRule::Row,
    FusionRule::Output,
    FusionRule::SiblingMultiOutput,
    FusionRule::ProducerMultiOutput,
];

impl ParamTarget {
    /// The `generic` parameter set.
    pub fn generic() -> ParamTarget {
        ParamTarget {
            name: "generic",
            costs: FusionCosts {
                byte_cost: 4.0,
                transcendental_cost: 16.0,
                max_evaluations: 4.0,
                max_fusion_insts: 256,
                max_duplicates: 8,
                sibling_min_bytes: 4096,
                max_outputs: 8,
            },
            rules: ALL_RULES.to_vec(),
        }
    }

    /// The `gpu` parameter set.
    pub fn gpu() -> ParamTarget {
        ParamTarget {
            name: "gpu",
            costs: FusionCosts {
                byte_cost: 16.0,
                transcendental_cost: 4.0,
                max_evaluations: 8.0,
                max_fusion_insts: 512,
                max_duplicates: 16,
                sibling_min_bytes: 1 << 20,
                max_outputs: 16,
            },
            rules: ALL_RULES.to_vec(),
        }
    }

    /// The parameter set named `name` (`generic` or `gpu`).
    pub fn by_name(name: &str) -> Option<ParamTarget> {
        match name {
            "generic" => Some(ParamTarget::generic()),
            "gpu" => Some(ParamTarget::gpu()),
            _ => None,
        }
    }
}

impl FusionTarget for ParamTarget {
    fn name(&self) -> &str {
        self.name
    }

    fn costs(&self) -> &FusionCosts {
        &self.costs
    }

    fn supports(&self, rule: FusionRule) -> bool {
        self.rules.contains(&rule)
    }

    fn can_fuse(&self, m: &Module, id: InstId) -> bool {
        m.array_shape(id).is_some()
    }

    fn can_emit_row_reduce(&self, m: &Module, id: InstId) -> bool {
        m.operands(id).len() == 2
            && m.comp_attr(id, &axle_ir::AttrKey::ToApply)
                .is_some_and(|c| simple_reducer(m, c).is_some())
    }

    fn can_emit_output_fusion(&self, m: &Module, id: InstId) -> bool {
        matches!(m.opcode(id), Opcode::Dot | Opcode::Convolution)
            && elem_ty(m, id).is_some_and(|t| t.is_float())
    }

    fn multi_output_compatible(&self, m: &Module, a: InstId, b: InstId) -> bool {
        matches!((dims(m, a), dims(m, b)), (Some(x), Some(y)) if x == y)
    }
}
