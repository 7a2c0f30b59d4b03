//! The `axle` command's tests in one test binary, a module per area: each runs the built
//! `axle` (`CARGO_BIN_EXE_axle`) and checks its outputs, files and errors.
//!
//! Each test file is a module loaded through `#[path]`, so the `mod` items in it resolve in this
//! folder (`mod common;` to `common/`, `cli.rs`'s `cli_devices/`). One binary for all of them
//! is one link of the compiler, and their tests share one pool of test threads.
//!
//! These modules are `pub`, so a file's public items stay exported as at the root of a crate of
//! their own, and the dead-code lint judges them the same way.

// Each file that uses the helpers declares `mod common;` itself, so they are compiled once per
// such file; Clippy's `duplicate_mod` would deny that.
#![allow(clippy::duplicate_mod)]

#[path = "cli.rs"]
pub mod cli;
#[path = "cli_graph.rs"]
pub mod cli_graph;
#[path = "cli_passes.rs"]
pub mod cli_passes;
#[path = "hostile_cli.rs"]
pub mod hostile_cli;
