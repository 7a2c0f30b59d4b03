//! [`NvptxTarget`]: an NVIDIA GPU (LLVM's NVPTX target) as the shared LLVM layer's [`Target`].
//!
//! Buffers are in the global address space (1), so loads and stores are `ld.global` /
//! `st.global`; functions carry no CPU attributes; there is no C math library on the device:
//! a math function is libdevice's `__nv_<name>` where libdevice is linked and defines it
//! ([`crate::libdevice`]), else the shared layer's inline form of it
//! (`axle_codegen_llvm::libm_fallback`; the inline approximations of `f32` `exp`, `log`,
//! `tanh` and `erf` are used either way); the thread index comes from the `%tid.x`,
//! `%ctaid.x` and `%ntid.x` special registers.

use std::collections::HashSet;

use axle_codegen_llvm::target::{Target, ThreadRegisters};
use inkwell::AddressSpace;

/// The backend's name in messages.
pub const BACKEND: &str = "nvptx";

/// NVPTX's global address space.
const GLOBAL: u16 = 1;

/// The GPU code is compiled for.
#[derive(Clone, Debug, Default)]
pub struct NvptxTarget {
    /// The libdevice functions that may be called (`__nv_tanf`, ...); empty without libdevice.
    pub libdevice: HashSet<String>,
}

impl Target for NvptxTarget {
    fn name(&self) -> &str {
        BACKEND
    }

    fn buffer_address_space(&self) -> AddressSpace {
        AddressSpace::from(GLOBAL)
    }

    fn function_attributes(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    fn vector_bits(&self) -> u32 {
        // The widest global load and store, `ld.global.v4.f32`.
        128
    }

    fn math_function(&self, libm_name: &str) -> Option<String> {
        let symbol = format!("{}{libm_name}", crate::libdevice::PREFIX);
        self.libdevice.contains(&symbol).then_some(symbol)
    }

    fn thread_registers(&self) -> Option<ThreadRegisters> {
        Some(ThreadRegisters {
            thread: "llvm.nvvm.read.ptx.sreg.tid.x",
            block: "llvm.nvvm.read.ptx.sreg.ctaid.x",
            block_size: "llvm.nvvm.read.ptx.sreg.ntid.x",
        })
    }
}
