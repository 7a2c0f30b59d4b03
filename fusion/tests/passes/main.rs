//! The fusion crate's pass tests in one test binary, a module per pass or property: the
//! simplifier's property on generated modules, and the expanders, upcasts and the dynamic padder against the evaluator
//! (the filetests, `filetests.rs`, are a binary of their own).
//!
//! Each test file is a module loaded through `#[path]`, so the `mod` items in it resolve in this
//! folder. One binary for all of them is one link, and their tests share one pool of test threads.
//!
//! These modules are `pub`, so a file's public items stay exported as at the root of a crate of
//! their own, and the dead-code lint judges them the same way.

#[path = "algsimp_property.rs"]
pub mod algsimp_property;
#[path = "batchnorm_expander.rs"]
pub mod batchnorm_expander;
#[path = "collective_upcast.rs"]
pub mod collective_upcast;
#[path = "dynamic_padder.rs"]
pub mod dynamic_padder;
#[path = "excess_precision.rs"]
pub mod excess_precision;
#[path = "linalg_upcast.rs"]
pub mod linalg_upcast;
