//! Convolution kernels: a `convolution` (an unfused one, or a fusion's, whose root may be an
//! elementwise epilogue of it, such as a bias add and a ReLU) as an implicit GEMM, run by the
//! shared-memory tile loop of [`crate::tiled_product`] (shared with the dot kernels).
//!
//! With `G` groups (`feature_group_count` or `batch_group_count`, whichever exceeds one), the
//! product has `G` batch elements; its rows are the output positions (output batch, then the
//! output's spatial dimensions, row-major), its columns the group's output features, and its
//! depth the kernel's spatial positions (row-major) then the group's input features, the
//! evaluator's order. Row `m`, depth `k` of the left tile is the input element that output
//! position `m` reads through kernel position `k` (stride, padding, lhs and rhs dilation as
//! `axle_codegen_llvm::elemental::window_dim_pos` places it, the group's image for batch
//! groups, the group's input features for feature groups); depth `k`, column `n` of the right
//! tile is the kernel element (reversed where the window is). Both are computed elementally
//! where they are loaded, so fused producers (a pad, a convert) cost one evaluation per load.
//!
//! Semantics: those of the elemental form (`axle_codegen_llvm::contraction::gen_convolution`):
//! the shared accumulation type and step (a fused multiply-add for `f32` and `f64`), the same
//! terms in the same order, rounded to the output type once, so results agree bit for bit
//! with the per-element path and the evaluator. A window position in the padding or in a
//! dilation hole loads zero without computing the input there and, for float types where the
//! window can leave the input ([`ConvGeometry::masked`]), skips its product as the evaluator
//! does (a zero times an infinite weight would add a NaN); integer products of zero add
//! nothing, so integers never need the mask.
//!
//! Not tiled (the kernel planner keeps the per-element loop kernel, the shared elemental
//! form, for them; [`conv_geometry`] returns `None`): complex convolutions, convolutions with
//! one output feature per group (depthwise: a 16-wide column tile would leave 15 of 16
//! threads idle), a fusion computing several convolutions, and a convolution read by anything
//! but elementwise ops of its own dimensions (or not reaching the fusion's root).
//!
//! Invariants: every instruction reading the convolution is elementwise with its dimensions,
//! so binding it to the thread's sum is exact; geometry errors are [`axle_ir::conv_geo()`]'s, naming the
//! instruction.

use axle_codegen_llvm::contraction::acc_type;
use axle_codegen_llvm::elemental::{arr_of, window_dim_pos, Gen};
use axle_codegen_llvm::error::{at, R};
use axle_ir::{conv_geo, ConvGeo, ElementType, InstId, Module, Opcode};
use inkwell::values::{IntValue, PointerValue};

use crate::launch::LaunchPlan;
use crate::tiled_product::{
    elementwise_epilogue, emit_tiled, kernel_insts, ProductShape, TileAt, TileElement, Tiled,
    TiledProduct,
};

/// The geometry of a convolution kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConvGeometry {
    /// The `convolution`.
    pub conv: InstId,
    /// The kernel's output: the convolution or an elementwise epilogue of it.
    pub root: InstId,
    /// The implicit GEMM: groups, output positions, output features per group, and kernel
    /// positions times input features per group.
    pub product: ProductShape,
    /// Whether a window position can fall outside the input (padding, dilation holes) in a
    /// float convolution, so the kernel masks those products out.
    pub masked: bool,
}

impl ConvGeometry {
    /// The launch plan: one block of 16 x 16 threads per output tile.
    pub fn launch_plan(&self) -> Result<LaunchPlan, crate::NvptxError> {
        self.product.launch_plan()
    }
}

/// The tiled convolution kernel for instruction `id` (a `convolution`, or a fusion computing
/// one), or `None` when it computes none or one this kernel leaves to the per-element path
/// (see the module header); an error naming the convolution when its geometry is invalid.
pub fn conv_geometry(m: &Module, id: InstId) -> R<Option<ConvGeometry>> {
    if !matches!(m.opcode(id), Opcode::Fusion | Opcode::Convolution) {
        return Ok(None);
    }
    let (insts, root) = kernel_insts(m, id)?;
    let convs: Vec<InstId> = insts
        .iter()
        .copied()
        .filter(|&x| m.opcode(x) == Opcode::Convolution)
        .collect();
    let [conv] = convs[..] else {
        return Ok(None);
    };
    let out = arr_of(m, conv).map_err(|f| at(m, conv, f))?;
    let (l, r) = (m.operands(conv)[0], m.operands(conv)[1]);
    let ls = arr_of(m, l).map_err(|f| at(m, conv, f))?;
    let rs = arr_of(m, r).map_err(|f| at(m, conv, f))?;
    if out.ty.is_complex() || ls.ty.is_complex() || rs.ty.is_complex() {
        return Ok(None);
    }
    let acc_ty = acc_type(out.ty, ls.ty, rs.ty).map_err(|f| at(m, conv, f))?;
    let geo = conv_geo(m, conv).map_err(|f| at(m, conv, f.into()))?;
    let groups = geo.fgc.max(geo.bgc);
    let per_group = geo.o_ch / groups;
    if per_group < 2 || elementwise_epilogue(m, &insts, conv, root).is_err() {
        return Ok(None);
    }
    let out_sp: Vec<i64> = geo
        .dn
        .output_spatial
        .iter()
        .map(|&d| out.dims[d as usize])
        .collect();
    let n = |v: i64| v.max(0) as u64;
    let positions = out_sp.iter().fold(n(geo.n_out), |a, &s| a * n(s));
    let window = geo.k_sp.iter().fold(1, |a, &s| a * n(s));
    Ok(Some(ConvGeometry {
        conv,
        root,
        product: ProductShape {
            batch: n(groups),
            rows: positions,
            cols: n(per_group),
            depth: window * n(geo.c_in / geo.fgc),
        },
        masked: acc_ty.is_float() && !window_inside(&geo, &out_sp),
    }))
}

/// Whether every window position of every output position is an element of the input (no
/// padding or dilation hole is ever reached), for output spatial sizes `out_sp`.
fn window_inside(geo: &ConvGeo, out_sp: &[i64]) -> bool {
    geo.window
        .iter()
        .zip(out_sp)
        .zip(geo.k_sp.iter().zip(&geo.in_sp))
        .all(|((w, &o), (&k, &i))| {
            let last = (o - 1) * w.stride - w.pad_lo + (k - 1) * w.rhs_dilate;
            o == 0 || k == 0 || (w.lhs_dilate == 1 && w.pad_lo <= 0 && last < i)
        })
}

/// A convolution's operands as an implicit GEMM.
struct ConvProduct {
    l: InstId,
    r: InstId,
    lrank: usize,
    rrank: usize,
    geo: ConvGeo,
    /// Output batch, then output spatial sizes: the rows.
    positions: Vec<i64>,
    /// Kernel spatial sizes, then input features per group: the depth.
    depth: Vec<i64>,
    /// Output features per group.
    per_group: i64,
}

impl ConvProduct {
    /// The output feature of column `at.j` of group `at.batch`.
    fn feature<'ctx>(&self, g: &Gen<'_, 'ctx>, at: TileAt<'ctx>) -> R<IntValue<'ctx>> {
        let b = &g.cg.b;
        let first = b.build_int_nuw_mul(at.batch, g.cg.c64(self.per_group), "o0")?;
        Ok(b.build_int_nuw_add(first, at.j, "o")?)
    }
}

impl<'ctx> TiledProduct<'ctx> for ConvProduct {
    fn lhs(&self, g: &mut Gen<'_, 'ctx>, at: TileAt<'ctx>) -> R<TileElement<'ctx>> {
        let cg = g.cg;
        let b = &cg.b;
        let group = at.batch;
        let pos = g.index_linear(&self.positions, at.i)?.multi;
        let win = g.index_linear(&self.depth, at.j)?.multi;
        let (dn, nsp) = (&self.geo.dn, self.geo.k_sp.len());
        let mut multi = vec![cg.c64(0); self.lrank];
        let mut valid = cg.i1().const_all_ones();
        for d in 0..nsp {
            let (q, here) = window_dim_pos(
                cg,
                &self.geo.window[d],
                self.geo.in_sp[d],
                pos[1 + d],
                win[d],
            )?;
            valid = b.build_and(valid, here, "valid")?;
            multi[dn.input_spatial[d] as usize] = q;
        }
        let (n, ic) = (pos[0], win[nsp]);
        multi[dn.input_batch as usize] = if self.geo.bgc > 1 {
            let first = b.build_int_nuw_mul(group, cg.c64(self.geo.n_out), "img0")?;
            b.build_int_nuw_add(first, n, "img")?
        } else {
            n
        };
        multi[dn.input_feature as usize] = if self.geo.fgc > 1 {
            let per = self.geo.c_in / self.geo.fgc;
            let first = b.build_int_nuw_mul(group, cg.c64(per), "c0")?;
            b.build_int_nuw_add(first, ic, "c")?
        } else {
            ic
        };
        Ok(TileElement {
            op: self.l,
            multi,
            valid: Some(valid),
        })
    }

    fn rhs(&self, g: &mut Gen<'_, 'ctx>, at: TileAt<'ctx>) -> R<TileElement<'ctx>> {
        let cg = g.cg;
        let win = g.index_linear(&self.depth, at.i)?.multi;
        let (dn, nsp) = (&self.geo.dn, self.geo.k_sp.len());
        let mut multi = vec![cg.c64(0); self.rrank];
        for d in 0..nsp {
            multi[dn.kernel_spatial[d] as usize] = if self.geo.window[d].reversal {
                let last = cg.c64(self.geo.k_sp[d] - 1);
                cg.b.build_int_nsw_sub(last, win[d], "kr")?
            } else {
                win[d]
            };
        }
        multi[dn.kernel_input_feature as usize] = win[nsp];
        multi[dn.kernel_output_feature as usize] = self.feature(g, at)?;
        TileElement::always(self.r, multi)
    }

    fn output(&self, g: &mut Gen<'_, 'ctx>, at: TileAt<'ctx>) -> R<Vec<IntValue<'ctx>>> {
        let dn = &self.geo.dn;
        let pos = g.index_linear(&self.positions, at.i)?.multi;
        let mut multi = vec![g.cg.c64(0); 2 + dn.output_spatial.len()];
        multi[dn.output_batch as usize] = pos[0];
        multi[dn.output_feature as usize] = self.feature(g, at)?;
        for (d, &od) in dn.output_spatial.iter().enumerate() {
            multi[od as usize] = pos[1 + d];
        }
        Ok(multi)
    }
}

/// Emits the body of a convolution kernel at the builder's position (the entry block of a
/// kernel whose operands are bound in `g`), storing the output at `out`.
pub(crate) fn emit_convolution<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    cgeo: &ConvGeometry,
    out_ty: ElementType,
    out: PointerValue<'ctx>,
) -> R<()> {
    let m = g.m;
    let conv = cgeo.conv;
    let (l, r) = (m.operands(conv)[0], m.operands(conv)[1]);
    let (ls, rs, os) = (arr_of(m, l)?, arr_of(m, r)?, arr_of(m, conv)?);
    let acc_ty = acc_type(os.ty, ls.ty, rs.ty)?;
    let geo = conv_geo(m, conv)?;
    let mut positions = vec![geo.n_out];
    positions.extend(geo.dn.output_spatial.iter().map(|&d| os.dims[d as usize]));
    let mut depth = geo.k_sp.clone();
    depth.push(geo.c_in / geo.fgc);
    let product = ConvProduct {
        l,
        r,
        lrank: ls.rank(),
        rrank: rs.rank(),
        per_group: geo.o_ch / geo.fgc.max(geo.bgc),
        geo,
        positions,
        depth,
    };
    let tiled = Tiled {
        shape: &cgeo.product,
        contraction: conv,
        root: cgeo.root,
        acc_ty,
        masked: cgeo.masked,
    };
    emit_tiled(g, &tiled, &product, out_ty, out)
}
