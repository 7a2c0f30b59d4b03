//! Fuzz targets over the shared generators, and the seeded differential campaigns built on them.
//!
//! Each target checks one property of arbitrary bytes and never panics on a correct compiler:
//!
//! | target | bytes become | property |
//! |---|---|---|
//! | [`parse`] | HLO text | parse, verify, print never panic; whatever parses and verifies prints to a fixed point |
//! | [`npy`] | a `.npy` file | reading never panics; whatever reads writes back to bytes that read back identically |
//! | [`pipeline`] | a [`Case`]: a generated module, a pipeline of registered passes, an input seed | each pass keeps the module valid, the result round-trips, does not depend on the thread count, and evaluates to the input module's results bit for bit |
//! | `pipeline-planted` | a [`Case`] | the `pipeline` property, with the wrong pass [`planted_sub_self`] among the passes: the campaign's self-test, which must fail |
//! | [`cpu`] | a [`Case`] | the `cpu` backend computes the evaluator's results (per-type tolerances) |
//! | [`nvptx_sim`] | a [`Case`] | the nvptx kernels, run by `nvptx-sim`, compute the evaluator's results (no flush-to-zero; the `cpu` target's tolerances) |
//!
//! The cargo-fuzz harnesses (`fuzz/cargo-fuzz/`) call these checks with libFuzzer's bytes; the
//! `campaign` binary ([`campaign`]) draws the bytes of case `k` from a seed instead, runs the
//! checks in parallel, minimizes failures with the generator's shrinking and writes repro files.
//! The `pipeline`, `pipeline-planted`, `cpu` and `nvptx-sim` targets and the campaigns need the `full` feature (on by default);
//! without it the crate builds on `axle-ir` alone.
#![deny(missing_docs)]

#[cfg(feature = "full")]
pub mod campaign;
pub mod case;
#[cfg(feature = "full")]
pub mod cpu;
pub mod npy;
#[cfg(feature = "full")]
pub mod nvptx_sim;
pub mod outcome;
pub mod parse;
#[cfg(feature = "full")]
pub mod pipeline;
#[cfg(feature = "full")]
pub mod planted_sub_self;
pub mod target;

pub use case::Case;
pub use target::{Outcome, Target};
