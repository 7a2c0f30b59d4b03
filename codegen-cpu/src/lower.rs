//! Lowering a module to a program of thunks over buffers.
//!
//! Every value is a tree of buffer ids ([`VTree`]): `tuple`, `get-tuple-element`, `copy`,
//! `opt-barrier`, row-major `reshape`/`bitcast` and `call` move no data, they only rearrange
//! trees (`call` is inlined, so every call site gets its own buffers). Every other instruction
//! becomes a [`Thunk`]: a kernel (one loop nest writing the instruction's buffers), a copy, or
//! control flow (`while`, `conditional`) holding nested thunk lists. A `fusion` whose computation
//! can be emitted elementally is one kernel; any other fusion is inlined like a call.
//!
//! After lowering, [`Program::finish`] computes buffer liveness over the program order (nested
//! regions included), decides which `dynamic-update-slice` and `scatter` kernels update their
//! operand in place, lets the entry root's leaves live directly in the output buffers, and runs
//! the buffer assignment (see [`crate::buffers`]).

use std::collections::HashMap;

use axle_ir::{
    ArrayShape, AttrKey, AttrValue, CompId, ElementType, InstId, Literal, Module, Opcode,
};

use crate::buffers::{assign, BufferPlan, Interval};
use crate::elemental::{bitcast_is_reshape, comp_is_elemental, inst_leaves, is_elemental};
use crate::error::{at, Fail, R};
use crate::host::HostCall;

/// A buffer id.
pub(crate) type BufId = u32;

/// Where a buffer lives.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum BufKind {
    /// Leaf `k` of the entry parameters (read-only).
    Param(u32),
    /// Leaf `k` of the entry result.
    Output(u32),
    /// Leaf `k` (depth-first) of the value of a constant instruction (read-only global).
    Const(InstId, u32),
    /// Part of the temporary block.
    Temp,
}

/// A buffer: one array.
#[derive(Clone, Debug)]
pub(crate) struct Buf {
    pub kind: BufKind,
    pub shape: ArrayShape,
    pub bytes: u64,
    /// Another buffer this one is merged into (in-place updates, designated outputs).
    pub alias: Option<BufId>,
    /// The region (entry = 0, each nested computation body its own) where it is defined.
    pub region: u32,
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

/// What a kernel does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum KernelKind {
    /// One loop nest over the root's elements, every leaf computed elementally.
    Loop,
    /// A `reduce` root, with a loop order that keeps the evaluator's accumulation order.
    Reduce,
    /// A `dynamic-update-slice` root (in place when allowed).
    Dus,
    /// A `scatter` root (in place when allowed).
    Scatter,
    /// A `select-and-scatter` root.
    SelectAndScatter,
    /// A `sort` root.
    Sort,
    /// A `topk` root or the `TopK` custom call.
    TopK,
    /// An `f32`/`f64` `dot` of buffers, as a blocked GEMM.
    Gemm,
    /// An `f32`/`f64` `convolution` of buffers, register-tiled.
    Conv,
    /// An `rng-bit-generator` root: items are block calls of its generator.
    Rng,
}

/// A kernel: computes `root` with `bindings` read from buffers and writes `outputs`.
#[derive(Clone, Debug)]
pub(crate) struct Kernel {
    pub kind: KernelKind,
    pub root: InstId,
    /// Instructions bound to buffers (fusion parameters, or an unfused instruction's operands).
    pub bindings: Vec<(InstId, Vec<BufId>)>,
    /// One buffer per leaf of the root.
    pub outputs: Vec<BufId>,
    /// For `Dus`/`Scatter`: the operand buffer that may be updated in place.
    pub in_place_candidate: Option<BufId>,
    /// Whether the kernel updates its candidate in place (decided by `finish`).
    pub in_place: bool,
    /// The HLO instruction it came from (for names and errors).
    pub origin: InstId,
    /// Scratch memory the kernel needs (sorts).
    pub scratch: Option<BufId>,
}

/// One step of the program.
#[derive(Clone, Debug)]
pub(crate) enum Thunk {
    Kernel(Box<Kernel>),
    Copy {
        src: BufId,
        dst: BufId,
    },
    While {
        init: Vec<BufId>,
        state: Vec<BufId>,
        cond: Vec<Thunk>,
        pred: BufId,
        body: Vec<Thunk>,
        result: Vec<BufId>,
    },
    Cond {
        selector: BufId,
        branches: Vec<(Vec<Thunk>, Vec<BufId>)>,
        outputs: Vec<BufId>,
    },
    /// A call into the runtime library ([`crate::host`]).
    HostCall(Box<HostCall>),
}

/// A lowered module.
pub(crate) struct Program {
    pub bufs: Vec<Buf>,
    pub body: Vec<Thunk>,
    /// Array leaves of the entry parameters, in order.
    pub params: Vec<ArrayShape>,
    /// Array leaves of the entry result, in order.
    pub outputs: Vec<ArrayShape>,
    /// The buffer plan of the temporaries.
    pub plan: BufferPlan,
}

struct Lower<'m> {
    m: &'m Module,
    /// What the GEMM's scratch size depends on.
    gemm: &'m crate::gemm::GemmTarget,
    bufs: Vec<Buf>,
    region: u32,
    next_region: u32,
    depth: usize,
}

/// The instructions `comp`'s root depends on, operands before users.
pub(crate) fn order(m: &Module, comp: CompId) -> R<Vec<InstId>> {
    let root = m.root(comp);
    if root.is_none() {
        return Err(format!("computation {} has no root", m.comp_name(comp)).into());
    }
    let mut out = Vec::new();
    let mut state: HashMap<InstId, u8> = HashMap::new();
    let mut stack: Vec<(InstId, usize)> = vec![(root, 0)];
    state.insert(root, 1);
    while let Some(&mut (id, ref mut next)) = stack.last_mut() {
        let ops = m.operands(id);
        if *next < ops.len() {
            let o = ops[*next];
            *next += 1;
            match state.get(&o) {
                None => {
                    state.insert(o, 1);
                    stack.push((o, 0));
                }
                Some(1) => return Err(format!("cycle through %{}", m.name(o)).into()),
                _ => {}
            }
        } else {
            state.insert(id, 2);
            out.push(id);
            stack.pop();
        }
    }
    Ok(out)
}

/// The kernel kind for a root instruction, if it has one.
fn root_kind(m: &Module, id: InstId) -> Option<KernelKind> {
    use Opcode::*;
    Some(match m.opcode(id) {
        Reduce => KernelKind::Reduce,
        DynamicUpdateSlice => KernelKind::Dus,
        Scatter => KernelKind::Scatter,
        SelectAndScatter => KernelKind::SelectAndScatter,
        Sort => KernelKind::Sort,
        TopK => KernelKind::TopK,
        RngBitGenerator => KernelKind::Rng,
        CustomCall if is_topk_custom_call(m, id) => KernelKind::TopK,
        Dot if crate::gemm::gemm_geo(m, id, &Default::default()).is_some() => KernelKind::Gemm,
        Convolution if crate::conv_fast::conv_fast(m, id).is_some() => KernelKind::Conv,
        _ if is_elemental(m, id) => KernelKind::Loop,
        _ => return None,
    })
}

/// Whether `id` is XLA's `TopK` custom call.
pub(crate) fn is_topk_custom_call(m: &Module, id: InstId) -> bool {
    matches!(
        m.attr(id, &AttrKey::CustomCallTarget),
        Some(AttrValue::Str(s)) | Some(AttrValue::Raw(s)) | Some(AttrValue::Ident(s)) if s.as_ref() == "TopK"
    )
}

/// The computations a kernel root applies per element (reducers, comparators, ...).
fn applied_comps(m: &Module, id: InstId) -> Vec<CompId> {
    match m.opcode(id) {
        Opcode::Fusion | Opcode::Call | Opcode::While | Opcode::Conditional => Vec::new(),
        _ => m.called_comps(id),
    }
}

/// Whether a fused computation can become one kernel: its root has a kernel kind, everything
/// else is elemental, and a tuple root's leaves share their dimensions.
fn fusion_kernel_kind(m: &Module, comp: CompId) -> Option<KernelKind> {
    let root = m.root(comp);
    let mut kind = root_kind(m, root)?;
    if matches!(kind, KernelKind::Gemm | KernelKind::Conv)
        && !m
            .operands(root)
            .iter()
            .all(|&o| m.opcode(o) == Opcode::Parameter)
    {
        kind = KernelKind::Loop;
    }
    for c in applied_comps(m, root) {
        if !comp_is_elemental(m, c) {
            return None;
        }
    }
    for &o in m.operands(root) {
        if !subgraph_elemental(m, o) {
            return None;
        }
    }
    if kind == KernelKind::Loop {
        if !comp_is_elemental(m, comp) {
            return None;
        }
        let leaves = inst_leaves(m, root).ok()?;
        if leaves.is_empty() || leaves.iter().any(|l| l.dims != leaves[0].dims) {
            return None;
        }
    }
    Some(kind)
}

/// Whether everything `id` depends on is elemental.
fn subgraph_elemental(m: &Module, id: InstId) -> bool {
    let mut stack = vec![id];
    let mut seen = std::collections::HashSet::new();
    while let Some(i) = stack.pop() {
        if !seen.insert(i) {
            continue;
        }
        if !is_elemental(m, i) {
            return false;
        }
        if matches!(
            m.opcode(i),
            Opcode::Reduce | Opcode::ReduceWindow | Opcode::Map
        ) {
            match m.comp_attr(i, &AttrKey::ToApply) {
                Some(c) if comp_is_elemental(m, c) => {}
                _ => return false,
            }
        }
        stack.extend_from_slice(m.operands(i));
    }
    true
}

impl<'m> Lower<'m> {
    fn new_buf(&mut self, kind: BufKind, shape: ArrayShape) -> BufId {
        let bytes = shape.num_elements().max(0) as u64 * shape.ty.byte_size() as u64;
        self.bufs.push(Buf {
            kind,
            shape,
            bytes,
            alias: None,
            region: self.region,
        });
        (self.bufs.len() - 1) as BufId
    }

    /// The buffers of a constant's literal, a global per leaf (numbered depth-first from `k`).
    fn const_tree(&mut self, id: InstId, l: &Literal, k: &mut u32) -> R<VTree> {
        Ok(match l {
            Literal::Array(a) => {
                if !crate::cg::supported_type(a.ty()) {
                    return Err(crate::cg::unsupported_type(a.ty()));
                }
                *k += 1;
                VTree::Leaf(self.new_buf(BufKind::Const(id, *k - 1), a.shape.clone()))
            }
            Literal::Tuple(es) => VTree::Tuple(
                es.iter()
                    .map(|e| self.const_tree(id, e, k))
                    .collect::<R<_>>()?,
            ),
        })
    }

    /// Temporary buffers for every leaf of `id`'s shape, as a tree.
    fn temps_for(&mut self, id: InstId) -> R<VTree> {
        let m = self.m;
        self.temps_for_shape(m.shape(id))
    }

    fn temps_for_shape(&mut self, s: &axle_ir::Shape) -> R<VTree> {
        let m = self.m;
        Ok(match s {
            axle_ir::Shape::Array(a) => {
                if !crate::cg::supported_type(a.ty) {
                    return Err(crate::cg::unsupported_type(a.ty));
                }
                VTree::Leaf(self.new_buf(BufKind::Temp, a.clone()))
            }
            axle_ir::Shape::Tuple(ids) => VTree::Tuple(
                ids.iter()
                    .map(|&i| self.temps_for_shape(m.shape_of(i)))
                    .collect::<R<_>>()?,
            ),
            axle_ir::Shape::Token | axle_ir::Shape::Opaque => VTree::Tuple(Vec::new()),
        })
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
        for id in order(m, comp)? {
            if vals.contains_key(&id) {
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
                Some(l) => {
                    let mut k = 0;
                    self.const_tree(id, l, &mut k)
                }
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
                match fusion_kernel_kind(m, c) {
                    Some(kind) => {
                        let params = m.params(c);
                        let bindings: Vec<(InstId, Vec<BufId>)> = params
                            .iter()
                            .zip(&args)
                            .filter(|(p, _)| !p.is_none())
                            .map(|(&p, a)| (p, a.leaves()))
                            .collect();
                        self.kernel(kind, m.root(c), id, bindings, out)
                    }
                    None => self.lower_comp(c, args, out),
                }
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
                        .find(|&t| !crate::cg::supported_type(t))
                    {
                        return crate::cg::unsupported_type(t);
                    }
                    Fail::Msg(format!(
                        "the cpu backend does not support {} instructions",
                        op.name()
                    ))
                })?;
                for c in applied_comps(m, id) {
                    if !comp_is_elemental(m, c) {
                        return Err(format!(
                            "computation {} cannot be applied per element by the cpu backend",
                            m.comp_name(c)
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
                self.kernel(kind, id, id, bindings, out)
            }
        }
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
        let mut outputs = Vec::new();
        let mut shapes = Vec::new();
        crate::elemental::leaves(m, m.shape(id), &mut shapes)?;
        for a in shapes {
            outputs.push(self.new_buf(BufKind::Temp, a));
        }
        let tree = match m.shape(id) {
            axle_ir::Shape::Tuple(_) => {
                VTree::Tuple(outputs.iter().map(|&b| VTree::Leaf(b)).collect())
            }
            _ => VTree::Leaf(outputs[0]),
        };
        out.push(Thunk::HostCall(Box::new(HostCall {
            call,
            inputs,
            outputs,
            origin: id,
        })));
        Ok(tree)
    }

    /// A view of the same bytes with `id`'s shape.
    fn alias_view(&mut self, _id: InstId, v: VTree) -> R<VTree> {
        match v {
            VTree::Leaf(b) => Ok(VTree::Leaf(b)),
            VTree::Tuple(_) => Err("reshape of a tuple".into()),
        }
    }

    fn kernel(
        &mut self,
        kind: KernelKind,
        root: InstId,
        origin: InstId,
        bindings: Vec<(InstId, Vec<BufId>)>,
        out: &mut Vec<Thunk>,
    ) -> R<VTree> {
        let m = self.m;
        let tree = self.temps_for(origin)?;
        let outputs = tree.leaves();
        let in_place_candidate = match kind {
            KernelKind::Dus | KernelKind::Scatter => {
                let op0 = m.operands(root)[0];
                bindings
                    .iter()
                    .find(|(i, bs)| *i == op0 && bs.len() == 1)
                    .map(|(_, bs)| bs[0])
            }
            _ => None,
        };
        let scratch = match kind {
            KernelKind::Sort | KernelKind::TopK => {
                let bytes = crate::kernels::sort_scratch_bytes(m, root)?;
                Some(self.new_buf(BufKind::Temp, ArrayShape::new(ElementType::U8, &[bytes])))
            }
            KernelKind::Gemm => {
                let geo = crate::gemm::gemm_geo(m, root, self.gemm).ok_or("dot is not a GEMM")?;
                Some(self.new_buf(
                    BufKind::Temp,
                    ArrayShape::new(ElementType::U8, &[geo.scratch_bytes()]),
                ))
            }
            _ => None,
        };
        out.push(Thunk::Kernel(Box::new(Kernel {
            kind,
            root,
            bindings,
            outputs,
            in_place_candidate,
            in_place: false,
            origin,
            scratch,
        })));
        Ok(tree)
    }

    fn enter_region(&mut self) -> u32 {
        let saved = self.region;
        self.next_region += 1;
        self.region = self.next_region;
        saved
    }

    fn lower_while(&mut self, id: InstId, init: VTree, out: &mut Vec<Thunk>) -> R<VTree> {
        let m = self.m;
        let cond_c = m
            .comp_attr(id, &AttrKey::Condition)
            .ok_or("while needs a condition")?;
        let body_c = m
            .comp_attr(id, &AttrKey::Body)
            .ok_or("while needs a body")?;
        let state_tree = self.temps_for(id)?;
        let state = state_tree.leaves();
        let init_leaves = init.leaves();
        if init_leaves.len() != state.len() {
            return Err("while operand does not match its shape".into());
        }
        let saved = self.enter_region();
        let mut cond = Vec::new();
        let p = self.lower_comp(cond_c, vec![state_tree.clone()], &mut cond)?;
        let pred = match p {
            VTree::Leaf(b) if self.bufs[b as usize].shape.ty == ElementType::Pred => b,
            _ => return Err("while condition must return a pred scalar".into()),
        };
        self.region = saved;
        let saved = self.enter_region();
        let mut body = Vec::new();
        let r = self.lower_comp(body_c, vec![state_tree.clone()], &mut body)?;
        let mut result = r.leaves();
        if result.len() != state.len() {
            return Err("while body result does not match the loop state".into());
        }
        // After each trip the results are copied into the state in order. A result that is a
        // state element an earlier copy overwrites (a body that swaps or rotates elements) is
        // saved at the end of the body first, so every element takes this trip's value.
        for k in 0..result.len() {
            let src = result[k];
            let clobbered = (0..k).any(|j| state[j] == src && result[j] != src);
            if clobbered {
                let shape = self.bufs[src as usize].shape.clone();
                let saved_copy = self.new_buf(BufKind::Temp, shape);
                body.push(Thunk::Copy {
                    src,
                    dst: saved_copy,
                });
                result[k] = saved_copy;
            }
        }
        self.region = saved;
        out.push(Thunk::While {
            init: init_leaves,
            state,
            cond,
            pred,
            body,
            result,
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
        let out_tree = self.temps_for(id)?;
        let outputs = out_tree.leaves();
        let mut lowered = Vec::new();
        for (k, &c) in branches.iter().enumerate() {
            let saved = self.enter_region();
            let mut thunks = Vec::new();
            let r = self.lower_comp(c, vec![args[k + 1].clone()], &mut thunks)?;
            self.region = saved;
            let rl = r.leaves();
            if rl.len() != outputs.len() {
                return Err("conditional branch result does not match its shape".into());
            }
            lowered.push((thunks, rl));
        }
        out.push(Thunk::Cond {
            selector,
            branches: lowered,
            outputs,
        });
        Ok(out_tree)
    }
}

/// Lowers the entry computation of `m`.
pub(crate) fn lower(m: &Module, gemm: &crate::gemm::GemmTarget) -> R<Program> {
    let entry = m.entry();
    if entry.is_none() {
        return Err("the module has no entry computation".into());
    }
    let mut l = Lower {
        m,
        gemm,
        bufs: Vec::new(),
        region: 0,
        next_region: 0,
        depth: 0,
    };
    let mut params = Vec::new();
    let mut args = Vec::new();
    for &p in m.params(entry) {
        if p.is_none() {
            return Err("the entry computation is missing a parameter".into());
        }
        let t = param_tree(&mut l, m.shape(p), &mut params)?;
        args.push(t);
    }
    let mut body = Vec::new();
    let root = l.lower_comp(entry, args, &mut body)?;
    let outputs: Vec<ArrayShape> = inst_leaves(m, m.root(entry))?;
    let root_leaves = root.leaves();
    let mut prog = Program {
        bufs: l.bufs,
        body,
        params,
        outputs,
        plan: BufferPlan::default(),
    };
    prog.finish(&root_leaves);
    Ok(prog)
}

fn param_tree(l: &mut Lower, s: &axle_ir::Shape, params: &mut Vec<ArrayShape>) -> R<VTree> {
    let m = l.m;
    Ok(match s {
        axle_ir::Shape::Array(a) => {
            // Complex parameters are bytes until a kernel reads them (and refuses them if it
            // cannot); host calls and copies take them as they are.
            if !crate::cg::supported_type(a.ty) && !a.ty.is_complex() {
                return Err(crate::cg::unsupported_type(a.ty));
            }
            params.push(a.clone());
            VTree::Leaf(l.new_buf(BufKind::Param(params.len() as u32 - 1), a.clone()))
        }
        axle_ir::Shape::Tuple(ids) => VTree::Tuple(
            ids.iter()
                .map(|&i| param_tree(l, m.shape_of(i), params))
                .collect::<R<_>>()?,
        ),
        _ => VTree::Tuple(Vec::new()),
    })
}

/// Per-buffer live range in program positions.
struct Live {
    def: Vec<u32>,
    last: Vec<u32>,
}

impl Program {
    /// Follows aliases to the buffer that holds the data.
    pub fn find(&self, mut b: BufId) -> BufId {
        while let Some(a) = self.bufs[b as usize].alias {
            b = a;
        }
        b
    }

    fn liveness(&self, root_leaves: &[BufId]) -> (Live, Vec<u32>) {
        let n = self.bufs.len();
        let mut live = Live {
            def: vec![u32::MAX; n],
            last: vec![0; n],
        };
        let mut kernel_pos = Vec::new();
        let mut pos = 0u32;
        walk(self, &self.body, &mut pos, &mut live, &mut kernel_pos);
        pos += 1;
        for &b in root_leaves {
            let b = self.find(b) as usize;
            live.last[b] = live.last[b].max(pos);
        }
        (live, kernel_pos)
    }

    /// Decides in-place updates and output buffers, then assigns temporaries.
    fn finish(&mut self, root_leaves: &[BufId]) {
        let (mut live, kernel_pos) = self.liveness(root_leaves);
        // In-place updates, in program order; merged buffers keep the longest range.
        let mut decisions: Vec<Option<(BufId, BufId, usize)>> = Vec::new();
        visit_kernels(&self.body, &mut |kern| {
            decisions.push(kern.in_place_candidate.and_then(|c| {
                let uses = kern
                    .bindings
                    .iter()
                    .flat_map(|(_, bs)| bs.iter())
                    .filter(|&&b| b == c)
                    .count();
                Some((c, *kern.outputs.first()?, uses))
            }));
        });
        let mut flags = vec![false; decisions.len()];
        for (i, d) in decisions.into_iter().enumerate() {
            let Some((cand, out, uses)) = d else { continue };
            let c = self.find(cand);
            let o = self.find(out);
            let cb = &self.bufs[c as usize];
            let ok = uses == 1
                && cb.kind == BufKind::Temp
                && live.last[c as usize] == kernel_pos[i]
                && cb.region == self.bufs[o as usize].region
                && c != o;
            if ok {
                self.bufs[o as usize].alias = Some(c);
                live.last[c as usize] = live.last[c as usize].max(live.last[o as usize]);
                live.def[c as usize] = live.def[c as usize].min(live.def[o as usize]);
                flags[i] = true;
            }
        }
        let mut k = 0;
        visit_kernels_mut(&mut self.body, &mut |kern| {
            kern.in_place = flags[k];
            k += 1;
        });
        // Outputs: a temporary of the entry region that is one root leaf lives in the output.
        let resolved: Vec<BufId> = root_leaves.iter().map(|&b| self.find(b)).collect();
        for (j, &b) in resolved.iter().enumerate() {
            let once = resolved.iter().filter(|&&x| x == b).count() == 1;
            let buf = &self.bufs[b as usize];
            if once && buf.kind == BufKind::Temp && buf.region == 0 {
                self.bufs[b as usize].kind = BufKind::Output(j as u32);
            } else {
                let shape = self.outputs[j].clone();
                let bytes = buf.bytes;
                self.bufs.push(Buf {
                    kind: BufKind::Output(j as u32),
                    shape,
                    bytes,
                    alias: None,
                    region: 0,
                });
                let dst = (self.bufs.len() - 1) as BufId;
                self.body.push(Thunk::Copy { src: b, dst });
            }
        }
        // Temporaries: intervals of the buffers that hold data.
        let mut intervals = Vec::new();
        for (i, b) in self.bufs.iter().enumerate() {
            if b.alias.is_some() || b.kind != BufKind::Temp {
                continue;
            }
            let def = live.def[i];
            if def == u32::MAX {
                continue;
            }
            intervals.push(Interval {
                buf: i as BufId,
                start: def,
                end: live.last[i].max(def),
                bytes: b.bytes,
            });
        }
        self.plan = assign(self.bufs.len(), &intervals);
    }
}

fn use_at(p: &Program, b: BufId, pos: u32, live: &mut Live) {
    let b = p.find(b) as usize;
    if live.def[b] == u32::MAX {
        live.def[b] = pos;
    }
    live.last[b] = live.last[b].max(pos);
}

fn def_at(p: &Program, b: BufId, pos: u32, live: &mut Live) {
    let b = p.find(b) as usize;
    live.def[b] = live.def[b].min(pos);
    live.last[b] = live.last[b].max(pos);
}

fn walk(p: &Program, thunks: &[Thunk], pos: &mut u32, live: &mut Live, kpos: &mut Vec<u32>) {
    for t in thunks {
        *pos += 1;
        let here = *pos;
        match t {
            Thunk::Kernel(k) => {
                kpos.push(here);
                for (_, bs) in &k.bindings {
                    for &b in bs {
                        use_at(p, b, here, live);
                    }
                }
                for &b in k.outputs.iter().chain(k.scratch.iter()) {
                    def_at(p, b, here, live);
                }
            }
            Thunk::Copy { src, dst } => {
                use_at(p, *src, here, live);
                def_at(p, *dst, here, live);
            }
            Thunk::While {
                init,
                state,
                cond,
                pred,
                body,
                result,
            } => {
                for &b in init {
                    use_at(p, b, here, live);
                }
                for &b in state {
                    def_at(p, b, here, live);
                }
                walk(p, cond, pos, live, kpos);
                *pos += 1;
                use_at(p, *pred, *pos, live);
                walk(p, body, pos, live, kpos);
                *pos += 1;
                for &b in result {
                    use_at(p, b, *pos, live);
                }
                *pos += 1;
                for &b in state {
                    use_at(p, b, *pos, live);
                }
            }
            Thunk::Cond {
                selector,
                branches,
                outputs,
            } => {
                use_at(p, *selector, here, live);
                for &b in outputs {
                    def_at(p, b, here, live);
                }
                for (thunks, res) in branches {
                    walk(p, thunks, pos, live, kpos);
                    *pos += 1;
                    for &b in res {
                        use_at(p, b, *pos, live);
                    }
                }
                *pos += 1;
                for &b in outputs {
                    use_at(p, b, *pos, live);
                }
            }
            Thunk::HostCall(h) => {
                for &b in &h.inputs {
                    use_at(p, b, here, live);
                }
                for &b in &h.outputs {
                    def_at(p, b, here, live);
                }
            }
        }
    }
}

fn visit_kernels(thunks: &[Thunk], f: &mut dyn FnMut(&Kernel)) {
    for t in thunks {
        match t {
            Thunk::Kernel(k) => f(k),
            Thunk::Copy { .. } | Thunk::HostCall(_) => {}
            Thunk::While { cond, body, .. } => {
                visit_kernels(cond, f);
                visit_kernels(body, f);
            }
            Thunk::Cond { branches, .. } => {
                for (b, _) in branches {
                    visit_kernels(b, f);
                }
            }
        }
    }
}

fn visit_kernels_mut(thunks: &mut [Thunk], f: &mut dyn FnMut(&mut Kernel)) {
    for t in thunks {
        match t {
            Thunk::Kernel(k) => f(k),
            Thunk::Copy { .. } | Thunk::HostCall(_) => {}
            Thunk::While { cond, body, .. } => {
                visit_kernels_mut(cond, f);
                visit_kernels_mut(body, f);
            }
            Thunk::Cond { branches, .. } => {
                for (b, _) in branches {
                    visit_kernels_mut(b, f);
                }
            }
        }
    }
}
