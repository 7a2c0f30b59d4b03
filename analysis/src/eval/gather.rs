//! `gather` and `scatter` with all dimension numbers, batching dimensions included.
//!
//! Gather clamps each start index so the whole slice is in bounds, as XLA does. Scatter skips
//! an update window entirely when any part of it would fall out of bounds, and applies the
//! update computation in XLA's order: scatter indices in row-major order, and within each the
//! window in row-major order, reading the partially updated result.

use super::scalar::{Fast, Reg};
use super::shape_ops as so;
use super::{arr, Evaluator, R};
use axle_ir::{ArrayLiteral, ArrayShape, AttrKey, InstId, Literal};

/// Start-index lookup shared by gather and scatter.
struct Indices {
    /// The index array as i64.
    vals: Vec<i64>,
    /// Strides of the index array.
    strides: Vec<i64>,
    /// Dimensions of the index array other than `index_vector_dim`, in order.
    batch_dims: Vec<usize>,
    /// `index_vector_dim`, or `None` when it is the implicit trailing dimension.
    ivd: Option<usize>,
    /// Length of one index vector.
    len: usize,
}

impl Indices {
    fn new(a: &ArrayLiteral, ivd: i64) -> R<Indices> {
        let rank = a.shape.rank();
        let ivd_u = ivd as usize;
        let (ivd, len) = if ivd_u == rank {
            (None, 1)
        } else if ivd_u < rank {
            (Some(ivd_u), a.shape.dims[ivd_u] as usize)
        } else {
            return Err("index_vector_dim out of range".into());
        };
        Ok(Indices {
            vals: so::to_i64s(a)?,
            strides: so::strides(&a.shape.dims),
            batch_dims: (0..rank).filter(|&d| Some(d) != ivd).collect(),
            ivd,
            len,
        })
    }

    /// The index vector at batch position `g` (one coordinate per batch dimension).
    fn vector(&self, g: &[i64], out: &mut Vec<i64>) {
        let base: i64 = self
            .batch_dims
            .iter()
            .zip(g)
            .map(|(&d, &x)| x * self.strides[d])
            .sum();
        out.clear();
        for k in 0..self.len {
            let off = base + self.ivd.map(|d| k as i64 * self.strides[d]).unwrap_or(0);
            out.push(self.vals[off as usize]);
        }
    }

    /// Position in the batch coordinates of index-array dimension `d`.
    fn batch_pos(&self, d: i64) -> R<usize> {
        self.batch_dims
            .iter()
            .position(|&b| b as i64 == d)
            .ok_or_else(|| "batching dimension is the index vector dimension".into())
    }
}

fn attr_or_empty<'m>(ev: &Evaluator<'m>, id: InstId, key: AttrKey) -> &'m [i64] {
    ev.m.ints_attr(id, &key).unwrap_or(&[])
}

/// Walks `dims` in row-major order.
fn bump(idx: &mut [i64], dims: &[i64]) {
    for d in (0..dims.len()).rev() {
        idx[d] += 1;
        if idx[d] < dims[d] {
            return;
        }
        idx[d] = 0;
    }
}

/// `gather`.
pub(crate) fn gather(
    ev: &mut Evaluator,
    id: InstId,
    operand: &ArrayLiteral,
    indices: &ArrayLiteral,
    shape: &ArrayShape,
) -> R<ArrayLiteral> {
    let offset_dims = ev.ints(id, AttrKey::OffsetDims)?;
    let collapsed = attr_or_empty(ev, id, AttrKey::CollapsedSliceDims);
    let start_map = ev.ints(id, AttrKey::StartIndexMap)?;
    let op_batch = attr_or_empty(ev, id, AttrKey::OperandBatchingDims);
    let idx_batch = attr_or_empty(ev, id, AttrKey::StartIndicesBatchingDims);
    let slice_sizes = ev.ints(id, AttrKey::SliceSizes)?;
    let ivd = ev.int(id, AttrKey::IndexVectorDim)?;
    let idx = Indices::new(indices, ivd)?;
    if idx.len != start_map.len() {
        return Err("index vector length does not match start_index_map".into());
    }
    let op_dims = &operand.shape.dims;
    let op_rank = op_dims.len();
    let out_dims = &shape.dims;
    let out_rank = out_dims.len();
    let batch_out: Vec<usize> = (0..out_rank)
        .filter(|d| !offset_dims.contains(&(*d as i64)))
        .collect();
    let offset_operand: Vec<usize> = (0..op_rank)
        .filter(|d| !collapsed.contains(&(*d as i64)) && !op_batch.contains(&(*d as i64)))
        .collect();
    if offset_operand.len() != offset_dims.len() || batch_out.len() != idx.batch_dims.len() {
        return Err("gather dimension numbers do not match the shapes".into());
    }
    let batch_pos: Vec<usize> = idx_batch
        .iter()
        .map(|&d| idx.batch_pos(d))
        .collect::<R<_>>()?;
    let st = so::strides(op_dims);
    let w = operand.ty().byte_size();
    let n = so::numel(out_dims);
    let mut data = vec![0u8; n * w];
    if operand.data.is_empty() {
        // Nothing to read: every element of a gather from an empty operand is zero (as XLA
        // gives), whatever its indices.
        return Ok(so::array(operand.ty(), out_dims, data));
    }
    let mut oidx = vec![0i64; out_rank];
    let mut g = vec![0i64; batch_out.len()];
    let mut vec_buf = Vec::new();
    let mut start = vec![0i64; op_rank];
    for o in 0..n {
        for (k, &d) in batch_out.iter().enumerate() {
            g[k] = oidx[d];
        }
        idx.vector(&g, &mut vec_buf);
        start.iter_mut().for_each(|s| *s = 0);
        for (k, &d) in start_map.iter().enumerate() {
            start[d as usize] = vec_buf[k];
        }
        for (k, &d) in op_batch.iter().enumerate() {
            start[d as usize] = g[batch_pos[k]];
        }
        let mut off = 0i64;
        for d in 0..op_rank {
            let s = start[d].clamp(0, (op_dims[d] - slice_sizes[d]).max(0));
            off += s * st[d];
        }
        for (k, &d) in offset_dims.iter().enumerate() {
            off += oidx[d as usize] * st[offset_operand[k]];
        }
        let s = off as usize * w;
        data[o * w..(o + 1) * w].copy_from_slice(&operand.data[s..s + w]);
        bump(&mut oidx, out_dims);
    }
    Ok(so::array(operand.ty(), out_dims, data))
}

/// `scatter` (variadic).
pub(crate) fn scatter(ev: &mut Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let m = ev.m;
    if ops.len() < 3 || ops.len().is_multiple_of(2) {
        return Err("scatter needs operands, indices and as many updates".into());
    }
    let n = (ops.len() - 1) / 2;
    let operands = ops[..n].iter().map(|&l| arr(l)).collect::<R<Vec<_>>>()?;
    let indices = arr(ops[n])?;
    let updates = ops[n + 1..]
        .iter()
        .map(|&l| arr(l))
        .collect::<R<Vec<_>>>()?;
    let window_dims = ev.ints(id, AttrKey::UpdateWindowDims)?;
    let inserted = attr_or_empty(ev, id, AttrKey::InsertedWindowDims);
    let to_operand = ev.ints(id, AttrKey::ScatterDimsToOperandDims)?;
    let in_batch = attr_or_empty(ev, id, AttrKey::InputBatchingDims);
    let idx_batch = attr_or_empty(ev, id, AttrKey::ScatterIndicesBatchingDims);
    let ivd = ev.int(id, AttrKey::IndexVectorDim)?;
    let idx = Indices::new(indices, ivd)?;
    if idx.len != to_operand.len() {
        return Err("index vector length does not match scatter_dims_to_operand_dims".into());
    }
    let op_dims = operands[0].shape.dims.to_vec();
    let op_rank = op_dims.len();
    let up_dims = updates[0].shape.dims.to_vec();
    let up_rank = up_dims.len();
    let scatter_dims: Vec<usize> = (0..up_rank)
        .filter(|d| !window_dims.contains(&(*d as i64)))
        .collect();
    let window_operand: Vec<usize> = (0..op_rank)
        .filter(|d| !inserted.contains(&(*d as i64)) && !in_batch.contains(&(*d as i64)))
        .collect();
    if window_operand.len() != window_dims.len() || scatter_dims.len() != idx.batch_dims.len() {
        return Err("scatter dimension numbers do not match the shapes".into());
    }
    let batch_pos: Vec<usize> = idx_batch
        .iter()
        .map(|&d| idx.batch_pos(d))
        .collect::<R<_>>()?;
    // Size of the update window along each operand dimension (1 for inserted/batching dims).
    let mut win_size = vec![1i64; op_rank];
    for (k, &d) in window_operand.iter().enumerate() {
        win_size[d] = up_dims[window_dims[k] as usize];
    }
    let comp = ev.comp(id, AttrKey::ToApply)?;
    let mut c = ev.callable(comp)?;
    let replace = c.fast() == Fast::Param(1) && n == 1;
    let st = so::strides(&op_dims);
    let ust = so::strides(&up_dims);
    let widths: Vec<usize> = operands.iter().map(|a| a.ty().byte_size()).collect();
    let uwidths: Vec<usize> = updates.iter().map(|a| a.ty().byte_size()).collect();
    let mut results: Vec<Vec<u8>> = operands.iter().map(|a| a.data.clone()).collect();
    let sdims: Vec<i64> = scatter_dims.iter().map(|&d| up_dims[d]).collect();
    let wdims: Vec<i64> = window_dims.iter().map(|&d| up_dims[d as usize]).collect();
    let n_scatter = so::numel(&sdims);
    let n_window = so::numel(&wdims);
    let mut g = vec![0i64; sdims.len()];
    let mut vec_buf = Vec::new();
    let mut start = vec![0i64; op_rank];
    let mut out = vec![[0u8; 16]; n];
    let mut args: Vec<Reg> = vec![[0u8; 16]; 2 * n];
    for _ in 0..n_scatter {
        idx.vector(&g, &mut vec_buf);
        start.iter_mut().for_each(|s| *s = 0);
        for (k, &d) in to_operand.iter().enumerate() {
            start[d as usize] = vec_buf[k];
        }
        for (k, &d) in in_batch.iter().enumerate() {
            start[d as usize] = g[batch_pos[k]];
        }
        let in_bounds = (0..op_rank).all(|d| start[d] >= 0 && start[d] <= op_dims[d] - win_size[d]);
        if in_bounds && n_window > 0 {
            let base: i64 = (0..op_rank).map(|d| start[d] * st[d]).sum();
            let ubase: i64 = scatter_dims.iter().zip(&g).map(|(&d, &x)| x * ust[d]).sum();
            let mut widx = vec![0i64; wdims.len()];
            for _ in 0..n_window {
                let mut off = base;
                let mut uoff = ubase;
                for (k, &x) in widx.iter().enumerate() {
                    off += x * st[window_operand[k]];
                    uoff += x * ust[window_dims[k] as usize];
                }
                let (off, uoff) = (off as usize, uoff as usize);
                if replace {
                    let (w, uw) = (widths[0], uwidths[0]);
                    results[0][off * w..(off + 1) * w]
                        .copy_from_slice(&updates[0].data[uoff * uw..(uoff + 1) * uw]);
                } else {
                    for k in 0..n {
                        let (w, uw) = (widths[k], uwidths[k]);
                        args[k][..w].copy_from_slice(&results[k][off * w..(off + 1) * w]);
                        args[n + k][..uw]
                            .copy_from_slice(&updates[k].data[uoff * uw..(uoff + 1) * uw]);
                    }
                    let arg_slices: Vec<&[u8]> = (0..2 * n)
                        .map(|k| {
                            if k < n {
                                &args[k][..widths[k]]
                            } else {
                                &args[k][..uwidths[k - n]]
                            }
                        })
                        .collect();
                    ev.call(&mut c, &arg_slices, &mut out)?;
                    for k in 0..n {
                        let w = widths[k];
                        results[k][off * w..(off + 1) * w].copy_from_slice(&out[k][..w]);
                    }
                }
                bump(&mut widx, &wdims);
            }
        }
        bump(&mut g, &sdims);
    }
    let lits: Vec<Literal> = operands
        .iter()
        .zip(results)
        .map(|(a, d)| Literal::Array(so::array(a.ty(), &a.shape.dims, d)))
        .collect();
    Ok(if m.shape(id).is_tuple() {
        Literal::Tuple(lits)
    } else {
        lits.into_iter().next().unwrap()
    })
}
