//! [`CpuRules`]: what the `schedule` crate's buffer assignment asks the cpu backend.
//!
//! - A fusion whose computation can be one kernel (the fusion kernel kinds of `lower.rs`) is
//!   one kernel; any other runs instruction by instruction in its computation's scheduled order,
//!   like a `call`.
//! - Scratch: sorts and top-k merge through a buffer of their own, GEMMs pack their operands
//!   into one.
//! - In place: `dynamic-update-slice` and `scatter` kernels update their operand when they are
//!   given its buffer; element-wise loop kernels (an unfused element-wise op, or a fusion that
//!   is one loop kernel) read each operand element before writing the same output element, so
//!   an operand the analysis lets them overwrite is safe. No other kernel works in place.
//! - Parameters are read-only (the runtime takes them as `&[u8]`), donated or not.

use axle_ir::{AttrKey, InstId, Module, Opcode};
use axle_schedule::{BufferRules, FusionRun};

use crate::gemm::GemmTarget;
use crate::lower::{fusion_kernel_kind, root_kind, KernelKind};
use crate::CpuOptions;

/// The cpu backend's answers, for one compilation target.
#[derive(Clone, Debug)]
pub struct CpuRules {
    /// What GEMM scratch sizes depend on.
    pub(crate) gemm: GemmTarget,
}

impl CpuRules {
    /// The rules for compiling with `opts` (its target's features and thread count decide the
    /// GEMM's scratch).
    pub fn new(opts: &CpuOptions) -> CpuRules {
        CpuRules {
            gemm: crate::jit::gemm_target(opts),
        }
    }

    /// The kernel `inst` lowers to and the instruction it is rooted at, if it is one kernel.
    fn kernel(&self, m: &Module, inst: InstId) -> Option<(KernelKind, InstId)> {
        if m.opcode(inst) == Opcode::Fusion {
            let c = m.comp_attr(inst, &AttrKey::Calls)?;
            return fusion_kernel_kind(m, c).map(|k| (k, m.root(c)));
        }
        if crate::host::plan(m, inst).is_some() {
            return None;
        }
        root_kind(m, inst).map(|k| (k, inst))
    }
}

impl BufferRules for CpuRules {
    fn fusion_run(&self, m: &Module, fusion: InstId) -> FusionRun {
        let Some(c) = m.comp_attr(fusion, &AttrKey::Calls) else {
            return FusionRun::Kernel;
        };
        if fusion_kernel_kind(m, c).is_some() {
            return FusionRun::Kernel;
        }
        // Like a call: every instruction, in the computation's scheduled order.
        let steps = match m.schedule().and_then(|s| s.sequence(c)) {
            Some(seq) => seq.to_vec(),
            None => m.comp_insts(c),
        };
        FusionRun::Steps(
            steps
                .into_iter()
                .filter(|&i| m.opcode(i) != Opcode::Parameter)
                .collect(),
        )
    }

    fn scratch(&self, m: &Module, inst: InstId) -> Vec<u64> {
        let bytes = match self.kernel(m, inst) {
            Some((KernelKind::Sort | KernelKind::TopK, root)) => {
                crate::kernels::sort_scratch_bytes(m, root).unwrap_or(0)
            }
            Some((KernelKind::Gemm, root)) => {
                crate::gemm::gemm_geo(m, root, &self.gemm).map_or(0, |g| g.scratch_bytes())
            }
            _ => return Vec::new(),
        };
        vec![bytes.max(0) as u64]
    }

    fn may_update_in_place(&self, m: &Module, inst: InstId, _operand: usize, _leaf: usize) -> bool {
        matches!(
            self.kernel(m, inst),
            Some((KernelKind::Dus | KernelKind::Scatter | KernelKind::Loop, _))
        )
    }

    fn writes_donated_params(&self) -> bool {
        false
    }
}
