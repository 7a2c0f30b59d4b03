//! Tests of shape inference, the verifier and the builder (one test binary).

mod builder;
mod fixtures;
mod inference;
mod verifier;
