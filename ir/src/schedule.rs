//! The schedule side table: for each computation, the order its instructions run in.
//!
//! A [`Schedule`] holds one sequence per computation, indexed by [`CompId`]. A module carries
//! at most one (see [`crate::Module::schedule`]); the printer then writes `is_scheduled=true`
//! in the header and every computation's instructions in its sequence, as XLA prints scheduled
//! modules, and the parser reads such a header back by taking each computation's text order as
//! its sequence. Checking and repairing a schedule against its module is
//! `schedule_check.rs`'s (`Schedule::updated`, `Schedule::violations`).
//!
//! Invariants of a schedule attached to a module (the verifier checks them):
//! - every live computation has a sequence;
//! - a sequence lists exactly the live instructions of its computation, each once;
//! - every instruction comes after its operands and its control predecessors.
//!
//! Keeping it consistent with the module (DESIGN §2, derived data is tagged with the epoch):
//! the module records the epoch at which its schedule was set. Any change that bumps the epoch
//! (a [`crate::Rewriter`], [`crate::Module::bump_epoch`]) makes the schedule *stale*:
//! [`crate::Module::schedule`] no longer returns it, and nothing prints or uses it, until
//! [`crate::Module::update_schedule`] repairs it (XLA's `HloSchedule::Update`: dead
//! instructions leave, survivors keep their relative order, new instructions go right before
//! their first scheduled user, or at the end). The pass manager repairs the schedule after every pass that changed a
//! scheduled module; compaction renumbers it along with the instructions and keeps it fresh.

use crate::ids::{CompId, InstId};

/// The order of every computation's instructions.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Schedule {
    pub(crate) seqs: Vec<Option<Vec<InstId>>>,
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
}
