//! `campaign`: seeded, coverage-free runs of the fuzz targets.
//!
//! ```text
//! campaign --target pipeline|pipeline-planted|cpu|nvptx-sim|parse|npy --cases N --seed S [--jobs J] [--out DIR] [--from K]
//! campaign --target T --replay FILE [--passes P] [--input-seed S]
//! ```
//!
//! A run checks cases `K..K+N` of seed `S` on `J` threads (results do not depend on `J`),
//! prints each minimized failure with the command that replays it (and writes both into `DIR`),
//! and ends with exactly `N cases, M failures`; the exit status is 1 when `M > 0`. `--replay`
//! checks one written finding again. `pipeline-planted` is CI's self-test: the `pipeline` target
//! with a deliberately wrong pass among the passes (`axle_fuzz::planted_sub_self`), whose
//! campaign must fail.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use axle_fuzz::campaign::{finding_stem, repro_command, run, Options};
use axle_fuzz::target::{catching, quiet_panics};
use axle_fuzz::{Outcome, Target};
use clap::Parser;

#[derive(Parser, Debug)]
#[command(about = "Seeded differential fuzz campaigns over Axle's fuzz targets")]
struct Args {
    /// The target.
    #[arg(long, value_enum)]
    target: Target,
    /// How many cases.
    #[arg(long, default_value_t = 1000)]
    cases: u64,
    /// The campaign's seed (case K of seed S is the same in every run).
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// The first case's index.
    #[arg(long, default_value_t = 0)]
    from: u64,
    /// Worker threads (default: all cores).
    #[arg(long)]
    jobs: Option<usize>,
    /// Where minimized failures and their repro commands are written.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Check one written finding (an .hlo or .npy file) instead of running a campaign.
    #[arg(long)]
    replay: Option<PathBuf>,
    /// The pipeline a `pipeline` (or `pipeline-planted`) replay runs.
    #[arg(long, default_value = "dce")]
    passes: String,
    /// The seed of a replay's evaluator inputs.
    #[arg(long, default_value_t = 0)]
    input_seed: u64,
    /// With `--replay` of a `cpu` finding: also write its inputs as `in0.npy`, `in1.npy`, ...
    /// into this directory (to run the module in XLA on the same inputs, fuzz/README.md); a
    /// one-byte type numpy has no dtype for is written as its bytes (`uint8`).
    #[arg(long)]
    inputs_out: Option<PathBuf>,
}

fn replay(a: &Args, file: &PathBuf) -> Result<ExitCode> {
    let data = std::fs::read(file).with_context(|| format!("reading {}", file.display()))?;
    let outcome = catching(|| match a.target {
        Target::Parse | Target::Npy => a.target.run_bytes(&data),
        Target::Pipeline | Target::PipelinePlanted | Target::Cpu | Target::NvptxSim => {
            let text = String::from_utf8_lossy(&data);
            let m = match axle::ir::parse_module(&text) {
                Ok(m) => m,
                Err(e) => return Outcome::Fail(e.render(&file.display().to_string())),
            };
            if let Some(registry) = a.target.pass_registry() {
                axle_fuzz::pipeline::check_module(&m, &a.passes, a.input_seed, registry).into()
            } else if a.target == Target::NvptxSim {
                axle_fuzz::nvptx_sim::check_module(&m, a.input_seed)
            } else {
                if let Some(dir) = &a.inputs_out {
                    if let Err(e) = write_inputs(&m, a.input_seed, dir) {
                        return Outcome::Fail(e);
                    }
                }
                axle_fuzz::cpu::check_module(&m, a.input_seed)
            }
        }
    });
    match outcome {
        Outcome::Fail(m) => {
            println!("FAIL: {m}");
            Ok(ExitCode::FAILURE)
        }
        Outcome::Unsupported(m) => {
            println!("unsupported: {m}");
            Ok(ExitCode::SUCCESS)
        }
        Outcome::Pass => {
            println!("pass");
            Ok(ExitCode::SUCCESS)
        }
    }
}

/// Writes the `cpu` target's inputs for `m` and `seed` as `.npy` files into `dir`.
fn write_inputs(m: &axle::ir::Module, seed: u64, dir: &std::path::Path) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    for (k, lit) in axle_fuzz::cpu::inputs(m, seed)?.iter().enumerate() {
        let axle::ir::Literal::Array(a) = lit else {
            return Err(format!("input {k} is a tuple; only arrays are written"));
        };
        let path = dir.join(format!("in{k}.npy"));
        match axle_ir::write_npy(&path, a) {
            Ok(()) => {}
            // A one-byte type without a .npy dtype (the 8- and 4-bit floats; the narrow
            // integers have one, their values as int8/uint8) is written as its bytes, `uint8`,
            // to be viewed as the type in numpy (`ml_dtypes`).
            Err(_) if a.ty().byte_size() == 1 => {
                let mut bits = a.clone();
                bits.shape.ty = axle::ir::ElementType::U8;
                axle_ir::write_npy(&path, &bits)
                    .map_err(|e| format!("writing {}: {e}", path.display()))?;
            }
            Err(e) => return Err(format!("writing {}: {e}", path.display())),
        }
    }
    Ok(())
}

fn main() -> Result<ExitCode> {
    let a = Args::parse();
    quiet_panics();
    if let Some(file) = &a.replay {
        return replay(&a, file);
    }
    if let Some(dir) = &a.out {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let jobs = a.jobs.unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    });
    if jobs == 0 {
        bail!("--jobs must be at least 1");
    }
    let opts = Options {
        target: a.target,
        cases: a.cases,
        seed: a.seed,
        from: a.from,
        jobs,
        out: a.out.clone(),
    };
    println!(
        "campaign: target {}, seed {}, cases {}..{}, {jobs} jobs",
        a.target.name(),
        a.seed,
        a.from,
        a.from + a.cases
    );
    let start = Instant::now();
    let total = a.cases;
    let report = run(&opts, &|d, f| {
        eprint!("\r{d}/{total} cases, {f} failing");
        let _ = std::io::stderr().flush();
    });
    if total >= 1000 {
        eprintln!();
    }
    for f in &report.findings {
        let stem = finding_stem(a.target, a.seed, f.index);
        let first = f.message.lines().next().unwrap_or("");
        println!("FAIL case {}: {first}", f.index);
        let file = match &a.out {
            Some(dir) => {
                let file = dir.join(format!("{stem}.{}", f.ext));
                std::fs::write(&file, &f.file)
                    .with_context(|| format!("writing {}", file.display()))?;
                let cmd = repro_command(a.target, &file, f);
                let notes = format!(
                    "{cmd}\n# from the seed alone: campaign --target {} --seed {} --from {} --cases 1\n# {}\n",
                    a.target.name(),
                    a.seed,
                    f.index,
                    f.message.replace('\n', "\n# ")
                );
                std::fs::write(dir.join(format!("{stem}.repro")), notes)?;
                file
            }
            None => PathBuf::from(format!("{stem}.{}", f.ext)),
        };
        println!("  repro: {}", repro_command(a.target, &file, f));
        if a.out.is_none() {
            println!("  (no --out: the minimized input follows)");
            println!("{}", String::from_utf8_lossy(&f.file));
        }
        println!(
            "  details: {}",
            f.message
                .lines()
                .take(12)
                .collect::<Vec<_>>()
                .join("\n    ")
        );
    }
    println!(
        "{:.1}s, {:.0} cases/s, {} unsupported by the backend",
        start.elapsed().as_secs_f64(),
        total as f64 / start.elapsed().as_secs_f64().max(1e-9),
        report.unsupported
    );
    println!("{} cases, {} failures", report.cases, report.findings.len());
    Ok(if report.findings.is_empty() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}
