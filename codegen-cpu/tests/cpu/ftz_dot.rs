//! In flush-to-zero mode the subnormal partial sums of a dot or a convolution read as zero in
//! the next term, on the cpu backend (x86's FTZ and DAZ modes) and in the evaluator (explicit
//! flushing) alike.

use axle_analysis::{evaluate_with, EvalOptions};
use axle_codegen_cpu::{compile, CpuOptions};
use axle_ir::{parse_module, ArrayLiteral, Literal};

/// `[m, k] x [k, n]` on both sides with flushing on (the cpu backend's dots generated, so
/// summed in the evaluator's order); the results' bits.
fn both(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> (Vec<u32>, Vec<u32>) {
    both_with(m, k, n, a, b, false)
}

/// [`both`], with dots on the precompiled GEMM when `gemm_library`.
fn both_with(
    m: usize,
    k: usize,
    n: usize,
    a: &[f32],
    b: &[f32],
    gemm_library: bool,
) -> (Vec<u32>, Vec<u32>) {
    let text = format!(
        "HloModule m\nENTRY main {{\n  a = f32[{m},{k}] parameter(0)\n  b = f32[{k},{n}] parameter(1)\n  \
         ROOT d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
    );
    let args = [
        Literal::Array(ArrayLiteral::from_slice(&[m as i64, k as i64], a)),
        Literal::Array(ArrayLiteral::from_slice(&[k as i64, n as i64], b)),
    ];
    run(&text, &args, gemm_library)
}

/// Runs `text` on `args` on the cpu backend and in the evaluator, flushing on; the bits of the
/// (single, `f32`) results.
fn run(text: &str, args: &[Literal], gemm_library: bool) -> (Vec<u32>, Vec<u32>) {
    let module = parse_module(text).expect("parses");
    let opts = CpuOptions {
        flush_denormals: true,
        gemm_library,
        ..Default::default()
    };
    let cpu = compile(&module, &opts)
        .expect("compiles")
        .run_literals(args)
        .expect("runs");
    let ev = evaluate_with(
        &module,
        args,
        &EvalOptions {
            flush_denormals: true,
        },
    )
    .expect("evaluates");
    let bits = |l: &ArrayLiteral| -> Vec<u32> {
        l.to_vec::<f32>()
            .expect("f32")
            .iter()
            .map(|x| x.to_bits())
            .collect()
    };
    (bits(&cpu[0]), bits(ev.as_array().expect("an array")))
}

#[test]
fn subnormal_partial_sums_flush_on_both_sides() {
    // Each product 2^-63 * 2^-64 = 2^-127 is subnormal: flushed, the sum stays zero (IEEE
    // would give 2^-126 for two terms).
    let (a, b) = (2f32.powi(-63), 2f32.powi(-64));
    let (cpu, ev) = both(1, 2, 1, &[a, a], &[b, b]);
    assert_eq!(cpu, vec![0]);
    assert_eq!(ev, cpu);
    // Zeros made of flushed terms: a negative one, and cancelling pairs.
    let (cpu, ev) = both(1, 1, 1, &[-a], &[b]);
    assert_eq!(ev, cpu, "one negative term");
    let (cpu, ev) = both(1, 2, 1, &[a, -a], &[b, b]);
    assert_eq!(ev, cpu, "a cancelling pair");
    let (cpu, ev) = both(1, 2, 1, &[-a, a], &[b, b]);
    assert_eq!(ev, cpu, "a cancelling pair");
    // Large enough for the blocked GEMM: products near the subnormal range, of both signs.
    let (m, k, n) = (32, 96, 48);
    let av: Vec<f32> = (0..m * k)
        .map(|i| a * (1.0 + (i % 7) as f32 / 8.0) * if i % 3 == 0 { -1.0 } else { 1.0 })
        .collect();
    let bv: Vec<f32> = (0..k * n)
        .map(|i| b * (1.0 + (i % 5) as f32 / 4.0))
        .collect();
    let (cpu, ev) = both(m, k, n, &av, &bv);
    assert_eq!(ev, cpu);
    assert!(
        cpu.iter().any(|&x| x != 0),
        "some sums reach the normal range"
    );
    // The precompiled GEMM sums in its own order, flushing too: no subnormal result, and
    // sums in the normal range.
    let (lib, _) = both_with(m, k, n, &av, &bv, true);
    let subnormal = |x: u32| x & 0x7f80_0000 == 0 && x & 0x007f_ffff != 0;
    assert!(!lib.iter().any(|&x| subnormal(x)), "a subnormal result");
    assert!(
        lib.iter().any(|&x| x != 0),
        "some sums reach the normal range"
    );
}

#[test]
fn a_convolution_flushes_its_partial_sums_on_both_sides() {
    // Two terms of +-2^-63 * 2^-64 = +-2^-127 per output: each flushed, so every output is a zero
    // (IEEE would give 2^-126 for the last).
    let (a, b) = (2f32.powi(-63), 2f32.powi(-64));
    let text = "HloModule m\nENTRY main {\n  x = f32[1,4,1] parameter(0)\n  k = f32[2,1,1] parameter(1)\n  \
                ROOT r = f32[1,3,1] convolution(x, k), window={size=2}, dim_labels=b0f_0io->b0f\n}\n";
    let args = [
        Literal::Array(ArrayLiteral::from_slice(&[1, 4, 1], &[a, -a, a, a])),
        Literal::Array(ArrayLiteral::from_slice(&[2, 1, 1], &[b, b])),
    ];
    let (cpu, ev) = run(text, &args, false);
    assert!(cpu.iter().all(|&x| x & 0x7fff_ffff == 0), "{cpu:x?}");
    // The sign of such a zero follows the kernel's instruction sequence (the convolution
    // kernel fuses every term after the first, the evaluator adds a product to a zero sum):
    // the values agree.
    let magnitudes = |v: &[u32]| v.iter().map(|x| x & 0x7fff_ffff).collect::<Vec<_>>();
    assert_eq!(magnitudes(&ev), magnitudes(&cpu));
}
