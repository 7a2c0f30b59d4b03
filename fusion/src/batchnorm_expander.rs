//! `batchnorm-expander`: rewrites `batch-norm-inference`, `batch-norm-training` and
//! `batch-norm-grad` into ordinary HLO (broadcast, reduce, elementwise arithmetic, `rsqrt`,
//! tuple), with the formulas of XLA's `BatchNormExpander`, computed in the operand's element
//! type as XLA does. With `N` the elements per feature, `eps` the `epsilon` attribute (an `f32`,
//! converted to the element type), sums and means over every dimension but `feature_index`, and
//! per-feature values broadcast along `feature_index`:
//!
//! - inference: `x * s + (offset - mean * s)` with `s = scale * rsqrt(var + eps)`;
//! - training: `mean = sum(x) / N`, `var = sum(x * x) / N - mean * mean`, `y = (x - mean) *
//!   rsqrt(var + eps) * scale + offset`, giving `(y, mean, var)`;
//! - grad: `grad_scale = sum(g * (x - mean)) * rsqrt(var + eps)`, `grad_offset = sum(g)`,
//!   `grad_x = scale * rsqrt(var + eps) * (1 / N) * (g * N - sum(g) - sum(g * (x - mean)) *
//!   (x - mean) / (var + eps))`, giving `(grad_x, grad_scale, grad_offset)`.
//!
//! Backends that have no batch-norm kernels run this first. The reference evaluator computes
//! the batch-norm ops in `f64` per feature, so the expansion agrees with it within rounding of
//! the element type, not bit for bit.
//!
//! Read phase: the batch-norm instructions and their attributes, in parallel. Write phase: one
//! scalar `add` reducer per element type (a new computation), then the expansion of each
//! instruction, which replaces it.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values up to rounding; no batch-norm
//! instruction with a static float shape and readable `epsilon`/`feature_index` is left (others
//! are left alone, for the backend to refuse by name).
//!
//! Counters: `inference`, `training`, `grad` (instructions expanded).

use hashbrown::HashMap;

use axle_ir::{
    ArrayLayout, ArrayShape, Attr, AttrKey, AttrValue, Changed, CompId, ElementType, InstId,
    Layout, LayoutId, Literal, Module, NewInst, Opcode, Pass, PassCx, PassError, Rewriter, Shape,
    ShapeId,
};
use rayon::prelude::*;

use crate::rewrite::{add_binary_computation, array, scalar_literal, Num};

/// The `batchnorm-expander` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct BatchNormExpander;

/// One batch-norm instruction to expand.
struct Plan {
    id: InstId,
    op: Opcode,
    x: ArrayShape,
    feature_index: usize,
    epsilon: f32,
}

fn other_attr<'m>(m: &'m Module, id: InstId, key: &str) -> Option<&'m str> {
    match m.attr(id, &AttrKey::Other(key.into()))? {
        AttrValue::Raw(s) | AttrValue::Str(s) | AttrValue::Ident(s) => Some(s),
        _ => None,
    }
}

fn match_at(m: &Module, id: InstId) -> Option<Plan> {
    let op = m.opcode(id);
    if !matches!(
        op,
        Opcode::BatchNormInference | Opcode::BatchNormTraining | Opcode::BatchNormGrad
    ) {
        return None;
    }
    let x = array(m, *m.operands(id).first()?)?.clone();
    if !x.ty.is_float() || x.ty.is_complex() {
        return None;
    }
    let epsilon: f32 = other_attr(m, id, "epsilon")?.trim().parse().ok()?;
    let feature_index = match m.attr(id, &AttrKey::Other("feature_index".into()))? {
        AttrValue::Int(i) => *i,
        AttrValue::Raw(s) | AttrValue::Str(s) | AttrValue::Ident(s) => s.trim().parse().ok()?,
        _ => return None,
    };
    let feature_index = usize::try_from(feature_index).ok()?;
    if feature_index >= x.rank() {
        return None;
    }
    // Every other operand must be a static array of the same element type.
    for &o in m.operands(id) {
        if array(m, o)?.ty != x.ty {
            return None;
        }
    }
    Some(Plan {
        id,
        op,
        x,
        feature_index,
        epsilon,
    })
}

/// Emits instructions into one computation through the rewriter.
struct Emit<'r, 'm> {
    rw: &'r mut Rewriter<'m>,
    comp: CompId,
    ty: ElementType,
}

impl Emit<'_, '_> {
    fn push(
        &mut self,
        opcode: Opcode,
        (shape, layout): (ShapeId, LayoutId),
        operands: &[InstId],
        attrs: Vec<Attr>,
    ) -> InstId {
        self.rw.add(
            self.comp,
            NewInst {
                opcode,
                shape,
                layout,
                operands: operands.to_vec(),
                attrs,
                name: None,
            },
        )
    }

    /// The interned shape and default layout of an array of `dims`.
    fn arr(&mut self, dims: &[i64]) -> (ShapeId, LayoutId) {
        let m = self.rw.module_mut();
        let s = m.intern_shape(Shape::Array(ArrayShape::new(self.ty, dims)));
        let l = if dims.is_empty() {
            m.no_layout()
        } else {
            m.intern_layout(Layout::Array(ArrayLayout::row_major(dims.len())))
        };
        (s, l)
    }

    fn scalar(&mut self, v: f64) -> InstId {
        let s = self.arr(&[]);
        let c = self.push(Opcode::Constant, s, &[], Vec::new());
        let lit = scalar_literal(self.ty, Num::Float(v));
        self.rw
            .module_mut()
            .set_constant(c, axle_ir::ConstValue::Literal(Literal::Array(lit)));
        c
    }

    fn broadcast(&mut self, v: InstId, dims: &[i64], along: &[i64]) -> InstId {
        let s = self.arr(dims);
        self.push(
            Opcode::Broadcast,
            s,
            &[v],
            vec![(AttrKey::Dimensions, AttrValue::Ints(along.into()))],
        )
    }

    fn binary(&mut self, op: Opcode, a: InstId, b: InstId, dims: &[i64]) -> InstId {
        let s = self.arr(dims);
        self.push(op, s, &[a, b], Vec::new())
    }

    fn unary(&mut self, op: Opcode, a: InstId, dims: &[i64]) -> InstId {
        let s = self.arr(dims);
        self.push(op, s, &[a], Vec::new())
    }

    fn reduce_add(
        &mut self,
        x: InstId,
        zero: InstId,
        out: &[i64],
        dims: &[i64],
        add: CompId,
    ) -> InstId {
        let s = self.arr(out);
        self.push(
            Opcode::Reduce,
            s,
            &[x, zero],
            vec![
                (AttrKey::Dimensions, AttrValue::Ints(dims.into())),
                (AttrKey::ToApply, AttrValue::Comp(add)),
            ],
        )
    }
}

/// Expands one instruction; returns its replacement.
fn expand(rw: &mut Rewriter<'_>, p: &Plan, add: CompId) -> InstId {
    let m = rw.module();
    let comp = m.parent(p.id);
    let ops: Vec<InstId> = m.operands(p.id).iter().map(|&o| rw.resolve(o)).collect();
    let (tuple_shape, tuple_layout) = (m.shape_id(p.id), m.layout_id(p.id));
    let mut e = Emit {
        rw,
        comp,
        ty: p.x.ty,
    };
    let xd = p.x.dims.to_vec();
    let fi = p.feature_index;
    let nf = xd[fi];
    let fd = [nf];
    let fb = [fi as i64];
    let rest: Vec<i64> = (0..xd.len() as i64).filter(|&d| d != fi as i64).collect();
    let per_feature: i64 = rest.iter().map(|&d| xd[d as usize]).product();
    let n = per_feature as f64;
    let eps = e.scalar(p.epsilon as f64);
    use Opcode::*;
    match p.op {
        BatchNormInference => {
            let (x, scale, offset, mean, var) = (ops[0], ops[1], ops[2], ops[3], ops[4]);
            let eps_f = e.broadcast(eps, &fd, &[]);
            let ve = e.binary(Add, var, eps_f, &fd);
            let r = e.unary(Rsqrt, ve, &fd);
            let s = e.binary(Multiply, scale, r, &fd);
            let ms = e.binary(Multiply, mean, s, &fd);
            let shift = e.binary(Subtract, offset, ms, &fd);
            let sb = e.broadcast(s, &xd, &fb);
            let xs = e.binary(Multiply, x, sb, &xd);
            let hb = e.broadcast(shift, &xd, &fb);
            e.push(Add, (tuple_shape, tuple_layout), &[xs, hb], Vec::new())
        }
        BatchNormTraining => {
            let (x, scale, offset) = (ops[0], ops[1], ops[2]);
            let zero = e.scalar(0.0);
            let nc = e.scalar(n);
            let n_f = e.broadcast(nc, &fd, &[]);
            let x2 = e.binary(Multiply, x, x, &xd);
            let sum = e.reduce_add(x, zero, &fd, &rest, add);
            let sq = e.reduce_add(x2, zero, &fd, &rest, add);
            let mean = e.binary(Divide, sum, n_f, &fd);
            let sq_mean = e.binary(Divide, sq, n_f, &fd);
            let mean_sq = e.binary(Multiply, mean, mean, &fd);
            let var = e.binary(Subtract, sq_mean, mean_sq, &fd);
            let mean_b = e.broadcast(mean, &xd, &fb);
            let var_b = e.broadcast(var, &xd, &fb);
            let eps_x = e.broadcast(eps, &xd, &[]);
            let ve = e.binary(Add, var_b, eps_x, &xd);
            let r = e.unary(Rsqrt, ve, &xd);
            let xm = e.binary(Subtract, x, mean_b, &xd);
            let norm = e.binary(Multiply, xm, r, &xd);
            let scale_b = e.broadcast(scale, &xd, &fb);
            let scaled = e.binary(Multiply, norm, scale_b, &xd);
            let offset_b = e.broadcast(offset, &xd, &fb);
            let y = e.binary(Add, scaled, offset_b, &xd);
            e.push(
                Tuple,
                (tuple_shape, tuple_layout),
                &[y, mean, var],
                Vec::new(),
            )
        }
        _ => {
            let (x, scale, mean, var, g) = (ops[0], ops[1], ops[2], ops[3], ops[4]);
            let zero = e.scalar(0.0);
            let scale_b = e.broadcast(scale, &xd, &fb);
            let mean_b = e.broadcast(mean, &xd, &fb);
            let var_b = e.broadcast(var, &xd, &fb);
            let eps_x = e.broadcast(eps, &xd, &[]);
            let eps_f = e.broadcast(eps, &fd, &[]);
            let ve_x = e.binary(Add, var_b, eps_x, &xd);
            let r_x = e.unary(Rsqrt, ve_x, &xd);
            let ve_f = e.binary(Add, var, eps_f, &fd);
            let r_f = e.unary(Rsqrt, ve_f, &fd);
            let xm = e.binary(Subtract, x, mean_b, &xd);
            let gxm = e.binary(Multiply, g, xm, &xd);
            let sum_gxm = e.reduce_add(gxm, zero, &fd, &rest, add);
            let grad_offset = e.reduce_add(g, zero, &fd, &rest, add);
            let grad_scale = e.binary(Multiply, sum_gxm, r_f, &fd);
            let nc = e.scalar(n);
            let n_x = e.broadcast(nc, &xd, &[]);
            let i1 = e.binary(Multiply, g, n_x, &xd);
            let i2 = e.broadcast(grad_offset, &xd, &fb);
            let i3 = e.broadcast(sum_gxm, &xd, &fb);
            let i4 = e.binary(Multiply, i3, xm, &xd);
            let i5 = e.binary(Divide, i4, ve_x, &xd);
            let i12 = e.binary(Subtract, i1, i2, &xd);
            let i6 = e.binary(Subtract, i12, i5, &xd);
            let one = e.scalar(1.0);
            let inv_n = e.binary(Divide, one, nc, &[]);
            let inv_n_x = e.broadcast(inv_n, &xd, &[]);
            let sr = e.binary(Multiply, scale_b, r_x, &xd);
            let srn = e.binary(Multiply, sr, inv_n_x, &xd);
            let gx = e.binary(Multiply, srn, i6, &xd);
            e.push(
                Tuple,
                (tuple_shape, tuple_layout),
                &[gx, grad_scale, grad_offset],
                Vec::new(),
            )
        }
    }
}

impl Pass for BatchNormExpander {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let plan: Vec<Plan> = m
            .live_ids()
            .into_par_iter()
            .filter_map(|id| match_at(m, id))
            .collect();
        if plan.is_empty() {
            return Ok(false);
        }
        let mut rw = m.rewriter();
        let mut adders: HashMap<ElementType, CompId> = HashMap::new();
        for p in &plan {
            if !rw.module().is_live(p.id) {
                continue;
            }
            // Inference reduces nothing and needs no reducer.
            let add = match adders.get(&p.x.ty) {
                _ if p.op == Opcode::BatchNormInference => CompId::NONE,
                Some(&c) => c,
                None => {
                    let c = add_binary_computation(&mut rw, "batchnorm_add", p.x.ty, Opcode::Add);
                    adders.insert(p.x.ty, c);
                    c
                }
            };
            let new = expand(&mut rw, p, add);
            let name = rw.module().name(p.id).to_string();
            rw.module_mut().set_name(p.id, "");
            rw.module_mut().set_name(new, &name);
            rw.replace_all_uses(p.id, new);
            cx.count(
                match p.op {
                    Opcode::BatchNormInference => "inference",
                    Opcode::BatchNormTraining => "training",
                    _ => "grad",
                },
                1,
            );
        }
        Ok(rw.finish())
    }
}

/// Whether `m` has a live batch-norm instruction.
pub fn has_batch_norm(m: &Module) -> bool {
    m.live_ids().into_par_iter().any(|id| {
        matches!(
            m.opcode(id),
            Opcode::BatchNormInference | Opcode::BatchNormTraining | Opcode::BatchNormGrad
        )
    })
}
