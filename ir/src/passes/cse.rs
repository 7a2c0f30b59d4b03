//! `cse`: common subexpression elimination.
//!
//! Two instructions of one computation are merged when they have the same opcode, shape,
//! layout, attributes, constant value (bit for bit, so `-0.0` and `0.0` stay apart) and operands
//! after earlier merges; operands of commutative binary ops (`add`, `multiply`, `maximum`,
//! `minimum`, `and`, `or`, `xor`) are compared as a sorted pair. Called computations compare
//! structurally: first, computations (other than the entry and fusion bodies) with identical
//! instruction lists in topological order are merged into the first of them, and every caller is
//! pointed at it (the copies become dead for `dce`). Instructions with an effect, parameters,
//! custom calls, instructions with control predecessors and elided constants are never merged.
//!
//! Read phase: computation classes (callee-first, small computations), then in parallel a
//! per-instruction hash of everything but the operands and a key over the original operands,
//! then, per computation in parallel, value numbering in topological order with a
//! `hashbrown::HashTable<InstId>` that only instructions able to have a partner enter (see
//! [`plan`]); the plan is the `(duplicate, representative)` pairs in that order. Write phase: `replace_all_uses` for each
//! pair and attribute updates for merged computations. Linear in the module (expected).
//!
//! Pre-conditions: a valid module. Post-conditions: the same program with each duplicate
//! replaced by its first occurrence (in topological order).
//!
//! Counters: `merged_insts`, `merged_comps`.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;

use hashbrown::HashTable;
use rayon::prelude::*;

use crate::attrs::{Attr, AttrValue};
use crate::module::{CompId, ConstValue, InstId, InstsByComp, Module};
use crate::opcode::Opcode;
use crate::pass::{Changed, Pass, PassCx, PassError};

/// The `cse` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Cse;

const INELIGIBLE: u64 = u64::MAX;

fn hash_attrs(attrs: &[Attr], class: &[CompId], h: &mut impl Hasher) {
    attrs.len().hash(h);
    for (k, v) in attrs {
        k.hash(h);
        match v {
            AttrValue::Comp(c) => map_comp(class, *c).hash(h),
            AttrValue::Comps(cs) => {
                for c in cs.iter() {
                    map_comp(class, *c).hash(h);
                }
            }
            other => other.hash(h),
        }
    }
}

fn map_comp(class: &[CompId], c: CompId) -> CompId {
    if c.is_none() || c.index() >= class.len() {
        c
    } else {
        class[c.index()]
    }
}

/// Attribute lists equal up to computation classes (`Insts` values compared by `pos` when
/// given, i.e. by position inside their computations).
fn attrs_equal(a: &[Attr], b: &[Attr], class: &[CompId], pos: Option<&[u32]>) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((ka, va), (kb, vb))| {
            ka == kb
                && match (va, vb) {
                    (AttrValue::Comp(x), AttrValue::Comp(y)) => {
                        map_comp(class, *x) == map_comp(class, *y)
                    }
                    (AttrValue::Comps(x), AttrValue::Comps(y)) => {
                        x.len() == y.len()
                            && x.iter()
                                .zip(y.iter())
                                .all(|(p, q)| map_comp(class, *p) == map_comp(class, *q))
                    }
                    (AttrValue::Insts(x), AttrValue::Insts(y)) => match pos {
                        Some(pos) => {
                            x.len() == y.len()
                                && x.iter()
                                    .zip(y.iter())
                                    .all(|(p, q)| pos_of(pos, *p) == pos_of(pos, *q))
                        }
                        None => x == y,
                    },
                    _ => va == vb,
                }
        })
}

fn pos_of(pos: &[u32], i: InstId) -> u32 {
    if i.is_none() || i.index() >= pos.len() {
        u32::MAX
    } else {
        pos[i.index()]
    }
}

fn hash_const(m: &Module, i: InstId, h: &mut impl Hasher) {
    if m.opcode(i) != Opcode::Constant {
        return;
    }
    if let Some(ConstValue::Literal(l)) = m.constant(i) {
        hash_literal(l, h);
    }
}

fn hash_literal(l: &crate::Literal, h: &mut impl Hasher) {
    match l {
        crate::Literal::Array(a) => {
            a.shape.hash(h);
            a.data.hash(h);
        }
        crate::Literal::Tuple(es) => {
            for e in es {
                hash_literal(e, h);
            }
        }
    }
}

fn consts_equal(m: &Module, a: InstId, b: InstId) -> bool {
    if m.opcode(a) != Opcode::Constant && m.opcode(b) != Opcode::Constant {
        return true;
    }
    match (m.constant(a), m.constant(b)) {
        (Some(ConstValue::Literal(x)), Some(ConstValue::Literal(y))) => literal_bits_equal(x, y),
        (None, None) => true,
        _ => false,
    }
}

fn literal_bits_equal(x: &crate::Literal, y: &crate::Literal) -> bool {
    match (x, y) {
        (crate::Literal::Array(a), crate::Literal::Array(b)) => {
            a.shape == b.shape && a.data == b.data
        }
        (crate::Literal::Tuple(a), crate::Literal::Tuple(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(p, q)| literal_bits_equal(p, q))
        }
        _ => false,
    }
}

/// Class representatives of computations: structurally identical computations (not the entry,
/// not fusion bodies) map to the first of them in callee-first order; others map to themselves.
fn computation_classes(m: &Module, orders: &InstsByComp, callee_first: &[CompId]) -> Vec<CompId> {
    let n = m.comp_capacity();
    let mut class: Vec<CompId> = (0..n).map(CompId::new).collect();
    let mut excluded = vec![false; n];
    if !m.entry().is_none() && m.entry().index() < n {
        excluded[m.entry().index()] = true;
    }
    for i in m.live_ids() {
        if m.opcode(i) == Opcode::Fusion {
            super::for_each_callee(m, i, |c| {
                if !c.is_none() && c.index() < n {
                    excluded[c.index()] = true;
                }
            });
        }
    }
    // Position of every instruction of a candidate computation in its topological order.
    let mut pos = vec![u32::MAX; m.inst_capacity()];
    for (c, order) in orders.iter() {
        if excluded[c.index()] {
            continue;
        }
        for (k, &i) in order.iter().enumerate() {
            pos[i.index()] = k as u32;
        }
    }
    let builder = hashbrown::DefaultHashBuilder::default();
    let mut table: HashTable<(u64, CompId)> = HashTable::new();
    for &c in callee_first {
        if excluded[c.index()] {
            continue;
        }
        let order = &orders[c];
        let mut h = builder.build_hasher();
        order.len().hash(&mut h);
        pos_of(&pos, m.root(c)).hash(&mut h);
        for &i in order {
            m.opcode(i).hash(&mut h);
            m.shape_id(i).hash(&mut h);
            m.layout_id(i).hash(&mut h);
            for &o in m.operands(i) {
                pos_of(&pos, o).hash(&mut h);
            }
            hash_attrs(m.attrs(i), &class, &mut h);
            hash_const(m, i, &mut h);
        }
        let hv = h.finish();
        let same = |d: CompId| -> bool {
            let od = &orders[d];
            od.len() == order.len()
                && pos_of(&pos, m.root(c)) == pos_of(&pos, m.root(d))
                && order.iter().zip(od).all(|(&a, &b)| {
                    m.opcode(a) == m.opcode(b)
                        && m.shape_id(a) == m.shape_id(b)
                        && m.layout_id(a) == m.layout_id(b)
                        && m.operands(a).len() == m.operands(b).len()
                        && m.operands(a)
                            .iter()
                            .zip(m.operands(b))
                            .all(|(&x, &y)| pos_of(&pos, x) == pos_of(&pos, y))
                        && attrs_equal(m.attrs(a), m.attrs(b), &class, Some(&pos))
                        && consts_equal(m, a, b)
                })
        };
        match table.find(hv, |&(h2, d)| h2 == hv && same(d)) {
            Some(&(_, d)) => class[c.index()] = d,
            None => {
                table.insert_unique(hv, (hv, c), |e| e.0);
            }
        }
    }
    class
}

/// Users of every instruction over operand edges, as CSR rows (`users[offsets[i]..offsets[i+1]]`).
struct OperandUsers {
    offsets: Vec<u32>,
    users: Vec<InstId>,
}

impl OperandUsers {
    fn new(m: &Module) -> OperandUsers {
        let n = m.inst_capacity();
        let live = m.live_ids();
        let mut offsets = vec![0u32; n + 1];
        for &i in &live {
            for &o in m.operands(i) {
                if o.index() < n {
                    offsets[o.index() + 1] += 1;
                }
            }
        }
        for k in 1..=n {
            offsets[k] += offsets[k - 1];
        }
        let mut fill = offsets.clone();
        let mut users = vec![InstId::NONE; offsets[n] as usize];
        for &i in &live {
            for &o in m.operands(i) {
                if o.index() < n {
                    users[fill[o.index()] as usize] = i;
                    fill[o.index()] += 1;
                }
            }
        }
        OperandUsers { offsets, users }
    }

    fn of(&self, i: InstId) -> &[InstId] {
        &self.users[self.offsets[i.index()] as usize..self.offsets[i.index() + 1] as usize]
    }
}

/// The CSE plan: `(duplicate, representative)` pairs in computation order, then topological
/// order; and the computation classes.
///
/// Value numbering visits every instruction in topological order, but only the ones that can
/// have an equal partner touch the hash table: those whose key over their original operands
/// (`key0`) is shared with another instruction (found by a parallel sort), and those whose
/// operands took part in a merge. When an instruction merges into a representative for the first
/// time, the representative's users that were already skipped are inserted then, so no pair is
/// missed; on a module with few duplicates almost nothing is hashed twice.
pub fn plan(m: &Module, s: &super::Structure) -> (Vec<(InstId, InstId)>, Vec<CompId>) {
    let orders = &s.topo;
    let class = computation_classes(m, orders, &s.callee_first);
    let effectful = &s.effectful;
    let builder = hashbrown::DefaultHashBuilder::default();
    let cap = m.inst_capacity();
    // Hash of everything but the operands (INELIGIBLE for what is never merged), and `key0`,
    // the same with the original operands in canonical order, in parallel.
    let canon_orig = |i: InstId| -> [InstId; 2] {
        let ops = m.operands(i);
        if ops.len() == 2 && m.opcode(i).is_commutative() && ops[1] < ops[0] {
            [ops[1], ops[0]]
        } else {
            [InstId::NONE, InstId::NONE]
        }
    };
    let keys: Vec<(u64, u64)> = (0..cap)
        .into_par_iter()
        .map(|k| {
            let i = InstId::new(k);
            if !m.is_live(i) {
                return (INELIGIBLE, 0);
            }
            let op = m.opcode(i);
            if op == Opcode::Parameter
                || super::is_effectful(m, i, effectful)
                || !m.control_predecessors(i).is_empty()
                || (op == Opcode::Constant
                    && !matches!(m.constant(i), Some(ConstValue::Literal(_))))
            {
                return (INELIGIBLE, 0);
            }
            let mut h = builder.build_hasher();
            op.hash(&mut h);
            m.shape_id(i).hash(&mut h);
            m.layout_id(i).hash(&mut h);
            m.operands(i).len().hash(&mut h);
            hash_attrs(m.attrs(i), &class, &mut h);
            hash_const(m, i, &mut h);
            let l = h.finish();
            let mut h0 = builder.build_hasher();
            l.hash(&mut h0);
            match canon_orig(i) {
                [a, b] if !a.is_none() => [a, b].hash(&mut h0),
                _ => m.operands(i).hash(&mut h0),
            }
            (l, h0.finish())
        })
        .collect();
    let local = |i: InstId| keys[i.index()].0;
    // Instructions whose key0 another instruction may share: a two-bit-per-slot filter over
    // the keys (a slot seen twice is shared). Collisions only make some unique instructions
    // take the slow path; equal keys always land in one slot, so no pair is missed.
    let flag = |n: usize| -> Vec<AtomicBool> { (0..n).map(|_| AtomicBool::new(false)).collect() };
    let (active, processed, inserted, absorbed) = (flag(cap), flag(cap), flag(cap), flag(cap));
    let slots = (cap.max(1) * 16).next_power_of_two();
    let words = |n: usize| -> Vec<AtomicU64> { (0..n / 64).map(|_| AtomicU64::new(0)).collect() };
    let (seen, twice) = (words(slots.max(64)), words(slots.max(64)));
    let slot = |k: u64| (k as usize) & (slots.max(64) - 1);
    keys.par_iter().for_each(|k| {
        if k.0 != INELIGIBLE {
            let s = slot(k.1);
            let bit = 1u64 << (s % 64);
            if seen[s / 64].fetch_or(bit, Ordering::Relaxed) & bit != 0 {
                twice[s / 64].fetch_or(bit, Ordering::Relaxed);
            }
        }
    });
    let shared = |i: InstId| {
        let s = slot(keys[i.index()].1);
        twice[s / 64].load(Ordering::Relaxed) & (1u64 << (s % 64)) != 0
    };
    let users: OnceLock<OperandUsers> = OnceLock::new();
    let repl: Vec<AtomicU32> = (0..cap).map(|_| AtomicU32::new(u32::MAX)).collect();
    let resolve = |o: InstId| -> InstId {
        if o.is_none() || o.index() >= repl.len() {
            return o;
        }
        match repl[o.index()].load(Ordering::Relaxed) {
            u32::MAX => o,
            r => InstId::new(r as usize),
        }
    };
    let canon = |i: InstId, buf: &mut Vec<InstId>| {
        buf.clear();
        buf.extend(m.operands(i).iter().map(|&o| resolve(o)));
        if buf.len() == 2 && m.opcode(i).is_commutative() && buf[1] < buf[0] {
            buf.swap(0, 1);
        }
    };
    let get = |f: &[AtomicBool], i: InstId| f[i.index()].load(Ordering::Relaxed);
    let set = |f: &[AtomicBool], i: InstId| f[i.index()].store(true, Ordering::Relaxed);
    let per_comp: Vec<Vec<(InstId, InstId)>> = orders
        .values()
        .as_slice()
        .par_iter()
        .map(|order| {
            let mut table: HashTable<(u64, InstId)> = HashTable::new();
            let mut pairs = Vec::new();
            let mut ops = Vec::new();
            let mut ops2 = Vec::new();
            let full_hash = |i: InstId, ops: &mut Vec<InstId>| {
                canon(i, ops);
                let mut h = builder.build_hasher();
                local(i).hash(&mut h);
                ops.hash(&mut h);
                h.finish()
            };
            for &i in order {
                set(&processed, i);
                let l = local(i);
                if l == INELIGIBLE || !(shared(i) || get(&active, i)) {
                    continue;
                }
                let hv = full_hash(i, &mut ops);
                let found = table.find(hv, |&(h2, r)| {
                    h2 == hv
                        && local(r) == l
                        && m.opcode(r) == m.opcode(i)
                        && m.shape_id(r) == m.shape_id(i)
                        && m.layout_id(r) == m.layout_id(i)
                        && {
                            canon(r, &mut ops2);
                            ops2 == ops
                        }
                        && attrs_equal(m.attrs(r), m.attrs(i), &class, None)
                        && consts_equal(m, r, i)
                });
                let Some(&(_, r)) = found else {
                    table.insert_unique(hv, (hv, i), |e| e.0);
                    set(&inserted, i);
                    continue;
                };
                repl[i.index()].store(r.index() as u32, Ordering::Relaxed);
                pairs.push((i, r));
                let us = users.get_or_init(|| OperandUsers::new(m));
                for &u in us.of(i) {
                    set(&active, u);
                }
                if !get(&absorbed, r) {
                    set(&absorbed, r);
                    for &u in us.of(r) {
                        if !get(&processed, u) {
                            set(&active, u);
                        } else if !get(&inserted, u) && local(u) != INELIGIBLE && resolve(u) == u {
                            let hu = full_hash(u, &mut ops2);
                            set(&inserted, u);
                            // (An equal entry cannot be in the table already; keep the table
                            // free of duplicates even so, so lookups stay deterministic.)
                            let lu = local(u);
                            let mut ops3 = Vec::new();
                            let dup = table
                                .find(hu, |&(h2, r)| {
                                    h2 == hu
                                        && local(r) == lu
                                        && m.opcode(r) == m.opcode(u)
                                        && m.shape_id(r) == m.shape_id(u)
                                        && m.layout_id(r) == m.layout_id(u)
                                        && {
                                            canon(r, &mut ops3);
                                            ops3 == ops2
                                        }
                                        && attrs_equal(m.attrs(r), m.attrs(u), &class, None)
                                        && consts_equal(m, r, u)
                                })
                                .is_some();
                            if !dup {
                                table.insert_unique(hu, (hu, u), |e| e.0);
                            }
                        }
                    }
                }
            }
            pairs
        })
        .collect();
    (per_comp.into_iter().flatten().collect(), class)
}

impl Pass for Cse {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let s = cx.analysis::<super::Structure>(m);
        let (pairs, class) = plan(m, &s);
        // Callers of merged computations, in creation order.
        let any_merged = class.iter().enumerate().any(|(c, r)| r.index() != c);
        let retarget: Vec<InstId> = if any_merged {
            m.live_ids()
                .into_par_iter()
                .filter(|&i| {
                    let mut hit = false;
                    super::for_each_callee(m, i, |c| hit |= map_comp(&class, c) != c);
                    hit
                })
                .collect()
        } else {
            Vec::new()
        };
        if pairs.is_empty() && retarget.is_empty() {
            return Ok(false);
        }
        let merged_comps = class
            .iter()
            .enumerate()
            .filter(|(c, r)| r.index() != *c)
            .count();
        cx.count("merged_comps", merged_comps as u64);
        cx.count("merged_insts", pairs.len() as u64);
        let mut rw = m.rewriter();
        for &i in &retarget {
            let attrs: Vec<Attr> = rw
                .module()
                .attrs(i)
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        AttrValue::Comp(c) => AttrValue::Comp(map_comp(&class, *c)),
                        AttrValue::Comps(cs) => {
                            AttrValue::Comps(cs.iter().map(|&c| map_comp(&class, c)).collect())
                        }
                        other => other.clone(),
                    };
                    (k.clone(), v)
                })
                .collect();
            rw.module_mut().set_attrs(i, attrs);
        }
        for (dup, rep) in pairs {
            rw.replace_all_uses(dup, rep);
        }
        Ok(rw.finish())
    }
}
