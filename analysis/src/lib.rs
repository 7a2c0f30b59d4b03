//! Analyses over the Axle IR: users (CSR), the petgraph `DepGraph` view, reachability, the cost
//! model (flops and bytes), the reference evaluator, and alias and liveness analyses.
#![deny(missing_docs)]

pub mod eval;

pub use eval::{
    evaluate, evaluate_computation, evaluate_computation_with, evaluate_with, EvalError,
    EvalOptions,
};
