//! The built-in backends and the process-wide registry that holds them.
//!
//! Invariants:
//! - This is the one file that knows the implementations of the backend interface
//!   ([`crate::backend`]): the trait file names none of them, and each implementation
//!   (`interpreter`, `cpu`, `nvptx` and `nvptx-sim`) knows only the trait file.
//! - [`registry`] starts with every built-in backend; a client may add its own
//!   ([`BackendRegistry::register`]), replacing a built-in one of the same name.

use std::sync::{Arc, OnceLock};

use crate::backend::BackendRegistry;
use crate::cpu::CpuPlatform;
use crate::interpreter::InterpreterPlatform;
use crate::nvptx::{NvptxPlatform, NvptxSimPlatform};

/// A registry holding the built-in backends: `interpreter`, `cpu`, `nvptx` and `nvptx-sim`.
pub fn with_builtins() -> BackendRegistry {
    let r = BackendRegistry::default();
    r.register(Arc::new(InterpreterPlatform::new()));
    r.register(Arc::new(CpuPlatform::new()));
    r.register(Arc::new(NvptxPlatform::new()));
    r.register(Arc::new(NvptxSimPlatform::new()));
    r
}

/// The process-wide registry, holding the built-in backends.
pub fn registry() -> &'static BackendRegistry {
    static R: OnceLock<BackendRegistry> = OnceLock::new();
    R.get_or_init(with_builtins)
}
