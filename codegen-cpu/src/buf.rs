//! Buffer ids: the buffers of a lowered program (entry parameters, outputs, constants,
//! temporaries and scratch) are numbered densely from 0, in the program's buffer table.

/// A buffer id.
pub(crate) type BufId = u32;
