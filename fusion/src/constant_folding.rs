//! `constant-folding`: evaluates instructions whose operands are all known, through the
//! reference evaluator, and replaces them by constants.
//!
//! An instruction is folded when every operand is a constant or folded itself, its result and
//! its operands are arrays of at most `max_elements` elements, and it has no effect and no
//! dependence on where it runs: parameters, effects (their own or through a called computation),
//! custom calls, random numbers, `replica-id`/`partition-id`, `while` (which may not end) and
//! instructions with control predecessors are never folded. Folded values are materialized as
//! constants only where something unfolded uses them (or at a root), and never for a
//! `broadcast` or an `iota`, which are cheaper than the constant they would become; what the
//! materialized constants used becomes dead (left for `dce`).
//!
//! Each instruction is evaluated in a small module holding constants for its operands, the
//! instruction and copies of the computations it calls, so folding computes exactly what the
//! evaluator computes (with IEEE arithmetic, the semantics every pass keeps; see
//! `axle_analysis::equivalence`).
//!
//! Read phase: a parallel sweep finds the seeds (instructions whose operands are all constants,
//! and iotas), then evaluation spreads from them through users, each instruction evaluated once
//! all its operands are known, so the work is proportional to the constant region. Write phase:
//! one constant per materialized value. Linear in the module (plus the evaluation of what is
//! folded).
//!
//! Pre-conditions: a valid module. Post-conditions: the same values.
//!
//! Options: `max_elements` (default 65536). Counters: `folded`, `materialized`.

use hashbrown::HashMap;
use rayon::prelude::*;

use axle_ir::passes::{for_each_callee, is_effectful, Structure};
use axle_ir::{
    Changed, CompId, ConstValue, InstId, InstsByComp, Literal, Module, Opcode, OptKind, OptSpec,
    Pass, PassCx, PassError, Shape,
};

use crate::clone::{copy_computation, copy_layout, copy_shape, mapped_attrs};
use crate::rewrite::{apply, Node, Rewrite, ShapeSpec};

/// The options of `constant-folding`.
pub const OPTIONS: &[OptSpec] = &[OptSpec {
    name: "max_elements",
    kind: OptKind::Int {
        min: 0,
        max: i64::MAX,
    },
    default: "65536",
    doc: "largest array (in elements) that is folded or read as an operand",
}];

/// The `constant-folding` pass.
#[derive(Clone, Copy, Debug)]
pub struct ConstantFolding {
    /// The largest array, in elements, folded or read as an operand.
    pub max_elements: usize,
}

impl Default for ConstantFolding {
    fn default() -> Self {
        ConstantFolding {
            max_elements: 65536,
        }
    }
}

fn elements(m: &Module, id: InstId) -> Option<usize> {
    match m.shape(id) {
        Shape::Array(a) if !a.is_dynamic() => Some(a.num_elements().max(0) as usize),
        _ => None,
    }
}

fn foldable_op(op: Opcode) -> bool {
    !matches!(
        op,
        Opcode::Parameter
            | Opcode::Constant
            | Opcode::CustomCall
            | Opcode::Rng
            | Opcode::RngBitGenerator
            | Opcode::RngGetAndUpdateState
            | Opcode::ReplicaId
            | Opcode::PartitionId
            | Opcode::While
            | Opcode::Infeed
            | Opcode::Recv
            | Opcode::AfterAll
            | Opcode::GetDimensionSize
            | Opcode::SetDimensionSize
            | Opcode::DynamicReshape
            | Opcode::OptBarrier
            | Opcode::Domain
    )
}

/// Evaluates `id` on known operand values in a module of its own.
fn evaluate_one(
    m: &Module,
    by_comp: &InstsByComp,
    id: InstId,
    operands: &[&Literal],
) -> Option<Literal> {
    let mut t = Module::new("fold");
    let mut comps: HashMap<CompId, CompId> = HashMap::new();
    let mut callees = Vec::new();
    for_each_callee(m, id, |c| callees.push(c));
    for c in callees {
        copy_computation(m, by_comp, c, &mut t, &mut comps);
    }
    let mut name = String::from("fold.entry");
    while comps.values().any(|&c| t.comp_name(c) == name) {
        name.push('_');
    }
    let e = t.add_computation(&name);
    t.set_entry(e);
    let mut ops = Vec::with_capacity(operands.len());
    for (k, (&o, lit)) in m.operands(id).iter().zip(operands).enumerate() {
        let s = copy_shape(m, &mut t, m.shape_id(o));
        let l = copy_layout(m, &mut t, m.layout_id(o));
        let c = t.push_inst_parts(
            e,
            Opcode::Constant,
            s,
            l,
            &[],
            &mut Vec::new(),
            &format!("fold.operand.{k}"),
        );
        t.set_constant(c, ConstValue::Literal((*lit).clone()));
        ops.push(c);
    }
    let mut attrs = mapped_attrs(m, id, &comps, &HashMap::new());
    let s = copy_shape(m, &mut t, m.shape_id(id));
    let l = copy_layout(m, &mut t, m.layout_id(id));
    let r = t.push_inst_parts(e, m.opcode(id), s, l, &ops, &mut attrs, "fold.result");
    t.set_root(e, r);
    axle_analysis::evaluate_with(&t, &[], &axle_analysis::equivalence::ieee()).ok()
}

impl Pass for ConstantFolding {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let small = |i: InstId| elements(m, i).is_some_and(|n| n <= self.max_elements);
        let is_const = |o: InstId| m.opcode(o) == Opcode::Constant && m.literal(o).is_some();
        let eligible = |i: InstId| {
            foldable_op(m.opcode(i)) && m.control_predecessors(i).is_empty() && small(i)
        };
        // Folding starts at an instruction whose operands are all constants (or none: an iota).
        let seeds: Vec<InstId> = m
            .live_ids()
            .into_par_iter()
            .filter(|&i| {
                (m.opcode(i) == Opcode::Iota || !m.operands(i).is_empty())
                    && m.operands(i).iter().all(|&o| is_const(o))
                    && eligible(i)
            })
            .collect();
        if seeds.is_empty() {
            return Ok(false);
        }
        // Broadcasts and iotas are never materialized: if those are all the seeds and nothing
        // consumes only constants and seeds, nothing would change.
        if seeds
            .iter()
            .all(|&i| matches!(m.opcode(i), Opcode::Broadcast | Opcode::Iota))
        {
            let seed_set: hashbrown::HashSet<InstId> = seeds.iter().copied().collect();
            let grows = m.live_ids().into_par_iter().any(|i| {
                !m.operands(i).is_empty()
                    && m.operands(i).iter().any(|o| seed_set.contains(o))
                    && m.operands(i)
                        .iter()
                        .all(|&o| is_const(o) || seed_set.contains(&o))
                    && eligible(i)
            });
            if !grows {
                return Ok(false);
            }
        }
        let s = cx.analysis::<Structure>(m);
        let users = cx.analysis::<axle_analysis::Users>(m);
        // Propagate from the seeds through users, evaluating an instruction once all its
        // operands are known: the work is proportional to the constant region, not the module.
        let mut known: HashMap<InstId, Literal> = HashMap::new();
        let mut queue: std::collections::VecDeque<InstId> = seeds.into_iter().collect();
        let mut order: Vec<InstId> = Vec::new();
        while let Some(i) = queue.pop_front() {
            if known.contains_key(&i) || !eligible(i) || is_effectful(m, i, &s.effectful) {
                continue;
            }
            let ops: Option<Vec<&Literal>> = m
                .operands(i)
                .iter()
                .map(|&o| {
                    if is_const(o) {
                        small(o).then(|| m.literal(o)).flatten()
                    } else {
                        known.get(&o)
                    }
                })
                .collect();
            let Some(ops) = ops else { continue };
            let Some(v) = evaluate_one(m, &s.by_comp, i, &ops) else {
                continue;
            };
            known.insert(i, v);
            order.push(i);
            for &u in users.users(i) {
                if !known.contains_key(&u) {
                    queue.push_back(u);
                }
            }
        }
        cx.count("folded", order.len() as u64);
        // Materialize what something unfolded (or a root) uses; never a broadcast or an iota.
        let plan: Vec<(InstId, Literal)> = order
            .into_iter()
            .filter(|&i| {
                !matches!(m.opcode(i), Opcode::Broadcast | Opcode::Iota)
                    && (users.is_root(i) || users.users(i).iter().any(|u| !known.contains_key(u)))
            })
            .filter_map(|i| known.get(&i).map(|l| (i, l.clone())))
            .collect();
        if plan.is_empty() {
            return Ok(false);
        }
        let mut rw = m.rewriter();
        for (id, lit) in plan {
            let node = Node {
                opcode: Opcode::Constant,
                shape: ShapeSpec::Of(id),
                operands: Vec::new(),
                attrs: Vec::new(),
                literal: Some(lit),
            };
            if apply(&mut rw, id, Rewrite::Build(vec![node])) {
                cx.count("materialized", 1);
            }
        }
        Ok(rw.finish())
    }
}
