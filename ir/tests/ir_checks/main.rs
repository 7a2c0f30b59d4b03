//! Tests of shape inference, the verifier and the builder (one test binary).

mod builder;
#[path = "../common/mod.rs"]
mod common;
mod corpus;
mod filetests;
mod fixtures;
mod inference;
mod names;
mod schedule;
mod verifier;
