//! NVIDIA's PTX assembler, `ptxas`: assembles the backend's PTX into a cubin for one
//! architecture, which is how a runtime would load it and how the tests check that the PTX is
//! valid for `sm_80` and `sm_90` on machines without a GPU.
//!
//! The assembler is found at `$AXLE_PTXAS` (the Makefile points it at the copy `.ci/deps`
//! installs from pip's `nvidia-cuda-nvcc-cu12`), on `PATH`, or in a CUDA toolkit's `bin/`
//! ([`crate::toolkit`]); it is optional, and its absence is reported as such (`None`), never
//! mistaken for success.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::GpuArch;

/// The ptxas to run, if there is one: `$AXLE_PTXAS` when set (and a file), else `ptxas` on
/// `PATH` when it answers `--version`, else the first `bin/ptxas` of a CUDA toolkit
/// ([`crate::toolkit::toolkit_roots`]) that answers it.
pub fn find_ptxas() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("AXLE_PTXAS").filter(|p| !p.is_empty()) {
        let p = PathBuf::from(p);
        return p.is_file().then_some(p);
    }
    let answers = |p: &Path| {
        Command::new(p)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if answers(Path::new("ptxas")) {
        return Some(PathBuf::from("ptxas"));
    }
    crate::toolkit::toolkit_roots(&crate::toolkit::process_env)
        .into_iter()
        .map(|root| root.join("bin/ptxas"))
        .find(|p| p.is_file() && answers(p))
}

/// Assembles `ptx` for `arch` with the assembler at `ptxas`, returning the cubin's bytes, or
/// an error with ptxas's diagnostics (`name` names the PTX in them).
pub fn assemble(
    ptxas: &Path,
    ptx: &str,
    arch: GpuArch,
    name: &str,
) -> Result<Vec<u8>, crate::NvptxError> {
    assemble_with(ptxas, ptx, arch, name).map_err(crate::NvptxError::Toolkit)
}

/// [`assemble`], its error a message.
fn assemble_with(ptxas: &Path, ptx: &str, arch: GpuArch, name: &str) -> Result<Vec<u8>, String> {
    let dir = tempfile::tempdir().map_err(|e| format!("a scratch directory for ptxas: {e}"))?;
    let src = dir.path().join(format!("{name}.ptx"));
    let bin = dir.path().join(format!("{name}.cubin"));
    std::fs::write(&src, ptx).map_err(|e| format!("{}: {e}", src.display()))?;
    let out = Command::new(ptxas)
        .arg(format!("-arch={}", arch.name()))
        .arg(&src)
        .arg("-o")
        .arg(&bin)
        .output()
        .map_err(|e| format!("running {}: {e}", ptxas.display()))?;
    if !out.status.success() {
        return Err(format!(
            "ptxas -arch={} refused the PTX:\n{}",
            arch.name(),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    std::fs::read(&bin).map_err(|e| format!("{}: {e}", bin.display()))
}
