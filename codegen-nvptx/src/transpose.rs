//! Transpose kernels: a `transpose` that moves the input's minor dimension (an unfused one, or
//! a fusion's root, its operand computed elementally inside the kernel) through shared memory,
//! in the manner of XLA's GPU transpose emitter (our own tiling), so both the reads and the
//! writes are coalesced where a loop kernel's writes or reads would be strided.
//!
//! Let `a` be the input's minor dimension and `b` the input dimension that becomes the
//! output's minor one (`b != a`); the other dimensions are batch coordinates. A block of 8
//! warps covers a tile of 32 `a` positions by 32 `b` positions of one batch coordinate:
//! reading, lane `l` of warp `w` loads input `(a = 32 ta + l, b = 32 tb + w + 8 r)` for
//! `r = 0..4` (32 consecutive addresses per warp) into `tile[w + 8 r][l]`; after a barrier,
//! it stores output `(b = 32 tb + l, a = 32 ta + w + 8 r)` from `tile[l][w + 8 r]` (32
//! consecutive output addresses per warp). Rows of the tile are 33 wide, so neither phase
//! has shared-memory bank conflicts.
//!
//! Invariants: every thread reaches the barrier; a tile element is written by one thread and
//! read by one thread after the barrier; positions past the edges are neither read nor
//! written; every output element is stored exactly once. Indices are 64-bit.
//!
//! A transpose that keeps the minor dimension (rows moved whole), or whose `a` or `b` has
//! one element, is left to the loop kernels, whose accesses are then already coalesced.

use axle_codegen_llvm::cg::{numel, Val};
use axle_codegen_llvm::elemental::{arr_of, Gen};
use axle_codegen_llvm::error::{at, R};
use axle_ir::{AttrKey, ElementType, InstId, Module, Opcode};
use inkwell::values::PointerValue;
use inkwell::IntPredicate;

use crate::launch::{LaunchPlan, WARP};
use crate::primitives::{barrier, kernel_name, registers, shared_array};
use crate::reduction::REDUCTION_BLOCK;

/// The tile's side.
const TILE: u64 = 32;
/// Rows of the tile each thread moves (`TILE` / warps of a block).
const ROWS_PER_THREAD: u64 = TILE / (REDUCTION_BLOCK / WARP);

/// The geometry of a transpose kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TransposeGeometry {
    /// The `transpose` (an unfused one, or a fusion's root).
    pub hero: InstId,
    /// The input's dimensions.
    pub in_dims: Vec<i64>,
    /// The permutation: output dimension `k` is input dimension `perm[k]`.
    pub perm: Vec<i64>,
}

impl TransposeGeometry {
    /// The input's minor dimension.
    fn a(&self) -> usize {
        self.in_dims.len() - 1
    }

    /// The input dimension that becomes the output's minor one.
    fn b(&self) -> usize {
        self.perm[self.perm.len() - 1] as usize
    }

    /// The batch dimensions (all but `a` and `b`), in input order, and their sizes.
    fn batch_dims(&self) -> (Vec<usize>, Vec<i64>) {
        let (a, b) = (self.a(), self.b());
        let d: Vec<usize> = (0..self.in_dims.len())
            .filter(|&d| d != a && d != b)
            .collect();
        let sizes = d.iter().map(|&d| self.in_dims[d]).collect();
        (d, sizes)
    }

    /// Tiles along `a` and along `b`.
    fn tiles(&self) -> (u64, u64) {
        (
            (self.in_dims[self.a()] as u64).div_ceil(TILE),
            (self.in_dims[self.b()] as u64).div_ceil(TILE),
        )
    }

    /// The launch plan: one block of [`REDUCTION_BLOCK`] threads per tile.
    pub fn launch_plan(&self) -> Result<LaunchPlan, crate::NvptxError> {
        let elements = numel(&self.in_dims).max(0) as u64;
        let (ta, tb) = self.tiles();
        let batch = numel(&self.batch_dims().1).max(0) as u64;
        LaunchPlan::for_blocks(elements, batch * ta * tb, REDUCTION_BLOCK)
    }
}

/// The transpose kernel for instruction `id` (a `transpose`, or a fusion whose root is one),
/// or `None` when a loop kernel serves (see the module's header).
pub fn transpose_geometry(m: &Module, id: InstId) -> R<Option<TransposeGeometry>> {
    let hero = match m.opcode(id) {
        Opcode::Fusion => {
            let c = m
                .comp_attr(id, &AttrKey::Calls)
                .ok_or_else(|| at(m, id, "fusion needs calls".into()))?;
            m.root(c)
        }
        _ => id,
    };
    if m.opcode(hero) != Opcode::Transpose {
        return Ok(None);
    }
    let perm = m
        .ints_attr(hero, &AttrKey::Dimensions)
        .ok_or_else(|| at(m, hero, "transpose needs dimensions".into()))?
        .to_vec();
    let in_dims = arr_of(m, m.operands(hero)[0])
        .map_err(|f| at(m, hero, f))?
        .dims
        .to_vec();
    let n = in_dims.len();
    if n < 2 || perm.len() != n {
        return Ok(None);
    }
    let geo = TransposeGeometry {
        hero,
        in_dims,
        perm,
    };
    let (a, b) = (geo.a(), geo.b());
    if a == b || geo.in_dims[a] <= 1 || geo.in_dims[b] <= 1 {
        return Ok(None);
    }
    Ok(Some(geo))
}

/// Emits the body of a transpose kernel at the builder's position (the entry block of a
/// kernel whose operands are bound in `g`), storing the output at `out`.
pub(crate) fn emit_transpose<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &TransposeGeometry,
    ty: ElementType,
    out: PointerValue<'ctx>,
) -> R<()> {
    let cg = g.cg;
    let b = &cg.b;
    let m = g.m;
    let operand = m.operands(geo.hero)[0];
    let (tid, bid) = registers(cg)?;
    let c = |v: u64| cg.c64(v as i64);
    let lane = b.build_and(tid, c(WARP - 1), "lane")?;
    let warp = b.build_right_shift(tid, c(5), false, "warp")?;
    let (ta, tb) = geo.tiles();
    let tile_a = b.build_int_unsigned_rem(bid, c(ta), "tile.a")?;
    let rest = b.build_int_unsigned_div(bid, c(ta), "tile.rest")?;
    let tile_b = b.build_int_unsigned_rem(rest, c(tb), "tile.b")?;
    let batch = b.build_int_unsigned_div(rest, c(tb), "batch")?;
    let (batch_dims, batch_sizes) = geo.batch_dims();
    let batch_idx = g.index_linear(&batch_sizes, batch)?;
    let (da, db) = (geo.a(), geo.b());
    let size_a = c(geo.in_dims[da] as u64);
    let size_b = c(geo.in_dims[db] as u64);
    let base_a = b.build_int_nuw_mul(tile_a, c(TILE), "base.a")?;
    let base_b = b.build_int_nuw_mul(tile_b, c(TILE), "base.b")?;
    // The input coordinates at (a, b) of this block's batch coordinate.
    let input_multi = |ca, cb| {
        let mut multi = vec![cg.c64(0); geo.in_dims.len()];
        for (k, &d) in batch_dims.iter().enumerate() {
            multi[d] = batch_idx.multi[k];
        }
        multi[da] = ca;
        multi[db] = cb;
        multi
    };
    let reg = cg.reg_ty(ty)?;
    let tile = shared_array(
        cg,
        reg,
        (TILE * (TILE + 1)) as u32,
        &format!("{}.tile", kernel_name(cg)?),
    );
    let slot = |row, col| -> R<PointerValue<'ctx>> {
        let r = b.build_int_nuw_mul(row, c(TILE + 1), "slot.r")?;
        let s = b.build_int_nuw_add(r, col, "slot")?;
        cg.gep(reg, tile, s)
    };
    for r in 0..ROWS_PER_THREAD {
        let row = b.build_int_nuw_add(warp, c(r * (REDUCTION_BLOCK / WARP)), "row")?;
        let ca = b.build_int_nuw_add(base_a, lane, "read.a")?;
        let cb = b.build_int_nuw_add(base_b, row, "read.b")?;
        let ina = b.build_int_compare(IntPredicate::ULT, ca, size_a, "in.a")?;
        let inb = b.build_int_compare(IntPredicate::ULT, cb, size_b, "in.b")?;
        let inside = b.build_and(ina, inb, "inside")?;
        cg.if_then(inside, || {
            g.push_scope();
            let v = g
                .index_multi(&geo.in_dims, input_multi(ca, cb))
                .and_then(|idx| g.gen1(operand, &idx));
            g.pop_scope();
            let v: Val<'ctx> = v?;
            b.build_store(slot(row, lane)?, v)?;
            Ok(())
        })?;
    }
    barrier(cg)?;
    let out_dims: Vec<i64> = geo.perm.iter().map(|&p| geo.in_dims[p as usize]).collect();
    for r in 0..ROWS_PER_THREAD {
        let row = b.build_int_nuw_add(warp, c(r * (REDUCTION_BLOCK / WARP)), "row")?;
        let ob = b.build_int_nuw_add(base_b, lane, "write.b")?;
        let oa = b.build_int_nuw_add(base_a, row, "write.a")?;
        let ina = b.build_int_compare(IntPredicate::ULT, oa, size_a, "in.a")?;
        let inb = b.build_int_compare(IntPredicate::ULT, ob, size_b, "in.b")?;
        let inside = b.build_and(ina, inb, "inside")?;
        cg.if_then(inside, || {
            let v = b.build_load(reg, slot(lane, row)?, "tile.v")?;
            let inm = input_multi(oa, ob);
            let multi = geo.perm.iter().map(|&p| inm[p as usize]).collect();
            let idx = g.index_multi(&out_dims, multi)?;
            cg.store(ty, out, idx.linear, v)
        })?;
    }
    Ok(())
}
