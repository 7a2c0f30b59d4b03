//! Fusions on the CPU backend: every kernel shape the fusion planner makes (row kernels for
//! softmax- and layernorm-like fusions, staged column reductions, sibling reductions,
//! multi-output loops, output fusions with each kind of epilogue, dot prologues read in place,
//! fusions split around dots,
//! sorts and nested fusions) at ordinary, odd and zero sizes. Each case must give the
//! evaluator's results, bit-identical results on 1 and 8 threads, and the kernel structure
//! the plan promises (`kernel_plan`), so a reduction recomputed per element cannot come back
//! unnoticed.

use axle_analysis::eval::evaluate;
use axle_codegen_cpu::{compile, emit_text, kernel_plan, CpuOptions, Emit};
use axle_ir::{compare_arrays, parse_module, ArrayLiteral, ElementType, Literal, Tolerance};
use axle_testkit::{noise, real_array};

const REDUCERS: &str = r#"
add_f32 {
  add_l = f32[] parameter(0)
  add_r = f32[] parameter(1)
  ROOT add_s = f32[] add(add_l, add_r)
}
max_f32 {
  max_l = f32[] parameter(0)
  max_r = f32[] parameter(1)
  ROOT max_m = f32[] maximum(max_l, max_r)
}
"#;

/// Inputs for every entry parameter: floats in [-2, 2) from a fixed hash.
fn inputs(m: &axle_ir::Module) -> Vec<Literal> {
    m.params(m.entry())
        .iter()
        .enumerate()
        .map(|(p, &id)| {
            let a = m.array_shape(id).expect("array parameters");
            real_array(a.ty, &a.dims, |k| 2.0 * noise(p as u64 + 1, k as u64))
        })
        .collect()
}

fn tolerance(a: &ArrayLiteral) -> Tolerance {
    match a.ty() {
        ElementType::F32 => Tolerance::Close {
            rtol: 1e-4,
            atol: 1e-5,
        },
        ElementType::BF16 => Tolerance::Close {
            rtol: 1e-2,
            atol: 1e-2,
        },
        _ => Tolerance::Exact,
    }
}

fn run(m: &axle_ir::Module, args: &[Literal], threads: usize) -> Vec<ArrayLiteral> {
    let opts = CpuOptions {
        threads,
        ..Default::default()
    };
    run_with(m, args, &opts)
}

fn run_with(m: &axle_ir::Module, args: &[Literal], opts: &CpuOptions) -> Vec<ArrayLiteral> {
    compile(m, opts)
        .unwrap_or_else(|e| panic!("compiles: {e}"))
        .run_literals(args)
        .unwrap_or_else(|e| panic!("runs: {e}"))
}

/// Runs `text` on 1 and 8 threads (identical bits) and against the evaluator; returns the
/// kernel plan.
fn check(text: &str) -> Vec<String> {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let args = inputs(&m);
    let want = axle_testkit::leaves(&evaluate(&m, &args).expect("the evaluator runs it"));
    let one = run(&m, &args, 1);
    let eight = run(&m, &args, 8);
    assert_eq!(one, eight, "1 and 8 threads differ:\n{text}");
    assert_eq!(want.len(), one.len());
    for (k, (w, g)) in want.iter().zip(&one).enumerate() {
        compare_arrays(w, g, tolerance(w)).unwrap_or_else(|e| panic!("{text}\nout{k}: {e}"));
    }
    kernel_plan(&m).expect("plans")
}

fn dims(d: &[i64]) -> String {
    d.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Softmax over the last dimension of `[rows..., c]`, as one fusion.
fn softmax(rows: &[i64], c: i64) -> String {
    let r = dims(rows);
    let k = rows.len();
    let full = if r.is_empty() {
        c.to_string()
    } else {
        format!("{r},{c}")
    };
    let bd = dims(&(0..k as i64).collect::<Vec<_>>());
    format!(
        r#"HloModule softmax
{REDUCERS}
fused {{
  p = f32[{full}] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[{r}] reduce(p, ninf), dimensions={{{k}}}, to_apply=max_f32
  mb = f32[{full}] broadcast(mx), dimensions={{{bd}}}
  s = f32[{full}] subtract(p, mb)
  e = f32[{full}] exponential(s)
  z = f32[] constant(0)
  sm = f32[{r}] reduce(e, z), dimensions={{{k}}}, to_apply=add_f32
  sb = f32[{full}] broadcast(sm), dimensions={{{bd}}}
  ROOT d = f32[{full}] divide(e, sb)
}}
ENTRY main {{
  x = f32[{full}] parameter(0)
  ROOT f = f32[{full}] fusion(x), kind=kLoop, calls=fused
}}
"#
    )
}

#[test]
fn a_reduction_feeding_a_broadcast_is_computed_once_per_row() {
    for (rows, c) in [
        (vec![4], 33),
        (vec![1], 1),
        (vec![7], 1000),
        (vec![3, 5], 17),
        (vec![0], 16),
        (vec![16], 0),
        (vec![], 50),
        (vec![2], 20000),
    ] {
        let text = softmax(&rows, c);
        let plan = check(&text);
        assert_eq!(plan.len(), 1, "one kernel: {plan:?}");
        // The second pass keeps `exp` in a row buffer for the output pass, unless the row is
        // longer than the 64 KiB the kernel keeps on the stack.
        let tail = if c * 4 <= 64 << 10 {
            "passes=[mx][sm] cached=e"
        } else {
            "passes=[mx][sm]"
        };
        assert!(
            plan[0].starts_with("Row f root=d") && plan[0].ends_with(tail),
            "{rows:?}x{c}: {plan:?}"
        );
    }
    // The optimized IR: both reductions and the output loop are vector loops.
    let ir = kernel_ir(&softmax(&[64], 1024), "f");
    let v = f32_vector();
    for what in [
        format!("fadd reassoc {v}"),
        format!("@llvm.maximum.v{}f32", &v[1..v.find(' ').unwrap()]),
        format!("fdiv {v}"),
        format!("store {v}"),
    ] {
        assert!(ir.contains(&what), "no `{what}` in the optimized IR:\n{ir}");
    }
}

#[test]
fn layernorm_runs_two_dependent_row_passes() {
    let text = format!(
        r#"HloModule ln
{REDUCERS}
fused {{
  x = f32[24,100] parameter(0)
  g = f32[100] parameter(1)
  b = f32[100] parameter(2)
  z = f32[] constant(0)
  s1 = f32[24] reduce(x, z), dimensions={{1}}, to_apply=add_f32
  inv = f32[] constant(0.01)
  invb = f32[24] broadcast(inv), dimensions={{}}
  mean = f32[24] multiply(s1, invb)
  mb = f32[24,100] broadcast(mean), dimensions={{0}}
  d = f32[24,100] subtract(x, mb)
  d2 = f32[24,100] multiply(d, d)
  s2 = f32[24] reduce(d2, z), dimensions={{1}}, to_apply=add_f32
  var = f32[24] multiply(s2, invb)
  eps = f32[] constant(1e-5)
  epsb = f32[24] broadcast(eps), dimensions={{}}
  ve = f32[24] add(var, epsb)
  rs = f32[24] rsqrt(ve)
  rb = f32[24,100] broadcast(rs), dimensions={{0}}
  n = f32[24,100] multiply(d, rb)
  gb = f32[24,100] broadcast(g), dimensions={{1}}
  bb = f32[24,100] broadcast(b), dimensions={{1}}
  ng = f32[24,100] multiply(n, gb)
  ROOT o = f32[24,100] add(ng, bb)
}}
ENTRY main {{
  x = f32[24,100] parameter(0)
  g = f32[100] parameter(1)
  b = f32[100] parameter(2)
  ROOT f = f32[24,100] fusion(x, g, b), kind=kCustom, calls=fused
}}
"#
    );
    let plan = check(&text);
    assert_eq!(plan, ["Row f root=o (add) rows=[24] passes=[s1][s2]"]);
}

#[test]
fn sibling_row_reductions_share_a_pass_and_every_output_is_written_in_it() {
    let text = format!(
        r#"HloModule rms
{REDUCERS}
fused {{
  x = f32[9,31] parameter(0)
  z = f32[] constant(0)
  s = f32[9] reduce(x, z), dimensions={{1}}, to_apply=add_f32
  x2 = f32[9,31] multiply(x, x)
  q = f32[9] reduce(x2, z), dimensions={{1}}, to_apply=add_f32
  qr = f32[9] rsqrt(q)
  qb = f32[9,31] broadcast(qr), dimensions={{0}}
  n = f32[9,31] multiply(x, qb)
  ROOT t = (f32[9], f32[9], f32[9,31], f32[9,31]) tuple(s, q, n, x2)
}}
ENTRY main {{
  x = f32[9,31] parameter(0)
  f = (f32[9], f32[9], f32[9,31], f32[9,31]) fusion(x), kind=kInput, calls=fused
  a = f32[9] get-tuple-element(f), index=0
  n = f32[9,31] get-tuple-element(f), index=2
  ROOT r = (f32[9], f32[9,31]) tuple(a, n)
}}
"#
    );
    let plan = check(&text);
    assert_eq!(plan, ["Row f root=t (tuple) rows=[9] passes=[s,q]"]);
}

#[test]
fn a_column_reduction_inside_a_fusion_is_staged_before_its_readers() {
    let text = format!(
        r#"HloModule center
{REDUCERS}
fused {{
  x = f32[37,21] parameter(0)
  z = f32[] constant(0)
  c = f32[21] reduce(x, z), dimensions={{0}}, to_apply=add_f32
  cb = f32[37,21] broadcast(c), dimensions={{1}}
  ROOT d = f32[37,21] subtract(x, cb)
}}
ENTRY main {{
  x = f32[37,21] parameter(0)
  ROOT f = f32[37,21] fusion(x), kind=kLoop, calls=fused
}}
"#
    );
    let plan = check(&text);
    assert_eq!(
        plan,
        ["Reduce f root=c (reduce)", "Loop f root=d (subtract)"]
    );
}

#[test]
fn sibling_column_reductions_and_multi_output_loops_are_one_kernel() {
    let text = format!(
        r#"HloModule siblings
{REDUCERS}
fused_cols {{
  x = f32[40,13] parameter(0)
  z = f32[] constant(0)
  a = f32[13] reduce(x, z), dimensions={{0}}, to_apply=add_f32
  x2 = f32[40,13] multiply(x, x)
  b = f32[13] reduce(x2, z), dimensions={{0}}, to_apply=add_f32
  ROOT t = (f32[13], f32[13]) tuple(a, b)
}}
fused_loop {{
  x = f32[40,13] parameter(0)
  y = f32[40,13] parameter(1)
  e = f32[40,13] exponential(x)
  p = f32[40,13] multiply(e, y)
  ROOT tl = (f32[40,13], f32[40,13]) tuple(e, p)
}}
ENTRY main {{
  x = f32[40,13] parameter(0)
  y = f32[40,13] parameter(1)
  c = (f32[13], f32[13]) fusion(x), kind=kInput, calls=fused_cols
  l = (f32[40,13], f32[40,13]) fusion(x, y), kind=kLoop, calls=fused_loop
  ROOT r = ((f32[13], f32[13]), (f32[40,13], f32[40,13])) tuple(c, l)
}}
"#
    );
    let plan = check(&text);
    assert_eq!(plan, ["Reduce c root=t (tuple)", "Loop l root=tl (tuple)"]);
}

/// An output fusion: `dot(a, w)` of `[m,k] x [k,n]` with `epilogue` (instructions reading `d`,
/// `bias: f32[n]`, `res: f32[m,n]`, with root `o` of type `out_ty`).
fn dot_epilogue(m: i64, k: i64, n: i64, epilogue: &str, out_ty: &str) -> String {
    format!(
        r#"HloModule out
fused {{
  a = f32[{m},{k}] parameter(0)
  w = f32[{k},{n}] parameter(1)
  bias = f32[{n}] parameter(2)
  res = f32[{m},{n}] parameter(3)
  d = f32[{m},{n}] dot(a, w), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
{epilogue}
}}
ENTRY main {{
  a = f32[{m},{k}] parameter(0)
  w = f32[{k},{n}] parameter(1)
  bias = f32[{n}] parameter(2)
  res = f32[{m},{n}] parameter(3)
  ROOT f = {out_ty} fusion(a, w, bias, res), kind=kOutput, calls=fused
}}
"#
    )
}

#[test]
fn output_fusions_apply_every_kind_of_epilogue_to_finished_blocks() {
    // (name, epilogue, root opcode, where the dot's result goes)
    let cases: [(&str, &str, &str, &str); 6] = [
        (
            "bias",
            "  bb = f32[M,N] broadcast(bias), dimensions={1}\n  ROOT o = f32[M,N] add(d, bb)",
            "add",
            "output 0",
        ),
        (
            "relu",
            "  bb = f32[M,N] broadcast(bias), dimensions={1}\n  s = f32[M,N] add(d, bb)\n  \
             z = f32[] constant(0)\n  zb = f32[M,N] broadcast(z), dimensions={}\n  \
             ROOT o = f32[M,N] maximum(s, zb)",
            "maximum",
            "output 0",
        ),
        (
            "residual",
            "  ROOT o = f32[M,N] add(d, res)",
            "add",
            "output 0",
        ),
        (
            "scale",
            "  c = f32[] constant(0.125)\n  cb = f32[M,N] broadcast(c), dimensions={}\n  \
             ROOT o = f32[M,N] multiply(d, cb)",
            "multiply",
            "output 0",
        ),
        (
            "convert",
            "  t = f32[M,N] tanh(d)\n  ROOT o = bf16[M,N] convert(t)",
            "convert",
            "scratch",
        ),
        (
            "both",
            "  r = f32[M,N] add(d, res)\n  ROOT o = (f32[M,N], f32[M,N]) tuple(d, r)",
            "tuple",
            "output 0",
        ),
    ];
    // The largest splits into blocks of rows and of columns on 8 threads: each block gets
    // its epilogue.
    for (m, k, n) in [(13, 17, 19), (100, 64, 70), (1, 5, 3), (64, 128, 515)] {
        for (what, epi, op, into) in cases {
            let epi = epi
                .replace('M', &m.to_string())
                .replace('N', &n.to_string());
            let out_ty = match what {
                "convert" => format!("bf16[{m},{n}]"),
                "both" => format!("(f32[{m},{n}], f32[{m},{n}])"),
                _ => format!("f32[{m},{n}]"),
            };
            let plan = check(&dot_epilogue(m, k, n, &epi, &out_ty));
            assert_eq!(
                plan,
                [format!("Gemm f root=o ({op}) epilogue core=d into {into}")],
                "{what} {m}x{k}x{n}"
            );
        }
    }
}

/// Prologues: a dot's operands read through views of the fusion's parameters (a transpose,
/// a slice of a reshape, a broadcast) are read by the GEMM in place, so the fusion is one
/// GEMM kernel (with its epilogue, where it has one); a chain that is no strided view (a
/// reshape merging transposed dimensions) is staged first.
#[test]
fn dot_prologue_views_are_read_in_place() {
    for (m, k, n) in [(13, 17, 19), (1, 5, 3), (64, 128, 515)] {
        let (k2, n3) = (2 * k, 3 * n);
        let text = format!(
            r#"HloModule prologue
fused {{
  a = f32[{k},{m}] parameter(0)
  w = f32[{k2},{n3}] parameter(1)
  bias = f32[{n}] parameter(2)
  at = f32[{m},{k}] transpose(a), dimensions={{1,0}}
  ws = f32[{k2},{n}] slice(w), slice={{[0:{k2}], [{n}:{}]}}
  wr = f32[2,{k},{n}] reshape(ws)
  wt = f32[{k},2,{n}] transpose(wr), dimensions={{1,0,2}}
  ab = f32[2,{m},{k}] broadcast(at), dimensions={{1,2}}
  d = f32[2,{m},{n}] dot(ab, wt), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{1}}, rhs_contracting_dims={{0}}
  bb = f32[2,{m},{n}] broadcast(bias), dimensions={{2}}
  ROOT o = f32[2,{m},{n}] add(d, bb)
}}
ENTRY main {{
  a = f32[{k},{m}] parameter(0)
  w = f32[{k2},{n3}] parameter(1)
  bias = f32[{n}] parameter(2)
  ROOT f = f32[2,{m},{n}] fusion(a, w, bias), kind=kOutput, calls=fused
}}
"#,
            2 * n
        );
        let plan = check(&text);
        assert_eq!(
            plan,
            ["Gemm f root=o (add) epilogue core=d into output 0"],
            "{m}x{k}x{n}"
        );
    }
    let text = r#"HloModule staged
fused {
  a = f32[4,3,17] parameter(0)
  w = f32[17,9] parameter(1)
  t = f32[3,4,17] transpose(a), dimensions={1,0,2}
  r = f32[12,17] reshape(t)
  ROOT d = f32[12,9] dot(r, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}
ENTRY main {
  a = f32[4,3,17] parameter(0)
  w = f32[17,9] parameter(1)
  ROOT f = f32[12,9] fusion(a, w), kind=kOutput, calls=fused
}
"#;
    let plan = check(text);
    assert_eq!(plan.len(), 2, "{plan:?}");
    assert!(plan[1].starts_with("Gemm f root=d"), "{plan:?}");
}

#[test]
fn convolutions_take_their_epilogue_too() {
    let text = r#"HloModule conv
fused {
  x = f32[2,9,11,8] parameter(0)
  w = f32[3,3,8,16] parameter(1)
  b = f32[16] parameter(2)
  c = f32[2,9,11,16] convolution(x, w), window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f
  bb = f32[2,9,11,16] broadcast(b), dimensions={3}
  s = f32[2,9,11,16] add(c, bb)
  z = f32[] constant(0)
  zb = f32[2,9,11,16] broadcast(z), dimensions={}
  ROOT o = f32[2,9,11,16] maximum(s, zb)
}
ENTRY main {
  x = f32[2,9,11,8] parameter(0)
  w = f32[3,3,8,16] parameter(1)
  b = f32[16] parameter(2)
  ROOT f = f32[2,9,11,16] fusion(x, w, b), kind=kOutput, calls=fused
}
"#;
    let plan = check(text);
    assert_eq!(
        plan,
        ["Conv f root=o (maximum) epilogue core=c into output 0"]
    );
}

#[test]
fn bf16_convolutions_are_tiled_with_their_epilogue() {
    // The 1x1 convolution and relu6 of a MobileNet block, in bf16 as TensorFlow exports it.
    let text = r#"HloModule conv
fused {
  x = bf16[1,10,10,40] parameter(0)
  w = bf16[1,1,40,35] parameter(1)
  c = bf16[1,10,10,35] convolution(x, w), window={size=1x1}, dim_labels=b01f_01io->b01f
  lo = bf16[] constant(0)
  hi = bf16[] constant(6)
  lob = bf16[1,10,10,35] broadcast(lo), dimensions={}
  hib = bf16[1,10,10,35] broadcast(hi), dimensions={}
  ROOT o = bf16[1,10,10,35] clamp(lob, c, hib)
}
ENTRY main {
  x = bf16[1,10,10,40] parameter(0)
  w = bf16[1,1,40,35] parameter(1)
  ROOT f = bf16[1,10,10,35] fusion(x, w), kind=kOutput, calls=fused
}
"#;
    let plan = check(text);
    assert_eq!(
        plan,
        ["Conv f root=o (clamp) epilogue core=c into output 0"]
    );
}

#[test]
fn fusions_the_kernels_cannot_take_whole_are_split_in_order() {
    // XLA's attention fusion: dot, scale, softmax over rows, dot.
    let text = format!(
        r#"HloModule attention
{REDUCERS}
fused {{
  q = f32[2,12,8] parameter(0)
  k = f32[2,12,8] parameter(1)
  v = f32[2,12,8] parameter(2)
  s = f32[2,12,12] dot(q, k), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{2}}
  c = f32[] constant(0.35)
  cb = f32[2,12,12] broadcast(c), dimensions={{}}
  sc = f32[2,12,12] multiply(s, cb)
  ninf = f32[] constant(-inf)
  mx = f32[2,12] reduce(sc, ninf), dimensions={{2}}, to_apply=max_f32
  mb = f32[2,12,12] broadcast(mx), dimensions={{0,1}}
  dd = f32[2,12,12] subtract(sc, mb)
  e = f32[2,12,12] exponential(dd)
  z = f32[] constant(0)
  sm = f32[2,12] reduce(e, z), dimensions={{2}}, to_apply=add_f32
  sb = f32[2,12,12] broadcast(sm), dimensions={{0,1}}
  p = f32[2,12,12] divide(e, sb)
  ROOT o = f32[2,12,8] dot(p, v), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{1}}
}}
ENTRY main {{
  q = f32[2,12,8] parameter(0)
  k = f32[2,12,8] parameter(1)
  v = f32[2,12,8] parameter(2)
  ROOT f = f32[2,12,8] fusion(q, k, v), kind=kCustom, calls=fused
}}
"#
    );
    let plan = check(&text);
    assert_eq!(
        plan,
        [
            "Gemm f root=s (dot)",
            "Row f root=p (divide) rows=[2, 12] passes=[mx][sm] cached=e",
            "Gemm f root=o (dot)",
        ]
    );
    // A sort, a nested fusion and a reduce-window read through a broadcast inside a fusion:
    // each is computed once, in order.
    let text = format!(
        r#"HloModule mixed
{REDUCERS}
lt {{
  lt_a = f32[] parameter(0)
  lt_b = f32[] parameter(1)
  ROOT lt_l = pred[] compare(lt_a, lt_b), direction=LT
}}
inner {{
  a = f32[6,10] parameter(0)
  ROOT neg = f32[6,10] negate(a)
}}
fused {{
  x = f32[6,10] parameter(0)
  e = f32[6,10] exponential(x)
  s = f32[6,10] sort(e), dimensions={{1}}, to_apply=lt
  n = f32[6,10] fusion(s), kind=kLoop, calls=inner
  z = f32[] constant(0)
  w = f32[6,4] reduce-window(n, z), window={{size=1x7}}, to_apply=add_f32
  t = f32[6] reduce(w, z), dimensions={{1}}, to_apply=add_f32
  tb = f32[6,10] broadcast(t), dimensions={{0}}
  ROOT o = f32[6,10] add(s, tb)
}}
ENTRY main {{
  x = f32[6,10] parameter(0)
  ROOT f = f32[6,10] fusion(x), kind=kLoop, calls=fused
}}
"#
    );
    let plan = check(&text);
    assert_eq!(
        plan,
        [
            "Sort f root=s (sort)",
            "Loop n root=neg (negate)",
            "Loop f root=w (reduce-window)",
            "Row f root=o (add) rows=[6] passes=[t]",
        ],
        "{plan:?}"
    );
}

#[test]
fn fusions_that_return_their_operands_move_nothing_they_need_not() {
    let text = r#"HloModule pass
same {
  p = f32[5,3] parameter(0)
  ROOT q = f32[5,3] parameter(1)
}
pair {
  p = f32[5,3] parameter(0)
  q = f32[5,3] parameter(1)
  ROOT t = (f32[5,3], f32[5,3]) tuple(q, p)
}
some {
  p = f32[5,3] parameter(0)
  e = f32[5,3] exponential(p)
  ROOT t2 = (f32[5,3], f32[5,3]) tuple(p, e)
}
ENTRY main {
  x = f32[5,3] parameter(0)
  y = f32[5,3] parameter(1)
  a = f32[5,3] fusion(x, y), kind=kLoop, calls=same
  b = (f32[5,3], f32[5,3]) fusion(x, a), kind=kLoop, calls=pair
  c = (f32[5,3], f32[5,3]) fusion(y), kind=kLoop, calls=some
  ROOT r = ((f32[5,3], f32[5,3]), (f32[5,3], f32[5,3])) tuple(b, c)
}
"#;
    let plan = check(text);
    assert_eq!(plan, ["Loop c root=t2 (tuple)"]);
}

/// A fusion split into stages whose root is a tuple, reshape, copy or bitcast of a value no
/// stage computes: the buffer assignment takes those for views of their operands, so the
/// operands are staged and the root becomes a view of them (they were a kernel of their own,
/// which the assignment refused: "step %v6 names a value that no step computes"; found twice
/// by tests/buffers.rs).
#[test]
fn a_view_at_the_root_of_a_split_fusion_views_a_staged_operand() {
    let text = r#"HloModule views
add_f32 {
  x = f32[] parameter(0)
  y = f32[] parameter(1)
  ROOT r = f32[] add(x, y)
}
reshaped {
  z = f32[] constant(0)
  p = f32[4,8] parameter(0)
  s = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f32
  b = f32[4,8] broadcast(s), dimensions={0}
  ROOT v6 = f32[32] reshape(b)
}
copied {
  z = f32[] constant(0)
  p = f32[4,8] parameter(0)
  s = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f32
  b = f32[4,8] broadcast(s), dimensions={0}
  ROOT c = f32[4,8] copy(b)
}
bitcasted {
  z = f32[] constant(0)
  p = f32[4,8] parameter(0)
  s = f32[4] reduce(p, z), dimensions={1}, to_apply=add_f32
  b = f32[4,8] broadcast(s), dimensions={0}
  ROOT c = f32[8,4] bitcast(b)
}
tupled {
  p = f32[4,8] parameter(0)
  z = f32[] constant(0)
  s = f32[8] reduce(p, z), dimensions={0}, to_apply=add_f32
  c = f32[8] copy(s)
  ROOT t = (f32[8], f32[8]) tuple(s, c)
}
ENTRY main {
  x = f32[4,8] parameter(0)
  u = (f32[8], f32[8]) fusion(x), kind=kInput, calls=tupled
  r = f32[32] fusion(x), kind=kInput, calls=reshaped
  c = f32[4,8] fusion(x), kind=kInput, calls=copied
  t = f32[8,4] fusion(x), kind=kInput, calls=bitcasted
  ROOT out = (f32[32], f32[4,8], f32[8,4], (f32[8], f32[8])) tuple(r, c, t, u)
}
"#;
    let plan = check(text);
    assert!(!plan.is_empty());
}

/// The buffers of the instruction named `name` in the cpu backend's assignment of `m`, which
/// the independent checker must accept.
fn buffers_of(text: &str, names: &[&str]) -> Vec<Vec<axle_ir::BufferId>> {
    let m = parse_module(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let (m, a, rules) = axle_codegen_cpu::buffer_assignment(&m, &CpuOptions::default())
        .unwrap_or_else(|e| panic!("assigns: {e}"));
    axle_schedule::check::check(&m, &a, &rules).unwrap_or_else(|e| panic!("checker: {e}"));
    names
        .iter()
        .map(|n| {
            let id = m
                .live_ids()
                .into_iter()
                .find(|&i| m.name(i) == *n)
                .unwrap_or_else(|| panic!("no instruction {n}"));
            a.leaf_buffers(id)
        })
        .collect()
}

/// A step of a fusion run in steps writes over a staged value it reads only at the index it
/// writes (a column sum divided into a mean), as XLA's in-place fusions do; a step that reads
/// the value at other indices too (`reverse`) must not, or it would read elements it has
/// overwritten: its results would differ from the evaluator's.
#[test]
fn a_fusion_step_writes_over_a_staged_value_only_where_it_reads_it_in_place() {
    let fusion = |name: &str, root: &str| {
        format!(
            r#"HloModule {name}
{REDUCERS}
fused {{
  x = f32[37,21] parameter(0)
  z = f32[] constant(0)
  c = f32[21] reduce(x, z), dimensions={{0}}, to_apply=add_f32
  {root}
}}
ENTRY main {{
  x = f32[37,21] parameter(0)
  ROOT f = f32[21] fusion(x), kind=kInput, calls=fused
}}
"#
        )
    };
    let mean = fusion(
        "mean",
        "n = f32[] constant(37)
  nb = f32[21] broadcast(n), dimensions={}
  ROOT d = f32[21] divide(c, nb)",
    );
    assert_eq!(
        check(&mean),
        ["Reduce f root=c (reduce)", "Loop f root=d (divide)"]
    );
    let b = buffers_of(&mean, &["c", "d"]);
    assert_eq!(b[0], b[1], "the mean is computed in the sum's buffer");
    let mirrored = fusion(
        "mirrored",
        "r = f32[21] reverse(c), dimensions={0}
  ROOT d = f32[21] add(c, r)",
    );
    assert_eq!(
        check(&mirrored),
        ["Reduce f root=c (reduce)", "Loop f root=d (add)"]
    );
    let b = buffers_of(&mirrored, &["c", "d"]);
    assert_ne!(b[0], b[1], "a reversed read may not be overwritten");
}

/// A row kernel writes over an operand that reaches its root only through element-wise ops:
/// the pass writing a row's outputs reads each element before writing it. Read through a
/// `reverse`, the operand keeps its buffer.
#[test]
fn a_row_kernel_writes_over_an_operand_it_reads_at_the_index_it_writes() {
    let text = |name: &str, read: &str| {
        format!(
            r#"HloModule {name}
{REDUCERS}
fused {{
  x = f32[9,33] parameter(0)
  y = f32[9,33] parameter(1)
  z = f32[] constant(0)
  s = f32[9] reduce(x, z), dimensions={{1}}, to_apply=add_f32
  sb = f32[9,33] broadcast(s), dimensions={{0}}
  {read}
  ROOT o = f32[9,33] add(yr, sb)
}}
ENTRY main {{
  x = f32[9,33] parameter(0)
  n = f32[9,33] negate(x)
  ROOT f = f32[9,33] fusion(x, n), kind=kInput, calls=fused
}}
"#
        )
    };
    let direct = text("direct", "yr = f32[9,33] exponential(y)");
    assert_eq!(
        check(&direct),
        [
            "Loop n root=n (negate)",
            "Row f root=o (add) rows=[9] passes=[s]"
        ]
    );
    let b = buffers_of(&direct, &["n", "f"]);
    assert_eq!(b[0], b[1], "the fusion writes over its negated operand");
    let reversed = text("reversed", "yr = f32[9,33] reverse(y), dimensions={1}");
    assert_eq!(
        check(&reversed),
        [
            "Loop n root=n (negate)",
            "Row f root=o (add) rows=[9] passes=[s]"
        ]
    );
    let b = buffers_of(&reversed, &["n", "f"]);
    assert_ne!(b[0], b[1], "a reversed read may not be overwritten");
}

/// A softmax row kernel writes its result over its scores when they die there: each row's
/// maximum and sum are computed in passes before the row is written, and each element is read
/// before it is written. A softmax of the scores read in reverse keeps them apart (written in
/// place, the late elements of a row would read overwritten ones).
#[test]
fn a_softmax_row_kernel_writes_over_its_scores() {
    let text = |name: &str, read: &str| {
        format!(
            r#"HloModule {name}
{REDUCERS}
fused {{
  y = f32[9,33] parameter(0)
  ninf = f32[] constant(-inf)
  z = f32[] constant(0)
  mx = f32[9] reduce(y, ninf), dimensions={{1}}, to_apply=max_f32
  mb = f32[9,33] broadcast(mx), dimensions={{0}}
  {read}
  d = f32[9,33] subtract(yr, mb)
  e = f32[9,33] exponential(d)
  s = f32[9] reduce(e, z), dimensions={{1}}, to_apply=add_f32
  sb = f32[9,33] broadcast(s), dimensions={{0}}
  ROOT o = f32[9,33] divide(e, sb)
}}
ENTRY main {{
  x = f32[9,33] parameter(0)
  n = f32[9,33] negate(x)
  ROOT f = f32[9,33] fusion(n), kind=kInput, calls=fused
}}
"#
        )
    };
    let softmax = text("softmax", "yr = f32[9,33] abs(y)");
    assert_eq!(
        check(&softmax)[1],
        "Row f root=o (divide) rows=[9] passes=[mx][s] cached=e"
    );
    let b = buffers_of(&softmax, &["n", "f"]);
    assert_eq!(b[0], b[1], "the softmax is written over its scores");
    let reversed = text("reversed", "yr = f32[9,33] reverse(y), dimensions={1}");
    check(&reversed);
    let b = buffers_of(&reversed, &["n", "f"]);
    assert_ne!(b[0], b[1], "a reversed read may not be overwritten");
}

/// Inside a fusion run in steps, the softmax step writes over the scores step it reads (the
/// attention of XLA's optimized transformer: scores, softmax and the second dot in one
/// fusion); read in reverse, the scores keep their own buffer.
#[test]
fn a_softmax_step_writes_over_its_scores_step() {
    let text = |name: &str, read: &str| {
        format!(
            r#"HloModule {name}
{REDUCERS}
fused {{
  a = f32[9,16] parameter(0)
  b = f32[16,33] parameter(1)
  y = f32[9,33] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
  ninf = f32[] constant(-inf)
  z = f32[] constant(0)
  {read}
  mx = f32[9] reduce(yr, ninf), dimensions={{1}}, to_apply=max_f32
  mb = f32[9,33] broadcast(mx), dimensions={{0}}
  d = f32[9,33] subtract(yr, mb)
  e = f32[9,33] exponential(d)
  s = f32[9] reduce(e, z), dimensions={{1}}, to_apply=add_f32
  sb = f32[9,33] broadcast(s), dimensions={{0}}
  o = f32[9,33] divide(e, sb)
  c = f32[33,5] parameter(2)
  ROOT r = f32[9,5] dot(o, c), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}
}}
ENTRY main {{
  a = f32[9,16] parameter(0)
  b = f32[16,33] parameter(1)
  c = f32[33,5] parameter(2)
  ROOT f = f32[9,5] fusion(a, b, c), kind=kCustom, calls=fused
}}
"#
        )
    };
    let softmax = text("softmax", "yr = f32[9,33] multiply(y, y)");
    let plan = check(&softmax);
    assert_eq!(plan.len(), 3, "{plan:?}");
    let b = buffers_of(&softmax, &["y", "o"]);
    assert_eq!(b[0], b[1], "the softmax step is written over the scores");
    let reversed = text("reversed", "yr = f32[9,33] reverse(y), dimensions={1}");
    assert_eq!(check(&reversed).len(), 3);
    let b = buffers_of(&reversed, &["y", "o"]);
    assert_ne!(b[0], b[1], "a reversed read may not be overwritten");
}

/// A variadic reduce at a fusion's root (argmax: values and indices) is one reduce kernel that
/// computes its inputs inline (the `broadcast(iota)` of indices is never written to memory),
/// over rows and over columns.
#[test]
fn a_variadic_reduce_root_is_one_kernel() {
    let text = r#"HloModule argmax
argmax_f32 {
  av = f32[] parameter(0)
  ai = s32[] parameter(1)
  bv = f32[] parameter(2)
  bi = s32[] parameter(3)
  gt = pred[] compare(av, bv), direction=GT
  eq = pred[] compare(av, bv), direction=EQ
  lt = pred[] compare(ai, bi), direction=LT
  tie = pred[] and(eq, lt)
  pick = pred[] or(gt, tie)
  v = f32[] select(pick, av, bv)
  i = s32[] select(pick, ai, bi)
  ROOT t = (f32[], s32[]) tuple(v, i)
}
rows {
  x = f32[16,31] parameter(0)
  io = s32[31] iota(), iota_dimension=0
  ib = s32[16,31] broadcast(io), dimensions={1}
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[16], s32[16]) reduce(x, ib, ninf, zero), dimensions={1}, to_apply=argmax_f32
}
cols {
  x = f32[16,31] parameter(0)
  io = s32[16] iota(), iota_dimension=0
  ib = s32[16,31] broadcast(io), dimensions={0}
  ninf = f32[] constant(-inf)
  zero = s32[] constant(0)
  ROOT r = (f32[31], s32[31]) reduce(x, ib, ninf, zero), dimensions={0}, to_apply=argmax_f32
}
ENTRY main {
  x = f32[16,31] parameter(0)
  a = (f32[16], s32[16]) fusion(x), kind=kInput, calls=rows
  b = (f32[31], s32[31]) fusion(x), kind=kInput, calls=cols
  ROOT t = ((f32[16], s32[16]), (f32[31], s32[31])) tuple(a, b)
}
"#;
    assert_eq!(
        check(text),
        ["Reduce a root=r (reduce)", "Reduce b root=r.1 (reduce)"]
    );
}

/// The vector type of `f32` on this host, as LLVM prints it.
fn f32_vector() -> &'static str {
    let (_, _, features) = axle_codegen_cpu::host_target();
    if features.contains("+avx512f") {
        "<16 x float>"
    } else if features.contains("+avx") {
        "<8 x float>"
    } else {
        "<4 x float>"
    }
}

/// The optimized IR of kernel `name` (the function `@kN.name`) of `text`.
fn kernel_ir(text: &str, name: &str) -> String {
    kernel_ir_with(text, name, false)
}

/// [`kernel_ir`], dots on the precompiled GEMM when `gemm_library` (else generated).
fn kernel_ir_with(text: &str, name: &str, gemm_library: bool) -> String {
    let m = parse_module(text).expect("parses");
    let opts = CpuOptions {
        gemm_library,
        ..Default::default()
    };
    let ir = emit_text(&m, &opts, Emit::LlvmIr).expect("compiles");
    let mut out = String::new();
    let mut inside = false;
    for line in ir.lines() {
        if line.starts_with("define") {
            inside = line.contains(&format!(".{name}("));
        }
        if inside {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(!out.is_empty(), "no kernel {name} in:\n{ir}");
    out
}

#[test]
fn every_kind_of_fusion_kernel_runs_vector_loops() {
    let v = f32_vector();
    // A row kernel (layernorm): vector sums, vector stores of the normalized rows.
    let ln = format!(
        r#"HloModule ln
{REDUCERS}
fused {{
  x = f32[64,256] parameter(0)
  z = f32[] constant(0)
  s1 = f32[64] reduce(x, z), dimensions={{1}}, to_apply=add_f32
  inv = f32[] constant(0.00390625)
  invb = f32[64] broadcast(inv), dimensions={{}}
  mean = f32[64] multiply(s1, invb)
  mb = f32[64,256] broadcast(mean), dimensions={{0}}
  d = f32[64,256] subtract(x, mb)
  d2 = f32[64,256] multiply(d, d)
  s2 = f32[64] reduce(d2, z), dimensions={{1}}, to_apply=add_f32
  rs = f32[64] rsqrt(s2)
  rb = f32[64,256] broadcast(rs), dimensions={{0}}
  ROOT o = f32[64,256] multiply(d, rb)
}}
ENTRY main {{
  x = f32[64,256] parameter(0)
  ROOT f = f32[64,256] fusion(x), kind=kInput, calls=fused
}}
"#
    );
    let ir = kernel_ir(&ln, "f");
    for what in [
        format!("fadd reassoc {v}"),
        format!("fsub {v}"),
        format!("store {v}"),
    ] {
        assert!(ir.contains(&what), "row kernel: no `{what}`:\n{ir}");
    }
    // Sibling column reductions: vector adds into the output rows.
    let cols = format!(
        r#"HloModule cols
{REDUCERS}
fused {{
  x = f32[128,512] parameter(0)
  z = f32[] constant(0)
  a = f32[512] reduce(x, z), dimensions={{0}}, to_apply=add_f32
  x2 = f32[128,512] multiply(x, x)
  b = f32[512] reduce(x2, z), dimensions={{0}}, to_apply=add_f32
  ROOT t = (f32[512], f32[512]) tuple(a, b)
}}
ENTRY main {{
  x = f32[128,512] parameter(0)
  ROOT f = (f32[512], f32[512]) fusion(x), kind=kInput, calls=fused
}}
"#
    );
    let ir = kernel_ir(&cols, "f");
    for what in [
        format!("fadd {v}"),
        format!("fmul {v}"),
        format!("store {v}"),
    ] {
        assert!(ir.contains(&what), "column kernel: no `{what}`:\n{ir}");
    }
    // A GEMM epilogue: bias and ReLU over each finished block in vector registers.
    let epi = dot_epilogue(
        64,
        64,
        256,
        "  bb = f32[64,256] broadcast(bias), dimensions={1}\n  s = f32[64,256] add(d, bb)\n  \
         z = f32[] constant(0)\n  zb = f32[64,256] broadcast(z), dimensions={}\n  \
         ROOT o = f32[64,256] maximum(s, zb)",
        "f32[64,256]",
    );
    let ir = kernel_ir(&epi, "f");
    for what in [
        format!("fadd {v}"),
        format!("fcmp oge {v}"),
        format!("store {v}"),
    ] {
        assert!(ir.contains(&what), "epilogue: no `{what}`:\n{ir}");
    }
    // On the precompiled GEMM: its call per panel, then the epilogue's vector loop.
    let ir = kernel_ir_with(&epi, "f", true);
    for what in [
        "call void @axle_rt_gemm".to_string(),
        format!("fadd {v}"),
        format!("store {v}"),
    ] {
        assert!(ir.contains(&what), "library epilogue: no `{what}`:\n{ir}");
    }
}

/// Runs `m` with outputs of at least `stream_min` bytes written by streaming stores.
fn run_streaming(
    m: &axle_ir::Module,
    args: &[Literal],
    threads: usize,
    stream_min: u64,
) -> Vec<ArrayLiteral> {
    let opts = CpuOptions {
        threads,
        stream_min_bytes: Some(stream_min),
        ..Default::default()
    };
    run_with(m, args, &opts)
}

#[test]
fn streamed_outputs_are_the_bits_of_plain_stores() {
    // A row kernel with full-size outputs of 1, 2, 4 and 8 bytes and a row-size output, on rows
    // whose length (1027) leaves every row but the first misaligned.
    let row = format!(
        r#"HloModule stream_row
{REDUCERS}
fused {{
  p = f32[7,1027] parameter(0)
  ninf = f32[] constant(-inf)
  mx = f32[7] reduce(p, ninf), dimensions={{1}}, to_apply=max_f32
  mb = f32[7,1027] broadcast(mx), dimensions={{0}}
  s = f32[7,1027] subtract(p, mb)
  e = f32[7,1027] exponential(s)
  z = f32[] constant(0)
  sm = f32[7] reduce(e, z), dimensions={{1}}, to_apply=add_f32
  sb = f32[7,1027] broadcast(sm), dimensions={{0}}
  d = f32[7,1027] divide(e, sb)
  h = bf16[7,1027] convert(d)
  w = f64[7,1027] convert(s)
  c = pred[7,1027] compare(e, sb), direction=LT
  ROOT t = (f32[7,1027], bf16[7,1027], f64[7,1027], pred[7,1027], f32[7]) tuple(d, h, w, c, mx)
}}
ENTRY main {{
  p = f32[7,1027] parameter(0)
  ROOT f = (f32[7,1027], bf16[7,1027], f64[7,1027], pred[7,1027], f32[7]) fusion(p), kind=kCustom, calls=fused
}}
"#
    );
    let text = row.as_str();
    let m = parse_module(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    let args = inputs(&m);
    let want = axle_testkit::leaves(&evaluate(&m, &args).expect("the evaluator runs it"));
    let plain = run_streaming(&m, &args, 8, u64::MAX);
    for threads in [1, 8] {
        let streamed = run_streaming(&m, &args, threads, 0);
        assert_eq!(streamed, plain, "{threads} threads, streamed:\n{text}");
    }
    for (k, (w, g)) in want.iter().zip(&plain).enumerate() {
        compare_arrays(w, g, tolerance(w)).unwrap_or_else(|e| panic!("{text}\nout{k}: {e}"));
    }
    if cfg!(target_arch = "x86_64") {
        let asm = |min| {
            let opts = CpuOptions {
                stream_min_bytes: Some(min),
                ..Default::default()
            };
            emit_text(&m, &opts, Emit::Asm).expect("compiles")
        };
        assert!(asm(0).contains("movnt"), "no streaming store:\n{text}");
        assert!(
            !asm(u64::MAX).contains("movnt"),
            "a streaming store:\n{text}"
        );
    }
}
