//! Shape inference for every HLO opcode, with XLA's semantics.
//!
//! [`infer_shape`] computes the result shape of an instruction from its opcode, operands,
//! attributes and called computations, checking everything that can be checked on the way:
//! operand counts, element types, attribute validity (dimensions in range and unique, slice
//! bounds, windows, padding, dot/convolution/gather/scatter dimension numbers) and the signatures
//! of called computations. Where the result cannot be inferred (the target of `reshape`,
//! `broadcast`, `convert`, `bitcast`, `iota`, `constant`, `parameter`, `custom-call`, `rng`,
//! `infeed`, ...), the caller supplies a declared shape; the result is then the declared shape
//! after validating what can be validated (element counts, dimension mappings, ...). For `dot`
//! and `convolution` the declared element type is XLA's `preferred_element_type`.
//!
//! Element types must agree exactly wherever values meet: the operands, init values, updates
//! and the parameters and results of applied computations (reducers of `reduce`,
//! `reduce-window`, `scatter`, `select-and-scatter` and the collectives, `map` bodies, `sort`
//! comparators); and the floating-point operands of one instruction have one type, except for
//! the opcodes that pass values through or compute in a preferred type (XLA's allow-list:
//! `tuple`, `call`, `while`, `sort`, `dot`, `convolution`, ...). XLA's shape inference would
//! let floats of different precisions meet, but its verifier (`allow_mixed_precision` off, as
//! every XLA backend runs it) does not, and neither do the backends; so neither does this.
//!
//! Results are [`OwnedShape`]s: tuple elements are held inline rather than interned, so inference
//! needs only `&Module` and never changes it. Layouts play no part; dynamic dimensions are carried
//! where XLA carries them, but bounds are what is checked.
//!
//! Inference never panics, whatever the input: out-of-range ids, invalid shapes and huge
//! dimension sizes are reported as [`ShapeError`]s.

use std::fmt;

use crate::attrs::{Attr, AttrKey, AttrValue, ConvDims, WindowDim};
use crate::module::{CompId, InstId, Module, ShapeId};
use crate::opcode::Opcode;
use crate::types::{ArrayShape, ArrayShapeError, ComparisonType, ElementType, Shape};

/// A shape that owns its tuple elements (unlike [`Shape`], whose tuple elements are interned ids
/// of one module).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum OwnedShape {
    /// A dense array.
    Array(ArrayShape),
    /// A tuple.
    Tuple(Vec<OwnedShape>),
    /// The token type.
    Token,
    /// An opaque value.
    Opaque,
}

/// Tuple nesting deeper than this is rejected (parser, verifier) and treated as a broken shape
/// table by [`OwnedShape::from_id`].
const MAX_TUPLE_DEPTH: usize = 256;

impl OwnedShape {
    /// A static array shape.
    pub fn array(ty: ElementType, dims: &[i64]) -> OwnedShape {
        OwnedShape::Array(ArrayShape::new(ty, dims))
    }

    /// A scalar shape.
    pub fn scalar(ty: ElementType) -> OwnedShape {
        OwnedShape::array(ty, &[])
    }

    /// A tuple shape.
    pub fn tuple(elements: Vec<OwnedShape>) -> OwnedShape {
        OwnedShape::Tuple(elements)
    }

    /// The array shape, if this is an array.
    pub fn as_array(&self) -> Option<&ArrayShape> {
        match self {
            OwnedShape::Array(a) => Some(a),
            _ => None,
        }
    }

    /// The tuple elements, if this is a tuple.
    pub fn as_tuple(&self) -> Option<&[OwnedShape]> {
        match self {
            OwnedShape::Tuple(t) => Some(t),
            _ => None,
        }
    }

    /// The shape interned as `id` in `m`, or `None` if `id` (or a tuple element id) is not a
    /// shape of `m`.
    pub fn from_id(m: &Module, id: ShapeId) -> Option<OwnedShape> {
        Self::from_id_depth(m, id, 0)
    }

    fn from_id_depth(m: &Module, id: ShapeId, depth: usize) -> Option<OwnedShape> {
        if id.index() >= m.num_shapes() || depth > MAX_TUPLE_DEPTH {
            return None;
        }
        Self::from_shape_depth(m, m.shape_of(id), depth)
    }

    /// Converts a module shape (resolving tuple element ids in `m`), or `None` if a tuple element
    /// id is not a shape of `m`.
    pub fn from_shape(m: &Module, s: &Shape) -> Option<OwnedShape> {
        Self::from_shape_depth(m, s, 0)
    }

    fn from_shape_depth(m: &Module, s: &Shape, depth: usize) -> Option<OwnedShape> {
        Some(match s {
            Shape::Array(a) => OwnedShape::Array(a.clone()),
            Shape::Tuple(ids) => OwnedShape::Tuple(
                ids.iter()
                    .map(|&e| Self::from_id_depth(m, e, depth + 1))
                    .collect::<Option<Vec<_>>>()?,
            ),
            Shape::Token => OwnedShape::Token,
            Shape::Opaque => OwnedShape::Opaque,
        })
    }

    /// Interns this shape (and its tuple elements) in `m`.
    pub fn intern(&self, m: &mut Module) -> ShapeId {
        let s = self.to_module_shape(m);
        m.intern_shape(s)
    }

    /// This shape as a module [`Shape`], interning tuple elements in `m`.
    pub fn to_module_shape(&self, m: &mut Module) -> Shape {
        match self {
            OwnedShape::Array(a) => Shape::Array(a.clone()),
            OwnedShape::Tuple(es) => Shape::Tuple(es.iter().map(|e| e.intern(m)).collect()),
            OwnedShape::Token => Shape::Token,
            OwnedShape::Opaque => Shape::Opaque,
        }
    }

    /// Whether the two shapes have the same structure, element types and dimension sizes
    /// (dynamic flags ignored, as XLA's `ShapeUtil::Compatible`).
    pub fn compatible(&self, other: &OwnedShape) -> bool {
        self.compatible_with(other, false)
    }

    /// Like [`Self::compatible`], but any two floating-point element types match.
    pub fn compatible_ignoring_fp_precision(&self, other: &OwnedShape) -> bool {
        self.compatible_with(other, true)
    }

    fn compatible_with(&self, other: &OwnedShape, ignore_fp: bool) -> bool {
        match (self, other) {
            (OwnedShape::Array(a), OwnedShape::Array(b)) => {
                a.dims == b.dims
                    && (a.ty == b.ty || (ignore_fp && a.ty.is_float() && b.ty.is_float()))
            }
            (OwnedShape::Tuple(a), OwnedShape::Tuple(b)) => {
                a.len() == b.len()
                    && a.iter()
                        .zip(b.iter())
                        .all(|(x, y)| x.compatible_with(y, ignore_fp))
            }
            (OwnedShape::Token, OwnedShape::Token) => true,
            (OwnedShape::Opaque, OwnedShape::Opaque) => true,
            _ => false,
        }
    }

    /// Whether the shape is well formed (see [`OwnedShape::validate`]).
    pub fn is_valid(&self) -> bool {
        self.validate().is_ok()
    }

    /// Checks that the shape is well formed at every level: each array passes
    /// [`ArrayShape::validate`] (non-negative sizes or -1 for an unbounded dynamic dimension, one
    /// dynamic flag per dimension, element count and byte size within `i64`); the error says
    /// which array and why.
    pub fn validate(&self) -> Result<(), InvalidShape> {
        match self {
            OwnedShape::Array(a) => a.validate().map_err(|why| {
                let mut shape = String::new();
                let _ = fmt_array(a, &mut shape);
                InvalidShape { shape, why }
            }),
            OwnedShape::Tuple(es) => es.iter().try_for_each(|e| e.validate()),
            _ => Ok(()),
        }
    }

    /// The largest tuple nesting depth this crate accepts (deeper shapes are rejected by the
    /// parser and the verifier; recursive walks over shapes rely on it).
    pub const MAX_TUPLE_DEPTH: usize = MAX_TUPLE_DEPTH;
}

/// An array of a shape that is not well formed ([`OwnedShape::validate`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("shape {shape} {why}")]
pub struct InvalidShape {
    /// The array's shape in HLO text.
    pub shape: String,
    /// What is wrong with it.
    pub why: ArrayShapeError,
}

impl From<InvalidShape> for String {
    fn from(e: InvalidShape) -> String {
        e.to_string()
    }
}

impl From<ArrayShape> for OwnedShape {
    fn from(a: ArrayShape) -> Self {
        OwnedShape::Array(a)
    }
}

/// Whether some dimension is unbounded dynamic (`?`).
fn is_unbounded(a: &ArrayShape) -> bool {
    a.dims.iter().any(|&d| d < 0)
}

/// Writes an array shape in HLO text form: `f32[4,<=8]`.
fn fmt_array(a: &ArrayShape, f: &mut impl fmt::Write) -> fmt::Result {
    write!(f, "{}[", a.ty)?;
    for (i, d) in a.dims.iter().enumerate() {
        if i > 0 {
            f.write_char(',')?;
        }
        if *d < 0 {
            f.write_char('?')?;
            continue;
        }
        if a.dynamic.get(i).copied().unwrap_or(false) {
            f.write_str("<=")?;
        }
        write!(f, "{d}")?;
    }
    f.write_char(']')
}

impl fmt::Display for OwnedShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OwnedShape::Array(a) => fmt_array(a, f),
            OwnedShape::Tuple(es) => {
                f.write_str("(")?;
                for (i, e) in es.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{e}")?;
                }
                f.write_str(")")
            }
            OwnedShape::Token => f.write_str("token[]"),
            OwnedShape::Opaque => f.write_str("opaque[]"),
        }
    }
}

/// A module shape in HLO text form, resolving tuple elements in `m` (`<invalid shape>` where an
/// id is out of range).
pub(crate) fn shape_to_string(m: &Module, id: ShapeId) -> String {
    match OwnedShape::from_id(m, id) {
        Some(s) => s.to_string(),
        None => "<invalid shape>".to_string(),
    }
}

/// The signature of a computation: its parameter shapes (by parameter number) and root shape.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgramShape {
    /// The computation's name, for messages.
    pub name: String,
    /// Parameter shapes, by parameter number.
    pub params: Vec<OwnedShape>,
    /// The root's shape.
    pub result: OwnedShape,
}

/// The signature of computation `c` of `m`. Fails if `c` does not exist, has a gap in its
/// parameter numbers or has no live root.
pub fn program_shape(m: &Module, c: CompId) -> Result<ProgramShape, ShapeError> {
    if !m.is_live_comp(c) {
        return Err(ShapeError::new(format!(
            "computation #{} does not exist",
            c.index()
        )));
    }
    let name = m.comp_name(c).to_string();
    let mut params = Vec::with_capacity(m.params(c).len());
    for (n, &p) in m.params(c).iter().enumerate() {
        if !m.is_live(p) || m.parent(p) != c {
            return Err(ShapeError::new(format!(
                "computation %{name} has no parameter {n}"
            )));
        }
        match OwnedShape::from_id(m, m.shape_id(p)) {
            Some(s) => params.push(s),
            None => {
                return Err(ShapeError::new(format!(
                    "parameter {n} of computation %{name} has an invalid shape id"
                )))
            }
        }
    }
    let root = m.root(c);
    if !m.is_live(root) || m.parent(root) != c {
        return Err(ShapeError::new(format!("computation %{name} has no root")));
    }
    let result = OwnedShape::from_id(m, m.shape_id(root)).ok_or_else(|| {
        ShapeError::new(format!(
            "the root of computation %{name} has an invalid shape id"
        ))
    })?;
    Ok(ProgramShape {
        name,
        params,
        result,
    })
}

/// A shape inference failure: a value with a message naming the opcode, e.g.
/// `add: operand 1 has shape f32[4] but operand 0 has f32[8]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError {
    msg: String,
}

impl ShapeError {
    /// An error with message `msg`.
    pub fn new(msg: impl Into<String>) -> ShapeError {
        ShapeError { msg: msg.into() }
    }

    /// The message.
    pub fn message(&self) -> &str {
        &self.msg
    }
}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.msg)
    }
}

impl std::error::Error for ShapeError {}

type R<T> = Result<T, ShapeError>;

/// Infers the result shape of an instruction of `m` with this opcode, operands and attributes.
/// `declared` supplies what cannot be inferred (see the module docs); where the shape can be
/// inferred it is used only as `dot`/`convolution`'s preferred element type and otherwise
/// ignored, so compare the result with the declared shape to check an instruction.
pub fn infer_shape(
    m: &Module,
    opcode: Opcode,
    operands: &[InstId],
    attrs: &[Attr],
    declared: Option<&OwnedShape>,
) -> Result<OwnedShape, ShapeError> {
    let mut shapes = Vec::with_capacity(operands.len());
    for (i, &op) in operands.iter().enumerate() {
        if op.index() >= m.inst_capacity() {
            return Err(ShapeError::new(format!(
                "{opcode}: operand {i} (#{}) does not exist",
                op.index()
            )));
        }
        match OwnedShape::from_id(m, m.shape_id(op)) {
            Some(s) => shapes.push(s),
            None => {
                return Err(ShapeError::new(format!(
                    "{opcode}: operand {i} has an invalid shape id"
                )))
            }
        }
    }
    infer_shape_from(opcode, &shapes, attrs, declared, &|c| program_shape(m, c))
}

/// Like [`infer_shape`], from operand shapes and a function giving called computations'
/// signatures, without a module.
pub fn infer_shape_from(
    opcode: Opcode,
    operands: &[OwnedShape],
    attrs: &[Attr],
    declared: Option<&OwnedShape>,
    signature: &dyn Fn(CompId) -> Result<ProgramShape, ShapeError>,
) -> Result<OwnedShape, ShapeError> {
    let cx = Cx {
        op: opcode,
        shapes: operands,
        attrs,
        declared,
        signature,
    };
    for (i, s) in operands.iter().enumerate() {
        if let Err(why) = s.validate() {
            return Err(cx.err(format!("operand {i} has an invalid shape: {why}")));
        }
    }
    if let Some(d) = declared {
        if let Err(why) = d.validate() {
            return Err(cx.err(format!("the result shape is invalid: {why}")));
        }
    }
    cx.no_mixed_precision()?;
    cx.infer()
}

/// The opcodes whose operands may hold floats of different types (XLA's allow-list in
/// `CheckMixedPrecisionOperands`): they pass values through or group them, or (`dot`,
/// `convolution`) compute in a preferred type of their own.
fn mixes_precision(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Call | Conditional
            | Constant
            | Convolution
            | Dot
            | RaggedDot
            | AllReduce
            | AllReduceStart
            | AllReduceDone
            | AllGather
            | AllGatherStart
            | AllGatherDone
            | AsyncStart
            | AsyncUpdate
            | AsyncDone
            | CopyStart
            | CopyDone
            | CustomCall
            | Domain
            | Fusion
            | GetTupleElement
            | OptBarrier
            | Infeed
            | Outfeed
            | Parameter
            | Recv
            | RecvDone
            | ReducePrecision
            | ReduceWindow
            | Send
            | SendDone
            | Sort
            | Tuple
            | While
    )
}

/// What a comparison's `type=` must be for operands of type `ty`, as a readable list.
fn allowed_cmp_types(ty: ElementType) -> &'static [ComparisonType] {
    if ty.is_float() {
        &[ComparisonType::Float, ComparisonType::TotalOrder]
    } else if ty.is_complex() {
        &[ComparisonType::Float]
    } else if ty.is_signed_int() {
        &[ComparisonType::Signed]
    } else {
        &[ComparisonType::Unsigned]
    }
}

struct Cx<'a> {
    op: Opcode,
    shapes: &'a [OwnedShape],
    attrs: &'a [Attr],
    declared: Option<&'a OwnedShape>,
    signature: &'a dyn Fn(CompId) -> R<ProgramShape>,
}

macro_rules! bail {
    ($cx:expr, $($t:tt)*) => {
        return Err($cx.err(format!($($t)*)))
    };
}

fn join(xs: &[i64]) -> String {
    let v: Vec<String> = xs.iter().map(|x| x.to_string()).collect();
    format!("{{{}}}", v.join(","))
}

fn contains(xs: &[i64], x: usize) -> bool {
    xs.contains(&(x as i64))
}

fn array_of(ty: ElementType, dims: Vec<i64>, dynamic: Vec<bool>) -> OwnedShape {
    OwnedShape::Array(ArrayShape {
        ty,
        dims: dims.into(),
        dynamic: dynamic.into(),
    })
}

fn with_type(a: &ArrayShape, ty: ElementType) -> OwnedShape {
    OwnedShape::Array(ArrayShape {
        ty,
        dims: a.dims.clone(),
        dynamic: a.dynamic.clone(),
    })
}

fn scalar_str(ty: ElementType) -> String {
    format!("{ty}[]")
}

/// `(bound - 1) * dilation + 1`, or 0 for an empty bound.
fn dilated(bound: i128, dilation: i128) -> i128 {
    if bound <= 0 {
        0
    } else {
        (bound - 1) * dilation + 1
    }
}

/// The number of window positions of size `window` and `stride` in `bound`.
fn strided(bound: i128, window: i128, stride: i128) -> i128 {
    if window > bound {
        0
    } else {
        (bound - window) / stride + 1
    }
}

/// Converts an `i128` size computed from attributes back to a dimension size.
fn to_dim(v: i128) -> Option<i64> {
    i64::try_from(v).ok().filter(|&d| d >= 0)
}

/// Whether `preferred` may be the result type of an op computing in `from` (XLA's
/// `MaybeUpcast`): floats may change freely; integers may not narrow.
fn may_upcast(from: ElementType, preferred: ElementType) -> bool {
    from == preferred || from.is_floating() || preferred.bits() >= from.bits()
}

impl<'a> Cx<'a> {
    fn err(&self, msg: String) -> ShapeError {
        ShapeError::new(format!("{}: {msg}", self.op))
    }

    /// Every floating-point operand (tuple elements included) has one type, unless the opcode
    /// may mix them ([`mixes_precision`]): XLA's verifier with mixed precision disallowed.
    fn no_mixed_precision(&self) -> R<()> {
        if mixes_precision(self.op) {
            return Ok(());
        }
        fn floats(s: &OwnedShape, out: &mut Vec<ElementType>) {
            match s {
                OwnedShape::Array(a) if a.ty.is_float() => out.push(a.ty),
                OwnedShape::Tuple(es) => es.iter().for_each(|e| floats(e, out)),
                _ => {}
            }
        }
        let mut seen = Vec::new();
        for s in self.shapes {
            floats(s, &mut seen);
        }
        if let Some(other) = seen.iter().find(|&&t| t != seen[0]) {
            bail!(
                self,
                "operands mix floating-point types {} and {other}; mixed precision is not \
                 allowed (convert first)",
                seen[0]
            );
        }
        Ok(())
    }

    // ---- attributes ----

    fn attr(&self, key: &AttrKey) -> Option<&'a AttrValue> {
        self.attrs.iter().find(|(k, _)| k == key).map(|(_, v)| v)
    }

    fn other(&self, name: &str) -> Option<&'a AttrValue> {
        self.attrs
            .iter()
            .find(|(k, _)| matches!(k, AttrKey::Other(s) if &**s == name))
            .map(|(_, v)| v)
    }

    fn int_value(v: &AttrValue) -> Option<i64> {
        match v {
            AttrValue::Int(i) => Some(*i),
            AttrValue::Raw(s) | AttrValue::Ident(s) | AttrValue::Str(s) => s.trim().parse().ok(),
            _ => None,
        }
    }

    fn opt_int(&self, key: &AttrKey) -> R<Option<i64>> {
        match self.attr(key) {
            None => Ok(None),
            Some(v) => match Self::int_value(v) {
                Some(i) => Ok(Some(i)),
                None => bail!(self, "attribute `{}` must be an integer", key.name()),
            },
        }
    }

    fn int(&self, key: &AttrKey) -> R<i64> {
        match self.opt_int(key)? {
            Some(v) => Ok(v),
            None => bail!(self, "missing attribute `{}`", key.name()),
        }
    }

    fn other_int(&self, name: &str) -> R<i64> {
        match self.other(name) {
            None => bail!(self, "missing attribute `{name}`"),
            Some(v) => match Self::int_value(v) {
                Some(i) => Ok(i),
                None => bail!(self, "attribute `{name}` must be an integer"),
            },
        }
    }

    fn opt_ints(&self, key: &AttrKey) -> R<Option<&'a [i64]>> {
        match self.attr(key) {
            None => Ok(None),
            Some(AttrValue::Ints(v)) => Ok(Some(v)),
            Some(_) => bail!(
                self,
                "attribute `{}` must be a list of integers",
                key.name()
            ),
        }
    }

    fn ints(&self, key: &AttrKey) -> R<&'a [i64]> {
        match self.opt_ints(key)? {
            Some(v) => Ok(v),
            None => bail!(self, "missing attribute `{}`", key.name()),
        }
    }

    fn ints_or_empty(&self, key: &AttrKey) -> R<&'a [i64]> {
        Ok(self.opt_ints(key)?.unwrap_or(&[]))
    }

    fn opt_bool(&self, key: &AttrKey) -> R<Option<bool>> {
        match self.attr(key) {
            None => Ok(None),
            Some(AttrValue::Bool(b)) => Ok(Some(*b)),
            Some(_) => bail!(self, "attribute `{}` must be true or false", key.name()),
        }
    }

    fn ident(&self, key: &AttrKey) -> R<&'a str> {
        match self.attr(key) {
            None => bail!(self, "missing attribute `{}`", key.name()),
            Some(AttrValue::Ident(s)) | Some(AttrValue::Raw(s)) | Some(AttrValue::Str(s)) => Ok(s),
            Some(_) => bail!(self, "attribute `{}` must be a word", key.name()),
        }
    }

    fn comp(&self, key: &AttrKey) -> R<CompId> {
        match self.attr(key) {
            Some(AttrValue::Comp(c)) => Ok(*c),
            Some(_) => bail!(self, "attribute `{}` must name a computation", key.name()),
            None => bail!(self, "missing attribute `{}`", key.name()),
        }
    }

    fn window(&self) -> R<&'a [WindowDim]> {
        match self.attr(&AttrKey::Window) {
            Some(AttrValue::Window(w)) => Ok(w),
            Some(_) => bail!(self, "attribute `window` is malformed"),
            None => Ok(&[]),
        }
    }

    fn signature(&self, key: &AttrKey) -> R<ProgramShape> {
        let c = self.comp(key)?;
        (self.signature)(c).map_err(|e| self.err(format!("{}: {}", key.name(), e.message())))
    }

    // ---- operands and the declared shape ----

    fn n(&self) -> usize {
        self.shapes.len()
    }

    fn expect_operands(&self, n: usize) -> R<()> {
        if self.n() != n {
            let s = if n == 1 { "" } else { "s" };
            bail!(self, "expects {n} operand{s}, got {}", self.n());
        }
        Ok(())
    }

    fn expect_at_least(&self, n: usize) -> R<()> {
        if self.n() < n {
            let s = if n == 1 { "" } else { "s" };
            bail!(self, "expects at least {n} operand{s}, got {}", self.n());
        }
        Ok(())
    }

    fn shape(&self, i: usize) -> &'a OwnedShape {
        &self.shapes[i]
    }

    fn array(&self, i: usize) -> R<&'a ArrayShape> {
        match self.shapes.get(i) {
            Some(OwnedShape::Array(a)) => Ok(a),
            Some(s) => bail!(self, "operand {i} must be an array, got {s}"),
            None => bail!(self, "missing operand {i}"),
        }
    }

    fn scalar(&self, i: usize, what: &str) -> R<&'a ArrayShape> {
        let a = self.array(i)?;
        if a.rank() != 0 {
            bail!(
                self,
                "{what} (operand {i}) must be a scalar, got {}",
                self.shape(i)
            );
        }
        Ok(a)
    }

    fn token(&self, i: usize) -> R<()> {
        match self.shapes.get(i) {
            Some(OwnedShape::Token) => Ok(()),
            Some(s) => bail!(self, "operand {i} must be a token, got {s}"),
            None => bail!(self, "missing operand {i}"),
        }
    }

    fn declared(&self) -> R<&'a OwnedShape> {
        match self.declared {
            Some(d) => Ok(d),
            None => bail!(
                self,
                "the result shape cannot be inferred and must be given"
            ),
        }
    }

    fn declared_array(&self) -> R<&'a ArrayShape> {
        match self.declared()? {
            OwnedShape::Array(a) => Ok(a),
            s => bail!(self, "the result must be an array, got {s}"),
        }
    }

    /// The declared element type, if the declared shape is an array.
    fn declared_type(&self) -> Option<ElementType> {
        self.declared.and_then(|d| d.as_array()).map(|a| a.ty)
    }

    /// Operands `i` and `j` must have equal dimensions (and equal element types if `types`).
    fn same_dims(&self, i: usize, j: usize, types: bool) -> R<()> {
        let (a, b) = (self.array(i)?, self.array(j)?);
        if a.dims != b.dims || (types && a.ty != b.ty) {
            bail!(
                self,
                "operand {j} has shape {} but operand {i} has {}",
                self.shape(j),
                self.shape(i)
            );
        }
        Ok(())
    }

    fn dim_index(&self, what: &str, d: i64, rank: usize) -> R<usize> {
        if d < 0 || d as u64 >= rank as u64 {
            bail!(
                self,
                "{what} {d} is out of range for rank {rank} (must be in [0, {rank}))"
            );
        }
        Ok(d as usize)
    }

    /// Checks that `dims` are unique and in `[0, rank)` (and ascending if `sorted`).
    fn check_dims(&self, what: &str, dims: &[i64], rank: usize, sorted: bool) -> R<()> {
        let mut seen = vec![false; rank];
        for &d in dims {
            let i = self.dim_index(&format!("{what}: dimension"), d, rank)?;
            if seen[i] {
                bail!(self, "{what} {} repeats dimension {d}", join(dims));
            }
            seen[i] = true;
        }
        if sorted && dims.windows(2).any(|w| w[0] > w[1]) {
            bail!(self, "{what} {} must be sorted", join(dims));
        }
        Ok(())
    }

    fn disjoint(&self, a_name: &str, a: &[i64], b_name: &str, b: &[i64]) -> R<()> {
        if let Some(d) = a.iter().find(|d| b.contains(d)) {
            bail!(
                self,
                "dimension {d} is in both {a_name} {} and {b_name} {}",
                join(a),
                join(b)
            );
        }
        Ok(())
    }

    // ---- dispatch ----

    fn infer(&self) -> R<OwnedShape> {
        use Opcode::*;
        match self.op {
            Abs | Cbrt | Ceil | Clz | Cos | Erf | Exp | Expm1 | Floor | Imag | IsFinite | Log
            | Log1p | Logistic | Negate | Not | Popcnt | Real | RoundNearestAfz
            | RoundNearestEven | Rsqrt | Sign | Sin | Sqrt | Tan | Tanh => self.unary(),
            Copy | Domain | OptBarrier => {
                self.expect_operands(1)?;
                Ok(self.shape(0).clone())
            }
            Convert => self.convert(),
            BitcastConvert => self.bitcast_convert(),
            ReducePrecision => self.reduce_precision(),
            StochasticConvert => self.stochastic_convert(),
            Add | Atan2 | And | Complex | Compare | Divide | Maximum | Minimum | MulHi
            | Multiply | Or | Power | Remainder | ShiftLeft | ShiftRightArithmetic
            | ShiftRightLogical | Subtract | Xor => self.binary(),
            Select => self.select(),
            Clamp => self.clamp(),
            Broadcast => self.broadcast(),
            Reshape => self.reshape(),
            DynamicReshape => self.dynamic_reshape(),
            Bitcast => self.bitcast(),
            Transpose => self.transpose(),
            Reverse => self.reverse(),
            Slice => self.slice(),
            DynamicSlice => self.dynamic_slice(),
            DynamicUpdateSlice => self.dynamic_update_slice(),
            Concatenate => self.concatenate(),
            Pad => self.pad(),
            Iota => self.iota(),
            Constant => {
                self.expect_operands(0)?;
                Ok(self.declared()?.clone())
            }
            Parameter => self.parameter(),
            Tuple => Ok(OwnedShape::Tuple(self.shapes.to_vec())),
            GetTupleElement => self.get_tuple_element(),
            Reduce => self.reduce(),
            ReduceWindow => self.reduce_window(),
            SelectAndScatter => self.select_and_scatter(),
            Map => self.map(),
            Sort => self.sort(),
            While => self.while_(),
            Conditional => self.conditional(),
            Call => self.call_like(&AttrKey::ToApply),
            Fusion => self.fusion(),
            CustomCall => Ok(self.declared()?.clone()),
            Dot => self.dot(),
            RaggedDot => self.ragged_dot(),
            Convolution => self.convolution(),
            Gather => self.gather(),
            Scatter => self.scatter(),
            Fft => self.fft(),
            Cholesky => self.cholesky(),
            TriangularSolve => self.triangular_solve(),
            BatchNormTraining | BatchNormGrad | BatchNormInference => self.batch_norm(),
            TopK => self.topk(),
            Rng => self.rng(),
            RngBitGenerator => self.rng_bit_generator(),
            RngGetAndUpdateState => {
                self.expect_operands(0)?;
                let d = self.declared()?;
                if !d.compatible(&OwnedShape::array(ElementType::U64, &[2])) {
                    bail!(self, "the result must be u64[2], got {d}");
                }
                Ok(d.clone())
            }
            GetDimensionSize => self.get_dimension_size(),
            SetDimensionSize => self.set_dimension_size(),
            ReplicaId | PartitionId => {
                self.expect_operands(0)?;
                Ok(OwnedShape::scalar(ElementType::U32))
            }
            AfterAll => {
                for i in 0..self.n() {
                    self.token(i)?;
                }
                Ok(OwnedShape::Token)
            }
            AddDependency => {
                self.expect_operands(2)?;
                self.token(1)?;
                Ok(self.shape(0).clone())
            }
            Infeed => self.infeed(),
            Outfeed => {
                self.expect_operands(2)?;
                self.token(1)?;
                Ok(OwnedShape::Token)
            }
            Send => self.send(),
            Recv => self.recv(),
            SendDone => {
                self.expect_operands(1)?;
                self.tuple_element(0, 2)?;
                Ok(OwnedShape::Token)
            }
            RecvDone => {
                self.expect_operands(1)?;
                let data = self.tuple_element(0, 0)?.clone();
                Ok(OwnedShape::Tuple(vec![data, OwnedShape::Token]))
            }
            CopyStart => self.copy_start(),
            CopyDone => {
                self.expect_operands(1)?;
                Ok(self.tuple_element(0, 0)?.clone())
            }
            AllReduce | AllReduceStart => self.all_reduce(),
            AllReduceDone => {
                self.expect_operands(1)?;
                Ok(self.shape(0).clone())
            }
            AllGather => self.all_gather(),
            ReduceScatter => self.reduce_scatter(),
            AllToAll => self.all_to_all(),
            CollectiveBroadcast => {
                self.expect_at_least(1)?;
                self.collective_attrs()?;
                for i in 0..self.n() {
                    self.array(i)?;
                }
                Ok(self.one_or_tuple())
            }
            RaggedAllToAll => {
                self.expect_operands(6)?;
                for i in 0..6 {
                    self.array(i)?;
                }
                self.same_dims(0, 0, true)?;
                if self.array(1)?.ty != self.array(0)?.ty {
                    bail!(
                        self,
                        "output (operand 1) has shape {} but input (operand 0) has {}",
                        self.shape(1),
                        self.shape(0)
                    );
                }
                Ok(self.shape(1).clone())
            }
            CollectivePermute => {
                self.expect_at_least(1)?;
                self.permute_pairs()?;
                if self.n() == 1 {
                    Ok(self.shape(0).clone())
                } else {
                    Ok(self.declared()?.clone())
                }
            }
            AllGatherStart | CollectivePermuteStart => {
                self.expect_at_least(1)?;
                if self.op == CollectivePermuteStart {
                    self.permute_pairs()?;
                } else {
                    self.collective_attrs()?;
                }
                let d = self.declared()?;
                match d.as_tuple() {
                    Some(t) if t.len() >= 2 => Ok(d.clone()),
                    _ => bail!(
                        self,
                        "the result must be a tuple (operands, results), got {d}"
                    ),
                }
            }
            AllGatherDone | CollectivePermuteDone => {
                self.expect_operands(1)?;
                Ok(self.tuple_element(0, 1)?.clone())
            }
            AsyncStart => self.async_start(),
            AsyncUpdate => {
                self.expect_operands(1)?;
                Ok(self.shape(0).clone())
            }
            AsyncDone => {
                self.expect_operands(1)?;
                Ok(self.tuple_element(0, 1)?.clone())
            }
        }
    }

    /// Element `index` of operand `i`, which must be a tuple.
    fn tuple_element(&self, i: usize, index: usize) -> R<&'a OwnedShape> {
        match self.shapes.get(i) {
            Some(OwnedShape::Tuple(t)) => match t.get(index) {
                Some(e) => Ok(e),
                None => bail!(
                    self,
                    "operand {i} must be a tuple with at least {} elements, got {}",
                    index + 1,
                    self.shape(i)
                ),
            },
            Some(s) => bail!(self, "operand {i} must be a tuple, got {s}"),
            None => bail!(self, "missing operand {i}"),
        }
    }

    /// Operand 0's shape if there is one operand, else the tuple of operand shapes.
    fn one_or_tuple(&self) -> OwnedShape {
        if self.n() == 1 {
            self.shape(0).clone()
        } else {
            OwnedShape::Tuple(self.shapes.to_vec())
        }
    }

    // ---- elementwise ----

    fn unary(&self) -> R<OwnedShape> {
        use Opcode::*;
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let t = a.ty;
        // What the operand's element type must be, and the result element type.
        let (allowed, what, result) = match self.op {
            Floor | Ceil | RoundNearestAfz | RoundNearestEven | Erf => {
                (t.is_float(), "a floating-point", t)
            }
            IsFinite => (t.is_float(), "a floating-point", ElementType::Pred),
            Cos | Sin | Tan | Exp | Expm1 | Log | Log1p | Logistic | Rsqrt | Sqrt | Cbrt | Tanh => {
                (t.is_floating(), "a floating-point or complex", t)
            }
            Real | Imag => (
                t.is_floating(),
                "a floating-point or complex",
                t.component_type(),
            ),
            Abs => (
                t.is_signed_int() || t.is_floating(),
                "a signed integer, floating-point or complex",
                t.component_type(),
            ),
            Sign => (
                t.is_signed_int() || t.is_floating(),
                "a signed integer, floating-point or complex",
                t,
            ),
            Negate => (!t.is_pred(), "an integer, floating-point or complex", t),
            Clz | Popcnt => (t.is_int(), "an integer", t),
            Not => (t.is_int() || t.is_pred(), "a pred or integer", t),
            _ => (true, "", t),
        };
        if !allowed {
            bail!(self, "operand must have {what} element type, got {t}");
        }
        Ok(with_type(a, result))
    }

    fn convert(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let ty = match self.declared_type() {
            Some(t) => t,
            None => bail!(self, "the result element type must be given"),
        };
        // Complex to real takes the real part, as XLA does; not to pred.
        if a.ty.is_complex() && ty.is_pred() {
            bail!(
                self,
                "conversion from complex to pred {} => {} is not allowed (compare with zero)",
                a.ty,
                ty
            );
        }
        Ok(with_type(a, ty))
    }

    fn bitcast_convert(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let ty = match self.declared_type() {
            Some(t) => t,
            None => bail!(self, "the result element type must be given"),
        };
        if a.ty.is_complex() != ty.is_complex() {
            bail!(
                self,
                "cannot bitcast-convert between complex and real types {} => {}",
                a.ty,
                ty
            );
        }
        let (from, to) = (a.ty.bits() as i64, ty.bits() as i64);
        if from == to {
            return Ok(with_type(a, ty));
        }
        let mut dims = a.dims.to_vec();
        let mut dynamic = a.dynamic.to_vec();
        if from > to {
            if from % to != 0 {
                bail!(self, "cannot bitcast-convert {} to {}", a.ty, ty);
            }
            dims.push(from / to);
            dynamic.push(false);
        } else {
            if to % from != 0 {
                bail!(self, "cannot bitcast-convert {} to {}", a.ty, ty);
            }
            let ratio = to / from;
            if dims.last() != Some(&ratio) {
                bail!(
                    self,
                    "bitcast-convert from {} to {} needs a minor dimension of size {ratio}, \
                     operand has shape {}",
                    a.ty,
                    ty,
                    self.shape(0)
                );
            }
            dims.pop();
            dynamic.pop();
        }
        Ok(array_of(ty, dims, dynamic))
    }

    fn reduce_precision(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        if !a.ty.is_float() {
            bail!(
                self,
                "operand must have a floating-point element type, got {}",
                a.ty
            );
        }
        let e = self.int(&AttrKey::ExponentBits)?;
        let mb = self.int(&AttrKey::MantissaBits)?;
        if e < 1 {
            bail!(self, "exponent_bits must be at least 1, got {e}");
        }
        if mb < 0 {
            bail!(self, "mantissa_bits must be non-negative, got {mb}");
        }
        Ok(self.shape(0).clone())
    }

    fn stochastic_convert(&self) -> R<OwnedShape> {
        self.expect_operands(2)?;
        let (a, r) = (self.array(0)?, self.array(1)?);
        if !a.ty.is_float() {
            bail!(
                self,
                "operand 0 must have a floating-point element type, got {}",
                a.ty
            );
        }
        if !r.ty.is_unsigned_int() || r.ty.bits() != a.ty.bits() {
            bail!(
                self,
                "the random operand must be an unsigned integer as wide as {}, got {}",
                a.ty,
                r.ty
            );
        }
        if a.dims != r.dims {
            bail!(
                self,
                "operand 1 has shape {} but operand 0 has {}",
                self.shape(1),
                self.shape(0)
            );
        }
        let ty = match self.declared_type() {
            Some(t) => t,
            None => bail!(self, "the result element type must be given"),
        };
        Ok(with_type(a, ty))
    }

    fn binary(&self) -> R<OwnedShape> {
        use Opcode::*;
        self.expect_operands(2)?;
        let (a, b) = (self.array(0)?, self.array(1)?);
        self.same_dims(0, 1, true)?;
        let t = a.ty;
        let need = |ok: bool, what: &str| -> R<()> {
            if !ok {
                bail!(self, "operands must have {what} element type, got {t}");
            }
            Ok(())
        };
        match self.op {
            // On `pred`, XLA's `add` is `or` and `multiply` is `and`.
            Add | Multiply => {}
            Subtract | Divide | Remainder | Power => {
                need(!t.is_pred(), "an arithmetic (not pred)")?
            }
            Maximum | Minimum => need(!t.is_complex(), "a non-complex")?,
            Atan2 => need(t.is_floating(), "a floating-point or complex")?,
            And | Or | Xor => need(t.is_int() || t.is_pred(), "a pred or integer")?,
            ShiftLeft | ShiftRightArithmetic | ShiftRightLogical | MulHi => {
                need(t.is_int(), "an integer")?
            }
            Complex => {
                need(
                    matches!(t, ElementType::F32 | ElementType::F64),
                    "an f32 or f64",
                )?;
            }
            Compare => {
                match self.attr(&AttrKey::Direction) {
                    Some(AttrValue::Direction(_)) => {}
                    Some(_) => bail!(self, "attribute `direction` is malformed"),
                    None => bail!(self, "missing attribute `direction`"),
                }
                match self.attr(&AttrKey::Type) {
                    None => {}
                    Some(AttrValue::CmpType(ct)) => {
                        let allowed = allowed_cmp_types(t);
                        if !allowed.contains(ct) {
                            let names: Vec<&str> = allowed.iter().map(|c| c.name()).collect();
                            bail!(
                                self,
                                "comparison type {} does not apply to {t} (expected {})",
                                ct.name(),
                                names.join(" or ")
                            );
                        }
                    }
                    Some(_) => bail!(self, "attribute `type` is malformed"),
                }
            }
            _ => {}
        }
        let ty = match self.op {
            Compare => ElementType::Pred,
            Complex => {
                if t == ElementType::F32 {
                    ElementType::C64
                } else {
                    ElementType::C128
                }
            }
            _ => t,
        };
        let dynamic: Vec<bool> = a
            .dynamic
            .iter()
            .zip(b.dynamic.iter())
            .map(|(x, y)| *x || *y)
            .collect();
        Ok(array_of(ty, a.dims.to_vec(), dynamic))
    }

    fn select(&self) -> R<OwnedShape> {
        self.expect_operands(3)?;
        let p = self.array(0)?;
        let (t, f) = (self.array(1)?, self.array(2)?);
        if p.ty != ElementType::Pred {
            bail!(
                self,
                "the predicate (operand 0) must have element type pred, got {}",
                self.shape(0)
            );
        }
        self.same_dims(1, 2, true)?;
        if p.dims != t.dims {
            bail!(
                self,
                "the predicate has shape {} but the operands have {}",
                self.shape(0),
                self.shape(1)
            );
        }
        let dynamic: Vec<bool> = (0..t.rank())
            .map(|i| t.dynamic[i] || f.dynamic[i] || p.dynamic[i])
            .collect();
        Ok(array_of(t.ty, t.dims.to_vec(), dynamic))
    }

    fn clamp(&self) -> R<OwnedShape> {
        self.expect_operands(3)?;
        let x = self.array(1)?;
        for i in [0, 2] {
            let b = self.array(i)?;
            if b.ty != x.ty || (b.rank() != 0 && b.dims != x.dims) {
                bail!(
                    self,
                    "bound (operand {i}) has shape {} but must be {} or a {} scalar",
                    self.shape(i),
                    self.shape(1),
                    x.ty
                );
            }
        }
        Ok(self.shape(1).clone())
    }

    // ---- shape manipulation ----

    fn broadcast(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let out = self.declared_array()?;
        let dims = self.ints_or_empty(&AttrKey::Dimensions)?;
        if out.ty != a.ty {
            bail!(
                self,
                "the result has element type {} but the operand has {}",
                out.ty,
                a.ty
            );
        }
        if dims.len() != a.rank() {
            bail!(
                self,
                "dimensions {} must have one entry per operand dimension ({})",
                join(dims),
                a.rank()
            );
        }
        self.check_dims("dimensions", dims, out.rank(), false)?;
        for (i, &d) in dims.iter().enumerate() {
            let o = out.dims[d as usize];
            if a.dims[i] != o {
                bail!(
                    self,
                    "operand dimension {i} (size {}) maps to result dimension {d} of size {o}",
                    a.dims[i]
                );
            }
        }
        Ok(OwnedShape::Array(out.clone()))
    }

    fn reshape(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let out = self.declared_array()?;
        if out.ty != a.ty {
            bail!(
                self,
                "the result has element type {} but the operand has {}",
                out.ty,
                a.ty
            );
        }
        let (n, m) = (elements(a), elements(out));
        if n != m && !is_unbounded(a) && !is_unbounded(out) {
            bail!(
                self,
                "cannot reshape {} ({} elements) to {} ({} elements)",
                self.shape(0),
                fmt_count(n),
                self.declared()?,
                fmt_count(m)
            );
        }
        Ok(OwnedShape::Array(out.clone()))
    }

    fn dynamic_reshape(&self) -> R<OwnedShape> {
        self.expect_at_least(1)?;
        let a = self.array(0)?;
        let out = self.declared_array()?;
        if out.ty != a.ty {
            bail!(
                self,
                "the result has element type {} but the operand has {}",
                out.ty,
                a.ty
            );
        }
        if self.n() - 1 != out.rank() {
            bail!(
                self,
                "expects one size operand per result dimension ({}), got {}",
                out.rank(),
                self.n() - 1
            );
        }
        for i in 1..self.n() {
            let s = self.scalar(i, "a dimension size")?;
            if s.ty != ElementType::S32 {
                bail!(
                    self,
                    "dimension sizes must be s32, operand {i} is {}",
                    self.shape(i)
                );
            }
        }
        Ok(OwnedShape::Array(out.clone()))
    }

    fn bitcast(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let out = self.declared_array()?;
        if !a.is_dynamic() && !out.is_dynamic() {
            let bits = |s: &ArrayShape| elements(s).map(|n| n.saturating_mul(s.ty.bits() as i128));
            if bits(a) != bits(out) {
                bail!(
                    self,
                    "cannot bitcast {} to {}: the sizes in bits differ",
                    self.shape(0),
                    self.declared()?
                );
            }
        }
        Ok(OwnedShape::Array(out.clone()))
    }

    fn transpose(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let perm = self.ints(&AttrKey::Dimensions)?;
        if perm.len() != a.rank() {
            bail!(
                self,
                "dimensions {} must be a permutation of 0..{}",
                join(perm),
                a.rank()
            );
        }
        self.check_dims("dimensions", perm, a.rank(), false)?;
        let dims = perm.iter().map(|&p| a.dims[p as usize]).collect();
        let dynamic = perm.iter().map(|&p| a.dynamic[p as usize]).collect();
        Ok(array_of(a.ty, dims, dynamic))
    }

    fn reverse(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let dims = self.ints(&AttrKey::Dimensions)?;
        self.check_dims("dimensions", dims, a.rank(), false)?;
        Ok(self.shape(0).clone())
    }

    fn slice(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let s = match self.attr(&AttrKey::Slice) {
            Some(AttrValue::Slice(s)) => s,
            Some(_) => bail!(self, "attribute `slice` is malformed"),
            None => bail!(self, "missing attribute `slice`"),
        };
        if s.len() != a.rank() {
            bail!(
                self,
                "slice has {} entries but the operand has rank {}",
                s.len(),
                a.rank()
            );
        }
        let mut dims = Vec::with_capacity(s.len());
        let mut dynamic = Vec::with_capacity(s.len());
        for (i, &[start, limit, stride]) in s.iter().enumerate() {
            let bound = a.dims[i];
            if start < 0 || limit < start || limit > bound {
                bail!(
                    self,
                    "slice [{start}:{limit}] of dimension {i} is out of bounds for size {bound}"
                );
            }
            if stride < 1 {
                bail!(
                    self,
                    "slice stride of dimension {i} must be positive, got {stride}"
                );
            }
            let n = (limit - start) / stride + i64::from((limit - start) % stride != 0);
            dims.push(n);
            dynamic.push(a.dynamic[i] && start == 0 && limit == bound && stride == 1);
        }
        Ok(array_of(a.ty, dims, dynamic))
    }

    /// Checks start-index operands `from..` of dynamic-slice / dynamic-update-slice.
    fn start_indices(&self, from: usize, rank: usize) -> R<()> {
        let count = self.n().saturating_sub(from);
        // The legacy form passes the start indices as one rank-1 array.
        if count == 1 && rank != 1 {
            let idx = self.array(from)?;
            if idx.rank() == 1 && idx.dims[0] == rank as i64 && idx.ty.is_int() {
                return Ok(());
            }
        }
        if count != rank {
            bail!(
                self,
                "expects {rank} start indices (one per operand dimension), got {count}"
            );
        }
        let mut first: Option<ElementType> = None;
        for i in from..self.n() {
            let s = self.scalar(i, "a start index")?;
            if !s.ty.is_int() {
                bail!(
                    self,
                    "start indices must be integers, operand {i} is {}",
                    self.shape(i)
                );
            }
            match first {
                None => first = Some(s.ty),
                Some(t) if t != s.ty => bail!(
                    self,
                    "start indices must all have the same type, operand {i} is {} but \
                     operand {from} is {t}",
                    s.ty
                ),
                _ => {}
            }
        }
        Ok(())
    }

    fn dynamic_slice(&self) -> R<OwnedShape> {
        self.expect_at_least(1)?;
        let a = self.array(0)?;
        self.start_indices(1, a.rank())?;
        let sizes = self.ints(&AttrKey::DynamicSliceSizes)?;
        if sizes.len() != a.rank() {
            bail!(
                self,
                "dynamic_slice_sizes {} must have one entry per operand dimension ({})",
                join(sizes),
                a.rank()
            );
        }
        for (i, &s) in sizes.iter().enumerate() {
            if s < 0 || s > a.dims[i] {
                bail!(
                    self,
                    "slice size {s} of dimension {i} is out of bounds for size {}",
                    a.dims[i]
                );
            }
        }
        let dynamic = (0..a.rank())
            .map(|i| a.dynamic[i] && sizes[i] == a.dims[i])
            .collect();
        Ok(array_of(a.ty, sizes.to_vec(), dynamic))
    }

    fn dynamic_update_slice(&self) -> R<OwnedShape> {
        self.expect_at_least(2)?;
        let (a, u) = (self.array(0)?, self.array(1)?);
        if u.ty != a.ty {
            bail!(
                self,
                "the update has element type {} but the operand has {}",
                u.ty,
                a.ty
            );
        }
        if u.rank() != a.rank() {
            bail!(
                self,
                "the update {} must have the operand's rank ({})",
                self.shape(1),
                a.rank()
            );
        }
        for i in 0..a.rank() {
            if u.dims[i] > a.dims[i] {
                bail!(
                    self,
                    "the update {} is larger than the operand {} in dimension {i}",
                    self.shape(1),
                    self.shape(0)
                );
            }
        }
        self.start_indices(2, a.rank())?;
        Ok(self.shape(0).clone())
    }

    fn concatenate(&self) -> R<OwnedShape> {
        self.expect_at_least(1)?;
        let dims_attr = self.ints(&AttrKey::Dimensions)?;
        if dims_attr.len() != 1 {
            bail!(
                self,
                "dimensions {} must name exactly one dimension",
                join(dims_attr)
            );
        }
        let a = self.array(0)?;
        let d = self.dim_index("concatenate dimension", dims_attr[0], a.rank())?;
        let mut dims = a.dims.to_vec();
        let mut dynamic = a.dynamic.to_vec();
        let mut total = 0i128;
        for i in 0..self.n() {
            let b = self.array(i)?;
            let differs = b.ty != a.ty
                || b.rank() != a.rank()
                || (0..a.rank()).any(|k| k != d && b.dims[k] != a.dims[k]);
            if differs {
                bail!(
                    self,
                    "operand {i} has shape {} which cannot be concatenated with operand 0 {} \
                     along dimension {d}",
                    self.shape(i),
                    self.shape(0)
                );
            }
            total += b.dims[d] as i128;
            dynamic[d] |= b.dynamic[d];
        }
        dims[d] = match to_dim(total) {
            Some(t) => t,
            None => bail!(self, "the result is too large"),
        };
        Ok(array_of(a.ty, dims, dynamic))
    }

    fn pad(&self) -> R<OwnedShape> {
        self.expect_operands(2)?;
        let a = self.array(0)?;
        let v = self.scalar(1, "the padding value")?;
        if v.ty != a.ty {
            bail!(
                self,
                "the padding value has type {} but the operand has {}",
                v.ty,
                a.ty
            );
        }
        let cfg = match self.attr(&AttrKey::Padding) {
            Some(AttrValue::Padding(p)) => p,
            Some(_) => bail!(self, "attribute `padding` is malformed"),
            None => bail!(self, "missing attribute `padding`"),
        };
        if cfg.len() != a.rank() {
            bail!(
                self,
                "padding has {} entries but the operand has rank {}",
                cfg.len(),
                a.rank()
            );
        }
        let mut dims = Vec::with_capacity(cfg.len());
        for (i, &[lo, hi, interior]) in cfg.iter().enumerate() {
            if interior < 0 {
                bail!(
                    self,
                    "interior padding of dimension {i} must be non-negative, got {interior}"
                );
            }
            let d = a.dims[i] as i128;
            let n = lo as i128 + hi as i128 + d + (d - 1).max(0) * interior as i128;
            match to_dim(n) {
                Some(n) => dims.push(n),
                None => bail!(
                    self,
                    "padding {lo}_{hi}_{interior} of dimension {i} (size {d}) gives a \
                     negative or too large size"
                ),
            }
        }
        Ok(array_of(a.ty, dims, a.dynamic.to_vec()))
    }

    fn iota(&self) -> R<OwnedShape> {
        self.expect_operands(0)?;
        let out = self.declared_array()?;
        if out.rank() == 0 {
            bail!(self, "the result must have rank at least 1");
        }
        let d = self.int(&AttrKey::IotaDimension)?;
        self.dim_index("iota_dimension", d, out.rank())?;
        Ok(OwnedShape::Array(out.clone()))
    }

    fn parameter(&self) -> R<OwnedShape> {
        self.expect_operands(0)?;
        let n = self.int(&AttrKey::ParameterNumber)?;
        if n < 0 {
            bail!(self, "parameter number must be non-negative, got {n}");
        }
        Ok(self.declared()?.clone())
    }

    fn get_tuple_element(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let index = self.int(&AttrKey::Index)?;
        match self.shape(0) {
            OwnedShape::Tuple(t) => {
                if index < 0 || index as u64 >= t.len() as u64 {
                    bail!(
                        self,
                        "index {index} is out of range for {} ({} elements)",
                        self.shape(0),
                        t.len()
                    );
                }
                Ok(t[index as usize].clone())
            }
            s => bail!(self, "operand must be a tuple, got {s}"),
        }
    }

    // ---- called computations ----

    /// Checks a reducer computation taking `2 * inits.len()` scalars (accumulators, then inputs)
    /// and returning the accumulators. Returns the accumulator element types and whether the
    /// reducer returns a tuple.
    fn reducer(
        &self,
        key: &AttrKey,
        inits: &[ElementType],
        inputs: &[ElementType],
    ) -> R<(Vec<ElementType>, bool)> {
        let sig = self.signature(key)?;
        let n = inits.len();
        let name = &sig.name;
        let what = key.name();
        if sig.params.len() != 2 * n {
            bail!(
                self,
                "{what} computation %{name} must take {} parameters, but takes {}",
                2 * n,
                sig.params.len()
            );
        }
        let (accs, is_tuple): (Vec<&OwnedShape>, bool) = match &sig.result {
            OwnedShape::Tuple(t) => (t.iter().collect(), true),
            r => (vec![r], false),
        };
        if accs.len() != n {
            bail!(
                self,
                "{what} computation %{name} must return {n} values, but returns {}",
                sig.result
            );
        }
        let mut types = Vec::with_capacity(n);
        for i in 0..n {
            let acc = match accs[i].as_array() {
                Some(a) if a.rank() == 0 => a.ty,
                _ => bail!(
                    self,
                    "{what} computation %{name} must return scalars, but returns {}",
                    sig.result
                ),
            };
            if !sig.params[i].compatible(accs[i]) {
                bail!(
                    self,
                    "{what} computation %{name}: parameter {i} has shape {} but the \
                     accumulator it receives is {}",
                    sig.params[i],
                    accs[i]
                );
            }
            if acc != inits[i] {
                bail!(
                    self,
                    "{what} computation %{name}: accumulator {i} is {} but the init value is {}",
                    accs[i],
                    scalar_str(inits[i])
                );
            }
            let input = &sig.params[n + i];
            match input.as_array() {
                Some(p) if p.rank() == 0 && p.ty == inputs[i] => {}
                _ => bail!(
                    self,
                    "{what} computation %{name}: parameter {} has shape {} but the input \
                     elements are {}",
                    n + i,
                    input,
                    scalar_str(inputs[i])
                ),
            }
            if acc != input.as_array().map(|p| p.ty).unwrap_or(acc) {
                bail!(
                    self,
                    "{what} computation %{name}: parameter {} has shape {} but accumulator {i} \
                     is {}",
                    n + i,
                    input,
                    accs[i]
                );
            }
            types.push(acc);
        }
        Ok((types, is_tuple))
    }

    /// Operands `0..n` must be arrays of equal dimensions.
    fn same_dims_all(&self, range: std::ops::Range<usize>) -> R<()> {
        let first = range.start;
        for i in range {
            let (a, b) = (self.array(first)?, self.array(i)?);
            if a.dims != b.dims {
                bail!(
                    self,
                    "operand {i} has shape {} but operand {first} has {}",
                    self.shape(i),
                    self.shape(first)
                );
            }
        }
        Ok(())
    }

    /// Checks the operands of a variadic reduction (`N` inputs of equal dimensions followed by `N`
    /// scalar init values) and returns `N`, the inputs' and the inits' element types.
    fn inputs_and_inits(&self) -> R<(usize, Vec<ElementType>, Vec<ElementType>)> {
        if self.n() < 2 || self.n() % 2 == 1 {
            bail!(
                self,
                "expects N inputs followed by N init values, got {} operands",
                self.n()
            );
        }
        let n = self.n() / 2;
        self.same_dims_all(0..n)?;
        let mut inits = Vec::with_capacity(n);
        let mut inputs = Vec::with_capacity(n);
        for i in 0..n {
            inputs.push(self.array(i)?.ty);
            inits.push(self.scalar(n + i, "an init value")?.ty);
        }
        Ok((n, inputs, inits))
    }

    fn reduce(&self) -> R<OwnedShape> {
        let (_, inputs, inits) = self.inputs_and_inits()?;
        let a = self.array(0)?;
        let dims = self.ints(&AttrKey::Dimensions)?;
        self.check_dims("dimensions", dims, a.rank(), false)?;
        let (types, is_tuple) = self.reducer(&AttrKey::ToApply, &inits, &inputs)?;
        let mut out_dims = Vec::new();
        let mut dynamic = Vec::new();
        for i in 0..a.rank() {
            if !contains(dims, i) {
                out_dims.push(a.dims[i]);
                dynamic.push(a.dynamic[i]);
            }
        }
        let shapes: Vec<OwnedShape> = types
            .iter()
            .map(|&t| array_of(t, out_dims.clone(), dynamic.clone()))
            .collect();
        Ok(tuple_or_single(shapes, is_tuple))
    }

    /// XLA's `InferWindowOutputShape`.
    fn window_output(&self, base: &ArrayShape, w: &[WindowDim], ty: ElementType) -> R<ArrayShape> {
        if w.len() != base.rank() {
            bail!(
                self,
                "the window has {} dimensions but the operand has rank {}",
                w.len(),
                base.rank()
            );
        }
        let mut dims = Vec::with_capacity(w.len());
        for (i, wd) in w.iter().enumerate() {
            if wd.size <= 0 {
                bail!(
                    self,
                    "window size of dimension {i} must be positive, got {}",
                    wd.size
                );
            }
            if wd.stride <= 0 {
                bail!(
                    self,
                    "window stride of dimension {i} must be positive, got {}",
                    wd.stride
                );
            }
            if wd.lhs_dilate < 1 || wd.rhs_dilate < 1 {
                bail!(
                    self,
                    "window dilations of dimension {i} must be at least 1, got lhs_dilate={} \
                     rhs_dilate={}",
                    wd.lhs_dilate,
                    wd.rhs_dilate
                );
            }
            let base_d = dilated(base.dims[i] as i128, wd.lhs_dilate as i128);
            let padded = wd.pad_lo as i128 + base_d + wd.pad_hi as i128;
            let window = dilated(wd.size as i128, wd.rhs_dilate as i128);
            match to_dim(strided(padded, window, wd.stride as i128)) {
                Some(d) => dims.push(d),
                None => bail!(self, "the window output of dimension {i} is too large"),
            }
        }
        Ok(ArrayShape {
            ty,
            dims: dims.into(),
            dynamic: base.dynamic.clone(),
        })
    }

    fn reduce_window(&self) -> R<OwnedShape> {
        let (n, inputs, inits) = self.inputs_and_inits()?;
        let (_, is_tuple) = self.reducer(&AttrKey::ToApply, &inits, &inputs)?;
        let w = self.window()?;
        let mut shapes = Vec::with_capacity(n);
        for (i, &init) in inits.iter().enumerate() {
            shapes.push(OwnedShape::Array(self.window_output(
                self.array(i)?,
                w,
                init,
            )?));
        }
        Ok(tuple_or_single(shapes, is_tuple || n > 1))
    }

    fn select_and_scatter(&self) -> R<OwnedShape> {
        self.expect_operands(3)?;
        let (a, src) = (self.array(0)?, self.array(1)?);
        let init = self.scalar(2, "the init value")?;
        let sel = self.signature(&AttrKey::Select)?;
        let scalar_a = OwnedShape::scalar(a.ty);
        let ok_params = sel.params.len() == 2 && sel.params.iter().all(|p| p.compatible(&scalar_a));
        if !ok_params {
            bail!(
                self,
                "select computation %{} must take two {} scalars",
                sel.name,
                a.ty
            );
        }
        if !sel
            .result
            .compatible(&OwnedShape::scalar(ElementType::Pred))
        {
            bail!(
                self,
                "select computation %{} must return pred[], but returns {}",
                sel.name,
                sel.result
            );
        }
        if init.ty != a.ty {
            bail!(
                self,
                "the init value {} must have the operand's element type {}",
                self.shape(2),
                a.ty
            );
        }
        self.reducer(&AttrKey::Scatter, &[init.ty], &[src.ty])?;
        let w = self.window()?;
        let out = self.window_output(a, w, src.ty)?;
        if out.dims != src.dims {
            bail!(
                self,
                "the source {} must have the shape of the windowed operand, {}",
                self.shape(1),
                OwnedShape::Array(out)
            );
        }
        Ok(self.shape(0).clone())
    }

    fn map(&self) -> R<OwnedShape> {
        self.expect_at_least(1)?;
        self.same_dims_all(0..self.n())?;
        let a = self.array(0)?;
        if let Some(dims) = self.opt_ints(&AttrKey::Dimensions)? {
            if dims.len() != a.rank() || dims.iter().enumerate().any(|(i, &d)| d != i as i64) {
                bail!(
                    self,
                    "dimensions {} must be the identity 0..{}",
                    join(dims),
                    a.rank()
                );
            }
        }
        let sig = self.signature(&AttrKey::ToApply)?;
        if sig.params.len() != self.n() {
            bail!(
                self,
                "to_apply computation %{} must take {} parameters, but takes {}",
                sig.name,
                self.n(),
                sig.params.len()
            );
        }
        for i in 0..self.n() {
            let want = OwnedShape::scalar(self.array(i)?.ty);
            if !sig.params[i].compatible(&want) {
                bail!(
                    self,
                    "to_apply computation %{}: parameter {i} has shape {} but operand {i} has \
                     elements {want}",
                    sig.name,
                    sig.params[i]
                );
            }
        }
        match sig.result.as_array() {
            Some(r) if r.rank() == 0 => Ok(with_type(a, r.ty)),
            _ => bail!(
                self,
                "to_apply computation %{} must return a scalar, but returns {}",
                sig.name,
                sig.result
            ),
        }
    }

    fn sort(&self) -> R<OwnedShape> {
        self.expect_at_least(1)?;
        self.same_dims_all(0..self.n())?;
        let a = self.array(0)?;
        let dims = self.ints(&AttrKey::Dimensions)?;
        if dims.len() != 1 {
            bail!(
                self,
                "dimensions {} must name exactly one dimension",
                join(dims)
            );
        }
        self.dim_index("sort dimension", dims[0], a.rank())?;
        self.opt_bool(&AttrKey::IsStable)?;
        let sig = self.signature(&AttrKey::ToApply)?;
        if sig.params.len() != 2 * self.n() {
            bail!(
                self,
                "comparator %{} must take {} parameters (two per operand), but takes {}",
                sig.name,
                2 * self.n(),
                sig.params.len()
            );
        }
        for i in 0..self.n() {
            let want = OwnedShape::scalar(self.array(i)?.ty);
            for p in [2 * i, 2 * i + 1] {
                if !sig.params[p].compatible(&want) {
                    bail!(
                        self,
                        "comparator %{}: parameter {p} has shape {} but operand {i} has \
                         elements {want}",
                        sig.name,
                        sig.params[p]
                    );
                }
            }
        }
        if !sig
            .result
            .compatible(&OwnedShape::scalar(ElementType::Pred))
        {
            bail!(
                self,
                "comparator %{} must return pred[], but returns {}",
                sig.name,
                sig.result
            );
        }
        Ok(self.one_or_tuple())
    }

    fn while_(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let init = self.shape(0);
        let cond = self.signature(&AttrKey::Condition)?;
        let body = self.signature(&AttrKey::Body)?;
        for (what, sig) in [("condition", &cond), ("body", &body)] {
            if sig.params.len() != 1 || !sig.params[0].compatible(init) {
                let got: Vec<String> = sig.params.iter().map(|p| p.to_string()).collect();
                bail!(
                    self,
                    "{what} computation %{} must take one parameter of the loop state's shape \
                     {init}, but takes ({})",
                    sig.name,
                    got.join(", ")
                );
            }
        }
        if !cond
            .result
            .compatible(&OwnedShape::scalar(ElementType::Pred))
        {
            bail!(
                self,
                "condition computation %{} must return pred[], but returns {}",
                cond.name,
                cond.result
            );
        }
        if !body.result.compatible(init) {
            bail!(
                self,
                "body computation %{} must return the loop state's shape {init}, but returns {}",
                body.name,
                body.result
            );
        }
        Ok(init.clone())
    }

    fn conditional(&self) -> R<OwnedShape> {
        self.expect_at_least(1)?;
        let idx = self.scalar(0, "the branch index")?;
        let branches: Vec<CompId> = match self.attr(&AttrKey::BranchComputations) {
            Some(AttrValue::Comps(cs)) => cs.to_vec(),
            Some(_) => bail!(self, "attribute `branch_computations` is malformed"),
            None => match (
                self.attr(&AttrKey::TrueComputation),
                self.attr(&AttrKey::FalseComputation),
            ) {
                (Some(AttrValue::Comp(t)), Some(AttrValue::Comp(f))) => vec![*t, *f],
                (Some(_), None) => bail!(self, "missing attribute `false_computation`"),
                (None, Some(_)) => bail!(self, "missing attribute `true_computation`"),
                _ => bail!(self, "missing attribute `branch_computations`"),
            },
        };
        match idx.ty {
            ElementType::Pred => {
                if branches.len() != 2 {
                    bail!(
                        self,
                        "a pred branch index needs exactly 2 branches, got {}",
                        branches.len()
                    );
                }
            }
            ElementType::S32 => {
                if branches.is_empty() {
                    bail!(self, "needs at least one branch computation");
                }
            }
            t => bail!(self, "the branch index must be pred or s32, got {t}"),
        }
        if self.n() != branches.len() + 1 {
            bail!(
                self,
                "expects the branch index and one operand per branch ({} operands), got {}",
                branches.len() + 1,
                self.n()
            );
        }
        let mut result: Option<(String, OwnedShape)> = None;
        for (b, &c) in branches.iter().enumerate() {
            let sig = (self.signature)(c)
                .map_err(|e| self.err(format!("branch {b}: {}", e.message())))?;
            let arg = self.shape(b + 1);
            if sig.params.len() != 1 || !sig.params[0].compatible(arg) {
                let got: Vec<String> = sig.params.iter().map(|p| p.to_string()).collect();
                bail!(
                    self,
                    "branch {b} computation %{} must take one parameter of shape {arg} \
                     (operand {}), but takes ({})",
                    sig.name,
                    b + 1,
                    got.join(", ")
                );
            }
            match &result {
                None => result = Some((sig.name.clone(), sig.result.clone())),
                Some((n0, r0)) => {
                    if !sig.result.compatible(r0) {
                        bail!(
                            self,
                            "branch {b} computation %{} returns {} but branch 0 (%{n0}) \
                             returns {r0}",
                            sig.name,
                            sig.result
                        );
                    }
                }
            }
        }
        match result {
            Some((_, r)) => Ok(r),
            None => bail!(self, "needs at least one branch computation"),
        }
    }

    /// `call`/`fusion`: the computation's parameters must match the operands; the result is its
    /// root's shape.
    fn call_like(&self, key: &AttrKey) -> R<OwnedShape> {
        let sig = self.signature(key)?;
        if sig.params.len() != self.n() {
            bail!(
                self,
                "computation %{} takes {} parameters but is called with {} operands",
                sig.name,
                sig.params.len(),
                self.n()
            );
        }
        for (i, (p, a)) in sig.params.iter().zip(self.shapes).enumerate() {
            if !p.compatible(a) {
                bail!(
                    self,
                    "operand {i} has shape {a} but parameter {i} of computation %{} has {p}",
                    sig.name
                );
            }
        }
        Ok(sig.result)
    }

    fn fusion(&self) -> R<OwnedShape> {
        match self.attr(&AttrKey::Kind) {
            Some(AttrValue::FusionKind(_)) => {}
            Some(_) => bail!(self, "attribute `kind` is malformed"),
            None => bail!(self, "missing attribute `kind`"),
        }
        self.call_like(&AttrKey::Calls)
    }

    fn async_start(&self) -> R<OwnedShape> {
        let d = self.declared()?;
        let t = match d.as_tuple() {
            Some(t) if t.len() >= 2 => t,
            _ => bail!(
                self,
                "the result must be a tuple ((operands), result, ...), got {d}"
            ),
        };
        let ops = OwnedShape::Tuple(self.shapes.to_vec());
        if !t[0].compatible(&ops) {
            bail!(
                self,
                "result element 0 is {} but the operands are {ops}",
                t[0]
            );
        }
        if self.attr(&AttrKey::Calls).is_some() {
            let wrapped = self.call_like(&AttrKey::Calls)?;
            if !t[1].compatible(&wrapped) {
                bail!(
                    self,
                    "result element 1 is {} but the wrapped computation returns {wrapped}",
                    t[1]
                );
            }
        }
        Ok(d.clone())
    }

    // ---- dot and convolution ----

    /// The result element type of dot/convolution from operand types `a`, `b` and the declared
    /// (preferred) type.
    fn contraction_type(&self, a: ElementType, b: ElementType) -> R<ElementType> {
        let compatible =
            a == b || (a.is_floating() && b.is_floating()) || (a.is_int() && b.is_int());
        if !compatible {
            bail!(self, "operands have incompatible element types {a} and {b}");
        }
        let from = if a.bits() >= b.bits() { a } else { b };
        match self.declared_type() {
            None => Ok(from),
            Some(p) => {
                if !may_upcast(from, p) {
                    bail!(
                        self,
                        "the result type {p} must not be narrower than the operand type {from}"
                    );
                }
                Ok(p)
            }
        }
    }

    fn dot(&self) -> R<OwnedShape> {
        if self.n() != 2 {
            if self.other("sparsity").is_some() {
                return Ok(self.declared()?.clone());
            }
            self.expect_operands(2)?;
        }
        if let Some(v) = self.attr(&AttrKey::Algorithm) {
            if !matches!(v, AttrValue::Ident(s) if is_dot_algorithm(s)) {
                bail!(self, "unknown dot algorithm {v:?}");
            }
        }
        let (l, r) = (self.array(0)?, self.array(1)?);
        let lb = self.ints_or_empty(&AttrKey::LhsBatchDims)?;
        let rb = self.ints_or_empty(&AttrKey::RhsBatchDims)?;
        let lc = self.ints_or_empty(&AttrKey::LhsContractingDims)?;
        let rc = self.ints_or_empty(&AttrKey::RhsContractingDims)?;
        if lb.len() != rb.len() {
            bail!(
                self,
                "lhs_batch_dims {} and rhs_batch_dims {} must have the same length",
                join(lb),
                join(rb)
            );
        }
        if lc.len() != rc.len() {
            bail!(
                self,
                "lhs_contracting_dims {} and rhs_contracting_dims {} must have the same length",
                join(lc),
                join(rc)
            );
        }
        self.check_dims("lhs_batch_dims", lb, l.rank(), false)?;
        self.check_dims("rhs_batch_dims", rb, r.rank(), false)?;
        self.check_dims("lhs_contracting_dims", lc, l.rank(), false)?;
        self.check_dims("rhs_contracting_dims", rc, r.rank(), false)?;
        self.disjoint("lhs_batch_dims", lb, "lhs_contracting_dims", lc)?;
        self.disjoint("rhs_batch_dims", rb, "rhs_contracting_dims", rc)?;
        for (&x, &y) in lc.iter().zip(rc) {
            let (a, b) = (l.dims[x as usize], r.dims[y as usize]);
            if a != b {
                bail!(
                    self,
                    "contracting dimension sizes differ: lhs dimension {x} is {a} but rhs \
                     dimension {y} is {b} ({} x {})",
                    self.shape(0),
                    self.shape(1)
                );
            }
        }
        for (&x, &y) in lb.iter().zip(rb) {
            let (a, b) = (l.dims[x as usize], r.dims[y as usize]);
            if a != b {
                bail!(
                    self,
                    "batch dimension sizes differ: lhs dimension {x} is {a} but rhs dimension \
                     {y} is {b} ({} x {})",
                    self.shape(0),
                    self.shape(1)
                );
            }
        }
        let ty = self.contraction_type(l.ty, r.ty)?;
        let mut dims = Vec::new();
        let mut dynamic = Vec::new();
        for &x in lb {
            dims.push(l.dims[x as usize]);
            dynamic.push(l.dynamic[x as usize]);
        }
        for i in 0..l.rank() {
            if !contains(lb, i) && !contains(lc, i) {
                dims.push(l.dims[i]);
                dynamic.push(l.dynamic[i]);
            }
        }
        for i in 0..r.rank() {
            if !contains(rb, i) && !contains(rc, i) {
                dims.push(r.dims[i]);
                dynamic.push(r.dynamic[i]);
            }
        }
        Ok(array_of(ty, dims, dynamic))
    }

    fn ragged_dot(&self) -> R<OwnedShape> {
        self.expect_operands(3)?;
        let (l, r, g) = (self.array(0)?, self.array(1)?, self.array(2)?);
        if !g.ty.is_int() || g.rank() == 0 {
            bail!(
                self,
                "group sizes (operand 2) must be an integer array, got {}",
                self.shape(2)
            );
        }
        self.contraction_type(l.ty, r.ty)?;
        Ok(self.declared()?.clone())
    }

    fn convolution(&self) -> R<OwnedShape> {
        self.expect_operands(2)?;
        let (l, k) = (self.array(0)?, self.array(1)?);
        let dn: &ConvDims = match self.attr(&AttrKey::DimLabels) {
            Some(AttrValue::DimLabels(d)) => d,
            Some(_) => bail!(self, "attribute `dim_labels` is malformed"),
            None => bail!(self, "missing attribute `dim_labels`"),
        };
        let w = self.window()?;
        let fgc = self.opt_int(&AttrKey::FeatureGroupCount)?.unwrap_or(1);
        let bgc = self.opt_int(&AttrKey::BatchGroupCount)?.unwrap_or(1);
        if l.rank() != k.rank() {
            bail!(
                self,
                "input {} and kernel {} must have the same rank",
                self.shape(0),
                self.shape(1)
            );
        }
        let ns = dn.input_spatial.len();
        if l.rank() != ns + 2 {
            bail!(
                self,
                "dim_labels has {ns} spatial dimensions but the input has rank {} (expected {})",
                l.rank(),
                ns + 2
            );
        }
        if dn.kernel_spatial.len() != ns || dn.output_spatial.len() != ns {
            bail!(
                self,
                "dim_labels must have the same number of spatial dimensions for input, kernel \
                 and output"
            );
        }
        if !w.is_empty() && w.len() != ns {
            bail!(
                self,
                "the window has {} dimensions but dim_labels has {ns} spatial dimensions",
                w.len()
            );
        }
        if fgc <= 0 || bgc <= 0 {
            bail!(
                self,
                "feature_group_count ({fgc}) and batch_group_count ({bgc}) must be positive"
            );
        }
        if fgc > 1 && bgc > 1 {
            bail!(
                self,
                "feature_group_count ({fgc}) and batch_group_count ({bgc}) cannot both exceed 1"
            );
        }
        let rank = l.rank();
        let mut input = vec![dn.input_batch, dn.input_feature];
        input.extend_from_slice(&dn.input_spatial);
        self.check_dims("input dimension numbers", &input, rank, false)?;
        let mut kernel = vec![dn.kernel_input_feature, dn.kernel_output_feature];
        kernel.extend_from_slice(&dn.kernel_spatial);
        self.check_dims("kernel dimension numbers", &kernel, rank, false)?;
        let mut output = vec![dn.output_batch, dn.output_feature];
        output.extend_from_slice(&dn.output_spatial);
        self.check_dims("output dimension numbers", &output, rank, false)?;

        let in_batch = l.dims[dn.input_batch as usize];
        let in_feat = l.dims[dn.input_feature as usize];
        let k_in = k.dims[dn.kernel_input_feature as usize];
        let k_out = k.dims[dn.kernel_output_feature as usize];
        if in_feat % fgc != 0 || in_feat / fgc != k_in {
            bail!(
                self,
                "the input feature dimension ({in_feat}) must be feature_group_count ({fgc}) \
                 times the kernel input feature dimension ({k_in})"
            );
        }
        if k_out % fgc != 0 {
            bail!(
                self,
                "the kernel output feature dimension ({k_out}) must be divisible by \
                 feature_group_count ({fgc})"
            );
        }
        if in_batch % bgc != 0 {
            bail!(
                self,
                "the input batch dimension ({in_batch}) must be divisible by batch_group_count \
                 ({bgc})"
            );
        }
        if k_out % bgc != 0 {
            bail!(
                self,
                "the kernel output feature dimension ({k_out}) must be divisible by \
                 batch_group_count ({bgc})"
            );
        }
        let default_window;
        let w = if w.is_empty() && ns > 0 {
            default_window = vec![WindowDim::default(); ns];
            &default_window[..]
        } else {
            w
        };
        for (i, (wd, &kd)) in w.iter().zip(dn.kernel_spatial.iter()).enumerate() {
            let ks = k.dims[kd as usize];
            if wd.size != ks {
                bail!(
                    self,
                    "window size {} of spatial dimension {i} must equal the kernel's spatial \
                     size {ks}",
                    wd.size
                );
            }
        }
        let base = ArrayShape {
            ty: l.ty,
            dims: dn
                .input_spatial
                .iter()
                .map(|&d| l.dims[d as usize])
                .collect(),
            dynamic: dn
                .input_spatial
                .iter()
                .map(|&d| l.dynamic[d as usize])
                .collect(),
        };
        let spatial = self.window_output(&base, w, l.ty)?;
        let ty = self.contraction_type(l.ty, k.ty)?;
        let mut dims = vec![0i64; rank];
        let mut dynamic = vec![false; rank];
        dims[dn.output_batch as usize] = in_batch / bgc;
        dynamic[dn.output_batch as usize] = l.dynamic[dn.input_batch as usize];
        dims[dn.output_feature as usize] = k_out;
        for i in 0..ns {
            dims[dn.output_spatial[i] as usize] = spatial.dims[i];
            dynamic[dn.output_spatial[i] as usize] = spatial.dynamic[i];
        }
        Ok(array_of(ty, dims, dynamic))
    }

    // ---- gather and scatter ----

    fn index_vector_dim(&self, indices: &ArrayShape) -> R<(usize, Vec<i64>)> {
        let ivd = self.int(&AttrKey::IndexVectorDim)?;
        if ivd < 0 || ivd as u64 > indices.rank() as u64 {
            bail!(
                self,
                "index_vector_dim {ivd} is out of range for start indices of rank {} (must be \
                 in [0, {}])",
                indices.rank(),
                indices.rank()
            );
        }
        let mut expanded = indices.dims.to_vec();
        if ivd as usize == indices.rank() {
            expanded.push(1);
        }
        Ok((ivd as usize, expanded))
    }

    fn gather(&self) -> R<OwnedShape> {
        self.expect_operands(2)?;
        let (a, idx) = (self.array(0)?, self.array(1)?);
        if !idx.ty.is_int() {
            bail!(
                self,
                "start indices must be integers, got {}",
                self.shape(1)
            );
        }
        let offset_dims = self.ints(&AttrKey::OffsetDims)?;
        let collapsed = self.ints_or_empty(&AttrKey::CollapsedSliceDims)?;
        let start_index_map = self.ints(&AttrKey::StartIndexMap)?;
        let op_batch = self.ints_or_empty(&AttrKey::OperandBatchingDims)?;
        let idx_batch = self.ints_or_empty(&AttrKey::StartIndicesBatchingDims)?;
        let slice_sizes = self.ints(&AttrKey::SliceSizes)?;
        let (ivd, expanded) = self.index_vector_dim(idx)?;
        let rank = a.rank();
        let out_rank = offset_dims.len() + expanded.len() - 1;

        self.check_dims("offset_dims", offset_dims, out_rank, true)?;
        self.check_dims("collapsed_slice_dims", collapsed, rank, true)?;
        self.check_dims("operand_batching_dims", op_batch, rank, true)?;
        self.disjoint(
            "collapsed_slice_dims",
            collapsed,
            "operand_batching_dims",
            op_batch,
        )?;
        if start_index_map.len() as i64 != expanded[ivd] {
            bail!(
                self,
                "start_index_map {} has {} entries but the index vector (dimension {ivd} of \
                 the start indices {}) has size {}",
                join(start_index_map),
                start_index_map.len(),
                self.shape(1),
                expanded[ivd]
            );
        }
        self.check_dims("start_index_map", start_index_map, rank, false)?;
        self.disjoint(
            "start_index_map",
            start_index_map,
            "operand_batching_dims",
            op_batch,
        )?;
        if idx_batch.len() != op_batch.len() {
            bail!(
                self,
                "start_indices_batching_dims {} and operand_batching_dims {} must have the \
                 same length",
                join(idx_batch),
                join(op_batch)
            );
        }
        self.check_dims("start_indices_batching_dims", idx_batch, idx.rank(), false)?;
        if contains(idx_batch, ivd) {
            bail!(
                self,
                "start_indices_batching_dims {} must not contain index_vector_dim {ivd}",
                join(idx_batch)
            );
        }
        for (&o, &s) in op_batch.iter().zip(idx_batch) {
            let (x, y) = (a.dims[o as usize], idx.dims[s as usize]);
            if x != y {
                bail!(
                    self,
                    "operand batching dimension {o} (size {x}) and start indices batching \
                     dimension {s} (size {y}) differ"
                );
            }
        }
        if slice_sizes.len() != rank {
            bail!(
                self,
                "slice_sizes {} must have one entry per operand dimension ({rank})",
                join(slice_sizes)
            );
        }
        for (i, &s) in slice_sizes.iter().enumerate() {
            if s < 0 || s > a.dims[i] {
                bail!(
                    self,
                    "slice size {s} of dimension {i} is out of bounds for size {}",
                    a.dims[i]
                );
            }
        }
        for &d in collapsed.iter().chain(op_batch) {
            if slice_sizes[d as usize] > 1 {
                bail!(
                    self,
                    "collapsed or batching dimension {d} must have slice size at most 1, got {}",
                    slice_sizes[d as usize]
                );
            }
        }
        if offset_dims.len() + collapsed.len() + op_batch.len() != rank {
            bail!(
                self,
                "offset_dims ({}) + collapsed_slice_dims ({}) + operand_batching_dims ({}) \
                 must cover the operand's rank {rank}",
                offset_dims.len(),
                collapsed.len(),
                op_batch.len()
            );
        }
        let mut offsets = (0..rank)
            .filter(|&d| !contains(collapsed, d) && !contains(op_batch, d))
            .map(|d| (slice_sizes[d], false));
        let mut batches = (0..expanded.len())
            .filter(|&d| d != ivd)
            .map(|d| (expanded[d], idx.dynamic.get(d).copied().unwrap_or(false)));
        let mut dims = Vec::with_capacity(out_rank);
        let mut dynamic = Vec::with_capacity(out_rank);
        for i in 0..out_rank {
            let next = if contains(offset_dims, i) {
                offsets.next()
            } else {
                batches.next()
            };
            match next {
                Some((d, dy)) => {
                    dims.push(d);
                    dynamic.push(dy);
                }
                None => bail!(self, "dimension numbers are inconsistent"),
            }
        }
        Ok(array_of(a.ty, dims, dynamic))
    }

    fn scatter(&self) -> R<OwnedShape> {
        if self.n() < 3 || self.n() % 2 != 1 {
            bail!(
                self,
                "expects N inputs, the scatter indices and N updates, got {} operands",
                self.n()
            );
        }
        let n = (self.n() - 1) / 2;
        self.same_dims_all(0..n)?;
        self.same_dims_all(n + 1..2 * n + 1)?;
        let a = self.array(0)?;
        let idx = self.array(n)?;
        let upd = self.array(n + 1)?;
        if !idx.ty.is_int() {
            bail!(
                self,
                "scatter indices (operand {n}) must be integers, got {}",
                self.shape(n)
            );
        }
        let mut inits = Vec::with_capacity(n);
        let mut inputs = Vec::with_capacity(n);
        for i in 0..n {
            let (x, u) = (self.array(i)?, self.array(n + 1 + i)?);
            if x.ty != u.ty {
                bail!(
                    self,
                    "updates {} (operand {}) must have the element type of input {}",
                    self.shape(n + 1 + i),
                    n + 1 + i,
                    self.shape(i)
                );
            }
            inits.push(x.ty);
            inputs.push(u.ty);
        }
        let uwd = self.ints(&AttrKey::UpdateWindowDims)?;
        let inserted = self.ints_or_empty(&AttrKey::InsertedWindowDims)?;
        let sdod = self.ints(&AttrKey::ScatterDimsToOperandDims)?;
        let in_batch = self.ints_or_empty(&AttrKey::InputBatchingDims)?;
        let idx_batch = self.ints_or_empty(&AttrKey::ScatterIndicesBatchingDims)?;
        let (ivd, expanded) = self.index_vector_dim(idx)?;
        let rank = a.rank();
        self.check_dims("update_window_dims", uwd, upd.rank(), true)?;
        self.check_dims("inserted_window_dims", inserted, rank, true)?;
        self.check_dims("input_batching_dims", in_batch, rank, true)?;
        self.disjoint(
            "inserted_window_dims",
            inserted,
            "input_batching_dims",
            in_batch,
        )?;
        if uwd.len() + inserted.len() + in_batch.len() != rank {
            bail!(
                self,
                "update_window_dims ({}) + inserted_window_dims ({}) + input_batching_dims ({}) \
                 must cover the operand's rank {rank}",
                uwd.len(),
                inserted.len(),
                in_batch.len()
            );
        }
        if sdod.len() as i64 != expanded[ivd] {
            bail!(
                self,
                "scatter_dims_to_operand_dims {} has {} entries but the index vector (dimension \
                 {ivd} of the indices {}) has size {}",
                join(sdod),
                sdod.len(),
                self.shape(n),
                expanded[ivd]
            );
        }
        self.check_dims("scatter_dims_to_operand_dims", sdod, rank, false)?;
        self.disjoint(
            "scatter_dims_to_operand_dims",
            sdod,
            "input_batching_dims",
            in_batch,
        )?;
        if idx_batch.len() != in_batch.len() {
            bail!(
                self,
                "scatter_indices_batching_dims {} and input_batching_dims {} must have the same \
                 length",
                join(idx_batch),
                join(in_batch)
            );
        }
        self.check_dims(
            "scatter_indices_batching_dims",
            idx_batch,
            idx.rank(),
            false,
        )?;
        if contains(idx_batch, ivd) {
            bail!(
                self,
                "scatter_indices_batching_dims {} must not contain index_vector_dim {ivd}",
                join(idx_batch)
            );
        }
        for (&o, &s) in in_batch.iter().zip(idx_batch) {
            let (x, y) = (a.dims[o as usize], idx.dims[s as usize]);
            if x != y {
                bail!(
                    self,
                    "input batching dimension {o} (size {x}) and indices batching dimension {s} \
                     (size {y}) differ"
                );
            }
        }
        let expected_rank = uwd.len() + expanded.len() - 1;
        if upd.rank() != expected_rank {
            bail!(
                self,
                "updates {} must have rank {expected_rank} (update_window_dims plus the \
                 scatter dimensions of the indices)",
                self.shape(n + 1)
            );
        }
        let window_operand_dims: Vec<usize> = (0..rank)
            .filter(|&d| !contains(inserted, d) && !contains(in_batch, d))
            .collect();
        for (i, &ud) in uwd.iter().enumerate() {
            let od = window_operand_dims[i];
            if upd.dims[ud as usize] > a.dims[od] {
                bail!(
                    self,
                    "update window dimension {ud} (size {}) exceeds operand dimension {od} \
                     (size {})",
                    upd.dims[ud as usize],
                    a.dims[od]
                );
            }
        }
        let scatter_dims = (0..upd.rank()).filter(|&d| !contains(uwd, d));
        let index_dims = (0..expanded.len()).filter(|&d| d != ivd);
        for (ud, id) in scatter_dims.zip(index_dims) {
            if upd.dims[ud] != expanded[id] {
                bail!(
                    self,
                    "update scatter dimension {ud} (size {}) must equal indices dimension {id} \
                     (size {})",
                    upd.dims[ud],
                    expanded[id]
                );
            }
        }
        self.reducer(&AttrKey::ToApply, &inits, &inputs)?;
        Ok(if n == 1 {
            self.shape(0).clone()
        } else {
            OwnedShape::Tuple(self.shapes[..n].to_vec())
        })
    }

    // ---- linear algebra and others ----

    fn fft(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let kind = self.ident(&AttrKey::FftType)?;
        let len = self.ints(&AttrKey::FftLength)?;
        if len.is_empty() || len.len() > 3 {
            bail!(self, "fft_length {} must have 1 to 3 entries", join(len));
        }
        if len.iter().any(|&l| l < 0) {
            bail!(self, "fft_length {} must not be negative", join(len));
        }
        if a.rank() < len.len() {
            bail!(
                self,
                "the operand {} has fewer dimensions than fft_length {}",
                self.shape(0),
                join(len)
            );
        }
        let base = a.rank() - len.len();
        let last = len[len.len() - 1];
        let check_tail = |expect: &dyn Fn(usize) -> i64| -> R<()> {
            for (i, _) in len.iter().enumerate() {
                let want = expect(i);
                if a.dims[base + i] != want {
                    bail!(
                        self,
                        "dimension {} of the operand {} must be {want} for fft_length {}",
                        base + i,
                        self.shape(0),
                        join(len)
                    );
                }
            }
            Ok(())
        };
        match kind {
            "FFT" | "IFFT" => {
                if !a.ty.is_complex() {
                    bail!(self, "{kind} needs a complex operand, got {}", a.ty);
                }
                // XLA does not tie an FFT's lengths to its operand; what it computes is defined
                // where they are equal, or where one is zero (no data: zeros).
                let empty = len.contains(&0) || a.dims[base..].contains(&0);
                if !empty {
                    check_tail(&|i| len[i])?;
                }
                Ok(self.shape(0).clone())
            }
            "RFFT" => {
                let ty = match a.ty {
                    ElementType::F32 => ElementType::C64,
                    ElementType::F64 => ElementType::C128,
                    t => bail!(self, "RFFT needs an f32 or f64 operand, got {t}"),
                };
                check_tail(&|i| len[i])?;
                let mut dims = a.dims.to_vec();
                dims[a.rank() - 1] = if last == 0 { 0 } else { last / 2 + 1 };
                Ok(array_of(ty, dims, a.dynamic.to_vec()))
            }
            "IRFFT" => {
                if !a.ty.is_complex() {
                    bail!(self, "IRFFT needs a complex operand, got {}", a.ty);
                }
                let n = len.len();
                check_tail(&|i| {
                    if i + 1 == n {
                        if last == 0 {
                            0
                        } else {
                            last / 2 + 1
                        }
                    } else {
                        len[i]
                    }
                })?;
                let mut dims = a.dims.to_vec();
                dims[a.rank() - 1] = last;
                Ok(array_of(a.ty.component_type(), dims, a.dynamic.to_vec()))
            }
            other => bail!(
                self,
                "unknown fft_type {other} (expected FFT, IFFT, RFFT or IRFFT)"
            ),
        }
    }

    fn square_matrix(&self, i: usize) -> R<&'a ArrayShape> {
        let a = self.array(i)?;
        if !a.ty.is_floating() {
            bail!(
                self,
                "operand {i} must have a floating-point or complex element type, got {}",
                a.ty
            );
        }
        let r = a.rank();
        if r < 2 || a.dims[r - 1] != a.dims[r - 2] {
            bail!(
                self,
                "operand {i} must be a (batch of) square matrices, got {}",
                self.shape(i)
            );
        }
        Ok(a)
    }

    fn cholesky(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        self.square_matrix(0)?;
        self.opt_bool(&AttrKey::Lower)?;
        Ok(self.shape(0).clone())
    }

    fn triangular_solve(&self) -> R<OwnedShape> {
        self.expect_operands(2)?;
        let a = self.square_matrix(0)?;
        let b = self.array(1)?;
        if b.ty != a.ty || b.rank() != a.rank() {
            bail!(
                self,
                "b {} must have the element type and rank of a {}",
                self.shape(1),
                self.shape(0)
            );
        }
        let r = a.rank();
        if a.dims[..r - 2] != b.dims[..r - 2] {
            bail!(
                self,
                "batch dimensions of a {} and b {} differ",
                self.shape(0),
                self.shape(1)
            );
        }
        let left = self.opt_bool(&AttrKey::LeftSide)?.unwrap_or(false);
        let bd = if left { b.dims[r - 2] } else { b.dims[r - 1] };
        if bd != a.dims[r - 1] {
            let side = if left { "left" } else { "right" };
            bail!(
                self,
                "with left_side={left}, b {} does not fit a {} on the {side}",
                self.shape(1),
                self.shape(0)
            );
        }
        if let Some(AttrValue::Ident(t)) = self.attr(&AttrKey::TransposeA) {
            if !matches!(&**t, "NO_TRANSPOSE" | "TRANSPOSE" | "ADJOINT") {
                bail!(
                    self,
                    "transpose_a must be NO_TRANSPOSE, TRANSPOSE or ADJOINT, got {t}"
                );
            }
        }
        Ok(self.shape(1).clone())
    }

    fn batch_norm(&self) -> R<OwnedShape> {
        use Opcode::*;
        let n = match self.op {
            BatchNormTraining => 3,
            BatchNormInference => 5,
            _ => 5,
        };
        self.expect_operands(n)?;
        let a = self.array(0)?;
        if !a.ty.is_float() {
            bail!(
                self,
                "the operand must have a floating-point element type, got {}",
                a.ty
            );
        }
        let fi = self.other_int("feature_index")?;
        let fi = self.dim_index("feature_index", fi, a.rank())?;
        let features = a.dims[fi];
        let feature_shape = OwnedShape::array(a.ty, &[features]);
        let (vectors, grad): (&[usize], Option<usize>) = match self.op {
            BatchNormTraining => (&[1, 2], None),
            BatchNormInference => (&[1, 2, 3, 4], None),
            _ => (&[1, 2, 3], Some(4)),
        };
        for &i in vectors {
            if !self.shape(i).compatible(&feature_shape) {
                bail!(
                    self,
                    "operand {i} has shape {} but must be {feature_shape} (the size of feature \
                     dimension {fi})",
                    self.shape(i)
                );
            }
        }
        if let Some(g) = grad {
            self.same_dims(0, g, true)?;
        }
        Ok(match self.op {
            BatchNormInference => self.shape(0).clone(),
            _ => OwnedShape::Tuple(vec![
                self.shape(0).clone(),
                feature_shape.clone(),
                feature_shape,
            ]),
        })
    }

    fn topk(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        if a.rank() == 0 {
            bail!(self, "the operand must have rank at least 1");
        }
        let k = self.int(&AttrKey::K)?;
        self.opt_bool(&AttrKey::Largest)?;
        let last = a.dims[a.rank() - 1];
        if k < 0 || k > last {
            bail!(
                self,
                "k={k} is out of range for the last dimension of {} (size {last})",
                self.shape(0)
            );
        }
        let mut dims = a.dims.to_vec();
        let r = dims.len();
        dims[r - 1] = k;
        Ok(OwnedShape::Tuple(vec![
            array_of(a.ty, dims.clone(), a.dynamic.to_vec()),
            array_of(ElementType::S32, dims, a.dynamic.to_vec()),
        ]))
    }

    fn rng(&self) -> R<OwnedShape> {
        self.expect_operands(2)?;
        let out = self.declared_array()?;
        let dist = self.ident(&AttrKey::Distribution)?;
        for i in 0..2 {
            let s = self.scalar(i, "a distribution parameter")?;
            if s.ty != out.ty {
                bail!(
                    self,
                    "operand {i} has type {} but the result has {}",
                    s.ty,
                    out.ty
                );
            }
        }
        match dist {
            "rng_uniform" => {
                if out.ty.is_pred() || out.ty.is_complex() {
                    bail!(self, "rng_uniform cannot produce {}", out.ty);
                }
            }
            "rng_normal" => {
                if !out.ty.is_float() {
                    bail!(
                        self,
                        "rng_normal needs a floating-point type, got {}",
                        out.ty
                    );
                }
            }
            d => bail!(
                self,
                "unknown distribution {d} (expected rng_uniform or rng_normal)"
            ),
        }
        Ok(OwnedShape::Array(out.clone()))
    }

    fn rng_bit_generator(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let d = self.declared()?;
        match d.as_tuple() {
            Some([state, out]) if out.as_array().is_some() => {
                if !state.compatible(self.shape(0)) {
                    bail!(
                        self,
                        "result element 0 is {state} but the state operand is {}",
                        self.shape(0)
                    );
                }
                Ok(d.clone())
            }
            _ => bail!(self, "the result must be a tuple (state, values), got {d}"),
        }
    }

    fn get_dimension_size(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.array(0)?;
        let d = self.ints(&AttrKey::Dimensions)?;
        if d.len() != 1 {
            bail!(
                self,
                "dimensions {} must name exactly one dimension",
                join(d)
            );
        }
        self.dim_index("dimension", d[0], a.rank())?;
        Ok(OwnedShape::scalar(ElementType::S32))
    }

    fn set_dimension_size(&self) -> R<OwnedShape> {
        self.expect_operands(2)?;
        let a = self.array(0)?;
        let s = self.scalar(1, "the dimension size")?;
        if s.ty != ElementType::S32 {
            bail!(self, "the dimension size must be s32, got {}", s.ty);
        }
        let d = self.ints(&AttrKey::Dimensions)?;
        if d.len() != 1 {
            bail!(
                self,
                "dimensions {} must name exactly one dimension",
                join(d)
            );
        }
        let d = self.dim_index("dimension", d[0], a.rank())?;
        let mut dynamic = a.dynamic.to_vec();
        dynamic[d] = true;
        Ok(array_of(a.ty, a.dims.to_vec(), dynamic))
    }

    fn infeed(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        self.token(0)?;
        let d = self.declared()?;
        match d.as_tuple() {
            Some([_, OwnedShape::Token]) => Ok(d.clone()),
            _ => bail!(self, "the result must be a tuple (data, token[]), got {d}"),
        }
    }

    fn send(&self) -> R<OwnedShape> {
        self.expect_operands(2)?;
        self.token(1)?;
        let want = OwnedShape::Tuple(vec![
            self.shape(0).clone(),
            OwnedShape::scalar(ElementType::U32),
            OwnedShape::Token,
        ]);
        Ok(want)
    }

    fn recv(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        self.token(0)?;
        let d = self.declared()?;
        match d.as_tuple() {
            Some([_, ctx, OwnedShape::Token])
                if ctx.compatible(&OwnedShape::scalar(ElementType::U32)) =>
            {
                Ok(d.clone())
            }
            _ => bail!(
                self,
                "the result must be a tuple (data, u32[], token[]), got {d}"
            ),
        }
    }

    fn copy_start(&self) -> R<OwnedShape> {
        self.expect_operands(1)?;
        let a = self.shape(0);
        if let Some(d) = self.declared {
            if let Some([x, y, _]) = d.as_tuple() {
                if x.compatible(a) && y.compatible(a) {
                    return Ok(d.clone());
                }
            }
        }
        Ok(OwnedShape::Tuple(vec![
            a.clone(),
            a.clone(),
            OwnedShape::scalar(ElementType::U32),
        ]))
    }

    fn all_reduce(&self) -> R<OwnedShape> {
        self.expect_at_least(1)?;
        self.collective_attrs()?;
        for i in 0..self.n() {
            let t = self.array(i)?.ty;
            self.reducer(&AttrKey::ToApply, &[t], &[t])?;
        }
        Ok(self.one_or_tuple())
    }

    /// Checks a collective that scales dimension `dimensions={d}` of each operand: the result
    /// (declared) has each operand's shape with that dimension multiplied (`gather`) or divided.
    fn scaled_collective(&self, gather: bool) -> R<OwnedShape> {
        self.expect_at_least(1)?;
        let d = self.declared()?;
        let outs: Vec<&OwnedShape> = match d {
            OwnedShape::Tuple(t) if self.n() > 1 => t.iter().collect(),
            s => vec![s],
        };
        if outs.len() != self.n() {
            bail!(
                self,
                "the result {d} must have one element per operand ({})",
                self.n()
            );
        }
        let dims = self.ints(&AttrKey::Dimensions)?;
        if dims.len() != 1 {
            bail!(
                self,
                "dimensions {} must name exactly one dimension",
                join(dims)
            );
        }
        let size = self.collective_attrs()?;
        for (i, out) in outs.iter().enumerate() {
            let a = self.array(i)?;
            let dim = self.dim_index("dimension", dims[0], a.rank())?;
            let o = match out.as_array() {
                Some(o) => o,
                None => bail!(self, "result {i} must be an array, got {out}"),
            };
            let (small, big) = if gather { (a, o) } else { (o, a) };
            if let Some(size) = size {
                if small.dims[dim].checked_mul(size) != Some(big.dims[dim]) {
                    bail!(
                        self,
                        "result {out} does not fit operand {i} {} along dimension {dim} for \
                         groups of {size}",
                        self.shape(i)
                    );
                }
            }
            let ok = o.ty == a.ty
                && o.rank() == a.rank()
                && (0..a.rank()).all(|k| k == dim || o.dims[k] == a.dims[k])
                && ((small.dims[dim] == 0 && big.dims[dim] == 0)
                    || (small.dims[dim] > 0 && big.dims[dim] % small.dims[dim] == 0));
            if !ok {
                bail!(
                    self,
                    "result {out} does not fit operand {i} {} along dimension {dim}",
                    self.shape(i)
                );
            }
        }
        Ok(d.clone())
    }

    fn all_gather(&self) -> R<OwnedShape> {
        self.scaled_collective(true)
    }

    /// What every collective's attributes must satisfy: a positive `channel_id`,
    /// `use_global_device_ids=true` only with a `channel_id` (and then explicit groups), valid
    /// replica groups. Returns the groups' uniform size when the form gives it.
    fn collective_attrs(&self) -> R<Option<i64>> {
        let channel = self.opt_int(&AttrKey::ChannelId)?;
        if let Some(c) = channel {
            if c < 1 {
                bail!(self, "channel_id must be positive, got {c}");
            }
        }
        let global = self.opt_bool(&AttrKey::UseGlobalDeviceIds)?;
        if global == Some(true) && channel.is_none() {
            bail!(self, "use_global_device_ids=true needs a channel_id");
        }
        match self.attr(&AttrKey::ReplicaGroups) {
            Some(AttrValue::ReplicaGroups(g)) => {
                if let Err(e) = g.validate() {
                    bail!(self, "{e}");
                }
                if global == Some(true) && g.is_empty_list() {
                    bail!(
                        self,
                        "use_global_device_ids=true needs explicit replica groups"
                    );
                }
                Ok(g.uniform_group_size())
            }
            Some(_) => bail!(self, "replica_groups must be lists of ids or the iota form"),
            None => Ok(None),
        }
    }

    /// `all-to-all`: the array form (`dimensions={d}`, one operand split into one chunk per
    /// group member) keeps the operand's shape; the tuple form sends operand `k` to member
    /// `k` and has one operand per member.
    fn all_to_all(&self) -> R<OwnedShape> {
        self.expect_at_least(1)?;
        let size = self.collective_attrs()?;
        for i in 0..self.n() {
            self.array(i)?;
        }
        if self.attr(&AttrKey::Dimensions).is_some() {
            let dims = self.ints(&AttrKey::Dimensions)?;
            if dims.len() != 1 {
                bail!(
                    self,
                    "dimensions {} must name exactly one split dimension",
                    join(dims)
                );
            }
            for i in 0..self.n() {
                let a = self.array(i)?;
                let d = self.dim_index("split dimension", dims[0], a.rank())?;
                if let Some(size) = size {
                    if a.dims[d] % size != 0 {
                        bail!(
                            self,
                            "split dimension {d} of operand {i} {} does not divide into {size} \
                             chunks (the group size)",
                            self.shape(i)
                        );
                    }
                }
            }
        } else if let Some(size) = size {
            if self.n() as i64 != size {
                bail!(
                    self,
                    "the tuple form takes one operand per group member ({size}), got {}",
                    self.n()
                );
            }
        }
        Ok(self.one_or_tuple())
    }

    /// `collective-permute` (and its `-start`): source-target pairs with no source and no
    /// target twice.
    fn permute_pairs(&self) -> R<()> {
        self.collective_attrs()?;
        let pairs = match self.attr(&AttrKey::SourceTargetPairs) {
            Some(AttrValue::Pairs(p)) => p,
            Some(_) => bail!(self, "source_target_pairs must be pairs like {{0,1}}"),
            None => bail!(self, "missing attribute `source_target_pairs`"),
        };
        let (mut src, mut dst) = (
            std::collections::BTreeSet::new(),
            std::collections::BTreeSet::new(),
        );
        for [s, t] in pairs.iter() {
            if !src.insert(s) {
                bail!(self, "source {s} appears in two source-target pairs");
            }
            if !dst.insert(t) {
                bail!(self, "target {t} appears in two source-target pairs");
            }
        }
        Ok(())
    }

    fn reduce_scatter(&self) -> R<OwnedShape> {
        for i in 0..self.n() {
            let t = self.array(i)?.ty;
            self.reducer(&AttrKey::ToApply, &[t], &[t])?;
        }
        self.scaled_collective(false)
    }
}

fn tuple_or_single(mut shapes: Vec<OwnedShape>, tuple: bool) -> OwnedShape {
    if tuple || shapes.len() != 1 {
        OwnedShape::Tuple(shapes)
    } else {
        shapes.pop().unwrap_or(OwnedShape::Tuple(Vec::new()))
    }
}

/// The number of elements, or `None` if it overflows.
fn elements(a: &ArrayShape) -> Option<i128> {
    a.dims
        .iter()
        .try_fold(1i128, |acc, &d| acc.checked_mul(d as i128))
}

fn fmt_count(n: Option<i128>) -> String {
    match n {
        Some(n) => n.to_string(),
        None => "too many".to_string(),
    }
}

/// Whether `name` is one of XLA's dot algorithms (`algorithm=dot_bf16_bf16_f32`, or the
/// `ALG_DOT_..` spelling of its enum). Each permits a dot at most as precise as its operands'
/// own types with `f32` accumulation; like XLA CPU, Axle's backends compute every one at the
/// operands' precision (the default), which is at least as precise as any of them asks.
pub fn is_dot_algorithm(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    let n = n.strip_prefix("alg_").unwrap_or(&n);
    matches!(
        n,
        "unset"
            | "dot_any_f8_any_f8_f32"
            | "dot_any_f8_any_f8_f32_fast_accum"
            | "dot_f16_f16_f16"
            | "dot_f16_f16_f32"
            | "dot_bf16_bf16_bf16"
            | "dot_bf16_bf16_f32"
            | "dot_bf16_bf16_f32_x3"
            | "dot_bf16_bf16_f32_x6"
            | "dot_bf16_bf16_f32_x9"
            | "dot_tf32_tf32_f32"
            | "dot_tf32_tf32_f32_x3"
            | "dot_f32_f32_f32"
            | "dot_f64_f64_f64"
    )
}
