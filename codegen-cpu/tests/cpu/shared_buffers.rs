//! Kernels whose output the buffer assignment placed in the memory of one of their inputs (an
//! elementwise result over an operand that dies there) write through that input's pointer, so
//! LLVM sees one pointer where there is one buffer and vectorizes the loop without checking at
//! run time that two pointers do not overlap (they do: the check sent the loop to its scalar
//! copy). Each module must give the evaluator's results on 1 and 8 threads, and the kernel's
//! optimized IR must hold no such check where the memory is shared, and hold one where it is
//! not (the control that shows the test can see it). A `dynamic-update-slice` whose operand
//! keeps its own buffer is copied into the output and updated there, with the same results.

use axle_analysis::eval::evaluate;
use axle_codegen_cpu::{compile, emit_text, CpuOptions, Emit};
use axle_ir::{compare_arrays, parse_module, ArrayLiteral, Literal, Tolerance};
use axle_testkit::{noise, real_array};

/// `sort`, an elementwise `op` on the sorted values, `sort` again, then an `add` with `keep`
/// (the input `x`, so the sorted values die at `op` and its result may take their memory; or
/// the sorted values `s`, which keeps them alive).
fn module(op: &str, keep: &str) -> String {
    format!(
        r#"HloModule shared
lt {{
  p0 = f32[] parameter(0)
  p1 = f32[] parameter(1)
  ROOT c = pred[] compare(p0, p1), direction=LT
}}
ENTRY e {{
  x = f32[67,300] parameter(0)
  s = f32[67,300] sort(x), dimensions={{1}}, to_apply=lt
  t = f32[67,300] {op}
  u = f32[67,300] sort(t), dimensions={{1}}, to_apply=lt
  ROOT r = f32[67,300] add(u, {keep})
}}
"#
    )
}

/// The optimized LLVM IR of the kernel computing `t`.
fn kernel_ir(text: &str) -> String {
    let m = parse_module(text).expect("parses");
    let opts = CpuOptions {
        threads: 1,
        ..Default::default()
    };
    let ir = emit_text(&m, &opts, Emit::LlvmIr).expect("compiles");
    let start = ir
        .lines()
        .position(|l| l.starts_with("define") && l.contains(".t("))
        .unwrap_or_else(|| panic!("no kernel for t\n{ir}"));
    ir.lines()
        .skip(start)
        .take_while(|l| *l != "}")
        .collect::<Vec<_>>()
        .join("\n")
}

/// Whether IR holds the loop vectorizer's run-time overlap check.
fn overlap_check(ir: &str) -> bool {
    ir.contains("diff.check") || ir.contains("found.conflict")
}

fn check_results(text: &str) {
    let m = parse_module(text).expect("parses");
    let args: Vec<Literal> = m
        .params(m.entry())
        .iter()
        .enumerate()
        .map(|(p, &id)| {
            let a = m.array_shape(id).expect("array parameters");
            real_array(a.ty, &a.dims, |k| 2.0 * noise(p as u64 + 3, k as u64))
        })
        .collect();
    let want = axle_testkit::leaves(&evaluate(&m, &args).expect("the evaluator runs it"));
    let inputs = axle_testkit::array_bytes(&args);
    for threads in [1, 8] {
        let opts = CpuOptions {
            threads,
            ..Default::default()
        };
        let exe = compile(&m, &opts).expect("compiles");
        let mut outs = exe.alloc_outputs();
        exe.execute(&inputs, &mut outs).expect("runs");
        for (w, g) in want.iter().zip(&outs) {
            let g = ArrayLiteral {
                shape: w.shape.clone(),
                data: g.bytes().to_vec(),
            };
            compare_arrays(
                w,
                &g,
                Tolerance::Close {
                    rtol: 1e-5,
                    atol: 1e-6,
                },
            )
            .unwrap_or_else(|e| panic!("{threads} threads: {e}\n{text}"));
        }
    }
}

#[test]
fn elementwise_kernels_in_their_operands_memory_have_no_overlap_check() {
    for op in ["exponential(s)", "multiply(s, s)", "abs(s)", "tanh(s)"] {
        let shared = module(op, "x");
        assert!(
            !overlap_check(&kernel_ir(&shared)),
            "{op}\n{}",
            kernel_ir(&shared)
        );
        check_results(&shared);
        // The sorted values stay alive: `t` gets memory of its own, and the loop checks.
        let apart = module(op, "s");
        assert!(
            overlap_check(&kernel_ir(&apart)),
            "{op}\n{}",
            kernel_ir(&apart)
        );
        check_results(&apart);
    }
}

/// A `dynamic-update-slice` whose updated operand keeps its own buffer (a read-only parameter,
/// or a value read again later) is a copy of the operand into the output, then the update
/// written in place: the whole output, and the update at clamped starts (from `2 * noise`
/// rounded, scaled to land inside, on the edge and out of range), fused or not, match the
/// evaluator on 1 and 8 threads.
#[test]
fn dynamic_update_slices_of_operands_that_stay_copy_then_update_in_place() {
    let cases = [
        // The operand is a parameter; the starts are parameters.
        r#"HloModule dus_param
ENTRY e {
  c = f32[6,1,5,33,16] parameter(0)
  u = f32[1,1,5,1,16] parameter(1)
  p = s32[] parameter(2)
  q = s32[] parameter(3)
  seven = s32[] constant(7)
  two = s32[] constant(2)
  i = s32[] add(p, two)
  j = s32[] add(s32[] multiply(q, seven), seven)
  z = s32[] constant(0)
  ROOT d = f32[6,1,5,33,16] dynamic-update-slice(c, u, i, z, z, j, z)
}"#,
        // The operand is computed and read again after the update; the update is computed.
        r#"HloModule dus_live
ENTRY e {
  x = f32[40,70] parameter(0)
  c = f32[40,70] exponential(x)
  v = f32[3,70] parameter(1)
  u = f32[3,70] negate(v)
  p = s32[] parameter(2)
  nine = s32[] constant(9)
  i = s32[] add(s32[] multiply(p, nine), nine)
  z = s32[] constant(0)
  d = f32[40,70] dynamic-update-slice(c, u, i, z)
  ROOT t = (f32[40,70], f32[40,70]) tuple(d, c)
}"#,
        // A chain: the first update copies the parameter, the second updates in place.
        r#"HloModule dus_chain
ENTRY e {
  c = f32[64,48] parameter(0)
  u = f32[2,48] parameter(1)
  p = s32[] parameter(2)
  q = s32[] parameter(3)
  ten = s32[] constant(10)
  i = s32[] add(s32[] multiply(p, ten), ten)
  j = s32[] add(s32[] multiply(q, ten), s32[] constant(40))
  z = s32[] constant(0)
  d = f32[64,48] dynamic-update-slice(c, u, i, z)
  ROOT d2 = f32[64,48] dynamic-update-slice(d, u, j, z)
}"#,
    ];
    for text in cases {
        check_results(text);
    }
}
