//! The schedulers' memory model: what each instruction allocates and which buffers it keeps
//! alive, one computation at a time, and the simulated peak of an order.
//!
//! Every array leaf an instruction defines ([`crate::views::Def`]: kernels, loop state, branch
//! outputs, call results) is a buffer of its leaf's size; views (tuples, `get-tuple-element`,
//! row-major bitcasts and reshapes, copies) name their operands' buffers; parameters and
//! constants cost nothing (they live outside the computation's temporaries). An instruction
//! *uses* the buffers behind its operands (a `get-tuple-element` only those of its element), and
//! a buffer is freed once every user has run, unless it is behind the computation's root.
//! Called computations are not looked into: a `while`, `conditional` or `call` costs its result.
//!
//! The model is built for the whole module in one linear sweep, as flat arrays indexed by
//! instruction id; each computation's buffers have contiguous ids, so per-computation work
//! (schedulers, simulation) uses arrays the size of the computation, not of the module.

use axle_ir::entity::{dense_map, SecondaryMap};
use axle_ir::{CompId, InstId, Module};

use crate::dep_graph::DepGraph;
use crate::leaves::ShapeLeaves;
use crate::rules::HloRules;
use crate::views::{def_kind, Def};

/// Buffers defined and used by every instruction, with their sizes and users.
#[derive(Clone, Debug, Default)]
pub struct MemoryModel {
    /// Per instruction: the range of `defs` it defines.
    def_range: SecondaryMap<InstId, (u32, u32)>,
    defs: Vec<u32>,
    /// Per instruction: the range of `uses` (distinct buffers behind its operands).
    use_range: SecondaryMap<InstId, (u32, u32)>,
    uses: Vec<u32>,
    /// Per buffer: its size, whether it is held by its computation's root, its users (CSR).
    bytes: Vec<u64>,
    pinned: Vec<bool>,
    user_off: Vec<u32>,
    users: Vec<InstId>,
    /// Per computation: its buffers' ids, `(first, count)` (each computation's are contiguous).
    comp_bufs: SecondaryMap<CompId, (u32, u32)>,
}

impl MemoryModel {
    /// The model of every computation of `m`, whose dependency graph is `graph`.
    pub fn new(m: &Module, graph: &DepGraph) -> MemoryModel {
        let cap = m.inst_capacity();
        let table = ShapeLeaves::new(m);
        let mut mm = MemoryModel {
            def_range: dense_map(cap, (0, 0)),
            use_range: dense_map(cap, (0, 0)),
            comp_bufs: dense_map(m.comp_capacity(), (0, 0)),
            ..Default::default()
        };
        // Per instruction: its leaves as a range of `pool` (views share their operand's).
        let mut leaf_range: SecondaryMap<InstId, (u32, u32)> = dense_map(cap, (0, 0));
        let mut pool: Vec<u32> = Vec::with_capacity(cap);
        let by_comp = m.insts_by_comp();
        let mut scratch: Vec<u32> = Vec::new();
        let mut state = vec![0u8; cap];
        for c in m.computations() {
            let first = mm.bytes.len() as u32;
            for i in graph.post_order(&by_comp[c], &mut state) {
                let kind = def_kind(m, i, &HloRules);
                let ops = m.operands(i);
                let shape = m.shape_id(i);
                let fresh = |mm: &mut MemoryModel, pool: &mut Vec<u32>, cost: bool| {
                    let start = pool.len() as u32;
                    let d0 = mm.defs.len() as u32;
                    for &b in table.bytes(shape) {
                        let v = mm.bytes.len() as u32;
                        mm.bytes.push(if cost { b } else { 0 });
                        mm.pinned.push(!cost);
                        pool.push(v);
                        mm.defs.push(v);
                    }
                    mm.def_range[i] = (d0, mm.defs.len() as u32 - d0);
                    (start, pool.len() as u32 - start)
                };
                let range = match kind {
                    Def::Parameter | Def::Constant => fresh(&mut mm, &mut pool, false),
                    Def::Fresh | Def::CalleeRoot | Def::Steps | Def::While | Def::Conditional => {
                        fresh(&mut mm, &mut pool, true)
                    }
                    Def::First => ops.first().map_or((0, 0), |o| leaf_range[*o]),
                    Def::Element(k) => match ops.first() {
                        Some(&o) => {
                            let (s, _) = leaf_range[o];
                            match table.element(m, m.shape_id(o), k) {
                                Some((off, n)) => (s + off, n),
                                None => (0, 0),
                            }
                        }
                        None => (0, 0),
                    },
                    Def::Operands => {
                        if ops.len() == 1 {
                            leaf_range[ops[0]]
                        } else {
                            let start = pool.len() as u32;
                            for o in ops {
                                let (s, n) = leaf_range[*o];
                                pool.extend_from_within(s as usize..(s + n) as usize);
                            }
                            (start, pool.len() as u32 - start)
                        }
                    }
                };
                leaf_range[i] = range;
                // Uses: the buffers behind the operands (a get-tuple-element's element only).
                scratch.clear();
                if let Def::Element(_) = kind {
                    let (s, n) = range;
                    scratch.extend_from_slice(&pool[s as usize..(s + n) as usize]);
                } else {
                    for o in ops {
                        let (s, n) = leaf_range[*o];
                        scratch.extend_from_slice(&pool[s as usize..(s + n) as usize]);
                    }
                }
                scratch.sort_unstable();
                scratch.dedup();
                let u0 = mm.uses.len() as u32;
                mm.uses.extend_from_slice(&scratch);
                mm.use_range[i] = (u0, scratch.len() as u32);
            }
            let root = m.root(c);
            if !root.is_none() && root.index() < cap {
                let (s, n) = leaf_range[root];
                for &v in &pool[s as usize..(s + n) as usize] {
                    mm.pinned[v as usize] = true;
                }
            }
            mm.comp_bufs[c] = (first, mm.bytes.len() as u32 - first);
        }
        // Users per buffer (CSR), in instruction id order.
        let nv = mm.bytes.len();
        let mut off = vec![0u32; nv + 1];
        for &v in &mm.uses {
            off[v as usize + 1] += 1;
        }
        for k in 0..nv {
            off[k + 1] += off[k];
        }
        let mut fill = off.clone();
        let mut users = vec![InstId::NONE; mm.uses.len()];
        for i in (0..cap).map(InstId::new) {
            let (s, n) = mm.use_range[i];
            for &v in &mm.uses[s as usize..(s + n) as usize] {
                users[fill[v as usize] as usize] = i;
                fill[v as usize] += 1;
            }
        }
        mm.user_off = off;
        mm.users = users;
        mm
    }

    /// The buffers `i` defines.
    pub fn defs(&self, i: InstId) -> &[u32] {
        let (s, n) = self.def_range[i];
        &self.defs[s as usize..(s + n) as usize]
    }

    /// The distinct buffers behind `i`'s operands.
    pub fn uses(&self, i: InstId) -> &[u32] {
        let (s, n) = self.use_range[i];
        &self.uses[s as usize..(s + n) as usize]
    }

    /// The size of buffer `v` (0 for parameters and constants).
    pub fn bytes(&self, v: u32) -> u64 {
        self.bytes[v as usize]
    }

    /// Whether buffer `v` is never freed (behind the root, or a parameter or constant).
    pub fn pinned(&self, v: u32) -> bool {
        self.pinned[v as usize]
    }

    /// The instructions that use buffer `v`.
    pub fn users(&self, v: u32) -> &[InstId] {
        &self.users[self.user_off[v as usize] as usize..self.user_off[v as usize + 1] as usize]
    }

    /// The bytes `i` allocates (saturating: each size fits in i64, a sum of several may not).
    pub fn defined_bytes(&self, i: InstId) -> u64 {
        self.defs(i)
            .iter()
            .fold(0u64, |a, &v| a.saturating_add(self.bytes(v)))
    }

    /// The buffers of computation `c`: ids `first..first + count`.
    pub fn comp_buffers(&self, c: CompId) -> (u32, u32) {
        self.comp_bufs[c]
    }

    /// The peak of live bytes when computation `c`'s instructions run in `order` (all of them,
    /// operands first), saturating at `u64::MAX`: every buffer's size fits in i64, but a hostile
    /// module's live bytes together need not, so they are summed in 128 bits.
    pub fn simulate(&self, c: CompId, order: &[InstId]) -> u64 {
        let (first, count) = self.comp_buffers(c);
        let mut remaining = vec![u32::MAX; count as usize];
        let mut mem = 0u128;
        let mut peak = 0u128;
        for &i in order {
            for &v in self.defs(i) {
                mem += u128::from(self.bytes(v));
            }
            peak = peak.max(mem);
            for &v in self.uses(i) {
                let r = &mut remaining[(v - first) as usize];
                if *r == u32::MAX {
                    *r = self.users(v).len() as u32;
                }
                *r -= 1;
                if *r == 0 && !self.pinned(v) {
                    mem -= u128::from(self.bytes(v));
                }
            }
            for &v in self.defs(i) {
                if self.users(v).is_empty() && !self.pinned(v) {
                    mem -= u128::from(self.bytes(v));
                }
            }
        }
        u64::try_from(peak).unwrap_or(u64::MAX)
    }
}
