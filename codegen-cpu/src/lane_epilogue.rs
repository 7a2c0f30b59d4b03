//! Register epilogues ([`crate::Epilogues::Registers`]): the elementwise epilogue of an output
//! fusion computed on the register tile of its core (the GEMM's on its last `K` block, or the
//! tiled convolution's), from the accumulators as they are, one vector of `lanes` columns
//! (along the result's last dimension) of one tile row at a time, and stored to the result
//! once, with masked stores.
//!
//! Invariants:
//! - [`LanePlan::new`] admits an epilogue only where every instruction between the root and
//!   the core is computed on vectors by the very functions the scalar elemental generator
//!   calls for it ([`ops::unary`], [`ops::binary`], [`ops::compare`], [`ops::select`],
//!   [`ops::clamp`], on the ops [`real::vector_unary`] and [`real::vector_binary`] admit,
//!   non-total-order float compares and float clamps), so every lane holds the bits the block
//!   path computes for its element. Anything else (a libm call, a convert, a gather, a
//!   constant array, a result narrower than the accumulation) is not admitted, and the caller
//!   runs the epilogue on blocks.
//! - What does not depend on the core is read per lane as the scalar path reads it: a rank-0
//!   value, or a broadcast that does not vary along the columns, is computed once (per tile
//!   row where it varies along the rows) by the scalar elemental generator and splat; a
//!   broadcast along the columns of an array in memory, and an array in memory of the result's
//!   shape, are masked vector loads.
//! - Every value of a tile is computed before the first store, so no load follows a store to
//!   the result (which aliases nothing the epilogue reads, but LLVM cannot know that).
//! - A tile row that does not exist computes on the coordinates of one that does and stores
//!   nothing (its masks are off); columns past the end are masked off in every load and store.

use std::collections::HashMap;

use axle_ir::{AttrKey, AttrValue, ComparisonType, ElementType, InstId, Module, Opcode};
use inkwell::values::{BasicValueEnum, IntValue, VectorValue};

use crate::cg::{bv, strides, Cg, Val};
use crate::elemental::{arr_of, Gen};
use crate::error::R;
use crate::gemm::{splat_float, splat_int, RegTile};
use crate::kernels::Kc;
use crate::{ops, real};

/// How an instruction of an admitted epilogue is computed on a vector of one tile row's
/// columns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// The dot: the accumulators.
    Core,
    /// A rank-0 value: computed once per tile by the scalar generator, splat.
    Scalar,
    /// A broadcast that does not vary along the columns: its operand computed once per tile
    /// row by the scalar generator, splat.
    RowSplat,
    /// A broadcast whose operand, an array in memory, runs along the columns (a bias): a masked
    /// load, once per tile when it does not vary along the rows or batches either.
    ColLoad { per_row: bool },
    /// An array in memory of the result's shape: a masked load.
    Load,
    /// An elementwise op of its operands' vectors.
    Op,
}

/// The forms of an admitted epilogue's instructions.
pub(crate) struct LanePlan {
    forms: HashMap<InstId, Form>,
    /// The type the tile accumulates in: the core's and the root's.
    acc: ElementType,
}

impl LanePlan {
    /// The plan of the epilogue of `root` over `core`, whose register tile accumulates in
    /// `acc` (rows over the result's dimensions but the last, columns along the last), or
    /// `None` where a register epilogue cannot compute it with the scalar path's bits.
    pub(crate) fn new(
        cg: &Cg<'_>,
        m: &Module,
        g: &Gen<'_, '_>,
        root: InstId,
        core: InstId,
        acc: ElementType,
    ) -> Option<LanePlan> {
        let core_shape = arr_of(m, core).ok()?;
        let dims = &core_shape.dims;
        let root_shape = arr_of(m, root).ok()?;
        if core_shape.ty != acc
            || root_shape.ty != acc
            || dims.is_empty()
            || root_shape.dims != *dims
        {
            return None;
        }
        let mut forms = HashMap::new();
        let mut stack = vec![root];
        while let Some(id) = stack.pop() {
            if forms.contains_key(&id) {
                continue;
            }
            let (form, next) = form_of(cg, m, g, id, core, dims, acc)?;
            forms.insert(id, form);
            stack.extend(next);
        }
        Some(LanePlan { forms, acc })
    }
}

/// The form of instruction `id` and the operands to visit next, or `None` where it cannot be
/// computed on vectors.
fn form_of(
    cg: &Cg<'_>,
    m: &Module,
    g: &Gen<'_, '_>,
    id: InstId,
    core: InstId,
    dims: &[i64],
    acc: ElementType,
) -> Option<(Form, Vec<InstId>)> {
    use Opcode::*;
    if id == core {
        return Some((Form::Core, Vec::new()));
    }
    let shape = arr_of(m, id).ok()?;
    if shape.dims.is_empty() {
        return Some((Form::Scalar, Vec::new()));
    }
    if *shape.dims != *dims {
        return None;
    }
    if g.is_bound(id) {
        return (shape.ty == acc && g.bound_ptr(id).is_some()).then_some((Form::Load, Vec::new()));
    }
    let ops = m.operands(id);
    let op = m.opcode(id);
    let last = dims.len() - 1;
    match op {
        Broadcast => {
            let x = arr_of(m, ops[0]).ok()?;
            let map = m.ints_attr(id, &AttrKey::Dimensions)?;
            let along = map.iter().position(|&d| d as usize == last);
            match along.filter(|&p| x.dims[p] > 1) {
                None => Some((Form::RowSplat, Vec::new())),
                // Along the columns: only an array in memory whose own last dimension that is.
                Some(p) => {
                    let ok = p + 1 == x.dims.len()
                        && x.ty == acc
                        && g.bound_ptr(ops[0]).is_some()
                        && map.windows(2).all(|w| w[0] < w[1]);
                    let per_row = map
                        .iter()
                        .zip(&x.dims)
                        .any(|(&d, &n)| (d as usize) < last && n > 1);
                    ok.then_some((Form::ColLoad { per_row }, Vec::new()))
                }
            }
        }
        Compare => {
            let in_ty = arr_of(m, ops[0]).ok()?.ty;
            let cty = m.comparison_type(id, in_ty);
            (in_ty == acc && shape.ty == ElementType::Pred && cty != ComparisonType::TotalOrder)
                .then(|| (Form::Op, ops.to_vec()))
        }
        Select => {
            let p = arr_of(m, ops[0]).ok()?.ty;
            (shape.ty == acc && p == ElementType::Pred).then(|| (Form::Op, ops.to_vec()))
        }
        Clamp => (real::vector_clamp(acc)
            && ops.iter().all(|&o| arr_of(m, o).is_ok_and(|s| s.ty == acc)))
        .then(|| (Form::Op, ops.to_vec())),
        _ if op.is_elementwise_unary() => {
            let in_ty = arr_of(m, ops[0]).ok()?.ty;
            (in_ty == acc && shape.ty == acc && real::vector_unary(cg, op, acc))
                .then(|| (Form::Op, ops.to_vec()))
        }
        _ if op.is_elementwise_binary() => (shape.ty == acc
            && ops.iter().all(|&o| arr_of(m, o).is_ok_and(|s| s.ty == acc))
            && real::vector_binary(op, acc))
        .then(|| (Form::Op, ops.to_vec())),
        _ => None,
    }
}

/// The coordinates of one tile: per tile row, its coordinates in the result's dimensions but
/// the last, and the linear offset in the result of its first column.
struct TileAt<'ctx> {
    coords: Vec<Vec<IntValue<'ctx>>>,
    lins: Vec<IntValue<'ctx>>,
}

/// A memo key: the instruction, and the tile row and vector it was computed for (`-1` where
/// its value does not vary along that axis).
type Key = (InstId, i64, i64);

impl<'ctx> Kc<'_, 'ctx> {
    /// Computes the epilogue on register tile `t` (of a result of dimensions `dims`) and
    /// stores the root's values to the output.
    pub(crate) fn emit_lane_tile(
        &mut self,
        plan: &LanePlan,
        dims: &[i64],
        t: &RegTile<'ctx>,
    ) -> R<()> {
        let cg = self.cg();
        let b = &cg.b;
        let rank = dims.len();
        let n = dims[rank - 1];
        let mut coords = Vec::with_capacity(t.rows.len());
        let mut lins = Vec::with_capacity(t.rows.len());
        for &row in &t.rows {
            coords.push(crate::gemm::delinearize(cg, &dims[..rank - 1], row)?);
            let lin = b.build_int_nsw_mul(row, cg.c64(n), "rl")?;
            lins.push(b.build_int_nsw_add(lin, t.col0, "rl")?);
        }
        let at = TileAt { coords, lins };
        self.g.push_scope();
        let mut memo = HashMap::new();
        let mut vals = Vec::with_capacity(t.accs.len());
        for r in 0..t.rows.len() as i64 {
            for h in 0..2 {
                vals.push(self.lane_val(plan, dims, t, &at, self.root, r, h, &mut memo)?);
            }
        }
        self.g.pop_scope();
        let vty = cg
            .reg_ty(plan.acc)?
            .into_float_type()
            .vec_type(t.lanes as u32);
        let mstore = cg.intrinsic("llvm.masked.store", &[vty.into(), cg.ptr().into()])?;
        let align = cg.i32().const_int(plan.acc.byte_size() as u64, false);
        let mty = cg.mem_ty(plan.acc)?;
        let out = *self.outs.first().ok_or("an epilogue without its output")?;
        for r in 0..t.rows.len() {
            for h in 0..2 {
                let o = b.build_int_nsw_add(at.lins[r], cg.c64(h as i64 * t.lanes), "o")?;
                let q = cg.gep(mty, out, o)?;
                cg.call(
                    mstore,
                    &[vals[2 * r + h], bv(q), bv(align), bv(t.masks[r][h])],
                )?;
            }
        }
        Ok(())
    }

    /// The vector of instruction `id` at tile row `r`, vector `h` (columns `h * lanes ..`).
    #[allow(clippy::too_many_arguments)]
    fn lane_val(
        &mut self,
        plan: &LanePlan,
        dims: &[i64],
        t: &RegTile<'ctx>,
        at: &TileAt<'ctx>,
        id: InstId,
        r: i64,
        h: i64,
        memo: &mut HashMap<Key, Val<'ctx>>,
    ) -> R<Val<'ctx>> {
        let m = self.m;
        let cg = self.cg();
        let b = &cg.b;
        let form = *plan
            .forms
            .get(&id)
            .ok_or("an instruction outside the register epilogue's plan")?;
        let key = match form {
            Form::Scalar => (id, -1, -1),
            Form::RowSplat => (id, r, -1),
            Form::ColLoad { per_row: false } => (id, -1, h),
            _ => (id, r, h),
        };
        if let Some(v) = memo.get(&key) {
            return Ok(*v);
        }
        let lanes = t.lanes;
        let ru = r as usize;
        let last = dims.len() - 1;
        let ops = m.operands(id);
        let v = match form {
            Form::Core => t.accs[2 * ru + h as usize],
            Form::Scalar => {
                let idx = self.g.scalar_index();
                let s = self.g.gen1(id, &idx)?;
                splat(cg, s, lanes)?
            }
            Form::RowSplat => {
                // The operand at the row's coordinates (columns are not mapped, or size 1).
                let x = ops[0];
                let xdims = arr_of(m, x)?.dims.to_vec();
                let map = m
                    .ints_attr(id, &AttrKey::Dimensions)
                    .ok_or("broadcast without dimensions")?;
                let multi = map
                    .iter()
                    .zip(&xdims)
                    .map(|(&d, &nx)| coord(cg, at, ru, d as usize, nx))
                    .collect();
                let idx = self.g.index_multi(&xdims, multi)?;
                let s = self.g.gen1(x, &idx)?;
                splat(cg, s, lanes)?
            }
            Form::ColLoad { .. } => {
                let x = ops[0];
                let xdims = arr_of(m, x)?.dims.to_vec();
                let st = strides(&xdims);
                let map = m
                    .ints_attr(id, &AttrKey::Dimensions)
                    .ok_or("broadcast without dimensions")?;
                let mut off = b.build_int_nsw_add(t.col0, cg.c64(h * lanes), "c")?;
                for (p, &d) in map.iter().enumerate() {
                    if d as usize == last || xdims[p] == 1 {
                        continue;
                    }
                    let c = coord(cg, at, ru, d as usize, xdims[p]);
                    off =
                        b.build_int_nsw_add(off, b.build_int_nsw_mul(c, cg.c64(st[p]), "s")?, "o")?;
                }
                let base = self
                    .g
                    .bound_ptr(x)
                    .ok_or("a broadcast operand not in memory")?;
                self.masked_load(plan.acc, lanes, base, off, t.col_masks[h as usize])?
            }
            Form::Load => {
                let base = self.g.bound_ptr(id).ok_or("an operand not in memory")?;
                let off = b.build_int_nsw_add(at.lins[ru], cg.c64(h * lanes), "o")?;
                self.masked_load(plan.acc, lanes, base, off, t.masks[ru][h as usize])?
            }
            Form::Op => {
                let mut xs = Vec::with_capacity(ops.len());
                for &o in ops {
                    xs.push(self.lane_val(plan, dims, t, at, o, r, h, memo)?);
                }
                let ty = arr_of(m, id)?.ty;
                match m.opcode(id) {
                    Opcode::Compare => {
                        let dir = match m.attr(id, &AttrKey::Direction) {
                            Some(AttrValue::Direction(d)) => *d,
                            _ => return Err("compare needs a direction".into()),
                        };
                        let in_ty = arr_of(m, ops[0])?.ty;
                        let cty = m.comparison_type(id, in_ty);
                        ops::compare(cg, dir, cty, in_ty, xs[0], xs[1])?
                    }
                    Opcode::Select => ops::select(cg, xs[0], xs[1], xs[2])?,
                    Opcode::Clamp => ops::clamp(cg, ty, xs[0], xs[1], xs[2])?,
                    op if op.is_elementwise_unary() => ops::unary(cg, op, ty, xs[0])?,
                    op => ops::binary(cg, op, ty, xs[0], xs[1])?,
                }
            }
        };
        memo.insert(key, v);
        Ok(v)
    }

    /// A masked load of `lanes` values of type `ty` at element `off` of `base` (lanes off read
    /// nothing and are zero).
    fn masked_load(
        &self,
        ty: ElementType,
        lanes: i64,
        base: inkwell::values::PointerValue<'ctx>,
        off: IntValue<'ctx>,
        mask: VectorValue<'ctx>,
    ) -> R<Val<'ctx>> {
        let cg = self.cg();
        let vty = cg.reg_ty(ty)?.into_float_type().vec_type(lanes as u32);
        let mload = cg.intrinsic("llvm.masked.load", &[vty.into(), cg.ptr().into()])?;
        let align = cg.i32().const_int(ty.byte_size() as u64, false);
        let q = cg.gep(cg.mem_ty(ty)?, base, off)?;
        cg.call(mload, &[bv(q), bv(align), bv(mask), bv(vty.const_zero())])?
            .ok_or_else(|| "masked load returned nothing".into())
    }
}

/// The coordinate of result dimension `d` (not the last) for tile row `r`, for an operand
/// dimension of size `nx` (`0` where it is 1, as a broadcast reads it).
fn coord<'ctx>(cg: &Cg<'ctx>, at: &TileAt<'ctx>, r: usize, d: usize, nx: i64) -> IntValue<'ctx> {
    if nx == 1 {
        cg.c64(0)
    } else {
        at.coords[r][d]
    }
}

/// `lanes` copies of scalar `v` (a float or an `i1`).
fn splat<'ctx>(cg: &Cg<'ctx>, v: Val<'ctx>, lanes: i64) -> R<Val<'ctx>> {
    match v {
        BasicValueEnum::FloatValue(f) => Ok(bv(splat_float(cg, f, lanes)?)),
        BasicValueEnum::IntValue(i) => Ok(bv(splat_int(cg, i, lanes)?)),
        _ => Err("a splat of a value that is neither a float nor an integer".into()),
    }
}
