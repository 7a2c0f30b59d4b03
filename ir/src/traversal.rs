//! The graph walks of the IR, in one place: a depth-first walk over any graph of dense ids
//! ([`depth_first`], with a visitor that can stop it), and the orders built on it: a
//! computation's instructions in a stable topological order ([`topo_order_with`]), the
//! instructions a root depends on in post-order or reverse post-order ([`operand_post_order`],
//! [`operand_reverse_post_order`]), and the call graph's computations callees first
//! ([`callee_first_order`]).
//!
//! Invariants: [`depth_first`] visits roots in the order given and a node's successors in the
//! order its edge function gives them, finishing a node after all of them; a node marked
//! [`Mark::Done`] (by this walk or an earlier one sharing the marks) is never entered again, and
//! an edge to a node still [`Mark::Open`] (a cycle) is reported and not followed. The walk is
//! iterative, so deep graphs need no stack. The orders below are exactly what the walks they
//! replaced produced: printed text, schedules and kernel order depend on them.

use std::ops::ControlFlow;

use crate::entity::{EntityRef, SecondaryMap};
use crate::module::{CompId, InstId, InstsByComp, Module};

/// Where a node stands in a depth-first walk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Mark {
    /// Not reached yet.
    #[default]
    New,
    /// Entered and not finished: on the walk's stack.
    Open,
    /// Finished.
    Done,
}

/// Marks of a walk, by node; one map can serve several walks in turn (see [`depth_first`]).
/// Dense: it grows to the largest id marked, so a walk that reaches a few nodes of a large
/// module with high ids pays for the whole module; such walks use [`SparseMarks`].
pub type Marks<N> = SecondaryMap<N, Mark>;

/// Where [`depth_first`] keeps its marks: a node's mark, [`Mark::New`] until set.
pub trait MarkStore<N> {
    /// `n`'s mark.
    fn get(&self, n: N) -> Mark;
    /// Sets `n`'s mark.
    fn set(&mut self, n: N, mark: Mark);
}

impl<N: EntityRef> MarkStore<N> for Marks<N> {
    fn get(&self, n: N) -> Mark {
        self[n]
    }
    fn set(&mut self, n: N, mark: Mark) {
        self[n] = mark;
    }
}

/// Marks kept only for the nodes a walk reaches (a hash map, only looked up, so walks are the
/// same as with [`Marks`]): a walk's cost is then the nodes it reaches, however large the ids.
pub struct SparseMarks<N>(hashbrown::HashMap<N, Mark>);

impl<N> SparseMarks<N> {
    /// No node marked.
    pub fn new() -> Self {
        SparseMarks(hashbrown::HashMap::new())
    }
}

impl<N> Default for SparseMarks<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<N: EntityRef + std::hash::Hash + Eq> MarkStore<N> for SparseMarks<N> {
    fn get(&self, n: N) -> Mark {
        self.0.get(&n).copied().unwrap_or(Mark::New)
    }
    fn set(&mut self, n: N, mark: Mark) {
        self.0.insert(n, mark);
    }
}

/// The `k`-th outgoing edge of a node, as an edge function of [`depth_first`] gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Edge<N> {
    /// An edge to this node.
    To(N),
    /// An edge the walk does not follow (filtered out).
    Skip,
    /// The node has no more edges.
    End,
}

/// What [`depth_first`] tells its visitor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Visit<N> {
    /// The node is finished: every node it reaches was finished before it (post-order).
    Post(N),
    /// An edge from `from` to `to`, which is still open: the graph has a cycle through `to`.
    Cycle {
        /// The node the edge leaves.
        from: N,
        /// The open node it enters.
        to: N,
    },
}

/// Walks depth first from each of `roots` in turn, skipping roots already finished. `edge(n, k)`
/// gives node `n`'s `k`-th edge (`k` from 0 until [`Edge::End`]); `visit` hears each node as it
/// finishes and each edge that closes a cycle, and stops the walk by returning `Break`, whose
/// value the walk returns. `marks` starts all [`Mark::New`] for a fresh walk; it is left marked,
/// so a later walk sharing it skips what this one finished.
pub fn depth_first<N: EntityRef, B>(
    roots: impl IntoIterator<Item = N>,
    marks: &mut impl MarkStore<N>,
    mut edge: impl FnMut(N, usize) -> Edge<N>,
    mut visit: impl FnMut(Visit<N>) -> ControlFlow<B>,
) -> ControlFlow<B> {
    let mut stack: Vec<(N, usize)> = Vec::new();
    for r in roots {
        if marks.get(r) != Mark::New {
            continue;
        }
        marks.set(r, Mark::Open);
        stack.push((r, 0));
        while let Some(&mut (n, ref mut k)) = stack.last_mut() {
            match edge(n, *k) {
                Edge::To(d) => {
                    *k += 1;
                    match marks.get(d) {
                        Mark::New => {
                            marks.set(d, Mark::Open);
                            stack.push((d, 0));
                        }
                        Mark::Open => visit(Visit::Cycle { from: n, to: d })?,
                        Mark::Done => {}
                    }
                }
                Edge::Skip => *k += 1,
                Edge::End => {
                    marks.set(n, Mark::Done);
                    stack.pop();
                    visit(Visit::Post(n))?;
                }
            }
        }
    }
    ControlFlow::Continue(())
}

/// The nodes reachable from `roots`, in post-order (each after every node it reaches, cycles
/// cut where they close), with fresh marks.
pub fn post_order<N: EntityRef>(
    roots: impl IntoIterator<Item = N>,
    edge: impl FnMut(N, usize) -> Edge<N>,
) -> Vec<N> {
    let mut order = Vec::new();
    let _ = depth_first::<N, ()>(roots, &mut Marks::new(), edge, |v| {
        if let Visit::Post(n) = v {
            order.push(n);
        }
        ControlFlow::Continue(())
    });
    order
}

/// [`post_order`] reversed: each node before every node it reaches.
pub fn reverse_post_order<N: EntityRef>(
    roots: impl IntoIterator<Item = N>,
    edge: impl FnMut(N, usize) -> Edge<N>,
) -> Vec<N> {
    let mut order = post_order(roots, edge);
    order.reverse();
    order
}

/// The `k`-th operand edge of `i`; an operand outside the module (`NONE`) is not followed.
#[inline]
fn operand_edge(m: &Module, i: InstId, k: usize) -> Edge<InstId> {
    match m.operands(i).get(k) {
        Some(&o) if o.index() < m.inst_capacity() => Edge::To(o),
        Some(_) => Edge::Skip,
        None => Edge::End,
    }
}

/// The instructions `root` depends on through operands, `root` included, operands before users
/// (operands in order, depth first). `Err(i)` when an operand edge closes a cycle at `i`.
pub fn operand_post_order(m: &Module, root: InstId) -> Result<Vec<InstId>, InstId> {
    let mut order = Vec::new();
    // Sparse marks: callers walk one computation (a fusion's, a kernel's) of a module whose
    // ids run to millions, once per computation.
    let walk = depth_first(
        [root],
        &mut SparseMarks::new(),
        |i, k| operand_edge(m, i, k),
        |v| match v {
            Visit::Post(i) => {
                order.push(i);
                ControlFlow::Continue(())
            }
            Visit::Cycle { to, .. } => ControlFlow::Break(to),
        },
    );
    match walk {
        ControlFlow::Continue(()) => Ok(order),
        ControlFlow::Break(i) => Err(i),
    }
}

/// [`operand_post_order`] reversed: `root` first, every user before its operands.
pub fn operand_reverse_post_order(m: &Module, root: InstId) -> Result<Vec<InstId>, InstId> {
    let mut order = operand_post_order(m, root)?;
    order.reverse();
    Ok(order)
}

/// Instructions of a computation in a stable topological order: each instruction after its
/// operands and control predecessors, otherwise in the order given (so an order that is
/// already topological comes back unchanged).
pub fn topo_order(m: &Module, insts: &[InstId]) -> Vec<InstId> {
    topo_order_with(m, insts, &mut Marks::with_capacity(m.inst_capacity()))
}

/// [`topo_order`] with caller-owned marks, which it leaves marked for `insts` (so one map
/// serves every computation of a module in turn). Only live instructions of the computation of
/// the first one given are pulled in as dependencies; a cycle (invalid) is cut where it closes.
pub fn topo_order_with(m: &Module, insts: &[InstId], marks: &mut Marks<InstId>) -> Vec<InstId> {
    let Some(&first) = insts.first() else {
        return Vec::new();
    };
    let comp = m.parent(first);
    let cap = m.inst_capacity();
    let mut order = Vec::with_capacity(insts.len());
    let edge = |i: InstId, k: usize| {
        let ops = m.operands(i);
        let dep = if k < ops.len() {
            ops[k]
        } else {
            match m.control_predecessors(i).get(k - ops.len()) {
                Some(&d) => d,
                None => return Edge::End,
            }
        };
        if !dep.is_none() && dep.index() < cap && m.is_live(dep) && m.parent(dep) == comp {
            Edge::To(dep)
        } else {
            Edge::Skip
        }
    };
    let _ = depth_first::<InstId, ()>(insts.iter().copied(), marks, edge, |v| {
        if let Visit::Post(i) = v {
            order.push(i);
        }
        ControlFlow::Continue(())
    });
    order
}

/// Live computations with every computation after the ones it calls (the entry last), from the
/// instructions of each computation (`by_comp`, indexed by computation): roots are the live
/// computations other than the entry in id order, then the entry; callees in attribute order.
/// A cycle (invalid) is cut where it closes; no walk enters the entry from a caller.
pub fn callee_first_order(m: &Module, by_comp: &InstsByComp) -> Vec<CompId> {
    let n = m.comp_capacity();
    let callees: Vec<Vec<CompId>> = by_comp
        .values()
        .map(|insts| {
            let mut v = Vec::new();
            for &i in insts {
                for c in m.called_comps_iter(i) {
                    if !c.is_none() && c.index() < n && m.is_live_comp(c) {
                        v.push(c);
                    }
                }
            }
            v
        })
        .collect();
    let entry = m.entry();
    let mut roots: Vec<CompId> = m
        .computations()
        .into_iter()
        .filter(|&c| c != entry)
        .collect();
    if !entry.is_none() && m.is_live_comp(entry) {
        roots.push(entry);
    }
    let mut order = Vec::with_capacity(n);
    let _ = depth_first::<CompId, ()>(
        roots,
        &mut Marks::with_capacity(n),
        |c, k| match callees[c.index()].get(k) {
            Some(&cc) if cc != entry => Edge::To(cc),
            Some(_) => Edge::Skip,
            None => Edge::End,
        },
        |v| {
            if let Visit::Post(c) = v {
                order.push(c);
            }
            ControlFlow::Continue(())
        },
    );
    order
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parser::parse_module;

    /// A graph of ids 0..n given as successor lists.
    fn graph<'a>(succs: &'a [&'a [usize]]) -> impl Fn(CompId, usize) -> Edge<CompId> + 'a {
        move |n, k| match succs[n.index()].get(k) {
            Some(&d) => Edge::To(CompId::new(d)),
            None => Edge::End,
        }
    }

    fn ids(v: &[CompId]) -> Vec<usize> {
        v.iter().map(|c| c.index()).collect()
    }

    #[test]
    fn post_order_finishes_each_node_after_its_successors_in_edge_order() {
        // 0 -> 1, 2; 1 -> 3; 2 -> 3.
        let succs: &[&[usize]] = &[&[1, 2], &[3], &[3], &[]];
        let roots = [CompId::new(0)];
        assert_eq!(ids(&post_order(roots, graph(succs))), [3, 1, 2, 0]);
        assert_eq!(ids(&reverse_post_order(roots, graph(succs))), [0, 2, 1, 3]);
    }

    #[test]
    fn a_cycle_is_reported_and_cut_and_the_visitor_can_stop_the_walk() {
        // 0 -> 1 -> 2 -> 0 (a cycle), 2 -> 3.
        let succs: &[&[usize]] = &[&[1], &[2], &[0, 3], &[]];
        let mut cycles = Vec::new();
        let mut order = Vec::new();
        let r = depth_first::<CompId, ()>([CompId::new(0)], &mut Marks::new(), graph(succs), |v| {
            match v {
                Visit::Post(n) => order.push(n.index()),
                Visit::Cycle { from, to } => cycles.push((from.index(), to.index())),
            }
            ControlFlow::Continue(())
        });
        assert_eq!(r, ControlFlow::Continue(()));
        assert_eq!(cycles, [(2, 0)]);
        assert_eq!(order, [3, 2, 1, 0]);

        // Stopping at the first finished node returns the visitor's value and visits no more.
        let mut seen = 0;
        let r = depth_first([CompId::new(0)], &mut Marks::new(), graph(succs), |v| {
            seen += 1;
            match v {
                Visit::Post(n) => ControlFlow::Break(n.index()),
                Visit::Cycle { .. } => ControlFlow::Continue(()),
            }
        });
        assert_eq!(r, ControlFlow::Break(3));
        assert_eq!(seen, 2);
    }

    #[test]
    fn shared_marks_skip_what_an_earlier_walk_finished() {
        let succs: &[&[usize]] = &[&[1], &[], &[1]];
        let mut marks = Marks::new();
        let mut order = Vec::new();
        for r in [0, 2] {
            let _ = depth_first::<CompId, ()>([CompId::new(r)], &mut marks, graph(succs), |v| {
                if let Visit::Post(n) = v {
                    order.push(n.index());
                }
                ControlFlow::Continue(())
            });
        }
        assert_eq!(order, [1, 0, 2]);
    }

    const MODULE: &str = r#"HloModule m

add {
  a = f32[] parameter(0)
  b = f32[] parameter(1)
  ROOT s = f32[] add(a, b)
}

ENTRY main {
  x = f32[4] parameter(0)
  y = f32[4] parameter(1)
  n = f32[4] negate(y)
  z = f32[] constant(0)
  m = f32[4] multiply(x, n)
  ROOT r = f32[] reduce(m, z), dimensions={0}, to_apply=add
}
"#;

    fn names(m: &Module, v: &[InstId]) -> Vec<String> {
        v.iter().map(|&i| m.name(i).to_string()).collect()
    }

    #[test]
    fn operand_orders_of_a_root() {
        let m = parse_module(MODULE).unwrap();
        let root = m.root(m.entry());
        let post = operand_post_order(&m, root).unwrap();
        assert_eq!(names(&m, &post), ["x", "y", "n", "m", "z", "r"]);
        let rpo = operand_reverse_post_order(&m, root).unwrap();
        assert_eq!(names(&m, &rpo), ["r", "z", "m", "n", "y", "x"]);
    }

    #[test]
    fn topo_order_keeps_a_valid_order_and_pulls_operands_before_users() {
        let m = parse_module(MODULE).unwrap();
        let insts = m.insts_by_comp()[m.entry()].clone();
        assert_eq!(topo_order(&m, &insts), insts);
        let mut reversed = insts.clone();
        reversed.reverse();
        assert_eq!(
            names(&m, &topo_order(&m, &reversed)),
            ["x", "y", "n", "m", "z", "r"]
        );
    }

    #[test]
    fn callee_first_order_puts_callees_first_and_the_entry_last() {
        let m = parse_module(MODULE).unwrap();
        let order = callee_first_order(&m, &m.insts_by_comp());
        let names: Vec<&str> = order.iter().map(|&c| m.comp_name(c)).collect();
        assert_eq!(names, ["add", "main"]);
    }
}
