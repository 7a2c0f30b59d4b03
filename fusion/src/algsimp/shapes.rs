//! Data-movement rules: reshapes, broadcasts, transposes, slices, pads, concatenations,
//! reverses, dynamic slices and iotas that do nothing, compose, or look through each other.

use axle_ir::{AttrKey, AttrValue, InstId, Module, Opcode};

use super::{Cx, Hit};
use crate::rewrite::{
    dims, elem_ty, forward, int, ints, ints_value, same_type, splat, splat_nodes, Node, Num,
    Rewrite, ShapeSpec, Val,
};

fn hit(rule: &'static str, r: Option<Rewrite>) -> Hit {
    r.map(|r| (rule, r))
}

/// The `slice={...}` attribute.
pub(crate) fn slice_attr(m: &Module, id: InstId) -> Option<&[[i64; 3]]> {
    match m.attr(id, &AttrKey::Slice) {
        Some(AttrValue::Slice(s)) => Some(s),
        _ => None,
    }
}

fn slice_node(id_shape: ShapeSpec, x: Val, s: Vec<[i64; 3]>) -> Node {
    Node::new(Opcode::Slice, id_shape, vec![x]).attr(AttrKey::Slice, AttrValue::Slice(s.into()))
}

/// `transpose(dot(a, b))` swapping the two dimensions of a matrix product with one free
/// dimension on each side and no batch dimensions, when the transpose is the dot's only user:
/// `dot(b, a)` with the contracting dimensions swapped computes the same sums of the same
/// products directly in the transposed order (XLA's algebraic simplifier folds it too), so no
/// kernel transposes the product afterwards and a consumer reading it element-wise may take its
/// buffer. Only dots with no attributes beyond their dimension numbers (and metadata, which the
/// new dot keeps) are rewritten.
fn transpose_dot(cx: &Cx<'_>, id: InstId, x: InstId, p: &[i64]) -> Option<Rewrite> {
    let m = cx.m;
    if m.opcode(x) != Opcode::Dot || p != [1, 0] || !cx.users.get().has_single_use(x) {
        return None;
    }
    let known = [
        AttrKey::LhsContractingDims,
        AttrKey::RhsContractingDims,
        AttrKey::LhsBatchDims,
        AttrKey::RhsBatchDims,
        AttrKey::Metadata,
    ];
    if m.attrs(x).iter().any(|(k, _)| !known.contains(k)) {
        return None;
    }
    let empty: &[i64] = &[];
    let batch = |k: &AttrKey| ints(m, x, k).unwrap_or(empty).is_empty();
    if !batch(&AttrKey::LhsBatchDims) || !batch(&AttrKey::RhsBatchDims) {
        return None;
    }
    let (a, b) = (m.operands(x)[0], m.operands(x)[1]);
    let lc = ints(m, x, &AttrKey::LhsContractingDims).unwrap_or(empty);
    let rc = ints(m, x, &AttrKey::RhsContractingDims).unwrap_or(empty);
    let free = |o: InstId, c: &[i64]| dims(m, o).map(|d| d.len() - c.len());
    if free(a, lc)? != 1 || free(b, rc)? != 1 {
        return None;
    }
    let mut dot = Node::new(
        Opcode::Dot,
        ShapeSpec::Of(id),
        vec![Val::Old(b), Val::Old(a)],
    )
    .attr(AttrKey::LhsContractingDims, ints_value(rc))
    .attr(AttrKey::RhsContractingDims, ints_value(lc));
    if let Some(md) = m.attr(x, &AttrKey::Metadata) {
        dot = dot.attr(AttrKey::Metadata, md.clone());
    }
    Some(Rewrite::Build(vec![dot]))
}

fn is_identity(p: &[i64]) -> bool {
    p.iter().enumerate().all(|(i, &d)| d == i as i64)
}

fn one(op: Opcode, id: InstId, x: InstId) -> Node {
    Node::new(op, ShapeSpec::Of(id), vec![Val::Old(x)])
}

pub(super) fn rules(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let out = dims(m, id)?.to_vec();
    let ops = m.operands(id);
    use Opcode::*;
    match m.opcode(id) {
        Reshape => {
            let x = ops[0];
            if dims(m, x)? == &out[..] {
                return hit("reshape-noop", forward(m, id, x));
            }
            match m.opcode(x) {
                Reshape => {
                    let w = m.operands(x)[0];
                    if dims(m, w)? == &out[..] && same_type(m, id, w) {
                        return hit("reshape-reshape", Some(Rewrite::Forward(w)));
                    }
                    hit(
                        "reshape-reshape",
                        Some(Rewrite::Build(vec![one(Reshape, id, w)])),
                    )
                }
                Broadcast if dims(m, m.operands(x)[0])?.is_empty() => hit(
                    "reshape-broadcast-scalar",
                    Some(Rewrite::Build(vec![one(Broadcast, id, m.operands(x)[0])
                        .attr(AttrKey::Dimensions, ints_value(&[]))])),
                ),
                _ => None,
            }
        }
        Broadcast => {
            let x = ops[0];
            let bd = ints(m, id, &AttrKey::Dimensions).unwrap_or(&[]);
            if dims(m, x)? == &out[..] && is_identity(bd) {
                return hit("broadcast-noop", forward(m, id, x));
            }
            if m.opcode(x) == Broadcast {
                let w = m.operands(x)[0];
                let inner = ints(m, x, &AttrKey::Dimensions).unwrap_or(&[]);
                let composed: Vec<i64> = inner
                    .iter()
                    .map(|&d| bd.get(d as usize).copied())
                    .collect::<Option<_>>()?;
                return hit(
                    "broadcast-broadcast",
                    Some(Rewrite::Build(vec![
                        one(Broadcast, id, w).attr(AttrKey::Dimensions, ints_value(&composed))
                    ])),
                );
            }
            None
        }
        Transpose => {
            let x = ops[0];
            let p = ints(m, id, &AttrKey::Dimensions)?;
            if is_identity(p) {
                return hit("transpose-identity", forward(m, id, x));
            }
            if m.opcode(x) == Transpose {
                let w = m.operands(x)[0];
                let p1 = ints(m, x, &AttrKey::Dimensions)?;
                let composed: Vec<i64> = p
                    .iter()
                    .map(|&d| p1.get(d as usize).copied())
                    .collect::<Option<_>>()?;
                if is_identity(&composed) {
                    return hit("transpose-transpose", forward(m, id, w));
                }
                return hit(
                    "transpose-transpose",
                    Some(Rewrite::Build(vec![
                        one(Transpose, id, w).attr(AttrKey::Dimensions, ints_value(&composed))
                    ])),
                );
            }
            if let Some(r) = transpose_dot(cx, id, x, p) {
                return hit("transpose-dot", Some(r));
            }
            // A transpose that only moves size-1 dimensions keeps the row-major element order.
            let moved: Vec<i64> = p
                .iter()
                .zip(&out)
                .filter(|(_, &size)| size != 1)
                .map(|(&d, _)| d)
                .collect();
            if moved.windows(2).all(|w| w[0] < w[1]) {
                return hit(
                    "transpose-degenerate",
                    Some(Rewrite::Build(vec![one(Reshape, id, x)])),
                );
            }
            None
        }
        Slice => slice_rules(cx, id, &out),
        Pad => {
            let x = ops[0];
            match m.attr(id, &AttrKey::Padding) {
                Some(AttrValue::Padding(p)) if p.iter().all(|e| *e == [0, 0, 0]) => {
                    hit("pad-noop", forward(m, id, x))
                }
                _ => None,
            }
        }
        Concatenate => concat_rules(cx, id),
        Reverse => {
            let x = ops[0];
            let rd = ints(m, id, &AttrKey::Dimensions).unwrap_or(&[]);
            if rd.iter().all(|&d| out.get(d as usize) == Some(&1)) {
                return hit("reverse-degenerate", forward(m, id, x));
            }
            if m.opcode(x) == Reverse {
                let mut a: Vec<i64> = rd.to_vec();
                let mut b: Vec<i64> = ints(m, x, &AttrKey::Dimensions).unwrap_or(&[]).to_vec();
                a.sort_unstable();
                b.sort_unstable();
                if a == b {
                    return hit("reverse-reverse", forward(m, id, m.operands(x)[0]));
                }
            }
            None
        }
        DynamicSlice => {
            let x = ops[0];
            let xd = dims(m, x)?;
            let sizes = ints(m, id, &AttrKey::DynamicSliceSizes)?;
            if sizes == xd {
                return hit("dynamic-slice-full", forward(m, id, x));
            }
            if ops.len() != 1 + xd.len() {
                return None;
            }
            let mut s = Vec::with_capacity(xd.len());
            for (k, &i) in ops[1..].iter().enumerate() {
                if !dims(m, i)?.is_empty() {
                    return None;
                }
                let Some(Num::Int(v)) = splat(m, i) else {
                    return None;
                };
                let hi = (xd[k] - sizes[k]).max(0) as i128;
                let start = v.clamp(0, hi) as i64;
                s.push([start, start + sizes[k], 1]);
            }
            hit(
                "dynamic-slice-constant",
                Some(Rewrite::Build(vec![slice_node(
                    ShapeSpec::Of(id),
                    Val::Old(x),
                    s,
                )])),
            )
        }
        DynamicUpdateSlice => {
            let (x, u) = (ops[0], ops[1]);
            let ud = dims(m, u)?;
            if ud == &out[..] {
                return hit("dus-full", forward(m, id, u));
            }
            if ud.iter().product::<i64>() == 0 {
                return hit("dus-empty", forward(m, id, x));
            }
            None
        }
        Iota => {
            let k = int(m, id, &AttrKey::IotaDimension)? as usize;
            if out.get(k) == Some(&1) {
                let ty = elem_ty(m, id)?;
                let zero = if ty.is_float() {
                    Num::Float(0.0)
                } else {
                    Num::Int(0)
                };
                return hit(
                    "iota-degenerate",
                    splat_nodes(m, id, zero).map(Rewrite::Build),
                );
            }
            None
        }
        _ => None,
    }
}

fn slice_rules(cx: &Cx<'_>, id: InstId, out: &[i64]) -> Hit {
    let m = cx.m;
    let x = m.operands(id)[0];
    let s = slice_attr(m, id)?;
    let xd = dims(m, x)?.to_vec();
    if s.len() != xd.len() || out.len() != xd.len() {
        return None;
    }
    if s.iter()
        .zip(&xd)
        .all(|(e, &d)| e[0] == 0 && e[1] == d && e[2] == 1)
    {
        return hit("slice-noop", forward(m, id, x));
    }
    if out.contains(&0) {
        return None;
    }
    use Opcode::*;
    match m.opcode(x) {
        Slice => {
            let w = m.operands(x)[0];
            let s1 = slice_attr(m, x)?;
            if s1.len() != s.len() {
                return None;
            }
            let composed: Vec<[i64; 3]> = s
                .iter()
                .zip(s1)
                .zip(out)
                .map(|((o, i), &n)| {
                    let start = i[0] + o[0] * i[2];
                    let stride = i[2] * o[2];
                    [start, start + (n - 1) * stride + 1, stride]
                })
                .collect();
            hit(
                "slice-slice",
                Some(Rewrite::Build(vec![slice_node(
                    ShapeSpec::Of(id),
                    Val::Old(w),
                    composed,
                )])),
            )
        }
        Concatenate => {
            let d = ints(m, x, &AttrKey::Dimensions)?.first().copied()? as usize;
            let [start, _, stride] = s[d];
            let last = start + (out[d] - 1) * stride;
            let mut offset = 0;
            for &op in m.operands(x) {
                let size = dims(m, op)?[d];
                if start >= offset && last < offset + size {
                    let mut ns = s.to_vec();
                    ns[d] = [start - offset, last - offset + 1, stride];
                    let od = dims(m, op)?;
                    let full = ns
                        .iter()
                        .zip(od)
                        .all(|(e, &dd)| e[0] == 0 && e[1] == dd && e[2] == 1);
                    if full && same_type(m, id, op) {
                        return hit("slice-concat", Some(Rewrite::Forward(op)));
                    }
                    return hit(
                        "slice-concat",
                        Some(Rewrite::Build(vec![slice_node(
                            ShapeSpec::Of(id),
                            Val::Old(op),
                            ns,
                        )])),
                    );
                }
                offset += size;
            }
            None
        }
        Broadcast => {
            let w = m.operands(x)[0];
            let bd = ints(m, x, &AttrKey::Dimensions).unwrap_or(&[]);
            let wd = dims(m, w)?;
            let ws: Vec<[i64; 3]> = bd.iter().map(|&b| s[b as usize]).collect();
            let full = ws
                .iter()
                .zip(wd)
                .all(|(e, &dd)| e[0] == 0 && e[1] == dd && e[2] == 1);
            let bcast = |src: Val| {
                Node::new(Broadcast, ShapeSpec::Of(id), vec![src])
                    .attr(AttrKey::Dimensions, ints_value(bd))
            };
            if full {
                return hit(
                    "slice-broadcast",
                    Some(Rewrite::Build(vec![bcast(Val::Old(w))])),
                );
            }
            if !cx.users.get().has_single_use(x) {
                return None;
            }
            let sliced: Vec<i64> = bd.iter().map(|&b| out[b as usize]).collect();
            let ty = elem_ty(m, w)?;
            hit(
                "slice-broadcast",
                Some(Rewrite::Build(vec![
                    slice_node(ShapeSpec::Array(ty, sliced), Val::Old(w), ws),
                    bcast(Val::New(0)),
                ])),
            )
        }
        Iota => {
            let k = int(m, x, &AttrKey::IotaDimension)? as usize;
            if s.get(k).is_some_and(|e| e[0] == 0 && e[2] == 1) {
                return hit(
                    "slice-iota",
                    Some(Rewrite::Build(vec![Node::new(
                        Iota,
                        ShapeSpec::Of(id),
                        vec![],
                    )
                    .attr(AttrKey::IotaDimension, AttrValue::Int(k as i64))])),
                );
            }
            None
        }
        _ => None,
    }
}

/// A stride-1 slice: its operand and its `[start, limit, stride]` per dimension.
type SliceOf = (InstId, Vec<[i64; 3]>);

fn concat_rules(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    let ops = m.operands(id);
    if ops.len() == 1 {
        return hit("concat-single", forward(m, id, ops[0]));
    }
    let d = ints(m, id, &AttrKey::Dimensions)?.first().copied()? as usize;
    let sizes: Vec<i64> = ops
        .iter()
        .map(|&o| dims(m, o).and_then(|x| x.get(d).copied()))
        .collect::<Option<_>>()?;
    if sizes.contains(&0) && sizes.iter().any(|&s| s != 0) {
        let keep: Vec<InstId> = ops
            .iter()
            .zip(&sizes)
            .filter(|(_, &s)| s != 0)
            .map(|(&o, _)| o)
            .collect();
        if keep.len() == 1 {
            return hit("concat-drop-empty", forward(m, id, keep[0]));
        }
        return hit(
            "concat-drop-empty",
            Some(Rewrite::Build(vec![Node::new(
                Opcode::Concatenate,
                ShapeSpec::Of(id),
                keep.into_iter().map(Val::Old).collect(),
            )
            .attr(AttrKey::Dimensions, ints_value(&[d as i64]))])),
        );
    }
    // Broadcasts of one scalar, concatenated: one broadcast.
    let scalar_src = |o: InstId| -> Option<InstId> {
        (m.opcode(o) == Opcode::Broadcast && dims(m, m.operands(o)[0])?.is_empty())
            .then(|| m.operands(o)[0])
    };
    if let Some(s0) = scalar_src(ops[0]) {
        if ops.iter().all(|&o| scalar_src(o) == Some(s0)) {
            return hit(
                "concat-broadcast-scalar",
                Some(Rewrite::Build(vec![Node::new(
                    Opcode::Broadcast,
                    ShapeSpec::Of(id),
                    vec![Val::Old(s0)],
                )
                .attr(AttrKey::Dimensions, ints_value(&[]))])),
            );
        }
    }
    // Adjacent stride-1 slices of one value along the concatenated dimension merge.
    let slice_of = |o: InstId| -> Option<SliceOf> {
        if m.opcode(o) != Opcode::Slice {
            return None;
        }
        let s = slice_attr(m, o)?;
        s.iter()
            .all(|e| e[2] == 1)
            .then(|| (m.operands(o)[0], s.to_vec()))
    };
    let mut groups: Vec<(Option<SliceOf>, InstId)> = Vec::new();
    let mut merged = false;
    for &o in ops {
        let cur = slice_of(o);
        if let (Some((w, s)), Some((Some((pw, ps)), _))) = (&cur, groups.last_mut()) {
            let compatible = *pw == *w
                && ps.len() == s.len()
                && ps[d][1] == s[d][0]
                && ps
                    .iter()
                    .zip(s)
                    .enumerate()
                    .all(|(k, (a, b))| k == d || a == b);
            if compatible {
                ps[d][1] = s[d][1];
                merged = true;
                continue;
            }
        }
        groups.push((cur, o));
    }
    if !merged {
        return None;
    }
    let ty = elem_ty(m, id)?;
    let mut nodes: Vec<Node> = Vec::new();
    let mut vals: Vec<Val> = Vec::new();
    for (g, o) in &groups {
        match g {
            Some((w, s)) if dims(m, *o)?[d] != s[d][1] - s[d][0] => {
                let mut sd = dims(m, *o)?.to_vec();
                sd[d] = s[d][1] - s[d][0];
                vals.push(Val::New(nodes.len() as u32));
                nodes.push(slice_node(
                    ShapeSpec::Array(ty, sd),
                    Val::Old(*w),
                    s.clone(),
                ));
            }
            _ => vals.push(Val::Old(*o)),
        }
    }
    if vals.len() == 1 {
        // Everything merged into one slice: it is the result.
        nodes.last_mut()?.shape = ShapeSpec::Of(id);
        return hit("concat-adjacent-slices", Some(Rewrite::Build(nodes)));
    }
    nodes.push(
        Node::new(Opcode::Concatenate, ShapeSpec::Of(id), vals)
            .attr(AttrKey::Dimensions, ints_value(&[d as i64])),
    );
    hit("concat-adjacent-slices", Some(Rewrite::Build(nodes)))
}
