//! The `cpu` backend's GEMM (`codegen-cpu/src/gemm.rs`) against the reference evaluator: odd
//! sizes around the register tile and the blocking (1, 3, 17, 255, 1023), transposed and
//! batched operands (batch dimensions first and in the middle; attention's `P @ V`, whose few
//! columns make the tile read the left operand unpacked), every float type it takes
//! (`f32`, `f64`, `bf16`, `f16`, narrow operands with a wide result and the reverse), with
//! fresh result buffers and with reused ones that hold NaN garbage, at one and two threads;
//! and operands read through views inside an output fusion (transposed, permuted batch
//! dimensions, sliced and strided, broadcast, reshaped, chains of them: the GEMM reads the
//! parameter's buffer through the views' strides) in every float type, at one and eight threads;
//! and the dots of training as JAX emits them (several free or contracting dimensions per side,
//! contracting dimensions apart or out of order), through the `cpu` pipeline, whose
//! `dot-canonicalize` brings them to the GEMM's form.
//!
//! Inputs are multiples of 1/8 in [-2, 2], so every product and partial sum is exact in the
//! accumulation type: any summation order gives the evaluator's value, and the results must
//! match exactly (narrow results are rounded once from the same exact sum). Each check runs
//! dots without an epilogue on the runtime's precompiled GEMM and on a generated one.

use axle::analysis::eval::evaluate;
use axle::backend::{prepare_module, CompileOptions};
use axle::ir::literal::f64_to_element;
use axle::ir::{compare_arrays, parse_module, ArrayLiteral, ArrayShape, Literal, Shape, Tolerance};
use axle_codegen_cpu::{compile, CpuOptions, HostBuffer};

/// A deterministic array of multiples of 1/8 in [-2, 2].
fn eighths(a: &ArrayShape, seed: u64) -> ArrayLiteral {
    let n = a.num_elements().max(0) as u64;
    let mut data = Vec::with_capacity(n as usize * a.ty.byte_size());
    for i in 0..n {
        let h = (i ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15))
            .wrapping_mul(0xbf58_476d_1ce4_e5b9)
            .rotate_left(29)
            .wrapping_mul(0x94d0_49bb_1331_11eb);
        let v = ((h >> 40) % 33) as f64 / 8.0 - 2.0;
        data.extend(f64_to_element(a.ty, v));
    }
    ArrayLiteral {
        shape: a.clone(),
        data,
    }
}

/// `ROOT dot(a, b)` with the given shapes and dimension numbers, checked against the
/// evaluator with fresh and reused (NaN-filled) outputs at one and two threads.
fn check(lhs: &str, rhs: &str, out: &str, dims: &str) {
    let text = format!(
        "HloModule gemm\n\nENTRY main {{\n  a = {lhs} parameter(0)\n  b = {rhs} parameter(1)\n  ROOT d = {out} dot(a, b), {dims}\n}}\n"
    );
    check_module(&text, &[1, 2]);
}

/// Module `text` (one array result) compiled as given, checked against the evaluator with
/// fresh and reused (NaN-filled) outputs at each of `threads`, with the same bits at each.
fn check_module(text: &str, threads: &[usize]) {
    check_compiled(text, None, threads);
}

/// [`check_module`], with the standard pipeline `pipeline` run before compiling when given.
fn check_compiled(text: &str, pipeline: Option<&str>, threads: &[usize]) {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{text}\n{e}"));
    let compiled = match pipeline {
        None => m.clone(),
        Some(p) => {
            let opts = CompileOptions {
                pipeline: Some(p.into()),
                ..Default::default()
            };
            prepare_module("cpu", m.clone(), &opts).unwrap_or_else(|e| panic!("{text}\n{e}"))
        }
    };
    let args: Vec<Literal> = m
        .params(m.entry())
        .iter()
        .enumerate()
        .map(|(k, &p)| match m.shape(p) {
            Shape::Array(a) => Literal::Array(eighths(a, k as u64 + 1)),
            _ => panic!("array parameters"),
        })
        .collect();
    let expected = match evaluate(&m, &args).unwrap_or_else(|e| panic!("{text}\n{e}")) {
        Literal::Array(a) => a,
        Literal::Tuple(_) => panic!("array result"),
    };
    let inputs = axle_testkit::array_bytes(&args);
    // Dots without an epilogue on the runtime's precompiled GEMM and on a generated one.
    for gemm_library in [true, false] {
        check_threads(text, &compiled, &inputs, &expected, threads, gemm_library);
    }
}

/// Runs `compiled` at each of `threads` with fresh and reused (NaN-filled) outputs, and checks
/// each result against `expected` and the same bits at each thread count.
fn check_threads(
    text: &str,
    compiled: &axle::ir::Module,
    inputs: &[&[u8]],
    expected: &ArrayLiteral,
    threads: &[usize],
    gemm_library: bool,
) {
    let mut first: Option<Vec<u8>> = None;
    for &threads in threads {
        let exe = compile(
            compiled,
            &CpuOptions {
                threads,
                gemm_library,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{text}\n{e}"));
        let fresh = {
            let mut outs = exe.alloc_outputs();
            exe.execute(inputs, &mut outs).expect("runs");
            outs.remove(0).bytes().to_vec()
        };
        let reused = {
            let len = exe.alloc_outputs()[0].len();
            let mut outs = vec![HostBuffer::from_bytes(&vec![0xff; len])];
            exe.execute(inputs, &mut outs).expect("runs");
            exe.execute(inputs, &mut outs).expect("runs");
            outs.remove(0).bytes().to_vec()
        };
        for (policy, bytes) in [("fresh", &fresh), ("reused", &reused)] {
            let got = ArrayLiteral {
                shape: expected.shape.clone(),
                data: bytes.clone(),
            };
            if let Err(e) = compare_arrays(expected, &got, Tolerance::Exact) {
                panic!(
                    "{text}\n{threads} thread(s), {policy} outputs, library GEMM \
                     {gemm_library}: {e}"
                );
            }
        }
        // The same bits at any thread count.
        match &first {
            None => first = Some(fresh),
            Some(f) => assert!(f == &fresh, "{text}\nresults differ between thread counts"),
        }
    }
}

/// `[m, k] x [k, n]` in `ty`, with either operand transposed in memory.
fn plain(ty: &str, m: i64, k: i64, n: i64, ta: bool, tb: bool) {
    let (lhs, lc) = if ta {
        (format!("{ty}[{k},{m}]"), 0)
    } else {
        (format!("{ty}[{m},{k}]"), 1)
    };
    let (rhs, rc) = if tb {
        (format!("{ty}[{n},{k}]"), 1)
    } else {
        (format!("{ty}[{k},{n}]"), 0)
    };
    check(
        &lhs,
        &rhs,
        &format!("{ty}[{m},{n}]"),
        &format!("lhs_contracting_dims={{{lc}}}, rhs_contracting_dims={{{rc}}}"),
    );
}

const SIZES: &[(i64, i64, i64)] = &[
    (1, 1, 1),
    (3, 17, 255),
    (17, 255, 3),
    (255, 3, 17),
    (1023, 17, 3),
    (3, 1023, 17),
    (17, 3, 1023),
    (255, 255, 17),
    (17, 1023, 255),
];

#[test]
fn odd_sizes_f32() {
    for &(m, k, n) in SIZES {
        plain("f32", m, k, n, false, false);
    }
}

/// Products whose packing of `A` overlaps the multiply-adds (`A` row-major, of the
/// accumulation type, and more column strips than the direct path takes): more rows than one
/// block of `A` (at one thread, with L2 up to 2 MiB), two `K` blocks and a partial last
/// column strip, with either operand transposed (a transposed `A` is packed first), and `f64`.
#[test]
fn packing_overlapped_with_the_tiles() {
    plain("f32", 1100, 300, 140, false, false);
    plain("f32", 1100, 300, 140, false, true);
    plain("f32", 1100, 300, 140, true, false);
    plain("f64", 600, 300, 70, false, false);
}

#[test]
fn transposed_operands_f32() {
    for &(m, k, n) in &[(3, 17, 255), (255, 17, 3), (17, 255, 33), (64, 300, 40)] {
        plain("f32", m, k, n, true, false);
        plain("f32", m, k, n, false, true);
        plain("f32", m, k, n, true, true);
    }
}

#[test]
fn every_float_type() {
    for ty in ["f64", "bf16", "f16"] {
        for &(m, k, n) in &[(1, 1, 1), (3, 17, 255), (255, 3, 17), (17, 255, 33)] {
            plain(ty, m, k, n, false, false);
            plain(ty, m, k, n, true, true);
        }
    }
    // Narrow operands with a wide result, and a wide accumulation rounded to a narrow one.
    for (a, b, out) in [
        ("bf16", "bf16", "f32"),
        ("f16", "f16", "f32"),
        ("f32", "f32", "f64"),
        ("f32", "f32", "bf16"),
    ] {
        for &(m, k, n) in &[(3, 17, 255), (33, 300, 17)] {
            check(
                &format!("{a}[{m},{k}]"),
                &format!("{b}[{k},{n}]"),
                &format!("{out}[{m},{n}]"),
                "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
            );
        }
    }
}

#[test]
fn batched_operands() {
    // Batch first, as attention heads come.
    check(
        "f32[8,17,64]",
        "f32[8,255,64]",
        "f32[8,17,255]",
        "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}",
    );
    // Attention's `P @ V`: few columns, so the tile reads `A` where it lies (`direct_a`), over
    // more rows than one block and a contraction longer than one `K` block.
    check(
        "f32[3,1023,600]",
        "f32[3,600,64]",
        "f32[3,1023,64]",
        "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
    );
    // Batch dimensions in the middle and two of them, f64.
    check(
        "f64[17,2,3,5]",
        "f64[5,2,3,33]",
        "f64[2,3,17,33]",
        "lhs_batch_dims={1,2}, lhs_contracting_dims={3}, rhs_batch_dims={1,2}, rhs_contracting_dims={0}",
    );
    check(
        "bf16[4,255,3]",
        "bf16[4,3,17]",
        "bf16[4,255,17]",
        "lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
    );
}

/// Matrix-vector and vector-vector products (no free dimension on one side).
#[test]
fn vectors() {
    check(
        "f32[255,1023]",
        "f32[1023]",
        "f32[255]",
        "lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    );
    check(
        "f32[17]",
        "f32[17,3]",
        "f32[3]",
        "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
    );
    check(
        "f64[1023]",
        "f64[1023]",
        "f64[]",
        "lhs_contracting_dims={0}, rhs_contracting_dims={0}",
    );
}

/// An output fusion of parameters `a` and `b` (shapes `pa`, `pb`) whose body `body` (lines
/// over `p0`, `p1`, ending in `ROOT d = OUT dot(...)`) reads them through views, so the GEMM
/// reads the parameters' buffers through the views' strides; checked as [`check_module`] at
/// one and eight threads.
fn check_views(pa: &str, pb: &str, out: &str, body: &str) {
    let text = format!(
        "HloModule gemm_views\n\nfc {{\n  p0 = {pa} parameter(0)\n  p1 = {pb} parameter(1)\n{body}\n}}\n\nENTRY main {{\n  a = {pa} parameter(0)\n  b = {pb} parameter(1)\n  ROOT f = {out} fusion(a, b), kind=kOutput, calls=fc\n}}\n"
    );
    check_module(&text, &[1, 8]);
}

const VIEW_SIZES: &[(i64, i64, i64)] = &[(1, 1, 1), (3, 17, 255), (17, 255, 3), (255, 3, 17)];

/// Both operands transposed by a `transpose` inside the fusion (the GEMM reads the other
/// order of the parameter), in every float type.
#[test]
fn transpose_views() {
    for ty in ["f32", "f64", "bf16", "f16"] {
        for &(m, k, n) in VIEW_SIZES {
            check_views(
                &format!("{ty}[{k},{m}]"),
                &format!("{ty}[{n},{k}]"),
                &format!("{ty}[{m},{n}]"),
                &format!(
                    "  ta = {ty}[{m},{k}] transpose(p0), dimensions={{1,0}}\n  tb = {ty}[{k},{n}] transpose(p1), dimensions={{1,0}}\n  ROOT d = {ty}[{m},{n}] dot(ta, tb), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
                ),
            );
        }
    }
}

/// Batch dimensions permuted by a transpose: the batch strides come from the parameter.
#[test]
fn permuted_batch_views() {
    for ty in ["f32", "f64"] {
        check_views(
            &format!("{ty}[3,17,2,5]"),
            &format!("{ty}[5,33,3,2]"),
            &format!("{ty}[2,3,17,33]"),
            &format!(
                "  ta = {ty}[2,3,17,5] transpose(p0), dimensions={{2,0,1,3}}\n  tb = {ty}[2,3,5,33] transpose(p1), dimensions={{3,2,0,1}}\n  ROOT d = {ty}[2,3,17,33] dot(ta, tb), lhs_batch_dims={{0,1}}, lhs_contracting_dims={{3}}, rhs_batch_dims={{0,1}}, rhs_contracting_dims={{2}}"
            ),
        );
    }
}

/// Slices (an offset), strided slices (larger strides) and a slice of a transpose.
#[test]
fn slice_views() {
    for ty in ["f32", "bf16", "f16", "f64"] {
        for &(m, k, n) in VIEW_SIZES {
            let (m2, k2, n2) = (2 * m + 3, 2 * k + 1, n + 5);
            check_views(
                &format!("{ty}[{m2},{k2}]"),
                &format!("{ty}[{n2},{k2}]"),
                &format!("{ty}[{m},{n}]"),
                &format!(
                    "  sa = {ty}[{m},{k}] slice(p0), slice={{[3:{m2}:2], [1:{k2}:2]}}\n  tb = {ty}[{k2},{n2}] transpose(p1), dimensions={{1,0}}\n  sb = {ty}[{k},{n}] slice(tb), slice={{[0:{k}], [5:{n2}]}}\n  ROOT d = {ty}[{m},{n}] dot(sa, sb), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
                ),
            );
        }
    }
}

/// Broadcasts (stride 0): rows of `A` repeated, a scalar broadcast to all of `B`, and a
/// broadcast along the batch dimension.
#[test]
fn broadcast_views() {
    for ty in ["f32", "f64", "bf16", "f16"] {
        for &(m, k, n) in VIEW_SIZES {
            check_views(
                &format!("{ty}[{k}]"),
                &format!("{ty}[]"),
                &format!("{ty}[{m},{n}]"),
                &format!(
                    "  ba = {ty}[{m},{k}] broadcast(p0), dimensions={{1}}\n  bb = {ty}[{k},{n}] broadcast(p1), dimensions={{}}\n  ROOT d = {ty}[{m},{n}] dot(ba, bb), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}"
                ),
            );
        }
    }
    check_views(
        "f32[17,255]",
        "f32[3,255,33]",
        "f32[3,17,33]",
        "  ba = f32[3,17,255] broadcast(p0), dimensions={1,2}\n  ROOT d = f32[3,17,33] dot(ba, p1), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
    );
}

/// Attention's heads: a slice of the fused `q|k|v` projection, reshaped into heads and
/// transposed so heads are the batch, on both sides (the transformer block's `Q @ K^T`);
/// and a reshape that merges dimensions whose strides do not line up (a transposed pair),
/// which the planner materializes instead.
#[test]
fn reshape_views() {
    for ty in ["f32", "f64", "bf16", "f16"] {
        for &(s, h, d) in &[(1, 1, 1), (17, 3, 5), (255, 2, 17)] {
            let w = 3 * h * d;
            let hd = h * d;
            check_views(
                &format!("{ty}[{s},{w}]"),
                &format!("{ty}[{s},{w}]"),
                &format!("{ty}[{h},{s},{s}]"),
                &format!(
                    "  sq = {ty}[{s},{hd}] slice(p0), slice={{[0:{s}], [0:{hd}]}}\n  rq = {ty}[{s},{h},{d}] reshape(sq)\n  q = {ty}[{h},{s},{d}] transpose(rq), dimensions={{1,0,2}}\n  sk = {ty}[{s},{hd}] slice(p1), slice={{[0:{s}], [{hd}:{}]}}\n  rk = {ty}[{s},{h},{d}] reshape(sk)\n  k = {ty}[{h},{s},{d}] transpose(rk), dimensions={{1,0,2}}\n  ROOT d = {ty}[{h},{s},{s}] dot(q, k), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{2}}",
                    2 * hd
                ),
            );
        }
    }
    check_views(
        "f32[4,3,17]",
        "f32[17,255]",
        "f32[12,255]",
        "  t = f32[3,4,17] transpose(p0), dimensions={1,0,2}\n  r = f32[12,17] reshape(t)\n  ROOT d = f32[12,255] dot(r, p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    );
    // A reshape splitting and merging contiguous dimensions, with size-1 dimensions.
    check_views(
        "f32[3,1,85,1]",
        "f32[255,1,17]",
        "f32[1,17]",
        "  r = f32[1,255] reshape(p0)\n  rb = f32[255,17] reshape(p1)\n  ROOT d = f32[1,17] dot(r, rb), lhs_contracting_dims={1}, rhs_contracting_dims={0}",
    );
}

/// `ROOT dot(a, b)` through the `cpu` pipeline (which merges free and contracting dimensions,
/// `dot-canonicalize`), against the evaluator on the module as written.
fn check_pipeline(lhs: &str, rhs: &str, out: &str, dims: &str) {
    let text = format!(
        "HloModule gemm\n\nENTRY main {{\n  a = {lhs} parameter(0)\n  b = {rhs} parameter(1)\n  ROOT d = {out} dot(a, b), {dims}\n}}\n"
    );
    check_compiled(&text, Some("cpu"), &[1, 2]);
}

#[test]
fn training_dots_through_the_pipeline() {
    // A dense layer on a rank-3 activation (GPT-2's projections).
    check_pipeline(
        "f32[2,17,33]",
        "f32[33,40]",
        "f32[2,17,40]",
        "lhs_contracting_dims={2}, rhs_contracting_dims={0}",
    );
    // The tied vocabulary projection: the weight transposed.
    check_pipeline(
        "f32[1,17,33]",
        "f32[255,33]",
        "f32[1,17,255]",
        "lhs_contracting_dims={2}, rhs_contracting_dims={1}",
    );
    // A weight gradient: the batch and sequence dimensions both contracted.
    check_pipeline(
        "f32[3,17,33]",
        "f32[3,17,40]",
        "f32[33,40]",
        "lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}",
    );
    // Contracting dimensions apart on the left and out of order on the right (transposes).
    check_pipeline(
        "f32[5,17,3]",
        "f32[3,40,5]",
        "f32[17,40]",
        "lhs_contracting_dims={0,2}, rhs_contracting_dims={2,0}",
    );
    // Several free dimensions on both sides, with a batch dimension.
    check_pipeline(
        "f64[2,3,5,7]",
        "f64[2,7,4,6]",
        "f64[2,3,5,4,6]",
        "lhs_batch_dims={0}, lhs_contracting_dims={3}, rhs_batch_dims={0}, rhs_contracting_dims={1}",
    );
    // bf16 operands with an f32 result, and an f16 weight gradient.
    check_pipeline(
        "bf16[4,9,33]",
        "bf16[33,17]",
        "f32[4,9,17]",
        "lhs_contracting_dims={2}, rhs_contracting_dims={0}",
    );
    check_pipeline(
        "f16[2,9,17]",
        "f16[2,9,5]",
        "f16[17,5]",
        "lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}",
    );
}
