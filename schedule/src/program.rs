//! The flattened program: every instruction that runs as a step (the entry's and those of the
//! computations it runs as steps: loop conditions and bodies, branches, calls, fusions a
//! backend runs like calls), in schedule order with nested computations inlined where they
//! run, and the values (one per array leaf) that flow between them.
//!
//! Positions: walking a computation's sequence, each instruction gets a start position; one
//! that runs computations (`while`: condition then body; `conditional`: every branch in order;
//! `call`) walks them right after its start and gets an end position after them; every
//! computation gets an end position after its last instruction, where its root is read (and a
//! loop body's root copied into the loop state, a branch's into the outputs). A position is
//! one step; loops appear once (liveness extends what crosses a loop to the loop's end).
//!
//! Values (must-alias dataflow): an instruction that writes memory defines one value per array
//! leaf; views ([`crate::views`]) take their operands' values, a called computation's parameters
//! take the call site's operands' values, a `call` takes its callee root's. A `while` defines
//! its loop state (shared by its condition's and body's parameters and its result), except
//! where the body passes a state leaf through unchanged: nothing writes that leaf, so it is the
//! initial value itself (a loop-invariant weight stays in the parameter's memory, as in XLA). A
//! `conditional` defines its outputs. Entry parameters, constants and kernels' scratch are
//! values too.
//!
//! Invariants: every computation run as a step is reached from exactly one call site (the
//! module is flat, see [`crate::flatten_call_graph`]); the module has a current schedule.

use hashbrown::HashMap;

use axle_ir::entity::{dense_map, EntitySet, PrimaryMap, SecondaryMap};
use axle_ir::{AttrKey, CompId, InstId, Module, Opcode};

use crate::error::ScheduleError;
use crate::leaves::ShapeLeaves;
use crate::rules::{BufferRules, FusionRun, ScratchPlace};
use crate::views::{def_kind, Def};

axle_ir::entity_id!(
    /// A value of a [`Program`]: an array leaf in memory, numbered in definition order.
    pub ValueId
);

/// What defines a value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ValueKind {
    /// Leaf `leaf` (depth-first over all entry parameters) of the entry's parameters.
    Param(u32),
    /// A leaf of a constant's literal.
    Constant,
    /// Written by its instruction.
    Defined,
    /// The loop state of a `while`.
    LoopState,
    /// An output of a `conditional`.
    BranchOutput,
    /// Scratch memory of a kernel while it runs, in the temporary block.
    Scratch,
    /// Scratch memory of a kernel while it runs, in the runtime's scratch arena
    /// ([`crate::rules::ScratchPlace::Arena`]).
    ArenaScratch,
}

/// One value: an array leaf in memory.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value {
    /// The defining instruction.
    pub inst: InstId,
    /// The leaf of the instruction's shape (depth-first).
    pub leaf: u32,
    /// Its size in bytes.
    pub bytes: u64,
    /// What defines it.
    pub kind: ValueKind,
}

/// The flattened program of a scheduled, flat module.
#[derive(Clone, Debug)]
pub struct Program {
    values: PrimaryMap<ValueId, Value>,
    leaf_range: SecondaryMap<InstId, (u32, u32)>,
    pool: Vec<ValueId>,
    start: SecondaryMap<InstId, u32>,
    end: SecondaryMap<InstId, u32>,
    comp_end: SecondaryMap<CompId, u32>,
    caller: SecondaryMap<CompId, InstId>,
    seq: Vec<InstId>,
    scratch: SecondaryMap<InstId, Vec<ValueId>>,
    step_reads: HashMap<InstId, Vec<InstId>>,
    positions: u32,
    entry: CompId,
    param_leaves: u32,
}

/// Position of instructions and computations outside the program.
pub const NOWHERE: u32 = u32::MAX;

struct Builder<'a> {
    m: &'a Module,
    rules: &'a dyn BufferRules,
    table: ShapeLeaves,
    p: Program,
    visited: EntitySet<CompId>,
    pos: u32,
    depth: u32,
}

impl Program {
    /// The program of `m`, which must be scheduled and flat; `rules` says which fusions run
    /// like calls and what scratch kernels need.
    pub fn new(m: &Module, rules: &dyn BufferRules) -> Result<Program, ScheduleError> {
        if m.schedule().is_none() {
            return Err(ScheduleError::new(
                "the module has no current schedule (run memory-schedule first)",
            ));
        }
        let entry = m.entry();
        if entry.is_none() || !m.is_live_comp(entry) {
            return Err(ScheduleError::new("the module has no entry computation"));
        }
        let cap = m.inst_capacity();
        let nc = m.comp_capacity();
        let mut b = Builder {
            m,
            rules,
            table: ShapeLeaves::new(m),
            p: Program {
                values: PrimaryMap::with_capacity(cap),
                leaf_range: dense_map(cap, (0, 0)),
                pool: Vec::with_capacity(cap),
                start: dense_map(cap, NOWHERE),
                end: dense_map(cap, NOWHERE),
                comp_end: dense_map(nc, NOWHERE),
                caller: dense_map(nc, InstId::NONE),
                seq: Vec::with_capacity(cap),
                scratch: SecondaryMap::new(),
                step_reads: HashMap::new(),
                positions: 0,
                entry,
                param_leaves: 0,
            },
            visited: EntitySet::with_capacity(nc),
            pos: 0,
            depth: 0,
        };
        // Entry parameters: one value per leaf, numbered depth-first across parameters.
        let mut params = Vec::new();
        let mut k = 0u32;
        for &pi in m.params(entry) {
            if pi.is_none() {
                return Err(ScheduleError::new(
                    "the entry computation is missing a parameter",
                ));
            }
            let start = b.p.pool.len() as u32;
            for &bytes in b.table.bytes(m.shape_id(pi)) {
                let v = b.p.values.next_key();
                b.p.values.push(Value {
                    inst: pi,
                    leaf: b.p.pool.len() as u32 - start,
                    bytes,
                    kind: ValueKind::Param(k),
                });
                b.p.pool.push(v);
                k += 1;
            }
            params.push((start, b.p.pool.len() as u32 - start));
        }
        b.p.param_leaves = k;
        b.walk(entry, InstId::NONE, &params)?;
        b.p.positions = b.pos;
        Ok(b.p)
    }

    /// Every value, by id.
    pub fn values(&self) -> &PrimaryMap<ValueId, Value> {
        &self.values
    }

    /// Value `v`.
    pub fn value(&self, v: ValueId) -> &Value {
        &self.values[v]
    }

    /// The values of `i`'s array leaves (empty for instructions outside the program).
    pub fn leaves(&self, i: InstId) -> &[ValueId] {
        let (s, n) = self.leaf_range[i];
        &self.pool[s as usize..(s + n) as usize]
    }

    /// Whether `i` runs as a step of the program.
    pub fn contains(&self, i: InstId) -> bool {
        self.start[i] != NOWHERE
    }

    /// The start position of `i` ([`NOWHERE`] outside the program).
    pub fn start(&self, i: InstId) -> u32 {
        self.start[i]
    }

    /// The end position of `i`: after the computations it runs, else its start.
    pub fn end(&self, i: InstId) -> u32 {
        self.end[i]
    }

    /// The end position of computation `c`, where its root is read.
    pub fn comp_end(&self, c: CompId) -> u32 {
        self.comp_end[c]
    }

    /// The instruction that runs computation `c` as a step (`NONE` for the entry and for
    /// computations outside the program).
    pub fn caller(&self, c: CompId) -> InstId {
        self.caller[c]
    }

    /// Every instruction of the program, in start order.
    pub fn sequence(&self) -> &[InstId] {
        &self.seq
    }

    /// The scratch values of `i`'s kernel.
    pub fn scratch(&self, i: InstId) -> &[ValueId] {
        &self.scratch[i]
    }

    /// For a step of a fusion run as steps, the parameters and earlier steps it reads (`None`
    /// for every other instruction, which reads its operands).
    pub fn step_reads(&self, i: InstId) -> Option<&[InstId]> {
        self.step_reads.get(&i).map(|v| &v[..])
    }

    /// The number of positions.
    pub fn positions(&self) -> u32 {
        self.positions
    }

    /// The entry computation.
    pub fn entry(&self) -> CompId {
        self.entry
    }

    /// The number of array leaves of the entry's parameters.
    pub fn param_leaves(&self) -> u32 {
        self.param_leaves
    }

    /// Whether computation `c` runs as a step of the program.
    pub fn runs(&self, c: CompId) -> bool {
        self.comp_end[c] != NOWHERE
    }
}

impl Builder<'_> {
    fn fresh(&mut self, i: InstId, kind: ValueKind) -> (u32, u32) {
        let start = self.p.pool.len() as u32;
        for (leaf, &bytes) in self.table.bytes(self.m.shape_id(i)).iter().enumerate() {
            let v = self.p.values.push(Value {
                inst: i,
                leaf: leaf as u32,
                bytes,
                kind,
            });
            self.p.pool.push(v);
        }
        (start, self.p.pool.len() as u32 - start)
    }

    /// The leaves of `while` `w`: its initial value's where the body passes the state leaf
    /// through unchanged (nothing ever writes it, so it is the initial value), new loop-state
    /// values elsewhere.
    fn loop_state(&mut self, w: InstId, body: CompId, init: (u32, u32)) -> (u32, u32) {
        let m = self.m;
        let through = if m.is_live_comp(body) {
            pass_through(m, self.rules, &self.table, body)
        } else {
            Vec::new()
        };
        let start = self.p.pool.len() as u32;
        for (leaf, &bytes) in self.table.bytes(m.shape_id(w)).iter().enumerate() {
            let v = if through.get(leaf) == Some(&true) && (leaf as u32) < init.1 {
                self.p.pool[(init.0 + leaf as u32) as usize]
            } else {
                self.p.values.push(Value {
                    inst: w,
                    leaf: leaf as u32,
                    bytes,
                    kind: ValueKind::LoopState,
                })
            };
            self.p.pool.push(v);
        }
        (start, self.p.pool.len() as u32 - start)
    }

    fn enter(&mut self, c: CompId, site: InstId) -> Result<(), ScheduleError> {
        let m = self.m;
        if c.is_none() || c.index() >= m.comp_capacity() || !m.is_live_comp(c) {
            return Err(ScheduleError::new(format!(
                "%{} calls a computation that does not exist",
                m.name(site)
            )));
        }
        if self.visited.contains(c) {
            return Err(ScheduleError::new(format!(
                "computation {} runs from more than one call site (%{} is another); flatten the call graph first (memory-schedule does)",
                m.comp_name(c),
                m.name(site)
            )));
        }
        self.visited.insert(c);
        self.p.caller[c] = site;
        Ok(())
    }

    /// Runs the steps of fusion `f` ([`FusionRun::Steps`]): the fused parameters name the
    /// operands' values; each step reads what it reaches through non-steps.
    fn run_steps(&mut self, f: InstId) -> Result<(), ScheduleError> {
        let m = self.m;
        let FusionRun::Steps(steps) = self.rules.fusion_run(m, f) else {
            return Ok(());
        };
        let c = m.comp_attr(f, &AttrKey::Calls).unwrap_or(CompId::NONE);
        self.enter(c, f)?;
        let pnums = m.params(c);
        let ops = m.operands(f);
        if pnums.len() != ops.len() {
            return Err(ScheduleError::new(format!(
                "fusion %{} has {} operands for {} parameters",
                m.name(f),
                ops.len(),
                pnums.len()
            )));
        }
        let mut done: hashbrown::HashSet<InstId> = hashbrown::HashSet::new();
        for (&pi, &o) in pnums.iter().zip(ops) {
            if !pi.is_none() {
                self.p.leaf_range[pi] = self.p.leaf_range[o];
                done.insert(pi);
            }
        }
        let root = m.root(c);
        for &s in &steps {
            if !m.is_live(s) || m.parent(s) != c || done.contains(&s) {
                return Err(ScheduleError::new(format!(
                    "fusion %{}: step {s:?} is not a new instruction of its computation",
                    m.name(f)
                )));
            }
            let reads = reached(m, s, &done);
            let views_only = !matches!(def_kind(m, s, self.rules), Def::Fresh | Def::Constant);
            if views_only && m.operands(s).iter().any(|o| !done.contains(o)) {
                return Err(ScheduleError::new(format!(
                    "fusion %{}: step %{} names a value that no step computes",
                    m.name(f),
                    m.name(s)
                )));
            }
            self.p.step_reads.insert(s, reads);
            self.run_inst(s)?;
            done.insert(s);
        }
        // The root is the last step, or a parameter (the fusion returns an operand).
        if !done.contains(&root) {
            return Err(ScheduleError::new(format!(
                "fusion %{}: the root is neither a step nor a parameter",
                m.name(f)
            )));
        }
        Ok(())
    }

    /// Gives `i` its positions and leaves (walking what it runs).
    fn run_inst(&mut self, i: InstId) -> Result<(), ScheduleError> {
        let m = self.m;
        self.p.start[i] = self.pos;
        self.p.end[i] = self.pos;
        self.pos += 1;
        self.p.seq.push(i);
        let ops = m.operands(i);
        let range_of = |p: &Program, o: InstId| p.leaf_range[o];
        let r = match def_kind(m, i, self.rules) {
            Def::Parameter => self.p.leaf_range[i],
            Def::Constant => self.fresh(i, ValueKind::Constant),
            Def::Fresh => {
                let r = self.fresh(i, ValueKind::Defined);
                let sizes = self.rules.scratch(m, i);
                if !sizes.is_empty() {
                    let mut vs = Vec::with_capacity(sizes.len());
                    for (k, sc) in sizes.into_iter().enumerate() {
                        vs.push(self.p.values.push(Value {
                            inst: i,
                            leaf: k as u32,
                            bytes: sc.bytes,
                            kind: match sc.place {
                                ScratchPlace::Temp => ValueKind::Scratch,
                                ScratchPlace::Arena => ValueKind::ArenaScratch,
                            },
                        }));
                    }
                    self.p.scratch[i] = vs;
                }
                r
            }
            Def::Steps => {
                self.run_steps(i)?;
                self.p.end[i] = self.pos;
                self.pos += 1;
                let c = m.comp_attr(i, &AttrKey::Calls).unwrap_or(CompId::NONE);
                range_of(&self.p, m.root(c))
            }
            Def::First => ops.first().map_or((0, 0), |&o| range_of(&self.p, o)),
            Def::Element(k) => {
                let o = ops[0];
                let (s, _) = range_of(&self.p, o);
                match self.table.element(m, m.shape_id(o), k) {
                    Some((off, n)) => (s + off, n),
                    None => {
                        return Err(ScheduleError::new(format!(
                            "%{} reads element {k} of a value without one",
                            m.name(i)
                        )))
                    }
                }
            }
            Def::Operands => {
                if ops.len() == 1 {
                    range_of(&self.p, ops[0])
                } else {
                    let start = self.p.pool.len() as u32;
                    for &o in ops {
                        let (s, n) = range_of(&self.p, o);
                        self.p.pool.extend_from_within(s as usize..(s + n) as usize);
                    }
                    (start, self.p.pool.len() as u32 - start)
                }
            }
            Def::CalleeRoot => {
                let key = if m.opcode(i) == Opcode::Fusion {
                    AttrKey::Calls
                } else {
                    AttrKey::ToApply
                };
                let callee = m.comp_attr(i, &key).unwrap_or(CompId::NONE);
                let args: Vec<(u32, u32)> = ops.iter().map(|&o| range_of(&self.p, o)).collect();
                self.walk(callee, i, &args)?;
                self.p.end[i] = self.pos;
                self.pos += 1;
                range_of(&self.p, m.root(callee))
            }
            Def::While => {
                let cond = m.comp_attr(i, &AttrKey::Condition).unwrap_or(CompId::NONE);
                let body = m.comp_attr(i, &AttrKey::Body).unwrap_or(CompId::NONE);
                let init = ops.first().map_or((0, 0), |&o| range_of(&self.p, o));
                let r = self.loop_state(i, body, init);
                self.walk(cond, i, &[r])?;
                self.walk(body, i, &[r])?;
                self.p.end[i] = self.pos;
                self.pos += 1;
                r
            }
            Def::Conditional => {
                let r = self.fresh(i, ValueKind::BranchOutput);
                let branches = m.branch_computations(i).unwrap_or_default();
                if branches.len() + 1 != ops.len() {
                    return Err(ScheduleError::new(format!(
                        "%{} needs one operand per branch",
                        m.name(i)
                    )));
                }
                for (k, &b) in branches.iter().enumerate() {
                    let arg = range_of(&self.p, ops[k + 1]);
                    self.walk(b, i, &[arg])?;
                }
                self.p.end[i] = self.pos;
                self.pos += 1;
                r
            }
        };
        self.p.leaf_range[i] = r;
        Ok(())
    }

    fn walk(
        &mut self,
        c: CompId,
        site: InstId,
        params: &[(u32, u32)],
    ) -> Result<(), ScheduleError> {
        let m = self.m;
        self.enter(c, site)?;
        self.depth += 1;
        if self.depth > 256 {
            return Err(ScheduleError::new("computations nest more than 256 deep"));
        }
        let pnums = m.params(c);
        if pnums.len() != params.len() {
            return Err(ScheduleError::new(format!(
                "computation {} takes {} parameters but is called with {}",
                m.comp_name(c),
                pnums.len(),
                params.len()
            )));
        }
        for (&pi, &r) in pnums.iter().zip(params) {
            if !pi.is_none() {
                self.p.leaf_range[pi] = r;
            }
        }
        let Some(seq) = m.schedule().and_then(|s| s.sequence(c)) else {
            return Err(ScheduleError::new(format!(
                "computation {} has no schedule",
                m.comp_name(c)
            )));
        };
        for &i in seq {
            self.run_inst(i)?;
        }
        self.p.comp_end[c] = self.pos;
        self.pos += 1;
        self.depth -= 1;
        Ok(())
    }
}

/// Which leaves of loop body `body`'s root are its parameter's same leaf, through views only.
fn pass_through(
    m: &Module,
    rules: &dyn BufferRules,
    table: &ShapeLeaves,
    body: CompId,
) -> Vec<bool> {
    let root = m.root(body);
    let Some(&param) = m.params(body).first() else {
        return Vec::new();
    };
    (0..table.count(m.shape_id(root)))
        .map(|l| source_leaf(m, rules, table, param, root, l, 0) == Some(l))
        .collect()
}

/// The leaf of `param` that leaf `l` of `i` is, following views (`None`: something else).
fn source_leaf(
    m: &Module,
    rules: &dyn BufferRules,
    table: &ShapeLeaves,
    param: InstId,
    i: InstId,
    l: u32,
    depth: u32,
) -> Option<u32> {
    if i == param {
        return Some(l);
    }
    if depth > 64 {
        return None;
    }
    let ops = m.operands(i);
    match def_kind(m, i, rules) {
        Def::First => source_leaf(m, rules, table, param, *ops.first()?, l, depth + 1),
        Def::Element(k) => {
            let o = *ops.first()?;
            let (off, _) = table.element(m, m.shape_id(o), k)?;
            source_leaf(m, rules, table, param, o, off + l, depth + 1)
        }
        Def::Operands => {
            let mut base = 0;
            for &o in ops {
                let n = table.count(m.shape_id(o));
                if l < base + n {
                    return source_leaf(m, rules, table, param, o, l - base, depth + 1);
                }
                base += n;
            }
            None
        }
        _ => None,
    }
}

/// The instructions in `done` that `s` reaches through its operands without passing through
/// `done` (the values a step kernel reads), in first-reached order.
pub fn reached(m: &Module, s: InstId, done: &hashbrown::HashSet<InstId>) -> Vec<InstId> {
    let mut out = Vec::new();
    let mut seen: hashbrown::HashSet<InstId> = hashbrown::HashSet::new();
    let mut stack: Vec<InstId> = m.operands(s).iter().rev().copied().collect();
    while let Some(x) = stack.pop() {
        if !seen.insert(x) {
            continue;
        }
        if done.contains(&x) {
            out.push(x);
        } else {
            stack.extend(m.operands(x).iter().rev());
        }
    }
    out
}
