//! The launch-plan executor: runs a module's kernels ([`crate::plan_kernels`]) on any
//! [`Device`], in program order, each on the grid and block of its launch plan.
//!
//! A value of the entry computation is a list of buffers, one per array leaf (depth-first):
//! a parameter's are the caller's, a constant's are uploaded from its literal, a tuple's are
//! its operands' (an `opt-barrier`'s too) and a `get-tuple-element`'s a part of its operand's
//! (no copies); an
//! instruction with a kernel gets fresh output buffers, which the kernel writes (an instruction
//! computed by several consecutive kernels gets them once, before its first kernel, and its
//! scratch buffers, [`KernelInfo::scratch`], for as long as its kernels run); an instruction
//! whose every leaf is zero-sized (no kernel, no launch) gets empty buffers.
//!
//! Invariants: a run frees every buffer it made except the result's, also when it fails; the
//! result's buffers are all made by the run and pairwise distinct (a result leaf that is an
//! argument, or that appears twice, is copied), so the caller owns each exactly once. A
//! constant whose value the text elided is refused when the module is compiled, with an error
//! naming it. Runs are deterministic: kernels run one after another in a fixed order.

use std::collections::HashMap;

use axle_codegen_llvm::elemental::inst_leaves;
use axle_codegen_llvm::error::{at, finish, Fail};
use axle_ir::{AttrKey, InstId, Literal, Module, Opcode, Shape};

use crate::device::{BufferKey, Device, DeviceMemory};
use crate::kernels::{plan_kernels, KernelInfo};
use crate::CodegenError;

/// A module compiled for device `D`: its kernels, their launch plans, and the program the
/// device loaded.
pub struct Executable<D: Device> {
    module: Module,
    kernels: Vec<KernelInfo>,
    program: D::Program,
}

/// The array leaves of a shape, counted.
fn leaf_count(m: &Module, s: &Shape) -> usize {
    match s {
        Shape::Array(_) => 1,
        Shape::Tuple(es) => es.iter().map(|&e| leaf_count(m, m.shape_of(e))).sum(),
        Shape::Token | Shape::Opaque => 0,
    }
}

/// The array leaves of a literal, depth-first.
fn literal_leaves<'a>(l: &'a Literal, out: &mut Vec<&'a [u8]>) {
    match l {
        Literal::Array(a) => out.push(&a.data),
        Literal::Tuple(es) => es.iter().for_each(|e| literal_leaves(e, out)),
    }
}

impl<D: Device> Executable<D> {
    /// Plans the kernels of `m` (verified, after its pipeline) and loads them on the device of
    /// `mem`; an error names the first instruction the backend does not support.
    pub fn compile(mem: &DeviceMemory<D>, m: Module) -> Result<Self, CodegenError> {
        axle_ir::check_runnable(&m).map_err(|e| CodegenError::general(&m.name, e.to_string()))?;
        let kernels = plan_kernels(&m)?;
        for id in m.comp_insts(m.entry()) {
            if m.opcode(id) == Opcode::Constant && m.literal(id).is_none() {
                let f = Fail::Msg("the constant's value was elided from the text".into());
                return Err(finish(&m, at(&m, id, f)));
            }
        }
        let program = mem.device().load(&m, &kernels)?;
        Ok(Executable {
            module: m,
            kernels,
            program,
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

    /// Runs the module on `args` (per entry parameter, in order, the buffers of its array
    /// leaves) and returns the buffers of the result's array leaves, which the caller owns.
    pub fn run(
        &self,
        mem: &DeviceMemory<D>,
        args: &[Vec<BufferKey>],
    ) -> Result<Vec<BufferKey>, String> {
        let mut made = Vec::new();
        let result = self.run_with(mem, args, &mut made);
        let keep: Vec<BufferKey> = result.as_ref().cloned().unwrap_or_default();
        for k in made {
            if !keep.contains(&k) {
                // Every buffer in `made` is live and freed once.
                let _ = mem.free(k);
            }
        }
        result
    }

    fn run_with(
        &self,
        mem: &DeviceMemory<D>,
        args: &[Vec<BufferKey>],
        made: &mut Vec<BufferKey>,
    ) -> Result<Vec<BufferKey>, String> {
        let m = &self.module;
        let entry = m.entry();
        let mut by_inst: HashMap<InstId, Vec<usize>> = HashMap::new();
        for (k, info) in self.kernels.iter().enumerate() {
            by_inst.entry(info.inst).or_default().push(k);
        }
        let mut values: HashMap<InstId, Vec<BufferKey>> = HashMap::new();
        let order = axle_ir::printer::topo_order(m, &m.comp_insts(entry));
        let err =
            |id: InstId, msg: String| format!("%{} ({}): {msg}", m.name(id), m.opcode(id).name());
        for id in order {
            let operand = |k: usize| -> Result<&Vec<BufferKey>, String> {
                let o = m
                    .operands(id)
                    .get(k)
                    .ok_or_else(|| err(id, "missing operand".into()))?;
                values
                    .get(o)
                    .ok_or_else(|| err(id, format!("operand %{} has no value", m.name(*o))))
            };
            let bufs = if let Some(ks) = by_inst.get(&id) {
                let mut outs = Vec::new();
                for leaf in inst_leaves(m, id).map_err(|e| err(id, finish(m, e).message))? {
                    let bytes = leaf.num_elements().max(0) as usize * leaf.ty.byte_size();
                    let key = mem.alloc(bytes).map_err(|e| err(id, e))?;
                    made.push(key);
                    outs.push(key);
                }
                let mut scratch = Vec::new();
                for &bytes in &self.kernels[ks[0]].scratch {
                    let key = mem.alloc(bytes as usize).map_err(|e| err(id, e))?;
                    scratch.push(key);
                }
                let launched = ks.iter().try_for_each(|&k| {
                    let info = &self.kernels[k];
                    if info.scratch != self.kernels[ks[0]].scratch {
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
                    mem.launch(&self.program, info, k, &call)
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
                        let lit = m.literal(id).ok_or_else(|| {
                            err(id, "the constant's value was elided from the text".into())
                        })?;
                        let mut leaves = Vec::new();
                        literal_leaves(lit, &mut leaves);
                        let mut out = Vec::with_capacity(leaves.len());
                        for bytes in leaves {
                            let key = mem.upload(bytes).map_err(|e| err(id, e))?;
                            made.push(key);
                            out.push(key);
                        }
                        out
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
                    _ => {
                        // No kernel: only a value with nothing to compute.
                        let leaves =
                            inst_leaves(m, id).map_err(|e| err(id, finish(m, e).message))?;
                        if leaves.iter().any(|l| l.num_elements() != 0) {
                            return Err(err(id, "no kernel computes this instruction".into()));
                        }
                        let mut out = Vec::with_capacity(leaves.len());
                        for _ in leaves {
                            let key = mem.alloc(0).map_err(|e| err(id, e))?;
                            made.push(key);
                            out.push(key);
                        }
                        out
                    }
                }
            };
            values.insert(id, bufs);
        }
        let root = m.root(entry);
        let leaves = values
            .get(&root)
            .cloned()
            .ok_or_else(|| err(root, "the root has no value".into()))?;
        // The result owns each of its buffers once: arguments and repeats are copied.
        let mut out: Vec<BufferKey> = Vec::with_capacity(leaves.len());
        for key in leaves {
            if made.contains(&key) && !out.contains(&key) {
                out.push(key);
            } else {
                let copy = mem.upload(&mem.download(key)?)?;
                made.push(copy);
                out.push(copy);
            }
        }
        Ok(out)
    }
}
