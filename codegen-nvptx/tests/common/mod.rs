//! Helpers shared by the nvptx backend's kernel tests: a parsed module, and its PTX for every
//! architecture, assembled by ptxas where it is present (`$AXLE_PTXAS` or `PATH`; where it is
//! absent the test says so on stderr and checks the PTX text only).

use axle_codegen_nvptx::ptxas::{assemble, find_ptxas};
use axle_codegen_nvptx::{emit_text, Emit, GpuArch, NvptxOptions};
use axle_ir::{parse_module, Module};

/// The module of HLO text `text` (a test's own text: a parse error is the test's bug).
pub fn module(text: &str) -> Module {
    parse_module(text).unwrap_or_else(|e| panic!("{e}"))
}

/// The PTX of `m` for every architecture (without libdevice), each assembled by ptxas where it
/// is present; `name` names the PTX in ptxas's diagnostics.
pub fn ptx_checked(m: &Module, name: &str) -> Vec<String> {
    let ptxas = find_ptxas();
    if ptxas.is_none() {
        eprintln!("{name}: no ptxas (set AXLE_PTXAS or run `make deps`): PTX not assembled");
    }
    GpuArch::ALL
        .into_iter()
        .map(|arch| {
            let opts = NvptxOptions {
                gpu_arch: arch,
                ..Default::default()
            };
            let p = emit_text(m, &opts, Emit::Ptx).unwrap_or_else(|e| panic!("{e}"));
            if let Some(x) = &ptxas {
                assemble(x, &p, arch, name).unwrap_or_else(|e| panic!("{name}: {e}\n{p}"));
            }
            p
        })
        .collect()
}
