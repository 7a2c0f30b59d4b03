//! `dynamic-padder`: rewrites bounded dynamic shapes into static programs, as XLA's
//! `DynamicDimensionInference` and `DynamicPadder` do, so that every backend runs
//! `set-dimension-size`, `get-dimension-size` and `dynamic-reshape` the same way.
//!
//! A bounded dynamic dimension (`f32[<=8]`) is stored padded to its bound; its runtime size is
//! an `s32` scalar tracked beside the value. Sizes come from `set-dimension-size` (the size
//! operand, as given) and `dynamic-reshape` (its size operands); a dimension no size reaches
//! runs at its bound. The pass walks each computation in operand order, infers which dimension
//! of which value has a tracked size, and rewrites:
//!
//! - `set-dimension-size` into its operand (the data is unchanged), `get-dimension-size` of a
//!   tracked dimension into its size;
//! - elementwise ops: unchanged where their operands' sizes agree; where two differ the
//!   result's is the larger if the other is 1 (an operand of size 1 repeats its first element,
//!   XLA's implicit broadcast), else the smaller, as XLA's inference has it;
//! - `broadcast`, `transpose`, `tuple`, `get-tuple-element` and a `slice` that keeps a tracked
//!   dimension whole: unchanged, the sizes follow the dimensions (a slice of part of a tracked
//!   dimension is static, as in XLA);
//! - `reduce` over a tracked dimension: each input's padding replaced by its init first (the
//!   reducer's identity, so only the defined elements count);
//! - `dot` over a tracked contracting dimension: both operands' padding zeroed first;
//! - `reshape` (one tracked dimension in, at most one dimension flagged `<=` out) and
//!   `dynamic-reshape`: unchanged where the padding stays in place (the tracked dimension keeps
//!   its bound and the elements inside it), otherwise a gather from the flattened operand
//!   that reads logical element `k` of the result from logical element `k` of the operand
//!   (row-major over the runtime sizes);
//! - `concatenate` along a tracked dimension, and `reverse` of one: a gather that packs the
//!   defined elements (the result's size is the sum of the sizes, or the size);
//! - `pad` of a tracked dimension: a gather placing the defined elements after the low edge
//!   and between the interior padding, the padding value elsewhere (the size is `low + size +
//!   (size - 1) * interior + high`);
//! - `gather` whose slices take a tracked operand dimension whole: unchanged, the size goes to
//!   its offset dimension of the result;
//! - `sort` along a tracked dimension: XLA's rewrite, a `pred` operand marking the defined
//!   elements and a comparator (calling the original) that puts them first;
//! - `scatter` (one operand): the operand's sizes; updates past a tracked scatter size get an
//!   index out of bounds, so they are skipped; a tracked update window must cover an operand
//!   dimension of the same size whole;
//! - `reduce-window`: each input's padding replaced by its init, the result's size the window
//!   count for the runtime size.
//!
//! Any other op reading a tracked dimension (a gather indexing into it, other scatters,
//! convolutions, loops and conditionals, ...) is refused with an error naming the instruction, its op and "dynamic
//! dimension", never run at its bound. A tracked value may not leave a computation other than
//! the entry. The entry's result keeps its bound with every element past a tracked size zero.
//!
//! A size is used as given, like XLA: `get-dimension-size` reads it back unchanged (also when
//! it is negative or past the bound), masks treat a size below 0 as 0 and one past the bound
//! as the bound, and a reshape or concatenation with sizes outside `[0, bound]` reads
//! elements at clamped positions (XLA's answer is then undefined too).
//!
//! After the rewrite no shape of a rewritten module is dynamic. A module without
//! `set-dimension-size` or `dynamic-reshape` is left as it is (its bounded dimensions run at
//! their bound).
//!
//! Counters: `set-dimension-size`, `get-dimension-size`, `masked` (inputs of a reduce or dot
//! whose padding was filled), `gathers` (reshapes, concatenations, reverses and pads that
//! pack), `sorts`.

use hashbrown::HashMap;

use axle_ir::traversal::topo_order;
use axle_ir::{
    ArrayLayout, ArrayLiteral, ArrayShape, Attr, AttrKey, AttrValue, Changed, CompId,
    ComparisonDirection, ConstValue, ElementType, InstId, Layout, LayoutId, Literal, Module,
    NewInst, Opcode, Pass, PassCx, PassError, Rewriter, Shape, ShapeId,
};

use crate::rewrite::{scalar_literal, Num};

/// The `dynamic-padder` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct DynamicPadder;

/// The runtime sizes of one value: per dimension of an array, the `s32` scalar holding its
/// size (`None`: the dimension runs at its bound); per element of a tuple, its sizes.
#[derive(Clone, Debug, PartialEq)]
enum Sizes {
    Array(Vec<Option<InstId>>),
    Tuple(Vec<Sizes>),
}

impl Sizes {
    fn tracked(&self) -> bool {
        match self {
            Sizes::Array(d) => d.iter().any(Option::is_some),
            Sizes::Tuple(t) => t.iter().any(Sizes::tracked),
        }
    }

    fn dims(&self) -> &[Option<InstId>] {
        match self {
            Sizes::Array(d) => d,
            Sizes::Tuple(_) => &[],
        }
    }
}

/// The rewrite of one computation.
struct Padder<'r, 'm> {
    rw: &'r mut Rewriter<'m>,
    comp: CompId,
    /// Sizes of the original instructions that have a tracked dimension.
    sizes: HashMap<InstId, Sizes>,
    counts: Vec<(&'static str, u64)>,
    /// Whether the module writes layouts: new arrays then get the default one.
    layouts: bool,
}

fn refuse(m: &Module, id: InstId, what: &str) -> PassError {
    PassError::new(format!(
        "dynamic-padder: %{} ({}) {what} a dynamic dimension is not supported",
        m.name(id),
        m.opcode(id).name()
    ))
}

/// A new instruction without a name.
fn new_inst(
    opcode: Opcode,
    shape: ShapeId,
    layout: LayoutId,
    operands: Vec<InstId>,
    attrs: Vec<Attr>,
) -> NewInst {
    NewInst {
        opcode,
        shape,
        layout,
        operands,
        attrs,
        name: None,
    }
}

/// The array shape of `v`, operand or result of `id`, or a refusal naming `id`.
fn array_of(m: &Module, v: InstId, id: InstId) -> Result<ArrayShape, PassError> {
    m.array_shape(v)
        .cloned()
        .ok_or_else(|| refuse(m, id, "of a tuple with"))
}

/// The first entry of `id`'s `dimensions=`, or a refusal.
fn first_dim(m: &Module, id: InstId) -> Result<usize, PassError> {
    m.ints_attr(id, &AttrKey::Dimensions)
        .and_then(|d| d.first().copied())
        .and_then(|d| usize::try_from(d).ok())
        .ok_or_else(|| refuse(m, id, "without dimensions= on"))
}

/// The sizes of an op's `n` results of one shape: an array's, or a tuple of `n` of them.
fn per_result(dims: Vec<Option<InstId>>, n: usize) -> Sizes {
    if n == 1 {
        Sizes::Array(dims)
    } else {
        Sizes::Tuple(vec![Sizes::Array(dims); n])
    }
}

/// The static form of shape `s` (every dynamic flag cleared).
fn static_shape(m: &mut Module, s: ShapeId) -> ShapeId {
    match m.shape_of(s).clone() {
        Shape::Array(a) if a.is_dynamic() => {
            m.intern_shape(Shape::Array(ArrayShape::new(a.ty, &a.dims)))
        }
        Shape::Tuple(elems) => {
            let new: Vec<ShapeId> = elems.iter().map(|&e| static_shape(m, e)).collect();
            if new[..] == elems[..] {
                s
            } else {
                m.intern_shape(Shape::Tuple(new.into()))
            }
        }
        _ => s,
    }
}

fn zero_of(ty: ElementType) -> Num {
    if ty.is_float() {
        Num::Float(0.0)
    } else {
        Num::Int(0)
    }
}

impl Padder<'_, '_> {
    fn m(&self) -> &Module {
        self.rw.module()
    }

    fn count(&mut self, key: &'static str) {
        match self.counts.iter_mut().find(|(k, _)| *k == key) {
            Some((_, n)) => *n += 1,
            None => self.counts.push((key, 1)),
        }
    }

    fn push(
        &mut self,
        op: Opcode,
        ty: ElementType,
        dims: &[i64],
        operands: &[InstId],
        attrs: Vec<Attr>,
    ) -> InstId {
        let m = self.rw.module_mut();
        let shape = m.intern_shape(Shape::Array(ArrayShape::new(ty, dims)));
        let layout = if self.layouts && !dims.is_empty() {
            m.intern_layout(Layout::Array(ArrayLayout::row_major(dims.len())))
        } else {
            m.no_layout()
        };
        self.rw.add(
            self.comp,
            new_inst(op, shape, layout, operands.to_vec(), attrs),
        )
    }

    fn constant(&mut self, ty: ElementType, v: Num) -> InstId {
        let c = self.push(Opcode::Constant, ty, &[], &[], Vec::new());
        self.rw.module_mut().set_constant(
            c,
            ConstValue::Literal(Literal::Array(scalar_literal(ty, v))),
        );
        c
    }

    fn s32(&mut self, v: i64) -> InstId {
        self.constant(ElementType::S32, Num::Int(v as i128))
    }

    /// `s` (a scalar) broadcast to `dims`.
    fn splat(&mut self, s: InstId, ty: ElementType, dims: &[i64]) -> InstId {
        if dims.is_empty() {
            return s;
        }
        self.push(
            Opcode::Broadcast,
            ty,
            dims,
            &[s],
            vec![(AttrKey::Dimensions, AttrValue::Ints(Box::new([])))],
        )
    }

    fn iota(&mut self, dims: &[i64], d: usize) -> InstId {
        self.push(
            Opcode::Iota,
            ElementType::S32,
            dims,
            &[],
            vec![(AttrKey::IotaDimension, AttrValue::Int(d as i64))],
        )
    }

    fn binary(
        &mut self,
        op: Opcode,
        ty: ElementType,
        dims: &[i64],
        a: InstId,
        b: InstId,
    ) -> InstId {
        self.push(op, ty, dims, &[a, b], Vec::new())
    }

    fn compare(&mut self, dir: ComparisonDirection, dims: &[i64], a: InstId, b: InstId) -> InstId {
        self.push(
            Opcode::Compare,
            ElementType::Pred,
            dims,
            &[a, b],
            vec![(AttrKey::Direction, AttrValue::Direction(dir))],
        )
    }

    /// `acc op x`, or `x` where nothing is accumulated yet.
    fn fold(
        &mut self,
        op: Opcode,
        ty: ElementType,
        dims: &[i64],
        acc: Option<InstId>,
        x: InstId,
    ) -> InstId {
        match acc {
            None => x,
            Some(a) => self.binary(op, ty, dims, a, x),
        }
    }

    /// `v`, or `s32` zeros of `dims` where nothing was summed.
    fn or_zero(&mut self, v: Option<InstId>, dims: &[i64]) -> InstId {
        match v {
            Some(v) => v,
            None => {
                let z = self.s32(0);
                self.splat(z, ElementType::S32, dims)
            }
        }
    }

    /// `pred[dims]`: true where every tracked dimension `d` (with its size) is below its size.
    fn valid(&mut self, dims: &[i64], tracked: &[(usize, InstId)]) -> Option<InstId> {
        let mut acc = None;
        for &(d, size) in tracked {
            let i = self.iota(dims, d);
            let s = self.splat(size, ElementType::S32, dims);
            let lt = self.compare(ComparisonDirection::Lt, dims, i, s);
            acc = Some(self.fold(Opcode::And, ElementType::Pred, dims, acc, lt));
        }
        acc
    }

    /// `x` (an array of `ty[dims]`) with `fill` (a scalar) wherever a tracked dimension's index
    /// is past its size.
    fn mask(&mut self, x: InstId, tracked: &[(usize, InstId)], fill: InstId) -> InstId {
        let a = self
            .m()
            .array_shape(x)
            .expect("masked values are arrays")
            .clone();
        let Some(valid) = self.valid(&a.dims, tracked) else {
            return x;
        };
        let f = self.splat(fill, a.ty, &a.dims);
        self.push(Opcode::Select, a.ty, &a.dims, &[valid, x, f], Vec::new())
    }

    /// The product of the scalars `xs` (`1` for none).
    fn product(&mut self, xs: &[InstId]) -> InstId {
        let mut acc = None;
        for &x in xs {
            acc = Some(self.fold(Opcode::Multiply, ElementType::S32, &[], acc, x));
        }
        acc.unwrap_or_else(|| self.s32(1))
    }

    /// The runtime size of every dimension of a value with `bounds` and tracked `sizes`: the
    /// tracked size, or a constant bound.
    fn runtime_sizes(&mut self, bounds: &[i64], sizes: &[Option<InstId>]) -> Vec<InstId> {
        (0..bounds.len())
            .map(|d| match sizes.get(d).copied().flatten() {
                Some(s) => s,
                None => self.s32(bounds[d]),
            })
            .collect()
    }

    /// Gathers from `x` (padded to `in_dims`) the element whose index along each of its
    /// dimensions is `src[k]` (`s32[out_dims]` each), positions clamped into `x`.
    fn gather_at(&mut self, x: InstId, src: &[InstId], out_dims: &[i64]) -> InstId {
        let a = self
            .m()
            .array_shape(x)
            .expect("gathered values are arrays")
            .clone();
        let n: i64 = a.dims.iter().product();
        let mut flat = None;
        let mut stride = 1i64;
        for k in (0..a.rank()).rev() {
            let st = self.s32(stride);
            let st = self.splat(st, ElementType::S32, out_dims);
            let term = self.binary(Opcode::Multiply, ElementType::S32, out_dims, src[k], st);
            flat = Some(self.fold(Opcode::Add, ElementType::S32, out_dims, flat, term));
            stride *= a.dims[k];
        }
        let flat = self.or_zero(flat, out_dims);
        let lo = self.s32(0);
        let lo = self.splat(lo, ElementType::S32, out_dims);
        let hi = self.s32((n - 1).max(0));
        let hi = self.splat(hi, ElementType::S32, out_dims);
        let p = self.binary(Opcode::Maximum, ElementType::S32, out_dims, flat, lo);
        let p = self.binary(Opcode::Minimum, ElementType::S32, out_dims, p, hi);
        let mut idx_dims = out_dims.to_vec();
        idx_dims.push(1);
        let idx = self.push(
            Opcode::Reshape,
            ElementType::S32,
            &idx_dims,
            &[p],
            Vec::new(),
        );
        let xf = self.push(Opcode::Reshape, a.ty, &[n], &[x], Vec::new());
        self.push(
            Opcode::Gather,
            a.ty,
            out_dims,
            &[xf, idx],
            vec![
                (AttrKey::OffsetDims, AttrValue::Ints(Box::new([]))),
                (AttrKey::CollapsedSliceDims, AttrValue::Ints(Box::new([0]))),
                (AttrKey::StartIndexMap, AttrValue::Ints(Box::new([0]))),
                (
                    AttrKey::IndexVectorDim,
                    AttrValue::Int(out_dims.len() as i64),
                ),
                (AttrKey::SliceSizes, AttrValue::Ints(Box::new([1]))),
            ],
        )
    }

    /// A reshape of `x` (runtime sizes `in_sizes`) to `out_dims` (runtime sizes `out_sizes`):
    /// logical element `k` of the result (row-major over `out_sizes`) is logical element `k` of
    /// `x` (row-major over `in_sizes`).
    fn reshape_gather(
        &mut self,
        x: InstId,
        in_sizes: &[InstId],
        out_dims: &[i64],
        out_sizes: &[InstId],
    ) -> InstId {
        let od = out_dims;
        // The logical linear index of each result position.
        let mut lin: Option<InstId> = None;
        for k in 0..od.len() {
            let o = self.iota(od, k);
            let st = self.product(&out_sizes[k + 1..]);
            let st = self.splat(st, ElementType::S32, od);
            let term = self.binary(Opcode::Multiply, ElementType::S32, od, o, st);
            lin = Some(self.fold(Opcode::Add, ElementType::S32, od, lin, term));
        }
        let lin = self.or_zero(lin, od);
        // Its index along each operand dimension; divisors of at least 1 (a size of 0 leaves
        // nothing defined to read).
        let one = self.s32(1);
        let mut src = Vec::with_capacity(in_sizes.len());
        for k in 0..in_sizes.len() {
            let st = self.product(&in_sizes[k + 1..]);
            let st = self.binary(Opcode::Maximum, ElementType::S32, &[], st, one);
            let st = self.splat(st, ElementType::S32, od);
            let q = self.binary(Opcode::Divide, ElementType::S32, od, lin, st);
            let sz = self.binary(Opcode::Maximum, ElementType::S32, &[], in_sizes[k], one);
            let sz = self.splat(sz, ElementType::S32, od);
            src.push(self.binary(Opcode::Remainder, ElementType::S32, od, q, sz));
        }
        self.count("gathers");
        self.gather_at(x, &src, od)
    }

    /// The tracked sizes of `o`'s dimensions (empty where it has none).
    fn dims_of(&self, o: InstId) -> Vec<Option<InstId>> {
        self.sizes_of(o)
            .map(|s| s.dims().to_vec())
            .unwrap_or_default()
    }

    /// The sizes of operand `o` (an original id) of the instruction being rewritten.
    fn sizes_of(&self, o: InstId) -> Option<&Sizes> {
        self.sizes.get(&o)
    }

    /// Rewrites `id` (its operands already rewritten) and records its sizes.
    fn visit(&mut self, id: InstId) -> Result<(), PassError> {
        use Opcode::*;
        let m = self.m();
        let op = m.opcode(id);
        let operands: Vec<InstId> = m.operands(id).to_vec();
        let any_tracked = operands
            .iter()
            .any(|o| self.sizes_of(*o).is_some_and(Sizes::tracked));
        if !any_tracked && !matches!(op, SetDimensionSize | DynamicReshape) {
            return Ok(());
        }
        let ops: Vec<InstId> = operands.iter().map(|&o| self.rw.resolve(o)).collect();
        let rank = m.array_shape(id).map_or(0, ArrayShape::rank);
        let opnd_dims = |k: usize| -> Vec<Option<InstId>> { self.dims_of(operands[k]) };
        let dim_at = |v: &[Option<InstId>], d: usize| v.get(d).copied().flatten();
        let out: Sizes = match op {
            SetDimensionSize => {
                let d = first_dim(m, id)?;
                let mut s = opnd_dims(0);
                s.resize(rank, None);
                if d >= rank {
                    return Err(refuse(m, id, "naming a missing dimension as"));
                }
                s[d] = Some(ops[1]);
                self.rw.replace_all_uses(id, ops[0]);
                self.count("set-dimension-size");
                Sizes::Array(s)
            }
            GetDimensionSize => {
                let d = m
                    .ints_attr(id, &AttrKey::Dimensions)
                    .and_then(|d| d.first().copied())
                    .unwrap_or(0) as usize;
                if let Some(s) = dim_at(&opnd_dims(0), d) {
                    self.rw.replace_all_uses(id, s);
                    self.count("get-dimension-size");
                }
                return Ok(());
            }
            _ if op.is_elementwise() && (op != BitcastConvert || self.same_rank(id, ops[0])) => {
                self.elementwise(id, &operands, &ops, rank)
            }
            Broadcast => {
                let map = m
                    .ints_attr(id, &AttrKey::Dimensions)
                    .unwrap_or(&[])
                    .to_vec();
                let od = opnd_dims(0);
                let mut s = vec![None; rank];
                for (k, &d) in map.iter().enumerate() {
                    if let Some(slot) = s.get_mut(d as usize) {
                        *slot = dim_at(&od, k);
                    }
                }
                Sizes::Array(s)
            }
            Transpose => {
                let perm = m
                    .ints_attr(id, &AttrKey::Dimensions)
                    .unwrap_or(&[])
                    .to_vec();
                let od = opnd_dims(0);
                Sizes::Array(perm.iter().map(|&p| dim_at(&od, p as usize)).collect())
            }
            Slice => {
                let Some(AttrValue::Slice(sl)) = m.attr(id, &AttrKey::Slice) else {
                    return Err(refuse(m, id, "without slice= on"));
                };
                let sl = sl.clone();
                let bounds = m
                    .array_shape(ops[0])
                    .map(|a| a.dims.to_vec())
                    .unwrap_or_default();
                let od = opnd_dims(0);
                Sizes::Array(
                    (0..rank)
                        .map(|d| {
                            let [start, limit, stride] = sl[d];
                            let whole = start == 0 && stride == 1 && limit == bounds[d];
                            dim_at(&od, d).filter(|_| whole)
                        })
                        .collect(),
                )
            }
            Tuple => Sizes::Tuple(
                operands
                    .iter()
                    .map(|o| {
                        self.sizes
                            .get(o)
                            .cloned()
                            .unwrap_or(Sizes::Array(Vec::new()))
                    })
                    .collect(),
            ),
            GetTupleElement => {
                let k = match m.attr(id, &AttrKey::Index) {
                    Some(AttrValue::Int(k)) => *k as usize,
                    _ => return Err(refuse(m, id, "without index= on")),
                };
                match self.sizes_of(operands[0]) {
                    Some(Sizes::Tuple(t)) => t.get(k).cloned().unwrap_or(Sizes::Array(Vec::new())),
                    _ => return Err(refuse(m, id, "of a tuple with")),
                }
            }
            Reduce => self.reduce(id, &operands, &ops)?,
            Dot => self.dot(id, &operands, &ops)?,
            Reshape | DynamicReshape => self.reshape(id, &operands, &ops)?,
            Concatenate => self.concatenate(id, &operands, &ops)?,
            Reverse => self.reverse(id, &operands, &ops)?,
            Pad => self.pad(id, &operands, &ops)?,
            Gather => self.gather(id, &operands)?,
            Sort => self.sort(id, &operands, &ops)?,
            Scatter => self.scatter(id, &operands, &ops)?,
            ReduceWindow => self.reduce_window(id, &operands, &ops)?,
            _ => return Err(refuse(m, id, "over")),
        };
        if out.tracked() {
            self.sizes.insert(id, out);
        }
        Ok(())
    }

    /// An elementwise op: each dimension's size is its operands' (XLA's rule where two
    /// differ: the larger if the other is 1, an implicit broadcast, else the smaller), and an
    /// operand whose size there is 1 repeats its first element along it.
    fn elementwise(
        &mut self,
        id: InstId,
        operands: &[InstId],
        ops: &[InstId],
        rank: usize,
    ) -> Sizes {
        let per: Vec<Vec<Option<InstId>>> = operands
            .iter()
            .map(|o| {
                let mut v = self.dims_of(*o);
                if v.len() != rank {
                    v.clear();
                }
                v.resize(rank, None);
                v
            })
            .collect();
        let mut s = vec![None; rank];
        let mut new_ops = ops.to_vec();
        for (d, sd) in s.iter_mut().enumerate() {
            let at: Vec<(usize, InstId)> = per
                .iter()
                .enumerate()
                .filter_map(|(k, v)| v[d].map(|x| (k, x)))
                .collect();
            let mut distinct: Vec<InstId> = Vec::new();
            for &(_, x) in &at {
                if !distinct.contains(&x) {
                    distinct.push(x);
                }
            }
            let Some((&first, rest)) = distinct.split_first() else {
                continue;
            };
            if rest.is_empty() {
                *sd = Some(first);
                continue;
            }
            let one = self.s32(1);
            let mut acc = first;
            for &b in rest {
                let mut needs = None;
                for (x, y) in [(b, acc), (acc, b)] {
                    let lt = self.compare(ComparisonDirection::Lt, &[], x, y);
                    let is1 = self.compare(ComparisonDirection::Eq, &[], x, one);
                    let both = self.binary(Opcode::And, ElementType::Pred, &[], is1, lt);
                    needs = Some(self.fold(Opcode::Or, ElementType::Pred, &[], needs, both));
                }
                let mx = self.binary(Opcode::Maximum, ElementType::S32, &[], b, acc);
                let mn = self.binary(Opcode::Minimum, ElementType::S32, &[], b, acc);
                let needs = needs.expect("two sizes compared");
                acc = self.push(
                    Opcode::Select,
                    ElementType::S32,
                    &[],
                    &[needs, mx, mn],
                    Vec::new(),
                );
            }
            *sd = Some(acc);
            for &(k, size) in &at {
                new_ops[k] = self.repeat_first_if_one(new_ops[k], d, size, one);
            }
        }
        if new_ops[..] != ops[..] {
            self.rw.set_operands(id, &new_ops);
        }
        Sizes::Array(s)
    }

    /// `x` with its first element along `d` repeated along it where `size` is 1.
    fn repeat_first_if_one(&mut self, x: InstId, d: usize, size: InstId, one: InstId) -> InstId {
        let Some(a) = self.m().array_shape(x).cloned() else {
            return x;
        };
        let mut sdims = a.dims.to_vec();
        sdims[d] = 1;
        let bounds: Vec<[i64; 3]> = (0..a.rank())
            .map(|j| [0, if j == d { 1 } else { a.dims[j] }, 1])
            .collect();
        let sl = self.push(
            Opcode::Slice,
            a.ty,
            &sdims,
            &[x],
            vec![(AttrKey::Slice, AttrValue::Slice(bounds.into()))],
        );
        let rdims: Vec<i64> = (0..a.rank())
            .filter(|&j| j != d)
            .map(|j| a.dims[j])
            .collect();
        let r = self.push(Opcode::Reshape, a.ty, &rdims, &[sl], Vec::new());
        let keep: Vec<i64> = (0..a.rank() as i64).filter(|&j| j != d as i64).collect();
        let b = self.push(
            Opcode::Broadcast,
            a.ty,
            &a.dims,
            &[r],
            vec![(AttrKey::Dimensions, AttrValue::Ints(keep.into()))],
        );
        let is1 = self.compare(ComparisonDirection::Eq, &[], size, one);
        let p = self.splat(is1, ElementType::Pred, &a.dims);
        self.push(Opcode::Select, a.ty, &a.dims, &[p, b, x], Vec::new())
    }

    fn same_rank(&self, a: InstId, b: InstId) -> bool {
        let m = self.m();
        m.array_shape(a).map(ArrayShape::rank) == m.array_shape(b).map(ArrayShape::rank)
    }

    fn reduce(
        &mut self,
        id: InstId,
        operands: &[InstId],
        ops: &[InstId],
    ) -> Result<Sizes, PassError> {
        let m = self.m();
        let n = ops.len() / 2;
        let dims = m
            .ints_attr(id, &AttrKey::Dimensions)
            .unwrap_or(&[])
            .to_vec();
        let od = self.merged_dims(&operands[..n]);
        self.refuse_tracked_inits(id, &operands[n..])?;
        let tracked: Vec<(usize, InstId)> = dims
            .iter()
            .filter_map(|&d| {
                od.get(d as usize)
                    .copied()
                    .flatten()
                    .map(|s| (d as usize, s))
            })
            .collect();
        self.mask_with_inits(id, ops, &tracked);
        let kept: Vec<Option<InstId>> = (0..od.len())
            .filter(|d| !dims.contains(&(*d as i64)))
            .map(|d| od[d])
            .collect();
        Ok(per_result(kept, n))
    }

    /// The tracked sizes of `operands` (arrays of one shape) merged: per dimension, the first
    /// operand's that has one.
    fn merged_dims(&self, operands: &[InstId]) -> Vec<Option<InstId>> {
        let mut acc: Vec<Option<InstId>> = Vec::new();
        for &o in operands {
            let s = self.dims_of(o);
            acc.resize(acc.len().max(s.len()), None);
            for (slot, v) in acc.iter_mut().zip(s) {
                *slot = slot.or(v);
            }
        }
        acc
    }

    /// Refuses `id` where one of its init values (`inits`) has a tracked size.
    fn refuse_tracked_inits(&self, id: InstId, inits: &[InstId]) -> Result<(), PassError> {
        if inits
            .iter()
            .any(|&o| self.sizes_of(o).is_some_and(Sizes::tracked))
        {
            return Err(refuse(self.m(), id, "with an init of"));
        }
        Ok(())
    }

    /// Replaces the padding of each input of `id` (its first half of `ops`) along `tracked` by
    /// that input's init (the second half).
    fn mask_with_inits(&mut self, id: InstId, ops: &[InstId], tracked: &[(usize, InstId)]) {
        if tracked.is_empty() {
            return;
        }
        let n = ops.len() / 2;
        let mut new_ops = ops.to_vec();
        for k in 0..n {
            new_ops[k] = self.mask(ops[k], tracked, ops[n + k]);
        }
        self.rw.set_operands(id, &new_ops);
        self.count("masked");
    }

    fn dot(&mut self, id: InstId, operands: &[InstId], ops: &[InstId]) -> Result<Sizes, PassError> {
        let m = self.m();
        let list = |k: AttrKey| m.ints_attr(id, &k).unwrap_or(&[]).to_vec();
        let (lb, lc) = (
            list(AttrKey::LhsBatchDims),
            list(AttrKey::LhsContractingDims),
        );
        let (rb, rc) = (
            list(AttrKey::RhsBatchDims),
            list(AttrKey::RhsContractingDims),
        );
        if ops.len() != 2 {
            return Err(refuse(m, id, "(a sparse dot) over"));
        }
        let lr = m.array_shape(ops[0]).map_or(0, ArrayShape::rank);
        let rr = m.array_shape(ops[1]).map_or(0, ArrayShape::rank);
        let get = |s: Option<&Sizes>, n: usize| {
            let mut v = s.map(|s| s.dims().to_vec()).unwrap_or_default();
            v.resize(n, None);
            v
        };
        let ls = get(self.sizes_of(operands[0]), lr);
        let rs = get(self.sizes_of(operands[1]), rr);
        let (mut lt, mut rt) = (Vec::new(), Vec::new());
        for (&l, &r) in lc.iter().zip(&rc) {
            if let Some(s) = ls[l as usize].or(rs[r as usize]) {
                lt.push((l as usize, s));
                rt.push((r as usize, s));
            }
        }
        if !lt.is_empty() {
            let ty_l = m
                .array_shape(ops[0])
                .map(|a| a.ty)
                .unwrap_or(ElementType::F32);
            let ty_r = m
                .array_shape(ops[1])
                .map(|a| a.ty)
                .unwrap_or(ElementType::F32);
            let zl = self.constant(ty_l, zero_of(ty_l));
            let zr = self.constant(ty_r, zero_of(ty_r));
            let l = self.mask(ops[0], &lt, zl);
            let r = self.mask(ops[1], &rt, zr);
            self.rw.set_operands(id, &[l, r]);
            self.count("masked");
        }
        let mut out: Vec<Option<InstId>> = lb
            .iter()
            .zip(&rb)
            .map(|(&l, &r)| ls[l as usize].or(rs[r as usize]))
            .collect();
        out.extend(
            (0..lr)
                .filter(|d| !lb.contains(&(*d as i64)) && !lc.contains(&(*d as i64)))
                .map(|d| ls[d]),
        );
        out.extend(
            (0..rr)
                .filter(|d| !rb.contains(&(*d as i64)) && !rc.contains(&(*d as i64)))
                .map(|d| rs[d]),
        );
        Ok(Sizes::Array(out))
    }

    fn reshape(
        &mut self,
        id: InstId,
        operands: &[InstId],
        ops: &[InstId],
    ) -> Result<Sizes, PassError> {
        let m = self.m();
        let out = array_of(m, id, id)?;
        let inp = array_of(m, ops[0], id)?;
        let mut ins = self.dims_of(operands[0]);
        ins.resize(inp.rank(), None);
        let tracked_in: Vec<usize> = (0..inp.rank()).filter(|&d| ins[d].is_some()).collect();
        let (out_sizes, out_tracked): (Vec<InstId>, Vec<Option<InstId>>) =
            if m.opcode(id) == Opcode::DynamicReshape {
                if ops.len() != out.rank() + 1 {
                    return Err(refuse(m, id, "without one size per dimension for"));
                }
                let tracked = (0..out.rank())
                    .map(|d| Some(ops[d + 1]).filter(|_| out.dynamic[d]))
                    .collect();
                (ops[1..].to_vec(), tracked)
            } else {
                if tracked_in.is_empty() {
                    return Ok(Sizes::Array(Vec::new()));
                }
                let flagged: Vec<usize> = (0..out.rank()).filter(|&d| out.dynamic[d]).collect();
                let [k] = flagged[..] else {
                    return Err(refuse(
                        m,
                        id,
                        "with other than one result dimension flagged <= for",
                    ));
                };
                // The cheap case: one tracked dimension whose bound and inner block the result
                // keeps, so the padding stays where it is.
                if let [d] = tracked_in[..] {
                    let inner_in: i64 = inp.dims[d + 1..].iter().product();
                    let inner_out: i64 = out.dims[k + 1..].iter().product();
                    if inp.dims[d] == out.dims[k] && inner_in == inner_out {
                        let mut s = vec![None; out.rank()];
                        s[k] = ins[d];
                        return Ok(Sizes::Array(s));
                    }
                }
                // The result's tracked size: the operand's runtime element count over the
                // other result dimensions.
                let in_sizes = self.runtime_sizes(&inp.dims, &ins);
                let total = self.product(&in_sizes);
                let others: i64 = (0..out.rank())
                    .filter(|&d| d != k)
                    .map(|d| out.dims[d])
                    .product();
                let others = self.s32(others.max(1));
                let sk = self.binary(Opcode::Divide, ElementType::S32, &[], total, others);
                let mut sizes: Vec<InstId> = Vec::with_capacity(out.rank());
                for (d, &b) in out.dims.iter().enumerate() {
                    sizes.push(if d == k { sk } else { self.s32(b) });
                }
                let mut tracked = vec![None; out.rank()];
                tracked[k] = Some(sk);
                (sizes, tracked)
            };
        let in_sizes = self.runtime_sizes(&inp.dims, &ins);
        let g = self.reshape_gather(ops[0], &in_sizes, &out.dims, &out_sizes);
        self.rw.replace_all_uses(id, g);
        Ok(Sizes::Array(out_tracked))
    }

    fn concatenate(
        &mut self,
        id: InstId,
        operands: &[InstId],
        ops: &[InstId],
    ) -> Result<Sizes, PassError> {
        let m = self.m();
        let out = array_of(m, id, id)?;
        let c = first_dim(m, id)?;
        let all: Vec<Vec<Option<InstId>>> = operands
            .iter()
            .map(|o| {
                let mut v = self.dims_of(*o);
                v.resize(out.rank(), None);
                v
            })
            .collect();
        // Other dimensions: as elementwise.
        let mut s: Vec<Option<InstId>> = (0..out.rank())
            .map(|d| all.iter().find_map(|v| v[d]))
            .collect();
        if all.iter().all(|v| v[c].is_none()) {
            s[c] = None;
            return Ok(Sizes::Array(s));
        }
        let bounds: Vec<i64> = ops
            .iter()
            .map(|&o| m.array_shape(o).map_or(0, |a| a.dims[c]))
            .collect();
        let od = out.dims.to_vec();
        // Position p along `c` of the result reads padded position B_k + p - off_k of the
        // static concatenation, for the last operand k whose offset off_k is at most p.
        let p = self.iota(&od, c);
        let mut src = p;
        let mut off = self.s32(0);
        let mut base = 0i64;
        for k in 0..ops.len() {
            if k > 0 {
                let offb = self.splat(off, ElementType::S32, &od);
                let at = self.compare(ComparisonDirection::Ge, &od, p, offb);
                let shift = self.s32(base);
                let shift = self.binary(Opcode::Subtract, ElementType::S32, &[], shift, off);
                let shift = self.splat(shift, ElementType::S32, &od);
                let cand = self.binary(Opcode::Add, ElementType::S32, &od, p, shift);
                src = self.push(
                    Opcode::Select,
                    ElementType::S32,
                    &od,
                    &[at, cand, src],
                    Vec::new(),
                );
            }
            let size = match all[k][c] {
                Some(sz) => sz,
                None => self.s32(bounds[k]),
            };
            off = self.binary(Opcode::Add, ElementType::S32, &[], off, size);
            base += bounds[k];
        }
        let mut idx = Vec::with_capacity(out.rank());
        for d in 0..out.rank() {
            idx.push(if d == c { src } else { self.iota(&od, d) });
        }
        // A static concatenation of the padded operands, read from.
        let cat = self.push(
            Opcode::Concatenate,
            out.ty,
            &od,
            ops,
            vec![(AttrKey::Dimensions, AttrValue::Ints(Box::new([c as i64])))],
        );
        let g = self.gather_at(cat, &idx, &od);
        self.rw.replace_all_uses(id, g);
        self.count("gathers");
        s[c] = Some(off);
        Ok(Sizes::Array(s))
    }

    fn reverse(
        &mut self,
        id: InstId,
        operands: &[InstId],
        ops: &[InstId],
    ) -> Result<Sizes, PassError> {
        let m = self.m();
        let out = array_of(m, id, id)?;
        let dims = m
            .ints_attr(id, &AttrKey::Dimensions)
            .unwrap_or(&[])
            .to_vec();
        let mut s = self.dims_of(operands[0]);
        s.resize(out.rank(), None);
        let od = out.dims.to_vec();
        // Reverse the static dimensions as given, then the tracked ones within their sizes.
        let static_dims: Vec<i64> = dims
            .iter()
            .copied()
            .filter(|&d| s[d as usize].is_none())
            .collect();
        let x = if static_dims.len() == dims.len() {
            return Ok(Sizes::Array(s));
        } else if static_dims.is_empty() {
            ops[0]
        } else {
            self.push(
                Opcode::Reverse,
                out.ty,
                &od,
                &[ops[0]],
                vec![(AttrKey::Dimensions, AttrValue::Ints(static_dims.into()))],
            )
        };
        let one = self.s32(1);
        let mut idx = Vec::with_capacity(out.rank());
        for (d, sd) in s.iter().enumerate() {
            let i = self.iota(&od, d);
            idx.push(match sd.filter(|_| dims.contains(&(d as i64))) {
                Some(size) => {
                    let last = self.binary(Opcode::Subtract, ElementType::S32, &[], size, one);
                    let last = self.splat(last, ElementType::S32, &od);
                    self.binary(Opcode::Subtract, ElementType::S32, &od, last, i)
                }
                None => i,
            });
        }
        let g = self.gather_at(x, &idx, &od);
        self.rw.replace_all_uses(id, g);
        self.count("gathers");
        Ok(Sizes::Array(s))
    }

    fn pad(&mut self, id: InstId, operands: &[InstId], ops: &[InstId]) -> Result<Sizes, PassError> {
        let m = self.m();
        let out = array_of(m, id, id)?;
        let Some(AttrValue::Padding(cfg)) = m.attr(id, &AttrKey::Padding) else {
            return Err(refuse(m, id, "without padding= on"));
        };
        let cfg = cfg.clone();
        if self.sizes_of(operands[1]).is_some_and(Sizes::tracked) {
            return Err(refuse(m, id, "with a padding value of"));
        }
        let mut s = self.dims_of(operands[0]);
        s.resize(out.rank(), None);
        let od = out.dims.to_vec();
        // Along a tracked dimension, result position p holds operand element (p - low) /
        // (interior + 1) where that divides and is below the size, else the padding value; the
        // size is low + size + (size - 1) * interior + high.
        let one = self.s32(1);
        let zero = self.s32(0);
        let mut idx = Vec::with_capacity(out.rank());
        let mut holds: Option<InstId> = None;
        let mut out_sizes = vec![None; out.rank()];
        for (d, sd) in s.iter().enumerate() {
            let [low, high, interior] = cfg[d];
            let Some(size) = *sd else {
                // Static: the ordinary pad along this dimension, done by the pad kept below.
                idx.push(self.iota(&od, d));
                continue;
            };
            let p = self.iota(&od, d);
            let low_c = self.s32(low);
            let low_b = self.splat(low_c, ElementType::S32, &od);
            let q = self.binary(Opcode::Subtract, ElementType::S32, &od, p, low_b);
            let step = self.s32(interior + 1);
            let step_b = self.splat(step, ElementType::S32, &od);
            let src = self.binary(Opcode::Divide, ElementType::S32, &od, q, step_b);
            let rem = self.binary(Opcode::Remainder, ElementType::S32, &od, q, step_b);
            let zero_b = self.splat(zero, ElementType::S32, &od);
            let on = self.compare(ComparisonDirection::Eq, &od, rem, zero_b);
            let ge = self.compare(ComparisonDirection::Ge, &od, q, zero_b);
            let size_b = self.splat(size, ElementType::S32, &od);
            let lt = self.compare(ComparisonDirection::Lt, &od, src, size_b);
            let h = self.binary(Opcode::And, ElementType::Pred, &od, on, ge);
            let h = self.binary(Opcode::And, ElementType::Pred, &od, h, lt);
            holds = Some(self.fold(Opcode::And, ElementType::Pred, &od, holds, h));
            idx.push(src);
            let gaps = self.binary(Opcode::Subtract, ElementType::S32, &[], size, one);
            let gaps = self.binary(Opcode::Maximum, ElementType::S32, &[], gaps, zero);
            let inner = self.s32(interior);
            let inner = self.binary(Opcode::Multiply, ElementType::S32, &[], gaps, inner);
            let edges = self.s32(low + high);
            let n = self.binary(Opcode::Add, ElementType::S32, &[], size, inner);
            out_sizes[d] = Some(self.binary(Opcode::Add, ElementType::S32, &[], n, edges));
        }
        let Some(holds) = holds else {
            return Ok(Sizes::Array(s));
        };
        // The static dimensions padded as given (tracked ones left alone), then the gather
        // along the tracked ones.
        let in_dims = self
            .m()
            .array_shape(ops[0])
            .map(|a| a.dims.to_vec())
            .unwrap_or_default();
        let mut mid_dims = in_dims.clone();
        let mut mid_cfg = cfg.to_vec();
        for (d, sd) in s.iter().enumerate() {
            if sd.is_some() {
                mid_cfg[d] = [0, 0, 0];
            } else {
                mid_dims[d] = od[d];
            }
        }
        let x = if mid_dims == in_dims {
            ops[0]
        } else {
            self.push(
                Opcode::Pad,
                out.ty,
                &mid_dims,
                &[ops[0], ops[1]],
                vec![(AttrKey::Padding, AttrValue::Padding(mid_cfg.into()))],
            )
        };
        let g = self.gather_at(x, &idx, &od);
        let v = self.splat(ops[1], out.ty, &od);
        let r = self.push(Opcode::Select, out.ty, &od, &[holds, g, v], Vec::new());
        self.rw.replace_all_uses(id, r);
        self.count("gathers");
        Ok(Sizes::Array(out_sizes))
    }

    /// A gather keeps a tracked operand dimension that every slice takes whole (an offset
    /// dimension of the result); one it indexes into, or tracked indices, are refused.
    fn gather(&mut self, id: InstId, operands: &[InstId]) -> Result<Sizes, PassError> {
        let m = self.m();
        if self.sizes_of(operands[1]).is_some_and(Sizes::tracked) {
            return Err(refuse(m, id, "with indices of"));
        }
        let list = |k: AttrKey| m.ints_attr(id, &k).unwrap_or(&[]).to_vec();
        let offset = list(AttrKey::OffsetDims);
        let collapsed = list(AttrKey::CollapsedSliceDims);
        let index_map = list(AttrKey::StartIndexMap);
        let batching = list(AttrKey::OperandBatchingDims);
        let slice = list(AttrKey::SliceSizes);
        let bounds = m
            .array_shape(operands[0])
            .map(|a| a.dims.to_vec())
            .unwrap_or_default();
        let rank = m.array_shape(id).map_or(0, ArrayShape::rank);
        let s = self.dims_of(operands[0]);
        let mut out = vec![None; rank];
        let mut k = 0;
        for (d, &bound) in bounds.iter().enumerate() {
            let d64 = d as i64;
            let windowed = !collapsed.contains(&d64) && !batching.contains(&d64);
            if let Some(size) = s.get(d).copied().flatten() {
                let whole = slice.get(d) == Some(&bound) && !index_map.contains(&d64);
                match offset.get(k) {
                    Some(&o) if whole && windowed && (o as usize) < rank => {
                        out[o as usize] = Some(size)
                    }
                    _ => return Err(refuse(m, id, "indexing into")),
                }
            }
            if windowed {
                k += 1;
            }
        }
        Ok(Sizes::Array(out))
    }

    /// A scatter (one operand): the result has the operand's sizes. An update whose scatter
    /// position is past a tracked size gets an index out of the operand's bounds, so it is
    /// skipped (XLA's scatter skips such windows); a tracked update window dimension must
    /// cover an operand dimension of the same size whole, so its padding lands in the
    /// operand's padding. Anything else is refused.
    fn scatter(
        &mut self,
        id: InstId,
        operands: &[InstId],
        ops: &[InstId],
    ) -> Result<Sizes, PassError> {
        let m = self.m();
        if ops.len() != 3 {
            return Err(refuse(m, id, "(a variadic scatter) over"));
        }
        let list = |k: AttrKey| m.ints_attr(id, &k).unwrap_or(&[]).to_vec();
        let window = list(AttrKey::UpdateWindowDims);
        let inserted = list(AttrKey::InsertedWindowDims);
        let to_operand = list(AttrKey::ScatterDimsToOperandDims);
        let batching = list(AttrKey::InputBatchingDims);
        let ivd = match m.attr(id, &AttrKey::IndexVectorDim) {
            Some(AttrValue::Int(v)) => *v as usize,
            _ => return Err(refuse(m, id, "without index_vector_dim= on")),
        };
        if !batching.is_empty() {
            return Err(refuse(m, id, "with batching dimensions over"));
        }
        let opnd = array_of(m, ops[0], id)?;
        let idx = array_of(m, ops[1], id)?;
        let upd = array_of(m, ops[2], id)?;
        let mut os = self.dims_of(operands[0]);
        os.resize(opnd.rank(), None);
        let mut is = self.dims_of(operands[1]);
        is.resize(idx.rank(), None);
        let mut us = self.dims_of(operands[2]);
        us.resize(upd.rank(), None);
        if is.get(ivd).copied().flatten().is_some() {
            return Err(refuse(m, id, "with an index vector of"));
        }
        // Update window dimensions pair with the operand's dimensions not inserted, in order.
        let windowed: Vec<usize> = (0..opnd.rank())
            .filter(|d| !inserted.contains(&(*d as i64)))
            .collect();
        for (k, &w) in window.iter().enumerate() {
            let Some(size) = us.get(w as usize).copied().flatten() else {
                continue;
            };
            let ok = windowed.get(k).is_some_and(|&d| {
                os[d] == Some(size)
                    && upd.dims[w as usize] == opnd.dims[d]
                    && !to_operand.contains(&(d as i64))
            });
            if !ok {
                return Err(refuse(m, id, "with a partial update window over"));
            }
        }
        // Scatter positions: the indices' dimensions but the index vector, paired in order with
        // the updates' dimensions that are not window dimensions.
        let batch_idx: Vec<usize> = (0..idx.rank()).filter(|&d| d != ivd).collect();
        let batch_upd: Vec<usize> = (0..upd.rank())
            .filter(|d| !window.contains(&(*d as i64)))
            .collect();
        let mut tracked: Vec<(usize, InstId)> = Vec::new();
        for (k, &d) in batch_idx.iter().enumerate() {
            let from_upd = batch_upd.get(k).and_then(|&u| us[u]);
            if let Some(size) = is[d].or(from_upd) {
                tracked.push((d, size));
            }
        }
        if !tracked.is_empty() {
            // Each skipped index vector holds the operand's bound along the dimension it
            // indexes, out of range for any window.
            let comps = if ivd < idx.rank() {
                idx.dims[ivd] as usize
            } else {
                1
            };
            let bounds: Vec<i32> = (0..comps)
                .map(|j| {
                    let d = to_operand.get(j).copied().unwrap_or(0) as usize;
                    i32::try_from(opnd.dims.get(d).copied().unwrap_or(0)).unwrap_or(i32::MAX)
                })
                .collect();
            let valid = self
                .valid(&idx.dims, &tracked)
                .expect("a tracked dimension");
            let oob = if ivd < idx.rank() {
                let c = self.push(
                    Opcode::Constant,
                    ElementType::S32,
                    &[comps as i64],
                    &[],
                    Vec::new(),
                );
                let lit = ArrayLiteral::from_slice(&[comps as i64], &bounds);
                self.rw
                    .module_mut()
                    .set_constant(c, ConstValue::Literal(Literal::Array(lit)));
                self.push(
                    Opcode::Broadcast,
                    ElementType::S32,
                    &idx.dims,
                    &[c],
                    vec![(AttrKey::Dimensions, AttrValue::Ints(Box::new([ivd as i64])))],
                )
            } else {
                let c = self.s32(i64::from(bounds[0]));
                self.splat(c, ElementType::S32, &idx.dims)
            };
            let oob = if idx.ty == ElementType::S32 {
                oob
            } else {
                self.push(Opcode::Convert, idx.ty, &idx.dims, &[oob], Vec::new())
            };
            let new_idx = self.push(
                Opcode::Select,
                idx.ty,
                &idx.dims,
                &[valid, ops[1], oob],
                Vec::new(),
            );
            self.rw.set_operands(id, &[ops[0], new_idx, ops[2]]);
            self.count("masked");
        }
        Ok(Sizes::Array(os))
    }

    /// A reduce-window: each input's padding replaced by its init (the reducer's identity, as
    /// the window's own padding is), and along a tracked dimension the result's size is the
    /// window count for the runtime size: `((size - 1) * base_dilation + 1 + pad_lo + pad_hi -
    /// ((window - 1) * window_dilation + 1)) / stride + 1`, at least 0.
    fn reduce_window(
        &mut self,
        id: InstId,
        operands: &[InstId],
        ops: &[InstId],
    ) -> Result<Sizes, PassError> {
        let m = self.m();
        let n = ops.len() / 2;
        self.refuse_tracked_inits(id, &operands[n..])?;
        let Some(AttrValue::Window(win)) = m.attr(id, &AttrKey::Window) else {
            return Err(refuse(m, id, "without window= on"));
        };
        let win = win.clone();
        let rank = array_of(m, ops[0], id)?.rank();
        let mut s = self.merged_dims(&operands[..n]);
        s.resize(rank, None);
        let tracked: Vec<(usize, InstId)> = s
            .iter()
            .enumerate()
            .filter_map(|(d, v)| v.map(|v| (d, v)))
            .collect();
        if tracked.is_empty() {
            return Ok(Sizes::Array(s));
        }
        if win.len() != rank {
            return Err(refuse(m, id, "with a window not of its rank over"));
        }
        self.mask_with_inits(id, ops, &tracked);
        let mut out = vec![None; rank];
        let one = self.s32(1);
        let zero = self.s32(0);
        for &(d, size) in &tracked {
            let w = &win[d];
            let lhs = self.s32(w.lhs_dilate.max(1));
            let dilated = self.binary(Opcode::Subtract, ElementType::S32, &[], size, one);
            let dilated = self.binary(Opcode::Multiply, ElementType::S32, &[], dilated, lhs);
            let extent = 1 + w.pad_lo + w.pad_hi - ((w.size - 1) * w.rhs_dilate.max(1) + 1);
            let extent = self.s32(extent);
            let span = self.binary(Opcode::Add, ElementType::S32, &[], dilated, extent);
            let stride = self.s32(w.stride.max(1));
            let count = self.binary(Opcode::Divide, ElementType::S32, &[], span, stride);
            let count = self.binary(Opcode::Add, ElementType::S32, &[], count, one);
            // A negative span (fewer elements than the window) gives no window.
            let neg = self.compare(ComparisonDirection::Lt, &[], span, zero);
            out[d] = Some(self.push(
                Opcode::Select,
                ElementType::S32,
                &[],
                &[neg, zero, count],
                Vec::new(),
            ));
        }
        Ok(per_result(out, n))
    }

    /// A sort: along a tracked dimension XLA's rewrite, an extra `pred` operand saying which
    /// elements are defined and a comparator putting them first, the original one deciding
    /// between two defined elements (it is called from the new one); the sizes stay.
    fn sort(
        &mut self,
        id: InstId,
        operands: &[InstId],
        ops: &[InstId],
    ) -> Result<Sizes, PassError> {
        let m = self.m();
        let a = array_of(m, ops[0], id)?;
        let d = first_dim(m, id)?;
        let Some(AttrValue::Comp(cmp)) = m.attr(id, &AttrKey::ToApply) else {
            return Err(refuse(m, id, "without a comparator on"));
        };
        let cmp = *cmp;
        let mut s = self.merged_dims(operands);
        s.resize(a.rank(), None);
        let n = ops.len();
        let Some(size) = s.get(d).copied().flatten() else {
            return Ok(per_result(s, n));
        };
        let valid = self
            .valid(&a.dims, &[(d, size)])
            .expect("one tracked dimension");
        // The comparator: (params..., in_lhs, in_rhs) -> in_lhs & (cmp(params...) | !in_rhs).
        let m = self.rw.module();
        let name = crate::rewrite::fresh_comp_name(m, &format!("{}.dynamic", m.comp_name(cmp)));
        let old_params: Vec<(ShapeId, LayoutId)> = m
            .params(cmp)
            .iter()
            .map(|&p| (m.shape_id(p), m.layout_id(p)))
            .collect();
        let (root_shape, root_layout) = (m.shape_id(m.root(cmp)), m.layout_id(m.root(cmp)));
        let mm = self.rw.module_mut();
        let c = mm.add_computation(&name);
        let pred = mm.intern_shape(Shape::Array(ArrayShape::new(ElementType::Pred, &[])));
        let none = mm.no_layout();
        let mut params = Vec::with_capacity(old_params.len() + 2);
        let extra = [(pred, none), (pred, none)];
        for (k, &(shape, layout)) in old_params.iter().chain(extra.iter()).enumerate() {
            params.push(self.rw.add(
                c,
                new_inst(
                    Opcode::Parameter,
                    shape,
                    layout,
                    Vec::new(),
                    vec![(AttrKey::ParameterNumber, AttrValue::Int(k as i64))],
                ),
            ));
        }
        let (in_l, in_r) = (params[old_params.len()], params[old_params.len() + 1]);
        let scalar =
            |rw: &mut Rewriter<'_>, opcode: Opcode, operands: Vec<InstId>, attrs: Vec<Attr>| {
                let (shape, layout) = if opcode == Opcode::Call {
                    (root_shape, root_layout)
                } else {
                    (pred, none)
                };
                rw.add(c, new_inst(opcode, shape, layout, operands, attrs))
            };
        let call = scalar(
            self.rw,
            Opcode::Call,
            params[..old_params.len()].to_vec(),
            vec![(AttrKey::ToApply, AttrValue::Comp(cmp))],
        );
        let out_r = scalar(self.rw, Opcode::Not, vec![in_r], Vec::new());
        let either = scalar(self.rw, Opcode::Or, vec![call, out_r], Vec::new());
        let root = scalar(self.rw, Opcode::And, vec![in_l, either], Vec::new());
        self.rw.module_mut().set_root(c, root);
        // The sort with the mask as its last operand, its results but the mask taken out.
        let m = self.rw.module();
        let leaf_shapes: Vec<(ShapeId, LayoutId)> = ops
            .iter()
            .map(|&o| (m.shape_id(o), m.layout_id(o)))
            .collect();
        let (valid_shape, valid_layout) = (m.shape_id(valid), m.layout_id(valid));
        let attrs: Vec<Attr> = m
            .attrs(id)
            .iter()
            .map(|(k, v)| match k {
                AttrKey::ToApply => (k.clone(), AttrValue::Comp(c)),
                _ => (k.clone(), v.clone()),
            })
            .collect();
        let (id_shape, id_layout) = (m.shape_id(id), m.layout_id(id));
        let tuple_result = matches!(m.shape(id), Shape::Tuple(_));
        let mm = self.rw.module_mut();
        let mut shapes: Vec<ShapeId> = leaf_shapes.iter().map(|l| l.0).collect();
        shapes.push(valid_shape);
        let mut layouts: Vec<LayoutId> = leaf_shapes.iter().map(|l| l.1).collect();
        layouts.push(valid_layout);
        let shape = mm.intern_shape(Shape::Tuple(shapes.into()));
        let layout = mm.intern_layout(Layout::Tuple(layouts.into()));
        let mut new_ops = ops.to_vec();
        new_ops.push(valid);
        let sorted = self.rw.add(
            self.comp,
            new_inst(Opcode::Sort, shape, layout, new_ops, attrs),
        );
        let mut parts = Vec::with_capacity(n);
        for (k, &(shape, layout)) in leaf_shapes.iter().enumerate() {
            parts.push(self.rw.add(
                self.comp,
                new_inst(
                    Opcode::GetTupleElement,
                    shape,
                    layout,
                    vec![sorted],
                    vec![(AttrKey::Index, AttrValue::Int(k as i64))],
                ),
            ));
        }
        let result = if tuple_result {
            self.rw.add(
                self.comp,
                new_inst(Opcode::Tuple, id_shape, id_layout, parts, Vec::new()),
            )
        } else {
            parts[0]
        };
        self.rw.replace_all_uses(id, result);
        self.count("sorts");
        Ok(per_result(s, n))
    }

    /// The entry's result with every element past a tracked size zero.
    fn zero_padding(&mut self, v: InstId, sizes: &Sizes) -> InstId {
        match sizes {
            Sizes::Array(d) => {
                let tracked: Vec<(usize, InstId)> = d
                    .iter()
                    .enumerate()
                    .filter_map(|(k, s)| s.map(|s| (k, s)))
                    .collect();
                let Some(a) = self.m().array_shape(v).cloned() else {
                    return v;
                };
                if tracked.is_empty() {
                    return v;
                }
                let z = self.constant(a.ty, zero_of(a.ty));
                self.mask(v, &tracked, z)
            }
            Sizes::Tuple(elems) => {
                if !sizes.tracked() {
                    return v;
                }
                let (shape, layout) = (self.m().shape_id(v), self.m().layout_id(v));
                let Shape::Tuple(es) = self.m().shape_of(shape).clone() else {
                    return v;
                };
                let mut parts = Vec::with_capacity(es.len());
                for (k, &es_k) in es.iter().enumerate() {
                    let lay = match self.m().layout_of(layout) {
                        Layout::Tuple(ls) => ls.get(k).copied().unwrap_or(self.m().no_layout()),
                        _ => self.m().no_layout(),
                    };
                    let gte = self.rw.add(
                        self.comp,
                        new_inst(
                            Opcode::GetTupleElement,
                            es_k,
                            lay,
                            vec![v],
                            vec![(AttrKey::Index, AttrValue::Int(k as i64))],
                        ),
                    );
                    let sk = elems.get(k).cloned().unwrap_or(Sizes::Array(Vec::new()));
                    parts.push(self.zero_padding(gte, &sk));
                }
                self.rw.add(
                    self.comp,
                    new_inst(Opcode::Tuple, shape, layout, parts, Vec::new()),
                )
            }
        }
    }
}

/// Makes the entry's result `(result, sizes...)`: one `s32[]` `get-dimension-size` for each
/// dimension flagged dynamic of each array leaf of the result (leaves depth-first, dimensions
/// in order), so a run can return each leaf at its runtime sizes as XLA's literal holds it;
/// returns the `(leaf, dimension)` of each size appended. A module that sets no runtime size,
/// or whose result has no dynamic dimension, is left as it is (and the list is empty).
pub fn expose_result_sizes(m: &mut Module) -> Vec<(usize, usize)> {
    if !has_dynamic_sizes(m) {
        return Vec::new();
    }
    let entry = m.entry();
    let root = m.root(entry);
    let mut leaves: Vec<(Vec<i64>, ShapeId, ArrayShape)> = Vec::new();
    collect_leaves(m, m.shape_id(root), &mut Vec::new(), &mut leaves);
    if !leaves.iter().any(|(_, _, a)| a.is_dynamic()) {
        return Vec::new();
    }
    let no_layout = m.no_layout();
    let s32 = m.intern_shape(Shape::Array(ArrayShape::new(ElementType::S32, &[])));
    let (root_shape, root_layout) = (m.shape_id(root), m.layout_id(root));
    let mut rw = m.rewriter();
    let add = |rw: &mut Rewriter<'_>, opcode, shape, operands: Vec<InstId>, attrs| {
        rw.add(entry, new_inst(opcode, shape, no_layout, operands, attrs))
    };
    let mut sizes = Vec::new();
    let mut which = Vec::new();
    for (k, (path, leaf_shape, a)) in leaves.iter().enumerate() {
        if !a.is_dynamic() {
            continue;
        }
        let mut v = root;
        for (j, &idx) in path.iter().enumerate() {
            let shape = if j + 1 == path.len() {
                *leaf_shape
            } else {
                element_shape(rw.module(), root_shape, &path[..=j])
            };
            let attrs = vec![(AttrKey::Index, AttrValue::Int(idx))];
            v = add(&mut rw, Opcode::GetTupleElement, shape, vec![v], attrs);
        }
        for d in (0..a.rank()).filter(|&d| a.dynamic[d]) {
            let attrs = vec![(AttrKey::Dimensions, AttrValue::Ints(Box::new([d as i64])))];
            sizes.push(add(&mut rw, Opcode::GetDimensionSize, s32, vec![v], attrs));
            which.push((k, d));
        }
    }
    let mm = rw.module_mut();
    let mut shapes = vec![root_shape];
    shapes.extend(std::iter::repeat_n(s32, sizes.len()));
    let mut layouts = vec![root_layout];
    layouts.extend(std::iter::repeat_n(no_layout, sizes.len()));
    let shape = mm.intern_shape(Shape::Tuple(shapes.into()));
    let layout = mm.intern_layout(Layout::Tuple(layouts.into()));
    let mut operands = vec![root];
    operands.extend(sizes);
    let t = rw.add(
        entry,
        new_inst(Opcode::Tuple, shape, layout, operands, Vec::new()),
    );
    rw.module_mut().set_root(entry, t);
    rw.finish();
    // The declared entry layout describes the old result.
    m.entry_layout = None;
    which
}

/// The array leaves of shape `s` depth-first: their tuple index paths, shapes.
fn collect_leaves(
    m: &Module,
    s: ShapeId,
    path: &mut Vec<i64>,
    out: &mut Vec<(Vec<i64>, ShapeId, ArrayShape)>,
) {
    match m.shape_of(s) {
        Shape::Array(a) => out.push((path.clone(), s, a.clone())),
        Shape::Tuple(es) => {
            for (k, &e) in es.iter().enumerate() {
                path.push(k as i64);
                collect_leaves(m, e, path, out);
                path.pop();
            }
        }
        _ => {}
    }
}

/// The element of tuple shape `s` at `path`.
fn element_shape(m: &Module, mut s: ShapeId, path: &[i64]) -> ShapeId {
    for &k in path {
        if let Shape::Tuple(es) = m.shape_of(s) {
            s = es[k as usize];
        }
    }
    s
}

/// Whether `m` has a live instruction that sets a runtime size.
pub fn has_dynamic_sizes(m: &Module) -> bool {
    m.live_ids().into_iter().any(|i| {
        matches!(
            m.opcode(i),
            Opcode::SetDimensionSize | Opcode::DynamicReshape
        )
    })
}

impl Pass for DynamicPadder {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        if !has_dynamic_sizes(m) {
            return Ok(false);
        }
        let entry = m.entry();
        let layouts = m
            .live_ids()
            .into_iter()
            .any(|i| matches!(m.layout_of(m.layout_id(i)), Layout::Array(_)));
        let comps = m.computations();
        let mut rw = m.rewriter();
        let mut counts: Vec<(&'static str, u64)> = Vec::new();
        for &comp in &comps {
            let insts = rw.module().comp_insts(comp);
            let order = topo_order(rw.module(), &insts);
            let mut p = Padder {
                rw: &mut rw,
                comp,
                sizes: HashMap::new(),
                counts: Vec::new(),
                layouts,
            };
            for &id in &order {
                if p.m().is_live(id) {
                    p.visit(id)?;
                }
            }
            let root = p.m().root(comp);
            if let Some(s) = p.sizes.get(&root).cloned() {
                if comp != entry {
                    return Err(refuse(
                        p.m(),
                        root,
                        "returned from a called computation with",
                    ));
                }
                let r = p.rw.resolve(root);
                let new = p.zero_padding(r, &s);
                if new != r {
                    p.rw.module_mut().set_root(comp, new);
                }
            }
            for (k, n) in p.counts {
                match counts.iter_mut().find(|(c, _)| *c == k) {
                    Some((_, t)) => *t += n,
                    None => counts.push((k, n)),
                }
            }
        }
        rw.finish();
        // No shape stays dynamic.
        for id in m.live_ids() {
            let s = m.shape_id(id);
            let st = static_shape(m, s);
            if st != s {
                let l = m.layout_id(id);
                m.set_shape(id, st, l);
            }
        }
        for (k, n) in counts {
            cx.count(k, n);
        }
        Ok(true)
    }
}
