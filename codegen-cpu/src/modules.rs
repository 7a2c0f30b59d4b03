//! The LLVM modules of a program: its distinct kernels split into groups, each group emitted,
//! verified, optimized and code-generated as an LLVM module of its own in its own LLVM context
//! on a rayon thread; then the entry point's code the same way: its top-level chunks of
//! [`PART`] thunks, [`ENTRY_CHUNKS`] to a module, and the entry point calling them, last.
//!
//! Pipelines by weight: kernel groups get the options' `default<ON>` and code generator level,
//! except GEMMs and tiled convolutions ([`VECTOR_PIPELINE`]: their loops are vector code as
//! emitted; with the full code generator) and elementwise loop kernels that are not light (the
//! same pipeline: their loops need only the loop vectorizer), groups of light kernels (small elementwise, reduction and row kernels outside loops,
//! [`class`]), which get scalar clean-ups and the fast instruction selector, and of gathers of
//! hundreds of buffers, which get what entry code gets: entry code only binds buffers and
//! calls kernels, so `default<O0>` and the fast selector. A light
//! kernel's float sums run in sequence where `default<O3>` would vectorize them (the emitters
//! allow reassociation of reduction steps only), which can change their last bits; whether a
//! kernel is light depends only on the kernel, so outputs are still the same at any thread
//! count.
//!
//! Invariants:
//! - The partition depends only on the program (kernel order and sizes), never on the thread
//!   count or the rayon pool, and every group is compiled alone, so the object files (and the
//!   outputs of the code) are the same at any thread count.
//! - Kernel numbers and the sharing of one function by structurally identical kernels
//!   ([`crate::signature`]) are the same as in one module: a kernel's function is defined in
//!   the group of its first use and external; the entry module declares each function it
//!   calls. In objects for the JIT it is named by its signature alone
//!   ([`crate::kernel_cache`]); in bitcode (printed IR, ahead-of-time objects) `kN.name`, `N`
//!   the number of its first use, for readers. Constants a kernel reads are private globals
//!   of the kernel's module (a constant read by kernels of two groups is in both).
//! - A group's object is the same in every program that has the group's kernels, so it is
//!   looked up in the kernel cache (when there is one, for JIT objects) before it is compiled;
//!   heavy kernels (GEMMs, tiled convolutions) are groups of their own, and boundaries between
//!   other kernels are partly content-defined ([`CUT_WEIGHT`]), so groups recur.
//! - Each LLVM context, builder and module is created, used and dropped on one thread (LLVM
//!   allows one context per thread; nothing here is shared between contexts but bytes).
//! - Ahead-of-time objects and the printed IR link every module into one (the kernels made
//!   internal again), so they export only the entry point, as before the split.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use axle_ir::Module;
use inkwell::context::Context;
use inkwell::memory_buffer::MemoryBuffer;
use inkwell::module::Linkage;
use inkwell::passes::PassBuilderOptions;
use inkwell::targets::{FileType, RelocMode, TargetMachine};
use rayon::prelude::*;

use crate::buf::BufId;
use crate::cg::Cg;
use crate::cpu_target::CpuTarget;
use crate::emit::{
    build_entry, build_top_parts, kernel_detail, kernel_label, kernel_symbol, EntryKernel, PART,
};
use crate::error::{finish, CodegenError, R};
use crate::kernel_cache::{self, content_symbol, KernelCache};
use crate::kernels::{attribute, emit_kernel};
use crate::lower::{visit_kernels, visit_thunks, BufKind, Kernel, Program, Thunk};
use crate::signature::kernel_signature;
use crate::target_spec::{target_machine, TargetSpec};
use crate::CpuOptions;

/// The weight (bytes of kernel signature, a measure of the code a kernel becomes) at which a
/// group of kernels is closed. Small enough that a 10k-instruction graph makes a few dozen
/// modules for the threads to share, large enough that the per-module cost (a context, a
/// target machine, a pass manager, an object file to link) stays small beside the kernels'.
const GROUP_WEIGHT: usize = 48 * 1024;

/// The most kernels in one group.
const GROUP_KERNELS: usize = 256;

/// The weight a register-tiled kernel (a GEMM or a tiled convolution) adds to its signature's:
/// its code is a few unrolled tile loops that LLVM spends some 100 ms on, where its signature
/// is a few hundred bytes, so without it a program's GEMMs share one module and compile on one
/// thread. At a whole group, each is a module of its own: the threads share them out, and the
/// kernel cache keeps each apart, for any program that has it.
const HEAVY_WEIGHT: usize = GROUP_WEIGHT;

/// The weight from which a group also closes after a kernel whose signature's hash is
/// [`CUT_MASK`]-aligned (content-defined boundaries, as backup tools chunk files): a
/// kernel inserted early in a program moves the boundaries of a weight-only partition all
/// down the program, while these come back to the same kernels a group or two later, so the
/// following modules are the same and come from the kernel cache.
const CUT_WEIGHT: usize = GROUP_WEIGHT / 4;

/// A kernel whose signature's hash has these low bits clear closes a group past
/// [`CUT_WEIGHT`].
const CUT_MASK: u64 = 3;

/// [`HEAVY_WEIGHT`] for GEMM and convolution kernels, 0 for others and for a dot on the
/// runtime's precompiled GEMM without an epilogue (its kernel is a call). A dot on it with an
/// epilogue (the call, then an elementwise loop over each panel) keeps a module of its own, so
/// a training step's several such kernels compile on every thread, beside its other kernels,
/// rather than in one module on one thread.
fn heavy_weight(k: &Kernel, library: bool) -> usize {
    use crate::lower::KernelKind::*;
    let epilogue = matches!(k.plan, crate::fused::KernelPlan::Epilogue(_));
    match k.kind {
        Gemm | Conv if library && !epilogue => 0,
        Gemm | Conv => HEAVY_WEIGHT,
        _ => 0,
    }
}

/// Whether kernel `k` runs its dot on the runtime's precompiled GEMM
/// ([`crate::gemm::GemmGeo::for_library`]) or its convolution on the precompiled convolution
/// ([`crate::conv_fast::ConvFast::for_target`]).
fn on_library(m: &Module, gemm: &crate::gemm::GemmTarget, k: &Kernel) -> bool {
    if k.kind == crate::lower::KernelKind::Conv {
        let core = k.plan.core(k.root);
        return m.opcode(core) == axle_ir::Opcode::Convolution
            && crate::conv_fast::conv_fast(m, core)
                .is_some_and(|g| g.for_target(gemm).library.is_some());
    }
    crate::lower::gemm_core(m, k.kind, &k.plan, k.root)
        .and_then(|core| crate::gemm::gemm_geo(m, core, gemm))
        .is_some_and(|g| g.for_library(gemm).library.is_some())
}

/// Top-level chunks of the entry point (each [`PART`] thunks) in one module.
const ENTRY_CHUNKS: usize = 64;

/// The stack each module is compiled on. LLVM's passes and the emitters recurse over deep IR
/// (a concatenation of thousands of operands is a chain of thousands of blocks), more deeply
/// than a rayon thread's 2 MiB allow; untouched pages of the segment cost no memory.
const MODULE_STACK: usize = 64 * 1024 * 1024;

/// Runs `f` on a stack segment of [`MODULE_STACK`] bytes.
fn on_big_stack<T>(f: impl FnOnce() -> T) -> T {
    stacker::grow(MODULE_STACK, f)
}

/// The distinct kernels of a program and what each kernel number calls.
struct Kernels<'p> {
    /// Distinct kernels in order of first use, with their function names, weights and shared
    /// outputs.
    unique: Vec<(&'p Kernel, String, usize, Shared)>,
    /// Per distinct kernel, its signature (shared outputs included) and the signature's hash
    /// ([`kernel_cache::sig_hash`]).
    sigs: Vec<(String, u64)>,
    /// Per distinct kernel, its pipeline class ([`class`]).
    class: Vec<Class>,
    /// Per kernel number: the distinct kernel it runs and its description.
    uses: Vec<(usize, String)>,
    /// Per kernel number: what it computes ([`kernel_detail`]).
    details: Vec<String>,
    /// The most buffers any kernel or host call binds.
    max_bufs: usize,
}

/// The kernels of `prog` in kernel number order (a loop's condition, then its body; branches
/// in order), sharing one function per signature, named for `form`.
fn collect<'p>(
    m: &Module,
    prog: &'p Program,
    form: Form,
    gemm: &crate::gemm::GemmTarget,
) -> Kernels<'p> {
    let mut ks = Kernels {
        unique: Vec::new(),
        sigs: Vec::new(),
        class: Vec::new(),
        uses: Vec::new(),
        details: Vec::new(),
        max_bufs: 1,
    };
    let mut seen: HashMap<String, usize> = HashMap::new();
    visit_thunks(&prog.body, false, &mut |t, in_loop| match t {
        Thunk::Kernel(k) => {
            ks.max_bufs = ks.max_bufs.max(k.bound().count());
            let number = ks.uses.len();
            let shared = shared_outputs(prog, k);
            let sig = format!("{} shared={shared:?}", kernel_signature(m, k));
            let library = on_library(m, gemm, k);
            let weight = sig.len() + heavy_weight(k, library);
            let u = *seen.entry(sig).or_insert_with_key(|sig| {
                let hash = kernel_cache::sig_hash(sig);
                let name = match form {
                    Form::Object => content_symbol(hash, k),
                    Form::Bitcode => kernel_symbol(m, k, number),
                };
                ks.unique.push((k, name, weight, shared));
                ks.sigs.push((sig.clone(), hash));
                ks.class.push(class(prog, k, library));
                ks.unique.len() - 1
            });
            // A kernel run by a loop runs many times: a light or bare one gets the full pipeline.
            if in_loop && matches!(ks.class[u], Class::Light | Class::Bare) {
                ks.class[u] = Class::Full;
            }
            ks.uses.push((u, kernel_label(m, k, number)));
            ks.details.push(kernel_detail(m, k));
        }
        Thunk::HostCall(h) => ks.max_bufs = ks.max_bufs.max(h.buffers().len()),
        _ => {}
    });
    ks
}

/// A kernel's outputs in its inputs' memory ([`shared_outputs`]).
type Shared = Vec<(usize, usize)>;

/// The outputs of kernel `k` that start where the buffer of one of its bindings does (the
/// buffer assignment gave an elementwise result its operand's memory): pairs of the output's
/// index and the binding's pointer slot (counted over the bindings' buffers, in order). The
/// kernel then writes through the binding's pointer, so LLVM sees one pointer where there is
/// one buffer: an elementwise loop reading and writing the same element vectorizes, where two
/// pointers it cannot tell apart made it check at run time that they do not overlap and,
/// since they do, run its scalar copy (an in-place `exp` took 7.5 times as long).
fn shared_outputs(prog: &Program, k: &Kernel) -> Shared {
    // Where a buffer starts: its memory and the offset in it (constants are never written).
    let at = |b: BufId| -> Option<(u8, u32, u64)> {
        let off = prog.offsets[b];
        match prog.bufs[b].kind {
            BufKind::Param(k) => Some((0, k, 0)),
            BufKind::Output(k) => Some((1, k, off)),
            BufKind::Temp => Some((2, 0, off)),
            BufKind::Arena => Some((3, 0, off)),
            BufKind::Const(..) => None,
        }
    };
    let inputs: Vec<_> = k
        .bindings
        .iter()
        .flat_map(|(_, bs)| bs.iter())
        .map(|&b| at(b))
        .collect();
    k.outputs
        .iter()
        .enumerate()
        .filter_map(|(i, &o)| {
            let o = at(o)?;
            inputs.iter().position(|&b| b == Some(o)).map(|j| (i, j))
        })
        .collect()
}

/// The most bytes a light kernel reads and writes.
const LIGHT_BYTES: u64 = 4 * 1024;

/// The pass pipeline of light kernels' modules: scalar clean-ups only (no loop passes, no
/// vectorizers), followed by the fast instruction selector. On `large_wide_10k` (500 small
/// fused chains) this takes a tenth of the CPU time of `default<O3>` with the full code
/// generator.
const LIGHT_PIPELINE: &str = "function(sroa,early-cse,instcombine<no-verify-fixpoint>,simplifycfg)";

/// The pass pipeline of GEMM, tiled convolution and elementwise loop kernels' modules, with the
/// options' code generator level. The GEMMs' and convolutions' tiles, packing and register
/// epilogues are emitted as vector code with the unrolling they need (a convolution's tiles
/// inside the input without padding checks), and an elementwise loop is one flat loop over its
/// elements that the loop vectorizer vectorizes and interleaves, so `default<O3>`'s unrollers,
/// unswitching and SLP vectorizer find little to do and cost most of its time: scalar
/// clean-ups, loop-invariant code motion and value numbering (address arithmetic), then the
/// loop vectorizer for the elementwise loops and block epilogues (codegen-cpu/BENCH.md has
/// the figures).
const VECTOR_PIPELINE: &str = "function(sroa,early-cse<memssa>,simplifycfg,\
     instcombine<no-verify-fixpoint>,loop-mssa(licm),gvn,loop-vectorize,\
     instcombine<no-verify-fixpoint>,simplifycfg)";

/// The pass pipeline of the entry point's modules: straight-line calls that run once per
/// kernel call, so LLVM's cheapest pipeline and instruction selector (on a 100k-instruction
/// `deep_dag`, whose 5,653 kernel calls share 19 functions, the entry point took two thirds of
/// the compile time at `default<O3>`).
const ENTRY_PIPELINE: &str = "default<O0>";

/// Bound buffers from which a kernel is a gather: the concatenation closing a wide graph, a
/// copy that vectorization barely speeds up, while LLVM's passes are superlinear in its
/// thousands of blocks (40 s at `default<O3>` for the 4,413 operands of `large_wide_100k`,
/// a minute of scalar clean-ups for the 13,108 of `large_wide_300k`).
const GATHER_BINDINGS: usize = 256;

/// How much optimization a kernel's code gets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    /// The options' `default<ON>` pipeline and code generator level.
    Full,
    /// [`VECTOR_PIPELINE`] and the options' code generator level (GEMMs and tiled
    /// convolutions).
    Gemm,
    /// [`VECTOR_PIPELINE`] and the options' code generator level (elementwise loop kernels that
    /// are not light), in groups of their own so GEMMs stay alone in theirs.
    Loop,
    /// [`LIGHT_PIPELINE`] and the fast instruction selector.
    Light,
    /// [`ENTRY_PIPELINE`] and the fast instruction selector.
    Bare,
}

/// Kernel `k`'s class (before [`collect`] makes light and bare kernels run by a loop full): a
/// dot on the precompiled GEMM (`library`) is light, full with an epilogue; a generated
/// GEMM or tiled convolution gets the GEMM class; an elementwise, reduction or row kernel binding at least
/// [`GATHER_BINDINGS`] buffers is bare, one that reads and writes at most [`LIGHT_BYTES`] light
/// (its run time barely depends on vectorization and careful instruction selection), any other
/// elementwise loop kernel the loop class, any other full.
fn class(prog: &Program, k: &Kernel, library: bool) -> Class {
    use crate::lower::KernelKind::*;
    if library {
        // A call of the precompiled GEMM or convolution, then perhaps an elementwise epilogue
        // over its block.
        return match k.plan {
            // A convolution's epilogue is an elementwise loop over each item's block: the
            // loop vectorizer is all it needs.
            crate::fused::KernelPlan::Epilogue(_) if k.kind == Conv => Class::Loop,
            crate::fused::KernelPlan::Epilogue(_) => Class::Full,
            _ => Class::Light,
        };
    }
    if matches!(k.kind, Gemm | Conv) {
        return Class::Gemm;
    }
    if !matches!(k.kind, Loop | Reduce | Row) {
        return Class::Full;
    }
    let bound = || k.bindings.iter().flat_map(|(_, b)| b);
    if bound().count() >= GATHER_BINDINGS {
        return Class::Bare;
    }
    // Saturating: each buffer's size fits in i64, a hostile module's sum of them need not.
    let bytes: u64 = k
        .outputs
        .iter()
        .chain(bound())
        .fold(0u64, |a, &b| a.saturating_add(prog.bufs[b].bytes));
    if bytes <= LIGHT_BYTES {
        Class::Light
    } else if matches!(k.kind, Loop) {
        Class::Loop
    } else {
        Class::Full
    }
}

/// A group of distinct kernels compiled as one module, all of one class.
struct Group {
    kernels: Vec<usize>,
    class: Class,
}

/// Groups of distinct kernels, one class to a group, each in order of first use and closed
/// at [`GROUP_WEIGHT`] or [`GROUP_KERNELS`], or past [`CUT_WEIGHT`] after a kernel whose
/// signature hash says so ([`CUT_MASK`]); groups are ordered by their first kernel.
fn partition(ks: &Kernels) -> Vec<Group> {
    const CLASSES: [Class; 5] = [
        Class::Full,
        Class::Gemm,
        Class::Loop,
        Class::Light,
        Class::Bare,
    ];
    let mut done = Vec::new();
    // The open group of each class and its weight.
    let mut open: [(Vec<usize>, usize); 5] = Default::default();
    for (i, (_, _, w, _)) in ks.unique.iter().enumerate() {
        let class = ks.class[i];
        let (g, weight) = &mut open[class as usize];
        g.push(i);
        *weight += w;
        if *weight >= GROUP_WEIGHT
            || g.len() >= GROUP_KERNELS
            || (*weight >= CUT_WEIGHT && ks.sigs[i].1 & CUT_MASK == 0)
        {
            done.push(Group {
                kernels: std::mem::take(g),
                class,
            });
            *weight = 0;
        }
    }
    for (class, (g, _)) in CLASSES.into_iter().zip(open) {
        if !g.is_empty() {
            done.push(Group { kernels: g, class });
        }
    }
    done.sort_by_key(|g| g.kernels[0]);
    done
}

/// What a compiled module is handed back as.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    /// A relocatable object file.
    Object,
    /// Optimized LLVM bitcode, to be linked into one module.
    Bitcode,
}

/// The code of a program: one compiled module per group of kernels, then the entry module's.
pub(crate) struct Compiled {
    /// Objects or bitcode ([`Form`]), the entry module's last.
    pub parts: Vec<Vec<u8>>,
    /// Per kernel number, its description.
    pub kernel_names: Vec<String>,
    /// Per kernel number, what it computes.
    pub kernel_details: Vec<String>,
    /// Modules of kernels, and how many of them came from the kernel cache.
    pub kernel_modules: usize,
    pub cached_modules: usize,
    /// Time spent emitting, optimizing and generating code, summed over threads.
    pub emit: Duration,
    pub optimize: Duration,
    pub codegen: Duration,
}

/// What every module of one compilation is made with.
pub(crate) struct Setup<'a> {
    pub m: &'a Module,
    pub prog: &'a Program,
    pub spec: &'a TargetSpec,
    pub opts: &'a CpuOptions,
    pub gemm: &'a crate::gemm::GemmTarget,
    pub reloc: RelocMode,
    /// Where kernel modules compiled before are found and new ones kept (JIT objects only).
    pub cache: Option<&'a dyn KernelCache>,
}

/// A module's result: its bytes and the phase times.
struct Part {
    bytes: Vec<u8>,
    /// Items and grain of each kernel the module defines.
    facts: Vec<(i64, i64)>,
    times: [Duration; 3],
    /// Whether it came from the kernel cache.
    cached: bool,
}

/// Compiles the program's kernels and its entry point `entry` (exported when `export`).
pub(crate) fn compile(
    s: &Setup,
    entry: &str,
    export: bool,
    form: Form,
) -> Result<Compiled, CodegenError> {
    let ks = collect(s.m, s.prog, form, s.gemm);
    let groups = partition(&ks);
    let parts: Vec<Part> = groups
        .par_iter()
        .map(|g| on_big_stack(|| compile_group(s, &ks, g, form)))
        .collect::<Result<_, _>>()?;
    let cached = parts.iter().filter(|p| p.cached).count();
    if std::env::var_os("AXLE_CPU_TIMINGS").is_some() {
        let count = |c: Class| groups.iter().filter(|g| g.class == c).count();
        let (gemm, light, bare) = (count(Class::Gemm), count(Class::Light), count(Class::Bare));
        let loops = count(Class::Loop);
        eprintln!(
            "cpu modules: {} kernels, {} distinct, {} kernel modules ({gemm} gemm, {loops} \
             loop, {light} light, {bare} bare, {cached} from the kernel cache)",
            ks.uses.len(),
            ks.unique.len(),
            groups.len()
        );
    }
    if std::env::var_os("AXLE_CPU_TIMINGS").is_some() {
        print_slowest_modules(&ks, &groups, &parts);
    }
    let mut facts = vec![(0, 0); ks.unique.len()];
    for (g, p) in groups.iter().zip(&parts) {
        for (&u, &f) in g.kernels.iter().zip(&p.facts) {
            facts[u] = f;
        }
    }
    let kernels: Vec<EntryKernel> = ks
        .uses
        .iter()
        .map(|&(u, _)| EntryKernel {
            symbol: ks.unique[u].1.clone(),
            items: facts[u].0,
            grain: facts[u].1,
        })
        .collect();
    // The entry point's top-level chunks, [`ENTRY_CHUNKS`] to a module, and the root.
    let body = &s.prog.body;
    let chunks = if body.len() > PART {
        body.len().div_ceil(PART)
    } else {
        0
    };
    let mut first = Vec::with_capacity(chunks);
    let mut n = 0;
    for c in 0..chunks {
        first.push(n);
        let end = (c * PART + PART).min(body.len());
        visit_kernels(&body[c * PART..end], &mut |_| n += 1);
    }
    let jobs: Vec<Option<std::ops::Range<usize>>> = (0..chunks)
        .step_by(ENTRY_CHUNKS)
        .map(|c| Some(c..(c + ENTRY_CHUNKS).min(chunks)))
        .chain([None])
        .collect();
    let entry_parts: Vec<Part> = jobs
        .par_iter()
        .map(|job| {
            on_big_stack(|| match job {
                Some(r) => compile_top_parts(s, &ks, &kernels, r.clone(), first[r.start], form),
                None => compile_entry(s, &ks, &kernels, entry, export, form),
            })
        })
        .collect::<Result<_, _>>()?;
    let mut out = Compiled {
        parts: Vec::with_capacity(parts.len() + 1),
        kernel_modules: parts.len(),
        cached_modules: cached,
        kernel_names: ks.uses.iter().map(|(_, l)| l.clone()).collect(),
        kernel_details: ks.details,
        emit: Duration::ZERO,
        optimize: Duration::ZERO,
        codegen: Duration::ZERO,
    };
    for p in parts.into_iter().chain(entry_parts) {
        out.emit += p.times[0];
        out.optimize += p.times[1];
        out.codegen += p.times[2];
        out.parts.push(p.bytes);
    }
    Ok(out)
}

/// Prints the kernel modules that took LLVM longest (optimization plus code generation), with
/// their class and first kernels' names, for `AXLE_CPU_TIMINGS`.
fn print_slowest_modules(ks: &Kernels, groups: &[Group], parts: &[Part]) {
    const SHOWN: usize = 12;
    let mut order: Vec<usize> = (0..parts.len()).collect();
    order.sort_by_key(|&i| std::cmp::Reverse(parts[i].times[1] + parts[i].times[2]));
    for &i in order.iter().take(SHOWN) {
        let (g, t) = (&groups[i], parts[i].times);
        let names: Vec<&str> = g
            .kernels
            .iter()
            .take(3)
            .map(|&u| match ks.uses.iter().find(|(x, _)| *x == u) {
                Some((_, label)) => label.as_str(),
                None => ks.unique[u].1.as_str(),
            })
            .collect();
        let more = g.kernels.len().saturating_sub(names.len());
        eprintln!(
            "cpu module {i}: {:?}, {} kernels, emit {:.1} ms, optimize {:.1} ms, codegen {:.1} ms: \
             {}{}",
            g.class,
            g.kernels.len(),
            t[0].as_secs_f64() * 1e3,
            t[1].as_secs_f64() * 1e3,
            t[2].as_secs_f64() * 1e3,
            names.join(", "),
            if more > 0 { format!(" and {more} more") } else { String::new() },
        );
    }
}

/// A code generator for a new module in `ctx`, for the setup's target.
fn new_cg<'ctx>(ctx: &'ctx Context, s: &Setup, name: &str, tm: &TargetMachine) -> Cg<'ctx> {
    let target = CpuTarget {
        cpu: s.spec.cpu.clone(),
        features: s.spec.features.clone(),
    };
    let mut cg = Cg::new(ctx, name, Box::new(target));
    cg.libm_math = s.opts.libm_math;
    cg.ftz = s.opts.flush_denormals;
    cg.module.set_triple(&s.spec.triple);
    cg.module
        .set_data_layout(&tm.get_target_data().get_data_layout());
    cg
}

fn general(m: &Module, msg: String) -> CodegenError {
    CodegenError::general(&m.name, msg)
}

/// Emits, verifies, optimizes and hands back the kernels of group `g` as one module.
fn compile_group(s: &Setup, ks: &Kernels, g: &Group, form: Form) -> Result<Part, CodegenError> {
    let m = s.m;
    let t = Instant::now();
    let ctx = Context::create();
    let pipeline = match g.class {
        Class::Gemm | Class::Loop => vector_pipeline(s.opts),
        Class::Full => pipeline(s.opts, None),
        Class::Light => pipeline(s.opts, Some(LIGHT_PIPELINE)),
        Class::Bare => pipeline(s.opts, Some(ENTRY_PIPELINE)),
    };
    let cache = s.cache.filter(|_| form == Form::Object);
    let key = cache.map(|_| {
        let spec = s.spec;
        let setting = format!(
            "{} {} {} {:?} {:?} {:?} {:?} {}",
            spec.triple.as_str().to_string_lossy(),
            spec.cpu,
            spec.features,
            s.opts,
            s.reloc,
            g.class,
            pipeline.passes,
            pipeline.codegen
        );
        let kernels = g
            .kernels
            .iter()
            .map(|&u| (&*ks.unique[u].1, &*ks.sigs[u].0));
        kernel_cache::group_key(&setting, kernels)
    });
    if let (Some(cache), Some(key)) = (cache, &key) {
        let hit = cache
            .get(key)
            .and_then(|e| kernel_cache::decode(&e, g.kernels.len()));
        if let Some((facts, bytes)) = hit {
            return Ok(Part {
                bytes,
                facts,
                times: [t.elapsed(), Duration::ZERO, Duration::ZERO],
                cached: true,
            });
        }
    }
    let tm = target_machine(s.spec, s.reloc, pipeline.codegen).map_err(|e| general(m, e))?;
    let cg = new_cg(&ctx, s, &format!("{}.k{}", m.name, g.kernels[0]), &tm);
    let mut facts = Vec::with_capacity(g.kernels.len());
    for &u in &g.kernels {
        let (k, name, _, shared) = &ks.unique[u];
        let e = emit_kernel(&cg, s.gemm, m, k, shared, name)
            .map_err(|f| finish(m, attribute(m, k, f)))?;
        facts.push((e.items, e.grain));
    }
    let part = finish_module(s, &cg, &tm, &pipeline, form, t, facts)?;
    if let (Some(cache), Some(key)) = (cache, &key) {
        cache.put(key, &kernel_cache::encode(&part.facts, &part.bytes));
    }
    Ok(part)
}

/// How one module is optimized: LLVM's pass pipeline and the code generator's level.
struct Pipeline {
    passes: String,
    level: u8,
    codegen: u8,
}

/// The options' `default<ON>` pipeline, or `cheap` with the fast instruction selector (where
/// the options optimize at all).
fn pipeline(opts: &CpuOptions, cheap: Option<&str>) -> Pipeline {
    let level = opts.opt_level.min(3);
    match cheap {
        Some(p) if level > 0 => Pipeline {
            passes: p.to_string(),
            level: 0,
            codegen: 0,
        },
        _ => Pipeline {
            passes: format!("default<O{level}>"),
            level,
            codegen: level,
        },
    }
}

/// [`VECTOR_PIPELINE`] with the options' code generator level (where the options optimize at
/// all; the options' own pipeline where they do not).
fn vector_pipeline(opts: &CpuOptions) -> Pipeline {
    let level = opts.opt_level.min(3);
    if level == 0 {
        return pipeline(opts, None);
    }
    Pipeline {
        passes: VECTOR_PIPELINE.to_string(),
        level,
        codegen: level,
    }
}

/// Verifies, optimizes and writes out `cg`'s module (emission having started at `t`).
fn finish_module(
    s: &Setup,
    cg: &Cg,
    tm: &TargetMachine,
    pipeline: &Pipeline,
    form: Form,
    t: Instant,
    facts: Vec<(i64, i64)>,
) -> Result<Part, CodegenError> {
    let m = s.m;
    cg.module
        .verify()
        .map_err(|e| general(m, format!("internal error: invalid LLVM IR: {e}")))?;
    let emit = t.elapsed();
    let t = Instant::now();
    optimize(&cg.module, tm, pipeline).map_err(|e| general(m, e))?;
    let optimize = t.elapsed();
    let t = Instant::now();
    let bytes = match form {
        Form::Object => tm
            .write_to_memory_buffer(&cg.module, FileType::Object)
            .map_err(|e| general(m, format!("object emission failed: {e}")))?
            .as_slice()
            .to_vec(),
        Form::Bitcode => cg.module.write_bitcode_to_memory().as_slice().to_vec(),
    };
    Ok(Part {
        bytes,
        facts,
        times: [emit, optimize, t.elapsed()],
        cached: false,
    })
}

/// Runs `pipeline`'s passes on `module`.
fn optimize(
    module: &inkwell::module::Module,
    tm: &TargetMachine,
    pipeline: &Pipeline,
) -> Result<(), String> {
    let po = PassBuilderOptions::create();
    let vectorize = pipeline.level >= 2;
    po.set_loop_vectorization(vectorize);
    po.set_loop_slp_vectorization(vectorize);
    po.set_loop_interleaving(vectorize);
    po.set_loop_unrolling(vectorize);
    module
        .run_passes(&pipeline.passes, tm, po)
        .map_err(|e| format!("LLVM optimization failed: {e}"))
}

/// A new context's module of entry code made by `emit`, compiled with [`ENTRY_PIPELINE`].
fn compile_entry_code(
    s: &Setup,
    name: &str,
    form: Form,
    emit: impl FnOnce(&Cg) -> R<()>,
) -> Result<Part, CodegenError> {
    let m = s.m;
    let t = Instant::now();
    let ctx = Context::create();
    let pipeline = pipeline(s.opts, Some(ENTRY_PIPELINE));
    let tm = target_machine(s.spec, s.reloc, pipeline.codegen).map_err(|e| general(m, e))?;
    let cg = new_cg(&ctx, s, name, &tm);
    emit(&cg).map_err(|f| finish(m, f))?;
    finish_module(s, &cg, &tm, &pipeline, form, t, Vec::new())
}

/// The module of the entry point `entry`, calling the kernels and the top-level chunks'
/// functions.
fn compile_entry(
    s: &Setup,
    ks: &Kernels,
    kernels: &[EntryKernel],
    entry: &str,
    export: bool,
    form: Form,
) -> Result<Part, CodegenError> {
    compile_entry_code(s, &s.m.name, form, |cg| {
        build_entry(cg, s.m, s.prog, entry, export, kernels, ks.max_bufs)
    })
}

/// A module of the entry point's top-level chunks `chunks` (the first of whose kernels is
/// kernel number `first`).
fn compile_top_parts(
    s: &Setup,
    ks: &Kernels,
    kernels: &[EntryKernel],
    chunks: std::ops::Range<usize>,
    first: usize,
    form: Form,
) -> Result<Part, CodegenError> {
    let name = format!("{}.top{}", s.m.name, chunks.start);
    compile_entry_code(s, &name, form, |cg| {
        build_top_parts(cg, s.m, s.prog, kernels, ks.max_bufs, chunks, first)
    })
}

/// Links bitcode `parts` from [`compile`] into one module of `ctx`, with the kernels internal
/// (only the entry point is exported).
pub(crate) fn link<'ctx>(
    ctx: &'ctx Context,
    m: &Module,
    parts: &[Vec<u8>],
    entry: &str,
) -> Result<inkwell::module::Module<'ctx>, CodegenError> {
    let load = |bytes: &[u8]| {
        let buf = MemoryBuffer::create_from_memory_range_copy(bytes, "axle-part");
        inkwell::module::Module::parse_bitcode_from_buffer(&buf, ctx)
            .map_err(|e| general(m, format!("internal error: bitcode does not load: {e}")))
    };
    let (last, kernels) = parts
        .split_last()
        .ok_or_else(|| general(m, "internal error: no entry module".into()))?;
    let linked = load(last)?;
    for p in kernels {
        linked
            .link_in_module(load(p)?)
            .map_err(|e| general(m, format!("internal error: linking failed: {e}")))?;
    }
    let mut f = linked.get_first_function();
    while let Some(func) = f {
        if func.count_basic_blocks() > 0 && func.get_name().to_bytes() != entry.as_bytes() {
            func.set_linkage(Linkage::Internal);
        }
        f = func.get_next_function();
    }
    Ok(linked)
}
