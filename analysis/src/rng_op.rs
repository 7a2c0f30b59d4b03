//! The old stateful `rng` instruction (`rng(a, b), distribution=rng_uniform` or
//! `rng_normal`). XLA's values come from its own generator and are implementation-defined;
//! Axle's come from a generator of its own, keyed by the instruction's name, so that every
//! backend gives the same values and every run the same ones.
//!
//! - Unit values ([`unit_values`]): element `i` of an instruction named `N` takes the next draws
//!   of one SplitMix64 stream seeded with the FNV-1a hash of `N` (one draw per element for
//!   `rng_uniform`, two for `rng_normal`). Uniform: the top `p` bits of a draw over `2^p`, `p`
//!   the type's significand precision, so each unit value is exact in the type and lies in
//!   `[0, 1)`. Normal: Box-Muller on two such draws (in `f64`), rounded to the type.
//! - Values ([`evaluate`]): uniform `r = a + (b - a) * u`, each op rounded to the element type
//!   as HLO's are, then `select(r < b, r, a)`, so that rounding never reaches `b` (and `a` when
//!   the range is empty); normal `mu + sigma * z`. The `cpu` pipeline's `rng-expander` pass
//!   writes exactly these ops around a constant of the unit values; the evaluator computes them
//!   directly.
//! - Invariants: the values depend only on the name, element type, shape and operands; an
//!   `rng` evaluated twice (in a loop body) gives the same values both times, where XLA's state
//!   advances.
//! - Supported: `f16`, `bf16`, `f32`, `f64` results of at most [`MAX_ELEMENTS`] elements; other
//!   element types and larger results are refused naming the instruction.

use axle_ir::literal::{element_to_f64, f64_to_element};
use axle_ir::{ArrayLiteral, ArrayShape, AttrKey, AttrValue, ElementType, InstId, Module};

/// Most elements one `rng` may have (the `cpu` backend holds its unit values as a constant).
pub const MAX_ELEMENTS: usize = 1 << 22;

/// The distribution of an `rng` instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Distribution {
    /// `rng_uniform`: `[a, b)`.
    Uniform,
    /// `rng_normal`: mean `a`, standard deviation `b`.
    Normal,
}

/// The distribution, element type and dimensions of `rng` instruction `id`, or why it is not
/// supported.
pub fn describe(m: &Module, id: InstId) -> Result<(Distribution, ElementType, Vec<i64>), String> {
    let name = m.name(id);
    let dist = match m.attr(id, &AttrKey::Distribution) {
        Some(AttrValue::Ident(s)) | Some(AttrValue::Str(s)) | Some(AttrValue::Raw(s)) => {
            match s.as_ref() {
                "rng_uniform" => Distribution::Uniform,
                "rng_normal" => Distribution::Normal,
                other => return Err(format!("rng {name}: unknown distribution {other}")),
            }
        }
        _ => return Err(format!("rng {name}: no distribution")),
    };
    let a = m
        .array_shape(id)
        .ok_or_else(|| format!("rng {name}: the result must be an array"))?;
    if !matches!(
        a.ty,
        ElementType::F16 | ElementType::BF16 | ElementType::F32 | ElementType::F64
    ) {
        return Err(format!(
            "rng {name}: rng of {} is not supported (only f16, bf16, f32 and f64)",
            a.ty
        ));
    }
    let n: usize = a.dims.iter().map(|&d| d.max(0) as usize).product();
    if n > MAX_ELEMENTS {
        return Err(format!(
            "rng {name}: {n} elements is more than the {MAX_ELEMENTS} an rng may have"
        ));
    }
    Ok((dist, a.ty, a.dims.to_vec()))
}

/// FNV-1a, 64 bits.
fn fnv1a(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// One SplitMix64 stream.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }
}

/// Significand precision (bits, the implicit one included) of a supported type.
fn precision(ty: ElementType) -> u32 {
    match ty {
        ElementType::F16 => 11,
        ElementType::BF16 => 8,
        ElementType::F32 => 24,
        _ => 53,
    }
}

/// The unit values of an `rng` named `name` with `n` elements of `ty`: uniform in `[0, 1)` or
/// standard normal (see the module docs), as `f64` (each exact in `ty`).
pub fn unit_values(name: &str, dist: Distribution, ty: ElementType, n: usize) -> Vec<f64> {
    let mut s = SplitMix(fnv1a(name));
    let p = precision(ty);
    let unit = |s: &mut SplitMix| (s.next() >> (64 - p)) as f64 / (1u64 << p) as f64;
    (0..n)
        .map(|_| match dist {
            Distribution::Uniform => unit(&mut s),
            Distribution::Normal => {
                // 1 - u lies in (0, 1], so the logarithm is finite.
                let u1 = 1.0 - unit(&mut s);
                let u2 = unit(&mut s);
                let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
                round(ty, z)
            }
        })
        .collect()
}

/// The unit values as a literal of `ty` and `dims`.
pub fn unit_literal(name: &str, dist: Distribution, ty: ElementType, dims: &[i64]) -> ArrayLiteral {
    let n: usize = dims.iter().map(|&d| d.max(0) as usize).product();
    let data = unit_values(name, dist, ty, n)
        .into_iter()
        .flat_map(|v| f64_to_element(ty, v))
        .collect();
    ArrayLiteral {
        shape: ArrayShape::new(ty, dims),
        data,
    }
}

/// `v` rounded to `ty`.
fn round(ty: ElementType, v: f64) -> f64 {
    element_to_f64(ty, &f64_to_element(ty, v))
}

/// The value of `rng` instruction `id` with scalar operands `a` and `b`.
pub fn evaluate(
    m: &Module,
    id: InstId,
    a: &ArrayLiteral,
    b: &ArrayLiteral,
) -> Result<ArrayLiteral, String> {
    let (dist, ty, dims) = describe(m, id)?;
    if a.ty() != ty || b.ty() != ty || a.len() != 1 || b.len() != 1 {
        return Err(format!(
            "rng {}: the operands must be scalars of {ty}",
            m.name(id)
        ));
    }
    let (a, b) = (element_to_f64(ty, &a.data), element_to_f64(ty, &b.data));
    let n: usize = dims.iter().map(|&d| d.max(0) as usize).product();
    let data = unit_values(m.name(id), dist, ty, n)
        .into_iter()
        .map(|u| match dist {
            Distribution::Uniform => {
                let r = round(ty, a + round(ty, round(ty, b - a) * u));
                if r < b {
                    r
                } else {
                    a
                }
            }
            Distribution::Normal => round(ty, a + round(ty, b * u)),
        })
        .flat_map(|v| f64_to_element(ty, v))
        .collect();
    Ok(ArrayLiteral {
        shape: ArrayShape::new(ty, &dims),
        data,
    })
}
