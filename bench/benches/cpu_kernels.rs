//! `cpu_kernels`: the CPU backend's GEMM, sort and reduction kernels on their own, so that
//! regressions show: square matmuls (f32, and bf16 operands widened in the packing), the dots of
//! an MLP training step (plain and transposed operands), an MLP layer's output fusion (bias and
//! ReLU after the dot) with its epilogue on the register tiles and on finished blocks,
//! attention shaped batch dots (and their heads read through views of one projection, in place
//! or materialized first), the dots of training as JAX emits them (through the `cpu` pipeline),
//! `sort_1M`'s comparator (radix sort) on 64k and 1M keys and a key-value argsort, top-k by
//! selection and by sort, a full and a row reduction, a softmax row kernel (streaming stores),
//! and exact-`erf` GELU (inline `erf` and libm's). Each module is compiled once; the timed part is one run into reused
//! output buffers. Counters: flops for dots, elements for sorts, bytes read for reductions. Run
//! with `cargo bench -p axle-bench --bench cpu_kernels`.

use axle::ir::{parse_module, ElementType, Literal};
use axle_codegen_cpu::{compile, CpuExecutable, CpuOptions, Epilogues};
use divan::counter::{BytesCount, ItemsCount};
use divan::Bencher;

fn main() {
    divan::main();
}

/// A compiled module with generated inputs.
struct Prepared {
    exe: CpuExecutable,
    inputs: Vec<Vec<u8>>,
}

fn prepare(text: &str) -> Prepared {
    prepare_with(text, &CpuOptions::default())
}

fn prepare_with(text: &str, opts: &CpuOptions) -> Prepared {
    let m = parse_module(text).expect("the bench module parses");
    let inputs = axle::run::generate_inputs(&m, 0)
        .expect("the bench inputs fit in memory")
        .into_iter()
        .map(|l| match l {
            Literal::Array(a) => a.data,
            Literal::Tuple(_) => panic!("array parameters"),
        })
        .collect();
    let exe = compile(&m, opts).expect("the bench module compiles");
    Prepared { exe, inputs }
}

fn run(bencher: Bencher, p: &Prepared) {
    let refs: Vec<&[u8]> = p.inputs.iter().map(|d| &d[..]).collect();
    let mut outs = p.exe.alloc_outputs();
    bencher.bench_local(|| p.exe.execute(&refs, &mut outs).expect("runs"));
}

fn matmul(ty: ElementType, n: i64) -> String {
    let t = ty.name();
    format!(
        "HloModule mm\nENTRY main {{\n  a = {t}[{n},{n}] parameter(0)\n  b = {t}[{n},{n}] parameter(1)\n  ROOT d = f32[{n},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
    )
}

/// `C = A @ B` on square `f32` matrices.
#[divan::bench(args = [128, 512, 1024, 2048])]
fn gemm_f32(bencher: Bencher, n: i64) {
    let p = prepare(&matmul(ElementType::F32, n));
    run(
        bencher.counter(ItemsCount::new((2 * n * n * n) as usize)),
        &p,
    );
}

/// `C = A @ B` with `bf16` operands and an `f32` result.
#[divan::bench(args = [512])]
fn gemm_bf16_operands(bencher: Bencher, n: i64) {
    let p = prepare(&matmul(ElementType::BF16, n));
    run(
        bencher.counter(ItemsCount::new((2 * n * n * n) as usize)),
        &p,
    );
}

/// The dots of an MLP training step at batch 256, width 1024 (`mlp3_train_step_b256_w1024`):
/// the forward product `[256, 1024] x [1024, 1024]`, the input gradient against the transposed
/// weight, and the weight gradient `[256, 1024]^T x [256, 1024]` (the left operand transposed,
/// a contraction of 256).
#[divan::bench(args = ["forward", "input_grad", "weight_grad"])]
fn gemm_train_step(bencher: Bencher, which: &str) {
    // Operand shapes, result shape, and the contracting dimension of each operand.
    let (lhs, rhs, out, lc, rc) = match which {
        "forward" => ("f32[256,1024]", "f32[1024,1024]", "f32[256,1024]", 1, 0),
        "input_grad" => ("f32[256,1024]", "f32[1024,1024]", "f32[256,1024]", 1, 1),
        _ => ("f32[256,1024]", "f32[256,1024]", "f32[1024,1024]", 0, 0),
    };
    let p = prepare(&format!(
        "HloModule ts\nENTRY main {{\n  a = {lhs} parameter(0)\n  b = {rhs} parameter(1)\n  ROOT d = {out} dot(a, b), lhs_contracting_dims={{{lc}}}, rhs_contracting_dims={{{rc}}}\n}}\n"
    ));
    run(
        bencher.counter(ItemsCount::new(2u64 * 256 * 1024 * 1024)),
        &p,
    );
}

/// An MLP layer as one output fusion, `relu(x @ w + bias)` of `[256, 1024] x [1024, 1024]`,
/// with the epilogue applied on each GEMM register tile on its last `K` block, from its
/// registers (`registers`) or through a tile buffer (`tiles`), or to each finished block after
/// the GEMM stored it (`blocks`).
#[divan::bench(args = ["registers", "tiles", "blocks"])]
fn gemm_bias_relu(bencher: Bencher, epilogue: &str) {
    let text = "HloModule layer\nfused {\n  x = f32[256,1024] parameter(0)\n  w = f32[1024,1024] parameter(1)\n  b = f32[1024] parameter(2)\n  d = f32[256,1024] dot(x, w), lhs_contracting_dims={1}, rhs_contracting_dims={0}\n  bb = f32[256,1024] broadcast(b), dimensions={1}\n  s = f32[256,1024] add(d, bb)\n  z = f32[] constant(0)\n  zb = f32[256,1024] broadcast(z), dimensions={}\n  ROOT r = f32[256,1024] maximum(s, zb)\n}\nENTRY main {\n  x = f32[256,1024] parameter(0)\n  w = f32[1024,1024] parameter(1)\n  b = f32[1024] parameter(2)\n  ROOT f = f32[256,1024] fusion(x, w, b), kind=kOutput, calls=fused\n}\n";
    let opts = CpuOptions {
        epilogues: match epilogue {
            "registers" => Epilogues::Registers,
            "tiles" => Epilogues::Tiles,
            _ => Epilogues::Blocks,
        },
        ..Default::default()
    };
    let p = prepare_with(text, &opts);
    run(
        bencher.counter(ItemsCount::new(2u64 * 256 * 1024 * 1024)),
        &p,
    );
}

/// Attention's dots over 8 heads: the scores `[512, 64] x [64, 512]` (keys transposed) and
/// the values `[512, 512] x [512, 64]` (few columns: the left operand is read unpacked).
#[divan::bench(args = ["scores", "values"])]
fn gemm_attention_heads(bencher: Bencher, which: &str) {
    let (lhs, rhs, out, rc) = match which {
        "scores" => ("f32[8,512,64]", "f32[8,512,64]", "f32[8,512,512]", 2),
        _ => ("f32[8,512,512]", "f32[8,512,64]", "f32[8,512,64]", 1),
    };
    let p = prepare(&format!(
        "HloModule att\nENTRY main {{\n  a = {lhs} parameter(0)\n  b = {rhs} parameter(1)\n  ROOT d = {out} dot(a, b), lhs_batch_dims={{0}}, lhs_contracting_dims={{2}}, rhs_batch_dims={{0}}, rhs_contracting_dims={{{rc}}}\n}}\n"
    ));
    run(
        bencher.counter(ItemsCount::new(2u64 * 8 * 512 * 512 * 64)),
        &p,
    );
}

/// Attention's scores over 8 heads cut out of one `q|k|v` projection `[512, 1536]` (a slice,
/// a reshape into heads, a transpose making heads the batch, on both sides), as the
/// transformer block has them: `views`, the dot's output fusion with those views as its
/// prologue (the GEMM reads the projection in place); `copies`, the same unfused, so the
/// views are materialized by kernels of their own before the GEMM reads them.
#[divan::bench(args = ["views", "copies"])]
fn gemm_attention_head_views(bencher: Bencher, which: &str) {
    let body = "  sq = f32[512,512] slice(x), slice={[0:512], [0:512]}\n  rq = f32[512,8,64] reshape(sq)\n  q = f32[8,512,64] transpose(rq), dimensions={1,0,2}\n  sk = f32[512,512] slice(x), slice={[0:512], [512:1024]}\n  rk = f32[512,8,64] reshape(sk)\n  k = f32[8,512,64] transpose(rk), dimensions={1,0,2}\n  ROOT d = f32[8,512,512] dot(q, k), lhs_batch_dims={0}, lhs_contracting_dims={2}, rhs_batch_dims={0}, rhs_contracting_dims={2}\n";
    let text = match which {
        "views" => format!(
            "HloModule heads\nfused {{\n  x = f32[512,1536] parameter(0)\n{body}}}\nENTRY main {{\n  x = f32[512,1536] parameter(0)\n  ROOT f = f32[8,512,512] fusion(x), kind=kOutput, calls=fused\n}}\n"
        ),
        _ => format!("HloModule heads\nENTRY main {{\n  x = f32[512,1536] parameter(0)\n{body}}}\n"),
    };
    let p = prepare(&text);
    run(
        bencher.counter(ItemsCount::new(2u64 * 8 * 512 * 512 * 64)),
        &p,
    );
}

/// The dots of training as JAX emits them, compiled through the `cpu` pipeline (whose
/// `dot-canonicalize` merges several free or contracting dimensions into the GEMM's form, so a
/// regression to the elemental loop shows here): GPT-2's dense layer on a rank-3 activation,
/// the tied vocabulary projection (the weight transposed; an 8192-word vocabulary to keep the
/// bench short) and its weight gradient, BERT's weight gradient (batch and sequence both
/// contracted), attention's batched scores against transposed keys, a bf16 dense layer
/// accumulating in f32, and one decoding step's matrix-vector products (the vocabulary
/// projection against the transposed weight, a dense layer).
#[divan::bench(args = ["dense", "vocab", "vocab_grad", "weight_grad", "scores", "dense_bf16", "decode_vocab", "decode_dense"])]
fn gemm_training_dots(bencher: Bencher, which: &str) {
    // Operand shapes, result shape, dimension numbers and multiply-adds.
    let (lhs, rhs, out, dims, macs): (&str, &str, &str, &str, u64) = match which {
        "dense" => ("f32[1,128,768]", "f32[768,2304]", "f32[1,128,2304]",
            "lhs_contracting_dims={2}, rhs_contracting_dims={0}", 128 * 768 * 2304),
        "vocab" => ("f32[1,128,768]", "f32[8192,768]", "f32[1,128,8192]",
            "lhs_contracting_dims={2}, rhs_contracting_dims={1}", 128 * 768 * 8192),
        "vocab_grad" => ("f32[1,128,8192]", "f32[1,128,768]", "f32[8192,768]",
            "lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}", 128 * 768 * 8192),
        "weight_grad" => ("f32[16,128,256]", "f32[16,128,1024]", "f32[256,1024]",
            "lhs_contracting_dims={0,1}, rhs_contracting_dims={0,1}", 16 * 128 * 256 * 1024),
        "scores" => ("f32[16,4,128,64]", "f32[16,4,128,64]", "f32[16,4,128,128]",
            "lhs_batch_dims={0,1}, lhs_contracting_dims={3}, rhs_batch_dims={0,1}, rhs_contracting_dims={3}",
            16 * 4 * 128 * 128 * 64),
        "decode_vocab" => ("f32[1,1,768]", "f32[8192,768]", "f32[1,1,8192]",
            "lhs_contracting_dims={2}, rhs_contracting_dims={1}", 768 * 8192),
        "decode_dense" => ("f32[1,1,768]", "f32[768,3072]", "f32[1,1,3072]",
            "lhs_contracting_dims={2}, rhs_contracting_dims={0}", 768 * 3072),
        _ => ("bf16[4,128,1024]", "bf16[1024,1024]", "f32[4,128,1024]",
            "lhs_contracting_dims={2}, rhs_contracting_dims={0}", 4 * 128 * 1024 * 1024),
    };
    let text = format!(
        "HloModule train\nENTRY main {{\n  a = {lhs} parameter(0)\n  b = {rhs} parameter(1)\n  ROOT d = {out} dot(a, b), {dims}\n}}\n"
    );
    let m = parse_module(&text).expect("the bench module parses");
    let opts = axle::backend::CompileOptions {
        pipeline: Some("cpu".into()),
        ..Default::default()
    };
    let m = axle::backend::prepare_module("cpu", m, &opts).expect("the cpu pipeline runs");
    let p = prepare(&axle::ir::print_module(&m));
    run(bencher.counter(ItemsCount::new((2 * macs) as usize)), &p);
}

/// The convolutions of a ResNet training step as JAX emits them, through the `cpu` pipeline:
/// a forward 3x3 convolution with deep channels on a small image (a kernel larger than cache),
/// the data gradient of a stride-2 convolution (a base-dilated input), and a weight gradient
/// (the batch contracted as input features over a 16x16 window).
#[divan::bench(args = ["fwd_deep", "bwd_data_dilated", "bwd_filter"])]
fn conv_training(bencher: Bencher, which: &str) {
    let (lhs, rhs, out, attrs, macs): (&str, &str, &str, &str, u64) = match which {
        "fwd_deep" => (
            "f32[16,4,4,512]",
            "f32[3,3,512,512]",
            "f32[16,4,4,512]",
            "window={size=3x3 pad=1_1x1_1}, dim_labels=b01f_01io->b01f",
            16 * 16 * 512 * 9 * 512,
        ),
        "bwd_data_dilated" => (
            "f32[16,4,4,512]",
            "f32[3,3,512,256]",
            "f32[16,8,8,256]",
            "window={size=3x3 pad=1_2x1_2 lhs_dilate=2x2}, dim_labels=b01f_01io->b01f",
            16 * 64 * 256 * 9 * 512 / 4,
        ),
        _ => (
            "f32[16,16,16,128]",
            "f32[16,16,16,128]",
            "f32[3,3,128,128]",
            "window={size=16x16 pad=1_1x1_1}, dim_labels=f01b_i01o->01bf",
            9 * 128 * 128 * 16 * 16 * 16,
        ),
    };
    let text = format!(
        "HloModule conv\nENTRY main {{\n  a = {lhs} parameter(0)\n  b = {rhs} parameter(1)\n  ROOT c = {out} convolution(a, b), {attrs}\n}}\n"
    );
    let m = parse_module(&text).expect("the bench module parses");
    let opts = axle::backend::CompileOptions {
        pipeline: Some("cpu".into()),
        ..Default::default()
    };
    let m = axle::backend::prepare_module("cpu", m, &opts).expect("the cpu pipeline runs");
    let p = prepare(&axle::ir::print_module(&m));
    run(bencher.counter(ItemsCount::new((2 * macs) as usize)), &p);
}

const JAX_F32_LT: &str = "cmp {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  nan = f32[] constant(nan)\n  zero = f32[] constant(0)\n  ane = pred[] compare(a, a), direction=NE\n  aeq = pred[] compare(a, zero), direction=EQ\n  az = f32[] select(aeq, zero, a)\n  x = f32[] select(ane, nan, az)\n  bne = pred[] compare(b, b), direction=NE\n  beq = pred[] compare(b, zero), direction=EQ\n  bz = f32[] select(beq, zero, b)\n  y = f32[] select(bne, nan, bz)\n  ROOT lt = pred[] compare(x, y), direction=LT, type=TOTALORDER\n}\n";

/// `jnp.sort` of `f32` keys (the comparator of `sort_1M`: NaN and -0 canonicalized).
#[divan::bench(args = [65536, 1048576])]
fn sort_f32(bencher: Bencher, n: usize) {
    let p = prepare(&format!(
        "HloModule s\n{JAX_F32_LT}\nENTRY main {{\n  x = f32[{n}] parameter(0)\n  ROOT s = f32[{n}] sort(x), dimensions={{0}}, is_stable=true, to_apply=cmp\n}}\n"
    ));
    run(bencher.counter(ItemsCount::new(n)), &p);
}

/// `jnp.argsort` of `f32` keys: the keys carry an `s32` iota.
#[divan::bench(args = [1048576])]
fn argsort_f32(bencher: Bencher, n: usize) {
    let cmp = JAX_F32_LT.replace(
        "  nan =",
        "  i = s32[] parameter(2)\n  j = s32[] parameter(3)\n  nan =",
    );
    let p = prepare(&format!(
        "HloModule s\n{cmp}\nENTRY main {{\n  x = f32[{n}] parameter(0)\n  i = s32[{n}] iota(), iota_dimension=0\n  s = (f32[{n}], s32[{n}]) sort(x, i), dimensions={{0}}, is_stable=true, to_apply=cmp\n  ROOT r = s32[{n}] get-tuple-element(s), index=1\n}}\n"
    ));
    run(bencher.counter(ItemsCount::new(n)), &p);
}

const ADD: &str =
    "add {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT s = f32[] add(a, b)\n}\n";

/// A sum of `n` floats to one.
#[divan::bench(args = [16777216])]
fn reduce_all_f32(bencher: Bencher, n: usize) {
    let p = prepare(&format!(
        "HloModule r\n{ADD}\nENTRY main {{\n  x = f32[{n}] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[] reduce(x, z), dimensions={{0}}, to_apply=add\n}}\n"
    ));
    run(bencher.counter(BytesCount::new(4 * n)), &p);
}

/// Row sums of a `[4096, 4096]` matrix (softmax's reduction).
#[divan::bench]
fn reduce_rows_f32(bencher: Bencher) {
    let p = prepare(&format!(
        "HloModule r\n{ADD}\nENTRY main {{\n  x = f32[4096,4096] parameter(0)\n  z = f32[] constant(0)\n  ROOT r = f32[4096] reduce(x, z), dimensions={{1}}, to_apply=add\n}}\n"
    ));
    run(bencher.counter(BytesCount::new(4u64 * 4096 * 4096)), &p);
}

/// `lax.top_k` of 256 rows of 32768 `f32`: `k = 8` keeps its best by selection, `k = 64` sorts
/// each row (radix).
#[divan::bench(args = [8, 64])]
fn topk_f32(bencher: Bencher, k: usize) {
    let p = prepare(&format!(
        "HloModule t\nENTRY main {{\n  x = f32[256,32768] parameter(0)\n  ROOT t = (f32[256,{k}], s32[256,{k}]) topk(x), k={k}, largest=true\n}}\n"
    ));
    run(bencher.counter(ItemsCount::new(256usize * 32768)), &p);
}

/// Softmax over the rows of a `[4096, 4096]` matrix, one row kernel whose 64 MB output is
/// written with streaming stores (bytes: the input read and the output written).
#[divan::bench]
fn softmax_rows_f32(bencher: Bencher) {
    let max = "max {\n  a = f32[] parameter(0)\n  b = f32[] parameter(1)\n  ROOT m = f32[] maximum(a, b)\n}\n";
    let p = prepare(&format!(
        "HloModule sm\n{ADD}{max}\nfused {{\n  x = f32[4096,4096] parameter(0)\n  ninf = f32[] constant(-inf)\n  mx = f32[4096] reduce(x, ninf), dimensions={{1}}, to_apply=max\n  mb = f32[4096,4096] broadcast(mx), dimensions={{0}}\n  s = f32[4096,4096] subtract(x, mb)\n  e = f32[4096,4096] exponential(s)\n  z = f32[] constant(0)\n  sm = f32[4096] reduce(e, z), dimensions={{1}}, to_apply=add\n  sb = f32[4096,4096] broadcast(sm), dimensions={{0}}\n  ROOT d = f32[4096,4096] divide(e, sb)\n}}\nENTRY main {{\n  x = f32[4096,4096] parameter(0)\n  ROOT f = f32[4096,4096] fusion(x), kind=kCustom, calls=fused\n}}\n"
    ));
    run(bencher.counter(BytesCount::new(2 * 4u64 * 4096 * 4096)), &p);
}

/// Exact GELU, `0.5 x (1 + erf(x / sqrt(2)))`, over `f32[4, 196, 3072]` (an MLP-Mixer or ViT
/// MLP activation at batch 4), fused as the `cpu` pipeline fuses it: one vector loop with the inline `erf`, or a scalar loop that calls the C
/// library's `erff` per element (`CpuOptions::libm_math`). Bytes: the input read and the output
/// written.
#[divan::bench(args = ["inline", "libm"])]
fn gelu_erf_f32(bencher: Bencher, math: &str) {
    let t = "f32[4,196,3072]";
    let opts = CpuOptions {
        libm_math: math == "libm",
        ..Default::default()
    };
    let p = prepare_with(
        &format!(
            "HloModule gelu\nfused {{\n  x = {t} parameter(0)\n  c = f32[] constant(0.70710677)\n  cb = {t} broadcast(c), dimensions={{}}\n  xs = {t} multiply(x, cb)\n  e = {t} erf(xs)\n  one = f32[] constant(1)\n  ob = {t} broadcast(one), dimensions={{}}\n  p = {t} add(e, ob)\n  h = f32[] constant(0.5)\n  hb = {t} broadcast(h), dimensions={{}}\n  xh = {t} multiply(x, hb)\n  ROOT g = {t} multiply(xh, p)\n}}\nENTRY main {{\n  x = {t} parameter(0)\n  ROOT f = {t} fusion(x), kind=kLoop, calls=fused\n}}\n"
        ),
        &opts,
    );
    run(
        bencher.counter(BytesCount::new(2 * 4u64 * 4 * 196 * 3072)),
        &p,
    );
}
