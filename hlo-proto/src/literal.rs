//! Constants' literals between `LiteralProto` and the IR's [`Literal`].
//!
//! Invariants:
//! - A `LiteralProto` holds its array data in the physical order of its shape's layout (XLA's
//!   `Literal::ToProto`); the IR holds it row-major. [`read_literal`] and [`write_literal`]
//!   permute between the two, so a literal survives a round trip bit for bit.
//! - Sub-byte types (`s2`, `u2`, `s4`, `u4`, `f4e2m1fn`) travel one element per byte, as XLA
//!   writes them; reading keeps only each byte's low bits.
//! - The data fields the vendored proto predates (`f8e4m3s` 28, `f8e3m4s` 29, `f4e2m1fns` 32,
//!   `f8e8m0fnus` 33) are read from and written to the raw bytes (the crate's `wire` module),
//!   so reading works on the literal's raw message, not on prost's decoded copy (which drops
//!   them).
//! - The element count of the data must be the count of the shape, checked before anything is
//!   allocated from the shape's dimensions.

use axle_ir::literal::checked_size;
use axle_ir::{ArrayLiteral, ArrayShape, ElementType, LayoutId, Literal, Module, ShapeId};
use pjrt_sys::protos::xla::{LiteralProto, ShapeProto};
use prost::Message;

use crate::error::ProtoError;
use crate::shape::{element_type, write_shape_with_layout};
use crate::wire;

/// `LiteralProto.tuple_literals`.
const TUPLE_LITERALS: u32 = 10;
/// `PrimitiveType::Tuple`.
const TUPLE: i32 = 13;
/// Tuples nested deeper than this are refused (the shape limit of the IR).
const MAX_DEPTH: usize = axle_ir::shape_inference::OwnedShape::MAX_TUPLE_DEPTH;

/// The data field of the literal fields the vendored proto lacks, for `ty`.
fn raw_field(ty: ElementType) -> Option<u32> {
    match ty {
        ElementType::F8E4M3 => Some(28),
        ElementType::F8E3M4 => Some(29),
        ElementType::F4E2M1FN => Some(32),
        ElementType::F8E8M0FNU => Some(33),
        _ => None,
    }
}

/// Reads the literal whose serialized `LiteralProto` is `raw`.
pub fn read_literal(raw: &[u8]) -> Result<Literal, String> {
    read_at(raw, 0)
}

fn read_at(raw: &[u8], depth: usize) -> Result<Literal, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "literal tuples nested more than {MAX_DEPTH} levels deep"
        ));
    }
    let p = LiteralProto::decode(raw).map_err(|e| format!("malformed literal: {e}"))?;
    let shape = p.shape.as_ref().ok_or("literal without a shape")?;
    if shape.element_type == TUPLE {
        let elems = wire::repeated_bytes(raw, TUPLE_LITERALS).map_err(|e| e.to_string())?;
        if elems.len() != shape.tuple_shapes.len() {
            return Err(format!(
                "tuple literal has {} elements but its shape has {}",
                elems.len(),
                shape.tuple_shapes.len()
            ));
        }
        return elems
            .into_iter()
            .map(|e| read_at(e, depth + 1))
            .collect::<Result<_, _>>()
            .map(Literal::Tuple);
    }
    let ty = element_type(shape.element_type)
        .ok_or_else(|| format!("literal of unknown element type {}", shape.element_type))?;
    if shape.is_dynamic_dimension.iter().any(|&d| d) {
        return Err("literal with a dynamic dimension".into());
    }
    let dims = &shape.dimensions;
    let (n, _) = checked_size(ty, dims).map_err(|e| e.to_string())?;
    let physical = physical_bytes(&p, raw, ty, n)?;
    let data = match shape.layout.as_deref() {
        Some(l) if !is_row_major(&l.minor_to_major) && n > 0 => {
            if !is_permutation(&l.minor_to_major, dims.len()) {
                return Err(format!(
                    "literal layout {:?} is not a permutation of its dimensions",
                    l.minor_to_major
                ));
            }
            permute(&physical, dims, &l.minor_to_major, ty.byte_size(), false)
        }
        _ => physical,
    };
    ArrayLiteral::new(ArrayShape::new(ty, dims), data)
        .map(Literal::Array)
        .map_err(|e| e.to_string())
}

/// The literal's data as little-endian bytes in the proto's (physical) order, checked to hold
/// `n` elements.
fn physical_bytes(
    p: &LiteralProto,
    raw: &[u8],
    ty: ElementType,
    n: usize,
) -> Result<Vec<u8>, String> {
    use ElementType::*;
    fn le<T: Copy, const W: usize>(v: &[T], f: impl Fn(T) -> [u8; W]) -> Vec<u8> {
        v.iter().flat_map(|&x| f(x)).collect()
    }
    let count_err =
        |got: usize| format!("literal of {ty}[{n} elements] holds {got} elements of data");
    let (bytes, per) = match ty {
        Pred => {
            if p.preds.len() != n {
                return Err(count_err(p.preds.len()));
            }
            return Ok(p.preds.iter().map(|&b| b as u8).collect());
        }
        S2 | U2 | S4 | U4 | F4E2M1FN => {
            let v: Vec<u8> = match ty {
                S2 => p.s2s.clone(),
                U2 => p.u2s.clone(),
                S4 => p.s4s.clone(),
                U4 => p.u4s.clone(),
                _ => raw_data(raw, ty)?,
            };
            if v.len() != n {
                return Err(count_err(v.len()));
            }
            let mask = ((1u16 << ty.bits()) - 1) as u8;
            return Ok(v.into_iter().map(|b| b & mask).collect());
        }
        S8 => (p.s8s.clone(), 1),
        U8 => (p.u8s.clone(), 1),
        S16 => (p.s16s.clone(), 2),
        U16 => (p.u16s.clone(), 2),
        F16 => (p.f16s.clone(), 2),
        BF16 => (p.bf16s.clone(), 2),
        S32 => (le(&p.s32s, i32::to_le_bytes), 4),
        U32 => (le(&p.u32s, u32::to_le_bytes), 4),
        S64 => (le(&p.s64s, i64::to_le_bytes), 8),
        U64 => (le(&p.u64s, u64::to_le_bytes), 8),
        F32 => (le(&p.f32s, f32::to_le_bytes), 4),
        F64 => (le(&p.f64s, f64::to_le_bytes), 8),
        C64 => (le(&p.c64s, f32::to_le_bytes), 8),
        C128 => (le(&p.c128s, f64::to_le_bytes), 16),
        F8E5M2 => (p.f8e5m2s.clone(), 1),
        F8E4M3FN => (p.f8e4m3fns.clone(), 1),
        F8E4M3B11FNUZ => (p.f8e4m3b11fnuzs.clone(), 1),
        F8E5M2FNUZ => (p.f8e5m2fnuzs.clone(), 1),
        F8E4M3FNUZ => (p.f8e4m3fnuzs.clone(), 1),
        F8E4M3 | F8E3M4 | F8E8M0FNU => (raw_data(raw, ty)?, 1),
    };
    if bytes.len() % per != 0 || bytes.len() / per != n {
        return Err(count_err(bytes.len() / per));
    }
    Ok(bytes)
}

fn raw_data(raw: &[u8], ty: ElementType) -> Result<Vec<u8>, String> {
    let tag = raw_field(ty).expect("a type without a generated field");
    Ok(wire::last_bytes(raw, tag)
        .map_err(|e| e.to_string())?
        .map(<[u8]>::to_vec)
        .unwrap_or_default())
}

fn is_row_major(m2m: &[i64]) -> bool {
    m2m.iter().rev().enumerate().all(|(k, &d)| d == k as i64)
}

fn is_permutation(m2m: &[i64], rank: usize) -> bool {
    let mut seen = vec![false; rank];
    m2m.len() == rank
        && m2m.iter().all(|&d| {
            usize::try_from(d)
                .ok()
                .filter(|&d| d < rank)
                .is_some_and(|d| !std::mem::replace(&mut seen[d], true))
        })
}

/// Moves elements of width `w` between row-major order and the physical order of layout
/// `m2m`: `to_physical` reads row-major `src` and writes physical, else the reverse.
fn permute(src: &[u8], dims: &[i64], m2m: &[i64], w: usize, to_physical: bool) -> Vec<u8> {
    let rank = dims.len();
    let mut stride = vec![0usize; rank];
    let mut s = 1usize;
    for &d in m2m {
        stride[d as usize] = s;
        s *= dims[d as usize] as usize;
    }
    let mut out = vec![0u8; src.len()];
    let mut idx = vec![0i64; rank];
    for logical in 0..src.len() / w {
        let phys: usize = idx.iter().zip(&stride).map(|(&i, &s)| i as usize * s).sum();
        let (from, to) = if to_physical {
            (logical, phys)
        } else {
            (phys, logical)
        };
        out[to * w..(to + 1) * w].copy_from_slice(&src[from * w..(from + 1) * w]);
        for d in (0..rank).rev() {
            idx[d] += 1;
            if idx[d] < dims[d] {
                break;
            }
            idx[d] = 0;
        }
    }
    out
}

/// The serialized `LiteralProto` of literal `l`, a constant of shape `s` with layout `lay`:
/// its shape carries the layout (the default where the IR has none) and its data is in that
/// layout's order.
pub fn write_literal(
    m: &Module,
    l: &Literal,
    s: ShapeId,
    lay: LayoutId,
) -> Result<Vec<u8>, ProtoError> {
    let shape = write_shape_with_layout(m, s, lay).map_err(ProtoError::Unrepresentable)?;
    let mut out = Vec::new();
    encode(l, &shape, &mut out)?;
    Ok(out)
}

fn encode(l: &Literal, shape: &ShapeProto, out: &mut Vec<u8>) -> Result<(), ProtoError> {
    let mismatch =
        || ProtoError::Unrepresentable("a constant's literal does not match its shape".into());
    match l {
        Literal::Tuple(elems) => {
            if shape.element_type != TUPLE || shape.tuple_shapes.len() != elems.len() {
                return Err(mismatch());
            }
            LiteralProto {
                shape: Some(shape.clone()),
                ..Default::default()
            }
            .encode(out)
            .expect("a Vec grows");
            for (e, es) in elems.iter().zip(&shape.tuple_shapes) {
                let mut buf = Vec::new();
                encode(e, es, &mut buf)?;
                wire::put_bytes(out, TUPLE_LITERALS, &buf);
            }
            Ok(())
        }
        Literal::Array(a) => {
            // The literal's own shape, with the constant's layout where it fits.
            let m2m = shape
                .layout
                .as_ref()
                .map(|l| l.minor_to_major.clone())
                .filter(|m| {
                    is_permutation(m, a.shape.rank()) && shape.dimensions[..] == a.shape.dims[..]
                })
                .unwrap_or_else(|| (0..a.shape.rank() as i64).rev().collect());
            let mut ps = ShapeProto {
                element_type: crate::shape::primitive_type(a.ty()),
                dimensions: a.shape.dims.to_vec(),
                is_dynamic_dimension: vec![false; a.shape.rank()],
                layout: shape.layout.clone(),
                ..Default::default()
            };
            if let Some(l) = ps.layout.as_mut() {
                l.minor_to_major = m2m.clone();
            }
            let w = a.ty().byte_size();
            if a.data.len() != a.len() * w {
                return Err(mismatch());
            }
            let data = if is_row_major(&m2m) || a.is_empty() {
                a.data.clone()
            } else {
                permute(&a.data, &a.shape.dims, &m2m, w, true)
            };
            let mut p = LiteralProto {
                shape: Some(ps),
                ..Default::default()
            };
            let mut extra = None;
            fill_data(&mut p, a.ty(), data, &mut extra);
            p.encode(out).expect("a Vec grows");
            if let Some((tag, bytes)) = extra {
                wire::put_bytes(out, tag, &bytes);
            }
            Ok(())
        }
    }
}

fn fill_data(
    p: &mut LiteralProto,
    ty: ElementType,
    data: Vec<u8>,
    extra: &mut Option<(u32, Vec<u8>)>,
) {
    use ElementType::*;
    fn from_le<T, const W: usize>(d: &[u8], f: impl Fn([u8; W]) -> T) -> Vec<T> {
        d.chunks_exact(W)
            .map(|c| f(c.try_into().expect("chunk width")))
            .collect()
    }
    match ty {
        Pred => p.preds = data.iter().map(|&b| b != 0).collect(),
        S2 => p.s2s = data,
        U2 => p.u2s = data,
        S4 => p.s4s = data,
        U4 => p.u4s = data,
        S8 => p.s8s = data,
        U8 => p.u8s = data,
        S16 => p.s16s = data,
        U16 => p.u16s = data,
        F16 => p.f16s = data,
        BF16 => p.bf16s = data,
        S32 => p.s32s = from_le(&data, i32::from_le_bytes),
        U32 => p.u32s = from_le(&data, u32::from_le_bytes),
        S64 => p.s64s = from_le(&data, i64::from_le_bytes),
        U64 => p.u64s = from_le(&data, u64::from_le_bytes),
        F32 => p.f32s = from_le(&data, f32::from_le_bytes),
        F64 => p.f64s = from_le(&data, f64::from_le_bytes),
        C64 => p.c64s = from_le(&data, f32::from_le_bytes),
        C128 => p.c128s = from_le(&data, f64::from_le_bytes),
        F8E5M2 => p.f8e5m2s = data,
        F8E4M3FN => p.f8e4m3fns = data,
        F8E4M3B11FNUZ => p.f8e4m3b11fnuzs = data,
        F8E5M2FNUZ => p.f8e5m2fnuzs = data,
        F8E4M3FNUZ => p.f8e4m3fnuzs = data,
        F8E4M3 | F8E3M4 | F4E2M1FN | F8E8M0FNU => {
            *extra = Some((raw_field(ty).expect("raw field"), data))
        }
    }
}
