//! Checking that two modules compute the same results, through the reference evaluator.
//!
//! [`adversarial_inputs`] makes deterministic inputs for a module's entry parameters that mix
//! ordinary values with the ones that break unsafe rewrites: `±0.0`, `±inf`, NaN, subnormals,
//! huge and tiny powers of two, integer minima and maxima, `-1`, `0` and `1`.
//! [`same_results`] evaluates both modules on several such input sets and compares the results
//! with the corpus rules ([`axle_ir::compare_literals`]).
//!
//! Evaluation uses IEEE semantics (gradual underflow, [`ieee`]), not the evaluator's default
//! model of XLA CPU's flush-to-zero mode: passes keep IEEE semantics (as XLA's simplifier does),
//! and under flush-to-zero even `x * 1 -> x` would differ on subnormal inputs.

use axle_ir::literal::{complex_to_element, f64_to_element, i128_to_element};
use axle_ir::{compare_literals, ArrayLiteral, ArrayShape, Literal, Module, Shape, Tolerance};

/// The evaluator options passes are checked (and constants folded) with: IEEE arithmetic, no
/// flushing of subnormals.
pub fn ieee() -> crate::EvalOptions {
    crate::EvalOptions {
        flush_denormals: false,
    }
}

/// A small deterministic generator (SplitMix64).
#[derive(Clone, Debug)]
pub struct SplitMix(u64);

impl SplitMix {
    /// A generator seeded with `seed`.
    pub fn new(seed: u64) -> SplitMix {
        SplitMix(seed ^ 0x9e37_79b9_7f4a_7c15)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n.max(1)
    }
}

const FLOAT_SPECIALS: &[f64] = &[
    0.0,
    -0.0,
    1.0,
    -1.0,
    f64::INFINITY,
    f64::NEG_INFINITY,
    f64::NAN,
    1e-40,
    -3e-39,
    65504.0,
    // `±huge` (1e30 in `adversarial_inputs`).
    HUGE,
    -HUGE,
    0.5,
    2.0,
];

/// The placeholder for the large special value in [`FLOAT_SPECIALS`].
const HUGE: f64 = 1e30;

fn float_value(rng: &mut SplitMix, huge: f64) -> f64 {
    if rng.below(5) == 0 {
        let v = FLOAT_SPECIALS[rng.below(FLOAT_SPECIALS.len() as u64) as usize];
        if v.abs() == HUGE {
            huge.copysign(v)
        } else {
            v
        }
    } else {
        // Multiples of 1/8 in [-8, 8): exact in every float type, so narrow types see the same.
        (rng.below(128) as f64 - 64.0) / 8.0
    }
}

fn int_value(ty: axle_ir::ElementType, rng: &mut SplitMix) -> i128 {
    let b = ty.bits();
    let (lo, hi) = if ty.is_signed_int() {
        (-(1i128 << (b - 1)), (1i128 << (b - 1)) - 1)
    } else {
        (0, (1i128 << b) - 1)
    };
    match rng.below(8) {
        0 => lo,
        1 => hi,
        2 => (-1i128).clamp(lo, hi),
        3 => 0,
        4 => 1,
        _ => (rng.below(16) as i128 - 8).clamp(lo, hi),
    }
}

fn array(a: &ArrayShape, rng: &mut SplitMix, huge: f64) -> ArrayLiteral {
    let n = a.num_elements().max(0) as usize;
    let mut data = Vec::with_capacity(n * a.ty.byte_size());
    for _ in 0..n {
        let bytes = match a.ty {
            t if t.is_pred() => vec![(rng.below(2)) as u8],
            t if t.is_complex() => {
                complex_to_element(t, float_value(rng, huge), float_value(rng, huge))
            }
            t if t.is_float() => f64_to_element(t, float_value(rng, huge)),
            t => i128_to_element(t, int_value(t, rng)),
        };
        data.extend(bytes);
    }
    ArrayLiteral {
        shape: a.clone(),
        data,
    }
}

fn value(m: &Module, s: &Shape, rng: &mut SplitMix, huge: f64) -> Literal {
    match s {
        Shape::Array(a) => Literal::Array(array(a, rng, huge)),
        Shape::Tuple(es) => Literal::Tuple(
            es.iter()
                .map(|&e| value(m, m.shape_of(e), rng, huge))
                .collect(),
        ),
        Shape::Token | Shape::Opaque => Literal::Tuple(Vec::new()),
    }
}

/// Deterministic inputs for every entry parameter of `m`, with special values mixed in.
pub fn adversarial_inputs(m: &Module, seed: u64) -> Vec<Literal> {
    adversarial_inputs_with_huge(m, seed, HUGE)
}

/// [`adversarial_inputs`] with `±huge` as the large finite special value instead of `±1e30`
/// (the same draws otherwise). The `cpu` fuzz target uses `2^8`, so that the sums of
/// products of inputs are exact in `f32`, since the order of a dot's sum decides what an overflowing one gives
/// (fuzz/README.md).
pub fn adversarial_inputs_with_huge(m: &Module, seed: u64, huge: f64) -> Vec<Literal> {
    let mut rng = SplitMix::new(seed);
    let e = m.entry();
    if e.is_none() {
        return Vec::new();
    }
    m.params(e)
        .iter()
        .map(|&p| value(m, m.shape(p), &mut rng, huge))
        .collect()
}

/// The outcome of comparing two modules.
#[derive(Clone, Debug, PartialEq)]
pub enum Equivalence {
    /// Both evaluated on every input set and agreed (the count of input sets).
    Same(usize),
    /// The first module could not be evaluated (an op the evaluator does not support, say), so
    /// nothing was compared.
    NotComparable(String),
}

/// Evaluates `before` and `after` on `sets` input sets from `seed` and compares the results
/// with `tol` (integers always exactly). Fails if `after` does not evaluate where `before`
/// does, or if any result differs.
pub fn same_results(
    before: &Module,
    after: &Module,
    seed: u64,
    sets: usize,
    tol: Tolerance,
) -> Result<Equivalence, String> {
    for k in 0..sets {
        let inputs = adversarial_inputs(before, seed.wrapping_add(k as u64));
        let expected = match crate::evaluate_with(before, &inputs, &ieee()) {
            Ok(v) => v,
            Err(e) => return Ok(Equivalence::NotComparable(e.to_string())),
        };
        let actual = crate::evaluate_with(after, &inputs, &ieee())
            .map_err(|e| format!("the rewritten module does not evaluate: {e}"))?;
        compare_literals(&expected, &actual, tol)
            .map_err(|e| format!("results differ on input set {k} (seed {seed}): {e}"))?;
    }
    Ok(Equivalence::Same(sets))
}
