//! `inline`: replaces every `call` by a copy of the computation it calls.
//!
//! The callee's instructions are copied into the caller in topological order, with parameters
//! replaced by the call's operands and the call replaced by the copy of the callee's root. Calls
//! are inlined callees first, so a callee that itself calls is already flat when it is copied.
//! Copies get no names (the printer makes unique ones); the callee stays until `dce` finds it
//! unused. Calls with control predecessors are left alone.
//!
//! Read phase: the calls, in callee-first computation order and creation order. Write phase:
//! the copies, through the rewriter. Linear in the size of the output.
//!
//! Pre-conditions: a valid module (no recursion). Post-conditions: the same values and effects,
//! no `call` left except those with control predecessors.
//!
//! Counters: `inlined_calls`, `inlined_insts`.

use hashbrown::HashMap;

use axle_ir::passes::Structure;
use axle_ir::{AttrKey, Changed, CompId, InstId, Module, Opcode, Pass, PassCx, PassError};
use rayon::prelude::*;

use crate::clone::{local_topo_order_with, mapped_attrs};

/// The `inline` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Inline;

impl Pass for Inline {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let any_call = m
            .live_ids()
            .into_par_iter()
            .any(|i| m.opcode(i) == Opcode::Call);
        if !any_call {
            return Ok(false);
        }
        let s = cx.analysis::<Structure>(m);
        let mut by_comp = s.by_comp.clone();
        let mut calls: Vec<InstId> = Vec::new();
        for &c in &s.callee_first {
            for &i in &by_comp[c] {
                if m.opcode(i) == Opcode::Call
                    && m.control_predecessors(i).is_empty()
                    && m.comp_attr(i, &AttrKey::ToApply).is_some()
                {
                    calls.push(i);
                }
            }
        }
        if calls.is_empty() {
            return Ok(false);
        }
        let no_comps: HashMap<CompId, CompId> = HashMap::new();
        let mut rw = m.rewriter();
        for call in calls {
            let md = rw.module();
            let caller = md.parent(call);
            let Some(callee) = md.comp_attr(call, &AttrKey::ToApply) else {
                continue;
            };
            let live: Vec<InstId> = by_comp[callee]
                .iter()
                .copied()
                .filter(|&i| md.is_live(i))
                .collect();
            let order = local_topo_order_with(md, &live, |o| rw.resolve(o));
            let root = rw.resolve(md.root(callee));
            let args: Vec<InstId> = md.operands(call).iter().map(|&o| rw.resolve(o)).collect();
            let mut map: HashMap<InstId, InstId> = HashMap::with_capacity(order.len());
            let mut added = Vec::new();
            for i in order {
                let md = rw.module();
                if md.opcode(i) == Opcode::Parameter {
                    let k = md.parameter_number(i).unwrap_or(0) as usize;
                    if let Some(&a) = args.get(k) {
                        map.insert(i, a);
                    }
                    continue;
                }
                // An operand replaced earlier in this write phase is its replacement.
                let ops: Vec<InstId> = md
                    .operands(i)
                    .iter()
                    .map(|&o| map[&rw.resolve(o)])
                    .collect();
                let mut attrs = mapped_attrs(md, i, &no_comps, &map);
                let (op, s, l) = (md.opcode(i), md.shape_id(i), md.layout_id(i));
                let value = md.constant(i).cloned();
                // The copy of the callee's root takes the call's name.
                let name = if i == root {
                    md.name(call).to_string()
                } else {
                    String::new()
                };
                let mm = rw.module_mut();
                let n = mm.push_inst_parts(caller, op, s, l, &ops, &mut attrs, &name);
                if let Some(v) = value {
                    mm.set_constant(n, v);
                }
                map.insert(i, n);
                added.push(n);
            }
            let Some(&result) = map.get(&root) else {
                continue;
            };
            cx.count("inlined_calls", 1);
            cx.count("inlined_insts", added.len() as u64);
            by_comp[caller].extend(added);
            if result != root && rw.module().name(result) == rw.module().name(call) {
                // The call gave its name away; clear it so names stay unique.
                rw.module_mut().set_name(call, "");
            }
            rw.replace_all_uses(call, result);
        }
        Ok(rw.finish())
    }
}
