//! `gemm_crate`: Axle's GEMM beside the `gemm` crate's on the same square `f32` matmuls, in one
//! run, on one thread and on two, so the comparison issue 13 asks for ("measure against the
//! `gemm` crate and keep whichever code is fastest") is taken on one machine at one time.
//! Counter: flops. Axle's side is the compiled `dot` module run into reused output buffers (as
//! `cpu_kernels`'s `gemm_f32`); the crate's is `gemm::gemm` on row-major buffers with
//! `beta = 1` and `read_dst = false` (`C = A @ B`). Off by default (the crate and `pulp` take
//! minutes to build); run with
//! `cargo bench -p axle-bench --features gemm-crate --bench gemm_crate`.

use axle::ir::{parse_module, Literal};
use axle_codegen_cpu::{compile, CpuOptions};
use divan::counter::ItemsCount;
use divan::Bencher;

fn main() {
    divan::main();
}

/// Matrix sizes (square) and thread counts of every bench.
const SIZES: [usize; 3] = [512, 1024, 2048];

fn flops(n: usize) -> ItemsCount {
    ItemsCount::new(2 * n * n * n)
}

/// Axle's GEMM: `C = A @ B` compiled from HLO, on `threads` threads.
#[divan::bench(args = SIZES, consts = [1, 2])]
fn axle<const THREADS: usize>(bencher: Bencher, n: usize) {
    let text = format!(
        "HloModule mm\nENTRY main {{\n  a = f32[{n},{n}] parameter(0)\n  b = f32[{n},{n}] parameter(1)\n  ROOT d = f32[{n},{n}] dot(a, b), lhs_contracting_dims={{1}}, rhs_contracting_dims={{0}}\n}}\n"
    );
    let m = parse_module(&text).expect("the bench module parses");
    let inputs: Vec<Vec<u8>> = axle::run::generate_inputs(&m, 0)
        .expect("the bench inputs fit in memory")
        .into_iter()
        .map(|l| match l {
            Literal::Array(a) => a.data,
            Literal::Tuple(_) => panic!("array parameters"),
        })
        .collect();
    let opts = CpuOptions {
        threads: THREADS,
        ..Default::default()
    };
    let exe = compile(&m, &opts).expect("the bench module compiles");
    let refs: Vec<&[u8]> = inputs.iter().map(|d| &d[..]).collect();
    let mut outs = exe.alloc_outputs();
    bencher
        .counter(flops(n))
        .bench_local(|| exe.execute(&refs, &mut outs).expect("runs"));
}

/// The `gemm` crate: `C = A @ B` on row-major buffers, on `threads` threads.
#[divan::bench(args = SIZES, consts = [1, 2])]
fn gemm_crate<const THREADS: usize>(bencher: Bencher, n: usize) {
    let a: Vec<f32> = (0..n * n)
        .map(|i| ((i * 7 % 13) as f32) * 0.25 - 1.5)
        .collect();
    let b: Vec<f32> = (0..n * n)
        .map(|i| ((i * 5 % 11) as f32) * 0.5 - 2.5)
        .collect();
    let mut c = vec![0f32; n * n];
    let par = if THREADS == 1 {
        gemm::Parallelism::None
    } else {
        gemm::Parallelism::Rayon(THREADS)
    };
    let s = n as isize;
    bencher.counter(flops(n)).bench_local(|| {
        // SAFETY: `a`, `b` and `c` hold `n * n` elements, row-major: column stride 1, row
        // stride `n`; `c` does not alias either operand.
        unsafe {
            gemm::gemm(
                n,
                n,
                n,
                c.as_mut_ptr(),
                1,
                s,
                false,
                a.as_ptr(),
                1,
                s,
                b.as_ptr(),
                1,
                s,
                0.0f32,
                1.0f32,
                false,
                false,
                false,
                par,
            )
        }
    });
}
