//! Array leaves of shapes: how many a shape has, their byte sizes, and where a tuple element's
//! leaves start. Buffers are per array leaf (a tuple owns no memory of its own), so every
//! analysis of this crate sees a value as a run of leaves.
//!
//! [`ShapeLeaves`] is a table over the module's interned shapes, built once (shapes are few):
//! leaves are numbered depth-first; tokens and opaque values have none; an array leaf's size is
//! its element count (dynamic dimensions at their bound) times its element's byte size.

use axle_ir::{Module, Shape, ShapeId};

/// Leaf counts and sizes of every interned shape of a module.
#[derive(Clone, Debug, Default)]
pub struct ShapeLeaves {
    off: Vec<u32>,
    bytes: Vec<u64>,
}

/// The byte size of an array leaf of shape `s` (0 for tuples, tokens and opaque values).
pub fn array_bytes(s: &Shape) -> u64 {
    match s {
        Shape::Array(a) => a.num_elements().max(0) as u64 * a.ty.byte_size() as u64,
        _ => 0,
    }
}

impl ShapeLeaves {
    /// The table for every shape interned in `m`.
    pub fn new(m: &Module) -> ShapeLeaves {
        let n = m.num_shapes();
        let mut off = Vec::with_capacity(n + 1);
        let mut bytes = Vec::new();
        for s in 0..n {
            off.push(bytes.len() as u32);
            collect(m, ShapeId::new(s), &mut bytes);
        }
        off.push(bytes.len() as u32);
        ShapeLeaves { off, bytes }
    }

    /// The number of array leaves of shape `s`.
    pub fn count(&self, s: ShapeId) -> u32 {
        self.off[s.index() + 1] - self.off[s.index()]
    }

    /// The byte sizes of the array leaves of shape `s`, depth-first.
    pub fn bytes(&self, s: ShapeId) -> &[u64] {
        &self.bytes[self.off[s.index()] as usize..self.off[s.index() + 1] as usize]
    }

    /// Where the leaves of element `k` of tuple shape `s` start among `s`'s leaves, and how
    /// many there are; `None` if `s` has no element `k`.
    pub fn element(&self, m: &Module, s: ShapeId, k: usize) -> Option<(u32, u32)> {
        let Shape::Tuple(es) = m.shape_of(s) else {
            return None;
        };
        let e = *es.get(k)?;
        let start: u32 = es[..k].iter().map(|&x| self.count(x)).sum();
        Some((start, self.count(e)))
    }
}

fn collect(m: &Module, s: ShapeId, out: &mut Vec<u64>) {
    match m.shape_of(s) {
        Shape::Tuple(es) => {
            for &e in es.iter() {
                collect(m, e, out);
            }
        }
        a @ Shape::Array(_) => out.push(array_bytes(a)),
        Shape::Token | Shape::Opaque => {}
    }
}
