//! `excess-precision` against the evaluator: a module of `bf16` ops read by converts to `f32`
//! gives, once rewritten, bit for bit the evaluator's results for the same computation written
//! in `f32` (what XLA CPU computes; checked with jaxlib 0.10.2 on these op kinds), and the
//! original module (every `bf16` op rounded, HLO's per-op semantics) does not on these inputs,
//! so the rounding the pass skips is observable.

use axle_analysis::evaluate;
use axle_fusion::excess_precision::has_excess_precision_site;
use axle_fusion::run_on_copy;
use axle_ir::{compare_literals, parse_module, ElementType, Literal, Tolerance};
use axle_testkit::{noise, real_array};

/// The computations; `w(x)` is an operand as the converted op reads it: `x` itself in the
/// `bf16` module, `convert(x)` to `f32` in the `f32` one; the dot reads the `bf16` operands in
/// both and has an `f32` result in the `f32` one. The `bf16` chain `u` (a multiply read by a
/// subtract) keeps its roundings in both.
fn module_text(wide: bool) -> String {
    let n = 64;
    let (ty, pre) = if wide {
        (
            "f32",
            format!(
                "  w0 = f32[{n}] convert(p0)\n  w1 = f32[{n}] convert(p1)\n  \
                 wp = f32[{n}] convert(pos)\n"
            ),
        )
    } else {
        ("bf16", String::new())
    };
    let (a, b, p) = if wide {
        ("w0", "w1", "wp")
    } else {
        ("p0", "p1", "pos")
    };
    let conv = |x: &str| {
        if wide {
            x.to_string()
        } else {
            format!("c{x}")
        }
    };
    let mut body = format!(
        "  p0 = bf16[{n}] parameter(0)\n  p1 = bf16[{n}] parameter(1)\n  \
         pos = bf16[{n}] parameter(2)\n{pre}  \
         s = {ty}[{n}] add({a}, {b})\n  m = {ty}[{n}] multiply({a}, {b})\n  \
         q = {ty}[{n}] divide({a}, {p})\n  t = {ty}[{n}] tanh({a})\n  \
         r = {ty}[{n}] sqrt({p})\n  e = {ty}[{n}] exponential({b})\n  \
         d = {ty}[] dot(p0, p1), lhs_contracting_dims={{0}}, rhs_contracting_dims={{0}}\n  \
         mb = bf16[{n}] multiply(p0, p1)\n  u = bf16[{n}] subtract(mb, p0)\n"
    );
    if !wide {
        for x in ["s", "m", "q", "t", "r", "e"] {
            body += &format!("  c{x} = f32[{n}] convert({x})\n");
        }
        body += "  cd = f32[] convert(d)\n";
    }
    let outs: Vec<String> = ["s", "m", "q", "t", "r", "e", "d"]
        .iter()
        .map(|x| conv(x))
        .collect();
    format!(
        "HloModule excess\n\nENTRY main {{\n{body}  ROOT out = (f32[{n}], f32[{n}], f32[{n}], \
         f32[{n}], f32[{n}], f32[{n}], f32[], bf16[{n}]) tuple({}, u)\n}}\n",
        outs.join(", ")
    )
}

fn inputs(seed: u64) -> Vec<Literal> {
    let n = 64;
    vec![
        real_array(ElementType::BF16, &[n], |k| 3.0 * noise(seed, k as u64)),
        real_array(ElementType::BF16, &[n], |k| noise(seed + 1, k as u64)),
        real_array(ElementType::BF16, &[n], |k| {
            0.5 + noise(seed + 2, k as u64).abs()
        }),
    ]
}

#[test]
fn converted_bf16_results_are_the_f32_computation() {
    let narrow = parse_module(&module_text(false)).expect("the bf16 module parses");
    let wide = parse_module(&module_text(true)).expect("the f32 module parses");
    assert!(has_excess_precision_site(&narrow));
    let rewritten = run_on_copy(&narrow, "excess-precision,dce").expect("rewrites");
    assert!(!has_excess_precision_site(&rewritten), "a site is left");
    let mut observable = false;
    for seed in 0..4 {
        let args = inputs(seed);
        let want = evaluate(&wide, &args).expect("the f32 module evaluates");
        let got = evaluate(&rewritten, &args).expect("the rewrite evaluates");
        compare_literals(&want, &got, Tolerance::Exact)
            .unwrap_or_else(|err| panic!("seed {seed}: {err}"));
        let per_op = evaluate(&narrow, &args).expect("the original evaluates");
        observable |= compare_literals(&want, &per_op, Tolerance::Exact).is_err();
    }
    assert!(
        observable,
        "the original module already gives the f32 results: the test shows nothing"
    );
}

#[test]
fn keeps_roundings_xla_keeps() {
    // A convert to f64, a reshape in between, a bf16 op read by a bf16 op and a reduce: XLA CPU
    // rounds each, and the pass leaves them.
    let text = "HloModule keep\n\nsum {\n  x = bf16[] parameter(0)\n  y = bf16[] parameter(1)\n  \
                ROOT s = bf16[] add(x, y)\n}\n\nENTRY main {\n  a = bf16[4] parameter(0)\n  \
                b = bf16[4] parameter(1)\n  m = bf16[4] multiply(a, b)\n  \
                c64 = f64[4] convert(m)\n  r = bf16[2,2] reshape(m)\n  cr = f32[2,2] convert(r)\n  \
                u = bf16[4] subtract(m, a)\n  z = bf16[] constant(0)\n  \
                red = bf16[] reduce(a, z), dimensions={0}, to_apply=sum\n  \
                cred = f32[] convert(red)\n  \
                ROOT t = (f64[4], f32[2,2], bf16[4], f32[]) tuple(c64, cr, u, cred)\n}\n";
    let m = parse_module(text).expect("parses");
    assert!(!has_excess_precision_site(&m));
    let e = run_on_copy(&m, "excess-precision").expect("runs");
    assert_eq!(axle_ir::print_module(&e), axle_ir::print_module(&m));
}
