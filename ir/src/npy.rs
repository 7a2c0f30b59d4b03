//! Reading and writing NumPy `.npy` files as [`ArrayLiteral`]s.
//!
//! The `.npy` format is a magic string (`\x93NUMPY`), a version, a little-endian header length,
//! a header that is a Python dict literal (`{'descr': '<f4', 'fortran_order': False,
//! 'shape': (16, 64), }`) padded with spaces to a multiple of 64 bytes, and then the raw element
//! bytes. The header is parsed with the `py_literal` crate (the Python-literal parser `npyz` uses);
//! everything after it is checked here with checked arithmetic, so a malformed or hostile file is
//! an [`NpyError`], never a panic or an oversized allocation.
//!
//! Supported dtypes: `bool` (`pred`), `int8`..`int64` (`s8`..`s64`), `uint8`..`uint64`
//! (`u8`..`u64`), `float16`, `float32`, `float64`, `complex64` and `complex128`. NumPy has no
//! bfloat16, so the corpus stores `bf16` arrays as `uint16` bit patterns: [`read_npy_as`] with
//! [`ElementType::BF16`] accepts a `uint16` file, and [`write_npy`] writes `bf16` as `<u2`.
//! NumPy has no 2- or 4-bit integers either: `s2`/`s4` travel as `int8` and `u2`/`u4` as
//! `uint8` files holding each element's value (not its bits), so [`read_npy_as`] with a
//! sub-byte type takes such a file and checks that every value fits the type (an
//! [`NpyErrorKind::OutOfRange`] naming the element otherwise), and [`write_npy`] writes their
//! values as `|i1` and `|u1`. In a literal a sub-byte element is one byte holding its low bits
//! (what [`crate::literal::i128_to_element`] writes).
//!
//! Big-endian files are converted to little-endian and `fortran_order` files are transposed to
//! row-major while reading, so a literal is always row-major little-endian. `bool` elements other
//! than 0 and 1 read as 1 (NumPy treats any non-zero byte as `True`).
//!
//! Writing produces exactly the bytes `numpy.save` (NumPy 2) produces for a C-ordered
//! little-endian array, header padding included, so files written here diff cleanly against the
//! corpus. [`write_npy`] writes to a temporary file in the destination directory and renames it
//! over the destination, so a failed write never leaves a partial file behind.

use crate::literal::{element_to_i128, ArrayLiteral};
use crate::memory::MemoryBudget;
use crate::types::{ArrayShape, ElementType};
use std::path::{Path, PathBuf};

/// The magic string every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// NumPy aligns the start of the data to this many bytes.
const ARRAY_ALIGN: usize = 64;

/// NumPy pads the header so that the first dimension can grow to this many digits in place.
const GROWTH_AXIS_MAX_DIGITS: usize = 21;

/// Deeper bracket nesting than this in a header is rejected before parsing; the parser recurses
/// once per level, and real headers nest at most three deep.
const MAX_HEADER_NESTING: usize = 32;

/// An error reading or writing a `.npy` file: the file's path and what went wrong.
#[derive(Debug, thiserror::Error)]
#[error("{}: {kind}", path.display())]
pub struct NpyError {
    /// The file that was being read or written.
    pub path: PathBuf,
    /// What went wrong.
    pub kind: NpyErrorKind,
}

/// What went wrong reading or writing `.npy` data.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum NpyErrorKind {
    /// The operating system reported an error.
    #[error("I/O error: {0}")]
    Io(std::io::Error),
    /// The data does not start with the `.npy` magic string.
    #[error("not a .npy file: it does not start with the magic string \\x93NUMPY")]
    NotNpy,
    /// The format version is not one this reader knows.
    #[error("unsupported .npy format version {major}.{minor} (supported: 1.0, 2.0 and 3.0)")]
    UnsupportedVersion {
        /// The major version byte.
        major: u8,
        /// The minor version byte.
        minor: u8,
    },
    /// The file ends inside the preamble or the header.
    #[error(
        "file is truncated: its header needs {needed} bytes but the file has only {available}"
    )]
    TruncatedHeader {
        /// Bytes needed up to the end of the header.
        needed: usize,
        /// Bytes the file has.
        available: usize,
    },
    /// The header is not a valid `.npy` header dict.
    #[error("malformed .npy header: {0}")]
    BadHeader(String),
    /// The header is valid but its dtype has no Axle element type.
    #[error("unsupported dtype {descr}: {reason}")]
    UnsupportedDtype {
        /// The dtype as written in the header.
        descr: String,
        /// Why it is not supported.
        reason: String,
    },
    /// The data is shorter than the shape and dtype require.
    #[error(
        "data is truncated: shape {dims:?} of dtype '{descr}' needs {expected} bytes of data but \
         the file has only {actual}"
    )]
    TruncatedData {
        /// The shape from the header.
        dims: Vec<i64>,
        /// The dtype from the header.
        descr: String,
        /// Bytes of data the shape and dtype need.
        expected: usize,
        /// Bytes of data the file has.
        actual: usize,
    },
    /// The data is longer than the shape and dtype require.
    #[error(
        "unexpected trailing data: shape {dims:?} of dtype '{descr}' needs {expected} bytes of \
         data but the file has {actual}"
    )]
    TrailingData {
        /// The shape from the header.
        dims: Vec<i64>,
        /// The dtype from the header.
        descr: String,
        /// Bytes of data the shape and dtype need.
        expected: usize,
        /// Bytes of data the file has.
        actual: usize,
    },
    /// [`read_npy_as`] found a dtype other than the one asked for.
    #[error("expected element type {expected} ({}) but the file holds {found} ('{descr}')",
        npy_descr(*expected).map_or("no .npy dtype".to_string(), |d| format!("'{d}'")))]
    DtypeMismatch {
        /// The element type asked for.
        expected: ElementType,
        /// The element type the file holds.
        found: ElementType,
        /// The dtype as written in the header.
        descr: String,
    },
    /// The element type has no `.npy` dtype (the 8-bit and 4-bit floats).
    #[error("element type {0} has no .npy dtype (convert it to a wider type first)")]
    UnwritableType(ElementType),
    /// [`read_npy_as`] read a value that the sub-byte element type asked for cannot hold.
    #[error(
        "element {flat} (index {index:?}) holds {value}, outside the range of {ty} [{}, {}]",
        sub_byte_range(*ty).0, sub_byte_range(*ty).1
    )]
    OutOfRange {
        /// The element type asked for.
        ty: ElementType,
        /// The element's position in row-major order.
        flat: usize,
        /// The element's index, one entry per dimension.
        index: Vec<i64>,
        /// The value the file holds there.
        value: i64,
    },
    /// The literal's shape and data disagree.
    #[error("invalid literal: {0}")]
    InvalidLiteral(String),
    /// The data does not fit under the memory ceiling, or the system refused it.
    #[error("{0}")]
    Memory(crate::memory::MemoryError),
    /// The memory ceiling (`AXLE_MEMORY_LIMIT`) is not a size.
    #[error("{0}")]
    BadLimit(crate::memory::MemoryLimitError),
}

/// How the elements of a file are ordered in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ByteOrder {
    Little,
    Big,
}

/// The parsed header of a `.npy` file.
#[derive(Clone, Debug, PartialEq)]
struct Header {
    /// The element type.
    ty: ElementType,
    /// The dtype as written.
    descr: String,
    /// The byte order of the data.
    order: ByteOrder,
    /// Whether the data is column-major.
    fortran_order: bool,
    /// The dimensions.
    dims: Vec<i64>,
    /// The number of elements.
    num_elements: usize,
    /// Where the data starts.
    data_offset: usize,
}

/// The `.npy` dtype Axle writes for `ty` (`bf16` as `<u2`, `s2`/`s4` as `|i1` and `u2`/`u4` as
/// `|u1`), or `None` if there is none.
pub fn npy_descr(ty: ElementType) -> Option<&'static str> {
    use ElementType::*;
    Some(match ty {
        Pred => "|b1",
        S2 | S4 | S8 => "|i1",
        S16 => "<i2",
        S32 => "<i4",
        S64 => "<i8",
        U2 | U4 | U8 => "|u1",
        U16 | BF16 => "<u2",
        U32 => "<u4",
        U64 => "<u8",
        F16 => "<f2",
        F32 => "<f4",
        F64 => "<f8",
        C64 => "<c8",
        C128 => "<c16",
        _ => return None,
    })
}

/// The type whose `.npy` files carry elements of `ty`: `u16` for `bf16`, `s8` for `s2` and
/// `s4`, `u8` for `u2` and `u4`, else `ty` itself.
fn carrier(ty: ElementType) -> ElementType {
    use ElementType::*;
    match ty {
        BF16 => U16,
        S2 | S4 => S8,
        U2 | U4 => U8,
        t => t,
    }
}

/// The values a 2- or 4-bit integer type holds, `(min, max)`.
fn sub_byte_range(ty: ElementType) -> (i64, i64) {
    let bits = ty.bits().min(8);
    if ty.is_signed_int() {
        (-(1 << (bits - 1)), (1 << (bits - 1)) - 1)
    } else {
        (0, (1 << bits) - 1)
    }
}

/// Turns a literal read from an `int8`/`uint8` file into one of sub-byte type `ty`, checking
/// every value against the type's range (row-major order, so the first bad element is named).
fn narrow(lit: &mut ArrayLiteral, ty: ElementType) -> Result<(), NpyErrorKind> {
    let (lo, hi) = sub_byte_range(ty);
    let signed = lit.shape.ty.is_signed_int();
    for (flat, b) in lit.data.iter_mut().enumerate() {
        let value = if signed { *b as i8 as i64 } else { *b as i64 };
        if value < lo || value > hi {
            let mut index = vec![0i64; lit.shape.dims.len()];
            let mut rest = flat as i64;
            for (k, &d) in lit.shape.dims.iter().enumerate().rev() {
                if d > 0 {
                    index[k] = rest % d;
                    rest /= d;
                }
            }
            return Err(NpyErrorKind::OutOfRange {
                ty,
                flat,
                index,
                value,
            });
        }
        *b &= (1u8 << ty.bits()) - 1;
    }
    lit.shape.ty = ty;
    Ok(())
}

/// Reads a `.npy` file as an array of the file's own dtype (`bf16` files read as `u16`).
///
/// The file is streamed: the magic string and header are read and checked first (so a file
/// that is not `.npy`, such as `/dev/zero`, fails after a few bytes), the data's size is
/// checked against the file's length and the memory ceiling ([`crate::memory`]) before
/// anything is allocated for it, and then exactly that many bytes are read.
pub fn read_npy(path: impl AsRef<Path>) -> Result<ArrayLiteral, NpyError> {
    let path = path.as_ref();
    let mut budget = MemoryBudget::new().map_err(|e| NpyError {
        path: path.to_path_buf(),
        kind: NpyErrorKind::BadLimit(e),
    })?;
    read_npy_within(path, None, &mut budget)
}

/// Reads a `.npy` file whose data must fit in `budget` (reserving it there), and whose dtype
/// must be `ty` when given (see [`read_npy_as`]); streamed as [`read_npy`] describes.
pub fn read_npy_within(
    path: impl AsRef<Path>,
    ty: Option<ElementType>,
    budget: &mut MemoryBudget,
) -> Result<ArrayLiteral, NpyError> {
    let path = path.as_ref();
    let with_path = |kind| NpyError {
        path: path.to_path_buf(),
        kind,
    };
    let (header, data) = read_stream(path, ty, budget).map_err(with_path)?;
    let mut lit = decode_payload(&header, data).map_err(with_path)?;
    match ty {
        Some(ty) if ty.bits() < 8 && ty.is_int() => narrow(&mut lit, ty).map_err(with_path)?,
        Some(ty) => lit.shape.ty = ty,
        None => {}
    }
    Ok(lit)
}

/// The largest header this reader accepts (NumPy itself refuses headers over 10,000 bytes
/// unless told otherwise).
const MAX_HEADER_BYTES: usize = 1 << 20;

/// Reads up to `buf.len()` bytes, stopping early only at the end of the file; returns how many.
fn read_full(f: &mut impl std::io::Read, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match f.read(&mut buf[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// Reads and checks the preamble and header, then the data (see [`read_npy`]).
fn read_stream(
    path: &Path,
    want: Option<ElementType>,
    budget: &mut MemoryBudget,
) -> Result<(Header, Vec<u8>), NpyErrorKind> {
    let mut f = std::fs::File::open(path).map_err(NpyErrorKind::Io)?;
    // The length of a regular file, known before reading (devices and pipes have none).
    let file_len = f
        .metadata()
        .ok()
        .filter(|md| md.is_file())
        .map(|md| md.len());
    let mut head = vec![0u8; 12];
    let got = read_full(&mut f, &mut head[..10]).map_err(NpyErrorKind::Io)?;
    let magic_len = got.min(MAGIC.len());
    if head[..magic_len] != MAGIC[..magic_len] {
        return Err(NpyErrorKind::NotNpy);
    }
    if got < 10 {
        return Err(NpyErrorKind::TruncatedHeader {
            needed: 10,
            available: got,
        });
    }
    let (text_start, text_len) = match (head[6], head[7]) {
        (1, 0) => (10, u16::from_le_bytes([head[8], head[9]]) as usize),
        (2, 0) | (3, 0) => {
            let more = read_full(&mut f, &mut head[10..12]).map_err(NpyErrorKind::Io)?;
            if more < 2 {
                return Err(NpyErrorKind::TruncatedHeader {
                    needed: 12,
                    available: 10 + more,
                });
            }
            let len = u32::from_le_bytes([head[8], head[9], head[10], head[11]]);
            (12, len as usize)
        }
        (major, minor) => return Err(NpyErrorKind::UnsupportedVersion { major, minor }),
    };
    let needed = text_start + text_len;
    if let Some(len) = file_len.filter(|&len| (needed as u64) > len) {
        return Err(NpyErrorKind::TruncatedHeader {
            needed,
            available: len as usize,
        });
    }
    if text_len > MAX_HEADER_BYTES {
        return Err(NpyErrorKind::BadHeader(format!(
            "the header is {text_len} bytes long; this reader accepts at most {MAX_HEADER_BYTES}"
        )));
    }
    head.truncate(text_start);
    head.resize(text_start + text_len, 0);
    let got = read_full(&mut f, &mut head[text_start..]).map_err(NpyErrorKind::Io)?;
    head.truncate(text_start + got);
    let header = parse_header(&head)?;
    if let Some(ty) = want {
        let found = header.ty;
        if found != ty && found != carrier(ty) {
            return Err(NpyErrorKind::DtypeMismatch {
                expected: ty,
                found,
                descr: header.descr,
            });
        }
    }
    let expected = header.num_elements * header.ty.byte_size(); // Checked in `parse_header`.
    let size_error = |actual: usize| size_mismatch(&header, expected, actual);
    if let Some(len) = file_len {
        let actual = len.saturating_sub(header.data_offset as u64);
        if actual != expected as u64 {
            return Err(size_error(usize::try_from(actual).unwrap_or(usize::MAX)));
        }
    }
    let shown = path.display().to_string();
    budget
        .reserve(expected as u64, || format!("the data of {shown}"))
        .map_err(NpyErrorKind::Memory)?;
    let mut data = crate::memory::try_zeroed(expected as u64, || format!("the data of {shown}"))
        .map_err(NpyErrorKind::Memory)?;
    let got = read_full(&mut f, &mut data).map_err(NpyErrorKind::Io)?;
    if got < expected {
        return Err(size_error(got));
    }
    let mut probe = [0u8; 1];
    if read_full(&mut f, &mut probe).map_err(NpyErrorKind::Io)? > 0 {
        return Err(size_error(expected + 1));
    }
    Ok((header, data))
}

/// Reads a `.npy` file that must hold elements of type `ty`.
///
/// The dtype must match exactly, except that [`ElementType::BF16`] accepts a `uint16` file (the
/// corpus convention for bf16 bit patterns), and `s2`/`s4` an `int8` and `u2`/`u4` a `uint8`
/// file whose values all fit the type.
pub fn read_npy_as(path: impl AsRef<Path>, ty: ElementType) -> Result<ArrayLiteral, NpyError> {
    let path = path.as_ref();
    let with_path = |kind| NpyError {
        path: path.to_path_buf(),
        kind,
    };
    let mut budget = MemoryBudget::new().map_err(|e| with_path(NpyErrorKind::BadLimit(e)))?;
    read_npy_within(path, Some(ty), &mut budget)
}

/// Writes an array to a `.npy` file, replacing any file at `path`.
///
/// The bytes go to a temporary file in the same directory that is renamed over `path` once
/// complete, so on failure `path` is left as it was and no partial file remains. Needs the
/// `npy-write` feature.
#[cfg(feature = "npy-write")]
pub fn write_npy(path: impl AsRef<Path>, lit: &ArrayLiteral) -> Result<(), NpyError> {
    let path = path.as_ref();
    let with_path = |kind| NpyError {
        path: path.to_path_buf(),
        kind,
    };
    let bytes = encode_npy(lit).map_err(with_path)?;
    let io = |e: std::io::Error| with_path(NpyErrorKind::Io(e));
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let mut builder = tempfile::Builder::new();
    builder.prefix(".axle-npy-").suffix(".tmp");
    // Give the file the permissions `File::create` would (0o666 less the umask), not the 0o600
    // tempfile uses by default.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = builder.tempfile_in(dir).map_err(io)?;
    use std::io::Write;
    tmp.write_all(&bytes).map_err(io)?;
    // On failure the temporary file is dropped, which deletes it.
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Decodes the bytes of a `.npy` file as an array of the file's own dtype.
pub fn decode_npy(bytes: &[u8]) -> Result<ArrayLiteral, NpyErrorKind> {
    let header = parse_header(bytes)?;
    decode_data(&header, bytes)
}

/// Encodes an array as the bytes of a `.npy` file, exactly as `numpy.save` would write them.
pub fn encode_npy(lit: &ArrayLiteral) -> Result<Vec<u8>, NpyErrorKind> {
    let ty = lit.ty();
    let descr = npy_descr(ty).ok_or(NpyErrorKind::UnwritableType(ty))?;
    let dims = &lit.shape.dims;
    if let Some(d) = dims.iter().find(|d| **d < 0) {
        return Err(NpyErrorKind::InvalidLiteral(format!(
            "negative dimension {d} in shape {dims:?}"
        )));
    }
    let expected = dims
        .iter()
        .try_fold(ty.byte_size(), |acc, &d| acc.checked_mul(d as usize))
        .ok_or_else(|| {
            NpyErrorKind::InvalidLiteral(format!("shape {dims:?} is too large to address"))
        })?;
    if lit.data.len() != expected {
        return Err(NpyErrorKind::InvalidLiteral(format!(
            "shape {} needs {expected} bytes of data but the literal has {}",
            shape_text(&lit.shape),
            lit.data.len()
        )));
    }

    // The dict text, as NumPy's `_write_array_header` formats it.
    let shape_repr = match dims.len() {
        0 => "()".to_string(),
        1 => format!("({},)", dims[0]),
        _ => {
            let parts: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
            format!("({})", parts.join(", "))
        }
    };
    let mut text =
        format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_repr}, }}");
    if let Some(first) = dims.first() {
        let digits = first.to_string().len();
        text.push_str(&" ".repeat(GROWTH_AXIS_MAX_DIGITS.saturating_sub(digits)));
    }

    // The preamble and padding, as NumPy's `_wrap_header` does them: version 1.0 if the header
    // length fits in 16 bits, else 2.0; the padding is between 1 and 64 spaces.
    let hlen = text.len() + 1;
    let pad = |prefix: usize| ARRAY_ALIGN - (prefix + hlen) % ARRAY_ALIGN;
    let mut out = Vec::with_capacity(12 + hlen + ARRAY_ALIGN + lit.data.len());
    out.extend_from_slice(MAGIC);
    let padlen = if hlen + pad(10) <= u16::MAX as usize {
        let padlen = pad(10);
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&((hlen + padlen) as u16).to_le_bytes());
        padlen
    } else {
        let padlen = pad(12);
        let total = u32::try_from(hlen + padlen).map_err(|_| {
            NpyErrorKind::InvalidLiteral(format!("rank {} is too high for a header", dims.len()))
        })?;
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&total.to_le_bytes());
        padlen
    };
    out.extend_from_slice(text.as_bytes());
    out.resize(out.len() + padlen, b' ');
    out.push(b'\n');
    if ty.bits() < 8 && ty.is_int() {
        // Each element's value, sign-extended for s2/s4, whatever its byte's upper bits hold.
        let values = lit.data.iter().map(|&b| element_to_i128(ty, &[b]) as u8);
        out.extend(values);
    } else {
        out.extend_from_slice(&lit.data);
    }
    Ok(out)
}

/// `f32[2,3]`-style text for error messages.
fn shape_text(shape: &ArrayShape) -> String {
    let dims: Vec<String> = shape.dims.iter().map(|d| d.to_string()).collect();
    format!("{}[{}]", shape.ty, dims.join(","))
}

/// Parses the preamble and header dict.
fn parse_header(bytes: &[u8]) -> Result<Header, NpyErrorKind> {
    let magic_len = bytes.len().min(MAGIC.len());
    if bytes[..magic_len] != MAGIC[..magic_len] {
        return Err(NpyErrorKind::NotNpy);
    }
    let truncated = |needed| NpyErrorKind::TruncatedHeader {
        needed,
        available: bytes.len(),
    };
    if bytes.len() < 10 {
        return Err(truncated(10));
    }
    let (major, minor) = (bytes[6], bytes[7]);
    let (text_start, text_len) = match (major, minor) {
        (1, 0) => (10, u16::from_le_bytes([bytes[8], bytes[9]]) as usize),
        (2, 0) | (3, 0) => {
            if bytes.len() < 12 {
                return Err(truncated(12));
            }
            let len = u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]);
            (12, len as usize)
        }
        _ => return Err(NpyErrorKind::UnsupportedVersion { major, minor }),
    };
    let data_offset = text_start + text_len;
    if bytes.len() < data_offset {
        return Err(truncated(data_offset));
    }
    let text = std::str::from_utf8(&bytes[text_start..data_offset])
        .map_err(|_| NpyErrorKind::BadHeader("the header is not valid UTF-8".into()))?;
    if max_nesting(text) > MAX_HEADER_NESTING {
        return Err(NpyErrorKind::BadHeader(format!(
            "brackets nest more than {MAX_HEADER_NESTING} deep"
        )));
    }
    let value: py_literal::Value = text
        .trim_end()
        .parse()
        .map_err(|e| NpyErrorKind::BadHeader(format!("the header is not a Python literal: {e}")))?;
    let py_literal::Value::Dict(entries) = value else {
        return Err(NpyErrorKind::BadHeader(format!(
            "expected a dict, found {}",
            short(&value.to_string())
        )));
    };

    let mut descr = None;
    let mut fortran_order = None;
    let mut shape = None;
    for (key, value) in &entries {
        let slot = match key.as_string().map(String::as_str) {
            Some("descr") => &mut descr,
            Some("fortran_order") => &mut fortran_order,
            Some("shape") => &mut shape,
            _ => {
                return Err(NpyErrorKind::BadHeader(format!(
                    "unexpected key {} (expected exactly 'descr', 'fortran_order' and 'shape')",
                    short(&key.to_string())
                )))
            }
        };
        if slot.replace(value).is_some() {
            return Err(NpyErrorKind::BadHeader(format!("duplicate key {key}")));
        }
    }
    let missing = |k: &str| NpyErrorKind::BadHeader(format!("missing key '{k}'"));
    let descr = descr.ok_or_else(|| missing("descr"))?;
    let fortran_order = fortran_order.ok_or_else(|| missing("fortran_order"))?;
    let shape = shape.ok_or_else(|| missing("shape"))?;

    let (ty, order, descr) = match descr {
        py_literal::Value::String(s) => {
            let (ty, order) = parse_descr(s)?;
            (ty, order, s.clone())
        }
        py_literal::Value::List(_) => {
            return Err(NpyErrorKind::UnsupportedDtype {
                descr: short(&descr.to_string()),
                reason: "structured (record) dtypes are not supported".into(),
            })
        }
        other => {
            return Err(NpyErrorKind::BadHeader(format!(
                "'descr' must be a string, found {}",
                short(&other.to_string())
            )))
        }
    };
    let fortran_order = fortran_order.as_boolean().ok_or_else(|| {
        NpyErrorKind::BadHeader(format!(
            "'fortran_order' must be True or False, found {}",
            short(&fortran_order.to_string())
        ))
    })?;
    let items = match shape {
        py_literal::Value::Tuple(items) | py_literal::Value::List(items) => items,
        other => {
            return Err(NpyErrorKind::BadHeader(format!(
                "'shape' must be a tuple, found {}",
                short(&other.to_string())
            )))
        }
    };
    let mut dims = Vec::with_capacity(items.len());
    let mut num_elements: usize = 1;
    for item in items {
        let d = item
            .as_integer()
            .and_then(|i| i64::try_from(i).ok())
            .filter(|d| *d >= 0)
            .ok_or_else(|| {
                NpyErrorKind::BadHeader(format!(
                    "shape {} has an entry that is not a non-negative 64-bit integer",
                    short(&shape.to_string())
                ))
            })?;
        dims.push(d);
        num_elements = usize::try_from(d)
            .ok()
            .and_then(|d| num_elements.checked_mul(d))
            .ok_or_else(|| {
                NpyErrorKind::BadHeader(format!(
                    "shape {} has too many elements to address",
                    short(&shape.to_string())
                ))
            })?;
    }
    if num_elements.checked_mul(ty.byte_size()).is_none() {
        return Err(NpyErrorKind::BadHeader(format!(
            "shape {dims:?} of dtype '{descr}' is too large to address"
        )));
    }
    Ok(Header {
        ty,
        descr,
        order,
        fortran_order,
        dims,
        num_elements,
        data_offset,
    })
}

/// Converts the data after the header into a row-major little-endian literal.
fn decode_data(header: &Header, bytes: &[u8]) -> Result<ArrayLiteral, NpyErrorKind> {
    let width = header.ty.byte_size();
    let expected = header.num_elements * width; // Checked in `parse_header`.
    let data = &bytes[header.data_offset..];
    if data.len() == expected {
        return decode_payload(header, data.to_vec());
    }
    Err(size_mismatch(header, expected, data.len()))
}

/// The error for `actual` bytes of data where the header's shape and dtype need `expected`.
fn size_mismatch(header: &Header, expected: usize, actual: usize) -> NpyErrorKind {
    let (dims, descr) = (header.dims.clone(), header.descr.clone());
    if actual < expected {
        NpyErrorKind::TruncatedData {
            dims,
            descr,
            expected,
            actual,
        }
    } else {
        NpyErrorKind::TrailingData {
            dims,
            descr,
            expected,
            actual,
        }
    }
}

/// Converts `data`, exactly the bytes the header's shape and dtype need, into a row-major
/// little-endian literal (in place, except for Fortran order, which is reordered into a
/// fallibly allocated copy).
fn decode_payload(header: &Header, data: Vec<u8>) -> Result<ArrayLiteral, NpyErrorKind> {
    let width = header.ty.byte_size();
    let mut out = if header.fortran_order && header.dims.len() > 1 {
        let mut reordered = crate::memory::try_with_capacity(data.len(), || {
            "the row-major copy of the data".to_string()
        })
        .map_err(NpyErrorKind::Memory)?;
        fortran_to_row_major(&data, &header.dims, width, &mut reordered);
        reordered
    } else {
        data
    };
    if header.order == ByteOrder::Big {
        // Complex numbers swap each part on its own; the real part stays first.
        let component = header.ty.component_type().byte_size();
        if component > 1 {
            for c in out.chunks_exact_mut(component) {
                c.reverse();
            }
        }
    }
    if header.ty == ElementType::Pred {
        for b in &mut out {
            *b = (*b != 0) as u8;
        }
    }
    Ok(ArrayLiteral {
        shape: ArrayShape::new(header.ty, &header.dims),
        data: out,
    })
}

/// Reorders column-major elements of `width` bytes into row-major order.
fn fortran_to_row_major(data: &[u8], dims: &[i64], width: usize, out: &mut Vec<u8>) {
    let dims: Vec<usize> = dims.iter().map(|d| *d as usize).collect();
    let n: usize = dims.iter().product();
    if n == 0 {
        return;
    }
    // Column-major element strides: dimension 0 is contiguous.
    let mut strides = vec![1usize; dims.len()];
    for k in 1..dims.len() {
        strides[k] = strides[k - 1] * dims[k - 1];
    }
    // Walk the row-major index like an odometer, tracking the column-major offset.
    let mut index = vec![0usize; dims.len()];
    let mut offset = 0usize;
    for _ in 0..n {
        out.extend_from_slice(&data[offset * width..(offset + 1) * width]);
        for k in (0..dims.len()).rev() {
            index[k] += 1;
            offset += strides[k];
            if index[k] < dims[k] {
                break;
            }
            offset -= strides[k] * dims[k];
            index[k] = 0;
        }
    }
}

/// Maps a dtype string (`<f4`, `|b1`, `>i8`, ...) to an element type and byte order.
fn parse_descr(descr: &str) -> Result<(ElementType, ByteOrder), NpyErrorKind> {
    use ElementType::*;
    let unsupported = |reason: &str| NpyErrorKind::UnsupportedDtype {
        descr: format!("'{descr}'"),
        reason: reason.to_string(),
    };
    let native = if cfg!(target_endian = "big") {
        ByteOrder::Big
    } else {
        ByteOrder::Little
    };
    let (order, code) = match descr.as_bytes().first() {
        Some(b'<') => (ByteOrder::Little, &descr[1..]),
        Some(b'>') => (ByteOrder::Big, &descr[1..]),
        Some(b'=') | Some(b'|') => (native, &descr[1..]),
        _ => (native, descr),
    };
    let ty = match code {
        "b1" => Pred,
        "i1" => S8,
        "i2" => S16,
        "i4" => S32,
        "i8" => S64,
        "u1" => U8,
        "u2" => U16,
        "u4" => U32,
        "u8" => U64,
        "f2" => F16,
        "f4" => F32,
        "f8" => F64,
        "c8" => C64,
        "c16" => C128,
        _ => {
            return Err(unsupported(
                "Axle reads bool, int8/16/32/64, uint8/16/32/64, float16/32/64 and \
                 complex64/128 (bf16 is stored as uint16, s2/s4 as int8, u2/u4 as uint8)",
            ))
        }
    };
    if descr.starts_with('|') && ty.byte_size() > 1 {
        return Err(unsupported(
            "byte order '|' (not applicable) is only valid for one-byte types",
        ));
    }
    Ok((ty, order))
}

/// The deepest bracket nesting in `text`, counting brackets inside strings too (an overestimate
/// is harmless: real headers nest at most three deep).
fn max_nesting(text: &str) -> usize {
    let mut depth = 0usize;
    let mut max = 0usize;
    for c in text.bytes() {
        match c {
            b'(' | b'[' | b'{' => {
                depth += 1;
                max = max.max(depth);
            }
            b')' | b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    max
}

/// Cuts long header excerpts for error messages.
fn short(s: &str) -> String {
    const MAX: usize = 80;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn descr_strings_map_to_element_types() {
        assert_eq!(
            parse_descr("<f4").unwrap(),
            (ElementType::F32, ByteOrder::Little)
        );
        assert_eq!(
            parse_descr(">i8").unwrap(),
            (ElementType::S64, ByteOrder::Big)
        );
        assert_eq!(parse_descr("|b1").unwrap().0, ElementType::Pred);
        assert_eq!(parse_descr("<c16").unwrap().0, ElementType::C128);
        assert_eq!(parse_descr("f8").unwrap().0, ElementType::F64);
        for bad in ["<U3", "|O", "<f16", "|V4", "<M8[ns]", "|i4", ""] {
            let err = parse_descr(bad).unwrap_err();
            assert!(
                matches!(err, NpyErrorKind::UnsupportedDtype { .. }),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn every_writable_type_has_a_readable_descr() {
        for &ty in ElementType::ALL {
            if let Some(d) = npy_descr(ty) {
                let (read, order) = parse_descr(d).unwrap();
                assert_eq!(order, ByteOrder::Little);
                assert_eq!(read, carrier(ty), "{ty}");
            }
        }
    }

    fn fortran_to_row_major(data: &[u8], dims: &[i64], width: usize) -> Vec<u8> {
        let mut out = Vec::new();
        super::fortran_to_row_major(data, dims, width, &mut out);
        out
    }

    #[test]
    fn fortran_order_transposes_to_row_major() {
        // A 2x3 array [[0, 1, 2], [3, 4, 5]] stored column-major is 0 3 1 4 2 5.
        let col_major = [0u8, 3, 1, 4, 2, 5];
        assert_eq!(
            fortran_to_row_major(&col_major, &[2, 3], 1),
            vec![0, 1, 2, 3, 4, 5]
        );
        // A 2x2x2 array of two-byte elements: element (i, j, k) = 4i + 2j + k.
        let mut col = Vec::new();
        for k in 0..2u8 {
            for j in 0..2u8 {
                for i in 0..2u8 {
                    col.extend_from_slice(&[4 * i + 2 * j + k, 0xee]);
                }
            }
        }
        let row = fortran_to_row_major(&col, &[2, 2, 2], 2);
        let values: Vec<u8> = row.chunks(2).map(|c| c[0]).collect();
        assert_eq!(values, (0..8).collect::<Vec<u8>>());
        assert!(fortran_to_row_major(&[], &[0, 3], 4).is_empty());
    }

    #[test]
    fn header_matches_numpy_layout() {
        let lit = ArrayLiteral::zeros(ArrayShape::new(ElementType::S32, &[16]));
        let bytes = encode_npy(&lit).unwrap();
        let header_len = u16::from_le_bytes([bytes[8], bytes[9]]) as usize;
        assert_eq!((10 + header_len) % ARRAY_ALIGN, 0);
        let text = std::str::from_utf8(&bytes[10..10 + header_len]).unwrap();
        assert!(text.starts_with("{'descr': '<i4', 'fortran_order': False, 'shape': (16,), }"));
        assert!(text.ends_with(" \n"));
        let scalar = ArrayLiteral::zeros(ArrayShape::new(ElementType::F32, &[]));
        let bytes = encode_npy(&scalar).unwrap();
        let text = String::from_utf8_lossy(&bytes[10..]);
        assert!(text.contains("'shape': (), }"));
    }

    #[test]
    fn nesting_is_measured_outside_and_inside_strings() {
        assert_eq!(max_nesting("{'shape': (1, 2), }"), 2);
        assert_eq!(max_nesting("no brackets"), 0);
        assert_eq!(max_nesting("'((('"), 3);
    }
}
