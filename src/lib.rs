//! Axle: an ML compiler for XLA's HLO, rebuilt on an ECS-style arena IR.
//!
//! This facade re-exports the IR and will hold the backend traits, the backend registry, the pass
//! registry and the standard pipelines.
#![deny(missing_docs)]

pub use axle_ir as ir;
