//! Deep recursion without stack overflow.
//!
//! Walks that follow operand chains recurse once per level, and a hostile or simply large
//! program (a fused chain of thousands of elementwise instructions, one per line of a layer
//! stack) can be far deeper than a thread's stack. [`deep`] wraps one level of such a walk:
//! when less than [`RED_ZONE`] bytes of stack remain it continues on a fresh segment of
//! [`SEGMENT`] bytes, so the depth is bounded by memory, not by the stack the thread started
//! with. Invariant: one level of a wrapped walk uses less than [`RED_ZONE`] bytes of stack
//! between two calls of [`deep`], unoptimized builds included.

/// Stack left below which [`deep`] moves to a new segment.
pub const RED_ZONE: usize = 256 * 1024;

/// The size of each stack segment [`deep`] adds.
pub const SEGMENT: usize = 8 * 1024 * 1024;

/// Runs `f` (one level of a recursive walk), first moving to a new stack segment when the
/// current one is nearly used up.
pub fn deep<R>(f: impl FnOnce() -> R) -> R {
    stacker::maybe_grow(RED_ZONE, SEGMENT, f)
}
