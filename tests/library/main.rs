//! Tests of the `axle` library in one test binary, a module per area: the interpreter's ops, the
//! cpu backend against it, the nvptx backend's collectives on several devices, its fft and
//! rng-bit-generator kernels and complex dots, buffer assignment, embedding, hostile modules
//! and semantics properties.
//! `hostile_fuzz.rs` (its rerun line names it) and the harnesses with `harness = false` are
//! binaries of their own.
//!
//! Each test file is a module loaded through `#[path]`, so the `mod` items in it resolve in this
//! folder (`cpu.rs`'s `cpu_devices/`). One binary for all of them is one link of the compiler,
//! and their tests share one pool of test threads.
//!
//! These modules are `pub`, so a file's public items stay exported as at the root of a crate of
//! their own, and the dead-code lint judges them the same way.

#[path = "buffers.rs"]
pub mod buffers;
#[path = "cpu.rs"]
pub mod cpu;
#[path = "cpu_gemm.rs"]
pub mod cpu_gemm;
#[path = "cpu_runtime.rs"]
pub mod cpu_runtime;
#[path = "cpu_sort.rs"]
pub mod cpu_sort;
#[path = "cpu_special_values.rs"]
pub mod cpu_special_values;
#[path = "cpu_types.rs"]
pub mod cpu_types;
#[path = "embed.rs"]
pub mod embed;
#[path = "eval_ops.rs"]
pub mod eval_ops;
#[path = "hostile_lib.rs"]
pub mod hostile_lib;
#[path = "long_sums.rs"]
pub mod long_sums;
#[path = "nvptx_complex_dot.rs"]
pub mod nvptx_complex_dot;
#[path = "nvptx_devices.rs"]
pub mod nvptx_devices;
#[path = "nvptx_fft.rs"]
pub mod nvptx_fft;
#[path = "semantics.rs"]
pub mod semantics;
