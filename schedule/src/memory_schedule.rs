//! `memory-schedule{heuristic=list|dfs|postorder|best}`: orders every computation's
//! instructions to keep live memory low and stores the order in the module's schedule side table
//! ([`axle_ir::schedule`]), so the module prints with `is_scheduled=true`.
//!
//! It first flattens the call graph ([`crate::flatten_call_graph`]), so that buffer assignment
//! can follow. Then, per computation (in parallel; each computation's result depends on it
//! alone), it runs the chosen heuristic: the greedy [`crate::list_scheduler`], XLA's
//! [`crate::dfs_scheduler`] or the plain [`crate::post_order_scheduler`]; `best` (the default)
//! runs all three, simulates each order's peak of live bytes with the
//! [`crate::memory_model::MemoryModel`] and keeps the lowest (ties: list, dfs, postorder).
//! Every order honours operands and control predecessors; the whole pass is
//! `O(n log n)` and deterministic at any thread count.
//!
//! Pre-conditions: a valid, non-recursive module. Post-conditions: the module is flat and has
//! a current schedule; its instructions are unchanged.
//!
//! Counters: `computations`, `computations-cloned`, `chose-list`, `chose-dfs`,
//! `chose-postorder`, `entry-peak-bytes` (the entry computation's simulated peak).

use rayon::prelude::*;

use axle_ir::{CompId, InstId, Module, OptKind, OptSpec, Pass, PassCx, PassError, Schedule};

use crate::computation_view::{local_indices, CompView, ModuleView};
use crate::dep_graph::DepGraph;
use crate::dfs_scheduler::dfs;
use crate::error::ScheduleError;
use crate::flatten_call_graph::flatten;
use crate::list_scheduler::list;
use crate::memory_model::MemoryModel;
use crate::post_order_scheduler::post_order;

/// A scheduling heuristic.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Heuristic {
    /// Greedy: run what frees the most bytes next.
    List,
    /// XLA's DFS by extra users and subtree size.
    Dfs,
    /// Plain depth-first post-order.
    PostOrder,
    /// All three; keep the lowest simulated peak.
    Best,
}

impl Heuristic {
    /// The option spelling.
    pub fn name(self) -> &'static str {
        match self {
            Heuristic::List => "list",
            Heuristic::Dfs => "dfs",
            Heuristic::PostOrder => "postorder",
            Heuristic::Best => "best",
        }
    }

    /// The heuristic spelled `s`.
    pub fn from_name(s: &str) -> Option<Heuristic> {
        [
            Heuristic::List,
            Heuristic::Dfs,
            Heuristic::PostOrder,
            Heuristic::Best,
        ]
        .into_iter()
        .find(|h| h.name() == s)
    }
}

/// The options of `memory-schedule`.
pub const OPTIONS: &[OptSpec] = &[OptSpec {
    name: "heuristic",
    kind: OptKind::Choice(&["list", "dfs", "postorder", "best"]),
    default: "best",
    doc: "the scheduler; best runs every one and keeps the lowest simulated peak per computation",
}];

/// What scheduling chose for one computation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Choice {
    /// The computation.
    pub comp: CompId,
    /// The heuristic whose order was kept.
    pub chosen: Heuristic,
    /// The simulated peak of live bytes of each heuristic that ran.
    pub peaks: Vec<(Heuristic, u64)>,
}

impl Choice {
    /// The simulated peak of the kept order.
    pub fn peak(&self) -> u64 {
        self.peaks
            .iter()
            .find(|(h, _)| *h == self.chosen)
            .map_or(0, |p| p.1)
    }
}

/// The schedule of every computation of `m` under `h`, and what was chosen per computation (in
/// computation id order). `m` is not changed.
pub fn compute_schedule(m: &Module, h: Heuristic) -> (Schedule, Vec<Choice>) {
    let graph = DepGraph::new(m);
    let model = MemoryModel::new(m, &graph);
    let by_comp = m.insts_by_comp();
    let local = local_indices(m, &by_comp);
    let view = ModuleView {
        m,
        graph: &graph,
        model: &model,
        by_comp: &by_comp,
        local: &local,
    };
    let comps = m.computations();
    let results: Vec<(Vec<InstId>, Choice)> = comps
        .par_iter()
        .map(|&c| schedule_computation(&view, c, h))
        .collect();
    let mut s = Schedule::new();
    let mut choices = Vec::with_capacity(results.len());
    for (&c, (order, choice)) in comps.iter().zip(results) {
        s.set_sequence(c, order);
        choices.push(choice);
    }
    (s, choices)
}

fn schedule_computation(view: &ModuleView, c: CompId, h: Heuristic) -> (Vec<InstId>, Choice) {
    let cv = CompView::new(view, c);
    let run = |h: Heuristic| match h {
        Heuristic::List => list(cv),
        Heuristic::Dfs => dfs(cv),
        _ => post_order(cv),
    };
    let tried: &[Heuristic] = match h {
        Heuristic::Best => &[Heuristic::List, Heuristic::Dfs, Heuristic::PostOrder],
        Heuristic::List => &[Heuristic::List],
        Heuristic::Dfs => &[Heuristic::Dfs],
        Heuristic::PostOrder => &[Heuristic::PostOrder],
    };
    // The heuristics of `best` run side by side (one computation can be the whole module).
    let runs: Vec<(Heuristic, Vec<InstId>, u64)> = tried
        .par_iter()
        .map(|&t| {
            let order = run(t);
            let peak = view.model.simulate(c, &order);
            (t, order, peak)
        })
        .collect();
    let mut peaks = Vec::with_capacity(runs.len());
    let mut best: Option<(Vec<InstId>, Heuristic, u64)> = None;
    for (t, order, peak) in runs {
        peaks.push((t, peak));
        let better = match &best {
            Some(b) => peak < b.2,
            None => true,
        };
        if better {
            best = Some((order, t, peak));
        }
    }
    // `tried` is never empty; the fallback only keeps this total.
    let (order, chosen, _) = best.unwrap_or_else(|| (post_order(cv), Heuristic::PostOrder, 0));
    (
        order,
        Choice {
            comp: c,
            chosen,
            peaks,
        },
    )
}

/// What [`schedule_module`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ScheduleReport {
    /// Computations copied to flatten the call graph.
    pub cloned: usize,
    /// The choice per computation, in computation id order.
    pub choices: Vec<Choice>,
    /// Whether the module's schedule changed.
    pub changed: bool,
}

/// Flattens `m`'s call graph and schedules it under `h` (what `memory-schedule` does).
pub fn schedule_module(m: &mut Module, h: Heuristic) -> Result<ScheduleReport, ScheduleError> {
    let cloned = flatten(m)?;
    let (s, choices) = compute_schedule(m, h);
    let changed = m.schedule() != Some(&s);
    if changed {
        m.set_schedule(s);
    }
    Ok(ScheduleReport {
        cloned,
        choices,
        changed: changed || cloned > 0,
    })
}

/// The `memory-schedule` pass.
#[derive(Clone, Copy, Debug)]
pub struct MemorySchedule {
    /// The heuristic.
    pub heuristic: Heuristic,
}

impl Pass for MemorySchedule {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<bool, PassError> {
        let r = schedule_module(m, self.heuristic).map_err(|e| PassError::new(e.message))?;
        cx.count("computations", r.choices.len() as u64);
        cx.count("computations-cloned", r.cloned as u64);
        for ch in &r.choices {
            cx.count(
                match ch.chosen {
                    Heuristic::List => "chose-list",
                    Heuristic::Dfs => "chose-dfs",
                    _ => "chose-postorder",
                },
                1,
            );
            if ch.comp == m.entry() {
                cx.count("entry-peak-bytes", ch.peak());
            }
        }
        Ok(r.changed)
    }
}
