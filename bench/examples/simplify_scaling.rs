//! Times the `simplify` pipeline on generated `layer_stack` graphs (and any HLO files given) at
//! 1 and 2 threads: `cargo run --release -p axle-bench --example simplify_scaling -- [LAYERS...]
//! [FILE...]`. Prints one line per graph and thread count: instructions before and after, the
//! pipeline's wall time, and nanoseconds per input instruction.

use std::time::Instant;

use axle::ir::{parse_module, PassManagerOptions, VerifyMode};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let args = if args.is_empty() {
        vec!["200".into(), "2000".into(), "20000".into()]
    } else {
        args
    };
    let pipeline = axle::passes::standard_pipeline("simplify").expect("simplify");
    for a in args {
        let (name, text) = axle_bench::graph_text(&a);
        let m = parse_module(&text).expect("parses");
        drop(text);
        for threads in [1, 2] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .expect("pool");
            let mut best = f64::MAX;
            let mut after = 0;
            let mut best_rows = Vec::new();
            for _ in 0..3 {
                let mut w = m.clone();
                let opts = PassManagerOptions {
                    verify: VerifyMode::Off,
                    check_changed: false,
                    ..Default::default()
                };
                let t0 = Instant::now();
                let rows = pool
                    .install(|| axle::passes::optimize(&mut w, pipeline, opts))
                    .expect("simplify runs");
                let t = t0.elapsed().as_secs_f64();
                if t < best {
                    best = t;
                    best_rows = rows;
                }
                after = w.num_live_insts();
            }
            println!(
                "{name:<40} threads={threads} insts {:>8} -> {:>8}  {:>8.1} ms  {:>6.0} ns/inst",
                m.num_live_insts(),
                after,
                best * 1e3,
                best * 1e9 / m.num_live_insts() as f64
            );
            if std::env::var("PER_PASS").is_ok() {
                let mut per: Vec<(String, u64, u32)> = Vec::new();
                for r in best_rows.iter().filter(|r| r.pass != "fixpoint") {
                    match per.iter_mut().find(|p| p.0 == r.pass) {
                        Some(p) => {
                            p.1 += r.wall_ns;
                            p.2 += 1;
                        }
                        None => per.push((r.pass.clone(), r.wall_ns, 1)),
                    }
                }
                per.sort_by_key(|p| std::cmp::Reverse(p.1));
                for (p, ns, runs) in per {
                    println!("    {p:<24} {runs:>3} runs {:>9.1} ms", ns as f64 / 1e6);
                }
            }
        }
    }
}
