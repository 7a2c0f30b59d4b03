//! Buffer assignment: every value of a scheduled module gets a buffer, every temporary buffer
//! an offset in one block.
//!
//! [`assign`] builds the [`Program`] (values and positions), its [`Liveness`], the may-alias
//! decisions of [`Aliases`], then:
//! 1. one buffer per alias set; a set holding an entry parameter or a constant lives in that
//!    parameter's or literal's memory;
//! 2. the entry root's leaves: a writable set not yet given to an output becomes output leaf
//!    `j` itself (its memory is the caller's output buffer, not a temporary, as XLA counts
//!    it); a donated parameter aliased to output `j` holds it in place; any other root leaf is
//!    copied into an output buffer at the end;
//! 3. copies where a may-alias was refused: into a loop's state before it starts and after
//!    each body run, into a conditional's outputs after a branch, into the outputs at the end.
//!    Each group is one parallel assignment made sequential: a copy that overwrites another's
//!    source waits for it, and a cycle goes through a staging temporary;
//! 4. the heap simulator ([`crate::heap_simulator`]) places the temporaries (alias sets, kernel
//!    scratch, staging) in one block with 64-byte aligned offsets, keeping its best strategy;
//! 5. arena scratch ([`crate::rules::ScratchPlace::Arena`]: a library routine's working memory,
//!    GEMM packing and sort planes) and the intermediates a backend names as a library
//!    routine's own ([`BufferRules::arena_operands`]: a split reduction's partial results, in
//!    a set of buffers of their own) are no temporaries: they live in the runtime's scratch
//!    arena, placed by a second heap simulation (scratch is live at its kernel only), reported
//!    apart from the temporary block as XLA's `temp_size_in_bytes` leaves out what Eigen and
//!    `std::sort` allocate at run time.
//!
//! The result answers what a backend needs: the buffer of every leaf of every instruction that
//! runs as a step, each buffer's memory (parameter, constant, output or temporary offset), the
//! copies to make, the scratch of each kernel; and reports the block size, the peak of
//! simultaneously live temporary bytes (a lower bound for any placement), fragmentation and the
//! strategies tried.

use hashbrown::HashMap;

use axle_ir::entity::{EntitySet, PrimaryMap, SecondaryMap};
use axle_ir::{AttrKey, BufferId, InstId, Module};

use crate::alias::{donations, Aliases};
use crate::error::ScheduleError;
use crate::heap_simulator::{fits, peak, simulate, Block, Strategy};
use crate::liveness::{loop_body_end, Liveness};
use crate::program::{Program, ValueId, ValueKind};
use crate::rules::BufferRules;
use crate::views::{def_kind, Def};

/// Alignment of every temporary's offset, in bytes (a cache line; 512-bit vectors).
pub const ALIGN: u64 = 64;

/// Where a buffer's memory is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Memory {
    /// Leaf `k` (depth-first over all entry parameters) of the entry's parameters.
    Param(u32),
    /// Leaf `leaf` of constant `inst`'s literal.
    Constant {
        /// The constant.
        inst: InstId,
        /// The leaf.
        leaf: u32,
    },
    /// In the memory of the entry result's leaf `leaf`, which the caller provides: the output
    /// itself at offset 0, or a temporary that is dead while that memory holds no value (before
    /// the output's first value is written, or between two of its values' live intervals).
    Output {
        /// The output leaf.
        leaf: u32,
        /// The offset, a multiple of [`ALIGN`].
        offset: u64,
    },
    /// At `offset` in the temporary block.
    Temp {
        /// The offset, a multiple of [`ALIGN`].
        offset: u64,
    },
    /// At `offset` in the runtime's scratch arena (a kernel's arena scratch; no kernel's
    /// arena scratch is live beside another kernel's).
    Arena {
        /// The offset, a multiple of [`ALIGN`].
        offset: u64,
    },
}

/// What a buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// A set of values.
    Values,
    /// A kernel's scratch.
    Scratch,
    /// A staging copy that breaks a cycle of copies.
    Staging,
    /// An output that a root leaf is copied into.
    OutputCopy,
}

/// One buffer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Buffer {
    /// Its memory.
    pub memory: Memory,
    /// What it holds.
    pub role: Role,
    /// Its size in bytes.
    pub size: u64,
    /// The first and last positions it is live at.
    pub span: (u32, u32),
    /// The values it holds, in id order (empty for staging and output copies).
    pub values: Vec<ValueId>,
}

/// One copy between buffers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Move {
    /// The buffer read.
    pub src: BufferId,
    /// The buffer written.
    pub dst: BufferId,
}

/// The buffers of a scheduled module.
#[derive(Clone, Debug)]
pub struct BufferAssignment {
    program: Program,
    liveness: Liveness,
    buffers: PrimaryMap<BufferId, Buffer>,
    value_buffer: SecondaryMap<ValueId, BufferId>,
    loop_init: HashMap<InstId, Vec<Move>>,
    loop_back: HashMap<InstId, Vec<Move>>,
    branch_out: HashMap<(InstId, usize), Vec<Move>>,
    outputs: Vec<BufferId>,
    output_moves: Vec<Move>,
    /// Bytes of the temporary block.
    pub temp_bytes: u64,
    /// Bytes of the scratch arena the runtime provides beside the temporary block (the
    /// largest total of one kernel's arena scratch).
    pub arena_bytes: u64,
    /// The highest total of temporary bytes live at one position: no placement needs less.
    pub peak_bytes: u64,
    /// The heap strategy kept.
    pub strategy: Strategy,
    /// The block size each strategy reached (`None`: it gave up on its work budget).
    pub tried: Vec<(Strategy, Option<u64>)>,
    /// May-aliases taken: in place, loop state in, loop state back, branch outputs.
    pub merged: [u64; 4],
    /// Output leaves held in place by donated parameters: `(output leaf, parameter leaf)`.
    pub donated_outputs: Vec<(u32, u32)>,
}

/// Assigns buffers to `m`, which must be scheduled and flat (see [`crate::schedule_module`]).
pub fn assign(m: &Module, rules: &dyn BufferRules) -> Result<BufferAssignment, ScheduleError> {
    let program = Program::new(m, rules)?;
    let liveness = Liveness::new(m, &program);
    let aliases = Aliases::new(m, &program, &liveness, rules);
    let nv = program.values().len();

    // 1. One buffer per set, numbered in order of the sets' first values.
    let mut value_buffer = SecondaryMap::with_default(BufferId::NONE);
    let mut root_buffer = SecondaryMap::with_default(BufferId::NONE);
    let mut buffers: PrimaryMap<BufferId, Buffer> = PrimaryMap::new();
    for v in program.values().keys() {
        let r = aliases.find(v);
        if root_buffer[r].is_none() {
            root_buffer[r] = buffers.push(Buffer {
                memory: Memory::Temp { offset: 0 },
                role: Role::Values,
                size: 0,
                span: (u32::MAX, 0),
                values: Vec::new(),
            });
        }
        let b = root_buffer[r];
        value_buffer[v] = b;
        let val = program.value(v);
        let buf = &mut buffers[b];
        buf.values.push(v);
        buf.size = buf.size.max(val.bytes);
        let (s, e) = liveness.span(v);
        buf.span = (buf.span.0.min(s), buf.span.1.max(e));
        match val.kind {
            ValueKind::Param(k) => buf.memory = Memory::Param(k),
            ValueKind::Constant => {
                buf.memory = Memory::Constant {
                    inst: val.inst,
                    leaf: val.leaf,
                }
            }
            ValueKind::Scratch => buf.role = Role::Scratch,
            ValueKind::ArenaScratch => {
                buf.role = Role::Scratch;
                buf.memory = Memory::Arena { offset: 0 };
            }
            _ => {}
        }
    }

    let mut a = BufferAssignment {
        program,
        liveness,
        buffers,
        value_buffer,
        loop_init: HashMap::new(),
        loop_back: HashMap::new(),
        branch_out: HashMap::new(),
        outputs: Vec::new(),
        output_moves: Vec::new(),
        temp_bytes: 0,
        arena_bytes: 0,
        peak_bytes: 0,
        strategy: Strategy::BestFitBySize,
        tried: Vec::new(),
        merged: aliases.merged,
        donated_outputs: Vec::new(),
    };

    // 2. Outputs.
    let entry = m.entry();
    let end = a.program.comp_end(entry);
    let donated: Vec<(u32, u32)> = if rules.writes_donated_params() {
        donations(m)
    } else {
        Vec::new()
    };
    let root_leaves: Vec<ValueId> = a.program.leaves(m.root(entry)).to_vec();
    let mut claimed: EntitySet<BufferId> = EntitySet::with_capacity(a.buffers.len());
    for (j, &v) in root_leaves.iter().enumerate() {
        let j = j as u32;
        let b = a.value_buffer[v];
        let buf = &a.buffers[b];
        let in_place = match buf.memory {
            Memory::Temp { .. } => !claimed.contains(b),
            Memory::Param(k) => !claimed.contains(b) && donated.contains(&(j, k)),
            _ => false,
        };
        if in_place {
            claimed.insert(b);
            if let Memory::Param(k) = buf.memory {
                a.donated_outputs.push((j, k));
            } else {
                a.buffers[b].memory = Memory::Output { leaf: j, offset: 0 };
            }
            a.outputs.push(b);
        } else {
            let size = buf.size;
            let dst = a.push(
                Memory::Output { leaf: j, offset: 0 },
                Role::OutputCopy,
                size,
                (end, end),
            );
            a.output_moves.push(Move { src: b, dst });
            a.outputs.push(dst);
        }
    }

    // 3. Copies where may-aliases were refused.
    for &i in a.program.sequence().to_vec().iter() {
        match def_kind(m, i, rules) {
            Def::While => {
                let w_leaves = a.program.leaves(i).to_vec();
                let init: Vec<ValueId> = m
                    .operands(i)
                    .first()
                    .map_or(Vec::new(), |&o| a.program.leaves(o).to_vec());
                let moves = a.moves(&init, &w_leaves);
                let seq = a.sequentialize(moves, a.program.start(i));
                a.loop_init.insert(i, seq);
                if let Some(body) = m.comp_attr(i, &AttrKey::Body) {
                    let r = a.program.leaves(m.root(body)).to_vec();
                    let moves = a.moves(&r, &w_leaves);
                    let seq = a.sequentialize(moves, loop_body_end(m, &a.program, i));
                    a.loop_back.insert(i, seq);
                }
            }
            Def::Conditional => {
                let outs = a.program.leaves(i).to_vec();
                for (k, b) in m
                    .branch_computations(i)
                    .unwrap_or_default()
                    .into_iter()
                    .enumerate()
                {
                    let r = a.program.leaves(m.root(b)).to_vec();
                    let moves = a.moves(&r, &outs);
                    let seq = a.sequentialize(moves, a.program.comp_end(b));
                    a.branch_out.insert((i, k), seq);
                }
            }
            _ => {}
        }
    }

    // The intermediates the backend keeps in the arena: sets of no other values.
    let mut arena_value: SecondaryMap<ValueId, bool> = SecondaryMap::with_capacity(nv);
    for &i in a.program.sequence() {
        if def_kind(m, i, rules) != Def::Fresh {
            continue;
        }
        for k in rules.arena_operands(m, i) {
            if let Some(&o) = m.operands(i).get(k) {
                for &v in a.program.leaves(o) {
                    arena_value[v] = a.program.value(v).kind == ValueKind::Defined;
                }
            }
        }
    }
    for buf in a.buffers.values_mut() {
        let all = !buf.values.is_empty() && buf.values.iter().all(|&v| arena_value[v]);
        if all && buf.role == Role::Values && matches!(buf.memory, Memory::Temp { .. }) {
            buf.memory = Memory::Arena { offset: 0 };
        }
    }

    // 4. Temporaries that are dead while an output's memory holds no value live in that
    // output's memory (as XLA reuses output allocations), packed best fit; the rest go to the
    // heap.
    a.place_in_outputs();

    // 5. The heap.
    let (temps, blocks) = a.blocks(|mem| matches!(mem, Memory::Temp { .. }));
    let (in_arena, arena_blocks) = a.blocks(|mem| matches!(mem, Memory::Arena { .. }));
    if !fits(&blocks, ALIGN) || !fits(&arena_blocks, ALIGN) {
        return Err(ScheduleError::new(
            "the program's temporary buffers take more than 2^64 bytes",
        ));
    }
    a.peak_bytes = peak(&blocks);
    let heap = simulate(&blocks, ALIGN, a.peak_bytes);
    for (k, &b) in temps.iter().enumerate() {
        a.buffers[b].memory = Memory::Temp {
            offset: heap.placement.offsets[k],
        };
    }
    a.temp_bytes = heap.placement.size;
    a.strategy = heap.strategy;
    a.tried = heap.tried;

    // 6. The arena, a heap of its own: kernels' scratch (live at the kernel) and the
    // intermediates kept there.
    let blocks = arena_blocks;
    let heap = simulate(&blocks, ALIGN, peak(&blocks));
    for (k, &b) in in_arena.iter().enumerate() {
        a.buffers[b].memory = Memory::Arena {
            offset: heap.placement.offsets[k],
        };
    }
    a.arena_bytes = heap.placement.size;
    Ok(a)
}

impl BufferAssignment {
    /// The non-empty buffers whose memory is in a space (`space`), with their heap blocks.
    fn blocks(&self, space: impl Fn(&Memory) -> bool) -> (Vec<BufferId>, Vec<Block>) {
        let ids: Vec<BufferId> = self
            .buffers
            .keys()
            .filter(|&b| space(&self.buffers[b].memory) && self.buffers[b].size > 0)
            .collect();
        let blocks = ids
            .iter()
            .map(|&b| Block {
                size: self.buffers[b].size,
                start: self.buffers[b].span.0,
                end: self.buffers[b].span.1,
            })
            .collect();
        (ids, blocks)
    }

    fn push(&mut self, memory: Memory, role: Role, size: u64, span: (u32, u32)) -> BufferId {
        self.buffers.push(Buffer {
            memory,
            role,
            size,
            span,
            values: Vec::new(),
        })
    }

    /// Places temporaries in output buffers where they are dead while the output's memory holds
    /// nothing (before the output's first value is written, or between the live intervals of
    /// its values, such as a loop state's head and tail): largest first, each into the smallest
    /// output it fits, at the lowest-waste gap among the temporaries already there that it
    /// overlaps in time.
    fn place_in_outputs(&mut self) {
        // (capacity, the sorted intervals the output's values are live in, its buffer)
        type Bin = (u64, Vec<(u32, u32)>, BufferId);
        let mut bins: Vec<Bin> = self
            .outputs
            .iter()
            .filter(|&&b| matches!(self.buffers[b].memory, Memory::Output { .. }))
            .map(|&b| {
                let buf = &self.buffers[b];
                let mut busy: Vec<(u32, u32)> = buf
                    .values
                    .iter()
                    .flat_map(|&v| self.liveness.intervals(v).iter().copied())
                    .collect();
                if busy.is_empty() {
                    busy.push(buf.span);
                }
                busy.sort_unstable();
                (buf.size, busy, b)
            })
            .collect();
        bins.sort_unstable_by_key(|&(size, _, b)| (size, b.index()));
        if bins.is_empty() {
            return;
        }
        let mut temps: Vec<BufferId> = self
            .buffers
            .keys()
            .filter(|&b| {
                matches!(self.buffers[b].memory, Memory::Temp { .. }) && self.buffers[b].size > 0
            })
            .collect();
        temps.sort_unstable_by_key(|&b| {
            (
                std::cmp::Reverse(self.buffers[b].size),
                self.buffers[b].span.0,
                b,
            )
        });
        // Per bin: placed (offset, padded end, span).
        type Placed = (u64, u64, (u32, u32));
        let mut placed: Vec<Vec<Placed>> = vec![Vec::new(); bins.len()];
        let largest = bins.iter().map(|b| b.0).max().unwrap_or(0);
        for t in temps {
            let (size, span) = (self.buffers[t].size, self.buffers[t].span);
            if size > largest {
                continue;
            }
            let need = size.div_ceil(ALIGN) * ALIGN;
            for (k, (cap, busy, out)) in bins.iter().enumerate() {
                let (cap, out) = (*cap, *out);
                // Bounded work per bin keeps this linear on huge graphs.
                if size > cap || placed[k].len() >= 4096 {
                    continue;
                }
                // No value of the output may be live during the span (intervals by start).
                if busy
                    .iter()
                    .take_while(|iv| iv.0 <= span.1)
                    .any(|iv| iv.1 >= span.0)
                {
                    continue;
                }
                let mut live: Vec<(u64, u64)> = placed[k]
                    .iter()
                    .filter(|p| p.2 .0 <= span.1 && span.0 <= p.2 .1)
                    .map(|p| (p.0, p.1))
                    .collect();
                live.sort_unstable();
                // The smallest gap that fits: between placed temporaries, or above them.
                let mut cur = 0u64;
                let mut best: Option<(u64, u64)> = None;
                let mut consider = |room: u64, at: u64| {
                    if room >= size && best.is_none_or(|(r, _)| room < r) {
                        best = Some((room, at));
                    }
                };
                for &(o, e) in &live {
                    if o > cur {
                        consider(o - cur, cur);
                    }
                    cur = cur.max(e);
                }
                if cur < cap {
                    consider(cap - cur, cur);
                }
                if let Some((_, at)) = best {
                    placed[k].push((at, at + need, span));
                    let leaf = match self.buffers[out].memory {
                        Memory::Output { leaf, .. } => leaf,
                        _ => 0,
                    };
                    self.buffers[t].memory = Memory::Output { leaf, offset: at };
                    break;
                }
            }
        }
    }

    fn moves(&self, src: &[ValueId], dst: &[ValueId]) -> Vec<Move> {
        src.iter()
            .zip(dst)
            .map(|(&s, &d)| Move {
                src: self.value_buffer[s],
                dst: self.value_buffer[d],
            })
            .filter(|mv| mv.src != mv.dst)
            .collect()
    }

    /// The parallel copies `moves` as a sequence: a copy that overwrites another's source waits
    /// for it; a cycle is broken through a staging buffer live at `pos`.
    fn sequentialize(&mut self, moves: Vec<Move>, pos: u32) -> Vec<Move> {
        let mut pending = moves;
        let mut out = Vec::with_capacity(pending.len());
        while !pending.is_empty() {
            let ready = (0..pending.len()).find(|&k| {
                let d = pending[k].dst;
                !pending
                    .iter()
                    .enumerate()
                    .any(|(j, o)| j != k && o.src == d)
            });
            match ready {
                Some(k) => out.push(pending.remove(k)),
                None => {
                    let s = pending[0].src;
                    let size = self.buffers[s].size;
                    let t = self.push(Memory::Temp { offset: 0 }, Role::Staging, size, (pos, pos));
                    out.push(Move { src: s, dst: t });
                    for mv in pending.iter_mut() {
                        if mv.src == s {
                            mv.src = t;
                        }
                    }
                }
            }
        }
        out
    }

    /// The program the assignment is for.
    pub fn program(&self) -> &Program {
        &self.program
    }

    /// The values' live intervals.
    pub fn liveness(&self) -> &Liveness {
        &self.liveness
    }

    /// Every buffer.
    pub fn buffers(&self) -> &[Buffer] {
        self.buffers.values().as_slice()
    }

    /// Buffer `b`.
    pub fn buffer(&self, b: BufferId) -> &Buffer {
        &self.buffers[b]
    }

    /// The buffer of value `v`.
    pub fn value_buffer(&self, v: ValueId) -> BufferId {
        self.value_buffer[v]
    }

    /// The buffers of `i`'s array leaves, depth-first (empty outside the program).
    pub fn leaf_buffers(&self, i: InstId) -> Vec<BufferId> {
        self.program
            .leaves(i)
            .iter()
            .map(|&v| self.value_buffer[v])
            .collect()
    }

    /// The scratch buffers of `i`'s kernel, in the order the rules asked for them.
    pub fn scratch(&self, i: InstId) -> Vec<BufferId> {
        self.program
            .scratch(i)
            .iter()
            .map(|&v| self.value_buffer[v])
            .collect()
    }

    /// Copies into `while` `w`'s state before the loop, in order.
    pub fn loop_init(&self, w: InstId) -> &[Move] {
        self.loop_init.get(&w).map_or(&[], |v| &v[..])
    }

    /// Copies from the body's root into `while` `w`'s state after each body run, in order.
    pub fn loop_back(&self, w: InstId) -> &[Move] {
        self.loop_back.get(&w).map_or(&[], |v| &v[..])
    }

    /// Copies from branch `k`'s root into conditional `c`'s outputs, in order.
    pub fn branch_out(&self, c: InstId, k: usize) -> &[Move] {
        self.branch_out.get(&(c, k)).map_or(&[], |v| &v[..])
    }

    /// The buffer holding output leaf `j` at the end (an [`Memory::Output`] buffer, or a
    /// donated parameter's).
    pub fn output(&self, j: usize) -> BufferId {
        self.outputs[j]
    }

    /// Whether `b` is the buffer of an output leaf (not a temporary placed in output memory).
    pub fn is_output(&self, b: BufferId) -> bool {
        self.outputs.contains(&b)
    }

    /// Copies into output buffers at the end, in order.
    pub fn output_moves(&self) -> &[Move] {
        &self.output_moves
    }

    /// Whether `i` writes output leaf `leaf` over operand `k`'s buffer.
    pub fn in_place(&self, m: &Module, i: InstId, k: usize, leaf: usize) -> bool {
        let out = self.program.leaves(i).get(leaf);
        let op = m
            .operands(i)
            .get(k)
            .and_then(|&o| self.program.leaves(o).first());
        matches!((out, op), (Some(&o), Some(&p)) if self.value_buffer[o] == self.value_buffer[p])
    }

    /// Bytes of the output buffers.
    pub fn output_bytes(&self) -> u64 {
        self.outputs
            .iter()
            .filter(|&&b| matches!(self.buffers[b].memory, Memory::Output { .. }))
            .fold(0u64, |a, &b| a.saturating_add(self.buffers[b].size))
    }

    /// Temporaries placed in output memory before the outputs are written.
    pub fn temps_in_outputs(&self) -> usize {
        self.buffers
            .keys()
            .filter(|&b| {
                matches!(self.buffers[b].memory, Memory::Output { .. }) && !self.is_output(b)
            })
            .count()
    }

    /// Moves temporary `b` to `offset` in the temporary block, bypassing the assigner: for
    /// experiments with placements and for testing checkers (nothing re-validates it).
    pub fn set_temp_offset(&mut self, b: BufferId, offset: u64) {
        self.buffers[b].memory = Memory::Temp { offset };
        self.temp_bytes = self.temp_bytes.max(offset + self.buffers[b].size);
    }

    /// Bytes the block has beyond the peak (`temp_bytes - peak_bytes`).
    pub fn fragmentation_bytes(&self) -> u64 {
        self.temp_bytes.saturating_sub(self.peak_bytes)
    }
}
