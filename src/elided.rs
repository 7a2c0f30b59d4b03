//! Elided constants (`constant({...})`): what the CLI and library users do with them.
//!
//! XLA's dumps and its CPU benchmark models write large constants as `constant({...})`: the shape
//! is known, the data is not. [`ElidedConstants`] says what to do with them once a module is
//! parsed: refuse it with an error naming every such constant ([`ElidedConstants::Error`], the
//! default), keep them elided ([`ElidedConstants::Keep`], so `axle parse` round-trips the text),
//! or fill them with zeros or with seeded random values ([`fill_elided_constants`]).
//!
//! Invariants: filling is deterministic in the seed and in the module (constants are visited in
//! instruction-id order, one random stream per module); random floats are small normal values
//! (standard deviation `1/sqrt(fan-in)` for arrays of rank 2 or more, where the fan-in is the
//! product of every dimension but the last, and 0.1 for scalars and vectors), so a network's
//! activations stay tame; random integers are in `[0, 8)` (valid indices into any dimension of at
//! least 8 elements; XLA clamps gather and dynamic-slice starts anyway), `pred` values fair coin
//! flips.

use std::str::FromStr;

use axle_ir::literal::{complex_to_element, f64_to_element, i128_to_element};
use axle_ir::{ArrayLiteral, ConstValue, ElementType, InstId, Literal, Module, Opcode};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

/// What to do with elided constants.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ElidedConstants {
    /// Refuse the module: an error naming every elided constant.
    #[default]
    Error,
    /// Keep them elided (a backend then refuses to compile them).
    Keep,
    /// Fill them with zeros.
    Zeros,
    /// Fill them with seeded random values that keep a network numerically tame.
    Random,
}

impl ElidedConstants {
    /// The names the CLI accepts, in order.
    pub const NAMES: [&'static str; 4] = ["error", "keep", "zeros", "random"];
}

impl FromStr for ElidedConstants {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "error" => Ok(ElidedConstants::Error),
            "keep" => Ok(ElidedConstants::Keep),
            "zeros" => Ok(ElidedConstants::Zeros),
            "random" => Ok(ElidedConstants::Random),
            _ => Err(format!(
                "unknown elided-constants mode '{s}' (expected one of {})",
                ElidedConstants::NAMES.join(", ")
            )),
        }
    }
}

/// The `constant` instructions whose value is elided, in id order.
pub fn elided_constants(m: &Module) -> Vec<InstId> {
    m.live_ids()
        .into_iter()
        .filter(|&i| {
            m.opcode(i) == Opcode::Constant && matches!(m.constant(i), Some(ConstValue::Elided))
        })
        .collect()
}

/// Applies `mode` to the elided constants of `m`: `Error` returns the elided constants' ids when
/// there are any (the caller renders them), `Keep` does nothing, `Zeros` and `Random` (from
/// `seed`) give each a value of its declared shape. Returns the number of constants filled.
pub fn apply(m: &mut Module, mode: ElidedConstants, seed: u64) -> Result<usize, Vec<InstId>> {
    let ids = elided_constants(m);
    match mode {
        ElidedConstants::Keep => Ok(0),
        ElidedConstants::Error if ids.is_empty() => Ok(0),
        ElidedConstants::Error => Err(ids),
        ElidedConstants::Zeros | ElidedConstants::Random => {
            fill(m, &ids, mode == ElidedConstants::Random, seed);
            Ok(ids.len())
        }
    }
}

/// Fills every elided constant of `m` with zeros (`random == false`) or with seeded random values
/// (see the module docs); returns how many were filled. Constants of non-array shape (never
/// produced by the parser) are left alone.
pub fn fill_elided_constants(m: &mut Module, random: bool, seed: u64) -> usize {
    let ids = elided_constants(m);
    fill(m, &ids, random, seed)
}

fn fill(m: &mut Module, ids: &[InstId], random: bool, seed: u64) -> usize {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut filled = 0;
    for &i in ids {
        let Some(shape) = m.array_shape(i).cloned() else {
            continue;
        };
        let lit = if random {
            random_array(shape, &mut rng)
        } else {
            ArrayLiteral::zeros(shape)
        };
        m.set_constant(i, ConstValue::Literal(Literal::Array(lit)));
        filled += 1;
    }
    filled
}

/// An array of small random values, see the module docs.
fn random_array(shape: axle_ir::ArrayShape, rng: &mut ChaCha8Rng) -> ArrayLiteral {
    let n = shape.num_elements().max(0) as usize;
    let dims = &shape.dims;
    let std = if dims.len() >= 2 {
        let fan_in: i64 = dims[..dims.len() - 1].iter().product();
        1.0 / (fan_in.max(1) as f64).sqrt()
    } else {
        0.1
    };
    let normal = Normal::new(0.0, std).expect("a positive standard deviation");
    let ty = shape.ty;
    let mut data = Vec::with_capacity(n * ty.byte_size());
    for _ in 0..n {
        let bytes = match ty {
            ElementType::Pred => vec![rng.random::<bool>() as u8],
            t if t.is_complex() => complex_to_element(t, normal.sample(rng), normal.sample(rng)),
            t if t.is_float() => f64_to_element(t, normal.sample(rng)),
            t => i128_to_element(t, rng.random_range(0..8)),
        };
        data.extend(bytes);
    }
    ArrayLiteral { shape, data }
}

/// The `--elided-constants error` message: one line per elided constant, with its position in
/// `file` where the module came from text.
pub fn render_error(m: &Module, ids: &[InstId], file: &str) -> String {
    let mut out = String::new();
    for &i in ids {
        let at = match m.src_loc(i) {
            Some(l) => format!("{file}:{}:{}", l.line, l.col),
            None => file.to_string(),
        };
        out.push_str(&format!(
            "{at}: error: constant '{}' has an elided value ({{...}}); give \
             --elided-constants zeros or random to fill it\n",
            m.name(i)
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TEXT: &str = "HloModule m\n\nENTRY e {\n  a = f32[4,3]{1,0} constant({...})\n  \
                        b = s32[5]{0} constant({...})\n  c = f32[] constant(2)\n  \
                        ROOT t = (f32[4,3]{1,0}, s32[5]{0}, f32[]) tuple(a, b, c)\n}\n";

    #[test]
    fn error_names_each_elided_constant_with_its_position() {
        let mut m = axle_ir::parse_module(TEXT).unwrap();
        let ids = apply(&mut m, ElidedConstants::Error, 0).unwrap_err();
        assert_eq!(ids.len(), 2);
        let msg = render_error(&m, &ids, "f.hlo");
        assert!(msg.contains("f.hlo:4:3: error: constant 'a'"), "{msg}");
        assert!(msg.contains("f.hlo:5:3: error: constant 'b'"), "{msg}");
    }

    #[test]
    fn random_fill_is_seeded_small_and_in_range() {
        let fill_with = |seed| {
            let mut m = axle_ir::parse_module(TEXT).unwrap();
            assert_eq!(apply(&mut m, ElidedConstants::Random, seed), Ok(2));
            assert!(elided_constants(&m).is_empty());
            axle_ir::verify::verify(&m).unwrap();
            axle_ir::print_module(&m)
        };
        assert_eq!(fill_with(7), fill_with(7));
        assert_ne!(fill_with(7), fill_with(8));
        let mut m = axle_ir::parse_module(TEXT).unwrap();
        fill_elided_constants(&mut m, true, 3);
        let ids = m.live_ids();
        let lit = |name: &str| {
            let i = *ids.iter().find(|&&i| m.name(i) == name).unwrap();
            m.literal(i).unwrap().as_array().unwrap().clone()
        };
        let a = lit("a").to_f64_vec();
        assert!(a.iter().all(|v| v.abs() < 5.0 / 2.0) && a.iter().any(|&v| v != 0.0));
        let b = lit("b").to_vec::<i32>().unwrap();
        assert!(b.iter().all(|v| (0..8).contains(v)), "{b:?}");
    }

    #[test]
    fn zeros_and_keep() {
        let mut m = axle_ir::parse_module(TEXT).unwrap();
        assert_eq!(apply(&mut m, ElidedConstants::Keep, 0), Ok(0));
        assert_eq!(elided_constants(&m).len(), 2);
        assert_eq!(apply(&mut m, ElidedConstants::Zeros, 0), Ok(2));
        assert!(axle_ir::print_module(&m).contains("constant({0, 0, 0, 0, 0})"));
    }
}
