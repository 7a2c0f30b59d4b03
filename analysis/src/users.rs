//! Users: the reverse edges of the operand graph as a CSR array, derived from a module and
//! cached by epoch (it implements [`axle_ir::Analysis`]).
//!
//! `users(i)` lists the live instructions that take `i` as an operand, in creation order, once
//! per use (an instruction using `i` twice appears twice). Building it is two sweeps over the
//! operand lists (count, then fill), linear in the module.

use axle_ir::entity::EntitySet;
use axle_ir::{Analysis, InstId, Module};

/// Users of every instruction, as compressed sparse rows indexed by instruction id.
#[derive(Clone, Debug, Default)]
pub struct Users {
    offsets: Vec<u32>,
    users: Vec<InstId>,
    is_root: EntitySet<InstId>,
}

impl Users {
    /// Computes the users of every live instruction of `m`.
    pub fn new(m: &Module) -> Users {
        let n = m.inst_capacity();
        let live = m.live_ids();
        let mut counts = vec![0u32; n + 1];
        for &i in &live {
            for &o in m.operands(i) {
                if !o.is_none() && o.index() < n {
                    counts[o.index() + 1] += 1;
                }
            }
        }
        for k in 1..=n {
            counts[k] += counts[k - 1];
        }
        let mut fill = counts.clone();
        let mut users = vec![InstId::NONE; counts[n] as usize];
        for &i in &live {
            for &o in m.operands(i) {
                if !o.is_none() && o.index() < n {
                    let slot = &mut fill[o.index()];
                    users[*slot as usize] = i;
                    *slot += 1;
                }
            }
        }
        let mut is_root = EntitySet::with_capacity(n);
        for c in m.computations() {
            let r = m.root(c);
            if !r.is_none() && r.index() < n {
                is_root.insert(r);
            }
        }
        Users {
            offsets: counts,
            users,
            is_root,
        }
    }

    /// The users of `i`, in creation order, once per use.
    pub fn users(&self, i: InstId) -> &[InstId] {
        let k = i.index();
        if k + 1 >= self.offsets.len() {
            return &[];
        }
        &self.users[self.offsets[k] as usize..self.offsets[k + 1] as usize]
    }

    /// Where the uses of `i` sit in the flat array of all uses ([`Users::all`]): a per-use
    /// side table aligned with it can be filled in parallel.
    pub fn range(&self, i: InstId) -> std::ops::Range<usize> {
        let k = i.index();
        if k + 1 >= self.offsets.len() {
            return 0..0;
        }
        self.offsets[k] as usize..self.offsets[k + 1] as usize
    }

    /// Every use, grouped by used instruction in id order (the users of instruction 0, then of
    /// instruction 1, ...).
    pub fn all(&self) -> &[InstId] {
        &self.users
    }

    /// The number of uses of `i` (operand slots that name it).
    pub fn use_count(&self, i: InstId) -> usize {
        self.users(i).len()
    }

    /// Whether `i` is the root of its computation.
    pub fn is_root(&self, i: InstId) -> bool {
        self.is_root.contains(i)
    }

    /// Whether `i` has exactly one use and is not a root: rewriting it cannot duplicate work.
    pub fn has_single_use(&self, i: InstId) -> bool {
        self.use_count(i) == 1 && !self.is_root(i)
    }
}

impl Analysis for Users {
    fn compute(m: &Module) -> Self {
        Users::new(m)
    }
}

/// [`Users`] computed on first use (thread-safe), for passes whose read phase needs users only
/// for the few instructions that reach a rule that asks.
pub struct LazyUsers<'m> {
    m: &'m Module,
    cell: std::sync::OnceLock<Users>,
}

impl<'m> LazyUsers<'m> {
    /// Users of `m`, not computed yet.
    pub fn new(m: &'m Module) -> LazyUsers<'m> {
        LazyUsers {
            m,
            cell: std::sync::OnceLock::new(),
        }
    }

    /// The users, computing them the first time.
    pub fn get(&self) -> &Users {
        self.cell.get_or_init(|| Users::new(self.m))
    }
}
