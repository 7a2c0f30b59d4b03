//! `parse`: parsing the large unrolled graphs of the shared baseline (10k and 100k instructions),
//! with instructions per second as the throughput counter. Run with `cargo bench -p axle-ir`.

use std::io::Read;
use std::path::PathBuf;

use divan::counter::ItemsCount;
use divan::Bencher;

fn main() {
    divan::main();
}

fn shared() -> PathBuf {
    std::env::var("AXLE_SHARED")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../shared"))
}

fn load(name: &str) -> String {
    let p = shared().join("baseline").join(name);
    let bytes = std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    if name.ends_with(".gz") {
        let mut s = String::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_string(&mut s)
            .unwrap();
        s
    } else {
        String::from_utf8(bytes).unwrap()
    }
}

const GRAPHS: &[&str] = &[
    "large_layer_stack_10k.hlo",
    "large_deep_dag_10k.hlo",
    "large_wide_10k.hlo",
    "large_layer_stack_100k.hlo.gz",
    "large_wide_100k.hlo.gz",
    "large_wide_300k.hlo.gz",
];

#[divan::bench(args = GRAPHS, sample_count = 10)]
fn parse(bencher: Bencher, name: &str) {
    let text = load(name);
    let n = axle_ir::parse_module(&text)
        .expect("parses")
        .num_live_insts();
    bencher
        .counter(ItemsCount::new(n))
        .bench(|| axle_ir::parse_module(divan::black_box(&text)).unwrap());
}

#[divan::bench(args = GRAPHS, sample_count = 10)]
fn print(bencher: Bencher, name: &str) {
    let m = axle_ir::parse_module(&load(name)).expect("parses");
    bencher
        .counter(ItemsCount::new(m.num_live_insts()))
        .bench(|| axle_ir::print_module(divan::black_box(&m)));
}

#[divan::bench(args = GRAPHS, sample_count = 10)]
fn parse_and_verify(bencher: Bencher, name: &str) {
    let text = load(name);
    let n = axle_ir::parse_module(&text)
        .expect("parses")
        .num_live_insts();
    bencher.counter(ItemsCount::new(n)).bench(|| {
        let m = axle_ir::parse_module(divan::black_box(&text)).unwrap();
        axle_ir::verify::verify(&m).unwrap();
        m
    });
}
