//! `sort` (multi-operand, any comparator), `topk`, and the `TopK` custom call of XLA's CPU
//! dumps.
//!
//! Sorting is a stable merge sort of row indices that only ever asks the comparator
//! `less(a, b)`, so any comparator (even one that is not a strict weak order) gives a
//! deterministic permutation and never a panic. Stable and unstable sorts both sort stably.
//! A comparator of the form `compare(p0, p1)` sorts on typed keys without running the
//! comparator per comparison.

use super::elem::{Elem, Float, FloatStorage, Int};
use super::elementwise::{with_float, with_int};
use super::shape_ops as so;
use super::{arr, Callable, Evaluator, R};
use axle_ir::{
    ArrayLiteral, AttrKey, AttrValue, ComparisonDirection, ComparisonType, ElementType, InstId,
    Literal,
};

/// Stable merge sort of `idx` by `less`.
fn merge_sort(idx: &mut Vec<u32>, less: &mut dyn FnMut(u32, u32) -> R<bool>) -> R<()> {
    let n = idx.len();
    // Insertion-sort runs of 16, then merge runs pairwise.
    const RUN: usize = 16;
    for start in (0..n).step_by(RUN) {
        let end = (start + RUN).min(n);
        for i in start + 1..end {
            let mut j = i;
            while j > start && less(idx[j], idx[j - 1])? {
                idx.swap(j, j - 1);
                j -= 1;
            }
        }
    }
    let mut buf = idx.clone();
    let mut width = RUN;
    while width < n {
        for start in (0..n).step_by(2 * width) {
            let mid = (start + width).min(n);
            let end = (start + 2 * width).min(n);
            let (mut i, mut j, mut o) = (start, mid, start);
            while i < mid && j < end {
                if less(idx[j], idx[i])? {
                    buf[o] = idx[j];
                    j += 1;
                } else {
                    buf[o] = idx[i];
                    i += 1;
                }
                o += 1;
            }
            buf[o..o + mid - i].copy_from_slice(&idx[i..mid]);
            o += mid - i;
            buf[o..o + end - j].copy_from_slice(&idx[j..end]);
        }
        std::mem::swap(idx, &mut buf);
        width *= 2;
    }
    Ok(())
}

/// Sort keys for the typed fast path.
enum Keys {
    Float(Vec<f64>),
    Ord(Vec<i128>),
}

/// Typed keys of the elements in `data` (type `ty`), compared as comparison type `cty`.
fn keys(data: &[u8], ty: ElementType, cty: ComparisonType, ftz: bool) -> Option<Keys> {
    if ty.is_pred() {
        return Some(Keys::Ord(data.iter().map(|&b| (b != 0) as i128).collect()));
    }
    with_float!(ty, S => {
        let vals = data.chunks_exact(S::SIZE).map(|b| S::load(b).up());
        return Some(if cty == ComparisonType::TotalOrder {
            Keys::Ord(vals.map(|v| v.total_order_key() as i128).collect())
        } else {
            Keys::Float(vals.map(|v| if ftz { v.flush() } else { v }.to_f64()).collect())
        });
    }, else ());
    with_int!(ty, T => {
        return Some(Keys::Ord(data.chunks_exact(T::SIZE).map(|b| T::load(b).to_i128()).collect()));
    }, else ());
    None
}

/// For a comparator `compare(f(lhs), f(rhs))`: the keys `f(x)` of every element, computed once
/// per element by running the comparator with both sides bound to the same element.
fn split_keys(
    ev: &mut Evaluator,
    c: &mut Callable,
    ops: &[ArrayLiteral],
) -> R<Option<(ComparisonDirection, Keys)>> {
    let Some(ks) = c.key_split() else {
        return Ok(None);
    };
    if let Some(k) = ks.operand {
        return Ok(keys(&ops[k].data, ops[k].ty(), ks.cty, ev.ftz).map(|keys| (ks.dir, keys)));
    }
    let n = ops[0].len();
    let w = ks.ty.byte_size();
    let widths: Vec<usize> = ops.iter().map(|a| a.ty().byte_size()).collect();
    let mut data = vec![0u8; n * w];
    for (e, key) in data.chunks_exact_mut(w).enumerate() {
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 * ops.len());
        for (o, &ow) in ops.iter().zip(&widths) {
            let x = &o.data[e * ow..(e + 1) * ow];
            args.push(x);
            args.push(x);
        }
        let r = ev.call_reg(c, &args, ks.lhs)?;
        key.copy_from_slice(&r[..w]);
    }
    Ok(keys(&data, ks.ty, ks.cty, ev.ftz).map(|keys| (ks.dir, keys)))
}

#[inline(always)]
fn dir_less<T: PartialOrd>(dir: ComparisonDirection, a: T, b: T) -> bool {
    use ComparisonDirection::*;
    match dir {
        Lt => a < b,
        Le => a <= b,
        Gt => a > b,
        Ge => a >= b,
        Eq => a == b,
        Ne => a != b,
    }
}

/// Sorts `len` elements of each of `rows` rows (operands already transposed so the sort
/// dimension is last) and returns one permutation per row, concatenated.
fn sort_rows(
    ev: &mut Evaluator,
    c: &mut Callable,
    ops: &[ArrayLiteral],
    rows: usize,
    len: usize,
) -> R<Vec<u32>> {
    let mut perm = Vec::with_capacity(rows * len);
    let fast = split_keys(ev, c, ops)?;
    let widths: Vec<usize> = ops.iter().map(|a| a.ty().byte_size()).collect();
    let mut out = [[0u8; 16]; 1];
    for r in 0..rows {
        let mut idx: Vec<u32> = (0..len as u32).collect();
        let base = r * len;
        match &fast {
            Some((dir, Keys::Float(k))) => {
                let k = &k[base..base + len];
                merge_sort(&mut idx, &mut |a, b| {
                    Ok(dir_less(*dir, k[a as usize], k[b as usize]))
                })?;
            }
            Some((dir, Keys::Ord(k))) => {
                let k = &k[base..base + len];
                merge_sort(&mut idx, &mut |a, b| {
                    Ok(dir_less(*dir, k[a as usize], k[b as usize]))
                })?;
            }
            None => {
                let mut less = |a: u32, b: u32| -> R<bool> {
                    let (a, b) = (base + a as usize, base + b as usize);
                    let mut args: Vec<&[u8]> = Vec::with_capacity(2 * ops.len());
                    for (o, &w) in ops.iter().zip(&widths) {
                        args.push(&o.data[a * w..(a + 1) * w]);
                        args.push(&o.data[b * w..(b + 1) * w]);
                    }
                    ev.call(c, &args, &mut out)?;
                    Ok(out[0][0] != 0)
                };
                merge_sort(&mut idx, &mut less)?;
            }
        }
        perm.extend(idx);
    }
    Ok(perm)
}

/// Moves dimension `d` last.
fn last_perm(rank: usize, d: usize) -> Vec<i64> {
    let mut p: Vec<i64> = (0..rank as i64).filter(|&x| x != d as i64).collect();
    p.push(d as i64);
    p
}

fn inverse(p: &[i64]) -> Vec<i64> {
    let mut inv = vec![0i64; p.len()];
    for (k, &x) in p.iter().enumerate() {
        inv[x as usize] = k as i64;
    }
    inv
}

/// Applies a per-row permutation to rows of `len` elements.
fn permute_rows(a: &ArrayLiteral, perm: &[u32], len: usize) -> Vec<u8> {
    let w = a.ty().byte_size();
    let mut data = vec![0u8; a.data.len()];
    for (i, &p) in perm.iter().enumerate() {
        let row = i / len.max(1);
        let src = (row * len + p as usize) * w;
        data[i * w..(i + 1) * w].copy_from_slice(&a.data[src..src + w]);
    }
    data
}

/// `sort`.
pub(crate) fn sort(ev: &mut Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let m = ev.m;
    let arrs = ops.iter().map(|&l| arr(l)).collect::<R<Vec<_>>>()?;
    let dims = arrs[0].shape.dims.to_vec();
    let rank = dims.len();
    let d = match ev.ints(id, AttrKey::Dimensions)?.first() {
        Some(&d) if (d as usize) < rank => d as usize,
        _ if rank == 0 => 0,
        _ => return Err("sort dimension out of range".into()),
    };
    for a in &arrs {
        if a.shape.dims[..] != dims[..] {
            return Err("sort operands must have the same dimensions".into());
        }
    }
    let comp = ev.comp(id, AttrKey::ToApply)?;
    let mut c = ev.callable(comp)?;
    if rank == 0 {
        return Ok(ops_literal(
            m.shape(id).is_tuple(),
            arrs.iter().map(|a| (*a).clone()),
        ));
    }
    let p = last_perm(rank, d);
    let moved: Vec<ArrayLiteral> = arrs.iter().map(|a| so::transpose(a, &p)).collect();
    let len = dims[d] as usize;
    let rows = so::numel(&dims).checked_div(len).unwrap_or(0);
    let perm = sort_rows(ev, &mut c, &moved, rows, len)?;
    let inv = inverse(&p);
    let sorted = moved.iter().map(|a| {
        let data = permute_rows(a, &perm, len);
        so::transpose(&so::array(a.ty(), &a.shape.dims, data), &inv)
    });
    Ok(ops_literal(m.shape(id).is_tuple(), sorted))
}

fn ops_literal(tuple: bool, arrs: impl Iterator<Item = ArrayLiteral>) -> Literal {
    let mut v: Vec<Literal> = arrs.map(Literal::Array).collect();
    if tuple {
        Literal::Tuple(v)
    } else {
        v.pop().unwrap()
    }
}

/// Takes the first `k` of each sorted row: values and their `s32` indices.
fn take_k(a: &ArrayLiteral, perm: &[u32], len: usize, k: usize) -> (ArrayLiteral, ArrayLiteral) {
    let w = a.ty().byte_size();
    let rows = a.len().checked_div(len).unwrap_or(0);
    let mut vals = Vec::with_capacity(rows * k * w);
    let mut idxs = Vec::with_capacity(rows * k * 4);
    for r in 0..rows {
        for &p in &perm[r * len..r * len + k] {
            let src = (r * len + p as usize) * w;
            vals.extend_from_slice(&a.data[src..src + w]);
            idxs.extend_from_slice(&(p as i32).to_le_bytes());
        }
    }
    let mut dims = a.shape.dims.to_vec();
    if let Some(last) = dims.last_mut() {
        *last = k as i64;
    }
    (
        so::array(a.ty(), &dims, vals),
        so::array(ElementType::S32, &dims, idxs),
    )
}

/// `topk(x), k=K, largest=B` along the last dimension, ties broken by lower index.
pub(crate) fn topk(ev: &mut Evaluator, id: InstId, a: &ArrayLiteral) -> R<Literal> {
    let k = ev.int(id, AttrKey::K)? as usize;
    let largest = ev.m.bool_attr(id, &AttrKey::Largest).unwrap_or(true);
    best_k(a, k, largest)
}

/// The `k` largest (or smallest) values of each row of `a` (its last dimension) and their `s32`
/// indices, in order, under the total order `-NaN < -inf < -0 < +0 < +inf < +NaN`, ties broken
/// by lower index.
fn best_k(a: &ArrayLiteral, k: usize, largest: bool) -> R<Literal> {
    let len = *a
        .shape
        .dims
        .last()
        .ok_or("topk needs an operand of rank >= 1")? as usize;
    if k > len {
        return Err("k exceeds the size of the last dimension".into());
    }
    let rows = a.len().checked_div(len).unwrap_or(0);
    let dir = if largest {
        ComparisonDirection::Gt
    } else {
        ComparisonDirection::Lt
    };
    let keys = keys(&a.data, a.ty(), ComparisonType::TotalOrder, false)
        .ok_or("topk needs a real element type")?;
    let mut perm = Vec::with_capacity(a.len());
    for r in 0..rows {
        let mut idx: Vec<u32> = (0..len as u32).collect();
        let base = r * len;
        match &keys {
            Keys::Ord(kv) => merge_sort(&mut idx, &mut |x, y| {
                Ok(dir_less(dir, kv[base + x as usize], kv[base + y as usize]))
            })?,
            Keys::Float(kv) => merge_sort(&mut idx, &mut |x, y| {
                Ok(dir_less(dir, kv[base + x as usize], kv[base + y as usize]))
            })?,
        }
        perm.extend(idx);
    }
    let (v, i) = take_k(a, &perm, len, k);
    Ok(Literal::Tuple(vec![Literal::Array(v), Literal::Array(i)]))
}

/// The `TopK` custom call: sorts each row with the comparator in `called_computations`
/// (taking values and `s32` indices) and keeps the first `k` (the result's last dimension).
/// Without a comparator it keeps the `k` largest in descending order, as XLA CPU's runtime
/// TopK does ([`best_k`]).
pub(crate) fn custom_topk(ev: &mut Evaluator, id: InstId, a: &ArrayLiteral) -> R<Literal> {
    let m = ev.m;
    let comp = match m.attr(id, &AttrKey::CalledComputations) {
        Some(AttrValue::Comps(c)) if c.len() == 1 => Some(c[0]),
        _ => m.comp_attr(id, &AttrKey::ToApply),
    };
    let k = match m.shape(id) {
        axle_ir::Shape::Tuple(ids) if ids.len() == 2 => m
            .shape_of(ids[0])
            .as_array()
            .and_then(|s| s.dims.last().copied())
            .ok_or("TopK result must be a tuple of arrays")?,
        _ => return Err("TopK result must be a (values, indices) tuple".into()),
    } as usize;
    let len = *a
        .shape
        .dims
        .last()
        .ok_or("TopK needs an operand of rank >= 1")? as usize;
    if k > len {
        return Err("k exceeds the size of the last dimension".into());
    }
    let Some(comp) = comp else {
        return best_k(a, k, true);
    };
    let rows = a.len().checked_div(len).unwrap_or(0);
    let mut c = ev.callable(comp)?;
    let iota: Vec<u8> = (0..a.len())
        .flat_map(|i| ((i % len.max(1)) as i32).to_le_bytes())
        .collect();
    let iota = so::array(ElementType::S32, &a.shape.dims, iota);
    let ops = [a.clone(), iota];
    let perm = if c.in_tys.len() == 2 {
        // A comparator on values only.
        sort_rows(ev, &mut c, &ops[..1], rows, len)?
    } else {
        sort_rows(ev, &mut c, &ops, rows, len)?
    };
    let (v, i) = take_k(a, &perm, len, k);
    Ok(Literal::Tuple(vec![Literal::Array(v), Literal::Array(i)]))
}
