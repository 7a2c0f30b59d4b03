//! The pass manager: runs a pipeline of registered passes and owns everything around them
//! (DESIGN §4): timing, instruction counts, change detection, verification between passes,
//! dumps, compaction and JSON-lines statistics.
//!
//! Per pass run it
//! - times the pass and counts live instructions before and after;
//! - when [`PassManagerOptions::check_changed`] is on (the default in debug builds), hashes the
//!   module before and after and fails the run if a pass says "unchanged" but changed it;
//! - verifies the module after every pass that changed it ([`VerifyMode::Each`], the default in
//!   debug builds and tests), or once at the end ([`VerifyMode::End`]), or never;
//! - writes `DIR/NNN.PASS.hlo` when the pass name matches [`PassManagerOptions::dump_after`];
//! - repairs the schedule of a scheduled module after a pass that changed it
//!   ([`Module::update_schedule`], counted as `schedule-updated`), so a pipeline keeps
//!   `is_scheduled=true` through later passes; compaction renumbers the schedule with the
//!   instructions;
//! - compacts the module by [`CompactPolicy`];
//! - records one [`StatsRow`] (`{pipeline, pass, run, iteration, wall_ns, insts_before,
//!   insts_after, changed, counters}`).
//!
//! `fixpoint(max=N)[...]` groups rerun their body until no pass in it reports a change; reaching
//! `N` iterations with changes still coming is a warning and a `hit_max` flag on the group's
//! summary row. On error the pass and iteration are named and, when a dump directory is set, the
//! module the failing pass started from is written to `DIR/NNN.PASS.input.hlo`.

use std::fmt::{self, Write as _};
use std::hash::{BuildHasher, Hash, Hasher};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Instant;

use rayon::prelude::*;

use crate::json::write_string as json_string;
use crate::module::{ConstValue, InstId, Module};
use crate::pass::{AnalysisCache, Counters, Pass, PassCx, PassOptions, PassRegistry};
use crate::pipeline::{Pipeline, PipelineError, PipelineItem};

/// When the verifier runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum VerifyMode {
    /// After every pass that changed the module, and on the input.
    Each,
    /// Once, after the whole pipeline.
    End,
    /// Never.
    Off,
}

impl VerifyMode {
    /// The default: [`VerifyMode::Each`] in debug builds (tests included), else
    /// [`VerifyMode::End`].
    pub fn default_for_build() -> VerifyMode {
        if cfg!(debug_assertions) {
            VerifyMode::Each
        } else {
            VerifyMode::End
        }
    }

    /// Parses `each`, `end` or `off`.
    pub fn parse(s: &str) -> Result<VerifyMode, UnknownVerifyMode> {
        match s {
            "each" => Ok(VerifyMode::Each),
            "end" => Ok(VerifyMode::End),
            "off" => Ok(VerifyMode::Off),
            _ => Err(UnknownVerifyMode(s.to_string())),
        }
    }
}

/// A `--verify` value other than `each`, `end` or `off` ([`VerifyMode::parse`]).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("--verify takes each, end or off, found '{0}'")]
pub struct UnknownVerifyMode(pub String);

impl From<UnknownVerifyMode> for String {
    fn from(e: UnknownVerifyMode) -> String {
        e.to_string()
    }
}

/// When the pass manager compacts the module (renumbering live ids densely).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum CompactPolicy {
    /// Only at the end of the pipeline, if anything is dead.
    AtEnd,
    /// After every pass that changed the module.
    EveryChange,
    /// After a pass that leaves more than this fraction of instruction ids dead, and at the end.
    DeadFraction(f64),
}

/// How a [`PassManager`] runs.
#[derive(Clone, Debug)]
pub struct PassManagerOptions {
    /// When to verify.
    pub verify: VerifyMode,
    /// Whether to hash the module around every pass to catch a pass that reports "unchanged"
    /// but changed it (default: on in debug builds).
    pub check_changed: bool,
    /// Dump the module after passes whose name matches this regular expression.
    pub dump_after: Option<regex_lite::Regex>,
    /// Where dumps (and the input of a failing pass) go.
    pub dump_dir: Option<PathBuf>,
    /// Passes to skip (ablations).
    pub disabled: Vec<String>,
    /// When to compact.
    pub compact: CompactPolicy,
    /// The label stats rows carry as `pipeline` (default: the canonical pipeline text).
    pub label: Option<String>,
}

impl Default for PassManagerOptions {
    fn default() -> Self {
        PassManagerOptions {
            verify: VerifyMode::default_for_build(),
            check_changed: cfg!(debug_assertions),
            dump_after: None,
            dump_dir: None,
            disabled: Vec::new(),
            compact: CompactPolicy::DeadFraction(0.5),
            label: None,
        }
    }
}

/// One JSON-lines statistics row: one pass run, or the summary of a `fixpoint` group.
#[derive(Clone, Debug, PartialEq)]
pub struct StatsRow {
    /// The pipeline (its canonical text, or the label given in the options), shared by every
    /// row of a run: a pipeline of `N` passes makes `N` rows, and a copy of its text per row
    /// would take memory quadratic in `N`.
    pub pipeline: Arc<str>,
    /// The pass name (`fixpoint` for a group summary).
    pub pass: String,
    /// The run index within this pipeline run (numbering dumps too); for a group summary, the
    /// run index of its last pass.
    pub run: u32,
    /// The fixed-point iteration (1-based inside `fixpoint` groups, 0 outside).
    pub iteration: u32,
    /// Wall time of the pass in nanoseconds (for a group: of the whole group).
    pub wall_ns: u64,
    /// Live instructions before.
    pub insts_before: usize,
    /// Live instructions after.
    pub insts_after: usize,
    /// Whether the pass reported a change.
    pub changed: bool,
    /// The pass's counters, sorted by name (a group: `iterations`).
    pub counters: Vec<(String, u64)>,
    /// For a group summary: whether it stopped at `max` with changes still coming.
    pub hit_max: Option<bool>,
}

impl StatsRow {
    /// The row as one line of JSON (no trailing newline).
    pub fn to_json(&self) -> String {
        let mut o = String::with_capacity(256);
        o.push_str("{\"pipeline\":");
        json_string(&mut o, &self.pipeline);
        o.push_str(",\"pass\":");
        json_string(&mut o, &self.pass);
        let _ = write!(
            o,
            ",\"run\":{},\"iteration\":{},\"wall_ns\":{},\"insts_before\":{},\"insts_after\":{},\"changed\":{},\"counters\":{{",
            self.run, self.iteration, self.wall_ns, self.insts_before, self.insts_after, self.changed
        );
        for (i, (k, v)) in self.counters.iter().enumerate() {
            if i > 0 {
                o.push(',');
            }
            json_string(&mut o, k);
            let _ = write!(o, ":{v}");
        }
        o.push('}');
        if let Some(h) = self.hit_max {
            let _ = write!(o, ",\"hit_max\":{h}");
        }
        o.push('}');
        o
    }
}

/// Rows as JSON lines.
pub fn stats_to_jsonl(rows: &[StatsRow]) -> String {
    let mut s = String::new();
    for r in rows {
        s.push_str(&r.to_json());
        s.push('\n');
    }
    s
}

/// A pipeline run failed: which pass, which iteration, what went wrong.
#[derive(Clone, Debug)]
pub struct PassManagerError {
    /// The pass that failed (`verify-input` when the input did not verify).
    pub pass: String,
    /// The run index of the failing pass.
    pub run: u32,
    /// The fixed-point iteration (0 outside groups).
    pub iteration: u32,
    /// The error.
    pub message: String,
    /// Where the failing pass's input module was dumped, if a dump directory was set.
    pub dumped_input: Option<PathBuf>,
}

impl fmt::Display for PassManagerError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "pass '{}' (run {}, iteration {}) failed: {}",
            self.pass, self.run, self.iteration, self.message
        )?;
        if let Some(p) = &self.dumped_input {
            write!(f, "\n(its input module is in {})", p.display())?;
        }
        Ok(())
    }
}

impl std::error::Error for PassManagerError {}

enum Node {
    Pass { name: String, pass: Box<dyn Pass> },
    Fixpoint { max: u32, body: Vec<Node> },
}

/// What a finished pipeline run reports.
#[derive(Clone, Debug, Default)]
pub struct RunReport {
    /// Whether any pass changed the module.
    pub changed: bool,
    /// Warnings (fixpoint groups that hit their limit).
    pub warnings: Vec<String>,
    /// Number of pass runs.
    pub runs: u32,
}

/// Runs a pipeline of passes on modules.
pub struct PassManager {
    pipeline: Pipeline,
    nodes: Vec<Node>,
    opts: PassManagerOptions,
    label: Arc<str>,
    stats: Vec<StatsRow>,
    analyses: AnalysisCache,
    hasher: hashbrown::DefaultHashBuilder,
}

/// The verifier the pass manager, the `verify` pass and the tests use.
pub fn verify_module(m: &Module) -> Result<(), crate::passes::verify::InvalidModule> {
    crate::passes::verify::verify_module(m)
}

impl PassManager {
    /// A pass manager for `pipeline` (text in the pipeline grammar), resolved against `registry`.
    pub fn new(
        registry: &PassRegistry,
        pipeline: &str,
        opts: PassManagerOptions,
    ) -> Result<PassManager, PipelineError> {
        let p = Pipeline::parse_checked(pipeline, registry)?;
        Ok(PassManager::from_pipeline(registry, p, opts))
    }

    /// A pass manager for a checked pipeline (see [`Pipeline::check`]).
    ///
    /// # Panics
    ///
    /// If the pipeline names a pass or option the registry does not have (check it first).
    pub fn from_pipeline(
        registry: &PassRegistry,
        pipeline: Pipeline,
        opts: PassManagerOptions,
    ) -> PassManager {
        fn build(items: &[PipelineItem], reg: &PassRegistry) -> Vec<Node> {
            items
                .iter()
                .map(|it| match it {
                    PipelineItem::Pass { name, options, .. } => {
                        let (pass, _): (Box<dyn Pass>, PassOptions) = reg
                            .create(name, options)
                            .unwrap_or_else(|e| panic!("unchecked pipeline: {e}"));
                        Node::Pass {
                            name: name.clone(),
                            pass,
                        }
                    }
                    PipelineItem::Fixpoint { max, body, .. } => Node::Fixpoint {
                        max: *max,
                        body: build(body, reg),
                    },
                })
                .collect()
        }
        let nodes = build(&pipeline.items, registry);
        let label: Arc<str> = opts
            .label
            .clone()
            .unwrap_or_else(|| pipeline.to_string())
            .into();
        PassManager {
            pipeline,
            nodes,
            opts,
            label,
            stats: Vec::new(),
            analyses: AnalysisCache::new(),
            hasher: Default::default(),
        }
    }

    /// The pipeline, canonical when printed.
    pub fn pipeline(&self) -> &Pipeline {
        &self.pipeline
    }

    /// The statistics rows recorded so far (also after an error).
    pub fn stats(&self) -> &[StatsRow] {
        &self.stats
    }

    /// Takes the statistics rows recorded so far.
    pub fn take_stats(&mut self) -> Vec<StatsRow> {
        std::mem::take(&mut self.stats)
    }

    /// Runs the pipeline on `m`.
    pub fn run(&mut self, m: &mut Module) -> Result<RunReport, PassManagerError> {
        let mut st = RunState {
            report: RunReport::default(),
        };
        if self.opts.verify == VerifyMode::Each {
            if let Err(e) = verify_module(m) {
                return Err(PassManagerError {
                    pass: "verify-input".into(),
                    run: 0,
                    iteration: 0,
                    message: format!("the input module does not verify:\n{e}"),
                    dumped_input: None,
                });
            }
        }
        let mut nodes = std::mem::take(&mut self.nodes);
        let r = self.run_nodes(&mut nodes, m, 0, &mut st);
        self.nodes = nodes;
        r?;
        if m.num_live_insts() != m.inst_capacity() {
            m.compact();
        }
        if self.opts.verify != VerifyMode::Off {
            if let Err(e) = verify_module(m) {
                return Err(PassManagerError {
                    pass: "verify-end".into(),
                    run: st.report.runs,
                    iteration: 0,
                    message: format!("the output module does not verify:\n{e}"),
                    dumped_input: None,
                });
            }
        }
        Ok(st.report)
    }

    /// Runs the nodes once; returns whether any changed the module.
    fn run_nodes(
        &mut self,
        nodes: &mut [Node],
        m: &mut Module,
        iteration: u32,
        st: &mut RunState,
    ) -> Result<bool, PassManagerError> {
        let mut changed = false;
        for node in nodes.iter_mut() {
            match node {
                Node::Pass { name, pass } => {
                    if self.opts.disabled.iter().any(|d| d == name) {
                        continue;
                    }
                    changed |= self.run_one(name, pass.as_mut(), m, iteration, st)?;
                }
                Node::Fixpoint { max, body } => {
                    let t0 = Instant::now();
                    let before = m.num_live_insts();
                    let mut any = false;
                    let mut it = 0;
                    let mut last_changed = false;
                    while it < *max {
                        it += 1;
                        last_changed = self.run_nodes(body, m, it, st)?;
                        any |= last_changed;
                        if !last_changed {
                            break;
                        }
                    }
                    let hit_max = last_changed;
                    if hit_max {
                        st.report.warnings.push(format!(
                            "warning: fixpoint(max={max}) group still changing after {max} iterations"
                        ));
                    }
                    self.stats.push(StatsRow {
                        pipeline: self.label.clone(),
                        pass: "fixpoint".into(),
                        run: st.report.runs.saturating_sub(1),
                        iteration,
                        wall_ns: t0.elapsed().as_nanos() as u64,
                        insts_before: before,
                        insts_after: m.num_live_insts(),
                        changed: any,
                        counters: vec![("iterations".into(), it as u64)],
                        hit_max: Some(hit_max),
                    });
                    changed |= any;
                }
            }
        }
        Ok(changed)
    }

    fn run_one(
        &mut self,
        name: &str,
        pass: &mut dyn Pass,
        m: &mut Module,
        iteration: u32,
        st: &mut RunState,
    ) -> Result<bool, PassManagerError> {
        let run = st.report.runs;
        st.report.runs += 1;
        let input_copy = self.opts.dump_dir.as_ref().map(|_| m.clone());
        let hash_before = self
            .opts
            .check_changed
            .then(|| module_hash(m, &self.hasher));
        let before = m.num_live_insts();
        let epoch_before = m.epoch();
        let was_scheduled = m.schedule().is_some();
        let mut counters = Counters::default();
        let t0 = Instant::now();
        let result = {
            let mut cx = PassCx::new(&mut counters, &mut self.analyses, iteration);
            pass.run(m, &mut cx)
        };
        let wall_ns = t0.elapsed().as_nanos() as u64;
        let fail = |this: &Self, message: String| {
            let dumped_input = match (&this.opts.dump_dir, &input_copy) {
                (Some(dir), Some(copy)) => {
                    let p = dir.join(format!("{run:03}.{name}.input.hlo"));
                    let _ = std::fs::create_dir_all(dir);
                    std::fs::write(&p, crate::printer::print_module(copy))
                        .ok()
                        .map(|_| p)
                }
                _ => None,
            };
            PassManagerError {
                pass: name.to_string(),
                run,
                iteration,
                message,
                dumped_input,
            }
        };
        let changed = match result {
            Ok(c) => c,
            Err(e) => return Err(fail(self, e.message)),
        };
        if let Some(h0) = hash_before {
            let h1 = module_hash(m, &self.hasher);
            if !changed && h0 != h1 {
                return Err(fail(
                    self,
                    "the pass reported no change but changed the module".into(),
                ));
            }
        }
        if changed && m.epoch() == epoch_before {
            // A pass that edited the module without a Rewriter: make sure cached analyses go.
            m.bump_epoch();
        }
        // A pass that changed a scheduled module leaves the schedule stale; it is repaired here
        // (kept order, new instructions before their first users), as XLA's pass pipeline does.
        if changed && was_scheduled && m.update_schedule() {
            counters.add("schedule-updated", 1);
        }
        self.analyses.invalidate_before(m.epoch());
        if changed && self.opts.verify == VerifyMode::Each {
            if let Err(e) = verify_module(m) {
                return Err(fail(
                    self,
                    format!("the module does not verify after this pass:\n{e}"),
                ));
            }
        }
        if changed {
            let dead = m.inst_capacity() - m.num_live_insts();
            let compact = match self.opts.compact {
                CompactPolicy::AtEnd => false,
                CompactPolicy::EveryChange => dead > 0,
                CompactPolicy::DeadFraction(f) => dead as f64 > f * m.inst_capacity() as f64,
            };
            if compact {
                m.compact();
            }
        }
        if let (Some(re), Some(dir)) = (&self.opts.dump_after, &self.opts.dump_dir) {
            if re.is_match(name) {
                let p = dir.join(format!("{run:03}.{name}.hlo"));
                let _ = std::fs::create_dir_all(dir);
                if let Err(e) = std::fs::write(&p, crate::printer::print_module(m)) {
                    return Err(fail(
                        self,
                        format!("cannot write dump {}: {e}", p.display()),
                    ));
                }
            }
        }
        self.stats.push(StatsRow {
            pipeline: self.label.clone(),
            pass: name.to_string(),
            run,
            iteration,
            wall_ns,
            insts_before: before,
            insts_after: m.num_live_insts(),
            changed,
            counters: counters
                .sorted()
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            hit_max: None,
        });
        st.report.changed |= changed;
        Ok(changed)
    }
}

struct RunState {
    report: RunReport,
}

/// A hash of everything a pass can change: every live instruction's columns (opcode, shape,
/// layout, parent, operands, attributes, name, constant value), every live computation (name,
/// root, parameters), the entry and the header. Equal modules hash equal; the pass manager
/// compares hashes to catch a pass that misreports "unchanged".
pub fn module_hash(m: &Module, builder: &(impl BuildHasher + Sync)) -> u64 {
    let ids = m.live_ids();
    let chunk_hashes: Vec<u64> = ids
        .par_chunks(4096)
        .map(|chunk| {
            let mut h = builder.build_hasher();
            for &i in chunk {
                hash_inst(m, i, &mut h);
            }
            h.finish()
        })
        .collect();
    let mut h = builder.build_hasher();
    chunk_hashes.hash(&mut h);
    ids.len().hash(&mut h);
    for c in m.computations() {
        c.hash(&mut h);
        m.comp_name(c).hash(&mut h);
        m.root(c).hash(&mut h);
        m.params(c).hash(&mut h);
    }
    m.entry().hash(&mut h);
    m.name.hash(&mut h);
    m.header_attrs.hash(&mut h);
    if let Some(s) = m.schedule() {
        for c in s.computations() {
            c.hash(&mut h);
            s.sequence(c).hash(&mut h);
        }
    }
    h.finish()
}

fn hash_inst(m: &Module, i: InstId, h: &mut impl Hasher) {
    i.hash(h);
    m.opcode(i).hash(h);
    m.shape_id(i).hash(h);
    m.layout_id(i).hash(h);
    m.parent(i).hash(h);
    m.operands(i).hash(h);
    m.attrs(i).hash(h);
    m.name(i).hash(h);
    match m.constant(i) {
        Some(ConstValue::Literal(l)) => hash_literal(l, h),
        Some(ConstValue::Elided) => 1u8.hash(h),
        None => 0u8.hash(h),
    }
}

fn hash_literal(l: &crate::Literal, h: &mut impl Hasher) {
    match l {
        crate::Literal::Array(a) => {
            a.shape.hash(h);
            a.data.hash(h);
        }
        crate::Literal::Tuple(es) => {
            es.len().hash(h);
            for e in es {
                hash_literal(e, h);
            }
        }
    }
}
