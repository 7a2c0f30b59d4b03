//! FFT kernels: the `fft` instruction (`FFT`, `IFFT`, `RFFT`, `IRFFT`, transforming 1 to 3
//! trailing dimensions of `c64`/`c128` values, or of `f32`/`f64` ones on the real side) as a
//! chain of consecutive kernels, each one radix stage of a mixed-radix Stockham transform along
//! one dimension, with XLA's conventions (those of `axle_analysis::fft`, which the evaluator
//! and the cpu backend run): the dimensions innermost first (`IRFFT`: the leading ones in
//! order, then the last); `IFFT` and `IRFFT` divide by each length (a division, as the
//! evaluator does); `RFFT` transforms the last dimension first and keeps its first `n/2 + 1`
//! entries; `IRFFT` reads the last dimension's missing entries as the conjugates of their
//! mirrors (entry `k >= n/2 + 1` is that of `n - k`) and stores real parts.
//!
//! Stages: a transformed length `N` is split into radices `R_1 .. R_s` (fours, then a two,
//! then odd primes; `N = 1` is one copy stage of radix 1 where a stage is needed at all). The
//! stage of radix `R` after radices of product `S` (`L = S R`) computes output position
//! `o = ((j / S) R + k) S + j % S` of each line as
//! `sum_{r < R} x[j + r N / R] w^(r (j % S + k S) N / L)`, `w = exp(-2 pi i / N)` (its
//! conjugate for the inverse transforms): one output element per thread, `R` complex
//! products, `O(N sum R_i)` work per line, `O(N log N)` for lengths of small prime factors.
//! A prime factor up to [`DIRECT_PRIME_MAX`] is summed directly; a length with a larger one
//! is Bluestein's transform on lines of a power of two `M >= 2N - 1`: the forward stages of
//! `M`, the first multiplying what it reads by the chirp `c(q) = exp(-pi i q^2 / N)` (zero
//! past `N`), the last multiplying by the filter (the transform of the chirp's conjugate,
//! computed in `f64` on the host by the evaluator's FFT and rounded once); then the inverse
//! stages of `M`, the last keeping `N` positions times the chirp (conjugated throughout for
//! the inverse transforms, which then divide by `N`). The twiddle `w^t` is read from a table
//! of every power of `w` rounded once from `f64` (a module constant per length and part type;
//! angles reduced to the first octant, so each entry is within about an ulp of the exact
//! root); above [`DIRECT_TABLE_MAX`] entries, two tables of `f64` powers (`w^(hi B)` and
//! `w^lo`) multiplied in `f64` and rounded once. No twiddle is a product of many roundings;
//! the chirp is the table of `2N` at `q^2 mod 2N`.
//!
//! Buffers: the first kernel reads the operand (real values for `RFFT`, the Hermitian
//! extension for `IRFFT`'s last dimension); each later one reads what the previous one wrote,
//! in the output buffer or one of at most two scratch buffers of complex values
//! ([`KernelInfo::scratch`](crate::KernelInfo)), chosen so the last kernel writes the output
//! and no kernel reads the buffer it writes. A transform of no elements (a zero length) gives
//! zeros, as the evaluator's does.
//!
//! Invariants: every index is 64-bit and within its buffer (positions of a line below its
//! length, twiddle indices below `N`); each kernel writes each element of its destination
//! exactly once; the operand is never written. Element types other than the four above,
//! lengths above `2^31`, an
//! `fft_length` of more than 3 or more than the rank dimensions, or lengths other than the
//! operand's (or result's, for `IRFFT`) trailing dimensions are errors naming the
//! instruction.

use axle_analysis::fft::FftKind;
use axle_codegen_llvm::cg::{numel, Cg, Val};
use axle_codegen_llvm::elemental::{arr_of, Gen};
use axle_codegen_llvm::error::{at, Fail, R};
use axle_ir::{AttrKey, AttrValue, ElementType, InstId, Module};
use inkwell::module::Linkage;
use inkwell::types::FloatType;
use inkwell::values::{FloatValue, IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::launch::LaunchPlan;

/// The largest transformed length whose twiddles are one table of every power of the root;
/// longer ones use two tables of about `sqrt(N)` entries each.
pub const DIRECT_TABLE_MAX: u64 = 1 << 14;

/// The largest prime factor a stage sums directly; a length with a larger one is transformed
/// by Bluestein's algorithm.
pub const DIRECT_PRIME_MAX: u64 = 31;

/// A buffer an FFT kernel reads or writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FftBuffer {
    /// The instruction's operand (read only).
    Operand,
    /// The instruction's result.
    Output,
    /// Scratch buffer `k` of complex values.
    Scratch(usize),
}

/// How a stage reads its source's lines.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FftRead {
    /// Complex values.
    Complex,
    /// Real values (an `RFFT`'s operand): zero imaginary parts.
    Real,
    /// The first `N / 2 + 1` entries of a Hermitian line (an `IRFFT`'s last dimension): entry
    /// `q` past them is the conjugate of entry `N - q`.
    Hermitian,
}

/// One radix stage along one dimension.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FftStage {
    /// Where it reads.
    pub src: FftBuffer,
    /// How it reads.
    pub read: FftRead,
    /// The source's dimensions.
    pub src_dims: Vec<i64>,
    /// Where it writes.
    pub dst: FftBuffer,
    /// Whether it writes real parts only (an `IRFFT`'s last kernel).
    pub real_out: bool,
    /// The destination's dimensions (the source's, but the transformed dimension of an
    /// `RFFT`'s last stage along it, or of a Hermitian read, differs).
    pub dst_dims: Vec<i64>,
    /// The transformed dimension.
    pub axis: usize,
    /// Its transform length `N`.
    pub len: u64,
    /// The stage's radix `R`.
    pub radix: u64,
    /// The product `S` of the radices before it along this dimension.
    pub span: u64,
    /// Whether it uses the conjugate root (`IFFT`, `IRFFT`).
    pub inverse: bool,
    /// Whether it divides by `N` (the last stage of an inverse transform's dimension).
    pub scale: bool,
    /// Bluestein's first stage: the chirp the read values are multiplied by, positions at or
    /// past its length reading zero.
    pub pre: Option<Chirp>,
    /// What the results are multiplied by after the sum (and the division by `N`).
    pub post: FftPost,
}

/// Bluestein's chirp of length `n`: `c(q) = exp(-pi i q^2 / n)` (conjugated when `conj`),
/// read from the twiddle table of length `2n` at `q^2 mod 2n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chirp {
    /// The transform's length.
    pub n: u64,
    /// Whether it is conjugated (an inverse transform).
    pub conj: bool,
}

/// What a stage multiplies its results by.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FftPost {
    /// Nothing.
    None,
    /// Bluestein's filter: the `f64` transform (rounded once) of the chirp's conjugate,
    /// wrapped to the stage's length, at the output position.
    Filter(Chirp),
    /// Bluestein's last step: the chirp at the output position, then a division by its
    /// length when `divide` (an inverse transform).
    Chirp {
        /// The chirp.
        chirp: Chirp,
        /// Whether to divide by `chirp.n`.
        divide: bool,
    },
}

/// What one FFT kernel does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FftPass {
    /// Writes zeros to every element of the output (a transform of no elements).
    Zeros {
        /// Whether the output is real.
        real: bool,
    },
    /// One radix stage.
    Stage(FftStage),
}

/// One kernel of an `fft`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FftKernel {
    /// The `fft` instruction.
    pub hero: InstId,
    /// The part type (`f32` or `f64`).
    pub part: ElementType,
    /// What the kernel does.
    pub pass: FftPass,
    /// The elements it writes (one per thread).
    pub elements: u64,
}

impl FftKernel {
    /// The launch plan: one thread per element written.
    pub fn launch_plan(&self) -> Result<LaunchPlan, crate::NvptxError> {
        LaunchPlan::for_elements(self.elements)
    }
}

/// The kernels of an `fft` and the scratch buffers they share.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FftGeometry {
    /// The kernels, in launch order.
    pub kernels: Vec<FftKernel>,
    /// The sizes in bytes of the scratch buffers.
    pub scratch: Vec<u64>,
}

/// The radices of length `n`: fours, then a two, then odd primes ascending; none for 1.
pub fn radices(mut n: u64) -> Vec<u64> {
    let mut out = Vec::new();
    while n.is_multiple_of(4) && n > 1 {
        out.push(4);
        n /= 4;
    }
    if n.is_multiple_of(2) && n > 1 {
        out.push(2);
        n /= 2;
    }
    let mut p = 3;
    while n > 1 {
        if p * p > n {
            out.push(n);
            break;
        }
        while n.is_multiple_of(p) {
            out.push(p);
            n /= p;
        }
        p += 2;
    }
    out
}

/// `exp(-2 pi i t / n)` in `f64`, `t < n`: the angle reduced to `[0, pi/4]` by the octant
/// symmetries with exact integer arithmetic, so each part is within about an ulp.
pub fn unit_root(t: u64, n: u64) -> (f64, f64) {
    let n128 = u128::from(n);
    let num = 8 * u128::from(t % n);
    let octant = num / n128;
    let rem = num % n128;
    let reduced = if octant % 2 == 0 { rem } else { n128 - rem };
    let phi = std::f64::consts::FRAC_PI_4 * (reduced as f64 / n as f64);
    let (s, c) = phi.sin_cos();
    let (cos, sin) = match octant {
        0 => (c, s),
        1 => (s, c),
        2 => (-s, c),
        3 => (-c, s),
        4 => (-c, -s),
        5 => (-s, -c),
        6 => (s, -c),
        _ => (c, -s),
    };
    (cos, -sin)
}

/// The complex element count of `dims`.
fn count(dims: &[i64]) -> u64 {
    numel(dims).max(0) as u64
}

/// The `fft` geometry of instruction `id`: its kernels and scratch.
pub fn fft_geometry(m: &Module, id: InstId) -> R<FftGeometry> {
    let fail = |msg: String| at(m, id, Fail::Msg(msg));
    let operand = *m
        .operands(id)
        .first()
        .ok_or_else(|| fail("fft needs an operand".into()))?;
    let a = arr_of(m, operand).map_err(|f| at(m, id, f))?;
    let out = arr_of(m, id).map_err(|f| at(m, id, f))?;
    let kind = match m.attr(id, &AttrKey::FftType) {
        Some(AttrValue::Ident(s)) => {
            FftKind::from_name(s).ok_or_else(|| fail(format!("unknown fft_type {s}")))?
        }
        _ => return Err(fail("fft needs fft_type".into())),
    };
    let lengths = m
        .ints_attr(id, &AttrKey::FftLength)
        .ok_or_else(|| fail("fft needs fft_length".into()))?
        .to_vec();
    let rank = a.rank();
    let axes = lengths.len();
    if axes == 0 || axes > 3 || axes > rank || out.rank() != rank {
        return Err(fail(
            "fft_length must name 1 to 3 of the operand's dimensions".into(),
        ));
    }
    use ElementType::{C128, C64, F32, F64};
    let part = match (kind, a.ty, out.ty) {
        (FftKind::Fft | FftKind::Ifft, C64, C64) | (FftKind::Rfft, F32, C64) => F32,
        (FftKind::Irfft, C64, F32) => F32,
        (FftKind::Fft | FftKind::Ifft, C128, C128) | (FftKind::Rfft, F64, C128) => F64,
        (FftKind::Irfft, C128, F64) => F64,
        (_, x, y) => {
            return Err(fail(format!(
                "the nvptx backend does not support fft from {} to {}",
                x.name(),
                y.name()
            )))
        }
    };
    let first = rank - axes;
    let (in_dims, out_dims) = (a.dims.to_vec(), out.dims.to_vec());
    let kernel = |pass, elements| FftKernel {
        hero: id,
        part,
        pass,
        elements,
    };
    let zeros = || FftGeometry {
        kernels: vec![kernel(
            FftPass::Zeros {
                real: kind == FftKind::Irfft,
            },
            count(&out_dims),
        )],
        scratch: Vec::new(),
    };
    // A transform of no elements gives zeros (the evaluator's `complex_in_dims`).
    if lengths.contains(&0) || count(&in_dims) == 0 {
        return Ok(if count(&out_dims) == 0 {
            FftGeometry {
                kernels: Vec::new(),
                scratch: Vec::new(),
            }
        } else {
            zeros()
        });
    }
    let last = rank - 1;
    let full = if kind == FftKind::Irfft {
        &out_dims
    } else {
        &in_dims
    };
    let half_side = match kind {
        FftKind::Rfft => Some(&out_dims),
        FftKind::Irfft => Some(&in_dims),
        _ => None,
    };
    let n_last = full[last];
    let shapes_ok = full[first..] == lengths[..]
        && match half_side {
            None => in_dims == out_dims,
            Some(h) => h[last] == n_last / 2 + 1 && h[..last] == full[..last],
        };
    if !shapes_ok {
        return Err(fail(
            "fft_length does not match the operand's and result's dimensions".into(),
        ));
    }
    // Bluestein's chirp squares positions in 64 bits.
    if let Some(n) = lengths.iter().find(|&&n| n > 1 << 31) {
        return Err(fail(format!(
            "the nvptx backend does not support fft lengths above 2^31 ({n})"
        )));
    }
    // The dimensions each transform runs on, in order, with the buffers' dimensions.
    let mut stages: Vec<FftStage> = Vec::new();
    let mut dims = in_dims.clone();
    let add_axis = |axis: usize, dims: &mut Vec<i64>, needed: bool, stages: &mut Vec<_>| {
        let n = full[axis] as u64;
        let mut rs = radices(n);
        if rs.is_empty() && needed {
            rs.push(1);
        }
        let outer_inverse = matches!(kind, FftKind::Ifft | FftKind::Irfft);
        // A prime factor past [`DIRECT_PRIME_MAX`]: Bluestein's transform, a forward and an
        // inverse one of a power of two `m >= 2n - 1`.
        let bluestein = rs.iter().any(|&r| r > DIRECT_PRIME_MAX);
        let m = (2 * n - 1).next_power_of_two();
        let chirp = Chirp {
            n,
            conj: outer_inverse,
        };
        let plan: Vec<(u64, bool)> = if bluestein {
            let half = radices(m);
            half.iter()
                .map(|&r| (r, false))
                .chain(half.iter().map(|&r| (r, true)))
                .collect()
        } else {
            rs.iter().map(|&r| (r, outer_inverse)).collect()
        };
        let half = plan.len() / 2;
        let mut span = 1;
        let count = plan.len();
        for (i, &(radix, inverse)) in plan.iter().enumerate() {
            let lastst = i + 1 == count;
            if bluestein && i == half {
                span = 1;
            }
            let len = if bluestein { m } else { n };
            let (pre, post) = match (bluestein, i) {
                (false, _) => (None, FftPost::None),
                (true, 0) => (Some(chirp), FftPost::None),
                (true, i) if i + 1 == half => (None, FftPost::Filter(chirp)),
                (true, _) if lastst => (
                    None,
                    FftPost::Chirp {
                        chirp,
                        divide: outer_inverse,
                    },
                ),
                _ => (None, FftPost::None),
            };
            let read = match (kind, i, stages.is_empty()) {
                (FftKind::Rfft, _, true) => FftRead::Real,
                (FftKind::Irfft, 0, _) if axis == last => FftRead::Hermitian,
                _ => FftRead::Complex,
            };
            let mut dst_dims = dims.clone();
            dst_dims[axis] = if lastst && kind == FftKind::Rfft && axis == last {
                out_dims[last]
            } else if lastst {
                n as i64
            } else {
                len as i64
            };
            stages.push(FftStage {
                src: FftBuffer::Operand,
                read,
                src_dims: dims.clone(),
                dst: FftBuffer::Output,
                real_out: false,
                dst_dims: dst_dims.clone(),
                axis,
                len,
                radix,
                span,
                inverse,
                scale: inverse && lastst,
                pre,
                post,
            });
            *dims = dst_dims;
            span *= radix;
        }
    };
    match kind {
        FftKind::Fft | FftKind::Ifft => {
            for ax in (first..rank).rev() {
                add_axis(ax, &mut dims, false, &mut stages);
            }
        }
        FftKind::Rfft => {
            add_axis(last, &mut dims, true, &mut stages);
            for ax in (first..last).rev() {
                add_axis(ax, &mut dims, false, &mut stages);
            }
        }
        FftKind::Irfft => {
            for ax in first..last {
                add_axis(ax, &mut dims, false, &mut stages);
            }
            add_axis(last, &mut dims, true, &mut stages);
            if let Some(s) = stages.last_mut() {
                s.real_out = true;
            }
        }
    }
    // Every length 1: one copy.
    if stages.is_empty() {
        add_axis(last, &mut dims, true, &mut stages);
    }
    // Destinations, last first: the output, then alternately whichever buffer the next stage
    // does not write that holds the stage's values (the output only where it is complex and
    // large enough).
    let out_complex = kind != FftKind::Irfft;
    let mut scratch: Vec<u64> = Vec::new();
    let bytes = |dims: &[i64]| count(dims) * 2 * part.byte_size() as u64;
    let n = stages.len();
    let mut later = FftBuffer::Output;
    for i in (0..n).rev() {
        let need = bytes(&stages[i].dst_dims);
        let fits_output = out_complex
            && later != FftBuffer::Output
            && count(&stages[i].dst_dims) <= count(&out_dims);
        let dst = if i + 1 == n || fits_output {
            FftBuffer::Output
        } else if later != FftBuffer::Scratch(0) {
            FftBuffer::Scratch(0)
        } else {
            FftBuffer::Scratch(1)
        };
        if let FftBuffer::Scratch(k) = dst {
            if scratch.len() <= k {
                scratch.resize(k + 1, 0);
            }
            scratch[k] = scratch[k].max(need);
        }
        stages[i].dst = dst;
        later = dst;
    }
    for i in 1..n {
        stages[i].src = stages[i - 1].dst;
    }
    let kernels = stages
        .into_iter()
        .map(|s| {
            let e = count(&s.dst_dims);
            kernel(FftPass::Stage(s), e)
        })
        .collect();
    Ok(FftGeometry { kernels, scratch })
}

/// The buffers an FFT kernel is given.
pub(crate) struct FftBuffers<'ctx> {
    /// The output.
    pub out: PointerValue<'ctx>,
    /// The scratch buffers ([`FftGeometry::scratch`]).
    pub scratch: Vec<PointerValue<'ctx>>,
}

/// A complex value in registers.
#[derive(Clone, Copy)]
struct Cx<'ctx> {
    re: FloatValue<'ctx>,
    im: FloatValue<'ctx>,
}

/// The twiddle tables of one length.
enum Twiddles<'ctx> {
    /// Every power `w^t`, `t < N`, as `(re, im)` pairs of the part type.
    Direct(PointerValue<'ctx>),
    /// `w^(hi B)` and `w^lo` (`lo < B`) as `f64` pairs.
    Split {
        coarse: PointerValue<'ctx>,
        fine: PointerValue<'ctx>,
        block: u64,
    },
}

/// The constant table `name` of `vals` (of type `fty`), created once per module.
fn table<'ctx>(
    cg: &Cg<'ctx>,
    fty: FloatType<'ctx>,
    name: &str,
    vals: &[f64],
) -> PointerValue<'ctx> {
    if let Some(g) = cg.module.get_global(name) {
        return g.as_pointer_value();
    }
    let consts: Vec<FloatValue<'ctx>> = vals.iter().map(|&v| fty.const_float(v)).collect();
    let arr = fty.const_array(&consts);
    let g = cg
        .module
        .add_global(arr.get_type(), Some(cg.target.buffer_address_space()), name);
    g.set_linkage(Linkage::Internal);
    g.set_constant(true);
    g.set_initializer(&arr);
    g.set_alignment(16);
    g.as_pointer_value()
}

/// The twiddle tables of length `n` for part type `fty`.
fn twiddles<'ctx>(cg: &Cg<'ctx>, fty: FloatType<'ctx>, wide: bool, n: u64) -> Twiddles<'ctx> {
    let pairs = |ts: &mut dyn Iterator<Item = u64>| -> Vec<f64> {
        ts.flat_map(|t| {
            let (c, s) = unit_root(t, n);
            [c, s]
        })
        .collect()
    };
    if n <= DIRECT_TABLE_MAX {
        let name = format!("axle_fft_w{n}_{}", if wide { "f64" } else { "f32" });
        return Twiddles::Direct(table(cg, fty, &name, &pairs(&mut (0..n))));
    }
    let block = 1u64 << (64 - (n - 1).leading_zeros()).div_ceil(2);
    let f64t = cg.f64();
    let coarse = table(
        cg,
        f64t,
        &format!("axle_fft_wc{n}"),
        &pairs(&mut (0..n.div_ceil(block)).map(|h| h * block)),
    );
    let fine = table(
        cg,
        f64t,
        &format!("axle_fft_wf{n}"),
        &pairs(&mut (0..block)),
    );
    Twiddles::Split {
        coarse,
        fine,
        block,
    }
}

/// The complex entry `i` of a table of `(re, im)` pairs of type `fty`.
fn load_pair<'ctx>(
    cg: &Cg<'ctx>,
    fty: FloatType<'ctx>,
    p: PointerValue<'ctx>,
    i: IntValue<'ctx>,
) -> R<Cx<'ctx>> {
    let b = &cg.b;
    let at = b.build_int_nuw_mul(i, cg.c64(2), "cx.at")?;
    let re = b
        .build_load(fty, cg.gep(fty.into(), p, at)?, "cx.re")?
        .into_float_value();
    let at1 = b.build_int_nuw_add(at, cg.c64(1), "cx.at1")?;
    let im = b
        .build_load(fty, cg.gep(fty.into(), p, at1)?, "cx.im")?
        .into_float_value();
    Ok(Cx { re, im })
}

/// Stores `v` as complex entry `i` of `p` (parts of type `fty`).
fn store_pair<'ctx>(
    cg: &Cg<'ctx>,
    fty: FloatType<'ctx>,
    p: PointerValue<'ctx>,
    i: IntValue<'ctx>,
    v: Cx<'ctx>,
) -> R<()> {
    let b = &cg.b;
    let at = b.build_int_nuw_mul(i, cg.c64(2), "cx.at")?;
    b.build_store(cg.gep(fty.into(), p, at)?, v.re)?;
    let at1 = b.build_int_nuw_add(at, cg.c64(1), "cx.at1")?;
    b.build_store(cg.gep(fty.into(), p, at1)?, v.im)?;
    Ok(())
}

/// `a * b`.
fn mul<'ctx>(cg: &Cg<'ctx>, a: Cx<'ctx>, b: Cx<'ctx>) -> R<Cx<'ctx>> {
    let bl = &cg.b;
    let rr = bl.build_float_mul(a.re, b.re, "m.rr")?;
    let ii = bl.build_float_mul(a.im, b.im, "m.ii")?;
    let ri = bl.build_float_mul(a.re, b.im, "m.ri")?;
    let ir = bl.build_float_mul(a.im, b.re, "m.ir")?;
    Ok(Cx {
        re: bl.build_float_sub(rr, ii, "m.re")?,
        im: bl.build_float_add(ri, ir, "m.im")?,
    })
}

/// The twiddle `w^t` (`t < N`) in the part type `fty`, conjugated when `inverse`.
fn twiddle<'ctx>(
    cg: &Cg<'ctx>,
    fty: FloatType<'ctx>,
    tw: &Twiddles<'ctx>,
    t: IntValue<'ctx>,
    inverse: bool,
) -> R<Cx<'ctx>> {
    let b = &cg.b;
    let w = match tw {
        Twiddles::Direct(p) => load_pair(cg, fty, *p, t)?,
        Twiddles::Split {
            coarse,
            fine,
            block,
        } => {
            let f64t = cg.f64();
            let hi = b.build_int_unsigned_div(t, cg.c64(*block as i64), "tw.hi")?;
            let lo = b.build_int_unsigned_rem(t, cg.c64(*block as i64), "tw.lo")?;
            let p = mul(
                cg,
                load_pair(cg, f64t, *coarse, hi)?,
                load_pair(cg, f64t, *fine, lo)?,
            )?;
            if fty == f64t {
                p
            } else {
                Cx {
                    re: b.build_float_trunc(p.re, fty, "tw.re")?,
                    im: b.build_float_trunc(p.im, fty, "tw.im")?,
                }
            }
        }
    };
    Ok(if inverse {
        Cx {
            re: w.re,
            im: b.build_float_neg(w.im, "tw.conj")?,
        }
    } else {
        w
    })
}

/// The chirp `ch` at position `q < ch.n`: the root of `2 n` to the power `q^2 mod 2 n`.
fn chirp_at<'ctx>(
    cg: &Cg<'ctx>,
    fty: FloatType<'ctx>,
    wide: bool,
    ch: Chirp,
    q: IntValue<'ctx>,
) -> R<Cx<'ctx>> {
    let b = &cg.b;
    let two_n = 2 * ch.n;
    let sq = b.build_int_nuw_mul(q, q, "q2")?;
    let t = b.build_int_unsigned_rem(sq, cg.c64(two_n as i64), "q2.mod")?;
    let tw = twiddles(cg, fty, wide, two_n);
    twiddle(cg, fty, &tw, t, ch.conj)
}

/// Bluestein's filter for chirp `ch` on lines of `m` (a power of two `>= 2 n - 1`): the
/// forward transform of `b`, `b[k] = b[m - k] = conj(c(k))` for `k < n`, zero between,
/// computed in `f64` by the evaluator's FFT and rounded once; a module constant.
fn filter_table<'ctx>(
    cg: &Cg<'ctx>,
    fty: FloatType<'ctx>,
    ch: Chirp,
    m: u64,
) -> PointerValue<'ctx> {
    let wide = fty == cg.f64();
    let name = format!(
        "axle_fft_bs{}_{m}_{}{}",
        ch.n,
        if wide { "f64" } else { "f32" },
        if ch.conj { "_inv" } else { "" }
    );
    if let Some(g) = cg.module.get_global(&name) {
        return g.as_pointer_value();
    }
    let two_n = 2 * ch.n;
    let mut v = vec![num_complex::Complex::new(0.0f64, 0.0); m as usize];
    for k in 0..ch.n {
        let (re, im) = unit_root(
            (u128::from(k) * u128::from(k) % u128::from(two_n)) as u64,
            two_n,
        );
        // conj(c(k)), c conjugated for an inverse transform.
        let x = num_complex::Complex::new(re, if ch.conj { im } else { -im });
        v[k as usize] = x;
        if k > 0 {
            v[(m - k) as usize] = x;
        }
    }
    let h = axle_analysis::fft::transform(FftKind::Fft, v, &[m as i64], &[m as i64], 1);
    let parts: Vec<f64> = h.iter().flat_map(|z| [z.re, z.im]).collect();
    table(cg, fty, &name, &parts)
}

/// The pointer of buffer `which`.
fn buffer<'ctx>(
    operand: Option<PointerValue<'ctx>>,
    bufs: &FftBuffers<'ctx>,
    which: FftBuffer,
) -> R<PointerValue<'ctx>> {
    match which {
        FftBuffer::Operand => operand.ok_or_else(|| "an fft's operand is not a buffer".into()),
        FftBuffer::Output => Ok(bufs.out),
        FftBuffer::Scratch(k) => bufs
            .scratch
            .get(k)
            .copied()
            .ok_or_else(|| "an fft kernel is missing a scratch buffer".into()),
    }
}

/// Emits the body of FFT kernel `k` at the builder's position (the entry block of a kernel
/// whose operand is bound in `g`).
pub(crate) fn emit_fft<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    k: &FftKernel,
    bufs: &FftBuffers<'ctx>,
) -> R<()> {
    let cg = g.cg;
    let operand = g.m.operands(k.hero).first().and_then(|&o| g.bound_ptr(o));
    let fty = if k.part == ElementType::F64 {
        cg.f64()
    } else {
        cg.f32()
    };
    let plan = k.launch_plan().map_err(|e| Fail::Msg(e.to_string()))?;
    let t = cg.thread_index(plan.wide_index)?;
    let b = &cg.b;
    let inside = b.build_int_compare(IntPredicate::ULT, t, cg.c64(k.elements as i64), "inside")?;
    cg.if_then(inside, || match &k.pass {
        FftPass::Zeros { real } => {
            let zero = fty.const_zero();
            if *real {
                b.build_store(cg.gep(fty.into(), bufs.out, t)?, zero)?;
                Ok(())
            } else {
                store_pair(cg, fty, bufs.out, t, Cx { re: zero, im: zero })
            }
        }
        FftPass::Stage(s) => {
            let src = buffer(operand, bufs, s.src)?;
            let dst = buffer(operand, bufs, s.dst)?;
            emit_stage(cg, fty, k.part == ElementType::F64, s, src, dst, t)
        }
    })
}

/// One radix stage: thread `t` computes element `t` of the destination.
fn emit_stage<'ctx>(
    cg: &Cg<'ctx>,
    fty: FloatType<'ctx>,
    wide: bool,
    s: &FftStage,
    src: PointerValue<'ctx>,
    dst: PointerValue<'ctx>,
    t: IntValue<'ctx>,
) -> R<()> {
    let b = &cg.b;
    let c = |v: u64| cg.c64(v as i64);
    let inner = count(&s.dst_dims[s.axis + 1..]);
    let dlen = s.dst_dims[s.axis] as u64;
    let slen = s.src_dims[s.axis] as u64;
    let (n, radix, span) = (s.len, s.radix, s.span);
    // Element `t` = ((outer * dlen) + o) * inner + i.
    let i = b.build_int_unsigned_rem(t, c(inner), "in")?;
    let q = b.build_int_unsigned_div(t, c(inner), "q")?;
    let o = b.build_int_unsigned_rem(q, c(dlen), "o")?;
    let outer = b.build_int_unsigned_div(q, c(dlen), "outer")?;
    let line = b.build_int_nuw_mul(outer, c(slen * inner), "line")?;
    let line = b.build_int_nuw_add(line, i, "line")?;
    // o = ((j / S) R + k) S + a, a = j % S.
    let a = b.build_int_unsigned_rem(o, c(span), "a")?;
    let bq = b.build_int_unsigned_div(o, c(span), "bq")?;
    let kk = b.build_int_unsigned_rem(bq, c(radix), "k")?;
    let jhi = b.build_int_unsigned_div(bq, c(radix), "jhi")?;
    let j = b.build_int_nuw_mul(jhi, c(span), "j")?;
    let j = b.build_int_nuw_add(j, a, "j")?;
    // The twiddle step (a + k S) N / L < N.
    let step = b.build_int_nuw_mul(kk, c(span), "ks")?;
    let step = b.build_int_nuw_add(step, a, "ks.a")?;
    let step = b.build_int_nuw_mul(step, c(n / (span * radix)), "step")?;
    let stride = n / radix;
    // The length of the line as stored (its Hermitian mirror's), Bluestein's `n` or `N`.
    let line_n = s.pre.map_or(n, |ch| ch.n);
    // Position `p` of the line (0 <= p < line_n) as read.
    let base_read = |p: IntValue<'ctx>| -> R<Cx<'ctx>> {
        let at = |p: IntValue<'ctx>| -> R<IntValue<'ctx>> {
            let x = b.build_int_nuw_mul(p, c(inner), "p.at")?;
            Ok(b.build_int_nuw_add(line, x, "p.at")?)
        };
        match s.read {
            FftRead::Complex => load_pair(cg, fty, src, at(p)?),
            FftRead::Real => {
                let re = b
                    .build_load(fty, cg.gep(fty.into(), src, at(p)?)?, "x.re")?
                    .into_float_value();
                Ok(Cx {
                    re,
                    im: fty.const_zero(),
                })
            }
            FftRead::Hermitian => {
                let stored = b.build_int_compare(IntPredicate::ULT, p, c(slen), "stored")?;
                let mirror = b.build_int_sub(c(line_n), p, "mirror")?;
                let p2 = b
                    .build_select(stored, p, mirror, "herm.p")?
                    .into_int_value();
                let x = load_pair(cg, fty, src, at(p2)?)?;
                let neg = b.build_float_neg(x.im, "herm.conj")?;
                let im = b
                    .build_select(stored, x.im, neg, "herm.im")?
                    .into_float_value();
                Ok(Cx { re: x.re, im })
            }
        }
    };
    // Position `p` (0 <= p < N) as the stage reads it: Bluestein's first stage multiplies by
    // the chirp, and reads zero past its length.
    let read = |p: IntValue<'ctx>| -> R<Cx<'ctx>> {
        let Some(ch) = s.pre else {
            return base_read(p);
        };
        let real = b.build_int_compare(IntPredicate::ULT, p, c(ch.n), "bs.real")?;
        let q = b.build_select(real, p, c(0), "bs.q")?.into_int_value();
        let x = mul(cg, base_read(q)?, chirp_at(cg, fty, wide, ch, q)?)?;
        let zero = fty.const_zero();
        let pick = |v: FloatValue<'ctx>| -> R<FloatValue<'ctx>> {
            Ok(b.build_select(real, v, zero, "bs.x")?.into_float_value())
        };
        Ok(Cx {
            re: pick(x.re)?,
            im: pick(x.im)?,
        })
    };
    let x0 = read(j)?;
    let mut acc = x0;
    if radix > 1 {
        let tw = twiddles(cg, fty, wide, n);
        let init: Vec<Val<'ctx>> = vec![x0.re.into(), x0.im.into(), c(0).into()];
        let vals = cg.for_range_acc(c(1), c(radix), &init, |r, st| {
            let (re, im, ti) = (
                st[0].into_float_value(),
                st[1].into_float_value(),
                st[2].into_int_value(),
            );
            // ti = r * step mod N, kept below N.
            let ti = b.build_int_nuw_add(ti, step, "ti")?;
            let wrap = b.build_int_compare(IntPredicate::UGE, ti, c(n), "wrap")?;
            let less = b.build_int_sub(ti, c(n), "ti.w")?;
            let ti = b.build_select(wrap, less, ti, "ti")?.into_int_value();
            let p = b.build_int_nuw_mul(r, c(stride), "rp")?;
            let p = b.build_int_nuw_add(j, p, "p")?;
            let x = read(p)?;
            let w = twiddle(cg, fty, &tw, ti, s.inverse)?;
            let xw = mul(cg, x, w)?;
            Ok(vec![
                b.build_float_add(re, xw.re, "acc.re")?.into(),
                b.build_float_add(im, xw.im, "acc.im")?.into(),
                ti.into(),
            ])
        })?;
        acc = Cx {
            re: vals[0].into_float_value(),
            im: vals[1].into_float_value(),
        };
    }
    if s.scale {
        let len = fty.const_float(n as f64);
        acc = Cx {
            re: b.build_float_div(acc.re, len, "sc.re")?,
            im: b.build_float_div(acc.im, len, "sc.im")?,
        };
    }
    match s.post {
        FftPost::None => {}
        FftPost::Filter(ch) => {
            let table = filter_table(cg, fty, ch, n);
            acc = mul(cg, acc, load_pair(cg, fty, table, o)?)?;
        }
        FftPost::Chirp { chirp, divide } => {
            acc = mul(cg, acc, chirp_at(cg, fty, wide, chirp, o)?)?;
            if divide {
                let len = fty.const_float(chirp.n as f64);
                acc = Cx {
                    re: b.build_float_div(acc.re, len, "bs.re")?,
                    im: b.build_float_div(acc.im, len, "bs.im")?,
                };
            }
        }
    }
    if s.real_out {
        b.build_store(cg.gep(fty.into(), dst, t)?, acc.re)?;
        Ok(())
    } else {
        store_pair(cg, fty, dst, t, acc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radices_multiply_to_the_length() {
        for n in 1..2000u64 {
            let r = radices(n);
            assert_eq!(r.iter().product::<u64>(), n, "{n}: {r:?}");
            assert!(r.iter().all(|&x| x > 1), "{n}: {r:?}");
        }
        assert_eq!(radices(64), vec![4, 4, 4]);
        assert_eq!(radices(24), vec![4, 2, 3]);
        assert_eq!(radices(97), vec![97]);
        assert!(radices(1).is_empty());
    }

    #[test]
    fn unit_roots_are_within_an_ulp_or_two() {
        for n in [1u64, 2, 3, 5, 8, 12, 97, 1000, 4096, 65_537] {
            for t in (0..n).step_by((n as usize / 50).max(1)) {
                let (c, s) = unit_root(t, n);
                let th = -2.0 * std::f64::consts::PI * (t as f64) / (n as f64);
                assert!((c - th.cos()).abs() < 1e-15, "{t}/{n}: {c} {}", th.cos());
                assert!((s - th.sin()).abs() < 1e-15, "{t}/{n}: {s} {}", th.sin());
            }
        }
        // Exact where the root is exact.
        assert_eq!(unit_root(0, 7), (1.0, -0.0));
        assert_eq!(unit_root(2, 8), (0.0, -1.0));
        assert_eq!(unit_root(4, 8), (-1.0, -0.0));
    }
}
