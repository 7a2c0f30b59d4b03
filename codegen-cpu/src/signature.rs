//! Structural signatures of kernels, so structurally identical kernels share one LLVM function.
//!
//! A kernel's code depends only on the subgraph it computes (opcodes, shapes, layouts,
//! attributes, constants, applied computations), on which instructions are bound to buffers,
//! and on its kind; the buffers themselves are arguments. Two kernels with the same signature
//! are the same function. Large unrolled graphs (layer stacks, while bodies) repeat a handful of
//! kernels many times, so this keeps compile time proportional to the distinct kernels.

use std::collections::HashMap;
use std::fmt::Write;

use axle_ir::{AttrKey, AttrValue, CompId, InstId, Module, Shape};

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
        "{:?} in_place={} scratch={} outs={} |",
        k.kind,
        k.in_place,
        k.scratch.is_some(),
        k.outputs.len()
    );
    for (i, (inst, bufs)) in k.bindings.iter().enumerate() {
        local.insert(*inst, format!("B{i}"));
        let _ = write!(out, "B{i}:{}:", bufs.len());
        shape_sig(m, m.shape(*inst), &mut out);
        out.push(';');
    }
    sig.node(k.root, &mut local, &mut out);
    out
}
