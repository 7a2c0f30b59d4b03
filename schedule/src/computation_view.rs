//! A computation as the schedulers see it: its instructions with dense local indices, and the
//! module's dependency graph and memory model.
//!
//! Local index `k` of an instruction is its position in the computation's creation-order list;
//! per-computation arrays are indexed by it, so a scheduler's work is proportional to its
//! computation, never to the module.

use axle_ir::entity::{dense_map, SecondaryMap};
use axle_ir::{CompId, InstId, InstsByComp, Module};

use crate::dep_graph::DepGraph;
use crate::memory_model::MemoryModel;

/// Everything the schedulers share about a module.
pub struct ModuleView<'m> {
    /// The module.
    pub m: &'m Module,
    /// Its dependency graph.
    pub graph: &'m DepGraph,
    /// Its memory model.
    pub model: &'m MemoryModel,
    /// Live instructions per computation, in creation order.
    pub by_comp: &'m InstsByComp,
    /// The local index of every instruction in its computation's list.
    pub local: &'m SecondaryMap<InstId, u32>,
}

/// The local index of every live instruction in its computation's creation-order list.
pub fn local_indices(m: &Module, by_comp: &InstsByComp) -> SecondaryMap<InstId, u32> {
    let mut local = dense_map(m.inst_capacity(), u32::MAX);
    for insts in by_comp.values() {
        for (k, &i) in insts.iter().enumerate() {
            local[i] = k as u32;
        }
    }
    local
}

/// One computation of a [`ModuleView`].
#[derive(Clone, Copy)]
pub struct CompView<'a, 'm> {
    /// The module view.
    pub view: &'a ModuleView<'m>,
    /// The computation.
    pub comp: CompId,
    /// Its instructions in creation order.
    pub insts: &'a [InstId],
}

impl<'a, 'm> CompView<'a, 'm> {
    /// Computation `c` of `view`.
    pub fn new(view: &'a ModuleView<'m>, c: CompId) -> CompView<'a, 'm> {
        CompView {
            view,
            comp: c,
            insts: &view.by_comp[c],
        }
    }

    /// The local index of `i`.
    pub fn local(&self, i: InstId) -> usize {
        self.view.local[i] as usize
    }

    /// The computation's root.
    pub fn root(&self) -> InstId {
        self.view.m.root(self.comp)
    }

    /// Where depth-first schedulers start: the root, then every instruction in creation order
    /// (reaching what the root does not).
    pub fn starts(&self) -> impl Iterator<Item = InstId> + 'a {
        let root = self.root();
        let has_root = !root.is_none() && self.view.local[root] != u32::MAX;
        has_root
            .then_some(root)
            .into_iter()
            .chain(self.insts.iter().copied())
    }
}
