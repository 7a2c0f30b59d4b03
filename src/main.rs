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
}

/// An error already reported in full; the process exits with status 1.
struct Reported(String);

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Parse { file } => cmd_parse(&file),
        Command::Stats { file } => cmd_stats(&file),
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
