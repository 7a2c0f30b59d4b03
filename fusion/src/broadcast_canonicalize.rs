//! `broadcast-canonicalize`: puts broadcasts in the form later passes expect.
//!
//! Rules (counters named as the rules):
//! - `sort-dims`: `broadcast(x), dimensions={2,0}` becomes `broadcast(transpose(x)),
//!   dimensions={0,2}`: broadcast dimensions in increasing order, so that a broadcast never
//!   transposes;
//! - `degenerate-reshape`: `broadcast(reshape(w))` where the reshape only inserts dimensions of
//!   size 1 becomes a broadcast of `w` itself (the size-1 dimensions are broadcast anyway).
//!
//! Read phase: every broadcast is matched in parallel. Write phase: [`crate::rewrite::apply`].
//! Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values; every broadcast this pass
//! saw has increasing dimensions.

use axle_ir::{AttrKey, Changed, InstId, Module, Opcode, Pass, PassCx, PassError};
use rayon::prelude::*;

use crate::rewrite::{
    apply_plan_by_rule, dims, elem_ty, ints, ints_value, Node, Rewrite, ShapeSpec, Val,
};

/// The `broadcast-canonicalize` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct BroadcastCanonicalize;

fn match_at(m: &Module, id: InstId) -> Option<(&'static str, Rewrite)> {
    if m.opcode(id) != Opcode::Broadcast {
        return None;
    }
    dims(m, id)?;
    let x = m.operands(id)[0];
    let xd = dims(m, x)?.to_vec();
    let bd = ints(m, id, &AttrKey::Dimensions).unwrap_or(&[]).to_vec();
    if bd.len() != xd.len() {
        return None;
    }
    if !bd.windows(2).all(|w| w[0] < w[1]) {
        let mut perm: Vec<usize> = (0..bd.len()).collect();
        perm.sort_by_key(|&k| bd[k]);
        let tdims: Vec<i64> = perm.iter().map(|&k| xd[k]).collect();
        let sorted: Vec<i64> = perm.iter().map(|&k| bd[k]).collect();
        let p: Vec<i64> = perm.iter().map(|&k| k as i64).collect();
        return Some((
            "sort-dims",
            Rewrite::Build(vec![
                Node::new(
                    Opcode::Transpose,
                    ShapeSpec::Array(elem_ty(m, x)?, tdims),
                    vec![Val::Old(x)],
                )
                .attr(AttrKey::Dimensions, ints_value(&p)),
                Node::new(Opcode::Broadcast, ShapeSpec::Of(id), vec![Val::New(0)])
                    .attr(AttrKey::Dimensions, ints_value(&sorted)),
            ]),
        ));
    }
    if m.opcode(x) == Opcode::Reshape {
        let w = m.operands(x)[0];
        let wd = dims(m, w)?;
        // The reshape must only insert size-1 dimensions: w's dimensions are x's without them.
        if wd.contains(&1) {
            return None;
        }
        let kept: Vec<usize> = (0..xd.len()).filter(|&k| xd[k] != 1).collect();
        if kept.len() != wd.len() || kept.iter().zip(wd).any(|(&k, &s)| xd[k] != s) {
            return None;
        }
        let nd: Vec<i64> = kept.iter().map(|&k| bd[k]).collect();
        return Some((
            "degenerate-reshape",
            Rewrite::Build(vec![Node::new(
                Opcode::Broadcast,
                ShapeSpec::Of(id),
                vec![Val::Old(w)],
            )
            .attr(AttrKey::Dimensions, ints_value(&nd))]),
        ));
    }
    None
}

impl Pass for BroadcastCanonicalize {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<(InstId, [&'static str; 1], Rewrite)> = m
            .live_ids()
            .into_par_iter()
            .filter_map(|id| match_at(m, id).map(|(n, r)| (id, [n], r)))
            .collect();
        Ok(apply_plan_by_rule(m, plan, cx))
    }
}
