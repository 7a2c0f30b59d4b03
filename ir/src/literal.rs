//! Host literals: dense little-endian arrays of any element type, and tuples of literals.
//!
//! Elements are stored row-major (logical order, whatever the layout) in their natural width;
//! sub-byte types (`s4`, `u4`, `s2`, `u2`, `f4e2m1fn`) take one byte per element; `pred` is one
//! byte (0 or 1); complex numbers are two components, real first.

use crate::types::{ArrayShape, ElementType};
use half::{bf16, f16};

/// A host value: an array or a tuple.
#[derive(Clone, Debug, PartialEq)]
pub enum Literal {
    /// A dense array.
    Array(ArrayLiteral),
    /// A tuple.
    Tuple(Vec<Literal>),
}

/// A dense array value.
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayLiteral {
    /// Its shape.
    pub shape: ArrayShape,
    /// Row-major little-endian element bytes.
    pub data: Vec<u8>,
}

/// Why bytes or values do not make an array of a shape.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LiteralError {
    /// A dimension is negative or dynamic.
    #[error("dimensions {0:?} are not static sizes")]
    BadDims(Vec<i64>),
    /// The element count or byte size overflows.
    #[error("{ty}{dims:?} is too large to hold in memory")]
    TooLarge {
        /// The element type.
        ty: ElementType,
        /// The dimensions.
        dims: Vec<i64>,
    },
    /// The data has the wrong length.
    #[error("{ty}{dims:?} needs {expected} {unit}, {got} given")]
    Length {
        /// The element type.
        ty: ElementType,
        /// The dimensions.
        dims: Vec<i64>,
        /// What the shape needs.
        expected: usize,
        /// What was given.
        got: usize,
        /// `bytes` or `values`.
        unit: &'static str,
    },
}

/// The number of elements and bytes of a static array shape, or why it has none.
pub fn checked_size(ty: ElementType, dims: &[i64]) -> Result<(usize, usize), LiteralError> {
    if dims.iter().any(|&d| d < 0) {
        return Err(LiteralError::BadDims(dims.to_vec()));
    }
    let too_large = || LiteralError::TooLarge {
        ty,
        dims: dims.to_vec(),
    };
    let n = dims.iter().try_fold(1usize, |n, &d| {
        usize::try_from(d).ok().and_then(|d| n.checked_mul(d))
    });
    let n = n.ok_or_else(too_large)?;
    let bytes = n.checked_mul(ty.byte_size()).ok_or_else(too_large)?;
    if bytes > isize::MAX as usize {
        return Err(too_large());
    }
    Ok((n, bytes))
}

impl ArrayLiteral {
    /// An array of shape `shape` holding `data`, its row-major little-endian element bytes;
    /// fails unless the dimensions are static and `data` has exactly the bytes they need.
    pub fn new(shape: ArrayShape, data: Vec<u8>) -> Result<ArrayLiteral, LiteralError> {
        let (_, bytes) = checked_size(shape.ty, &shape.dims)?;
        if shape.is_dynamic() {
            return Err(LiteralError::BadDims(shape.dims.to_vec()));
        }
        if data.len() != bytes {
            return Err(LiteralError::Length {
                ty: shape.ty,
                dims: shape.dims.to_vec(),
                expected: bytes,
                got: data.len(),
                unit: "bytes",
            });
        }
        Ok(ArrayLiteral { shape, data })
    }

    /// An array of zeros.
    pub fn zeros(shape: ArrayShape) -> ArrayLiteral {
        let n = shape.num_elements().max(0) as usize * shape.ty.byte_size();
        ArrayLiteral {
            shape,
            data: vec![0; n],
        }
    }

    /// The element type.
    pub fn ty(&self) -> ElementType {
        self.shape.ty
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.shape.num_elements().max(0) as usize
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The bytes of element `i` (row-major index).
    pub fn element_bytes(&self, i: usize) -> &[u8] {
        let w = self.ty().byte_size();
        &self.data[i * w..(i + 1) * w]
    }

    /// The leading block of dimensions `dims` (one per dimension, each from 0 to this array's),
    /// and whether every element outside it is all zero bytes: how a result with dynamic
    /// dimensions, computed at its bound, reads at its runtime sizes. `None` when `dims` do not
    /// fit.
    pub fn leading_block(&self, dims: &[i64]) -> Option<(ArrayLiteral, bool)> {
        let bound = &self.shape.dims;
        if dims.len() != bound.len() || dims.iter().zip(bound.iter()).any(|(&d, &b)| d < 0 || d > b)
        {
            return None;
        }
        let shape = ArrayShape::new(self.ty(), dims);
        let mut data = Vec::with_capacity(shape.num_elements() as usize * self.ty().byte_size());
        let mut rest_zero = true;
        let mut index = vec![0i64; dims.len()];
        for i in 0..self.len() {
            let e = self.element_bytes(i);
            if index.iter().zip(dims).all(|(x, s)| x < s) {
                data.extend_from_slice(e);
            } else {
                rest_zero &= e.iter().all(|&b| b == 0);
            }
            for d in (0..index.len()).rev() {
                index[d] += 1;
                if index[d] < bound[d] {
                    break;
                }
                index[d] = 0;
            }
        }
        Some((ArrayLiteral { shape, data }, rest_zero))
    }

    /// Element `i` as `f64` (integers converted, pred as 0/1, complex: the real part).
    pub fn get_f64(&self, i: usize) -> f64 {
        element_to_f64(self.ty(), self.element_bytes(i))
    }

    /// Element `i` as `i128` for integer and pred types (floats truncate toward zero).
    pub fn get_i128(&self, i: usize) -> i128 {
        element_to_i128(self.ty(), self.element_bytes(i))
    }

    /// An array of shape `dims` holding `values` in row-major order; the element type is
    /// `T::TYPE` (`bool` is `pred`, `half::bf16` is `bf16`, `u16` is `u16`).
    ///
    /// # Panics
    ///
    /// If a dimension is negative or `values.len()` is not the product of `dims`.
    pub fn from_slice<T: NativeElement>(dims: &[i64], values: &[T]) -> ArrayLiteral {
        assert!(
            dims.iter().all(|d| *d >= 0),
            "negative dimension in {dims:?}"
        );
        let n: i64 = dims.iter().product();
        assert_eq!(
            values.len() as i64,
            n,
            "{} values given for dimensions {dims:?}",
            values.len()
        );
        let mut data = Vec::with_capacity(values.len() * T::TYPE.byte_size());
        for v in values {
            v.write_le(&mut data);
        }
        ArrayLiteral {
            shape: ArrayShape::new(T::TYPE, dims),
            data,
        }
    }

    /// [`ArrayLiteral::from_slice`] that returns an error instead of panicking when a dimension
    /// is negative or `values.len()` is not the product of `dims`.
    pub fn try_from_slice<T: NativeElement>(
        dims: &[i64],
        values: &[T],
    ) -> Result<ArrayLiteral, LiteralError> {
        let (n, _) = checked_size(T::TYPE, dims)?;
        if values.len() != n {
            return Err(LiteralError::Length {
                ty: T::TYPE,
                dims: dims.to_vec(),
                expected: n,
                got: values.len(),
                unit: "values",
            });
        }
        Ok(ArrayLiteral::from_slice(dims, values))
    }

    /// A scalar (rank 0) array holding `value`.
    pub fn scalar<T: NativeElement>(value: T) -> ArrayLiteral {
        ArrayLiteral::from_slice(&[], &[value])
    }

    /// The elements in row-major order, or `None` if the element type is not `T::TYPE`.
    pub fn to_vec<T: NativeElement>(&self) -> Option<Vec<T>> {
        if self.ty() != T::TYPE {
            return None;
        }
        let w = T::TYPE.byte_size();
        Some(self.data.chunks_exact(w).map(T::read_le).collect())
    }

    /// Every element as `f64`, as [`ArrayLiteral::get_f64`] converts them (complex: the real
    /// part).
    pub fn to_f64_vec(&self) -> Vec<f64> {
        let ty = self.ty();
        self.data
            .chunks_exact(ty.byte_size())
            .map(|b| element_to_f64(ty, b))
            .collect()
    }
}

impl Literal {
    /// The bytes of data its array leaves hold.
    pub fn byte_len(&self) -> usize {
        match self {
            Literal::Array(a) => a.data.len(),
            Literal::Tuple(es) => es.iter().map(Literal::byte_len).sum(),
        }
    }

    /// The array leaves, depth-first.
    pub fn into_leaves(self) -> Vec<ArrayLiteral> {
        match self {
            Literal::Array(a) => vec![a],
            Literal::Tuple(es) => es.into_iter().flat_map(Literal::into_leaves).collect(),
        }
    }

    /// The array, if this is one.
    pub fn as_array(&self) -> Option<&ArrayLiteral> {
        match self {
            Literal::Array(a) => Some(a),
            Literal::Tuple(_) => None,
        }
    }

    /// A scalar literal from an `f64`, rounded to `ty`.
    pub fn scalar_f64(ty: ElementType, v: f64) -> Literal {
        let mut a = ArrayLiteral::zeros(ArrayShape::new(ty, &[]));
        a.data = f64_to_element(ty, v);
        Literal::Array(a)
    }
}

/// A Rust type that holds one element of an [`ElementType`] in its natural representation.
pub trait NativeElement: Copy {
    /// The element type this Rust type represents.
    const TYPE: ElementType;
    /// Appends the element's little-endian bytes.
    fn write_le(self, out: &mut Vec<u8>);
    /// Decodes an element from exactly `TYPE.byte_size()` little-endian bytes.
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! native_elements {
    ($($t:ty => $ty:ident;)*) => {$(
        impl NativeElement for $t {
            const TYPE: ElementType = ElementType::$ty;
            fn write_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element width"))
            }
        }
    )*};
}

native_elements! {
    i8 => S8;
    i16 => S16;
    i32 => S32;
    i64 => S64;
    u8 => U8;
    u16 => U16;
    u32 => U32;
    u64 => U64;
    f16 => F16;
    bf16 => BF16;
    f32 => F32;
    f64 => F64;
}

impl NativeElement for bool {
    const TYPE: ElementType = ElementType::Pred;
    fn write_le(self, out: &mut Vec<u8>) {
        out.push(self as u8);
    }
    fn read_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
}

/// Decodes one element as `f64`.
pub fn element_to_f64(ty: ElementType, b: &[u8]) -> f64 {
    use ElementType::*;
    match ty {
        Pred => (b[0] != 0) as u8 as f64,
        F16 => f16::from_le_bytes([b[0], b[1]]).to_f64(),
        BF16 => bf16::from_le_bytes([b[0], b[1]]).to_f64(),
        F32 | C64 => f32::from_le_bytes(b[..4].try_into().unwrap()) as f64,
        F64 | C128 => f64::from_le_bytes(b[..8].try_into().unwrap()),
        t if t.is_float() => minifloat_to_f64(t, b[0]),
        _ => element_to_i128(ty, b) as f64,
    }
}

/// Decodes one integer or pred element.
pub fn element_to_i128(ty: ElementType, b: &[u8]) -> i128 {
    use ElementType::*;
    match ty {
        Pred => (b[0] != 0) as i128,
        S2 => (((b[0] as i8) << 6) >> 6) as i128,
        S4 => (((b[0] as i8) << 4) >> 4) as i128,
        S8 => b[0] as i8 as i128,
        S16 => i16::from_le_bytes([b[0], b[1]]) as i128,
        S32 => i32::from_le_bytes(b[..4].try_into().unwrap()) as i128,
        S64 => i64::from_le_bytes(b[..8].try_into().unwrap()) as i128,
        U2 => (b[0] & 3) as i128,
        U4 => (b[0] & 15) as i128,
        U8 => b[0] as i128,
        U16 => u16::from_le_bytes([b[0], b[1]]) as i128,
        U32 => u32::from_le_bytes(b[..4].try_into().unwrap()) as i128,
        U64 => u64::from_le_bytes(b[..8].try_into().unwrap()) as i128,
        _ => element_to_f64(ty, b) as i128,
    }
}

/// Encodes an integer as an element of integer or pred type `ty` (wrapping).
pub fn i128_to_element(ty: ElementType, v: i128) -> Vec<u8> {
    use ElementType::*;
    match ty {
        Pred => vec![(v != 0) as u8],
        S2 | U2 => vec![(v as u8) & 3],
        S4 | U4 => vec![(v as u8) & 15],
        S8 | U8 => vec![v as u8],
        S16 | U16 => (v as u16).to_le_bytes().to_vec(),
        S32 | U32 => (v as u32).to_le_bytes().to_vec(),
        S64 | U64 => (v as u64).to_le_bytes().to_vec(),
        _ => f64_to_element(ty, v as f64),
    }
}

/// Encodes an `f64` as an element of `ty`, rounding to nearest even (integers: truncation).
pub fn f64_to_element(ty: ElementType, v: f64) -> Vec<u8> {
    use ElementType::*;
    match ty {
        F16 => f16::from_f64(v).to_le_bytes().to_vec(),
        BF16 => bf16::from_f64(v).to_le_bytes().to_vec(),
        F32 => (v as f32).to_le_bytes().to_vec(),
        F64 => v.to_le_bytes().to_vec(),
        C64 => {
            let mut b = (v as f32).to_le_bytes().to_vec();
            b.extend_from_slice(&0f32.to_le_bytes());
            b
        }
        C128 => {
            let mut b = v.to_le_bytes().to_vec();
            b.extend_from_slice(&0f64.to_le_bytes());
            b
        }
        t if t.is_float() => vec![f64_to_minifloat(t, v)],
        t => i128_to_element(t, v as i128),
    }
}

/// Parameters of the small float formats: (exponent bits, mantissa bits, bias, has_inf,
/// nan_mode) where nan_mode 0 = IEEE (all-ones exponent), 1 = only all-ones pattern (fn),
/// 2 = negative zero pattern (fnuz), 3 = no NaN except 0xff (e8m0).
fn minifloat_params(t: ElementType) -> (u32, u32, i32, bool, u8) {
    use ElementType::*;
    match t {
        F8E5M2 => (5, 2, 15, true, 0),
        F8E4M3 => (4, 3, 7, true, 0),
        F8E4M3FN => (4, 3, 7, false, 1),
        F8E4M3B11FNUZ => (4, 3, 11, false, 2),
        F8E5M2FNUZ => (5, 2, 16, false, 2),
        F8E4M3FNUZ => (4, 3, 8, false, 2),
        F8E3M4 => (3, 4, 3, true, 0),
        F8E8M0FNU => (8, 0, 127, false, 3),
        F4E2M1FN => (2, 1, 1, false, 4),
        _ => unreachable!("not a small float type"),
    }
}

/// Decodes a small float (f8 variants, f4e2m1fn).
pub fn minifloat_to_f64(t: ElementType, b: u8) -> f64 {
    let (eb, mb, bias, has_inf, nan_mode) = minifloat_params(t);
    let total = 1 + eb + mb;
    let signed = t != ElementType::F8E8M0FNU;
    let bits = if total < 8 {
        b & ((1u16 << total) - 1) as u8
    } else {
        b
    };
    let sign = if signed && (bits >> (eb + mb)) & 1 == 1 {
        -1.0
    } else {
        1.0
    };
    let exp = ((bits >> mb) as u32) & ((1 << eb) - 1);
    let man = (bits as u32) & ((1 << mb) - 1);
    let emax = (1u32 << eb) - 1;
    match nan_mode {
        0 if exp == emax => {
            return if man == 0 && has_inf {
                sign * f64::INFINITY
            } else {
                f64::NAN
            };
        }
        1 if exp == emax && man == (1 << mb) - 1 => return f64::NAN,
        2 if bits == 0x80 => return f64::NAN,
        3 if bits == 0xff => return f64::NAN,
        _ => {}
    }
    if nan_mode == 3 {
        return 2f64.powi(exp as i32 - bias);
    }
    if exp == 0 {
        sign * (man as f64) * 2f64.powi(1 - bias - mb as i32)
    } else {
        sign * (1.0 + man as f64 / (1u32 << mb) as f64) * 2f64.powi(exp as i32 - bias)
    }
}

/// Encodes a small float by searching the nearest representable value (ties to even).
pub fn f64_to_minifloat(t: ElementType, v: f64) -> u8 {
    // f8e8m0fnu has neither zero nor a sign: zero and negative values are NaN, as ml_dtypes
    // (and so XLA) converts them, and as the evaluator's `convert` does.
    if t == ElementType::F8E8M0FNU && v <= 0.0 {
        return 0xff;
    }
    let (eb, mb, _, _, nan_mode) = minifloat_params(t);
    let total = 1 + eb + mb;
    let count = 1u32 << total;
    if v.is_nan() {
        // The NaN a conversion produces, as ml_dtypes (so XLA) gives it for a positive NaN and
        // the cpu backend for any: the quiet NaN with only the top mantissa bit set (IEEE-like
        // types: e4m3 0x7c, e5m2 0x7e, e3m4 0x78), all ones below the sign (e4m3fn 0x7f), the
        // negative-zero pattern (fnuz 0x80; f4e2m1fn, which has no NaN, 0x8), 0xff (e8m0fnu).
        let emax = (1u32 << eb) - 1;
        return match nan_mode {
            0 => ((emax << mb) | (1 << (mb - 1))) as u8,
            1 => ((1u32 << (eb + mb)) - 1) as u8,
            3 => 0xff,
            _ => (1u32 << (eb + mb)) as u8,
        };
    }
    let mut best: Option<(u8, f64)> = None;
    for b in 0..count {
        let b = b as u8;
        let x = minifloat_to_f64(t, b);
        if x.is_nan() {
            continue;
        }
        if x == v && (x != 0.0 || x.is_sign_negative() == v.is_sign_negative()) {
            return b;
        }
        let d = (x - v).abs();
        let better = match best {
            None => true,
            Some((bb, bd)) => d < bd || (d == bd && (b & 1) == 0 && (bb & 1) == 1),
        };
        if better && !d.is_nan() {
            best = Some((b, d));
        }
    }
    best.map(|(b, _)| b).unwrap_or(0)
}

/// Formats a float the way the printer writes it: shortest text that reads back to the same value
/// at type `ty`, with `inf`, `-inf` and `nan`.
pub fn format_float(v: f64, ty: ElementType) -> String {
    if v.is_nan() {
        return if v.is_sign_negative() {
            "-nan".into()
        } else {
            "nan".into()
        };
    }
    if v.is_infinite() {
        return if v < 0.0 { "-inf".into() } else { "inf".into() };
    }
    match ty {
        ElementType::F64 | ElementType::C128 => shortest(v),
        _ => shortest_f32(v as f32),
    }
}

fn shortest(v: f64) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

fn shortest_f32(v: f32) -> String {
    let a = v.abs();
    if a != 0.0 && !(1e-4..1e16).contains(&a) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

/// Formats one element for HLO text.
pub fn format_element(ty: ElementType, b: &[u8]) -> String {
    use ElementType::*;
    match ty {
        Pred => if b[0] != 0 { "true" } else { "false" }.to_string(),
        C64 => {
            let re = f32::from_le_bytes(b[..4].try_into().unwrap()) as f64;
            let im = f32::from_le_bytes(b[4..8].try_into().unwrap()) as f64;
            format!("({}, {})", format_float(re, F32), format_float(im, F32))
        }
        C128 => {
            let re = f64::from_le_bytes(b[..8].try_into().unwrap());
            let im = f64::from_le_bytes(b[8..16].try_into().unwrap());
            format!("({}, {})", format_float(re, F64), format_float(im, F64))
        }
        t if t.is_float() => format_float(element_to_f64(t, b), t),
        t => element_to_i128(t, b).to_string(),
    }
}

/// Why a token of HLO text is not an element of its type ([`parse_element`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ElementTextError {
    /// A `pred` token other than `true`, `false`, `1` or `0`.
    #[error("expected a pred value (true or false), found '{0}'")]
    NotAPred(String),
    /// A `0x` token that is not hexadecimal.
    #[error("invalid integer '{0}'")]
    InvalidHex(String),
    /// A token that is no number of the type.
    #[error("invalid {} value '{token}'", .ty.name())]
    Invalid {
        /// The element type.
        ty: ElementType,
        /// The token.
        token: String,
    },
    /// An integer outside the type's range.
    #[error("value {token} is out of range for {}", .ty.name())]
    OutOfRange {
        /// The element type.
        ty: ElementType,
        /// The token.
        token: String,
    },
}

impl From<ElementTextError> for String {
    fn from(e: ElementTextError) -> String {
        e.to_string()
    }
}

/// Parses one scalar token of HLO text (`1`, `-2.5e3`, `inf`, `-nan`, `true`) as an element of
/// `ty`. Complex values come as a `(re, im)` pair through [`complex_to_element`].
pub fn parse_element(ty: ElementType, tok: &str) -> Result<Vec<u8>, ElementTextError> {
    if ty.is_pred() {
        return match tok {
            "true" | "1" => Ok(vec![1]),
            "false" | "0" => Ok(vec![0]),
            _ => Err(ElementTextError::NotAPred(tok.to_string())),
        };
    }
    let invalid = || ElementTextError::Invalid {
        ty,
        token: tok.to_string(),
    };
    if ty.is_int() {
        let v: i128 = if let Some(h) = tok.strip_prefix("0x") {
            i128::from_str_radix(h, 16)
                .map_err(|_| ElementTextError::InvalidHex(tok.to_string()))?
        } else {
            tok.parse().map_err(|_| invalid())?
        };
        // XLA reads an integer token as an i64 and casts it to u64 before checking the range,
        // so a negative u64 value wraps (`u64[] constant(-1)` is 2^64 - 1); no narrower
        // unsigned type takes one.
        let v = if ty == ElementType::U64 && (i128::from(i64::MIN)..0).contains(&v) {
            v + (1i128 << 64)
        } else {
            v
        };
        let (lo, hi): (i128, i128) = if ty.is_signed_int() {
            let b = ty.bits();
            (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
        } else {
            (0, (1i128 << ty.bits()) - 1)
        };
        if v < lo || v > hi {
            return Err(ElementTextError::OutOfRange {
                ty,
                token: tok.to_string(),
            });
        }
        return Ok(i128_to_element(ty, v));
    }
    let v = parse_float(tok).ok_or_else(invalid)?;
    if ty == ElementType::F32 && v.is_finite() {
        // Parse f32 directly: rounding through f64 first can round twice.
        if let Ok(x) = tok.parse::<f32>() {
            return Ok(x.to_le_bytes().to_vec());
        }
    }
    Ok(f64_to_element(ty, v))
}

/// Encodes a complex `(re, im)` pair.
pub fn complex_to_element(ty: ElementType, re: f64, im: f64) -> Vec<u8> {
    match ty {
        ElementType::C64 => {
            let mut b = (re as f32).to_le_bytes().to_vec();
            b.extend_from_slice(&(im as f32).to_le_bytes());
            b
        }
        _ => {
            let mut b = re.to_le_bytes().to_vec();
            b.extend_from_slice(&im.to_le_bytes());
            b
        }
    }
}

/// Parses a float token: decimal, exponent, `inf`, `-inf`, `nan`, `-nan`, `nan(0x...)`.
pub fn parse_float(tok: &str) -> Option<f64> {
    let (neg, t) = match tok.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, tok.strip_prefix('+').unwrap_or(tok)),
    };
    let v = if t == "inf" {
        f64::INFINITY
    } else if t == "nan" || t.starts_with("nan(") {
        f64::NAN
    } else if t.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        t.parse::<f64>().ok()?
    } else {
        return None;
    };
    Some(if neg { -v } else { v })
}
