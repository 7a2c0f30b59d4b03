//! Running a module's kernels and host control flow from its static buffer assignment
//! ([`crate::buffer_rules`]), as XLA's GPU backend runs its thunks on base + offset pointers
//! inside one temporary allocation placed by buffer assignment: per run, one device allocation
//! of the assignment's [`BufferAssignment::temp_bytes`] holds every temporary (alias sets,
//! loop states, branch outputs, kernel scratch, staging copies) at its offset, each output leaf
//! gets one buffer the caller then owns, parameters are the caller's argument leaves and
//! constants (of every host computation) are uploaded once per run; every kernel runs on the
//! [`BufferSlice`]s of its leaf buffers ([`BufferAssignment::leaf_buffers`]), scratch
//! ([`BufferAssignment::scratch`]) and operands, and the root leaves that are not written in
//! place are copied into the outputs at the end ([`BufferAssignment::output_moves`]).
//!
//! Host control flow runs as XLA's while and conditional thunks do, every computation in its
//! schedule (the order the assignment's program follows): a `while` makes its
//! [`BufferAssignment::loop_init`] copies into the loop state, then runs its condition,
//! reads the one-byte predicate back from the condition root's slice and, while it holds,
//! runs its body and makes the [`BufferAssignment::loop_back`] copies from the body's root
//! into the state; a `conditional` reads its `pred` or `s32` selector back from its slice
//! ([`branch_taken`]), runs the branch it selects and makes that branch's
//! [`BufferAssignment::branch_out`] copies into its outputs; a `call` runs its computation
//! (its parameters and root are in the call site's buffers already). A collective
//! ([`crate::collective`]) reads its operands' slices back to the host, runs there as the run's
//! device, and writes its result's leaves into its own slices. Every copy is a
//! [`DeviceMemory::copy`] between slices, in the order the assignment lists them (a cycle goes
//! through the staging temporary it placed).
//!
//! Scope: every module whose assignment `assign` accepts and which places nothing in a runtime
//! arena (the nvptx rules ask for none); [`arena_assignment`] gives the reason otherwise, and
//! the executor ([`crate::executor`]) then runs the module with a device buffer per value and
//! reports that reason ([`crate::executor::Executable::fallback_reason`]). The assignment needs
//! a flat call graph (one call site per computation run as a step): the executor schedules
//! every module it compiles with the memory scheduler, which flattens it first, or flattens
//! and re-schedules one that arrived with a schedule the assignment refuses, as the cpu backend
//! does.
//!
//! Invariants: a run makes exactly one temporary allocation (of `temp_bytes`, zero bytes
//! included) and one buffer per output leaf, whatever its trip counts and branches, and frees
//! the temporary and the constants before it returns, also when it fails; every range a
//! kernel, copy or read-back reaches is checked against its buffer by [`DeviceMemory`], so a
//! wrong offset is an error, never an access outside a buffer. A view (`reshape`, `copy`,
//! row-major `bitcast`, `axle_schedule::views::is_operand_view`) whose leaves the assignment
//! put in its operand's buffers runs no kernel: its bytes are in place already.

use std::collections::HashMap;

use axle_analysis::eval::Device as RunDevice;
use axle_codegen_llvm::elemental::{inst_leaves, literal_leaves};
use axle_codegen_llvm::error::finish;
use axle_ir::entity::EntitySet;
use axle_ir::{AttrKey, BufferId, CompId, InstId, Module, Opcode};
use axle_schedule::views::is_operand_view;
use axle_schedule::{assign, BufferAssignment, Memory, Move};

use crate::buffer_rules::GpuRules;
use crate::collective::run_step;
use crate::control_flow::{branch_taken, pred_value};
use crate::device::{BufferKey, BufferSlice, Device, DeviceMemory};
use crate::kernels::KernelInfo;
use crate::NvptxError;

/// How deep host computations may nest in a run (the assignment's program refuses deeper).
const MAX_DEPTH: usize = 256;

/// The static assignment the executor runs `m` (scheduled, with kernel plan `kernels`) from,
/// or why it cannot: `assign` refuses the module, or the assignment places buffers in a
/// runtime scratch arena, which the executor does not provide.
pub fn arena_assignment(
    m: &Module,
    kernels: &[KernelInfo],
) -> Result<BufferAssignment, NvptxError> {
    let a = assign(m, &GpuRules::new(kernels)).map_err(|e| {
        NvptxError::Assignment(format!(
            "the buffer assignment refuses the module: {}",
            e.message
        ))
    })?;
    let in_arena = a
        .buffers()
        .iter()
        .filter(|b| matches!(b.memory, Memory::Arena { .. }))
        .count();
    if in_arena > 0 || a.arena_bytes > 0 {
        return Err(NvptxError::Assignment(format!(
            "the assignment places {in_arena} buffers ({} bytes) in a runtime scratch arena, \
             which the nvptx executor does not provide",
            a.arena_bytes
        )));
    }
    Ok(a)
}

/// A module ready to run from its static assignment: what [`ArenaProgram::run`] reads.
pub struct ArenaProgram<'a, D: Device> {
    /// The module, scheduled and flat.
    pub module: &'a Module,
    /// Its assignment ([`arena_assignment`]).
    pub assignment: &'a BufferAssignment,
    /// Its kernels, in launch order ([`crate::plan_kernels`]).
    pub kernels: &'a [KernelInfo],
    /// Per instruction with kernels, their positions in `kernels`.
    pub by_inst: &'a HashMap<InstId, Vec<usize>>,
    /// The collectives, run as host steps ([`crate::collective`]).
    pub host_steps: &'a EntitySet<InstId>,
    /// The kernels as the device loaded them.
    pub program: &'a D::Program,
}

/// What one arena run holds: the temporary block, the outputs, the constants uploaded, and the
/// device it runs as.
struct Placed<'a> {
    dev: Option<RunDevice<'a>>,
    args: Vec<BufferKey>,
    temp: BufferKey,
    outputs: Vec<BufferKey>,
    constants: HashMap<(InstId, u32), BufferKey>,
    a: &'a BufferAssignment,
}

impl Placed<'_> {
    /// The range of `bytes` bytes buffer `b` starts.
    fn slice(&self, b: BufferId, bytes: usize) -> Result<BufferSlice, String> {
        let (key, offset) = match self.a.buffer(b).memory {
            Memory::Param(k) => (
                *self
                    .args
                    .get(k as usize)
                    .ok_or_else(|| format!("no argument leaf {k}"))?,
                0,
            ),
            Memory::Constant { inst, leaf } => (
                *self
                    .constants
                    .get(&(inst, leaf))
                    .ok_or_else(|| format!("constant leaf {leaf} was not uploaded"))?,
                0,
            ),
            Memory::Output { leaf, offset } => (
                *self
                    .outputs
                    .get(leaf as usize)
                    .ok_or_else(|| format!("no output leaf {leaf}"))?,
                offset,
            ),
            Memory::Temp { offset } => (self.temp, offset),
            Memory::Arena { .. } => return Err("a buffer in the runtime arena".into()),
        };
        Ok(BufferSlice {
            key,
            offset: offset as usize,
            bytes,
        })
    }

    /// The ranges of `i`'s array leaves, each its leaf's bytes.
    fn leaves(&self, m: &Module, i: InstId) -> Result<Vec<BufferSlice>, String> {
        let shapes = inst_leaves(m, i).map_err(|e| finish(m, e).message)?;
        let bufs = self.a.leaf_buffers(i);
        if bufs.len() != shapes.len() {
            return Err(format!(
                "%{} has {} leaves but {} assigned buffers",
                m.name(i),
                shapes.len(),
                bufs.len()
            ));
        }
        bufs.iter()
            .zip(&shapes)
            .map(|(&b, s)| self.slice(b, leaf_bytes(s)))
            .collect()
    }

    /// The bytes of `i`'s one array leaf, read back to the host (a loop condition's
    /// predicate, a conditional's selector).
    fn read_scalar<D: Device>(
        &self,
        mem: &DeviceMemory<D>,
        m: &Module,
        i: InstId,
    ) -> Result<Vec<u8>, String> {
        match self.leaves(m, i)?.as_slice() {
            [s] => mem.read(*s).map_err(|e| e.to_string()),
            other => Err(format!(
                "%{} has {} array leaves where one scalar is read back",
                m.name(i),
                other.len()
            )),
        }
    }
}

/// The bytes of one array leaf.
pub(crate) fn leaf_bytes(s: &axle_ir::ArrayShape) -> usize {
    s.num_elements().max(0) as usize * s.ty.byte_size()
}

impl<D: Device> ArenaProgram<'_, D> {
    /// Runs the module on the argument leaves `args` (per entry parameter, its leaves) as
    /// device `dev` of a run (for its collectives): gives the output leaves' buffers, which
    /// the caller owns.
    pub fn run(
        &self,
        mem: &DeviceMemory<D>,
        args: &[Vec<BufferKey>],
        dev: Option<RunDevice<'_>>,
    ) -> Result<Vec<BufferKey>, NvptxError> {
        let temp = mem.alloc(self.assignment.temp_bytes as usize)?;
        let mut placed = Placed {
            dev,
            args: args.concat(),
            temp,
            outputs: Vec::new(),
            constants: HashMap::new(),
            a: self.assignment,
        };
        let result = self
            .place_and_run(mem, &mut placed)
            .map_err(NvptxError::Run);
        // The temporary block and the constants are this run's and freed once, here; the
        // outputs are the caller's on success and freed here on failure.
        let _ = mem.free(placed.temp);
        for &k in placed.constants.values() {
            let _ = mem.free(k);
        }
        match result {
            Ok(()) => Ok(placed.outputs),
            Err(e) => {
                for &k in &placed.outputs {
                    let _ = mem.free(k);
                }
                Err(e)
            }
        }
    }

    /// Allocates the outputs, uploads the constants, runs the entry computation and makes the
    /// output moves.
    fn place_and_run(&self, mem: &DeviceMemory<D>, placed: &mut Placed<'_>) -> Result<(), String> {
        let m = self.module;
        let root = m.root(m.entry());
        for s in inst_leaves(m, root).map_err(|e| finish(m, e).message)? {
            placed
                .outputs
                .push(mem.alloc(leaf_bytes(&s)).map_err(|e| e.to_string())?);
        }
        // Every constant of every host computation (the program's steps), once per run.
        for &id in self.assignment.program().sequence() {
            if let Some(lit) = m.literal(id) {
                let mut leaves = Vec::new();
                literal_leaves(lit, &mut leaves);
                for (k, l) in leaves.into_iter().enumerate() {
                    let key = mem
                        .upload(&l.data)
                        .map_err(|e| self.at(id, e.to_string()))?;
                    placed.constants.insert((id, k as u32), key);
                }
            }
        }
        self.computation(mem, placed, m.entry(), 0)?;
        self.moves(mem, placed, self.assignment.output_moves())
            .map_err(|e| format!("copying into the outputs: {e}"))
    }

    /// `msg` about instruction `id`, naming it and its opcode.
    fn at(&self, id: InstId, msg: String) -> String {
        let m = self.module;
        format!("%{} ({}): {msg}", m.name(id), m.opcode(id).name())
    }

    /// Runs host computation `c`'s instructions in its schedule, at nesting depth `depth`.
    fn computation(
        &self,
        mem: &DeviceMemory<D>,
        placed: &Placed<'_>,
        c: CompId,
        depth: usize,
    ) -> Result<(), String> {
        let m = self.module;
        if depth > MAX_DEPTH {
            return Err(format!("computations nest more than {MAX_DEPTH} deep"));
        }
        let order = m
            .schedule()
            .and_then(|s| s.sequence(c))
            .ok_or_else(|| format!("computation {} has no schedule", m.comp_name(c)))?;
        for &id in order {
            let step = match m.opcode(id) {
                Opcode::While => self.run_while(mem, placed, id, depth),
                Opcode::Conditional => self.run_conditional(mem, placed, id, depth),
                Opcode::Call => match m.comp_attr(id, &AttrKey::ToApply) {
                    Some(callee) => self.computation(mem, placed, callee, depth + 1),
                    None => Err("call needs to_apply".into()),
                },
                _ if self.host_steps.contains(id) => self.host_step(mem, placed, id),
                _ => self.launch(mem, placed, id),
            };
            step.map_err(|e| self.at(id, e))?;
        }
        Ok(())
    }

    /// Runs `while` `id`: the copies into its state, then its condition and, while the
    /// predicate read back holds, its body and the copies back into the state.
    fn run_while(
        &self,
        mem: &DeviceMemory<D>,
        placed: &Placed<'_>,
        id: InstId,
        depth: usize,
    ) -> Result<(), String> {
        let m = self.module;
        let a = self.assignment;
        let (Some(cond), Some(body)) = (
            m.comp_attr(id, &AttrKey::Condition),
            m.comp_attr(id, &AttrKey::Body),
        ) else {
            return Err("while needs a condition and a body".into());
        };
        self.moves(mem, placed, a.loop_init(id))?;
        loop {
            self.computation(mem, placed, cond, depth + 1)?;
            let pred = placed.read_scalar(mem, m, m.root(cond))?;
            if !pred_value(&pred).map_err(|e| e.to_string())? {
                return Ok(());
            }
            self.computation(mem, placed, body, depth + 1)?;
            self.moves(mem, placed, a.loop_back(id))?;
        }
    }

    /// Runs `conditional` `id`: the branch its selector (read back) takes, then that branch's
    /// copies into the outputs.
    fn run_conditional(
        &self,
        mem: &DeviceMemory<D>,
        placed: &Placed<'_>,
        id: InstId,
        depth: usize,
    ) -> Result<(), String> {
        let m = self.module;
        let branches = m
            .branch_computations(id)
            .ok_or("conditional needs its branch computations")?;
        let selector = *m
            .operands(id)
            .first()
            .ok_or("conditional needs a selector")?;
        let pred = m.array_shape(selector).is_some_and(|s| s.ty.is_pred());
        let k = branch_taken(pred, &placed.read_scalar(mem, m, selector)?, branches.len())
            .map_err(|e| e.to_string())?;
        self.computation(mem, placed, branches[k], depth + 1)?;
        self.moves(mem, placed, self.assignment.branch_out(id, k))
    }

    /// Makes the copies `moves` between assigned buffers, in order.
    fn moves(
        &self,
        mem: &DeviceMemory<D>,
        placed: &Placed<'_>,
        moves: &[Move],
    ) -> Result<(), String> {
        let a = self.assignment;
        for mv in moves {
            let bytes = a.buffer(mv.src).size.min(a.buffer(mv.dst).size) as usize;
            mem.copy(placed.slice(mv.src, bytes)?, placed.slice(mv.dst, bytes)?)
                .map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Runs collective `id` on the host ([`crate::collective`]): its operands' slices read
    /// back, its result's leaves written into its own slices.
    fn host_step(
        &self,
        mem: &DeviceMemory<D>,
        placed: &Placed<'_>,
        id: InstId,
    ) -> Result<(), String> {
        let m = self.module;
        let mut ins = Vec::with_capacity(m.operands(id).len());
        for &o in m.operands(id) {
            let leaves = placed
                .leaves(m, o)?
                .into_iter()
                .map(|s| mem.read(s))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| e.to_string())?;
            ins.push(leaves);
        }
        let outs = run_step(m, id, ins, placed.dev).map_err(|e| e.to_string())?;
        let slices = placed.leaves(m, id)?;
        if slices.len() != outs.len() {
            return Err(format!(
                "{} result leaves for {} assigned buffers",
                outs.len(),
                slices.len()
            ));
        }
        for (s, bytes) in slices.into_iter().zip(outs) {
            mem.write(s, &bytes).map_err(|e| e.to_string())?;
        }
        Ok(())
    }

    /// Runs the kernels of instruction `id` (none for an instruction without any, or for a
    /// view whose bytes are in place) on their slices.
    fn launch(&self, mem: &DeviceMemory<D>, placed: &Placed<'_>, id: InstId) -> Result<(), String> {
        let m = self.module;
        let Some(ks) = self.by_inst.get(&id) else {
            return Ok(());
        };
        let a = self.assignment;
        if let (true, Some(&o)) = (is_operand_view(m, id), m.operands(id).first()) {
            if a.leaf_buffers(id) == a.leaf_buffers(o) {
                // A view in its operand's buffers: the bytes are in place.
                return Ok(());
            }
        }
        let outs = placed.leaves(m, id)?;
        let scratch_bufs = a.scratch(id);
        let sizes = &self.kernels[ks[0]].scratch;
        if scratch_bufs.len() != sizes.len() {
            return Err("its scratch was not assigned".into());
        }
        let scratch = scratch_bufs
            .iter()
            .zip(sizes)
            .map(|(&b, &bytes)| placed.slice(b, bytes as usize))
            .collect::<Result<Vec<_>, _>>()?;
        for &k in ks {
            let info = &self.kernels[k];
            let mut call = outs.clone();
            call.extend_from_slice(&scratch);
            for &o in &info.operands {
                call.extend(placed.leaves(m, o)?);
            }
            mem.launch(self.program, info, k, &call)
                .map_err(|e| format!("kernel {}: {e}", info.name))?;
        }
        Ok(())
    }
}
