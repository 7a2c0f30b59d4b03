//! `axle bench`: compile a module on a backend and time repeated runs on generated inputs, with
//! the output-buffer policy stated: `fresh` (every run allocates its result, as XLA does by
//! default) or `reused` (every run writes into the result buffer of the previous one).

use std::fmt::Write;
use std::time::{Duration, Instant};

use axle_ir::Module;

use crate::backend::CacheMode;
use crate::backends::registry;
use crate::run::{compile_and_upload, generate_inputs, Loaded};

/// How output buffers are handled across runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputPolicy {
    /// A fresh result buffer per run.
    Fresh,
    /// The previous run's result buffer is reused.
    Reused,
}

impl OutputPolicy {
    /// The policy's name.
    pub fn name(self) -> &'static str {
        match self {
            OutputPolicy::Fresh => "fresh",
            OutputPolicy::Reused => "reused",
        }
    }
}

/// Options of a benchmark.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    /// The backend's name.
    pub backend: String,
    /// Timed runs per policy.
    pub repeat: usize,
    /// Untimed runs before the timed ones, per policy.
    pub warmup: usize,
    /// Seed for the generated inputs.
    pub seed: u64,
    /// The policies to time, in order.
    pub policies: Vec<OutputPolicy>,
    /// Also time every kernel (`cpu` only): the report lists the slowest ones.
    pub profile: bool,
    /// Also record a trace of the profiled runs (`cpu` only): one span per kernel call and per
    /// range of a parallel kernel on the thread that ran it ([`BenchReport::trace`]).
    pub trace: bool,
    /// A pass pipeline (standard name or text) to run before code generation; its time counts
    /// as compile time. `None` runs the backend's default (the `cpu` pipeline on `cpu`), `none`
    /// runs nothing.
    pub pipeline: Option<String>,
    /// The compilation cache (off by default; the CLI turns it on).
    pub cache: CacheMode,
    /// Also compile the module a second time in this process and report that time
    /// ([`BenchReport::warm_compile_time`]): the first compilation in a process also pays
    /// for paging in LLVM's code, which a long-lived process (JAX through the plugin,
    /// `axle.jit`, an XLA client) pays once.
    pub warm_compile: bool,
}

impl Default for BenchOptions {
    fn default() -> Self {
        BenchOptions {
            backend: "cpu".into(),
            repeat: 10,
            warmup: 3,
            seed: 0,
            policies: vec![OutputPolicy::Fresh, OutputPolicy::Reused],
            profile: false,
            trace: false,
            pipeline: None,
            cache: CacheMode::Off,
            warm_compile: false,
        }
    }
}

/// Run times under one policy.
#[derive(Clone, Debug)]
pub struct Timing {
    /// The policy.
    pub policy: OutputPolicy,
    /// Every timed run, in order.
    pub runs: Vec<Duration>,
}

impl Timing {
    /// The median run time.
    pub fn median(&self) -> Duration {
        let mut v = self.runs.clone();
        v.sort();
        v[v.len() / 2]
    }

    /// The fastest run.
    pub fn min(&self) -> Duration {
        self.runs.iter().copied().min().unwrap_or_default()
    }
}

/// What a benchmark measured.
#[derive(Clone, Debug)]
pub struct BenchReport {
    /// The module's name.
    pub module: String,
    /// The backend.
    pub backend: String,
    /// Instructions in the module.
    pub instructions: usize,
    /// Compilation time (the first compilation in this process).
    pub compile_time: Duration,
    /// The time of a second compilation of the same module in this process (with the
    /// same cache mode), when [`BenchOptions::warm_compile`] asks for it.
    pub warm_compile_time: Option<Duration>,
    /// Temporary memory per run, when the backend knows.
    pub temp_bytes: Option<u64>,
    /// Scratch arena per run (GEMM packing, sort planes), when the backend knows.
    pub scratch_bytes: Option<u64>,
    /// One timing per policy.
    pub timings: Vec<Timing>,
    /// Per-kernel times per run, slowest first, when profiled.
    pub kernels: Vec<KernelTime>,
    /// The profiled runs as a Chrome trace (JSON that Perfetto and `chrome://tracing` load),
    /// when traced.
    pub trace: Option<String>,
}

/// One kernel's share of a profiled run.
#[derive(Clone, Debug)]
pub struct KernelTime {
    /// `kN.name (opcode)`.
    pub name: String,
    /// What it computes: its kind, the instruction doing the work with its shapes, and the
    /// operations fused with it.
    pub detail: String,
    /// Calls per run (a kernel in a loop body runs once per trip).
    pub calls: f64,
    /// Time per run.
    pub time: Duration,
}

/// Compiles `m` on the backend and times it.
pub fn bench_module(m: Module, opts: &BenchOptions) -> Result<BenchReport, String> {
    let platform = registry().get(&opts.backend).map_err(|e| e.to_string())?;
    if opts.repeat == 0 {
        return Err("--repeat must be at least 1".into());
    }
    if opts.policies.is_empty() {
        return Err("no output-buffer policy to time".into());
    }
    if (opts.profile || opts.trace) && opts.backend != "cpu" {
        return Err(format!(
            "--{} times the kernels of the cpu backend, not of '{}'",
            if opts.profile { "profile" } else { "trace" },
            opts.backend
        ));
    }
    let name = m.name.clone();
    axle_ir::check_runnable(&m)
        .map_err(|e| crate::backend::BackendError::new(&opts.backend, e.to_string()).to_string())?;
    let inputs = generate_inputs(&m, opts.seed).map_err(|e| e.to_string())?;
    let again = opts.warm_compile.then(|| m.clone());
    let Loaded {
        exe,
        compile_time,
        bufs,
    } = compile_and_upload(
        &*platform,
        m,
        opts.pipeline.as_deref(),
        &opts.cache,
        &inputs,
    )
    .map_err(|e| e.to_string())?;
    let warm_compile_time = match again {
        Some(m) => Some(
            compile_and_upload(
                &*platform,
                m,
                opts.pipeline.as_deref(),
                &opts.cache,
                &inputs,
            )
            .map_err(|e| e.to_string())?
            .compile_time,
        ),
        None => None,
    };
    let args: Vec<&_> = bufs.iter().collect();
    let mut timings = Vec::new();
    for &policy in &opts.policies {
        let mut runs = Vec::with_capacity(opts.repeat);
        match policy {
            OutputPolicy::Fresh => {
                for k in 0..opts.warmup + opts.repeat.max(1) {
                    let t = Instant::now();
                    let out = exe.run(&args).map_err(|e| e.to_string())?;
                    let d = t.elapsed();
                    drop(out);
                    if k >= opts.warmup {
                        runs.push(d);
                    }
                }
            }
            OutputPolicy::Reused => {
                let mut out = exe.run(&args).map_err(|e| e.to_string())?;
                for k in 0..opts.warmup + opts.repeat.max(1) {
                    let t = Instant::now();
                    exe.run_into(&args, &mut out).map_err(|e| e.to_string())?;
                    if k >= opts.warmup {
                        runs.push(t.elapsed());
                    }
                }
            }
        }
        timings.push(Timing { policy, runs });
    }
    let stats = exe.stats();
    let (kernels, trace) = if (opts.profile || opts.trace) && opts.backend == "cpu" {
        profile_kernels(exe.module(), &inputs, opts)?
    } else {
        (Vec::new(), None)
    };
    Ok(BenchReport {
        module: name,
        backend: opts.backend.clone(),
        instructions: stats.instructions,
        compile_time,
        warm_compile_time,
        temp_bytes: stats.temp_bytes,
        scratch_bytes: stats.scratch_bytes,
        timings,
        kernels,
        trace,
    })
}

/// Runs the module on the CPU code generator with kernel timing on (outputs reused), and
/// with tracing on when asked.
fn profile_kernels(
    m: &Module,
    inputs: &[axle_ir::Literal],
    opts: &BenchOptions,
) -> Result<(Vec<KernelTime>, Option<String>), String> {
    let exe = axle_codegen_cpu::compile(m, &axle_codegen_cpu::CpuOptions::default())
        .map_err(|e| e.to_string())?;
    let leaves: Vec<&axle_ir::ArrayLiteral> = inputs
        .iter()
        .flat_map(|l| match l {
            axle_ir::Literal::Array(a) => vec![a],
            axle_ir::Literal::Tuple(_) => Vec::new(),
        })
        .collect();
    let data: Vec<&[u8]> = leaves.iter().map(|a| &a.data[..]).collect();
    let mut outs = exe.alloc_outputs();
    for _ in 0..opts.warmup {
        exe.execute(&data, &mut outs).map_err(|e| e.to_string())?;
    }
    exe.set_profiling(true);
    exe.set_tracing(opts.trace);
    let runs = opts.repeat.max(1);
    for _ in 0..runs {
        exe.execute(&data, &mut outs).map_err(|e| e.to_string())?;
    }
    let kernels = exe
        .profile()
        .into_iter()
        .map(|k| KernelTime {
            name: k.name,
            detail: k.detail,
            calls: k.calls as f64 / runs as f64,
            time: k.total / runs as u32,
        })
        .collect();
    let trace = opts
        .trace
        .then(|| crate::trace::chrome_trace(&exe.kernel_names().collect::<Vec<_>>(), &exe.trace()));
    Ok((kernels, trace))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// The report `axle bench` prints.
pub fn report(r: &BenchReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "module {} ({} instructions), backend {}",
        r.module, r.instructions, r.backend
    );
    let _ = writeln!(s, "compile: {:.3} ms", ms(r.compile_time));
    if let Some(w) = r.warm_compile_time {
        let _ = writeln!(s, "compile again (warm): {:.3} ms", ms(w));
    }
    if let Some(t) = r.temp_bytes {
        match r.scratch_bytes {
            Some(a) if a > 0 => {
                let _ = writeln!(s, "temp:    {t} bytes (scratch arena: {a} bytes)");
            }
            _ => {
                let _ = writeln!(s, "temp:    {t} bytes");
            }
        }
    }
    for t in &r.timings {
        let _ = writeln!(
            s,
            "run ({} outputs): median {:.3} ms, min {:.3} ms over {} runs",
            t.policy.name(),
            ms(t.median()),
            ms(t.min()),
            t.runs.len()
        );
    }
    if !r.kernels.is_empty() {
        let total: Duration = r.kernels.iter().map(|k| k.time).sum();
        let _ = writeln!(
            s,
            "kernels (reused outputs, per run; {:.3} ms in kernels):",
            ms(total)
        );
        for k in r.kernels.iter().take(12) {
            let _ = writeln!(
                s,
                "  {:>9.3} ms {:>5.1}%  {}{}",
                ms(k.time),
                100.0 * k.time.as_secs_f64() / total.as_secs_f64().max(1e-12),
                k.name,
                if k.calls != 1.0 {
                    format!(" x{}", k.calls)
                } else {
                    String::new()
                }
            );
            if !k.detail.is_empty() {
                let _ = writeln!(s, "                      {}", k.detail);
            }
        }
    }
    s
}
