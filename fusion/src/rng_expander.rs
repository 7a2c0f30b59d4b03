//! `rng-expander`: each `rng` instruction becomes elementwise ops around a constant of its unit
//! values (`axle_analysis::rng_op`, the generator the evaluator uses), so a backend without an
//! `rng` kernel gives the evaluator's values.
//!
//! `rng(a, b), distribution=rng_uniform` becomes `select(r < b', r, a')` with
//! `r = a' + (b' - a') * U` (`a'`, `b'` the scalars broadcast to the result's shape, `U` the
//! constant of unit values); `rng_normal` becomes `a' + b' * Z`. The last op takes the `rng`'s
//! name and users.
//!
//! Read phase: the plan (the unit values of each `rng`), in parallel. Write phase: the nodes.
//!
//! Pre-conditions: a valid module whose `rng` instructions have the names the evaluator sees
//! (run the pass first: the generator is keyed by the name). Post-conditions: a valid module
//! without `rng`; an `rng` the generator does not support (an integer type, more than
//! `axle_analysis::rng_op::MAX_ELEMENTS` elements) is an error naming it.
//!
//! Counters: `rng` (instructions expanded).

use axle_analysis::rng_op::{describe, unit_literal, Distribution};
use axle_ir::{
    AttrKey, AttrValue, Changed, ComparisonDirection, ElementType, InstId, Module, Opcode, Pass,
    PassCx, PassError,
};
use rayon::prelude::*;

use crate::rewrite::{apply_plan, ints_value, Node, Rewrite, ShapeSpec, Val};

/// The `rng-expander` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct RngExpander;

/// The nodes replacing `rng` instruction `id`.
fn expand(m: &Module, id: InstId) -> Result<Rewrite, String> {
    let (dist, ty, dims) = describe(m, id)?;
    let ops = m.operands(id);
    let (a, b) = (ops[0], ops[1]);
    let shape = || ShapeSpec::Array(ty, dims.clone());
    let bcast = |x: InstId| {
        Node::new(Opcode::Broadcast, shape(), vec![Val::Old(x)])
            .attr(AttrKey::Dimensions, ints_value(&[]))
    };
    let unit = Node::constant(unit_literal(m.name(id), dist, ty, &dims));
    let bin = |op: Opcode, x: u32, y: u32| Node::new(op, shape(), vec![Val::New(x), Val::New(y)]);
    let nodes = match dist {
        // 0: U, 1: a', 2: b', 3: b' - a', 4: (b' - a') * U, 5: r, 6: r < b', 7: the select.
        Distribution::Uniform => vec![
            unit,
            bcast(a),
            bcast(b),
            bin(Opcode::Subtract, 2, 1),
            bin(Opcode::Multiply, 3, 0),
            bin(Opcode::Add, 1, 4),
            Node::new(
                Opcode::Compare,
                ShapeSpec::Array(ElementType::Pred, dims.clone()),
                vec![Val::New(5), Val::New(2)],
            )
            .attr(
                AttrKey::Direction,
                AttrValue::Direction(ComparisonDirection::Lt),
            ),
            Node::new(
                Opcode::Select,
                ShapeSpec::Of(id),
                vec![Val::New(6), Val::New(5), Val::New(1)],
            ),
        ],
        // 0: Z, 1: mean', 2: sd', 3: sd' * Z, 4: the sum.
        Distribution::Normal => vec![
            unit,
            bcast(a),
            bcast(b),
            bin(Opcode::Multiply, 2, 0),
            Node::new(
                Opcode::Add,
                ShapeSpec::Of(id),
                vec![Val::New(1), Val::New(3)],
            ),
        ],
    };
    Ok(Rewrite::Build(nodes))
}

impl Pass for RngExpander {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<(InstId, Rewrite)> = m
            .live_ids()
            .into_par_iter()
            .filter(|&id| m.opcode(id) == Opcode::Rng)
            .map(|id| expand(m, id).map(|r| (id, r)))
            .collect::<Result<_, String>>()
            .map_err(PassError::new)?;
        Ok(apply_plan(m, plan, cx, "rng"))
    }
}
