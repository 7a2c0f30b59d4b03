//! Times one HLO module on the CPU code generator by wall clock and by the CPU time of the
//! calling thread (`CLOCK_THREAD_CPUTIME_ID`), which stays meaningful on a loaded machine:
//! with `--threads 1` every kernel runs on the calling thread, so CPU time is the kernels' own.
//! The thread clock is exact to the nanosecond, where `/proc/thread-self/schedstat` counts
//! whole scheduler ticks (4 ms) on kernels without fine-grained scheduler statistics.
//!
//! `cargo run --release -p axle-bench --example cpu_kernel_time -- FILE.hlo [THREADS] [RUNS]
//! [FLOPS] [EPILOGUES]`: prints the median wall and CPU time per run, and GFLOP/s per CPU second
//! when the module's flop count is given (0: not given). `EPILOGUES` is `registers`, `tiles`
//! or `blocks` (default: `CpuOptions::default`'s): where output fusions of a dot apply their
//! epilogue (`CpuOptions::epilogues`), to compare them in one build.

use std::time::Instant;

/// The calling thread's CPU time in nanoseconds.
fn thread_cpu_ns() -> u64 {
    axle_bench::cpu_clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let file = args
        .get(1)
        .expect("usage: cpu_kernel_time FILE.hlo [THREADS] [RUNS] [FLOPS]");
    let threads: usize = args.get(2).map_or(1, |s| s.parse().expect("threads"));
    let runs: usize = args.get(3).map_or(20, |s| s.parse().expect("runs"));
    let flops: f64 = args.get(4).map_or(0.0, |s| s.parse().expect("flops"));
    let epilogues = match args.get(5).map(|s| s.as_str()) {
        None => axle_codegen_cpu::CpuOptions::default().epilogues,
        Some("registers") => axle_codegen_cpu::Epilogues::Registers,
        Some("tiles") => axle_codegen_cpu::Epilogues::Tiles,
        Some("blocks") => axle_codegen_cpu::Epilogues::Blocks,
        Some(other) => panic!("EPILOGUES is registers, tiles or blocks, not {other}"),
    };
    let text = std::fs::read_to_string(file).expect("reads the file");
    let m = axle::ir::parse_module(&text).expect("parses");
    let inputs = axle::run::generate_inputs(&m, 0).expect("the inputs fit in memory");
    let opts = axle_codegen_cpu::CpuOptions {
        threads,
        epilogues,
        ..Default::default()
    };
    let exe = axle_codegen_cpu::compile(&m, &opts).expect("compiles");
    let data: Vec<Vec<u8>> = inputs
        .iter()
        .flat_map(|l| match l {
            axle::ir::Literal::Array(a) => vec![a.data.clone()],
            axle::ir::Literal::Tuple(_) => Vec::new(),
        })
        .collect();
    let refs: Vec<&[u8]> = data.iter().map(|d| &d[..]).collect();
    let mut outs = exe.alloc_outputs();
    for _ in 0..3 {
        exe.execute(&refs, &mut outs).expect("runs");
    }
    let (mut wall, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (t, c) = (Instant::now(), thread_cpu_ns());
        exe.execute(&refs, &mut outs).expect("runs");
        wall.push(t.elapsed().as_secs_f64() * 1e3);
        cpu.push((thread_cpu_ns() - c) as f64 * 1e-6);
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        v[v.len() / 2]
    };
    let (w, c) = (med(&mut wall), med(&mut cpu));
    print!("{file}: threads {threads}, median wall {w:.3} ms, calling thread's cpu {c:.3} ms");
    if flops > 0.0 {
        print!(
            ", {:.1} GFLOP/s wall, {:.1} GFLOP/s per cpu second",
            flops / w * 1e-6,
            flops / c * 1e-6
        );
    }
    println!();
}
