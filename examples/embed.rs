//! Embedding Axle in a Rust program: build a 2-layer MLP with the builder, compile it once on
//! `cpu` (with the compilation cache when `AXLE_CACHE_DIR` is set), run it on borrowed input
//! slices into reused outputs from two threads, and read the results back in place.
//!
//! Run it with `cargo run --release --example embed`.

use std::sync::Arc;
use std::time::Instant;

use axle::ir::builder::ModuleBuilder;
use axle::ir::{ElementType::F32, Module, Shape};
use axle::{ArrayRef, CacheMode, CompileOptions, Error};

/// `softmax(relu(x @ w1 + b1) @ w2 + b2)` for a batch of 8, 32 -> 64 -> 10.
fn mlp() -> Result<Module, Error> {
    let mut b = ModuleBuilder::new("mlp");
    let mut c = b.computation("main");
    let x = c.parameter(0, Shape::array(F32, &[8, 32]), "x")?;
    let w1 = c.parameter(1, Shape::array(F32, &[32, 64]), "w1")?;
    let b1 = c.parameter(2, Shape::array(F32, &[64]), "b1")?;
    let w2 = c.parameter(3, Shape::array(F32, &[64, 10]), "w2")?;
    let b2 = c.parameter(4, Shape::array(F32, &[10]), "b2")?;
    let h = c.matmul(x, w1)?;
    let h = c.add_broadcast(h, b1)?;
    let h = c.relu(h)?;
    let y = c.matmul(h, w2)?;
    let y = c.add_broadcast(y, b2)?;
    let y = c.softmax(y, -1)?;
    let main = c.finish(y)?;
    b.entry(main);
    Ok(b.build()?)
}

fn main() -> Result<(), Error> {
    let opts = CompileOptions::default().cache(CacheMode::from_env());
    let t0 = Instant::now();
    let exe = Arc::new(axle::compile("cpu", mlp()?, &opts)?);
    println!(
        "compiled in {:.1} ms (cache: {:?})",
        t0.elapsed().as_secs_f64() * 1e3,
        exe.stats().cache
    );
    let weights: Vec<Vec<f32>> = [32 * 64, 64, 64 * 10, 10]
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
                    ArrayRef::new(&weights[0], &[32, 64])?,
                    ArrayRef::vector(&weights[1]),
                    ArrayRef::new(&weights[2], &[64, 10])?,
                    ArrayRef::vector(&weights[3]),
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
