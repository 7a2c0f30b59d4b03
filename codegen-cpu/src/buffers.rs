//! Buffer assignment for the temporaries of a program.
//!
//! A program's temporary buffers live in one block of memory (the `temp` argument of the entry
//! point); each gets an offset. The interface is a list of live ranges in program order
//! ([`Interval`]) in, offsets and the block size ([`BufferPlan`]) out, so the scheduling and
//! buffer-assignment work of the `schedule` crate can replace [`assign`] without touching the
//! code generator. Until then [`assign`] is the simple plan: every buffer its own range of the
//! block, which a later buffer can reuse once the first one's last use has passed (first fit,
//! in order of definition).

/// Alignment of every temporary, in bytes (a cache line, and enough for 512-bit vectors).
pub const ALIGN: u64 = 64;

/// The live range of one temporary buffer, in program positions (inclusive).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Interval {
    /// The buffer.
    pub buf: u32,
    /// The position of its definition.
    pub start: u32,
    /// The position of its last use.
    pub end: u32,
    /// Its size in bytes.
    pub bytes: u64,
}

/// Offsets of the temporaries in the temporary block.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BufferPlan {
    /// The offset of each buffer (indexed by buffer id), `None` for buffers not in the block.
    pub offsets: Vec<Option<u64>>,
    /// The size of the block in bytes.
    pub temp_bytes: u64,
}

/// The simple plan: first fit in order of definition, reusing ranges whose buffers are dead.
pub fn assign(n_bufs: usize, intervals: &[Interval]) -> BufferPlan {
    let mut order: Vec<&Interval> = intervals.iter().collect();
    order.sort_by_key(|iv| (iv.start, iv.buf));
    // Live allocations: (offset, size, end).
    let mut live: Vec<(u64, u64, u32)> = Vec::new();
    let mut offsets = vec![None; n_bufs];
    let mut top = 0u64;
    for iv in order {
        live.retain(|&(_, _, end)| end >= iv.start);
        let size = iv.bytes.div_ceil(ALIGN).max(1) * ALIGN;
        live.sort_by_key(|&(o, _, _)| o);
        let mut at = 0u64;
        for &(o, s, _) in &live {
            if at + size <= o {
                break;
            }
            at = at.max(o + s);
        }
        live.push((at, size, iv.end));
        top = top.max(at + size);
        offsets[iv.buf as usize] = Some(at);
    }
    BufferPlan {
        offsets,
        temp_bytes: top,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iv(buf: u32, start: u32, end: u32, bytes: u64) -> Interval {
        Interval {
            buf,
            start,
            end,
            bytes,
        }
    }

    #[test]
    fn dead_buffers_are_reused_and_live_ones_never_overlap() {
        let ivs = [
            iv(0, 1, 2, 100),
            iv(1, 2, 4, 64),
            iv(2, 3, 5, 100),
            iv(3, 5, 6, 10),
        ];
        let p = assign(4, &ivs);
        for a in &ivs {
            for b in &ivs {
                if a.buf < b.buf && a.start <= b.end && b.start <= a.end {
                    let (oa, ob) = (
                        p.offsets[a.buf as usize].unwrap(),
                        p.offsets[b.buf as usize].unwrap(),
                    );
                    let (sa, sb) = (
                        a.bytes.div_ceil(ALIGN) * ALIGN,
                        b.bytes.div_ceil(ALIGN) * ALIGN,
                    );
                    assert!(oa + sa <= ob || ob + sb <= oa, "{a:?} and {b:?} overlap");
                }
            }
        }
        // Buffer 0 is dead when buffer 2 is defined: its range is reused.
        assert_eq!(p.offsets[2], Some(0));
        assert_eq!(p.temp_bytes, 128 + 64);
    }
}
