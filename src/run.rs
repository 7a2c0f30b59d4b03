//! `axle run`: compile a module on a backend, bind inputs to the entry parameters, run it, and
//! write the outputs as `.npy` files.
//!
//! Inputs bind to the array leaves of the entry parameters, depth-first, in parameter order; a
//! wrong count, shape or element type is an error naming the parameter. Without inputs, each
//! parameter gets deterministic pseudo-random values from the seed. Outputs are the root's array
//! leaves, depth-first (a leaf with dynamic dimensions at its runtime sizes, as XLA's literal
//! holds it), written as `DIR/out0.npy`, `out1.npy`, ...; they are first written to a
//! temporary directory inside `DIR` and moved into place only when all of them are written, and
//! the output files of an earlier run in `DIR` are replaced as a set (see [`write_outputs`]), so
//! a failure leaves nothing partial behind and `DIR` never mixes two runs.
//!
//! Memory: the inputs a run makes or reads are reserved in one [`MemoryBudget`] under the
//! process's ceiling before each is allocated, so an input too large fails with an error naming
//! the parameter; the backends check their own results and temporaries the same way.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use axle_ir::literal::{complex_to_element, f64_to_element, i128_to_element};
use axle_ir::{ArrayLiteral, ArrayShape, ElementType, Literal, Module};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

use crate::backend::{
    pipeline_for, BackendError, CacheMode, CompileOptions, DeviceBuffer, Executable, Platform,
    ValueShape,
};
use crate::backends::registry;
use axle_ir::memory::{MemoryBudget, MemoryError, MemoryLimitError};

/// Why a run (or one of its steps: binding or making inputs, compiling, running, writing
/// outputs) failed. Its text is the message alone, as `axle run` prints it after the file name.
#[derive(Clone, Debug, thiserror::Error)]
pub enum RunError {
    /// The backend failed: it is not registered, or compiling, transferring or running failed
    /// (its own error, where it has one, is the source).
    #[error(transparent)]
    Backend(#[from] BackendError),
    /// The inputs do not fit the entry parameters (their count, shape or element type), or an
    /// input file does not read, or a parameter has no fixed size to generate.
    #[error("{0}")]
    Input(String),
    /// An input does not fit under the process's memory ceiling.
    #[error(transparent)]
    Memory(#[from] MemoryError),
    /// The memory ceiling's setting is refused.
    #[error(transparent)]
    MemoryLimit(#[from] MemoryLimitError),
    /// The outputs could not be written (a directory or file that cannot be made or moved).
    #[error("{0}")]
    Output(String),
}

/// Options of a run.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// The backend's name.
    pub backend: String,
    /// `.npy` inputs, one per array leaf of the entry parameters; empty to generate inputs.
    pub inputs: Vec<PathBuf>,
    /// Where to write `outK.npy`, if anywhere.
    pub out_dir: Option<PathBuf>,
    /// How many times to run (timings are reported over all runs).
    pub repeat: usize,
    /// Seed for generated inputs.
    pub seed: u64,
    /// A pass pipeline (standard name or text) to run before code generation; `None` runs the
    /// backend's default (the `cpu` pipeline on `cpu`), `none` runs nothing.
    pub pipeline: Option<String>,
    /// The compilation cache (off by default; the CLI turns it on).
    pub cache: CacheMode,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            backend: "cpu".into(),
            inputs: Vec::new(),
            out_dir: None,
            repeat: 1,
            seed: 0,
            pipeline: None,
            cache: CacheMode::Off,
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct RunReport {
    /// The backend used.
    pub backend: String,
    /// The inputs, one literal per entry parameter.
    pub inputs: Vec<Literal>,
    /// The output leaves, depth-first.
    pub outputs: Vec<ArrayLiteral>,
    /// Compilation time.
    pub compile_time: Duration,
    /// Wall time of each run.
    pub run_times: Vec<Duration>,
    /// Output files written.
    pub written: Vec<PathBuf>,
}

/// A module compiled and its inputs on the device, ready to run.
pub(crate) struct Loaded {
    /// The executable.
    pub exe: Box<dyn Executable>,
    /// How long compiling took.
    pub compile_time: Duration,
    /// The inputs on device 0.
    pub bufs: Vec<DeviceBuffer>,
}

/// Compiles `m` on `platform` with its pipeline (or `pipeline`) and `cache`, timing the
/// compilation, and transfers `inputs` to device 0: what `run` and `bench` share before their
/// runs.
pub(crate) fn compile_and_upload(
    platform: &dyn Platform,
    m: Module,
    pipeline: Option<&str>,
    cache: &CacheMode,
    inputs: &[Literal],
) -> Result<Loaded, RunError> {
    let t0 = Instant::now();
    let exe = platform.compiler().compile(
        m,
        &CompileOptions {
            pipeline: pipeline_for(platform, pipeline),
            cache: cache.clone(),
            ..Default::default()
        },
    )?;
    let compile_time = t0.elapsed();
    let bufs = upload(platform, inputs)?;
    Ok(Loaded {
        exe,
        compile_time,
        bufs,
    })
}

/// Runs an already parsed and verified module.
pub fn run_module(m: Module, opts: &RunOptions) -> Result<RunReport, RunError> {
    let platform = registry().get(&opts.backend)?;
    // What every backend refuses, before inputs are made for it.
    axle_ir::check_runnable(&m).map_err(|e| BackendError::new(&opts.backend, e.to_string()))?;
    let mut budget = MemoryBudget::new()?;
    let inputs = if opts.inputs.is_empty() {
        try_generate_inputs(&m, opts.seed, &mut budget)?
    } else {
        bind_inputs_within(&m, &opts.inputs, &mut budget)?
    };
    // A result with dynamic dimensions comes back at its runtime sizes, as XLA's literal.
    let mut m = m;
    let sized = axle_fusion::dynamic_padder::expose_result_sizes(&mut m);
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
    )?;
    let args: Vec<&_> = bufs.iter().collect();
    let mut run_times = Vec::new();
    let mut result = None;
    for _ in 0..opts.repeat.max(1) {
        let t = Instant::now();
        let out = exe.run(&args)?;
        run_times.push(t.elapsed());
        result = Some(out);
    }
    let result = result.expect("at least one run");
    let lit = platform.transfer_manager().from_device(&result)?;
    let outputs = defined_outputs(flatten(lit), &sized);
    let written = match &opts.out_dir {
        Some(dir) => write_outputs(dir, &outputs)?,
        None => Vec::new(),
    };
    Ok(RunReport {
        backend: opts.backend.clone(),
        inputs,
        outputs,
        compile_time,
        run_times,
        written,
    })
}

/// The result leaves of a module that [`expose_result_sizes`] changed, back at their runtime
/// sizes: the trailing `sized.len()` leaves are the sizes of `(leaf, dimension)` of `sized`; each
/// sized leaf is cut to its leading block (a size clamped into `[0, bound]`).
///
/// [`expose_result_sizes`]: axle_fusion::dynamic_padder::expose_result_sizes
fn defined_outputs(mut leaves: Vec<ArrayLiteral>, sized: &[(usize, usize)]) -> Vec<ArrayLiteral> {
    if sized.is_empty() || leaves.len() < sized.len() {
        return leaves;
    }
    let sizes = leaves.split_off(leaves.len() - sized.len());
    for (&(k, d), s) in sized.iter().zip(&sizes) {
        let Some(leaf) = leaves.get_mut(k) else {
            continue;
        };
        let mut dims = leaf.shape.dims.to_vec();
        let Some(bound) = dims.get(d).copied() else {
            continue;
        };
        dims[d] = i64::try_from(s.get_i128(0)).unwrap_or(0).clamp(0, bound);
        if let Some((block, _)) = leaf.leading_block(&dims) {
            *leaf = block;
        }
    }
    leaves
}

/// The literals `args` on the device of `platform` (device 0), through its transfer manager.
pub fn upload(
    platform: &dyn Platform,
    args: &[Literal],
) -> Result<Vec<DeviceBuffer>, BackendError> {
    let tm = platform.transfer_manager();
    args.iter().map(|a| tm.to_device(a, 0)).collect()
}

/// Runs `exe` (compiled by `platform`) once on the literals `args`: uploads them, runs, and
/// fetches the result's array leaves, depth-first.
pub fn run_literals(
    platform: &dyn Platform,
    exe: &dyn Executable,
    args: &[Literal],
) -> Result<Vec<ArrayLiteral>, BackendError> {
    let bufs = upload(platform, args)?;
    let refs: Vec<&DeviceBuffer> = bufs.iter().collect();
    let out = exe.run(&refs)?;
    let lit = platform.transfer_manager().from_device(&out)?;
    Ok(flatten(lit))
}

/// The array leaves of a literal, depth-first.
pub fn flatten(l: Literal) -> Vec<ArrayLiteral> {
    l.into_leaves()
}

fn param_desc(m: &Module, k: usize) -> String {
    let p = m.params(m.entry())[k];
    format!("parameter {k} ('{}')", m.name(p))
}

/// Reads `.npy` inputs and binds them to the entry parameters' array leaves (token
/// parameters take no file: a token carries no data).
pub fn bind_inputs(m: &Module, files: &[PathBuf]) -> Result<Vec<Literal>, RunError> {
    bind_inputs_within(m, files, &mut MemoryBudget::new()?)
}

/// [`bind_inputs`], with the inputs' data reserved in `budget` before each is read.
pub fn bind_inputs_within(
    m: &Module,
    files: &[PathBuf],
    budget: &mut MemoryBudget,
) -> Result<Vec<Literal>, RunError> {
    let params = m.params(m.entry()).to_vec();
    let shapes: Vec<ValueShape> = params
        .iter()
        .map(|&p| ValueShape::of_shape(m, m.shape(p)))
        .collect();
    let total: usize = shapes.iter().map(|s| s.leaves().len()).sum();
    if files.len() != total {
        return Err(RunError::Input(format!(
            "the entry computation takes {total} input array{} but {} {} given",
            if total == 1 { "" } else { "s" },
            files.len(),
            if files.len() == 1 { "was" } else { "were" }
        )));
    }
    let mut next = 0;
    let mut out = Vec::new();
    for (k, s) in shapes.iter().enumerate() {
        out.push(bind_one(m, k, s, files, &mut next, budget).map_err(RunError::Input)?);
    }
    Ok(out)
}

fn bind_one(
    m: &Module,
    k: usize,
    s: &ValueShape,
    files: &[PathBuf],
    next: &mut usize,
    budget: &mut MemoryBudget,
) -> Result<Literal, String> {
    match s {
        ValueShape::Array(a) => {
            let f = &files[*next];
            *next += 1;
            let lit = axle_ir::read_npy_within(f, Some(a.ty), budget)
                .map_err(|e| format!("{}: {e}", param_desc(m, k)))?;
            if lit.shape.dims != a.dims {
                return Err(format!(
                    "{}: {} has shape {:?} but the parameter needs {}{:?}",
                    param_desc(m, k),
                    f.display(),
                    lit.shape.dims,
                    a.ty.name(),
                    a.dims
                ));
            }
            Ok(Literal::Array(lit))
        }
        ValueShape::Tuple(es) => Ok(Literal::Tuple(
            es.iter()
                .map(|e| bind_one(m, k, e, files, next, budget))
                .collect::<Result<_, _>>()?,
        )),
        ValueShape::Token => Ok(Literal::Tuple(Vec::new())),
    }
}

/// Deterministic inputs for every entry parameter from `seed`: floats uniform in [-1, 1),
/// signed integers in [-8, 8), unsigned in [0, 16), pred fair coin flips; tokens are empty
/// tuples. Each parameter's size is checked against the memory ceiling before it is made.
pub fn generate_inputs(m: &Module, seed: u64) -> Result<Vec<Literal>, RunError> {
    try_generate_inputs(m, seed, &mut MemoryBudget::new()?)
}

/// [`generate_inputs`], reserving each parameter's bytes in `budget` first: a parameter too
/// large for it (or with an unbounded dynamic dimension) is an error naming it, before anything
/// is allocated.
pub fn try_generate_inputs(
    m: &Module,
    seed: u64,
    budget: &mut MemoryBudget,
) -> Result<Vec<Literal>, RunError> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut out = Vec::new();
    for (k, &p) in m.params(m.entry()).iter().enumerate() {
        let s = ValueShape::of_shape(m, m.shape(p));
        let mut bytes = 0u64;
        for a in s.leaves() {
            let b = a.byte_size().ok_or_else(|| {
                RunError::Input(format!(
                    "{}: {} has no fixed size",
                    param_desc(m, k),
                    axle_ir::OwnedShape::Array(a.clone())
                ))
            })?;
            bytes = bytes.saturating_add(b);
        }
        budget.reserve(bytes, || param_desc(m, k))?;
        out.push(
            generate(&s, &mut rng)
                .map_err(|e| RunError::Input(format!("{}: {e}", param_desc(m, k))))?,
        );
    }
    Ok(out)
}

fn generate(s: &ValueShape, rng: &mut ChaCha8Rng) -> Result<Literal, String> {
    Ok(match s {
        ValueShape::Array(a) => Literal::Array(random_array(a, rng)?),
        ValueShape::Tuple(es) => Literal::Tuple(
            es.iter()
                .map(|e| generate(e, rng))
                .collect::<Result<_, _>>()?,
        ),
        ValueShape::Token => Literal::Tuple(Vec::new()),
    })
}

fn random_array(a: &ArrayShape, rng: &mut ChaCha8Rng) -> Result<ArrayLiteral, String> {
    let bytes = a.byte_size().ok_or("the shape has no fixed size")?;
    let n = a.num_elements().max(0) as usize;
    let mut data = axle_ir::memory::try_with_capacity(bytes as usize, || "its data".to_string())
        .map_err(|e| e.to_string())?;
    for _ in 0..n {
        let bytes = match a.ty {
            ElementType::Pred => vec![rng.random::<bool>() as u8],
            t if t.is_complex() => {
                complex_to_element(t, rng.random_range(-1.0..1.0), rng.random_range(-1.0..1.0))
            }
            t if t.is_float() => f64_to_element(t, rng.random_range(-1.0..1.0)),
            t if t.is_signed_int() => i128_to_element(t, rng.random_range(-8..8)),
            t => i128_to_element(t, rng.random_range(0..16)),
        };
        data.extend(bytes);
    }
    Ok(ArrayLiteral {
        shape: a.clone(),
        data,
    })
}

/// Whether `name` is an output file of a run (`out` then digits then `.npy`).
fn is_output_name(name: &str) -> bool {
    name.strip_prefix("out")
        .and_then(|r| r.strip_suffix(".npy"))
        .is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit()))
}

/// Writes `outK.npy` into `dir`, replacing every output file of an earlier run, so the directory
/// never mixes two runs: all files go to a temporary directory inside `dir` first; then the
/// earlier run's `outK.npy` files (any `K`) are moved aside into it, the new ones moved into
/// place, and the temporary directory removed. If a move fails, the new files are taken out and
/// the earlier ones put back, so `dir` holds either the earlier run's outputs or this run's.
pub fn write_outputs(dir: &Path, outputs: &[ArrayLiteral]) -> Result<Vec<PathBuf>, RunError> {
    write_outputs_as_set(dir, outputs).map_err(RunError::Output)
}

/// [`write_outputs`], its error a message.
fn write_outputs_as_set(dir: &Path, outputs: &[ArrayLiteral]) -> Result<Vec<PathBuf>, String> {
    std::fs::create_dir_all(dir)
        .map_err(|e| format!("{}: cannot create directory: {e}", dir.display()))?;
    let tmp = tempfile::Builder::new()
        .prefix(".axle-out-")
        .tempdir_in(dir)
        .map_err(|e| {
            format!(
                "{}: cannot create a temporary directory: {e}",
                dir.display()
            )
        })?;
    let staged_dir = tmp.path().join("new");
    let old_dir = tmp.path().join("old");
    for d in [&staged_dir, &old_dir] {
        std::fs::create_dir(d)
            .map_err(|e| format!("{}: cannot create a directory: {e}", d.display()))?;
    }
    let mut staged = Vec::new();
    for (k, o) in outputs.iter().enumerate() {
        let p = staged_dir.join(format!("out{k}.npy"));
        axle_ir::write_npy(&p, o).map_err(|e| format!("writing output {k}: {e}"))?;
        staged.push(p);
    }
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: cannot list the directory: {e}", dir.display()))?;
    let mut earlier: Vec<String> = Vec::new();
    for e in entries {
        let e = e.map_err(|e| format!("{}: cannot list the directory: {e}", dir.display()))?;
        if let Some(name) = e.file_name().to_str() {
            if is_output_name(name) && e.file_type().is_ok_and(|t| t.is_file()) {
                earlier.push(name.to_string());
            }
        }
    }
    earlier.sort();
    let mut moved_aside: Vec<&str> = Vec::new();
    let mut placed: Vec<PathBuf> = Vec::new();
    // Puts the directory back as it was: the new files out, the earlier ones back.
    let undo = |placed: &[PathBuf], moved_aside: &[&str]| {
        for p in placed {
            let _ = std::fs::remove_file(p);
        }
        for name in moved_aside {
            let _ = std::fs::rename(old_dir.join(name), dir.join(name));
        }
    };
    for name in &earlier {
        if let Err(e) = std::fs::rename(dir.join(name), old_dir.join(name)) {
            undo(&placed, &moved_aside);
            return Err(format!(
                "{}: cannot replace the earlier run's output: {e}",
                dir.join(name).display()
            ));
        }
        moved_aside.push(name);
    }
    for (k, p) in staged.iter().enumerate() {
        let dst = dir.join(format!("out{k}.npy"));
        if let Err(e) = std::fs::rename(p, &dst) {
            undo(&placed, &moved_aside);
            return Err(format!(
                "{}: cannot move output into place: {e}",
                dst.display()
            ));
        }
        placed.push(dst);
    }
    Ok(placed)
}

/// A short human-readable summary of a run.
pub fn summary(r: &RunReport) -> String {
    use std::fmt::Write;
    let mut s = String::new();
    for (k, o) in r.outputs.iter().enumerate() {
        let dims: Vec<String> = o.shape.dims.iter().map(|d| d.to_string()).collect();
        let n = o.len();
        let shown: Vec<String> = (0..n.min(6))
            .map(|i| axle_ir::literal::format_element(o.ty(), o.element_bytes(i)))
            .collect();
        let more = if n > 6 { ", ..." } else { "" };
        let _ = writeln!(
            s,
            "out{k}: {}[{}] = [{}{more}]",
            o.ty().name(),
            dims.join(","),
            shown.join(", ")
        );
    }
    let mut times = r.run_times.clone();
    times.sort();
    let median = times[times.len() / 2];
    let _ = writeln!(
        s,
        "backend {}: compile {:.3} ms, run median {:.3} ms, min {:.3} ms over {} run{}",
        r.backend,
        r.compile_time.as_secs_f64() * 1e3,
        median.as_secs_f64() * 1e3,
        times[0].as_secs_f64() * 1e3,
        times.len(),
        if times.len() == 1 { "" } else { "s" }
    );
    for w in &r.written {
        let _ = writeln!(s, "wrote {}", w.display());
    }
    s
}
