//! `simplify`: the standard `simplify` pipeline (verifier off, as in a release compile that
//! verifies once at the end) on the shared baseline's 100k-instruction graphs and on generated
//! `layer_stack` graphs of 10k, 100k and 1M instructions, at 1 and 2 rayon threads. The counter
//! is input instructions per second. Run with `cargo bench -p axle-bench`.

use axle::ir::{parse_module, Module, PassManagerOptions, VerifyMode};
use divan::counter::ItemsCount;
use divan::Bencher;

fn main() {
    divan::main();
}

fn baseline(name: &str) -> Module {
    parse_module(&axle_bench::baseline_text(name)).expect("parses")
}

fn run(bencher: Bencher, m: Module, threads: usize) {
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool");
    let pipeline = axle::passes::standard_pipeline("simplify").expect("simplify");
    bencher
        .counter(ItemsCount::new(m.num_live_insts()))
        .with_inputs(|| m.clone())
        .bench_local_values(|mut w| {
            let opts = PassManagerOptions {
                verify: VerifyMode::Off,
                check_changed: false,
                ..Default::default()
            };
            pool.install(|| axle::passes::optimize(&mut w, pipeline, opts))
                .expect("simplify runs");
            w
        });
}

const BASELINE: &[&str] = &["large_layer_stack_100k.hlo.gz", "large_wide_100k.hlo.gz"];

#[divan::bench(args = BASELINE, consts = [1, 2], sample_count = 5)]
fn baseline_100k<const THREADS: usize>(bencher: Bencher, name: &str) {
    run(bencher, baseline(name), THREADS);
}

/// Layers of the generated graph: about 10k, 100k and 1M instructions.
const LAYERS: &[usize] = &[200, 2000, 20000];

#[divan::bench(args = LAYERS, consts = [1, 2], sample_count = 3)]
fn generated_layer_stack<const THREADS: usize>(bencher: Bencher, layers: usize) {
    let m = parse_module(&axle_bench::layer_stack(layers)).expect("parses");
    run(bencher, m, THREADS);
}
