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
//!   initial value is a constant is that constant (loop-invariant code then folds around it);
//! - `dead-element`: state elements nothing needs (no reader after the loop, none in the
//!   condition, and none among the other elements' next values or the body's effects) leave the
//!   state: the loop, its initial value, both parameters and the body's root take the smaller
//!   tuple, every `get-tuple-element` is renumbered and the work that computed them goes (the
//!   counter counts removed elements);
//! - `invariant-hoist`: loop-invariant code motion: computations of the body whose operands are
//!   all invariant (elements passed through unchanged, constants, other invariants) and that
//!   have no effect are computed once before the loop; each value the rest of the body uses
//!   becomes a new pass-through state element (constants, broadcasts, iotas and reshapes, as
//!   cheap to recompute as to carry, are not hoisted by themselves).
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

use axle_analysis::Users;
use axle_ir::entity::{dense_map, EntitySet, PackedOption, SecondaryMap};
use axle_ir::literal::{element_to_i128, i128_to_element};
use axle_ir::passes::is_effectful;
use axle_ir::passes::{for_each_callee, Structure};
use axle_ir::{
    AttrKey, AttrValue, Changed, CompId, ComparisonDirection, ComparisonType, ElementType, InstId,
    InstsByComp, Layout, LayoutId, Literal, Module, Opcode, Pass, PassCx, PassError, Shape,
    ShapeId,
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

/// Whether the body of `l` passes element `j` through unchanged (a body whose root is its
/// parameter passes every element through).
fn passes_through(m: &Module, l: &Loop, j: usize) -> bool {
    let (Some(bp), br) = (param(m, l.body), m.root(l.body)) else {
        return false;
    };
    if br == bp {
        return true;
    }
    m.opcode(br) == Opcode::Tuple
        && m.operands(br)
            .get(j)
            .is_some_and(|&e| gte_of(m, e, bp) == Some(j))
}

struct Cx<'a> {
    m: &'a Module,
    effectful: EntitySet<CompId>,
    /// For a computation used by exactly one instruction, which is a `while` (as its body or
    /// condition): that loop.
    sole_loop: SecondaryMap<CompId, PackedOption<InstId>>,
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
            if l.cond.index() >= m.comp_capacity() || cx.effectful.contains(l.cond) {
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
            let w = cx.sole_loop[c].expand()?;
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

/// A loop whose state elements `dead` (sorted) nothing needs: the plan of `dead-element`.
struct DeadElements {
    w: InstId,
    dead: Vec<usize>,
}

/// The elements of loop `w`'s tuple state that nothing reads: no `get-tuple-element` of the
/// loop outside, none of the condition's parameter, and none of the body's parameter that the
/// other elements' next values or the body's effects depend on. Needs the loop to be the only
/// user of its body and condition, every use of the loop and of both parameters to be a
/// `get-tuple-element`, and the body's root to be a tuple.
fn dead_elements(
    cx: &Cx<'_>,
    users: &Users,
    by_comp: &InstsByComp,
    w: InstId,
) -> Option<DeadElements> {
    let m = cx.m;
    let l = loop_parts(m, w)?;
    let Shape::Tuple(elems) = m.shape(w) else {
        return None;
    };
    let n = elems.len();
    if n < 2
        || cx.sole_loop[l.body].expand() != Some(w)
        || cx.sole_loop[l.cond].expand() != Some(w)
        || !m.control_predecessors(w).is_empty()
        || users.is_root(w)
    {
        return None;
    }
    let (bp, cp) = (param(m, l.body)?, param(m, l.cond)?);
    let br = m.root(l.body);
    if m.opcode(br) != Opcode::Tuple || br == bp {
        return None;
    }
    let mut read = vec![false; n];
    for (p, include) in [(w, true), (cp, true), (bp, false)] {
        if users.is_root(p) {
            return None;
        }
        for &u in users.users(p) {
            if m.opcode(u) != Opcode::GetTupleElement {
                return None;
            }
            let k = usize::try_from(int(m, u, &AttrKey::Index)?).ok()?;
            if include && k < n {
                read[k] = true;
            }
        }
    }
    // Elements the others need, found by walking back from the kept elements' next values and
    // from effectful instructions of the body, until nothing new is needed.
    let pos: HashMap<InstId, ()> = by_comp[l.body].iter().map(|&i| (i, ())).collect();
    let mut needed = read;
    loop {
        let mut seen: hashbrown::HashSet<InstId> = hashbrown::HashSet::new();
        let mut stack: Vec<InstId> = (0..n)
            .filter(|&k| needed[k])
            .map(|k| m.operands(br)[k])
            .collect();
        stack.extend(
            by_comp[l.body]
                .iter()
                .copied()
                .filter(|&i| is_effectful(m, i, &cx.effectful)),
        );
        let mut grew = false;
        while let Some(i) = stack.pop() {
            if !seen.insert(i) || !pos.contains_key(&i) {
                continue;
            }
            if let Some(k) = gte_of(m, i, bp) {
                if k < n && !needed[k] {
                    needed[k] = true;
                    grew = true;
                }
            }
            stack.extend(m.operands(i).iter().copied());
            stack.extend(m.control_predecessors(i).iter().copied());
        }
        if !grew {
            break;
        }
    }
    let dead: Vec<usize> = (0..n).filter(|&k| !needed[k]).collect();
    (!dead.is_empty() && dead.len() < n).then_some(DeadElements { w, dead })
}

/// Removes the dead elements of a loop's state: the loop, its initial value, the parameters of
/// its body and condition and the body's root take the smaller tuple, and every
/// `get-tuple-element` of the state is renumbered.
fn remove_dead_elements(
    rw: &mut axle_ir::Rewriter<'_>,
    users: &Users,
    by_comp: &InstsByComp,
    effectful: &EntitySet<CompId>,
    d: &DeadElements,
) -> bool {
    let m = rw.module();
    let Some(l) = loop_parts(m, d.w) else {
        return false;
    };
    let (Some(bp), Some(cp)) = (param(m, l.body), param(m, l.cond)) else {
        return false;
    };
    let br = m.root(l.body);
    let Shape::Tuple(elems) = m.shape(d.w).clone() else {
        return false;
    };
    let n = elems.len();
    let keep: Vec<usize> = (0..n).filter(|k| !d.dead.contains(k)).collect();
    let mut new_index = vec![usize::MAX; n];
    for (j, &k) in keep.iter().enumerate() {
        new_index[k] = j;
    }
    let layouts: Option<Vec<LayoutId>> = match m.layout_of(m.layout_id(d.w)) {
        Layout::Tuple(ls) if ls.len() == n => Some(keep.iter().map(|&k| ls[k]).collect()),
        _ => None,
    };
    let shape_elems: Vec<ShapeId> = keep.iter().map(|&k| elems[k]).collect();
    let comp = m.parent(d.w);
    let init = rw.resolve(l.init);
    let init_is_tuple = m.opcode(init) == Opcode::Tuple;
    let init_ops: Vec<InstId> = if init_is_tuple {
        m.operands(init).to_vec()
    } else {
        Vec::new()
    };
    let root_ops: Vec<InstId> = m.operands(br).iter().map(|&o| rw.resolve(o)).collect();
    let gtes: Vec<InstId> = [d.w, bp, cp]
        .iter()
        .flat_map(|&p| users.users(p).iter().copied())
        .collect();
    let mm = rw.module_mut();
    let s = mm.intern_shape(Shape::Tuple(shape_elems.into()));
    let lay = match layouts {
        Some(ls) => mm.intern_layout(Layout::Tuple(ls.into())),
        None => mm.no_layout(),
    };
    let mut parts: Vec<InstId> = Vec::with_capacity(keep.len());
    for &k in &keep {
        if init_is_tuple {
            parts.push(init_ops[k]);
        } else {
            let (es, el) = (
                elems[k],
                match mm.layout_of(mm.layout_id(init)) {
                    Layout::Tuple(ls) if ls.len() == n => ls[k],
                    _ => mm.no_layout(),
                },
            );
            let g = mm.push_inst_parts(
                comp,
                Opcode::GetTupleElement,
                es,
                el,
                &[init],
                &mut vec![(AttrKey::Index, AttrValue::Int(k as i64))],
                "",
            );
            parts.push(g);
        }
    }
    let new_init = mm.push_inst_parts(comp, Opcode::Tuple, s, lay, &parts, &mut Vec::new(), "");
    mm.set_operands(d.w, &[new_init]);
    mm.set_shape(d.w, s, lay);
    mm.set_shape(bp, s, lay);
    mm.set_shape(cp, s, lay);
    let kept_root: Vec<InstId> = keep.iter().map(|&k| root_ops[k]).collect();
    mm.set_operands(br, &kept_root);
    mm.set_shape(br, s, lay);
    for g in gtes {
        if !mm.is_live(g) {
            continue;
        }
        let Some(k) = int(mm, g, &AttrKey::Index).and_then(|k| usize::try_from(k).ok()) else {
            continue;
        };
        if k < n && new_index[k] != usize::MAX {
            let attrs: Vec<axle_ir::Attr> = mm
                .attrs(g)
                .iter()
                .map(|(key, v)| {
                    if *key == AttrKey::Index {
                        (key.clone(), AttrValue::Int(new_index[k] as i64))
                    } else {
                        (key.clone(), v.clone())
                    }
                })
                .collect();
            mm.set_attrs(g, attrs);
        }
    }
    // What computed the dead elements' next values is dead now (and may read a dead element):
    // remove it, so the body is valid again at once.
    let mut live_set: hashbrown::HashSet<InstId> = hashbrown::HashSet::new();
    let mut stack: Vec<InstId> = vec![br];
    stack.extend(by_comp[l.body].iter().copied().filter(|&i| {
        mm.is_live(i) && (mm.opcode(i) == Opcode::Parameter || is_effectful(mm, i, effectful))
    }));
    while let Some(i) = stack.pop() {
        if !live_set.insert(i) {
            continue;
        }
        stack.extend(mm.operands(i).iter().copied());
        stack.extend(mm.control_predecessors(i).iter().copied());
    }
    let dead_insts: Vec<InstId> = by_comp[l.body]
        .iter()
        .copied()
        .filter(|&i| mm.is_live(i) && !live_set.contains(&i))
        .collect();
    for i in dead_insts {
        rw.remove(i);
    }
    true
}

/// The plan of `invariant-hoist` for one loop: the body's loop-invariant computations to move
/// out (in topological order), and which of them become new state elements.
struct Hoist {
    w: InstId,
    /// Every invariant instruction to copy out, in topological order.
    copy: Vec<InstId>,
    /// The copied instructions the rest of the body uses: each becomes a state element.
    roots: Vec<InstId>,
}

/// Whether hoisting `op` out of a loop is worth a state element: not for what is as cheap to
/// recompute as to carry (constants, broadcasts, iotas, reshapes, get-tuple-elements).
fn worth_hoisting(op: Opcode) -> bool {
    !matches!(
        op,
        Opcode::Constant
            | Opcode::Broadcast
            | Opcode::Iota
            | Opcode::Reshape
            | Opcode::Bitcast
            | Opcode::GetTupleElement
            | Opcode::Parameter
            | Opcode::Tuple
    )
}

/// Loop-invariant computations of loop `w`'s body: instructions without effects whose operands
/// are all invariant, starting from the elements the body passes through unchanged and from
/// constants. Needs the loop to be the only user of its body and condition, a tuple initial
/// value, a tuple root, and every use of the loop to be a `get-tuple-element` (the state grows).
fn invariants(cx: &Cx<'_>, users: &Users, s: &Structure, w: InstId) -> Option<Hoist> {
    let m = cx.m;
    let l = loop_parts(m, w)?;
    if cx.sole_loop[l.body].expand() != Some(w)
        || cx.sole_loop[l.cond].expand() != Some(w)
        || !m.control_predecessors(w).is_empty()
        || users.is_root(w)
        || m.opcode(l.init) != Opcode::Tuple
        || !users
            .users(w)
            .iter()
            .all(|&u| m.opcode(u) == Opcode::GetTupleElement)
    {
        return None;
    }
    let Shape::Tuple(elems) = m.shape(w) else {
        return None;
    };
    let n = elems.len();
    let bp = param(m, l.body)?;
    let br = m.root(l.body);
    if m.opcode(br) != Opcode::Tuple || users.is_root(bp) {
        return None;
    }
    let mut inv: hashbrown::HashSet<InstId> = hashbrown::HashSet::new();
    for &i in &s.topo[l.body] {
        let op = m.opcode(i);
        let base = match gte_of(m, i, bp) {
            Some(j) => j < n && passes_through(m, &l, j),
            None => {
                op == Opcode::Constant
                    || (op != Opcode::Parameter
                        && op != Opcode::Tuple
                        && !is_effectful(m, i, &cx.effectful)
                        && m.control_predecessors(i).is_empty()
                        && matches!(m.shape(i), Shape::Array(_))
                        && !m.operands(i).is_empty()
                        && m.operands(i).iter().all(|o| inv.contains(o)))
            }
        };
        if base {
            inv.insert(i);
        }
    }
    // Hoist the invariant computations something variant (or the root) uses.
    let mut roots: Vec<InstId> = s.topo[l.body]
        .iter()
        .copied()
        .filter(|&i| {
            inv.contains(&i)
                && worth_hoisting(m.opcode(i))
                && users.users(i).iter().any(|u| !inv.contains(u))
        })
        .collect();
    roots.dedup();
    if roots.is_empty() {
        return None;
    }
    // Everything they need, in topological order.
    let mut need: hashbrown::HashSet<InstId> = hashbrown::HashSet::new();
    let mut stack = roots.clone();
    while let Some(i) = stack.pop() {
        if need.insert(i) && gte_of(m, i, bp).is_none() {
            stack.extend(m.operands(i).iter().copied());
        }
    }
    let copy: Vec<InstId> = s.topo[l.body]
        .iter()
        .copied()
        .filter(|i| need.contains(i))
        .collect();
    Some(Hoist { w, copy, roots })
}

/// Moves a loop's invariant computations out: copies them before the loop (reading the initial
/// value where the body read its pass-through elements), appends their values to the state as
/// pass-through elements, and makes the body read them from there.
fn hoist(rw: &mut axle_ir::Rewriter<'_>, h: &Hoist) -> bool {
    let m = rw.module();
    let Some(l) = loop_parts(m, h.w) else {
        return false;
    };
    let (Some(bp), Some(cp)) = (param(m, l.body), param(m, l.cond)) else {
        return false;
    };
    let br = m.root(l.body);
    let Shape::Tuple(elems) = m.shape(h.w).clone() else {
        return false;
    };
    let n = elems.len();
    let outer = m.parent(h.w);
    let init = l.init;
    let init_ops: Vec<InstId> = m.operands(init).iter().map(|&o| rw.resolve(o)).collect();
    let tuple_layouts: Option<Vec<LayoutId>> = match m.layout_of(m.layout_id(h.w)) {
        Layout::Tuple(ls) if ls.len() == n => Some(ls.to_vec()),
        _ => None,
    };
    // Copy the invariant computations out of the loop.
    let mut map: HashMap<InstId, InstId> = HashMap::new();
    for &i in &h.copy {
        let md = rw.module();
        if let Some(j) = gte_of(md, i, bp) {
            map.insert(i, init_ops[j]);
            continue;
        }
        let ops: Vec<InstId> = md
            .operands(i)
            .iter()
            .map(|o| map.get(&rw.resolve(*o)).or_else(|| map.get(o)).copied())
            .collect::<Option<_>>()
            .unwrap_or_default();
        if ops.len() != md.operands(i).len() {
            return false;
        }
        let mut attrs = md.attrs(i).to_vec();
        let (op, sh, la) = (md.opcode(i), md.shape_id(i), md.layout_id(i));
        let value = md.constant(i).cloned();
        let mm = rw.module_mut();
        let c = mm.push_inst_parts(outer, op, sh, la, &ops, &mut attrs, "");
        if let Some(v) = value {
            mm.set_constant(c, v);
        }
        map.insert(i, c);
    }
    // The new state: the old elements, then the hoisted values.
    let md = rw.module();
    let mut shapes: Vec<ShapeId> = elems.to_vec();
    let mut layouts = tuple_layouts.clone();
    for &r in &h.roots {
        shapes.push(md.shape_id(r));
        if let Some(ls) = layouts.as_mut() {
            ls.push(md.layout_id(r));
        }
    }
    let root_ops: Vec<InstId> = md.operands(br).iter().map(|&o| rw.resolve(o)).collect();
    let mut init_parts = init_ops.clone();
    init_parts.extend(h.roots.iter().map(|r| map[r]));
    let mm = rw.module_mut();
    let s = mm.intern_shape(Shape::Tuple(shapes.into()));
    let lay = match layouts {
        Some(ls) => mm.intern_layout(Layout::Tuple(ls.into())),
        None => mm.no_layout(),
    };
    let new_init = mm.push_inst_parts(
        outer,
        Opcode::Tuple,
        s,
        lay,
        &init_parts,
        &mut Vec::new(),
        "",
    );
    mm.set_operands(h.w, &[new_init]);
    mm.set_shape(h.w, s, lay);
    mm.set_shape(bp, s, lay);
    mm.set_shape(cp, s, lay);
    // Inside the body, each hoisted value is read from its state element, passed through.
    let mut reads = Vec::with_capacity(h.roots.len());
    for (t, &r) in h.roots.iter().enumerate() {
        let (sh, la) = (mm.shape_id(r), mm.layout_id(r));
        let g = mm.push_inst_parts(
            l.body,
            Opcode::GetTupleElement,
            sh,
            la,
            &[bp],
            &mut vec![(AttrKey::Index, AttrValue::Int((n + t) as i64))],
            "",
        );
        reads.push(g);
    }
    let mut new_root_ops = root_ops;
    new_root_ops.extend(reads.iter().copied());
    mm.set_operands(br, &new_root_ops);
    mm.set_shape(br, s, lay);
    for (&r, &g) in h.roots.iter().zip(&reads) {
        rw.replace_all_uses(r, g);
    }
    true
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
        // Per computation: how many instructions use it, and the first of them.
        let mut uses: SecondaryMap<CompId, (u32, PackedOption<InstId>)> =
            dense_map(m.comp_capacity(), (0, PackedOption::default()));
        for &i in &live {
            for_each_callee(m, i, |c| {
                let e = &mut uses[c];
                if e.0 == 0 {
                    e.1 = i.into();
                }
                e.0 += 1;
            });
        }
        let mut sole_loop = dense_map(m.comp_capacity(), PackedOption::default());
        for &w in &loops {
            if let Some(l) = loop_parts(m, w) {
                for c in [l.body, l.cond] {
                    if uses[c] == (1, w.into()) {
                        sole_loop[c] = w.into();
                    }
                }
            }
        }
        let structure = pcx.analysis::<Structure>(m);
        let users = pcx.analysis::<Users>(m);
        let cx = Cx {
            m,
            effectful: structure.effectful.clone(),
            sole_loop,
        };
        let plan: Vec<(InstId, &'static str, Rewrite)> = live
            .into_par_iter()
            .filter_map(|id| match_at(&cx, id).map(|(n, r)| (id, n, r)))
            .collect();
        // Loops whose trip count is settled this run are left alone by dead-element removal.
        let settled: hashbrown::HashSet<InstId> = plan
            .iter()
            .filter(|(_, rule, _)| rule.starts_with("trip-count"))
            .map(|(id, _, _)| *id)
            .collect();
        let mut dead: Vec<DeadElements> = loops
            .par_iter()
            .filter(|w| !settled.contains(*w))
            .filter_map(|&w| dead_elements(&cx, &users, &structure.by_comp, w))
            .collect();
        // Dead-element removal deletes a body's dead work from a list taken before the run, so
        // it must not run on a body that gains instructions this run: a loop in the body of a
        // loop that loses elements waits for the next run (its own removal would add a new
        // initial tuple there), and so does a loop whose body another rule rewrites (a loop
        // there that becomes a `call`, say).
        let busy: hashbrown::HashSet<CompId> = dead
            .iter()
            .filter_map(|d| loop_parts(cx.m, d.w).map(|l| l.body))
            .collect();
        let rewritten: hashbrown::HashSet<CompId> =
            plan.iter().map(|(id, _, _)| cx.m.parent(*id)).collect();
        let free = |w: InstId| {
            !busy.contains(&cx.m.parent(w))
                && loop_parts(cx.m, w).is_some_and(|l| !rewritten.contains(&l.body))
        };
        dead.retain(|d| free(d.w));
        // A loop changes shape once per run: invariants move out of loops that lose no element.
        let hoists: Vec<Hoist> = loops
            .par_iter()
            .filter(|w| free(**w))
            .filter(|w| !settled.contains(*w) && !dead.iter().any(|d| d.w == **w))
            .filter_map(|&w| invariants(&cx, &users, &structure, w))
            .collect();
        if plan.is_empty() && dead.is_empty() && hoists.is_empty() {
            return Ok(false);
        }
        let effectful = cx.effectful;
        let mut rw = m.rewriter();
        for (id, rule, r) in plan {
            if apply(&mut rw, id, r) {
                pcx.count(rule, 1);
            }
        }
        for d in &dead {
            if remove_dead_elements(&mut rw, &users, &structure.by_comp, &effectful, d) {
                pcx.count("dead-element", d.dead.len() as u64);
            }
        }
        for h in &hoists {
            if hoist(&mut rw, h) {
                pcx.count("invariant-hoist", h.roots.len() as u64);
            }
        }
        Ok(rw.finish())
    }
}
