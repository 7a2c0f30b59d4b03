//! `parse_scaling`: how parsing (and verification) time grows with the shapes of text that
//! used to make it quadratic, at 1k, 10k and 100k items, with items per second as the
//! throughput counter (linear scaling shows as a flat rate):
//! - `one_line`: `N` instructions on a single line (columns were counted from the line start
//!   for every instruction);
//! - `many_lines`: the same instructions one per line, the baseline for `one_line`;
//! - `constant_one_line`: an `N`-element constant literal on one line;
//! - `computations`: `N` computations, each called once from the entry, all defining the same
//!   instruction names (renaming restarted its suffix search for every duplicate, and the
//!   verifier scanned the entry's callee list per call).
//!
//! Run with `cargo bench -p axle-ir --bench parse_scaling`.

use divan::counter::ItemsCount;
use divan::Bencher;

fn main() {
    divan::main();
}

const SIZES: &[usize] = &[1_000, 10_000, 100_000];

/// `n` chained adds, separated by `sep`.
fn chain(n: usize, sep: &str) -> String {
    let mut s = String::from("HloModule m\nENTRY e {");
    s.push_str(sep);
    s.push_str("p0 = f32[4] parameter(0)");
    for i in 1..n {
        s.push_str(sep);
        if i + 1 == n {
            s.push_str("ROOT ");
        }
        let prev = if i == 1 {
            "p0".to_string()
        } else {
            format!("a{}", i - 1)
        };
        s.push_str(&format!("a{i} = f32[4] add({prev}, p0)"));
    }
    s.push_str(sep);
    s.push_str("}\n");
    s
}

fn constant(n: usize) -> String {
    let elems: Vec<String> = (0..n).map(|i| (i % 7).to_string()).collect();
    format!(
        "HloModule m\nENTRY e {{\n  ROOT c = f32[{n}] constant({{{}}})\n}}\n",
        elems.join(",")
    )
}

fn computations_text(n: usize) -> String {
    let mut s = String::from("HloModule m\n");
    for i in 0..n {
        s.push_str(&format!(
            "c{i} {{\n  x = f32[] parameter(0)\n  ROOT y = f32[] negate(x)\n}}\n"
        ));
    }
    s.push_str("ENTRY e {\n  p = f32[] parameter(0)\n");
    for i in 0..n {
        let prev = if i == 0 {
            "p".to_string()
        } else {
            format!("k{}", i - 1)
        };
        let root = if i + 1 == n { "ROOT " } else { "" };
        s.push_str(&format!(
            "  {root}k{i} = f32[] call({prev}), to_apply=c{i}\n"
        ));
    }
    s.push_str("}\n");
    s
}

fn parse_verify(bencher: Bencher, text: String, items: usize) {
    bencher.counter(ItemsCount::new(items)).bench(|| {
        let m = axle_ir::parse_module(divan::black_box(&text)).expect("parses");
        axle_ir::verify::verify(&m).expect("verifies");
        m
    });
}

#[divan::bench(args = SIZES, sample_count = 5)]
fn one_line(bencher: Bencher, n: usize) {
    parse_verify(bencher, chain(n, " "), n);
}

#[divan::bench(args = SIZES, sample_count = 5)]
fn many_lines(bencher: Bencher, n: usize) {
    parse_verify(bencher, chain(n, "\n"), n);
}

#[divan::bench(args = SIZES, sample_count = 5)]
fn constant_one_line(bencher: Bencher, n: usize) {
    parse_verify(bencher, constant(n), n);
}

#[divan::bench(args = SIZES, sample_count = 5)]
fn computations(bencher: Bencher, n: usize) {
    parse_verify(bencher, computations_text(n), n);
}
