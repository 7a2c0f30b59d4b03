//! `linalg-upcast` against the evaluator: the rewritten module (f16/bf16 `cholesky` and
//! `triangular-solve` run in f32 between converts) gives the evaluator's results for the
//! original (computed in f64, rounded once) within one unit in the last place of the narrow
//! type, and keeps names, result types and untouched instructions.

use axle_analysis::evaluate;
use axle_fusion::linalg_upcast::has_narrow_linalg;
use axle_fusion::run_on_copy;
use axle_ir::{compare_literals, parse_module, ElementType, Literal, Opcode, Tolerance};
use axle_testkit::{noise, real_array};

/// `B B^T + n I` for a batch of `n`-by-`n` matrices: symmetric positive definite.
fn positive_definite(ty: ElementType, batch: usize, n: usize, seed: u64) -> Literal {
    real_array(ty, &[batch as i64, n as i64, n as i64], |k| {
        let (bt, i, j) = (k / (n * n), k / n % n, k % n);
        let b = |r: usize, t: usize| noise(seed, ((bt * n + r) * n + t) as u64);
        let dot: f64 = (0..n).map(|t| b(i, t) * b(j, t)).sum();
        dot + if i == j { n as f64 } else { 0.0 }
    })
}

fn module_text(ty: &str) -> String {
    format!(
        "HloModule la\n\nENTRY main {{\n  a = {ty}[2,4,4] parameter(0)\n  \
         b = {ty}[2,4,3] parameter(1)\n  c = {ty}[2,3,4] parameter(2)\n  \
         l = {ty}[2,4,4] cholesky(a), lower=true\n  \
         u = {ty}[2,4,4] cholesky(a), lower=false\n  \
         x = {ty}[2,4,3] triangular-solve(l, b), left_side=true, lower=true, \
         transpose_a=TRANSPOSE\n  \
         y = {ty}[2,3,4] triangular-solve(u, c), left_side=false, lower=false, \
         transpose_a=NO_TRANSPOSE, unit_diagonal=true\n  \
         ROOT r = ({ty}[2,4,4], {ty}[2,4,4], {ty}[2,4,3], {ty}[2,3,4]) tuple(l, u, x, y)\n}}\n"
    )
}

#[test]
fn upcast_matches_the_evaluator() {
    for (ty, name, ulp) in [
        (ElementType::F16, "f16", 1.0 / 1024.0),
        (ElementType::BF16, "bf16", 1.0 / 128.0),
    ] {
        let m = parse_module(&module_text(name)).expect("parses");
        assert!(has_narrow_linalg(&m));
        let e = run_on_copy(&m, "linalg-upcast,dce").expect("rewrites");
        assert!(!has_narrow_linalg(&e), "narrow linear algebra is left");
        // Every linear-algebra op now computes in f32; the results keep their names and types.
        for id in e.live_ids() {
            if matches!(e.opcode(id), Opcode::Cholesky | Opcode::TriangularSolve) {
                assert_eq!(e.array_shape(id).unwrap().ty, ElementType::F32);
            }
            if ["l", "u", "x", "y"].contains(&e.name(id)) {
                assert_eq!(e.opcode(id), Opcode::Convert);
                assert_eq!(e.array_shape(id).unwrap().ty, ty);
            }
        }
        for seed in 0..3 {
            // `x` solves with the computed (rounded) factor, `y` with a unit diagonal: both
            // well-conditioned, so one rounding difference in a factor stays within a few
            // units of the result.
            let args = vec![
                positive_definite(ty, 2, 4, seed),
                real_array(ty, &[2, 4, 3], |k| noise(seed + 10, k as u64)),
                real_array(ty, &[2, 3, 4], |k| noise(seed + 20, k as u64)),
            ];
            let want = evaluate(&m, &args).expect("the original evaluates");
            let got = evaluate(&e, &args).expect("the rewrite evaluates");
            let tol = Tolerance::Close {
                rtol: 4.0 * ulp,
                atol: 1e-3,
            };
            compare_literals(&want, &got, tol)
                .unwrap_or_else(|err| panic!("{name} seed {seed}: {err}"));
        }
    }
}

#[test]
fn leaves_wide_types_alone() {
    let m = parse_module(&module_text("f32")).expect("parses");
    assert!(!has_narrow_linalg(&m));
    let e = run_on_copy(&m, "linalg-upcast").expect("runs");
    assert_eq!(axle_ir::print_module(&e), axle_ir::print_module(&m));
}
