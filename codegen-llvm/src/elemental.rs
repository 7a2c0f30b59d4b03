//! Elemental emitters: for each op, a generator from an output index to the value at that
//! index, composed across operands.
//!
//! [`Gen::gen`] emits the LLVM code computing instruction `id` at [`Index`] `idx` by asking its
//! operands for the elements it needs. Instructions bound to memory (kernel inputs: fusion
//! parameters, or the operands of an unfused instruction) are loads; scalar values bound by a
//! caller (the parameters of a reducer or comparator) are used as they are. A fused computation
//! therefore becomes one expression per output element, and an unfused instruction is the same
//! thing with its operands bound to buffers: a fusion of one.
//!
//! Values are memoized per (instruction, index) so a shared operand is computed once per element;
//! every loop body and branch arm opens a memo scope, so a value is only reused where it
//! dominates. Buffers are logical row-major whatever their layout (as in the evaluator); only
//! `bitcast` looks at layouts.
//!
//! Depth: generation recurses once per operand level; the stack grows on demand, so
//! a chain of any depth (a fused chain of thousands of instructions) compiles without overflow
//! ([`axle_ir::stack::deep`]).

use std::collections::HashMap;

use axle_ir::{
    ArrayShape, AttrKey, AttrValue, CompId, ElementType, InstId, Layout, Literal, Module, Opcode,
    Shape,
};
use inkwell::module::Linkage;
use inkwell::values::{BasicValueEnum, IntValue, PointerValue};
use inkwell::IntPredicate;

use crate::cg::{bv, strides, Cg, Val, NO_UNROLL};
use crate::error::{at, Fail, R};
use crate::forms::{complex_constant_bytes, supported_type, unsupported_type};
use crate::minifloat;
use crate::ops;

/// A position in an array: one `i64` per dimension and the row-major linear offset.
#[derive(Clone, Debug)]
pub struct Index<'ctx> {
    /// Identity for memoization: derived indices get new ids.
    pub id: u32,
    /// Per-dimension coordinates.
    pub multi: Vec<IntValue<'ctx>>,
    /// Row-major linear offset.
    pub linear: IntValue<'ctx>,
}

/// What an instruction is bound to in a kernel.
#[derive(Clone, Debug)]
pub enum Ext<'ctx> {
    /// Array leaves in memory (one pointer per leaf; an array has one).
    Bufs(Vec<PointerValue<'ctx>>),
    /// Scalar leaf values (a computation applied per element).
    Vals(Vec<Val<'ctx>>),
    /// One row of an array in a row buffer: element `linear` is at `linear - base` (row
    /// kernels keep values computed by a pass there; every read is in the current row).
    Row(PointerValue<'ctx>, IntValue<'ctx>),
}

/// The body of a loop nest: `(generator, coordinates, loop-carried values) -> next values`.
pub type NestBody<'f, 'a, 'ctx> =
    dyn FnMut(&mut Gen<'a, 'ctx>, &[IntValue<'ctx>], Vec<Val<'ctx>>) -> R<Vec<Val<'ctx>>> + 'f;

/// The elemental form of an op that a backend provides itself (the CPU's `dot` and
/// `convolution`): the value of instruction `id` at index `idx`, its operands generated through
/// the [`Gen`] it is given.
pub type OpGen = for<'g, 'a, 'ctx> fn(&'g mut Gen<'a, 'ctx>, InstId, &Index<'ctx>) -> R<Val<'ctx>>;

/// The element generator of one kernel (or of one application of a scalar computation).
pub struct Gen<'a, 'ctx> {
    /// The code generator emitting the kernel.
    pub cg: &'a Cg<'ctx>,
    /// The module the instructions belong to.
    pub m: &'a Module,
    /// The generator of `dot` and `convolution`, where the backend has one.
    contraction: Option<OpGen>,
    ext: HashMap<InstId, Ext<'ctx>>,
    memo: Vec<HashMap<(InstId, u32), Vec<Val<'ctx>>>>,
    next: u32,
}

/// The loop hints of a loop of at most `trips` iterations: [`NO_UNROLL`] past the target's
/// [`crate::target::Target::unroll_limit`].
fn unroll_hints(cg: &Cg<'_>, trips: i64) -> &'static [&'static str] {
    match cg.target.unroll_limit() {
        Some(limit) if trips > limit => &[NO_UNROLL],
        _ => &[],
    }
}

/// The array leaves of a shape, depth-first.
pub fn leaves(m: &Module, s: &Shape, out: &mut Vec<ArrayShape>) -> R<()> {
    match s {
        Shape::Array(a) => out.push(a.clone()),
        Shape::Tuple(ids) => {
            for &i in ids.iter() {
                leaves(m, m.shape_of(i), out)?;
            }
        }
        Shape::Token | Shape::Opaque => {}
    }
    Ok(())
}

/// The array leaves of instruction `id`'s shape.
pub fn inst_leaves(m: &Module, id: InstId) -> R<Vec<ArrayShape>> {
    let mut v = Vec::new();
    leaves(m, m.shape(id), &mut v)?;
    Ok(v)
}

/// An instruction that a computation applied per element (generated at one scalar index) would
/// have to generate at that index although it holds more than one element (or has no array
/// form), if any: what `root` reaches through its operands, except through a reduction's, which
/// generates its operands at indices of its own.
fn array_at_scalar_index(m: &Module, root: InstId) -> Option<InstId> {
    let mut seen = std::collections::HashSet::from([root]);
    let mut stack = vec![root];
    while let Some(i) = stack.pop() {
        let one_element = inst_leaves(m, i)
            .map(|ls| ls.iter().all(|l| l.num_elements() == 1))
            .unwrap_or(false);
        if !one_element {
            return Some(i);
        }
        if matches!(m.opcode(i), Opcode::Reduce | Opcode::ReduceWindow) {
            continue;
        }
        for &o in m.operands(i) {
            if seen.insert(o) {
                stack.push(o);
            }
        }
    }
    None
}

/// The minor-to-major order of `id`'s layout (row-major when it has none).
pub fn minor_to_major(m: &Module, id: InstId, rank: usize) -> R<Vec<i64>> {
    match m.layout_of(m.layout_id(id)) {
        Layout::Array(l) if !l.minor_to_major.is_empty() || rank == 0 => {
            if !l.tiles.is_empty() {
                return Err("tiled layouts are not supported".into());
            }
            if l.minor_to_major.len() != rank {
                return Err("layout rank does not match the shape".into());
            }
            Ok(l.minor_to_major.to_vec())
        }
        _ => Ok((0..rank as i64).rev().collect()),
    }
}

/// Whether a minor-to-major order is row-major once size-1 dimensions are ignored.
pub fn is_row_major(m2m: &[i64], dims: &[i64]) -> bool {
    let order: Vec<i64> = m2m
        .iter()
        .rev()
        .copied()
        .filter(|&d| dims[d as usize] != 1)
        .collect();
    order.windows(2).all(|w| w[0] < w[1])
}

/// Whether `bitcast` `id` is a plain reshape of the logical row-major bytes.
pub fn bitcast_is_reshape(m: &Module, id: InstId) -> R<bool> {
    let op = m.operands(id)[0];
    let (a, o) = (arr_of(m, op)?, arr_of(m, id)?);
    if a.ty != o.ty {
        return Ok(false);
    }
    let mi = minor_to_major(m, op, a.rank())?;
    let mo = minor_to_major(m, id, o.rank())?;
    Ok(is_row_major(&mi, &a.dims) && is_row_major(&mo, &o.dims))
}

/// The array shape of instruction `id` (an error for a tuple, token or opaque value).
pub fn arr_of(m: &Module, id: InstId) -> R<&ArrayShape> {
    m.array_shape(id)
        .ok_or_else(|| Fail::Msg("expected an array-shaped value".into()))
}

/// Whether `gen` can emit instruction `id` (its own op; operands are checked separately).
pub fn is_elemental(m: &Module, id: InstId) -> bool {
    use Opcode::*;
    let op = m.opcode(id);
    op.is_elementwise() && op != StochasticConvert
        || matches!(
            op,
            Parameter
                | Constant
                | Broadcast
                | Reshape
                | Bitcast
                | Transpose
                | Slice
                | Reverse
                | Pad
                | Concatenate
                | Iota
                | DynamicSlice
                | DynamicUpdateSlice
                | Gather
                | Map
                | Reduce
                | ReduceWindow
                | Dot
                | Convolution
                | Tuple
                | GetTupleElement
                | OptBarrier
                | Copy
                | AddDependency
                | GetDimensionSize
                | PartitionId
                | ReplicaId
        )
        || matches!(op, Call | Fusion | Conditional) && scalar_call(m, id)
        || op == While && scalar_while(m, id)
}

/// A `while` whose state has single-element leaves (a tuple of scalars, say), inside a
/// reducer, comparator or `map` body: a loop in the kernel with the state in registers.
fn scalar_while(m: &Module, id: InstId) -> bool {
    single_elements(m, m.shape(id))
}

/// Whether every array leaf of `s` has one element (and it has no tokens).
fn single_elements(m: &Module, s: &Shape) -> bool {
    match s {
        Shape::Array(a) => a.num_elements() == 1,
        Shape::Tuple(ids) => ids.iter().all(|&e| single_elements(m, m.shape_of(e))),
        Shape::Token | Shape::Opaque => false,
    }
}

/// A `call`, `fusion` or `conditional` on single-element arrays with a single-element result,
/// as in reducer, comparator and `map` bodies: emitted by applying the called computations to
/// the operand values (a conditional computes every branch and selects, which is exact since
/// the emitted arithmetic never traps).
fn scalar_call(m: &Module, id: InstId) -> bool {
    single_elements(m, m.shape(id))
        && m.operands(id).iter().all(|&o| match m.shape(o) {
            Shape::Array(a) => a.num_elements() == 1,
            _ => false,
        })
}

/// Whether the whole computation `comp` can be emitted elementally (every instruction its
/// root depends on), its applied computations included.
pub fn comp_is_elemental(m: &Module, comp: CompId) -> bool {
    first_non_elemental(m, comp).is_none()
}

/// The first instruction (in a depth-first walk from the root, into applied and called
/// computations) that keeps `comp` from being emitted elementally, if any: the instruction to
/// name when the backend refuses the computation.
pub fn first_non_elemental(m: &Module, comp: CompId) -> Option<InstId> {
    first_non_elemental_from(m, &[m.root(comp)])
}

/// The first instruction that keeps the values of `roots` from being emitted elementally (in
/// a depth-first walk from them, into applied and called computations), if any: what a kernel
/// that generates only some values of a computation elementally (the operands of a `scatter`
/// at its fusion's root) checks.
pub fn first_non_elemental_from(m: &Module, roots: &[InstId]) -> Option<InstId> {
    let mut stack = roots.to_vec();
    let mut seen = std::collections::HashSet::new();
    while let Some(id) = stack.pop() {
        if id.is_none() || !seen.insert(id) {
            continue;
        }
        if !is_elemental(m, id) {
            return Some(id);
        }
        if let Some(s) = m.array_shape(id) {
            if !supported_type(s.ty) {
                return Some(id);
            }
        }
        if matches!(
            m.opcode(id),
            Opcode::Reduce | Opcode::ReduceWindow | Opcode::Map
        ) {
            match m.comp_attr(id, &AttrKey::ToApply) {
                Some(c) => {
                    if let Some(bad) = first_non_elemental(m, c) {
                        return Some(bad);
                    }
                }
                None => return Some(id),
            }
        }
        if matches!(
            m.opcode(id),
            Opcode::Call | Opcode::Fusion | Opcode::Conditional | Opcode::While
        ) {
            if let Some(bad) = m
                .called_comps_iter(id)
                .find_map(|c| first_non_elemental(m, c))
            {
                return Some(bad);
            }
        }
        stack.extend_from_slice(m.operands(id));
    }
    None
}

/// Applies computation `comp`, whose one parameter (an array or a tuple) has single-element
/// leaves, to those leaves' values; returns its root's leaf values.
fn apply_state<'ctx>(
    cg: &Cg<'ctx>,
    m: &Module,
    comp: CompId,
    leaves: &[Val<'ctx>],
) -> R<Vec<Val<'ctx>>> {
    let params = m.params(comp);
    let [p] = params else {
        return Err(format!("computation {} must take one parameter", m.comp_name(comp)).into());
    };
    if !single_elements(m, m.shape(*p)) || !single_elements(m, m.shape(m.root(comp))) {
        return Err(format!(
            "computation {} applied per element must take and return single elements",
            m.comp_name(comp)
        )
        .into());
    }
    let mut child = Gen::new(cg, m);
    child.bind(*p, Ext::Vals(leaves.to_vec()));
    let idx = child.scalar_index();
    child.gen_unit(m.root(comp), &idx)
}

impl<'a, 'ctx> Gen<'a, 'ctx> {
    /// A generator with nothing bound, emitting through `cg`.
    pub fn new(cg: &'a Cg<'ctx>, m: &'a Module) -> Self {
        Gen {
            cg,
            m,
            contraction: None,
            ext: HashMap::new(),
            memo: vec![HashMap::new()],
            next: 0,
        }
    }

    /// The generator with `f` as the elemental form of `dot` and `convolution`.
    pub fn with_contraction(mut self, f: OpGen) -> Self {
        self.contraction = Some(f);
        self
    }

    /// Binds instruction `id` to memory or values.
    pub fn bind(&mut self, id: InstId, e: Ext<'ctx>) {
        self.ext.insert(id, e);
    }

    /// Forgets what instruction `id` is bound to.
    pub fn unbind(&mut self, id: InstId) {
        self.ext.remove(&id);
    }

    /// Opens a memo scope (a loop body or a branch arm).
    pub fn push_scope(&mut self) {
        self.memo.push(HashMap::new());
    }

    /// Closes the innermost memo scope.
    pub fn pop_scope(&mut self) {
        self.memo.pop();
    }

    fn new_id(&mut self) -> u32 {
        self.next += 1;
        self.next
    }

    /// A fresh index identity (for indices built by hand).
    pub fn fresh_id(&mut self) -> u32 {
        self.new_id()
    }

    /// The memory `id` is bound to, if it is one array in memory.
    pub fn bound_ptr(&self, id: InstId) -> Option<PointerValue<'ctx>> {
        match self.ext.get(&id) {
            Some(Ext::Bufs(p)) if p.len() == 1 => Some(p[0]),
            _ => None,
        }
    }

    /// Whether `id` is bound to memory or values in this generator.
    pub fn is_bound(&self, id: InstId) -> bool {
        self.ext.contains_key(&id)
    }

    /// The index of a rank-0 array.
    pub fn scalar_index(&mut self) -> Index<'ctx> {
        Index {
            id: self.new_id(),
            multi: Vec::new(),
            linear: self.cg.c64(0),
        }
    }

    /// An index from per-dimension coordinates (the linear offset is derived).
    pub fn index_multi(&mut self, dims: &[i64], multi: Vec<IntValue<'ctx>>) -> R<Index<'ctx>> {
        let cg = self.cg;
        let st = strides(dims);
        let mut lin = cg.c64(0);
        for (k, &c) in multi.iter().enumerate() {
            if dims[k] == 1 {
                continue;
            }
            let t = cg.b.build_int_nsw_mul(c, cg.c64(st[k]), "t")?;
            lin = cg.b.build_int_nsw_add(lin, t, "lin")?;
        }
        let multi = multi
            .into_iter()
            .zip(dims)
            .map(|(c, &d)| if d == 1 { cg.c64(0) } else { c })
            .collect();
        Ok(Index {
            id: self.new_id(),
            multi,
            linear: lin,
        })
    }

    /// An index from a linear offset (the coordinates are derived).
    pub fn index_linear(&mut self, dims: &[i64], linear: IntValue<'ctx>) -> R<Index<'ctx>> {
        let cg = self.cg;
        let st = strides(dims);
        let mut multi = Vec::with_capacity(dims.len());
        for k in 0..dims.len() {
            if dims[k] == 1 {
                multi.push(cg.c64(0));
                continue;
            }
            let q = if st[k] == 1 {
                linear
            } else {
                cg.b.build_int_unsigned_div(linear, cg.c64(st[k]), "q")?
            };
            let c = if k == 0 {
                q
            } else {
                cg.b.build_int_unsigned_rem(q, cg.c64(dims[k]), "c")?
            };
            multi.push(c);
        }
        Ok(Index {
            id: self.new_id(),
            multi,
            linear,
        })
    }

    fn arr(&self, id: InstId) -> R<&'a ArrayShape> {
        arr_of(self.m, id)
    }

    fn ints(&self, id: InstId, key: AttrKey) -> R<&'a [i64]> {
        self.m
            .ints_attr(id, &key)
            .ok_or_else(|| format!("missing attribute {}", key.name()).into())
    }

    fn int(&self, id: InstId, key: AttrKey) -> R<i64> {
        self.m
            .int_attr(id, &key)
            .ok_or_else(|| format!("missing attribute {}", key.name()).into())
    }

    /// The single value of array instruction `id` at `idx`.
    pub fn gen1(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
        let v = self.gen(id, idx)?;
        v.into_iter()
            .next()
            .ok_or_else(|| "expected an array value".into())
    }

    /// The leaf values of instruction `id` at `idx` (one for an array).
    pub fn gen(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Vec<Val<'ctx>>> {
        // A single-element array asked for at an index of another rank (a computation applied
        // per element is generated at the scalar index): its one element is at index zero.
        if let Some(s) = self.m.array_shape(id) {
            if s.rank() > 0 && idx.multi.len() != s.rank() && s.num_elements() == 1 {
                return self.gen_unit(id, idx);
            }
        }
        let key = (id, idx.id);
        for scope in self.memo.iter().rev() {
            if let Some(v) = scope.get(&key) {
                return Ok(v.clone());
            }
        }
        let v = match self.ext.get(&id) {
            Some(Ext::Vals(v)) => v.clone(),
            Some(Ext::Bufs(ptrs)) => {
                let ptrs = ptrs.clone();
                let shapes = inst_leaves(self.m, id)?;
                let mut out = Vec::with_capacity(ptrs.len());
                for (p, s) in ptrs.iter().zip(&shapes) {
                    out.push(self.cg.load(s.ty, *p, idx.linear)?);
                }
                out
            }
            Some(Ext::Row(p, base)) => {
                let (p, base) = (*p, *base);
                let ty = self.arr(id)?.ty;
                let at = self.cg.b.build_int_nsw_sub(idx.linear, base, "at")?;
                vec![self.cg.load(ty, p, at)?]
            }
            // Operand chains recurse once per level, and a fused chain may be thousands of
            // levels deep: the stack grows on demand rather than overflowing.
            None => axle_ir::stack::deep(|| self.gen_op(id, idx)).map_err(|f| at(self.m, id, f))?,
        };
        if let Some(scope) = self.memo.last_mut() {
            scope.insert(key, v.clone());
        }
        Ok(v)
    }

    /// Operand `op` at the result index `idx`: a rank-0 operand of a non-scalar result is
    /// broadcast.
    fn operand_at(&mut self, op: InstId, rank: usize, idx: &Index<'ctx>) -> R<Val<'ctx>> {
        let r = self.arr(op)?.rank();
        if r == 0 && rank > 0 {
            let s = self.scalar_index();
            self.gen1(op, &s)
        } else {
            self.gen1(op, idx)
        }
    }

    /// Applies computation `comp` to scalar arguments and returns its root's leaf values.
    pub fn apply(&mut self, comp: CompId, args: &[Val<'ctx>]) -> R<Vec<Val<'ctx>>> {
        let m = self.m;
        let params = m.params(comp);
        if params.len() != args.len() {
            return Err(format!(
                "computation {} takes {} parameters, got {}",
                m.comp_name(comp),
                params.len(),
                args.len()
            )
            .into());
        }
        let mut child = Gen::new(self.cg, m);
        child.contraction = self.contraction;
        for (&p, &a) in params.iter().zip(args) {
            match m.array_shape(p) {
                Some(s) if s.num_elements() == 1 => child.bind(p, Ext::Vals(vec![a])),
                _ => {
                    return Err(format!(
                        "computation {} applied per element must take scalars",
                        m.comp_name(comp)
                    )
                    .into())
                }
            }
        }
        let root = m.root(comp);
        if let Some(i) = array_at_scalar_index(m, root) {
            return Err(format!(
                "computation {} applied per element holds %{} ({}), an array of more than one \
                 element outside a reduction: not supported by this backend",
                m.comp_name(comp),
                m.name(i),
                m.opcode(i)
            )
            .into());
        }
        let idx = child.scalar_index();
        // Parameters declared with unit dimensions: every leaf is one element.
        for l in inst_leaves(m, root)? {
            if l.num_elements() != 1 {
                return Err(format!(
                    "computation {} applied per element must return scalars",
                    m.comp_name(comp)
                )
                .into());
            }
        }
        child.gen_unit(root, &idx)
    }

    /// A `call`, `fusion` or `conditional` on single-element values (see [`scalar_call`]).
    fn gen_scalar_call(&mut self, id: InstId) -> R<Vec<Val<'ctx>>> {
        let m = self.m;
        if !scalar_call(m, id) {
            return Err(format!(
                "{} is emitted per element only on single-element values",
                m.opcode(id).name()
            )
            .into());
        }
        let ops = m.operands(id);
        let s = self.scalar_index();
        let mut vals = Vec::with_capacity(ops.len());
        for &o in ops {
            let v = self.gen_unit(o, &s)?;
            vals.push(*v.first().ok_or("an operand without a value")?);
        }
        let key = match m.opcode(id) {
            Opcode::Call => AttrKey::ToApply,
            Opcode::Fusion => AttrKey::Calls,
            _ => {
                let branches = m
                    .branch_computations(id)
                    .ok_or("conditional needs branch computations")?;
                if branches.is_empty() || vals.len() != branches.len() + 1 {
                    return Err("conditional needs one operand per branch".into());
                }
                let outs = branches
                    .iter()
                    .enumerate()
                    .map(|(b, &c)| self.apply(c, &vals[b + 1..b + 2]))
                    .collect::<R<Vec<_>>>()?;
                return self.select_branch(id, vals[0], outs);
            }
        };
        let c = m
            .comp_attr(id, &key)
            .ok_or_else(|| format!("{} needs {}", m.opcode(id).name(), key.name()))?;
        self.apply(c, &vals)
    }

    /// A `while` on single-element state (see [`scalar_while`]): the condition and body are
    /// applied to the state's leaves in a loop of the kernel.
    fn gen_scalar_while(&mut self, id: InstId) -> R<Vec<Val<'ctx>>> {
        let (m, cg) = (self.m, self.cg);
        if !scalar_while(m, id) {
            return Err("while is emitted per element only on single-element state".into());
        }
        let cond = m
            .comp_attr(id, &AttrKey::Condition)
            .ok_or("while needs a condition")?;
        let body = m
            .comp_attr(id, &AttrKey::Body)
            .ok_or("while needs a body")?;
        let s = self.scalar_index();
        let init = self.gen_unit(m.operands(id)[0], &s)?;
        cg.while_loop(
            &init,
            |st| {
                let r = apply_state(cg, m, cond, st)?;
                Ok(r.first()
                    .ok_or("while condition returns nothing")?
                    .into_int_value())
            },
            |st| apply_state(cg, m, body, st),
        )
    }

    /// The leaves of the branch a conditional's selector picks: a `pred` picks branch 0 when
    /// true; an `s32` index picks its branch, out-of-range indices the last one (as XLA).
    fn select_branch(
        &mut self,
        id: InstId,
        sel: Val<'ctx>,
        mut outs: Vec<Vec<Val<'ctx>>>,
    ) -> R<Vec<Val<'ctx>>> {
        let cg = self.cg;
        let sel = sel.into_int_value();
        let sel_ty = self.arr(self.m.operands(id)[0])?.ty;
        let mut acc = outs.pop().ok_or("conditional without branches")?;
        for (b, out) in outs.into_iter().enumerate().rev() {
            let take = if sel_ty.is_pred() {
                // Branch 0 when true; `acc` is branch 1.
                sel
            } else {
                let k = sel.get_type().const_int(b as u64, false);
                cg.b.build_int_compare(inkwell::IntPredicate::EQ, sel, k, "br")?
            };
            acc = out
                .into_iter()
                .zip(acc)
                .map(|(t, e)| cg.b.build_select(take, t, e, "branch"))
                .collect::<Result<_, _>>()?;
        }
        Ok(acc)
    }

    /// `gen` for an instruction whose leaves all have one element, at index zero whatever its
    /// rank.
    fn gen_unit(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Vec<Val<'ctx>>> {
        let rank = self.m.array_shape(id).map(|s| s.rank()).unwrap_or(0);
        if rank == 0 {
            return self.gen(id, idx);
        }
        let zeros = vec![self.cg.c64(0); rank];
        let dims = self.arr(id)?.dims.to_vec();
        let i = self.index_multi(&dims, zeros)?;
        self.gen(id, &i)
    }

    /// The start indices of a dynamic slice or update (`ops` are scalars or one vector),
    /// sign- or zero-extended to `i64`.
    pub fn dynamic_starts_pub(&mut self, ops: &[InstId], rank: usize) -> R<Vec<IntValue<'ctx>>> {
        let mut starts = Vec::with_capacity(rank);
        for &o in ops {
            let s = self.arr(o)?.clone();
            if !s.ty.is_int() {
                return Err("start indices must be integers".into());
            }
            let n = s.num_elements();
            for k in 0..n {
                let i = if s.rank() == 0 {
                    self.scalar_index()
                } else {
                    let lin = self.cg.c64(k);
                    self.index_linear(&s.dims, lin)?
                };
                let v = self.gen1(o, &i)?;
                starts.push(self.to_i64(s.ty, v)?);
            }
        }
        if starts.len() != rank {
            return Err(format!("expected {rank} start indices, found {}", starts.len()).into());
        }
        Ok(starts)
    }

    /// An integer register value as `i64`.
    pub fn to_i64(&self, ty: ElementType, v: Val<'ctx>) -> R<IntValue<'ctx>> {
        Ok(self.cg.b.build_int_cast_sign_flag(
            v.into_int_value(),
            self.cg.i64(),
            ty.is_signed_int(),
            "i64",
        )?)
    }

    /// `clamp(v, lo, hi)` on `i64` (signed).
    pub fn clamp64_pub(&self, v: IntValue<'ctx>, lo: i64, hi: i64) -> R<IntValue<'ctx>> {
        let cg = self.cg;
        let b = &cg.b;
        let c = b.build_int_compare(IntPredicate::SLT, v, cg.c64(lo), "lt")?;
        let v = b.build_select(c, cg.c64(lo), v, "cl")?.into_int_value();
        let c = b.build_int_compare(IntPredicate::SGT, v, cg.c64(hi), "gt")?;
        Ok(b.build_select(c, cg.c64(hi), v, "cl")?.into_int_value())
    }

    fn gen_op(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Vec<Val<'ctx>>> {
        use Opcode::*;
        let m = self.m;
        let cg = self.cg;
        let op = m.opcode(id);
        let ops = m.operands(id);
        match op {
            Tuple => {
                let mut out = Vec::new();
                for &o in ops {
                    out.extend(self.gen(o, idx)?);
                }
                return Ok(out);
            }
            GetTupleElement => {
                let k = self.int(id, AttrKey::Index)? as usize;
                let all = self.gen(ops[0], idx)?;
                let Shape::Tuple(elems) = m.shape(ops[0]) else {
                    return Err("get-tuple-element of a non-tuple".into());
                };
                let mut start = 0;
                for &e in elems.iter().take(k) {
                    let mut l = Vec::new();
                    leaves(m, m.shape_of(e), &mut l)?;
                    start += l.len();
                }
                let mut l = Vec::new();
                leaves(
                    m,
                    m.shape_of(*elems.get(k).ok_or("tuple index out of range")?),
                    &mut l,
                )?;
                return Ok(all[start..start + l.len()].to_vec());
            }
            OptBarrier | Copy | AddDependency => {
                if op == OptBarrier && ops.len() > 1 {
                    let mut out = Vec::new();
                    for &o in ops {
                        out.extend(self.gen(o, idx)?);
                    }
                    return Ok(out);
                }
                return self.gen(ops[0], idx);
            }
            Constant if matches!(m.literal(id), Some(Literal::Tuple(_))) => {
                // Every leaf at this index, as for `tuple`.
                let mut leaves = Vec::new();
                literal_leaves(
                    m.literal(id).ok_or("constant without a value")?,
                    &mut leaves,
                );
                let mut out = Vec::with_capacity(leaves.len());
                for (k, leaf) in leaves.iter().enumerate() {
                    if !supported_type(leaf.ty()) {
                        return Err(unsupported_type(cg.target.name(), leaf.ty()));
                    }
                    out.push(if leaf.len() == 1 {
                        scalar_const(cg, leaf.ty(), leaf.element_bytes(0))?
                    } else {
                        let p = const_leaf_global(cg, m, id, k as u32)?;
                        cg.load(leaf.ty(), p, idx.linear)?
                    });
                }
                return Ok(out);
            }
            Reduce => return self.gen_reduce(id, idx),
            ReduceWindow => return self.gen_reduce_window(id, idx),
            Call | Fusion | Conditional => return self.gen_scalar_call(id),
            While => return self.gen_scalar_while(id),
            Parameter => return Err("parameter is not bound in this kernel".into()),
            _ => {}
        }
        let shape = self.arr(id)?;
        let ty = shape.ty;
        if !supported_type(ty) {
            return Err(unsupported_type(cg.target.name(), ty));
        }
        let rank = shape.rank();
        let dims = &shape.dims[..];
        let v = match op {
            Constant => self.gen_constant(id, idx)?,
            Convert => {
                let a = self.operand_at(ops[0], rank, idx)?;
                ops::convert(cg, self.arr(ops[0])?.ty, ty, a)?
            }
            BitcastConvert => self.gen_bitcast_convert(id, idx)?,
            ReducePrecision => {
                let a = self.operand_at(ops[0], rank, idx)?;
                let eb = self.int(id, AttrKey::ExponentBits)?;
                let mb = self.int(id, AttrKey::MantissaBits)?;
                if eb < 1 || mb < 0 {
                    return Err("reduce-precision needs exponent_bits >= 1".into());
                }
                ops::reduce_precision(cg, ty, eb as u32, mb as u32, a)?
            }
            Compare => {
                let a = self.operand_at(ops[0], rank, idx)?;
                let c = self.operand_at(ops[1], rank, idx)?;
                let dir = match m.attr(id, &AttrKey::Direction) {
                    Some(AttrValue::Direction(d)) => *d,
                    _ => return Err("compare needs a direction".into()),
                };
                let in_ty = self.arr(ops[0])?.ty;
                let cty = m.comparison_type(id, in_ty);
                ops::compare(cg, dir, cty, in_ty, a, c)?
            }
            Select => {
                let p = self.operand_at(ops[0], rank, idx)?;
                let a = self.operand_at(ops[1], rank, idx)?;
                let c = self.operand_at(ops[2], rank, idx)?;
                ops::select(cg, p, a, c)?
            }
            Clamp => {
                let lo = self.operand_at(ops[0], rank, idx)?;
                let x = self.operand_at(ops[1], rank, idx)?;
                let hi = self.operand_at(ops[2], rank, idx)?;
                ops::clamp(cg, ty, lo, x, hi)?
            }
            _ if op.is_elementwise_unary() => {
                let a = self.operand_at(ops[0], rank, idx)?;
                ops::unary(cg, op, self.arr(ops[0])?.ty, a)?
            }
            _ if op.is_elementwise_binary() => {
                let a = self.operand_at(ops[0], rank, idx)?;
                let c = self.operand_at(ops[1], rank, idx)?;
                ops::binary(cg, op, ty, a, c)?
            }
            Broadcast => {
                let map = self.ints(id, AttrKey::Dimensions)?;
                let od = self.arr(ops[0])?.dims.clone();
                if map.len() != od.len() {
                    return Err("broadcast dimensions do not match the operand rank".into());
                }
                let multi: Vec<IntValue> = map
                    .iter()
                    .zip(od.iter())
                    .map(|(&d, &n)| {
                        if n == 1 {
                            cg.c64(0)
                        } else {
                            idx.multi[d as usize]
                        }
                    })
                    .collect();
                let i = self.index_multi(&od, multi)?;
                self.gen1(ops[0], &i)?
            }
            Reshape => {
                let od = self.arr(ops[0])?.dims.clone();
                let i = self.index_linear(&od, idx.linear)?;
                self.gen1(ops[0], &i)?
            }
            Bitcast => self.gen_bitcast(id, idx)?,
            Transpose => {
                let perm = self.ints(id, AttrKey::Dimensions)?;
                let od = self.arr(ops[0])?.dims.clone();
                let mut multi = vec![cg.c64(0); od.len()];
                for (k, &p) in perm.iter().enumerate() {
                    multi[p as usize] = idx.multi[k];
                }
                let i = self.index_multi(&od, multi)?;
                self.gen1(ops[0], &i)?
            }
            Slice => {
                let Some(AttrValue::Slice(bounds)) = m.attr(id, &AttrKey::Slice) else {
                    return Err("slice needs slice bounds".into());
                };
                let od = self.arr(ops[0])?.dims.clone();
                let mut multi = Vec::with_capacity(rank);
                for (k, &[start, _, stride]) in bounds.iter().enumerate() {
                    let t = cg.b.build_int_nsw_mul(idx.multi[k], cg.c64(stride), "s")?;
                    multi.push(cg.b.build_int_nsw_add(t, cg.c64(start), "s")?);
                }
                let i = self.index_multi(&od, multi)?;
                self.gen1(ops[0], &i)?
            }
            Reverse => {
                let rev = self.ints(id, AttrKey::Dimensions)?;
                let mut multi = idx.multi.clone();
                for &d in rev {
                    let d = d as usize;
                    multi[d] =
                        cg.b.build_int_nsw_sub(cg.c64(dims[d] - 1), idx.multi[d], "rev")?;
                }
                let i = self.index_multi(dims, multi)?;
                self.gen1(ops[0], &i)?
            }
            Pad => self.gen_pad(id, idx)?,
            Concatenate => self.gen_concat(id, idx)?,
            Iota => {
                let d = self.int(id, AttrKey::IotaDimension)? as usize;
                let c = *idx.multi.get(d).ok_or("iota dimension out of range")?;
                ops::convert(cg, ElementType::S64, ty, bv(c))?
            }
            DynamicSlice => {
                let od = self.arr(ops[0])?.dims.clone();
                let sizes = self.ints(id, AttrKey::DynamicSliceSizes)?.to_vec();
                let starts = self.dynamic_starts_pub(&ops[1..], od.len())?;
                let mut multi = Vec::with_capacity(rank);
                for k in 0..rank {
                    let s = self.clamp64_pub(starts[k], 0, (od[k] - sizes[k]).max(0))?;
                    multi.push(cg.b.build_int_nsw_add(s, idx.multi[k], "ds")?);
                }
                let i = self.index_multi(&od, multi)?;
                self.gen1(ops[0], &i)?
            }
            DynamicUpdateSlice => self.gen_dus(id, idx)?,
            Gather => self.gen_gather(id, idx)?,
            Map => {
                let c = m
                    .comp_attr(id, &AttrKey::ToApply)
                    .ok_or("map needs to_apply")?;
                let mut args = Vec::with_capacity(ops.len());
                for &o in ops {
                    args.push(self.operand_at(o, rank, idx)?);
                }
                let r = self.apply(c, &args)?;
                *r.first().ok_or("map computation returns nothing")?
            }
            Dot | Convolution if self.contraction.is_some() => {
                let f = self.contraction.ok_or("no contraction generator")?;
                f(self, id, idx)?
            }
            GetDimensionSize => {
                let d = m
                    .int_attr(id, &AttrKey::Dimensions)
                    .or_else(|| {
                        m.ints_attr(id, &AttrKey::Dimensions)
                            .and_then(|v| v.first().copied())
                    })
                    .ok_or("get-dimension-size needs a dimension")?;
                let a = self.arr(ops[0])?;
                let size = *a
                    .dims
                    .get(usize::try_from(d).map_err(|_| "dimension out of range")?)
                    .ok_or("dimension out of range")?;
                cg.const_i(ty, size as i128)?
            }
            // One partition and one replica.
            PartitionId | ReplicaId => cg.const_i(ty, 0)?,
            _ => {
                return Err(format!(
                    "the {} backend does not support {} instructions",
                    cg.target.name(),
                    op.name()
                )
                .into())
            }
        };
        Ok(vec![v])
    }

    fn gen_constant(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
        let m = self.m;
        let cg = self.cg;
        let lit = match m.literal(id) {
            Some(Literal::Array(a)) => a,
            Some(Literal::Tuple(_)) => return Err("a tuple constant used as an array".into()),
            None => return Err("the constant's value was elided from the text".into()),
        };
        let ty = lit.ty();
        if lit.len() == 1 {
            return scalar_const(cg, ty, lit.element_bytes(0));
        }
        let ptr = const_global(cg, id, &lit.data)?;
        cg.load(ty, ptr, idx.linear)
    }

    fn gen_bitcast(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
        let m = self.m;
        let cg = self.cg;
        let op = m.operands(id)[0];
        let (a, o) = (self.arr(op)?.clone(), self.arr(id)?.clone());
        if a.ty.byte_size() != o.ty.byte_size() || a.num_elements() != o.num_elements() {
            return Err("bitcast changes the buffer size".into());
        }
        let mi = minor_to_major(m, op, a.rank())?;
        let mo = minor_to_major(m, id, o.rank())?;
        let v = if is_row_major(&mi, &a.dims) && is_row_major(&mo, &o.dims) {
            let i = self.index_linear(&a.dims, idx.linear)?;
            self.gen1(op, &i)?
        } else {
            // Physical offset of the output index, then the input index with that offset.
            let ps_out = phys_strides(&o.dims, &mo);
            let mut lin = cg.c64(0);
            for (d, &c) in idx.multi.iter().enumerate() {
                let t = cg.b.build_int_nsw_mul(c, cg.c64(ps_out[d]), "p")?;
                lin = cg.b.build_int_nsw_add(lin, t, "p")?;
            }
            let ps_in = phys_strides(&a.dims, &mi);
            let mut multi = Vec::with_capacity(a.rank());
            for d in 0..a.rank() {
                let q = cg.b.build_int_unsigned_div(lin, cg.c64(ps_in[d]), "q")?;
                multi.push(cg.b.build_int_unsigned_rem(q, cg.c64(a.dims[d].max(1)), "c")?);
            }
            let i = self.index_multi(&a.dims, multi)?;
            self.gen1(op, &i)?
        };
        if a.ty == o.ty {
            Ok(v)
        } else {
            ops::bitcast_same_width(cg, a.ty, o.ty, v)
        }
    }

    fn gen_bitcast_convert(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
        let cg = self.cg;
        let b = &cg.b;
        let op = self.m.operands(id)[0];
        let (a, o) = (self.arr(op)?.clone(), self.arr(id)?.clone());
        let (bi, bo) = (a.ty.bits(), o.ty.bits());
        if a.ty.is_complex() || o.ty.is_complex() {
            return Err("bitcast-convert of complex types is not supported".into());
        }
        if bi == bo {
            if minifloat::is_minifloat(a.ty) {
                // A minifloat's register form keeps one NaN, so its bits come from memory
                // where they can.
                let bits = self.gen_stored_bits(op, idx)?;
                return bits_elem(cg, o.ty, bits);
            }
            let v = self.gen1(op, idx)?;
            return ops::bitcast_same_width(cg, a.ty, o.ty, v);
        }
        // Elements are packed bit by bit, little-endian (sub-byte types by their own width).
        if bi > bo {
            // Each input element becomes the last dimension's bi/bo narrow elements.
            let k = *idx.multi.last().ok_or("bitcast-convert to a wider rank")?;
            let multi = idx.multi[..idx.multi.len() - 1].to_vec();
            let i = self.index_multi(&a.dims, multi)?;
            let v = self.gen1(op, &i)?;
            let wide = cg.int_ty(bi);
            let bits = elem_bits(cg, a.ty, v)?;
            let k = b.build_int_truncate_or_bit_cast(k, wide, "k")?;
            let sh = b.build_int_mul(k, wide.const_int(bo as u64, false), "sh")?;
            let part = b.build_right_shift(bits, sh, false, "part")?;
            let part = b.build_int_truncate(part, cg.int_ty(bo), "part")?;
            return bits_elem(cg, o.ty, part);
        }
        // Narrow to wide: the input's last dimension holds bo/bi parts.
        let r = (bo / bi) as i64;
        let wide = cg.int_ty(bo);
        let mut acc = wide.const_zero();
        for k in 0..r {
            let mut multi = idx.multi.clone();
            multi.push(cg.c64(k));
            let i = self.index_multi(&a.dims, multi)?;
            let v = self.gen1(op, &i)?;
            let bits = elem_bits(cg, a.ty, v)?;
            let bits = b.build_int_z_extend(bits, wide, "z")?;
            let bits =
                b.build_left_shift(bits, wide.const_int((k * bi as i64) as u64, false), "s")?;
            acc = b.build_or(acc, bits, "acc")?;
        }
        bits_elem(cg, o.ty, acc)
    }

    /// The values of `id`'s leaves at `idx` in memory form, as a kernel stores its outputs
    /// ([`Cg::store_mem`]): the register values of [`Gen::gen`] in memory form, except that a
    /// minifloat array computed by a same-width `bitcast-convert` keeps its operand's stored
    /// bits (`Gen::gen_stored_bits`), which the register form would turn into its type's
    /// canonical NaN (an `f8e4m3fn` `0xff` stored as `0x7f`, an `f8e5m2` NaN payload lost).
    pub fn gen_mem(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Vec<Val<'ctx>>> {
        let cg = self.cg;
        if !self.is_bound(id) && self.m.opcode(id) == Opcode::BitcastConvert {
            if let Some(s) = self.m.array_shape(id) {
                let from = self.arr(self.m.operands(id)[0])?.ty;
                if minifloat::is_minifloat(s.ty)
                    && from.bits() == s.ty.bits()
                    && !from.is_complex()
                    && idx.multi.len() == s.rank()
                {
                    let bits = self.gen_stored_bits(id, idx)?;
                    return Ok(vec![bits_mem(cg, s.ty, bits)?]);
                }
            }
        }
        let vals = self.gen(id, idx)?;
        let leaves = inst_leaves(self.m, id)?;
        vals.into_iter()
            .zip(&leaves)
            .map(|(v, l)| cg.to_mem(l.ty, v))
            .collect()
    }

    /// The bits of `id`'s element at `idx` (`ty.bits()` wide) as stored: read from memory when
    /// `id` is one array bound to it, passed through same-width `bitcast-convert`s, else the
    /// bits of its register value (which for a minifloat NaN are its type's canonical NaN:
    /// payloads survive only where memory is read).
    fn gen_stored_bits(&mut self, id: InstId, idx: &Index<'ctx>) -> R<IntValue<'ctx>> {
        let cg = self.cg;
        let ty = self.arr(id)?.ty;
        if let Some(p) = self.bound_ptr(id) {
            let m = cg.load_mem(ty, p, idx.linear)?;
            return mem_bits(cg, ty, m);
        }
        if !self.is_bound(id) && self.m.opcode(id) == Opcode::BitcastConvert {
            let op = self.m.operands(id)[0];
            let from = self.arr(op)?.ty;
            if from.bits() == ty.bits() && !from.is_complex() && !ty.is_complex() {
                return self.gen_stored_bits(op, idx);
            }
        }
        let v = self.gen1(id, idx)?;
        elem_bits(cg, ty, v)
    }

    fn gen_pad(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
        let m = self.m;
        let cg = self.cg;
        let b = &cg.b;
        let ops = m.operands(id);
        let Some(AttrValue::Padding(cfg)) = m.attr(id, &AttrKey::Padding) else {
            return Err("pad needs a padding configuration".into());
        };
        let a = self.arr(ops[0])?.clone();
        let s = self.scalar_index();
        let pv = self.gen1(ops[1], &s)?;
        if a.num_elements() == 0 {
            return Ok(pv);
        }
        let mut inb = cg.i1().const_all_ones();
        let mut multi = Vec::with_capacity(a.rank());
        for (d, &[lo, _, interior]) in cfg.iter().enumerate() {
            let t = b.build_int_nsw_sub(idx.multi[d], cg.c64(lo), "t")?;
            let nonneg = b.build_int_compare(IntPredicate::SGE, t, cg.c64(0), "nn")?;
            let step = interior + 1;
            let (q, on) = if step == 1 {
                (t, cg.i1().const_all_ones())
            } else {
                let q = b.build_int_signed_div(t, cg.c64(step), "q")?;
                let r = b.build_int_signed_rem(t, cg.c64(step), "r")?;
                (
                    q,
                    b.build_int_compare(IntPredicate::EQ, r, cg.c64(0), "on")?,
                )
            };
            let lt = b.build_int_compare(IntPredicate::SLT, q, cg.c64(a.dims[d]), "lt")?;
            let ok = b.build_and(b.build_and(nonneg, on, "ok")?, lt, "ok")?;
            inb = b.build_and(inb, ok, "inb")?;
            multi.push(q);
        }
        let mut safe = Vec::with_capacity(multi.len());
        for q in multi {
            safe.push(b.build_select(inb, q, cg.c64(0), "q")?.into_int_value());
        }
        let i = self.index_multi(&a.dims, safe)?;
        let v = self.gen1(ops[0], &i)?;
        Ok(b.build_select(inb, v, pv, "pad")?)
    }

    fn gen_concat(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
        let m = self.m;
        let d = *self
            .ints(id, AttrKey::Dimensions)?
            .first()
            .ok_or("missing dimension")? as usize;
        let parts: Vec<(InstId, i64, Vec<i64>)> = {
            let mut off = 0;
            let mut v = Vec::new();
            for &o in m.operands(id) {
                let od = self.arr(o)?.dims.to_vec();
                let n = od[d];
                if n > 0 {
                    v.push((o, off, od));
                }
                off += n;
            }
            v
        };
        self.concat_rec(&parts, d, idx)
    }

    fn concat_rec(
        &mut self,
        parts: &[(InstId, i64, Vec<i64>)],
        d: usize,
        idx: &Index<'ctx>,
    ) -> R<Val<'ctx>> {
        let cg = self.cg;
        let (o, off, od) = &parts[0];
        let at_part = |g: &mut Self| -> R<Val<'ctx>> {
            let mut multi = idx.multi.clone();
            multi[d] = cg.b.build_int_nsw_sub(idx.multi[d], cg.c64(*off), "c")?;
            let i = g.index_multi(od, multi)?;
            g.gen1(*o, &i)
        };
        if parts.len() == 1 {
            return at_part(self);
        }
        let next_off = parts[1].1;
        let c =
            cg.b.build_int_compare(IntPredicate::SLT, idx.multi[d], cg.c64(next_off), "in")?;
        let v = cg.if_else_with(
            self,
            c,
            |g| {
                g.push_scope();
                let r = at_part(g);
                g.pop_scope();
                Ok(vec![r?])
            },
            |g| {
                g.push_scope();
                let r = g.concat_rec(&parts[1..], d, idx);
                g.pop_scope();
                Ok(vec![r?])
            },
        )?;
        Ok(v[0])
    }

    fn gen_dus(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
        let m = self.m;
        let cg = self.cg;
        let b = &cg.b;
        let ops = m.operands(id);
        let a = self.arr(ops[0])?.clone();
        let u = self.arr(ops[1])?.clone();
        let base = self.gen1(ops[0], idx)?;
        if u.num_elements() == 0 {
            return Ok(base);
        }
        let starts = self.dynamic_starts_pub(&ops[2..], a.rank())?;
        let mut inside = cg.i1().const_all_ones();
        let mut multi = Vec::with_capacity(a.rank());
        for k in 0..a.rank() {
            let s = self.clamp64_pub(starts[k], 0, (a.dims[k] - u.dims[k]).max(0))?;
            let t = b.build_int_nsw_sub(idx.multi[k], s, "t")?;
            let ge = b.build_int_compare(IntPredicate::SGE, t, cg.c64(0), "ge")?;
            let lt = b.build_int_compare(IntPredicate::SLT, t, cg.c64(u.dims[k]), "lt")?;
            inside = b.build_and(inside, b.build_and(ge, lt, "in")?, "in")?;
            multi.push(t);
        }
        let mut safe = Vec::with_capacity(multi.len());
        for t in multi {
            safe.push(b.build_select(inside, t, cg.c64(0), "t")?.into_int_value());
        }
        let i = self.index_multi(&u.dims, safe)?;
        let uv = self.gen1(ops[1], &i)?;
        Ok(b.build_select(inside, uv, base, "dus")?)
    }

    fn gen_gather(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Val<'ctx>> {
        let m = self.m;
        let cg = self.cg;
        let b = &cg.b;
        let ops = m.operands(id);
        let empty: &[i64] = &[];
        let offset_dims = self.ints(id, AttrKey::OffsetDims)?.to_vec();
        let collapsed = m
            .ints_attr(id, &AttrKey::CollapsedSliceDims)
            .unwrap_or(empty)
            .to_vec();
        let start_map = self.ints(id, AttrKey::StartIndexMap)?.to_vec();
        let op_batch = m
            .ints_attr(id, &AttrKey::OperandBatchingDims)
            .unwrap_or(empty)
            .to_vec();
        let idx_batch = m
            .ints_attr(id, &AttrKey::StartIndicesBatchingDims)
            .unwrap_or(empty)
            .to_vec();
        let slice_sizes = self.ints(id, AttrKey::SliceSizes)?.to_vec();
        let ivd = self.int(id, AttrKey::IndexVectorDim)? as usize;
        let a = self.arr(ops[0])?.clone();
        if a.dims.contains(&0) {
            // Nothing to read: every element of a gather from an empty operand is zero (as XLA
            // gives), whatever its indices.
            return scalar_const(cg, a.ty, &vec![0u8; a.ty.byte_size()]);
        }
        let ind = self.arr(ops[1])?.clone();
        let out_rank = idx.multi.len();
        let op_rank = a.rank();
        let batch_out: Vec<usize> = (0..out_rank)
            .filter(|d| !offset_dims.contains(&(*d as i64)))
            .collect();
        let offset_operand: Vec<usize> = (0..op_rank)
            .filter(|d| !collapsed.contains(&(*d as i64)) && !op_batch.contains(&(*d as i64)))
            .collect();
        let ind_batch: Vec<usize> = (0..ind.rank()).filter(|&d| d != ivd).collect();
        let vec_len = if ivd < ind.rank() {
            ind.dims[ivd] as usize
        } else {
            1
        };
        if vec_len != start_map.len()
            || offset_operand.len() != offset_dims.len()
            || batch_out.len() != ind_batch.len()
        {
            return Err("gather dimension numbers do not match the shapes".into());
        }
        let g: Vec<IntValue> = batch_out.iter().map(|&d| idx.multi[d]).collect();
        let mut start = vec![cg.c64(0); op_rank];
        for (k, &d) in start_map.iter().enumerate() {
            let mut multi = vec![cg.c64(0); ind.rank()];
            for (j, &bd) in ind_batch.iter().enumerate() {
                multi[bd] = g[j];
            }
            if ivd < ind.rank() {
                multi[ivd] = cg.c64(k as i64);
            }
            let i = self.index_multi(&ind.dims, multi)?;
            let v = self.gen1(ops[1], &i)?;
            start[d as usize] = self.to_i64(ind.ty, v)?;
        }
        for (k, &d) in op_batch.iter().enumerate() {
            let pos = ind_batch
                .iter()
                .position(|&x| x as i64 == idx_batch[k])
                .ok_or("batching dimension is the index vector dimension")?;
            start[d as usize] = g[pos];
        }
        let mut multi = Vec::with_capacity(op_rank);
        for d in 0..op_rank {
            multi.push(self.clamp64_pub(start[d], 0, (a.dims[d] - slice_sizes[d]).max(0))?);
        }
        for (k, &d) in offset_dims.iter().enumerate() {
            let od = offset_operand[k];
            multi[od] = b.build_int_nsw_add(multi[od], idx.multi[d as usize], "g")?;
        }
        let i = self.index_multi(&a.dims, multi)?;
        self.gen1(ops[0], &i)
    }

    /// Loops over `dims` in row-major order, threading `accs` through `body(multi, accs)`.
    ///
    /// A nest with a zero-sized dimension has no iterations and emits no loop: `accs` come back
    /// as they are. (Emitting it would loop over the dimensions outside the empty one for
    /// nothing: a reduction of a `pred[2^62,0]` ran `2^62` empty iterations.)
    pub fn nest(
        &mut self,
        dims: &[i64],
        accs: Vec<Val<'ctx>>,
        body: &mut NestBody<'_, 'a, 'ctx>,
    ) -> R<Vec<Val<'ctx>>> {
        if dims.contains(&0) {
            return Ok(accs);
        }
        let mut multi = Vec::with_capacity(dims.len());
        self.nest_rec(dims, &mut multi, accs, body)
    }

    fn nest_rec(
        &mut self,
        dims: &[i64],
        multi: &mut Vec<IntValue<'ctx>>,
        accs: Vec<Val<'ctx>>,
        body: &mut NestBody<'_, 'a, 'ctx>,
    ) -> R<Vec<Val<'ctx>>> {
        let k = multi.len();
        if k == dims.len() {
            return body(self, multi, accs);
        }
        let cg = self.cg;
        if dims[k] == 1 {
            multi.push(cg.c64(0));
            let r = self.nest_rec(dims, multi, accs, body);
            multi.pop();
            return r;
        }
        let mut multi_in = multi.clone();
        let hints = unroll_hints(cg, dims[k]);
        let r = cg.for_range_acc_hinted(cg.c64(0), cg.c64(dims[k]), &accs, hints, |i, a| {
            self.push_scope();
            multi_in.push(i);
            let r = self.nest_rec(dims, &mut multi_in, a.to_vec(), body);
            self.pop_scope();
            r
        });
        r
    }

    /// [`Gen::nest`] for float sums whose body adds one term to each accumulator: the
    /// innermost dimension, when longer than one run, is summed as a fixed tree of short
    /// chains instead of one chain (a chain of a million `f32` terms was 18 times less
    /// accurate than XLA's reduction). A run of at most `run` consecutive coordinates is
    /// summed from `zeros` (each sum's identity, `-0.0`), runs are added in groups of
    /// [`SUM_FAN`], groups in groups of `SUM_FAN`, and so on (for `f32`, the levels above the
    /// runs add in `f64`, [`widen_sum`], and the total is rounded once); the whole dimension's
    /// sums are then added to the accumulators. The tree depends on the dimension's size alone.
    /// When the innermost dimension is no longer than a run, all of `dims` flattened in
    /// row-major order are that dimension (one chain in the nest's order when they hold at
    /// most a run of terms, else the tree).
    pub fn nest_sum(
        &mut self,
        dims: &[i64],
        accs: Vec<Val<'ctx>>,
        run: i64,
        zeros: &[Val<'ctx>],
        body: &mut NestBody<'_, 'a, 'ctx>,
    ) -> R<Vec<Val<'ctx>>> {
        let Some((&n, outer)) = dims.split_last() else {
            return self.nest(dims, accs, body);
        };
        if accs.len() != zeros.len() || dims.contains(&0) {
            return self.nest(dims, accs, body);
        }
        if n <= run {
            // An innermost dimension too short for a run (a group norm's two features of a
            // group under 32 x 32 pixels): the dimensions' coordinates, flattened in row-major
            // order, are summed as one dimension, so a long sum is a tree rather than one
            // chain of every term, and the loops are one dimension's (a loop past the unroll
            // limit stays a loop) rather than a nest of short loops that LLVM unrolls
            // completely and then vectorizes across the outputs with gathers (the figures are
            // in codegen-cpu/BENCH.md).
            // With at most a run of terms in all, the flattened dimension is one chain, in the
            // nest's own order.
            let total = dims.iter().product::<i64>();
            if total == n {
                return self.nest(dims, accs, body);
            }
            let shape = dims.to_vec();
            let mut flat_body = |g: &mut Gen<'a, 'ctx>, flat: &[IntValue<'ctx>], a| {
                let idx = g.index_linear(&shape, flat[0])?;
                body(g, &idx.multi, a)
            };
            return if total <= run {
                self.nest(&[total], accs, &mut flat_body)
            } else {
                self.nest_sum(&[total], accs, run, zeros, &mut flat_body)
            };
        }
        let spans = sum_spans(n, run);
        let outer = outer.to_vec();
        let cg = self.cg;
        let wide = zeros
            .iter()
            .map(|&z| widen_sum(cg, z))
            .collect::<R<Vec<_>>>()?;
        self.nest(&outer, accs, &mut |g, om, accs| {
            let mut prefix = om.to_vec();
            let top = spans.len() - 1;
            let zs = (zeros, &wide[..]);
            let sums = g.sum_level(&spans, top, g.cg.c64(0), n, zs, &mut prefix, body)?;
            let mut narrow = Vec::with_capacity(sums.len());
            for (s, z) in sums.iter().zip(zeros) {
                narrow.push(narrow_sum(g.cg, *s, *z)?);
            }
            add_sums(g.cg, &accs, &narrow)
        })
    }

    /// The sum from zero of coordinates `base .. min(base + spans[level], n)` of the
    /// innermost dimension of [`Gen::nest_sum`]: `zeros.0` are the sums' identities, in
    /// which the runs (level 0) add; `zeros.1` the same in the type the levels above add in
    /// ([`widen_sum`]).
    #[allow(clippy::too_many_arguments)]
    fn sum_level(
        &mut self,
        spans: &[i64],
        level: usize,
        base: IntValue<'ctx>,
        n: i64,
        zeros: (&[Val<'ctx>], &[Val<'ctx>]),
        prefix: &mut Vec<IntValue<'ctx>>,
        body: &mut NestBody<'_, 'a, 'ctx>,
    ) -> R<Vec<Val<'ctx>>> {
        let cg = self.cg;
        let b = &cg.b;
        let span = spans[level];
        let left = b.build_int_nsw_sub(cg.c64(n), base, "left")?;
        if level == 0 {
            let end = b.build_int_nsw_add(base, min_i64(cg, left, span)?, "end")?;
            return cg.for_range_acc_hinted(base, end, zeros.0, unroll_hints(cg, span), |i, a| {
                self.push_scope();
                prefix.push(i);
                let r = body(self, prefix, a.to_vec());
                prefix.pop();
                self.pop_scope();
                r
            });
        }
        let sub = spans[level - 1];
        let cover = min_i64(cg, left, span)?;
        let parts = b.build_int_unsigned_div(
            b.build_int_nsw_add(cover, cg.c64(sub - 1), "pc")?,
            cg.c64(sub),
            "parts",
        )?;
        // Each part is the whole tree below this level: unrolled, every level would copy it
        // once per part, a thousand copies of the innermost run for three levels.
        cg.for_range_acc_hinted(cg.c64(0), parts, zeros.1, &[NO_UNROLL], |j, a| {
            let at = b.build_int_nsw_add(base, b.build_int_nsw_mul(j, cg.c64(sub), "o")?, "at")?;
            let mut part = self.sum_level(spans, level - 1, at, n, zeros, prefix, body)?;
            if level == 1 {
                for p in &mut part {
                    *p = widen_sum(cg, *p)?;
                }
            }
            add_sums(cg, a, &part)
        })
    }

    fn gen_reduce(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Vec<Val<'ctx>>> {
        let m = self.m;
        let ops = m.operands(id);
        let n = ops.len() / 2;
        if n == 0 || ops.len() != 2 * n {
            return Err("reduce needs pairs of operands and init values".into());
        }
        let rdims = self.ints(id, AttrKey::Dimensions)?.to_vec();
        let in_dims = self.arr(ops[0])?.dims.to_vec();
        let rank = in_dims.len();
        let mut reduced = vec![false; rank];
        for &d in &rdims {
            *reduced
                .get_mut(d as usize)
                .ok_or("reduce dimension out of range")? = true;
        }
        let comp = m
            .comp_attr(id, &AttrKey::ToApply)
            .ok_or("reduce needs to_apply")?;
        let s = self.scalar_index();
        let mut init = Vec::with_capacity(n);
        for &o in &ops[n..] {
            init.push(self.gen1(o, &s)?);
        }
        let red_dims: Vec<i64> = (0..rank)
            .filter(|&d| reduced[d])
            .map(|d| in_dims[d])
            .collect();
        let inputs = ops[..n].to_vec();
        let kept_multi = idx.multi.clone();
        let minmax = minmax_intrinsic(m, id);
        let mut step = |g: &mut Self, rmulti: &[IntValue<'ctx>], accs: Vec<Val<'ctx>>| {
            let mut multi = Vec::with_capacity(rank);
            let (mut ki, mut ri) = (0, 0);
            for &red in reduced.iter() {
                if red {
                    multi.push(rmulti[ri]);
                    ri += 1;
                } else {
                    multi.push(kept_multi[ki]);
                    ki += 1;
                }
            }
            let i = g.index_multi(&in_dims, multi)?;
            let mut args = accs;
            for &o in &inputs {
                args.push(g.gen1(o, &i)?);
            }
            g.reduce_step(comp, minmax, &args)
        };
        // A float sum: a tree of short chains. When the innermost reduced dimension is the
        // input's last (contiguous in the default layout) a run is long, as LLVM keeps its
        // partial sums in the lanes of several vectors; else a run is a scalar chain.
        let ty = self.arr(ops[0])?.ty;
        let wide = matches!(ty, ElementType::F32 | ElementType::F64);
        if n == 1 && wide && simple_binary(m, comp) == Some(Opcode::Add) {
            let minor = reduced.last() == Some(&true);
            let run = if minor { SUM_RUN_MINOR } else { SUM_FAN };
            let zero = self.cg.const_f(ty, -0.0)?;
            return self.nest_sum(&red_dims, init, run, &[zero], &mut step);
        }
        self.nest(&red_dims, init, &mut step)
    }

    /// One step of a reduction: the reducer `comp` applied to the accumulators followed by
    /// the new elements (`minmax`, from [`minmax_intrinsic`], replaces it by an intrinsic).
    pub fn reduce_step(
        &mut self,
        comp: CompId,
        minmax: Option<&str>,
        args: &[Val<'ctx>],
    ) -> R<Vec<Val<'ctx>>> {
        if let Some(name) = minmax {
            // max/min of floats: the IEEE maximum/minimum intrinsics propagate NaN like
            // XLA's and vectorize as reductions (they order -0 below +0 where XLA keeps
            // the first of two equal zeros).
            return Ok(vec![self.cg.call_intrinsic(name, &[args[0], args[1]])?]);
        }
        let r = self.apply(comp, args)?;
        // A plain float sum or product may be reassociated, so the innermost loop
        // vectorizes (partial sums in vector lanes, combined in a fixed order).
        for v in &r {
            mark_reassoc(*v);
        }
        Ok(r)
    }

    fn gen_reduce_window(&mut self, id: InstId, idx: &Index<'ctx>) -> R<Vec<Val<'ctx>>> {
        let m = self.m;
        let cg = self.cg;
        let ops = m.operands(id);
        let n = ops.len() / 2;
        if n == 0 || ops.len() != 2 * n {
            return Err("reduce-window needs pairs of operands and init values".into());
        }
        let in_dims = self.arr(ops[0])?.dims.to_vec();
        let rank = in_dims.len();
        let wd = window(m, id, rank)?;
        let comp = m
            .comp_attr(id, &AttrKey::ToApply)
            .ok_or("reduce-window needs to_apply")?;
        let s = self.scalar_index();
        let mut init = Vec::with_capacity(n);
        for &o in &ops[n..] {
            init.push(self.gen1(o, &s)?);
        }
        if in_dims.contains(&0) {
            // No window element is inside an empty operand: every output is the init value.
            // (The loop below loads at a clamped position before masking the value, which
            // would read an empty buffer: cpu campaign seed 1795600102, case 12619, a
            // segmentation fault.)
            return Ok(init);
        }
        let wsizes: Vec<i64> = wd.iter().map(|w| w.size).collect();
        let inputs = ops[..n].to_vec();
        let out_multi = idx.multi.clone();
        self.nest(&wsizes, init, &mut |g, wmulti, accs| {
            let b = &cg.b;
            let (pos, ok) = window_pos(cg, &wd, &in_dims, &out_multi, wmulti)?;
            let i = g.index_multi(&in_dims, pos)?;
            let mut args = accs.clone();
            for &o in &inputs {
                args.push(g.gen1(o, &i)?);
            }
            let r = g.apply(comp, &args)?;
            let mut out = Vec::with_capacity(r.len());
            for (new, old) in r.into_iter().zip(accs) {
                out.push(b.build_select(ok, new, old, "rw")?);
            }
            Ok(out)
        })
    }
}

/// The window of a windowed op (`reduce-window`, `select-and-scatter`).
pub fn window(m: &Module, id: InstId, rank: usize) -> R<Vec<axle_ir::WindowDim>> {
    match m.attr(id, &AttrKey::Window) {
        Some(AttrValue::Window(w)) if w.len() == rank => Ok(w.to_vec()),
        Some(AttrValue::Window(_)) => Err("window rank does not match the operand".into()),
        _ if rank == 0 => Ok(Vec::new()),
        _ => Err("missing window".into()),
    }
}

/// The input position of window element `wmulti` of output `out_multi` (clamped into range so
/// it can always be read) and whether it is a real element (not padding or a dilation hole).
pub fn window_pos<'ctx>(
    cg: &Cg<'ctx>,
    wd: &[axle_ir::WindowDim],
    in_dims: &[i64],
    out_multi: &[IntValue<'ctx>],
    wmulti: &[IntValue<'ctx>],
) -> R<(Vec<IntValue<'ctx>>, IntValue<'ctx>)> {
    let b = &cg.b;
    let mut ok = cg.i1().const_all_ones();
    let mut pos = Vec::with_capacity(wd.len());
    for (d, w) in wd.iter().enumerate() {
        let k = if w.reversal {
            b.build_int_nsw_sub(cg.c64(w.size - 1), wmulti[d], "k")?
        } else {
            wmulti[d]
        };
        let (q, here) = window_dim_pos(cg, w, in_dims[d], out_multi[d], k)?;
        ok = b.build_and(ok, here, "ok")?;
        pos.push(q);
    }
    let mut safe = Vec::with_capacity(pos.len());
    for q in pos {
        safe.push(b.build_select(ok, q, cg.c64(0), "q")?.into_int_value());
    }
    Ok((safe, ok))
}

/// Along one dimension of window `w` over an input of `in_size` elements: the input position
/// that window position `k` (after any reversal) of output position `o` reads, and whether it
/// is inside the (base-dilated, padded) input, not padding or a dilation hole.
pub fn window_dim_pos<'ctx>(
    cg: &Cg<'ctx>,
    w: &axle_ir::WindowDim,
    in_size: i64,
    o: IntValue<'ctx>,
    k: IntValue<'ctx>,
) -> R<(IntValue<'ctx>, IntValue<'ctx>)> {
    let b = &cg.b;
    let p = b.build_int_nsw_mul(o, cg.c64(w.stride), "p")?;
    let p = b.build_int_nsw_sub(p, cg.c64(w.pad_lo), "p")?;
    let kk = b.build_int_nsw_mul(k, cg.c64(w.rhs_dilate), "kk")?;
    let p = b.build_int_nsw_add(p, kk, "p")?;
    let ge = b.build_int_compare(IntPredicate::SGE, p, cg.c64(0), "ge")?;
    let (q, on) = if w.lhs_dilate == 1 {
        (p, cg.i1().const_all_ones())
    } else {
        let q = b.build_int_signed_div(p, cg.c64(w.lhs_dilate), "q")?;
        let r = b.build_int_signed_rem(p, cg.c64(w.lhs_dilate), "r")?;
        (
            q,
            b.build_int_compare(IntPredicate::EQ, r, cg.c64(0), "on")?,
        )
    };
    let lt = b.build_int_compare(IntPredicate::SLT, q, cg.c64(in_size), "lt")?;
    let here = b.build_and(b.build_and(ge, on, "h")?, lt, "h")?;
    Ok((q, here))
}

/// The intrinsic that replaces the reducer of `reduce` `id` in [`Gen::reduce_step`]: the IEEE
/// maximum or minimum for a one-input float reduction by `maximum` or `minimum`.
pub fn minmax_intrinsic(m: &Module, id: InstId) -> Option<&'static str> {
    let ops = m.operands(id);
    let comp = m.comp_attr(id, &AttrKey::ToApply)?;
    if ops.len() != 2 || !m.array_shape(ops[0])?.ty.is_float() {
        return None;
    }
    match simple_binary(m, comp) {
        Some(Opcode::Maximum) => Some("llvm.maximum"),
        Some(Opcode::Minimum) => Some("llvm.minimum"),
        _ => None,
    }
}

/// The opcode of a computation that is one binary op of its two parameters, in either order.
pub fn simple_binary(m: &Module, comp: CompId) -> Option<Opcode> {
    let root = m.root(comp);
    let params = m.params(comp);
    if params.len() != 2 || m.operands(root).len() != 2 {
        return None;
    }
    let ops = m.operands(root);
    let both = (ops[0] == params[0] && ops[1] == params[1])
        || (ops[0] == params[1] && ops[1] == params[0]);
    both.then(|| m.opcode(root))
}

/// Terms of a run of [`Gen::nest_sum`] over a contiguous dimension (vectorized by LLVM:
/// partial sums in the lanes of several vectors, so each lane's chain is short).
pub const SUM_RUN_MINOR: i64 = 1024;

/// Runs (or groups) of [`Gen::nest_sum`] added in one chain; also the run over a strided
/// dimension, whose terms are added one by one.
pub const SUM_FAN: i64 = 16;

/// An `f32` value of a sum's tree extended to `f64`, the type the tree's levels above its
/// runs add in (their `f32` roundings, of sums as large as the whole, were most of a long
/// sum's error); other values as they are.
pub fn widen_sum<'ctx>(cg: &Cg<'ctx>, v: Val<'ctx>) -> R<Val<'ctx>> {
    match v {
        BasicValueEnum::FloatValue(f) if f.get_type() == cg.f32() => {
            Ok(bv(cg.b.build_float_ext(f, cg.f64(), "wide")?))
        }
        _ => Ok(v),
    }
}

/// The inverse of [`widen_sum`]: `v` rounded (to nearest even) to the type of `like`.
pub fn narrow_sum<'ctx>(cg: &Cg<'ctx>, v: Val<'ctx>, like: Val<'ctx>) -> R<Val<'ctx>> {
    match (v, like) {
        (BasicValueEnum::FloatValue(f), BasicValueEnum::FloatValue(l))
            if f.get_type() != l.get_type() =>
        {
            Ok(bv(cg.b.build_float_trunc(f, l.get_type(), "narrow")?))
        }
        _ => Ok(v),
    }
}

/// The lane sums `a[i] + b[i]` of float values, reassociable (see [`mark_reassoc`]).
fn add_sums<'ctx>(cg: &Cg<'ctx>, a: &[Val<'ctx>], b: &[Val<'ctx>]) -> R<Vec<Val<'ctx>>> {
    let mut out = Vec::with_capacity(a.len());
    for (x, y) in a.iter().zip(b) {
        let s = bv(cg
            .b
            .build_float_add(x.into_float_value(), y.into_float_value(), "sum")?);
        mark_reassoc(s);
        out.push(s);
    }
    Ok(out)
}

/// The spans of the levels of a sum's tree over `n` terms ([`Gen::nest_sum`]): a run of
/// `run` terms, a group of [`SUM_FAN`] runs, a group of `SUM_FAN` groups, ..., up to the
/// first level that spans all of `n`.
pub fn sum_spans(n: i64, run: i64) -> Vec<i64> {
    let mut spans = vec![run.max(1)];
    while let Some(&s) = spans.last().filter(|&&s| s < n) {
        spans.push(s.saturating_mul(SUM_FAN));
    }
    spans
}

/// `min(a, b)` of an `i64` and a constant.
fn min_i64<'ctx>(cg: &Cg<'ctx>, a: IntValue<'ctx>, b: i64) -> R<IntValue<'ctx>> {
    let lt =
        cg.b.build_int_compare(inkwell::IntPredicate::SLT, a, cg.c64(b), "lt")?;
    Ok(cg.b.build_select(lt, a, cg.c64(b), "min")?.into_int_value())
}

/// Allows reassociation on a float `fadd`/`fmul` (a reduction step), nothing else.
fn mark_reassoc(v: Val<'_>) {
    use inkwell::values::{BasicValue, FastMathFlags, InstructionOpcode};
    if let Some(i) = v.as_instruction_value() {
        if matches!(
            i.get_opcode(),
            InstructionOpcode::FAdd | InstructionOpcode::FMul
        ) {
            let _ = i.set_fast_math_flags(FastMathFlags::AllowReassoc);
        }
    }
}

/// Strides of each logical dimension in the physical order given by `m2m`.
fn phys_strides(dims: &[i64], m2m: &[i64]) -> Vec<i64> {
    let mut s = vec![0i64; dims.len()];
    let mut acc = 1i64;
    for &d in m2m {
        s[d as usize] = acc;
        acc *= dims[d as usize].max(1);
    }
    s
}

/// The bits of a register value of type `ty` as an integer of `ty.bits()` bits.
fn elem_bits<'ctx>(cg: &Cg<'ctx>, ty: ElementType, v: Val<'ctx>) -> R<IntValue<'ctx>> {
    let m = cg.to_mem(ty, v)?;
    mem_bits(cg, ty, m)
}

/// The bits of a value of type `ty` in memory form (`ty.bits()` wide).
fn mem_bits<'ctx>(cg: &Cg<'ctx>, ty: ElementType, m: Val<'ctx>) -> R<IntValue<'ctx>> {
    let it = cg.int_ty(ty.bits());
    Ok(if ty.bits().is_multiple_of(8) {
        cg.b.build_bit_cast(m, it, "bits")?.into_int_value()
    } else {
        // Sub-byte types are their bits zero-extended in a byte.
        cg.b.build_int_truncate(m.into_int_value(), it, "bits")?
    })
}

/// The register value of type `ty` whose bits are `bits` (`ty.bits()` wide).
fn bits_elem<'ctx>(cg: &Cg<'ctx>, ty: ElementType, bits: IntValue<'ctx>) -> R<Val<'ctx>> {
    let mem = bits_mem(cg, ty, bits)?;
    cg.load_form(ty, mem)
}

/// The memory form of type `ty` whose bits are `bits` (`ty.bits()` wide).
fn bits_mem<'ctx>(cg: &Cg<'ctx>, ty: ElementType, bits: IntValue<'ctx>) -> R<Val<'ctx>> {
    Ok(if ty.bits().is_multiple_of(8) {
        cg.b.build_bit_cast(bits, cg.mem_ty(ty)?, "m")?
    } else {
        bv(cg.b.build_int_z_extend(bits, cg.i8(), "m")?)
    })
}

/// A register constant from one element's literal bytes.
pub fn scalar_const<'ctx>(cg: &Cg<'ctx>, ty: ElementType, bytes: &[u8]) -> R<Val<'ctx>> {
    use axle_ir::literal::{element_to_f64, element_to_i128};
    if ty.is_complex() {
        return complex_constant_bytes(cg, ty, bytes);
    }
    if ty.is_float() {
        if ty == ElementType::F32 {
            let bits = u32::from_le_bytes(bytes[..4].try_into().unwrap());
            let c = cg.i32().const_int(bits as u64, false);
            return Ok(cg.b.build_bit_cast(c, cg.f32(), "f")?);
        }
        if ty == ElementType::F64 {
            let bits = u64::from_le_bytes(bytes[..8].try_into().unwrap());
            let c = cg.i64().const_int(bits, false);
            return Ok(cg.b.build_bit_cast(c, cg.f64(), "d")?);
        }
        if matches!(ty, ElementType::F16 | ElementType::BF16) {
            let bits = u16::from_le_bytes([bytes[0], bytes[1]]);
            let c = cg.ctx.i16_type().const_int(bits as u64, false);
            return cg.load_form(ty, bv(c));
        }
        return cg.const_f(ty, element_to_f64(ty, bytes));
    }
    cg.const_i(ty, element_to_i128(ty, bytes))
}

/// The global holding a constant's bytes (created once per instruction).
pub fn const_global<'ctx>(cg: &Cg<'ctx>, id: InstId, data: &[u8]) -> R<PointerValue<'ctx>> {
    bytes_global(cg, &format!("const.{}", id.index()), data)
}

/// The array leaves of a literal, depth-first.
pub fn literal_leaves<'l>(l: &'l Literal, out: &mut Vec<&'l axle_ir::ArrayLiteral>) {
    match l {
        Literal::Array(a) => out.push(a),
        Literal::Tuple(es) => es.iter().for_each(|e| literal_leaves(e, out)),
    }
}

/// The global holding leaf `k` (depth-first) of constant `id`'s value; an array constant's one
/// leaf is the global [`const_global`] makes.
pub fn const_leaf_global<'ctx>(
    cg: &Cg<'ctx>,
    m: &Module,
    id: InstId,
    k: u32,
) -> R<PointerValue<'ctx>> {
    let lit = m.literal(id).ok_or("constant without a value")?;
    if let Literal::Array(a) = lit {
        return const_global(cg, id, &a.data);
    }
    let mut leaves = Vec::new();
    literal_leaves(lit, &mut leaves);
    let leaf = leaves.get(k as usize).ok_or("constant leaf out of range")?;
    bytes_global(cg, &format!("const.{}.{k}", id.index()), &leaf.data)
}

/// A private constant global named `name` holding `data` (created once).
fn bytes_global<'ctx>(cg: &Cg<'ctx>, name: &str, data: &[u8]) -> R<PointerValue<'ctx>> {
    if let Some(g) = cg.module.get_global(name) {
        return Ok(g.as_pointer_value());
    }
    let init = cg.ctx.const_string(data, false);
    let g = cg.module.add_global(
        init.get_type(),
        Some(cg.target.buffer_address_space()),
        name,
    );
    g.set_initializer(&init);
    g.set_constant(true);
    g.set_linkage(Linkage::Private);
    g.set_alignment(64);
    Ok(g.as_pointer_value())
}
