//! `fusion`: the fusion passes (`fusion` then `multi-output-fusion`, cpu target, verifier off)
//! on modules already simplified (the input of the fusion passes in the standard `cpu`
//! pipeline): the shared baseline's 100k-instruction graphs and 10k-instruction deep DAG, and
//! generated `layer_stack` graphs of 10k, 100k and 1M instructions for the linearity check, at
//! 1 and 2 rayon threads. The counter is instructions per second of the simplified input. Run
//! with `cargo bench -p axle-bench --bench fusion`.

use axle::ir::{parse_module, Module, PassManagerOptions, VerifyMode};
use divan::counter::ItemsCount;
use divan::Bencher;

fn main() {
    divan::main();
}

const FUSION: &str = "fusion{target=cpu},multi-output-fusion{target=cpu}";

fn opts() -> PassManagerOptions {
    PassManagerOptions {
        verify: VerifyMode::Off,
        check_changed: false,
        ..Default::default()
    }
}

fn baseline(name: &str) -> Module {
    parse_module(&axle_bench::baseline_text(name)).expect("parses")
}

/// `m` after the `simplify` pipeline.
fn simplified(mut m: Module) -> Module {
    let pipeline = axle::passes::standard_pipeline("simplify").expect("simplify");
    axle::passes::optimize(&mut m, pipeline, opts()).expect("simplify runs");
    m.compact();
    m
}

fn run(bencher: Bencher, m: Module, threads: usize) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool");
    bencher
        .counter(ItemsCount::new(m.num_live_insts()))
        .with_inputs(|| m.clone())
        .bench_local_values(|mut w| {
            pool.install(|| axle::passes::optimize(&mut w, FUSION, opts()))
                .expect("fusion runs");
            w
        });
}

const BASELINE: &[&str] = &[
    "large_layer_stack_100k.hlo.gz",
    "large_wide_100k.hlo.gz",
    "large_deep_dag_10k.hlo",
];

#[divan::bench(args = BASELINE, consts = [1, 2], sample_count = 5)]
fn baseline_graphs<const THREADS: usize>(bencher: Bencher, name: &str) {
    run(bencher, simplified(baseline(name)), THREADS);
}

/// Layers of the generated graph: about 10k, 100k and 1M instructions.
const LAYERS: &[usize] = &[200, 2000, 20000];

#[divan::bench(args = LAYERS, consts = [1, 2], sample_count = 3)]
fn generated_layer_stack<const THREADS: usize>(bencher: Bencher, layers: usize) {
    let m = parse_module(&axle_bench::layer_stack(layers)).expect("parses");
    run(bencher, simplified(m), THREADS);
}
