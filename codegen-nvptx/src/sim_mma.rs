//! The simulator's semantics of `mma.sync.aligned.m16n8k16.row.col.f32.T.T.f32` (`T` `f16` or
//! `bf16`): `D = A B + C` for a 16 x 16 `A`, a 16 x 8 `B` and 16 x 8 `C` and `D`, whose elements
//! are spread over the 32 lanes of a warp as the PTX ISA's "Matrix Fragments for mma.m16n8k16
//! with floating point type" says (`group = lane / 4`, `quad = lane % 4`; a 32-bit register
//! holds two 16-bit elements, the lower-numbered one in its low half):
//! - A, registers `a0..a3` holding elements `a0..a7`: element `ai` is at row `group` for
//!   `i` in `0..2` and `4..6`, `group + 8` otherwise, column `2 quad + (i & 1)`, `+ 8` for
//!   `i >= 4`;
//! - B, registers `b0, b1` holding `b0..b3`: element `bi` is at row `2 quad + (i & 1)`, `+ 8`
//!   for `i >= 2`, column `group`;
//! - C and D, four `f32` each: element `ci` is at row `group` for `i < 2`, `group + 8`
//!   otherwise, column `2 quad + (i & 1)`.
//!
//! [`lane_result`] computes one lane's `D` from every lane's fragments (the warp-collective
//! exchange is `crate::sim_threads`'s); each element of A and B is read from the lane and
//! register half the layout puts it in, so a kernel that places a fragment anywhere else gets
//! a wrong result here, as it would on a GPU.
//!
//! Arithmetic: each product of two `f16` or `bf16` values is exact in `f32`; for each element
//! of `D` the 16 products are summed in `f32` in depth order (starting from zero), then the
//! sum is added to `C`'s element, one more rounding. PTX leaves the tensor core's summation
//! order and intermediate precision unspecified; this is one fixed order, not the hardware's
//! bit for bit, and not the evaluator's either (which adds each product to the running sum):
//! results agree within the dtype tolerances.
//!
//! Invariants: total (no panic on any bit pattern; NaN and infinities propagate as in `f32`
//! arithmetic).

use half::{bf16, f16};

/// Lanes of a warp.
pub(crate) const LANES: usize = 32;

/// The operand type of an `mma`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum MmaElem {
    /// `f16` (`kind` 0 at the hook).
    F16,
    /// `bf16` (`kind` 1 at the hook).
    Bf16,
}

impl MmaElem {
    /// The operand type of hook argument `kind`.
    pub(crate) fn from_kind(kind: u32) -> Option<MmaElem> {
        match kind {
            0 => Some(MmaElem::F16),
            1 => Some(MmaElem::Bf16),
            _ => None,
        }
    }

    /// The value of 16-bit pattern `bits`, exactly.
    fn decode(self, bits: u16) -> f32 {
        match self {
            MmaElem::F16 => f16::from_bits(bits).to_f32(),
            MmaElem::Bf16 => bf16::from_bits(bits).to_f32(),
        }
    }
}

/// One lane's registers of one `mma`.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Fragments {
    /// A's four 32-bit registers.
    pub a: [u32; 4],
    /// B's two 32-bit registers.
    pub b: [u32; 2],
    /// C's four `f32` elements.
    pub c: [f32; 4],
}

/// The 16-bit half `half` (0 low, 1 high) of register `r`.
fn half_of(r: u32, half: usize) -> u16 {
    (r >> (16 * half)) as u16
}

/// Where element `(row, k)` of A is: (lane, register, half).
fn a_place(row: usize, k: usize) -> (usize, usize, usize) {
    ((row % 8) * 4 + (k % 8) / 2, (k / 8) * 2 + row / 8, k % 2)
}

/// Where element `(k, col)` of B is: (lane, register, half).
fn b_place(k: usize, col: usize) -> (usize, usize, usize) {
    (col * 4 + (k % 8) / 2, k / 8, k % 2)
}

/// The `D` elements of lane `lane` (`0..32`) of an `mma` whose lanes hold `frags`.
pub(crate) fn lane_result(elem: MmaElem, frags: &[Fragments; LANES], lane: usize) -> [f32; 4] {
    let (group, quad) = (lane / 4, lane % 4);
    let a = |row: usize, k: usize| {
        let (l, r, h) = a_place(row, k);
        elem.decode(half_of(frags[l].a[r], h))
    };
    let b = |k: usize, col: usize| {
        let (l, r, h) = b_place(k, col);
        elem.decode(half_of(frags[l].b[r], h))
    };
    let mut d = [0.0f32; 4];
    for (i, out) in d.iter_mut().enumerate() {
        let row = group + 8 * (i / 2);
        let col = 2 * quad + i % 2;
        let mut sum = 0.0f32;
        for k in 0..16 {
            // Exact: at most 22 significant bits, within f32's range.
            sum += a(row, k) * b(k, col);
        }
        *out = frags[lane].c[i] + sum;
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small deterministic generator (splitmix64).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
    }

    /// Matrices A (16 x 16), B (16 x 8), C (16 x 8) as values and 16-bit patterns, spread
    /// over the lanes by the PTX ISA's formulas, written forward (lane and index to row and
    /// column) as the ISA states them, independently of `a_place` and `b_place`.
    #[derive(Clone)]
    struct Case {
        a: [[u16; 16]; 16],
        b: [[u16; 8]; 16],
        c: [[f32; 8]; 16],
        frags: [Fragments; LANES],
    }

    fn encode(elem: MmaElem, v: f32) -> u16 {
        match elem {
            MmaElem::F16 => f16::from_f32(v).to_bits(),
            MmaElem::Bf16 => bf16::from_f32(v).to_bits(),
        }
    }

    fn case(elem: MmaElem, rng: &mut Rng, value: &mut dyn FnMut(&mut Rng) -> f32) -> Case {
        let mut a = [[0u16; 16]; 16];
        let mut b = [[0u16; 8]; 16];
        let mut c = [[0f32; 8]; 16];
        a.iter_mut()
            .flatten()
            .chain(b.iter_mut().flatten())
            .for_each(|x| *x = encode(elem, value(rng)));
        c.iter_mut().flatten().for_each(|x| *x = value(rng) * 4.0);
        let mut frags = [Fragments::default(); LANES];
        for (lane, f) in frags.iter_mut().enumerate() {
            let (group, tig) = (lane >> 2, lane % 4);
            for i in 0..8 {
                let row = if i < 2 || (4..6).contains(&i) {
                    group
                } else {
                    group + 8
                };
                let col = tig * 2 + (i & 1) + if i >= 4 { 8 } else { 0 };
                f.a[i / 2] |= (a[row][col] as u32) << (16 * (i % 2));
            }
            for i in 0..4 {
                let row = tig * 2 + (i & 1) + if i >= 2 { 8 } else { 0 };
                f.b[i / 2] |= (b[row][group] as u32) << (16 * (i % 2));
            }
            for i in 0..4 {
                let row = if i < 2 { group } else { group + 8 };
                f.c[i] = c[row][tig * 2 + (i & 1)];
            }
        }
        Case { a, b, c, frags }
    }

    /// `D = A B + C` by a plain triple loop in `f64`, laid out as a matrix.
    fn reference(elem: MmaElem, k: &Case) -> [[f64; 8]; 16] {
        let mut d = [[0f64; 8]; 16];
        for (row, drow) in d.iter_mut().enumerate() {
            for (col, x) in drow.iter_mut().enumerate() {
                *x = k.c[row][col] as f64
                    + (0..16)
                        .map(|j| elem.decode(k.a[row][j]) as f64 * elem.decode(k.b[j][col]) as f64)
                        .sum::<f64>();
            }
        }
        d
    }

    /// Every lane's `D`, laid out by the ISA's accumulator formula.
    fn simulated(elem: MmaElem, k: &Case) -> [[f64; 8]; 16] {
        let mut d = [[f64::NAN; 8]; 16];
        for lane in 0..LANES {
            let r = lane_result(elem, &k.frags, lane);
            for (i, v) in r.iter().enumerate() {
                let row = if i < 2 { lane >> 2 } else { (lane >> 2) + 8 };
                d[row][(lane % 4) * 2 + (i & 1)] = *v as f64;
            }
        }
        d
    }

    #[test]
    fn the_warp_computes_a_times_b_plus_c_with_the_isa_layout() {
        let mut rng = Rng(7);
        for elem in [MmaElem::F16, MmaElem::Bf16] {
            // Multiples of 1/8 in [-8, 8): every product and sum is exact in f32, so the
            // simulator matches the reference exactly whatever its order.
            for _ in 0..20 {
                let k = case(elem, &mut rng, &mut |r| (r.next() % 128) as f32 / 8.0 - 8.0);
                assert_eq!(simulated(elem, &k), reference(elem, &k), "{elem:?}");
            }
            // Random values over a wide range: within f32 rounding of the exact sum.
            for _ in 0..20 {
                let k = case(elem, &mut rng, &mut |r| {
                    let m = (r.next() % 2048) as f32 / 1024.0 - 1.0;
                    m * 2f32.powi((r.next() % 9) as i32 - 4)
                });
                let (got, want) = (simulated(elem, &k), reference(elem, &k));
                for (g, w) in got.iter().flatten().zip(want.iter().flatten()) {
                    // 17 roundings of partial sums below 16 * 256 + 64.
                    let bound = 17.0 * 4160.0 * f32::EPSILON as f64;
                    assert!((g - w).abs() <= bound, "{g} {w}");
                }
            }
        }
    }

    #[test]
    fn a_fragment_in_the_wrong_place_changes_the_result() {
        let mut rng = Rng(11);
        let elem = MmaElem::F16;
        let k = case(elem, &mut rng, &mut |r| (r.next() % 64) as f32 / 4.0 - 8.0);
        let want = reference(elem, &k);
        assert_eq!(simulated(elem, &k), want);
        // A's registers 1 and 2 swapped (rows 8..16 and columns 8..16 confused), or B's two
        // registers swapped, in every lane: a wrong product.
        let mut swapped = k.clone();
        for f in swapped.frags.iter_mut() {
            f.a.swap(1, 2);
        }
        assert_ne!(simulated(elem, &swapped), want);
        let mut swapped = k.clone();
        for f in swapped.frags.iter_mut() {
            f.b.swap(0, 1);
        }
        assert_ne!(simulated(elem, &swapped), want);
    }

    #[test]
    fn nan_and_infinities_propagate() {
        let mut frags = [Fragments::default(); LANES];
        // A(0, 0) = inf (lane 0, a0 low), B(0, 0) = 0 (lane 0, b0 low): inf * 0 = NaN in
        // D(0, 0); B(0, 1) = 1 (lane 4, b0 low): D(0, 1) = inf.
        frags[0].a[0] = f16::INFINITY.to_bits() as u32;
        frags[4].b[0] = f16::ONE.to_bits() as u32;
        let d0 = lane_result(MmaElem::F16, &frags, 0);
        assert!(d0[0].is_nan(), "{d0:?}");
        assert_eq!(d0[1], f32::INFINITY, "{d0:?}");
        assert_eq!(d0[2], 0.0);
    }
}
