//! Graph rewriting that feeds fusion: algebraic simplification, constant folding, inlining,
//! tuple, while-loop and reshape simplification, zero-sized-array elimination and broadcast
//! canonicalization, one pass per file, named as the pass. Fusion itself comes later.
//!
//! [`register`] adds every pass of this crate to a [`PassRegistry`].
#![deny(missing_docs)]

pub mod algsimp;
pub mod rewrite;

use axle_ir::{PassInfo, PassRegistry};

/// Registers the passes of this crate.
pub fn register(reg: &mut PassRegistry) {
    reg.register(PassInfo {
        name: "algsimp",
        doc: "algebraic simplification: IEEE-safe identities, absorbing elements, shape-op chains, trivial reduces and dots",
        options: &[],
        create: |_| Box::new(algsimp::AlgSimp),
    });
}
