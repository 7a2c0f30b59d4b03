//! The nvptx backend's convolutions (one output element per thread, the shared elemental
//! form) on the host simulator against the evaluator: strides, padding, lhs and rhs dilation,
//! window reversal, feature and batch groups, odd sizes, layouts other than NHWC, narrow,
//! integer and complex types, and a fused elementwise epilogue; and their PTX assembled for
//! `sm_80` and `sm_90` where ptxas is present.
//!
//! Results are compared exactly for every type but the 16-bit floats: the kernel accumulates
//! in the evaluator's type and order (kernel positions, then input features, with fused
//! multiply-adds) and rounds once, so the bits agree. `f16` and `bf16` are compared within
//! their tolerance only where a fused epilogue rounds after further arithmetic.

use axle_codegen_nvptx::{plan_kernels, KernelKind};
use axle_ir::Tolerance;

mod common;
use common::{matches_evaluator, module, ptx_checked};

/// A module convolving `x` (`ty[xd]`) with `w` (`ty[wd]`) into `ty[od]` with `attrs`.
fn conv(ty: &str, xd: &str, wd: &str, od: &str, attrs: &str) -> axle_ir::Module {
    module(&format!(
        "HloModule c\nENTRY e {{\n  x = {ty}[{xd}] parameter(0)\n  w = {ty}[{wd}] parameter(1)\n  \
         ROOT c = {ty}[{od}] convolution(x, w), {attrs}\n}}\n"
    ))
}

/// Checks that `m` has one loop kernel, its result against the evaluator, and its PTX.
fn check(m: &axle_ir::Module, name: &str, tol: Tolerance) {
    let ks = plan_kernels(m).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(ks.len(), 1, "{name}: {ks:?}");
    assert_eq!(ks[0].kind, KernelKind::Loop, "{name}");
    matches_evaluator(m, tol);
    ptx_checked(m, name);
}

#[test]
fn strided_padded_convolutions_of_odd_sizes() {
    // NHWC, 3x3 windows, stride 2, asymmetric padding: 2 x 4 x 4 x 5 outputs.
    let m = conv(
        "f32",
        "2,7,6,3",
        "3,3,3,5",
        "2,4,4,5",
        "window={size=3x3 stride=2x2 pad=1_2x1_1}, dim_labels=b01f_01io->b01f",
    );
    check(&m, "nhwc_stride", Tolerance::Exact);
    // NCHW with a kernel in OIHW, a one-dimensional convolution, and negative padding.
    let m = conv(
        "f32",
        "1,4,9,5",
        "3,4,2,2",
        "1,3,8,3",
        "window={size=2x2 pad=0_0x-1_0}, dim_labels=bf01_oi01->bf01",
    );
    check(&m, "nchw_negative_pad", Tolerance::Exact);
    let m = conv(
        "f64",
        "3,11,2",
        "4,2,3",
        "3,4,3",
        "window={size=4 stride=3 pad=2_1}, dim_labels=b0f_0io->b0f",
    );
    check(&m, "conv1d_f64", Tolerance::Exact);
}

#[test]
fn dilated_and_reversed_windows() {
    // lhs (base) dilation as in a transposed convolution's gradient, rhs (window) dilation as
    // an atrous convolution, and a reversed window.
    let m = conv(
        "f32",
        "2,3,5,4",
        "3,3,3,3",
        "2,3,11,9",
        "window={size=3x3 pad=1_2x1_1 lhs_dilate=2x2}, dim_labels=bf01_io01->bf01",
    );
    check(&m, "lhs_dilate", Tolerance::Exact);
    let m = conv(
        "f32",
        "1,9,10,2",
        "2,3,2,3",
        "1,7,7,3",
        "window={size=2x3 pad=0_1x1_0 rhs_dilate=3x2}, dim_labels=b01f_01io->b01f",
    );
    check(&m, "rhs_dilate", Tolerance::Exact);
    let m = conv(
        "f32",
        "1,6,6,2",
        "3,3,2,2",
        "1,4,4,2",
        "window={size=3x3 rhs_reversal=1x1}, dim_labels=b01f_01io->b01f",
    );
    check(&m, "reversal", Tolerance::Exact);
}

#[test]
fn feature_and_batch_groups() {
    // Depthwise (one group per input feature, two outputs each), dilated.
    let m = conv(
        "f32",
        "2,6,10,10",
        "12,1,3,3",
        "2,12,10,10",
        "window={size=3x3 pad=2_2x2_2 rhs_dilate=2x2}, dim_labels=bf01_oi01->bf01, \
         feature_group_count=6",
    );
    check(&m, "depthwise", Tolerance::Exact);
    // Three feature groups of two input features.
    let m = conv(
        "f32",
        "1,5,5,6",
        "2,2,2,9",
        "1,4,4,9",
        "window={size=2x2}, dim_labels=b01f_01io->b01f, feature_group_count=3",
    );
    check(&m, "feature_groups", Tolerance::Exact);
    // Batch groups, as in a filter gradient: the input's batch of 4 splits in 2 groups.
    let m = conv(
        "f32",
        "4,3,6,6",
        "3,6,3,3",
        "2,6,4,4",
        "window={size=3x3}, dim_labels=bf01_io01->bf01, batch_group_count=2",
    );
    check(&m, "batch_groups", Tolerance::Exact);
}

#[test]
fn narrow_integer_and_complex_types() {
    for ty in ["bf16", "f16", "s32", "s8", "c64"] {
        let m = conv(
            ty,
            "1,5,4,3",
            "2,3,3,2",
            "1,3,2,2",
            "window={size=2x3 stride=2x1 pad=0_1x0_0}, dim_labels=b01f_01io->b01f",
        );
        check(&m, ty, Tolerance::Exact);
    }
}

#[test]
fn a_fused_convolution_with_an_elementwise_epilogue() {
    let m = module(
        r#"
HloModule f
fused {
  x = f32[2,7,7,3] parameter(0)
  w = f32[3,3,3,4] parameter(1)
  b = f32[4] parameter(2)
  c = f32[2,4,4,4] convolution(x, w), window={size=3x3 stride=2x2 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bb = f32[2,4,4,4] broadcast(b), dimensions={3}
  s = f32[2,4,4,4] add(c, bb)
  z = f32[] constant(0)
  zb = f32[2,4,4,4] broadcast(z), dimensions={}
  ROOT r = f32[2,4,4,4] maximum(s, zb)
}
ENTRY e {
  x = f32[2,7,7,3] parameter(0)
  w = f32[3,3,3,4] parameter(1)
  b = f32[4] parameter(2)
  ROOT f = f32[2,4,4,4] fusion(x, w, b), kind=kOutput, calls=fused
}
"#,
    );
    check(&m, "fused_relu", Tolerance::Exact);
}
