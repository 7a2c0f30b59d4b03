//! The compilation pipeline (lower; emit, verify, optimize and emit object files, one per LLVM
//! module of [`crate::modules`], on rayon threads), the JIT executable (the object files linked
//! into the process by ORC, [`axle_codegen_llvm::object_loader`]) and its threaded runtime. Compiling and loading a cached [`Artifact`] make the same executable: the
//! same object code runs either way.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use axle_analysis::float_mode::with_float_mode;
use axle_ir::{ArrayShape, Module};
use inkwell::context::Context;
use inkwell::targets::{FileType, RelocMode, TargetMachine};

use axle_schedule::{assign, schedule_module, BufferAssignment, Heuristic};

use crate::artifact::Artifact;
use crate::buffer_rules::CpuRules;
use crate::error::{finish, CodegenError};
use crate::kernel_cache::KernelCache;
use crate::lower::{lower, Program};
use crate::modules::{Compiled, Form, Setup};
use crate::pool::SharedPool;
use crate::target_spec::{target_machine, target_spec, thread_count};
use crate::CpuOptions;
use axle_codegen_llvm::object_loader::LoadedObject;

/// The runtime hooks generated code calls, laid out as the C header declares them.
#[repr(C)]
pub struct AxleRuntime {
    /// Runs `kernel(bufs, s, e)` over a partition of `[0, n)` into ranges of at least `grain`.
    pub parallel_for: unsafe extern "C" fn(*const AxleRuntime, KernelFn, *const *mut u8, i64, i64),
    /// The runtime's own data.
    pub user: *const std::ffi::c_void,
    /// Called before (`phase` 0) and after (`phase` 1) kernel number `kernel`, if not null.
    pub trace: Option<unsafe extern "C" fn(*const AxleRuntime, i64, i64)>,
}

/// What `AxleRuntime::user` points to in the JIT runtime.
struct RtData<'a> {
    pool: Option<&'a SharedPool>,
    /// Whether worker threads flush subnormals too.
    ftz: bool,
    profile: Option<&'a Mutex<Profile>>,
    /// The profile, when this run records a trace's spans.
    tracing: Option<&'a Mutex<Profile>>,
}

/// Per-kernel wall times, and the spans of a trace while tracing.
#[derive(Default)]
struct Profile {
    started: Vec<Option<Instant>>,
    calls: Vec<u64>,
    total: Vec<Duration>,
    /// Whether spans are recorded ([`CpuExecutable::set_tracing`]).
    tracing: bool,
    /// What span times count from: the first traced run's start.
    origin: Option<Instant>,
    /// The kernel now running (the entry runs one kernel at a time), for worker ranges.
    current: usize,
    spans: Vec<TraceSpan>,
}

impl Profile {
    fn span(&mut self, kernel: usize, start: Instant, end: Instant, range: Option<(i64, i64)>) {
        let origin = *self.origin.get_or_insert(start);
        self.spans.push(TraceSpan {
            kernel,
            thread: thread_number(),
            start: start.saturating_duration_since(origin),
            duration: end.saturating_duration_since(start),
            range,
        });
    }
}

/// A small number naming the calling thread in traces (0 for the first thread that asks).
fn thread_number() -> u32 {
    static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    thread_local! {
        static NUMBER: u32 = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
    NUMBER.with(|n| *n)
}

unsafe extern "C" fn rt_trace(rt: *const AxleRuntime, kernel: i64, phase: i64) {
    // SAFETY: `rt` is the runtime `CpuExecutable::execute` built.
    let data = unsafe { &*((*rt).user as *const RtData) };
    let Some(p) = data.profile else { return };
    let now = Instant::now();
    let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
    let k = kernel as usize;
    if p.calls.len() <= k {
        p.started.resize(k + 1, None);
        p.calls.resize(k + 1, 0);
        p.total.resize(k + 1, Duration::ZERO);
    }
    if phase == 0 {
        p.current = k;
        p.started[k] = Some(now);
    } else if let Some(t) = p.started[k].take() {
        p.calls[k] += 1;
        p.total[k] += now.saturating_duration_since(t);
        if p.tracing {
            p.span(k, t, now, None);
        }
    }
}

/// One span of a trace: a kernel call on the thread that runs the program, or one range of a
/// kernel's items on the thread that ran it.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceSpan {
    /// The kernel number (an index into [`CpuExecutable::kernel_names`]).
    pub kernel: usize,
    /// The thread ([`TraceSpan::range`]s run on the pool's threads).
    pub thread: u32,
    /// When it started, from the first traced run's start.
    pub start: Duration,
    /// How long it took.
    pub duration: Duration,
    /// The items `[s, e)` of a parallel kernel's range; `None` for a whole kernel call.
    pub range: Option<(i64, i64)>,
}

/// Time spent in one kernel over the profiled runs.
#[derive(Clone, Debug, PartialEq)]
pub struct KernelProfile {
    /// `kN.name (opcode)`.
    pub name: String,
    /// What it computes: its kind, the instruction doing the work with its shapes, and the
    /// operations fused with it (`gemm: dot f32[128,768] x f32[768,2304] -> ...; with add`).
    pub detail: String,
    /// Calls (a kernel in a loop body runs once per iteration).
    pub calls: u64,
    /// Total wall time.
    pub total: Duration,
}

/// A kernel's entry point.
pub type KernelFn = unsafe extern "C" fn(*const *mut u8, i64, i64);

/// A program's entry point.
type EntryFn = unsafe extern "C" fn(*const *mut u8, *const *mut u8, *mut u8, *const AxleRuntime);

/// The buffer table of a parallel kernel call, shared by the pool's threads.
struct SendPtr(*const *mut u8);
// SAFETY: the buffer table is only read by the kernels, and outlives the parallel call.
unsafe impl Send for SendPtr {}
// SAFETY: as for `Send`: the table itself is never written while shared; the kernels write
// the buffers it points to in disjoint ranges (`[s, e)` of each call), which is the kernels'
// contract, not this pointer's.
unsafe impl Sync for SendPtr {}

/// Runs the kernel over `[0, n)` split into ranges of at least `grain` items on the shared pool
/// ([`SharedPool::for_ranges`]; the kernel's grain says what splitting pays, see
/// [`crate::parallel_cost`]). Which thread runs which range never changes a result.
unsafe extern "C" fn rt_parallel_for(
    rt: *const AxleRuntime,
    kernel: KernelFn,
    bufs: *const *mut u8,
    n: i64,
    grain: i64,
) {
    // SAFETY: `rt` is the runtime `CpuExecutable::execute` built.
    let data = unsafe { &*((*rt).user as *const RtData) };
    let Some(pool) = data.pool else {
        // SAFETY: the whole range on this thread.
        unsafe { kernel(bufs, 0, n) };
        return;
    };
    let bufs = SendPtr(bufs);
    let ftz = data.ftz;
    let tracing = data.tracing;
    pool.for_ranges(n, grain, |s, e| {
        let b = &bufs;
        let t = tracing.map(|_| Instant::now());
        // SAFETY: the kernel reads the buffer table and writes disjoint output ranges.
        with_float_mode(ftz, || unsafe { kernel(b.0, s, e) });
        if let (Some(p), Some(t)) = (tracing, t) {
            let end = Instant::now();
            let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
            let k = p.current;
            p.span(k, t, end, Some((s, e)));
        }
    });
}

/// Timings of one compilation.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CompileTimings {
    /// Scheduling (when the module came without a schedule) and buffer assignment.
    pub schedule: Duration,
    /// Lowering to thunks on the assigned buffers (the backend's expansions included).
    pub lower: Duration,
    /// LLVM IR emission.
    pub emit: Duration,
    /// LLVM's optimization pipeline.
    pub optimize: Duration,
    /// Machine code generation (JIT) or object emission.
    pub codegen: Duration,
    /// LLVM modules of kernels the program has.
    pub kernel_modules: usize,
    /// Of those, the modules loaded from the kernel cache (no LLVM work).
    pub cached_modules: usize,
}

/// A lowered and optimized program linked into one LLVM module (for ahead-of-time objects
/// and printing).
pub(crate) struct Built<'ctx> {
    pub module: inkwell::module::Module<'ctx>,
    pub prog: Program,
    pub tm: TargetMachine,
}

/// The rewrites the backend needs before lowering (see [`needs_expansion`]).
const BACKEND_EXPANSIONS: &str = "batchnorm-expander,linalg-upcast,tree-reduce,dce";

/// Whether `m` has an instruction that [`BACKEND_EXPANSIONS`] rewrites.
fn needs_expansion(m: &Module) -> bool {
    axle_fusion::batchnorm_expander::has_batch_norm(m)
        || axle_fusion::linalg_upcast::has_narrow_linalg(m)
        || axle_fusion::tree_reduce::has_long_narrow_reduce(m)
}

/// The module the backend lowers and its buffers (see [`plan_buffers`]).
pub(crate) struct BufferPlan<'m> {
    /// `m` after the backend's expansions, scheduled (borrowed when it needed neither).
    pub module: Cow<'m, Module>,
    /// Its buffer assignment under the backend's rules.
    pub assignment: BufferAssignment,
    /// Time spent scheduling and assigning.
    pub schedule: Duration,
}

/// Verifies `m`, applies the backend's expansions and takes its buffers from the schedule
/// crate under `rules`.
pub(crate) fn plan_buffers<'m>(
    m: &'m Module,
    rules: &CpuRules,
) -> Result<BufferPlan<'m>, CodegenError> {
    let mut module = match prepare(m)? {
        Some(expanded) => Cow::Owned(expanded),
        None => Cow::Borrowed(m),
    };
    // A module that arrives with a schedule (a pipeline ending in memory-schedule, or XLA's
    // own) keeps it; any other, and one whose schedule the assignment cannot use (a computation
    // called from two sites, not yet flattened), is scheduled (best of list, dfs and post-order,
    // after flattening) on a copy, dead code removed first: the assignment gives every
    // scheduled value memory, and a value nothing reads needs none (lowering skips it).
    let t = Instant::now();
    let kept = match module.schedule() {
        Some(_) => assign(&module, rules).ok(),
        None => None,
    };
    let assignment = match kept {
        Some(a) => a,
        None => {
            // Plans made for the module as it was (by a failed assignment above) would name
            // instructions dce may renumber.
            rules.plans.clear();
            let copy = module.to_mut();
            // `prepare` verified the module; dce only removes instructions nothing reads.
            axle_fusion::run_in_place(copy, "dce", axle_ir::VerifyMode::Off).map_err(|e| {
                CodegenError::general(&m.name, format!("dead code removal failed: {e}"))
            })?;
            schedule_module(copy, Heuristic::Best)
                .map_err(|e| CodegenError::general(&m.name, format!("scheduling failed: {e}")))?;
            assign(copy, rules).map_err(|e| {
                CodegenError::general(&m.name, format!("buffer assignment failed: {e}"))
            })?
        }
    };
    Ok(BufferPlan {
        module,
        assignment,
        schedule: t.elapsed(),
    })
}

/// The module the cpu backend lowers for `m` under `opts` (after its expansions, scheduled)
/// and the buffer assignment it runs on, with the rules it was made under (for
/// [`axle_schedule::check`], `axle buffers` and tests).
pub fn buffer_assignment(
    m: &Module,
    opts: &CpuOptions,
) -> Result<(Module, BufferAssignment, CpuRules), CodegenError> {
    let rules = CpuRules::new(opts);
    let plan = plan_buffers(m, &rules)?;
    Ok((plan.module.into_owned(), plan.assignment, rules))
}

/// Verifies `m` and rewrites the ops the backend has no kernels for; `None` when `m` is used
/// as it is.
fn prepare(m: &Module) -> Result<Option<Module>, CodegenError> {
    // Everything below relies on the verifier's invariants (shapes agree with attributes).
    axle_ir::verify(m)
        .map_err(|e| CodegenError::general(&m.name, format!("the module does not verify: {e}")))?;
    // What every backend refuses (unbounded dynamic shapes, opaque entry parameters).
    axle_ir::check_runnable(m).map_err(|e| CodegenError::general(&m.name, e.to_string()))?;
    // Ops the backend has no kernels for are rewritten first, as XLA's CPU pipeline does:
    // batch-norm ops into ordinary HLO, f16/bf16/f8 linear algebra into f32 between converts. A
    // module that needs neither is used as it is (no copy).
    if !needs_expansion(m) {
        return Ok(None);
    }
    axle_fusion::run_on_copy(m, BACKEND_EXPANSIONS)
        .map(Some)
        .map_err(|e| {
            CodegenError::general(&m.name, format!("the backend's expansions failed: {e}"))
        })
}

/// One line per kernel `m` lowers to, in program order (see [`crate::kernel_plan`]).
pub(crate) fn kernel_plan(m: &Module) -> Result<Vec<String>, CodegenError> {
    let rules = CpuRules::new(&CpuOptions::default());
    let plan = plan_buffers(m, &rules)?;
    let (m, asg) = (&*plan.module, &plan.assignment);
    let prog = lower(m, asg, &rules.plans).map_err(|f| finish(m, f))?;
    let mut lines = Vec::new();
    crate::lower::visit_kernels(&prog.body, &mut |k| {
        lines.push(crate::fused::describe(m, k.kind, k.origin, k.root, &k.plan));
    });
    Ok(lines)
}

/// Lowers `m` and compiles its kernels and entry point `entry` (exported) in `form`, on
/// rayon threads ([`crate::modules`]); returns the program, the compiled parts and the timings.
fn compile_parts(
    m: &Module,
    opts: &CpuOptions,
    entry: &str,
    form: Form,
    cache: Option<&dyn KernelCache>,
) -> Result<(Program, Compiled, CompileTimings), CodegenError> {
    let mut timings = CompileTimings::default();
    let t = Instant::now();
    let spec = target_spec(opts);
    let mut rules = CpuRules::new(opts);
    // Only a run through `CpuExecutable::execute` hands the code writable donated parameters.
    rules.donated_writable = form == Form::Object;
    let gemm = rules.gemm.clone();
    let plan = plan_buffers(m, &rules)?;
    timings.schedule = plan.schedule;
    let (m, asg) = (&*plan.module, &plan.assignment);
    let mut prog = lower(m, asg, &rules.plans).map_err(|f| finish(m, f))?;
    if rules.donated_writable {
        prog.writable_params = axle_schedule::alias::donations(m)
            .into_iter()
            .map(|(_, k)| k)
            .collect();
    }
    timings.lower = t.elapsed() - timings.schedule;
    let t = Instant::now();
    let setup = Setup {
        m,
        prog: &prog,
        spec: &spec,
        opts,
        gemm: &gemm,
        reloc: RelocMode::PIC,
        cache,
    };
    let compiled = crate::modules::compile(&setup, entry, true, form)?;
    // The phases run interleaved on several threads: their shares of the wall time.
    let wall = t.elapsed();
    let busy = (compiled.emit + compiled.optimize + compiled.codegen).max(Duration::from_nanos(1));
    let share = |d: Duration| wall.mul_f64(d.as_secs_f64() / busy.as_secs_f64());
    timings.emit = share(compiled.emit);
    timings.optimize = share(compiled.optimize);
    timings.codegen = share(compiled.codegen);
    timings.kernel_modules = compiled.kernel_modules;
    timings.cached_modules = compiled.cached_modules;
    Ok((prog, compiled, timings))
}

/// Lowers `m`, compiles it with entry point `entry` and links it into one module of `ctx`.
pub(crate) fn build<'ctx>(
    ctx: &'ctx Context,
    m: &Module,
    opts: &CpuOptions,
    entry: &str,
    reloc: RelocMode,
) -> Result<Built<'ctx>, CodegenError> {
    let (prog, compiled, _) = compile_parts(m, opts, entry, Form::Bitcode, None)?;
    let module = crate::modules::link(ctx, m, &compiled.parts, entry)?;
    let tm = target_machine(&target_spec(opts), reloc, opts.opt_level)
        .map_err(|e| CodegenError::general(&m.name, e))?;
    Ok(Built { module, prog, tm })
}

impl Built<'_> {
    /// The object file of the built module.
    pub(crate) fn object(&self, m: &Module) -> Result<Vec<u8>, CodegenError> {
        Ok(self
            .tm
            .write_to_memory_buffer(&self.module, FileType::Object)
            .map_err(|e| CodegenError::general(&m.name, format!("object emission failed: {e}")))?
            .as_slice()
            .to_vec())
    }
}

/// Memory aligned for any element type (and 512-bit vectors).
///
/// Buffers of at least [`HUGE_BYTES`] are anonymous mappings aligned to 2 MiB and advised
/// for transparent huge pages (where the system has them): their zero pages arrive lazily,
/// 2 MiB per fault, so a fresh result buffer costs a few hundred faults instead of one per
/// 4 KiB page, and nothing is written before the kernels write it. Smaller ones come from the
/// global allocator.
pub(crate) struct AlignedBuf {
    ptr: *mut u8,
    len: usize,
    /// The whole mapping (start and length) when the buffer is mapped.
    map: Option<(*mut u8, usize)>,
}

/// The smallest buffer that gets a mapping of its own.
const HUGE_BYTES: usize = 4 << 20;
/// The size (and alignment) of a transparent huge page.
const HUGE_PAGE: usize = 2 << 20;

// SAFETY: the buffer owns its allocation (no other value refers to it), so moving it to
// another thread moves sole ownership.
unsafe impl Send for AlignedBuf {}
// SAFETY: through `&AlignedBuf` the memory can only be read (`HostBuffer::bytes`); the only
// way to a writable pointer is [`AlignedBuf::ptr_mut`], which takes `&mut self`, so while
// threads share a buffer none of them can write it.
unsafe impl Sync for AlignedBuf {}

impl AlignedBuf {
    /// `len` zeroed bytes (the allocator's refusal aborts, as `Vec` does).
    pub fn zeroed(len: usize) -> AlignedBuf {
        match Self::try_zeroed(len) {
            Some(b) => b,
            None => match std::alloc::Layout::from_size_align(len, 64) {
                Ok(layout) => std::alloc::handle_alloc_error(layout),
                Err(_) => panic!("a buffer of {len} bytes cannot be laid out"),
            },
        }
    }

    /// `len` zeroed bytes, or `None` when the size cannot be laid out or the allocator refuses.
    pub fn try_zeroed(len: usize) -> Option<AlignedBuf> {
        if len == 0 {
            return Some(AlignedBuf {
                ptr: std::ptr::NonNull::<u64>::dangling().as_ptr() as *mut u8,
                len,
                map: None,
            });
        }
        if len >= HUGE_BYTES {
            if let Some(b) = Self::mapped(len) {
                return Some(b);
            }
        }
        let layout = std::alloc::Layout::from_size_align(len, 64).ok()?;
        // SAFETY: non-zero size.
        let ptr = unsafe { std::alloc::alloc_zeroed(layout) };
        if ptr.is_null() {
            return None;
        }
        Some(AlignedBuf {
            ptr,
            len,
            map: None,
        })
    }

    /// A zeroed anonymous mapping of `len` bytes starting on a huge-page boundary, advised
    /// for huge pages; `None` when the system refuses the mapping.
    #[cfg(unix)]
    fn mapped(len: usize) -> Option<AlignedBuf> {
        let size = len.div_ceil(HUGE_PAGE) * HUGE_PAGE + HUGE_PAGE;
        // SAFETY: a fresh private anonymous mapping; nothing else refers to it.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                size,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return None;
        }
        let base = base as *mut u8;
        let ptr = base.wrapping_add((HUGE_PAGE - base as usize % HUGE_PAGE) % HUGE_PAGE);
        // SAFETY: `[ptr, ptr + len)` lies inside the mapping. The advice is only a hint: a
        // system without transparent huge pages keeps 4 KiB pages.
        unsafe { libc::madvise(ptr as *mut libc::c_void, len, libc::MADV_HUGEPAGE) };
        Some(AlignedBuf {
            ptr,
            len,
            map: Some((base, size)),
        })
    }

    #[cfg(not(unix))]
    fn mapped(_len: usize) -> Option<AlignedBuf> {
        None
    }

    /// A pointer to the bytes for writing (by a copy or by compiled code). It takes `&mut
    /// self`, so no shared borrow of the buffer can write through it (what makes
    /// `AlignedBuf: Sync` sound); the pointer stays valid until the buffer is dropped.
    pub fn ptr_mut(&mut self) -> *mut u8 {
        self.ptr
    }
}

impl Drop for AlignedBuf {
    fn drop(&mut self) {
        if let Some((_base, _size)) = self.map {
            // SAFETY: the mapping this buffer made, unmapped once.
            #[cfg(unix)]
            unsafe {
                libc::munmap(_base as *mut libc::c_void, _size)
            };
            return;
        }
        if self.len > 0 {
            let layout = std::alloc::Layout::from_size_align(self.len, 64).expect("buffer layout");
            // SAFETY: allocated with this layout.
            unsafe { std::alloc::dealloc(self.ptr, layout) };
        }
    }
}

/// A JIT-compiled module, ready to run.
pub struct CpuExecutable {
    /// Owns the machine code `entry` points into.
    _code: LoadedObject,
    entry: EntryFn,
    params: Vec<ArrayShape>,
    outputs: Vec<ArrayShape>,
    /// The parameter leaves the code writes: a run hands it writable copies.
    writable_params: Vec<u32>,
    /// `(output leaf, parameter leaf)`: outputs the code leaves in that parameter's memory.
    donated_outputs: Vec<(u32, u32)>,
    temp_bytes: u64,
    /// The temporary block and the scratch arena after it: what a run allocates.
    block_bytes: u64,
    pool: Option<Arc<SharedPool>>,
    temps: Mutex<Vec<AlignedBuf>>,
    kernels: usize,
    flush_denormals: bool,
    kernel_names: Vec<String>,
    kernel_details: Vec<String>,
    profiling: std::sync::atomic::AtomicBool,
    profile: Mutex<Profile>,
    compile_time: Duration,
    timings: CompileTimings,
}

impl std::fmt::Debug for CpuExecutable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CpuExecutable")
            .field("params", &self.params)
            .field("outputs", &self.outputs)
            .field("temp_bytes", &self.temp_bytes)
            .finish_non_exhaustive()
    }
}

pub(crate) fn compile(m: &Module, opts: &CpuOptions) -> Result<CpuExecutable, CodegenError> {
    compile_object(m, opts, None).map(|(exe, _)| exe)
}

/// Compiles `m` to an object file, loads it into the process and returns the executable with
/// the artifact that [`load_artifact`] turns into the same executable in any process.
/// Kernel modules come from `cache` where it has them, and new ones go into it.
pub(crate) fn compile_object(
    m: &Module,
    opts: &CpuOptions,
    cache: Option<&dyn KernelCache>,
) -> Result<(CpuExecutable, Artifact), CodegenError> {
    let t0 = Instant::now();
    let (prog, compiled, timings) = compile_parts(m, opts, "axle_entry", Form::Object, cache)?;
    let t = Instant::now();
    let kernels = count_kernels(&prog.body);
    let block_bytes = prog.block_bytes();
    let artifact = Artifact {
        objects: compiled.parts,
        params: prog.params,
        outputs: prog.outputs,
        temp_bytes: prog.temp_bytes,
        block_bytes,
        kernels,
        kernel_names: compiled.kernel_names,
        kernel_details: compiled.kernel_details,
        writable_params: prog.writable_params,
        donated_outputs: prog.donated_outputs,
    };
    let (code, entry) =
        load_objects(&artifact.objects).map_err(|e| CodegenError::general(&m.name, e))?;
    let mut timings = timings;
    timings.codegen += t.elapsed();
    let exe = CpuExecutable::new(code, entry, artifact.clone_facts(), opts, t0, timings);
    Ok((exe, artifact))
}

/// The executable of an artifact made by [`compile_object`] (here or in another process of the
/// same build): links its object file into the process, with no LLVM optimization or code
/// generation. `opts` gives the runtime settings (threads, subnormal flushing).
pub(crate) fn load_artifact(
    artifact: &Artifact,
    opts: &CpuOptions,
) -> Result<CpuExecutable, CodegenError> {
    let t0 = Instant::now();
    let (code, entry) =
        load_objects(&artifact.objects).map_err(|e| CodegenError::general("cached artifact", e))?;
    let timings = CompileTimings {
        codegen: t0.elapsed(),
        ..Default::default()
    };
    Ok(CpuExecutable::new(
        code,
        entry,
        artifact.clone_facts(),
        opts,
        t0,
        timings,
    ))
}

fn load_objects(objects: &[Vec<u8>]) -> Result<(LoadedObject, EntryFn), String> {
    crate::target_spec::init_llvm();
    let (loaded, addr) = LoadedObject::load(objects, &crate::runtime::symbols(), "axle_entry")?;
    // SAFETY: `axle_entry` was emitted with exactly this signature.
    let entry: EntryFn = unsafe { std::mem::transmute::<usize, EntryFn>(addr) };
    Ok((loaded, entry))
}

impl CpuExecutable {
    /// An executable from its code, entry point and runtime facts.
    fn new(
        code: LoadedObject,
        entry: EntryFn,
        facts: Artifact,
        opts: &CpuOptions,
        t0: Instant,
        timings: CompileTimings,
    ) -> CpuExecutable {
        if std::env::var_os("AXLE_CPU_TIMINGS").is_some() {
            eprintln!("cpu compile timings: {timings:?}, total {:?}", t0.elapsed());
        }
        let threads = thread_count(opts);
        let pool = if threads > 1 {
            SharedPool::get(threads)
        } else {
            None
        };
        CpuExecutable {
            _code: code,
            entry,
            params: facts.params,
            outputs: facts.outputs,
            writable_params: facts.writable_params,
            donated_outputs: facts.donated_outputs,
            temp_bytes: facts.temp_bytes,
            block_bytes: facts.block_bytes,
            pool,
            temps: Mutex::new(Vec::new()),
            kernels: facts.kernels,
            flush_denormals: opts.flush_denormals,
            kernel_names: facts.kernel_names,
            kernel_details: facts.kernel_details,
            profiling: std::sync::atomic::AtomicBool::new(false),
            profile: Mutex::new(Profile::default()),
            compile_time: t0.elapsed(),
            timings,
        }
    }
}

fn count_kernels(thunks: &[crate::lower::Thunk]) -> usize {
    use crate::lower::Thunk;
    thunks
        .iter()
        .map(|t| match t {
            Thunk::Kernel(_) => 1,
            Thunk::Copy { .. } | Thunk::HostCall(_) => 0,
            Thunk::While { cond, body, .. } => count_kernels(cond) + count_kernels(body),
            Thunk::Cond { branches, .. } => branches.iter().map(|(b, _)| count_kernels(b)).sum(),
        })
        .sum()
}

fn shape_bytes(s: &ArrayShape) -> usize {
    s.num_elements().max(0) as usize * s.ty.byte_size()
}

impl CpuExecutable {
    /// The array leaves of the entry parameters, in order.
    pub fn param_shapes(&self) -> &[ArrayShape] {
        &self.params
    }

    /// The array leaves of the result, in order.
    pub fn output_shapes(&self) -> &[ArrayShape] {
        &self.outputs
    }

    /// Bytes of the temporary block a run needs (as XLA's `temp_size_in_bytes` counts them:
    /// without the scratch arena).
    pub fn temp_bytes(&self) -> u64 {
        self.temp_bytes
    }

    /// What the block a run allocates holds, for memory-ceiling errors.
    fn block_what(&self) -> String {
        match self.scratch_bytes() {
            0 => format!("a temporary block of {} bytes", self.temp_bytes),
            s => format!(
                "a temporary block of {} bytes and a scratch arena of {s} bytes",
                self.temp_bytes
            ),
        }
    }

    /// Bytes of the scratch arena a run needs beside the temporary block (GEMM packing and
    /// sort planes, which XLA's runtime allocates inside Eigen and `std::sort`).
    pub fn scratch_bytes(&self) -> u64 {
        self.block_bytes
            .saturating_sub(self.temp_bytes.div_ceil(axle_schedule::ALIGN) * axle_schedule::ALIGN)
    }

    /// The number of kernels.
    pub fn kernels(&self) -> usize {
        self.kernels
    }

    /// Turns per-kernel timing on or off for the following runs.
    pub fn set_profiling(&self, on: bool) {
        self.profiling
            .store(on, std::sync::atomic::Ordering::Relaxed);
    }

    /// Per-kernel times accumulated over the profiled runs, slowest first.
    pub fn profile(&self) -> Vec<KernelProfile> {
        let p = self.profile.lock().unwrap_or_else(|e| e.into_inner());
        let mut v: Vec<KernelProfile> = p
            .calls
            .iter()
            .zip(&p.total)
            .enumerate()
            .filter(|(_, (c, _))| **c > 0)
            .map(|(k, (&calls, &total))| KernelProfile {
                name: self.kernel_names.get(k).cloned().unwrap_or_default(),
                detail: self.kernel_details.get(k).cloned().unwrap_or_default(),
                calls,
                total,
            })
            .collect();
        v.sort_by_key(|k| std::cmp::Reverse(k.total));
        v
    }

    /// Forgets the accumulated profile and trace (tracing stays as it was).
    pub fn reset_profile(&self) {
        let mut p = self.profile.lock().unwrap_or_else(|e| e.into_inner());
        let tracing = p.tracing;
        *p = Profile {
            tracing,
            ..Profile::default()
        };
    }

    /// Turns tracing on or off for the following runs: with profiling on
    /// ([`CpuExecutable::set_profiling`]), every kernel call and every range of a parallel
    /// kernel is recorded as a [`TraceSpan`].
    pub fn set_tracing(&self, on: bool) {
        self.profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .tracing = on;
    }

    /// The spans recorded since tracing was turned on, in the order they ended.
    pub fn trace(&self) -> Vec<TraceSpan> {
        self.profile
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .spans
            .clone()
    }

    /// Per kernel number, its name (`kN.name (opcode)`) and what it computes.
    pub fn kernel_names(&self) -> impl Iterator<Item = (&str, &str)> {
        self.kernel_names.iter().enumerate().map(|(k, n)| {
            (
                n.as_str(),
                self.kernel_details.get(k).map_or("", |d| d.as_str()),
            )
        })
    }

    /// Wall time of the whole compilation.
    pub fn compile_time(&self) -> Duration {
        self.compile_time
    }

    /// Where the compilation time went.
    pub fn timings(&self) -> &CompileTimings {
        &self.timings
    }

    /// The number of threads kernels run on.
    pub fn threads(&self) -> usize {
        self.pool.as_ref().map_or(1, |p| p.threads())
    }

    /// Output buffers of the right sizes (aligned for every element type) for a new result:
    /// recycled from dropped buffers where there are some (see [`HostBuffer::recycled`]), so
    /// their bytes are unspecified until a run writes all of them. An allocation the system
    /// refuses aborts; [`CpuExecutable::try_alloc_outputs`] checks first.
    pub fn alloc_outputs(&self) -> Vec<HostBuffer> {
        self.outputs
            .iter()
            .map(|s| HostBuffer::recycled(shape_bytes(s)))
            .collect()
    }

    /// [`CpuExecutable::alloc_outputs`], checked before allocating: the outputs and the
    /// temporary block a run needs must fit under the memory ceiling
    /// ([`axle_ir::memory::limit`]), and the allocator's refusal is an error, not an abort.
    pub fn try_alloc_outputs(&self) -> Result<Vec<HostBuffer>, CodegenError> {
        let err = |e: axle_ir::memory::MemoryError| {
            CodegenError::general("cpu executable", e.to_string())
        };
        let mut budget = axle_ir::memory::MemoryBudget::new()
            .map_err(|e| CodegenError::general("cpu executable", e))?;
        let outs: u64 = self
            .outputs
            .iter()
            .fold(0u64, |a, s| a.saturating_add(shape_bytes(s) as u64));
        budget
            .reserve(outs.saturating_add(self.block_bytes), || {
                format!("a run ({} output bytes and {})", outs, self.block_what())
            })
            .map_err(err)?;
        self.outputs
            .iter()
            .enumerate()
            .map(|(k, s)| {
                HostBuffer::try_recycled(shape_bytes(s)).ok_or_else(|| {
                    err(budget.refused(shape_bytes(s) as u64, format!("output {k}")))
                })
            })
            .collect()
    }

    /// `(output leaf, parameter leaf)` pairs donated through `input_output_alias` whose output
    /// the code leaves in the parameter's memory: a caller that owns a donated input may hand
    /// it over as that output's buffer ([`CpuExecutable::execute_donated`]) and nothing is
    /// copied.
    pub fn donated_outputs(&self) -> &[(u32, u32)] {
        &self.donated_outputs
    }

    /// Runs the program: `inputs` hold the parameter leaves' row-major bytes, `outputs` receive
    /// the result leaves (buffers from [`CpuExecutable::alloc_outputs`] can be reused across
    /// runs; any byte buffer aligned to its element size will do). Sizes are checked; inputs
    /// that are not aligned to their element size are copied, misaligned outputs refused. A
    /// donated parameter the code writes is copied first (into its aliased output's buffer
    /// where it has one), so `inputs` are never written.
    pub fn execute<O: AsMut<[u8]>>(
        &self,
        inputs: &[&[u8]],
        outputs: &mut [O],
    ) -> Result<(), CodegenError> {
        let mut given: [Option<&[u8]>; 8] = [None; 8];
        let spill: Vec<Option<&[u8]>>;
        let given: &[Option<&[u8]>] = if inputs.len() <= given.len() {
            for (slot, i) in given.iter_mut().zip(inputs) {
                *slot = Some(i);
            }
            &given[..inputs.len()]
        } else {
            spill = inputs.iter().map(|&i| Some(i)).collect();
            &spill
        };
        self.execute_as(None, given, outputs)
    }

    /// [`CpuExecutable::execute`] where input `k` may be `None` when `(j, k)` is one of
    /// [`CpuExecutable::donated_outputs`]: the parameter's bytes are then already in
    /// `outputs[j]` (the caller donated its own memory), the code updates them there and
    /// nothing is copied. A `None` for any other input is an error.
    pub fn execute_donated<O: AsMut<[u8]>>(
        &self,
        inputs: &[Option<&[u8]>],
        outputs: &mut [O],
    ) -> Result<(), CodegenError> {
        self.execute_as(None, inputs, outputs)
    }

    /// [`CpuExecutable::execute`] as device `dev` of a multi-device run: the program's
    /// collectives meet the other devices through `dev.comm` (whose device id must fit
    /// `dev.mesh`). A failure (this device's or another's) is an error, and aborts the run on
    /// the communicator so the other devices stop too. The caller says when the device is done
    /// ([`axle_comm::Communicator::finish`]) after its last run.
    pub fn execute_on_device<O: AsMut<[u8]>>(
        &self,
        dev: axle_analysis::Device<'_>,
        inputs: &[&[u8]],
        outputs: &mut [O],
    ) -> Result<(), CodegenError> {
        let n = dev.mesh.devices();
        let r = if n == 0 || dev.comm.num_devices() != n || dev.comm.device() >= n {
            Err(CodegenError::general(
                "cpu executable",
                format!(
                    "device {} of a run of {} does not fit a mesh of {} replicas x {} partitions",
                    dev.comm.device(),
                    dev.comm.num_devices(),
                    dev.mesh.replicas,
                    dev.mesh.partitions
                ),
            ))
        } else {
            let given: Vec<Option<&[u8]>> = inputs.iter().map(|&i| Some(i)).collect();
            self.execute_as(Some(dev), &given, outputs)
        };
        if let Err(e) = &r {
            dev.comm.abort(&e.message);
        }
        r
    }

    fn execute_as<O: AsMut<[u8]>>(
        &self,
        dev: Option<axle_analysis::Device<'_>>,
        inputs: &[Option<&[u8]>],
        outputs: &mut [O],
    ) -> Result<(), CodegenError> {
        let err = |msg: String| CodegenError::general("cpu executable", msg);
        if inputs.len() != self.params.len() {
            return Err(err(format!(
                "expected {} input arrays, got {}",
                self.params.len(),
                inputs.len()
            )));
        }
        if outputs.len() != self.outputs.len() {
            return Err(err(format!(
                "expected {} output buffers, got {}",
                self.outputs.len(),
                outputs.len()
            )));
        }
        let mut out_ptrs: Vec<*mut u8> = Vec::with_capacity(outputs.len());
        for (k, (o, s)) in outputs.iter_mut().zip(&self.outputs).enumerate() {
            let o = o.as_mut();
            if o.len() != shape_bytes(s) {
                return Err(err(format!(
                    "output buffer {k} has {} bytes, the result needs {}",
                    o.len(),
                    shape_bytes(s)
                )));
            }
            if !o.is_empty() && !(o.as_ptr() as usize).is_multiple_of(s.ty.byte_size().max(1)) {
                return Err(err(format!(
                    "output buffer {k} is not aligned for {} elements",
                    s.ty
                )));
            }
            out_ptrs.push(o.as_mut_ptr());
        }
        let aliased_output = |k: usize| {
            self.donated_outputs
                .iter()
                .find(|&&(_, p)| p as usize == k)
                .map(|&(j, _)| j as usize)
        };
        let mut copies = Vec::new();
        let mut in_ptrs: Vec<*mut u8> = Vec::with_capacity(inputs.len());
        for (k, (i, s)) in inputs.iter().zip(&self.params).enumerate() {
            let need = shape_bytes(s);
            let Some(i) = i else {
                // The parameter's bytes are in its aliased output buffer, whose size was
                // checked; the two shapes hold the same bytes (they share one buffer).
                match aliased_output(k) {
                    Some(j) if shape_bytes(&self.outputs[j]) == need => {
                        in_ptrs.push(out_ptrs[j]);
                        continue;
                    }
                    _ => {
                        return Err(err(format!(
                            "input {k} was not given and is not donated to an output"
                        )))
                    }
                }
            };
            if i.len() != need {
                return Err(err(format!(
                    "input {k} has {} bytes, its shape needs {need}",
                    i.len(),
                )));
            }
            let writable = self.writable_params.contains(&(k as u32));
            if let Some(j) = aliased_output(k).filter(|_| writable) {
                // SAFETY: `out_ptrs[j]` points to the `need` bytes of `outputs[j]` (sizes
                // checked above), a `&mut` buffer `i` cannot overlap.
                unsafe { std::ptr::copy_nonoverlapping(i.as_ptr(), out_ptrs[j], need) };
                in_ptrs.push(out_ptrs[j]);
            } else if writable || !(i.as_ptr() as usize).is_multiple_of(s.ty.byte_size().max(1)) {
                let mut c = AlignedBuf::try_zeroed(i.len()).ok_or_else(|| {
                    err(format!(
                        "input {k} needs a copy and the system refused its {} bytes",
                        i.len()
                    ))
                })?;
                let p = c.ptr_mut();
                // SAFETY: `p` points to `i.len()` fresh bytes owned by `c`, which `i` cannot
                // overlap.
                unsafe { std::ptr::copy_nonoverlapping(i.as_ptr(), p, i.len()) };
                in_ptrs.push(p);
                copies.push(c);
            } else {
                in_ptrs.push(i.as_ptr() as *mut u8);
            }
        }
        let pooled = {
            let mut pool = self.temps.lock().unwrap_or_else(|e| e.into_inner());
            pool.pop()
        };
        let mut temp = match pooled {
            Some(t) => t,
            None => {
                // The run holds its inputs and outputs already; the temporary block must fit
                // beside them under the memory ceiling, and is allocated fallibly.
                let mut budget =
                    axle_ir::memory::MemoryBudget::new().map_err(|e| err(e.to_string()))?;
                // Output sizes were checked against their shapes above.
                let held: usize = inputs.iter().flatten().map(|i| i.len()).sum::<usize>()
                    + self.outputs.iter().map(shape_bytes).sum::<usize>();
                budget.force(held as u64);
                budget
                    .reserve(self.block_bytes, || self.block_what())
                    .map_err(|e| err(e.to_string()))?;
                usize::try_from(self.block_bytes)
                    .ok()
                    .and_then(AlignedBuf::try_zeroed)
                    .ok_or_else(|| {
                        err(budget
                            .refused(self.block_bytes, self.block_what())
                            .to_string())
                    })?
            }
        };
        let profiling = self.profiling.load(std::sync::atomic::Ordering::Relaxed);
        let tracing = profiling
            && self
                .profile
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .tracing;
        let data = RtData {
            pool: self.pool.as_deref(),
            ftz: self.flush_denormals,
            profile: profiling.then_some(&self.profile),
            tracing: tracing.then_some(&self.profile),
        };
        let rt = (data.pool.is_some() || profiling).then(|| AxleRuntime {
            parallel_for: rt_parallel_for,
            user: &data as *const RtData as *const std::ffi::c_void,
            trace: profiling.then_some(rt_trace as unsafe extern "C" fn(_, _, _)),
        });
        let rt_ptr = rt
            .as_ref()
            .map_or(std::ptr::null(), |r| r as *const AxleRuntime);
        // SAFETY: the pointers cover buffers of exactly the sizes the program was compiled
        // for, outputs are distinct allocations, every parameter the code writes is memory of
        // ours (a copy or an output buffer), and the runtime outlives the call.
        let ((), failure) = crate::runtime::collective::run_as(dev, self.flush_denormals, || {
            with_float_mode(self.flush_denormals, || unsafe {
                (self.entry)(in_ptrs.as_ptr(), out_ptrs.as_ptr(), temp.ptr_mut(), rt_ptr)
            })
        });
        drop(copies);
        self.temps
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(temp);
        match failure {
            None => Ok(()),
            Some(msg) => Err(err(msg)),
        }
    }
}

impl CpuExecutable {
    /// Runs the program on host literals (one per entry parameter) and returns the result's
    /// array leaves, depth-first.
    pub fn run_literals(
        &self,
        args: &[axle_ir::Literal],
    ) -> Result<Vec<axle_ir::ArrayLiteral>, CodegenError> {
        fn flat<'l>(l: &'l axle_ir::Literal, out: &mut Vec<&'l axle_ir::ArrayLiteral>) {
            match l {
                axle_ir::Literal::Array(a) => out.push(a),
                axle_ir::Literal::Tuple(es) => es.iter().for_each(|e| flat(e, out)),
            }
        }
        let mut leaves = Vec::new();
        for a in args {
            flat(a, &mut leaves);
        }
        for (k, (l, s)) in leaves.iter().zip(&self.params).enumerate() {
            if l.shape.ty != s.ty || l.shape.dims != s.dims {
                return Err(CodegenError::general(
                    "cpu executable",
                    format!(
                        "input {k} is {}{:?}, the parameter needs {}{:?}",
                        l.shape.ty, l.shape.dims, s.ty, s.dims
                    ),
                ));
            }
        }
        let inputs: Vec<&[u8]> = leaves.iter().map(|l| &l.data[..]).collect();
        let mut outs = self.try_alloc_outputs()?;
        self.execute(&inputs, &mut outs)?;
        Ok(outs
            .iter()
            .zip(&self.outputs)
            .map(|(o, s)| axle_ir::ArrayLiteral {
                shape: s.clone(),
                data: o.bytes().to_vec(),
            })
            .collect())
    }
}

/// Host memory for the CPU backend's values: 64-byte aligned bytes.
///
/// Dropping a buffer of at least [`RECYCLE_MIN_BYTES`] hands its memory to a process-wide
/// pool (up to [`RECYCLE_MAX_BYTES`] in all), from which [`HostBuffer::recycled`] takes memory
/// of the same size: a new result then lands in pages that are already mapped instead of
/// paying a page fault per 4 KiB, which is what made fresh outputs slow. Memory is only reused
/// after its buffer was dropped, so no two live buffers ever share it.
pub struct HostBuffer(AlignedBuf);

/// Buffers smaller than this are not pooled (the allocator serves them without page faults).
pub const RECYCLE_MIN_BYTES: usize = 64 << 10;
/// The most memory the pool of dropped buffers keeps.
pub const RECYCLE_MAX_BYTES: usize = 1 << 30;

/// Dropped buffers by size, and their total bytes.
type Recycled = Mutex<(std::collections::HashMap<usize, Vec<AlignedBuf>>, usize)>;

fn recycled_pool() -> &'static Recycled {
    static POOL: OnceLock<Recycled> = OnceLock::new();
    POOL.get_or_init(|| Mutex::new((std::collections::HashMap::new(), 0)))
}

impl HostBuffer {
    /// `len` zero bytes (the allocator's refusal aborts, as `Vec` does).
    pub fn zeroed(len: usize) -> HostBuffer {
        HostBuffer(AlignedBuf::zeroed(len))
    }

    /// `len` zero bytes, or `None` when the system refuses the allocation.
    pub fn try_zeroed(len: usize) -> Option<HostBuffer> {
        AlignedBuf::try_zeroed(len).map(HostBuffer)
    }

    /// A copy of `bytes` (in recycled memory where there is some), or `None` when the system
    /// refuses the allocation.
    pub fn try_from_bytes(bytes: &[u8]) -> Option<HostBuffer> {
        let mut b = HostBuffer::try_recycled(bytes.len())?;
        b.bytes_mut().copy_from_slice(bytes);
        Some(b)
    }

    /// `len` bytes for a value that will overwrite all of them: the memory of a dropped buffer
    /// of that size when the pool has one (its old bytes), else zeroed memory (the allocator's
    /// refusal aborts; [`HostBuffer::try_recycled`] returns `None` instead).
    pub fn recycled(len: usize) -> HostBuffer {
        Self::try_recycled(len).unwrap_or_else(|| HostBuffer::zeroed(len))
    }

    /// [`HostBuffer::recycled`], or `None` when the pool has no buffer of that size and the
    /// system refuses the allocation.
    pub fn try_recycled(len: usize) -> Option<HostBuffer> {
        if len >= RECYCLE_MIN_BYTES {
            let mut pool = recycled_pool().lock().unwrap_or_else(|e| e.into_inner());
            let (free, bytes) = &mut *pool;
            if let Some(b) = free.get_mut(&len).and_then(|v| v.pop()) {
                *bytes -= len;
                return Some(HostBuffer(b));
            }
        }
        HostBuffer::try_zeroed(len)
    }

    /// A copy of `bytes`.
    pub fn from_bytes(bytes: &[u8]) -> HostBuffer {
        let mut b = HostBuffer::recycled(bytes.len());
        b.bytes_mut().copy_from_slice(bytes);
        b
    }

    /// The bytes.
    pub fn bytes(&self) -> &[u8] {
        if self.0.len == 0 {
            return &[];
        }
        // SAFETY: an initialized allocation of `len` bytes owned by `self`.
        unsafe { std::slice::from_raw_parts(self.0.ptr, self.0.len) }
    }

    /// The bytes, writable.
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        if self.0.len == 0 {
            return &mut [];
        }
        // SAFETY: an initialized allocation of `len` bytes owned (and here borrowed mutably) by
        // `self`.
        unsafe { std::slice::from_raw_parts_mut(self.0.ptr, self.0.len) }
    }

    /// The number of bytes.
    pub fn len(&self) -> usize {
        self.0.len
    }

    /// Whether the buffer is empty.
    pub fn is_empty(&self) -> bool {
        self.0.len == 0
    }
}

impl AsMut<[u8]> for HostBuffer {
    fn as_mut(&mut self) -> &mut [u8] {
        self.bytes_mut()
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        let len = self.0.len;
        if len < RECYCLE_MIN_BYTES {
            return;
        }
        let mut pool = recycled_pool().lock().unwrap_or_else(|e| e.into_inner());
        let (free, bytes) = &mut *pool;
        if *bytes + len <= RECYCLE_MAX_BYTES {
            *bytes += len;
            let b = std::mem::replace(&mut self.0, AlignedBuf::zeroed(0));
            free.entry(len).or_default().push(b);
        }
    }
}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostBuffer({} bytes)", self.0.len)
    }
}
