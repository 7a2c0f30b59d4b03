//! The nvptx backend's reduction kernels on small modules: the kind and launch plan chosen from
//! the geometry (row reductions one warp or one block per row, column reductions 32 outputs per
//! block), the warp shuffles, barriers and shared memory in the PTX, multi-output and variadic
//! reductions, and refusals naming what is not covered. Where ptxas is present (`$AXLE_PTXAS`
//! or `PATH`), every kernel's PTX is assembled for `sm_80` and `sm_90`.

use axle_codegen_nvptx::reduction::{ReductionKind, REDUCTION_BLOCK};
use axle_codegen_nvptx::{emit_text, plan_kernels, Emit, KernelKind, NvptxOptions};
use axle_ir::{Module, Tolerance};

mod common;
use common::{matches_evaluator, module, ptx_checked};

/// A module reducing `a` of type `ty[dims]` over `rdims` with `add`.
fn sum(ty: &str, dims: &str, out: &str, rdims: &str) -> Module {
    module(&format!(
        r#"
HloModule r
add {{
  x = {ty}[] parameter(0)
  y = {ty}[] parameter(1)
  ROOT s = {ty}[] add(x, y)
}}
ENTRY e {{
  a = {ty}[{dims}] parameter(0)
  z = {ty}[] constant(0)
  ROOT r = {ty}[{out}] reduce(a, z), dimensions={{{rdims}}}, to_apply=add
}}
"#
    ))
}

fn kind(m: &Module) -> (ReductionKind, u64, u64) {
    let ks = plan_kernels(m).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ks.len(), 1, "{ks:?}");
    match &ks[0].kind {
        KernelKind::Reduction(g) => (g.kind, ks[0].plan.grid, ks[0].plan.block),
        k => panic!("not a reduction kernel: {k:?}"),
    }
}

#[test]
fn short_rows_take_one_warp_each_and_combine_by_shuffles() {
    let m = sum("f32", "100,300", "100", "1");
    // 8 rows per block of 256 threads: 13 blocks for 100 rows.
    assert_eq!(
        kind(&m),
        (
            ReductionKind::Row {
                threads_per_row: 32
            },
            13,
            REDUCTION_BLOCK
        )
    );
    for p in ptx_checked(&m, "rows_warp") {
        assert!(p.contains("shfl.sync.bfly.b32"), "{p}");
        // A warp's rows need no block-wide barrier.
        assert!(!p.contains("bar.sync"), "{p}");
    }
}

#[test]
fn long_rows_take_a_block_and_meet_in_shared_memory() {
    let m = sum("f32", "10,5000", "10", "1");
    assert_eq!(
        kind(&m),
        (
            ReductionKind::Row {
                threads_per_row: 256
            },
            10,
            REDUCTION_BLOCK
        )
    );
    for p in ptx_checked(&m, "rows_block") {
        assert!(p.contains("shfl.sync.bfly.b32"), "{p}");
        assert!(p.contains("bar.sync"), "{p}");
        assert!(p.contains(".shared"), "{p}");
    }
    // A whole-array reduction is one row.
    let m = sum("f32", "1000000", "", "0");
    assert_eq!(
        kind(&m),
        (
            ReductionKind::Row {
                threads_per_row: 256
            },
            1,
            REDUCTION_BLOCK
        )
    );
}

#[test]
fn kept_minor_dimensions_make_column_reductions() {
    // 70 columns: 3 blocks of 32 outputs.
    let m = sum("f32", "1000,70", "70", "0");
    assert_eq!(kind(&m), (ReductionKind::Column, 3, REDUCTION_BLOCK));
    for p in ptx_checked(&m, "columns") {
        assert!(p.contains("bar.sync") && p.contains(".shared"), "{p}");
        assert!(!p.contains("shfl.sync"), "{p}");
    }
    // A middle dimension reduced, the minor one kept: 4 * 8 outputs.
    let m = sum("f32", "4,100,8", "4,8", "1");
    assert_eq!(kind(&m), (ReductionKind::Column, 1, REDUCTION_BLOCK));
    // Size-1 minor dimensions do not count: the reduced dimension is the minor one.
    let m = sum("f32", "6,50,1", "6,1", "1");
    assert_eq!(
        kind(&m),
        (
            ReductionKind::Row {
                threads_per_row: 32
            },
            1,
            REDUCTION_BLOCK
        )
    );
}

#[test]
fn wide_and_narrow_types_shuffle_in_32_bit_pieces() {
    for ty in ["f64", "s64", "u8", "s16", "f16", "bf16", "pred"] {
        let m = if ty == "pred" {
            module(
                r#"
HloModule any
or {
  x = pred[] parameter(0)
  y = pred[] parameter(1)
  ROOT s = pred[] or(x, y)
}
ENTRY e {
  a = pred[64,40] parameter(0)
  z = pred[] constant(false)
  ROOT r = pred[64] reduce(a, z), dimensions={1}, to_apply=or
}
"#,
            )
        } else {
            sum(ty, "64,40", "64", "1")
        };
        for p in ptx_checked(&m, &format!("rows_{ty}")) {
            assert!(p.contains("shfl.sync.bfly.b32"), "{ty}: {p}");
        }
    }
}

const MULTI: &str = r#"
HloModule multi
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
argmax {
  v0 = f32[] parameter(0)
  i0 = s32[] parameter(1)
  v1 = f32[] parameter(2)
  i1 = s32[] parameter(3)
  gt = pred[] compare(v0, v1), direction=GE
  v = f32[] select(gt, v0, v1)
  i = s32[] select(gt, i0, i1)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
fused {
  p = f32[32,3000] parameter(0)
  sq = f32[32,3000] multiply(p, p)
  z = f32[] constant(0)
  s = f32[32] reduce(p, z), dimensions={1}, to_apply=add
  s2 = f32[32] reduce(sq, z), dimensions={1}, to_apply=add
  io = s32[32,3000] iota(), iota_dimension=1
  ninf = f32[] constant(-inf)
  zi = s32[] constant(0)
  am = (f32[32], s32[32]) reduce(p, io, ninf, zi), dimensions={1}, to_apply=argmax
  ROOT t = (f32[32], f32[32], (f32[32], s32[32])) tuple(s, s2, am)
}
ENTRY e {
  a = f32[32,3000] parameter(0)
  ROOT f = (f32[32], f32[32], (f32[32], s32[32])) fusion(a), kind=kInput, calls=fused
}
"#;

#[test]
fn multi_output_and_variadic_reductions_share_one_kernel() {
    let m = module(MULTI);
    assert_eq!(
        kind(&m),
        (
            ReductionKind::Row {
                threads_per_row: 256
            },
            32,
            REDUCTION_BLOCK
        )
    );
    for p in ptx_checked(&m, "multi") {
        assert_eq!(p.matches(".entry").count(), 1, "{p}");
        // Four outputs: two sums, the maximum and its index.
        assert_eq!(p.matches("st.global").count(), 4, "{p}");
    }
}

#[test]
fn reductions_not_covered_are_errors_naming_them() {
    // A reduction's result read at another output (through a reverse).
    let m = module(
        r#"
HloModule reversed
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
fused {
  p = f32[8,16] parameter(0)
  z = f32[] constant(0)
  r = f32[8] reduce(p, z), dimensions={1}, to_apply=add
  ROOT v = f32[8] reverse(r), dimensions={0}
}
ENTRY e {
  a = f32[8,16] parameter(0)
  ROOT f = f32[8] fusion(a), kind=kInput, calls=fused
}
"#,
    );
    let e = emit_text(&m, &NvptxOptions::default(), Emit::Ptx).unwrap_err();
    assert_eq!(
        (e.instruction.as_str(), e.opcode.as_str()),
        ("v", "reverse")
    );
    assert!(
        e.to_string().contains("reading a reduction's result"),
        "{e}"
    );
    // Reduces of different shapes in one multi-output fusion.
    let m = module(
        r#"
HloModule mixed
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
fused {
  p = f32[8,16] parameter(0)
  z = f32[] constant(0)
  r = f32[8] reduce(p, z), dimensions={1}, to_apply=add
  c = f32[16] reduce(p, z), dimensions={0}, to_apply=add
  ROOT t = (f32[8], f32[16]) tuple(r, c)
}
ENTRY e {
  a = f32[8,16] parameter(0)
  ROOT f = (f32[8], f32[16]) fusion(a), kind=kInput, calls=fused
}
"#,
    );
    let e = emit_text(&m, &NvptxOptions::default(), Emit::Ptx).unwrap_err();
    assert_eq!((e.instruction.as_str(), e.opcode.as_str()), ("c", "reduce"));
    assert!(e.to_string().contains("different shapes"), "{e}");
}

#[test]
fn empty_reductions_and_outputs() {
    // Nothing reduced into each output: a loop kernel storing the init value.
    let m = sum("f32", "5,0", "5", "1");
    let ks = plan_kernels(&m).unwrap();
    assert_eq!(ks.len(), 1);
    assert_eq!(ks[0].kind, KernelKind::Loop);
    ptx_checked(&m, "empty_rows");
    // No outputs: no kernel.
    let m = sum("f32", "0,7", "0", "1");
    assert!(plan_kernels(&m).unwrap().is_empty());
}

const LAYERNORM: &str = r#"
HloModule norm
add {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}
fused {
  p = f32[64,1000] parameter(0)
  z = f32[] constant(0)
  n = f32[] constant(0.001)
  s = f32[64] reduce(p, z), dimensions={1}, to_apply=add
  nb = f32[64] broadcast(n), dimensions={}
  mean = f32[64] multiply(s, nb)
  mb = f32[64,1000] broadcast(mean), dimensions={0}
  d = f32[64,1000] subtract(p, mb)
  sq = f32[64,1000] multiply(d, d)
  v = f32[64] reduce(sq, z), dimensions={1}, to_apply=add
  var = f32[64] multiply(v, nb)
  r = f32[64] rsqrt(var)
  rb = f32[64,1000] broadcast(r), dimensions={0}
  out = f32[64,1000] multiply(d, rb)
  ROOT t = (f32[64,1000], f32[64]) tuple(out, mean)
}
ENTRY e {
  a = f32[64,1000] parameter(0)
  ROOT f = (f32[64,1000], f32[64]) fusion(a), kind=kInput, calls=fused
}
"#;

#[test]
fn reductions_reading_reductions_run_in_passes_over_the_row() {
    let m = module(LAYERNORM);
    let ks = plan_kernels(&m).unwrap();
    let KernelKind::Reduction(g) = &ks[0].kind else {
        panic!("{:?}", ks[0].kind)
    };
    // The mean, then the variance (whose input reads the mean).
    assert_eq!(g.passes.len(), 2, "{g:?}");
    assert_eq!(
        g.kind,
        ReductionKind::Row {
            threads_per_row: 256
        }
    );
    for p in ptx_checked(&m, "layernorm") {
        // Each pass has a shared array of its own.
        assert_eq!(p.matches(".shared .align").count(), 2, "{p}");
        assert_eq!(p.matches("bar.sync").count(), 2, "{p}");
    }
}

#[test]
fn reshapes_and_bitcasts_adding_unit_dimensions_read_and_store_the_result() {
    // XLA's optimized modules write JAX's keepdims reshapes as bitcasts, also as the root.
    for (kind, op) in [
        ("row", "bitcast"),
        ("row", "reshape"),
        ("column", "bitcast"),
    ] {
        let (input, rdim, out) = if kind == "row" {
            ("f32[8,40]", "1", "f32[8]")
        } else {
            ("f32[40,8]", "0", "f32[8]")
        };
        let m = module(&format!(
            r#"
HloModule keepdims
add {{
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT s = f32[] add(x, y)
}}
fused {{
  p = {input}{{1,0}} parameter(0)
  b = f32[1,8,1]{{2,1,0}} parameter(1)
  z = f32[] constant(0)
  r = {out}{{0}} reduce(p, z), dimensions={{{rdim}}}, to_apply=add
  k = f32[1,8,1]{{2,1,0}} {op}(r)
  l = f32[1,8,1]{{2,1,0}} exponential(k)
  ROOT o = f32[1,8,1]{{2,1,0}} add(l, b)
}}
ENTRY e {{
  a = {input}{{1,0}} parameter(0)
  b = f32[1,8,1]{{2,1,0}} parameter(1)
  ROOT f = f32[1,8,1]{{2,1,0}} fusion(a, b), kind=kInput, calls=fused
}}
"#
        ));
        let name = format!("{kind}_{op}");
        let ks = plan_kernels(&m).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(
            matches!(ks[0].kind, KernelKind::Reduction(_)),
            "{name}: {:?}",
            ks[0].kind
        );
        // The kernel sums as a tree, the evaluator as a chain.
        matches_evaluator(
            &m,
            Tolerance::Close {
                rtol: 1e-5,
                atol: 1e-6,
            },
        );
        ptx_checked(&m, &name);
    }
}
