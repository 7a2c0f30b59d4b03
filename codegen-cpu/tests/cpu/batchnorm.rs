//! The batch-norm ops on the CPU backend (expanded by `batchnorm-expander` before lowering)
//! against the reference evaluator, with the feature dimension first and last, and the error
//! for a batch norm the expander cannot read.

use axle_analysis::evaluate;
use axle_codegen_cpu::{compile, CpuOptions};
use axle_ir::{compare_literals, parse_module, ArrayLiteral, Literal, Tolerance};

fn values(n: usize, seed: u32, lo: f32, hi: f32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            lo + (hi - lo) * (s >> 8) as f32 / (1u32 << 24) as f32
        })
        .collect()
}

#[test]
fn batch_norm_matches_the_evaluator() {
    for (dims, fi) in [([7i64, 5, 9], 0usize), ([6, 4, 3], 2)] {
        let d = format!("{},{},{}", dims[0], dims[1], dims[2]);
        let nf = dims[fi];
        let (x, f) = (format!("f32[{d}]"), format!("f32[{nf}]"));
        let text = format!(
            "HloModule bn\nENTRY main {{\n  x = {x} parameter(0)\n  s = {f} parameter(1)\n  \
             o = {f} parameter(2)\n  m = {f} parameter(3)\n  v = {f} parameter(4)\n  \
             g = {x} parameter(5)\n  \
             i = {x} batch-norm-inference(x, s, o, m, v), epsilon=0.001, feature_index={fi}\n  \
             t = ({x}, {f}, {f}) batch-norm-training(x, s, o), epsilon=0.01, feature_index={fi}\n  \
             dd = ({x}, {f}, {f}) batch-norm-grad(x, s, m, v, g), epsilon=0.001, feature_index={fi}\n  \
             ROOT r = ({x}, ({x}, {f}, {f}), ({x}, {f}, {f})) tuple(i, t, dd)\n}}\n"
        );
        let m = parse_module(&text).expect("parses");
        let n = dims.iter().product::<i64>() as usize;
        let arr = |dims: &[i64], v: Vec<f32>| Literal::Array(ArrayLiteral::from_slice(dims, &v));
        let args = vec![
            arr(&dims, values(n, 1, -2.0, 4.0)),
            arr(&[nf], values(nf as usize, 2, 0.5, 2.0)),
            arr(&[nf], values(nf as usize, 3, -1.0, 1.0)),
            arr(&[nf], values(nf as usize, 4, -1.0, 1.0)),
            arr(&[nf], values(nf as usize, 5, 0.5, 3.0)),
            arr(&dims, values(n, 6, -1.0, 1.0)),
        ];
        let want = evaluate(&m, &args).expect("evaluates");
        let exe = compile(&m, &CpuOptions::default()).expect("compiles");
        let got = exe.run_literals(&args).expect("runs");
        let want = match want {
            Literal::Tuple(es) => es
                .into_iter()
                .flat_map(|e| match e {
                    Literal::Tuple(inner) => inner,
                    a => vec![a],
                })
                .collect::<Vec<_>>(),
            l => panic!("expected a tuple, got {l:?}"),
        };
        assert_eq!(got.len(), want.len());
        for (k, (g, w)) in got.into_iter().zip(&want).enumerate() {
            let tol = Tolerance::Close {
                rtol: 2e-4,
                atol: 2e-4,
            };
            compare_literals(w, &Literal::Array(g), tol)
                .unwrap_or_else(|e| panic!("feature_index={fi} output {k}: {e}"));
        }
    }
}

#[test]
fn unreadable_epsilon_is_an_error_naming_the_instruction() {
    let text = "HloModule bn\nENTRY main {\n  x = f32[2,3] parameter(0)\n  \
                s = f32[3] parameter(1)\n  o = f32[3] parameter(2)\n  \
                ROOT t = (f32[2,3], f32[3], f32[3]) batch-norm-training(x, s, o), \
                epsilon=abc, feature_index=1\n}\n";
    let m = parse_module(text).expect("parses");
    let Err(err) = compile(&m, &CpuOptions::default()) else {
        panic!("a batch norm with an unreadable epsilon must be refused");
    };
    let text = err.to_string();
    assert!(text.contains("batch-norm-training"), "{text}");
}
