//! The typed entity ids of the IR: dense `u32` indices into the module's columns, one newtype
//! per entity ([`InstId`], [`CompId`], [`ShapeId`], [`LayoutId`], [`BufferId`]).
//!
//! Invariant: `u32::MAX` is reserved as `NONE`, so an optional id stays 4 bytes in a column;
//! an id is only meaningful for the module (and epoch) that issued it.

macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(transparent)]
        pub struct $name(pub(crate) u32);

        impl $name {
            /// The reserved "no entity" value, so an optional id stays 4 bytes.
            pub const NONE: $name = $name(u32::MAX);

            /// The id with dense index `i`.
            #[inline]
            pub fn new(i: usize) -> Self {
                debug_assert!(i < u32::MAX as usize);
                $name(i as u32)
            }

            /// The dense index of this id.
            #[inline]
            pub fn index(self) -> usize {
                self.0 as usize
            }

            /// Whether this is [`Self::NONE`].
            #[inline]
            pub fn is_none(self) -> bool {
                self.0 == u32::MAX
            }
        }
    };
}

id_type!(
    /// An instruction.
    InstId
);
id_type!(
    /// A computation.
    CompId
);
id_type!(
    /// An interned [`crate::types::Shape`].
    ShapeId
);
id_type!(
    /// An interned [`crate::types::Layout`].
    LayoutId
);
id_type!(
    /// A buffer (assigned by the scheduler crate).
    BufferId
);
