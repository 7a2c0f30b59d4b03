//! Collectives at compile time: which instructions become collective host calls and the
//! descriptor each gets ([`crate::runtime::collective::Coll`]).
//!
//! `all-reduce`, `all-gather`, `reduce-scatter`, `all-to-all` (array and tuple forms),
//! `collective-permute`, `collective-broadcast`, `replica-id`, `partition-id`, the
//! `all-reduce-start`, `all-gather-start` and `collective-permute-start` forms and JAX's
//! `xla.sdy.GlobalToLocalShape` / `LocalToGlobalShape` are host calls; the `-done` forms are
//! copies (lowering). Everything the runtime trusts is checked here: array operands, a reducer
//! of one op (`add`, `multiply`, `maximum`, `minimum`, `and`, `or`, `xor` of two parameters
//! of the operand's type; any other reducer is refused naming it), dimensions in range, the
//! Shardy blocks of every device. What depends on the device (its group, its peers, its
//! block) is resolved at run time from the descriptor.
//!
//! Every device runs the same compiled program, so every device issues its collectives in
//! the same order: the order is the program's, fixed at compile time.

use axle_ir::collective::GroupMode;
use axle_ir::sdy::shardings_of;
use axle_ir::{ArrayShape, AttrKey, AttrValue, InstId, Module, Opcode, Shape};

use crate::error::R;
use crate::runtime::collective::{Arr, Coll, CollKind};
use crate::runtime::Call;

fn arr(a: &ArrayShape) -> Arr {
    Arr {
        ty: a.ty,
        dims: a.dims.to_vec(),
    }
}

/// The array leaves of shape `s`.
fn leaves(m: &Module, s: &Shape) -> R<Vec<Arr>> {
    let mut v = Vec::new();
    crate::elemental::leaves(m, s, &mut v)?;
    Ok(v.iter().map(arr).collect())
}

/// The custom-call target of `id`, if it is a custom call.
fn target(m: &Module, id: InstId) -> Option<&str> {
    match m.attr(id, &AttrKey::CustomCallTarget)? {
        AttrValue::Str(s) | AttrValue::Raw(s) | AttrValue::Ident(s) => Some(s),
        _ => None,
    }
}

/// The collective host call for `id`, an error if it is one the backend cannot run, `None`
/// for every other instruction (the `-done` forms included).
pub(crate) fn plan(m: &Module, id: InstId) -> Option<R<Call>> {
    use Opcode::*;
    let kind = match m.opcode(id) {
        AllReduce | AllReduceStart => CollKind::AllReduce,
        AllGather | AllGatherStart => CollKind::AllGather,
        ReduceScatter => CollKind::ReduceScatter,
        AllToAll => CollKind::AllToAll,
        CollectivePermute | CollectivePermuteStart => CollKind::Permute,
        CollectiveBroadcast => CollKind::Broadcast,
        ReplicaId => CollKind::ReplicaId,
        PartitionId => CollKind::PartitionId,
        CustomCall => match target(m, id)? {
            "xla.sdy.GlobalToLocalShape" => CollKind::GlobalToLocal,
            "xla.sdy.LocalToGlobalShape" => CollKind::LocalToGlobal,
            _ => return None,
        },
        _ => return None,
    };
    Some(build(m, id, kind).map(|c| crate::runtime::Call::Collective(Box::new(c))))
}

/// The one op of reducer computation `c` for operands of type `ty`.
fn reducer(m: &Module, id: InstId, ty: axle_ir::ElementType) -> R<Opcode> {
    let c = m
        .comp_attr(id, &AttrKey::ToApply)
        .ok_or("missing to_apply")?;
    let params = m.params(c);
    let root = m.root(c);
    let op = m.opcode(root);
    let ops = m.operands(root);
    let scalar = |i: InstId| matches!(m.array_shape(i), Some(a) if a.ty == ty && a.dims.is_empty());
    let one_op = matches!(
        op,
        Opcode::Add
            | Opcode::Multiply
            | Opcode::Maximum
            | Opcode::Minimum
            | Opcode::And
            | Opcode::Or
            | Opcode::Xor
    ) && params.len() == 2
        && ops.len() == 2
        && ((ops[0] == params[0] && ops[1] == params[1])
            || (ops[0] == params[1] && ops[1] == params[0]))
        && params.iter().all(|&p| scalar(p))
        && scalar(root);
    if one_op {
        Ok(op)
    } else {
        Err(format!(
            "the cpu backend runs {} with a reducer of one add, multiply, maximum, minimum, \
             and, or or xor of its two {} parameters; reducer {} is not one",
            m.opcode(id).name(),
            ty.name(),
            m.comp_name(c)
        )
        .into())
    }
}

fn build(m: &Module, id: InstId, kind: CollKind) -> R<Coll> {
    use Opcode::*;
    let op = m.opcode(id);
    let mut operands = Vec::new();
    for &o in m.operands(id) {
        match m.shape(o) {
            Shape::Array(a) => operands.push(arr(a)),
            _ if kind == CollKind::GlobalToLocal || kind == CollKind::LocalToGlobal => {
                return Err("the shard_map call's operands must be arrays".into())
            }
            _ => return Err(format!("{}'s operands must be arrays", op.name()).into()),
        }
    }
    // A `-start`'s tuple: (operands, results, context...).
    let (prefix, results, suffix) = match (op, m.shape(id)) {
        (AllGatherStart | CollectivePermuteStart, Shape::Tuple(es)) if es.len() >= 2 => {
            let first = leaves(m, m.shape_of(es[0]))?;
            if first != operands {
                return Err(
                    format!("{}'s tuple does not start with its operands", op.name()).into(),
                );
            }
            let mut suffix = Vec::new();
            for &e in &es[2..] {
                suffix.extend(leaves(m, m.shape_of(e))?);
            }
            (operands.len(), leaves(m, m.shape_of(es[1]))?, suffix)
        }
        (AllGatherStart | CollectivePermuteStart, _) => {
            return Err(format!("{} must return a tuple", op.name()).into())
        }
        (_, s) => (0, leaves(m, s)?, Vec::new()),
    };
    let has_channel = m.attr(id, &AttrKey::ChannelId).is_some();
    let flag = matches!(
        op,
        AllReduce | AllReduceStart | AllGather | AllGatherStart | ReduceScatter
    );
    let global =
        flag.then(|| m.attr(id, &AttrKey::UseGlobalDeviceIds) == Some(&AttrValue::Bool(true)));
    let mode = GroupMode::of(has_channel, global)?;
    let groups = match m.attr(id, &AttrKey::ReplicaGroups) {
        Some(AttrValue::ReplicaGroups(g)) => g.expand()?,
        None => Vec::new(),
        Some(_) => return Err("replica_groups is not a list of groups".into()),
    };
    let pairs = match m.attr(id, &AttrKey::SourceTargetPairs) {
        Some(AttrValue::Pairs(p)) => p.to_vec(),
        _ => Vec::new(),
    };
    let dims_attr = m.ints_attr(id, &AttrKey::Dimensions);
    let dim = match (kind, dims_attr) {
        (CollKind::AllGather | CollKind::ReduceScatter, Some([d])) => *d,
        (CollKind::AllGather | CollKind::ReduceScatter, _) => {
            return Err("dimensions must name one dimension".into())
        }
        (CollKind::AllToAll, Some([d])) => *d,
        (CollKind::AllToAll, None) => -1,
        (CollKind::AllToAll, Some(_)) => return Err("dimensions must name one dimension".into()),
        _ => -1,
    };
    if dim >= 0 && operands.iter().any(|a| dim as usize >= a.dims.len()) {
        return Err(format!("dimension {dim} is out of range").into());
    }
    let mut reducer_op = None;
    let mut starts = Vec::new();
    let mut sdy_devices = Vec::new();
    let same_count = operands.len() == results.len();
    match kind {
        CollKind::AllReduce | CollKind::ReduceScatter => {
            for a in &operands {
                let r = reducer(m, id, a.ty)?;
                if reducer_op.is_some_and(|p| p != r) {
                    return Err("the operands' reducers differ".into());
                }
                reducer_op = Some(r);
            }
            if !same_count {
                return Err("one result per operand expected".into());
            }
        }
        CollKind::AllGather | CollKind::Broadcast | CollKind::AllToAll if !same_count => {
            return Err("one result per operand expected".into())
        }
        CollKind::Permute => {
            if operands.len() != 1 || results.len() != 1 {
                return Err(
                    "the in-place form of collective-permute (4 operands) is not supported".into(),
                );
            }
            if pairs.is_empty() && m.attr(id, &AttrKey::SourceTargetPairs).is_none() {
                return Err("missing source_target_pairs".into());
            }
        }
        CollKind::ReplicaId | CollKind::PartitionId
            if results.len() != 1 || results[0].bytes() != 4 =>
        {
            return Err(format!("{} must return a u32 scalar", op.name()).into());
        }
        CollKind::GlobalToLocal | CollKind::LocalToGlobal => {
            let key = if kind == CollKind::GlobalToLocal {
                "xla.sdy.in_shardings"
            } else {
                "xla.sdy.out_shardings"
            };
            let shardings = shardings_of(m, id, key)?;
            if shardings.len() != operands.len() || !same_count {
                return Err(format!(
                    "{} shardings for {} operands and {} results",
                    shardings.len(),
                    operands.len(),
                    results.len()
                )
                .into());
            }
            for (((mesh, s), a), r) in shardings.iter().zip(&operands).zip(&results) {
                let (global, local) = if kind == CollKind::GlobalToLocal {
                    (a, r)
                } else {
                    (r, a)
                };
                if global.ty != local.ty {
                    return Err("a shard has another element type than its global value".into());
                }
                let mut st = Vec::new();
                for d in 0..mesh.devices() {
                    let block = mesh.block(s, &global.dims, d)?;
                    let ldims: Vec<i64> = block.iter().map(|b| b.1).collect();
                    if ldims != local.dims {
                        return Err(format!(
                            "device {d}'s block {ldims:?} does not match the local value {:?}",
                            local.dims
                        )
                        .into());
                    }
                    st.extend(block.iter().map(|b| b.0));
                }
                starts.push(st);
                sdy_devices.push(mesh.devices());
            }
        }
        _ => {}
    }
    Ok(Coll {
        kind,
        // The name, or the opcode and id when the pipeline left it unnamed.
        label: match m.name(id) {
            "" => format!("{}_{}", op.name(), id.index()),
            n => n.to_string(),
        },
        mode,
        groups,
        pairs,
        reducer: reducer_op,
        dim,
        operands,
        prefix,
        results,
        suffix,
        starts,
        sdy_devices,
        module_devices: i64::from(m.replica_count()) * i64::from(m.num_partitions()),
    })
}
