//! When the executor may free a host computation's buffers: [`release_points`] gives, per step
//! of a computation's order, the values whose last reader that step is, and [`Holders`] counts,
//! per device buffer, the live values that hold it, so a buffer shared by several values (a
//! tuple and its operands, a `get-tuple-element` and its tuple, an `opt-barrier`, a `while`
//! state leaf passed through unchanged) is freed only when the last of them dies.
//!
//! This is the schedule crate's liveness (`axle_schedule::liveness`: a value is live from its
//! definition to its last read) for the executor's one-buffer-per-value model, in the order
//! the module's schedule gives (the memory scheduler's, so few values are live at once).
//!
//! Invariants: a value's reads are its users' operands in the computation and the operands
//! of the kernels computing them; it dies after its last reader's step, or after its own step
//! when nothing reads it. The computation's root never dies (the caller takes its buffers).
//! Each value appears in at most one step's list. [`Holders::release`] gives a buffer back
//! exactly once: when the count of values holding it falls to zero.

use std::collections::HashMap;

use axle_ir::{InstId, Module};

use crate::device::BufferKey;
use crate::kernels::KernelInfo;

/// Per position of `order` (the instructions of a computation whose root is `root`, in the
/// order they run), the values that die after that step: read last there, or never read and
/// made there. `by_inst` gives the positions in `kernels` of the kernels computing each
/// instruction (their operands are reads too).
pub fn release_points(
    m: &Module,
    root: InstId,
    order: &[InstId],
    kernels: &[KernelInfo],
    by_inst: &HashMap<InstId, Vec<usize>>,
) -> Vec<Vec<InstId>> {
    let mut last: HashMap<InstId, usize> = HashMap::with_capacity(order.len());
    for (pos, &id) in order.iter().enumerate() {
        last.insert(id, pos);
        let kernel_reads = by_inst
            .get(&id)
            .into_iter()
            .flatten()
            .flat_map(|&k| kernels[k].operands.iter());
        for &o in m.operands(id).iter().chain(kernel_reads) {
            // An operand is defined at an earlier step, so its entry exists.
            if let Some(p) = last.get_mut(&o) {
                *p = pos;
            }
        }
    }
    let mut dies = vec![Vec::new(); order.len()];
    for &id in order {
        if id != root {
            dies[last[&id]].push(id);
        }
    }
    dies
}

/// How many live values hold each device buffer of one computation's run.
#[derive(Default)]
pub struct Holders {
    counts: HashMap<BufferKey, u32>,
}

impl Holders {
    /// A value holding `keys` came alive (a key it repeats counts once per repeat).
    pub fn hold(&mut self, keys: &[BufferKey]) {
        for &k in keys {
            *self.counts.entry(k).or_default() += 1;
        }
    }

    /// A value holding `keys` died: gives the buffers no live value holds any more, each once.
    pub fn release(&mut self, keys: &[BufferKey]) -> Vec<BufferKey> {
        let mut free = Vec::new();
        for &k in keys {
            if let Some(n) = self.counts.get_mut(&k) {
                *n -= 1;
                if *n == 0 {
                    self.counts.remove(&k);
                    free.push(k);
                }
            }
        }
        free
    }
}
