//! Host arrays for the embedding API: [`ArrayRef`], a borrowed view of caller memory passed to
//! a run without copying, and [`Array`], an owned array whose memory is aligned for any element
//! type (64 bytes), used for results.
//!
//! Invariants: an array's element type and dimensions always agree with its bytes (static,
//! non-negative dimensions; exactly `elements x element size` bytes); the fields are private and
//! every constructor checks, returning an [`ArrayError`] rather than panicking. Typed access
//! ([`Array::as_slice`], [`ArrayRef::as_slice`]) checks the element type against the Rust type
//! ([`Element`]) and never reinterprets bits of another type.

use std::fmt;

use axle_codegen_cpu::HostBuffer;
use axle_ir::literal::checked_size;
use axle_ir::{ArrayLiteral, ArrayShape, ElementType, LiteralError, NativeElement};
use half::{bf16, f16};

/// Why an array could not be made or viewed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ArrayError {
    /// The dimensions and the data do not agree.
    Shape(LiteralError),
    /// The array holds another element type than the one asked for.
    Type {
        /// The type asked for.
        wanted: ElementType,
        /// The array's type.
        actual: ElementType,
    },
    /// The bytes are not aligned for the element type, so they cannot be viewed in place.
    Misaligned(ElementType),
    /// A `pred` array holds a byte other than 0 or 1, which is no `bool`.
    NotBool,
    /// The array is not contiguous in row-major order (an `ndarray` view with strides).
    NotContiguous,
    /// The system refused the memory (this many bytes).
    OutOfMemory(usize),
}

impl fmt::Display for ArrayError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ArrayError::Shape(e) => write!(f, "{e}"),
            ArrayError::Type { wanted, actual } => {
                write!(f, "the array holds {actual}, not {wanted}")
            }
            ArrayError::Misaligned(t) => {
                write!(f, "the bytes are not aligned for {t} elements")
            }
            ArrayError::NotBool => f.write_str("a pred array holds a byte other than 0 or 1"),
            ArrayError::NotContiguous => {
                f.write_str("the array is not contiguous in row-major order")
            }
            ArrayError::OutOfMemory(n) => {
                write!(f, "the system refused {n} bytes of memory for an array")
            }
        }
    }
}

impl std::error::Error for ArrayError {}

impl From<LiteralError> for ArrayError {
    fn from(e: LiteralError) -> Self {
        ArrayError::Shape(e)
    }
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type whose slices Axle reads and writes in place as the elements of an array:
/// `i8`...`i64`, `u8`...`u64`, `half::f16`, `half::bf16`, `f32`, `f64` and `bool` (`pred`).
/// Sealed: its byte layout must be exactly the element type's.
pub trait Element: NativeElement + sealed::Sealed + 'static {}

macro_rules! elements {
    ($($t:ty),*) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {}
    )*};
}
elements!(i8, i16, i32, i64, u8, u16, u32, u64, f16, bf16, f32, f64, bool);

/// The bytes of a slice of elements.
fn slice_bytes<T: Element>(values: &[T]) -> &[u8] {
    // SAFETY: every `Element` is a plain value of `size_of::<T>()` bytes without padding
    // (integers, floats, `half`'s `repr(transparent)` u16 wrappers, and `bool`), so its bytes
    // may be read as `u8`s for the slice's lifetime.
    unsafe {
        std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values))
    }
}

/// `bytes` as elements of `T`, if `ty` is `T`'s type, the bytes are aligned for it and (for
/// `bool`) every byte is 0 or 1.
fn typed<T: Element>(ty: ElementType, bytes: &[u8]) -> Result<&[T], ArrayError> {
    check_typed::<T>(ty, bytes)?;
    if bytes.is_empty() {
        return Ok(&[]);
    }
    // SAFETY: checked above: the type matches (so the length is a whole number of elements),
    // the pointer is aligned for `T`, and every bit pattern is a valid `T` (bytes of a `bool`
    // checked to be 0 or 1).
    Ok(unsafe {
        std::slice::from_raw_parts(
            bytes.as_ptr().cast::<T>(),
            bytes.len() / std::mem::size_of::<T>(),
        )
    })
}

fn typed_mut<T: Element>(ty: ElementType, bytes: &mut [u8]) -> Result<&mut [T], ArrayError> {
    check_typed::<T>(ty, bytes)?;
    if bytes.is_empty() {
        return Ok(&mut []);
    }
    // SAFETY: as in `typed`; the slice is borrowed mutably for the result's lifetime, and any
    // `T` written back is a valid element.
    Ok(unsafe {
        std::slice::from_raw_parts_mut(
            bytes.as_mut_ptr().cast::<T>(),
            bytes.len() / std::mem::size_of::<T>(),
        )
    })
}

fn check_typed<T: Element>(ty: ElementType, bytes: &[u8]) -> Result<(), ArrayError> {
    if ty != T::TYPE {
        return Err(ArrayError::Type {
            wanted: T::TYPE,
            actual: ty,
        });
    }
    if !bytes.is_empty() && !(bytes.as_ptr() as usize).is_multiple_of(std::mem::align_of::<T>()) {
        return Err(ArrayError::Misaligned(ty));
    }
    if ty == ElementType::Pred && bytes.iter().any(|&b| b > 1) {
        return Err(ArrayError::NotBool);
    }
    Ok(())
}

fn dims_bytes(ty: ElementType, dims: &[i64]) -> Result<usize, ArrayError> {
    Ok(checked_size(ty, dims)?.1)
}

fn length_error(ty: ElementType, dims: &[i64], expected: usize, got: usize) -> ArrayError {
    ArrayError::Shape(LiteralError::Length {
        ty,
        dims: dims.to_vec(),
        expected,
        got,
        unit: "bytes",
    })
}

/// Dimensions kept inline up to rank 8 (no allocation per view), on the heap beyond.
#[derive(Clone, Debug, PartialEq)]
enum Dims {
    Inline(u8, [i64; 8]),
    Heap(Vec<i64>),
}

impl Dims {
    fn new(d: &[i64]) -> Dims {
        if d.len() <= 8 {
            let mut a = [0; 8];
            a[..d.len()].copy_from_slice(d);
            Dims::Inline(d.len() as u8, a)
        } else {
            Dims::Heap(d.to_vec())
        }
    }

    fn as_slice(&self) -> &[i64] {
        match self {
            Dims::Inline(n, a) => &a[..*n as usize],
            Dims::Heap(v) => v,
        }
    }
}

/// A borrowed array: an element type, dimensions and the caller's row-major bytes. A run reads
/// it in place (the `cpu` backend copies only bytes that are not aligned for their type).
#[derive(Clone, Debug, PartialEq)]
pub struct ArrayRef<'a> {
    ty: ElementType,
    dims: Dims,
    bytes: &'a [u8],
}

impl<'a> ArrayRef<'a> {
    /// A view of `values` as an array of dimensions `dims` (row-major); fails unless `dims` are
    /// non-negative and their product is `values.len()`.
    pub fn new<T: Element>(values: &'a [T], dims: &[i64]) -> Result<ArrayRef<'a>, ArrayError> {
        ArrayRef::from_bytes(T::TYPE, dims, slice_bytes(values))
    }

    /// A view of `values` as a rank-1 array.
    pub fn vector<T: Element>(values: &'a [T]) -> ArrayRef<'a> {
        ArrayRef {
            ty: T::TYPE,
            dims: Dims::new(&[values.len() as i64]),
            bytes: slice_bytes(values),
        }
    }

    /// A view of one value as a scalar (rank 0) array.
    pub fn scalar<T: Element>(value: &'a T) -> ArrayRef<'a> {
        ArrayRef {
            ty: T::TYPE,
            dims: Dims::new(&[]),
            bytes: slice_bytes(std::slice::from_ref(value)),
        }
    }

    /// A view of raw row-major little-endian bytes as an array of type `ty` and dimensions
    /// `dims` (for any element type, `c64` and the small floats included); fails unless the
    /// byte count is exactly what the shape needs.
    pub fn from_bytes(
        ty: ElementType,
        dims: &[i64],
        bytes: &'a [u8],
    ) -> Result<ArrayRef<'a>, ArrayError> {
        let need = dims_bytes(ty, dims)?;
        if bytes.len() != need {
            return Err(length_error(ty, dims, need, bytes.len()));
        }
        Ok(ArrayRef {
            ty,
            dims: Dims::new(dims),
            bytes,
        })
    }

    /// The element type.
    pub fn ty(&self) -> ElementType {
        self.ty
    }

    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        self.dims.as_slice()
    }

    /// The shape.
    pub fn shape(&self) -> ArrayShape {
        ArrayShape::new(self.ty, self.dims())
    }

    /// The row-major bytes.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The elements, if they are of type `T` and aligned for it.
    pub fn as_slice<T: Element>(&self) -> Result<&'a [T], ArrayError> {
        typed(self.ty, self.bytes)
    }

    /// A copy as an IR literal.
    pub fn to_literal(&self) -> ArrayLiteral {
        ArrayLiteral::new(self.shape(), self.bytes.to_vec())
            .expect("an ArrayRef's bytes match its shape")
    }
}

impl<'a> From<&'a Array> for ArrayRef<'a> {
    fn from(a: &'a Array) -> ArrayRef<'a> {
        a.view()
    }
}

impl<'a> From<&'a ArrayLiteral> for ArrayRef<'a> {
    fn from(a: &'a ArrayLiteral) -> ArrayRef<'a> {
        ArrayRef {
            ty: a.ty(),
            dims: Dims::new(&a.shape.dims),
            bytes: &a.data,
        }
    }
}

/// An owned array in memory aligned for any element type (and 512-bit vectors): what a run
/// writes its results into, reusable across runs.
pub struct Array {
    shape: ArrayShape,
    buf: HostBuffer,
}

impl Array {
    /// An array of zeros of type `ty` and dimensions `dims`.
    pub fn zeros(ty: ElementType, dims: &[i64]) -> Result<Array, ArrayError> {
        let n = dims_bytes(ty, dims)?;
        Ok(Array {
            shape: ArrayShape::new(ty, dims),
            buf: HostBuffer::try_zeroed(n).ok_or(ArrayError::OutOfMemory(n))?,
        })
    }

    /// An array of zeros of shape `shape` (its layout is ignored: arrays are row-major).
    pub fn zeros_like(shape: &ArrayShape) -> Result<Array, ArrayError> {
        Array::zeros(shape.ty, &shape.dims)
    }

    /// A copy of `values` as an array of dimensions `dims`.
    pub fn from_slice<T: Element>(values: &[T], dims: &[i64]) -> Result<Array, ArrayError> {
        Array::from_bytes(T::TYPE, dims, slice_bytes(values))
    }

    /// A copy of raw row-major little-endian bytes as an array of type `ty`.
    pub fn from_bytes(ty: ElementType, dims: &[i64], bytes: &[u8]) -> Result<Array, ArrayError> {
        let need = dims_bytes(ty, dims)?;
        if bytes.len() != need {
            return Err(length_error(ty, dims, need, bytes.len()));
        }
        Ok(Array {
            shape: ArrayShape::new(ty, dims),
            buf: HostBuffer::try_from_bytes(bytes).ok_or(ArrayError::OutOfMemory(need))?,
        })
    }

    /// A copy of an IR literal.
    pub fn from_literal(l: &ArrayLiteral) -> Array {
        Array {
            shape: ArrayShape::new(l.ty(), &l.shape.dims),
            buf: HostBuffer::from_bytes(&l.data),
        }
    }

    /// A copy as an IR literal.
    pub fn to_literal(&self) -> ArrayLiteral {
        ArrayLiteral::new(self.shape.clone(), self.bytes().to_vec())
            .expect("an Array's bytes match its shape")
    }

    /// The shape (row-major).
    pub fn shape(&self) -> &ArrayShape {
        &self.shape
    }

    /// The element type.
    pub fn ty(&self) -> ElementType {
        self.shape.ty
    }

    /// The dimensions.
    pub fn dims(&self) -> &[i64] {
        &self.shape.dims
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.shape.num_elements() as usize
    }

    /// Whether the array has no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The row-major bytes.
    pub fn bytes(&self) -> &[u8] {
        self.buf.bytes()
    }

    /// The row-major bytes, writable (the length cannot change).
    pub fn bytes_mut(&mut self) -> &mut [u8] {
        self.buf.bytes_mut()
    }

    /// The elements in place, if the array holds `T`'s element type.
    pub fn as_slice<T: Element>(&self) -> Result<&[T], ArrayError> {
        typed(self.shape.ty, self.buf.bytes())
    }

    /// The elements in place, writable, if the array holds `T`'s element type.
    pub fn as_mut_slice<T: Element>(&mut self) -> Result<&mut [T], ArrayError> {
        typed_mut(self.shape.ty, self.buf.bytes_mut())
    }

    /// A copy of the elements, if the array holds `T`'s element type.
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>, ArrayError> {
        Ok(self.as_slice::<T>()?.to_vec())
    }

    /// A borrowed view, to pass this array as an argument.
    pub fn view(&self) -> ArrayRef<'_> {
        ArrayRef {
            ty: self.shape.ty,
            dims: Dims::new(&self.shape.dims),
            bytes: self.buf.bytes(),
        }
    }
}

impl Clone for Array {
    fn clone(&self) -> Array {
        Array {
            shape: self.shape.clone(),
            buf: HostBuffer::from_bytes(self.buf.bytes()),
        }
    }
}

impl PartialEq for Array {
    fn eq(&self, o: &Array) -> bool {
        self.shape.ty == o.shape.ty && self.shape.dims == o.shape.dims && self.bytes() == o.bytes()
    }
}

impl fmt::Debug for Array {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Array({}{:?})", self.shape.ty, self.shape.dims)
    }
}

impl AsMut<[u8]> for Array {
    fn as_mut(&mut self) -> &mut [u8] {
        self.buf.bytes_mut()
    }
}

#[cfg(feature = "ndarray")]
mod ndarray_interop {
    //! Views between [`Array`]/[`ArrayRef`] and `ndarray`'s arrays (the `ndarray` feature).
    use super::*;
    use ndarray::{ArrayViewD, ArrayViewMutD, IxDyn};

    fn ix(dims: &[i64]) -> IxDyn {
        IxDyn(&dims.iter().map(|&d| d as usize).collect::<Vec<_>>())
    }

    impl<'a> ArrayRef<'a> {
        /// A view of a standard-layout (row-major, contiguous) `ndarray` view.
        pub fn from_ndarray<T: Element, D: ndarray::Dimension>(
            a: ndarray::ArrayView<'a, T, D>,
        ) -> Result<ArrayRef<'a>, ArrayError> {
            let dims: Vec<i64> = a.shape().iter().map(|&d| d as i64).collect();
            let values = a.to_slice().ok_or(ArrayError::NotContiguous)?;
            ArrayRef::from_bytes(T::TYPE, &dims, slice_bytes(values))
        }

        /// This view as an `ndarray` view, if it holds `T`.
        pub fn as_ndarray<T: Element>(&self) -> Result<ArrayViewD<'a, T>, ArrayError> {
            let s = self.as_slice::<T>()?;
            Ok(ArrayViewD::from_shape(ix(self.dims()), s).expect("dims match the length"))
        }
    }

    impl Array {
        /// This array as an `ndarray` view, if it holds `T`.
        pub fn as_ndarray<T: Element>(&self) -> Result<ArrayViewD<'_, T>, ArrayError> {
            let d = ix(self.dims());
            let s = self.as_slice::<T>()?;
            Ok(ArrayViewD::from_shape(d, s).expect("dims match the length"))
        }

        /// This array as a writable `ndarray` view, if it holds `T`.
        pub fn as_ndarray_mut<T: Element>(&mut self) -> Result<ArrayViewMutD<'_, T>, ArrayError> {
            let d = ix(self.dims());
            let s = self.as_mut_slice::<T>()?;
            Ok(ArrayViewMutD::from_shape(d, s).expect("dims match the length"))
        }
    }
}
