//! Element types, shapes and layouts between `ShapeProto`/`LayoutProto` and the IR's interned
//! [`Shape`]s and [`Layout`]s.
//!
//! Invariants:
//! - [`primitive_type`] and [`element_type`] are inverse on every element type the IR has
//!   (XLA's `PrimitiveType` numbers, including the ones the vendored proto predates:
//!   `F8E4M3 = 28`, `F8E3M4 = 29`, `F4E2M1FN = 32`, `F8E8M0FNU = 33`).
//! - A shape read back from [`write_shape`]'s output interns to the same `(ShapeId, LayoutId)`,
//!   with one exception XLA's text shares: a rank-0 array's layout is no layout (XLA writes
//!   `{}` for scalars in protos and nothing in text).
//! - Reading checks what the text parser checks of a shape (known element type, one dynamic
//!   flag per dimension, sizes that fit, tuples at most [`OwnedShape::MAX_TUPLE_DEPTH`] deep)
//!   and what it checks of a layout (a permutation of the dimensions); it never panics.
//! - Layout items besides tiles and the memory space are the IR's verbatim `other` text:
//!   `L(n)` (tail padding alignment), `#(ty)` and `*(ty)` (index and pointer types), `E(n)`
//!   (element size in bits), `M(n)` (dynamic metadata prefix bytes), in XLA's print order.

use axle_ir::shape_inference::OwnedShape;
use axle_ir::{ArrayLayout, ArrayShape, ElementType, Layout, LayoutId, Module, Shape, ShapeId};
use pjrt_sys::protos::xla::{LayoutProto, ShapeProto, TileProto};

/// `PrimitiveType::Tuple`.
const TUPLE: i32 = 13;
/// `PrimitiveType::OpaqueType`.
const OPAQUE: i32 = 14;
/// `PrimitiveType::Token`.
const TOKEN: i32 = 17;

/// XLA's `PrimitiveType` number of `ty`.
pub fn primitive_type(ty: ElementType) -> i32 {
    use ElementType::*;
    match ty {
        Pred => 1,
        S2 => 26,
        S4 => 21,
        S8 => 2,
        S16 => 3,
        S32 => 4,
        S64 => 5,
        U2 => 27,
        U4 => 22,
        U8 => 6,
        U16 => 7,
        U32 => 8,
        U64 => 9,
        F16 => 10,
        BF16 => 16,
        F32 => 11,
        F64 => 12,
        C64 => 15,
        C128 => 18,
        F8E5M2 => 19,
        F8E4M3 => 28,
        F8E4M3FN => 20,
        F8E4M3B11FNUZ => 23,
        F8E5M2FNUZ => 24,
        F8E4M3FNUZ => 25,
        F8E3M4 => 29,
        F8E8M0FNU => 33,
        F4E2M1FN => 32,
    }
}

/// The element type with XLA's `PrimitiveType` number `p`, if it is an array element type.
pub fn element_type(p: i32) -> Option<ElementType> {
    ElementType::ALL
        .iter()
        .copied()
        .find(|&t| primitive_type(t) == p)
}

/// Interns the shape and layout `s` describes into `m`.
pub fn read_shape(m: &mut Module, s: &ShapeProto) -> Result<(ShapeId, LayoutId), String> {
    read_shape_at(m, s, 0)
}

fn read_shape_at(
    m: &mut Module,
    s: &ShapeProto,
    depth: usize,
) -> Result<(ShapeId, LayoutId), String> {
    match s.element_type {
        TUPLE => {
            if depth >= OwnedShape::MAX_TUPLE_DEPTH {
                return Err(format!(
                    "tuple shapes nested more than {} levels deep are not supported",
                    OwnedShape::MAX_TUPLE_DEPTH
                ));
            }
            if !s.dimensions.is_empty() {
                return Err("a tuple shape has dimensions".into());
            }
            let mut shapes = Vec::with_capacity(s.tuple_shapes.len());
            let mut layouts = Vec::with_capacity(s.tuple_shapes.len());
            for e in &s.tuple_shapes {
                let (es, el) = read_shape_at(m, e, depth + 1)?;
                shapes.push(es);
                layouts.push(el);
            }
            let any_layout = layouts.iter().any(|&l| l != m.no_layout());
            let sid = m.intern_shape(Shape::Tuple(shapes.into()));
            let lid = if any_layout {
                m.intern_layout(Layout::Tuple(layouts.into()))
            } else {
                m.no_layout()
            };
            Ok((sid, lid))
        }
        TOKEN | OPAQUE => {
            if !s.dimensions.is_empty() || !s.tuple_shapes.is_empty() {
                return Err("a token or opaque shape has dimensions or elements".into());
            }
            let shape = if s.element_type == TOKEN {
                Shape::Token
            } else {
                Shape::Opaque
            };
            Ok((m.intern_shape(shape), m.no_layout()))
        }
        p => {
            let ty = element_type(p).ok_or_else(|| format!("unknown element type {p}"))?;
            if !s.tuple_shapes.is_empty() {
                return Err(format!("an array shape of {ty} has tuple elements"));
            }
            let rank = s.dimensions.len();
            let dynamic: Box<[bool]> = if s.is_dynamic_dimension.is_empty() {
                vec![false; rank].into()
            } else if s.is_dynamic_dimension.len() == rank {
                s.is_dynamic_dimension.clone().into()
            } else {
                return Err(format!(
                    "shape has {} dynamic flags for {rank} dimensions",
                    s.is_dynamic_dimension.len()
                ));
            };
            let array = ArrayShape {
                ty,
                dims: s.dimensions.clone().into(),
                dynamic,
            };
            array
                .validate()
                .map_err(|why| format!("shape {ty}{:?} {why}", s.dimensions))?;
            let layout = match &s.layout {
                Some(l) if rank > 0 || !is_trivial(l) => {
                    let l = read_layout(l, rank)?;
                    m.intern_layout(Layout::Array(l))
                }
                _ => m.no_layout(),
            };
            Ok((m.intern_shape(Shape::Array(array)), layout))
        }
    }
}

/// Whether a layout says nothing beyond "dense" (what XLA writes for a scalar).
fn is_trivial(l: &LayoutProto) -> bool {
    l.minor_to_major.is_empty()
        && l.tiles.is_empty()
        && l.memory_space == 0
        && l.element_size_in_bits == 0
        && l.tail_padding_alignment_in_elements <= 1
        && l.index_primitive_type == 0
        && l.pointer_primitive_type == 0
        && l.dynamic_shape_metadata_prefix_bytes == 0
}

fn type_name(p: i32) -> Result<&'static str, String> {
    element_type(p)
        .map(|t| t.name())
        .ok_or_else(|| format!("unknown element type {p} in a layout"))
}

fn read_layout(l: &LayoutProto, rank: usize) -> Result<ArrayLayout, String> {
    if l.dim_level_types.iter().any(|&d| d != 0)
        || !l.split_configs.is_empty()
        || l.physical_shape.is_some()
    {
        return Err("sparse layouts, split configs and physical shapes are not supported".into());
    }
    let m2m = &l.minor_to_major;
    let mut seen = vec![false; rank];
    if m2m.len() != rank
        || !m2m.iter().all(|&d| {
            usize::try_from(d)
                .ok()
                .filter(|&d| d < rank)
                .is_some_and(|d| !std::mem::replace(&mut seen[d], true))
        })
    {
        return Err(format!(
            "layout {m2m:?} is not a permutation of the dimensions 0..{rank}"
        ));
    }
    let mut other = String::new();
    if l.tail_padding_alignment_in_elements > 1 {
        other.push_str(&format!("L({})", l.tail_padding_alignment_in_elements));
    }
    if l.index_primitive_type != 0 {
        other.push_str(&format!("#({})", type_name(l.index_primitive_type)?));
    }
    if l.pointer_primitive_type != 0 {
        other.push_str(&format!("*({})", type_name(l.pointer_primitive_type)?));
    }
    if l.element_size_in_bits != 0 {
        other.push_str(&format!("E({})", l.element_size_in_bits));
    }
    if l.dynamic_shape_metadata_prefix_bytes != 0 {
        other.push_str(&format!("M({})", l.dynamic_shape_metadata_prefix_bytes));
    }
    Ok(ArrayLayout {
        minor_to_major: m2m.clone().into(),
        tiles: l
            .tiles
            .iter()
            .map(|t| t.dimensions.clone().into_boxed_slice())
            .collect(),
        memory_space: (l.memory_space != 0).then_some(l.memory_space),
        other: (!other.is_empty()).then(|| other.into()),
    })
}

/// The `ShapeProto` of shape `s` with layout `l` of `m` (no layout where the IR has none).
pub fn write_shape(m: &Module, s: ShapeId, l: LayoutId) -> Result<ShapeProto, String> {
    Ok(match m.shape_of(s) {
        Shape::Array(a) => ShapeProto {
            element_type: primitive_type(a.ty),
            dimensions: a.dims.to_vec(),
            is_dynamic_dimension: a.dynamic.to_vec(),
            layout: match m.layout_of(l) {
                Layout::Array(al) => Some(Box::new(write_layout(al)?)),
                _ => None,
            },
            ..Default::default()
        },
        Shape::Tuple(elems) => {
            let ls: Option<&[LayoutId]> = match m.layout_of(l) {
                Layout::Tuple(ls) if ls.len() == elems.len() => Some(ls),
                _ => None,
            };
            ShapeProto {
                element_type: TUPLE,
                tuple_shapes: elems
                    .iter()
                    .enumerate()
                    .map(|(k, &e)| write_shape(m, e, ls.map_or(m.no_layout(), |ls| ls[k])))
                    .collect::<Result<_, _>>()?,
                ..Default::default()
            }
        }
        Shape::Token => ShapeProto {
            element_type: TOKEN,
            ..Default::default()
        },
        Shape::Opaque => ShapeProto {
            element_type: OPAQUE,
            ..Default::default()
        },
    })
}

/// [`write_shape`] with a layout on every array (the default, major-to-minor, where the IR has
/// none), as XLA requires of literals and program shapes.
pub fn write_shape_with_layout(m: &Module, s: ShapeId, l: LayoutId) -> Result<ShapeProto, String> {
    let mut p = write_shape(m, s, l)?;
    fill_layouts(&mut p);
    Ok(p)
}

/// Gives every array in `p` that has no layout the default one (major-to-minor), as XLA's own
/// readers expect of every shape (a scalar gets the empty layout `{}`).
pub fn fill_layouts(p: &mut ShapeProto) {
    match p.element_type {
        TUPLE => p.tuple_shapes.iter_mut().for_each(fill_layouts),
        TOKEN | OPAQUE => {}
        _ if p.layout.is_none() => {
            p.layout = Some(Box::new(LayoutProto {
                minor_to_major: (0..p.dimensions.len() as i64).rev().collect(),
                tail_padding_alignment_in_elements: 1,
                ..Default::default()
            }))
        }
        _ => {}
    }
}

fn write_layout(al: &ArrayLayout) -> Result<LayoutProto, String> {
    let mut l = LayoutProto {
        minor_to_major: al.minor_to_major.to_vec(),
        tiles: al
            .tiles
            .iter()
            .map(|t| TileProto {
                dimensions: t.to_vec(),
            })
            .collect(),
        memory_space: al.memory_space.unwrap_or(0),
        tail_padding_alignment_in_elements: 1,
        ..Default::default()
    };
    let mut rest = al.other.as_deref().unwrap_or("");
    while !rest.is_empty() {
        let bad = || format!("layout item '{rest}' has no HloModuleProto form");
        let open = rest.find('(').ok_or_else(bad)?;
        let close = rest.find(')').ok_or_else(bad)?;
        let (item, arg) = (&rest[..open], &rest[open + 1..close]);
        let int = || arg.parse::<i64>().map_err(|_| bad());
        let ty = || {
            ElementType::from_name(arg)
                .map(primitive_type)
                .ok_or_else(bad)
        };
        match item {
            "L" => l.tail_padding_alignment_in_elements = int()?,
            "#" => l.index_primitive_type = ty()?,
            "*" => l.pointer_primitive_type = ty()?,
            "E" => l.element_size_in_bits = int()?,
            "M" => l.dynamic_shape_metadata_prefix_bytes = int()?,
            _ => return Err(bad()),
        }
        rest = &rest[close + 1..];
    }
    Ok(l)
}
