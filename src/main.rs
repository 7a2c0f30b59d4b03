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

mod interrupt;

#[derive(Parser)]
#[command(name = "axle", version, about = "Axle: an ML compiler for XLA's HLO")]
struct Cli {
    /// The most memory a run may hold at once (bytes, or a number with K, M, G or T); a run
    /// that would need more fails before allocating. Overrides AXLE_MEMORY_LIMIT; without
    /// either, the memory the system has available.
    #[arg(
        long,
        global = true,
        value_name = "SIZE",
        value_parser = parse_memory_size,
        allow_negative_numbers = true
    )]
    memory_limit: Option<u64>,
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

fn parse_memory_size(s: &str) -> Result<u64, String> {
    axle::ir::memory::parse_size(s).map_err(String::from)
}

/// A tolerance: a finite, non-negative number.
fn parse_tolerance(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .parse()
        .map_err(|_| format!("'{s}' is not a number"))?;
    if !v.is_finite() || v < 0.0 {
        return Err(format!(
            "'{s}' is not a tolerance (it must be a finite number >= 0)"
        ));
    }
    Ok(v)
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
        /// The backend (`cpu` compiles to native code, `interpreter` runs the reference evaluator,
        /// `nvptx` runs the GPU kernels on an NVIDIA GPU, `nvptx-sim` runs them on the host).
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
        /// Seed for generated inputs (default 0; only without --input, which gives the inputs)
        /// and for `--elided-constants random`.
        #[arg(long, conflicts_with = "inputs")]
        seed: Option<u64>,
        #[command(flatten)]
        elided: ElidedArgs,
        /// The pass pipeline to run before compiling: a standard pipeline's name (`simplify`,
        /// `cpu`) or pipeline text (`axle passes` lists both); default: the backend's own (`cpu`
        /// on the cpu backend); `none` compiles the module exactly as given.
        #[arg(long)]
        passes: Option<String>,
        /// Run on this many devices of this process (interpreter, cpu, nvptx-sim or nvptx): --input
        /// files are one set for every device, or one set per device (device 0's first);
        /// outputs go to DIR/dD/outK.npy for each device D. JAX's shard_map modules take global
        /// inputs. Under `mpirun -n N` (detected from the launcher's environment) every rank
        /// is one device and rank 0 writes the outputs; --devices, if given, must be N.
        #[arg(long, value_parser = clap::value_parser!(u32).range(1..=4096))]
        devices: Option<u32>,
        /// With --devices or under mpirun: how long a collective waits for the rest of its
        /// group, in seconds, before the run fails on every device.
        #[arg(long, default_value_t = 60.0)]
        timeout: f64,
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
        /// Passes per order, at least 1 (default: twice the number of passes given).
        #[arg(long, value_parser = clap::value_parser!(u64).range(1..))]
        length: Option<u64>,
        /// Input sets each result is checked on with the evaluator (0: no check).
        #[arg(long, default_value_t = 2)]
        inputs: usize,
        /// The JSON-lines output (default: FILE's stem + `.explore.jsonl` in the current
        /// directory).
        #[arg(long)]
        jsonl: Option<PathBuf>,
        /// Also compile every order's result on --backend as it stands and time it (fresh
        /// outputs, median): the run time goes beside the cost estimate.
        #[arg(long)]
        measure: bool,
        /// The backend --measure compiles and runs on.
        #[arg(long, default_value = "cpu", requires = "measure")]
        backend: String,
        /// Timed runs per order with --measure.
        #[arg(long, default_value_t = 5, requires = "measure")]
        repeat: usize,
        /// Untimed runs per order before the timed ones with --measure.
        #[arg(long, default_value_t = 1, requires = "measure")]
        warmup: usize,
    },
    /// Draw a module as a graph (each fusion a cluster coloured by its kind): Graphviz text
    /// (`.dot`), SVG laid out by Graphviz (`.svg`) or a page with pan, zoom and search
    /// (`.html`).
    Graph(axle::graph::cli::GraphArgs),
    /// Compile a module: report the compile time, print the optimized LLVM IR or assembly
    /// (`--emit`), or write an object file and a C header (`--aot`).
    Compile {
        /// The HLO file.
        file: PathBuf,
        /// The backend (`cpu` compiles ahead of time or emits LLVM IR and assembly; `nvptx`
        /// emits PTX or LLVM IR).
        #[arg(long, default_value = "cpu")]
        backend: String,
        /// Write an object file (`-o`) and a C header (`--header`) instead of running the JIT.
        #[arg(long)]
        aot: bool,
        /// The output file: the object with `--aot`, the text with `--emit` (default: stdout).
        #[arg(short = 'o', long = "output")]
        output: Option<PathBuf>,
        /// The C header to write with `--aot` (default: the object's path with `.h`).
        #[arg(long, requires = "aot")]
        header: Option<PathBuf>,
        /// The name of the entry point, `NAME_run` (default: the object file's stem); with
        /// `--aot`.
        #[arg(long, requires = "aot")]
        name: Option<String>,
        /// The target triple (default: the host, with its CPU's features); with `--aot` or
        /// `--emit` (the JIT runs on the host only).
        #[arg(long)]
        target_triple: Option<String>,
        /// Print the optimized LLVM IR (`llvm`), the assembly (`asm`, cpu) or the PTX (`ptx`,
        /// nvptx).
        #[arg(long, value_parser = ["llvm", "asm", "ptx"])]
        emit: Option<String>,
        /// The GPU architecture of `--backend nvptx` (`sm_80`, `sm_90`).
        #[arg(long, default_value = "sm_80")]
        gpu_arch: String,
        /// Which `f16` and `bf16` dots of `--backend nvptx` run on tensor cores: `auto` (those
        /// of at least 16 in each dimension), `off` (none: the FMA tile loop), `always`.
        #[arg(long, default_value = "auto", value_parser = ["auto", "off", "always"])]
        tensor_cores: String,
        /// Let `--backend nvptx` scatters that add `f32` or `f64` updates use float atomics, as
        /// XLA's GPU backend does: faster where updates meet, but sums may differ from run to
        /// run (off: every result bit-identical from run to run). Runs read
        /// `AXLE_NVPTX_FLOAT_ATOMICS=1` instead.
        #[arg(long)]
        float_atomics: bool,
        /// The pass pipeline to run before compiling (default: the backend's own, `cpu` on the
        /// cpu backend; `none` compiles the module exactly as given).
        #[arg(long)]
        passes: Option<String>,
        /// Print every phase of the compilation with its time and share: reading the file,
        /// verification, each pass, then the backend's phases (on `cpu`: scheduling and buffer
        /// assignment, lowering, LLVM emission, optimization, code generation and linking).
        #[arg(long, visible_alias = "time-passes")]
        timings: bool,
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
        /// Also time each kernel (cpu backend) and list the slowest ones, each with what it
        /// computes (its kind, the instruction doing the work with its shapes, what is fused
        /// with it).
        #[arg(long)]
        profile: bool,
        /// Write a Chrome trace of the profiled runs to this file (cpu backend; Perfetto and
        /// chrome://tracing load it): one span per kernel call and per range of a parallel
        /// kernel, on the thread that ran it.
        #[arg(long, value_name = "FILE.json")]
        trace: Option<PathBuf>,
        /// The pass pipeline to run before compiling (a standard pipeline's name or pipeline
        /// text; default: the backend's own, `cpu` on the cpu backend; `none` runs nothing); its
        /// time counts as compile time.
        #[arg(long)]
        passes: Option<String>,
        /// Also compile the module a second time in this process and print that time: the
        /// first compilation also pays for paging in LLVM's code, which a long-lived process
        /// (JAX through the plugin, `axle.jit`) pays once.
        #[arg(long)]
        warm_compile: bool,
    },
    /// Schedule a module and assign its buffers: print the scheduler chosen per computation, the
    /// temporary block (size, peak, fragmentation) and every buffer's memory, offset, size and
    /// live range; optionally as JSON and as an SVG timeline.
    Buffers {
        /// The HLO file.
        file: PathBuf,
        /// Run this pass pipeline first (a standard pipeline's name or pipeline text).
        #[arg(long)]
        passes: Option<String>,
        /// The scheduler: best (the lowest simulated peak of list, dfs and postorder per
        /// computation), one of them, or keep (the module's own schedule, e.g. XLA's).
        #[arg(long, default_value = "best", value_parser = ["best", "list", "dfs", "postorder", "keep"])]
        schedule: String,
        /// Write the report as JSON to this file.
        #[arg(long)]
        json: Option<PathBuf>,
        /// Write the SVG timeline of the temporary block to this file.
        #[arg(long)]
        svg: Option<PathBuf>,
        /// Also run the independent checker (the program on shadow memory: no read may find
        /// its value overwritten) and report it.
        #[arg(long)]
        check: bool,
        /// Whose rules: cpu (the cpu backend's, what it compiles with: fusions it cannot emit
        /// as one kernel run as steps, kernel scratch, read-only parameters), gpu (the nvptx
        /// backend's static assignment of its kernels' buffers) or xla (every fusion a
        /// kernel, no scratch, as XLA's memory statistics count).
        #[arg(long, default_value = "cpu", value_parser = ["cpu", "gpu", "xla"])]
        rules: String,
        #[command(flatten)]
        elided: ElidedArgs,
    },
    /// Compare two `.npy` files: exact, or within --rtol/--atol (numpy allclose), NaN matching NaN.
    Compare {
        /// The expected values.
        expected: PathBuf,
        /// The actual values.
        actual: PathBuf,
        /// Relative tolerance (floats): a finite number >= 0.
        #[arg(long, value_parser = parse_tolerance, allow_negative_numbers = true)]
        rtol: Option<f64>,
        /// Absolute tolerance (floats): a finite number >= 0.
        #[arg(long, value_parser = parse_tolerance, allow_negative_numbers = true)]
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
    interrupt::install();
    let cli = Cli::parse();
    axle::ir::memory::set_limit(cli.memory_limit);
    if let Err(e) = axle::ir::memory::limit() {
        return fail(&format!("error: {e}"));
    }
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
            devices,
            timeout,
        } => {
            let opts = axle::run::RunOptions {
                backend,
                inputs,
                out_dir,
                repeat,
                seed: seed.unwrap_or(0),
                pipeline: passes,
                cache,
            };
            if cfg!(feature = "mpi") && mpi_launched() {
                cmd_run_mpi(
                    &file,
                    &opts,
                    devices,
                    timeout,
                    elided.into_load(seed.unwrap_or(0), quiet),
                )
            } else if let Some(devices) = devices {
                cmd_run_devices(
                    &file,
                    &opts,
                    devices,
                    timeout,
                    elided.into_load(seed.unwrap_or(0), quiet),
                )
            } else {
                cmd_run(&file, &opts, elided.into_load(seed.unwrap_or(0), quiet))
            }
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
            gpu_arch,
            tensor_cores,
            float_atomics,
            passes,
            timings,
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
            gpu_arch,
            tensor_cores,
            float_atomics,
            cache,
            passes,
            timings,
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
            trace,
            passes,
            elided,
            warm_compile,
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
                trace: trace.is_some(),
                pipeline: passes,
                // A benchmark measures compilation too, so it never loads code from the cache.
                cache: axle::CacheMode::Off,
                warm_compile,
            };
            cmd_bench(
                &file,
                &opts,
                trace.as_deref(),
                elided.into_load(seed, quiet),
            )
        }
        Command::Compare {
            expected,
            actual,
            rtol,
            atol,
        } => cmd_compare(&expected, &actual, rtol, atol),
        Command::Buffers {
            file,
            passes,
            schedule,
            json,
            svg,
            check,
            rules,
            elided,
        } => cmd_buffers(
            &file,
            buffers_options(passes, &schedule, &rules),
            json,
            svg,
            check,
            elided.into_load(0, quiet),
        ),
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
        Command::Passes => write_stdout(&axle::passes::describe_passes()),
        Command::Explore {
            file,
            passes_from,
            orders,
            seed,
            length,
            inputs,
            jsonl,
            measure,
            backend,
            repeat,
            warmup,
        } => {
            let measure = measure.then_some(axle::explore::MeasureOptions {
                backend,
                repeat,
                warmup,
            });
            cmd_explore(
                &file,
                &passes_from,
                orders,
                seed,
                length.map(|l| usize::try_from(l).unwrap_or(usize::MAX)),
                inputs,
                jsonl,
                measure,
            )
        }
        Command::Graph(args) => {
            axle::graph::cli::run(&args, |p| load(p, LoadOptions::default()).map_err(|r| r.0))
                .map(|summary| print!("{summary}"))
                .map_err(Reported)
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(Reported(msg)) => fail(&msg),
    }
}

/// Reports `msg` on standard error (a failing standard error is ignored: there is nowhere left
/// to report to) and returns the failure status.
fn fail(msg: &str) -> ExitCode {
    let mut e = std::io::stderr().lock();
    let _ = e.write_all(msg.as_bytes());
    if !msg.ends_with('\n') {
        let _ = e.write_all(b"\n");
    }
    let _ = e.flush();
    ExitCode::FAILURE
}

/// Writes `text` to standard output; a write error (a full disk, a closed file) is reported,
/// never a panic.
fn write_stdout(text: &str) -> Result<(), Reported> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| Reported(format!("error: writing to standard output: {e}")))
}

/// Writes `bytes` to `path` through a temporary file in the same directory renamed over it
/// once complete, so a failure leaves `path` as it was and no partial file behind.
fn write_file(path: &Path, bytes: &[u8]) -> Result<(), Reported> {
    stage_file(path, bytes)?.commit()
}

/// A file written in full beside its destination, not yet moved there (deleted if the process
/// is interrupted first).
struct Staged {
    tmp: tempfile::NamedTempFile,
    path: PathBuf,
    _cleanup: interrupt::Registration,
}

impl Staged {
    /// Moves the file into place.
    fn commit(self) -> Result<(), Reported> {
        let shown = self.path.display().to_string();
        self.tmp
            .persist(&self.path)
            .map(|_| ())
            .map_err(|e| Reported(format!("{shown}: error: cannot write: {}", e.error)))
    }
}

/// Writes `bytes` to a temporary file in `path`'s directory (see [`write_file`]).
fn stage_file(path: &Path, bytes: &[u8]) -> Result<Staged, Reported> {
    let shown = path.display().to_string();
    let err = |e: std::io::Error| Reported(format!("{shown}: error: cannot write: {e}"));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut b = tempfile::Builder::new();
    b.prefix(".axle-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = b.tempfile_in(dir).map_err(err)?;
    let cleanup = interrupt::register(tmp.path());
    tmp.write_all(bytes)
        .and_then(|_| tmp.flush())
        .map_err(err)?;
    Ok(Staged {
        tmp,
        path: path.to_path_buf(),
        _cleanup: cleanup,
    })
}

/// Whether two paths name the same file (or would, once created).
fn same_file(a: &Path, b: &Path) -> bool {
    let canon = |p: &Path| {
        p.canonicalize().ok().or_else(|| {
            let parent = match p.parent() {
                Some(d) if !d.as_os_str().is_empty() => d,
                _ => Path::new("."),
            };
            Some(parent.canonicalize().ok()?.join(p.file_name()?))
        })
    };
    match (canon(a), canon(b)) {
        (Some(x), Some(y)) => x == y,
        _ => a == b,
    }
}

/// Memory parsing takes per byte of HLO text, at most (the text itself, the module's columns
/// and names, literals; measured: `axle parse` of the 16.7 MB `large_wide_300k` holds 4.4
/// bytes per byte of text at its peak): the text a run may read is the memory ceiling over
/// this.
const PARSE_BYTES_PER_TEXT_BYTE: u64 = 5;

/// Reads HLO text, gunzipping it (every member of a multi-member file) when it is gzip (a `.gz`
/// name or the gzip magic bytes). The text is streamed: it must start like a module (after
/// blanks and comments, `HloModule`, `ENTRY` or a computation name and its `{` or `(`:
/// `axle::ir::parser::starts_like_module`), checked as soon as the first bytes arrive, so a
/// file that is not HLO text (`/dev/zero`) fails at once; and it may be at most the memory
/// ceiling over [`PARSE_BYTES_PER_TEXT_BYTE`] bytes, checked as it grows (before reading, for a
/// plain file), so an endless or hugely inflating input stops with an error.
fn read_source(path: &Path) -> Result<String, Reported> {
    use std::io::BufRead;
    let shown = path.display();
    let cannot = |e: std::io::Error| Reported(format!("{shown}: error: cannot read file: {e}"));
    let file = std::fs::File::open(path).map_err(cannot)?;
    let (limit, source) = axle::ir::memory::limit().map_err(|e| Reported(format!("error: {e}")))?;
    let max_text = limit / PARSE_BYTES_PER_TEXT_BYTE;
    let too_large = |what: &str| {
        Reported(format!(
            "{shown}: error: the HLO text{what} is larger than {max_text} bytes ({}), the most \
             that can be parsed under {}: parsing takes up to {PARSE_BYTES_PER_TEXT_BYTE} bytes of \
             memory per byte of text",
            axle::ir::memory::human(max_text),
            match source {
                axle::ir::memory::LimitSource::System => {
                    format!("the {limit} bytes of memory available")
                }
                _ => format!("the memory limit of {limit} bytes"),
            }
        ))
    };
    let plain_len = file
        .metadata()
        .ok()
        .filter(|md| md.is_file())
        .map(|md| md.len());
    let mut reader = std::io::BufReader::with_capacity(1 << 16, file);
    let head = reader.fill_buf().map_err(cannot)?;
    let gz = path.extension().is_some_and(|e| e == "gz") || head.starts_with(&[0x1f, 0x8b]);
    if !gz && plain_len.is_some_and(|n| n > max_text) {
        return Err(too_large(""));
    }
    let mut src: Box<dyn Read> = if gz {
        Box::new(flate2::read::MultiGzDecoder::new(reader))
    } else {
        Box::new(reader)
    };
    let mut bytes: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut header_ok = false;
    loop {
        let n = match src.read(&mut chunk) {
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) if gz => {
                return Err(Reported(format!("{shown}: error: cannot decompress: {e}")))
            }
            Err(e) => return Err(cannot(e)),
        };
        if n == 0 {
            break;
        }
        if (bytes.len() + n) as u64 > max_text {
            return Err(too_large(if gz { " (decompressed)" } else { "" }));
        }
        bytes
            .try_reserve(n)
            .map_err(|_| Reported(format!("{shown}: error: out of memory reading the file")))?;
        bytes.extend_from_slice(&chunk[..n]);
        if !header_ok {
            match axle::ir::parser::starts_like_module(&bytes) {
                Some(true) => header_ok = true,
                Some(false) => return Err(not_hlo(&bytes, &shown.to_string())),
                None => {}
            }
        }
    }
    String::from_utf8(bytes).map_err(|e| {
        Reported(format!(
            "{shown}: error: file is not UTF-8 text (byte {})",
            e.utf8_error().valid_up_to()
        ))
    })
}

/// Whether `path` holds a serialized `HloModuleProto` rather than HLO text: by its name
/// (`.pb`, `.hlo.pb`, `.proto`, `.binpb`) or by its first bytes
/// ([`axle_hlo_proto::looks_like_proto`]).
fn is_proto_file(path: &Path) -> bool {
    if path
        .extension()
        .is_some_and(|e| e == "pb" || e == "proto" || e == "binpb")
    {
        return true;
    }
    let mut head = [0u8; 256];
    let n = std::fs::File::open(path)
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    axle_hlo_proto::looks_like_proto(&head[..n])
}

/// Reads a serialized `HloModuleProto` into a verified module; it may be at most the memory
/// ceiling over [`PARSE_BYTES_PER_TEXT_BYTE`] bytes, as HLO text may.
fn read_proto(path: &Path) -> Result<Module, Reported> {
    let shown = path.display();
    let (limit, _) = axle::ir::memory::limit().map_err(|e| Reported(format!("error: {e}")))?;
    let max = limit / PARSE_BYTES_PER_TEXT_BYTE;
    let file = std::fs::File::open(path)
        .map_err(|e| Reported(format!("{shown}: error: cannot read file: {e}")))?;
    let mut bytes = Vec::new();
    file.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Reported(format!("{shown}: error: cannot read file: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(Reported(format!(
            "{shown}: error: the HloModuleProto is larger than {max} bytes, the most that can be read under the memory limit of {limit} bytes"
        )));
    }
    axle_hlo_proto::read_module(&bytes).map_err(|e| Reported(format!("{shown}: error: {e}")))
}

/// What `load` does with elided constants: the mode and the seed of `random`. The default refuses
/// them (commands without the `--elided-constants` flag).
#[derive(Clone, Copy, Default)]
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

/// The parser's own error for text that does not start like a module, from the first line of
/// it (the rest of the file is never read).
fn not_hlo(bytes: &[u8], file: &str) -> Reported {
    let start = bytes
        .iter()
        .position(|c| !c.is_ascii_whitespace())
        .unwrap_or(0);
    let end = bytes[start..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(bytes.len(), |k| start + k)
        .min(start + 200);
    let text = match std::str::from_utf8(&bytes[..end]) {
        Ok(t) => t,
        Err(e) => {
            return Reported(format!(
                "{file}: error: file is not UTF-8 text (byte {})",
                e.valid_up_to()
            ))
        }
    };
    match parse_module(text) {
        Err(e) => Reported(e.render(file)),
        Ok(_) => Reported(format!("{file}: error: not HLO text")),
    }
}

/// Reads, parses and verifies a module, rendering errors against the file, then applies the
/// elided-constants mode and, when `runnable`, checks that a backend can run the module
/// ([`axle::check_runnable_for_cli`]), with the same rendering; the phases show on `progress`.
fn load_with(
    path: &Path,
    opts: LoadOptions,
    runnable: bool,
    progress: &Progress,
) -> Result<Module, Reported> {
    progress.phase("parse", None);
    let file = path.display().to_string();
    let (mut m, text) = if is_proto_file(path) {
        // Verified as it is read; errors have no line to point at, and the printed text
        // stands in for the source.
        let m = read_proto(path)?;
        let text = print_module(&m);
        (m, text)
    } else {
        let text = read_source(path)?;
        let m = parse_module(&text).map_err(|e| Reported(e.render(&file)))?;
        (m, text)
    };
    progress.phase("verify", Some(m.num_live_insts()));
    axle::verify_for_cli(&m, &text, &file).map_err(Reported)?;
    axle::elided::apply(&mut m, opts.elided, opts.seed)
        .map_err(|ids| Reported(axle::elided::render_error(&m, &ids, &file)))?;
    if runnable {
        axle::check_runnable_for_cli(&m, &text, &file).map_err(Reported)?;
    }
    Ok(m)
}

/// [`load_with`] with a progress bar of its own (parse, verify), not checking runnability.
fn load(path: &Path, opts: LoadOptions) -> Result<Module, Reported> {
    load_with(path, opts, false, &Progress::new(opts.quiet, 2))
}

fn cmd_parse(path: &Path, opts: LoadOptions) -> Result<(), Reported> {
    let m = load(path, opts)?;
    write_stdout(&print_module(&m))
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
    write_stdout(&axle::stats_report(&m, text.len(), t_parse, t_verify))
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
    let m = load_with(path, load_opts, true, &progress)?;
    progress.phase("compile and run", Some(m.num_live_insts()));
    let report = axle::run::run_module(m, opts)
        .map_err(|e| Reported(format!("{}: error: {e}", path.display())))?;
    write_stdout(&axle::run::summary(&report))
}

/// The checks a multi-device run (in one process or under mpirun) makes of its options.
fn check_device_run(opts: &axle::run::RunOptions, timeout: f64) -> Result<(), Reported> {
    if opts.repeat == 0 {
        return Err(Reported("error: --repeat must be at least 1".into()));
    }
    if !(timeout.is_finite() && timeout > 0.0 && timeout <= 86400.0) {
        return Err(Reported(
            "error: --timeout must be a number of seconds in (0, 86400]".into(),
        ));
    }
    Ok(())
}

fn cmd_run_devices(
    path: &Path,
    opts: &axle::run::RunOptions,
    devices: u32,
    timeout: f64,
    load_opts: LoadOptions,
) -> Result<(), Reported> {
    check_device_run(opts, timeout)?;
    let progress = Progress::new(load_opts.quiet, 3);
    let m = load_with(path, load_opts, true, &progress)?;
    progress.phase("run on devices", Some(m.num_live_insts()));
    let report = axle::devices::run_on_devices(
        m,
        opts,
        devices,
        std::time::Duration::from_secs_f64(timeout),
    )
    .map_err(|e| Reported(format!("{}: error: {e}", path.display())))?;
    write_stdout(&axle::devices::summary(&report))
}

/// Whether this process was started by an MPI launcher (with the `mpi` feature).
fn mpi_launched() -> bool {
    #[cfg(feature = "mpi")]
    return axle::mpi::launch().is_some();
    #[cfg(not(feature = "mpi"))]
    false
}

/// `axle run` under mpirun: this process is one device (its rank) of the job; rank 0 prints
/// the summary and writes the outputs.
#[cfg(not(feature = "mpi"))]
fn cmd_run_mpi(
    _: &Path,
    _: &axle::run::RunOptions,
    _: Option<u32>,
    _: f64,
    _: LoadOptions,
) -> Result<(), Reported> {
    Err(Reported(
        "error: this axle was built without MPI (feature `mpi`)".into(),
    ))
}

/// `axle run` under mpirun: this process is one device (its rank) of the job; rank 0 prints
/// the summary and writes the outputs.
#[cfg(feature = "mpi")]
fn cmd_run_mpi(
    path: &Path,
    opts: &axle::run::RunOptions,
    devices: Option<u32>,
    timeout: f64,
    mut load_opts: LoadOptions,
) -> Result<(), Reported> {
    check_device_run(opts, timeout)?;
    // Only rank 0 talks.
    let rank0 = axle::mpi::launch().is_none_or(|l| l.is_rank0());
    load_opts.quiet |= !rank0;
    let progress = Progress::new(load_opts.quiet, 3);
    let m = load_with(path, load_opts, true, &progress)?;
    progress.phase("run on MPI ranks", Some(m.num_live_insts()));
    let report = axle::mpi::run_on_rank(
        m,
        opts,
        devices,
        std::time::Duration::from_secs_f64(timeout),
    )
    .map_err(|e| Reported(format!("{}: error: {e}", path.display())))?;
    match report {
        Some(r) => write_stdout(&axle::devices::summary(&r)),
        None => Ok(()),
    }
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
    gpu_arch: String,
    tensor_cores: String,
    float_atomics: bool,
    cache: axle::CacheMode,
    passes: Option<String>,
    timings: bool,
    elided: LoadOptions,
}

fn cmd_compile(a: CompileArgs) -> Result<(), Reported> {
    let shown = a.file.display().to_string();
    if a.backend == "nvptx" && a.emit.is_some() && !a.aot && a.target_triple.is_none() {
        return compile_nvptx_output(&a, &shown);
    }
    if a.emit.as_deref() == Some("ptx") {
        return Err(Reported(format!(
            "error: --emit ptx needs --backend nvptx (got '{}')",
            a.backend
        )));
    }
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
    if a.target_triple.is_some() && !a.aot && a.emit.is_none() {
        return Err(Reported(
            "error: --target-triple needs --aot or --emit (the JIT compiles for the host only)"
                .into(),
        ));
    }
    distinct_outputs(
        &a.file,
        &[("-o", a.output.as_ref()), ("--header", a.header.as_ref())],
        &[],
    )?;
    if a.output.is_some() && !a.aot && a.emit.is_none() {
        return Err(Reported(
            "error: -o names the object of --aot or the text of --emit; give one of them".into(),
        ));
    }
    let progress = Progress::new(a.elided.quiet, 3);
    let t_read = Instant::now();
    let m = load_with(&a.file, a.elided, true, &progress)?;
    let t_read = t_read.elapsed();
    progress.phase(
        "compile: passes, code generation, LLVM",
        Some(m.num_live_insts()),
    );
    let platform = axle::backends::registry()
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
    write_stdout(&format!(
        "compiled {} ({} instructions) on {} in {:.3} ms{}{}\n",
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
    ))?;
    if a.timings {
        let mut phases = vec![axle::phases::Phase {
            name: "read, parse and check the file".into(),
            time: t_read,
        }];
        phases.extend(stats.phases);
        write_stdout(&axle::phases::phase_table(&phases))?;
    }
    Ok(())
}

/// `axle compile --backend nvptx --emit ptx|llvm`: the kernels' PTX or LLVM IR for `--gpu-arch`,
/// after the backend's pipeline (or `--passes`).
fn compile_nvptx_output(a: &CompileArgs, shown: &str) -> Result<(), Reported> {
    let what = a.emit.as_deref().unwrap_or("ptx");
    if what == "asm" {
        return Err(Reported(
            "error: --backend nvptx emits ptx or llvm (its assembly is PTX)".into(),
        ));
    }
    if a.output.as_ref().is_some_and(|o| same_file(o, &a.file)) {
        return Err(Reported(format!(
            "error: -o {} would overwrite the input",
            shown
        )));
    }
    let progress = Progress::new(a.elided.quiet, 2);
    let m = load_with(&a.file, a.elided, true, &progress)?;
    progress.phase("compile: passes, kernels, LLVM", Some(m.num_live_insts()));
    let platform = axle::backends::registry()
        .get(&a.backend)
        .map_err(|e| Reported(format!("{shown}: error: {e}")))?;
    let opts = axle::backend::CompileOptions {
        pipeline: axle::backend::pipeline_for(&*platform, a.passes.as_deref()),
        ..Default::default()
    };
    let text = axle::nvptx::emit_text(
        m,
        &opts,
        &a.gpu_arch,
        &a.tensor_cores,
        a.float_atomics,
        what,
    )
    .map_err(|e| Reported(format!("{shown}: error: {e}")))?;
    drop(progress);
    match &a.output {
        Some(p) => write_file(p, text.as_bytes()),
        None => write_stdout(&text),
    }
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
        if same_file(&obj, &header) {
            return Err(Reported(format!(
                "error: the header {} would overwrite the object file; give --header another path",
                header.display()
            )));
        }
        let out = axle_codegen_cpu::compile_aot(&m, &opts, &name)
            .map_err(|e| Reported(format!("{shown}: error: {e}")))?;
        // Both files are written in full before either is moved into place: a failure leaves
        // neither behind.
        let staged_obj = stage_file(&obj, &out.object)?;
        let staged_header = stage_file(&header, out.header.as_bytes())?;
        staged_obj.commit()?;
        if let Err(e) = staged_header.commit() {
            let _ = std::fs::remove_file(&obj);
            return Err(e);
        }
        return write_stdout(&format!(
            "wrote {} and {} (entry point {}, {} temporary bytes) in {:.3} ms\n",
            obj.display(),
            header.display(),
            out.symbol,
            out.temp_bytes,
            t0.elapsed().as_secs_f64() * 1e3
        ));
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
        None => write_stdout(&text),
    }
}

fn cmd_bench(
    path: &Path,
    opts: &axle::bench::BenchOptions,
    trace: Option<&Path>,
    load_opts: LoadOptions,
) -> Result<(), Reported> {
    if opts.repeat == 0 {
        return Err(Reported("error: --repeat must be at least 1".into()));
    }
    let progress = Progress::new(load_opts.quiet, 3);
    let m = load_with(path, load_opts, true, &progress)?;
    progress.phase("compile and time runs", Some(m.num_live_insts()));
    let r = axle::bench::bench_module(m, opts)
        .map_err(|e| Reported(format!("{}: error: {e}", path.display())))?;
    if let (Some(t), Some(json)) = (trace, &r.trace) {
        write_file(t, json.as_bytes())?;
    }
    write_stdout(&axle::bench::report(&r))
}

/// `axle buffers`' options from its flags: the pipeline, the scheduler's name (`keep` keeps the
/// module's own schedule) and whose rules.
fn buffers_options(
    passes: Option<String>,
    schedule: &str,
    rules: &str,
) -> axle::buffers::BuffersOptions {
    use axle::buffers::{BuffersOptions, Rules, SchedulePolicy};
    let policy = match axle::schedule::Heuristic::from_name(schedule) {
        Some(h) => SchedulePolicy::Run(h),
        None => SchedulePolicy::Keep,
    };
    BuffersOptions {
        pipeline: passes,
        schedule: policy,
        rules: Rules::from_name(rules).unwrap_or(Rules::Cpu),
    }
}

fn cmd_buffers(
    path: &Path,
    opts: axle::buffers::BuffersOptions,
    json: Option<PathBuf>,
    svg: Option<PathBuf>,
    check: bool,
    load_opts: LoadOptions,
) -> Result<(), Reported> {
    use axle::schedule::render;
    let m = load(path, load_opts)?;
    let file = path.display().to_string();
    let r =
        axle::buffers::buffers(m, &opts).map_err(|e| Reported(format!("{file}: error: {e}")))?;
    let (m, a) = (&r.module, &r.assignment);
    let mut report = render::text(m, a, r.choices.as_deref());
    if check {
        let c = axle::schedule::check::check(m, a, &*r.rules)
            .map_err(|e| Reported(format!("{file}: error: the buffer check failed: {e}")))?;
        report.push_str(&format!(
            "check: ok ({} steps, {} reads, {} writes on shadow memory)\n",
            c.steps, c.reads, c.writes
        ));
    }
    if let Some(p) = &json {
        let j = render::json(m, a, r.choices.as_deref());
        std::fs::write(p, format!("{j:#}\n"))
            .map_err(|e| Reported(format!("{}: error: cannot write: {e}", p.display())))?;
    }
    if let Some(p) = &svg {
        std::fs::write(p, render::svg(m, a))
            .map_err(|e| Reported(format!("{}: error: cannot write: {e}", p.display())))?;
    }
    let mut out = std::io::stdout().lock();
    out.write_all(report.as_bytes())
        .and_then(|_| out.flush())
        .map_err(|e| Reported(format!("error: writing output: {e}")))
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
        Ok(()) => write_stdout(&format!("match: {} elements\n", e.len())),
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

/// Refuses two output options naming one file (the second write would destroy the first), and
/// an output option naming the input file where the output is not a module (it would destroy
/// the input with something else).
fn distinct_outputs(
    input: &Path,
    outputs: &[(&str, Option<&PathBuf>)],
    module_outputs: &[&str],
) -> Result<(), Reported> {
    for (i, (flag, p)) in outputs.iter().enumerate() {
        let Some(p) = p else { continue };
        if !module_outputs.contains(flag) && same_file(p, input) {
            return Err(Reported(format!(
                "error: {flag} {} is the input file; give another path",
                p.display()
            )));
        }
        for (other, q) in &outputs[i + 1..] {
            if q.is_some_and(|q| same_file(p, q)) {
                return Err(Reported(format!(
                    "error: {flag} and {other} name the same file {}; give them different paths",
                    p.display()
                )));
            }
        }
    }
    Ok(())
}

fn cmd_opt(a: OptArgs) -> Result<(), Reported> {
    use axle::ir::{PassManagerOptions, VerifyMode};
    distinct_outputs(
        &a.file,
        &[("-o", a.output.as_ref()), ("--stats", a.stats.as_ref())],
        &["-o"],
    )?;
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
        // One row at a time: every row repeats the pipeline, so the whole file at once would
        // take memory quadratic in the number of passes.
        stage_rows(path, rows.iter().map(|r| format!("{}\n", r.to_json())))?.commit()?;
    }
    if a.time_passes {
        eprint!("{}", time_passes_table(&rows));
    }
    if let Some(e) = err {
        return Err(Reported(format!("{}: error: {e}", a.file.display())));
    }
    let printed = print_module(&m);
    match &a.output {
        Some(p) => write_file(p, printed.as_bytes()),
        None => write_stdout(&printed),
    }
}

/// Writes lines to a temporary file beside `path`, one at a time (see [`write_file`]).
fn stage_rows(path: &Path, lines: impl Iterator<Item = String>) -> Result<Staged, Reported> {
    let staged = stage_file(path, b"")?;
    let shown = path.display().to_string();
    let mut w = std::io::BufWriter::new(staged.tmp.as_file());
    for l in lines {
        w.write_all(l.as_bytes())
            .map_err(|e| Reported(format!("{shown}: error: cannot write: {e}")))?;
    }
    w.flush()
        .map_err(|e| Reported(format!("{shown}: error: cannot write: {e}")))?;
    drop(w);
    Ok(staged)
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

#[allow(clippy::too_many_arguments)]
fn cmd_explore(
    path: &Path,
    passes_from: &str,
    orders: usize,
    seed: u64,
    length: Option<usize>,
    inputs: usize,
    jsonl: Option<PathBuf>,
    measure: Option<axle::explore::MeasureOptions>,
) -> Result<(), Reported> {
    distinct_outputs(path, &[("--jsonl", jsonl.as_ref())], &[])?;
    if let Some(mo) = &measure {
        if mo.repeat == 0 {
            return Err(Reported("error: --repeat must be at least 1".into()));
        }
        axle::backends::registry()
            .get(&mo.backend)
            .map_err(|e| Reported(format!("error: --backend: {e}")))?;
    }
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
        measure,
    };
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
    // Rows stream: each goes to the JSON-lines file (a temporary file beside it, moved into
    // place at the end) and to the table on standard output as soon as it is made.
    let staged = stage_file(&out, b"")?;
    let shown = out.display().to_string();
    let mut rows_file = std::io::BufWriter::new(staged.tmp.as_file());
    let measured = opts.measure.is_some();
    write_stdout(&axle::explore::explore_table_header(measured))?;
    let mut bad: Vec<String> = Vec::new();
    axle::explore::explore_each(&m, &opts, |r| {
        rows_file
            .write_all(format!("{}\n", r.to_json()).as_bytes())
            .map_err(|e| format!("{shown}: cannot write: {e}"))?;
        write_stdout(&axle::explore::explore_table_row(&r, measured)).map_err(|e| e.0)?;
        if let Some(Err(e)) = &r.measured {
            write_stdout(&format!("order {}: not measured: {e}\n", r.order)).map_err(|e| e.0)?;
        }
        if matches!(r.check, axle::explore::Check::Differs(_)) {
            bad.push(format!("order {}: {}", r.order, r.pipeline));
        }
        Ok(())
    })
    .map_err(|e| Reported(format!("error: {e}")))?;
    rows_file
        .flush()
        .map_err(|e| Reported(format!("{shown}: error: cannot write: {e}")))?;
    drop(rows_file);
    staged.commit()?;
    write_stdout(&format!("rows: {}\n", out.display()))?;
    if !bad.is_empty() {
        return Err(Reported(format!(
            "error: {} order(s) changed the program's results:\n{}",
            bad.len(),
            bad.join("\n")
        )));
    }
    Ok(())
}
