//! A [`Schedule`] against the module it orders: the repair after rewrites
//! ([`Schedule::updated`]) and the check of its invariants ([`Schedule::violations`]), both
//! described in [`crate::schedule`].
//!
//! Invariant: both read the module only; `updated` returns a schedule satisfying every
//! invariant `violations` checks.

use crate::ids::{CompId, InstId};
use crate::module::Module;
use crate::schedule::Schedule;

impl Schedule {
    /// The schedule repaired against `m` (see the module docs): each live computation's
    /// sequence keeps its surviving instructions in order, new instructions are placed right
    /// before their first user in that order (or at the end), and computations without a
    /// sequence get a topological order of their instructions.
    pub fn updated(&self, m: &Module) -> Schedule {
        let by_comp = m.insts_by_comp();
        let cap = m.inst_capacity();
        let mut in_seq = vec![false; cap];
        let mut marks = crate::traversal::Marks::with_capacity(cap);
        let mut out = Schedule {
            seqs: vec![None; m.comp_capacity()],
        };
        for c in m.computations() {
            let mut candidate: Vec<InstId> = Vec::with_capacity(by_comp[c].len());
            if let Some(s) = self.sequence(c) {
                for &i in s {
                    if m.is_live(i) && m.parent(i) == c && !in_seq[i.index()] {
                        in_seq[i.index()] = true;
                        candidate.push(i);
                    }
                }
            }
            for &i in &by_comp[c] {
                if !in_seq[i.index()] {
                    candidate.push(i);
                }
            }
            // The stable topological fix keeps a valid order as it is and pulls every new
            // operand in right before the first instruction that needs it.
            let order = crate::traversal::topo_order_with(m, &candidate, &mut marks);
            out.seqs[c.index()] = Some(order);
        }
        out
    }

    /// Every violation of the schedule invariants against `m`, as `(computation, message)`.
    pub fn violations(&self, m: &Module) -> Vec<(CompId, String)> {
        let mut errs = Vec::new();
        let cap = m.inst_capacity();
        // 0: not seen, 1: seen in the current computation's sequence.
        let mut seen = vec![0u32; cap];
        let by_comp = m.insts_by_comp();
        for c in m.computations() {
            let Some(seq) = self.sequence(c) else {
                errs.push((
                    c,
                    "the module is scheduled but this computation has no sequence".into(),
                ));
                continue;
            };
            let stamp = c.index() as u32 + 1;
            for &i in seq {
                if i.is_none() || i.index() >= cap || !m.is_live(i) || m.parent(i) != c {
                    errs.push((
                        c,
                        format!("the schedule lists {i:?}, which is not a live instruction of this computation"),
                    ));
                    continue;
                }
                if seen[i.index()] == stamp {
                    errs.push((c, format!("the schedule lists %{} twice", m.name(i))));
                    continue;
                }
                for &d in m.operands(i).iter().chain(m.control_predecessors(i)) {
                    if !d.is_none()
                        && d.index() < cap
                        && m.is_live(d)
                        && m.parent(d) == c
                        && seen[d.index()] != stamp
                    {
                        errs.push((
                            c,
                            format!(
                                "the schedule runs %{} before %{}, which it depends on",
                                m.name(i),
                                m.name(d)
                            ),
                        ));
                    }
                }
                seen[i.index()] = stamp;
            }
            for &i in &by_comp[c] {
                if seen[i.index()] != stamp {
                    errs.push((c, format!("the schedule does not list %{}", m.name(i))));
                }
            }
        }
        errs
    }
}
