//! The IR crate's integration tests in one test binary, a module per area: shape inference, the
//! verifier and the builder; the parser (XLA's grammar, malformed text, mutated text) and the
//! printer's round trip; generated modules; `.npy` I/O; the pass manager. The filetests
//! (`filetests.rs` beside this folder) are a binary of their own.
//!
//! The modules loaded through `#[path]` have `mod` items of their own, which so resolve in this
//! folder (`mod common;` to `common/`). One binary for all of them is one link, and their tests
//! share one pool of test threads.

mod builder;
mod common;
mod corpus;
mod filetests;
mod fixtures;
#[path = "fuzz_text.rs"]
mod fuzz_text;
#[path = "generated.rs"]
mod generated;
mod inference;
#[path = "malformed.rs"]
mod malformed;
mod names;
#[path = "npy.rs"]
mod npy;
#[path = "pass_manager.rs"]
mod pass_manager;
#[path = "roundtrip.rs"]
mod roundtrip;
mod schedule;
mod verifier;
#[path = "xla_grammar.rs"]
mod xla_grammar;
