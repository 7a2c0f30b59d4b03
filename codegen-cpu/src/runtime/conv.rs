//! The precompiled convolution: an `f32` convolution's work items run by a register-tiled
//! kernel compiled into the runtime (with AVX-512 or with AVX2 and FMA, chosen when the program
//! is compiled from the target's features), instead of by a kernel generated for the
//! convolution, so that a convolution costs LLVM nothing but the call.
//!
//! The convolutions it takes ([`LibraryConv::new`]): `f32`, output features innermost in the
//! output and in the kernel (`b01f`-style outputs with `01io`-style kernels), input features
//! innermost in the input, no feature or batch groups, no base dilation, at least [`MIN_C`]
//! input features, and output features a multiple of the tile's width (two vectors). Any
//! stride, padding and window dilation.
//!
//! Invariants:
//! - A work item is one group of strips of output features times one chunk of tiles of [`MR`]
//!   consecutive output pixels; the split depends on the sizes only. Each output element is
//!   computed by exactly one item, in an order that depends on the geometry only: its terms
//!   (kernel positions in row-major order, then input features) in runs of [`SUB_C`] summed with
//!   fused multiply-adds from zero, each run's sum added in order to the element's total (a
//!   kernel position no pixel of the tile meets is left out). So results are the same at any
//!   thread count and item split, and no rounding chain is longer than `SUB_C` or than the
//!   number of runs ([`LibraryConv::new`] bounds it by [`MAX_RUNS`]).
//! - A pixel whose window position falls in the padding reads a row of zeros; a kernel
//!   position that meets no input element in any pixel of a tile is skipped (it would add
//!   zeros only).
//! - Items write only their own output block: pixels `p0..p1`, features `o0..o1` of each.

use std::arch::x86_64::*;

/// Output pixels per register tile.
pub(crate) const MR: usize = 6;

/// The longest run of input features summed in one chain before it is added to the total.
const SUB_C: i64 = 32;

/// The most runs one output element's total chains ([`LibraryConv::new`] leaves longer sums
/// to the generated kernel, which sums them in a tree).
const MAX_RUNS: i64 = 512;

/// Input features a convolution needs at least: with fewer, setting up each tile's rows
/// costs about as much as its multiply-adds, and the generated kernel (which knows the sizes)
/// is faster (a `7x7` window over 3 features was 2.7 times slower here).
const MIN_C: i64 = 8;

/// Work items a convolution aims at at least (so threads share the work).
const MIN_ITEMS: i64 = 16;

/// Tiles of pixels in one item at most.
const MAX_TILES: i64 = 256;

/// Bytes of the kernel an item's strips read that stay in cache while its tiles run.
const CACHED_BYTES: i64 = 512 << 10;

/// A convolution as the precompiled kernel runs it. Offsets and strides are in elements.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LibraryConv {
    /// Vectors of 16 lanes (AVX-512), else of 8 (AVX2 with FMA).
    pub avx512: bool,
    /// Output dimensions other than the feature dimension (the last), row-major.
    pub pix_dims: Vec<i64>,
    /// Per output pixel dimension: `-1` for the batch, else its spatial dimension.
    pub pix_role: Vec<i64>,
    /// Output and input features.
    pub o: i64,
    pub c: i64,
    /// Input strides of the batch and of each spatial dimension (the features are contiguous).
    pub in_st_batch: i64,
    pub in_st_sp: Vec<i64>,
    /// Input sizes, kernel sizes and kernel strides of each spatial dimension, and the
    /// kernel's stride between input features (its output features are contiguous).
    pub in_sp: Vec<i64>,
    pub k_sp: Vec<i64>,
    pub k_st_sp: Vec<i64>,
    pub k_st_in: i64,
    /// Per spatial dimension: the window's stride, low padding and window dilation.
    pub stride: Vec<i64>,
    pub pad_lo: Vec<i64>,
    pub dilate: Vec<i64>,
    /// Groups of strips of output features, and chunks of pixel tiles (items are
    /// `groups * chunks`, the chunks innermost).
    pub groups: i64,
    pub chunks: i64,
}

/// What [`LibraryConv::new`] reads of a convolution.
pub(crate) struct ConvShape<'a> {
    pub pix_dims: &'a [i64],
    pub pix_role: &'a [Option<usize>],
    pub o: i64,
    pub c: i64,
    pub in_st_batch: i64,
    pub in_st_feat: i64,
    pub in_st_sp: &'a [i64],
    pub in_sp: &'a [i64],
    pub k_sp: &'a [i64],
    pub k_st_sp: &'a [i64],
    pub k_st_in: i64,
    /// Per spatial dimension: stride, low padding, base dilation, window dilation.
    pub window: Vec<(i64, i64, i64, i64)>,
}

impl LibraryConv {
    /// The convolution `s` on the precompiled kernel, if it takes it (see the module header),
    /// with vectors of 64 bytes (`avx512`) or 32.
    pub fn new(s: &ConvShape, avx512: bool) -> Option<LibraryConv> {
        let nr = nr(avx512) as i64;
        let npos = s.k_sp.iter().try_fold(1i64, |a, &k| a.checked_mul(k))?;
        let runs = npos.checked_mul(s.c)?.checked_add(SUB_C - 1)? / SUB_C;
        let ok = s.in_st_feat == 1
            && s.k_sp.len() <= MAX_SP
            && s.o > 0
            && s.c >= MIN_C
            && s.o % nr == 0
            && s.window.iter().all(|w| w.2 == 1 && w.0 >= 1 && w.3 >= 1)
            && runs <= MAX_RUNS
            && s.pix_dims.iter().all(|&d| d > 0)
            && s.k_sp.iter().all(|&k| k > 0);
        if !ok {
            return None;
        }
        let npix: i64 = s.pix_dims.iter().product();
        let tiles = (npix + MR as i64 - 1) / MR as i64;
        let strips = s.o / nr;
        // Strip groups whose slices of the kernel stay in cache; then as many chunks of tiles
        // as make MIN_ITEMS items, with at most MAX_TILES tiles each.
        let kernel_bytes = (npos * s.c).saturating_mul(s.o).saturating_mul(4);
        let groups = ((kernel_bytes + CACHED_BYTES - 1) / CACHED_BYTES).clamp(1, strips);
        // As many groups as groups of that width need (none left empty).
        let width = (strips + groups - 1) / groups;
        let groups = (strips + width - 1) / width;
        let chunks = ((MIN_ITEMS + groups - 1) / groups)
            .max((tiles + MAX_TILES - 1) / MAX_TILES)
            .clamp(1, tiles);
        // As many chunks as chunks of that size need (none left empty).
        let per_chunk = (tiles + chunks - 1) / chunks;
        let chunks = (tiles + per_chunk - 1) / per_chunk;
        Some(LibraryConv {
            avx512,
            pix_dims: s.pix_dims.to_vec(),
            pix_role: s
                .pix_role
                .iter()
                .map(|r| r.map_or(-1, |d| d as i64))
                .collect(),
            o: s.o,
            c: s.c,
            in_st_batch: s.in_st_batch,
            in_st_sp: s.in_st_sp.to_vec(),
            in_sp: s.in_sp.to_vec(),
            k_sp: s.k_sp.to_vec(),
            k_st_sp: s.k_st_sp.to_vec(),
            k_st_in: s.k_st_in,
            stride: s.window.iter().map(|w| w.0).collect(),
            pad_lo: s.window.iter().map(|w| w.1).collect(),
            dilate: s.window.iter().map(|w| w.3).collect(),
            groups,
            chunks,
        })
    }

    /// Output pixels.
    pub fn pixels(&self) -> i64 {
        self.pix_dims.iter().product()
    }

    fn tiles(&self) -> i64 {
        (self.pixels() + MR as i64 - 1) / MR as i64
    }

    fn strips(&self) -> i64 {
        self.o / nr(self.avx512) as i64
    }

    /// Work items.
    pub fn items(&self) -> i64 {
        self.groups * self.chunks
    }

    /// Multiply-adds of one work item (at most).
    pub fn item_work(&self) -> i64 {
        let npos: i64 = self.k_sp.iter().product();
        let pixels = self.tiles_per_chunk() * MR as i64;
        let features = self.strips_per_group() * nr(self.avx512) as i64;
        pixels * features * npos * self.c
    }

    /// The pixels and the features of one item's block (the last ones' may be fewer).
    pub fn block_size(&self) -> (i64, i64) {
        (
            self.tiles_per_chunk() * MR as i64,
            self.strips_per_group() * nr(self.avx512) as i64,
        )
    }

    /// Whether every item's block is whole pixels (all their features): one contiguous range.
    pub fn whole_pixels(&self) -> bool {
        self.groups == 1
    }

    fn tiles_per_chunk(&self) -> i64 {
        (self.tiles() + self.chunks - 1) / self.chunks
    }

    fn strips_per_group(&self) -> i64 {
        (self.strips() + self.groups - 1) / self.groups
    }

    /// The output block of item `item`: pixels `p0..p1`, features `o0..o1`.
    pub fn block(&self, item: i64) -> (i64, i64, i64, i64) {
        let (g, j) = (item / self.chunks, item % self.chunks);
        let (rows, w) = self.block_size();
        let p0 = (j * rows).min(self.pixels());
        let p1 = (p0 + rows).min(self.pixels());
        let o0 = (g * w).min(self.o);
        let o1 = (o0 + w).min(self.o);
        (p0, p1, o0, o1)
    }

    /// The descriptor: its length, the scalars, then the per-dimension lists (their counts
    /// among the scalars).
    pub fn encode(&self) -> Vec<i64> {
        let mut d = vec![
            0,
            self.avx512 as i64,
            self.pix_dims.len() as i64,
            self.k_sp.len() as i64,
            self.o,
            self.c,
            self.in_st_batch,
            self.k_st_in,
            self.groups,
            self.chunks,
        ];
        for v in [&self.pix_dims, &self.pix_role] {
            d.extend_from_slice(v);
        }
        for v in [
            &self.in_st_sp,
            &self.in_sp,
            &self.k_sp,
            &self.k_st_sp,
            &self.stride,
            &self.pad_lo,
            &self.dilate,
        ] {
            d.extend_from_slice(v);
        }
        d[0] = d.len() as i64;
        d
    }

    /// Reads a descriptor [`LibraryConv::encode`] wrote.
    fn decode(d: &[i64]) -> Option<LibraryConv> {
        let head = d.get(..10)?;
        let np = usize::try_from(head[2]).ok()?;
        let ns = usize::try_from(head[3]).ok()?;
        if d.len() != 10 + 2 * np + 7 * ns || head[0] != d.len() as i64 {
            return None;
        }
        let mut at = 10;
        let mut take = |n: usize| {
            let v = d[at..at + n].to_vec();
            at += n;
            v
        };
        let pix_dims = take(np);
        let pix_role = take(np);
        let g = LibraryConv {
            avx512: head[1] != 0,
            o: head[4],
            c: head[5],
            in_st_batch: head[6],
            k_st_in: head[7],
            groups: head[8],
            chunks: head[9],
            pix_dims,
            pix_role,
            in_st_sp: take(ns),
            in_sp: take(ns),
            k_sp: take(ns),
            k_st_sp: take(ns),
            stride: take(ns),
            pad_lo: take(ns),
            dilate: take(ns),
        };
        let valid = g.o > 0
            && g.c > 0
            && g.o % nr(g.avx512) as i64 == 0
            && g.groups > 0
            && g.chunks > 0
            && g.pix_dims.iter().all(|&x| x > 0)
            && g.k_sp.iter().all(|&x| x > 0)
            && ns <= MAX_SP
            && g.pix_role.iter().all(|&r| r >= -1 && r < ns as i64);
        valid.then_some(g)
    }

    /// Runs work items `start..end`.
    ///
    /// # Safety
    /// `input`, `kernel` and `out` must hold the operands and result this descriptor
    /// describes; no other thread may write the items' blocks of `out` meanwhile; the host
    /// must have the vector extensions the descriptor names.
    unsafe fn run(
        &self,
        input: *const f32,
        kernel: *const f32,
        out: *mut f32,
        start: i64,
        end: i64,
    ) {
        let zeros = vec![0f32; self.c as usize];
        let npos: i64 = self.k_sp.iter().product();
        let slice = (npos * self.c * self.block_size().1) as usize;
        PACK.with_borrow_mut(|pack| {
            // A cache line more, so the packed slice starts on one: every vector load of it
            // is then one line, not two.
            if pack.len() < slice + 16 {
                pack.resize(slice + 16, 0.0);
            }
            let base = pack.as_mut_ptr();
            // SAFETY: at most 15 elements past the start of a buffer of `slice + 16`.
            let aligned = unsafe { base.add(base.align_offset(64)) };
            let bufs = Bufs {
                input,
                kernel,
                out,
                zeros: zeros.as_ptr(),
                pack: aligned,
            };
            for item in start..end {
                let blk = self.block(item);
                // SAFETY: forwarded; the host has the extension (checked by the caller); the
                // pack buffer holds a group's slice of the kernel.
                unsafe {
                    if self.avx512 {
                        item_avx512(self, &bufs, blk);
                    } else {
                        item_avx2(self, &bufs, blk);
                    }
                }
            }
        });
    }
}

thread_local! {
    /// Each thread's buffer for the packed slice of a kernel ([`item`]), kept between calls.
    static PACK: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The buffers one call works on: the operands and result, a row of zeros as long as an input
/// pixel's features, and the buffer for an item's packed slice of the kernel.
#[derive(Clone, Copy)]
struct Bufs {
    input: *const f32,
    kernel: *const f32,
    out: *mut f32,
    zeros: *const f32,
    pack: *mut f32,
}

/// Output features per strip: two vectors.
fn nr(avx512: bool) -> usize {
    if avx512 {
        32
    } else {
        16
    }
}

/// The vector operations the tile needs, on `f32` lanes. Contract of every method: the
/// calling code runs with the vector extension of the implementation (the `item_*` entry
/// points enable it), and a pointer it takes holds `N` lanes (one for `splat`).
trait Lanes: Copy {
    const N: usize;
    unsafe fn zero() -> Self;
    unsafe fn load(p: *const f32) -> Self;
    unsafe fn splat(p: *const f32) -> Self;
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self;
    unsafe fn add(a: Self, b: Self) -> Self;
    unsafe fn store(p: *mut f32, v: Self);
}

impl Lanes for __m512 {
    const N: usize = 16;
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: callers run with AVX-512F (the trait's contract); pointers as documented.
        unsafe { _mm512_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: callers run with AVX-512F (the trait's contract); pointers as documented.
        unsafe { _mm512_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> Self {
        // SAFETY: callers run with AVX-512F (the trait's contract); pointers as documented.
        unsafe { _mm512_set1_ps(*p) }
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        // SAFETY: callers run with AVX-512F (the trait's contract); pointers as documented.
        unsafe { _mm512_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        // SAFETY: callers run with AVX-512F (the trait's contract); pointers as documented.
        unsafe { _mm512_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        // SAFETY: callers run with AVX-512F (the trait's contract); pointers as documented.
        unsafe { _mm512_storeu_ps(p, v) }
    }
}

impl Lanes for __m256 {
    const N: usize = 8;
    #[inline(always)]
    unsafe fn zero() -> Self {
        // SAFETY: callers run with AVX2 and FMA (the trait's contract); pointers as documented.
        unsafe { _mm256_setzero_ps() }
    }
    #[inline(always)]
    unsafe fn load(p: *const f32) -> Self {
        // SAFETY: callers run with AVX2 and FMA (the trait's contract); pointers as documented.
        unsafe { _mm256_loadu_ps(p) }
    }
    #[inline(always)]
    unsafe fn splat(p: *const f32) -> Self {
        // SAFETY: callers run with AVX2 and FMA (the trait's contract); pointers as documented.
        unsafe { _mm256_broadcast_ss(&*p) }
    }
    #[inline(always)]
    unsafe fn fma(a: Self, b: Self, c: Self) -> Self {
        // SAFETY: callers run with AVX2 and FMA (the trait's contract); pointers as documented.
        unsafe { _mm256_fmadd_ps(a, b, c) }
    }
    #[inline(always)]
    unsafe fn add(a: Self, b: Self) -> Self {
        // SAFETY: callers run with AVX2 and FMA (the trait's contract); pointers as documented.
        unsafe { _mm256_add_ps(a, b) }
    }
    #[inline(always)]
    unsafe fn store(p: *mut f32, v: Self) {
        // SAFETY: callers run with AVX2 and FMA (the trait's contract); pointers as documented.
        unsafe { _mm256_storeu_ps(p, v) }
    }
}

#[target_feature(enable = "avx512f")]
unsafe fn item_avx512(g: &LibraryConv, bufs: &Bufs, blk: (i64, i64, i64, i64)) {
    // SAFETY: forwarded from `run`.
    unsafe { item::<__m512>(g, bufs, blk) }
}

#[target_feature(enable = "avx2,fma")]
unsafe fn item_avx2(g: &LibraryConv, bufs: &Bufs, blk: (i64, i64, i64, i64)) {
    // SAFETY: forwarded from `run`.
    unsafe { item::<__m256>(g, bufs, blk) }
}

/// Where one pixel of a tile reads: its input base (batch), its window's low corner per
/// spatial dimension, and whether it exists (a tile can reach past the last pixel).
#[derive(Clone, Copy)]
struct Pixel {
    base: i64,
    lo: [i64; MAX_SP],
    exists: bool,
}

/// Spatial dimensions the kernel handles at most.
const MAX_SP: usize = 4;

/// One work item: the strips of `o0..o1` over the tiles of pixels `p0..p1`. The item first
/// packs its slice of the kernel (strips, then kernel positions, then input features, then
/// the strip's `2N` features), so every tile reads it contiguously: read in place, a strip's
/// rows lie a kernel row apart, often a power of two of bytes, and share a few cache sets.
#[inline(always)]
unsafe fn item<V: Lanes>(g: &LibraryConv, bufs: &Bufs, (p0, p1, o0, o1): (i64, i64, i64, i64)) {
    let Bufs {
        input,
        kernel,
        out,
        zeros,
        pack,
    } = *bufs;
    let ns = g.k_sp.len();
    let npos: i64 = g.k_sp.iter().product();
    // Each kernel position's coordinates and offset in the kernel.
    let mut kpos = vec![[0i64; MAX_SP]; npos as usize];
    let mut koff = vec![0i64; npos as usize];
    for (q, (kp, ko)) in kpos.iter_mut().zip(koff.iter_mut()).enumerate() {
        let mut rest = q as i64;
        for d in (0..ns).rev() {
            kp[d] = rest % g.k_sp[d];
            rest /= g.k_sp[d];
            *ko += kp[d] * g.k_st_sp[d];
        }
    }
    let nrw = 2 * V::N as i64;
    let strip_len = npos * g.c * nrw;
    let mut at = pack;
    let mut o = o0;
    while o < o1 {
        for &ko in &koff {
            for i in 0..g.c {
                // SAFETY: a row of the strip inside the kernel, and its place in the pack
                // buffer (which holds a group's strips).
                unsafe {
                    let src = kernel.offset((ko + i * g.k_st_in + o) as isize);
                    std::ptr::copy_nonoverlapping(src, at, nrw as usize);
                    at = at.add(nrw as usize);
                }
            }
        }
        o += nrw;
    }
    let mut rows: Vec<Option<[*const f32; MR]>> = Vec::with_capacity(npos as usize);
    let mut p = p0;
    while p < p1 {
        // The tile's pixels.
        let mut px = [Pixel {
            base: 0,
            lo: [0; MAX_SP],
            exists: false,
        }; MR];
        for (r, pix) in px.iter_mut().enumerate() {
            let q = p + r as i64;
            if q >= p1 {
                continue;
            }
            let mut rest = q;
            pix.exists = true;
            for d in (0..g.pix_dims.len()).rev() {
                let x = rest % g.pix_dims[d];
                rest /= g.pix_dims[d];
                match usize::try_from(g.pix_role[d]) {
                    Ok(s) => pix.lo[s] = x * g.stride[s] - g.pad_lo[s],
                    Err(_) => pix.base += x * g.in_st_batch,
                }
            }
        }
        // Per kernel position, each pixel's input row (zeros in the padding), or none when no
        // pixel meets an element there.
        rows.clear();
        for kp in &kpos {
            let mut any = false;
            let mut at = [zeros; MR];
            for (r, pix) in px.iter().enumerate() {
                if !pix.exists {
                    continue;
                }
                let mut off = pix.base;
                let mut inside = true;
                for d in 0..ns {
                    let x = pix.lo[d] + kp[d] * g.dilate[d];
                    inside &= x >= 0 && x < g.in_sp[d];
                    off += x * g.in_st_sp[d];
                }
                if inside {
                    // SAFETY: an element of the input (its coordinates are in range).
                    at[r] = unsafe { input.offset(off as isize) };
                    any = true;
                }
            }
            rows.push(any.then_some(at));
        }
        let mut o = o0;
        while o < o1 {
            // SAFETY: the rows and the packed strip are inside their buffers.
            let acc = unsafe {
                let strip = pack.offset(((o - o0) / nrw * strip_len) as isize);
                strip_tile::<V>(g, strip, &rows)
            };
            for (r, pix) in px.iter().enumerate() {
                if !pix.exists {
                    continue;
                }
                let dst = (p + r as i64) * g.o + o;
                // SAFETY: pixel `p + r` and features `o..o + 2N` are in the item's block.
                unsafe {
                    V::store(out.offset(dst as isize), acc[r][0]);
                    V::store(out.offset(dst as isize + V::N as isize), acc[r][1]);
                }
            }
            o += nrw;
        }
        p += MR as i64;
    }
}

/// The `MR x 2N` accumulators of one tile and one packed strip: the terms (kernel positions,
/// then input features) in runs of [`SUB_C`] summed from zero, each run added to the totals.
#[inline(always)]
unsafe fn strip_tile<V: Lanes>(
    g: &LibraryConv,
    strip: *const f32,
    rows: &[Option<[*const f32; MR]>],
) -> [[V; 2]; MR] {
    // SAFETY: (the whole body) `rows` point at rows of `c` input features (or zeros), and the
    // packed strip holds `2N` features for every kernel position and input feature.
    unsafe {
        let mut total = [[V::zero(); 2]; MR];
        let mut run = [[V::zero(); 2]; MR];
        let mut terms = 0;
        let step = 2 * V::N;
        for (q, row) in rows.iter().enumerate() {
            let Some(at) = row else { continue };
            let w = strip.add(q * g.c as usize * step);
            let mut c0 = 0;
            while c0 < g.c {
                let c1 = (c0 + SUB_C - terms).min(g.c);
                for i in c0..c1 {
                    let wi = w.add(i as usize * step);
                    let (w0, w1) = (V::load(wi), V::load(wi.add(V::N)));
                    for r in 0..MR {
                        let b = V::splat(at[r].offset(i as isize));
                        run[r][0] = V::fma(b, w0, run[r][0]);
                        run[r][1] = V::fma(b, w1, run[r][1]);
                    }
                }
                terms += c1 - c0;
                c0 = c1;
                if terms == SUB_C {
                    for r in 0..MR {
                        total[r][0] = V::add(total[r][0], run[r][0]);
                        total[r][1] = V::add(total[r][1], run[r][1]);
                        run[r] = [V::zero(); 2];
                    }
                    terms = 0;
                }
            }
        }
        for r in 0..MR {
            total[r][0] = V::add(total[r][0], run[r][0]);
            total[r][1] = V::add(total[r][1], run[r][1]);
        }
        total
    }
}

/// Whether this host runs the kernel the descriptor names.
fn host_has(avx512: bool) -> bool {
    if avx512 {
        std::arch::is_x86_feature_detected!("avx512f")
    } else {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
}

/// The runtime entry point of the precompiled convolution: runs work items `start..end` of the
/// convolution `desc` describes ([`LibraryConv::encode`]) on `input`, `kernel` and `out`. A
/// descriptor the compiler did not write, or one for vector extensions the host lacks, aborts
/// the process rather than compute a wrong answer.
///
/// # Safety
/// `desc` must be a descriptor the compiler emitted, and `input`, `kernel`, `out` the buffers
/// of its convolution.
pub(crate) unsafe extern "C" fn axle_rt_conv(
    desc: *const i64,
    input: *const u8,
    kernel: *const u8,
    out: *mut u8,
    start: i64,
    end: i64,
) {
    // SAFETY: a descriptor the compiler emitted (the caller's contract).
    unsafe {
        super::with_descriptor("axle_rt_conv", desc, |d| {
            let g = LibraryConv::decode(d)?;
            if start < 0 || end > g.items() || !host_has(g.avx512) {
                return None;
            }
            // SAFETY: the buffers of the convolution the descriptor describes (the caller's
            // contract); the host has the extension (checked above).
            g.run(input.cast(), kernel.cast(), out.cast(), start, end);
            Some(())
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A naive NHWC convolution with an HWIO kernel, summed in f64.
    #[allow(clippy::too_many_arguments)]
    fn reference(
        x: &[f32],
        w: &[f32],
        (n, h, wd, c): (i64, i64, i64, i64),
        (kh, kw, o): (i64, i64, i64),
        (oh, ow): (i64, i64),
        st: (i64, i64),
        pad: (i64, i64),
        dil: (i64, i64),
    ) -> Vec<f32> {
        let mut y = vec![0f32; (n * oh * ow * o) as usize];
        for b in 0..n {
            for i in 0..oh {
                for j in 0..ow {
                    for f in 0..o {
                        let mut s = 0f64;
                        for a in 0..kh {
                            for e in 0..kw {
                                let (yy, xx) =
                                    (i * st.0 - pad.0 + a * dil.0, j * st.1 - pad.1 + e * dil.1);
                                if yy < 0 || yy >= h || xx < 0 || xx >= wd {
                                    continue;
                                }
                                for q in 0..c {
                                    let xv = x[(((b * h + yy) * wd + xx) * c + q) as usize];
                                    let wv = w[(((a * kw + e) * c + q) * o + f) as usize];
                                    s += xv as f64 * wv as f64;
                                }
                            }
                        }
                        y[(((b * oh + i) * ow + j) * o + f) as usize] = s as f32;
                    }
                }
            }
        }
        y
    }

    /// Batch `n`, input `h x (h + 1) x c`, kernel `k x k x c x o`, stride, padding, dilation.
    fn check(
        avx512: bool,
        (n, h, c): (i64, i64, i64),
        (k, o): (i64, i64),
        (st, pad, dil): (i64, i64, i64),
    ) {
        if !host_has(avx512) {
            return;
        }
        let wd = h + 1;
        let span = (k - 1) * dil + 1;
        let oh = (h + 2 * pad - span) / st + 1;
        let ow = (wd + 2 * pad - span) / st + 1;
        let x: Vec<f32> = (0..n * h * wd * c)
            .map(|i| ((i * 7919 % 13) as f32 - 6.0) / 4.0)
            .collect();
        let w: Vec<f32> = (0..k * k * c * o)
            .map(|i| ((i * 104729 % 11) as f32 - 5.0) / 8.0)
            .collect();
        let want = reference(
            &x,
            &w,
            (n, h, wd, c),
            (k, k, o),
            (oh, ow),
            (st, st),
            (pad, pad),
            (dil, dil),
        );
        let shape = ConvShape {
            pix_dims: &[n, oh, ow],
            pix_role: &[None, Some(0), Some(1)],
            o,
            c,
            in_st_batch: h * wd * c,
            in_st_feat: 1,
            in_st_sp: &[wd * c, c],
            in_sp: &[h, wd],
            k_sp: &[k, k],
            k_st_sp: &[k * c * o, c * o],
            k_st_in: o,
            window: vec![(st, pad, 1, dil); 2],
        };
        let g = LibraryConv::new(&shape, avx512).expect("a convolution the kernel takes");
        assert_eq!(g.groups > 1, k * k * c * o * 4 > CACHED_BYTES);
        for item in 0..g.items() {
            let (p0, p1, o0, o1) = g.block(item);
            assert!(p0 < p1 && o0 < o1, "item {item} of {g:?} is empty");
        }
        assert_eq!(LibraryConv::decode(&g.encode()).as_ref(), Some(&g));
        let mut y = vec![f32::NAN; want.len()];
        // Items in two calls, as two threads would run them.
        let half = g.items() / 2;
        for (s, e) in [(half, g.items()), (0, half)] {
            // SAFETY: the buffers the descriptor describes.
            unsafe {
                axle_rt_conv(
                    g.encode().as_ptr(),
                    x.as_ptr().cast(),
                    w.as_ptr().cast(),
                    y.as_mut_ptr().cast(),
                    s,
                    e,
                )
            };
        }
        for (i, (a, b)) in y.iter().zip(&want).enumerate() {
            assert!(
                (a - b).abs() <= 1e-4 * (1.0 + b.abs()),
                "element {i}: {a} vs {b}"
            );
        }
    }

    #[test]
    fn matches_a_naive_convolution() {
        for avx512 in [false, true] {
            let nr = nr(avx512) as i64;
            // 3x3 same padding; strided; dilated; 1x1; a long sum (runs of SUB_C); odd pixels.
            check(avx512, (2, 7, 9), (3, nr), (1, 1, 1));
            check(avx512, (1, 9, 8), (3, 2 * nr), (2, 1, 1));
            check(avx512, (1, 8, 12), (3, nr), (1, 2, 2));
            check(avx512, (3, 5, 70), (1, nr), (1, 0, 1));
            check(avx512, (1, 6, 40), (2, 3 * nr), (1, 0, 1));
            // A kernel too large for one group of strips (items over part of the features).
            check(avx512, (1, 4, 64), (3, 8 * nr), (1, 1, 1));
            check(avx512, (1, 3, 200), (3, 5 * nr), (1, 1, 1));
        }
    }

    #[test]
    fn refuses_what_it_does_not_take() {
        let takes = |o: i64, in_st_feat: i64, lhs: i64| {
            let k_st_sp = [24 * o, 8 * o];
            let shape = ConvShape {
                pix_dims: &[1, 4, 4],
                pix_role: &[None, Some(0), Some(1)],
                o,
                c: 8,
                in_st_batch: 128,
                in_st_feat,
                in_st_sp: &[32, 8],
                in_sp: &[4, 4],
                k_sp: &[3, 3],
                k_st_sp: &k_st_sp,
                k_st_in: o,
                window: vec![(1, 1, lhs, 1); 2],
            };
            LibraryConv::new(&shape, true)
        };
        assert!(takes(32, 1, 1).is_some());
        assert!(takes(24, 1, 1).is_none());
        assert!(takes(32, 16, 1).is_none());
        assert!(takes(32, 1, 2).is_none());
        // More spatial dimensions than the tile's pixels record.
        let deep = ConvShape {
            pix_dims: &[1; 6],
            pix_role: &[None, Some(0), Some(1), Some(2), Some(3), Some(4)],
            o: 32,
            c: 8,
            in_st_batch: 8,
            in_st_feat: 1,
            in_st_sp: &[8; 5],
            in_sp: &[1; 5],
            k_sp: &[1; 5],
            k_st_sp: &[256; 5],
            k_st_in: 32,
            window: vec![(1, 0, 1, 1); 5],
        };
        assert!(LibraryConv::new(&deep, true).is_none());
        let mut d = takes(32, 1, 1).unwrap().encode();
        d[4] = 30;
        assert!(LibraryConv::decode(&d).is_none());
    }
}
