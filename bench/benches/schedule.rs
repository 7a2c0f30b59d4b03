//! `schedule`: memory-aware scheduling (`memory-schedule{heuristic=best}`: flatten, then list,
//! dfs and post-order per computation with the best simulated peak kept) and buffer assignment
//! (program, liveness, may-aliases, heap simulator with three strategies) on the shared
//! baseline's 100k- and 300k-instruction graphs and on generated `layer_stack` graphs of 10k,
//! 100k and 1M instructions, at 1 and 2 rayon threads. The counter is instructions per second.
//! Run with `cargo bench -p axle-bench --bench schedule`.

use axle::ir::{parse_module, Module};
use axle::schedule::{assign, schedule_module, Heuristic, HloRules};
use divan::counter::ItemsCount;
use divan::Bencher;

fn main() {
    divan::main();
}

fn baseline(name: &str) -> Module {
    parse_module(&axle_bench::baseline_text(name)).expect("parses")
}

fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a thread pool")
}

/// Scheduling plus assignment, from an unscheduled module.
fn both(bencher: Bencher, m: Module, threads: usize) {
    let pool = pool(threads);
    bencher
        .counter(ItemsCount::new(m.num_live_insts()))
        .with_inputs(|| m.clone())
        .bench_local_values(|mut w| {
            pool.install(|| {
                schedule_module(&mut w, Heuristic::Best).expect("schedules");
                let a = assign(&w, &HloRules).expect("assigns");
                (w, a.temp_bytes)
            })
        });
}

/// Scheduling alone.
fn schedule_only(bencher: Bencher, m: Module, threads: usize) {
    let pool = pool(threads);
    bencher
        .counter(ItemsCount::new(m.num_live_insts()))
        .with_inputs(|| m.clone())
        .bench_local_values(|mut w| {
            pool.install(|| schedule_module(&mut w, Heuristic::Best).expect("schedules"));
            w
        });
}

/// Assignment alone, on a scheduled module.
fn assign_only(bencher: Bencher, mut m: Module, threads: usize) {
    let pool = pool(threads);
    schedule_module(&mut m, Heuristic::Best).expect("schedules");
    bencher
        .counter(ItemsCount::new(m.num_live_insts()))
        .bench_local(|| pool.install(|| assign(&m, &HloRules).expect("assigns").temp_bytes));
}

const BASELINE: &[&str] = &[
    "large_layer_stack_100k.hlo.gz",
    "large_wide_100k.hlo.gz",
    "large_wide_300k.hlo.gz",
];

#[divan::bench(args = BASELINE, consts = [1, 2], sample_count = 5)]
fn baseline_schedule_and_assign<const THREADS: usize>(bencher: Bencher, name: &str) {
    both(bencher, baseline(name), THREADS);
}

/// Layers of the generated graph: about 10k, 100k and 1M instructions.
const LAYERS: &[usize] = &[200, 2000, 20000];

#[divan::bench(args = LAYERS, consts = [1, 2], sample_count = 3)]
fn generated_schedule_and_assign<const THREADS: usize>(bencher: Bencher, layers: usize) {
    let m = parse_module(&axle_bench::layer_stack(layers)).expect("parses");
    both(bencher, m, THREADS);
}

#[divan::bench(args = LAYERS, sample_count = 3)]
fn generated_schedule(bencher: Bencher, layers: usize) {
    let m = parse_module(&axle_bench::layer_stack(layers)).expect("parses");
    schedule_only(bencher, m, 1);
}

#[divan::bench(args = LAYERS, sample_count = 3)]
fn generated_assign(bencher: Bencher, layers: usize) {
    let m = parse_module(&axle_bench::layer_stack(layers)).expect("parses");
    assign_only(bencher, m, 1);
}
