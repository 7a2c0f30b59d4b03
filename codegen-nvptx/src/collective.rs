//! Collectives staged through the host, as the nvptx backend runs them: which instructions
//! are host steps ([`is_host_step`]), which forms are refused ([`check`]), and one step's run
//! ([`run_step`]).
//!
//! A host step has no kernel: `all-reduce` (any reducer, tuple form), `all-gather`,
//! `reduce-scatter`, `all-to-all` (array and tuple forms), `collective-permute` (zeros where
//! nothing arrives), `collective-broadcast`, `replica-id`, `partition-id`, the
//! `all-reduce`, `all-gather` and `collective-permute` `-start`/`-done` pairs,
//! `async-start`/`-update`/`-done` around collectives, and JAX's `xla.sdy.GlobalToLocalShape` /
//! `LocalToGlobalShape`. The executor ([`crate::executor`], [`crate::arena`]) copies the
//! operands' leaves from the device to the host, runs the instruction with the reference
//! evaluator as this device of the run ([`axle_analysis::evaluate_instruction`] over the
//! run's [`axle_comm::Communicator`]), and copies the result's leaves into the instruction's
//! buffers. The evaluator folds a reduction's members in group order through the
//! communicator, and the cpu backend reduces with the same elementwise code, so the
//! interpreter, `cpu` and `nvptx` give the same bits, over any transport.
//!
//! Invariants:
//! - Every device of a run runs the one compiled program, whose host steps come in its
//!   schedule (fixed at compile time), so every device issues the same collectives in the same
//!   order.
//! - [`check`] refuses at compile time, naming the instruction: `ragged-all-to-all`, the
//!   in-place (four-operand) `collective-permute`, and an `async-start` whose computation does
//!   anything but collectives. Nothing else about a collective is decided at compile time:
//!   groups, peers and Shardy blocks are resolved per device at run time, as the evaluator
//!   resolves them.
//! - A step's result has the instruction's declared leaves, each of its size, or the step is
//!   an error; nothing is written then.
//! - A run without a device of a module written for one device (`replica_count` and
//!   `num_partitions` 1) runs its collectives on a world of that one device ([`lone_world`]),
//!   as the interpreter and `cpu` backends do; in a module for more devices, a collective that
//!   must meet other devices is an error saying it needs a multi-device run.

use axle_analysis::eval::{evaluate_instruction, is_collective, Device, EvalOptions};
use axle_codegen_llvm::elemental::{inst_leaves, literal_leaves};
use axle_codegen_llvm::error::finish;
use axle_comm::InProcess;
use axle_ir::{ArrayLiteral, AttrKey, InstId, Literal, Module, Opcode, Shape};

use crate::gpu_target::BACKEND;
use crate::sort::custom_call_target;

/// Whether instruction `id` runs on the host as a collective step (no kernel).
pub fn is_host_step(m: &Module, id: InstId) -> bool {
    is_collective(m.opcode(id))
        || m.opcode(id) == Opcode::CustomCall
            && matches!(
                custom_call_target(m, id),
                Some("xla.sdy.GlobalToLocalShape" | "xla.sdy.LocalToGlobalShape")
            )
}

/// Whether host step `id` needs the other devices of a run (every collective but
/// `replica-id`, `partition-id` and the `-done`/`-update` halves, which read their own
/// operands).
fn meets_devices(op: Opcode) -> bool {
    use Opcode::*;
    !matches!(
        op,
        ReplicaId
            | PartitionId
            | AllReduceDone
            | AllGatherDone
            | CollectivePermuteDone
            | AsyncUpdate
            | AsyncDone
    )
}

/// Whether host step `id` is one the backend runs; the error says why not.
pub fn check(m: &Module, id: InstId) -> Result<(), crate::NvptxError> {
    refusal(m, id).map_err(crate::NvptxError::Run)
}

/// Why the backend does not run host step `id` ([`check`]).
fn refusal(m: &Module, id: InstId) -> Result<(), String> {
    use Opcode::*;
    match m.opcode(id) {
        RaggedAllToAll => Err(format!(
            "the {BACKEND} backend does not run ragged-all-to-all"
        )),
        CollectivePermute | CollectivePermuteStart if m.operands(id).len() != 1 => Err(format!(
            "the {BACKEND} backend does not run the in-place form of collective-permute \
             (4 operands)"
        )),
        AsyncStart => {
            let c = m
                .comp_attr(id, &AttrKey::Calls)
                .ok_or("async-start needs calls")?;
            let other = m.comp_insts(c).into_iter().find(|&i| {
                !matches!(m.opcode(i), Parameter | Tuple | GetTupleElement) && !is_host_step(m, i)
                    || m.opcode(i) == RaggedAllToAll
            });
            match other {
                Some(i) => Err(format!(
                    "the {BACKEND} backend runs async-start around collectives only; its \
                     computation {} computes %{} ({})",
                    m.comp_name(c),
                    m.name(i),
                    m.opcode(i).name()
                )),
                None => Ok(()),
            }
        }
        _ => Ok(()),
    }
}

/// A world of one device for a run without a device of `m`, when `m` is written for one device
/// (`replica_count` and `num_partitions` 1): every group is that device, as XLA runs a module
/// of one replica and one partition. `None` for a module written for more devices.
pub fn lone_world(m: &Module) -> Option<InProcess> {
    (m.replica_count() == 1 && m.num_partitions() == 1).then(InProcess::lone)
}

/// The value of shape `s` from the next leaves of `leaves` (depth-first; tokens have none).
fn literal(
    m: &Module,
    s: &Shape,
    leaves: &mut impl Iterator<Item = Vec<u8>>,
) -> Result<Literal, String> {
    Ok(match s {
        Shape::Array(a) => {
            let data = leaves.next().ok_or("an operand has too few buffers")?;
            let want = a.num_elements().max(0) as usize * a.ty.byte_size();
            if data.len() != want {
                return Err(format!(
                    "an operand leaf of {} bytes where its shape needs {want}",
                    data.len()
                ));
            }
            Literal::Array(ArrayLiteral {
                shape: a.clone(),
                data,
            })
        }
        Shape::Tuple(es) => Literal::Tuple(
            es.iter()
                .map(|&e| literal(m, m.shape_of(e), leaves))
                .collect::<Result<_, _>>()?,
        ),
        Shape::Token => Literal::Tuple(Vec::new()),
        Shape::Opaque => return Err("an opaque operand".into()),
    })
}

/// Runs host step `id` of `m` on its operands' leaves (`operands[k]`: operand `k`'s array
/// leaves, depth-first, as bytes) as device `dev` of a run (`None`: no device; see the module
/// docs): the bytes of each of its result's array leaves, depth-first.
pub fn run_step(
    m: &Module,
    id: InstId,
    operands: Vec<Vec<Vec<u8>>>,
    dev: Option<Device<'_>>,
) -> Result<Vec<Vec<u8>>, crate::NvptxError> {
    step(m, id, operands, dev).map_err(crate::NvptxError::Run)
}

/// [`run_step`], its error a message.
fn step(
    m: &Module,
    id: InstId,
    operands: Vec<Vec<Vec<u8>>>,
    dev: Option<Device<'_>>,
) -> Result<Vec<Vec<u8>>, String> {
    let op = m.opcode(id);
    if dev.is_none() && meets_devices(op) {
        return Err(format!(
            "{} needs a multi-device run (`axle run --devices N`, or \
             axle_codegen_nvptx::devices::execute_devices): the module is written for {} \
             replicas x {} partitions",
            op.name(),
            m.replica_count(),
            m.num_partitions()
        ));
    }
    let shapes = m.operands(id);
    if operands.len() != shapes.len() {
        return Err(format!(
            "{} operand values for {} operands",
            operands.len(),
            shapes.len()
        ));
    }
    let mut values = Vec::with_capacity(operands.len());
    for (leaves, &o) in operands.into_iter().zip(shapes) {
        let mut it = leaves.into_iter();
        values.push(literal(m, m.shape(o), &mut it)?);
        if it.next().is_some() {
            return Err(format!("operand %{} has too many buffers", m.name(o)));
        }
    }
    let out = evaluate_instruction(m, id, &values, &EvalOptions::default(), dev)
        .map_err(|e| e.message)?;
    let mut got = Vec::new();
    literal_leaves(&out, &mut got);
    let want = inst_leaves(m, id).map_err(|f| finish(m, f).message)?;
    if got.len() != want.len()
        || got
            .iter()
            .zip(&want)
            .any(|(g, w)| g.shape.ty != w.ty || g.shape.dims != w.dims)
    {
        return Err("the collective's result does not have the declared leaves".into());
    }
    Ok(got.into_iter().map(|a| a.data.clone()).collect())
}
