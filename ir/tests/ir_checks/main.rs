//! The IR crate's integration tests in one test binary, a module per area: shape inference, the
//! verifier and the builder; the parser (XLA's grammar, malformed text, mutated text) and the
//! printer's round trip; generated modules; `.npy` I/O; the pass manager. The filetests
//! (`filetests.rs` beside this folder) are a binary of their own.
//!
//! The modules loaded through `#[path]` have `mod` items of their own, which `#[path]` makes
//! resolve in this folder (`mod common;` to `common/`). One binary for all of them is one link,
//! and their tests share one pool of test threads. They are `pub`, so a file's public items
//! stay exported as at the root of a crate of their own, and the dead-code lint judges them the
//! same way.

// Each file that uses the helpers declares `mod common;` itself, so they are compiled once per
// such file; Clippy's `duplicate_mod` would deny that.
#![allow(clippy::duplicate_mod)]

mod builder;
mod common;
mod corpus;
mod filetests;
mod fixtures;
#[path = "fuzz_text.rs"]
pub mod fuzz_text;
#[path = "generated.rs"]
pub mod generated;
mod inference;
#[path = "malformed.rs"]
pub mod malformed;
mod names;
#[path = "npy.rs"]
pub mod npy;
#[path = "pass_manager.rs"]
pub mod pass_manager;
#[path = "roundtrip.rs"]
pub mod roundtrip;
mod schedule;
mod verifier;
#[path = "xla_grammar.rs"]
pub mod xla_grammar;
