//! `reduction-split`: a reduction of very long rows into few results becomes two reductions,
//! so its work can be split across threads (as XLA's tree reduction rewriter does for GPUs).
//!
//! A kernel splits its work by output elements (or rows), so `reduce(f32[67108864])` to a
//! scalar, or any reduction with only a handful of results, runs on one thread however many
//! the machine has. The pass rewrites
//! `r = reduce(x: T[K..., L...], init), dimensions={the L dimensions}` into
//! `reduce(reduce(reshape(x): T[K..., C, L/C], init), dimensions={last}), dimensions={last}`:
//! the first reduction has `C` times as many results (chunks of `L/C` contiguous elements,
//! still a row reduction that vectorizes), the second combines the `C` partial results of each
//! output in a fixed order. The chunking depends only on the shapes, so the result is the same
//! at any thread count.
//!
//! Rule (counter `split`): a single-input reduce over its trailing (minor) dimensions, of an
//! integer, pred or real float type, whose reducer is a single commutative binary op with an
//! identity ([`crate::rewrite::simple_reducer`], [`crate::rewrite::reducer_identity`]) and
//! whose init is exactly that identity, or `+0.0` for a float sum (so applying it once per
//! chunk changes nothing), with
//! at most `max_results` results and at least `min_elements` elements per result, of which
//! `C` (the largest divisor of the row length in `2..=64`) is a whole divisor. Float sums and
//! products are reassociated by the split, within the rounding a vectorized reduction already
//! has.
//!
//! Read phase: every reduce is matched in parallel. Write phase: [`crate::rewrite::apply_plan`].
//! Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values (up to the reassociation
//! of float sums and products); no reduce this pass split has more than `max_results` results
//! and `min_elements` elements per result without its two halves.

use axle_ir::{
    AttrKey, AttrValue, Changed, InstId, Module, Opcode, OptKind, OptSpec, Pass, PassCx, PassError,
};
use rayon::prelude::*;

use crate::rewrite::{
    apply_plan, dims, elem_ty, identical, ints, ints_value, reducer_identity, simple_reducer,
    splat, Node, Num, Rewrite, ShapeSpec, Val,
};

/// The options of `reduction-split`.
pub const OPTIONS: &[OptSpec] = &[
    OptSpec {
        name: "min_elements",
        kind: OptKind::Int {
            min: 4,
            max: i64::MAX,
        },
        default: "1048576",
        doc: "fewest elements reduced into each result for a split",
    },
    OptSpec {
        name: "max_results",
        kind: OptKind::Int {
            min: 1,
            max: i64::MAX,
        },
        default: "8",
        doc: "most results a reduction may have to be split",
    },
];

/// The most chunks a row is split into.
pub const MAX_CHUNKS: i64 = 64;

/// The `reduction-split` pass.
#[derive(Clone, Copy, Debug)]
pub struct ReductionSplit {
    /// The fewest elements reduced into each result for a split.
    pub min_elements: i64,
    /// The most results a split reduction may have.
    pub max_results: i64,
}

impl Default for ReductionSplit {
    fn default() -> Self {
        ReductionSplit {
            min_elements: 1 << 20,
            max_results: 8,
        }
    }
}

impl ReductionSplit {
    fn match_at(&self, m: &Module, id: InstId) -> Option<Rewrite> {
        if m.opcode(id) != Opcode::Reduce {
            return None;
        }
        let ops = m.operands(id);
        if ops.len() != 2 {
            return None;
        }
        let (x, init) = (ops[0], ops[1]);
        let ty = elem_ty(m, id)?;
        if ty.is_complex() {
            return None;
        }
        let xd = dims(m, x)?.to_vec();
        let rd = ints(m, id, &AttrKey::Dimensions)?;
        let r = xd.len().checked_sub(rd.len())?;
        // The reduced dimensions must be exactly the trailing ones.
        let mut sorted = rd.to_vec();
        sorted.sort_unstable();
        if sorted.iter().enumerate().any(|(k, &d)| d != (r + k) as i64) {
            return None;
        }
        let results: i64 = xd[..r].iter().product();
        let len: i64 = xd[r..].iter().product();
        if results == 0 || results > self.max_results || len < self.min_elements {
            return None;
        }
        let comp = m.comp_attr(id, &AttrKey::ToApply)?;
        let op = simple_reducer(m, comp)?;
        // A float sum's `+0.0` init is fine too: a sum that has added `+0.0` once is never
        // `-0.0`, so adding it again changes nothing.
        match (splat(m, init), reducer_identity(op, ty)) {
            (Some(v), Some(e)) if identical(v, e) => {}
            (Some(v), Some(_)) if op == Opcode::Add && identical(v, Num::Float(0.0)) => {}
            _ => return None,
        }
        let chunks = (2..=MAX_CHUNKS).rev().find(|c| len % c == 0)?;
        let kept = xd[..r].to_vec();
        let mut split = kept.clone();
        split.extend([chunks, len / chunks]);
        let mut partial = kept;
        partial.push(chunks);
        let reduce = |shape: ShapeSpec, from: u32, dim: usize| {
            Node::new(Opcode::Reduce, shape, vec![Val::New(from), Val::Old(init)])
                .attr(AttrKey::Dimensions, ints_value(&[dim as i64]))
                .attr(AttrKey::ToApply, AttrValue::Comp(comp))
        };
        Some(Rewrite::Build(vec![
            Node::new(
                Opcode::Reshape,
                ShapeSpec::Array(ty, split),
                vec![Val::Old(x)],
            ),
            reduce(ShapeSpec::Array(ty, partial), 0, r + 1),
            reduce(ShapeSpec::Of(id), 1, r),
        ]))
    }
}

impl Pass for ReductionSplit {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<(InstId, Rewrite)> = m
            .live_ids()
            .into_par_iter()
            .filter_map(|id| self.match_at(m, id).map(|r| (id, r)))
            .collect();
        Ok(apply_plan(m, plan, cx, "split"))
    }
}
