//! Alias analysis: which values share one buffer.
//!
//! Must-aliases are already one value ([`crate::program`]): views, call parameters and
//! results, a loop's state in its condition, body and result. This file decides the *may*
//! aliases, greedily in program order, each only where it is safe:
//! - **in place**: an instruction writes an output over an operand that dies there: a
//!   `dynamic-update-slice` or `scatter` over the array it updates; an element-wise op, or a
//!   fusion whose parameter reaches its root through element-wise ops of the root's dimensions
//!   only, over an operand of the output's shape (each element is read before the same
//!   element is written), or also through reductions over trailing dimensions where the
//!   backend's kernel reduces each row before writing it (`may_update_through_rows`: an
//!   in-place softmax); a fusion whose root is a `dynamic-update-slice` or `scatter` of one
//!   of its parameters over that parameter; a step of a fusion run as steps over a value it
//!   reads ([`Program::step_reads`]) that reaches it through element-wise ops of its
//!   dimensions only (a reduction's result divided by a count, as a mean is), or also through
//!   row reductions where the backend says so (a softmax step over the scores step);
//! - **loop state**: a `while`'s initial value, when it dies at the loop, and its body's root,
//!   when the old state is dead by then, share the state's buffer (no copy in, no copy back);
//! - **branch outputs**: a branch's root shares the conditional's output buffer when it is the
//!   branch's own value.
//!
//! Every such pairing is a *handoff*: a value `u` last read at position `p` and a value `v`
//! first written at `p` by the same step. Two sets of values may share a buffer when no
//! interval of one overlaps an interval of the other, except where one ends and the other
//! begins at a registered handoff. Sets holding an entry parameter (unless donated through
//! `input_output_alias` and the backend writes donated parameters) or a constant are read-only
//! and never merge; two sets with fixed memory (donated parameters) never merge.
//!
//! Sets are a union-find over values; each root keeps its intervals in a map by start (a
//! set that never merged reads its one value's intervals), so a check costs the smaller set's
//! intervals times a logarithm and merging moves the smaller into the larger: `O(n log² n)`.

use std::collections::BTreeMap;

use hashbrown::HashSet;

use axle_ir::entity::{EntitySet, SecondaryMap};
use axle_ir::{AttrKey, InstId, InstsByComp, Module, Opcode};

use crate::liveness::{loop_body_end, Liveness};
use crate::program::{Program, ValueId, ValueKind};
use crate::rules::{BufferRules, FusionRun};
use crate::views::{def_kind, Def};

/// A set's intervals: its one value's, or a map from start to `(end, value)`.
#[derive(Clone, Debug)]
enum Occ {
    One(ValueId),
    Many(BTreeMap<u32, (u32, ValueId)>),
}

/// The may-alias decisions: values grouped into sets that share a buffer.
#[derive(Clone, Debug)]
pub struct Aliases {
    parent: SecondaryMap<ValueId, ValueId>,
    occ: SecondaryMap<ValueId, Occ>,
    count: SecondaryMap<ValueId, u32>,
    read_only: EntitySet<ValueId>,
    fixed: EntitySet<ValueId>,
    /// Registered handoffs by ending value (CSR, `handoff_off[v.index()]..`): `(starting value,
    /// position)`.
    handoff_off: Vec<u32>,
    handoffs: Vec<(ValueId, u32)>,
    /// Merges made, by kind: in place, loop init, loop back, branch outputs.
    pub merged: [u64; 4],
}

/// Entry parameter leaves donated through `input_output_alias`, as `(output leaf, param leaf)`
/// pairs of depth-first leaf numbers.
pub fn donations(m: &Module) -> Vec<(u32, u32)> {
    let Some((_, text)) = m
        .header_attrs
        .iter()
        .find(|(k, _)| k == "input_output_alias")
    else {
        return Vec::new();
    };
    parse_donations(m, text).unwrap_or_default()
}

/// Parses `{ {out}: (param, {index}, kind), ... }` into leaf numbers.
fn parse_donations(m: &Module, text: &str) -> Option<Vec<(u32, u32)>> {
    let entry = m.entry();
    let table = crate::leaves::ShapeLeaves::new(m);
    let root_shape = m.shape_id(m.root(entry));
    let params: Vec<axle_ir::ShapeId> = m.params(entry).iter().map(|&p| m.shape_id(p)).collect();
    let leaf_of = |s: axle_ir::ShapeId, idx: &[usize]| -> Option<u32> {
        let (mut s, mut off) = (s, 0u32);
        for &k in idx {
            let (o, _) = table.element(m, s, k)?;
            off += o;
            let axle_ir::Shape::Tuple(es) = m.shape_of(s) else {
                return None;
            };
            s = es[k];
        }
        (table.count(s) == 1).then_some(off)
    };
    let ints = |t: &str| -> Option<Vec<usize>> {
        t.split(',')
            .map(|x| x.trim())
            .filter(|x| !x.is_empty())
            .map(|x| x.parse().ok())
            .collect()
    };
    let body = text.trim().strip_prefix('{')?.strip_suffix('}')?;
    let mut out = Vec::new();
    let mut rest = body.trim();
    while !rest.is_empty() {
        let r = rest.strip_prefix('{')?;
        let close = r.find('}')?;
        let out_idx = ints(&r[..close])?;
        let r = r[close + 1..].trim_start().strip_prefix(':')?.trim_start();
        let r = r.strip_prefix('(')?;
        let close = r.find(')')?;
        let inner = &r[..close];
        rest = r[close + 1..]
            .trim_start()
            .trim_start_matches(',')
            .trim_start();
        let (pnum, after) = inner.split_once(',')?;
        let pnum: usize = pnum.trim().parse().ok()?;
        let a = after.trim_start().strip_prefix('{')?;
        let c = a.find('}')?;
        let pidx = ints(&a[..c])?;
        let ol = leaf_of(root_shape, &out_idx)?;
        let mut base = 0u32;
        for s in params.iter().take(pnum) {
            base += table.count(*s);
        }
        let pl = leaf_of(*params.get(pnum)?, &pidx)?;
        out.push((ol, base + pl));
    }
    Some(out)
}

impl Aliases {
    /// Decides the may-aliases of `p` under `rules`.
    pub fn new(m: &Module, p: &Program, live: &Liveness, rules: &dyn BufferRules) -> Aliases {
        let nv = p.values().len();
        let donated: HashSet<u32> = if rules.writes_donated_params() {
            donations(m).into_iter().map(|(_, pl)| pl).collect()
        } else {
            HashSet::new()
        };
        let mut read_only = EntitySet::with_capacity(nv);
        let mut fixed = EntitySet::with_capacity(nv);
        let mut parent = SecondaryMap::with_default(ValueId::NONE);
        let mut occ = SecondaryMap::with_default(Occ::One(ValueId::NONE));
        for (v, val) in p.values().iter() {
            parent[v] = v;
            occ[v] = Occ::One(v);
            match val.kind {
                ValueKind::Param(k) if donated.contains(&k) => {
                    fixed.insert(v);
                }
                ValueKind::Param(_) | ValueKind::Constant => {
                    read_only.insert(v);
                }
                _ => {}
            }
        }
        let mut a = Aliases {
            parent,
            occ,
            count: SecondaryMap::with_default(1),
            read_only,
            fixed,
            handoff_off: Vec::new(),
            handoffs: Vec::new(),
            merged: [0; 4],
        };
        let by_comp = m.insts_by_comp();
        let plan = Planner {
            m,
            p,
            rules,
            by_comp: &by_comp,
        };
        // Register every handoff first (a later merge may bring an earlier pair together),
        // then decide in program order.
        let mut steps: Vec<(ValueId, ValueId, u32, usize)> = Vec::new();
        for &i in p.sequence() {
            plan.handoffs_at(i, &mut steps);
        }
        let mut off = vec![0u32; nv + 1];
        for &(u, ..) in &steps {
            off[u.index() + 1] += 1;
        }
        for k in 0..nv {
            off[k + 1] += off[k];
        }
        let mut fill = off.clone();
        a.handoffs = vec![(ValueId::NONE, 0); steps.len()];
        for &(u, v, pos, _) in &steps {
            a.handoffs[fill[u.index()] as usize] = (v, pos);
            fill[u.index()] += 1;
        }
        a.handoff_off = off;
        for (u, v, _, kind) in steps {
            if a.try_merge(p, live, u, v) {
                a.merged[kind] += 1;
            }
        }
        a
    }

    /// The representative of `v`'s set.
    pub fn find(&self, v: ValueId) -> ValueId {
        let mut x = v;
        while self.parent[x] != x {
            x = self.parent[x];
        }
        x
    }

    fn find_mut(&mut self, v: ValueId) -> ValueId {
        let root = self.find(v);
        let mut x = v;
        while self.parent[x] != root {
            let next = self.parent[x];
            self.parent[x] = root;
            x = next;
        }
        root
    }

    /// Whether `v`'s set may not be written (an entry parameter or a constant).
    pub fn read_only(&self, v: ValueId) -> bool {
        self.read_only.contains(self.find(v))
    }

    fn intervals(&self, live: &Liveness, root: ValueId) -> Vec<(u32, u32, ValueId)> {
        match &self.occ[root] {
            Occ::One(v) => live
                .intervals(*v)
                .iter()
                .map(|&(s, e)| (s, e, *v))
                .collect(),
            Occ::Many(map) => map.iter().map(|(&s, &(e, v))| (s, e, v)).collect(),
        }
    }

    fn permitted(&self, x: (u32, u32, ValueId), y: (u32, u32, ValueId)) -> bool {
        let (lo, hi) = (x.0.max(y.0), x.1.min(y.1));
        if lo < hi {
            return false;
        }
        // They touch at `lo`: one ends there and the other begins there, at a handoff.
        (x.1 == lo && y.0 == lo && self.is_handoff(x.2, y.2, lo))
            || (y.1 == lo && x.0 == lo && self.is_handoff(y.2, x.2, lo))
    }

    /// Whether `u` ending at `pos` hands its memory to `v` there.
    fn is_handoff(&self, u: ValueId, v: ValueId, pos: u32) -> bool {
        let (s, e) = (
            self.handoff_off[u.index()] as usize,
            self.handoff_off[u.index() + 1] as usize,
        );
        self.handoffs[s..e].contains(&(v, pos))
    }

    /// Whether the sets `a` and `b` (roots) may share a buffer.
    fn compatible(&self, live: &Liveness, a: ValueId, b: ValueId) -> bool {
        let (small, large) = if self.count[a] <= self.count[b] {
            (a, b)
        } else {
            (b, a)
        };
        let xs = self.intervals(live, small);
        match &self.occ[large] {
            Occ::One(v) => {
                let ys: Vec<(u32, u32, ValueId)> = live
                    .intervals(*v)
                    .iter()
                    .map(|&(s, e)| (s, e, *v))
                    .collect();
                xs.iter().all(|&x| {
                    ys.iter()
                        .all(|&y| x.1 < y.0 || y.1 < x.0 || self.permitted(x, y))
                })
            }
            Occ::Many(map) => xs.iter().all(|&x| {
                for (&s, &(e, v)) in map.range(..=x.1).rev() {
                    if e < x.0 {
                        break;
                    }
                    if !self.permitted(x, (s, e, v)) {
                        return false;
                    }
                }
                true
            }),
        }
    }

    /// Merges the sets of `u` and `v` if they may share a buffer; returns whether it merged
    /// them (`false` also when they were one set already).
    fn try_merge(&mut self, p: &Program, live: &Liveness, u: ValueId, v: ValueId) -> bool {
        let (a, b) = (self.find_mut(u), self.find_mut(v));
        if a == b {
            return false;
        }
        if self.read_only.contains(a) || self.read_only.contains(b) {
            return false;
        }
        if self.fixed.contains(a) && self.fixed.contains(b) {
            return false;
        }
        if p.value(u).bytes != p.value(v).bytes {
            return false;
        }
        if !self.compatible(live, a, b) {
            return false;
        }
        let (big, small) = if self.count[a] >= self.count[b] {
            (a, b)
        } else {
            (b, a)
        };
        let moved = self.intervals(live, small);
        let mut map = match std::mem::replace(&mut self.occ[big], Occ::One(big)) {
            Occ::Many(map) => map,
            Occ::One(x) => live
                .intervals(x)
                .iter()
                .map(|&(s, e)| (s, (e, x)))
                .collect(),
        };
        for (s, e, x) in moved {
            let slot = map.entry(s).or_insert((e, x));
            slot.0 = slot.0.max(e);
        }
        self.occ[big] = Occ::Many(map);
        self.occ[small] = Occ::One(small);
        self.parent[small] = big;
        self.count[big] += self.count[small];
        if self.fixed.contains(small) {
            self.fixed.insert(big);
        }
        true
    }
}

/// Finds the handoffs of each step.
struct Planner<'a> {
    m: &'a Module,
    p: &'a Program,
    rules: &'a dyn BufferRules,
    by_comp: &'a InstsByComp,
}

/// Handoff kinds (indices into [`Aliases::merged`]).
const IN_PLACE: usize = 0;
const LOOP_INIT: usize = 1;
const LOOP_BACK: usize = 2;
const BRANCH_OUT: usize = 3;

impl Planner<'_> {
    /// Pushes `(u, v, position, kind)` for every handoff `i` makes, in the order they are
    /// tried.
    fn handoffs_at(&self, i: InstId, out: &mut Vec<(ValueId, ValueId, u32, usize)>) {
        let (m, p) = (self.m, self.p);
        match def_kind(m, i, self.rules) {
            // A step of a fusion reads values through inline computation: it may write over
            // one that reaches it through element-wise ops of its own dimensions only.
            Def::Fresh if p.step_reads(i).is_some() => {
                let reads = p.step_reads(i).unwrap_or(&[]);
                for k in step_pairs(m, i, reads, self.rules, self.by_comp) {
                    let (Some(&u), Some(&v)) = (single(p.leaves(reads[k])), p.leaves(i).first())
                    else {
                        continue;
                    };
                    let slots = reads.iter().filter(|&&r| p.leaves(r).contains(&u)).count();
                    if slots != 1 || !self.rules.may_update_in_place(m, i, k, 0) {
                        continue;
                    }
                    out.push((u, v, p.start(i), IN_PLACE));
                }
            }
            Def::Fresh => {
                for (k, l) in in_place_candidates(m, i, self.rules, self.by_comp) {
                    let (Some(&u), Some(&v)) = (
                        m.operands(i).get(k).and_then(|&o| single(p.leaves(o))),
                        p.leaves(i).get(l),
                    ) else {
                        continue;
                    };
                    if !self.rules.may_update_in_place(m, i, k, l) {
                        continue;
                    }
                    if !elementwise_op(m, i) && self.operand_slots(i, u) != 1 {
                        continue;
                    }
                    out.push((u, v, p.start(i), IN_PLACE));
                }
            }
            Def::While => {
                let init = m.operands(i).first().map_or(&[][..], |&o| p.leaves(o));
                for (&u, &v) in init.iter().zip(p.leaves(i)) {
                    out.push((u, v, p.start(i), LOOP_INIT));
                }
                if let Some(body) = m.comp_attr(i, &AttrKey::Body) {
                    let end = loop_body_end(m, p, i);
                    for (&u, &v) in p.leaves(m.root(body)).iter().zip(p.leaves(i)) {
                        out.push((u, v, end, LOOP_BACK));
                    }
                }
            }
            Def::Conditional => {
                for b in m.branch_computations(i).unwrap_or_default() {
                    let end = p.comp_end(b);
                    for (&u, &v) in p.leaves(m.root(b)).iter().zip(p.leaves(i)) {
                        out.push((u, v, end, BRANCH_OUT));
                    }
                }
            }
            _ => {}
        }
    }

    /// How many operand slots of `i` hold value `u`.
    fn operand_slots(&self, i: InstId, u: ValueId) -> usize {
        self.m
            .operands(i)
            .iter()
            .filter(|&&o| self.p.leaves(o).contains(&u))
            .count()
    }
}

fn single(vs: &[ValueId]) -> Option<&ValueId> {
    match vs {
        [v] => Some(v),
        _ => None,
    }
}

/// Whether `i` is an element-wise op (every operand read at the index written).
fn elementwise_op(m: &Module, i: InstId) -> bool {
    m.opcode(i).is_elementwise() && m.opcode(i) != Opcode::StochasticConvert
}

/// `(operand, output leaf)` pairs where `i`'s kernel may write the output over the operand
/// (`by_comp`: every computation's instructions).
fn in_place_candidates(
    m: &Module,
    i: InstId,
    rules: &dyn BufferRules,
    by_comp: &InstsByComp,
) -> Vec<(usize, usize)> {
    let same_shape = |o: InstId| m.array_shape(o).is_some() && m.array_shape(o) == m.array_shape(i);
    let ops = m.operands(i);
    match m.opcode(i) {
        Opcode::DynamicUpdateSlice if same_shape(ops[0]) => vec![(0, 0)],
        Opcode::Scatter => scatter_pairs(m, i),
        _ if elementwise_op(m, i) => (0..ops.len())
            .filter(|&k| same_shape(ops[k]))
            .map(|k| (k, 0))
            .collect(),
        Opcode::Fusion if rules.fusion_run(m, i) == FusionRun::Kernel => {
            fusion_pairs(m, i, rules, by_comp)
        }
        _ => Vec::new(),
    }
}

/// A scatter updates each of its `n` operands into output leaf `k`.
fn scatter_pairs(m: &Module, i: InstId) -> Vec<(usize, usize)> {
    let ops = m.operands(i);
    let n = (ops.len().saturating_sub(1)) / 2;
    let outs: Vec<&axle_ir::ArrayShape> = match m.shape(i) {
        axle_ir::Shape::Tuple(es) => es
            .iter()
            .filter_map(|&s| m.shape_of(s).as_array())
            .collect(),
        s => s.as_array().into_iter().collect(),
    };
    (0..n)
        .filter(|&k| {
            outs.get(k)
                .is_some_and(|o| m.array_shape(ops[k]) == Some(*o))
        })
        .map(|k| (k, k))
        .collect()
}

/// In-place pairs of a fusion kernel, from its computation.
fn fusion_pairs(
    m: &Module,
    i: InstId,
    rules: &dyn BufferRules,
    by_comp: &InstsByComp,
) -> Vec<(usize, usize)> {
    let Some(c) = m.comp_attr(i, &AttrKey::Calls) else {
        return Vec::new();
    };
    let root = m.root(c);
    if root.is_none() || m.array_shape(i).is_none() || c.index() >= m.comp_capacity() {
        return Vec::new();
    }
    let users = users_of(m, &by_comp[c]);
    let users_in = |x: InstId| -> Vec<InstId> { users.get(&x).cloned().unwrap_or_default() };
    let param_number = |x: InstId| -> Option<usize> {
        (m.opcode(x) == Opcode::Parameter)
            .then(|| m.parameter_number(x))
            .flatten()
            .map(|n| n as usize)
    };
    match m.opcode(root) {
        Opcode::DynamicUpdateSlice | Opcode::Scatter => {
            let target = m.operands(root)[0];
            match param_number(target) {
                Some(k)
                    if users_in(target) == vec![root]
                        && m.operands(root).iter().filter(|&&o| o == target).count() == 1
                        && m.array_shape(target) == m.array_shape(i) =>
                {
                    vec![(k, 0)]
                }
                _ => Vec::new(),
            }
        }
        _ => {
            let mut out = Vec::new();
            for &q in m.params(c) {
                if q.is_none() || q == root || m.array_shape(q) != m.array_shape(i) {
                    continue;
                }
                let Some(k) = param_number(q) else {
                    continue;
                };
                if elementwise_to(m, q, root, &users)
                    || (rows_to(m, q, root, &users) && rules.may_update_through_rows(m, i, k))
                {
                    out.push((k, 0));
                }
            }
            out
        }
    }
}

/// The users of each instruction of `insts`, each once, in order.
fn users_of(m: &Module, insts: &[InstId]) -> hashbrown::HashMap<InstId, Vec<InstId>> {
    let mut users: hashbrown::HashMap<InstId, Vec<InstId>> = hashbrown::HashMap::new();
    for &u in insts {
        for &o in m.operands(u) {
            let list = users.entry(o).or_default();
            if list.last() != Some(&u) {
                list.push(u);
            }
        }
    }
    users
}

/// Whether `q` reaches `root`, and every user of `q` and of what it reaches (`root`'s users
/// aside) is an element-wise op of `root`'s dimensions: `root`'s kernel reads `q` only at the
/// index it writes.
fn elementwise_to(
    m: &Module,
    q: InstId,
    root: InstId,
    users: &hashbrown::HashMap<InstId, Vec<InstId>>,
) -> bool {
    reaches_through(m, q, root, users, false)
}

/// [`elementwise_to`], where a user may also be a single-input `reduce` over trailing
/// dimensions of such a value (whose users are not followed: its result is a row's, computed
/// before the row is written, [`BufferRules::may_update_through_rows`]).
fn rows_to(
    m: &Module,
    q: InstId,
    root: InstId,
    users: &hashbrown::HashMap<InstId, Vec<InstId>>,
) -> bool {
    reaches_through(m, q, root, users, true)
}

fn reaches_through(
    m: &Module,
    q: InstId,
    root: InstId,
    users: &hashbrown::HashMap<InstId, Vec<InstId>>,
    rows: bool,
) -> bool {
    let Some(dims) = m.array_shape(root).map(|a| &a.dims) else {
        return false;
    };
    let row_reduce = |u: InstId, x: InstId| -> bool {
        let ops = m.operands(u);
        let rank = dims.len() as i64;
        let rd = m.ints_attr(u, &AttrKey::Dimensions).unwrap_or(&[]);
        m.opcode(u) == Opcode::Reduce
            && ops.len() == 2
            && ops[0] == x
            && ops[1] != x
            && !rd.is_empty()
            && rd.iter().all(|&d| d >= rank - rd.len() as i64 && d < rank)
    };
    let mut stack = vec![q];
    let mut seen: HashSet<InstId> = HashSet::new();
    while let Some(x) = stack.pop() {
        if !seen.insert(x) || x == root {
            continue;
        }
        for &u in users.get(&x).map_or(&[][..], |v| &v[..]) {
            if rows && row_reduce(u, x) {
                continue;
            }
            let same_dims = m.array_shape(u).is_some_and(|a| &a.dims == dims);
            if !elementwise_op(m, u) || !same_dims {
                return false;
            }
            stack.push(u);
        }
    }
    seen.contains(&root)
}

/// The indices into `reads` (the values step `s` of a fusion run as steps reads) of those `s`
/// may write over: of `s`'s shape, reaching it through element-wise ops of its dimensions only
/// (or also through row reductions, where the backend says so).
fn step_pairs(
    m: &Module,
    s: InstId,
    reads: &[InstId],
    rules: &dyn BufferRules,
    by_comp: &InstsByComp,
) -> Vec<usize> {
    let c = m.parent(s);
    if m.array_shape(s).is_none() || c.is_none() || c.index() >= m.comp_capacity() {
        return Vec::new();
    }
    let candidates: Vec<usize> = (0..reads.len())
        .filter(|&k| {
            m.array_shape(reads[k]).is_some() && m.array_shape(reads[k]) == m.array_shape(s)
        })
        .collect();
    if candidates.is_empty() {
        return Vec::new();
    }
    let users = users_of(m, &by_comp[c]);
    candidates
        .into_iter()
        .filter(|&k| {
            elementwise_to(m, reads[k], s, &users)
                || (rows_to(m, reads[k], s, &users) && rules.may_update_through_rows(m, s, k))
        })
        .collect()
}
