//! The call graph of a module's computations: who calls whom, and how.
//!
//! Every call site is classified ([`CallKind`]): `while` conditions and bodies, `conditional`
//! branches and `call` run as steps of their caller's sequence (their instructions get
//! buffers); fusion bodies run inside one kernel (or, where a backend says so, like a call);
//! reducers, comparators and other applied computations run per element inside a kernel. The
//! graph is a petgraph view built for the two questions scheduling asks, then dropped: an order
//! with every caller before its callees (toposort), and whether the module recurses (strongly
//! connected components), which is rejected naming the computations on the cycle.
//!
//! Invariants: `sites(c)` lists the call sites of `c` in instruction id order; `callers_first`
//! holds every live computation once, each after all of its callers.

use axle_ir::entity::{dense_map, SecondaryMap};
use axle_ir::{AttrKey, AttrValue, CompId, InstId, Module, Opcode};
use petgraph::graph::{DiGraph, NodeIndex};

use crate::error::ScheduleError;

/// How a call site runs its computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CallKind {
    /// A step of the caller's sequence: `while` condition and body, `conditional` branches,
    /// `call`.
    Control,
    /// The body of a `fusion`.
    Fusion,
    /// Applied inside a kernel: reducers, comparators, `map`, scatter and select bodies.
    Applied,
}

/// One call of a computation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CallSite {
    /// The calling instruction.
    pub inst: InstId,
    /// How it calls.
    pub kind: CallKind,
}

/// Call sites per computation and a callers-first order.
#[derive(Clone, Debug)]
pub struct CallGraph {
    sites: SecondaryMap<CompId, Vec<CallSite>>,
    callers_first: Vec<CompId>,
}

/// The kind of call `inst` makes through attribute `key`.
pub fn call_kind(m: &Module, inst: InstId, key: &AttrKey) -> CallKind {
    match (m.opcode(inst), key) {
        (Opcode::While, AttrKey::Condition | AttrKey::Body) => CallKind::Control,
        (
            Opcode::Conditional,
            AttrKey::BranchComputations | AttrKey::TrueComputation | AttrKey::FalseComputation,
        ) => CallKind::Control,
        (Opcode::Call, AttrKey::ToApply) => CallKind::Control,
        (Opcode::Fusion, AttrKey::Calls) => CallKind::Fusion,
        _ => CallKind::Applied,
    }
}

/// Every computation `inst` calls with the kind of each call, in attribute order.
pub fn callees(m: &Module, inst: InstId) -> impl Iterator<Item = (CompId, CallKind)> + '_ {
    m.attrs(inst).iter().flat_map(move |(k, v)| {
        let kind = call_kind(m, inst, k);
        let cs: &[CompId] = match v {
            AttrValue::Comp(c) => std::slice::from_ref(c),
            AttrValue::Comps(cs) => cs,
            _ => &[],
        };
        cs.iter().map(move |&c| (c, kind))
    })
}

impl CallGraph {
    /// The call graph of `m`; an error if a computation calls itself, directly or not.
    pub fn new(m: &Module) -> Result<CallGraph, ScheduleError> {
        let n = m.comp_capacity();
        let mut sites: SecondaryMap<CompId, Vec<CallSite>> = dense_map(n, Vec::new());
        let mut g: DiGraph<CompId, ()> = DiGraph::with_capacity(n, n);
        let nodes: Vec<NodeIndex> = (0..n).map(|c| g.add_node(CompId::new(c))).collect();
        let mut edges: Vec<(u32, u32)> = Vec::new();
        for (c, insts) in m.insts_by_comp().iter() {
            if !m.is_live_comp(c) {
                continue;
            }
            for &i in insts {
                for (callee, kind) in callees(m, i) {
                    if callee.is_none() || callee.index() >= n || !m.is_live_comp(callee) {
                        continue;
                    }
                    sites[callee].push(CallSite { inst: i, kind });
                    edges.push((c.index() as u32, callee.index() as u32));
                }
            }
        }
        // One edge per caller and callee (petgraph's update_edge would scan every edge).
        edges.sort_unstable();
        edges.dedup();
        for (a, b) in edges {
            g.add_edge(nodes[a as usize], nodes[b as usize], ());
        }
        let order = petgraph::algo::toposort(&g, None).map_err(|_| {
            let cycle = petgraph::algo::tarjan_scc(&g)
                .into_iter()
                .find(|scc| scc.len() > 1 || g.contains_edge(scc[0], scc[0]))
                .unwrap_or_default();
            let names: Vec<&str> = cycle.iter().map(|&x| m.comp_name(g[x])).collect();
            ScheduleError::new(format!(
                "the module is recursive: computations {} call each other",
                names.join(", ")
            ))
        })?;
        let callers_first = order
            .into_iter()
            .map(|x| g[x])
            .filter(|&c| m.is_live_comp(c))
            .collect();
        Ok(CallGraph {
            sites,
            callers_first,
        })
    }

    /// The call sites of `c`, in instruction id order.
    pub fn sites(&self, c: CompId) -> &[CallSite] {
        &self.sites[c]
    }

    /// Every live computation, each after all of its callers.
    pub fn callers_first(&self) -> &[CompId] {
        &self.callers_first
    }
}
