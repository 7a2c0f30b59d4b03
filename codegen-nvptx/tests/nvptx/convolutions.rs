//! The nvptx backend's convolutions on the host simulator against the evaluator: the tiled
//! implicit-GEMM kernel (`axle_codegen_nvptx::convolution`) on strides, padding (negative
//! too), lhs and rhs dilation, window reversal, feature and batch groups, 1x1 kernels, sizes
//! that are not multiples of the 16-wide tiles, layouts other than NHWC, narrow and integer
//! types, padding against infinite weights, and a fused elementwise epilogue; the
//! per-element path (the shared elemental form) where the tiled kernel leaves a convolution
//! to it (complex, one output feature per group); and their PTX assembled for `sm_80` and
//! `sm_90` where ptxas is present.
//!
//! Both paths accumulate in the evaluator's type with fused multiply-adds as one chain (kernel
//! positions, then input features), skip the padding as it does, and round once. The evaluator
//! sums a chain only up to 32 terms (longer sums are runs of 32 combined as a tree,
//! `axle_analysis::eval`), so results are compared exactly where every output sums at most 32
//! terms, and within the `f32` tolerance of two summation orders where they sum more
//! ([`tolerance`]).

use axle_codegen_nvptx::convolution::ConvGeometry;
use axle_codegen_nvptx::tiled_product::ProductShape;
use axle_codegen_nvptx::{plan_kernels, KernelKind};
use axle_ir::{conv_geo, Module, Opcode, Tolerance};

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

/// The terms the evaluator sums as one chain before it starts another run.
const EVAL_RUN: i64 = 32;

/// How the results of `m` must match the evaluator's: exactly where each convolution's output
/// element sums at most [`EVAL_RUN`] terms (its kernel positions times its input features per
/// group), else within `rtol` 1e-5 (the kernel's one chain against the evaluator's tree of
/// runs; 45 terms of values near 10 differ in the last bit or two).
fn tolerance(m: &Module) -> Tolerance {
    let longest = m
        .computations()
        .into_iter()
        .flat_map(|c| m.comp_insts(c))
        .filter(|&i| m.opcode(i) == Opcode::Convolution)
        .map(|i| {
            let g = conv_geo(m, i).unwrap_or_else(|e| panic!("{e}"));
            g.k_sp.iter().product::<i64>() * (g.c_in / g.fgc)
        })
        .max()
        .unwrap_or(0);
    if longest <= EVAL_RUN {
        Tolerance::Exact
    } else {
        Tolerance::Close {
            rtol: 1e-5,
            atol: 1e-6,
        }
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
    matches_evaluator(m, tolerance(m));
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
    // An infinite weight meets the padding only at the first output (padding before) or
    // only at the last one (padding after), where the evaluator skips the product; a zero
    // times infinity would make it NaN.
    for (weights, pad, out, at) in [
        ("{{{inf, 1}}, {{1, 2}}, {{1, -1}}}", "1_1", 5, 0),
        ("{{{1, 2}}, {{1, -1}}, {{inf, 1}}}", "0_1", 4, 6),
    ] {
        let m = module(&format!(
            "HloModule p\nENTRY e {{\n  x = f32[1,5,1] parameter(0)\n  \
             w = f32[3,1,2] constant({weights})\n  \
             ROOT c = f32[1,{out},2] convolution(x, w), window={{size=3 pad={pad}}}, \
             dim_labels=b0f_0io->b0f\n}}\n"
        ));
        assert!(tiled(&m, pad).masked, "{pad}");
        let args = common::inputs(&m);
        let want = axle_analysis::eval::evaluate(&m, &args).unwrap_or_else(|e| panic!("{e}"));
        let axle_ir::Literal::Array(want) = want else {
            panic!("an array result")
        };
        assert!(want.get_f64(at).is_finite(), "{want:?}");
        check(&m, pad, Tiled);
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
    // 32 output positions by 4 features: two row tiles; depth 27: two steps.
    let geo = tiled(&m, "fused_relu");
    assert_eq!(geo.launch_plan().map(|p| p.grid), Ok(2));
    matches_evaluator(&m, tolerance(&m));
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

/// Random convolutions checked.
const RANDOM_CASES: u64 = 16;

/// One spatial dimension of a random convolution's window.
struct Win {
    size: i64,
    stride: i64,
    pad: (i64, i64),
    lhs_dilate: i64,
    rhs_dilate: i64,
    reversal: i64,
}

/// A random convolution (seeded by `case`): one or two spatial dimensions, random dimension
/// orders, sizes, windows (stride, padding from -1 to 3, lhs and rhs dilation, reversal),
/// feature or batch groups of 2 to 19 output features, and a type.
fn random_conv(case: u64) -> String {
    let mut draws = 0;
    let mut pick = |lo: i64, hi: i64| -> i64 {
        draws += 1;
        let u = (axle_testkit::noise(case + 1000, draws) + 1.0) / 2.0;
        lo + ((u * (hi - lo + 1) as f64) as i64).min(hi - lo)
    };
    let nsp = pick(1, 2) as usize;
    let (fgc, bgc) = match pick(0, 3) {
        0 => (pick(2, 3), 1),
        1 => (1, 2),
        _ => (1, 1),
    };
    let (groups, per_in, per_out, n_out) = (fgc * bgc, pick(1, 5), pick(2, 19), pick(1, 3));
    let mut window = Vec::new();
    let (mut in_sp, mut k_sp, mut out_sp) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..nsp {
        loop {
            let (i, k, st) = (pick(1, 8), pick(1, 3), pick(1, 3));
            let (ld, rd, lo, hi) = (pick(1, 2), pick(1, 2), pick(-1, 3), pick(-1, 3));
            let span = (i - 1) * ld + 1 + lo + hi - ((k - 1) * rd + 1);
            if span >= 0 {
                in_sp.push(i);
                k_sp.push(k);
                out_sp.push(span / st + 1);
                window.push(Win {
                    size: k,
                    stride: st,
                    pad: (lo, hi),
                    lhs_dilate: ld,
                    rhs_dilate: rd,
                    reversal: pick(0, 1),
                });
                break;
            }
        }
    }
    // Dimension orders: a random rotation of the batch/feature and spatial labels.
    let labels = |first: [char; 2], rot: i64| -> Vec<char> {
        let mut v: Vec<char> = first.to_vec();
        v.extend((0..nsp).map(|d| char::from(b'0' + d as u8)));
        let n = v.len();
        v.rotate_left(rot as usize % n);
        v
    };
    let (xl, wl, ol) = (
        labels(['b', 'f'], pick(0, 3)),
        labels(['o', 'i'], pick(0, 3)),
        labels(['b', 'f'], pick(0, 3)),
    );
    let dims = |ls: &[char], size: &dyn Fn(char) -> i64| -> String {
        let v: Vec<String> = ls.iter().map(|&c| size(c).to_string()).collect();
        v.join(",")
    };
    let sp = |v: &[i64], c: char| v[(c as u8 - b'0') as usize];
    let xd = dims(&xl, &|c| match c {
        'b' => n_out * bgc,
        'f' => per_in * fgc,
        c => sp(&in_sp, c),
    });
    let wd = dims(&wl, &|c| match c {
        'o' => per_out * groups,
        'i' => per_in,
        c => sp(&k_sp, c),
    });
    let od = dims(&ol, &|c| match c {
        'b' => n_out,
        'f' => per_out * groups,
        c => sp(&out_sp, c),
    });
    let join = |f: &dyn Fn(&Win) -> String| -> String {
        let v: Vec<String> = window.iter().map(f).collect();
        v.join("x")
    };
    let win = format!(
        "size={} stride={} pad={} lhs_dilate={} rhs_dilate={} rhs_reversal={}",
        join(&|w| w.size.to_string()),
        join(&|w| w.stride.to_string()),
        join(&|w| format!("{}_{}", w.pad.0, w.pad.1)),
        join(&|w| w.lhs_dilate.to_string()),
        join(&|w| w.rhs_dilate.to_string()),
        join(&|w| w.reversal.to_string()),
    );
    let ty = ["f32", "f32", "f32", "f64", "f16", "bf16", "s32"][pick(0, 6) as usize];
    let s = |v: &[char]| v.iter().collect::<String>();
    format!(
        "HloModule r\nENTRY e {{\n  x = {ty}[{xd}] parameter(0)\n  w = {ty}[{wd}] parameter(1)\n  \
         ROOT c = {ty}[{od}] convolution(x, w), window={{{win}}}, dim_labels={}_{}->{}, \
         feature_group_count={fgc}, batch_group_count={bgc}\n}}\n",
        s(&xl),
        s(&wl),
        s(&ol)
    )
}

#[test]
fn random_convolutions_match_the_evaluator() {
    for case in 0..RANDOM_CASES {
        let text = random_conv(case);
        let m = module(&text);
        tiled(&m, &text);
        matches_evaluator(&m, tolerance(&m));
    }
}
