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
//! per-instruction hash of everything but the operands, then, per computation in parallel, value
//! numbering in topological order with a `hashbrown::HashTable<InstId>`; the plan is the
//! `(duplicate, representative)` pairs in that order. Write phase: `replace_all_uses` for each
//! pair and attribute updates for merged computations. Linear in the module (expected).
//!
//! Pre-conditions: a valid module. Post-conditions: the same program with each duplicate
//! replaced by its first occurrence (in topological order).
//!
//! Counters: `merged_insts`, `merged_comps`.

use std::hash::{BuildHasher, Hash, Hasher};
use std::sync::atomic::{AtomicU32, Ordering};

use hashbrown::HashTable;
use rayon::prelude::*;

use crate::attrs::{Attr, AttrValue};
use crate::module::{CompId, ConstValue, InstId, Module};
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
fn computation_classes(m: &Module, orders: &[Vec<InstId>]) -> Vec<CompId> {
    let n = m.comp_capacity();
    let mut class: Vec<CompId> = (0..n).map(CompId::new).collect();
    let mut excluded = vec![false; n];
    if !m.entry().is_none() && m.entry().index() < n {
        excluded[m.entry().index()] = true;
    }
    for i in m.live_ids() {
        if m.opcode(i) == Opcode::Fusion {
            for c in m.called_comps(i) {
                if !c.is_none() && c.index() < n {
                    excluded[c.index()] = true;
                }
            }
        }
    }
    // Position of every instruction of a candidate computation in its topological order.
    let mut pos = vec![u32::MAX; m.inst_capacity()];
    for (c, order) in orders.iter().enumerate() {
        if excluded[c] {
            continue;
        }
        for (k, &i) in order.iter().enumerate() {
            pos[i.index()] = k as u32;
        }
    }
    let builder = hashbrown::DefaultHashBuilder::default();
    let mut table: HashTable<(u64, CompId)> = HashTable::new();
    for c in crate::printer::computation_order(m) {
        if excluded[c.index()] {
            continue;
        }
        let order = &orders[c.index()];
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
            let od = &orders[d.index()];
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

/// The CSE plan: `(duplicate, representative)` pairs in computation order, then topological
/// order; and the computation classes.
pub fn plan(m: &Module) -> (Vec<(InstId, InstId)>, Vec<CompId>) {
    let orders = super::topo_orders(m);
    let class = computation_classes(m, &orders);
    let effectful = super::effectful_computations(m);
    let builder = hashbrown::DefaultHashBuilder::default();
    // Hash of everything but the operands, in parallel; INELIGIBLE for what is never merged.
    let local: Vec<u64> = (0..m.inst_capacity())
        .into_par_iter()
        .map(|k| {
            let i = InstId::new(k);
            if !m.is_live(i) {
                return INELIGIBLE;
            }
            let op = m.opcode(i);
            if op == Opcode::Parameter
                || super::is_effectful(m, i, &effectful)
                || !m.control_predecessors(i).is_empty()
                || (op == Opcode::Constant
                    && !matches!(m.constant(i), Some(ConstValue::Literal(_))))
            {
                return INELIGIBLE;
            }
            let mut h = builder.build_hasher();
            op.hash(&mut h);
            m.shape_id(i).hash(&mut h);
            m.layout_id(i).hash(&mut h);
            m.operands(i).len().hash(&mut h);
            hash_attrs(m.attrs(i), &class, &mut h);
            hash_const(m, i, &mut h);
            h.finish()
        })
        .collect();
    let repl: Vec<AtomicU32> = (0..m.inst_capacity())
        .map(|_| AtomicU32::new(u32::MAX))
        .collect();
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
    let per_comp: Vec<Vec<(InstId, InstId)>> = orders
        .par_iter()
        .map(|order| {
            let mut table: HashTable<(u64, InstId)> = HashTable::with_capacity(order.len());
            let mut pairs = Vec::new();
            let mut ops = Vec::new();
            let mut ops2 = Vec::new();
            for &i in order {
                let l = local[i.index()];
                if l == INELIGIBLE {
                    continue;
                }
                canon(i, &mut ops);
                let mut h = builder.build_hasher();
                l.hash(&mut h);
                ops.hash(&mut h);
                let hv = h.finish();
                let found = table.find(hv, |&(h2, r)| {
                    h2 == hv
                        && local[r.index()] == l
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
                match found {
                    Some(&(_, r)) => {
                        repl[i.index()].store(r.index() as u32, Ordering::Relaxed);
                        pairs.push((i, r));
                    }
                    None => {
                        table.insert_unique(hv, (hv, i), |e| e.0);
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
        let (pairs, class) = plan(m);
        // Callers of merged computations, in creation order.
        let retarget: Vec<InstId> = m
            .live_ids()
            .into_par_iter()
            .filter(|&i| m.called_comps(i).iter().any(|&c| map_comp(&class, c) != c))
            .collect();
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
