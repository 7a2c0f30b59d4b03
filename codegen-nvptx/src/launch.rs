//! Launch plans: the grid and block a kernel over `n` output elements runs with.
//!
//! A reduction kernel's plan ([`LaunchPlan::for_blocks`]) is chosen by its geometry
//! (`crate::reduction`): blocks of a fixed size, each covering a fixed number of outputs; it
//! keeps the invariants below on the block, the grid limit and zero-sized outputs, and computes
//! its indices in 64 bits from the block index (`wide_index` is unset).
//!
//! A loop kernel computes one element per thread (a vectorized one computes several, and its
//! plan is made for its thread count, `n` then counting threads:
//! `crate::kernels::KernelKind::VectorLoop`): thread `t` of the grid (counted
//! `block_index * block + thread_index`) computes element `t` when `t < n` and does nothing
//! otherwise. Blocks are [`MAX_BLOCK`] threads, or fewer for a small array (a whole number of
//! warps, at least one); the grid is the fewest blocks covering `n`.
//!
//! Invariants:
//! - `grid * block >= n`, and `(grid - 1) * block < n` (no block is wholly idle);
//! - `block` is a multiple of [`WARP`] and at most [`MAX_BLOCK`];
//! - a zero-sized array has no launch (`grid == 0`, `block == 0`): CUDA refuses empty grids;
//! - `wide_index` is set exactly when some launched thread's index does not fit in an `i32`;
//!   the kernel then computes its thread index in 64 bits (otherwise in 32 bits, which the
//!   hardware multiplies in one instruction);
//! - the grid fits CUDA's limit on `gridDim.x` ([`MAX_GRID`]), else the plan is an error.

/// Threads of a warp.
pub const WARP: u64 = 32;
/// Threads of a block of a loop kernel.
pub const MAX_BLOCK: u64 = 256;
/// CUDA's largest `gridDim.x`.
pub const MAX_GRID: u64 = (1 << 31) - 1;

/// How one kernel is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LaunchPlan {
    /// The elements the kernel computes (the output's element count).
    pub elements: u64,
    /// Blocks in the grid (x dimension); 0 when there is nothing to compute.
    pub grid: u64,
    /// Threads per block (x dimension); 0 when there is nothing to compute.
    pub block: u64,
    /// Whether the thread index needs 64 bits.
    pub wide_index: bool,
}

impl LaunchPlan {
    /// The plan of a loop kernel over `elements` output elements; an error when the grid
    /// would pass CUDA's limit.
    pub fn for_elements(elements: u64) -> Result<LaunchPlan, crate::NvptxError> {
        if elements == 0 {
            return Ok(LaunchPlan {
                elements,
                grid: 0,
                block: 0,
                wide_index: false,
            });
        }
        let block = elements.div_ceil(WARP).saturating_mul(WARP).min(MAX_BLOCK);
        let grid = elements.div_ceil(block);
        if grid > MAX_GRID {
            return Err(crate::NvptxError::Launch(format!(
                "{elements} elements need {grid} blocks of {block} threads, more than CUDA's \
                 {MAX_GRID}"
            )));
        }
        let threads = grid * block;
        Ok(LaunchPlan {
            elements,
            grid,
            block,
            wide_index: threads - 1 > i32::MAX as u64,
        })
    }

    /// The plan of a kernel over `elements` outputs run as `grid` blocks of `block` threads (a
    /// reduction kernel, whose geometry chose them); no launch when there are no outputs; an
    /// error when the grid passes CUDA's limit or the block is not whole warps of at most
    /// [`MAX_BLOCK`] threads.
    pub fn for_blocks(
        elements: u64,
        grid: u64,
        block: u64,
    ) -> Result<LaunchPlan, crate::NvptxError> {
        if elements == 0 {
            return LaunchPlan::for_elements(0);
        }
        if block == 0 || !block.is_multiple_of(WARP) || block > MAX_BLOCK {
            return Err(crate::NvptxError::Launch(format!(
                "a block of {block} threads is not whole warps of at most {MAX_BLOCK} threads"
            )));
        }
        if grid == 0 || grid > MAX_GRID {
            return Err(crate::NvptxError::Launch(format!(
                "{elements} outputs need {grid} blocks of {block} threads, outside CUDA's 1 to \
                 {MAX_GRID}"
            )));
        }
        Ok(LaunchPlan {
            elements,
            grid,
            block,
            wide_index: false,
        })
    }

    /// Whether the kernel is launched at all.
    pub fn launches(&self) -> bool {
        self.grid > 0
    }

    /// The threads launched (`grid * block`).
    pub fn threads(&self) -> u64 {
        self.grid * self.block
    }
}

impl std::fmt::Display for LaunchPlan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.launches() {
            return write!(f, "no launch (0 elements)");
        }
        write!(
            f,
            "grid {} x block {} for {} elements{}",
            self.grid,
            self.block,
            self.elements,
            if self.wide_index {
                ", 64-bit index"
            } else {
                ""
            }
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::NvptxError;

    /// Checks every invariant of the module header on `p`.
    fn check(p: &LaunchPlan) {
        assert!(
            p.block.is_multiple_of(WARP) && p.block <= MAX_BLOCK,
            "{p:?}"
        );
        assert!(p.threads() >= p.elements, "{p:?}");
        if p.launches() {
            assert!((p.grid - 1) * p.block < p.elements, "{p:?}");
            assert_eq!(p.wide_index, p.threads() - 1 > i32::MAX as u64, "{p:?}");
        }
        assert!(p.grid <= MAX_GRID, "{p:?}");
    }

    #[test]
    fn zero_sized_arrays_have_no_launch() {
        let p = LaunchPlan::for_elements(0).unwrap();
        assert!(!p.launches());
        assert_eq!((p.grid, p.block, p.wide_index), (0, 0, false));
        assert_eq!(p.to_string(), "no launch (0 elements)");
    }

    #[test]
    fn odd_sizes_round_up_to_whole_warps_and_blocks() {
        for (n, grid, block) in [
            (1, 1, 32),
            (31, 1, 32),
            (33, 1, 64),
            (255, 1, 256),
            (257, 2, 256),
            (1000, 4, 256),
            (1025, 5, 256),
            (999_999, 3907, 256),
        ] {
            let p = LaunchPlan::for_elements(n).unwrap();
            assert_eq!((p.grid, p.block), (grid, block), "n = {n}");
            assert!(!p.wide_index, "n = {n}");
            check(&p);
        }
    }

    #[test]
    fn arrays_past_two_to_the_31_take_the_64_bit_index_path() {
        // The last 32-bit thread index: 2^31 threads exactly are indices 0..=2^31-1.
        let p = LaunchPlan::for_elements(1 << 31).unwrap();
        assert!(!p.wide_index);
        check(&p);
        for n in [(1u64 << 31) + 1, 3 << 30, (1 << 32) + 7, 1 << 38] {
            let p = LaunchPlan::for_elements(n).unwrap();
            assert!(p.wide_index, "n = {n}");
            check(&p);
        }
        // One element past what fits in `i32` threads: the rounded-up grid reaches it too.
        let p = LaunchPlan::for_elements(i32::MAX as u64 + 2).unwrap();
        assert!(p.wide_index && p.threads() > i32::MAX as u64 + 1);
    }

    #[test]
    fn grids_past_cudas_limit_are_an_error() {
        let largest = MAX_GRID * MAX_BLOCK;
        check(&LaunchPlan::for_elements(largest).unwrap());
        let e = LaunchPlan::for_elements(largest + 1).unwrap_err();
        assert!(
            matches!(&e, NvptxError::Launch(m) if m.contains("more than CUDA's")),
            "{e}"
        );
    }

    #[test]
    fn many_sizes_keep_the_invariants() {
        let mut n = 1u64;
        while n < MAX_GRID * MAX_BLOCK - 64 {
            for d in [0, 1, 31, 32, 33] {
                check(&LaunchPlan::for_elements(n + d).unwrap());
            }
            n = n * 3 + 1;
        }
    }
}
