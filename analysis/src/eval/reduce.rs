//! `reduce` (variadic), `reduce-window` (variadic, padding, base and window dilation) and
//! `select-and-scatter`.
//!
//! Reductions apply the reducer in XLA's evaluator order: for each output element, the reduced
//! elements in row-major order of the reduced dimensions, `acc = f(acc, x)` starting from the
//! init value (a contiguous run of more than 16 elements as a pairwise tree, whose first block
//! folds from the init value); float sums and products give NaNs by x86's rule (`x86_nan`).
//! A one-op reducer (`add`, `multiply`, `maximum`, `minimum`, `and`, `or`) runs a
//! typed loop; anything else runs its scalar program per element.
//!
//! A single-input reduction of a float narrower than 32 bits instead follows XLA CPU's own
//! order exactly ([`axle_ir::tree_reduction`]): windows of at most 32 per reduced dimension,
//! each folded left to right from the init value, level after level, and one left fold where
//! no reduced dimension is longer than 32. Every step rounds to the narrow type, so there the
//! order decides the result far beyond its tolerance (a pairwise tree and XLA's order differ
//! by 9% on a `bf16` sum of 48 terms that cancel).

use super::elem::{fl, x86_nan, Elem, FloatStorage, Int, Pred};
use super::elementwise::{fmax, fmin, with_int, with_native_float};
use super::scalar::{Fast, Reg};
use super::shape_ops as so;
use super::{arr, Callable, Evaluator, R};
use axle_ir::{
    tree_reduction, ArrayLiteral, ArrayShape, AttrKey, AttrValue, InstId, Literal, Opcode,
    WindowDim,
};

/// A typed fold step for the one-op reducers, or `None` if there is no typed loop for it.
fn fast_fold(op: Opcode, ty: axle_ir::ElementType, ftz: bool) -> Option<(FoldFn, SliceFn)> {
    use Opcode::*;
    macro_rules! float_fold_z {
        ($S:ty, $Z:literal) => {
            match op {
                Add => Some((
                    fold_float::<$S, 0, $Z> as FoldFn,
                    slice_float::<$S, 0, $Z> as SliceFn,
                )),
                Multiply => Some((
                    fold_float::<$S, 1, $Z> as FoldFn,
                    slice_float::<$S, 1, $Z> as SliceFn,
                )),
                Maximum => Some((
                    fold_float::<$S, 2, $Z> as FoldFn,
                    slice_float::<$S, 2, $Z> as SliceFn,
                )),
                Minimum => Some((
                    fold_float::<$S, 3, $Z> as FoldFn,
                    slice_float::<$S, 3, $Z> as SliceFn,
                )),
                _ => None,
            }
        };
    }
    macro_rules! float_fold {
        ($S:ty) => {
            if ftz {
                float_fold_z!($S, true)
            } else {
                float_fold_z!($S, false)
            }
        };
    }
    macro_rules! int_fold {
        ($T:ty) => {
            match op {
                Add => Some((fold_int::<$T, 0> as FoldFn, slice_int::<$T, 0> as SliceFn)),
                Multiply => Some((fold_int::<$T, 1> as FoldFn, slice_int::<$T, 1> as SliceFn)),
                Maximum => Some((fold_int::<$T, 2> as FoldFn, slice_int::<$T, 2> as SliceFn)),
                Minimum => Some((fold_int::<$T, 3> as FoldFn, slice_int::<$T, 3> as SliceFn)),
                And => Some((fold_int::<$T, 4> as FoldFn, slice_int::<$T, 4> as SliceFn)),
                Or => Some((fold_int::<$T, 5> as FoldFn, slice_int::<$T, 5> as SliceFn)),
                Xor => Some((fold_int::<$T, 6> as FoldFn, slice_int::<$T, 6> as SliceFn)),
                _ => None,
            }
        };
    }
    if ty.is_pred() {
        return match op {
            And | Minimum => Some((fold_pred::<0> as FoldFn, slice_pred::<0> as SliceFn)),
            Or | Maximum => Some((fold_pred::<1> as FoldFn, slice_pred::<1> as SliceFn)),
            _ => None,
        };
    }
    with_native_float!(ty, S => return float_fold!(S), else ());
    with_int!(ty, T => return int_fold!(T), else ());
    None
}

/// Folds `xs` (elements of `w` bytes, gathered by `offsets` from `data`) into `acc`.
type FoldFn = fn(acc: &mut [u8], data: &[u8], offsets: &mut dyn Iterator<Item = usize>);

fn fold_float<S: FloatStorage, const K: u8, const FTZ: bool>(
    acc: &mut [u8],
    data: &[u8],
    offsets: &mut dyn Iterator<Item = usize>,
) {
    let w = S::SIZE;
    let mut a = fl::<_, FTZ>(S::load(acc).up());
    for o in offsets {
        let x = fl::<_, FTZ>(S::load(&data[o * w..o * w + w]).up());
        a = S::down(fl::<_, FTZ>(match K {
            0 => x86_nan(a, x, a + x),
            1 => x86_nan(a, x, a * x),
            2 => fmax(a, x),
            _ => fmin(a, x),
        }))
        .up();
    }
    S::down(a).store(acc);
}

fn fold_int<T: Int, const K: u8>(
    acc: &mut [u8],
    data: &[u8],
    offsets: &mut dyn Iterator<Item = usize>,
) {
    let w = T::SIZE;
    let mut a = T::load(acc);
    for o in offsets {
        let x = T::load(&data[o * w..o * w + w]);
        a = match K {
            0 => a.wadd(x),
            1 => a.wmul(x),
            2 => a.max(x),
            3 => a.min(x),
            4 => a.and(x),
            5 => a.or(x),
            _ => a.xor(x),
        };
    }
    a.store(acc);
}

fn fold_pred<const K: u8>(acc: &mut [u8], data: &[u8], offsets: &mut dyn Iterator<Item = usize>) {
    let mut a = Pred::load(acc).0;
    for o in offsets {
        let x = data[o] != 0;
        a = if K == 0 { a & x } else { a | x };
    }
    acc[0] = a as u8;
}

/// Folds every element of `data` into `acc`, in order.
type SliceFn = fn(acc: &mut [u8], data: &[u8]);

/// One step of a float fold: `a op x`, rounded to the storage type (and flushed with `FTZ`).
#[inline(always)]
fn step<S: FloatStorage, const K: u8, const FTZ: bool>(a: S::C, x: S::C) -> S::C {
    S::down(fl::<_, FTZ>(match K {
        0 => x86_nan(a, x, a + x),
        1 => x86_nan(a, x, a * x),
        2 => fmax(a, x),
        _ => fmin(a, x),
    }))
    .up()
}

/// Elements below which a pairwise fold runs sequentially.
const PAIRWISE_BLOCK: usize = 16;
/// Elements above which the two halves of a pairwise fold run in parallel.
const PAIRWISE_PAR: usize = 1 << 20;

/// Pairwise (balanced-tree) fold of a non-empty slice, starting from `init` when given: blocks
/// of [`PAIRWISE_BLOCK`] elements fold left to right (the first block from `init`), then halves
/// combine. The tree depends only on the length, so the result does not depend on the thread
/// count.
fn pairwise<S: FloatStorage, const K: u8, const FTZ: bool>(
    init: Option<S::C>,
    data: &[u8],
) -> S::C {
    let n = data.len() / S::SIZE;
    if n <= PAIRWISE_BLOCK {
        let mut it = data
            .chunks_exact(S::SIZE)
            .map(|x| fl::<_, FTZ>(S::load(x).up()));
        let first = match init {
            Some(a) => a,
            None => it.next().expect("non-empty"),
        };
        return it.fold(first, step::<S, K, FTZ>);
    }
    let (lo, hi) = data.split_at(n / 2 * S::SIZE);
    let (a, b) = if n > PAIRWISE_PAR {
        rayon::join(
            || pairwise::<S, K, FTZ>(init, lo),
            || pairwise::<S, K, FTZ>(None, hi),
        )
    } else {
        (
            pairwise::<S, K, FTZ>(init, lo),
            pairwise::<S, K, FTZ>(None, hi),
        )
    };
    step::<S, K, FTZ>(a, b)
}

/// Folds a contiguous run into `acc`: a pairwise fold of `data` whose first block folds from
/// `acc`. Float sums and products are reassociated into a balanced tree (HLO leaves the order
/// of a reduction open; a tree keeps the rounding error logarithmic in the length, as XLA's
/// vectorized reductions do, where a left-to-right fold of millions of `f32` would drift by
/// 1e-4). A run of at most [`PAIRWISE_BLOCK`] elements folds left to right from `acc`, XLA
/// CPU's order for short reductions (and the backend's): which NaN a sum keeps depends on the
/// order, `inf + (-inf)` giving the default NaN `0xffc00000` and `NaN + x` the first NaN
/// operand (cpu campaign seed 1795530001, case 9471: `inf + [-inf, NaN, -6.25]`).
fn slice_float<S: FloatStorage, const K: u8, const FTZ: bool>(acc: &mut [u8], data: &[u8]) {
    let a = fl::<_, FTZ>(S::load(acc).up());
    if data.is_empty() {
        return;
    }
    let r = pairwise::<S, K, FTZ>(Some(a), data);
    S::down(r).store(acc);
}

fn slice_int<T: Int, const K: u8>(acc: &mut [u8], data: &[u8]) {
    let mut a = T::load(acc);
    for x in data.chunks_exact(T::SIZE) {
        let x = T::load(x);
        a = match K {
            0 => a.wadd(x),
            1 => a.wmul(x),
            2 => a.max(x),
            3 => a.min(x),
            4 => a.and(x),
            5 => a.or(x),
            _ => a.xor(x),
        };
    }
    a.store(acc);
}

fn slice_pred<const K: u8>(acc: &mut [u8], data: &[u8]) {
    let mut a = acc[0] != 0;
    for &x in data {
        a = if K == 0 { a & (x != 0) } else { a | (x != 0) };
    }
    acc[0] = a as u8;
}

fn result_shapes(ev: &Evaluator, id: InstId) -> R<Vec<ArrayShape>> {
    let m = ev.m;
    match m.shape(id) {
        axle_ir::Shape::Array(a) => Ok(vec![a.clone()]),
        axle_ir::Shape::Tuple(ids) => ids
            .iter()
            .map(|&s| {
                m.shape_of(s)
                    .as_array()
                    .cloned()
                    .ok_or_else(|| "expected a tuple of arrays".into())
            })
            .collect(),
        _ => Err("unexpected result shape".into()),
    }
}

fn pack(shapes: Vec<ArrayShape>, datas: Vec<Vec<u8>>, tuple: bool) -> Literal {
    let mut lits: Vec<Literal> = shapes
        .into_iter()
        .zip(datas)
        .map(|(s, d)| Literal::Array(ArrayLiteral { shape: s, data: d }))
        .collect();
    if tuple {
        Literal::Tuple(lits)
    } else {
        lits.pop().unwrap()
    }
}

/// Runs the reducer `c` over the elements `offsets` of `inputs` (per operand), starting from
/// the accumulators in `acc`, one element of each operand at a time.
fn fold_generic(
    ev: &mut Evaluator,
    c: &mut Callable,
    acc: &mut [Reg],
    inputs: &[&[u8]],
    widths: &[usize],
    offsets: impl Iterator<Item = usize>,
) -> R<()> {
    let n = inputs.len();
    let mut out = vec![[0u8; 16]; n];
    let mut args: Vec<Reg> = vec![[0u8; 16]; 2 * n];
    for o in offsets {
        for k in 0..n {
            args[k] = acc[k];
            let w = widths[k];
            args[n + k][..w].copy_from_slice(&inputs[k][o * w..o * w + w]);
        }
        let arg_slices: Vec<&[u8]> = (0..2 * n).map(|k| &args[k][..widths[k % n]]).collect();
        ev.call(c, &arg_slices, &mut out)?;
        acc[..n].copy_from_slice(&out[..n]);
    }
    Ok(())
}

/// `reduce`.
pub(crate) fn reduce(ev: &mut Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let m = ev.m;
    let n = ops.len() / 2;
    if n == 0 || ops.len() != 2 * n {
        return Err("reduce needs pairs of operands and init values".into());
    }
    let inputs = ops[..n].iter().map(|&l| arr(l)).collect::<R<Vec<_>>>()?;
    let inits = ops[n..].iter().map(|&l| arr(l)).collect::<R<Vec<_>>>()?;
    let rdims = ev.ints(id, AttrKey::Dimensions)?;
    let dims = inputs[0].shape.dims.to_vec();
    let rank = dims.len();
    for a in &inputs {
        if a.shape.dims[..] != dims[..] {
            return Err("reduce operands must have the same dimensions".into());
        }
    }
    let mut reduced = vec![false; rank];
    for &d in rdims {
        *reduced
            .get_mut(d as usize)
            .ok_or("reduce dimension out of range")? = true;
    }
    let comp = ev.comp(id, AttrKey::ToApply)?;
    let mut c = ev.callable(comp)?;
    if n == 1 && tree_reduction::applies_to(inputs[0].ty()) {
        let shapes = result_shapes(ev, id)?;
        let data = reduce_tree(ev, &mut c, inputs[0], &inits[0].data, &reduced)?;
        return Ok(pack(shapes, vec![data], m.shape(id).is_tuple()));
    }
    let mut perm: Vec<i64> = (0..rank as i64).filter(|&d| !reduced[d as usize]).collect();
    let kept = perm.len();
    perm.extend((0..rank as i64).filter(|&d| reduced[d as usize]));
    let inner: usize = perm[kept..]
        .iter()
        .map(|&d| dims[d as usize] as usize)
        .product();
    let outer: usize = perm[..kept]
        .iter()
        .map(|&d| dims[d as usize] as usize)
        .product();
    let moved: Vec<_> = inputs.iter().map(|a| so::transpose_cow(a, &perm)).collect();
    let shapes = result_shapes(ev, id)?;
    if shapes.len() != n {
        return Err("reduce result does not match its operands".into());
    }
    let widths: Vec<usize> = inputs.iter().map(|a| a.ty().byte_size()).collect();
    let mut datas: Vec<Vec<u8>> = (0..n)
        .map(|k| {
            let mut d = Vec::with_capacity(outer * widths[k]);
            for _ in 0..outer {
                d.extend_from_slice(&inits[k].data);
            }
            d
        })
        .collect();
    if let (1, Fast::Binary(op)) = (n, c.fast()) {
        if let Some((_, f)) = fast_fold(op, inputs[0].ty(), ev.ftz) {
            let w = widths[0];
            for (i, acc) in datas[0].chunks_exact_mut(w).enumerate() {
                f(acc, &moved[0].data[i * inner * w..(i + 1) * inner * w]);
            }
            return Ok(pack(shapes, datas, m.shape(id).is_tuple()));
        }
    }
    let slices: Vec<&[u8]> = moved.iter().map(|a| &a.data[..]).collect();
    let mut acc = vec![[0u8; 16]; n];
    for i in 0..outer {
        for k in 0..n {
            let w = widths[k];
            acc[k][..w].copy_from_slice(&datas[k][i * w..(i + 1) * w]);
        }
        fold_generic(
            ev,
            &mut c,
            &mut acc,
            &slices,
            &widths,
            i * inner..(i + 1) * inner,
        )?;
        for k in 0..n {
            let w = widths[k];
            datas[k][i * w..(i + 1) * w].copy_from_slice(&acc[k][..w]);
        }
    }
    Ok(pack(shapes, datas, m.shape(id).is_tuple()))
}

fn window(ev: &Evaluator, id: InstId, rank: usize) -> R<Vec<WindowDim>> {
    match ev.m.attr(id, &AttrKey::Window) {
        Some(AttrValue::Window(w)) if w.len() == rank => Ok(w.to_vec()),
        Some(AttrValue::Window(_)) => Err("window rank does not match the operand".into()),
        _ if rank == 0 => Ok(Vec::new()),
        _ => Err("missing window".into()),
    }
}

/// For each dimension, the input position of `(output index, window index)` or `-1` where it
/// falls into padding or a base-dilation hole.
fn window_tables(wd: &[WindowDim], in_dims: &[i64], out_dims: &[i64]) -> Vec<Vec<i64>> {
    wd.iter()
        .enumerate()
        .map(|(d, w)| {
            let mut t = Vec::with_capacity((out_dims[d] * w.size) as usize);
            for o in 0..out_dims[d] {
                for k in 0..w.size {
                    let k = if w.reversal { w.size - 1 - k } else { k };
                    let p = o * w.stride - w.pad_lo + k * w.rhs_dilate;
                    let v = if p % w.lhs_dilate != 0 {
                        -1
                    } else {
                        let p = p / w.lhs_dilate;
                        if p >= 0 && p < in_dims[d] {
                            p
                        } else {
                            -1
                        }
                    };
                    t.push(v);
                }
            }
            t
        })
        .collect()
}

/// Calls `f(output linear index, input element offsets of the window)` for every window.
fn for_each_window(
    wd: &[WindowDim],
    in_dims: &[i64],
    out_dims: &[i64],
    mut f: impl FnMut(usize, &[usize]) -> R<()>,
) -> R<()> {
    let rank = in_dims.len();
    let tables = window_tables(wd, in_dims, out_dims);
    let st = so::strides(in_dims);
    let n_out = so::numel(out_dims);
    let wsizes: Vec<i64> = wd.iter().map(|w| w.size).collect();
    let n_win = so::numel(&wsizes);
    let mut oidx = vec![0i64; rank];
    let mut offs: Vec<usize> = Vec::with_capacity(n_win);
    let mut widx = vec![0i64; rank];
    for o in 0..n_out {
        offs.clear();
        widx.iter_mut().for_each(|x| *x = 0);
        for _ in 0..n_win {
            let mut off = 0i64;
            let mut ok = true;
            for d in 0..rank {
                let p = tables[d][(oidx[d] * wsizes[d] + widx[d]) as usize];
                if p < 0 {
                    ok = false;
                    break;
                }
                off += p * st[d];
            }
            if ok {
                offs.push(off as usize);
            }
            for d in (0..rank).rev() {
                widx[d] += 1;
                if widx[d] < wsizes[d] {
                    break;
                }
                widx[d] = 0;
            }
        }
        f(o, &offs)?;
        for d in (0..rank).rev() {
            oidx[d] += 1;
            if oidx[d] < out_dims[d] {
                break;
            }
            oidx[d] = 0;
        }
    }
    Ok(())
}

/// `reduce-window`.
/// One reduction of `input` over the dimensions where `reduced` is true, in XLA CPU's tree
/// order ([`axle_ir::tree_reduction`]); returns the result's elements in row-major order. Each
/// level is a `reduce-window` walked by [`for_each_window`] (window positions in row-major
/// order, padding skipped as XLA's kernels skip it); the last one has every reduced dimension
/// in one window.
fn reduce_tree(
    ev: &mut Evaluator,
    c: &mut Callable,
    input: &ArrayLiteral,
    init: &[u8],
    reduced: &[bool],
) -> R<Vec<u8>> {
    let ty = input.ty();
    let w = ty.byte_size();
    let fast = match c.fast() {
        Fast::Binary(op) => fast_fold(op, ty, ev.ftz).map(|f| f.0),
        _ => None,
    };
    let mut dims = input.shape.dims.to_vec();
    let mut data = input.data.to_vec();
    loop {
        let (level, last) = match tree_reduction::tree_level(&dims, reduced) {
            Some(l) => (l, false),
            None => {
                let pick = |on_reduced: bool| -> Vec<i64> {
                    dims.iter()
                        .zip(reduced)
                        .map(|(&d, &r)| if r == on_reduced { d } else { 1 })
                        .collect()
                };
                let l = tree_reduction::TreeLevel {
                    window: pick(true),
                    out: pick(false),
                    pad_lo: vec![0; dims.len()],
                    pad_hi: vec![0; dims.len()],
                };
                (l, true)
            }
        };
        let n_out = so::numel(&level.out);
        let mut next = Vec::with_capacity(n_out * w);
        if so::numel(&dims) == 0 {
            // No elements: every window folds nothing (and its dimensions may be far too long
            // to walk, `bf16[2^61, 0]`).
            for _ in 0..n_out {
                next.extend_from_slice(init);
            }
        } else {
            let wd: Vec<WindowDim> = (0..dims.len())
                .map(|d| WindowDim {
                    size: level.window[d],
                    stride: level.window[d],
                    pad_lo: level.pad_lo[d],
                    pad_hi: level.pad_hi[d],
                    lhs_dilate: 1,
                    rhs_dilate: 1,
                    reversal: false,
                })
                .collect();
            for_each_window(&wd, &dims, &level.out, |_, offs| {
                let mut acc: Reg = [0u8; 16];
                acc[..w].copy_from_slice(init);
                match fast {
                    Some(f) => f(&mut acc[..w], &data, &mut offs.iter().copied()),
                    None => {
                        let mut regs = [acc];
                        fold_generic(ev, c, &mut regs, &[&data], &[w], offs.iter().copied())?;
                        acc = regs[0];
                    }
                }
                next.extend_from_slice(&acc[..w]);
                Ok(())
            })?;
        }
        if last {
            return Ok(next);
        }
        dims = level.out;
        data = next;
    }
}

pub(crate) fn reduce_window(ev: &mut Evaluator, id: InstId, ops: &[&Literal]) -> R<Literal> {
    let m = ev.m;
    let n = ops.len() / 2;
    if n == 0 || ops.len() != 2 * n {
        return Err("reduce-window needs pairs of operands and init values".into());
    }
    let inputs = ops[..n].iter().map(|&l| arr(l)).collect::<R<Vec<_>>>()?;
    let inits = ops[n..].iter().map(|&l| arr(l)).collect::<R<Vec<_>>>()?;
    let in_dims = inputs[0].shape.dims.to_vec();
    let shapes = result_shapes(ev, id)?;
    if shapes.len() != n {
        return Err("reduce-window result does not match its operands".into());
    }
    let out_dims = shapes[0].dims.to_vec();
    let wd = window(ev, id, in_dims.len())?;
    let widths: Vec<usize> = inputs.iter().map(|a| a.ty().byte_size()).collect();
    let comp = ev.comp(id, AttrKey::ToApply)?;
    let mut c = ev.callable(comp)?;
    let n_out = so::numel(&out_dims);
    let mut datas: Vec<Vec<u8>> = (0..n)
        .map(|k| {
            let mut d = Vec::with_capacity(n_out * widths[k]);
            for _ in 0..n_out {
                d.extend_from_slice(&inits[k].data);
            }
            d
        })
        .collect();
    let fast = match (n, c.fast()) {
        (1, Fast::Binary(op)) => fast_fold(op, inputs[0].ty(), ev.ftz).map(|f| f.0),
        _ => None,
    };
    let slices: Vec<&[u8]> = inputs.iter().map(|a| &a.data[..]).collect();
    if let Some(f) = fast {
        let w = widths[0];
        let out = &mut datas[0];
        for_each_window(&wd, &in_dims, &out_dims, |o, offs| {
            f(
                &mut out[o * w..(o + 1) * w],
                slices[0],
                &mut offs.iter().copied(),
            );
            Ok(())
        })?;
    } else {
        let mut acc = vec![[0u8; 16]; n];
        for_each_window(&wd, &in_dims, &out_dims, |o, offs| {
            for k in 0..n {
                let w = widths[k];
                acc[k][..w].copy_from_slice(&datas[k][o * w..(o + 1) * w]);
            }
            fold_generic(ev, &mut c, &mut acc, &slices, &widths, offs.iter().copied())?;
            for k in 0..n {
                let w = widths[k];
                datas[k][o * w..(o + 1) * w].copy_from_slice(&acc[k][..w]);
            }
            Ok(())
        })?;
    }
    Ok(pack(shapes, datas, m.shape(id).is_tuple()))
}

/// `select-and-scatter`.
pub(crate) fn select_and_scatter(
    ev: &mut Evaluator,
    id: InstId,
    ops: &[&Literal],
    shape: &ArrayShape,
) -> R<ArrayLiteral> {
    let (operand, source, init) = (arr(ops[0])?, arr(ops[1])?, arr(ops[2])?);
    let in_dims = operand.shape.dims.to_vec();
    let wd = window(ev, id, in_dims.len())?;
    if wd.iter().any(|w| w.lhs_dilate != 1 || w.rhs_dilate != 1) {
        return Err("select-and-scatter does not take dilated windows".into());
    }
    let out_dims = source.shape.dims.to_vec();
    let sel_comp = ev.comp(id, AttrKey::Select)?;
    let sc_comp = ev.comp(id, AttrKey::Scatter)?;
    let mut sel = ev.callable(sel_comp)?;
    let mut sc = ev.callable(sc_comp)?;
    let w = operand.ty().byte_size();
    let sw = source.ty().byte_size();
    let rw = shape.ty.byte_size();
    let n = so::numel(&in_dims);
    let mut data = Vec::with_capacity(n * rw);
    for _ in 0..n {
        data.extend_from_slice(&init.data);
    }
    let mut out = [[0u8; 16]; 1];
    for_each_window(&wd, &in_dims, &out_dims, |o, offs| {
        let Some((&first, rest)) = offs.split_first() else {
            return Ok(());
        };
        let mut best = first;
        for &e in rest {
            let args = [
                &operand.data[best * w..(best + 1) * w],
                &operand.data[e * w..(e + 1) * w],
            ];
            ev.call(&mut sel, &args, &mut out)?;
            if out[0][0] == 0 {
                best = e;
            }
        }
        let args = [
            &data[best * rw..(best + 1) * rw],
            &source.data[o * sw..(o + 1) * sw],
        ];
        ev.call(&mut sc, &args, &mut out)?;
        data[best * rw..(best + 1) * rw].copy_from_slice(&out[0][..rw]);
        Ok(())
    })?;
    Ok(so::array(shape.ty, &shape.dims, data))
}
