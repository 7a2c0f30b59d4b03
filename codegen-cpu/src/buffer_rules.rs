//! [`CpuRules`]: what the `schedule` crate's buffer assignment asks the cpu backend.
//!
//! - A fusion runs as `fused.rs` plans it: a plan of one kernel stage, the root, is one kernel
//!   (it writes the fusion's buffers); any other plan runs its stages as steps in order, each
//!   writing buffers of its own and reading the parameters and earlier stages it reaches
//!   (the root's stage last, in the fusion's buffers; no steps when the root is a parameter).
//! - Scratch, in the order the kernels take it: sorts and top-k merge through a buffer of their
//!   own, GEMMs pack their operands into one, and a dot or convolution with an epilogue that
//!   does not write its result into an output leaf first writes it into one of its shape.
//!   The sort and GEMM working memory lives in the runtime's scratch arena
//!   ([`axle_schedule::ScratchPlace::Arena`]), beside the temporary block and not in it: that is the
//!   like-for-like accounting with XLA, whose `temp_size_in_bytes` does not count the packing
//!   buffers Eigen's GEMM nor the buffer `std::sort` allocate at run time. The arena is the
//!   tail of the block a run allocates, so the memory ceiling still covers it; an epilogue's
//!   core result is an array XLA would count, and stays a temporary.
//! - In place: `dynamic-update-slice` and `scatter` kernels update their operand when they are
//!   given its buffer; element-wise loop kernels (an unfused element-wise op, or a fusion that
//!   is one loop kernel) read each operand element before writing the same output element, so
//!   an operand the analysis lets them overwrite is safe. So do row kernels: the analysis lets
//!   a fusion write over an operand only where that operand reaches the root through
//!   element-wise ops of the root's dimensions, which a row kernel reads in the pass that writes
//!   the row's outputs, each element before the same output element (its reduction passes read
//!   other values, and rows are disjoint). A row kernel also writes over an operand that
//!   reaches its root through the reductions of its passes (a softmax over its scores), since
//!   every pass over a row ends before the row's outputs are written
//!   (`may_update_through_rows`). No other kernel works in place (an epilogue's GEMM
//!   writes its output before the epilogue reads the operands).
//! - Arena intermediates: the partial results of a reduction split across threads
//!   (`reduction-split`: a reduction over the last dimension, at most
//!   [`axle_fusion::reduction_split::MAX_CHUNKS`] long and [`PARTIALS_BYTES`] in all, of
//!   another reduction's results) live in the scratch arena from the kernel that writes them
//!   to the one that combines them: they are the working memory of one parallel reduction,
//!   which XLA runs as one loop keeping its partial sums in registers (or Eigen's parallel
//!   reductions in their own buffers), not an array of the program.
//! - Parameters are read-only, except those donated through `input_output_alias` when the
//!   program is run by [`crate::CpuExecutable`] (`donated_writable`): its run hands the code a
//!   writable copy of each donated parameter (in the output buffer the parameter is aliased to
//!   when the assignment puts that output there, so a caller that owns the input can pass the
//!   input's own memory as that output and nothing is copied). Ahead-of-time code keeps every
//!   parameter read-only (its C entry point takes them `const`).
//!
//! Fusion plans are made once per fused computation and kept for the rules' lifetime (one
//! compilation): the assignment asks about a fusion and its steps many times.

use std::collections::HashSet;
use std::sync::Arc;

use axle_ir::{AttrKey, CompId, InstId, Module, Opcode};
use axle_schedule::{BufferRules, FusionRun, Scratch};

use crate::fused::{FusionPlan, KernelPlan, StageHow};
use crate::gemm::GemmTarget;
use crate::kernel_kind::{root_kind, KernelKind};
use crate::plan_cache::PlanCache;
use crate::CpuOptions;

/// The cpu backend's answers, for one compilation target.
#[derive(Debug)]
pub struct CpuRules {
    /// What GEMM scratch sizes depend on.
    pub(crate) gemm: GemmTarget,
    /// The plan of each fused computation asked about (`None`: it cannot be planned, and
    /// lowering reports why).
    pub(crate) plans: PlanCache,
    /// Whether donated parameters may be written (see the header).
    pub(crate) donated_writable: bool,
}

impl CpuRules {
    /// The rules for compiling with `opts` (its target's features and thread count decide the
    /// GEMM's scratch).
    pub fn new(opts: &CpuOptions) -> CpuRules {
        CpuRules {
            gemm: crate::target_spec::gemm_target(opts),
            plans: PlanCache::default(),
            donated_writable: true,
        }
    }

    /// The plan of fused computation `c`.
    fn plan(&self, m: &Module, c: CompId) -> Option<Arc<FusionPlan>> {
        self.plans.plan(m, c)
    }

    /// The kernel of fused computation `c` when its plan is one kernel: its only stage is the
    /// root, as a kernel.
    fn one_kernel(&self, m: &Module, c: CompId) -> Option<(KernelKind, KernelPlan, InstId)> {
        let plan = self.plan(m, c)?;
        match &plan.stages[..] {
            [st] if st.inst == m.root(c) => match &st.how {
                StageHow::Kernel(k, p) => Some((*k, p.clone(), st.inst)),
                StageHow::Unfused => None,
            },
            _ => None,
        }
    }

    /// The kernel `inst` (an instruction, a fusion or a fusion's stage) runs as, with its
    /// plan and the instruction it is rooted at.
    fn kernel(&self, m: &Module, inst: InstId) -> Option<(KernelKind, KernelPlan, InstId)> {
        if m.opcode(inst) == Opcode::Fusion {
            let c = m.comp_attr(inst, &AttrKey::Calls)?;
            return self.one_kernel(m, c);
        }
        // A stage of a fusion planned in steps: the plan says how.
        let parent = m.parent(inst);
        if let Some(plan) = self.fused_plan(parent) {
            return plan
                .stages
                .iter()
                .find(|st| st.inst == inst)
                .and_then(|st| match &st.how {
                    StageHow::Kernel(k, p) => Some((*k, p.clone(), inst)),
                    StageHow::Unfused => unfused_kernel(m, inst),
                });
        }
        unfused_kernel(m, inst)
    }

    /// The plan of `c` when it is a fused computation planned already: the assignment asks
    /// how a fusion runs before it asks about its steps.
    fn fused_plan(&self, c: CompId) -> Option<Arc<FusionPlan>> {
        self.plans.planned(c)
    }
}

/// The kernel an unfused instruction lowers to, if it is one kernel.
fn unfused_kernel(m: &Module, inst: InstId) -> Option<(KernelKind, KernelPlan, InstId)> {
    if crate::host::plan(m, inst).is_some() {
        return None;
    }
    root_kind(m, inst).map(|k| (k, KernelPlan::Plain, inst))
}

impl BufferRules for CpuRules {
    fn fusion_run(&self, m: &Module, fusion: InstId) -> FusionRun {
        let Some(c) = m.comp_attr(fusion, &AttrKey::Calls) else {
            return FusionRun::Kernel;
        };
        if self.one_kernel(m, c).is_some() {
            return FusionRun::Kernel;
        }
        match self.plan(m, c) {
            Some(plan) => FusionRun::Steps(plan.stages.iter().map(|st| st.inst).collect()),
            // Lowering fails on this fusion with the planner's reason.
            None => FusionRun::Kernel,
        }
    }

    fn scratch(&self, m: &Module, inst: InstId) -> Vec<Scratch> {
        let Some((kind, plan, root)) = self.kernel(m, inst) else {
            return Vec::new();
        };
        let core = plan.core(root);
        let (arena, core_temp) = plan.scratch_needs(m, kind, root);
        let mut sizes = Vec::new();
        if arena {
            let bytes = match kind {
                KernelKind::Sort | KernelKind::TopK => {
                    crate::kernels::sort_scratch_bytes(m, root).unwrap_or(0)
                }
                // None for a dot on the precompiled GEMM.
                KernelKind::Gemm => crate::gemm::gemm_geo(m, core, &self.gemm)
                    .map_or(0, |g| g.for_library(&self.gemm).scratch_bytes()),
                _ => crate::conv_fast::conv_fast(m, core)
                    .map_or(0, |g| g.for_target(&self.gemm).scratch_bytes()),
            };
            sizes.push(Scratch::arena(bytes.max(0) as u64));
        }
        if core_temp {
            let bytes = m.array_shape(core).map_or(0, |s| {
                s.num_elements().max(0) as u64 * s.ty.byte_size() as u64
            });
            sizes.push(Scratch::temp(bytes));
        }
        sizes
    }

    fn may_update_in_place(&self, m: &Module, inst: InstId, _operand: usize, _leaf: usize) -> bool {
        matches!(
            self.kernel(m, inst),
            Some((KernelKind::Dus | KernelKind::Scatter, ..))
                | Some((KernelKind::Loop, KernelPlan::Plain, _))
                | Some((KernelKind::Row, KernelPlan::Row(_), _))
        )
    }

    fn may_update_through_rows(&self, m: &Module, inst: InstId, operand: usize) -> bool {
        let Some((KernelKind::Row, KernelPlan::Row(plan), _)) = self.kernel(m, inst) else {
            return false;
        };
        let q = if m.opcode(inst) == Opcode::Fusion {
            let Some(c) = m.comp_attr(inst, &AttrKey::Calls) else {
                return false;
            };
            m.params(c).get(operand).copied()
        } else {
            // A step of a fusion run in steps: its reads as the assignment numbers them (the
            // parameters and earlier steps it reaches).
            let c = m.parent(inst);
            let Some(plan) = self.fused_plan(c) else {
                return false;
            };
            let mut done: hashbrown::HashSet<InstId> = m.params(c).iter().copied().collect();
            done.extend(
                plan.stages
                    .iter()
                    .map(|st| st.inst)
                    .take_while(|&st| st != inst),
            );
            axle_schedule::program::reached(m, inst, &done)
                .get(operand)
                .copied()
        };
        let Some(q) = q else {
            return false;
        };
        let c = m.parent(q);
        // Every reduction that reads the operand (through anything) is one of the row passes,
        // which run over a row before its outputs are written.
        let passes: HashSet<InstId> = plan.passes.iter().flatten().copied().collect();
        let insts = feeding_root(m, c);
        let mut stack = vec![q];
        let mut seen: HashSet<InstId> = HashSet::new();
        while let Some(x) = stack.pop() {
            if !seen.insert(x) || x == inst {
                continue;
            }
            for &u in &insts {
                if !m.operands(u).contains(&x) {
                    continue;
                }
                if m.opcode(u) == Opcode::Reduce {
                    if !passes.contains(&u) {
                        return false;
                    }
                } else {
                    stack.push(u);
                }
            }
        }
        true
    }

    fn arena_operands(&self, m: &Module, inst: InstId) -> Vec<usize> {
        if combines_partials(m, inst) {
            vec![0]
        } else {
            Vec::new()
        }
    }

    fn writes_donated_params(&self) -> bool {
        self.donated_writable
    }
}

/// The instructions of computation `c` that its root reaches through operands: every reader that
/// can matter to what the computation computes, found in time linear in the computation rather
/// than in the module (`Module::comp_insts` scans every instruction of the module, which made
/// asking this of every row kernel quadratic in large graphs).
fn feeding_root(m: &Module, c: CompId) -> Vec<InstId> {
    let mut seen: HashSet<InstId> = HashSet::new();
    let mut stack = vec![m.root(c)];
    stack.extend(m.params(c).iter().copied());
    let mut out = Vec::new();
    while let Some(x) = stack.pop() {
        if m.parent(x) != c || !seen.insert(x) {
            continue;
        }
        out.push(x);
        stack.extend(m.operands(x).iter().copied());
    }
    out
}

/// The most bytes of partial results a split reduction keeps in the arena (8 results of 64
/// chunks of 8 bytes).
pub const PARTIALS_BYTES: i64 = 4096;

/// Whether `inst` combines the partial results of a split reduction: a single-input `reduce`
/// over the last dimension (at most [`axle_fusion::reduction_split::MAX_CHUNKS`] long) of an
/// operand that a reduction computes (a `reduce`, or a fusion rooted at one), of at most
/// [`PARTIALS_BYTES`].
fn combines_partials(m: &Module, inst: InstId) -> bool {
    let ops = m.operands(inst);
    if m.opcode(inst) != Opcode::Reduce || ops.len() != 2 {
        return false;
    }
    let o = ops[0];
    let Some(a) = m.array_shape(o) else {
        return false;
    };
    let Some(&last) = a.dims.last() else {
        return false;
    };
    let bytes = a.num_elements().max(0) * a.ty.byte_size() as i64;
    let over_last = m.ints_attr(inst, &AttrKey::Dimensions) == Some(&[a.rank() as i64 - 1][..]);
    let producer = match m.opcode(o) {
        Opcode::Fusion => m.comp_attr(o, &AttrKey::Calls).map(|c| m.root(c)),
        Opcode::Reduce => Some(o),
        _ => None,
    };
    over_last
        && last <= axle_fusion::reduction_split::MAX_CHUNKS
        && bytes <= PARTIALS_BYTES
        && producer.is_some_and(|r| m.opcode(r) == Opcode::Reduce)
}
