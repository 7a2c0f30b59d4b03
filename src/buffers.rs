//! `axle buffers`: a module's schedule and buffer assignment, as the backends get them.
//!
//! [`buffers`] runs an optional pipeline, schedules the module (or keeps its own schedule) and
//! assigns its buffers with the `schedule` crate; the report is printed by
//! [`axle_schedule::render`] (text, JSON, SVG timeline).

use axle_ir::Module;
use axle_schedule::{
    assign, schedule_module, BufferAssignment, BufferRules, Choice, Heuristic, HloRules,
};

/// How [`buffers`] schedules.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SchedulePolicy {
    /// Schedule with this heuristic (`best`: the lowest simulated peak per computation).
    Run(Heuristic),
    /// Keep the module's own schedule (`is_scheduled=true`), scheduling only if it has none.
    Keep,
}

/// What [`buffers`] does.
#[derive(Clone, Debug)]
pub struct BuffersOptions {
    /// A pipeline (standard name or text) to run first.
    pub pipeline: Option<String>,
    /// How to schedule.
    pub schedule: SchedulePolicy,
}

impl Default for BuffersOptions {
    fn default() -> Self {
        BuffersOptions {
            pipeline: None,
            schedule: SchedulePolicy::Run(Heuristic::Best),
        }
    }
}

/// The module as assigned, its assignment and the scheduler's choices (`None` when the
/// module's own schedule was kept).
pub struct BuffersResult {
    /// The module after the pipeline and scheduling.
    pub module: Module,
    /// Its buffers.
    pub assignment: BufferAssignment,
    /// The heuristic chosen per computation.
    pub choices: Option<Vec<Choice>>,
}

/// Runs `opts.pipeline`, schedules and assigns buffers under `rules`.
pub fn buffers(
    mut m: Module,
    opts: &BuffersOptions,
    rules: &dyn BufferRules,
) -> Result<BuffersResult, String> {
    if let Some(p) = &opts.pipeline {
        let text = crate::passes::standard_pipeline(p).unwrap_or(p);
        crate::passes::optimize(&mut m, text, axle_ir::PassManagerOptions::default())
            .map_err(|e| format!("pipeline '{p}': {e}"))?;
    }
    let h = match opts.schedule {
        SchedulePolicy::Run(h) => Some(h),
        SchedulePolicy::Keep if m.schedule().is_some() => None,
        SchedulePolicy::Keep => Some(Heuristic::Best),
    };
    let choices = match h {
        Some(h) => Some(
            schedule_module(&mut m, h)
                .map_err(|e| e.to_string())?
                .choices,
        ),
        None => None,
    };
    let assignment = assign(&m, rules).map_err(|e| e.to_string())?;
    Ok(BuffersResult {
        module: m,
        assignment,
        choices,
    })
}

/// [`buffers`] under XLA's rules ([`HloRules`]).
pub fn buffers_hlo(m: Module, opts: &BuffersOptions) -> Result<BuffersResult, String> {
    buffers(m, opts, &HloRules)
}
