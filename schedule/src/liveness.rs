//! Buffer liveness: the positions of the [`Program`] at which each value's memory must hold it,
//! as a few closed intervals `[first, last]`.
//!
//! A value is live from where it is written to its last read. Reads are uses by instructions
//! (at their start; a `get-tuple-element` reads only its element; a fusion step reads what it
//! reaches, [`Program::step_reads`]; a called computation's parameter reads all of its leaves)
//! and roots (at their computation's end). A read inside a loop of a value written outside it counts at the loop's
//! end (the next iteration reads it again). Special values:
//! - a loop's state has a *head*, from the loop's start (where the initial value is copied in)
//!   to its last read in the condition or body, and a *tail*, from the body's end (where the
//!   next state is copied in) to the loop's end and its last read after the loop; between them
//!   the state's memory holds nothing (the old state is consumed, the new one not written);
//! - a conditional's outputs are written at the end of whichever branch runs (one point per
//!   branch: the branches never run together) and live from the conditional's end on;
//! - entry parameters and constants are live from position 0;
//! - a kernel's scratch is live at its instruction only.
//!
//! Intervals of one value are sorted and disjoint except that a head may end where the tail
//! begins (the body's root reads the state it replaces).

use axle_ir::entity::SecondaryMap;
use axle_ir::{CompId, InstId, Module, Opcode};

use crate::program::{Program, ValueId, ValueKind};

/// Live intervals of every value of a program.
#[derive(Clone, Debug, Default)]
pub struct Liveness {
    off: Vec<u32>,
    ivs: Vec<(u32, u32)>,
}

impl Liveness {
    /// The liveness of `p`'s values.
    pub fn new(m: &Module, p: &Program) -> Liveness {
        let nv = p.values().len();
        // Last read per value; loop state splits reads into head (`a`) and tail (`b`).
        let mut a: SecondaryMap<ValueId, u32> = SecondaryMap::with_capacity(nv);
        let mut b: SecondaryMap<ValueId, u32> = SecondaryMap::with_capacity(nv);
        let def_comp = |v: ValueId| -> CompId {
            match p.value(v).kind {
                ValueKind::Param(_) => p.entry(),
                _ => m.parent(p.value(v).inst),
            }
        };
        let mut read = |v: ValueId, pos: u32, comp: CompId| {
            let val = p.value(v);
            let own = (val.kind == ValueKind::LoopState).then_some(val.inst);
            let target = def_comp(v);
            let (mut c, mut q) = (comp, pos);
            while c != target {
                let site = p.caller(c);
                if site.is_none() {
                    break;
                }
                if m.opcode(site) == Opcode::While && Some(site) != own {
                    q = q.max(p.end(site));
                }
                c = m.parent(site);
            }
            match own {
                Some(w) if q < p.end(w) && q > p.start(w) => a[v] = a[v].max(q),
                _ => b[v] = b[v].max(q),
            }
        };
        for &j in p.sequence() {
            let here = p.start(j);
            let comp = m.parent(j);
            if m.opcode(j) == Opcode::GetTupleElement {
                for &v in p.leaves(j) {
                    read(v, here, comp);
                }
                continue;
            }
            if m.opcode(j) == Opcode::Parameter {
                // A called computation's parameter names its leaves where it starts: they
                // must hold their values there, even those nothing reads later.
                if comp != p.entry() {
                    for &v in p.leaves(j) {
                        read(v, here, comp);
                    }
                }
                continue;
            }
            let reads = p.step_reads(j).unwrap_or(m.operands(j));
            for &o in reads {
                for &v in p.leaves(o) {
                    read(v, here, comp);
                }
            }
        }
        for c in m.computations() {
            if !p.runs(c) {
                continue;
            }
            let root = m.root(c);
            for &v in p.leaves(root) {
                read(v, p.comp_end(c), c);
            }
        }
        let mut off = Vec::with_capacity(nv + 1);
        let mut ivs = Vec::with_capacity(nv + nv / 8);
        for (v, val) in p.values().iter() {
            off.push(ivs.len() as u32);
            let i = val.inst;
            match val.kind {
                ValueKind::Param(_) | ValueKind::Constant => ivs.push((0, b[v])),
                ValueKind::Defined => ivs.push((p.start(i), b[v].max(p.start(i)))),
                ValueKind::Scratch | ValueKind::ArenaScratch => ivs.push((p.start(i), p.start(i))),
                ValueKind::LoopState => {
                    let body_end = loop_body_end(m, p, i);
                    ivs.push((p.start(i), a[v].max(p.start(i))));
                    ivs.push((body_end, b[v].max(p.end(i))));
                }
                ValueKind::BranchOutput => {
                    for br in m.branch_computations(i).unwrap_or_default() {
                        let e = p.comp_end(br);
                        ivs.push((e, e));
                    }
                    ivs.push((p.end(i), b[v].max(p.end(i))));
                }
            }
        }
        off.push(ivs.len() as u32);
        Liveness { off, ivs }
    }

    /// The live intervals of `v`, sorted.
    pub fn intervals(&self, v: ValueId) -> &[(u32, u32)] {
        // `off` is a CSR index over the values, one longer than their number.
        let k = v.index();
        &self.ivs[self.off[k] as usize..self.off[k + 1] as usize]
    }

    /// The first and last live position of `v`.
    pub fn span(&self, v: ValueId) -> (u32, u32) {
        let iv = self.intervals(v);
        (
            iv.first().map_or(0, |x| x.0),
            iv.iter().map(|x| x.1).max().unwrap_or(0),
        )
    }
}

/// The end position of the body of `while` `w`.
pub fn loop_body_end(m: &Module, p: &Program, w: InstId) -> u32 {
    m.comp_attr(w, &axle_ir::AttrKey::Body)
        .map_or(p.end(w), |b| p.comp_end(b))
}
