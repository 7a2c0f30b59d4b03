//! `batchnorm-expander` against the evaluator: the expanded module gives the evaluator's
//! batch-norm results (computed in f64 per feature) within the rounding of the element type,
//! for all three ops, with the feature dimension first, in the middle and last.

use axle_analysis::evaluate;
use axle_fusion::batchnorm_expander::has_batch_norm;
use axle_fusion::run_on_copy;
use axle_ir::{compare_literals, parse_module, ArrayLiteral, ElementType, Literal, Tolerance};

/// Deterministic pseudo-random values in `[lo, hi)`.
fn values(n: usize, seed: u64, lo: f64, hi: f64) -> Vec<f64> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            lo + (hi - lo) * ((s >> 11) as f64 / (1u64 << 53) as f64)
        })
        .collect()
}

fn literal(ty: ElementType, dims: &[i64], v: &[f64]) -> Literal {
    match ty {
        ElementType::F64 => Literal::Array(ArrayLiteral::from_slice(dims, v)),
        _ => {
            let f: Vec<f32> = v.iter().map(|&x| x as f32).collect();
            Literal::Array(ArrayLiteral::from_slice(dims, &f))
        }
    }
}

fn module_text(ty: &str, dims: &[i64], fi: usize) -> String {
    let d = dims
        .iter()
        .map(|d| d.to_string())
        .collect::<Vec<_>>()
        .join(",");
    let x = format!("{ty}[{d}]");
    let f = format!("{ty}[{}]", dims[fi]);
    format!(
        "HloModule bn\n\nENTRY main {{\n  x = {x} parameter(0)\n  s = {f} parameter(1)\n  \
         o = {f} parameter(2)\n  m = {f} parameter(3)\n  v = {f} parameter(4)\n  \
         g = {x} parameter(5)\n  \
         i = {x} batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index={fi}\n  \
         t = ({x}, {f}, {f}) batch-norm-training(x, s, o), epsilon=0.001, feature_index={fi}\n  \
         d = ({x}, {f}, {f}) batch-norm-grad(x, s, m, v, g), epsilon=0.001, feature_index={fi}\n  \
         ROOT r = ({x}, ({x}, {f}, {f}), ({x}, {f}, {f})) tuple(i, t, d)\n}}\n"
    )
}

#[test]
fn expansion_matches_the_evaluator() {
    let dims: &[i64] = &[4, 3, 6, 5];
    for (ty, tyname, tol) in [
        (ElementType::F32, "f32", 2e-4),
        (ElementType::F64, "f64", 1e-9),
    ] {
        for fi in [0, 1, 3] {
            let m = parse_module(&module_text(tyname, dims, fi)).expect("parses");
            assert!(has_batch_norm(&m));
            let e = run_on_copy(&m, "batchnorm-expander,dce").expect("expands");
            assert!(!has_batch_norm(&e), "batch-norm ops are left");
            let nf = dims[fi];
            let n: i64 = dims.iter().product();
            for seed in 0..3 {
                let args = vec![
                    literal(ty, dims, &values(n as usize, seed * 7 + 1, -3.0, 5.0)),
                    literal(ty, &[nf], &values(nf as usize, seed * 7 + 2, 0.5, 2.0)),
                    literal(ty, &[nf], &values(nf as usize, seed * 7 + 3, -1.0, 1.0)),
                    literal(ty, &[nf], &values(nf as usize, seed * 7 + 4, -1.0, 1.0)),
                    literal(ty, &[nf], &values(nf as usize, seed * 7 + 5, 0.5, 3.0)),
                    literal(ty, dims, &values(n as usize, seed * 7 + 6, -1.0, 1.0)),
                ];
                let want = evaluate(&m, &args).expect("the original evaluates");
                let got = evaluate(&e, &args).expect("the expansion evaluates");
                compare_literals(
                    &want,
                    &got,
                    Tolerance::Close {
                        rtol: tol,
                        atol: tol,
                    },
                )
                .unwrap_or_else(|err| panic!("{tyname} feature_index={fi} seed {seed}: {err}"));
            }
        }
    }
}

#[test]
fn leaves_malformed_batch_norm_alone() {
    // A batch norm whose epsilon is not a number is not expanded: the backend then reports the
    // instruction by name instead of computing with a made-up epsilon.
    let text = "HloModule bn\n\nENTRY main {\n  x = f32[2,3] parameter(0)\n  \
                s = f32[3] parameter(1)\n  o = f32[3] parameter(2)\n  \
                ROOT t = (f32[2,3], f32[3], f32[3]) batch-norm-training(x, s, o), \
                epsilon=abc, feature_index=1\n}\n";
    let m = parse_module(text).expect("parses");
    let e = run_on_copy(&m, "batchnorm-expander,dce").expect("runs");
    assert!(has_batch_norm(&e));
}
