//! Data movement on raw literal bytes: broadcast, reshape, transpose, slice, dynamic-slice,
//! dynamic-update-slice, concatenate, pad, reverse, iota, bitcast-convert, and the
//! layout-aware `bitcast`.
//!
//! Most of these are one [`strided_copy`]: the output is walked in row-major order and each
//! element is read from `base + Σ index[k] * stride[k]` in the source (strides may be zero for
//! broadcast dimensions or negative for reversed ones). The innermost dimension is a tight loop
//! specialized by element width.

use super::elem::{map1, Elem};
use super::elementwise::with_int;
use axle_ir::{ArrayLiteral, ArrayShape, ElementType, Layout};
use std::borrow::Cow;

/// Row-major strides (in elements) of an array with dimensions `dims`.
pub(crate) fn strides(dims: &[i64]) -> Vec<i64> {
    let mut s = vec![1i64; dims.len()];
    for k in (0..dims.len().saturating_sub(1)).rev() {
        s[k] = s[k + 1] * dims[k + 1].max(1);
    }
    s
}

/// Number of elements of `dims`.
pub(crate) fn numel(dims: &[i64]) -> usize {
    dims.iter().product::<i64>().max(0) as usize
}

/// Builds an array literal.
pub(crate) fn array(ty: ElementType, dims: &[i64], data: Vec<u8>) -> ArrayLiteral {
    debug_assert_eq!(data.len(), numel(dims) * ty.byte_size());
    ArrayLiteral {
        shape: ArrayShape::new(ty, dims),
        data,
    }
}

#[inline(always)]
fn copy_run<const W: usize>(src: &[u8], out: &mut [u8], start: i64, stride: i64, n: usize) {
    let mut off = start;
    for o in out[..n * W].chunks_exact_mut(W) {
        let s = off as usize * W;
        o.copy_from_slice(&src[s..s + W]);
        off += stride;
    }
}

/// Reads an array of dimensions `out_dims` from `src` (elements of `w` bytes): the element at
/// output index `i` comes from element `base + Σ i[k] * strides[k]` of `src`.
pub(crate) fn strided_copy(
    src: &[u8],
    w: usize,
    out_dims: &[i64],
    strides: &[i64],
    base: i64,
) -> Vec<u8> {
    let n = numel(out_dims);
    let mut out = vec![0u8; n * w];
    if n == 0 {
        return out;
    }
    let rank = out_dims.len();
    if rank == 0 {
        let s = base as usize * w;
        out.copy_from_slice(&src[s..s + w]);
        return out;
    }
    let inner = out_dims[rank - 1] as usize;
    let istride = strides[rank - 1];
    let mut idx = vec![0i64; rank - 1];
    let mut off = base;
    let row_bytes = inner * w;
    for row in out.chunks_exact_mut(row_bytes) {
        if istride == 1 {
            let s = off as usize * w;
            row.copy_from_slice(&src[s..s + row_bytes]);
        } else {
            match w {
                1 => copy_run::<1>(src, row, off, istride, inner),
                2 => copy_run::<2>(src, row, off, istride, inner),
                4 => copy_run::<4>(src, row, off, istride, inner),
                8 => copy_run::<8>(src, row, off, istride, inner),
                16 => copy_run::<16>(src, row, off, istride, inner),
                _ => {
                    let mut o = off;
                    for e in row.chunks_exact_mut(w) {
                        let s = o as usize * w;
                        e.copy_from_slice(&src[s..s + w]);
                        o += istride;
                    }
                }
            }
        }
        // Advance the odometer over the outer dimensions.
        for k in (0..rank - 1).rev() {
            idx[k] += 1;
            off += strides[k];
            if idx[k] < out_dims[k] {
                break;
            }
            off -= strides[k] * idx[k];
            idx[k] = 0;
        }
    }
    out
}

/// `transpose`: output dimension `k` is operand dimension `perm[k]`.
pub(crate) fn transpose(a: &ArrayLiteral, perm: &[i64]) -> ArrayLiteral {
    let dims = &a.shape.dims;
    let st = strides(dims);
    let out_dims: Vec<i64> = perm.iter().map(|&p| dims[p as usize]).collect();
    if perm.iter().enumerate().all(|(i, &p)| i as i64 == p) {
        return array(a.ty(), &out_dims, a.data.clone());
    }
    let out_strides: Vec<i64> = perm.iter().map(|&p| st[p as usize]).collect();
    let data = strided_copy(&a.data, a.ty().byte_size(), &out_dims, &out_strides, 0);
    array(a.ty(), &out_dims, data)
}

/// [`transpose`] that borrows `a` when `perm` is the identity.
pub(crate) fn transpose_cow<'a>(a: &'a ArrayLiteral, perm: &[i64]) -> Cow<'a, ArrayLiteral> {
    if perm.iter().enumerate().all(|(i, &p)| i as i64 == p) {
        Cow::Borrowed(a)
    } else {
        Cow::Owned(transpose(a, perm))
    }
}

/// `broadcast`: operand dimension `i` becomes output dimension `map[i]`.
pub(crate) fn broadcast(a: &ArrayLiteral, out_dims: &[i64], map: &[i64]) -> ArrayLiteral {
    let st = strides(&a.shape.dims);
    let mut out_strides = vec![0i64; out_dims.len()];
    for (i, &d) in map.iter().enumerate() {
        if a.shape.dims[i] != 1 {
            out_strides[d as usize] = st[i];
        }
    }
    let data = strided_copy(&a.data, a.ty().byte_size(), out_dims, &out_strides, 0);
    array(a.ty(), out_dims, data)
}

/// `slice` with `[start, limit, stride]` per dimension.
pub(crate) fn slice(a: &ArrayLiteral, bounds: &[[i64; 3]]) -> ArrayLiteral {
    let st = strides(&a.shape.dims);
    let mut out_dims = Vec::with_capacity(bounds.len());
    let mut out_strides = Vec::with_capacity(bounds.len());
    let mut base = 0;
    for (k, &[start, limit, stride]) in bounds.iter().enumerate() {
        let n = if limit > start {
            (limit - start + stride - 1) / stride
        } else {
            0
        };
        out_dims.push(n);
        out_strides.push(st[k] * stride);
        base += start * st[k];
    }
    let data = strided_copy(&a.data, a.ty().byte_size(), &out_dims, &out_strides, base);
    array(a.ty(), &out_dims, data)
}

/// `reverse` along `dims`.
pub(crate) fn reverse(a: &ArrayLiteral, rev: &[i64]) -> ArrayLiteral {
    let dims = &a.shape.dims;
    let mut st = strides(dims);
    let mut base = 0;
    for &d in rev {
        let d = d as usize;
        if dims[d] > 0 {
            base += (dims[d] - 1) * st[d];
        }
        st[d] = -st[d];
    }
    let data = strided_copy(&a.data, a.ty().byte_size(), dims, &st, base);
    array(a.ty(), dims, data)
}

/// Clamps dynamic start indices to `[0, dim - size]` per dimension, as XLA does.
pub(crate) fn clamp_starts(starts: &[i64], dims: &[i64], sizes: &[i64]) -> Vec<i64> {
    starts
        .iter()
        .zip(dims.iter().zip(sizes))
        .map(|(&s, (&d, &z))| s.clamp(0, (d - z).max(0)))
        .collect()
}

/// `dynamic-slice` with already clamped starts.
pub(crate) fn dynamic_slice(a: &ArrayLiteral, starts: &[i64], sizes: &[i64]) -> ArrayLiteral {
    let bounds: Vec<[i64; 3]> = starts
        .iter()
        .zip(sizes)
        .map(|(&s, &z)| [s, s + z, 1])
        .collect();
    slice(a, &bounds)
}

/// `dynamic-update-slice` with already clamped starts.
pub(crate) fn dynamic_update_slice(
    a: &ArrayLiteral,
    update: &ArrayLiteral,
    starts: &[i64],
) -> ArrayLiteral {
    let mut out = a.clone();
    let w = a.ty().byte_size();
    let udims = &update.shape.dims;
    if numel(udims) == 0 {
        return out;
    }
    let st = strides(&a.shape.dims);
    let rank = udims.len();
    if rank == 0 {
        out.data.copy_from_slice(&update.data);
        return out;
    }
    let inner = udims[rank - 1] as usize * w;
    let mut idx = vec![0i64; rank];
    for row in update.data.chunks_exact(inner) {
        let off: i64 = (0..rank).map(|k| (starts[k] + idx[k]) * st[k]).sum();
        let s = off as usize * w;
        out.data[s..s + inner].copy_from_slice(row);
        for k in (0..rank - 1).rev() {
            idx[k] += 1;
            if idx[k] < udims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    out
}

/// `concatenate` along `dim`.
pub(crate) fn concatenate(ops: &[&ArrayLiteral], dim: usize, out_dims: &[i64]) -> ArrayLiteral {
    let ty = ops[0].ty();
    let w = ty.byte_size();
    let outer: usize = out_dims[..dim].iter().product::<i64>() as usize;
    let mut data = Vec::with_capacity(numel(out_dims) * w);
    for o in 0..outer {
        for a in ops {
            let chunk = numel(&a.shape.dims[dim..]) * w;
            data.extend_from_slice(&a.data[o * chunk..(o + 1) * chunk]);
        }
    }
    array(ty, out_dims, data)
}

/// `pad` with `[low, high, interior]` per dimension; `value` is one element.
pub(crate) fn pad(a: &ArrayLiteral, value: &[u8], cfg: &[[i64; 3]]) -> ArrayLiteral {
    let ty = a.ty();
    let w = ty.byte_size();
    let dims = &a.shape.dims;
    let out_dims: Vec<i64> = dims
        .iter()
        .zip(cfg)
        .map(|(&d, &[lo, hi, int])| lo + hi + d + (d - 1).max(0) * int)
        .collect();
    let n = numel(&out_dims);
    let mut data = Vec::with_capacity(n * w);
    for _ in 0..n {
        data.extend_from_slice(value);
    }
    if numel(dims) == 0 || n == 0 {
        return array(ty, &out_dims, data);
    }
    let ost = strides(&out_dims);
    let rank = dims.len();
    if rank == 0 {
        data.copy_from_slice(&a.data);
        return array(ty, &out_dims, data);
    }
    let last = rank - 1;
    let inner = dims[last] as usize;
    let mut idx = vec![0i64; rank];
    for row in a.data.chunks_exact(inner * w) {
        let mut base = 0i64;
        let mut inside = true;
        for k in 0..last {
            let t = cfg[k][0] + idx[k] * (cfg[k][2] + 1);
            if t < 0 || t >= out_dims[k] {
                inside = false;
                break;
            }
            base += t * ost[k];
        }
        if inside {
            let (lo, step) = (cfg[last][0], cfg[last][2] + 1);
            for (i, e) in row.chunks_exact(w).enumerate() {
                let t = lo + i as i64 * step;
                if t >= 0 && t < out_dims[last] {
                    let s = (base + t) as usize * w;
                    data[s..s + w].copy_from_slice(e);
                }
            }
        }
        for k in (0..last).rev() {
            idx[k] += 1;
            if idx[k] < dims[k] {
                break;
            }
            idx[k] = 0;
        }
    }
    array(ty, &out_dims, data)
}

/// `iota` of type `ty` along `dim`.
pub(crate) fn iota(ty: ElementType, dims: &[i64], dim: usize) -> Result<ArrayLiteral, String> {
    let n = numel(dims);
    let len = dims[dim] as usize;
    let inner = numel(&dims[dim + 1..]);
    let idx: Vec<i64> = (0..n)
        .map(|i| ((i / inner.max(1)) % len.max(1)) as i64)
        .collect();
    let src = super::elem::from_slice(&idx);
    let mut data = vec![0u8; n * ty.byte_size()];
    super::elementwise::convert(ElementType::S64, ty, &src, &mut data, false)?;
    Ok(array(ty, dims, data))
}

/// `bitcast-convert` to `to` with result dimensions `out_dims`: the row-major bytes are kept
/// (sub-byte types are repacked bit by bit, little-endian).
pub(crate) fn bitcast_convert(
    a: &ArrayLiteral,
    to: ElementType,
    out_dims: &[i64],
) -> Result<ArrayLiteral, String> {
    let from = a.ty();
    let (bi, bo) = (from.bits(), to.bits());
    let n_out = numel(out_dims);
    if bi % 8 == 0 && bo % 8 == 0 {
        if a.data.len() != n_out * to.byte_size() {
            return Err(format!(
                "bitcast-convert from {} to {} changes the byte size",
                from.name(),
                to.name()
            ));
        }
        let mut data = a.data.clone();
        if to.is_pred() {
            for b in &mut data {
                *b = (*b != 0) as u8;
            }
        }
        return Ok(array(to, out_dims, data));
    }
    // Bit-level repacking: element i of the input occupies bits [i*bi, (i+1)*bi).
    let mut bits: Vec<bool> = Vec::with_capacity(a.len() * bi as usize);
    for i in 0..a.len() {
        let e = a.element_bytes(i);
        for b in 0..bi {
            bits.push((e[(b / 8) as usize] >> (b % 8)) & 1 == 1);
        }
    }
    if bits.len() != n_out * bo as usize {
        return Err(format!(
            "bitcast-convert from {} to {} changes the bit size",
            from.name(),
            to.name()
        ));
    }
    let w = to.byte_size();
    let mut data = vec![0u8; n_out * w];
    for (i, e) in data.chunks_exact_mut(w).enumerate() {
        for b in 0..bo as usize {
            if bits[i * bo as usize + b] {
                e[b / 8] |= 1 << (b % 8);
            }
        }
    }
    Ok(array(to, out_dims, data))
}

/// The minor-to-major order of a layout, defaulting to row-major; errors on tiled layouts.
pub(crate) fn minor_to_major(layout: &Layout, rank: usize) -> Result<Vec<i64>, String> {
    match layout {
        Layout::Array(l) if !l.minor_to_major.is_empty() || rank == 0 => {
            if !l.tiles.is_empty() {
                return Err("tiled layouts are not supported".into());
            }
            if l.minor_to_major.len() != rank {
                return Err(format!(
                    "layout has {} dimensions, shape has {rank}",
                    l.minor_to_major.len()
                ));
            }
            Ok(l.minor_to_major.to_vec())
        }
        _ => Ok((0..rank as i64).rev().collect()),
    }
}

/// `bitcast`: reinterprets the physical buffer of `a` (laid out by `m2m_in`) as an array of
/// type `to` and dimensions `out_dims` laid out by `m2m_out`.
pub(crate) fn bitcast(
    a: &ArrayLiteral,
    m2m_in: &[i64],
    to: ElementType,
    out_dims: &[i64],
    m2m_out: &[i64],
) -> Result<ArrayLiteral, String> {
    if a.data.len() != numel(out_dims) * to.byte_size() {
        return Err(format!(
            "bitcast from {} elements of {} to {} elements of {} changes the buffer size",
            a.len(),
            a.ty().name(),
            numel(out_dims),
            to.name()
        ));
    }
    // Physical order of the input: dimensions from most major to most minor.
    let perm_in: Vec<i64> = m2m_in.iter().rev().copied().collect();
    let phys = transpose(a, &perm_in);
    let perm_out: Vec<i64> = m2m_out.iter().rev().copied().collect();
    let phys_dims: Vec<i64> = perm_out.iter().map(|&p| out_dims[p as usize]).collect();
    let phys = array(to, &phys_dims, phys.data);
    // Logical dimension perm_out[k] is physical dimension k.
    let mut inv = vec![0i64; perm_out.len()];
    for (k, &p) in perm_out.iter().enumerate() {
        inv[p as usize] = k as i64;
    }
    Ok(transpose(&phys, &inv))
}

/// Reads scalar integer literal bytes of type `ty` as `i64`.
pub(crate) fn scalar_i64(ty: ElementType, b: &[u8]) -> Result<i64, String> {
    with_int!(ty, T => Ok(T::load(b).to_i128() as i64), else Err(format!(
        "expected an integer index, found {}", ty.name()
    )))
}

/// Reads every element of an integer array as `i64`.
pub(crate) fn to_i64s(a: &ArrayLiteral) -> Result<Vec<i64>, String> {
    let mut out = vec![0i64; a.len()];
    with_int!(a.ty(), T => {
        let mut bytes = vec![0u8; a.len() * 8];
        map1::<T, i64>(&a.data, &mut bytes, |v| v.to_i128() as i64);
        for (o, b) in out.iter_mut().zip(bytes.chunks_exact(8)) {
            *o = i64::load(b);
        }
        Ok(out)
    }, else Err(format!("expected integer indices, found {}", a.ty().name())))
}

use super::elem::Int;
