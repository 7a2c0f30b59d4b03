//! The verifier: checks every invariant of a module and collects all violations.
//!
//! [`verify`] never stops at the first problem and never panics, however broken the module (ids
//! out of range, missing roots, dangling tuple shapes): it reports every violation it finds as a
//! [`VerifyError`] keyed by the offending entity (the module, a computation or an instruction)
//! with the entity's source location when the module was parsed from text. Checks that depend on
//! a broken entity (shape inference of an instruction whose operand does not exist, say) are
//! skipped rather than reported twice.
//!
//! Invariants checked, in this order:
//!
//! 1. **Entry.** The module has exactly one entry computation, and it exists.
//! 2. **Instruction structure.** Every live instruction belongs to a live computation; its shape
//!    id and layout id are ids of the module and its shape is well formed (non-negative sizes,
//!    one dynamic flag per dimension, element counts and byte sizes that fit in an `i64` as in
//!    XLA's `ShapeUtil::ValidateShape`, tuple elements that exist, tuples nested at most
//!    [`OwnedShape::MAX_TUPLE_DEPTH`] levels).
//! 3. **Operands.** Every operand and control predecessor of a live instruction exists, is live
//!    and is in the same computation.
//! 4. **Called computations.** Every computation an instruction calls exists and is not the
//!    entry computation.
//! 5. **Roots.** Every live computation has a root, and the root is a live instruction of that
//!    computation.
//! 6. **Parameters.** The `parameter` instructions of each computation are numbered `0..n`
//!    without gaps or duplicates, and the computation's parameter table agrees with them.
//! 7. **Names.** Instruction names are unique within the module, and so are computation names.
//! 8. **Fusion computations.** A computation called by a `fusion` (`calls=`) is called by
//!    nothing but fusions.
//! 9. **Call graph.** No computation calls itself, directly or through others.
//! 10. **Instruction graph.** No instruction depends on itself through operands and control
//!     predecessors.
//! 11. **Layouts.** Every layout fits its shape: an array layout's `minor_to_major` is a
//!     permutation of `0..rank`, a tuple layout has one layout per element, tokens have none.
//! 12. **Shapes.** Every instruction's declared shape equals the shape inferred from its
//!     operands, attributes and called computations by [`crate::shape_inference`], which also
//!     checks operand counts, element types, attribute validity and called computations'
//!     signatures. Layouts and dynamic-dimension flags are ignored in the comparison.
//! 13. **Constants.** Every `constant` has a value, and a literal's shape (element type,
//!     dimensions, tuple structure, data size) matches the declared shape.
//! 14. **Entry computation layout.** If `entry_computation_layout` is present, it has one entry
//!     per entry parameter, its shapes equal the parameters' and the root's shapes and its
//!     layouts fit its shapes. Its layouts may differ from the instructions' (XLA's verifier
//!     compares them only after layout assignment, which copies between the two): values are
//!     logical arrays, and the instructions' layouts are the ones the backends use.
//! 15. **Schedule.** If the module has a current schedule ([`crate::schedule`]), every live
//!     computation has a sequence listing exactly its live instructions, each once, every one
//!     after its operands and control predecessors (checked only when 1-14 hold).

use std::fmt;

use hashbrown::HashMap;
use rayon::prelude::*;

use crate::literal::Literal;
use crate::module::{CompId, ConstValue, InstId, LayoutId, Module, ShapeId, SrcLoc};
use crate::name_index::NameIndex;
use crate::opcode::Opcode;
use crate::shape_inference::{infer_shape, OwnedShape};
use crate::types::Layout;
use crate::AttrKey;

/// The entity a verifier error is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Entity {
    /// The module as a whole (entry, header).
    Module,
    /// A computation.
    Computation(CompId),
    /// An instruction.
    Instruction(InstId),
}

/// One violated invariant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct VerifyError {
    /// What the error is about.
    pub entity: Entity,
    /// Where the entity was defined in the parsed text, if it was parsed.
    pub loc: Option<SrcLoc>,
    /// The message, naming the entity (`%add.1: add: operand 1 has shape ...`).
    pub message: String,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.loc {
            Some(l) => write!(f, "{}:{}: error: {}", l.line, l.col, self.message),
            None => write!(f, "error: {}", self.message),
        }
    }
}

/// Every violation found in a module, in source order where locations are known.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct VerifyErrors {
    /// The errors.
    pub errors: Vec<VerifyError>,
}

impl VerifyErrors {
    /// The number of errors.
    pub fn len(&self) -> usize {
        self.errors.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.errors.is_empty()
    }

    /// The errors about `entity`.
    pub fn for_entity(&self, entity: Entity) -> impl Iterator<Item = &VerifyError> {
        self.errors.iter().filter(move |e| e.entity == entity)
    }

    /// The module printed as text with each error attached under the line of the entity it is
    /// about (module-level errors and errors about entities that cannot be found go first).
    /// The text is [`crate::printer::print_module`]'s, or a simpler form where the module is too
    /// broken to print (shape, layout or computation ids out of range).
    pub fn annotate(&self, m: &Module) -> String {
        let text = if printable(m) {
            crate::printer::print_module(m)
        } else {
            print_for_annotation(m)
        };
        let lines: Vec<&str> = text.lines().collect();
        // Map entity names to printed lines.
        let mut inst_line: HashMap<&str, usize> = HashMap::new();
        let mut comp_line: HashMap<&str, usize> = HashMap::new();
        for (i, line) in lines.iter().enumerate() {
            if let Some(name) = printed_inst_name(line) {
                inst_line.entry(name).or_insert(i);
            } else if let Some(name) = printed_comp_name(line) {
                comp_line.entry(name).or_insert(i);
            }
        }
        let mut attached: Vec<Vec<&VerifyError>> = vec![Vec::new(); lines.len()];
        let mut loose = Vec::new();
        for e in &self.errors {
            let line = match e.entity {
                Entity::Module => None,
                Entity::Computation(c) if c.index() < m.comp_capacity() => {
                    comp_line.get(m.comp_name(c)).copied()
                }
                Entity::Instruction(i) if i.index() < m.inst_capacity() => {
                    let name = m.name(i);
                    if name.is_empty() {
                        None
                    } else {
                        inst_line.get(name).copied()
                    }
                }
                _ => None,
            };
            match line {
                Some(l) => attached[l].push(e),
                None => loose.push(e),
            }
        }
        let mut out = String::new();
        for e in loose {
            out.push_str("// error: ");
            out.push_str(&e.message);
            out.push('\n');
        }
        for (i, line) in lines.iter().enumerate() {
            out.push_str(line);
            out.push('\n');
            let indent = line.len() - line.trim_start().len();
            for e in &attached[i] {
                out.push_str(&" ".repeat(indent));
                out.push_str("^ error: ");
                out.push_str(&e.message);
                out.push('\n');
            }
        }
        out
    }

    /// The source text the module was parsed from, with each error attached under the line its
    /// entity was defined on, a caret at its column (errors without a location go first).
    pub fn annotate_source(&self, source: &str) -> String {
        let lines: Vec<&str> = source.lines().collect();
        let mut attached: Vec<Vec<&VerifyError>> = vec![Vec::new(); lines.len()];
        let mut loose = Vec::new();
        for e in &self.errors {
            match e.loc {
                Some(l) if l.line >= 1 && (l.line as usize) <= lines.len() => {
                    attached[l.line as usize - 1].push(e)
                }
                _ => loose.push(e),
            }
        }
        let mut out = String::new();
        for e in loose {
            out.push_str("// error: ");
            out.push_str(&e.message);
            out.push('\n');
        }
        for (i, line) in lines.iter().enumerate() {
            out.push_str(line);
            out.push('\n');
            for e in &attached[i] {
                let col = e.loc.map_or(1, |l| l.col.max(1)) as usize;
                out.push_str(&" ".repeat(col - 1));
                out.push_str("^ error: ");
                out.push_str(&e.message);
                out.push('\n');
            }
        }
        out
    }
}

impl fmt::Display for VerifyErrors {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, e) in self.errors.iter().enumerate() {
            if i > 0 {
                f.write_str("\n")?;
            }
            write!(f, "{e}")?;
        }
        Ok(())
    }
}

impl std::error::Error for VerifyErrors {}

/// The name of the instruction defined on a printed line (`  ROOT %x = ...` → `x`).
fn printed_inst_name(line: &str) -> Option<&str> {
    let t = line.trim_start();
    let t = t.strip_prefix("ROOT ").unwrap_or(t);
    let t = t.strip_prefix('%').unwrap_or(t);
    let end = t.find(" = ")?;
    let name = &t[..end];
    if name.is_empty() || name.contains(' ') {
        return None;
    }
    Some(name)
}

/// The name of the computation whose header is on a printed line (`ENTRY %main (...) -> ... {`).
fn printed_comp_name(line: &str) -> Option<&str> {
    if !line.trim_end().ends_with('{') || line.starts_with(' ') {
        return None;
    }
    let t = line.strip_prefix("ENTRY ").unwrap_or(line);
    let t = t.strip_prefix('%').unwrap_or(t);
    let end = t.find([' ', '(', '{']).unwrap_or(t.len());
    let name = &t[..end];
    (!name.is_empty()).then_some(name)
}

/// Whether every id the printer follows without checking is valid: instruction parents, shape
/// and layout ids (tuple elements included), and `entry_computation_layout`'s ids.
fn printable(m: &Module) -> bool {
    fn shape_ok(m: &Module, s: crate::ShapeId, depth: usize) -> bool {
        s.index() < m.num_shapes()
            && depth < 64
            && match m.shape_of(s) {
                crate::Shape::Tuple(es) => es.iter().all(|&e| shape_ok(m, e, depth + 1)),
                _ => true,
            }
    }
    fn layout_ok(m: &Module, l: LayoutId, depth: usize) -> bool {
        l.index() < m.num_layouts()
            && depth < 64
            && match m.layout_of(l) {
                Layout::Tuple(ls) => ls.iter().all(|&e| layout_ok(m, e, depth + 1)),
                _ => true,
            }
    }
    let insts_ok = m.live_ids().into_iter().all(|i| {
        let p = m.parent(i);
        (p.is_none() || p.index() < m.comp_capacity())
            && shape_ok(m, m.shape_id(i), 0)
            && layout_ok(m, m.layout_id(i), 0)
    });
    let entry_ok = m.entry_layout.as_ref().is_none_or(|(ps, r)| {
        ps.iter()
            .chain(std::iter::once(r))
            .all(|&(s, l)| shape_ok(m, s, 0) && layout_ok(m, l, 0))
    });
    insts_ok && entry_ok
}

/// The module as text for [`VerifyErrors::annotate`] when the printer cannot print it: one line
/// per computation header and per instruction, robust to any broken module.
fn print_for_annotation(m: &Module) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let _ = writeln!(out, "HloModule {}", m.name);
    let by_comp = insts_by_comp(m, &m.live_ids());
    for c in m.computations() {
        out.push('\n');
        if c == m.entry() {
            out.push_str("ENTRY ");
        }
        let _ = writeln!(out, "%{} {{", m.comp_name(c));
        let root = m.root(c);
        for &i in by_comp.get(c.index()).map(|v| &v[..]).unwrap_or(&[]) {
            out.push_str("  ");
            if i == root {
                out.push_str("ROOT ");
            }
            let _ = write!(
                out,
                "{} = {} {}(",
                inst_label(m, i),
                crate::shape_inference::shape_to_string(m, m.shape_id(i)),
                m.opcode(i)
            );
            for (k, &op) in m.operands(i).iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                if op.index() < m.inst_capacity() {
                    out.push_str(&inst_label(m, op));
                } else {
                    let _ = write!(out, "#{}", op.index());
                }
            }
            out.push(')');
            for (k, v) in m.attrs(i) {
                let _ = write!(out, ", {}={}", k.name(), attr_text(m, v));
            }
            out.push('\n');
        }
        out.push_str("}\n");
    }
    out
}

fn attr_text(m: &Module, v: &crate::AttrValue) -> String {
    use crate::AttrValue as V;
    let comp = |c: CompId| {
        if m.is_live_comp(c) {
            format!("%{}", m.comp_name(c))
        } else {
            format!("#{}", c.index())
        }
    };
    let list = |xs: Vec<String>| format!("{{{}}}", xs.join(","));
    match v {
        V::Int(i) => i.to_string(),
        V::Ints(xs) => list(xs.iter().map(|x| x.to_string()).collect()),
        V::Bool(b) => b.to_string(),
        V::Ident(s) | V::Raw(s) => s.to_string(),
        V::Str(s) => format!("{s:?}"),
        V::Comp(c) => comp(*c),
        V::Comps(cs) => list(cs.iter().map(|&c| comp(c)).collect()),
        V::Insts(is) => list(
            is.iter()
                .map(|&i| {
                    if i.index() < m.inst_capacity() {
                        inst_label(m, i)
                    } else {
                        format!("#{}", i.index())
                    }
                })
                .collect(),
        ),
        V::Direction(d) => d.name().to_string(),
        V::CmpType(t) => t.name().to_string(),
        V::FusionKind(k) => k.name().to_string(),
        other => format!("{other:?}"),
    }
}

/// `%name`, or `#index` for an unnamed instruction.
fn inst_label(m: &Module, i: InstId) -> String {
    let name = m.name(i);
    if name.is_empty() {
        format!("#{}", i.index())
    } else {
        format!("%{name}")
    }
}

fn comp_label(m: &Module, c: CompId) -> String {
    if c.index() < m.comp_capacity() {
        format!("%{}", m.comp_name(c))
    } else {
        format!("#{}", c.index())
    }
}

struct Checker<'m> {
    m: &'m Module,
    errors: Vec<VerifyError>,
}

impl<'m> Checker<'m> {
    fn module_err(&mut self, message: String) {
        self.errors.push(VerifyError {
            entity: Entity::Module,
            loc: None,
            message,
        });
    }

    fn comp_err(&mut self, c: CompId, message: String) {
        let loc = self.m.comp_src_loc(c);
        let message = format!("computation {}: {message}", comp_label(self.m, c));
        self.errors.push(VerifyError {
            entity: Entity::Computation(c),
            loc,
            message,
        });
    }

    fn inst_err(&mut self, i: InstId, message: String) {
        let loc = self.m.src_loc(i);
        let message = format!("{}: {message}", inst_label(self.m, i));
        self.errors.push(VerifyError {
            entity: Entity::Instruction(i),
            loc,
            message,
        });
    }

    /// Whether `op` is a live instruction of computation `c`.
    fn valid_ref(&self, op: InstId, c: CompId) -> bool {
        self.m.is_live(op) && self.m.parent(op) == c
    }

    /// Describes why `op` is not a valid reference from computation `c`.
    fn bad_ref(&self, op: InstId, c: CompId) -> Option<String> {
        let m = self.m;
        if op.index() >= m.inst_capacity() {
            Some(format!("#{} does not exist", op.index()))
        } else if !m.is_live(op) {
            Some(format!("{} was deleted", inst_label(m, op)))
        } else if m.parent(op) != c {
            Some(format!(
                "{} is in computation {}, not {}",
                inst_label(m, op),
                comp_label(m, m.parent(op)),
                comp_label(m, c)
            ))
        } else {
            None
        }
    }
}

/// Checks every invariant listed in the module docs and returns all violations.
pub fn verify(m: &Module) -> Result<(), VerifyErrors> {
    let mut ck = Checker {
        m,
        errors: Vec::new(),
    };
    let live = m.live_ids();
    let comps = m.computations();
    check_entry(&mut ck);
    // Shapes are interned, so convert each once; `shapes[i]` is instruction `i`'s if valid.
    let shape_cache: Vec<Option<OwnedShape>> = (0..m.num_shapes())
        .map(|s| OwnedShape::from_id(m, crate::ShapeId::new(s)))
        .collect();
    let Structure { sound, shapes } = check_structure(&mut ck, &live, &shape_cache);
    let comp_ok = check_signatures(&mut ck, &live, &comps);
    check_names(&mut ck, &live, &comps);
    check_fusion_callers(&mut ck, &live);
    check_call_graph(&mut ck, &live);
    check_instruction_graph(&mut ck);
    check_shapes(&mut ck, &live, &sound, &shapes, &comp_ok);
    check_constants(&mut ck, &live, &shapes);
    check_entry_layout(&mut ck, &shapes, &comp_ok);
    check_schedule(&mut ck);
    if ck.errors.is_empty() {
        return Ok(());
    }
    let mut errors = ck.errors;
    errors.sort_by_key(|e| e.loc.map(|l| (l.line, l.col)));
    Err(VerifyErrors { errors })
}

/// What [`check_structure`] learns of each instruction (indexed by instruction).
struct Structure<'s> {
    /// The instruction's own shape and every id it refers to are valid, so shape inference
    /// can run on it.
    sound: Vec<bool>,
    /// The instruction's shape, where it is valid.
    shapes: Vec<Option<&'s OwnedShape>>,
}

/// 1. The module has an entry computation, and it exists.
fn check_entry(ck: &mut Checker<'_>) {
    let m = ck.m;
    let entry = m.entry();
    if entry.is_none() {
        ck.module_err("the module has no entry computation".to_string());
    } else if !m.is_live_comp(entry) {
        ck.module_err(format!(
            "the entry computation #{} does not exist",
            entry.index()
        ));
    }
}

/// 2-4. Per-instruction structure: its computation, its shape and layout, its operands,
/// control predecessors and called computations.
fn check_structure<'s>(
    ck: &mut Checker<'_>,
    live: &[InstId],
    shape_cache: &'s [Option<OwnedShape>],
) -> Structure<'s> {
    let m = ck.m;
    let n_insts = m.inst_capacity();
    let entry = m.entry();
    let mut sound = vec![false; n_insts];
    let mut layout_checked: HashMap<(crate::ShapeId, LayoutId), Result<(), String>> =
        HashMap::new();
    let mut shapes: Vec<Option<&OwnedShape>> = vec![None; n_insts];
    for &i in live {
        let mut ok = true;
        let parent = m.parent(i);
        if !m.is_live_comp(parent) {
            ck.inst_err(
                i,
                format!(
                    "belongs to computation #{}, which does not exist",
                    parent.index()
                ),
            );
            ok = false;
        }
        match shape_cache
            .get(m.shape_id(i).index())
            .and_then(|s| s.as_ref())
        {
            None => {
                ck.inst_err(i, broken_shape(m, m.shape_id(i)));
                ok = false;
            }
            Some(s) if !s.is_valid() => {
                let why = s
                    .validate()
                    .err()
                    .map(|e| e.to_string())
                    .unwrap_or_default();
                ck.inst_err(i, format!("has an invalid shape: {why}"));
                ok = false;
            }
            Some(s) => {
                let key = (m.shape_id(i), m.layout_id(i));
                let checked = layout_checked
                    .entry(key)
                    .or_insert_with(|| check_layout(m, s, key.1, 0));
                if let Err(msg) = checked {
                    ck.inst_err(i, msg.clone());
                }
                shapes[i.index()] = Some(s);
            }
        }
        for (k, &op) in m.operands(i).iter().enumerate() {
            if let Some(why) = ck.bad_ref(op, parent) {
                ck.inst_err(i, format!("operand {k}: {why}"));
                if !m.is_live(op) {
                    ok = false;
                }
            }
        }
        for &p in m.control_predecessors(i) {
            if let Some(why) = ck.bad_ref(p, parent) {
                ck.inst_err(i, format!("control predecessor {why}"));
            }
        }
        for c in m.called_comps_iter(i) {
            if !m.is_live_comp(c) {
                ck.inst_err(
                    i,
                    format!("calls computation #{}, which does not exist", c.index()),
                );
                ok = false;
            } else if c == entry {
                ck.inst_err(
                    i,
                    format!("calls the entry computation {}", comp_label(m, c)),
                );
            }
        }
        sound[i.index()] = ok;
    }
    Structure { sound, shapes }
}

/// 5-6. Roots and parameters: gives, per computation, whether it has a signature.
fn check_signatures(ck: &mut Checker<'_>, live: &[InstId], comps: &[CompId]) -> Vec<bool> {
    let m = ck.m;
    let n_insts = m.inst_capacity();
    let n_comps = m.comp_capacity();
    let by_comp = insts_by_comp(m, live);
    let mut comp_ok = vec![false; n_comps];
    for &c in comps {
        let mut ok = true;
        let root = m.root(c);
        if root.is_none() {
            ck.comp_err(c, "has no root instruction".to_string());
            ok = false;
        } else if let Some(why) = ck.bad_ref(root, c) {
            ck.comp_err(c, format!("root {why}"));
            ok = false;
        }
        let mut by_number: Vec<Vec<InstId>> = Vec::new();
        for &i in &by_comp[c.index()] {
            if m.opcode(i) != Opcode::Parameter {
                continue;
            }
            match m.attr(i, &AttrKey::ParameterNumber) {
                Some(crate::AttrValue::Int(n)) if *n >= 0 && (*n as u64) < n_insts as u64 => {
                    let n = *n as usize;
                    if by_number.len() <= n {
                        by_number.resize(n + 1, Vec::new());
                    }
                    by_number[n].push(i);
                }
                Some(crate::AttrValue::Int(n)) => {
                    ck.inst_err(i, format!("parameter number {n} is out of range"));
                    ok = false;
                }
                _ => {
                    ck.inst_err(i, "parameter has no parameter number".to_string());
                    ok = false;
                }
            }
        }
        for (n, insts) in by_number.iter().enumerate() {
            match insts.len() {
                0 => {
                    ck.comp_err(
                        c,
                        format!(
                            "has no parameter {n} (parameters must be numbered 0..{} without \
                             gaps)",
                            by_number.len()
                        ),
                    );
                    ok = false;
                }
                1 => {}
                _ => {
                    for &dup in &insts[1..] {
                        let first = inst_label(m, insts[0]);
                        ck.inst_err(dup, format!("parameter number {n} is also used by {first}"));
                    }
                    ok = false;
                }
            }
        }
        let table = m.params(c);
        let table_ok = table.len() == by_number.len()
            && table
                .iter()
                .zip(&by_number)
                .all(|(&p, insts)| insts.first() == Some(&p));
        if !table_ok && ok {
            let names: Vec<String> = table
                .iter()
                .map(|&p| {
                    if p.index() < n_insts {
                        inst_label(m, p)
                    } else {
                        "none".to_string()
                    }
                })
                .collect();
            ck.comp_err(
                c,
                format!(
                    "the parameter table [{}] does not match the parameter instructions",
                    names.join(", ")
                ),
            );
            ok = false;
        }
        comp_ok[c.index()] = ok;
    }
    comp_ok
}

/// 7. Instruction names and computation names are unique.
fn check_names(ck: &mut Checker<'_>, live: &[InstId], comps: &[CompId]) {
    let m = ck.m;
    let mut names = NameIndex::with_capacity(live.len());
    for &i in live {
        if m.name(i).is_empty() {
            continue;
        }
        if let Some(first) = names.insert_first(m, i) {
            let at = match m.src_loc(first) {
                Some(l) => format!(" (line {})", l.line),
                None => String::new(),
            };
            ck.inst_err(
                i,
                format!(
                    "name %{} is already used by another instruction{at}",
                    m.name(i)
                ),
            );
        }
    }
    let mut comp_names: HashMap<&str, CompId> = HashMap::new();
    for &c in comps {
        let name = m.comp_name(c);
        if comp_names.insert(name, c).is_some() {
            ck.comp_err(
                c,
                "the name is already used by another computation".to_string(),
            );
        }
    }
}

/// 8. Fusion computations are called only by fusions.
fn check_fusion_callers(ck: &mut Checker<'_>, live: &[InstId]) {
    let m = ck.m;
    let n_comps = m.comp_capacity();
    let mut fusion_caller: Vec<Option<InstId>> = vec![None; n_comps];
    for &i in live {
        if m.opcode(i) == Opcode::Fusion {
            if let Some(c) = m.comp_attr(i, &AttrKey::Calls) {
                if m.is_live_comp(c) && fusion_caller[c.index()].is_none() {
                    fusion_caller[c.index()] = Some(i);
                }
            }
        }
    }
    for &i in live {
        if m.opcode(i) == Opcode::Fusion {
            continue;
        }
        for c in m.called_comps_iter(i) {
            if !m.is_live_comp(c) {
                continue;
            }
            if let Some(f) = fusion_caller[c.index()] {
                ck.inst_err(
                    i,
                    format!(
                        "calls {}, which is the fusion computation of {}; fusion computations \
                         may only be called by fusions",
                        comp_label(m, c),
                        inst_label(m, f)
                    ),
                );
            }
        }
    }
}

/// 9. The call graph is acyclic.
fn check_call_graph(ck: &mut Checker<'_>, live: &[InstId]) {
    let m = ck.m;
    let n_comps = m.comp_capacity();
    // Edges in order of first appearance, deduplicated through a set (a computation calling
    // 20,000 others must not scan its list per call).
    let mut callees: Vec<Vec<usize>> = vec![Vec::new(); n_comps];
    let mut edges: hashbrown::HashSet<(usize, usize)> = hashbrown::HashSet::new();
    for &i in live {
        let p = m.parent(i);
        if !m.is_live_comp(p) {
            continue;
        }
        for c in m.called_comps_iter(i) {
            if m.is_live_comp(c) && edges.insert((p.index(), c.index())) {
                callees[p.index()].push(c.index());
            }
        }
    }
    for cycle in find_cycles(n_comps, |c| &callees[c]) {
        let path: Vec<String> = cycle
            .iter()
            .chain(std::iter::once(&cycle[0]))
            .map(|&c| comp_label(m, CompId::new(c)))
            .collect();
        ck.comp_err(
            CompId::new(cycle[0]),
            format!("calls itself: {}", path.join(" -> ")),
        );
    }
}

/// 10. The instruction graph (operands and control predecessors) is acyclic.
fn check_instruction_graph(ck: &mut Checker<'_>) {
    let m = ck.m;
    let n_insts = m.inst_capacity();
    // Dependencies (operands and control predecessors in the same computation) as CSR rows.
    let mut dep_start = vec![0usize; n_insts + 1];
    let mut deps: Vec<usize> = Vec::new();
    for i in 0..n_insts {
        let id = InstId::new(i);
        if m.is_live(id) {
            let p = m.parent(id);
            for &op in m.operands(id).iter().chain(m.control_predecessors(id)) {
                if ck.valid_ref(op, p) {
                    deps.push(op.index());
                }
            }
        }
        dep_start[i + 1] = deps.len();
    }
    for cycle in find_cycles(n_insts, |i| &deps[dep_start[i]..dep_start[i + 1]]) {
        let mut path: Vec<String> = cycle
            .iter()
            .chain(std::iter::once(&cycle[0]))
            .map(|&i| inst_label(m, InstId::new(i)))
            .collect();
        path.reverse();
        ck.inst_err(
            InstId::new(cycle[0]),
            format!("depends on itself: {}", path.join(" -> ")),
        );
    }
}

/// 12. Shapes: each sound instruction's declared shape is compatible with the inferred one.
fn check_shapes(
    ck: &mut Checker<'_>,
    live: &[InstId],
    sound: &[bool],
    shapes: &[Option<&OwnedShape>],
    comp_ok: &[bool],
) {
    let m = ck.m;
    // Instructions are independent: infer in parallel, keep
    // the order. An instruction without attributes (so calling no computation) has a verdict
    // that depends only on its opcode, its operands' interned shapes and its declared shape, so
    // each worker remembers verdicts by that key: a large module repeats a few such keys for most
    // of its instructions (`add` of two f32[64,256]), and inference allocates.
    type VerdictKey = (Opcode, ShapeId, [ShapeId; 3]);
    let verdict = |i: InstId| -> Option<String> {
        let declared = shapes[i.index()]?;
        match infer_shape(m, m.opcode(i), m.operands(i), m.attrs(i), Some(declared)) {
            Err(e) => Some(e.message().to_string()),
            Ok(inferred) if !inferred.compatible(declared) => Some(format!(
                "{}: declared shape {declared} does not match the inferred shape {inferred}",
                m.opcode(i)
            )),
            Ok(_) => None,
        }
    };
    let shape_errors: Vec<(InstId, String)> = live
        .par_iter()
        .map_init(HashMap::<VerdictKey, Option<String>>::new, |memo, &i| {
            if !sound[i.index()] {
                return None;
            }
            let ops = m.operands(i);
            if ops.iter().any(|o| shapes[o.index()].is_none()) {
                return None;
            }
            if m.called_comps_iter(i).any(|c| !comp_ok[c.index()]) {
                return None;
            }
            if !m.attrs(i).is_empty() || ops.len() > 3 {
                return verdict(i).map(|msg| (i, msg));
            }
            let mut key_ops = [ShapeId::NONE; 3];
            for (k, &o) in key_ops.iter_mut().zip(ops) {
                *k = m.shape_id(o);
            }
            let key = (m.opcode(i), m.shape_id(i), key_ops);
            memo.entry(key)
                .or_insert_with(|| verdict(i))
                .clone()
                .map(|msg| (i, msg))
        })
        .flatten()
        .collect();
    for (i, msg) in shape_errors {
        ck.inst_err(i, msg);
    }
}

/// 13. Constants have a value that fits their declared shape.
fn check_constants(ck: &mut Checker<'_>, live: &[InstId], shapes: &[Option<&OwnedShape>]) {
    let m = ck.m;
    for &i in live {
        if m.opcode(i) != Opcode::Constant {
            continue;
        }
        let Some(declared) = shapes[i.index()] else {
            continue;
        };
        match m.constant(i) {
            None => ck.inst_err(i, "constant has no value".to_string()),
            Some(ConstValue::Elided) => {}
            Some(ConstValue::Literal(l)) => {
                if let Err(msg) = check_literal(l, declared) {
                    ck.inst_err(i, format!("constant: {msg}"));
                }
            }
        }
    }
}

/// 14. The entry computation layout matches the entry computation's signature.
fn check_entry_layout(ck: &mut Checker<'_>, shapes: &[Option<&OwnedShape>], comp_ok: &[bool]) {
    let m = ck.m;
    let entry = m.entry();
    if let Some((params, result)) = &m.entry_layout {
        if m.is_live_comp(entry) && comp_ok[entry.index()] {
            let eparams = m.params(entry);
            if params.len() != eparams.len() {
                ck.module_err(format!(
                    "entry_computation_layout has {} parameters but the entry computation {} \
                     has {}",
                    params.len(),
                    comp_label(m, entry),
                    eparams.len()
                ));
            } else {
                for (n, (&(sid, lid), &p)) in params.iter().zip(eparams).enumerate() {
                    if let Some(msg) = check_entry_layout_item(m, sid, lid, p, shapes) {
                        ck.module_err(format!("entry_computation_layout parameter {n}: {msg}"));
                    }
                }
            }
            let root = m.root(entry);
            if let Some(msg) = check_entry_layout_item(m, result.0, result.1, root, shapes) {
                ck.module_err(format!("entry_computation_layout result: {msg}"));
            }
        }
    }
}

/// 15. The schedule (only on a structurally sound module: the check indexes by parent).
fn check_schedule(ck: &mut Checker<'_>) {
    let m = ck.m;
    if ck.errors.is_empty() {
        if let Some(s) = m.schedule() {
            for (c, msg) in s.violations(m) {
                ck.comp_err(c, msg);
            }
        }
    }
}

/// Why shape `id` does not convert to an [`OwnedShape`]: an id that is not a shape of the
/// module (at the top or as a tuple element), or tuples nested too deeply.
fn broken_shape(m: &Module, id: crate::ShapeId) -> String {
    let max = OwnedShape::MAX_TUPLE_DEPTH;
    if id.index() >= m.num_shapes() {
        return format!(
            "has shape id {}, which is not a shape of the module",
            id.index()
        );
    }
    // Nesting depth per shape id in id order (interning puts tuple elements before their
    // tuple), so shared elements are measured once; `None` marks a tuple with an element id
    // that is not an earlier shape.
    let mut depth: Vec<Option<usize>> = vec![Some(0); id.index() + 1];
    for k in 0..=id.index() {
        if let crate::Shape::Tuple(es) = m.shape_of(crate::ShapeId::new(k)) {
            depth[k] = es.iter().try_fold(1usize, |d, &e| {
                let de = depth
                    .get(e.index())
                    .filter(|_| e.index() < k)
                    .copied()
                    .flatten()?;
                Some(d.max(de + 1))
            });
        }
    }
    match depth[id.index()] {
        None => {
            return format!(
                "has a tuple shape with an element shape id that is not a shape of the module \
                 (shape id {})",
                id.index()
            )
        }
        Some(d) if d > max => {
            return format!("has a tuple shape nested more than {max} levels deep")
        }
        Some(_) => {}
    }
    format!("has shape id {}, which cannot be read", id.index())
}

/// Live instructions by computation (`Module::insts_by_comp` assumes every parent exists).
fn insts_by_comp(m: &Module, live: &[InstId]) -> Vec<Vec<InstId>> {
    let mut out = vec![Vec::new(); m.comp_capacity()];
    for &i in live {
        if let Some(v) = out.get_mut(m.parent(i).index()) {
            v.push(i);
        }
    }
    out
}

/// Checks one `(shape, layout)` entry of `entry_computation_layout` against instruction `inst`.
fn check_entry_layout_item(
    m: &Module,
    sid: crate::ShapeId,
    lid: LayoutId,
    inst: InstId,
    shapes: &[Option<&OwnedShape>],
) -> Option<String> {
    let s = match OwnedShape::from_id(m, sid) {
        Some(s) => s,
        None => return Some(format!("shape id {} does not exist", sid.index())),
    };
    if let Err(msg) = check_layout(m, &s, lid, 0) {
        return Some(msg);
    }
    let declared = (*shapes.get(inst.index())?)?;
    if !s.compatible(declared) {
        return Some(format!(
            "shape {s} does not match {} {declared}",
            inst_label(m, inst)
        ));
    }
    None
}

fn join(xs: &[i64]) -> String {
    xs.iter()
        .map(|x| x.to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Checks that layout `lid` fits `shape`.
fn check_layout(m: &Module, shape: &OwnedShape, lid: LayoutId, depth: usize) -> Result<(), String> {
    if lid.index() >= m.num_layouts() {
        return Err(format!(
            "has layout id {}, which is not a layout of the module",
            lid.index()
        ));
    }
    if depth > 64 {
        return Err("has a layout nested too deeply".to_string());
    }
    match (shape, m.layout_of(lid)) {
        (_, Layout::None) => Ok(()),
        (OwnedShape::Array(a), Layout::Array(l)) => {
            let rank = a.rank();
            let mut seen = vec![false; rank];
            let perm = l.minor_to_major.len() == rank
                && l.minor_to_major.iter().all(|&d| {
                    d >= 0
                        && (d as u64) < rank as u64
                        && !std::mem::replace(&mut seen[d as usize], true)
                });
            if perm {
                Ok(())
            } else {
                Err(format!(
                    "layout {{{}}} of shape {shape} is not a permutation of 0..{rank}",
                    join(&l.minor_to_major)
                ))
            }
        }
        (OwnedShape::Tuple(es), Layout::Tuple(ls)) => {
            if es.len() != ls.len() {
                return Err(format!(
                    "tuple layout has {} elements but shape {shape} has {}",
                    ls.len(),
                    es.len()
                ));
            }
            for (e, &l) in es.iter().zip(ls.iter()) {
                check_layout(m, e, l, depth + 1)?;
            }
            Ok(())
        }
        (_, Layout::Array(_)) => Err(format!("has an array layout but shape {shape}")),
        (_, Layout::Tuple(_)) => Err(format!("has a tuple layout but shape {shape}")),
    }
}

/// Checks that a literal matches a declared shape.
fn check_literal(l: &Literal, shape: &OwnedShape) -> Result<(), String> {
    match (l, shape) {
        (Literal::Array(a), OwnedShape::Array(s)) => {
            if a.shape.ty != s.ty || a.shape.dims != s.dims {
                let lit = OwnedShape::Array(a.shape.clone());
                return Err(format!(
                    "the literal has shape {lit} but the instruction declares {shape}"
                ));
            }
            let n = a
                .shape
                .dims
                .iter()
                .try_fold(1usize, |acc, &d| acc.checked_mul(usize::try_from(d).ok()?));
            let want = n.and_then(|n| n.checked_mul(a.shape.ty.byte_size()));
            if want != Some(a.data.len()) {
                return Err(format!(
                    "the literal of shape {shape} holds {} bytes",
                    a.data.len()
                ));
            }
            Ok(())
        }
        (Literal::Tuple(ls), OwnedShape::Tuple(ss)) => {
            if ls.len() != ss.len() {
                return Err(format!(
                    "the literal is a tuple of {} elements but the instruction declares {shape}",
                    ls.len()
                ));
            }
            for (l, s) in ls.iter().zip(ss) {
                check_literal(l, s)?;
            }
            Ok(())
        }
        (Literal::Array(a), _) => Err(format!(
            "the literal has shape {} but the instruction declares {shape}",
            OwnedShape::Array(a.shape.clone())
        )),
        (Literal::Tuple(_), _) => Err(format!(
            "the literal is a tuple but the instruction declares {shape}"
        )),
    }
}

/// Finds cycles in a directed graph of `n` nodes (iterative DFS); returns one cycle (nodes in
/// edge order) per back edge found.
fn find_cycles<'a>(n: usize, succ: impl Fn(usize) -> &'a [usize]) -> Vec<Vec<usize>> {
    const WHITE: u8 = 0;
    const GRAY: u8 = 1;
    const BLACK: u8 = 2;
    let mut color = vec![WHITE; n];
    let mut cycles = Vec::new();
    let mut stack: Vec<(usize, usize)> = Vec::new();
    for start in 0..n {
        if color[start] != WHITE {
            continue;
        }
        color[start] = GRAY;
        stack.push((start, 0));
        while let Some(top) = stack.last_mut() {
            let (u, next) = *top;
            let edges = succ(u);
            if next < edges.len() {
                top.1 += 1;
                let v = edges[next];
                if v >= n {
                    continue;
                }
                match color[v] {
                    WHITE => {
                        color[v] = GRAY;
                        stack.push((v, 0));
                    }
                    GRAY => {
                        let pos = stack.iter().position(|&(x, _)| x == v).unwrap_or(0);
                        cycles.push(stack[pos..].iter().map(|&(x, _)| x).collect());
                    }
                    _ => {}
                }
            } else {
                color[u] = BLACK;
                stack.pop();
            }
        }
    }
    cycles
}
