//! XLA CPU's tree order for long reductions of narrow floats: where one `reduce` of a float
//! type narrower than 32 bits folds more than [`WINDOW`] elements along some dimension, it is
//! computed as windows of at most [`WINDOW`] per reduced dimension, each folded from the init
//! value, and then a reduction of the windows' results, level after level until no reduced
//! dimension is longer than [`WINDOW`].
//!
//! This is what XLA's CPU compiler does (its `TreeReductionRewriter`, run to a fixed point in
//! its simplification pipeline: a `reduce-window` with window and stride `min(d, 32)` per
//! reduced dimension and `SAME` padding, then a `reduce` of that), and with a
//! reducer that rounds every step to `bf16` or `f16` the order is the result: a sequential
//! fold of 1000 `bf16` ones stops at 256 (256 + 1 rounds back to 256), where XLA gives 1000.
//! Checked with jax 0.10.2 on CPU: 1000 ones, 1000 uniform values in `[0, 1)` and a
//! `[8, 125]` array reduced over both dimensions give XLA's results bit for bit when folded in
//! this order, and a sum of 48 elements over dimensions no longer than 32 is XLA's plain
//! sequential fold.
//!
//! Invariants of a [`TreeLevel`] for `dims` and its reduced dimensions: a kept dimension has
//! window 1, stride 1 and no padding; a reduced dimension `d` has window `w = min(d, WINDOW)`,
//! `out = ceil(d / w)` windows, and `pad_lo + pad_hi = out * w - d` with `pad_lo` the smaller
//! half (XLA's `SAME` padding). Within a window, elements are folded in row-major order of the
//! reduced dimensions, from the init value, and padding positions are skipped: XLA's compiled
//! `reduce-window` folds only the elements that exist (checked: a `f16` sum from `0.5` over
//! `[3, 70, 40]` comes out 36 = 72 x 0.5 lower than with the padding folded as the init
//! value, `analysis/tests/xla/tree_reduce_narrow`). Both the evaluator
//! (`axle_analysis`'s `reduce`) and the `tree-reduce` pass of the `cpu` pipeline use this rule,
//! so the backend and the reference agree bit for bit and with XLA.

use crate::types::ElementType;

/// The longest reduced dimension folded in one window.
pub const WINDOW: i64 = 32;

/// Whether reductions producing `ty` follow the tree order: real floats narrower than 32 bits.
/// Wider floats keep their own orders (the evaluator's pairwise tree, the backends' vector
/// lanes), which differ from XLA's by rounding within the per-type tolerances; integer and
/// `pred` folds with one associative op give the same result in any order.
pub fn applies_to(ty: ElementType) -> bool {
    ty.is_float() && ty.bits() < 32
}

/// One level of the tree: per dimension of the operand, its window, the windows along it and
/// the padding before and after.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TreeLevel {
    /// Window size per dimension (1 where not reduced).
    pub window: Vec<i64>,
    /// Windows per dimension (the dimension itself where not reduced).
    pub out: Vec<i64>,
    /// Padding before the first element, per dimension.
    pub pad_lo: Vec<i64>,
    /// Padding after the last element, per dimension.
    pub pad_hi: Vec<i64>,
}

/// The next level for an operand of `dims` reduced over the dimensions where `reduced` is
/// true, or `None` when no reduced dimension is longer than [`WINDOW`] (the reduction then
/// folds its elements in order), when one is empty, or when a padded length would not fit in
/// an `i64` (no array that long exists; such a reduction is left as it is).
pub fn tree_level(dims: &[i64], reduced: &[bool]) -> Option<TreeLevel> {
    let long = dims.iter().zip(reduced).any(|(&d, &r)| r && d > WINDOW);
    let empty = dims.iter().zip(reduced).any(|(&d, &r)| r && d == 0);
    if !long || empty {
        return None;
    }
    let mut level = TreeLevel {
        window: Vec::with_capacity(dims.len()),
        out: Vec::with_capacity(dims.len()),
        pad_lo: Vec::with_capacity(dims.len()),
        pad_hi: Vec::with_capacity(dims.len()),
    };
    for (&d, &r) in dims.iter().zip(reduced) {
        let w = if r { d.min(WINDOW) } else { 1 };
        let out = if r { d / w + i64::from(d % w != 0) } else { d };
        let pad = if r { out.checked_mul(w)? - d } else { 0 };
        level.window.push(w);
        level.out.push(out);
        level.pad_lo.push(pad / 2);
        level.pad_hi.push(pad - pad / 2);
    }
    Some(level)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_follow_xlas_windows_and_same_padding() {
        assert_eq!(tree_level(&[48], &[true]).map(|l| l.out), Some(vec![2]));
        let l = tree_level(&[8, 125], &[true, true]).unwrap();
        assert_eq!(l.window, vec![8, 32]);
        assert_eq!(l.out, vec![1, 4]);
        assert_eq!((l.pad_lo, l.pad_hi), (vec![0, 1], vec![0, 2]));
        // Kept dimensions are untouched; short reductions and empty ones have no level.
        let l = tree_level(&[5, 1000], &[false, true]).unwrap();
        assert_eq!((l.window, l.out), (vec![1, 32], vec![5, 32]));
        assert_eq!(tree_level(&[4, 3, 4], &[true, true, true]), None);
        assert_eq!(tree_level(&[0, 100], &[true, true]), None);
        assert_eq!(tree_level(&[100, 7], &[false, true]), None);
        // Lengths near the largest `i64`: no overflow, and no level where padding would not fit.
        assert_eq!(tree_level(&[i64::MAX], &[true]), None);
        let l = tree_level(&[1 << 62, 0], &[true, false]).unwrap();
        assert_eq!(l.out, vec![1 << 57, 0]);
    }

    #[test]
    fn only_narrow_real_floats() {
        use ElementType::*;
        assert!(applies_to(BF16) && applies_to(F16) && applies_to(F8E4M3FN));
        assert!(!applies_to(F32) && !applies_to(F64) && !applies_to(S16) && !applies_to(C64));
    }
}
