//! The nvptx backend's dots on tensor cores (`mma.sync.aligned.m16n8k16`): which dots the
//! planner puts there (operand types, sizes, the `TensorCores` setting), the PTX's `mma`
//! instructions (assembled by ptxas for `sm_80` and `sm_90` where it is present), and runs on
//! the host simulator, which executes each `mma` as a warp-collective operation with the PTX
//! ISA's fragment layout: odd sizes (1, 3, 17, 33 and 255 in each dimension), batched and
//! transposed operands, `f16` and `bf16`, a fused bias and ReLU epilogue and a fused operand
//! producer, each checked against the evaluator within the dtype's tolerance and against the
//! FMA tile loop (the same kernel planned with tensor cores off). No GPU ran these kernels.

use axle_codegen_nvptx::mma_product::{BLOCK_M, BLOCK_N, THREADS};
use axle_codegen_nvptx::{
    emit_text, plan_kernels_with, Emit, KernelKind, KernelOptions, NvptxOptions, TensorCores,
};
use axle_ir::{compare_arrays, Module, Tolerance};
use axle_testkit::leaves;

mod common;
use common::sim_run::run_sim_with;
use common::{inputs, module, ptx_checked};

/// bf16's tolerance in the corpus (`bf16_mlp`: rtol and atol 0.02, about 2.5 bf16 epsilons).
const BF16_TOL: Tolerance = Tolerance::Close {
    rtol: 0.02,
    atol: 0.02,
};
/// The same 2.5 epsilons for f16 (epsilon 2^-10).
const F16_TOL: Tolerance = Tolerance::Close {
    rtol: 2.5e-3,
    atol: 2.5e-3,
};

fn tol(ty: &str) -> Tolerance {
    match ty {
        "bf16" => BF16_TOL,
        "f16" => F16_TOL,
        _ => panic!("no tolerance for {ty}"),
    }
}

fn with(tc: TensorCores) -> KernelOptions {
    KernelOptions {
        tensor_cores: tc,
        ..Default::default()
    }
}

/// Whether `m`'s one kernel, planned with `tc`, is a dot kernel on tensor cores; its grid and
/// block.
fn planned(m: &Module, tc: TensorCores) -> (bool, u64, u64) {
    let ks = plan_kernels_with(m, &with(tc)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ks.len(), 1, "{ks:?}");
    let KernelKind::Dot(geo) = &ks[0].kind else {
        panic!("not a dot kernel: {:?}", ks[0].kind)
    };
    (geo.mma.is_some(), ks[0].plan.grid, ks[0].plan.block)
}

/// `out_ty[m, n] = dot(ty[m, k], ty[k, n])`.
fn plain(ty: &str, out_ty: &str, (m, k, n): (u64, u64, u64)) -> Module {
    module(&format!(
        r#"
HloModule plain
ENTRY e {{
  a = {ty}[{m},{k}] parameter(0)
  b = {ty}[{k},{n}] parameter(1)
  ROOT d = {out_ty}[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
"#
    ))
}

/// A batch of 3 with both operands transposed: `ty[3, m, n] = dot(ty[3, k, m], ty[3, n, k])`.
fn batched_transposed(ty: &str, (m, k, n): (u64, u64, u64)) -> Module {
    module(&format!(
        r#"
HloModule bt
ENTRY e {{
  a = {ty}[3,{k},{m}] parameter(0)
  b = {ty}[3,{n},{k}] parameter(1)
  ROOT d = {ty}[3,{m},{n}] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{1}}, rhs_contracting_dims={{2}}
}}
"#
    ))
}

/// `relu(dot(convert(x), w) + bias)` in one fusion, `x` an `f32` operand converted to `ty`
/// inside the fusion (a fused producer of the dot's operand).
fn mlp(ty: &str, (m, k, n): (u64, u64, u64)) -> Module {
    module(&format!(
        r#"
HloModule mlp
fused {{
  x = f32[{m},{k}] parameter(0)
  w = {ty}[{k},{n}] parameter(1)
  b = {ty}[{n}] parameter(2)
  xc = {ty}[{m},{k}] convert(x)
  d = {ty}[{m},{n}] dot(xc, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  bb = {ty}[{m},{n}] broadcast(b), dimensions={{1}}
  s = {ty}[{m},{n}] add(d, bb)
  z = {ty}[] constant(0)
  zb = {ty}[{m},{n}] broadcast(z), dimensions={{}}
  ROOT r = {ty}[{m},{n}] maximum(s, zb)
}}
ENTRY e {{
  x = f32[{m},{k}] parameter(0)
  w = {ty}[{k},{n}] parameter(1)
  b = {ty}[{n}] parameter(2)
  ROOT f = {ty}[{m},{n}] fusion(x, w, b), kind=kOutput, calls=fused
}}
"#
    ))
}

/// Runs `m` on the simulator on tensor cores (forced) and on the FMA loop, checking both
/// against the evaluator and each other within `tol`.
fn check_both_paths(m: &Module, tol: Tolerance, what: &str) {
    assert!(
        planned(m, TensorCores::Always).0,
        "{what}: not on tensor cores"
    );
    assert!(
        !planned(m, TensorCores::Off).0,
        "{what}: on tensor cores when off"
    );
    let args = inputs(m);
    let want = leaves(&axle_analysis::eval::evaluate(m, &args).unwrap_or_else(|e| panic!("{e}")));
    let run = |tc| run_sim_with(m, &args, &with(tc)).unwrap_or_else(|e| panic!("{what}: {e}"));
    let (mma, fma) = (run(TensorCores::Always), run(TensorCores::Off));
    assert_eq!((mma.len(), fma.len()), (want.len(), want.len()));
    for ((w, t), f) in want.iter().zip(&mma).zip(&fma) {
        compare_arrays(w, t, tol).unwrap_or_else(|e| panic!("{what}: mma vs evaluator: {e}"));
        compare_arrays(w, f, tol).unwrap_or_else(|e| panic!("{what}: fma vs evaluator: {e}"));
        compare_arrays(f, t, tol).unwrap_or_else(|e| panic!("{what}: mma vs fma: {e}"));
    }
}

/// Sizes `(m, k, n)` giving each dimension each of 1, 3, 17, 33 and 255.
const ODD: [(u64, u64, u64); 5] = [
    (1, 1, 1),
    (3, 17, 33),
    (17, 3, 255),
    (33, 33, 17),
    (255, 255, 3),
];

#[test]
fn f16_and_bf16_dots_of_sixteen_or_more_take_tensor_cores_by_default() {
    for ty in ["f16", "bf16"] {
        // 100 x 40 x 70: 2 x 2 tiles of 64 x 64, 128 threads each.
        let m = plain(ty, ty, (100, 40, 70));
        assert_eq!(planned(&m, TensorCores::Auto), (true, 4, THREADS));
        assert_eq!((BLOCK_M, BLOCK_N, THREADS), (64, 64, 128));
        // An f32 result of f16 operands accumulates in f32 too.
        assert!(planned(&plain(ty, "f32", (16, 16, 16)), TensorCores::Auto).0);
        // Below 16 in some dimension, the FMA loop (16 x 16 threads per 16 x 16 tile)...
        for small in [(15, 40, 70), (100, 15, 70), (100, 40, 15)] {
            assert!(
                !planned(&plain(ty, ty, small), TensorCores::Auto).0,
                "{small:?}"
            );
        }
        // ... unless forced; off keeps every dot on the FMA loop.
        assert_eq!(
            planned(&plain(ty, ty, (3, 1, 5)), TensorCores::Always),
            (true, 1, 128)
        );
        assert_eq!(planned(&m, TensorCores::Off), (false, 35, 256));
        // An f64 result accumulates in f64: never on tensor cores.
        assert!(!planned(&plain(ty, "f64", (64, 64, 64)), TensorCores::Always).0);
    }
    // f32 (no tf32: XLA's reference results are exact f32 sums), integers, and operands of
    // two different types stay on the FMA loop.
    for ty in ["f32", "f64", "s32"] {
        assert!(
            !planned(&plain(ty, ty, (64, 64, 64)), TensorCores::Always).0,
            "{ty}"
        );
    }
    let mixed = module(
        "HloModule x\nENTRY e {\n  a = f16[32,32] parameter(0)\n  b = bf16[32,32] parameter(1)\n  ROOT d = f32[32,32] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    );
    assert!(!planned(&mixed, TensorCores::Always).0);
}

#[test]
fn tensor_core_ptx_has_the_mma_and_assembles_for_sm_80_and_sm_90() {
    for (ty, ptx_ty) in [("f16", "f16"), ("bf16", "bf16")] {
        let m = mlp(ty, (100, 40, 70));
        let mma = format!("mma.sync.aligned.m16n8k16.row.col.f32.{ptx_ty}.{ptx_ty}.f32");
        for p in ptx_checked(&m, &format!("mma_mlp_{ty}")) {
            // 2 x 4 mmas per warp for each of the two 16-deep halves of a step (LLVM may
            // unroll the steps).
            let n = p.matches(&mma).count();
            assert!(n > 0 && n % 16 == 0, "{n} mmas\n{p}");
            // The staged tiles (64 rows of 40 16-bit elements) and the output tile.
            assert!(p.contains("[5120]") && p.contains("[16640]"), "{p}");
            // The epilogue (bias and ReLU) is in the kernel.
            assert!(p.contains("max.f32") || p.contains("setp"), "{p}");
        }
        let off = NvptxOptions {
            kernels: with(TensorCores::Off),
            ..Default::default()
        };
        let p = emit_text(&m, &off, Emit::Ptx).unwrap_or_else(|e| panic!("{e}"));
        assert!(!p.contains("mma.sync"), "{p}");
    }
}

#[test]
fn odd_sizes_on_tensor_cores_match_the_evaluator_and_the_fma_loop() {
    for ty in ["f16", "bf16"] {
        for size in ODD {
            check_both_paths(&plain(ty, ty, size), tol(ty), &format!("{ty} {size:?}"));
        }
        // An f32 result.
        let size = (33, 255, 17);
        check_both_paths(&plain(ty, "f32", size), tol(ty), &format!("{ty}->f32"));
    }
}

#[test]
fn batched_transposed_operands_on_tensor_cores() {
    for ty in ["f16", "bf16"] {
        for size in [(17, 33, 3), (70, 40, 1), (3, 255, 66)] {
            let m = batched_transposed(ty, size);
            // 3 batches of 64 x 64 tiles.
            let tiles = size.0.div_ceil(64) * size.2.div_ceil(64);
            assert_eq!(planned(&m, TensorCores::Always), (true, 3 * tiles, 128));
            check_both_paths(&m, tol(ty), &format!("batched {ty} {size:?}"));
        }
    }
}

#[test]
fn a_fused_bias_and_relu_after_a_tensor_core_dot() {
    for ty in ["f16", "bf16"] {
        for size in [(255, 33, 17), (33, 17, 70)] {
            let m = mlp(ty, size);
            check_both_paths(&m, tol(ty), &format!("mlp {ty} {size:?}"));
        }
    }
}

#[test]
fn the_corpus_bf16_mlp_forced_onto_tensor_cores_matches_xla() {
    // Its two dots (bf16 operands, 8 rows: the FMA loop by default) on tensor cores, and on
    // the FMA loop, against XLA's outputs under the manifest's tolerances; the module as given
    // (no fusion: an unfused dot kernel each).
    let dir = axle_testkit::shared_dir().join("corpus");
    let case = axle_testkit::manifest_cases(&dir)
        .into_iter()
        .find(|c| c["name"].as_str() == Some("bf16_mlp"))
        .expect("the corpus has bf16_mlp");
    let m = axle_testkit::load(&dir, "bf16_mlp.hlo").unwrap_or_else(|e| panic!("{e}"));
    let args = axle_testkit::inputs(&dir, &case).unwrap_or_else(|e| panic!("{e}"));
    for tc in [TensorCores::Always, TensorCores::Off] {
        let ks = plan_kernels_with(&m, &with(tc)).unwrap_or_else(|e| panic!("{e}"));
        let mma = ks
            .iter()
            .filter(|k| matches!(&k.kind, KernelKind::Dot(g) if g.mma.is_some()))
            .count();
        assert_eq!(mma, if tc == TensorCores::Always { 2 } else { 0 });
        let got = run_sim_with(&m, &args, &with(tc)).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(got.len(), 3);
        for (k, g) in got.iter().enumerate() {
            axle_testkit::check_output(&dir, &case, k, g).unwrap_or_else(|e| panic!("{tc:?}: {e}"));
        }
    }
}
