//! Structural signatures of kernels, so structurally identical kernels share one LLVM function.
//!
//! A kernel's code depends only on the subgraph it computes (opcodes, shapes, layouts,
//! attributes, constants, applied computations), on which instructions are bound to buffers,
//! and on its kind; the buffers themselves are arguments, and so are its lifted constants
//! ([`crate::lifted`]), named by position. Two kernels with the same signature
//! are the same function. Large unrolled graphs (layer stacks, while bodies) repeat a handful of
//! kernels many times, so this keeps compile time proportional to the distinct kernels.

use std::collections::HashMap;
use std::fmt::Write;

use axle_ir::{AttrKey, AttrValue, CompId, InstId, Module, Shape};

use crate::fused::KernelPlan;
use crate::lower::Kernel;

fn shape_sig(m: &Module, s: &Shape, out: &mut String) {
    match s {
        Shape::Array(a) => {
            let _ = write!(out, "{}{:?}", a.ty.name(), a.dims);
        }
        Shape::Tuple(ids) => {
            out.push('(');
            for &i in ids.iter() {
                shape_sig(m, m.shape_of(i), out);
                out.push(',');
            }
            out.push(')');
        }
        Shape::Token => out.push_str("token"),
        Shape::Opaque => out.push_str("opaque"),
    }
}

/// Signatures of computations applied per element, memoized.
struct Sig<'m> {
    m: &'m Module,
    comps: HashMap<CompId, String>,
}

impl Sig<'_> {
    fn comp(&mut self, c: CompId) -> String {
        if let Some(s) = self.comps.get(&c) {
            return s.clone();
        }
        let m = self.m;
        let mut local = HashMap::new();
        for (k, &p) in m.params(c).iter().enumerate() {
            local.insert(p, format!("P{k}"));
        }
        let mut out = String::new();
        self.node(m.root(c), &mut local, &mut out);
        self.comps.insert(c, out.clone());
        out
    }

    /// Appends the signature of `id`'s subgraph; `local` names instructions already seen (and
    /// the bound ones).
    fn node(&mut self, id: InstId, local: &mut HashMap<InstId, String>, out: &mut String) {
        if let Some(n) = local.get(&id) {
            out.push_str(n);
            return;
        }
        let m = self.m;
        let name = format!("#{}", local.len());
        let _ = write!(out, "{name}={}:", m.opcode(id).name());
        shape_sig(m, m.shape(id), out);
        let _ = write!(out, "{:?}", m.layout_of(m.layout_id(id)));
        for (k, v) in m.attrs(id) {
            match k {
                AttrKey::Metadata
                | AttrKey::FrontendAttributes
                | AttrKey::Sharding
                | AttrKey::BackendConfig
                | AttrKey::ControlPredecessors => continue,
                _ => {}
            }
            let _ = write!(out, " {}=", k.name());
            match v {
                AttrValue::Comp(c) => {
                    let s = self.comp(*c);
                    let _ = write!(out, "{{{s}}}");
                }
                AttrValue::Comps(cs) => {
                    for c in cs.iter() {
                        let s = self.comp(*c);
                        let _ = write!(out, "{{{s}}}");
                    }
                }
                other => {
                    let _ = write!(out, "{other:?}");
                }
            }
        }
        if let Some(l) = m.constant(id) {
            let _ = write!(out, " value={l:?}");
        }
        out.push('(');
        for &o in m.operands(id) {
            // Operand chains may be thousands deep (see `axle_ir::stack`).
            axle_ir::stack::deep(|| self.node(o, local, out));
            out.push(',');
        }
        out.push(')');
        local.insert(id, name);
    }
}

/// The signature of kernel `k`.
pub(crate) fn kernel_signature(m: &Module, k: &Kernel) -> String {
    let mut sig = Sig {
        m,
        comps: HashMap::new(),
    };
    let mut local = HashMap::new();
    let mut out = format!(
        "{:?} in_place={} scratch={} outs={} views={} |",
        k.kind,
        k.in_place,
        k.scratch.len(),
        k.outputs.len(),
        k.views.len()
    );
    for (i, (inst, bufs)) in k.bindings.iter().enumerate() {
        local.insert(*inst, format!("B{i}"));
        let _ = write!(out, "B{i}:{}:", bufs.len());
        shape_sig(m, m.shape(*inst), &mut out);
        out.push(';');
    }
    // Lifted constants by position and type, not value.
    for (i, &c) in k.lifted.iter().enumerate() {
        let mut name = format!("L{i}:");
        shape_sig(m, m.shape(c), &mut name);
        local.insert(c, name);
    }
    gemm_operand_names(m, k, &mut local);
    sig.node(k.root, &mut local, &mut out);
    // The plan, its instructions named as in the subgraph above.
    let name = |i: &InstId| local.get(i).cloned().unwrap_or_else(|| "?".into());
    match &k.plan {
        KernelPlan::Plain => {}
        KernelPlan::Row(p) => {
            let _ = write!(out, " | rows {:?} of {:?}:", p.rows, p.full);
            for pass in &p.passes {
                let names: Vec<String> = pass.iter().map(name).collect();
                let _ = write!(out, " [{}]", names.join(","));
            }
            for (pass, v) in &p.cached {
                let _ = write!(out, " cache {} in {pass}", name(v));
            }
        }
        KernelPlan::Epilogue(e) => {
            let _ = write!(out, " | epilogue of {} into {:?}", name(&e.core), e.c_leaf);
        }
    }
    out
}

/// Names a GEMM's operands by what its code depends on: the binding its view starts in, its
/// shape and its strides ([`crate::gemm::operand_view`]), not by their subgraphs, whose slice
/// starts go to the entry code as pointer offsets ([`crate::lower::Kernel::views`]). An
/// operand something else in the kernel also reads (an epilogue computing it element by
/// element) keeps its subgraph, starts included.
fn gemm_operand_names(m: &Module, k: &Kernel, local: &mut HashMap<InstId, String>) {
    let Some(core) = crate::lower::gemm_core(m, k.kind, &k.plan, k.root) else {
        return;
    };
    // An unfused dot reads bindings only (and its computation may be the whole program).
    if m.operands(core).iter().all(|o| local.contains_key(o)) {
        return;
    }
    let others = m
        .root_reach(m.parent(core))
        .into_iter()
        .filter(|&i| i != core)
        .flat_map(|i| m.operands(i).to_vec())
        .collect::<std::collections::HashSet<_>>();
    let arrays = crate::lower::bound_arrays(&k.bindings);
    let bound = |x: InstId| arrays.contains(&x);
    for (j, &o) in m.operands(core).iter().enumerate() {
        if others.contains(&o) || local.contains_key(&o) {
            continue;
        }
        let v = crate::gemm::operand_view(m, o, &bound);
        let Some(base) = local.get(&v.base) else {
            continue;
        };
        let mut name = format!("V{j}={base}:");
        shape_sig(m, m.shape(o), &mut name);
        let _ = write!(name, "{:?}", v.strides);
        local.insert(o, name);
    }
}
