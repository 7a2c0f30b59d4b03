//! The `axle` command-line tool.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

use axle::ir::{parse_module, print_module, Module};

#[derive(Parser)]
#[command(name = "axle", version, about = "Axle: an ML compiler for XLA's HLO")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and verify an HLO text file and print it in canonical form.
    Parse {
        /// The HLO file (`.hlo`, or gzipped `.hlo.gz`).
        file: PathBuf,
    },
    /// Print instruction counts per opcode and per computation, and the parse+verify time.
    Stats {
        /// The HLO file (`.hlo`, or gzipped `.hlo.gz`).
        file: PathBuf,
    },
    /// Compile a module on a backend and run it on `.npy` inputs (or generated ones).
    Run {
        /// The HLO file.
        file: PathBuf,
        /// The backend.
        #[arg(long, default_value = "interpreter")]
        backend: String,
        /// An input `.npy` per array leaf of the entry parameters, in order (repeat the flag).
        #[arg(long = "input")]
        inputs: Vec<PathBuf>,
        /// Write the outputs as DIR/out0.npy, out1.npy, ...
        #[arg(long)]
        out_dir: Option<PathBuf>,
        /// Run this many times and report the median and minimum time.
        #[arg(long, default_value_t = 1)]
        repeat: usize,
        /// Seed for generated inputs (used when no --input is given).
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Compare two `.npy` files: exact, or within --rtol/--atol (numpy allclose), NaN matching NaN.
    Compare {
        /// The expected values.
        expected: PathBuf,
        /// The actual values.
        actual: PathBuf,
        /// Relative tolerance (floats).
        #[arg(long)]
        rtol: Option<f64>,
        /// Absolute tolerance (floats).
        #[arg(long)]
        atol: Option<f64>,
    },
}

/// An error already reported in full; the process exits with status 1.
struct Reported(String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Parse { file } => cmd_parse(&file),
        Command::Stats { file } => cmd_stats(&file),
        Command::Run { file, backend, inputs, out_dir, repeat, seed } => {
            let opts = axle::run::RunOptions { backend, inputs, out_dir, repeat, seed };
            cmd_run(&file, &opts)
        }
        Command::Compare { expected, actual, rtol, atol } => cmd_compare(&expected, &actual, rtol, atol),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Reported(msg)) => {
            eprint!("{msg}");
            if !msg.ends_with('\n') {
                eprintln!();
            }
            ExitCode::FAILURE
        }
    }
}

fn read_source(path: &Path) -> Result<String, Reported> {
    let shown = path.display();
    let bytes = std::fs::read(path)
        .map_err(|e| Reported(format!("{shown}: error: cannot read file: {e}")))?;
    let bytes = if path.extension().is_some_and(|e| e == "gz") {
        let mut out = Vec::new();
        flate2::read::GzDecoder::new(&bytes[..])
            .read_to_end(&mut out)
            .map_err(|e| Reported(format!("{shown}: error: cannot decompress: {e}")))?;
        out
    } else {
        bytes
    };
    String::from_utf8(bytes).map_err(|e| {
        Reported(format!(
            "{shown}: error: file is not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Reads, parses and verifies a module, rendering errors against the file.
fn load(path: &Path) -> Result<Module, Reported> {
    let text = read_source(path)?;
    let file = path.display().to_string();
    let m = parse_module(&text).map_err(|e| Reported(e.render(&file)))?;
    axle::verify_for_cli(&m, &text, &file).map_err(Reported)?;
    Ok(m)
}

fn cmd_parse(path: &Path) -> Result<(), Reported> {
    let m = load(path)?;
    let text = print_module(&m);
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| Reported(format!("error: writing output: {e}")))
}

fn cmd_stats(path: &Path) -> Result<(), Reported> {
    let text = read_source(path)?;
    let file = path.display().to_string();
    let t0 = Instant::now();
    let m = parse_module(&text).map_err(|e| Reported(e.render(&file)))?;
    let t_parse = t0.elapsed();
    let t1 = Instant::now();
    axle::verify_for_cli(&m, &text, &file).map_err(Reported)?;
    let t_verify = t1.elapsed();
    print!("{}", axle::stats_report(&m, text.len(), t_parse, t_verify));
    Ok(())
}

fn cmd_run(path: &Path, opts: &axle::run::RunOptions) -> Result<(), Reported> {
    if opts.repeat == 0 {
        return Err(Reported("error: --repeat must be at least 1".into()));
    }
    let m = load(path)?;
    let report = axle::run::run_module(m, opts).map_err(|e| Reported(format!("{}: error: {e}", path.display())))?;
    print!("{}", axle::run::summary(&report));
    Ok(())
}

fn cmd_compare(expected: &Path, actual: &Path, rtol: Option<f64>, atol: Option<f64>) -> Result<(), Reported> {
    use axle::ir::Tolerance;
    let e = axle::ir::read_npy(expected).map_err(|e| Reported(format!("error: {e}")))?;
    let a = axle::ir::read_npy(actual).map_err(|e| Reported(format!("error: {e}")))?;
    let tol = match (rtol, atol) {
        (None, None) => Tolerance::Exact,
        (r, a) => Tolerance::Close { rtol: r.unwrap_or(0.0), atol: a.unwrap_or(0.0) },
    };
    match axle::ir::compare_arrays(&e, &a, tol) {
        Ok(()) => {
            println!("match: {} elements", e.len());
            Ok(())
        }
        Err(m) => Err(Reported(format!("mismatch: {m}"))),
    }
}
