//! Tests of the `axle` library in one test binary, a module per area: the interpreter's ops, the
//! cpu backend against it, buffer assignment, embedding, hostile modules and semantics properties.
//! `hostile_fuzz.rs` (its rerun line names it) and the harnesses with `harness = false` are
//! binaries of their own.
//!
//! Each test file is a module loaded through `#[path]`, so the `mod` items in it resolve in this
//! folder (`cpu.rs`'s `cpu_devices/`). One binary for all of them is one link of the compiler,
//! and their tests share one pool of test threads.

#[path = "buffers.rs"]
mod buffers;
#[path = "cpu.rs"]
mod cpu;
#[path = "cpu_gemm.rs"]
mod cpu_gemm;
#[path = "cpu_runtime.rs"]
mod cpu_runtime;
#[path = "cpu_sort.rs"]
mod cpu_sort;
#[path = "cpu_special_values.rs"]
mod cpu_special_values;
#[path = "cpu_types.rs"]
mod cpu_types;
#[path = "embed.rs"]
mod embed;
#[path = "eval_ops.rs"]
mod eval_ops;
#[path = "hostile_lib.rs"]
mod hostile_lib;
#[path = "long_sums.rs"]
mod long_sums;
#[path = "semantics.rs"]
mod semantics;
