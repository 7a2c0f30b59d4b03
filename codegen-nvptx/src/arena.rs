//! Running a module's kernels from its static buffer assignment ([`crate::buffer_rules`]), as
//! XLA's GPU backend runs its thunks on base + offset pointers inside one temporary allocation
//! placed by buffer assignment: per run, one device allocation of the assignment's
//! [`BufferAssignment::temp_bytes`] holds every temporary (alias sets, kernel scratch, staging
//! copies) at its offset, each output leaf gets one buffer the caller then owns, parameters
//! are the caller's argument leaves and constants are uploaded once per run; every kernel runs
//! on the [`BufferSlice`]s of its leaf buffers ([`BufferAssignment::leaf_buffers`]), scratch
//! ([`BufferAssignment::scratch`]) and operands, and the root leaves that are not written in
//! place are copied into the outputs at the end ([`BufferAssignment::output_moves`]).
//!
//! Scope: straight-line modules, whose only host computation is the entry (no `while`,
//! `conditional` or `call` on the host) and whose assignment places nothing in a runtime
//! arena; [`arena_assignment`] gives `None` for any other module (or where `assign` refuses
//! it), and the executor ([`crate::executor`]) then runs it with a device buffer per value,
//! freed after its last reader. Loop, branch and call moves (`loop_init`, `loop_back`,
//! `branch_out`) are not executed here yet.
//!
//! Invariants: a run makes exactly one temporary allocation (of `temp_bytes`, zero bytes
//! included) and one buffer per output leaf, and frees the temporary and the constants before
//! it returns, also when it fails; every range a kernel or copy reaches is checked against its
//! buffer by [`DeviceMemory`], so a wrong offset is an error, never a write outside a buffer.
//! A view (`reshape`, `copy`, row-major `bitcast`, `axle_schedule::views::is_operand_view`)
//! whose leaves the assignment put in its operand's buffers runs no kernel: its bytes are in
//! place already.

use std::collections::HashMap;

use axle_codegen_llvm::elemental::{inst_leaves, literal_leaves};
use axle_codegen_llvm::error::finish;
use axle_ir::{BufferId, InstId, Module};
use axle_schedule::views::is_operand_view;
use axle_schedule::{assign, BufferAssignment, Memory};

use crate::buffer_rules::GpuRules;
use crate::device::{BufferKey, BufferSlice, Device, DeviceMemory};
use crate::kernels::KernelInfo;

/// The static assignment the executor runs `m` (scheduled, with kernel plan `kernels`) from,
/// where it can: `None` for a module with host control flow (`host_comps` other than the
/// entry), one `assign` refuses, or one needing a runtime arena.
pub fn arena_assignment(
    m: &Module,
    kernels: &[KernelInfo],
    host_comps: usize,
) -> Option<BufferAssignment> {
    if host_comps != 1 {
        return None;
    }
    let a = assign(m, &GpuRules::new(kernels)).ok()?;
    let in_arena = a
        .buffers()
        .iter()
        .any(|b| matches!(b.memory, Memory::Arena { .. }));
    (!in_arena && a.arena_bytes == 0).then_some(a)
}

/// What one arena run holds: the temporary block, the outputs, the constants uploaded.
struct Placed<'a> {
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
}

/// The bytes of one array leaf.
pub(crate) fn leaf_bytes(s: &axle_ir::ArrayShape) -> usize {
    s.num_elements().max(0) as usize * s.ty.byte_size()
}

/// Runs entry order `order` of `m` from assignment `a` on the argument leaves `args` (per
/// entry parameter, its leaves): gives the output leaves' buffers, which the caller owns.
#[allow(clippy::too_many_arguments)]
pub fn run_from_assignment<D: Device>(
    mem: &DeviceMemory<D>,
    m: &Module,
    a: &BufferAssignment,
    order: &[InstId],
    kernels: &[KernelInfo],
    by_inst: &HashMap<InstId, Vec<usize>>,
    program: &D::Program,
    args: &[Vec<BufferKey>],
) -> Result<Vec<BufferKey>, String> {
    let root = m.root(m.entry());
    let out_shapes = inst_leaves(m, root).map_err(|e| finish(m, e).message)?;
    let temp = mem.alloc(a.temp_bytes as usize)?;
    let mut placed = Placed {
        args: args.concat(),
        temp,
        outputs: Vec::with_capacity(out_shapes.len()),
        constants: HashMap::new(),
        a,
    };
    let result = place_and_run(
        mem,
        m,
        order,
        kernels,
        by_inst,
        program,
        &out_shapes,
        &mut placed,
    );
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

/// Allocates the outputs, uploads the constants, runs the kernels in order and makes the
/// output moves.
#[allow(clippy::too_many_arguments)]
fn place_and_run<D: Device>(
    mem: &DeviceMemory<D>,
    m: &Module,
    order: &[InstId],
    kernels: &[KernelInfo],
    by_inst: &HashMap<InstId, Vec<usize>>,
    program: &D::Program,
    out_shapes: &[axle_ir::ArrayShape],
    placed: &mut Placed<'_>,
) -> Result<(), String> {
    for s in out_shapes {
        placed.outputs.push(mem.alloc(leaf_bytes(s))?);
    }
    let err = |id: InstId, msg: String| format!("%{} ({}): {msg}", m.name(id), m.opcode(id).name());
    for &id in order {
        if let Some(lit) = m.literal(id) {
            let mut leaves = Vec::new();
            literal_leaves(lit, &mut leaves);
            for (k, l) in leaves.into_iter().enumerate() {
                let key = mem.upload(&l.data).map_err(|e| err(id, e))?;
                placed.constants.insert((id, k as u32), key);
            }
        }
    }
    for &id in order {
        let Some(ks) = by_inst.get(&id) else {
            continue;
        };
        let outs = placed.leaves(m, id).map_err(|e| err(id, e))?;
        if is_operand_view(m, id) {
            let o = m.operands(id)[0];
            if placed.a.leaf_buffers(id) == placed.a.leaf_buffers(o) {
                // A view in its operand's buffers: the bytes are in place.
                continue;
            }
        }
        let scratch_bufs = placed.a.scratch(id);
        let sizes = &kernels[ks[0]].scratch;
        if scratch_bufs.len() != sizes.len() {
            return Err(err(id, "its scratch was not assigned".into()));
        }
        let scratch = scratch_bufs
            .iter()
            .zip(sizes)
            .map(|(&b, &bytes)| placed.slice(b, bytes as usize))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| err(id, e))?;
        for &k in ks {
            let info = &kernels[k];
            let mut call = outs.clone();
            call.extend_from_slice(&scratch);
            for &o in &info.operands {
                call.extend(placed.leaves(m, o).map_err(|e| err(id, e))?);
            }
            mem.launch(program, info, k, &call)
                .map_err(|e| err(id, format!("kernel {}: {e}", info.name)))?;
        }
    }
    for mv in placed.a.output_moves() {
        let bytes = placed
            .a
            .buffer(mv.src)
            .size
            .min(placed.a.buffer(mv.dst).size) as usize;
        let src = placed.slice(mv.src, bytes)?;
        let dst = placed.slice(mv.dst, bytes)?;
        mem.copy(src, dst)
            .map_err(|e| format!("copying into the outputs: {e}"))?;
    }
    Ok(())
}
