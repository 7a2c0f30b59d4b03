//! `algsimp`: algebraic simplification, a broad rule set in the spirit of XLA's
//! `AlgebraicSimplifier`.
//!
//! Every rule is exact for every input, NaN, infinities, `-0.0` and integer overflow included
//! (the reference evaluator's IEEE semantics): float rules are only the IEEE-safe ones
//! (`x * 1 -> x`, `x + (-0.0) -> x`, `x - 0.0 -> x`, `x / 2^k -> x * 2^-k`; never `x + 0.0 -> x`
//! nor `x * 0 -> 0` nor `x - x -> 0` on floats), integer identities and absorbing elements hold
//! under wrapping. Sign algebra (`x + (-y) -> x - y`, `x * -1 -> -x`, ...) is applied to
//! integers only: on floats it changes the sign of a NaN result, which total-order compares
//! and bitcasts can observe. (Signaling NaNs are not modelled: the evaluator quiets them like
//! any arithmetic, and a removed `x * 1` no longer does.)
//! The rules, by family (the counter of each is its name):
//!
//! - arithmetic (`arith`): `add-zero`, `add-neg-zero`, `add-negate`, `sub-zero`, `sub-self`,
//!   `sub-negate`, `zero-sub`, `mul-one`, `mul-zero`, `mul-neg-one`, `mul-negate-negate`,
//!   `div-one`, `div-pow2`, `max-self`, `max-identity`, `max-absorb`, `pow-one`, `pow-zero`,
//!   `neg-neg`, `abs-abs`, `abs-neg`, `idempotent-unary`, `shift-zero`;
//! - logic (`logic`): `and-self`, `or-self`, `and-ones`, `and-zero`, `or-zero`, `or-ones`, `xor-zero`,
//!   `xor-self`, `not-not`, `select-same`, `select-const-pred`, `select-not-pred`,
//!   `compare-self`, `compare-pred-const`, `conditional-to-select` (in a `map`'s computation, an array
//!   `conditional` on a `pred` whose branches have no effect: both branches as `call`s and a
//!   `select`);
//! - conversions (`convert`): `convert-same-type`, `convert-convert`, `bitcast-convert-same-type`,
//!   `copy-same-layout`, `sharding-annotation` (a sharding custom-call of the value's own shape),
//!   `lone-collective` (a collective among groups of one device each, or in a module for one
//!   device), `async-to-sync` (an `async-start`/`async-done` pair becomes a `call`);
//! - data movement (`shapes`): `reshape-noop`, `reshape-reshape`, `reshape-broadcast-scalar`,
//!   `broadcast-noop`, `broadcast-broadcast`, `transpose-identity`, `transpose-transpose`,
//!   `transpose-dot`, `transpose-degenerate`, `slice-noop`, `slice-slice`, `slice-concat`, `slice-broadcast`,
//!   `slice-iota`, `pad-noop`, `concat-single`, `concat-drop-empty`, `concat-adjacent-slices`,
//!   `concat-broadcast-scalar`, `reverse-degenerate`, `reverse-reverse`, `dynamic-slice-full`,
//!   `dynamic-slice-constant`, `dus-full`, `dus-empty`, `iota-degenerate`;
//! - reductions and dots (`reduce`): `reduce-trivial`, `reduce-empty`, `dot-trivial-contract`,
//!   `dot-empty-contract`.
//!
//! Read phase: every live instruction is matched in parallel (one opcode dispatch, rules look at
//! operands a bounded number of levels down), giving an ordered plan of `(id, rule, rewrite)`.
//! Write phase: [`crate::rewrite::apply`] in plan order. One sweep rewrites each instruction at
//! most once; run it in a `fixpoint` group to reach a fixed point. Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: a valid module computing the same values;
//! replaced instructions are dead (left for `dce`).
//!
//! Counters: one per rule, named as the rule.

mod arith;
mod convert;
mod logic;
mod reduce;
mod shapes;

use axle_analysis::LazyUsers;
use axle_ir::{Changed, InstId, Module, Opcode, Pass, PassCx, PassError, Shape};
use rayon::prelude::*;

use crate::rewrite::{apply_plan_by_rule, Rewrite};

/// What a rule returns: its name and the rewrite.
pub(crate) type Hit = Option<(&'static str, Rewrite)>;

/// What rules can look at.
pub(crate) struct Cx<'a> {
    pub m: &'a Module,
    pub users: LazyUsers<'a>,
}

/// The `algsimp` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct AlgSimp;

fn has_dynamic_shape(m: &Module, id: InstId) -> bool {
    matches!(m.shape(id), Shape::Array(a) if a.is_dynamic())
}

/// The first rule that matches at `id`.
pub(crate) fn match_at(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let op = m.opcode(id);
    if matches!(
        op,
        Opcode::Parameter | Opcode::Constant | Opcode::Tuple | Opcode::GetTupleElement
    ) || !m.control_predecessors(id).is_empty()
        || has_dynamic_shape(m, id)
        || m.operands(id).iter().any(|&o| has_dynamic_shape(m, o))
    {
        return None;
    }
    use Opcode::*;
    match op {
        Add | Subtract | Multiply | Divide | Maximum | Minimum | Power | Negate | Abs | Floor
        | Ceil | RoundNearestAfz | RoundNearestEven | Sign | ShiftLeft | ShiftRightArithmetic
        | ShiftRightLogical => arith::rules(cx, id),
        And | Or | Xor | Not | Select | Compare => logic::rules(cx, id),
        Convert | BitcastConvert | Copy => convert::rules(cx, id),
        CustomCall => convert::annotation(cx, id),
        AllReduce | AllGather | ReduceScatter | AllToAll | CollectivePermute => {
            convert::lone_collective(cx, id)
        }
        AsyncStart | AsyncDone => convert::async_to_sync(cx, id),
        Conditional => logic::conditional_to_select(cx, id),
        Reshape | Broadcast | Transpose | Slice | Pad | Concatenate | Reverse | DynamicSlice
        | DynamicUpdateSlice | Iota => shapes::rules(cx, id),
        Reduce | Dot => reduce::rules(cx, id),
        _ => None,
    }
}

impl Pass for AlgSimp {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<(InstId, [&'static str; 1], Rewrite)> = {
            let rcx = Cx {
                m,
                users: LazyUsers::new(m),
            };
            m.live_ids()
                .into_par_iter()
                .filter_map(|id| match_at(&rcx, id).map(|(rule, r)| (id, [rule], r)))
                .collect()
        };
        Ok(apply_plan_by_rule(m, plan, cx))
    }
}
