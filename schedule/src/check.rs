//! An independent check of a buffer assignment: it runs the scheduled program on shadow memory
//! and fails if any read finds its value overwritten.
//!
//! It shares no code with the assigner (no dataflow, liveness, alias or heap code; only the
//! definition of a bitcast that moves no data): it reads only the module, its schedule and the
//! assignment's answers (the buffer and memory of every
//! instruction leaf, the scratch, the copy plans), and has its own small model of what the
//! backend does:
//! - every write of a value puts a fresh token on its bytes; views (`tuple`,
//!   `get-tuple-element`, `reshape`, `copy`, `opt-barrier`, `add-dependency`, `domain`,
//!   row-major `bitcast`) and parameters write nothing and must sit exactly where their
//!   operands' tokens are;
//! - a kernel reads all of its operands, then writes its scratch and its outputs; an output may
//!   overlap an operand only if it is the very same bytes and the kernel is one that may update
//!   that operand in place (element-wise ops; `dynamic-update-slice`, `scatter` on the updated
//!   array; a fusion whose parameter only reaches the root through element-wise ops, or also
//!   through reductions over trailing dimensions where the backend says its kernel reduces each
//!   row before writing it, or is the array its root `dynamic-update-slice` or `scatter`
//!   updates); a fusion the backend runs as
//!   steps runs each step as a kernel reading the parameters and earlier steps it reaches
//!   through inline instructions, and may write over one of those only where every user of
//!   it in the fused computation, transitively up to the step, is element-wise;
//! - a `while` copies in its initial value, runs condition and body twice (so that anything a
//!   second iteration reads must survive the first), copies the body's root back after each
//!   body, and runs the condition once more; a `conditional` runs every branch from the same
//!   memory and keeps, afterwards, only the tokens all branches agree on; a `call` (or a fusion
//!   the backend runs like one) runs its computation in place;
//! - entry parameters and constants are written once at the start and are read-only (donated
//!   parameters excepted where the backend writes them); at the end every output must hold the
//!   entry root's value.
//!
//! A read that finds other tokens than the value's own means two buffers that are live at the
//! same time overlap (or a copy was missing or misordered); the error names the instruction.

use std::collections::BTreeMap;

use hashbrown::HashMap;

use axle_ir::entity::{dense_map, SecondaryMap};
use axle_ir::{AttrKey, BufferId, CompId, InstId, Module, Opcode};

use crate::buffer_assignment::{BufferAssignment, Memory, Move, ALIGN};
use crate::rules::{BufferRules, FusionRun};
use crate::views::bitcast_is_view;

/// What a successful check did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CheckReport {
    /// Instructions executed (loops twice).
    pub steps: u64,
    /// Buffer reads verified.
    pub reads: u64,
    /// Buffer writes made.
    pub writes: u64,
}

/// A memory space.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Space {
    Temp,
    Arena,
    Param(u32),
    Const(InstId, u32),
    Output(u32),
}

/// Bytes `[off, off + size)` of a space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Slot {
    space: Space,
    off: u64,
    size: u64,
}

impl Slot {
    fn overlaps(&self, o: &Slot) -> bool {
        self.space == o.space
            && self.size > 0
            && o.size > 0
            && self.off < o.off + o.size
            && o.off < self.off + self.size
    }
}

/// The token of bytes no value owns.
const GARBAGE: u64 = 0;

type Shadow = HashMap<Space, BTreeMap<u64, (u64, u64)>>;

struct Checker<'a> {
    m: &'a Module,
    a: &'a BufferAssignment,
    rules: &'a dyn BufferRules,
    mem: Shadow,
    next: u64,
    /// Per instruction, the tokens of its leaves (last run).
    env: SecondaryMap<InstId, Vec<u64>>,
    /// Per constant, its leaves' tokens once it was placed.
    consts: SecondaryMap<InstId, Option<Vec<u64>>>,
    writable_params: Vec<u32>,
    report: CheckReport,
}

/// Checks `a`, an assignment of `m` under `rules`.
pub fn check(
    m: &Module,
    a: &BufferAssignment,
    rules: &dyn BufferRules,
) -> Result<CheckReport, String> {
    if m.schedule().is_none() {
        return Err("the module has no current schedule".into());
    }
    let writable_params = if rules.writes_donated_params() {
        a.donated_outputs.iter().map(|&(_, k)| k).collect()
    } else {
        Vec::new()
    };
    let mut c = Checker {
        m,
        a,
        rules,
        mem: HashMap::new(),
        next: 1,
        env: dense_map(m.inst_capacity(), Vec::new()),
        consts: SecondaryMap::new(),
        writable_params,
        report: CheckReport::default(),
    };
    let entry = m.entry();
    // Entry parameters: one token per leaf, in the parameter's own memory.
    let mut args = Vec::new();
    for &p in m.params(entry) {
        let mut toks = Vec::new();
        for b in a.leaf_buffers(p) {
            let t = c.fresh();
            let s = c.slot(b)?;
            if !matches!(s.space, Space::Param(_)) {
                return Err(format!(
                    "entry parameter %{} is not assigned its own memory",
                    m.name(p)
                ));
            }
            c.put(s, t);
            toks.push(t);
        }
        args.push(toks);
    }
    let root = c.run(entry, &args)?;
    for mv in a.output_moves() {
        c.copy(*mv, "the output copies")?;
    }
    for (j, &t) in root.iter().enumerate() {
        let b = a.output(j);
        let s = c.slot(b)?;
        match s.space {
            Space::Output(k) if k as usize == j => {}
            Space::Param(k) if c.writable_params.contains(&k) => {}
            _ => return Err(format!("output {j} is not in output memory")),
        }
        c.expect(s, t, || format!("output {j} at the end"))?;
    }
    Ok(c.report)
}

impl Checker<'_> {
    fn fresh(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    fn slot(&self, b: BufferId) -> Result<Slot, String> {
        let buf = self.a.buffer(b);
        let (space, off) = match buf.memory {
            Memory::Temp { offset } => {
                if offset % ALIGN != 0 {
                    return Err(format!("buffer {} is not aligned", b.index()));
                }
                if buf.size > 0 && offset + buf.size > self.a.temp_bytes {
                    return Err(format!(
                        "buffer {} lies outside the temporary block",
                        b.index()
                    ));
                }
                (Space::Temp, offset)
            }
            Memory::Arena { offset } => {
                if offset % ALIGN != 0 || (buf.size > 0 && offset + buf.size > self.a.arena_bytes) {
                    return Err(format!(
                        "buffer {} lies outside the scratch arena",
                        b.index()
                    ));
                }
                (Space::Arena, offset)
            }
            Memory::Param(k) => (Space::Param(k), 0),
            Memory::Constant { inst, leaf } => (Space::Const(inst, leaf), 0),
            Memory::Output { leaf, offset } => {
                let cap = self.a.buffer(self.a.output(leaf as usize)).size;
                if offset % ALIGN != 0 || (buf.size > 0 && offset + buf.size > cap) {
                    return Err(format!("buffer {} lies outside output {leaf}", b.index()));
                }
                (Space::Output(leaf), offset)
            }
        };
        Ok(Slot {
            space,
            off,
            size: buf.size,
        })
    }

    fn leaf_slots(&self, i: InstId) -> Result<Vec<Slot>, String> {
        self.a
            .leaf_buffers(i)
            .into_iter()
            .map(|b| self.slot(b))
            .collect()
    }

    /// Writes token `t` over `s` without permission checks.
    fn put(&mut self, s: Slot, t: u64) {
        if s.size == 0 {
            return;
        }
        let map = self.mem.entry(s.space).or_default();
        let (lo, hi) = (s.off, s.off + s.size);
        // Split the entries straddling the edges, then drop everything inside.
        let covering: Vec<(u64, (u64, u64))> = map
            .range(..hi)
            .rev()
            .take_while(|(_, &(e, _))| e > lo)
            .map(|(&k, &v)| (k, v))
            .collect();
        for (k, (e, tok)) in covering {
            map.remove(&k);
            if k < lo {
                map.insert(k, (lo, tok));
            }
            if e > hi {
                map.insert(hi, (e, tok));
            }
        }
        map.insert(lo, (hi, t));
        self.report.writes += 1;
    }

    fn write(&mut self, s: Slot, t: u64, what: &dyn Fn() -> String) -> Result<(), String> {
        match s.space {
            Space::Const(..) => return Err(format!("{} writes a constant's memory", what())),
            Space::Param(k) if !self.writable_params.contains(&k) => {
                return Err(format!("{} writes entry parameter memory", what()))
            }
            _ => {}
        }
        self.put(s, t);
        Ok(())
    }

    /// The one token on all of `s`'s bytes, if one.
    fn token(&self, s: Slot) -> Option<u64> {
        if s.size == 0 {
            return None;
        }
        let map = self.mem.get(&s.space)?;
        let (lo, hi) = (s.off, s.off + s.size);
        let mut at = lo;
        let mut tok = None;
        let first = map.range(..=lo).next_back().map_or(lo, |(&k, _)| k);
        for (&k, &(e, t)) in map.range(first..hi) {
            if e <= lo {
                continue;
            }
            if k > at || tok.is_some_and(|x| x != t) {
                return None;
            }
            tok = Some(t);
            at = e;
        }
        (at >= hi).then_some(tok).flatten()
    }

    fn expect(&mut self, s: Slot, t: u64, what: impl Fn() -> String) -> Result<(), String> {
        self.report.reads += 1;
        if s.size == 0 {
            return Ok(());
        }
        match self.token(s) {
            Some(x) if x == t => Ok(()),
            _ => Err(format!(
                "{}: the value is not in its buffer ({:?} bytes {}..{}): something overwrote it",
                what(),
                s.space,
                s.off,
                s.off + s.size
            )),
        }
    }

    fn copy(&mut self, mv: Move, what: &str) -> Result<(), String> {
        let (s, d) = (self.slot(mv.src)?, self.slot(mv.dst)?);
        let t = match self.token(s) {
            Some(t) if t != GARBAGE => t,
            _ if s.size == 0 => GARBAGE,
            _ => {
                return Err(format!(
                    "{what}: copies from a buffer whose value was overwritten"
                ))
            }
        };
        self.write(d, t, &|| what.to_string())
    }

    fn name(&self, i: InstId) -> String {
        format!("%{}", self.m.name(i))
    }

    /// Runs computation `c` with `args` (tokens per parameter leaf); returns the root's tokens.
    fn run(&mut self, c: CompId, args: &[Vec<u64>]) -> Result<Vec<u64>, String> {
        let m = self.m;
        let seq: Vec<InstId> = m
            .schedule()
            .and_then(|s| s.sequence(c))
            .ok_or_else(|| format!("computation {} has no schedule", m.comp_name(c)))?
            .to_vec();
        for i in seq {
            self.report.steps += 1;
            let toks = self.step(i, args)?;
            // Wherever the value is, its tokens must be there.
            let slots = self.leaf_slots(i)?;
            if slots.len() != toks.len() {
                return Err(format!(
                    "{}: assigned {} buffers for {} leaves",
                    self.name(i),
                    slots.len(),
                    toks.len()
                ));
            }
            for (s, &t) in slots.iter().zip(&toks) {
                let n = self.name(i);
                self.expect(*s, t, || n.clone())?;
            }
            self.env[i] = toks;
        }
        let root = m.root(c);
        let toks = self.env[root].clone();
        let slots = self.leaf_slots(root)?;
        for (s, &t) in slots.iter().zip(&toks) {
            let n = format!("the root of {}", m.comp_name(c));
            self.expect(*s, t, || n.clone())?;
        }
        Ok(toks)
    }

    fn operand_tokens(&self, o: InstId) -> Vec<u64> {
        self.env[o].clone()
    }

    /// Executes `i`; returns the tokens of its leaves.
    fn step(&mut self, i: InstId, args: &[Vec<u64>]) -> Result<Vec<u64>, String> {
        use Opcode::*;
        let m = self.m;
        let ops = m.operands(i);
        Ok(match m.opcode(i) {
            Parameter => {
                let n = m.parameter_number(i).unwrap_or(0) as usize;
                args.get(n).cloned().unwrap_or_default()
            }
            Constant => {
                if let Some(t) = &self.consts[i] {
                    t.clone()
                } else {
                    let mut toks = Vec::new();
                    for s in self.leaf_slots(i)? {
                        if !matches!(s.space, Space::Const(..)) {
                            return Err(format!("{} is not in constant memory", self.name(i)));
                        }
                        let t = self.fresh();
                        self.put(s, t);
                        toks.push(t);
                    }
                    self.consts[i] = Some(toks.clone());
                    toks
                }
            }
            Tuple | OptBarrier | Reshape | Copy => {
                ops.iter().flat_map(|&o| self.operand_tokens(o)).collect()
            }
            Bitcast if self.bitcast_moves_nothing(i) => self.operand_tokens(ops[0]),
            AddDependency | Domain => self.operand_tokens(ops[0]),
            GetTupleElement => {
                let k = m.int_attr(i, &AttrKey::Index).unwrap_or(0) as usize;
                let all = self.operand_tokens(ops[0]);
                let (start, n) = element_leaves(m, ops[0], k);
                all.get(start..start + n)
                    .map(|x| x.to_vec())
                    .unwrap_or_default()
            }
            Call => {
                let c = m
                    .comp_attr(i, &AttrKey::ToApply)
                    .ok_or("call without to_apply")?;
                let args: Vec<Vec<u64>> = ops.iter().map(|&o| self.operand_tokens(o)).collect();
                self.run(c, &args)?
            }
            Fusion => match self.rules.fusion_run(m, i) {
                FusionRun::Kernel => self.kernel(i, ops, true)?,
                FusionRun::Steps(steps) => self.run_steps(i, &steps)?,
            },
            While => self.run_while(i)?,
            Conditional => self.run_conditional(i)?,
            _ => self.kernel(i, ops, true)?,
        })
    }

    /// Whether bitcast `i` moves no data: the backends' definition ([`bitcast_is_view`]), a
    /// fact about how they store arrays rather than an assignment decision.
    fn bitcast_moves_nothing(&self, i: InstId) -> bool {
        bitcast_is_view(self.m, i)
    }

    /// A kernel computing `i` from `reads` (its operands, or what a fusion step reaches);
    /// `own_operands` says whether `reads` are `i`'s operands (else `i` is a fusion step).
    fn kernel(
        &mut self,
        i: InstId,
        reads: &[InstId],
        own_operands: bool,
    ) -> Result<Vec<u64>, String> {
        let name = self.name(i);
        let mut in_slots: Vec<(usize, Slot)> = Vec::new();
        for (k, &o) in reads.iter().enumerate() {
            let toks = self.operand_tokens(o);
            let slots = self.leaf_slots(o)?;
            for (s, &t) in slots.iter().zip(&toks) {
                self.expect(*s, t, || format!("{name} reading operand {k}"))?;
                in_slots.push((k, *s));
            }
        }
        let outs = self.leaf_slots(i)?;
        for (l, o) in outs.iter().enumerate() {
            for (l2, o2) in outs.iter().enumerate() {
                if l < l2 && o.overlaps(o2) {
                    return Err(format!("{name}: outputs {l} and {l2} overlap"));
                }
            }
            for &(k, s) in &in_slots {
                let allowed = *o == s
                    && if own_operands {
                        self.may_overwrite(i, k, l)
                    } else {
                        l == 0 && self.step_may_overwrite(i, reads[k], k)
                    };
                if o.overlaps(&s) && !allowed {
                    return Err(format!(
                        "{name}: output {l} overwrites operand {k} while the kernel reads it"
                    ));
                }
            }
        }
        let scratch: Vec<Slot> = self
            .a
            .scratch(i)
            .into_iter()
            .map(|b| self.slot(b))
            .collect::<Result<_, _>>()?;
        for (k, s) in scratch.iter().enumerate() {
            if outs
                .iter()
                .chain(in_slots.iter().map(|(_, s)| s))
                .chain(&scratch[..k])
                .any(|o| o.overlaps(s))
            {
                return Err(format!(
                    "{name}: scratch overlaps an operand, an output or other scratch"
                ));
            }
            self.write(*s, GARBAGE, &|| format!("{name}'s scratch"))?;
        }
        let mut toks = Vec::with_capacity(outs.len());
        for s in outs {
            let t = self.fresh();
            self.write(s, t, &|| name.clone())?;
            toks.push(t);
        }
        Ok(toks)
    }

    /// Whether `i`'s kernel may write output `l` over operand `k` (its own model, see the
    /// module docs).
    fn may_overwrite(&self, i: InstId, k: usize, l: usize) -> bool {
        use Opcode::*;
        let m = self.m;
        let op = m.opcode(i);
        match op {
            DynamicUpdateSlice => k == 0 && l == 0,
            Scatter => k == l && k < m.operands(i).len() / 2,
            Fusion => {
                let Some(c) = m.comp_attr(i, &AttrKey::Calls) else {
                    return false;
                };
                let insts = m.comp_insts(c);
                let Some(&p) = m.params(c).get(k) else {
                    return false;
                };
                let root = m.root(c);
                if matches!(m.opcode(root), DynamicUpdateSlice | Scatter) {
                    let uses = insts
                        .iter()
                        .map(|&u| m.operands(u).iter().filter(|&&o| o == p).count())
                        .sum::<usize>();
                    return l == 0 && m.operands(root)[0] == p && uses == 1;
                }
                // Every user of p, transitively, is element-wise; or, where the backend's
                // kernel reduces each row before writing it, a reduction over trailing
                // dimensions (whose result is not followed).
                let rows = self.rules.may_update_through_rows(m, i, k);
                l == 0 && elementwise_walk(m, &insts, p, root, rows).is_some()
            }
            _ => op.is_elementwise() && l == 0,
        }
    }

    /// Whether fusion step `s` may write over `x`, its `k`-th read value: every user of `x` in
    /// the fused computation, and of theirs up to `s`, is element-wise (or, where the backend
    /// says the step's kernel reduces each row before writing it, a reduction over trailing
    /// dimensions, not followed), and `s` is among them.
    fn step_may_overwrite(&self, s: InstId, x: InstId, k: usize) -> bool {
        let m = self.m;
        let rows = self.rules.may_update_through_rows(m, s, k);
        let insts = m.comp_insts(m.parent(s));
        elementwise_walk(m, &insts, x, s, rows) == Some(true)
    }

    /// A fusion run as steps: each step a kernel reading the fused parameters and earlier
    /// steps it reaches through the instructions it computes inline (or a view of steps).
    fn run_steps(&mut self, f: InstId, steps: &[InstId]) -> Result<Vec<u64>, String> {
        let m = self.m;
        let c = m
            .comp_attr(f, &AttrKey::Calls)
            .ok_or("fusion without calls")?;
        let mut have: Vec<InstId> = Vec::new();
        for (k, &p) in m.params(c).iter().enumerate() {
            let toks = self.operand_tokens(m.operands(f)[k]);
            let slots = self.leaf_slots(p)?;
            for (s, &t) in slots.iter().zip(&toks) {
                let n = self.name(f);
                self.expect(*s, t, || format!("{n}'s parameter {k}"))?;
            }
            self.env[p] = toks;
            have.push(p);
        }
        for &s in steps {
            self.report.steps += 1;
            use Opcode::*;
            let toks = match m.opcode(s) {
                // Views, and constants (read-only memory of their own, written once).
                Tuple | OptBarrier | Reshape | Copy | AddDependency | Domain | GetTupleElement
                | Constant => self.step(s, &[])?,
                Bitcast if self.bitcast_moves_nothing(s) => self.step(s, &[])?,
                _ => {
                    // What the step's kernel reads: the values it reaches through
                    // instructions it computes inline.
                    let mut reads = Vec::new();
                    let mut stack: Vec<InstId> = m.operands(s).to_vec();
                    let mut seen = Vec::new();
                    while let Some(x) = stack.pop() {
                        if seen.contains(&x) {
                            continue;
                        }
                        seen.push(x);
                        if have.contains(&x) {
                            reads.push(x);
                        } else {
                            stack.extend_from_slice(m.operands(x));
                        }
                    }
                    self.kernel(s, &reads, false)?
                }
            };
            let slots = self.leaf_slots(s)?;
            if slots.len() != toks.len() {
                return Err(format!(
                    "step {}: assigned {} buffers for {} leaves",
                    self.name(s),
                    slots.len(),
                    toks.len()
                ));
            }
            for (sl, &t) in slots.iter().zip(&toks) {
                let n = self.name(s);
                self.expect(*sl, t, || n.clone())?;
            }
            self.env[s] = toks;
            have.push(s);
        }
        Ok(self.operand_tokens(m.root(c)))
    }

    fn run_while(&mut self, w: InstId) -> Result<Vec<u64>, String> {
        let m = self.m;
        let name = self.name(w);
        let cond = m
            .comp_attr(w, &AttrKey::Condition)
            .ok_or("while without condition")?;
        let body = m.comp_attr(w, &AttrKey::Body).ok_or("while without body")?;
        let init = self.operand_tokens(m.operands(w)[0]);
        let in_slots = self.leaf_slots(m.operands(w)[0])?;
        for (s, &t) in in_slots.iter().zip(&init) {
            self.expect(*s, t, || format!("{name} reading its initial value"))?;
        }
        for mv in self.a.loop_init(w).to_vec() {
            self.copy(mv, &format!("{name}'s copy-in"))?;
        }
        let state_slots = self.leaf_slots(w)?;
        for (s, &t) in state_slots.iter().zip(&init) {
            self.expect(*s, t, || format!("{name}'s state after the copy-in"))?;
        }
        let mut state = init;
        for _ in 0..2 {
            self.run(cond, std::slice::from_ref(&state))?;
            let next = self.run(body, std::slice::from_ref(&state))?;
            for mv in self.a.loop_back(w).to_vec() {
                self.copy(mv, &format!("{name}'s copy-back"))?;
            }
            for (s, &t) in state_slots.iter().zip(&next) {
                self.expect(*s, t, || format!("{name}'s state after a body run"))?;
            }
            state = next;
        }
        self.run(cond, std::slice::from_ref(&state))?;
        Ok(state)
    }

    fn run_conditional(&mut self, q: InstId) -> Result<Vec<u64>, String> {
        let m = self.m;
        let name = self.name(q);
        let ops = m.operands(q).to_vec();
        for (k, &o) in ops.iter().enumerate() {
            let toks = self.operand_tokens(o);
            for (s, &t) in self.leaf_slots(o)?.iter().zip(&toks) {
                self.expect(*s, t, || format!("{name} reading operand {k}"))?;
            }
        }
        let branches = m
            .branch_computations(q)
            .ok_or("conditional without branches")?;
        let outs = self.leaf_slots(q)?;
        let results: Vec<u64> = (0..outs.len()).map(|_| self.fresh()).collect();
        let before = self.mem.clone();
        let mut after: Vec<Shadow> = Vec::new();
        for (k, &b) in branches.iter().enumerate() {
            self.mem = before.clone();
            let arg = self.operand_tokens(ops[k + 1]);
            let r = self.run(b, std::slice::from_ref(&arg))?;
            for mv in self.a.branch_out(q, k).to_vec() {
                self.copy(mv, &format!("{name}'s branch {k} copy-out"))?;
            }
            for (s, (&t, &fresh)) in outs.iter().zip(r.iter().zip(&results)) {
                self.expect(*s, t, || format!("{name}'s output after branch {k}"))?;
                self.put(*s, fresh);
            }
            after.push(std::mem::take(&mut self.mem));
        }
        self.mem = agree(&after);
        Ok(results)
    }
}

/// Walks from `from` to the users (among `insts`) of everything it reaches, not beyond
/// `stop`: `None` if one is not element-wise (nor, with `rows`, a reduction over trailing
/// dimensions of `stop`'s rank, whose users are not followed); else whether `stop` was reached.
fn elementwise_walk(
    m: &Module,
    insts: &[InstId],
    from: InstId,
    stop: InstId,
    rows: bool,
) -> Option<bool> {
    let rank = m.array_shape(stop).map_or(0, |a| a.rank()) as i64;
    let mut stack = vec![from];
    let mut seen = Vec::new();
    while let Some(y) = stack.pop() {
        if seen.contains(&y) {
            continue;
        }
        seen.push(y);
        if y == stop {
            continue;
        }
        for &u in insts {
            if m.operands(u).contains(&y) {
                if rows && trailing_reduce(m, u, y, rank) {
                    continue;
                }
                if !m.opcode(u).is_elementwise() {
                    return None;
                }
                stack.push(u);
            }
        }
    }
    Some(seen.contains(&stop))
}

/// Whether `u` is a single-input `reduce` of `x` (of `rank` dimensions) over trailing
/// dimensions.
fn trailing_reduce(m: &Module, u: InstId, x: InstId, rank: i64) -> bool {
    let rd = m.ints_attr(u, &AttrKey::Dimensions).unwrap_or(&[]);
    m.opcode(u) == Opcode::Reduce
        && m.operands(u).len() == 2
        && m.operands(u)[0] == x
        && m.operands(u)[1] != x
        && !rd.is_empty()
        && rd.iter().all(|&d| d >= rank - rd.len() as i64 && d < rank)
}

/// Where the leaves of element `k` of `o`'s tuple shape start, and how many there are.
fn element_leaves(m: &Module, o: InstId, k: usize) -> (usize, usize) {
    fn count(m: &Module, s: axle_ir::ShapeId) -> usize {
        match m.shape_of(s) {
            axle_ir::Shape::Tuple(es) => es.iter().map(|&e| count(m, e)).sum(),
            axle_ir::Shape::Array(_) => 1,
            _ => 0,
        }
    }
    match m.shape(o) {
        axle_ir::Shape::Tuple(es) if k < es.len() => {
            (es[..k].iter().map(|&e| count(m, e)).sum(), count(m, es[k]))
        }
        _ => (0, 0),
    }
}

/// The memory where every branch left the same token; elsewhere garbage.
fn agree(states: &[Shadow]) -> Shadow {
    let Some(first) = states.first() else {
        return Shadow::new();
    };
    let mut out = Shadow::new();
    for (space, map) in first {
        let mut res = BTreeMap::new();
        for (&lo, &(hi, t)) in map {
            // Cut [lo, hi) where another state disagrees.
            let mut pieces = vec![(lo, hi)];
            for other in &states[1..] {
                let om = other.get(space);
                let mut next = Vec::new();
                for (a, b) in pieces {
                    if let Some(om) = om {
                        for (&k, &(e, u)) in om.range(..b) {
                            if e <= a || u != t {
                                continue;
                            }
                            let (x, y) = (k.max(a), e.min(b));
                            if x < y {
                                next.push((x, y));
                            }
                        }
                    }
                }
                pieces = next;
            }
            for (a, b) in pieces {
                res.insert(a, (b, t));
            }
        }
        out.insert(*space, res);
    }
    out
}
