//! The CPU backend: LLVM IR emission through inkwell, elemental emitters, the JIT executable, the
//! threaded runtime and ahead-of-time object + C header output.
//!
//! Not built yet: see the CPU backend issue.
#![deny(missing_docs)]
