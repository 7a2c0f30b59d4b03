//! The heap simulator: places buffers with known live ranges in one block, so that buffers
//! live at the same time never overlap, and keeps the smallest block several strategies find.
//!
//! Strategies (XLA's heap simulator has the same family):
//! - **best fit by size**: buffers in decreasing size (longer first, then earlier), each at the
//!   smallest gap among the buffers already placed that overlap it in time, or above them;
//! - **best fit by length**: the same, buffers in decreasing live-range length;
//! - **first fit in order**: buffers in schedule order as they become live, each at the lowest
//!   free address at that moment (freed memory is reused once its buffer's range has passed).
//!
//! Offsets are multiples of the alignment and every buffer occupies its size rounded up to it;
//! the block's size is the highest `offset + size`. Placement is deterministic.
//!
//! Best fit by size runs first; when its block is no larger than the peak of live bytes
//! ([`peak`], a lower bound for any placement) the other strategies are not run: they could at
//! best tie, and ties keep the earlier strategy, so the result is the same and the work a third.
//!
//! Cost: the global strategies find the placed buffers overlapping a range with a static
//! interval tree (a max-end segment tree over the buffers sorted by start, leaves switched on
//! as they are placed), `O(log n + k)` for `k` overlaps; first fit keeps the free gaps in an
//! ordered map. So that no graph makes them quadratic, each strategy has a work budget
//! proportional to the number of buffers; one that exhausts it gives up (deterministically)
//! and the others decide.

use std::collections::BTreeMap;

/// A buffer to place: its size and the first and last positions it is live at.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Block {
    /// Bytes.
    pub size: u64,
    /// First live position.
    pub start: u32,
    /// Last live position (inclusive).
    pub end: u32,
}

/// A placement strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// Global best fit, largest buffers first.
    BestFitBySize,
    /// Global best fit, longest-lived buffers first.
    BestFitByLength,
    /// First fit in schedule order.
    FirstFitInOrder,
}

impl Strategy {
    /// Every strategy, in the order ties are broken.
    pub const ALL: [Strategy; 3] = [
        Strategy::BestFitBySize,
        Strategy::BestFitByLength,
        Strategy::FirstFitInOrder,
    ];

    /// The name reports use.
    pub fn name(self) -> &'static str {
        match self {
            Strategy::BestFitBySize => "best-fit-by-size",
            Strategy::BestFitByLength => "best-fit-by-length",
            Strategy::FirstFitInOrder => "first-fit-in-order",
        }
    }
}

/// A placement.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Placement {
    /// The offset of each block.
    pub offsets: Vec<u64>,
    /// The block size: the highest `offset + size`.
    pub size: u64,
}

/// What the heap simulator found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeapResult {
    /// The strategy kept.
    pub strategy: Strategy,
    /// Its placement.
    pub placement: Placement,
    /// The size each strategy reached (`None`: gave up on its budget).
    pub tried: Vec<(Strategy, Option<u64>)>,
}

fn align_up(x: u64, a: u64) -> u64 {
    x.div_ceil(a) * a
}

/// Whether the blocks, each rounded up to `align`, fit one after another in `u64` bytes: then
/// no offset or size a strategy computes overflows (none places a block above the sum of the
/// ones before it). Programs whose buffers are huge (a `pred[2^62]` temporary is valid HLO)
/// fail this, and the caller refuses them instead of placing them.
pub fn fits(blocks: &[Block], align: u64) -> bool {
    blocks
        .iter()
        .try_fold(0u64, |sum, b| {
            b.size
                .checked_next_multiple_of(align)
                .and_then(|s| sum.checked_add(s))
        })
        .is_some()
}

/// The highest total size of blocks live at one position: no placement is smaller.
pub fn peak(blocks: &[Block]) -> u64 {
    let mut ev: Vec<(u32, i8, u64)> = Vec::with_capacity(blocks.len() * 2);
    for b in blocks {
        ev.push((b.start, 1, b.size));
        ev.push((b.end.saturating_add(1), -1, b.size));
    }
    // Frees before allocations at the same position.
    ev.sort_unstable_by_key(|&(p, d, _)| (p, d));
    let (mut cur, mut best) = (0u64, 0u64);
    for (_, d, s) in ev {
        if d > 0 {
            cur += s;
            best = best.max(cur);
        } else {
            cur -= s;
        }
    }
    best
}

/// Places `blocks` with every strategy and keeps the smallest block (ties: [`Strategy::ALL`]
/// order); `peak` is [`peak`]`(blocks)`. Blocks of size 0 get offset 0.
pub fn simulate(blocks: &[Block], align: u64, peak: u64) -> HeapResult {
    let a = best_fit(blocks, align, Strategy::BestFitBySize);
    if let Some(p) = a.as_ref().filter(|p| p.size <= peak) {
        return HeapResult {
            strategy: Strategy::BestFitBySize,
            tried: vec![(Strategy::BestFitBySize, Some(p.size))],
            placement: a.unwrap_or_default(),
        };
    }
    let (b, c) = rayon::join(
        || best_fit(blocks, align, Strategy::BestFitByLength),
        || first_fit(blocks, align),
    );
    let results = [a, b, c];
    let tried: Vec<(Strategy, Option<u64>)> = Strategy::ALL
        .iter()
        .zip(&results)
        .map(|(&s, r)| (s, r.as_ref().map(|p| p.size)))
        .collect();
    let mut best: Option<(Strategy, Placement)> = None;
    for (s, r) in Strategy::ALL.into_iter().zip(results) {
        if let Some(p) = r {
            let better = match &best {
                Some((_, b)) => p.size < b.size,
                None => true,
            };
            if better {
                best = Some((s, p));
            }
        }
    }
    // First fit never gives up, so there is always a result.
    let (strategy, placement) = best.unwrap_or_else(|| {
        (
            Strategy::FirstFitInOrder,
            Placement {
                offsets: vec![0; blocks.len()],
                size: 0,
            },
        )
    });
    HeapResult {
        strategy,
        placement,
        tried,
    }
}

/// The work budget of a strategy on `n` blocks.
fn budget(n: usize) -> u64 {
    64 * n as u64 + 1_000_000
}

/// Global best fit in the order `strategy` sorts blocks.
fn best_fit(blocks: &[Block], align: u64, strategy: Strategy) -> Option<Placement> {
    let n = blocks.len();
    let mut order: Vec<u32> = (0..n as u32)
        .filter(|&i| blocks[i as usize].size > 0)
        .collect();
    let len = |b: &Block| b.end - b.start;
    match strategy {
        Strategy::BestFitBySize => order.sort_by(|&x, &y| {
            let (a, b) = (&blocks[x as usize], &blocks[y as usize]);
            b.size
                .cmp(&a.size)
                .then(len(b).cmp(&len(a)))
                .then(a.start.cmp(&b.start))
                .then(x.cmp(&y))
        }),
        _ => order.sort_by(|&x, &y| {
            let (a, b) = (&blocks[x as usize], &blocks[y as usize]);
            len(b)
                .cmp(&len(a))
                .then(b.size.cmp(&a.size))
                .then(a.start.cmp(&b.start))
                .then(x.cmp(&y))
        }),
    }
    let mut tree = IntervalTree::new(blocks);
    let mut offsets = vec![0u64; n];
    let mut top = 0u64;
    let mut work = 0u64;
    let limit = budget(n);
    let mut found: Vec<(u64, u64)> = Vec::new();
    let mut stack = Vec::new();
    for &b in &order {
        let blk = blocks[b as usize];
        found.clear();
        tree.query(blk.start, blk.end, &mut stack, &mut |j| {
            let o = offsets[j as usize];
            found.push((o, o + align_up(blocks[j as usize].size, align)));
        });
        work += found.len() as u64 + 1;
        if work > limit {
            return None;
        }
        found.sort_unstable();
        let need = align_up(blk.size, align);
        let mut cur = 0u64;
        let mut best: Option<(u64, u64)> = None; // (gap size, offset)
        for &(o, e) in &found {
            if o > cur && o - cur >= need {
                let gap = o - cur;
                let better = match best {
                    Some((g, _)) => gap < g,
                    None => true,
                };
                if better {
                    best = Some((gap, cur));
                }
            }
            cur = cur.max(e);
        }
        let at = best.map_or(cur, |(_, o)| o);
        offsets[b as usize] = at;
        top = top.max(at + blk.size);
        tree.insert(b);
    }
    Some(Placement { offsets, size: top })
}

/// First fit in schedule order, with freed gaps coalesced.
fn first_fit(blocks: &[Block], align: u64) -> Option<Placement> {
    let n = blocks.len();
    let mut starts: Vec<u32> = (0..n as u32)
        .filter(|&i| blocks[i as usize].size > 0)
        .collect();
    starts.sort_by_key(|&i| (blocks[i as usize].start, i));
    let mut ends = starts.clone();
    ends.sort_by_key(|&i| (blocks[i as usize].end, i));
    // Free gaps below `high`: offset -> size.
    let mut free: BTreeMap<u64, u64> = BTreeMap::new();
    let mut high = 0u64;
    let mut offsets = vec![0u64; n];
    let mut top = 0u64;
    let mut e = 0;
    for &b in &starts {
        let blk = blocks[b as usize];
        // Free every block whose range ended before this one starts.
        while e < ends.len() && blocks[ends[e] as usize].end < blk.start {
            let j = ends[e] as usize;
            release(
                &mut free,
                &mut high,
                offsets[j],
                align_up(blocks[j].size, align),
            );
            e += 1;
        }
        let need = align_up(blk.size, align);
        // The lowest gap that fits (scanning a bounded number of gaps, then the top).
        let at = free
            .iter()
            .take(256)
            .find(|(_, &s)| s >= need)
            .map(|(&o, &s)| (o, s));
        let off = match at {
            Some((o, s)) => {
                free.remove(&o);
                if s > need {
                    free.insert(o + need, s - need);
                }
                o
            }
            None => {
                // Grow from the top, absorbing a free gap that ends there.
                let mut base = high;
                if let Some((&o, &s)) = free.iter().next_back() {
                    if o + s == high {
                        free.remove(&o);
                        base = o;
                    }
                }
                high = base + need;
                base
            }
        };
        offsets[b as usize] = off;
        top = top.max(off + blk.size);
    }
    Some(Placement { offsets, size: top })
}

/// Returns `[off, off + size)` to the free map, merging with neighbours.
fn release(free: &mut BTreeMap<u64, u64>, high: &mut u64, off: u64, size: u64) {
    let (mut o, mut s) = (off, size);
    if let Some((&po, &ps)) = free.range(..o).next_back() {
        if po + ps == o {
            free.remove(&po);
            o = po;
            s += ps;
        }
    }
    if let Some(&ns) = free.get(&(o + s)) {
        free.remove(&(o + s));
        s += ns;
    }
    if o + s == *high {
        *high = o;
    } else {
        free.insert(o, s);
    }
}

/// Blocks sorted by start, with a max-end segment tree over the ones switched on.
struct IntervalTree {
    by_start: Vec<u32>,
    starts: Vec<u32>,
    rank: Vec<u32>,
    max_end: Vec<i64>,
    ends: Vec<u32>,
    size: usize,
}

impl IntervalTree {
    fn new(blocks: &[Block]) -> IntervalTree {
        let n = blocks.len();
        let mut by_start: Vec<u32> = (0..n as u32).collect();
        by_start.sort_by_key(|&i| (blocks[i as usize].start, i));
        let mut rank = vec![0u32; n];
        for (r, &i) in by_start.iter().enumerate() {
            rank[i as usize] = r as u32;
        }
        let starts = by_start.iter().map(|&i| blocks[i as usize].start).collect();
        let ends = by_start.iter().map(|&i| blocks[i as usize].end).collect();
        let size = n.next_power_of_two().max(1);
        IntervalTree {
            by_start,
            starts,
            rank,
            max_end: vec![-1; 2 * size],
            ends,
            size,
        }
    }

    fn insert(&mut self, b: u32) {
        let r = self.rank[b as usize] as usize;
        let mut x = r + self.size;
        self.max_end[x] = self.ends[r] as i64;
        while x > 1 {
            x /= 2;
            self.max_end[x] = self.max_end[2 * x].max(self.max_end[2 * x + 1]);
        }
    }

    /// Calls `f` with every switched-on block live somewhere in `[s, e]`; `stack` is scratch.
    fn query(
        &self,
        s: u32,
        e: u32,
        stack: &mut Vec<(usize, usize, usize)>,
        f: &mut dyn FnMut(u32),
    ) {
        // Blocks with start <= e are the ranks below `hi`.
        let hi = self.starts.partition_point(|&x| x <= e);
        if hi == 0 {
            return;
        }
        stack.clear();
        stack.push((1usize, 0usize, self.size));
        while let Some((node, lo, len)) = stack.pop() {
            if lo >= hi || self.max_end[node] < s as i64 {
                continue;
            }
            if len == 1 {
                f(self.by_start[lo]);
                continue;
            }
            let half = len / 2;
            stack.push((2 * node + 1, lo + half, half));
            stack.push((2 * node, lo, half));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::{QuickCheck, TestResult};

    fn blocks(raw: &[(u16, u8, u8)]) -> Vec<Block> {
        raw.iter()
            .map(|&(size, s, len)| Block {
                size: size as u64 % 5000,
                start: s as u32,
                end: s as u32 + len as u32 % 40,
            })
            .collect()
    }

    /// Every strategy that finishes places blocks live together apart, aligned, within its
    /// reported size, and no smaller than the peak of live bytes.
    fn placements_are_valid(raw: Vec<(u16, u8, u8)>) -> TestResult {
        let bs = blocks(&raw);
        let peak = {
            let mut best = 0;
            for t in 0..300u32 {
                let live: u64 = bs
                    .iter()
                    .filter(|b| b.start <= t && t <= b.end)
                    .map(|b| b.size)
                    .sum();
                best = best.max(live);
            }
            best
        };
        let runs = [
            best_fit(&bs, 64, Strategy::BestFitBySize),
            best_fit(&bs, 64, Strategy::BestFitByLength),
            first_fit(&bs, 64),
        ];
        for p in runs.into_iter().flatten() {
            for (i, a) in bs.iter().enumerate() {
                let oa = p.offsets[i];
                if a.size > 0 && (oa % 64 != 0 || oa + a.size > p.size) {
                    return TestResult::error(format!("block {i} misplaced: {p:?}"));
                }
                for (j, b) in bs.iter().enumerate().skip(i + 1) {
                    let ob = p.offsets[j];
                    let time = a.start <= b.end && b.start <= a.end;
                    let space = oa < ob + b.size && ob < oa + a.size;
                    if a.size > 0 && b.size > 0 && time && space {
                        return TestResult::error(format!("blocks {i} and {j} overlap"));
                    }
                }
            }
            if p.size < peak {
                return TestResult::error(format!("{} below the peak {peak}", p.size));
            }
        }
        TestResult::passed()
    }

    #[test]
    fn placements_never_overlap() {
        QuickCheck::new()
            .tests(300)
            .quickcheck(placements_are_valid as fn(Vec<(u16, u8, u8)>) -> TestResult);
    }

    #[test]
    fn disjoint_lifetimes_share_memory() {
        let bs = [
            Block {
                size: 100,
                start: 0,
                end: 2,
            },
            Block {
                size: 100,
                start: 3,
                end: 5,
            },
            Block {
                size: 64,
                start: 1,
                end: 4,
            },
        ];
        let r = simulate(&bs, 64, peak(&bs));
        assert_eq!(r.placement.size, 64 + 100);
        assert_eq!(r.placement.offsets[0], r.placement.offsets[1]);
        // Best fit by size (192: the 64-byte block above a 100-byte one padded to 128) stays
        // above the peak (164 bytes live at positions 1 to 4), so the others ran and best fit
        // by length reached the peak.
        assert_eq!(peak(&bs), 164);
        assert_eq!(r.tried.len(), 3);
        assert_eq!(r.strategy, Strategy::BestFitByLength);
        // The two disjoint blocks alone: best fit by size reaches the peak, nothing else runs.
        let two = &bs[..2];
        let r = simulate(two, 64, peak(two));
        assert_eq!(r.tried, vec![(Strategy::BestFitBySize, Some(100))]);
    }

    #[test]
    fn every_strategy_runs_when_the_first_is_above_the_peak() {
        // Two 4-byte blocks live together: 8 bytes live, but alignment makes any block 68.
        let b = Block {
            size: 4,
            start: 0,
            end: 1,
        };
        let bs = [b, b];
        let r = simulate(&bs, 64, peak(&bs));
        assert_eq!(r.placement.size, 68);
        assert_eq!(r.strategy, Strategy::BestFitBySize);
        let names: Vec<Strategy> = r.tried.iter().map(|t| t.0).collect();
        assert_eq!(names, Strategy::ALL.to_vec());
    }

    #[test]
    fn blocks_whose_sizes_overflow_do_not_fit() {
        let huge = |start| Block {
            size: 1 << 62,
            start,
            end: start,
        };
        let blocks: Vec<Block> = (0..4).map(huge).collect();
        assert!(!fits(&blocks, 64));
        assert!(fits(&blocks[..3], 64));
        assert!(!fits(
            &[Block {
                size: u64::MAX,
                start: 0,
                end: 0
            }],
            64
        ));
    }
}
