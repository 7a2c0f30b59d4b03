//! Lowering a module to a program of thunks over buffers.
//!
//! Every value is a tree of buffer ids ([`VTree`]): `tuple`, `get-tuple-element`, `copy`,
//! `opt-barrier`, row-major `reshape`/`bitcast` and `call` move no data, they only rearrange
//! trees (`call` is inlined, so every call site gets its own buffers). Every other instruction
//! becomes a [`Thunk`]: a kernel (one loop nest writing the instruction's buffers), a copy, or
//! control flow (`while`, `conditional`) holding nested thunk lists. A `fusion` runs as
//! [`crate::fused`] plans it: staged inner values first (each a kernel, or lowered as an
//! unfused instruction), then the kernel of its root; a plan of one kernel stage (the root) is
//! the fusion's own kernel.
//!
//! Buffers come from the `schedule` crate's assignment ([`axle_schedule::BufferAssignment`],
//! computed under [`crate::buffer_rules::CpuRules`]): every instruction's leaves are the
//! assignment's buffers, so lowering computes no liveness of its own. Computations run in their
//! scheduled order (instructions the root does not need are skipped); a `dynamic-update-slice`
//! or `scatter` kernel updates in place exactly when the assignment gave its output its
//! operand's buffer; loops, branches and outputs copy where the assignment says.

use std::collections::HashMap;

use axle_ir::entity::{dense_map, PrimaryMap, SecondaryMap};
use axle_ir::{ArrayShape, AttrKey, AttrValue, CompId, ElementType, InstId, Module, Opcode};

use axle_schedule::{BufferAssignment, Memory, Move};

use crate::elemental::{bitcast_is_reshape, first_non_elemental, inst_leaves};
use crate::error::{at, Fail, R};
use crate::fused::{reached_bound, KernelPlan, StageHow};
use crate::host::HostCall;
use crate::plan_cache::PlanCache;

pub(crate) use crate::buf::BufId;
pub(crate) use crate::kernel_kind::{is_topk_custom_call, order, root_kind, KernelKind};

/// Copies as (source, destination) buffer pairs, run in order.
pub(crate) type Copies = Vec<(BufId, BufId)>;

/// Where a buffer lives.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum BufKind {
    /// Leaf `k` of the entry parameters (read-only).
    Param(u32),
    /// In leaf `k` of the entry result (at the offset [`Program::offsets`] gives).
    Output(u32),
    /// Leaf `k` (depth-first) of the value of a constant instruction (read-only global).
    Const(InstId, u32),
    /// Part of the temporary block (at the offset [`Program::offsets`] gives).
    Temp,
    /// Part of the scratch arena, the block's tail from [`Program::arena_base`] (at the offset
    /// [`Program::offsets`] gives).
    Arena,
}

/// A buffer: one array.
#[derive(Clone, Debug)]
pub(crate) struct Buf {
    pub kind: BufKind,
    /// The shape of the first value it holds (bytes for scratch and staging).
    pub shape: ArrayShape,
    pub bytes: u64,
}

/// A value: a tree of buffers.
#[derive(Clone, Debug)]
pub(crate) enum VTree {
    Leaf(BufId),
    Tuple(Vec<VTree>),
}

impl VTree {
    /// The leaf buffers, depth-first.
    pub fn leaves(&self) -> Vec<BufId> {
        let mut out = Vec::new();
        self.collect(&mut out);
        out
    }

    fn collect(&self, out: &mut Vec<BufId>) {
        match self {
            VTree::Leaf(b) => out.push(*b),
            VTree::Tuple(es) => es.iter().for_each(|e| e.collect(out)),
        }
    }
}

/// A kernel: computes `root` with `bindings` read from buffers and writes `outputs`.
#[derive(Clone, Debug)]
pub(crate) struct Kernel {
    pub kind: KernelKind,
    /// What the kind needs beyond the root (row passes, an epilogue's core).
    pub plan: KernelPlan,
    pub root: InstId,
    /// Instructions bound to buffers (fusion parameters, or an unfused instruction's operands).
    pub bindings: Vec<(InstId, Vec<BufId>)>,
    /// One buffer per leaf of the root.
    pub outputs: Vec<BufId>,
    /// Whether a `Dus`/`Scatter` kernel updates its operand in place: the assignment gave its
    /// output the operand's buffer.
    pub in_place: bool,
    /// The HLO instruction it came from (for names and errors).
    pub origin: InstId,
    /// Scratch memory the kernel needs (sorts, GEMM packing, an epilogue's core result), as
    /// the assignment gave it (the order of [`crate::buffer_rules::CpuRules`]' scratch sizes).
    pub scratch: Vec<BufId>,
    /// A GEMM's operands (left, right) as the buffer of each one's view base
    /// ([`crate::gemm::operand_view`]) and the byte offset the view starts at: passed after
    /// the scratch buffers as pointers the entry code offsets, so the kernel's code does not
    /// depend on the offsets and kernels that differ only in a slice's start (attention's
    /// heads) share one function. Empty for other kernels.
    pub views: Vec<(BufId, i64)>,
    /// Scalar constants of the kernel's subgraph passed after the views as pointers to their
    /// values ([`crate::lifted`]), so kernels that differ only in them share one function.
    pub lifted: Vec<InstId>,
}

/// One pointer a kernel is called with ([`Kernel::bound`]).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Bound {
    /// Buffer `b`, `offset` bytes in (a GEMM view's start; 0 for every other buffer).
    Buf(BufId, i64),
    /// A lifted constant's value.
    Lifted(InstId),
}

impl Kernel {
    /// The pointers the kernel is called with, in the order of its bind array: outputs,
    /// bindings, scratch, GEMM views (with their offsets), lifted constants. Every caller of a
    /// kernel (the entry point's straight-line calls and its call tables) binds this list.
    pub fn bound(&self) -> impl Iterator<Item = Bound> + '_ {
        self.outputs
            .iter()
            .chain(self.bindings.iter().flat_map(|(_, bs)| bs))
            .chain(&self.scratch)
            .map(|&b| Bound::Buf(b, 0))
            .chain(self.views.iter().map(|&(b, off)| Bound::Buf(b, off)))
            .chain(self.lifted.iter().map(|&c| Bound::Lifted(c)))
    }
}

/// One step of the program.
#[derive(Clone, Debug)]
pub(crate) enum Thunk {
    Kernel(Box<Kernel>),
    /// `dst`'s bytes copied from `src`'s, starting `offset` bytes into `src`.
    Copy {
        src: BufId,
        offset: u64,
        dst: BufId,
    },
    /// A loop: `copy_in` (source, destination) before it, the condition, then while it holds
    /// the body and `copy_back` (the copies the assignment lists, in order).
    While {
        copy_in: Copies,
        cond: Vec<Thunk>,
        pred: BufId,
        body: Vec<Thunk>,
        copy_back: Copies,
    },
    /// A conditional: each branch's thunks and the copies into the outputs after it.
    Cond {
        selector: BufId,
        branches: Vec<(Vec<Thunk>, Copies)>,
    },
    /// A call into the runtime library ([`crate::host`]).
    HostCall(Box<HostCall>),
}

/// A lowered module.
pub(crate) struct Program {
    pub bufs: PrimaryMap<BufId, Buf>,
    pub body: Vec<Thunk>,
    /// Array leaves of the entry parameters, in order.
    pub params: Vec<ArrayShape>,
    /// Array leaves of the entry result, in order.
    pub outputs: Vec<ArrayShape>,
    /// The offset of each temporary in the temporary block, and of each buffer placed in an
    /// output's memory (0 for other buffers).
    pub offsets: SecondaryMap<BufId, u64>,
    /// The size of the temporary block (what XLA's `temp_size_in_bytes` counts).
    pub temp_bytes: u64,
    /// The size of the scratch arena after it (GEMM packing and sort planes).
    pub arena_bytes: u64,
    /// The parameter leaves the code may write (donated, under rules that let it).
    pub writable_params: Vec<u32>,
    /// `(output leaf, parameter leaf)`: outputs the code leaves in a writable parameter's
    /// memory (it writes nothing to those output buffers).
    pub donated_outputs: Vec<(u32, u32)>,
}

impl Program {
    /// Where the scratch arena starts in the block a run allocates.
    pub fn arena_base(&self) -> u64 {
        self.temp_bytes.div_ceil(axle_schedule::ALIGN) * axle_schedule::ALIGN
    }

    /// Bytes of the block a run allocates: the temporary block, then the scratch arena.
    pub fn block_bytes(&self) -> u64 {
        if self.arena_bytes == 0 {
            self.temp_bytes
        } else {
            self.arena_base() + self.arena_bytes
        }
    }
}

struct Lower<'m> {
    m: &'m Module,
    asg: &'m BufferAssignment,
    /// The fusion plans `asg` was made with (every fusion the assignment asked about).
    plans: &'m PlanCache,
    bufs: PrimaryMap<BufId, Buf>,
    depth: usize,
}

/// The computations a kernel root applies per element (reducers, comparators, ...).
fn applied_comps(m: &Module, id: InstId) -> Vec<CompId> {
    match m.opcode(id) {
        Opcode::Fusion | Opcode::Call | Opcode::While | Opcode::Conditional => Vec::new(),
        _ => m.called_comps(id),
    }
}

impl<'m> Lower<'m> {
    /// The assignment's buffers of `id`'s leaves, as a tree of its shape; `check` refuses
    /// element types kernels cannot compute.
    fn tree(&self, id: InstId, check: bool) -> R<VTree> {
        let m = self.m;
        let leaves = self.asg.leaf_buffers(id);
        let mut it = leaves.iter().map(|b| BufId::new(b.index()));
        let t = shape_tree(m, m.shape(id), &mut it, check)?;
        if it.next().is_some() {
            return Err("the buffer assignment does not match the shape".into());
        }
        Ok(t)
    }

    /// The buffers of a constant's literal (globals of its leaves).
    fn const_tree(&self, id: InstId) -> R<VTree> {
        self.tree(id, true)
    }

    fn lower_comp(&mut self, comp: CompId, args: Vec<VTree>, out: &mut Vec<Thunk>) -> R<VTree> {
        let m = self.m;
        self.depth += 1;
        if self.depth > 64 {
            return Err("computations nest more than 64 deep".into());
        }
        let params = m.params(comp);
        if args.len() != params.len() {
            return Err(format!(
                "computation {} takes {} arguments, got {}",
                m.comp_name(comp),
                params.len(),
                args.len()
            )
            .into());
        }
        let mut vals: HashMap<InstId, VTree> = HashMap::new();
        for (&p, a) in params.iter().zip(args) {
            if !p.is_none() {
                vals.insert(p, a);
            }
        }
        // The scheduled order (the assignment's liveness follows it), skipping what the root
        // does not need.
        let needed: std::collections::HashSet<InstId> = order(m, comp)?.into_iter().collect();
        let seq = m
            .schedule()
            .and_then(|s| s.sequence(comp))
            .ok_or("the module is not scheduled")?;
        for &id in seq {
            if vals.contains_key(&id) || !needed.contains(&id) {
                continue;
            }
            let v = self.lower_inst(id, &vals, out).map_err(|f| at(m, id, f))?;
            vals.insert(id, v);
        }
        self.depth -= 1;
        vals.remove(&m.root(comp))
            .ok_or_else(|| "the root was not lowered".into())
    }

    fn lower_inst(
        &mut self,
        id: InstId,
        vals: &HashMap<InstId, VTree>,
        out: &mut Vec<Thunk>,
    ) -> R<VTree> {
        use Opcode::*;
        let m = self.m;
        let ops = m.operands(id);
        let val = |o: &InstId| -> R<VTree> {
            vals.get(o)
                .cloned()
                .ok_or_else(|| Fail::Msg(format!("operand %{} has no value", m.name(*o))))
        };
        if let Some(call) = crate::host::plan(m, id) {
            return self.host_call(id, call?, vals, out);
        }
        match m.opcode(id) {
            Parameter => Err("parameter without an argument".into()),
            Constant => match m.literal(id) {
                Some(_) => self.const_tree(id),
                None => Err("the constant's value was elided from the text".into()),
            },
            Tuple => Ok(VTree::Tuple(ops.iter().map(val).collect::<R<_>>()?)),
            GetTupleElement => {
                let k = m.int_attr(id, &AttrKey::Index).ok_or("missing index")? as usize;
                match val(&ops[0])? {
                    VTree::Tuple(mut es) if k < es.len() => Ok(es.swap_remove(k)),
                    _ => Err("get-tuple-element of a non-tuple".into()),
                }
            }
            Copy | AddDependency | Domain => val(&ops[0]),
            OptBarrier => {
                if ops.len() == 1 {
                    val(&ops[0])
                } else {
                    Ok(VTree::Tuple(ops.iter().map(val).collect::<R<_>>()?))
                }
            }
            AfterAll => Ok(VTree::Tuple(Vec::new())),
            AllReduceDone | AllGatherDone | CollectivePermuteDone => {
                self.collective_done(id, val(&ops[0])?, out)
            }
            Reshape => self.alias_view(id, val(&ops[0])?),
            Bitcast if bitcast_is_reshape(m, id)? => self.alias_view(id, val(&ops[0])?),
            Call => {
                let c = m
                    .comp_attr(id, &AttrKey::ToApply)
                    .ok_or("call needs to_apply")?;
                let args = ops.iter().map(val).collect::<R<Vec<_>>>()?;
                self.lower_comp(c, args, out)
            }
            Fusion => {
                let c = m
                    .comp_attr(id, &AttrKey::Calls)
                    .ok_or("fusion needs calls")?;
                let args = ops.iter().map(val).collect::<R<Vec<_>>>()?;
                self.lower_fusion(id, c, args, out)
            }
            While => self.lower_while(id, val(&ops[0])?, out),
            Conditional => {
                let args = ops.iter().map(val).collect::<R<Vec<_>>>()?;
                self.lower_conditional(id, args, out)
            }
            CustomCall if !is_topk_custom_call(m, id) => {
                let target = match m.attr(id, &AttrKey::CustomCallTarget) {
                    Some(AttrValue::Str(s))
                    | Some(AttrValue::Raw(s))
                    | Some(AttrValue::Ident(s)) => s.to_string(),
                    _ => String::new(),
                };
                Err(format!("unsupported custom-call target \"{target}\"").into())
            }
            op => {
                let kind = root_kind(m, id).ok_or_else(|| {
                    // An element type kernels do not handle (complex values reach here as
                    // parameters and host-call results) is the clearer reason.
                    let types = std::iter::once(id).chain(ops.iter().copied());
                    if let Some(t) = types
                        .filter_map(|i| m.array_shape(i).map(|s| s.ty))
                        .find(|&t| !crate::forms::supported_type(t))
                    {
                        return crate::forms::unsupported_type(crate::cpu_target::BACKEND, t);
                    }
                    Fail::Msg(format!(
                        "the cpu backend does not support {} instructions",
                        op.name()
                    ))
                })?;
                for c in applied_comps(m, id) {
                    if let Some(bad) = first_non_elemental(m, c) {
                        return Err(format!(
                            "computation {} cannot be applied per element by the cpu backend: \
                             its {} instruction {} is not supported there",
                            m.comp_name(c),
                            m.opcode(bad).name(),
                            m.name(bad)
                        )
                        .into());
                    }
                }
                let mut bindings = Vec::new();
                for o in ops {
                    if bindings.iter().any(|(b, _)| b == o) {
                        continue;
                    }
                    bindings.push((*o, val(o)?.leaves()));
                }
                self.kernel(kind, KernelPlan::Plain, id, id, id, bindings, out)
            }
        }
    }

    /// A fusion as [`crate::fused::plan_fusion`] plans it: each stage in order, reading the parameters and
    /// the earlier stages from their buffers. A plan of one kernel stage, the root, is the
    /// fusion's own kernel (the assignment's [`axle_schedule::FusionRun::Kernel`]: it writes
    /// the fusion's buffers); otherwise every stage is a step with buffers of its own.
    fn lower_fusion(
        &mut self,
        id: InstId,
        comp: CompId,
        args: Vec<VTree>,
        out: &mut Vec<Thunk>,
    ) -> R<VTree> {
        let m = self.m;
        self.depth += 1;
        if self.depth > 64 {
            return Err("computations nest more than 64 deep".into());
        }
        let params = m.params(comp);
        if args.len() != params.len() {
            return Err("fusion operands do not match its computation's parameters".into());
        }
        let plan = self.plans.plan_or_reason(m, comp)?;
        let mut vals: HashMap<InstId, VTree> = HashMap::new();
        for (&p, a) in params.iter().zip(args) {
            if !p.is_none() {
                vals.insert(p, a);
            }
        }
        let root = m.root(comp);
        let one_kernel = matches!(&plan.stages[..], [st] if st.inst == root
            && matches!(st.how, StageHow::Kernel(..)));
        for st in &plan.stages {
            // A constant step stays the read-only global the assignment gave it, whatever the
            // plan says: a kernel staging it would write that global. (A fusion that is one
            // kernel writes its own buffers, even when its root is a constant.)
            let unfused = matches!(st.how, StageHow::Unfused)
                || (!one_kernel && m.opcode(st.inst) == Opcode::Constant);
            let v = match &st.how {
                StageHow::Kernel(kind, kplan) if !unfused => {
                    let x = st.inst;
                    let reads = reached_bound(m, x, &|i| i != x && vals.contains_key(&i));
                    let bindings = reads.iter().map(|&i| (i, vals[&i].leaves())).collect();
                    let owner = if one_kernel { id } else { x };
                    self.kernel(*kind, kplan.clone(), x, id, owner, bindings, out)?
                }
                _ => self
                    .lower_inst(st.inst, &vals, out)
                    .map_err(|f| at(m, st.inst, f))?,
            };
            vals.insert(st.inst, v);
        }
        self.depth -= 1;
        vals.remove(&root)
            .ok_or_else(|| "the fused root was not lowered".into())
    }

    /// A call into the runtime library. Its results may be complex: the library writes them,
    /// and kernels that read complex buffers refuse them when they cannot.
    fn host_call(
        &mut self,
        id: InstId,
        call: crate::runtime::Call,
        vals: &HashMap<InstId, VTree>,
        out: &mut Vec<Thunk>,
    ) -> R<VTree> {
        let m = self.m;
        let mut inputs = Vec::new();
        for o in m.operands(id) {
            let v = vals
                .get(o)
                .ok_or_else(|| Fail::Msg(format!("operand %{} has no value", m.name(*o))))?;
            inputs.extend(v.leaves());
        }
        let mut shapes = Vec::new();
        crate::elemental::leaves(m, m.shape(id), &mut shapes)?;
        let tree = self.tree(id, false)?;
        let outputs = tree.leaves();
        out.push(Thunk::HostCall(Box::new(HostCall {
            call,
            inputs,
            outputs,
            origin: id,
        })));
        Ok(tree)
    }

    /// A collective's `-done`: copies the results out of its `-start`'s value
    /// (all of it for `all-reduce-start`, tuple element 1 otherwise) into its own buffers.
    fn collective_done(&mut self, id: InstId, start: VTree, out: &mut Vec<Thunk>) -> R<VTree> {
        let src = match (self.m.opcode(id), start) {
            (Opcode::AllReduceDone, v) => v,
            (_, VTree::Tuple(mut es)) if es.len() >= 2 => es.swap_remove(1),
            _ => return Err("the operand is not a -start's tuple".into()),
        };
        let from = src.leaves();
        if from.len() != self.tree(id, false)?.leaves().len() {
            return Err("the -done's shape does not match its -start's results".into());
        }
        self.copy_into(id, from, out)
    }

    /// `id`'s own buffers, the first `from.len()` of its leaves copied from `from`.
    fn copy_into(&mut self, id: InstId, from: Vec<BufId>, out: &mut Vec<Thunk>) -> R<VTree> {
        let tree = self.tree(id, false)?;
        let to = tree.leaves();
        if from.len() > to.len() {
            return Err("the value does not fit the instruction's shape".into());
        }
        for (s, d) in from.into_iter().zip(to) {
            out.push(Thunk::Copy {
                src: s,
                offset: 0,
                dst: d,
            });
        }
        Ok(tree)
    }

    /// A view of the same bytes with `id`'s shape.
    fn alias_view(&mut self, _id: InstId, v: VTree) -> R<VTree> {
        match v {
            VTree::Leaf(b) => Ok(VTree::Leaf(b)),
            VTree::Tuple(_) => Err("reshape of a tuple".into()),
        }
    }

    /// A kernel computing `root` from `bindings` into the assignment's buffers of `owner` (the
    /// instruction, fusion or fusion step it runs for), with `owner`'s scratch; attributed to
    /// `origin`.
    #[allow(clippy::too_many_arguments)]
    fn kernel(
        &mut self,
        kind: KernelKind,
        plan: KernelPlan,
        root: InstId,
        origin: InstId,
        owner: InstId,
        bindings: Vec<(InstId, Vec<BufId>)>,
        out: &mut Vec<Thunk>,
    ) -> R<VTree> {
        let m = self.m;
        let tree = self.tree(owner, true)?;
        let outputs = tree.leaves();
        if kind == KernelKind::Loop {
            if let Some((src, offset)) = contiguous_view(m, root, &bindings, &outputs) {
                out.push(Thunk::Copy {
                    src,
                    offset,
                    dst: outputs[0],
                });
                return Ok(tree);
            }
        }
        // In place exactly when the assignment gave the output the updated operand's buffer.
        let mut in_place = match kind {
            KernelKind::Dus | KernelKind::Scatter => {
                let op0 = m.operands(root)[0];
                bindings
                    .iter()
                    .find(|(i, bs)| *i == op0 && bs.len() == 1)
                    .is_some_and(|(_, bs)| outputs.first() == Some(&bs[0]))
            }
            _ => false,
        };
        if kind == KernelKind::Dus && !in_place {
            if let Some(src) = self.dus_copy_source(root, &bindings, &outputs) {
                // The updated operand lies in a buffer of its own: copy it into the output
                // (one memcpy) and update the output in place, instead of computing every
                // element of the output as "inside the update or not".
                out.push(Thunk::Copy {
                    src,
                    offset: 0,
                    dst: outputs[0],
                });
                in_place = true;
            }
        }
        let scratch: Vec<BufId> = self
            .asg
            .scratch(owner)
            .iter()
            .map(|b| BufId::new(b.index()))
            .collect();
        let (arena, core_temp) = plan.scratch_needs(m, kind, root);
        let needed = usize::from(arena) + usize::from(core_temp);
        if scratch.len() != needed {
            return Err(format!(
                "the buffer assignment gave the kernel {} scratch buffers, it needs {needed}",
                scratch.len()
            )
            .into());
        }
        let views = gemm_views(m, kind, &plan, root, &bindings)?;
        let lifted = crate::lifted::lifted_constants(m, root, &bindings);
        out.push(Thunk::Kernel(Box::new(Kernel {
            kind,
            plan,
            root,
            bindings,
            outputs,
            in_place,
            origin,
            scratch,
            views,
            lifted,
        })));
        Ok(tree)
    }

    /// The buffer to copy into a `dynamic-update-slice`'s output before updating it in place:
    /// the updated operand's own buffer, when it and the output both hold exactly the
    /// operand's bytes and no other input of the kernel lies in the output's buffer (the copy
    /// must not overwrite what the kernel still reads).
    fn dus_copy_source(
        &self,
        root: InstId,
        bindings: &[(InstId, Vec<BufId>)],
        outputs: &[BufId],
    ) -> Option<BufId> {
        let m = self.m;
        let op0 = m.operands(root)[0];
        let &[dst] = outputs else {
            return None;
        };
        let (_, bs) = bindings.iter().find(|(i, _)| *i == op0)?;
        let &[src] = &bs[..] else {
            return None;
        };
        let bytes = m.array_shape(op0)?.byte_size()?;
        let others_apart = bindings
            .iter()
            .all(|(i, bs)| *i == op0 || !bs.contains(&dst));
        (src != dst
            && others_apart
            && self.bufs[src].bytes == bytes
            && self.bufs[dst].bytes == bytes)
            .then_some(src)
    }

    fn lower_while(&mut self, id: InstId, init: VTree, out: &mut Vec<Thunk>) -> R<VTree> {
        let m = self.m;
        let cond_c = m
            .comp_attr(id, &AttrKey::Condition)
            .ok_or("while needs a condition")?;
        let body_c = m
            .comp_attr(id, &AttrKey::Body)
            .ok_or("while needs a body")?;
        let state_tree = self.tree(id, false)?;
        let state = state_tree.leaves();
        if init.leaves().len() != state.len() {
            return Err("while operand does not match its shape".into());
        }
        let mut cond = Vec::new();
        let p = self.lower_comp(cond_c, vec![state_tree.clone()], &mut cond)?;
        let pred = match p {
            VTree::Leaf(b) if self.bufs[b].shape.ty == ElementType::Pred => b,
            _ => return Err("while condition must return a pred scalar".into()),
        };
        let mut body = Vec::new();
        let r = self.lower_comp(body_c, vec![state_tree.clone()], &mut body)?;
        if r.leaves().len() != state.len() {
            return Err("while body result does not match the loop state".into());
        }
        // The copies into the state after each trip are the assignment's, made sequential (a
        // body that swaps or rotates state elements goes through a staging temporary), so every
        // element takes this trip's value.
        out.push(Thunk::While {
            copy_in: moves(self.asg.loop_init(id)),
            cond,
            pred,
            body,
            copy_back: moves(self.asg.loop_back(id)),
        });
        Ok(state_tree)
    }

    fn lower_conditional(
        &mut self,
        id: InstId,
        args: Vec<VTree>,
        out: &mut Vec<Thunk>,
    ) -> R<VTree> {
        let m = self.m;
        let branches: Vec<CompId> = m.branch_computations(id).ok_or(
            "conditional needs branch_computations or true_computation and false_computation",
        )?;
        if branches.is_empty() || args.len() != branches.len() + 1 {
            return Err("conditional needs one operand per branch".into());
        }
        let selector = match &args[0] {
            VTree::Leaf(b) => *b,
            _ => return Err("conditional selector must be a scalar".into()),
        };
        let out_tree = self.tree(id, false)?;
        let outputs = out_tree.leaves();
        let mut lowered = Vec::new();
        for (k, &c) in branches.iter().enumerate() {
            let mut thunks = Vec::new();
            let r = self.lower_comp(c, vec![args[k + 1].clone()], &mut thunks)?;
            if r.leaves().len() != outputs.len() {
                return Err("conditional branch result does not match its shape".into());
            }
            lowered.push((thunks, moves(self.asg.branch_out(id, k))));
        }
        out.push(Thunk::Cond {
            selector,
            branches: lowered,
        });
        Ok(out_tree)
    }
}

/// Lowers the entry computation of `m` (scheduled) onto the buffers of `asg`, its assignment
/// under [`crate::buffer_rules::CpuRules`].
pub(crate) fn lower(m: &Module, asg: &BufferAssignment, plans: &PlanCache) -> R<Program> {
    let entry = m.entry();
    if entry.is_none() {
        return Err("the module has no entry computation".into());
    }
    let (bufs, offsets) = buffers(m, asg)?;
    let mut l = Lower {
        m,
        asg,
        plans,
        bufs,
        depth: 0,
    };
    let mut params = Vec::new();
    let mut args = Vec::new();
    for &p in m.params(entry) {
        if p.is_none() {
            return Err("the entry computation is missing a parameter".into());
        }
        let mut shapes = Vec::new();
        crate::elemental::leaves(m, m.shape(p), &mut shapes)?;
        for a in &shapes {
            // Complex parameters are bytes until a kernel reads them (and refuses them if it
            // cannot); host calls and copies take them as they are.
            if !crate::forms::supported_type(a.ty) && !a.ty.is_complex() {
                return Err(crate::forms::unsupported_type(
                    crate::cpu_target::BACKEND,
                    a.ty,
                ));
            }
        }
        params.extend(shapes);
        args.push(l.tree(p, false)?);
    }
    let mut body = Vec::new();
    l.lower_comp(entry, args, &mut body)?;
    for mv in asg.output_moves() {
        body.push(Thunk::Copy {
            src: BufId::new(mv.src.index()),
            offset: 0,
            dst: BufId::new(mv.dst.index()),
        });
    }
    let outputs: Vec<ArrayShape> = inst_leaves(m, m.root(entry))?;
    Ok(Program {
        bufs: l.bufs,
        body,
        params,
        outputs,
        offsets,
        temp_bytes: asg.temp_bytes,
        arena_bytes: asg.arena_bytes,
        writable_params: Vec::new(),
        donated_outputs: asg.donated_outputs.clone(),
    })
}

/// The tree of shape `s` with leaves from `leaves`; `check` refuses element types kernels
/// cannot compute.
fn shape_tree(
    m: &Module,
    s: &axle_ir::Shape,
    leaves: &mut dyn Iterator<Item = BufId>,
    check: bool,
) -> R<VTree> {
    Ok(match s {
        axle_ir::Shape::Array(a) => {
            if check && !crate::forms::supported_type(a.ty) {
                return Err(crate::forms::unsupported_type(
                    crate::cpu_target::BACKEND,
                    a.ty,
                ));
            }
            VTree::Leaf(
                leaves
                    .next()
                    .ok_or("the buffer assignment does not match the shape")?,
            )
        }
        axle_ir::Shape::Tuple(ids) => VTree::Tuple(
            ids.iter()
                .map(|&i| shape_tree(m, m.shape_of(i), leaves, check))
                .collect::<R<_>>()?,
        ),
        axle_ir::Shape::Token | axle_ir::Shape::Opaque => VTree::Tuple(Vec::new()),
    })
}

/// The assignment's copies as buffer pairs.
fn moves(ms: &[Move]) -> Copies {
    ms.iter()
        .map(|mv| (BufId::new(mv.src.index()), BufId::new(mv.dst.index())))
        .collect()
}

/// The backend's buffers, one per buffer of the assignment, and their offsets.
fn buffers(
    m: &Module,
    asg: &BufferAssignment,
) -> R<(PrimaryMap<BufId, Buf>, SecondaryMap<BufId, u64>)> {
    let p = asg.program();
    let mut bufs = PrimaryMap::with_capacity(asg.buffers().len());
    let mut offsets = dense_map(asg.buffers().len(), 0);
    for b in asg.buffers() {
        let shape = match b.values.first() {
            Some(&v) => {
                let val = p.value(v);
                leaf_shape(m, m.shape(val.inst), val.leaf)
                    .unwrap_or_else(|| ArrayShape::new(ElementType::U8, &[b.size as i64]))
            }
            None => ArrayShape::new(ElementType::U8, &[b.size as i64]),
        };
        let (kind, offset) = match b.memory {
            Memory::Param(k) => (BufKind::Param(k), 0),
            Memory::Constant { inst, leaf } => (BufKind::Const(inst, leaf), 0),
            Memory::Output { leaf, offset } => (BufKind::Output(leaf), offset),
            Memory::Temp { offset } => (BufKind::Temp, offset),
            Memory::Arena { offset } => (BufKind::Arena, offset),
        };
        let id = bufs.push(Buf {
            kind,
            shape,
            bytes: b.size,
        });
        offsets[id] = offset;
    }
    Ok((bufs, offsets))
}

/// Array leaf `leaf` (depth-first) of shape `s`.
fn leaf_shape(m: &Module, s: &axle_ir::Shape, leaf: u32) -> Option<ArrayShape> {
    fn walk(m: &Module, s: &axle_ir::Shape, k: &mut u32) -> Option<ArrayShape> {
        match s {
            axle_ir::Shape::Array(a) => {
                if *k == 0 {
                    return Some(a.clone());
                }
                *k -= 1;
                None
            }
            axle_ir::Shape::Tuple(ids) => ids.iter().find_map(|&i| walk(m, m.shape_of(i), k)),
            _ => None,
        }
    }
    let mut k = leaf;
    walk(m, s, &mut k)
}

/// The largest view [`contiguous_view`] turns into a copy: up to it one thread's `memcpy` is
/// faster than the loop kernel on the pool; beyond it the kernel's threads pay.
const COPY_VIEW_MAX: u64 = 8 << 20;

/// Where a loop kernel's one output can be copied from instead of computed: when its root only
/// reads, through views ([`crate::gemm::operand_view`]: slices, reshapes, transposes,
/// broadcasts, copies), one run of consecutive elements of one bound buffer other than the
/// output (a slice of leading dimensions, say), that buffer and the run's offset in bytes.
fn contiguous_view(
    m: &Module,
    root: InstId,
    bindings: &[(InstId, Vec<BufId>)],
    outputs: &[BufId],
) -> Option<(BufId, u64)> {
    let [dst] = outputs else { return None };
    let shape = m.array_shape(root)?;
    let bytes = shape.byte_size()?;
    if bytes == 0 || bytes > COPY_VIEW_MAX || shape.ty.bits() % 8 != 0 {
        return None;
    }
    let bound = |i: InstId| {
        bindings
            .iter()
            .find(|(b, bufs)| *b == i && bufs.len() == 1)
            .map(|(_, bufs)| bufs[0])
    };
    let view = crate::gemm::operand_view(m, root, &|i| i != root && bound(i).is_some());
    let src = bound(view.base).filter(|_| view.base != root)?;
    let mut expect = 1;
    for (&d, &s) in shape.dims.iter().zip(&view.strides).rev() {
        if d > 1 && s != expect {
            return None;
        }
        expect *= d;
    }
    (src != *dst).then_some((src, (view.offset * shape.ty.byte_size() as i64) as u64))
}

/// The first host call of a program, nested regions included (for the AOT refusal).
pub(crate) fn first_host_call(thunks: &[Thunk]) -> Option<InstId> {
    thunks.iter().find_map(|t| match t {
        Thunk::HostCall(h) => Some(h.origin),
        Thunk::Kernel(_) | Thunk::Copy { .. } => None,
        Thunk::While { cond, body, .. } => first_host_call(cond).or_else(|| first_host_call(body)),
        Thunk::Cond { branches, .. } => branches.iter().find_map(|(b, _)| first_host_call(b)),
    })
}

/// Calls `f` on every kernel of `thunks` in program order, nested ones included.
pub(crate) fn visit_kernels(thunks: &[Thunk], f: &mut dyn FnMut(&Kernel)) {
    visit_thunks(thunks, false, &mut |t, _| {
        if let Thunk::Kernel(k) = t {
            f(k)
        }
    });
}

/// Calls `f` on every thunk of `thunks` in program order, a loop's or conditional's own thunk
/// before those of its condition, body or branches (in that order), with whether the thunk is
/// in a loop (`in_loop` for those of `thunks`).
pub(crate) fn visit_thunks<'p>(
    thunks: &'p [Thunk],
    in_loop: bool,
    f: &mut dyn FnMut(&'p Thunk, bool),
) {
    for t in thunks {
        f(t, in_loop);
        match t {
            Thunk::Kernel(_) | Thunk::Copy { .. } | Thunk::HostCall(_) => {}
            Thunk::While { cond, body, .. } => {
                visit_thunks(cond, true, f);
                visit_thunks(body, true, f);
            }
            Thunk::Cond { branches, .. } => {
                for (b, _) in branches {
                    visit_thunks(b, in_loop, f);
                }
            }
        }
    }
}

/// The `dot` a GEMM kernel runs (its root, or its epilogue's core), if `kind` is `Gemm`.
pub(crate) fn gemm_core(
    m: &Module,
    kind: KernelKind,
    plan: &KernelPlan,
    root: InstId,
) -> Option<InstId> {
    let core = plan.core(root);
    (kind == KernelKind::Gemm && m.opcode(core) == axle_ir::Opcode::Dot).then_some(core)
}

/// The bindings that are one array in memory: where a GEMM's operand views may start.
pub(crate) fn bound_arrays(bindings: &[(InstId, Vec<BufId>)]) -> Vec<InstId> {
    bindings
        .iter()
        .filter(|(_, bs)| bs.len() == 1)
        .map(|(b, _)| *b)
        .collect()
}

/// [`Kernel::views`] of a kernel: for a GEMM, each operand's view base buffer (one of the
/// `bindings`) and start in bytes.
fn gemm_views(
    m: &Module,
    kind: KernelKind,
    plan: &KernelPlan,
    root: InstId,
    bindings: &[(InstId, Vec<BufId>)],
) -> R<Vec<(BufId, i64)>> {
    let Some(core) = gemm_core(m, kind, plan, root) else {
        return Ok(Vec::new());
    };
    let arrays = bound_arrays(bindings);
    let bound = |x: InstId| arrays.contains(&x);
    m.operands(core)
        .iter()
        .map(|&o| {
            let v = crate::gemm::operand_view(m, o, &bound);
            let buf = bindings
                .iter()
                .find(|(b, bs)| *b == v.base && bs.len() == 1)
                .map(|(_, bs)| bs[0])
                .ok_or("gemm operand is not in memory")?;
            let ty = m
                .array_shape(v.base)
                .ok_or("gemm operand is not an array")?
                .ty;
            Ok((buf, v.offset * ty.byte_size() as i64))
        })
        .collect()
}
