//! The `axle` command-line tool.

use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

use clap::{Parser, Subcommand};

mod progress;
use progress::Progress;

use axle::elided::ElidedConstants;
use axle::ir::{parse_module, print_module, Module};
use std::str::FromStr;

#[derive(Parser)]
#[command(name = "axle", version, about = "Axle: an ML compiler for XLA's HLO")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Compile without the compilation cache (on by default, in AXLE_CACHE_DIR or else
    /// ~/.cache/axle: a module compiled before with the same options loads its code from there).
    #[arg(long, global = true)]
    no_cache: bool,
    /// Draw no progress bar (one is drawn on standard error, when it is a terminal, for
    /// commands that take more than a second).
    #[arg(long, global = true)]
    quiet: bool,
}

#[derive(Subcommand)]
enum Command {
    /// Parse and verify an HLO text file and print it in canonical form.
    Parse {
        /// The HLO file (`.hlo`, or gzipped `.hlo.gz`).
        file: PathBuf,
        #[command(flatten)]
        elided: ElidedArgs,
        /// Seed for `--elided-constants random`.
        #[arg(long, default_value_t = 0)]
        seed: u64,
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
        /// The backend (`cpu` compiles to native code, `interpreter` runs the reference evaluator).
        #[arg(long, default_value = "cpu")]
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
        /// Seed for generated inputs (used when no --input is given) and for
        /// `--elided-constants random`.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        elided: ElidedArgs,
        /// The pass pipeline to run before compiling: a standard pipeline's name (`simplify`,
        /// `cpu`) or pipeline text (`axle passes` lists both); default: the backend's own (`cpu`
        /// on the cpu backend); `none` compiles the module exactly as given.
        #[arg(long)]
        passes: Option<String>,
    },
    /// Run a pass pipeline on a module and print the result (or write it with -o).
    Opt {
        /// The HLO file (`.hlo`, or gzipped `.hlo.gz`).
        file: PathBuf,
        /// The pipeline, e.g. `fixpoint(max=8)[algsimp,cse,dce]` (`axle passes` lists passes).
        #[arg(long, conflicts_with = "pipeline")]
        passes: Option<String>,
        /// A standard pipeline by name (`axle passes` lists them).
        #[arg(long)]
        pipeline: Option<String>,
        /// Write the optimized module here instead of standard output.
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// Dump the module after passes into this directory as NNN.PASS.hlo (and the input of a
        /// failing pass as NNN.PASS.input.hlo).
        #[arg(long)]
        dump_dir: Option<PathBuf>,
        /// Dump only after passes whose name matches this regular expression (default: all).
        #[arg(long)]
        dump_after: Option<String>,
        /// Write one JSON line of statistics per pass run to this file.
        #[arg(long)]
        stats: Option<PathBuf>,
        /// Print the time spent in each pass to standard error.
        #[arg(long)]
        time_passes: bool,
        /// When to run the verifier: each (after every changing pass), end or off.
        #[arg(long)]
        verify: Option<String>,
        /// Skip this pass wherever the pipeline names it (repeat for more).
        #[arg(long = "disable-pass")]
        disable_pass: Vec<String>,
        #[command(flatten)]
        elided: ElidedArgs,
        /// Seed for `--elided-constants random`.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// List the registered passes with their docs and options, and the standard pipelines.
    Passes,
    /// Run random pass orders drawn from some passes, check each against the evaluator, and
    /// print a table (instructions, compile time, cost) plus a JSON-lines file of every row.
    Explore {
        /// The HLO file (`.hlo`, or gzipped `.hlo.gz`).
        file: PathBuf,
        /// The passes to draw from, comma separated (pipeline items, options allowed).
        #[arg(long)]
        passes_from: String,
        /// How many random orders.
        #[arg(long, default_value_t = 10)]
        orders: usize,
        /// The seed of the orders and of the generated inputs.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        /// Passes per order (default: twice the number of passes given).
        #[arg(long)]
        length: Option<usize>,
        /// Input sets each result is checked on with the evaluator (0: no check).
        #[arg(long, default_value_t = 2)]
        inputs: usize,
        /// The JSON-lines output (default: FILE's stem + `.explore.jsonl` in the current
        /// directory).
        #[arg(long)]
        jsonl: Option<PathBuf>,
    },
    /// Compile a module: report the compile time, print the optimized LLVM IR or assembly
    /// (`--emit`), or write an object file and a C header (`--aot`).
    Compile {
        /// The HLO file.
        file: PathBuf,
        /// The backend (only `cpu` compiles ahead of time or emits LLVM IR and assembly).
        #[arg(long, default_value = "cpu")]
        backend: String,
        /// Write an object file (`-o`) and a C header (`--header`) instead of running the JIT.
        #[arg(long)]
        aot: bool,
        /// The output file: the object with `--aot`, the text with `--emit` (default: stdout).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// The C header to write with `--aot` (default: the object's path with `.h`).
        #[arg(long)]
        header: Option<PathBuf>,
        /// The name of the entry point, `NAME_run` (default: the object file's stem).
        #[arg(long)]
        name: Option<String>,
        /// The target triple (default: the host, with its CPU's features).
        #[arg(long)]
        target_triple: Option<String>,
        /// Print the optimized LLVM IR (`llvm`) or the assembly (`asm`).
        #[arg(long, value_parser = ["llvm", "asm"])]
        emit: Option<String>,
        /// The pass pipeline to run before compiling (default: the backend's own, `cpu` on the
        /// cpu backend; `none` compiles the module exactly as given).
        #[arg(long)]
        passes: Option<String>,
        #[command(flatten)]
        elided: ElidedArgs,
        /// Seed for `--elided-constants random`.
        #[arg(long, default_value_t = 0)]
        seed: u64,
    },
    /// Compile a module and time repeated runs on generated inputs: compile time, then median
    /// and minimum run time per output-buffer policy (`fresh` result buffers per run, as XLA
    /// does by default, or the previous run's buffers `reused`). It compiles without the
    /// compilation cache, so the compile time is always the compiler's.
    Bench {
        /// The HLO file.
        file: PathBuf,
        /// The backend.
        #[arg(long, default_value = "cpu")]
        backend: String,
        /// Timed runs per policy.
        #[arg(long, default_value_t = 10)]
        repeat: usize,
        /// Untimed warm-up runs per policy.
        #[arg(long, default_value_t = 3)]
        warmup: usize,
        /// The output-buffer policy: fresh, reused or both.
        #[arg(long, default_value = "both", value_parser = ["fresh", "reused", "both"])]
        outputs: String,
        /// Seed for the generated inputs and for `--elided-constants random`.
        #[arg(long, default_value_t = 0)]
        seed: u64,
        #[command(flatten)]
        elided: ElidedArgs,
        /// Also time each kernel (cpu backend) and list the slowest ones.
        #[arg(long)]
        profile: bool,
        /// The pass pipeline to run before compiling (a standard pipeline's name or pipeline
        /// text; default: the backend's own, `cpu` on the cpu backend; `none` runs nothing); its
        /// time counts as compile time.
        #[arg(long)]
        passes: Option<String>,
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

/// `--elided-constants`, shared by the commands that load a module.
#[derive(clap::Args, Clone, Copy)]
struct ElidedArgs {
    /// What to do with constants whose value the text elides, `constant({...})`: `error`
    /// (refuse the module), `keep` (leave them elided), `zeros`, or `random` (seeded by --seed:
    /// small normal floats, integers in [0, 8)).
    #[arg(long = "elided-constants", default_value = "error", value_parser = ElidedConstants::from_str)]
    elided_constants: ElidedConstants,
}

/// An error already reported in full; the process exits with status 1.
struct Reported(String);

fn main() -> ExitCode {
    // Like other Unix tools, end quietly when stdout is a closed pipe (`axle stats F | head`)
    // instead of panicking in `print!`.
    #[cfg(unix)]
    // SAFETY: resetting a signal disposition to its default before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    let cli = Cli::parse();
    let cache = if cli.no_cache {
        axle::CacheMode::Off
    } else {
        axle::CacheMode::Dir(axle::cache::DiskCache::default_dir())
    };
    let quiet = cli.quiet;
    let result = match cli.command {
        Command::Parse { file, elided, seed } => cmd_parse(&file, elided.into_load(seed, quiet)),
        Command::Stats { file } => cmd_stats(&file),
        Command::Run {
            file,
            backend,
            inputs,
            out_dir,
            repeat,
            seed,
            passes,
            elided,
        } => {
            let opts = axle::run::RunOptions {
                backend,
                inputs,
                out_dir,
                repeat,
                seed,
                pipeline: passes,
                cache,
            };
            cmd_run(&file, &opts, elided.into_load(seed, quiet))
        }
        Command::Compile {
            file,
            backend,
            aot,
            output,
            header,
            name,
            target_triple,
            emit,
            passes,
            elided,
            seed,
        } => cmd_compile(CompileArgs {
            file,
            backend,
            aot,
            output,
            header,
            name,
            target_triple,
            emit,
            cache,
            passes,
            elided: elided.into_load(seed, quiet),
        }),
        Command::Bench {
            file,
            backend,
            repeat,
            warmup,
            outputs,
            seed,
            profile,
            passes,
            elided,
        } => {
            use axle::bench::OutputPolicy;
            let policies = match outputs.as_str() {
                "fresh" => vec![OutputPolicy::Fresh],
                "reused" => vec![OutputPolicy::Reused],
                _ => vec![OutputPolicy::Fresh, OutputPolicy::Reused],
            };
            let opts = axle::bench::BenchOptions {
                backend,
                repeat,
                warmup,
                seed,
                policies,
                profile,
                pipeline: passes,
                // A benchmark measures compilation too, so it never loads code from the cache.
                cache: axle::CacheMode::Off,
            };
            cmd_bench(&file, &opts, elided.into_load(seed, quiet))
        }
        Command::Compare {
            expected,
            actual,
            rtol,
            atol,
        } => cmd_compare(&expected, &actual, rtol, atol),
        Command::Opt {
            file,
            passes,
            pipeline,
            output,
            dump_dir,
            dump_after,
            stats,
            time_passes,
            verify,
            disable_pass,
            elided,
            seed,
        } => cmd_opt(OptArgs {
            file,
            passes,
            pipeline,
            output,
            dump_dir,
            dump_after,
            stats,
            time_passes,
            verify,
            disable_pass,
            elided: elided.into_load(seed, quiet),
        }),
        Command::Passes => {
            print!("{}", axle::passes::describe_passes());
            Ok(())
        }
        Command::Explore {
            file,
            passes_from,
            orders,
            seed,
            length,
            inputs,
            jsonl,
        } => cmd_explore(&file, &passes_from, orders, seed, length, inputs, jsonl),
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

/// What `load` does with elided constants: the mode and the seed of `random`.
#[derive(Clone, Copy)]
struct LoadOptions {
    elided: ElidedConstants,
    seed: u64,
    quiet: bool,
}

impl ElidedArgs {
    fn into_load(self, seed: u64, quiet: bool) -> LoadOptions {
        LoadOptions {
            elided: self.elided_constants,
            seed,
            quiet,
        }
    }
}

/// Reads, parses and verifies a module, rendering errors against the file, then applies the
/// elided-constants mode; the phases show on `progress`.
fn load_with(path: &Path, opts: LoadOptions, progress: &Progress) -> Result<Module, Reported> {
    progress.phase("parse", None);
    let text = read_source(path)?;
    let file = path.display().to_string();
    let mut m = parse_module(&text).map_err(|e| Reported(e.render(&file)))?;
    progress.phase("verify", Some(m.num_live_insts()));
    axle::verify_for_cli(&m, &text, &file).map_err(Reported)?;
    axle::elided::apply(&mut m, opts.elided, opts.seed)
        .map_err(|ids| Reported(axle::elided::render_error(&m, &ids, &file)))?;
    Ok(m)
}

/// [`load_with`] with a progress bar of its own (parse, verify).
fn load(path: &Path, opts: LoadOptions) -> Result<Module, Reported> {
    load_with(path, opts, &Progress::new(opts.quiet, 2))
}

fn cmd_parse(path: &Path, opts: LoadOptions) -> Result<(), Reported> {
    let m = load(path, opts)?;
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

fn cmd_run(
    path: &Path,
    opts: &axle::run::RunOptions,
    load_opts: LoadOptions,
) -> Result<(), Reported> {
    if opts.repeat == 0 {
        return Err(Reported("error: --repeat must be at least 1".into()));
    }
    let progress = Progress::new(load_opts.quiet, 3);
    let m = load_with(path, load_opts, &progress)?;
    progress.phase("compile and run", Some(m.num_live_insts()));
    let report = axle::run::run_module(m, opts)
        .map_err(|e| Reported(format!("{}: error: {e}", path.display())))?;
    print!("{}", axle::run::summary(&report));
    Ok(())
}

struct CompileArgs {
    file: PathBuf,
    backend: String,
    aot: bool,
    output: Option<PathBuf>,
    header: Option<PathBuf>,
    name: Option<String>,
    target_triple: Option<String>,
    emit: Option<String>,
    cache: axle::CacheMode,
    passes: Option<String>,
    elided: LoadOptions,
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Reported> {
    std::fs::write(path, bytes)
        .map_err(|e| Reported(format!("{}: error: cannot write: {e}", path.display())))
}

fn cmd_compile(a: CompileArgs) -> Result<(), Reported> {
    let shown = a.file.display().to_string();
    if a.backend != "cpu" && (a.aot || a.emit.is_some() || a.target_triple.is_some()) {
        return Err(Reported(format!(
            "error: --aot, --emit and --target-triple need --backend cpu (got '{}')",
            a.backend
        )));
    }
    if a.aot && a.emit.is_some() {
        return Err(Reported(
            "error: --aot and --emit cannot be combined".into(),
        ));
    }
    let progress = Progress::new(a.elided.quiet, 3);
    let m = load_with(&a.file, a.elided, &progress)?;
    progress.phase(
        "compile: passes, code generation, LLVM",
        Some(m.num_live_insts()),
    );
    let platform = axle::backend::registry()
        .get(&a.backend)
        .map_err(|e| Reported(format!("{shown}: error: {e}")))?;
    let compile_opts = axle::backend::CompileOptions {
        pipeline: axle::backend::pipeline_for(&*platform, a.passes.as_deref()),
        cache: a.cache.clone(),
        ..Default::default()
    };
    if a.aot || a.emit.is_some() {
        // The code generator is called directly below; the pipeline runs here first.
        let t0 = Instant::now();
        let m = axle::backend::prepare_module("cpu", m, &compile_opts)
            .map_err(|e| Reported(format!("{shown}: error: {e}")))?;
        return compile_cpu_output(&a, &shown, m, t0);
    }
    let t0 = Instant::now();
    let exe = platform
        .compiler()
        .compile(m, &compile_opts)
        .map_err(|e| Reported(format!("{shown}: error: {e}")))?;
    drop(progress);
    let stats = exe.stats();
    println!(
        "compiled {} ({} instructions) on {} in {:.3} ms{}{}",
        shown,
        stats.instructions,
        a.backend,
        t0.elapsed().as_secs_f64() * 1e3,
        match stats.cache {
            axle::cache::CacheOutcome::Hit => " (from the cache)",
            _ => "",
        },
        stats
            .temp_bytes
            .map(|t| format!(", {t} temporary bytes"))
            .unwrap_or_default()
    );
    Ok(())
}

/// `axle compile --aot` and `--emit`: the code generator on the (already optimized) module;
/// `t0` is when compilation started.
fn compile_cpu_output(
    a: &CompileArgs,
    shown: &str,
    m: Module,
    t0: Instant,
) -> Result<(), Reported> {
    let opts = axle_codegen_cpu::CpuOptions {
        target_triple: a.target_triple.clone(),
        ..Default::default()
    };
    if a.aot {
        let obj = a
            .output
            .clone()
            .ok_or_else(|| Reported("error: --aot needs -o FILE for the object file".into()))?;
        let name = a.name.clone().unwrap_or_else(|| {
            obj.file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_else(|| "model".into())
        });
        let header = a.header.clone().unwrap_or_else(|| obj.with_extension("h"));
        let out = axle_codegen_cpu::compile_aot(&m, &opts, &name)
            .map_err(|e| Reported(format!("{shown}: error: {e}")))?;
        write_file(&obj, &out.object)?;
        write_file(&header, out.header.as_bytes())?;
        println!(
            "wrote {} and {} (entry point {}, {} temporary bytes) in {:.3} ms",
            obj.display(),
            header.display(),
            out.symbol,
            out.temp_bytes,
            t0.elapsed().as_secs_f64() * 1e3
        );
        return Ok(());
    }
    let what = if a.emit.as_deref() == Some("asm") {
        axle_codegen_cpu::Emit::Asm
    } else {
        axle_codegen_cpu::Emit::LlvmIr
    };
    let text = axle_codegen_cpu::emit_text(&m, &opts, what)
        .map_err(|e| Reported(format!("{shown}: error: {e}")))?;
    match &a.output {
        Some(p) => write_file(p, text.as_bytes()),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(text.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| Reported(format!("error: writing output: {e}")))
        }
    }
}

fn cmd_bench(
    path: &Path,
    opts: &axle::bench::BenchOptions,
    load_opts: LoadOptions,
) -> Result<(), Reported> {
    if opts.repeat == 0 {
        return Err(Reported("error: --repeat must be at least 1".into()));
    }
    let progress = Progress::new(load_opts.quiet, 3);
    let m = load_with(path, load_opts, &progress)?;
    progress.phase("compile and time runs", Some(m.num_live_insts()));
    let r = axle::bench::bench_module(m, opts)
        .map_err(|e| Reported(format!("{}: error: {e}", path.display())))?;
    print!("{}", axle::bench::report(&r));
    Ok(())
}

fn cmd_compare(
    expected: &Path,
    actual: &Path,
    rtol: Option<f64>,
    atol: Option<f64>,
) -> Result<(), Reported> {
    use axle::ir::Tolerance;
    let e = axle::ir::read_npy(expected).map_err(|e| Reported(format!("error: {e}")))?;
    let a = axle::ir::read_npy(actual).map_err(|e| Reported(format!("error: {e}")))?;
    let tol = match (rtol, atol) {
        (None, None) => Tolerance::Exact,
        (r, a) => Tolerance::Close {
            rtol: r.unwrap_or(0.0),
            atol: a.unwrap_or(0.0),
        },
    };
    match axle::ir::compare_arrays(&e, &a, tol) {
        Ok(()) => {
            println!("match: {} elements", e.len());
            Ok(())
        }
        Err(m) => Err(Reported(format!("mismatch: {m}"))),
    }
}

/// The arguments of `axle opt`.
struct OptArgs {
    file: PathBuf,
    passes: Option<String>,
    pipeline: Option<String>,
    output: Option<PathBuf>,
    dump_dir: Option<PathBuf>,
    dump_after: Option<String>,
    stats: Option<PathBuf>,
    time_passes: bool,
    verify: Option<String>,
    disable_pass: Vec<String>,
    elided: LoadOptions,
}

fn cmd_opt(a: OptArgs) -> Result<(), Reported> {
    use axle::ir::{PassManagerOptions, VerifyMode};
    let text = match (&a.passes, &a.pipeline) {
        (Some(p), None) => p.clone(),
        (None, Some(name)) => axle::passes::standard_pipeline(name)
            .ok_or_else(|| {
                let names: Vec<&str> = axle::passes::PIPELINES.iter().map(|p| p.name).collect();
                Reported(format!(
                    "error: unknown pipeline '{name}' (standard pipelines: {})",
                    names.join(", ")
                ))
            })?
            .to_string(),
        _ => {
            return Err(Reported(
                "error: give the passes to run with --passes PIPELINE or --pipeline NAME".into(),
            ))
        }
    };
    let registry = axle::passes::registry();
    for d in &a.disable_pass {
        if registry.get(d).is_none() {
            return Err(Reported(format!(
                "error: --disable-pass: unknown pass '{d}' (`axle passes` lists them)"
            )));
        }
    }
    let verify = match &a.verify {
        Some(v) => VerifyMode::parse(v).map_err(|e| Reported(format!("error: {e}")))?,
        None => VerifyMode::default_for_build(),
    };
    let dump_after = match (&a.dump_after, &a.dump_dir) {
        (Some(re), Some(_)) => {
            Some(regex_lite::Regex::new(re).map_err(|e| {
                Reported(format!("error: --dump-after: bad regular expression: {e}"))
            })?)
        }
        (Some(_), None) => return Err(Reported("error: --dump-after needs --dump-dir DIR".into())),
        (None, Some(_)) => Some(regex_lite::Regex::new(".*").expect("a valid regex")),
        (None, None) => None,
    };
    let opts = PassManagerOptions {
        verify,
        dump_after,
        dump_dir: a.dump_dir.clone(),
        disabled: a.disable_pass.clone(),
        ..Default::default()
    };
    let mut m = load(&a.file, a.elided)?;
    let result = axle::passes::optimize(&mut m, &text, opts);
    let (rows, err) = match result {
        Ok(rows) => (rows, None),
        Err(axle::passes::OptimizeError::Pipeline(e)) => return Err(Reported(e.render())),
        Err(axle::passes::OptimizeError::Pass(e, rows)) => (rows, Some(e)),
    };
    if let Some(path) = &a.stats {
        std::fs::write(path, axle::ir::pass_manager::stats_to_jsonl(&rows)).map_err(|e| {
            Reported(format!(
                "{}: error: cannot write stats: {e}",
                path.display()
            ))
        })?;
    }
    if a.time_passes {
        eprint!("{}", time_passes_table(&rows));
    }
    if let Some(e) = err {
        return Err(Reported(format!("{}: error: {e}", a.file.display())));
    }
    let printed = print_module(&m);
    match &a.output {
        Some(p) => std::fs::write(p, printed)
            .map_err(|e| Reported(format!("{}: error: cannot write: {e}", p.display()))),
        None => {
            let mut out = std::io::stdout().lock();
            out.write_all(printed.as_bytes())
                .and_then(|_| out.flush())
                .map_err(|e| Reported(format!("error: writing output: {e}")))
        }
    }
}

/// Time per pass (summed over its runs), most expensive first.
fn time_passes_table(rows: &[axle::ir::StatsRow]) -> String {
    let mut per: Vec<(String, u64, u32, u32)> = Vec::new();
    let mut total = 0u64;
    for r in rows.iter().filter(|r| r.pass != "fixpoint") {
        total += r.wall_ns;
        match per.iter_mut().find(|p| p.0 == r.pass) {
            Some(p) => {
                p.1 += r.wall_ns;
                p.2 += 1;
                p.3 += r.changed as u32;
            }
            None => per.push((r.pass.clone(), r.wall_ns, 1, r.changed as u32)),
        }
    }
    per.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let mut out = format!(
        "{:<24} {:>6} {:>8} {:>11} {:>7}\n",
        "pass", "runs", "changed", "time_ms", "share"
    );
    for (name, ns, runs, changed) in &per {
        out.push_str(&format!(
            "{name:<24} {runs:>6} {changed:>8} {:>11.3} {:>6.1}%\n",
            *ns as f64 / 1e6,
            100.0 * *ns as f64 / total.max(1) as f64
        ));
    }
    out.push_str(&format!(
        "{:<24} {:>6} {:>8} {:>11.3}\n",
        "total",
        per.iter().map(|p| p.2).sum::<u32>(),
        per.iter().map(|p| p.3).sum::<u32>(),
        total as f64 / 1e6
    ));
    out
}

fn cmd_explore(
    path: &Path,
    passes_from: &str,
    orders: usize,
    seed: u64,
    length: Option<usize>,
    inputs: usize,
    jsonl: Option<PathBuf>,
) -> Result<(), Reported> {
    let items = axle::ir::Pipeline::parse(passes_from)
        .map_err(|e| Reported(format!("error: --passes-from:\n{}", e.render())))?;
    let passes: Vec<String> = items.items.iter().map(|i| i.to_string()).collect();
    let m = load(
        path,
        LoadOptions {
            elided: ElidedConstants::Error,
            seed,
            quiet: true,
        },
    )?;
    let opts = axle::explore::ExploreOptions {
        passes,
        orders,
        seed,
        length,
        input_sets: inputs,
    };
    let rows = axle::explore::explore(&m, &opts).map_err(|e| Reported(format!("error: {e}")))?;
    let out = jsonl.unwrap_or_else(|| {
        let stem = path
            .file_name()
            .map(|n| n.to_string_lossy().to_string())
            .unwrap_or_else(|| "module".into());
        let stem = stem
            .trim_end_matches(".gz")
            .trim_end_matches(".hlo")
            .to_string();
        PathBuf::from(format!("{stem}.explore.jsonl"))
    });
    let mut text = String::new();
    for r in &rows {
        text.push_str(&r.to_json());
        text.push('\n');
    }
    std::fs::write(&out, text)
        .map_err(|e| Reported(format!("{}: error: cannot write: {e}", out.display())))?;
    print!("{}", axle::explore::explore_table(&rows));
    println!("rows: {}", out.display());
    let bad: Vec<String> = rows
        .iter()
        .filter(|r| matches!(r.check, axle::explore::Check::Differs(_)))
        .map(|r| format!("order {}: {}", r.order, r.pipeline))
        .collect();
    if !bad.is_empty() {
        return Err(Reported(format!(
            "error: {} order(s) changed the program's results:\n{}",
            bad.len(),
            bad.join("\n")
        )));
    }
    Ok(())
}
