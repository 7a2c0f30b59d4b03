//! `plan`: planning the kernels of modules of `N` loop fusions and `N` reduction fusions (a
//! chain, each fusion with its own computation), at 1k, 4k and 16k fusions, with fusions per
//! second as the throughput counter: linear planning shows as a flat rate (it used to scan the
//! whole module once per fusion). Run with `cargo bench -p axle-codegen-nvptx --bench plan`.

use axle_codegen_nvptx::plan_kernels;
use axle_ir::{parse_module, Module};
use divan::counter::ItemsCount;
use divan::Bencher;

fn main() {
    divan::main();
}

/// A chain of `n` fusions over `f32[64,32]`: loop fusions (`negate`) or row reductions with
/// an elementwise input (`reduce(exp(p))` then a broadcast back, alternately).
fn chain(n: usize, reductions: bool) -> Module {
    let mut t = String::from(
        "HloModule chain\nadd {\n  x = f32[] parameter(0)\n  y = f32[] parameter(1)\n  \
         ROOT s = f32[] add(x, y)\n}\n",
    );
    for i in 0..n {
        if reductions {
            t += &format!(
                "fused_{i} {{\n  p = f32[64,32] parameter(0)\n  e = f32[64,32] exponential(p)\n  \
                 z = f32[] constant(0)\n  r = f32[64] reduce(e, z), dimensions={{1}}, \
                 to_apply=add\n  b = f32[64,32] broadcast(r), dimensions={{0}}\n  \
                 ROOT d = f32[64,32] divide(e, b)\n}}\n"
            );
        } else {
            t += &format!(
                "fused_{i} {{\n  p = f32[64,32] parameter(0)\n  ROOT n = f32[64,32] negate(p)\n}}\n"
            );
        }
    }
    t += "ENTRY e {\n  f0 = f32[64,32] parameter(0)\n";
    for i in 0..n {
        let kind = if reductions { "kInput" } else { "kLoop" };
        t += &format!(
            "  {}f{} = f32[64,32] fusion(f{i}), kind={kind}, calls=fused_{i}\n",
            if i + 1 == n { "ROOT " } else { "" },
            i + 1
        );
    }
    t += "}\n";
    parse_module(&t).unwrap_or_else(|e| panic!("{e}"))
}

#[divan::bench(args = [1_000, 4_000, 16_000])]
fn loop_fusions(bencher: Bencher, n: usize) {
    let m = chain(n, false);
    bencher
        .counter(ItemsCount::new(n))
        .bench(|| plan_kernels(&m).unwrap().len());
}

#[divan::bench(args = [1_000, 4_000, 16_000])]
fn reduction_fusions(bencher: Bencher, n: usize) {
    let m = chain(n, true);
    bencher
        .counter(ItemsCount::new(n))
        .bench(|| plan_kernels(&m).unwrap().len());
}
