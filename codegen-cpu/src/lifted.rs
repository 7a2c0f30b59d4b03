//! Lifted constants: the scalar float constants of a kernel's subgraph that its function reads
//! from an argument instead of holding them as immediates, so kernels that differ only in such
//! constants (a layer stack's per-layer scales, every layer with its own constant) are one
//! function ([`crate::signature`] names a lifted constant by its position, not its value).
//!
//! Invariants:
//! - The list is a function of the kernel's structure: a depth-first walk from the root over
//!   operands in order, stopping at bound instructions, each constant listed at its first
//!   visit. Two kernels with one signature therefore list their lifted constants in the same
//!   positions, and the entry code passes each kernel its own values there.
//! - A constant is lifted only where its value cannot change the code beyond being an operand:
//!   a one-element float array whose every use in the kernel is an add, subtract, multiply,
//!   maximum, minimum, compare, select or clamp, directly or through a broadcast. A value that
//!   LLVM would fold into a cheaper operation (a divisor, an exponent, a reduction's initial
//!   value, a shift) stays an immediate, so lifting costs a register, not an operation.
//! - Values are the constant's bits: the kernel loads them at entry, once, so the arithmetic
//!   is the same as with the immediate and results are bit-identical.

use std::collections::{HashMap, HashSet};

use axle_ir::{InstId, Literal, Module, Opcode};

use crate::buf::BufId;

/// The scalar constants kernel `root` reads through arguments, in walk order (see the module
/// docs); `bindings` are the instructions bound to buffers, where the walk stops.
pub(crate) fn lifted_constants(
    m: &Module,
    root: InstId,
    bindings: &[(InstId, Vec<BufId>)],
) -> Vec<InstId> {
    let bound: HashSet<InstId> = bindings.iter().map(|(i, _)| *i).collect();
    let mut seen = HashSet::new();
    let mut users: HashMap<InstId, Vec<InstId>> = HashMap::new();
    let mut order = Vec::new();
    // Depth-first, operands in order; an explicit stack, since chains may be thousands deep.
    let mut stack = vec![root];
    seen.insert(root);
    while let Some(id) = stack.pop() {
        if bound.contains(&id) {
            continue;
        }
        if m.opcode(id) == Opcode::Constant {
            order.push(id);
            continue;
        }
        for &o in m.operands(id).iter().rev() {
            users.entry(o).or_default().push(id);
            if seen.insert(o) {
                stack.push(o);
            }
        }
    }
    order
        .into_iter()
        .filter(|&c| is_scalar_float(m, c) && uses_as_operand(m, c, &users))
        .collect()
}

/// Whether constant `c` is a one-element float array.
fn is_scalar_float(m: &Module, c: InstId) -> bool {
    match m.literal(c) {
        Some(Literal::Array(a)) => a.len() == 1 && a.ty().is_float() && !a.ty().is_complex(),
        _ => false,
    }
}

/// Whether every use of `c` in the kernel (`users`) takes it as a plain operand (see the
/// module docs), directly or through a broadcast.
fn uses_as_operand(m: &Module, c: InstId, users: &HashMap<InstId, Vec<InstId>>) -> bool {
    let plain = |u: InstId| {
        matches!(
            m.opcode(u),
            Opcode::Add
                | Opcode::Subtract
                | Opcode::Multiply
                | Opcode::Maximum
                | Opcode::Minimum
                | Opcode::Compare
                | Opcode::Select
                | Opcode::Clamp
        )
    };
    let Some(us) = users.get(&c) else {
        return false;
    };
    us.iter().all(|&u| {
        plain(u)
            || m.opcode(u) == Opcode::Broadcast
                && users
                    .get(&u)
                    .is_some_and(|bs| !bs.is_empty() && bs.iter().all(|&b| plain(b)))
    })
}
