//! `while-simplify`: simplifies `while` loops.
//!
//! Rules (counters named as the rules):
//! - `trip-count-zero`: a loop whose condition is false on the initial value (a constant
//!   `false`, or an induction variable that fails the test at its start) is its initial value;
//! - `trip-count-one`: a loop whose induction variable passes the test at its start and fails
//!   it after one step runs its body once: it becomes a `call` of the body (which `inline` then
//!   inlines);
//! - `pass-through`: `get-tuple-element(while, j)` where the body passes element `j` through
//!   unchanged is element `j` of the initial value;
//! - `constant-sink`: inside the body and condition of a loop, a loop-invariant element whose
//!   initial value is a constant is that constant (loop-invariant code then folds around it).
//!
//! An induction variable is element `k` of a tuple state whose initial value is a tuple with an
//! integer constant at `k`, whose body adds an integer constant to it, and which the condition
//! compares with an integer constant (`compare(get-tuple-element(p, k), c)`, either side).
//! Arithmetic wraps in the element type, as the program's does.
//!
//! Read phase: loops and the get-tuple-elements of their state, matched in parallel. Write
//! phase: [`crate::rewrite::apply`]. Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values and effects (a loop is
//! removed or unrolled only when its trip count is known; the condition has no effect to lose,
//! since conditions are side-effect free in valid modules).

use hashbrown::HashMap;
use rayon::prelude::*;

use axle_ir::literal::{element_to_i128, i128_to_element};
use axle_ir::passes::{for_each_callee, Structure};
use axle_ir::{
    AttrKey, AttrValue, Changed, CompId, ComparisonDirection, ComparisonType, ElementType, InstId,
    Literal, Module, Opcode, Pass, PassCx, PassError,
};

use crate::rewrite::{apply, elem_ty, forward, int, splat, Node, Num, Rewrite, ShapeSpec, Val};

/// The `while-simplify` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct WhileSimplify;

struct Loop {
    init: InstId,
    cond: CompId,
    body: CompId,
}

fn loop_parts(m: &Module, w: InstId) -> Option<Loop> {
    if m.opcode(w) != Opcode::While {
        return None;
    }
    Some(Loop {
        init: *m.operands(w).first()?,
        cond: m.comp_attr(w, &AttrKey::Condition)?,
        body: m.comp_attr(w, &AttrKey::Body)?,
    })
}

/// The only parameter of computation `c`.
fn param(m: &Module, c: CompId) -> Option<InstId> {
    match m.params(c) {
        [p] if !p.is_none() => Some(*p),
        _ => None,
    }
}

/// Whether `g` is `get-tuple-element(p, k)`; returns `k`.
fn gte_of(m: &Module, g: InstId, p: InstId) -> Option<usize> {
    (m.opcode(g) == Opcode::GetTupleElement && m.operands(g)[0] == p)
        .then(|| int(m, g, &AttrKey::Index))
        .flatten()
        .and_then(|k| usize::try_from(k).ok())
}

/// A scalar integer constant's value.
fn scalar_int(m: &Module, i: InstId) -> Option<i128> {
    if m.opcode(i) != Opcode::Constant || !crate::rewrite::dims(m, i)?.is_empty() {
        return None;
    }
    match splat(m, i)? {
        Num::Int(v) => Some(v),
        Num::Float(_) => None,
    }
}

fn wrap(ty: ElementType, v: i128) -> i128 {
    element_to_i128(ty, &i128_to_element(ty, v))
}

fn holds(dir: ComparisonDirection, a: i128, b: i128) -> bool {
    use ComparisonDirection::*;
    match dir {
        Eq => a == b,
        Ne => a != b,
        Lt => a < b,
        Le => a <= b,
        Gt => a > b,
        Ge => a >= b,
    }
}

/// The condition's test on the loop state, if it is `compare(element k, constant)` (either
/// side) on an integer element: `(k, test)`.
fn cond_test(m: &Module, l: &Loop) -> Option<(usize, impl Fn(i128) -> bool)> {
    let p = param(m, l.cond)?;
    let r = m.root(l.cond);
    if m.opcode(r) != Opcode::Compare {
        return None;
    }
    let dir = match m.attr(r, &AttrKey::Direction) {
        Some(AttrValue::Direction(d)) => *d,
        _ => return None,
    };
    let (a, b) = (m.operands(r)[0], m.operands(r)[1]);
    let ty = elem_ty(m, a)?;
    if !ty.is_int() {
        return None;
    }
    if let Some(AttrValue::CmpType(t)) = m.attr(r, &AttrKey::Type) {
        if *t != ComparisonType::default_for(ty) {
            return None;
        }
    }
    if let (Some(k), Some(c)) = (gte_of(m, a, p), scalar_int(m, b)) {
        return Some((
            k,
            Box::new(move |v| holds(dir, v, c)) as Box<dyn Fn(i128) -> bool>,
        ));
    }
    if let (Some(c), Some(k)) = (scalar_int(m, a), gte_of(m, b, p)) {
        return Some((
            k,
            Box::new(move |v| holds(dir, c, v)) as Box<dyn Fn(i128) -> bool>,
        ));
    }
    None
}

/// The trip count if it is 0 or 1 (None when unknown or larger).
fn short_trip_count(m: &Module, l: &Loop) -> Option<u32> {
    let r = m.root(l.cond);
    if m.opcode(r) == Opcode::Constant {
        return match splat(m, r)? {
            Num::Int(0) => Some(0),
            _ => None,
        };
    }
    let (k, test) = cond_test(m, l)?;
    if m.opcode(l.init) != Opcode::Tuple {
        return None;
    }
    let iv = *m.operands(l.init).get(k)?;
    let start = scalar_int(m, iv)?;
    let ty = elem_ty(m, iv)?;
    if !test(start) {
        return Some(0);
    }
    // One step of the body: element k must be element k plus a constant.
    let bp = param(m, l.body)?;
    let br = m.root(l.body);
    if m.opcode(br) != Opcode::Tuple {
        return None;
    }
    let next = *m.operands(br).get(k)?;
    let step = if gte_of(m, next, bp) == Some(k) {
        0
    } else if m.opcode(next) == Opcode::Add {
        let (x, y) = (m.operands(next)[0], m.operands(next)[1]);
        if gte_of(m, x, bp) == Some(k) {
            scalar_int(m, y)?
        } else if gte_of(m, y, bp) == Some(k) {
            scalar_int(m, x)?
        } else {
            return None;
        }
    } else {
        return None;
    };
    (!test(wrap(ty, start + step))).then_some(1)
}

/// Whether the body of `l` passes element `j` through unchanged.
fn passes_through(m: &Module, l: &Loop, j: usize) -> bool {
    let (Some(bp), br) = (param(m, l.body), m.root(l.body)) else {
        return false;
    };
    m.opcode(br) == Opcode::Tuple
        && m.operands(br)
            .get(j)
            .is_some_and(|&e| gte_of(m, e, bp) == Some(j))
}

struct Cx<'a> {
    m: &'a Module,
    effectful: Vec<bool>,
    /// For a computation used by exactly one instruction, which is a `while` (as its body or
    /// condition): that loop.
    sole_loop: HashMap<CompId, InstId>,
}

fn match_at(cx: &Cx<'_>, id: InstId) -> Option<(&'static str, Rewrite)> {
    let m = cx.m;
    match m.opcode(id) {
        Opcode::While => {
            let l = loop_parts(m, id)?;
            if !m.control_predecessors(id).is_empty() {
                return None;
            }
            // Removing or unrolling the loop skips evaluations of the condition.
            if cx.effectful.get(l.cond.index()).copied().unwrap_or(true) {
                return None;
            }
            match short_trip_count(m, &l)? {
                0 => forward(m, id, l.init).map(|r| ("trip-count-zero", r)),
                1 => Some((
                    "trip-count-one",
                    Rewrite::Build(vec![Node::new(
                        Opcode::Call,
                        ShapeSpec::Of(id),
                        vec![Val::Old(l.init)],
                    )
                    .attr(AttrKey::ToApply, AttrValue::Comp(l.body))]),
                )),
                _ => None,
            }
        }
        Opcode::GetTupleElement => {
            let t = m.operands(id)[0];
            let j = usize::try_from(int(m, id, &AttrKey::Index)?).ok()?;
            if let Some(l) = loop_parts(m, t) {
                if !passes_through(m, &l, j) {
                    return None;
                }
                if m.opcode(l.init) == Opcode::Tuple {
                    let e = *m.operands(l.init).get(j)?;
                    return forward(m, id, e).map(|r| ("pass-through", r));
                }
                return Some((
                    "pass-through",
                    Rewrite::Build(vec![Node::new(
                        Opcode::GetTupleElement,
                        ShapeSpec::Of(id),
                        vec![Val::Old(l.init)],
                    )
                    .attr(AttrKey::Index, AttrValue::Int(j as i64))]),
                ));
            }
            // Inside a loop's body or condition: an invariant element with a constant start.
            if m.opcode(t) != Opcode::Parameter {
                return None;
            }
            let c = m.parent(id);
            let w = *cx.sole_loop.get(&c)?;
            let l = loop_parts(m, w)?;
            if param(m, c) != Some(t) || !passes_through(m, &l, j) {
                return None;
            }
            if m.opcode(l.init) != Opcode::Tuple {
                return None;
            }
            let e = *m.operands(l.init).get(j)?;
            let lit: &Literal = m.literal(e)?;
            if m.opcode(e) != Opcode::Constant || m.shape_id(e) != m.shape_id(id) {
                return None;
            }
            Some((
                "constant-sink",
                Rewrite::Build(vec![Node {
                    opcode: Opcode::Constant,
                    shape: ShapeSpec::Of(id),
                    operands: Vec::new(),
                    attrs: Vec::new(),
                    literal: Some(lit.clone()),
                }]),
            ))
        }
        _ => None,
    }
}

impl Pass for WhileSimplify {
    fn run(&mut self, m: &mut Module, pcx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let live = m.live_ids();
        let loops: Vec<InstId> = live
            .par_iter()
            .copied()
            .filter(|&i| m.opcode(i) == Opcode::While)
            .collect();
        if loops.is_empty() {
            return Ok(false);
        }
        let mut uses: HashMap<CompId, (u32, InstId)> = HashMap::new();
        for &i in &live {
            for_each_callee(m, i, |c| {
                let e = uses.entry(c).or_insert((0, i));
                e.0 += 1;
            });
        }
        let mut sole_loop = HashMap::new();
        for &w in &loops {
            if let Some(l) = loop_parts(m, w) {
                for c in [l.body, l.cond] {
                    if uses.get(&c).is_some_and(|&(n, i)| n == 1 && i == w) {
                        sole_loop.insert(c, w);
                    }
                }
            }
        }
        let cx = Cx {
            m,
            effectful: pcx.analysis::<Structure>(m).effectful.clone(),
            sole_loop,
        };
        let plan: Vec<(InstId, &'static str, Rewrite)> = live
            .into_par_iter()
            .filter_map(|id| match_at(&cx, id).map(|(n, r)| (id, n, r)))
            .collect();
        if plan.is_empty() {
            return Ok(false);
        }
        let mut rw = m.rewriter();
        for (id, rule, r) in plan {
            if apply(&mut rw, id, r) {
                pcx.count(rule, 1);
            }
        }
        Ok(rw.finish())
    }
}
