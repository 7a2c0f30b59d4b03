//! `batch-split`: a chain of batched work whose intermediates are far larger than what goes in
//! and out of it runs one batch slice at a time, so only one slice of each intermediate is
//! live at once.
//!
//! Multi-head attention is the model case: `scores = dot(q, k)` over `[heads, seq, d]` operands
//! is `[heads, seq, seq]`, a softmax over its rows, then `dot(probs, v)` back to
//! `[heads, seq, d]`. No schedule of the batched instructions keeps less than all heads' scores
//! live, however the buffers are placed. Split along the head dimension, each head's chain is
//! independent; the memory scheduler runs them one after another and the buffer assignment
//! gives every head's scores the same memory.
//!
//! A *region* grows from a seed, a `dot` with batch dimensions, through its users (in
//! topological order) while every member keeps a *batch dimension* of the seed's first batch
//! size `B`, found by these rules (anything else ends the region there):
//! - element-wise ops (scalar operands pass through), `broadcast`, `transpose`, a `reshape` that
//!   keeps the dimension whole, a single-input `reduce` that keeps it, and a `dot` where it is a
//!   batch dimension (the other operand is sliced along its matching batch dimension) or a free
//!   dimension (the other operand is used whole);
//! - every operand from outside the region must not depend on the seed (a bounded backward
//!   search; beyond the bound it counts as dependent), so the rewrite makes no cycle;
//! - no member has or is a control dependency;
//! - no member belongs to a region grown before (seeds in program order): regions are
//!   disjoint, since each rewrite clones and removes its own members.
//!
//! The region is split when its largest *internal* value (one only region members read) is at
//! least `min_bytes` and larger than all of its *exits* (values read outside, or the root)
//! together, and `B <= max_slices`. Each slice takes `w` batch indices: the largest divisor
//! `w < B` of `B` whose slice keeps the largest internal value within `slice_bytes` and still
//! above the exits' bytes, else 1 (fewer, larger slices keep the batched GEMMs and kernels
//! larger; `slice_bytes=0` gives one index per slice). The rewrite clones every
//! member `B / w` times with the batch dimension of size `w` (same rank, attributes and
//! layouts, so every dimension number stays valid), slicing outside operands at
//! `[h*w, h*w+w)` (through `broadcast`, `transpose`, `reshape`
//! (also one that splits a dimension: a wider range of it) and `slice` to their operands, so a
//! slice reads its elements where they are and nothing is copied whole first) and concatenates
//! each exit's `B` slices along its batch dimension in place of the exit. Members are numbered
//! in the original order, so the result is deterministic.
//!
//! Counters: `split` (regions split), `slices` (batch slices made).
//!
//! Pre-conditions: a valid module. Post-conditions: the same values (each slice computes the
//! same elements as before, in the same order within the slice); the original members are gone.

use std::borrow::Cow;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

use hashbrown::{HashMap, HashSet};

use axle_analysis::Users;
use axle_ir::entity::{dense_map, SecondaryMap};
use axle_ir::{
    ArrayShape, Attr, AttrKey, AttrValue, Changed, InstId, Module, Opcode, OptKind, OptSpec, Pass,
    PassCx, PassError, Shape,
};

use crate::dep_graph::post_order_from;

/// The options of `batch-split`.
pub const OPTIONS: &[OptSpec] = &[
    OptSpec {
        name: "min_bytes",
        kind: OptKind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "4194304",
        doc: "the fewest bytes of the largest intermediate of a region for a split",
    },
    OptSpec {
        name: "slice_bytes",
        kind: OptKind::Int {
            min: 0,
            max: i64::MAX,
        },
        default: "2097152",
        doc: "the most bytes of a slice's largest intermediate: batch indices are grouped into \
              the fewest slices that keep it (0: one batch index per slice)",
    },
    OptSpec {
        name: "max_slices",
        kind: OptKind::Int { min: 2, max: 4096 },
        default: "64",
        doc: "the largest batch size a region is split into",
    },
];

/// How many instructions the search for a dependence on the seed visits before it gives up
/// (and counts the operand as dependent).
const SEARCH_LIMIT: usize = 4096;

/// The `batch-split` pass.
#[derive(Clone, Copy, Debug)]
pub struct BatchSplit {
    /// The fewest bytes of a region's largest internal value for a split.
    pub min_bytes: i64,
    /// The most bytes of one slice's largest internal value: a slice takes the largest
    /// divisor of the batch size of batch indices that keeps it (0 or less: one index).
    pub slice_bytes: i64,
    /// The largest batch size split.
    pub max_slices: i64,
}

impl Default for BatchSplit {
    fn default() -> Self {
        BatchSplit {
            min_bytes: 1 << 22,
            slice_bytes: 1 << 21,
            max_slices: 64,
        }
    }
}

/// One member of a region: its batch dimension and, per operand, the dimension it is sliced
/// along (`None`: used whole).
struct Member {
    id: InstId,
    bdim: usize,
    slice: Vec<Option<usize>>,
}

/// A region found by [`BatchSplit::grow`].
struct Region {
    /// The batch size.
    b: i64,
    /// Members in topological order.
    members: Vec<Member>,
    /// Members read outside the region (or roots), in member order.
    exits: Vec<usize>,
}

/// The static array shape of `id`, if it has one.
fn static_array(m: &Module, id: InstId) -> Option<&ArrayShape> {
    let a = m.array_shape(id)?;
    (!a.dynamic.iter().any(|&d| d)).then_some(a)
}

fn ints<'m>(m: &'m Module, id: InstId, key: &AttrKey) -> &'m [i64] {
    m.ints_attr(id, key).unwrap_or(&[])
}

/// The batch dimension of `u`'s result and the slicing of its operands, given the batch
/// dimension `bdim(o)` of each operand in the region; `None` where `u` cannot join.
fn map_member(
    m: &Module,
    u: InstId,
    bdim: &dyn Fn(InstId) -> Option<usize>,
) -> Option<(usize, Vec<Option<usize>>)> {
    let ops = m.operands(u);
    let out = static_array(m, u)?;
    let rank = out.dims.len();
    let first = ops
        .iter()
        .enumerate()
        .find_map(|(k, &o)| Some((k, bdim(o)?)))?;
    let op = m.opcode(u);
    let (out_b, slice): (usize, Vec<Option<usize>>) =
        if op.is_elementwise() || matches!(op, Opcode::Convert | Opcode::Copy) {
            let d = first.1;
            let slice = ops
                .iter()
                .map(|&o| match static_array(m, o) {
                    Some(a) if a.dims.len() == rank => Some(d),
                    _ => None,
                })
                .collect();
            (d, slice)
        } else {
            match op {
                Opcode::Broadcast => {
                    let bd = ints(m, u, &AttrKey::Dimensions);
                    (
                        usize::try_from(*bd.get(first.1)?).ok()?,
                        vec![Some(first.1)],
                    )
                }
                Opcode::Transpose => {
                    let perm = ints(m, u, &AttrKey::Dimensions);
                    let p = perm.iter().position(|&p| p == first.1 as i64)?;
                    (p, vec![Some(first.1)])
                }
                Opcode::Reshape => {
                    let d = first.1;
                    let id = &static_array(m, ops[0])?.dims;
                    (reshape_kept(id, &out.dims, d)?, vec![Some(d)])
                }
                Opcode::Reduce => {
                    if ops.len() != 2 || first.0 != 0 {
                        return None;
                    }
                    let d = first.1;
                    let rd = ints(m, u, &AttrKey::Dimensions);
                    if rd.contains(&(d as i64)) {
                        return None;
                    }
                    let below = rd.iter().filter(|&&r| r < d as i64).count();
                    (d - below, vec![Some(d), None])
                }
                Opcode::Dot => {
                    let lb = ints(m, u, &AttrKey::LhsBatchDims);
                    let rb = ints(m, u, &AttrKey::RhsBatchDims);
                    let lc = ints(m, u, &AttrKey::LhsContractingDims);
                    let rc = ints(m, u, &AttrKey::RhsContractingDims);
                    let lrank = static_array(m, ops[0])?.dims.len();
                    let rrank = static_array(m, ops[1])?.dims.len();
                    let free = |rank: usize, b: &[i64], c: &[i64]| -> Vec<usize> {
                        (0..rank)
                            .filter(|&i| !b.contains(&(i as i64)) && !c.contains(&(i as i64)))
                            .collect()
                    };
                    let (lfree, rfree) = (free(lrank, lb, lc), free(rrank, rb, rc));
                    let d = first.1 as i64;
                    let (bat, own, other) = if first.0 == 0 {
                        (lb, &lfree, rb)
                    } else {
                        (rb, &rfree, lb)
                    };
                    let (out_b, mine, theirs) = if let Some(i) = bat.iter().position(|&x| x == d) {
                        (i, first.1, Some(usize::try_from(other[i]).ok()?))
                    } else {
                        let j = own.iter().position(|&x| x == first.1)?;
                        let base = lb.len() + if first.0 == 0 { 0 } else { lfree.len() };
                        (base + j, first.1, None)
                    };
                    let slice = if first.0 == 0 {
                        vec![Some(mine), theirs]
                    } else {
                        vec![theirs, Some(mine)]
                    };
                    (out_b, slice)
                }
                _ => return None,
            }
        };
    if out_b >= rank || slice.len() != ops.len() {
        return None;
    }
    // Operands in the region must be sliced along their own batch dimension.
    for (k, &o) in ops.iter().enumerate() {
        if let Some(b) = bdim(o) {
            if slice[k] != Some(b) {
                return None;
            }
        }
    }
    Some((out_b, slice))
}

/// The topological position of every instruction (`u32::MAX` where unplaced).
fn positions(m: &Module) -> SecondaryMap<InstId, u32> {
    let n = m.inst_capacity();
    let mut state = vec![0u8; n];
    let mut pos = dense_map(n, u32::MAX);
    let mut next = 0u32;
    for c in m.computations() {
        let starts = std::iter::once(m.root(c)).chain(m.comp_insts(c));
        let order = post_order_from(
            starts,
            |i| i.index(),
            &mut state,
            |i| {
                let cp = m.control_predecessors(i);
                if cp.is_empty() {
                    Cow::Borrowed(m.operands(i))
                } else {
                    Cow::Owned(m.operands(i).iter().chain(cp).copied().collect())
                }
            },
        );
        for i in order {
            pos[i] = next;
            next += 1;
        }
    }
    pos
}

impl BatchSplit {
    /// Whether `o` may depend on `seed`: a backward search from `o` that stops at instructions
    /// placed before the seed.
    fn may_depend(
        m: &Module,
        pos: &SecondaryMap<InstId, u32>,
        seed: InstId,
        o: InstId,
        memo: &mut HashMap<InstId, bool>,
    ) -> bool {
        if let Some(&d) = memo.get(&o) {
            return d;
        }
        let limit = pos[seed];
        let mut seen: HashSet<InstId> = HashSet::new();
        let mut stack = vec![o];
        let mut found = false;
        while let Some(i) = stack.pop() {
            if i == seed {
                found = true;
                break;
            }
            if pos[i] < limit || !seen.insert(i) {
                continue;
            }
            if seen.len() > SEARCH_LIMIT {
                found = true;
                break;
            }
            stack.extend(
                m.operands(i)
                    .iter()
                    .chain(m.control_predecessors(i))
                    .copied(),
            );
        }
        memo.insert(o, found);
        found
    }

    /// The region grown from `seed`, whether or not it is worth splitting. Instructions in
    /// `taken` (members of regions grown before) never join it: a region's rewrite removes
    /// its members, so one instruction in two regions would be cloned by both and removed
    /// under the other's clones.
    fn grow(
        &self,
        m: &Module,
        users: &Users,
        pos: &SecondaryMap<InstId, u32>,
        ctrl: &HashSet<InstId>,
        taken: &HashSet<InstId>,
        seed: InstId,
    ) -> Option<Region> {
        let b = *static_array(m, seed)?.dims.first()?;
        if ints(m, seed, &AttrKey::LhsBatchDims).is_empty() || b < 2 || b > self.max_slices {
            return None;
        }
        let (lb, rb) = (
            ints(m, seed, &AttrKey::LhsBatchDims)[0],
            ints(m, seed, &AttrKey::RhsBatchDims)[0],
        );
        let mut memo = HashMap::new();
        let mut bdims: HashMap<InstId, usize> = HashMap::new();
        let mut members: Vec<Member> = Vec::new();
        let external_ok =
            |o: InstId, memo: &mut HashMap<InstId, bool>| !Self::may_depend(m, pos, seed, o, memo);
        let seed_ops = m.operands(seed);
        if ctrl.contains(&seed)
            || !m.control_predecessors(seed).is_empty()
            || seed_ops.iter().any(|&o| !external_ok(o, &mut memo))
        {
            return None;
        }
        bdims.insert(seed, 0);
        members.push(Member {
            id: seed,
            bdim: 0,
            slice: vec![usize::try_from(lb).ok(), usize::try_from(rb).ok()],
        });
        let mut heap: BinaryHeap<Reverse<(u32, InstId)>> = BinaryHeap::new();
        let mut queued: HashSet<InstId> = HashSet::new();
        let push = |heap: &mut BinaryHeap<Reverse<(u32, InstId)>>,
                    queued: &mut HashSet<InstId>,
                    of: InstId| {
            for &u in users.users(of) {
                if queued.insert(u) {
                    heap.push(Reverse((pos[u], u)));
                }
            }
        };
        push(&mut heap, &mut queued, seed);
        while let Some(Reverse((_, u))) = heap.pop() {
            if taken.contains(&u) || ctrl.contains(&u) || !m.control_predecessors(u).is_empty() {
                continue;
            }
            let Some((out_b, slice)) = map_member(m, u, &|o| bdims.get(&o).copied()) else {
                continue;
            };
            if static_array(m, u).map(|a| a.dims[out_b]) != Some(b) {
                continue;
            }
            let ops = m.operands(u);
            let outside_ok = ops.iter().zip(&slice).all(|(&o, s)| {
                if bdims.contains_key(&o) {
                    return true;
                }
                let sized = match s {
                    Some(d) => static_array(m, o).and_then(|a| a.dims.get(*d)) == Some(&b),
                    None => true,
                };
                sized && external_ok(o, &mut memo)
            });
            if !outside_ok {
                continue;
            }
            bdims.insert(u, out_b);
            members.push(Member {
                id: u,
                bdim: out_b,
                slice,
            });
            push(&mut heap, &mut queued, u);
        }
        let root = m.root(m.parent(seed));
        let exits = members
            .iter()
            .enumerate()
            .filter(|(_, mb)| {
                mb.id == root || users.users(mb.id).iter().any(|u| !bdims.contains_key(u))
            })
            .map(|(k, _)| k)
            .collect();
        Some(Region { b, members, exits })
    }

    /// How many batch indices each slice of `r` takes, when splitting `r` lowers the memory it
    /// needs (`None`: it does not, or not by enough): the largest divisor `w < b` of the batch
    /// size whose slice keeps the largest internal value within `slice_bytes` and above the
    /// exits' bytes (1 when none does).
    fn slice_width(&self, m: &Module, r: &Region) -> Option<i64> {
        let bytes = |id: InstId| static_array(m, id).and_then(|a| a.byte_size()).unwrap_or(0);
        let exit_bytes: u64 = r.exits.iter().map(|&k| bytes(r.members[k].id)).sum();
        let internal = (0..r.members.len())
            .filter(|k| !r.exits.contains(k))
            .map(|k| bytes(r.members[k].id))
            .max()
            .unwrap_or(0);
        if internal < self.min_bytes.max(0) as u64 || internal <= exit_bytes {
            return None;
        }
        let limit = self.slice_bytes.max(0) as u64;
        let per_index = internal / r.b as u64;
        let w = (2..r.b)
            .rev()
            .find(|&w| {
                r.b % w == 0
                    && per_index.saturating_mul(w as u64) <= limit
                    && per_index.saturating_mul(w as u64) > exit_bytes
            })
            .unwrap_or(1);
        Some(w)
    }
}

/// The dimension of reshape `x -> out`'s result that keeps `x`'s dimension `d` whole (the same
/// size, with as many elements before it).
fn reshape_kept(x: &[i64], out: &[i64], d: usize) -> Option<usize> {
    let before: i64 = x[..d].iter().product();
    let mut acc = 1i64;
    out.iter().position(|&s| {
        let here = acc == before && s == x[d];
        acc = acc.saturating_mul(s);
        here
    })
}

/// `a` with dimension `d` of size `w` (same element type and rank).
fn narrowed(a: &ArrayShape, d: usize, w: i64) -> Shape {
    let mut dims = a.dims.to_vec();
    dims[d] = w;
    Shape::Array(ArrayShape::new(a.ty, &dims))
}

/// Where the elements of `out`'s dimension `d` come from in reshape `x -> out`: dimension `j`
/// of `x` and how many of its indices one index of `d` spans (`out`'s dimensions `d..=e`
/// split `x`'s dimension `j`, with as many elements before them). `None` when `d` does not
/// lead such a split (or a dimension kept whole, a span of 1).
fn reshape_source(x: &[i64], out: &[i64], d: usize) -> Option<(usize, i64)> {
    let before: i64 = out[..d].iter().product();
    let mut acc = 1i64;
    for (j, &s) in x.iter().enumerate() {
        if acc == before && s > 0 {
            let mut inner = 1i64;
            for &t in &out[d + 1..] {
                if out[d].saturating_mul(inner) >= s {
                    break;
                }
                inner = inner.saturating_mul(t);
            }
            if out[d].saturating_mul(inner) == s {
                return Some((j, inner));
            }
        }
        acc = acc.saturating_mul(s);
    }
    None
}

/// Indices `[h * w, h * w + w)` of outside value `o` along `d`. A layout op is sliced through
/// to its operand, so each slice reads what it needs where it is and nothing whole is copied
/// first: a `broadcast` (rebuilt smaller when `d` is a dimension it adds), a `transpose`, a
/// `reshape` where `d` keeps or leads the split of one operand dimension (a wider range of
/// it), and a `slice` (its bounds narrowed to the range). Anything else gets a `slice`.
fn slice_outside(
    m: &mut Module,
    o: InstId,
    d: usize,
    (h, w): (i64, i64),
    cache: &mut HashMap<(InstId, usize, i64, i64), InstId>,
) -> InstId {
    if let Some(&s) = cache.get(&(o, d, h, w)) {
        return s;
    }
    let comp = m.parent(o);
    let a = static_array(m, o)
        .expect("region operands are static arrays")
        .clone();
    let shape = m.intern_shape(narrowed(&a, d, w));
    let layout = m.layout_id(o);
    let x = m.operands(o).first().copied();
    let xdims = x
        .and_then(|x| static_array(m, x))
        .map(|xa| xa.dims.to_vec());
    // For the layout ops sliced through: the operand dimension and range `d`'s range comes
    // from (`None`: a dimension the broadcast adds).
    let through: Option<Option<(usize, (i64, i64))>> = match (m.opcode(o), &xdims) {
        (Opcode::Broadcast, Some(_)) => {
            let bd = ints(m, o, &AttrKey::Dimensions);
            Some(bd.iter().position(|&p| p == d as i64).map(|j| (j, (h, w))))
        }
        (Opcode::Transpose, Some(_)) => {
            let perm = ints(m, o, &AttrKey::Dimensions);
            perm.get(d)
                .and_then(|&p| usize::try_from(p).ok())
                .map(|j| Some((j, (h, w))))
        }
        (Opcode::Reshape, Some(xd)) => {
            reshape_source(xd, &a.dims, d).map(|(j, span)| Some((j, (h, w.saturating_mul(span)))))
        }
        _ => None,
    };
    let made = match (through, x) {
        (Some(from), Some(x)) => {
            let x = match from {
                Some((j, range)) => slice_outside(m, x, j, range, cache),
                None => x,
            };
            let mut attrs: Vec<Attr> = m.attrs(o).to_vec();
            let op = m.opcode(o);
            m.push_inst_parts(comp, op, shape, layout, &[x], &mut attrs, "")
        }
        _ => {
            let of_slice = match (m.opcode(o), m.attr(o, &AttrKey::Slice)) {
                (Opcode::Slice, Some(AttrValue::Slice(b))) if b.len() == a.dims.len() => {
                    let mut b = b.to_vec();
                    let [start, _, stride] = b[d];
                    let first = start + h * w * stride;
                    b[d] = [first, first + (w - 1) * stride + 1, stride];
                    Some((m.operands(o)[0], b))
                }
                _ => None,
            };
            let (src, bounds) = of_slice.unwrap_or_else(|| {
                let b = a.dims.iter().enumerate();
                let all = |(k, &s): (usize, &i64)| {
                    if k == d {
                        [h * w, h * w + w, 1]
                    } else {
                        [0, s, 1]
                    }
                };
                (o, b.map(all).collect())
            });
            let mut attrs: Vec<Attr> = vec![(AttrKey::Slice, AttrValue::Slice(bounds.into()))];
            m.push_inst_parts(comp, Opcode::Slice, shape, layout, &[src], &mut attrs, "")
        }
    };
    cache.insert((o, d, h, w), made);
    made
}

impl Pass for BatchSplit {
    fn run(&mut self, m: &mut Module, cx: &mut PassCx<'_>) -> Result<Changed, PassError> {
        let seeds: Vec<InstId> = m
            .live_ids()
            .into_iter()
            .filter(|&i| {
                m.opcode(i) == Opcode::Dot
                    && !ints(m, i, &AttrKey::LhsBatchDims).is_empty()
                    && static_array(m, i).and_then(|a| a.byte_size()).unwrap_or(0)
                        >= self.min_bytes.max(0) as u64 / self.max_slices.max(1) as u64
            })
            .collect();
        if seeds.is_empty() {
            return Ok(false);
        }
        let users = Users::new(m);
        let pos = positions(m);
        let ctrl: HashSet<InstId> = m
            .live_ids()
            .into_iter()
            .flat_map(|i| m.control_predecessors(i).to_vec())
            .collect();
        let mut seeds = seeds;
        seeds.sort_by_key(|&i| (pos[i], i));
        // Members of every region tried: a seed inside one is not tried again (each
        // instruction is looked at by one region, so the pass stays linear).
        let mut taken: HashSet<InstId> = HashSet::new();
        let mut plans: Vec<(Region, i64)> = Vec::new();
        for &s in &seeds {
            if taken.contains(&s) {
                continue;
            }
            let Some(r) = self.grow(m, &users, &pos, &ctrl, &taken, s) else {
                continue;
            };
            taken.extend(r.members.iter().map(|mb| mb.id));
            if let Some(w) = self.slice_width(m, &r) {
                plans.push((r, w));
            }
        }
        if plans.is_empty() {
            return Ok(false);
        }
        let mut rw = m.rewriter();
        for (r, w) in plans {
            let m = rw.module_mut();
            let mut cache = HashMap::new();
            let slices = r.b / w;
            let mut clones: Vec<Vec<InstId>> = Vec::with_capacity(slices as usize);
            let index: HashMap<InstId, usize> = r
                .members
                .iter()
                .enumerate()
                .map(|(k, mb)| (mb.id, k))
                .collect();
            for h in 0..slices {
                let mut made: Vec<InstId> = Vec::with_capacity(r.members.len());
                for mb in &r.members {
                    let ops: Vec<InstId> = m
                        .operands(mb.id)
                        .to_vec()
                        .into_iter()
                        .zip(&mb.slice)
                        .map(|(o, s)| match (index.get(&o), s) {
                            (Some(&k), _) => made[k],
                            (None, Some(d)) => slice_outside(m, o, *d, (h, w), &mut cache),
                            (None, None) => o,
                        })
                        .collect();
                    let a = static_array(m, mb.id)
                        .expect("members are static arrays")
                        .clone();
                    let shape = m.intern_shape(narrowed(&a, mb.bdim, w));
                    let layout = m.layout_id(mb.id);
                    let comp = m.parent(mb.id);
                    let mut attrs: Vec<Attr> = m.attrs(mb.id).to_vec();
                    let op = m.opcode(mb.id);
                    made.push(m.push_inst_parts(comp, op, shape, layout, &ops, &mut attrs, ""));
                }
                clones.push(made);
            }
            let mut concats = Vec::with_capacity(r.exits.len());
            for &k in &r.exits {
                let e = r.members[k].id;
                let parts: Vec<InstId> = clones.iter().map(|c| c[k]).collect();
                let name = m.name(e).to_string();
                m.set_name(e, "");
                let mut attrs: Vec<Attr> = vec![(
                    AttrKey::Dimensions,
                    AttrValue::Ints(vec![r.members[k].bdim as i64].into()),
                )];
                let (shape, layout, comp) = (m.shape_id(e), m.layout_id(e), m.parent(e));
                let c = m.push_inst_parts(
                    comp,
                    Opcode::Concatenate,
                    shape,
                    layout,
                    &parts,
                    &mut attrs,
                    &name,
                );
                concats.push((e, c));
            }
            for (e, c) in concats {
                rw.replace_all_uses(e, c);
            }
            for (k, mb) in r.members.iter().enumerate() {
                if !r.exits.contains(&k) {
                    rw.remove(mb.id);
                }
            }
            cx.count("split", 1);
            cx.count("slices", slices as u64);
        }
        Ok(rw.finish())
    }
}
