//! [`CpuTarget`]: the host CPU (or an ahead-of-time target triple's CPU) as the shared LLVM
//! layer's [`Target`].
//!
//! Buffers are in the default address space; every function carries the CPU's name and
//! features and asks for 512-bit vectors (znver4/5 would otherwise prefer 256-bit ones); math
//! library functions are the C library's, called by their own names; kernels are called with a
//! range of work items, so they have no thread index.

use axle_codegen_llvm::target::{Target, ThreadRegisters};
use inkwell::AddressSpace;

/// The backend's name in messages.
pub(crate) const BACKEND: &str = "cpu";

/// The CPU code is compiled for.
pub(crate) struct CpuTarget {
    /// `target-cpu` put on every function (none when empty).
    pub cpu: String,
    /// `target-features` put on every function (none when empty).
    pub features: String,
}

impl Target for CpuTarget {
    fn name(&self) -> &str {
        BACKEND
    }

    fn buffer_address_space(&self) -> AddressSpace {
        AddressSpace::default()
    }

    fn function_attributes(&self) -> Vec<(String, String)> {
        let mut attrs = Vec::with_capacity(2);
        if !self.cpu.is_empty() {
            attrs.push(("target-cpu".to_string(), self.cpu.clone()));
        }
        if !self.features.is_empty() {
            attrs.push(("target-features".to_string(), self.features.clone()));
        }
        attrs
    }

    fn vector_bits(&self) -> u32 {
        512
    }

    fn math_function(&self, libm_name: &str) -> Option<String> {
        Some(libm_name.to_string())
    }

    fn thread_registers(&self) -> Option<ThreadRegisters> {
        None
    }

    /// Elemental loops longer than this stay loops: LLVM's full unrolling of a vectorized row
    /// (layernorm's 1024 elements: 32 copies of the vector body, and the row cache promoted to
    /// registers and spilled back) costs code generation time and buys no run time; short
    /// loops (a few coordinates of a small dimension) still unroll. See BENCH.md.
    fn unroll_limit(&self) -> Option<i64> {
        Some(UNROLL_LIMIT)
    }
}

/// [`Target::unroll_limit`] of the cpu backend.
const UNROLL_LIMIT: i64 = 32;
