//! The HLO text printer: one canonical text per module, which the parser reads back to an
//! identical module.
//!
//! Canonical form: the short, sigil-free dialect (`add.1 = f32[4]{0} add(x, y)`), the header with
//! `is_scheduled=true` first when the module has a current schedule, then
//! `entry_computation_layout` and the other header attributes verbatim, debug tables after
//! the header, computations ordered callees first (ENTRY last), instructions in their scheduled
//! order when the module is scheduled, else in a stable topological order (creation order where
//! that is already topological), attributes in the
//! canonical key order of [`AttrKey`], and floats in their shortest round-trip form.
//! Instructions without a name get `opcode.N`, unique in the module.

use hashbrown::HashSet;
use std::fmt::Write;

use crate::attrs::{AttrKey, AttrValue, ConvDims, WindowDim};
use crate::literal::{format_element, Literal};
use crate::module::{CompId, ConstValue, InstId, LayoutId, Module, ShapeId};
use crate::opcode::Opcode;
use crate::traversal::Marks;
pub use crate::traversal::{topo_order, topo_order_with};
use crate::types::{Layout, Shape};

/// Prints the module as canonical HLO text.
pub fn print_module(m: &Module) -> String {
    let names = InstNames::new(m);
    let mut out = String::with_capacity(m.num_live_insts() * 64);
    out.push_str("HloModule ");
    out.push_str(&m.name);
    let schedule = m.schedule();
    if schedule.is_some() {
        out.push_str(", is_scheduled=true");
    }
    if let Some((params, result)) = &m.entry_layout {
        out.push_str(", entry_computation_layout={(");
        for (i, (s, l)) in params.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            write_shape(m, &mut out, *s, *l);
        }
        out.push_str(")->");
        write_shape(m, &mut out, result.0, result.1);
        out.push('}');
    }
    for (k, v) in &m.header_attrs {
        let _ = write!(out, ", {k}={v}");
    }
    out.push('\n');
    for t in &m.debug_tables {
        out.push('\n');
        out.push_str(&t.title);
        out.push('\n');
        for l in &t.lines {
            out.push_str(l);
            out.push('\n');
        }
    }
    let by_comp = m.insts_by_comp();
    let mut marks = Marks::with_capacity(m.inst_capacity());
    for c in crate::traversal::callee_first_order(m, &by_comp) {
        out.push('\n');
        // A scheduled computation prints in its sequence (the order is the schedule, as in
        // XLA's dumps); the topological fix below keeps a valid sequence as it is.
        let insts = match schedule.and_then(|s| s.sequence(c)) {
            Some(seq) if seq.len() == by_comp[c].len() => seq,
            _ => &by_comp[c][..],
        };
        print_computation(m, &names, insts, c, &mut marks, &mut out);
    }
    out
}

/// Computations in print order: every computation after the ones it calls, the entry last.
pub fn computation_order(m: &Module) -> Vec<CompId> {
    crate::traversal::callee_first_order(m, &m.insts_by_comp())
}

fn print_computation(
    m: &Module,
    names: &InstNames,
    insts: &[InstId],
    c: CompId,
    marks: &mut Marks<InstId>,
    out: &mut String,
) {
    if c == m.entry() {
        out.push_str("ENTRY ");
    }
    out.push_str(m.comp_name(c));
    out.push_str(" {\n");
    let root = m.root(c);
    for i in topo_order_with(m, insts, marks) {
        out.push_str("  ");
        if i == root {
            out.push_str("ROOT ");
        }
        print_inst(m, names, i, out);
        out.push('\n');
    }
    out.push_str("}\n");
}

/// Prints one instruction (without indentation or newline).
pub fn print_inst_to(m: &Module, i: InstId, out: &mut String) {
    let names = InstNames::new(m);
    print_inst(m, &names, i, out);
}

fn print_inst(m: &Module, names: &InstNames, i: InstId, out: &mut String) {
    out.push_str(names.get(m, i));
    out.push_str(" = ");
    write_shape(m, out, m.shape_id(i), m.layout_id(i));
    out.push(' ');
    let op = m.opcode(i);
    out.push_str(op.name());
    out.push('(');
    match op {
        Opcode::Parameter => {
            let _ = write!(out, "{}", m.parameter_number(i).unwrap_or(0));
        }
        Opcode::Constant => match m.constant(i) {
            Some(ConstValue::Literal(l)) => write_literal(out, l, true),
            Some(ConstValue::Elided) | None => out.push_str("{...}"),
        },
        _ => {
            for (k, &o) in m.operands(i).iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                if o.is_none() || o.index() >= m.inst_capacity() {
                    out.push_str("<invalid>");
                } else {
                    out.push_str(names.get(m, o));
                }
            }
        }
    }
    out.push(')');
    for (k, v) in m.attrs(i) {
        if *k == AttrKey::ParameterNumber {
            continue;
        }
        out.push_str(", ");
        out.push_str(k.name());
        out.push('=');
        write_attr_value(m, names, v, out);
    }
}

fn write_attr_value(m: &Module, names: &InstNames, v: &AttrValue, out: &mut String) {
    match v {
        AttrValue::Int(x) => {
            let _ = write!(out, "{x}");
        }
        AttrValue::Ints(xs) => write_int_list(out, xs),
        AttrValue::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        AttrValue::Ident(s) | AttrValue::Raw(s) => out.push_str(s),
        AttrValue::Str(s) => write_string(out, s),
        AttrValue::Slice(s) => {
            out.push('{');
            for (k, [a, b, c]) in s.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                if *c == 1 {
                    let _ = write!(out, "[{a}:{b}]");
                } else {
                    let _ = write!(out, "[{a}:{b}:{c}]");
                }
            }
            out.push('}');
        }
        AttrValue::Padding(p) => out.push_str(&format_padding(p)),
        AttrValue::ReplicaGroups(g) => {
            let _ = write!(out, "{g}");
        }
        AttrValue::Pairs(p) => out.push_str(&crate::collective::format_pairs(p)),
        AttrValue::Window(w) => out.push_str(&format_window(w)),
        AttrValue::DimLabels(d) => out.push_str(&format_dim_labels(d)),
        AttrValue::Direction(d) => out.push_str(d.name()),
        AttrValue::CmpType(t) => out.push_str(t.name()),
        AttrValue::FusionKind(k) => out.push_str(k.name()),
        AttrValue::Comp(c) => out.push_str(comp_name_or_invalid(m, *c)),
        AttrValue::Comps(cs) => {
            out.push('{');
            for (k, c) in cs.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                out.push_str(comp_name_or_invalid(m, *c));
            }
            out.push('}');
        }
        AttrValue::Insts(is) => {
            out.push('{');
            for (k, &i) in is.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                if i.is_none() || i.index() >= m.inst_capacity() {
                    out.push_str("<invalid>");
                } else {
                    out.push_str(names.get(m, i));
                }
            }
            out.push('}');
        }
    }
}

fn comp_name_or_invalid(m: &Module, c: CompId) -> &str {
    if c.is_none() || c.index() >= m.comp_capacity() {
        "<invalid>"
    } else {
        m.comp_name(c)
    }
}

fn write_int_list(out: &mut String, xs: &[i64]) {
    out.push('{');
    for (k, x) in xs.iter().enumerate() {
        if k > 0 {
            out.push(',');
        }
        let _ = write!(out, "{x}");
    }
    out.push('}');
}

fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Formats padding as `lo_hi[_interior]` per dimension joined by `x`.
pub fn format_padding(p: &[[i64; 3]]) -> String {
    p.iter()
        .map(|[lo, hi, int]| {
            if *int == 0 {
                format!("{lo}_{hi}")
            } else {
                format!("{lo}_{hi}_{int}")
            }
        })
        .collect::<Vec<_>>()
        .join("x")
}

/// Formats a window, writing only the fields that differ from their defaults (size always).
pub fn format_window(w: &[WindowDim]) -> String {
    if w.is_empty() {
        return "{}".to_string();
    }
    let join = |f: &dyn Fn(&WindowDim) -> String| w.iter().map(f).collect::<Vec<_>>().join("x");
    let mut parts = vec![format!("size={}", join(&|d| d.size.to_string()))];
    if w.iter().any(|d| d.stride != 1) {
        parts.push(format!("stride={}", join(&|d| d.stride.to_string())));
    }
    if w.iter().any(|d| d.pad_lo != 0 || d.pad_hi != 0) {
        parts.push(format!(
            "pad={}",
            join(&|d| format!("{}_{}", d.pad_lo, d.pad_hi))
        ));
    }
    if w.iter().any(|d| d.lhs_dilate != 1) {
        parts.push(format!(
            "lhs_dilate={}",
            join(&|d| d.lhs_dilate.to_string())
        ));
    }
    if w.iter().any(|d| d.rhs_dilate != 1) {
        parts.push(format!(
            "rhs_dilate={}",
            join(&|d| d.rhs_dilate.to_string())
        ));
    }
    if w.iter().any(|d| d.reversal) {
        parts.push(format!(
            "rhs_reversal={}",
            join(&|d| (d.reversal as u8).to_string())
        ));
    }
    format!("{{{}}}", parts.join(" "))
}

/// Formats convolution dimension numbers as `b01f_01io->b01f`.
pub fn format_dim_labels(d: &ConvDims) -> String {
    let n = d.input_spatial.len() + 2;
    let mk = |a: (i64, char), b: (i64, char), sp: &[i64]| {
        let mut v = vec!['?'; n];
        let mut put = |i: i64, c: char| {
            if i >= 0 && (i as usize) < n {
                v[i as usize] = c;
            }
        };
        put(a.0, a.1);
        put(b.0, b.1);
        for (k, &i) in sp.iter().enumerate() {
            put(i, char::from_digit(k as u32 % 10, 10).unwrap_or('?'));
        }
        v.into_iter().collect::<String>()
    };
    format!(
        "{}_{}->{}",
        mk(
            (d.input_batch, 'b'),
            (d.input_feature, 'f'),
            &d.input_spatial
        ),
        mk(
            (d.kernel_input_feature, 'i'),
            (d.kernel_output_feature, 'o'),
            &d.kernel_spatial
        ),
        mk(
            (d.output_batch, 'b'),
            (d.output_feature, 'f'),
            &d.output_spatial
        )
    )
}

/// Writes a shape with its layout (`f32[2,3]{1,0}`, `(s32[], f32[4]{0})`).
pub fn write_shape(m: &Module, out: &mut String, s: ShapeId, l: LayoutId) {
    match m.shape_of(s) {
        Shape::Array(a) => {
            out.push_str(a.ty.name());
            out.push('[');
            for (k, (&d, &dy)) in a.dims.iter().zip(a.dynamic.iter()).enumerate() {
                if k > 0 {
                    out.push(',');
                }
                if dy && d < 0 {
                    out.push('?');
                } else if dy {
                    let _ = write!(out, "<={d}");
                } else {
                    let _ = write!(out, "{d}");
                }
            }
            out.push(']');
            if let Layout::Array(al) = m.layout_of(l) {
                out.push('{');
                for (k, x) in al.minor_to_major.iter().enumerate() {
                    if k > 0 {
                        out.push(',');
                    }
                    let _ = write!(out, "{x}");
                }
                if !al.tiles.is_empty() || al.memory_space.is_some() || al.other.is_some() {
                    out.push(':');
                    if !al.tiles.is_empty() {
                        out.push('T');
                        for t in al.tiles.iter() {
                            out.push('(');
                            for (k, x) in t.iter().enumerate() {
                                if k > 0 {
                                    out.push(',');
                                }
                                if *x == i64::MIN {
                                    out.push('*');
                                } else {
                                    let _ = write!(out, "{x}");
                                }
                            }
                            out.push(')');
                        }
                    }
                    if let Some(o) = &al.other {
                        out.push_str(o);
                    }
                    if let Some(ms) = al.memory_space {
                        let _ = write!(out, "S({ms})");
                    }
                }
                out.push('}');
            }
        }
        Shape::Tuple(elems) => {
            let ls: Option<&[LayoutId]> = match m.layout_of(l) {
                Layout::Tuple(ls) if ls.len() == elems.len() => Some(ls),
                _ => None,
            };
            out.push('(');
            for (k, &e) in elems.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                let el = ls.map(|ls| ls[k]).unwrap_or(m.no_layout());
                write_shape(m, out, e, el);
            }
            out.push(')');
        }
        Shape::Token => out.push_str("token[]"),
        Shape::Opaque => out.push_str("opaque[]"),
    }
}

/// Formats a shape with its layout.
pub fn shape_to_string(m: &Module, s: ShapeId, l: LayoutId) -> String {
    let mut out = String::new();
    write_shape(m, &mut out, s, l);
    out
}

/// Writes a literal in HLO text form (`1`, `{1, 2}`, `{ {1, 2}, {3, 4} }`, `(1, {2})`).
pub fn write_literal(out: &mut String, l: &Literal, top: bool) {
    let _ = top;
    match l {
        Literal::Tuple(elems) => {
            out.push('(');
            for (k, e) in elems.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                write_literal(out, e, false);
            }
            out.push(')');
        }
        Literal::Array(a) => {
            let ty = a.ty();
            if a.shape.rank() == 0 {
                out.push_str(&format_element(ty, a.element_bytes(0)));
                return;
            }
            let dims = &a.shape.dims;
            let mut idx = 0usize;
            write_nested(out, a, dims, 0, &mut idx);
        }
    }
}

fn write_nested(
    out: &mut String,
    a: &crate::literal::ArrayLiteral,
    dims: &[i64],
    depth: usize,
    idx: &mut usize,
) {
    let last = depth + 1 == dims.len();
    out.push('{');
    if !last {
        out.push(' ');
    }
    for k in 0..dims[depth] {
        if k > 0 {
            out.push_str(", ");
        }
        if last {
            out.push_str(&format_element(a.ty(), a.element_bytes(*idx)));
            *idx += 1;
        } else {
            write_nested(out, a, dims, depth + 1, idx);
        }
    }
    if !last {
        out.push(' ');
    }
    out.push('}');
}

/// Unique printed names for every instruction: its own name where it has one, else `opcode.N`
/// (the names [`print_module`] prints, so tools such as `axle graph` can use them too).
pub struct InstNames {
    generated: hashbrown::HashMap<InstId, String>,
}

impl InstNames {
    /// The names of `m`'s live instructions.
    pub fn new(m: &Module) -> InstNames {
        let mut generated = hashbrown::HashMap::new();
        let unnamed: Vec<InstId> = m
            .live_ids()
            .into_iter()
            .filter(|&i| m.name(i).is_empty())
            .collect();
        if unnamed.is_empty() {
            return InstNames { generated };
        }
        let mut used: HashSet<&str> = HashSet::new();
        for i in m.live_ids() {
            let n = m.name(i);
            if !n.is_empty() {
                used.insert(n);
            }
        }
        let mut taken: HashSet<String> = HashSet::new();
        let mut counter = 0usize;
        for i in unnamed {
            let base = m.opcode(i).name();
            loop {
                let cand = format!("{base}.{counter}");
                counter += 1;
                if !used.contains(cand.as_str()) && !taken.contains(&cand) {
                    taken.insert(cand.clone());
                    generated.insert(i, cand);
                    break;
                }
            }
        }
        InstNames { generated }
    }

    /// The printed name of `i`.
    pub fn get<'m>(&'m self, m: &'m Module, i: InstId) -> &'m str {
        let n = m.name(i);
        if n.is_empty() {
            self.generated
                .get(&i)
                .map(|s| s.as_str())
                .unwrap_or("<unnamed>")
        } else {
            n
        }
    }
}
