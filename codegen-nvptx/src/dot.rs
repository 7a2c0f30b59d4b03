//! Dot kernels: a `dot` (an unfused one, or a fusion's, whose root may be an elementwise
//! epilogue of it, such as a bias add and a ReLU) as a shared-memory-tiled matrix product.
//! Tensor cores (`mma`) are not used yet.
//!
//! The output's dimensions are the batch ones (`B` elements), the left operand's free ones
//! (`M`) and the right operand's free ones (`N`); the contracting ones have `K` elements. A
//! block of 16 x 16 threads computes a 16 x 16 tile of one batch element, thread `(y, x)`
//! output `(m = 16 tm + y, n = 16 tn + x)`. For each step of 16 along `K`, the block loads the
//! left tile (`lhs[m][k]`, thread `(y, x)` element `k = 16 s + x`) and the right tile
//! (`rhs[k][n]`, element `k = 16 s + y`) into shared memory (rows padded to 17), converted to
//! the accumulation type, waits at a barrier, accumulates its 16 products, and waits again
//! before the next step overwrites the tiles. Operands are computed elementally where they
//! are loaded, so fused producers cost one evaluation per tile load.
//!
//! Semantics: the accumulation type and step are the shared ones
//! (`axle_codegen_llvm::contraction`: `f32` for `f32` and narrower floats, `f64`, wrapping `i64`
//! for integers; no fused multiply-add), summed in `K` order, then converted to the output
//! type once; positions past the edges load zero, which adds nothing.
//!
//! Invariants: every thread reaches every barrier (threads past the edges load zeros and store
//! nothing); each output element is stored by one thread; every instruction reading the dot is
//! elementwise with the dot's dimensions (checked by [`dot_geometry`]), so binding the dot to
//! the thread's sum is exact. Refused, with an error naming the instruction: complex dots, a
//! dot read other than elementwise, and a fusion with several outputs.

use axle_codegen_llvm::cg::numel;
use axle_codegen_llvm::contraction::{acc_type, dot_dims, mul_add, DotDims};
use axle_codegen_llvm::elemental::{arr_of, Ext, Gen, Index};
use axle_codegen_llvm::error::{at, Fail, R};
use axle_codegen_llvm::ops;
use axle_ir::{ArrayShape, AttrKey, ElementType, InstId, Module, Opcode};
use inkwell::values::{IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::fused::reached_in_order;
use crate::launch::LaunchPlan;
use crate::primitives::{barrier, kernel_name, registers, shared_array};

/// The tile's side (a block is `TILE * TILE` threads).
const TILE: u64 = 16;

/// The geometry of a dot kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DotGeometry {
    /// The `dot`.
    pub dot: InstId,
    /// The kernel's output: the dot or an elementwise epilogue of it.
    pub root: InstId,
    /// Batch elements (`B`).
    pub batch: u64,
    /// Rows (`M`, the left operand's free elements).
    pub rows: u64,
    /// Columns (`N`, the right operand's free elements).
    pub cols: u64,
    /// Contracted elements (`K`).
    pub depth: u64,
}

impl DotGeometry {
    /// The launch plan: one block of 16 x 16 threads per output tile.
    pub fn launch_plan(&self) -> Result<LaunchPlan, String> {
        let tiles = self.batch * self.rows.div_ceil(TILE) * self.cols.div_ceil(TILE);
        LaunchPlan::for_blocks(self.batch * self.rows * self.cols, tiles, TILE * TILE)
    }
}

fn refuse(m: &Module, id: InstId, what: &str) -> Fail {
    at(
        m,
        id,
        Fail::Msg(format!(
            "the nvptx backend's dot kernels do not yet emit {what}"
        )),
    )
}

/// The dot kernel for instruction `id` (a `dot`, or a fusion computing one), or `None` when it
/// computes no dot; an error naming the instruction when it is a dot this kernel does not
/// cover.
pub fn dot_geometry(m: &Module, id: InstId) -> R<Option<DotGeometry>> {
    let (insts, root) = match m.opcode(id) {
        Opcode::Fusion => {
            let c = m
                .comp_attr(id, &AttrKey::Calls)
                .ok_or_else(|| at(m, id, "fusion needs calls".into()))?;
            (reached_in_order(m, c, m.root(c)), m.root(c))
        }
        Opcode::Dot => (vec![id], id),
        _ => return Ok(None),
    };
    let dots: Vec<InstId> = insts
        .iter()
        .copied()
        .filter(|&x| m.opcode(x) == Opcode::Dot)
        .collect();
    let [dot] = dots[..] else {
        return match dots.get(1) {
            Some(&second) => Err(refuse(m, second, "two dots in one fusion")),
            None => Ok(None),
        };
    };
    let out = arr_of(m, dot).map_err(|f| at(m, dot, f))?;
    let (l, r) = (m.operands(dot)[0], m.operands(dot)[1]);
    let (ls, rs) = (
        arr_of(m, l).map_err(|f| at(m, dot, f))?,
        arr_of(m, r).map_err(|f| at(m, dot, f))?,
    );
    if out.ty.is_complex() || ls.ty.is_complex() || rs.ty.is_complex() {
        return Err(refuse(m, dot, "complex dots"));
    }
    acc_type(out.ty, ls.ty, rs.ty).map_err(|f| at(m, dot, f))?;
    let dd = dot_dims(m, dot, ls.rank(), rs.rank()).map_err(|f| at(m, dot, f))?;
    let size = |s: &ArrayShape, ds: &[i64]| numel(&sizes(s, ds)).max(0) as u64;
    for (a, b) in dd.lc.iter().zip(&dd.rc) {
        if ls.dims[*a as usize] != rs.dims[*b as usize] {
            return Err(at(m, dot, "dot dimension sizes do not match".into()));
        }
    }
    // Everything reading the dot must be elementwise at the dot's own index.
    let mut depends = std::collections::HashSet::new();
    for &x in &insts {
        if x == dot || m.operands(x).iter().any(|o| depends.contains(o)) {
            depends.insert(x);
            let same = m.array_shape(x).is_some_and(|a| a.dims[..] == out.dims[..]);
            if x != dot && !(m.opcode(x).is_elementwise() && same) {
                return Err(refuse(
                    m,
                    x,
                    &format!(
                        "{} reading a dot's result (only elementwise ops of its dimensions do)",
                        m.opcode(x).name()
                    ),
                ));
            }
        }
    }
    if !depends.contains(&root) {
        return Err(refuse(
            m,
            root,
            "a fusion output that does not read its dot",
        ));
    }
    Ok(Some(DotGeometry {
        dot,
        root,
        batch: size(ls, &dd.lb),
        rows: size(ls, &dd.lfree),
        cols: size(rs, &dd.rfree),
        depth: size(ls, &dd.lc),
    }))
}

/// Sizes of the dimensions `ds` of `s`.
fn sizes(s: &ArrayShape, ds: &[i64]) -> Vec<i64> {
    ds.iter().map(|&d| s.dims[d as usize]).collect()
}

/// Emits the body of a dot kernel at the builder's position (the entry block of a kernel whose
/// operands are bound in `g`), storing the output at `out`.
pub(crate) fn emit_dot<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &DotGeometry,
    out_ty: ElementType,
    out: PointerValue<'ctx>,
) -> R<()> {
    let cg = g.cg;
    let b = &cg.b;
    let m = g.m;
    let dot = geo.dot;
    let (l, r) = (m.operands(dot)[0], m.operands(dot)[1]);
    let ls = arr_of(m, l)?.clone();
    let rs = arr_of(m, r)?.clone();
    let os = arr_of(m, dot)?.clone();
    let dd: DotDims = dot_dims(m, dot, ls.rank(), rs.rank())?;
    let acc_ty = acc_type(os.ty, ls.ty, rs.ty)?;
    let reg = cg.reg_ty(acc_ty)?;
    let zero = cg.const_f(acc_ty, 0.0)?;
    let c = |v: u64| cg.c64(v as i64);
    let (tid, bid) = registers(cg)?;
    let x = b.build_and(tid, c(TILE - 1), "x")?;
    let y = b.build_right_shift(tid, c(4), false, "y")?;
    let (tm, tn) = (geo.rows.div_ceil(TILE), geo.cols.div_ceil(TILE));
    let tile_n = b.build_int_unsigned_rem(bid, c(tn), "tile.n")?;
    let rest = b.build_int_unsigned_div(bid, c(tn), "tile.rest")?;
    let tile_m = b.build_int_unsigned_rem(rest, c(tm), "tile.m")?;
    let batch = b.build_int_unsigned_div(rest, c(tm), "batch")?;
    let row0 = b.build_int_nuw_mul(tile_m, c(TILE), "row0")?;
    let col0 = b.build_int_nuw_mul(tile_n, c(TILE), "col0")?;
    let row = b.build_int_nuw_add(row0, y, "row")?;
    let col = b.build_int_nuw_add(col0, x, "col")?;
    let bidx = g.index_linear(&sizes(&ls, &dd.lb), batch)?;
    let name = kernel_name(cg)?;
    let stride = TILE + 1;
    let lt = shared_array(cg, reg, (TILE * stride) as u32, &format!("{name}.lhs"));
    let rt = shared_array(cg, reg, (TILE * stride) as u32, &format!("{name}.rhs"));
    let slot = |t, i, j| -> R<PointerValue<'ctx>> {
        let s = b.build_int_nuw_mul(i, c(stride), "slot.r")?;
        let s = b.build_int_nuw_add(s, j, "slot")?;
        cg.gep(reg, t, s)
    };
    let cdims = sizes(&ls, &dd.lc);
    // Loads operand `op` (of shape `s`, batch dims `bd`, free dims `fd` at linear `free`,
    // contracting dims `cd` at linear `k`) converted to the accumulation type, or zero past
    // the edges (`inside` false).
    let load = |g: &mut Gen<'_, 'ctx>,
                op: InstId,
                s: &ArrayShape,
                (bd, fd, cd): (&[i64], &[i64], &[i64]),
                free: IntValue<'ctx>,
                k: IntValue<'ctx>,
                inside: IntValue<'ctx>|
     -> R<inkwell::values::BasicValueEnum<'ctx>> {
        let mut v = cg.if_else_with(
            g,
            inside,
            |g| {
                g.push_scope();
                let r = (|| {
                    let fi = g.index_linear(&sizes(s, fd), free)?;
                    let ki = g.index_linear(&cdims, k)?;
                    let mut multi = vec![cg.c64(0); s.rank()];
                    for (j, &d) in bd.iter().enumerate() {
                        multi[d as usize] = bidx.multi[j];
                    }
                    for (j, &d) in fd.iter().enumerate() {
                        multi[d as usize] = fi.multi[j];
                    }
                    for (j, &d) in cd.iter().enumerate() {
                        multi[d as usize] = ki.multi[j];
                    }
                    let idx = g.index_multi(&s.dims, multi)?;
                    let v = g.gen1(op, &idx)?;
                    Ok(vec![ops::convert(cg, s.ty, acc_ty, v)?])
                })();
                g.pop_scope();
                r
            },
            |_| Ok(vec![zero]),
        )?;
        v.pop().ok_or_else(|| "a tile load produced nothing".into())
    };
    let steps = geo.depth.div_ceil(TILE);
    let (rows, cols, depth) = (c(geo.rows), c(geo.cols), c(geo.depth));
    let row_in = b.build_int_compare(IntPredicate::ULT, row, rows, "row.in")?;
    let col_in = b.build_int_compare(IntPredicate::ULT, col, cols, "col.in")?;
    let acc = cg.for_range_acc(c(0), c(steps), &[zero], |s, a| {
        let k0 = b.build_int_nuw_mul(s, c(TILE), "k0")?;
        // The left tile: thread (y, x) loads lhs[row][k0 + x].
        let kx = b.build_int_nuw_add(k0, x, "kx")?;
        let kx_in = b.build_int_compare(IntPredicate::ULT, kx, depth, "kx.in")?;
        let inside = b.build_and(row_in, kx_in, "lhs.in")?;
        let v = load(g, l, &ls, (&dd.lb, &dd.lfree, &dd.lc), row, kx, inside)?;
        b.build_store(slot(lt, y, x)?, v)?;
        // The right tile: thread (y, x) loads rhs[k0 + y][col].
        let ky = b.build_int_nuw_add(k0, y, "ky")?;
        let ky_in = b.build_int_compare(IntPredicate::ULT, ky, depth, "ky.in")?;
        let inside = b.build_and(col_in, ky_in, "rhs.in")?;
        let v = load(g, r, &rs, (&dd.rb, &dd.rfree, &dd.rc), col, ky, inside)?;
        b.build_store(slot(rt, y, x)?, v)?;
        barrier(cg)?;
        let mut acc = a[0];
        for kk in 0..TILE {
            let av = b.build_load(reg, slot(lt, y, c(kk))?, "a")?;
            let bv = b.build_load(reg, slot(rt, c(kk), x)?, "b")?;
            acc = mul_add(cg, acc_ty, acc, av, bv)?;
        }
        barrier(cg)?;
        Ok(vec![acc])
    })?;
    let inside = b.build_and(row_in, col_in, "out.in")?;
    cg.if_then(inside, || {
        let v = ops::convert(cg, acc_ty, os.ty, acc[0])?;
        g.bind(dot, Ext::Vals(vec![v]));
        g.push_scope();
        let r = (|| {
            let mi = g.index_linear(&sizes(&ls, &dd.lfree), row)?;
            let ni = g.index_linear(&sizes(&rs, &dd.rfree), col)?;
            let multi: Vec<IntValue<'ctx>> = bidx
                .multi
                .iter()
                .chain(&mi.multi)
                .chain(&ni.multi)
                .copied()
                .collect();
            let idx: Index<'ctx> = g.index_multi(&os.dims, multi)?;
            let v = g.gen1(geo.root, &idx)?;
            cg.store(out_ty, out, idx.linear, v)
        })();
        g.pop_scope();
        r
    })?;
    Ok(())
}
