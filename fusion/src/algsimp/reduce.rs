//! Reduction and dot rules: reductions over empty or size-1 dimensions, and dots whose
//! contraction has zero or one element (with or without batch dimensions).

use axle_ir::{AttrKey, ElementType, InstId, Module, Opcode};

use super::{Cx, Hit};
use crate::rewrite::{
    dims, elem_ty, forward, identical, ints, ints_value, reducer_identity, simple_reducer, splat,
    splat_nodes, Node, Num, Rewrite, ShapeSpec, Val,
};

fn broadcast_to(src: Val, shape: ShapeSpec, dims: &[i64]) -> Node {
    Node::new(Opcode::Broadcast, shape, vec![src]).attr(AttrKey::Dimensions, ints_value(dims))
}

pub(super) fn rules(cx: &Cx<'_>, id: InstId) -> Hit {
    let m = cx.m;
    match m.opcode(id) {
        Opcode::Reduce => reduce(m, id),
        Opcode::Dot => dot(m, id),
        _ => None,
    }
}

fn reduce(m: &Module, id: InstId) -> Hit {
    let ops = m.operands(id);
    if ops.len() != 2 {
        return None;
    }
    let (x, init) = (ops[0], ops[1]);
    let out = dims(m, id)?.to_vec();
    let xd = dims(m, x)?;
    let rd = ints(m, id, &AttrKey::Dimensions).unwrap_or(&[]);
    let reduced: i64 = rd
        .iter()
        .map(|&d| xd.get(d as usize).copied().unwrap_or(1))
        .product();
    let ty = elem_ty(m, id)?;
    if out.iter().product::<i64>() == 0 || ty.is_complex() {
        return None;
    }
    if reduced == 0 {
        // Nothing to reduce: every result element is the initial value.
        let node = if out.is_empty() {
            return forward(m, id, init).map(|r| ("reduce-empty", r));
        } else {
            broadcast_to(Val::Old(init), ShapeSpec::Of(id), &[])
        };
        return Some(("reduce-empty", Rewrite::Build(vec![node])));
    }
    if reduced != 1 {
        return None;
    }
    let op = simple_reducer(m, m.comp_attr(id, &AttrKey::ToApply)?)?;
    let init_is_identity = match (splat(m, init), reducer_identity(op, ty)) {
        (Some(v), Some(e)) => identical(v, e),
        _ => false,
    };
    let same_dims = xd == &out[..];
    if init_is_identity {
        if same_dims {
            return forward(m, id, x).map(|r| ("reduce-trivial", r));
        }
        return Some((
            "reduce-trivial",
            Rewrite::Build(vec![Node::new(
                Opcode::Reshape,
                ShapeSpec::Of(id),
                vec![Val::Old(x)],
            )]),
        ));
    }
    // One element per result: the reducer applied once, to the initial value and the element.
    let mut nodes = Vec::new();
    let xv = if same_dims {
        Val::Old(x)
    } else {
        nodes.push(Node::new(
            Opcode::Reshape,
            ShapeSpec::Array(ty, out.clone()),
            vec![Val::Old(x)],
        ));
        Val::New(0)
    };
    let iv = if out.is_empty() {
        Val::Old(init)
    } else {
        nodes.push(broadcast_to(
            Val::Old(init),
            ShapeSpec::Array(ty, out.clone()),
            &[],
        ));
        Val::New(nodes.len() as u32 - 1)
    };
    nodes.push(Node::new(op, ShapeSpec::Of(id), vec![iv, xv]));
    Some(("reduce-trivial", Rewrite::Build(nodes)))
}

fn dot(m: &Module, id: InstId) -> Hit {
    let ops = m.operands(id);
    let (a, b) = (ops[0], ops[1]);
    let ty = elem_ty(m, id)?;
    if ty.is_complex() || elem_ty(m, a)? != ty || elem_ty(m, b)? != ty {
        return None;
    }
    let empty: &[i64] = &[];
    let lb = ints(m, id, &AttrKey::LhsBatchDims).unwrap_or(empty);
    let rb = ints(m, id, &AttrKey::RhsBatchDims).unwrap_or(empty);
    if lb.len() != rb.len() {
        return None;
    }
    let lc = ints(m, id, &AttrKey::LhsContractingDims).unwrap_or(empty);
    let rc = ints(m, id, &AttrKey::RhsContractingDims).unwrap_or(empty);
    let (ad, bd) = (dims(m, a)?, dims(m, b)?);
    let out = dims(m, id)?.to_vec();
    let k: i64 = lc
        .iter()
        .map(|&d| ad.get(d as usize).copied().unwrap_or(1))
        .product();
    if out.iter().product::<i64>() == 0 {
        return None;
    }
    let zero = if ty.is_float() {
        Num::Float(0.0)
    } else {
        Num::Int(0)
    };
    if k == 0 {
        return splat_nodes(m, id, zero).map(|n| ("dot-empty-contract", Rewrite::Build(n)));
    }
    if k != 1 {
        return None;
    }
    // In a float type narrower than f32 the dot rounds its f32 sum once: a product that
    // underflows to -0.0 there stays -0.0, where `a * b + 0.0` in the narrow type gives +0.0.
    if ty.is_float() && ty.bits() < 32 {
        return None;
    }
    // dot = 0 + a * b: multiply of broadcasts, then (floats) + 0.0, which turns -0.0 into 0.0
    // exactly as the accumulation does. The result's dimensions are the batch dimensions (in
    // their listed order), then the left's free ones, then the right's; each side is
    // transposed to that order where it is not in it (its size-1 contracting dimensions last)
    // and reshaped without them, since a broadcast's dimensions must increase. Rounding aside,
    // this is XLA's rewrite of a dot without contraction into a multiply.
    let free = |n: usize, b: &[i64], c: &[i64]| -> Vec<i64> {
        (0..n as i64)
            .filter(|i| !b.contains(i) && !c.contains(i))
            .collect()
    };
    let (af, bf) = (free(ad.len(), lb, lc), free(bd.len(), rb, rc));
    let (nb, nl, nr) = (lb.len(), af.len(), bf.len());
    if nb + nl + nr != out.len() {
        return None;
    }
    let mut nodes = Vec::new();
    let mut side = |x: InstId,
                    xd: &[i64],
                    b: &[i64],
                    f: Vec<i64>,
                    c: &[i64],
                    at: std::ops::Range<usize>|
     -> Val {
        let perm: Vec<i64> = b.iter().chain(&f).chain(c).copied().collect();
        let mut v = Val::Old(x);
        // Size-1 contracting dimensions anywhere are dropped by the reshape alone.
        if b.iter()
            .chain(&f)
            .collect::<Vec<_>>()
            .windows(2)
            .any(|w| w[0] > w[1])
        {
            let td: Vec<i64> = perm.iter().map(|&p| xd[p as usize]).collect();
            nodes.push(
                Node::new(Opcode::Transpose, ShapeSpec::Array(ty, td), vec![v])
                    .attr(AttrKey::Dimensions, ints_value(&perm)),
            );
            v = Val::New(nodes.len() as u32 - 1);
        }
        if !c.is_empty() {
            let kept: Vec<i64> = b.iter().chain(&f).map(|&p| xd[p as usize]).collect();
            nodes.push(Node::new(
                Opcode::Reshape,
                ShapeSpec::Array(ty, kept),
                vec![v],
            ));
            v = Val::New(nodes.len() as u32 - 1);
        }
        let bdims: Vec<i64> = (0..nb).chain(at).map(|i| i as i64).collect();
        nodes.push(broadcast_to(v, ShapeSpec::Of(id), &bdims));
        Val::New(nodes.len() as u32 - 1)
    };
    let av = side(a, ad, lb, af, lc, nb..nb + nl);
    let bv = side(b, bd, rb, bf, rc, nb + nl..nb + nl + nr);
    // A `pred` dot is true where any product is (XLA CPU runs it so); its product is `and`,
    // since `multiply` takes no `pred` operands.
    let product = if ty == ElementType::Pred {
        Opcode::And
    } else {
        Opcode::Multiply
    };
    nodes.push(Node::new(product, ShapeSpec::Of(id), vec![av, bv]));
    if ty.is_float() {
        let p = nodes.len() as u32 - 1;
        let mut z = splat_nodes(m, id, zero)?;
        let base = nodes.len() as u32;
        for n in z.iter_mut() {
            for o in n.operands.iter_mut() {
                if let Val::New(j) = o {
                    *j += base;
                }
            }
        }
        nodes.extend(z);
        let zv = Val::New(nodes.len() as u32 - 1);
        nodes.push(Node::new(
            Opcode::Add,
            ShapeSpec::Of(id),
            vec![Val::New(p), zv],
        ));
    }
    Some(("dot-trivial-contract", Rewrite::Build(nodes)))
}
