//! The schedule side table: for each computation, the order its instructions run in.
//!
//! A [`Schedule`] holds one sequence per computation, indexed by [`CompId`]. A module carries at
//! most one (see [`Module::schedule`]); the printer then writes `is_scheduled=true` in the header
//! and every computation's instructions in its sequence, as XLA prints scheduled modules, and the
//! parser reads such a header back by taking each computation's text order as its sequence.
//!
//! Invariants of a schedule attached to a module (the verifier checks them):
//! - every live computation has a sequence;
//! - a sequence lists exactly the live instructions of its computation, each once;
//! - every instruction comes after its operands and its control predecessors.
//!
//! Keeping it consistent with the module (DESIGN §2, derived data is tagged with the epoch):
//! the module records the epoch at which its schedule was set. Any change that bumps the epoch
//! (a [`crate::Rewriter`], [`Module::bump_epoch`]) makes the schedule *stale*:
//! [`Module::schedule`] no longer returns it, and nothing prints or uses it, until
//! [`Module::update_schedule`] repairs it (XLA's `HloSchedule::Update`: dead instructions leave,
//! survivors keep their relative order, new instructions go right before their first scheduled
//! user, or at the end). The pass manager repairs the schedule after every pass that changed a
//! scheduled module; compaction renumbers it along with the instructions and keeps it fresh.

use crate::module::{CompId, InstId, Module};

/// The order of every computation's instructions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    seqs: Vec<Option<Vec<InstId>>>,
}

impl Schedule {
    /// An empty schedule (no computation sequenced yet).
    pub fn new() -> Schedule {
        Schedule::default()
    }

    /// The sequence of computation `c`, if it has one.
    pub fn sequence(&self, c: CompId) -> Option<&[InstId]> {
        self.seqs.get(c.index()).and_then(|s| s.as_deref())
    }

    /// Sets the sequence of computation `c`.
    pub fn set_sequence(&mut self, c: CompId, seq: Vec<InstId>) {
        if self.seqs.len() <= c.index() {
            self.seqs.resize(c.index() + 1, None);
        }
        self.seqs[c.index()] = Some(seq);
    }

    /// Computations with a sequence, in id order.
    pub fn computations(&self) -> impl Iterator<Item = CompId> + '_ {
        self.seqs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.is_some())
            .map(|(c, _)| CompId::new(c))
    }

    /// The position of every sequenced instruction in its computation's sequence, indexed by
    /// instruction id (`u32::MAX` for instructions not in any sequence); `capacity` is the
    /// module's `inst_capacity()`.
    pub fn positions(&self, capacity: usize) -> Vec<u32> {
        let mut pos = vec![u32::MAX; capacity];
        for s in self.seqs.iter().flatten() {
            for (k, &i) in s.iter().enumerate() {
                if i.index() < capacity {
                    pos[i.index()] = k as u32;
                }
            }
        }
        pos
    }

    /// Renumbers the schedule after compaction: removed instructions and computations leave.
    pub(crate) fn remap(&self, insts: &[InstId], comps: &[CompId], n_comps: usize) -> Schedule {
        let mut seqs = vec![None; n_comps];
        for (c, s) in self.seqs.iter().enumerate() {
            let (Some(s), Some(&nc)) = (s, comps.get(c)) else {
                continue;
            };
            if nc.is_none() {
                continue;
            }
            let v: Vec<InstId> = s
                .iter()
                .filter(|i| i.index() < insts.len())
                .map(|i| insts[i.index()])
                .filter(|i| !i.is_none())
                .collect();
            seqs[nc.index()] = Some(v);
        }
        Schedule { seqs }
    }

    /// The schedule repaired against `m` (see the module docs): each live computation's
    /// sequence keeps its surviving instructions in order, new instructions are placed right
    /// before their first user in that order (or at the end), and computations without a
    /// sequence get a topological order of their instructions.
    pub fn updated(&self, m: &Module) -> Schedule {
        let by_comp = m.insts_by_comp();
        let cap = m.inst_capacity();
        let mut in_seq = vec![false; cap];
        let mut state = vec![0u8; cap];
        let mut out = Schedule {
            seqs: vec![None; m.comp_capacity()],
        };
        for c in m.computations() {
            let mut candidate: Vec<InstId> = Vec::with_capacity(by_comp[c.index()].len());
            if let Some(s) = self.sequence(c) {
                for &i in s {
                    if m.is_live(i) && m.parent(i) == c && !in_seq[i.index()] {
                        in_seq[i.index()] = true;
                        candidate.push(i);
                    }
                }
            }
            for &i in &by_comp[c.index()] {
                if !in_seq[i.index()] {
                    candidate.push(i);
                }
            }
            // The stable topological fix keeps a valid order as it is and pulls every new
            // operand in right before the first instruction that needs it.
            let order = crate::printer::topo_order_with(m, &candidate, &mut state);
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
            for &i in &by_comp[c.index()] {
                if seen[i.index()] != stamp {
                    errs.push((c, format!("the schedule does not list %{}", m.name(i))));
                }
            }
        }
        errs
    }
}
