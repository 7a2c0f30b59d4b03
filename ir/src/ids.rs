//! The typed entity ids of the IR: dense `u32` indices into the module's columns, one newtype
//! per entity ([`InstId`], [`CompId`], [`ShapeId`], [`LayoutId`], [`BufferId`]).
//!
//! Invariant: `u32::MAX` is reserved as `NONE`, so an optional id stays 4 bytes in a column;
//! an id is only meaningful for the module (and epoch) that issued it. Each keys the typed maps
//! and sets of [`crate::entity`].

crate::entity_id!(
    /// An instruction.
    pub InstId
);
crate::entity_id!(
    /// A computation.
    pub CompId
);
crate::entity_id!(
    /// An interned [`crate::types::Shape`].
    pub ShapeId
);
crate::entity_id!(
    /// An interned [`crate::types::Layout`].
    pub LayoutId
);
crate::entity_id!(
    /// A buffer (assigned by the scheduler crate).
    pub BufferId
);
