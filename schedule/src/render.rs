//! Printing a buffer assignment: the text report of `axle buffers`, the same as JSON, and an
//! SVG timeline of the temporary block (x: schedule position, y: offset, one box per buffer,
//! hovering shows the instructions it holds), the picture of XLA's memory-usage report.

use std::fmt::Write;

use serde_json::{json, Value as Json};

use axle_ir::{BufferId, Module};

use crate::buffer_assignment::{Buffer, BufferAssignment, Memory, Role};
use crate::memory_schedule::Choice;

fn memory_name(a: &BufferAssignment, k: usize) -> String {
    let b = &a.buffers()[k];
    match b.memory {
        Memory::Param(k) => format!("param leaf {k}"),
        Memory::Constant { .. } => "constant".into(),
        Memory::Output { leaf, .. } if a.is_output(BufferId::new(k)) => format!("output {leaf}"),
        Memory::Output { leaf, .. } => format!("in output {leaf}"),
        Memory::Arena { .. } => "scratch arena".into(),
        Memory::Temp { .. } => match b.role {
            Role::Scratch => "temp (scratch)".into(),
            Role::Staging => "temp (staging)".into(),
            _ => "temp".into(),
        },
    }
}

fn offset(b: &Buffer) -> Option<u64> {
    match b.memory {
        Memory::Temp { offset } | Memory::Output { offset, .. } | Memory::Arena { offset } => {
            Some(offset)
        }
        _ => None,
    }
}

/// The instructions whose values buffer `b` holds (`%name` or `%name{leaf}`), at most `max`.
pub fn holders(m: &Module, a: &BufferAssignment, b: BufferId, max: usize) -> Vec<String> {
    let buf = a.buffer(b);
    let mut out: Vec<String> = Vec::new();
    for &v in &buf.values {
        let val = a.program().value(v);
        let n = m.name(val.inst);
        let name = if n.is_empty() {
            format!("%{}.{}", m.opcode(val.inst).name(), val.inst.index())
        } else {
            format!("%{n}")
        };
        let s = if a.program().leaves(val.inst).len() > 1 {
            format!("{name}{{{}}}", val.leaf)
        } else {
            name
        };
        if !out.contains(&s) {
            out.push(s);
        }
        if out.len() >= max {
            break;
        }
    }
    out
}

/// The text report: the scheduler chosen per computation (when `choices` is given), the block
/// and its statistics, then every buffer with its memory, offset, size and live range.
pub fn text(m: &Module, a: &BufferAssignment, choices: Option<&[Choice]>) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "module {}", m.name);
    if let Some(ch) = choices {
        let _ = writeln!(
            out,
            "schedule (peak of live bytes per heuristic; * chosen):"
        );
        for c in ch {
            let peaks: Vec<String> = c
                .peaks
                .iter()
                .map(|(h, p)| format!("{}{}={p}", if *h == c.chosen { "*" } else { "" }, h.name()))
                .collect();
            let _ = writeln!(out, "  {:<40} {}", m.comp_name(c.comp), peaks.join(" "));
        }
    } else {
        let _ = writeln!(out, "schedule: the module's own (is_scheduled=true)");
    }
    let pct = if a.temp_bytes > 0 {
        100.0 * a.fragmentation_bytes() as f64 / a.temp_bytes as f64
    } else {
        0.0
    };
    let tried: Vec<String> = a
        .tried
        .iter()
        .map(|(s, r)| match r {
            Some(b) => format!("{}={b}", s.name()),
            None => format!("{}=gave up", s.name()),
        })
        .collect();
    let _ = writeln!(
        out,
        "temp: {} bytes (peak live {} bytes, fragmentation {} bytes = {pct:.1}%), strategy {} ({})",
        a.temp_bytes,
        a.peak_bytes,
        a.fragmentation_bytes(),
        a.strategy.name(),
        tried.join(", ")
    );
    let _ = writeln!(
        out,
        "scratch arena: {} bytes (GEMM packing and sort planes, beside the temporary block)",
        a.arena_bytes
    );
    let moves = a.output_moves().len();
    let _ = writeln!(
        out,
        "outputs: {} bytes; shared buffers: {} in place, {} loop state in, {} loop state back, {} branch outputs; {} output copies",
        a.output_bytes(),
        a.merged[0],
        a.merged[1],
        a.merged[2],
        a.merged[3],
        moves
    );
    let _ = writeln!(
        out,
        "buffers:\n  {:>6}  {:<16} {:>12} {:>12}  {:<17} holds",
        "id", "memory", "offset", "size", "live"
    );
    for (k, b) in a.buffers().iter().enumerate() {
        let off = offset(b).map_or("-".to_string(), |o| o.to_string());
        let live = format!("[{}, {}]", b.span.0, b.span.1);
        let h = holders(m, a, BufferId::new(k), 6).join(" ");
        let _ = writeln!(
            out,
            "  {:>6}  {:<16} {:>12} {:>12}  {:<17} {h}",
            format!("b{k}"),
            memory_name(a, k),
            off,
            b.size,
            live
        );
    }
    out
}

/// The report as JSON.
pub fn json(m: &Module, a: &BufferAssignment, choices: Option<&[Choice]>) -> Json {
    let schedule: Json = match choices {
        Some(ch) => ch
            .iter()
            .map(|c| {
                json!({
                    "computation": m.comp_name(c.comp),
                    "chosen": c.chosen.name(),
                    "peaks": c.peaks.iter().map(|(h, p)| (h.name().to_string(), json!(p))).collect::<serde_json::Map<_, _>>(),
                })
            })
            .collect(),
        None => Json::String("given".into()),
    };
    let buffers: Vec<Json> = a
        .buffers()
        .iter()
        .enumerate()
        .map(|(k, b)| {
            json!({
                "id": k,
                "memory": memory_name(a, k),
                "offset": offset(b),
                "size": b.size,
                "live": [b.span.0, b.span.1],
                "holds": holders(m, a, BufferId::new(k), 64),
            })
        })
        .collect();
    json!({
        "module": m.name,
        "schedule": schedule,
        "temp_bytes": a.temp_bytes,
        "arena_bytes": a.arena_bytes,
        "peak_bytes": a.peak_bytes,
        "fragmentation_bytes": a.fragmentation_bytes(),
        "output_bytes": a.output_bytes(),
        "strategy": a.strategy.name(),
        "strategies": a.tried.iter().map(|(s, r)| (s.name().to_string(), json!(r))).collect::<serde_json::Map<_, _>>(),
        "shared": {
            "in_place": a.merged[0],
            "loop_in": a.merged[1],
            "loop_back": a.merged[2],
            "branch_out": a.merged[3],
        },
        "output_copies": a.output_moves().len(),
        "buffers": buffers,
    })
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// The SVG timeline of the temporary block.
pub fn svg(m: &Module, a: &BufferAssignment) -> String {
    let (w, h) = (1200.0f64, 600.0f64);
    let (left, top, bottom) = (80.0, 30.0, 40.0);
    let positions = a.program().positions().max(1) as f64;
    let block = a.temp_bytes.max(1) as f64;
    let sx = (w - left - 20.0) / positions;
    let sy = (h - top - bottom) / block;
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" font-family="monospace" font-size="11">"#
    );
    let _ = writeln!(
        out,
        r#"<text x="{left}" y="18">{}: {} temporary bytes (peak live {}), {} positions</text>"#,
        escape(&m.name),
        a.temp_bytes,
        a.peak_bytes,
        a.program().positions()
    );
    let _ = writeln!(
        out,
        r##"<rect x="{left}" y="{top}" width="{}" height="{}" fill="#f8f8f8" stroke="#999"/>"##,
        w - left - 20.0,
        h - top - bottom
    );
    for k in 0..=4 {
        let y = top + (h - top - bottom) * k as f64 / 4.0;
        let bytes = (block * k as f64 / 4.0) as u64;
        let _ = writeln!(out, r#"<text x="4" y="{:.1}">{bytes}</text>"#, y + 4.0);
    }
    let _ = writeln!(
        out,
        r#"<text x="{left}" y="{:.1}">schedule position → (y: offset in the temporary block)</text>"#,
        h - 10.0
    );
    for (k, b) in a.buffers().iter().enumerate() {
        let Memory::Temp { offset } = b.memory else {
            continue;
        };
        if b.size == 0 {
            continue;
        }
        let x = left + b.span.0 as f64 * sx;
        let bw = ((b.span.1 - b.span.0 + 1) as f64 * sx).max(0.5);
        let y = top + offset as f64 * sy;
        let bh = (b.size as f64 * sy).max(0.5);
        let fill = match b.role {
            Role::Scratch => "#e8a33d",
            Role::Staging => "#c44",
            _ => ["#4c78a8", "#59a14f", "#76b7b2", "#9c755f", "#b07aa1"][k % 5],
        };
        let title = format!(
            "b{k}: {} bytes at {offset}, live [{}, {}]: {}",
            b.size,
            b.span.0,
            b.span.1,
            holders(m, a, BufferId::new(k), 8).join(" ")
        );
        let _ = writeln!(
            out,
            r##"<rect x="{x:.2}" y="{y:.2}" width="{bw:.2}" height="{bh:.2}" fill="{fill}" stroke="#222" stroke-width="0.3"><title>{}</title></rect>"##,
            escape(&title)
        );
    }
    out.push_str("</svg>\n");
    out
}
