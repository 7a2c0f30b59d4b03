//! Helpers shared by the evaluator's test files: reading `.npy` files, comparing literals under
//! a tolerance, and locating the shared reference data.
#![allow(dead_code)]

use axle_ir::{ArrayLiteral, ArrayShape, ElementType, Literal};
use std::path::{Path, PathBuf};

/// The shared data directory: `$AXLE_SHARED`, else `../shared` beside the repository, else
/// `/work/shared`.
pub fn shared_dir() -> PathBuf {
    if let Ok(d) = std::env::var("AXLE_SHARED") {
        return PathBuf::from(d);
    }
    let beside = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../shared");
    if beside.is_dir() {
        return beside;
    }
    PathBuf::from("/work/shared")
}

/// Reads a `.npy` file as a literal of element type `ty` (`bf16` arrays are stored as `uint16`
/// bit patterns, so the requested type wins when the widths agree).
pub fn read_npy(path: &Path, ty: Option<ElementType>) -> Result<Literal, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err(format!("{}: not an npy file", path.display()));
    }
    let (hlen, hstart) = if bytes[6] == 1 {
        (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10)
    } else {
        (
            u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize,
            12,
        )
    };
    let header = std::str::from_utf8(&bytes[hstart..hstart + hlen]).map_err(|e| e.to_string())?;
    let field = |key: &str| -> Result<&str, String> {
        let i = header
            .find(&format!("'{key}'"))
            .ok_or_else(|| format!("npy header without {key}: {header}"))?;
        Ok(header[i + key.len() + 2..].trim_start_matches([':', ' ']))
    };
    let descr = field("descr")?;
    let descr = &descr[1..descr[1..].find('\'').unwrap() + 1];
    if field("fortran_order")?.starts_with("True") {
        return Err("fortran-order npy files are not supported".into());
    }
    let shape_txt = field("shape")?;
    let shape_txt = &shape_txt[1..shape_txt.find(')').unwrap()];
    let dims: Vec<i64> = shape_txt
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<i64>().map_err(|e| e.to_string()))
        .collect::<Result<_, _>>()?;
    let npy_ty = match &descr[1..] {
        "f2" => ElementType::F16,
        "f4" => ElementType::F32,
        "f8" => ElementType::F64,
        "c8" => ElementType::C64,
        "c16" => ElementType::C128,
        "i1" => ElementType::S8,
        "i2" => ElementType::S16,
        "i4" => ElementType::S32,
        "i8" => ElementType::S64,
        "u1" => ElementType::U8,
        "u2" => ElementType::U16,
        "u4" => ElementType::U32,
        "u8" => ElementType::U64,
        "b1" => ElementType::Pred,
        d => return Err(format!("unsupported npy dtype {d}")),
    };
    if descr.starts_with('>') && npy_ty.byte_size() > 1 {
        return Err("big-endian npy files are not supported".into());
    }
    let ty = match ty {
        Some(t) if t.byte_size() == npy_ty.byte_size() => t,
        Some(t) => return Err(format!("npy dtype {descr} cannot hold {t}")),
        None => npy_ty,
    };
    let data = bytes[hstart + hlen..].to_vec();
    let n: i64 = dims.iter().product();
    if data.len() != n as usize * ty.byte_size() {
        return Err(format!(
            "{}: data size does not match the shape",
            path.display()
        ));
    }
    Ok(Literal::Array(ArrayLiteral {
        shape: ArrayShape::new(ty, &dims),
        data,
    }))
}

/// A comparison tolerance.
#[derive(Clone, Copy, Debug)]
pub enum Tolerance {
    /// Bit-identical (NaN payloads aside).
    Exact,
    /// `|got - want| <= atol + rtol * |want|`, as numpy's `allclose`.
    Close { rtol: f64, atol: f64 },
}

/// The leaves of a literal, depth-first.
pub fn leaves(l: &Literal) -> Vec<&ArrayLiteral> {
    match l {
        Literal::Array(a) => vec![a],
        Literal::Tuple(v) => v.iter().flat_map(leaves).collect(),
    }
}

/// Compares `got` against `want`: same type and dimensions, NaN at the same positions, other
/// elements within `tol`. Returns a description of the first mismatches.
pub fn compare(got: &ArrayLiteral, want: &ArrayLiteral, tol: Tolerance) -> Result<(), String> {
    if got.shape.ty != want.shape.ty || got.shape.dims != want.shape.dims {
        return Err(format!(
            "shape mismatch: got {}{:?}, want {}{:?}",
            got.shape.ty, got.shape.dims, want.shape.ty, want.shape.dims
        ));
    }
    let ty = got.ty();
    let mut bad = Vec::new();
    let mut count = 0;
    for i in 0..got.len() {
        let ok = if ty.is_floating() {
            let parts = if ty.is_complex() { 2 } else { 1 };
            let w = ty.component_type().byte_size();
            (0..parts).all(|p| {
                let gb = &got.element_bytes(i)[p * w..(p + 1) * w];
                let wb = &want.element_bytes(i)[p * w..(p + 1) * w];
                let g = axle_ir::literal::element_to_f64(ty.component_type(), gb);
                let e = axle_ir::literal::element_to_f64(ty.component_type(), wb);
                if g.is_nan() || e.is_nan() {
                    return g.is_nan() && e.is_nan();
                }
                match tol {
                    Tolerance::Exact => gb == wb,
                    Tolerance::Close { rtol, atol } => {
                        if g.is_infinite() || e.is_infinite() {
                            g == e
                        } else {
                            (g - e).abs() <= atol + rtol * e.abs()
                        }
                    }
                }
            })
        } else {
            got.element_bytes(i) == want.element_bytes(i)
        };
        if !ok {
            count += 1;
            if bad.len() < 8 {
                bad.push(format!(
                    "[{i}] got {} want {}",
                    axle_ir::literal::format_element(ty, got.element_bytes(i)),
                    axle_ir::literal::format_element(ty, want.element_bytes(i))
                ));
            }
        }
    }
    if count == 0 {
        Ok(())
    } else {
        Err(format!(
            "{count} of {} elements differ: {}",
            got.len(),
            bad.join(", ")
        ))
    }
}
