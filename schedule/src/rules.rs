//! [`BufferRules`]: what a backend decides about buffers that the IR does not say.
//!
//! Scheduling and buffer assignment are target-independent; the few facts that differ between
//! backends are asked through this trait: whether a `fusion` runs as one kernel, how much
//! scratch memory a kernel needs while it runs, whether a kernel may write an output over an
//! operand that the analysis found could share its buffer, and whether donated parameters may
//! be written. [`HloRules`] answers as XLA's model does (every fusion is a kernel, no scratch,
//! every in-place update the analysis allows, donated parameters writable).

use axle_ir::{InstId, Module};

/// Backend facts for buffer assignment. Every method has XLA's answer as its default.
pub trait BufferRules: Sync {
    /// Whether `fusion` runs as one kernel that writes its outputs. A backend that runs some
    /// fusions instruction by instruction answers `false` for them; their computations are then
    /// scheduled and given buffers like a `call`'s.
    fn fusion_is_kernel(&self, m: &Module, fusion: InstId) -> bool {
        let _ = (m, fusion);
        true
    }

    /// Bytes of scratch memory the kernel of `inst` needs while it runs (0: none). Scratch is
    /// a temporary live only at `inst`.
    fn scratch_bytes(&self, m: &Module, inst: InstId) -> u64 {
        let _ = (m, inst);
        0
    }

    /// Whether the kernel of `inst` may write output leaf `leaf` over operand `operand`, where
    /// the analysis found that legal (an element-wise kernel reading the operand only at the
    /// index it writes, or a `dynamic-update-slice`/`scatter` updating its operand). A backend
    /// whose kernel for `inst` cannot work in place says `false`.
    fn may_update_in_place(&self, m: &Module, inst: InstId, operand: usize, leaf: usize) -> bool {
        let _ = (m, inst, operand, leaf);
        true
    }

    /// Whether the entry parameters that `input_output_alias` donates may be written (their
    /// buffers then hold outputs and in-place updates). A runtime that gives kernels read-only
    /// parameters says `false`.
    fn writes_donated_params(&self) -> bool {
        true
    }
}

/// XLA's answers: every fusion a kernel, no scratch, every legal in-place update, donated
/// parameters writable.
#[derive(Clone, Copy, Debug, Default)]
pub struct HloRules;

impl BufferRules for HloRules {}
