//! The nvptx backend's integration tests in one test binary, a module per area: kernels' PTX
//! (assembled by ptxas where present) and their runs on the host simulator against the reference
//! evaluator.
//!
//! Each test file is a module loaded through `#[path]`, so the `mod` items in it resolve in this
//! folder (`mod common;` to `common/`). One binary links the compiler once for all of them, and
//! their tests share one pool of test threads.

#[path = "arena.rs"]
mod arena;
#[path = "buffer_lifetimes.rs"]
mod buffer_lifetimes;
#[path = "control_flow.rs"]
mod control_flow;
#[path = "convolutions.rs"]
mod convolutions;
#[path = "dots.rs"]
mod dots;
#[path = "float_atomics.rs"]
mod float_atomics;
#[path = "kernels.rs"]
mod kernels;
#[path = "math_fallback.rs"]
mod math_fallback;
#[path = "mulhi.rs"]
mod mulhi;
#[path = "offset_launch.rs"]
mod offset_launch;
#[path = "reductions.rs"]
mod reductions;
#[path = "scatters.rs"]
mod scatters;
#[path = "sim.rs"]
mod sim;
#[path = "sort.rs"]
mod sort;
#[path = "tensor_cores.rs"]
mod tensor_cores;
#[path = "transposes.rs"]
mod transposes;
