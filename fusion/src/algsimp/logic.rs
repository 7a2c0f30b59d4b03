//! Logic rules: bitwise identities on integers and `pred`, `select` and `compare` with trivial
//! operands. Comparisons of a value with itself fold only where NaN cannot interfere.

use axle_ir::{
    AttrKey, AttrValue, ComparisonDirection, ComparisonType, ElementType, InstId, Opcode, Shape,
};

use super::{Cx, Hit};
use crate::rewrite::{
    all_ones, elem_ty, forward, is_int_splat, splat, splat_nodes, Node, Num, Rewrite, ShapeSpec,
    Val,
};

fn hit(rule: &'static str, r: Option<Rewrite>) -> Hit {
    r.map(|r| (rule, r))
}

pub(super) fn rules(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let ops = m.operands(id);
    use Opcode::*;
    match m.opcode(id) {
        And | Or | Xor => {
            let ty = elem_ty(m, id)?;
            if !(ty.is_int() || ty.is_pred()) {
                return None;
            }
            let (a, b) = (ops[0], ops[1]);
            let op = m.opcode(id);
            if a == b {
                return match op {
                    And => hit("and-self", forward(m, id, a)),
                    Or => hit("or-self", forward(m, id, a)),
                    _ => hit(
                        "xor-self",
                        splat_nodes(m, id, Num::Int(0)).map(Rewrite::Build),
                    ),
                };
            }
            let ones = all_ones(ty);
            for (x, c) in [(a, b), (b, a)] {
                let zero = is_int_splat(m, c, 0);
                let full = is_int_splat(m, c, ones);
                match op {
                    And if full => return hit("and-ones", forward(m, id, x)),
                    And if zero => return hit("and-zero", forward(m, id, c)),
                    Or if zero => return hit("or-zero", forward(m, id, x)),
                    Or if full => return hit("or-ones", forward(m, id, c)),
                    Xor if zero => return hit("xor-zero", forward(m, id, x)),
                    _ => {}
                }
            }
            None
        }
        Not => {
            let x = ops[0];
            (m.opcode(x) == Not)
                .then(|| hit("not-not", forward(m, id, m.operands(x)[0])))
                .flatten()
        }
        Select => {
            let (p, a, b) = (ops[0], ops[1], ops[2]);
            if a == b {
                return hit("select-same", forward(m, id, a));
            }
            match splat(m, p) {
                Some(Num::Int(0)) => return hit("select-const-pred", forward(m, id, b)),
                Some(Num::Int(_)) => return hit("select-const-pred", forward(m, id, a)),
                _ => {}
            }
            if m.opcode(p) == Not {
                let q = m.operands(p)[0];
                return hit(
                    "select-not-pred",
                    Some(Rewrite::Build(vec![Node::new(
                        Select,
                        ShapeSpec::Of(id),
                        vec![Val::Old(q), Val::Old(b), Val::Old(a)],
                    )])),
                );
            }
            None
        }
        Compare => {
            let (a, b) = (ops[0], ops[1]);
            let dir = match m.attr(id, &AttrKey::Direction) {
                Some(AttrValue::Direction(d)) => *d,
                _ => return None,
            };
            let oty = elem_ty(m, a)?;
            let total = matches!(
                m.attr(id, &AttrKey::Type),
                Some(AttrValue::CmpType(ComparisonType::TotalOrder))
            );
            let nan_free = !oty.is_floating() || total;
            use ComparisonDirection::*;
            if a == b {
                let v = match dir {
                    Lt | Gt => Some(false),
                    Ne if nan_free => Some(false),
                    Eq | Le | Ge if nan_free => Some(true),
                    _ => None,
                };
                if let Some(v) = v {
                    return hit(
                        "compare-self",
                        splat_nodes(m, id, Num::Int(v as i128)).map(Rewrite::Build),
                    );
                }
            }
            if oty.is_pred() {
                for (x, c) in [(a, b), (b, a)] {
                    match (dir, splat(m, c)) {
                        (Eq, Some(Num::Int(1))) | (Ne, Some(Num::Int(0))) => {
                            return hit("compare-pred-const", forward(m, id, x))
                        }
                        _ => {}
                    }
                }
            }
            None
        }
        _ => None,
    }
}

/// `conditional-to-select` (XLA's `ConditionalToSelect`): in a computation a `map` applies per
/// element, a `conditional` on a `pred` whose result is an array and whose two branches have no
/// effect runs both branches as `call`s and picks with `select` (the predicate broadcast to the result's dimensions), the same value: a
/// branch without effects computes it whether or not it is picked. The map's computation so
/// keeps no control flow.
pub(super) fn conditional_to_select(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let ops = m.operands(id);
    let [p, t, f] = ops[..] else {
        return None;
    };
    let Shape::Array(out) = m.shape(id) else {
        return None;
    };
    let dims = out.dims.to_vec();
    if !matches!(m.shape(p), Shape::Array(a) if a.dims.is_empty()) || !elem_ty(m, p)?.is_pred() {
        return None;
    }
    let branches = m.branch_computations(id)?;
    let [tc, fc] = branches[..] else {
        return None;
    };
    // Only where it runs per element (XLA's pass too): elsewhere both branches would run in
    // full where one is taken.
    let parent = m.parent(id);
    let per_element = m
        .live_ids()
        .into_iter()
        .any(|i| m.opcode(i) == Opcode::Map && m.comp_attr(i, &AttrKey::ToApply) == Some(parent));
    if !per_element {
        return None;
    }
    let effectful = axle_ir::passes::effectful_computations(m);
    if effectful.contains(tc) || effectful.contains(fc) {
        return None;
    }
    let call = |arg: InstId, c| {
        Node::new(Opcode::Call, ShapeSpec::Of(id), vec![Val::Old(arg)])
            .attr(AttrKey::ToApply, AttrValue::Comp(c))
    };
    let mut nodes = vec![call(t, tc), call(f, fc)];
    let pred = if dims.is_empty() {
        Val::Old(p)
    } else {
        nodes.push(
            Node::new(
                Opcode::Broadcast,
                ShapeSpec::Array(ElementType::Pred, dims),
                vec![Val::Old(p)],
            )
            .attr(AttrKey::Dimensions, AttrValue::Ints(Box::new([]))),
        );
        Val::New(2)
    };
    nodes.push(Node::new(
        Opcode::Select,
        ShapeSpec::Of(id),
        vec![pred, Val::New(0), Val::New(1)],
    ));
    hit("conditional-to-select", Some(Rewrite::Build(nodes)))
}
