//! `conv-canonicalize`: puts every floating-point `convolution` in the form a backend's tiled
//! convolution reads, features innermost, as XLA's layout assignment does for its CPU
//! convolutions (`b01f_01io->b01f`).
//!
//! Rules (counters named as the rules):
//! - `kernel-features`: a kernel whose output-feature dimension is not its last (`01oi`, the
//!   backward-data convolution of a training step; `oi01`, PyTorch's order) is transposed so
//!   that it is, its other dimensions keeping their order;
//! - `output-features`: an output whose feature dimension is not its last (`bf01`) is computed
//!   with the feature dimension last and transposed back.
//!
//! Each rewrite computes the same sums in the same order (the transposes move whole
//! dimensions). Only real floating-point convolutions without feature or batch groups are
//! rewritten. Base (lhs) dilation is left alone: materializing it as a `pad` with interior
//! zeros would multiply the holes by the weights, so an infinite weight over a hole would give
//! NaN where XLA and the evaluator skip the hole.
//!
//! Read phase: every convolution is matched in parallel. Write phase:
//! [`crate::rewrite::apply`]. Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values; every rewritten
//! convolution has its kernel's and output's feature dimensions last.

use axle_ir::{
    AttrKey, AttrValue, Changed, ConvDims, InstId, Module, Opcode, Pass, PassCx, PassError,
};
use rayon::prelude::*;

use crate::rewrite::{
    apply_plan_by_rule, dims, elem_ty, int, ints_value, Node, Rewrite, ShapeSpec, Val,
};

/// The `conv-canonicalize` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct ConvCanonicalize;

/// `perm` moving dimension `d` of a rank-`rank` array to the end, the others in order.
fn to_last(rank: usize, d: i64) -> Vec<i64> {
    (0..rank as i64)
        .filter(|&k| k != d)
        .chain(std::iter::once(d))
        .collect()
}

/// Where dimension `d` goes under `perm` (`perm[new] = old`).
fn moved(perm: &[i64], d: i64) -> i64 {
    perm.iter().position(|&p| p == d).expect("a permutation") as i64
}

fn permuted(dims: &[i64], perm: &[i64]) -> Vec<i64> {
    perm.iter().map(|&p| dims[p as usize]).collect()
}

fn match_at(m: &Module, id: InstId) -> Option<(Vec<&'static str>, Rewrite)> {
    if m.opcode(id) != Opcode::Convolution || m.operands(id).len() != 2 {
        return None;
    }
    let ty = elem_ty(m, id)?;
    let (x, k) = (m.operands(id)[0], m.operands(id)[1]);
    if ![ty, elem_ty(m, x)?, elem_ty(m, k)?]
        .iter()
        .all(|t| t.is_float())
    {
        return None;
    }
    if int(m, id, &AttrKey::FeatureGroupCount).unwrap_or(1) != 1
        || int(m, id, &AttrKey::BatchGroupCount).unwrap_or(1) != 1
    {
        return None;
    }
    let Some(AttrValue::DimLabels(dn)) = m.attr(id, &AttrKey::DimLabels) else {
        return None;
    };
    let (kd, od) = (dims(m, k)?, dims(m, id)?);
    let kperm = (dn.kernel_output_feature as usize != kd.len() - 1)
        .then(|| to_last(kd.len(), dn.kernel_output_feature));
    let operm =
        (dn.output_feature as usize != od.len() - 1).then(|| to_last(od.len(), dn.output_feature));
    if kperm.is_none() && operm.is_none() {
        return None;
    }
    let mut rules = Vec::new();
    let mut nodes = Vec::new();
    let mut dn: ConvDims = (**dn).clone();
    let xv = Val::Old(x);
    let mut kv = Val::Old(k);
    if let Some(p) = &kperm {
        nodes.push(
            Node::new(
                Opcode::Transpose,
                ShapeSpec::Array(elem_ty(m, k)?, permuted(kd, p)),
                vec![kv],
            )
            .attr(AttrKey::Dimensions, ints_value(p)),
        );
        kv = Val::New(nodes.len() as u32 - 1);
        dn.kernel_input_feature = moved(p, dn.kernel_input_feature);
        dn.kernel_output_feature = moved(p, dn.kernel_output_feature);
        dn.kernel_spatial = dn.kernel_spatial.iter().map(|&d| moved(p, d)).collect();
        rules.push("kernel-features");
    }
    let conv_dims = match &operm {
        Some(p) => permuted(od, p),
        None => od.to_vec(),
    };
    if let Some(p) = &operm {
        dn.output_batch = moved(p, dn.output_batch);
        dn.output_feature = moved(p, dn.output_feature);
        dn.output_spatial = dn.output_spatial.iter().map(|&d| moved(p, d)).collect();
        rules.push("output-features");
    }
    let mut conv = Node::new(
        Opcode::Convolution,
        match &operm {
            Some(_) => ShapeSpec::Array(ty, conv_dims),
            None => ShapeSpec::Of(id),
        },
        vec![xv, kv],
    );
    for (key, v) in m.attrs(id) {
        match key {
            AttrKey::DimLabels => {
                conv = conv.attr(key.clone(), AttrValue::DimLabels(Box::new(dn.clone())))
            }
            _ => conv = conv.attr(key.clone(), v.clone()),
        }
    }
    nodes.push(conv);
    if let Some(p) = &operm {
        // Back to the original order: the inverse permutation.
        let mut inv = vec![0i64; p.len()];
        for (new, &old) in p.iter().enumerate() {
            inv[old as usize] = new as i64;
        }
        let c = Val::New(nodes.len() as u32 - 1);
        nodes.push(
            Node::new(Opcode::Transpose, ShapeSpec::Of(id), vec![c])
                .attr(AttrKey::Dimensions, ints_value(&inv)),
        );
    }
    Some((rules, Rewrite::Build(nodes)))
}

impl Pass for ConvCanonicalize {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<(InstId, Vec<&'static str>, Rewrite)> = m
            .live_ids()
            .into_par_iter()
            .filter_map(|id| match_at(m, id).map(|(n, r)| (id, n, r)))
            .collect();
        Ok(apply_plan_by_rule(m, plan, cx))
    }
}
