//! Opt-in float atomics for scatters ([`KernelOptions::float_atomics`]): an `f32` or `f64`
//! scatter whose combiner is one `add` takes the atomic path (PTX `atom.global.add`) only when
//! the option is on, and its sums then agree with the evaluator's within the rounding of
//! another summation order (on the simulator, whose update threads race as on a GPU); every
//! other float combiner and type, and every float scatter with the option off, keeps the owner
//! path, which is bit-identical to the evaluator.

use axle_codegen_nvptx::ptxas::{assemble, find_ptxas};
use axle_codegen_nvptx::scatter::AtomicCombiner;
use axle_codegen_nvptx::{emit_text, Emit, GpuArch, KernelOptions, NvptxOptions};
use axle_ir::{compare_arrays, Module, Tolerance};
use axle_testkit::leaves;

mod common;
use common::sim_run::run_sim_with;
use common::{atomic_ops, inputs, module};

fn on() -> KernelOptions {
    KernelOptions {
        float_atomics: true,
        ..Default::default()
    }
}

/// An embedding-gradient scatter: `n` rows of 5 updates into `ty[13,5]` with combiner `op`,
/// at indices that repeat each row about `n / 13` times, two of them out of bounds.
fn embedding(ty: &str, op: &str, n: usize) -> Module {
    let idx: Vec<String> = (0..n)
        .map(|k| match k {
            3 => "{-1}".to_string(),
            8 => "{13}".to_string(),
            _ => format!("{{{}}}", (k * 7) % 13),
        })
        .collect();
    module(&format!(
        "HloModule s\nc {{\n  x = {ty}[] parameter(0)\n  y = {ty}[] parameter(1)\n  \
         ROOT r = {ty}[] {op}(x, y)\n}}\nENTRY e {{\n  x = {ty}[13,5] parameter(0)\n  \
         u = {ty}[{n},5] parameter(1)\n  i = s32[{n},1] constant({{{}}})\n  \
         ROOT s = {ty}[13,5] scatter(x, i, u), update_window_dims={{1}}, \
         inserted_window_dims={{0}}, scatter_dims_to_operand_dims={{0}}, index_vector_dim=1, \
         to_apply=c\n}}\n",
        idx.join(",")
    ))
}

/// The simulator's result for `m` planned with `opts` against the evaluator's, within `tol`.
fn check(m: &Module, opts: &KernelOptions, tol: Tolerance) {
    let args = inputs(m);
    let got = run_sim_with(m, &args, opts).unwrap_or_else(|e| panic!("{e}"));
    let want = leaves(&axle_analysis::eval::evaluate(m, &args).unwrap_or_else(|e| panic!("{e}")));
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        compare_arrays(w, g, tol).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn float_add_scatters_take_atomics_only_when_allowed() {
    for ty in ["f32", "f64"] {
        let m = embedding(ty, "add", 200);
        assert_eq!(atomic_ops(&m, &KernelOptions::default()), [None], "{ty}");
        assert_eq!(atomic_ops(&m, &on()), [Some(AtomicCombiner::FAdd)], "{ty}");
    }
    // Narrower floats, and float combiners whose result shows the order in other ways than
    // rounding (which NaN survives), keep the owner path with the option on.
    for (ty, op) in [
        ("f16", "add"),
        ("bf16", "add"),
        ("f32", "maximum"),
        ("f32", "minimum"),
        ("f64", "multiply"),
        ("f32", "subtract"),
    ] {
        let m = embedding(ty, op, 20);
        assert_eq!(atomic_ops(&m, &on()), [None], "{ty} {op}");
    }
}

#[test]
fn float_atomic_sums_match_the_evaluator_within_rounding() {
    // About 15 updates meet in each element; on the simulator the update threads race.
    let f32_tol = Tolerance::Close {
        rtol: 1e-5,
        atol: 1e-5,
    };
    let f64_tol = Tolerance::Close {
        rtol: 1e-12,
        atol: 1e-12,
    };
    for (ty, tol) in [("f32", f32_tol), ("f64", f64_tol)] {
        let m = embedding(ty, "add", 200);
        check(&m, &on(), tol);
        // The default owner path stays bit-identical to the evaluator.
        check(&m, &KernelOptions::default(), Tolerance::Exact);
    }
}

#[test]
fn float_atomic_ptx_adds_atomically_and_assembles() {
    let ptxas = find_ptxas();
    if ptxas.is_none() {
        eprintln!("no ptxas (set AXLE_PTXAS or run `make deps`): PTX not assembled");
    }
    for (ty, want) in [
        ("f32", "atom.global.add.f32"),
        ("f64", "atom.global.add.f64"),
    ] {
        let m = embedding(ty, "add", 200);
        for arch in GpuArch::ALL {
            let opts = NvptxOptions {
                gpu_arch: arch,
                kernels: on(),
                ..Default::default()
            };
            let p = emit_text(&m, &opts, Emit::Ptx).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                p.contains(want) || p.contains(&want.replace("atom.", "red.")),
                "{ty}: no {want}:\n{p}"
            );
            if let Some(x) = &ptxas {
                assemble(x, &p, arch, ty).unwrap_or_else(|e| panic!("{ty}: {e}\n{p}"));
            }
            let off = NvptxOptions {
                gpu_arch: arch,
                ..Default::default()
            };
            let p = emit_text(&m, &off, Emit::Ptx).unwrap_or_else(|e| panic!("{e}"));
            assert!(
                !p.contains(".add.f"),
                "{ty}: a float atomic with the option off"
            );
        }
    }
}
