//! The evaluator's flush-to-zero mode gives what x86's FTZ and DAZ modes give: each case
//! states its expected bits, worked out by hand from the rule that a subnormal operand reads
//! as zero and a subnormal result is written as zero with its sign (and, for contrast, the
//! IEEE result with the mode off). After every evaluation the thread's MXCSR is the default.

use axle_analysis::float_mode::control_register;
use axle_analysis::{evaluate_with, EvalOptions};
use axle_ir::{parse_module, ArrayLiteral, ArrayShape, ElementType, Literal};

/// `2^e` as an `f32`, built from bits (normal and subnormal exponents).
fn p2(e: i32) -> f32 {
    if e >= -126 {
        f32::from_bits(((e + 127) as u32) << 23)
    } else {
        f32::from_bits(1 << (e + 149))
    }
}

fn f32s(v: &[f32]) -> Literal {
    Literal::Array(ArrayLiteral {
        shape: ArrayShape::new(ElementType::F32, &[v.len() as i64]),
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    })
}

fn bits(l: &Literal) -> Vec<u32> {
    let a = l.as_array().expect("an array");
    a.data
        .chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

/// MXCSR's control bits (the sticky exception flags, bits 0 to 5, masked off).
fn mode() -> u32 {
    control_register().map_or(0, |r| r & !0x3f)
}

/// Evaluates `body` (an entry computation over `f32[n]` parameters `x`, `y`, `z`) in both modes
/// and checks the result bits.
fn check(n: usize, body: &str, args: &[&[f32]], ftz: &[f32], ieee: &[f32]) {
    let params: String = ["x", "y", "z"]
        .iter()
        .take(args.len())
        .enumerate()
        .map(|(i, p)| format!("  {p} = f32[{n}] parameter({i})\n"))
        .collect();
    let text = format!(
        "HloModule m\n\nadd {{\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  \
         ROOT s = f32[] add(a, b)\n}}\n\nENTRY main {{\n{params}{body}\n}}\n"
    );
    let m = parse_module(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
    let args: Vec<Literal> = args.iter().map(|a| f32s(a)).collect();
    let before = mode();
    for (flush, want) in [(true, ftz), (false, ieee)] {
        let opts = EvalOptions {
            flush_denormals: flush,
        };
        let got = evaluate_with(&m, &args, &opts).unwrap_or_else(|e| panic!("{e}\n{text}"));
        let want: Vec<u32> = want.iter().map(|x| x.to_bits()).collect();
        assert_eq!(bits(&got), want, "flush {flush}: {body}");
        assert_eq!(mode(), before, "the float mode is restored after {body}");
    }
}

#[test]
fn add_reads_subnormals_as_zero_and_flushes_its_result() {
    // 2^-126 + 2^-130: DAZ reads 2^-130 as 0. 1.5 * 2^-126 - 2^-126 = 2^-127, flushed.
    check(
        2,
        "  ROOT r = f32[2] add(x, y)",
        &[&[p2(-126), 1.5 * p2(-126)], &[p2(-130), -p2(-126)]],
        &[p2(-126), 0.0],
        &[p2(-126) + p2(-130), p2(-127)],
    );
}

#[test]
fn multiply_and_divide_flush_keeping_the_sign() {
    // -2^-63 * 2^-64 = -2^-127 flushes to -0; 2^-130 * 2^10 reads 0 under DAZ.
    check(
        2,
        "  ROOT r = f32[2] multiply(x, y)",
        &[&[-p2(-63), p2(-130)], &[p2(-64), p2(10)]],
        &[-0.0, 0.0],
        &[-p2(-127), p2(-120)],
    );
    // 2^-126 / 4 = 2^-128 flushes; 2^-130 / 2^-10 reads 0 / 2^-10.
    check(
        2,
        "  ROOT r = f32[2] divide(x, y)",
        &[&[p2(-126), p2(-130)], &[4.0, p2(-10)]],
        &[0.0, 0.0],
        &[p2(-128), p2(-120)],
    );
}

#[test]
fn sqrt_and_exp_flush() {
    // sqrt(2^-130) reads sqrt(0); sqrt(2^-124) = 2^-62 is exact either way.
    check(
        2,
        "  ROOT r = f32[2] sqrt(x)",
        &[&[p2(-130), p2(-124)]],
        &[0.0, p2(-62)],
        &[p2(-65), p2(-62)],
    );
    // exp(-100) is about 3.7e-44, 27 units of 2^-149 (a subnormal) in IEEE, zero flushed;
    // exp(2^-130) reads exp(0) = 1.
    let ieee = (-100f64).exp() as f32;
    assert!(ieee.is_subnormal());
    check(
        2,
        "  ROOT r = f32[2] exponential(x)",
        &[&[-100.0, p2(-130)]],
        &[0.0, 1.0],
        &[ieee, 1.0],
    );
}

#[test]
fn a_multiply_add_chain_flushes_the_product_before_the_sum() {
    // 2^-63 * 2^-64 = 2^-127 flushes to 0, so the sum is 2^-126, not 1.5 * 2^-126.
    check(
        1,
        "  m = f32[1] multiply(x, y)\n  ROOT r = f32[1] add(m, z)",
        &[&[p2(-63)], &[p2(-64)], &[p2(-126)]],
        &[p2(-126)],
        &[1.5 * p2(-126)],
    );
}

#[test]
fn a_reduction_reads_subnormal_terms_as_zero() {
    // Four terms of 2^-130 sum to 2^-128 (subnormal) in IEEE and read as zero flushed.
    check(
        4,
        "  c = f32[] constant(0)\n  ROOT r = f32[] reduce(x, c), dimensions={0}, to_apply=add",
        &[&[p2(-130); 4]],
        &[0.0],
        &[p2(-128)],
    );
}

#[test]
fn a_dot_reads_subnormal_operands_as_zero_and_flushes_its_result() {
    // 2^-126 * 1 + 2^-130 * 1: the second operand reads as zero. 2^-64 * 2^-64 = 2^-128 flushed.
    check(
        2,
        "  ROOT r = f32[] dot(x, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        &[&[p2(-126), p2(-130)], &[1.0, 1.0]],
        &[p2(-126)],
        &[p2(-126) + p2(-130)],
    );
    check(
        1,
        "  ROOT r = f32[] dot(x, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        &[&[p2(-64)], &[p2(-64)]],
        &[0.0],
        &[p2(-128)],
    );
    // Each term 2^-63 * 2^-64 = 2^-127 is flushed as it is accumulated, so the sum stays 0.
    check(
        2,
        "  ROOT r = f32[] dot(x, y), lhs_contracting_dims={0}, rhs_contracting_dims={0}",
        &[&[p2(-63), p2(-63)], &[p2(-64), p2(-64)]],
        &[0.0],
        &[p2(-126)],
    );
}

#[test]
fn shared_linear_algebra_runs_in_the_mode_and_restores_it() {
    // A 1-by-1 solve divides: 2^-126 / 4 = 2^-128, flushed.
    check(
        1,
        "  a = f32[1,1] reshape(x)\n  b = f32[1,1] reshape(y)\n  \
         s = f32[1,1] triangular-solve(a, b), left_side=true, lower=true, \
         transpose_a=NO_TRANSPOSE\n  ROOT r = f32[1] reshape(s)",
        &[&[4.0], &[p2(-126)]],
        &[0.0],
        &[p2(-128)],
    );
    // The Cholesky factor of a 1-by-1 matrix is its square root; 2^-130 reads as zero.
    check(
        1,
        "  a = f32[1,1] reshape(x)\n  s = f32[1,1] cholesky(a), lower=true\n  \
         ROOT r = f32[1] reshape(s)",
        &[&[p2(-130)]],
        &[0.0],
        &[p2(-65)],
    );
    // A length-2 FFT of (2^-130, 2^-130) is (2^-129, 0); under DAZ both terms read as zero.
    check(
        2,
        "  c = c64[2] convert(x)\n  f = c64[2] fft(c), fft_type=FFT, fft_length={2}\n  \
         ROOT r = f32[2] real(f)",
        &[&[p2(-130), p2(-130)]],
        &[0.0, 0.0],
        &[p2(-129), 0.0],
    );
}
