//! `tree-reduce`: a long reduction of a float narrower than 32 bits becomes XLA CPU's tree of
//! short ones ([`axle_ir::tree_reduction`]), so the `cpu` backend computes what XLA computes.
//!
//! With a reducer that rounds every step to `bf16` or `f16`, a sequential fold is far from the
//! sum (1000 `bf16` ones fold to 256) and XLA's order gives its result bit for bit. The pass
//! rewrites `reduce(x, init)` level by level: `x` padded as XLA's `SAME` padding places it
//! (`pad`) with the reducer's identity, which leaves a fold as XLA's kernels do when they
//! skip padding, each reduced dimension longer than 32 split into windows of 32 (`reshape`),
//! and a `reduce` over the windows' elements and the shorter reduced dimensions; the result's
//! windows form the next level's reduced dimensions, until none is longer than 32, where the
//! last `reduce` (all of whose reduced dimensions are short) replaces the original. Each
//! window's elements stay in row-major order, so every new `reduce` folds them in XLA's
//! `reduce-window` order, and the evaluator, which computes the original `reduce` in that
//! order, gives the rewritten module's results bit for bit.
//!
//! Rule (counter `tree`): a single-input reduce whose element type the rule covers
//! ([`axle_ir::tree_reduction::applies_to`]) with a reduced dimension longer than 32, outside
//! fusion computations (a fused reduction keeps the fusion's own kernel; the `cpu` pipeline
//! runs this pass before fusing, and the `cpu` backend runs it on modules that arrive
//! unfused). Any init value; any reducer where no padding is needed, else one binary op with an
//! identity the type holds exactly (`add` of `-0.0`, `multiply`, `maximum` of `-inf`,
//! `minimum`): another reducer on a length that is no multiple of the window keeps its
//! sequential fold (the evaluator still computes XLA's order there, so the two may differ by
//! rounding).
//!
//! Read phase: every reduce is matched in parallel. Write phase: [`crate::rewrite::apply_plan`].
//!
//! Pre-conditions: a valid module. Post-conditions: the same values, bit for bit, as the
//! evaluator computes them; no reduce outside fusions covered by the rule has a reduced
//! dimension longer than 32.

use axle_ir::entity::EntitySet;
use axle_ir::tree_reduction::{applies_to, tree_level};
use axle_ir::{
    AttrKey, AttrValue, Changed, CompId, InstId, Module, Opcode, Pass, PassCx, PassError,
};
use rayon::prelude::*;

use crate::rewrite::{
    apply_plan, dims, elem_ty, identical, ints, ints_value, literal_splat, reducer_identity,
    scalar_literal, simple_reducer, Node, Rewrite, ShapeSpec, Val,
};

/// The `tree-reduce` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct TreeReduce;

/// Whether `m` has a reduce outside fusions that [`TreeReduce`] rewrites.
pub fn has_long_narrow_reduce(m: &Module) -> bool {
    let fused = fusion_bodies(m);
    m.live_ids()
        .into_iter()
        .any(|id| match_at(m, id, &fused).is_some())
}

/// The computations fusion instructions call.
fn fusion_bodies(m: &Module) -> EntitySet<CompId> {
    let mut fused = EntitySet::with_capacity(m.comp_capacity());
    for i in m.live_ids() {
        if m.opcode(i) == Opcode::Fusion {
            if let Some(c) = m.comp_attr(i, &AttrKey::Calls) {
                fused.insert(c);
            }
        }
    }
    fused
}

fn match_at(m: &Module, id: InstId, fused: &EntitySet<CompId>) -> Option<Rewrite> {
    if m.opcode(id) != Opcode::Reduce || fused.contains(m.parent(id)) {
        return None;
    }
    let ops = m.operands(id);
    if ops.len() != 2 {
        return None;
    }
    let (x, init) = (ops[0], ops[1]);
    let ty = elem_ty(m, x)?;
    if !applies_to(ty) {
        return None;
    }
    let comp = m.comp_attr(id, &AttrKey::ToApply)?;
    let mut cur = dims(m, x)?.to_vec();
    let mut reduced = vec![false; cur.len()];
    for &d in ints(m, id, &AttrKey::Dimensions)? {
        *reduced.get_mut(usize::try_from(d).ok()?)? = true;
    }
    let mut level = tree_level(&cur, &reduced)?;
    let mut nodes: Vec<Node> = Vec::new();
    let mut from = Val::Old(x);
    // The padding value, made on first use: the reducer's identity, exact in the type.
    let mut pad_value: Option<Val> = None;
    loop {
        // Pad where the windows overrun.
        if level.pad_lo.iter().chain(&level.pad_hi).any(|&p| p > 0) {
            let value = match pad_value {
                Some(v) => v,
                None => {
                    let e = reducer_identity(simple_reducer(m, comp)?, ty)?;
                    let lit = scalar_literal(ty, e);
                    if !literal_splat(&lit).is_some_and(|v| identical(v, e)) {
                        return None;
                    }
                    nodes.push(Node::constant(lit));
                    let v = Val::New(nodes.len() as u32 - 1);
                    pad_value = Some(v);
                    v
                }
            };
            let padded: Vec<i64> = (0..cur.len())
                .map(|d| cur[d] + level.pad_lo[d] + level.pad_hi[d])
                .collect();
            let cfg: Vec<[i64; 3]> = (0..cur.len())
                .map(|d| [level.pad_lo[d], level.pad_hi[d], 0])
                .collect();
            nodes.push(
                Node::new(Opcode::Pad, ShapeSpec::Array(ty, padded), vec![from, value])
                    .attr(AttrKey::Padding, AttrValue::Padding(cfg.into())),
            );
            from = Val::New(nodes.len() as u32 - 1);
        }
        // Split each windowed dimension into (windows, window); reduce the window parts and
        // the dimensions reduced whole.
        let (mut split, mut rdims, mut partial, mut next_reduced) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for d in 0..cur.len() {
            if !reduced[d] {
                split.push(cur[d]);
                partial.push(cur[d]);
                next_reduced.push(false);
            } else if level.out[d] == 1 {
                rdims.push(split.len() as i64);
                split.push(level.window[d]);
            } else {
                split.push(level.out[d]);
                partial.push(level.out[d]);
                next_reduced.push(true);
                rdims.push(split.len() as i64);
                split.push(level.window[d]);
            }
        }
        if split != cur {
            nodes.push(Node::new(
                Opcode::Reshape,
                ShapeSpec::Array(ty, split),
                vec![from],
            ));
            from = Val::New(nodes.len() as u32 - 1);
        }
        nodes.push(
            Node::new(
                Opcode::Reduce,
                ShapeSpec::Array(ty, partial.clone()),
                vec![from, Val::Old(init)],
            )
            .attr(AttrKey::Dimensions, ints_value(&rdims))
            .attr(AttrKey::ToApply, AttrValue::Comp(comp)),
        );
        from = Val::New(nodes.len() as u32 - 1);
        cur = partial;
        reduced = next_reduced;
        match tree_level(&cur, &reduced) {
            Some(l) => level = l,
            None => break,
        }
    }
    // The last level: every remaining reduced dimension is short.
    let rdims: Vec<i64> = (0..cur.len() as i64)
        .filter(|&d| reduced[d as usize])
        .collect();
    nodes.push(
        Node::new(
            Opcode::Reduce,
            ShapeSpec::Of(id),
            vec![from, Val::Old(init)],
        )
        .attr(AttrKey::Dimensions, ints_value(&rdims))
        .attr(AttrKey::ToApply, AttrValue::Comp(comp)),
    );
    Some(Rewrite::Build(nodes))
}

impl Pass for TreeReduce {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let fused = fusion_bodies(m);
        let plan: Vec<(InstId, Rewrite)> = m
            .live_ids()
            .into_par_iter()
            .filter_map(|id| match_at(m, id, &fused).map(|r| (id, r)))
            .collect();
        Ok(apply_plan(m, plan, cx, "tree"))
    }
}
