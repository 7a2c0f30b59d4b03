//! Lifted constants: fusions that differ only in scalar float constants used as plain operands
//! share one kernel function, each call reading its own values (results match the evaluator,
//! so a constant read at the wrong position or from the wrong layer shows); constants whose
//! value the code may fold into a cheaper operation (a divisor) keep a function per value.

use std::collections::HashSet;

use axle_analysis::eval::evaluate;
use axle_codegen_cpu::{compile, emit_text, CpuOptions, Emit};
use axle_ir::{compare_arrays, parse_module, ElementType, Literal, Module, Tolerance};
use axle_testkit::{leaves, real_array};

/// `layers` loop fusions in a chain over `f32[64]`, layer `i` computing `body(i)` from its
/// parameter `p` (the fusion computation's other instructions are `body`'s to write); every
/// layer's output is a leaf of the result.
fn chain(layers: usize, body: impl Fn(usize) -> String) -> Module {
    let mut text = String::from("HloModule lifted\n");
    for i in 0..layers {
        text.push_str(&format!(
            "\nfused_{i} {{\n  p = f32[64] parameter(0)\n{}}}\n",
            body(i)
        ));
    }
    text.push_str("\nENTRY main {\n  x0 = f32[64] parameter(0)\n");
    for i in 0..layers {
        text.push_str(&format!(
            "  x{} = f32[64] fusion(x{i}), kind=kLoop, calls=fused_{i}\n",
            i + 1
        ));
    }
    let outs: Vec<String> = (1..=layers).map(|i| format!("x{i}")).collect();
    let shapes = vec!["f32[64]"; layers].join(", ");
    text.push_str(&format!(
        "  ROOT r = ({shapes}) tuple({})\n}}\n",
        outs.join(", ")
    ));
    parse_module(&text).unwrap_or_else(|e| panic!("{}", e.render("lifted")))
}

/// Runs `m` on the cpu backend against the evaluator and returns the number of kernel
/// functions its LLVM IR defines.
fn distinct_functions(m: &Module) -> usize {
    let x = real_array(ElementType::F32, &[64], |i| (i as f64 * 0.37).sin());
    let args: Vec<Literal> = vec![x];
    let want = leaves(&evaluate(m, &args).expect("evaluates"));
    let opts = CpuOptions {
        libm_math: true,
        ..Default::default()
    };
    let exe = compile(m, &opts).expect("compiles");
    let got = exe.run_literals(&args).expect("runs");
    assert_eq!(got.len(), want.len());
    let tol = Tolerance::Close {
        rtol: 1e-5,
        atol: 1e-6,
    };
    for (k, (w, g)) in want.iter().zip(&got).enumerate() {
        compare_arrays(w, g, tol).unwrap_or_else(|e| panic!("layer {}: {e}", k + 1));
    }
    let ir = emit_text(m, &opts, Emit::LlvmIr).expect("emits");
    let functions: HashSet<&str> = ir
        .lines()
        .filter(|l| l.starts_with("define") && l.contains("@k"))
        .collect();
    functions.len()
}

#[test]
fn layers_differing_in_scalar_constants_share_one_function() {
    // Two lifted constants per layer in different roles (a scale and a lower clamp bound), so
    // swapping their positions or reading another layer's values changes the results.
    let m = chain(24, |i| {
        format!(
            "  c = f32[] constant({})\n  cb = f32[64] broadcast(c), dimensions={{}}\n  \
             lo = f32[] constant({})\n  lb = f32[64] broadcast(lo), dimensions={{}}\n  \
             s = f32[64] multiply(p, cb)\n  t = f32[64] tanh(s)\n  \
             ROOT y = f32[64] maximum(t, lb)\n",
            0.5 + 0.125 * i as f64,
            -0.75 + 0.0625 * i as f64
        )
    });
    assert_eq!(distinct_functions(&m), 1);
}

#[test]
fn a_constant_the_code_may_fold_keeps_a_function_per_value() {
    // A divisor is not lifted (LLVM turns a division by a power of two into a multiply).
    let m = chain(6, |i| {
        format!(
            "  c = f32[] constant({})\n  cb = f32[64] broadcast(c), dimensions={{}}\n  \
             ROOT y = f32[64] divide(p, cb)\n",
            1 << i
        )
    });
    assert_eq!(distinct_functions(&m), 6);
}

#[test]
fn equal_constants_in_different_places_are_different_functions() {
    // Same values, different structure: a lifted constant is named by its position, so the
    // two layer kinds (scale then offset, offset then scale) stay two functions.
    let m = chain(8, |i| {
        let (a, b) = (1.5 + i as f64, 0.25);
        if i % 2 == 0 {
            format!(
                "  c = f32[] constant({a})\n  cb = f32[64] broadcast(c), dimensions={{}}\n  \
                 d = f32[] constant({b})\n  db = f32[64] broadcast(d), dimensions={{}}\n  \
                 s = f32[64] multiply(p, cb)\n  ROOT y = f32[64] add(s, db)\n"
            )
        } else {
            format!(
                "  c = f32[] constant({a})\n  cb = f32[64] broadcast(c), dimensions={{}}\n  \
                 d = f32[] constant({b})\n  db = f32[64] broadcast(d), dimensions={{}}\n  \
                 s = f32[64] add(p, db)\n  ROOT y = f32[64] multiply(s, cb)\n"
            )
        }
    });
    assert_eq!(distinct_functions(&m), 2);
}
