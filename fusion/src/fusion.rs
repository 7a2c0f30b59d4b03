//! `fusion`: producer-consumer fusion, as XLA's instruction fusion, decided by a cost model and
//! a target ([`crate::target::FusionTarget`], chosen by the `target=NAME` option).
//!
//! Rules, each asked of the target first:
//! - **loop fusion**: elementwise ops, `broadcast`, `reshape`, `transpose`, `slice`,
//!   `concatenate`, `pad`, `reverse`, `iota`, `convert`, `select`, `clamp`, `dynamic-slice`,
//!   `gather` and scalar constants go into their consumers; a `dynamic-update-slice` is a
//!   loop fusion's root only, with its update's and indices' producers (not the array it
//!   updates, so the fusion can update that in place);
//! - **reduction fusion**: such producers go into a `reduce`'s input (`kInput`);
//! - **row fusion**: a `reduce` over the minor (trailing) dimensions goes into a consumer that
//!   reads its result per row, so softmax, layer norm, log-softmax and RMS norm become one
//!   kernel (`kInput`) holding the reductions and everything between them;
//! - **output fusion**: a `dot` or `convolution` whose result is read at the same index by an
//!   elementwise epilogue (bias, activation, residual) goes into it (`kOutput`); its operands
//!   stay outside, as the matrix kernel reads them from memory;
//! - **dot prologue**, where the target [reads dot operands through
//!   views](crate::target::FusionTarget::reads_dot_operand_views): a chain of views (`transpose`,
//!   `reshape`, `slice`, `broadcast`, `bitcast`, `copy`) read only as a `dot`'s operand goes into
//!   the dot's cluster (a cluster of the dot alone becomes a `kOutput` fusion), so the matrix
//!   kernel reads the chain's operand in place instead of a materialized copy, when that
//!   operand lasts the whole run anyway (a parameter or constant: reading a temporary in place
//!   would keep it live until the last such dot). Nothing with
//!   arithmetic joins through a prologue view, and the chain's own operand stays outside; a
//!   reshape, bitcast or copy joins only above a transpose, slice or broadcast (alone they
//!   name their operand's bytes, which the kernel reads in place already). A view read only by
//!   prologues is copied into each (at most `max_duplicates`), as a cheap producer is.
//!
//! The algorithm is a single sweep per computation in reverse topological order (consumers
//! first). Every instruction starts a cluster of its own unless it joins the cluster of its
//! consumers: a producer joins only when all its uses are in one cluster (so nothing is computed
//! twice and no value is needed both inside and outside) and the rule for its kind allows it.
//! Because members join only at the time they are swept, every member of a cluster comes after
//! the producer in topological order, so no member can reach the producer through an outside
//! instruction: clusters never form cycles, with no reachability query at all. The one
//! exception to "all uses in one cluster" is a cheap producer with no arithmetic (`broadcast`,
//! `reshape`, `iota`, a scalar constant) or a scalar integer or pred computation (the start
//! indices of dynamic slices), which is copied into each consumer cluster, at most
//! `max_duplicates` times (the target's number), so duplication stays linear in the module.
//!
//! Each member carries how the cluster's root reads it (a *scale*: how many root elements, in
//! row-major order, go with one element of the member; elementwise ops and reshapes keep it,
//! a broadcast that appends minor dimensions multiplies it, a reduce over trailing dimensions
//! divides it) and how many times the fused kernel evaluates each of its elements. A member
//! read the same way by every use is evaluated once per element (or once per row for values
//! read per row); one read in several ways (a transpose beside an identity, a broadcast along
//! a major dimension) is evaluated once per read. A reduce may join a cluster only when its
//! scale is a whole number of root elements per reduce element, the same for every reduce of
//! the cluster (the row length): that is the row-fusion condition, and it guarantees the
//! kernel computes each reduction once per row. A producer with arithmetic joins only when its
//! evaluations per element stay within the target's `max_evaluations` and the bytes it saves
//! pay for the duplicated work ([`axle_analysis::FusionTradeoff`]). A reduce, dot or
//! convolution is never evaluated more than once per element.
//!
//! Fusion happens in the entry computation and in computations run as control flow (`while`
//! bodies and conditions, `conditional` branches, `call`ed computations), never inside fused
//! or applied (reducer, comparator, `map`) computations. Parameters, tuples, existing fusions,
//! side-effecting instructions and instructions with control dependencies are never fused.
//!
//! Read phase: instruction classes and, for every use in the users table, how the user reads
//! its operand (parallel over both); then the sweeps, one per computation, in parallel across
//! computations. Write phase: one sequential pass over the planned clusters, outlining each
//! cluster of two or more members ([`crate::outline`]), forwarding the root's uses to the
//! fusion and removing the members. Linear in the module; the same output at any thread count.
//!
//! Pre-conditions: a valid module. Post-conditions: the same values; every new fusion's
//! computation is called once; a fusion holds at most the target's `max_fusion_insts`
//! instructions.
//!
//! Counters: `fusions` (created), `loop_fusions`, `reduction_fusions` (a reduce root),
//! `row_fusions` (reduces inside, read per row), `output_fusions`, `prologue_views` (views
//! placed as a dot's prologue), `fused_insts` (members
//! moved or copied into fusions), `duplicated_insts` (extra copies of cheap producers),
//! `rejected_by_cost` (producers a rule allowed but the cost model kept out).

use std::sync::Arc;

use axle_analysis::{FusionTradeoff, Users};
use axle_ir::entity::{collect_map, dense_map, EntitySet, SecondaryMap};
use axle_ir::passes::Structure;
use axle_ir::{
    AttrKey, Changed, CompId, FusionKind, InstId, Module, Opcode, OptKind, OptSpec, Pass, PassCx,
    PassError,
};
use rayon::prelude::*;

use crate::outline::{Outliner, Placement};
use crate::target::{FusionRule, FusionTarget};

/// The options of the fusion passes.
pub const OPTIONS: &[OptSpec] = &[OptSpec {
    name: "target",
    kind: OptKind::Str,
    default: "cpu",
    doc: "the target whose capabilities and costs decide (cpu, generic, gpu)",
}];

/// The `fusion` pass.
pub struct Fusion {
    target: Result<Arc<dyn FusionTarget>, String>,
}

impl Fusion {
    /// The pass for `target` (an error names a target no backend provides; the pass reports it
    /// when it runs).
    pub fn new(target: Result<Arc<dyn FusionTarget>, String>) -> Fusion {
        Fusion { target }
    }
}

/// What an instruction can be in a fusion.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Class {
    /// Never fused (a cluster of its own that no producer joins); also what an id that is no
    /// live instruction reads as.
    #[default]
    Opaque,
    /// Elementwise or data movement: a producer or consumer of loop fusion.
    Loop,
    /// Like `Loop`, cheap to copy into several consumers: no arithmetic, or the scalar integer
    /// and pred arithmetic of index computations.
    Dup,
    /// A `reduce`: a reduction fusion's root, or a row fusion's producer.
    Reduce,
    /// A `dot` or `convolution`: an output fusion's producer.
    Matrix,
    /// A `dynamic-update-slice`: the root of a loop fusion that its update's and indices'
    /// producers join (never the updated array's, so the fusion can update it in place), and
    /// never a producer fused into another cluster.
    Root,
}

/// The class of `id` (`eligible` says which computations fusion runs in, `ctrl` which
/// instructions are control predecessors of others).
pub(crate) fn classify(
    m: &Module,
    id: InstId,
    target: &dyn FusionTarget,
    eligible: &EntitySet<CompId>,
    ctrl: &EntitySet<InstId>,
) -> Class {
    let p = m.parent(id);
    if p.is_none() || !eligible.contains(p) || ctrl.contains(id) {
        return Class::Opaque;
    }
    let op = m.opcode(id);
    if !m.control_predecessors(id).is_empty() || op.has_side_effect() {
        return Class::Opaque;
    }
    let count = match m.array_shape(id) {
        Some(a) if !a.is_dynamic() && a.num_elements() > 0 => a.num_elements(),
        // A variadic reduce (a tuple of results) can be a reduction fusion's root.
        None if op == Opcode::Reduce && m.shape(id).is_tuple() => 1,
        _ => return Class::Opaque,
    };
    if !target.can_fuse(m, id) {
        return Class::Opaque;
    }
    use Opcode::*;
    // Scalar integer and pred arithmetic (index computations) is copied into each consumer, as
    // broadcasts are: a dynamic slice then computes its own start indices.
    let index_scalar = count == 1
        && m.array_shape(id)
            .is_some_and(|a| a.ty.is_int() || a.ty == axle_ir::ElementType::Pred);
    match op {
        Constant if count == 1 && m.literal(id).is_some() => Class::Dup,
        Broadcast | Reshape | Iota => Class::Dup,
        DynamicUpdateSlice => Class::Root,
        _ if index_scalar && (op.is_elementwise() || matches!(op, Slice | Convert)) => Class::Dup,
        Reduce => Class::Reduce,
        Dot | Convolution => Class::Matrix,
        Transpose | Slice | Concatenate | Pad | Reverse | DynamicSlice | Gather => Class::Loop,
        StochasticConvert => Class::Opaque,
        _ if op.is_elementwise() => Class::Loop,
        _ => Class::Opaque,
    }
}

/// How a user reads one of its operands, relative to the user's own elements.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum Read {
    /// Element `i` of the user reads element `i` (in row-major order).
    Same,
    /// A broadcast appending minor dimensions: `e` user elements per operand element.
    Prefix(u64),
    /// A reduce over the trailing dimensions: `k` operand elements per user element.
    Trailing(u64),
    /// Any other index map; each operand element is read about this many times per
    /// evaluation of the user's elements.
    Other(f64),
    /// The user cannot take this operand inside a fusion (a matrix kernel's operand).
    Blocked,
}

fn elements(m: &Module, i: InstId) -> u64 {
    m.array_shape(i)
        .map_or(0, |a| a.num_elements().max(0) as u64)
}

/// Whether `dims` are exactly the last `dims.len()` of `rank` dimensions (each once).
fn trailing(dims: &[i64], rank: usize) -> bool {
    let k = dims.len();
    if k > rank || rank > 64 {
        return false;
    }
    let mut seen = 0u64;
    for &d in dims {
        if d < (rank - k) as i64 || d >= rank as i64 || seen & (1 << d) != 0 {
            return false;
        }
        seen |= 1 << d;
    }
    true
}

/// How `u` reads its operand `slot` (which is `p`).
pub(crate) fn read_of(m: &Module, u: InstId, slot: usize, p: InstId) -> Read {
    use Opcode::*;
    let (cu, cp) = (elements(m, u), elements(m, p));
    if cp == 0 {
        return Read::Blocked;
    }
    let ratio = (cu as f64 / cp as f64).max(1.0);
    let op = m.opcode(u);
    match op {
        Dot | Convolution => Read::Blocked,
        Reshape => Read::Same,
        Broadcast => {
            let rank = m.array_shape(p).map_or(0, |a| a.rank());
            let dims = m.ints_attr(u, &AttrKey::Dimensions).unwrap_or(&[]);
            if dims.iter().enumerate().all(|(j, &d)| d == j as i64) && dims.len() == rank {
                Read::Prefix(cu / cp)
            } else {
                Read::Other(ratio)
            }
        }
        Reduce => {
            let n = m.operands(u).len() / 2;
            let rank = m.array_shape(p).map_or(0, |a| a.rank());
            let dims = m.ints_attr(u, &AttrKey::Dimensions).unwrap_or(&[]);
            if slot >= n {
                Read::Other(cu.max(1) as f64)
            } else if n == 1 && cu > 0 && trailing(dims, rank) {
                Read::Trailing(cp / cu)
            } else {
                Read::Other(1.0)
            }
        }
        Transpose | Slice | Concatenate | Reverse => Read::Other(1.0),
        // The elemental pad reads its operand at every output position (a select, also where
        // the padding value wins), so the operand is evaluated `ratio` times per element: an
        // interior-padded interleave (`lax.associative_scan`) evaluates it twice.
        Pad => Read::Other(ratio),
        DynamicSlice if slot == 0 => Read::Other(1.0),
        // The updated array stays outside, so the fusion can update it in place.
        DynamicUpdateSlice if slot == 0 => Read::Blocked,
        DynamicUpdateSlice => Read::Other(1.0),
        DynamicSlice | Gather => Read::Other(ratio),
        _ if op.is_elementwise() && cu == cp => Read::Same,
        _ => Read::Other(ratio),
    }
}

/// How many root elements go with one element of a member, as a reduced fraction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Scale {
    num: u64,
    den: u64,
}

impl Scale {
    const ONE: Scale = Scale { num: 1, den: 1 };

    fn new(num: u128, den: u128) -> Option<Scale> {
        if num == 0 || den == 0 {
            return None;
        }
        let g = gcd(num, den);
        let (n, d) = (num / g, den / g);
        (n <= u64::MAX as u128 && d <= u64::MAX as u128).then_some(Scale {
            num: n as u64,
            den: d as u64,
        })
    }

    /// The scale of an operand read by `r` from a user of this scale.
    fn through(self, r: Read) -> Option<Scale> {
        match r {
            Read::Same => Some(self),
            Read::Prefix(e) => Scale::new(self.num as u128 * e as u128, self.den as u128),
            Read::Trailing(k) => Scale::new(self.num as u128, self.den as u128 * k as u128),
            Read::Other(_) | Read::Blocked => None,
        }
    }

    /// A whole number of root elements per element.
    fn whole(self) -> Option<u64> {
        (self.den == 1).then_some(self.num)
    }
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// Computations fusion runs in: the entry and those run as control flow.
pub(crate) fn eligible_computations(m: &Module, live: &[InstId]) -> EntitySet<CompId> {
    let n = m.comp_capacity();
    // Per computation: called as control flow (bit 0), called otherwise (bit 1).
    let calls: Vec<(CompId, u8)> = live
        .par_iter()
        .flat_map_iter(|&i| {
            let as_control = matches!(
                m.opcode(i),
                Opcode::While | Opcode::Conditional | Opcode::Call
            );
            m.called_comps_iter(i)
                .filter(move |c| !c.is_none() && c.index() < n)
                .map(move |c| (c, if as_control { 1 } else { 2 }))
        })
        .collect();
    let mut how: SecondaryMap<CompId, u8> = dense_map(n, 0);
    for (c, bit) in calls {
        how[c] |= bit;
    }
    let entry = m.entry();
    let mut eligible = EntitySet::with_capacity(n);
    for c in (0..n).map(CompId::new) {
        if m.is_live_comp(c) && (c == entry || how[c] & 1 != 0) && how[c] & 2 == 0 {
            eligible.insert(c);
        }
    }
    eligible
}

/// Instructions that are control predecessors of others.
pub(crate) fn control_predecessors(m: &Module, live: &[InstId]) -> EntitySet<InstId> {
    let preds: Vec<InstId> = live
        .par_iter()
        .flat_map_iter(|&i| m.control_predecessors(i).iter().copied())
        .collect();
    let mut out = EntitySet::with_capacity(m.inst_capacity());
    for p in preds {
        if p.index() < m.inst_capacity() {
            out.insert(p);
        }
    }
    out
}

/// How each use of the users table reads its operand, aligned with [`Users::all`].
pub(crate) fn read_table(m: &Module, users: &Users) -> Vec<Read> {
    (0..m.inst_capacity())
        .into_par_iter()
        .flat_map_iter(|k| {
            let p = InstId::new(k);
            let us = users.users(p);
            (0..us.len()).map(move |t| {
                let u = us[t];
                // The use's operand slot: the how-many-th use of `p` by `u` this is.
                let nth = us[..t].iter().rev().take_while(|&&x| x == u).count();
                let slot = m
                    .operands(u)
                    .iter()
                    .enumerate()
                    .filter(|(_, &o)| o == p)
                    .nth(nth)
                    .map_or(0, |(s, _)| s);
                read_of(m, u, slot, p)
            })
        })
        .collect()
}

const NONE: u32 = u32::MAX;

/// One placement of an instruction in a cluster.
#[derive(Clone, Copy, Debug)]
struct Node {
    /// The instruction's position in its computation's topological order.
    pos: u32,
    cluster: u32,
    /// The next placement of the same instruction.
    next: u32,
    scale: Option<Scale>,
    evals: f64,
    /// Whether the member is a view in a dot's prologue.
    view: bool,
}

#[derive(Clone, Copy, Debug)]
struct Cluster {
    root: u32,
    size: u32,
    /// Members other than the root and scalar constants: a cluster without any is not worth a
    /// fusion.
    work: u32,
    row_len: Option<u64>,
    has_matrix: bool,
    has_reduce: bool,
    root_reduce: bool,
    opaque: bool,
}

/// One use of a producer by a placed user: the user's cluster and how it reads.
#[derive(Clone, Copy, Debug)]
struct Use {
    cluster: u32,
    read: Read,
    scale: Option<Scale>,
    evals: f64,
    /// The user is a prologue view, or a `dot` reading its operand: only a prologue view may
    /// join through this use.
    prologue: bool,
}

/// The clusters of one computation.
struct CompPlan {
    comp: CompId,
    order: Vec<InstId>,
    nodes: Vec<Node>,
    head: Vec<u32>,
    clusters: Vec<Cluster>,
    rejected_by_cost: u64,
}

struct Ctx<'a> {
    m: &'a Module,
    target: &'a dyn FusionTarget,
    users: &'a Users,
    reads: &'a [Read],
    class: &'a SecondaryMap<InstId, Class>,
    pos: &'a SecondaryMap<InstId, u32>,
}

impl Ctx<'_> {
    /// Whether producer `p` of class `class` may join cluster `c` through `uses`; returns the
    /// member's scale, evaluations per element, and whether it joins as a prologue view.
    fn join(
        &self,
        p: InstId,
        class: Class,
        cl: &Cluster,
        uses: &[Use],
        rejected: &mut u64,
    ) -> Option<(Option<Scale>, f64, bool)> {
        let costs = self.target.costs();
        if cl.size as usize >= costs.max_fusion_insts {
            return None;
        }
        if uses.iter().any(|u| u.prologue) {
            // A dot's operand, or read by a view of one: only another view joins, and it is
            // read in place by the matrix kernel (no evaluations, no cost).
            let ok = is_view_op(self.m.opcode(p))
                && moves_data(self.m, p)
                && reads_lasting_buffers(self.m, p)
                && self.target.reads_dot_operand_views()
                && matches!(class, Class::Loop | Class::Dup)
                && uses.iter().all(|u| u.prologue);
            return ok.then_some((None, 0.0, true));
        }
        if cl.opaque {
            return None;
        }
        if uses.iter().any(|u| u.read == Read::Blocked) {
            return None;
        }
        let mut scale = uses[0].scale.and_then(|s| s.through(uses[0].read));
        for u in &uses[1..] {
            if scale != u.scale.and_then(|s| s.through(u.read)) {
                scale = None;
            }
        }
        let cp = elements(self.m, p);
        let evals = if cp <= 1 || scale.is_some() {
            1.0
        } else {
            uses.iter()
                .map(|u| {
                    u.evals
                        * match u.read {
                            Read::Prefix(e) => e as f64,
                            Read::Other(r) => r,
                            _ => 1.0,
                        }
                })
                .sum()
        };
        let t = self.target;
        match class {
            Class::Loop | Class::Dup => {
                if !t.supports(FusionRule::Loop)
                    || (cl.root_reduce && !t.supports(FusionRule::Reduction))
                {
                    return None;
                }
                if evals > 1.0 {
                    let trade = FusionTradeoff::of_producer(self.m, p, uses.len(), evals);
                    if trade.flops_duplicated > 0.0
                        && (evals > costs.max_evaluations
                            || !trade.worth_it(costs.byte_cost, costs.transcendental_cost))
                    {
                        *rejected += 1;
                        return None;
                    }
                }
            }
            Class::Reduce => {
                let ops = self.m.operands(p);
                let row = scale.and_then(Scale::whole)?;
                let rank = self.m.array_shape(ops[0]).map_or(0, |a| a.rank());
                let dims = self.m.ints_attr(p, &AttrKey::Dimensions).unwrap_or(&[]);
                if !t.supports(FusionRule::Row)
                    || ops.len() != 2
                    || !trailing(dims, rank)
                    || cl.has_matrix
                    || cl.row_len.is_some_and(|l| l != row)
                    || !t.can_emit_row_reduce(self.m, p)
                {
                    return None;
                }
            }
            Class::Matrix => {
                if !t.supports(FusionRule::Output)
                    || scale != Some(Scale::ONE)
                    || uses.iter().any(|u| u.read != Read::Same)
                    || cl.has_matrix
                    || cl.has_reduce
                    || cl.root_reduce
                    || !t.can_emit_output_fusion(self.m, p)
                {
                    return None;
                }
            }
            Class::Opaque | Class::Root => return None,
        }
        Some((scale, evals, false))
    }

    /// Plans the clusters of computation `comp` (its instructions in topological order).
    fn sweep(&self, comp: CompId, order: &[InstId]) -> CompPlan {
        let n = order.len();
        let mut plan = CompPlan {
            comp,
            order: order.to_vec(),
            nodes: Vec::with_capacity(n + n / 8),
            head: vec![NONE; n],
            clusters: Vec::with_capacity(n),
            rejected_by_cost: 0,
        };
        let max_dups = self.target.costs().max_duplicates;
        let mut uses: Vec<Use> = Vec::new();
        let mut groups: Vec<(usize, usize)> = Vec::new();
        let mut distinct: Vec<u32> = Vec::new();
        for k in (0..n).rev() {
            let p = order[k];
            let class = self.class[p];
            let is_constant = self.m.opcode(p) == Opcode::Constant;
            uses.clear();
            let external = self.users.is_root(p);
            if class != Class::Opaque {
                let range = self.users.range(p);
                let us = &self.users.all()[range.clone()];
                for (j, &u) in us.iter().enumerate() {
                    let read = self.reads[range.start + j];
                    let dot_operand = read == Read::Blocked && self.m.opcode(u) == Opcode::Dot;
                    let mut nd = plan.head[self.pos[u] as usize];
                    while nd != NONE {
                        let node = plan.nodes[nd as usize];
                        uses.push(Use {
                            cluster: node.cluster,
                            read,
                            scale: node.scale,
                            evals: node.evals,
                            prologue: node.view || dot_operand,
                        });
                        nd = node.next;
                    }
                }
            }
            // Group the uses by cluster: one group is the common case; several matter only
            // for a cheap producer that may be copied into a few of them, or a view read only
            // by dots' prologues (never computed there, so free to copy).
            let dup = class == Class::Dup
                || (!uses.is_empty()
                    && uses.iter().all(|u| u.prologue)
                    && self.target.reads_dot_operand_views()
                    && is_view_op(self.m.opcode(p)));
            groups.clear();
            if let Some(first) = uses.first() {
                let c0 = first.cluster;
                if uses.iter().all(|u| u.cluster == c0) {
                    groups.push((0, uses.len()));
                } else if dup {
                    // A splat (a broadcast of a scalar, an iota) reads no buffer: copies of it
                    // cost nothing, where keeping it whole costs a buffer as large as its
                    // result, live from its first reader to its last (a GELU's constants,
                    // shared by every layer after CSE: 43 buffers of 9.6 MB in an MLP-Mixer).
                    let limit = if is_splat(self.m, p) {
                        usize::MAX
                    } else {
                        max_dups
                    };
                    distinct.clear();
                    for u in &uses {
                        if !distinct.contains(&u.cluster) {
                            distinct.push(u.cluster);
                            if distinct.len() > limit {
                                break;
                            }
                        }
                    }
                    if distinct.len() <= limit {
                        uses.sort_by_key(|u| u.cluster);
                        let mut s = 0;
                        while s < uses.len() {
                            let c = uses[s].cluster;
                            let e = s + uses[s..].iter().take_while(|u| u.cluster == c).count();
                            groups.push((s, e));
                            s = e;
                        }
                    }
                }
                // Otherwise the uses sit in several clusters (or too many for copies): the
                // producer stays on its own, and `groups` stays empty.
            }
            let mut standalone = true;
            if groups.len() == 1 && !external {
                let (s, e) = groups[0];
                let c = uses[s].cluster as usize;
                if let Some((scale, evals, view)) = self.join(
                    p,
                    class,
                    &plan.clusters[c],
                    &uses[s..e],
                    &mut plan.rejected_by_cost,
                ) {
                    let how = Placed { scale, evals, view };
                    add_node(&mut plan, k, c as u32, how, class, is_constant);
                    standalone = false;
                }
            } else if dup && !groups.is_empty() {
                let mut all = !external;
                for &(s, e) in &groups {
                    let c = uses[s].cluster as usize;
                    match self.join(
                        p,
                        class,
                        &plan.clusters[c],
                        &uses[s..e],
                        &mut plan.rejected_by_cost,
                    ) {
                        Some((scale, evals, view)) => {
                            let how = Placed { scale, evals, view };
                            add_node(&mut plan, k, c as u32, how, class, is_constant)
                        }
                        None => all = false,
                    }
                }
                standalone = !all;
            }
            if standalone {
                let c = plan.clusters.len() as u32;
                plan.clusters.push(Cluster {
                    root: k as u32,
                    size: 0,
                    work: 0,
                    row_len: None,
                    // A dot's own cluster takes only its prologue views (where the target
                    // reads them), and is an output fusion when it does.
                    has_matrix: class == Class::Matrix,
                    has_reduce: false,
                    root_reduce: class == Class::Reduce,
                    opaque: matches!(class, Class::Opaque | Class::Matrix),
                });
                let how = Placed {
                    scale: Some(Scale::ONE),
                    evals: 1.0,
                    view: false,
                };
                add_node(&mut plan, k, c, how, Class::Opaque, false);
            }
        }
        plan
    }
}

/// How a member is placed in its cluster.
struct Placed {
    scale: Option<Scale>,
    evals: f64,
    view: bool,
}

/// Whether `p` computes its elements from no buffer: an `iota`, or a `broadcast` of a scalar.
fn is_splat(m: &Module, p: InstId) -> bool {
    match m.opcode(p) {
        Opcode::Iota => true,
        Opcode::Broadcast => m
            .operands(p)
            .first()
            .and_then(|&o| m.array_shape(o))
            .is_some_and(|a| a.rank() == 0),
        _ => false,
    }
}

/// Whether `op` may be part of a dot's prologue (a view of its operand).
fn is_view_op(op: Opcode) -> bool {
    matches!(
        op,
        Opcode::Transpose
            | Opcode::Reshape
            | Opcode::Slice
            | Opcode::Broadcast
            | Opcode::Bitcast
            | Opcode::Copy
    )
}

/// Whether every buffer view `p` reads, through its chain of views, lasts the whole run anyway
/// (a parameter's, a constant's, or an element of a parameter's tuple): read in place by the
/// matrix kernel, a temporary would stay live until the last dot reading it, where
/// materialized copies of its parts let it die at once (the transformer's Q/K/V projection:
/// 6,291,456 temporary bytes in place against 5,242,880 copied, XLA's figure), so a view of a
/// temporary stays outside.
fn reads_lasting_buffers(m: &Module, p: InstId) -> bool {
    let mut stack = vec![p];
    while let Some(i) = stack.pop() {
        match m.opcode(i) {
            Opcode::Parameter | Opcode::Constant => {}
            Opcode::GetTupleElement => stack.extend(m.operands(i).iter().copied()),
            op if is_view_op(op) => stack.extend(m.operands(i).iter().copied()),
            _ => return false,
        }
    }
    true
}

/// Whether view `p` (a dot's operand or part of one's chain of views) is, or reads through
/// reshapes, bitcasts and copies, a `transpose`, `slice` or `broadcast`: a chain of reshapes
/// alone names its operand's bytes (no kernel copies it), so it gains nothing as a prologue.
fn moves_data(m: &Module, mut p: InstId) -> bool {
    loop {
        match m.opcode(p) {
            Opcode::Transpose | Opcode::Slice | Opcode::Broadcast => return true,
            Opcode::Reshape | Opcode::Bitcast | Opcode::Copy => match m.operands(p).first() {
                Some(&o) => p = o,
                None => return false,
            },
            _ => return false,
        }
    }
}

/// Places the instruction at position `k` in cluster `c`.
fn add_node(plan: &mut CompPlan, k: usize, c: u32, how: Placed, class: Class, is_constant: bool) {
    let nd = plan.nodes.len() as u32;
    plan.nodes.push(Node {
        pos: k as u32,
        cluster: c,
        next: plan.head[k],
        scale: how.scale,
        evals: how.evals,
        view: how.view,
    });
    plan.head[k] = nd;
    let cl = &mut plan.clusters[c as usize];
    cl.size += 1;
    if cl.root != k as u32 {
        cl.work += (class != Class::Dup || !is_constant) as u32;
        match class {
            Class::Reduce => {
                cl.has_reduce = true;
                cl.row_len = how.scale.and_then(Scale::whole);
            }
            Class::Matrix => cl.has_matrix = true,
            _ => {}
        }
    }
}

impl Pass for Fusion {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let target = self.target.clone().map_err(PassError::new)?;
        let s = cx.analysis::<Structure>(m);
        let users = cx.analysis::<Users>(m);
        let live = m.live_ids();
        let eligible = eligible_computations(m, &live);
        let ctrl = control_predecessors(m, &live);
        // Read phase: classes and the read table, in parallel.
        let (class, reads) = rayon::join(
            || {
                let class = (0..m.inst_capacity())
                    .into_par_iter()
                    .map(|k| {
                        let id = InstId::new(k);
                        if m.is_live(id) {
                            classify(m, id, &*target, &eligible, &ctrl)
                        } else {
                            Class::Opaque
                        }
                    })
                    .collect::<Vec<Class>>();
                collect_map::<InstId, Class>(class)
            },
            || read_table(m, &users),
        );
        let mut pos: SecondaryMap<InstId, u32> = dense_map(m.inst_capacity(), NONE);
        let comps: Vec<CompId> = (0..m.comp_capacity())
            .map(CompId::new)
            .filter(|&c| eligible.contains(c))
            .collect();
        for &c in &comps {
            for (k, &i) in s.topo[c].iter().enumerate() {
                pos[i] = k as u32;
            }
        }
        let ctx = Ctx {
            m,
            target: &*target,
            users: &users,
            reads: &reads,
            class: &class,
            pos: &pos,
        };
        let plans: Vec<CompPlan> = comps
            .par_iter()
            .map(|&c| ctx.sweep(c, &s.topo[c]))
            .collect();
        cx.count(
            "rejected_by_cost",
            plans.iter().map(|p| p.rejected_by_cost).sum(),
        );
        if plans.iter().all(|p| p.clusters.iter().all(|c| c.work == 0)) {
            return Ok(false);
        }
        // Write phase.
        // Room for the parameters, copies and fusions (bounded by the members' operands plus
        // two per member), so no column grows while writing.
        let mut n_new = 0usize;
        for plan in &plans {
            for nd in &plan.nodes {
                if plan.clusters[nd.cluster as usize].work > 0 {
                    n_new += 2 + m.operands(plan.order[nd.pos as usize]).len();
                }
            }
        }
        m.reserve(n_new, 2 * n_new, 0);
        let mut outliner = Outliner::new(m);
        let mut rw = m.rewriter();
        let mut dead = Vec::new();
        for plan in &plans {
            write_plan(plan, &pos, &mut rw, &mut outliner, &mut dead, cx);
        }
        for i in dead {
            rw.remove(i);
        }
        Ok(rw.finish())
    }
}

/// Outlines the clusters of one computation's plan (roots in topological order); the members
/// to remove are collected in `dead` (removed once every plan is written, since a copied
/// member may be read again by a later cluster).
fn write_plan(
    plan: &CompPlan,
    pos: &SecondaryMap<InstId, u32>,
    rw: &mut axle_ir::Rewriter<'_>,
    outliner: &mut Outliner,
    dead: &mut Vec<InstId>,
    cx: &mut PassCx<'_>,
) {
    // Members per cluster by counting sort; nodes were made consumers first, so each cluster's
    // list comes out reversed, and is flipped into topological order.
    let nc = plan.clusters.len();
    let mut start = vec![0u32; nc + 1];
    for nd in &plan.nodes {
        start[nd.cluster as usize + 1] += 1;
    }
    for c in 0..nc {
        start[c + 1] += start[c];
    }
    let mut fill = start.clone();
    let mut members = vec![0u32; plan.nodes.len()];
    for (i, nd) in plan.nodes.iter().enumerate() {
        members[fill[nd.cluster as usize] as usize] = i as u32;
        fill[nd.cluster as usize] += 1;
    }
    // Per instruction (by position): how many placements inside fusions, and whether the
    // original stays (it roots a cluster, or sits in a cluster not worth a fusion). Counted
    // once over the nodes, so a cheap producer placed in every cluster (a broadcast bias read
    // by every layer) costs one visit per placement, not one per placement per cluster.
    let mut placed = vec![(0u32, false); plan.order.len()];
    for node in &plan.nodes {
        let cl = &plan.clusters[node.cluster as usize];
        let p = &mut placed[node.pos as usize];
        if cl.root == node.pos || cl.work == 0 {
            p.1 = true;
        } else {
            p.0 += 1;
        }
    }
    let placements = |k: usize| placed[k];
    for c in (0..nc).rev() {
        let cl = plan.clusters[c];
        if cl.work == 0 {
            continue;
        }
        let list = &members[start[c] as usize..start[c + 1] as usize];
        let insts: Vec<InstId> = list
            .iter()
            .rev()
            .map(|&nd| plan.order[plan.nodes[nd as usize].pos as usize])
            .collect();
        let root = plan.order[cl.root as usize];
        let kind = if cl.has_matrix {
            cx.count("output_fusions", 1);
            FusionKind::Output
        } else if cl.has_reduce {
            cx.count("row_fusions", 1);
            FusionKind::Input
        } else if cl.root_reduce {
            cx.count("reduction_fusions", 1);
            FusionKind::Input
        } else {
            cx.count("loop_fusions", 1);
            FusionKind::Loop
        };
        // A member placed only here moves into the fusion; the root (forwarded to the fusion)
        // and cheap producers placed in several clusters are copied.
        let placement = |i: InstId| {
            let (fused, stays) = placements(pos[i] as usize);
            if i == root {
                Placement::Copy { keep_name: true }
            } else if fused == 1 && !stays {
                Placement::Move
            } else {
                Placement::Copy { keep_name: false }
            }
        };
        let f = outliner.outline(rw, plan.comp, &insts, &[root], kind, placement, |_| {
            Vec::new()
        });
        cx.count("fusions", 1);
        cx.count("fused_insts", insts.len() as u64);
        let views = list
            .iter()
            .filter(|&&nd| plan.nodes[nd as usize].view)
            .count();
        cx.count("prologue_views", views as u64);
        rw.replace_all_uses(root, f);
    }
    // Originals copied into every cluster they are placed in go; copies beyond the first are
    // duplicates.
    for (k, &i) in plan.order.iter().enumerate() {
        let (fused, stays) = placements(k);
        if fused > 1 && !stays {
            dead.push(i);
            cx.count("duplicated_insts", fused as u64 - 1);
        } else if stays {
            cx.count("duplicated_insts", fused as u64);
        }
    }
}
