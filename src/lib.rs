//! Axle: an ML compiler for XLA's HLO, rebuilt on an ECS-style arena IR.
//!
//! This facade re-exports the IR and analysis crates and holds the embedding API ([`compile`],
//! [`Compiled`], [`Array`], [`ArrayRef`], [`Error`]), the backend plug-in interface
//! ([`backend`]), the built-in backends ([`interpreter`], [`cpu`], and [`nvptx`]'s `nvptx` and
//! `nvptx-sim`), the compilation cache ([`cache`]), `axle bench` ([`mod@bench`]), `axle
//! buffers` ([`mod@buffers`]), the `run` driver ([`run`]), the full pass registry and standard
//! pipelines ([`passes`]), pass-order exploration ([`explore`]), module drawings ([`graph`])
//! and what the `axle` command-line tool shares with library users.
//!
//! # Embedding Axle
//!
//! Build a module (or parse HLO text with [`compile_text`]), compile it once on a backend, then
//! run it as often as needed, from any number of threads. Arguments are borrowed views of your
//! own memory ([`ArrayRef`]: element type and dimensions checked against the data when made, and
//! against the parameters at every run); results go into arrays you own and reuse ([`Array`]),
//! read back in place as typed slices.
//!
//! ```
//! use axle::ir::builder::ModuleBuilder;
//! use axle::ir::{ElementType::F32, Shape};
//! use axle::{ArrayRef, CompileOptions};
//!
//! # fn main() -> Result<(), axle::Error> {
//! // Build: y = softmax(relu(x @ w + b)), with the bias broadcast numpy-style.
//! let mut b = ModuleBuilder::new("layer");
//! let mut c = b.computation("main");
//! let x = c.parameter(0, Shape::array(F32, &[2, 3]), "x")?;
//! let w = c.parameter(1, Shape::array(F32, &[3, 4]), "w")?;
//! let bias = c.parameter(2, Shape::array(F32, &[4]), "b")?;
//! let h = c.matmul(x, w)?;
//! let h = c.add_broadcast(h, bias)?;
//! let h = c.relu(h)?;
//! let y = c.softmax(h, -1)?;
//! let main = c.finish(y)?;
//! b.entry(main);
//! let module = b.build()?;
//!
//! // Compile once (one thread, no cache: the library's defaults but the thread count).
//! let exe = axle::compile("cpu", module, &CompileOptions::default().threads(1))?;
//!
//! // Transfer: borrow the caller's slices; nothing is copied.
//! let xs = [1.0f32, 2.0, 3.0, -1.0, -2.0, -3.0];
//! let ws = [0.5f32; 12];
//! let bs = [0.0f32, 1.0, 2.0, 3.0];
//! let args = [
//!     ArrayRef::new(&xs, &[2, 3])?,
//!     ArrayRef::new(&ws, &[3, 4])?,
//!     ArrayRef::vector(&bs),
//! ];
//!
//! // Run into reusable outputs, and read them back in place.
//! let mut outs = exe.alloc_outputs()?;
//! exe.run(&args, &mut outs)?;
//! let y: &[f32] = outs[0].as_slice()?;
//! assert_eq!(outs[0].dims(), &[2, 4]);
//! for row in y.chunks(4) {
//!     assert!((row.iter().sum::<f32>() - 1.0).abs() < 1e-6);
//! }
//!
//! // A wrong argument is an error value, not a reinterpretation of its bytes.
//! let ints = [0i32; 4];
//! let bad = [args[0].clone(), args[1].clone(), ArrayRef::vector(&ints)];
//! let e = exe.run(&bad, &mut outs).unwrap_err();
//! assert_eq!(e.to_string(), "cpu: argument 2: f32[4] expected, s32[4] given");
//! # Ok(())
//! # }
//! ```
//!
//! [`CompileOptions`] carries the typed options every backend understands (threads,
//! optimization level, a pass pipeline, the compilation cache: [`CacheMode::Dir`] or
//! [`CacheMode::from_env`] for `AXLE_CACHE_DIR`). With the `ndarray` feature, [`Array`] and
//! [`ArrayRef`] convert to and from `ndarray` views. `examples/embed.rs` is the same path as a
//! program.
//!
//! # Features
//!
//! - `cli` (default): the `axle` command-line tool and the modules only it needs, [`run`] and
//!   [`mod@bench`] (with `clap`, `rand`, `tempfile`, `flate2` and `indicatif`). Embedders use
//!   `default-features = false`: the library alone, which needs none of those crates.
//! - `mpi` (default): `axle run` under `mpirun -n N`, one device per rank ([`mod@mpi`], with
//!   the `cli` feature); links the system's MPI library (Open MPI).
//! - `ndarray`: conversions between [`Array`]/[`ArrayRef`] and `ndarray` views.
#![deny(missing_docs)]

pub mod array;
pub mod backend;
pub mod backends;
#[cfg(feature = "cli")]
pub mod bench;
pub mod buffers;
pub mod cache;
pub mod compiled;
pub mod cpu;
#[cfg(feature = "cli")]
pub mod devices;
#[cfg(feature = "cli")]
pub mod elided;
pub mod error;
pub mod explore;
pub mod graph;
pub mod interpreter;
#[cfg(all(feature = "cli", feature = "mpi"))]
pub mod mpi;
pub mod nvptx;
pub mod passes;
pub mod phases;
#[cfg(feature = "cli")]
pub mod run;
#[cfg(feature = "cli")]
pub mod trace;

pub use axle_analysis as analysis;
pub use axle_codegen_cpu as codegen_cpu;
pub use axle_fusion as fusion;
pub use axle_ir as ir;
pub use axle_schedule as schedule;

pub use array::{Array, ArrayError, ArrayRef, Element};
pub use backend::{CacheMode, CompileOptions, OptLevel};
pub use compiled::{compile, compile_text, Compiled};
pub use error::Error;
pub use half::{bf16, f16};

use std::fmt::Write;
use std::time::Duration;

use axle_ir::Module;

/// Verifies a module; on failure returns every error (its text: one per line).
pub fn verify_module(m: &Module) -> Result<(), axle_ir::VerifyErrors> {
    axle_ir::verify::verify(m)
}

/// Verifies a parsed module; on failure returns every error rendered against `file`'s lines as
/// `FILE:LINE:COL: error: MESSAGE`, the source line and a caret.
pub fn verify_for_cli(m: &Module, text: &str, file: &str) -> Result<(), String> {
    axle_ir::verify::verify(m).map_err(|e| render_errors(&e, text, file))
}

/// Checks that a verified, parsed module is one a backend can run
/// ([`axle_ir::check_runnable`]), rendering errors as [`verify_for_cli`] does.
pub fn check_runnable_for_cli(m: &Module, text: &str, file: &str) -> Result<(), String> {
    axle_ir::check_runnable(m).map_err(|e| render_errors(&e, text, file))
}

/// Renders verifier errors against the source text: `FILE:LINE:COL: error: MESSAGE`, the source
/// line and a caret where the error has a location, `FILE: error: MESSAGE` otherwise.
pub fn render_errors(errs: &axle_ir::VerifyErrors, text: &str, file: &str) -> String {
    // Only the lines errors point at are looked up, in one pass over the text.
    let mut wanted: Vec<u32> = errs
        .errors
        .iter()
        .filter_map(|e| e.loc.map(|l| l.line))
        .collect();
    wanted.sort_unstable();
    wanted.dedup();
    let mut lines: std::collections::HashMap<u32, &str> = std::collections::HashMap::new();
    let mut next = wanted.iter().peekable();
    for (i, line) in text.lines().enumerate() {
        let n = i as u64 + 1;
        while next.peek().is_some_and(|&&w| (w as u64) < n) {
            next.next();
        }
        match next.peek() {
            Some(&&w) if w as u64 == n => {
                lines.insert(w, line);
                next.next();
            }
            Some(_) => {}
            None => break,
        }
    }
    let mut out = String::new();
    for e in &errs.errors {
        match e.loc.and_then(|l| lines.get(&l.line).map(|src| (l, src))) {
            Some((l, src)) if l.line >= 1 => {
                let caret = " ".repeat(l.col.saturating_sub(1) as usize);
                let _ = writeln!(
                    out,
                    "{file}:{}:{}: error: {}\n{src}\n{caret}^",
                    l.line, l.col, e.message
                );
            }
            _ => {
                let _ = writeln!(out, "{file}: error: {}", e.message);
            }
        }
    }
    out
}

/// The `axle stats` report: instruction counts per opcode and per computation, and timings.
pub fn stats_report(m: &Module, source_bytes: usize, parse: Duration, verify: Duration) -> String {
    let mut out = String::new();
    let n = m.num_live_insts();
    let comps = m.computations();
    let _ = writeln!(
        out,
        "module {}: {} instructions in {} computations",
        m.name,
        n,
        comps.len()
    );
    let mut per_op = vec![0usize; axle_ir::Opcode::ALL.len()];
    for i in m.live_ids() {
        per_op[m.opcode(i) as usize] += 1;
    }
    let mut ops: Vec<(usize, axle_ir::Opcode)> = axle_ir::Opcode::ALL
        .iter()
        .map(|&o| (per_op[o as usize], o))
        .filter(|(c, _)| *c > 0)
        .collect();
    ops.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let _ = writeln!(out, "\ninstructions per opcode:");
    for (c, o) in ops {
        let _ = writeln!(out, "  {:<28} {c:>9}", o.name());
    }
    let by_comp = m.insts_by_comp();
    let _ = writeln!(out, "\ninstructions per computation:");
    for c in comps {
        let tag = if c == m.entry() { " (ENTRY)" } else { "" };
        let _ = writeln!(out, "  {:<40} {:>9}{tag}", m.comp_name(c), by_comp[c].len());
    }
    let secs = (parse + verify).as_secs_f64();
    let _ = writeln!(out, "\nsource: {source_bytes} bytes");
    let _ = writeln!(out, "parse:  {:.3} ms", parse.as_secs_f64() * 1e3);
    let _ = writeln!(out, "verify: {:.3} ms", verify.as_secs_f64() * 1e3);
    if secs > 0.0 {
        let _ = writeln!(
            out,
            "rate:   {:.0} instructions/s (parse + verify)",
            n as f64 / secs
        );
    }
    let _ = writeln!(
        out,
        "memory: {} bytes of IR ({:.1} bytes/instruction), names {} bytes",
        m.ir_bytes(),
        m.ir_bytes() as f64 / n.max(1) as f64,
        m.name_bytes()
    );
    out
}
