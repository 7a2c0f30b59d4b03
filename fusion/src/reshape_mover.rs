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
//! Read phase: every elementwise instruction is matched in parallel. Write phase:
//! [`crate::rewrite::apply`]. Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values.
//!
//! Counters: `moved_reshapes`, `moved_transposes`.

use axle_analysis::Users;
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

fn match_at(m: &Module, users: &Users, id: InstId) -> Option<(&'static str, Rewrite)> {
    let op = m.opcode(id);
    if !op.is_elementwise() || op == Opcode::Copy || !m.control_predecessors(id).is_empty() {
        return None;
    }
    let out = dims(m, id)?;
    let ops = m.operands(id);
    // The kind of the first moved operand decides: a reshape, or a transpose with a permutation.
    let mut kind: Option<(Opcode, Option<Vec<i64>>, Vec<i64>)> = None;
    for &o in ops {
        let k = m.opcode(o);
        if k == Opcode::Reshape || k == Opcode::Transpose {
            let inner = dims(m, m.operands(o)[0])?.to_vec();
            let perm = if k == Opcode::Transpose {
                Some(ints(m, o, &AttrKey::Dimensions)?.to_vec())
            } else {
                None
            };
            kind = Some((k, perm, inner));
            break;
        }
    }
    let (kop, perm, inner) = kind?;
    if inner == out {
        return None;
    }
    let mut moved = Vec::with_capacity(ops.len());
    for &o in ops {
        if m.opcode(o) == kop
            && dims(m, m.operands(o)[0])? == &inner[..]
            && (kop == Opcode::Reshape || ints(m, o, &AttrKey::Dimensions)? == perm.as_deref()?)
        {
            if !users.has_single_use(o) {
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
        let users = cx.analysis::<Users>(m);
        let plan: Vec<(InstId, &'static str, Rewrite)> = m
            .live_ids()
            .into_par_iter()
            .filter_map(|id| match_at(m, &users, id).map(|(n, r)| (id, n, r)))
            .collect();
        if plan.is_empty() {
            return Ok(false);
        }
        let mut rw = m.rewriter();
        for (id, rule, r) in plan {
            if apply(&mut rw, id, r) {
                cx.count(rule, 1);
            }
        }
        Ok(rw.finish())
    }
}
