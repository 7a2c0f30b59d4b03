//! Measures this host's floating-point multiply-add peak, the ceiling a GEMM's GFLOP/s are read
//! against: every thread runs independent chains of `f32` fused multiply-adds on vector
//! registers (12 accumulators, more than latency times throughput on the x86 cores seen so far)
//! with no memory traffic, once with 512-bit vectors (when the host has AVX-512) and once with
//! 256-bit ones (AVX2 and FMA), on 1 thread and then on every core.
//!
//! `cargo run --release -p axle-bench --example fma_peak [SECONDS_PER_RUN]`: prints GFLOP/s (two
//! flops per lane per multiply-add) per width and thread count, the best of 3 runs of about
//! `SECONDS_PER_RUN` (default 0.5) each. A core that splits a 512-bit multiply-add into two
//! 256-bit halves (AMD Zen 4) shows the same peak for both widths; one with two 512-bit units
//! (Intel server cores) shows twice the 256-bit figure.

use std::time::Instant;

/// Multiply-adds per accumulator per call of a kernel.
const STEPS: u64 = 1 << 20;
/// Independent accumulators per thread.
const ACCS: u64 = 12;

#[cfg(target_arch = "x86_64")]
mod kernels {
    use std::arch::x86_64::*;

    /// `STEPS` rounds of 12 independent 16-lane multiply-adds; returns a sum that depends on all.
    ///
    /// # Safety
    /// The host must have AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub unsafe fn zmm(seed: f32) -> f32 {
        let b = _mm512_set1_ps(0.999_999);
        let c = _mm512_set1_ps(1e-7);
        let mut a = [_mm512_set1_ps(seed); 12];
        for (i, v) in a.iter_mut().enumerate() {
            *v = _mm512_add_ps(*v, _mm512_set1_ps(i as f32));
        }
        for _ in 0..super::STEPS {
            for v in a.iter_mut() {
                *v = _mm512_fmadd_ps(*v, b, c);
            }
        }
        a.iter().map(|v| _mm512_reduce_add_ps(*v)).sum()
    }

    /// As [`zmm`] with 8-lane vectors.
    ///
    /// # Safety
    /// The host must have AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub unsafe fn ymm(seed: f32) -> f32 {
        let b = _mm256_set1_ps(0.999_999);
        let c = _mm256_set1_ps(1e-7);
        let mut a = [_mm256_set1_ps(seed); 12];
        for (i, v) in a.iter_mut().enumerate() {
            *v = _mm256_add_ps(*v, _mm256_set1_ps(i as f32));
        }
        for _ in 0..super::STEPS {
            for v in a.iter_mut() {
                *v = _mm256_fmadd_ps(*v, b, c);
            }
        }
        let mut lanes = [0f32; 8];
        a.iter()
            .map(|v| {
                _mm256_storeu_ps(lanes.as_mut_ptr(), *v);
                lanes.iter().sum::<f32>()
            })
            .sum()
    }
}

/// One width's kernel: its name, its `f32` lanes and the function.
type Width = (&'static str, u64, fn(f32) -> f32);

/// GFLOP/s of `threads` threads each calling `kernel` for about `seconds`, best of 3 runs.
fn measure(kernel: fn(f32) -> f32, lanes: u64, threads: usize, seconds: f64) -> f64 {
    // Calls per thread for about `seconds`, from one timed call.
    let t0 = Instant::now();
    std::hint::black_box(kernel(1.0));
    let calls = ((seconds / t0.elapsed().as_secs_f64()).ceil() as u64).max(1);
    let mut best = 0f64;
    for _ in 0..3 {
        let t0 = Instant::now();
        std::thread::scope(|s| {
            for t in 0..threads {
                s.spawn(move || {
                    for i in 0..calls {
                        std::hint::black_box(kernel(std::hint::black_box((t as u64 + i) as f32)));
                    }
                });
            }
        });
        let secs = t0.elapsed().as_secs_f64();
        let flops = (threads as u64 * calls * STEPS * ACCS * lanes * 2) as f64;
        best = best.max(flops / secs / 1e9);
    }
    best
}

#[cfg(target_arch = "x86_64")]
fn main() {
    let seconds: f64 = std::env::args()
        .nth(1)
        .map_or(0.5, |s| s.parse().expect("SECONDS_PER_RUN: a number"));
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut widths: Vec<Width> = Vec::new();
    if is_x86_feature_detected!("avx512f") {
        // SAFETY: the host has AVX-512F (checked above).
        widths.push(("512-bit", 16, |x| unsafe { kernels::zmm(x) }));
    }
    if is_x86_feature_detected!("avx2") && is_x86_feature_detected!("fma") {
        // SAFETY: the host has AVX2 and FMA (checked above).
        widths.push(("256-bit", 8, |x| unsafe { kernels::ymm(x) }));
    }
    if widths.is_empty() {
        eprintln!("fma_peak: this host has neither AVX-512F nor AVX2 with FMA");
        std::process::exit(1);
    }
    for (name, lanes, kernel) in widths {
        for threads in [1, cores] {
            let g = measure(kernel, lanes, threads, seconds);
            println!("{name} f32 multiply-adds, {threads} thread(s): {g:.1} GFLOP/s");
            if cores == 1 {
                break;
            }
        }
    }
}

#[cfg(not(target_arch = "x86_64"))]
fn main() {
    eprintln!("fma_peak: x86_64 only");
    std::process::exit(1);
}
