//! `dot-canonicalize`: puts every floating-point `dot` in the form of one matrix product per
//! batch, as XLA's dot decomposer does before fusion.
//!
//! A dot whose operands have several free dimensions on one side (`f32[1,128,768]` times
//! `f32[768,2304]`, contracting `{2}` and `{0}`) or several contracting dimensions (a weight
//! gradient, contracting `{0,1}` with `{0,1}`) becomes
//! `reshape(dot(reshape(transpose?(lhs)), reshape(transpose?(rhs))))`: on each side the free
//! dimensions are merged into one and the contracting dimensions into one, so that every side
//! has its batch dimensions, at most one free and at most one contracting dimension, the form a
//! backend's matrix kernel takes. Batch dimensions stay where they are.
//!
//! A group of dimensions is merged by a reshape alone when its dimensions are adjacent and in
//! order (free dimensions ascending; contracting dimensions in the order their pairs are listed,
//! on both sides); otherwise that operand is first transposed to `[batch, free, contracting]`
//! (left) or `[batch, contracting, free]` (right). The merged contracting dimension enumerates
//! the pairs in their listed order, row-major, which is the order the evaluator and every
//! backend sum a dot's products in, so the sum order is unchanged. The result's free dimensions
//! are adjacent in its row-major order, so the final reshape only splits them back.
//!
//! Only real floating-point dots are rewritten: they are the ones a matrix kernel computes.
//! Dots already in the form (each side at most one free and one contracting dimension) are
//! left alone.
//!
//! Read phase: every dot is matched in parallel. Write phase: [`crate::rewrite::apply`].
//! Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values; every rewritten dot has at
//! most one free and one contracting dimension per side, and its other attributes (precision
//! configuration, algorithm) as before.

use axle_ir::{AttrKey, Changed, InstId, Module, Opcode, Pass, PassCx, PassError};
use rayon::prelude::*;

use crate::rewrite::{apply_plan, dims, elem_ty, ints, ints_value, Node, Rewrite, ShapeSpec, Val};

/// The `dot-canonicalize` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct DotCanonicalize;

/// One operand of a dot: its dimensions and how they divide into batch, free and contracting.
struct Side<'a> {
    dims: &'a [i64],
    batch: &'a [i64],
    free: Vec<i64>,
    contracting: &'a [i64],
}

/// How one side is rewritten: an optional transpose, the reshaped dimensions, and the new
/// positions of its batch and contracting dimensions.
struct SidePlan {
    perm: Option<Vec<i64>>,
    transposed_dims: Vec<i64>,
    new_dims: Vec<i64>,
    batch: Vec<i64>,
    contracting: Vec<i64>,
}

/// Whether `g` is a run of adjacent dimensions in increasing order.
fn adjacent(g: &[i64]) -> bool {
    g.windows(2).all(|w| w[1] == w[0] + 1)
}

impl<'a> Side<'a> {
    fn new(dims: &'a [i64], batch: &'a [i64], contracting: &'a [i64]) -> Side<'a> {
        let free = (0..dims.len() as i64)
            .filter(|d| !batch.contains(d) && !contracting.contains(d))
            .collect();
        Side {
            dims,
            batch,
            free,
            contracting,
        }
    }

    /// Whether the side needs a rewrite: several free or several contracting dimensions.
    fn needs_merge(&self) -> bool {
        self.free.len() > 1 || self.contracting.len() > 1
    }

    /// The plan for this side; `contracting_first` orders a transposed side as
    /// `[batch, contracting, free]`.
    fn plan(&self, contracting_first: bool) -> SidePlan {
        // The dimension order after the optional transpose.
        let order: Vec<i64> = if adjacent(&self.free) && adjacent(self.contracting) {
            (0..self.dims.len() as i64).collect()
        } else {
            let mut o = self.batch.to_vec();
            if contracting_first {
                o.extend_from_slice(self.contracting);
                o.extend_from_slice(&self.free);
            } else {
                o.extend_from_slice(&self.free);
                o.extend_from_slice(self.contracting);
            }
            o
        };
        let identity = order.iter().enumerate().all(|(k, &d)| k as i64 == d);
        let transposed_dims: Vec<i64> = order.iter().map(|&d| self.dims[d as usize]).collect();
        // Walk the transposed order, merging each group into the position of its first member.
        let mut new_dims = Vec::new();
        let mut batch = vec![0; self.batch.len()];
        let mut contracting = Vec::new();
        let mut seen_free = false;
        let mut seen_contracting = false;
        for &d in &order {
            let size = self.dims[d as usize];
            if let Some(k) = self.batch.iter().position(|&b| b == d) {
                batch[k] = new_dims.len() as i64;
                new_dims.push(size);
            } else if self.contracting.contains(&d) {
                if seen_contracting {
                    *new_dims.last_mut().expect("merged into a dimension") *= size;
                } else {
                    seen_contracting = true;
                    contracting.push(new_dims.len() as i64);
                    new_dims.push(size);
                }
            } else if seen_free {
                *new_dims.last_mut().expect("merged into a dimension") *= size;
            } else {
                seen_free = true;
                new_dims.push(size);
            }
        }
        SidePlan {
            perm: (!identity).then_some(order),
            transposed_dims,
            new_dims,
            batch,
            contracting,
        }
    }
}

/// Adds the nodes that bring operand `x` into the form of `p`; returns the value to use.
fn side_nodes(nodes: &mut Vec<Node>, ty: axle_ir::ElementType, x: InstId, p: &SidePlan) -> Val {
    let mut v = Val::Old(x);
    if let Some(perm) = &p.perm {
        nodes.push(
            Node::new(
                Opcode::Transpose,
                ShapeSpec::Array(ty, p.transposed_dims.clone()),
                vec![v],
            )
            .attr(AttrKey::Dimensions, ints_value(perm)),
        );
        v = Val::New(nodes.len() as u32 - 1);
    }
    if p.new_dims != p.transposed_dims {
        nodes.push(Node::new(
            Opcode::Reshape,
            ShapeSpec::Array(ty, p.new_dims.clone()),
            vec![v],
        ));
        v = Val::New(nodes.len() as u32 - 1);
    }
    v
}

fn match_at(m: &Module, id: InstId) -> Option<Rewrite> {
    if m.opcode(id) != Opcode::Dot || m.operands(id).len() != 2 {
        return None;
    }
    let out_ty = elem_ty(m, id)?;
    let out_dims = dims(m, id)?;
    let (l, r) = (m.operands(id)[0], m.operands(id)[1]);
    let (lty, rty) = (elem_ty(m, l)?, elem_ty(m, r)?);
    if ![out_ty, lty, rty].iter().all(|t| t.is_float()) {
        return None;
    }
    let empty: &[i64] = &[];
    let get = |k: AttrKey| ints(m, id, &k).unwrap_or(empty);
    let (lb, rb) = (get(AttrKey::LhsBatchDims), get(AttrKey::RhsBatchDims));
    let (lc, rc) = (
        get(AttrKey::LhsContractingDims),
        get(AttrKey::RhsContractingDims),
    );
    if lb.len() != rb.len() || lc.len() != rc.len() {
        return None;
    }
    let ls = Side::new(dims(m, l)?, lb, lc);
    let rs = Side::new(dims(m, r)?, rb, rc);
    if !ls.needs_merge() && !rs.needs_merge() {
        return None;
    }
    let lp = ls.plan(false);
    let rp = rs.plan(true);
    let mut nodes = Vec::new();
    let lv = side_nodes(&mut nodes, lty, l, &lp);
    let rv = side_nodes(&mut nodes, rty, r, &rp);
    // The new dot's result: batch, then the merged free dimensions of each side.
    let nb = lb.len();
    let mut dot_dims: Vec<i64> = out_dims[..nb].to_vec();
    if !ls.free.is_empty() {
        dot_dims.push(ls.free.iter().map(|&d| ls.dims[d as usize]).product());
    }
    if !rs.free.is_empty() {
        dot_dims.push(rs.free.iter().map(|&d| rs.dims[d as usize]).product());
    }
    let mut dot = Node::new(
        Opcode::Dot,
        ShapeSpec::Array(out_ty, dot_dims.clone()),
        vec![lv, rv],
    );
    for (k, v) in m.attrs(id) {
        if !matches!(
            k,
            AttrKey::LhsBatchDims
                | AttrKey::RhsBatchDims
                | AttrKey::LhsContractingDims
                | AttrKey::RhsContractingDims
        ) {
            dot = dot.attr(k.clone(), v.clone());
        }
    }
    for (k, v) in [
        (AttrKey::LhsBatchDims, &lp.batch),
        (AttrKey::RhsBatchDims, &rp.batch),
        (AttrKey::LhsContractingDims, &lp.contracting),
        (AttrKey::RhsContractingDims, &rp.contracting),
    ] {
        if !v.is_empty() {
            dot = dot.attr(k, ints_value(v));
        }
    }
    nodes.push(dot);
    if dot_dims != out_dims {
        let d = nodes.len() as u32 - 1;
        nodes.push(Node::new(
            Opcode::Reshape,
            ShapeSpec::Of(id),
            vec![Val::New(d)],
        ));
    } else {
        // Same dimensions: the last node must still carry the dot's own layout.
        let last = nodes.last_mut().expect("the dot was pushed");
        last.shape = ShapeSpec::Of(id);
    }
    Some(Rewrite::Build(nodes))
}

impl Pass for DotCanonicalize {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<(InstId, Rewrite)> = m
            .live_ids()
            .into_par_iter()
            .filter_map(|id| match_at(m, id).map(|r| (id, r)))
            .collect();
        Ok(apply_plan(m, plan, cx, "merged"))
    }
}
