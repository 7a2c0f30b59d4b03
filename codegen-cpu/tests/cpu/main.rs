//! The cpu backend's integration tests in one test binary, a module per area (the corpus and the
//! XLA-reference harnesses, `corpus.rs` and `xla_ref.rs`, are binaries of their own).
//!
//! Each test file is a module loaded through `#[path]`, so the `mod` items in it resolve in this
//! folder. One binary links the compiler once for all of them, and their tests share one pool of
//! test threads.

#[path = "batchnorm.rs"]
mod batchnorm;
#[path = "complex.rs"]
mod complex;
#[path = "donation.rs"]
mod donation;
#[path = "epilogues.rs"]
mod epilogues;
#[path = "ftz_dot.rs"]
mod ftz_dot;
#[path = "fusion.rs"]
mod fusion;
#[path = "kernel_cache.rs"]
mod kernel_cache;
#[path = "lifted_constants.rs"]
mod lifted_constants;
#[path = "linalg_upcast.rs"]
mod linalg_upcast;
#[path = "math.rs"]
mod math;
#[path = "modules.rs"]
mod modules;
#[path = "mulhi.rs"]
mod mulhi;
#[path = "rng.rs"]
mod rng;
#[path = "shared_buffers.rs"]
mod shared_buffers;
