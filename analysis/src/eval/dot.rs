//! `dot` (general dot with batch and multiple contracting dimensions, integer dots, preferred
//! element types) and `convolution` (any `dim_labels`, strides, padding, lhs and rhs dilation,
//! window reversal, feature and batch groups).
//!
//! Operands are converted to an accumulation type chosen from the result type (`f32` for
//! `f32` and narrower floats, `f64`, wrapping `i64` for integers, `c64` when no operand or
//! result is `c128`, else `c128`), accumulated along the contraction, real floats with fused
//! multiply-adds (one rounding per term, as XLA CPU's kernels and the cpu backend contract
//! them: a dot of two terms is `fma(a1, b1, a0 * b0)`), and rounded to the result type once at
//! the end. The order of the sum: runs of [`RUN`] consecutive terms (in order of the
//! contraction; a convolution's kernel positions, then input features) are each a chain from
//! zero, and the runs' sums combine as a fixed tree ([`Cascade`]: groups of [`FAN`] runs,
//! groups of `FAN` groups, ..), so no rounding chain is long (one chain over `K = 25600` was 30
//! times less accurate than XLA's dot); a contraction of at most `RUN` terms is one chain. The
//! cpu backend's GEMM and convolution sum in a similar but not identical tree, so the two
//! agree to rounding, not bits. With `ftz` (x86's FTZ and DAZ modes, in which XLA CPU runs) real operands
//! are flushed as they are loaded and every rounded step of the accumulation is flushed as it
//! is made, so a subnormal partial sum reads as zero in the next term, as in the hardware
//! modes. (The sign of a zero made of flushed terms follows the instruction sequence, which
//! differs between the backend's dot and convolution kernels; the evaluator's is the dot's.)
//! Both ops canonicalize their operands with one transpose and then run tight loops over
//! typed slices, parallel over output rows.

use super::elem::{from_slice, to_vec, Complex, Elem, Float};
use super::elementwise::convert;
use super::shape_ops as so;
use super::{Evaluator, R};
use axle_ir::{conv_geo, ArrayLiteral, ArrayShape, AttrKey, ElementType, InstId};
use rayon::prelude::*;

/// An accumulation type.
trait Acc: Elem + Default + Send + Sync {
    /// The element type the operands are converted to.
    const TY: ElementType;
    /// `self + a * b`: fused (one rounding) for floats, as XLA CPU's dot and convolution
    /// kernels (and the cpu backend's) contract them; wrapping for integers.
    fn mul_add(self, a: Self, b: Self) -> Self;
    /// The value with subnormals flushed to zero (identity for integers).
    fn flush(self) -> Self;
    /// [`Acc::mul_add`] as x86's FTZ mode computes it on flushed operands: every rounded
    /// result (the product of the unfused step, the sum, the fused multiply-add) is flushed,
    /// so a subnormal partial sum never carries into the next term. Complex and integer
    /// accumulators keep [`Acc::mul_add`].
    #[inline(always)]
    fn mul_add_ftz(self, a: Self, b: Self) -> Self {
        self.mul_add(a, b)
    }
    /// `self + b` (wrapping for integers), flushed with `FTZ`: how partial sums combine.
    fn plus<const FTZ: bool>(self, b: Self) -> Self;
}

impl Acc for f32 {
    const TY: ElementType = ElementType::F32;
    #[inline(always)]
    fn plus<const FTZ: bool>(self, b: f32) -> f32 {
        if FTZ {
            Float::flush(self + b)
        } else {
            self + b
        }
    }
    #[inline(always)]
    fn mul_add(self, a: f32, b: f32) -> f32 {
        // From a zero accumulator the product is added rounded, as before fusing: the value
        // is the fused one, and the sign of zero that of `0 + a * b`, which algsimp's rewrite
        // of a one-term dot into a multiply keeps.
        if self == 0.0 {
            self + a * b
        } else {
            a.mul_add(b, self)
        }
    }
    #[inline(always)]
    fn flush(self) -> f32 {
        Float::flush(self)
    }
    #[inline(always)]
    fn mul_add_ftz(self, a: f32, b: f32) -> f32 {
        let r = if self == 0.0 {
            self + Float::flush(a * b)
        } else {
            a.mul_add(b, self)
        };
        Float::flush(r)
    }
}

impl Acc for f64 {
    const TY: ElementType = ElementType::F64;
    #[inline(always)]
    fn plus<const FTZ: bool>(self, b: f64) -> f64 {
        if FTZ {
            Float::flush(self + b)
        } else {
            self + b
        }
    }
    #[inline(always)]
    fn mul_add(self, a: f64, b: f64) -> f64 {
        // From a zero accumulator the product is added rounded, as before fusing: the value
        // is the fused one, and the sign of zero that of `0 + a * b`, which algsimp's rewrite
        // of a one-term dot into a multiply keeps.
        if self == 0.0 {
            self + a * b
        } else {
            a.mul_add(b, self)
        }
    }
    #[inline(always)]
    fn flush(self) -> f64 {
        Float::flush(self)
    }
    #[inline(always)]
    fn mul_add_ftz(self, a: f64, b: f64) -> f64 {
        let r = if self == 0.0 {
            self + Float::flush(a * b)
        } else {
            a.mul_add(b, self)
        };
        Float::flush(r)
    }
}

impl Acc for i64 {
    const TY: ElementType = ElementType::S64;
    #[inline(always)]
    fn plus<const FTZ: bool>(self, b: i64) -> i64 {
        self.wrapping_add(b)
    }
    #[inline(always)]
    fn mul_add(self, a: i64, b: i64) -> i64 {
        self.wrapping_add(a.wrapping_mul(b))
    }
    #[inline(always)]
    fn flush(self) -> i64 {
        self
    }
}

/// Complex accumulators: each product and sum rounded in the component type.
macro_rules! complex_acc {
    ($($f:ty => $ty:ident),*) => {$(
        impl Default for Complex<$f> {
            fn default() -> Self {
                Complex::new(0.0, 0.0)
            }
        }

        impl Acc for Complex<$f> {
            const TY: ElementType = ElementType::$ty;
            #[inline(always)]
            fn mul_add(self, a: Self, b: Self) -> Self {
                self.add(a.mul(b))
            }
            #[inline(always)]
            fn plus<const FTZ: bool>(self, b: Self) -> Self {
                self.add(b)
            }
            #[inline(always)]
            fn flush(self) -> Self {
                Complex::new(Float::flush(self.re), Float::flush(self.im))
            }
        }
    )*};
}

complex_acc!(f32 => C64, f64 => C128);

/// Which accumulation type serves a result of type `out` with operands `a` and `b`.
#[derive(Clone, Copy, PartialEq)]
enum AccKind {
    F32,
    F64,
    I64,
    C64,
    C128,
}

fn acc_kind(out: ElementType, a: ElementType, b: ElementType) -> R<AccKind> {
    if out.is_complex() || a.is_complex() || b.is_complex() {
        // In c64 unless c128 is involved, as XLA computes: products of large c64 values
        // overflow to infinities (and `inf - inf` to NaN) where c128 would keep them finite.
        if [out, a, b].contains(&ElementType::C128) || [out, a, b].contains(&ElementType::F64) {
            Ok(AccKind::C128)
        } else {
            Ok(AccKind::C64)
        }
    } else if out.is_float() {
        if out == ElementType::F64 || a == ElementType::F64 || b == ElementType::F64 {
            Ok(AccKind::F64)
        } else {
            Ok(AccKind::F32)
        }
    } else if out.is_int() || out.is_pred() {
        // A pred result is true where some product is (XLA's `dot` on `pred`): the count of
        // true products, converted to pred.
        Ok(AccKind::I64)
    } else {
        Err(format!("dot and convolution are not supported for {}", out.name()).into())
    }
}

/// Converts an array to the accumulation type (flushing subnormal operands with `ftz`).
fn load<T: Acc>(a: &ArrayLiteral, ftz: bool) -> R<Vec<T>> {
    let mut v: Vec<T> = if a.ty() == T::TY {
        to_vec(&a.data)
    } else {
        let mut bytes = vec![0u8; a.len() * T::SIZE];
        convert(a.ty(), T::TY, &a.data, &mut bytes, false)?;
        to_vec(&bytes)
    };
    if ftz {
        v.iter_mut().for_each(|x| *x = x.flush());
    }
    Ok(v)
}

/// Rounds accumulated values to the result type (flushing subnormal results with `ftz`).
fn store<T: Acc>(v: &[T], shape: &ArrayShape, ftz: bool) -> R<ArrayLiteral> {
    let bytes = if ftz {
        from_slice(&v.iter().map(|x| x.flush()).collect::<Vec<_>>())
    } else {
        from_slice(v)
    };
    let mut data = vec![0u8; v.len() * shape.ty.byte_size()];
    convert(T::TY, shape.ty, &bytes, &mut data, ftz)?;
    Ok(so::array(shape.ty, &shape.dims, data))
}

/// Terms of the contraction an output element sums in one chain from zero (a run).
const RUN: usize = 32;

/// Items (runs, or groups of runs) a level of [`Cascade`] adds before it is complete.
const FAN: usize = 16;

/// The partial sums of a contraction's runs, combined as a fixed tree: each run's sums are
/// added to level 0; each `FAN`-th item completes a level, which is then added to the level
/// above (and starts again empty); at the end the levels are added from the lowest up. An
/// item arriving at an empty level is taken as it is (so one run alone is exactly its chain).
/// The tree depends on the number of runs only.
struct Cascade<T> {
    levels: Vec<Option<Vec<T>>>,
    runs: usize,
}

impl<T: Acc> Cascade<T> {
    fn new() -> Self {
        Cascade {
            levels: Vec::new(),
            runs: 0,
        }
    }

    /// Adds the sums of the next run.
    fn push<const FTZ: bool>(&mut self, run: &[T]) {
        self.runs += 1;
        let mut count = self.runs;
        let mut carry = run.to_vec();
        let mut l = 0;
        loop {
            if self.levels.len() <= l {
                self.levels.push(None);
            }
            match &mut self.levels[l] {
                Some(buf) => {
                    for (x, &y) in buf.iter_mut().zip(&carry) {
                        *x = x.plus::<FTZ>(y);
                    }
                }
                slot => *slot = Some(carry),
            }
            if !count.is_multiple_of(FAN) {
                return;
            }
            carry = self.levels[l].take().unwrap_or_default();
            count /= FAN;
            l += 1;
        }
    }

    /// Writes the total to `out`.
    fn finish<const FTZ: bool>(self, out: &mut [T]) {
        let mut first = true;
        for buf in self.levels.into_iter().flatten() {
            for (x, &y) in out.iter_mut().zip(&buf) {
                *x = if first { y } else { x.plus::<FTZ>(y) };
            }
            first = false;
        }
    }
}

/// Batched matmul: `a` is `[bsz, m, k]`, `b` is `[bsz, k, n]`, the result `[bsz, m, n]`.
fn matmul<T: Acc, const FTZ: bool>(
    a: &[T],
    b: &[T],
    bsz: usize,
    m: usize,
    k: usize,
    n: usize,
) -> Vec<T> {
    const ROWS: usize = 8;
    let mut c = vec![T::default(); bsz * m * n];
    if n == 0 || m == 0 || bsz == 0 {
        return c;
    }
    // Blocks of up to ROWS output rows of one batch share each loaded row of `b`.
    let blocks_per_batch = m.div_ceil(ROWS);
    let mut chunks: Vec<(usize, &mut [T])> = Vec::with_capacity(bsz * blocks_per_batch);
    let mut rest: &mut [T] = &mut c;
    for bi in 0..bsz {
        for blk in 0..blocks_per_batch {
            let rows = ROWS.min(m - blk * ROWS);
            let (head, tail) = rest.split_at_mut(rows * n);
            chunks.push((bi * m + blk * ROWS, head));
            rest = tail;
        }
    }
    chunks.into_par_iter().for_each(|(row0, out)| {
        let bi = row0 / m;
        let bmat = &b[bi * k * n..(bi + 1) * k * n];
        let rows = out.len() / n;
        let chain = |dst: &mut [T], k0: usize, k1: usize| {
            for kk in k0..k1 {
                let brow = &bmat[kk * n..(kk + 1) * n];
                for r in 0..rows {
                    let av = a[(row0 + r) * k + kk];
                    let crow = &mut dst[r * n..(r + 1) * n];
                    for (cv, &bv) in crow.iter_mut().zip(brow) {
                        *cv = if FTZ {
                            cv.mul_add_ftz(av, bv)
                        } else {
                            cv.mul_add(av, bv)
                        };
                    }
                }
            }
        };
        if k <= RUN {
            return chain(out, 0, k);
        }
        let mut run = vec![T::default(); out.len()];
        let mut sums = Cascade::new();
        for k0 in (0..k).step_by(RUN) {
            run.iter_mut().for_each(|x| *x = T::default());
            chain(&mut run, k0, (k0 + RUN).min(k));
            sums.push::<FTZ>(&run);
        }
        sums.finish::<FTZ>(out);
    });
    c
}

/// `dot`.
pub(crate) fn dot(
    ev: &mut Evaluator,
    id: InstId,
    lhs: &ArrayLiteral,
    rhs: &ArrayLiteral,
    shape: &ArrayShape,
) -> R<ArrayLiteral> {
    let m = ev.m;
    let empty: &[i64] = &[];
    let lb = m.ints_attr(id, &AttrKey::LhsBatchDims).unwrap_or(empty);
    let rb = m.ints_attr(id, &AttrKey::RhsBatchDims).unwrap_or(empty);
    let lc = m
        .ints_attr(id, &AttrKey::LhsContractingDims)
        .unwrap_or(empty);
    let rc = m
        .ints_attr(id, &AttrKey::RhsContractingDims)
        .unwrap_or(empty);
    if lb.len() != rb.len() || lc.len() != rc.len() {
        return Err("dot dimension numbers do not pair up".into());
    }
    let (ld, rd) = (&lhs.shape.dims, &rhs.shape.dims);
    let lfree: Vec<i64> = (0..ld.len() as i64)
        .filter(|d| !lb.contains(d) && !lc.contains(d))
        .collect();
    let rfree: Vec<i64> = (0..rd.len() as i64)
        .filter(|d| !rb.contains(d) && !rc.contains(d))
        .collect();
    let size = |dims: &[i64], which: &[i64]| -> usize {
        which.iter().map(|&d| dims[d as usize] as usize).product()
    };
    for (a, b) in lb.iter().zip(rb).chain(lc.iter().zip(rc)) {
        if ld[*a as usize] != rd[*b as usize] {
            return Err("dot dimension sizes do not match".into());
        }
    }
    let bsz = size(ld, lb);
    let mm = size(ld, &lfree);
    let kk = size(ld, lc);
    let nn = size(rd, &rfree);
    let mut expected: Vec<i64> = lb.iter().map(|&d| ld[d as usize]).collect();
    expected.extend(lfree.iter().map(|&d| ld[d as usize]));
    expected.extend(rfree.iter().map(|&d| rd[d as usize]));
    if expected[..] != shape.dims[..] {
        return Err("dot result dimensions do not match its operands".into());
    }
    let lperm: Vec<i64> = lb.iter().chain(&lfree).chain(lc).copied().collect();
    let rperm: Vec<i64> = rb.iter().chain(rc).chain(&rfree).copied().collect();
    let lt = so::transpose_cow(lhs, &lperm);
    let rt = so::transpose_cow(rhs, &rperm);
    let ftz = ev.ftz;
    macro_rules! run {
        ($T:ty) => {{
            let a = load::<$T>(&lt, ftz)?;
            let b = load::<$T>(&rt, ftz)?;
            let c = if ftz {
                matmul::<$T, true>(&a, &b, bsz, mm, kk, nn)
            } else {
                matmul::<$T, false>(&a, &b, bsz, mm, kk, nn)
            };
            store::<$T>(&c, shape, ftz)
        }};
    }
    match acc_kind(shape.ty, lhs.ty(), rhs.ty())? {
        AccKind::F32 => run!(f32),
        AccKind::F64 => run!(f64),
        AccKind::I64 => run!(i64),
        AccKind::C64 => run!(Complex<f32>),
        AccKind::C128 => run!(Complex<f64>),
    }
}

/// `convolution`.
pub(crate) fn convolution(
    ev: &mut Evaluator,
    id: InstId,
    lhs: &ArrayLiteral,
    rhs: &ArrayLiteral,
    shape: &ArrayShape,
) -> R<ArrayLiteral> {
    let g = conv_geo(ev.m, id)?;
    let (dn, window, nsp) = (&g.dn, &g.window, g.in_sp.len());
    let od = &shape.dims;
    let ops = ev.m.operands(id);
    let declared = |x: InstId| ev.m.array_shape(x).map(|s| s.dims.as_ref());
    if declared(ops[0]) != Some(lhs.shape.dims.as_ref())
        || declared(ops[1]) != Some(rhs.shape.dims.as_ref())
        || declared(id) != Some(od.as_ref())
    {
        return Err("convolution operands do not have their instructions' shapes".into());
    }
    let (n_out, c_in, o_ch) = (g.n_out as usize, g.c_in as usize, g.o_ch as usize);
    let (fgc, bgc) = (g.fgc as usize, g.bgc as usize);
    let (in_sp, k_sp, out_sp) = (g.in_sp.clone(), g.k_sp.clone(), g.out_sp.clone());
    // Canonical layouts: input [N, S..., C], kernel [K..., I, O], output [N, S..., O].
    let mut iperm = vec![dn.input_batch];
    iperm.extend_from_slice(&dn.input_spatial);
    iperm.push(dn.input_feature);
    let mut kperm = dn.kernel_spatial.to_vec();
    kperm.push(dn.kernel_input_feature);
    kperm.push(dn.kernel_output_feature);
    let it = so::transpose_cow(lhs, &iperm);
    let kt = so::transpose_cow(rhs, &kperm);
    // For each spatial dimension, the input position of (output position, kernel position).
    let tables: Vec<Vec<i64>> = (0..nsp)
        .map(|d| {
            let w = &window[d];
            let mut t = Vec::with_capacity((out_sp[d] * k_sp[d]) as usize);
            for o in 0..out_sp[d] {
                for k in 0..k_sp[d] {
                    let p = o * w.stride - w.pad_lo + k * w.rhs_dilate;
                    let v = if p % w.lhs_dilate != 0 {
                        -1
                    } else {
                        let p = p / w.lhs_dilate;
                        if p >= 0 && p < in_sp[d] {
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
        .collect();
    let geo = ConvGeometry {
        n_out,
        c_in,
        o_ch,
        fgc,
        bgc,
        in_sp,
        k_sp,
        out_sp: out_sp.clone(),
        tables,
        reversal: window.iter().map(|w| w.reversal).collect(),
    };
    let mut canon_dims = vec![n_out as i64];
    canon_dims.extend_from_slice(&out_sp);
    canon_dims.push(o_ch as i64);
    let canon_shape = ArrayShape::new(shape.ty, &canon_dims);
    let ftz = ev.ftz;
    macro_rules! run {
        ($T:ty) => {{
            let a = load::<$T>(&it, ftz)?;
            let b = load::<$T>(&kt, ftz)?;
            let c = if ftz {
                conv_canonical::<$T, true>(&a, &b, &geo)
            } else {
                conv_canonical::<$T, false>(&a, &b, &geo)
            };
            store::<$T>(&c, &canon_shape, ftz)?
        }};
    }
    let canon = match acc_kind(shape.ty, lhs.ty(), rhs.ty())? {
        AccKind::F32 => run!(f32),
        AccKind::F64 => run!(f64),
        AccKind::I64 => run!(i64),
        AccKind::C64 => run!(Complex<f32>),
        AccKind::C128 => run!(Complex<f64>),
    };
    // Output dimension d comes from canonical dimension perm[d].
    let mut perm = vec![0i64; od.len()];
    perm[dn.output_batch as usize] = 0;
    for (i, &d) in dn.output_spatial.iter().enumerate() {
        perm[d as usize] = 1 + i as i64;
    }
    perm[dn.output_feature as usize] = 1 + nsp as i64;
    Ok(so::transpose(&canon, &perm))
}

struct ConvGeometry {
    n_out: usize,
    c_in: usize,
    o_ch: usize,
    fgc: usize,
    bgc: usize,
    in_sp: Vec<i64>,
    k_sp: Vec<i64>,
    out_sp: Vec<i64>,
    tables: Vec<Vec<i64>>,
    reversal: Vec<bool>,
}

fn conv_canonical<T: Acc, const FTZ: bool>(input: &[T], kernel: &[T], g: &ConvGeometry) -> Vec<T> {
    let nsp = g.in_sp.len();
    let out_pos = so::numel(&g.out_sp);
    let k_pos = so::numel(&g.k_sp);
    let mut out = vec![T::default(); g.n_out * out_pos * g.o_ch];
    if out.is_empty() {
        return out;
    }
    let in_sstr = so::strides(&g.in_sp);
    let in_img = so::numel(&g.in_sp) * g.c_in;
    let blocks = g.fgc.max(g.bgc);
    let cg = g.c_in / g.fgc;
    let ob = g.o_ch / blocks;
    out.par_chunks_mut(g.o_ch)
        .enumerate()
        .for_each(|(row, out_row)| {
            // The row's terms in runs (about `RUN` per output element) combined by a
            // `Cascade`; with one run only, the run is the result.
            let mut acc = vec![T::default(); out_row.len()];
            let mut sums = Cascade::new();
            let mut terms = 0;
            let n = row / out_pos.max(1);
            let mut p = row % out_pos.max(1);
            // Output spatial coordinates of this row.
            let mut oc = vec![0i64; nsp];
            for d in (0..nsp).rev() {
                oc[d] = (p % g.out_sp[d] as usize) as i64;
                p /= g.out_sp[d] as usize;
            }
            let mut kc = vec![0i64; nsp];
            for q in 0..k_pos {
                // Kernel coordinates of q, and the input position they read.
                let mut r = q;
                let mut off = 0i64;
                let mut ok = true;
                for d in (0..nsp).rev() {
                    kc[d] = (r % g.k_sp[d] as usize) as i64;
                    r /= g.k_sp[d] as usize;
                }
                for d in 0..nsp {
                    let pos = g.tables[d][(oc[d] * g.k_sp[d] + kc[d]) as usize];
                    if pos < 0 {
                        ok = false;
                        break;
                    }
                    off += pos * in_sstr[d];
                }
                if !ok {
                    continue;
                }
                // Kernel spatial index, honoring window reversal.
                let mut kq = 0i64;
                for (d, &c) in kc.iter().enumerate() {
                    let k = if g.reversal[d] { g.k_sp[d] - 1 - c } else { c };
                    kq = kq * g.k_sp[d] + k;
                }
                let kbase = kq as usize * cg * g.o_ch;
                for blk in 0..blocks {
                    let n_img = if g.bgc > 1 { blk * g.n_out + n } else { n };
                    let c0 = if g.fgc > 1 { blk * cg } else { 0 };
                    let ibase = n_img * in_img + off as usize * g.c_in + c0;
                    let orange = blk * ob..(blk + 1) * ob;
                    for ic in 0..cg {
                        let a = input[ibase + ic];
                        let krow = &kernel[kbase + ic * g.o_ch..kbase + (ic + 1) * g.o_ch];
                        let accs = acc[orange.clone()].iter_mut();
                        for (cv, &kv) in accs.zip(&krow[orange.clone()]) {
                            *cv = if FTZ {
                                cv.mul_add_ftz(a, kv)
                            } else {
                                cv.mul_add(a, kv)
                            };
                        }
                        terms += 1;
                        if terms == RUN * blocks {
                            sums.push::<FTZ>(&acc);
                            acc.iter_mut().for_each(|x| *x = T::default());
                            terms = 0;
                        }
                    }
                }
            }
            if sums.runs == 0 {
                out_row.copy_from_slice(&acc);
                return;
            }
            if terms > 0 {
                sums.push::<FTZ>(&acc);
            }
            sums.finish::<FTZ>(out_row);
        });
    out
}
