//! A builder for framework authors: build any module in Rust without HLO text.
//!
//! Every added instruction goes through [`crate::shape_inference`], so a bad operand or attribute
//! is reported as a [`BuildError`] at the call that adds it, never as a panic. Arrays get the
//! default row-major layout (scalars, tokens and opaque values none), and instructions get
//! module-wide unique names: `add.3` when unnamed, `x` or else `x.4` when named `x`.
//! [`ModuleBuilder::build`] runs the verifier.
//!
//! A [`CompBuilder`] borrows its [`ModuleBuilder`], so computations are built one at a time:
//! build the computations an instruction calls (loop bodies, comparators, custom reducers)
//! before the computation that calls them. The usual reducers need no such step: the
//! conveniences below create them on demand, one per opcode and element type.
//!
//! Conveniences, all producing plain HLO (broadcasts, reshapes, reduces and elementwise ops):
//! numpy-style broadcasting binary ops ([`CompBuilder::add_broadcast`] and its siblings,
//! [`CompBuilder::binary_broadcast`], [`CompBuilder::compare_broadcast`]), which stretch
//! size-1 dimensions and prepend missing leading ones; [`CompBuilder::relu`],
//! [`CompBuilder::softmax`]; [`CompBuilder::reduce_sum`], [`CompBuilder::reduce_max`],
//! [`CompBuilder::reduce_min`] and [`CompBuilder::reduce_mean`] over any dimensions.
//!
//! ```
//! use axle_ir::builder::ModuleBuilder;
//! use axle_ir::{ElementType::F32, Opcode, Shape};
//!
//! # fn main() -> Result<(), axle_ir::builder::BuildError> {
//! let mut b = ModuleBuilder::new("m");
//! let sum = b.scalar_reducer("sum", Opcode::Add, F32)?;
//! let mut c = b.computation("main");
//! let x = c.parameter(0, Shape::array(F32, &[4, 8]), "x")?;
//! let y = c.add(x, x)?;
//! let zero = c.constant_scalar(F32, 0.0)?;
//! let r = c.reduce(&[y], &[zero], &[1], sum)?;
//! // The same with the conveniences: a bias row broadcast numpy-style, a reducer on demand.
//! let bias = c.parameter(1, Shape::array(F32, &[8]), "bias")?;
//! let z = c.add_broadcast(x, bias)?;
//! let s = c.reduce_sum(z, &[1])?;
//! let t = c.tuple(&[r, s])?;
//! let main = c.finish(t)?;
//! b.entry(main);
//! let m = b.build()?;
//! assert_eq!(m.comp_name(m.entry()), "main");
//! # Ok(())
//! # }
//! ```

use std::fmt;

use hashbrown::{HashMap, HashSet};

use crate::attrs::{Attr, AttrKey, AttrValue};
use crate::literal::{element_to_f64, f64_to_element, i128_to_element, ArrayLiteral, Literal};
use crate::module::{CompId, ConstValue, InstId, LayoutId, Module, NewInst};
use crate::opcode::Opcode;
use crate::shape_inference::{infer_shape, OwnedShape};
use crate::types::{ArrayLayout, ArrayShape, ComparisonDirection, ElementType, Layout, Shape};
use crate::verify::{verify, VerifyErrors};

/// Why a builder call failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// An instruction could not be added (shape inference failed, or an operand is not an
    /// instruction of the computation being built).
    Inst {
        /// The computation being built.
        computation: String,
        /// The opcode of the instruction.
        opcode: Opcode,
        /// What went wrong.
        message: String,
    },
    /// The builder was misused (no entry computation, a root from another computation, ...).
    Invalid(String),
    /// The finished module failed verification.
    Verify(VerifyErrors),
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Inst {
                computation,
                message,
                ..
            } => write!(f, "in computation %{computation}: {message}"),
            BuildError::Invalid(msg) => f.write_str(msg),
            BuildError::Verify(e) => write!(f, "the built module is invalid:\n{e}"),
        }
    }
}

impl std::error::Error for BuildError {}

/// Anything a builder accepts as a shape.
pub trait IntoShape {
    /// The shape, resolving interned tuple elements in `m`.
    fn into_owned_shape(self, m: &Module) -> Result<OwnedShape, BuildError>;
}

impl IntoShape for OwnedShape {
    fn into_owned_shape(self, _: &Module) -> Result<OwnedShape, BuildError> {
        Ok(self)
    }
}

impl IntoShape for ArrayShape {
    fn into_owned_shape(self, _: &Module) -> Result<OwnedShape, BuildError> {
        Ok(OwnedShape::Array(self))
    }
}

impl IntoShape for &Shape {
    fn into_owned_shape(self, m: &Module) -> Result<OwnedShape, BuildError> {
        OwnedShape::from_shape(m, self).ok_or_else(|| {
            BuildError::Invalid("a tuple shape refers to a shape id of another module".into())
        })
    }
}

impl IntoShape for Shape {
    fn into_owned_shape(self, m: &Module) -> Result<OwnedShape, BuildError> {
        (&self).into_owned_shape(m)
    }
}

/// `dot` dimension numbers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DotDims {
    /// Batch dimensions of the left operand.
    pub lhs_batch: Vec<i64>,
    /// Batch dimensions of the right operand.
    pub rhs_batch: Vec<i64>,
    /// Contracting dimensions of the left operand.
    pub lhs_contracting: Vec<i64>,
    /// Contracting dimensions of the right operand.
    pub rhs_contracting: Vec<i64>,
}

impl DotDims {
    /// A matrix product: contracts `lhs` dimension `lc` with `rhs` dimension `rc`, no batch.
    pub fn contracting(lc: i64, rc: i64) -> DotDims {
        DotDims {
            lhs_contracting: vec![lc],
            rhs_contracting: vec![rc],
            ..Default::default()
        }
    }

    fn attrs(&self) -> Vec<Attr> {
        let mut out = Vec::new();
        for (k, v) in [
            (AttrKey::LhsBatchDims, &self.lhs_batch),
            (AttrKey::RhsBatchDims, &self.rhs_batch),
            (AttrKey::LhsContractingDims, &self.lhs_contracting),
            (AttrKey::RhsContractingDims, &self.rhs_contracting),
        ] {
            if !v.is_empty() {
                out.push((k, AttrValue::Ints(v.as_slice().into())));
            }
        }
        out
    }
}

/// Builds a [`Module`].
#[derive(Debug)]
pub struct ModuleBuilder {
    m: Module,
    used_names: HashSet<String>,
    next_id: usize,
    /// Reducers made on demand, by opcode and element type.
    reducers: HashMap<(Opcode, ElementType), CompId>,
}

impl ModuleBuilder {
    /// A builder for an empty module named `name`.
    pub fn new(name: &str) -> ModuleBuilder {
        ModuleBuilder {
            m: Module::new(name),
            used_names: HashSet::new(),
            next_id: 0,
            reducers: HashMap::new(),
        }
    }

    /// Starts a new computation named `name`.
    pub fn computation(&mut self, name: &str) -> CompBuilder<'_> {
        let comp = self.m.add_computation(name);
        CompBuilder { b: self, comp }
    }

    /// Makes `c` the entry computation.
    pub fn entry(&mut self, c: CompId) {
        self.m.set_entry(c);
    }

    /// The module built so far.
    pub fn module(&self) -> &Module {
        &self.m
    }

    /// Builds the computation `(a: T[], b: T[]) -> T[]` computing `opcode(a, b)`: the usual
    /// reducer for `reduce`, `reduce-window`, `scatter` and `all-reduce`.
    pub fn scalar_reducer(
        &mut self,
        name: &str,
        opcode: Opcode,
        ty: ElementType,
    ) -> Result<CompId, BuildError> {
        let mut c = self.computation(name);
        let a = c.parameter(0, OwnedShape::scalar(ty), "a")?;
        let b = c.parameter(1, OwnedShape::scalar(ty), "b")?;
        let r = c.binary(opcode, a, b)?;
        c.finish(r)
    }

    /// The reducer `(a: T[], b: T[]) -> T[]` computing `opcode(a, b)`, built on first use (named
    /// `opcode_T`, or `opcode_T.N` if that computation name is taken) and shared afterwards.
    pub fn reducer(&mut self, opcode: Opcode, ty: ElementType) -> Result<CompId, BuildError> {
        if let Some(&c) = self.reducers.get(&(opcode, ty)) {
            return Ok(c);
        }
        let base = format!("{}_{}", opcode.name().replace('-', "_"), ty.name());
        let taken = |m: &Module, n: &str| m.computations().iter().any(|&c| m.comp_name(c) == n);
        let mut name = base.clone();
        let mut k = 1;
        while taken(&self.m, &name) {
            name = format!("{base}.{k}");
            k += 1;
        }
        let c = self.scalar_reducer(&name, opcode, ty)?;
        self.reducers.insert((opcode, ty), c);
        Ok(c)
    }

    /// Builds the comparator `(a: T[], b: T[]) -> pred[]` computing `compare(a, b)` in
    /// `direction`, for `sort` of one operand of type `ty`.
    pub fn comparator(
        &mut self,
        name: &str,
        ty: ElementType,
        direction: ComparisonDirection,
    ) -> Result<CompId, BuildError> {
        let mut c = self.computation(name);
        let a = c.parameter(0, OwnedShape::scalar(ty), "a")?;
        let b = c.parameter(1, OwnedShape::scalar(ty), "b")?;
        let r = c.compare(a, b, direction)?;
        c.finish(r)
    }

    /// Verifies and returns the module.
    pub fn build(self) -> Result<Module, BuildError> {
        if self.m.entry().is_none() {
            return Err(BuildError::Invalid(
                "no entry computation was set (call ModuleBuilder::entry)".into(),
            ));
        }
        verify(&self.m).map_err(BuildError::Verify)?;
        Ok(self.m)
    }

    /// Returns the module without verifying it.
    pub fn build_unverified(self) -> Module {
        self.m
    }

    /// `base.N` for the next free `N`.
    fn fresh_name(&mut self, base: &str) -> String {
        loop {
            let name = format!("{base}.{}", self.next_id);
            self.next_id += 1;
            if !self.used_names.contains(&name) {
                return name;
            }
        }
    }

    /// `name` if it is free, else `name.N`; marks the result used.
    fn claim_name(&mut self, name: Option<&str>, opcode: Opcode) -> String {
        let name = match name {
            Some(n) if !n.is_empty() && !self.used_names.contains(n) => n.to_string(),
            Some(n) if !n.is_empty() => self.fresh_name(n),
            _ => self.fresh_name(opcode.name()),
        };
        self.used_names.insert(name.clone());
        name
    }
}

/// The default layout of a shape: row-major for arrays of rank at least 1, none for scalars,
/// tokens and opaque values; tuples get their elements' layouts (none if none has one), as the
/// parser reads the printed shapes back.
pub fn default_layout(m: &mut Module, shape: &OwnedShape) -> LayoutId {
    match shape {
        OwnedShape::Array(a) if a.rank() > 0 => {
            m.intern_layout(Layout::Array(ArrayLayout::row_major(a.rank())))
        }
        OwnedShape::Tuple(es) => {
            let ls: Vec<LayoutId> = es.iter().map(|e| default_layout(m, e)).collect();
            if ls.iter().all(|&l| l == m.no_layout()) {
                // As the parser reads `(f32[], s32[])`: no layout anywhere, none for the tuple.
                m.no_layout()
            } else {
                m.intern_layout(Layout::Tuple(ls.into()))
            }
        }
        _ => m.no_layout(),
    }
}

/// Builds one computation; see the module docs.
#[derive(Debug)]
pub struct CompBuilder<'b> {
    b: &'b mut ModuleBuilder,
    comp: CompId,
}

macro_rules! unary_ops {
    ($($(#[$doc:meta])* $fn:ident => $op:ident,)*) => {
        $(
            $(#[$doc])*
            pub fn $fn(&mut self, x: InstId) -> Result<InstId, BuildError> {
                self.unary(Opcode::$op, x)
            }
        )*
    };
}

macro_rules! binary_ops {
    ($($(#[$doc:meta])* $fn:ident => $op:ident,)*) => {
        $(
            $(#[$doc])*
            pub fn $fn(&mut self, a: InstId, b: InstId) -> Result<InstId, BuildError> {
                self.binary(Opcode::$op, a, b)
            }
        )*
    };
}

impl<'b> CompBuilder<'b> {
    /// The computation being built.
    pub fn id(&self) -> CompId {
        self.comp
    }

    /// The module built so far.
    pub fn module(&self) -> &Module {
        &self.b.m
    }

    fn inst_err(&self, opcode: Opcode, message: String) -> BuildError {
        BuildError::Inst {
            computation: self.b.m.comp_name(self.comp).to_string(),
            opcode,
            message,
        }
    }

    /// Adds an instruction: checks the operands belong to this computation, infers the shape
    /// (with `declared` for what cannot be inferred) and names it.
    fn push(
        &mut self,
        opcode: Opcode,
        operands: &[InstId],
        attrs: Vec<Attr>,
        declared: Option<OwnedShape>,
        name: Option<&str>,
    ) -> Result<InstId, BuildError> {
        let m = &self.b.m;
        for (i, &op) in operands.iter().enumerate() {
            if !m.is_live(op) || m.parent(op) != self.comp {
                return Err(self.inst_err(
                    opcode,
                    format!(
                        "{opcode}: operand {i} (#{}) is not an instruction of this computation",
                        op.index()
                    ),
                ));
            }
        }
        let shape = infer_shape(m, opcode, operands, &attrs, declared.as_ref())
            .map_err(|e| self.inst_err(opcode, e.message().to_string()))?;
        let name = self.b.claim_name(name, opcode);
        let m = &mut self.b.m;
        let shape_id = shape.intern(m);
        let layout = default_layout(m, &shape);
        Ok(m.push_inst(
            self.comp,
            NewInst {
                opcode,
                shape: shape_id,
                layout,
                operands: operands.to_vec(),
                attrs,
                name: Some(name),
            },
        ))
    }

    /// Adds any instruction: `declared` gives the result shape where it cannot be inferred
    /// (`custom-call`, `rng`, `infeed`, ...) and is ignored otherwise, except as the result
    /// element type of `dot` and `convolution`. See [`Self::op_shaped`] to pass a [`Shape`].
    pub fn op(
        &mut self,
        opcode: Opcode,
        operands: &[InstId],
        attrs: Vec<Attr>,
        declared: Option<OwnedShape>,
    ) -> Result<InstId, BuildError> {
        self.push(opcode, operands, attrs, declared, None)
    }

    /// [`Self::op`] with a declared shape of any kind ([`Shape`], [`ArrayShape`], ...).
    pub fn op_shaped(
        &mut self,
        opcode: Opcode,
        operands: &[InstId],
        attrs: Vec<Attr>,
        declared: impl IntoShape,
    ) -> Result<InstId, BuildError> {
        let declared = declared.into_owned_shape(&self.b.m)?;
        self.push(opcode, operands, attrs, Some(declared), None)
    }

    /// Renames an instruction (to `name.N` if `name` is taken) and returns the name given.
    pub fn rename(&mut self, id: InstId, name: &str) -> Result<String, BuildError> {
        if !self.b.m.is_live(id) {
            return Err(BuildError::Invalid(format!(
                "cannot rename #{}: no such instruction",
                id.index()
            )));
        }
        let name = self.b.claim_name(Some(name), self.b.m.opcode(id));
        self.b.m.set_name(id, &name);
        Ok(name)
    }

    /// `parameter(n)` of shape `shape`, named `name`.
    pub fn parameter(
        &mut self,
        n: i64,
        shape: impl IntoShape,
        name: &str,
    ) -> Result<InstId, BuildError> {
        let shape = shape.into_owned_shape(&self.b.m)?;
        self.push(
            Opcode::Parameter,
            &[],
            vec![(AttrKey::ParameterNumber, AttrValue::Int(n))],
            Some(shape),
            Some(name),
        )
    }

    /// A constant holding `literal`.
    pub fn constant(&mut self, literal: Literal) -> Result<InstId, BuildError> {
        let shape = literal_shape(&literal);
        let id = self.push(Opcode::Constant, &[], Vec::new(), Some(shape), None)?;
        self.b.m.set_constant(id, ConstValue::Literal(literal));
        Ok(id)
    }

    /// A scalar constant of type `ty` holding `v` (rounded to `ty`).
    pub fn constant_scalar(&mut self, ty: ElementType, v: f64) -> Result<InstId, BuildError> {
        self.constant(Literal::scalar_f64(ty, v))
    }

    /// An elementwise op of one operand (`negate`, `exponential`, ...).
    pub fn unary(&mut self, opcode: Opcode, x: InstId) -> Result<InstId, BuildError> {
        self.push(opcode, &[x], Vec::new(), None, None)
    }

    /// An elementwise op of two operands (`add`, `and`, `shift-left`, ...); use
    /// [`Self::compare`] for `compare`.
    pub fn binary(&mut self, opcode: Opcode, a: InstId, b: InstId) -> Result<InstId, BuildError> {
        self.push(opcode, &[a, b], Vec::new(), None, None)
    }

    unary_ops! {
        /// `abs(x)`.
        abs => Abs,
        /// `negate(x)`.
        negate => Negate,
        /// `exponential(x)`.
        exp => Exp,
        /// `log(x)`.
        log => Log,
        /// `tanh(x)`.
        tanh => Tanh,
        /// `sqrt(x)`.
        sqrt => Sqrt,
        /// `rsqrt(x)`.
        rsqrt => Rsqrt,
        /// `logistic(x)`.
        logistic => Logistic,
        /// `not(x)`.
        not => Not,
        /// `copy(x)`.
        copy => Copy,
    }

    binary_ops! {
        /// `add(a, b)`.
        add => Add,
        /// `subtract(a, b)`.
        subtract => Subtract,
        /// `multiply(a, b)`.
        multiply => Multiply,
        /// `divide(a, b)`.
        divide => Divide,
        /// `maximum(a, b)`.
        maximum => Maximum,
        /// `minimum(a, b)`.
        minimum => Minimum,
        /// `power(a, b)`.
        power => Power,
        /// `and(a, b)`.
        and => And,
        /// `or(a, b)`.
        or => Or,
    }

    /// `compare(a, b), direction=...`: a pred array of the operands' dimensions.
    pub fn compare(
        &mut self,
        a: InstId,
        b: InstId,
        direction: ComparisonDirection,
    ) -> Result<InstId, BuildError> {
        self.push(
            Opcode::Compare,
            &[a, b],
            vec![(AttrKey::Direction, AttrValue::Direction(direction))],
            None,
            None,
        )
    }

    /// `select(pred, on_true, on_false)`.
    pub fn select(
        &mut self,
        pred: InstId,
        on_true: InstId,
        on_false: InstId,
    ) -> Result<InstId, BuildError> {
        self.push(
            Opcode::Select,
            &[pred, on_true, on_false],
            Vec::new(),
            None,
            None,
        )
    }

    /// `clamp(lo, x, hi)`.
    pub fn clamp(&mut self, lo: InstId, x: InstId, hi: InstId) -> Result<InstId, BuildError> {
        self.push(Opcode::Clamp, &[lo, x, hi], Vec::new(), None, None)
    }

    /// `x`'s shape of this instruction as an array, for ops that keep dimensions.
    fn array_of(&self, opcode: Opcode, x: InstId) -> Result<ArrayShape, BuildError> {
        let m = &self.b.m;
        if !m.is_live(x) {
            return Err(self.inst_err(opcode, format!("{opcode}: #{} does not exist", x.index())));
        }
        match m.array_shape(x) {
            Some(a) => Ok(a.clone()),
            None => Err(self.inst_err(opcode, format!("{opcode}: the operand must be an array"))),
        }
    }

    /// `convert(x)` to element type `ty`.
    pub fn convert(&mut self, x: InstId, ty: ElementType) -> Result<InstId, BuildError> {
        let mut a = self.array_of(Opcode::Convert, x)?;
        a.ty = ty;
        self.push(Opcode::Convert, &[x], Vec::new(), Some(a.into()), None)
    }

    /// `bitcast-convert(x)` to element type `ty` (a minor dimension is added or removed when
    /// the widths differ).
    pub fn bitcast_convert(&mut self, x: InstId, ty: ElementType) -> Result<InstId, BuildError> {
        let a = self.array_of(Opcode::BitcastConvert, x)?;
        let (from, to) = (a.ty.bits() as i64, ty.bits() as i64);
        let mut dims = a.dims.to_vec();
        if from > to && to > 0 {
            dims.push(from / to);
        } else if from < to {
            dims.pop();
        }
        self.push(
            Opcode::BitcastConvert,
            &[x],
            Vec::new(),
            Some(OwnedShape::array(ty, &dims)),
            None,
        )
    }

    /// `broadcast(x)` to dimensions `dims`, operand dimension `i` becoming result dimension
    /// `mapping[i]`.
    pub fn broadcast(
        &mut self,
        x: InstId,
        dims: &[i64],
        mapping: &[i64],
    ) -> Result<InstId, BuildError> {
        let a = self.array_of(Opcode::Broadcast, x)?;
        self.push(
            Opcode::Broadcast,
            &[x],
            vec![(AttrKey::Dimensions, AttrValue::Ints(mapping.into()))],
            Some(OwnedShape::array(a.ty, dims)),
            None,
        )
    }

    /// `reshape(x)` to dimensions `dims`.
    pub fn reshape(&mut self, x: InstId, dims: &[i64]) -> Result<InstId, BuildError> {
        let a = self.array_of(Opcode::Reshape, x)?;
        self.push(
            Opcode::Reshape,
            &[x],
            Vec::new(),
            Some(OwnedShape::array(a.ty, dims)),
            None,
        )
    }

    /// `transpose(x), dimensions=perm`: result dimension `i` is operand dimension `perm[i]`.
    pub fn transpose(&mut self, x: InstId, perm: &[i64]) -> Result<InstId, BuildError> {
        self.push(
            Opcode::Transpose,
            &[x],
            vec![(AttrKey::Dimensions, AttrValue::Ints(perm.into()))],
            None,
            None,
        )
    }

    /// `reverse(x), dimensions=dims`.
    pub fn reverse(&mut self, x: InstId, dims: &[i64]) -> Result<InstId, BuildError> {
        self.push(
            Opcode::Reverse,
            &[x],
            vec![(AttrKey::Dimensions, AttrValue::Ints(dims.into()))],
            None,
            None,
        )
    }

    /// `slice(x), slice={[start:limit:stride], ...}`, one entry per dimension.
    pub fn slice(
        &mut self,
        x: InstId,
        starts: &[i64],
        limits: &[i64],
        strides: &[i64],
    ) -> Result<InstId, BuildError> {
        if starts.len() != limits.len() || starts.len() != strides.len() {
            return Err(self.inst_err(
                Opcode::Slice,
                "slice: starts, limits and strides must have the same length".into(),
            ));
        }
        let s: Vec<[i64; 3]> = (0..starts.len())
            .map(|i| [starts[i], limits[i], strides[i]])
            .collect();
        self.push(
            Opcode::Slice,
            &[x],
            vec![(AttrKey::Slice, AttrValue::Slice(s.into()))],
            None,
            None,
        )
    }

    /// `concatenate(xs...), dimensions={dim}`.
    pub fn concatenate(&mut self, xs: &[InstId], dim: i64) -> Result<InstId, BuildError> {
        self.push(
            Opcode::Concatenate,
            xs,
            vec![(AttrKey::Dimensions, AttrValue::Ints([dim].into()))],
            None,
            None,
        )
    }

    /// `pad(x, value), padding=...`: `(low, high, interior)` per dimension.
    pub fn pad(
        &mut self,
        x: InstId,
        value: InstId,
        config: &[(i64, i64, i64)],
    ) -> Result<InstId, BuildError> {
        let p: Vec<[i64; 3]> = config.iter().map(|&(l, h, i)| [l, h, i]).collect();
        self.push(
            Opcode::Pad,
            &[x, value],
            vec![(AttrKey::Padding, AttrValue::Padding(p.into()))],
            None,
            None,
        )
    }

    /// `dot(a, b)` with dimension numbers `dims`.
    pub fn dot(&mut self, a: InstId, b: InstId, dims: &DotDims) -> Result<InstId, BuildError> {
        self.push(Opcode::Dot, &[a, b], dims.attrs(), None, None)
    }

    /// `dot(a, b)` with a result element type other than the operands' (XLA's
    /// `preferred_element_type`, e.g. `bf16 x bf16 -> f32`).
    pub fn dot_as(
        &mut self,
        a: InstId,
        b: InstId,
        dims: &DotDims,
        ty: ElementType,
    ) -> Result<InstId, BuildError> {
        // Only the element type of a declared dot shape is used (as the preferred type).
        let declared = OwnedShape::scalar(ty);
        self.push(Opcode::Dot, &[a, b], dims.attrs(), Some(declared), None)
    }

    /// The matrix product of `a` and `b`: contracts `a`'s last dimension with `b`'s first.
    pub fn matmul(&mut self, a: InstId, b: InstId) -> Result<InstId, BuildError> {
        let ra = self.array_of(Opcode::Dot, a)?.rank() as i64;
        self.dot(a, b, &DotDims::contracting(ra - 1, 0))
    }

    /// `reduce(inputs..., inits...), dimensions=dims, to_apply=to_apply`.
    pub fn reduce(
        &mut self,
        inputs: &[InstId],
        inits: &[InstId],
        dims: &[i64],
        to_apply: CompId,
    ) -> Result<InstId, BuildError> {
        let ops: Vec<InstId> = inputs.iter().chain(inits).copied().collect();
        self.push(
            Opcode::Reduce,
            &ops,
            vec![
                (AttrKey::Dimensions, AttrValue::Ints(dims.into())),
                (AttrKey::ToApply, AttrValue::Comp(to_apply)),
            ],
            None,
            None,
        )
    }

    /// `tuple(xs...)`.
    pub fn tuple(&mut self, xs: &[InstId]) -> Result<InstId, BuildError> {
        self.push(Opcode::Tuple, xs, Vec::new(), None, None)
    }

    /// `get-tuple-element(t), index=index`.
    pub fn get_tuple_element(&mut self, t: InstId, index: i64) -> Result<InstId, BuildError> {
        self.push(
            Opcode::GetTupleElement,
            &[t],
            vec![(AttrKey::Index, AttrValue::Int(index))],
            None,
            None,
        )
    }

    /// `iota()` of element type `ty` and dimensions `dims`, counting along `dim`.
    pub fn iota(&mut self, ty: ElementType, dims: &[i64], dim: i64) -> Result<InstId, BuildError> {
        self.push(
            Opcode::Iota,
            &[],
            vec![(AttrKey::IotaDimension, AttrValue::Int(dim))],
            Some(OwnedShape::array(ty, dims)),
            None,
        )
    }

    /// `while(init), condition=cond, body=body`.
    pub fn while_loop(
        &mut self,
        cond: CompId,
        body: CompId,
        init: InstId,
    ) -> Result<InstId, BuildError> {
        self.push(
            Opcode::While,
            &[init],
            vec![
                (AttrKey::Condition, AttrValue::Comp(cond)),
                (AttrKey::Body, AttrValue::Comp(body)),
            ],
            None,
            None,
        )
    }

    /// `conditional(index, operands...), branch_computations={branches...}`, branch `i` taking
    /// `operands[i]`: `index` is an `s32[]` (out-of-range indices run the last branch) or a
    /// `pred[]` with two branches, the first running on `true`.
    pub fn conditional(
        &mut self,
        index: InstId,
        branches: &[CompId],
        operands: &[InstId],
    ) -> Result<InstId, BuildError> {
        let ops: Vec<InstId> = std::iter::once(index)
            .chain(operands.iter().copied())
            .collect();
        self.push(
            Opcode::Conditional,
            &ops,
            vec![(
                AttrKey::BranchComputations,
                AttrValue::Comps(branches.into()),
            )],
            None,
            None,
        )
    }

    /// `call(args...), to_apply=comp`.
    pub fn call(&mut self, comp: CompId, args: &[InstId]) -> Result<InstId, BuildError> {
        self.push(
            Opcode::Call,
            args,
            vec![(AttrKey::ToApply, AttrValue::Comp(comp))],
            None,
            None,
        )
    }

    /// `sort(operands...), dimensions={dim}, to_apply=comparator`.
    pub fn sort(
        &mut self,
        operands: &[InstId],
        dim: i64,
        comparator: CompId,
        is_stable: bool,
    ) -> Result<InstId, BuildError> {
        let mut attrs = vec![
            (AttrKey::Dimensions, AttrValue::Ints([dim].into())),
            (AttrKey::ToApply, AttrValue::Comp(comparator)),
        ];
        if is_stable {
            attrs.push((AttrKey::IsStable, AttrValue::Bool(true)));
        }
        self.push(Opcode::Sort, operands, attrs, None, None)
    }

    /// Sets `root` as the computation's root and finishes it.
    pub fn finish(self, root: InstId) -> Result<CompId, BuildError> {
        let m = &mut self.b.m;
        if !m.is_live(root) || m.parent(root) != self.comp {
            return Err(BuildError::Invalid(format!(
                "the root #{} of computation %{} is not one of its instructions",
                root.index(),
                m.comp_name(self.comp)
            )));
        }
        m.set_root(self.comp, root);
        Ok(self.comp)
    }
}

macro_rules! broadcast_ops {
    ($($(#[$doc:meta])* $fn:ident => $op:ident,)*) => {
        $(
            $(#[$doc])*
            pub fn $fn(&mut self, a: InstId, b: InstId) -> Result<InstId, BuildError> {
                self.binary_broadcast(Opcode::$op, a, b)
            }
        )*
    };
}

/// The numpy broadcast of two dimension lists: aligned at the right, a missing or size-1
/// dimension stretching to the other's size; `None` when two sizes differ and neither is 1.
pub fn broadcast_dims(a: &[i64], b: &[i64]) -> Option<Vec<i64>> {
    let r = a.len().max(b.len());
    let at = |d: &[i64], i: usize| {
        let pad = r - d.len();
        if i < pad {
            1
        } else {
            d[i - pad]
        }
    };
    (0..r)
        .map(|i| match (at(a, i), at(b, i)) {
            (x, y) if x == y => Some(x),
            (1, y) => Some(y),
            (x, 1) => Some(x),
            _ => None,
        })
        .collect()
}

impl CompBuilder<'_> {
    /// `x` broadcast numpy-style to dimensions `dims` (which [`broadcast_dims`] of `x`'s
    /// dimensions and another operand's gave): size-1 dimensions that stretch are reshaped away,
    /// the rest map to the trailing result dimensions. Returns `x` itself when nothing changes.
    pub fn broadcast_to(&mut self, x: InstId, dims: &[i64]) -> Result<InstId, BuildError> {
        let a = self.array_of(Opcode::Broadcast, x)?;
        if a.dims.as_ref() == dims {
            return Ok(x);
        }
        let pad = dims.len().checked_sub(a.rank()).ok_or_else(|| {
            self.inst_err(
                Opcode::Broadcast,
                format!(
                    "broadcast: cannot broadcast {} to the lower rank {dims:?}",
                    a.ty.name()
                ),
            )
        })?;
        let mut kept = Vec::new();
        let mut mapping = Vec::new();
        for (i, &d) in a.dims.iter().enumerate() {
            if d == dims[pad + i] {
                kept.push(d);
                mapping.push((pad + i) as i64);
            } else if d != 1 {
                return Err(self.inst_err(
                    Opcode::Broadcast,
                    format!(
                        "broadcast: dimension {i} of size {d} cannot stretch to {} in {dims:?}",
                        dims[pad + i]
                    ),
                ));
            }
        }
        let y = if kept.len() == a.rank() {
            x
        } else {
            self.reshape(x, &kept)?
        };
        self.broadcast(y, dims, &mapping)
    }

    /// Both operands broadcast numpy-style to their common dimensions.
    fn broadcast_pair(
        &mut self,
        opcode: Opcode,
        a: InstId,
        b: InstId,
    ) -> Result<(InstId, InstId), BuildError> {
        let da = self.array_of(opcode, a)?.dims.to_vec();
        let db = self.array_of(opcode, b)?.dims.to_vec();
        let dims = broadcast_dims(&da, &db).ok_or_else(|| {
            self.inst_err(
                opcode,
                format!("{opcode}: dimensions {da:?} and {db:?} do not broadcast together"),
            )
        })?;
        Ok((self.broadcast_to(a, &dims)?, self.broadcast_to(b, &dims)?))
    }

    /// An elementwise op of two operands of the same element type, broadcast numpy-style
    /// first (`f32[8,1] + f32[4]` is an `f32[8,4]`); no type promotion.
    pub fn binary_broadcast(
        &mut self,
        opcode: Opcode,
        a: InstId,
        b: InstId,
    ) -> Result<InstId, BuildError> {
        let (a, b) = self.broadcast_pair(opcode, a, b)?;
        self.binary(opcode, a, b)
    }

    broadcast_ops! {
        /// `add(a, b)`, broadcast numpy-style.
        add_broadcast => Add,
        /// `subtract(a, b)`, broadcast numpy-style.
        subtract_broadcast => Subtract,
        /// `multiply(a, b)`, broadcast numpy-style.
        multiply_broadcast => Multiply,
        /// `divide(a, b)`, broadcast numpy-style.
        divide_broadcast => Divide,
        /// `maximum(a, b)`, broadcast numpy-style.
        maximum_broadcast => Maximum,
        /// `minimum(a, b)`, broadcast numpy-style.
        minimum_broadcast => Minimum,
        /// `power(a, b)`, broadcast numpy-style.
        power_broadcast => Power,
    }

    /// `compare(a, b)`, broadcast numpy-style.
    pub fn compare_broadcast(
        &mut self,
        a: InstId,
        b: InstId,
        direction: ComparisonDirection,
    ) -> Result<InstId, BuildError> {
        let (a, b) = self.broadcast_pair(Opcode::Compare, a, b)?;
        self.compare(a, b, direction)
    }

    /// A scalar constant of `x`'s element type, broadcast to `x`'s dimensions.
    pub fn full_like(&mut self, x: InstId, v: f64) -> Result<InstId, BuildError> {
        let a = self.array_of(Opcode::Broadcast, x)?;
        let c = self.constant_scalar(a.ty, v)?;
        self.broadcast(c, &a.dims, &[])
    }

    /// `maximum(x, 0)`.
    pub fn relu(&mut self, x: InstId) -> Result<InstId, BuildError> {
        let zero = self.full_like(x, 0.0)?;
        self.maximum(x, zero)
    }

    /// A reduction of `x` over `dims` with the on-demand reducer for `opcode` and the initial
    /// value `init` (as the raw bytes of one element of `x`'s type).
    fn reduce_with(
        &mut self,
        opcode: Opcode,
        x: InstId,
        dims: &[i64],
        init: Vec<u8>,
    ) -> Result<InstId, BuildError> {
        let a = self.array_of(Opcode::Reduce, x)?;
        let dims = self.axes(Opcode::Reduce, a.rank(), dims)?;
        let init = ArrayLiteral::new(ArrayShape::new(a.ty, &[]), init)
            .map_err(|e| self.inst_err(Opcode::Reduce, e.to_string()))?;
        let init = self.constant(Literal::Array(init))?;
        let reducer = self.b.reducer(opcode, a.ty)?;
        self.reduce(&[x], &[init], &dims, reducer)
    }

    /// `dims` with negative entries counted from the end (numpy's axes), checked against `rank`.
    fn axes(&self, opcode: Opcode, rank: usize, dims: &[i64]) -> Result<Vec<i64>, BuildError> {
        dims.iter()
            .map(|&d| {
                let r = rank as i64;
                let a = if d < 0 { d + r } else { d };
                if (0..r).contains(&a) {
                    Ok(a)
                } else {
                    Err(self.inst_err(
                        opcode,
                        format!("{opcode}: axis {d} is out of range for rank {rank}"),
                    ))
                }
            })
            .collect()
    }

    /// The sum of `x` over dimensions `dims` (negative dimensions count from the end).
    pub fn reduce_sum(&mut self, x: InstId, dims: &[i64]) -> Result<InstId, BuildError> {
        let ty = self.array_of(Opcode::Reduce, x)?.ty;
        let zero = if ty.is_pred() {
            vec![0]
        } else {
            f64_to_element(ty, 0.0)
        };
        self.reduce_with(Opcode::Add, x, dims, zero)
    }

    /// The maximum of `x` over dimensions `dims`: `-inf` (or the type's least value) when
    /// empty.
    pub fn reduce_max(&mut self, x: InstId, dims: &[i64]) -> Result<InstId, BuildError> {
        let ty = self.array_of(Opcode::Reduce, x)?.ty;
        let (lo, _) = extremes(ty);
        self.reduce_with(Opcode::Maximum, x, dims, lo)
    }

    /// The minimum of `x` over dimensions `dims`: `inf` (or the type's greatest value) when
    /// empty.
    pub fn reduce_min(&mut self, x: InstId, dims: &[i64]) -> Result<InstId, BuildError> {
        let ty = self.array_of(Opcode::Reduce, x)?.ty;
        let (_, hi) = extremes(ty);
        self.reduce_with(Opcode::Minimum, x, dims, hi)
    }

    /// The mean of a floating-point `x` over dimensions `dims`: the sum divided by the number
    /// of elements reduced.
    pub fn reduce_mean(&mut self, x: InstId, dims: &[i64]) -> Result<InstId, BuildError> {
        let a = self.array_of(Opcode::Reduce, x)?;
        if !a.ty.is_floating() {
            return Err(self.inst_err(
                Opcode::Reduce,
                format!("reduce_mean: {} is not a floating-point type", a.ty.name()),
            ));
        }
        let axes = self.axes(Opcode::Reduce, a.rank(), dims)?;
        let count: i64 = axes.iter().map(|&d| a.dims[d as usize]).product();
        let s = self.reduce_sum(x, &axes)?;
        let n = self.full_like(s, count as f64)?;
        self.divide(s, n)
    }

    /// numpy's softmax along `axis` (negative counts from the end): `exp(x - max) / sum`, with
    /// the maximum subtracted for range, as JAX computes it.
    pub fn softmax(&mut self, x: InstId, axis: i64) -> Result<InstId, BuildError> {
        let a = self.array_of(Opcode::Reduce, x)?;
        let axis = self.axes(Opcode::Reduce, a.rank(), &[axis])?[0];
        let keep: Vec<i64> = (0..a.rank() as i64).filter(|&d| d != axis).collect();
        let mx = self.reduce_max(x, &[axis])?;
        let mx = self.broadcast(mx, &a.dims, &keep)?;
        let shifted = self.subtract(x, mx)?;
        let e = self.exp(shifted)?;
        let s = self.reduce_sum(e, &[axis])?;
        let s = self.broadcast(s, &a.dims, &keep)?;
        self.divide(e, s)
    }
}

/// The least and greatest values of `ty` as element bytes: `-inf`/`inf` for floats that have
/// them (their lowest and highest finite values otherwise), the integer range, `false`/`true`.
fn extremes(ty: ElementType) -> (Vec<u8>, Vec<u8>) {
    if ty.is_pred() {
        (vec![0], vec![1])
    } else if ty.is_float() {
        let (lo, hi) = (
            f64_to_element(ty, f64::NEG_INFINITY),
            f64_to_element(ty, f64::INFINITY),
        );
        if element_to_f64(ty, &lo) == f64::NEG_INFINITY && element_to_f64(ty, &hi) == f64::INFINITY
        {
            return (lo, hi);
        }
        // A small float without infinities: its extreme finite values, found among its (at
        // most 256) bit patterns.
        let finite: Vec<(f64, u8)> = (0..=u8::MAX)
            .filter(|&b| u32::from(b) < 1 << ty.bits())
            .map(|b| (element_to_f64(ty, &[b]), b))
            .filter(|(v, _)| v.is_finite())
            .collect();
        let pick = |better: fn(f64, f64) -> bool| {
            finite
                .iter()
                .copied()
                .reduce(|a, b| if better(b.0, a.0) { b } else { a })
                .map_or(vec![0], |(_, b)| vec![b])
        };
        (pick(|a, b| a < b), pick(|a, b| a > b))
    } else if ty.is_signed_int() {
        let b = ty.bits();
        (
            i128_to_element(ty, -(1i128 << (b - 1))),
            i128_to_element(ty, (1i128 << (b - 1)) - 1),
        )
    } else {
        (
            i128_to_element(ty, 0),
            i128_to_element(ty, (1i128 << ty.bits()) - 1),
        )
    }
}

/// The shape of a literal.
pub fn literal_shape(l: &Literal) -> OwnedShape {
    match l {
        Literal::Array(a) => OwnedShape::Array(a.shape.clone()),
        Literal::Tuple(ls) => OwnedShape::Tuple(ls.iter().map(literal_shape).collect()),
    }
}
