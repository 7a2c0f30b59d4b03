//! `batch-norm-inference`, `batch-norm-training` and `batch-norm-grad`, with the formulas of
//! XLA's `BatchNormExpander` (the form XLA's CPU backend runs them in), computed in `f64` per
//! feature and rounded to the element type:
//!
//! - inference: `x * s + (offset - mean * s)` with `s = scale * rsqrt(var + epsilon)`;
//! - training: `mean = E[x]`, `var = E[x^2] - E[x]^2`, `(x - mean) * rsqrt(var + epsilon) *
//!   scale + offset`, returning `(y, mean, var)`;
//! - grad: `grad_scale = sum(g * (x - mean)) * rsqrt(var + epsilon)`, `grad_offset = sum(g)`,
//!   `grad_x = scale * rsqrt(var + epsilon) / N * (N * g - sum(g) - (x - mean) *
//!   sum(g * (x - mean)) / (var + epsilon))`.

use super::elem::{from_slice, to_vec};
use super::elementwise::convert;
use super::shape_ops as so;
use super::{arr, Evaluator, R};
use axle_ir::{ArrayLiteral, AttrKey, AttrValue, ElementType, InstId, Literal, Opcode};

fn raw_attr(ev: &Evaluator, id: InstId, key: &str) -> R<String> {
    match ev.m.attr(id, &AttrKey::Other(key.into())) {
        Some(AttrValue::Raw(s)) | Some(AttrValue::Str(s)) | Some(AttrValue::Ident(s)) => {
            Ok(s.to_string())
        }
        _ => Err(format!("batch norm needs {key}").into()),
    }
}

fn load(a: &ArrayLiteral) -> R<Vec<f64>> {
    if !a.ty().is_float() {
        return Err(format!("batch norm is not defined for {}", a.ty().name()).into());
    }
    let mut bytes = vec![0u8; a.len() * 8];
    convert(a.ty(), ElementType::F64, &a.data, &mut bytes, false)?;
    Ok(to_vec(&bytes))
}

fn store(v: &[f64], like: &ArrayLiteral, dims: &[i64]) -> R<Literal> {
    let mut data = vec![0u8; v.len() * like.ty().byte_size()];
    convert(
        ElementType::F64,
        like.ty(),
        &from_slice(v),
        &mut data,
        false,
    )?;
    Ok(Literal::Array(so::array(like.ty(), dims, data)))
}

/// The feature of every element of an array of dimensions `dims`.
fn features(dims: &[i64], fi: usize) -> impl Iterator<Item = usize> {
    let inner: usize = dims[fi + 1..].iter().product::<i64>() as usize;
    let nf = dims[fi] as usize;
    let n = so::numel(dims);
    (0..n).map(move |i| (i / inner.max(1)) % nf.max(1))
}

/// Evaluates one of the batch norm ops.
pub(crate) fn batch_norm(ev: &mut Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let eps: f64 = raw_attr(ev, id, "epsilon")?
        .trim()
        .parse()
        .map_err(|_| "bad epsilon")?;
    // XLA rounds epsilon to the element type first.
    let x = arr(ops[0])?;
    let eps = {
        let mut b = vec![0u8; x.ty().byte_size()];
        convert(ElementType::F64, x.ty(), &eps.to_le_bytes(), &mut b, false)?;
        let mut e = [0u8; 8];
        convert(x.ty(), ElementType::F64, &b, &mut e, false)?;
        f64::from_le_bytes(e)
    };
    let fi: usize = raw_attr(ev, id, "feature_index")?
        .trim()
        .parse()
        .map_err(|_| "bad feature_index")?;
    let dims = x.shape.dims.to_vec();
    if fi >= dims.len() {
        return Err("feature_index out of range".into());
    }
    let nf = dims[fi] as usize;
    let n_per = (so::numel(&dims) / nf.max(1)) as f64;
    let xv = load(x)?;
    let feat = |k: usize| -> R<Vec<f64>> {
        let a = arr(ops[k])?;
        if a.len() != nf {
            return Err("per-feature operands must have one element per feature".into());
        }
        load(a)
    };
    let fdims = [nf as i64];
    match ev.m.opcode(id) {
        Opcode::BatchNormInference => {
            let (scale, offset, mean, var) = (feat(1)?, feat(2)?, feat(3)?, feat(4)?);
            let s: Vec<f64> = (0..nf)
                .map(|f| scale[f] * (1.0 / (var[f] + eps).sqrt()))
                .collect();
            let shift: Vec<f64> = (0..nf).map(|f| offset[f] - mean[f] * s[f]).collect();
            let y: Vec<f64> = xv
                .iter()
                .zip(features(&dims, fi))
                .map(|(&v, f)| v * s[f] + shift[f])
                .collect();
            store(&y, x, &dims)
        }
        Opcode::BatchNormTraining => {
            let (scale, offset) = (feat(1)?, feat(2)?);
            let mut sum = vec![0.0; nf];
            let mut sq = vec![0.0; nf];
            for (&v, f) in xv.iter().zip(features(&dims, fi)) {
                sum[f] += v;
                sq[f] += v * v;
            }
            let mean: Vec<f64> = sum.iter().map(|s| s / n_per).collect();
            let var: Vec<f64> = (0..nf).map(|f| sq[f] / n_per - mean[f] * mean[f]).collect();
            let y: Vec<f64> = xv
                .iter()
                .zip(features(&dims, fi))
                .map(|(&v, f)| (v - mean[f]) * (1.0 / (var[f] + eps).sqrt()) * scale[f] + offset[f])
                .collect();
            Ok(Literal::Tuple(vec![
                store(&y, x, &dims)?,
                store(&mean, x, &fdims)?,
                store(&var, x, &fdims)?,
            ]))
        }
        Opcode::BatchNormGrad => {
            let (scale, mean, var) = (feat(1)?, feat(2)?, feat(3)?);
            let g = arr(ops[4])?;
            if g.shape.dims != x.shape.dims {
                return Err("grad_output must have the activation's dimensions".into());
            }
            let gv = load(g)?;
            let mut sum_g = vec![0.0; nf];
            let mut sum_gxm = vec![0.0; nf];
            for ((&v, &gg), f) in xv.iter().zip(&gv).zip(features(&dims, fi)) {
                sum_g[f] += gg;
                sum_gxm[f] += gg * (v - mean[f]);
            }
            let rs: Vec<f64> = var.iter().map(|v| 1.0 / (v + eps).sqrt()).collect();
            let grad_scale: Vec<f64> = (0..nf).map(|f| sum_gxm[f] * rs[f]).collect();
            let gx: Vec<f64> = xv
                .iter()
                .zip(&gv)
                .zip(features(&dims, fi))
                .map(|((&v, &gg), f)| {
                    scale[f] * rs[f] / n_per
                        * (gg * n_per - sum_g[f] - (v - mean[f]) * sum_gxm[f] / (var[f] + eps))
                })
                .collect();
            Ok(Literal::Tuple(vec![
                store(&gx, x, &dims)?,
                store(&grad_scale, x, &fdims)?,
                store(&sum_g, x, &fdims)?,
            ]))
        }
        op => Err(format!("{} is not a batch norm op", op.name()).into()),
    }
}
