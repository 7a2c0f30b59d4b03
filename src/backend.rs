//! The backend plug-in interface, modelled on XLA's: a [`Platform`] names a kind of device and
//! lists its devices; its [`Compiler`] turns a module into an [`Executable`], running the
//! backend's own pipeline; its [`TransferManager`] moves literals to and from device memory as
//! [`DeviceBuffer`]s. Backends are found by name in a [`BackendRegistry`]. This file knows no
//! implementation of these traits; `crate::backends` holds the built-in ones and the
//! process-wide registry.
//!
//! A third-party backend implements the three traits in its own crate and registers its platform
//! with [`BackendRegistry::register`]; `examples/custom_backend.rs` is a worked example.

use std::any::Any;
use std::fmt;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axle_ir::{ArrayShape, ElementType, Literal, Module, Shape};

use crate::array::ArrayRef;
use crate::cache::CacheOutcome;

/// An error from a backend: compilation, transfer or execution. Its text is
/// `BACKEND: MESSAGE`; where the backend's own error type says why (the nvptx backend's
/// [`axle_codegen_nvptx::NvptxError`]), it is kept as the [`std::error::Error::source`], so a
/// caller can downcast it and match its variants. Two errors are equal when their backend and
/// message are.
#[derive(Clone, Debug)]
pub struct BackendError {
    /// The backend that failed.
    pub backend: String,
    /// What went wrong.
    pub message: String,
    /// The backend's own error, when it has one (its text is `message`).
    source: Option<Arc<dyn std::error::Error + Send + Sync>>,
}

impl BackendError {
    /// An error of backend `backend`.
    pub fn new(backend: &str, message: impl Into<String>) -> Self {
        BackendError {
            backend: backend.to_string(),
            message: message.into(),
            source: None,
        }
    }

    /// An error of backend `backend` from its own error `source`: the message is `source`'s
    /// text, and `source` is the error's [`std::error::Error::source`].
    pub fn with_source(
        backend: &str,
        source: impl std::error::Error + Send + Sync + 'static,
    ) -> Self {
        BackendError {
            backend: backend.to_string(),
            message: source.to_string(),
            source: Some(Arc::new(source)),
        }
    }
}

impl PartialEq for BackendError {
    fn eq(&self, other: &Self) -> bool {
        self.backend == other.backend && self.message == other.message
    }
}

impl Eq for BackendError {}

impl fmt::Display for BackendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.backend, self.message)
    }
}

impl std::error::Error for BackendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|e| e as &(dyn std::error::Error + 'static))
    }
}

/// A device of a platform.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's index within its platform.
    pub ordinal: usize,
    /// A human-readable description.
    pub description: String,
    /// Memory available to buffers, if known.
    pub memory_bytes: Option<u64>,
}

/// The shape of a value held in a buffer: arrays and (nested) tuples, independent of any module.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ValueShape {
    /// An array.
    Array(ArrayShape),
    /// A tuple.
    Tuple(Vec<ValueShape>),
    /// A token.
    Token,
}

impl ValueShape {
    /// The shape of a literal.
    pub fn of_literal(l: &Literal) -> ValueShape {
        match l {
            Literal::Array(a) => ValueShape::Array(a.shape.clone()),
            Literal::Tuple(es) => {
                ValueShape::Tuple(es.iter().map(ValueShape::of_literal).collect())
            }
        }
    }

    /// The shape of a module's interned shape.
    pub fn of_shape(m: &Module, s: &Shape) -> ValueShape {
        match s {
            Shape::Array(a) => ValueShape::Array(a.clone()),
            Shape::Tuple(es) => ValueShape::Tuple(
                es.iter()
                    .map(|e| ValueShape::of_shape(m, m.shape_of(*e)))
                    .collect(),
            ),
            Shape::Token | Shape::Opaque => ValueShape::Token,
        }
    }

    /// Whether a value of shape `got` can be passed where this shape is expected: same tuple
    /// structure, element types and dimensions (dynamic flags aside); a token also accepts the
    /// empty tuple, the host form of a token.
    pub fn accepts(&self, got: &ValueShape) -> bool {
        match (self, got) {
            (ValueShape::Array(a), ValueShape::Array(b)) => a.ty == b.ty && a.dims == b.dims,
            (ValueShape::Tuple(a), ValueShape::Tuple(b)) => {
                a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.accepts(y))
            }
            (ValueShape::Token, ValueShape::Token) => true,
            (ValueShape::Token, ValueShape::Tuple(b)) => b.is_empty(),
            _ => false,
        }
    }

    /// The array leaves, depth-first.
    pub fn leaves(&self) -> Vec<&ArrayShape> {
        let mut out = Vec::new();
        fn walk<'a>(s: &'a ValueShape, out: &mut Vec<&'a ArrayShape>) {
            match s {
                ValueShape::Array(a) => out.push(a),
                ValueShape::Tuple(es) => es.iter().for_each(|e| walk(e, out)),
                ValueShape::Token => {}
            }
        }
        walk(self, &mut out);
        out
    }
}

impl ValueShape {
    /// The same shape as an [`axle_ir::OwnedShape`] (which prints it in HLO text form).
    pub fn to_owned_shape(&self) -> axle_ir::OwnedShape {
        match self {
            ValueShape::Array(a) => axle_ir::OwnedShape::Array(a.clone()),
            ValueShape::Tuple(es) => {
                axle_ir::OwnedShape::Tuple(es.iter().map(ValueShape::to_owned_shape).collect())
            }
            ValueShape::Token => axle_ir::OwnedShape::Token,
        }
    }
}

impl fmt::Display for ValueShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_owned_shape())
    }
}

/// Memory on a device holding one value (an array or a tuple of buffers). What the payload is
/// belongs to the backend that made it; other backends reject it.
pub struct DeviceBuffer {
    /// The platform that owns the buffer.
    pub platform: String,
    /// The device it lives on.
    pub device: usize,
    /// The value's shape.
    pub shape: ValueShape,
    /// The backend's payload.
    pub payload: Box<dyn Any + Send + Sync>,
}

impl DeviceBuffer {
    /// The payload as the `T` that backend `platform` stores, or an error naming the backend
    /// when the buffer belongs to another backend or holds something else (`what` names the
    /// expected payload in that error).
    pub fn payload_of<T: Any>(&self, platform: &str, what: &str) -> Result<&T, BackendError> {
        if self.platform != platform {
            return Err(BackendError::new(
                platform,
                format!("buffer belongs to backend '{}'", self.platform),
            ));
        }
        self.payload
            .downcast_ref::<T>()
            .ok_or_else(|| BackendError::new(platform, format!("buffer payload is not {what}")))
    }
}

impl fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DeviceBuffer")
            .field("platform", &self.platform)
            .field("device", &self.device)
            .field("shape", &self.shape)
            .finish_non_exhaustive()
    }
}

/// How hard a code generator optimizes.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum OptLevel {
    /// No optimization: the fastest compile.
    O0,
    /// Light optimization.
    O1,
    /// The usual optimizations.
    O2,
    /// Everything, vectorization included (the default).
    #[default]
    O3,
}

impl OptLevel {
    /// `0` to `3`.
    pub fn number(self) -> u8 {
        self as u8
    }
}

/// Where compiled code is cached between compilations and processes.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub enum CacheMode {
    /// No caching (the library's default).
    #[default]
    Off,
    /// Entries under this directory (see [`crate::cache`]).
    Dir(std::path::PathBuf),
}

impl CacheMode {
    /// [`CacheMode::Dir`] of `AXLE_CACHE_DIR` when it is set and not empty, else
    /// [`CacheMode::Off`]: how a library user opts in from the environment.
    pub fn from_env() -> CacheMode {
        match std::env::var_os("AXLE_CACHE_DIR") {
            Some(d) if !d.is_empty() => CacheMode::Dir(d.into()),
            _ => CacheMode::Off,
        }
    }
}

/// Options for a compilation. Backends ignore the options that mean nothing to them (the
/// interpreter has no threads, no code to optimize and nothing to cache).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash)]
pub struct CompileOptions {
    /// The device to compile for.
    pub device: usize,
    /// A pass pipeline to run on the module before code generation: a standard pipeline's name
    /// (`simplify`, `cpu`) or pipeline text (`fixpoint(max=4)[algsimp,cse,dce]`); `None` (or
    /// `none`) runs none. [`pipeline_for`] picks a platform's default.
    pub pipeline: Option<String>,
    /// Threads a run may use: `None` for the backend's default (`cpu`: `AXLE_CPU_THREADS` or
    /// every core), `Some(1)` for the calling thread only.
    pub threads: Option<usize>,
    /// The code generator's optimization level.
    pub opt_level: OptLevel,
    /// The compilation cache.
    pub cache: CacheMode,
}

impl CompileOptions {
    /// These options with `pipeline` run before code generation.
    pub fn pipeline(mut self, pipeline: &str) -> Self {
        self.pipeline = Some(pipeline.to_string());
        self
    }

    /// These options with `threads` threads per run.
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = Some(threads);
        self
    }

    /// These options with optimization level `level`.
    pub fn opt_level(mut self, level: OptLevel) -> Self {
        self.opt_level = level;
        self
    }

    /// These options with the cache `cache`.
    pub fn cache(mut self, cache: CacheMode) -> Self {
        self.cache = cache;
        self
    }
}

/// What every compiler does first: checks the device ordinal (each built-in backend has one
/// device), verifies the module, makes a module that sets runtime sizes (`set-dimension-size`,
/// `dynamic-reshape`) static with `inline` then the `dynamic-padder` pass whatever the pipeline
/// (so every backend, the interpreter included, runs bounded dynamic shapes the same way, and
/// a dynamic value passed to a `call` is tracked inside it), runs
/// `opts.pipeline` (verifying after it) and returns the module to generate code for. Errors
/// name `backend`.
pub fn prepare_module(
    backend: &str,
    m: Module,
    opts: &CompileOptions,
) -> Result<Module, BackendError> {
    prepare_module_phases(backend, m, opts).map(|(m, _)| m)
}

/// [`prepare_module`], with the time of verification and of each pass ([`pass_phases`]).
pub fn prepare_module_phases(
    backend: &str,
    mut m: Module,
    opts: &CompileOptions,
) -> Result<(Module, Vec<Phase>), BackendError> {
    if opts.device != 0 {
        return Err(BackendError::new(
            backend,
            format!("no device {}", opts.device),
        ));
    }
    let t = std::time::Instant::now();
    crate::verify_module(&m).map_err(|e| BackendError::with_source(backend, e))?;
    axle_ir::check_runnable(&m).map_err(|e| BackendError::new(backend, e.to_string()))?;
    let mut phases = vec![Phase {
        name: "verify".into(),
        time: t.elapsed(),
    }];
    if axle_fusion::dynamic_padder::has_dynamic_sizes(&m) {
        let rows = run_pipeline(backend, &mut m, "inline,dynamic-padder", None)?;
        phases.extend(pass_phases(&rows));
    }
    if let Some(p) = opts.pipeline.as_ref().filter(|p| p.as_str() != NO_PIPELINE) {
        let text = crate::passes::standard_pipeline(p).unwrap_or(p);
        let rows = run_pipeline(backend, &mut m, text, Some(p))?;
        phases.extend(pass_phases(&rows));
    }
    Ok((m, phases))
}

/// Runs pipeline `text` on `m`, verifying as the build does; an error names `backend` and, when
/// given, the pipeline as it was asked for (`label`).
fn run_pipeline(
    backend: &str,
    m: &mut Module,
    text: &str,
    label: Option<&str>,
) -> Result<Vec<axle_ir::StatsRow>, BackendError> {
    let pm_opts = axle_ir::PassManagerOptions {
        verify: axle_ir::VerifyMode::default_for_build(),
        ..Default::default()
    };
    crate::passes::optimize(m, text, pm_opts).map_err(|e| {
        let msg = match e {
            crate::passes::OptimizeError::Pipeline(e) => e.render(),
            crate::passes::OptimizeError::Pass(e, _) => e.to_string(),
        };
        let msg = match label {
            Some(p) => format!("pipeline '{p}': {msg}"),
            None => msg,
        };
        BackendError::new(backend, msg)
    })
}

/// Checks host arrays against the array leaves an executable expects (`what` is `argument` for
/// the entry parameters' leaves, `output` for the result's): their number, then each one's
/// element type and dimensions. The message names the position and both shapes, the same for
/// every backend.
pub fn check_host_arrays<'a>(
    backend: &str,
    what: &str,
    expected: &[ArrayShape],
    got: impl ExactSizeIterator<Item = (ElementType, &'a [i64])>,
) -> Result<(), BackendError> {
    if got.len() != expected.len() {
        return Err(BackendError::new(
            backend,
            format!(
                "{} {what} array{} expected, {} given",
                expected.len(),
                if expected.len() == 1 { "" } else { "s" },
                got.len()
            ),
        ));
    }
    for (k, (e, (ty, dims))) in expected.iter().zip(got).enumerate() {
        if e.ty != ty || e.dims.as_ref() != dims {
            return Err(BackendError::new(
                backend,
                format!(
                    "{what} {k}: {} expected, {} given",
                    describe(e.ty, &e.dims),
                    describe(ty, dims)
                ),
            ));
        }
    }
    Ok(())
}

/// `f32[2,3]`.
fn describe(ty: ElementType, dims: &[i64]) -> String {
    let d: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    format!("{}[{}]", ty.name(), d.join(","))
}

/// What an executable reports about itself.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ExecutableStats {
    /// Time spent compiling.
    pub compile_time: Duration,
    /// Instructions in the compiled module.
    pub instructions: usize,
    /// Bytes of temporary memory a run needs, when the backend knows.
    pub temp_bytes: Option<u64>,
    /// Bytes of the runtime's scratch arena a run needs beside the temporaries (library
    /// working memory: GEMM packing, sort planes), when the backend knows.
    pub scratch_bytes: Option<u64>,
    /// What the compilation did with the compilation cache.
    pub cache: CacheOutcome,
    /// The compilation's phases in order (verification, each pass of the pipeline, then the
    /// backend's own), with their times; empty where the backend does not say.
    pub phases: Vec<Phase>,
}

pub use crate::phases::{pass_phases, Phase};

/// Turns modules into executables for one platform.
pub trait Compiler: Send + Sync {
    /// Compiles `m` (already verified) with `opts`, running the backend's own pipeline.
    fn compile(
        &self,
        m: Module,
        opts: &CompileOptions,
    ) -> Result<Box<dyn Executable>, BackendError>;
}

/// A compiled program. Callers run it with `run` and `run_into` (methods of
/// `dyn Executable`, so no backend can replace them), which check the arguments against the
/// entry parameters ([`check_arguments`]) on every backend before calling the backend's
/// [`Executable::execute`]; a backend implements `execute` and may rely on that check.
pub trait Executable: Send + Sync {
    /// The name of the backend that compiled it (errors carry it).
    fn backend(&self) -> &str;
    /// Runs the program on argument buffers already checked against the entry parameters
    /// (one per parameter, each of the parameter's shape and element type, owned by this
    /// backend) and returns the result buffer (a tuple root gives a tuple buffer).
    fn execute(&self, args: &[&DeviceBuffer]) -> Result<DeviceBuffer, BackendError>;
    /// Runs the program on checked arguments writing its result into `out`, the result buffer
    /// of an earlier run of this executable, so repeated runs can reuse their output memory.
    /// Backends that cannot reuse it return a fresh result in `out`.
    fn execute_into(
        &self,
        args: &[&DeviceBuffer],
        out: &mut DeviceBuffer,
    ) -> Result<(), BackendError> {
        *out = self.execute(args)?;
        Ok(())
    }
    /// The module as compiled (after the backend's pipeline).
    fn module(&self) -> &Module;
    /// The compiled form as text (HLO for the interpreter, LLVM IR or assembly for code
    /// generators).
    fn compiled_text(&self) -> String;
    /// Statistics.
    fn stats(&self) -> ExecutableStats;
    /// The run on host memory, for backends whose device memory is host memory (see
    /// [`HostExecutable`]); `None` (the default) makes callers go through the transfer manager.
    fn host(&self) -> Option<&dyn HostExecutable> {
        None
    }
    /// The executable as [`Any`], so a caller can reach the backend's own type
    /// (`axle::cpu::CpuExecutable`); `None` by default.
    fn as_any(&self) -> Option<&dyn Any> {
        None
    }
}

/// A run on host memory without transfers: arguments are the array leaves of the entry
/// parameters in the caller's memory, results are written into the caller's arrays.
pub trait HostExecutable: Send + Sync {
    /// Runs on `args` (one per array leaf of the entry parameters, depth-first, already checked
    /// against the parameters' types and dimensions) writing the result's array leaves, as
    /// row-major bytes, into `outs` (one per leaf, of the leaf's byte size, aligned for its
    /// element type).
    fn execute(&self, args: &[ArrayRef<'_>], outs: &mut [&mut [u8]]) -> Result<(), BackendError>;

    /// `(output leaf, parameter leaf)` pairs donated through `input_output_alias` whose output
    /// the program leaves in the parameter's memory, so that a caller owning a donated input can
    /// hand its memory over as the output ([`HostExecutable::execute_donated`]); none by
    /// default.
    fn donated_outputs(&self) -> &[(u32, u32)] {
        &[]
    }

    /// [`HostExecutable::execute`] where `args[k]` may be `None` for a pair `(j, k)` of
    /// [`HostExecutable::donated_outputs`]: the parameter's bytes are already in `outs[j]`,
    /// which the run updates in place. With every argument given, the same as `execute`.
    fn execute_donated(
        &self,
        args: &[Option<ArrayRef<'_>>],
        outs: &mut [&mut [u8]],
    ) -> Result<(), BackendError> {
        let given: Option<Vec<ArrayRef<'_>>> = args.iter().cloned().collect();
        match given {
            Some(args) => self.execute(&args, outs),
            None => Err(BackendError::new(
                "host",
                "this executable takes no donated arguments in its outputs",
            )),
        }
    }
}

impl dyn Executable + '_ {
    /// Runs the program on argument buffers (one per entry parameter) after checking them
    /// ([`check_arguments`]) and returns the result buffer.
    pub fn run(&self, args: &[&DeviceBuffer]) -> Result<DeviceBuffer, BackendError> {
        check_arguments(self.backend(), self.module(), args)?;
        self.execute(args)
    }

    /// Runs the program after checking its arguments, writing the result into `out` (see
    /// [`Executable::execute_into`]).
    pub fn run_into(
        &self,
        args: &[&DeviceBuffer],
        out: &mut DeviceBuffer,
    ) -> Result<(), BackendError> {
        check_arguments(self.backend(), self.module(), args)?;
        self.execute_into(args, out)
    }
}

/// Checks argument buffers against the entry parameters of `m`, the same way for every
/// backend: one buffer per parameter, each owned by `backend` and of the parameter's shape
/// (tuple structure, element types and dimensions; dynamic-dimension flags aside, as bounded
/// dynamic dimensions run at their bound). A token parameter takes a token buffer or an empty
/// tuple (tokens carry no data). A buffer whose bytes would fit but whose element type or
/// dimensions differ is refused: backends never reinterpret bits.
pub fn check_arguments(
    backend: &str,
    m: &Module,
    args: &[&DeviceBuffer],
) -> Result<(), BackendError> {
    let params = m.params(m.entry());
    if args.len() != params.len() {
        return Err(BackendError::new(
            backend,
            format!(
                "the entry computation takes {} argument{} but {} {} given",
                params.len(),
                if params.len() == 1 { "" } else { "s" },
                args.len(),
                if args.len() == 1 { "was" } else { "were" }
            ),
        ));
    }
    for (k, (&p, b)) in params.iter().zip(args).enumerate() {
        if b.platform != backend {
            return Err(BackendError::new(
                backend,
                format!(
                    "argument {k} is a buffer of backend '{}', not of '{backend}'",
                    b.platform
                ),
            ));
        }
        let want = ValueShape::of_shape(m, m.shape(p));
        if !want.accepts(&b.shape) {
            return Err(BackendError::new(
                backend,
                format!(
                    "argument {k} is {} but parameter {k} ('{}') is {want}",
                    b.shape,
                    m.name(p)
                ),
            ));
        }
    }
    Ok(())
}

/// Moves literals between the host and a platform's devices.
pub trait TransferManager: Send + Sync {
    /// Copies a literal to device memory.
    fn to_device(&self, lit: &Literal, device: usize) -> Result<DeviceBuffer, BackendError>;
    /// Copies a device buffer back to a host literal. (Named after XLA's
    /// `TransferLiteralFromDevice`; it is a method of the manager, not a constructor.)
    #[allow(clippy::wrong_self_convention)]
    fn from_device(&self, buf: &DeviceBuffer) -> Result<Literal, BackendError>;
}

/// A kind of device, with its compiler and transfer manager.
pub trait Platform: Send + Sync {
    /// The backend's name (`interpreter`, `cpu`, ...).
    fn name(&self) -> &str;
    /// The devices present.
    fn devices(&self) -> Vec<DeviceInfo>;
    /// The compiler.
    fn compiler(&self) -> &dyn Compiler;
    /// The transfer manager.
    fn transfer_manager(&self) -> &dyn TransferManager;
    /// The pass pipeline `axle run`, `bench` and `compile` run before compiling when none is
    /// asked for: a standard pipeline's name or pipeline text (default: none).
    fn default_pipeline(&self) -> Option<&str> {
        None
    }
}

/// The pipeline to run on `platform` when `requested` was asked for: the platform's default
/// when nothing was asked, nothing for `none`, else what was asked.
pub fn pipeline_for(platform: &dyn Platform, requested: Option<&str>) -> Option<String> {
    match requested {
        None => platform.default_pipeline().map(str::to_string),
        Some(NO_PIPELINE) => None,
        Some(p) => Some(p.to_string()),
    }
}

/// The pipeline name that runs nothing (`--passes none`): the module is compiled as given.
pub const NO_PIPELINE: &str = "none";

/// Backends by name.
#[derive(Default)]
pub struct BackendRegistry {
    platforms: RwLock<Vec<Arc<dyn Platform>>>,
}

impl BackendRegistry {
    /// Adds a platform; a platform of the same name is replaced.
    pub fn register(&self, p: Arc<dyn Platform>) {
        let mut v = self.platforms.write().unwrap_or_else(|e| e.into_inner());
        v.retain(|q| q.name() != p.name());
        v.push(p);
    }

    /// The platform named `name`.
    pub fn get(&self, name: &str) -> Result<Arc<dyn Platform>, BackendError> {
        let v = self.platforms.read().unwrap_or_else(|e| e.into_inner());
        v.iter().find(|p| p.name() == name).cloned().ok_or_else(|| {
            let names: Vec<&str> = v.iter().map(|p| p.name()).collect();
            BackendError::new(
                name,
                format!("no such backend (available: {})", names.join(", ")),
            )
        })
    }

    /// The names of the registered platforms, in registration order.
    pub fn names(&self) -> Vec<String> {
        let v = self.platforms.read().unwrap_or_else(|e| e.into_inner());
        v.iter().map(|p| p.name().to_string()).collect()
    }
}
