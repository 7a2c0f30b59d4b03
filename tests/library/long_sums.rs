//! Accuracy of long `f32` sums on the `cpu` backend and the evaluator: reductions over a
//! strided and a contiguous dimension, a GEMM with a long `K`, matrix-vector and
//! vector-matrix products, a convolution with a long window and one in a weight gradient's
//! form (packed kernel blocks), each against the same sum computed in `f64` here.
//!
//! Inputs are uniform in [0, 1) (no cancellation: the error of a sequential chain grows with
//! its length). Each check also computes, here, the error of the sequential `f32` chain of
//! fused multiply-adds (the order both backends used before summing in blocks) and asserts
//! that it exceeds the bound, so the bound is one a sequential chain fails. The bounds are
//! about the error of XLA CPU on the same programs (`bench/accuracy/long_sums.py`).

use axle::analysis::eval::evaluate;
use axle::ir::{parse_module, ArrayLiteral, ArrayShape, ElementType, Literal};
use axle_codegen_cpu::{compile, CpuOptions};

/// Deterministic values uniform in [0, 1) with 24 bits (exact in `f32`).
fn uniform(n: usize, seed: u64) -> Vec<f32> {
    (0..n as u64)
        .map(|i| {
            let h = (i ^ seed.wrapping_mul(0x9e37_79b9_7f4a_7c15))
                .wrapping_mul(0xbf58_476d_1ce4_e5b9)
                .rotate_left(29)
                .wrapping_mul(0x94d0_49bb_1331_11eb);
            (h >> 40) as f32 / (1u64 << 24) as f32
        })
        .collect()
}

fn literal(dims: &[i64], v: &[f32]) -> Literal {
    Literal::Array(ArrayLiteral {
        shape: ArrayShape::new(ElementType::F32, dims),
        data: v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    })
}

fn floats(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Each output element's terms: `terms[i]` lists the pairs `(a, b)` whose products it sums,
/// in the order a sequential chain adds them.
type Terms = Vec<Vec<(f32, f32)>>;

/// The largest relative error of `got` against the `f64` sums of `terms`.
fn max_rel(got: &[f32], terms: &Terms) -> f64 {
    assert_eq!(got.len(), terms.len());
    got.iter()
        .zip(terms)
        .map(|(&g, t)| {
            let exact: f64 = t.iter().map(|&(a, b)| a as f64 * b as f64).sum();
            (g as f64 - exact).abs() / exact
        })
        .fold(0.0, f64::max)
}

/// Runs `text` on the evaluator and on `cpu` (at one and four threads, which must agree
/// bitwise), and asserts each result's largest relative error is below `bound`, which the
/// sequential `f32` chain over `terms` exceeds.
fn check(text: &str, args: &[(Vec<i64>, Vec<f32>)], terms: &Terms, bound: f64) {
    let chain: Vec<f32> = terms
        .iter()
        .map(|t| t.iter().fold(0.0f32, |acc, &(a, b)| a.mul_add(b, acc)))
        .collect();
    let chain_err = max_rel(&chain, terms);
    assert!(
        chain_err > bound,
        "the sequential chain's error {chain_err:.3e} is within the bound {bound:.1e}: the \
         check would not catch it"
    );
    let m = parse_module(text).unwrap_or_else(|e| panic!("{text}\n{e}"));
    let lits: Vec<Literal> = args.iter().map(|(d, v)| literal(d, v)).collect();
    let Literal::Array(ev) = evaluate(&m, &lits).unwrap_or_else(|e| panic!("{text}\n{e}")) else {
        panic!("array result");
    };
    let ev_err = max_rel(&floats(&ev.data), terms);
    assert!(
        ev_err <= bound,
        "evaluator: error {ev_err:.3e} over {bound:.1e} (chain {chain_err:.3e})\n{text}"
    );
    let inputs = axle_testkit::array_bytes(&lits);
    let mut first: Option<Vec<u8>> = None;
    for threads in [1, 4] {
        let exe = compile(
            &m,
            &CpuOptions {
                threads,
                ..Default::default()
            },
        )
        .unwrap_or_else(|e| panic!("{text}\n{e}"));
        let mut outs = exe.alloc_outputs();
        exe.execute(&inputs, &mut outs).expect("runs");
        let bytes = outs.remove(0).bytes().to_vec();
        let err = max_rel(&floats(&bytes), terms);
        assert!(
            err <= bound,
            "cpu ({threads} threads): error {err:.3e} over {bound:.1e} (chain {chain_err:.3e})\n{text}"
        );
        match &first {
            None => first = Some(bytes),
            Some(f) => assert!(f == &bytes, "results differ between thread counts\n{text}"),
        }
    }
}

const ADD: &str =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";

#[test]
fn reduce_over_a_strided_dimension() {
    let (n, cols) = (20000usize, 8usize);
    let x = uniform(n * cols, 1);
    let text = format!(
        "HloModule r\n{ADD}\nENTRY e {{\n  x = f32[{n},{cols}] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[{cols}] reduce(x, z), dimensions={{0}}, to_apply=add\n}}\n"
    );
    let terms: Terms = (0..cols)
        .map(|j| (0..n).map(|i| (x[i * cols + j], 1.0)).collect())
        .collect();
    check(&text, &[(vec![n as i64, cols as i64], x)], &terms, 5e-7);
}

#[test]
fn reduce_over_a_contiguous_dimension() {
    let (rows, n) = (4usize, 200_000usize);
    let x = uniform(rows * n, 2);
    let text = format!(
        "HloModule r\n{ADD}\nENTRY e {{\n  x = f32[{rows},{n}] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[{rows}] reduce(x, z), dimensions={{1}}, to_apply=add\n}}\n"
    );
    let terms: Terms = (0..rows)
        .map(|r| (0..n).map(|i| (x[r * n + i], 1.0)).collect())
        .collect();
    check(&text, &[(vec![rows as i64, n as i64], x)], &terms, 5e-7);
}

#[test]
fn dot_with_a_long_k() {
    let (m, k, n) = (8usize, 25600usize, 8usize);
    let a = uniform(m * k, 3);
    let b = uniform(k * n, 4);
    let text = format!(
        "HloModule d\nENTRY e {{\n  a = f32[{m},{k}] parameter(0)\n  b = f32[{k},{n}] parameter(1)\n  ROOT d = f32[{m},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
    );
    let terms: Terms = (0..m * n)
        .map(|o| {
            let (i, j) = (o / n, o % n);
            (0..k).map(|kk| (a[i * k + kk], b[kk * n + j])).collect()
        })
        .collect();
    check(
        &text,
        &[(vec![m as i64, k as i64], a), (vec![k as i64, n as i64], b)],
        &terms,
        1e-6,
    );
}

#[test]
fn matrix_vector_product() {
    let (n, k) = (64usize, 4097usize);
    let w = uniform(n * k, 5);
    let x = uniform(k, 6);
    let text = format!(
        "HloModule mv\nENTRY e {{\n  w = f32[{n},{k}] parameter(0)\n  x = f32[{k}] parameter(1)\n  ROOT d = f32[{n}] dot(w, x), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
    );
    let terms: Terms = (0..n)
        .map(|i| (0..k).map(|kk| (w[i * k + kk], x[kk])).collect())
        .collect();
    check(
        &text,
        &[(vec![n as i64, k as i64], w), (vec![k as i64], x)],
        &terms,
        6e-7,
    );
}

#[test]
fn convolution_with_a_long_window() {
    // One-dimensional, NWC x WIO -> NWO: each output sums kw * c terms (kernel positions,
    // then input features).
    let (kw, c, o, outw) = (400usize, 64usize, 16usize, 4usize);
    let wd = kw + outw - 1;
    let x = uniform(wd * c, 7);
    let w = uniform(kw * c * o, 8);
    let text = format!(
        "HloModule c\nENTRY e {{\n  x = f32[1,{wd},{c}] parameter(0)\n  w = f32[{kw},{c},{o}] parameter(1)\n  ROOT y = f32[1,{outw},{o}] convolution(x, w), window={{size={kw}}}, dim_labels=b0f_0io->b0f\n}}\n"
    );
    let terms: Terms = (0..outw * o)
        .map(|q| {
            let (p, f) = (q / o, q % o);
            let mut t = Vec::with_capacity(kw * c);
            for kk in 0..kw {
                for ci in 0..c {
                    t.push((x[(p + kk) * c + ci], w[(kk * c + ci) * o + f]));
                }
            }
            t
        })
        .collect();
    check(
        &text,
        &[
            (vec![1, wd as i64, c as i64], x),
            (vec![kw as i64, c as i64, o as i64], w),
        ],
        &terms,
        1e-6,
    );
}

#[test]
fn convolution_as_a_weight_gradient() {
    // A weight gradient's form, `f01b_i01o->01bf`: the batch of the forward pass as input
    // features (c), a whole image as the window, the tiled kernel's packed blocks of the
    // kernel. Each output sums the window's positions, then the input features.
    let (c, hw, b, o) = (16usize, 12usize, 8usize, 72usize);
    let x = uniform(c * hw * hw * b, 9);
    let w = uniform(c * hw * hw * o, 10);
    let text = format!(
        "HloModule c\nENTRY e {{\n  x = f32[{c},{hw},{hw},{b}] parameter(0)\n  w = f32[{c},{hw},{hw},{o}] parameter(1)\n  ROOT y = f32[1,1,{b},{o}] convolution(x, w), window={{size={hw}x{hw}}}, dim_labels=f01b_i01o->01bf\n}}\n"
    );
    let terms: Terms = (0..b * o)
        .map(|q| {
            let (bi, f) = (q / o, q % o);
            let mut t = Vec::with_capacity(hw * hw * c);
            for p in 0..hw * hw {
                for ci in 0..c {
                    t.push((
                        x[(ci * hw * hw + p) * b + bi],
                        w[(ci * hw * hw + p) * o + f],
                    ));
                }
            }
            t
        })
        .collect();
    check(
        &text,
        &[
            (vec![c as i64, hw as i64, hw as i64, b as i64], x),
            (vec![c as i64, hw as i64, hw as i64, o as i64], w),
        ],
        &terms,
        5e-7,
    );
}

#[test]
fn vector_matrix_product() {
    // `x @ W` with `W` row-major: the GEMV kernel's columns form.
    let (k, n) = (4097usize, 64usize);
    let x = uniform(k, 11);
    let w = uniform(k * n, 12);
    let text = format!(
        "HloModule vm\nENTRY e {{\n  x = f32[{k}] parameter(0)\n  w = f32[{k},{n}] parameter(1)\n  ROOT d = f32[{n}] dot(x, w), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}\n}}\n"
    );
    let terms: Terms = (0..n)
        .map(|j| (0..k).map(|kk| (x[kk], w[kk * n + j])).collect())
        .collect();
    check(
        &text,
        &[(vec![k as i64], x), (vec![k as i64, n as i64], w)],
        &terms,
        6e-7,
    );
}
