//! In flush-to-zero mode a dot's subnormal partial sums read as zero in the next term, on the
//! cpu backend (x86's FTZ and DAZ modes) and in the evaluator (explicit flushing) alike.

use axle_analysis::{evaluate_with, EvalOptions};
use axle_codegen_cpu::{compile, CpuOptions};
use axle_ir::{parse_module, ArrayLiteral, Literal};

/// `[m, k] x [k, n]` on both sides with flushing on; the results' bits.
fn both(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> (Vec<u32>, Vec<u32>) {
    let text = format!(
        "HloModule m\nENTRY main {{\n  a = f32[{m},{k}] parameter(0)\n  b = f32[{k},{n}] parameter(1)\n  \
         ROOT d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
    );
    let module = parse_module(&text).expect("parses");
    let args = [
        Literal::Array(ArrayLiteral::from_slice(&[m as i64, k as i64], a)),
        Literal::Array(ArrayLiteral::from_slice(&[k as i64, n as i64], b)),
    ];
    let opts = CpuOptions {
        flush_denormals: true,
        ..Default::default()
    };
    let cpu = compile(&module, &opts)
        .expect("compiles")
        .run_literals(&args)
        .expect("runs");
    let ev = evaluate_with(
        &module,
        &args,
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
}
