//! A register-tiled convolution for `f32`/`f64`, and for `f16`/`bf16` widened to `f32` as they
//! are loaded and rounded once as they are stored, with the output features innermost in the
//! output and the kernel (`b01f`-style outputs with `01io`-style kernels, any input layout):
//! `MR` consecutive output pixels times `NR` output features are accumulated in vector
//! registers over the kernel positions and input features, reading the input through an
//! implicit im2col (scalar broadcasts, zero where the window hangs over the padding or falls
//! between the elements of a base-dilated input; a kernel position that meets no element in
//! any pixel of the tile is skipped). A tile whose pixels all meet a real element at every
//! kernel position takes a copy of the sum emitted without these checks (the same terms in
//! the same order); in the other tiles, a pixel that meets no element at a kernel position
//! reads its row of input features from zeros ([`zero_rows`]), so the checks are made once per
//! position and pixel, not per term. The emitted loops are what runs, since these kernels'
//! LLVM pipeline neither unrolls nor unswitches (`modules.rs`). Feature and batch groups go to
//! the elemental emitter.
//!
//! Each output element sums its terms (kernel positions, then input features) with fused
//! multiply-adds; padding terms add zero. So that no rounding chain is long (one chain over a
//! window of 25600 terms was 40 times less accurate than XLA's), the sum is a fixed tree of
//! short chains ([`SumTree`]): a position with more than [`SUB_C`] input features sums them in
//! runs of `SUB_C` from zero, chained into the position's sum; the positions of a block of the
//! kernel (all of them without blocks), in the tile loops' order, are summed in leaves of about
//! `SUB_C` terms, each level of the tree chaining [`SUM_FAN`] nodes of the level below from
//! zero; a block's sum is added to the totals its item's earlier blocks left. A kernel of at
//! most [`CHAIN_TERMS`] terms is one chain (as XLA sums it, and faster). The order
//! depends on the geometry only, never on the work split. Narrow floats accumulate in `f32`
//! and round to nearest even once per output element.

use axle_ir::{conv_geo, ElementType, InstId, Module};
use inkwell::types::{BasicTypeEnum, VectorType};
use inkwell::values::{BasicValue, IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;

use crate::cg::{bv, numel, strides, Cg, Val, NO_UNROLL};
use crate::error::R;
use crate::gemm::{
    add_vecs, ceil_div64, col_masks, delinearize, min64, splat_float, splat_int, RegFn, RegTile,
};
use crate::runtime::conv::{ConvShape, LibraryConv};

/// Output pixels per register tile.
pub(crate) const MR: i64 = 6;

/// The geometry of a convolution the tiled kernel handles.
#[derive(Clone, Debug)]
pub(crate) struct ConvFast {
    pub ty: ElementType,
    /// Output dimensions other than the feature dimension (the last), and for each the
    /// role: `None` for the batch, `Some(d)` for spatial dimension `d`.
    pub pix_dims: Vec<i64>,
    pub pix_role: Vec<Option<usize>>,
    /// Output features.
    pub o: i64,
    /// Input features.
    pub c: i64,
    pub in_st_batch: i64,
    pub in_st_feat: i64,
    pub in_st_sp: Vec<i64>,
    pub in_sp: Vec<i64>,
    pub k_sp: Vec<i64>,
    pub k_st_sp: Vec<i64>,
    pub k_st_in: i64,
    pub window: Vec<axle_ir::WindowDim>,
    /// Whether a work item is one strip of output features over a chunk of the pixel tiles
    /// (the strips outermost: the item first packs its strip's slice of the kernel into its
    /// scratch, contiguous, and every tile of the chunk reads it from there), rather than every
    /// strip of one tile (each tile reads the kernel where it lies).
    pub strip_major: bool,
    /// With [`ConvFast::strip_major`], the chunks the pixel tiles of a strip are cut into.
    pub chunks: i64,
    /// Per spatial dimension, the phases its output coordinates fall into: with a base
    /// dilation `D` and stride `s`, `D / gcd(s, D)` (coordinates of one phase meet real input
    /// elements at the same kernel positions), else 1. With any phase above 1, the tiles run
    /// over the output pixels phase by phase ([`ConvFast::order_dims`]), so the pixels of a
    /// tile skip the same kernel positions.
    pub phase: Vec<i64>,
    /// Lanes of one accumulator vector: a vector register of the target in the accumulation
    /// type ([`ConvFast::for_target`]; 64 bytes until then). The work split
    /// ([`ConvFast::strip_major`], [`ConvFast::chunks`]) is chosen at 64 bytes whatever the
    /// target, so every user of the geometry agrees on it.
    lanes: i64,
    /// The convolution on the runtime's precompiled kernel ([`ConvFast::for_target`]): its
    /// kernel is then a call, and its work items the library's.
    pub library: Option<LibraryConv>,
}

/// The vector register bytes [`conv_fast`] plans with (AVX-512's).
const PLAN_VECTOR_BYTES: i64 = 64;

/// Accumulator lanes in `bytes` of vector register for element type `ty` (narrow floats
/// accumulate in `f32`).
fn lanes_in(ty: ElementType, bytes: i64) -> i64 {
    let acc = if ty == ElementType::F64 { 8 } else { 4 };
    (bytes / acc).max(1)
}

impl ConvFast {
    fn lanes(&self) -> i64 {
        self.lanes
    }
    /// The same convolution tiled for the target's vector registers (32 bytes with AVX2, 64
    /// with AVX-512, [`crate::gemm::vector_bytes`]), so that a tile's accumulators fit in its
    /// registers; the work split stays as planned. Where the target and the convolution allow
    /// it, the convolution runs on the runtime's precompiled kernel instead
    /// ([`ConvFast::library`]), so every user of the targeted geometry (buffer rules, module
    /// classes, emission) makes the same choice.
    pub fn for_target(mut self, t: &crate::gemm::GemmTarget) -> ConvFast {
        let bytes = crate::gemm::vector_bytes(&t.features);
        self.lanes = lanes_in(self.ty, bytes.min(PLAN_VECTOR_BYTES));
        self.for_library(t)
    }
    /// This convolution on the runtime's precompiled kernel when the target allows it (the
    /// host, in the JIT, with AVX2 and FMA or AVX-512) and the kernel takes it (`f32`, no
    /// phases, see `runtime/conv.rs`). The choice depends on the types, sizes and target only,
    /// so the buffer rules and the emission agree; an output fusion's epilogue then runs on
    /// each item's finished block.
    fn for_library(mut self, t: &crate::gemm::GemmTarget) -> ConvFast {
        let has = |f: &str| t.features.split(',').any(|x| x == f);
        let avx512 = crate::gemm::vector_bytes(&t.features) == 64;
        if !t.conv_library
            || self.ty != ElementType::F32
            || self.phased()
            || !(avx512 || has("+avx2") && has("+fma"))
        {
            return self;
        }
        let shape = ConvShape {
            pix_dims: &self.pix_dims,
            pix_role: &self.pix_role,
            o: self.o,
            c: self.c,
            in_st_batch: self.in_st_batch,
            in_st_feat: self.in_st_feat,
            in_st_sp: &self.in_st_sp,
            in_sp: &self.in_sp,
            k_sp: &self.k_sp,
            k_st_sp: &self.k_st_sp,
            k_st_in: self.k_st_in,
            window: self
                .window
                .iter()
                .map(|w| (w.stride, w.pad_lo, w.lhs_dilate, w.rhs_dilate))
                .collect(),
        };
        if let Some(lib) = LibraryConv::new(&shape, avx512) {
            self.library = Some(lib);
            self.strip_major = false;
            self.chunks = 1;
        }
        self
    }
    /// Output features per strip (two vectors).
    fn nr(&self) -> i64 {
        2 * self.lanes()
    }
    /// Whether the pixels run phase by phase.
    fn phased(&self) -> bool {
        self.phase.iter().any(|&p| p > 1)
    }
    /// The dimensions of the order the tiles visit the output pixels in: the phases of the
    /// phased spatial dimensions, outermost, then the pixel dimensions, each phased one cut
    /// to its coordinates per phase (rounded up: a coordinate past the end does not exist).
    fn order_dims(&self) -> Vec<i64> {
        let mut dims: Vec<i64> = self.phase.iter().copied().filter(|&p| p > 1).collect();
        for (d, role) in self.pix_dims.iter().zip(&self.pix_role) {
            let p = role.map_or(1, |s| self.phase[s]);
            dims.push((*d as u64).div_ceil(p as u64) as i64);
        }
        dims
    }
    /// Positions in the order the tiles visit the output pixels (some do not exist when
    /// phased).
    fn order_len(&self) -> i64 {
        numel(&self.order_dims())
    }
    /// Tiles of `MR` output pixels.
    fn pixel_tiles(&self) -> i64 {
        (self.order_len() as u64).div_ceil(MR as u64) as i64
    }
    /// The same convolution with its pixels in their own order (no phases).
    pub fn unphased(&self) -> ConvFast {
        ConvFast {
            phase: vec![1; self.phase.len()],
            ..self.clone()
        }
    }
    /// Strips of output features.
    fn strips(&self) -> i64 {
        (self.o as u64).div_ceil(self.nr() as u64) as i64
    }
    /// Pixel tiles per chunk ([`ConvFast::chunks`]).
    fn tiles_per_chunk(&self) -> i64 {
        (self.pixel_tiles() as u64).div_ceil(self.chunks.max(1) as u64) as i64
    }
    /// Work items: tiles of `MR` output pixels, or with [`ConvFast::strip_major`] the strips
    /// of output features times the chunks of tiles.
    pub fn items(&self) -> i64 {
        if let Some(lib) = &self.library {
            return lib.items();
        }
        if self.strip_major {
            self.strips() * self.chunks
        } else {
            self.pixel_tiles()
        }
    }
    /// Multiply-adds of one work item (at most).
    pub fn item_work(&self) -> i64 {
        if let Some(lib) = &self.library {
            return lib.item_work();
        }
        let per_strip = MR * self.nr().min(self.o) * self.c * self.k_sp.iter().product::<i64>();
        if self.strip_major {
            per_strip * self.tiles_per_chunk()
        } else {
            per_strip * self.strips()
        }
    }
    /// Kernel positions per coordinate of the first kernel spatial dimension.
    fn inner_positions(&self) -> i64 {
        self.k_sp.iter().skip(1).product()
    }
    /// The tree a tile sums a block's kernel positions in ([`SumTree`]): leaves of about
    /// [`SUB_C`] terms, and as many levels of [`SUM_FAN`] as leave at most `SUM_FAN` nodes at
    /// the top for the longest block; one leaf of all a block's positions when the whole
    /// kernel has at most [`CHAIN_TERMS`] terms.
    pub(crate) fn sum_tree(&self) -> SumTree {
        let all = self.k_sp.iter().product::<i64>().max(1);
        let positions = match self.k_sp.first() {
            Some(_) if self.strip_major => self.block_rows() * self.inner_positions(),
            Some(&k0) => k0.max(1) * self.inner_positions(),
            None => 1,
        };
        if all * self.c <= CHAIN_TERMS {
            // One chain.
            return SumTree {
                dims: self.k_sp.clone(),
                leaf: positions.max(1),
                levels: 0,
            };
        }
        let leaf = (SUB_C / self.c.max(1)).max(1);
        let mut nodes = (positions as u64).div_ceil(leaf as u64);
        let mut levels = 0;
        while nodes > 1 {
            levels += 1;
            if nodes <= SUM_FAN as u64 {
                break;
            }
            nodes = nodes.div_ceil(SUM_FAN as u64);
        }
        SumTree {
            dims: self.k_sp.clone(),
            leaf,
            levels,
        }
    }
    /// With [`ConvFast::strip_major`], the coordinates of the first kernel spatial dimension
    /// in one block of the kernel: as many as keep the block's packed slice within
    /// [`BLOCK_BYTES`] at the planned strip width (so the blocks, and with them the order of
    /// the sums, are the same on every target), at least one (1 without spatial dimensions).
    fn block_rows(&self) -> i64 {
        let Some(&k0) = self.k_sp.first() else {
            return 1;
        };
        let nr = 2 * lanes_in(self.ty, PLAN_VECTOR_BYTES);
        let row = self.inner_positions() * self.c * nr * self.ty.byte_size() as i64;
        (BLOCK_BYTES / row.max(1)).clamp(1, k0.max(1))
    }
    /// Blocks of the kernel a strip-major item runs one after another.
    fn k_blocks(&self) -> i64 {
        match self.k_sp.first() {
            Some(&k0) => (k0.max(1) as u64).div_ceil(self.block_rows() as u64) as i64,
            None => 1,
        }
    }
    /// Elements of one block's packed slice of the kernel for one strip: kernel positions,
    /// input features, then the strip's `2 * lanes` output features.
    fn block_elems(&self) -> i64 {
        self.block_rows() * self.inner_positions() * self.c * self.nr()
    }
    /// Bytes of a packed block in an item's scratch, rounded up to a cache line.
    fn block_bytes(&self) -> i64 {
        (self.block_elems() * self.ty.byte_size() as i64 + 63) / 64 * 64
    }
    /// Bytes of the accumulators an item keeps between blocks of the kernel: each pixel of
    /// its tiles times the strip's features, in the accumulation type (none with one block).
    fn partial_bytes(&self) -> i64 {
        if self.k_blocks() <= 1 {
            return 0;
        }
        let acc = if self.ty == ElementType::F64 { 8 } else { 4 };
        self.tiles_per_chunk() * MR * self.nr() * acc
    }
    /// Bytes of scratch the kernel needs: with [`ConvFast::strip_major`], per work item a
    /// packed block of the kernel and the accumulators kept between blocks; none otherwise.
    pub fn scratch_bytes(&self) -> i64 {
        if self.strip_major {
            self.items() * (self.block_bytes() + self.partial_bytes())
        } else {
            0
        }
    }
}

/// Input features a tile sums from zero before adding the run to the kernel position's sum
/// (only when a position has more than this many; see the module header).
const SUB_C: i64 = 32;

/// The most terms (kernel positions times input features) an output element sums in one
/// chain instead of a tree ([`SumTree`]): the tree's loops made a `3x3` convolution of 16
/// features 1.55 times slower, and XLA sums so few terms in one chain too.
const CHAIN_TERMS: i64 = 512;

/// The most input features whose terms a tile emits as straight code instead of a loop (LLVM's
/// unroller does not run on these kernels, `modules.rs`).
const STRAIGHT_C: i64 = 8;

/// Children of each node of the tree the kernel positions are summed in ([`SumTree`]).
const SUM_FAN: i64 = 16;

/// How a tile sums an output element's kernel positions (each of `c` input features): a fixed
/// tree of short chains over the positions of a block of the kernel (all positions without
/// blocks), in the tile loops' order. Its leaves chain [`SumTree::leaf`] consecutive positions
/// from zero (about [`SUB_C`] terms; one position with more features, whose own sum is a chain
/// of runs of `SUB_C` features); each level above chains [`SUM_FAN`] nodes of the level below
/// from zero; the top level chains its nodes (at most `SUM_FAN`) into the totals.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct SumTree {
    /// The kernel's spatial dimensions (a position's coordinates).
    pub dims: Vec<i64>,
    /// Positions per leaf.
    pub leaf: i64,
    /// Levels above the leaves: 0 when a block's positions fit in one leaf (then the totals
    /// are its chain).
    pub levels: u32,
}

/// The positions spanned by a node `level` levels above the leaves.
fn node_span(tree: &SumTree, level: u32) -> i64 {
    tree.leaf * SUM_FAN.pow(level)
}

/// Positions `q0..q1` (linear in the kernel's spatial dimensions, in the tile loops' order)
/// summed as `level` levels of `tree` ([`SumTree`]), chained into `from`, or from zero with
/// `None`. `position(coordinates, from)` adds one position's terms to `from` (or sums them
/// from zero with `None`). The levels above the first are loops LLVM does not unroll
/// ([`NO_UNROLL`]).
fn sum_positions<'ctx>(
    cg: &Cg<'ctx>,
    tree: &SumTree,
    level: u32,
    (q0, q1): (IntValue<'ctx>, IntValue<'ctx>),
    from: Option<Vec<Val<'ctx>>>,
    zeros: &[Val<'ctx>],
    position: &mut PosFn<'_, 'ctx>,
) -> R<Vec<Val<'ctx>>> {
    let bb = &cg.b;
    let dims = &tree.dims;
    if level == 0 {
        if tree.leaf == 1 {
            // One position, `q1 = q0 + 1`.
            return position(&delinearize(cg, dims, q0)?, from);
        }
        let start = from.unwrap_or_else(|| zeros.to_vec());
        return cg.for_range_acc(q0, q1, &start, |q, acc| {
            position(&delinearize(cg, dims, q)?, Some(acc.to_vec()))
        });
    }
    let span = node_span(tree, level - 1);
    let n = ceil_div64(cg, bb.build_int_nsw_sub(q1, q0, "n")?, span)?;
    let start = from.unwrap_or_else(|| zeros.to_vec());
    // A level over leaves may be unrolled (a small kernel's positions then lie in straight
    // code, as one chain's did); higher levels, each containing the tree below it, not.
    let hints: &[&str] = if level >= 2 { &[NO_UNROLL] } else { &[] };
    cg.for_range_acc_hinted(cg.c64(0), n, &start, hints, |i, tot| {
        let a = bb.build_int_nsw_add(q0, bb.build_int_nsw_mul(i, cg.c64(span), "qa")?, "qa")?;
        let b = min64(cg, bb.build_int_nsw_add(a, cg.c64(span), "qb")?, q1)?;
        let part = sum_positions(cg, tree, level - 1, (a, b), None, zeros, position)?;
        add_vecs(cg, tot, &part)
    })
}

/// The most bytes of one packed block of a kernel strip (a part of a core's L2: every tile of
/// the item's chunk reads the block while it stays there).
const BLOCK_BYTES: i64 = 64 << 10;

/// The greatest common divisor of two positive numbers.
fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a
    } else {
        gcd(b, a % b)
    }
}

/// Where the pixel at position `q` of the tiles' order lies: its linear index over the pixel
/// dimensions, its coordinates, and whether it exists (the index of pixel 0 when not).
fn locate<'ctx>(
    cg: &Cg<'ctx>,
    geo: &ConvFast,
    q: IntValue<'ctx>,
) -> R<(IntValue<'ctx>, Vec<IntValue<'ctx>>, IntValue<'ctx>)> {
    let bb = &cg.b;
    if !geo.phased() {
        return Ok((
            q,
            delinearize(cg, &geo.pix_dims, q)?,
            cg.i1().const_all_ones(),
        ));
    }
    let mq = delinearize(cg, &geo.order_dims(), q)?;
    let nph = geo.phase.iter().filter(|&&p| p > 1).count();
    let mut ph = vec![None; geo.phase.len()];
    let mut k = 0;
    for (s, &p) in geo.phase.iter().enumerate() {
        if p > 1 {
            ph[s] = Some(mq[k]);
            k += 1;
        }
    }
    let st = strides(&geo.pix_dims);
    let mut exists = cg.i1().const_all_ones();
    let mut lin = cg.c64(0);
    let mut multi = Vec::with_capacity(geo.pix_dims.len());
    for (i, role) in geo.pix_role.iter().enumerate() {
        let mut c = mq[nph + i];
        if let Some(phase) = role.and_then(|s| ph[s].map(|v| (s, v))) {
            let (s, v) = phase;
            c =
                bb.build_int_nsw_add(bb.build_int_nsw_mul(c, cg.c64(geo.phase[s]), "pc")?, v, "c")?;
            let lt = bb.build_int_compare(IntPredicate::SLT, c, cg.c64(geo.pix_dims[i]), "lt")?;
            exists = bb.build_and(exists, lt, "exists")?;
        }
        lin = bb.build_int_nsw_add(lin, bb.build_int_nsw_mul(c, cg.c64(st[i]), "t")?, "lin")?;
        multi.push(c);
    }
    let lin = bb
        .build_select(exists, lin, cg.c64(0), "pix")?
        .into_int_value();
    Ok((lin, multi, exists))
}

/// The output a work item writes: pixels `p0..p1`, output features `o0..o1` of each.
pub(crate) struct ItemBlock<'ctx> {
    pub p0: IntValue<'ctx>,
    pub p1: IntValue<'ctx>,
    pub o0: IntValue<'ctx>,
    pub o1: IntValue<'ctx>,
}

/// The output work item `t` writes.
pub(crate) fn item_block<'ctx>(
    cg: &Cg<'ctx>,
    geo: &ConvFast,
    t: IntValue<'ctx>,
) -> R<ItemBlock<'ctx>> {
    let bb = &cg.b;
    if geo.phased() {
        return Err("the output block of a phased convolution's item is not a range".into());
    }
    let npix = cg.c64(numel(&geo.pix_dims));
    if let Some(lib) = &geo.library {
        // Chunks of pixels innermost, groups of strips outermost (`LibraryConv::block`).
        let (rows, width) = lib.block_size();
        let chunks = cg.c64(lib.chunks);
        let g = bb.build_int_unsigned_div(t, chunks, "group")?;
        let j = bb.build_int_unsigned_rem(t, chunks, "chunk")?;
        let p0 = min64(cg, bb.build_int_nsw_mul(j, cg.c64(rows), "p0")?, npix)?;
        let p1 = min64(cg, bb.build_int_nsw_add(p0, cg.c64(rows), "p1")?, npix)?;
        let o = cg.c64(geo.o);
        let o0 = min64(cg, bb.build_int_nsw_mul(g, cg.c64(width), "o0")?, o)?;
        let o1 = min64(cg, bb.build_int_nsw_add(o0, cg.c64(width), "o1")?, o)?;
        return Ok(ItemBlock { p0, p1, o0, o1 });
    }
    if !geo.strip_major {
        let p0 = bb.build_int_nsw_mul(t, cg.c64(MR), "p0")?;
        let p1 = min64(cg, bb.build_int_nsw_add(p0, cg.c64(MR), "p1")?, npix)?;
        return Ok(ItemBlock {
            p0,
            p1,
            o0: cg.c64(0),
            o1: cg.c64(geo.o),
        });
    }
    let chunks = cg.c64(geo.chunks);
    let s = bb.build_int_signed_div(t, chunks, "strip")?;
    let j = bb.build_int_signed_rem(t, chunks, "chunk")?;
    let rows = cg.c64(geo.tiles_per_chunk() * MR);
    let p0 = bb.build_int_nsw_mul(j, rows, "p0")?;
    let p1 = min64(cg, bb.build_int_nsw_add(p0, rows, "p1")?, npix)?;
    let o0 = bb.build_int_nsw_mul(s, cg.c64(geo.nr()), "o0")?;
    let o1 = min64(
        cg,
        bb.build_int_nsw_add(o0, cg.c64(geo.nr()), "o1")?,
        cg.c64(geo.o),
    )?;
    Ok(ItemBlock { p0, p1, o0, o1 })
}

/// Emits the call of the runtime's precompiled convolution
/// ([`crate::runtime::conv::axle_rt_conv`]) on work items `start..end`: `bufs` the
/// convolution's input, kernel and output.
fn emit_library<'ctx>(
    cg: &Cg<'ctx>,
    lib: &LibraryConv,
    bufs: [PointerValue<'ctx>; 3],
    start: IntValue<'ctx>,
    end: IntValue<'ctx>,
) -> R<()> {
    let desc = lib.encode();
    crate::host::emit_item_call(
        cg,
        "axle_rt_conv",
        &desc,
        "axle.conv.desc",
        bufs,
        start,
        end,
    )
}

/// Work items a strip-major convolution aims at at least (so threads share the work).
const MIN_ITEMS: i64 = 16;

/// Bytes of an operand that stay in cache while the other operand streams through it (a
/// part of a core's L2).
const CACHED_BYTES: i64 = 512 << 10;

/// Whether to run the strips of output features outermost: when that moves fewer bytes than
/// running the tiles of pixels outermost, each counted as read once if it fits in
/// [`CACHED_BYTES`] and once per pass of the outer loop otherwise.
fn strip_major(geo: &ConvFast, input_elems: i64) -> bool {
    let e = geo.ty.byte_size() as i64;
    let kernel = geo.k_sp.iter().product::<i64>() * geo.c * geo.o * e;
    let input = input_elems * e;
    let again = |bytes: i64, passes: i64| {
        if bytes <= CACHED_BYTES {
            bytes
        } else {
            bytes.saturating_mul(passes)
        }
    };
    let pixels_outer = input.saturating_add(again(kernel, geo.pixel_tiles()));
    let strips_outer = kernel.saturating_add(again(input, geo.strips()));
    geo.strips() > 1 && strips_outer < pixels_outer
}

/// The tiled geometry of convolution `id`, if the tiled kernel handles it.
pub(crate) fn conv_fast(m: &Module, id: InstId) -> Option<ConvFast> {
    let ops = m.operands(id);
    let (l, r, out) = (
        m.array_shape(ops[0])?,
        m.array_shape(ops[1])?,
        m.array_shape(id)?,
    );
    if !matches!(
        out.ty,
        ElementType::F32 | ElementType::F64 | ElementType::F16 | ElementType::BF16
    ) || l.ty != out.ty
        || r.ty != out.ty
    {
        return None;
    }
    let g = conv_geo(m, id).ok()?;
    if g.fgc != 1 || g.bgc != 1 || g.window.iter().any(|w| w.lhs_dilate < 1) {
        return None;
    }
    let dn = &g.dn;
    let orank = out.rank();
    let krank = r.rank();
    if dn.output_feature as usize != orank - 1 || dn.kernel_output_feature as usize != krank - 1 {
        return None;
    }
    if numel(&out.dims) == 0 || numel(&l.dims) == 0 {
        return None;
    }
    let (sl, sk) = (strides(&l.dims), strides(&r.dims));
    let pix_dims = out.dims[..orank - 1].to_vec();
    let pix_role = (0..orank - 1)
        .map(|d| dn.output_spatial.iter().position(|&s| s as usize == d))
        .collect();
    let mut geo = ConvFast {
        ty: out.ty,
        pix_dims,
        pix_role,
        o: out.dims[orank - 1],
        c: g.c_in,
        in_st_batch: sl[dn.input_batch as usize],
        in_st_feat: sl[dn.input_feature as usize],
        in_st_sp: dn.input_spatial.iter().map(|&d| sl[d as usize]).collect(),
        in_sp: g.in_sp.clone(),
        k_sp: g.k_sp.clone(),
        k_st_sp: dn.kernel_spatial.iter().map(|&d| sk[d as usize]).collect(),
        k_st_in: sk[dn.kernel_input_feature as usize],
        window: g.window.clone(),
        strip_major: false,
        chunks: 1,
        lanes: lanes_in(out.ty, PLAN_VECTOR_BYTES),
        library: None,
        phase: g
            .window
            .iter()
            .map(|w| {
                let (d, st) = (w.lhs_dilate.max(1), w.stride.max(1));
                d / gcd(d, st)
            })
            .collect(),
    };
    if strip_major(&geo, numel(&l.dims)) {
        geo.strip_major = true;
        geo.chunks = (MIN_ITEMS as u64)
            .div_ceil(geo.strips() as u64)
            .clamp(1, geo.pixel_tiles() as u64) as i64;
    }
    Some(geo)
}

/// The body of [`sum_positions`]: `(coordinates, the sum to add to or none) -> the sum`.
type PosFn<'f, 'ctx> =
    dyn FnMut(&[IntValue<'ctx>], Option<Vec<Val<'ctx>>>) -> R<Vec<Val<'ctx>>> + 'f;

/// The body of [`nest_acc`]: `(coordinates, loop-carried values) -> next values`.
type NestFn<'f, 'ctx> = dyn FnMut(&[IntValue<'ctx>], Vec<Val<'ctx>>) -> R<Vec<Val<'ctx>>> + 'f;

/// Loops over `dims` threading `accs` through `body(coordinates, accs)`; the first dimension
/// over `first` when given instead of all of it.
fn nest_acc<'ctx>(
    cg: &Cg<'ctx>,
    dims: &[i64],
    first: Option<(IntValue<'ctx>, IntValue<'ctx>)>,
    multi: &mut Vec<IntValue<'ctx>>,
    accs: Vec<Val<'ctx>>,
    body: &mut NestFn<'_, 'ctx>,
) -> R<Vec<Val<'ctx>>> {
    let k = multi.len();
    if k == dims.len() {
        return body(multi, accs);
    }
    let (lo, hi) = match first {
        Some(range) if k == 0 => range,
        _ => (cg.c64(0), cg.c64(dims[k])),
    };
    let mut inner = multi.clone();
    cg.for_range_acc(lo, hi, &accs, |i, a| {
        inner.push(i);
        nest_acc(cg, dims, first, &mut inner, a.to_vec(), body)
    })
}

/// Where a tile reads the kernel: the kernel as it lies (its strides, the strip's first
/// output feature added), or a strip's packed slice.
struct KernelView<'ctx> {
    ptr: PointerValue<'ctx>,
    st_sp: Vec<i64>,
    st_in: i64,
    packed: bool,
    /// For a packed block, the first coordinate (in the kernel's own order) of the first
    /// spatial dimension it holds.
    base0: Option<IntValue<'ctx>>,
}

/// One block of the kernel a strip-major item runs: the tile loops' coordinates `k0..k1` of
/// the first kernel spatial dimension, whether it is the item's first and last block, and the
/// accumulators kept between blocks (none with one block).
#[derive(Clone, Copy)]
struct Block<'ctx> {
    range: Option<(IntValue<'ctx>, IntValue<'ctx>)>,
    first: IntValue<'ctx>,
    last: IntValue<'ctx>,
    partial: Option<PointerValue<'ctx>>,
}

/// Emits the tiled convolution into the current kernel function: work items `start..end`,
/// each tile stored to `out`, or with `finish` handed as it is to that register epilogue
/// ([`RegFn`], `f32` and `f64` only). `pack` is the scratch of [`ConvFast::scratch_bytes`]
/// (required with [`ConvFast::strip_major`]). `finish.as_deref_mut()` reborrows the
/// epilogue for each tile the loops emit (clippy takes it for a no-op).
#[allow(clippy::too_many_arguments, clippy::needless_option_as_deref)]
pub(crate) fn emit_conv<'ctx>(
    cg: &Cg<'ctx>,
    geo: &ConvFast,
    input: PointerValue<'ctx>,
    kernel: PointerValue<'ctx>,
    out: PointerValue<'ctx>,
    pack: Option<PointerValue<'ctx>>,
    start: IntValue<'ctx>,
    end: IntValue<'ctx>,
    mut finish: Option<&mut RegFn<'_, 'ctx>>,
) -> R<()> {
    if finish.is_some() && !matches!(geo.ty, ElementType::F32 | ElementType::F64) {
        return Err("a register epilogue of a narrow-float convolution".into());
    }
    let bb = &cg.b;
    if let Some(lib) = &geo.library {
        if finish.is_some() {
            return Err("a register epilogue of a convolution on the precompiled kernel".into());
        }
        return emit_library(cg, lib, [input, kernel, out], start, end);
    }
    cg.for_range(start, end, |t| {
        if !geo.strip_major {
            let view = KernelView {
                ptr: kernel,
                st_sp: geo.k_st_sp.clone(),
                st_in: geo.k_st_in,
                packed: false,
                base0: None,
            };
            let strips = (cg.c64(0), cg.c64(geo.strips()));
            return pixel_tile(
                cg,
                geo,
                t,
                strips,
                &view,
                None,
                input,
                out,
                finish.as_deref_mut(),
            );
        }
        let pack = pack.ok_or("a strip-major convolution without its scratch")?;
        let chunks = cg.c64(geo.chunks);
        let s = bb.build_int_signed_div(t, chunks, "strip")?;
        let j = bb.build_int_signed_rem(t, chunks, "chunk")?;
        let item_bytes = geo.block_bytes() + geo.partial_bytes();
        let base = cg.gep(
            cg.i8().into(),
            pack,
            bb.build_int_nsw_mul(t, cg.c64(item_bytes), "item")?,
        )?;
        let partial_base = cg.gep(cg.i8().into(), base, cg.c64(geo.block_bytes()))?;
        let mut st_sp = vec![0; geo.k_sp.len()];
        let mut st = geo.c * geo.nr();
        for d in (0..geo.k_sp.len()).rev() {
            st_sp[d] = st;
            st *= geo.k_sp[d];
        }
        let per = geo.tiles_per_chunk();
        let t0 = bb.build_int_nsw_mul(j, cg.c64(per), "t0")?;
        let t1 = min64(
            cg,
            bb.build_int_nsw_add(t0, cg.c64(per), "t1")?,
            cg.c64(geo.pixel_tiles()),
        )?;
        let strips = (s, bb.build_int_nsw_add(s, cg.c64(1), "s1")?);
        let nb = geo.k_blocks();
        let rows = geo.block_rows();
        cg.for_range(cg.c64(0), cg.c64(nb), |kb| {
            // The block's coordinates of the first kernel spatial dimension, as the tiles
            // loop over them and in the kernel's own order (reversed with a reversal).
            let range = match geo.k_sp.first() {
                Some(&k0) => {
                    let lo = bb.build_int_nsw_mul(kb, cg.c64(rows), "k0")?;
                    let hi = min64(
                        cg,
                        bb.build_int_nsw_add(lo, cg.c64(rows), "k1")?,
                        cg.c64(k0),
                    )?;
                    Some((lo, hi))
                }
                None => None,
            };
            let kq = match range {
                Some((lo, hi)) if geo.window[0].reversal => Some((
                    bb.build_int_nsw_sub(cg.c64(geo.k_sp[0]), hi, "q0")?,
                    bb.build_int_nsw_sub(cg.c64(geo.k_sp[0]), lo, "q1")?,
                )),
                r => r,
            };
            pack_slice(cg, geo, kernel, base, s, kq)?;
            let view = KernelView {
                ptr: base,
                st_sp: st_sp.clone(),
                st_in: geo.nr(),
                packed: true,
                base0: kq.map(|(q0, _)| q0),
            };
            let block = Block {
                range,
                first: bb.build_int_compare(IntPredicate::EQ, kb, cg.c64(0), "first")?,
                last: bb.build_int_compare(IntPredicate::EQ, kb, cg.c64(nb - 1), "last")?,
                partial: (nb > 1).then_some(partial_base),
            };
            cg.for_range(t0, t1, |pt| {
                // This tile's accumulators in the item's partial sums.
                let block = match block.partial {
                    Some(pb) => {
                        let k = bb.build_int_nsw_sub(pt, t0, "tk")?;
                        let off = bb.build_int_nsw_mul(k, cg.c64(MR * geo.nr()), "toff")?;
                        Block {
                            partial: Some(cg.gep(cg.reg_ty(geo.ty)?, pb, off)?),
                            ..block
                        }
                    }
                    None => block,
                };
                pixel_tile(
                    cg,
                    geo,
                    pt,
                    strips,
                    &view,
                    Some(&block),
                    input,
                    out,
                    finish.as_deref_mut(),
                )
            })
        })
    })
}

/// Pixel tile `t` (`MR` output pixels, fewer at the end), strips `strips` of output features.
#[allow(clippy::too_many_arguments)]
fn pixel_tile<'ctx>(
    cg: &Cg<'ctx>,
    geo: &ConvFast,
    t: IntValue<'ctx>,
    strips: (IntValue<'ctx>, IntValue<'ctx>),
    view: &KernelView<'ctx>,
    block: Option<&Block<'ctx>>,
    input: PointerValue<'ctx>,
    out: PointerValue<'ctx>,
    mut finish: Option<&mut RegFn<'_, 'ctx>>,
) -> R<()> {
    let bb = &cg.b;
    let p_total = geo.order_len();
    let p0 = bb.build_int_nsw_mul(t, cg.c64(MR), "p0")?;
    let full = bb.build_int_compare(
        IntPredicate::SLE,
        bb.build_int_nsw_add(p0, cg.c64(MR), "pe")?,
        cg.c64(p_total),
        "full",
    )?;
    let tb = cg.block("conv.full")?;
    let rb = cg.block("conv.rest")?;
    let done = cg.block("conv.done")?;
    bb.build_conditional_branch(full, tb, rb)?;
    bb.position_at_end(tb);
    tile(
        cg,
        geo,
        MR,
        p0,
        strips,
        view,
        block,
        input,
        out,
        finish.as_deref_mut(),
    )?;
    bb.build_unconditional_branch(done)?;
    bb.position_at_end(rb);
    let pend = min64(
        cg,
        bb.build_int_nsw_add(p0, cg.c64(MR), "pe")?,
        cg.c64(p_total),
    )?;
    cg.for_range(p0, pend, |p| {
        // A lone pixel's accumulators: its row of the tile's.
        let block = match block {
            Some(b) => Some(match b.partial {
                Some(pb) => {
                    let r = bb.build_int_nsw_sub(p, p0, "r")?;
                    let off = bb.build_int_nsw_mul(r, cg.c64(geo.nr()), "roff")?;
                    Block {
                        partial: Some(cg.gep(cg.reg_ty(geo.ty)?, pb, off)?),
                        ..*b
                    }
                }
                None => *b,
            }),
            None => None,
        };
        tile(
            cg,
            geo,
            1,
            p,
            strips,
            view,
            block.as_ref(),
            input,
            out,
            finish,
        )
    })?;
    bb.build_unconditional_branch(done)?;
    bb.position_at_end(done);
    Ok(())
}

/// Copies strip `s`'s slice of the kernel to `dst`, contiguous: for each kernel position (in
/// the kernel's own order, not reversed; the coordinates `kq` of the first spatial dimension
/// when given) and input feature, the strip's `2 * lanes` output features, zeros past the
/// last.
fn pack_slice<'ctx>(
    cg: &Cg<'ctx>,
    geo: &ConvFast,
    kernel: PointerValue<'ctx>,
    dst: PointerValue<'ctx>,
    s: IntValue<'ctx>,
    kq: Option<(IntValue<'ctx>, IntValue<'ctx>)>,
) -> R<()> {
    let bb = &cg.b;
    let lanes = geo.lanes();
    let nr = geo.nr();
    let mty = cg.mem_ty(geo.ty)?;
    let mvty = mem_vec_ty(cg, geo)?;
    let mload = cg.intrinsic("llvm.masked.load", &[mvty.into(), cg.ptr().into()])?;
    let align = cg.i32().const_int(geo.ty.byte_size() as u64, false);
    let o0 = bb.build_int_nsw_mul(s, cg.c64(nr), "o0")?;
    let masks = strip_masks(cg, geo, o0)?;
    let mzero = mvty.const_zero();
    let mut multi = Vec::new();
    nest_acc(cg, &geo.k_sp, kq, &mut multi, Vec::new(), &mut |kc, _| {
        let mut src = o0;
        let mut pos = cg.c64(0);
        for d in 0..geo.k_sp.len() {
            let t = bb.build_int_nsw_mul(kc[d], cg.c64(geo.k_st_sp[d]), "kt")?;
            src = bb.build_int_nsw_add(src, t, "src")?;
            // Positions from the block's first.
            let q = match kq {
                Some((q0, _)) if d == 0 => bb.build_int_nsw_sub(kc[d], q0, "q")?,
                _ => kc[d],
            };
            pos = bb.build_int_nsw_add(
                bb.build_int_nsw_mul(pos, cg.c64(geo.k_sp[d]), "pos")?,
                q,
                "pos",
            )?;
        }
        let row0 = bb.build_int_nsw_mul(pos, cg.c64(geo.c * nr), "row0")?;
        cg.for_range(cg.c64(0), cg.c64(geo.c), |c| {
            let from = bb.build_int_nsw_add(
                src,
                bb.build_int_nsw_mul(c, cg.c64(geo.k_st_in), "ci")?,
                "from",
            )?;
            let to =
                bb.build_int_nsw_add(row0, bb.build_int_nsw_mul(c, cg.c64(nr), "co")?, "to")?;
            for (h, mask) in masks.iter().enumerate() {
                let off = cg.c64(h as i64 * lanes);
                let q = cg.gep(mty, kernel, bb.build_int_nsw_add(from, off, "q")?)?;
                let v = cg
                    .call(mload, &[bv(q), bv(align), bv(*mask), bv(mzero)])?
                    .ok_or("masked load returned nothing")?;
                let d = cg.gep(mty, dst, bb.build_int_nsw_add(to, off, "d")?)?;
                let st = bb.build_store(d, v)?;
                let _ = st.set_alignment(geo.ty.byte_size() as u32);
            }
            Ok(())
        })?;
        Ok(Vec::new())
    })?;
    Ok(())
}

/// The masks of a strip's two vectors of output features from `o0`: the features that exist.
fn strip_masks<'ctx>(
    cg: &Cg<'ctx>,
    geo: &ConvFast,
    o0: IntValue<'ctx>,
) -> R<[VectorValue<'ctx>; 2]> {
    let w = min64(
        cg,
        cg.b.build_int_nsw_sub(cg.c64(geo.o), o0, "w")?,
        cg.c64(geo.nr()),
    )?;
    col_masks(cg, geo.lanes(), w)
}

/// The in-memory vector type of `lanes` elements of the convolution's type (`i16` lanes for
/// the narrow floats).
fn mem_vec_ty<'ctx>(cg: &Cg<'ctx>, geo: &ConvFast) -> R<VectorType<'ctx>> {
    let lanes = geo.lanes() as u32;
    match cg.mem_ty(geo.ty)? {
        BasicTypeEnum::FloatType(t) => Ok(t.vec_type(lanes)),
        BasicTypeEnum::IntType(t) => Ok(t.vec_type(lanes)),
        _ => Err(format!("no tiled convolution for {:?}", geo.ty).into()),
    }
}

/// The most bytes of zeros a kernel's rows outside the input read from ([`zero_rows`]).
const ZERO_ROWS_MAX: u64 = 64 * 1024;

/// Zeros for a pixel's row of input features where it meets no input element: a pointer to
/// at least `(c - 1) * in_st_feat + 1` zero elements (a private zero-filled global of the
/// module, shared by its kernels by size, never written), or `None` when that is more than
/// [`ZERO_ROWS_MAX`] bytes (such rows then select each term to zero).
fn zero_rows<'ctx>(cg: &Cg<'ctx>, geo: &ConvFast) -> R<Option<PointerValue<'ctx>>> {
    let elems = (geo.c.max(1) - 1) as u64 * geo.in_st_feat.max(0) as u64 + 1;
    let bytes = (elems * geo.ty.byte_size() as u64)
        .next_power_of_two()
        .max(64);
    if bytes > ZERO_ROWS_MAX {
        return Ok(None);
    }
    let name = format!("axle.conv.zeros.{bytes}");
    if let Some(g) = cg.module.get_global(&name) {
        return Ok(Some(g.as_pointer_value()));
    }
    let ty = cg.ctx.i8_type().array_type(bytes as u32);
    let g = cg.module.add_global(ty, None, &name);
    // Zero-filled and writable, so it takes no bytes in the object file.
    g.set_initializer(&ty.const_zero());
    g.set_linkage(inkwell::module::Linkage::Private);
    g.set_alignment(64);
    Ok(Some(g.as_pointer_value()))
}

/// Output pixels `p0 .. p0 + rows`, strips `strips.0 .. strips.1` of output features: stored
/// to `out`, or handed to `finish` (a register epilogue, [`RegFn`]) as they are.
#[allow(clippy::too_many_arguments)]
fn tile<'ctx>(
    cg: &Cg<'ctx>,
    geo: &ConvFast,
    rows: i64,
    p0: IntValue<'ctx>,
    strips: (IntValue<'ctx>, IntValue<'ctx>),
    view: &KernelView<'ctx>,
    block: Option<&Block<'ctx>>,
    input: PointerValue<'ctx>,
    out: PointerValue<'ctx>,
    mut finish: Option<&mut RegFn<'_, 'ctx>>,
) -> R<()> {
    let bb = &cg.b;
    let lanes = geo.lanes();
    let nr = 2 * lanes;
    let ety = cg.reg_ty(geo.ty)?.into_float_type();
    let vty = ety.vec_type(lanes as u32);
    // The in-memory element and vector types: `i16` for the narrow floats.
    let mty = cg.mem_ty(geo.ty)?;
    let mvty = mem_vec_ty(cg, geo)?;
    let fma = cg.intrinsic("llvm.fmuladd", &[vty.into()])?;
    let mload = cg.intrinsic("llvm.masked.load", &[mvty.into(), cg.ptr().into()])?;
    let align = cg.i32().const_int(geo.ty.byte_size() as u64, false);
    let nsp = geo.k_sp.len();
    // Per pixel: input base offset (batch) and output spatial coordinates.
    let mut bases = Vec::with_capacity(rows as usize);
    let mut ocs: Vec<Vec<IntValue>> = Vec::with_capacity(rows as usize);
    // Per pixel: its linear index and whether it exists (a phased order's tile can reach past
    // the end of a dimension).
    let mut pixels = Vec::with_capacity(rows as usize);
    let mut exist = Vec::with_capacity(rows as usize);
    for r in 0..rows {
        let q = bb.build_int_nsw_add(p0, cg.c64(r), "q")?;
        let (p, multi, exists) = locate(cg, geo, q)?;
        pixels.push(p);
        exist.push(exists);
        let mut base = cg.c64(0);
        let mut oc = vec![cg.c64(0); nsp];
        for (d, role) in geo.pix_role.iter().enumerate() {
            match role {
                Some(s) => oc[*s] = multi[d],
                None => base = bb.build_int_nsw_mul(multi[d], cg.c64(geo.in_st_batch), "b")?,
            }
        }
        bases.push(base);
        ocs.push(oc);
    }
    // Whether every pixel of the tile meets a real input element at every kernel position
    // (checked with a dilated or phased input, never: those take the checked sum).
    let interior = if geo.phased() || geo.window.iter().any(|w| w.lhs_dilate > 1) {
        None
    } else {
        let mut inside = cg.i1().const_all_ones();
        for oc in &ocs {
            for d in 0..nsp {
                let wdim = &geo.window[d];
                let lo = bb.build_int_nsw_sub(
                    bb.build_int_nsw_mul(oc[d], cg.c64(wdim.stride), "lo")?,
                    cg.c64(wdim.pad_lo),
                    "lo",
                )?;
                let reach = (geo.k_sp[d] - 1).max(0) * wdim.rhs_dilate;
                let hi = bb.build_int_nsw_add(lo, cg.c64(reach), "hi")?;
                let ge = bb.build_int_compare(IntPredicate::SGE, lo, cg.c64(0), "ge")?;
                let lt = bb.build_int_compare(IntPredicate::SLT, hi, cg.c64(geo.in_sp[d]), "lt")?;
                inside = bb.build_and(inside, bb.build_and(ge, lt, "in")?, "inside")?;
            }
        }
        Some(inside)
    };
    let zrows = zero_rows(cg, geo)?;
    let whole_strips = geo.o % nr == 0;
    cg.for_range(strips.0, strips.1, |s| {
        let o0 = bb.build_int_nsw_mul(s, cg.c64(nr), "o0")?;
        let masks = strip_masks(cg, geo, o0)?;
        let zero = vty.const_zero();
        let mzero = mvty.const_zero();
        // The accumulators: zero, or where the item's previous block of the kernel left them
        // (read once the block's own sum is done, so they are not live during it).
        let init = || -> R<Vec<Val<'ctx>>> {
            let mut init: Vec<Val> = Vec::with_capacity(2 * rows as usize);
            for r in 0..rows {
                for h in 0..2 {
                    init.push(match block.and_then(|b| b.partial.map(|p| (b, p))) {
                        Some((b, p)) => {
                            let q =
                                cg.gep(vty.get_element_type(), p, cg.c64(r * nr + h * lanes))?;
                            let v = bb.build_load(vty, q, "part")?;
                            if let Some(i) = v.as_instruction_value() {
                                let _ = i.set_alignment(ety.get_bit_width() / 8);
                            }
                            bb.build_select(b.first, zero, v.into_vector_value(), "init")?
                        }
                        None => bv(zero),
                    });
                }
            }
            Ok(init)
        };
        let range = block.and_then(|b| b.range);
        let zeros: Vec<Val> = vec![bv(zero); 2 * rows as usize];
        // The block's sum: with `clean`, as emitted for a tile whose pixels all lie inside the
        // input at every kernel position (no padding checks), else with them.
        let sum_block = |clean: bool| -> R<Vec<Val<'ctx>>> {
            // A kernel position's terms added to `acc`, or with `None` summed from zero.
            let mut position = |kc: &[IntValue<'ctx>],
                                acc: Option<Vec<Val<'ctx>>>|
             -> R<Vec<Val<'ctx>>> {
                // Each pixel's validity at this kernel position (none checked when `clean`:
                // every term is a real element) and the row its terms are read through: where
                // the pixel meets no input element, the zero rows ([`zero_rows`]) when the
                // kernel has them (no check per term), else offset 0 of the input with every
                // term selected to zero (`sel`).
                let mut rows_at: Vec<PointerValue<'ctx>> = Vec::with_capacity(rows as usize);
                let mut oks: Vec<IntValue<'ctx>> = Vec::with_capacity(rows as usize);
                let mut sel: Vec<Option<IntValue<'ctx>>> = Vec::with_capacity(rows as usize);
                for r in 0..rows as usize {
                    let mut ok = exist[r];
                    let mut off = bases[r];
                    for d in 0..nsp {
                        let wdim = &geo.window[d];
                        let p = bb.build_int_nsw_mul(ocs[r][d], cg.c64(wdim.stride), "p")?;
                        let p = bb.build_int_nsw_sub(p, cg.c64(wdim.pad_lo), "p")?;
                        let kk = bb.build_int_nsw_mul(kc[d], cg.c64(wdim.rhs_dilate), "kk")?;
                        let mut p = bb.build_int_nsw_add(p, kk, "p")?;
                        if clean {
                            let t = bb.build_int_nsw_mul(p, cg.c64(geo.in_st_sp[d]), "t")?;
                            off = bb.build_int_nsw_add(off, t, "off")?;
                            continue;
                        }
                        if wdim.lhs_dilate > 1 {
                            // A position of the dilated input: a real element only where it is a
                            // multiple of the dilation (`p` is checked non-negative below).
                            let dil = cg.c64(wdim.lhs_dilate);
                            let rem = bb.build_int_signed_rem(p, dil, "rem")?;
                            let on =
                                bb.build_int_compare(IntPredicate::EQ, rem, cg.c64(0), "on")?;
                            ok = bb.build_and(ok, on, "ok")?;
                            p = bb.build_int_signed_div(p, dil, "pd")?;
                        }
                        let ge = bb.build_int_compare(IntPredicate::SGE, p, cg.c64(0), "ge")?;
                        let lt =
                            bb.build_int_compare(IntPredicate::SLT, p, cg.c64(geo.in_sp[d]), "lt")?;
                        ok = bb.build_and(ok, bb.build_and(ge, lt, "in")?, "ok")?;
                        let t = bb.build_int_nsw_mul(p, cg.c64(geo.in_st_sp[d]), "t")?;
                        off = bb.build_int_nsw_add(off, t, "off")?;
                    }
                    if clean {
                        rows_at.push(cg.gep(mty, input, off)?);
                        sel.push(None);
                    } else if let Some(z) = zrows {
                        let at = cg.gep(mty, input, off)?;
                        rows_at.push(bb.build_select(ok, at, z, "row")?.into_pointer_value());
                        sel.push(None);
                    } else {
                        let off = bb.build_select(ok, off, cg.c64(0), "off")?.into_int_value();
                        rows_at.push(cg.gep(mty, input, off)?);
                        sel.push(Some(ok));
                    }
                    oks.push(ok);
                }
                let mut koff = if view.packed { cg.c64(0) } else { o0 };
                for d in 0..nsp {
                    let kq = if geo.window[d].reversal {
                        bb.build_int_nsw_sub(cg.c64(geo.k_sp[d] - 1), kc[d], "kr")?
                    } else {
                        kc[d]
                    };
                    let kq = match view.base0 {
                        Some(q0) if d == 0 => bb.build_int_nsw_sub(kq, q0, "kb")?,
                        _ => kq,
                    };
                    let t = bb.build_int_nsw_mul(kq, cg.c64(view.st_sp[d]), "kt")?;
                    koff = bb.build_int_nsw_add(koff, t, "ko")?;
                }
                // With a dilated input, a kernel position often meets no real element in any row
                // of the tile: its input features are skipped (all their terms are zero).
                let c_end = if geo.window.iter().any(|w| w.lhs_dilate > 1) {
                    let mut any = cg.i1().const_zero();
                    for ok in &oks {
                        any = bb.build_or(any, *ok, "any")?;
                    }
                    bb.build_select(any, cg.c64(geo.c), cg.c64(0), "cend")?
                        .into_int_value()
                } else {
                    cg.c64(geo.c)
                };
                // One input feature's terms added to `acc`.
                let step = |c: IntValue<'ctx>, acc: &[Val<'ctx>]| -> R<Vec<Val<'ctx>>> {
                    let kc_off = bb.build_int_nsw_add(
                        koff,
                        bb.build_int_nsw_mul(c, cg.c64(view.st_in), "kc")?,
                        "k",
                    )?;
                    let mut kv: Vec<VectorValue> = Vec::with_capacity(2);
                    for (h, mask) in masks.iter().enumerate() {
                        let q = cg.gep(
                            mty,
                            view.ptr,
                            bb.build_int_nsw_add(kc_off, cg.c64(h as i64 * lanes), "q")?,
                        )?;
                        // Every strip is whole when the strip width divides the features:
                        // plain loads (masks would take registers the tile needs).
                        let v = if whole_strips {
                            let v = bb.build_load(mvty, q, "kv")?;
                            if let Some(i) = v.as_instruction_value() {
                                let _ = i.set_alignment(geo.ty.byte_size() as u32);
                            }
                            v
                        } else {
                            cg.call(mload, &[bv(q), bv(align), bv(*mask), bv(mzero)])?
                                .ok_or("masked load returned nothing")?
                        };
                        kv.push(widen(cg, geo.ty, v.into_vector_value(), lanes)?);
                    }
                    let cterm = bb.build_int_nsw_mul(c, cg.c64(geo.in_st_feat), "ct")?;
                    let mut next = Vec::with_capacity(acc.len());
                    for r in 0..rows as usize {
                        let q = cg.gep(mty, rows_at[r], cterm)?;
                        let a = bb.build_load(mty, q, "a")?;
                        if let Some(i) = a.as_instruction_value() {
                            let _ = i.set_alignment(geo.ty.byte_size() as u32);
                        }
                        let a = cg.load_form(geo.ty, a)?.into_float_value();
                        let a = match sel[r] {
                            Some(ok) => bb
                                .build_select(ok, a, ety.const_zero(), "a")?
                                .into_float_value(),
                            None => a,
                        };
                        let sa = splat_float(cg, a, lanes)?;
                        for h in 0..2 {
                            let x = cg
                                .call(fma, &[bv(sa), bv(kv[h]), acc[2 * r + h]])?
                                .ok_or("fmuladd returned nothing")?;
                            next.push(x);
                        }
                    }
                    Ok(next)
                };
                // Features `c0..c1` added to `from`: a loop, or straight code for a whole
                // position of at most [`STRAIGHT_C`] features (the same order).
                let run = |c0: IntValue<'ctx>, c1: IntValue<'ctx>, from: &[Val<'ctx>]| {
                    let whole = c0.get_zero_extended_constant() == Some(0)
                        && c1.get_zero_extended_constant() == Some(geo.c as u64);
                    if whole && geo.c <= STRAIGHT_C {
                        let mut acc = from.to_vec();
                        for c in 0..geo.c {
                            acc = step(cg.c64(c), &acc)?;
                        }
                        return Ok(acc);
                    }
                    cg.for_range_acc(c0, c1, from, |c, acc| step(c, acc))
                };
                if geo.c <= SUB_C {
                    return run(cg.c64(0), c_end, acc.as_deref().unwrap_or(&zeros));
                }
                // The position's input features in runs of `SUB_C`, each summed from zero and
                // added to the position's sum, which is added to `acc`.
                let runs = ceil_div64(cg, c_end, SUB_C)?;
                let sum = cg.for_range_acc(cg.c64(0), runs, &zeros, |i, sum| {
                    let c0 = bb.build_int_nsw_mul(i, cg.c64(SUB_C), "c0")?;
                    let c1 = min64(cg, bb.build_int_nsw_add(c0, cg.c64(SUB_C), "c1")?, c_end)?;
                    let part = run(c0, c1, &zeros)?;
                    add_vecs(cg, sum, &part)
                })?;
                match acc {
                    Some(acc) => add_vecs(cg, &acc, &sum),
                    None => Ok(sum),
                }
            };
            // The kernel positions of this block (all of them without blocks), in the loops'
            // order, as one linear range summed as the tree of [`SumTree`].
            let (lo, hi) = match (range, geo.k_sp.first()) {
                (Some(r), _) => r,
                (None, Some(&k0)) => (cg.c64(0), cg.c64(k0)),
                (None, None) => (cg.c64(0), cg.c64(1)),
            };
            let inner = cg.c64(geo.inner_positions());
            let q_lo = bb.build_int_nsw_mul(lo, inner, "qlo")?;
            let q_hi = bb.build_int_nsw_mul(hi, inner, "qhi")?;
            let plan = geo.sum_tree();
            let blocked = block.is_some_and(|b| b.partial.is_some());
            if blocked {
                // The block's sum from zero, added to what the item's earlier blocks left.
                let part = sum_positions(
                    cg,
                    &plan,
                    plan.levels,
                    (q_lo, q_hi),
                    None,
                    &zeros,
                    &mut position,
                )?;
                add_vecs(cg, &init()?, &part)
            } else {
                let from = Some(init()?);
                sum_positions(
                    cg,
                    &plan,
                    plan.levels,
                    (q_lo, q_hi),
                    from,
                    &zeros,
                    &mut position,
                )
            }
        };
        // A tile inside the input takes the clean sum; the same terms in the same order.
        let accs = match interior {
            Some(inside) => {
                let cb = cg.block("conv.inside")?;
                let eb = cg.block("conv.edge")?;
                let jb = cg.block("conv.summed")?;
                bb.build_conditional_branch(inside, cb, eb)?;
                bb.position_at_end(cb);
                let clean = sum_block(true)?;
                let cend = cg.cur_block()?;
                bb.build_unconditional_branch(jb)?;
                bb.position_at_end(eb);
                let edge = sum_block(false)?;
                let eend = cg.cur_block()?;
                bb.build_unconditional_branch(jb)?;
                bb.position_at_end(jb);
                let mut accs = Vec::with_capacity(clean.len());
                for (a, b) in clean.iter().zip(&edge) {
                    let phi = bb.build_phi(a.get_type(), "acc")?;
                    phi.add_incoming(&[(a, cend), (b, eend)]);
                    accs.push(phi.as_basic_value());
                }
                accs
            }
            None => sum_block(false)?,
        };
        // Between blocks of the kernel, the accumulators wait in the item's partial sums.
        let kept = block.and_then(|b| b.partial.map(|p| (b.last, p)));
        let Some((last, partial)) = kept else {
            return end_tile(
                cg,
                geo,
                rows,
                o0,
                &masks,
                &exist,
                &pixels,
                accs,
                out,
                finish.as_deref_mut(),
            );
        };
        let lastb = cg.block("conv.last")?;
        let moreb = cg.block("conv.more")?;
        let doneb = cg.block("conv.kept")?;
        bb.build_conditional_branch(last, lastb, moreb)?;
        bb.position_at_end(moreb);
        for (k, a) in accs.iter().enumerate() {
            let q = cg.gep(vty.get_element_type(), partial, cg.c64(k as i64 * lanes))?;
            let st = bb.build_store(q, *a)?;
            let _ = st.set_alignment(ety.get_bit_width() / 8);
        }
        bb.build_unconditional_branch(doneb)?;
        bb.position_at_end(lastb);
        end_tile(
            cg, geo, rows, o0, &masks, &exist, &pixels, accs, out, finish,
        )?;
        bb.build_unconditional_branch(doneb)?;
        bb.position_at_end(doneb);
        Ok(())
    })
}

/// A tile's results: its accumulators stored to `out` (rounded to a narrow type), or handed
/// to `finish`.
#[allow(clippy::too_many_arguments)]
fn end_tile<'ctx>(
    cg: &Cg<'ctx>,
    geo: &ConvFast,
    rows: i64,
    o0: IntValue<'ctx>,
    masks: &[VectorValue<'ctx>],
    exist: &[IntValue<'ctx>],
    pixels: &[IntValue<'ctx>],
    accs: Vec<Val<'ctx>>,
    out: PointerValue<'ctx>,
    finish: Option<&mut RegFn<'_, 'ctx>>,
) -> R<()> {
    let bb = &cg.b;
    let lanes = geo.lanes();
    let mty = cg.mem_ty(geo.ty)?;
    let mvty = mem_vec_ty(cg, geo)?;
    let mstore = cg.intrinsic("llvm.masked.store", &[mvty.into(), cg.ptr().into()])?;
    let align = cg.i32().const_int(geo.ty.byte_size() as u64, false);
    // Per pixel, the masks of its two vectors: none where the pixel does not exist.
    let mut row_masks = Vec::with_capacity(rows as usize);
    for e in exist {
        let mut m2 = [masks[0], masks[1]];
        if geo.phased() {
            let none = masks[0].get_type().const_zero();
            for m in &mut m2 {
                *m = bb.build_select(*e, *m, none, "rm")?.into_vector_value();
            }
        }
        row_masks.push(m2);
    }
    if let Some(finish) = finish {
        return finish(&RegTile {
            accs,
            lanes,
            masks: row_masks,
            col_masks: [masks[0], masks[1]],
            rows: pixels.to_vec(),
            col0: o0,
        });
    }
    for r in 0..rows {
        let p = pixels[r as usize];
        let off = bb.build_int_nsw_add(bb.build_int_nsw_mul(p, cg.c64(geo.o), "po")?, o0, "oo")?;
        for (h, mask) in row_masks[r as usize].iter().enumerate() {
            let q = cg.gep(
                mty,
                out,
                bb.build_int_nsw_add(off, cg.c64(h as i64 * lanes), "q")?,
            )?;
            let v = narrow(
                cg,
                geo.ty,
                accs[(2 * r) as usize + h].into_vector_value(),
                lanes,
            )?;
            cg.call(mstore, &[bv(v), bv(q), bv(align), bv(*mask)])?;
        }
    }
    Ok(())
}

/// A vector of `f16`/`bf16` bits as loaded from memory, widened to `f32` lanes (exact); other
/// types are already in register form.
fn widen<'ctx>(
    cg: &Cg<'ctx>,
    ty: ElementType,
    v: VectorValue<'ctx>,
    lanes: i64,
) -> R<VectorValue<'ctx>> {
    let b = &cg.b;
    let f32v = cg.f32().vec_type(lanes as u32);
    Ok(match ty {
        ElementType::BF16 => {
            let w = b.build_int_z_extend(v, cg.i32().vec_type(lanes as u32), "bfw")?;
            let w = b.build_left_shift(w, splat_int(cg, cg.c32(16), lanes)?, "bfs")?;
            b.build_bit_cast(w, f32v, "bf2f")?.into_vector_value()
        }
        ElementType::F16 => {
            let h = b
                .build_bit_cast(v, cg.ctx.f16_type().vec_type(lanes as u32), "h")?
                .into_vector_value();
            b.build_float_ext(h, f32v, "h2f")?
        }
        _ => v,
    })
}

/// The inverse of [`widen`]: `f32` lanes rounded to nearest even as `f16`/`bf16` bits, lane by
/// lane the same as [`Cg::to_mem`] (a NaN stays a quiet NaN with its sign).
fn narrow<'ctx>(
    cg: &Cg<'ctx>,
    ty: ElementType,
    v: VectorValue<'ctx>,
    lanes: i64,
) -> R<VectorValue<'ctx>> {
    let b = &cg.b;
    let i16v = cg.ctx.i16_type().vec_type(lanes as u32);
    Ok(match ty {
        ElementType::BF16 => {
            let c = |x: i64| splat_int(cg, cg.c32(x), lanes);
            let bits = b
                .build_bit_cast(v, cg.i32().vec_type(lanes as u32), "fb")?
                .into_vector_value();
            let hi = b.build_right_shift(bits, c(16)?, false, "hi")?;
            let lsb = b.build_and(hi, c(1)?, "lsb")?;
            let bias = b.build_int_add(lsb, c(0x7fff)?, "bias")?;
            let r = b.build_right_shift(b.build_int_add(bits, bias, "r")?, c(16)?, false, "r")?;
            let qnan = b.build_or(hi, c(0x40)?, "qnan")?;
            let isnan = b.build_float_compare(inkwell::FloatPredicate::UNO, v, v, "isnan")?;
            let out = b.build_select(isnan, qnan, r, "bf")?.into_vector_value();
            b.build_int_truncate(out, i16v, "bf16")?
        }
        ElementType::F16 => {
            let h = b.build_float_trunc(v, cg.ctx.f16_type().vec_type(lanes as u32), "f2h")?;
            b.build_bit_cast(h, i16v, "hb")?.into_vector_value()
        }
        _ => v,
    })
}
