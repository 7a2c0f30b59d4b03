//! Every case of the shared corpus (`NAME.hlo` and XLA's optimized `NAME.opt.hlo`) on the
//! `nvptx` backend after its default pipeline (`gpu`): the PTX of each case the backend
//! compiles must be accepted by NVIDIA's assembler, `ptxas -arch=sm_80` and `-arch=sm_90`, each
//! for the PTX emitted for that architecture; a case the backend refuses must be refused with
//! an error naming the op it does not support (never a panic, never an empty error).
//!
//! ptxas is found at `$AXLE_PTXAS` (the Makefile points it at the copy `.ci/deps` installs from
//! pip's `nvidia-cuda-nvcc-cu12`) or on `PATH`. Where it is absent the trials say so on stderr
//! and check only that PTX is emitted; under CI (`CI` set) its absence fails every trial.
//!
//! One named test per file and architecture, plus a summary trial listing what is compiled and
//! what is refused (with which op), which fails when fewer files compile than
//! [`COMPILED_FLOOR`] (the count reached so far: it only goes up; a lower floor applies where
//! libdevice is absent).
//!
//! Math functions with no inline form come from libdevice where it is found
//! (`axle_codegen_nvptx::libdevice::find_libdevice`, as the CLI does).

use std::path::{Path, PathBuf};

use axle::backend::{prepare_module, CompileOptions};
use axle_codegen_nvptx::libdevice::find_libdevice;
use axle_codegen_nvptx::ptxas::{assemble, find_ptxas};
use axle_codegen_nvptx::{emit_text, Emit, GpuArch, NvptxOptions};
use axle_testkit::shared_dir;
use libtest_mimic::{Arguments, Failed, Trial};

/// The PTX of a corpus file for `arch`, or the backend's refusal (Err(Some(op))), after the
/// `gpu` pipeline.
fn compile(path: &Path, arch: GpuArch) -> Result<Result<String, String>, Failed> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let m = axle_ir::parse_module(&text).map_err(|e| format!("{}: {e}", path.display()))?;
    let opts = CompileOptions {
        pipeline: Some("gpu".into()),
        ..Default::default()
    };
    let m = prepare_module("nvptx", m, &opts).map_err(|e| e.to_string())?;
    let opts = NvptxOptions {
        gpu_arch: arch,
        libdevice: find_libdevice(),
        ..Default::default()
    };
    match emit_text(&m, &opts, Emit::Ptx) {
        Ok(ptx) => Ok(Ok(ptx)),
        // Instructions made by passes may have no name; the op is always named.
        Err(e) if !e.opcode.is_empty() && e.to_string().contains(&e.opcode) => {
            Ok(Err(e.opcode.clone()))
        }
        Err(e) => Err(format!("refused without naming an instruction's op: {e}").into()),
    }
}

/// The fewest corpus files (of 81) the backend must compile, with reduction, transpose, dot,
/// sort, convolution, scatter and select-and-scatter kernels, control flow and libdevice.
const COMPILED_FLOOR: usize = 81;
/// The same without libdevice (math functions are the inline forms of
/// `axle_codegen_llvm::libm_fallback`; 81 with `AXLE_LIBDEVICE=none`).
const COMPILED_FLOOR_WITHOUT_LIBDEVICE: usize = 81;

fn main() {
    let args = Arguments::from_args();
    let dir = shared_dir().join("corpus");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .map(|rd| rd.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "hlo"));
    files.sort();
    let ptxas = find_ptxas();
    if ptxas.is_none() {
        eprintln!(
            "nvptx_ptxas: no ptxas (set AXLE_PTXAS or run `make deps`): PTX is emitted but not \
             assembled{}",
            if std::env::var_os("CI").is_some() {
                "; under CI this fails"
            } else {
                ""
            }
        );
    }
    let mut trials = Vec::new();
    for f in &files {
        let name = f
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .replace('.', "_");
        for arch in GpuArch::ALL {
            let (f, ptxas) = (f.clone(), ptxas.clone());
            let trial_name = format!("{name}_{}", arch.name());
            trials.push(Trial::test(trial_name.clone(), move || {
                let ptx = match compile(&f, arch)? {
                    Ok(ptx) => ptx,
                    // Refused with a named op: the summary lists it.
                    Err(_) => return Ok(()),
                };
                if !ptx.contains(&format!(".target {}", arch.name())) {
                    return Err(format!("the PTX is not for {}", arch.name()).into());
                }
                match &ptxas {
                    Some(p) => assemble(p, &ptx, arch, &trial_name)
                        .map(|_| ())
                        .map_err(Failed::from),
                    None if std::env::var_os("CI").is_some() => {
                        Err("no ptxas under CI (.ci/deps installs it)".into())
                    }
                    None => Ok(()),
                }
            }));
        }
    }
    let summary_files = files.clone();
    trials.push(Trial::test("summary_compiled_and_refused", move || {
        let (mut compiled, mut refused) = (Vec::new(), Vec::new());
        for f in &summary_files {
            let n = f
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            match compile(f, GpuArch::Sm80)? {
                Ok(_) => compiled.push(n),
                Err(op) => refused.push(format!("{n} ({op})")),
            }
        }
        eprintln!(
            "nvptx: {} of {} corpus files compiled: {}\nrefused: {}",
            compiled.len(),
            summary_files.len(),
            compiled.join(", "),
            refused.join(", ")
        );
        let floor = if find_libdevice().is_some() {
            COMPILED_FLOOR
        } else {
            eprintln!("nvptx: no libdevice (run `make deps`): the floor without it applies");
            COMPILED_FLOOR_WITHOUT_LIBDEVICE
        };
        if compiled.len() < floor {
            return Err(format!(
                "{} corpus files compile on the nvptx backend, fewer than the {floor} compiled \
                 before",
                compiled.len()
            )
            .into());
        }
        Ok(())
    }));
    libtest_mimic::run(&args, trials).exit();
}
