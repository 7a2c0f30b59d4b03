//! Tiled products: the shared-memory tile loop that the dot kernels ([`crate::dot`]) and the
//! convolution kernels ([`crate::convolution`]) both run. A product is `batch` independent
//! matrix products of a `rows x depth` left operand and a `depth x cols` right one
//! ([`ProductShape`]); what an element of either operand is, and which output element a
//! `(batch, row, col)` is, the caller says through `TiledProduct`.
//!
//! A block of 16 x 16 threads computes a 16 x 16 tile of one batch element, thread `(y, x)`
//! output `(row = 16 tm + y, col = 16 tn + x)`. For each step of 16 along the depth, the block
//! loads the left tile (`lhs[row][k]`, thread `(y, x)` element `k = 16 s + x`) and the right
//! tile (`rhs[k][col]`, element `k = 16 s + y`) into shared memory (rows padded to 17),
//! converted to the accumulation type, waits at a barrier, accumulates its 16 products, and
//! waits again before the next step overwrites the tiles. Operands are computed elementally
//! where they are loaded, so fused producers cost one evaluation per tile load. After the
//! last step the contraction is bound to the thread's sum, rounded to its type once, and the
//! kernel's root (the contraction or an elementwise epilogue of it, reshapes and row-major
//! bitcasts included) is computed and stored at the contraction's row-major position.
//!
//! Semantics: the accumulation type and step are the shared ones
//! (`axle_codegen_llvm::contraction`: [`acc_type`](axle_codegen_llvm::contraction::acc_type),
//! [`mul_add`], a fused multiply-add for `f32` and `f64`), summed in depth order, then
//! converted to the output type once. Elements past the edges, and elements the caller marks
//! invalid (`TileElement::valid`, a convolution's padding), load zero without being
//! computed. Where `Tiled::masked` is set, a left element that is invalid (or past the
//! edges) also skips its product, as the evaluator skips a convolution's padding: a zero
//! times an infinite or NaN weight would otherwise add a NaN.
//!
//! Invariants: every thread reaches every barrier (threads past the edges load zeros and store
//! nothing); each output element is stored by one thread; every instruction between the
//! contraction and the root keeps each element's row-major position (elementwise ops of
//! their operands' dimensions, reshapes, bitcasts between row-major layouts; the planners
//! check it, `elementwise_epilogue`), so binding the contraction to the thread's sum is
//! exact.

use std::collections::HashSet;

use axle_codegen_llvm::cg::Val;
use axle_codegen_llvm::contraction::mul_add;
use axle_codegen_llvm::elemental::{arr_of, bitcast_is_reshape, Ext, Gen};
use axle_codegen_llvm::error::{at, R};
use axle_codegen_llvm::ops;
use axle_ir::{AttrKey, ElementType, InstId, Module, Opcode};
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::fused::reached_in_order;
use crate::launch::LaunchPlan;
use crate::primitives::{barrier, kernel_name, registers, shared_array};

/// The tile's side (a block is `TILE * TILE` threads).
pub(crate) const TILE: u64 = 16;

/// The sizes of a tiled product.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProductShape {
    /// Independent products (a dot's batch elements, a convolution's groups).
    pub batch: u64,
    /// Rows of each product (the left operand's free elements, a convolution's output
    /// positions).
    pub rows: u64,
    /// Columns of each product (the right operand's free elements, a convolution's output
    /// features of one group).
    pub cols: u64,
    /// Contracted elements.
    pub depth: u64,
}

impl ProductShape {
    /// The launch plan: one block of 16 x 16 threads per output tile.
    pub fn launch_plan(&self) -> Result<LaunchPlan, crate::NvptxError> {
        let tiles = self.batch * self.rows.div_ceil(TILE) * self.cols.div_ceil(TILE);
        LaunchPlan::for_blocks(self.batch * self.rows * self.cols, tiles, TILE * TILE)
    }
}

/// One element of an operand tile: the instruction it is an element of, its coordinates
/// there, and, where some coordinates name no element of the sum, whether these do.
pub(crate) struct TileElement<'ctx> {
    /// The operand.
    pub op: InstId,
    /// Its coordinates in the operand (read only where the element is valid and inside).
    pub multi: Vec<IntValue<'ctx>>,
    /// Whether the element is part of the sum (`None`: always).
    pub valid: Option<IntValue<'ctx>>,
}

impl<'ctx> TileElement<'ctx> {
    /// Element `multi` of operand `op`, always part of the sum.
    pub fn always(op: InstId, multi: Vec<IntValue<'ctx>>) -> R<Self> {
        Ok(TileElement {
            op,
            multi,
            valid: None,
        })
    }
}

/// A position in a tiled product: a batch element and two coordinates in it (row and depth
/// for the left operand, depth and column for the right one, row and column for the output).
#[derive(Clone, Copy)]
pub(crate) struct TileAt<'ctx> {
    /// The batch element.
    pub batch: IntValue<'ctx>,
    /// The first coordinate.
    pub i: IntValue<'ctx>,
    /// The second coordinate.
    pub j: IntValue<'ctx>,
}

/// What the elements of a tiled product are.
pub(crate) trait TiledProduct<'ctx> {
    /// The left operand's element at row `at.i`, depth `at.j`.
    fn lhs(&self, g: &mut Gen<'_, 'ctx>, at: TileAt<'ctx>) -> R<TileElement<'ctx>>;
    /// The right operand's element at depth `at.i`, column `at.j`.
    fn rhs(&self, g: &mut Gen<'_, 'ctx>, at: TileAt<'ctx>) -> R<TileElement<'ctx>>;
    /// The contraction's output coordinates of row `at.i`, column `at.j`.
    fn output(&self, g: &mut Gen<'_, 'ctx>, at: TileAt<'ctx>) -> R<Vec<IntValue<'ctx>>>;
}

/// A tiled product as emitted.
pub(crate) struct Tiled<'a> {
    /// Its sizes.
    pub shape: &'a ProductShape,
    /// The contraction (a `dot` or `convolution`), bound to each thread's sum.
    pub contraction: InstId,
    /// The kernel's output: the contraction or an elementwise epilogue of it.
    pub root: InstId,
    /// The accumulation type.
    pub acc_ty: ElementType,
    /// Whether an invalid left element skips its product (else it adds a zero product).
    pub masked: bool,
}

/// The instructions a kernel for instruction `id` computes, operands before users, and its
/// root: a fusion's reached computation, or the instruction alone.
pub(crate) fn kernel_insts(m: &Module, id: InstId) -> R<(Vec<InstId>, InstId)> {
    Ok(match m.opcode(id) {
        Opcode::Fusion => {
            let c = m
                .comp_attr(id, &AttrKey::Calls)
                .ok_or_else(|| at(m, id, "fusion needs calls".into()))?;
            (reached_in_order(m, c, m.root(c)), m.root(c))
        }
        _ => (vec![id], id),
    })
}

/// Checks that everything of `insts` reading `hero` (directly or not) reads it at the same
/// row-major position (an elementwise op whose operands reading it have its dimensions, a
/// reshape, a bitcast between row-major layouts) and that `root` reads it: the first
/// instruction that does not (`Err(Some(x))`), or `Err(None)` when `root` does not depend on
/// `hero`.
pub(crate) fn elementwise_epilogue(
    m: &Module,
    insts: &[InstId],
    hero: InstId,
    root: InstId,
) -> Result<(), Option<InstId>> {
    let dims = |x: InstId| m.array_shape(x).map(|a| a.dims.clone());
    let mut depends = HashSet::new();
    for &x in insts {
        if x == hero || m.operands(x).iter().any(|o| depends.contains(o)) {
            depends.insert(x);
            let same = m
                .operands(x)
                .iter()
                .filter(|o| depends.contains(*o))
                .all(|&o| dims(o) == dims(x));
            let ok = match m.opcode(x) {
                _ if x == hero => true,
                Opcode::Reshape => dims(x).is_some(),
                Opcode::Bitcast => bitcast_is_reshape(m, x).unwrap_or(false),
                op => op.is_elementwise() && same,
            };
            if !ok {
                return Err(Some(x));
            }
        }
    }
    if depends.contains(&root) {
        Ok(())
    } else {
        Err(None)
    }
}

/// Emits the body of a tiled product kernel at the builder's position (the entry block of a
/// kernel whose operands are bound in `g`), storing the root's elements (of type `out_ty`) at
/// `out`.
pub(crate) fn emit_tiled<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    t: &Tiled<'_>,
    p: &dyn TiledProduct<'ctx>,
    out_ty: ElementType,
    out: PointerValue<'ctx>,
) -> R<()> {
    let cg = g.cg;
    let b = &cg.b;
    let acc_ty = t.acc_ty;
    let reg = cg.reg_ty(acc_ty)?;
    let zero = cg.const_f(acc_ty, 0.0)?;
    let c = |v: u64| cg.c64(v as i64);
    let (tid, bid) = registers(cg)?;
    let x = b.build_and(tid, c(TILE - 1), "x")?;
    let y = b.build_right_shift(tid, c(4), false, "y")?;
    let (tm, tn) = (t.shape.rows.div_ceil(TILE), t.shape.cols.div_ceil(TILE));
    let tile_n = b.build_int_unsigned_rem(bid, c(tn), "tile.n")?;
    let rest = b.build_int_unsigned_div(bid, c(tn), "tile.rest")?;
    let tile_m = b.build_int_unsigned_rem(rest, c(tm), "tile.m")?;
    let batch = b.build_int_unsigned_div(rest, c(tm), "batch")?;
    let row0 = b.build_int_nuw_mul(tile_m, c(TILE), "row0")?;
    let col0 = b.build_int_nuw_mul(tile_n, c(TILE), "col0")?;
    let row = b.build_int_nuw_add(row0, y, "row")?;
    let col = b.build_int_nuw_add(col0, x, "col")?;
    let name = kernel_name(cg)?;
    let stride = TILE + 1;
    let lt = shared_array(cg, reg, (TILE * stride) as u32, &format!("{name}.lhs"));
    let rt = shared_array(cg, reg, (TILE * stride) as u32, &format!("{name}.rhs"));
    let i8t = cg.ctx.i8_type();
    let mask = t.masked.then(|| {
        shared_array(
            cg,
            i8t.into(),
            (TILE * stride) as u32,
            &format!("{name}.mask"),
        )
    });
    let slot = |ty, tile, i, j| -> R<PointerValue<'ctx>> {
        let s = b.build_int_nuw_mul(i, c(stride), "slot.r")?;
        let s = b.build_int_nuw_add(s, j, "slot")?;
        cg.gep(ty, tile, s)
    };
    let steps = t.shape.depth.div_ceil(TILE);
    let (rows, cols, depth) = (c(t.shape.rows), c(t.shape.cols), c(t.shape.depth));
    let row_in = b.build_int_compare(IntPredicate::ULT, row, rows, "row.in")?;
    let col_in = b.build_int_compare(IntPredicate::ULT, col, cols, "col.in")?;
    let acc = cg.for_range_acc(c(0), c(steps), &[zero], |s, a| {
        let k0 = b.build_int_nuw_mul(s, c(TILE), "k0")?;
        // Thread (y, x) loads lhs[row][k0 + x] and rhs[k0 + y][col].
        let kx = b.build_int_nuw_add(k0, x, "kx")?;
        let ky = b.build_int_nuw_add(k0, y, "ky")?;
        let kx_in = b.build_int_compare(IntPredicate::ULT, kx, depth, "kx.in")?;
        let ky_in = b.build_int_compare(IntPredicate::ULT, ky, depth, "ky.in")?;
        let at = |i, j| TileAt { batch, i, j };
        let e = p.lhs(g, at(row, kx))?;
        let inside = b.build_and(row_in, kx_in, "lhs.in")?;
        let counted = stage(g, e, inside, acc_ty, slot(reg, lt, y, x)?)?;
        if let Some(mask) = mask {
            let flag = b.build_int_z_extend(counted, i8t, "counted")?;
            b.build_store(slot(i8t.into(), mask, y, x)?, flag)?;
        }
        let e = p.rhs(g, at(ky, col))?;
        let inside = b.build_and(col_in, ky_in, "rhs.in")?;
        stage(g, e, inside, acc_ty, slot(reg, rt, y, x)?)?;
        barrier(cg)?;
        let mut acc = a[0];
        for kk in 0..TILE {
            let av = b.build_load(reg, slot(reg, lt, y, c(kk))?, "a")?;
            let bv = b.build_load(reg, slot(reg, rt, c(kk), x)?, "b")?;
            let next = mul_add(cg, acc_ty, acc, av, bv)?;
            acc = match mask {
                Some(mask) => {
                    let flag = b.build_load(i8t, slot(i8t.into(), mask, y, c(kk))?, "m")?;
                    let on = b.build_int_compare(
                        IntPredicate::NE,
                        flag.into_int_value(),
                        i8t.const_zero(),
                        "on",
                    )?;
                    b.build_select(on, next, acc, "acc")?
                }
                None => next,
            };
        }
        barrier(cg)?;
        Ok(vec![acc])
    })?;
    let inside = b.build_and(row_in, col_in, "out.in")?;
    cg.if_then(inside, || {
        let v = ops::convert(cg, acc_ty, arr_of(g.m, t.contraction)?.ty, acc[0])?;
        store_root(
            g,
            t,
            p,
            TileAt {
                batch,
                i: row,
                j: col,
            },
            v,
            (out_ty, out),
        )
    })?;
    Ok(())
}

/// The kernel's root at output position `at` (inside the product), stored into `out` (of
/// element type `out_ty`): the contraction bound to `v` (its value there, in its own type),
/// then the root, the contraction or an elementwise epilogue of it, computed at the
/// contraction's output index.
pub(crate) fn store_root<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    t: &Tiled<'_>,
    p: &dyn TiledProduct<'ctx>,
    at: TileAt<'ctx>,
    v: Val<'ctx>,
    (out_ty, out): (ElementType, PointerValue<'ctx>),
) -> R<()> {
    let dims = arr_of(g.m, t.contraction)?.dims.clone();
    g.bind(t.contraction, Ext::Vals(vec![v]));
    g.push_scope();
    let r = (|| {
        let multi = p.output(g, at)?;
        let idx = g.index_multi(&dims, multi)?;
        // A root reshaped from the contraction is indexed in its own dimensions at the same
        // row-major position.
        let root_dims = arr_of(g.m, t.root)?.dims.clone();
        let own = if root_dims == dims {
            idx.clone()
        } else {
            g.index_linear(&root_dims, idx.linear)?
        };
        let v = g.gen1(t.root, &own)?;
        g.cg.store(out_ty, out, idx.linear, v)
    })();
    g.pop_scope();
    r
}

/// Stores tile element `e` at `slot`, converted to the accumulation type, where it is
/// `inside` the product and valid, else zero (without computing it); whether it was loaded.
fn stage<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    e: TileElement<'ctx>,
    inside: IntValue<'ctx>,
    acc_ty: ElementType,
    slot: PointerValue<'ctx>,
) -> R<IntValue<'ctx>> {
    let (v, counted) = tile_value(g, e, inside, acc_ty)?;
    g.cg.b.build_store(slot, v)?;
    Ok(counted)
}

/// Tile element `e` converted to type `ty` (in register form) where it is `inside` the
/// product and valid, else zero (without computing it), and whether it was loaded.
pub(crate) fn tile_value<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    e: TileElement<'ctx>,
    inside: IntValue<'ctx>,
    ty: ElementType,
) -> R<(Val<'ctx>, IntValue<'ctx>)> {
    let cg = g.cg;
    let counted = match e.valid {
        Some(v) => cg.b.build_and(inside, v, "valid")?,
        None => inside,
    };
    let zero = cg.const_f(ty, 0.0)?;
    let mut v = cg.if_else_with(
        g,
        counted,
        |g| {
            g.push_scope();
            let r = (|| {
                let s = arr_of(g.m, e.op)?.clone();
                let idx = g.index_multi(&s.dims, e.multi)?;
                let v = g.gen1(e.op, &idx)?;
                Ok(vec![ops::convert(cg, s.ty, ty, v)?])
            })();
            g.pop_scope();
            r
        },
        |_| Ok(vec![zero]),
    )?;
    let v = v.pop().ok_or("a tile load produced nothing")?;
    Ok((v, counted))
}
