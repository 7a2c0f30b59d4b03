//! `axle buffers`: a module's schedule and buffer assignment, as the backends get them.
//!
//! [`buffers`] runs an optional pipeline, schedules the module (or keeps its own schedule) and
//! assigns its buffers with the `schedule` crate, under the cpu backend's rules (exactly the
//! assignment `axle run` and `axle bench` execute on, the backend's expansions included), the
//! nvptx backend's (`axle_codegen_nvptx::buffer_rules`: the static assignment of its kernels'
//! buffers) or XLA's; the report is printed by [`axle_schedule::render`] (text, JSON, SVG timeline).

use axle_codegen_cpu::buffer_rules::CpuRules;
use axle_codegen_cpu::CpuOptions;
use axle_codegen_nvptx::buffer_rules::GpuRules;
use axle_ir::Module;
use axle_schedule::{
    assign, schedule_module, BufferAssignment, BufferRules, Choice, Heuristic, HloRules,
};

/// Whose rules the assignment follows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rules {
    /// The cpu backend's ([`CpuRules`], default options): what it compiles with.
    Cpu,
    /// XLA's model ([`HloRules`]): every fusion a kernel, no scratch.
    Xla,
    /// The nvptx backend's ([`GpuRules`]): its kernels' scratch, in place only in element-wise
    /// loop kernels, read-only parameters.
    Gpu,
}

impl Rules {
    /// The rules named `name` (`cpu`, `gpu` or `xla`).
    pub fn from_name(name: &str) -> Option<Rules> {
        match name {
            "cpu" => Some(Rules::Cpu),
            "xla" => Some(Rules::Xla),
            "gpu" => Some(Rules::Gpu),
            _ => None,
        }
    }
}

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
    /// Whose rules.
    pub rules: Rules,
}

impl Default for BuffersOptions {
    fn default() -> Self {
        BuffersOptions {
            pipeline: None,
            schedule: SchedulePolicy::Run(Heuristic::Best),
            rules: Rules::Cpu,
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
    /// The rules it was made under (for [`axle_schedule::check`]).
    pub rules: Box<dyn BufferRules>,
}

/// Runs `opts.pipeline`, schedules and assigns buffers under `opts.rules`.
pub fn buffers(mut m: Module, opts: &BuffersOptions) -> Result<BuffersResult, String> {
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
    // A backend keeps the schedule just made (or the module's own).
    let (module, assignment, rules): (Module, BufferAssignment, Box<dyn BufferRules>) =
        match opts.rules {
            Rules::Xla => {
                let assignment = assign(&m, &HloRules).map_err(|e| e.to_string())?;
                (m, assignment, Box::new(HloRules))
            }
            Rules::Gpu => {
                let (m, a, r): (Module, BufferAssignment, GpuRules) =
                    axle_codegen_nvptx::buffer_rules::buffer_assignment(&m)
                        .map_err(|e| e.to_string())?;
                (m, a, Box::new(r))
            }
            Rules::Cpu => {
                let (m, a, r): (Module, BufferAssignment, CpuRules) =
                    axle_codegen_cpu::buffer_assignment(&m, &CpuOptions::default())
                        .map_err(|e| e.to_string())?;
                (m, a, Box::new(r))
            }
        };
    Ok(BuffersResult {
        module,
        assignment,
        choices,
        rules,
    })
}
