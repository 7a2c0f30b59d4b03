//! Graph rewriting that feeds fusion: algebraic simplification, constant folding, inlining,
//! tuple, while-loop and reshape simplification, zero-sized-array elimination, broadcast, dot
//! and convolution canonicalization, the expansion of batch-norm ops, the `f32` upcast of
//! narrow-typed linear algebra, XLA CPU's excess precision of `bf16` results converted to `f32`, the splitting of long reductions into few results, the expansion of `rng` around the evaluator's generator, bounded dynamic shapes as static programs (`dynamic-padder`), and fusion itself (`fusion`,
//! `multi-output-fusion`), one pass per file, named as the pass.
//!
//! [`register`] adds the simplification passes to a [`PassRegistry`]; the fusion passes need a
//! target ([`target::FusionTarget`]), which the caller maps from the `target=NAME` option through
//! [`register_fusion`] (the facade knows every backend's target; [`builtin_target`] gives the
//! parameter sets this crate has).
#![deny(missing_docs)]

pub mod algsimp;
pub mod batchnorm_expander;
pub mod broadcast_canonicalize;
pub mod clone;
pub mod collective_upcast;
pub mod constant_folding;
pub mod conv_canonicalize;
pub mod dot_canonicalize;
pub mod dynamic_padder;
pub mod excess_precision;
pub mod fusion;
pub mod inline;
pub mod linalg_upcast;
pub mod multi_output_fusion;
pub mod outline;
pub mod param_target;
pub mod reduction_split;
pub mod reshape_mover;
pub mod rewrite;
pub mod rng_expander;
pub mod target;
pub mod tree_reduce;
pub mod tuple_simplify;
pub mod while_simplify;
pub mod zero_sized_elim;

use std::sync::Arc;

use axle_ir::pass::PassFactory;
use axle_ir::{Module, PassInfo, PassRegistry};

use crate::target::FusionTarget;

/// Registers the passes of this crate.
pub fn register(reg: &mut PassRegistry) {
    reg.register(PassInfo {
        name: "dynamic-padder",
        doc: "bounded dynamic shapes as static programs: sizes set by set-dimension-size and dynamic-reshape tracked beside the padded values, padding masked where a reduce or dot reads it, reshapes and concatenations that move padding as gathers, get-dimension-size as the tracked size (XLA's DynamicPadder)",
        options: &[],
        create: |_| Box::new(dynamic_padder::DynamicPadder),
    });
    reg.register(PassInfo {
        name: "algsimp",
        doc: "algebraic simplification: IEEE-safe identities, absorbing elements, shape-op chains, trivial reduces and dots",
        options: &[],
        create: |_| Box::new(algsimp::AlgSimp),
    });
    reg.register(PassInfo {
        name: "constant-folding",
        doc: "evaluates instructions with constant operands through the reference evaluator",
        options: constant_folding::OPTIONS,
        create: |o| {
            Box::new(constant_folding::ConstantFolding {
                max_elements: o.int("max_elements") as usize,
            })
        },
    });
    reg.register(PassInfo {
        name: "inline",
        doc: "inlines every call into its caller",
        options: &[],
        create: |_| Box::new(inline::Inline),
    });
    reg.register(PassInfo {
        name: "tuple-simplify",
        doc: "get-tuple-element of tuple, tuple of all get-tuple-elements",
        options: &[],
        create: |_| Box::new(tuple_simplify::TupleSimplify),
    });
    reg.register(PassInfo {
        name: "while-simplify",
        doc: "loops with 0 or 1 trips, pass-through and dead loop state, constants sunk into and invariant code hoisted out of the body",
        options: &[],
        create: |_| Box::new(while_simplify::WhileSimplify),
    });
    reg.register(PassInfo {
        name: "reshape-mover",
        doc: "sinks reshapes and transposes below elementwise operations",
        options: &[],
        create: |_| Box::new(reshape_mover::ReshapeMover),
    });
    reg.register(PassInfo {
        name: "zero-sized-elim",
        doc: "replaces computations of arrays with no elements by empty constants",
        options: &[],
        create: |_| Box::new(zero_sized_elim::ZeroSizedElim),
    });
    reg.register(PassInfo {
        name: "broadcast-canonicalize",
        doc: "sorts broadcast dimensions (adding a transpose) and drops degenerate reshapes under broadcasts",
        options: &[],
        create: |_| Box::new(broadcast_canonicalize::BroadcastCanonicalize),
    });
    reg.register(PassInfo {
        name: "conv-canonicalize",
        doc: "puts a float convolution's kernel and output feature dimensions last (transposes), the form the tiled convolution reads",
        options: &[],
        create: |_| Box::new(conv_canonicalize::ConvCanonicalize),
    });
    reg.register(PassInfo {
        name: "dot-canonicalize",
        doc: "merges a float dot's free dimensions and its contracting dimensions into one each per side (reshapes, a transpose where they are not adjacent), as XLA's dot decomposer",
        options: &[],
        create: |_| Box::new(dot_canonicalize::DotCanonicalize),
    });
    reg.register(PassInfo {
        name: "batchnorm-expander",
        doc: "expands batch-norm-inference/training/grad into broadcasts, reduces and elementwise ops, as XLA's BatchNormExpander",
        options: &[],
        create: |_| Box::new(batchnorm_expander::BatchNormExpander),
    });
    reg.register(PassInfo {
        name: "reduction-split",
        doc: "splits a reduction of long rows into few results into two reductions (chunks, then their partial results), so threads can share it",
        options: reduction_split::OPTIONS,
        create: |o| {
            Box::new(reduction_split::ReductionSplit {
                min_elements: o.int("min_elements"),
                max_results: o.int("max_results"),
            })
        },
    });
    reg.register(PassInfo {
        name: "tree-reduce",
        doc: "computes a long reduction of bf16, f16 or f8 as XLA CPU does: windows of 32 per reduced dimension, level after level (pad, reshape, reduce)",
        options: &[],
        create: |_| Box::new(tree_reduce::TreeReduce),
    });
    reg.register(PassInfo {
        name: "excess-precision",
        doc: "a convert to f32 of a bf16 arithmetic op or dot reads the op's f32 value unrounded, as XLA CPU computes it (float normalization under xla_allow_excess_precision)",
        options: &[],
        create: |_| Box::new(excess_precision::ExcessPrecision),
    });
    reg.register(PassInfo {
        name: "collective-upcast",
        doc: "runs bf16 all-reduce and reduce-scatter (one add, multiply, maximum or minimum) in f32 between converts, as XLA CPU's float normalization does",
        options: &[],
        create: |_| Box::new(collective_upcast::CollectiveUpcast),
    });
    reg.register(PassInfo {
        name: "rng-expander",
        doc: "turns each rng into elementwise ops around a constant of its unit values, the evaluator's generator (keyed by the instruction's name: run it first)",
        options: &[],
        create: |_| Box::new(rng_expander::RngExpander),
    });
    reg.register(PassInfo {
        name: "linalg-upcast",
        doc: "runs f16/bf16/f8 cholesky and triangular-solve in f32 between converts, as XLA's float normalization",
        options: &[],
        create: |_| Box::new(linalg_upcast::LinalgUpcast),
    });
}

/// A copy of `m` after `pipeline` (passes of `axle_ir` and of this crate) under the pass manager,
/// verified at the end: how a backend applies the rewrites it needs before lowering.
pub fn run_on_copy(m: &Module, pipeline: &str) -> Result<Module, String> {
    let mut out = m.clone();
    run_in_place(&mut out, pipeline, axle_ir::VerifyMode::End)?;
    Ok(out)
}

/// [`run_on_copy`] on `m` itself, for a backend that owns a copy already, verifying as `verify`
/// says (`Off` for a pass that only removes what nothing reads, on a module just verified: at a
/// million instructions the verifier costs more than `dce`).
pub fn run_in_place(
    m: &mut Module,
    pipeline: &str,
    verify: axle_ir::VerifyMode,
) -> Result<(), String> {
    let mut reg = PassRegistry::new();
    axle_ir::passes::register(&mut reg);
    register(&mut reg);
    let opts = axle_ir::PassManagerOptions {
        verify,
        ..Default::default()
    };
    let mut pm = axle_ir::PassManager::new(&reg, pipeline, opts).map_err(|e| e.render())?;
    pm.run(m).map_err(|e| e.to_string())?;
    Ok(())
}

/// The fusion targets this crate defines by their numbers alone (`generic`, `gpu`).
pub fn builtin_target(name: &str) -> Option<Arc<dyn FusionTarget>> {
    param_target::ParamTarget::by_name(name).map(|t| Arc::new(t) as Arc<dyn FusionTarget>)
}

/// The target named `name` from `lookup`, or an error listing the known names.
pub fn resolve_target(
    name: &str,
    lookup: impl Fn(&str) -> Option<Arc<dyn FusionTarget>>,
    known: &[&str],
) -> Result<Arc<dyn FusionTarget>, String> {
    lookup(name).ok_or_else(|| {
        format!(
            "unknown fusion target '{name}' (targets: {})",
            known.join(", ")
        )
    })
}

/// Registers `fusion` and `multi-output-fusion`, created by `fusion` and `multi_output`: plain
/// functions that map the `target=NAME` option to a target (see [`fusion::Fusion::new`] and
/// [`multi_output_fusion::MultiOutputFusion::new`]).
pub fn register_fusion(reg: &mut PassRegistry, fusion: PassFactory, multi_output: PassFactory) {
    reg.register(PassInfo {
        name: "fusion",
        doc: "producer-consumer fusion (loop, reduction, row and output fusion) decided by the target's cost model",
        options: fusion::OPTIONS,
        create: fusion,
    });
    reg.register(PassInfo {
        name: "multi-output-fusion",
        doc: "merges sibling fusions reading one large operand, and producers also needed outside into their consumer, as multi-output fusions",
        options: fusion::OPTIONS,
        create: multi_output,
    });
}

/// Registers the fusion passes with the targets of this crate only (`generic`, `gpu`), for
/// tests and tools that do not link a backend.
pub fn register_fusion_builtin(reg: &mut PassRegistry) {
    fn target(o: &axle_ir::PassOptions) -> Result<Arc<dyn FusionTarget>, String> {
        resolve_target(o.str("target"), builtin_target, &["generic", "gpu"])
    }
    register_fusion(
        reg,
        |o| Box::new(fusion::Fusion::new(target(o))),
        |o| Box::new(multi_output_fusion::MultiOutputFusion::new(target(o))),
    );
}
