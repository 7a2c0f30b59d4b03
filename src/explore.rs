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

use std::fmt::Write as _;
use std::time::Instant;

use axle_analysis::equivalence::SplitMix;
use axle_analysis::{same_results, Cost, Equivalence};
use axle_ir::{Module, PassManagerOptions, Tolerance, VerifyMode};

use crate::passes::{observe, optimize};

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
}

fn json_str(s: &str) -> String {
    let mut o = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => o.push_str("\\\""),
            '\\' => o.push_str("\\\\"),
            '\n' => o.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(o, "\\u{:04x}", c as u32);
            }
            c => o.push(c),
        }
    }
    o.push('"');
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
        sink(ExploreRow {
            order,
            pipeline: canon,
            insts_before: before,
            insts_after: obs.insts,
            compile_ns,
            cost: obs.cost,
            check,
            error,
        })?;
    }
    Ok(())
}

/// The header line of [`explore_table`].
pub fn explore_table_header() -> String {
    format!(
        "{:>5} {:>9} {:>11} {:>12} {:>12} {:>8}  pipeline\n",
        "order", "insts", "compile_ms", "mflops", "mbytes", "check"
    )
}

/// One line of [`explore_table`].
pub fn explore_table_row(r: &ExploreRow) -> String {
    format!(
        "{:>5} {:>9} {:>11.3} {:>12.3} {:>12.3} {:>8}  {}\n",
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

/// The rows as a table: order, instructions, compile time, cost, check, pipeline.
pub fn explore_table(rows: &[ExploreRow]) -> String {
    let mut out = explore_table_header();
    for r in rows {
        out.push_str(&explore_table_row(r));
    }
    out
}
