//! [`BufferRules`]: what a backend decides about buffers that the IR does not say.
//!
//! Scheduling and buffer assignment are target-independent; the few facts that differ between
//! backends are asked through this trait: how a `fusion` runs (one kernel, or some of its inner
//! instructions as steps with buffers of their own), how much scratch memory a kernel needs
//! while it runs, which intermediate arrays are a library routine's own (kept in the scratch
//! arena), whether a kernel may write an output over an operand that the analysis found could
//! share its buffer, and whether donated parameters may be written. [`HloRules`] answers
//! as XLA's model does (every fusion is a kernel, no scratch, every in-place update the
//! analysis allows, donated parameters writable).

use axle_ir::{InstId, Module};

/// How a backend runs a `fusion`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FusionRun {
    /// One kernel computes the fusion's outputs from its operands.
    Kernel,
    /// These instructions of the fused computation run as steps, in this order, the root last
    /// (no steps when the root is a parameter: the fusion returns an operand):
    /// each writes buffers of its own (or, a view, names a step's), reading the fusion's
    /// parameters and the earlier steps it reaches through instructions that are not steps
    /// (those it computes inline). Listing every instruction runs the fusion like a `call`.
    Steps(Vec<InstId>),
}

/// One scratch buffer of a kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Scratch {
    /// Its size in bytes.
    pub bytes: u64,
    /// Where it lives.
    pub place: ScratchPlace,
}

/// Where a kernel's scratch buffer lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScratchPlace {
    /// A temporary in the temporary block, like any array the program computes (an epilogue's
    /// core result).
    Temp,
    /// The runtime's scratch arena: working memory of a library routine (GEMM operand
    /// packing, a sort's merge or radix planes), which XLA's CPU runtime allocates inside Eigen
    /// and `std::sort` at run time and which its `temp_size_in_bytes` does not count. The
    /// arena is a heap of its own: scratch is live at its kernel only, so kernels' scratch
    /// shares the arena's memory, beside the intermediates of
    /// [`BufferRules::arena_operands`].
    Arena,
}

impl Scratch {
    /// A temporary scratch buffer of `bytes`.
    pub fn temp(bytes: u64) -> Scratch {
        Scratch {
            bytes,
            place: ScratchPlace::Temp,
        }
    }

    /// An arena scratch buffer of `bytes`.
    pub fn arena(bytes: u64) -> Scratch {
        Scratch {
            bytes,
            place: ScratchPlace::Arena,
        }
    }
}

/// Backend facts for buffer assignment. Every method has XLA's answer as its default.
pub trait BufferRules: Sync {
    /// How `fusion` runs (XLA: always one kernel).
    fn fusion_run(&self, m: &Module, fusion: InstId) -> FusionRun {
        let _ = (m, fusion);
        FusionRun::Kernel
    }

    /// The scratch buffers the kernel of `inst` (an instruction or a fusion step) needs while
    /// it runs, in the order the kernel takes them (none by default). Scratch is live at `inst`
    /// only.
    fn scratch(&self, m: &Module, inst: InstId) -> Vec<Scratch> {
        let _ = (m, inst);
        Vec::new()
    }

    /// Whether the kernel of `inst` may write output leaf `leaf` over operand `operand`, where
    /// the analysis found that legal (an element-wise kernel reading the operand only at the
    /// index it writes, or a `dynamic-update-slice`/`scatter` updating its operand). For a
    /// step of a fusion run as steps, `operand` indexes the values the step reads
    /// ([`crate::program::Program::step_reads`]). A backend whose kernel for `inst` cannot work
    /// in place says `false`.
    fn may_update_in_place(&self, m: &Module, inst: InstId, operand: usize, leaf: usize) -> bool {
        let _ = (m, inst, operand, leaf);
        true
    }

    /// The operands of `inst` (an instruction that writes buffers of its own) that are a
    /// library routine's intermediate results rather than arrays of the program: the backend
    /// keeps them in the scratch arena ([`ScratchPlace::Arena`]) from the kernel that writes
    /// them to the last that reads them, where they would otherwise be temporaries (none by
    /// default; a set of buffers shared with any other value stays a temporary).
    fn arena_operands(&self, m: &Module, inst: InstId) -> Vec<usize> {
        let _ = (m, inst);
        Vec::new()
    }

    /// Whether the kernel of fusion `inst` computes its root a row at a time, every reduction
    /// over a row before any of the row's outputs is written, and each output element after
    /// reading operand `operand` at its index: then it may write over that operand where it
    /// reaches the root only through element-wise ops of the root's dimensions and such
    /// reductions over trailing dimensions (a softmax over its scores). XLA's model has no such
    /// kernel (`false` by default). For a step of a fusion run as steps, `operand` indexes the
    /// values the step reads, as for [`BufferRules::may_update_in_place`].
    fn may_update_through_rows(&self, m: &Module, inst: InstId, operand: usize) -> bool {
        let _ = (m, inst, operand);
        false
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
