//! Buffer ids: the buffers of a lowered program (entry parameters, outputs, constants,
//! temporaries and scratch) are numbered densely from 0, in the program's buffer table.

axle_ir::entity_id!(
    /// A buffer of a lowered program: its index in the program's buffer table.
    pub(crate) BufId
);
