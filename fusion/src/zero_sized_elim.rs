//! `zero-sized-elim`: replaces every array value with no elements by an empty constant.
//!
//! An instruction whose result is a static array with a zero-sized dimension computes nothing;
//! unless it is a parameter, a constant already, or has an effect (its own or through a called
//! computation), it becomes `constant({})` of its shape, and what it used may become dead.
//!
//! Read phase: a parallel sweep over the shape column. Write phase: one constant per match,
//! forwarded through the rewriter. Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values; no side-effect-free
//! computation of an empty array is left, except where its constant's text would be long: an
//! empty array's literal prints one `{}` per row before its first zero dimension
//! (`f32[1000000000000,0]` is 10^12 of them, as XLA writes it), so arrays with more than
//! [`MAX_PRINTED_ROWS`] such rows keep their instruction, which computes nothing anyway.
//!
//! Counters: `replaced`.

use axle_ir::passes::{is_effectful, Structure};
use axle_ir::{ArrayLiteral, Changed, InstId, Module, Opcode, Pass, PassCx, PassError};
use rayon::prelude::*;

use crate::rewrite::{apply_plan, array, Node, Rewrite, ShapeSpec};

/// The most rows (`{}` in the printed literal) an empty constant made by the pass may have.
pub const MAX_PRINTED_ROWS: i64 = 1 << 12;

/// The rows of an empty array's printed literal: the product of its dimensions before the
/// first zero one (saturating).
fn printed_rows(dims: &[i64]) -> i64 {
    dims.iter()
        .take_while(|&&d| d != 0)
        .fold(1i64, |a, &d| a.saturating_mul(d))
}

/// The `zero-sized-elim` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct ZeroSizedElim;

impl Pass for ZeroSizedElim {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let empty = |id: InstId| {
            array(m, id)
                .is_some_and(|a| a.num_elements() == 0 && printed_rows(&a.dims) <= MAX_PRINTED_ROWS)
                && !matches!(m.opcode(id), Opcode::Parameter | Opcode::Constant)
                && m.control_predecessors(id).is_empty()
        };
        let candidates: Vec<InstId> = m
            .live_ids()
            .into_par_iter()
            .filter(|&id| empty(id))
            .collect();
        if candidates.is_empty() {
            return Ok(false);
        }
        let s = cx.analysis::<Structure>(m);
        let plan: Vec<(InstId, Rewrite)> = candidates
            .into_iter()
            .filter_map(|id| {
                if is_effectful(m, id, &s.effectful) {
                    return None;
                }
                let a = array(m, id)?;
                let mut c = Node::constant(ArrayLiteral::zeros(a.clone()));
                c.shape = ShapeSpec::Of(id);
                Some((id, Rewrite::Build(vec![c])))
            })
            .collect();
        Ok(apply_plan(m, plan, cx, "replaced"))
    }
}
