//! The nvptx backend's dot kernels on small modules: the tile grid for odd and batched shapes,
//! the shared tiles and barriers in the PTX, an elementwise epilogue fused after the dot,
//! narrow and integer types, and refusals naming what is not covered. Where ptxas is present
//! (`$AXLE_PTXAS` or `PATH`), the PTX is assembled for `sm_80` and `sm_90`.

use axle_codegen_nvptx::{emit_text, plan_kernels, Emit, KernelKind, NvptxOptions};
use axle_ir::{Module, Tolerance};

mod common;
use common::{matches_evaluator, module, ptx_checked};

/// The grid of `m`'s one kernel, a dot kernel.
fn dot_grid(m: &Module) -> u64 {
    let ks = plan_kernels(m).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ks.len(), 1, "{ks:?}");
    assert!(matches!(ks[0].kind, KernelKind::Dot(_)), "{:?}", ks[0].kind);
    ks[0].plan.grid
}

const MLP: &str = r#"
HloModule mlp
fused {
  x = f32[50,40] parameter(0)
  w = f32[40,33] parameter(1)
  b = f32[33] parameter(2)
  d = f32[50,33] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  bb = f32[50,33] broadcast(b), dimensions={1}
  s = f32[50,33] add(d, bb)
  z = f32[] constant(0)
  zb = f32[50,33] broadcast(z), dimensions={}
  ROOT r = f32[50,33] maximum(s, zb)
}
ENTRY e {
  x = f32[50,40] parameter(0)
  w = f32[40,33] parameter(1)
  b = f32[33] parameter(2)
  ROOT f = f32[50,33] fusion(x, w, b), kind=kOutput, calls=fused
}
"#;

#[test]
fn dots_with_epilogues_are_tiled_through_shared_memory() {
    let m = module(MLP);
    // 50 x 33 outputs: 4 x 3 tiles of 16 x 16.
    assert_eq!(dot_grid(&m), 12);
    for p in ptx_checked(&m, "mlp") {
        // Two tiles of 16 rows of 17 f32; two barriers per step along K.
        assert_eq!(p.matches(".shared .align 16 .b8").count(), 2, "{p}");
        assert!(p.contains("[1088]") && p.contains("bar.sync"), "{p}");
        // The epilogue (bias and ReLU) is in the kernel.
        assert!(p.contains("setp.ge.f32") && p.contains("selp.f32"), "{p}");
    }
}

#[test]
fn batched_narrow_and_integer_dots() {
    for (ty, name) in [
        ("bf16", "bf16"),
        ("f64", "f64"),
        ("s32", "s32"),
        ("f16", "f16"),
    ] {
        let m = module(&format!(
            r#"
HloModule batched
ENTRY e {{
  a = {ty}[3,20,7] parameter(0)
  b = {ty}[3,7,18] parameter(1)
  ROOT d = {ty}[3,20,18] dot(a, b), lhs_batch_dims={{0}}, rhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_contracting_dims={{1}}
}}
"#
        ));
        // 3 batches of 2 x 2 tiles.
        assert_eq!(dot_grid(&m), 12, "{ty}");
        ptx_checked(&m, &format!("batched_{name}"));
    }
}

#[test]
fn dots_not_covered_are_errors_naming_them() {
    // The dot's result read through a transpose.
    let m = module(
        r#"
HloModule t
fused {
  x = f32[8,4] parameter(0)
  w = f32[4,6] parameter(1)
  d = f32[8,6] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
  ROOT t = f32[6,8] transpose(d), dimensions={1,0}
}
ENTRY e {
  x = f32[8,4] parameter(0)
  w = f32[4,6] parameter(1)
  ROOT f = f32[6,8] fusion(x, w), kind=kOutput, calls=fused
}
"#,
    );
    let e = emit_text(&m, &NvptxOptions::default(), Emit::Ptx).unwrap_err();
    assert_eq!(
        (e.instruction.as_str(), e.opcode.as_str()),
        ("t", "transpose")
    );
    assert!(e.to_string().contains("reading a dot's result"), "{e}");
    // A complex dot is not the tiled kernel's but a loop kernel's.
    let m = module(
        "HloModule c\nENTRY e {\n  a = c64[2,3] parameter(0)\n  b = c64[3,2] parameter(1)\n  ROOT d = c64[2,2] dot(a, b), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n}\n",
    );
    let kernels = plan_kernels(&m).expect("a complex dot is planned");
    assert!(
        matches!(&kernels[..], [k] if k.kind == KernelKind::Loop),
        "{kernels:?}"
    );
    emit_text(&m, &NvptxOptions::default(), Emit::Ptx).expect("a complex dot emits PTX");
}

#[test]
fn reshapes_and_bitcasts_after_a_dot_are_stored_at_its_positions() {
    // XLA's optimized modules split a dot's rows back into batch and sequence with a bitcast
    // before the bias add; the kernel stores each element at the dot's row-major position.
    for op in ["bitcast", "reshape"] {
        let m = module(&format!(
            r#"
HloModule r
fused {{
  x = f32[40,24]{{1,0}} parameter(0)
  w = f32[24,20]{{1,0}} parameter(1)
  b = f32[2,20,20]{{2,1,0}} parameter(2)
  d = f32[40,20]{{1,0}} dot(x, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  r = f32[2,20,20]{{2,1,0}} {op}(d)
  ROOT s = f32[2,20,20]{{2,1,0}} add(r, b)
}}
ENTRY e {{
  x = f32[40,24]{{1,0}} parameter(0)
  w = f32[24,20]{{1,0}} parameter(1)
  b = f32[2,20,20]{{2,1,0}} parameter(2)
  ROOT f = f32[2,20,20]{{2,1,0}} fusion(x, w, b), kind=kOutput, calls=fused
}}
"#
        ));
        let ks = plan_kernels(&m).unwrap_or_else(|e| panic!("{op}: {e}"));
        assert!(
            matches!(ks[0].kind, KernelKind::Dot(_)),
            "{op}: {:?}",
            ks[0].kind
        );
        // Depth 24: one chain in the kernel and in the evaluator, so the bits agree.
        matches_evaluator(&m, Tolerance::Exact);
        ptx_checked(&m, op);
    }
}
