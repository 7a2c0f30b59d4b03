//! `dce`: dead code elimination.
//!
//! An instruction is live if it is a computation's root, a parameter, an instruction with an
//! effect (a side-effecting opcode, a custom call, or a call of a computation that has one), or
//! an operand or control predecessor of a live instruction. A computation is live if it is the
//! entry or is called by a live instruction of a live computation. Everything else is removed.
//!
//! Read phase: one parallel marking per computation (each marks only its own instructions in a
//! shared atomic bit column), then the call graph is walked from the entry; the plan is the dead
//! ids in creation order. Write phase: tombstones through the [`crate::Rewriter`] and removes
//! dead computations in one sweep. Linear in the module.
//!
//! Pre-conditions: a valid module. Post-conditions: no dead instruction or computation; the
//! program's results and effects are unchanged.
//!
//! Counters: `removed_insts`, `removed_comps`.

use std::sync::atomic::{AtomicBool, Ordering};

use rayon::prelude::*;

use crate::entity::collect_map;
use crate::module::{CompId, InstId, Module};
use crate::opcode::Opcode;
use crate::pass::{Changed, Pass, PassCx, PassError};

/// The `dce` pass.
#[derive(Clone, Copy, Debug, Default)]
pub struct Dce;

/// The dead instructions (in creation order) and dead computations of `m`.
pub fn dead_code(m: &Module, s: &super::Structure) -> (Vec<InstId>, Vec<CompId>) {
    let (effectful, by_comp) = (&s.effectful, &s.by_comp);
    let live: Vec<AtomicBool> = (0..m.inst_capacity())
        .map(|_| AtomicBool::new(false))
        .collect();
    let callees: Vec<Vec<CompId>> = (0..by_comp.keys().len())
        .into_par_iter()
        .map(|c| {
            let insts = &by_comp[CompId::new(c)];
            if !m.is_live_comp(CompId::new(c)) {
                return Vec::new();
            }
            let mut stack: Vec<InstId> = Vec::new();
            let mark = |i: InstId, stack: &mut Vec<InstId>| {
                if !i.is_none()
                    && i.index() < live.len()
                    && !live[i.index()].load(Ordering::Relaxed)
                {
                    live[i.index()].store(true, Ordering::Relaxed);
                    stack.push(i);
                }
            };
            let root = m.root(CompId::new(c));
            if !root.is_none() && m.is_live(root) {
                mark(root, &mut stack);
            }
            for &i in insts {
                if m.opcode(i) == Opcode::Parameter || super::is_effectful(m, i, effectful) {
                    mark(i, &mut stack);
                }
            }
            while let Some(i) = stack.pop() {
                for &o in m.operands(i) {
                    mark(o, &mut stack);
                }
                for &o in m.control_predecessors(i) {
                    mark(o, &mut stack);
                }
            }
            let mut called = Vec::new();
            for &i in insts {
                if live[i.index()].load(Ordering::Relaxed) {
                    super::for_each_callee(m, i, |c| called.push(c));
                }
            }
            called
        })
        .collect();
    let reachable = super::reachable_computations(m, &collect_map(callees));
    let dead_comps: Vec<CompId> = m
        .computations()
        .into_iter()
        .filter(|&c| !reachable.contains(c))
        .collect();
    let dead_insts: Vec<InstId> = m
        .live_ids()
        .into_par_iter()
        .filter(|&i| {
            let p = m.parent(i);
            !live[i.index()].load(Ordering::Relaxed) || p.is_none() || !reachable.contains(p)
        })
        .collect();
    (dead_insts, dead_comps)
}

impl Pass for Dce {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let s = cx.analysis::<super::Structure>(m);
        let (dead_insts, dead_comps) = dead_code(m, &s);
        if dead_insts.is_empty() && dead_comps.is_empty() {
            return Ok(false);
        }
        cx.count("removed_insts", dead_insts.len() as u64);
        cx.count("removed_comps", dead_comps.len() as u64);
        let mut rw = m.rewriter();
        for &i in &dead_insts {
            rw.remove(i);
        }
        rw.module_mut().remove_computations(&dead_comps);
        Ok(rw.finish())
    }
}
