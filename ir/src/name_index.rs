//! [`NameIndex`]: instruction names to instruction ids, for the parser's operand resolution and
//! the verifier's uniqueness check.
//!
//! The table stores only the 4-byte [`InstId`]; a key is compared through the module's name
//! pool ([`Module::name`]) and hashed again from it when the table grows. A million names then
//! take about 5 MB (where a map of `(&str, InstId)` took 24 MB), so the table stays in the last
//! level cache, which is what inserting and looking up a million names costs.
//!
//! Invariants: every id in the table names an instruction of the module passed to each call (the
//! same module throughout, and no entered instruction is renamed while the index lives); an entry
//! is found by the name the instruction had when it was entered.

use hashbrown::hash_table::{Entry, HashTable};
use hashbrown::DefaultHashBuilder;
use std::hash::BuildHasher;

use crate::module::{InstId, Module};

/// An index from instruction names to instructions of one module.
#[derive(Default)]
pub(crate) struct NameIndex {
    table: HashTable<InstId>,
    hasher: DefaultHashBuilder,
}

impl NameIndex {
    /// An empty index with room for `n` names.
    pub(crate) fn with_capacity(n: usize) -> Self {
        NameIndex {
            table: HashTable::with_capacity(n),
            hasher: DefaultHashBuilder::default(),
        }
    }

    /// The instruction entered under `name`, if any.
    pub(crate) fn get(&self, m: &Module, name: &str) -> Option<InstId> {
        let hash = self.hasher.hash_one(name);
        self.table.find(hash, |&i| m.name(i) == name).copied()
    }

    /// Enters `id` under its name; an instruction entered earlier under the same name is
    /// replaced and returned.
    pub(crate) fn insert(&mut self, m: &Module, id: InstId) -> Option<InstId> {
        match self.entry(m, id) {
            Entry::Occupied(mut e) => Some(std::mem::replace(e.get_mut(), id)),
            Entry::Vacant(e) => {
                e.insert(id);
                None
            }
        }
    }

    /// Enters `id` under its name unless an instruction has that name already; returns that
    /// earlier instruction, which stays entered.
    pub(crate) fn insert_first(&mut self, m: &Module, id: InstId) -> Option<InstId> {
        match self.entry(m, id) {
            Entry::Occupied(e) => Some(*e.get()),
            Entry::Vacant(e) => {
                e.insert(id);
                None
            }
        }
    }

    fn entry(&mut self, m: &Module, id: InstId) -> Entry<'_, InstId> {
        let name = m.name(id);
        let hasher = &self.hasher;
        self.table.entry(
            hasher.hash_one(name),
            |&i| m.name(i) == name,
            |&i| hasher.hash_one(m.name(i)),
        )
    }
}
