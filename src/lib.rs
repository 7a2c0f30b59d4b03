//! Axle: an ML compiler for XLA's HLO, rebuilt on an ECS-style arena IR.
//!
//! This facade re-exports the IR and analysis crates and holds the backend plug-in interface
//! ([`backend`]), the built-in backends ([`interpreter`], [`cpu`]), `axle bench` ([`mod@bench`]),
//! the `run` driver ([`run`]), the full pass registry and standard pipelines ([`passes`]),
//! pass-order exploration ([`explore`]) and what the `axle` command-line tool shares with library
//! users.
#![deny(missing_docs)]

pub mod backend;
pub mod bench;
pub mod cpu;
pub mod elided;
pub mod explore;
pub mod interpreter;
pub mod passes;
pub mod run;

pub use axle_analysis as analysis;
pub use axle_fusion as fusion;
pub use axle_ir as ir;

use std::fmt::Write;
use std::time::Duration;

use axle_ir::Module;

/// Verifies a module; on failure returns every error, one per line.
pub fn verify_module(m: &Module) -> Result<(), String> {
    axle_ir::verify::verify(m).map_err(|e| e.to_string())
}

/// Verifies a parsed module; on failure returns every error rendered against `file`'s lines as
/// `FILE:LINE:COL: error: MESSAGE`, the source line and a caret.
pub fn verify_for_cli(m: &Module, text: &str, file: &str) -> Result<(), String> {
    let errs = match axle_ir::verify::verify(m) {
        Ok(()) => return Ok(()),
        Err(e) => e,
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut out = String::new();
    for e in &errs.errors {
        match e.loc {
            Some(l) if l.line >= 1 && (l.line as usize) <= lines.len() => {
                let src = lines[l.line as usize - 1];
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
    Err(out)
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
        let _ = writeln!(
            out,
            "  {:<40} {:>9}{tag}",
            m.comp_name(c),
            by_comp[c.index()].len()
        );
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
