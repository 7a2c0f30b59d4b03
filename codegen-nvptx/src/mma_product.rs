//! Tiled products on tensor cores: the warp-level `mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32`
//! tile loop (`T` is `f16` or `bf16`, [`MmaType`]) for products whose operands are both of one
//! of those types and whose accumulation type is `f32`; the dot kernels ([`crate::dot`]) run it
//! where [`crate::dot::TensorCores`] selects it, else the FMA loop of [`crate::tiled_product`].
//! It takes the same `TiledProduct` description of the operands as that loop.
//!
//! A block of 4 warps (128 threads) computes a 64 x 64 tile of one batch element, each warp a
//! 32 x 32 quarter (warp `w`: rows `32 (w / 2)`, columns `32 (w % 2)`) as 2 x 4 `m16n8k16`
//! products. For each step of 32 along the depth, the block stages the left tile
//! (`lhs[row][k]`, 64 x 32) and the right tile (`rhs[k][col]`, stored transposed as
//! `[col][k]`) in shared memory as the operand type's 16-bit patterns (rows padded to 40
//! elements), every thread loading 16 elements of each (operands computed elementally where
//! they are loaded, as in the FMA loop); after a barrier each warp loads its fragments as pairs
//! of consecutive `k` (one 32-bit register each) and runs its 8 `mma`s for each of the two
//! 16-deep halves; a second barrier precedes the next step's stores. Fragments follow the PTX
//! ISA's layout for `m16n8k16` with `.f16`/`.bf16` operands (`group = lane / 4`,
//! `quad = lane % 4`): A's registers are rows `group`, `group + 8`, `group`, `group + 8` at
//! columns `2 quad + {0, 1}` (`+ 8` for the last two); B's are rows `2 quad + {0, 1}` (`+ 8`
//! for the second) of column `group`; C's and D's are rows `group` (0, 1) and `group + 8`
//! (2, 3) at columns `2 quad + {0, 1}`. The host simulator executes the `mma` as a
//! warp-collective operation with that layout (`crate::sim_mma`), so a fragment in the wrong
//! place gives a wrong result there too. After the last step the warps write their
//! accumulators to a shared 64 x 64 `f32` tile; after a barrier each thread takes 32 of its
//! elements (consecutive threads, consecutive columns), binds the contraction to the sum
//! rounded to its type once, and computes and stores the kernel's root as the FMA loop does.
//!
//! Semantics: the products of `f16` or `bf16` values are exact in `f32`; the tensor core sums
//! each 16-deep slice of products and adds it to the `f32` accumulator, in an order PTX leaves
//! unspecified (the simulator: the slice's products summed in depth order, then added to the
//! accumulator, `crate::sim_mma`). The evaluator and the FMA loop instead add each product to
//! the running sum in depth order, so the two paths differ by rounding, within the dtype
//! tolerances, not bit for bit. Elements past the edges stage zero, which adds nothing (a
//! position past the depth is zero in both operands).
//!
//! Invariants: every thread reaches every barrier and every warp's 32 lanes every `mma` (the
//! loop bounds are uniform; only loads and stores are guarded); each output element is stored
//! by one thread; the shared tiles' 32-bit fragment loads are at even element offsets of
//! 16-byte aligned arrays, so aligned; masked products (a convolution's padding) are refused.

use axle_codegen_llvm::cg::Val;
use axle_codegen_llvm::elemental::{arr_of, Gen};
use axle_codegen_llvm::error::R;
use axle_codegen_llvm::ops;
use axle_ir::ElementType;
use inkwell::types::BasicTypeEnum;
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::launch::{LaunchPlan, WARP};
use crate::primitives::{barrier, kernel_name, registers, shared_array};
use crate::tiled_product::{store_root, tile_value, ProductShape, TileAt, Tiled, TiledProduct};

/// Rows of a block's output tile.
pub const BLOCK_M: u64 = 64;
/// Columns of a block's output tile.
pub const BLOCK_N: u64 = 64;
/// Depth of one staged step.
const BLOCK_K: u64 = 32;
/// Warps along the rows and along the columns of a block.
const WARPS_M: u64 = 2;
const WARPS_N: u64 = 2;
/// Threads of a block.
pub const THREADS: u64 = WARPS_M * WARPS_N * WARP;
/// The shape of one `mma`.
const MMA_M: u64 = 16;
const MMA_N: u64 = 8;
const MMA_K: u64 = 16;
/// `mma` tiles of a warp along the rows and along the columns.
const TILES_M: u64 = BLOCK_M / WARPS_M / MMA_M;
const TILES_N: u64 = BLOCK_N / WARPS_N / MMA_N;
/// Row stride of the staged operand tiles, in 16-bit elements: padded by 8, so rows start in
/// different banks and pairs stay 4-byte aligned.
const STRIDE_K: u64 = BLOCK_K + 8;
/// Row stride of the output tile, in `f32` elements.
const STRIDE_OUT: u64 = BLOCK_N + 1;

/// The operand types the tensor-core loop takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MmaType {
    /// `f16` operands.
    F16,
    /// `bf16` operands.
    Bf16,
}

impl MmaType {
    /// The `mma` type of operands of types `a` and `b`, when both are the same `f16` or `bf16`.
    pub fn of(a: ElementType, b: ElementType) -> Option<MmaType> {
        match (a, b) {
            (ElementType::F16, ElementType::F16) => Some(MmaType::F16),
            (ElementType::BF16, ElementType::BF16) => Some(MmaType::Bf16),
            _ => None,
        }
    }

    /// The operands' element type.
    pub fn element_type(self) -> ElementType {
        match self {
            MmaType::F16 => ElementType::F16,
            MmaType::Bf16 => ElementType::BF16,
        }
    }

    /// LLVM's NVVM intrinsic for `mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32` (named by
    /// the accumulator types for `f16`, by the operand type for `bf16`).
    pub(crate) fn intrinsic(self) -> &'static str {
        match self {
            MmaType::F16 => "llvm.nvvm.mma.m16n8k16.row.col.f32.f32",
            MmaType::Bf16 => "llvm.nvvm.mma.m16n8k16.row.col.bf16",
        }
    }
}

/// The launch plan of the tensor-core loop over `shape`: one block of [`THREADS`] threads per
/// [`BLOCK_M`] x [`BLOCK_N`] output tile.
pub fn launch_plan(shape: &ProductShape) -> Result<LaunchPlan, crate::NvptxError> {
    let tiles = shape.batch * shape.rows.div_ceil(BLOCK_M) * shape.cols.div_ceil(BLOCK_N);
    LaunchPlan::for_blocks(shape.batch * shape.rows * shape.cols, tiles, THREADS)
}

/// Emits the body of a tensor-core product kernel at the builder's position (the entry block
/// of a kernel whose operands are bound in `g`), storing the root's elements (of type
/// `out_ty`) at `out`.
pub(crate) fn emit_mma_tiled<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    t: &Tiled<'_>,
    p: &dyn TiledProduct<'ctx>,
    mma: MmaType,
    out_ty: ElementType,
    out: PointerValue<'ctx>,
) -> R<()> {
    if t.masked || t.acc_ty != ElementType::F32 {
        return Err("the tensor-core loop takes unmasked products accumulated in f32".into());
    }
    let cg = g.cg;
    let b = &cg.b;
    let c = |v: u64| cg.c64(v as i64);
    let f32t = cg.f32();
    let i16t = cg.ctx.i16_type();
    let i32t = cg.i32();
    let (tid, bid) = registers(cg)?;
    let shape = t.shape;
    let (tm, tn) = (shape.rows.div_ceil(BLOCK_M), shape.cols.div_ceil(BLOCK_N));
    let tile_n = b.build_int_unsigned_rem(bid, c(tn), "tile.n")?;
    let rest = b.build_int_unsigned_div(bid, c(tn), "tile.rest")?;
    let tile_m = b.build_int_unsigned_rem(rest, c(tm), "tile.m")?;
    let batch = b.build_int_unsigned_div(rest, c(tm), "batch")?;
    let row0 = b.build_int_nuw_mul(tile_m, c(BLOCK_M), "row0")?;
    let col0 = b.build_int_nuw_mul(tile_n, c(BLOCK_N), "col0")?;
    let warp = b.build_right_shift(tid, c(5), false, "warp")?;
    let lane = b.build_and(tid, c(WARP - 1), "lane")?;
    let group = b.build_right_shift(lane, c(2), false, "group")?;
    let quad = b.build_and(lane, c(3), "quad")?;
    let quad2 = b.build_int_nuw_mul(quad, c(2), "quad2")?;
    let wm = b.build_int_unsigned_div(warp, c(WARPS_N), "warp.m")?;
    let wn = b.build_int_unsigned_rem(warp, c(WARPS_N), "warp.n")?;
    let warp_row = b.build_int_nuw_mul(wm, c(BLOCK_M / WARPS_M), "warp.row")?;
    let warp_col = b.build_int_nuw_mul(wn, c(BLOCK_N / WARPS_N), "warp.col")?;
    let name = kernel_name(cg)?;
    let lt = shared_array(
        cg,
        i16t.into(),
        (BLOCK_M * STRIDE_K) as u32,
        &format!("{name}.lhs"),
    );
    let rt = shared_array(
        cg,
        i16t.into(),
        (BLOCK_N * STRIDE_K) as u32,
        &format!("{name}.rhs"),
    );
    let ot = shared_array(
        cg,
        f32t.into(),
        (BLOCK_M * STRIDE_OUT) as u32,
        &format!("{name}.out"),
    );
    let ty = mma.element_type();
    let (rows, cols, depth) = (c(shape.rows), c(shape.cols), c(shape.depth));
    // Element `(i, j)` of a tile of row stride `stride` at `tile`, of type `ety`.
    let slot = |ety: BasicTypeEnum<'ctx>, tile, stride: u64, i, j| -> R<PointerValue<'ctx>> {
        let s = b.build_int_nuw_mul(i, c(stride), "slot.r")?;
        let s = b.build_int_nuw_add(s, j, "slot")?;
        cg.gep(ety, tile, s)
    };
    // The 32-bit register of the staged elements `(i, j)` and `(i, j + 1)` (`j` even), as
    // the intrinsic takes it: `<2 x half>` for `f16`, `i32` for `bf16`.
    let pair = |tile, i, j| -> R<Val<'ctx>> {
        let p = slot(i16t.into(), tile, STRIDE_K, i, j)?;
        let v = b.build_load(i32t, p, "frag")?;
        Ok(match mma {
            MmaType::F16 => b.build_bit_cast(v, cg.ctx.f16_type().vec_type(2), "frag.h")?,
            MmaType::Bf16 => v,
        })
    };
    let add = |x: IntValue<'ctx>, k: u64| -> R<IntValue<'ctx>> {
        Ok(b.build_int_nuw_add(x, c(k), "add")?)
    };
    let intrinsic = cg.intrinsic(mma.intrinsic(), &[])?;
    let zero = cg.const_f(ElementType::F32, 0.0)?;
    let init = vec![zero; (TILES_M * TILES_N * 4) as usize];
    let steps = shape.depth.div_ceil(BLOCK_K);
    let acc = cg.for_range_acc(c(0), c(steps), &init, |s, a| {
        let k0 = b.build_int_nuw_mul(s, c(BLOCK_K), "k0")?;
        // Element `e` of this thread: `tid + e * THREADS` of the tile, row-major over
        // (row, k) for the left one, over (k, col) for the right one (consecutive threads,
        // consecutive columns), stored as `[col][k]`.
        cg.for_range(c(0), c(BLOCK_M * BLOCK_K / THREADS), |e| {
            let at = b.build_int_nuw_mul(e, c(THREADS), "lhs.e")?;
            let at = b.build_int_nuw_add(at, tid, "lhs.at")?;
            let r = b.build_int_unsigned_div(at, c(BLOCK_K), "lhs.r")?;
            let k = b.build_int_unsigned_rem(at, c(BLOCK_K), "lhs.k")?;
            let row = b.build_int_nuw_add(row0, r, "lhs.row")?;
            let kk = b.build_int_nuw_add(k0, k, "lhs.kk")?;
            let row_in = b.build_int_compare(IntPredicate::ULT, row, rows, "lhs.row.in")?;
            let k_in = b.build_int_compare(IntPredicate::ULT, kk, depth, "lhs.k.in")?;
            let inside = b.build_and(row_in, k_in, "lhs.in")?;
            let el = p.lhs(
                g,
                TileAt {
                    batch,
                    i: row,
                    j: kk,
                },
            )?;
            let (v, _) = tile_value(g, el, inside, ty)?;
            let bits = cg.to_mem(ty, v)?;
            b.build_store(slot(i16t.into(), lt, STRIDE_K, r, k)?, bits)?;
            Ok(())
        })?;
        cg.for_range(c(0), c(BLOCK_N * BLOCK_K / THREADS), |e| {
            let at = b.build_int_nuw_mul(e, c(THREADS), "rhs.e")?;
            let at = b.build_int_nuw_add(at, tid, "rhs.at")?;
            let k = b.build_int_unsigned_div(at, c(BLOCK_N), "rhs.k")?;
            let cl = b.build_int_unsigned_rem(at, c(BLOCK_N), "rhs.c")?;
            let col = b.build_int_nuw_add(col0, cl, "rhs.col")?;
            let kk = b.build_int_nuw_add(k0, k, "rhs.kk")?;
            let col_in = b.build_int_compare(IntPredicate::ULT, col, cols, "rhs.col.in")?;
            let k_in = b.build_int_compare(IntPredicate::ULT, kk, depth, "rhs.k.in")?;
            let inside = b.build_and(col_in, k_in, "rhs.in")?;
            let el = p.rhs(
                g,
                TileAt {
                    batch,
                    i: kk,
                    j: col,
                },
            )?;
            let (v, _) = tile_value(g, el, inside, ty)?;
            let bits = cg.to_mem(ty, v)?;
            b.build_store(slot(i16t.into(), rt, STRIDE_K, cl, k)?, bits)?;
            Ok(())
        })?;
        barrier(cg)?;
        let mut acc = a.to_vec();
        for half in 0..BLOCK_K / MMA_K {
            let kb = add(quad2, half * MMA_K)?;
            let kb8 = add(kb, 8)?;
            let mut afrag = Vec::with_capacity(TILES_M as usize);
            for mi in 0..TILES_M {
                let r = add(warp_row, mi * MMA_M)?;
                let r = b.build_int_nuw_add(r, group, "a.row")?;
                let r8 = add(r, 8)?;
                afrag.push([
                    pair(lt, r, kb)?,
                    pair(lt, r8, kb)?,
                    pair(lt, r, kb8)?,
                    pair(lt, r8, kb8)?,
                ]);
            }
            for ni in 0..TILES_N {
                let cl = add(warp_col, ni * MMA_N)?;
                let cl = b.build_int_nuw_add(cl, group, "b.col")?;
                let bfrag = [pair(rt, cl, kb)?, pair(rt, cl, kb8)?];
                for (mi, a) in afrag.iter().enumerate() {
                    let base = ((mi as u64 * TILES_N + ni) * 4) as usize;
                    let mut args: Vec<Val<'ctx>> = a.to_vec();
                    args.extend(bfrag);
                    args.extend_from_slice(&acc[base..base + 4]);
                    let d = cg
                        .call(intrinsic, &args)?
                        .ok_or("mma returned nothing")?
                        .into_struct_value();
                    for i in 0..4 {
                        acc[base + i as usize] = b.build_extract_value(d, i, "d")?;
                    }
                }
            }
        }
        barrier(cg)?;
        Ok(acc)
    })?;
    // The accumulators to the shared output tile, at their fragment positions.
    for mi in 0..TILES_M {
        for ni in 0..TILES_N {
            let r = add(warp_row, mi * MMA_M)?;
            let r = b.build_int_nuw_add(r, group, "d.row")?;
            let cl = add(warp_col, ni * MMA_N)?;
            let cl = b.build_int_nuw_add(cl, quad2, "d.col")?;
            for i in 0..4u64 {
                let v = acc[((mi * TILES_N + ni) * 4 + i) as usize];
                let (ri, ci) = (add(r, (i / 2) * 8)?, add(cl, i % 2)?);
                b.build_store(slot(f32t.into(), ot, STRIDE_OUT, ri, ci)?, v)?;
            }
        }
    }
    barrier(cg)?;
    let os_ty = arr_of(g.m, t.contraction)?.ty;
    cg.for_range(c(0), c(BLOCK_M * BLOCK_N / THREADS), |e| {
        let at = b.build_int_nuw_mul(e, c(THREADS), "out.e")?;
        let at = b.build_int_nuw_add(at, tid, "out.at")?;
        let r = b.build_int_unsigned_div(at, c(BLOCK_N), "out.r")?;
        let cl = b.build_int_unsigned_rem(at, c(BLOCK_N), "out.c")?;
        let row = b.build_int_nuw_add(row0, r, "out.row")?;
        let col = b.build_int_nuw_add(col0, cl, "out.col")?;
        let row_in = b.build_int_compare(IntPredicate::ULT, row, rows, "out.row.in")?;
        let col_in = b.build_int_compare(IntPredicate::ULT, col, cols, "out.col.in")?;
        let inside = b.build_and(row_in, col_in, "out.in")?;
        cg.if_then(inside, || {
            let sum = b.build_load(f32t, slot(f32t.into(), ot, STRIDE_OUT, r, cl)?, "sum")?;
            let v = ops::convert(cg, ElementType::F32, os_ty, sum)?;
            let at = TileAt {
                batch,
                i: row,
                j: col,
            };
            store_root(g, t, p, at, v, (out_ty, out))
        })
    })?;
    Ok(())
}
