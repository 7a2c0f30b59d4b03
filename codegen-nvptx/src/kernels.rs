//! Kernels: one NVPTX kernel per fusion of a host computation (the entry, and the computations
//! its `while`s, `conditional`s and `call`s run: [`crate::host_computations`]) and per unfused
//! instruction that computes its elements independently or is a `reduce`. A loop kernel (elementwise ops,
//! broadcasts, transposes, slices, concatenations, pads, iotas, gathers, converts,
//! reduce-windows, ...) computes one output element per thread with the shared elemental
//! generators, or four consecutive ones where each is read and written at its own element
//! only and their number is a multiple of four ([`vector_width`]: 128-bit loads and stores);
//! a fusion that computes `reduce`s, and an unfused `reduce`, is a reduction
//! kernel ([`crate::reduction`]); a fusion whose root is a `transpose` that moves the minor
//! dimension, and such an unfused `transpose`, is a transpose kernel ([`crate::transpose`]); a
//! fusion computing a `dot` (with an elementwise epilogue), and an unfused `dot`, is a tiled dot
//! kernel ([`crate::dot`]: on tensor cores for the `f16` and `bf16` dots
//! [`KernelOptions::tensor_cores`] selects, else on the FMA tile loop; a complex dot is a loop
//! kernel, one output element per thread by the shared elemental form); a `sort`, `topk` or
//! `TopK` custom call is a bitonic sort run by one or several consecutive kernels
//! ([`crate::sort`]); a `scatter` (unfused, or a fusion's
//! root) is a copy kernel then an update kernel ([`crate::scatter`]); an `fft` is a chain of
//! radix-stage kernels ([`crate::fft`]); an `rng-bit-generator` is one kernel of one block
//! call of its generator per thread (the body the cpu backend runs,
//! `axle_codegen_llvm::rng_bit_generator`); a `select-and-scatter`
//! (likewise) is a kernel gathering one output element per thread
//! ([`crate::select_and_scatter`]); a `convolution` (unfused, or a fusion's with an
//! elementwise epilogue) is a tiled implicit-GEMM kernel ([`crate::convolution`], sharing the
//! dot kernel's tile loop, [`crate::tiled_product`]), except the configurations that module
//! leaves untiled (complex, one output feature per group, several convolutions in a fusion,
//! a convolution read other than elementwise), which a loop kernel computes one output
//! element per thread by the shared elemental form
//! (`axle_codegen_llvm::contraction::gen_contraction`).
//!
//! The kernel of instruction `%x` is `axle_k<N>_<x>` (N its position among the kernels of
//! every host computation, so names are unique across computations), with
//! one `ptr addrspace(1) align 16` parameter per output leaf, then one per scratch buffer
//! ([`KernelInfo::scratch`], usually none), then one per leaf of each operand it reads
//! (operands in order, a repeated operand once). An instruction may be computed by several
//! consecutive kernels (a multi-pass algorithm): the first writes its outputs, each following
//! one reads and writes the same output (and scratch) buffers in place, in launch order. Parameters, constants (whose bytes the runtime
//! uploads), tuples, `get-tuple-element`, `opt-barrier` (its operands' buffers, unchanged),
//! host control flow (`while`, `conditional`, `call`: the executor runs their
//! computations) and collectives (staged through the host: [`crate::collective`]) need no
//! kernel. A zero-sized output has no kernel and no launch.
//!
//! Invariants: a kernel is emitted only for an instruction whose every fused instruction the
//! backend supports; anything else (a reduction or dot read other than at its own output,
//! a scatter or select-and-scatter other than a kernel's root, custom calls other than `TopK`
//! (named with their target), math library functions with neither libdevice nor an inline
//! form) is a [`CodegenError`]
//! naming the instruction and its op, never a wrong kernel.
//! Outputs of a multi-output loop fusion have equal dimensions (each thread stores the same
//! element of every output). Deciding what each instruction becomes walks each fused
//! computation from its root, so planning is linear in the module's size.

use std::path::Path;

use axle_codegen_llvm::cg::Cg;
use axle_codegen_llvm::contraction::gen_contraction;
use axle_codegen_llvm::elemental::{
    first_non_elemental, first_non_elemental_from, inst_leaves, is_elemental, Ext, Gen,
};
use axle_codegen_llvm::error::{at, finish, Fail, R};
use axle_codegen_llvm::forms::supported_type;
use axle_codegen_llvm::rng_bit_generator::{emit_rng, rng_items};
use axle_codegen_llvm::CodegenError;
use axle_ir::{AttrKey, CompId, InstId, Module, Opcode};
use inkwell::context::Context;
use inkwell::module::Linkage;
use inkwell::targets::{TargetData, TargetTriple};
use inkwell::types::BasicMetadataTypeEnum;
use inkwell::values::{FunctionValue, PointerValue};
use inkwell::IntPredicate;

use crate::convolution::{conv_geometry, emit_convolution, ConvGeometry};
use crate::dot::{dot_geometry, emit_dot, DotGeometry, TensorCores};
use crate::fft::{emit_fft, fft_geometry, FftBuffers, FftGeometry, FftKernel};
use crate::fused::reached_in_order;
use crate::gpu_target::{NvptxTarget, BACKEND};
use crate::host_computations::host_computations;
use crate::launch::LaunchPlan;
use crate::libdevice::Libdevice;
use crate::reduction::{emit_reduction, reduction_geometry, ReductionGeometry};
use crate::scatter::{
    check_outputs, emit_scatter, scatter_geometry, ScatterGeometry, ScatterKernel, ScatterPass,
};
use crate::select_and_scatter::{
    check_select_and_scatter, emit_select_and_scatter, select_and_scatter_of,
};
use crate::sort::{
    custom_call_target, emit_sort, sort_geometry, SortBuffers, SortGeometry, SortKernel,
};
use crate::transpose::{emit_transpose, transpose_geometry, TransposeGeometry};

/// One kernel of a module, as launched.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelInfo {
    /// The kernel's symbol.
    pub name: String,
    /// The instruction it computes (of a host computation: the entry, or one its control
    /// flow runs).
    pub inst: InstId,
    /// The instructions whose buffers it reads, in parameter order (after the outputs).
    pub operands: Vec<InstId>,
    /// Its grid and block.
    pub plan: LaunchPlan,
    /// What kind of kernel it is.
    pub kind: KernelKind,
    /// The sizes in bytes of scratch buffers the kernel takes after its outputs and before
    /// its operands (parameters of their own, `align 16`); the executor allocates them once
    /// per run of the instruction, shared by every kernel of that instruction, and frees them
    /// after its last kernel. Empty for most kernels.
    pub scratch: Vec<u64>,
}

/// The kinds of kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KernelKind {
    /// One output element per thread.
    Loop,
    /// `width` consecutive output elements per thread, each read and written at its own
    /// element only ([`vector_width`]), all loads before all stores, so LLVM's load/store
    /// vectorizer makes them `ld.global.v{width}` and `st.global.v{width}`; the launch plan
    /// counts threads (`elements / width`).
    VectorLoop {
        /// Elements per thread ([`VECTOR`]).
        width: u64,
    },
    /// A row or column reduction ([`crate::reduction`]).
    Reduction(ReductionGeometry),
    /// A transpose through shared memory ([`crate::transpose`]).
    Transpose(TransposeGeometry),
    /// A shared-memory-tiled dot, on tensor cores or FMA units ([`crate::dot`]).
    Dot(DotGeometry),
    /// A shared-memory-tiled convolution, an implicit GEMM ([`crate::convolution`]).
    Convolution(ConvGeometry),
    /// One kernel of a bitonic sort or top-k ([`crate::sort`]).
    Sort(SortKernel),
    /// One of a scatter's two kernels ([`crate::scatter`]).
    Scatter(ScatterKernel),
    /// A select-and-scatter, one output element per thread ([`crate::select_and_scatter`]).
    SelectAndScatter,
    /// One kernel of an `fft`: a radix stage along one dimension ([`crate::fft`]).
    Fft(FftKernel),
    /// An `rng-bit-generator`: one block call of its generator per thread, the first thread
    /// also writing the new state (`axle_codegen_llvm::rng_bit_generator`, the cpu backend's
    /// kernel body, so the bits are the same).
    RngBitGenerator,
}

/// The alignment, in bytes, every kernel may assume of its buffers (a device's allocations
/// must keep it).
pub const BUFFER_ALIGN: u64 = 16;

/// Elements per thread of a vectorized loop kernel: four 32-bit values are one 128-bit access.
pub const VECTOR: u64 = 4;

/// Elements per thread of the loop kernel of instruction `id` over `n` elements: [`VECTOR`]
/// when `n` is a positive multiple of it and every value the kernel reads is read at the
/// output's own element (elementwise ops of operands of the output's dimensions, scalar
/// constants and broadcasts of scalars), so a thread's accesses are consecutive and, with the
/// buffers' 16-byte alignment, aligned; else 1.
pub fn vector_width(m: &Module, id: InstId, n: u64) -> u64 {
    if n == 0 || !n.is_multiple_of(VECTOR) {
        return 1;
    }
    let Some(out) = m.array_shape(id).map(|a| a.dims.clone()).or_else(|| {
        inst_leaves(m, id)
            .ok()
            .and_then(|l| l.first().map(|a| a.dims.clone()))
    }) else {
        return 1;
    };
    let same = |x: InstId| m.array_shape(x).is_some_and(|a| a.dims == out);
    let scalar = |x: InstId| m.array_shape(x).is_some_and(|a| a.rank() == 0);
    let elementwise_at_own_element = |x: InstId, fused: bool| -> bool {
        use Opcode::*;
        match m.opcode(x) {
            Parameter => !fused || same(x),
            Constant => scalar(x),
            Broadcast => m.operands(x).iter().all(|&o| scalar(o)),
            Tuple => fused,
            op => {
                op.is_elementwise()
                    && same(x)
                    && m.operands(x).iter().all(|&o| same(o) || scalar(o))
            }
        }
    };
    let ok = match m.opcode(id) {
        Opcode::Fusion => m.comp_attr(id, &AttrKey::Calls).is_some_and(|c| {
            reached_in_order(m, c, m.root(c))
                .into_iter()
                .all(|x| elementwise_at_own_element(x, true))
        }),
        _ => elementwise_at_own_element(id, false) && m.operands(id).iter().all(|&o| same(o)),
    };
    if ok {
        VECTOR
    } else {
        1
    }
}

/// What an instruction of the entry computation becomes.
enum Role {
    /// No kernel: a value the runtime provides, a view of other buffers, or a collective the
    /// executor runs on the host ([`crate::collective`]).
    NoKernel,
    /// A loop kernel computing the instruction's elements.
    Loop,
    /// A reduction kernel ([`crate::reduction`]).
    Reduction(ReductionGeometry),
    /// A transpose through shared memory ([`crate::transpose`]).
    Transpose(TransposeGeometry),
    /// A shared-memory-tiled dot ([`crate::dot`]).
    Dot(DotGeometry),
    /// A shared-memory-tiled convolution ([`crate::convolution`]).
    Convolution(ConvGeometry),
    /// A sort or top-k, as one or several kernels ([`crate::sort`]).
    Sort(SortGeometry),
    /// A scatter's copy and update kernels ([`crate::scatter`]).
    Scatter(ScatterGeometry),
    /// A select-and-scatter kernel ([`crate::select_and_scatter`]).
    SelectAndScatter,
    /// An `fft`, as consecutive radix-stage kernels ([`crate::fft`]).
    Fft(FftGeometry),
    /// An `rng-bit-generator` over this many block calls.
    RngBitGenerator(u64),
}

/// Instructions this backend leaves to other kernels: dots (refused even where the elemental
/// generators could compute them one element per thread, which would be correct but far
/// slower than the shared-memory kernel they get; complex dots, which that kernel does not
/// cover, and the convolutions [`crate::convolution`] leaves untiled are computed so), and
/// reductions anywhere but at a kernel's output (a reduction kernel computes those;
/// recomputing a reduction for every element that reads it would multiply its work).
fn later_kernel(m: &Module, x: InstId) -> bool {
    match m.opcode(x) {
        Opcode::Reduce => true,
        Opcode::Dot => !is_complex_dot(m, x),
        _ => false,
    }
}

/// Whether `x` is a dot with a complex result or operand, which a loop kernel computes one
/// output element per thread by the shared elemental form (`gen_contraction`, the evaluator's
/// order of the contracting dimensions).
fn is_complex_dot(m: &Module, x: InstId) -> bool {
    m.opcode(x) == Opcode::Dot
        && std::iter::once(x)
            .chain(m.operands(x).iter().copied())
            .any(|v| m.array_shape(v).is_some_and(|a| a.ty.is_complex()))
}

/// The error for instruction `id`, whose op this backend does not compile (in this place).
fn unsupported(m: &Module, id: InstId) -> Fail {
    let what = match custom_call_target(m, id) {
        Some(t) if m.opcode(id) == Opcode::CustomCall => format!("custom-call \"{t}\""),
        _ => m.opcode(id).name().to_string(),
    };
    at(
        m,
        id,
        Fail::Msg(format!(
            "the {BACKEND} backend does not support {what} instructions here yet"
        )),
    )
}

/// A `replica-id` or `partition-id` that fused computation `c` reaches, in a module written for
/// more than one device: a kernel would compute it as device 0's (the elemental form), which
/// only a module for one device may do.
fn device_id_in_kernel(m: &Module, c: CompId) -> Option<InstId> {
    if m.replica_count() == 1 && m.num_partitions() == 1 {
        return None;
    }
    reached_in_order(m, c, m.root(c))
        .into_iter()
        .find(|&x| matches!(m.opcode(x), Opcode::ReplicaId | Opcode::PartitionId))
}

/// The first instruction of computation `c` its root depends on whose op is left to other
/// kernels, except `allowed` (the reductions or dot the kernel computes).
fn first_later_kernel(m: &Module, c: CompId, allowed: &[InstId]) -> Option<InstId> {
    reached_in_order(m, c, m.root(c))
        .into_iter()
        .find(|&x| later_kernel(m, x) && !allowed.contains(&x))
}

/// What instruction `id` of the entry computation becomes, or the error naming the first
/// instruction (its own or a fused one) the backend does not support.
fn role(m: &Module, id: InstId, opts: &KernelOptions) -> R<Role> {
    use Opcode::*;
    let reduction = || -> R<Role> {
        Ok(match reduction_geometry(m, id)? {
            Some(geo) => Role::Reduction(geo),
            None => Role::Loop,
        })
    };
    let dot = || -> R<Option<Role>> { Ok(dot_geometry(m, id, opts.tensor_cores)?.map(Role::Dot)) };
    let conv = || -> R<Role> {
        Ok(match conv_geometry(m, id)? {
            Some(geo) => Role::Convolution(geo),
            None => Role::Loop,
        })
    };
    let transpose = || -> R<Role> {
        Ok(match transpose_geometry(m, id)? {
            Some(geo) => Role::Transpose(geo),
            None => Role::Loop,
        })
    };
    if crate::collective::is_host_step(m, id) {
        // A collective runs on the host between kernels ([`crate::collective`]).
        crate::collective::check(m, id).map_err(|e| at(m, id, Fail::Msg(e.to_string())))?;
        return Ok(Role::NoKernel);
    }
    if let Some(r) = scatter_role(m, id, opts.float_atomics)? {
        return Ok(r);
    }
    match m.opcode(id) {
        Parameter | Constant | Tuple | GetTupleElement | AfterAll | OptBarrier => {
            Ok(Role::NoKernel)
        }
        // Host control flow: its computations' kernels are planned with the entry's.
        While | Conditional | Call => Ok(Role::NoKernel),
        Fusion => {
            let c = m
                .comp_attr(id, &AttrKey::Calls)
                .ok_or_else(|| at(m, id, "fusion needs calls".into()))?;
            if let Some(bad) = device_id_in_kernel(m, c) {
                return Err(at(
                    m,
                    bad,
                    Fail::Msg(format!(
                        "the {BACKEND} backend runs {} unfused (a host step) in a module for                          more than one device, not inside a fusion",
                        m.opcode(bad).name()
                    )),
                ));
            }
            let role = match dot()? {
                Some(r) => r,
                None => match reduction()? {
                    Role::Loop => match conv()? {
                        Role::Loop => transpose()?,
                        r => r,
                    },
                    r => r,
                },
            };
            let heroes: Vec<InstId> = match &role {
                Role::Reduction(geo) => geo.passes.concat(),
                Role::Dot(geo) => vec![geo.dot],
                _ => Vec::new(),
            };
            if let Some(bad) =
                first_later_kernel(m, c, &heroes).or_else(|| first_non_elemental(m, c))
            {
                return Err(unsupported(m, bad));
            }
            Ok(role)
        }
        Reduce => {
            let c = m
                .comp_attr(id, &AttrKey::ToApply)
                .ok_or_else(|| at(m, id, "reduce needs to_apply".into()))?;
            if let Some(bad) = first_non_elemental(m, c) {
                return Err(unsupported(m, bad));
            }
            reduction()
        }
        Transpose => transpose(),
        Dot => match dot()? {
            Some(r) => Ok(r),
            None if is_complex_dot(m, id) => Ok(Role::Loop),
            None => Err(unsupported(m, id)),
        },
        Convolution => conv(),
        Fft => Ok(Role::Fft(fft_geometry(m, id)?)),
        RngBitGenerator => {
            let items = rng_items(m, id).map_err(|f| at(m, id, f))?;
            Ok(Role::RngBitGenerator(items.max(1) as u64))
        }
        Sort | TopK | CustomCall => {
            let geo = sort_geometry(m, id)?.ok_or_else(|| unsupported(m, id))?;
            if let crate::sort::SortOrder::Comparator { comp, .. } = geo.order {
                if let Some(bad) = first_non_elemental(m, comp) {
                    return Err(unsupported(m, bad));
                }
            }
            Ok(Role::Sort(geo))
        }
        _ if is_elemental(m, id) && !later_kernel(m, id) => Ok(Role::Loop),
        _ => Err(unsupported(m, id)),
    }
}

/// The role of instruction `id` when it computes a `scatter` or `select-and-scatter` (itself,
/// or as its fusion's root, with everything else of the fusion computing its operands
/// elementally); `None` for anything else.
fn scatter_role(m: &Module, id: InstId, float_atomics: bool) -> R<Option<Role>> {
    let (s, role) =
        if let Some(geo) = scatter_geometry(m, id, float_atomics).map_err(|f| at(m, id, f))? {
            check_outputs(m, id, &geo).map_err(|f| at(m, id, f))?;
            (geo.scatter, Role::Scatter(geo))
        } else if let Some(s) = select_and_scatter_of(m, id) {
            check_select_and_scatter(m, s).map_err(|f| at(m, s, f))?;
            (s, Role::SelectAndScatter)
        } else {
            return Ok(None);
        };
    let applied = [AttrKey::ToApply, AttrKey::Select, AttrKey::Scatter];
    let bad = applied
        .iter()
        .filter_map(|k| m.comp_attr(s, k))
        .find_map(|c| first_non_elemental(m, c))
        .or_else(|| {
            // A fusion computes the operands in the kernel; an unfused one reads buffers.
            let c = m.comp_attr(id, &AttrKey::Calls)?;
            first_non_elemental_from(m, m.operands(s)).or_else(|| first_later_kernel(m, c, &[]))
        })
        .or_else(|| {
            inst_leaves(m, s)
                .ok()?
                .iter()
                .any(|l| !supported_type(l.ty))
                .then_some(s)
        });
    match bad {
        Some(bad) => Err(unsupported(m, bad)),
        None => Ok(Some(role)),
    }
}

/// The planner's choices a user may set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelOptions {
    /// Which dots run on tensor cores ([`TensorCores`]).
    pub tensor_cores: TensorCores,
    /// Whether a scatter that adds `f32` or `f64` updates may combine them with float atomics
    /// (as XLA's GPU backend does unless told to be deterministic): faster where many updates
    /// meet, but the order the updates arrive in, and so the rounding of the sums, can differ
    /// from run to run, and PTX's float atomic add flushes subnormals. Off by default, which
    /// keeps every result bit-identical from run to run (the owner path of [`crate::scatter`]).
    pub float_atomics: bool,
}

/// The kernels of every host computation ([`host_computations`]: the entry and the
/// computations its control flow runs), each computation's in program order, with their launch
/// plans (no LLVM involved): what [`emit_kernels`] emits. Planned with the default
/// [`KernelOptions`]; [`plan_kernels_with`] takes others.
pub fn plan_kernels(m: &Module) -> Result<Vec<KernelInfo>, CodegenError> {
    plan_kernels_with(m, &KernelOptions::default())
}

/// The kernels of [`plan_kernels`], planned with `opts`.
pub fn plan_kernels_with(
    m: &Module,
    opts: &KernelOptions,
) -> Result<Vec<KernelInfo>, CodegenError> {
    plan(m, opts).map_err(|f| finish(m, f))
}

fn plan(m: &Module, opts: &KernelOptions) -> R<Vec<KernelInfo>> {
    let order = host_computations(m)
        .into_iter()
        .flat_map(|(_, order)| order);
    let mut out = Vec::new();
    for id in order {
        let kind = match role(m, id, opts)? {
            Role::NoKernel => continue,
            Role::Loop => KernelKind::Loop,
            Role::Reduction(geo) => KernelKind::Reduction(geo),
            Role::Transpose(geo) => KernelKind::Transpose(geo),
            Role::Dot(geo) => KernelKind::Dot(geo),
            Role::Convolution(geo) => KernelKind::Convolution(geo),
            Role::Sort(geo) => {
                plan_sort(m, id, &geo, &mut out)?;
                continue;
            }
            Role::Scatter(geo) => {
                plan_scatter(m, id, &geo, &mut out)?;
                continue;
            }
            Role::Fft(geo) => {
                plan_fft(m, id, geo, &mut out)?;
                continue;
            }
            Role::SelectAndScatter => KernelKind::SelectAndScatter,
            Role::RngBitGenerator(items) => {
                let plan = LaunchPlan::for_elements(items)
                    .map_err(|e| at(m, id, Fail::Msg(e.to_string())))?;
                push_kernel(
                    m,
                    id,
                    plan,
                    KernelKind::RngBitGenerator,
                    Vec::new(),
                    &mut out,
                );
                continue;
            }
        };
        let leaves = inst_leaves(m, id).map_err(|f| at(m, id, f))?;
        let first = leaves
            .first()
            .ok_or_else(|| at(m, id, "an instruction with no array output".into()))?;
        if matches!(kind, KernelKind::Loop) && leaves.iter().any(|l| l.dims != first.dims) {
            return Err(at(
                m,
                id,
                "the outputs of a multi-output kernel must have equal dimensions".into(),
            ));
        }
        let elements = first.num_elements().max(0) as u64;
        let kind = match (kind, vector_width(m, id, elements)) {
            (KernelKind::Loop, width) if width > 1 => KernelKind::VectorLoop { width },
            (kind, _) => kind,
        };
        let plan = match &kind {
            KernelKind::Loop => LaunchPlan::for_elements(elements),
            KernelKind::VectorLoop { width } => LaunchPlan::for_elements(elements / width),
            KernelKind::Reduction(geo) => geo.launch_plan(),
            KernelKind::Transpose(geo) => geo.launch_plan(),
            KernelKind::Dot(geo) => geo.launch_plan(),
            KernelKind::Convolution(geo) => geo.launch_plan(),
            KernelKind::Sort(k) => k.launch_plan(),
            KernelKind::Scatter(k) => k.launch_plan(),
            KernelKind::SelectAndScatter => LaunchPlan::for_elements(elements),
            KernelKind::Fft(k) => k.launch_plan(),
            KernelKind::RngBitGenerator => LaunchPlan::for_elements(elements),
        }
        .map_err(|e| at(m, id, Fail::Msg(e.to_string())))?;
        if !plan.launches() {
            continue;
        }
        push_kernel(m, id, plan, kind, Vec::new(), &mut out);
    }
    Ok(out)
}

/// Appends the kernel of instruction `id` to `out`, named for its position and the
/// instruction, reading the instruction's operands (a repeated operand once).
fn push_kernel(
    m: &Module,
    id: InstId,
    plan: LaunchPlan,
    kind: KernelKind,
    scratch: Vec<u64>,
    out: &mut Vec<KernelInfo>,
) {
    let mut operands: Vec<InstId> = Vec::new();
    for &o in m.operands(id) {
        if !operands.contains(&o) {
            operands.push(o);
        }
    }
    out.push(KernelInfo {
        name: match symbol_part(m.name(id)) {
            s if s.is_empty() => format!("axle_k{}", out.len()),
            s => format!("axle_k{}_{s}", out.len()),
        },
        inst: id,
        operands,
        plan,
        kind,
        scratch,
    });
}

/// Appends the copy and update kernels of scatter `id` to `out`, in launch order; none when
/// its output is empty.
fn plan_scatter(m: &Module, id: InstId, geo: &ScatterGeometry, out: &mut Vec<KernelInfo>) -> R<()> {
    for pass in [ScatterPass::Copy, ScatterPass::Update] {
        let k = ScatterKernel {
            pass,
            geo: geo.clone(),
        };
        let plan = k
            .launch_plan()
            .map_err(|e| at(m, id, Fail::Msg(e.to_string())))?;
        if plan.launches() {
            push_kernel(m, id, plan, KernelKind::Scatter(k), Vec::new(), out);
        }
    }
    Ok(())
}

/// Appends the kernels of sort (or top-k) `id` to `out`, in launch order, all sharing its
/// scratch buffers; none when it has nothing to compute.
fn plan_sort(m: &Module, id: InstId, geo: &SortGeometry, out: &mut Vec<KernelInfo>) -> R<()> {
    let scratch = geo.scratch();
    for k in geo.passes() {
        let plan = k
            .launch_plan()
            .map_err(|e| at(m, id, Fail::Msg(e.to_string())))?;
        push_kernel(m, id, plan, KernelKind::Sort(k), scratch.clone(), out);
    }
    Ok(())
}

/// Appends the kernels of fft `id` to `out`, in launch order, all sharing its scratch
/// buffers; none when its output is empty.
fn plan_fft(m: &Module, id: InstId, geo: FftGeometry, out: &mut Vec<KernelInfo>) -> R<()> {
    for k in geo.kernels {
        let plan = k
            .launch_plan()
            .map_err(|e| at(m, id, Fail::Msg(e.to_string())))?;
        if plan.launches() {
            push_kernel(m, id, plan, KernelKind::Fft(k), geo.scratch.clone(), out);
        }
    }
    Ok(())
}

/// An instruction name as a PTX identifier part (letters, digits, `_`).
fn symbol_part(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// A new LLVM module of `ctx` for `triple` and `data` holding the kernels `kernels` of `m`, with
/// libdevice (at `libdevice`, when given) linked for the math functions they call, and whether
/// libdevice was linked. The PTX emitter and the host simulator both build their kernels here,
/// so the two run the same code.
pub fn kernel_module<'ctx>(
    ctx: &'ctx Context,
    m: &Module,
    kernels: &[KernelInfo],
    libdevice: Option<&Path>,
    triple: &TargetTriple,
    data: &TargetData,
) -> Result<(Cg<'ctx>, bool), CodegenError> {
    let general = |msg: String| CodegenError::general(&m.name, msg);
    let libdevice = match libdevice {
        Some(p) => Some(Libdevice::load(ctx, p).map_err(|e| general(e.to_string()))?),
        None => None,
    };
    let target = NvptxTarget {
        libdevice: libdevice
            .as_ref()
            .map(|l| l.functions.clone())
            .unwrap_or_default(),
    };
    let cg = Cg::new(ctx, &m.name, Box::new(target));
    cg.module.set_triple(triple);
    cg.module.set_data_layout(&data.get_data_layout());
    emit_kernels(&cg, m, kernels)?;
    let linked = libdevice.is_some();
    if let Some(l) = libdevice {
        let names: Vec<String> = kernels.iter().map(|k| k.name.clone()).collect();
        l.link_into(&cg.module, data, triple, &names)
            .map_err(|e| general(e.to_string()))?;
    }
    Ok((cg, linked))
}

/// Emits every kernel of `kernels` into `cg`'s module, each marked as a kernel entry point.
pub fn emit_kernels(cg: &Cg<'_>, m: &Module, kernels: &[KernelInfo]) -> Result<(), CodegenError> {
    for k in kernels {
        emit_kernel(cg, m, k).map_err(|f| finish(m, at(m, k.inst, f)))?;
    }
    Ok(())
}

fn emit_kernel<'ctx>(cg: &Cg<'ctx>, m: &Module, k: &KernelInfo) -> R<()> {
    let id = k.inst;
    let outs = inst_leaves(m, id)?;
    let mut in_leaves = Vec::with_capacity(k.operands.len());
    for &o in &k.operands {
        in_leaves.push(inst_leaves(m, o)?.len());
    }
    let params = outs.len() + k.scratch.len() + in_leaves.iter().sum::<usize>();
    let ptr = cg.ptr();
    let fty = cg
        .ctx
        .void_type()
        .fn_type(&vec![BasicMetadataTypeEnum::from(ptr); params], false);
    let f = cg.add_fn(&k.name, fty, Some(Linkage::External));
    mark_kernel(cg, f);
    // Every buffer is at least 16-byte aligned (the GPU's allocations are 256-byte aligned,
    // the simulator's 16), which lets 128-bit accesses be proven aligned.
    let align = cg.ctx.create_enum_attribute(
        inkwell::attributes::Attribute::get_named_enum_kind_id("align"),
        BUFFER_ALIGN,
    );
    for p in 0..params {
        f.add_attribute(inkwell::attributes::AttributeLoc::Param(p as u32), align);
    }
    let entry = cg.ctx.append_basic_block(f, "entry");
    cg.b.position_at_end(entry);
    let mut ptrs = f.get_param_iter().map(|p| p.into_pointer_value());
    let mut take = |n: usize| -> R<Vec<PointerValue<'ctx>>> {
        let v: Vec<_> = ptrs.by_ref().take(n).collect();
        if v.len() == n {
            Ok(v)
        } else {
            Err("kernel parameter missing".into())
        }
    };
    let out_ptrs = take(outs.len())?;
    // Scratch buffers (a multi-pass sort's).
    let scratch_ptrs = take(k.scratch.len())?;
    // The buffers of each operand, in parameter order.
    let mut bufs = Vec::with_capacity(in_leaves.len());
    for &n in &in_leaves {
        bufs.push(take(n)?);
    }
    let mut g = Gen::new(cg, m).with_contraction(gen_contraction);
    // A fusion's computation reads its parameters; an unfused instruction its operands.
    let root = match m.opcode(id) {
        Opcode::Fusion => {
            let c = m
                .comp_attr(id, &AttrKey::Calls)
                .ok_or("fusion needs calls")?;
            for (&p, o) in m.params(c).iter().zip(m.operands(id)) {
                let slot = k
                    .operands
                    .iter()
                    .position(|x| x == o)
                    .ok_or("fusion operand without a parameter")?;
                g.bind(p, Ext::Bufs(bufs[slot].clone()));
            }
            m.root(c)
        }
        _ => {
            for (&o, b) in k.operands.iter().zip(bufs) {
                g.bind(o, Ext::Bufs(b));
            }
            id
        }
    };
    let width = match &k.kind {
        KernelKind::Loop => 1,
        KernelKind::VectorLoop { width } => *width,
        KernelKind::Reduction(geo) => {
            let outs: Vec<_> = outs.iter().map(|l| l.ty).zip(out_ptrs).collect();
            emit_reduction(&mut g, m, geo, &outs)?;
            cg.b.build_return(None)?;
            return Ok(());
        }
        KernelKind::Sort(s) => {
            let bufs = SortBuffers {
                outs: out_ptrs,
                scratch: scratch_ptrs,
            };
            emit_sort(&mut g, s, &bufs)?;
            cg.b.build_return(None)?;
            return Ok(());
        }
        KernelKind::Scatter(s) => {
            let outs: Vec<_> = outs.iter().cloned().zip(out_ptrs).collect();
            emit_scatter(&mut g, s, &k.plan, &outs)?;
            cg.b.build_return(None)?;
            return Ok(());
        }
        KernelKind::Fft(fk) => {
            let out = *out_ptrs.first().ok_or("an fft kernel has one output")?;
            let bufs = FftBuffers {
                out,
                scratch: scratch_ptrs,
            };
            emit_fft(&mut g, fk, &bufs)?;
            cg.b.build_return(None)?;
            return Ok(());
        }
        KernelKind::RngBitGenerator => {
            // Thread `t` makes block `t`; the first also writes the new state.
            let t = cg.thread_index(k.plan.wide_index)?;
            let end = cg.b.build_int_nuw_add(t, cg.c64(1), "end")?;
            let inside = cg.b.build_int_compare(
                IntPredicate::ULT,
                t,
                cg.c64(k.plan.elements as i64),
                "inside",
            )?;
            cg.if_then(inside, || {
                emit_rng(&mut g, m, id, &out_ptrs, t, end)?;
                Ok(())
            })?;
            cg.b.build_return(None)?;
            return Ok(());
        }
        KernelKind::SelectAndScatter => {
            let (Some(leaf), Some(&out)) = (outs.first(), out_ptrs.first()) else {
                return Err("a select-and-scatter kernel has one output".into());
            };
            let s = select_and_scatter_of(m, id).ok_or("not a select-and-scatter")?;
            emit_select_and_scatter(&mut g, s, &k.plan, leaf.ty, out)?;
            cg.b.build_return(None)?;
            return Ok(());
        }
        KernelKind::Transpose(_) | KernelKind::Dot(_) | KernelKind::Convolution(_) => {
            let (Some(leaf), Some(&out)) = (outs.first(), out_ptrs.first()) else {
                return Err("a transpose, dot or convolution kernel has one output".into());
            };
            match &k.kind {
                KernelKind::Dot(geo) => emit_dot(&mut g, geo, leaf.ty, out)?,
                KernelKind::Convolution(geo) => emit_convolution(&mut g, geo, leaf.ty, out)?,
                KernelKind::Transpose(geo) => emit_transpose(&mut g, geo, leaf.ty, out)?,
                _ => {}
            }
            cg.b.build_return(None)?;
            return Ok(());
        }
    };
    // Thread `t` computes elements `t * width ..`: every value first, then every store.
    let t = cg.thread_index(k.plan.wide_index)?;
    let n = cg.c64(k.plan.elements as i64);
    let inside = cg.b.build_int_compare(IntPredicate::ULT, t, n, "inside")?;
    cg.if_then(inside, || {
        let first = cg.b.build_int_nuw_mul(t, cg.c64(width as i64), "first")?;
        let mut computed = Vec::with_capacity(width as usize);
        for j in 0..width {
            let e = cg.b.build_int_nuw_add(first, cg.c64(j as i64), "elem")?;
            let idx = g.index_linear(&outs[0].dims, e)?;
            computed.push((e, g.gen_mem(root, &idx)?));
        }
        for (e, vals) in computed {
            for ((leaf, &p), v) in outs.iter().zip(&out_ptrs).zip(vals) {
                cg.store_mem(leaf.ty, p, e, v)?;
            }
        }
        Ok(())
    })?;
    cg.b.build_return(None)?;
    Ok(())
}

/// Marks `f` as a kernel entry point (`nvvm.annotations`), so LLVM emits it as a PTX `.entry`.
fn mark_kernel<'ctx>(cg: &Cg<'ctx>, f: FunctionValue<'ctx>) {
    let md = cg.ctx.metadata_node(&[
        f.as_global_value().as_pointer_value().into(),
        cg.ctx.metadata_string("kernel").into(),
        cg.i32().const_int(1, false).into(),
    ]);
    // Adding a named metadata operand fails only for a name that is not metadata.
    let _ = cg.module.add_global_metadata("nvvm.annotations", &md);
}
