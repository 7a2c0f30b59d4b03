//! Sort kernels: `sort` (any rank, along any dimension, any number of operands permuted
//! together, any comparator computation), `topk`, and XLA's `TopK` custom call, as a bitonic
//! sorting network run by one or several consecutive kernels on the same buffers.
//!
//! The sorted dimension has `len` elements; the other dimensions are independent rows. A row
//! is sorted as if padded to `P = len.next_power_of_two()` elements whose missing ones count
//! as larger than any element, by the bitonic network whose every compare-exchange is
//! ascending: stage `s = 2, 4, .., P` first compares position `i` with its mirror in its
//! block of `s` (`i ^ (s - 1)`), then with `i ^ j` for `j = s / 4, .., 1`. A pair's lower
//! position always keeps the smaller element, so the missing elements never move and a pair
//! whose higher position is missing is skipped: the virtual padding is exact.
//!
//! Order: element `b` goes before element `a` when the comparator says `less(b, a)`, or when
//! neither is less than the other and `b` came first in the input (its original position,
//! which travels with it, is lower). For a comparator that is a strict weak order (XLA
//! requires one) that is a strict total order, so the network's result is the stable sort,
//! whether or not `is_stable` is set, and equal to the evaluator's stable merge sort bit for
//! bit. The comparator is generated per pair by the shared elemental layer
//! ([`Gen::apply`]) on the values of every operand (`lhs`, `rhs` per operand). `topk` orders
//! by the total order of its element type (largest or smallest first); the `TopK` custom
//! call by its comparator, given the values (and, for a four-parameter comparator, the `s32`
//! positions); both keep the first `k` of each row, values and `s32` original positions.
//!
//! Kernels ([`SortPass`]): a row is cut into tiles of `T` positions (`T` a power of two, at
//! most 512 and at most `P`, smaller when the values of a tile would not fit
//! [`SHARED_BUDGET`] bytes of shared memory). [`SortPass::Tiles`] gives each tile a block of
//! `max(T / 2, 32)` threads (rounded to warps) that loads it into shared memory (values and
//! original positions), runs every stage up to `T` there with a barrier after each step, and
//! stores it. When `P > T`, each later stage `s` runs its steps with `j >= T` as
//! [`SortPass::Global`] kernels (one thread per pair of every row, on global memory) and its
//! remaining steps as one [`SortPass::Merge`] kernel on tiles again. The first kernel reads
//! the operands; the last stores the results (for top-k, only the first `k` positions, into
//! the `[.., k]` outputs). In between, a sort's values live in its output buffers and the
//! original positions in a scratch buffer of `s32`; a top-k's values and positions both in
//! scratch buffers ([`KernelInfo::scratch`](crate::KernelInfo)). A row that fits one tile
//! is one kernel with no scratch. Values move in their memory form, bit for bit (NaN
//! payloads and the signs of zeros kept, as the evaluator permutes bytes); only the
//! comparator sees register forms.
//!
//! Invariants: every thread of a block reaches every barrier (the step loops have the same
//! trip counts in every thread; threads without a pair do nothing between barriers); within
//! a step each position is read and written by at most one thread; positions at or past
//! `len` are never read or written. Indices are 64-bit; original positions are `s32`, so a
//! sorted dimension longer than `i32::MAX` is refused. A comparator that is not elemental,
//! complex `topk` keys, and rows of more than [`MAX_PADDED`] positions are refused with an
//! error naming the instruction.

use axle_codegen_llvm::cg::{numel, Cg, Val};
use axle_codegen_llvm::elemental::{arr_of, inst_leaves, Gen};
use axle_codegen_llvm::error::{at, Fail, R};
use axle_codegen_llvm::ops;
use axle_ir::{
    ArrayShape, AttrKey, AttrValue, CompId, ComparisonDirection, ComparisonType, ElementType,
    InstId, Module, Opcode,
};
use inkwell::types::BasicTypeEnum;
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::launch::{LaunchPlan, MAX_BLOCK, WARP};
use crate::primitives::{barrier, kernel_name, registers, shared_array};

/// The most positions of a tile sorted in shared memory (two per thread of a full block).
const TILE_MAX: u64 = 2 * MAX_BLOCK;
/// The most bytes of shared memory a tile's values and positions take.
pub const SHARED_BUDGET: u64 = 32 * 1024;
/// The longest padded row (`2^31`): positions are `s32`.
pub const MAX_PADDED: u64 = 1 << 31;

/// How two elements are ordered.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SortOrder {
    /// A comparator computation: `less(lhs, rhs)` on each operand's pair of values (and, with
    /// `positions`, the two original positions as `s32` after them: the `TopK` custom call's
    /// four-parameter form).
    Comparator {
        /// The computation.
        comp: CompId,
        /// Whether it also takes the original positions.
        positions: bool,
    },
    /// `topk`: the element type's total order, largest first when `largest`.
    TotalOrder {
        /// Largest first (else smallest first).
        largest: bool,
    },
}

/// The geometry of a sort, shared by its kernels.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortGeometry {
    /// The `sort`, `topk` or `TopK` custom call.
    pub hero: InstId,
    /// The operands' dimensions.
    pub dims: Vec<i64>,
    /// The sorted dimension's length.
    pub len: u64,
    /// Elements between consecutive positions of a row (the product of the dimensions after
    /// the sorted one).
    pub inner: u64,
    /// Rows (elements / `len`).
    pub rows: u64,
    /// The element types of the sorted values (one per operand; a top-k's one).
    pub keys: Vec<ElementType>,
    /// The order.
    pub order: SortOrder,
    /// For top-k, how many of each row are kept.
    pub k: Option<u64>,
    /// Positions of a tile (a power of two).
    pub tile: u64,
    /// `len` rounded up to a power of two.
    pub padded: u64,
}

/// What one kernel of a sort does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SortPass {
    /// Sorts each tile in shared memory: every stage up to the tile's size.
    Tiles,
    /// One compare-exchange step of stage `stage` at distance `dist` on global memory.
    Global {
        /// The stage's block size.
        stage: u64,
        /// The distance of the pairs (`stage / 2` is the mirror step).
        dist: u64,
    },
    /// The steps of stage `stage` at distances below the tile's size, in shared memory.
    Merge {
        /// The stage's block size.
        stage: u64,
    },
}

/// One kernel of a sort.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SortKernel {
    /// The sort's geometry.
    pub geo: SortGeometry,
    /// What this kernel does.
    pub pass: SortPass,
    /// Whether it is the sort's last kernel (it stores the results).
    pub last: bool,
}

/// The `custom_call_target` of instruction `id`, if any.
pub fn custom_call_target(m: &Module, id: InstId) -> Option<&str> {
    match m.attr(id, &AttrKey::CustomCallTarget) {
        Some(AttrValue::Str(s)) | Some(AttrValue::Raw(s)) | Some(AttrValue::Ident(s)) => {
            Some(s.as_ref())
        }
        _ => None,
    }
}

/// The comparator computation of `sort` or `TopK` custom call `id`, if it has one.
fn comparator(m: &Module, id: InstId) -> Option<CompId> {
    match (m.opcode(id), m.attr(id, &AttrKey::CalledComputations)) {
        (Opcode::CustomCall, Some(AttrValue::Comps(c))) if c.len() == 1 => Some(c[0]),
        _ => m.comp_attr(id, &AttrKey::ToApply),
    }
}

/// Bytes of shared memory one position of a tile takes: each value in its memory form and
/// its `s32` position.
fn position_bytes(keys: &[ElementType]) -> u64 {
    keys.iter().map(|t| t.byte_size() as u64).sum::<u64>() + 4
}

/// The sort geometry of instruction `id` (a `sort`, a `topk` or a `TopK` custom call), or
/// `None` for any other instruction.
pub fn sort_geometry(m: &Module, id: InstId) -> R<Option<SortGeometry>> {
    let fail = |msg: String| at(m, id, Fail::Msg(msg));
    let ops = m.operands(id);
    let first = |what: &str| -> R<&ArrayShape> {
        let o = *ops
            .first()
            .ok_or_else(|| fail(format!("{what} needs an operand")))?;
        arr_of(m, o).map_err(|f| at(m, id, f))
    };
    let (dims, dim, keys, order, k) = match m.opcode(id) {
        Opcode::Sort => {
            let shape = first("sort")?;
            let dims = shape.dims.to_vec();
            let mut keys = Vec::with_capacity(ops.len());
            for &o in ops {
                let a = arr_of(m, o).map_err(|f| at(m, id, f))?;
                if a.dims[..] != dims[..] {
                    return Err(fail("sort operands must have equal dimensions".into()));
                }
                keys.push(a.ty);
            }
            let dim = match m
                .ints_attr(id, &AttrKey::Dimensions)
                .and_then(|d| d.first())
            {
                Some(&d) if d >= 0 && (d as usize) < dims.len() => d as usize,
                _ if dims.is_empty() => 0,
                _ => return Err(fail("sort dimension out of range".into())),
            };
            let comp = comparator(m, id).ok_or_else(|| fail("sort needs to_apply".into()))?;
            if m.params(comp).len() != 2 * ops.len() {
                return Err(fail(format!(
                    "the comparator takes {} parameters, not two per operand",
                    m.params(comp).len()
                )));
            }
            let order = SortOrder::Comparator {
                comp,
                positions: false,
            };
            (dims, dim, keys, order, None)
        }
        Opcode::TopK | Opcode::CustomCall => {
            let custom = m.opcode(id) == Opcode::CustomCall;
            if custom && custom_call_target(m, id) != Some("TopK") {
                return Ok(None);
            }
            let shape = first("top-k")?;
            let dims = shape.dims.to_vec();
            if dims.is_empty() {
                return Err(fail("top-k needs an operand of rank >= 1".into()));
            }
            let leaves = inst_leaves(m, id).map_err(|f| at(m, id, f))?;
            let [vals, idx] = &leaves[..] else {
                return Err(fail("top-k must return (values, indices)".into()));
            };
            if idx.ty != ElementType::S32 || vals.dims != idx.dims {
                return Err(fail(
                    "top-k indices must be s32 of the values' shape".into(),
                ));
            }
            let k = *vals
                .dims
                .last()
                .ok_or_else(|| fail("top-k of rank 0".into()))?;
            if k < 0 || k > dims[dims.len() - 1] {
                return Err(fail("k exceeds the size of the last dimension".into()));
            }
            let order = if custom {
                let comp = comparator(m, id)
                    .ok_or_else(|| fail("the TopK custom call needs a comparator".into()))?;
                let positions = match m.params(comp).len() {
                    2 => false,
                    4 => true,
                    n => {
                        return Err(fail(format!(
                            "the TopK comparator takes {n} parameters, not 2 or 4"
                        )))
                    }
                };
                SortOrder::Comparator { comp, positions }
            } else {
                if shape.ty.is_complex() {
                    return Err(fail(
                        "the nvptx backend does not support topk of complex values".into(),
                    ));
                }
                SortOrder::TotalOrder {
                    largest: m.bool_attr(id, &AttrKey::Largest).unwrap_or(true),
                }
            };
            let dim = dims.len() - 1;
            (dims, dim, vec![shape.ty], order, Some(k as u64))
        }
        _ => return Ok(None),
    };
    let len = dims.get(dim).map_or(1, |&d| d.max(0) as u64);
    let inner = numel(dims.get(dim + 1..).unwrap_or(&[])).max(0) as u64;
    let rows = (numel(&dims).max(0) as u64).checked_div(len).unwrap_or(0);
    let padded = len.max(1).next_power_of_two();
    if padded > MAX_PADDED {
        return Err(fail(format!(
            "the nvptx backend does not support sorting {len} elements per row (positions are s32)"
        )));
    }
    let mut tile = padded.min(TILE_MAX);
    while tile > 2 && tile * position_bytes(&keys) > SHARED_BUDGET {
        tile /= 2;
    }
    Ok(Some(SortGeometry {
        hero: id,
        dims,
        len,
        inner,
        rows,
        keys,
        order,
        k,
        tile,
        padded,
    }))
}

impl SortGeometry {
    /// Whether the sort has nothing to compute (no element, or a top-k keeping none).
    pub fn is_empty(&self) -> bool {
        self.rows == 0 || self.len == 0 || self.k == Some(0)
    }

    /// The kernels, in launch order: none when there is nothing to compute.
    pub fn passes(&self) -> Vec<SortKernel> {
        if self.is_empty() {
            return Vec::new();
        }
        let mut passes = vec![SortPass::Tiles];
        let mut stage = 2 * self.tile;
        while stage <= self.padded {
            let mut dist = stage / 2;
            while dist >= self.tile {
                passes.push(SortPass::Global { stage, dist });
                dist /= 2;
            }
            passes.push(SortPass::Merge { stage });
            stage *= 2;
        }
        let n = passes.len();
        passes
            .into_iter()
            .enumerate()
            .map(|(i, pass)| SortKernel {
                geo: self.clone(),
                pass,
                last: i + 1 == n,
            })
            .collect()
    }

    /// The sizes of the scratch buffers the kernels share: none for one kernel; else the
    /// original positions (`s32`) and, for top-k, the values before them.
    pub fn scratch(&self) -> Vec<u64> {
        if self.is_empty() || self.padded <= self.tile {
            return Vec::new();
        }
        let n = self.rows * self.len;
        let positions = n * 4;
        match self.k {
            Some(_) => vec![n * self.keys[0].byte_size() as u64, positions],
            None => vec![positions],
        }
    }

    /// Threads of a block of a tile kernel.
    fn tile_threads(&self) -> u64 {
        (self.tile / 2).max(1).div_ceil(WARP) * WARP
    }

    /// Tiles of a row.
    fn tiles(&self) -> u64 {
        self.padded.div_ceil(self.tile)
    }
}

impl SortKernel {
    /// The launch plan: a block per tile, or a thread per pair of a global step.
    pub fn launch_plan(&self) -> Result<LaunchPlan, crate::NvptxError> {
        let g = &self.geo;
        let elements = g.rows * g.len;
        match self.pass {
            SortPass::Global { .. } => LaunchPlan::for_elements(g.rows * (g.padded / 2)),
            _ => LaunchPlan::for_blocks(elements, g.rows * g.tiles(), g.tile_threads()),
        }
    }
}

/// The buffers a sort's kernel reads and writes.
pub(crate) struct SortBuffers<'ctx> {
    /// The output leaves.
    pub outs: Vec<PointerValue<'ctx>>,
    /// The scratch buffers ([`SortGeometry::scratch`]).
    pub scratch: Vec<PointerValue<'ctx>>,
}

/// One element of a row: its values in memory form (bit for bit as stored; a complex value
/// as its parts) and its original position (`i32`).
struct Element<'ctx> {
    vals: Vec<Val<'ctx>>,
    pos: IntValue<'ctx>,
}

/// The register forms of element `x`'s values (what the comparator takes).
fn registers_of<'ctx>(cg: &Cg<'ctx>, geo: &SortGeometry, x: &Element<'ctx>) -> R<Vec<Val<'ctx>>> {
    geo.keys
        .iter()
        .zip(&x.vals)
        .map(|(&ty, &v)| cg.load_form(ty, v))
        .collect()
}

/// Where a row's elements are kept between kernels: each value's buffer and the positions'.
struct Work<'ctx> {
    vals: Vec<PointerValue<'ctx>>,
    pos: PointerValue<'ctx>,
}

impl<'ctx> SortBuffers<'ctx> {
    fn work(&self, geo: &SortGeometry) -> R<Work<'ctx>> {
        let missing = || Fail::from("a sort kernel is missing a scratch buffer");
        Ok(match geo.k {
            Some(_) => Work {
                vals: vec![*self.scratch.first().ok_or_else(missing)?],
                pos: *self.scratch.get(1).ok_or_else(missing)?,
            },
            None => Work {
                vals: self.outs.clone(),
                pos: *self.scratch.first().ok_or_else(missing)?,
            },
        })
    }
}

/// Emits the body of sort kernel `k` at the builder's position (the entry block of a kernel
/// whose operands are bound in `g`).
pub(crate) fn emit_sort<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    k: &SortKernel,
    bufs: &SortBuffers<'ctx>,
) -> R<()> {
    match k.pass {
        SortPass::Global { stage, dist } => emit_global(g, k, bufs, stage, dist),
        _ => emit_tiles(g, k, bufs),
    }
}

/// `c` as an `i64` constant.
fn c64<'ctx>(cg: &Cg<'ctx>, c: u64) -> IntValue<'ctx> {
    cg.c64(c as i64)
}

/// The linear offset of position `p` of row `row` in the operands' dimensions.
fn element_offset<'ctx>(
    cg: &Cg<'ctx>,
    geo: &SortGeometry,
    row: IntValue<'ctx>,
    p: IntValue<'ctx>,
) -> R<IntValue<'ctx>> {
    let b = &cg.b;
    let outer = b.build_int_unsigned_div(row, c64(cg, geo.inner), "row.outer")?;
    let q = b.build_int_unsigned_rem(row, c64(cg, geo.inner), "row.inner")?;
    let base = b.build_int_nuw_mul(outer, c64(cg, geo.len * geo.inner), "row.base")?;
    let base = b.build_int_nuw_add(base, q, "row.base")?;
    let at = b.build_int_nuw_mul(p, c64(cg, geo.inner), "pos.at")?;
    Ok(b.build_int_nuw_add(base, at, "elem")?)
}

/// Whether the element of values `x` (register forms) and position `xp` goes before the one
/// of `y` and `yp` by the comparator alone: `less(x, y)`.
fn less<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &SortGeometry,
    (x, xp): (&[Val<'ctx>], IntValue<'ctx>),
    (y, yp): (&[Val<'ctx>], IntValue<'ctx>),
) -> R<IntValue<'ctx>> {
    let cg = g.cg;
    match geo.order {
        SortOrder::TotalOrder { largest } => {
            let dir = if largest {
                ComparisonDirection::Gt
            } else {
                ComparisonDirection::Lt
            };
            let r = ops::compare(cg, dir, ComparisonType::TotalOrder, geo.keys[0], x[0], y[0])?;
            Ok(r.into_int_value())
        }
        SortOrder::Comparator { comp, positions } => {
            let mut args = Vec::with_capacity(2 * x.len() + 2);
            for (a, b) in x.iter().zip(y) {
                args.push(*a);
                args.push(*b);
            }
            if positions {
                args.push(xp.into());
                args.push(yp.into());
            }
            g.push_scope();
            let r = g.apply(comp, &args);
            g.pop_scope();
            let r = r?
                .into_iter()
                .next()
                .ok_or("the comparator returns nothing")?;
            let r = r.into_int_value();
            if r.get_type().get_bit_width() == 1 {
                Ok(r)
            } else {
                let zero = r.get_type().const_zero();
                Ok(cg.b.build_int_compare(IntPredicate::NE, r, zero, "less")?)
            }
        }
    }
}

/// Whether the pair `(a, b)` (`a` at the lower position) must swap: `b` goes before `a`
/// (see the module's header: the comparator, then the original positions).
fn must_swap<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &SortGeometry,
    a: &Element<'ctx>,
    b: &Element<'ctx>,
) -> R<IntValue<'ctx>> {
    let ra = registers_of(g.cg, geo, a)?;
    let rb = registers_of(g.cg, geo, b)?;
    let ba = less(g, geo, (&rb, b.pos), (&ra, a.pos))?;
    let ab = less(g, geo, (&ra, a.pos), (&rb, b.pos))?;
    let bld = &g.cg.b;
    let earlier = bld.build_int_compare(IntPredicate::SLT, b.pos, a.pos, "earlier")?;
    let not_ab = bld.build_not(ab, "not.ab")?;
    let tie = bld.build_and(not_ab, earlier, "tie")?;
    Ok(bld.build_or(ba, tie, "swap")?)
}

/// The positions `(lo, hi)` of pair `i` of a step at distance `2^log` (`dist = 2^log`),
/// mirrored when `mirror` (the first step of a stage of `2 * dist`).
fn pair_positions<'ctx>(
    cg: &Cg<'ctx>,
    i: IntValue<'ctx>,
    log: IntValue<'ctx>,
    mirror: IntValue<'ctx>,
) -> R<(IntValue<'ctx>, IntValue<'ctx>)> {
    let b = &cg.b;
    let one = cg.c64(1);
    let dist = b.build_left_shift(one, log, "dist")?;
    let within = b.build_and(i, b.build_int_sub(dist, one, "mask")?, "within")?;
    let block = b.build_right_shift(i, log, false, "pair.block")?;
    let log1 = b.build_int_nuw_add(log, one, "log1")?;
    let start = b.build_left_shift(block, log1, "pair.start")?;
    let lo = b.build_int_nuw_add(start, within, "lo")?;
    let near = b.build_int_nuw_add(lo, dist, "hi.near")?;
    let two = b.build_left_shift(dist, one, "two.dist")?;
    let end = b.build_int_nuw_add(start, two, "pair.end")?;
    let far = b.build_int_sub(end, one, "pair.last")?;
    let far = b.build_int_sub(far, within, "hi.far")?;
    let hi = b.build_select(mirror, far, near, "hi")?.into_int_value();
    Ok((lo, hi))
}

/// Loads element `e` (a linear offset) from the work buffers.
fn load_work<'ctx>(
    cg: &Cg<'ctx>,
    geo: &SortGeometry,
    w: &Work<'ctx>,
    e: IntValue<'ctx>,
) -> R<Element<'ctx>> {
    let mut vals = Vec::with_capacity(geo.keys.len());
    for (&ty, &p) in geo.keys.iter().zip(&w.vals) {
        vals.push(cg.load_mem(ty, p, e)?);
    }
    let pos = cg.load_mem(ElementType::S32, w.pos, e)?.into_int_value();
    Ok(Element { vals, pos })
}

/// Stores element `x` at `e` (a linear offset) of the work buffers.
fn store_work<'ctx>(
    cg: &Cg<'ctx>,
    geo: &SortGeometry,
    w: &Work<'ctx>,
    e: IntValue<'ctx>,
    x: &Element<'ctx>,
) -> R<()> {
    for ((&ty, &p), &v) in geo.keys.iter().zip(&w.vals).zip(&x.vals) {
        cg.store_mem(ty, p, e, v)?;
    }
    cg.store_mem(ElementType::S32, w.pos, e, x.pos.into())
}

/// A global step: thread `t` compares pair `t % (P / 2)` of row `t / (P / 2)`.
fn emit_global<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    k: &SortKernel,
    bufs: &SortBuffers<'ctx>,
    stage: u64,
    dist: u64,
) -> R<()> {
    let cg = g.cg;
    let geo = &k.geo;
    let w = bufs.work(geo)?;
    let plan = k.launch_plan().map_err(|e| Fail::Msg(e.to_string()))?;
    let t = cg.thread_index(plan.wide_index)?;
    let b = &cg.b;
    let inside = b.build_int_compare(IntPredicate::ULT, t, c64(cg, plan.elements), "inside")?;
    cg.if_then(inside, || {
        let half = c64(cg, geo.padded / 2);
        let row = b.build_int_unsigned_div(t, half, "row")?;
        let i = b.build_int_unsigned_rem(t, half, "pair")?;
        let log = c64(cg, dist.trailing_zeros() as u64);
        let mirror = cg.i1().const_int((dist == stage / 2) as u64, false);
        let (lo, hi) = pair_positions(cg, i, log, mirror)?;
        let real = b.build_int_compare(IntPredicate::ULT, hi, c64(cg, geo.len), "real")?;
        cg.if_then(real, || {
            let elo = element_offset(cg, geo, row, lo)?;
            let ehi = element_offset(cg, geo, row, hi)?;
            let x = load_work(cg, geo, &w, elo)?;
            let y = load_work(cg, geo, &w, ehi)?;
            let swap = must_swap(g, geo, &x, &y)?;
            cg.if_then(swap, || {
                store_work(cg, geo, &w, elo, &y)?;
                store_work(cg, geo, &w, ehi, &x)
            })
        })
    })
}

/// The shared arrays of a tile: one per value and one of positions.
struct Tile<'ctx> {
    vals: Vec<(BasicTypeEnum<'ctx>, PointerValue<'ctx>)>,
    pos: PointerValue<'ctx>,
}

impl<'ctx> Tile<'ctx> {
    fn load(&self, cg: &Cg<'ctx>, q: IntValue<'ctx>) -> R<Element<'ctx>> {
        let mut vals = Vec::with_capacity(self.vals.len());
        for &(ty, arr) in &self.vals {
            vals.push(cg.b.build_load(ty, cg.gep(ty, arr, q)?, "tile.v")?);
        }
        let i32t = cg.i32();
        let pos =
            cg.b.build_load(i32t, cg.gep(i32t.into(), self.pos, q)?, "tile.pos")?
                .into_int_value();
        Ok(Element { vals, pos })
    }

    fn store(&self, cg: &Cg<'ctx>, q: IntValue<'ctx>, x: &Element<'ctx>) -> R<()> {
        for (&(ty, arr), &v) in self.vals.iter().zip(&x.vals) {
            cg.b.build_store(cg.gep(ty, arr, q)?, v)?;
        }
        cg.b.build_store(cg.gep(cg.i32().into(), self.pos, q)?, x.pos)?;
        Ok(())
    }
}

/// A tile kernel ([`SortPass::Tiles`] or [`SortPass::Merge`]): block `b` takes tile
/// `b % tiles` of row `b / tiles`.
fn emit_tiles<'ctx>(g: &mut Gen<'_, 'ctx>, k: &SortKernel, bufs: &SortBuffers<'ctx>) -> R<()> {
    let cg = g.cg;
    let m = g.m;
    let geo = &k.geo;
    let b = &cg.b;
    let name = kernel_name(cg)?;
    let (tid, bid) = registers(cg)?;
    let tiles = c64(cg, geo.tiles());
    let row = b.build_int_unsigned_div(bid, tiles, "row")?;
    let tile_index = b.build_int_unsigned_rem(bid, tiles, "tile")?;
    let tile_base = b.build_int_nuw_mul(tile_index, c64(cg, geo.tile), "tile.base")?;
    let mut vals = Vec::with_capacity(geo.keys.len());
    for (n, &ty) in geo.keys.iter().enumerate() {
        let mty = cg.mem_ty(ty)?;
        let arr = shared_array(cg, mty, geo.tile as u32, &format!("{name}.vals{n}"));
        vals.push((mty, arr));
    }
    let pos = shared_array(cg, cg.i32().into(), geo.tile as u32, &format!("{name}.pos"));
    let tile = Tile { vals, pos };
    let threads = geo.tile_threads();
    let slots = geo.tile.div_ceil(threads);
    let len = c64(cg, geo.len);
    // Calls `f(q, p)` for each position `q` of the tile this thread moves whose row position
    // `p` is an element.
    let each_position = |f: &mut dyn FnMut(IntValue<'ctx>, IntValue<'ctx>) -> R<()>| -> R<()> {
        for s in 0..slots {
            let q = b.build_int_nuw_add(tid, c64(cg, s * threads), "q")?;
            let p = b.build_int_nuw_add(tile_base, q, "p")?;
            let in_tile =
                b.build_int_compare(IntPredicate::ULT, q, c64(cg, geo.tile), "in.tile")?;
            let real = b.build_int_compare(IntPredicate::ULT, p, len, "real")?;
            let ok = b.build_and(in_tile, real, "ok")?;
            cg.if_then(ok, || f(q, p))?;
        }
        Ok(())
    };
    // Load the tile: from the operands (the first kernel) or the work buffers.
    match k.pass {
        SortPass::Tiles => {
            let operands = m.operands(geo.hero).to_vec();
            each_position(&mut |q, p| {
                let e = element_offset(cg, geo, row, p)?;
                g.push_scope();
                // An operand is a buffer (the sort is not fused): its bits are moved as they
                // are; anything else is generated and put in memory form.
                let loaded = (|| -> R<Vec<Val<'ctx>>> {
                    let mut vals = Vec::with_capacity(geo.keys.len());
                    for (&o, &ty) in operands.iter().zip(&geo.keys) {
                        vals.push(match g.bound_ptr(o) {
                            Some(p) => cg.load_mem(ty, p, e)?,
                            None => {
                                let idx = g.index_linear(&geo.dims, e)?;
                                let v = g.gen1(o, &idx)?;
                                cg.to_mem(ty, v)?
                            }
                        });
                    }
                    Ok(vals)
                })();
                g.pop_scope();
                let pos = b.build_int_truncate(p, cg.i32(), "pos")?;
                tile.store(cg, q, &Element { vals: loaded?, pos })
            })?;
        }
        _ => {
            let w = bufs.work(geo)?;
            each_position(&mut |q, p| {
                let e = element_offset(cg, geo, row, p)?;
                let x = load_work(cg, geo, &w, e)?;
                tile.store(cg, q, &x)
            })?;
        }
    }
    barrier(cg)?;
    // One step: thread `tid` compares pair `tid` of the tile.
    let log_tile = geo.tile.trailing_zeros() as i64;
    let step = |g: &mut Gen<'_, 'ctx>, log: IntValue<'ctx>, mirror: IntValue<'ctx>| -> R<()> {
        let has_pair =
            b.build_int_compare(IntPredicate::ULT, tid, c64(cg, geo.tile / 2), "has.pair")?;
        cg.if_then(has_pair, || {
            let (lo, hi) = pair_positions(cg, tid, log, mirror)?;
            let phi = b.build_int_nuw_add(tile_base, hi, "p.hi")?;
            let real = b.build_int_compare(IntPredicate::ULT, phi, len, "real")?;
            cg.if_then(real, || {
                let x = tile.load(cg, lo)?;
                let y = tile.load(cg, hi)?;
                let swap = must_swap(g, geo, &x, &y)?;
                cg.if_then(swap, || {
                    tile.store(cg, lo, &y)?;
                    tile.store(cg, hi, &x)
                })
            })
        })?;
        barrier(cg)
    };
    match k.pass {
        SortPass::Tiles => {
            // Stage 2^(a + 1): the mirror step at distance 2^a, then distances 2^(a - 1)..1.
            cg.for_range(cg.c64(0), cg.c64(log_tile), |a| {
                let trips = b.build_int_nuw_add(a, cg.c64(1), "trips")?;
                cg.for_range(cg.c64(0), trips, |c| {
                    let log = b.build_int_sub(a, c, "log")?;
                    let mirror = b.build_int_compare(IntPredicate::EQ, c, cg.c64(0), "mirror")?;
                    step(g, log, mirror)
                })
            })?;
        }
        _ => {
            // Distances 2^(log_tile - 1)..1 of a stage longer than the tile.
            cg.for_range(cg.c64(0), cg.c64(log_tile), |c| {
                let log = b.build_int_sub(cg.c64(log_tile - 1), c, "log")?;
                step(g, log, cg.i1().const_zero())
            })?;
        }
    }
    // Store the tile: to the results (the last kernel) or the work buffers.
    if !k.last {
        let w = bufs.work(geo)?;
        return each_position(&mut |q, p| {
            let e = element_offset(cg, geo, row, p)?;
            store_work(cg, geo, &w, e, &tile.load(cg, q)?)
        });
    }
    match geo.k {
        None => each_position(&mut |q, p| {
            let e = element_offset(cg, geo, row, p)?;
            let x = tile.load(cg, q)?;
            for ((&ty, &out), &v) in geo.keys.iter().zip(&bufs.outs).zip(&x.vals) {
                cg.store_mem(ty, out, e, v)?;
            }
            Ok(())
        }),
        Some(keep) => {
            let (Some(&vals_out), Some(&pos_out)) = (bufs.outs.first(), bufs.outs.get(1)) else {
                return Err("a top-k kernel has two outputs".into());
            };
            each_position(&mut |q, p| {
                let kept = b.build_int_compare(IntPredicate::ULT, p, c64(cg, keep), "kept")?;
                cg.if_then(kept, || {
                    let at = b.build_int_nuw_mul(row, c64(cg, keep), "out.row")?;
                    let at = b.build_int_nuw_add(at, p, "out.at")?;
                    let x = tile.load(cg, q)?;
                    cg.store_mem(geo.keys[0], vals_out, at, x.vals[0])?;
                    cg.store_mem(ElementType::S32, pos_out, at, x.pos.into())
                })
            })
        }
    }
}
