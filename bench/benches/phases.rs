//! `phases`: every phase of `axle compile` on generated `deep_dag` graphs (dots, elementwise ops
//! and row reductions; see `axle_bench::graphs`) of about 10k, 100k and 1M instructions, so the
//! per-instruction cost of each phase and its linearity can be read off one table: parsing the
//! text, verifying, the `cpu` pass pipeline (verifier off) and code generation plus LLVM and the
//! JIT (`axle_codegen_cpu::compile` on the pipeline's output; measured here, not changed by this
//! bench), and code generation of `dot_chains` graphs at 10k and 100k. The counter is instructions per second of the phase's input. Run with
//! `cargo bench -p axle-bench --bench phases` (the 1M code-generation point takes minutes).

use axle::ir::{parse_module, Module, PassManagerOptions, VerifyMode};
use axle_bench::graphs::Family;
use divan::counter::ItemsCount;
use divan::Bencher;

fn main() {
    divan::main();
}

/// Target instruction counts.
const SIZES: &[usize] = &[10_000, 100_000, 1_000_000];

fn text(size: usize) -> String {
    Family::DeepDag.generate(size, 0)
}

fn pipelined(size: usize) -> Module {
    let mut m = parse_module(&text(size)).expect("parses");
    cpu_pipeline(&mut m);
    m
}

fn cpu_pipeline(m: &mut Module) {
    let opts = PassManagerOptions {
        verify: VerifyMode::Off,
        check_changed: false,
        ..Default::default()
    };
    let pipeline = axle::passes::standard_pipeline("cpu").expect("the cpu pipeline");
    axle::passes::optimize(m, pipeline, opts).expect("the cpu pipeline runs");
}

#[divan::bench(args = SIZES, sample_count = 5)]
fn parse(bencher: Bencher, size: usize) {
    let text = text(size);
    let n = parse_module(&text).expect("parses").num_live_insts();
    bencher
        .counter(ItemsCount::new(n))
        .bench(|| parse_module(divan::black_box(&text)).expect("parses"));
}

#[divan::bench(args = SIZES, sample_count = 5)]
fn verify(bencher: Bencher, size: usize) {
    let m = parse_module(&text(size)).expect("parses");
    bencher
        .counter(ItemsCount::new(m.num_live_insts()))
        .bench(|| axle::ir::verify::verify(divan::black_box(&m)).expect("verifies"));
}

#[divan::bench(args = SIZES, sample_count = 3)]
fn pass_pipeline(bencher: Bencher, size: usize) {
    let m = parse_module(&text(size)).expect("parses");
    bencher
        .counter(ItemsCount::new(m.num_live_insts()))
        .with_inputs(|| m.clone())
        .bench_local_values(|mut w| {
            cpu_pipeline(&mut w);
            w
        });
}

#[divan::bench(args = SIZES, sample_count = 1, sample_size = 1)]
fn codegen(bencher: Bencher, size: usize) {
    codegen_of(bencher, pipelined(size));
}

/// Code generation of `dot_chains` graphs (a dot in every layer, each layer with a constant of
/// its own): a kernel call per layer sharing a handful of functions, so the entry point's code
/// and the per-kernel work around LLVM are most of it.
#[divan::bench(args = [10_000, 100_000], sample_count = 1, sample_size = 1)]
fn codegen_dot_chains(bencher: Bencher, size: usize) {
    let mut m = parse_module(&Family::DotChains.generate(size, 0)).expect("parses");
    cpu_pipeline(&mut m);
    codegen_of(bencher, m);
}

fn codegen_of(bencher: Bencher, m: Module) {
    let opts = axle_codegen_cpu::CpuOptions::default();
    bencher
        .counter(ItemsCount::new(m.num_live_insts()))
        .bench(|| axle_codegen_cpu::compile(divan::black_box(&m), &opts).expect("compiles"));
}
