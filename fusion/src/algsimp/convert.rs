//! Conversion rules: no-op conversions, copies, sharding annotations, collectives among one
//! device each, async pairs run synchronously, and chains of conversions whose first step loses
//! nothing.

use axle_ir::collective::{GroupMode, ReplicaGroups};
use axle_ir::{AttrKey, AttrValue, CompId, ElementType, InstId, Layout, Module, Opcode, Shape};

use super::{Cx, Hit};
use crate::rewrite::{elem_ty, forward, int_range, Node, Rewrite, ShapeSpec, Val};

/// Whether converting `from` to `to` keeps every value exactly (sign of zero, infinities and NaN
/// included).
pub(crate) fn lossless(from: ElementType, to: ElementType) -> bool {
    use ElementType::*;
    if from == to {
        return true;
    }
    if from.is_pred() {
        // f8e8m0fnu has no zero: `false` becomes NaN there.
        return to.is_int() || (to.is_float() && to != F8E8M0FNU);
    }
    if from.is_int() && to.is_int() {
        let (lo, hi) = int_range(from);
        let (tlo, thi) = int_range(to);
        return tlo <= lo && hi <= thi;
    }
    if from.is_int() && to.is_float() {
        // Integers of at most `precision` significant bits are exact.
        let precision = match to {
            F16 => 11,
            BF16 => 8,
            F32 => 24,
            F64 => 53,
            _ => return false,
        };
        let (lo, hi) = int_range(from);
        return hi <= (1i128 << precision) && lo >= -(1i128 << precision);
    }
    matches!((from, to), (F16 | BF16, F32 | F64) | (F32, F64))
}

pub(super) fn rules(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let x = m.operands(id)[0];
    let (rty, xty) = (elem_ty(m, id)?, elem_ty(m, x)?);
    match m.opcode(id) {
        Opcode::Convert => {
            if rty == xty {
                return forward(m, id, x).map(|r| ("convert-same-type", r));
            }
            if m.opcode(x) != Opcode::Convert {
                return None;
            }
            let w = m.operands(x)[0];
            let wty = elem_ty(m, w)?;
            if wty.is_complex() || xty.is_complex() || rty.is_complex() || !lossless(wty, xty) {
                return None;
            }
            // Integer -> float -> integer saturates where integer -> integer wraps: only when
            // every value of the source fits the result do both agree.
            if wty.is_int() && xty.is_float() && rty.is_int() {
                let (lo, hi) = int_range(wty);
                let (rlo, rhi) = int_range(rty);
                if lo < rlo || hi > rhi {
                    return None;
                }
            }
            if wty == rty {
                return forward(m, id, w).map(|r| ("convert-convert", r));
            }
            Some((
                "convert-convert",
                Rewrite::Build(vec![Node::new(
                    Opcode::Convert,
                    ShapeSpec::Of(id),
                    vec![Val::Old(w)],
                )]),
            ))
        }
        Opcode::BitcastConvert if rty == xty => {
            forward(m, id, x).map(|r| ("bitcast-convert-same-type", r))
        }
        Opcode::Copy => forward(m, id, x).map(|r| ("copy-same-layout", r)),
        _ => None,
    }
}

/// `custom-call(x)` of a sharding annotation target ([`axle_ir::SHARDING_ANNOTATIONS`]: what
/// `jax.lax.with_sharding_constraint`, JAX's lowering and Shardy write) or a placement one
/// ([`axle_ir::PLACEMENT_ANNOTATIONS`]: host offloading, layout constraints) whose result has
/// `x`'s shape: the identity (an annotation changes where the value lives, not what it is;
/// where it would change the shape, the shapes differ and the rule does not apply), or, for an array
/// whose layouts alone differ, a `copy` into the annotation's layout (JAX annotates a
/// transposed value, laid out as XLA's transposes are, with its result's layout).
pub(super) fn annotation(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let target = match m.attr(id, &AttrKey::CustomCallTarget) {
        Some(AttrValue::Str(s)) | Some(AttrValue::Raw(s)) | Some(AttrValue::Ident(s)) => s,
        _ => return None,
    };
    match m.operands(id) {
        [x] if axle_ir::is_annotation_target(target) => {
            if m.shape_id(id) != m.shape_id(*x) {
                return None;
            }
            if let Some(r) = forward(m, id, *x) {
                return Some(("sharding-annotation", r));
            }
            // Only the layouts differ: an array is copied into the annotation's layout.
            m.array_shape(id)?;
            Some((
                "sharding-annotation",
                Rewrite::Build(vec![Node::new(
                    Opcode::Copy,
                    ShapeSpec::Of(id),
                    vec![Val::Old(*x)],
                )]),
            ))
        }
        _ => None,
    }
}

/// Whether `replica_groups` puts every device in a group of its own (explicit lists of one id
/// each, or the iota form with groups of one; `{}` is one group of all devices).
fn singleton_groups(g: &ReplicaGroups) -> bool {
    match g {
        ReplicaGroups::Iota(i) => i.group_size == 1 && i.validate().is_ok(),
        ReplicaGroups::List(l) => !l.is_empty() && l.iter().all(|g| g.len() == 1),
    }
}

/// Whether a `replica_groups` attribute (or its absence) means one group of every device.
fn all_devices(g: Option<&AttrValue>) -> bool {
    match g {
        None => true,
        Some(AttrValue::ReplicaGroups(g)) => matches!(&**g, ReplicaGroups::List(l) if l.is_empty()),
        Some(_) => false,
    }
}

/// `all-reduce`, `all-gather`, `reduce-scatter`, `all-to-all` among groups of one device each
/// (listed so, unless a group of one replica spans several partitions, or one group of every device, `replica_groups={}`, in a module whose header
/// counts one replica and one partition, the default of a module without counts: XLA's
/// `AllReduceSimplifier` case), and
/// `collective-permute` whose every pair sends a device its own value and whose pairs name every
/// replica (partition, with a channel) the module header counts (one left out receives zeros):
/// each device only meets itself, so the result is the operand (when the shapes agree), or the
/// tuple of the operands for an `all-reduce` of several.
pub(super) fn lone_collective(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let ops = m.operands(id);
    let one_device = u64::from(m.replica_count()) * u64::from(m.num_partitions()) == 1;
    let lone = match m.opcode(id) {
        Opcode::AllReduce | Opcode::AllGather | Opcode::ReduceScatter | Opcode::AllToAll => {
            (one_device && all_devices(m.attr(id, &AttrKey::ReplicaGroups)))
                || (matches!(m.attr(id, &AttrKey::ReplicaGroups), Some(AttrValue::ReplicaGroups(g)) if singleton_groups(g))
                    && !spans_partitions(m, id))
        }
        Opcode::CollectivePermute => {
            let n = if m.attr(id, &AttrKey::ChannelId).is_some() {
                m.num_partitions()
            } else {
                m.replica_count()
            };
            matches!(
                m.attr(id, &AttrKey::SourceTargetPairs),
                Some(AttrValue::Pairs(p)) if p.iter().all(|[s, t]| s == t)
                    && (0..i64::from(n)).all(|d| p.iter().any(|[s, _]| *s == d))
            )
        }
        _ => false,
    };
    if !lone {
        return None;
    }
    match ops {
        [x] => forward(m, id, *x).map(|r| ("lone-collective", r)),
        [_, _, ..] if m.opcode(id) == Opcode::AllReduce => {
            let Shape::Tuple(parts) = m.shape(id) else {
                return None;
            };
            let same = parts.len() == ops.len()
                && parts
                    .iter()
                    .zip(ops)
                    .all(|(&p, &o)| m.shape_of(p) == m.shape(o));
            same.then(|| {
                let vals = ops.iter().map(|&o| Val::Old(o)).collect();
                let tuple = Node::new(Opcode::Tuple, ShapeSpec::Of(id), vals);
                ("lone-collective", Rewrite::Build(vec![tuple]))
            })
        }
        _ => None,
    }
}

/// Whether a group of one replica id of collective `id` still meets several devices: in XLA's
/// cross-replica-and-partition mode (a `channel_id` and `use_global_device_ids=false`, the
/// default of the ops with the flag) each group spans every partition, so `{{0}}` in a module
/// of several partitions is a group of `num_partitions` devices.
fn spans_partitions(m: &Module, id: InstId) -> bool {
    let flag = matches!(
        m.opcode(id),
        Opcode::AllReduce | Opcode::AllGather | Opcode::ReduceScatter
    );
    let global =
        flag.then(|| m.attr(id, &AttrKey::UseGlobalDeviceIds) == Some(&AttrValue::Bool(true)));
    m.num_partitions() > 1
        && GroupMode::of(m.attr(id, &AttrKey::ChannelId).is_some(), global)
            .map_or(true, |g| g == GroupMode::CrossReplicaAndPartition)
}

/// The computation an `async-start` runs when it and its one user, an `async-done`, can run
/// synchronously: no control edges, a start of `(operands, result)` only, and the computation's
/// result the done's.
fn sync_pair(cx: &Cx<'_>, start: InstId) -> Option<CompId> {
    let m = cx.m;
    let users = cx.users.get();
    let done = match users.users(start) {
        [d] if m.opcode(*d) == Opcode::AsyncDone && !users.is_root(start) => *d,
        _ => return None,
    };
    let Some(AttrValue::Comp(c)) = m.attr(start, &AttrKey::Calls) else {
        return None;
    };
    let two = matches!(m.shape(start), Shape::Tuple(parts) if parts.len() == 2);
    (m.opcode(start) == Opcode::AsyncStart
        && two
        && m.control_predecessors(start).is_empty()
        && m.control_predecessors(done).is_empty()
        && m.shape(m.root(*c)) == m.shape(done))
    .then_some(*c)
}

/// An `async-start`/`async-done` pair run synchronously (XLA's
/// `ConvertAsyncCollectivesToSync`): the start becomes `tuple(tuple(args), call(args),
/// to_apply=c)` and the done the call's element, which `tuple-simplify` and `inline` then
/// flatten to the wrapped instruction.
pub(super) fn async_to_sync(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let r = match m.opcode(id) {
        Opcode::AsyncStart => {
            let c = sync_pair(cx, id)?;
            let Shape::Tuple(parts) = m.shape(id) else {
                return None;
            };
            let args: Vec<Val> = m.operands(id).iter().map(|&o| Val::Old(o)).collect();
            let done = cx.users.get().users(id)[0];
            let layout = match m.layout_of(m.layout_id(id)) {
                Layout::Tuple(l) => l.first().copied().unwrap_or(m.no_layout()),
                _ => m.no_layout(),
            };
            Rewrite::Build(vec![
                Node::new(Opcode::Tuple, ShapeSpec::Id(parts[0], layout), args.clone()),
                Node::new(Opcode::Call, ShapeSpec::Of(done), args)
                    .attr(AttrKey::ToApply, AttrValue::Comp(c)),
                Node::new(
                    Opcode::Tuple,
                    ShapeSpec::Of(id),
                    vec![Val::New(0), Val::New(1)],
                ),
            ])
        }
        Opcode::AsyncDone => {
            let [s] = m.operands(id) else { return None };
            sync_pair(cx, *s)?;
            Rewrite::Build(vec![Node::new(
                Opcode::GetTupleElement,
                ShapeSpec::Of(id),
                vec![Val::Old(*s)],
            )
            .attr(AttrKey::Index, AttrValue::Int(1))])
        }
        _ => return None,
    };
    Some(("async-to-sync", r))
}

#[cfg(test)]
mod tests {
    use super::singleton_groups;
    use axle_ir::collective::{IotaGroups, ReplicaGroups};

    fn list(gs: &[&[i64]]) -> ReplicaGroups {
        ReplicaGroups::List(gs.iter().map(|g| g.to_vec().into()).collect())
    }

    fn iota(g: i64, s: i64) -> ReplicaGroups {
        ReplicaGroups::Iota(IotaGroups {
            num_groups: g,
            group_size: s,
            reshape_dims: vec![g * s].into(),
            transpose: None,
        })
    }

    #[test]
    fn singleton_replica_groups() {
        assert!(singleton_groups(&list(&[&[0]])));
        assert!(singleton_groups(&list(&[&[0], &[1], &[2]])));
        assert!(singleton_groups(&iota(4, 1)));
        assert!(!singleton_groups(&list(&[&[0, 1]])));
        assert!(!singleton_groups(&list(&[])));
        assert!(!singleton_groups(&iota(2, 2)));
        assert!(!singleton_groups(&list(&[&[0], &[1, 2]])));
    }
}
