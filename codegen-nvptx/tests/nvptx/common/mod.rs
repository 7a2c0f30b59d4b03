//! Helpers shared by the nvptx backend's kernel tests: a parsed module, its PTX for every
//! architecture, assembled by ptxas where it is present (`$AXLE_PTXAS` or `PATH`; where it is
//! absent the test says so on stderr and checks the PTX text only), and runs on the host
//! simulator checked against the reference evaluator, also on a simulator that records what it
//! allocates ([`logging`]).

// Each test file uses some of the helpers.
#![allow(dead_code)]

use axle_codegen_nvptx::ptxas::{assemble, find_ptxas};
use axle_codegen_nvptx::scatter::{AtomicCombiner, ScatterKernel, ScatterPass, UpdateStrategy};
use axle_codegen_nvptx::{
    emit_text, plan_kernels_with, Emit, GpuArch, KernelKind, KernelOptions, NvptxOptions,
};
use axle_ir::{compare_arrays, parse_module, Literal, Module, Shape, Tolerance};
use axle_testkit::{leaves, noise, real_array};

pub mod logging;
pub mod sim_run;
pub use sim_run::run_sim;

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

/// The update strategies of `m`'s scatters planned with `opts`, in launch order.
pub fn update_strategies(m: &Module, opts: &KernelOptions) -> Vec<UpdateStrategy> {
    plan_kernels_with(m, opts)
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .filter_map(|k| match &k.kind {
            KernelKind::Scatter(ScatterKernel {
                pass: ScatterPass::Update,
                geo,
            }) => Some(geo.update.clone()),
            _ => None,
        })
        .collect()
}

/// The atomic combiners of `m`'s scatters planned with `opts`, in launch order (`None` for an
/// owner update).
pub fn atomic_ops(m: &Module, opts: &KernelOptions) -> Vec<Option<AtomicCombiner>> {
    update_strategies(m, opts)
        .into_iter()
        .map(|u| match u {
            UpdateStrategy::Atomic { op, .. } => Some(op),
            UpdateStrategy::Owner { .. } => None,
        })
        .collect()
}
