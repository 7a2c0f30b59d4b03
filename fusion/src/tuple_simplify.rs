//! `tuple-simplify`: removes tuples that are built only to be taken apart.
//!
//! Rules (counters named as the rules):
//! - `gte-of-tuple`: `get-tuple-element(tuple(a0, ..., an), i)` is `ai`;
//! - `tuple-of-gtes`: `tuple(get-tuple-element(t, 0), ..., get-tuple-element(t, n-1))` of every
//!   element of `t`, in order, is `t`.
//!
//! Read phase: every `get-tuple-element` and `tuple` is matched in parallel. Write phase:
//! forwarding through the rewriter. Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values; replaced instructions are
//! dead (left for `dce`).

use axle_ir::{Changed, InstId, Module, Opcode, Pass, PassCx, PassError, Shape};
use rayon::prelude::*;

use crate::rewrite::{apply_plan_by_rule, forward, int, Rewrite};
use axle_ir::AttrKey;

/// The `tuple-simplify` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct TupleSimplify;

fn match_at(m: &Module, id: InstId) -> Option<(&'static str, Rewrite)> {
    match m.opcode(id) {
        Opcode::GetTupleElement => {
            let t = m.operands(id)[0];
            if m.opcode(t) != Opcode::Tuple {
                return None;
            }
            let i = int(m, id, &AttrKey::Index)?;
            let a = *m.operands(t).get(usize::try_from(i).ok()?)?;
            forward(m, id, a).map(|r| ("gte-of-tuple", r))
        }
        Opcode::Tuple => {
            let ops = m.operands(id);
            let first = *ops.first()?;
            if m.opcode(first) != Opcode::GetTupleElement {
                return None;
            }
            let t = m.operands(first)[0];
            let Shape::Tuple(elems) = m.shape(t) else {
                return None;
            };
            if elems.len() != ops.len() {
                return None;
            }
            let all = ops.iter().enumerate().all(|(k, &o)| {
                m.opcode(o) == Opcode::GetTupleElement
                    && m.operands(o)[0] == t
                    && int(m, o, &AttrKey::Index) == Some(k as i64)
            });
            if !all {
                return None;
            }
            forward(m, id, t).map(|r| ("tuple-of-gtes", r))
        }
        _ => None,
    }
}

impl Pass for TupleSimplify {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<(InstId, [&'static str; 1], Rewrite)> = m
            .live_ids()
            .into_par_iter()
            .filter_map(|id| match_at(m, id).map(|(n, r)| (id, [n], r)))
            .collect();
        Ok(apply_plan_by_rule(m, plan, cx))
    }
}
