//! The nvptx backend's integration tests in one test binary, a module per area: kernels' PTX
//! (assembled by ptxas where present) and their runs on the host simulator against the reference
//! evaluator.
//!
//! Each test file is a module loaded through `#[path]`, so the `mod` items in it resolve in this
//! folder (`mod common;` to `common/`). One binary links the compiler once for all of them, and
//! their tests share one pool of test threads.
//!
//! These modules are `pub`, so a file's public items stay exported as at the root of a crate of
//! their own, and the dead-code lint judges them the same way.

// Each file that uses the helpers declares `mod common;` itself, so they are compiled once per
// such file; Clippy's `duplicate_mod` would deny that.
#![allow(clippy::duplicate_mod)]

#[path = "arena.rs"]
pub mod arena;
#[path = "buffer_lifetimes.rs"]
pub mod buffer_lifetimes;
#[path = "collectives.rs"]
pub mod collectives;
#[path = "control_flow.rs"]
pub mod control_flow;
#[path = "convolutions.rs"]
pub mod convolutions;
#[path = "dots.rs"]
pub mod dots;
#[path = "float_atomics.rs"]
pub mod float_atomics;
#[path = "kernels.rs"]
pub mod kernels;
#[path = "math_fallback.rs"]
pub mod math_fallback;
#[path = "mulhi.rs"]
pub mod mulhi;
#[path = "offset_launch.rs"]
pub mod offset_launch;
#[path = "reductions.rs"]
pub mod reductions;
#[path = "scatters.rs"]
pub mod scatters;
#[path = "sim.rs"]
pub mod sim;
#[path = "sort.rs"]
pub mod sort;
#[path = "tensor_cores.rs"]
pub mod tensor_cores;
#[path = "transposes.rs"]
pub mod transposes;
