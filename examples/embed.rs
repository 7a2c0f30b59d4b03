//! Embedding Axle in a Rust program: build a small classifier with the builder, compile it once on
//! `cpu` (with the compilation cache when `AXLE_CACHE_DIR` is set), run it on borrowed input
//! slices into reused outputs from two threads, and read the results back in place.
//!
//! Run it with `cargo run --release --example embed`.

use std::sync::Arc;
use std::time::Instant;

use axle::ir::builder::ModuleBuilder;
use axle::ir::{ElementType::F32, Module, Shape};
use axle::{ArrayRef, CacheMode, CompileOptions, Error};

/// A linear classifier with a normalized input: `softmax(((x - mean) / std) @ w + b)` per row,
/// for a batch of 8, 32 features, 10 classes.
fn classifier() -> Result<Module, Error> {
    let mut b = ModuleBuilder::new("classifier");
    let mut c = b.computation("main");
    let x = c.parameter(0, Shape::array(F32, &[8, 32]), "x")?;
    let w = c.parameter(1, Shape::array(F32, &[32, 10]), "w")?;
    let bias = c.parameter(2, Shape::array(F32, &[10]), "b")?;
    let mean = c.reduce_mean(x, &[1])?;
    let mean = c.reshape(mean, &[8, 1])?;
    let centered = c.subtract_broadcast(x, mean)?;
    let sq = c.multiply(centered, centered)?;
    let var = c.reduce_mean(sq, &[1])?;
    let std = c.sqrt(var)?;
    let std = c.reshape(std, &[8, 1])?;
    let normed = c.divide_broadcast(centered, std)?;
    let logits = c.matmul(normed, w)?;
    let logits = c.add_broadcast(logits, bias)?;
    let y = c.softmax(logits, -1)?;
    let main = c.finish(y)?;
    b.entry(main);
    Ok(b.build()?)
}

fn main() -> Result<(), Error> {
    let opts = CompileOptions::default().cache(CacheMode::from_env());
    let t0 = Instant::now();
    let exe = Arc::new(axle::compile("cpu", classifier()?, &opts)?);
    println!(
        "compiled in {:.1} ms (cache: {:?})",
        t0.elapsed().as_secs_f64() * 1e3,
        exe.stats().cache
    );
    let weights: Vec<Vec<f32>> = [32 * 10, 10]
        .iter()
        .map(|&n| (0..n).map(|i| ((i % 7) as f32 - 3.0) / 10.0).collect())
        .collect();
    let workers: Vec<_> = (0..2)
        .map(|t| {
            let (exe, weights) = (Arc::clone(&exe), weights.clone());
            std::thread::spawn(move || -> Result<Vec<f32>, Error> {
                let x: Vec<f32> = (0..8 * 32).map(|i| ((i + t) % 5) as f32 / 5.0).collect();
                let args = [
                    ArrayRef::new(&x, &[8, 32])?,
                    ArrayRef::new(&weights[0], &[32, 10])?,
                    ArrayRef::vector(&weights[1]),
                ];
                let mut outs = exe.alloc_outputs()?;
                let t0 = Instant::now();
                for _ in 0..1000 {
                    exe.run(&args, &mut outs)?;
                }
                println!(
                    "thread {t}: {:.2} us per call",
                    t0.elapsed().as_secs_f64() * 1e6 / 1000.0
                );
                Ok(outs[0].as_slice::<f32>()?[..10].to_vec())
            })
        })
        .collect();
    for (t, w) in workers.into_iter().enumerate() {
        let probs = w.join().expect("the worker finished")?;
        println!("thread {t}: first row {probs:.3?}");
    }
    Ok(())
}
