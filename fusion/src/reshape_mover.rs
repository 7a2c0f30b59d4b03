//! `reshape-mover`: sinks reshapes and transposes below elementwise operations.
//!
//! `op(reshape(a), reshape(b))` with `a` and `b` of one shape becomes `reshape(op(a, b))`, and
//! likewise for transposes with one permutation; operands that are broadcasts of a scalar are
//! rebuilt at the new shape. Moving the reshape down lets it meet and cancel other reshapes
//! (`algsimp`'s `reshape-reshape`) and leaves elementwise chains in one shape for fusion.
//!
//! A move happens only when every reshaped (or transposed) operand has this operation as its
//! single user, so no instruction is duplicated, and at least one operand is a reshape (or
//! transpose) rather than a scalar broadcast.
//!
//! Read phase: a parallel sweep picks the candidates (elementwise instructions over reshapes,
//! transposes, scalar broadcasts and other elementwise instructions), in topological order.
//! Write phase: each candidate is matched again against the module as rewritten so far (operands
//! resolved through the rewriter), so a reshape sinks through a whole elementwise chain in one
//! sweep, and rewritten through [`crate::rewrite::apply`]. Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values.
//!
//! Counters: `moved_reshapes`, `moved_transposes`.

use axle_analysis::Users;
use axle_ir::passes::Structure;
use axle_ir::{AttrKey, Changed, InstId, Module, Opcode, Pass, PassCx, PassError};
use rayon::prelude::*;

use crate::rewrite::{apply, dims, elem_ty, ints, ints_value, Node, Rewrite, ShapeSpec, Val};

/// The `reshape-mover` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct ReshapeMover;

fn scalar_broadcast(m: &Module, o: InstId) -> Option<InstId> {
    (m.opcode(o) == Opcode::Broadcast && dims(m, m.operands(o)[0])?.is_empty())
        .then(|| m.operands(o)[0])
}

/// Whether `id` is elementwise in the shape sense (its result has each operand's dimensions):
/// not a copy, nor a `bitcast-convert` between types of different widths (which adds or drops
/// the minor dimension).
fn movable(m: &Module, id: InstId) -> bool {
    let op = m.opcode(id);
    op.is_elementwise()
        && op != Opcode::Copy
        && (op != Opcode::BitcastConvert || dims(m, id) == dims(m, m.operands(id)[0]))
}

/// Whether `id` may move a reshape this sweep: an elementwise instruction whose operands are
/// all reshapes, transposes, scalar broadcasts or elementwise instructions (which may turn into
/// reshapes earlier in the same sweep).
fn candidate(m: &Module, id: InstId) -> bool {
    movable(m, id)
        && m.control_predecessors(id).is_empty()
        && dims(m, id).is_some()
        && m.operands(id)
            .iter()
            .any(|&o| matches!(m.opcode(o), Opcode::Reshape | Opcode::Transpose) || movable(m, o))
        && m.operands(id).iter().all(|&o| {
            matches!(
                m.opcode(o),
                Opcode::Reshape | Opcode::Transpose | Opcode::Broadcast
            ) || movable(m, o)
        })
}

/// The move at `id`, looking at the operands as `operand(k)` gives them (resolved through the
/// write phase's forwarding) and asking `single_use(k)` whether operand `k` has one use.
fn match_with(
    m: &Module,
    id: InstId,
    operand: impl Fn(usize) -> InstId,
    single_use: impl Fn(usize) -> bool,
) -> Option<(&'static str, Rewrite)> {
    let op = m.opcode(id);
    let out = dims(m, id)?;
    let n = m.operands(id).len();
    // The kind of the first moved operand decides: a reshape, or a transpose with a permutation.
    let mut kind: Option<(Opcode, Option<Vec<i64>>, Vec<i64>)> = None;
    for k in 0..n {
        let o = operand(k);
        let ko = m.opcode(o);
        if ko == Opcode::Reshape || ko == Opcode::Transpose {
            let inner = dims(m, m.operands(o)[0])?.to_vec();
            let perm = if ko == Opcode::Transpose {
                Some(ints(m, o, &AttrKey::Dimensions)?.to_vec())
            } else {
                None
            };
            kind = Some((ko, perm, inner));
            break;
        }
    }
    let (kop, perm, inner) = kind?;
    if inner == out {
        return None;
    }
    let mut moved = Vec::with_capacity(n);
    for k in 0..n {
        let o = operand(k);
        if m.opcode(o) == kop
            && dims(m, m.operands(o)[0])? == &inner[..]
            && (kop == Opcode::Reshape || ints(m, o, &AttrKey::Dimensions)? == perm.as_deref()?)
        {
            if !single_use(k) {
                return None;
            }
            moved.push((m.operands(o)[0], false));
        } else if let Some(s) = scalar_broadcast(m, o) {
            moved.push((s, true));
        } else {
            return None;
        }
    }
    let mut nodes = Vec::new();
    let mut vals = Vec::with_capacity(moved.len());
    for (x, is_scalar) in moved {
        if is_scalar {
            vals.push(Val::New(nodes.len() as u32));
            nodes.push(
                Node::new(
                    Opcode::Broadcast,
                    ShapeSpec::Array(elem_ty(m, x)?, inner.clone()),
                    vec![Val::Old(x)],
                )
                .attr(AttrKey::Dimensions, ints_value(&[])),
            );
        } else {
            vals.push(Val::Old(x));
        }
    }
    let mut e = Node::new(op, ShapeSpec::Array(elem_ty(m, id)?, inner), vals);
    e.attrs = m.attrs(id).to_vec();
    nodes.push(e);
    let last = Val::New(nodes.len() as u32 - 1);
    let (rule, fin) = match perm {
        None => (
            "moved_reshapes",
            Node::new(Opcode::Reshape, ShapeSpec::Of(id), vec![last]),
        ),
        Some(p) => (
            "moved_transposes",
            Node::new(Opcode::Transpose, ShapeSpec::Of(id), vec![last])
                .attr(AttrKey::Dimensions, ints_value(&p)),
        ),
    };
    nodes.push(fin);
    Some((rule, Rewrite::Build(nodes)))
}

impl Pass for ReshapeMover {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let any = m.live_ids().into_par_iter().any(|id| candidate(m, id));
        if !any {
            return Ok(false);
        }
        let s = cx.analysis::<Structure>(m);
        let users = cx.analysis::<Users>(m);
        // Candidates in topological order, so a reshape moved below one instruction can move on
        // below its user in the same sweep.
        let plan: Vec<InstId> = s
            .topo
            .values()
            .as_slice()
            .par_iter()
            .flat_map_iter(|order| order.iter().copied().filter(|&id| candidate(m, id)))
            .collect();
        let mut rw = m.rewriter();
        for id in plan {
            let ops: Vec<InstId> = rw.module().operands(id).to_vec();
            let found = {
                let md = rw.module();
                match_with(
                    md,
                    id,
                    |k| rw.resolve(ops[k]),
                    |k| users.has_single_use(ops[k]),
                )
            };
            if let Some((rule, r)) = found {
                if apply(&mut rw, id, r) {
                    cx.count(rule, 1);
                }
            }
        }
        Ok(rw.finish())
    }
}
