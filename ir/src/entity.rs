//! Typed maps and sets keyed by the IR's dense ids, and the macro that declares such an id.
//!
//! The containers are `cranelift-entity`'s, re-exported: [`PrimaryMap`] (a vector that issues
//! the ids of what it holds), [`SecondaryMap`] (a vector indexed by an id, every absent key
//! reading as the map's default, growing on write), [`EntitySet`] (a dense bitset of ids) and [`PackedOption`] (an optional id in the id's own 4 bytes, `u32::MAX`
//! meaning none). That crate is small, dependency-light (its bitset crate only) and kept by the
//! Cranelift project, and its model (an id type implementing [`EntityRef`]) is exactly ours, so
//! it is used rather than a copy of it in this crate.
//!
//! Invariants: every id type declared with [`crate::entity_id!`] is a `u32` newtype whose dense
//! index is its value, with `u32::MAX` reserved as `NONE` (the [`ReservedValue`] of
//! [`PackedOption`]); a map or set keyed by an id is only meaningful for the module (or program)
//! that issued it.

pub use cranelift_entity::packed_option::{PackedOption, ReservedValue};
pub use cranelift_entity::{EntityRef, EntitySet, PrimaryMap, SecondaryMap};

/// A [`SecondaryMap`] reading `default` for every key, with entries for the ids below `n`
/// allocated up front (for a map every id of a module will be written in).
pub fn dense_map<K: EntityRef, V: Clone>(n: usize, default: V) -> SecondaryMap<K, V> {
    let mut map = SecondaryMap::with_default(default);
    map.resize(n);
    map
}

/// A [`SecondaryMap`] holding `values` in key order (the `k`-th under the id of index `k`),
/// reading `V::default()` past them: the typed form of a vector collected in id order.
pub fn collect_map<K: EntityRef, V: Clone + Default>(
    values: impl IntoIterator<Item = V>,
) -> SecondaryMap<K, V> {
    let values = values.into_iter();
    let mut map = SecondaryMap::with_capacity(values.size_hint().0);
    for (k, v) in values.enumerate() {
        map[K::new(k)] = v;
    }
    map
}

/// Declares a typed dense id: a `u32` newtype with `NONE` (`u32::MAX`), `new`, `index` and
/// `is_none`, implementing [`EntityRef`] (so it keys a [`SecondaryMap`] or [`EntitySet`]) and
/// [`ReservedValue`] (so `PackedOption` of it stays 4 bytes). The field is visible to the
/// declaring crate only.
#[macro_export]
macro_rules! entity_id {
    ($(#[$doc:meta])* $vis:vis $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        #[repr(transparent)]
        $vis struct $name(pub(crate) u32);

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

        impl $crate::entity::EntityRef for $name {
            #[inline]
            fn new(i: usize) -> Self {
                $name::new(i)
            }

            #[inline]
            fn index(self) -> usize {
                self.0 as usize
            }
        }

        impl $crate::entity::ReservedValue for $name {
            #[inline]
            fn reserved_value() -> Self {
                $name::NONE
            }

            #[inline]
            fn is_reserved_value(&self) -> bool {
                self.is_none()
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::InstId;

    #[test]
    fn secondary_map_reads_default_past_its_end_and_grows_on_write() {
        let mut m: SecondaryMap<InstId, u32> = SecondaryMap::with_default(7);
        assert_eq!(m[InstId::new(5)], 7);
        m[InstId::new(5)] = 3;
        assert_eq!(m[InstId::new(5)], 3);
        assert_eq!(m[InstId::new(4)], 7);
        assert_eq!(m.keys().count(), 6);
    }

    #[test]
    fn collect_map_keys_values_in_order() {
        let m: SecondaryMap<InstId, u32> = collect_map([4, 0, 9]);
        assert_eq!(m.keys().count(), 3);
        assert_eq!((m[InstId::new(0)], m[InstId::new(2)]), (4, 9));
        assert_eq!(m[InstId::new(3)], 0);
    }

    #[test]
    fn entity_set_inserts_once() {
        let mut s: EntitySet<InstId> = EntitySet::new();
        assert!(s.insert(InstId::new(70)));
        assert!(!s.insert(InstId::new(70)));
        assert!(s.contains(InstId::new(70)));
        assert!(!s.contains(InstId::new(69)));
    }

    #[test]
    fn packed_option_is_four_bytes_and_none_is_the_reserved_id() {
        assert_eq!(std::mem::size_of::<PackedOption<InstId>>(), 4);
        // `NONE` is the reserved value a `PackedOption` stores for "none" (converting it
        // into one is refused: debug builds assert).
        assert_eq!(InstId::reserved_value(), InstId::NONE);
        assert!(InstId::NONE.is_reserved_value());
        let none: PackedOption<InstId> = PackedOption::default();
        assert!(none.is_none());
        assert_eq!(none.expand(), None);
        let some: PackedOption<InstId> = InstId::new(3).into();
        assert_eq!(some.expand(), Some(InstId::new(3)));
    }
}
