//! The device memory statistics of `PJRT_Device_MemoryStats`: bytes held by live buffers, the
//! peak, the number of buffers made and the largest, for all clients of the process.
//!
//! Invariant: [`crate::buffer`] counts a buffer's bytes from its creation to its deletion,
//! donation or destruction, exactly once each way.

use std::sync::atomic::{AtomicI64, Ordering};

/// Bytes held by live buffers, the most ever held at once, allocations and the largest one.
static IN_USE: AtomicI64 = AtomicI64::new(0);
static PEAK: AtomicI64 = AtomicI64::new(0);
static ALLOCS: AtomicI64 = AtomicI64::new(0);
static LARGEST: AtomicI64 = AtomicI64::new(0);

/// The device memory statistics: bytes held by live buffers now, the peak, the number of
/// buffers that held bytes and the largest (see the module docs).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MemoryStats {
    /// Bytes held by live buffers now.
    pub bytes_in_use: i64,
    /// The most bytes held at once.
    pub peak_bytes_in_use: i64,
    /// Buffers made that held bytes.
    pub num_allocs: i64,
    /// The largest buffer's bytes.
    pub largest_alloc_size: i64,
}

/// The statistics now.
pub fn memory_stats() -> MemoryStats {
    MemoryStats {
        bytes_in_use: IN_USE.load(Ordering::Relaxed),
        peak_bytes_in_use: PEAK.load(Ordering::Relaxed),
        num_allocs: ALLOCS.load(Ordering::Relaxed),
        largest_alloc_size: LARGEST.load(Ordering::Relaxed),
    }
}

/// Counts a buffer of `bytes` made.
pub(crate) fn count_alloc(bytes: usize) {
    let n = bytes as i64;
    let now = IN_USE.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
    ALLOCS.fetch_add(1, Ordering::Relaxed);
    LARGEST.fetch_max(n, Ordering::Relaxed);
}

/// Counts a buffer of `bytes` released.
pub(crate) fn count_free(bytes: usize) {
    IN_USE.fetch_sub(bytes as i64, Ordering::Relaxed);
}
