//! Graph rewriting that feeds fusion (algebraic simplification, constant folding, inlining, tuple and
//! reshape simplification) and fusion itself (loop, input/reduction, output, multi-output).
//!
//! Not built yet: this crate will hold those passes, one per file.
#![deny(missing_docs)]
