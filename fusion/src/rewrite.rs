//! Plans and their application: what the read phase of a pass produces and the write phase
//! applies (DESIGN §3).
//!
//! A [`Rewrite`] replaces one instruction: by an existing value ([`Rewrite::Forward`]) or by the
//! last of a few new instructions ([`Rewrite::Build`]) whose operands are existing values or
//! earlier new nodes ([`Val`]). New shapes are described by value ([`ShapeSpec`]) because the
//! read phase only has `&Module` and cannot intern. [`apply`] runs in the write phase: it
//! re-checks that the rewrite still applies, resolves operands through the rewriter's forwarding
//! (a forwarded operand names an equal value), creates the nodes, gives the last node the
//! replaced instruction's name, and forwards every use.
//!
//! The module also has the small readers the simplification passes share: attribute lists,
//! static array shapes, and splat constants ([`splat`]); [`add_retyped`], the write-phase
//! step of the passes that move an op to another element type, with [`take_over`]; and
//! [`add_binary_computation`], the scalar reducers passes create.

use axle_ir::literal::{f64_to_element, i128_to_element};
use axle_ir::{
    ArrayLayout, ArrayLiteral, ArrayShape, Attr, AttrKey, AttrValue, CompId, ConstValue,
    ElementType, InstId, Layout, LayoutId, Literal, Module, NewInst, Opcode, Rewriter, Shape,
    ShapeId,
};

/// A value a rewrite refers to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Val {
    /// An existing instruction (resolved through forwarding when applied).
    Old(InstId),
    /// The `k`-th node of the same rewrite.
    New(u32),
}

/// The shape (and layout) of a new node.
#[derive(Clone, Debug, PartialEq)]
pub enum ShapeSpec {
    /// The shape and layout of an existing instruction.
    Of(InstId),
    /// An array shape; the layout is the default one when the replaced instruction has an array
    /// layout (and none otherwise, and for scalars).
    Array(ElementType, Vec<i64>),
    /// Interned ids.
    Id(ShapeId, LayoutId),
}

/// One new instruction.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Its opcode.
    pub opcode: Opcode,
    /// Its shape.
    pub shape: ShapeSpec,
    /// Its operands.
    pub operands: Vec<Val>,
    /// Its attributes.
    pub attrs: Vec<Attr>,
    /// The value of a `constant`.
    pub literal: Option<Literal>,
}

impl Node {
    /// A node without attributes.
    pub fn new(opcode: Opcode, shape: ShapeSpec, operands: Vec<Val>) -> Node {
        Node {
            opcode,
            shape,
            operands,
            attrs: Vec::new(),
            literal: None,
        }
    }

    /// Adds an attribute.
    pub fn attr(mut self, key: AttrKey, value: AttrValue) -> Node {
        self.attrs.push((key, value));
        self
    }

    /// A scalar constant.
    pub fn constant(lit: ArrayLiteral) -> Node {
        Node {
            opcode: Opcode::Constant,
            shape: ShapeSpec::Array(lit.ty(), lit.shape.dims.to_vec()),
            operands: Vec::new(),
            attrs: Vec::new(),
            literal: Some(Literal::Array(lit)),
        }
    }
}

/// How one instruction is replaced.
#[derive(Clone, Debug, PartialEq)]
pub enum Rewrite {
    /// By an existing value of the same shape and layout.
    Forward(InstId),
    /// By the last of these new nodes (which must have the replaced instruction's shape).
    Build(Vec<Node>),
}

/// The layout a new array node of rank `rank` gets when it replaces (part of) `like`.
pub fn layout_like(m: &mut Module, like: InstId, rank: usize) -> LayoutId {
    if rank > 0 && matches!(m.layout_of(m.layout_id(like)), Layout::Array(_)) {
        m.intern_layout(Layout::Array(ArrayLayout::row_major(rank)))
    } else {
        m.no_layout()
    }
}

/// The write phase of a pass whose plan has one rule: applies every rewrite of `plan` in order,
/// counting those that changed something under `counter`; returns whether any did.
pub fn apply_plan(
    m: &mut Module,
    plan: Vec<(InstId, Rewrite)>,
    cx: &mut axle_ir::PassCx<'_>,
    counter: &'static str,
) -> bool {
    apply_plan_by_rule(
        m,
        plan.into_iter().map(|(id, r)| (id, [counter], r)).collect(),
        cx,
    )
}

/// The write phase of a pass whose rewrites each name the rules that made them: applies every
/// rewrite of `plan` in order, counting each of its rules when it changed something; returns
/// whether any did.
pub fn apply_plan_by_rule<Rules: IntoIterator<Item = &'static str>>(
    m: &mut Module,
    plan: Vec<(InstId, Rules, Rewrite)>,
    cx: &mut axle_ir::PassCx<'_>,
) -> bool {
    if plan.is_empty() {
        return false;
    }
    let mut rw = m.rewriter();
    for (id, rules, r) in plan {
        if apply(&mut rw, id, r) {
            for rule in rules {
                cx.count(rule, 1);
            }
        }
    }
    rw.finish()
}

/// Applies `r` to `id`; returns whether it changed anything (it does not when `id` or a
/// Adds `opcode(operands)` with `attrs` next to `like` (in its computation): `like`'s
/// dimensions and layout with element type `ty`. `like` is an array.
pub fn add_retyped(
    rw: &mut Rewriter<'_>,
    like: InstId,
    ty: ElementType,
    opcode: Opcode,
    operands: Vec<InstId>,
    attrs: Vec<Attr>,
) -> InstId {
    let m = rw.module();
    let comp = m.parent(like);
    let layout = m.layout_id(like);
    let mut shape = m
        .array_shape(like)
        .expect("retyped instructions are arrays")
        .clone();
    shape.ty = ty;
    let shape = rw.module_mut().intern_shape(Shape::Array(shape));
    rw.add(
        comp,
        NewInst {
            opcode,
            shape,
            layout,
            operands,
            attrs,
            name: None,
        },
    )
}

/// forwarding target is gone).
pub fn apply(rw: &mut Rewriter<'_>, id: InstId, r: Rewrite) -> bool {
    if !rw.module().is_live(id) {
        return false;
    }
    match r {
        Rewrite::Forward(v) => {
            let v = rw.resolve(v);
            if v == id || !rw.module().is_live(v) {
                return false;
            }
            rw.replace_all_uses(id, v);
            true
        }
        Rewrite::Build(nodes) => {
            let comp = rw.module().parent(id);
            let mut made: Vec<InstId> = Vec::with_capacity(nodes.len());
            let last = nodes.len().saturating_sub(1);
            for (k, n) in nodes.into_iter().enumerate() {
                let ops: Vec<InstId> = n
                    .operands
                    .iter()
                    .map(|v| match *v {
                        Val::Old(i) => rw.resolve(i),
                        Val::New(j) => made[j as usize],
                    })
                    .collect();
                let m = rw.module_mut();
                let (shape, layout) = match n.shape {
                    ShapeSpec::Of(i) => (m.shape_id(i), m.layout_id(i)),
                    ShapeSpec::Id(s, l) => (s, l),
                    ShapeSpec::Array(ty, dims) => {
                        let rank = dims.len();
                        let s = m.intern_shape(Shape::Array(ArrayShape::new(ty, &dims)));
                        (s, layout_like(m, id, rank))
                    }
                };
                let name = if k == last {
                    m.name(id).to_string()
                } else {
                    String::new()
                };
                let mut attrs = n.attrs;
                let new = m.push_inst_parts(comp, n.opcode, shape, layout, &ops, &mut attrs, &name);
                if let Some(l) = n.literal {
                    m.set_constant(new, ConstValue::Literal(l));
                }
                made.push(new);
            }
            match made.last() {
                Some(&new) => {
                    // The replaced instruction gave its name away; clear it so names stay unique.
                    rw.module_mut().set_name(id, "");
                    rw.replace_all_uses(id, new);
                    true
                }
                None => false,
            }
        }
    }
}

// ---- readers ----

/// The static array shape of `id` (None for tuples, tokens and dynamic shapes).
pub fn array(m: &Module, id: InstId) -> Option<&ArrayShape> {
    m.array_shape(id).filter(|a| !a.is_dynamic())
}

/// The dimensions of `id`'s static array shape.
pub fn dims(m: &Module, id: InstId) -> Option<&[i64]> {
    array(m, id).map(|a| &a.dims[..])
}

/// The element type of `id`'s array shape.
pub fn elem_ty(m: &Module, id: InstId) -> Option<ElementType> {
    m.array_shape(id).map(|a| a.ty)
}

/// An integer-list attribute.
pub fn ints<'m>(m: &'m Module, id: InstId, key: &AttrKey) -> Option<&'m [i64]> {
    match m.attr(id, key) {
        Some(AttrValue::Ints(v)) => Some(v),
        _ => None,
    }
}

/// An integer attribute.
pub fn int(m: &Module, id: InstId, key: &AttrKey) -> Option<i64> {
    match m.attr(id, key) {
        Some(AttrValue::Int(v)) => Some(*v),
        _ => None,
    }
}

/// Whether `a` and `b` have the same shape and layout (so one can stand for the other).
pub fn same_type(m: &Module, a: InstId, b: InstId) -> bool {
    m.shape_id(a) == m.shape_id(b) && m.layout_id(a) == m.layout_id(b)
}

/// `Forward(to)` when `to` has `id`'s shape and layout.
pub fn forward(m: &Module, id: InstId, to: InstId) -> Option<Rewrite> {
    same_type(m, id, to).then_some(Rewrite::Forward(to))
}

/// An integer-list attribute value.
pub fn ints_value(v: &[i64]) -> AttrValue {
    AttrValue::Ints(v.into())
}

/// A number read from a splat constant.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Num {
    /// An integer or pred value.
    Int(i128),
    /// A float value (f64 holds every narrower float exactly, signed zeros and NaN included).
    Float(f64),
}

/// Most elements a constant may have for [`splat`] to scan it.
pub const SPLAT_SCAN_LIMIT: usize = 1 << 16;

/// The value of every element of `id` if they are all the same bits: a constant (of at most
/// [`SPLAT_SCAN_LIMIT`] elements), or a broadcast or reshape of one. Complex types are not
/// splats here.
pub fn splat(m: &Module, id: InstId) -> Option<Num> {
    let mut i = id;
    for _ in 0..4 {
        match m.opcode(i) {
            Opcode::Broadcast | Opcode::Reshape => i = m.operands(i)[0],
            Opcode::Constant => {
                let l = m.literal(i)?.as_array()?;
                return literal_splat(l);
            }
            _ => return None,
        }
    }
    None
}

/// The value of every element of `l` if they are all the same bits.
pub fn literal_splat(l: &ArrayLiteral) -> Option<Num> {
    let ty = l.ty();
    if ty.is_complex() || l.is_empty() || l.len() > SPLAT_SCAN_LIMIT {
        return None;
    }
    let w = ty.byte_size();
    let first = &l.data[..w];
    if !l.data.chunks_exact(w).all(|c| c == first) {
        return None;
    }
    Some(if ty.is_float() {
        Num::Float(l.get_f64(0))
    } else {
        Num::Int(l.get_i128(0))
    })
}

/// Whether `id` is a splat of integer `v` (ints and pred).
pub fn is_int_splat(m: &Module, id: InstId, v: i128) -> bool {
    splat(m, id) == Some(Num::Int(v))
}

/// Whether `id` is a splat of float `v` (compared with `==`, so `0.0` matches both zeros; use
/// [`is_float_zero`] to tell them apart).
pub fn is_float_splat(m: &Module, id: InstId, v: f64) -> bool {
    matches!(splat(m, id), Some(Num::Float(x)) if x == v)
}

/// Whether `id` is a splat of the float zero with the given sign.
pub fn is_float_zero(m: &Module, id: InstId, negative: bool) -> bool {
    matches!(splat(m, id), Some(Num::Float(x)) if x == 0.0 && x.is_sign_negative() == negative)
}

/// Whether `id` is a splat of one (1 for integers, 1.0 for floats).
pub fn is_one(m: &Module, id: InstId) -> bool {
    matches!(splat(m, id), Some(Num::Int(1)) | Some(Num::Float(1.0)))
}

/// The smallest and largest values of an integer type.
pub fn int_range(ty: ElementType) -> (i128, i128) {
    let b = ty.bits();
    if ty.is_pred() {
        (0, 1)
    } else if ty.is_signed_int() {
        (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
    } else {
        (0, (1i128 << b) - 1)
    }
}

/// The all-ones value of an integer type (-1 signed, the maximum unsigned, true for pred).
pub fn all_ones(ty: ElementType) -> i128 {
    if ty.is_signed_int() {
        -1
    } else {
        int_range(ty).1
    }
}

/// A scalar literal of type `ty` holding `v`.
pub fn scalar_literal(ty: ElementType, v: Num) -> ArrayLiteral {
    let data = match v {
        Num::Int(i) => i128_to_element(ty, i),
        Num::Float(f) => f64_to_element(ty, f),
    };
    ArrayLiteral {
        shape: ArrayShape::new(ty, &[]),
        data,
    }
}

/// Nodes computing a splat of `v` with `id`'s shape: a scalar constant, broadcast unless `id`
/// is a scalar. The last node has `id`'s shape.
pub fn splat_nodes(m: &Module, id: InstId, v: Num) -> Option<Vec<Node>> {
    let a = array(m, id)?;
    let c = Node::constant(scalar_literal(a.ty, v));
    if a.rank() == 0 {
        let mut c = c;
        c.shape = ShapeSpec::Of(id);
        return Some(vec![c]);
    }
    Some(vec![
        c,
        Node::new(Opcode::Broadcast, ShapeSpec::Of(id), vec![Val::New(0)])
            .attr(AttrKey::Dimensions, ints_value(&[])),
    ])
}

/// The single binary opcode a reducer computation applies to its two scalar parameters, if it
/// is that simple (`ROOT r = op(p0, p1)` or `op(p1, p0)` for a commutative op).
pub fn simple_reducer(m: &Module, comp: axle_ir::CompId) -> Option<Opcode> {
    if comp.is_none() || !m.is_live_comp(comp) {
        return None;
    }
    let params = m.params(comp);
    if params.len() != 2 {
        return None;
    }
    let r = m.root(comp);
    if r.is_none() || !m.is_live(r) {
        return None;
    }
    let op = m.opcode(r);
    let ops = m.operands(r);
    if ops.len() != 2 || !op.is_commutative() {
        return None;
    }
    let (a, b) = (ops[0], ops[1]);
    ((a == params[0] && b == params[1]) || (a == params[1] && b == params[0])).then_some(op)
}

/// Whether two splat values are the same bits (so `0.0` and `-0.0` differ; NaN never matches).
pub fn identical(a: Num, b: Num) -> bool {
    match (a, b) {
        (Num::Int(x), Num::Int(y)) => x == y,
        (Num::Float(x), Num::Float(y)) => x.to_bits() == y.to_bits(),
        _ => false,
    }
}

/// The identity element of a commutative reducer opcode at type `ty`, if it has one that holds
/// for every input (`-0.0` for float addition, since `x + 0.0` turns `-0.0` into `0.0`).
pub fn reducer_identity(op: Opcode, ty: ElementType) -> Option<Num> {
    let float = ty.is_float();
    if !float && !ty.is_int() && !ty.is_pred() {
        return None;
    }
    let (lo, hi) = int_range(ty);
    Some(match op {
        Opcode::Add if float => Num::Float(-0.0),
        Opcode::Add => Num::Int(0),
        Opcode::Multiply if float => Num::Float(1.0),
        Opcode::Multiply => Num::Int(1),
        Opcode::Maximum if float => Num::Float(f64::NEG_INFINITY),
        Opcode::Maximum => Num::Int(lo),
        Opcode::Minimum if float => Num::Float(f64::INFINITY),
        Opcode::Minimum => Num::Int(hi),
        Opcode::And if !float => Num::Int(all_ones(ty)),
        Opcode::Or | Opcode::Xor if !float => Num::Int(0),
        _ => return None,
    })
}

/// A computation name not used yet: `base`, else `base.1`, `base.2`, ...
pub fn fresh_comp_name(m: &Module, base: &str) -> String {
    let taken: hashbrown::HashSet<&str> = m
        .computations()
        .into_iter()
        .map(|c| m.comp_name(c))
        .collect();
    if !taken.contains(base) {
        return base.to_string();
    }
    (1..)
        .map(|k| format!("{base}.{k}"))
        .find(|n| !taken.contains(n.as_str()))
        .unwrap_or_default()
}

/// Adds the computation `(a: T[], b: T[]) -> op(a, b)` (a reducer), named `base.T` or, where
/// that is taken, with a number after it.
pub fn add_binary_computation(
    rw: &mut Rewriter<'_>,
    base: &str,
    ty: ElementType,
    op: Opcode,
) -> CompId {
    let name = fresh_comp_name(rw.module(), &format!("{base}.{}", ty.name()));
    let m = rw.module_mut();
    let c = m.add_computation(&name);
    let s = m.intern_shape(Shape::Array(ArrayShape::new(ty, &[])));
    let l = m.no_layout();
    let mut ps = Vec::with_capacity(2);
    for k in 0..2 {
        ps.push(rw.add(
            c,
            NewInst {
                opcode: Opcode::Parameter,
                shape: s,
                layout: l,
                operands: Vec::new(),
                attrs: vec![(AttrKey::ParameterNumber, AttrValue::Int(k as i64))],
                name: None,
            },
        ));
    }
    let r = rw.add(
        c,
        NewInst {
            opcode: op,
            shape: s,
            layout: l,
            operands: ps,
            attrs: Vec::new(),
            name: None,
        },
    );
    rw.module_mut().set_root(c, r);
    c
}

/// Gives `new` the name and the users of `old`, which is removed (the last step of a rewrite
/// whose final instruction stands for `old`).
pub fn take_over(rw: &mut Rewriter<'_>, old: InstId, new: InstId) {
    let name = rw.module().name(old).to_string();
    rw.module_mut().set_name(old, "");
    rw.module_mut().set_name(new, &name);
    rw.replace_all_uses(old, new);
}
