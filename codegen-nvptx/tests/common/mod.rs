//! Helpers shared by the nvptx backend's kernel tests: a parsed module, its PTX for every
//! architecture, assembled by ptxas where it is present (`$AXLE_PTXAS` or `PATH`; where it is
//! absent the test says so on stderr and checks the PTX text only), and runs on the host
//! simulator checked against the reference evaluator.

// Each test file uses some of the helpers.
#![allow(dead_code)]

use axle_codegen_nvptx::device::{BufferKey, DeviceMemory};
use axle_codegen_nvptx::executor::Executable;
use axle_codegen_nvptx::ptxas::{assemble, find_ptxas};
use axle_codegen_nvptx::sim::SimDevice;
use axle_codegen_nvptx::{emit_text, Emit, GpuArch, NvptxOptions};
use axle_ir::{compare_arrays, parse_module, ArrayLiteral, Literal, Module, Shape, Tolerance};
use axle_testkit::{leaves, noise, real_array};

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

/// Inputs for the entry parameters of `m`: noise in `[-1, 1)` for floats, in `[-50, 50)` for
/// integers (seeded by the parameter's position).
pub fn inputs(m: &Module) -> Vec<Literal> {
    m.params(m.entry())
        .iter()
        .enumerate()
        .map(|(k, &p)| {
            let Shape::Array(a) = m.shape(p) else {
                panic!("a test module takes arrays")
            };
            let scale = if a.ty.is_floating() { 1.0 } else { 50.0 };
            real_array(a.ty, &a.dims, |i| {
                (noise(k as u64 + 1, i as u64) * scale).floor()
                    + if a.ty.is_floating() {
                        noise(k as u64 + 7, i as u64)
                    } else {
                        0.0
                    }
            })
        })
        .collect()
}

/// Runs `m` on the simulator on `args`, giving the result's leaves; every buffer is freed.
pub fn run_sim(m: &Module, args: &[Literal]) -> Result<Vec<ArrayLiteral>, String> {
    let mem = DeviceMemory::new(SimDevice::default());
    let exe = Executable::compile(&mem, m.clone()).map_err(|e| e.to_string())?;
    let keys: Vec<Vec<BufferKey>> = args
        .iter()
        .map(|a| leaves(a).iter().map(|l| mem.upload(&l.data)).collect())
        .collect::<Result<_, _>>()?;
    let out = exe.run(&mem, &keys)?;
    let root = m.root(m.entry());
    let mut shapes = Vec::new();
    collect_shapes(m, m.shape(root), &mut shapes);
    let got = shapes
        .into_iter()
        .zip(&out)
        .map(|(shape, &k)| {
            Ok(ArrayLiteral {
                shape,
                data: mem.download(k)?,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    for k in out.into_iter().chain(keys.into_iter().flatten()) {
        mem.free(k)?;
    }
    assert_eq!(mem.live(), 0, "a run left buffers behind");
    Ok(got)
}

fn collect_shapes(m: &Module, s: &Shape, out: &mut Vec<axle_ir::ArrayShape>) {
    match s {
        Shape::Array(a) => out.push(a.clone()),
        Shape::Tuple(es) => es
            .iter()
            .for_each(|&e| collect_shapes(m, m.shape_of(e), out)),
        _ => {}
    }
}

/// Checks the simulator's results for `m` against the evaluator's, within `tol` for floats
/// (exact for integers).
pub fn matches_evaluator(m: &Module, tol: Tolerance) {
    let args = inputs(m);
    let got = run_sim(m, &args).unwrap_or_else(|e| panic!("{e}"));
    let want = leaves(&axle_analysis::eval::evaluate(m, &args).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(got.len(), want.len());
    for (k, (g, w)) in got.iter().zip(&want).enumerate() {
        let tol = if w.shape.ty.is_floating() {
            tol
        } else {
            Tolerance::Exact
        };
        compare_arrays(w, g, tol).unwrap_or_else(|e| panic!("out{k}: {e}"));
    }
}
