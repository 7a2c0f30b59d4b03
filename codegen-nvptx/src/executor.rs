//! The launch-plan executor: runs a module's kernels ([`crate::plan_kernels_with`]) on any
//! [`Device`], each on the grid and block of its launch plan, and the module's host control
//! flow ([`crate::control_flow`]) between them, every host computation in the module's
//! memory-aware schedule (`axle_schedule::schedule_module`, the `memory-schedule` pass that
//! ends the `gpu` pipeline; a module compiled without a schedule, or with one the buffer
//! assignment refuses, is flattened and scheduled here, as the cpu backend does), as XLA's GPU
//! backend runs its thunks in its scheduled order.
//!
//! With a buffer per value (the fallback, see Memory below), a host computation (the entry, or one
//! a `while`, `conditional` or `call` runs) runs on argument buffers, one list per parameter. A
//! value is a list of buffers, one per array leaf (depth-first): a parameter's are the argument's,
//! a constant's are uploaded from its literal (once per run, whichever computation holds it), a
//! tuple's are its operands' (an `opt-barrier`'s too) and a `get-tuple-element`'s a part of its
//! operand's (no copies); an instruction with a kernel gets fresh output buffers, which the kernel
//! writes (an instruction computed by several consecutive kernels gets them once, before its first
//! kernel, and its scratch buffers, [`KernelInfo::scratch`], for as long as its kernels run); an
//! instruction whose every leaf is zero-sized (no kernel, no launch) gets empty buffers. A `while`
//! runs its condition on the state, reads the one-byte predicate back and, while it is true, runs
//! its body on the state, whose result is the next state; a `conditional` reads its predicate or
//! index back and runs the branch it selects on that branch's operand; a `call` runs its
//! computation on its operands. Buffers are never written after their kernels ran, so a value may
//! share buffers with others (a state leaf passed through unchanged, or repeated).
//!
//! Memory: a module whose static buffer assignment `assign` accepts runs from it
//! ([`crate::arena`]: one temporary allocation per run, every kernel on offsets inside it, the
//! host control flow's loop and branch copies as device copies between slices, XLA's GPU
//! way), host control flow included. Only a module the assignment refuses (or one needing a
//! runtime arena) runs as described above and below, with a device buffer per value: the
//! fallback, not an error, and never silent: [`Executable::fallback_reason`] and
//! [`Executable::memory_summary`] say why. [`Executable::assignment`] gives the assignment a
//! module runs from.
//!
//! Buffer lifetimes ([`crate::host_liveness`]): after each step, the values whose last reader
//! that step was die, and a buffer the computation's run made (a kernel's output, or a nested
//! computation's result it now owns) is freed as soon as no live value of the run holds it, so
//! a computation holds about the schedule's live set, not every intermediate it made.
//! Arguments, constants and the root's buffers are never freed early.
//!
//! Invariants: a run frees every buffer it made except the result's, also when it fails; a
//! nested computation's run frees, by the time it returns, every buffer it made that its result
//! does not hold, and a loop frees each iteration's buffers that the next state does not hold
//! ([`crate::control_flow::LoopState`]), so memory does not grow with the trip count. No buffer
//! is freed while a live value holds it (a stale key would be an error, not a wrong read). The
//! result's buffers are all made by the run and pairwise distinct (a result leaf that is an
//! argument, or that appears twice, is copied), so the caller owns each exactly once. A
//! constant whose value the text elided is refused when the module is compiled, with an error
//! naming it. Runs are deterministic: kernels run one after another in a fixed order.
//!
//! Collectives ([`crate::collective`]) are host steps on both paths: the operands' leaves are
//! read back, the collective runs on the host as the run's device ([`Executable::run_on_device`];
//! [`Executable::run`] runs a module for one device on a world of that one device), and the
//! result's leaves are written into the instruction's buffers (fresh ones on the per-value path,
//! its assigned slices on the assignment's).

use std::collections::HashMap;

use axle_analysis::eval::Device as RunDevice;
use axle_codegen_llvm::elemental::{inst_leaves, literal_leaves};
use axle_codegen_llvm::error::{at, finish, Fail};
use axle_comm::Communicator;
use axle_ir::collective::DeviceMesh;
use axle_ir::entity::EntitySet;
use axle_ir::{AttrKey, CompId, InstId, Module, Opcode, Shape};
use axle_schedule::{schedule_module, BufferAssignment, Heuristic};

use crate::arena::{arena_assignment, leaf_bytes, ArenaProgram};
use crate::collective::{is_host_step, lone_world, run_step};
use crate::control_flow::{branch_taken, pred_value, LoopState};
use crate::device::{BufferKey, BufferSlice, Device, DeviceMemory};
use crate::host_computations::{control_callees, host_computations};
use crate::host_liveness::{release_points, Holders};
use crate::kernels::{plan_kernels_with, KernelInfo, KernelOptions};
use crate::CodegenError;

/// A module compiled for device `D`: its kernels, their launch plans, and the program the
/// device loaded.
pub struct Executable<D: Device> {
    module: Module,
    kernels: Vec<KernelInfo>,
    /// Per instruction with kernels, their positions in `kernels`.
    by_inst: HashMap<InstId, Vec<usize>>,
    /// The collectives of the host computations, which run as host steps.
    host_steps: EntitySet<InstId>,
    /// Per host computation, its instructions in the order they run (the module's schedule)
    /// and, per step, the values that die after it ([`release_points`]); what the per-value
    /// path runs, so empty when the module runs from its assignment.
    orders: HashMap<CompId, (Vec<InstId>, Vec<Vec<InstId>>)>,
    program: D::Program,
    /// The static assignment the module runs from ([`crate::arena`]), or why it runs with a
    /// buffer per value.
    arena: Result<BufferAssignment, String>,
}

/// One run of an [`Executable`]: its memory and the constants it uploaded.
struct Run<'a, D: Device> {
    exe: &'a Executable<D>,
    mem: &'a DeviceMemory<D>,
    /// The device the run runs as, for its collectives.
    dev: Option<RunDevice<'a>>,
    /// The buffers of each constant uploaded so far, shared by every computation run.
    constants: HashMap<InstId, Vec<BufferKey>>,
    /// Every buffer in `constants`, which the run owns until it ends.
    constant_keys: Vec<BufferKey>,
}

/// Flattens `m`'s call graph and schedules it with the memory scheduler (best of its
/// heuristics).
fn schedule(m: &mut Module) -> Result<(), CodegenError> {
    schedule_module(m, Heuristic::Best)
        .map(|_| ())
        .map_err(|e| CodegenError::general(&m.name, format!("scheduling failed: {}", e.message)))
}

/// The array leaves of a shape, counted.
fn leaf_count(m: &Module, s: &Shape) -> usize {
    match s {
        Shape::Array(_) => 1,
        Shape::Tuple(es) => es.iter().map(|&e| leaf_count(m, m.shape_of(e))).sum(),
        Shape::Token | Shape::Opaque => 0,
    }
}

impl<D: Device> Executable<D> {
    /// Plans the kernels of `m` (verified, after its pipeline) and loads them on the device of
    /// `mem`; an error names the first instruction the backend does not support.
    pub fn compile(mem: &DeviceMemory<D>, m: Module) -> Result<Self, CodegenError> {
        Self::compile_with(mem, m, &KernelOptions::default())
    }

    /// [`Executable::compile`] with the kernels planned with `opts`.
    pub fn compile_with(
        mem: &DeviceMemory<D>,
        mut m: Module,
        opts: &KernelOptions,
    ) -> Result<Self, CodegenError> {
        axle_ir::check_runnable(&m).map_err(|e| CodegenError::general(&m.name, e.to_string()))?;
        // A module that arrives scheduled (the `gpu` pipeline ends in `memory-schedule`) keeps
        // its order; any other is scheduled here (flattened first), as the cpu backend does.
        let arrived_scheduled = m.schedule().is_some();
        if !arrived_scheduled {
            schedule(&mut m)?;
        }
        let mut kernels = plan_kernels_with(&m, opts)?;
        let mut arena = arena_assignment(&m, &kernels);
        if arena.is_err() && arrived_scheduled {
            // A schedule the assignment cannot use (a computation called from two sites, not
            // yet flattened) is replaced by the memory scheduler's after flattening, as the
            // cpu backend does; the kernels are planned again for the flattened module.
            schedule(&mut m)?;
            kernels = plan_kernels_with(&m, opts)?;
            arena = arena_assignment(&m, &kernels);
        }
        let mut by_inst: HashMap<InstId, Vec<usize>> = HashMap::new();
        for (k, info) in kernels.iter().enumerate() {
            by_inst.entry(info.inst).or_default().push(k);
        }
        let mut orders = HashMap::new();
        let mut host_steps = EntitySet::new();
        for (c, order) in host_computations(&m) {
            for &id in order.iter().filter(|&&id| is_host_step(&m, id)) {
                host_steps.insert(id);
            }
            for &id in &order {
                if m.opcode(id) == Opcode::Constant && m.literal(id).is_none() {
                    let f = Fail::Msg("the constant's value was elided from the text".into());
                    return Err(finish(&m, at(&m, id, f)));
                }
            }
            // Only the per-value path frees buffers after their last reader; a run from the
            // assignment has its memory placed already.
            if arena.is_err() {
                let dies = release_points(&m, m.root(c), &order, &kernels, &by_inst);
                orders.insert(c, (order, dies));
            }
        }
        let program = mem.device().load(&m, &kernels)?;
        Ok(Executable {
            module: m,
            kernels,
            by_inst,
            host_steps,
            orders,
            program,
            arena: arena.map_err(|e| e.to_string()),
        })
    }

    /// The module as compiled.
    pub fn module(&self) -> &Module {
        &self.module
    }

    /// The kernels, in launch order.
    pub fn kernels(&self) -> &[KernelInfo] {
        &self.kernels
    }

    /// The static buffer assignment the module runs from (one temporary allocation of its
    /// `temp_bytes` per run), or `None` where it runs with a buffer per value.
    pub fn assignment(&self) -> Option<&BufferAssignment> {
        self.arena.as_ref().ok()
    }

    /// Why the module runs with a buffer per value instead of from its static assignment
    /// (`assign` refused it, or it needs a runtime arena); `None` where it runs from the
    /// assignment.
    pub fn fallback_reason(&self) -> Option<&str> {
        self.arena.as_ref().err().map(String::as_str)
    }

    /// One line saying how a run gets its device memory: the assignment's one temporary
    /// allocation and its size, or a buffer per value and why.
    pub fn memory_summary(&self) -> String {
        match &self.arena {
            Ok(a) => format!(
                "memory: one temporary allocation of {} bytes per run (static buffer assignment)",
                a.temp_bytes
            ),
            Err(why) => format!("memory: a device buffer per value ({why})"),
        }
    }

    /// Whether the module has collectives (host steps, [`crate::collective`]).
    pub fn has_collectives(&self) -> bool {
        !self.host_steps.is_empty()
    }

    /// Runs the module on `args` (per entry parameter, in order, the buffers of its array
    /// leaves) and returns the buffers of the result's array leaves, which the caller owns.
    /// A module with collectives written for one device runs them on a world of that one
    /// device; in a module for more devices they need [`Executable::run_on_device`].
    pub fn run(
        &self,
        mem: &DeviceMemory<D>,
        args: &[Vec<BufferKey>],
    ) -> Result<Vec<BufferKey>, crate::NvptxError> {
        let world = if self.has_collectives() {
            lone_world(&self.module)
        } else {
            None
        };
        let Some(world) = world else {
            return self.run_on_device(mem, args, None);
        };
        let endpoints = world.devices();
        let ep = &endpoints[0];
        let dev = RunDevice {
            comm: ep,
            mesh: DeviceMesh {
                replicas: 1,
                partitions: 1,
            },
        };
        let r = self.run_on_device(mem, args, Some(dev));
        match &r {
            Ok(_) => ep.finish(),
            Err(e) => ep.abort(&e.to_string()),
        }
        r
    }

    /// [`Executable::run`] as device `dev` of a multi-device run (`None`: no device, where
    /// only collectives that meet no other device run): collectives meet the other devices
    /// through `dev.comm`. The caller ends the device's part of the run
    /// ([`Communicator::finish`] or [`Communicator::abort`]).
    pub fn run_on_device(
        &self,
        mem: &DeviceMemory<D>,
        args: &[Vec<BufferKey>],
        dev: Option<RunDevice<'_>>,
    ) -> Result<Vec<BufferKey>, crate::NvptxError> {
        if let Ok(a) = &self.arena {
            let arena = ArenaProgram::<D> {
                module: &self.module,
                assignment: a,
                kernels: &self.kernels,
                by_inst: &self.by_inst,
                host_steps: &self.host_steps,
                program: &self.program,
            };
            return arena.run(mem, args, dev);
        }
        let mut run = Run {
            exe: self,
            mem,
            dev,
            constants: HashMap::new(),
            constant_keys: Vec::new(),
        };
        let mut made = Vec::new();
        let result = run.computation(self.module.entry(), args, &mut made);
        made.extend_from_slice(&run.constant_keys);
        let result = result.and_then(|leaves| run.own_result(leaves, &mut made));
        let keep: Vec<BufferKey> = result.as_ref().cloned().unwrap_or_default();
        for k in made {
            if !keep.contains(&k) {
                // Every buffer in `made` is live and freed once.
                let _ = mem.free(k);
            }
        }
        result.map_err(crate::NvptxError::Run)
    }
}

impl<D: Device> Run<'_, D> {
    /// The result's buffers from the root's `leaves`, each owned once: arguments, constants
    /// and repeats are copied (`made` holds every buffer the run made).
    fn own_result(
        &self,
        leaves: Vec<BufferKey>,
        made: &mut Vec<BufferKey>,
    ) -> Result<Vec<BufferKey>, String> {
        let mem = self.mem;
        let mut out: Vec<BufferKey> = Vec::with_capacity(leaves.len());
        for key in leaves {
            if made.contains(&key) && !out.contains(&key) {
                out.push(key);
            } else {
                let copy = mem
                    .upload(&mem.download(key).map_err(|e| e.to_string())?)
                    .map_err(|e| e.to_string())?;
                made.push(copy);
                out.push(copy);
            }
        }
        Ok(out)
    }

    /// Runs host computation `c` on `args` as a step of its caller: gives its root's buffers
    /// and those of them it made (each once, now the caller's); every other buffer it made is
    /// freed, also when it fails.
    fn nested(
        &mut self,
        c: CompId,
        args: &[Vec<BufferKey>],
    ) -> Result<(Vec<BufferKey>, Vec<BufferKey>), String> {
        let mut made = Vec::new();
        let result = self.computation(c, args, &mut made);
        let mut owned = Vec::new();
        for k in made {
            match &result {
                Ok(leaves) if leaves.contains(&k) && !owned.contains(&k) => owned.push(k),
                // Made by this computation's run and freed once, here.
                _ => {
                    let _ = self.mem.free(k);
                }
            }
        }
        Ok((result?, owned))
    }

    /// Runs host computation `c` on `args` (per parameter, its buffers) and gives its root's
    /// buffers; every buffer it makes is added to `made`.
    fn computation(
        &mut self,
        c: CompId,
        args: &[Vec<BufferKey>],
        made: &mut Vec<BufferKey>,
    ) -> Result<Vec<BufferKey>, String> {
        let exe = self.exe;
        let m = &exe.module;
        let mem = self.mem;
        let (order, dies) = exe.orders.get(&c).ok_or_else(|| {
            format!(
                "computation {} is not run by the host: no kernels were planned for it",
                m.comp_name(c)
            )
        })?;
        let mut values: HashMap<InstId, Vec<BufferKey>> = HashMap::new();
        let mut holders = Holders::default();
        let err =
            |id: InstId, msg: String| format!("%{} ({}): {msg}", m.name(id), m.opcode(id).name());
        for (&id, dead) in order.iter().zip(dies) {
            let operand = |k: usize| -> Result<&Vec<BufferKey>, String> {
                let o = m
                    .operands(id)
                    .get(k)
                    .ok_or_else(|| err(id, "missing operand".into()))?;
                values
                    .get(o)
                    .ok_or_else(|| err(id, format!("operand %{} has no value", m.name(*o))))
            };
            let bufs = if exe.host_steps.contains(id) {
                self.host_step(id, &values, made).map_err(|e| err(id, e))?
            } else if let Some(ks) = exe.by_inst.get(&id) {
                let mut outs = Vec::new();
                for leaf in inst_leaves(m, id).map_err(|e| err(id, finish(m, e).message))? {
                    let key = mem
                        .alloc(leaf_bytes(&leaf))
                        .map_err(|e| err(id, e.to_string()))?;
                    made.push(key);
                    outs.push(key);
                }
                let mut scratch = Vec::new();
                for &bytes in &exe.kernels[ks[0]].scratch {
                    let key = mem
                        .alloc(bytes as usize)
                        .map_err(|e| err(id, e.to_string()))?;
                    scratch.push(key);
                }
                let launched = ks.iter().try_for_each(|&k| {
                    let info = &exe.kernels[k];
                    if info.scratch != exe.kernels[ks[0]].scratch {
                        return Err(err(id, "its kernels disagree on scratch buffers".into()));
                    }
                    let mut call = outs.clone();
                    call.extend_from_slice(&scratch);
                    for o in &info.operands {
                        let v = values.get(o).ok_or_else(|| {
                            err(id, format!("operand %{} has no value", m.name(*o)))
                        })?;
                        call.extend_from_slice(v);
                    }
                    let call = call
                        .into_iter()
                        .map(|k| {
                            Ok(BufferSlice::whole(
                                k,
                                mem.size(k).map_err(|e| e.to_string())?,
                            ))
                        })
                        .collect::<Result<Vec<_>, String>>()
                        .map_err(|e| err(id, e))?;
                    mem.launch(&exe.program, info, k, &call)
                        .map_err(|e| err(id, format!("kernel {}: {e}", info.name)))
                });
                for key in scratch {
                    // Made by this run and freed once, here.
                    let _ = mem.free(key);
                }
                launched?;
                outs
            } else {
                match m.opcode(id) {
                    Opcode::Parameter => {
                        let n = m
                            .parameter_number(id)
                            .ok_or_else(|| err(id, "no parameter number".into()))?;
                        args.get(n as usize)
                            .cloned()
                            .ok_or_else(|| err(id, format!("no argument {n}")))?
                    }
                    Opcode::Constant => {
                        if let Some(keys) = self.constants.get(&id) {
                            keys.clone()
                        } else {
                            let lit = m.literal(id).ok_or_else(|| {
                                err(id, "the constant's value was elided from the text".into())
                            })?;
                            let mut leaves = Vec::new();
                            literal_leaves(lit, &mut leaves);
                            let mut out = Vec::with_capacity(leaves.len());
                            for leaf in leaves {
                                let key =
                                    mem.upload(&leaf.data).map_err(|e| err(id, e.to_string()))?;
                                self.constant_keys.push(key);
                                out.push(key);
                            }
                            self.constants.insert(id, out.clone());
                            out
                        }
                    }
                    // An optimization barrier is its operands, as one value or a tuple.
                    Opcode::Tuple | Opcode::OptBarrier => {
                        let mut out = Vec::new();
                        for k in 0..m.operands(id).len() {
                            out.extend_from_slice(operand(k)?);
                        }
                        out
                    }
                    Opcode::GetTupleElement => {
                        let k = m
                            .int_attr(id, &AttrKey::Index)
                            .ok_or_else(|| err(id, "missing index".into()))?
                            as usize;
                        let o = m.operands(id)[0];
                        let Shape::Tuple(es) = m.shape(o) else {
                            return Err(err(id, "get-tuple-element of a non-tuple".into()));
                        };
                        let start: usize = es
                            .iter()
                            .take(k)
                            .map(|&e| leaf_count(m, m.shape_of(e)))
                            .sum();
                        let len = es
                            .get(k)
                            .map(|&e| leaf_count(m, m.shape_of(e)))
                            .ok_or_else(|| err(id, format!("no tuple element {k}")))?;
                        operand(0)?
                            .get(start..start + len)
                            .ok_or_else(|| err(id, "operand has too few buffers".into()))?
                            .to_vec()
                    }
                    Opcode::AfterAll => Vec::new(),
                    Opcode::While | Opcode::Conditional | Opcode::Call => {
                        let callees = control_callees(m, id);
                        let mut operands = Vec::with_capacity(m.operands(id).len());
                        for k in 0..m.operands(id).len() {
                            operands.push(operand(k)?.clone());
                        }
                        let (out, owned) = self
                            .control(id, &callees, operands)
                            .map_err(|e| err(id, e))?;
                        made.extend(owned);
                        out
                    }
                    _ => {
                        // No kernel: only a value with nothing to compute.
                        let leaves =
                            inst_leaves(m, id).map_err(|e| err(id, finish(m, e).message))?;
                        if leaves.iter().any(|l| l.num_elements() != 0) {
                            return Err(err(id, "no kernel computes this instruction".into()));
                        }
                        let mut out = Vec::with_capacity(leaves.len());
                        for _ in leaves {
                            let key = mem.alloc(0).map_err(|e| err(id, e.to_string()))?;
                            made.push(key);
                            out.push(key);
                        }
                        out
                    }
                }
            };
            holders.hold(&bufs);
            values.insert(id, bufs);
            // Values whose last reader this step was: a buffer this run made that no live
            // value holds any more is freed now (arguments and constants are the caller's
            // and the run's, never freed here; the root never dies).
            for v in dead {
                let Some(keys) = values.remove(v) else {
                    continue;
                };
                for key in holders.release(&keys) {
                    if let Some(k) = made.iter().position(|&x| x == key) {
                        made.swap_remove(k);
                        // Made by this computation's run, held by no live value: freed once.
                        mem.free(key).map_err(|e| err(id, e.to_string()))?;
                    }
                }
            }
        }
        let root = m.root(c);
        values
            .remove(&root)
            .ok_or_else(|| err(root, "the root has no value".into()))
    }

    /// Runs collective `id` on the host ([`crate::collective`]) on its operands' buffers in
    /// `values`: gives its result's buffers, each made here and added to `made`. A function of
    /// its own, so the frame of [`Run::computation`], which nests once per host computation,
    /// stays small.
    #[inline(never)]
    fn host_step(
        &self,
        id: InstId,
        values: &HashMap<InstId, Vec<BufferKey>>,
        made: &mut Vec<BufferKey>,
    ) -> Result<Vec<BufferKey>, String> {
        let m = &self.exe.module;
        let mut ins = Vec::with_capacity(m.operands(id).len());
        for o in m.operands(id) {
            let keys = values
                .get(o)
                .ok_or_else(|| format!("operand %{} has no value", m.name(*o)))?;
            ins.push(
                keys.iter()
                    .map(|&key| self.mem.download(key))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| e.to_string())?,
            );
        }
        let outs = run_step(m, id, ins, self.dev).map_err(|e| e.to_string())?;
        let mut keys = Vec::with_capacity(outs.len());
        for bytes in outs {
            let key = self.mem.upload(&bytes).map_err(|e| e.to_string())?;
            made.push(key);
            keys.push(key);
        }
        Ok(keys)
    }

    /// Runs control-flow instruction `id` (a `while`, `conditional` or `call` whose host
    /// computations are `callees`) on its operands' buffers: gives its result's buffers and
    /// those of them it made (each once, now the caller's).
    fn control(
        &mut self,
        id: InstId,
        callees: &[CompId],
        operands: Vec<Vec<BufferKey>>,
    ) -> Result<(Vec<BufferKey>, Vec<BufferKey>), String> {
        let m = &self.exe.module;
        let mem = self.mem;
        match (m.opcode(id), callees, operands.as_slice()) {
            (Opcode::Call, &[c], _) => self.nested(c, &operands),
            (Opcode::Conditional, _, [selector, branch_operands @ ..]) => {
                let [key] = selector.as_slice() else {
                    return Err("the selector is not one array".into());
                };
                let pred = m
                    .array_shape(m.operands(id)[0])
                    .is_some_and(|a| a.ty.is_pred());
                let k = branch_taken(
                    pred,
                    &mem.download(*key).map_err(|e| e.to_string())?,
                    callees.len(),
                )
                .map_err(|e| e.to_string())?;
                let arg = branch_operands
                    .get(k)
                    .ok_or_else(|| format!("no operand for branch {k}"))?;
                self.nested(callees[k], std::slice::from_ref(arg))
            }
            (Opcode::While, &[cond, body], [init]) => {
                let mut state = LoopState::new(init.clone());
                match self.iterate(cond, body, &mut state) {
                    Ok(()) => Ok(state.finish()),
                    Err(e) => {
                        state.release(mem);
                        Err(e)
                    }
                }
            }
            _ => Err("malformed control flow (its computations or operands)".into()),
        }
    }

    /// Runs `while` iterations of condition `cond` and body `body` from `state` until the
    /// condition is false.
    fn iterate(&mut self, cond: CompId, body: CompId, state: &mut LoopState) -> Result<(), String> {
        loop {
            let arg = [state.buffers().to_vec()];
            let (pred, owned) = self.nested(cond, &arg)?;
            let bytes = match pred.as_slice() {
                [key] => self.mem.download(*key).map_err(|e| e.to_string()),
                _ => Err("the condition does not give one pred".into()),
            };
            for k in owned {
                // Made by the condition's run, now this loop's, and freed once here.
                let _ = self.mem.free(k);
            }
            if !pred_value(&bytes?).map_err(|e| e.to_string())? {
                return Ok(());
            }
            let (next, made) = self.nested(body, &arg)?;
            state
                .advance(self.mem, next, made)
                .map_err(|e| e.to_string())?;
        }
    }
}
