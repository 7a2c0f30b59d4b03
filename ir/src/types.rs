//! Element types, array and tuple shapes, and layouts.
//!
//! Shapes and layouts are kept apart, as in XLA's own split between `Shape` and `Layout`: a
//! [`Shape`] says what a value is (element type, dimensions, bounded dynamic dimensions, tuple
//! structure) and a [`Layout`] says how an array is laid out in memory (minor-to-major order,
//! tiling, memory space). Both are interned by the module into [`crate::ShapeId`] and
//! [`crate::LayoutId`] columns.

use std::fmt;

macro_rules! element_types {
    ($($variant:ident => $name:literal, $bits:expr, $doc:literal;)*) => {
        /// The element type of an array.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(u8)]
        pub enum ElementType {
            $(#[doc = $doc] $variant,)*
        }

        impl ElementType {
            /// Every element type, in declaration order.
            pub const ALL: &'static [ElementType] = &[$(ElementType::$variant,)*];

            /// The name HLO text uses for this type (`f32`, `bf16`, `pred`, ...).
            pub fn name(self) -> &'static str {
                match self { $(ElementType::$variant => $name,)* }
            }

            /// The type named `s` in HLO text, if there is one.
            pub fn from_name(s: &str) -> Option<ElementType> {
                match s { $($name => Some(ElementType::$variant),)* _ => None }
            }

            /// Width of one element in bits (pred counts as 8, as XLA stores it).
            pub fn bits(self) -> u32 {
                match self { $(ElementType::$variant => $bits,)* }
            }
        }
    };
}

element_types! {
    Pred => "pred", 8, "Boolean, stored as one byte.";
    S2 => "s2", 2, "Signed 2-bit integer.";
    S4 => "s4", 4, "Signed 4-bit integer.";
    S8 => "s8", 8, "Signed 8-bit integer.";
    S16 => "s16", 16, "Signed 16-bit integer.";
    S32 => "s32", 32, "Signed 32-bit integer.";
    S64 => "s64", 64, "Signed 64-bit integer.";
    U2 => "u2", 2, "Unsigned 2-bit integer.";
    U4 => "u4", 4, "Unsigned 4-bit integer.";
    U8 => "u8", 8, "Unsigned 8-bit integer.";
    U16 => "u16", 16, "Unsigned 16-bit integer.";
    U32 => "u32", 32, "Unsigned 32-bit integer.";
    U64 => "u64", 64, "Unsigned 64-bit integer.";
    F16 => "f16", 16, "IEEE half precision.";
    BF16 => "bf16", 16, "bfloat16.";
    F32 => "f32", 32, "IEEE single precision.";
    F64 => "f64", 64, "IEEE double precision.";
    C64 => "c64", 64, "Complex with f32 parts.";
    C128 => "c128", 128, "Complex with f64 parts.";
    F8E5M2 => "f8e5m2", 8, "8-bit float, 5 exponent and 2 mantissa bits.";
    F8E4M3 => "f8e4m3", 8, "8-bit float, IEEE-like E4M3.";
    F8E4M3FN => "f8e4m3fn", 8, "8-bit float E4M3, finite only.";
    F8E4M3B11FNUZ => "f8e4m3b11fnuz", 8, "8-bit float E4M3, bias 11, finite, unsigned zero.";
    F8E5M2FNUZ => "f8e5m2fnuz", 8, "8-bit float E5M2, finite, unsigned zero.";
    F8E4M3FNUZ => "f8e4m3fnuz", 8, "8-bit float E4M3, finite, unsigned zero.";
    F8E3M4 => "f8e3m4", 8, "8-bit float, 3 exponent and 4 mantissa bits.";
    F8E8M0FNU => "f8e8m0fnu", 8, "8-bit exponent-only float (scale type).";
    F4E2M1FN => "f4e2m1fn", 4, "4-bit float E2M1, finite only.";
}

impl ElementType {
    /// Whether this is `pred`.
    pub fn is_pred(self) -> bool {
        self == ElementType::Pred
    }

    /// Whether this is a signed integer type.
    pub fn is_signed_int(self) -> bool {
        use ElementType::*;
        matches!(self, S2 | S4 | S8 | S16 | S32 | S64)
    }

    /// Whether this is an unsigned integer type.
    pub fn is_unsigned_int(self) -> bool {
        use ElementType::*;
        matches!(self, U2 | U4 | U8 | U16 | U32 | U64)
    }

    /// Whether this is a signed or unsigned integer type (not pred).
    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    /// Whether this is a real floating-point type (f8 variants included).
    pub fn is_float(self) -> bool {
        use ElementType::*;
        matches!(
            self,
            F16 | BF16
                | F32
                | F64
                | F8E5M2
                | F8E4M3
                | F8E4M3FN
                | F8E4M3B11FNUZ
                | F8E5M2FNUZ
                | F8E4M3FNUZ
                | F8E3M4
                | F8E8M0FNU
                | F4E2M1FN
        )
    }

    /// Whether this is a complex type.
    pub fn is_complex(self) -> bool {
        matches!(self, ElementType::C64 | ElementType::C128)
    }

    /// Whether this is a float or complex type.
    pub fn is_floating(self) -> bool {
        self.is_float() || self.is_complex()
    }

    /// Bytes one element occupies in a dense host buffer (sub-byte types take one byte each).
    pub fn byte_size(self) -> usize {
        (self.bits() as usize).div_ceil(8)
    }

    /// The real component type of a complex type (`c64` → `f32`), or the type itself.
    pub fn component_type(self) -> ElementType {
        match self {
            ElementType::C64 => ElementType::F32,
            ElementType::C128 => ElementType::F64,
            t => t,
        }
    }
}

impl fmt::Display for ElementType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A shape without layout: an array, a tuple, a token or an opaque value.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Shape {
    /// A dense array.
    Array(ArrayShape),
    /// A tuple of shapes, each interned.
    Tuple(Box<[crate::ShapeId]>),
    /// The token type used to order side effects.
    Token,
    /// An opaque value (only passed through).
    Opaque,
}

/// The shape of a dense array: element type, dimension sizes and which of them are bounded dynamic.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ArrayShape {
    /// The element type.
    pub ty: ElementType,
    /// Dimension sizes; for a dynamic dimension, its bound.
    pub dims: Box<[i64]>,
    /// One flag per dimension: `true` where the dimension is bounded dynamic (`<=N` in text).
    pub dynamic: Box<[bool]>,
}

impl ArrayShape {
    /// A static array shape.
    pub fn new(ty: ElementType, dims: &[i64]) -> ArrayShape {
        ArrayShape {
            ty,
            dims: dims.into(),
            dynamic: vec![false; dims.len()].into(),
        }
    }

    /// The number of dimensions.
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// The number of elements (product of the dimension sizes, 1 for a scalar). Meaningful for
    /// shapes that pass [`ArrayShape::validate`]; see [`ArrayShape::byte_size`] for a checked
    /// size.
    pub fn num_elements(&self) -> i64 {
        self.dims.iter().product()
    }

    /// Whether any dimension is dynamic.
    pub fn is_dynamic(&self) -> bool {
        self.dynamic.iter().any(|d| *d)
    }

    /// Whether some dimension is unbounded dynamic (`?` in text, stored as size -1).
    pub fn is_unbounded_dynamic(&self) -> bool {
        self.dims.iter().any(|&d| d < 0)
    }

    /// The bytes a dense host buffer of this shape takes (sub-byte types one byte per element),
    /// or `None` when a dimension is unbounded dynamic or the size does not fit in an `i64`.
    /// Zero-sized dimensions count as 1 in the overflow check (as XLA's `ValidateShapeSize`
    /// multiplies every extent), so a valid shape's element count never overflows whatever
    /// order its dimensions are multiplied in.
    pub fn byte_size(&self) -> Option<u64> {
        let mut bound: i64 = 1;
        let mut zero = false;
        for &d in self.dims.iter() {
            if d < 0 {
                return None;
            }
            zero |= d == 0;
            bound = bound.checked_mul(d.max(1))?;
        }
        let bytes = bound.checked_mul(self.ty.byte_size() as i64)?;
        Some(if zero { 0 } else { bytes as u64 })
    }

    /// Checks what XLA's `ShapeUtil::ValidateShape` checks of an array: one dynamic flag per
    /// dimension, sizes non-negative (or -1 for an unbounded dynamic dimension, which must be
    /// flagged dynamic), and an element count and byte size that fit in an `i64` (unbounded
    /// dimensions counted as 1).
    pub fn validate(&self) -> Result<(), ArrayShapeError> {
        if self.dynamic.len() != self.dims.len() {
            return Err(ArrayShapeError::DynamicFlags {
                flags: self.dynamic.len(),
                dims: self.dims.len(),
            });
        }
        let mut bound: i64 = 1;
        for (i, (&d, &dy)) in self.dims.iter().zip(self.dynamic.iter()).enumerate() {
            if d < 0 && !(d == -1 && dy) {
                return Err(ArrayShapeError::NegativeSize { dim: i, size: d });
            }
            bound = bound
                .checked_mul(d.max(1))
                .ok_or(ArrayShapeError::TooManyElements)?;
        }
        if bound.checked_mul(self.ty.byte_size() as i64).is_none() {
            return Err(ArrayShapeError::TooManyBytes);
        }
        Ok(())
    }
}

/// Why an array shape is not well formed ([`ArrayShape::validate`]); the message reads after
/// the shape ("f32[-2] dimension 0 has a negative size -2").
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ArrayShapeError {
    /// The dynamic flags are not one per dimension.
    #[error("has {flags} dynamic flags for {dims} dimensions")]
    DynamicFlags {
        /// The flags.
        flags: usize,
        /// The dimensions.
        dims: usize,
    },
    /// A size is negative (other than -1 flagged dynamic).
    #[error("dimension {dim} has a negative size {size}")]
    NegativeSize {
        /// The dimension.
        dim: usize,
        /// Its size.
        size: i64,
    },
    /// The element count overflows an `i64`.
    #[error("has more than {} elements", i64::MAX)]
    TooManyElements,
    /// The byte size overflows an `i64`.
    #[error("takes more than {} bytes", i64::MAX)]
    TooManyBytes,
}

impl From<ArrayShapeError> for String {
    fn from(e: ArrayShapeError) -> String {
        e.to_string()
    }
}

impl Shape {
    /// A static array shape.
    pub fn array(ty: ElementType, dims: &[i64]) -> Shape {
        Shape::Array(ArrayShape::new(ty, dims))
    }

    /// The array shape, if this is an array.
    pub fn as_array(&self) -> Option<&ArrayShape> {
        match self {
            Shape::Array(a) => Some(a),
            _ => None,
        }
    }

    /// Whether this is a tuple.
    pub fn is_tuple(&self) -> bool {
        matches!(self, Shape::Tuple(_))
    }
}

/// How an array is laid out in memory.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ArrayLayout {
    /// Dimension numbers from most minor to most major.
    pub minor_to_major: Box<[i64]>,
    /// Tiles, `T(8,128)(2,1)` in text: each tile is a list of sizes (`*` is stored as `i64::MIN`).
    pub tiles: Box<[Box<[i64]>]>,
    /// Memory space, `S(n)` in text.
    pub memory_space: Option<i64>,
    /// Any other layout items after the `:` (element size `E(n)`, index types, ...), kept verbatim.
    pub other: Option<Box<str>>,
}

/// A layout: none, an array layout, or one layout per tuple element.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub enum Layout {
    /// No layout was given (scalars, tokens, shapes before layout assignment).
    #[default]
    None,
    /// The layout of an array.
    Array(ArrayLayout),
    /// The layouts of a tuple's elements.
    Tuple(Box<[crate::LayoutId]>),
}

impl ArrayLayout {
    /// The default (row-major, descending) layout of rank `rank`.
    pub fn row_major(rank: usize) -> ArrayLayout {
        ArrayLayout {
            minor_to_major: (0..rank as i64).rev().collect(),
            ..Default::default()
        }
    }
}

/// Comparison direction of `compare`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ComparisonDirection {
    /// `==`
    Eq,
    /// `!=`
    Ne,
    /// `<`
    Lt,
    /// `<=`
    Le,
    /// `>`
    Gt,
    /// `>=`
    Ge,
}

impl ComparisonDirection {
    /// The text form (`EQ`, `LT`, ...).
    pub fn name(self) -> &'static str {
        use ComparisonDirection::*;
        match self {
            Eq => "EQ",
            Ne => "NE",
            Lt => "LT",
            Le => "LE",
            Gt => "GT",
            Ge => "GE",
        }
    }

    /// Parses the text form.
    pub fn from_name(s: &str) -> Option<Self> {
        use ComparisonDirection::*;
        Some(match s {
            "EQ" => Eq,
            "NE" => Ne,
            "LT" => Lt,
            "LE" => Le,
            "GT" => Gt,
            "GE" => Ge,
            _ => return None,
        })
    }
}

/// Comparison type of `compare` (`type=` in text).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ComparisonType {
    /// IEEE float comparison.
    Float,
    /// Total order on floats (-NaN < -inf < ... < -0 < +0 < ... < inf < NaN).
    TotalOrder,
    /// Signed integer comparison.
    Signed,
    /// Unsigned integer comparison.
    Unsigned,
}

impl ComparisonType {
    /// The text form.
    pub fn name(self) -> &'static str {
        match self {
            ComparisonType::Float => "FLOAT",
            ComparisonType::TotalOrder => "TOTALORDER",
            ComparisonType::Signed => "SIGNED",
            ComparisonType::Unsigned => "UNSIGNED",
        }
    }

    /// Parses the text form.
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "FLOAT" => ComparisonType::Float,
            "TOTALORDER" => ComparisonType::TotalOrder,
            "SIGNED" => ComparisonType::Signed,
            "UNSIGNED" => ComparisonType::Unsigned,
            _ => return None,
        })
    }

    /// The comparison type XLA uses by default for operands of type `ty`.
    pub fn default_for(ty: ElementType) -> Self {
        if ty.is_floating() {
            ComparisonType::Float
        } else if ty.is_unsigned_int() || ty.is_pred() {
            ComparisonType::Unsigned
        } else {
            ComparisonType::Signed
        }
    }
}

/// Kind of a fusion instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FusionKind {
    /// Elementwise loop fusion.
    Loop,
    /// Input (reduction) fusion.
    Input,
    /// Output fusion (dot or convolution with its consumers).
    Output,
    /// Backend-specific fusion.
    Custom,
}

impl FusionKind {
    /// The text form (`kLoop`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FusionKind::Loop => "kLoop",
            FusionKind::Input => "kInput",
            FusionKind::Output => "kOutput",
            FusionKind::Custom => "kCustom",
        }
    }

    /// Parses the text form.
    pub fn from_name(s: &str) -> Option<Self> {
        Some(match s {
            "kLoop" => FusionKind::Loop,
            "kInput" => FusionKind::Input,
            "kOutput" => FusionKind::Output,
            "kCustom" => FusionKind::Custom,
            _ => return None,
        })
    }
}
