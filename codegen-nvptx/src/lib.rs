//! The NVPTX backend: LLVM NVPTX emission, the kernel launch plan, PTX checks, and the GPU runtime
//! when a GPU is present.
//!
//! Not built yet: see the NVPTX backend issue.
#![deny(missing_docs)]
