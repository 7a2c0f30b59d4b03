//! Times the reference evaluator on HLO files.
//!
//! ```sh
//! cargo run --release -p axle-analysis --example eval_time -- [--runs N] FILE.hlo...
//! ```
//!
//! Inputs come from `NAME.inK.npy` beside `NAME.hlo` (or `NAME.opt.hlo`) when they exist (the
//! corpus), else they are generated deterministically from the entry parameters' shapes (the
//! baseline programs): floats uniform in [-1, 1), integers in [0, 16), preds alternating.
//! Prints the parse time and the minimum and median evaluation time over N runs.

use axle_analysis::evaluate;
use axle_ir::npy::read_npy_as;
use axle_ir::{ArrayLiteral, Literal, Module, Shape};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// A deterministic pseudo-random generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
    }
}

fn generate(m: &Module, s: &Shape, rng: &mut Rng) -> Literal {
    match s {
        Shape::Array(a) => {
            let n = a.num_elements().max(0) as usize;
            let mut data = Vec::with_capacity(n * a.ty.byte_size());
            for i in 0..n {
                let bytes = if a.ty.is_pred() {
                    vec![(i % 2) as u8]
                } else if a.ty.is_int() {
                    axle_ir::literal::i128_to_element(a.ty, (rng.next() % 16) as i128)
                } else {
                    axle_ir::literal::f64_to_element(a.ty, rng.unit())
                };
                data.extend_from_slice(&bytes);
            }
            Literal::Array(ArrayLiteral {
                shape: a.clone(),
                data,
            })
        }
        Shape::Tuple(ids) => Literal::Tuple(
            ids.iter()
                .map(|&i| generate(m, m.shape_of(i), rng))
                .collect(),
        ),
        _ => Literal::Tuple(Vec::new()),
    }
}

fn inputs(m: &Module, path: &Path) -> (Vec<Literal>, &'static str) {
    let params = m.params(m.entry()).to_vec();
    let name = path.file_name().unwrap().to_string_lossy();
    let stem = name.trim_end_matches(".hlo").trim_end_matches(".opt");
    let dir = path.parent().unwrap_or(Path::new("."));
    let mut from_files = Vec::new();
    for (k, &p) in params.iter().enumerate() {
        let f: PathBuf = dir.join(format!("{stem}.in{k}.npy"));
        let Some(a) = m.array_shape(p) else { break };
        match read_npy_as(&f, a.ty) {
            Ok(l) => from_files.push(Literal::Array(l)),
            Err(_) => break,
        }
    }
    if from_files.len() == params.len() {
        return (from_files, "npy");
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let generated = params
        .iter()
        .map(|&p| generate(m, m.shape(p), &mut rng))
        .collect();
    (generated, "generated")
}

fn main() {
    let mut runs = 5;
    let mut files = Vec::new();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        if a == "--runs" {
            runs = args.next().and_then(|n| n.parse().ok()).unwrap_or(5);
        } else {
            files.push(PathBuf::from(a));
        }
    }
    for path in files {
        let text = std::fs::read_to_string(&path).expect("readable HLO file");
        let t0 = Instant::now();
        let m = axle_ir::parser::parse_module(&text).expect("parses");
        let parse = t0.elapsed();
        let (args, source) = inputs(&m, &path);
        let mut times = Vec::new();
        for _ in 0..runs {
            let t0 = Instant::now();
            let r = evaluate(&m, &args);
            times.push(t0.elapsed());
            if let Err(e) = r {
                eprintln!("{}: {e}", path.display());
                break;
            }
        }
        times.sort();
        if times.is_empty() {
            continue;
        }
        println!(
            "{:<48} parse {:>9.3} ms  eval min {:>10.3} ms  median {:>10.3} ms  ({} runs, {source} inputs)",
            path.file_name().unwrap().to_string_lossy(),
            parse.as_secs_f64() * 1e3,
            times[0].as_secs_f64() * 1e3,
            times[times.len() / 2].as_secs_f64() * 1e3,
            times.len()
        );
    }
}
