//! Analyses over the Axle IR: users (CSR), the petgraph `DepGraph` view, reachability, the cost
//! model (flops and bytes), the reference evaluator (with the generator of the old `rng` op,
//! `rng_op`, which the `cpu` pipeline shares), and alias and liveness analyses.
#![deny(missing_docs)]

pub mod cholesky;
pub mod cost;
pub mod equivalence;
pub mod eval;
pub mod fft;
pub mod float_mode;
pub mod flushed;
pub mod geev;
pub mod householder;
pub mod jacobi;
pub mod lapack_scalar;
pub mod reduction;
pub mod rng_op;
pub mod schur;
mod smith;
pub mod tridiagonal;
pub mod trsm;
pub mod users;

pub use cost::{inst_cost, module_cost, result_bytes, result_elements, Cost, FusionTradeoff};
pub use equivalence::{adversarial_inputs, same_results, Equivalence};
pub use eval::{
    evaluate, evaluate_computation, evaluate_computation_with, evaluate_devices,
    evaluate_instruction, evaluate_on_device, evaluate_with, Device, EvalError, EvalOptions,
};
pub use users::{LazyUsers, Users};
