//! The fusion crate's pass tests in one test binary, a module per pass or property: the
//! simplifier's property on generated modules, and the expanders and upcasts against the evaluator
//! (the filetests, `filetests.rs`, are a binary of their own).
//!
//! Each test file is a module loaded through `#[path]`, so the `mod` items in it resolve in this
//! folder. One binary for all of them is one link, and their tests share one pool of test threads.

#[path = "algsimp_property.rs"]
mod algsimp_property;
#[path = "batchnorm_expander.rs"]
mod batchnorm_expander;
#[path = "collective_upcast.rs"]
mod collective_upcast;
#[path = "excess_precision.rs"]
mod excess_precision;
#[path = "linalg_upcast.rs"]
mod linalg_upcast;
