//! The nvptx backend's convolutions on the host simulator against the evaluator: the tiled
//! implicit-GEMM kernel (`axle_codegen_nvptx::convolution`) on strides, padding (negative
//! too), lhs and rhs dilation, window reversal, feature and batch groups, 1x1 kernels, sizes
//! that are not multiples of the 16-wide tiles, layouts other than NHWC, narrow and integer
//! types, padding against infinite weights, and a fused elementwise epilogue; the
//! per-element path (the shared elemental form) where the tiled kernel leaves a convolution
//! to it (complex, one output feature per group); and their PTX assembled for `sm_80` and
//! `sm_90` where ptxas is present.
//!
//! Results are compared exactly: both paths accumulate in the evaluator's type and order
//! (kernel positions, then input features, with fused multiply-adds), skip the padding as it
//! does, and round once, so the bits agree.

use axle_codegen_nvptx::convolution::ConvGeometry;
use axle_codegen_nvptx::tiled_product::ProductShape;
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

/// How a convolution is to be computed.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Path {
    /// The tiled implicit-GEMM kernel.
    Tiled,
    /// A loop kernel, one output element per thread.
    PerElement,
}
use Path::*;

/// The geometry of `m`'s one kernel, a tiled convolution.
fn tiled(m: &axle_ir::Module, name: &str) -> ConvGeometry {
    let ks = plan_kernels(m).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert_eq!(ks.len(), 1, "{name}: {ks:?}");
    match &ks[0].kind {
        KernelKind::Convolution(geo) => geo.clone(),
        k => panic!("{name}: not tiled: {k:?}"),
    }
}

/// Checks that `m` has one kernel on `path`, its result against the evaluator, and its PTX.
fn check(m: &axle_ir::Module, name: &str, path: Path) {
    if path == Tiled {
        tiled(m, name);
    } else {
        let ks = plan_kernels(m).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(ks.len(), 1, "{name}: {ks:?}");
        assert_eq!(ks[0].kind, KernelKind::Loop, "{name}");
    }
    matches_evaluator(m, Tolerance::Exact);
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
    check(&m, "nhwc_stride", Tiled);
    // NCHW with a kernel in OIHW, a one-dimensional convolution, and negative padding.
    let m = conv(
        "f32",
        "1,4,9,5",
        "3,4,2,2",
        "1,3,8,3",
        "window={size=2x2 pad=0_0x-1_0}, dim_labels=bf01_oi01->bf01",
    );
    check(&m, "nchw_negative_pad", Tiled);
    let m = conv(
        "f64",
        "3,11,2",
        "4,2,3",
        "3,4,3",
        "window={size=4 stride=3 pad=2_1}, dim_labels=b0f_0io->b0f",
    );
    check(&m, "conv1d_f64", Tiled);
    // 162 output positions, 20 features, depth 45: partial tiles on every side, three steps.
    let m = conv(
        "f32",
        "2,9,9,5",
        "3,3,5,20",
        "2,9,9,20",
        "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
    );
    check(&m, "partial_tiles", Tiled);
    // The channel-first layout of convolution gradients.
    let m = conv(
        "f32",
        "3,6,5,2",
        "3,2,2,4",
        "5,4,2,4",
        "window={size=2x2}, dim_labels=f01b_i01o->01bf",
    );
    check(&m, "f01b_layout", Tiled);
}

#[test]
fn one_by_one_kernels_are_matrix_products() {
    // A 1x1 convolution over 19 input features: depth 19, never outside the input, so no mask.
    let m = conv(
        "f32",
        "2,5,7,19",
        "1,1,19,17",
        "2,5,7,17",
        "window={size=1x1}, dim_labels=b01f_01io->b01f",
    );
    let geo = tiled(&m, "1x1");
    let shape = ProductShape {
        batch: 1,
        rows: 70,
        cols: 17,
        depth: 19,
    };
    // 5 row tiles by 2 column tiles of 16 x 16 threads.
    let plan = geo.launch_plan().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((plan.grid, plan.block), (10, 256));
    assert_eq!((geo.product, geo.masked), (shape, false));
    check(&m, "1x1", Tiled);
    // Strided 1x1 (a projection shortcut), in NCHW.
    let m = conv(
        "f32",
        "2,6,7,7",
        "8,6,1,1",
        "2,8,4,4",
        "window={size=1x1 stride=2x2}, dim_labels=bf01_oi01->bf01",
    );
    check(&m, "1x1_stride", Tiled);
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
    check(&m, "lhs_dilate", Tiled);
    let m = conv(
        "f32",
        "1,9,10,2",
        "2,3,2,3",
        "1,7,7,3",
        "window={size=2x3 pad=0_1x1_0 rhs_dilate=3x2}, dim_labels=b01f_01io->b01f",
    );
    check(&m, "rhs_dilate", Tiled);
    let m = conv(
        "f32",
        "1,6,6,2",
        "3,3,2,2",
        "1,4,4,2",
        "window={size=3x3 rhs_reversal=1x1}, dim_labels=b01f_01io->b01f",
    );
    check(&m, "reversal", Tiled);
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
    check(&m, "depthwise", Tiled);
    // Three feature groups of two input features.
    let m = conv(
        "f32",
        "1,5,5,6",
        "2,2,2,9",
        "1,4,4,9",
        "window={size=2x2}, dim_labels=b01f_01io->b01f, feature_group_count=3",
    );
    check(&m, "feature_groups", Tiled);
    // Batch groups, as in a filter gradient: the input's batch of 4 splits in 2 groups.
    let m = conv(
        "f32",
        "4,3,6,6",
        "3,6,3,3",
        "2,6,4,4",
        "window={size=3x3}, dim_labels=bf01_io01->bf01, batch_group_count=2",
    );
    check(&m, "batch_groups", Tiled);
    // Two feature groups of 18 output features each: column tiles cross no group boundary.
    let m = conv(
        "f32",
        "1,4,5,6",
        "2,2,3,36",
        "1,3,4,36",
        "window={size=2x2}, dim_labels=b01f_01io->b01f, feature_group_count=2",
    );
    assert_eq!(tiled(&m, "wide_groups").product.batch, 2);
    check(&m, "wide_groups", Tiled);
    // One output feature per group (depthwise): left to the per-element path.
    let m = conv(
        "f32",
        "1,5,5,4",
        "3,3,1,4",
        "1,5,5,4",
        "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f, feature_group_count=4",
    );
    check(&m, "depthwise_1", PerElement);
}

#[test]
fn narrow_integer_and_complex_types() {
    for ty in ["bf16", "f16", "s32", "s8", "u8", "f64", "c64"] {
        let m = conv(
            ty,
            "1,5,4,3",
            "2,3,3,2",
            "1,3,2,2",
            "window={size=2x3 stride=2x1 pad=0_1x0_0}, dim_labels=b01f_01io->b01f",
        );
        let path = if ty == "c64" { PerElement } else { Tiled };
        check(&m, ty, path);
    }
}

#[test]
fn padding_skips_infinite_weights() {
    // The first weight is infinite: output 0's window starts in the padding, where the
    // evaluator skips the product; a zero times infinity would make it NaN.
    let m = module(
        "HloModule p\nENTRY e {\n  x = f32[1,5,1] parameter(0)\n  \
         w = f32[3,1,2] constant({{{inf, 1}}, {{1, 2}}, {{1, -1}}})\n  \
         ROOT c = f32[1,5,2] convolution(x, w), window={size=3 pad=1_1}, dim_labels=b0f_0io->b0f\n}\n",
    );
    assert!(tiled(&m, "inf_weights").masked);
    let args = common::inputs(&m);
    let want = axle_analysis::eval::evaluate(&m, &args).unwrap_or_else(|e| panic!("{e}"));
    let axle_ir::Literal::Array(want) = want else {
        panic!("an array result")
    };
    assert!(want.get_f64(0).is_finite(), "{want:?}");
    check(&m, "inf_weights", Tiled);
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
    // 32 output positions by 4 features: two row tiles; depth 27: two steps.
    let geo = tiled(&m, "fused_relu");
    assert_eq!(geo.launch_plan().map(|p| p.grid), Ok(2));
    matches_evaluator(&m, Tolerance::Exact);
    for p in ptx_checked(&m, "fused_relu") {
        // The input, kernel and padding-mask tiles in shared memory, barriers between steps.
        assert_eq!(p.matches(".shared .align 16 .b8").count(), 3, "{p}");
        assert!(p.contains("bar.sync"), "{p}");
        // The epilogue (bias and ReLU) is in the kernel.
        assert!(p.contains("setp.ge.f32") && p.contains("selp.f32"), "{p}");
    }
}

#[test]
fn fused_producers_are_computed_where_the_tiles_load_them() {
    // The input is converted from f16 and the kernel transposed inside the fusion; the
    // tiled kernel computes both where it loads them.
    let m = module(
        r#"
HloModule p
fused {
  xh = f16[2,6,5,4] parameter(0)
  wt = f32[18,4,2,3] parameter(1)
  x = f32[2,6,5,4] convert(xh)
  w = f32[2,3,4,18] transpose(wt), dimensions={2,3,1,0}
  ROOT c = f32[2,5,3,18] convolution(x, w), window={size=2x3 stride=1x2 pad=0_0x1_1}, dim_labels=b01f_01io->b01f
}
ENTRY e {
  xh = f16[2,6,5,4] parameter(0)
  wt = f32[18,4,2,3] parameter(1)
  ROOT f = f32[2,5,3,18] fusion(xh, wt), kind=kOutput, calls=fused
}
"#,
    );
    check(&m, "fused_producers", Tiled);
}
