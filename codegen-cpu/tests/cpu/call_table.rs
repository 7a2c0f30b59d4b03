//! Runs of kernel calls as tables: programs whose entry point runs its kernels through
//! `axle.run` (a loop over a constant table of calls) compute what the evaluator computes, with
//! every kind of buffer a call binds in the tables: entry parameters, outputs, temporaries,
//! constant arrays, lifted scalar constants and GEMM operands read through views that start
//! inside a parameter; at the top level and inside a loop's body; at one thread and several.

use axle_analysis::eval::evaluate;
use axle_codegen_cpu::{compile, emit_text, CpuOptions, Emit};
use axle_ir::{compare_arrays, parse_module, ElementType, Literal, Module, Tolerance};
use axle_testkit::{leaves, real_array};

/// `layers` dot layers over slices of `x` (each slice's dot reads `x` through a view at its own
/// offset), each scaled by a fusion with its own lifted constant, biased by a constant array,
/// then a `while` loop whose body is a run of unfused kernels; the result is a tuple of every
/// layer's output and the loop's.
fn program(layers: usize) -> Module {
    let mut t = String::from("HloModule runs\n");
    for i in 0..layers {
        t.push_str(&format!(
            "\nscale_{i} {{\n  p = f32[4,8] parameter(0)\n  c = f32[] constant({})\n  \
             cb = f32[4,8] broadcast(c), dimensions={{}}\n  ROOT y = f32[4,8] multiply(p, cb)\n}}\n",
            0.5 + 0.125 * i as f64
        ));
    }
    t.push_str(
        "\ncond {\n  s = (s32[], f32[4,8]) parameter(0)\n  i = s32[] get-tuple-element(s), \
         index=0\n  n = s32[] constant(3)\n  ROOT lt = pred[] compare(i, n), direction=LT\n}\n",
    );
    t.push_str(
        "\nbody {\n  s = (s32[], f32[4,8]) parameter(0)\n  i = s32[] get-tuple-element(s), \
         index=0\n  v = f32[4,8] get-tuple-element(s), index=1\n  one = s32[] constant(1)\n  \
         i1 = s32[] add(i, one)\n  a = f32[4,8] sine(v)\n  b = f32[4,8] multiply(a, v)\n  \
         c = f32[4,8] tanh(b)\n  d = f32[4,8] add(c, a)\n  e = f32[4,8] cosine(d)\n  \
         ROOT r = (s32[], f32[4,8]) tuple(i1, e)\n}\n",
    );
    t.push_str("\nENTRY main {\n  x = f32[32,16] parameter(0)\n  w = f32[16,8] parameter(1)\n");
    let bias: Vec<String> = (0..8)
        .map(|j| format!("{}", 0.25 * j as f64 - 1.0))
        .collect();
    t.push_str(&format!(
        "  bias = f32[8] constant({{{}}})\n  bb = f32[4,8] broadcast(bias), dimensions={{1}}\n",
        bias.join(", ")
    ));
    let mut outs = Vec::new();
    for i in 0..layers {
        let r = 4 * (i % 8);
        t.push_str(&format!(
            "  s{i} = f32[4,16] slice(x), slice={{[{r}:{}], [0:16]}}\n  \
             d{i} = f32[4,8] dot(s{i}, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n  \
             f{i} = f32[4,8] fusion(d{i}), kind=kLoop, calls=scale_{i}\n  \
             y{i} = f32[4,8] add(f{i}, bb)\n",
            r + 4
        ));
        outs.push(format!("y{i}"));
    }
    t.push_str(&format!(
        "  zero = s32[] constant(0)\n  init = (s32[], f32[4,8]) tuple(zero, {})\n  \
         loop = (s32[], f32[4,8]) while(init), condition=cond, body=body\n  \
         lv = f32[4,8] get-tuple-element(loop), index=1\n",
        outs[layers - 1]
    ));
    outs.push("lv".to_string());
    let shapes = vec!["f32[4,8]"; outs.len()].join(", ");
    t.push_str(&format!(
        "  ROOT out = ({shapes}) tuple({})\n}}\n",
        outs.join(", ")
    ));
    parse_module(&t).unwrap_or_else(|e| panic!("{}", e.render("runs")))
}

fn inputs() -> Vec<Literal> {
    vec![
        real_array(ElementType::F32, &[32, 16], |i| (i as f64 * 0.37).sin()),
        real_array(ElementType::F32, &[16, 8], |i| {
            (i as f64 * 0.11).cos() * 0.5
        }),
    ]
}

#[test]
fn tables_of_kernel_calls_match_the_evaluator() {
    let m = program(12);
    let args = inputs();
    let want = leaves(&evaluate(&m, &args).expect("evaluates"));
    let tol = Tolerance::Close {
        rtol: 1e-5,
        atol: 1e-6,
    };
    for threads in [1, 4] {
        let opts = CpuOptions {
            libm_math: true,
            threads,
            ..Default::default()
        };
        let ir = emit_text(&m, &opts, Emit::LlvmIr).expect("emits");
        // The form under test: the entry point runs tables through the runner.
        assert!(
            ir.contains("define internal void @axle.run("),
            "no kernel calls ran from a table"
        );
        let exe = compile(&m, &opts).expect("compiles");
        let got = exe.run_literals(&args).expect("runs");
        assert_eq!(got.len(), want.len());
        for (k, (w, g)) in want.iter().zip(&got).enumerate() {
            compare_arrays(w, g, tol)
                .unwrap_or_else(|e| panic!("output {k} at {threads} threads: {e}"));
        }
    }
}

#[test]
fn a_short_program_keeps_its_calls_as_code() {
    // Fewer kernel calls than a run needs: no table, no runner.
    let m = parse_module(
        "HloModule short\n\nENTRY main {\n  x = f32[32,16] parameter(0)\n  \
         a = f32[32,16] sine(x)\n  ROOT b = f32[32,16] tanh(a)\n}\n",
    )
    .expect("parses");
    let opts = CpuOptions::default();
    let ir = emit_text(&m, &opts, Emit::LlvmIr).expect("emits");
    assert!(!ir.contains("@axle.run"), "{ir}");
    let args = vec![inputs().swap_remove(0)];
    let want = leaves(&evaluate(&m, &args).expect("evaluates"));
    let got = compile(&m, &opts)
        .expect("compiles")
        .run_literals(&args)
        .expect("runs");
    let tol = Tolerance::Close {
        rtol: 1e-5,
        atol: 1e-6,
    };
    compare_arrays(&want[0], &got[0], tol).expect("matches the evaluator");
}
