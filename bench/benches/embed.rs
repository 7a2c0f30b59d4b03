//! `embed`: the per-call cost of running a small compiled model through the embedding API, as a
//! framework author calling Axle from Rust sees it: the 2-layer MLP of `tiny_mlp` (batch 32,
//! 128 -> 128 -> 10, about a million flops) compiled once on `cpu`, each call reading borrowed inputs and writing reused
//! outputs (`Compiled::run`).
//!
//! - `run_mlp`: default threads (the pool, `AXLE_CPU_THREADS` or every core) against one thread;
//!   with threads split by cost, a model this small runs on the calling thread either way.
//! - `run_mlp_raw`: the code generator's `CpuExecutable::execute` without the facade (the
//!   facade's own overhead is the difference).
//! - `shared_callers`: 1 and 2 threads calling one executable at once (divan's `threads`), each
//!   timing its own calls: callers sharing the pool do not slow each other down.
//!
//! Run with `cargo bench -p axle-bench --bench embed`.

use axle::{Array, ArrayRef, CompileOptions, Compiled};
use divan::Bencher;

fn main() {
    divan::main();
}

/// The model's sizes: batch, input, hidden, output.
const MLP: [i64; 4] = [32, 128, 128, 10];
/// The parameters' dimensions (a `1` column is a vector).
const DIMS: [(i64, i64); 5] = [
    (MLP[0], MLP[1]),
    (MLP[1], MLP[2]),
    (MLP[2], 1),
    (MLP[2], MLP[3]),
    (MLP[3], 1),
];

fn data() -> Vec<Vec<f32>> {
    DIMS.iter()
        .map(|&(r, c)| (0..r * c).map(|i| ((i % 17) as f32 - 8.0) / 16.0).collect())
        .collect()
}

fn args(data: &[Vec<f32>]) -> Vec<ArrayRef<'_>> {
    data.iter()
        .zip(DIMS)
        .map(|(d, (r, c))| {
            if c == 1 {
                ArrayRef::vector(d)
            } else {
                ArrayRef::from_bytes(
                    axle::ir::ElementType::F32,
                    &[r, c],
                    ArrayRef::vector(d).bytes(),
                )
                .expect("dims match")
            }
        })
        .collect()
}

fn compiled(threads: Option<usize>) -> Compiled {
    let m = axle_bench::tiny_mlp(MLP[0], MLP[1], MLP[2], MLP[3]).expect("builds");
    let opts = CompileOptions {
        threads,
        ..Default::default()
    };
    axle::compile("cpu", m, &opts).expect("compiles")
}

/// `0` stands for the default thread count.
#[divan::bench(args = [0, 1])]
fn run_mlp(bencher: Bencher, threads: usize) {
    let exe = compiled((threads > 0).then_some(threads));
    let data = data();
    let args = args(&data);
    let mut outs: Vec<Array> = exe.alloc_outputs().expect("outputs");
    bencher.bench_local(|| exe.run(&args, &mut outs).expect("runs"));
}

#[divan::bench(args = [0, 1])]
fn run_mlp_raw(bencher: Bencher, threads: usize) {
    let exe = compiled((threads > 0).then_some(threads));
    let jit = exe
        .executable()
        .as_any()
        .and_then(|a| a.downcast_ref::<axle::cpu::CpuExecutable>())
        .expect("a cpu executable")
        .jitted();
    let data = data();
    let inputs: Vec<&[u8]> = args(&data).iter().map(|a| a.bytes()).collect();
    let mut outs = jit.alloc_outputs();
    bencher.bench_local(|| jit.execute(&inputs, &mut outs).expect("runs"));
}

#[divan::bench(threads = [1, 2])]
fn shared_callers(bencher: Bencher) {
    let exe = compiled(None);
    let data = data();
    let args = args(&data);
    bencher
        .with_inputs(|| exe.alloc_outputs().expect("outputs"))
        .bench_refs(|outs| exe.run(&args, outs).expect("runs"));
}
