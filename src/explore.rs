//! Pass-order exploration: random pipelines drawn from a set of passes, each result checked
//! against the reference evaluator, one row per order (`axle explore`).
//!
//! Every order is a pipeline of `length` passes drawn with replacement (deterministically from
//! the seed) from the given passes, drawn only when its turn comes; rows go to a sink as they
//! are made ([`explore_each`]), so memory stays that of one order however many are asked for. Each runs on a fresh copy of the module with the verifier at
//! the end; the row records the pipeline, the instruction count, the compile time, the cost
//! model's estimate and whether the evaluator's results agree with the input module's on
//! generated inputs (bit for bit: every pass is exact). Row 0 is the empty pipeline, the
//! baseline the others compare with.
//!
//! With [`ExploreOptions::measure`] every order's result is also compiled on a backend exactly
//! as the order left it (no default pipeline on top) and timed as `axle bench` times it (fresh
//! outputs, median of the timed runs after the warm-up), so each row holds the measured run
//! time beside the cost model's estimate: the data to check the cost model against real time.
//! A module the backend cannot compile gets `measure_error` in its row, not a failed command.

use std::fmt::Write as _;
use std::time::Instant;

use axle_analysis::equivalence::SplitMix;
use axle_analysis::{same_results, Cost, Equivalence};
use axle_ir::{Module, PassManagerOptions, Tolerance, VerifyMode};

#[cfg(feature = "cli")]
use crate::bench::{bench_module, BenchOptions, OutputPolicy};
use crate::passes::{observe, optimize};

/// How to measure every order (`axle explore --measure`).
#[derive(Clone, Debug)]
pub struct MeasureOptions {
    /// The backend to compile and run on.
    pub backend: String,
    /// Timed runs per order.
    pub repeat: usize,
    /// Untimed runs before them.
    pub warmup: usize,
}

impl Default for MeasureOptions {
    fn default() -> Self {
        MeasureOptions {
            backend: "cpu".into(),
            repeat: 5,
            warmup: 1,
        }
    }
}

/// What measuring one order found.
#[derive(Clone, Debug)]
pub struct Measured {
    /// The backend.
    pub backend: String,
    /// Code generation time (the order's passes are not in it), in nanoseconds.
    pub codegen_ns: u64,
    /// The median run time with fresh outputs, in nanoseconds.
    pub run_ns: u64,
    /// The fastest run, in nanoseconds.
    pub run_min_ns: u64,
    /// Timed runs.
    pub runs: usize,
    /// Temporary bytes per run, when the backend knows.
    pub temp_bytes: Option<u64>,
}

/// What to explore.
#[derive(Clone, Debug)]
pub struct ExploreOptions {
    /// The passes pipelines are drawn from (names, or any pipeline text such as
    /// `fixpoint(max=4)[algsimp,dce]`, used as one step).
    pub passes: Vec<String>,
    /// How many random orders.
    pub orders: usize,
    /// The seed.
    pub seed: u64,
    /// Passes per order (default: twice the number of passes given).
    pub length: Option<usize>,
    /// How many generated input sets each result is checked on (0: no check).
    pub input_sets: usize,
    /// Compile and time every order on a backend (`None`: estimate only).
    pub measure: Option<MeasureOptions>,
}

/// How an order's result compared with the input module under the evaluator.
#[derive(Clone, Debug, PartialEq)]
pub enum Check {
    /// Identical results on every input set.
    Same,
    /// The evaluator cannot run the input module (an unsupported op): not checked.
    NotComparable,
    /// Not checked (`input_sets` is 0).
    Skipped,
    /// The results differ, or the result does not evaluate: a bug in a pass.
    Differs(String),
}

impl Check {
    fn word(&self) -> &'static str {
        match self {
            Check::Same => "same",
            Check::NotComparable => "n/a",
            Check::Skipped => "-",
            Check::Differs(_) => "DIFFERS",
        }
    }
}

/// One explored order.
#[derive(Clone, Debug)]
pub struct ExploreRow {
    /// Row number (0 is the empty pipeline).
    pub order: usize,
    /// The canonical pipeline.
    pub pipeline: String,
    /// Live instructions before.
    pub insts_before: usize,
    /// Live instructions after.
    pub insts_after: usize,
    /// Wall time of the pipeline, in nanoseconds.
    pub compile_ns: u64,
    /// The cost model's estimate after.
    pub cost: Cost,
    /// The evaluator check.
    pub check: Check,
    /// The error, when the pipeline failed (a pass error or a verifier failure).
    pub error: Option<String>,
    /// The measurement, when asked for: the run time, or why the backend could not compile or
    /// run the order's result.
    pub measured: Option<Result<Measured, String>>,
}

/// `s` as a JSON string literal.
fn json_str(s: &str) -> String {
    let mut o = String::new();
    axle_ir::json::write_string(&mut o, s);
    o
}

impl ExploreRow {
    /// The row as one line of JSON.
    pub fn to_json(&self) -> String {
        let mut o = format!(
            "{{\"order\":{},\"pipeline\":{},\"insts_before\":{},\"insts_after\":{},\"compile_ns\":{},\"flops\":{},\"transcendentals\":{},\"bytes\":{},\"check\":{}",
            self.order,
            json_str(&self.pipeline),
            self.insts_before,
            self.insts_after,
            self.compile_ns,
            self.cost.flops,
            self.cost.transcendentals,
            self.cost.bytes,
            json_str(self.check.word()),
        );
        if let Check::Differs(d) = &self.check {
            let _ = write!(o, ",\"difference\":{}", json_str(d));
        }
        if let Some(e) = &self.error {
            let _ = write!(o, ",\"error\":{}", json_str(e));
        }
        match &self.measured {
            Some(Ok(r)) => {
                let _ = write!(
                    o,
                    ",\"backend\":{},\"codegen_ns\":{},\"run_ns\":{},\"run_min_ns\":{},\"runs\":{}",
                    json_str(&r.backend),
                    r.codegen_ns,
                    r.run_ns,
                    r.run_min_ns,
                    r.runs
                );
                if let Some(t) = r.temp_bytes {
                    let _ = write!(o, ",\"temp_bytes\":{t}");
                }
            }
            Some(Err(e)) => {
                let _ = write!(o, ",\"measure_error\":{}", json_str(e));
            }
            None => {}
        }
        o.push('}');
        o
    }
}

/// The pipelines `explore` runs, drawn one at a time: row 0 empty, then `orders` random ones.
/// Nothing is drawn ahead, so any number of orders takes the memory of one.
pub fn pipelines(opts: &ExploreOptions) -> impl Iterator<Item = String> + '_ {
    let mut rng = SplitMix::new(opts.seed);
    let len = opts.length.unwrap_or(2 * opts.passes.len()).max(1);
    let n = opts.passes.len().max(1) as u64;
    std::iter::once(String::new()).chain((0..opts.orders).map(move |_| {
        let mut text = String::new();
        for k in 0..len {
            if k > 0 {
                text.push(',');
            }
            text.push_str(&opts.passes[rng.below(n) as usize]);
        }
        text
    }))
}

/// The pipelines `explore` runs (see [`pipelines`]), collected.
pub fn draw_pipelines(opts: &ExploreOptions) -> Vec<String> {
    pipelines(opts).collect()
}

/// Runs the exploration on `m`, collecting the rows (see [`explore_each`]).
pub fn explore(m: &Module, opts: &ExploreOptions) -> Result<Vec<ExploreRow>, String> {
    let mut rows = Vec::new();
    explore_each(m, opts, |r| {
        rows.push(r);
        Ok(())
    })?;
    Ok(rows)
}

/// Runs the exploration on `m`, handing each row to `sink` as soon as it is made (a sink error
/// stops the exploration), so output streams and memory does not grow with the number of
/// orders.
pub fn explore_each(
    m: &Module,
    opts: &ExploreOptions,
    mut sink: impl FnMut(ExploreRow) -> Result<(), String>,
) -> Result<(), String> {
    if opts.passes.is_empty() {
        return Err("--passes-from needs at least one pass".into());
    }
    if opts.length == Some(0) {
        return Err("--length must be at least 1".into());
    }
    for p in &opts.passes {
        crate::passes::canonical_pipeline(p).map_err(|e| e.render())?;
    }
    let before = m.num_live_insts();
    for (order, text) in pipelines(opts).enumerate() {
        let canon = crate::passes::canonical_pipeline(&text).map_err(|e| e.render())?;
        let mut out = m.clone();
        let popts = PassManagerOptions {
            verify: VerifyMode::End,
            check_changed: false,
            ..Default::default()
        };
        let t0 = Instant::now();
        let result = optimize(&mut out, &text, popts);
        let compile_ns = t0.elapsed().as_nanos() as u64;
        let error = result.err().map(|e| e.to_string());
        let check = if error.is_some() || opts.input_sets == 0 {
            Check::Skipped
        } else {
            match same_results(m, &out, opts.seed, opts.input_sets, Tolerance::Exact) {
                Ok(Equivalence::Same(_)) => Check::Same,
                Ok(Equivalence::NotComparable(_)) => Check::NotComparable,
                Err(d) => Check::Differs(d),
            }
        };
        let obs = observe(&out);
        let measured = match (&opts.measure, &error) {
            (Some(mo), None) => Some(measure(&out, mo, opts.seed)),
            _ => None,
        };
        sink(ExploreRow {
            order,
            pipeline: canon,
            insts_before: before,
            insts_after: obs.insts,
            compile_ns,
            cost: obs.cost,
            check,
            error,
            measured,
        })?;
    }
    Ok(())
}

/// The header line of [`explore_table`]; `measured` adds the run-time column.
pub fn explore_table_header(measured: bool) -> String {
    format!(
        "{:>5} {:>9} {:>11} {:>12} {:>12} {}{:>8}  pipeline\n",
        "order",
        "insts",
        "compile_ms",
        "mflops",
        "mbytes",
        if measured {
            format!("{:>11} ", "run_ms")
        } else {
            String::new()
        },
        "check"
    )
}

/// One line of [`explore_table`]; `measured` adds the run-time column (`n/a` when the backend
/// could not run the order, `-` when it was not measured).
pub fn explore_table_row(r: &ExploreRow, measured: bool) -> String {
    let run = match (&r.measured, measured) {
        (_, false) => String::new(),
        (Some(Ok(t)), true) => format!("{:>11.3} ", t.run_ns as f64 / 1e6),
        (Some(Err(_)), true) => format!("{:>11} ", "n/a"),
        (None, true) => format!("{:>11} ", "-"),
    };
    format!(
        "{:>5} {:>9} {:>11.3} {:>12.3} {:>12.3} {run}{:>8}  {}\n",
        r.order,
        r.insts_after,
        r.compile_ns as f64 / 1e6,
        r.cost.flops / 1e6,
        r.cost.bytes / 1e6,
        if r.error.is_some() {
            "ERROR"
        } else {
            r.check.word()
        },
        if r.pipeline.is_empty() {
            "(none)"
        } else {
            &r.pipeline
        }
    )
}

/// Without the `cli` feature there is no `axle bench` driver (its generated inputs need `rand`):
/// every row says so instead of a measurement.
#[cfg(not(feature = "cli"))]
fn measure(_: &Module, _: &MeasureOptions, _: u64) -> Result<Measured, String> {
    Err("measuring needs axle's `cli` feature (the bench driver)".into())
}

/// Compiles `m` on the backend as it is and times it with fresh outputs.
#[cfg(feature = "cli")]
fn measure(m: &Module, mo: &MeasureOptions, seed: u64) -> Result<Measured, String> {
    let r = bench_module(
        m.clone(),
        &BenchOptions {
            backend: mo.backend.clone(),
            repeat: mo.repeat.max(1),
            warmup: mo.warmup,
            seed,
            policies: vec![OutputPolicy::Fresh],
            profile: false,
            trace: false,
            pipeline: Some(crate::backend::NO_PIPELINE.to_string()),
            // Off, so that `codegen_ns` is a real compilation every time.
            cache: crate::CacheMode::Off,
            warm_compile: false,
        },
    )?;
    let t = &r.timings[0];
    Ok(Measured {
        backend: mo.backend.clone(),
        codegen_ns: r.compile_time.as_nanos() as u64,
        run_ns: t.median().as_nanos() as u64,
        run_min_ns: t.min().as_nanos() as u64,
        runs: t.runs.len(),
        temp_bytes: r.temp_bytes,
    })
}

/// The rows as a table: order, instructions, compile time, cost, measured run time (when
/// measured), check, pipeline.
pub fn explore_table(rows: &[ExploreRow]) -> String {
    let measured = rows.iter().any(|r| r.measured.is_some());
    let mut out = explore_table_header(measured);
    for r in rows {
        out.push_str(&explore_table_row(r, measured));
    }
    out
}
