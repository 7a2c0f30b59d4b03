//! The HLO text parser: XLA's format as JAX and XLA print it, and the forms XLA's own parser
//! (`hlo_parser.cc`) accepts beyond what it prints.
//!
//! Both dialects are accepted: the short pre-optimization form (`add.1 = f32[4]{0} add(x, y)`) and
//! XLA's optimized dumps (`%`-sigils, computation signatures, operand shapes in long form,
//! `/*index=N*/` comments, metadata, backend configs, and the `FileNames`/`FunctionNames`/
//! `FileLocations`/`StackFrames` debug tables before or after the computations). Computations may
//! come in any order and the ENTRY anywhere; instructions may refer to operands defined later in
//! their computation. Instruction names are scoped by computation, as in XLA: two computations
//! may both define `x` (the later one is renamed `x.N`, keeping names unique module-wide);
//! within one computation a duplicate is an error. Attributes the IR does not type are kept
//! verbatim.
//!
//! What XLA's parser accepts beyond its printer's output, read the way it reads it:
//! - no `HloModule` line: the text starts with a computation ([`starts_like_module`]); the module
//!   is named `module_` and the entry's name, and the header (`HloModule name`, optionally
//!   `name:`, then `, key=value` attributes) is otherwise as XLA prints it;
//! - an instruction without a result shape (`y = add(x, x)`) for the opcodes XLA infers shapes
//!   of ([`infers_shape`]); the shape is inferred once the module is read (operands may be
//!   defined later), and a `broadcast` without one takes its `dimensions` as sizes put before
//!   the operand's dimensions, as XLA does;
//! - operands written as nested instructions, with or without a shape and without attributes
//!   (`add(s32[] parameter(0), negate(x))`), created before their user and named
//!   `opcode.anon`, `opcode.anon.1`, ... (names no earlier instruction has);
//! - computations written inline as attribute values (`to_apply={...}`, and inside lists such as
//!   `branch_computations={{...}, b}`), scoped like any computation and named `_`, `_.1`, ...
//!   (names no named computation has) once the module is read;
//! - `broadcast` without `dimensions=` when its operand is a scalar (`dimensions={}`);
//! - `select` with a scalar predicate and array operands (the predicate picks a whole operand):
//!   the predicate is broadcast to the operands' dimensions by a new `broadcast` named as nested
//!   instructions are;
//! - a lone scalar as the literal of an array constant (`f32[4] constant(5)`): XLA stores it at
//!   the first element of a zero-filled literal, so it reads as `{5, 0, 0, 0}`;
//! - a computation signature's parameter list is read and not checked (XLA ignores it), while
//!   its result shape must be the root's; `, execution_thread="..."` after a computation is
//!   read and dropped (every computation runs on one thread here, which changes no value).
//!
//! Errors are [`ParseError`] values with a 1-based line and column; the parser never panics, and
//! nesting (nested instructions, inline computations) grows the stack on demand
//! ([`crate::stack::deep`]) rather than overflowing it.

use hashbrown::{HashMap, HashSet};
use std::fmt;

use crate::attrs::{Attr, AttrKey, AttrKind, AttrValue, ConvDims, WindowDim};
use crate::collective::{IotaGroups, ReplicaGroups};
use crate::literal::{complex_to_element, parse_element, ArrayLiteral, Literal};
use crate::memory::MemoryBudget;
use crate::module::{CompId, ConstValue, DebugTable, InstId, LayoutId, Module, ShapeId, SrcLoc};
use crate::name_index::NameIndex;
use crate::opcode::Opcode;
use crate::schedule::Schedule;
use crate::shape_inference::{infer_shape, OwnedShape};
use crate::types::{
    ArrayLayout, ArrayShape, ComparisonDirection, ComparisonType, ElementType, FusionKind, Layout,
    Shape,
};

/// A parse error at a 1-based line and column.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    /// Line, 1-based.
    pub line: u32,
    /// Column, 1-based.
    pub col: u32,
    /// What is wrong.
    pub msg: String,
    /// The text of the offending line.
    pub source_line: String,
}

impl ParseError {
    /// Renders the error as `FILE:LINE:COL: error: MSG`, the source line, and a caret.
    pub fn render(&self, file: &str) -> String {
        let caret = " ".repeat(self.col.saturating_sub(1) as usize);
        format!(
            "{file}:{}:{}: error: {}\n{}\n{caret}^\n",
            self.line, self.col, self.msg, self.source_line
        )
    }
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: error: {}", self.line, self.col, self.msg)
    }
}

impl std::error::Error for ParseError {}

type PResult<T> = Result<T, ParseError>;

/// Parses HLO text into a module.
pub fn parse_module(text: &str) -> Result<Module, ParseError> {
    let mut p = Parser::new(text);
    p.module()
}

/// Parses a shape with optional layout (`f32[2,3]{1,0}`, `(s32[], f32[4])`) into `m`'s tables.
pub fn parse_shape(m: &mut Module, text: &str) -> Result<(ShapeId, LayoutId), ParseError> {
    let mut p = Parser::new(text);
    p.skip_ws();
    let r = p.shape(m)?;
    p.skip_ws();
    if !p.at_end() {
        return Err(p.err("unexpected text after shape"));
    }
    Ok(r)
}

/// Whether HLO text starting with `b` starts like a module, as [`parse_module`] reads one: after
/// blanks and comments, `HloModule`, `ENTRY`, or a computation name (`[%]name`) followed by `{`
/// or by a signature's `(`; `None` while `b` is too short to tell. A reader streaming a file
/// can refuse text that is not HLO (binary data, another format) from its first bytes, and
/// [`parse_module`] reports the same text as not a module.
pub fn starts_like_module(b: &[u8]) -> Option<bool> {
    let mut i = skip_blanks(b, 0)?;
    for keyword in [&b"HloModule"[..], b"ENTRY"] {
        let n = (b.len() - i).min(keyword.len());
        if b[i..i + n] == keyword[..n] {
            match b.get(i + keyword.len()) {
                None => return None,
                Some(&c) if !is_name_byte(c) => return Some(true),
                // A longer name that starts like the keyword: a computation name.
                Some(_) => break,
            }
        }
    }
    if b[i] == b'%' {
        i += 1;
    }
    let start = i;
    while i < b.len() && is_name_byte(b[i]) {
        i += 1;
    }
    if i == b.len() {
        return None;
    }
    if i == start {
        return Some(false);
    }
    let i = skip_blanks(b, i)?;
    Some(matches!(b[i], b'{' | b'('))
}

/// The index of the first byte at or after `i` that is not a blank or inside a comment, or
/// `None` if `b` ends first (a longer text could go on).
fn skip_blanks(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        match b.get(i)? {
            b' ' | b'\t' | b'\r' | b'\n' => i += 1,
            b'/' => match b.get(i + 1)? {
                b'/' => i += b[i..].iter().position(|&c| c == b'\n')? + 1,
                b'*' => i += 2 + b[i + 2..].windows(2).position(|w| w == b"*/")? + 2,
                _ => return Some(i),
            },
            _ => return Some(i),
        }
    }
}

/// Whether XLA's parser infers the result shape of `op` when the text gives none (its
/// `CanInferShape`); the others (`reshape`, `convert`, `constant`, `parameter`, the
/// asynchronous and collective ops, ...) must be written with their shape.
pub fn infers_shape(op: Opcode) -> bool {
    use Opcode::*;
    matches!(
        op,
        Abs | Add
            | AddDependency
            | AfterAll
            | And
            | Atan2
            | BatchNormGrad
            | BatchNormInference
            | BatchNormTraining
            | Broadcast
            | Call
            | Cbrt
            | Ceil
            | Cholesky
            | Clamp
            | Clz
            | Compare
            | Complex
            | Concatenate
            | Conditional
            | Convolution
            | Copy
            | Cos
            | Divide
            | Domain
            | Dot
            | Erf
            | Exp
            | Expm1
            | Fft
            | Floor
            | Gather
            | GetDimensionSize
            | GetTupleElement
            | Imag
            | IsFinite
            | Log
            | Log1p
            | Logistic
            | Map
            | Maximum
            | Minimum
            | MulHi
            | Multiply
            | Negate
            | Not
            | OptBarrier
            | Or
            | Pad
            | PartitionId
            | Popcnt
            | Power
            | RaggedDot
            | Real
            | Reduce
            | ReduceWindow
            | Remainder
            | ReplicaId
            | Reverse
            | RoundNearestAfz
            | RoundNearestEven
            | Rsqrt
            | Scatter
            | Select
            | SelectAndScatter
            | SetDimensionSize
            | ShiftLeft
            | ShiftRightArithmetic
            | ShiftRightLogical
            | Sign
            | Sin
            | Sort
            | Sqrt
            | Subtract
            | Tan
            | Tanh
            | TopK
            | Transpose
            | TriangularSolve
            | Tuple
            | While
            | Xor
    )
}

/// A computation's signature: its result shape and where it is written (the parameter list is
/// read but not kept: XLA ignores it).
type Signature = (ShapeId, SrcLoc);

struct PendingOperand<'a> {
    inst: InstId,
    index: u32,
    name: &'a str,
    line: u32,
    line_start: u32,
    pos: u32,
}

struct PendingComp<'a> {
    inst: InstId,
    key: AttrKey,
    index: u32,
    name: &'a str,
    loc: SrcLoc,
}

struct PendingCtrl<'a> {
    inst: InstId,
    index: u32,
    name: &'a str,
    loc: SrcLoc,
}

struct Parser<'a> {
    src: &'a str,
    b: &'a [u8],
    pos: usize,
    line: u32,
    line_start: usize,
    /// `(line_start, pos, col)` of the last column computed, for [`Parser::col_of`].
    col_cache: std::cell::Cell<(usize, usize, u32)>,
    /// Shapes already parsed, by their exact text.
    shape_cache: HashMap<&'a str, (ShapeId, LayoutId)>,
    /// The last shape parsed through the cache (consecutive instructions often share one).
    last_shape: (&'a str, (ShapeId, LayoutId)),
    ops_buf: Vec<InstId>,
    attrs_buf: Vec<Attr>,
    /// Whether two computations define an instruction of the same name (allowed, as in XLA;
    /// the later ones are renamed once the module is parsed).
    shared_names: bool,
    /// Named computations by name (inline computations have none until the module is read).
    comp_by_name: HashMap<&'a str, CompId>,
    /// Instructions by name: an entry is the latest instruction of that name, except that the
    /// names an inline computation took over go back to their earlier instructions when it
    /// closes.
    inst_by_name: NameIndex,
    /// Computation names in attributes, resolved once the module is read.
    pending_comps: Vec<PendingComp<'a>>,
    /// Control predecessors, resolved at the end of their computation.
    pending_ctrl: Vec<PendingCtrl<'a>>,
    /// Instructions written without a result shape, with their opcode's location: inferred once
    /// the module is read (their shape is `ShapeId::NONE` until then).
    shapeless: Vec<(InstId, SrcLoc)>,
    /// `broadcast`s written without `dimensions=`, with their opcode's location.
    bare_broadcasts: Vec<(InstId, SrcLoc)>,
    /// Each `select` given a predicate broadcast ([`Self::broadcast_select_predicates`]): the
    /// broadcast.
    select_preds: HashMap<InstId, InstId>,
    /// The broadcasts of `select_preds`.
    select_pred_broadcasts: HashSet<InstId>,
    /// Signature result shapes to check against a root whose shape is inferred.
    pending_results: Vec<(CompId, ShapeId, SrcLoc)>,
    /// Computations written inline in attributes, in the order they were read.
    inline_comps: Vec<CompId>,
    /// How many inline computations enclose the text being read.
    inline_depth: usize,
    /// Instructions whose name an instruction of an inline computation took over in
    /// `inst_by_name`, put back when that computation closes.
    shadowed: Vec<InstId>,
    /// The next suffix to try for each opcode's generated `opcode.anon` names.
    anon_next: HashMap<Opcode, u64>,
    /// The memory that array constants written as one scalar take (their text does not bound
    /// their size); made on first use.
    fill_budget: Option<MemoryBudget>,
}

/// Renames instructions whose name an earlier instruction (in another computation) already has,
/// as XLA's name uniquer does: `name.N` with the smallest `N >= 1` that no instruction of the
/// module uses, so names are unique module-wide and printing re-parses to the same module.
fn uniquify_names(m: &mut Module) {
    let n = m.inst_capacity();
    // Names are borrowed from the module while the renames are chosen, and only renamed
    // instructions allocate: most of a large module keeps its name.
    let renames: Vec<(InstId, String)> = {
        let mut taken: HashSet<&str> = HashSet::with_capacity(n);
        let dups: Vec<InstId> = (0..n)
            .map(InstId::new)
            .filter(|&id| !taken.insert(m.name(id)))
            .collect();
        // `taken` now holds every name of the module; fresh names are only ever added, so the
        // smallest free suffix of a name never decreases, and each name's search resumes where
        // the last one stopped (linear in the number of renames, where restarting at 1 was
        // quadratic).
        let mut fresh_names: HashSet<String> = HashSet::with_capacity(dups.len());
        let mut next: HashMap<&str, u64> = HashMap::new();
        let mut out = Vec::with_capacity(dups.len());
        for id in dups {
            let name = m.name(id);
            let k = next.entry(name).or_insert(1);
            let fresh = loop {
                let cand = format!("{name}.{k}");
                *k += 1;
                if !taken.contains(cand.as_str()) && !fresh_names.contains(&cand) {
                    break cand;
                }
            };
            fresh_names.insert(fresh.clone());
            out.push((id, fresh));
        }
        out
    };
    for (id, name) in renames {
        m.set_name(id, &name);
    }
}

/// The number of characters starting in `bytes` (bytes that are not UTF-8 continuation bytes),
/// saturated to `u32`.
fn char_starts(bytes: &[u8]) -> u32 {
    let n = bytes.iter().filter(|&&b| (b & 0xC0) != 0x80).count();
    u32::try_from(n).unwrap_or(u32::MAX)
}

fn is_name_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, b'_' | b'.' | b'-' | b'$')
}

impl<'a> Parser<'a> {
    fn new(src: &'a str) -> Self {
        Parser {
            src,
            b: src.as_bytes(),
            pos: 0,
            line: 1,
            line_start: 0,
            col_cache: std::cell::Cell::new((0, 0, 1)),
            shape_cache: HashMap::new(),
            last_shape: ("", (ShapeId::NONE, LayoutId::NONE)),
            ops_buf: Vec::new(),
            attrs_buf: Vec::new(),
            shared_names: false,
            comp_by_name: HashMap::new(),
            inst_by_name: NameIndex::default(),
            pending_comps: Vec::new(),
            pending_ctrl: Vec::new(),
            shapeless: Vec::new(),
            bare_broadcasts: Vec::new(),
            select_preds: HashMap::new(),
            select_pred_broadcasts: HashSet::new(),
            pending_results: Vec::new(),
            inline_comps: Vec::new(),
            inline_depth: 0,
            shadowed: Vec::new(),
            anon_next: HashMap::new(),
            fill_budget: None,
        }
    }

    // ---- low level ----

    fn at_end(&self) -> bool {
        self.pos >= self.b.len()
    }

    fn peek(&self) -> u8 {
        *self.b.get(self.pos).unwrap_or(&0)
    }

    fn peek_at(&self, k: usize) -> u8 {
        *self.b.get(self.pos + k).unwrap_or(&0)
    }

    fn loc(&self) -> SrcLoc {
        self.loc_of(self.pos)
    }

    /// The location of byte `pos` on the current line. Computing a column counts the characters
    /// from the start of the line, so hot paths (literal elements, which can fill one line of
    /// many megabytes) keep the byte offset and call this only when they report an error.
    fn loc_of(&self, pos: usize) -> SrcLoc {
        SrcLoc {
            line: self.line,
            col: self.col_of(pos),
        }
    }

    /// The 1-based column of byte `pos` on the current line. Columns count characters, not
    /// bytes; they are counted from the last column asked for on the same line (positions
    /// mostly move forward), so a line of `n` bytes costs `O(n)` in all, not `O(n)` per call.
    fn col_of(&self, pos: usize) -> u32 {
        let ls = self.line_start;
        if pos <= ls {
            return 1;
        }
        let (cls, cpos, ccol) = self.col_cache.get();
        let col = if cls == ls && cpos >= ls {
            if pos >= cpos {
                ccol.saturating_add(char_starts(&self.b[cpos..pos]))
            } else {
                ccol.saturating_sub(char_starts(&self.b[pos..cpos]))
            }
        } else {
            1u32.saturating_add(char_starts(&self.b[ls..pos]))
        };
        self.col_cache.set((ls, pos, col));
        col
    }

    fn line_text(&self, line_start: usize) -> String {
        let rest = &self.src[line_start.min(self.src.len())..];
        rest.split('\n')
            .next()
            .unwrap_or("")
            .trim_end_matches('\r')
            .to_string()
    }

    fn err(&self, msg: impl Into<String>) -> ParseError {
        ParseError {
            line: self.line,
            col: self.col_of(self.pos.min(self.b.len())),
            msg: msg.into(),
            source_line: self.line_text(self.line_start),
        }
    }

    fn err_at(&self, loc: SrcLoc, msg: impl Into<String>) -> ParseError {
        // Find the start of line `loc.line` by scanning (errors only).
        let mut start = 0;
        let mut line = 1;
        if loc.line == self.line {
            start = self.line_start;
        } else {
            for (i, c) in self.b.iter().enumerate() {
                if line == loc.line {
                    break;
                }
                if *c == b'\n' {
                    line += 1;
                    start = i + 1;
                }
            }
        }
        ParseError {
            line: loc.line,
            col: loc.col,
            msg: msg.into(),
            source_line: self.line_text(start),
        }
    }

    fn err_at_pos(
        &self,
        line: u32,
        line_start: u32,
        pos: u32,
        msg: impl Into<String>,
    ) -> ParseError {
        let ls = line_start as usize;
        let col = self
            .src
            .get(ls..pos as usize)
            .map(|s| s.chars().count())
            .unwrap_or(0) as u32
            + 1;
        ParseError {
            line,
            col,
            msg: msg.into(),
            source_line: self.line_text(ls),
        }
    }

    /// An array shape parsed once per distinct text; tuples and odd forms go the long way.
    fn shape_cached(&mut self, m: &mut Module) -> PResult<(ShapeId, LayoutId)> {
        self.skip_ws();
        if !self.peek().is_ascii_alphabetic() {
            return self.shape(m);
        }
        let start = self.pos;
        let mut end = start;
        while end < self.b.len() && !matches!(self.b[end], b' ' | b'\n' | b'\r' | b'\t' | b'/') {
            end += 1;
        }
        let key = &self.src[start..end];
        if key == self.last_shape.0 {
            self.pos = end;
            return Ok(self.last_shape.1);
        }
        if let Some(&r) = self.shape_cache.get(key) {
            self.pos = end;
            self.last_shape = (key, r);
            return Ok(r);
        }
        let r = self.shape(m)?;
        if self.pos == end {
            self.shape_cache.insert(key, r);
            self.last_shape = (key, r);
        }
        Ok(r)
    }

    fn newline_at(&mut self, i: usize) {
        self.line += 1;
        self.line_start = i + 1;
    }

    /// Skips whitespace and `/* ... */` and `//` comments.
    fn skip_ws(&mut self) {
        loop {
            match self.peek() {
                b'\n' => {
                    self.newline_at(self.pos);
                    self.pos += 1;
                }
                b' ' | b'\t' | b'\r' => self.pos += 1,
                b'/' if self.peek_at(1) == b'*' => {
                    let mut i = self.pos + 2;
                    while i + 1 < self.b.len() && !(self.b[i] == b'*' && self.b[i + 1] == b'/') {
                        if self.b[i] == b'\n' {
                            self.newline_at(i);
                        }
                        i += 1;
                    }
                    self.pos = (i + 2).min(self.b.len());
                }
                b'/' if self.peek_at(1) == b'/' => {
                    while !self.at_end() && self.peek() != b'\n' {
                        self.pos += 1;
                    }
                }
                _ => return,
            }
        }
    }

    fn eat(&mut self, c: u8) -> bool {
        self.skip_ws();
        if self.peek() == c {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn describe_here(&self) -> String {
        if self.at_end() {
            return "end of file".to_string();
        }
        let rest = &self.src[self.pos..];
        let tok: String = if is_name_byte(self.peek()) {
            rest.chars()
                .take_while(|c| c.is_ascii() && is_name_byte(*c as u8))
                .take(40)
                .collect()
        } else {
            rest.chars().take(1).collect()
        };
        format!("'{tok}'")
    }

    fn expect(&mut self, c: u8, what: &str) -> PResult<()> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(self.err(format!(
                "expected '{}' {what}, found {}",
                c as char,
                self.describe_here()
            )))
        }
    }

    fn eat_str(&mut self, s: &str) -> bool {
        self.skip_ws();
        if self.src[self.pos..].starts_with(s) {
            let after = self.b.get(self.pos + s.len()).copied().unwrap_or(0);
            if s.as_bytes().last().is_some_and(|c| is_name_byte(*c)) && is_name_byte(after) {
                return false;
            }
            self.pos += s.len();
            true
        } else {
            false
        }
    }

    /// A name: `[%]` then letters, digits, `_ . - $`.
    fn name(&mut self, what: &str) -> PResult<&'a str> {
        self.skip_ws();
        if self.peek() == b'%' {
            self.pos += 1;
        }
        let start = self.pos;
        while is_name_byte(self.peek()) {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.err(format!("expected {what}, found {}", self.describe_here())));
        }
        Ok(&self.src[start..self.pos])
    }

    fn int(&mut self) -> PResult<i64> {
        self.skip_ws();
        let start = self.pos;
        if self.peek() == b'-' || self.peek() == b'+' {
            self.pos += 1;
        }
        while self.peek().is_ascii_digit() {
            self.pos += 1;
        }
        let t = &self.src[start..self.pos];
        t.parse::<i64>().map_err(|_| {
            self.pos = start;
            self.err(format!(
                "expected an integer, found {}",
                self.describe_here()
            ))
        })
    }

    fn int_list_braced(&mut self) -> PResult<Box<[i64]>> {
        self.expect(b'{', "to open a list of integers")?;
        let mut v = Vec::new();
        if !self.eat(b'}') {
            loop {
                v.push(self.int()?);
                if self.eat(b'}') {
                    break;
                }
                self.expect(b',', "between integers")?;
            }
        }
        Ok(v.into())
    }

    fn string(&mut self) -> PResult<String> {
        self.skip_ws();
        if self.peek() != b'"' {
            return Err(self.err(format!("expected a string, found {}", self.describe_here())));
        }
        let start_loc = self.loc();
        self.pos += 1;
        let mut out = String::new();
        loop {
            match self.peek() {
                0 if self.at_end() => return Err(self.err_at(start_loc, "unterminated string")),
                b'"' => {
                    self.pos += 1;
                    return Ok(out);
                }
                b'\\' => {
                    // The escaped character may take several bytes; the position stays on a
                    // character boundary.
                    self.pos += 1;
                    let Some(c) = self.src[self.pos..].chars().next() else {
                        return Err(self.err_at(start_loc, "unterminated string"));
                    };
                    self.pos += c.len_utf8();
                    match c {
                        'n' => out.push('\n'),
                        't' => out.push('\t'),
                        '"' | '\\' | '\'' => out.push(c),
                        other => {
                            out.push('\\');
                            out.push(other);
                        }
                    }
                }
                b'\n' => return Err(self.err_at(start_loc, "unterminated string")),
                _ => {
                    let ch = self.src[self.pos..].chars().next().unwrap_or('\0');
                    out.push(ch);
                    self.pos += ch.len_utf8().max(1);
                }
            }
        }
    }

    /// Scans a raw value verbatim: a balanced `{...}` (strings respected), a string, or a bare token
    /// up to the next top-level `,` `)` `}` or line end.
    fn raw_value(&mut self) -> PResult<&'a str> {
        self.skip_ws();
        let start = self.pos;
        let start_loc = self.loc();
        match self.peek() {
            b'{' | b'[' | b'(' => {
                let mut depth = 0i32;
                loop {
                    if self.at_end() {
                        return Err(
                            self.err_at(start_loc, "unbalanced brackets in attribute value")
                        );
                    }
                    let c = self.peek();
                    match c {
                        b'{' | b'[' | b'(' => depth += 1,
                        b'}' | b']' | b')' => {
                            depth -= 1;
                            if depth == 0 {
                                self.pos += 1;
                                break;
                            }
                        }
                        b'"' => {
                            self.string()?;
                            continue;
                        }
                        b'\n' => self.newline_at(self.pos),
                        _ => {}
                    }
                    self.pos += 1;
                }
            }
            b'"' => {
                self.string()?;
            }
            _ => {
                while !self.at_end()
                    && !matches!(self.peek(), b',' | b')' | b'}' | b'\n' | b' ' | b'\r')
                {
                    self.pos += 1;
                }
                if self.pos == start {
                    return Err(self.err(format!(
                        "expected an attribute value, found {}",
                        self.describe_here()
                    )));
                }
            }
        }
        Ok(&self.src[start..self.pos])
    }

    // ---- shapes ----

    fn shape(&mut self, m: &mut Module) -> PResult<(ShapeId, LayoutId)> {
        self.shape_nested(m, 0)
    }

    /// A shape inside `depth` enclosing tuples.
    fn shape_nested(&mut self, m: &mut Module, depth: usize) -> PResult<(ShapeId, LayoutId)> {
        self.skip_ws();
        if self.peek() == b'(' {
            if depth >= OwnedShape::MAX_TUPLE_DEPTH {
                return Err(self.err(format!(
                    "tuple shapes nested more than {} levels deep are not supported",
                    OwnedShape::MAX_TUPLE_DEPTH
                )));
            }
            self.pos += 1;
            let mut shapes = Vec::new();
            let mut layouts = Vec::new();
            let mut any_layout = false;
            if !self.eat(b')') {
                loop {
                    let (s, l) = self.shape_nested(m, depth + 1)?;
                    any_layout |= l != m.no_layout();
                    shapes.push(s);
                    layouts.push(l);
                    if self.eat(b')') {
                        break;
                    }
                    self.expect(b',', "between tuple element shapes")?;
                }
            }
            let s = m.intern_shape(Shape::Tuple(shapes.into()));
            let l = if any_layout {
                m.intern_layout(Layout::Tuple(layouts.into()))
            } else {
                m.no_layout()
            };
            return Ok((s, l));
        }
        let loc = self.loc();
        let start = self.pos;
        while self.peek().is_ascii_alphanumeric() {
            self.pos += 1;
        }
        let tname = &self.src[start..self.pos];
        if tname.is_empty() {
            return Err(self.err(format!("expected a shape, found {}", self.describe_here())));
        }
        if self.peek() != b'[' {
            self.pos = start;
            return Err(self.err(format!("expected a shape, found {}", self.describe_here())));
        }
        let ty = match tname {
            "token" | "opaque" => None,
            _ => Some(
                ElementType::from_name(tname)
                    .ok_or_else(|| self.err_at(loc, format!("unknown element type '{tname}'")))?,
            ),
        };
        self.pos += 1;
        let mut dims = Vec::new();
        let mut dynamic = Vec::new();
        self.skip_ws();
        if self.peek() != b']' {
            loop {
                self.skip_ws();
                if self.peek() == b'<' && self.peek_at(1) == b'=' {
                    self.pos += 2;
                    let dl = self.loc();
                    let d = self.int()?;
                    if d < 0 {
                        return Err(self.err_at(dl, format!("negative dimension bound {d}")));
                    }
                    dims.push(d);
                    dynamic.push(true);
                } else if self.peek() == b'?' {
                    self.pos += 1;
                    dims.push(-1);
                    dynamic.push(true);
                } else {
                    let dl = self.loc();
                    let d = self.int()?;
                    if d < 0 {
                        return Err(self.err_at(dl, format!("negative dimension size {d}")));
                    }
                    dims.push(d);
                    dynamic.push(false);
                }
                self.skip_ws();
                if self.peek() == b']' {
                    break;
                }
                self.expect(b',', "between dimension sizes")?;
            }
        }
        self.pos += 1; // ']'
        let Some(ty) = ty else {
            if !dims.is_empty() {
                return Err(self.err_at(loc, format!("{tname} shapes take no dimensions")));
            }
            let s = if tname == "token" {
                Shape::Token
            } else {
                Shape::Opaque
            };
            return Ok((m.intern_shape(s), m.no_layout()));
        };
        let rank = dims.len();
        let array = ArrayShape {
            ty,
            dims: dims.into(),
            dynamic: dynamic.into(),
        };
        if let Err(why) = array.validate() {
            return Err(self.err_at(loc, format!("shape {} {why}", &self.src[start..self.pos])));
        }
        let shape = Shape::Array(array);
        // A layout follows immediately, with no whitespace: `f32[2,3]{1,0}`.
        let layout = if self.peek() == b'{' {
            let l = self.layout(rank)?;
            m.intern_layout(Layout::Array(l))
        } else {
            m.no_layout()
        };
        Ok((m.intern_shape(shape), layout))
    }

    fn layout(&mut self, rank: usize) -> PResult<ArrayLayout> {
        let loc = self.loc();
        self.pos += 1; // '{'
        let mut m2m = Vec::new();
        self.skip_ws();
        while self.peek() != b'}' && self.peek() != b':' {
            m2m.push(self.int()?);
            self.skip_ws();
            if self.peek() == b',' {
                self.pos += 1;
                self.skip_ws();
            } else if self.peek() != b'}' && self.peek() != b':' {
                return Err(self.err(format!(
                    "expected ',' or '}}' in layout, found {}",
                    self.describe_here()
                )));
            }
        }
        let mut layout = ArrayLayout {
            minor_to_major: m2m.into(),
            ..Default::default()
        };
        if self.peek() == b':' {
            self.pos += 1;
            let mut tiles = Vec::new();
            let mut other = String::new();
            loop {
                self.skip_ws();
                match self.peek() {
                    b'}' => break,
                    b'T' if self.peek_at(1) == b'(' => {
                        self.pos += 1;
                        while self.peek() == b'(' {
                            self.pos += 1;
                            let mut tile = Vec::new();
                            loop {
                                self.skip_ws();
                                if self.peek() == b'*' {
                                    self.pos += 1;
                                    tile.push(i64::MIN);
                                } else {
                                    tile.push(self.int()?);
                                }
                                if self.eat(b')') {
                                    break;
                                }
                                self.expect(b',', "between tile sizes")?;
                            }
                            tiles.push(tile.into_boxed_slice());
                        }
                    }
                    b'S' if self.peek_at(1) == b'(' => {
                        self.pos += 2;
                        layout.memory_space = Some(self.int()?);
                        self.expect(b')', "to close the memory space")?;
                    }
                    0 => return Err(self.err_at(loc, "unterminated layout")),
                    _ => {
                        // Anything else (E(n), L(...), #(...), *(...)) is kept verbatim.
                        let start = self.pos;
                        let mut depth = 0;
                        while !self.at_end() {
                            match self.peek() {
                                b'(' => depth += 1,
                                b')' => {
                                    depth -= 1;
                                    if depth == 0 {
                                        self.pos += 1;
                                        break;
                                    }
                                }
                                b'}' if depth == 0 => break,
                                b'\n' => return Err(self.err_at(loc, "unterminated layout")),
                                _ => {}
                            }
                            self.pos += 1;
                        }
                        other.push_str(&self.src[start..self.pos]);
                    }
                }
            }
            layout.tiles = tiles.into();
            if !other.is_empty() {
                layout.other = Some(other.into());
            }
        }
        self.expect(b'}', "to close the layout")?;
        let m2m = &layout.minor_to_major;
        if m2m.len() != rank {
            return Err(self.err_at(
                loc,
                format!(
                    "layout has {} dimensions but the shape has rank {rank}",
                    m2m.len()
                ),
            ));
        }
        let mut seen = vec![false; rank];
        for &d in m2m.iter() {
            if d < 0 || d as usize >= rank || seen[d as usize] {
                return Err(self.err_at(
                    loc,
                    format!("layout {{{}}} is not a permutation of 0..{rank}", join(m2m)),
                ));
            }
            seen[d as usize] = true;
        }
        Ok(layout)
    }

    // ---- module ----

    fn module(&mut self) -> PResult<Module> {
        self.skip_ws();
        if starts_like_module(&self.b[self.pos..]) != Some(true) {
            return Err(self.err(format!(
                "expected 'HloModule' or a computation, found {}",
                self.describe_here()
            )));
        }
        let header = self.eat_str("HloModule");
        let mut m = Module::new("");
        let mut scheduled = false;
        if header {
            m.name = self.name("a module name")?.to_string();
            // Older XLA text puts a colon right after the name (`HloModule m:`).
            if self.peek() == b':' {
                self.pos += 1;
            }
            while self.eat(b',') {
                scheduled = self.header_attr(&mut m)?.unwrap_or(scheduled);
            }
        }
        // About one instruction per line: size the name map once instead of rehashing as it grows.
        let lines = self.b.iter().filter(|&&c| c == b'\n').count();
        self.inst_by_name = NameIndex::with_capacity(lines);
        m.reserve(lines, lines * 2, lines * 12);
        let mut entry_seen: Option<SrcLoc> = None;
        let mut last: Option<CompId> = None;
        loop {
            self.skip_ws();
            if self.at_end() {
                break;
            }
            if self.debug_table(&mut m)? {
                continue;
            }
            let loc = self.loc();
            let is_entry = self.eat_str("ENTRY");
            if is_entry {
                if let Some(prev) = entry_seen {
                    return Err(self.err_at(
                        loc,
                        format!(
                            "second ENTRY computation (the first is at line {})",
                            prev.line
                        ),
                    ));
                }
                entry_seen = Some(loc);
            }
            let c = self.computation(&mut m)?;
            if is_entry {
                m.set_entry(c);
            }
            last = Some(c);
        }
        let Some(last) = last else {
            return Err(self.err("the module has no computations"));
        };
        if m.entry().is_none() {
            // As in XLA, the last computation is the entry when none is marked.
            m.set_entry(last);
        }
        self.resolve_comps(&mut m)?;
        debug_assert!(self.pending_ctrl.is_empty());
        self.name_inline_comps(&mut m);
        self.infer_shapes(&mut m)?;
        self.complete_broadcasts(&mut m)?;
        self.broadcast_select_predicates(&mut m);
        for &(c, result, loc) in &self.pending_results {
            if m.shape_id(m.root(c)) != result {
                return Err(self.err_at(
                    loc,
                    format!(
                        "signature's result shape differs from the root of '{}'",
                        m.comp_name(c)
                    ),
                ));
            }
        }
        if !header {
            m.name = format!("module_{}", m.comp_name(m.entry()));
        }
        if self.shared_names {
            uniquify_names(&mut m);
        }
        if scheduled {
            let s = self.text_order_schedule(&m)?;
            m.set_schedule(s);
        }
        Ok(m)
    }

    /// One `key=value` attribute of the module header, after its comma; returns the value of
    /// `is_scheduled` when that is the key.
    fn header_attr(&mut self, m: &mut Module) -> PResult<Option<bool>> {
        let key = self.name("a module attribute")?;
        self.expect(b'=', "after the module attribute name")?;
        if key == "entry_computation_layout" {
            self.expect(b'{', "to open entry_computation_layout")?;
            self.expect(b'(', "to open the parameter shapes")?;
            let mut params = Vec::new();
            if !self.eat(b')') {
                loop {
                    params.push(self.shape(m)?);
                    if self.eat(b')') {
                        break;
                    }
                    self.expect(b',', "between parameter shapes")?;
                }
            }
            if !self.eat_str("->") {
                return Err(self.err(format!("expected '->', found {}", self.describe_here())));
            }
            let result = self.shape(m)?;
            self.expect(b'}', "to close entry_computation_layout")?;
            m.entry_layout = Some((params, result));
        } else if key == "is_scheduled" {
            // The text order of a scheduled module is its schedule (read once it is parsed).
            let vloc = self.loc();
            return match self.raw_value()? {
                "true" => Ok(Some(true)),
                "false" => Ok(Some(false)),
                v => Err(self.err_at(
                    vloc,
                    format!("is_scheduled must be true or false, found '{v}'"),
                )),
            };
        } else {
            let vloc = self.loc();
            let v = self.raw_value()?;
            if matches!(key, "replica_count" | "num_partitions")
                && !v.parse::<u32>().is_ok_and(|n| n >= 1)
            {
                return Err(self.err_at(
                    vloc,
                    format!("{key} must be a positive 32-bit integer, found '{v}'"),
                ));
            }
            m.header_attrs.push((key.to_string(), v.to_string()));
        }
        Ok(None)
    }

    /// Puts the computations that attributes name into those attributes.
    fn resolve_comps(&mut self, m: &mut Module) -> PResult<()> {
        let mut patches: Vec<(InstId, AttrKey, u32, CompId)> =
            Vec::with_capacity(self.pending_comps.len());
        for pc in &self.pending_comps {
            let Some(&c) = self.comp_by_name.get(pc.name) else {
                return Err(self.err_at(pc.loc, format!("unknown computation '{}'", pc.name)));
            };
            patches.push((pc.inst, pc.key.clone(), pc.index, c));
        }
        for (inst, key, index, c) in patches {
            let mut attrs = m.attrs(inst).to_vec();
            for (k, v) in attrs.iter_mut() {
                if *k == key {
                    match v {
                        AttrValue::Comp(x) => *x = c,
                        AttrValue::Comps(xs) => xs[index as usize] = c,
                        _ => {}
                    }
                }
            }
            m.set_attrs(inst, attrs);
        }
        Ok(())
    }

    /// Names the inline computations `_`, `_.1`, `_.2`, ... in the order they were read,
    /// skipping the names of named computations (as XLA's name uniquer does).
    fn name_inline_comps(&self, m: &mut Module) {
        let mut k = 0u64;
        for &c in &self.inline_comps {
            let name = loop {
                let cand = if k == 0 {
                    "_".to_string()
                } else {
                    format!("_.{k}")
                };
                k += 1;
                if !self.comp_by_name.contains_key(cand.as_str()) {
                    break cand;
                }
            };
            m.set_comp_name(c, &name);
        }
    }

    /// Infers the shapes of the instructions written without one, each after the operands and
    /// called computations' roots it depends on (forward references are allowed, so text order
    /// is not enough): a depth-first walk, in which reaching an instruction still open is a
    /// cycle.
    fn infer_shapes(&self, m: &mut Module) -> PResult<()> {
        if self.shapeless.is_empty() {
            return Ok(());
        }
        #[derive(Clone, Copy, PartialEq)]
        enum Mark {
            Open,
            Done,
        }
        let locs: HashMap<InstId, SrcLoc> = self.shapeless.iter().copied().collect();
        let mut mark: HashMap<InstId, Mark> = HashMap::with_capacity(locs.len());
        let mut stack: Vec<(InstId, bool)> = Vec::new();
        for &(first, _) in &self.shapeless {
            stack.push((first, false));
            while let Some((i, expanded)) = stack.pop() {
                if expanded {
                    self.infer_one(m, i, locs[&i])?;
                    mark.insert(i, Mark::Done);
                    continue;
                }
                match mark.get(&i) {
                    Some(Mark::Done) => continue,
                    Some(Mark::Open) => {
                        return Err(self.err_at(
                            locs[&i],
                            format!(
                                "cannot infer the shape of '{}': it depends on itself",
                                m.name(i)
                            ),
                        ))
                    }
                    None => {}
                }
                mark.insert(i, Mark::Open);
                stack.push((i, true));
                let deps = m
                    .operands(i)
                    .iter()
                    .copied()
                    .chain(m.called_comps_iter(i).map(|c| m.root(c)));
                for d in deps {
                    if locs.contains_key(&d) && mark.get(&d) != Some(&Mark::Done) {
                        stack.push((d, false));
                    }
                }
            }
        }
        Ok(())
    }

    /// Infers and sets the shape of shapeless instruction `i`, whose operands and called roots
    /// have shapes; `loc` is its opcode.
    fn infer_one(&self, m: &mut Module, i: InstId, loc: SrcLoc) -> PResult<()> {
        let name = m.name(i).to_string();
        let cannot =
            |why: String| self.err_at(loc, format!("cannot infer the shape of '{name}': {why}"));
        let shape = if m.opcode(i) == Opcode::Broadcast {
            // XLA reads a shapeless broadcast's `dimensions` as sizes to put before the
            // operand's dimensions (its verifier then checks them like any broadcast's).
            if m.operands(i).len() != 1 {
                let n = m.operands(i).len();
                return Err(cannot(format!("broadcast: expects 1 operand, got {n}")));
            }
            let dims = self.broadcast_dims(m, i, loc)?;
            let Some(a) = m.array_shape(m.operands(i)[0]) else {
                return Err(cannot(
                    "broadcast: the operand must be an array".to_string(),
                ));
            };
            let out = ArrayShape {
                ty: a.ty,
                dims: dims.iter().chain(a.dims.iter()).copied().collect(),
                dynamic: dims
                    .iter()
                    .map(|_| false)
                    .chain(a.dynamic.iter().copied())
                    .collect(),
            };
            if let Err(why) = out.validate() {
                return Err(cannot(format!("broadcast: the result {why}")));
            }
            OwnedShape::Array(out)
        } else {
            infer_shape(m, m.opcode(i), m.operands(i), m.attrs(i), None)
                .map_err(|e| cannot(e.to_string()))?
        };
        let id = shape.intern(m);
        let no_layout = m.no_layout();
        m.set_shape(i, id, no_layout);
        Ok(())
    }

    /// The `dimensions` of broadcast `i`; when it has none, its operand must be a scalar, and
    /// `dimensions={}` is added (XLA's default for a scalar).
    fn broadcast_dims(&self, m: &mut Module, i: InstId, loc: SrcLoc) -> PResult<Box<[i64]>> {
        if let Some(d) = m.ints_attr(i, &AttrKey::Dimensions) {
            return Ok(d.into());
        }
        let operand = match m.operands(i) {
            &[o] if !o.is_none() && !m.shape_id(o).is_none() => Some(o),
            _ => None,
        };
        let scalar = operand.is_some_and(|o| m.array_shape(o).is_some_and(|a| a.rank() == 0));
        if !scalar {
            let what = match operand {
                Some(o) => format!("broadcasts '{}', which is not a scalar", m.name(o)),
                None => format!("has {} operands, not 1", m.operands(i).len()),
            };
            return Err(self.err_at(
                loc,
                format!("broadcast '{}' needs dimensions=: it {what}", m.name(i)),
            ));
        }
        let mut attrs = m.attrs(i).to_vec();
        attrs.push((AttrKey::Dimensions, AttrValue::Ints(Box::new([]))));
        m.set_attrs(i, attrs);
        Ok(Box::new([]))
    }

    /// Gives the broadcasts written without `dimensions=` (and with a shape) their
    /// dimensions, once every shape is known.
    fn complete_broadcasts(&self, m: &mut Module) -> PResult<()> {
        for &(i, loc) in &self.bare_broadcasts {
            // A wrong operand count is the verifier's to report.
            if m.operands(i).len() == 1 {
                self.broadcast_dims(m, i, loc)?;
            }
        }
        Ok(())
    }

    /// Gives every `select` whose predicate is a scalar and whose operands are arrays of rank
    /// one or more (which XLA's shape inference accepts: the predicate picks whole operands) a
    /// predicate broadcast to the operands' dimensions, a new `broadcast` named as nested
    /// instructions are, once every shape is known.
    fn broadcast_select_predicates(&mut self, m: &mut Module) {
        let selects: Vec<InstId> = m
            .live_ids()
            .into_iter()
            .filter(|&i| m.opcode(i) == Opcode::Select && m.operands(i).len() == 3)
            .collect();
        for i in selects {
            let (p, t) = (m.operands(i)[0], m.operands(i)[1]);
            let (Shape::Array(ps), Shape::Array(ts)) = (m.shape(p), m.shape(t)) else {
                continue;
            };
            if ps.ty != ElementType::Pred || !ps.dims.is_empty() || ts.dims.is_empty() {
                continue;
            }
            let dims = ts.dims.to_vec();
            let shape = OwnedShape::Array(ArrayShape::new(ElementType::Pred, &dims)).intern(m);
            let name = self.anon_name(m, Opcode::Broadcast);
            let mut attrs = vec![(AttrKey::Dimensions, AttrValue::Ints(Box::new([])))];
            let no_layout = m.no_layout();
            let b = m.push_inst_parts(
                m.parent(i),
                Opcode::Broadcast,
                shape,
                no_layout,
                &[p],
                &mut attrs,
                &name,
            );
            if let Some(loc) = m.src_loc(i) {
                m.set_src_loc(b, loc);
            }
            self.inst_by_name.insert(m, b);
            m.set_operand(i, 0, b);
            self.select_preds.insert(i, b);
            self.select_pred_broadcasts.insert(b);
        }
    }

    /// The schedule of a module printed with `is_scheduled=true`: each computation's
    /// instructions in text order, which must then run every operand before its users.
    fn text_order_schedule(&self, m: &Module) -> PResult<Schedule> {
        let mut s = Schedule::new();
        let mut seen = vec![false; m.inst_capacity()];
        let mut by_comp = m.insts_by_comp();
        for (c, insts) in by_comp.iter_mut() {
            if !m.is_live_comp(c) {
                continue;
            }
            // A select's generated predicate broadcast (made after the text was read) runs
            // just before the select.
            let mut insts: Vec<InstId> = std::mem::take(insts)
                .into_iter()
                .filter(|i| !self.select_pred_broadcasts.contains(i))
                .collect();
            let mut k = 0;
            while k < insts.len() {
                if let Some(&b) = self.select_preds.get(&insts[k]) {
                    if m.parent(b) == c {
                        insts.insert(k, b);
                        k += 1;
                    }
                }
                k += 1;
            }
            for &i in &insts {
                let deps = m.operands(i).iter().chain(m.control_predecessors(i));
                for &d in deps {
                    if !d.is_none() && m.is_live(d) && m.parent(d) == c && !seen[d.index()] {
                        let loc = m.src_loc(i).unwrap_or(SrcLoc { line: 1, col: 1 });
                        return Err(self.err_at(
                            loc,
                            format!(
                                "the module is scheduled (is_scheduled=true), but %{} comes before %{}, which it depends on",
                                m.name(i),
                                m.name(d)
                            ),
                        ));
                    }
                }
                seen[i.index()] = true;
            }
            s.set_sequence(c, insts);
        }
        Ok(s)
    }

    /// Parses one debug table if one starts here.
    fn debug_table(&mut self, m: &mut Module) -> PResult<bool> {
        let titles = ["FileNames", "FunctionNames", "FileLocations", "StackFrames"];
        let Some(title) = titles.iter().find(|t| {
            self.src[self.pos..].starts_with(**t)
                && !is_name_byte(self.b.get(self.pos + t.len()).copied().unwrap_or(0))
        }) else {
            return Ok(false);
        };
        self.pos += title.len();
        let mut lines = Vec::new();
        loop {
            self.skip_ws();
            if !self.peek().is_ascii_digit() {
                break;
            }
            let start = self.pos;
            self.int()?;
            // The rest of the line: a string or a braced record.
            self.skip_ws();
            match self.peek() {
                b'"' => {
                    self.string()?;
                }
                b'{' => {
                    self.raw_value()?;
                }
                _ => {
                    return Err(self.err(format!(
                        "expected a string or '{{' in the {title} table, found {}",
                        self.describe_here()
                    )))
                }
            }
            lines.push(self.src[start..self.pos].into());
        }
        m.debug_tables.push(DebugTable {
            title: (*title).into(),
            lines,
        });
        Ok(true)
    }

    /// A named computation: `name (signature)? { instructions } (, execution_thread="...")?`.
    fn computation(&mut self, m: &mut Module) -> PResult<CompId> {
        self.skip_ws();
        let loc = self.loc();
        let name = self.name("a computation name")?;
        if self.comp_by_name.contains_key(name) {
            return Err(self.err_at(loc, format!("duplicate computation name '{name}'")));
        }
        let c = m.add_computation(name);
        m.set_comp_src_loc(c, loc);
        self.comp_by_name.insert(name, c);
        // Optional signature: `(p: shape, ...) -> shape`. XLA reads the parameters and checks
        // only the result against the root.
        let mut signature: Option<Signature> = None;
        self.skip_ws();
        if self.peek() == b'(' {
            self.pos += 1;
            if !self.eat(b')') {
                loop {
                    self.name("a parameter name")?;
                    self.expect(b':', "after the parameter name")?;
                    self.shape(m)?;
                    if self.eat(b')') {
                        break;
                    }
                    self.expect(b',', "between parameters")?;
                }
            }
            if !self.eat_str("->") {
                return Err(self.err(format!(
                    "expected '->' after the parameter list, found {}",
                    self.describe_here()
                )));
            }
            self.skip_ws();
            let rl = self.loc();
            let (r, _) = self.shape(m)?;
            signature = Some((r, rl));
        }
        let label = format!("computation '{name}'");
        let root = self.body(m, c, &label, &format!("'{name}'"), loc)?;
        if let Some((result, rloc)) = signature {
            if m.shape_id(root).is_none() {
                // The root's shape is inferred once the module is read.
                self.pending_results.push((c, result, rloc));
            } else if m.shape_id(root) != result {
                return Err(self.err_at(
                    rloc,
                    format!("signature's result shape differs from the root of '{name}'"),
                ));
            }
        }
        // Computation attributes, as XLA reads them: only the execution thread, dropped.
        while self.eat(b',') {
            self.skip_ws();
            let kloc = self.loc();
            let key = self.name("a computation attribute")?;
            if key != "execution_thread" {
                return Err(self.err_at(
                    kloc,
                    format!("unknown computation attribute '{key}' (only execution_thread)"),
                ));
            }
            self.expect(b'=', "after the attribute name")?;
            self.string()?;
        }
        Ok(c)
    }

    /// A computation written inline as an attribute value (`to_apply={...}`): a body without
    /// name or signature, whose instructions see only each other's names.
    fn inline_computation(&mut self, m: &mut Module) -> PResult<CompId> {
        self.skip_ws();
        let loc = self.loc();
        let c = m.add_computation("_");
        m.set_comp_src_loc(c, loc);
        self.inline_comps.push(c);
        let shadow_start = self.shadowed.len();
        self.inline_depth += 1;
        let label = format!("the computation inline at line {}", loc.line);
        let r = crate::stack::deep(|| self.body(m, c, &label, &label, loc));
        self.inline_depth -= 1;
        // The enclosing computation's names resolve to its own instructions again.
        let shadowed: Vec<InstId> = self.shadowed.drain(shadow_start..).rev().collect();
        for prev in shadowed {
            self.inst_by_name.insert(m, prev);
        }
        r?;
        Ok(c)
    }

    /// The `{ instructions }` of computation `c` (`label` names it in messages as a subject,
    /// `place` after "in"; `loc` is where it starts): reads the instructions, resolves the
    /// operands and control predecessors within it, and sets and returns its root.
    fn body(
        &mut self,
        m: &mut Module,
        c: CompId,
        label: &str,
        place: &str,
        loc: SrcLoc,
    ) -> PResult<InstId> {
        self.expect(b'{', "to open the computation body")?;
        let ctrl_start = self.pending_ctrl.len();
        let mut pending: Vec<PendingOperand<'a>> = Vec::new();
        let mut root: Option<(InstId, SrcLoc)> = None;
        let mut last: Option<InstId> = None;
        loop {
            self.skip_ws();
            if self.eat(b'}') {
                break;
            }
            if self.at_end() {
                return Err(self.err(format!(
                    "unexpected end of file: {label} is not closed with '}}'"
                )));
            }
            let iloc = self.loc();
            let is_root = self.eat_str("ROOT");
            let id = self.instruction(m, c, &mut pending)?;
            if is_root {
                if let Some((_, prev)) = root {
                    return Err(self.err_at(
                        iloc,
                        format!(
                            "{label} has a second ROOT (the first is at line {})",
                            prev.line
                        ),
                    ));
                }
                root = Some((id, iloc));
            }
            last = Some(id);
        }
        // Resolve operands within this computation.
        for po in &pending {
            let target = match self.inst_by_name.get(m, po.name) {
                Some(t) if m.parent(t) == c => t,
                Some(_) => {
                    return Err(self.err_at_pos(
                        po.line,
                        po.line_start,
                        po.pos,
                        format!(
                            "operand '{}' is defined in another computation, not in {place}",
                            po.name
                        ),
                    ))
                }
                None => {
                    return Err(self.err_at_pos(
                        po.line,
                        po.line_start,
                        po.pos,
                        format!("use of undefined instruction '{}'", po.name),
                    ))
                }
            };
            m.set_operand(po.inst, po.index as usize, target);
        }
        // Control predecessors, also within this computation.
        let ctrl: Vec<PendingCtrl<'a>> = self.pending_ctrl.drain(ctrl_start..).collect();
        for pc in ctrl {
            let target = match self.inst_by_name.get(m, pc.name) {
                Some(t) if m.parent(t) == c => t,
                Some(_) => {
                    return Err(self.err_at(
                        pc.loc,
                        format!(
                            "control predecessor '{}' is in another computation",
                            pc.name
                        ),
                    ))
                }
                None => {
                    return Err(self.err_at(pc.loc, format!("unknown instruction '{}'", pc.name)))
                }
            };
            let mut attrs = m.attrs(pc.inst).to_vec();
            for (k, v) in attrs.iter_mut() {
                if let (AttrKey::ControlPredecessors, AttrValue::Insts(xs)) = (k, v) {
                    xs[pc.index as usize] = target;
                }
            }
            m.set_attrs(pc.inst, attrs);
        }
        let Some(root) = root.map(|r| r.0).or(last) else {
            return Err(self.err_at(loc, format!("{label} has no instructions")));
        };
        m.set_root(c, root);
        Ok(root)
    }

    /// One instruction line of computation `c`: `name = ` and the rest
    /// ([`Parser::instruction_rhs`]).
    fn instruction(
        &mut self,
        m: &mut Module,
        c: CompId,
        pending: &mut Vec<PendingOperand<'a>>,
    ) -> PResult<InstId> {
        self.skip_ws();
        let loc = self.loc();
        let name = self.name("an instruction name")?;
        self.expect(b'=', "after the instruction name")?;
        self.instruction_rhs(m, c, Some(name), loc, pending)
    }

    /// Whether a shape starts here: a tuple's `(`, or a word followed by `[` (an opcode never
    /// is).
    fn at_shape(&self) -> bool {
        if self.peek() == b'(' {
            return true;
        }
        let mut i = self.pos;
        while i < self.b.len() && self.b[i].is_ascii_alphanumeric() {
            i += 1;
        }
        i > self.pos && self.b.get(i) == Some(&b'[')
    }

    /// An instruction after its `name =` (`name` is `None` for a nested instruction, which takes
    /// no attributes and gets a generated name): an optional shape, the opcode, the operands and
    /// the attributes. `loc` is where the instruction starts; operands not yet defined go to
    /// `pending`.
    fn instruction_rhs(
        &mut self,
        m: &mut Module,
        c: CompId,
        name: Option<&'a str>,
        loc: SrcLoc,
        pending: &mut Vec<PendingOperand<'a>>,
    ) -> PResult<InstId> {
        self.skip_ws();
        let shaped = if self.at_shape() {
            Some(self.shape_cached(m)?)
        } else {
            None
        };
        self.skip_ws();
        let oloc = self.loc();
        let start = self.pos;
        while is_name_byte(self.peek()) {
            self.pos += 1;
        }
        let opname = &self.src[start..self.pos];
        if opname.is_empty() {
            let what = if shaped.is_some() {
                "an opcode"
            } else {
                "a shape or an opcode"
            };
            return Err(self.err(format!("expected {what}, found {}", self.describe_here())));
        }
        let Some(opcode) = Opcode::from_name(opname) else {
            let msg = if shaped.is_some() {
                format!("unknown opcode '{opname}'")
            } else {
                format!("expected a shape or an opcode, found '{opname}'")
            };
            return Err(self.err_at(oloc, msg));
        };
        if shaped.is_none() && !infers_shape(opcode) {
            return Err(self.err_at(
                oloc,
                format!("the shape of {opname} cannot be inferred: write it before the opcode"),
            ));
        }
        let (shape, layout) = shaped.unwrap_or((ShapeId::NONE, m.no_layout()));
        self.expect(b'(', "after the opcode")?;
        // Pending entries made for this instruction carry `InstId::NONE` until it exists
        // (nested instructions and inline computations, read in between, create theirs first
        // and fill in their own).
        let (pending_start, comps_start, ctrl_start) = (
            pending.len(),
            self.pending_comps.len(),
            self.pending_ctrl.len(),
        );
        let mut operands = std::mem::take(&mut self.ops_buf);
        operands.clear();
        let mut attrs = std::mem::take(&mut self.attrs_buf);
        attrs.clear();
        let mut constant = None;
        match opcode {
            Opcode::Parameter => {
                let pl = self.loc();
                let n = self.int()?;
                if n < 0 {
                    return Err(self.err_at(pl, format!("negative parameter number {n}")));
                }
                attrs.push((AttrKey::ParameterNumber, AttrValue::Int(n)));
                self.expect(b')', "after the parameter number")?;
            }
            Opcode::Constant => {
                let v = self.literal(m, shape)?;
                constant = Some(v);
                self.expect(b')', "after the constant's literal")?;
            }
            _ => {
                if !self.eat(b')') {
                    loop {
                        let op = self.operand(m, c, pending, operands.len())?;
                        operands.push(op);
                        if self.eat(b')') {
                            break;
                        }
                        self.expect(b',', "between operands")?;
                    }
                }
            }
        }
        // Attributes (a nested instruction has none: a comma after it separates operands).
        while name.is_some() && self.eat(b',') {
            let kloc = self.loc();
            let key = self.name("an attribute name")?;
            self.expect(b'=', "after the attribute name")?;
            let k = AttrKey::from_name(key);
            if k == AttrKey::ParameterNumber {
                return Err(self.err_at(kloc, "unknown attribute 'parameter_number'"));
            }
            if attrs.iter().any(|(x, _)| *x == k) {
                return Err(self.err_at(kloc, format!("duplicate attribute '{key}'")));
            }
            let v = self.attr_value(m, &k)?;
            attrs.push((k, v));
        }
        let bare_broadcast =
            opcode == Opcode::Broadcast && !attrs.iter().any(|(k, _)| *k == AttrKey::Dimensions);
        let generated;
        let name = match name {
            Some(n) => n,
            None => {
                generated = self.anon_name(m, opcode);
                &generated
            }
        };
        let id = m.push_inst_parts(c, opcode, shape, layout, &operands, &mut attrs, name);
        // The buffers go back for the next instruction: parsing allocates nothing per line.
        self.ops_buf = operands;
        self.attrs_buf = attrs;
        for p in &mut pending[pending_start..] {
            if p.inst.is_none() {
                p.inst = id;
            }
        }
        for p in &mut self.pending_comps[comps_start..] {
            if p.inst.is_none() {
                p.inst = id;
            }
        }
        for p in &mut self.pending_ctrl[ctrl_start..] {
            if p.inst.is_none() {
                p.inst = id;
            }
        }
        m.set_src_loc(id, loc);
        if let Some(v) = constant {
            m.set_constant(id, v);
        }
        if shape.is_none() {
            self.shapeless.push((id, oloc));
        }
        if bare_broadcast {
            self.bare_broadcasts.push((id, oloc));
        }
        if let Some(prev) = self.inst_by_name.insert(m, id) {
            if m.parent(prev) == c {
                let pl = m.src_loc(prev).map(|l| l.line).unwrap_or(0);
                return Err(self.err_at(
                    loc,
                    format!("duplicate instruction name '{name}' (first defined at line {pl})"),
                ));
            }
            // Names are scoped by computation in the text (this computation's operands now
            // resolve to the new instruction); the module renames the later one.
            self.shared_names = true;
            if self.inline_depth > 0 {
                self.shadowed.push(prev);
            }
        }
        Ok(id)
    }

    /// Operand `index` of an instruction of computation `c`: a name, optionally after its shape
    /// (the long form), or a nested instruction (`negate(x)`, `f32[] constant(1)`), created
    /// now. A name not yet defined in `c` goes to `pending` (its instruction is filled in
    /// when that exists) and reads as `InstId::NONE` until the computation is closed.
    fn operand(
        &mut self,
        m: &mut Module,
        c: CompId,
        pending: &mut Vec<PendingOperand<'a>>,
        index: usize,
    ) -> PResult<InstId> {
        self.skip_ws();
        let start = (self.pos, self.line, self.line_start);
        let start_loc = self.loc();
        // Long form: an operand may be preceded by its shape.
        if (self.peek() == b'(' || self.looks_like_shape()) && self.shape(m).is_err() {
            (self.pos, self.line, self.line_start) = start;
        }
        self.skip_ws();
        let (line, line_start, pos) = (self.line, self.line_start as u32, self.pos as u32);
        let oname = self.name("an operand name")?;
        self.skip_ws();
        if self.peek() == b'(' {
            // An opcode and its operands: a nested instruction, read again from its shape.
            (self.pos, self.line, self.line_start) = start;
            return crate::stack::deep(|| self.instruction_rhs(m, c, None, start_loc, pending));
        }
        // An operand already defined in this computation resolves now (names are unique within
        // a computation, so no later line can change it, and its table slot was just touched,
        // so the lookup is cheap); the rest (forward references, and names another computation
        // defined first) wait for the end of the computation.
        match self.inst_by_name.get(m, oname) {
            Some(t) if m.parent(t) == c => Ok(t),
            _ => {
                pending.push(PendingOperand {
                    inst: InstId::NONE,
                    index: index as u32,
                    name: oname,
                    line,
                    line_start,
                    pos,
                });
                Ok(InstId::NONE)
            }
        }
    }

    /// A name for a nested instruction: `opcode.anon`, else `opcode.anon.N` with the smallest
    /// `N` no instruction read so far has (XLA's name uniquer, which also refuses a later
    /// instruction of the same computation that takes the name).
    fn anon_name(&mut self, m: &Module, opcode: Opcode) -> String {
        let k = self.anon_next.entry(opcode).or_insert(0);
        loop {
            let cand = if *k == 0 {
                format!("{}.anon", opcode.name())
            } else {
                format!("{}.anon.{k}", opcode.name())
            };
            *k += 1;
            if self.inst_by_name.get(m, &cand).is_none() {
                return cand;
            }
        }
    }

    fn looks_like_shape(&self) -> bool {
        let mut i = self.pos;
        while i < self.b.len() && self.b[i].is_ascii_alphanumeric() {
            i += 1;
        }
        if i >= self.b.len() || self.b[i] != b'[' {
            return false;
        }
        let t = &self.src[self.pos..i];
        t == "token" || t == "opaque" || ElementType::from_name(t).is_some()
    }

    /// The value of attribute `key` of the instruction being read. Names of computations and
    /// control predecessors are resolved later: their pending entries carry `InstId::NONE`
    /// until the instruction exists.
    fn attr_value(&mut self, m: &mut Module, key: &AttrKey) -> PResult<AttrValue> {
        let inst = InstId::NONE;
        // A scalar's padding has no dimensions: the printer (like XLA's) writes `padding=` with
        // nothing before the next attribute or the end of the line.
        let rest = self.src[self.pos..].trim_start_matches([' ', '\t']);
        if key.kind() == AttrKind::Padding
            && (rest.is_empty() || rest.starts_with([',', '\n', '\r', '}']))
        {
            return Ok(AttrValue::Padding(Box::new([])));
        }
        self.skip_ws();
        let vloc = self.loc();
        let bad = |p: &Self, what: &str| {
            p.err_at(
                vloc,
                format!(
                    "invalid value for attribute '{}': expected {what}",
                    key.name()
                ),
            )
        };
        Ok(match key.kind() {
            AttrKind::Int => AttrValue::Int(self.int().map_err(|_| bad(self, "an integer"))?),
            AttrKind::Ints => AttrValue::Ints(self.int_list_braced()?),
            AttrKind::Bool => {
                let w = self
                    .name("true or false")
                    .map_err(|_| bad(self, "true or false"))?;
                match w {
                    "true" => AttrValue::Bool(true),
                    "false" => AttrValue::Bool(false),
                    _ => return Err(bad(self, "true or false")),
                }
            }
            AttrKind::Ident => AttrValue::Ident(self.name("a value")?.into()),
            AttrKind::Str => AttrValue::Str(self.string()?.into()),
            AttrKind::Slice => AttrValue::Slice(self.slice_value()?),
            AttrKind::Padding => {
                let raw = self.raw_value()?;
                AttrValue::Padding(
                    parse_padding(raw).ok_or_else(|| bad(self, "padding like 0_0x1_2_1"))?,
                )
            }
            AttrKind::Window => AttrValue::Window(self.window_value()?),
            AttrKind::DimLabels => {
                let raw = self.raw_value()?;
                AttrValue::DimLabels(Box::new(
                    parse_dim_labels(raw)
                        .ok_or_else(|| bad(self, "dimension labels like b01f_01io->b01f"))?,
                ))
            }
            AttrKind::Direction => {
                let w = self.name("a comparison direction")?;
                AttrValue::Direction(
                    ComparisonDirection::from_name(w)
                        .ok_or_else(|| bad(self, "one of EQ, NE, LT, LE, GT, GE"))?,
                )
            }
            AttrKind::CmpType => {
                let w = self.name("a comparison type")?;
                AttrValue::CmpType(
                    ComparisonType::from_name(w)
                        .ok_or_else(|| bad(self, "one of FLOAT, TOTALORDER, SIGNED, UNSIGNED"))?,
                )
            }
            AttrKind::FusionKind => {
                let w = self.name("a fusion kind")?;
                AttrValue::FusionKind(
                    FusionKind::from_name(w)
                        .ok_or_else(|| bad(self, "one of kLoop, kInput, kOutput, kCustom"))?,
                )
            }
            AttrKind::Comp if self.peek() == b'{' => AttrValue::Comp(self.inline_computation(m)?),
            AttrKind::Comp => {
                let l = self.loc();
                let n = self.name("a computation name")?;
                self.pending_comps.push(PendingComp {
                    inst,
                    key: key.clone(),
                    index: 0,
                    name: n,
                    loc: l,
                });
                AttrValue::Comp(CompId::NONE)
            }
            AttrKind::Comps => {
                self.expect(b'{', "to open a list of computations")?;
                let mut v = Vec::new();
                if !self.eat(b'}') {
                    loop {
                        self.skip_ws();
                        if self.peek() == b'{' {
                            v.push(self.inline_computation(m)?);
                        } else {
                            let l = self.loc();
                            let n = self.name("a computation name")?;
                            self.pending_comps.push(PendingComp {
                                inst,
                                key: key.clone(),
                                index: v.len() as u32,
                                name: n,
                                loc: l,
                            });
                            v.push(CompId::NONE);
                        }
                        if self.eat(b'}') {
                            break;
                        }
                        self.expect(b',', "between computation names")?;
                    }
                }
                AttrValue::Comps(v.into())
            }
            AttrKind::Insts => {
                self.expect(b'{', "to open a list of instructions")?;
                let mut v = Vec::new();
                if !self.eat(b'}') {
                    loop {
                        let l = self.loc();
                        let n = self.name("an instruction name")?;
                        self.pending_ctrl.push(PendingCtrl {
                            inst,
                            index: v.len() as u32,
                            name: n,
                            loc: l,
                        });
                        v.push(InstId::NONE);
                        if self.eat(b'}') {
                            break;
                        }
                        self.expect(b',', "between instruction names")?;
                    }
                }
                AttrValue::Insts(v.into())
            }
            AttrKind::ReplicaGroups => {
                let g = self.replica_groups()?;
                g.validate().map_err(|e| self.err_at(vloc, e))?;
                AttrValue::ReplicaGroups(Box::new(g))
            }
            AttrKind::Pairs => {
                let lists = self.int_lists_braced()?;
                let mut pairs = Vec::with_capacity(lists.len());
                for l in lists {
                    match *l {
                        [s, t] if s >= 0 && t >= 0 => pairs.push([s, t]),
                        _ => return Err(bad(self, "pairs of non-negative ids like {{0,1},{1,0}}")),
                    }
                }
                AttrValue::Pairs(pairs.into())
            }
            AttrKind::Raw => AttrValue::Raw(self.raw_value()?.into()),
        })
    }

    /// `{{0,1},{2}}` (or `{}`): a braced list of braced integer lists.
    fn int_lists_braced(&mut self) -> PResult<Vec<Box<[i64]>>> {
        self.expect(b'{', "to open a list of integer lists")?;
        let mut v = Vec::new();
        if !self.eat(b'}') {
            loop {
                v.push(self.int_list_braced()?);
                if self.eat(b'}') {
                    break;
                }
                self.expect(b',', "between integer lists")?;
            }
        }
        Ok(v)
    }

    /// `[a,b,...]`: a bracketed, non-empty list of integers.
    fn int_list_bracketed(&mut self, what: &str) -> PResult<Box<[i64]>> {
        self.expect(b'[', what)?;
        let mut v = Vec::new();
        loop {
            v.push(self.int()?);
            if self.eat(b']') {
                break;
            }
            self.expect(b',', "between integers")?;
        }
        Ok(v.into())
    }

    /// `replica_groups`: explicit lists, or the iota form `[G,S]<=[dims]` with an optional
    /// `T(perm)`.
    fn replica_groups(&mut self) -> PResult<ReplicaGroups> {
        self.skip_ws();
        if self.peek() != b'[' {
            return Ok(ReplicaGroups::List(self.int_lists_braced()?.into()));
        }
        let gs_loc = self.loc();
        let gs = self.int_list_bracketed("to open the iota groups' [count,size]")?;
        let [num_groups, group_size] = *gs else {
            return Err(self.err_at(
                gs_loc,
                "the iota form of replica groups starts with [group count,group size]",
            ));
        };
        if !self.eat_str("<=") {
            return Err(self.err(format!(
                "expected '<=' in the iota form of replica groups, found {}",
                self.describe_here()
            )));
        }
        let reshape_dims = self.int_list_bracketed("to open the iota's reshape dimensions")?;
        let transpose = if self.peek() == b'T' {
            self.pos += 1;
            self.expect(b'(', "to open the transpose")?;
            let mut v = Vec::new();
            loop {
                v.push(self.int()?);
                if self.eat(b')') {
                    break;
                }
                self.expect(b',', "between transpose dimensions")?;
            }
            Some(v.into())
        } else {
            None
        };
        Ok(ReplicaGroups::Iota(IotaGroups {
            num_groups,
            group_size,
            reshape_dims,
            transpose,
        }))
    }

    fn slice_value(&mut self) -> PResult<Box<[[i64; 3]]>> {
        self.expect(b'{', "to open the slice")?;
        let mut v = Vec::new();
        if !self.eat(b'}') {
            loop {
                self.expect(b'[', "to open a slice dimension")?;
                let start = self.int()?;
                self.expect(b':', "after the slice start")?;
                let limit = self.int()?;
                let stride = if self.eat(b':') { self.int()? } else { 1 };
                self.expect(b']', "to close a slice dimension")?;
                v.push([start, limit, stride]);
                if self.eat(b'}') {
                    break;
                }
                self.expect(b',', "between slice dimensions")?;
            }
        }
        Ok(v.into())
    }

    fn window_value(&mut self) -> PResult<Box<[WindowDim]>> {
        self.expect(b'{', "to open the window")?;
        let mut dims: Vec<WindowDim> = Vec::new();
        let mut rank: Option<usize> = None;
        loop {
            self.skip_ws();
            if self.eat(b'}') {
                break;
            }
            let kloc = self.loc();
            let k = self.name("a window field")?;
            self.expect(b'=', "after the window field")?;
            self.skip_ws();
            let start = self.pos;
            while !self.at_end() && !matches!(self.peek(), b' ' | b'}' | b'\n' | b',') {
                self.pos += 1;
            }
            let raw = &self.src[start..self.pos];
            let parts: Vec<&str> = raw.split('x').collect();
            let n = parts.len();
            if let Some(r) = rank {
                if r != n {
                    return Err(self.err_at(
                        kloc,
                        format!("window field '{k}' has {n} dimensions but the window has {r}"),
                    ));
                }
            } else {
                rank = Some(n);
                dims = vec![WindowDim::default(); n];
            }
            let bad = |p: &Self| p.err_at(kloc, format!("invalid window field '{k}={raw}'"));
            for (d, part) in dims.iter_mut().zip(&parts) {
                match k {
                    "size" => d.size = part.parse().map_err(|_| bad(self))?,
                    "stride" => d.stride = part.parse().map_err(|_| bad(self))?,
                    "lhs_dilate" => d.lhs_dilate = part.parse().map_err(|_| bad(self))?,
                    "rhs_dilate" => d.rhs_dilate = part.parse().map_err(|_| bad(self))?,
                    "rhs_reversal" => {
                        d.reversal = match *part {
                            "1" => true,
                            "0" => false,
                            _ => return Err(bad(self)),
                        }
                    }
                    "pad" => {
                        let (lo, hi) = split_pad(part).ok_or_else(|| bad(self))?;
                        d.pad_lo = lo;
                        d.pad_hi = hi;
                    }
                    _ => return Err(self.err_at(kloc, format!("unknown window field '{k}'"))),
                }
            }
        }
        Ok(dims.into())
    }

    // ---- literals ----

    fn literal(&mut self, m: &Module, shape: ShapeId) -> PResult<ConstValue> {
        self.skip_ws();
        if self.src[self.pos..].starts_with("{...}") {
            self.pos += 5;
            return Ok(ConstValue::Elided);
        }
        Ok(ConstValue::Literal(self.literal_of(m, shape)?))
    }

    fn literal_of(&mut self, m: &Module, shape: ShapeId) -> PResult<Literal> {
        self.skip_ws();
        if let Shape::Array(a) = m.shape_of(shape) {
            if a.rank() > 0 && self.peek() != b'{' && !a.ty.is_complex() {
                let a = a.clone();
                return self.scalar_filled(a);
            }
        }
        self.skip_ws();
        let loc = self.loc();
        match m.shape_of(shape).clone() {
            Shape::Tuple(elems) => {
                self.expect(b'(', "to open a tuple literal")?;
                let mut out = Vec::new();
                for (i, e) in elems.iter().enumerate() {
                    if i > 0 {
                        self.expect(b',', "between tuple literal elements")?;
                    }
                    out.push(self.literal_of(m, *e)?);
                }
                self.expect(b')', "to close a tuple literal")?;
                Ok(Literal::Tuple(out))
            }
            Shape::Array(a) => {
                // Each element takes at least one byte of text, so the text left bounds what
                // to reserve (a huge shape with a short literal reserves little, and fails
                // on the count below).
                let left = self.b.len() - self.pos;
                let n = a.num_elements().max(0) as usize;
                let mut data = Vec::with_capacity(n.min(left) * a.ty.byte_size());
                let mut count = 0usize;
                if a.rank() == 0 {
                    self.scalar(a.ty, &mut data)?;
                    count = 1;
                } else {
                    self.nested(&a, &mut data, &mut count)?;
                }
                let n = a.num_elements().max(0) as usize;
                if count != n {
                    return Err(self.err_at(
                        loc,
                        format!("literal has {count} elements but the shape has {n}"),
                    ));
                }
                Ok(Literal::Array(ArrayLiteral { shape: a, data }))
            }
            _ => Err(self.err_at(loc, "constants of token or opaque type are not supported")),
        }
    }

    /// An array literal written as one scalar (`f32[4] constant(5)`), read as XLA's parser
    /// reads it: the value at linear index 0 of a zero-filled literal (its reader stores
    /// elements at a running index and does not stop at the missing braces), so `{5, 0, 0, 0}`.
    /// The data is not bounded by the text, so it is reserved under the memory ceiling first.
    fn scalar_filled(&mut self, a: ArrayShape) -> PResult<Literal> {
        let loc = self.loc();
        let n = a.num_elements().max(0) as u64;
        if n == 0 {
            return Err(self.err_at(
                loc,
                format!(
                    "a single value cannot be the literal of {}: the shape has no elements",
                    OwnedShape::Array(a)
                ),
            ));
        }
        let width = a.ty.byte_size();
        let mut first = Vec::with_capacity(width);
        self.scalar(a.ty, &mut first)?;
        let bytes = n.saturating_mul(width as u64);
        let what = || format!("the constant at line {}", loc.line);
        let budget = match &mut self.fill_budget {
            Some(b) => b,
            None => {
                let b = MemoryBudget::new().map_err(|e| self.err_at(loc, e))?;
                self.fill_budget.insert(b)
            }
        };
        budget
            .reserve(bytes, what)
            .map_err(|e| self.err_at(loc, e.to_string()))?;
        let mut data =
            crate::memory::try_zeroed(bytes, what).map_err(|e| self.err_at(loc, e.to_string()))?;
        data[..width].copy_from_slice(&first);
        Ok(Literal::Array(ArrayLiteral { shape: a, data }))
    }

    /// The nested braces of an array literal of rank >= 1, iteratively (a rank-100000 shape
    /// must not recurse 100000 deep): `open[d]` counts the elements of the open list at depth
    /// `d`, checked against the shape when the list closes.
    fn nested(&mut self, a: &ArrayShape, data: &mut Vec<u8>, count: &mut usize) -> PResult<()> {
        let rank = a.rank();
        let mut open: Vec<i64> = Vec::new();
        self.expect(b'{', "to open an array literal")?;
        open.push(0);
        let mut just_opened = true;
        loop {
            let closed_empty = just_opened && self.eat(b'}');
            if closed_empty {
                if self.close_literal_list(a, &mut open)? {
                    return Ok(());
                }
            } else if open.len() < rank {
                self.expect(b'{', "to open an array literal")?;
                open.push(0);
                just_opened = true;
                continue;
            } else {
                self.scalar(a.ty, data)?;
                *count += 1;
                if let Some(n) = open.last_mut() {
                    *n += 1;
                }
            }
            // After an element: close lists, or go on after a comma.
            loop {
                if self.eat(b'}') {
                    if self.close_literal_list(a, &mut open)? {
                        return Ok(());
                    }
                } else {
                    self.expect(b',', "between literal elements")?;
                    break;
                }
            }
            just_opened = false;
        }
    }

    /// Closes the innermost open list of an array literal, checking its length; returns whether
    /// it was the outermost one (the enclosing list counts it as one element otherwise).
    fn close_literal_list(&mut self, a: &ArrayShape, open: &mut Vec<i64>) -> PResult<bool> {
        let n = open.pop().unwrap_or(0);
        let depth = open.len();
        if n != a.dims[depth] {
            return Err(self.err(format!(
                "literal dimension {depth} has {n} elements but the shape says {}",
                a.dims[depth]
            )));
        }
        match open.last_mut() {
            Some(up) => {
                *up += 1;
                Ok(false)
            }
            None => Ok(true),
        }
    }

    fn scalar(&mut self, ty: ElementType, data: &mut Vec<u8>) -> PResult<()> {
        self.skip_ws();
        if ty.is_complex() {
            self.expect(b'(', "to open a complex value")?;
            let re = self.float_token(ty)?;
            self.expect(b',', "between the parts of a complex value")?;
            let im = self.float_token(ty)?;
            self.expect(b')', "to close a complex value")?;
            data.extend(complex_to_element(ty, re, im));
            return Ok(());
        }
        let start = self.pos;
        let tok = self.number_token();
        if tok.is_empty() {
            return Err(self.err(format!(
                "expected a {} value, found {}",
                ty.name(),
                self.describe_here()
            )));
        }
        let bytes = parse_element(ty, tok).map_err(|e| self.err_at(self.loc_of(start), e))?;
        data.extend(bytes);
        Ok(())
    }

    fn float_token(&mut self, ty: ElementType) -> PResult<f64> {
        self.skip_ws();
        let start = self.pos;
        let tok = self.number_token();
        crate::literal::parse_float(tok).ok_or_else(|| {
            self.err_at(
                self.loc_of(start),
                format!("invalid {} value '{tok}'", ty.name()),
            )
        })
    }

    fn number_token(&mut self) -> &'a str {
        let start = self.pos;
        if matches!(self.peek(), b'-' | b'+') {
            self.pos += 1;
        }
        while self.peek().is_ascii_alphanumeric() || matches!(self.peek(), b'.' | b'_') {
            let c = self.peek();
            self.pos += 1;
            if (c == b'e' || c == b'E') && matches!(self.peek(), b'-' | b'+') {
                self.pos += 1;
            }
        }
        // nan(0x...) payloads.
        if self.src[start..self.pos].ends_with("nan") && self.peek() == b'(' {
            while !self.at_end() && self.peek() != b')' {
                self.pos += 1;
            }
            self.pos += 1;
        }
        &self.src[start..self.pos.min(self.b.len())]
    }
}

fn split_pad(s: &str) -> Option<(i64, i64)> {
    // `lo_hi` where either may be negative: split on the '_' that follows a digit.
    let b = s.as_bytes();
    for i in 1..b.len() {
        if b[i] == b'_' && b[i - 1].is_ascii_digit() {
            return Some((s[..i].parse().ok()?, s[i + 1..].parse().ok()?));
        }
    }
    None
}

fn parse_padding(s: &str) -> Option<Box<[[i64; 3]]>> {
    let mut out = Vec::new();
    if s.is_empty() {
        return None;
    }
    for part in s.split('x') {
        let mut nums = Vec::new();
        let b = part.as_bytes();
        let mut start = 0;
        for i in 1..=b.len() {
            if i == b.len() || (b[i] == b'_' && b[i - 1].is_ascii_digit()) {
                nums.push(part[start..i].parse::<i64>().ok()?);
                start = i + 1;
            }
        }
        match nums.len() {
            2 => out.push([nums[0], nums[1], 0]),
            3 => out.push([nums[0], nums[1], nums[2]]),
            _ => return None,
        }
    }
    Some(out.into())
}

/// Parses `b01f_01io->b01f` into convolution dimension numbers.
pub fn parse_dim_labels(s: &str) -> Option<ConvDims> {
    let (ins, out) = s.split_once("->")?;
    let (lhs, rhs) = ins.split_once('_')?;
    let n = lhs.len();
    if n < 2 || rhs.len() != n || out.len() != n {
        return None;
    }
    fn spatial(labels: &str, n_spatial: usize) -> Option<Box<[i64]>> {
        let mut v = vec![-1i64; n_spatial];
        for (i, ch) in labels.chars().enumerate() {
            if let Some(d) = ch.to_digit(10) {
                let d = d as usize;
                if d >= n_spatial || v[d] != -1 {
                    return None;
                }
                v[d] = i as i64;
            }
        }
        if v.contains(&-1) {
            return None;
        }
        Some(v.into())
    }
    fn find(labels: &str, c: char) -> Option<i64> {
        let mut it = labels.char_indices().filter(|(_, x)| *x == c);
        let first = it.next()?.0 as i64;
        if it.next().is_some() {
            return None;
        }
        Some(first)
    }
    let ns = n - 2;
    for (labels, allowed) in [(lhs, "bf"), (rhs, "io"), (out, "bf")] {
        if labels
            .chars()
            .any(|c| !c.is_ascii_digit() && !allowed.contains(c))
        {
            return None;
        }
    }
    Some(ConvDims {
        input_batch: find(lhs, 'b')?,
        input_feature: find(lhs, 'f')?,
        input_spatial: spatial(lhs, ns)?,
        kernel_input_feature: find(rhs, 'i')?,
        kernel_output_feature: find(rhs, 'o')?,
        kernel_spatial: spatial(rhs, ns)?,
        output_batch: find(out, 'b')?,
        output_feature: find(out, 'f')?,
        output_spatial: spatial(out, ns)?,
    })
}

pub(crate) fn join(v: &[i64]) -> String {
    let mut s = String::new();
    for (i, x) in v.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&x.to_string());
    }
    s
}
