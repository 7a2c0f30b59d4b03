//! `cholesky` and `triangular-solve` on `f16` and `bf16` arrays on the CPU backend (run in
//! `f32` between converts by `linalg-upcast` before lowering) against the reference evaluator
//! (which computes in `f64` and rounds once), within one unit in the last place of the narrow
//! type, over batch dimensions and the ops' attributes; the 8-bit float formats likewise.

use axle_analysis::evaluate;
use axle_codegen_cpu::{compile, CpuOptions};
use axle_ir::{compare_literals, parse_module, ElementType, Literal, Tolerance};
use axle_testkit::{noise, real_array};

/// Batches of symmetric positive definite `n`-by-`n` matrices `B B^T + n I`.
fn positive_definite(ty: ElementType, dims: &[i64], seed: u64) -> Literal {
    let n = dims[dims.len() - 1] as usize;
    real_array(ty, dims, |k| {
        let (bt, i, j) = (k / (n * n), k / n % n, k % n);
        let b = |r: usize, t: usize| noise(seed, ((bt * n + r) * n + t) as u64);
        let dot: f64 = (0..n).map(|t| b(i, t) * b(j, t)).sum();
        dot + if i == j { n as f64 } else { 0.0 }
    })
}

/// Random matrices with a dominant diagonal (well-conditioned triangles).
fn dominant(ty: ElementType, dims: &[i64], seed: u64) -> Literal {
    let (r, c) = (dims[dims.len() - 2] as usize, dims[dims.len() - 1] as usize);
    real_array(ty, dims, |k| {
        let v = noise(seed, k as u64);
        if k / c % r == k % c {
            v + 2.0 + c as f64
        } else {
            v
        }
    })
}

/// `ulps` units in the last place of the narrow type, relative, plus a little absolute slack
/// for results near zero. One op differs by at most one unit (double rounding: f64 against f32
/// then the narrow type); a chain of ops carries that difference on.
fn tolerance(ty: ElementType, ulps: f64) -> Tolerance {
    let ulp = match ty {
        ElementType::F16 => 1.0 / 1024.0,
        ElementType::BF16 => 1.0 / 128.0,
        ElementType::F8E5M2 | ElementType::F8E5M2FNUZ => 1.0 / 4.0,
        ElementType::F8E3M4 => 1.0 / 16.0,
        _ => 1.0 / 8.0,
    };
    Tolerance::Close {
        rtol: ulps * ulp,
        atol: 1e-3,
    }
}

fn check(ty: ElementType, text: &str, args: &[Literal]) {
    check_within(ty, text, args, 1.0)
}

fn check_within(ty: ElementType, text: &str, args: &[Literal], ulps: f64) {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let want = evaluate(&m, args).unwrap_or_else(|e| panic!("{text}: evaluates: {e}"));
    let exe = compile(&m, &CpuOptions::default()).unwrap_or_else(|e| panic!("{text}: {e}"));
    let got = exe
        .run_literals(args)
        .unwrap_or_else(|e| panic!("{text}: runs: {e}"));
    assert_eq!(got.len(), 1);
    let got = Literal::Array(got.into_iter().next().unwrap());
    assert_eq!(got.as_array().map(|a| a.ty()), Some(ty), "{text}");
    compare_literals(&want, &got, tolerance(ty, ulps)).unwrap_or_else(|e| panic!("{text}\n{e}"));
}

#[test]
fn narrow_cholesky_matches_the_evaluator() {
    for (ty, name) in [(ElementType::F16, "f16"), (ElementType::BF16, "bf16")] {
        for dims in ["3,5,5", "2,2,4,4", "6,6"] {
            for lower in [true, false] {
                let d: Vec<i64> = dims.split(',').map(|x| x.parse().unwrap()).collect();
                let text = format!(
                    "HloModule c\nENTRY main {{\n  a = {name}[{dims}] parameter(0)\n  ROOT l = {name}[{dims}] cholesky(a), lower={lower}\n}}\n"
                );
                check(ty, &text, &[positive_definite(ty, &d, 7)]);
            }
        }
    }
}

#[test]
fn narrow_triangular_solves_match_the_evaluator() {
    let cases = [
        (true, true, "NO_TRANSPOSE", false),
        (true, false, "TRANSPOSE", true),
        (false, true, "TRANSPOSE", false),
        (false, false, "NO_TRANSPOSE", true),
        (false, true, "ADJOINT", true),
        (true, true, "TRANSPOSE", false),
    ];
    for (ty, name) in [(ElementType::F16, "f16"), (ElementType::BF16, "bf16")] {
        for (seed, &(left, lower, trans, unit)) in cases.iter().enumerate() {
            let b = if left { "2,4,3" } else { "2,3,4" };
            let bd: Vec<i64> = b.split(',').map(|x| x.parse().unwrap()).collect();
            let text = format!(
                "HloModule t\nENTRY main {{\n  a = {name}[2,4,4] parameter(0)\n  b = {name}[{b}] parameter(1)\n  ROOT x = {name}[{b}] triangular-solve(a, b), left_side={left}, lower={lower}, transpose_a={trans}, unit_diagonal={unit}\n}}\n"
            );
            let seed = seed as u64;
            let args = [
                dominant(ty, &[2, 4, 4], seed),
                real_array(ty, &bd, |k| 4.0 * noise(seed + 100, k as u64)),
            ];
            check(ty, &text, &args);
        }
    }
}

#[test]
fn narrow_cholesky_feeding_a_solve_matches_the_evaluator() {
    // The solve reads the cholesky's result rounded to f16, as the evaluator's does.
    let text = "HloModule cs\nENTRY main {\n  a = f16[2,4,4] parameter(0)\n  b = f16[2,4,3] parameter(1)\n  l = f16[2,4,4] cholesky(a), lower=true\n  y = f16[2,4,3] triangular-solve(l, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE\n  ROOT x = f16[2,4,3] triangular-solve(l, y), left_side=true, lower=true, transpose_a=TRANSPOSE\n}\n";
    let ty = ElementType::F16;
    let args = [
        positive_definite(ty, &[2, 4, 4], 3),
        real_array(ty, &[2, 4, 3], |k| noise(5, k as u64)),
    ];
    check_within(ty, text, &args, 4.0);
}

#[test]
fn minifloat_cholesky_and_solve_match_the_evaluator() {
    // Every 8- and 4-bit float format the evaluator computes (in f64) runs in f32 too.
    for (ty, name) in [
        (ElementType::F8E4M3FN, "f8e4m3fn"),
        (ElementType::F8E5M2, "f8e5m2"),
        (ElementType::F8E4M3, "f8e4m3"),
        (ElementType::F8E3M4, "f8e3m4"),
        (ElementType::F8E4M3FNUZ, "f8e4m3fnuz"),
        (ElementType::F8E5M2FNUZ, "f8e5m2fnuz"),
        (ElementType::F8E4M3B11FNUZ, "f8e4m3b11fnuz"),
    ] {
        let text = format!(
            "HloModule c\nENTRY main {{\n  a = {name}[2,3,3] parameter(0)\n  ROOT l = {name}[2,3,3] cholesky(a), lower=true\n}}\n"
        );
        check(ty, &text, &[positive_definite(ty, &[2, 3, 3], 11)]);
        let text = format!(
            "HloModule c\nENTRY main {{\n  a = {name}[3,3] parameter(0)\n  b = {name}[3,2] parameter(1)\n  ROOT x = {name}[3,2] triangular-solve(a, b), left_side=true, lower=true, transpose_a=NO_TRANSPOSE\n}}\n"
        );
        let args = [
            dominant(ty, &[3, 3], 4),
            real_array(ty, &[3, 2], |k| noise(9, k as u64)),
        ];
        check(ty, &text, &args);
    }
}
