//! Dot kernels: a `dot` (an unfused one, or a fusion's, whose root may be an elementwise
//! epilogue of it, such as a bias add and a ReLU, through reshapes too) as a shared-memory-tiled matrix product, on
//! one of two loops sharing one description of the operands (`DotProduct`): tensor cores
//! ([`crate::mma_product`]: warp-level `mma.sync.aligned.m16n8k16` on 64 x 64 block tiles)
//! for dots whose operands are both `f16` or both `bf16` and accumulate in `f32`
//! ([`mma_type`]), where [`TensorCores`] selects them (by default those at least
//! [`MMA_MIN_SIDE`] in `M`, `N` and `K`); the FMA tile loop of [`crate::tiled_product`]
//! (16 x 16 threads, shared with the convolution kernels) for every other dot (`f32`, `f64`
//! and integer dots always: no `tf32`, so `f32` results stay those of an `f32` sum).
//! [`TensorCores::Off`] (`NvptxOptions::kernels`, `axle compile --tensor-cores off`) puts
//! every dot on the FMA loop.
//!
//! The output's dimensions are the batch ones (`B` elements), the left operand's free ones
//! (`M`) and the right operand's free ones (`N`); the contracting ones have `K` elements. The
//! product has `B` batch elements, `M` rows, `N` columns and depth `K`: row `m` of the left
//! tile is the left operand's free elements at `m` (row-major), depth `k` its contracting ones
//! at `k`, and likewise for the right operand's columns.
//!
//! Semantics: on the FMA loop, those of [`crate::tiled_product`]: the shared accumulation type
//! and step (`axle_codegen_llvm::contraction`: `f32` for `f32` and narrower floats, `f64`,
//! wrapping `i64` for integers; a fused multiply-add for `f32` and `f64`), summed in `K` order
//! (the contracting dimensions row-major, the evaluator's order), then converted to the output
//! type once; positions past the edges load zero, which adds nothing. On tensor cores, those
//! of [`crate::mma_product`]: exact products summed in `f32` per 16-deep slice in an order PTX
//! leaves open, so results agree with the evaluator's within the dtype tolerances, not bit
//! for bit.
//!
//! Invariants: every instruction reading the dot reads it at its own row-major position
//! (elementwise ops, reshapes and bitcasts between row-major layouts, which XLA's optimized
//! modules put after dots; checked by [`dot_geometry`]), so binding the dot to the thread's
//! sum is exact. Complex dots are not this kernel's ([`dot_geometry`] gives `None`): a loop
//! kernel computes them one output element per thread by the shared elemental form. Refused,
//! with an error naming the instruction: a dot read otherwise (through a transpose, a
//! slice, ...), and a fusion with several outputs.

use axle_codegen_llvm::cg::numel;
use axle_codegen_llvm::contraction::{acc_type, dot_dims, DotDims};
use axle_codegen_llvm::elemental::{arr_of, Gen};
use axle_codegen_llvm::error::{at, Fail, R};
use axle_ir::{ArrayShape, ElementType, InstId, Module, Opcode};
use inkwell::values::{IntValue, PointerValue};

use crate::launch::LaunchPlan;
use crate::mma_product::{emit_mma_tiled, MmaType};
use crate::tiled_product::{
    elementwise_epilogue, emit_tiled, kernel_insts, ProductShape, TileAt, TileElement, Tiled,
    TiledProduct,
};

/// Which dots run on tensor cores ([`crate::mma_product`]); the others run the FMA tile loop
/// ([`crate::tiled_product`]). Only dots whose operands are both `f16` or both `bf16` and
/// whose accumulation type is `f32` can ([`mma_type`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TensorCores {
    /// Those that can, where the product is at least [`MMA_MIN_SIDE`] in each of `M`, `N`
    /// and `K` (smaller ones would compute mostly padding in 16 x 8 x 16 fragments and 64 x
    /// 64 block tiles; a heuristic, not a measurement: no GPU has timed the two paths).
    #[default]
    Auto,
    /// None: every dot on the FMA tile loop.
    Off,
    /// Every one that can, whatever its size (to test the path on small shapes).
    Always,
}

impl TensorCores {
    /// The setting named `name` (`auto`, `off`, `always`).
    pub fn from_name(name: &str) -> Result<TensorCores, crate::NvptxError> {
        match name {
            "auto" => Ok(TensorCores::Auto),
            "off" => Ok(TensorCores::Off),
            "always" => Ok(TensorCores::Always),
            _ => Err(crate::NvptxError::UnknownTensorCores(name.to_string())),
        }
    }
}

/// The smallest `M`, `N` and `K` for which [`TensorCores::Auto`] picks tensor cores.
pub const MMA_MIN_SIDE: u64 = 16;

/// The geometry of a dot kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DotGeometry {
    /// The `dot`.
    pub dot: InstId,
    /// The kernel's output: the dot or an elementwise epilogue of it.
    pub root: InstId,
    /// The product: `B` batch elements, `M` rows, `N` columns, depth `K`.
    pub product: ProductShape,
    /// The operand type of the tensor-core loop where the dot runs on tensor cores; `None`
    /// for the FMA tile loop.
    pub mma: Option<MmaType>,
}

impl DotGeometry {
    /// The launch plan: one block of 16 x 16 threads per 16 x 16 output tile on the FMA loop,
    /// of 128 threads per 64 x 64 tile on tensor cores.
    pub fn launch_plan(&self) -> Result<LaunchPlan, crate::NvptxError> {
        match self.mma {
            Some(_) => crate::mma_product::launch_plan(&self.product),
            None => self.product.launch_plan(),
        }
    }
}

/// The tensor-core operand type of a dot of operands of types `l` and `r` with output type
/// `out`: both operands `f16` or both `bf16`, accumulated in `f32`.
pub fn mma_type(out: ElementType, l: ElementType, r: ElementType) -> Option<MmaType> {
    let mma = MmaType::of(l, r)?;
    (acc_type(out, l, r).ok()? == ElementType::F32).then_some(mma)
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

/// The dot kernel for instruction `id` (a `dot`, or a fusion computing one), on tensor cores
/// where `tc` selects them for it, or `None` when it computes no dot or a complex one (a loop
/// kernel's); an error naming the
/// instruction when it is a dot this kernel does not cover.
pub fn dot_geometry(m: &Module, id: InstId, tc: TensorCores) -> R<Option<DotGeometry>> {
    if !matches!(m.opcode(id), Opcode::Fusion | Opcode::Dot) {
        return Ok(None);
    }
    let (insts, root) = kernel_insts(m, id)?;
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
        // A loop kernel computes it (`crate::kernels`).
        return Ok(None);
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
    match elementwise_epilogue(m, &insts, dot, root) {
        Ok(()) => {}
        Err(Some(x)) => {
            return Err(refuse(
                m,
                x,
                &format!(
                    "{} reading a dot's result (only elementwise ops, reshapes and row-major bitcasts do)",
                    m.opcode(x).name()
                ),
            ))
        }
        Err(None) => {
            return Err(refuse(
                m,
                root,
                "a fusion output that does not read its dot",
            ))
        }
    }
    let product = ProductShape {
        batch: size(ls, &dd.lb),
        rows: size(ls, &dd.lfree),
        cols: size(rs, &dd.rfree),
        depth: size(ls, &dd.lc),
    };
    let big = [product.rows, product.cols, product.depth]
        .iter()
        .all(|&s| s >= MMA_MIN_SIDE);
    let mma = match tc {
        TensorCores::Off => None,
        TensorCores::Auto if !big => None,
        TensorCores::Auto | TensorCores::Always => mma_type(out.ty, ls.ty, rs.ty),
    };
    Ok(Some(DotGeometry {
        dot,
        root,
        product,
        mma,
    }))
}

/// Sizes of the dimensions `ds` of `s`.
fn sizes(s: &ArrayShape, ds: &[i64]) -> Vec<i64> {
    ds.iter().map(|&d| s.dims[d as usize]).collect()
}

/// A dot's operands as a tiled product.
struct DotProduct {
    l: InstId,
    r: InstId,
    ls: ArrayShape,
    rs: ArrayShape,
    dd: DotDims,
}

impl DotProduct {
    /// The coordinates in operand `s` of batch element `batch`, free elements `free` (of
    /// dimensions `fd`) and contracted elements `k` (of dimensions `cd`).
    fn coords<'ctx>(
        g: &mut Gen<'_, 'ctx>,
        s: &ArrayShape,
        (bd, fd, cd): (&[i64], &[i64], &[i64]),
        (batch, free, k): (IntValue<'ctx>, IntValue<'ctx>, IntValue<'ctx>),
    ) -> R<Vec<IntValue<'ctx>>> {
        let mut multi = vec![g.cg.c64(0); s.rank()];
        for (ds, at) in [(bd, batch), (fd, free), (cd, k)] {
            let idx = g.index_linear(&sizes(s, ds), at)?;
            for (j, &d) in ds.iter().enumerate() {
                multi[d as usize] = idx.multi[j];
            }
        }
        Ok(multi)
    }
}

impl<'ctx> TiledProduct<'ctx> for DotProduct {
    fn lhs(&self, g: &mut Gen<'_, 'ctx>, at: TileAt<'ctx>) -> R<TileElement<'ctx>> {
        let dd = &self.dd;
        let (s, dims) = (&self.ls, (&dd.lb[..], &dd.lfree[..], &dd.lc[..]));
        TileElement::always(self.l, Self::coords(g, s, dims, (at.batch, at.i, at.j))?)
    }

    fn rhs(&self, g: &mut Gen<'_, 'ctx>, at: TileAt<'ctx>) -> R<TileElement<'ctx>> {
        let dd = &self.dd;
        let (s, dims) = (&self.rs, (&dd.rb[..], &dd.rfree[..], &dd.rc[..]));
        TileElement::always(self.r, Self::coords(g, s, dims, (at.batch, at.j, at.i))?)
    }

    fn output(&self, g: &mut Gen<'_, 'ctx>, at: TileAt<'ctx>) -> R<Vec<IntValue<'ctx>>> {
        let dd = &self.dd;
        let mut multi = g.index_linear(&sizes(&self.ls, &dd.lb), at.batch)?.multi;
        multi.extend(g.index_linear(&sizes(&self.ls, &dd.lfree), at.i)?.multi);
        multi.extend(g.index_linear(&sizes(&self.rs, &dd.rfree), at.j)?.multi);
        Ok(multi)
    }
}

/// Emits the body of a dot kernel at the builder's position (the entry block of a kernel whose
/// operands are bound in `g`), storing the output at `out`.
pub(crate) fn emit_dot<'ctx>(
    g: &mut Gen<'_, 'ctx>,
    geo: &DotGeometry,
    out_ty: ElementType,
    out: PointerValue<'ctx>,
) -> R<()> {
    let m = g.m;
    let (l, r) = (m.operands(geo.dot)[0], m.operands(geo.dot)[1]);
    let ls = arr_of(m, l)?.clone();
    let rs = arr_of(m, r)?.clone();
    let acc_ty = acc_type(arr_of(m, geo.dot)?.ty, ls.ty, rs.ty)?;
    let dd = dot_dims(m, geo.dot, ls.rank(), rs.rank())?;
    let product = DotProduct { l, r, ls, rs, dd };
    let tiled = Tiled {
        shape: &geo.product,
        contraction: geo.dot,
        root: geo.root,
        acc_ty,
        masked: false,
    };
    match geo.mma {
        Some(mma) => emit_mma_tiled(g, &tiled, &product, mma, out_ty, out),
        None => emit_tiled(g, &tiled, &product, out_ty, out),
    }
}
