//! `flatten-call-graph`: gives every computation that runs as steps of a sequence (a `while`
//! condition or body, a `conditional` branch, a `call`'s computation, a fusion body) its own
//! copy per call site, as XLA's `FlattenCallGraph` does, so that every instruction in such a
//! computation has one place in the program and one set of buffers.
//!
//! Computations are visited callers first; the first call site keeps the original, every other
//! site gets a copy (named `NAME.clone`, `NAME.clone.1`, ...; instructions copied unnamed, so
//! the printer names them). Copies call the same computations as the original, which are then
//! visited with one more call site. Applied computations (reducers, comparators) are shared
//! as they are: they get no buffers.
//!
//! Pre-conditions: a valid, non-recursive module. Post-conditions: every computation has at
//! most one call site of kind control or fusion; results unchanged.
//!
//! Counters: `computations-cloned`.

use hashbrown::{HashMap, HashSet};

use axle_ir::entity::{dense_map, SecondaryMap};
use axle_ir::{AttrValue, CompId, InstId, Module, Pass, PassCx, PassError};

use crate::call_graph::{call_kind, CallGraph, CallKind};
use crate::error::ScheduleError;

/// The `flatten-call-graph` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct FlattenCallGraph;

impl Pass for FlattenCallGraph {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<bool, PassError> {
        let n = flatten(m).map_err(|e| PassError::new(e.message))?;
        cx.count("computations-cloned", n as u64);
        Ok(n > 0)
    }
}

/// One call: the instruction, the attribute and the index within it.
#[derive(Clone, Copy, Debug)]
struct Site {
    inst: InstId,
    attr: usize,
    index: usize,
}

fn sequential(kind: CallKind) -> bool {
    matches!(kind, CallKind::Control | CallKind::Fusion)
}

/// The sequential call sites `inst` makes, pushed into `sites` per callee.
fn record_sites(m: &Module, inst: InstId, sites: &mut SecondaryMap<CompId, Vec<Site>>) {
    for (a, (k, v)) in m.attrs(inst).iter().enumerate() {
        if !sequential(call_kind(m, inst, k)) {
            continue;
        }
        let cs: &[CompId] = match v {
            AttrValue::Comp(c) => std::slice::from_ref(c),
            AttrValue::Comps(cs) => cs,
            _ => continue,
        };
        for (index, &c) in cs.iter().enumerate() {
            if !c.is_none() && c.index() < m.comp_capacity() {
                sites[c].push(Site {
                    inst,
                    attr: a,
                    index,
                });
            }
        }
    }
}

/// Flattens `m`'s call graph; returns the number of computations copied (0: `m` untouched).
pub fn flatten(m: &mut Module) -> Result<usize, ScheduleError> {
    let cg = CallGraph::new(m)?;
    let needed = m
        .computations()
        .into_iter()
        .any(|c| cg.sites(c).iter().filter(|s| sequential(s.kind)).count() > 1);
    if !needed {
        return Ok(0);
    }
    let mut by_comp = m.insts_by_comp();
    let mut sites: SecondaryMap<CompId, Vec<Site>> = dense_map(m.comp_capacity(), Vec::new());
    for insts in by_comp.values() {
        for &i in insts {
            record_sites(m, i, &mut sites);
        }
    }
    let mut names: HashSet<String> = m
        .computations()
        .into_iter()
        .map(|c| m.comp_name(c).to_string())
        .collect();
    let mut cloned = 0;
    for &c in cg.callers_first() {
        let list = std::mem::take(&mut sites[c]);
        for s in list.iter().skip(1) {
            let (copy, insts) = clone_computation(m, c, &by_comp[c], &mut names);
            sites.resize(m.comp_capacity());
            for &i in &insts {
                record_sites(m, i, &mut sites);
            }
            by_comp.resize(m.comp_capacity());
            by_comp[copy] = insts;
            let mut attrs = m.attrs(s.inst).to_vec();
            match &mut attrs[s.attr].1 {
                AttrValue::Comp(x) => *x = copy,
                AttrValue::Comps(xs) => xs[s.index] = copy,
                _ => {}
            }
            m.set_attrs(s.inst, attrs);
            cloned += 1;
        }
    }
    m.bump_epoch();
    Ok(cloned)
}

/// A copy of computation `c` (whose instructions are `insts`) in the same module, named after
/// it, with its instructions (unnamed) in topological order.
fn clone_computation(
    m: &mut Module,
    c: CompId,
    insts: &[InstId],
    names: &mut HashSet<String>,
) -> (CompId, Vec<InstId>) {
    let base = format!("{}.clone", m.comp_name(c));
    let mut name = base.clone();
    let mut k = 0;
    while names.contains(&name) {
        k += 1;
        name = format!("{base}.{k}");
    }
    names.insert(name.clone());
    let order = axle_fusion::clone::local_topo_order(m, insts);
    let d = m.add_computation(&name);
    let mut map: HashMap<InstId, InstId> = HashMap::with_capacity(order.len());
    let mut out = Vec::with_capacity(order.len());
    for &i in &order {
        let ops: Vec<InstId> = m.operands(i).iter().map(|o| map[o]).collect();
        let mut attrs: Vec<axle_ir::Attr> = m
            .attrs(i)
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    AttrValue::Insts(is) => {
                        AttrValue::Insts(is.iter().filter_map(|x| map.get(x).copied()).collect())
                    }
                    other => other.clone(),
                };
                (k.clone(), v)
            })
            .collect();
        let (op, s, l) = (m.opcode(i), m.shape_id(i), m.layout_id(i));
        let n = m.push_inst_parts(d, op, s, l, &ops, &mut attrs, "");
        if let Some(v) = m.constant(i).cloned() {
            m.set_constant(n, v);
        }
        map.insert(i, n);
        out.push(n);
    }
    if let Some(&r) = map.get(&m.root(c)) {
        m.set_root(d, r);
    }
    (d, out)
}
