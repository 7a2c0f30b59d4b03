//! The full pass registry, the standard pipelines, and running passes by name.
//!
//! Pass order is data: the standard pipelines are strings in [`PIPELINES`], in this one place,
//! in the pipeline grammar of [`axle_ir::pipeline`]. [`registry`] has every pass of every crate
//! (`axle passes` prints it). [`optimize`] runs a pipeline on a module; [`Session`] runs one
//! pass at a time and observes the module after each, the shape an environment for
//! pass-ordering agents (CompilerGym style) needs.

use std::sync::{Arc, OnceLock};

use axle_analysis::{module_cost, Cost};
use axle_codegen_cpu::fusion_target::CpuFusionTarget;
use axle_fusion::fusion::Fusion;
use axle_fusion::multi_output_fusion::MultiOutputFusion;
use axle_fusion::target::FusionTarget;
use axle_ir::{
    Module, PassManager, PassManagerError, PassManagerOptions, PassOptions, PassRegistry, Pipeline,
    PipelineError, StatsRow,
};

/// A named standard pipeline.
#[derive(Clone, Copy, Debug)]
pub struct StandardPipeline {
    /// Its name (`--pipeline NAME`).
    pub name: &'static str,
    /// A one-line description.
    pub doc: &'static str,
    /// The pipeline text.
    pub text: &'static str,
}

/// The text of the `simplify` pipeline (a macro so that other pipelines can start with it).
macro_rules! simplify_text {
    () => {
        "inline,fixpoint(max=8)[algsimp,constant-folding,tuple-simplify,while-simplify,inline,reshape-mover,broadcast-canonicalize,zero-sized-elim,cse,dce]"
    };
}

/// The standard pipelines. Backends add theirs here.
pub const PIPELINES: &[StandardPipeline] = &[
    StandardPipeline {
        name: "simplify",
        doc: "target-independent simplification to a fixed point",
        text: simplify_text!(),
    },
    StandardPipeline {
        name: "cpu",
        doc: "the cpu backend's default: bounded dynamic shapes made static (dynamic-padder), rng as elementwise ops on the evaluator's generator (first, while the names are the evaluator's), bf16 results converted to f32 read unrounded (XLA CPU's excess precision, on the module as given, calls inlined), bf16 all-reduce and reduce-scatter in f32 (as XLA CPU), simplify, dots merged to one free and one contracting dimension per side, convolutions with features innermost, long bf16/f16/f8 reductions in XLA CPU's tree order, batched chains with large intermediates split by batch (less live memory), long reductions split for threads, then producer-consumer and multi-output fusion for the cpu target",
        text: concat!(
            "dynamic-padder,rng-expander,inline,excess-precision,collective-upcast,",
            simplify_text!(),
            ",dot-canonicalize,conv-canonicalize,tree-reduce,batch-split,reduction-split,fusion{target=cpu},multi-output-fusion{target=cpu},dce"
        ),
    },
    StandardPipeline {
        name: "gpu",
        doc: "the nvptx backend's default: bounded dynamic shapes made static (dynamic-padder), rng as elementwise ops on the evaluator's generator (first, while the names are the evaluator's), batch-norm ops expanded (as XLA's BatchNormExpander), simplify, producer-consumer and multi-output fusion for the gpu target, then the memory-aware schedule the executor runs in (freeing each buffer after its last reader)",
        text: concat!(
            "dynamic-padder,rng-expander,batchnorm-expander,",
            simplify_text!(),
            ",fusion{target=gpu},multi-output-fusion{target=gpu},dce,memory-schedule"
        ),
    },
];

/// Pipeline steps for random-pipeline properties beyond the registered passes with their
/// defaults: passes that only act above a size threshold (sized for real programs) with
/// thresholds small enough to fire on small generated programs, so the properties exercise
/// their rewrites too.
pub const PROPERTY_STEPS: &[&str] = &[
    "batch-split{min_bytes=0}",
    "batch-split{min_bytes=0,slice_bytes=0}",
    "batch-split{min_bytes=0,slice_bytes=256}",
    "reduction-split{min_elements=4}",
];

/// The fusion targets the pass registry knows: the CPU backend's and the fusion crate's
/// parameter sets.
pub const FUSION_TARGETS: &[&str] = &["cpu", "generic", "gpu"];

/// The fusion target named `name` (`target=NAME` of the fusion passes).
pub fn fusion_target(name: &str) -> Option<Arc<dyn FusionTarget>> {
    match name {
        "cpu" => Some(Arc::new(CpuFusionTarget::default())),
        _ => axle_fusion::builtin_target(name),
    }
}

fn target_option(o: &PassOptions) -> Result<Arc<dyn FusionTarget>, String> {
    axle_fusion::resolve_target(o.str("target"), fusion_target, FUSION_TARGETS)
}

/// The text of the standard pipeline `name`.
pub fn standard_pipeline(name: &str) -> Option<&'static str> {
    PIPELINES.iter().find(|p| p.name == name).map(|p| p.text)
}

/// Every registered pass: the IR crate's utility passes, the simplification passes, the
/// fusion passes (their `target=NAME` option resolved by [`fusion_target`]) and the scheduling
/// passes.
pub fn registry() -> &'static PassRegistry {
    static REGISTRY: OnceLock<PassRegistry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut reg = PassRegistry::new();
        axle_ir::passes::register(&mut reg);
        axle_fusion::register(&mut reg);
        axle_fusion::register_fusion(
            &mut reg,
            |o| Box::new(Fusion::new(target_option(o))),
            |o| Box::new(MultiOutputFusion::new(target_option(o))),
        );
        axle_schedule::register(&mut reg);
        reg
    })
}

/// `axle passes`: every pass with its doc and options, then the standard pipelines.
pub fn describe_passes() -> String {
    let mut out = String::from("passes:\n");
    for l in registry().describe().lines() {
        out.push_str("  ");
        out.push_str(l);
        out.push('\n');
    }
    out.push_str("\nstandard pipelines (--pipeline NAME):\n");
    for p in PIPELINES {
        out.push_str(&format!("  {}  {}\n    {}\n", p.name, p.doc, p.text));
    }
    out
}

/// Checks `text` against the registry and returns its canonical form.
pub fn canonical_pipeline(text: &str) -> Result<String, PipelineError> {
    Ok(Pipeline::parse_checked(text, registry())?.to_string())
}

/// Runs `pipeline` on `m`; returns the statistics rows (also when a pass fails, with the error).
pub fn optimize(
    m: &mut Module,
    pipeline: &str,
    opts: PassManagerOptions,
) -> Result<Vec<StatsRow>, OptimizeError> {
    let mut pm = PassManager::new(registry(), pipeline, opts).map_err(OptimizeError::Pipeline)?;
    match pm.run(m) {
        Ok(_) => Ok(pm.take_stats()),
        Err(e) => Err(OptimizeError::Pass(e, pm.take_stats())),
    }
}

/// Why [`optimize`] failed.
#[derive(Debug)]
pub enum OptimizeError {
    /// The pipeline text is wrong.
    Pipeline(PipelineError),
    /// A pass failed; the rows of the passes that ran are kept.
    Pass(PassManagerError, Vec<StatsRow>),
}

impl std::fmt::Display for OptimizeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OptimizeError::Pipeline(e) => f.write_str(&e.render()),
            OptimizeError::Pass(e, _) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for OptimizeError {}

/// What an agent observes about the module.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Observation {
    /// Live instructions.
    pub insts: usize,
    /// The cost model's estimate.
    pub cost: Cost,
}

/// Observes `m`.
pub fn observe(m: &Module) -> Observation {
    Observation {
        insts: m.num_live_insts(),
        cost: module_cost(m),
    }
}

/// One module being optimized one pass at a time: module in, pass by name, module and stats
/// out.
pub struct Session {
    module: Module,
    opts: PassManagerOptions,
    stats: Vec<StatsRow>,
    steps: u32,
}

impl Session {
    /// A session on `m`; passes run with `opts` (the verifier setting, dumps, ...).
    pub fn new(m: Module, opts: PassManagerOptions) -> Session {
        Session {
            module: m,
            opts,
            stats: Vec::new(),
            steps: 0,
        }
    }

    /// Runs one pass (or any pipeline text, `algsimp` or `constant-folding{max_elements=8}`)
    /// and returns its statistics rows and the observation after it. On error the module is
    /// left as the failing pass left it.
    pub fn step(&mut self, pass: &str) -> Result<(Vec<StatsRow>, Observation), OptimizeError> {
        let mut opts = self.opts.clone();
        opts.label
            .get_or_insert_with(|| format!("session step {}", self.steps));
        self.steps += 1;
        let rows = optimize(&mut self.module, pass, opts)?;
        self.stats.extend(rows.iter().cloned());
        Ok((rows, observe(&self.module)))
    }

    /// The module as it stands.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// Every statistics row so far.
    pub fn stats(&self) -> &[StatsRow] {
        &self.stats
    }

    /// Ends the session, returning the module.
    pub fn into_module(self) -> Module {
        self.module
    }
}

/// A pipeline of up to `max` registered passes picked by `picks` (each pick indexes the
/// registry's names, wrapping around); `dce` when there are no picks. Property tests draw
/// random pipelines with it.
pub fn pipeline_from_picks(picks: &[u8], max: usize) -> String {
    let names = registry().names();
    let steps: Vec<&str> = picks
        .iter()
        .take(max)
        .map(|&p| names[p as usize % names.len()])
        .collect();
    if steps.is_empty() {
        "dce".to_string()
    } else {
        steps.join(",")
    }
}
