//! A blocked GEMM for floating-point dots, emitted as an LLVM loop nest.
//!
//! `dot` with at most one free dimension per side and at most one contracting dimension (any
//! number of batch dimensions, any operand layout) is `C[b] = A[b] @ B[b]` with `A` and `B`
//! read through strides and `C` row-major. Operands may be `f32`, `f64`, `bf16` or `f16`; they
//! are widened to the accumulation type (`f64` when any side is `f64`, else `f32`, the
//! evaluator's rule) while they are packed, so the register tile only ever sees that type.
//!
//! Inside a fusion an operand may be a chain of views of a buffer (the dot's prologue, which
//! the `fusion` pass places there for the cpu target): transposes (a permutation of the
//! strides), reshapes that split or merge dimensions of one run of memory, slices (an offset
//! and, when strided, larger strides), broadcasts (stride 0 on the new dimensions), row-major
//! bitcasts and copies ([`operand_view`]). The GEMM then reads the chain's base buffer through
//! the composed strides and offset, as it reads any operand, without materializing the view;
//! a chain that is no strided view is left to the fusion planner to stage. Reading through a
//! view gives exactly the elements a materialized copy would hold, and the accumulation order
//! below does not depend on strides, so results are bit-identical to the unfolded path.
//!
//! Work items are rectangles of `C` (a batch, a range of row strips, a range of column
//! strips), chosen at compile time so that there are a few per thread, balanced to one strip,
//! and so that the operand bytes packed over all items (`A` once per column block, `B` once per
//! row block) are smallest. Each item walks `K` in blocks of `KC`: it packs its `KC x cols`
//! panel of `B` into `NR`-wide column strips (zero-padded; a transposed `B` is read column by
//! column, so it costs no separate transpose), then for each block of at most `MC` of its rows
//! packs that `MC x KC` block of `A` into `MR`-row strips, and runs the `MR x NR` register tile
//! over every (strip of `B`, strip of `A`) pair: `MR` broadcasts of `A` and two vector loads of
//! the packed `B` feed `2 * MR` fused multiply-adds per step of `k`. `KC` keeps a strip of `B`
//! in L1 and `MC` a block of `A` in L2 (both from the host's cache sizes); `MR` and `NR` use 16
//! of the 32 vector registers of AVX-512 for accumulators (the vector width follows the host: 16
//! `f32` lanes with AVX-512, 8 with AVX2, where the tile keeps 2 x 6 accumulators of the 16
//! registers), so that a strip of `A` is small beside the strip of `B`. While a tile computes,
//! the rows of `C` the next tile reads are prefetched into L2.
//! Items only a few strips of `B` wide (attention's `P @ V`) skip packing a row-major `A` of
//! the accumulation type and broadcast its elements from where they lie, `MR` rows at a time.
//!
//! Packing `A` overlaps the multiply-adds where `A` can be read in place (row-major, of the
//! accumulation type, and wide enough to be packed at all): instead of a separate pass, the
//! tiles over the first strip of `B` of each block broadcast their strips of `A` from where
//! they lie and store each element to the packed block as they read it (the load ports have
//! room beside the multiply-adds); the tiles over every later strip read the packed block.
//! The tile is emitted twice for this (reading `A` in place while packing it, and reading
//! the packed block). `B` is packed in one pass before its tiles, not overlapped in the same
//! way: that did not pay (`codegen-cpu/BENCH.md`, "Moved from module headers").
//! Partial column strips are stored with masked stores, rows past the end are masked off.
//!
//! Each output element sums its products in a fixed three-level order, so that no rounding
//! chain is long (a single chain over `K = 25600` was 30 times less accurate than XLA's): in
//! runs of [`SUB_K`] steps of `k` with fused multiply-adds from zero, the runs of a `K` block
//! added in order into the block's totals, and the blocks' totals added in order into `C` (the
//! first stores, each later block loads `C`, adds and stores). With more than [`K_GROUP`]
//! blocks, the blocks are summed in groups of `K_GROUP` in the item's group sums (scratch the
//! size of the item's block of `C`, when `C` has at most [`PSUM_ELEMS`] elements), and the
//! groups' sums added in order into `C`. The order depends on the dot's sizes, `KC` and the
//! constants only, never on the item split or the thread count; results differ from the
//! evaluator's by rounding only. Results narrower than the accumulation type take one `K`
//! block (no partial sums in `C`) and are rounded once when stored.
//!
//! An output fusion may pass an epilogue ([`TileEnd`]) that takes each tile's last `K` block in
//! place of the store to `C` (earlier `K` blocks store and reload partial sums as above): a
//! register epilogue ([`RegFn`]) gets the accumulators as they are, with the tile's masks and
//! coordinates, for results of the accumulation type; a tile epilogue ([`TileFn`], with a
//! buffer of one tile) gets them stored to that buffer, rounded exactly as a store to `C`
//! rounds them. Either writes the tile's final values wherever they belong.

use std::sync::OnceLock;

use axle_ir::{AttrKey, AttrValue, ElementType, InstId, Module, Opcode};
use inkwell::types::{BasicTypeEnum, FloatType, VectorType};
use inkwell::values::{BasicValue, BasicValueEnum, IntValue, PointerValue, VectorValue};
use inkwell::IntPredicate;

use crate::cg::{bv, strides, Cg, Val};
use crate::conv::dot_dims;
use crate::elemental::bitcast_is_reshape;
use crate::error::R;
use crate::runtime::gemm::LibraryGemm;

/// Items with at most this many column strips read a row-major `A` directly
/// ([`GemmGeo::direct_a`]): attention's `P @ V` (8 heads, 64 columns) took 22% less CPU time
/// so than with `A` packed; on wide items (1024 and `256 x 1024 x 1024` matmuls) either way
/// measured the same within noise, and packing stays the default there.
const DIRECT_A_COLS: i64 = 4;

/// Steps of `k` a register tile sums from zero before adding the run to the `K` block's
/// totals ([`Item::tile`]): runs of 32 and blocks of at most `KC = 256` keep each rounding
/// chain at most 32 terms long inside a block (see the module header).
pub(crate) const SUB_K: i64 = 32;

/// `K` blocks whose totals are summed in an item's group sums before the group's sum is added
/// to `C` (see the module header), when there are more blocks than this.
pub(crate) const K_GROUP: i64 = 16;

/// The most elements of a matrix `C` whose items keep group sums (1 MiB of `f32` in all);
/// larger products add every `K` block to `C`.
const PSUM_ELEMS: i64 = 1 << 18;

/// Dots with fewer multiply-adds than this run on one thread.
const SEQUENTIAL_FLOPS: i64 = 1 << 21;

/// The data caches of the host in bytes: (L1d, L2), with defaults when the system does not say.
pub(crate) fn cache_sizes() -> (i64, i64) {
    static SIZES: OnceLock<(i64, i64)> = OnceLock::new();
    *SIZES.get_or_init(|| {
        let mut l1 = 32 << 10;
        let mut l2 = 1 << 20;
        for idx in 0..8 {
            let dir = format!("/sys/devices/system/cpu/cpu0/cache/index{idx}");
            let read = |f: &str| std::fs::read_to_string(format!("{dir}/{f}")).ok();
            let (Some(level), Some(ty), Some(size)) = (read("level"), read("type"), read("size"))
            else {
                continue;
            };
            let Some(bytes) = parse_cache_size(size.trim()) else {
                continue;
            };
            match (level.trim(), ty.trim()) {
                ("1", "Data") => l1 = bytes,
                ("2", "Unified") | ("2", "Data") => l2 = bytes,
                _ => {}
            }
        }
        (l1.clamp(16 << 10, 256 << 10), l2.clamp(128 << 10, 8 << 20))
    })
}

/// A cache size as sysfs writes it (`48K`, `32M`) in bytes.
pub(crate) fn parse_cache_size(size: &str) -> Option<i64> {
    match size.strip_suffix('K') {
        Some(k) => k.parse::<i64>().ok().map(|k| k << 10),
        None => size
            .strip_suffix('M')
            .and_then(|m| m.parse::<i64>().ok().map(|m| m << 20)),
    }
}

/// The geometry of a dot the GEMM handles, with its blocking and work split.
#[derive(Clone, Debug)]
pub(crate) struct GemmGeo {
    /// The result's element type.
    pub out_ty: ElementType,
    /// The operands' element types.
    pub a_ty: ElementType,
    pub b_ty: ElementType,
    /// The accumulation type (`F32` or `F64`).
    pub acc: ElementType,
    /// Sizes of the batch dimensions.
    pub batch: Vec<i64>,
    /// Strides of the batch dimensions in the left and right operands.
    pub lb_st: Vec<i64>,
    pub rb_st: Vec<i64>,
    pub m: i64,
    pub n: i64,
    pub k: i64,
    /// Where `A` and `B` start in their base buffers, in elements (a slice's offset;
    /// [`operand_view`]).
    pub a_off: i64,
    pub b_off: i64,
    /// Strides of `A` along `m` and `k`, of `B` along `k` and `n`.
    pub a_sm: i64,
    pub a_sk: i64,
    pub b_sk: i64,
    pub b_sn: i64,
    /// Vector lanes of the accumulation type.
    pub lanes: i64,
    /// Rows of the register tile.
    pub mr: i64,
    /// Depth of a packed block.
    pub kc: i64,
    /// Rows of a packed block of `A`.
    pub mc: i64,
    /// Columns of a packed panel of `B`.
    pub nc: i64,
    /// Row blocks and column blocks per batch (work items: batches x `rb` x `cb`).
    pub rb: i64,
    pub cb: i64,
    /// Whether the register tile reads `A` where it lies instead of from a packed block: for
    /// row-major `A` of the accumulation type when an item has so few column strips that
    /// packing `A` (once per block, read back once per strip of `B`) costs more than it saves.
    pub direct_a: bool,
    /// Whether a packed block of `A` is filled by the register tiles of its first strip of `B`
    /// instead of by a separate pass ([`ARead::Fill`]): for row-major `A` of the accumulation
    /// type that is packed at all.
    pub fill_a: bool,
    /// Whether the GEMM is a matrix-vector product read where `B` lies, and in which form
    /// ([`crate::gemv`]).
    pub gemv: Option<GemvForm>,
    /// The dot as the runtime's precompiled GEMM runs it ([`GemmGeo::for_library`]), in place
    /// of a generated one: then the work items are its panels ([`item_block`]) and the kernel
    /// needs no packing scratch.
    pub library: Option<LibraryGemm>,
}

/// Where a register tile reads its strip of `A`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum ARead {
    /// From the packed block.
    Packed,
    /// Where `A` lies ([`GemmGeo::direct_a`]).
    Direct,
    /// Where `A` lies, storing each element read to its place in the packed block as well, so
    /// that packing overlaps the first strip of `B`'s multiply-adds and every later strip
    /// reads the block packed ([`GemmGeo::fill_a`]). The block holds exactly what a separate
    /// packing pass writes for the rows that exist (the same values, as `A` has the
    /// accumulation type); rows past the item's end hold its first row, whose results are
    /// masked off as they are for any strip.
    Fill,
}

impl GemmGeo {
    /// Columns of the register tile (two vectors).
    pub fn nr(&self) -> i64 {
        2 * self.lanes
    }
    fn batches(&self) -> i64 {
        self.batch.iter().product()
    }
    fn row_strips(&self) -> i64 {
        (self.m + self.mr - 1) / self.mr
    }
    fn col_strips(&self) -> i64 {
        (self.n + self.nr() - 1) / self.nr()
    }
    /// Work items.
    pub fn items(&self) -> i64 {
        match &self.library {
            Some(g) => g.items(),
            None => self.batches() * self.rb * self.cb,
        }
    }
    /// The smallest group of items worth sending to another thread.
    pub fn grain(&self) -> i64 {
        if self.batches() * self.m * self.n * self.k < SEQUENTIAL_FLOPS {
            self.items()
        } else {
            1
        }
    }
    /// Elements of one item's scratch: a packed `KC x NC` panel of `B`, a packed `MC x KC`
    /// block of `A` and the item's group sums ([`GemmGeo::psum_elems`]), each rounded up to
    /// whole cache lines.
    fn scratch_elems(&self) -> i64 {
        let e = self.kc * self.nc + self.mc * self.kc;
        (e + 15) / 16 * 16 + (self.psum_elems() + 15) / 16 * 16
    }
    /// Columns of an item's group sums: the most columns an item has.
    fn psum_cols(&self) -> i64 {
        (self.col_strips() + self.cb - 1) / self.cb * self.nr()
    }
    /// Elements of an item's group sums, where its `K` blocks are summed in groups of
    /// [`K_GROUP`] (a result of the accumulation type with more than `K_GROUP` blocks, and a
    /// matrix `C` of at most [`PSUM_ELEMS`] elements: a condition on the dot alone, so that
    /// the order never depends on the item split), else 0.
    fn psum_elems(&self) -> i64 {
        let blocks = (self.k + self.kc - 1) / self.kc.max(1);
        let rows = (self.row_strips() + self.rb - 1) / self.rb * self.mr;
        let grouped = self.out_ty == self.acc && blocks > K_GROUP;
        if grouped && self.m.saturating_mul(self.n) <= PSUM_ELEMS {
            rows * self.psum_cols()
        } else {
            0
        }
    }
    /// Scratch bytes: one pair of packed blocks per item (none on the precompiled GEMM, which
    /// packs in its own per-thread memory).
    pub fn scratch_bytes(&self) -> i64 {
        if self.library.is_some() {
            return 0;
        }
        self.items() * self.scratch_elems() * self.acc.byte_size() as i64
    }

    /// This dot on the runtime's precompiled GEMM when the target allows it and the dot is one
    /// the library computes: operands and result of one type (`f32` or `f64`), more than one
    /// row (a single row stays a generated matrix-vector product) and at least three products
    /// per element (the crate sums two products with two roundings, where XLA and the
    /// evaluator fuse them into one multiply-add). The choice and the
    /// panels depend on the types and sizes only, not on the operands' strides, so the buffer
    /// rules (which see no views) and the emission agree. An output fusion's epilogue then
    /// runs on each finished panel ([`crate::Epilogues::Blocks`]).
    pub fn for_library(mut self, t: &GemmTarget) -> GemmGeo {
        let same = self.a_ty == self.acc && self.b_ty == self.acc && self.out_ty == self.acc;
        if !t.library || !same || self.m < 2 || self.k < 3 {
            return self;
        }
        // Panels along the longer side of `C`: at most LIBRARY_PANELS of them, at least
        // LIBRARY_PANEL_MIN wide (so re-packing the other operand per panel stays small beside
        // the panel's multiply-adds), a multiple of 16.
        let by_rows = self.m > self.n;
        let dim = if by_rows { self.m } else { self.n };
        let panel = ((dim + LIBRARY_PANELS - 1) / LIBRARY_PANELS + 15) / 16 * 16;
        self.library = Some(LibraryGemm {
            f64: self.acc == ElementType::F64,
            m: self.m,
            n: self.n,
            k: self.k,
            a_sm: self.a_sm,
            a_sk: self.a_sk,
            b_sk: self.b_sk,
            b_sn: self.b_sn,
            by_rows,
            panel: panel.max(LIBRARY_PANEL_MIN).min(dim),
            batch: self.batch.clone(),
            lb_st: self.lb_st.clone(),
            rb_st: self.rb_st.clone(),
        });
        self
    }
}

/// The most panels a batch of a dot on the precompiled GEMM is split into.
const LIBRARY_PANELS: i64 = 16;

/// The fewest rows (or columns) of a panel of a dot on the precompiled GEMM.
const LIBRARY_PANEL_MIN: i64 = 64;

/// Whether the GEMM reads and writes this element type.
fn gemm_type(t: ElementType) -> bool {
    matches!(
        t,
        ElementType::F32 | ElementType::F64 | ElementType::BF16 | ElementType::F16
    )
}

/// The vector width of the host in bytes (64 with AVX-512, else 32).
pub(crate) fn vector_bytes(features: &str) -> i64 {
    if features.split(',').any(|f| f == "+avx512f") {
        64
    } else {
        32
    }
}

/// What the GEMM's blocking depends on besides the dot: the target's features (its vector
/// width) and the number of threads that run it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct GemmTarget {
    /// LLVM's feature string of the target (`+avx512f,...`).
    pub features: String,
    /// Threads of the runtime's pool (1 when unknown).
    pub threads: usize,
    /// The smallest output in bytes that kernels write with non-temporal stores
    /// ([`crate::stream`]); `None` where the target cannot (or the options do not let it).
    pub stream_min: Option<i64>,
    /// Where output fusions of a dot apply their epilogue ([`crate::CpuOptions::epilogues`]).
    pub epilogues: crate::Epilogues,
    /// Whether dots may run on the runtime's precompiled GEMM ([`GemmGeo::library`]); only for
    /// the host, in the JIT.
    pub library: bool,
    /// Whether radix sorts run their digit passes in the runtime ([`crate::radix`]); only for
    /// the host, in the JIT.
    pub sort_library: bool,
    /// Whether convolutions may run on the runtime's precompiled convolution
    /// ([`crate::conv_fast::ConvFast::for_target`]); only for the host, in the JIT.
    pub conv_library: bool,
}

/// How the GEMM reads one operand of a dot: `base`'s buffer (row-major, as every buffer is)
/// from element `offset`, with a stride in elements per dimension of the operand.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OperandView {
    /// The instruction whose buffer is read.
    pub base: InstId,
    /// The first element read.
    pub offset: i64,
    /// The operand's strides in `base`'s buffer.
    pub strides: Vec<i64>,
}

/// How the GEMM reads operand `op`: through the chain of views (`transpose`, `reshape` or
/// row-major `bitcast` that splits or merges dimensions compatibly with the strides, `slice`,
/// `broadcast`, `copy`) from the first instruction `in_memory` says is in memory, or `op`'s own
/// buffer when the chain reaches none or a step of it is no stride view (a reshape that mixes
/// strides). A view moves no data, so reading through it gives exactly the elements a
/// materialized copy would hold.
pub(crate) fn operand_view(
    m: &Module,
    op: InstId,
    in_memory: &dyn Fn(InstId) -> bool,
) -> OperandView {
    fn through(m: &Module, x: InstId, in_memory: &dyn Fn(InstId) -> bool) -> Option<OperandView> {
        let a = m.array_shape(x)?;
        if in_memory(x) {
            return Some(OperandView {
                base: x,
                offset: 0,
                strides: strides(&a.dims),
            });
        }
        let op = *m.operands(x).first()?;
        if a.dims.contains(&0) || m.array_shape(op)?.ty != a.ty {
            return None;
        }
        let mut v = match m.opcode(x) {
            Opcode::Transpose
            | Opcode::Reshape
            | Opcode::Slice
            | Opcode::Broadcast
            | Opcode::Copy => through(m, op, in_memory)?,
            Opcode::Bitcast if bitcast_is_reshape(m, x).unwrap_or(false) => {
                through(m, op, in_memory)?
            }
            _ => return None,
        };
        let s = std::mem::take(&mut v.strides);
        v.strides = match m.opcode(x) {
            Opcode::Copy => s,
            Opcode::Transpose => {
                let perm = m.ints_attr(x, &AttrKey::Dimensions)?;
                perm.iter()
                    .map(|&p| s.get(p as usize).copied())
                    .collect::<Option<_>>()?
            }
            Opcode::Broadcast => {
                let bd = m.ints_attr(x, &AttrKey::Dimensions)?;
                let mut out = vec![0; a.rank()];
                for (j, &d) in bd.iter().enumerate() {
                    *out.get_mut(d as usize)? = *s.get(j)?;
                }
                out
            }
            Opcode::Slice => {
                let Some(AttrValue::Slice(sl)) = m.attr(x, &AttrKey::Slice) else {
                    return None;
                };
                let mut out = Vec::with_capacity(sl.len());
                for (d, &[start, _, step]) in sl.iter().enumerate() {
                    v.offset += start * s.get(d)?;
                    out.push(s.get(d)? * step);
                }
                out
            }
            _ => reshape_strides(&m.array_shape(op)?.dims, &s, &a.dims)?,
        };
        Some(v)
    }
    through(m, op, in_memory).unwrap_or_else(|| OperandView {
        base: op,
        offset: 0,
        strides: m
            .array_shape(op)
            .map_or_else(Vec::new, |a| strides(&a.dims)),
    })
}

/// The strides of dimensions `out` of a reshape of an array of dimensions `dims` read with
/// strides `st`, if each group of dimensions the reshape splits or merges is one run of memory
/// (each input dimension of the group `stride = next stride * next size`).
fn reshape_strides(dims: &[i64], st: &[i64], out: &[i64]) -> Option<Vec<i64>> {
    let ins: Vec<(i64, i64)> = dims
        .iter()
        .zip(st)
        .filter(|(&d, _)| d != 1)
        .map(|(&d, &s)| (d, s))
        .collect();
    let mut res = vec![0; out.len()];
    let (mut i, mut j) = (0, 0);
    while j < out.len() {
        if out[j] == 1 {
            j += 1;
            continue;
        }
        let (i0, j0) = (i, j);
        let (mut pi, mut pj) = (ins.get(i)?.0, out[j]);
        i += 1;
        j += 1;
        while pi != pj {
            if pi < pj {
                pi *= ins.get(i)?.0;
                i += 1;
            } else {
                pj *= *out.get(j)?;
                j += 1;
            }
        }
        if (i0..i - 1).any(|t| ins[t].1 != ins[t + 1].1 * ins[t + 1].0) {
            return None;
        }
        let mut stride = ins[i - 1].1;
        for q in (j0..j).rev() {
            res[q] = stride;
            stride *= out[q];
        }
    }
    (i == ins.len()).then_some(res)
}

/// The GEMM geometry of `dot` instruction `id`, if the GEMM handles it, on target `t`, reading
/// its operands from their own buffers.
pub(crate) fn gemm_geo(m: &Module, id: InstId, t: &GemmTarget) -> Option<GemmGeo> {
    Some(gemm_geo_views(m, id, t, &|_| false)?.0)
}

/// The GEMM geometry of `dot` instruction `id` reading each operand through its views from
/// the first instruction `in_memory` says is in memory ([`operand_view`]), with the buffers
/// it reads (left, right).
pub(crate) fn gemm_geo_views(
    m: &Module,
    id: InstId,
    t: &GemmTarget,
    in_memory: &dyn Fn(InstId) -> bool,
) -> Option<(GemmGeo, [InstId; 2])> {
    let (features, threads) = (t.features.as_str(), t.threads);
    let ops = m.operands(id);
    let (l, r) = (m.array_shape(ops[0])?, m.array_shape(ops[1])?);
    let out = m.array_shape(id)?;
    if !gemm_type(out.ty) || !gemm_type(l.ty) || !gemm_type(r.ty) {
        return None;
    }
    let acc = if [out.ty, l.ty, r.ty].contains(&ElementType::F64) {
        ElementType::F64
    } else {
        ElementType::F32
    };
    let dd = dot_dims(m, id, l.rank(), r.rank()).ok()?;
    if dd.lfree.len() > 1 || dd.rfree.len() > 1 || dd.lc.len() > 1 {
        return None;
    }
    let (lv, rv) = (
        operand_view(m, ops[0], in_memory),
        operand_view(m, ops[1], in_memory),
    );
    let (sl, sr) = (&lv.strides, &rv.strides);
    let size = |dims: &[i64], d: Option<&i64>| d.map_or(1, |&d| dims[d as usize]);
    let st = |s: &[i64], d: Option<&i64>| d.map_or(0, |&d| s[d as usize]);
    let esize = acc.byte_size() as i64;
    let lanes = vector_bytes(features) / esize;
    let mut geo = GemmGeo {
        out_ty: out.ty,
        a_ty: l.ty,
        b_ty: r.ty,
        acc,
        batch: dd.lb.iter().map(|&d| l.dims[d as usize]).collect(),
        lb_st: dd.lb.iter().map(|&d| sl[d as usize]).collect(),
        rb_st: dd.rb.iter().map(|&d| sr[d as usize]).collect(),
        a_off: lv.offset,
        b_off: rv.offset,
        m: size(&l.dims, dd.lfree.first()),
        n: size(&r.dims, dd.rfree.first()),
        k: size(&l.dims, dd.lc.first()),
        a_sm: st(sl, dd.lfree.first()),
        a_sk: st(sl, dd.lc.first()),
        b_sk: st(sr, dd.rc.first()),
        b_sn: st(sr, dd.rfree.first()),
        lanes,
        // 8 x 2 accumulators of 32 registers with AVX-512 (16 independent sums cover two FMA
        // pipes of four cycles' latency, and the strip of A beside the strip of B still fits
        // L1: 12 rows took 11-16% more CPU time on 1024 and 2048 matmuls), 6 x 2 of 16 with
        // AVX2.
        mr: if lanes * esize == 64 { 8 } else { 6 },
        kc: 0,
        mc: 0,
        nc: 0,
        rb: 1,
        cb: 1,
        direct_a: false,
        fill_a: false,
        gemv: None,
        library: None,
    };
    if geo.m == 0 || geo.n == 0 || geo.k == 0 || geo.batch.contains(&0) {
        return None;
    }
    let (l1, l2) = cache_sizes();
    let nr = geo.nr();
    // A strip of B (KC x NR) fills L1, up to 256 steps of `k`. On a 32 KiB L1 (AMD Zen 4,
    // AVX-512) this is 256 where two thirds of L1 gave 160, and 256 took 2.5% to 4% less wall
    // time on 1024 and 2048 matmuls and a 256 x 1024 x 1024 MLP with both threads (4
    // alternating rounds, median of 15 runs each): the strip of `A` (8 KiB) streams from L2
    // beside it, and fewer `K` blocks load and store `C` fewer times. On a 48 KiB L1 (the
    // Intel host of earlier measurements) both rules give 256. AVX2 hosts were not measured.
    let kc = (l1 / (nr * esize)).clamp(64, 256) / 16 * 16;
    // Narrow results keep their sums in registers over the whole contraction.
    geo.kc = if out.ty == acc { kc.min(geo.k) } else { geo.k };
    // A block of A (MC x KC) takes half of L2.
    let mc_max = ((l2 / 2 / (geo.kc * esize)) / geo.mr).max(1) * geo.mr;
    split(&mut geo, threads.max(1) as i64);
    let rows = (geo.row_strips() + geo.rb - 1) / geo.rb * geo.mr;
    geo.mc = rows.min(mc_max);
    let cols = (geo.col_strips() + geo.cb - 1) / geo.cb * nr;
    // A panel of B stays within L2 and L3's share of it.
    let nc_max = ((l2 / (geo.kc * esize)) / nr).max(1) * nr;
    geo.nc = cols.min(nc_max.max(4 * nr));
    geo.direct_a = geo.a_sk == 1 && geo.a_ty == acc && cols <= DIRECT_A_COLS * nr;
    geo.fill_a = !geo.direct_a && geo.a_sk == 1 && geo.a_ty == acc;
    // The blocking (and so the scratch the buffer assignment reserves, from the geometry of
    // the operands without their views) stays the GEMM's: the strides that decide the form
    // are the views', which may differ. A matrix-vector product leaves the scratch unused.
    geo.gemv = gemv_form(&geo);
    Some((geo, [lv.base, rv.base]))
}

/// Which of `B`'s dimensions is contiguous in a matrix-vector product ([`crate::gemv`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum GemvForm {
    /// `K` (each output a dot product of contiguous runs).
    Rows,
    /// `N` (outputs side by side in vectors).
    Cols,
}

/// The form a GEMM takes as a matrix-vector product, if it is one: one row of `A`, all of
/// the accumulation type, `B` contiguous along `K` (with `A` contiguous) or along `N`.
fn gemv_form(geo: &GemmGeo) -> Option<GemvForm> {
    if geo.m != 1 || geo.a_ty != geo.acc || geo.b_ty != geo.acc || geo.out_ty != geo.acc {
        return None;
    }
    if geo.b_sk == 1 && geo.a_sk == 1 {
        Some(GemvForm::Rows)
    } else if geo.b_sn == 1 {
        Some(GemvForm::Cols)
    } else {
        None
    }
}

/// Where item `item` of a GEMM starts in its operands and result: `A`'s, `B`'s and `C`'s
/// first elements of its batch (pointers), and `C`'s offset of it (elements).
pub(crate) fn batch_bases<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    a: PointerValue<'ctx>,
    b: PointerValue<'ctx>,
    c: PointerValue<'ctx>,
    bi: IntValue<'ctx>,
) -> R<(
    PointerValue<'ctx>,
    PointerValue<'ctx>,
    PointerValue<'ctx>,
    IntValue<'ctx>,
)> {
    let bb = &cg.b;
    let bidx = delinearize(cg, &geo.batch, bi)?;
    let mut a_off = cg.c64(geo.a_off);
    let mut b_off = cg.c64(geo.b_off);
    for (d, &x) in bidx.iter().enumerate() {
        let t = bb.build_int_nsw_mul(x, cg.c64(geo.lb_st[d]), "t")?;
        a_off = bb.build_int_nsw_add(a_off, t, "ao")?;
        let t = bb.build_int_nsw_mul(x, cg.c64(geo.rb_st[d]), "t")?;
        b_off = bb.build_int_nsw_add(b_off, t, "bo")?;
    }
    let c_off = bb.build_int_nsw_mul(bi, cg.c64(geo.m * geo.n), "co")?;
    let abase = cg.gep(cg.mem_ty(geo.a_ty)?, a, a_off)?;
    let bbase = cg.gep(cg.mem_ty(geo.b_ty)?, b, b_off)?;
    let cbase = cg.gep(cg.mem_ty(geo.out_ty)?, c, c_off)?;
    Ok((abase, bbase, cbase, c_off))
}

/// Chooses row and column blocks per batch: at least two items per thread when there is
/// that much work, a multiple of the thread count where possible, and the fewest operand
/// bytes packed (`A` once per column block, `B` once per row block).
fn split(geo: &mut GemmGeo, threads: i64) {
    let batches = geo.batches();
    let work = batches * geo.m * geo.n * geo.k;
    if threads == 1 || work < SEQUENTIAL_FLOPS {
        return;
    }
    let want = 2 * threads;
    if batches >= want {
        return;
    }
    let per_batch = (want + batches - 1) / batches;
    let (ms, ns) = (geo.row_strips(), geo.col_strips());
    let (a_bytes, b_bytes) = (geo.m * geo.k, geo.k * geo.n);
    let mut best = (i64::MAX, 1, 1);
    for rb in 1..=per_batch.min(ms) {
        for cb in 1..=per_batch.min(ns) {
            let items = batches * rb * cb;
            if rb * cb < per_batch.min(ms * ns) {
                continue;
            }
            // Items that do not divide among the threads leave one idle for a while.
            let rounds = (items + threads - 1) / threads;
            let idle = rounds * threads - items;
            let cost = (a_bytes * cb + b_bytes * rb) * (rounds * threads)
                / (rounds * threads - idle).max(1)
                + idle * (a_bytes + b_bytes) / rounds.max(1);
            if cost < best.0 {
                best = (cost, rb, cb);
            }
        }
    }
    geo.rb = best.1;
    geo.cb = best.2;
}

/// A register tile whose sums are final, handed to a tile epilogue ([`TileFn`]).
pub(crate) struct Tile<'ctx> {
    /// The tile's values in the result type, rounded as they would be stored to `C`: row `r`
    /// at element `r * NR` of the buffer the caller gave [`emit_gemm`].
    pub buf: PointerValue<'ctx>,
    /// The linear offset in `C` (batches included) of the tile's first element; its rows are
    /// `n` elements apart there.
    pub lin: IntValue<'ctx>,
    /// The rows of the tile that exist (1 to `MR`).
    pub rows: IntValue<'ctx>,
    /// The columns of the tile that exist (1 to `NR`).
    pub cols: IntValue<'ctx>,
}

/// What finishes a register tile on its last `K` block in place of storing it to `C`: it
/// must write every element of the tile (`rows x cols`) wherever the result goes.
pub(crate) type TileFn<'f, 'ctx> = dyn FnMut(&Tile<'ctx>) -> R<()> + 'f;

/// A register tile whose sums are final, still in its registers, handed to a register
/// epilogue ([`RegFn`]) by the GEMM or the tiled convolution: rows of two vectors of `lanes`
/// columns each, of a result of the accumulation type (nothing to round).
pub(crate) struct RegTile<'ctx> {
    /// The accumulators: row `r`'s columns `h * lanes ..` at `2 * r + h`.
    pub accs: Vec<BasicValueEnum<'ctx>>,
    /// The values per vector.
    pub lanes: i64,
    /// Per row of the tile, the masks of its two vectors: the columns that exist, all off for
    /// a row that does not.
    pub masks: Vec<[VectorValue<'ctx>; 2]>,
    /// The masks of the columns that exist, whatever the row.
    pub col_masks: [VectorValue<'ctx>; 2],
    /// Per row of the tile, its linear index over the result's dimensions but the last; a row
    /// that does not exist has the index of one that does, so reading it stays in bounds.
    pub rows: Vec<IntValue<'ctx>>,
    /// The tile's first column.
    pub col0: IntValue<'ctx>,
}

/// What finishes a register tile on its last `K` block from its registers, in place of
/// storing it to `C`: it must write every element of the tile that exists (the masks').
pub(crate) type RegFn<'f, 'ctx> = dyn FnMut(&RegTile<'ctx>) -> R<()> + 'f;

/// How a tile's last `K` block ends, when not by a store to `C`.
pub(crate) enum TileEnd<'f, 'ctx> {
    /// Stored to a buffer of one tile (`MR x NR` elements of the result type), then handed to
    /// a tile epilogue.
    Buffer(PointerValue<'ctx>, &'f mut TileFn<'f, 'ctx>),
    /// Handed to a register epilogue as it is.
    Registers(&'f mut RegFn<'f, 'ctx>),
}

/// Emits the GEMM body into the current kernel function: items `start..end`. With `finish`,
/// each tile's last `K` block goes to it ([`TileEnd`]) instead of to `C`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_gemm<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    a: PointerValue<'ctx>,
    b: PointerValue<'ctx>,
    c: PointerValue<'ctx>,
    scratch: PointerValue<'ctx>,
    start: IntValue<'ctx>,
    end: IntValue<'ctx>,
    mut finish: Option<TileEnd<'_, 'ctx>>,
) -> R<()> {
    if matches!(finish, Some(TileEnd::Registers(_))) && geo.out_ty != geo.acc {
        return Err("a register epilogue of a result narrower than the accumulation".into());
    }
    if geo.gemv.is_some() {
        return Err("a matrix-vector product emitted as a GEMM (gemv::emit_dot takes it)".into());
    }
    let ety = cg.reg_ty(geo.acc)?.into_float_type();
    let bb = &cg.b;
    cg.for_range(start, end, |item| {
        let ItemBlock {
            batch: bi,
            i0,
            i1,
            j0,
            j1,
        } = item_block(cg, geo, item)?;
        let (abase, bbase, cbase, c_off) = batch_bases(cg, geo, a, b, c, bi)?;

        let bpack = cg.gep(
            ety.into(),
            scratch,
            bb.build_int_nsw_mul(item, cg.c64(geo.scratch_elems()), "po")?,
        )?;
        let apack = cg.gep(ety.into(), bpack, cg.c64(geo.kc * geo.nc))?;
        let pk = (geo.kc * geo.nc + geo.mc * geo.kc + 15) / 16 * 16;
        let psum = if geo.psum_elems() > 0 {
            Some(cg.gep(ety.into(), bpack, cg.c64(pk))?)
        } else {
            None
        };
        let ctx = Item {
            psum,
            i0,
            j0,
            geo,
            ety,
            abase,
            bbase,
            cbase,
            c_off,
            batch: bi,
            apack,
            bpack,
            i1,
        };
        // Column panels of at most NC (one, unless the item is wider than L2 holds).
        let jcs = bb.build_int_nsw_sub(j1, j0, "cols")?;
        let jcs = bb.build_int_nsw_add(jcs, cg.c64(geo.nc - 1), "jcs")?;
        let jcs = bb.build_int_unsigned_div(jcs, cg.c64(geo.nc), "jcs")?;
        cg.for_range(cg.c64(0), jcs, |jci| {
            let jc =
                bb.build_int_nsw_add(j0, bb.build_int_nsw_mul(jci, cg.c64(geo.nc), "d")?, "jc")?;
            let ncur = min64(cg, bb.build_int_nsw_sub(j1, jc, "nl")?, cg.c64(geo.nc))?;
            let panels = bb.build_int_nsw_add(ncur, cg.c64(geo.nr() - 1), "p")?;
            let panels = bb.build_int_unsigned_div(panels, cg.c64(geo.nr()), "panels")?;
            let pcs = (geo.k + geo.kc - 1) / geo.kc;
            cg.for_range(cg.c64(0), cg.c64(pcs), |pci| {
                let pc = bb.build_int_nsw_mul(pci, cg.c64(geo.kc), "pc")?;
                let kc = min64(
                    cg,
                    bb.build_int_nsw_sub(cg.c64(geo.k), pc, "kl")?,
                    cg.c64(geo.kc),
                )?;
                let first = bb.build_int_compare(IntPredicate::EQ, pci, cg.c64(0), "first")?;
                // Whether this is the last `K` block (known when there is only one).
                let last = (pcs > 1)
                    .then(|| bb.build_int_compare(IntPredicate::EQ, pci, cg.c64(pcs - 1), "last"))
                    .transpose()?;
                ctx.pack_b(cg, pc, kc, jc, ncur, panels)?;
                // Row blocks of at most MC.
                let ics = bb.build_int_nsw_sub(i1, i0, "rows")?;
                let ics = bb.build_int_nsw_add(ics, cg.c64(geo.mc - 1), "ics")?;
                let ics = bb.build_int_unsigned_div(ics, cg.c64(geo.mc), "ics")?;
                cg.for_range(cg.c64(0), ics, |ici| {
                    let ic = bb.build_int_nsw_add(
                        i0,
                        bb.build_int_nsw_mul(ici, cg.c64(geo.mc), "d")?,
                        "ic",
                    )?;
                    let rows = min64(cg, bb.build_int_nsw_sub(i1, ic, "rl")?, cg.c64(geo.mc))?;
                    let strips = bb.build_int_nsw_add(rows, cg.c64(geo.mr - 1), "s")?;
                    let strips = bb.build_int_unsigned_div(strips, cg.c64(geo.mr), "strips")?;
                    let read = if geo.direct_a {
                        ARead::Direct
                    } else if geo.fill_a {
                        ARead::Fill
                    } else {
                        ctx.pack_a(cg, pc, kc, ic, strips)?;
                        ARead::Packed
                    };
                    // Each strip of B stays in L1 while every strip of A runs over it. With
                    // `Fill`, the first strip of B packs the block of A as its tiles read it.
                    let mut strip_of_b = |p, read| {
                        cg.for_range(cg.c64(0), strips, |s| {
                            let blk = (pci, first, last);
                            ctx.tile(cg, s, ic, pc, kc, jc, p, read, blk, finish.as_mut())
                        })
                    };
                    let p0 = match read {
                        ARead::Fill => {
                            strip_of_b(cg.c64(0), ARead::Fill)?;
                            cg.c64(1)
                        }
                        _ => cg.c64(0),
                    };
                    let rest = if read == ARead::Fill {
                        ARead::Packed
                    } else {
                        read
                    };
                    cg.for_range(p0, panels, |p| strip_of_b(p, rest))
                })
            })
        })
    })
}

/// Emits the call of the runtime's precompiled GEMM ([`crate::runtime::gemm::axle_rt_gemm`])
/// on work items `start..end` of dot `g`: `a` and `b` where the operands' views start, `c` the
/// result.
pub(crate) fn emit_library<'ctx>(
    cg: &Cg<'ctx>,
    g: &LibraryGemm,
    a: PointerValue<'ctx>,
    b: PointerValue<'ctx>,
    c: PointerValue<'ctx>,
    start: IntValue<'ctx>,
    end: IntValue<'ctx>,
) -> R<()> {
    let desc = g.encode();
    crate::host::emit_item_call(
        cg,
        "axle_rt_gemm",
        &desc,
        "axle.gemm.desc",
        [a, b, c],
        start,
        end,
    )
}

/// The block of `C` one work item computes: batch `batch`, rows `i0..i1`, columns `j0..j1`.
pub(crate) struct ItemBlock<'ctx> {
    pub batch: IntValue<'ctx>,
    pub i0: IntValue<'ctx>,
    pub i1: IntValue<'ctx>,
    pub j0: IntValue<'ctx>,
    pub j1: IntValue<'ctx>,
}

/// The block of work item `item` (an epilogue applied per item covers exactly this block).
pub(crate) fn item_block<'ctx>(
    cg: &Cg<'ctx>,
    geo: &GemmGeo,
    item: IntValue<'ctx>,
) -> R<ItemBlock<'ctx>> {
    let bb = &cg.b;
    if let Some(lib) = &geo.library {
        // One panel of rows (or columns) of one batch.
        let panels = lib.panels();
        let batch = bb.build_int_unsigned_div(item, cg.c64(panels), "b")?;
        let p = bb.build_int_unsigned_rem(item, cg.c64(panels), "p")?;
        let lo = bb.build_int_nsw_mul(p, cg.c64(lib.panel), "lo")?;
        let dim = if lib.by_rows { geo.m } else { geo.n };
        let hi = bb.build_int_nsw_add(lo, cg.c64(lib.panel), "hi")?;
        let hi = min64(cg, hi, cg.c64(dim))?;
        let (i0, i1, j0, j1) = if lib.by_rows {
            (lo, hi, cg.c64(0), cg.c64(geo.n))
        } else {
            (cg.c64(0), cg.c64(geo.m), lo, hi)
        };
        return Ok(ItemBlock {
            batch,
            i0,
            i1,
            j0,
            j1,
        });
    }
    let (ms, ns) = (geo.row_strips(), geo.col_strips());
    let per_batch = geo.rb * geo.cb;
    let batch = bb.build_int_unsigned_div(item, cg.c64(per_batch), "b")?;
    let within = bb.build_int_unsigned_rem(item, cg.c64(per_batch), "w")?;
    let rblk = bb.build_int_unsigned_div(within, cg.c64(geo.cb), "rblk")?;
    let cblk = bb.build_int_unsigned_rem(within, cg.c64(geo.cb), "cblk")?;
    // Strip ranges, balanced to one strip: block x gets strips [x*S/B, (x+1)*S/B).
    let bound = |blk: IntValue<'ctx>, strips: i64, blocks: i64| -> R<IntValue<'ctx>> {
        let t = bb.build_int_nsw_mul(blk, cg.c64(strips), "t")?;
        Ok(bb.build_int_unsigned_div(t, cg.c64(blocks), "s")?)
    };
    let rs0 = bound(rblk, ms, geo.rb)?;
    let rs1 = bound(bb.build_int_nsw_add(rblk, cg.c64(1), "r1")?, ms, geo.rb)?;
    let cs0 = bound(cblk, ns, geo.cb)?;
    let cs1 = bound(bb.build_int_nsw_add(cblk, cg.c64(1), "c1")?, ns, geo.cb)?;
    let i0 = bb.build_int_nsw_mul(rs0, cg.c64(geo.mr), "i0")?;
    let i1 = min64(
        cg,
        bb.build_int_nsw_mul(rs1, cg.c64(geo.mr), "i1")?,
        cg.c64(geo.m),
    )?;
    let j0 = bb.build_int_nsw_mul(cs0, cg.c64(geo.nr()), "j0")?;
    let j1 = min64(
        cg,
        bb.build_int_nsw_mul(cs1, cg.c64(geo.nr()), "j1")?,
        cg.c64(geo.n),
    )?;
    Ok(ItemBlock {
        batch,
        i0,
        i1,
        j0,
        j1,
    })
}

/// What the loops of one work item share.
struct Item<'g, 'ctx> {
    /// The item's group sums ([`GemmGeo::psum_elems`]), when it has them.
    psum: Option<PointerValue<'ctx>>,
    /// The item's first row and column.
    i0: IntValue<'ctx>,
    j0: IntValue<'ctx>,
    geo: &'g GemmGeo,
    ety: FloatType<'ctx>,
    abase: PointerValue<'ctx>,
    bbase: PointerValue<'ctx>,
    cbase: PointerValue<'ctx>,
    /// The linear offset of `cbase` in `C` (its batch's first element).
    c_off: IntValue<'ctx>,
    /// The item's batch (linear over the batch dimensions).
    batch: IntValue<'ctx>,
    apack: PointerValue<'ctx>,
    bpack: PointerValue<'ctx>,
    /// The end of the item's rows.
    i1: IntValue<'ctx>,
}

impl<'ctx> Item<'_, 'ctx> {
    /// Loads one operand element widened to the accumulation type.
    fn load_acc(
        &self,
        cg: &Cg<'ctx>,
        ty: ElementType,
        base: PointerValue<'ctx>,
        off: IntValue<'ctx>,
    ) -> R<inkwell::values::FloatValue<'ctx>> {
        let v = cg.load(ty, base, off)?.into_float_value();
        if v.get_type() == self.ety {
            return Ok(v);
        }
        Ok(cg.b.build_float_ext(v, self.ety, "wide")?)
    }

    /// A vector of `lanes` consecutive elements of `ty` at `p` (lanes off in `mask` read as
    /// zero), widened to the accumulation type.
    fn load_vec(
        &self,
        cg: &Cg<'ctx>,
        ty: ElementType,
        p: PointerValue<'ctx>,
        mask: Option<VectorValue<'ctx>>,
    ) -> R<VectorValue<'ctx>> {
        let lanes = self.geo.lanes as u32;
        let mty: BasicTypeEnum = cg.mem_ty(ty)?;
        let vty = match mty {
            BasicTypeEnum::FloatType(f) => f.vec_type(lanes),
            BasicTypeEnum::IntType(i) => i.vec_type(lanes),
            _ => return Err("gemm operand of an unexpected type".into()),
        };
        let v = match mask {
            Some(mask) => {
                let f = cg.intrinsic("llvm.masked.load", &[vty.into(), cg.ptr().into()])?;
                let align = cg.i32().const_int(ty.byte_size() as u64, false);
                cg.call(f, &[bv(p), bv(align), bv(mask), bv(vty.const_zero())])?
                    .ok_or("masked load returned nothing")?
                    .into_vector_value()
            }
            None => {
                let l = cg.b.build_load(vty, p, "bv")?;
                if let Some(i) = l.as_instruction_value() {
                    let _ = i.set_alignment(ty.byte_size() as u32);
                }
                l.into_vector_value()
            }
        };
        let wide = self.ety.vec_type(lanes);
        Ok(match ty {
            ElementType::F32 | ElementType::F64 if v.get_type() == wide => v,
            ElementType::F32 => cg.b.build_float_ext(v, wide, "wide")?,
            ElementType::F16 => {
                let h =
                    cg.b.build_bit_cast(v, cg.ctx.f16_type().vec_type(lanes), "h")?;
                cg.b.build_float_ext(h.into_vector_value(), wide, "wide")?
            }
            ElementType::BF16 => {
                // bf16 bits are the high half of the f32 with the same value.
                let i32v = cg.i32().vec_type(lanes);
                let x = cg.b.build_int_z_extend(v, i32v, "x")?;
                let sh = splat_int(cg, cg.c32(16), lanes as i64)?;
                let x = cg.b.build_left_shift(x, sh, "x")?;
                let f = cg.b.build_bit_cast(x, cg.f32().vec_type(lanes), "f")?;
                let f = f.into_vector_value();
                if wide == f.get_type() {
                    f
                } else {
                    cg.b.build_float_ext(f, wide, "wide")?
                }
            }
            _ => return Err("gemm operand of an unexpected type".into()),
        })
    }

    /// Packs `B[pc..pc+kc, jc..jc+ncur]` as `panels` strips of `NR` columns, each `kc x NR`
    /// row-major, zero beyond column `ncur`.
    fn pack_b(
        &self,
        cg: &Cg<'ctx>,
        pc: IntValue<'ctx>,
        kc: IntValue<'ctx>,
        jc: IntValue<'ctx>,
        ncur: IntValue<'ctx>,
        panels: IntValue<'ctx>,
    ) -> R<()> {
        let geo = self.geo;
        let bb = &cg.b;
        let (nr, lanes) = (geo.nr(), geo.lanes);
        let ety = self.ety;
        let vty = ety.vec_type(lanes as u32);
        let mty = cg.mem_ty(geo.b_ty)?;
        let lane_vec = lane_ids(cg, lanes);
        cg.for_range(cg.c64(0), panels, |p| {
            let pbase =
                bb.build_int_nsw_mul(bb.build_int_nsw_mul(p, kc, "pb")?, cg.c64(nr), "pb")?;
            let col0 = bb.build_int_nsw_mul(p, cg.c64(nr), "c0")?;
            // Columns of this strip inside the panel; the rest is zero.
            let w = min64(cg, bb.build_int_nsw_sub(ncur, col0, "w")?, cg.c64(nr))?;
            let gcol0 = bb.build_int_nsw_add(jc, col0, "gc0")?;
            let dst = |kk: IntValue<'ctx>, jj: IntValue<'ctx>| -> R<PointerValue<'ctx>> {
                let d =
                    bb.build_int_nsw_add(pbase, bb.build_int_nsw_mul(kk, cg.c64(nr), "dr")?, "d")?;
                cg.gep(ety.into(), self.bpack, bb.build_int_nsw_add(d, jj, "d")?)
            };
            if geo.b_sn == 1 {
                // Rows of B are contiguous: two (masked) vector loads per row of the strip.
                let full = bb.build_int_compare(IntPredicate::EQ, w, cg.c64(nr), "full")?;
                let mut masks = Vec::with_capacity(2);
                for h in 0..2 {
                    let lim = bb.build_int_nsw_sub(w, cg.c64(h * lanes), "lim")?;
                    let splat = splat_int(cg, lim, lanes)?;
                    masks.push(bb.build_int_compare(IntPredicate::SLT, lane_vec, splat, "mask")?);
                }
                let row = |kk: IntValue<'ctx>, masked: bool| -> R<()> {
                    let kabs = bb.build_int_nsw_add(pc, kk, "k")?;
                    let off = bb.build_int_nsw_add(
                        bb.build_int_nsw_mul(kabs, cg.c64(geo.b_sk), "sr")?,
                        gcol0,
                        "o",
                    )?;
                    for h in 0..2 {
                        let o = bb.build_int_nsw_add(off, cg.c64(h * lanes), "oh")?;
                        let src = cg.gep(mty, self.bbase, o)?;
                        let v =
                            self.load_vec(cg, geo.b_ty, src, masked.then_some(masks[h as usize]))?;
                        let st = bb.build_store(dst(kk, cg.c64(h * lanes))?, v)?;
                        let _ = st.set_alignment(geo.acc.byte_size() as u32);
                    }
                    Ok(())
                };
                cg.if_else_with(
                    &mut (),
                    full,
                    |_| {
                        cg.for_range(cg.c64(0), kc, |kk| row(kk, false))?;
                        Ok(Vec::new())
                    },
                    |_| {
                        cg.for_range(cg.c64(0), kc, |kk| row(kk, true))?;
                        Ok(Vec::new())
                    },
                )?;
                let _ = vty;
                return Ok(());
            }
            let copy = |kk: IntValue<'ctx>, jj: IntValue<'ctx>| -> R<()> {
                let kabs = bb.build_int_nsw_add(pc, kk, "k")?;
                let gcol = bb.build_int_nsw_add(gcol0, jj, "gc")?;
                let off = bb.build_int_nsw_add(
                    bb.build_int_nsw_mul(kabs, cg.c64(geo.b_sk), "sr")?,
                    bb.build_int_nsw_mul(gcol, cg.c64(geo.b_sn), "sc")?,
                    "o",
                )?;
                let v = self.load_acc(cg, geo.b_ty, self.bbase, off)?;
                bb.build_store(dst(kk, jj)?, v)?;
                Ok(())
            };
            if geo.b_sk == 1 {
                // Columns of B are contiguous (a transposed operand): full strips transpose
                // blocks of `lanes x lanes` in registers, the rest is copied column by column.
                let full = bb.build_int_compare(IntPredicate::EQ, w, cg.c64(nr), "full")?;
                let chunks = bb.build_int_unsigned_div(kc, cg.c64(lanes), "chunks")?;
                let kdone = bb.build_int_nsw_mul(chunks, cg.c64(lanes), "kdone")?;
                let kstart = bb
                    .build_select(full, kdone, cg.c64(0), "ks")?
                    .into_int_value();
                cg.if_then(full, || {
                    cg.for_range(cg.c64(0), chunks, |ch| {
                        let kk0 = bb.build_int_nsw_mul(ch, cg.c64(lanes), "kk0")?;
                        let kabs = bb.build_int_nsw_add(pc, kk0, "k")?;
                        for h in 0..2 {
                            let mut rows = Vec::with_capacity(lanes as usize);
                            for j in 0..lanes {
                                let col =
                                    bb.build_int_nsw_add(gcol0, cg.c64(h * lanes + j), "c")?;
                                let off = bb.build_int_nsw_add(
                                    kabs,
                                    bb.build_int_nsw_mul(col, cg.c64(geo.b_sn), "sc")?,
                                    "o",
                                )?;
                                rows.push(self.load_vec(
                                    cg,
                                    geo.b_ty,
                                    cg.gep(mty, self.bbase, off)?,
                                    None,
                                )?);
                            }
                            let cols = transpose(cg, rows)?;
                            for (t, v) in cols.into_iter().enumerate() {
                                let kk = bb.build_int_nsw_add(kk0, cg.c64(t as i64), "kk")?;
                                let st = bb.build_store(dst(kk, cg.c64(h * lanes))?, v)?;
                                let _ = st.set_alignment(geo.acc.byte_size() as u32);
                            }
                        }
                        Ok(())
                    })
                })?;
                cg.for_range(cg.c64(0), w, |jj| {
                    cg.for_range(kstart, kc, |kk| copy(kk, jj))
                })?;
            } else {
                cg.for_range(cg.c64(0), kc, |kk| {
                    cg.for_range(cg.c64(0), w, |jj| copy(kk, jj))
                })?;
            }
            // Zero the columns past the end of a partial strip.
            let partial = bb.build_int_compare(IntPredicate::SLT, w, cg.c64(nr), "partial")?;
            cg.if_then(partial, || {
                cg.for_range(cg.c64(0), kc, |kk| {
                    cg.for_range(w, cg.c64(nr), |jj| {
                        bb.build_store(dst(kk, jj)?, ety.const_zero())?;
                        Ok(())
                    })
                })
            })
        })
    }

    /// Packs rows `ic..` (`strips` strips of `MR`, zero past the item's end) of
    /// `A[.., pc..pc+kc]`, each strip `kc x MR` with the rows innermost.
    fn pack_a(
        &self,
        cg: &Cg<'ctx>,
        pc: IntValue<'ctx>,
        kc: IntValue<'ctx>,
        ic: IntValue<'ctx>,
        strips: IntValue<'ctx>,
    ) -> R<()> {
        let geo = self.geo;
        let bb = &cg.b;
        let mr = geo.mr;
        let ety = self.ety;
        cg.for_range(cg.c64(0), strips, |s| {
            let sbase =
                bb.build_int_nsw_mul(bb.build_int_nsw_mul(s, kc, "sb")?, cg.c64(mr), "sb")?;
            let row0 =
                bb.build_int_nsw_add(ic, bb.build_int_nsw_mul(s, cg.c64(mr), "r0")?, "r0")?;
            // Rows of this strip inside the item; the rest is zero.
            let valid = min64(cg, bb.build_int_nsw_sub(self.i1, row0, "v")?, cg.c64(mr))?;
            let dst = |kk: IntValue<'ctx>, r: IntValue<'ctx>| -> R<PointerValue<'ctx>> {
                let d =
                    bb.build_int_nsw_add(sbase, bb.build_int_nsw_mul(kk, cg.c64(mr), "dk")?, "d")?;
                cg.gep(ety.into(), self.apack, bb.build_int_nsw_add(d, r, "d")?)
            };
            let copy = |kk: IntValue<'ctx>, r: IntValue<'ctx>| -> R<()> {
                let row = bb.build_int_nsw_add(row0, r, "row")?;
                let kabs = bb.build_int_nsw_add(pc, kk, "k")?;
                let off = bb.build_int_nsw_add(
                    bb.build_int_nsw_mul(row, cg.c64(geo.a_sm), "am")?,
                    bb.build_int_nsw_mul(kabs, cg.c64(geo.a_sk), "ak")?,
                    "ao",
                )?;
                let v = self.load_acc(cg, geo.a_ty, self.abase, off)?;
                bb.build_store(dst(kk, r)?, v)?;
                Ok(())
            };
            if geo.a_sk == 1 {
                // Rows of A are contiguous: full strips transpose blocks of `lanes` k values of
                // every row in registers, the rest is copied row by row.
                let full = bb.build_int_compare(IntPredicate::EQ, valid, cg.c64(mr), "full")?;
                let lanes = geo.lanes;
                let chunks = bb.build_int_unsigned_div(kc, cg.c64(lanes), "chunks")?;
                let kdone = bb.build_int_nsw_mul(chunks, cg.c64(lanes), "kdone")?;
                let kstart = bb
                    .build_select(full, kdone, cg.c64(0), "ks")?
                    .into_int_value();
                let mty = cg.mem_ty(geo.a_ty)?;
                let vty = ety.vec_type(lanes as u32);
                let mstore = cg.intrinsic("llvm.masked.store", &[vty.into(), cg.ptr().into()])?;
                let align = cg.i32().const_int(geo.acc.byte_size() as u64, false);
                cg.if_then(full, || {
                    cg.for_range(cg.c64(0), chunks, |ch| {
                        let kk0 = bb.build_int_nsw_mul(ch, cg.c64(lanes), "kk0")?;
                        let kabs = bb.build_int_nsw_add(pc, kk0, "k")?;
                        let mut g0 = 0;
                        while g0 < mr {
                            let g1 = (g0 + lanes).min(mr);
                            let mut rows = Vec::with_capacity(lanes as usize);
                            for r in g0..g0 + lanes {
                                if r >= g1 {
                                    rows.push(vty.const_zero());
                                    continue;
                                }
                                let row = bb.build_int_nsw_add(row0, cg.c64(r), "row")?;
                                let off = bb.build_int_nsw_add(
                                    bb.build_int_nsw_mul(row, cg.c64(geo.a_sm), "am")?,
                                    kabs,
                                    "ao",
                                )?;
                                rows.push(self.load_vec(
                                    cg,
                                    geo.a_ty,
                                    cg.gep(mty, self.abase, off)?,
                                    None,
                                )?);
                            }
                            let ks = transpose(cg, rows)?;
                            let mask: Vec<_> = (0..lanes)
                                .map(|l| cg.i1().const_int((l < g1 - g0) as u64, false))
                                .collect();
                            let mask = VectorType::const_vector(&mask);
                            for (t, v) in ks.into_iter().enumerate() {
                                let kk = bb.build_int_nsw_add(kk0, cg.c64(t as i64), "kk")?;
                                let q = dst(kk, cg.c64(g0))?;
                                cg.call(mstore, &[bv(v), bv(q), bv(align), bv(mask)])?;
                            }
                            g0 = g1;
                        }
                        Ok(())
                    })
                })?;
                cg.for_range(cg.c64(0), valid, |r| {
                    cg.for_range(kstart, kc, |kk| copy(kk, r))
                })?;
            } else {
                cg.for_range(cg.c64(0), kc, |kk| {
                    cg.for_range(cg.c64(0), valid, |r| copy(kk, r))
                })?;
            }
            let partial = bb.build_int_compare(IntPredicate::SLT, valid, cg.c64(mr), "partial")?;
            cg.if_then(partial, || {
                cg.for_range(cg.c64(0), kc, |kk| {
                    cg.for_range(valid, cg.c64(mr), |r| {
                        bb.build_store(dst(kk, r)?, ety.const_zero())?;
                        Ok(())
                    })
                })
            })
        })
    }

    /// The offset `row * stride + col` of row `row0 + r` of the item, or of row `fallback` when
    /// that row is past the item's end, and whether it is inside.
    fn row_offset(
        &self,
        cg: &Cg<'ctx>,
        row0: IntValue<'ctx>,
        r: i64,
        fallback: IntValue<'ctx>,
        stride: i64,
        col: IntValue<'ctx>,
    ) -> R<(IntValue<'ctx>, IntValue<'ctx>)> {
        let bb = &cg.b;
        let row = bb.build_int_nsw_add(row0, cg.c64(r), "row")?;
        let inside = bb.build_int_compare(IntPredicate::SLT, row, self.i1, "in")?;
        let safe = bb
            .build_select(inside, row, fallback, "sr")?
            .into_int_value();
        let off = bb.build_int_nsw_mul(safe, cg.c64(stride), "ro")?;
        Ok((bb.build_int_nsw_add(off, col, "co")?, inside))
    }

    /// One `MR x NR` register tile: rows `ic + s*MR ..` (masked beyond the item's end) and
    /// column strip `p` of the panel at `jc`, for `K` block `pci`; `first` and `last` say
    /// whether the block is the first and the last (`None`: there is only one), where
    /// `finish` takes the tile instead of `C`; `read` says where the strip of `A` comes from.
    #[allow(clippy::too_many_arguments)]
    fn tile(
        &self,
        cg: &Cg<'ctx>,
        s: IntValue<'ctx>,
        ic: IntValue<'ctx>,
        pc: IntValue<'ctx>,
        kc: IntValue<'ctx>,
        jc: IntValue<'ctx>,
        p: IntValue<'ctx>,
        read: ARead,
        (pci, first, last): (IntValue<'ctx>, IntValue<'ctx>, Option<IntValue<'ctx>>),
        finish: Option<&mut TileEnd<'_, 'ctx>>,
    ) -> R<()> {
        let geo = self.geo;
        let bb = &cg.b;
        let (lanes, nr, mr) = (geo.lanes, geo.nr(), geo.mr);
        let ety = self.ety;
        let vty = ety.vec_type(lanes as u32);
        let fma = cg.intrinsic("llvm.fmuladd", &[vty.into()])?;
        let mload = cg.intrinsic("llvm.masked.load", &[vty.into(), cg.ptr().into()])?;
        let mstore = cg.intrinsic("llvm.masked.store", &[vty.into(), cg.ptr().into()])?;
        let align = cg.i32().const_int(geo.acc.byte_size() as u64, false);
        let jr = bb.build_int_nsw_add(jc, bb.build_int_nsw_mul(p, cg.c64(nr), "j")?, "jr")?;
        let w = min64(
            cg,
            bb.build_int_nsw_sub(cg.c64(geo.n), jr, "w")?,
            cg.c64(nr),
        )?;
        let colmask = col_masks(cg, lanes, w)?;
        let row0 = bb.build_int_nsw_add(ic, bb.build_int_nsw_mul(s, cg.c64(mr), "r0")?, "r0")?;
        let none = colmask[0].get_type().const_zero();
        let wide_out = geo.out_ty == geo.acc;
        let out_mty = cg.mem_ty(geo.out_ty)?;
        // Per row: its C offset, whether it exists, and its masks (all off past the end).
        let mut rowsel = Vec::with_capacity(mr as usize);
        for r in 0..mr {
            let (off, inside) = self.row_offset(cg, row0, r, ic, geo.n, jr)?;
            let mut masks = Vec::with_capacity(2);
            for m in &colmask {
                masks.push(bb.build_select(inside, *m, none, "rm")?.into_vector_value());
            }
            rowsel.push((off, inside, masks));
        }
        if wide_out {
            // Prefetch (for writing, into L2) the C rows of the next strip of A while this tile
            // computes: its loads and stores of C then hit L2 instead of waiting on L3 or
            // memory (rows of C are a row stride apart, which the hardware prefetchers miss).
            // Past the item's rows it prefetches its last row again, which is harmless.
            let pf = cg.intrinsic("llvm.prefetch", &[cg.ptr().into()])?;
            let last = bb.build_int_nsw_sub(self.i1, cg.c64(1), "last")?;
            for r in 0..mr {
                let (off, _) = self.row_offset(cg, row0, mr + r, last, geo.n, jr)?;
                for h in 0..2 {
                    let col = min64(
                        cg,
                        cg.c64(h * lanes),
                        bb.build_int_nsw_sub(w, cg.c64(1), "wl")?,
                    )?;
                    let o = bb.build_int_nsw_add(off, col, "o")?;
                    let q = cg.gep(out_mty, self.cbase, o)?;
                    cg.call(pf, &[bv(q), bv(cg.c32(1)), bv(cg.c32(2)), bv(cg.c32(1))])?;
                }
            }
        }
        let zero = vty.const_zero();
        let init: Vec<Val<'ctx>> = (0..2 * mr).map(|_| bv(zero)).collect();
        let pbase = bb.build_int_nsw_mul(bb.build_int_nsw_mul(p, kc, "pb")?, cg.c64(nr), "pb")?;
        let abase = bb.build_int_nsw_mul(bb.build_int_nsw_mul(s, kc, "ab")?, cg.c64(mr), "ab")?;
        // With `A` read directly: the start of each row's `K` block (rows past the item's end
        // read its first row; their results are masked off).
        let mut arows = Vec::new();
        if read != ARead::Packed {
            for r in 0..mr {
                let (off, _) = self.row_offset(cg, row0, r, ic, geo.a_sm, pc)?;
                arows.push(cg.gep(ety.into(), self.abase, off)?);
            }
        }
        // The block's sums start from zero and run in runs of `SUB_K` steps, each run's sums
        // added to the block's totals; the totals are added to `C` after the block.
        let runs = ceil_div64(cg, kc, SUB_K)?;
        let totals = cg.for_range_acc(cg.c64(0), runs, &init, |run, tot| {
            let k0 = bb.build_int_nsw_mul(run, cg.c64(SUB_K), "k0")?;
            let k1 = min64(cg, bb.build_int_nsw_add(k0, cg.c64(SUB_K), "k1")?, kc)?;
            let part = cg.for_range_acc(k0, k1, &init, |kk, acc| {
                let boff =
                    bb.build_int_nsw_add(pbase, bb.build_int_nsw_mul(kk, cg.c64(nr), "bk")?, "bo")?;
                let mut bvs: Vec<VectorValue> = Vec::with_capacity(2);
                for h in 0..2 {
                    let q = cg.gep(
                        ety.into(),
                        self.bpack,
                        bb.build_int_nsw_add(boff, cg.c64(h * lanes), "q")?,
                    )?;
                    let l = bb.build_load(vty, q, "bvec")?;
                    if let Some(i) = l.as_instruction_value() {
                        let _ = i.set_alignment(geo.acc.byte_size() as u32);
                    }
                    bvs.push(l.into_vector_value());
                }
                let aoff =
                    bb.build_int_nsw_add(abase, bb.build_int_nsw_mul(kk, cg.c64(mr), "ak")?, "ao")?;
                let mut out = Vec::with_capacity(acc.len());
                for r in 0..mr {
                    let packed = || {
                        let o = bb.build_int_nsw_add(aoff, cg.c64(r), "ar")?;
                        cg.gep(ety.into(), self.apack, o)
                    };
                    let ap = match read {
                        ARead::Packed => packed()?,
                        ARead::Direct | ARead::Fill => cg.gep(ety.into(), arows[r as usize], kk)?,
                    };
                    let av = bb.build_load(ety, ap, "a")?.into_float_value();
                    if read == ARead::Fill {
                        bb.build_store(packed()?, av)?;
                    }
                    let sa = splat_float(cg, av, lanes)?;
                    for h in 0..2 {
                        let x = cg
                            .call(fma, &[bv(sa), bv(bvs[h]), acc[(2 * r + h as i64) as usize]])?
                            .ok_or("fmuladd returned nothing")?;
                        out.push(x);
                    }
                }
                Ok(out)
            })?;
            let mut out = Vec::with_capacity(tot.len());
            for (t, x) in tot.iter().zip(&part) {
                out.push(bv(bb.build_float_add(
                    t.into_vector_value(),
                    x.into_vector_value(),
                    "tot",
                )?));
            }
            Ok(out)
        })?;
        // Adds to `vals` the tile's values at `base`, each row at its offset in `offs`.
        let plus_mem = |vals: &[Val<'ctx>], base: PointerValue<'ctx>, offs: &[IntValue<'ctx>]| {
            let mut v = Vec::with_capacity(vals.len());
            for (r, (_, _, masks)) in rowsel.iter().enumerate() {
                for (h, mask) in masks.iter().enumerate() {
                    let o = bb.build_int_nsw_add(offs[r], cg.c64(h as i64 * lanes), "o")?;
                    let q = cg.gep(out_mty, base, o)?;
                    let x = cg
                        .call(mload, &[bv(q), bv(align), bv(*mask), bv(zero)])?
                        .ok_or("masked load returned nothing")?;
                    let t = vals[2 * r + h].into_vector_value();
                    v.push(bv(bb.build_float_add(x.into_vector_value(), t, "c")?));
                }
            }
            Ok(v)
        };
        let c_offs: Vec<_> = rowsel.iter().map(|(off, _, _)| *off).collect();
        // The tile's offsets in the item's group sums (`K` blocks in groups; rows past the
        // item's end read its first row, masked off).
        let group = match self.psum {
            Some(psum) if wide_out => {
                let pw = geo.psum_cols();
                let col = bb.build_int_nsw_sub(jr, self.j0, "pj")?;
                let mut offs = Vec::with_capacity(mr as usize);
                for r in 0..mr {
                    let (off, _) = self.row_offset(cg, row0, r, ic, pw, col)?;
                    offs.push(bb.build_int_nsw_sub(
                        off,
                        bb.build_int_nsw_mul(self.i0, cg.c64(pw), "p0")?,
                        "po",
                    )?);
                }
                Some((psum, offs))
            }
            _ => None,
        };
        // With groups: a group's first block starts its group sums, later ones add theirs.
        let totals = match &group {
            Some((psum, offs)) => {
                let g = cg.c64(K_GROUP);
                let pos = bb.build_int_unsigned_rem(pci, g, "gpos")?;
                let gfirst = bb.build_int_compare(IntPredicate::EQ, pos, cg.c64(0), "gfirst")?;
                cg.if_else_with(
                    &mut (),
                    gfirst,
                    |_| Ok(totals.clone()),
                    |_| plus_mem(&totals, *psum, offs),
                )?
            }
            None => totals,
        };
        // A later `K` block (or group) adds its totals to the partial sums the earlier ones
        // left in `C`.
        let c_first = match &group {
            Some(_) => bb.build_int_compare(IntPredicate::ULT, pci, cg.c64(K_GROUP), "cfirst")?,
            None => first,
        };
        let with_c = |totals: Vec<Val<'ctx>>| -> R<Vec<Val<'ctx>>> {
            if !wide_out {
                return Ok(totals);
            }
            cg.if_else_with(
                &mut (),
                c_first,
                |_| Ok(totals.clone()),
                |_| plus_mem(&totals, self.cbase, &c_offs),
            )
        };
        // The tile's end once its sums are final for `C` (or, with groups, for this group):
        // stored to `C`, or to the epilogue after the last block.
        let ending = |accs: Vec<Val<'ctx>>| -> R<()> {
            // Stores the tile at `base`, row `r` at offset `offs[r]`: masked vector stores of a
            // wide result, a narrower one rounded and stored lane by lane.
            let store = |base: PointerValue<'ctx>, offs: &[IntValue<'ctx>]| -> R<()> {
                for (r, (_, inside, masks)) in rowsel.iter().enumerate() {
                    for (h, mask) in masks.iter().enumerate() {
                        let acc = accs[2 * r + h];
                        let o = bb.build_int_nsw_add(offs[r], cg.c64(h as i64 * lanes), "o")?;
                        if wide_out {
                            let q = cg.gep(out_mty, base, o)?;
                            cg.call(mstore, &[acc, bv(q), bv(align), bv(*mask)])?;
                            continue;
                        }
                        // A narrower result: round and store lane by lane.
                        let lim = min64(
                            cg,
                            bb.build_int_nsw_sub(w, cg.c64(h as i64 * lanes), "l")?,
                            cg.c64(lanes),
                        )?;
                        let lim = bb
                            .build_select(*inside, lim, cg.c64(0), "lim")?
                            .into_int_value();
                        let accv = acc.into_vector_value();
                        cg.for_range(cg.c64(0), lim, |j| {
                            let x = bb.build_extract_element(accv, j, "x")?.into_float_value();
                            let x = bb.build_float_trunc(x, cg.f32(), "n")?;
                            cg.store(geo.out_ty, base, bb.build_int_nsw_add(o, j, "oj")?, bv(x))
                        })?;
                    }
                }
                Ok(())
            };
            let Some(finish) = finish else {
                return store(self.cbase, &c_offs);
            };
            // The last `K` block: the epilogue writes the tile out, from a buffer (the tile
            // rounded as `C` would hold it) or from its registers.
            let mut to_epilogue = || -> R<()> {
                match finish {
                    TileEnd::Buffer(buf, finish) => {
                        let offs: Vec<_> = (0..mr).map(|r| cg.c64(r * nr)).collect();
                        store(*buf, &offs)?;
                        let row = bb.build_int_nsw_mul(row0, cg.c64(geo.n), "tr")?;
                        let lin = bb.build_int_nsw_add(self.c_off, row, "tl")?;
                        let lin = bb.build_int_nsw_add(lin, jr, "tl")?;
                        let rows =
                            min64(cg, bb.build_int_nsw_sub(self.i1, row0, "rl")?, cg.c64(mr))?;
                        finish(&Tile {
                            buf: *buf,
                            lin,
                            rows,
                            cols: w,
                        })
                    }
                    TileEnd::Registers(finish) => {
                        let first = bb.build_int_nsw_mul(self.batch, cg.c64(geo.m), "br")?;
                        let mut rows = Vec::with_capacity(mr as usize);
                        for r in 0..mr {
                            let i = bb.build_int_nsw_add(row0, cg.c64(r), "i")?;
                            let i = min64(cg, i, cg.c64(geo.m - 1))?;
                            rows.push(bb.build_int_nsw_add(first, i, "ri")?);
                        }
                        finish(&RegTile {
                            accs: accs.clone(),
                            lanes,
                            masks: rowsel.iter().map(|(_, _, m)| [m[0], m[1]]).collect(),
                            col_masks: [colmask[0], colmask[1]],
                            rows,
                            col0: jr,
                        })
                    }
                }
            };
            match last {
                None => to_epilogue(),
                Some(last) => cg
                    .if_else_with(
                        &mut (),
                        last,
                        |_| to_epilogue().map(|_| Vec::new()),
                        |_| store(self.cbase, &c_offs).map(|_| Vec::new()),
                    )
                    .map(|_| ()),
            }
        };
        let Some((psum, offs)) = group else {
            return ending(with_c(totals)?);
        };
        // With groups: a group's last block (or the item's last) ends the tile with the
        // group's sums; every other block leaves them in the group sums.
        let g = cg.c64(K_GROUP);
        let pos = bb.build_int_unsigned_rem(pci, g, "gpos")?;
        let glast = bb.build_int_compare(IntPredicate::EQ, pos, cg.c64(K_GROUP - 1), "glast")?;
        let glast = bb.build_or(glast, last.unwrap_or(first), "glast")?;
        cg.if_else_with(
            &mut (),
            glast,
            |_| ending(with_c(totals.clone())?).map(|_| Vec::new()),
            |_| {
                for (r, (_, _, masks)) in rowsel.iter().enumerate() {
                    for (h, mask) in masks.iter().enumerate() {
                        let o = bb.build_int_nsw_add(offs[r], cg.c64(h as i64 * lanes), "o")?;
                        let q = cg.gep(out_mty, psum, o)?;
                        cg.call(mstore, &[totals[2 * r + h], bv(q), bv(align), bv(*mask)])?;
                    }
                }
                Ok(Vec::new())
            },
        )
        .map(|_| ())
    }
}

/// Transposes a square block held as `rows` vectors of as many lanes (a power of two): a
/// butterfly of two-source shuffles that swaps the off-diagonal halves of ever smaller blocks.
fn transpose<'ctx>(cg: &Cg<'ctx>, mut rows: Vec<VectorValue<'ctx>>) -> R<Vec<VectorValue<'ctx>>> {
    let n = rows.len();
    let mut b = n / 2;
    while b >= 1 {
        let mask = |f: &dyn Fn(usize) -> usize| {
            let m: Vec<_> = (0..n)
                .map(|c| cg.i32().const_int(f(c) as u64, false))
                .collect();
            VectorType::const_vector(&m)
        };
        let lo = mask(&|c| if c & b == 0 { c } else { n + c - b });
        let hi = mask(&|c| if c & b == 0 { c + b } else { n + c });
        let mut next = rows.clone();
        for i in 0..n {
            if i & b != 0 {
                continue;
            }
            let j = i + b;
            next[i] = cg.b.build_shuffle_vector(rows[i], rows[j], lo, "tlo")?;
            next[j] = cg.b.build_shuffle_vector(rows[i], rows[j], hi, "thi")?;
        }
        rows = next;
        b /= 2;
    }
    Ok(rows)
}

/// The masks of a strip's two vectors of `lanes` columns: the first `w` columns exist.
pub(crate) fn col_masks<'ctx>(
    cg: &Cg<'ctx>,
    lanes: i64,
    w: IntValue<'ctx>,
) -> R<[VectorValue<'ctx>; 2]> {
    let lane_vec = lane_ids(cg, lanes);
    let mask = |v: i64| -> R<VectorValue<'ctx>> {
        let lim = cg.b.build_int_nsw_sub(w, cg.c64(v * lanes), "lim")?;
        let splat = splat_int(cg, lim, lanes)?;
        Ok(cg
            .b
            .build_int_compare(IntPredicate::SLT, lane_vec, splat, "mask")?)
    };
    Ok([mask(0)?, mask(1)?])
}

/// The vector `<0, 1, .., lanes-1>` of `i64`.
fn lane_ids<'ctx>(cg: &Cg<'ctx>, lanes: i64) -> VectorValue<'ctx> {
    let ids: Vec<_> = (0..lanes)
        .map(|i| cg.i64().const_int(i as u64, false))
        .collect();
    VectorType::const_vector(&ids)
}

/// The lane-wise sums `a[i] + b[i]` of two lists of vectors.
pub(crate) fn add_vecs<'ctx>(cg: &Cg<'ctx>, a: &[Val<'ctx>], b: &[Val<'ctx>]) -> R<Vec<Val<'ctx>>> {
    let mut out = Vec::with_capacity(a.len());
    for (x, y) in a.iter().zip(b) {
        let s =
            cg.b.build_float_add(x.into_vector_value(), y.into_vector_value(), "sum")?;
        out.push(bv(s));
    }
    Ok(out)
}

/// `ceil(v / n)` for `v >= 0` and a constant `n > 0`: how many runs of `n` cover `v`.
pub(crate) fn ceil_div64<'ctx>(cg: &Cg<'ctx>, v: IntValue<'ctx>, n: i64) -> R<IntValue<'ctx>> {
    let up = cg.b.build_int_nsw_add(v, cg.c64(n - 1), "up")?;
    Ok(cg.b.build_int_unsigned_div(up, cg.c64(n), "runs")?)
}

pub(crate) fn min64<'ctx>(
    cg: &Cg<'ctx>,
    a: IntValue<'ctx>,
    b: IntValue<'ctx>,
) -> R<IntValue<'ctx>> {
    let lt = cg.b.build_int_compare(IntPredicate::SLT, a, b, "lt")?;
    Ok(cg.b.build_select(lt, a, b, "min")?.into_int_value())
}

pub(crate) fn delinearize<'ctx>(
    cg: &Cg<'ctx>,
    dims: &[i64],
    lin: IntValue<'ctx>,
) -> R<Vec<IntValue<'ctx>>> {
    let st = strides(dims);
    let mut out = Vec::with_capacity(dims.len());
    for d in 0..dims.len() {
        let q = cg.b.build_int_unsigned_div(lin, cg.c64(st[d]), "q")?;
        out.push(if d == 0 {
            q
        } else {
            cg.b.build_int_unsigned_rem(q, cg.c64(dims[d]), "c")?
        });
    }
    Ok(out)
}

pub(crate) fn splat_float<'ctx>(
    cg: &Cg<'ctx>,
    v: inkwell::values::FloatValue<'ctx>,
    lanes: i64,
) -> R<VectorValue<'ctx>> {
    let vty = v.get_type().vec_type(lanes as u32);
    let undef = vty.get_poison();
    let ins = cg.b.build_insert_element(undef, v, cg.c32(0), "ins")?;
    let zeros = VectorType::const_vector(&vec![cg.i32().const_zero(); lanes as usize]);
    Ok(cg.b.build_shuffle_vector(ins, undef, zeros, "splat")?)
}

pub(crate) fn splat_int<'ctx>(
    cg: &Cg<'ctx>,
    v: IntValue<'ctx>,
    lanes: i64,
) -> R<VectorValue<'ctx>> {
    let vty = v.get_type().vec_type(lanes as u32);
    let undef = vty.get_poison();
    let ins = cg.b.build_insert_element(undef, v, cg.c32(0), "ins")?;
    let zeros = VectorType::const_vector(&vec![cg.i32().const_zero(); lanes as usize]);
    Ok(cg.b.build_shuffle_vector(ins, undef, zeros, "splat")?)
}
