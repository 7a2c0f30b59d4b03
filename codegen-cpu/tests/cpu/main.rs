//! The cpu backend's integration tests in one test binary, a module per area (the corpus and the
//! XLA-reference harnesses, `corpus.rs` and `xla_ref.rs`, are binaries of their own).
//!
//! Each test file is a module loaded through `#[path]`, so the `mod` items in it resolve in this
//! folder. One binary links the compiler once for all of them, and their tests share one pool of
//! test threads.
//!
//! These modules are `pub`, so a file's public items stay exported as at the root of a crate of
//! their own, and the dead-code lint judges them the same way.

#[path = "batchnorm.rs"]
pub mod batchnorm;
#[path = "call_table.rs"]
pub mod call_table;
#[path = "complex.rs"]
pub mod complex;
#[path = "donation.rs"]
pub mod donation;
#[path = "epilogues.rs"]
pub mod epilogues;
#[path = "ftz_dot.rs"]
pub mod ftz_dot;
#[path = "fusion.rs"]
pub mod fusion;
#[path = "kernel_cache.rs"]
pub mod kernel_cache;
#[path = "lifted_constants.rs"]
pub mod lifted_constants;
#[path = "linalg_upcast.rs"]
pub mod linalg_upcast;
#[path = "math.rs"]
pub mod math;
#[path = "modules.rs"]
pub mod modules;
#[path = "mulhi.rs"]
pub mod mulhi;
#[path = "rng.rs"]
pub mod rng;
#[path = "shared_buffers.rs"]
pub mod shared_buffers;
