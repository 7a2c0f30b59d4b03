//! [`GpuRules`]: what the `schedule` crate's buffer assignment asks the nvptx backend, and
//! [`buffer_assignment`], the static assignment of a module's buffers under them (XLA's GPU
//! backend: a memory-aware schedule, then every temporary at an offset in one allocation).
//!
//! - Every fusion is one kernel (or several consecutive kernels on the same outputs), as
//!   [`crate::plan_kernels`] plans it: no fusion runs as steps.
//! - Scratch: the kernels' own ([`KernelInfo::scratch`]: a sort's or a scatter's working
//!   buffers), temporaries live at their instruction only, in the order the kernels take them.
//! - In place, conservatively: only a kernel that is the instruction's one kernel, one output
//!   element per thread (or a vector of them), each read at the index it writes before it is
//!   written ([`KernelKind::Loop`], [`KernelKind::VectorLoop`]), with one output leaf and no
//!   scratch, may write over an operand the analysis allows (which it allows only where the
//!   operand reaches the output through element-wise ops of the output's dimensions). Every
//!   other kernel (reductions, transposes through shared memory, dots, sorts, scatters run as
//!   a copy then an update, several kernels on one output) writes buffers of its own.
//! - Parameters are read-only: the executor's arguments are the caller's, donated or not.
//!
//! Invariants: the rules are those of one module's kernel plan; an instruction with no
//! kernel has no scratch and works in place nowhere. The assignment treats `reshape`, `copy`
//! and row-major `bitcast` as views of their operand's buffer (`axle_schedule::views`): an
//! executor running on it launches no kernel for them (the bytes are already in place).

use std::collections::HashMap;

use axle_ir::{InstId, Module};
use axle_schedule::{assign, schedule_module, BufferAssignment, BufferRules, Heuristic, Scratch};

use crate::kernels::{plan_kernels, KernelInfo, KernelKind};
use crate::CodegenError;

/// The nvptx backend's answers for one module's kernels.
#[derive(Clone, Debug, Default)]
pub struct GpuRules {
    /// Per instruction with kernels: its scratch sizes, and whether its one kernel may work
    /// in place.
    insts: HashMap<InstId, (Vec<u64>, bool)>,
}

impl GpuRules {
    /// The rules of `kernels` (the plan of one module, [`crate::plan_kernels`]).
    pub fn new(kernels: &[KernelInfo]) -> GpuRules {
        let mut insts: HashMap<InstId, (Vec<u64>, bool)> = HashMap::new();
        for k in kernels {
            let elementwise = matches!(k.kind, KernelKind::Loop | KernelKind::VectorLoop { .. })
                && k.scratch.is_empty();
            insts
                .entry(k.inst)
                .and_modify(|e| e.1 = false)
                .or_insert((k.scratch.clone(), elementwise));
        }
        GpuRules { insts }
    }
}

impl BufferRules for GpuRules {
    fn scratch(&self, _m: &Module, inst: InstId) -> Vec<Scratch> {
        self.insts
            .get(&inst)
            .map(|(s, _)| s.iter().map(|&b| Scratch::temp(b)).collect())
            .unwrap_or_default()
    }

    fn may_update_in_place(&self, m: &Module, inst: InstId, _operand: usize, leaf: usize) -> bool {
        let one_leaf = axle_codegen_llvm::elemental::inst_leaves(m, inst)
            .map(|l| l.len() == 1)
            .unwrap_or(false);
        leaf == 0 && one_leaf && self.insts.get(&inst).is_some_and(|e| e.1)
    }

    fn writes_donated_params(&self) -> bool {
        false
    }
}

/// The module the nvptx executor runs for `m` (scheduled: its own schedule where it has one,
/// else the memory scheduler's) and its static buffer assignment under [`GpuRules`]: the
/// temporary bytes one allocation per run would need ([`BufferAssignment::temp_bytes`]).
pub fn buffer_assignment(m: &Module) -> Result<(Module, BufferAssignment, GpuRules), CodegenError> {
    let mut m = m.clone();
    if m.schedule().is_none() {
        schedule_module(&mut m, Heuristic::Best).map_err(|e| {
            CodegenError::general(&m.name, format!("scheduling failed: {}", e.message))
        })?;
    }
    let rules = GpuRules::new(&plan_kernels(&m)?);
    let a = assign(&m, &rules).map_err(|e| {
        CodegenError::general(&m.name, format!("buffer assignment failed: {}", e.message))
    })?;
    Ok((m, a, rules))
}
