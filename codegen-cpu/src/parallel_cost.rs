//! Threads by cost: whether a kernel's work pays for splitting it across threads.
//!
//! Handing a kernel to the pool costs microseconds (waking threads, joining them), which is
//! more than a small kernel's whole run: a small model split across threads runs slower than on
//! one. So each kernel's grain (the fewest work items worth a range of their own; the runtime
//! splits only kernels with at least two grains) is raised until one grain holds
//! [`MIN_CHUNK_NS`] of estimated work. The estimate comes from the cost model
//! ([`axle_analysis::cost::inst_cost`]: operations, transcendental operations and bytes moved,
//! summed over a fusion's instructions) at rates measured on one core of the project's machine.
//! It only ever raises a grain, so large kernels split as before.

use axle_analysis::cost::{inst_cost, Cost};
use axle_ir::{InstId, Module, Opcode};

/// Elements per work item group below which a kernel is not worth splitting.
pub(crate) const GRAIN_ELEMS: i64 = 1 << 15;

/// The least estimated work of one range of a split kernel: a few times the cost of handing
/// ranges to pool threads and joining them.
pub(crate) const MIN_CHUNK_NS: f64 = 50_000.0;

/// Nanoseconds per operation of matrix products and convolutions (register-tiled kernels,
/// about 50 GFLOP/s on one core).
const NS_PER_TILED_FLOP: f64 = 0.02;
/// Nanoseconds per operation of other kernels.
const NS_PER_FLOP: f64 = 0.25;
/// Extra nanoseconds per transcendental operation.
const NS_PER_TRANSCENDENTAL: f64 = 2.0;
/// Nanoseconds per byte read or written (about 10 GB/s on one core).
const NS_PER_BYTE: f64 = 0.1;

/// The estimated single-thread time of a kernel: instruction `origin`, or for a fusion its
/// fused instructions (those reachable from `root` in its computation) with the fusion's own
/// operands and result as the bytes moved.
pub(crate) fn kernel_ns(m: &Module, origin: InstId, root: InstId) -> f64 {
    let own = inst_cost(m, origin);
    let (ops, tiled) = if m.opcode(origin) == Opcode::Fusion {
        let comp = m.parent(root);
        let mut c = Cost::default();
        let mut tiled = false;
        let mut seen = hashbrown::HashSet::new();
        let mut stack = vec![root];
        while let Some(i) = stack.pop() {
            if !seen.insert(i) {
                continue;
            }
            tiled |= matches!(m.opcode(i), Opcode::Dot | Opcode::Convolution);
            c = c + inst_cost(m, i);
            stack.extend(m.operands(i).iter().filter(|&&o| m.parent(o) == comp));
        }
        (c, tiled)
    } else {
        (
            own,
            matches!(m.opcode(origin), Opcode::Dot | Opcode::Convolution),
        )
    };
    let per_flop = if tiled {
        NS_PER_TILED_FLOP
    } else {
        NS_PER_FLOP
    };
    ops.flops * per_flop + ops.transcendentals * NS_PER_TRANSCENDENTAL + own.bytes * NS_PER_BYTE
}

/// The grain of a kernel of `items` work items and estimated time `ns`: at least `grain` (the
/// emitter's), and at least enough items for [`MIN_CHUNK_NS`].
pub(crate) fn grain_by_cost(items: i64, grain: i64, ns: f64) -> i64 {
    if items <= 0 || ns <= 0.0 {
        return grain;
    }
    let per_item = ns / items as f64;
    let by_cost = (MIN_CHUNK_NS / per_item).ceil().min(i64::MAX as f64) as i64;
    grain.max(by_cost).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_kernels_stay_whole_and_large_ones_split() {
        // A 1M-operation matrix product in 4 items: about 21 us, below two chunks.
        let g = grain_by_cost(4, 1, 1e6 * NS_PER_TILED_FLOP);
        assert!(4 < 2 * g, "grain {g}");
        // A 2G-operation one: each of its 4 items is worth a range.
        assert_eq!(grain_by_cost(4, 1, 2e9 * NS_PER_TILED_FLOP), 1);
        // The emitter's grain is a floor: a heavy kernel (about 1 ms per item) keeps it.
        assert_eq!(grain_by_cost(1 << 20, 1 << 15, 1e15), 1 << 15);
        // A light one (a nanosecond in all) becomes one range.
        assert!(grain_by_cost(1 << 20, 1 << 15, 1.0) >= 1 << 20);
    }
}
