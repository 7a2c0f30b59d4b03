//! The backend hook of the fusion passes: what a target can emit as one kernel and what memory
//! traffic and arithmetic cost on it, so that the same decision rules give different fusions on
//! a CPU and on a GPU.
//!
//! A [`FusionTarget`] answers three kinds of question:
//! - which fusion rules it supports at all ([`FusionRule`]);
//! - instruction-level capabilities (`can_emit_row_reduce`, `can_emit_output_fusion`,
//!   `can_fuse`, `multi_output_compatible`), asked with the module at hand so a backend can look
//!   at element types, reducer bodies and operand shapes the way its emitter will;
//! - the numbers the cost model weighs ([`FusionCosts`]): what a byte of memory traffic and a
//!   transcendental cost in units of one elementwise operation, how much recomputation a fusion
//!   may buy, and size limits.
//!
//! This file knows none of its implementations: the CPU backend implements the trait in
//! `axle-codegen-cpu`, [`crate::param_target::ParamTarget`] is a target given by its numbers
//! alone (the `generic` and `gpu` parameter sets), and the facade's pass registry maps the
//! `target=NAME` option of the fusion passes to an implementation.
//!
//! What a target promises when it supports a rule (the contract with its emitter):
//! - [`FusionRule::Loop`]: a fusion of elementwise and data-movement instructions is one loop
//!   nest over its root's elements; values indexed by a prefix of the root's index (a broadcast
//!   along minor dimensions) are computed once per prefix, not once per element.
//! - [`FusionRule::Reduction`]: a fusion whose root is a `reduce` reads its fused input once.
//! - [`FusionRule::Row`]: a fusion holding `reduce`s over the minor (trailing, row-major)
//!   dimensions whose results are read only per row (through elementwise ops, reshapes and
//!   broadcasts that add minor dimensions) computes each reduction once per row, then the row.
//! - [`FusionRule::Output`]: a fusion with one `dot` or `convolution` whose operands are fusion
//!   parameters, and whose result is read at the same index by an elementwise epilogue, runs the
//!   backend's matrix kernel and applies the epilogue to its result. Where the target
//!   [reads dot operands through views](FusionTarget::reads_dot_operand_views), a `dot`
//!   operand may also be a chain of views (no arithmetic) of a fusion parameter, its prologue,
//!   which the matrix kernel reads straight from that parameter's buffer.
//! - [`FusionRule::SiblingMultiOutput`] and [`FusionRule::ProducerMultiOutput`]: a fusion with a
//!   tuple root writes every output in one pass over the shared iteration space.

use axle_ir::{InstId, Module};

/// A kind of fusion decision a target may support.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FusionRule {
    /// Elementwise and data-movement producers fused into their consumers.
    Loop,
    /// Elementwise producers fused into a `reduce`'s input.
    Reduction,
    /// Reductions over the minor dimensions fused with everything that reads them per row.
    Row,
    /// A `dot` or `convolution` fused with its elementwise epilogue.
    Output,
    /// Fusions reading the same large operand merged into one multi-output fusion.
    SiblingMultiOutput,
    /// A producer whose value is also needed outside merged into its consumer's fusion.
    ProducerMultiOutput,
}

/// The numbers the fusion cost model weighs for a target.
#[derive(Clone, Debug, PartialEq)]
pub struct FusionCosts {
    /// The cost of one byte of memory traffic, in elementwise operations: fusing a producer
    /// saves writing and re-reading its result and pays for any recomputation it causes.
    pub byte_cost: f64,
    /// The cost of one transcendental operation (`exp`, `log`, `tanh`, ...), in elementwise
    /// operations.
    pub transcendental_cost: f64,
    /// The most times a producer with arithmetic may be evaluated per element of its result
    /// inside one fusion (1 forbids any recomputation).
    pub max_evaluations: f64,
    /// The most instructions one fusion may hold.
    pub max_fusion_insts: usize,
    /// The most copies of one cheap producer (a broadcast, reshape, iota or small constant)
    /// placed into different consumer fusions.
    pub max_duplicates: usize,
    /// The smallest operand, in bytes, whose readers are worth merging into one multi-output
    /// fusion.
    pub sibling_min_bytes: u64,
    /// The most outputs a multi-output fusion may have.
    pub max_outputs: usize,
}

/// What a backend tells the fusion passes (see the module documentation for the contract).
pub trait FusionTarget: Send + Sync {
    /// The target's name, as `target=NAME` selects it.
    fn name(&self) -> &str;

    /// The cost model's numbers.
    fn costs(&self) -> &FusionCosts;

    /// Whether the target's emitter supports fusions of this kind.
    fn supports(&self, rule: FusionRule) -> bool;

    /// Whether instruction `id` may be part of a fusion at all (element types, operations the
    /// emitter handles inside a kernel).
    fn can_fuse(&self, m: &Module, id: InstId) -> bool;

    /// Whether the `reduce` `id` can be computed once per row inside a row fusion (its reducer
    /// and element types are ones the row kernel handles).
    fn can_emit_row_reduce(&self, m: &Module, id: InstId) -> bool;

    /// Whether the `dot` or `convolution` `id` can be the matrix kernel of an output fusion.
    fn can_emit_output_fusion(&self, m: &Module, id: InstId) -> bool;

    /// Whether values `a` and `b` (roots of fusions, or instructions) can be outputs of one
    /// multi-output fusion.
    fn multi_output_compatible(&self, m: &Module, a: InstId, b: InstId) -> bool;

    /// Whether the target's matrix kernel reads a `dot` operand through a chain of views
    /// (`transpose`, `reshape`, `slice`, `broadcast`, `bitcast`, `copy`) of a buffer, so that
    /// such a chain may join the dot's fusion as its prologue instead of being materialized
    /// (see [`FusionRule::Output`]). No by default.
    fn reads_dot_operand_views(&self) -> bool {
        false
    }
}
