//! The reference evaluator: runs a verified module on host [`Literal`]s.
//!
//! It is the oracle every later test compares against, so it follows XLA's semantics op by op
//! (see the submodules for the details of each family) and refuses, with an [`EvalError`]
//! naming the instruction, anything it does not implement rather than guessing. Where XLA's
//! CPU backend (whose outputs are the corpus's reference) and XLA's own evaluator disagree, it
//! follows the CPU backend, and `tests/xla` pins each such point against XLA CPU:
//! - float arithmetic flushes subnormals (x86 DAZ/FTZ; [`EvalOptions::flush_denormals`]);
//! - `maximum`/`minimum` order `-0` below `+0`;
//! - integer `power` uses the low six bits of the exponent (and `(-1)^-n` is `±1`);
//! - `f16`/`bf16`/f8 arithmetic is computed in `f32` and rounded after every op, and converts
//!   round or saturate per format as XLA does.
//!
//! Float sum and product reductions fold as a balanced tree (HLO leaves the order open; XLA's
//! vectorized reductions are close to exact, a left-to-right `f32` fold of millions of values
//! is not), and `dot` and `convolution` sum their terms in runs of 32 whose sums combine as a
//! fixed tree (see `dot`): no rounding chain is long, and the order never depends on the
//! thread count. Every result is checked against its instruction's declared shape, and reserved
//! before it is computed in a memory budget under the process's ceiling
//! ([`axle_ir::memory`]; the arguments count as held): a result over the ceiling, or of a shape
//! with an unbounded dynamic dimension, is an error naming the instruction, never an abort.
//!
//! Values are logical row-major literals whatever their layout; only `bitcast` looks at
//! layouts (a bitcast reinterprets the physical buffer), and `copy` between layouts is a no-op.
//! Each computation is run in a topological order of the instructions its root depends on,
//! freeing every value after its last use. Computations applied per element (reducers,
//! comparators, scatter and select functions, `map` bodies) are compiled into scalar programs
//! (see `scalar`), with typed fast paths for the common one-op forms and one key per element
//! for comparators of the form `compare(f(lhs), f(rhs))`; `dot` and `convolution` run tight
//! typed loops, parallel over output rows. Results do not depend on the thread count.

mod batchnorm;
mod collective;
mod dot;
pub(crate) mod elem;
mod elementwise;
mod gather;
mod lapack;
mod linalg;
mod reduce;
mod rng;
mod scalar;
mod sdy;
mod shape_ops;
mod sort;

use crate::float_mode::with_float_mode;
use axle_ir::entity::EntitySet;
use axle_ir::memory::MemoryBudget;
use axle_ir::{
    ArrayLiteral, ArrayShape, AttrKey, AttrValue, CompId, ElementType, InstId, Literal, Module,
    Opcode, Shape,
};
pub use collective::Device;
use scalar::{Reg, ScalarProg};
use shape_ops as so;
use std::borrow::Cow;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

/// Binary op `op` (arithmetic or logical, as an HLO instruction computes it) on two arrays of
/// type `ty` given as row-major bytes of equal length, into `out`, with the evaluator's
/// semantics (subnormals flushed if `ftz`; `f16`/`bf16`/f8 computed in `f32` and rounded).
/// Backends run all-reduce reducers of one op with it, so their reductions give the
/// evaluator's bits.
pub fn binary_elementwise(
    op: Opcode,
    ty: ElementType,
    a: &[u8],
    b: &[u8],
    out: &mut [u8],
    ftz: bool,
) -> Result<(), String> {
    if a.len() != b.len() || a.len() != out.len() {
        return Err("binary operands of different sizes".into());
    }
    elementwise::binary(op, ty, a, b, out, ftz)
}

/// An evaluation failure, naming the instruction that failed.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalError {
    /// The instruction's name (empty when the error is not about one instruction).
    pub instruction: String,
    /// The instruction's opcode name.
    pub opcode: String,
    /// The computation the instruction belongs to.
    pub computation: String,
    /// What went wrong.
    pub message: String,
}

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.instruction.is_empty() {
            write!(f, "evaluating {}: {}", self.computation, self.message)
        } else {
            write!(
                f,
                "evaluating %{} ({}) in {}: {}",
                self.instruction, self.opcode, self.computation, self.message
            )
        }
    }
}

impl std::error::Error for EvalError {}

/// Evaluation options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EvalOptions {
    /// Run float arithmetic as XLA's CPU backend does, with x86's DAZ and FTZ modes on:
    /// subnormal operands read as zero and subnormal `f32`/`f64` results are written as zero
    /// (keeping the sign). Sign-bit ops (`negate`, `abs`), total-order compares,
    /// `reduce-precision` and bit-level converts stay exact. On by default, since XLA's
    /// outputs are the reference; off gives IEEE gradual underflow.
    pub flush_denormals: bool,
}

impl Default for EvalOptions {
    fn default() -> Self {
        EvalOptions {
            flush_denormals: true,
        }
    }
}

/// Evaluates the entry computation of `m` on `args` (one literal per entry parameter) with the
/// default [`EvalOptions`]. The result is the root's value; a tuple root gives a
/// [`Literal::Tuple`].
///
/// The module is expected to verify ([`axle_ir::verify()`]): the evaluator trusts declared
/// shapes where an op's result shape is not determined by its operands alone (a `reduce-window`
/// whose declared shape disagrees with its window is evaluated over the declared shape).
pub fn evaluate(m: &Module, args: &[Literal]) -> Result<Literal, EvalError> {
    evaluate_with(m, args, &EvalOptions::default())
}

/// [`evaluate`] with explicit options.
pub fn evaluate_with(
    m: &Module,
    args: &[Literal],
    opts: &EvalOptions,
) -> Result<Literal, EvalError> {
    let entry = m.entry();
    if entry.is_none() {
        return Err(EvalError {
            instruction: String::new(),
            opcode: String::new(),
            computation: m.name.clone(),
            message: "the module has no entry computation".into(),
        });
    }
    evaluate_computation_with(m, entry, args, opts)
}

/// Evaluates computation `comp` of `m` on `args` (one literal per parameter) with the default
/// [`EvalOptions`].
pub fn evaluate_computation(
    m: &Module,
    comp: CompId,
    args: &[Literal],
) -> Result<Literal, EvalError> {
    evaluate_computation_with(m, comp, args, &EvalOptions::default())
}

/// [`evaluate_computation`] with explicit options.
pub fn evaluate_computation_with(
    m: &Module,
    comp: CompId,
    args: &[Literal],
    opts: &EvalOptions,
) -> Result<Literal, EvalError> {
    let budget = MemoryBudget::new().map_err(|e| EvalError {
        instruction: String::new(),
        opcode: String::new(),
        computation: m.comp_name(comp).to_string(),
        message: e.to_string(),
    })?;
    let mut budget = budget;
    // The arguments are the caller's memory, held for the whole run.
    budget.force(args.iter().map(|a| a.byte_len() as u64).sum());
    let mut ev = Evaluator::new(m, opts, budget);
    let args = args.iter().map(Val::Ref).collect();
    ev.run(comp, args)
        .map(Val::into_owned)
        .map_err(|f| match f {
            Fail::Eval(e) => *e,
            Fail::Msg(msg) => EvalError {
                instruction: String::new(),
                opcode: String::new(),
                computation: m.comp_name(comp).to_string(),
                message: msg,
            },
        })
}

/// [`evaluate_computation_with`] as device `dev` of a multi-device run: collectives meet the
/// other devices through `dev.comm`. On failure the run is aborted
/// ([`axle_comm::Communicator::abort`]) so that the other devices stop with an error instead of
/// waiting.
pub fn evaluate_on_device(
    m: &Module,
    comp: CompId,
    args: &[Literal],
    opts: &EvalOptions,
    dev: Device<'_>,
) -> Result<Literal, EvalError> {
    let fail = |message: String| EvalError {
        instruction: String::new(),
        opcode: String::new(),
        computation: m.name.clone(),
        message,
    };
    let r = (|| {
        let n = dev.mesh.devices();
        if n == 0 || dev.comm.num_devices() != n || dev.comm.device() >= n {
            return Err(fail(format!(
                "device {} of a run of {} does not fit a mesh of {} replicas x {} partitions",
                dev.comm.device(),
                dev.comm.num_devices(),
                dev.mesh.replicas,
                dev.mesh.partitions
            )));
        }
        let entry = comp;
        if entry.is_none() {
            return Err(fail("the module has no entry computation".into()));
        }
        let mut budget = MemoryBudget::new().map_err(|e| fail(e.to_string()))?;
        budget.force(args.iter().map(|a| a.byte_len() as u64).sum());
        let mut ev = Evaluator::new(m, opts, budget);
        ev.device = Some(dev);
        let args = args.iter().map(Val::Ref).collect();
        ev.run(entry, args)
            .map(Val::into_owned)
            .map_err(|f| match f {
                Fail::Eval(e) => *e,
                Fail::Msg(msg) => fail(msg),
            })
    })();
    match &r {
        Ok(_) => dev.comm.finish(),
        Err(e) => dev.comm.abort(&e.to_string()),
    }
    r
}

/// Evaluates instruction `id` of `m` alone on its operands' values (`operands`, one literal per
/// operand, in order), as device `dev` of a multi-device run when one is given: how a backend
/// that stages its collectives through the host (the nvptx executor) runs them, so that its
/// bits are the evaluator's (same reducer semantics, same fold in group order). Without a
/// device, collectives are errors naming the instruction, as in [`evaluate`]. Unlike
/// [`evaluate_on_device`], a failure does not abort the run: the caller ends its device's part
/// of the run ([`axle_comm::Communicator::abort`] or `finish`) itself.
pub fn evaluate_instruction<'a>(
    m: &'a Module,
    id: InstId,
    operands: &[Literal],
    opts: &EvalOptions,
    dev: Option<Device<'a>>,
) -> Result<Literal, EvalError> {
    let at = |message: String| EvalError {
        instruction: m.name(id).to_string(),
        opcode: m.opcode(id).name().to_string(),
        computation: m.comp_name(m.parent(id)).to_string(),
        message,
    };
    let mut budget = MemoryBudget::new().map_err(|e| at(e.to_string()))?;
    // The operands are the caller's memory, held while the instruction runs.
    budget.force(operands.iter().map(|a| a.byte_len() as u64).sum());
    let mut ev = Evaluator::new(m, opts, budget);
    ev.device = dev;
    let refs: Vec<&Literal> = operands.iter().collect();
    let out = ev.eval_inst(id, &refs).map_err(|f| match f {
        Fail::Eval(e) => *e,
        Fail::Msg(msg) => at(msg),
    })?;
    if !shape_matches(m, &out, m.shape(id)) {
        return Err(at(format!(
            "the result {} does not have the declared shape",
            describe(&out)
        )));
    }
    Ok(out)
}

/// Runs computation `comp` of `m` (usually its entry) on the devices of `mesh`, each on its own
/// thread with `args[d]` as device `d`'s arguments, meeting through an in-process communicator whose collectives wait at most
/// `timeout`. Returns every device's result, in device order. When a device fails, the run
/// ends on every device and the error is the first failing device's (named in the message).
pub fn evaluate_devices(
    m: &Module,
    comp: CompId,
    mesh: axle_ir::collective::DeviceMesh,
    args: &[Vec<Literal>],
    opts: &EvalOptions,
    timeout: std::time::Duration,
) -> Result<Vec<Literal>, EvalError> {
    let n = mesh.devices();
    let whole = |message: String| EvalError {
        instruction: String::new(),
        opcode: String::new(),
        computation: m.name.clone(),
        message,
    };
    if args.len() != n as usize {
        return Err(whole(format!(
            "{n} devices ({} replicas x {} partitions) need {n} argument lists, got {}",
            mesh.replicas,
            mesh.partitions,
            args.len()
        )));
    }
    use axle_comm::Communicator as _;
    axle_comm::run_device_threads(
        n,
        timeout,
        |c| {
            evaluate_on_device(
                m,
                comp,
                &args[c.device() as usize],
                opts,
                Device { comm: c, mesh },
            )
        },
        |d| whole(format!("device {d}'s evaluation panicked")),
    )
    .map_err(|(d, mut e)| {
        e.message = format!("device {d}: {}", e.message);
        e
    })
}

/// An internal failure: a message still to be attributed to the instruction being evaluated,
/// or an error already attributed (from a nested computation).
pub(crate) enum Fail {
    Msg(String),
    Eval(Box<EvalError>),
}

impl From<String> for Fail {
    fn from(s: String) -> Self {
        Fail::Msg(s)
    }
}

impl From<&str> for Fail {
    fn from(s: &str) -> Self {
        Fail::Msg(s.to_string())
    }
}

// The IR's errors about an instruction's attributes become messages attributed to the
// instruction being evaluated.
axle_ir::from_op_errors!(Fail, Fail::Msg);

pub(crate) type R<T> = Result<T, Fail>;

/// The instructions `comp`'s root depends on, operands before users.
pub(crate) fn plan_order(m: &Module, comp: CompId) -> Result<Vec<InstId>, String> {
    let root = m.root(comp);
    if root.is_none() {
        return Err(format!("computation {} has no root", m.comp_name(comp)));
    }
    axle_ir::traversal::operand_post_order(m, root)
        .map_err(|o| format!("cycle through %{}", m.name(o)))
}

/// How a computation is run: its order, operand slots and when values die.
struct Plan {
    order: Vec<InstId>,
    /// Operand slots of each instruction, flattened; `ranges[i]` indexes into it.
    operand_slots: Vec<u32>,
    ranges: Vec<(u32, u32)>,
    /// Slots whose last use is instruction `i`.
    frees: Vec<Vec<u32>>,
    root_slot: u32,
}

impl Plan {
    fn new(m: &Module, comp: CompId) -> Result<Plan, String> {
        let order = plan_order(m, comp)?;
        let slot: HashMap<InstId, u32> = order
            .iter()
            .enumerate()
            .map(|(i, &id)| (id, i as u32))
            .collect();
        let mut operand_slots = Vec::new();
        let mut ranges = Vec::with_capacity(order.len());
        let mut last_use = vec![u32::MAX; order.len()];
        for (i, &id) in order.iter().enumerate() {
            let start = operand_slots.len() as u32;
            for o in m.operands(id) {
                let s = slot[o];
                operand_slots.push(s);
                last_use[s as usize] = i as u32;
            }
            ranges.push((start, operand_slots.len() as u32));
        }
        let root_slot = slot[&m.root(comp)];
        let mut frees = vec![Vec::new(); order.len()];
        for (s, &l) in last_use.iter().enumerate() {
            if l != u32::MAX && s as u32 != root_slot {
                frees[l as usize].push(s as u32);
            }
        }
        Ok(Plan {
            order,
            operand_slots,
            ranges,
            frees,
            root_slot,
        })
    }
}

/// A value in a computation's slot: computed (owned), or borrowed from the module (constants)
/// or from the caller (arguments, and what `get-tuple-element` extracts from them).
pub(crate) enum Val<'a> {
    Own(Literal),
    Ref(&'a Literal),
}

impl Val<'_> {
    fn get(&self) -> &Literal {
        match self {
            Val::Own(l) => l,
            Val::Ref(l) => l,
        }
    }

    fn into_owned(self) -> Literal {
        match self {
            Val::Own(l) => l,
            Val::Ref(l) => l.clone(),
        }
    }
}

/// A computation applied per element: a compiled scalar program, or the general evaluator.
pub(crate) struct Callable {
    prog: Option<Rc<ScalarProg>>,
    comp: CompId,
    regs: Vec<Reg>,
    /// Element types of the parameters.
    pub in_tys: Vec<ElementType>,
}

impl Callable {
    /// The comparator's key split, if it has one (see [`scalar::KeySplit`]).
    pub fn key_split(&self) -> Option<scalar::KeySplit> {
        self.prog.as_ref().and_then(|p| p.key_split())
    }

    /// The recognized simple form of the computation.
    pub fn fast(&self) -> scalar::Fast {
        self.prog
            .as_ref()
            .map(|p| p.fast)
            .unwrap_or(scalar::Fast::None)
    }
}

/// The evaluator state: the module and caches of plans and scalar programs.
pub(crate) struct Evaluator<'m> {
    m: &'m Module,
    /// [`EvalOptions::flush_denormals`].
    pub ftz: bool,
    plans: HashMap<CompId, Rc<Plan>>,
    progs: HashMap<CompId, Option<Rc<ScalarProg>>>,
    depth: usize,
    /// The bytes of the values computed and still live, under the process's memory ceiling:
    /// every instruction's result is reserved before it is computed.
    budget: MemoryBudget,
    /// The device this evaluation runs as, in a multi-device run.
    device: Option<Device<'m>>,
    /// The computations whose running may have an effect (rng, collectives, I/O), computed
    /// when the first `while` runs: a loop without effects that leaves its state unchanged
    /// never ends.
    effectful: Option<EntitySet<CompId>>,
}

/// The bytes a value of shape `s` holds (array leaves), or `None` for a shape no backend runs
/// (an unbounded dynamic dimension) or one too large to address.
fn value_bytes(m: &Module, s: &Shape) -> Option<u64> {
    match s {
        Shape::Array(a) => a.byte_size(),
        Shape::Tuple(ids) => ids.iter().try_fold(0u64, |acc, &e| {
            acc.checked_add(value_bytes(m, m.shape_of(e))?)
        }),
        Shape::Token | Shape::Opaque => Some(0),
    }
}

fn arr(l: &Literal) -> R<&ArrayLiteral> {
    l.as_array()
        .ok_or_else(|| Fail::Msg("expected an array operand, found a tuple".into()))
}

fn shape_matches(m: &Module, lit: &Literal, s: &Shape) -> bool {
    match (lit, s) {
        (Literal::Array(a), Shape::Array(sa)) => a.shape.ty == sa.ty && a.shape.dims == sa.dims,
        (Literal::Tuple(v), Shape::Tuple(ids)) => {
            v.len() == ids.len()
                && v.iter()
                    .zip(ids.iter())
                    .all(|(l, &id)| shape_matches(m, l, m.shape_of(id)))
        }
        (Literal::Tuple(v), Shape::Token) => v.is_empty(),
        _ => false,
    }
}

fn describe(l: &Literal) -> String {
    match l {
        Literal::Array(a) => format!(
            "{}[{}]",
            a.shape.ty.name(),
            a.shape
                .dims
                .iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(",")
        ),
        Literal::Tuple(v) => format!(
            "({})",
            v.iter().map(describe).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The operand in `slot`: moved out when this instruction is its last use (and it is used
/// once here), else borrowed or copied.
fn take_or_share<'a>(
    vals: &mut [Option<Val<'a>>],
    slot: u32,
    slots: &[u32],
    frees: &[u32],
) -> Val<'a> {
    let s = slot as usize;
    if frees.contains(&slot) && slots.iter().filter(|&&x| x == slot).count() == 1 {
        return vals[s].take().expect("operand evaluated");
    }
    match vals[s].as_ref().expect("operand evaluated") {
        Val::Ref(r) => Val::Ref(r),
        Val::Own(l) => Val::Own(l.clone()),
    }
}

/// Ops that only pass values on (tuples, `get-tuple-element`, `copy`, `reshape`, row-major
/// `bitcast`, barriers): evaluated by moving or borrowing their operands instead of copying
/// them. `None` for every other op.
fn forward<'a>(
    m: &Module,
    id: InstId,
    op: Opcode,
    slots: &[u32],
    frees: &[u32],
    vals: &mut [Option<Val<'a>>],
) -> R<Option<Val<'a>>> {
    use Opcode::*;
    macro_rules! take {
        ($k:expr) => {
            take_or_share(vals, slots[$k], slots, frees)
        };
    }
    Ok(Some(match op {
        Tuple => Val::Own(Literal::Tuple(
            (0..slots.len()).map(|k| take!(k).into_owned()).collect(),
        )),
        OptBarrier if slots.len() != 1 => Val::Own(Literal::Tuple(
            (0..slots.len()).map(|k| take!(k).into_owned()).collect(),
        )),
        Copy | OptBarrier | Domain if slots.len() == 1 => take!(0),
        AddDependency if !slots.is_empty() => take!(0),
        GetTupleElement if slots.len() == 1 => {
            let k = m
                .int_attr(id, &AttrKey::Index)
                .ok_or("missing attribute index")? as usize;
            match take!(0) {
                Val::Own(Literal::Tuple(mut v)) if k < v.len() => Val::Own(v.swap_remove(k)),
                Val::Ref(Literal::Tuple(v)) if k < v.len() => Val::Ref(&v[k]),
                Val::Own(Literal::Tuple(_)) | Val::Ref(Literal::Tuple(_)) => {
                    return Err(format!("tuple has no element {k}").into())
                }
                _ => return Err("operand is not a tuple".into()),
            }
        }
        Reshape | Bitcast if slots.len() == 1 => {
            let Some(shape) = m.array_shape(id) else {
                return Ok(None);
            };
            let Some(Val::Own(Literal::Array(a)) | Val::Ref(Literal::Array(a))) =
                vals[slots[0] as usize].as_ref()
            else {
                return Ok(None);
            };
            // Only a bitcast between row-major layouts is a plain reshape.
            if op == Bitcast {
                let row_major = |i: InstId, rank: usize| {
                    so::minor_to_major(m.layout_of(m.layout_id(i)), rank)
                        .is_ok_and(|v| v.iter().rev().copied().eq(0..rank as i64))
                };
                if !row_major(id, shape.rank()) || !row_major(m.operands(id)[0], a.shape.rank()) {
                    return Ok(None);
                }
            }
            if a.data.len() != so::numel(&shape.dims) * shape.ty.byte_size()
                || (op == Reshape && a.ty() != shape.ty)
            {
                return Ok(None);
            }
            let mut a = match take!(0) {
                Val::Own(Literal::Array(a)) => a,
                Val::Ref(Literal::Array(a)) => a.clone(),
                _ => return Ok(None),
            };
            a.shape = shape.clone();
            Val::Own(Literal::Array(a))
        }
        _ => return Ok(None),
    }))
}

/// Whether `op` can take `n` operands (the verifier's business, checked again so that a
/// malformed module is an error rather than a panic).
fn arity_ok(op: Opcode, n: usize) -> bool {
    use Opcode::*;
    match op {
        Iota | PartitionId | ReplicaId => n == 0,
        AfterAll => true,
        Select | Clamp | SelectAndScatter => n == 3,
        Dot | Convolution | Gather | Pad | TriangularSolve | Complex | Compare => n == 2,
        BatchNormInference | BatchNormGrad => n == 5,
        BatchNormTraining => n == 3,
        Broadcast | Reshape | Transpose | Reverse | Slice | Convert | BitcastConvert
        | ReducePrecision | Bitcast | Cholesky | Fft | TopK | GetTupleElement | RngBitGenerator
        | GetDimensionSize | While | Copy => n == 1,
        DynamicSlice => n >= 1,
        DynamicUpdateSlice | AddDependency | Scatter => n >= 2,
        Conditional | Concatenate | Sort | Map => n >= 1,
        Reduce | ReduceWindow => n >= 2 && n.is_multiple_of(2),
        _ if op.is_elementwise_binary() => n == 2,
        _ if op.is_elementwise_unary() => n == 1,
        _ => true,
    }
}

/// The ops `collective` evaluates: on one device they need [`evaluate_devices`] with a
/// one-device mesh (what XLA runs with `replica_count=1`).
pub fn is_collective(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        ReplicaId
            | PartitionId
            | AllReduce
            | AllReduceStart
            | AllReduceDone
            | AllGather
            | AllGatherStart
            | AllGatherDone
            | ReduceScatter
            | AllToAll
            | RaggedAllToAll
            | CollectivePermute
            | CollectivePermuteStart
            | CollectivePermuteDone
            | CollectiveBroadcast
            | AsyncStart
            | AsyncUpdate
            | AsyncDone
    )
}

/// Attribute keys that carry no semantics the evaluator must honor.
fn benign_other_attr(name: &str) -> bool {
    matches!(
        name,
        "operand_precision"
            | "precision_config"
            | "origin"
            | "statistics_viz"
            | "output_to_operand_aliasing"
            | "custom_call_has_side_effect"
            | "api_version"
            | "operand_layout_constraints"
            | "schedule"
            | "custom_call_schedule"
            | "result_accuracy"
            | "channel_id"
            | "is_host_transfer"
            | "recursive"
            // A domain's sharding metadata, and a composite call's marker (the call runs its
            // decomposition, `to_apply`): neither changes a value.
            | "domain"
            | "is_composite"
    )
}

impl<'m> Evaluator<'m> {
    pub(crate) fn new(m: &'m Module, opts: &EvalOptions, budget: MemoryBudget) -> Self {
        Evaluator {
            m,
            ftz: opts.flush_denormals,
            plans: HashMap::new(),
            progs: HashMap::new(),
            depth: 0,
            budget,
            device: None,
            effectful: None,
        }
    }

    /// The bytes `id`'s result will hold, reserved in the budget before it is computed: an
    /// unbounded dynamic dimension or a result over the memory ceiling is an error naming the
    /// instruction, before anything is allocated.
    fn reserve_result(&mut self, id: InstId) -> R<u64> {
        let m = self.m;
        let Some(bytes) = value_bytes(m, m.shape(id)) else {
            let shape = axle_ir::OwnedShape::from_id(m, m.shape_id(id))
                .map(|s| s.to_string())
                .unwrap_or_default();
            return Err(format!(
                "the result shape {shape} has no fixed size (an unbounded dynamic dimension, \
                 which no backend runs)"
            )
            .into());
        };
        self.budget
            .reserve(bytes, || format!("%{} ({})", m.name(id), m.opcode(id)))
            .map_err(|e| Fail::Msg(e.to_string()))?;
        Ok(bytes)
    }

    fn plan(&mut self, comp: CompId) -> R<Rc<Plan>> {
        if let Some(p) = self.plans.get(&comp) {
            return Ok(p.clone());
        }
        let p = Rc::new(Plan::new(self.m, comp)?);
        self.plans.insert(comp, p.clone());
        Ok(p)
    }

    fn attribute(&self, id: InstId, f: Fail) -> Fail {
        match f {
            Fail::Eval(e) => Fail::Eval(e),
            Fail::Msg(message) => {
                let m = self.m;
                Fail::Eval(Box::new(EvalError {
                    instruction: m.name(id).to_string(),
                    opcode: m.opcode(id).name().to_string(),
                    computation: m.comp_name(m.parent(id)).to_string(),
                    message,
                }))
            }
        }
    }

    /// Runs computation `comp` on `args`.
    pub(crate) fn run<'a>(&mut self, comp: CompId, args: Vec<Val<'a>>) -> R<Val<'a>>
    where
        'm: 'a,
    {
        let m = self.m;
        self.depth += 1;
        if self.depth > 256 {
            return Err("computations nest more than 256 deep".into());
        }
        let plan = self.plan(comp)?;
        let params = m.params(comp);
        if args.len() != params.len() {
            return Err(format!(
                "computation {} takes {} arguments, got {}",
                m.comp_name(comp),
                params.len(),
                args.len()
            )
            .into());
        }
        let mut args: Vec<Option<Val<'a>>> = args.into_iter().map(Some).collect();
        let mut vals: Vec<Option<Val<'a>>> = Vec::with_capacity(plan.order.len());
        vals.resize_with(plan.order.len(), || None);
        // Bytes each slot holds in the budget (computed values; borrowed constants and
        // arguments are the caller's memory).
        let mut held: Vec<u64> = vec![0; plan.order.len()];
        let result = self.run_plan(comp, &plan, &mut args, &mut vals, &mut held);
        self.budget.release(held.iter().sum());
        result?;
        self.depth -= 1;
        Ok(vals[plan.root_slot as usize]
            .take()
            .expect("root evaluated"))
    }

    /// Evaluates `plan`'s instructions into `vals`, keeping `held` (the budget's bytes per
    /// slot) up to date.
    fn run_plan<'a>(
        &mut self,
        comp: CompId,
        plan: &Plan,
        args: &mut [Option<Val<'a>>],
        vals: &mut [Option<Val<'a>>],
        held: &mut [u64],
    ) -> R<()>
    where
        'm: 'a,
    {
        let m = self.m;
        let _ = comp;
        for (pos, &id) in plan.order.iter().enumerate() {
            let v = match m.opcode(id) {
                Opcode::Parameter => {
                    let k = m.parameter_number(id).unwrap_or(-1);
                    let lit = usize::try_from(k)
                        .ok()
                        .and_then(|k| args.get_mut(k))
                        .and_then(|a| a.take())
                        .ok_or_else(|| {
                            self.attribute(id, format!("no argument for parameter {k}").into())
                        })?;
                    if !shape_matches(m, lit.get(), m.shape(id)) {
                        return Err(self.attribute(
                            id,
                            format!(
                                "argument {k} is {}, which does not match the parameter's shape",
                                describe(lit.get())
                            )
                            .into(),
                        ));
                    }
                    lit
                }
                Opcode::Constant => match m.literal(id) {
                    Some(l) => Val::Ref(l),
                    None => {
                        return Err(self
                            .attribute(id, "the constant's value was elided from the text".into()))
                    }
                },
                op => {
                    let (s, e) = plan.ranges[pos];
                    let slots = &plan.operand_slots[s as usize..e as usize];
                    self.check_attrs(id).map_err(|f| self.attribute(id, f))?;
                    let forwarded = forward(m, id, op, slots, &plan.frees[pos], vals)
                        .map_err(|f| self.attribute(id, f))?;
                    let r = match forwarded {
                        Some(v) => {
                            // Moved or shared data: counted as held from now on (released
                            // with the operands it came from just below), never refused.
                            if let Val::Own(l) = &v {
                                let bytes = l.byte_len() as u64;
                                self.budget.force(bytes);
                                held[pos] = bytes;
                            }
                            v
                        }
                        None => {
                            held[pos] =
                                self.reserve_result(id).map_err(|f| self.attribute(id, f))?;
                            let ops: Vec<&Literal> = slots
                                .iter()
                                .map(|&s| {
                                    vals[s as usize].as_ref().expect("operand evaluated").get()
                                })
                                .collect();
                            Val::Own(
                                self.eval_inst(id, &ops)
                                    .map_err(|f| self.attribute(id, f))?,
                            )
                        }
                    };
                    // A result without the declared shape is a bug or a malformed module;
                    // either way, never hand it on.
                    if !shape_matches(m, r.get(), m.shape(id)) {
                        let msg = format!(
                            "evaluated to {}, which does not match the declared shape",
                            describe(r.get())
                        );
                        return Err(self.attribute(id, msg.into()));
                    }
                    r
                }
            };
            vals[pos] = Some(v);
            for &s in &plan.frees[pos] {
                vals[s as usize] = None;
                self.budget.release(std::mem::take(&mut held[s as usize]));
            }
        }
        Ok(())
    }

    /// The callable for a per-element computation.
    pub(crate) fn callable(&mut self, comp: CompId) -> R<Callable> {
        let m = self.m;
        let prog = match self.progs.get(&comp) {
            Some(p) => p.clone(),
            None => {
                let p = ScalarProg::compile(m, comp).map(Rc::new);
                self.progs.insert(comp, p.clone());
                p
            }
        };
        if let Some(p) = prog {
            return Ok(Callable {
                regs: p.regs(),
                in_tys: p.param_tys.clone(),
                prog: Some(p),
                comp,
            });
        }
        let mut in_tys = Vec::new();
        for &p in m.params(comp) {
            match m.shape(p) {
                Shape::Array(a) if a.num_elements() == 1 => in_tys.push(a.ty),
                _ => {
                    return Err(format!(
                        "computation {} applied per element must take scalars",
                        m.comp_name(comp)
                    )
                    .into())
                }
            }
        }
        let root = m.root(comp);
        let mut out_tys: Vec<ElementType> = Vec::new();
        fn leaves(m: &Module, s: &Shape, out: &mut Vec<ElementType>) -> bool {
            match s {
                Shape::Array(a) if a.num_elements() == 1 => {
                    out.push(a.ty);
                    true
                }
                Shape::Tuple(ids) => ids.iter().all(|&i| leaves(m, m.shape_of(i), out)),
                _ => false,
            }
        }
        if !leaves(m, m.shape(root), &mut out_tys) {
            return Err(format!(
                "computation {} applied per element must return scalars",
                m.comp_name(comp)
            )
            .into());
        }
        Ok(Callable {
            prog: None,
            comp,
            regs: Vec::new(),
            in_tys,
        })
    }

    /// Applies `c` to one element per parameter; writes one element per result leaf to `out`.
    pub(crate) fn call(&mut self, c: &mut Callable, args: &[&[u8]], out: &mut [Reg]) -> R<()> {
        if let Some(p) = &c.prog {
            for (k, a) in args.iter().enumerate() {
                c.regs[p.params[k] as usize][..a.len()].copy_from_slice(a);
            }
            p.run(&mut c.regs, self.ftz)?;
            for (o, &r) in out.iter_mut().zip(&p.outputs) {
                *o = c.regs[r as usize];
            }
            return Ok(());
        }
        let lits: Vec<Literal> = args
            .iter()
            .zip(&c.in_tys)
            .map(|(a, &ty)| Literal::Array(so::array(ty, &[], a.to_vec())))
            .collect();
        // Parameters may be declared with unit dimensions; reshape to the declared shape.
        let m = self.m;
        let lits: Vec<Literal> = lits
            .into_iter()
            .zip(m.params(c.comp))
            .map(|(l, &p)| match (l, m.shape(p)) {
                (Literal::Array(a), Shape::Array(s)) => {
                    Literal::Array(so::array(a.ty(), &s.dims, a.data))
                }
                (l, _) => l,
            })
            .collect();
        let r = self.run(c.comp, lits.into_iter().map(Val::Own).collect())?;
        let r = r.get();
        let mut k = 0;
        fn put(l: &Literal, out: &mut [Reg], k: &mut usize) {
            match l {
                Literal::Array(a) => {
                    out[*k][..a.data.len()].copy_from_slice(&a.data);
                    *k += 1;
                }
                Literal::Tuple(v) => v.iter().for_each(|x| put(x, out, k)),
            }
        }
        put(r, out, &mut k);
        Ok(())
    }

    /// Runs the compiled program of `c` on `args` and returns register `reg` (for key
    /// extraction; `c` must have a program).
    pub(crate) fn call_reg(&mut self, c: &mut Callable, args: &[&[u8]], reg: u32) -> R<Reg> {
        let p = c.prog.as_ref().ok_or("no scalar program")?;
        for (k, a) in args.iter().enumerate() {
            c.regs[p.params[k] as usize][..a.len()].copy_from_slice(a);
        }
        p.run(&mut c.regs, self.ftz)?;
        Ok(c.regs[reg as usize])
    }

    fn out_array(&self, id: InstId) -> R<&'m ArrayShape> {
        self.m
            .array_shape(id)
            .ok_or_else(|| Fail::Msg("expected an array result shape".into()))
    }

    fn ints(&self, id: InstId, key: AttrKey) -> R<&'m [i64]> {
        self.m
            .ints_attr(id, &key)
            .ok_or_else(|| format!("missing attribute {}", key.name()).into())
    }

    fn int(&self, id: InstId, key: AttrKey) -> R<i64> {
        self.m
            .int_attr(id, &key)
            .ok_or_else(|| format!("missing attribute {}", key.name()).into())
    }

    fn comp(&self, id: InstId, key: AttrKey) -> R<CompId> {
        self.m
            .comp_attr(id, &key)
            .ok_or_else(|| format!("missing attribute {}", key.name()).into())
    }

    fn m2m(&self, id: InstId, rank: usize) -> R<Vec<i64>> {
        Ok(so::minor_to_major(
            self.m.layout_of(self.m.layout_id(id)),
            rank,
        )?)
    }

    fn check_attrs(&self, id: InstId) -> R<()> {
        for (k, v) in self.m.attrs(id) {
            match k {
                AttrKey::Other(name)
                    if matches!(name.as_ref(), "epsilon" | "feature_index")
                        && matches!(
                            self.m.opcode(id),
                            Opcode::BatchNormInference
                                | Opcode::BatchNormTraining
                                | Opcode::BatchNormGrad
                        ) => {}
                AttrKey::Other(name) if !benign_other_attr(name) => {
                    return Err(format!("unsupported attribute {name}").into());
                }
                AttrKey::Algorithm
                    if matches!(self.m.opcode(id), Opcode::Dot | Opcode::Convolution) =>
                {
                    let ok = matches!(v, AttrValue::Ident(s) if axle_ir::shape_inference::is_dot_algorithm(s));
                    if !ok {
                        return Err(format!("unknown dot algorithm {v:?}").into());
                    }
                }
                _ => {}
            }
        }
        Ok(())
    }

    /// Evaluates one instruction given its operands' values.
    fn eval_inst(&mut self, id: InstId, ops: &[&Literal]) -> R<Literal> {
        use Opcode::*;
        let m = self.m;
        let op = m.opcode(id);
        if !arity_ok(op, ops.len()) {
            return Err(format!("{} does not take {} operands", op.name(), ops.len()).into());
        }
        if is_collective(op) {
            if let Some(l) = self.eval_collective(id, ops)? {
                return Ok(l);
            }
        }
        let out = match op {
            Copy | OptBarrier | Domain => {
                if op == Copy {
                    return Ok(ops[0].clone());
                }
                if ops.len() == 1 {
                    return Ok(ops[0].clone());
                }
                return Ok(Literal::Tuple(ops.iter().map(|&l| l.clone()).collect()));
            }
            AddDependency => return Ok(ops[0].clone()),
            AfterAll => return Ok(Literal::Tuple(Vec::new())),
            Tuple => return Ok(Literal::Tuple(ops.iter().map(|&l| l.clone()).collect())),
            GetTupleElement => {
                let k = self.int(id, AttrKey::Index)? as usize;
                return match ops[0] {
                    Literal::Tuple(v) => v
                        .get(k)
                        .cloned()
                        .ok_or_else(|| format!("tuple has no element {k}").into()),
                    Literal::Array(_) => Err("operand is not a tuple".into()),
                };
            }
            Call | Fusion => {
                let key = if op == Call {
                    AttrKey::ToApply
                } else {
                    AttrKey::Calls
                };
                let c = self.comp(id, key)?;
                let args = ops.iter().map(|&l| Val::Ref(l)).collect();
                return Ok(self.run(c, args)?.into_owned());
            }
            While => return self.eval_while(id, ops[0]),
            Conditional => return self.eval_conditional(id, ops),
            Sort => return sort::sort(self, id, ops),
            Reduce => return reduce::reduce(self, id, ops),
            ReduceWindow => return reduce::reduce_window(self, id, ops),
            Scatter => return gather::scatter(self, id, ops),
            TopK => return sort::topk(self, id, arr(ops[0])?),
            CustomCall => return self.eval_custom_call(id, ops),
            Fft => {
                let a = arr(ops[0])?;
                return with_float_mode(self.ftz, || linalg::fft(self, id, a));
            }
            RngBitGenerator => return rng::rng_bit_generator(self, id, arr(ops[0])?),
            Rng => {
                let (a, b) = (arr(ops[0])?, arr(ops[1])?);
                return Ok(Literal::Array(crate::rng_op::evaluate(self.m, id, a, b)?));
            }
            BatchNormInference | BatchNormTraining | BatchNormGrad => {
                return batchnorm::batch_norm(self, id, ops)
            }
            _ => self.eval_array_op(id, op, ops)?,
        };
        Ok(Literal::Array(out))
    }

    /// Ops whose result is one array.
    fn eval_array_op(&mut self, id: InstId, op: Opcode, ops: &[&Literal]) -> R<ArrayLiteral> {
        use Opcode::*;
        let m = self.m;
        let shape = self.out_array(id)?;
        let (ty, dims) = (shape.ty, &shape.dims[..]);
        let n = so::numel(dims);
        let a0 = || arr(ops[0]);
        // Elementwise results have their operand's element count.
        let same_n = |a: &ArrayLiteral| -> R<()> {
            if a.len() == n {
                Ok(())
            } else {
                Err("the operand's dimensions do not match the result's".into())
            }
        };
        Ok(match op {
            Convert => {
                let a = a0()?;
                same_n(a)?;
                let mut data = vec![0u8; n * ty.byte_size()];
                elementwise::convert(a.ty(), ty, &a.data, &mut data, self.ftz)?;
                so::array(ty, dims, data)
            }
            BitcastConvert => so::bitcast_convert(a0()?, ty, dims)?,
            ReducePrecision => {
                let a = a0()?;
                same_n(a)?;
                let eb = self.int(id, AttrKey::ExponentBits)?;
                let mb = self.int(id, AttrKey::MantissaBits)?;
                if eb < 1 || mb < 0 {
                    return Err("reduce-precision needs exponent_bits >= 1".into());
                }
                let mut data = vec![0u8; a.data.len()];
                elementwise::reduce_precision(ty, eb as u32, mb as u32, &a.data, &mut data)?;
                so::array(ty, dims, data)
            }
            _ if op.is_elementwise_unary() => {
                let a = a0()?;
                same_n(a)?;
                let mut data = vec![0u8; n * ty.byte_size()];
                elementwise::unary(op, a.ty(), ty, &a.data, &mut data, self.ftz)?;
                so::array(ty, dims, data)
            }
            Compare => {
                let (a, b) = self.same_size(ops)?;
                same_n(&a)?;
                let dir = match m.attr(id, &AttrKey::Direction) {
                    Some(AttrValue::Direction(d)) => *d,
                    _ => return Err("compare needs a direction".into()),
                };
                let cty = m.comparison_type(id, a.ty());
                let mut data = vec![0u8; n];
                elementwise::compare(dir, cty, a.ty(), &a.data, &b.data, &mut data, self.ftz)?;
                so::array(ty, dims, data)
            }
            StochasticConvert => return Err("stochastic-convert is not supported".into()),
            _ if op.is_elementwise_binary() => {
                let (a, b) = self.same_size(ops)?;
                same_n(&a)?;
                let mut data = vec![0u8; n * ty.byte_size()];
                elementwise::binary(op, a.ty(), &a.data, &b.data, &mut data, self.ftz)?;
                so::array(ty, dims, data)
            }
            Select => {
                let p = a0()?;
                let (a, b) = (arr(ops[1])?, arr(ops[2])?);
                let w = ty.byte_size();
                let a = self.expand(a, dims)?;
                let b = self.expand(b, dims)?;
                if p.len() != 1 && p.len() != n {
                    return Err("select predicate has the wrong number of elements".into());
                }
                let mut data = vec![0u8; n * w];
                elementwise::select(&p.data, &a.data, &b.data, w, &mut data);
                so::array(ty, dims, data)
            }
            Clamp => {
                let (lo, x, hi) = (a0()?, arr(ops[1])?, arr(ops[2])?);
                same_n(x)?;
                for b in [lo, hi] {
                    if b.len() != 1 && b.len() != x.len() {
                        return Err("clamp bounds must be scalars or match the operand".into());
                    }
                }
                let mut data = vec![0u8; n * ty.byte_size()];
                elementwise::clamp(ty, &lo.data, &x.data, &hi.data, &mut data, self.ftz)?;
                so::array(ty, dims, data)
            }
            Broadcast => {
                let a = a0()?;
                let map = self.ints(id, AttrKey::Dimensions)?;
                let fits = map.len() == a.shape.rank()
                    && map.iter().zip(a.shape.dims.iter()).all(|(&d, &sz)| {
                        usize::try_from(d)
                            .is_ok_and(|d| d < dims.len() && (sz == dims[d] || sz == 1))
                    });
                if !fits {
                    return Err("broadcast dimensions do not fit the operand and result".into());
                }
                so::broadcast(a, dims, map)
            }
            Reshape => {
                let a = a0()?;
                if a.len() != n {
                    return Err("reshape changes the number of elements".into());
                }
                so::array(ty, dims, a.data.clone())
            }
            Transpose => {
                let (a, perm) = (a0()?, self.ints(id, AttrKey::Dimensions)?);
                let mut seen = vec![false; a.shape.rank()];
                for &p in perm {
                    match usize::try_from(p).ok().and_then(|p| seen.get_mut(p)) {
                        Some(s) if !*s => *s = true,
                        _ => return Err("transpose dimensions are not a permutation".into()),
                    }
                }
                if perm.len() != a.shape.rank() {
                    return Err("transpose dimensions are not a permutation".into());
                }
                so::transpose(a, perm)
            }
            Reverse => {
                let (a, rev) = (a0()?, self.ints(id, AttrKey::Dimensions)?);
                if rev.iter().any(|&d| d < 0 || d as usize >= a.shape.rank()) {
                    return Err("reverse dimension out of range".into());
                }
                so::reverse(a, rev)
            }
            Slice => match m.attr(id, &AttrKey::Slice) {
                Some(AttrValue::Slice(b)) => {
                    let a = a0()?;
                    let ok = b.len() == a.shape.rank()
                        && b.iter()
                            .zip(a.shape.dims.iter())
                            .all(|(&[lo, hi, st], &d)| 0 <= lo && lo <= hi && hi <= d && st >= 1);
                    if !ok {
                        return Err("slice bounds do not fit the operand".into());
                    }
                    so::slice(a, b)
                }
                _ => return Err("slice needs slice bounds".into()),
            },
            DynamicSlice => {
                let a = a0()?;
                let sizes = self.ints(id, AttrKey::DynamicSliceSizes)?;
                if sizes.len() != a.shape.rank()
                    || sizes
                        .iter()
                        .zip(a.shape.dims.iter())
                        .any(|(&z, &d)| z < 0 || z > d)
                {
                    return Err("dynamic_slice_sizes do not fit the operand".into());
                }
                let starts = self.starts(&ops[1..], a.shape.rank())?;
                let starts = so::clamp_starts(&starts, &a.shape.dims, sizes);
                so::dynamic_slice(a, &starts, sizes)
            }
            DynamicUpdateSlice => {
                let a = a0()?;
                let u = arr(ops[1])?;
                let fits = u.shape.rank() == a.shape.rank()
                    && u.ty() == a.ty()
                    && u.shape
                        .dims
                        .iter()
                        .zip(a.shape.dims.iter())
                        .all(|(&x, &d)| x <= d);
                if !fits {
                    return Err("the update does not fit the operand".into());
                }
                let starts = self.starts(&ops[2..], a.shape.rank())?;
                let starts = so::clamp_starts(&starts, &a.shape.dims, &u.shape.dims);
                so::dynamic_update_slice(a, u, &starts)
            }
            Concatenate => {
                let d = self.ints(id, AttrKey::Dimensions)?;
                let d = *d.first().ok_or("missing dimension")? as usize;
                let arrs = ops.iter().map(|&l| arr(l)).collect::<R<Vec<_>>>()?;
                let fits = d < dims.len()
                    && arrs.iter().all(|a| {
                        a.ty() == ty
                            && a.shape.rank() == dims.len()
                            && (0..dims.len()).all(|k| k == d || a.shape.dims[k] == dims[k])
                    })
                    && arrs.iter().map(|a| a.shape.dims[d]).sum::<i64>() == dims[d];
                if !fits {
                    return Err("concatenate operands do not fit the result".into());
                }
                so::concatenate(&arrs, d, dims)
            }
            Pad => {
                let a = a0()?;
                let v = arr(ops[1])?;
                match m.attr(id, &AttrKey::Padding) {
                    Some(AttrValue::Padding(cfg))
                        if cfg.len() == a.shape.rank()
                            && cfg.iter().all(|c| c[2] >= 0)
                            && v.len() == 1
                            && v.ty() == a.ty() =>
                    {
                        so::pad(a, &v.data, cfg)
                    }
                    Some(AttrValue::Padding(_)) => {
                        return Err("the padding does not fit the operand".into())
                    }
                    _ => return Err("pad needs a padding configuration".into()),
                }
            }
            Iota => {
                let d = self.int(id, AttrKey::IotaDimension)?;
                if d < 0 || d as usize >= dims.len() {
                    return Err("iota_dimension out of range".into());
                }
                so::iota(ty, dims, d as usize)?
            }
            Bitcast => {
                let a = a0()?;
                let m_in = self.m2m(m.operands(id)[0], a.shape.rank())?;
                let m_out = self.m2m(id, dims.len())?;
                so::bitcast(a, &m_in, ty, dims, &m_out)?
            }
            Map => self.eval_map(id, ops, ty, dims)?,
            Dot => dot::dot(self, id, a0()?, arr(ops[1])?, shape)?,
            Convolution => dot::convolution(self, id, a0()?, arr(ops[1])?, shape)?,
            Gather => gather::gather(self, id, a0()?, arr(ops[1])?, shape)?,
            SelectAndScatter => reduce::select_and_scatter(self, id, ops, shape)?,
            Cholesky => {
                let a = a0()?;
                linalg::cholesky(self, id, a)?
            }
            TriangularSolve => {
                let (a, b) = (a0()?, arr(ops[1])?);
                linalg::triangular_solve(self, id, a, b)?
            }
            GetDimensionSize => {
                let a = a0()?;
                let d = self.int(id, AttrKey::Dimensions).or_else(|_| {
                    self.ints(id, AttrKey::Dimensions)
                        .and_then(|v| v.first().copied().ok_or("missing dimension".into()))
                })?;
                let v = *a
                    .shape
                    .dims
                    .get(d as usize)
                    .ok_or("dimension out of range")?;
                so::array(ty, &[], (v as i32).to_le_bytes().to_vec())
            }
            PartitionId | ReplicaId => so::array(ty, &[], vec![0u8; ty.byte_size()]),
            _ => {
                return Err(
                    format!("the evaluator does not support {} instructions", op.name()).into(),
                )
            }
        })
    }

    /// Operands of a binary elementwise op, broadcasting a scalar operand if needed.
    fn same_size<'a>(
        &self,
        ops: &[&'a Literal],
    ) -> R<(Cow<'a, ArrayLiteral>, Cow<'a, ArrayLiteral>)> {
        let (a, b) = (arr(ops[0])?, arr(ops[1])?);
        if a.shape.dims == b.shape.dims {
            return Ok((Cow::Borrowed(a), Cow::Borrowed(b)));
        }
        if a.len() == 1 {
            let a = so::array(a.ty(), &[], a.data.clone());
            return Ok((
                Cow::Owned(so::broadcast(&a, &b.shape.dims, &[])),
                Cow::Borrowed(b),
            ));
        }
        if b.len() == 1 {
            let b = so::array(b.ty(), &[], b.data.clone());
            return Ok((
                Cow::Borrowed(a),
                Cow::Owned(so::broadcast(&b, &a.shape.dims, &[])),
            ));
        }
        Err("operands of an elementwise op must have the same dimensions".into())
    }

    /// `a` itself if it has `dims`, else `a` (a scalar) broadcast to `dims`.
    fn expand<'a>(&self, a: &'a ArrayLiteral, dims: &[i64]) -> R<Cow<'a, ArrayLiteral>> {
        if a.shape.dims[..] == *dims {
            Ok(Cow::Borrowed(a))
        } else if a.len() == 1 {
            let a = so::array(a.ty(), &[], a.data.clone());
            Ok(Cow::Owned(so::broadcast(&a, dims, &[])))
        } else {
            Err("operand dimensions do not match the result".into())
        }
    }

    /// Start indices of dynamic-slice / dynamic-update-slice: scalars, or one vector.
    fn starts(&self, ops: &[&Literal], rank: usize) -> R<Vec<i64>> {
        let mut starts = Vec::with_capacity(rank);
        for &o in ops {
            let a = arr(o)?;
            starts.extend(so::to_i64s(a)?);
        }
        if starts.len() != rank {
            return Err(format!("expected {rank} start indices, found {}", starts.len()).into());
        }
        Ok(starts)
    }

    fn eval_map(
        &mut self,
        id: InstId,
        ops: &[&Literal],
        ty: ElementType,
        dims: &[i64],
    ) -> R<ArrayLiteral> {
        let c = self.comp(id, AttrKey::ToApply)?;
        let mut callable = self.callable(c)?;
        let arrs = ops.iter().map(|&l| arr(l)).collect::<R<Vec<_>>>()?;
        let n = so::numel(dims);
        let w = ty.byte_size();
        let mut data = vec![0u8; n * w];
        let mut out = [[0u8; 16]; 1];
        for i in 0..n {
            let args: Vec<&[u8]> = arrs
                .iter()
                .map(|a| {
                    let aw = a.ty().byte_size();
                    &a.data[i * aw..(i + 1) * aw]
                })
                .collect();
            self.call(&mut callable, &args, &mut out)?;
            data[i * w..(i + 1) * w].copy_from_slice(&out[0][..w]);
        }
        Ok(so::array(ty, dims, data))
    }

    fn eval_while(&mut self, id: InstId, init: &Literal) -> R<Literal> {
        let cond = self.comp(id, AttrKey::Condition)?;
        let body = self.comp(id, AttrKey::Body)?;
        // Condition and body without effects run the same on the same state: an iteration
        // that leaves the state unchanged (bit for bit) while the condition holds repeats
        // forever, which is an error rather than a hang.
        let m = self.m;
        let effectful = self
            .effectful
            .get_or_insert_with(|| axle_ir::passes::effectful_computations(m));
        let pure = !effectful.contains(cond) && !effectful.contains(body);
        let mut state = Val::Ref(init);
        loop {
            let p = self.run(cond, vec![Val::Ref(state.get())])?;
            let go = match p.get() {
                Literal::Array(a) if a.ty().is_pred() && a.len() == 1 => a.data[0] != 0,
                _ => return Err("while condition must return a pred scalar".into()),
            };
            if !go {
                return Ok(state.into_owned());
            }
            let next = self.run(body, vec![Val::Ref(state.get())])?.into_owned();
            if pure && next == *state.get() {
                return Err(Fail::Msg(
                    "the while loop never ends: an iteration left its state unchanged while \
                     its condition held (XLA removes such a loop only where nothing reads its \
                     result)"
                        .into(),
                ));
            }
            state = Val::Own(next);
        }
    }

    fn eval_conditional(&mut self, id: InstId, ops: &[&Literal]) -> R<Literal> {
        let m = self.m;
        let sel = arr(ops[0])?;
        let branches: Vec<CompId> = m.branch_computations(id).ok_or(
            "conditional needs branch_computations or true_computation and false_computation",
        )?;
        if branches.is_empty() {
            return Err("conditional has no branches".into());
        }
        let k = if sel.ty().is_pred() {
            // Predicate form: true runs the first computation.
            if sel.data[0] != 0 {
                0
            } else {
                1
            }
        } else {
            let i = so::scalar_i64(sel.ty(), &sel.data)?;
            // An out-of-range index runs the last branch.
            if i < 0 || i as usize >= branches.len() {
                branches.len() - 1
            } else {
                i as usize
            }
        };
        let arg = ops
            .get(k + 1)
            .ok_or("conditional is missing a branch operand")?;
        Ok(self.run(branches[k], vec![Val::Ref(arg)])?.into_owned())
    }

    fn eval_custom_call(&mut self, id: InstId, ops: &[&Literal]) -> R<Literal> {
        let m = self.m;
        let target = match m.attr(id, &AttrKey::CustomCallTarget) {
            Some(AttrValue::Str(s)) | Some(AttrValue::Raw(s)) | Some(AttrValue::Ident(s)) => {
                s.to_string()
            }
            _ => return Err("custom-call without a target".into()),
        };
        // Every target the evaluator knows reads an operand.
        if ops.is_empty() {
            return Err(
                format!("unsupported custom-call target \"{target}\" without operands").into(),
            );
        }
        let target = match ops.first() {
            Some(Literal::Array(a)) => {
                crate::householder::xla_qr_target(&target, a.shape.ty).unwrap_or(target)
            }
            _ => target,
        };
        if let Some(r) = lapack::lapack(self, id, &target, ops) {
            return r;
        }
        match target.as_str() {
            "TopK" => sort::custom_topk(self, id, arr(ops[0])?),
            "xla.sdy.GlobalToLocalShape" if self.device.is_some() => self.global_to_local(id, ops),
            "xla.sdy.LocalToGlobalShape" if self.device.is_some() => self.local_to_global(id, ops),
            // A sharding or placement annotation of the value's own shape (an array or a
            // tuple, as `ShardBarrierFrom` takes): the identity.
            t if axle_ir::is_annotation_target(t)
                && ops.len() == 1
                && shape_matches(m, ops[0], m.shape(id)) =>
            {
                Ok(ops[0].clone())
            }
            "xla.sdy.GlobalToLocalShape" | "xla.sdy.LocalToGlobalShape" => Err(format!(
                "{target} changes the shape, which needs a multi-device run \
                 (evaluate_devices, or `axle run --devices N`)"
            )
            .into()),
            _ => Err(format!("unsupported custom-call target \"{target}\"").into()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::evaluate;
    use axle_ir::{parse_module, ArrayLiteral, ArrayShape, ElementType, Literal};

    /// A loop whose body adds `STEP` to a counter while it is below 10.
    const COUNTER: &str = "HloModule m

cond {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  n = s32[] constant(10)
  ROOT lt = pred[] compare(i, n), direction=LT
}

body {
  p = (s32[], s32[]) parameter(0)
  i = s32[] get-tuple-element(p), index=0
  x = s32[] get-tuple-element(p), index=1
  s = s32[] constant(STEP)
  j = s32[] add(i, s)
  y = s32[] add(x, x)
  z = s32[] subtract(y, x)
  ROOT t = (s32[], s32[]) tuple(j, z)
}

ENTRY e {
  a = s32[] parameter(0)
  zero = s32[] constant(0)
  t = (s32[], s32[]) tuple(zero, a)
  ROOT w = (s32[], s32[]) while(t), condition=cond, body=body
}
";

    fn run(step: i32) -> Result<Literal, String> {
        let m = parse_module(&COUNTER.replace("STEP", &step.to_string())).expect("parses");
        let a = ArrayLiteral {
            shape: ArrayShape::new(ElementType::S32, &[]),
            data: 7i32.to_le_bytes().to_vec(),
        };
        evaluate(&m, &[Literal::Array(a)]).map_err(|e| e.to_string())
    }

    /// An iteration that leaves the state unchanged while the condition holds is an error
    /// naming the loop (a step of 0); the same loop with a step of 1 ends.
    #[test]
    fn unchanged_state_is_an_endless_loop() {
        let err = run(0).expect_err("an endless loop ended");
        assert!(err.contains("never ends"), "{err}");
        assert!(err.contains("%w"), "{err}");
        let Literal::Tuple(out) = run(1).expect("ends") else {
            panic!("not a tuple");
        };
        let ints: Vec<f64> = out
            .iter()
            .filter_map(|l| l.as_array().map(|a| a.to_f64_vec()[0]))
            .collect();
        assert_eq!(ints, [10.0, 7.0]);
    }

    /// A sharding annotation of a tuple (`ShardBarrierFrom`, as XLA's sharding propagation
    /// tests write it) is the identity, as it is of an array.
    #[test]
    fn tuple_shard_barrier_is_the_identity() {
        let text = "HloModule m\n\nENTRY e {\n  a = s32[] parameter(0)\n  \
                    t = (s32[], s32[]) tuple(a, a)\n  \
                    b = (s32[], s32[]) custom-call(t), custom_call_target=\"ShardBarrierFrom\", \
                    custom_call_has_side_effect=true\n  \
                    ROOT g = s32[] get-tuple-element(b), index=1\n}\n";
        let m = parse_module(text).expect("parses");
        let a = ArrayLiteral {
            shape: ArrayShape::new(ElementType::S32, &[]),
            data: 7i32.to_le_bytes().to_vec(),
        };
        let got = evaluate(&m, &[Literal::Array(a.clone())]).expect("runs");
        assert_eq!(got, Literal::Array(a));
    }

    /// A custom call without operands (valid HLO) of a target the evaluator does not know is
    /// refused naming the target.
    #[test]
    fn custom_call_without_operands_names_its_target() {
        let text = "HloModule m\n\nENTRY e {\n  \
                    ROOT c = f32[2] custom-call(), custom_call_target=\"call-target\"\n}\n";
        let m = parse_module(text).expect("parses");
        let err = evaluate(&m, &[]).expect_err("ran").to_string();
        assert!(
            err.contains("unsupported custom-call target \"call-target\" without operands"),
            "{err}"
        );
    }
}
