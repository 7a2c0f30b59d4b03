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
//! evaluator computes at run time.
//!
//! Read phase: per computation in parallel, a walk in topological order that evaluates what
//! can be folded. Write phase: one constant per materialized value. Linear in the module (plus
//! the evaluation of what is folded).
//!
//! Pre-conditions: a valid module. Post-conditions: the same values.
//!
//! Options: `max_elements` (default 65536). Counters: `folded`, `materialized`.

use hashbrown::HashMap;
use rayon::prelude::*;

use axle_ir::passes::{effectful_computations, is_effectful, topo_orders};
use axle_ir::{
    Changed, CompId, ConstValue, InstId, Literal, Module, Opcode, OptKind, OptSpec, Pass, PassCx,
    PassError, Shape,
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

enum Known<'a> {
    Const(&'a Literal),
    Folded(Literal),
}

impl Known<'_> {
    fn literal(&self) -> &Literal {
        match self {
            Known::Const(l) => l,
            Known::Folded(l) => l,
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
    by_comp: &[Vec<InstId>],
    id: InstId,
    operands: &[&Literal],
) -> Option<Literal> {
    let mut t = Module::new("fold");
    let mut comps: HashMap<CompId, CompId> = HashMap::new();
    for c in m.called_comps(id) {
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
    axle_analysis::evaluate(&t, &[]).ok()
}

impl ConstantFolding {
    /// Folds what can be folded in one computation; returns the values to materialize, in
    /// topological order, and how many instructions were folded.
    fn fold_computation(
        &self,
        m: &Module,
        by_comp: &[Vec<InstId>],
        effectful: &[bool],
        order: &[InstId],
        root: InstId,
    ) -> (Vec<(InstId, Literal)>, usize) {
        let mut known: HashMap<InstId, Known<'_>> = HashMap::new();
        let mut folded = Vec::new();
        for &i in order {
            let op = m.opcode(i);
            if op == Opcode::Constant {
                if let (Some(l), Some(n)) = (m.literal(i), elements(m, i)) {
                    if n <= self.max_elements {
                        known.insert(i, Known::Const(l));
                    }
                }
                continue;
            }
            if !foldable_op(op)
                || is_effectful(m, i, effectful)
                || !m.control_predecessors(i).is_empty()
                || elements(m, i).is_none_or(|n| n > self.max_elements)
            {
                continue;
            }
            let Some(ops) = m
                .operands(i)
                .iter()
                .map(|o| known.get(o).map(|k| k.literal()))
                .collect::<Option<Vec<&Literal>>>()
            else {
                continue;
            };
            if let Some(v) = evaluate_one(m, by_comp, i, &ops) {
                folded.push(i);
                known.insert(i, Known::Folded(v));
            }
        }
        let n = folded.len();
        if n == 0 {
            return (Vec::new(), 0);
        }
        // Materialize folded values that something unfolded (or the root) uses.
        let mut needed: hashbrown::HashSet<InstId> = hashbrown::HashSet::new();
        for &i in order {
            if matches!(known.get(&i), Some(Known::Folded(_))) {
                continue;
            }
            for o in m.operands(i) {
                needed.insert(*o);
            }
        }
        needed.insert(root);
        let mut out = Vec::new();
        for i in folded {
            if !needed.contains(&i) || matches!(m.opcode(i), Opcode::Broadcast | Opcode::Iota) {
                continue;
            }
            if let Some(Known::Folded(l)) = known.remove(&i) {
                out.push((i, l));
            }
        }
        (out, n)
    }
}

impl Pass for ConstantFolding {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let effectful = effectful_computations(m);
        let by_comp = m.insts_by_comp();
        let orders = topo_orders(m);
        let results: Vec<(Vec<(InstId, Literal)>, usize)> = orders
            .par_iter()
            .enumerate()
            .map(|(c, order)| {
                let c = CompId::new(c);
                if order.is_empty() || !m.is_live_comp(c) {
                    return (Vec::new(), 0);
                }
                self.fold_computation(m, &by_comp, &effectful, order, m.root(c))
            })
            .collect();
        let total: usize = results.iter().map(|r| r.1).sum();
        cx.count("folded", total as u64);
        let plan: Vec<(InstId, Literal)> = results.into_iter().flat_map(|r| r.0).collect();
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
